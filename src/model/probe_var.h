/* probe_var.h — `probe --stats variance`: the variance of the attention output and of the residual
 * stream by position (Chi et al. 2023, arXiv 2305.13571: in a causal decoder the attention output's
 * variance shrinks with position, since each query averages over more keys; docs/metrics.md,
 * "Variance by position").
 *
 * Implements, on top of MpProbeAcc (model/probe.h), the row MP_PROBE_STAT_VARIANCE of its table:
 *   - per probed layer and position i, from the capture points ATTN_MIX (softmax(scores)·v per head,
 *     before o_proj) and LAYER_OUT (the residual stream after the layer) of model/fwd.h: each
 *     sequence's mean over dimensions of the values, u1, and of their squares, u2, summed over
 *     sequences with their squares and product (5 moments, double, dimensions ascending), per head,
 *     for every head's dimensions together and for the residual stream;
 *   - the variance over sequences and dimensions v_i = mean u2 − (mean u1)², and its standard error
 *     with the sequences as independent draws (the delta method: the sample variance over sequences
 *     of u2 − 2·(mean u1)·u1, over N);
 *   - the log-log slope of v_i against the position (1-based, i + 1: the keys a causal query sees),
 *     least squares over positions i ≥ 1 (0-based; position 0 sees only itself, and is the BOS of
 *     most corpora), with a delete-a-group jackknife standard error over 16 groups of sequences (a
 *     sequence's group is a hash of its own moments, so any order, thread or rank forms the same
 *     groups).
 * The sums are a sequence's own values added in a fixed order: any thread count, MPI and --resume
 * give the same bits (the table merges and checkpoints them).
 * Does not: allocate its sums (the table does), write files (src/job/probe_out.c), run the model.
 * Tested by: tests/test_probe_var.c (a torch forward's variance in float64, tests/ref/var_ref.py;
 * the standard errors and slopes by hand; the forward pass runs the deepest layer through),
 * tests/test_probe_table.c (the row end to end).
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, M = 5 moments,
 * G = 16 groups, J = 6 rows per group.
 */
#ifndef MP_PROBE_VAR_H
#define MP_PROBE_VAR_H

#include <stdint.h>

#include "model/probe.h" /* MpProbeAcc */

/* The row's functions (probe_acc.c's table): */
int mp_probe_var_scratch(MpProbeAcc *a);
void mp_probe_var_off(MpProbeAcc *a);
uint64_t mp_probe_var_scratch_bytes(const MpProbeAcc *a);
/* MpFwdCaptureFn's share for layer slot li: x [T, width] at MP_FWD_AT_ATTN_MIX (width = H·HS) or
 * MP_FWD_AT_LAYER_OUT (width = C). */
void mp_probe_var_capture(MpProbeAcc *a, int li, int point, const float *x, int T, int width);
/* The outputs: var_attn / _se [L, S], var_attn_heads / _se [L, H, S], var_resid / _se [L, S]
 * (standard errors NaN below 2 sequences). */
void mp_probe_var_attn(const MpProbeAcc *a, double *out);
void mp_probe_var_attn_se(const MpProbeAcc *a, double *out);
void mp_probe_var_heads(const MpProbeAcc *a, double *out);
void mp_probe_var_heads_se(const MpProbeAcc *a, double *out);
void mp_probe_var_resid(const MpProbeAcc *a, double *out);
/* The sequences whose residual stream layer slot li read (MpProbeAcc.resid_stride: one in so many). */
double mp_probe_var_resid_n(const MpProbeAcc *a, int li);
void mp_probe_var_resid_se(const MpProbeAcc *a, double *out);

/* The first position (0-based) of the slopes' fit. */
#define MP_PROBE_VAR_FIT_FROM 1
/* slopes [L, 4]: per layer slot the log-log slope of the attention output's variance (all heads)
 * against the position, its jackknife standard error, and the same of the residual stream's (NaN
 * where a variance is not positive, with fewer than 2 positions fitted, or for the standard error
 * with fewer than 2 groups of sequences). scratch [S]. */
void mp_probe_var_slopes(const MpProbeAcc *a, double *slopes, double *scratch);
/* The least-squares slope of log v[i] against log(i + 1) over i in [from, S) (NaN when a v[i] there
 * is not positive or fewer than 2 positions); the fit the slopes use, for tests and theory. */
double mp_probe_var_loglog_slope(const double *v, int S, int from);

#endif
