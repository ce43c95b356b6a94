/* stage_models.c — the stages of `reproduce` on trained models: fig3 (the embedded NoPE model: the nine
 * Gram matrices of layer 1 -> 2 and the maps of every layer, causal and without the mask, beside
 * the parameter-free decoder at the same S) and fig5 (the embedded RoPE model, and --model);
 * their figures and verdict rows. The probe and gram runs are runs.c's, the yardstick is a row
 * of sims.c's table, --model's rows are pretrained.c's.
 *
 * ================================================================ layout
 *   stages          fig3, fig5
 *   verdicts        one function per figure, thresholds from expect.c
 *   figures         the figure table
 * Tested by: tests/test_reproduce.c.
 * Shape legend: L layers, S tokens per sequence.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"        /* MP_VERSION */
#include "load/model.h"       /* mp_model_open: --model's context and depth */
#include "repro/ctx.h"        /* MpReproCtx, MpReproMaps, MpReproGram, mp_repro_maps, mp_repro_fail */
#include "repro/expect.h"     /* mp_repro_expect_v */
#include "repro/pretrained.h" /* mp_repro_fig5_rows, mp_repro_regions_read: --model gets stories260K's rows */
#include "repro/runs.h"       /* MpReproProbeSpec, mp_repro_probe, mp_repro_gram */
#include "repro/sims.h"       /* mp_repro_sims_run: fig3's yardstick */
#include "repro/stage.h"      /* MpReproStage, MpReproFigure */
#include "repro/store.h"      /* mp_repro_fingerprint: the gram's key */
#include "sim/theory.h"       /* mp_theory_init: the (i) verdict */

/* ================================================================ stages */

/* One probe of model over the corpus data into out/sub, causal or without the mask. */
static int model_probe(MpReproCtx *c, const char *sub, const char *label, const char *model, const char *data, int64_t n,
                       int seq, int causal, int pack, const char *layers) {
    printf("  %-7s %-24s %s over %lld x %d tokens%s\n", strncmp(sub, "fig3", 4) ? "fig5" : "fig3", sub + 5, model,
           (long long)n, seq, causal ? "" : ", no mask");
    fflush(stdout);
    const MpReproProbeSpec spec = {.dir = sub, .label = label, .model = model, .data = data, .n = n, .seq = seq,
                                   .causal = causal, .pack = pack, .layers = layers};
    if (mp_repro_probe(c, &spec, NULL) == MP_OK) return 0;
    return mp_repro_fail(c, sub); /* (the probe printed why) */
}

static int no_models(MpReproCtx *c, const char *what) {
    fprintf(stderr, "maskpos reproduce: error: stages fig3/fig5: the embedded models were not found (models/none, "
                    "models/rope); HINT: run from the repository or give --models DIR\n");
    return mp_repro_fail(c, what);
}

static int fig3_run(MpReproCtx *c) {
    int failed = mp_repro_sims_run(c, "fig3");
    const char *models = c->cfg->models;
    if (!models) return failed + no_models(c, "fig3");
    char none[4200], corpus[4200], dir[4096], key[10240];
    snprintf(none, sizeof none, "%s/none", models);
    snprintf(corpus, sizeof corpus, "%s/kjv.txt", models);
    snprintf(dir, sizeof dir, "%s/fig3/gram", c->out);
    const int ng = c->cfg->quick ? 200 : 1000;
    snprintf(key, sizeof key, "v%s gram model=%s fp=%016llx data=%s fp=%016llx n=%d seq=%d", MP_VERSION, none,
             (unsigned long long)mp_repro_fingerprint(none), corpus, (unsigned long long)mp_repro_fingerprint(corpus), ng,
             MP_REPRO_GRAM_SEQ);
    printf("  fig3    gram (layer 1 -> 2)         %s, %d windows of %d bytes\n", none, ng, MP_REPRO_GRAM_SEQ);
    fflush(stdout);
    if (mp_repro_gram(c, &c->gram, dir, none, corpus, ng, MP_REPRO_GRAM_SEQ, key) != MP_OK) {
        failed += mp_repro_fail(c, "fig3/gram"); /* (the gram printed why) */
    } else if (c->gram.skipped)
        printf("          up to date, skipped (--force to redo)\n");
    failed += model_probe(c, "fig3/probe", "fig3/probe (NoPE)", none, corpus, c->n_embedded, MP_REPRO_MODEL_SEQ, 1, 1, "1-4");
    failed += model_probe(c, "fig3/probe_bidirectional", "fig3/probe_bidirectional", none, corpus, c->n_embedded,
                          MP_REPRO_MODEL_SEQ, 0, 1, "1-4");
    return failed;
}

