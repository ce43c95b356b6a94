/* api_probe.c — maskpos_probe of the public C API (include/maskpos.h): the settings, checked as
 * `maskpos probe` checks its flags, become an MpProbeConfig for the library's probe
 * (job/probe_job.h, mp_probe_run); its result becomes named arrays, meta and its writer.
 *
 * Implements: the words → MpProbeConfig translation (the probe's option table, job/probe_opts.h:
 * the command's values, messages and checks across options), the table to callers
 * (maskpos_probe_option_*), tokens from
 * memory, a file or documents, the result's arrays (the .npy files `maskpos probe --out` writes
 * for the same run, read back from the writer's own choice of files), saving through
 * mp_probe_result_write.
 * Does not: checkpoint or resume (no output folder during the run), draw figures.
 * Tested by: tests/test_pyapi.c (python/tests/test_probe.py: byte equality with the command).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"    /* MaskposConfig, MaskposResult, MaskposModel insides */
#include "job/probe_job.h"      /* mp_probe_run, mp_probe_result_write */
#include "job/probe_opts.h" /* mp_probe_opts: the settings, their values and checks */

/* ================================================================ settings */

/* One setting into the probe's config: a row of the probe's option table (job/probe_opts.h) that
 * is neither the command line's only nor the positional MODEL, its value checked with the
 * command's message. */
static int probe_setting(MpProbeConfig *p, const char *k, const char *v) {
    MpErr e;
    const int id = mp_probe_opt_find(k);
    if (id < 0 || (mp_probe_opts[id].flags & (MP_OPT_CLI | MP_OPT_POSITIONAL)))
        return mp_api_failf("unknown option or missing value: '--%s' (see 'maskpos probe --help')", k);
    return mp_probe_opt_set(p, id, v, &e) == MP_OK ? MP_OK : mp_api_failf("%s", e.msg);
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
        p.ids = ids; /* (for the checks) */
        if (mp_probe_opts_check(&p, &e) != MP_OK) return mp_api_failf("%s", e.msg);
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
    } else if (mp_probe_opts_check(&p, &e) != MP_OK)
        return mp_api_failf("%s", e.msg);
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

/* ================================================================ the table */

/* The i-th row of the probe's option table that is a setting here (neither CLI-only nor MODEL). */
static const MpOpt *api_probe_option(int i) {
    for (int k = 0; k < MP_PROBE_OPT_COUNT; k++)
        if (!(mp_probe_opts[k].flags & (MP_OPT_CLI | MP_OPT_POSITIONAL)) && i-- == 0) return &mp_probe_opts[k];
    return NULL;
}

MASKPOS_API int maskpos_probe_option_count(void) {
    int n = 0;
    while (api_probe_option(n)) n++;
    return n;
}

MASKPOS_API const char *maskpos_probe_option_name(int i) {
    const MpOpt *o = api_probe_option(i);
    return o ? mp_opt_name(o) : NULL;
}

MASKPOS_API const char *maskpos_probe_option_kind(int i) {
    const MpOpt *o = api_probe_option(i);
    return o ? mp_opt_kind_name(o->decl->kind) : NULL;
}

/* The help texts generated from another table (--device's, from the device table), made once. */
static char api_help_made[MP_PROBE_OPT_COUNT][1024];
static pthread_once_t api_help_once = PTHREAD_ONCE_INIT;

static void api_help_make(void) {
    for (int k = 0; k < MP_PROBE_OPT_COUNT; k++)
        if (!mp_opt_help(&mp_probe_opts[k]) && mp_probe_opts[k].decl->help_fn)
            mp_probe_opts[k].decl->help_fn(api_help_made[k], sizeof api_help_made[k]);
}

MASKPOS_API const char *maskpos_probe_option_help(int i) {
    const MpOpt *o = api_probe_option(i);
    if (!o) return NULL;
    if (mp_opt_help(o)) return mp_opt_help(o);
    pthread_once(&api_help_once, api_help_make);
    return api_help_made[o - mp_probe_opts];
}
