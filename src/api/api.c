/* api.c — the public C API (include/maskpos.h): errors, settings, results, loading and saving run
 * folders. The jobs themselves are in api_jobs.c.
 *
 * ================================================================ layout
 *   errors      the last error of each thread
 *   settings    maskpos_config_*: each setting checked as the command checks its flag, with the
 *               command's message; the equivalent command line kept for provenance
 *   results     arrays, meta, statistics
 *   load/save   run folders: meta.json marks a finished run; save claims the folder first
 * Does not: compute; print; exit (every failure is a return code and a message).
 * Tested by: tests/test_api.c, tests/test_pyapi.c (python/tests).
 */
#include "api/api.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/files.h" /* mp_outdir_claim */
#include "core/json.h"  /* MP_VERSION, mp_json_read, mp_json_write_atomic */
#include "core/util.h"  /* mp_parse_i64, mp_parse_double, mp_path_join, mp_mkdir_p */
#include "job/probe_opts.h" /* mp_probe_opts: which probe settings exist, which are switches */

/* ================================================================ errors */

static _Thread_local char api_last_error[sizeof(((MpErr *)0)->msg)];

int mp_api_fail(const MpErr *e, int rc) {
    snprintf(api_last_error, sizeof api_last_error, "%s", e->msg);
    return rc;
}

int mp_api_failf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(api_last_error, sizeof api_last_error, fmt, ap);
    va_end(ap);
    return MASKPOS_ERR;
}

MASKPOS_API const char *maskpos_version(void) { return MP_VERSION; }
MASKPOS_API const char *maskpos_last_error(void) { return api_last_error; }

/* ================================================================ settings */

static const char *const api_job_names[] = {"theory", "simulate", "probe"};

MASKPOS_API MaskposConfig *maskpos_config_new(const char *job) {
    int j = -1;
    for (int i = 0; i < 3; i++)
        if (job && !strcmp(job, api_job_names[i])) j = i;
    if (j < 0) {
        mp_api_failf("unknown job '%s' (theory, simulate or probe)", job ? job : "(null)");
        return NULL;
    }
    MaskposConfig *c = calloc(1, sizeof *c);
    if (!c) {
        mp_api_failf("out of memory");
        return NULL;
    }
    c->job = (MpApiJob)j;
    c->th_n = 3; /* `maskpos theory` defaults */
    mp_sim_config_default(&c->sim);
    c->argv[c->argc++] = strdup(api_job_names[j]);
    if (!c->argv[0]) {
        free(c);
        mp_api_failf("out of memory");
        return NULL;
    }
    return c;
}

MASKPOS_API void maskpos_config_free(MaskposConfig *c) {
    if (!c) return;
    for (int i = 0; i < c->argc; i++) free(c->argv[i]);
    for (int i = 0; i < c->n_probe; i++) {
        free(c->probe_keys[i]);
        free(c->probe_vals[i]);
    }
    free(c);
}

/* The flag's value checks, with the messages of the command line's (core/opts.c). */
/* *out is changed only when the value is good (a refused setting leaves the config as it was). */
static int api_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    int64_t x;
    if (mp_parse_i64(v, INT64_MIN, INT64_MAX, &x) != MP_OK) return mp_api_failf("%s: '%s' is not an integer", flag, v);
    if (x < lo || x > hi) return mp_api_failf("%s: %s is outside [%lld, %lld]", flag, v, (long long)lo, (long long)hi);
    *out = x;
    return MP_OK;
}

static int api_double(const char *flag, const char *v, double lo, double hi, double *out) {
    double x;
    if (mp_parse_double(v, &x) != MP_OK) return mp_api_failf("%s: '%s' is not a number", flag, v);
    if (x < lo || x > hi) return mp_api_failf("%s: %s is outside [%g, %g]", flag, v, lo, hi);
    *out = x;
    return MP_OK;
}

