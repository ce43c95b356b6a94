/* cuda_plugin.cu — the entry of build/libmaskpos-cuda.so (make CUDA=1): the MpFwdPlugin that
 * src/model/fwd_plugin.c reads after dlopen — its interface version, its build, its devices
 * (cuda_ctx.cu), its ops instance (cuda_ops.cu) and the probe's accumulator (cuda_accops.cu).
 * Does not: compute (the kernel files do), or print: every refusal is a line for the host to show.
 * Tested by: tests/test_plugin.c (loaded on a machine without a GPU: the no-device line),
 * scripts/device_check.sh (on a GPU).
 */
#include <cuda_runtime_api.h>

#include "cuda/cuda_ctx.h"    /* mp_cuda_device_count, mp_cuda_device_info */
#include "cuda/cuda_ops.h"    /* mp_cuda_fwd_ops, mp_cuda_dev_acc */
#include "model/fwd_plugin.h" /* MpFwdPlugin */

#ifndef MP_CUDA_ARCHS
#define MP_CUDA_ARCHS "?"
#endif
#define MP_STR2(x) #x
#define MP_STR(x) MP_STR2(x)

static const MpFwdPlugin cuda_plugin = {
    MP_FWD_PLUGIN_ABI,
    sizeof(MpFwdPlugin),
    "cuda",
    "CUDA " MP_STR(__CUDACC_VER_MAJOR__) "." MP_STR(__CUDACC_VER_MINOR__) " (nvcc " MP_STR(__CUDACC_VER_MAJOR__) "." MP_STR(
        __CUDACC_VER_MINOR__) "." MP_STR(__CUDACC_VER_BUILD__) "), compute capabilities " MP_CUDA_ARCHS,
    mp_cuda_device_count,
    mp_cuda_device_info,
    &mp_cuda_fwd_ops,
    MP_FWD_OPS_ABI,
    &mp_cuda_dev_acc,
};

extern "C" __attribute__((visibility("default"))) const MpFwdPlugin *maskpos_fwd_plugin(void) { return &cuda_plugin; }
