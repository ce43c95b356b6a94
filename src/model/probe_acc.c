/* probe_acc.c — the accumulator of probe.h (MpProbeAcc): the table of its arrays and what goes
 * through it (allocation, freeing, reset, merge), the forward pass's hooks that add one
 * sequence's scores and probabilities, and the means and standard errors read from the sums.
 * Does not: read tokens (probe_tokens.c), test blocks (probe_block.c), save or load
 * (probe_ckpt.c), count recent triples (probe_recency.c, through the callbacks of MpProbeAcc).
 * Tested by: tests/test_model_probe.c, tests/test_model_probe_merge.c, tests/test_probe_rows.c.
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, nb blocks per side,
 * nlen lengths of --recency.
 */
#include "model/probe.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"      /* mp_try_calloc, mp_size_mul, mp_thread_num */
#include "kernels/posmap.h" /* mp_posmap_diagnorm: per-sequence residues */

/* ================================================================ the table of arrays */

/* An array's size in doubles, in terms of the accumulator's dimensions. */
typedef enum ArrShape {
    SH_LSS,     /* [L, S, S] */
    SH_LHSS,    /* [L, H, S, S] */
    SH_LBB,     /* [L, nb, nb] */
    SH_LH,      /* [L, H] */
    SH_LHS,     /* [L, H, S] */
    SH_LN,      /* [L, nlen] */
    SH_NL1616,  /* [nlen, L, 16, 16] (not by layer slot) */
} ArrShape;

/* One row per array. Every array is double, merged by addition and checkpointed (see probe.h);
 * per_head: only when per_head; check: on checkpoint load (MpProbeArray.check). The order is the
 * checkpoint's: do not reorder (checkpoint versions 4 and 5). */
typedef struct ArrSpec {
    const char *name;
    size_t off; /* offsetof(MpProbeAcc, the double * field) */
    ArrShape shape;
    MpProbeGroup group;
    int per_head, check;
} ArrSpec;

#define ARR(f, sh, g, ph, ck) {#f, offsetof(MpProbeAcc, f), sh, MP_PROBE_GROUP_##g, ph, ck}
static const ArrSpec probe_arrays[] = {
    ARR(sum, SH_LSS, BASE, 0, 1),          ARR(sumsq, SH_LSS, BASE, 0, 2),      ARR(bsum, SH_LBB, BASE, 0, 1),
    ARR(bsumsq, SH_LBB, BASE, 0, 2),       ARR(sum_heads, SH_LHSS, BASE, 1, 1), ARR(sumsq_heads, SH_LHSS, BASE, 1, 0),
    ARR(psum, SH_LSS, PROBS, 0, 0),        ARR(psum_heads, SH_LHSS, PROBS, 1, 0), ARR(sink, SH_LH, PROBS, 0, 0),
    ARR(entropy, SH_LH, PROBS, 0, 0),      ARR(rp_row, SH_LHS, RECENCY, 0, 0),  ARR(rp_lsq, SH_LN, RECENCY, 0, 0),
    ARR(rp_hsq, SH_LH, RECENCY, 0, 0),     ARR(lbsum, SH_NL1616, RECENCY, 0, 0), ARR(lbsumsq, SH_NL1616, RECENCY, 0, 0),
};
#undef ARR
#define N_ARRAYS ((int)(sizeof probe_arrays / sizeof probe_arrays[0]))
_Static_assert(sizeof probe_arrays / sizeof probe_arrays[0] <= MP_PROBE_MAX_ARRAYS, "MP_PROBE_MAX_ARRAYS too small");

static double **arr_field(const MpProbeAcc *a, const ArrSpec *s) { return (double **)((char *)a + s->off); }

static size_t arr_len(const MpProbeAcc *a, ArrShape sh) {
    const size_t L = (size_t)a->L, H = (size_t)a->H, S = (size_t)a->S;
    switch (sh) {
    case SH_LSS: return L * S * S;
    case SH_LHSS: return L * H * S * S;
    case SH_LBB: return L * (size_t)a->nb * (size_t)a->nb;
    case SH_LH: return L * H;
    case SH_LHS: return L * H * S;
    case SH_LN: return L * (size_t)a->nlen;
    case SH_NL1616: return (size_t)a->nlen * L * 16 * 16;
    }
    return 0;
}

/* 1 when a has array s: its group is on (the base always) and, per head only, per_head. */
static int arr_on(const MpProbeAcc *a, const ArrSpec *s) {
    const int group_on = s->group == MP_PROBE_GROUP_BASE || (s->group == MP_PROBE_GROUP_PROBS && a->probs) ||
                         (s->group == MP_PROBE_GROUP_RECENCY && a->recency);
    return group_on && (!s->per_head || a->per_head);
}

