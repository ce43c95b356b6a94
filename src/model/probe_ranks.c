/* probe_ranks.c — see probe_ranks.h. */
#include "model/probe_ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mpi.h"  /* mp_mpi_* */
#include "core/util.h" /* mp_time_now */
#include "model/probe_dev.h"     /* mp_probe_dev_*: the sums on the forward pass's device */

/* One sequence of ids [seq] through f into a: the scores reach a's sums row block by row block,
 * inside the attention's own pass (f->rows_hook; a single pass over each layer's scores). When a
 * adds only each row's head sum (mp_probe_acc_needs_heads) and f planned the reduced map for a's
 * workers (cfg.tap_headsum_workers), the forward pass hands over that sum ([16, S] doubles a block)
 * instead of every head's rows: the same bits. Activations at capture points (cfg.tap_points)
 * reach a through f->capture, set here. s: the sequence's index in the run. */
static int ranks_run(MpFwd *f, MpProbeAcc *a, const int32_t *ids, int seq, int64_t s, MpErr *e) {
    a->seq_index = s; /* its index in the run (the position probe's split and positions) */
    /* the residual stream of one sequence in resid_stride (the deepest layer's o_proj and MLP saved) */
    f->skip_points = a->resid_stride > 1 && s % a->resid_stride ? 1u << MP_FWD_AT_LAYER_OUT : 0u;
    if (a->dev) return mp_probe_dev_run(f, a, ids, seq, e); /* the sums on the forward pass's device */
    const int reduced = !mp_probe_acc_needs_heads(a) && f->cfg.tap_headsum_workers >= a->threads;
    f->rows_hook = (MpFwdRowsHook){reduced ? NULL : mp_probe_acc_rows, mp_probe_acc_layer_done, a, a->threads};
    if (mp_probe_acc_inputs(a) & MP_PROBE_IN_CAPTURE) /* activations (--stats variance) into a: a worker's own part */
        f->capture = mp_probe_acc_capture, f->capture_ctx = a;
    f->rows_headsum = reduced ? mp_probe_acc_rows_headsum : NULL;
    const int rc = mp_fwd_run(f, ids, seq, NULL, NULL, e);
    f->rows_hook = (MpFwdRowsHook){0};
    f->rows_headsum = NULL;
    return rc;
}

/* One process: the loop as it always was. */
static int ranks_one(MpProbeAcc *a, MpFwd *f, const int32_t *ids, int64_t n, int seq, MpProbeStepFn step, void *ctx,
                     MpErr *e) {
    for (int64_t s = a->n_done; s < n; s++) {
        if (ranks_run(f, a, ids + (size_t)s * seq, seq, s, e) != MP_OK)
            return mp_err_prefix(e, "sequence %lld", (long long)s);
        mp_probe_acc_seq_end(a);
        if (step && step(ctx, a, s, e) != MP_OK) return MP_ERR;
    }
    return MP_OK;
}

/* A one-sequence accumulator shaped like a (layers, windows, skip, every statistic a holds), so
 * that mp_probe_acc_merge adds it to a. */
static int ranks_part_init(MpProbeAcc *part, const MpProbeAcc *a, MpErr *e) { return mp_probe_acc_init_like(part, a, 1, e); }

/* Workers of one process (threads > 1, a small model): sequences s0 .. s0+nw-1 at a time, one
 * per thread, each through its own forward pass (f, or a worker of it sharing f's weights:
 * mp_fwd_init_worker; its own activations) into its own one-sequence
 * accumulator; then, in sequence order, each is added to a by mp_probe_acc_merge, as ranks_root
 * adds the other ranks' (0 + x = x: the bits of the plain loop). Forward passes inside the
 * workers run serially (mp_fwd_top_level), so nothing waits on a team per layer. */
