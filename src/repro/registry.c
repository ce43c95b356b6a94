/* registry.c — the top of `reproduce`: the stage table and the figure tables in report order,
 * their registration check, and the run that walks them: the stages, then the figures of the
 * figure tables (with their verdict rows), then each stage's own report part, the per-run
 * statistics and report.md + report.html. See repro.h; stage.h says what an entry holds.
 * Nothing of src/repro includes this file's header (repro.h); it includes the units below it:
 * the context (ctx.h), the tables' types (stage.h), the simulation table (sims.h), the expected
 * values (expect.h).
 *
 * ================================================================ layout
 *   the tables      the stages and the figure tables in report order
 *   registration    the names that join the tables, checked before any stage runs
 *   figures         drawing an MpReproFigure and adding it with its viewer and verdict rows
 *   the report      header, statistics table, footer, writers
 *   the run         mp_repro_run
 * Tested by: tests/test_reproduce_store.c (the check, with bad tables), tests/test_reproduce.c.
 */
#include "repro/repro.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"     /* MP_VERSION */
#include "core/util.h"     /* mp_path_join, mp_time_now, mp_calloc_or_die */
#include "repro/ctx.h"     /* MpReproCtx, mp_repro_ctx_init, mp_repro_fail */
#include "repro/expect.h"  /* mp_repro_expect_check: the table of expected values */
#include "repro/sims.h"    /* mp_repro_sims_entry: the runs of the simulation table */
#include "repro/stage.h"   /* MpReproStage, MpReproFigure, MpReproTables */
#include "viz/figs.h"      /* mp_fig_rows, mp_fig_rows_clip */
#include "viz/plot.h"      /* mp_plot_release */
#include "viz/report.h"    /* MpReport */

/* ================================================================ the tables */

static const MpReproStage *const stages[] = {
    &mp_repro_stage_fig1, &mp_repro_stage_fig2,    &mp_repro_stage_fig2ln, &mp_repro_stage_fig3,   &mp_repro_stage_fig4,
    &mp_repro_stage_fig5, &mp_repro_stage_recency, &mp_repro_stage_length, &mp_repro_stage_stories, &mp_repro_stage_beyond,
};
#define N_STAGES ((int)(sizeof stages / sizeof stages[0]))
_Static_assert(sizeof stages / sizeof stages[0] <= 31, "MpReproConfig.stages has a bit per stage");

/* The figure tables, in report order. */
static const MpReproFigure *const fig_tables[] = {mp_repro_figs_paper, mp_repro_figs_models};

static const MpReproTables builtin = {stages, N_STAGES, fig_tables, (int)(sizeof fig_tables / sizeof fig_tables[0])};

const char *mp_repro_stage_name(int k) { return k >= 0 && k < N_STAGES ? stages[k]->name : NULL; }

int mp_repro_stage_find(const char *name) {
    for (int k = 0; k < N_STAGES; k++)
        if (!strcmp(stages[k]->name, name)) return k;
    return -1;
}

/* Index of the stage named name in t (-1: none). */
static int tables_stage(const MpReproTables *t, const char *name) {
    for (int k = 0; k < t->nstages; k++)
        if (!strcmp(t->stages[k]->name, name)) return k;
    return -1;
}

static int stage_on(const MpReproTables *t, const MpReproCtx *c, const char *name) {
    const int k = tables_stage(t, name);
    return k >= 0 && (c->cfg->stages >> k & 1u);
}

/* ================================================================ registration */

/* Whether stage s adds (or draws) the run of folder dir: its own list, or its entries of the
 * simulation table. */
static int stage_declares(const MpReproStage *s, const char *dir) {
    for (int k = 0; s->runs && s->runs[k]; k++)
        if (!strcmp(s->runs[k], dir)) return 1;
    const char *stage, *name;
    const size_t n = strlen(s->name);
    for (int k = 0; mp_repro_sims_entry(k, &stage, &name); k++)
        if (!strcmp(stage, s->name) && !strncmp(dir, s->name, n) && dir[n] == '/' && !strcmp(dir + n + 1, name)) return 1;
    return 0;
}

static int tables_declare(const void *tables, const char *dir) {
    const MpReproTables *t = tables;
    for (int k = 0; k < t->nstages; k++)
        if (stage_declares(t->stages[k], dir)) return 1;
    return 0;
}

