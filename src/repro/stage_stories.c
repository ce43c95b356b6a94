/* stage_stories.c — reproduce's stage "stories": the paper's Figure 5 on a real pretrained model that
 * maskpos did not train, stories260K (llama2.c; data/third_party/stories260K/).
 *
 * Implements: the stage: `probe --tokens` over every layer, causal and without the mask, over the
 * model's own stories (the corpus, pretrained.h); its report part: the verdict rows (layer 1
 * relative? residue above noise in later layers, and in which region of the map? does it fall
 * without the mask? pretrained.h's rows), every number and verdict from this run's outputs, and
 * the figure.
 * Does not: tokenise text (the corpus is ids), or change the other stages.
 * Tested by: tests/test_reproduce.c (--quick).
 * Shape legend: N sequences, S tokens per sequence, L = 5 layers.
 */
#include <stdio.h>
#include <string.h>

#include "core/util.h"        /* mp_path_join */
#include "repro/ctx.h"        /* MpReproCtx, MpReproMaps, mp_repro_state, mp_repro_fail */
#include "repro/pretrained.h" /* mp_repro_corpus_stories, mp_repro_regions_read, mp_repro_fig5_rows */
#include "repro/runs.h"       /* mp_repro_probe */
#include "repro/stage.h"      /* MpReproStage */
#include "viz/figs.h"         /* mp_fig_rows_clip */

/* The stage's state (the state block "stories"). */
typedef struct MpReproStories {
    int ran;                      /* the stage was asked for */
    int64_t n;                    /* sequences */
    int seq;                      /* S */
    const MpReproMaps *causal, *bidir; /* maps of every layer (owned by the context), NULL when not run */
    MpReproRegions regions[2]; /* [causal/bidir]: per layer the first keys, last queries,
                                                     last keys, interior] block z */
} MpReproStories;

static MpReproStories *stories_state(MpReproCtx *c) { return mp_repro_state(c, "stories", sizeof(MpReproStories), NULL); }

/* ================================================================ the stage */

static int stories_probe(MpReproCtx *c, int which, const char *sub, const char *label, const char *ids) {
    MpReproStories *st = stories_state(c);
    const MpReproConfig *cfg = c->cfg;
    const int causal = which == 0;
    char rel[128];
    snprintf(rel, sizeof rel, "stories/%s", sub);
    printf("  stories %-24s every layer over %lld x %d tokens%s\n", sub, (long long)st->n, st->seq, causal ? "" : ", no mask");
    fflush(stdout);
    const MpReproProbeSpec spec = {.dir = rel, .label = label, .model = cfg->stories, .tokens = ids, .n = st->n,
                                   .causal = causal, .layers = "all"};
    MpReproMaps *m = NULL;
    if (mp_repro_probe(c, &spec, &m) != MP_OK) return mp_repro_fail(c, rel); /* (the probe printed why) */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", c->out, rel);
    mp_repro_regions_read(&st->regions[which], dir);
    if (which == 0) st->causal = m;
    else st->bidir = m;
    return 0;
}

static int stories_run(MpReproCtx *c) {
    MpReproStories *st = stories_state(c);
    st->ran = 1;
    MpReproCorpus cp;
    const int rc = mp_repro_corpus_stories(c, &cp);
    st->n = cp.n;
    st->seq = cp.seq;
    if (rc != MP_OK) return mp_repro_fail(c, c->cfg->stories ? "stories/corpus" : "stories");
    return stories_probe(c, 0, "probe", "stories/probe (stories260K)", cp.ids) +
           stories_probe(c, 1, "probe_bidirectional", "stories/probe_bidirectional", cp.ids);
}

/* ================================================================ the report */

static void stories_rows(MpReport *rp, const MpReproStories *st) {
    const MpReproFig5Rows r = {
        .name = "stories260K", .tag = " (pretrained, real)", .causal = st->causal, .bidir = st->bidir,
        .regions = st->regions,
        .layer1_note = "layer 1 sees embeddings and RoPE only: a residue here is the text's (every sequence opens with "
                       "a story start; first keys z %.1f, interior %.1f), not the mask's (MEASURED.md)"};
    mp_repro_fig5_rows(rp, &r);
}

/* The verdict rows and the figure (out/stories/figure5_stories260K.png). */
static int stories_report(MpReproCtx *cx, MpReport *rp, MpErr *e) {
    const MpReproStories *st = stories_state(cx);
    const char *out = cx->out;
    if (!st->ran) return MP_OK;
    stories_rows(rp, st);
    MpFigRow rows[2];
    int n = 0;
    const MpReproMaps *ms[2] = {st->causal, st->bidir};
    static const char *labels[2] = {"Causal (norm.)", "No mask (norm.)"};
    for (int k = 0; k < 2; k++)
        if (ms[k] && ms[k]->ok) rows[n++] = (MpFigRow){ms[k]->scores, ms[k]->L, ms[k]->S, labels[k], 1, ms[k]->note};
    if (!n) return MP_OK;
    char path[4200], caption[256];
    static const char *rel = "stories/figure5_stories260K.png";
    if (mp_path_join(path, sizeof path, out, rel, e) != MP_OK ||
        mp_fig_rows_clip(path, "stories260K (llama2.c, pretrained on TinyStories): diagonal-mean normalised scores, "
                               "colour limits at the 1st/99th percentile", rows, n, 1, 99, e) != MP_OK)
        return MP_ERR;
    snprintf(caption, sizeof caption,
             "Figure 5 on a real pretrained model: stories260K, every layer, diagonal-mean normalised, causal and without "
             "the mask (%lld × %d tokens the model wrote itself from BOS)",
             (long long)st->n, st->seq);
    mp_report_fig(rp, caption, rel);
    mp_report_fig_view(rp, rel, "stories/probe");
    mp_report_fig_view(rp, rel, "stories/probe_bidirectional");
    return MP_OK;
}

const MpReproStage mp_repro_stage_stories = {
    .name = "stories",
    .key = "stage.json: version, model and ids with fingerprints, n, causal, compute (corpus: model, n, len, seed, compute)",
    .run = stories_run,
    .report = stories_report,
    .runs = (const char *const[]){"stories/probe", "stories/probe_bidirectional", NULL},
};
