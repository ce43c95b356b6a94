/* probe.c — see probe.h. Sections: token input, accumulator, model hash, checkpoints. */
#include "model/probe.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"  /* mp_npy_read */
#include "core/util.h" /* mp_fnv1a64, MpAtomicFile, mp_input_open, mp_thread_num */
#include "kernels/posmap.h" /* mp_posmap_diagnorm: per-sequence residues */

/* ================================================================ token input */

static int tok_read_file(const char *path, unsigned char **buf, size_t *len, MpErr *e) {
    /* a directory or FIFO is refused by name (was "out of memory for 2^63-1 bytes" / a hang) */
    return mp_file_read_all(path, SIZE_MAX - 1, "a token file", (char **)buf, len, e);
}

int mp_probe_tokens_read(MpProbeTokens *tk, const char *path, int seq, int64_t n, int vocab, MpErr *e) {
    memset(tk, 0, sizeof *tk);
    unsigned char *buf = NULL;
    size_t len = 0;
    if (tok_read_file(path, &buf, &len, e) != MP_OK) return MP_ERR;
    int64_t rows = 0, cols = 0;
    MpNpy a;
    memset(&a, 0, sizeof a);
    const int is_npy = len >= 6 && !memcmp(buf, "\x93NUMPY", 6);
    if (is_npy) {
        int rc = mp_npy_parse(buf, len, &a, e);
        free(buf);
        buf = NULL;
        if (rc != MP_OK) return mp_err_prefix(e, "%s", path);
        const MpDtype dt = a.dtype;
        const int nd = a.ndim;
        if (dt != MP_DT_I32 && dt != MP_DT_I64 && dt != MP_DT_U32) {
            mp_npy_free(&a);
            return mp_err_set(e, "%s: token ids must be int32, int64 or uint32, not %s", path, mp_dtype_name(dt));
        }
        if (nd != 2) {
            mp_npy_free(&a);
            return mp_err_set(e, "%s: token ids must be a 2-D array [N, S], not %d-D", path, nd);
        }
        rows = a.shape[0];
        cols = a.shape[1];
        if (cols == 0) { /* (was "sequence length 0 out of range", naming no file) */
            mp_npy_free(&a);
            return mp_err_set(e, "%s: shape [%lld, 0]: sequences of no tokens", path, (long long)rows);
        }
        if (seq == 0) seq = cols > INT32_MAX ? INT32_MAX : (int)cols;
        if (cols < seq) {
            mp_npy_free(&a);
            return mp_err_set(e, "%s: sequences have %lld tokens, fewer than --seq %d", path, (long long)cols, seq);
        }
    } else {
        if (seq <= 0) {
            free(buf);
            return mp_err_set(e, "%s: not a .npy file; a raw uint32 token file needs --seq", path);
        }
        if (len % 4) {
            free(buf);
            return mp_err_set(e, "%s: raw uint32 token file of %zu bytes is not a multiple of 4", path, len);
        }
        cols = seq;
        rows = (int64_t)(len / 4) / seq;
        tk->skipped = (int64_t)(len / 4) % seq;
    }
    tk->available = rows;
    tk->from_npy = is_npy;
    if (n == 0) n = rows;
    if (rows == 0 || n == 0) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: no complete sequence of %d tokens (N = 0)", path, seq);
    }
    if (n > rows) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: --n %lld but the file holds %lld sequences of %d tokens", path, (long long)n,
                          (long long)rows, seq);
    }
    size_t count;
    if (mp_size_mul((size_t)n, (size_t)seq, &count) != MP_OK || count > ((size_t)1 << 34)) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: %lld x %d tokens is too many", path, (long long)n, seq);
    }
    tk->ids = mp_try_malloc(count * sizeof *tk->ids);
    if (!tk->ids) {
        free(buf);
        mp_npy_free(&a);
        return mp_err_set(e, "%s: out of memory for %zu token ids", path, count);
    }
    uint64_t h = MP_FNV_INIT;
    int rc = MP_OK;
    for (int64_t r = 0; r < n && rc == MP_OK; r++)
        for (int c = 0; c < seq; c++) {
            const size_t src = (size_t)r * (size_t)cols + (size_t)c;
            int64_t v;
            if (!is_npy) {
                uint32_t u;
                memcpy(&u, buf + src * 4, 4); /* little-endian host (x86-64, aarch64) */
                v = u;
            } else if (a.dtype == MP_DT_I32) v = ((const int32_t *)a.data)[src];
            else if (a.dtype == MP_DT_I64) v = ((const int64_t *)a.data)[src];
            else v = ((const uint32_t *)a.data)[src];
            if (v < 0 || v >= vocab) {
                rc = mp_err_set(e, "%s: token id %lld (sequence %lld, position %d) is outside the vocabulary [0, %d)",
                                path, (long long)v, (long long)r, c, vocab);
                break;
            }
            int32_t id = (int32_t)v;
            tk->ids[(size_t)r * seq + c] = id;
            h = mp_fnv1a64(&id, 4, h);
        }
    free(buf);
    mp_npy_free(&a);
    if (rc != MP_OK) {
        mp_probe_tokens_free(tk);
        return MP_ERR;
    }
    tk->n = n;
    tk->seq = seq;
    tk->hash = h;
    return MP_OK;
}

