/* cuda_ew.cu — elementwise kernels and amax; see cuda_ew.h. Each kernel is a grid-stride loop of
 * the CPU's per-element formula (fwd_kernels.c, fwd_backend.c), one thread per element. */
#include "cuda/cuda_ew.h"

#include <string.h>

#include "cuda/cuda_dev.cuh" /* mpc_bf16_round, MPC_FOR, mpc_grid, MPC_LAUNCHED */

#define EW_THREADS 256

/* ================================================================ exact */

static __global__ void bf16_round_kernel(float *x, int64_t ld, int64_t rows, int64_t n) {
    MPC_FOR(k, rows * n) {
        float *p = x + (k / n) * ld + k % n;
        *p = mpc_bf16_round(*p);
    }
}

extern "C" void mp_cuda_bf16_round(MpCuda *c, float *x, int64_t ld, int64_t rows, int64_t n) {
    if (rows <= 0 || n <= 0) return;
    bf16_round_kernel<<<mpc_grid(rows * n, EW_THREADS), EW_THREADS, 0, c->stream>>>(x, ld, rows, n);
    MPC_LAUNCHED(c, "bf16_round");
}

static __global__ void scale_kernel(float *x, int64_t n, float s) {
    MPC_FOR(i, n) x[i] = x[i] * s;
}

extern "C" void mp_cuda_scale(MpCuda *c, float *x, int64_t n, float s) {
    if (n <= 0) return;
    scale_kernel<<<mpc_grid(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(x, n, s);
    MPC_LAUNCHED(c, "scale");
}

static __global__ void add_bias_kernel(float *y, int64_t ld, const float *b, int64_t n, int64_t rows) {
    MPC_FOR(k, rows * n) y[(k / n) * ld + k % n] += b[k % n];
}

extern "C" void mp_cuda_add_bias(MpCuda *c, float *y, int64_t ld, const float *b, int64_t n, int64_t rows) {
    if (rows <= 0 || n <= 0) return;
    add_bias_kernel<<<mpc_grid(rows * n, EW_THREADS), EW_THREADS, 0, c->stream>>>(y, ld, b, n, rows);
    MPC_LAUNCHED(c, "add_bias");
}

static __global__ void add_kernel(float *x, const float *y, int64_t n) {
    MPC_FOR(i, n) x[i] += y[i];
}

extern "C" void mp_cuda_add(MpCuda *c, float *x, const float *y, int64_t n) {
    if (n <= 0) return;
    add_kernel<<<mpc_grid(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(x, y, n);
    MPC_LAUNCHED(c, "add");
}

extern "C" void mp_cuda_copy(MpCuda *c, float *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    mp_cuda_ok(c, cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, c->stream), "copy");
}

extern "C" void mp_cuda_zero(MpCuda *c, float *x, int64_t n) {
    if (n <= 0) return;
    mp_cuda_ok(c, cudaMemsetAsync(x, 0, (size_t)n * sizeof(float), c->stream), "zero");
}

/* ================================================================ libm */

static __global__ void swiglu_kernel(float *out, const float *g, const float *u, int64_t n) {
    MPC_FOR(i, n) {
        const float s = g[i] / (1.0f + expf(-g[i]));
        out[i] = s * u[i];
    }
}

extern "C" void mp_cuda_swiglu(MpCuda *c, float *out, const float *g, const float *u, int64_t n) {
    if (n <= 0) return;
    swiglu_kernel<<<mpc_grid(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(out, g, u, n);
    MPC_LAUNCHED(c, "swiglu");
}

static __global__ void geglu_kernel(float *out, const float *g, const float *u, int64_t n) {
    MPC_FOR(i, n) {
        const float x = g[i], k = 0.7978845608028654f; /* sqrt(2/pi) */
        out[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) * u[i];
    }
}

extern "C" void mp_cuda_geglu(MpCuda *c, float *out, const float *g, const float *u, int64_t n) {
    if (n <= 0) return;
    geglu_kernel<<<mpc_grid(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(out, g, u, n);
    MPC_LAUNCHED(c, "geglu");
}

static __global__ void gelu_kernel(float *out, const float *x, int64_t n) {
    MPC_FOR(i, n) out[i] = (float)(0.5 * (double)x[i] * (1.0 + erf((double)x[i] * 0.70710678118654752440)));
}

extern "C" void mp_cuda_gelu(MpCuda *c, float *out, const float *x, int64_t n) {
    if (n <= 0) return;
    gelu_kernel<<<mpc_grid(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(out, x, n);
    MPC_LAUNCHED(c, "gelu");
}

static __global__ void softcap_kernel(float *x, int64_t n, float cap) {
    MPC_FOR(i, n) x[i] = cap * tanhf(x[i] / cap);
}

extern "C" void mp_cuda_softcap(MpCuda *c, float *x, int64_t n, float cap) {
    if (n <= 0) return;
    softcap_kernel<<<mpc_grid(n, EW_THREADS), EW_THREADS, 0, c->stream>>>(x, n, cap);
    MPC_LAUNCHED(c, "softcap");
}

/* ================================================================ amax */

#define AMAX_PER_LAUNCH 16

typedef struct AmaxBatch {
    const float *x[AMAX_PER_LAUNCH];
    int64_t n[AMAX_PER_LAUNCH];
} AmaxBatch;

/* blockIdx.y: the span; an integer max of |x| bits per block, then one atomicMax (integers: the
 * result does not depend on the order) */
static __global__ void amax_kernel(uint32_t *out, AmaxBatch b) {
    const float *x = b.x[blockIdx.y];
    const int64_t n = b.n[blockIdx.y];
    uint32_t m = 0;
    MPC_FOR(i, n) {
        const uint32_t u = __float_as_uint(x[i]) & 0x7fffffffu;
        m = u > m ? u : m;
    }
    for (int o = 16; o > 0; o /= 2) {
        const uint32_t v = __shfl_down_sync(0xffffffffu, m, o);
        m = v > m ? v : m;
    }
    if ((threadIdx.x & 31) == 0 && m) atomicMax(out + blockIdx.y, m);
}

extern "C" void mp_cuda_amax(MpCuda *c, uint32_t *host_out, uint32_t *out, const MpCudaSpan *spans, int n_spans) {
    if (n_spans <= 0) return;
    mp_cuda_ok(c, cudaMemsetAsync(out, 0, sizeof(uint32_t) * (size_t)n_spans, c->stream), "amax");
    for (int s0 = 0; s0 < n_spans; s0 += AMAX_PER_LAUNCH) {
        AmaxBatch b;
        memset(&b, 0, sizeof b);
        int64_t most = 1;
        const int k = n_spans - s0 < AMAX_PER_LAUNCH ? n_spans - s0 : AMAX_PER_LAUNCH;
        for (int i = 0; i < k; i++) {
            b.x[i] = spans[s0 + i].x;
            b.n[i] = spans[s0 + i].n;
            most = b.n[i] > most ? b.n[i] : most;
        }
        const unsigned gx = mpc_grid(most, EW_THREADS) < 1024 ? mpc_grid(most, EW_THREADS) : 1024;
        amax_kernel<<<dim3(gx, (unsigned)k), EW_THREADS, 0, c->stream>>>(out + s0, b);
        MPC_LAUNCHED(c, "amax");
    }
    mp_cuda_ok(c, cudaMemcpyAsync(host_out, out, sizeof(uint32_t) * (size_t)n_spans, cudaMemcpyDeviceToHost, c->stream), "amax");
}
