/* pretrained.c — see pretrained.h. Sections: the corpus, the regional block test, the rows. */
#include "repro/pretrained.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"      /* stage.json, MP_VERSION */
#include "core/npy.h"       /* ids.npy */
#include "core/util.h"      /* mp_mkdir_p, mp_file_exists, mp_path_join */
#include "load/model.h"     /* mp_model_open */
#include "model/fwd.h"      /* mp_fwd_compute_parse */
#include "model/generate.h" /* mp_gen_run: the corpus */
#include "repro/expect.h"   /* mp_repro_expect_v */
#include "repro/store.h"    /* mp_repro_store_same, mp_repro_store_mark, mp_repro_fingerprint */

/* ================================================================ the corpus */

#define STORIES_REL "data/third_party/stories260K/stories260K.gguf"

/* What the corpus of this run is (the state block "stories/corpus"). */
typedef struct PretrainedCorpus {
    int ok;                       /* made or found in this run */
    int64_t n;                    /* sequences */
    int seq;                      /* S */
    double gen_wall_s, gen_nll;   /* generation time (this run or the recorded one); mean NLL/token */
    int gen_skipped;
} PretrainedCorpus;

static int64_t stories_n(const MpReproConfig *cfg) { return cfg->stories_n ? cfg->stories_n : cfg->quick ? 32 : 1000; }

/* The model's own stories: N x S ids from BOS into dir/ids.npy, unless dir records these settings. */
static int corpus_make(PretrainedCorpus *st, const MpReproCtx *c, const char *dir) {
    const MpReproConfig *cfg = c->cfg;
    char key[8192], path[4200];
    MpErr e;
    snprintf(key, sizeof key, "v%s generate model=%s fp=%016llx n=%lld len=%d temperature=1 seed=%llu compute=%s", MP_VERSION,
             cfg->stories, (unsigned long long)mp_repro_fingerprint(cfg->stories), (long long)st->n, st->seq,
             (unsigned long long)cfg->base.seed, cfg->compute);
    printf("  stories corpus                   %lld x %d tokens written by %s from BOS (temperature 1, seed %llu)\n",
           (long long)st->n, st->seq, cfg->stories, (unsigned long long)cfg->base.seed);
    fflush(stdout);
    json_t *rec = NULL;
    snprintf(path, sizeof path, "%s/ids.npy", dir);
    if (!cfg->force && mp_file_exists(path) && mp_repro_store_same(dir, key, &st->gen_wall_s, &rec)) {
        st->gen_nll = json_number_value(json_object_get(rec, "mean_nll"));
        json_decref(rec);
        printf("          up to date, skipped (--force to redo)\n");
        st->gen_skipped = 1;
        return MP_OK;
    }
    snprintf(path, sizeof path, "%s/stage.json", dir);
    remove(path);
    MpModel m;
    memset(&m, 0, sizeof m);
    MpGenResult r;
    memset(&r, 0, sizeof r);
    MpGenConfig g = {.n = st->n, .len = st->seq, .sampler = {.temperature = 1, .top_k = 0, .top_p = 1}, .seed = cfg->base.seed,
                     .compute = mp_fwd_compute_parse(cfg->compute), .threads = cfg->base.threads};
    const int64_t shp[2] = {st->n, st->seq};
    int rc = MP_ERR;
    if (mp_mkdir_p(dir, &e) == MP_OK && mp_model_open(&m, cfg->stories, &e) == MP_OK && mp_gen_run(&r, &m, &g, &e) == MP_OK &&
        mp_path_join(path, sizeof path, dir, "ids.npy", &e) == MP_OK && mp_npy_write(path, MP_DT_I32, r.ids, 2, shp, &e) == MP_OK)
        rc = MP_OK;
    if (rc == MP_OK) {
        st->gen_wall_s = r.wall_s;
        st->gen_nll = r.nll_sum / (double)r.n_sampled;
        json_t *j = json_object();
        json_object_set_new(j, "mean_nll", json_real(st->gen_nll));
        json_object_set_new(j, "mean_nll_of", json_string("mean -log p(token) of the sampled tokens under the model, nats"));
        mp_repro_store_mark(dir, key, r.wall_s, j);
        printf("          %.1f s (%.0f tokens/s); mean NLL %.3f nats/token\n", r.wall_s,
               (double)r.n_sampled / (r.wall_s > 0 ? r.wall_s : 1), st->gen_nll);
    } else
        fprintf(stderr, "maskpos reproduce: error: stage stories/corpus: %s\n", e.msg);
    mp_gen_result_free(&r);
    mp_model_free(&m);
    return rc;
}

