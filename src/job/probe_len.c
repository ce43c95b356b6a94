/* probe_len.c — see probe_len.h. */
#include "job/probe_len.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"           /* mp_path_join */
#include "model/probe_recency.h" /* mp_probe_recency_results */
#include "viz/plot.h"            /* mp_plot_lines */

static json_t *len_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* [rows][cols] of doubles as nested JSON arrays (non-finite: null). */
static json_t *len_json_2d(const double *v, int rows, int cols) {
    json_t *arr = json_array();
    for (int r = 0; r < rows; r++) {
        json_t *row = json_array();
        for (int c = 0; c < cols; c++) json_array_append_new(row, len_real(v[(size_t)r * cols + c]));
        json_array_append_new(arr, row);
    }
    return arr;
}

/* [n] doubles as a JSON array (non-finite: null): a per-layer series, as simulate writes them. */
static json_t *len_json_1d(const double *v, int n) {
    json_t *arr = json_array();
    for (int k = 0; k < n; k++) json_array_append_new(arr, len_real(v[k]));
    return arr;
}

/* One line per layer (at most 8) of y [L, n] against x [n]. */
static int len_plot(const char *dir, const char *file, const char *title, const char *xlabel, const char *ylabel,
                    const double *x, const double *y, int L, int n, const int *layers, MpErr *e) {
    static const double colours[8][3] = {{0.89, 0.10, 0.11}, {0.22, 0.49, 0.72}, {0.30, 0.69, 0.29}, {0.60, 0.31, 0.64},
                                         {1.00, 0.50, 0.00}, {0.65, 0.34, 0.16}, {0.97, 0.51, 0.75}, {0.40, 0.40, 0.40}};
    MpPlotSeries sr[8];
    char labels[8][32], path[4096];
    const int ns = L < 8 ? L : 8;
    for (int l = 0; l < ns; l++) {
        snprintf(labels[l], sizeof labels[l], "layer %d", layers[l] + 1);
        sr[l] = (MpPlotSeries){x, y + (size_t)l * n, n, labels[l], {colours[l][0], colours[l][1], colours[l][2]}};
    }
    if (mp_path_join(path, sizeof path, dir, file, e) != MP_OK) return MP_ERR;
    return mp_plot_lines(path, title, xlabel, ylabel, sr, ns, e);
}

static int len_figures(const char *dir, const MpProbeRecencyOut *o, const int *layers, const char *title, MpErr *e) {
    double x[24], *pos = malloc((size_t)o->S * sizeof *pos);
    if (!pos) return mp_err_set(e, "out of memory");
    for (int k = 0; k < o->K; k++) x[k] = o->lens[k];
    for (int i = 0; i < o->S; i++) pos[i] = i;
    char t[4][300];
    snprintf(t[0], sizeof t[0], "%.200s: non-relative index of the first S' positions", title);
    snprintf(t[1], sizeof t[1], "%.200s: residue block z of the first S' positions", title);
    snprintf(t[2], sizeof t[2], "%.200s: recency probability of the first S' positions", title);
    snprintf(t[3], sizeof t[3], "%.200s: residue against the distance from the start", title);
    int rc = len_plot(dir, "length_nri.png", t[0], "length S'", "NRI", x, o->len_nri, o->L, o->K, layers, e);
    if (rc == MP_OK) rc = len_plot(dir, "length_block_z.png", t[1], "length S'", "block z", x, o->len_block_z, o->L, o->K, layers, e);
    if (rc == MP_OK) rc = len_plot(dir, "length_rp.png", t[2], "length S'", "recency probability", x, o->len_rp, o->L, o->K, layers, e);
    if (rc == MP_OK)
        rc = len_plot(dir, "residue_by_position.png", t[3], "query position", "residue rms / standard error", pos, o->pos_z,
                      o->L, o->S, layers, e);
    free(pos);
    return rc;
}

