/* store.h — the on-disk layer of `reproduce`: finding its inputs, and reusing the folder of a
 * finished run instead of computing it again.
 *
 * Implements:
 *   - mp_repro_locate: an input named by an environment variable, else REL beside the executable's
 *     build folder (<repo>/build/maskpos -> <repo>/REL), else REL below the current directory
 *     (the embedded models folder and the carried stories260K.gguf both use it);
 *   - mp_repro_fingerprint: a cheap FNV-1a key of a file or directory (names, sizes, mtimes), so a
 *     changed checkpoint or corpus reruns its stage;
 *   - settings keys: DIR/stage.json (a run that a subcommand wrote: probe, gram, the stories
 *     corpus) or meta.json's "stage_settings" (a simulation); a run is reused only when its key is
 *     the same and every output it must have reads back;
 *   - mp_repro_store_run: reuse-or-run for the subcommand runs (clear the old folder, run, read
 *     back, mark);
 *   - readers that fail instead of guessing: a statistic missing from meta.json is an error (the
 *     run is then computed again), never a 0.
 * Does not: know any stage (registry.c and the stage files do).
 * Tested by: tests/test_reproduce_store.c (the readers, keys, locating), tests/test_reproduce.c
 * (re-runs skip, --force and changed settings recompute, a meta.json without a statistic is not
 * reused).
 *
 * Shape legend: L layers, S tokens per sequence.
 */
#ifndef MP_REPRO_STORE_H
#define MP_REPRO_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/err.h"       /* MpErr */
#include "kernels/posmap.h" /* MpPosStats */

/* ================================================================ locating inputs */

/* env: an environment variable that names the input (taken when set and ok(path)); rel: its path
 * relative to the repository; ok: the test an input passes (NULL: it exists). 1 and out filled,
 * or 0 when none is found. */
int mp_repro_locate(char *out, size_t cap, const char *env, const char *rel, int (*ok)(const char *path));
/* 1 when dir holds none/config.json, rope/config.json and kjv.txt (the embedded models). */
int mp_repro_models_ok(const char *dir);
/* The embedded models folder: MASKPOS_MODELS, else models/ beside the build folder, else ./models. */
int mp_repro_models_dir(char *out, size_t cap);
/* The carried stories260K.gguf: MASKPOS_STORIES, else data/third_party/stories260K/... */
int mp_repro_stories_path(char *out, size_t cap);

/* FNV-1a of path's kind, size and mtime; for a directory, of every entry's name, size and mtime
 * (sorted by name). 0 when path cannot be read. */
uint64_t mp_repro_fingerprint(const char *path);

/* ================================================================ settings keys */

/* 1 when dir/stage.json records key and a finite wall time >= 0; *wall gets it (may be NULL);
 * extra (may be NULL) gets the parsed file (caller decrefs) for the stage's own fields. */
int mp_repro_store_same(const char *dir, const char *key, double *wall, json_t **extra);
/* Writes dir/stage.json {stage_settings: key, wall_time_s: wall, ...extra's fields} (extra is
 * taken over; may be NULL). A failure is a warning: the run stays valid, it is only not reused. */
void mp_repro_store_mark(const char *dir, const char *key, double wall, json_t *extra);
/* meta.json of dir when it records "stage_settings" == key (caller decrefs), else NULL. */
json_t *mp_repro_store_meta_same(const char *dir, const char *key);
/* Adds "stage_settings": key to dir/meta.json (written last by the run), atomically. */
void mp_repro_store_meta_mark(const char *dir, const char *key);

/* ================================================================ strict readers */

/* dir/name as float64 with ndim dims into *out (owned), shape gets its shape. */
int mp_repro_store_f64(double **out, int64_t *shape, const char *dir, const char *name, int ndim, MpErr *e);
/* The per-layer statistics of meta.json "stats" (as written by mp_cli_stats_json): L entries,
 * every metric present (a number, or null for a non-finite value -> NaN). A missing metric or a
 * shorter array is an error naming it. */
int mp_repro_store_stats(MpPosStats *st, const json_t *stats, int L, MpErr *e);
/* A number of obj, null -> NaN; missing or not a number -> error naming key. */
int mp_repro_store_num(double *v, const json_t *obj, const char *key, MpErr *e);

/* ================================================================ reuse or run */

/* A run that a subcommand (or a library call) writes into a folder: how it runs, how its outputs
 * are read back into obj (MP_OK = complete), and how obj is released. */
typedef struct MpReproStoreKind {
    const char *what; /* "probe", "gram": for messages */
    int (*run)(void *arg, const char *dir);
    int (*load)(void *obj, const char *dir);
    void (*release)(void *obj);
} MpReproStoreKind;

/* Reuses dir's outputs when stage.json records key (unless force), else clears an earlier run of
 * the folder, runs, reads the outputs back and marks the folder; *skipped and *wall say which.
 * MP_OK or MP_ERR (the run's own error was printed). */
int mp_repro_store_run(const MpReproStoreKind *k, void *arg, void *obj, const char *dir, const char *key, int force,
                       int *skipped, double *wall);

#endif
