/* stage_recency.c — the `recency` stage of `reproduce`: the later version's grid ("LayerNorm Induces
 * Recency Bias in Transformer Decoders", Kim et al.; docs/recency.md): d ∈ {16, 64, 256, 1024} ×
 * α × norm × residual at S = 10, 25 configurations, each one simulation into DIR/recency/<name>/;
 * the recency probability per layer compared row by row with the values the authors' figures
 * print (expect.c); the mean maps per configuration and RP against layer as figures.
 * Tested by: tests/test_reproduce.c (--only recency --quick: rows, figures, reuse).
 *
 * ================================================================ layout
 *   grid            the configurations of the authors' figures (their values: expect.c)
 *   runs            one simulation (--layer-form recency) per configuration, reused when unchanged
 *   report          a verdict row per configuration, mean maps and RP-against-layer figures
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"       /* MP_VERSION */
#include "core/util.h"       /* mp_path_join, mp_time_now */
#include "kernels/recency.h" /* mp_recency_triples */
#include "job/sim_out.h"     /* mp_sim_write_outputs */
#include "repro/ctx.h"       /* MpReproCtx, mp_repro_state, mp_repro_fail */
#include "repro/expect.h"    /* mp_repro_expect: the authors' values */
#include "repro/stage.h"     /* MpReproStage */
#include "repro/store.h"     /* mp_repro_store_meta_same, mp_repro_store_num */
#include "viz/figs.h"        /* mp_fig_rows_clip: mean maps */
#include "viz/plot.h"        /* mp_plot_lines */

/* ================================================================ grid */

#define MP_REPRO_RECENCY_MAX 32 /* configurations (the grid below has 25; _Static_assert there) */

typedef struct MpReproRecencyRun {
    int ok, skipped, L;
    int64_t batch;
    double rp[4], rp_se[4];
    double *scores; /* (L,10,10) owned: mean pre-softmax scores */
    double wall_s;
} MpReproRecencyRun;

typedef struct MpReproRecency {
    int n;                                    /* configurations run (the grid's size) */
    MpReproRecencyRun run[MP_REPRO_RECENCY_MAX];
    const char *fig_paths[8];                 /* report-relative paths of the 7 figures, NULL when not drawn */
    double wall_s;
} MpReproRecency;

static void recency_release(void *rr);

/* The stage's state (the state block "recency"). */
static MpReproRecency *recency_state(MpReproCtx *c) {
    return mp_repro_state(c, "recency", sizeof(MpReproRecency), recency_release);
}

/* The configurations of the authors' figures; the RP each panel prints is in expect.c under
 * "recency.<name>", with its source. */
typedef struct RrConfig {
    const char *name;   /* folder under DIR/recency */
    int dim;
    double alpha;
    MpNorm norm;        /* MP_NORM_LAYERNORM or MP_NORM_NONE */
    int residual;
    int layers;         /* 4, or 2 where the authors show layers 1-2 only */
} RrConfig;

static const RrConfig rr_grid[] = {
    {"d16_none_a0", 16, 0.0, MP_NORM_NONE, 0, 4},
    {"d16_ln_a0", 16, 0.0, MP_NORM_LAYERNORM, 0, 4},
    {"d16_ln_a0.5", 16, 0.5, MP_NORM_LAYERNORM, 0, 4},
    {"d16_ln_a0.5_res", 16, 0.5, MP_NORM_LAYERNORM, 1, 4},
    {"d64_none_a0", 64, 0.0, MP_NORM_NONE, 0, 4},
    {"d64_ln_a0", 64, 0.0, MP_NORM_LAYERNORM, 0, 4},
    {"d64_ln_a0.5", 64, 0.5, MP_NORM_LAYERNORM, 0, 4},
    {"d64_ln_a0.5_res", 64, 0.5, MP_NORM_LAYERNORM, 1, 4},
    {"d256_none_a0", 256, 0.0, MP_NORM_NONE, 0, 2},
    {"d256_ln_a0", 256, 0.0, MP_NORM_LAYERNORM, 0, 2},
    {"d256_ln_a0.5", 256, 0.5, MP_NORM_LAYERNORM, 0, 2},
    {"d256_ln_a0.5_res", 256, 0.5, MP_NORM_LAYERNORM, 1, 2},
    {"d1024_none_a0", 1024, 0.0, MP_NORM_NONE, 0, 2},
    {"d1024_ln_a0", 1024, 0.0, MP_NORM_LAYERNORM, 0, 2},
    {"d1024_ln_a0.5", 1024, 0.5, MP_NORM_LAYERNORM, 0, 2},
    {"d1024_ln_a0.5_res", 1024, 0.5, MP_NORM_LAYERNORM, 1, 2},
    {"d16_ln_a0.2", 16, 0.2, MP_NORM_LAYERNORM, 0, 4},
    {"d16_ln_a0.4", 16, 0.4, MP_NORM_LAYERNORM, 0, 4},
    {"d16_ln_a0.6", 16, 0.6, MP_NORM_LAYERNORM, 0, 4},
    {"d16_ln_a0.8", 16, 0.8, MP_NORM_LAYERNORM, 0, 4},
    {"d16_ln_a0_res", 16, 0.0, MP_NORM_LAYERNORM, 1, 4},
    {"d16_ln_a0.2_res", 16, 0.2, MP_NORM_LAYERNORM, 1, 4},
    {"d16_ln_a0.4_res", 16, 0.4, MP_NORM_LAYERNORM, 1, 4},
    {"d16_ln_a0.6_res", 16, 0.6, MP_NORM_LAYERNORM, 1, 4},
    {"d16_ln_a0.8_res", 16, 0.8, MP_NORM_LAYERNORM, 1, 4},
};
#define RR_N ((int)(sizeof rr_grid / sizeof rr_grid[0]))
_Static_assert(sizeof rr_grid / sizeof rr_grid[0] <= MP_REPRO_RECENCY_MAX, "the grid outgrew MpReproRecency.run");
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

