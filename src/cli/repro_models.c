/* repro_models.c — see repro_models.h. */
#include "cli/repro_models.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"   /* mp_cmd_probe, mp_cmd_gram */
#include "cli/mpi_job.h" /* mp_cli_mpi_share: probe stages under mpirun */
#include "core/json.h" /* mp_json_read, mp_json_write_atomic */
#include "core/npy.h"  /* mp_npy_read */
#include "core/util.h" /* mp_path_join, mp_file_exists, mp_fnv1a64, mp_time_now */
#include "model/probe.h" /* mp_probe_layer_stats */
#include "core/files.h" /* mp_outdir_claim, mp_outdir_clear, mp_input_open */

/* ================================================================ locating, fingerprints */

int mp_repro_models_ok(const char *dir) {
    char a[4200], b[4200], c[4200];
    snprintf(a, sizeof a, "%s/none/config.json", dir);
    snprintf(b, sizeof b, "%s/rope/config.json", dir);
    snprintf(c, sizeof c, "%s/kjv.txt", dir);
    return mp_file_exists(a) && mp_file_exists(b) && mp_file_exists(c);
}

int mp_repro_models_dir(char *out, size_t cap) {
    const char *env = getenv("MASKPOS_MODELS");
    if (env && *env) {
        if (!mp_repro_models_ok(env) || strlen(env) >= cap) return 0;
        snprintf(out, cap, "%s", env);
        return 1;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) { /* <repo>/build/maskpos -> <repo>/models */
        exe[n] = '\0';
        for (int up = 0; up < 2; up++) {
            char *slash = strrchr(exe, '/');
            if (!slash) break;
            *slash = '\0';
            char cand[PATH_MAX + 16];
            snprintf(cand, sizeof cand, "%s/models", exe);
            if (mp_repro_models_ok(cand) && strlen(cand) < cap) {
                snprintf(out, cap, "%s", cand);
                return 1;
            }
        }
    }
    if (mp_repro_models_ok("models") && cap > 7) {
        snprintf(out, cap, "models");
        return 1;
    }
    return 0;
}

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

/* ================================================================ stage bookkeeping */

static int argv_count(char **args) {
    int n = 0;
    while (args[n]) n++;
    return n;
}

/* 1 when dir/stage.json records key and a wall time that is a finite number >= 0 (every field is
 * checked: a stage.json edited or written by something else makes the stage run again). */
static int stage_same(const char *dir, const char *key) {
    char path[4200];
    MpErr e;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    if (!mp_file_exists(path)) return 0;
    json_t *j = mp_json_read(path, &e);
    const char *k = json_string_value(json_object_get(j, "stage_settings"));
    json_t *w = json_object_get(j, "wall_time_s");
    int same = k && !strcmp(k, key) && json_is_number(w) && isfinite(json_number_value(w)) && json_number_value(w) >= 0;
    json_decref(j);
    return same;
}

static double stage_wall(const char *dir) {
    char path[4200];
    MpErr e;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    json_t *j = mp_json_read(path, &e);
    double w = json_number_value(json_object_get(j, "wall_time_s"));
    json_decref(j);
    return w;
}

static void stage_mark(const char *dir, const char *key, double wall) {
    char path[4200];
    MpErr e;
    snprintf(path, sizeof path, "%s/stage.json", dir);
    json_t *j = json_object();
    json_object_set_new(j, "stage_settings", json_string(key));
    json_object_set_new(j, "wall_time_s", json_real(wall));
    if (mp_json_write_atomic(path, j, &e) != MP_OK) fprintf(stderr, "maskpos reproduce: warning: %s\n", e.msg);
    json_decref(j);
}

/* Reads dir/name as float64 with ndim dims; *shape gets its shape. */
static double *load_f64(const char *dir, const char *name, int ndim, int64_t *shape) {
    char path[4200];
    MpErr e;
    MpNpy a;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (mp_npy_read(path, &a, &e) != MP_OK) return NULL;
    if (a.dtype != MP_DT_F64 || a.ndim != ndim) {
        mp_npy_free(&a);
        return NULL;
    }
    memcpy(shape, a.shape, (size_t)ndim * sizeof *shape);
    return a.data;
}

/* What differs between a probe stage and a gram stage: the subcommand, how its outputs are read
 * back into the result object (1 = complete), and how that object is released. */
typedef struct StageKind {
    int (*cmd)(int, char **);
    int (*load)(void *obj, const char *dir);
    void (*release)(void *obj);
    const char *what;
} StageKind;

/* Reuses dir's outputs when stage.json records key (unless force), else runs the subcommand and
 * reads its outputs back; stage.json is written only after they load. */