void mp_probe_tokens_free(MpProbeTokens *tk) {
    free(tk->ids);
    memset(tk, 0, sizeof *tk);
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
    size_t map, all;
    if (mp_size_mul((size_t)S, (size_t)S, &map) || mp_size_mul(map, (size_t)L, &all))
        return mp_err_set(e, "maps too large");
    a->sum = mp_try_calloc(all, sizeof(double));
    a->sumsq = mp_try_calloc(all, sizeof(double));
    a->nb = S < 16 ? S : 16;
    a->bsum = mp_try_calloc((size_t)L * a->nb * a->nb, sizeof(double));
    a->bsumsq = mp_try_calloc((size_t)L * a->nb * a->nb, sizeof(double));
    a->seqmap = mp_try_malloc(map * sizeof(double));
    a->seqres = mp_try_malloc(map * sizeof(double));
    a->seqsub = mp_try_malloc(map * sizeof(double));
    if (per_head) {
        size_t allh;
        if (mp_size_mul(all, (size_t)H, &allh)) return mp_err_set(e, "per-head maps too large");
        a->sum_heads = mp_try_calloc(allh, sizeof(double));
        a->sumsq_heads = mp_try_calloc(allh, sizeof(double));
    }
    if (!a->sum || !a->sumsq || !a->bsum || !a->bsumsq || !a->seqmap || !a->seqres || !a->seqsub ||
        (per_head && (!a->sum_heads || !a->sumsq_heads))) {
        mp_probe_acc_free(a);
        return mp_err_set(e, "out of memory for the score maps (%d layers of %d x %d%s)", L, S, S, per_head ? ", per head" : "");
    }
    return MP_OK;
}

void mp_probe_acc_free(MpProbeAcc *a) {
    free(a->sum);
    free(a->sumsq);
    free(a->bsum);
    free(a->bsumsq);
    free(a->seqmap);
    free(a->seqres);
    free(a->seqsub);
    free(a->sum_heads);
    free(a->sumsq_heads);
    free(a->psum);
    free(a->psum_heads);
    free(a->sink);
    free(a->entropy);
    free(a->pent);
    if (a->recency_free) a->recency_free(a); /* probe --recency */
    memset(a, 0, sizeof *a);
}

