/* probe_freq.c — the RoPE frequency statistic of probe_freq.h: each sequence's per-pair norms of the
 * rotated queries and keys and the pairs' |contributions| to the scores added to the sums of
 * MpProbeAcc, and their means and standard errors over sequences.
 * Does not: allocate, merge or checkpoint the sums (probe_acc.c's table), write files.
 * Tested by: tests/test_probe_freq.c.
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, HS head size, R rotary
 * dims, P = R/2 frequency pairs, Q = P + 1 (column P: the unrotated dims together).
 */
#include "model/probe_freq.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_try_malloc, mp_try_calloc */
#include "model/fwd.h"     /* MP_FWD_AT_Q, MP_FWD_AT_K */
#include "model/fwd_par.h" /* FWD_PAR_FOR: the heads in parallel */

/* quantities per pair: the query's norm, the key's norm, |contribution| */
enum { FQ_QN = 0, FQ_KN, FQ_C, FQ_N };

/* ================================================================ geometry */

int mp_probe_freq_geometry(MpProbeAcc *a, const MpModel *m, int rope, int unrotated, MpErr *e) {
    a->fr_hs = m->head_dim;
    a->fr_nkv = m->n_kv_heads;
    a->fr_rot = m->rot_dim;
    a->fr_scale = m->attn_scale > 0 ? m->attn_scale : 1.0 / sqrt((double)m->head_dim);
    const int P = m->rot_dim / 2;
    free(a->fr_table);
    a->fr_table = mp_try_calloc((size_t)a->L * (size_t)(P + 1), sizeof(double));
    if (!a->fr_table) return mp_err_set(e, "out of memory for the RoPE tables (%d layers)", a->L);
    /* the table the forward pass uses at this S (fwd.c fwd_rope_tables): longrope's long one past
     * the original context, gemma3's local one in its sliding-window layers */
    const int long_on = m->inv_freq_long && m->rope_orig_ctx > 0 && a->S > m->rope_orig_ctx;
    for (int l = 0; l < m->n_layers && l < 256; l++) {
        const int li = a->layer_of[l];
        if (li < 0 || P == 0) continue;
        double *t = a->fr_table + (size_t)li * (P + 1);
        if (!rope || (m->rope_layer && !m->rope_layer[l])) continue; /* every angle 0, base 0 */
        const int local = m->inv_freq_local && m->layer_local && m->layer_local[l];
        const float *inv = local ? m->inv_freq_local : long_on ? m->inv_freq_long : m->inv_freq;
        for (int p = 0; p < P - unrotated; p++) t[p] = (double)inv[p];
        t[P] = local ? m->rope_local_theta : m->rope_theta;
    }
    return MP_OK;
}

void mp_probe_freq_like(MpProbeAcc *part, const MpProbeAcc *a) {
    part->fr_hs = a->fr_hs, part->fr_nkv = a->fr_nkv, part->fr_rot = a->fr_rot, part->fr_scale = a->fr_scale;
}

/* ================================================================ the row's functions */

int mp_probe_freq_dims(MpProbeAcc *a, MpErr *e) {
    if (a->fr_hs <= 0 || a->fr_nkv <= 0 || a->H % a->fr_nkv)
        return mp_err_set(e, "--stats freq reads the model's queries and keys: it needs a model's probe (not scores alone)");
    if (a->fr_rot < 2)
        return mp_err_set(e, "--stats freq: the model has no rotary dimensions (no positional encoding): no frequency pairs");
    return MP_OK;
}

int mp_probe_freq_scratch(MpProbeAcc *a) {
    a->fr_q = mp_try_malloc((size_t)a->S * a->H * a->fr_hs * sizeof(float));
    a->fr_seq = mp_try_malloc((size_t)a->H * FQ_N * (a->fr_rot / 2 + 1) * sizeof(double));
    return a->fr_q && a->fr_seq ? MP_OK : MP_ERR;
}

void mp_probe_freq_off(MpProbeAcc *a) {
    free(a->fr_q);
    free(a->fr_seq);
    free(a->fr_table);
    a->fr_q = NULL, a->fr_seq = NULL, a->fr_table = NULL;
}