static int stage_run(const StageKind *k, void *obj, const char *dir, const char *key, char **args, int force, int *skipped,
                     double *wall) {
    if (!force && stage_same(dir, key)) {
        if (k->load(obj, dir)) {
            *skipped = 1;
            *wall = stage_wall(dir);
            return MP_OK;
        }
        k->release(obj);
    }
    char stage[4200];
    snprintf(stage, sizeof stage, "%s/stage.json", dir);
    remove(stage);
    char marker[4300]; /* an earlier run of this stage is replaced as a whole (no file of it stays) */
    MpErr ce;
    snprintf(marker, sizeof marker, "%s/%s", dir, MP_OUTDIR_MARKER);
    if (mp_file_exists(marker) && mp_outdir_clear(dir, &ce) != MP_OK)
        fprintf(stderr, "maskpos reproduce: warning: %s\n", ce.msg);
    const double t0 = mp_time_now();
    if (k->cmd == mp_cmd_probe) mp_cli_mpi_share(args); /* under mpirun: every rank runs the probe */
    if (k->cmd(argv_count(args), args) != MP_EXIT_OK) return MP_ERR;
    const double w = mp_time_now() - t0;
    if (!k->load(obj, dir)) {
        k->release(obj);
        fprintf(stderr, "maskpos reproduce: error: %s: the %s outputs cannot be read back\n", dir, k->what);
        return MP_ERR;
    }
    *wall = w;
    stage_mark(dir, key, w);
    return MP_OK;
}

/* ================================================================ probe */

static int probe_load(void *obj, const char *dir) {
    MpReproProbe *p = obj;
    char path[4200];
    MpErr e;
    int64_t sh[3], sh2[3];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!mp_file_exists(path)) return 0; /* meta.json is written last: marks a complete run */
    json_t *m = mp_json_read(path, &e);
    if (!m) return 0;
    p->n = (int64_t)json_integer_value(json_object_get(m, "n"));
    const int skip = json_integer_value(json_object_get(m, "stats_first_position")) == 1;
    json_t *bz = json_object_get(m, "residue_block_z");
    if (!json_is_array(bz)) { /* written by an older maskpos: run again */
        json_decref(m);
        return 0;
    }
    for (int l = 0; l < 64; l++) {
        json_t *v = json_array_get(bz, (size_t)l);
        p->block_z[l] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    json_decref(m);
    p->scores = load_f64(dir, "scores.npy", 3, sh);
    p->se = load_f64(dir, "scores_se.npy", 3, sh2);
    if (!p->scores || !p->se || memcmp(sh, sh2, sizeof sh) || sh[0] < 1 || sh[0] > 64 || sh[1] != sh[2]) return 0;
    p->L = (int)sh[0];
    p->S = (int)sh[1];
    const size_t SS = (size_t)p->S * p->S;
    p->diagnorm = malloc(SS * p->L * sizeof(double));
    if (!p->diagnorm) return 0;
    double *scratch = skip ? malloc(3 * SS * sizeof(double)) : NULL;
    if (skip && !scratch) return 0;
    mp_probe_layer_stats(p->stats, p->diagnorm, p->scores, p->se, p->n >= 2, p->L, p->S, skip, scratch);
    free(scratch);
    p->ok = 1;
    return 1;
}

static void probe_release(void *obj) { mp_repro_probe_free(obj); }

int mp_repro_probe(MpReproProbe *p, const char *dir, const char *key, char **args, int force) {
    memset(p, 0, sizeof *p);
    const StageKind k = {mp_cmd_probe, probe_load, probe_release, "probe"};
    return stage_run(&k, p, dir, key, args, force, &p->skipped, &p->wall_s);
}

void mp_repro_probe_free(MpReproProbe *p) {
    free(p->scores);
    free(p->se);
    free(p->diagnorm);
    memset(p, 0, sizeof *p);
}

/* ================================================================ gram */

static int gram_load(void *obj, const char *dir) {
    MpReproGram *g = obj;
    char path[4200];
    int64_t sh[3];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    if (!mp_file_exists(path)) return 0;
    g->gram = load_f64(dir, "gram.npy", 3, sh);
    if (!g->gram || sh[0] != 9 || sh[1] != sh[2] || sh[1] < 1) return 0;
    g->S = (int)sh[1];
    g->ok = 1;
    return 1;
}

static void gram_release(void *obj) { mp_repro_gram_free(obj); }

int mp_repro_gram(MpReproGram *g, const char *dir, const char *key, char **args, int force) {
    memset(g, 0, sizeof *g);
    const StageKind k = {mp_cmd_gram, gram_load, gram_release, "gram"};
    return stage_run(&k, g, dir, key, args, force, &g->skipped, &g->wall_s);
}

void mp_repro_gram_free(MpReproGram *g) {
    free(g->gram);
    memset(g, 0, sizeof *g);
}
