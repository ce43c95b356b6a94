/* registry.c — the stage table of `reproduce` and the run that walks it: the stages, then the
 * figures of the figure tables (with their verdict rows), then each stage's own report part,
 * the per-run statistics and report.md + report.html. See repro.h and stage.h.
 *
 * ================================================================ layout
 *   the table       the stages in report order
 *   the context     named runs, failures
 *   figures         drawing an MpReproFigure and adding it with its viewer and verdict rows
 *   the report      header, statistics table, footer, writers
 *   the run         mp_repro_run
 */
#include "repro/repro.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"     /* MP_VERSION */
#include "core/util.h"     /* mp_path_join, mp_time_now, mp_calloc_or_die */
#include "repro/recency.h" /* MpReproRecency, MpReproLength */
#include "repro/stage.h"   /* MpReproCtx, MpReproStage, MpReproFigure */
#include "repro/stories.h" /* MpReproStories */
#include "viz/figs.h"      /* mp_fig_rows, mp_fig_rows_clip */
#include "viz/plot.h"      /* mp_plot_release */
#include "viz/report.h"    /* MpReport */

/* ================================================================ the table */

static const MpReproStage *const stages[] = {
    &mp_repro_stage_fig1, &mp_repro_stage_fig2,    &mp_repro_stage_fig2ln, &mp_repro_stage_fig3,   &mp_repro_stage_fig4,
    &mp_repro_stage_fig5, &mp_repro_stage_recency, &mp_repro_stage_length, &mp_repro_stage_stories,
};
#define N_STAGES ((int)(sizeof stages / sizeof stages[0]))

/* The figure tables, in report order. */
static const MpReproFigure *const fig_tables[] = {mp_repro_figs_paper, mp_repro_figs_models};

const char *mp_repro_stage_name(int k) { return k >= 0 && k < N_STAGES ? stages[k]->name : NULL; }

int mp_repro_stage_find(const char *name) {
    for (int k = 0; k < N_STAGES; k++)
        if (!strcmp(stages[k]->name, name)) return k;
    return -1;
}

static int stage_on(const MpReproCtx *c, const char *name) {
    const int k = mp_repro_stage_find(name);
    return k >= 0 && (c->cfg->stages >> k & 1u);
}

/* ================================================================ the context */

int mp_repro_fail(MpReproCtx *c, const char *what) {
    size_t n = strlen(c->failed_names);
    snprintf(c->failed_names + n, sizeof c->failed_names - n, "%s%s", n ? ", " : "", what);
    return 1;
}

MpReproMaps *mp_repro_maps_add(MpReproCtx *c, const char *dir, const char *label) {
    MP_ASSERT(c->nruns < MP_REPRO_MAX_RUNS);
    MpReproMaps *m = mp_calloc_or_die(1, sizeof *m, "reproduce run");
    snprintf(m->dir, sizeof m->dir, "%s", dir);
    snprintf(m->label, sizeof m->label, "%s", label ? label : "");
    c->runs[c->nruns++] = m;
    return m;
}

const MpReproMaps *mp_repro_maps(const MpReproCtx *c, const char *dir) {
    for (int k = c->nruns - 1; k >= 0; k--)
        if (!strcmp(c->runs[k]->dir, dir)) return c->runs[k]->ok ? c->runs[k] : NULL;
    return NULL;
}

void mp_repro_maps_free(MpReproMaps *m) {
    free(m->scores);
    free(m->se);
    free(m->diagnorm);
    memset(m, 0, sizeof *m);
}

double mp_repro_max_abs_res(const MpPosStats *st, int l) {
    return fabs(st[l].res_min) > fabs(st[l].res_max) ? fabs(st[l].res_min) : fabs(st[l].res_max);
}

/* ================================================================ figures */

