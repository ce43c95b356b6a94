/* repro_models.h — the trained-model stages of `maskpos reproduce` (paper.md §2.2 Figure 3, §2.4
 * Figure 5): finding the embedded models, running `probe` and `gram` in-process on them (or on the
 * user's --model), reusing outputs whose settings have not changed, and reading the results back.
 *
 * Implements:
 *   - mp_repro_models_dir: where the embedded models and their corpus live (MASKPOS_MODELS, else
 *     models/ beside the executable's build folder, else ./models);
 *   - mp_repro_fingerprint: a cheap FNV-1a key of a file or directory (names, sizes, mtimes), so a
 *     changed checkpoint or corpus reruns its stage;
 *   - mp_repro_probe / mp_repro_gram: one `maskpos probe` / `maskpos gram` run into a folder, skipped
 *     when DIR/stage.json records the same settings key and the outputs load; results read back
 *     from the .npy files (scores, standard errors, statistics recomputed by kernels/posmap.h).
 * Does not: draw figures or write the report (reproduce.c does).
 * Tested by: tests/test_reproduce.c.
 *
 * Shape legend: L layers run, S tokens per sequence.
 */
#ifndef MP_CLI_REPRO_MODELS_H
#define MP_CLI_REPRO_MODELS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/posmap.h" /* MpPosStats */

/* Finds the embedded models folder (must hold none/config.json and rope/config.json). Returns 1
 * and fills out, or 0 when none is found. */
int mp_repro_models_dir(char *out, size_t cap);
/* 1 when dir holds none/config.json, rope/config.json and kjv.txt. */
int mp_repro_models_ok(const char *dir);

/* FNV-1a of path's kind, size and mtime; for a directory, of every entry's name, size and mtime
 * (sorted by name). 0 when path cannot be read. */
uint64_t mp_repro_fingerprint(const char *path);

typedef struct MpReproProbe {
    int ok, skipped;
    int L, S;                /* layers kept (1..L, all of the model's up to 64) and sequence length */
    int64_t n;               /* sequences averaged */
    double *scores, *se;     /* [L,S,S] owned: mean pre-softmax scores and their standard errors */
    double *diagnorm;        /* [L,S,S] owned: scores minus their diagonal means */
    MpPosStats stats[64];    /* per layer, with noise from se */
    double block_z[64];      /* per layer: the probe's block test of the residue (≈ 1 for noise) */
    double wall_s;
} MpReproProbe;

/* Runs `maskpos probe` with args (args[0] = "probe", NULL-terminated) into dir unless dir holds
 * the outputs of a run with the same key (force: always run). Returns MP_OK or MP_ERR (the
 * probe's own error was printed). */
int mp_repro_probe(MpReproProbe *p, const char *dir, const char *key, char **args, int force);
void mp_repro_probe_free(MpReproProbe *p);

typedef struct MpReproGram {
    int ok, skipped;
    int S;
    double *gram;            /* [9,S,S] owned: (a)..(i) of paper.md §2.2 */
    double wall_s;
} MpReproGram;

int mp_repro_gram(MpReproGram *g, const char *dir, const char *key, char **args, int force);
void mp_repro_gram_free(MpReproGram *g);

#endif
