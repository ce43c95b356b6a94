/* cuda_ops.cu — the CUDA instance of the forward pass's backend interface (MpFwdOps,
 * src/model/fwd_backend.h): every op on device memory, queued on the worker's stream, through the
 * kernels of this folder.
 *
 * Implements, in the order of fwd_backend.h:
 *   - the worker's handle (MpFwdCtx: an MpCuda context on the device the --device string names,
 *     plus the small device and pinned host buffers the ops need) and device storage (cudaMalloc:
 *     256-byte aligned; refused when it would not fit in what the device has free);
 *   - the weights: row-major [O, K] in f32, or bf16 rounded once on the host at upload (the
 *     integer recipe of mp_fwd_bf16_from_f32) — what cuBLASLt reads directly (the "TN" product);
 *     a quantised GGUF reaches here dequantised by the loader;
 *   - matmul (bf16 weights: the input rows converted to bf16 operands first — exact in bf16
 *     compute, whose Linear inputs are bf16 values), norms, the RoPE table, qk_prepare (keys and
 *     values [NKV, ldt, HS]: kv_bytes is ldt·HS floats), the elementwise ops, amax, MoE;
 *   - the attention with its taps: the whole layer at once, then each consumer called once as
 *     the block [0, T), worker 0 — with device pointers when the taps are the device's
 *     (MpFwdTaps.device: a device accumulator, cuda_accops.cu), else after a copy into pinned
 *     host staging (rows: [NH, T, T] floats; the head-sum map: [T, T] doubles);
 *   - the ops that return to the host (to_host, amax, moe_count, the scores check) wait for the
 *     stream; every other op only queues. A failed CUDA call is latched in the context and
 *     reported by synchronize (fwd.c calls it at the end of every run) as one line.
 * Does not: decide the data flow (fwd.c), or keep anything across workers but the weights block
 * (any context of the same device reads it).
 * Tested by: tests/test_backend_ops.c's device instances (every op against mp_fwd_ops_cpu over
 * 238 shapes), tests/cuda/test_cuda.c (the kernels), scripts/device_check.sh (end to end) — on a
 * GPU only (passed on an H100 and an H200, 28 November 2026).
 *
 * Shape legend: T tokens, C hidden, K inner size, O outputs, NH query heads, NKV key/value heads,
 * HS head dim, R rotary dims, E experts, KE chosen experts a row, ldt rows of keys, values, scores.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "cuda/cuda_attn.h"   /* the attention's steps */
#include "cuda/cuda_ctx.h"    /* MpCuda */
#include "cuda/cuda_ew.h"     /* elementwise, amax */
#include "cuda/cuda_gemm.h"   /* products */
#include "cuda/cuda_moe.h"    /* MoE rows */
#include "cuda/cuda_norm.h"   /* norms */
#include "cuda/cuda_ops.h"    /* mp_cuda_fwd_ops, MpFwdCtx */
#include "cuda/cuda_rope.h"   /* RoPE, qk_prepare */

/* ================================================================ context and storage */

static void ops_err(MpErr *e, const char *fmt, const char *a, const char *b) {
    snprintf(e->msg, sizeof e->msg, fmt, a, b);
}

/* The device `device` names: "cuda:N" -> N; "cuda" or NULL -> the local rank of an MPI launch
 * modulo the devices, else 0 (fwd_plugin.c has checked the name and the number already). */
static int ops_ordinal(const char *device) {
    const char *colon = device ? strchr(device, ':') : NULL;
    if (colon) return atoi(colon + 1);
    int n = 0, lr = mp_fwd_plugin_local_rank();
    if (lr > 0 && cudaGetDeviceCount(&n) == cudaSuccess && n > 0) return lr % n;
    cudaGetLastError();
    return 0;
}

