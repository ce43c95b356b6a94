/* api_probe.c — maskpos_probe of the public C API (include/maskpos.h): the settings, checked as
 * `maskpos probe` checks its flags, become an MpProbeConfig for the library's probe
 * (job/probe.h, mp_probe_run); its result becomes named arrays, meta and its writer.
 *
 * Implements: the words → MpProbeConfig translation (messages of src/cli/probe.c), tokens from
 * memory, a file or documents, the result's arrays (the .npy files `maskpos probe --out` writes
 * for the same run, read back from the writer's own choice of files), saving through
 * mp_probe_result_write.
 * Does not: checkpoint or resume (no output folder during the run), draw figures.
 * Tested by: tests/test_pyapi.c (python/tests/test_probe.py: byte equality with the command).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"    /* MaskposConfig, MaskposResult, MaskposModel insides */
#include "core/util.h"  /* mp_parse_i64, mp_parse_double, mp_path_join */
#include "job/probe.h"  /* mp_probe_run, mp_probe_result_write */
#include "model/fwd.h"  /* mp_fwd_compute_parse */

/* ================================================================ settings */

static int probe_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    int64_t x;
    if (mp_parse_i64(v, INT64_MIN, INT64_MAX, &x) != MP_OK) return mp_api_failf("%s: '%s' is not an integer", flag, v);
    if (x < lo || x > hi) return mp_api_failf("%s: %s is outside [%lld, %lld]", flag, v, (long long)lo, (long long)hi);
    *out = x;
    return MP_OK;
}

/* One setting into the probe's config (the ranges and messages of src/cli/probe.c). */
static int probe_setting(MpProbeConfig *p, const char *k, const char *v) {
    char flag[72];
    snprintf(flag, sizeof flag, "--%s", k);
    const int on = !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on");
    int64_t x = 0;
    if (!strcmp(k, "layers")) p->layers = v;
    else if (!strcmp(k, "tokens")) p->tokens_path = v;
    else if (!strcmp(k, "data")) p->data = v;
    else if (!strcmp(k, "tokenizer")) p->tokenizer = v;
    else if (!strcmp(k, "field")) p->field = v;
    else if (!strcmp(k, "per-head")) p->per_head = on;
    else if (!strcmp(k, "heads-f64")) p->heads_f64 = on;
    else if (!strcmp(k, "bidirectional")) p->bidirectional = on;
    else if (!strcmp(k, "no-rope")) p->no_rope = on;
    else if (!strcmp(k, "probs")) p->probs = on;
    else if (!strcmp(k, "recency")) p->recency = on;
    else if (!strcmp(k, "allow-long")) p->allow_long = on;
    else if (!strcmp(k, "whole")) p->whole = on;
    else if (!strcmp(k, "shuffle")) p->shuffle = on;
    else if (!strcmp(k, "no-special")) p->no_special = on;
    else if (!strcmp(k, "pack")) p->pack = on;
    else if (!strcmp(k, "compute")) {
        if ((p->compute = mp_fwd_compute_parse(v)) < 0) return mp_api_failf("--compute: '%s' is not f32 or bf16", v);
    } else if (!strcmp(k, "max-mem-gib")) {
        double g;
        if (mp_parse_double(v, &g) != MP_OK) return mp_api_failf("%s: '%s' is not a number", flag, v);
        if (g < 1e-6 || g > 1e6) return mp_api_failf("%s: %s is outside [%g, %g]", flag, v, 1e-6, 1e6);
        p->max_mem_gib = g;
    } else if (!strcmp(k, "seq")) {
        if (probe_i64(flag, v, 1, 1 << 20, &x) != MP_OK) return MP_ERR;
        p->seq = (int)x;
    } else if (!strcmp(k, "n")) {
        if (probe_i64(flag, v, 1, INT64_C(1) << 40, &p->n) != MP_OK) return MP_ERR;
    } else if (!strcmp(k, "threads")) {
        if (probe_i64(flag, v, 1, MP_THREADS_MAX, &x) != MP_OK) return MP_ERR;
        p->threads = (int)x;
    } else if (!strcmp(k, "seed")) {
        if (probe_i64(flag, v, 0, INT64_MAX, &x) != MP_OK) return MP_ERR;
        p->seed = (uint64_t)x;
    } else
        return mp_api_failf("unknown option or missing value: '%s' (see 'maskpos probe --help')", flag);
    return MP_OK;
}

/* ================================================================ result */

typedef struct ApiProbe {
    MpProbeResult res;
} ApiProbe;

