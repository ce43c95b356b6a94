/* test_backend_util.h — the counted test instance of the forward pass's backend interface
 * (src/model/fwd_backend.h), shared by tests/test_model_fwd.c and tests/test_backend_ops.c
 * (header-only, static functions).
 *
 * Provides: bk_counted, made by bk_counted_make(): cpu-plain's ops, every call of every op counted
 * in bk_calls (indexed by MpFwdOpId, then BK_UPLOAD ... BK_SYNC for the storage ops), and its
 * memory declared not host memory (host_memory 0), so that the forward pass takes a device's
 * paths — the embedding rows uploaded, captures and logits copied out through to_host, the
 * checks' diagnosis from host copies — on memory that is host memory in fact: every result is
 * cpu-plain's. bk_no_alloc: an allocator that always fails.
 */
#ifndef MP_TEST_BACKEND_UTIL_H
#define MP_TEST_BACKEND_UTIL_H

#include <string.h>

#include "model/fwd_backend.h" /* MpFwdOps, mp_fwd_ops_cpu_plain */

enum { BK_UPLOAD = MP_FWD_OP_COUNT, BK_TO_HOST, BK_ALLOC, BK_OPEN, BK_SYNC, BK_WUPLOAD, BK_N };
static long bk_calls[BK_N];
static MpFwdOps bk_counted;
#define BK_COUNT_CALL(k) __atomic_fetch_add(&bk_calls[k], 1, __ATOMIC_RELAXED)
#define BK_P (&mp_fwd_ops_cpu_plain)

/* ---- storage */
static MpFwdCtx *bk_open(const char *device, int kernel, MpErr *e) { return BK_COUNT_CALL(BK_OPEN), BK_P->open(device, kernel, e); }
static void *bk_alloc(MpFwdCtx *c, size_t bytes) { return BK_COUNT_CALL(BK_ALLOC), BK_P->alloc(c, bytes); }
static void bk_upload(MpFwdCtx *c, void *d, const void *s, size_t n) { BK_COUNT_CALL(BK_UPLOAD), BK_P->upload(c, d, s, n); }
static void bk_to_host(MpFwdCtx *c, void *d, const void *s, size_t n) { BK_COUNT_CALL(BK_TO_HOST), BK_P->to_host(c, d, s, n); }
static int bk_sync(MpFwdCtx *c, MpErr *e) { return BK_COUNT_CALL(BK_SYNC), BK_P->synchronize(c, e); }
static void bk_wupload(MpFwdCtx *c, MpFwdWeight *w, const float *rows, int64_t r0, int64_t n) {
    BK_COUNT_CALL(BK_WUPLOAD), BK_P->weight_upload(c, w, rows, r0, n);
}
static void *bk_no_alloc(MpFwdCtx *c, size_t bytes) __attribute__((unused));
static void *bk_no_alloc(MpFwdCtx *c, size_t bytes) { return (void)c, (void)bytes, NULL; }

/* ---- the layer's ops */
static void bk_matmul(MpFwdCtx *c, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdWeight *w, int64_t T) {
    BK_COUNT_CALL(MP_FWD_OP_MATMUL), BK_P->matmul(c, y, ldy, x, ldx, w, T);
}
static void bk_rmsnorm(MpFwdCtx *c, float *y, const float *x, const float *w, int64_t rows, int n, double eps) {
    BK_COUNT_CALL(MP_FWD_OP_RMSNORM), BK_P->rmsnorm(c, y, x, w, rows, n, eps);
}
static void bk_layernorm(MpFwdCtx *c, float *y, const float *x, const float *w, const float *b, int64_t rows, int n, double eps) {
    BK_COUNT_CALL(MP_FWD_OP_LAYERNORM), BK_P->layernorm(c, y, x, w, b, rows, n, eps);
}
static void bk_rope_table(MpFwdCtx *c, float *cs, float *sn, const float *inv, int R, int T, double attn) {
    BK_COUNT_CALL(MP_FWD_OP_ROPE_TABLE), BK_P->rope_table(c, cs, sn, inv, R, T, attn);
}
static void bk_qk(MpFwdCtx *c, const MpFwdQKV *a) { BK_COUNT_CALL(MP_FWD_OP_QK_PREPARE), BK_P->qk_prepare(c, a); }
static void bk_attention(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp) {
    BK_COUNT_CALL(MP_FWD_OP_ATTENTION), BK_P->attention(c, a, tp);
}
static void bk_bf16_round(MpFwdCtx *c, float *x, int64_t ld, int64_t rows, int64_t n) {
    BK_COUNT_CALL(MP_FWD_OP_BF16_ROUND), BK_P->bf16_round(c, x, ld, rows, n);
}
static void bk_swiglu(MpFwdCtx *c, float *o, const float *g, const float *u, size_t n) { BK_COUNT_CALL(MP_FWD_OP_SWIGLU), BK_P->swiglu(c, o, g, u, n); }
static void bk_geglu(MpFwdCtx *c, float *o, const float *g, const float *u, size_t n) { BK_COUNT_CALL(MP_FWD_OP_GEGLU), BK_P->geglu(c, o, g, u, n); }
static void bk_gelu(MpFwdCtx *c, float *o, const float *x, size_t n) { BK_COUNT_CALL(MP_FWD_OP_GELU), BK_P->gelu(c, o, x, n); }
static void bk_softcap(MpFwdCtx *c, float *x, size_t n, float cap) { BK_COUNT_CALL(MP_FWD_OP_SOFTCAP), BK_P->softcap(c, x, n, cap); }
static void bk_scale(MpFwdCtx *c, float *x, size_t n, float s) { BK_COUNT_CALL(MP_FWD_OP_SCALE), BK_P->scale(c, x, n, s); }
static void bk_add_bias(MpFwdCtx *c, float *y, int64_t ld, const float *b, int64_t n, int64_t rows) {
    BK_COUNT_CALL(MP_FWD_OP_ADD_BIAS), BK_P->add_bias(c, y, ld, b, n, rows);
}
static void bk_add(MpFwdCtx *c, float *x, const float *y, size_t n) { BK_COUNT_CALL(MP_FWD_OP_ADD), BK_P->add(c, x, y, n); }
static void bk_copy(MpFwdCtx *c, float *d, const float *s, size_t n) { BK_COUNT_CALL(MP_FWD_OP_COPY), BK_P->copy(c, d, s, n); }
static void bk_zero(MpFwdCtx *c, float *x, size_t n) { BK_COUNT_CALL(MP_FWD_OP_ZERO), BK_P->zero(c, x, n); }
static void bk_amax(MpFwdCtx *c, uint32_t *out, const MpFwdSpan *t, int n) { BK_COUNT_CALL(MP_FWD_OP_AMAX), BK_P->amax(c, out, t, n); }

