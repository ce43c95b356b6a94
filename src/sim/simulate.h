/* simulate.h — the paper's parameter-free decoder, by Monte Carlo (paper.md §2.1, §2.3), and the
 * later version's LayerNorm-recency layer (docs/recency.md).
 *
 * Legend: B sequences, S positions, D width, L layers. Maps are (L,S,S) row-major doubles,
 * row = query i, column = key j.
 *
 * Each layer, with no weights:  Y = norm(X);  scores = q(Y)·q(Y)ᵀ / scale  (q = RoPE or identity);
 * A = Softmax(Mask(scores));  X ← A·Y + X.  Inputs x = normalize(randn(S,D) + l·randn(1,D)),
 * l = √(α/(1−α)), so distinct rows have inner product ≈ α.
 *
 * The later version's layer (form MP_SIM_FORM_RECENCY; "LayerNorm Induces Recency Bias in
 * Transformer Decoders"): inputs x = (randn(S,D) + l·randn(1,D)) / √D, not normalised; each layer
 * h = LayerNorm(x) (no affine, eps 1e-12) or h = x (MP_NORM_NONE); scores h·hᵀ / √D, causal mask,
 * softmax A; x ← A·h, plus x when the residual is on. Per layer it also counts, per sequence, the
 * triples j < k < i whose pre-softmax scores satisfy S[i,k] > S[i,j]: the recency probability
 * (kernels/recency.h) with its Monte-Carlo standard error over sequences.
 *
 * Implements: streaming over sequences (memory O(threads·(S·D + L·S²)), independent of B),
 * sums in double; bit-identical results for any thread count: sequence b draws from the Philox
 * stream (seed, b), and partial sums over fixed blocks of sequences are added in block order;
 * with cfg.mpi under mpirun, block k runs on rank k mod N and rank 0 adds the blocks in the same
 * order, so N ranks give the bits of one process too (docs/mpi.md).
 * With cfg.variance, per layer and position also the variance of the attention output
 * o_i = Σ_j a_ij y_j and the closed form σ²·Σ_j a_ij² from the sequence's own weights and values
 * (MpSimResult.var), with standard errors.
 * Does not: draw figures (viz/), write files (cli/cmd_simulate.c).
 * Tested by: tests/test_simulate.c (theory at large D, torch reference, RoPE noise, threads).
 */
#ifndef MP_SIMULATE_H
#define MP_SIMULATE_H

#include <stdint.h>

#include "core/err.h"       /* MpErr */
#include "core/progress.h"  /* MpProgressFn, MP_JOB_STOPPED_MSG */
#include "kernels/posmap.h" /* MpPosStats */

typedef enum MpNorm { MP_NORM_L2 = 0, MP_NORM_LAYERNORM = 1, MP_NORM_NONE = 2 } MpNorm;

/* Which layer and inputs (see above): the paper's (default) or the later version's. */
typedef enum MpSimForm { MP_SIM_FORM_PAPER = 0, MP_SIM_FORM_RECENCY = 1 } MpSimForm;

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
    MpProgressFn progress_fn; /* may be NULL: sequences done / batch, once at 0 and after every block
                                 of 64 (on rank 0); a nonzero return stops a one-process run with
                                 MP_JOB_STOPPED_MSG (ignored under MPI: the ranks cannot stop apart) */
    void *progress_ctx;
    int mpi;           /* 1: split the blocks among the ranks of an MPI job (every rank calls
                          mp_sim_run; rank 0 gets the result, the same bits as one process) */
    MpSimForm form;    /* MP_SIM_FORM_PAPER (default) or MP_SIM_FORM_RECENCY */
    int residual;      /* 1 (default): x ← A·y + x; 0: x ← A·y */
    int variance;      /* 1: also the attention output's variance by position and its closed form
                          (MpSimResult.var); 0 (default): not computed (about +15% time at D = 64) */
} MpSimConfig;

void mp_sim_config_default(MpSimConfig *c);
/* The score divisor a word names for width dim: "1" → 1, "sqrt" → √dim, "d" → dim; -1 otherwise. */
double mp_sim_scale_value(const char *word, int dim);
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
    /* recency form only (NULL otherwise): per layer the triples with S[i,k] > S[i,j] summed over
     * sequences, out of batch·C(S,3); the recency probability and its standard error over
     * sequences (sample sd of the per-sequence share / √B) */
    uint64_t *rp_count; /* (L) */
    uint64_t rp_triples; /* C(S,3) per sequence */
    double *rp;         /* (L) */
    double *rp_se;      /* (L) */
    /* the variance of the attention output by position (docs/metrics.md, "Variance by position"): 5 maps of
     * (L,S) in one block — [0] the variance over sequences and dimensions of o_i = Σ_j a_ij y_j (before the
     * residual); [1] its standard error; [2] the closed form for values independent of the weights,
     * σ²·Σ_j a_ij² (the mean over sequences of Σ_j a_ij² |y_j|² / D: each value's own mean square per
     * dimension as σ²; 1/D for L2 rows); [3] its standard error; [4] the standard error of [0] − [2]
     * (the same sequences: the difference's own); NULL without cfg.variance */
    double *var;
} MpSimResult;

int mp_sim_run(MpSimResult *r, const MpSimConfig *c, MpErr *e);
void mp_sim_result_free(MpSimResult *r);

/* The inputs of sequence b: x (S,D). Exposed for the --dump-inputs debug flag and tests. */
void mp_sim_sequence_input(double *x, const MpSimConfig *c, int64_t b);

#endif