/* --model: S = --seq, else 1024 or the model's context if shorter; layers 1-4, or all of a
 * shallower model (a model that does not open is left to probe to report). */
static int fig5_user(MpReproCtx *c) {
    const MpReproConfig *cfg = c->cfg;
    int seq = cfg->model_seq ? cfg->model_seq : 1024;
    const char *layers = "1-4";
    MpModel m;
    MpErr e;
    if (mp_model_open(&m, cfg->model, &e) == MP_OK) {
        if (!cfg->model_seq && m.max_pos > 0 && m.max_pos < seq) seq = m.max_pos;
        if (m.n_layers < 4) layers = "all";
        mp_model_free(&m);
    }
    const int64_t n = cfg->model_n ? cfg->model_n : cfg->quick ? 100 : 1000;
    return model_probe(c, "fig5/model", "fig5/model", cfg->model, cfg->data, n, seq, 1, cfg->pack, layers) +
           model_probe(c, "fig5/model_bidirectional", "fig5/model_bidirectional", cfg->model, cfg->data, n, seq, 0, cfg->pack,
                       layers);
}

/* Figure 5 of the embedded RoPE model, or of --model when one is given (then only that: the
 * stage runs what it was asked for). */
static int fig5_run(MpReproCtx *c) {
    int failed = 0;
    if (c->cfg->model) return fig5_user(c);
    if (!c->cfg->models) failed += no_models(c, "fig5 (embedded model)");
    else {
        char rope[4200], corpus[4200];
        snprintf(rope, sizeof rope, "%s/rope", c->cfg->models);
        snprintf(corpus, sizeof corpus, "%s/kjv.txt", c->cfg->models);
        failed += model_probe(c, "fig5/rope", "fig5/rope", rope, corpus, c->n_embedded, MP_REPRO_MODEL_SEQ, 1, 1, "1-4");
        failed += model_probe(c, "fig5/rope_bidirectional", "fig5/rope_bidirectional", rope, corpus, c->n_embedded,
                              MP_REPRO_MODEL_SEQ, 0, 1, "1-4");
    }
    return failed;
}

#define PROBE_KEY "stage.json: version, model and corpus with fingerprints, n, seq, causal, pack, layers, compute"
const MpReproStage mp_repro_stage_fig3 = {
    .name = "fig3",
    .key = PROBE_KEY " (gram: model, corpus, n, seq)",
    .run = fig3_run,
    .runs = (const char *const[]){"fig3/gram", "fig3/probe", "fig3/probe_bidirectional", NULL}, /* + sims.c's fig3 rows */
};
const MpReproStage mp_repro_stage_fig5 = {
    .name = "fig5",
    .key = PROBE_KEY,
    .run = fig5_run,
    .runs = (const char *const[]){"fig5/rope", "fig5/rope_bidirectional", "fig5/model", "fig5/model_bidirectional", NULL},
};

/* ================================================================ verdicts */

#define APPEND(buf, k, ...) ((k) += snprintf((buf) + (k), (k) < (int)sizeof(buf) ? sizeof(buf) - (size_t)(k) : 0, __VA_ARGS__))

/* (i), the next layer's scores, against the closed-form layer-2 map of the parameter-free decoder
 * at the same S: the off-diagonal range of each. */
