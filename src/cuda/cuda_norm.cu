/* cuda_norm.cu — RMSNorm and LayerNorm over rows; see cuda_norm.h. */
#include "cuda/cuda_norm.h"

#include "cuda/cuda_dev.cuh" /* mpc_block_sum, MPC_LAUNCHED */

#define NORM_THREADS 256

/* threads per row: a multiple of 32 up to NORM_THREADS, no more than n needs (a q/k norm's head of
 * 128 gets 128) */
static int norm_threads(int n) {
    const int t = (n + 31) / 32 * 32;
    return t < NORM_THREADS ? t : NORM_THREADS;
}

/* The per-row inverse norm: (float)(1 / sqrt(ss / n + eps)), as the CPU rounds it. */
static __device__ __forceinline__ float norm_inv(double ss, int n, double eps) { return (float)(1.0 / sqrt(ss / n + eps)); }

static __global__ void __launch_bounds__(NORM_THREADS) rmsnorm_kernel(float *y, const float *x, const float *w, int n, double eps) {
    __shared__ double sh[32];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    double ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += (double)xr[i] * (double)xr[i];
    const float inv = norm_inv(mpc_block_sum(ss, sh), n, eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) { /* every read of the row is done: y may alias x */
        const float v = xr[i] * inv;
        yr[i] = w ? w[i] * v : v;
    }
}

extern "C" void mp_cuda_rmsnorm(MpCuda *c, float *y, const float *x, const float *w, int64_t rows, int n, double eps) {
    if (rows <= 0 || n <= 0) return;
    rmsnorm_kernel<<<(unsigned)rows, norm_threads(n), 0, c->stream>>>(y, x, w, n, eps);
    MPC_LAUNCHED(c, "rmsnorm");
}

static __global__ void __launch_bounds__(NORM_THREADS) layernorm_kernel(float *y, const float *x, const float *w, const float *b,
                                                                        int n, double eps) {
    __shared__ double sh[32];
    const float *xr = x + (int64_t)blockIdx.x * n;
    float *yr = y + (int64_t)blockIdx.x * n;
    double s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += (double)xr[i];
    const double mean = mpc_block_sum(s, sh) / n;
    double ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) ss += ((double)xr[i] - mean) * ((double)xr[i] - mean);
    const float inv = norm_inv(mpc_block_sum(ss, sh), n, eps), mf = (float)mean;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = (xr[i] - mf) * inv;
        yr[i] = (w ? w[i] * v : v) + (b ? b[i] : 0.0f);
    }
}

extern "C" void mp_cuda_layernorm(MpCuda *c, float *y, const float *x, const float *w, const float *b, int64_t rows, int n,
                                  double eps) {
    if (rows <= 0 || n <= 0) return;
    layernorm_kernel<<<(unsigned)rows, norm_threads(n), 0, c->stream>>>(y, x, w, b, n, eps);
    MPC_LAUNCHED(c, "layernorm");
}
