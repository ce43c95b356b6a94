/* recency.h — two stages of `reproduce` beyond the paper (docs/recency.md):
 *
 *   recency (recency.c): the later version's grid ("LayerNorm Induces Recency Bias in Transformer
 *     Decoders", Kim et al.): d ∈ {16, 64, 256, 1024} × α × norm × residual at S = 10, 25
 *     configurations, each one simulation into DIR/recency/<name>/; the recency probability per
 *     layer compared row by row with the values the authors' figures print (expect.c); the mean
 *     maps per configuration and RP against layer as figures;
 *   length (length.c): `probe --recency --plot` on the embedded NoPE and RoPE models (packed rows
 *     of 128 bytes) and on the pretrained stories260K (its own stories of 512 tokens, the corpus of
 *     the stories stage): NRI, block z and RP of the first S' positions from one run each, and the
 *     residue by query position; rows on RP across lengths and the figures the probe draws.
 * Tested by: tests/test_reproduce.c (--only recency --quick: rows, figures, reuse; --only length).
 */
#ifndef MP_REPRO_RECENCY_H
#define MP_REPRO_RECENCY_H

#include <stdint.h>

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

void mp_repro_recency_free(MpReproRecency *rr);

#define MP_REPRO_LENGTH_MODELS 3 /* the embedded NoPE and RoPE models, stories260K */
#define MP_REPRO_LENGTH_LAYERS 8
#define MP_REPRO_LENGTH_LENS 24

typedef struct MpReproLength {
    int ok[MP_REPRO_LENGTH_MODELS], skipped[MP_REPRO_LENGTH_MODELS];
    int L[MP_REPRO_LENGTH_MODELS], K[MP_REPRO_LENGTH_MODELS];
    int lens[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LENS];
    /* [model][layer][length]: RP per sequence, its standard error, the residue's block z */
    double rp[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS];
    double rp_se[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS];
    double block_z[MP_REPRO_LENGTH_MODELS][MP_REPRO_LENGTH_LAYERS][MP_REPRO_LENGTH_LENS];
    int64_t n[MP_REPRO_LENGTH_MODELS];
    int seq[MP_REPRO_LENGTH_MODELS];
} MpReproLength;

#endif