/* Draws figure f from its panels' maps; 0 when a panel it needs is missing (not drawn). */
static int fig_panels(const MpReproCtx *c, const MpReproFigure *f, const char *path, MpErr *e) {
    MpFigRow rows[MP_REPRO_FIG_PANELS];
    int n = 0;
    for (int p = 0; p < MP_REPRO_FIG_PANELS && f->panels[p].run; p++) {
        const MpReproMaps *m = mp_repro_maps(c, f->panels[p].run);
        if (!m && f->panels[p].optional) continue;
        if (!m) return 0;
        rows[n++] = (MpFigRow){m->scores, m->L, m->S, f->panels[p].label, f->panels[p].diagnorm};
    }
    if (!n) return 0;
    char title[256];
    if (f->title) snprintf(title, sizeof title, "%s", f->title);
    else f->title_fn(title, sizeof title, c);
    const int rc = isnan(f->clip_lo) ? mp_fig_rows(path, title, rows, n, e) : mp_fig_rows_clip(path, title, rows, n, f->clip_lo, f->clip_hi, e);
    return rc == MP_OK ? 1 : -1;
}

/* Figure f: drawn (or found), added to the report with a viewer of its runs, and its verdict
 * rows. MP_ERR when drawing failed. */
static int fig_add(const MpReproCtx *c, const MpReproFigure *f, MpReport *rp, MpErr *e) {
    if (f->verdict) f->verdict(c, rp); /* rows whether or not the figure can be drawn */
    if (!stage_on(c, f->stage)) return MP_OK;
    char path[4096], caption[512];
    if (mp_path_join(path, sizeof path, c->out, f->file, e)) return MP_ERR;
    int shown;
    if (f->ready) {
        shown = f->ready(c);
        if (shown && f->draw && f->draw(c, path, e) != MP_OK) return MP_ERR;
    } else if ((shown = fig_panels(c, f, path, e)) < 0)
        return MP_ERR;
    if (!shown) return MP_OK;
    if (f->caption) f->caption(caption, sizeof caption, c);
    else snprintf(caption, sizeof caption, "%s", f->caption_text);
    mp_report_fig(rp, caption, f->file);
    for (int p = 0; p < MP_REPRO_FIG_PANELS && f->panels[p].run; p++) { /* every run once, in panel order */
        int seen = 0;
        for (int q = 0; q < p; q++) seen |= !strcmp(f->panels[q].run, f->panels[p].run);
        if (!seen) mp_report_fig_view(rp, f->file, f->panels[p].run);
    }
    return MP_OK;
}

/* ================================================================ the report */

/* Whether a stage with simulations at the base settings (B, S, d, layers) is asked for. */
static int sims_on(const MpReproCtx *c) {
    static const char *const with_sims[] = {"fig2", "fig2ln", "fig3", "fig4", "recency"};
    for (size_t k = 0; k < sizeof with_sims / sizeof with_sims[0]; k++)
        if (stage_on(c, with_sims[k])) return 1;
    return 0;
}

/* "fig5 (stories260K.gguf over 1000 x 1024 tokens of corpus.txt)": the stages asked for, when
 * not all of them; "" for a whole run. */
static void stages_text(char *buf, size_t cap, const MpReproCtx *c) {
    const uint32_t all = (1u << N_STAGES) - 1;
    buf[0] = '\0';
    if ((c->cfg->stages & all) == all) return;
    size_t n = 0;
    for (int k = 0; k < N_STAGES && n < cap; k++)
        if (c->cfg->stages >> k & 1u) {
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "stages: ", stages[k]->name);
            if (n < cap && !strcmp(stages[k]->name, "fig5") && c->cfg->model)
                n += (size_t)snprintf(buf + n, cap - n, " (your model %s over %s)", c->user_name, c->cfg->data);
        }
}

static void report_head(MpReport *rp, const MpReproCtx *c, double t0) {
    const MpReproConfig *cfg = c->cfg;
    char st[512];
    stages_text(st, sizeof st, c);
    snprintf(rp->title, sizeof rp->title, "maskpos reproduce — Kim et al. 2025, Behind RoPE");
    if (sims_on(c) || !st[0]) /* a whole run's header is the same as before */
        snprintf(rp->intro, sizeof rp->intro,
                 "maskpos %s; B = %lld sequences per simulation, S = %d, d = %d, %d layers, seed %llu; wall time %.1f s.%s%s",
                 MP_VERSION, (long long)cfg->base.batch, cfg->base.seq, cfg->base.dim, cfg->base.layers,
                 (unsigned long long)cfg->base.seed, mp_time_now() - t0, st[0] ? " " : "", st);
    else /* no simulation ran: nothing to say about B, S, d */
        snprintf(rp->intro, sizeof rp->intro, "maskpos %s; %s; seed %llu; wall time %.1f s.", MP_VERSION, st,
                 (unsigned long long)cfg->base.seed, mp_time_now() - t0);
    snprintf(rp->method, sizeof rp->method,
             "Verdicts compare with the values in paper.md; Monte-Carlo rows allow 0.003 + 4 standard errors of this run.");
    static const char *const heads[] = {"run", "layer", "NRI", "residue min", "residue max", "rms/noise", "block z", "wall s"};
    mp_report_stats_head(rp, "Per-run statistics (docs/metrics.md)", heads, (int)(sizeof heads / sizeof heads[0]));
}