int mp_probe_acc_arrays(const MpProbeAcc *a, MpProbeArray *out) {
    const size_t all = (size_t)a->L * a->S * a->S, nblk = (size_t)a->L * a->nb * a->nb;
    int k = 0;
    out[k++] = (MpProbeArray){a->sum, all, "sum"};
    out[k++] = (MpProbeArray){a->sumsq, all, "sumsq"};
    out[k++] = (MpProbeArray){a->bsum, nblk, "bsum"};
    out[k++] = (MpProbeArray){a->bsumsq, nblk, "bsumsq"};
    if (a->sum_heads) out[k++] = (MpProbeArray){a->sum_heads, all * (size_t)a->H, "sum_heads"};
    if (a->sumsq_heads) out[k++] = (MpProbeArray){a->sumsq_heads, all * (size_t)a->H, "sumsq_heads"};
    if (a->probs) { /* probe --probs */
        const size_t LH = (size_t)a->L * a->H;
        out[k++] = (MpProbeArray){a->psum, all, "psum"};
        if (a->psum_heads) out[k++] = (MpProbeArray){a->psum_heads, all * (size_t)a->H, "psum_heads"};
        out[k++] = (MpProbeArray){a->sink, LH, "sink"};
        out[k++] = (MpProbeArray){a->entropy, LH, "entropy"};
    }
    if (a->recency) { /* probe --recency */
        const size_t LH = (size_t)a->L * a->H, lblk = (size_t)a->nlen * a->L * 16 * 16;
        out[k++] = (MpProbeArray){a->rp_row, LH * a->S, "rp_row"};
        out[k++] = (MpProbeArray){a->rp_lsq, (size_t)a->L * a->nlen, "rp_lsq"};
        out[k++] = (MpProbeArray){a->rp_hsq, LH, "rp_hsq"};
        out[k++] = (MpProbeArray){a->lbsum, lblk, "lbsum"};
        out[k++] = (MpProbeArray){a->lbsumsq, lblk, "lbsumsq"};
    }
    MP_ASSERT(k <= MP_PROBE_MAX_ARRAYS);
    return k;
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
    const size_t SS = (size_t)a->S * a->S, LH = (size_t)a->L * a->H;
    a->psum = mp_try_calloc(SS * a->L, sizeof(double));
    a->psum_heads = a->per_head ? mp_try_calloc(SS * LH, sizeof(double)) : NULL;
    a->sink = mp_try_calloc(LH, sizeof(double));
    a->entropy = mp_try_calloc(LH, sizeof(double));
    a->pent = mp_try_calloc((size_t)a->H * a->S, sizeof(double));
    if (!a->psum || (a->per_head && !a->psum_heads) || !a->sink || !a->entropy || !a->pent)
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
                out[j] += p;
                if (p > 0) ent -= p * log(p);
            }
            a->pent[(size_t)h * S + i] = ent;
            if (a->psum_heads) {
                double *sh = a->psum_heads + ((size_t)li * H + h) * SS + (size_t)i * S;
                for (int j = 0; j < n; j++) sh[j] += (double)row[j];
            }
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

/* Query row i of layer slot li: the head sum of its observed scores in double, heads ascending
 * (kept in the row of seqmap, then turned into the head mean there), added to sum, sumsq,
 * sum_heads and sumsq_heads. Rows are independent: any order, any thread, the same bits. Scores
 * are f32 [H,S,S], or f64 when f32 is NULL (mp_probe_acc_rows_f64). */
