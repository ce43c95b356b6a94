/* probe_ranks.h — the probe's loop over sequences, on one process or on the N ranks of an MPI job,
 * with the same bits either way (docs/mpi.md).
 *
 * Implements mp_probe_run_ranks: sequence s of [first, n) runs on rank (s - first) mod N. Rank 0
 * walks the sequences in order: its own go straight into the accumulator (the hook, as in a
 * one-process run); every other one arrives from its rank as a one-sequence accumulator and is
 * added with mp_probe_acc_merge, whose 0 + x = x makes the sums bit for bit those of one process,
 * for any N and any thread count (the reduction is in sequence order, the only order there is).
 * One process with threads > 1 and a small model does the same with threads: each runs whole
 * sequences into its own one-sequence accumulator, merged into a in sequence order.
 * A rank other than 0 holds nothing between sequences: rank 0's accumulator is the whole state
 * of the run, so its checkpoints resume with any number of ranks.
 * Traffic: per sequence computed off rank 0, one accumulator's arrays (2·L·S² doubles and the
 * block sums; L·H·S² more with --per-head) to rank 0, overlapped with the next sequence's compute.
 * Does not: read tokens, write files or print (src/job/probe_job.c, through the step callback).
 * Tested by: tests/test_mpi.c (3 ranks against one process, byte for byte; a killed rank, then
 * --resume), tests/test_model_probe.c (one process; merge).
 */
#ifndef MP_PROBE_RANKS_H
#define MP_PROBE_RANKS_H

#include <stdint.h>

#include "core/err.h"     /* MpErr */
#include "model/fwd.h"    /* MpFwd */
#include "model/probe.h"  /* MpProbeAcc */

/* Called on every rank after its part of sequence s (0-based) is done: on rank 0 once s is merged
 * (a->n_done == s + 1: checkpoint, progress), on other ranks once s is computed, before it is
 * sent. A nonzero return
 * with e set stops the run (on rank 0 of N > 1: ends the job with the message). */
/* Below this size of packed weights, a one-process run with threads > 1 runs whole sequences in
 * parallel, one forward pass per thread (the same bits; see mp_probe_run_ranks). */
#define MP_PROBE_SMALL_BYTES ((uint64_t)64 << 20)

typedef int (*MpProbeStepFn)(void *ctx, const MpProbeAcc *a, int64_t s, MpErr *e);

/* What rank 0 spent on the other ranks' sequences (for the cost model of docs/mpi.md). */
typedef struct MpProbeRanksStats {
    int64_t received;   /* sequences received */
    double bytes;       /* their arrays' bytes */
    double wait_s;      /* in receives: waiting for the rank and the transfer itself */
    double merge_s;     /* in mp_probe_acc_merge */
} MpProbeRanksStats;

/* Runs sequences a->n_done .. n-1 of ids [n, seq] through f into a, over the job's ranks (every
 * rank calls it with the same arguments, and rank 0's a->n_done, after a resume, is broadcast first;
 * a one-process job is the plain loop). st (may be NULL)
 * gets rank 0's receive and merge figures. On return rank
 * 0's a holds every sequence; other ranks' a holds their last sequence only. A failing sequence
 * off rank 0 ends the job with its message (the ranks cannot go on without it). */
int mp_probe_run_ranks(MpProbeAcc *a, MpFwd *f, const int32_t *ids, int64_t n, int seq, MpProbeStepFn step, void *ctx,
                       MpProbeRanksStats *st, MpErr *e);

#endif
