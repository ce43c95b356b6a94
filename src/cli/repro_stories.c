/* repro_stories.c — see repro_stories.h. Sections: locating the model, the corpus, the probes,
 * the report. */
#include "cli/repro_stories.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/figs.h"       /* mp_fig_rows_clip */
#include "core/json.h"      /* stage.json, MP_VERSION */
#include "core/npy.h"       /* ids.npy */
#include "core/util.h"      /* mp_mkdir_p, mp_file_exists, mp_time_now */
#include "load/model.h"     /* mp_model_open */
#include "model/fwd.h"      /* mp_fwd_compute_parse */
#include "model/generate.h" /* mp_gen_run: the corpus */

#define STORIES_REL "data/third_party/stories260K/stories260K.gguf"

/* ================================================================ locating the model */

int mp_repro_stories_path(char *out, size_t cap) {
    const char *env = getenv("MASKPOS_STORIES");
    if (env && *env) {
        if (!mp_file_exists(env) || strlen(env) >= cap) return 0;
        snprintf(out, cap, "%s", env);
        return 1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) { /* <repo>/build/maskpos -> <repo>/data/third_party/... */
        exe[n] = '\0';
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = '\0';
            char cand[PATH_MAX + 64];
            snprintf(cand, sizeof cand, "%s/%s", exe, STORIES_REL);
            if (mp_file_exists(cand) && strlen(cand) < cap) {
                snprintf(out, cap, "%s", cand);
                return 1;
            }
        }
    }
    if (mp_file_exists(STORIES_REL) && strlen(STORIES_REL) < cap) {
        snprintf(out, cap, "%s", STORIES_REL);
        return 1;
    }
    return 0;
}

/* ================================================================ the corpus */

/* dir/stage.json records key: the recorded generation time and NLL come back. */
static int corpus_same(const char *dir, const char *key, double *wall, double *nll) {
    char path[4200];
    MpErr e;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    if (!mp_file_exists(path)) return 0;
    json_t *j = mp_json_read(path, &e);
    const char *k = json_string_value(json_object_get(j, "stage_settings"));
    const int same = k && !strcmp(k, key);
    *wall = json_number_value(json_object_get(j, "wall_time_s"));
    *nll = json_number_value(json_object_get(j, "mean_nll"));
    json_decref(j);
    snprintf(path, sizeof path, "%s/ids.npy", dir);
    return same && mp_file_exists(path);
}