/* A switch of the command line: "1", "true", "on" / "0", "false", "off". */
static int api_switch(const char *flag, const char *v, int *out) {
    if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) *out = 0;
    else return mp_api_failf("%s: '%s' is not 1 or 0 (true or false)", flag, v);
    return MP_OK;
}

/* Records --key [value] in the equivalent command line, replacing an earlier setting of key;
 * value NULL: a switch that is on; drop: a switch that is off (nothing recorded). */
static int api_argv_record(MaskposConfig *c, const char *flag, const char *value, int drop) {
    for (int i = 1; i < c->argc; i++) {
        if (strcmp(c->argv[i], flag)) continue;
        int words = (i + 1 < c->argc && c->argv[i + 1][0] != '-') ? 2 : 1;
        for (int k = 0; k < words; k++) free(c->argv[i + k]);
        memmove(c->argv + i, c->argv + i + words, (size_t)(c->argc - i - words) * sizeof *c->argv);
        c->argc -= words;
        break;
    }
    if (drop) return MP_OK;
    if (c->argc + 2 > MP_API_MAX_ARGS) return mp_api_failf("too many settings");
    char *f = strdup(flag), *v = value ? strdup(value) : NULL;
    if (!f || (value && !v)) {
        free(f);
        free(v);
        return mp_api_failf("out of memory");
    }
    c->argv[c->argc++] = f;
    if (v) c->argv[c->argc++] = v;
    return MP_OK;
}

static int api_set_theory(MaskposConfig *c, const char *key, const char *flag, const char *v) {
    int64_t i;
    if (!strcmp(key, "alpha")) {
        double a = 0; /* [0, 1), as `maskpos theory --alpha` says for any value outside */
        if (mp_parse_double(v, &a) != MP_OK) return mp_api_failf("%s: '%s' is not a number", flag, v);
        if (!(a >= 0 && a < 1)) return mp_api_failf("%s: %s is outside [0, 1)", flag, v);
        c->th_alpha = a;
    } else if (!strcmp(key, "n")) {
        if (api_i64(flag, v, 1, 100000, &i) != MP_OK) return MP_ERR;
        c->th_n = (int)i;
    } else if (!strcmp(key, "layers")) {
        if (api_i64(flag, v, 1, 64, &i) != MP_OK) return MP_ERR;
        c->th_layers = (int)i;
    } else
        return mp_api_failf("unknown option or missing value: '%s' (see 'maskpos theory --help')", flag);
    return MP_OK;
}

/* Word-valued simulate settings (norm, scale, layer-form, residual). 1: handled; 0: not a word key. */
static int api_set_sim_word(MaskposConfig *c, const char *key, const char *v, int *rc) {
    MpSimConfig *s = &c->sim;
    *rc = MP_OK;
    if (!strcmp(key, "norm")) {
        if (!strcmp(v, "l2")) s->norm = MP_NORM_L2;
        else if (!strcmp(v, "layernorm")) s->norm = MP_NORM_LAYERNORM;
        else if (!strcmp(v, "none")) s->norm = MP_NORM_NONE;
        else *rc = mp_api_failf("--norm: '%s' is not l2, layernorm or none", v);
        if (*rc == MP_OK) c->norm_set = 1;
    } else if (!strcmp(key, "scale")) {
        if (strcmp(v, "1") && strcmp(v, "sqrt") && strcmp(v, "d")) *rc = mp_api_failf("--scale: '%s' is not 1, sqrt or d", v);
        else snprintf(c->scale_word, sizeof c->scale_word, "%s", v);
    } else if (!strcmp(key, "layer-form")) {
        if (!strcmp(v, "paper")) s->form = MP_SIM_FORM_PAPER;
        else if (!strcmp(v, "recency")) s->form = MP_SIM_FORM_RECENCY;
        else *rc = mp_api_failf("--layer-form: '%s' is not paper or recency", v);
    } else if (!strcmp(key, "residual")) {
        int on;
        if (api_switch("--residual", v, &on) != MP_OK) *rc = mp_api_failf("--residual: '%s' is not on or off", v);
        else {
            s->residual = on;
            c->resid_set = 1;
        }
    } else
        return 0;
    return 1;
}

