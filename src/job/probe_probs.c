/* probe_probs.c — see probe_probs.h. */
#include "job/probe_probs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz/figs.h"  /* mp_fig_rows_clip: probability maps */
#include "core/util.h" /* mp_path_join, mp_try_malloc */
#include "viz/plot.h"  /* mp_plot_render: [L,H] panels */

/* Mean over queries 1..S-1 of ln(i+1): the entropy of uniform causal attention, the yardstick of
 * the printed entropies (without the mask: ln S). */
static double probs_uniform_entropy(int S, int causal) {
    if (S < 2) return NAN;
    if (!causal) return log((double)S);
    double s = 0;
    for (int i = 1; i < S; i++) s += log((double)i + 1);
    return s / (S - 1);
}

static json_t *probs_json_lh(const double *v, int L, int H) {
    json_t *arr = json_array();
    for (int l = 0; l < L; l++) {
        json_t *row = json_array();
        for (int h = 0; h < H; h++)
            json_array_append_new(row, isfinite(v[(size_t)l * H + h]) ? json_real(v[(size_t)l * H + h]) : json_null());
        json_array_append_new(arr, row);
    }
    return arr;
}

/* layers[l]: 0-based model layer of slot l (the sink/entropy rows are labelled with it, from 1) */
static int probs_figures(const char *dir, const MpProbeProbsOut *po, const double *probs, const int *layers, const char *title,
                         MpErr *e) {
    const double *sink = po->sink, *ent = po->entropy;
    const int L = po->L, H = po->H, S = po->S;
    int rows[256];
    for (int l = 0; l < L && l < 256; l++) rows[l] = layers[l] + 1;
    char path[4096], t[300];
    MpFigRow row = {probs, L, S, "mean attention probability", 0, NULL};
    snprintf(t, sizeof t, "%.200s: mean attention probabilities", title);
    if (mp_path_join(path, sizeof path, dir, "probs.png", e) || mp_fig_rows_clip(path, t, &row, 1, 0, 99, e) != MP_OK)
        return MP_ERR;
    MpPlotOptions o;
    mp_plot_options_default(&o);
    snprintf(o.title, sizeof o.title, "%.200s: per layer and head", title);
    snprintf(o.xlabel, sizeof o.xlabel, "head");
    snprintf(o.ylabel, sizeof o.ylabel, "layer");
    o.index_base = 1; /* layers and heads are numbered from 1 (docs/outputs.md) */
    o.row_labels = rows;
    o.n_row_labels = L < 256 ? L : 256;
    o.annotate = L * H <= 64;
    o.annotate_digits = 2;
    o.cols = 2;
    MpPlotPanel pn[2];
    memset(pn, 0, sizeof pn);
    pn[0].map = sink;
    pn[1].map = ent;
    for (int k = 0; k < 2; k++) {
        pn[k].rows = L;
        pn[k].cols = H;
        pn[k].group = k;
    }
    snprintf(pn[0].title, sizeof pn[0].title, "attention on the first token");
    snprintf(pn[1].title, sizeof pn[1].title, "mean entropy (nats)");
    if (mp_path_join(path, sizeof path, dir, "sink_entropy.png", e) || mp_plot_render(path, pn, 2, &o, e) != MP_OK)
        return MP_ERR;
    return MP_OK;
}

int mp_probe_probs_results(MpProbeProbsOut *o, const MpProbeAcc *a, MpErr *e) {
    memset(o, 0, sizeof *o);
    const int L = a->L, H = a->H, S = a->S;
    const size_t LH = (size_t)L * H;
    o->L = L, o->H = H, o->S = S;
    o->sink = mp_try_malloc(LH * sizeof(double));
    o->entropy = mp_try_malloc(LH * sizeof(double));
    if (!o->sink || !o->entropy) {
        mp_probe_probs_out_free(o);
        return mp_err_set(e, "out of memory for the probability statistics (%d layers, %d heads)", L, H);
    }
    mp_probe_acc_probs_mean(a, o->sink, o->entropy);
    o->uniform = probs_uniform_entropy(S, a->causal);
    return MP_OK;
}

void mp_probe_probs_out_free(MpProbeProbsOut *o) {
    free(o->sink);
    free(o->entropy);
    memset(o, 0, sizeof *o);
}

void mp_probe_probs_print(FILE *f, const MpProbeProbsOut *o, const int *layers) {
    const int L = o->L, H = o->H, S = o->S;
    fprintf(f, "attention probabilities (mean over heads; queries 1..%d): first-token mass and entropy (uniform: %.3f nats)\n",
            S - 1, o->uniform);
    fprintf(f, "%6s %10s %10s %10s %12s %10s %10s\n", "layer", "sink", "sink min", "sink max", "entropy", "ent min", "ent max");
    for (int l = 0; l < L; l++) {
        double sm = 0, em = 0, slo = INFINITY, shi = -INFINITY, elo = INFINITY, ehi = -INFINITY;
        for (int h = 0; h < H; h++) {
            const double s = o->sink[(size_t)l * H + h], en = o->entropy[(size_t)l * H + h];
            sm += s / H, em += en / H;
            slo = s < slo ? s : slo, shi = s > shi ? s : shi, elo = en < elo ? en : elo, ehi = en > ehi ? en : ehi;
        }
        fprintf(f, "%6d %10.4f %10.4f %10.4f %12.4f %10.4f %10.4f\n", layers[l] + 1, sm, slo, shi, em, elo, ehi);
    }
}

void mp_probe_probs_meta(json_t *meta, const MpProbeProbsOut *o) {
    json_object_set_new(meta, "attention_sink", probs_json_lh(o->sink, o->L, o->H));
    json_object_set_new(meta, "attention_entropy", probs_json_lh(o->entropy, o->L, o->H));
    json_object_set_new(meta, "attention_entropy_uniform", isfinite(o->uniform) ? json_real(o->uniform) : json_null());
    json_object_set_new(meta, "attention_sink_of",
                        json_string("[layer][head]: mean over sequences and queries 1..S-1 of the probability on key 0"));
    json_object_set_new(meta, "attention_entropy_of",
                        json_string("[layer][head]: mean over sequences and queries 1..S-1 of -sum_j p ln p (nats); "
                                    "attention_entropy_uniform: the same for uniform attention"));
}

int mp_probe_probs_figures(const char *dir, const MpProbeProbsOut *o, const double *probs, const int *layers,
                           const char *title, json_t *files, MpErr *e) {
    if (probs_figures(dir, o, probs, layers, title, e) != MP_OK) return MP_ERR;
    json_object_set_new(files, "probs.png", json_string("figure: mean attention probabilities per layer"));
    json_object_set_new(files, "sink_entropy.png", json_string("figure: first-token mass and entropy per layer and head"));
    return MP_OK;
}