int mp_probe_acc_alloc(MpProbeAcc *a, MpProbeGroup g) {
    int ok = 1;
    for (int k = 0; k < N_ARRAYS; k++) {
        const ArrSpec *s = &probe_arrays[k];
        if (s->group != g || (s->per_head && !a->per_head)) continue;
        double **p = arr_field(a, s);
        *p = mp_try_calloc(arr_len(a, s->shape), sizeof(double));
        ok = ok && *p;
    }
    return ok ? MP_OK : MP_ERR;
}

int mp_probe_acc_arrays(const MpProbeAcc *a, MpProbeArray *out) {
    int n = 0;
    for (int k = 0; k < N_ARRAYS; k++) {
        const ArrSpec *s = &probe_arrays[k];
        if (!arr_on(a, s)) continue;
        double *p = *arr_field(a, s);
        MP_ASSERT(p);
        out[n++] = (MpProbeArray){p, arr_len(a, s->shape), s->name, s->shape != SH_NL1616, s->check};
    }
    return n;
}

/* ================================================================ accumulator */

int mp_probe_acc_init(MpProbeAcc *a, const unsigned char *layers_mask, int n_model_layers, int H, int S,
                      int per_head, int causal, int threads, MpErr *e) {
    memset(a, 0, sizeof *a);
    if (n_model_layers > 256) return mp_err_set(e, "more than 256 layers are not supported");
    int L = 0;
    for (int l = 0; l < 256; l++) a->layer_of[l] = -1;
    for (int l = 0; l < n_model_layers; l++)
        if (layers_mask[l]) a->layer_of[l] = L++;
    if (L == 0) return mp_err_set(e, "no layer selected");
    a->L = L;
    a->H = H;
    a->S = S;
    a->per_head = per_head;
    a->causal = causal;
    a->threads = threads < 1 ? 1 : threads;
    size_t map, all, allh;
    if (mp_size_mul((size_t)S, (size_t)S, &map) || mp_size_mul(map, (size_t)L, &all))
        return mp_err_set(e, "maps too large");
    if (per_head && mp_size_mul(all, (size_t)H, &allh)) return mp_err_set(e, "per-head maps too large");
    a->nb = S < 16 ? S : 16;
    const int arrays_ok = mp_probe_acc_alloc(a, MP_PROBE_GROUP_BASE) == MP_OK;
    a->seqmap = mp_try_malloc(map * sizeof(double));
    a->seqres = mp_try_malloc(map * sizeof(double));
    a->seqsub = mp_try_malloc(map * sizeof(double));
    if (!arrays_ok || !a->seqmap || !a->seqres || !a->seqsub) {
        mp_probe_acc_free(a);
        return mp_err_set(e, "out of memory for the score maps (%d layers of %d x %d%s)", L, S, S, per_head ? ", per head" : "");
    }
    return MP_OK;
}

void mp_probe_acc_free(MpProbeAcc *a) {
    for (int k = 0; k < N_ARRAYS; k++) free(*arr_field(a, &probe_arrays[k])); /* every group's, allocated or NULL */
    free(a->seqmap);
    free(a->seqres);
    free(a->seqsub);
    free(a->pent);
    if (a->recency_free) a->recency_free(a); /* probe --recency: its scratch */
    memset(a, 0, sizeof *a);
}

void mp_probe_acc_reset(MpProbeAcc *a) {
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(a, t);
    for (int k = 0; k < n; k++) memset(t[k].p, 0, t[k].n * sizeof(double));
    a->n_done = 0;
}

void mp_probe_acc_seq_end(MpProbeAcc *a) { a->n_done++; }