/* An integer setting of simulate into *dst (int or int64_t), range-checked. */
static int api_sim_int(const char *flag, const char *v, int64_t lo, int64_t hi, int *dst, int64_t *dst64) {
    int64_t i;
    if (api_i64(flag, v, lo, hi, &i) != MP_OK) return MP_ERR;
    if (dst) *dst = (int)i;
    if (dst64) *dst64 = i;
    return MP_OK;
}

static int api_set_simulate(MaskposConfig *c, const char *key, const char *flag, const char *v) {
    MpSimConfig *s = &c->sim;
    int rc, on;
    int64_t seed;
    if (api_set_sim_word(c, key, v, &rc)) return rc;
    if (!strcmp(key, "batch")) return api_sim_int(flag, v, 1, INT64_C(1) << 40, NULL, &s->batch);
    if (!strcmp(key, "seq")) {
        c->seq_set = 1;
        return api_sim_int(flag, v, 1, 4096, &s->seq, NULL);
    }
    if (!strcmp(key, "dim")) return api_sim_int(flag, v, 1, 65536, &s->dim, NULL);
    if (!strcmp(key, "layers")) return api_sim_int(flag, v, 1, 64, &s->layers, NULL);
    if (!strcmp(key, "threads")) return api_sim_int(flag, v, 1, MP_THREADS_MAX, &s->threads, NULL);
    if (!strcmp(key, "rope-theta")) return api_double(flag, v, 1.0000001, 1e12, &s->rope_theta);
    if (!strcmp(key, "seed")) {
        if (api_sim_int(flag, v, 0, INT64_MAX, NULL, &seed) != MP_OK) return MP_ERR;
        s->seed = (uint64_t)seed;
        return MP_OK;
    }
    if (!strcmp(key, "alpha")) {
        double a;
        if (mp_parse_double(v, &a) != MP_OK) return mp_api_failf("--alpha: '%s' is not a comma-separated list of numbers", v);
        if (!(a >= 0 && a < 1)) return mp_api_failf("--alpha: %g is outside [0, 1)", a);
        s->alpha = a;
        return MP_OK;
    }
    if (!strcmp(key, "rope") || !strcmp(key, "bidirectional") || !strcmp(key, "variance")) {
        if (api_switch(flag, v, &on) != MP_OK) return MP_ERR;
        if (key[0] == 'r') s->rope = on;
        else if (key[0] == 'v') s->variance = on;
        else s->causal = !on;
        return MP_OK;
    }
    return mp_api_failf("unknown option or missing value: '%s' (see 'maskpos simulate --help')", flag);
}

/* A switch among the probe's settings (job/probe_opts.h). */
static int api_is_probe_switch(const char *key) {
    const int id = mp_probe_opt_find(key);
    return id >= 0 && mp_probe_opts[id].decl->kind == MP_OPT_BOOL;
}

/* Probe settings are kept as words and checked by the probe (its messages are the command's). */
static int api_set_probe(MaskposConfig *c, const char *key, const char *flag, const char *v) {
    const int id = mp_probe_opt_find(key);
    int on;
    if (id < 0 || (mp_probe_opts[id].flags & (MP_OPT_CLI | MP_OPT_POSITIONAL))) return mp_api_failf("unknown option or missing value: '%s' (see 'maskpos probe --help')", flag);
    if (api_is_probe_switch(key) && api_switch(flag, v, &on) != MP_OK) return MP_ERR;
    int slot = c->n_probe;
    for (int i = 0; i < c->n_probe; i++)
        if (!strcmp(c->probe_keys[i], key)) slot = i;
    if (slot == (int)(sizeof c->probe_keys / sizeof *c->probe_keys)) return mp_api_failf("too many settings");
    char *k = strdup(key), *w = strdup(v);
    if (!k || !w) {
        free(k);
        free(w);
        return mp_api_failf("out of memory");
    }
    if (slot < c->n_probe) {
        free(c->probe_keys[slot]);
        free(c->probe_vals[slot]);
    } else
        c->n_probe++;
    c->probe_keys[slot] = k;
    c->probe_vals[slot] = w;
    return MP_OK;
}