static int ranks_threads(MpProbeAcc *a, MpFwd *f, const int32_t *ids, int64_t n, int seq, int nw, MpProbeStepFn step,
                         void *ctx, MpErr *e) {
    MpFwd *fw = calloc((size_t)nw, sizeof *fw);
    MpProbeAcc *part = calloc((size_t)nw, sizeof *part);
    MpErr *pe = calloc((size_t)nw, sizeof *pe);
    int *bad = calloc((size_t)nw, sizeof *bad);
    int rc = fw && part && pe && bad ? MP_OK : mp_err_set(e, "out of memory for %d probe workers", nw);
    int made = 0, fmade = 1; /* accumulators and forward passes set up (each init frees its own on failure) */
    while (rc == MP_OK && made < nw) rc = ranks_part_init(&part[made], a, e) == MP_OK ? (made++, MP_OK) : MP_ERR;
    if (fw) fw[0] = *f; /* worker 0 runs the caller's forward pass (handed back below) */
    while (rc == MP_OK && fmade < nw) rc = mp_fwd_init_worker(&fw[fmade], f, e) == MP_OK ? (fmade++, MP_OK) : MP_ERR;
    for (int64_t s0 = a->n_done; rc == MP_OK && s0 < n; s0 += nw) {
        const int cnt = (int)(n - s0 < nw ? n - s0 : nw);
#pragma omp parallel for num_threads(cnt) schedule(static, 1)
        for (int k = 0; k < cnt; k++) {
            mp_probe_acc_reset(&part[k]);
            bad[k] = ranks_run(&fw[k], &part[k], ids + (size_t)(s0 + k) * seq, seq, s0 + k, &pe[k]) != MP_OK;
            if (!bad[k]) mp_probe_acc_seq_end(&part[k]);
        }
        for (int k = 0; k < cnt && rc == MP_OK; k++) {
            if (bad[k]) {
                *e = pe[k];
                rc = mp_err_prefix(e, "sequence %lld", (long long)(s0 + k));
            } else if (mp_probe_acc_merge(a, &part[k], e) != MP_OK || (step && step(ctx, a, s0 + k, e) != MP_OK))
                rc = MP_ERR;
        }
    }
    if (fw) *f = fw[0];
    for (int k = 1; k < fmade; k++) mp_fwd_free(&fw[k]);
    for (int k = 0; k < made; k++) mp_probe_acc_free(&part[k]);
    free(fw);
    free(part);
    free(pe);
    free(bad);
    return rc;
}

/* Ranks 1..N-1: each of my sequences into a (reset first), then its arrays to rank 0. */
static void ranks_worker(MpProbeAcc *a, MpFwd *f, const int32_t *ids, int64_t first, int64_t n, int seq,
                         MpProbeStepFn step, void *ctx) {
    const int rank = mp_mpi_rank(), size = mp_mpi_size();
    MpErr e;
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    for (int64_t s = first + rank; s < n; s += size) {
        mp_probe_acc_reset(a);
        if (ranks_run(f, a, ids + (size_t)s * seq, seq, s, &e) != MP_OK) {
            fprintf(stderr, "maskpos probe (rank %d): error: sequence %lld: %s\n", rank, (long long)s, e.msg);
            mp_mpi_abort(MP_EXIT_ERROR);
        }
        mp_probe_acc_seq_end(a);
        if (step && step(ctx, a, s, &e) != MP_OK) {
            fprintf(stderr, "maskpos probe (rank %d): error: %s\n", rank, e.msg);
            mp_mpi_abort(MP_EXIT_ERROR);
        }
        const int64_t hd[2] = {s, a->n_done};
        mp_mpi_send_i64(hd, 2, 0);
        const int na = mp_probe_acc_arrays(a, t);
        for (int k = 0; k < na; k++) mp_mpi_send_f64(t[k].p, t[k].n, 0);
    }
}

