/* probe_pos.h — `probe --stats position`: a linear probe of the absolute position from the residual
 * stream (Haviv et al. 2022, arXiv 2203.16634: models without positional encoding still learn
 * position, and a linear probe reads it from the hidden states; without the causal mask such a model
 * is permutation-equivariant and no probe can; docs/metrics.md, "Position probe").
 *
 * Implements, on top of MpProbeAcc (model/probe.h), the row MP_PROBE_STAT_POSITION of its table:
 *   - per probed layer, from the capture point LAYER_OUT (the residual stream after the layer,
 *     model/fwd.h) at the sampled positions i of each sequence (every pos_stride-th position from an
 *     offset that is a hash of the sequence's index), the features z = R·x: R [K, C] a fixed sparse
 *     ±1 matrix, one entry per column (feature hashing: dimension d adds ±x_d to feature
 *     h(d) mod K, h and the sign from a hash of d; K·C work becomes C), or z = x when K = C
 *     (pos_dim 0 or >= C);
 *   - per split of the sequences (sequence s held out for scoring when (s / resid_stride) % 4 == 3, fitted on the
 *     others) the sufficient statistics of a least-squares fit of i on z, in double: the count, Σi,
 *     Σi², Σz [K], Σz·i [K], Σz·zᵀ [K, K] (upper triangle); a sequence's own sums are formed from
 *     0.0 and then added once, so a part merged by MPI ranks or worker threads and the plain loop
 *     add the same bits, and --resume continues them;
 *   - the features and positions of the first MP_PROBE_POS_MAE_ROWS held-out positions (the mean
 *     absolute error needs each prediction, not a sum);
 *   - at the end, in double: the ridge fit on the fitting split (centred, intercept unpenalised,
 *     λ = pos_ridge · tr(C)/K for the centred Gram matrix C: a ridge relative to the features' own
 *     scale, so the scale of the residual stream does not matter), solved by Cholesky; on the
 *     held-out split R² (1 − SSE/SST about the held-out mean), the mean absolute error in positions
 *     with its standard error, and the chance level: the same two for predicting the fitting
 *     split's mean position everywhere; R²'s standard error by the delete-a-group jackknife over the
 *     held-out sequences, from each group's own sums (G more splits of W; the fit held fixed).
 * The target is the 0-based position i itself, unscaled: a ridge's predictions are linear in the
 * target, so scaling it changes nothing reported.
 * Does not: allocate its sums (the table does), write files (src/job/probe_out.c), run the model.
 * Tested by: tests/test_probe_pos.c (a torch forward's hidden states and numpy's ridge in float64,
 * tests/ref/pos_ref.py; a closed form; bidirectional NoPE at chance), tests/test_probe_table.c.
 *
 * Shape legend: L selected layers, S tokens per sequence, C the residual stream's width, K the
 * features (MpProbeAcc.pos_dim), G = mp_probe_pos_groups(K) groups, W = 3 + 2K + K² sums per split, M = MP_PROBE_POS_MAE_ROWS,
 * Q = MP_PROBE_POS_COLS.
 */
#ifndef MP_PROBE_POS_H
#define MP_PROBE_POS_H

#include <stdint.h>

#include "model/probe.h" /* MpProbeAcc */

/* The row's functions (probe_acc.c's table): */
int mp_probe_pos_dims(MpProbeAcc *a, MpErr *e);
int mp_probe_pos_scratch(MpProbeAcc *a);
void mp_probe_pos_off(MpProbeAcc *a);
uint64_t mp_probe_pos_scratch_bytes(const MpProbeAcc *a);
/* The result's solve: w [K] and the Gram matrix [K, K]. */
uint64_t mp_probe_pos_out_bytes(const MpProbeAcc *a);
/* MpFwdCaptureFn's share for layer slot li: x [T, C] at MP_FWD_AT_LAYER_OUT of sequence a->seq_index. */
void mp_probe_pos_capture(MpProbeAcc *a, int li, int point, const float *x, int T, int width);
/* pos_probe.npy [L, Q]: the columns MP_PROBE_POS_* below, per layer slot. */
void mp_probe_pos_out(const MpProbeAcc *a, double *out);

/* The columns of pos_probe.npy (NaN where a split has fewer than 2 positions). */
enum {
    MP_PROBE_POS_R2 = 0,      /* held-out R² = 1 − Σ(i − î)² / Σ(i − mean i)² */
    MP_PROBE_POS_MAE,         /* held-out mean |i − î| in positions (the first M held-out positions) */
    MP_PROBE_POS_MAE_SE,      /* its standard error (those positions as independent draws) */
    MP_PROBE_POS_R2_CHANCE,   /* R² of predicting the fitting split's mean position (≤ 0; ≈ 0) */
    MP_PROBE_POS_MAE_CHANCE,  /* mean |i − that mean| over the same positions as MAE */
    MP_PROBE_POS_R2_FIT,      /* R² on the fitting split itself (in-sample) */
    MP_PROBE_POS_N_FIT,       /* positions fitted */
    MP_PROBE_POS_N_TEST,      /* positions held out (R²) */
    MP_PROBE_POS_N_MAE,       /* of those, in the mean absolute error */
    MP_PROBE_POS_LAMBDA,      /* the λ used (pos_ridge · tr(C) / K) */
    MP_PROBE_POS_R2_SE,       /* held-out R²'s standard error: the delete-a-group jackknife over the held-out
                                 sequences (group (s / 4) % MP_PROBE_POS_GROUPS), the fit held fixed; NaN
                                 below 2 non-empty groups or above MP_PROBE_POS_GROUP_MAX_DIM features */
};

/* The groups of held-out sequences kept for K features: MP_PROBE_POS_GROUPS, 0 above
 * MP_PROBE_POS_GROUP_MAX_DIM (their K² sums would outweigh the rest). */
int mp_probe_pos_groups(int K);

/* The defaults of the options (probe --pos-dim, --pos-stride, --pos-ridge; docs/metrics.md). */
#define MP_PROBE_POS_DIM_DEFAULT 256
#define MP_PROBE_POS_STRIDE_DEFAULT 1
#define MP_PROBE_POS_RIDGE_DEFAULT 1e-3
/* One in MP_PROBE_POS_FOLDS sequences is held out: sequence s when s % FOLDS == FOLDS - 1. */
#define MP_PROBE_POS_FOLDS 4

/* For tests and the reference: dimension d's feature (before mod K: the low 31 bits of
 * splitmix64(d)) and sign (-1 when its top bit is set), the offset of sequence s's sampled
 * positions, and whether s is held out. */
int mp_probe_pos_feature(int d, double *sign);
int mp_probe_pos_offset(int64_t s, int stride);
static inline int mp_probe_pos_held_out(int64_t s) { return s % MP_PROBE_POS_FOLDS == MP_PROBE_POS_FOLDS - 1; }

#endif
