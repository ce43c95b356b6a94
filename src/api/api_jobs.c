/* api_jobs.c — the jobs of the public C API (include/maskpos.h): theory, simulate, and the model
 * handle; each a thin adapter from the settings to the library call and from its result to named
 * arrays, meta and the command's writer.
 *
 * Implements: maskpos_theory (job/theory_job.h), maskpos_simulate (sim/simulate.h, written by the
 * writer of `maskpos simulate`, job/sim_out.h), maskpos_model_*, and the progress trampoline
 * every job uses (the caller's callback runs on the calling thread only).
 * Does not: parse flags or print (the settings are checked in api.c); the probe is api_probe.c.
 * Tested by: tests/test_api.c, tests/test_pyapi.c (byte equality with the command line).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"       /* MaskposConfig, MaskposResult insides */
#include "core/json.h"     /* mp_json_add_provenance */
#include "core/util.h"     /* mp_time_now */
#include "job/sim_out.h"   /* mp_sim_write_outputs, mp_sim_result_meta: the folder `maskpos simulate` writes */
#include "load/model.h"    /* MpModel, mp_model_open */
#include "sim/simulate.h"  /* mp_sim_run */
#include "job/theory_job.h"    /* mp_theory_run, mp_theory_result_write, mp_theory_result_meta */

/* ================================================================ theory */

static void api_theory_free(void *p) {
    mp_theory_result_free(p);
    free(p);
}

static int api_theory_write(const MaskposResult *r, const char *dir, MpErr *e) {
    MpJobWriteOptions o = {.plot = 0, .argc = r->argc, .argv = r->argv, .wall_s = r->wall_s};
    return mp_theory_result_write(r->job, dir, &o, e);
}

/* The meta of the theory: the object its writer writes, made in memory. */
static int api_theory_meta(MaskposResult *r, MpErr *e) {
    MpJobWriteOptions o = {.plot = 0, .argc = r->argc, .argv = r->argv, .wall_s = r->wall_s};
    r->meta = mp_theory_result_meta(r->job, &o);
    return r->meta ? MP_OK : mp_err_set(e, "theory: out of memory for the meta");
}

