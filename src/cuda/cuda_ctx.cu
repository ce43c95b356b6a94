/* cuda_ctx.cu — devices and contexts of the CUDA plugin; see cuda_ctx.h. */
#include "cuda/cuda_ctx.h"

#include "cuda/cuda_gemm.h" /* mp_cuda_gemm_forget: the cached plans */

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

/* ================================================================ devices */

extern "C" int mp_cuda_device_count(char *why, size_t cap) {
    /* the driver first: cudart's own answer without one ("driver version is insufficient") misleads */
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!drv) {
        const char *d = dlerror();
        snprintf(why, cap, "no NVIDIA driver: %s", d ? d : "libcuda.so.1 not found");
        why[strcspn(why, "\n")] = 0;
        return 0;
    }
    dlclose(drv);
    int n = 0;
    const cudaError_t rc = cudaGetDeviceCount(&n);
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    char hint[160] = "";
    if (vis) snprintf(hint, sizeof hint, "; CUDA_VISIBLE_DEVICES='%.60s'", vis);
    if (rc != cudaSuccess) {
        snprintf(why, cap, "%s: %s%s", cudaGetErrorName(rc), cudaGetErrorString(rc), hint);
        cudaGetLastError(); /* clear it */
        return 0;
    }
    if (n < 1) snprintf(why, cap, "the driver shows no device%s", hint);
    return n;
}

extern "C" int mp_cuda_device_info(int ordinal, MpFwdDeviceInfo *out, char *why, size_t cap) {
    cudaDeviceProp p;
    cudaError_t rc = cudaGetDeviceProperties(&p, ordinal);
    if (rc != cudaSuccess) {
        snprintf(why, cap, "cuda:%d: %s", ordinal, cudaGetErrorString(rc));
        return -1;
    }
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.127s", p.name);
    out->ordinal = ordinal;
    out->cc_major = p.major;
    out->cc_minor = p.minor;
    out->sms = p.multiProcessorCount;
    out->mem_total = (int64_t)p.totalGlobalMem;
    cudaDriverGetVersion(&out->driver);
    cudaRuntimeGetVersion(&out->runtime);
    out->blas = (int)cublasLtGetVersion();
    int prev = 0;
    size_t fr = 0, tot = 0;
    cudaGetDevice(&prev);
    if (cudaSetDevice(ordinal) == cudaSuccess && cudaMemGetInfo(&fr, &tot) == cudaSuccess) out->mem_free = (int64_t)fr;
    cudaSetDevice(prev);
    cudaGetLastError();
    return 0;
}

/* ================================================================ contexts */

extern "C" int mp_cuda_ok(MpCuda *c, cudaError_t rc, const char *what) {
    if (rc == cudaSuccess) return 1;
    if (c->first == cudaSuccess) {
        c->first = rc;
        snprintf(c->what, sizeof c->what, "%s: %s (%s)", what, cudaGetErrorString(rc), cudaGetErrorName(rc));
    }
    return 0;
}

extern "C" int mp_cuda_err(MpCuda *c, char *why, size_t cap) {
    mp_cuda_ok(c, cudaGetLastError(), "a kernel launch");
    if (c->first == cudaSuccess) return 0;
    snprintf(why, cap, "cuda:%d: %s", c->ordinal, c->what);
    return -1;
}

extern "C" int mp_cuda_sync(MpCuda *c, char *why, size_t cap) {
    mp_cuda_ok(c, cudaStreamSynchronize(c->stream), "waiting for the device");
    return mp_cuda_err(c, why, cap);
}

extern "C" int mp_cuda_open(MpCuda *c, int ordinal, char *why, size_t cap) {
    memset(c, 0, sizeof *c);
    c->ordinal = ordinal;
    cudaDeviceProp p;
    cudaError_t rc = cudaGetDeviceProperties(&p, ordinal);
    if (rc == cudaSuccess && p.major < 8) {
        snprintf(why, cap, "cuda:%d (%s) has compute capability %d.%d; the CUDA backend needs 8.0 or later (bf16 tensor cores)",
                 ordinal, p.name, p.major, p.minor);
        return -1;
    }
    if (rc == cudaSuccess) rc = cudaSetDevice(ordinal);
    if (rc == cudaSuccess) rc = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking);
    if (rc == cudaSuccess) rc = cudaMalloc(&c->ws, MP_CUDA_WORKSPACE);
    if (rc != cudaSuccess) {
        snprintf(why, cap, "cuda:%d: %s", ordinal, cudaGetErrorString(rc));
        mp_cuda_close(c);
        return -1;
    }
    cublasLtHandle_t lt;
    const cublasStatus_t st = cublasLtCreate(&lt);
    if (st != CUBLAS_STATUS_SUCCESS) {
        snprintf(why, cap, "cuda:%d: cuBLASLt: %s", ordinal, cublasLtGetStatusString(st));
        mp_cuda_close(c);
        return -1;
    }
    c->lt = lt;
    const char *g = getenv("MASKPOS_CUDA_GEMM");
    c->gemm_ref = g && !strcmp(g, "ref");
    return 0;
}

extern "C" void mp_cuda_close(MpCuda *c) {
    if (c->stream) cudaStreamSynchronize(c->stream);
    mp_cuda_gemm_forget(c);
    if (c->lt) cublasLtDestroy((cublasLtHandle_t)c->lt);
    if (c->ws) cudaFree(c->ws);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError();
    memset(c, 0, sizeof *c);
}
