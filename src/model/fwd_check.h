/* fwd_check.h — non-finite activations of the forward pass, found per layer and named.
 *
 * Implements: the checks mp_fwd_run and mp_fwd_extend make after every layer, so that finite but
 * huge weights (one q_proj weight of 3e38, a damaged quantised block that still decodes to finite
 * values) end the run with one line naming the layer, the position and the tensor that overflowed
 * instead of NaN maps, -nan logits or samples of a constant id. What is checked, and why it is
 * cheap (fwd.c asks the backend for the reductions, MpFwdOps.amax: a few bytes per layer reach the
 * host, and a tensor is read on the host only when a check fails):
 *   - the layer output x [T, C] (every element: NaN or ±Inf anywhere in the layer reaches it, a
 *     softmax turning Inf into NaN included) — one pass over T·C floats per layer;
 *   - the attention scores, only when they could overflow: max|q| · max|k| · HS · max(1, scale)
 *     against FLT_MAX / 2 (|q·k| cannot exceed HS · max|q| · max|k|); when the bound holds no
 *     score can be non-finite, and -inf from an overflow (which the softmax would silently turn
 *     into a probability of 0) cannot occur. When it fails, every visible score (the causal or
 *     bidirectional region, before the soft-cap and the window) of the layer is checked as it is
 *     made (mp_fwd_check_scores_rows, inside the attention op). The key/value-cache path always
 *     checks its one row;
 *   - the logits [T, V] after the output head.
 * When x is not finite, the layer's buffers still held (q, k, v, the probabilities, the attention
 * output, the MLP's up and activation; host copies from a device) are searched in data-flow order
 * for the first one that is not, and the message names it with its first bad position.
 * Does not: look at weights (mp_model_check_finite does, before the run), or at the activations
 * of the training model (src/train/).
 * Tested by: tests/test_model_fwd.c (test_fwd_overflow_named), tests/test_badinput.c (class
 * "overflow": probe exit 2, logits and generate without -nan).
 */
#ifndef MP_FWD_CHECK_H
#define MP_FWD_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr */

/* What one layer's check has found so far (a member of MpFwd). */
typedef struct MpFwdCheck {
    int scores;       /* 1: this layer's scores are checked as they are made */
    int row, head;    /* the first non-finite visible score (row < 0: none) */
    float qmax, kmax; /* max |q|, max |k| of the layer's rows */
} MpFwdCheck;

/* One layer's buffers, rows [t0, T) of each (row-major, row stride = the width given); the ones
 * the layer does not have are NULL. */
typedef struct MpFwdCheckBufs {
    const char *path;       /* the model, for messages */
    int layer, n_layers;    /* 0-based layer, the model's L */
    const float *x;         /* [T, C] the layer's output */
    const float *q, *k, *v; /* [T, ldq], [T, ldk], [T, ldk] */
    const float *probs;     /* [NH, ldt, ldt] post-softmax, visible j < (causal ? i + 1 : T) */
    const float *ao;        /* [T, ldq] the attention's mix of values */
    const float *up, *gate; /* [T, FF] the MLP's (gate: NULL without one, both NULL for MoE) */
    int C, FF, NH, ldt, causal, gelu;
    int64_t ldq, ldk;
} MpFwdCheckBufs;

/* IEEE bits of +Inf: amax bits at or above it mean a NaN or ±Inf. */
#define MP_FWD_CHECK_NONFINITE 0x7f800000u

/* The largest |x[i]| of x[0, n) as its IEEE bits without the sign: >= 0x7f800000 when one of them
 * is NaN or ±Inf. One pass, vectorisable. */
uint32_t mp_fwd_check_amax_bits(const float *x, size_t n);

/* Before a layer's scores, from max |q| and max |k| of the rows of this run as amax bits
 * (mp_fwd_check_amax_bits, or a backend's amax op) and the score scale: decides whether the scores
 * must be checked (always when cached) and clears the record. */
void mp_fwd_check_scores_plan(MpFwdCheck *c, uint32_t qbits, uint32_t kbits, int HS, float scale, int cached);
/* Head h, rows [i0, i1) of scores sh (row stride ldt) as the kernel made them: records the first
 * (row, head) whose visible entries j < (causal ? i + 1 : T) hold NaN or ±Inf. Thread-safe. */
void mp_fwd_check_scores_rows(MpFwdCheck *c, const float *sh, int ldt, int T, int causal, int h, int i0, int i1);

/* After a layer over rows [t0, T): MP_ERR naming the layer, the position and the tensor when the
 * scores record or (unless scores_only: x not made) x holds a non-finite value. */
int mp_fwd_check_layer(const MpFwdCheck *c, const MpFwdCheckBufs *b, int t0, int T, int scores_only, MpErr *e);
/* Rows [t0, T) of logits [T, V]. */
int mp_fwd_check_logits(const float *logits, int V, int t0, int T, const char *path, MpErr *e);

#endif
