/* probe_freq_out.c — meta.json keys, the printed table and the heat maps of `probe --stats freq`;
 * see probe_freq_out.h.
 *
 * Shape legend: L selected layers, H query heads, P frequency pairs.
 */
#include "job/probe_freq_out.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"        /* mp_path_join */
#include "model/probe_freq.h" /* MP_PROBE_FREQ_ROWS */
#include "viz/plot.h"         /* mp_plot_render */

/* the row's outputs, in its table order (probe_acc.c) */
enum { FO_QN = 0, FO_QN_SE, FO_KN, FO_KN_SE, FO_C, FO_C_SE, FO_REST, FO_REST_SE, FO_ANGLE, FO_BASE };

/* P: the pairs of the run (the last dimension of freq_q_norm.npy). */
static int freq_pairs(const MpProbeResult *res) {
    for (int i = 0; i < res->n_outs; i++)
        if (res->outs[i].spec == &mp_probe_stats[MP_PROBE_STAT_FREQ].outs[FO_QN]) return (int)res->outs[i].shape[2];
    return 0;
}

/* Layer slot l's shares over heads: of the query norm in the low-frequency half of the pairs (p >=
 * P/2), of the mean |contribution| there, and the pair with the largest |contribution| summed
 * over heads. 0 when the run has no freq outputs. */
static int freq_shares(const MpProbeResult *res, int l, double *q_low, double *c_low, int *top) {
    const int P = freq_pairs(res), H = res->H;
    const double *qn = mp_probe_result_out(res, MP_PROBE_STAT_FREQ, FO_QN), *c = mp_probe_result_out(res, MP_PROBE_STAT_FREQ, FO_C);
    if (!qn || !c || P < 2) return 0;
    double qa = 0, ql = 0, ca = 0, cl = 0, best = -1;
    *top = 0;
    for (int p = 0; p < P; p++) {
        double cp = 0;
        for (int h = 0; h < H; h++) {
            const size_t x = ((size_t)l * H + h) * P + p;
            qa += qn[x], ca += c[x], cp += c[x];
            if (p >= P / 2) ql += qn[x], cl += c[x];
        }
        if (cp > best) best = cp, *top = p;
    }
    *q_low = qa > 0 ? ql / qa : NAN;
    *c_low = ca > 0 ? cl / ca : NAN;
    return 1;
}

void mp_probe_freq_meta(json_t *meta, const MpProbeResult *res) {
    json_t *q = json_array(), *c = json_array(), *t = json_array();
    double ql, cl;
    int top;
    for (int l = 0; l < res->L && freq_shares(res, l, &ql, &cl, &top); l++) {
        json_array_append_new(q, isfinite(ql) ? json_real(ql) : json_null());
        json_array_append_new(c, isfinite(cl) ? json_real(cl) : json_null());
        json_array_append_new(t, json_integer(top));
    }
    json_object_set_new(meta, "freq_low_half_q_norm_share", q);
    json_object_set_new(meta, "freq_low_half_contrib_share", c);
    json_object_set_new(meta, "freq_top_pair", t);
    json_object_set_new(meta, "freq_pairs", json_integer(freq_pairs(res)));
    json_object_set_new(meta, "freq_rows", json_integer(MP_PROBE_FREQ_ROWS));
    json_object_set_new(meta, "freq_of",
                        json_string("pair p = dims p and p + R/2 of a head (rotate-half; GGUF's interleaved pairs are "
                                    "un-permuted at load, so p is the frequency index in both), pair 0 the highest "
                                    "frequency; norms: mean over positions, then over sequences; |contribution|: mean "
                                    "over the observed keys of freq_rows query rows per sequence (all rows when S <= "
                                    "freq_rows, else floor((2r + 1) S / (2 freq_rows))), then over sequences; standard "
                                    "errors over sequences; docs/metrics.md"));
}

/* Per layer, over heads: freq_shares' three numbers, as meta.json holds them. */
void mp_probe_freq_print(FILE *f, const MpProbeResult *res) {
    const double *base = mp_probe_result_out(res, MP_PROBE_STAT_FREQ, FO_BASE);
    double ql, cl;
    int top;
    if (!base || !freq_shares(res, 0, &ql, &cl, &top)) return;
    fprintf(f, "RoPE frequency usage (%d pairs, pair 0 the highest frequency; shares over heads):\n", freq_pairs(res));
    fprintf(f, "  layer        base  q norm in low half  |contribution| in low half  top pair\n");
    for (int l = 0; l < res->L && freq_shares(res, l, &ql, &cl, &top); l++)
        fprintf(f, "  %5d  %10.6g  %18.3f  %26.3f  %8d\n", res->layers[l] + 1, base[l], ql, cl, top);
}

/* freq.png: per layer two panels [H, P], the query's norm and the pair's mean |contribution|. */
int mp_probe_freq_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    const int P = freq_pairs(res), H = res->H, L = res->L;
    const double *qn = mp_probe_result_out(res, MP_PROBE_STAT_FREQ, FO_QN), *c = mp_probe_result_out(res, MP_PROBE_STAT_FREQ, FO_C);
    if (!qn || !c || P < 1) return MP_OK;
    const int np = 2 * L < MP_PLOT_MAX_PANELS ? 2 * L : MP_PLOT_MAX_PANELS;
    MpPlotPanel *pn = calloc((size_t)np, sizeof *pn);
    if (!pn) return mp_err_set(e, "%s: out of memory for the figure", dir);
    for (int k = 0; k < np; k++) {
        const int l = k / 2;
        pn[k].map = (k % 2 ? c : qn) + (size_t)l * H * P;
        pn[k].rows = H, pn[k].cols = P;
        pn[k].group = k % 2;
        snprintf(pn[k].title, sizeof pn[k].title, "Layer %d: %s", res->layers[l] + 1, k % 2 ? "mean |contribution|" : "query norm");
    }
    MpPlotOptions o;
    mp_plot_options_default(&o);
    snprintf(o.title, sizeof o.title, "%.200s: RoPE frequency usage", res->title);
    snprintf(o.xlabel, sizeof o.xlabel, "frequency pair (0 = highest)");
    snprintf(o.ylabel, sizeof o.ylabel, "head (from 0)");
    o.cols = 2;
    char path[4096];
    int rc = mp_path_join(path, sizeof path, dir, "freq.png", e) ? MP_ERR : mp_plot_render(path, pn, np, &o, e);
    free(pn);
    if (rc == MP_OK)
        json_object_set_new(files, "freq.png", json_string("figure: per layer, head x frequency pair: the query's norm and "
                                                           "the pair's mean |contribution| to the score"));
    return rc;
}
