/* repro_recency.c — see repro_recency.h.
 *
 * ================================================================ layout
 *   grid            the configurations and the values the authors' figures print
 *   runs            one `simulate --layer-form recency` per configuration, reused when unchanged
 *   report          a verdict row per configuration, mean maps and RP-against-layer figures
 */
#include "cli/repro_recency.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/figs.h"     /* mp_fig_rows: mean maps */
#include "cli/sim_out.h"  /* mp_sim_write_outputs */
#include "core/json.h"    /* mp_json_read, MP_VERSION */
#include "core/npy.h"     /* mp_npy_read (reuse) */
#include "core/util.h"    /* mp_path_join, mp_file_exists */
#include "kernels/recency.h" /* mp_recency_triples */
#include "viz/plot.h"     /* mp_plot_lines */
#include "cli/repro_models.h" /* mp_repro_probe, mp_repro_fingerprint: the length stage's probe runs */

/* ================================================================ grid */

/* The authors' repository (github.com/starmpcc/layernorm_recency_bias, commit d68cf47, B = 1e7,
 * S = 10, float32 torch) prints RP=… on every panel of its figures; these are those numbers,
 * copied from the PDFs' text (pdftotext). NAN: the figure has no panel for that layer. */
#define RR_AUTHORS_B 1e7
typedef struct RrConfig {
    const char *name;   /* folder under DIR/recency */
    int dim;
    double alpha;
    MpNorm norm;        /* MP_NORM_LAYERNORM or MP_NORM_NONE */
    int residual;
    int layers;         /* 4, or 2 where the authors show layers 1-2 only */
    double want[4];
    const char *source; /* figure file(s) of the authors' repository */
} RrConfig;

static const RrConfig rr_grid[] = {
    {"d16_none_a0", 16, 0.0, MP_NORM_NONE, 0, 4, {0.5000, 0.5005, 0.0822, 0.0140}, "fig1_d16_d64_L1L2 + fig3_d16_d64_L3L4"},
    {"d16_ln_a0", 16, 0.0, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.5015, 0.5051, 0.5114}, "fig1 + fig3"},
    {"d16_ln_a0.5", 16, 0.5, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.6382, 0.8002, 0.9079}, "fig1 + fig3"},
    {"d16_ln_a0.5_res", 16, 0.5, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.5931, 0.6610, 0.7078}, "fig1 + fig3"},
    {"d64_none_a0", 64, 0.0, MP_NORM_NONE, 0, 4, {0.5000, 0.5000, 0.0069, 0.0001}, "fig1 + fig3"},
    {"d64_ln_a0", 64, 0.0, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.5000, 0.5000, 0.5000}, "fig1 + fig3"},
    {"d64_ln_a0.5", 64, 0.5, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.5544, 0.6274, 0.7073}, "fig1 + fig3"},
    {"d64_ln_a0.5_res", 64, 0.5, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.5457, 0.5791, 0.6053}, "fig1 + fig3"},
    {"d256_none_a0", 256, 0.0, MP_NORM_NONE, 0, 2, {0.5000, 0.5000, NAN, NAN}, "fig2_d256_d1024_L1L2"},
    {"d256_ln_a0", 256, 0.0, MP_NORM_LAYERNORM, 0, 2, {0.5000, 0.5000, NAN, NAN}, "fig2"},
    {"d256_ln_a0.5", 256, 0.5, MP_NORM_LAYERNORM, 0, 2, {0.5000, 0.5023, NAN, NAN}, "fig2"},
    {"d256_ln_a0.5_res", 256, 0.5, MP_NORM_LAYERNORM, 1, 2, {0.5000, 0.5021, NAN, NAN}, "fig2"},
    {"d1024_none_a0", 1024, 0.0, MP_NORM_NONE, 0, 2, {0.5000, 0.5000, NAN, NAN}, "fig2"},
    {"d1024_ln_a0", 1024, 0.0, MP_NORM_LAYERNORM, 0, 2, {0.5000, 0.5000, NAN, NAN}, "fig2"},
    {"d1024_ln_a0.5", 1024, 0.5, MP_NORM_LAYERNORM, 0, 2, {0.5000, 0.5000, NAN, NAN}, "fig2"},
    {"d1024_ln_a0.5_res", 1024, 0.5, MP_NORM_LAYERNORM, 1, 2, {0.5000, 0.5000, NAN, NAN}, "fig2"},
    {"d16_ln_a0.2", 16, 0.2, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.5316, 0.5816, 0.6457}, "simul_alpha"},
    {"d16_ln_a0.4", 16, 0.4, MP_NORM_LAYERNORM, 0, 4, {0.5001, 0.5928, 0.7193, 0.8312}, "simul_alpha"},
    {"d16_ln_a0.6", 16, 0.6, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.6949, 0.8783, 0.9605}, "simul_alpha"},
    {"d16_ln_a0.8", 16, 0.8, MP_NORM_LAYERNORM, 0, 4, {0.5000, 0.8401, 0.9841, 0.9983}, "simul_alpha"},
    {"d16_ln_a0_res", 16, 0.0, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.5009, 0.5019, 0.5028}, "simul_alpha_residual"},
    {"d16_ln_a0.2_res", 16, 0.2, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.5229, 0.5415, 0.5570}, "simul_alpha_residual"},
    {"d16_ln_a0.4_res", 16, 0.4, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.5643, 0.6147, 0.6527}, "simul_alpha_residual"},
    {"d16_ln_a0.6_res", 16, 0.6, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.6265, 0.7091, 0.7604}, "simul_alpha_residual"},
    {"d16_ln_a0.8_res", 16, 0.8, MP_NORM_LAYERNORM, 1, 4, {0.5000, 0.6936, 0.7862, 0.8340}, "simul_alpha_residual"},
};
#define RR_N ((int)(sizeof rr_grid / sizeof rr_grid[0]))
#define RR_S 10

