/* stage_length.c — the `length` stage of `reproduce` (docs/recency.md): a causal model's scores for the first
 * S' positions are those of its S'-token prefix, so one `probe --recency` run gives NRI, block z
 * and the recency probability at every S'. Run on the embedded NoPE and RoPE models (packed KJV
 * rows of 128 bytes) and on the pretrained stories260K (the stories stage's corpus: its own
 * stories of 512 tokens from BOS); a verdict row per model and layer 2..L, the probes' figures.
 * Tested by: tests/test_reproduce.c (--only length).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"        /* mp_json_read */
#include "core/util.h"        /* mp_path_join */
#include "repro/ctx.h"        /* MpReproCtx, mp_repro_state, mp_repro_fail */
#include "repro/expect.h"     /* mp_repro_expect_v */
#include "repro/pretrained.h" /* mp_repro_corpus_stories: the stories260K rows */
#include "repro/runs.h"       /* mp_repro_probe */
#include "repro/stage.h"      /* MpReproStage */

/* The stage's state (the state block "length"). */
#define MP_REPRO_LENGTH_MODELS 3 /* the embedded NoPE and RoPE models, stories260K */
#define MP_REPRO_LENGTH_LAYERS 8
#define MP_REPRO_LENGTH_LENS 24

typedef struct MpReproLength {
    int ok[MP_REPRO_LENGTH_MODELS], skipped[MP_REPRO_LENGTH_MODELS];
    int L[MP_REPRO_LENGTH_MODELS], K[MP_REPRO_LENGTH_MODELS];
    int lens[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LENS];
    /* [model][layer][length]: RP per sequence, its standard error, the residue's block z */
    double rp[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS];
    double rp_se[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS];
    double block_z[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS];
    int64_t n[MP_REPRO_LENGTH_MODELS];
    int seq[MP_REPRO_LENGTH_MODELS];
} MpReproLength;

static MpReproLength *length_state(MpReproCtx *c) { return mp_repro_state(c, "length", sizeof(MpReproLength), NULL); }

/* The models of the stage: folder under length/, label in the rows, what a row of it is. */
static const struct {
    const char *name, *label, *unit;
} rl_models[MP_REPRO_LENGTH_MODELS] = {
    {"none", "embedded NoPE model", "bytes"},
    {"rope", "embedded RoPE model", "bytes"},
    {"stories260K", "stories260K (pretrained)", "tokens"},
};

/* Reads length.{lengths, recency_probability(_se), residue_block_z} of dir/meta.json into lr
 * (model m); every array must be there with one entry per layer and length. */
static int rl_read(MpReproLength *lr, int m, const char *dir) {
    char path[4096];
    MpErr e;
    if (mp_path_join(path, sizeof path, dir, "meta.json", &e) != MP_OK) return MP_ERR;
    json_t *j = mp_json_read(path, &e), *len = j ? json_object_get(j, "length") : NULL;
    json_t *ls = json_object_get(len, "lengths"), *a = json_object_get(len, "recency_probability");
    if (json_array_size(ls) > MP_REPRO_LENGTH_LENS || json_array_size(a) > MP_REPRO_LENGTH_LAYERS) { /* never cut short */
        fprintf(stderr, "maskpos reproduce: error: %s: %zu lengths of %zu layers; the length stage holds %d of %d\n", path,
                json_array_size(ls), json_array_size(a), MP_REPRO_LENGTH_LENS, MP_REPRO_LENGTH_LAYERS);
        json_decref(j);
        return MP_ERR;
    }
    lr->K[m] = (int)json_array_size(ls);
    lr->L[m] = (int)json_array_size(a);
    int rc = lr->K[m] > 0 && lr->L[m] > 0 ? MP_OK : MP_ERR;
    for (int k = 0; rc == MP_OK && k < lr->K[m]; k++) lr->lens[m][k] = (int)json_integer_value(json_array_get(ls, (size_t)k));
    const char *keys[3] = {"recency_probability", "recency_probability_se", "residue_block_z"};
    double(*dst[3])[MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS] = {&lr->rp[m], &lr->rp_se[m], &lr->block_z[m]};
    for (int q = 0; rc == MP_OK && q < 3; q++) {
        a = json_object_get(len, keys[q]);
        for (int l = 0; l < lr->L[m]; l++)
            for (int k = 0; k < lr->K[m]; k++) {
                json_t *x = json_array_get(json_array_get(a, (size_t)l), (size_t)k);
                if (!x) rc = MP_ERR; /* a metric the probe did not write: an error, not a number */
                (*dst[q])[l][k] = json_is_number(x) ? json_number_value(x) : NAN;
            }
    }
    json_decref(j);
    if (rc != MP_OK) fprintf(stderr, "maskpos reproduce: error: %s: no complete \"length\" statistics\n", path);
    return rc;
}

/* One model's probe into out/length/<name>; data: a text corpus (packed rows of 128 bytes) or
 * tokens: an ids.npy. */
