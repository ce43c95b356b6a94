/* probe_var.c — the variance statistic of probe_var.h: each sequence's moments over dimensions at the
 * capture points ATTN_MIX and LAYER_OUT added to the sums of MpProbeAcc, and the variances, their
 * standard errors and the log-log slopes computed from them.
 * Does not: allocate, merge or checkpoint the sums (probe_acc.c's table), write files.
 * Tested by: tests/test_probe_var.c, tests/test_probe_table.c.
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, M = 5 moments,
 * G = 16 groups, J = 6 rows per group.
 */
#include "model/probe_var.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_try_malloc */
#include "model/fwd.h" /* MP_FWD_AT_ATTN_MIX, MP_FWD_AT_LAYER_OUT */

enum { VM = MP_PROBE_VAR_MOMENTS, VG = MP_PROBE_VAR_GROUPS, VJ = MP_PROBE_VAR_GROUP_ROWS };

/* ================================================================ sums */

int mp_probe_var_scratch(MpProbeAcc *a) {
    a->vscr = mp_try_malloc(2 * (size_t)a->S * sizeof(double));
    return a->vscr ? MP_OK : MP_ERR;
}

void mp_probe_var_off(MpProbeAcc *a) { free(a->vscr); }

uint64_t mp_probe_var_scratch_bytes(const MpProbeAcc *a) { return 16 * (uint64_t)a->S; }

/* One sequence's rows [0, T) of x [T, width], dimensions [d0, d0 + n) of each: per position the mean
 * of the values u1 and of their squares u2 (dimensions ascending, in double) added to the moments mo
 * [M, S] (Σu1, Σu2, Σu1², Σu2², Σu1·u2); u1, u2 also into u [2, S] when u is not NULL. */
static void var_add(double *mo, int S, const float *x, int T, int width, int d0, int n, double *u) {
    for (int i = 0; i < T; i++) {
        const float *r = x + (size_t)i * width + d0;
        double t1 = 0, t2 = 0;
        for (int d = 0; d < n; d++) {
            const double v = (double)r[d];
            t1 += v;
            t2 += v * v;
        }
        const double u1 = t1 / n, u2 = t2 / n;
        mo[i] += u1;
        mo[(size_t)S + i] += u2;
        mo[2 * (size_t)S + i] += u1 * u1;
        mo[3 * (size_t)S + i] += u2 * u2;
        mo[4 * (size_t)S + i] += u1 * u2;
        if (u) u[i] = u1, u[(size_t)S + i] = u2;
    }
}

/* The group of a sequence: FNV-1a of its u2 [T] rounded to float (the same bits wherever it was
 * summed), its high bits modulo G. */
static int var_group(const double *u2, int T) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < T; i++) {
        const float f = (float)u2[i];
        unsigned char b[sizeof f];
        memcpy(b, &f, sizeof f);
        for (size_t k = 0; k < sizeof f; k++) h = (h ^ b[k]) * 1099511628211ULL;
    }
    return (int)((h >> 40) % VG);
}

/* u [2, S] of one sequence into its group's rows q·3 .. q·3+2 (Σu1, Σu2, count) of slot li. */
static void var_group_add(MpProbeAcc *a, int li, int q, const double *u, int T) {
    const size_t S = (size_t)a->S;
    double *g = a->vgroup + ((size_t)li * VG + var_group(u + S, T)) * VJ * S + (size_t)q * 3 * S;
    for (int i = 0; i < T; i++) {
        g[i] += u[i];
        g[S + i] += u[S + i];
        g[2 * S + i] += 1.0;
    }
}

void mp_probe_var_capture(MpProbeAcc *a, int li, int point, const float *x, int T, int width) {
    const int S = a->S, H = a->H;
    const size_t MS = (size_t)VM * S;
    if (point == MP_FWD_AT_ATTN_MIX) {
        const int hs = width / H;
        for (int h = 0; h < H; h++) var_add(a->vheads + ((size_t)li * H + h) * MS, S, x, T, width, h * hs, hs, NULL);
        var_add(a->vattn + (size_t)li * MS, S, x, T, width, 0, width, a->vscr);
        var_group_add(a, li, 0, a->vscr, T);
    } else if (point == MP_FWD_AT_LAYER_OUT) {
        var_add(a->vresid + (size_t)li * MS, S, x, T, width, 0, width, a->vscr);
        var_group_add(a, li, 1, a->vscr, T);
    }
}

/* ================================================================ results */

/* Position i's variance over n sequences and the dimensions from the moments mo [M, S]. */
static double var_of(const double *mo, int S, int i, double n) {
    const double m1 = mo[i] / n, m2 = mo[(size_t)S + i] / n;
    return m2 - m1 * m1;
}

/* Its standard error: the sample variance over sequences of u2 − 2·m1·u1 (the delta method of
 * m2 − m1²), over n; NaN below 2 sequences. */
static double var_se(const double *mo, int S, int i, double n) {
    if (!(n >= 2)) return NAN;
    const double m1 = mo[i] / n, m2 = mo[(size_t)S + i] / n;
    const double v11 = (mo[2 * (size_t)S + i] - n * m1 * m1) / (n - 1), v22 = (mo[3 * (size_t)S + i] - n * m2 * m2) / (n - 1);
    const double v12 = (mo[4 * (size_t)S + i] - n * m1 * m2) / (n - 1);
    const double vz = v22 - 4 * m1 * v12 + 4 * m1 * m1 * v11;
    return sqrt((vz > 0 ? vz : 0.0) / n);
}

