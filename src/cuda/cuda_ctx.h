/* cuda_ctx.h — the CUDA plugin's devices and its per-worker context: finding a driver and a device,
 * describing it for meta.json, and MpCuda (one stream, one cuBLASLt handle and its workspace, the
 * first error seen) that every kernel launcher of src/cuda takes.
 *
 * Implements:
 *   - mp_cuda_device_count: devices usable here, or 0 and one line saying why (no driver library,
 *     the driver too old for this runtime, no device, CUDA_VISIBLE_DEVICES hiding them);
 *   - mp_cuda_device_info: name, compute capability, memory, driver, runtime and cuBLASLt versions;
 *   - mp_cuda_open / mp_cuda_close: a context on device `ordinal` (refused, one line, below compute
 *     capability 8.0: bf16 tensor cores);
 *   - the error latch: launchers never stop the process; the first failed CUDA call of a context is
 *     kept (mp_cuda_ok / mp_cuda_err) and reported by the caller at its next synchronisation.
 * Does not: launch kernels (cuda_ew, cuda_norm, cuda_rope, cuda_gemm, cuda_attn, cuda_acc), or
 * decide what a failure means for a run (the ops instance does).
 * Tested by: tests/test_plugin.c (no driver, no device: here), tests/cuda/test_cuda.c (a device).
 *
 * This header is C (the test program includes it); the .cu files are compiled by nvcc as C++.
 */
#ifndef MP_CUDA_CTX_H
#define MP_CUDA_CTX_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "model/fwd_plugin.h" /* MpFwdDeviceInfo */

#ifdef __cplusplus
extern "C" {
#endif

#define MP_CUDA_WORKSPACE (32u << 20) /* bytes of cuBLASLt workspace per context (Hopper wants 32 MiB) */

typedef struct MpCuda {
    int ordinal;          /* the device */
    cudaStream_t stream;  /* every op of this context is queued here, in call order */
    void *lt;             /* cublasLtHandle_t */
    void *ws;             /* [MP_CUDA_WORKSPACE] bytes of device memory for cuBLASLt */
    void *plans;          /* cuda_gemm.cu's cache of cuBLASLt plans, one per shape seen (NULL: none yet) */
    int gemm_ref;         /* 1: every GEMM by the naive kernel (MASKPOS_CUDA_GEMM=ref: the CPU's fmaf order) */
    cudaError_t first;    /* the first failed call (cudaSuccess: none) */
    char what[256];       /* which call, and its error */
} MpCuda;

/* Devices usable here: >= 1, or 0 and why not (one line) in why [cap]. */
int mp_cuda_device_count(char *why, size_t cap);
/* MP_OK (0) and out filled, or -1 and why. */
int mp_cuda_device_info(int ordinal, MpFwdDeviceInfo *out, char *why, size_t cap);

/* A context on device `ordinal`: 0, or -1 and why (one line). c is zeroed first. */
int mp_cuda_open(MpCuda *c, int ordinal, char *why, size_t cap);
/* Releases what mp_cuda_open made (after waiting for its stream); accepts a zeroed c. */
void mp_cuda_close(MpCuda *c);

/* Records rc for `what` when it is the first failure of c; returns 1 when rc is cudaSuccess. */
int mp_cuda_ok(MpCuda *c, cudaError_t rc, const char *what);
/* The latched failure: 0 when none, else -1 and its line in why. Also checks the last launch. */
int mp_cuda_err(MpCuda *c, char *why, size_t cap);
/* Waits for c's stream; then mp_cuda_err. */
int mp_cuda_sync(MpCuda *c, char *why, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