/* The model's own stories: N x S ids from BOS into dir/ids.npy. */
static int stories_corpus(MpReproStories *st, const char *dir, const MpReproStoriesOpts *o) {
    char key[8192], path[4200];
    MpErr e;
    snprintf(key, sizeof key, "v%s generate model=%s fp=%016llx n=%lld len=%d temperature=1 seed=%llu compute=%s", MP_VERSION,
             o->model, (unsigned long long)mp_repro_fingerprint(o->model), (long long)o->n, o->seq,
             (unsigned long long)o->seed, o->compute);
    printf("  stories corpus                   %lld x %d tokens written by %s from BOS (temperature 1, seed %llu)\n",
           (long long)o->n, o->seq, o->model, (unsigned long long)o->seed);
    fflush(stdout);
    if (!o->force && corpus_same(dir, key, &st->gen_wall_s, &st->gen_nll)) {
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
    MpGenConfig c = {.n = o->n, .len = o->seq, .sampler = {.temperature = 1, .top_k = 0, .top_p = 1}, .seed = o->seed,
                     .compute = mp_fwd_compute_parse(o->compute), .threads = o->threads};
    const int64_t shp[2] = {o->n, o->seq};
    int rc = MP_ERR;
    if (mp_mkdir_p(dir, &e) == MP_OK && mp_model_open(&m, o->model, &e) == MP_OK && mp_gen_run(&r, &m, &c, &e) == MP_OK &&
        mp_path_join(path, sizeof path, dir, "ids.npy", &e) == MP_OK && mp_npy_write(path, MP_DT_I32, r.ids, 2, shp, &e) == MP_OK)
        rc = MP_OK;
    if (rc == MP_OK) {
        st->gen_wall_s = r.wall_s;
        st->gen_nll = r.nll_sum / (double)r.n_sampled;
        json_t *j = json_object();
        json_object_set_new(j, "stage_settings", json_string(key));
        json_object_set_new(j, "wall_time_s", json_real(r.wall_s));
        json_object_set_new(j, "mean_nll", json_real(st->gen_nll));
        json_object_set_new(j, "mean_nll_of", json_string("mean -log p(token) of the sampled tokens under the model, nats"));
        snprintf(path, sizeof path, "%s/stage.json", dir);
        if (mp_json_write_atomic(path, j, &e) != MP_OK) fprintf(stderr, "maskpos reproduce: warning: %s\n", e.msg);
        json_decref(j);
        printf("          %.1f s (%.0f tokens/s); mean NLL %.3f nats/token\n", r.wall_s,
               (double)r.n_sampled / (r.wall_s > 0 ? r.wall_s : 1), st->gen_nll);
    } else
        fprintf(stderr, "maskpos reproduce: error: stage stories/corpus: %s\n", e.msg);
    mp_gen_result_free(&r);
    mp_model_free(&m);
    return rc;
}

/* ================================================================ the probes */

/* Reads residue_block_z_regions of dir/meta.json into reg [64][4] (NaN where absent). */
static void stories_regions(double reg[64][MP_REPRO_STORIES_NREG], const char *dir) {
    static const char *names[MP_REPRO_STORIES_NREG] = {"first_keys", "last_queries", "last_keys", "interior"};
    char path[4200];
    MpErr e;
    for (int l = 0; l < 64; l++)
        for (int k = 0; k < MP_REPRO_STORIES_NREG; k++) reg[l][k] = NAN;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_t *m = mp_json_read(path, &e);
    json_t *r = json_object_get(m, "residue_block_z_regions");
    for (int k = 0; k < MP_REPRO_STORIES_NREG; k++) {
        json_t *a = json_object_get(r, names[k]);
        for (int l = 0; l < 64 && json_is_array(a) && (size_t)l < json_array_size(a); l++) {
            json_t *v = json_array_get(a, (size_t)l);
            reg[l][k] = json_is_number(v) ? json_number_value(v) : NAN;
        }
    }
    json_decref(m);
}

static int stories_probe(MpReproProbe *p, double reg[64][MP_REPRO_STORIES_NREG], const char *out, const char *sub,
                         const char *ids, int causal, const MpReproStoriesOpts *o) {
    char dir[4096], key[10240], nb[32], tb[32];
    snprintf(dir, sizeof dir, "%s/stories/%s", out, sub);
    snprintf(nb, sizeof nb, "%lld", (long long)o->n);
    snprintf(tb, sizeof tb, "%d", o->threads);
    snprintf(key, sizeof key, "v%s probe model=%s fp=%016llx tokens=%s fp=%016llx n=%lld causal=%d layers=all compute=%s",
             MP_VERSION, o->model, (unsigned long long)mp_repro_fingerprint(o->model), ids,
             (unsigned long long)mp_repro_fingerprint(ids), (long long)o->n, causal, o->compute);
    char *args[] = {"probe", (char *)o->model, "--tokens", (char *)ids, "--n", nb, "--layers", "all", "--out", dir, "--quiet",
                    "--compute", (char *)o->compute, causal ? NULL : "--bidirectional", NULL, NULL, NULL};
    if (o->threads > 0) {
        int k = causal ? 13 : 14;
        args[k++] = "--threads";
        args[k] = tb;
    }
    printf("  stories %-24s every layer over %lld x %d tokens%s\n", sub, (long long)o->n, o->seq, causal ? "" : ", no mask");
    fflush(stdout);
    const int rc = mp_repro_probe(p, dir, key, args, o->force);
    if (rc == MP_OK && p->skipped) printf("          up to date, skipped (--force to redo)\n");
    if (rc == MP_OK) stories_regions(reg, dir);
    else fprintf(stderr, "maskpos reproduce: error: stage stories/%s failed\n", sub);
    return rc;
}

int mp_repro_stories_stage(MpReproStories *st, const char *out, const MpReproStoriesOpts *o, int (*fail)(const char *)) {
    memset(st, 0, sizeof *st);
    st->ran = 1;
    st->n = o->n;
    st->seq = o->seq;
    if (!o->model) {
        fprintf(stderr, "maskpos reproduce: error: stage stories: %s not found; HINT: run from the repository or set "
                        "MASKPOS_STORIES to the .gguf\n", STORIES_REL);
        return fail("stories");
    }
    char dir[4096], ids[4200];
    snprintf(dir, sizeof dir, "%s/stories/corpus", out);
    snprintf(ids, sizeof ids, "%s/ids.npy", dir);
    if (stories_corpus(st, dir, o) != MP_OK) return fail("stories/corpus");
    st->ok_corpus = 1;
    int failed = 0;
    if (stories_probe(&st->causal, st->regions[0], out, "probe", ids, 1, o) != MP_OK) failed += fail("stories/probe");
    if (stories_probe(&st->bidir, st->regions[1], out, "probe_bidirectional", ids, 0, o) != MP_OK)
        failed += fail("stories/probe_bidirectional");
    return failed;
}

void mp_repro_stories_free(MpReproStories *st) {
    mp_repro_probe_free(&st->causal);
    mp_repro_probe_free(&st->bidir);
    memset(st, 0, sizeof *st);
}

/* ================================================================ the report */

static const char *region_name[MP_REPRO_STORIES_NREG] = {"first keys", "last queries", "last keys", "interior"};

/* The region with the largest block z of layer l (causal: the last keys are only the diagonal's
 * corner block, left out). */
static int stories_top_region(const double (*reg)[MP_REPRO_STORIES_NREG], int l, int causal) {
    int best = 0;
    for (int k = 1; k < MP_REPRO_STORIES_NREG; k++) {
        if (causal && k == 2) continue;
        if (reg[l][k] > reg[l][best] || !(reg[l][best] == reg[l][best])) best = k;
    }
    return best;
}

#define APPEND(buf, k, ...) ((k) += snprintf((buf) + (k), (k) < (int)sizeof(buf) ? sizeof(buf) - (size_t)(k) : 0, __VA_ARGS__))

static void stories_rows(MpReport *rp, const MpReproStories *st) {
    const MpReproProbe *c = &st->causal, *b = &st->bidir;
    char got[256], note[256];
    int k = 0;
    if (c->ok) {
        snprintf(got, sizeof got, "block z %.2f (first keys %.2f, interior %.2f), rms/noise %.2f (N = %lld)", c->block_z[0],
                 st->regions[0][0][0], st->regions[0][0][3], c->stats[0].z_rms, (long long)c->n);
        const int ok = c->block_z[0] < 1.3;
        snprintf(note, sizeof note,
                 "layer 1 sees embeddings and RoPE only: a residue here is the text's (every sequence opens with "
                 "a story start; first keys z %.1f, interior %.1f), not the mask's (MEASURED.md)",
                 st->regions[0][0][0], st->regions[0][0][3]);
        mp_report_row(rp, "Fig. 5 stories260K (pretrained, real), layer 1: non-relative residue",
                      "noise only (block z ≈ 1): RoPE alone is relative", got, ok, ok ? "" : note);
        int all = 1, nbad = 0;
        k = snprintf(got, sizeof got, "block z");
        for (int l = 1; l < c->L; l++) {
            APPEND(got, k, " %.2f", c->block_z[l]);
            if (!(c->block_z[l] > 1.3)) all = 0, nbad++;
        }
        APPEND(got, k, " (layers 2–%d; N = %lld)", c->L, (long long)c->n);
        snprintf(note, sizeof note, "%s", all ? "" : "some later layers stay within noise at this N");
        mp_report_row(rp, "Fig. 5 stories260K, layers 2–5: non-relative residue, causal mask",
                      "above noise (block z > 1.3; noise gives 1 ± 0.1)", got, all, note);
        int first = 0, later = 0;
        k = snprintf(got, sizeof got, "largest regional block z:");
        for (int l = 1; l < c->L; l++) {
            const int top = stories_top_region(st->regions[0], l, 1);
            APPEND(got, k, " L%d %s %.1f;", l + 1, region_name[top], st->regions[0][l][top]);
            first += top == 0;
            later++;
        }
        if (k > 0 && got[k - 1] == ';') got[k - 1] = '\0';
        mp_report_row(rp, "Fig. 5 stories260K, layers 2–5: where the residue sits (regional block test, causal)",
                      "the first keys, in most layers (as in the paper's Figure 5)", got, 2 * first > later,
                      2 * first > later ? "" : "the residue of this model sits elsewhere than the first keys");
    }
    if (c->ok && b->ok) {
        int all = 1;
        k = snprintf(got, sizeof got, "block z");
        for (int l = 1; l < c->L && l < b->L; l++) {
            APPEND(got, k, " %.2f → %.2f", c->block_z[l], b->block_z[l]);
            if (!(b->block_z[l] < c->block_z[l])) all = 0;
        }
        APPEND(got, k, " (N = %lld)", (long long)b->n);
        int kn = snprintf(note, sizeof note, "without the mask the largest regional z:");
        for (int l = 1; l < b->L; l++) {
            const int top = stories_top_region(st->regions[1], l, 0);
            APPEND(note, kn, " L%d %s %.1f;", l + 1, region_name[top], st->regions[1][l][top]);
        }
        if (kn > 0 && kn < (int)sizeof note && note[kn - 1] == ';') note[kn - 1] = '\0';
        mp_report_row(rp, "Fig. 5 counterfactual (ours): stories260K without the mask, layers 2–5", "the residue falls", got,
                      all, note);
    }
}

/* Statistics table rows: every layer of both probes. */
static void stories_stats(MpReport *rp, const MpReproStories *st) {
    const MpReproProbe *ps[2] = {&st->causal, &st->bidir};
    static const char *names[2] = {"stories/probe (stories260K)", "stories/probe_bidirectional"};
    for (int k = 0; k < 2; k++) {
        if (!ps[k]->ok) continue;
        for (int l = 0; l < ps[k]->L && rp->stats_rows < MP_REPORT_MAX_STATS; l++) {
            char(*row)[48] = rp->stats[rp->stats_rows++];
            snprintf(row[0], 48, "%s", names[k]);
            snprintf(row[1], 48, "%d", l + 1);
            snprintf(row[2], 48, "%.6f", ps[k]->stats[l].nri);
            snprintf(row[3], 48, "%+.5f", ps[k]->stats[l].res_min);
            snprintf(row[4], 48, "%+.5f", ps[k]->stats[l].res_max);
            snprintf(row[5], 48, "%.2f", ps[k]->stats[l].z_rms);
            snprintf(row[6], 48, "%.2f", ps[k]->block_z[l]);
            if (l == 0) snprintf(row[7], 48, "%.1f%s", ps[k]->wall_s, ps[k]->skipped ? " (reused)" : "");
        }
    }
}

int mp_repro_stories_report(MpReport *rp, MpReproStories *st, const char *out, MpErr *e) {
    if (!st->ran) return MP_OK;
    stories_rows(rp, st);
    stories_stats(rp, st);
    MpFigRow rows[2];
    int n = 0;
    if (st->causal.ok) rows[n++] = (MpFigRow){st->causal.scores, st->causal.L, st->causal.S, "Causal (norm.)", 1};
    if (st->bidir.ok) rows[n++] = (MpFigRow){st->bidir.scores, st->bidir.L, st->bidir.S, "No mask (norm.)", 1};
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
    st->fig = rel;
    return MP_OK;
}