uint64_t mp_probe_freq_scratch_bytes(const MpProbeAcc *a) {
    return 4 * (uint64_t)a->S * a->H * a->fr_hs + 8 * (uint64_t)a->H * FQ_N * (a->fr_rot / 2 + 1);
}

/* ================================================================ one sequence */

/* The mean over rows [0, T) of x [T, ld] of the norms of head g's pairs (dims p, p + P) and of its
 * unrotated dims [R, HS) together, into m [Q]. */
static void freq_norms(double *m, const float *x, int T, int ld, int g, int HS, int P) {
    const int R = 2 * P;
    for (int p = 0; p <= P; p++) m[p] = 0;
    for (int i = 0; i < T; i++) {
        const float *v = x + (size_t)i * ld + (size_t)g * HS;
        for (int p = 0; p < P; p++) m[p] += sqrt((double)v[p] * v[p] + (double)v[p + P] * v[p + P]);
        double r = 0;
        for (int d = R; d < HS; d++) r += (double)v[d] * v[d];
        m[P] += sqrt(r);
    }
    for (int p = 0; p <= P; p++) m[p] /= T;
}

/* Query head h's mean |contribution| of each pair (and of the unrotated block) over the observed
 * keys of the sampled rows, into c [Q]: q [T, H·HS] the queries, k [T, NKV·HS] the keys. */
static void freq_contrib_head(const MpProbeAcc *a, int li, int h, const float *q, const float *k, int T, double *c) {
    const int HS = a->fr_hs, P = a->fr_rot / 2, R = 2 * P, g = h / (a->H / a->fr_nkv);
    const size_t ldq = (size_t)a->H * HS, ldk = (size_t)a->fr_nkv * HS;
    const int rows = T <= MP_PROBE_FREQ_ROWS ? T : MP_PROBE_FREQ_ROWS;
    double pairs = 0;
    for (int p = 0; p <= P; p++) c[p] = 0;
    for (int r = 0; r < rows; r++) {
        const int i = rows == T ? r : (int)(((int64_t)2 * r + 1) * T / (2 * MP_PROBE_FREQ_ROWS));
        int lo, hi;
        mp_probe_acc_seq_keys(a, li, i, &lo, &hi);
        if (hi > T) hi = T;
        const float *qi = q + (size_t)i * ldq + (size_t)h * HS;
        for (int j = lo; j < hi; j++) {
            const float *kj = k + (size_t)j * ldk + (size_t)g * HS;
            for (int p = 0; p < P; p++) c[p] += fabs((double)qi[p] * kj[p] + (double)qi[p + P] * kj[p + P]);
            double d = 0;
            for (int x = R; x < HS; x++) d += (double)qi[x] * kj[x];
            c[P] += fabs(d);
        }
        pairs += hi > lo ? hi - lo : 0;
    }
    for (int p = 0; p <= P; p++) c[p] = pairs > 0 ? c[p] * a->fr_scale / pairs : 0.0;
}

/* Query head h's means into fr_seq's rows [3, Q], then into the sums (the value and its square). */
static void freq_head(MpProbeAcc *a, int li, int h, const float *k, int T) {
    const int H = a->H, HS = a->fr_hs, P = a->fr_rot / 2, Q = P + 1;
    double *s = a->fr_seq + (size_t)h * FQ_N * Q;
    freq_norms(s + (size_t)FQ_QN * Q, a->fr_q, T, H * HS, h, HS, P);
    freq_norms(s + (size_t)FQ_KN * Q, k, T, a->fr_nkv * HS, h / (H / a->fr_nkv), HS, P);
    freq_contrib_head(a, li, h, a->fr_q, k, T, s + (size_t)FQ_C * Q);
    double *sum = a->fr_sum + ((size_t)li * H + h) * 2 * FQ_N * Q;
    for (int w = 0; w < FQ_N; w++)
        for (int p = 0; p < Q; p++) {
            const double v = s[(size_t)w * Q + p];
            sum[(size_t)2 * w * Q + p] += v;
            sum[(size_t)(2 * w + 1) * Q + p] += v * v;
        }
}

