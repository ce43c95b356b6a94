/* cuda_rope.cu — the RoPE table and qk_prepare; see cuda_rope.h. */
#include "cuda/cuda_rope.h"

#include "cuda/cuda_dev.cuh"  /* MPC_FOR, mpc_grid, MPC_LAUNCHED */
#include "cuda/cuda_norm.h"   /* mp_cuda_rmsnorm: the q/k norms */

#define ROPE_THREADS 256

static __global__ void rope_table_kernel(float *cos_t, float *sin_t, const float *inv_freq, int h, int T, float af) {
    MPC_FOR(k, (int64_t)T * h) {
        const int p = (int)(k / h), i = (int)(k % h);
        const float ang = (float)p * inv_freq[i]; /* HF: an f32 product */
        cos_t[k] = (float)cos((double)ang) * af;
        sin_t[k] = (float)sin((double)ang) * af;
    }
}

extern "C" void mp_cuda_rope_table(MpCuda *c, float *cos, float *sin, const float *inv_freq, int R, int T, double attn) {
    if (R < 2 || T <= 0) return;
    rope_table_kernel<<<mpc_grid((int64_t)T * (R / 2), ROPE_THREADS), ROPE_THREADS, 0, c->stream>>>(cos, sin, inv_freq, R / 2, T,
                                                                                                    (float)attn);
    MPC_LAUNCHED(c, "rope_table");
}

/* Rotates the first R dims of every head of rows [t0, T) of x [T, nh*HS] in place: one thread per
 * pair (i, i + R/2), mp_fwd_rope's arithmetic (each product rounded, then added). */
static __global__ void rope_kernel(float *x, const float *cos_t, const float *sin_t, int t0, int T, int nh, int HS, int R) {
    const int h = R / 2;
    MPC_FOR(k, (int64_t)(T - t0) * nh * h) {
        const int i = (int)(k % h);
        const int64_t th = k / h; /* (t - t0) * nh + head */
        const int t = t0 + (int)(th / nh);
        float *xh = x + (int64_t)t * nh * HS + (th % nh) * HS;
        const float c = cos_t[(int64_t)t * h + i], s = sin_t[(int64_t)t * h + i];
        const float a = xh[i], b = xh[i + h];
        const float a1 = a * c, a2 = -b * s, b1 = b * c, b2 = a * s;
        xh[i] = a1 + a2;
        xh[i + h] = b1 + b2;
    }
}

/* dst [nkv, ldt, HS] rows [t0, T) of each head = src [T, nkv*HS] */
static __global__ void pack_heads_kernel(float *dst, const float *src, int t0, int T, int nkv, int HS, int ldt) {
    MPC_FOR(k, (int64_t)(T - t0) * nkv * HS) {
        const int d = (int)(k % HS);
        const int64_t th = k / HS;
        const int t = t0 + (int)(th / nkv), g = (int)(th % nkv);
        dst[((int64_t)g * ldt + t) * HS + d] = src[(int64_t)t * nkv * HS + (int64_t)g * HS + d];
    }
}

/* q or k rows [t0, T) of nh heads: the norm (per head, or over the whole row), then RoPE */
static void qk_one(MpCuda *c, float *x, const float *norm, const MpCudaQKV *a, int nh) {
    const int64_t rows = a->T - a->t0;
    float *x0 = x + (int64_t)a->t0 * nh * a->HS;
    if (norm && a->norm_whole) mp_cuda_rmsnorm(c, x0, x0, norm, rows, nh * a->HS, a->eps);
    else if (norm) mp_cuda_rmsnorm(c, x0, x0, norm, rows * nh, a->HS, a->eps);
    if (a->cos && a->R >= 2) {
        rope_kernel<<<mpc_grid(rows * nh * (a->R / 2), ROPE_THREADS), ROPE_THREADS, 0, c->stream>>>(x, a->cos, a->sin, a->t0, a->T, nh,
                                                                                                  a->HS, a->R);
        MPC_LAUNCHED(c, "rope");
    }
}

extern "C" void mp_cuda_qk_prepare(MpCuda *c, const MpCudaQKV *a) {
    if (a->T <= a->t0) return;
    qk_one(c, a->q, a->q_norm, a, a->NH);
    qk_one(c, a->k, a->k_norm, a, a->NKV);
    const int64_t n = (int64_t)(a->T - a->t0) * a->NKV * a->HS;
    pack_heads_kernel<<<mpc_grid(n, ROPE_THREADS), ROPE_THREADS, 0, c->stream>>>(a->kh, a->k, a->t0, a->T, a->NKV, a->HS, a->ldt);
    pack_heads_kernel<<<mpc_grid(n, ROPE_THREADS), ROPE_THREADS, 0, c->stream>>>(a->vh, a->v, a->t0, a->T, a->NKV, a->HS, a->ldt);
    MPC_LAUNCHED(c, "qk_prepare: keys and values");
}
