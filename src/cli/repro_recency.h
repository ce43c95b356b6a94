/* repro_recency.h — the `recency` stage of `maskpos reproduce`: the later version's grid
 * ("LayerNorm Induces Recency Bias in Transformer Decoders", Kim et al.; docs/recency.md).
 *
 * Implements: the grid of the authors' figures (d ∈ {16, 64, 256, 1024} × α × norm × residual at
 * S = 10; 25 configurations) run by `simulate --layer-form recency`, each into
 * DIR/recency/<name>/ (reused when its meta.json records the same settings), the recency
 * probability per layer compared row by row with the values printed on the authors' figures
 * (a table of expected values with their source in repro_recency.c), the mean maps per
 * configuration and RP against layer as figures.
 * Does not: run the paper's stages (reproduce.c).
 * Tested by: tests/test_reproduce.c (--only recency --quick: rows, figures, reuse).
 */
#ifndef MP_CLI_REPRO_RECENCY_H
#define MP_CLI_REPRO_RECENCY_H

#include <stdint.h>

#include "cli/report.h"   /* MpReport */
#include "sim/simulate.h" /* MpSimConfig */

#define MP_REPRO_RECENCY_MAX 32

typedef struct MpReproRecencyRun {
    int ok, skipped, L;
    int64_t batch;
    double rp[4], rp_se[4];
    double *scores; /* (L,10,10) owned: mean pre-softmax scores */
    double wall_s;
} MpReproRecencyRun;

typedef struct MpReproRecency {
    int n;                                    /* configurations run (the grid's size) */
    MpReproRecencyRun run[MP_REPRO_RECENCY_MAX];
    const char *fig_paths[8];                 /* report-relative paths of the 7 figures, NULL when not drawn */
    double wall_s;
} MpReproRecency;

/* Runs the grid into out/recency/. base: seed and threads; quick: B / 50; batch_scale (> 0)
 * multiplies every configuration's B (reproduce --batch B gives B / 100000). Returns the
 * number of failed configurations (0 = all ran). */
int mp_repro_recency_run(MpReproRecency *rr, const char *out, const MpSimConfig *base, int quick, double batch_scale,
                         int force, int argc, char **argv);
/* Adds the verdict rows and the figures of the runs that succeeded. */
void mp_repro_recency_report(MpReport *rp, const MpReproRecency *rr);
void mp_repro_recency_free(MpReproRecency *rr);

/* Stage `length`: `probe --recency --plot` on the embedded NoPE and RoPE models (causal, packed
 * rows of 128 bytes): NRI, block z and RP of the first S' positions from one run each, and the
 * residue by query position; report rows on RP across lengths and the figures the probe draws. */
typedef struct MpReproLength {
    int ok[2], skipped[2];
    int L, K;
    int lens[24];
    double rp[2][4][24];      /* [model][layer][length] RP per sequence */
    double rp_se[2][4][24];
    double block_z[2][4][24];
    int64_t n;
} MpReproLength;

/* models: the embedded models folder (NULL: the stage fails); n: sequences (0 = 500, quick 100). */
int mp_repro_length_run(MpReproLength *lr, const char *out, const char *models, int64_t n, int quick, int threads,
                        int force);
void mp_repro_length_report(MpReport *rp, const MpReproLength *lr);

#endif
