/* cuda_dev.cuh — device helpers shared by the kernel files of src/cuda (CUDA C++ only): bf16 bits
 * as the CPU's mp_fwd_bf16_from_f32 / _to_f32 make them, grid sizes, and the launch check.
 * Does not: declare launchers (each kernel file's header does).
 */
#ifndef MP_CUDA_DEV_CUH
#define MP_CUDA_DEV_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "cuda/cuda_ctx.h" /* MpCuda, mp_cuda_ok */

/* bf16 bits -> f32 (exact) */
static __device__ __forceinline__ float mpc_bf16_to_f32(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

/* f32 -> bf16 bits, round to nearest even, NaN kept a quiet NaN, overflow to inf: the integer
 * recipe of mp_fwd_bf16_from_f32 (fwd_kernels.c), so the same bits */
static __device__ __forceinline__ uint16_t mpc_bf16_from_f32(float x) {
    uint32_t u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static __device__ __forceinline__ float mpc_bf16_round(float x) { return mpc_bf16_to_f32(mpc_bf16_from_f32(x)); }

/* blocks of `threads` for n items, at most 65535·16 (grid-stride loops cover the rest) */
static inline unsigned mpc_grid(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535 * 16) b = 65535 * 16;
    return (unsigned)b;
}

/* After a launch: latch a launch failure in c under `what`. */
#define MPC_LAUNCHED(c, what) mp_cuda_ok((c), cudaGetLastError(), (what))

/* A grid-stride loop over int64 indices i in [0, n). */
#define MPC_FOR(i, n)                                                                              \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* The sum of v over the block (blockDim.x a multiple of 32, <= 1024), in double, in a fixed tree:
 * each warp by shuffles (offsets 16, 8, 4, 2, 1), then warp 0 over the warps' sums; every thread
 * gets it. sh [32] shared scratch. The same bits on every run (no atomics). */
static __device__ __forceinline__ double mpc_block_sum(double v, double *sh) {
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
    const int w = threadIdx.x / 32, nw = blockDim.x / 32;
    __syncthreads(); /* sh may still be read from a previous call */
    if ((threadIdx.x & 31) == 0) sh[w] = v;
    __syncthreads();
    if (w == 0) {
        v = (int)threadIdx.x < nw ? sh[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o);
        if (threadIdx.x == 0) sh[0] = v;
    }
    __syncthreads();
    return sh[0];
}

#endif