static int rl_probe(MpReproCtx *c, int m, const char *model, const char *data, const char *tokens, int64_t n) {
    MpReproLength *lr = length_state(c);
    char dir[256];
    snprintf(dir, sizeof dir, "length/%s", rl_models[m].name);
    printf("  length  %-24s %s over %lld x %s tokens, --recency\n", rl_models[m].name, model, (long long)n,
           tokens ? "512" : "128");
    fflush(stdout);
    const MpReproProbeSpec spec = {.dir = dir, .model = model, .data = data, .tokens = tokens, .n = n, .seq = tokens ? 0 : 128,
                                   .causal = 1, .pack = !tokens, .layers = tokens ? "all" : "1-4", .recency_plot = 1};
    MpReproMaps *p = NULL;
    char full[4096];
    snprintf(full, sizeof full, "%s/%s", c->out, dir);
    lr->n[m] = n;
    if (mp_repro_probe(c, &spec, &p) != MP_OK || rl_read(lr, m, full) != MP_OK)
        return mp_repro_fail(c, dir); /* (each printed why, in one line) */
    lr->ok[m] = 1;
    lr->skipped[m] = p->skipped;
    lr->seq[m] = p->S;
    return 0;
}

static int length_run(MpReproCtx *c) {
    const MpReproConfig *cfg = c->cfg;
    int failed = 0;
    const int64_t n = cfg->model_n ? cfg->model_n : cfg->quick ? 100 : 500; /* 500 × 128: RP resolved to ~0.001 */
    if (!cfg->models) {
        fprintf(stderr, "maskpos reproduce: error: stage length: the embedded models were not found; HINT: --models DIR\n");
        failed += mp_repro_fail(c, "length");
    } else
        for (int m = 0; m < 2; m++) {
            char model[4200], corpus[4200];
            snprintf(model, sizeof model, "%s/%s", cfg->models, rl_models[m].name);
            snprintf(corpus, sizeof corpus, "%s/kjv.txt", cfg->models);
            failed += rl_probe(c, m, model, corpus, NULL, n);
        }
    /* stories260K over the stories stage's corpus (generated here when that stage has not run):
     * 200 of its rows (16 with --quick; 0.65 CPU-s per row of 512 tokens with --recency) */
    MpReproCorpus cp;
    if (mp_repro_corpus_stories(c, &cp) != MP_OK) return failed + mp_repro_fail(c, "length/stories260K");
    const int64_t ns = cp.n < (cfg->quick ? 16 : 200) ? cp.n : (cfg->quick ? 16 : 200);
    return failed + rl_probe(c, 2, cfg->stories, NULL, cp.ids, ns);
}

/* Rows: RP per sequence at every length, layers 2..L (the later version: models with a norm
 * favour recent keys); the figures the probes drew. */
static int length_report(MpReproCtx *c, MpReport *rp, MpErr *e) {
    (void)e;
    const MpReproLength *lr = length_state(c);
    const double sig = mp_repro_expect_v(MP_REPRO_EXPECT_MC_SIGMAS, 0), floor = mp_repro_expect_v(MP_REPRO_EXPECT_LENGTH_RP, 0);
    for (int m = 0; m < MP_REPRO_LENGTH_MODELS; m++) {
        if (!lr->ok[m]) continue;
        for (int l = 1; l < lr->L[m]; l++) {
            char what[160], got[192] = "", note[256];
            int ok = 1;
            for (int k = 0; k < lr->K[m]; k++) {
                const size_t g = strlen(got);
                snprintf(got + g, sizeof got - g, "%s%d: %.3f", k ? ", " : "", lr->lens[m][k], lr->rp[m][l][k]);
                if (!(lr->rp[m][l][k] - sig * lr->rp_se[m][l][k] > floor)) ok = 0;
            }
            snprintf(what, sizeof what, "Length: %s, layer %d, RP of the first S' positions", rl_models[m].label, l + 1);
            snprintf(note, sizeof note, "one run of %lld × %d %s; block z at S' = %d … %d: %.2f … %.2f (docs/recency.md)",
                     (long long)lr->n[m], lr->seq[m], rl_models[m].unit, lr->lens[m][0], lr->lens[m][lr->K[m] - 1],
                     lr->block_z[m][l][0], lr->block_z[m][l][lr->K[m] - 1]);
            mp_report_row(rp, what, "> 0.5 at every S' (recency)", got, ok, note);
        }
    }
    static const char *files[3] = {"length_rp.png", "length_block_z.png", "residue_by_position.png"};
    static const char *caps[3] = {"recency probability of the first S' positions", "residue block z of the first S' positions",
                                  "residue in noise units against the query position"};
    for (int m = 0; m < MP_REPRO_LENGTH_MODELS; m++)
        for (int f = 0; f < 3 && lr->ok[m]; f++) {
            char cap[256], path[128];
            snprintf(cap, sizeof cap, "Length (one run, every prefix): %s, %s", rl_models[m].label, caps[f]);
            snprintf(path, sizeof path, "length/%s/%s", rl_models[m].name, files[f]);
            mp_report_fig(rp, cap, path);
        }
    return MP_OK;
}

const MpReproStage mp_repro_stage_length = {
    .name = "length",
    .key = "stage.json: version, model and corpus (or ids) with fingerprints, n (--recency, layers 1-4 or all)",
    .run = length_run,
    .report = length_report,
    .runs = (const char *const[]){"length/none", "length/rope", "length/stories260K", NULL},
};