MASKPOS_API int maskpos_config_set(MaskposConfig *c, const char *key, const char *value) {
    if (!c || !key || !value) return mp_api_failf("maskpos_config_set: NULL argument");
    char k[64], flag[72];
    if (snprintf(k, sizeof k, "%s", key) >= (int)sizeof k) return mp_api_failf("unknown setting '%.60s...'", key);
    for (char *p = k; *p; p++)
        if (*p == '_') *p = '-';
    snprintf(flag, sizeof flag, "--%s", k);
    int rc = c->job == MP_API_THEORY ? api_set_theory(c, k, flag, value)
             : c->job == MP_API_SIMULATE ? api_set_simulate(c, k, flag, value)
                                         : api_set_probe(c, k, flag, value);
    if (rc != MP_OK) return MASKPOS_ERR;
    int is_switch = c->job == MP_API_SIMULATE ? (!strcmp(k, "rope") || !strcmp(k, "bidirectional"))
                    : c->job == MP_API_PROBE   ? api_is_probe_switch(k)
                                               : 0;
    if (is_switch) {
        int on = 0;
        api_switch(flag, value, &on);
        return api_argv_record(c, flag, NULL, !on) == MP_OK ? MASKPOS_OK : MASKPOS_ERR;
    }
    if (!strcmp(k, "residual")) value = c->sim.residual ? "on" : "off";
    return api_argv_record(c, flag, value, 0) == MP_OK ? MASKPOS_OK : MASKPOS_ERR;
}

/* ================================================================ results */

MaskposResult *mp_api_result_new(const char *kind) {
    MaskposResult *r = calloc(1, sizeof *r);
    if (r) snprintf(r->kind, sizeof r->kind, "%s", kind);
    return r;
}

int mp_api_result_add(MaskposResult *r, const char *name, MpDtype dt, int ndim, const int64_t *shape,
                      const void *data, void *owned, MpErr *e) {
    if (r->n == MP_API_MAX_ARRAYS || ndim > MP_NPY_MAX_DIMS) {
        free(owned);
        return mp_err_set(e, "%s: more arrays than a result holds (%d)", name, MP_API_MAX_ARRAYS);
    }
    MpApiArray *a = &r->arr[r->n++];
    snprintf(a->name, sizeof a->name, "%s", name);
    a->dtype = dt;
    a->ndim = ndim;
    for (int d = 0; d < ndim; d++) a->shape[d] = shape[d];
    a->data = data;
    a->owned = owned;
    return MP_OK;
}

int mp_api_result_argv(MaskposResult *r, const MaskposConfig *c, MpErr *e) {
    r->argv = calloc((size_t)c->argc + 1, sizeof *r->argv);
    if (!r->argv) return mp_err_set(e, "out of memory");
    for (int i = 0; i < c->argc; i++)
        if (!(r->argv[r->argc++] = strdup(c->argv[i]))) return mp_err_set(e, "out of memory");
    return MP_OK;
}

MASKPOS_API void maskpos_result_free(MaskposResult *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) free(r->arr[i].owned);
    if (r->job_free) r->job_free(r->job);
    if (r->meta) json_decref(r->meta);
    free(r->meta_text);
    for (int i = 0; i < r->argc; i++) free(r->argv[i]);
    free(r->argv);
    free(r);
}