/* One statistics row per layer of every listed run, in the order they ran (columns as in
 * report_head). */
static int report_stats(MpReport *rp, const MpReproCtx *c, MpErr *e) {
    for (int k = 0; k < c->nruns; k++) {
        const MpReproMaps *m = c->runs[k];
        if (!m->ok || !m->label[0]) continue;
        for (int l = 0; l < m->L; l++) {
            char row[8][64] = {{0}};
            snprintf(row[0], sizeof row[0], "%s", m->label);
            snprintf(row[1], sizeof row[1], "%d", l + 1);
            snprintf(row[2], sizeof row[2], "%.6f", m->stats[l].nri);
            snprintf(row[3], sizeof row[3], "%+.5f", m->stats[l].res_min);
            snprintf(row[4], sizeof row[4], "%+.5f", m->stats[l].res_max);
            snprintf(row[5], sizeof row[5], "%.2f", m->stats[l].z_rms);
            if (m->has_block_z) snprintf(row[6], sizeof row[6], "%.2f", m->block_z[l]);
            else snprintf(row[6], sizeof row[6], "–");
            if (l == 0) snprintf(row[7], sizeof row[7], "%.1f%s", m->wall_s, m->skipped ? " (reused)" : "");
            const char *cells[8];
            for (int col = 0; col < 8; col++) cells[col] = row[col];
            if (mp_report_stats_row(rp, cells, 8, e) != MP_OK) return MP_ERR;
        }
    }
    return MP_OK;
}

static void report_footer(MpReport *rp, const MpReproCtx *c) {
    rp->footer[0] = '\0';
    if (stage_on(c, "fig3") || (stage_on(c, "fig5") && !c->cfg->model)) /* the embedded models ran */
        snprintf(rp->footer, sizeof rp->footer,
             "Model stages: the embedded models (models/none, models/rope: 4-layer byte-level decoders trained by maskpos on "
             "the King James Bible, models/kjv.txt) probed over %lld windows of %d bytes (the paper's 1000 × 1024 tokens "
             "when not --quick); rms/noise is the residue's rms over the per-entry standard errors, block z the same test on the residue's means over a "
             "16 × 16 grid of blocks (both ≈ 1 for pure noise; docs/metrics.md).%s",
                 (long long)c->n_embedded, MP_REPRO_MODEL_SEQ, c->failed ? " FAILED stages (see the command's error output): " : "");
    else
        snprintf(rp->footer, sizeof rp->footer,
                 "rms/noise is the residue's rms over the per-entry standard errors, block z the same test on the residue's "
                 "means over a 16 × 16 grid of blocks (both ≈ 1 for pure noise; docs/metrics.md); the regional block test "
                 "repeats it on the first keys, the last queries, the last keys and the interior.%s",
                 c->failed ? " FAILED stages (see the command's error output): " : "");
    if (c->failed) {
        size_t fl = strlen(rp->footer);
        snprintf(rp->footer + fl, sizeof rp->footer - fl, "%s.", c->failed_names);
    }
}

