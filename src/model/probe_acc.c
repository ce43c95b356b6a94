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
    SH_LFBB,    /* [L, F, nb, nb], F = MP_PROBE_FLIPS */
    SH_L,       /* [L] */
    SH_LS,      /* [L, S] */
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
    ARR(bflip, SH_LFBB, BASE, 0, 1),       ARR(rsq, SH_L, BASE, 0, 2),          ARR(csq, SH_L, BASE, 0, 2),
    ARR(npos, SH_LS, LENGTHS, 0, 2),       ARR(bcnt, SH_LBB, LENGTHS, 0, 2),
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
    case SH_LFBB: return L * MP_PROBE_FLIPS * (size_t)a->nb * (size_t)a->nb;
    case SH_L: return L;
    case SH_LS: return L * S;
    }
    return 0;
}

/* 1 when a has array s: its group is on (the base always) and, per head only, per_head. */
static int arr_on(const MpProbeAcc *a, const ArrSpec *s) {
    const int group_on = s->group == MP_PROBE_GROUP_BASE || (s->group == MP_PROBE_GROUP_PROBS && a->probs) ||
                         (s->group == MP_PROBE_GROUP_RECENCY && a->recency) ||
                         (s->group == MP_PROBE_GROUP_LENGTHS && a->npos);
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
    a->bmeans = mp_try_malloc(16 * 16 * sizeof(double));
    if (!arrays_ok || !a->seqmap || !a->seqres || !a->seqsub || !a->bmeans) {
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
    free(a->bmeans);
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
    if (dst->S != src->S || !dst->npos != !src->npos) return mp_probe_acc_embed(dst, src, NULL, NULL, e);
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
        int j0, n; /* the sequence's keys (a causal row's are 0..i; rows past its length none) */
        mp_probe_acc_seq_keys(a, li, i, &j0, &n);
        if (!a->npos) j0 = 0, n = a->causal ? i + 1 : S; /* every row whole, as before lengths */
        (void)j0;
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
    const int len = a->cur_len > 0 ? a->cur_len : S;
    for (int h = 0; h < H; h++) { /* queries 1..len-1: query 0 sees only itself */
        double sk = 0, en = 0;
        for (int i = 1; i < len; i++) {
            sk += (double)probs[(size_t)h * SS + (size_t)i * S];
            en += a->pent[(size_t)h * S + i];
        }
        a->sink[(size_t)li * H + h] += sk;
        a->entropy[(size_t)li * H + h] += en;
    }
}

void mp_probe_acc_probs_mean(const MpProbeAcc *a, double *probs, double *probs_heads, double *sink, double *entropy) {
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    const double dn = (double)a->n_done, dnh = dn * a->H, nq = dn * (a->S - 1);
    for (size_t k = 0; k < SS * a->L; k++) {
        const int l = (int)(k / SS), i = (int)(k / S % S), j = (int)(k % S);
        const double c = a->npos ? mp_probe_acc_entry_count(a, l, i, j) : dn; /* lengths: per entry */
        probs[k] = !a->npos ? a->psum[k] / dnh : c > 0 ? a->psum[k] / (c * H) : NAN;
        if (probs_heads && a->psum_heads)
            for (int h = 0; h < H; h++) {
                const size_t kh = ((size_t)l * H + h) * SS + (k % SS);
                probs_heads[kh] = !a->npos ? a->psum_heads[kh] / dn : c > 0 ? a->psum_heads[kh] / c : NAN;
            }
    }
    for (int l = 0; l < a->L; l++) {
        double q = nq; /* query rows 1.. over the sequences */
        if (a->npos) {
            q = 0;
            for (int p = 1; p < S; p++) q += a->npos[(size_t)l * S + p];
        }
        for (int h = 0; h < H; h++) {
            const size_t k = (size_t)l * H + h;
            sink[k] = a->S > 1 ? a->sink[k] / q : NAN;
            entropy[k] = a->S > 1 ? a->entropy[k] / q : NAN;
        }
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

void mp_probe_acc_seq_keys(const MpProbeAcc *a, int li, int i, int *lo, int *hi) {
    mp_probe_acc_row_keys(a, li, i, lo, hi);
    const int len = a->cur_len > 0 ? a->cur_len : a->S;
    if (i >= len) *lo = *hi = 0;
    else if (*hi > len) *hi = len;
}

double mp_probe_acc_entry_count(const MpProbeAcc *a, int l, int i, int j) {
    if (!a->npos) return (double)a->n_done;
    return a->npos[(size_t)l * a->S + (size_t)(i > j ? i : j)];
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
    int j0, n; /* observed keys [j0, n): the causal mask's, a sliding window's, the sequence's length */
    mp_probe_acc_seq_keys(a, li, i, &j0, &n);
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
        mp_probe_acc_seq_keys(a, li, i, &j0, &n);
        const double *src = hs + (size_t)(i - i0) * T;
        double *sm = a->seqmap + (size_t)i * T;
        for (int j = j0; j < n; j++) sm[j] = src[j]; /* the sum probe_row forms: the same bits */
        probe_row_finish(a, li, i, j0, n);
    }
}

/* Σ over the finite entries of one sequence's map x [P,P] of its residue r squared (into *rs) and of
 * (x − its mean)² (into *cs): the numerator and denominator of its own NRI (mp_posmap_stats). */
static void probe_seq_norms(const double *x, const double *r, int P, double *rs, double *cs) {
    const size_t n = (size_t)P * P;
    double sum = 0, num = 0, den = 0;
    int64_t cnt = 0;
    for (size_t k = 0; k < n; k++)
        if (isfinite(x[k])) sum += x[k], cnt++;
    const double mean = cnt ? sum / (double)cnt : 0;
    for (size_t k = 0; k < n; k++)
        if (isfinite(x[k])) {
            num += r[k] * r[k];
            den += (x[k] - mean) * (x[k] - mean);
        }
    *rs = num, *cs = den;
}

uint32_t mp_probe_flip_bits(const double *bm, int nb) {
    float r[16 * 16]; /* the means rounded to float: the same signs for the same means summed in another order
                         (a GPU's reduction), but for a rounding boundary crossed (about 1e-8 per mean) */
    for (int k = 0; k < nb * nb; k++) r[k] = isnan(bm[k]) ? NAN : (float)bm[k];
    uint64_t h = mp_fnv1a64(r, (size_t)nb * nb * sizeof(float), MP_FNV_INIT);
    h ^= h >> 33; /* the murmur3 finaliser: every output bit depends on every input bit */
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

void mp_probe_acc_block_seq(MpProbeAcc *a, int li, const double *bm) {
    const int nb = a->nb, nbb = nb * nb;
    double *bs = a->bsum + (size_t)li * nbb, *bq = a->bsumsq + (size_t)li * nbb;
    double *bf = a->bflip + (size_t)li * MP_PROBE_FLIPS * nbb;
    const uint32_t bits = mp_probe_flip_bits(bm, nb);
    for (int k = 0; k < nbb; k++) {
        if (isnan(bm[k])) continue;
        bs[k] += bm[k];
        bq[k] += bm[k] * bm[k];
        for (int f = 0; f < MP_PROBE_FLIPS; f++) bf[(size_t)f * nbb + k] += (bits >> f & 1u) ? -bm[k] : bm[k];
        if (a->bcnt) a->bcnt[(size_t)li * nbb + k] += 1.0;
    }
}

void mp_probe_acc_layer_done(void *ctx, int layer) {
    MpProbeAcc *a = ctx;
    const int li = acc_slot(a, layer), S = a->S;
    if (li < 0) return;
    const int len = a->cur_len > 0 ? a->cur_len : S;
    if (a->npos)
        for (int p = 0; p < len; p++) a->npos[(size_t)li * S + p] += 1.0;
    /* this sequence's residue (of positions skip..len-1), averaged per block */
    const int P = len - a->skip;
    if (P < 1) return;
    const double *src = a->seqmap;
    if (a->skip || len < S) {
        for (int i = 0; i < P; i++) /* its [P, P] corner from position skip (mp_posmap_sub when len = S) */
            memcpy(a->seqsub + (size_t)i * P, a->seqmap + (size_t)(i + a->skip) * S + a->skip, (size_t)P * sizeof(double));
        src = a->seqsub;
    }
    mp_posmap_diagnorm(a->seqres, src, P);
    if (P >= a->nb) {
        mp_probe_block_means(a->bmeans, a->seqres, P, a->nb, a->causal);
        mp_probe_acc_block_seq(a, li, a->bmeans);
    }
    if (len == S) { /* the noise-corrected NRI's sums: sequences of the full length only */
        double rs, cs;
        probe_seq_norms(src, a->seqres, P, &rs, &cs);
        a->rsq[li] += rs;
        a->csq[li] += cs;
    }
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
    for (int l = 0; l < a->L; l++)
        for (int i = 0; i < S; i++) {
            int lo, hi;
            mp_probe_acc_row_keys(a, l, i, &lo, &hi);
            for (int j = 0; j < S; j++) {
                const size_t k = (size_t)l * SS + (size_t)i * S + j;
                const double dn = mp_probe_acc_entry_count(a, l, i, j), dnh = dn * a->H;
                const int seen = j >= lo && j < hi && dn > 0;
                mean[k] = seen ? a->sum[k] / dnh : NAN;
                if (mean_heads && a->sum_heads)
                    for (int h = 0; h < a->H; h++) {
                        const size_t kh = ((size_t)l * a->H + h) * SS + (size_t)i * S + j;
                        mean_heads[kh] = seen ? a->sum_heads[kh] / dn : NAN;
                    }
            }
        }
}

/* The standard error of a mean m over dn sequences from the sum of squares of their values
 * (sample variance, clipped at 0); NaN below 2 sequences. */
static double probe_se(double m, double sumsq, double dn) {
    if (!(dn >= 2)) return NAN;
    const double var = (sumsq / dn - m * m) * dn / (dn - 1.0);
    return sqrt((var > 0 ? var : 0.0) / dn);
}

void mp_probe_acc_se(const MpProbeAcc *a, double *se) {
    const size_t n = (size_t)a->L * a->S * a->S;
    for (size_t k = 0; k < n; k++) {
        const int l = (int)(k / ((size_t)a->S * a->S)), i = (int)(k / a->S % a->S), j = (int)(k % a->S);
        int lo, hi;
        mp_probe_acc_row_keys(a, l, i, &lo, &hi);
        const double dn = mp_probe_acc_entry_count(a, l, i, j);
        se[k] = j < lo || j >= hi ? NAN : probe_se(a->sum[k] / (dn * a->H), a->sumsq[k], dn);
    }
}

void mp_probe_acc_se_heads(const MpProbeAcc *a, double *se_heads) {
    MP_ASSERT(a->sum_heads && a->sumsq_heads);
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    for (int l = 0; l < a->L; l++)
        for (int i = 0; i < S; i++) {
            int lo, hi;
            mp_probe_acc_row_keys(a, l, i, &lo, &hi);
            for (int h = 0; h < H; h++)
                for (int j = 0; j < S; j++) {
                    const size_t k = ((size_t)l * H + h) * SS + (size_t)i * S + j;
                    const double dn = mp_probe_acc_entry_count(a, l, i, j);
                    se_heads[k] = j < lo || j >= hi ? NAN : probe_se(a->sum_heads[k] / dn, a->sumsq_heads[k], dn);
                }
        }
}

/* ================================================================ sequences shorter than S */

int mp_probe_acc_lengths_on(MpProbeAcc *a, const int64_t *counts, MpErr *e) {
    if (a->npos) return MP_OK;
    if (a->recency) return mp_err_set(e, "sequences shorter than S cannot be counted with recency (its triple counts and "
                                         "prefix lengths need every sequence whole)");
    double *np = mp_try_calloc((size_t)a->L * a->S, sizeof(double));
    double *bc = mp_try_calloc((size_t)a->L * 16 * 16, sizeof(double));
    if (!np || !bc) {
        free(np), free(bc);
        return mp_err_set(e, "out of memory for the per-position counts");
    }
    const int nbb = a->nb * a->nb;
    for (int l = 0; l < a->L; l++) {
        const double n = (double)(counts ? counts[l] : a->n_done);
        for (int p = 0; p < a->S; p++) np[(size_t)l * a->S + p] = n;
        for (int k = 0; k < nbb; k++) /* a block the sequences so far observed (mp_probe_block_z's rule) */
            if (a->bsum[(size_t)l * nbb + k] != 0 || a->bsumsq[(size_t)l * nbb + k] != 0) bc[(size_t)l * nbb + k] = n;
    }
    a->npos = np, a->bcnt = bc;
    return MP_OK;
}


/* dst's array s += src's, src's [.., Ss, Ss] maps into dst's top-left corner (Ss <= S). */
static void probe_embed_array(MpProbeAcc *dst, const MpProbeAcc *src, const ArrSpec *s) {
    double *d = *arr_field(dst, s);
    const double *x = *arr_field(src, s);
    const int S = dst->S, Ss = src->S;
    switch (s->shape) {
    case SH_LSS:
    case SH_LHSS: {
        const size_t maps = (size_t)dst->L * (s->shape == SH_LHSS ? (size_t)dst->H : 1);
        for (size_t m = 0; m < maps; m++)
            for (int i = 0; i < Ss; i++)
                for (int j = 0; j < Ss; j++) d[(m * S + i) * S + j] += x[(m * Ss + i) * Ss + j];
        break;
    }
    case SH_LS:
        for (int l = 0; l < dst->L; l++)
            for (int p = 0; p < Ss; p++) d[(size_t)l * S + p] += x[(size_t)l * Ss + p];
        break;
    default: /* sizes independent of S (the block grids are equal) */
        for (size_t k = 0; k < arr_len(src, s->shape); k++) d[k] += x[k];
    }
}

int mp_probe_acc_embed(MpProbeAcc *dst, const MpProbeAcc *src, const int64_t *dcounts, const int64_t *scounts, MpErr *e) {
    if (src->S > dst->S) return mp_err_set(e, "cannot merge probe sums of length %d into length %d (the longer one takes the other)", src->S, dst->S);
    if (dst->L != src->L || dst->H != src->H || dst->per_head != src->per_head || dst->causal != src->causal ||
        dst->skip != src->skip || dst->probs != src->probs || memcmp(dst->layer_of, src->layer_of, sizeof dst->layer_of))
        return mp_err_set(e, "cannot merge probe sums of different runs (layers, heads or flags differ)");
    if (dst->recency || src->recency) return mp_err_set(e, "cannot merge probe sums of different lengths with recency");
    if (dst->nb != src->nb)
        return mp_err_set(e, "cannot merge probe sums of lengths %d and %d: their block grids differ (%d and %d blocks per side; "
                             "both need at least 16 positions from the first)", src->S, dst->S, src->nb, dst->nb);
    for (int l = 0; l < dst->L; l++)
        if (src->window[l] != dst->window[l] && !(src->window[l] == 0 && (dst->window[l] == 0 || dst->window[l] >= src->S)))
            return mp_err_set(e, "cannot merge probe sums: layer slot %d has window %d in one and %d in the other", l,
                              src->window[l], dst->window[l]);
    if (mp_probe_acc_lengths_on(dst, dcounts, e) != MP_OK) return MP_ERR;
    for (int k = 0; k < N_ARRAYS; k++) {
        const ArrSpec *s = &probe_arrays[k];
        if (!arr_on(src, s)) continue;
        if ((s->off == offsetof(MpProbeAcc, rsq) || s->off == offsetof(MpProbeAcc, csq)) && src->S < dst->S) continue;
        probe_embed_array(dst, src, s); /* rsq, csq: full-length sequences only */
    }
    if (!src->npos) { /* every sequence of src has its length */
        const int nbb = dst->nb * dst->nb;
        for (int l = 0; l < dst->L; l++) {
            const double n = (double)(scounts ? scounts[l] : src->n_done);
            for (int p = 0; p < src->S; p++) dst->npos[(size_t)l * dst->S + p] += n;
            for (int q = 0; q < nbb; q++)
                if (src->bsum[(size_t)l * nbb + q] != 0 || src->bsumsq[(size_t)l * nbb + q] != 0) dst->bcnt[(size_t)l * nbb + q] += n;
        }
    }
    dst->n_done += src->n_done;
    return MP_OK;
}
