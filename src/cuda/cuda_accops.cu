/* cuda_accops.cu — the probe's accumulator on the device as the plugin hands it to the host
 * (mp_cuda_dev_acc, an MpFwdDevAcc of src/model/fwd_plugin.h): the attention's device taps add
 * each sequence's maps into float64 sums on the GPU (cuda_acc.cu) on the worker's own stream,
 * right after the scores they read; the host copies the sums by name at checkpoints and at the
 * end (get), and back into the device for a resumed run (put).
 * Does not: count sequences or decide when to copy (src/model/probe_dev.c, the host side).
 * Tested by: tests/cuda/test_cuda.c (the sums against the CPU's accumulator), the device check's
 * probe runs (scripts/device_check.sh), on a GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_acc.h" /* MpCudaAcc: the sums and their kernels */
#include "cuda/cuda_ops.h" /* MpFwdCtx, mp_cuda_fwd_use */

/* An accumulator and the worker whose stream feeds it. */
typedef struct DevAcc {
    MpFwdCtx *c;
    MpCudaAcc a;
    int layer_of[256]; /* model layer -> slot, or -1 */
} DevAcc;

static void *devacc_open(struct MpFwdCtx *c, const MpFwdDevAccDims *d, char *why, size_t cap) {
    DevAcc *x = (DevAcc *)calloc(1, sizeof *x);
    if (!x) {
        snprintf(why, cap, "out of memory for a device accumulator");
        return NULL;
    }
    mp_cuda_fwd_use(c);
    x->c = c;
    memcpy(x->layer_of, d->layer_of, sizeof x->layer_of);
    MpCudaAccDims dd;
    memset(&dd, 0, sizeof dd);
    dd.L = d->L, dd.H = d->H, dd.S = d->S, dd.causal = d->causal, dd.skip = d->skip, dd.nb = d->nb, dd.per_head = d->per_head,
    dd.probs = d->probs;
    memcpy(dd.window, d->window, sizeof dd.window);
    if (mp_cuda_acc_init(&x->a, &dd, why, cap) != 0) {
        free(x);
        return NULL;
    }
    return x;
}

static void devacc_close(void *acc) {
    DevAcc *x = (DevAcc *)acc;
    if (!x) return;
    mp_cuda_fwd_use(x->c);
    cudaStreamSynchronize(x->c->cu.stream);
    mp_cuda_acc_free(&x->a);
    free(x);
}

/* the slot of a model layer, or -1 */
static int devacc_slot(const DevAcc *x, int layer) { return layer >= 0 && layer < 256 ? x->layer_of[layer] : -1; }

static void devacc_rows(void *acc, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker) {
    DevAcc *x = (DevAcc *)acc;
    (void)n_heads, (void)T, (void)worker;
    const int li = devacc_slot(x, layer);
    if (li < 0 || i0 != 0 || i1 != x->a.d.S) return; /* the device hands over whole layers only */
    mp_cuda_acc_scores(&x->c->cu, &x->a, li, scores);
}

static void devacc_headsum(void *acc, int layer, const double *hs, int T, int i0, int i1, int worker) {
    DevAcc *x = (DevAcc *)acc;
    (void)T, (void)worker;
    const int li = devacc_slot(x, layer);
    if (li < 0 || i0 != 0 || i1 != x->a.d.S) return;
    mp_cuda_acc_headsum(&x->c->cu, &x->a, li, hs);
}

static void devacc_done(void *acc, int layer) { (void)acc, (void)layer; /* the residue is made with the maps */ }

static void devacc_probs(void *acc, int layer, const float *p, int n_heads, int T) {
    DevAcc *x = (DevAcc *)acc;
    (void)n_heads, (void)T;
    const int li = devacc_slot(x, layer);
    if (li >= 0) mp_cuda_acc_probs(&x->c->cu, &x->a, li, p);
}

/* array `name` of x and its length, or NULL and why */
static double *devacc_array(DevAcc *x, const char *name, size_t n, char *why, size_t cap) {
    MpCudaAccArray t[MP_CUDA_ACC_ARRAYS];
    const int k = mp_cuda_acc_arrays(&x->a, t);
    for (int i = 0; i < k; i++)
        if (!strcmp(t[i].name, name)) {
            if (t[i].n == n) return t[i].p;
            snprintf(why, cap, "device accumulator: '%s' holds %zu values, asked for %zu", name, t[i].n, n);
            return NULL;
        }
    snprintf(why, cap, "device accumulator: no array '%s'", name);
    return NULL;
}

static int devacc_copy(void *acc, const char *name, void *host, size_t n, int to_host, char *why, size_t cap) {
    DevAcc *x = (DevAcc *)acc;
    mp_cuda_fwd_use(x->c);
    double *d = devacc_array(x, name, n, why, cap);
    if (!d) return -1;
    MpCuda *cu = &x->c->cu;
    if (n)
        mp_cuda_ok(cu, to_host ? cudaMemcpyAsync(host, d, n * sizeof(double), cudaMemcpyDeviceToHost, cu->stream)
                               : cudaMemcpyAsync(d, host, n * sizeof(double), cudaMemcpyHostToDevice, cu->stream),
                   to_host ? "accumulator to the host" : "accumulator from the host");
    return mp_cuda_sync(cu, why, cap);
}

static int devacc_get(void *acc, const char *name, double *host, size_t n, char *why, size_t cap) {
    return devacc_copy(acc, name, host, n, 1, why, cap);
}
static int devacc_put(void *acc, const char *name, const double *host, size_t n, char *why, size_t cap) {
    return devacc_copy(acc, name, (void *)host, n, 0, why, cap);
}

extern "C" const MpFwdDevAcc mp_cuda_dev_acc = {devacc_open, devacc_close, devacc_rows, devacc_headsum,
                                                devacc_done, devacc_probs, devacc_get,  devacc_put};
