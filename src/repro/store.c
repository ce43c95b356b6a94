/* store.c — see store.h. Sections: locating inputs, fingerprints, settings keys, strict
 * readers, reuse or run. */
#include "repro/store.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/files.h" /* MP_OUTDIR_MARKER, mp_outdir_clear */
#include "core/json.h"  /* mp_json_read, mp_json_write_atomic */
#include "core/npy.h"   /* mp_npy_read */
#include "core/util.h"  /* mp_path_join, mp_file_exists, mp_fnv1a64, mp_time_now */

/* ================================================================ locating inputs */

static int exists(const char *path) { return mp_file_exists(path); }

int mp_repro_locate(char *out, size_t cap, const char *env, const char *rel, int (*ok)(const char *path)) {
    if (!ok) ok = exists;
    const char *v = env ? getenv(env) : NULL;
    if (v && *v) { /* named: that one or none */
        if (!ok(v) || strlen(v) >= cap) return 0;
        snprintf(out, cap, "%s", v);
        return 1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) { /* <repo>/build/maskpos -> <repo>/REL (and one folder further up) */
        exe[n] = '\0';
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = '\0';
            char cand[PATH_MAX + 128];
            snprintf(cand, sizeof cand, "%s/%s", exe, rel);
            if (ok(cand) && strlen(cand) < cap) {
                snprintf(out, cap, "%s", cand);
                return 1;
            }
        }
    }
    if (ok(rel) && strlen(rel) < cap) {
        snprintf(out, cap, "%s", rel);
        return 1;
    }
    return 0;
}

int mp_repro_models_ok(const char *dir) {
    static const char *need[3] = {"none/config.json", "rope/config.json", "kjv.txt"};
    for (int k = 0; k < 3; k++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, need[k]);
        if (!mp_file_exists(p)) return 0;
    }
    return 1;
}

int mp_repro_models_dir(char *out, size_t cap) { return mp_repro_locate(out, cap, "MASKPOS_MODELS", "models", mp_repro_models_ok); }

int mp_repro_stories_path(char *out, size_t cap) {
    return mp_repro_locate(out, cap, "MASKPOS_STORIES", "data/third_party/stories260K/stories260K.gguf", NULL);
}

/* ================================================================ fingerprints */

static uint64_t fp_stat(uint64_t h, const struct stat *st) {
    const int64_t v[3] = {(int64_t)st->st_size, (int64_t)st->st_mtim.tv_sec, (int64_t)st->st_mtim.tv_nsec};
    return mp_fnv1a64(v, sizeof v, h);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

uint64_t mp_repro_fingerprint(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    uint64_t h = fp_stat(MP_FNV_INIT, &st);
    if (!S_ISDIR(st.st_mode)) return h;
    DIR *d = opendir(path);
    if (!d) return 0;
    char *names[512];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 512)
        if (de->d_name[0] != '.') names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n; i++) {
        char p[4200];
        if (!names[i]) continue;
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        h = mp_fnv1a64(names[i], strlen(names[i]) + 1, h);
        if (stat(p, &st) == 0) h = fp_stat(h, &st);
        free(names[i]);
    }
    return h;
}

/* ================================================================ settings keys */

int mp_repro_store_same(const char *dir, const char *key, double *wall, json_t **extra) {
    char path[4200];
    MpErr e;
    if (extra) *extra = NULL;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    if (!mp_file_exists(path)) return 0;
    json_t *j = mp_json_read(path, &e);
    const char *k = json_string_value(json_object_get(j, "stage_settings"));
    json_t *w = json_object_get(j, "wall_time_s");
    /* every field is checked: a stage.json edited or written by something else runs the stage again */
    const int same = k && !strcmp(k, key) && json_is_number(w) && isfinite(json_number_value(w)) && json_number_value(w) >= 0;
    if (same && wall) *wall = json_number_value(w);
    if (same && extra) *extra = j;
    else json_decref(j);
    return same;
}

void mp_repro_store_mark(const char *dir, const char *key, double wall, json_t *extra) {
    char path[4200];
    MpErr e;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    json_t *j = json_object();
    json_object_set_new(j, "stage_settings", json_string(key));
    json_object_set_new(j, "wall_time_s", json_real(wall));
    if (extra) json_object_update(j, extra);
    json_decref(extra);
    if (mp_json_write_atomic(path, j, &e) != MP_OK) fprintf(stderr, "maskpos reproduce: warning: %s\n", e.msg);
    json_decref(j);
}