/* Sequences per configuration, by width: the cost of a sequence grows with d, so B shrinks with
 * it; chosen so the whole grid takes about 40 s on 2 cores (docs/recency.md lists the standard
 * errors this gives beside the authors' B = 1e7). */
static int64_t rr_batch(int dim) {
    return dim <= 16 ? 400000 : dim <= 64 ? 100000 : dim <= 256 ? 30000 : 10000;
}

static void rr_label(char *buf, size_t cap, const RrConfig *g) {
    snprintf(buf, cap, "d=%d, α=%g, %s, %s", g->dim, g->alpha, g->norm == MP_NORM_NONE ? "no norm" : "LN",
             g->residual ? "Res" : "noRes");
}

static int rr_figures(MpReproRecency *rr, const char *out);

/* ================================================================ runs */

/* Reads back a finished run of the same settings (meta.json's stage_settings); 1 when reused. */
static int rr_try_reuse(MpReproRecencyRun *r, const char *dir, const char *settings, int L) {
    char path[4096];
    MpErr e;
    if (mp_path_join(path, sizeof path, dir, "meta.json", &e) || !mp_file_exists(path)) return 0;
    json_t *m = mp_json_read(path, &e);
    if (!m) return 0;
    const char *s = json_string_value(json_object_get(m, "stage_settings"));
    json_t *rp = json_object_get(m, "recency_probability"), *se = json_object_get(m, "recency_probability_se");
    int same = s && !strcmp(s, settings) && json_array_size(rp) == (size_t)L && json_array_size(se) == (size_t)L;
    for (int l = 0; same && l < L; l++) {
        r->rp[l] = json_number_value(json_array_get(rp, (size_t)l));
        r->rp_se[l] = json_number_value(json_array_get(se, (size_t)l));
    }
    r->wall_s = json_number_value(json_object_get(m, "sim_wall_time_s"));
    json_decref(m);
    if (!same) return 0;
    MpNpy a;
    if (mp_path_join(path, sizeof path, dir, "scores.npy", &e) || mp_npy_read(path, &a, &e) != MP_OK) return 0;
    if (a.dtype != MP_DT_F64 || a.count != (size_t)L * RR_S * RR_S) {
        mp_npy_free(&a);
        return 0;
    }
    r->scores = a.data; /* taken over */
    return 1;
}