static void api_probe_free(void *p) {
    ApiProbe *a = p;
    if (!a) return;
    mp_probe_result_free(&a->res);
    free(a);
}

static int api_probe_write(const MaskposResult *r, const char *dir, MpErr *e) {
    const ApiProbe *a = r->job;
    MpJobWriteOptions o = {.plot = 0, .argc = r->argc, .argv = r->argv, .wall_s = r->wall_s};
    return mp_probe_result_write(&a->res, dir, &o, e);
}

/* The arrays and meta are exactly the folder the writer makes (mp_api_result_through_folder). */
static int api_probe_collect(MaskposResult *r, MpErr *e) { return mp_api_result_through_folder(r, 1, e); }

int mp_api_probe_result_new(MaskposResult **out, MpErr *e) {
    MaskposResult *r = mp_api_result_new("probe");
    ApiProbe *a = calloc(1, sizeof *a);
    if (!r || !a) {
        free(r);
        free(a);
        *out = NULL;
        return mp_err_set(e, "out of memory");
    }
    r->job = a;
    r->job_free = api_probe_free;
    r->write = api_probe_write;
    *out = r;
    return MP_OK;
}

MpProbeResult *mp_api_probe_result_of(MaskposResult *r) { return &((ApiProbe *)r->job)->res; }

MASKPOS_API int maskpos_probe(MaskposModel *m, const MaskposConfig *c, const int32_t *ids, int64_t n, int seq,
                              MaskposProgressFn progress, void *user, MaskposResult **out) {
    MpErr e;
    if (!m || !c || !out) return mp_api_failf("maskpos_probe: NULL argument");
    *out = NULL;
    if (c->job != MP_API_PROBE) return mp_api_failf("maskpos_probe: the settings are for another job");
    MpProbeConfig p;
    mp_probe_config_init(&p);
    p.model = &m->m;
    for (int i = 0; i < c->n_probe; i++)
        if (probe_setting(&p, c->probe_keys[i], c->probe_vals[i]) != MP_OK) return MASKPOS_ERR;
    int32_t *prefix = NULL; /* ids [p.n, p.seq] when "seq" asks for fewer columns than the array has */
    if (ids) {
        if (p.tokens_path || p.data) return mp_api_failf("probe: token ids given twice (an array and a file)");
        if (n < 1 || seq < 1) return mp_api_failf("probe: the token array is empty (%lld x %d)", (long long)n, seq);
        /* "n" and "seq" select the first rows and columns, as `probe --tokens F.npy` does; more than
         * the array holds is refused (never clamped: meta.json's command would not say what ran) */
        if (p.n > n)
            return mp_api_failf("tokens: --n %lld but the array holds %lld sequences", (long long)p.n, (long long)n);
        if (p.seq > seq) return mp_api_failf("tokens: --seq %d but the array's sequences have %d tokens", p.seq, seq);
        if (!p.n) p.n = n;
        if (!p.seq) p.seq = seq;
        if (p.seq < seq) {
            if (!(prefix = malloc((size_t)p.n * (size_t)p.seq * sizeof *prefix))) return mp_api_failf("out of memory");
            for (int64_t i = 0; i < p.n; i++)
                memcpy(prefix + (size_t)i * (size_t)p.seq, ids + (size_t)i * (size_t)seq, (size_t)p.seq * sizeof *prefix);
        }
        p.ids = prefix ? prefix : ids;
    }
    ApiProgress pg;
    mp_api_progress_init(&pg, progress, user);
    if (progress) {
        p.progress = mp_api_progress;
        p.progress_ctx = &pg;
    }
    MaskposResult *r;
    if (mp_api_probe_result_new(&r, &e) != MP_OK) {
        free(prefix);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    ApiProbe *a = r->job;
    int rc = mp_probe_run(&a->res, &p, &e);
    free(prefix); /* the result keeps no pointer to the ids */
    if (rc == MP_OK) mp_api_progress_end(&pg, a->res.n);
    if (rc == MP_OK) rc = mp_api_result_argv(r, c, &e);
    if (rc == MP_OK) {
        r->wall_s = a->res.compute_s;
        rc = api_probe_collect(r, &e);
    }
    if (rc != MP_OK) {
        maskpos_result_free(r);
        return mp_api_fail(&e, strcmp(e.msg, MP_JOB_STOPPED_MSG) ? MASKPOS_ERR : MASKPOS_STOPPED);
    }
    *out = r;
    return MASKPOS_OK;
}