json_t *mp_repro_store_meta_same(const char *dir, const char *key) {
    char path[4200];
    MpErr e;
    if (mp_path_join(path, sizeof path, dir, "meta.json", &e) || !mp_file_exists(path)) return NULL;
    json_t *m = mp_json_read(path, &e);
    const char *s = json_string_value(json_object_get(m, "stage_settings"));
    if (s && !strcmp(s, key)) return m;
    json_decref(m);
    return NULL;
}

void mp_repro_store_meta_mark(const char *dir, const char *key) {
    char path[4200];
    MpErr e;
    json_t *m = mp_path_join(path, sizeof path, dir, "meta.json", &e) == MP_OK ? mp_json_read(path, &e) : NULL;
    if (!m) return; /* not marked: the next run computes it again */
    json_object_set_new(m, "stage_settings", json_string(key));
    mp_json_write_atomic(path, m, &e);
    json_decref(m);
}

/* ================================================================ strict readers */

int mp_repro_store_f64(double **out, int64_t *shape, const char *dir, const char *name, int ndim, MpErr *e) {
    char path[4200];
    MpNpy a;
    *out = NULL;
    if (mp_path_join(path, sizeof path, dir, name, e) || mp_npy_read(path, &a, e) != MP_OK) return MP_ERR;
    if (a.dtype != MP_DT_F64 || a.ndim != ndim) {
        mp_npy_free(&a);
        return mp_err_set(e, "%s: not a float64 array of %d dimensions", path, ndim);
    }
    memcpy(shape, a.shape, (size_t)ndim * sizeof *shape);
    *out = a.data; /* taken over */
    return MP_OK;
}

int mp_repro_store_num(double *v, const json_t *obj, const char *key, MpErr *e) {
    json_t *x = json_object_get(obj, key);
    if (json_is_null(x)) { /* written for a non-finite value */
        *v = NAN;
        return MP_OK;
    }
    if (!json_is_number(x)) return mp_err_set(e, "no number '%s'", key);
    *v = json_number_value(x);
    return MP_OK;
}

int mp_repro_store_stats(MpPosStats *st, const json_t *stats, int L, MpErr *e) {
    if (!json_is_array(stats) || json_array_size(stats) != (size_t)L)
        return mp_err_set(e, "stats: %zu layers where %d were run", json_array_size(stats), L);
    for (int l = 0; l < L; l++) {
        const json_t *o = json_array_get(stats, (size_t)l);
        MpPosStats *s = &st[l];
        memset(s, 0, sizeof *s);
        if (mp_repro_store_num(&s->nri, o, "nri", e) || mp_repro_store_num(&s->res_min, o, "residue_min", e) ||
            mp_repro_store_num(&s->res_max, o, "residue_max", e) || mp_repro_store_num(&s->res_rms, o, "residue_rms", e) ||
            mp_repro_store_num(&s->noise_rms, o, "noise_rms", e) || mp_repro_store_num(&s->z_rms, o, "residue_z_rms", e) ||
            mp_repro_store_num(&s->rise_share, o, "rising_row_share", e) ||
            mp_repro_store_num(&s->mean_slope, o, "mean_slope", e))
            return mp_err_prefix(e, "stats of layer %d", l + 1);
    }
    return MP_OK;
}

/* ================================================================ reuse or run */

int mp_repro_store_run(const MpReproStoreKind *k, void *arg, void *obj, const char *dir, const char *key, int force,
                       int *skipped, double *wall) {
    *skipped = 0;
    if (!force && mp_repro_store_same(dir, key, wall, NULL)) {
        if (k->load(obj, dir) == MP_OK) {
            *skipped = 1;
            return MP_OK;
        }
        k->release(obj);
    }
    char path[4300];
    MpErr ce;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/%s", dir, MP_OUTDIR_MARKER); /* an earlier run is replaced whole */
    if (mp_file_exists(path) && mp_outdir_clear(dir, &ce) != MP_OK) { /* the stage's one line */
        fprintf(stderr, "maskpos reproduce: error: %s\n", ce.msg);
        return MP_ERR;
    }
    const double t0 = mp_time_now();
    if (k->run(arg, dir) != MP_OK) return MP_ERR;
    const double w = mp_time_now() - t0;
    if (k->load(obj, dir) != MP_OK) {
        k->release(obj);
        fprintf(stderr, "maskpos reproduce: error: %s: the %s outputs cannot be read back\n", dir, k->what);
        return MP_ERR;
    }
    *wall = w;
    mp_repro_store_mark(dir, key, w, NULL);
    return MP_OK;
}