MASKPOS_API int maskpos_theory(const MaskposConfig *c, MaskposResult **out) {
    MpErr e;
    if (!c || !out) return mp_api_failf("maskpos_theory: NULL argument");
    *out = NULL;
    if (c->job != MP_API_THEORY) return mp_api_failf("maskpos_theory: the settings are for another job");
    const double t0 = mp_time_now();
    MaskposResult *r = mp_api_result_new("theory");
    MpTheoryResult *t = calloc(1, sizeof *t);
    if (!r || !t) {
        free(r);
        free(t);
        return mp_api_failf("out of memory");
    }
    r->job = t;
    r->job_free = api_theory_free;
    r->write = api_theory_write;
    r->make_meta = api_theory_meta;
    const MpTheoryConfig tc = {.alpha = c->th_alpha, .n = c->th_n, .layers = c->th_layers};
    const int n = tc.n, L = tc.layers;
    const int64_t shp2[2] = {n, n}, shp3[3] = {L, n, n};
    int rc = mp_theory_run(t, &tc, &e);
    if (rc == MP_OK) rc = mp_api_result_add(r, "layer2_scores", MP_DT_F64, 2, shp2, t->th.s2, NULL, &e);
    if (rc == MP_OK && t->deep) rc = mp_api_result_add(r, "layer_scores", MP_DT_F64, 3, shp3, t->deep, NULL, &e);
    const int64_t shpv[2] = {t->var_layers, n};
    if (rc == MP_OK) rc = mp_api_result_add(r, "variance", MP_DT_F64, 2, shpv, t->var, NULL, &e);
    if (rc == MP_OK) rc = mp_api_result_add(r, "variance_iid", MP_DT_F64, 2, shpv, t->var_iid, NULL, &e);
    if (rc == MP_OK) rc = mp_api_result_argv(r, c, &e);
    if (rc != MP_OK) {
        maskpos_result_free(r);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    r->wall_s = mp_time_now() - t0;
    *out = r;
    return MASKPOS_OK;
}

/* ================================================================ progress */

/* The jobs call their progress function from whichever thread runs a unit (simulate: the ordered
 * region of its OpenMP loop); the caller's function is called from the calling thread only (a
 * Python callback must run there to see Ctrl-C), with the latest count, and once more at the end
 * if the last count reached no call there. Its stop request is sticky. */
int mp_api_progress(void *ctx, int64_t done, int64_t total) {
    ApiProgress *p = ctx;
    if (pthread_equal(pthread_self(), p->caller) && !__atomic_load_n(&p->stop, __ATOMIC_ACQUIRE)) {
        p->told = done;
        if (p->fn(p->user, done, total)) __atomic_store_n(&p->stop, 1, __ATOMIC_RELEASE);
    }
    return __atomic_load_n(&p->stop, __ATOMIC_ACQUIRE);
}

void mp_api_progress_init(ApiProgress *p, MaskposProgressFn fn, void *user) {
    p->fn = fn;
    p->user = user;
    p->caller = pthread_self();
    p->told = -1;
    p->stop = 0;
}

void mp_api_progress_end(ApiProgress *p, int64_t total) {
    if (p->fn && p->told != total && !p->stop) p->fn(p->user, total, total);
}

/* ================================================================ simulate */

typedef struct ApiSim {
    MpSimConfig cfg;
    char scale_word[8];
    MpSimResult res;
} ApiSim;

static void api_sim_free(void *p) {
    ApiSim *s = p;
    if (!s) return;
    mp_sim_result_free(&s->res);
    free(s);
}

static int api_sim_write(const MaskposResult *r, const char *dir, MpErr *e) {
    const ApiSim *s = r->job;
    return mp_sim_write_outputs(dir, &s->cfg, s->scale_word, &s->res, 0, r->argc, r->argv, e);
}

/* The meta of a simulation: the object its writer writes, made in memory. */
static int api_sim_meta(MaskposResult *r, MpErr *e) {
    const ApiSim *s = r->job;
    r->meta = mp_sim_result_meta(&s->cfg, s->scale_word, &s->res, 0, r->argc, r->argv);
    return r->meta ? MP_OK : mp_err_set(e, "simulate: out of memory for the meta");
}

/* The command's defaults that depend on other flags (src/cli/cmd_simulate.c). */
static void api_sim_resolve(ApiSim *s, const MaskposConfig *c) {
    s->cfg = c->sim;
    const char *scale = c->scale_word[0] ? c->scale_word : NULL;
    if (s->cfg.form == MP_SIM_FORM_RECENCY) {
        if (!c->seq_set) s->cfg.seq = 10;
        if (!c->norm_set) s->cfg.norm = MP_NORM_LAYERNORM;
        if (!c->resid_set) s->cfg.residual = 0;
        if (!scale) scale = "sqrt";
    }
    if (!scale) scale = s->cfg.norm == MP_NORM_L2 ? "1" : "sqrt";
    snprintf(s->scale_word, sizeof s->scale_word, "%s", scale);
    s->cfg.scale = mp_sim_scale_value(scale, s->cfg.dim);
    s->cfg.progress = 0; /* the caller draws progress */
    s->cfg.mpi = 0;
}

MASKPOS_API int maskpos_simulate(const MaskposConfig *c, MaskposProgressFn progress, void *user, MaskposResult **out) {
    MpErr e;
    if (!c || !out) return mp_api_failf("maskpos_simulate: NULL argument");
    *out = NULL;
    if (c->job != MP_API_SIMULATE) return mp_api_failf("maskpos_simulate: the settings are for another job");
    MaskposResult *r = mp_api_result_new("simulate");
    ApiSim *s = calloc(1, sizeof *s);
    if (!r || !s) {
        free(r);
        free(s);
        return mp_api_failf("out of memory");
    }
    r->job = s;
    r->job_free = api_sim_free;
    r->write = api_sim_write;
    r->make_meta = api_sim_meta;
    api_sim_resolve(s, c);
    ApiProgress pg;
    mp_api_progress_init(&pg, progress, user);
    if (progress) {
        s->cfg.progress_fn = mp_api_progress;
        s->cfg.progress_ctx = &pg;
    }
    int rc = mp_sim_config_check(&s->cfg, &e);
    if (rc == MP_OK) rc = mp_sim_run(&s->res, &s->cfg, &e);
    s->cfg.progress_fn = NULL; /* the writer keeps cfg: pg does not outlive this call */
    s->cfg.progress_ctx = NULL;
    if (rc == MP_OK) mp_api_progress_end(&pg, s->cfg.batch);
    const MpSimResult *res = &s->res;
    const int64_t shp[3] = {res->layers, res->seq, res->seq};
    if (rc == MP_OK) rc = mp_api_result_add(r, "scores", MP_DT_F64, 3, shp, res->scores, NULL, &e);
    if (rc == MP_OK) rc = mp_api_result_add(r, "scores_se", MP_DT_F64, 3, shp, res->se, NULL, &e);
    if (rc == MP_OK) rc = mp_api_result_add(r, "probs", MP_DT_F64, 3, shp, res->probs, NULL, &e);
    if (rc == MP_OK) rc = mp_api_result_add(r, "scores_diagnorm", MP_DT_F64, 3, shp, res->diagnorm, NULL, &e);
    const int64_t vshp[2] = {res->layers, res->seq};
    for (int k = 0; res->var && k < MP_SIM_VAR_FILES && rc == MP_OK; k++)
        rc = mp_api_result_add(r, mp_sim_var_files[k].name, MP_DT_F64, 2, vshp, res->var + (size_t)k * res->layers * res->seq,
                               NULL, &e);
    if (rc == MP_OK) rc = mp_api_result_argv(r, c, &e);
    if (rc != MP_OK) {
        maskpos_result_free(r);
        return mp_api_fail(&e, strcmp(e.msg, MP_JOB_STOPPED_MSG) ? MASKPOS_ERR : MASKPOS_STOPPED);
    }
    r->wall_s = res->wall_s;
    *out = r;
    return MASKPOS_OK;
}

/* ================================================================ model */

MASKPOS_API int maskpos_model_open(const char *path, MaskposModel **out) {
    MpErr e;
    if (!path || !out) return mp_api_failf("maskpos_model_open: NULL argument");
    *out = NULL;
    MaskposModel *h = calloc(1, sizeof *h);
    if (!h) return mp_api_failf("out of memory");
    if (mp_model_open(&h->m, path, &e) != MP_OK) {
        free(h);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    *out = h;
    return MASKPOS_OK;
}

MASKPOS_API void maskpos_model_close(MaskposModel *h) {
    if (!h) return;
    mp_model_free(&h->m);
    free(h);
}

MASKPOS_API int maskpos_model_info(const MaskposModel *h, int *layers, int *heads, int64_t *context, int64_t *vocab) {
    if (!h) return mp_api_failf("maskpos_model_info: NULL model");
    if (layers) *layers = h->m.n_layers;
    if (heads) *heads = h->m.n_heads;
    if (context) *context = h->m.max_pos;
    if (vocab) *vocab = h->m.vocab;
    return MASKPOS_OK;
}