void mp_probe_len_print(FILE *f, const MpProbeRecencyOut *o, const int *layers) {
    fprintf(f, "recency probability (share of key triples j<k<i from position %d with score(i,k) > score(i,j)):\n", o->first);
    fprintf(f, "%6s %12s %10s %14s %12s %12s\n", "layer", "RP per seq", "se", "RP mean map", "head min", "head max");
    for (int l = 0; l < o->L; l++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int h = 0; h < o->H; h++) {
            const double v = o->rp_heads[l * o->H + h];
            lo = v < lo ? v : lo, hi = v > hi ? v : hi;
        }
        fprintf(f, "%6d %12.5f %10.5f %14.5f %12.5f %12.5f\n", layers[l] + 1, o->rp[l], o->rp_se[l], o->rp_map[l], lo, hi);
    }
    fprintf(f, "by length S' (the first S' positions of every sequence = the S'-token prefixes): NRI / block z / RP\n");
    fprintf(f, "%6s", "layer");
    for (int k = 0; k < o->K; k++) fprintf(f, " %20d", o->lens[k]);
    fprintf(f, "\n");
    for (int l = 0; l < o->L; l++) {
        fprintf(f, "%6d", layers[l] + 1);
        for (int k = 0; k < o->K; k++)
            fprintf(f, " %6.4f/%6.2f/%6.4f", o->len_nri[l * o->K + k], o->len_block_z[l * o->K + k], o->len_rp[l * o->K + k]);
        fprintf(f, "\n");
    }
}

void mp_probe_len_meta(json_t *meta, const MpProbeRecencyOut *o) {
    const int L = o->L, H = o->H, K = o->K;
    json_object_set_new(meta, "recency_probability", len_json_1d(o->rp, L)); /* [L] (was [[L]] before issue 39) */
    json_object_set_new(meta, "recency_probability_se", len_json_1d(o->rp_se, L));
    json_object_set_new(meta, "recency_probability_heads", len_json_2d(o->rp_heads, L, H));
    json_object_set_new(meta, "recency_probability_heads_se", len_json_2d(o->rp_heads_se, L, H));
    json_object_set_new(meta, "recency_probability_mean_map", len_json_1d(o->rp_map, L));
    if (o->rp_map_heads) json_object_set_new(meta, "recency_probability_mean_map_heads", len_json_2d(o->rp_map_heads, L, H));
    json_object_set_new(meta, "recency_first_position", json_integer(o->first));
    json_object_set_new(meta, "recency_probability_of",
                        json_string("share of key triples j<k<i (positions from recency_first_position) with "
                                    "score(i,k) > score(i,j), over sequences (and heads); per sequence as the later "
                                    "paper defines it, _mean_map: of the mean map; se: over sequences"));
    json_t *len = json_object(), *ls = json_array();
    for (int k = 0; k < K; k++) json_array_append_new(ls, json_integer(o->lens[k]));
    json_object_set_new(len, "lengths", ls);
    json_object_set_new(len, "nri", len_json_2d(o->len_nri, L, K));
    json_object_set_new(len, "residue_block_z", len_json_2d(o->len_block_z, L, K));
    json_object_set_new(len, "recency_probability", len_json_2d(o->len_rp, L, K));
    json_object_set_new(len, "recency_probability_se", len_json_2d(o->len_rp_se, L, K));
    json_object_set_new(len, "recency_probability_mean_map", len_json_2d(o->len_rp_map, L, K));
    json_object_set_new(len, "of", json_string("[layer][length]: statistics of the first S' positions of every "
                                               "sequence, which a causal model scores exactly as the S'-token prefix"));
    json_object_set_new(meta, "length", len);
    json_object_set_new(meta, "residue_by_position", len_json_2d(o->pos_rms, L, o->S));
    json_object_set_new(meta, "residue_z_by_position", len_json_2d(o->pos_z, L, o->S));
    json_object_set_new(meta, "residue_by_position_of",
                        json_string("[layer][query position]: rms of the diagonal-normalised residue over the "
                                    "row's off-diagonal keys (from recency_first_position), and in units of the "
                                    "standard errors"));
}

int mp_probe_len_write(const char *dir, const MpProbeRecencyOut *o, const int *layers, int plot, const char *title,
                       json_t *files, MpErr *e) {
    if (!plot) return MP_OK;
    if (len_figures(dir, o, layers, title, e) != MP_OK) return MP_ERR;
    json_object_set_new(files, "length_nri.png", json_string("figure: NRI of the first S' positions per layer"));
    json_object_set_new(files, "length_block_z.png", json_string("figure: block z of the first S' positions"));
    json_object_set_new(files, "length_rp.png", json_string("figure: recency probability of the first S' positions"));
    json_object_set_new(files, "residue_by_position.png", json_string("figure: residue in noise units by query position"));
    return MP_OK;
}