int mp_probe_acc_merge(MpProbeAcc *dst, const MpProbeAcc *src, MpErr *e) {
    if (dst->L != src->L || dst->H != src->H || dst->S != src->S || dst->per_head != src->per_head ||
        dst->causal != src->causal || dst->skip != src->skip || dst->nb != src->nb || dst->probs != src->probs ||
        dst->recency != src->recency || dst->nlen != src->nlen ||
        memcmp(dst->layer_of, src->layer_of, sizeof dst->layer_of) || memcmp(dst->window, src->window, sizeof dst->window))
        return mp_err_set(e, "cannot merge probe sums of different runs (layers, heads, length or flags differ)");
    MpProbeArray td[MP_PROBE_MAX_ARRAYS], ts[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(dst, td);
    MP_ASSERT(mp_probe_acc_arrays(src, ts) == n);
    for (int k = 0; k < n; k++) {
        double *d = td[k].p;
        const double *s = ts[k].p;
        for (size_t i = 0; i < td[k].n; i++) d[i] += s[i];
    }
    dst->n_done += src->n_done;
    return MP_OK;
}

/* ================================================================ probabilities */

int mp_probe_acc_probs_on(MpProbeAcc *a, MpErr *e) {
    MP_ASSERT(a->n_done == 0 && !a->probs);
    const int arrays_ok = mp_probe_acc_alloc(a, MP_PROBE_GROUP_PROBS) == MP_OK;
    a->pent = mp_try_calloc((size_t)a->H * a->S, sizeof(double));
    if (!arrays_ok || !a->pent)
        return mp_err_set(e, "out of memory for the probability maps (%d layers of %d x %d%s)", a->L, a->S, a->S,
                          a->per_head ? ", per head" : "");
    a->probs = 1;
    return MP_OK;
}

/* The slot of model layer `layer` in a's maps, or -1 when the layer is not kept. */
static int acc_slot(const MpProbeAcc *a, int layer) {
    return layer >= 0 && layer < 256 ? a->layer_of[layer] : -1;
}

void mp_probe_acc_probs_hook(void *ctx, int layer, const float *probs, int n_heads, int T) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && n_heads == a->H && a->probs);
    const int li = acc_slot(a, layer), S = a->S, H = a->H;
    if (li < 0) return;
    const size_t SS = (size_t)S * S;
    double *psum = a->psum + (size_t)li * SS;
#pragma omp parallel for schedule(dynamic, 8) num_threads(a->threads) if ((double)S * S * H > 200000.0)
    for (int i = 0; i < S; i++) {
        const int n = a->causal ? i + 1 : S;
        double *out = psum + (size_t)i * S;
        for (int h = 0; h < H; h++) {
            const float *row = probs + (size_t)h * SS + (size_t)i * S;
            double ent = 0;
            for (int j = 0; j < n; j++) {
                const double p = row[j];
                if (p > 0) ent -= p * log(p);
            }
            a->pent[(size_t)h * S + i] = ent;
            if (a->psum_heads) {
                double *sh = a->psum_heads + ((size_t)li * H + h) * SS + (size_t)i * S;
                for (int j = 0; j < n; j++) sh[j] += (double)row[j];
            }
        }
        /* the sequence's head sum first (heads ascending), then one addition to the map: a
         * sequence adds the same bits here as through a merged part (MPI ranks, Accumulator.merge) */
        const float *col = probs + (size_t)i * S;
        for (int j = 0; j < n; j++) {
            double t = 0;
            for (int h = 0; h < H; h++) t += (double)col[(size_t)h * SS + j];
            out[j] += t;
        }
    }
    for (int h = 0; h < H; h++) { /* queries 1..S-1: query 0 sees only itself */
        double sk = 0, en = 0;
        for (int i = 1; i < S; i++) {
            sk += (double)probs[(size_t)h * SS + (size_t)i * S];
            en += a->pent[(size_t)h * S + i];
        }
        a->sink[(size_t)li * H + h] += sk;
        a->entropy[(size_t)li * H + h] += en;
    }
}

void mp_probe_acc_probs_mean(const MpProbeAcc *a, double *probs, double *probs_heads, double *sink, double *entropy) {
    const size_t SS = (size_t)a->S * a->S, LH = (size_t)a->L * a->H;
    const double dn = (double)a->n_done, dnh = dn * a->H, nq = dn * (a->S - 1);
    for (size_t k = 0; k < SS * a->L; k++) probs[k] = a->psum[k] / dnh;
    if (probs_heads && a->psum_heads)
        for (size_t k = 0; k < SS * LH; k++) probs_heads[k] = a->psum_heads[k] / dn;
    for (size_t k = 0; k < LH; k++) {
        sink[k] = a->S > 1 ? a->sink[k] / nq : NAN;
        entropy[k] = a->S > 1 ? a->entropy[k] / nq : NAN;
    }
}

void mp_probe_acc_skip(MpProbeAcc *a, int skip) {
    MP_ASSERT(a->n_done == 0 && skip >= 0 && a->S - skip >= 2);
    a->skip = skip;
    a->nb = a->S - skip < 16 ? a->S - skip : 16; /* no more than the blocks allocated for S */
}

void mp_probe_acc_windows(MpProbeAcc *a, const MpModel *m) {
    MP_ASSERT(a->n_done == 0);
    for (int l = 0; l < m->n_layers && l < 256; l++) {
        const int li = a->layer_of[l], W = mp_model_layer_window(m, l);
        if (li >= 0) a->window[li] = W > 0 && W < a->S ? W : 0;
    }
}