static MpFwdCtx *ops_open(const char *device, int kernel, MpErr *e) {
    (void)kernel;
    MpFwdCtx *c = (MpFwdCtx *)calloc(1, sizeof *c);
    if (!c) {
        ops_err(e, "--device %s: %s", device ? device : "cuda", "out of memory for a forward-pass worker");
        return NULL;
    }
    char why[512];
    if (mp_cuda_open(&c->cu, ops_ordinal(device), why, sizeof why) != 0) {
        ops_err(e, "--device %s: %s", device ? device : "cuda", why);
        free(c);
        return NULL;
    }
    cudaError_t rc = cudaMalloc((void **)&c->chk, sizeof(int));
    if (rc == cudaSuccess) rc = cudaMalloc((void **)&c->amax_d, sizeof(uint32_t) * MP_CUDA_OPS_AMAX);
    if (rc == cudaSuccess) rc = cudaMallocHost((void **)&c->amax_h, sizeof(uint32_t) * MP_CUDA_OPS_AMAX);
    if (rc != cudaSuccess) {
        ops_err(e, "--device %s: %s", device ? device : "cuda", cudaGetErrorString(rc));
        mp_cuda_fwd_close(c);
        return NULL;
    }
    return c;
}

extern "C" void mp_cuda_fwd_close(MpFwdCtx *c) {
    if (!c) return;
    if (c->cu.stream) cudaStreamSynchronize(c->cu.stream);
    cudaFree(c->chk);
    cudaFree(c->amax_d);
    cudaFree(c->xb);
    cudaFree(c->moe_d);
    cudaFreeHost(c->amax_h);
    cudaFreeHost(c->stage);
    free(c->wb);
    free(c->moe_h);
    mp_cuda_close(&c->cu);
    free(c);
}

extern "C" void mp_cuda_fwd_use(MpFwdCtx *c) {
    int d = -1;
    if (cudaGetDevice(&d) != cudaSuccess || d != c->cu.ordinal) cudaSetDevice(c->cu.ordinal);
}

/* Device memory, refused (NULL) when more than the device has free: fwd.c then says how much it
 * asked for, in one line. */
static void *ops_alloc(MpFwdCtx *c, size_t bytes) {
    mp_cuda_fwd_use(c);
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) == cudaSuccess && bytes > fr) return NULL;
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 64) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void ops_free(MpFwdCtx *c, void *p) {
    mp_cuda_fwd_use(c);
    if (p) cudaFree(p);
}

static void ops_upload(MpFwdCtx *c, void *dst, const void *src, size_t bytes) {
    mp_cuda_fwd_use(c);
    if (bytes) mp_cuda_ok(&c->cu, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->cu.stream), "upload");
}

static void ops_to_host(MpFwdCtx *c, void *dst, const void *src, size_t bytes) {
    mp_cuda_fwd_use(c);
    if (bytes) mp_cuda_ok(&c->cu, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->cu.stream), "to_host");
    mp_cuda_ok(&c->cu, cudaStreamSynchronize(c->cu.stream), "to_host");
}

static int ops_synchronize(MpFwdCtx *c, MpErr *e) {
    mp_cuda_fwd_use(c);
    char why[512];
    if (mp_cuda_sync(&c->cu, why, sizeof why) == 0) return MP_OK;
    snprintf(e->msg, sizeof e->msg, "%s", why);
    return MP_ERR;
}

/* Pinned host staging of at least `bytes` (grown once to the largest asked: the first run of a
 * shape); NULL when it cannot be had (latched). */
static void *ops_stage(MpFwdCtx *c, size_t bytes) {
    mp_cuda_fwd_use(c);
    if (bytes <= c->stage_cap) return c->stage;
    cudaStreamSynchronize(c->cu.stream);
    cudaFreeHost(c->stage);
    c->stage = NULL;
    c->stage_cap = 0;
    if (!mp_cuda_ok(&c->cu, cudaMallocHost(&c->stage, bytes), "host staging of a tap")) return NULL;
    c->stage_cap = bytes;
    return c->stage;
}

/* ================================================================ weights: row-major */

static size_t ops_weight_plan(MpFwdWeight *w, int kernel) {
    (void)kernel;
    w->layout = 1; /* row-major [O, K] */
    const size_t bytes = (size_t)w->out * (size_t)w->in * (w->dtype == MP_FWD_DT_BF16 ? 2 : 4);
    return (bytes + 63) & ~(size_t)63;
}

