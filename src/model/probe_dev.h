/* probe_dev.h — the probe's sums on the device that runs the forward pass (--device cuda): the
 * host side of a plugin's accumulator (MpFwdDevAcc, model/fwd_plugin.h).
 *
 * Implements: attaching a device accumulator to an MpProbeAcc (opened on the forward pass's own
 * worker, so its sums are queued on the same stream right after the scores they read; started
 * from the host's sums — zeros, or a resumed checkpoint's — so the sums continue in sequence order,
 * the order of an uninterrupted run), running one sequence with the attention's taps pointed at it
 * (MpFwdTaps.device = 1: the head-sum map, or every head's scores with --per-head, and the
 * probabilities with --probs stay on the device), copying the sums back by name into the host's
 * arrays (at each checkpoint, through MpProbeAcc.dev_sync, and at the end), and detaching.
 * A device accumulator is used only when the forward pass is a device's, one process runs one
 * worker, no statistic but the maps and --probs is on (--recency's triple counts are the host's), and the plugin's accumulator holds
 * every array the host's table has (probe_acc.c's); otherwise the attention hands its maps to the
 * host as before (one copy a layer), with the same sums.
 * Does not: count sequences (the host's n_done), checkpoint (probe_ckpt.c), or merge ranks (an MPI
 * run reduces on the host: each rank's sums cross to rank 0 per sequence anyway).
 * Tested by: tests/test_plugin.c (a host forward pass never attaches; a plugin without the device
 * refuses before), scripts/device_check.sh (probe --device cuda against the CPU's maps), on a GPU.
 */
#ifndef MP_PROBE_DEV_H
#define MP_PROBE_DEV_H

#include <stdint.h>

#include "core/err.h"   /* MpErr */
#include "model/fwd.h"  /* MpFwd */
#include "model/probe.h" /* MpProbeAcc */

/* 1: a's sums now live on f's device (a->dev); 0: they stay on the host (see above); MP_ERR and
 * one line in e when the device accumulator was asked for and failed. */
int mp_probe_dev_attach(MpProbeAcc *a, MpFwd *f, MpErr *e);
/* One sequence of ids [seq] through f into a's device sums (a attached). */
int mp_probe_dev_run(MpFwd *f, MpProbeAcc *a, const int32_t *ids, int seq, MpErr *e);
/* The sums copied into a's host arrays, the device accumulator closed, a detached (a->dev NULL);
 * MP_ERR when the copy failed (the host arrays are then not to be trusted). */
int mp_probe_dev_detach(MpProbeAcc *a, MpErr *e);

#endif
