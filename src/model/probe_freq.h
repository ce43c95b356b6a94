/* probe_freq.h — `probe --stats freq`: RoPE frequency usage per layer, head and frequency pair
 * (Barbero et al., ICLR 2025, arXiv 2410.06205: how a head's query and key norm is spread over
 * RoPE's frequency pairs, and which pairs the scores use; docs/metrics.md, "RoPE frequency usage").
 *
 * Implements, on top of MpProbeAcc (model/probe.h), the row MP_PROBE_STAT_FREQ of its table:
 *   - the geometry of the model's heads and the RoPE table of each probed layer in this run
 *     (mp_probe_freq_geometry: the base per layer, gemma3's local and global ones; llama3 and
 *     longrope scaling as the loader built the frequencies; --no-rope, NoPE layers and the pairs
 *     --rope-keep-high leaves unrotated get angle 0);
 *   - from the capture points Q and K (model/fwd.h: after biases, q/k norms and RoPE) of each
 *     probed layer, per query head h and pair p (dims p and p + R/2 of the head: the forward pass's
 *     rotate-half layout, into which the loader turns GGUF's interleaved pairs, so the pair index is
 *     the frequency index in both layouts): the sequence's mean over positions of the norm of the
 *     query's 2-D component, the same of the key's (the key head h reads under GQA), and the mean
 *     over the observed (i, j) of the sampled query rows of |scale · (q_i,p · k_j,p)|, the pair's
 *     contribution to the pre-softmax score; the unrotated dims R..HS-1 (partial rotary) the same,
 *     taken together as one block (column P);
 *   - the sampled query rows: all when T <= MP_PROBE_FREQ_ROWS, else the rows
 *     ⌊(2r + 1)·T / (2·MP_PROBE_FREQ_ROWS)⌋ for r < MP_PROBE_FREQ_ROWS (evenly spaced; no draw, so
 *     the same rows for any seed, thread, rank or order), each with every key its mask observes
 *     (causal, sliding window, the sequence's length); the mean is over the observed pairs of those
 *     rows together;
 *   - sums over sequences of each sequence's means and of their squares (double, a sequence's own
 *     values in a fixed order; heads in parallel write disjoint sums), so the mean over sequences
 *     has a standard error with the sequences as independent draws, and any thread count, MPI and
 *     --resume give the same bits (the table merges and checkpoints them).
 * Does not: allocate its sums (the table does), rotate anything (the forward pass does), write files
 * (src/job/probe_out.c).
 * Tested by: tests/test_probe_freq.c (a torch forward's statistic in float64, tests/ref/freq_ref.py,
 * for every RoPE layout and scaling and --rope-keep-high; a closed form; threads and resume bytes).
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, HS head size, R rotary
 * dims, P = R/2 frequency pairs, Q = P + 1.
 */
#ifndef MP_PROBE_FREQ_H
#define MP_PROBE_FREQ_H

#include <stdint.h>

#include "load/model.h"  /* MpModel */
#include "model/probe.h" /* MpProbeAcc */

/* Query rows sampled per sequence and layer for the contributions (all rows of shorter sequences). */
#define MP_PROBE_FREQ_ROWS 64

/* Before the row is on: the geometry of m's heads, and for each probed layer its table in this run:
 * rope 0 (--no-rope) or a NoPE layer: every angle 0; unrotated: the lowest-frequency pairs left
 * unrotated (the last `unrotated` indices; mp_fwd_rope_unrotated). MP_ERR when out of memory. */
int mp_probe_freq_geometry(MpProbeAcc *a, const MpModel *m, int rope, int unrotated, MpErr *e);
/* The geometry of a into part (mp_probe_acc_init_like: before its statistics are on; no table). */
void mp_probe_freq_like(MpProbeAcc *part, const MpProbeAcc *a);

/* The row's functions (probe_acc.c's table): */
int mp_probe_freq_dims(MpProbeAcc *a, MpErr *e);
int mp_probe_freq_scratch(MpProbeAcc *a);
void mp_probe_freq_off(MpProbeAcc *a);
uint64_t mp_probe_freq_scratch_bytes(const MpProbeAcc *a);
/* MpFwdCaptureFn's share for layer slot li: x [T, H·HS] at MP_FWD_AT_Q, then [T, NKV·HS] at
 * MP_FWD_AT_K (the sequence's sums then added). */
void mp_probe_freq_capture(MpProbeAcc *a, int li, int point, const float *x, int T, int width);
/* The outputs, means over sequences and their standard errors (NaN below 2 sequences):
 * q_norm, k_norm, contrib (+ _se) [L, H, P]; rest (+ _se) [L, H, 3] (the unrotated dims: q norm,
 * k norm, |contribution|; 0 when every dim rotates); table [L, P] (the angles) and base [L]. */
void mp_probe_freq_q_norm(const MpProbeAcc *a, double *out);
void mp_probe_freq_q_norm_se(const MpProbeAcc *a, double *out);
void mp_probe_freq_k_norm(const MpProbeAcc *a, double *out);
void mp_probe_freq_k_norm_se(const MpProbeAcc *a, double *out);
void mp_probe_freq_contrib(const MpProbeAcc *a, double *out);
void mp_probe_freq_contrib_se(const MpProbeAcc *a, double *out);
void mp_probe_freq_rest(const MpProbeAcc *a, double *out);
void mp_probe_freq_rest_se(const MpProbeAcc *a, double *out);
void mp_probe_freq_table(const MpProbeAcc *a, double *out);
void mp_probe_freq_base(const MpProbeAcc *a, double *out);

#endif