/* f32 -> bf16 bits, round to nearest even, NaN kept quiet (mp_fwd_bf16_from_f32's recipe) */
static uint16_t ops_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static void ops_weight_upload(MpFwdCtx *c, MpFwdWeight *w, const float *rows, int64_t r0, int64_t n) {
    mp_cuda_fwd_use(c);
    const size_t m = (size_t)n * (size_t)w->in;
    if (w->dtype != MP_FWD_DT_BF16) {
        ops_upload(c, (float *)w->data + (size_t)r0 * (size_t)w->in, rows, m * sizeof(float));
        return;
    }
    if (m > c->wb_cap) { /* host bf16 staging: one range of rows (bf16: 32 rows at a time) */
        cudaStreamSynchronize(c->cu.stream);
        free(c->wb);
        c->wb_cap = 0;
        if (!(c->wb = (uint16_t *)malloc(m * sizeof *c->wb))) {
            mp_cuda_ok(&c->cu, cudaErrorMemoryAllocation, "host staging of a bf16 weight");
            return;
        }
        c->wb_cap = m;
    } else
        cudaStreamSynchronize(c->cu.stream); /* the previous range's copy has left the staging */
    for (size_t i = 0; i < m; i++) c->wb[i] = ops_bf16(rows[i]);
    ops_upload(c, (uint16_t *)w->data + (size_t)r0 * (size_t)w->in, c->wb, m * sizeof(uint16_t));
}

/* ================================================================ the layer's arithmetic */

/* bf16 operands of x [T, K] (row stride ldx) in c->xb, grown once to the largest asked */
static const uint16_t *ops_bf16_input(MpFwdCtx *c, const float *x, int64_t ldx, int64_t T, int64_t K) {
    mp_cuda_fwd_use(c);
    const size_t m = (size_t)T * (size_t)K;
    if (m > c->xb_cap) {
        cudaStreamSynchronize(c->cu.stream);
        cudaFree(c->xb);
        c->xb = NULL;
        c->xb_cap = 0;
        if (!mp_cuda_ok(&c->cu, cudaMalloc((void **)&c->xb, m * sizeof(uint16_t)), "bf16 operands of a matmul")) return NULL;
        c->xb_cap = m;
    }
    mp_cuda_to_bf16_rows(&c->cu, c->xb, x, ldx, T, K);
    return c->xb;
}

static void ops_matmul(MpFwdCtx *c, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdWeight *w, int64_t T) {
    mp_cuda_fwd_use(c);
    MpCudaGemm g;
    memset(&g, 0, sizeof g);
    g.M = T, g.N = w->out, g.K = w->in, g.b = w->data, g.ldb = w->in, g.b_t = 1, g.c = y, g.ldc = ldy, g.batch = 1, g.alpha = 1.0f;
    if (w->dtype == MP_FWD_DT_BF16) {
        g.type = MP_CUDA_BF16;
        g.a = ops_bf16_input(c, x, ldx, T, w->in);
        g.lda = w->in;
        if (!g.a) return;
    } else {
        g.type = MP_CUDA_F32;
        g.a = x;
        g.lda = ldx;
    }
    mp_cuda_gemm(&c->cu, &g);
}

static void ops_rmsnorm(MpFwdCtx *c, float *y, const float *x, const float *w, int64_t rows, int n, double eps) {
    mp_cuda_fwd_use(c);
    mp_cuda_rmsnorm(&c->cu, y, x, w, rows, n, eps);
}
static void ops_layernorm(MpFwdCtx *c, float *y, const float *x, const float *w, const float *b, int64_t rows, int n, double eps) {
    mp_cuda_fwd_use(c);
    mp_cuda_layernorm(&c->cu, y, x, w, b, rows, n, eps);
}
static void ops_rope_table(MpFwdCtx *c, float *cos, float *sin, const float *inv_freq, int R, int T, double attn) {
    mp_cuda_fwd_use(c);
    mp_cuda_rope_table(&c->cu, cos, sin, inv_freq, R, T, attn);
}

static void ops_qk_prepare(MpFwdCtx *c, const MpFwdQKV *a) {
    mp_cuda_fwd_use(c);
    const MpCudaQKV q = {
        .q = a->q, .k = a->k, .v = a->v, .kh = (float *)a->kp, .vh = a->vh, .q_norm = a->q_norm, .k_norm = a->k_norm,
        .cos = a->cos, .sin = a->sin, .t0 = a->t0, .T = a->T, .ldt = a->ldt, .NH = a->NH, .NKV = a->NKV, .HS = a->HS, .R = a->R,
        .norm_whole = a->norm_whole, .eps = a->eps,
    };
    mp_cuda_qk_prepare(&c->cu, &q);
}

