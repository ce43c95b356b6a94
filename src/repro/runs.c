/* runs.c — see runs.h: a probe or a gram run into a folder, reused when unchanged (store.h).
 * Sections: probe (its config built once: what this process runs, what the other ranks get, what
 * the reuse key records), gram.
 */
#include "repro/runs.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"     /* MP_OUTDIR_NEW */
#include "core/json.h"      /* mp_json_read, MP_VERSION */
#include "core/util.h"      /* mp_file_exists, mp_time_now */
#include "job/gram_job.h"       /* mp_gram_run, mp_gram_result_write: Figure 3's Gram matrices */
#include "job/probe_job.h"      /* mp_probe_run, mp_probe_result_write: the probes */
#include "job/probe_opts.h" /* mp_probe_opts_write: a probe's settings (MPI ranks, the reuse key) */
#include "model/fwd.h"      /* mp_fwd_compute_parse */
#include "model/probe.h"    /* mp_probe_layer_stats */
#include "repro/store.h"    /* mp_repro_store_run, mp_repro_store_f64, mp_repro_fingerprint */

/* ================================================================ probe */

typedef struct ProbeRun {
    const MpReproCtx *c;
    const MpReproProbeSpec *spec;
    MpProbeConfig pc; /* the probe this process runs, and its settings for the other ranks and the key */
} ProbeRun;

/* The probe of spec into dir as the library's config, built once: what this process runs, what
 * an MPI job hands the other ranks (its settings, job/probe_opts.h), what the reuse key records. */
static void probe_config(MpProbeConfig *pc, const MpReproProbeSpec *s, const MpReproConfig *cfg, const char *dir) {
    mp_probe_config_init(pc);
    pc->model_path = s->model;
    pc->tokens_path = s->tokens;
    pc->data = s->data;
    pc->n = s->n;
    pc->seq = s->seq;
    pc->pack = s->pack;
    pc->layers = s->layers;
    pc->bidirectional = !s->causal;
    pc->recency = s->recency_plot;
    pc->stats = s->stats;
    pc->no_rope = s->no_rope;
    /* the length stage's probes run at the default compute */
    pc->compute = s->recency_plot ? MP_FWD_COMPUTE_F32 : mp_fwd_compute_parse(cfg->compute);
    pc->threads = cfg->base.threads;
    pc->device = cfg->device; /* in the reuse key: another device's sums differ in the last bits */
    pc->out = dir;
    pc->out_mode = MP_OUTDIR_NEW;
}

/* The reuse key of pc (malloc'd; NULL when out of memory): the version, the settings that change
 * what the probe computes (every option of job/probe_opts.h but those of how it runs: threads,
 * memory cap, folder), and the fingerprints of the model and of the tokens or documents. A new
 * probe option is in it without a word here. */
static char *probe_key(const MpProbeConfig *pc) {
    char head[64], fp[64];
    const int hl = snprintf(head, sizeof head, "v%s probe ", MP_VERSION);
    const char *src = pc->tokens_path ? pc->tokens_path : pc->data;
    const int fl = snprintf(fp, sizeof fp, "fp=%016llx,%016llx", (unsigned long long)mp_repro_fingerprint(pc->model_path),
                            (unsigned long long)mp_repro_fingerprint(src));
    const size_t sl = mp_probe_opts_write(NULL, 0, pc, MP_OPT_RUN, ' ');
    char *key = malloc((size_t)hl + sl + (size_t)fl + 1);
    if (!key) return NULL;
    memcpy(key, head, (size_t)hl);
    mp_probe_opts_write(key + hl, sl + 1, pc, MP_OPT_RUN, ' ');
    memcpy(key + hl + sl, fp, (size_t)fl + 1);
    return key;
}

/* Under mpirun: the other ranks run the probe pc beside this process (MpReproHost.share), from
 * its settings, every option with a field. */