static void gram_verdict(const MpReproCtx *c, MpReport *rp) {
    if (!c->gram.ok) return;
    const int S = c->gram.S;
    const double *gi = c->gram.gram + (size_t)8 * S * S;
    MpTheory t;
    MpErr e;
    if (S < 3 || mp_theory_init(&t, 0.0, S, &e) != MP_OK) return;
    double r[2];
    const double *maps[2] = {gi, t.s2};
    for (int k = 0; k < 2; k++) {
        double lo = INFINITY, hi = -INFINITY;
        for (int i = 1; i < S; i++)
            for (int j = 0; j < i; j++) {
                const double v = maps[k][(size_t)i * S + j];
                if (!isfinite(v)) continue;
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
        r[k] = hi - lo;
    }
    char got_s[256];
    snprintf(got_s, sizeof got_s, "off-diagonal range %.3f vs %.4f (×%.0f)", r[0], r[1], r[0] / r[1]);
    mp_report_row(rp, "Fig. 3 (i) NoPE layer-2 scores vs parameter-free layer 2 (closed form, same S)",
                  "already strong at layer 2 (amplified)", got_s, r[0] > mp_repro_expect_v(MP_REPRO_EXPECT_FIG3_GRAM_FACTOR, 0) * r[1], "");
    mp_theory_free(&t);
}

static void fig3_verdict(const MpReproCtx *c, MpReport *rp) {
    const MpReproMaps *nope = mp_repro_maps(c, "fig3/probe"), *bid = mp_repro_maps(c, "fig3/probe_bidirectional"),
                      *pf = mp_repro_maps(c, "fig3/parameter_free_S128");
    char got_s[256], note[256], what[160];
    for (int l = 1; nope && pf && l < 4 && l < nope->L && l < pf->L; l++) {
        const MpPosStats *m = &nope->stats[l], *p = &pf->stats[l];
        snprintf(what, sizeof what, "Fig. 3 NoPE model, layer %d: scores rise toward the query, steeper than parameter-free", l + 1);
        snprintf(got_s, sizeof got_s, "rising rows %.1f%% (pf %.1f%%); slope %.3g vs %.3g (×%.0f)", 100 * m->rise_share,
                 100 * p->rise_share, m->mean_slope, p->mean_slope, p->mean_slope != 0 ? m->mean_slope / p->mean_slope : NAN);
        const int ok = m->rise_share > mp_repro_expect_v(MP_REPRO_EXPECT_FIG3_RISE_SHARE, 0) &&
                       m->mean_slope > mp_repro_expect_v(MP_REPRO_EXPECT_FIG3_SLOPE_FACTOR, 0) * p->mean_slope;
        snprintf(note, sizeof note, "%s", ok ? "" : m->mean_slope < 0 ? "this layer favours the first keys instead (models/none/README.md)" : "");
        mp_report_row(rp, what, "rising rows; slope ≫ parameter-free", got_s, ok, note);
    }
    if (!nope || !bid) return;
    /* the counterfactual: verdict on the recency slope (robust at any N); the block z beside it */
    int ok = 1, k = snprintf(got_s, sizeof got_s, "slope");
    const double share = mp_repro_expect_v(MP_REPRO_EXPECT_FIG3_COUNTERFACTUAL, 0);
    for (int l = 1; l < nope->L && l < bid->L && l < 4; l++) {
        const double a = nope->stats[l].mean_slope, b = bid->stats[l].mean_slope;
        APPEND(got_s, k, " %.3g → %.2g", a, b);
        ok &= a > 0 && fabs(b) < share * a;
    }
    APPEND(got_s, k, "; block z without the mask");
    for (int l = 0; l < bid->L && l < 4; l++) APPEND(got_s, k, " %.2f", bid->block_z[l]);
    APPEND(got_s, k, " (layers 1–%d; N = %lld)", bid->L < 4 ? bid->L : 4, (long long)bid->n);
    mp_report_row(rp, "Fig. 3 counterfactual (ours): the NoPE model without the mask, layers 2–4",
                  "recency vanishes (|slope| < causal/10), residue ≈ noise", got_s, ok, "");
}

/* The embedded RoPE model: layer 1 noise only, later layers above noise and about ten times the
 * parameter-free decoder's residue. */
static void fig5_rope_rows(const MpReproMaps *p, const MpReproMaps *sim, MpReport *rp) {
    char got_s[384];
    snprintf(got_s, sizeof got_s, "block z %.2f (needs %.2f), rms/noise %.2f (N = %lld)", p->block_z[0], p->z_threshold[0],
             p->stats[0].z_rms, (long long)p->n);
    mp_report_row(rp, "Fig. 5 embedded RoPE model, layer 1: non-relative residue (ours)",
                  "not resolved (noise only): RoPE alone is relative", got_s, !p->resolved[0], "");
    int ok = 1, k = snprintf(got_s, sizeof got_s, "block z");
    for (int l = 1; l < p->L && l < 4; l++) {
        APPEND(got_s, k, " %.2f (needs %.2f)", p->block_z[l], p->z_threshold[l]);
        ok &= p->resolved[l];
    }
    APPEND(got_s, k, "; rms/noise");
    for (int l = 1; l < p->L && l < 4; l++) APPEND(got_s, k, " %.2f", p->stats[l].z_rms);
    APPEND(got_s, k, " (layers 2–%d; N = %lld)", p->L < 4 ? p->L : 4, (long long)p->n);
    mp_report_row(rp, "Fig. 5 embedded RoPE model, layers 2–4: non-relative residue, causal mask",
                  "resolved: block z above its noise level (docs/metrics.md)", got_s, ok,
                  ok ? "" : "not resolved at this N: more sequences (the figure marks those layers)");
    if (!sim) return;
    ok = 1;
    k = snprintf(got_s, sizeof got_s, "largest residue magnitude, model / parameter-free:");
    for (int l = 1; l < p->L && l < sim->L && l < 4; l++) {
        const double ra = mp_repro_max_abs_res(p->stats, l), rb = mp_repro_max_abs_res(sim->stats, l);
        APPEND(got_s, k, " %.2f/%.3f", ra, rb);
        ok &= ra > mp_repro_expect_v(MP_REPRO_EXPECT_FIG5_PF_FACTOR, 0) * rb;
    }
    mp_report_row(rp, "Fig. 5 residue vs the parameter-free RoPE decoder (Fig. 4 causal α=0), layers 2–4", "about 10× larger",
                  got_s, ok, "");
}

static void fig5_verdict(const MpReproCtx *c, MpReport *rp) {
    const MpReproMaps *p = mp_repro_maps(c, "fig5/rope"), *b = mp_repro_maps(c, "fig5/rope_bidirectional");
    if (p) fig5_rope_rows(p, mp_repro_maps(c, "fig4/causal_alpha_0"), rp);
    if (!p || !b) return;
    char got_s[256];
    int ok = 1, k = snprintf(got_s, sizeof got_s, "block z");
    for (int l = 1; l < p->L && l < b->L && l < 4; l++) {
        APPEND(got_s, k, " %.2f → %.2f", p->block_z[l], b->block_z[l]);
        ok &= b->block_z[l] < p->block_z[l];
    }
    APPEND(got_s, k, "; NRI");
    for (int l = 1; l < p->L && l < b->L && l < 4; l++) APPEND(got_s, k, " %.2g → %.2g", p->stats[l].nri, b->stats[l].nri);
    mp_report_row(rp, "Fig. 5 counterfactual (ours): the RoPE model without the mask, layers 2–4", "the residue falls", got_s, ok,
                  ok ? "" : "without the mask a RoPE model meets both window edges (models/rope/README.md)");
}

/* --model: the rows stories260K gets (pretrained.c), measured on the user's own runs. */
static void user_verdict(const MpReproCtx *c, MpReport *rp) {
    const MpReproMaps *p = mp_repro_maps(c, "fig5/model"), *b = mp_repro_maps(c, "fig5/model_bidirectional");
    if (!p) return;
    MpReproRegions reg[2];
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/fig5/model", c->out);
    mp_repro_regions_read(&reg[0], dir);
    snprintf(dir, sizeof dir, "%s/fig5/model_bidirectional", c->out);
    mp_repro_regions_read(&reg[1], dir);
    const MpReproFig5Rows r = {
        .name = c->user_name, .tag = "", .causal = p, .bidir = b, .regions = reg,
        .layer1_note = "layer 1 sees embeddings and RoPE only: a residue here comes from the text (e.g. sequences that "
                       "open alike; first keys z %.1f, interior %.1f), not from the mask"};
    mp_repro_fig5_rows(rp, &r);
}

/* ================================================================ figures */

static int gram_ready(const MpReproCtx *c) { return c->gram.ok; } /* drawn by `gram --plot` */

static void gram_caption(char *buf, size_t cap, const MpReproCtx *c) {
    (void)c;
    snprintf(buf, cap, "Figure 3: the nine Gram matrices (a)–(i) of layer 1 → 2 of the embedded NoPE model (windows of %d bytes)",
             MP_REPRO_GRAM_SEQ);
}

static void maps_caption(char *buf, size_t cap, const MpReproCtx *c) {
    const MpReproMaps *m = mp_repro_maps(c, "fig3/probe");
    snprintf(buf, cap,
             "Figure 3: the embedded NoPE model's mean scores per layer, raw and diagonal-mean normalised (%lld × %d bytes), "
             "the same without the mask, and the parameter-free decoder at the same S",
             (long long)m->n, m->S);
}

static void rope_caption(char *buf, size_t cap, const MpReproCtx *c) {
    const MpReproMaps *m = mp_repro_maps(c, "fig5/rope");
    if (!m) m = mp_repro_maps(c, "fig5/rope_bidirectional");
    snprintf(buf, cap,
             "Figure 5: the embedded RoPE model, layers 1–4, diagonal-mean normalised, causal and without the mask "
             "(%lld × %d bytes)",
             (long long)m->n, m->S);
}

static void user_caption(char *buf, size_t cap, const MpReproCtx *c) {
    const MpReproMaps *m = mp_repro_maps(c, "fig5/model");
    if (!m) m = mp_repro_maps(c, "fig5/model_bidirectional");
    snprintf(buf, cap, "Figure 5: %s, layers 1–4, diagonal-mean normalised, causal and without the mask (%lld × %d tokens)",
             c->user_name ? c->user_name : "", (long long)m->n, m->S);
}

static void user_title(char *buf, size_t cap, const MpReproCtx *c) {
    snprintf(buf, cap, "%s: diagonal-mean normalised scores, colour limits at the 1st/99th percentile", c->user_name);
}

const MpReproFigure mp_repro_figs_models[] = {
    {.stage = "fig3", .file = "fig3/gram/gram.png", .panels = {{"fig3/gram", "", 0, 1}}, .caption = gram_caption,
     .verdict = gram_verdict, .ready = gram_ready},
    {.stage = "fig3", .file = "fig3/figure3_maps.png", .title = "Embedded NoPE model (KJV bytes): mean pre-softmax scores per layer",
     .clip_lo = 1, .clip_hi = 99,
     .panels = {{"fig3/probe", "NoPE model", 0, 0}, {"fig3/probe", "NoPE model (norm.)", 1, 0},
                {"fig3/probe_bidirectional", "No mask (norm.)", 1, 1}, {"fig3/parameter_free_S128", "Parameter-free", 0, 1}},
     .caption = maps_caption, .verdict = fig3_verdict},
    {.stage = "fig5", .file = "fig5/figure5.png",
     .title = "Embedded RoPE model (KJV bytes): diagonal-mean normalised scores, colour limits at the 1st/99th percentile",
     .clip_lo = 1, .clip_hi = 99,
     .panels = {{"fig5/rope", "Causal (norm.)", 1, 1}, {"fig5/rope_bidirectional", "No mask (norm.)", 1, 1}},
     .caption = rope_caption, .verdict = fig5_verdict},
    {.stage = "fig5", .file = "fig5/figure5_model.png", .title_fn = user_title, .clip_lo = 1, .clip_hi = 99,
     .panels = {{"fig5/model", "Causal (norm.)", 1, 1}, {"fig5/model_bidirectional", "No mask (norm.)", 1, 1}},
     .caption = user_caption, .verdict = user_verdict},
    {0},
};