void mp_probe_acc_row_keys(const MpProbeAcc *a, int li, int i, int *lo, int *hi) {
    const int W = a->window[li];
    *lo = W && i - W + 1 > 0 ? i - W + 1 : 0;
    *hi = a->causal ? i + 1 : W && i + W < a->S ? i + W : a->S;
}

/* dst[j] += row[j] for j in [j0, n), in double: row is f32[off..] or, when f32 is NULL, f64[off..]
 * (a float widened to double is exact, so both give the same bits for the same values). */
static inline void probe_add(double *dst, const float *f32, const double *f64, size_t off, int j0, int n) {
    if (f32)
        for (int j = j0; j < n; j++) dst[j] += (double)f32[off + j];
    else
        for (int j = j0; j < n; j++) dst[j] += f64[off + j];
}

/* The same into sh, and the squares into sq. */
static inline void probe_add_sq(double *sh, double *sq, const float *f32, const double *f64, size_t off, int j0, int n) {
    for (int j = j0; j < n; j++) {
        const double x = f32 ? (double)f32[off + j] : f64[off + j];
        sh[j] += x;
        sq[j] += x * x;
    }
}

/* Query row i of layer slot li, its head sum in the row of seqmap (sm [S]) over the observed keys
 * [j0, n): added to sum and sumsq, turned into the head mean there, NaN outside. */
static void probe_row_finish(MpProbeAcc *a, int li, int i, int j0, int n) {
    const int S = a->S;
    const size_t SS = (size_t)S * S;
    const double inv_h = 1.0 / a->H;
    double *sm = a->seqmap + (size_t)i * S;
    double *out = a->sum + (size_t)li * SS + (size_t)i * S, *out2 = a->sumsq + (size_t)li * SS + (size_t)i * S;
    for (int j = 0; j < j0; j++) sm[j] = NAN;
    for (int j = j0; j < n; j++) {
        out[j] += sm[j];
        out2[j] += (sm[j] * inv_h) * (sm[j] * inv_h);
        sm[j] = sm[j] * inv_h;
    }
    for (int j = n; j < S; j++) sm[j] = NAN;
}

/* Query row i of layer slot li: the head sum of its observed scores in double, heads ascending
 * (kept in the row of seqmap, then turned into the head mean there), added to sum, sumsq,
 * sum_heads and sumsq_heads. Rows are independent: any order, any thread, the same bits. Scores
 * are f32 [H,S,S], or f64 when f32 is NULL (mp_probe_acc_rows_f64). */
static void probe_row(MpProbeAcc *a, int li, const float *f32, const double *f64, int i) {
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    int j0, n; /* observed keys [j0, n): the causal mask's and a sliding window's */
    mp_probe_acc_row_keys(a, li, i, &j0, &n);
    double *sm = a->seqmap + (size_t)i * S;
    for (int j = j0; j < n; j++) sm[j] = 0.0;
    for (int h = 0; h < H; h++) {
        const size_t src = (size_t)h * SS + (size_t)i * S;
        probe_add(sm, f32, f64, src, j0, n);
        if (a->sum_heads) {
            const size_t off = ((size_t)li * H + h) * SS + (size_t)i * S;
            probe_add_sq(a->sum_heads + off, a->sumsq_heads + off, f32, f64, src, j0, n);
        }
    }
    probe_row_finish(a, li, i, j0, n);
}

void mp_probe_acc_rows(void *ctx, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && n_heads == a->H && 0 <= i0 && i0 <= i1 && i1 <= T && worker >= 0 && worker < a->threads);
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int i = i0; i < i1; i++) probe_row(a, li, scores, NULL, i);
    if (a->recency) a->recency_rows(a, li, scores, NULL, i0, i1, worker); /* probe --recency: triple counts */
}

void mp_probe_acc_rows_f64(MpProbeAcc *a, int layer, const double *scores, int i0, int i1, int worker) {
    MP_ASSERT(0 <= i0 && i0 <= i1 && i1 <= a->S && worker >= 0 && worker < a->threads);
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int i = i0; i < i1; i++) probe_row(a, li, NULL, scores, i);
    if (a->recency) a->recency_rows(a, li, NULL, scores, i0, i1, worker);
}

int mp_probe_acc_needs_heads(const MpProbeAcc *a) { return a->per_head || a->recency; }

