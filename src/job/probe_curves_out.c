/* probe_curves_out.c — var.png and pos.png of `probe --plot`; see probe_curves_out.h.
 *
 * Shape legend: L selected layers, S positions.
 */
#include "job/probe_curves_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/util.h"       /* mp_path_join */
#include "model/probe_pos.h" /* MP_PROBE_POS_*: pos_probe.npy's columns */
#include "model/probe_var.h" /* MP_PROBE_VAR_FIT_FROM */
#include "viz/plot.h"        /* mp_plot_lines, MpPlotSeries */

/* the variance row's outputs, in its table order (probe_acc.c) */
enum { VO_ATTN = 0, VO_ATTN_SE, VO_HEADS, VO_HEADS_SE, VO_RESID };

/* Line colours, one a layer (8 at most in a figure). */
static const double curve_rgb[8][3] = {{0.89, 0.10, 0.11}, {0.22, 0.49, 0.72}, {0.30, 0.69, 0.29}, {0.60, 0.31, 0.64},
                                       {1.00, 0.50, 0.00}, {0.65, 0.34, 0.16}, {0.97, 0.51, 0.75}, {0.40, 0.40, 0.40}};

int mp_probe_var_curve(const double *v, int S, int from, double *x, double *y) {
    const int n = S - from;
    for (int k = 0; k < n; k++) {
        const int i = from + k;
        x[k] = log2(i + 1.0);
        y[k] = v[i] > 0 ? log2(v[i]) : NAN;
    }
    return n;
}

/* One log-log figure of var [L, S] (the first 8 layers), slopes [L, 4] column col in the legend. */
static int var_figure(const MpProbeResult *res, const char *path, const char *what, const double *var, int col, MpErr *e) {
    const int S = res->S, from = MP_PROBE_VAR_FIT_FROM, ns = res->L < 8 ? res->L : 8;
    if (S - from < 2) return MP_OK; /* nothing to draw a line through */
    double *xy = malloc(sizeof(double) * 2 * (size_t)ns * (size_t)(S - from));
    if (!xy) return mp_err_set(e, "%s: out of memory for the figure", path);
    MpPlotSeries sr[8];
    char labels[8][64], title[300];
    for (int l = 0; l < ns; l++) {
        double *x = xy + (size_t)l * 2 * (S - from), *y = x + (S - from);
        const int n = mp_probe_var_curve(var + (size_t)l * S, S, from, x, y);
        const double b = res->var_slopes ? res->var_slopes[(size_t)l * 4 + col] : NAN;
        snprintf(labels[l], sizeof labels[l], "layer %d (slope %.2f)", res->layers[l] + 1, b);
        sr[l] = (MpPlotSeries){x, y, n, labels[l], {curve_rgb[l][0], curve_rgb[l][1], curve_rgb[l][2]}};
    }
    snprintf(title, sizeof title, "%.200s: variance of the %s by position", res->title, what);
    const int rc = mp_plot_lines(path, title, "log2(position + 1)", "log2 variance (slope -1: 1/position)", sr, ns, e);
    free(xy);
    return rc;
}

int mp_probe_var_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    const double *va = mp_probe_result_out(res, MP_PROBE_STAT_VARIANCE, VO_ATTN);
    const double *vr = mp_probe_result_out(res, MP_PROBE_STAT_VARIANCE, VO_RESID);
    char path[4096];
    if (!va || !vr) return MP_OK;
    if (mp_path_join(path, sizeof path, dir, "var.png", e) != MP_OK ||
        var_figure(res, path, "attention output (before o_proj, all heads)", va, 0, e) != MP_OK)
        return MP_ERR;
    json_object_set_new(files, "var.png", json_string("figure: log2 variance of the attention output (var_attn.npy) "
                                                      "against log2(position + 1), a line per layer, its slope in the legend"));
    if (mp_path_join(path, sizeof path, dir, "var_resid.png", e) != MP_OK ||
        var_figure(res, path, "residual stream after the layer", vr, 2, e) != MP_OK)
        return MP_ERR;
    json_object_set_new(files, "var_resid.png", json_string("figure: the same for the residual stream after the layer "
                                                            "(var_resid.npy)"));
    return MP_OK;
}

/* pos.png: per layer (x) the held-out R², R² ± se and the chance R²; pos_mae.png: MAE and chance. */
int mp_probe_pos_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    const double *o = mp_probe_result_out(res, MP_PROBE_STAT_POSITION, 0);
    const int L = res->L;
    if (!o || L < 1) return MP_OK;
    double *c = malloc(sizeof(double) * 7 * (size_t)L); /* layer, R², R² − se, R² + se, chance R², MAE, chance MAE */
    if (!c) return mp_err_set(e, "%s: out of memory for the figure", dir);
    double *x = c, *r2 = c + L, *lo = c + 2 * L, *hi = c + 3 * L, *ch = c + 4 * L, *mae = c + 5 * L, *mch = c + 6 * L;
    for (int l = 0; l < L; l++) {
        const double *r = o + (size_t)l * MP_PROBE_POS_COLS;
        x[l] = res->layers[l] + 1;
        r2[l] = r[MP_PROBE_POS_R2];
        lo[l] = r[MP_PROBE_POS_R2] - r[MP_PROBE_POS_R2_SE];
        hi[l] = r[MP_PROBE_POS_R2] + r[MP_PROBE_POS_R2_SE];
        ch[l] = r[MP_PROBE_POS_R2_CHANCE];
        mae[l] = r[MP_PROBE_POS_MAE];
        mch[l] = r[MP_PROBE_POS_MAE_CHANCE];
    }
    const MpPlotSeries s1[4] = {{x, lo, L, "R2 - se", {0.65, 0.78, 0.90}}, /* drawn first: R² over its band */
                                {x, hi, L, "R2 + se", {0.65, 0.78, 0.90}},
                                {x, ch, L, "chance (the fitted mean)", {0.40, 0.40, 0.40}},
                                {x, r2, L, "held-out R2", {0.22, 0.49, 0.72}}};
    const MpPlotSeries s2[2] = {{x, mae, L, "held-out MAE", {0.89, 0.10, 0.11}},
                                {x, mch, L, "chance (the fitted mean)", {0.40, 0.40, 0.40}}};
    char path[4096], title[300];
    snprintf(title, sizeof title, "%.200s: position probe from the residual stream", res->title);
    int rc = mp_path_join(path, sizeof path, dir, "pos.png", e);
    if (rc == MP_OK) rc = mp_plot_lines(path, title, "layer", "held-out R2 (1: position read exactly)", s1, 4, e);
    if (rc == MP_OK) rc = mp_path_join(path, sizeof path, dir, "pos_mae.png", e);
    if (rc == MP_OK) rc = mp_plot_lines(path, title, "layer", "mean absolute error (positions)", s2, 2, e);
    free(c);
    if (rc != MP_OK) return MP_ERR;
    json_object_set_new(files, "pos.png", json_string("figure: the position probe's held-out R2 per layer, R2 +- its "
                                                      "standard error, and the chance R2 (pos_probe.npy)"));
    json_object_set_new(files, "pos_mae.png", json_string("figure: the position probe's held-out mean absolute error per "
                                                          "layer (positions) and its chance level (pos_probe.npy)"));
    return MP_OK;
}