static size_t ops_kv_bytes(int HS, int ldt) { return (size_t)HS * (size_t)ldt * sizeof(float); }
/* the head-sum tap's map: the whole layer, [T, T] doubles, whatever the workers */
static size_t ops_tap_bytes(int NH, int ldt, int workers) {
    (void)NH;
    (void)workers;
    return (size_t)ldt * (size_t)ldt * sizeof(double);
}

/* ================================================================ elementwise */

static void ops_bf16_round(MpFwdCtx *c, float *x, int64_t ld, int64_t rows, int64_t n) { mp_cuda_fwd_use(c); mp_cuda_bf16_round(&c->cu, x, ld, rows, n); }
static void ops_swiglu(MpFwdCtx *c, float *out, const float *g, const float *u, size_t n) { mp_cuda_fwd_use(c); mp_cuda_swiglu(&c->cu, out, g, u, (int64_t)n); }
static void ops_geglu(MpFwdCtx *c, float *out, const float *g, const float *u, size_t n) { mp_cuda_fwd_use(c); mp_cuda_geglu(&c->cu, out, g, u, (int64_t)n); }
static void ops_gelu(MpFwdCtx *c, float *out, const float *x, size_t n) { mp_cuda_fwd_use(c); mp_cuda_gelu(&c->cu, out, x, (int64_t)n); }
static void ops_softcap(MpFwdCtx *c, float *x, size_t n, float cap) { mp_cuda_fwd_use(c); mp_cuda_softcap(&c->cu, x, (int64_t)n, cap); }
static void ops_scale(MpFwdCtx *c, float *x, size_t n, float s) { mp_cuda_fwd_use(c); mp_cuda_scale(&c->cu, x, (int64_t)n, s); }
static void ops_add_bias(MpFwdCtx *c, float *y, int64_t ld, const float *b, int64_t n, int64_t rows) {
    mp_cuda_fwd_use(c);
    mp_cuda_add_bias(&c->cu, y, ld, b, n, rows);
}
static void ops_add(MpFwdCtx *c, float *x, const float *y, size_t n) { mp_cuda_fwd_use(c); mp_cuda_add(&c->cu, x, y, (int64_t)n); }
static void ops_copy(MpFwdCtx *c, float *dst, const float *src, size_t n) { mp_cuda_fwd_use(c); mp_cuda_copy(&c->cu, dst, src, (int64_t)n); }
static void ops_zero(MpFwdCtx *c, float *x, size_t n) { mp_cuda_fwd_use(c); mp_cuda_zero(&c->cu, x, (int64_t)n); }

/* The spans' amax bits into out (host), MP_CUDA_OPS_AMAX at a time, waiting for each batch. */
static void ops_amax(MpFwdCtx *c, uint32_t *out, const MpFwdSpan *t, int n) {
    mp_cuda_fwd_use(c);
    for (int s0 = 0; s0 < n; s0 += MP_CUDA_OPS_AMAX) {
        const int k = n - s0 < MP_CUDA_OPS_AMAX ? n - s0 : MP_CUDA_OPS_AMAX;
        MpCudaSpan sp[MP_CUDA_OPS_AMAX];
        for (int i = 0; i < k; i++) sp[i] = (MpCudaSpan){t[s0 + i].x, (int64_t)t[s0 + i].n};
        mp_cuda_amax(&c->cu, c->amax_h, c->amax_d, sp, k);
        mp_cuda_ok(&c->cu, cudaStreamSynchronize(c->cu.stream), "amax");
        /* a failed device answers "not finite": the run stops at its check, and synchronize names why */
        for (int i = 0; i < k; i++) out[s0 + i] = c->cu.first == cudaSuccess ? c->amax_h[i] : 0x7fc00000u;
    }
}

/* ================================================================ mixture of experts */

static void ops_moe_route(MpFwdCtx *c, float *p, float *w, int32_t *sel, int n, int E, int KE, int norm_topk) {
    mp_cuda_fwd_use(c);
    mp_cuda_moe_route(&c->cu, p, w, sel, n, E, KE, norm_topk);
}