/* One configuration into out/recency/<name>; MP_OK or MP_ERR (message printed). */
static int rr_run_one(MpReproRecencyRun *r, const RrConfig *g, const char *out, const MpSimConfig *base, int64_t batch,
                      int force, int argc, char **argv) {
    char dir[4096], settings[512], label[96];
    MpErr e;
    memset(r, 0, sizeof *r);
    if (snprintf(dir, sizeof dir, "%s/recency/%s", out, g->name) >= (int)sizeof dir) {
        fprintf(stderr, "maskpos reproduce: error: %s: path too long\n", out);
        return MP_ERR;
    }
    MpSimConfig c;
    mp_sim_config_default(&c);
    c.form = MP_SIM_FORM_RECENCY;
    c.batch = batch;
    c.seq = RR_S;
    c.dim = g->dim;
    c.layers = g->layers;
    c.alpha = g->alpha;
    c.norm = g->norm;
    c.residual = g->residual;
    c.scale = sqrt((double)g->dim);
    c.seed = base->seed;
    c.threads = base->threads;
    c.progress = base->progress;
    snprintf(settings, sizeof settings, "v%s recency B=%lld S=%d D=%d L=%d alpha=%g norm=%d residual=%d seed=%llu",
             MP_VERSION, (long long)c.batch, c.seq, c.dim, c.layers, c.alpha, (int)c.norm, c.residual,
             (unsigned long long)c.seed);
    r->L = c.layers;
    r->batch = c.batch;
    rr_label(label, sizeof label, g);
    if (!force && rr_try_reuse(r, dir, settings, c.layers)) {
        r->ok = r->skipped = 1;
        printf("  recency %-24s up to date, skipped (--force to redo)\n", g->name);
        return MP_OK;
    }
    MpSimResult s;
    if (mp_sim_run(&s, &c, &e) != MP_OK || mp_sim_write_outputs(dir, &c, "sqrt", &s, 0, argc, argv, &e) != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: stage recency/%s: %s\n", g->name, e.msg);
        if (s.scores) mp_sim_result_free(&s);
        return MP_ERR;
    }
    char path[4096];
    json_t *m = mp_path_join(path, sizeof path, dir, "meta.json", &e) == MP_OK ? mp_json_read(path, &e) : NULL;
    if (m) { /* the settings key, so an unchanged re-run reuses this folder */
        json_object_set_new(m, "stage_settings", json_string(settings));
        mp_json_write_atomic(path, m, &e);
        json_decref(m);
    }
    for (int l = 0; l < c.layers; l++) {
        r->rp[l] = s.rp[l];
        r->rp_se[l] = s.rp_se[l];
    }
    r->scores = s.scores;
    s.scores = NULL;
    r->wall_s = s.wall_s;
    r->ok = 1;
    mp_sim_result_free(&s);
    printf("  recency %-24s %6.1f s   RP by layer:", g->name, r->wall_s);
    for (int l = 0; l < c.layers; l++) printf(" %.4f", r->rp[l]);
    printf("\n");
    return MP_OK;
}

int mp_repro_recency_run(MpReproRecency *rr, const char *out, const MpSimConfig *base, int quick, double batch_scale,
                         int force, int argc, char **argv) {
    memset(rr, 0, sizeof *rr);
    const double t0 = mp_time_now();
    int failed = 0;
    rr->n = RR_N;
    for (int k = 0; k < RR_N; k++) {
        double b = (double)rr_batch(rr_grid[k].dim) * (batch_scale > 0 ? batch_scale : 1.0) / (quick ? 50.0 : 1.0);
        const int64_t batch = b < 100 ? 100 : (int64_t)b;
        if (rr_run_one(&rr->run[k], &rr_grid[k], out, base, batch, force, argc, argv) != MP_OK) failed++;
    }
    rr->wall_s = mp_time_now() - t0;
    if (rr_figures(rr, out) != MP_OK) failed++;
    return failed;
}