/* Reads back a finished run of the same settings (meta.json's stage_settings): the recency
 * probability and its standard error of every layer (each must be there) and the maps. */
static int rr_try_reuse(MpReproRecencyRun *r, const char *dir, const char *settings, int L) {
    json_t *m = mp_repro_store_meta_same(dir, settings);
    if (!m) return MP_ERR;
    MpErr e;
    json_t *rp = json_object_get(m, "recency_probability"), *se = json_object_get(m, "recency_probability_se");
    int rc = json_array_size(rp) == (size_t)L && json_array_size(se) == (size_t)L ? MP_OK
                                                                                  : mp_err_set(&e, "recency_probability: not %d layers", L);
    for (int l = 0; rc == MP_OK && l < L; l++) {
        json_t *x = json_array_get(rp, (size_t)l), *y = json_array_get(se, (size_t)l);
        if (!json_is_number(x) || !json_is_number(y)) rc = mp_err_set(&e, "recency_probability of layer %d: not a number", l + 1);
        else r->rp[l] = json_number_value(x), r->rp_se[l] = json_number_value(y);
    }
    if (rc == MP_OK) rc = mp_repro_store_num(&r->wall_s, m, "sim_wall_time_s", &e);
    json_decref(m);
    int64_t sh[3];
    if (rc == MP_OK && mp_repro_store_f64(&r->scores, sh, dir, "scores.npy", 3, &e) == MP_OK &&
        (sh[0] != L || sh[1] != RR_S || sh[2] != RR_S)) {
        free(r->scores);
        r->scores = NULL;
        rc = mp_err_set(&e, "scores.npy: not (%d,%d,%d)", L, RR_S, RR_S);
    } else if (rc == MP_OK && !r->scores)
        rc = MP_ERR;
    if (rc != MP_OK) printf("          %s: not reused (%s)\n", dir, e.msg);
    return rc;
}