static void probe_row(MpProbeAcc *a, int li, const float *f32, const double *f64, int i) {
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    const double inv_h = 1.0 / H;
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
    double *out = a->sum + (size_t)li * SS + (size_t)i * S, *out2 = a->sumsq + (size_t)li * SS + (size_t)i * S;
    for (int j = 0; j < j0; j++) sm[j] = NAN;
    for (int j = j0; j < n; j++) {
        out[j] += sm[j];
        out2[j] += (sm[j] * inv_h) * (sm[j] * inv_h);
        sm[j] = sm[j] * inv_h;
    }
    for (int j = n; j < S; j++) sm[j] = NAN;
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

void mp_probe_block_add(double *bs, double *bq, const double *res, int P, int nb, int causal) {
    for (int bi = 0; bi < nb; bi++)
        for (int bj = 0; bj <= (causal ? bi : nb - 1); bj++) {
            const int i0 = (int)(((int64_t)bi * P + nb - 1) / nb), i1 = (int)(((int64_t)(bi + 1) * P + nb - 1) / nb);
            const int j0 = (int)(((int64_t)bj * P + nb - 1) / nb), j1 = (int)(((int64_t)(bj + 1) * P + nb - 1) / nb);
            double acc = 0;
            int cnt = 0;
            for (int i = i0; i < i1; i++)
                for (int j = j0; j < j1 && (!causal || j <= i); j++) {
                    const double r = res[(size_t)i * P + j];
                    if (isnan(r)) continue; /* outside a sliding window */
                    acc += r;
                    cnt++;
                }
            if (!cnt) continue;
            const double m = acc / cnt;
            bs[bi * nb + bj] += m;
            bq[bi * nb + bj] += m * m;
        }
}

void mp_probe_layer_stats(MpPosStats *st, double *dn, const double *mean, const double *se, int have_se, int L, int S,
                          int k, double *scratch) {
    const size_t SS = (size_t)S * S;
    const int P = S - k;
    for (int l = 0; l < L; l++) {
        mp_posmap_diagnorm(dn + l * SS, mean + l * SS, S);
        if (!k) {
            mp_posmap_stats(&st[l], mean + l * SS, dn + l * SS, have_se ? se + l * SS : NULL, S);
            continue;
        }
        double *m = scratch, *e = scratch + SS, *r = scratch + 2 * SS;
        mp_posmap_sub(m, mean + l * SS, S, k);
        mp_posmap_sub(e, se + l * SS, S, k);
        mp_posmap_diagnorm(r, m, P);
        mp_posmap_stats(&st[l], m, r, have_se ? e : NULL, P);
    }
}

double mp_probe_acc_block_z(const MpProbeAcc *a, int l) { return mp_probe_acc_block_z_region(a, l, MP_PROBE_REGION_ALL); }

/* 1 when block (bi, bj) belongs to region r (see MpProbeRegion). */
static int probe_in_region(int r, int bi, int bj, int nb) {
    const int first = bj == 0, lastq = bi == nb - 1, lastk = bj == nb - 1;
    switch (r) {
    case MP_PROBE_REGION_FIRST_KEYS: return first;
    case MP_PROBE_REGION_LAST_QUERIES: return lastq;
    case MP_PROBE_REGION_LAST_KEYS: return lastk;
    case MP_PROBE_REGION_INTERIOR: return !first && !lastq && !lastk && bi != 0;
    default: return 1;
    }
}

double mp_probe_acc_block_z_region(const MpProbeAcc *a, int l, int region) {
    if (l < 0 || l >= a->L) return NAN;
    const int nb = a->nb;
    return mp_probe_block_z(a->bsum + (size_t)l * nb * nb, a->bsumsq + (size_t)l * nb * nb, nb, a->n_done, region);
}

double mp_probe_block_z(const double *bs, const double *bq, int nb, int64_t n_done, int region) {
    if (n_done < 2) return NAN;
    const double dn = (double)n_done;
    double acc = 0;
    int cnt = 0;
    for (int k = 0; k < nb * nb; k++) {
        if (!probe_in_region(region, k / nb, k % nb, nb)) continue;
        if (bs[k] == 0 && bq[k] == 0) continue; /* no observed entry (above the diagonal when causal) */
        const double m = bs[k] / dn, var = (bq[k] / dn - m * m) * dn / (dn - 1.0);
        if (!(var > 0)) continue;
        acc += m * m / (var / dn);
        cnt++;
    }
    return cnt ? sqrt(acc / cnt) : NAN;
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

/* ================================================================ model hash */

static uint64_t hash_i64(uint64_t h, int64_t v) { return mp_fnv1a64(&v, sizeof v, h); }
static uint64_t hash_f64(uint64_t h, double v) { return mp_fnv1a64(&v, sizeof v, h); }

uint64_t mp_probe_model_hash(const MpModel *m) {
    uint64_t h = MP_FNV_INIT;
    const int64_t ints[] = {m->format, m->arch, m->n_layers, m->dim, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn,
                            m->vocab, m->has_qkv_bias, m->has_qk_norm, m->tie_embeddings, m->rot_dim,
                            m->rope_scaling, m->rope_orig_ctx, m->sliding_window, m->max_pos};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) h = hash_i64(h, ints[i]);
    const double dbl[] = {m->norm_eps, m->rope_theta, m->rope_factor, m->rope_low_freq_factor,
                          m->rope_high_freq_factor, m->rope_attn_factor};
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++) h = hash_f64(h, dbl[i]);
    for (size_t t = 0; t < m->n_tensors; t++) {
        const MpModelTensor *x = &m->tensors[t];
        h = mp_fnv1a64(x->name, strlen(x->name) + 1, h);
        h = hash_i64(h, x->type);
        for (int d = 0; d < x->ndim && d < 4; d++) h = hash_i64(h, x->shape[d]);
        h = hash_i64(h, (int64_t)x->nbytes);
    }
    return h;
}

