/* probe_pos.c — the position probe of probe_pos.h: each sequence's sampled residual-stream features
 * at the capture point LAYER_OUT added to the sums of MpProbeAcc per split, and the ridge fit and its
 * held-out scores computed from them.
 * Does not: allocate, merge or checkpoint the sums (probe_acc.c's table), write files.
 * Tested by: tests/test_probe_pos.c, tests/test_probe_table.c.
 *
 * ================================================================ layout
 *   hashes    the projection's signs, the sampled positions' offset
 *   sums      dims, scratch, the capture
 *   fit       the ridge solve and the held-out scores
 *
 * Shape legend: L selected layers, S tokens per sequence, C the residual stream's width, K features,
 * W = 3 + 2K + K² sums per split, M = MP_PROBE_POS_MAE_ROWS, Q = MP_PROBE_POS_COLS.
 */
#include "model/probe_pos.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_try_malloc, mp_try_calloc */
#include "model/fwd.h" /* MP_FWD_AT_LAYER_OUT */

/* ================================================================ hashes */

/* splitmix64's finaliser (Steele et al. 2014): a fixed bijection of 64-bit words. */
static uint64_t pos_mix(uint64_t x) {
    uint64_t z = x + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

int mp_probe_pos_feature(int d, double *sign) {
    const uint64_t h = pos_mix((uint64_t)d);
    *sign = h >> 63 ? -1.0 : 1.0;
    return (int)(h & 0x7fffffffu);
}

int mp_probe_pos_offset(int64_t s, int stride) { return (int)(pos_mix((uint64_t)s) % (uint64_t)stride); }

/* ================================================================ sums */

/* W, the sums per split, of K features. */
static size_t pos_w(int K) { return 3 + 2 * (size_t)K + (size_t)K * K; }

/* The index of the sequence at hand among those that read the residual stream (every
 * resid_stride-th of the run's): its split, its offset and its group go by it. */
static int64_t pos_seq(const MpProbeAcc *a) { return a->resid_stride > 1 ? a->seq_index / a->resid_stride : a->seq_index; }

/* The sampled positions of one sequence at most (every stride-th of S, from any offset). */
static int pos_per_seq(const MpProbeAcc *a) { return (a->S + a->pos_stride - 1) / a->pos_stride; }

int mp_probe_pos_dims(MpProbeAcc *a, MpErr *e) {
    if (a->pos_dim < 0 || a->pos_width < 0 || a->pos_stride < 0 || !(a->pos_ridge >= 0))
        return mp_err_set(e, "position probe: negative settings (dim %d, width %d, stride %d, ridge %g)", a->pos_dim,
                          a->pos_width, a->pos_stride, a->pos_ridge);
    if (!a->pos_width) a->pos_width = a->pos_dim ? a->pos_dim : MP_PROBE_POS_DIM_DEFAULT; /* fed no captures of a model */
    if (!a->pos_dim || a->pos_dim > a->pos_width) a->pos_dim = a->pos_width;
    if (!a->pos_stride) a->pos_stride = MP_PROBE_POS_STRIDE_DEFAULT;
    if (!(a->pos_ridge > 0)) a->pos_ridge = MP_PROBE_POS_RIDGE_DEFAULT;
    if (a->pos_dim > 46340) return mp_err_set(e, "position probe: %d features is too many (K² sums)", a->pos_dim);
    return MP_OK;
}

int mp_probe_pos_scratch(MpProbeAcc *a) {
    const int K = a->pos_dim, C = a->pos_width;
    a->pos_z = mp_try_malloc((size_t)pos_per_seq(a) * K * sizeof(double));
    a->pos_seq = mp_try_malloc(pos_w(K) * sizeof(double));
    if (K < C) {
        a->pos_map = mp_try_malloc((size_t)C * sizeof(int32_t));
        a->pos_sign = mp_try_malloc((size_t)C * sizeof(double));
        for (int d = 0; a->pos_map && a->pos_sign && d < C; d++) a->pos_map[d] = mp_probe_pos_feature(d, &a->pos_sign[d]) % K;
    }
    return a->pos_z && a->pos_seq && (K == C || (a->pos_map && a->pos_sign)) ? MP_OK : MP_ERR;
}

void mp_probe_pos_off(MpProbeAcc *a) {
    free(a->pos_z);
    free(a->pos_seq);
    free(a->pos_map);
    free(a->pos_sign);
}

uint64_t mp_probe_pos_scratch_bytes(const MpProbeAcc *a) {
    const uint64_t K = (uint64_t)a->pos_dim, C = (uint64_t)a->pos_width;
    return 8 * ((uint64_t)pos_per_seq(a) * K + pos_w((int)K)) + (K < C ? 12 * C : 0);
}

uint64_t mp_probe_pos_out_bytes(const MpProbeAcc *a) {
    return 8 * (pos_w(a->pos_dim) + (uint64_t)a->pos_dim); /* w [K] and the solve's [K, K] (the jackknife's [W]) */
}

/* Row x [C] into the features z [K]: each dimension's value with its sign added to its feature
 * (every feature's sum in ascending dimensions, in double), or x itself when K = C. */
static void pos_features(const MpProbeAcc *a, const float *x, double *z) {
    const int K = a->pos_dim, C = a->pos_width;
    if (!a->pos_map) {
        for (int d = 0; d < C; d++) z[d] = (double)x[d];
        return;
    }
    memset(z, 0, (size_t)K * sizeof(double));
    for (int d = 0; d < C; d++) z[a->pos_map[d]] += a->pos_sign[d] * (double)x[d];
}

/* One sequence's P sampled rows z [P, K], row p at position off + p·stride: its sums formed from 0.0
 * into pos_seq, then added once to split sp of slot li (the same bits whether a part or the whole
 * run adds them). */
static void pos_add(MpProbeAcc *a, int li, int sp, const double *z, int off, int P) {
    const int K = a->pos_dim;
    const size_t W = pos_w(K);
    double *q = a->pos_seq, *sz = q + 3, *szy = sz + K, *szz = szy + K;
    memset(q, 0, W * sizeof(double));
    for (int p = 0; p < P; p++) {
        const double y = off + (double)p * a->pos_stride, *zp = z + (size_t)p * K;
        q[0] += 1.0;
        q[1] += y;
        q[2] += y * y;
        for (int j = 0; j < K; j++) {
            sz[j] += zp[j];
            szy[j] += zp[j] * y;
        }
    }
    for (int j = 0; j < K; j++) /* the upper triangle, positions ascending */
        for (int p = 0; p < P; p++) {
            const double *zp = z + (size_t)p * K, zj = zp[j];
            double *row = szz + (size_t)j * K;
            for (int l = j; l < K; l++) row[l] += zj * zp[l];
        }
    const size_t rows = 2 + (size_t)mp_probe_pos_groups(K);
    double *dst = a->pos_sums + ((size_t)li * rows + (size_t)sp) * W;
    for (size_t k = 0; k < W; k++) dst[k] += q[k];
    if (sp && rows > 2) { /* a held-out sequence: also its group's sums (the jackknife of R²) */
        double *g = a->pos_sums + ((size_t)li * rows + 2 + (size_t)(pos_seq(a) / MP_PROBE_POS_FOLDS % MP_PROBE_POS_GROUPS)) * W;
        for (size_t k = 0; k < W; k++) g[k] += q[k];
    }
}

int mp_probe_pos_groups(int K) { return K <= MP_PROBE_POS_GROUP_MAX_DIM ? MP_PROBE_POS_GROUPS : 0; }

void mp_probe_pos_capture(MpProbeAcc *a, int li, int point, const float *x, int T, int width) {
    if (point != MP_FWD_AT_LAYER_OUT) return;
    MP_ASSERT(width == a->pos_width && a->seq_index >= 0);
    const int64_t j = pos_seq(a); /* the sequence's index among those that read the residual stream */
    const int K = a->pos_dim, stride = a->pos_stride, held = mp_probe_pos_held_out(j);
    const int len = a->cur_len > 0 && a->cur_len < T ? a->cur_len : T, off = mp_probe_pos_offset(j, stride);
    int P = 0;
    for (int i = off; i < len; i += stride, P++) pos_features(a, x + (size_t)i * width, a->pos_z + (size_t)P * K);
    pos_add(a, li, held, a->pos_z, off, P);
    if (!held) return;
    /* its rows of the held-out store: the first M held-out positions in sequence order */
    const int64_t first = j / MP_PROBE_POS_FOLDS * (int64_t)pos_per_seq(a);
    for (int p = 0; p < P && first + p < MP_PROBE_POS_MAE_ROWS; p++) {
        double *row = a->pos_test + ((size_t)li * MP_PROBE_POS_MAE_ROWS + (size_t)(first + p)) * (size_t)(K + 1);
        memcpy(row, a->pos_z + (size_t)p * K, (size_t)K * sizeof(double));
        row[K] = off + (double)p * stride + 1.0;
    }
}

/* ================================================================ fit */

/* A [K, K] (symmetric, lower triangle read) into its Cholesky factor in the lower triangle; 0 when
 * A is not positive definite. */
static int pos_cholesky(double *A, int K) {
    for (int j = 0; j < K; j++) {
        double d = A[(size_t)j * K + j];
        for (int k = 0; k < j; k++) d -= A[(size_t)j * K + k] * A[(size_t)j * K + k];
        if (!(d > 0)) return 0;
        d = sqrt(d);
        A[(size_t)j * K + j] = d;
        for (int i = j + 1; i < K; i++) {
            double t = A[(size_t)i * K + j];
            for (int k = 0; k < j; k++) t -= A[(size_t)i * K + k] * A[(size_t)j * K + k];
            A[(size_t)i * K + j] = t / d;
        }
    }
    return 1;
}

/* x [K] = (G Gᵀ)⁻¹ x for G the lower factor of pos_cholesky. */
static void pos_chol_solve(const double *G, int K, double *x) {
    for (int i = 0; i < K; i++) {
        double t = x[i];
        for (int k = 0; k < i; k++) t -= G[(size_t)i * K + k] * x[k];
        x[i] = t / G[(size_t)i * K + i];
    }
    for (int i = K - 1; i >= 0; i--) {
        double t = x[i];
        for (int k = i + 1; k < K; k++) t -= G[(size_t)k * K + i] * x[k];
        x[i] = t / G[(size_t)i * K + i];
    }
}

/* Σ over a split's positions of (i − b − w·z)² from its sums s [W]. */
static double pos_sse(const double *s, int K, const double *w, double b) {
    const double *sz = s + 3, *szy = sz + K, *szz = szy + K;
    double wzy = 0, wz = 0, q = 0;
    for (int j = 0; j < K; j++) {
        wzy += w[j] * szy[j];
        wz += w[j] * sz[j];
        double r = 0;
        for (int l = j + 1; l < K; l++) r += w[l] * szz[(size_t)j * K + l];
        q += w[j] * (w[j] * szz[(size_t)j * K + j] + 2 * r);
    }
    return s[2] - 2 * (b * s[1] + wzy) + s[0] * b * b + 2 * b * wz + q;
}

/* Σ over a split's positions of (i − its mean)². */
static double pos_sst(const double *s) { return s[2] - s[1] * s[1] / s[0]; }

/* The ridge fit of slot li from the fitting split f [W]: w [K], the intercept, λ (G [K, K] scratch).
 * 0 when it cannot be solved (w left 0: the mean). */
static int pos_fit(const MpProbeAcc *a, const double *f, double *w, double *b, double *lambda, double *G) {
    const int K = a->pos_dim;
    const double n = f[0], ybar = f[1] / n, *sz = f + 3, *szy = sz + K, *szz = szy + K;
    double tr = 0;
    for (int j = 0; j < K; j++)
        for (int l = j; l < K; l++) { /* the centred Gram matrix, lower triangle */
            const double c = szz[(size_t)j * K + l] - sz[j] * sz[l] / n;
            G[(size_t)l * K + j] = c;
            if (l == j) tr += c;
        }
    *lambda = a->pos_ridge * tr / K;
    for (int j = 0; j < K; j++) {
        G[(size_t)j * K + j] += *lambda;
        w[j] = szy[j] - sz[j] * ybar;
    }
    int ok = tr > 0 && pos_cholesky(G, K);
    if (ok) pos_chol_solve(G, K, w);
    else memset(w, 0, (size_t)K * sizeof(double));
    double wm = 0;
    for (int j = 0; j < K; j++) wm += w[j] * sz[j] / n;
    *b = ybar - wm;
    return ok;
}

/* Slot li's mean absolute errors over its stored held-out rows: o's MAE, its se, chance, count. */
static void pos_mae(const MpProbeAcc *a, int li, const double *w, double b, double ybar, double *o) {
    const int K = a->pos_dim;
    double s = 0, ss = 0, sc = 0, m = 0;
    for (int r = 0; r < MP_PROBE_POS_MAE_ROWS; r++) {
        const double *row = a->pos_test + ((size_t)li * MP_PROBE_POS_MAE_ROWS + (size_t)r) * (size_t)(K + 1);
        if (!(row[K] > 0)) continue;
        const double y = row[K] - 1.0;
        double p = b;
        for (int j = 0; j < K; j++) p += w[j] * row[j];
        const double e = fabs(y - p);
        s += e, ss += e * e, sc += fabs(y - ybar), m += 1;
    }
    o[MP_PROBE_POS_N_MAE] = m;
    o[MP_PROBE_POS_MAE] = m > 0 ? s / m : NAN;
    o[MP_PROBE_POS_MAE_CHANCE] = m > 0 ? sc / m : NAN;
    const double v = m > 1 ? (ss - s * s / m) / (m - 1) : NAN;
    o[MP_PROBE_POS_MAE_SE] = m > 1 ? sqrt((v > 0 ? v : 0) / m) : NAN;
}

/* The held-out R²'s delete-a-group jackknife standard error from the held-out sums t [W] and the
 * groups' gs [G, W] (d [W] scratch): over the non-empty groups g, R² of t − gs[g]; NaN below 2. */
static double pos_r2_se(const MpProbeAcc *a, const double *t, const double *gs, int G, const double *w, double b, double *d) {
    const int K = a->pos_dim;
    const size_t W = pos_w(K);
    double r[MP_PROBE_POS_GROUPS], m = 0;
    int n = 0;
    for (int g = 0; g < G; g++) {
        const double *s = gs + (size_t)g * W;
        if (!(s[0] > 0)) continue;
        for (size_t k = 0; k < W; k++) d[k] = t[k] - s[k];
        if (!(d[0] >= 2)) return NAN; /* a group holds all but one held-out position: no R² without it */
        r[n] = 1 - pos_sse(d, K, w, b) / pos_sst(d);
        m += r[n++];
    }
    if (n < 2) return NAN;
    m /= n;
    double ss = 0;
    for (int g = 0; g < n; g++) ss += (r[g] - m) * (r[g] - m);
    return sqrt((n - 1.0) / n * ss);
}

/* Slot li's row o [Q] (w [K], G [K, K] scratch: also the jackknife's [W] when its groups are kept). */
static void pos_layer(const MpProbeAcc *a, int li, double *o, double *w, double *G) {
    const int K = a->pos_dim, ng = mp_probe_pos_groups(K);
    const size_t W = pos_w(K);
    const double *f = a->pos_sums + (size_t)li * (2 + (size_t)ng) * W, *t = f + W;
    for (int c = 0; c < MP_PROBE_POS_COLS; c++) o[c] = NAN;
    o[MP_PROBE_POS_N_FIT] = f[0];
    o[MP_PROBE_POS_N_TEST] = t[0];
    o[MP_PROBE_POS_N_MAE] = 0;
    if (!(f[0] >= 2)) return;
    double b, lambda;
    pos_fit(a, f, w, &b, &lambda, G);
    const double ybar = f[1] / f[0];
    o[MP_PROBE_POS_LAMBDA] = lambda;
    o[MP_PROBE_POS_R2_FIT] = 1 - pos_sse(f, K, w, b) / pos_sst(f);
    if (t[0] >= 2) {
        const double sst = pos_sst(t);
        o[MP_PROBE_POS_R2] = 1 - pos_sse(t, K, w, b) / sst;
        o[MP_PROBE_POS_R2_CHANCE] = 1 - (t[2] - 2 * ybar * t[1] + t[0] * ybar * ybar) / sst;
        if (ng) o[MP_PROBE_POS_R2_SE] = pos_r2_se(a, t, t + W, ng, w, b, G);
    }
    pos_mae(a, li, w, b, ybar, o);
}

void mp_probe_pos_out(const MpProbeAcc *a, double *out) {
    const int K = a->pos_dim;
    double *w = mp_try_malloc((size_t)K * sizeof(double)), *G = mp_try_malloc(pos_w(K) * sizeof(double)); /* [K, K], then the jackknife's [W] */
    for (int l = 0; l < a->L; l++) {
        double *o = out + (size_t)l * MP_PROBE_POS_COLS;
        if (w && G) pos_layer(a, l, o, w, G);
        else
            for (int c = 0; c < MP_PROBE_POS_COLS; c++) o[c] = NAN; /* out of memory for the solve: no fit */
    }
    free(w);
    free(G);
}