static void probe_share(const MpReproConfig *cfg, const MpProbeConfig *pc) {
    const size_t len = mp_probe_opts_write(NULL, 0, pc, 0, '\0');
    char *buf = malloc(len + 1);
    if (!buf) {
        fprintf(stderr, "maskpos reproduce: error: out of memory for a probe's settings\n");
        exit(MP_EXIT_ERROR);
    }
    mp_probe_opts_write(buf, len + 1, pc, 0, '\0');
    cfg->host.share("probe", buf, len);
    free(buf);
}

/* The probe of spec into dir: the library call (job/probe_job.h), its tables printed as `maskpos
 * probe` prints them, its folder written byte for byte as `maskpos probe --out dir` writes it. */
static int probe_run(void *arg, const char *dir) {
    ProbeRun *pr = arg;
    const MpReproProbeSpec *s = pr->spec;
    const MpReproConfig *cfg = pr->c->cfg;
    MpProbeConfig *pc = &pr->pc;
    pc->out = dir;
    if (cfg->host.share) probe_share(cfg, pc); /* under mpirun: the other ranks run the same probe beside this one */
    pc->log = stdout;
    const double t0 = mp_time_now();
    MpProbeResult res;
    MpErr e;
    int rc = mp_probe_run(&res, pc, &e);
    if (rc == MP_OK) {
        const int64_t ran = res.n - res.first;
        printf("ran %lld sequence%s (%.0f tokens) in %.2f s\n", (long long)ran, ran == 1 ? "" : "s", (double)ran * res.S,
               res.compute_s);
        mp_probe_result_print(stdout, &res);
        const MpJobWriteOptions wo = {.plot = s->recency_plot, .argc = cfg->argc, .argv = cfg->argv, .wall_s = mp_time_now() - t0};
        rc = mp_probe_result_write(&res, dir, &wo, &e);
    }
    if (rc != MP_OK) /* the stage's one error line */
        fprintf(stderr, "maskpos reproduce: error: stage %s: %s\n", s->dir, e.msg[0] ? e.msg : "failed");
    mp_probe_result_free(&res);
    return rc;
}

/* Reads a finished probe back: meta.json (n, the block test), scores and standard errors; the
 * statistics are recomputed from them as the probe did. */
static int probe_load(void *obj, const char *dir) {
    MpReproMaps *p = obj;
    char path[4200];
    MpErr e;
    int64_t sh[3], sh2[3];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!mp_file_exists(path)) return MP_ERR; /* meta.json is written last: marks a complete run */
    json_t *m = mp_json_read(path, &e);
    if (!m) return MP_ERR;
    json_t *n = json_object_get(m, "n"), *bz = json_object_get(m, "residue_block_z");
    const int skip = json_integer_value(json_object_get(m, "stats_first_position")) == 1;
    /* else written by an older maskpos (no block test, or no noise level for it): run again */
    const int complete = json_is_integer(n) && json_is_array(bz) && json_is_array(json_object_get(m, "residue_resolved"));
    p->n = complete ? (int64_t)json_integer_value(n) : 0;
    for (int l = 0; complete && l < 64; l++) {
        json_t *v = json_array_get(bz, (size_t)l);
        p->block_z[l] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    p->L = complete ? (int)json_array_size(bz) : 0;
    if (p->L > 64) p->L = 64;
    if (complete) mp_repro_maps_signif(p, m);
    json_decref(m);
    if (!complete || mp_repro_store_f64(&p->scores, sh, dir, "scores.npy", 3, &e) ||
        mp_repro_store_f64(&p->se, sh2, dir, "scores_se.npy", 3, &e) || memcmp(sh, sh2, sizeof sh) || sh[0] < 1 ||
        sh[0] > 64 || sh[1] != sh[2])
        return MP_ERR;
    p->L = (int)sh[0];
    p->S = (int)sh[1];
    const size_t SS = (size_t)p->S * p->S;
    p->diagnorm = malloc(SS * p->L * sizeof(double));
    double *scratch = skip ? malloc(3 * SS * sizeof(double)) : NULL;
    if (!p->diagnorm || (skip && !scratch)) {
        free(scratch);
        return MP_ERR;
    }
    mp_probe_layer_stats(p->stats, p->diagnorm, p->scores, p->se, p->n >= 2, p->L, p->S, skip, scratch);
    free(scratch);
    p->has_block_z = 1;
    p->ok = 1;
    return MP_OK;
}

