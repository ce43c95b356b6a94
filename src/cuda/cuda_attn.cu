/* cuda_attn.cu — one layer's attention on the GPU; see cuda_attn.h. */
#include "cuda/cuda_attn.h"

#include <math.h>
#include <string.h>

#include "cuda/cuda_dev.cuh"  /* MPC_FOR, mpc_grid, mpc_block_sum, MPC_LAUNCHED */
#include "cuda/cuda_gemm.h"   /* mp_cuda_gemm */

#define ATTN_THREADS 256

/* ================================================================ scores */

/* The GEMMs of the scores (mix: 0) or of p · v (mix: 1): query heads h = g·rep + r; one batched
 * product per r over the kv heads g, so every batch has a stride. */
static int attn_gemms(MpCuda *c, const MpCudaAttn *a, int mix) {
    const int rep = a->NH / a->NKV, rows = a->T - a->t0;
    const int64_t ldq = (int64_t)a->NH * a->HS, SS = (int64_t)a->ldt * a->ldt;
    for (int r = 0; r < rep; r++) {
        MpCudaGemm g;
        memset(&g, 0, sizeof g);
        g.batch = a->NKV;
        g.type = MP_CUDA_F32;
        if (!mix) { /* s_h [rows, T] = q_h [rows, HS] · k_g [T, HS]ᵀ · scale */
            g.M = rows, g.N = a->T, g.K = a->HS, g.alpha = a->scale, g.b_t = 1;
            g.a = a->q + (int64_t)a->t0 * ldq + (int64_t)r * a->HS, g.lda = ldq, g.stride_a = (int64_t)rep * a->HS;
            g.b = a->kh, g.ldb = a->HS, g.stride_b = (int64_t)a->ldt * a->HS;
            g.c = a->s + (int64_t)r * SS + (int64_t)a->t0 * a->ldt, g.ldc = a->ldt, g.stride_c = (int64_t)rep * SS;
        } else { /* o_h [rows, HS] = p_h [rows, T] · v_g [T, HS] */
            g.M = rows, g.N = a->HS, g.K = a->T, g.alpha = 1.0f, g.b_t = 0;
            g.a = a->s + (int64_t)r * SS + (int64_t)a->t0 * a->ldt, g.lda = a->ldt, g.stride_a = (int64_t)rep * SS;
            g.b = a->vh, g.ldb = a->HS, g.stride_b = (int64_t)a->ldt * a->HS;
            g.c = a->o + (int64_t)a->t0 * ldq + (int64_t)r * a->HS, g.ldc = ldq, g.stride_c = (int64_t)rep * a->HS;
        }
        if (mp_cuda_gemm(c, &g) != 0) return -1;
    }
    return 0;
}

/* Per entry of rows [t0, T), keys [0, T): the check, the soft-cap and the masks. */
static __global__ void mask_kernel(float *s, int *check, int t0, int T, int ldt, int NH, int causal, int W, float cap) {
    const int64_t rows = T - t0;
    MPC_FOR(k, (int64_t)NH * rows * T) {
        const int j = (int)(k % T);
        const int64_t hr = k / T;
        const int i = t0 + (int)(hr % rows), h = (int)(hr / rows);
        float *p = s + ((int64_t)h * ldt + i) * ldt + j;
        if (j >= (causal ? i + 1 : T)) {
            *p = -INFINITY;
            continue;
        }
        float v = *p;
        if (check && !isfinite(v)) atomicMin(check, i * NH + h);
        if (cap > 0) v = cap * tanhf(v / cap);
        if (W > 0 && (i - j >= W || (!causal && j - i >= W))) v = -INFINITY;
        *p = v;
    }
}

extern "C" int mp_cuda_attn_scores(MpCuda *c, const MpCudaAttn *a, int *check) {
    if (a->T <= a->t0) return 0;
    if (attn_gemms(c, a, 0) != 0) return -1;
    const int64_t n = (int64_t)a->NH * (a->T - a->t0) * a->T;
    mask_kernel<<<mpc_grid(n, ATTN_THREADS), ATTN_THREADS, 0, c->stream>>>(a->s, check, a->t0, a->T, a->ldt, a->NH, a->causal,
                                                                          a->window, a->softcap);
    return MPC_LAUNCHED(c, "attention: mask") ? 0 : -1;
}

/* ================================================================ the head-sum map */

static __global__ void headsum_kernel(double *hs, const float *s, int t0, int T, int ldt, int NH, int causal) {
    MPC_FOR(k, (int64_t)(T - t0) * T) {
        const int i = t0 + (int)(k / T), j = (int)(k % T);
        if (j >= (causal ? i + 1 : T)) continue;
        double acc = 0.0;
        for (int h = 0; h < NH; h++) acc += (double)s[((int64_t)h * ldt + i) * ldt + j];
        hs[(int64_t)i * T + j] = acc;
    }
}

extern "C" void mp_cuda_attn_headsum(MpCuda *c, double *hs, const MpCudaAttn *a) {
    if (a->T <= a->t0) return;
    headsum_kernel<<<mpc_grid((int64_t)(a->T - a->t0) * a->T, ATTN_THREADS), ATTN_THREADS, 0, c->stream>>>(hs, a->s, a->t0, a->T, a->ldt,
                                                                                                         a->NH, a->causal);
    MPC_LAUNCHED(c, "attention: head sums");
}

/* ================================================================ softmax */

/* One block per row (h, i): the maximum, e^(x - max) and their sum (double, fixed tree), each
 * divided by the sum (as f32); keys [n, T) get 0. */
static __global__ void __launch_bounds__(ATTN_THREADS) softmax_kernel(float *s, int t0, int T, int ldt, int causal) {
    __shared__ double sh[32];
    __shared__ float shm[32];
    const int rows = T - t0;
    const int h = blockIdx.x / rows, i = t0 + blockIdx.x % rows, n = causal ? i + 1 : T;
    float *row = s + ((int64_t)h * ldt + i) * ldt;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, row[j]);
    for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_down_sync(0xffffffffu, mx, o));
    if ((threadIdx.x & 31) == 0) shm[threadIdx.x / 32] = mx;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)blockDim.x / 32; w++) mx = fmaxf(mx, shm[w]);
        shm[0] = mx;
    }
    __syncthreads();
    mx = shm[0];
    double sum = 0;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        const float e = expf(row[j] - mx);
        row[j] = e;
        sum += (double)e;
    }
    const float tot = (float)mpc_block_sum(sum, sh);
    for (int j = threadIdx.x; j < n; j += blockDim.x) row[j] = row[j] / tot;
    for (int j = n + threadIdx.x; j < T; j += blockDim.x) row[j] = 0.0f;
}

extern "C" void mp_cuda_attn_softmax(MpCuda *c, const MpCudaAttn *a) {
    if (a->T <= a->t0) return;
    const int64_t blocks = (int64_t)a->NH * (a->T - a->t0);
    const int th = a->T < ATTN_THREADS ? (a->T + 31) / 32 * 32 : ATTN_THREADS;
    softmax_kernel<<<(unsigned)blocks, th, 0, c->stream>>>(a->s, a->t0, a->T, a->ldt, a->causal);
    MPC_LAUNCHED(c, "attention: softmax");
}

/* ================================================================ p · v */

extern "C" int mp_cuda_attn_mix(MpCuda *c, const MpCudaAttn *a) {
    if (a->T <= a->t0) return 0;
    return attn_gemms(c, a, 1);
}