int mp_repro_corpus_stories(MpReproCtx *c, MpReproCorpus *out) {
    PretrainedCorpus *st = mp_repro_state(c, "stories/corpus", sizeof *st, NULL);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/stories/corpus", c->out);
    snprintf(out->ids, sizeof out->ids, "%s/ids.npy", dir);
    st->n = stories_n(c->cfg);
    st->seq = MP_REPRO_STORIES_SEQ;
    out->n = st->n;
    out->seq = st->seq;
    if (st->ok) return MP_OK; /* made (or found) earlier in this run */
    if (!c->cfg->stories) {
        fprintf(stderr, "maskpos reproduce: error: stage stories: %s not found; HINT: run from the repository or set "
                        "MASKPOS_STORIES to the .gguf\n", STORIES_REL);
        return MP_ERR;
    }
    if (corpus_make(st, c, dir) != MP_OK) return MP_ERR;
    st->ok = 1;
    return MP_OK;
}

/* ================================================================ the regional block test */

void mp_repro_regions_read(MpReproRegions *reg, const char *dir) {
    static const char *names[MP_REPRO_STORIES_NREG] = {"first_keys", "last_queries", "last_keys", "interior"};
    char path[4200];
    MpErr e;
    for (int l = 0; l < 64; l++)
        for (int k = 0; k < MP_REPRO_STORIES_NREG; k++) reg->z[l][k] = NAN, reg->resolved[l][k] = 0;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_t *m = mp_json_read(path, &e);
    json_t *r = json_object_get(m, "residue_block_z_regions"), *rr = json_object_get(m, "residue_regions_resolved");
    for (int k = 0; k < MP_REPRO_STORIES_NREG; k++) {
        json_t *a = json_object_get(r, names[k]), *b = json_object_get(rr, names[k]);
        for (int l = 0; l < 64 && json_is_array(a) && (size_t)l < json_array_size(a); l++) {
            json_t *v = json_array_get(a, (size_t)l);
            reg->z[l][k] = json_is_number(v) ? json_number_value(v) : NAN;
            reg->resolved[l][k] = json_is_true(json_array_get(b, (size_t)l));
        }
    }
    json_decref(m);
}

/* ================================================================ the rows */

static const char *region_name[MP_REPRO_STORIES_NREG] = {"first keys", "last queries", "last keys", "interior"};

/* The region with the largest block z of layer l (causal: the last keys are only the diagonal's
 * corner block, left out). */
static int top_region(const double (*reg)[MP_REPRO_STORIES_NREG], int l, int causal) {
    int best = 0;
    for (int k = 1; k < MP_REPRO_STORIES_NREG; k++) {
        if (causal && k == 2) continue;
        if (reg[l][k] > reg[l][best] || !(reg[l][best] == reg[l][best])) best = k;
    }
    return best;
}

#define APPEND(buf, k, ...) ((k) += snprintf((buf) + (k), (k) < (int)sizeof(buf) ? sizeof(buf) - (size_t)(k) : 0, __VA_ARGS__))

/* "block z 3.21 (needs 1.55)" of layer l of m into buf at k. */
#define BZ_NEEDS(buf, k, m, l) APPEND(buf, k, " %.2f (needs %.2f)", (m)->block_z[l], (m)->z_threshold[l])