/* The keys of slot li have come: every query head (in parallel when the work pays: each head
 * writes its own rows, so any thread count gives the same bits). */
static void freq_sequence(MpProbeAcc *a, int li, const float *k, int T) {
    const int rows = T < MP_PROBE_FREQ_ROWS ? T : MP_PROBE_FREQ_ROWS;
    const double work = (double)a->H * rows * T * a->fr_hs;
    FWD_PAR_FOR(work, for (int h = 0; h < a->H; h++) freq_head(a, li, h, k, T););
}

void mp_probe_freq_capture(MpProbeAcc *a, int li, int point, const float *x, int T, int width) {
    if (T <= 0 || T > a->S) return;
    if (point == MP_FWD_AT_Q) memcpy(a->fr_q, x, (size_t)T * width * sizeof(float));
    else if (point == MP_FWD_AT_K) freq_sequence(a, li, x, T);
}

/* ================================================================ results */

/* Columns [p0, p0 + n) of quantity w's mean over sequences (se 0) or its standard error, into
 * out[lh·os + oc + p] for lh < L·H (os the row stride, oc the first column). */
static void freq_fill(const MpProbeAcc *a, int w, int p0, int n, int se, double *out, int os, int oc) {
    const int Q = a->fr_rot / 2 + 1;
    const double N = (double)a->n_done;
    for (size_t lh = 0; lh < (size_t)a->L * a->H; lh++) {
        const double *s = a->fr_sum + lh * 2 * FQ_N * Q + (size_t)2 * w * Q, *s2 = s + Q;
        for (int p = 0; p < n; p++) {
            const double m = s[p0 + p] / N;
            double v = NAN;
            if (se && N >= 2) {
                const double var = (s2[p0 + p] - N * m * m) / (N - 1);
                v = sqrt((var > 0 ? var : 0.0) / N);
            }
            out[lh * os + oc + p] = se ? v : m;
        }
    }
}

/* out [L, H, P]: quantity w over the pairs */
static void freq_pairs(const MpProbeAcc *a, int w, int se, double *out) {
    freq_fill(a, w, 0, a->fr_rot / 2, se, out, a->fr_rot / 2, 0);
}
void mp_probe_freq_q_norm(const MpProbeAcc *a, double *out) { freq_pairs(a, FQ_QN, 0, out); }
void mp_probe_freq_q_norm_se(const MpProbeAcc *a, double *out) { freq_pairs(a, FQ_QN, 1, out); }
void mp_probe_freq_k_norm(const MpProbeAcc *a, double *out) { freq_pairs(a, FQ_KN, 0, out); }
void mp_probe_freq_k_norm_se(const MpProbeAcc *a, double *out) { freq_pairs(a, FQ_KN, 1, out); }
void mp_probe_freq_contrib(const MpProbeAcc *a, double *out) { freq_pairs(a, FQ_C, 0, out); }
void mp_probe_freq_contrib_se(const MpProbeAcc *a, double *out) { freq_pairs(a, FQ_C, 1, out); }

/* out [L, H, 3]: the unrotated block's three quantities (se: their standard errors). */
static void freq_rest_fill(const MpProbeAcc *a, int se, double *out) {
    for (int w = 0; w < FQ_N; w++) freq_fill(a, w, a->fr_rot / 2, 1, se, out, FQ_N, w);
}
void mp_probe_freq_rest(const MpProbeAcc *a, double *out) { freq_rest_fill(a, 0, out); }
void mp_probe_freq_rest_se(const MpProbeAcc *a, double *out) { freq_rest_fill(a, 1, out); }

void mp_probe_freq_table(const MpProbeAcc *a, double *out) {
    const int P = a->fr_rot / 2;
    for (int l = 0; l < a->L; l++)
        for (int p = 0; p < P; p++) out[(size_t)l * P + p] = a->fr_table ? a->fr_table[(size_t)l * (P + 1) + p] : NAN;
}

void mp_probe_freq_base(const MpProbeAcc *a, double *out) {
    const int P = a->fr_rot / 2;
    for (int l = 0; l < a->L; l++) out[l] = a->fr_table ? a->fr_table[(size_t)l * (P + 1) + P] : NAN;
}
