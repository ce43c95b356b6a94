/* cuda_moe.cu — mixture-of-experts rows on the GPU; see cuda_moe.h. */
#include "cuda/cuda_moe.h"

#include "cuda/cuda_dev.cuh" /* MPC_FOR, mpc_grid, MPC_LAUNCHED */
#include "model/fwd_moe_route.h" /* mp_fwd_moe_route: the CPU's rules, one definition */

#define MOE_THREADS 256

/* mp_fwd_moe_route (model/fwd_moe_route.h) of one row per thread */
static __global__ void moe_route_kernel(float *pp, float *ww, int32_t *ss, int n, int E, int K, int norm_topk) {
    MPC_FOR(t, (int64_t)n) mp_fwd_moe_route(pp + t * E, ww + t * K, ss + t * K, E, K, norm_topk);
}

extern "C" void mp_cuda_moe_route(MpCuda *c, float *p, float *w, int32_t *sel, int n, int E, int KE, int norm_topk) {
    if (n <= 0) return;
    moe_route_kernel<<<mpc_grid(n, 64), 64, 0, c->stream>>>(p, w, sel, n, E, KE, norm_topk);
    MPC_LAUNCHED(c, "moe_route");
}

static __global__ void moe_count_kernel(int32_t *cnt, const int32_t *sel, int64_t m, int E) {
    MPC_FOR(i, m) if (sel[i] >= 0 && sel[i] < E) atomicAdd(cnt + sel[i], 1); /* integers: any order, the same counts */
}

extern "C" void mp_cuda_moe_count(MpCuda *c, int32_t *cnt, int32_t *dcnt, const int32_t *sel, int n, int KE, int E) {
    mp_cuda_ok(c, cudaMemsetAsync(dcnt, 0, sizeof(int32_t) * (size_t)E, c->stream), "moe_count");
    if (n > 0) moe_count_kernel<<<mpc_grid((int64_t)n * KE, MOE_THREADS), MOE_THREADS, 0, c->stream>>>(dcnt, sel, (int64_t)n * KE, E);
    MPC_LAUNCHED(c, "moe_count");
    mp_cuda_ok(c, cudaMemcpyAsync(cnt, dcnt, sizeof(int32_t) * (size_t)E, cudaMemcpyDeviceToHost, c->stream), "moe_count");
    mp_cuda_ok(c, cudaStreamSynchronize(c->stream), "moe_count");
}

/* one thread: expert j's (row, rank) entries in ascending t, then k */
static __global__ void moe_rows_kernel(int32_t *rows, const int32_t *sel, int j, int n, int KE) {
    if (blockIdx.x || threadIdx.x) return;
    int cnt = 0;
    for (int i = 0; i < n * KE; i++)
        if (sel[i] == j) rows[cnt++] = i;
}

static __global__ void moe_gather_kernel(float *xg, const int32_t *rows, const float *x, int cnt, int KE, int C) {
    MPC_FOR(k, (int64_t)cnt * C) xg[k] = x[(int64_t)(rows[k / C] / KE) * C + k % C];
}

extern "C" void mp_cuda_moe_gather(MpCuda *c, float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int n, int KE,
                                   int C, int cnt) {
    moe_rows_kernel<<<1, 32, 0, c->stream>>>(rows, sel, j, n, KE);
    if (cnt > 0) moe_gather_kernel<<<mpc_grid((int64_t)cnt * C, MOE_THREADS), MOE_THREADS, 0, c->stream>>>(xg, rows, x, cnt, KE, C);
    MPC_LAUNCHED(c, "moe_gather");
}

static __global__ void moe_scatter_kernel(float *y, const float *o, const int32_t *rows, const float *w, int cnt, int KE, int C) {
    MPC_FOR(k, (int64_t)cnt * C) {
        const int i = (int)(k / C);
        y[(int64_t)(rows[i] / KE) * C + k % C] += o[k] * w[rows[i]];
    }
}

extern "C" void mp_cuda_moe_scatter(MpCuda *c, float *y, const float *o, const int32_t *rows, const float *w, int cnt, int KE, int C) {
    if (cnt <= 0) return;
    moe_scatter_kernel<<<mpc_grid((int64_t)cnt * C, MOE_THREADS), MOE_THREADS, 0, c->stream>>>(y, o, rows, w, cnt, KE, C);
    MPC_LAUNCHED(c, "moe_scatter");
}

static __global__ void moe_gate_kernel(float *sl, const float *x, const float *gate, int n, int C) {
    MPC_FOR(i, (int64_t)n) {
        float a = 0;
        for (int k = 0; k < C; k++) a += x[i * C + k] * gate[k];
        sl[i] = a;
    }
}

static __global__ void moe_mix_kernel(float *y, const float *sl, const float *o, int n, int C) {
    MPC_FOR(k, (int64_t)n * C) {
        const float g = (float)(1.0 / (1.0 + exp(-(double)sl[k / C])));
        y[k] += g * o[k];
    }
}

extern "C" void mp_cuda_moe_shared_mix(MpCuda *c, float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C) {
    if (n <= 0) return;
    moe_gate_kernel<<<mpc_grid(n, 64), 64, 0, c->stream>>>(sl, x, gate, n, C);
    moe_mix_kernel<<<mpc_grid((int64_t)n * C, MOE_THREADS), MOE_THREADS, 0, c->stream>>>(y, sl, o, n, C);
    MPC_LAUNCHED(c, "moe_shared_mix");
}