/* cnt [E] (host); kept in the context for the gathers that follow (their sizes) */
static void ops_moe_count(MpFwdCtx *c, int32_t *cnt, const int32_t *sel, int n, int KE, int E) {
    mp_cuda_fwd_use(c);
    if (E > c->moe_cap) {
        cudaFree(c->moe_d);
        free(c->moe_h);
        c->moe_cap = 0;
        c->moe_h = (int32_t *)calloc((size_t)E, sizeof(int32_t));
        if (!c->moe_h || !mp_cuda_ok(&c->cu, cudaMalloc((void **)&c->moe_d, sizeof(int32_t) * (size_t)E), "moe_count")) {
            memset(cnt, 0, sizeof *cnt * (size_t)E);
            return;
        }
        c->moe_cap = E;
    }
    mp_cuda_moe_count(&c->cu, c->moe_h, c->moe_d, sel, n, KE, E);
    memcpy(cnt, c->moe_h, sizeof *cnt * (size_t)E);
}

static void ops_moe_gather(MpFwdCtx *c, float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int n, int KE, int C) {
    mp_cuda_fwd_use(c);
    const int cnt = c->moe_h && j >= 0 && j < c->moe_cap ? c->moe_h[j] : 0;
    mp_cuda_moe_gather(&c->cu, xg, rows, x, sel, j, n, KE, C, cnt);
}

static void ops_moe_scatter(MpFwdCtx *c, float *y, const float *o, const int32_t *rows, const float *w, int cnt, int KE, int C) {
    mp_cuda_fwd_use(c);
    mp_cuda_moe_scatter(&c->cu, y, o, rows, w, cnt, KE, C);
}

static void ops_moe_shared_mix(MpFwdCtx *c, float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C) {
    mp_cuda_fwd_use(c);
    mp_cuda_moe_shared_mix(&c->cu, y, sl, o, x, gate, n, C);
}

/* ================================================================ the instance */

/* the ops that give mp_fwd_ops_cpu's bits (fwd_backend.h: exact by nature, no contraction) */
#define OPS_EXACT                                                                                  \
    (MP_FWD_OP_BIT(MP_FWD_OP_BF16_ROUND) | MP_FWD_OP_BIT(MP_FWD_OP_SCALE) | MP_FWD_OP_BIT(MP_FWD_OP_ADD_BIAS) |              \
     MP_FWD_OP_BIT(MP_FWD_OP_ADD) | MP_FWD_OP_BIT(MP_FWD_OP_COPY) | MP_FWD_OP_BIT(MP_FWD_OP_ZERO) |                          \
     MP_FWD_OP_BIT(MP_FWD_OP_AMAX) | MP_FWD_OP_BIT(MP_FWD_OP_MOE_COUNT) | MP_FWD_OP_BIT(MP_FWD_OP_MOE_GATHER) |             \
     MP_FWD_OP_BIT(MP_FWD_OP_MOE_SCATTER))

static MpFwdOps cuda_ops_make(void) {
    MpFwdOps o;
    memset(&o, 0, sizeof o);
    o.abi = MP_FWD_OPS_ABI, o.name = "cuda", o.host_memory = 0, o.exact = OPS_EXACT;
    o.dtypes = MP_FWD_DT_BIT(MP_FWD_DT_F32) | MP_FWD_DT_BIT(MP_FWD_DT_BF16);
    o.open = ops_open, o.close = mp_cuda_fwd_close, o.alloc = ops_alloc, o.free = ops_free;
    o.upload = ops_upload, o.to_host = ops_to_host, o.synchronize = ops_synchronize;
    o.weight_plan = ops_weight_plan, o.weight_upload = ops_weight_upload;
    o.matmul = ops_matmul, o.rmsnorm = ops_rmsnorm, o.layernorm = ops_layernorm, o.rope_table = ops_rope_table;
    o.qk_prepare = ops_qk_prepare, o.attention = mp_cuda_fwd_attention, o.kv_bytes = ops_kv_bytes, o.tap_bytes = ops_tap_bytes;
    o.bf16_round = ops_bf16_round, o.swiglu = ops_swiglu, o.geglu = ops_geglu, o.gelu = ops_gelu, o.softcap = ops_softcap;
    o.scale = ops_scale, o.add_bias = ops_add_bias, o.add = ops_add, o.copy = ops_copy, o.zero = ops_zero, o.amax = ops_amax;
    o.moe_route = ops_moe_route, o.moe_count = ops_moe_count, o.moe_gather = ops_moe_gather, o.moe_scatter = ops_moe_scatter;
    o.moe_shared_mix = ops_moe_shared_mix;
    return o;
}