/* ================================================================ report */

/* The figures: mean maps (rows = configurations, as the authors' figures) and RP against layer.
 * Map colours run from each panel's minimum to its 80th percentile: the diagonal (a token with
 * itself, √d under LayerNorm) is 18 % of the entries at S = 10 and would wash out the rest; the
 * authors clip it likewise (at the second largest value). */
typedef struct RrFigure {
    const char *file, *title, *caption;
    int lines;     /* 0: mean maps; 1: RP against layer */
    int runs[8];   /* indices into rr_grid; -1 ends a shorter list */
} RrFigure;

static const RrFigure rr_figs[] = {
    {"recency/maps_d16_d64.png", "Later version's layer, S=10: mean pre-softmax scores, d=16 and d=64",
     "Recency grid: mean pre-softmax scores per layer, d = 16 (rows 1–4) and d = 64 (rows 5–8) (authors' Figures 1 and 3)",
     0, {0, 1, 2, 3, 4, 5, 6, 7}},
    {"recency/maps_d256_d1024.png", "Later version's layer, S=10: mean pre-softmax scores, d=256 and d=1024",
     "Recency grid: mean pre-softmax scores, layers 1–2, d = 256 (rows 1–4) and d = 1024 (rows 5–8) (authors' Figure 2)",
     0, {8, 9, 10, 11, 12, 13, 14, 15}},
    {"recency/maps_alpha.png", "LayerNorm, no residual, d=16: larger input correlation α",
     "Recency grid: LayerNorm without the residual at d = 16, α = 0.2 … 0.8 (authors' appendix)", 0, {16, 17, 2, 18, 19, -1}},
    {"recency/maps_alpha_residual.png", "LayerNorm with the residual, d=16: larger input correlation α",
     "Recency grid: LayerNorm with the residual at d = 16, α = 0 … 0.8 (authors' appendix)", 0, {20, 21, 22, 3, 23, 24, -1}},
    {"recency/rp_alpha.png", "Recency probability, d=16, no residual",
     "Recency probability against layer at d = 16 without the residual: no norm (primacy) and LayerNorm at α = 0 … 0.8",
     1, {0, 1, 16, 17, 2, 18, 19, -1}},
    {"recency/rp_alpha_residual.png", "Recency probability, d=16, with the residual",
     "Recency probability against layer at d = 16 with the residual, LayerNorm, α = 0 … 0.8", 1, {20, 21, 22, 3, 23, 24, -1}},
    {"recency/rp_width.png", "Recency probability against width d",
     "Recency probability against layer for d = 16 … 1024: LayerNorm at α = 0.5 and no norm at α = 0 (no residual)", 1,
     {2, 6, 10, 14, 0, 4, 8, 12}},
};
#define RR_NFIGS ((int)(sizeof rr_figs / sizeof rr_figs[0]))

static int rr_figure_lines(const RrFigure *f, const MpReproRecency *rr, const char *path, MpErr *e) {
    static const double colours[8][3] = {{0.89, 0.10, 0.11}, {0.22, 0.49, 0.72}, {0.30, 0.69, 0.29}, {0.60, 0.31, 0.64},
                                         {1.00, 0.50, 0.00}, {0.65, 0.34, 0.16}, {0.97, 0.51, 0.75}, {0.40, 0.40, 0.40}};
    static const double layer_x[4] = {1, 2, 3, 4};
    MpPlotSeries sr[8];
    char labels[8][96];
    int n = 0;
    for (int k = 0; k < 8 && f->runs[k] >= 0; k++, n++) {
        const MpReproRecencyRun *r = &rr->run[f->runs[k]];
        rr_label(labels[n], sizeof labels[n], &rr_grid[f->runs[k]]);
        sr[n].x = layer_x;
        sr[n].y = r->rp;
        sr[n].n = r->L;
        sr[n].label = labels[n];
        memcpy(sr[n].rgb, colours[n], sizeof sr[n].rgb);
    }
    return mp_plot_lines(path, f->title, "layer", "recency probability", sr, n, e);
}