/* ================================================================ checkpoints */

#define CKPT_MAGIC "MPPRBCK1"
/* 2: Σ of squared head means and the block residue sums after the sums; 3 (runs with per-head
 * sums only): Σ of the heads' squares first among the extra arrays; 4 and 5: 2 and 3 under a run
 * key that covers the weights read (mp_model_weights_hash: 2 and 3 are refused, their keys cannot
 * tell two models of one shape apart) */
#define CKPT_VERSION(a) ((a)->per_head ? 5u : 4u)
#define CKPT_VERSION_WEIGHTS 4u /* the first version keyed by the weights */

typedef struct CkptHeader {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes;
    uint64_t key;
    int64_t n_done;
    int32_t L, H, S, per_head;
    int32_t causal, flags; /* flags bit 0: the probability sums follow (probe --probs); 0 in older files */
} CkptHeader;

#define CKPT_FLAG_PROBS 1
#define CKPT_FLAG_RECENCY 2
#define CKPT_EXTRA_MAX 10

static int32_t ckpt_flags(const MpProbeAcc *a) {
    return (a->probs ? CKPT_FLAG_PROBS : 0) | (a->recency ? CKPT_FLAG_RECENCY : 0);
}

/* The optional sums in file order: with --per-head sumsq_heads; with --probs psum, psum_heads (per head), sink, entropy; with
 * --recency rp_row, rp_lsq, rp_hsq, lbsum, lbsumsq. Fills ptr/bytes; returns how many. */
static int ckpt_extra_arrays(const MpProbeAcc *a, void **ptr, size_t *bytes) {
    const size_t SS = (size_t)a->S * a->S, LH = (size_t)a->L * a->H, D = sizeof(double);
    int k = 0;
    if (a->sumsq_heads) ptr[k] = a->sumsq_heads, bytes[k++] = SS * LH * D;
    if (a->probs) {
        ptr[k] = a->psum, bytes[k++] = SS * a->L * D;
        if (a->psum_heads) ptr[k] = a->psum_heads, bytes[k++] = SS * LH * D;
        ptr[k] = a->sink, bytes[k++] = LH * D;
        ptr[k] = a->entropy, bytes[k++] = LH * D;
    }
    if (a->recency) {
        const size_t nblk = (size_t)a->nlen * a->L * 16 * 16;
        ptr[k] = a->rp_row, bytes[k++] = LH * a->S * D;
        ptr[k] = a->rp_lsq, bytes[k++] = (size_t)a->L * a->nlen * D;
        ptr[k] = a->rp_hsq, bytes[k++] = LH * D;
        ptr[k] = a->lbsum, bytes[k++] = nblk * D;
        ptr[k] = a->lbsumsq, bytes[k++] = nblk * D;
    }
    return k;
}