void mp_repro_fig5_rows(MpReport *rp, const MpReproFig5Rows *r) {
    const MpReproMaps *c = r->causal && r->causal->ok ? r->causal : NULL, *b = r->bidir && r->bidir->ok ? r->bidir : NULL;
    const MpReproRegions *rc = &r->regions[0], *rb = &r->regions[1];
    char got[384], note[256], what[256];
    int k = 0;
    if (c) {
        k = snprintf(got, sizeof got, "block z");
        BZ_NEEDS(got, k, c, 0);
        APPEND(got, k, " (first keys %.2f, interior %.2f), rms/noise %.2f (N = %lld)", rc->z[0][0], rc->z[0][3], c->stats[0].z_rms,
               (long long)c->n);
        const int ok = !c->resolved[0];
        snprintf(note, sizeof note, r->layer1_note, rc->z[0][0], rc->z[0][3]);
        snprintf(what, sizeof what, "Fig. 5 %s%s, layer 1: non-relative residue", r->name, r->tag);
        mp_report_row(rp, what, "not resolved (noise only): RoPE alone is relative", got, ok, ok ? "" : note);
        int all = 1;
        k = snprintf(got, sizeof got, "block z");
        for (int l = 1; l < c->L; l++) {
            BZ_NEEDS(got, k, c, l);
            all &= c->resolved[l];
        }
        APPEND(got, k, " (layers 2–%d; N = %lld)", c->L, (long long)c->n);
        snprintf(note, sizeof note, "%s", all ? "" : "some later layers are not resolved at this N (the figure marks them)");
        snprintf(what, sizeof what, "Fig. 5 %s, layers 2–%d: non-relative residue, causal mask", r->name, c->L);
        mp_report_row(rp, what, "resolved: block z above its noise level (docs/metrics.md)", got, all, note);
        /* where a residue sits: only a resolved layer's resolved region says anything */
        int first = 0, judged = 0;
        k = snprintf(got, sizeof got, "largest regional block z:");
        for (int l = 1; l < c->L; l++) {
            const int top = top_region(rc->z, l, 1);
            if (!c->resolved[l]) APPEND(got, k, " L%d not resolved;", l + 1);
            else if (!rc->resolved[l][top]) APPEND(got, k, " L%d %s %.1f, not resolved;", l + 1, region_name[top], rc->z[l][top]);
            else {
                APPEND(got, k, " L%d %s %.1f;", l + 1, region_name[top], rc->z[l][top]);
                first += top == 0;
                judged++;
            }
        }
        if (k > 0 && k < (int)sizeof got && got[k - 1] == ';') got[k - 1] = '\0';
        if (!judged) snprintf(got, sizeof got, "not resolved at N = %lld: no layer's residue (or region) is above its noise level",
                              (long long)c->n);
        snprintf(what, sizeof what, "Fig. 5 %s, layers 2–%d: where the residue sits (regional block test, causal)", r->name, c->L);
        const int where = judged && 2 * first > judged;
        mp_report_row(rp, what, "the first keys, in most resolved layers (as in the paper's Figure 5)", got, where,
                      where ? "" : !judged ? "a verdict about where a residue sits needs a resolved residue: more sequences"
                                        : "the residue of this model sits elsewhere than the first keys");
    }
    if (c && b) {
        int all = 1;
        k = snprintf(got, sizeof got, "block z");
        for (int l = 1; l < c->L && l < b->L; l++) {
            APPEND(got, k, " %.2f → %.2f", c->block_z[l], b->block_z[l]);
            if (!(b->block_z[l] < c->block_z[l])) all = 0;
        }
        APPEND(got, k, " (N = %lld)", (long long)b->n);
        int kn = snprintf(note, sizeof note, "without the mask the largest regional z:");
        for (int l = 1; l < b->L; l++) {
            const int top = top_region(rb->z, l, 0);
            APPEND(note, kn, " L%d %s %.1f%s;", l + 1, region_name[top], rb->z[l][top], rb->resolved[l][top] ? "" : " (not resolved)");
        }
        if (kn > 0 && kn < (int)sizeof note && note[kn - 1] == ';') note[kn - 1] = '\0';
        snprintf(what, sizeof what, "Fig. 5 counterfactual (ours): %s without the mask, layers 2–%d", r->name, c->L < b->L ? c->L : b->L);
        mp_report_row(rp, what, "the residue falls", got, all, note);
    }
}