/* out [maps, S] from the moments [maps, M, S]: the variances (se 0) or their standard errors. */
static void var_fill(const double *mo, size_t maps, int S, double n, int se, double *out) {
    for (size_t m = 0; m < maps; m++)
        for (int i = 0; i < S; i++)
            out[m * S + i] = se ? var_se(mo + m * VM * S, S, i, n) : var_of(mo + m * VM * S, S, i, n);
}

void mp_probe_var_attn(const MpProbeAcc *a, double *out) { var_fill(a->vattn, a->L, a->S, (double)a->n_done, 0, out); }
void mp_probe_var_attn_se(const MpProbeAcc *a, double *out) { var_fill(a->vattn, a->L, a->S, (double)a->n_done, 1, out); }
void mp_probe_var_heads(const MpProbeAcc *a, double *out) {
    var_fill(a->vheads, (size_t)a->L * a->H, a->S, (double)a->n_done, 0, out);
}
void mp_probe_var_heads_se(const MpProbeAcc *a, double *out) {
    var_fill(a->vheads, (size_t)a->L * a->H, a->S, (double)a->n_done, 1, out);
}
/* The sequences whose residual stream slot li read (one in resid_stride of the run's: MpProbeAcc):
 * the groups' counts at position 0, which every sequence has. */
double mp_probe_var_resid_n(const MpProbeAcc *a, int li) {
    const size_t S = (size_t)a->S;
    double n = 0;
    for (int g = 0; g < VG; g++) n += a->vgroup[((size_t)li * VG + g) * VJ * S + (1 * 3 + 2) * S]; /* q = 1's count row */
    return n;
}

static void var_resid_fill(const MpProbeAcc *a, int se, double *out) {
    for (int l = 0; l < a->L; l++)
        var_fill(a->vresid + (size_t)l * VM * a->S, 1, a->S, mp_probe_var_resid_n(a, l), se, out + (size_t)l * a->S);
}
void mp_probe_var_resid(const MpProbeAcc *a, double *out) { var_resid_fill(a, 0, out); }
void mp_probe_var_resid_se(const MpProbeAcc *a, double *out) { var_resid_fill(a, 1, out); }

double mp_probe_var_loglog_slope(const double *v, int S, int from) {
    const int n = S - from;
    if (n < 2) return NAN;
    double sx = 0, sy = 0;
    for (int i = from; i < S; i++) {
        if (!(v[i] > 0)) return NAN;
        sx += log(i + 1.0);
        sy += log(v[i]);
    }
    const double mx = sx / n, my = sy / n;
    double sxy = 0, sxx = 0;
    for (int i = from; i < S; i++) {
        const double dx = log(i + 1.0) - mx;
        sxy += dx * (log(v[i]) - my);
        sxx += dx * dx;
    }
    return sxy / sxx;
}

/* Slot li's slope of the moments mo [M, S] (q = 0 the attention output, 1 the residual stream) and
 * its delete-a-group jackknife standard error, v [S] scratch. */
static void var_slope(const MpProbeAcc *a, int li, int q, const double *mo, double *v, double *slope, double *se) {
    const int S = a->S;
    const double n = q ? mp_probe_var_resid_n(a, li) : (double)a->n_done;
    for (int i = 0; i < S; i++) v[i] = var_of(mo, S, i, n);
    *slope = mp_probe_var_loglog_slope(v, S, MP_PROBE_VAR_FIT_FROM);
    double b[VG];
    int k = 0;
    for (int g = 0; g < VG; g++) {
        const double *gr = a->vgroup + ((size_t)li * VG + g) * VJ * S + (size_t)q * 3 * S;
        const double rest = n - gr[2 * (size_t)S];
        if (gr[2 * (size_t)S] <= 0 || rest < 1) continue; /* an empty group, or every sequence in it */
        for (int i = 0; i < S; i++) {
            const double m1 = (mo[i] - gr[i]) / rest;
            v[i] = (mo[(size_t)S + i] - gr[(size_t)S + i]) / rest - m1 * m1;
        }
        b[k++] = mp_probe_var_loglog_slope(v, S, MP_PROBE_VAR_FIT_FROM);
    }
    double mean = 0, ss = 0;
    for (int g = 0; g < k; g++) mean += b[g] / k;
    for (int g = 0; g < k; g++) ss += (b[g] - mean) * (b[g] - mean);
    *se = k >= 2 ? sqrt((k - 1.0) / k * ss) : NAN;
}

void mp_probe_var_slopes(const MpProbeAcc *a, double *slopes, double *scratch) {
    const size_t MS = (size_t)VM * a->S;
    for (int l = 0; l < a->L; l++) {
        double *o = slopes + (size_t)l * 4;
        var_slope(a, l, 0, a->vattn + l * MS, scratch, &o[0], &o[1]);
        var_slope(a, l, 1, a->vresid + l * MS, scratch, &o[2], &o[3]);
    }
}