int mp_probe_ckpt_save(const char *path, const MpProbeAcc *a, uint64_t key, MpErr *e) {
    CkptHeader hd;
    memset(&hd, 0, sizeof hd);
    memcpy(hd.magic, CKPT_MAGIC, 8);
    hd.version = CKPT_VERSION(a);
    hd.header_bytes = sizeof hd;
    hd.key = key;
    hd.n_done = a->n_done;
    hd.L = a->L;
    hd.H = a->H;
    hd.S = a->S;
    hd.per_head = a->per_head;
    hd.causal = a->causal;
    hd.flags = ckpt_flags(a);
    void *pa[CKPT_EXTRA_MAX];
    size_t pc[CKPT_EXTRA_MAX];
    const int np = ckpt_extra_arrays(a, pa, pc);
    const size_t SS = (size_t)a->S * a->S, nsum = SS * a->L, nh = a->per_head ? nsum * a->H : 0;
    const size_t nblk = (size_t)a->L * a->nb * a->nb;
    uint64_t ck = mp_fnv1a64(&hd, sizeof hd, MP_FNV_INIT);
    ck = mp_fnv1a64(a->sum, nsum * sizeof(double), ck);
    ck = mp_fnv1a64(a->sumsq, nsum * sizeof(double), ck);
    ck = mp_fnv1a64(a->bsum, nblk * sizeof(double), ck);
    ck = mp_fnv1a64(a->bsumsq, nblk * sizeof(double), ck);
    if (nh) ck = mp_fnv1a64(a->sum_heads, nh * sizeof(double), ck);
    for (int k = 0; k < np; k++) ck = mp_fnv1a64(pa[k], pc[k], ck);
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    int ok = fwrite(&hd, sizeof hd, 1, af.f) == 1 && fwrite(a->sum, sizeof(double), nsum, af.f) == nsum &&
             fwrite(a->sumsq, sizeof(double), nsum, af.f) == nsum && fwrite(a->bsum, sizeof(double), nblk, af.f) == nblk &&
             fwrite(a->bsumsq, sizeof(double), nblk, af.f) == nblk &&
             (!nh || fwrite(a->sum_heads, sizeof(double), nh, af.f) == nh);
    for (int k = 0; k < np && ok; k++) ok = fwrite(pa[k], 1, pc[k], af.f) == pc[k];
    ok = ok && fwrite(&ck, sizeof ck, 1, af.f) == 1;
    if (!ok) {
        mp_atomic_abort(&af);
        return mp_err_set(e, "%s: write failed: %s; HINT: is the disk full?", path, strerror(errno));
    }
    return mp_atomic_commit(&af, e);
}

/* 1 when sums read back cannot come from finite scores: a checksum proves the bytes are the ones
 * written, not that they are sane. */
static int ckpt_sums_bad(const MpProbeAcc *a, size_t nsum, size_t nblk, size_t nh) {
    for (size_t i = 0; i < nsum; i++)
        if (!isfinite(a->sum[i]) || !(a->sumsq[i] >= 0) || !isfinite(a->sumsq[i])) return 1;
    for (size_t i = 0; i < nblk; i++)
        if (!isfinite(a->bsum[i]) || !(a->bsumsq[i] >= 0) || !isfinite(a->bsumsq[i])) return 1;
    for (size_t i = 0; i < nh; i++)
        if (!isfinite(a->sum_heads[i])) return 1;
    return 0;
}

/* 1 when all np optional arrays were read in full. */
static int ckpt_read_extra(FILE *f, void **pa, const size_t *pc, int np) {
    for (int k = 0; k < np; k++)
        if (fread(pa[k], 1, pc[k], f) != pc[k]) return 0;
    return 1;
}

