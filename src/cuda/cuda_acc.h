/* cuda_acc.h — the probe's accumulator on the GPU: the sums of model/probe.h (MpProbeAcc) kept in
 * device memory and added to there, in float64 and in a fixed order (no floating-point atomics),
 * so only the accumulated maps ever come back to the host.
 *
 * Implements, per sequence and layer slot, from the layer's pre-softmax scores [H, S, S] (or their
 * head-sum map [S, S], the attention's tap) and its probabilities [H, S, S]:
 *   - sum, sumsq [L, S, S]: Σ_seq of the head sum and of the square of the head mean over the keys
 *     each query observes (the causal mask's and a sliding window's: mp_probe_acc_row_keys), the
 *     head sum in ascending h from 0.0 — probe_row's order and arithmetic, so the same bits as
 *     the CPU's accumulator for the same scores;
 *   - sum_heads, sumsq_heads [L, H, S, S] (per_head): each head's score and its square;
 *   - bsum, bsumsq [L, nb, nb]: the sequence's head-mean map from position skip, diagonal-mean
 *     normalised (mp_posmap_diagnorm: each diagonal summed in ascending i, one thread per
 *     diagonal), averaged over nb x nb blocks (mp_probe_block_add: each block summed in row-major
 *     order, one thread per block), and squared — the same bits as the CPU's;
 *   - bflip [L, F, nb, nb] (F = MP_PROBE_FLIPS): the block means once more for each of F signs
 *     ε_f = ±1, the signs from a hash of the sequence's own block means (mp_probe_flip_bits,
 *     model/probe_flip.h: the host's function, compiled here for the device too) — the CPU's bits;
 *   - rsq, csq [L]: the squared norms of the residue and of the centred map (positions skip..S-1),
 *     each row's sum in ascending j by one thread, the rows' sums in ascending i by one
 *     (probe_acc.c's probe_seq_norms, the same order) — the CPU's bits;
 *   - psum [L, S, S], psum_heads [L, H, S, S], sink, entropy [L, H] (probs): the head sum of the
 *     probabilities, each head's, the mass on key 0 and the row entropies −Σ p ln p over queries
 *     1..S-1 (log in double: CUDA's within an ulp of glibc's, so entropy may differ in the last
 *     bits; the others are the CPU's).
 * The arrays carry MpProbeAcc's names (mp_cuda_acc_arrays), so the host copies them by name into
 * its own table (checkpoints, MPI, the result) and back (--resume: the sums continue from the
 * loaded ones, the order of an uninterrupted run).
 * Does not: count sequences (the host's n_done), recency (the host's, from copied scores), or
 * compute the statistics of the means (the host does, from the sums).
 * Tested by: tests/cuda/test_cuda.c (three sequences into both accumulators, the CPU's
 * MpProbeAcc and this one: every array bit for bit but entropy (1e-12 relative), bflip, rsq and
 * csq among them; causal and not, a window, skip 1, per-head, probs; and one of S = 300 with
 * skip 1, whose blocks hold many entries).
 * Status: compiled only (nvcc 13), never run on a GPU.
 *
 * Shape legend: L layer slots, H heads, S tokens, nb blocks per side, P = S - skip, F = MP_PROBE_FLIPS.
 */
#ifndef MP_CUDA_ACC_H
#define MP_CUDA_ACC_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

#define MP_CUDA_ACC_MAX_LAYERS 256
#define MP_CUDA_ACC_ARRAYS 13

/* What the host's MpProbeAcc was made with. */
typedef struct MpCudaAccDims {
    int L, H, S;
    int causal;
    int skip, nb;                        /* the block test's first position and blocks per side */
    int per_head, probs;
    int window[MP_CUDA_ACC_MAX_LAYERS];  /* [L] the slot's sliding window (< S), 0: none */
} MpCudaAccDims;

typedef struct MpCudaAcc {
    MpCudaAccDims d;
    /* the sums, device memory, MpProbeAcc's layouts; NULL when the option is off */
    double *sum, *sumsq;             /* [L, S, S] */
    double *bsum, *bsumsq;           /* [L, nb, nb] */
    double *sum_heads, *sumsq_heads; /* [L, H, S, S] */
    double *bflip;                   /* [L, F, nb, nb] */
    double *rsq, *csq;               /* [L] */
    double *psum;                    /* [L, S, S] */
    double *psum_heads;              /* [L, H, S, S] */
    double *sink, *entropy;          /* [L, H] */
    /* scratch */
    double *seqmap; /* [S, S] the sequence's head-mean map (NaN where not observed) */
    double *dmean;  /* [2P - 1] its diagonals' means */
    double *rows;   /* [2P] the rows' sums of the squared norms (rsq's, then csq's; first the map's sums) */
    int64_t *rcnt;  /* [P] the rows' counts of finite entries */
    double *hs;     /* [S, S] the head sums when fed raw scores */
    double *pent;   /* [H, S] the row entropies */
} MpCudaAcc;

/* One array: MpProbeAcc's field name, the device array, its length in doubles. */
typedef struct MpCudaAccArray {
    const char *name;
    double *p;
    size_t n;
} MpCudaAccArray;

/* Allocates (zeroed, synchronously) what d calls for on the current device: 0, or -1 and why. */
int mp_cuda_acc_init(MpCudaAcc *a, const MpCudaAccDims *d, char *why, size_t cap);
void mp_cuda_acc_free(MpCudaAcc *a);
/* out [MP_CUDA_ACC_ARRAYS]: the arrays a has; returns how many. */
int mp_cuda_acc_arrays(MpCudaAcc *a, MpCudaAccArray *out);
/* Every sum to zero, queued on c's stream. */
void mp_cuda_acc_reset(MpCuda *c, MpCudaAcc *a);

/* One sequence's layer slot li from its scores s [H, S, S] (row stride S, -inf where masked):
 * per-head sums, the head sum, sum/sumsq, the block residue. */
void mp_cuda_acc_scores(MpCuda *c, MpCudaAcc *a, int li, const float *s);
/* The same from the head-sum map hs [S, S] (row stride S; the observed keys of each row filled):
 * only when !per_head. */
void mp_cuda_acc_headsum(MpCuda *c, MpCudaAcc *a, int li, const double *hs);
/* One sequence's probabilities p [H, S, S] of slot li (only when probs). */
void mp_cuda_acc_probs(MpCuda *c, MpCudaAcc *a, int li, const float *p);

#ifdef __cplusplus
}
#endif

#endif