/* Rank 0 of N > 1: sequences in order, its own through the hook, the others merged. */
static int ranks_root(MpProbeAcc *a, MpFwd *f, const int32_t *ids, int64_t n, int seq, MpProbeStepFn step, void *ctx,
                      MpProbeRanksStats *st, MpErr *e) {
    const int size = mp_mpi_size();
    const int64_t first = a->n_done;
    MpProbeAcc part;
    if (ranks_part_init(&part, a, e) != MP_OK) return MP_ERR;
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int na = mp_probe_acc_arrays(&part, t);
    int rc = MP_OK;
    for (int64_t s = first; s < n && rc == MP_OK; s++) {
        const int owner = (int)((s - first) % size);
        if (owner == 0) {
            if (ranks_run(f, a, ids + (size_t)s * seq, seq, s, e) != MP_OK) {
                rc = mp_err_prefix(e, "sequence %lld", (long long)s);
                break;
            }
            mp_probe_acc_seq_end(a);
        } else {
            int64_t hd[2];
            const double t0 = mp_time_now();
            mp_probe_acc_reset(&part); /* then the received sums of one sequence */
            mp_mpi_recv_i64(hd, 2, owner);
            for (int k = 0; k < na; k++) {
                mp_mpi_recv_f64(t[k].p, t[k].n, owner);
                st->bytes += (double)t[k].n * sizeof(double);
            }
            const double t1 = mp_time_now();
            st->wait_s += t1 - t0;
            st->received++;
            if (hd[0] != s || hd[1] != 1) {
                rc = mp_err_set(e, "rank %d sent sequence %lld (%lld counted) where %lld was due", owner, (long long)hd[0],
                                (long long)hd[1], (long long)s);
                break;
            }
            mp_probe_acc_seq_end(&part);
            if (mp_probe_acc_merge(a, &part, e) != MP_OK) {
                rc = MP_ERR;
                break;
            }
            st->merge_s += mp_time_now() - t1;
        }
        if (step && step(ctx, a, s, e) != MP_OK) rc = MP_ERR;
    }
    mp_probe_acc_free(&part);
    if (rc != MP_OK) { /* the other ranks wait on us: end the job with the message */
        fprintf(stderr, "maskpos probe: error: %s\n", e->msg);
        mp_mpi_abort(MP_EXIT_ERROR);
    }
    return rc;
}

/* Threads for sequence-parallel workers: a's threads when the model is small (its packed weights
 * under MP_PROBE_SMALL_BYTES, so a copy per thread is cheap and a layer's work too small to share
 * well), probe --probs off (its hook writes into a) and at least two sequences left; else 1.
 * Captures (--stats variance) go to each worker's own part (ranks_run). */
static int ranks_workers(const MpProbeAcc *a, const MpFwd *f, int64_t n) {
    uint64_t wbytes = 0, abytes = 0;
    mp_fwd_plan_bytes(f->m, &f->cfg, &wbytes, &abytes);
    if (a->threads < 2 || !f->ops->host_memory || f->probs_hook || wbytes >= MP_PROBE_SMALL_BYTES || n - a->n_done < 2) return 1;
    return a->threads;
}

int mp_probe_run_ranks(MpProbeAcc *a, MpFwd *f, const int32_t *ids, int64_t n, int seq, MpProbeStepFn step, void *ctx,
                       MpProbeRanksStats *st, MpErr *e) {
    MpProbeRanksStats dummy;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    if (mp_mpi_size() < 2) {
        const int nw = ranks_workers(a, f, n);
        if (nw > 1) return ranks_threads(a, f, ids, n, seq, nw, step, ctx, e);
        const int dev = mp_probe_dev_attach(a, f, e); /* a device's forward pass: its sums there too */
        if (dev < 0) return MP_ERR;
        int rc = ranks_one(a, f, ids, n, seq, step, ctx, e);
        MpErr de;
        if (dev && mp_probe_dev_detach(a, &de) != MP_OK && rc == MP_OK) {
            *e = de;
            rc = MP_ERR;
        }
        return rc;
    }
    mp_mpi_bcast(&a->n_done, sizeof a->n_done, 0); /* rank 0's checkpoint decides where all start */
    if (mp_mpi_rank() == 0) return ranks_root(a, f, ids, n, seq, step, ctx, st, e);
    ranks_worker(a, f, ids, a->n_done, n, seq, step, ctx);
    return MP_OK;
}
