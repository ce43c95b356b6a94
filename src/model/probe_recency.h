/* probe_recency.h — `probe --recency`: the recency probability (RP) of a real model's scores, and
 * the statistics as functions of the sequence length, from one run (docs/recency.md).
 *
 * Implements, on top of MpProbeAcc (model/probe.h):
 *   - per sequence, per layer and head, the exact count of triples j < k < i (from the first
 *     position the statistics cover, 1 after a BOS) whose scores satisfy S[i,k] > S[i,j]
 *     (kernels/recency.h), summed per query row in integers, with the squares needed for
 *     standard errors: RP by the later paper's definition, per layer (over heads) and per head;
 *   - RP of the mean maps (per layer, and per head with --per-head);
 *   - length: a causal model's scores for the first S' positions are exactly those of its
 *     S'-token prefix, so the S'×S' corner of every sequence's map is the map of the shorter
 *     sequence. For S' = 16, 32, 64, … below S, and S: NRI of the mean map's corner, the block
 *     test of the corner's residue (block sums accumulated per sequence, as the full map's), RP
 *     of the rows below S' (per sequence and of the mean map);
 *   - the residue against the distance from the sequence start: per query position the rms of
 *     the diagonal-normalised residue over its keys, and in units of the standard errors.
 * Sums are integers or doubles added in a fixed order: any thread count gives the same bits.
 * Does not: print or write files (src/job/probe_len.c, src/job/probe_out.c), allocate its sums (the
 * table does).
 * Tested by: tests/test_recency_probe.c (brute-force triple counts per head from probe_ref.py's
 * per-sequence scores, the prefix identity bit for bit, length statistics at S' = S equal the
 * full run's).
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, K lengths.
 */
#ifndef MP_PROBE_RECENCY_H
#define MP_PROBE_RECENCY_H

#include "core/err.h"    /* MpErr */
#include "model/probe.h" /* MpProbeAcc */

/* The row MP_PROBE_STAT_RECENCY of the accumulator's table (probe_acc.c; turned on with
 * mp_probe_acc_stat_on, after mp_probe_acc_skip): */
/* The lengths S' (nlen, lens, lnb) from S and skip; MP_ERR when S - skip < 3. */
int mp_probe_recency_dims(MpProbeAcc *a, MpErr *e);
/* Its scratch (row counts, the counting's per-worker scratch, a corner and its residue), and its
 * size for the memory estimate. */
int mp_probe_recency_scratch(MpProbeAcc *a);
void mp_probe_recency_off(MpProbeAcc *a);
uint64_t mp_probe_recency_scratch_bytes(const MpProbeAcc *a);
/* Rows [i0, i1) of layer slot li of the sequence's scores [H,S,S] (f32 scores, or f64 scores64
 * when scores is NULL): their triple counts (scratch of `worker`). */
void mp_probe_recency_rows(MpProbeAcc *a, int li, const float *scores, const double *scores64, int i0, int i1, int worker);
/* Layer slot li once every row is counted and a->seqmap holds the sequence's head-mean map (the
 * maps' row comes first in the table): the sums of the counts, the corners' block residues. */
void mp_probe_recency_layer(MpProbeAcc *a, int li);

typedef struct MpProbeRecencyOut {
    int L, H, S, K, first;
    int lens[24];
    double *rp, *rp_se;               /* [L] per sequence, all heads */
    double *rp_heads, *rp_heads_se;   /* [L,H] */
    double *rp_map;                   /* [L] RP of the head-mean map */
    double *rp_map_heads;             /* [L,H] RP of each head's mean map, or NULL */
    double *len_nri, *len_block_z;    /* [L,K] */
    double *len_rp, *len_rp_se;       /* [L,K] per sequence, rows below S' */
    double *len_rp_map;               /* [L,K] of the mean map's rows below S' */
    double *pos_rms, *pos_z;          /* [L,S] residue of query row i: rms, and rms in noise units */
} MpProbeRecencyOut;

/* From the accumulator and the final maps: mean, se [L,S,S] (mp_probe_acc_mean, _se), mean_heads
 * [L,H,S,S] or NULL. MP_ERR when out of memory. */
int mp_probe_recency_results(MpProbeRecencyOut *o, const MpProbeAcc *a, const double *mean, const double *se,
                             const double *mean_heads, MpErr *e);
void mp_probe_recency_out_free(MpProbeRecencyOut *o);

#endif