void mp_probe_acc_rows_headsum(void *ctx, int layer, const double *hs, int T, int i0, int i1, int worker) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && 0 <= i0 && i0 <= i1 && i1 <= T && worker >= 0 && worker < a->threads);
    MP_ASSERT(!mp_probe_acc_needs_heads(a));
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int i = i0; i < i1; i++) {
        int j0, n;
        mp_probe_acc_row_keys(a, li, i, &j0, &n);
        const double *src = hs + (size_t)(i - i0) * T;
        double *sm = a->seqmap + (size_t)i * T;
        for (int j = j0; j < n; j++) sm[j] = src[j]; /* the sum probe_row forms: the same bits */
        probe_row_finish(a, li, i, j0, n);
    }
}

void mp_probe_acc_layer_done(void *ctx, int layer) {
    MpProbeAcc *a = ctx;
    const int li = acc_slot(a, layer), S = a->S;
    if (li < 0) return;
    /* this sequence's residue (of positions skip..S-1), averaged per block */
    const int P = S - a->skip;
    const double *src = a->seqmap;
    if (a->skip) {
        mp_posmap_sub(a->seqsub, a->seqmap, S, a->skip);
        src = a->seqsub;
    }
    mp_posmap_diagnorm(a->seqres, src, P);
    const int nb = a->nb;
    mp_probe_block_add(a->bsum + (size_t)li * nb * nb, a->bsumsq + (size_t)li * nb * nb, a->seqres, P, nb, a->causal);
    if (a->recency) a->recency_seq(a, li); /* probe --recency: sums of the counts, lengths */
}

void mp_probe_acc_hook(void *ctx, int layer, const float *scores, int n_heads, int T) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && n_heads == a->H);
    if (acc_slot(a, layer) < 0) return;
#pragma omp parallel for schedule(dynamic, 8) num_threads(a->threads) if ((double)T * T * n_heads > 200000.0)
    for (int i = 0; i < T; i++) mp_probe_acc_rows(a, layer, scores, n_heads, T, i, i + 1, mp_thread_num());
    mp_probe_acc_layer_done(a, layer);
}


void mp_probe_acc_mean(const MpProbeAcc *a, double *mean, double *mean_heads) {
    const int S = a->S;
    const size_t SS = (size_t)S * S;
    const double dn = (double)a->n_done, dnh = dn * a->H;
    for (int l = 0; l < a->L; l++)
        for (int i = 0; i < S; i++) {
            int lo, hi;
            mp_probe_acc_row_keys(a, l, i, &lo, &hi);
            for (int j = 0; j < S; j++) {
                const size_t k = (size_t)l * SS + (size_t)i * S + j;
                const int seen = j >= lo && j < hi;
                mean[k] = seen ? a->sum[k] / dnh : NAN;
                if (mean_heads && a->sum_heads)
                    for (int h = 0; h < a->H; h++) {
                        const size_t kh = ((size_t)l * a->H + h) * SS + (size_t)i * S + j;
                        mean_heads[kh] = seen ? a->sum_heads[kh] / dn : NAN;
                    }
            }
        }
}

void mp_probe_acc_se(const MpProbeAcc *a, double *se) {
    const size_t n = (size_t)a->L * a->S * a->S;
    const double dn = (double)a->n_done, dnh = dn * a->H;
    for (size_t k = 0; k < n; k++) {
        const int i = (int)(k / a->S % a->S), j = (int)(k % a->S);
        int lo, hi;
        mp_probe_acc_row_keys(a, (int)(k / ((size_t)a->S * a->S)), i, &lo, &hi);
        if (j < lo || j >= hi || a->n_done < 2) {
            se[k] = NAN;
            continue;
        }
        const double m = a->sum[k] / dnh, var = (a->sumsq[k] / dn - m * m) * dn / (dn - 1.0);
        se[k] = sqrt((var > 0 ? var : 0.0) / dn);
    }
}

void mp_probe_acc_se_heads(const MpProbeAcc *a, double *se_heads) {
    MP_ASSERT(a->sum_heads && a->sumsq_heads);
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    const double dn = (double)a->n_done;
    for (int l = 0; l < a->L; l++)
        for (int i = 0; i < S; i++) {
            int lo, hi;
            mp_probe_acc_row_keys(a, l, i, &lo, &hi);
            for (int h = 0; h < H; h++)
                for (int j = 0; j < S; j++) {
                    const size_t k = ((size_t)l * H + h) * SS + (size_t)i * S + j;
                    if (j < lo || j >= hi || a->n_done < 2) {
                        se_heads[k] = NAN;
                        continue;
                    }
                    const double m = a->sum_heads[k] / dn, var = (a->sumsq_heads[k] / dn - m * m) * dn / (dn - 1.0);
                    se_heads[k] = sqrt((var > 0 ? var : 0.0) / dn);
                }
        }
}