static int rr_figures(MpReproRecency *rr, const char *out) {
    char path[4096];
    MpErr e;
    for (int f = 0; f < RR_NFIGS; f++) {
        MpFigRow rows[8];
        char labels[8][96];
        int n = 0, complete = 1;
        for (int k = 0; k < 8 && rr_figs[f].runs[k] >= 0; k++, n++) {
            const MpReproRecencyRun *r = &rr->run[rr_figs[f].runs[k]];
            if (!r->ok) complete = 0;
            rr_label(labels[n], sizeof labels[n], &rr_grid[rr_figs[f].runs[k]]);
            rows[n] = (MpFigRow){r->scores, r->L, RR_S, labels[n], 0};
        }
        if (!complete) continue;
        int rc = mp_path_join(path, sizeof path, out, rr_figs[f].file, &e);
        if (rc == MP_OK)
            rc = rr_figs[f].lines ? rr_figure_lines(&rr_figs[f], rr, path, &e)
                                  : mp_fig_rows_clip(path, rr_figs[f].title, rows, n, 0, 80, &e);
        if (rc != MP_OK) {
            fprintf(stderr, "maskpos reproduce: error: recency figure: %s\n", e.msg);
            return MP_ERR;
        }
        rr->fig_paths[f] = rr_figs[f].file;
    }
    return MP_OK;
}

/* A row agrees when every printed layer lies within 4 combined standard errors (ours, and the
 * authors' at B = 1e7, scaled from ours) plus half the last printed digit. Near RP = 0 a small
 * run may see no recent triple at all, and its sample standard error is then 0: ours is taken
 * at least as large as the binomial one of B·C(S,3) triples at the authors' rate. */
void mp_repro_recency_report(MpReport *rp, const MpReproRecency *rr) {
    for (int k = 0; k < rr->n && k < RR_N; k++) {
        const MpReproRecencyRun *r = &rr->run[k];
        const RrConfig *g = &rr_grid[k];
        if (!r->ok) continue;
        char what[160], label[96], exp_s[96] = "", got_s[192] = "", note[256] = "";
        rr_label(label, sizeof label, g);
        snprintf(what, sizeof what, "Later version: RP layers 1–%d, %s", r->L, label);
        int ok = 1;
        double se_max = 0, worst = 0;
        int worst_l = 0;
        for (int l = 0; l < r->L; l++) {
            size_t ne = strlen(exp_s), ng = strlen(got_s);
            snprintf(exp_s + ne, sizeof exp_s - ne, "%s%.4f", l ? " " : "", g->want[l]);
            snprintf(got_s + ng, sizeof got_s - ng, "%s%.4f", l ? " " : "", r->rp[l]);
            se_max = r->rp_se[l] > se_max ? r->rp_se[l] : se_max;
            if (isnan(g->want[l])) continue;
            const double nt = (double)r->batch * mp_recency_triples(RR_S, 0);
            const double se_b = sqrt(g->want[l] * (1 - g->want[l]) / nt);
            const double se = r->rp_se[l] > se_b ? r->rp_se[l] : se_b;
            const double se_a = se * sqrt((double)r->batch / RR_AUTHORS_B), se_c = sqrt(se * se + se_a * se_a);
            const double z = fabs(r->rp[l] - g->want[l]) / se_c;
            if (!(fabs(r->rp[l] - g->want[l]) <= 4 * se_c + 5e-5)) ok = 0;
            if (z > worst || isnan(z)) worst = z, worst_l = l;
        }
        size_t ng = strlen(got_s);
        snprintf(got_s + ng, sizeof got_s - ng, " (se ≤ %.4f, B = %lld)", se_max, (long long)r->batch);
        snprintf(note, sizeof note, "authors' %s.pdf%s", g->source, ok ? "" : "; differs");
        if (!ok) {
            size_t nn = strlen(note);
            snprintf(note + nn, sizeof note - nn, " at layer %d by %.1f standard errors", worst_l + 1, worst);
        }
        mp_report_row(rp, what, exp_s, got_s, ok, note);
    }
    for (int f = 0; f < RR_NFIGS; f++) {
        if (!rr->fig_paths[f]) continue;
        mp_report_fig(rp, rr_figs[f].caption, rr->fig_paths[f]);
        /* the mean-map figures get the interactive viewer of their runs (viz/view.h) */
        for (int k = 0; !rr_figs[f].lines && k < 8 && rr_figs[f].runs[k] >= 0; k++) {
            char dir[128];
            snprintf(dir, sizeof dir, "recency/%s", rr_grid[rr_figs[f].runs[k]].name);
            mp_report_fig_view(rp, rr->fig_paths[f], dir);
        }
    }
}