int mp_probe_ckpt_load(const char *path, MpProbeAcc *a, uint64_t key, int *missing, MpErr *e) {
    *missing = 0;
    FILE *f = mp_input_open(path, NULL, e);
    if (!f) {
        *missing = !mp_file_exists(path);
        return MP_ERR;
    }
    CkptHeader hd;
    const size_t SS = (size_t)a->S * a->S, nsum = SS * a->L, nh = a->per_head ? nsum * a->H : 0;
    const size_t nblk = (size_t)a->L * a->nb * a->nb;
    void *pa[CKPT_EXTRA_MAX];
    size_t pc[CKPT_EXTRA_MAX];
    const int np = ckpt_extra_arrays(a, pa, pc);
    int rc = MP_OK;
    if (fread(&hd, sizeof hd, 1, f) != 1 || memcmp(hd.magic, CKPT_MAGIC, 8))
        rc = mp_err_set(e, "%s: not a maskpos probe checkpoint", path);
    else if (hd.version < CKPT_VERSION_WEIGHTS)
        rc = mp_err_set(e, "%s: a checkpoint of an older maskpos (version %u; this one writes %u, whose run key covers "
                           "the weights): it cannot be told apart from another model's; HINT: run again without --resume "
                           "(--force replaces the folder)",
                        path, hd.version, CKPT_VERSION(a));
    else if (hd.version != CKPT_VERSION(a) || hd.header_bytes != sizeof hd)
        rc = mp_err_set(e, "%s: checkpoint version %u with a %u-byte header; this run reads version %u (%zu bytes)%s", path,
                        hd.version, hd.header_bytes, CKPT_VERSION(a), sizeof hd,
                        hd.version == 9u - CKPT_VERSION(a) ? " (written with and without --per-head: another run)" : "");
    else if (hd.key != key || hd.L != a->L || hd.H != a->H || hd.S != a->S || hd.per_head != a->per_head ||
             hd.causal != a->causal || hd.flags != ckpt_flags(a))
        rc = mp_err_set(e, "%s: checkpoint belongs to another run (model, tokens or flags differ); HINT: remove it or "
                           "use another --out", path);
    else if (hd.n_done < 0)
        rc = mp_err_set(e, "%s: corrupt checkpoint (negative count)", path);
    if (rc == MP_OK) {
        uint64_t ck = mp_fnv1a64(&hd, sizeof hd, MP_FNV_INIT), stored;
        if (fread(a->sum, sizeof(double), nsum, f) != nsum || fread(a->sumsq, sizeof(double), nsum, f) != nsum ||
            fread(a->bsum, sizeof(double), nblk, f) != nblk || fread(a->bsumsq, sizeof(double), nblk, f) != nblk || (nh && fread(a->sum_heads, sizeof(double), nh, f) != nh) ||
            !ckpt_read_extra(f, pa, pc, np) || fread(&stored, sizeof stored, 1, f) != 1 || fgetc(f) != EOF)
            rc = mp_err_set(e, "%s: truncated or oversized checkpoint", path);
        else {
            ck = mp_fnv1a64(a->sum, nsum * sizeof(double), ck);
            ck = mp_fnv1a64(a->sumsq, nsum * sizeof(double), ck);
            ck = mp_fnv1a64(a->bsum, nblk * sizeof(double), ck);
            ck = mp_fnv1a64(a->bsumsq, nblk * sizeof(double), ck);
            if (nh) ck = mp_fnv1a64(a->sum_heads, nh * sizeof(double), ck);
            for (int k = 0; k < np; k++) ck = mp_fnv1a64(pa[k], pc[k], ck);
            if (ck != stored) rc = mp_err_set(e, "%s: checkpoint checksum mismatch", path);
            else if (ckpt_sums_bad(a, nsum, nblk, nh))
                rc = mp_err_set(e, "%s: corrupt checkpoint (a non-finite sum or a negative sum of squares)", path);
        }
    }
    fclose(f);
    if (rc == MP_OK) a->n_done = hd.n_done;
    else {
        memset(a->sum, 0, nsum * sizeof(double));
        memset(a->sumsq, 0, nsum * sizeof(double));
        memset(a->bsum, 0, nblk * sizeof(double));
        memset(a->bsumsq, 0, nblk * sizeof(double));
        if (nh) memset(a->sum_heads, 0, nh * sizeof(double));
        for (int k = 0; k < np; k++) memset(pa[k], 0, pc[k]);
    }
    return rc;
}