/* Figures, rows, statistics and both files. */
static int report_write(MpReproCtx *c, MpReproSummary *sum, double t0, MpErr *e) {
    MpReport *rp = mp_calloc_or_die(1, sizeof *rp, "report");
    report_head(rp, c, t0);
    for (size_t t = 0; t < sizeof fig_tables / sizeof fig_tables[0]; t++)
        for (const MpReproFigure *f = fig_tables[t]; f->file; f++)
            if (fig_add(c, f, rp, e) != MP_OK) {
                fprintf(stderr, "maskpos reproduce: error: figures: %s\n", e->msg);
                c->failed += mp_repro_fail(c, "figures");
            }
    if (report_stats(rp, c, e) != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: statistics: %s\n", e->msg);
        c->failed += mp_repro_fail(c, "statistics");
    }
    for (int k = 0; k < N_STAGES; k++)
        if (stages[k]->report && (c->cfg->stages >> k & 1u) && stages[k]->report(c, rp, e) != MP_OK) {
            fprintf(stderr, "maskpos reproduce: error: %s figure: %s\n", stages[k]->name, e->msg);
            char nm[64];
            snprintf(nm, sizeof nm, "%s/figure", stages[k]->name);
            c->failed += mp_repro_fail(c, nm);
        }
    report_footer(rp, c);
    char path[4096], hpath[4096];
    int rc = MP_ERR;
    if (mp_path_join(path, sizeof path, c->out, "report.md", e) == MP_OK &&
        mp_path_join(hpath, sizeof hpath, c->out, "report.html", e) == MP_OK && mp_report_write_md(rp, path, e) == MP_OK &&
        mp_report_write_html(rp, c->out, hpath, e) == MP_OK)
        rc = MP_OK;
    sum->npass = rp->npass;
    sum->nrows = rp->nrows;
    mp_report_free(rp);
    free(rp);
    return rc;
}

/* ================================================================ the run */

static void ctx_free(MpReproCtx *c) {
    for (int k = 0; k < c->nruns; k++) {
        mp_repro_maps_free(c->runs[k]);
        free(c->runs[k]);
    }
    mp_repro_gram_free(&c->gram);
    if (c->rec) mp_repro_recency_free(c->rec);
    if (c->stories) mp_repro_stories_free(c->stories);
    free(c->rec);
    free(c->len);
    free(c->stories);
    if (c->have_th) mp_theory_free(&c->th);
    memset(c, 0, sizeof *c);
}

int mp_repro_run(MpReproSummary *sum, const MpReproConfig *cfg, MpErr *e) {
    memset(sum, 0, sizeof *sum);
    MpReproCtx c;
    memset(&c, 0, sizeof c);
    c.cfg = cfg;
    c.out = cfg->out;
    c.rec = mp_calloc_or_die(1, sizeof *c.rec, "recency");
    c.len = mp_calloc_or_die(1, sizeof *c.len, "length");
    c.stories = mp_calloc_or_die(1, sizeof *c.stories, "stories");
    c.n_embedded = cfg->model_n ? cfg->model_n : cfg->quick ? 400 : 8000; /* 8000 x 128 = the paper's 1000 x 1024 tokens */
    if (cfg->model) {
        const char *slash = strrchr(cfg->model, '/');
        c.user_name = slash && slash[1] ? slash + 1 : cfg->model;
    }
    const double t0 = mp_time_now();
    if (sims_on(&c))
        printf("maskpos reproduce: B=%lld S=%d d=%d layers=%d seed=%llu -> %s/\n", (long long)cfg->base.batch, cfg->base.seq,
               cfg->base.dim, cfg->base.layers, (unsigned long long)cfg->base.seed, cfg->out);
    else {
        char st[512];
        stages_text(st, sizeof st, &c);
        printf("maskpos reproduce: %s; seed=%llu -> %s/\n", st[0] ? st : "every stage", (unsigned long long)cfg->base.seed,
               cfg->out);
    }
    int total = 0, done = 0, stopped = 0;
    for (int k = 0; k < N_STAGES; k++) total += cfg->stages >> k & 1u;
    stopped = cfg->progress && cfg->progress(cfg->progress_ctx, 0, total);
    for (int k = 0; k < N_STAGES && !stopped && !mp_write_no_space(); k++) /* (a full disk: one error, then stop) */
        if (cfg->stages >> k & 1u) {
            c.failed += stages[k]->run(&c);
            stopped = cfg->progress && cfg->progress(cfg->progress_ctx, ++done, total);
        }
    sum->no_space = mp_write_no_space(); /* no report then: its writes would fail too, each with a line */
    int rc = sum->no_space ? MP_OK : report_write(&c, sum, t0, e);
    if (rc == MP_OK && stopped) rc = mp_err_set(e, "%s", MP_JOB_STOPPED_MSG);
    sum->failed = c.failed;
    snprintf(sum->failed_names, sizeof sum->failed_names, "%s", c.failed_names);
    sum->wall_s = mp_time_now() - t0;
    ctx_free(&c);
    mp_plot_release();
    return rc;
}