void mp_repro_recency_free(MpReproRecency *rr) {
    for (int k = 0; k < MP_REPRO_RECENCY_MAX; k++) free(rr->run[k].scores);
    memset(rr, 0, sizeof *rr);
}

/* ================================================================ stage length */

static const char *rl_names[2] = {"none", "rope"};

/* Reads length.{lengths, recency_probability(_se), residue_block_z} of dir/meta.json into lr. */
static int rl_read(MpReproLength *lr, int m, const char *dir) {
    char path[4096];
    MpErr e;
    if (mp_path_join(path, sizeof path, dir, "meta.json", &e) != MP_OK) return MP_ERR;
    json_t *j = mp_json_read(path, &e), *len = j ? json_object_get(j, "length") : NULL;
    if (!len) {
        json_decref(j);
        return MP_ERR;
    }
    json_t *ls = json_object_get(len, "lengths");
    lr->K = (int)json_array_size(ls) < 24 ? (int)json_array_size(ls) : 24;
    for (int k = 0; k < lr->K; k++) lr->lens[k] = (int)json_integer_value(json_array_get(ls, (size_t)k));
    const char *keys[3] = {"recency_probability", "recency_probability_se", "residue_block_z"};
    double(*dst[3])[4][24] = {&lr->rp[m], &lr->rp_se[m], &lr->block_z[m]};
    json_t *a = json_object_get(len, keys[0]);
    lr->L = (int)json_array_size(a) < 4 ? (int)json_array_size(a) : 4;
    for (int q = 0; q < 3; q++) {
        a = json_object_get(len, keys[q]);
        for (int l = 0; l < lr->L; l++)
            for (int k = 0; k < lr->K; k++) {
                json_t *x = json_array_get(json_array_get(a, (size_t)l), (size_t)k);
                (*dst[q])[l][k] = json_is_number(x) ? json_number_value(x) : NAN;
            }
    }
    json_decref(j);
    return MP_OK;
}