/* ---- MoE */
static void bk_moe_route(MpFwdCtx *c, float *p, float *w, int32_t *sel, int n, int E, int K, int norm) {
    BK_COUNT_CALL(MP_FWD_OP_MOE_ROUTE), BK_P->moe_route(c, p, w, sel, n, E, K, norm);
}
static void bk_moe_count(MpFwdCtx *c, int32_t *cnt, const int32_t *sel, int n, int K, int E) {
    BK_COUNT_CALL(MP_FWD_OP_MOE_COUNT), BK_P->moe_count(c, cnt, sel, n, K, E);
}
static void bk_moe_gather(MpFwdCtx *c, float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int n, int K, int C) {
    BK_COUNT_CALL(MP_FWD_OP_MOE_GATHER), BK_P->moe_gather(c, xg, rows, x, sel, j, n, K, C);
}
static void bk_moe_scatter(MpFwdCtx *c, float *y, const float *o, const int32_t *rows, const float *w, int cnt, int K, int C) {
    BK_COUNT_CALL(MP_FWD_OP_MOE_SCATTER), BK_P->moe_scatter(c, y, o, rows, w, cnt, K, C);
}
static void bk_moe_shared_mix(MpFwdCtx *c, float *y, float *sl, const float *o, const float *x, const float *g, int n, int C) {
    BK_COUNT_CALL(MP_FWD_OP_MOE_SHARED_MIX), BK_P->moe_shared_mix(c, y, sl, o, x, g, n, C);
}

/* The counted instance, its counters cleared. */
static void bk_counted_make(void) {
    bk_counted = mp_fwd_ops_cpu_plain;
    bk_counted.name = "cpu-plain-counted";
    bk_counted.host_memory = 0;
    bk_counted.open = bk_open, bk_counted.alloc = bk_alloc, bk_counted.upload = bk_upload, bk_counted.to_host = bk_to_host;
    bk_counted.synchronize = bk_sync, bk_counted.weight_upload = bk_wupload;
    bk_counted.matmul = bk_matmul, bk_counted.rmsnorm = bk_rmsnorm, bk_counted.layernorm = bk_layernorm;
    bk_counted.rope_table = bk_rope_table, bk_counted.qk_prepare = bk_qk, bk_counted.attention = bk_attention;
    bk_counted.bf16_round = bk_bf16_round, bk_counted.swiglu = bk_swiglu, bk_counted.geglu = bk_geglu, bk_counted.gelu = bk_gelu;
    bk_counted.softcap = bk_softcap, bk_counted.scale = bk_scale, bk_counted.add_bias = bk_add_bias, bk_counted.add = bk_add;
    bk_counted.copy = bk_copy, bk_counted.zero = bk_zero, bk_counted.amax = bk_amax;
    bk_counted.moe_route = bk_moe_route, bk_counted.moe_count = bk_moe_count, bk_counted.moe_gather = bk_moe_gather;
    bk_counted.moe_scatter = bk_moe_scatter, bk_counted.moe_shared_mix = bk_moe_shared_mix;
    memset(bk_calls, 0, sizeof bk_calls);
}

#endif