MASKPOS_API const char *maskpos_result_kind(const MaskposResult *r) { return r ? r->kind : NULL; }
MASKPOS_API int maskpos_result_narrays(const MaskposResult *r) { return r ? r->n : 0; }

MASKPOS_API const char *maskpos_result_array_name(const MaskposResult *r, int i) {
    return r && i >= 0 && i < r->n ? r->arr[i].name : NULL;
}

MASKPOS_API const void *maskpos_result_array(const MaskposResult *r, const char *name, int *dtype, int *ndim,
                                             int64_t *shape) {
    for (int i = 0; r && name && i < r->n; i++) {
        const MpApiArray *a = &r->arr[i];
        if (strcmp(a->name, name)) continue;
        if (dtype) *dtype = (int)a->dtype;
        if (ndim) *ndim = a->ndim;
        for (int d = 0; shape && d < a->ndim; d++) shape[d] = a->shape[d];
        return a->data;
    }
    mp_api_failf("%s result: no array '%s'", r ? r->kind : "(null)", name ? name : "(null)");
    return NULL;
}

/* The meta of a computed result is made on first request (simulate writes it with its files). */
static json_t *api_meta(const MaskposResult *r) {
    MaskposResult *w = (MaskposResult *)r; /* a cache: the result does not change */
    if (!w->meta && w->make_meta) {
        MpErr e;
        if (w->make_meta(w, &e) != MP_OK) {
            mp_api_fail(&e, MASKPOS_ERR);
            return NULL;
        }
    }
    if (!w->meta) mp_api_failf("%s result: no meta", r->kind);
    return w->meta;
}

MASKPOS_API const char *maskpos_result_meta(const MaskposResult *r) {
    if (!r) return NULL;
    if (r->meta_text) return r->meta_text;
    json_t *m = api_meta(r);
    if (!m) return NULL;
    ((MaskposResult *)r)->meta_text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!r->meta_text) mp_api_failf("out of memory");
    return r->meta_text;
}

MASKPOS_API int maskpos_result_nstats(const MaskposResult *r) {
    json_t *m = r ? api_meta(r) : NULL;
    json_t *st = m ? json_object_get(m, "stats") : NULL;
    return json_is_array(st) ? (int)json_array_size(st) : 0;
}