extern "C" const MpFwdOps mp_cuda_fwd_ops = cuda_ops_make();

/* ================================================================ the attention and its taps */

/* Rows [0, T) of what a host consumer reads: the device buffer copied into staging (waited for),
 * or NULL (latched) when the staging cannot be had. */
static const void *ops_tap_copy(MpFwdCtx *c, const void *src, size_t bytes) {
    mp_cuda_fwd_use(c);
    void *h = ops_stage(c, bytes);
    if (!h) return NULL;
    ops_to_host(c, h, src, bytes);
    return c->cu.first == cudaSuccess ? h : NULL;
}

/* The row taps of one layer (scores made, not yet softmaxed): the head-sum map and/or every head's
 * rows, then done(). */
static void ops_row_taps(MpFwdCtx *c, const MpFwdAttn *a, const MpCudaAttn *ca, const MpFwdTaps *tp) {
    mp_cuda_fwd_use(c);
    const MpFwdRowsHook *rh = &tp->rows_hook;
    const size_t T = (size_t)a->T;
    if (tp->headsum) {
        mp_cuda_attn_headsum(&c->cu, (double *)a->tap_hs, ca);
        const double *hs = tp->device ? (const double *)a->tap_hs : (const double *)ops_tap_copy(c, a->tap_hs, T * T * sizeof(double));
        if (hs) tp->headsum(rh->ctx, a->layer, hs, a->T, 0, a->T, 0);
    }
    if (rh->rows) { /* a non-cached run: ldt == T, so the scores are [NH, T, T] as they lie */
        const float *s = tp->device ? a->s : (const float *)ops_tap_copy(c, a->s, (size_t)a->NH * T * T * sizeof(float));
        if (s) rh->rows(rh->ctx, a->layer, s, a->NH, a->T, 0, a->T, 0);
    }
    if (rh->done) rh->done(rh->ctx, a->layer);
}

/* The whole-layer hook of the scores or the probabilities. */
static void ops_layer_tap(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp, MpFwdHook fn, void *ctx) {
    mp_cuda_fwd_use(c);
    const float *s = tp->device ? a->s : (const float *)ops_tap_copy(c, a->s, (size_t)a->NH * a->T * a->T * sizeof(float));
    if (s) fn(ctx, a->layer, s, a->NH, a->T);
}

extern "C" void mp_cuda_fwd_attention(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp) {
    mp_cuda_fwd_use(c);
    const MpCudaAttn ca = {
        .o = a->o, .s = a->s, .q = a->q, .kh = (const float *)a->kp, .vh = a->vh, .t0 = a->t0, .T = a->T, .ldt = a->ldt, .NH = a->NH,
        .NKV = a->NKV, .HS = a->HS, .causal = a->causal, .window = a->window, .scale = a->scale, .softcap = a->softcap,
    };
    const int check = a->chk && a->chk->scores;
    if (check) {
        static const int none = INT_MAX;
        mp_cuda_ok(&c->cu, cudaMemcpyAsync(c->chk, &none, sizeof none, cudaMemcpyHostToDevice, c->cu.stream), "the scores check");
    }
    mp_cuda_attn_scores(&c->cu, &ca, check ? c->chk : NULL);
    if (check) {
        int first = INT_MAX;
        ops_to_host(c, &first, c->chk, sizeof first);
        if (first != INT_MAX && c->cu.first == cudaSuccess) {
            a->chk->row = first / a->NH;
            a->chk->head = first % a->NH;
        }
    }
    const int taps = tp && !a->cached;
    if (taps && (tp->rows_hook.rows || tp->headsum)) ops_row_taps(c, a, &ca, tp);
    else if (taps && tp->scores) ops_layer_tap(c, a, tp, tp->scores, tp->scores_ctx);
    if (a->scores_only) return;
    mp_cuda_attn_softmax(&c->cu, &ca);
    mp_cuda_attn_mix(&c->cu, &ca);
    if (taps && tp->probs) ops_layer_tap(c, a, tp, tp->probs, tp->probs_ctx);
}