/* The stage table: names given, unique, each with a run function. */
static int check_stages(const MpReproTables *t, MpErr *e) {
    if (t->nstages < 1 || t->nstages > 31) return mp_err_set(e, "the stage table has %d stages (1..31)", t->nstages);
    for (int k = 0; k < t->nstages; k++) {
        const MpReproStage *s = t->stages[k];
        if (!s->name || !s->name[0] || !s->run) return mp_err_set(e, "stage %d of the stage table has no name or no run function", k + 1);
        if (tables_stage(t, s->name) != k) return mp_err_set(e, "stage \"%s\" is in the stage table twice", s->name);
        if (s->check && s->check(e) != MP_OK) return mp_err_prefix(e, "stage %s", s->name);
    }
    return MP_OK;
}

/* One figure: its stage is a stage of t, its file is not another figure's, it has panels or is
 * drawn otherwise, and every panel's run is one a stage declares. */
static int check_figure(const MpReproTables *t, const MpReproFigure *f, MpErr *e) {
    if (!f->stage || tables_stage(t, f->stage) < 0)
        return mp_err_set(e, "figure %s: stage \"%s\" is not in the stage table", f->file, f->stage ? f->stage : "(none)");
    for (int u = 0; u < t->nfigs; u++)
        for (const MpReproFigure *g = t->figs[u]; g->file; g++)
            if (g != f && !strcmp(g->file, f->file)) return mp_err_set(e, "figure %s: two figures write that file", f->file);
    if (!f->ready && !f->panels[0].run) return mp_err_set(e, "figure %s: no panels and no ready function", f->file);
    if (!f->ready && !f->title && !f->title_fn) return mp_err_set(e, "figure %s: no title and no title function", f->file);
    if (!f->caption && !f->caption_text) return mp_err_set(e, "figure %s: no caption", f->file);
    for (int p = 0; p < MP_REPRO_FIG_PANELS && f->panels[p].run; p++)
        if (!tables_declare(t, f->panels[p].run))
            return mp_err_set(e, "figure %s: panel run \"%s\" is not a run any stage declares (MpReproStage.runs or sims.c)",
                              f->file, f->panels[p].run);
    return MP_OK;
}

/* The names that join the tables, before any stage runs. MP_OK, or MP_ERR with one line naming
 * the stage, figure, run or key. */
static int tables_check(const MpReproTables *t, MpErr *e) {
    if (check_stages(t, e) != MP_OK) return MP_ERR;
    for (int u = 0; u < t->nfigs; u++)
        for (const MpReproFigure *f = t->figs[u]; f->file; f++)
            if (check_figure(t, f, e) != MP_OK) return MP_ERR;
    return mp_repro_expect_check(e);
}

/* After stage s ran: every run it added to the context (from index first on) is one it declares
 * (a run the figure check could not see is a programmer error). */
