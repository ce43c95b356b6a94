/* probe_dev.c — the probe's sums on the forward pass's device; see probe_dev.h. */
#include "model/probe_dev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/fwd_plugin.h" /* MpFwdDevAcc, mp_fwd_plugin_acc */

/* What an attached MpProbeAcc points at (MpProbeAcc.dev). */
typedef struct ProbeDev {
    const MpFwdDevAcc *ops;
    void *acc;
    const char *device;
} ProbeDev;

/* MpProbeAcc.dev_sync: every array of a's table from the device into a's host arrays. */
static int probe_dev_sync(const MpProbeAcc *a, MpErr *e) {
    const ProbeDev *d = a->dev;
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(a, t);
    char why[512];
    for (int k = 0; k < n; k++)
        if (d->ops->get(d->acc, t[k].name, t[k].p, t[k].n, why, sizeof why) != MP_OK)
            return mp_err_set(e, "--device %s: the probe's sums: %s", d->device, why);
    return MP_OK;
}

/* The device accumulator's dims from a. */
static void probe_dev_dims(MpFwdDevAccDims *d, const MpProbeAcc *a) {
    memset(d, 0, sizeof *d);
    d->L = a->L, d->H = a->H, d->S = a->S, d->causal = a->causal, d->skip = a->skip, d->nb = a->nb;
    d->per_head = a->per_head, d->probs = mp_probe_acc_has(a, MP_PROBE_STAT_PROBS);
    memcpy(d->layer_of, a->layer_of, sizeof d->layer_of);
    memcpy(d->window, a->window, sizeof d->window);
}

int mp_probe_dev_attach(MpProbeAcc *a, MpFwd *f, MpErr *e) {
    const char *env = getenv("MASKPOS_DEVICE_SUMS"); /* "host": the maps cross to the host (a check of the device's sums) */
    /* the device keeps the maps' sums (the block test's bflip, rsq and csq among them) and the
     * probabilities'; any other statistic is the host's: recency, and lengths (npos, bcnt: a probe's
     * sequences all have length S; padded batches are the C API's, which never attaches) */
    const unsigned dev_stats = MP_PROBE_STAT_BIT(MP_PROBE_STAT_MAPS) | MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS);
    if (f->ops->host_memory || (a->stats & ~dev_stats) || a->dev || (env && !strcmp(env, "host"))) return 0;
    const MpFwdDevAcc *ops = mp_fwd_plugin_acc(f->cfg.device);
    if (!ops) return 0;
    MpFwdDevAccDims dims;
    probe_dev_dims(&dims, a);
    char why[512];
    void *acc = ops->open(f->ctx, &dims, why, sizeof why);
    if (!acc) return mp_err_set(e, "--device %s: %s", f->cfg.device ? f->cfg.device : "cuda", why);
    /* the host's sums to start from; an array the device does not keep: the host path */
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(a, t);
    for (int k = 0; k < n; k++)
        if (ops->put(acc, t[k].name, t[k].p, t[k].n, why, sizeof why) != MP_OK) {
            ops->close(acc);
            return 0;
        }
    ProbeDev *d = malloc(sizeof *d);
    if (!d) {
        ops->close(acc);
        return mp_err_set(e, "out of memory");
    }
    *d = (ProbeDev){ops, acc, f->cfg.device ? f->cfg.device : "cuda"};
    a->dev = d;
    a->dev_sync = probe_dev_sync;
    return 1;
}

int mp_probe_dev_run(MpFwd *f, MpProbeAcc *a, const int32_t *ids, int seq, MpErr *e) {
    const ProbeDev *d = a->dev;
    const MpFwdRowsHook rh = f->rows_hook;
    const MpFwdHeadsumFn hs = f->rows_headsum;
    const MpFwdHook ph = f->probs_hook;
    void *pc = f->probs_ctx;
    const int td = f->tap_device;
    /* the head-sum map when the pass planned it and no head's own sums are kept, else every head */
    const int reduced = !a->per_head && f->cfg.tap_headsum_workers >= 1;
    f->rows_hook = (MpFwdRowsHook){reduced ? NULL : d->ops->rows, d->ops->done, d->acc, 1};
    f->rows_headsum = reduced ? d->ops->headsum : NULL;
    if (ph) { /* probe --probs */
        f->probs_hook = d->ops->probs;
        f->probs_ctx = d->acc;
    }
    f->tap_device = 1;
    const int rc = mp_fwd_run(f, ids, seq, NULL, NULL, e);
    f->rows_hook = rh;
    f->rows_headsum = hs;
    f->probs_hook = ph;
    f->probs_ctx = pc;
    f->tap_device = td;
    return rc;
}

int mp_probe_dev_detach(MpProbeAcc *a, MpErr *e) {
    ProbeDev *d = a->dev;
    if (!d) return MP_OK;
    const int rc = probe_dev_sync(a, e);
    d->ops->close(d->acc);
    free(d);
    a->dev = NULL;
    a->dev_sync = NULL;
    return rc;
}