static void probe_release(void *obj) {
    MpReproMaps *p = obj;
    free(p->scores), free(p->se), free(p->diagnorm);
    p->scores = p->se = p->diagnorm = NULL;
    p->ok = 0;
}

int mp_repro_probe(MpReproCtx *c, const MpReproProbeSpec *spec, MpReproMaps **out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", c->out, spec->dir);
    MpReproMaps *m = mp_repro_maps_add(c, spec->dir, spec->label);
    if (out) *out = m;
    const MpReproStoreKind k = {"probe", probe_run, probe_load, probe_release};
    ProbeRun pr = {c, spec, {0}};
    probe_config(&pr.pc, spec, c->cfg, dir);
    char *key = probe_key(&pr.pc);
    if (!key) {
        fprintf(stderr, "maskpos reproduce: error: stage %s: out of memory for its settings key\n", spec->dir);
        return MP_ERR;
    }
    const int rc = mp_repro_store_run(&k, &pr, m, dir, key, c->cfg->force, &m->skipped, &m->wall_s);
    free(key);
    if (rc == MP_OK && m->skipped) printf("          up to date, skipped (--force to redo)\n");
    return rc;
}

/* ================================================================ gram */

typedef struct GramRun {
    const MpReproCtx *c;
    const char *model, *corpus;
    int n, seq;
} GramRun;

/* `gram` of layer 1 -> 2 into dir: the library call (job/gram_job.h), written as `maskpos gram --plot
 * --out dir` writes it. */
static int gram_run(void *arg, const char *dir) {
    const GramRun *g = arg;
    MpGramConfig gc;
    mp_gram_config_init(&gc);
    gc.model_path = g->model;
    gc.data = g->corpus;
    gc.layer = 1;
    gc.seq = g->seq;
    gc.n = g->n;
    gc.threads = g->c->cfg->base.threads;
    gc.out = dir;
    gc.out_mode = MP_OUTDIR_NEW;
    gc.log = stderr;
    const double t0 = mp_time_now();
    MpGramResult r;
    MpErr e;
    int rc = mp_gram_run(&r, &gc, &e);
    if (rc == MP_OK) {
        const MpJobWriteOptions wo = {.plot = 1, .argc = g->c->cfg->argc, .argv = g->c->cfg->argv, .wall_s = mp_time_now() - t0};
        rc = mp_gram_result_write(&r, dir, &wo, &e);
        if (rc == MP_OK) mp_gram_result_print(stdout, &r);
    }
    if (rc != MP_OK) fprintf(stderr, "maskpos reproduce: error: stage fig3/gram: %s\n", e.msg); /* its one line */
    mp_gram_result_free(&r);
    return rc;
}

static int gram_load(void *obj, const char *dir) {
    MpReproGram *g = obj;
    char path[4200];
    int64_t sh[3];
    MpErr e;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!mp_file_exists(path) || mp_repro_store_f64(&g->gram, sh, dir, "gram.npy", 3, &e) != MP_OK) return MP_ERR;
    if (sh[0] != 9 || sh[1] != sh[2] || sh[1] < 1) return MP_ERR;
    g->S = (int)sh[1];
    g->ok = 1;
    return MP_OK;
}

static void gram_release(void *obj) { mp_repro_gram_free(obj); }

int mp_repro_gram(MpReproCtx *c, MpReproGram *g, const char *dir, const char *model, const char *corpus, int n, int seq,
                  const char *key) {
    memset(g, 0, sizeof *g);
    GramRun gr = {c, model, corpus, n, seq};
    const MpReproStoreKind k = {"gram", gram_run, gram_load, gram_release};
    return mp_repro_store_run(&k, &gr, g, dir, key, c->cfg->force, &g->skipped, &g->wall_s);
}
