/* theory_job.h — the closed forms of the parameter-free causal decoder as one library call
 * (paper.md §1; the maths: sim/theory.h).
 *
 * Implements: mp_theory_run (Z_i, g(i), h(i), the layer-2 map, and optionally layers 1..L of the
 * infinite-width Gram recursion; the attention output's variance by position, layer 1 in closed
 * form, layers 1..L from the recursion), mp_theory_result_print (the tables `maskpos theory`
 * prints) and mp_theory_result_write (layer2_scores.npy, layer_scores.npy, variance.npy,
 * variance_iid.npy, meta.json: the CLI's folder byte for byte).
 * Does not: parse flags or claim the folder (src/cli/cmd_theory.c).
 * Tested by: tests/test_theory.c (the maths), tests/test_jobs.c (the call against the CLI).
 *
 * Shape legend: N positions, L layers.
 */
#ifndef MP_JOB_THEORY_JOB_H
#define MP_JOB_THEORY_JOB_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"   /* MpErr */
#include "job/job.h"    /* MpJobWriteOptions */
#include "sim/theory.h" /* MpTheory */

typedef struct MpTheoryConfig {
    double alpha; /* inner product of distinct input rows, in [0, 1) */
    int n;        /* positions N >= 1 */
    int layers;   /* 0: layer 2 only (closed form); L > 0: also layers 1..L of the recursion */
} MpTheoryConfig;

/* Owns its arrays (free accepts a zeroed struct). */
typedef struct MpTheoryResult {
    MpTheoryConfig c;
    MpTheory th;   /* z, g, h [N]; s2 [N,N] (NaN above the diagonal) */
    double *deep;  /* [L,N,N] layers 1..L of the recursion, or NULL (layers = 0) */
    /* the variance of the attention output by position, in units of σ² = 1/d (sim/theory.h,
     * mp_theory_layers): layers 1..L of the recursion, or layer 1's closed form alone (layers = 0) */
    int var_layers;  /* L, or 1 */
    double *var_iid; /* [var_layers, N] σ²·Σ_j a_ij² / σ²: values independent of the weights */
    double *var;     /* [var_layers, N] the decoder's own (its values' inner products) */
} MpTheoryResult;

int mp_theory_run(MpTheoryResult *r, const MpTheoryConfig *c, MpErr *e);
void mp_theory_result_free(MpTheoryResult *r);
/* Z_i, g(i), h(i) and the score tables (layer 2, or layers 1..L) with `digits` decimals; the
 * first max_rows positions only (and a line saying so) when 0 < max_rows < n. */
void mp_theory_result_print(FILE *f, const MpTheoryResult *r, int digits, int max_rows);
/* meta.json as an object (the caller owns it): what mp_theory_result_write writes. o may be NULL. */
json_t *mp_theory_result_meta(const MpTheoryResult *r, const MpJobWriteOptions *o);
/* layer2_scores.npy [N,N], layer_scores.npy [L,N,N] (layers > 0) and meta.json into dir (which
 * must exist). o may be NULL. */
int mp_theory_result_write(const MpTheoryResult *r, const char *dir, const MpJobWriteOptions *o, MpErr *e);

#endif