MASKPOS_API double maskpos_result_stat(const MaskposResult *r, int i, const char *name) {
    json_t *m = r ? api_meta(r) : NULL;
    json_t *st = m ? json_object_get(m, "stats") : NULL;
    json_t *o = json_is_array(st) && i >= 0 ? json_array_get(st, (size_t)i) : NULL;
    json_t *v = o && name ? json_object_get(o, name) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* ================================================================ load / save */

/* The .npy files of a run: those meta.json "files" lists, else every *.npy in dir (sorted). */
/* path (a file of folder dir) read only when it is there, not behind a symbolic link to a place
 * outside the folder (issue 40: load() read whatever a link in the run folder pointed to). */
static int api_inside(const char *dir, const char *path, MpErr *e) {
    char d[PATH_MAX], p[PATH_MAX];
    if (!realpath(dir, d) || !realpath(path, p)) return MP_OK; /* (missing: the reader names it) */
    const size_t n = strlen(d);
    if (!strncmp(p, d, n) && (p[n] == '/' || !strcmp(d, "/"))) return MP_OK;
    return mp_err_set(e, "%s: a symbolic link to %s, outside the run folder: not read", path, p);
}

static int api_load_arrays(MaskposResult *r, const char *dir, json_t *files, MpErr *e) {
    const char *names[MP_API_MAX_ARRAYS];
    char *scanned[MP_API_MAX_ARRAYS];
    int n = 0, ns = 0, rc = MP_OK;
    if (json_is_object(files)) {
        const char *k;
        json_t *v;
        json_object_foreach(files, k, v) {
            size_t len = strlen(k);
            if (len <= 4 || strcmp(k + len - 4, ".npy")) continue;
            /* a key is a file of this folder: "../x.npy" or "/x.npy" would read outside it */
            if (strchr(k, '/') || k[0] == '.')
                return mp_err_set(e, "%s: meta.json \"files\" names '%s', which is not a file of this folder", dir, k);
            if (n < MP_API_MAX_ARRAYS) names[n++] = k;
        }
    } else {
        DIR *d = opendir(dir);
        struct dirent *de;
        while (d && (de = readdir(d)) && ns < MP_API_MAX_ARRAYS) {
            size_t len = strlen(de->d_name);
            if (len > 4 && !strcmp(de->d_name + len - 4, ".npy") && (scanned[ns] = strdup(de->d_name))) ns++;
        }
        if (d) closedir(d);
        qsort(scanned, (size_t)ns, sizeof *scanned, (int (*)(const void *, const void *))strcmp);
        for (int i = 0; i < ns; i++) names[n++] = scanned[i];
    }
    for (int i = 0; i < n && rc == MP_OK; i++) {
        char path[4096], stem[64];
        MpNpy a;
        snprintf(stem, sizeof stem, "%.*s", (int)(strlen(names[i]) - 4), names[i]);
        if (mp_path_join(path, sizeof path, dir, names[i], e) != MP_OK || api_inside(dir, path, e) != MP_OK ||
            mp_npy_read(path, &a, e) != MP_OK) {
            rc = MP_ERR;
            break;
        }
        rc = mp_api_result_add(r, stem, a.dtype, a.ndim, a.shape, a.data, a.data, e);
    }
    for (int i = 0; i < ns; i++) free(scanned[i]);
    return rc;
}

/* The maps of one run share one shape ([L,S,S]), and S is meta.json's "seq" where it has one: a
 * folder whose arrays disagree was mixed from several runs. */
static int api_load_check(const MaskposResult *r, const char *dir, MpErr *e) {
    static const char *const same[] = {"scores", "scores_se", "probs", "scores_diagnorm"};
    const MpApiArray *first = NULL;
    for (int i = 0; i < r->n; i++) {
        const MpApiArray *a = &r->arr[i];
        int k = 0;
        while (k < 4 && strcmp(a->name, same[k])) k++;
        if (k == 4) continue;
        if (!first) first = a;
        else if (a->ndim != first->ndim || memcmp(a->shape, first->shape, (size_t)a->ndim * sizeof a->shape[0]))
            return mp_err_set(e, "%s: %s.npy and %s.npy differ in shape: not the arrays of one run", dir, first->name,
                              a->name);
    }
    const json_t *seq = json_object_get(r->meta, "seq");
    if (first && first->ndim >= 2 && json_is_number(seq) && json_number_value(seq) != (double)first->shape[first->ndim - 1])
        return mp_err_set(e, "%s: meta.json seq %g does not match %s.npy (side %lld)", dir, json_number_value(seq),
                          first->name, (long long)first->shape[first->ndim - 1]);
    return MP_OK;
}

MASKPOS_API int maskpos_load(const char *dir, MaskposResult **out) {
    MpErr e;
    char path[4096];
    if (!out || !dir) return mp_api_failf("maskpos_load: NULL argument");
    *out = NULL;
    if (mp_path_join(path, sizeof path, dir, "meta.json", &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    FILE *f = fopen(path, "rb");
    if (!f) return mp_api_failf("%s: no meta.json: not the folder of a finished maskpos run", dir);
    fclose(f);
    if (api_inside(dir, path, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    json_t *meta = mp_json_read(path, &e);
    if (!meta) return mp_api_fail(&e, MASKPOS_ERR);
    if (!json_is_object(meta)) {
        json_decref(meta);
        return mp_api_failf("%s: not a JSON object", path);
    }
    json_t *kind = json_object_get(meta, "kind");
    MaskposResult *r = mp_api_result_new(json_is_string(kind) ? json_string_value(kind) : "run");
    if (!r) {
        json_decref(meta);
        return mp_api_failf("out of memory");
    }
    r->meta = meta;
    if (api_load_arrays(r, dir, json_object_get(meta, "files"), &e) != MP_OK || api_load_check(r, dir, &e) != MP_OK) {
        maskpos_result_free(r);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    *out = r;
    return MASKPOS_OK;
}

int mp_api_result_through_folder(MaskposResult *r, int arrays, MpErr *e) {
    char tmpl[4096], marker[4200];
    const char *root = getenv("TMPDIR");
    root = root && *root ? root : "/tmp";
    if (snprintf(tmpl, sizeof tmpl, "%s/maskpos-api-XXXXXX", root) >= (int)sizeof tmpl || !mkdtemp(tmpl))
        return mp_err_set(e, "%s: cannot create a temporary folder in %s", r->kind, root);
    MaskposResult *l = NULL;
    int rc = mp_outdir_claim(tmpl, r->kind, MP_OUTDIR_NEW, e);
    if (rc == MP_OK) rc = r->write(r, tmpl, e);
    if (rc == MP_OK && maskpos_load(tmpl, &l) != MASKPOS_OK) rc = mp_err_set(e, "%s", maskpos_last_error());
    if (rc == MP_OK && arrays && r->n + l->n > MP_API_MAX_ARRAYS)
        rc = mp_err_set(e, "%s: more arrays than a result holds (%d)", r->kind, MP_API_MAX_ARRAYS);
    if (rc == MP_OK) { /* move the meta (and arrays) over */
        for (int i = 0; arrays && i < l->n; i++) r->arr[r->n++] = l->arr[i];
        if (arrays) l->n = 0;
        r->meta = l->meta;
        l->meta = NULL;
    }
    maskpos_result_free(l);
    MpErr e2;
    if (mp_outdir_clear(tmpl, &e2) == MP_OK && mp_path_join(marker, sizeof marker, tmpl, MP_OUTDIR_MARKER, &e2) == MP_OK)
        remove(marker);
    mp_outdir_release(tmpl);
    rmdir(tmpl);
    return rc;
}

/* A loaded (or theory) result: every array as <name>.npy, then meta.json. */
static int api_write_plain(const MaskposResult *r, const char *dir, MpErr *e) {
    char path[4096];
    if (mp_mkdir_p(dir, e) != MP_OK || mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK) return MP_ERR;
    remove(path); /* meta.json marks completeness: a stale one goes first */
    for (int i = 0; i < r->n; i++) {
        char name[80];
        snprintf(name, sizeof name, "%s.npy", r->arr[i].name);
        if (mp_path_join(path, sizeof path, dir, name, e) != MP_OK ||
            mp_npy_write(path, r->arr[i].dtype, r->arr[i].data, r->arr[i].ndim, r->arr[i].shape, e) != MP_OK)
            return MP_ERR;
    }
    json_t *m = api_meta(r);
    if (!m) return mp_err_set(e, "%s", maskpos_last_error());
    return mp_path_join(path, sizeof path, dir, "meta.json", e) == MP_OK ? mp_json_write_atomic(path, m, e) : MP_ERR;
}

MASKPOS_API int maskpos_result_save(const MaskposResult *r, const char *dir, int force) {
    MpErr e;
    if (!r || !dir) return mp_api_failf("maskpos_result_save: NULL argument");
    if (mp_outdir_claim(dir, r->kind, force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) != MP_OK)
        return mp_api_fail(&e, MASKPOS_ERR);
    const int rc = (r->write ? r->write(r, dir, &e) : api_write_plain(r, dir, &e));
    mp_outdir_release(dir); /* the folder's lock lasts the writing */
    return rc != MP_OK ? mp_api_fail(&e, MASKPOS_ERR) : MASKPOS_OK;
}
