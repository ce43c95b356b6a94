/* simulate.h — the paper's parameter-free decoder, by Monte Carlo (paper.md §2.1, §2.3).
 *
 * Legend: B sequences, S positions, D width, L layers. Maps are (L,S,S) row-major doubles,
 * row = query i, column = key j.
 *
 * Each layer, with no weights:  Y = norm(X);  scores = q(Y)·q(Y)ᵀ / scale  (q = RoPE or identity);
 * A = Softmax(Mask(scores));  X ← A·Y + X.  Inputs x = normalize(randn(S,D) + l·randn(1,D)),
 * l = √(α/(1−α)), so distinct rows have inner product ≈ α.
 *
 * Implements: streaming over sequences (memory O(threads·(S·D + L·S²)), independent of B),
 * sums in double; bit-identical results for any thread count: sequence b draws from the Philox
 * stream (seed, b), and partial sums over fixed blocks of sequences are added in block order;
 * with cfg.mpi under mpirun, block k runs on rank k mod N and rank 0 adds the blocks in the same
 * order, so N ranks give the bits of one process too (docs/mpi.md).
 * Does not: draw figures (viz/), write files (cli/simulate.c).
 * Tested by: tests/test_simulate.c (theory at large D, torch reference, RoPE noise, threads).
 */
#ifndef MP_SIMULATE_H
#define MP_SIMULATE_H

#include <stdint.h>

#include "core/err.h"       /* MpErr */
#include "kernels/posmap.h" /* MpPosStats */

typedef enum MpNorm { MP_NORM_L2 = 0, MP_NORM_LAYERNORM = 1 } MpNorm;

typedef struct MpSimConfig {
    int64_t batch;     /* B */
    int seq;           /* S */
    int dim;           /* D (even when rope) */
    int layers;        /* L */
    double alpha;      /* in [0,1) */
    MpNorm norm;
    double scale;      /* score divisor: 1, √D or D */
    int rope;          /* rotate queries and keys (HF rotate-half pairing, positions 0..S−1) */
    double rope_theta; /* 10000 */
    int causal;        /* 0 = bidirectional */
    uint64_t seed;
    int threads;       /* 0 = all available */
    double ln_eps;     /* LayerNorm epsilon, 1e-12 */
    int progress;      /* draw a progress bar on a terminal */
    int mpi;           /* 1: split the blocks among the ranks of an MPI job (every rank calls
                          mp_sim_run; rank 0 gets the result, the same bits as one process) */
} MpSimConfig;

void mp_sim_config_default(MpSimConfig *c);
int mp_sim_config_check(const MpSimConfig *c, MpErr *e);

typedef struct MpSimResult {
    int layers, seq;
    int64_t batch;
    double *scores;    /* (L,S,S) mean pre-softmax score; NaN where masked */
    double *se;        /* (L,S,S) standard error of that mean; NaN where masked */
    double *probs;     /* (L,S,S) mean attention probability; 0 where masked */
    double *diagnorm;  /* (L,S,S) diagonal-mean normalised scores */
    MpPosStats *stats; /* (L) NRI, residue range, residue in noise units */
    double wall_s;
    int mpi_ranks;     /* ranks that shared the work (1 without MPI); on ranks > 0 of a job the
                          maps are NULL: rank 0 holds the result */
} MpSimResult;

int mp_sim_run(MpSimResult *r, const MpSimConfig *c, MpErr *e);
void mp_sim_result_free(MpSimResult *r);

/* The inputs of sequence b: x (S,D). Exposed for the --dump-inputs debug flag and tests. */
void mp_sim_sequence_input(double *x, const MpSimConfig *c, int64_t b);

#endif