int mp_repro_length_run(MpReproLength *lr, const char *out, const char *models, int64_t n, int quick, int threads,
                        int force) {
    memset(lr, 0, sizeof *lr);
    lr->n = n ? n : quick ? 100 : 500; /* 500 × 128: RP resolved to ~0.001, ~6 s on 2 cores */
    if (!models) {
        fprintf(stderr, "maskpos reproduce: error: stage length: the embedded models were not found; HINT: --models DIR\n");
        return 1;
    }
    int failed = 0;
    for (int m = 0; m < 2; m++) {
        char model[4200], corpus[4200], dir[4096], key[10240], nb[32], tb[32];
        snprintf(model, sizeof model, "%s/%s", models, rl_names[m]);
        snprintf(corpus, sizeof corpus, "%s/kjv.txt", models);
        snprintf(dir, sizeof dir, "%s/length/%s", out, rl_names[m]);
        snprintf(nb, sizeof nb, "%lld", (long long)lr->n);
        snprintf(tb, sizeof tb, "%d", threads);
        snprintf(key, sizeof key, "v%s probe --recency model=%s fp=%016llx data=%s fp=%016llx n=%lld seq=128 pack", MP_VERSION,
                 model, (unsigned long long)mp_repro_fingerprint(model), corpus,
                 (unsigned long long)mp_repro_fingerprint(corpus), (long long)lr->n);
        char *args[] = {"probe", model, "--data", corpus, "--pack", "--n", nb, "--seq", "128", "--layers", "1-4",
                        "--recency", "--plot", "--quiet", "--out", dir, threads > 0 ? "--threads" : NULL, tb, NULL};
        printf("  length  %-24s %s over %lld x 128 tokens, --recency\n", rl_names[m], model, (long long)lr->n);
        fflush(stdout);
        MpReproProbe p;
        memset(&p, 0, sizeof p);
        if (mp_repro_probe(&p, dir, key, args, force) != MP_OK || rl_read(lr, m, dir) != MP_OK) {
            fprintf(stderr, "maskpos reproduce: error: stage length/%s failed\n", rl_names[m]);
            failed++;
        } else {
            lr->ok[m] = 1;
            lr->skipped[m] = p.skipped;
            if (p.skipped) printf("          up to date, skipped (--force to redo)\n");
        }
        mp_repro_probe_free(&p);
    }
    return failed;
}

/* Rows: RP per sequence at every length, layers 2-4 (the later version: models with a norm favour
 * recent keys); the figures the probes drew. */
void mp_repro_length_report(MpReport *rp, const MpReproLength *lr) {
    static const char *label[2] = {"embedded NoPE model", "embedded RoPE model"};
    for (int m = 0; m < 2; m++) {
        if (!lr->ok[m]) continue;
        for (int l = 1; l < lr->L; l++) {
            char what[160], got[192] = "", note[256];
            int ok = 1;
            for (int k = 0; k < lr->K; k++) {
                const size_t g = strlen(got);
                snprintf(got + g, sizeof got - g, "%s%d: %.3f", k ? ", " : "", lr->lens[k], lr->rp[m][l][k]);
                if (!(lr->rp[m][l][k] - 4 * lr->rp_se[m][l][k] > 0.5)) ok = 0;
            }
            snprintf(what, sizeof what, "Length: %s, layer %d, RP of the first S' positions", label[m], l + 1);
            snprintf(note, sizeof note, "one run of %lld × 128 bytes; block z at S' = %d … %d: %.2f … %.2f (docs/recency.md)",
                     (long long)lr->n, lr->lens[0], lr->lens[lr->K - 1], lr->block_z[m][l][0], lr->block_z[m][l][lr->K - 1]);
            mp_report_row(rp, what, "> 0.5 at every S' (recency)", got, ok, note);
        }
    }
    static const char *figs[2][3] = {{"length/none/length_rp.png", "length/none/length_block_z.png", "length/none/residue_by_position.png"},
                                     {"length/rope/length_rp.png", "length/rope/length_block_z.png", "length/rope/residue_by_position.png"}};
    static const char *caps[3] = {"recency probability of the first S' positions", "residue block z of the first S' positions",
                                  "residue in noise units against the query position"};
    for (int m = 0; m < 2; m++)
        for (int f = 0; f < 3 && lr->ok[m]; f++) {
            char cap[256];
            snprintf(cap, sizeof cap, "Length (one run, every prefix): %s, %s", label[m], caps[f]);
            mp_report_fig(rp, cap, figs[m][f]);
        }
}