static void check_added(const MpReproCtx *c, const MpReproStage *s, int first) {
    for (int k = first; k < c->nruns; k++)
        if (!stage_declares(s, c->runs[k]->dir)) {
            fprintf(stderr, "maskpos reproduce: stage %s added run \"%s\" that it does not declare\n", s->name, c->runs[k]->dir);
            MP_ASSERT(!"a stage's runs list is missing a run it adds");
        }
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
        rows[n++] = (MpFigRow){m->scores, m->L, m->S, f->panels[p].label, f->panels[p].diagnorm, m->note};
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
static int fig_add(const MpReproTables *t, const MpReproCtx *c, const MpReproFigure *f, MpReport *rp, MpErr *e) {
    if (f->verdict) f->verdict(c, rp); /* rows whether or not the figure can be drawn */
    if (!stage_on(t, c, f->stage)) return MP_OK;
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
static int sims_on(const MpReproTables *t, const MpReproCtx *c) {
    static const char *const with_sims[] = {"fig2", "fig2ln", "fig3", "fig4", "recency"};
    for (size_t k = 0; k < sizeof with_sims / sizeof with_sims[0]; k++)
        if (stage_on(t, c, with_sims[k])) return 1;
    return 0;
}

/* "fig5 (stories260K.gguf over 1000 x 1024 tokens of corpus.txt)": the stages asked for, when
 * not all of them; "" for a whole run. */
static void stages_text(char *buf, size_t cap, const MpReproTables *t, const MpReproCtx *c) {
    const uint32_t all = (1u << t->nstages) - 1;
    buf[0] = '\0';
    if ((c->cfg->stages & all) == all) return;
    size_t n = 0;
    for (int k = 0; k < t->nstages && n < cap; k++)
        if (c->cfg->stages >> k & 1u) {
            n += (size_t)snprintf(buf + n, cap - n, "%s%s", n ? ", " : "stages: ", t->stages[k]->name);
            if (n < cap && !strcmp(t->stages[k]->name, "fig5") && c->cfg->model)
                n += (size_t)snprintf(buf + n, cap - n, " (your model %s over %s)", c->user_name, c->cfg->data);
        }
}

static void report_head(MpReport *rp, const MpReproTables *t, const MpReproCtx *c, double t0) {
    const MpReproConfig *cfg = c->cfg;
    char st[512];
    stages_text(st, sizeof st, t, c);
    snprintf(rp->title, sizeof rp->title, "maskpos reproduce — Kim et al. 2025, Behind RoPE");
    if (sims_on(t, c) || !st[0]) /* a whole run's header is the same as before */
        snprintf(rp->intro, sizeof rp->intro,
                 "maskpos %s; B = %lld sequences per simulation, S = %d, d = %d, %d layers, seed %llu; wall time %.1f s.%s%s",
                 MP_VERSION, (long long)cfg->base.batch, cfg->base.seq, cfg->base.dim, cfg->base.layers,
                 (unsigned long long)cfg->base.seed, mp_time_now() - t0, st[0] ? " " : "", st);
    else /* no simulation ran: nothing to say about B, S, d */
        snprintf(rp->intro, sizeof rp->intro, "maskpos %s; %s; seed %llu; wall time %.1f s.", MP_VERSION, st,
                 (unsigned long long)cfg->base.seed, mp_time_now() - t0);
    snprintf(rp->method, sizeof rp->method,
             "Verdicts compare with the values in paper.md; Monte-Carlo rows allow 0.003 + 4 standard errors of this run.");
    static const char *const heads[] = {"run",         "layer",       "NRI",     "NRI corr", "residue min",
                                        "residue max", "rms/noise",   "block z", "resolved at this N", "wall s"};
    mp_report_stats_head(rp, "Per-run statistics (docs/metrics.md)", heads, (int)(sizeof heads / sizeof heads[0]));
}

/* One statistics row per layer of every listed run, in the order they ran (columns as in
 * report_head). */
static int report_stats(MpReport *rp, const MpReproCtx *c, MpErr *e) {
    for (int k = 0; k < c->nruns; k++) {
        const MpReproMaps *m = c->runs[k];
        if (!m->ok || !m->label[0]) continue;
        for (int l = 0; l < m->L; l++) {
            char row[10][160] = {{0}};
            snprintf(row[0], sizeof row[0], "%s", m->label);
            snprintf(row[1], sizeof row[1], "%d", l + 1);
            snprintf(row[2], sizeof row[2], "%.6f", m->stats[l].nri);
            if (isfinite(m->nri_corr[l])) snprintf(row[3], sizeof row[3], "%.6f", m->nri_corr[l]);
            else snprintf(row[3], sizeof row[3], "–");
            snprintf(row[4], sizeof row[4], "%+.5f", m->stats[l].res_min);
            snprintf(row[5], sizeof row[5], "%+.5f", m->stats[l].res_max);
            snprintf(row[6], sizeof row[6], "%.2f", m->stats[l].z_rms);
            if (m->has_block_z) snprintf(row[7], sizeof row[7], "%.2f", m->block_z[l]);
            else snprintf(row[7], sizeof row[7], "–");
            /* is the residue resolved: the figures' note (block z or rms/noise against its noise level) */
            snprintf(row[8], sizeof row[8], "%s%s", m->resolved[l] ? "yes: " : "NO: ", m->note[l].text);
            if (l == 0) snprintf(row[9], sizeof row[9], "%.1f%s", m->wall_s, m->skipped ? " (reused)" : "");
            const char *cells[10];
            for (int col = 0; col < 10; col++) cells[col] = row[col];
            if (mp_report_stats_row(rp, cells, 10, e) != MP_OK) return MP_ERR;
        }
    }
    return MP_OK;
}

static void report_footer(MpReport *rp, const MpReproTables *t, const MpReproCtx *c) {
    char head[1536]; /* our fixed text and two numbers */
    if (stage_on(t, c, "fig3") || (stage_on(t, c, "fig5") && !c->cfg->model)) /* the embedded models ran */
        snprintf(head, sizeof head,
             "Model stages: the embedded models (models/none, models/rope: 4-layer byte-level decoders trained by maskpos on "
             "the King James Bible, models/kjv.txt) probed over %lld windows of %d bytes (the paper's 1000 × 1024 tokens "
             "when not --quick); rms/noise is the residue's rms over the per-entry standard errors, block z the same test on the residue's means over a "
             "16 × 16 grid of blocks (both ≈ 1 for pure noise; docs/metrics.md).%s",
                 (long long)c->n_embedded, MP_REPRO_MODEL_SEQ, c->failed ? " FAILED stages (see the command's error output): " : "");
    else
        snprintf(head, sizeof head,
                 "rms/noise is the residue's rms over the per-entry standard errors, block z the same test on the residue's "
                 "means over a 16 × 16 grid of blocks (both ≈ 1 for pure noise; docs/metrics.md); the regional block test "
                 "repeats it on the first keys, the last queries, the last keys and the interior.%s",
                 c->failed ? " FAILED stages (see the command's error output): " : "");
    mp_report_footer(rp, head, c->failed ? c->failed_names : NULL, c->failed ? "." : NULL);
}

/* Figures, rows, statistics and both files. */
static int report_write(const MpReproTables *t, MpReproCtx *c, MpReproSummary *sum, double t0, MpErr *e) {
    MpReport *rp = mp_calloc_or_die(1, sizeof *rp, "report");
    report_head(rp, t, c, t0);
    for (int u = 0; u < t->nfigs; u++)
        for (const MpReproFigure *f = t->figs[u]; f->file; f++)
            if (fig_add(t, c, f, rp, e) != MP_OK) {
                fprintf(stderr, "maskpos reproduce: error: figures: %s\n", e->msg);
                c->failed += mp_repro_fail(c, "figures");
            }
    if (report_stats(rp, c, e) != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: statistics: %s\n", e->msg);
        c->failed += mp_repro_fail(c, "statistics");
    }
    for (int k = 0; k < t->nstages; k++) {
        const MpReproStage *s = t->stages[k];
        if (s->report && (c->cfg->stages >> k & 1u) && s->report(c, rp, e) != MP_OK) {
            fprintf(stderr, "maskpos reproduce: error: %s figure: %s\n", s->name, e->msg);
            char nm[64];
            snprintf(nm, sizeof nm, "%s/figure", s->name);
            c->failed += mp_repro_fail(c, nm);
        }
    }
    report_footer(rp, t, c);
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

/* The stages asked for, in table order, each checked for the runs it added; MP_OK, or MP_ERR
 * when the progress callback stopped the run. */
static int stages_run(const MpReproTables *t, MpReproCtx *c) {
    const MpReproConfig *cfg = c->cfg;
    int total = 0, done = 0;
    for (int k = 0; k < t->nstages; k++) total += cfg->stages >> k & 1u;
    if (cfg->progress && cfg->progress(cfg->progress_ctx, 0, total)) return MP_ERR;
    for (int k = 0; k < t->nstages && !mp_write_no_space(); k++) /* (a full disk: one error, then stop) */
        if (cfg->stages >> k & 1u) {
            const int first = c->nruns;
            c->failed += t->stages[k]->run(c);
            check_added(c, t->stages[k], first);
            if (cfg->progress && cfg->progress(cfg->progress_ctx, ++done, total)) return MP_ERR;
        }
    return MP_OK;
}

int mp_repro_run_tables(MpReproSummary *sum, const MpReproConfig *cfg, const MpReproTables *t, MpErr *e) {
    memset(sum, 0, sizeof *sum);
    if (tables_check(t, e) != MP_OK) return mp_err_prefix(e, "the tables of reproduce"); /* before any stage runs */
    MpReproCtx c;
    mp_repro_ctx_init(&c, cfg);
    c.declares = tables_declare;
    c.tables = t;
    const double t0 = mp_time_now();
    if (sims_on(t, &c))
        printf("maskpos reproduce: B=%lld S=%d d=%d layers=%d seed=%llu -> %s/\n", (long long)cfg->base.batch, cfg->base.seq,
               cfg->base.dim, cfg->base.layers, (unsigned long long)cfg->base.seed, cfg->out);
    else {
        char st[512];
        stages_text(st, sizeof st, t, &c);
        printf("maskpos reproduce: %s; seed=%llu -> %s/\n", st[0] ? st : "every stage", (unsigned long long)cfg->base.seed,
               cfg->out);
    }
    const int stopped = stages_run(t, &c) != MP_OK;
    sum->no_space = mp_write_no_space(); /* no report then: its writes would fail too, each with a line */
    int rc = sum->no_space ? MP_OK : report_write(t, &c, sum, t0, e);
    if (rc == MP_OK && stopped) rc = mp_err_set(e, "%s", MP_JOB_STOPPED_MSG);
    sum->failed = c.failed;
    sum->wall_s = mp_time_now() - t0;
    mp_repro_ctx_free(&c);
    mp_plot_release();
    return rc;
}

int mp_repro_run(MpReproSummary *sum, const MpReproConfig *cfg, MpErr *e) { return mp_repro_run_tables(sum, cfg, &builtin, e); }