/* One configuration into out/recency/<name>; MP_OK or MP_ERR (message printed). */
static int rr_run_one(MpReproRecencyRun *r, const RrConfig *g, const MpReproCtx *cx, int64_t batch) {
    const char *out = cx->out;
    const MpSimConfig *base = &cx->cfg->base;
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
    if (!cx->cfg->force && rr_try_reuse(r, dir, settings, c.layers) == MP_OK) {
        r->ok = r->skipped = 1;
        printf("  recency %-24s up to date, skipped (--force to redo)\n", g->name);
        return MP_OK;
    }
    MpSimResult s;
    memset(&s, 0, sizeof s);
    if (mp_sim_run(&s, &c, &e) != MP_OK || mp_sim_write_outputs(dir, &c, "sqrt", &s, 0, cx->cfg->argc, cx->cfg->argv, &e) != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: stage recency/%s: %s\n", g->name, e.msg);
        if (s.scores) mp_sim_result_free(&s);
        return MP_ERR;
    }
    mp_repro_store_meta_mark(dir, settings); /* the settings key, so an unchanged re-run reuses this folder */
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

static int recency_run(MpReproCtx *cx) {
    MpReproRecency *rr = recency_state(cx);
    const char *out = cx->out;
    const int quick = cx->cfg->quick;
    const double batch_scale = cx->cfg->batch_flag ? (double)cx->cfg->batch_flag / 100000.0 : 0.0;
    memset(rr, 0, sizeof *rr);
    const double t0 = mp_time_now();
    int failed = 0;
    rr->n = RR_N;
    for (int k = 0; k < RR_N && !mp_write_no_space(); k++) {
        double b = (double)rr_batch(rr_grid[k].dim) * (batch_scale > 0 ? batch_scale : 1.0) / (quick ? 50.0 : 1.0);
        const int64_t batch = b < 100 ? 100 : (int64_t)b;
        char nm[96];
        snprintf(nm, sizeof nm, "recency/%s", rr_grid[k].name);
        if (rr_run_one(&rr->run[k], &rr_grid[k], cx, batch) != MP_OK) failed += mp_repro_fail(cx, nm);
    }
    rr->wall_s = mp_time_now() - t0;
    if (!mp_write_no_space() && rr_figures(rr, out) != MP_OK) failed += mp_repro_fail(cx, "recency/figures");
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
_Static_assert(sizeof rr_figs / sizeof rr_figs[0] <= sizeof((MpReproRecency *)0)->fig_paths / sizeof(const char *),
               "the figures outgrew MpReproRecency.fig_paths");

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
            rows[n] = (MpFigRow){r->scores, r->L, RR_S, labels[n], 0, NULL};
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
static void rr_verdicts(MpReport *rp, const MpReproRecency *rr) {
    const double sig = mp_repro_expect_v(MP_REPRO_EXPECT_RECENCY_SIGMAS, 0), digit = mp_repro_expect_tol(MP_REPRO_EXPECT_RECENCY_SIGMAS);
    const double authors_b = mp_repro_expect_v(MP_REPRO_EXPECT_RECENCY_AUTHORS_BATCH, 0);
    for (int k = 0; k < rr->n && k < RR_N; k++) {
        const MpReproRecencyRun *r = &rr->run[k];
        const RrConfig *g = &rr_grid[k];
        if (!r->ok) continue;
        char key[64];
        snprintf(key, sizeof key, "recency.%s", g->name);
        const MpReproExpect *want = mp_repro_expect_named(key); /* (recency_check: there) */
        MP_ASSERT(want);
        char what[160], label[96], exp_s[96] = "", got_s[192] = "", note[256] = "";
        rr_label(label, sizeof label, g);
        snprintf(what, sizeof what, "Later version: RP layers 1–%d, %s", r->L, label);
        int ok = 1;
        double se_max = 0, worst = 0;
        int worst_l = 0;
        for (int l = 0; l < r->L; l++) {
            size_t ne = strlen(exp_s), ng = strlen(got_s);
            snprintf(exp_s + ne, sizeof exp_s - ne, "%s%.4f", l ? " " : "", want->v[l]);
            snprintf(got_s + ng, sizeof got_s - ng, "%s%.4f", l ? " " : "", r->rp[l]);
            se_max = r->rp_se[l] > se_max ? r->rp_se[l] : se_max;
            if (isnan(want->v[l])) continue;
            const double nt = (double)r->batch * mp_recency_triples(RR_S, 0);
            const double se_b = sqrt(want->v[l] * (1 - want->v[l]) / nt);
            const double se = r->rp_se[l] > se_b ? r->rp_se[l] : se_b;
            const double se_a = se * sqrt((double)r->batch / authors_b), se_c = sqrt(se * se + se_a * se_a);
            const double z = fabs(r->rp[l] - want->v[l]) / se_c;
            if (!(fabs(r->rp[l] - want->v[l]) <= sig * se_c + digit)) ok = 0;
            if (z > worst || isnan(z)) worst = z, worst_l = l;
        }
        size_t ng = strlen(got_s);
        snprintf(got_s + ng, sizeof got_s - ng, " (se ≤ %.4f, B = %lld)", se_max, (long long)r->batch);
        snprintf(note, sizeof note, "authors' %s.pdf%s", want->source, ok ? "" : "; differs");
        if (!ok) {
            size_t nn = strlen(note);
            snprintf(note + nn, sizeof note - nn, " at layer %d by %.1f standard errors", worst_l + 1, worst);
        }
        mp_report_row(rp, what, exp_s, got_s, ok, note);
    }
}

/* The verdict rows, then the figures (the mean-map ones with the interactive viewer of their runs). */
static int recency_report(MpReproCtx *cx, MpReport *rp, MpErr *e) {
    (void)e; /* drawn with the runs (rr_figures) */
    const MpReproRecency *rr = recency_state(cx);
    rr_verdicts(rp, rr);
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
    return MP_OK;
}

/* When the tables are registered: every configuration of the grid has the authors' values. */
static int recency_check(MpErr *e) {
    for (int k = 0; k < RR_N; k++) {
        char key[64];
        snprintf(key, sizeof key, "recency.%s", rr_grid[k].name);
        const MpReproExpect *want = mp_repro_expect_named(key);
        if (!want) return mp_err_set(e, "configuration %s: no expected value \"%s\" in expect.c", rr_grid[k].name, key);
        if (want->n < rr_grid[k].layers)
            return mp_err_set(e, "configuration %s: \"%s\" has %d values for %d layers", rr_grid[k].name, key, want->n,
                              rr_grid[k].layers);
    }
    return MP_OK;
}

const MpReproStage mp_repro_stage_recency = {
    .name = "recency",
    .key = "meta.json stage_settings: version, B, S, d, layers, alpha, norm, residual, seed",
    .run = recency_run,
    .report = recency_report,
    .check = recency_check, /* (its runs are its own, not the context's: no .runs) */
};

static void recency_release(void *state) {
    MpReproRecency *rr = state;
    for (int k = 0; k < MP_REPRO_RECENCY_MAX; k++) free(rr->run[k].scores);
    memset(rr, 0, sizeof *rr);
}

