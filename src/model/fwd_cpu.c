/* fwd_cpu.c — the two CPU instances of the backend interface (fwd_backend.h): mp_fwd_ops_cpu (the
 * reference: fwd_kernels.h's fast kernels) and mp_fwd_ops_cpu_plain (the training model's
 * arithmetic), every op a whole-tensor loop over fwd_kernels.h's kernels, parallel inside (OpenMP,
 * FWD_PAR_FOR: above FWD_PAR_MIN and outside any parallel region).
 *
 * Implements, in the order of fwd_backend.h: the worker's handle (the kernel and the arithmetic)
 * and host storage; the weights' layout — 32-column panels [ceil(O/32)][K][32], f32 or bf16
 * (MpFwdMat, fwd_kernels.h), written a range of rows at a time; the matmul, the norms over rows,
 * the RoPE table and qk_prepare (per head: q/k norm, RoPE, the keys packed for the score kernel,
 * the values per kv head); the elementwise ops in chunks; the amax reduction; the MoE rows. The
 * attention op is fwd_cpu_attn.c's. The two instances differ only in their MpFwdCpuArith (what
 * open puts in the handle) and their names: the same loops run either arithmetic.
 * Does not: decide the data flow (fwd.c), or change a kernel's arithmetic: every op gives the bits
 * its kernels give, whatever the threads (each iteration writes its own elements).
 * Tested by: tests/test_backend_ops.c (every op against mp_fwd_ops_cpu, cpu-plain's shared ops bit
 * for bit), tests/test_model_fwd.c and the end-to-end tests of the forward pass.
 *
 * Shape legend: T tokens, C hidden, K inner size, O outputs, NH query heads, NKV key/value heads,
 * HS head dim, R rotary dims, E experts, KE chosen experts a row.
 */
#include "model/fwd_cpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/fwd_amx.h" /* mp_amx_weight_elems: the AMX tile layout of the amx kernels */
#include "model/fwd_par.h" /* FWD_PAR_FOR: loops parallel above a work threshold */

/* ================================================================ context and storage */

static const MpFwdCpuArith cpu_fast, cpu_plain;

static MpFwdCtx *cpu_open_with(const MpFwdCpuArith *ar, int kernel, MpErr *e) {
    MpFwdCpuCtx *c = malloc(sizeof *c);
    if (!c) {
        mp_err_set(e, "out of memory for a forward-pass worker");
        return NULL;
    }
    c->kernel = (MpFwdKernel)kernel;
    c->ar = ar;
    return (MpFwdCtx *)(void *)c;
}
static MpFwdCtx *cpu_open(const char *device, int kernel, MpErr *e) { return (void)device, cpu_open_with(&cpu_fast, kernel, e); }
static MpFwdCtx *plain_open(const char *device, int kernel, MpErr *e) { return (void)device, cpu_open_with(&cpu_plain, kernel, e); }
static void cpu_close(MpFwdCtx *c) { free(c); }

static void *cpu_alloc(MpFwdCtx *c, size_t bytes) {
    (void)c;
    return aligned_alloc(64, bytes ? (bytes + 63) & ~(size_t)63 : 64);
}
static void cpu_free(MpFwdCtx *c, void *p) { (void)c, free(p); }
static void cpu_memcpy(MpFwdCtx *c, void *dst, const void *src, size_t bytes) { (void)c, memcpy(dst, src, bytes); }
static int cpu_synchronize(MpFwdCtx *c, MpErr *e) { return (void)c, (void)e, MP_OK; }

/* ================================================================ weights: panels */

/* The kernels' view of a handle (the panels, or a bf16 weight's AMX tiles, live in w->data). */
static MpFwdMat cpu_mat(const MpFwdWeight *w) {
    MpFwdMat m = {.out = w->out, .in = w->in, .layout = w->layout};
    if (w->dtype == MP_FWD_DT_BF16) m.pb = w->data;
    else m.p = w->data;
    return m;
}

/* Panels for every kernel, but bf16 weights of the amx kernels: the tile layout (fwd_amx.h). */
static size_t cpu_weight_plan(MpFwdWeight *w, int kernel) {
    const int bf16 = w->dtype == MP_FWD_DT_BF16;
    w->layout = bf16 ? mp_fwd_kernel_layout((MpFwdKernel)kernel) : MP_FWD_LAYOUT_PANELS;
    const size_t n = w->layout == MP_FWD_LAYOUT_TILES ? mp_amx_weight_elems(w->out, w->in) : mp_fwd_mat_floats(w->out, w->in);
    const size_t bytes = bf16 ? 2 * n : 4 * n;
    return (bytes + 63) & ~(size_t)63;
}

/* Rows [r0, r0 + n) of an f32 weight into its panels; the padding columns of the last panel are
 * zeroed with its last row (mp_fwd_mat_pack_bf16_rows' rule, in f32). */
static void cpu_pack_f32_rows(MpFwdMat *m, const float *rows, int64_t r0, int64_t n) {
    const int64_t K = m->in;
    for (int64_t j = 0; j < n; j++) {
        const int64_t o = r0 + j, b = o / MP_FWD_NR, c = o % MP_FWD_NR;
        for (int64_t k = 0; k < K; k++) m->p[((size_t)b * (size_t)K + (size_t)k) * MP_FWD_NR + (size_t)c] = rows[(size_t)j * (size_t)K + (size_t)k];
    }
    const int64_t end = r0 + n;
    if (n > 0 && end == m->out && end % MP_FWD_NR)
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = end % MP_FWD_NR; c < MP_FWD_NR; c++) m->p[((size_t)(end / MP_FWD_NR) * (size_t)K + (size_t)k) * MP_FWD_NR + (size_t)c] = 0;
}

static void cpu_weight_upload(MpFwdCtx *c, MpFwdWeight *w, const float *rows, int64_t r0, int64_t n) {
    (void)c;
    MpFwdMat m = cpu_mat(w);
    if (w->dtype == MP_FWD_DT_BF16) mp_fwd_mat_pack_bf16_rows(&m, rows, r0, n);
    else if (r0 == 0 && n == w->out) mp_fwd_mat_pack(&m, rows, w->out, w->in);
    else cpu_pack_f32_rows(&m, rows, r0, n);
}

/* ================================================================ matmul and norms */

static void cpu_matmul(MpFwdCtx *c, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdWeight *w, int64_t T) {
    const MpFwdCpuCtx *cc = mp_fwd_cpu_ctx(c);
    const MpFwdMat m = cpu_mat(w);
    cc->ar->matmul(cc->kernel, y, ldy, x, ldx, &m, T);
}

static void cpu_rmsnorm(MpFwdCtx *c, float *y, const float *x, const float *w, int64_t rows, int n, double eps) {
    const MpFwdCpuArith *ar = mp_fwd_cpu_ctx(c)->ar;
    FWD_PAR_FOR((double)rows * n,
    for (int64_t t = 0; t < rows; t++) ar->rmsnorm(y + (size_t)t * n, x + (size_t)t * n, w, n, eps););
}

static void cpu_layernorm(MpFwdCtx *c, float *y, const float *x, const float *w, const float *b, int64_t rows, int n, double eps) {
    (void)c;
    FWD_PAR_FOR((double)rows * n,
    for (int64_t t = 0; t < rows; t++) mp_fwd_layernorm(y + (size_t)t * n, x + (size_t)t * n, w, b, n, eps););
}

/* ================================================================ RoPE, q/k norms and the keys */

static void cpu_rope_table(MpFwdCtx *c, float *cos, float *sin, const float *inv_freq, int R, int T, double attn) {
    mp_fwd_cpu_ctx(c)->ar->rope_table(cos, sin, inv_freq, R, T, attn);
}

/* Position t: the q/k norms, RoPE of every head, then each kv head's key packed and value copied. */
static void cpu_qk_row(const MpFwdCpuArith *ar, const MpFwdQKV *a, int t) {
    const int HS = a->HS, R = a->R;
    const int64_t ldq = (int64_t)a->NH * HS, ldk = (int64_t)a->NKV * HS;
    const size_t kpf = a->kv_head / sizeof(float);
    const float *cp = a->cos ? a->cos + (size_t)t * (R / 2) : NULL, *sp = a->cos ? a->sin + (size_t)t * (R / 2) : NULL;
    float *qt = a->q + t * ldq, *kt = a->k + t * ldk;
    if (a->norm_whole) { /* olmo2: one RMSNorm over all heads' q (and k) values */
        if (a->q_norm) ar->rmsnorm(qt, qt, a->q_norm, (int)ldq, a->eps);
        if (a->k_norm) ar->rmsnorm(kt, kt, a->k_norm, (int)ldk, a->eps);
    }
    for (int h = 0; h < a->NH; h++) {
        float *qh = qt + (int64_t)h * HS;
        if (a->q_norm && !a->norm_whole) ar->rmsnorm(qh, qh, a->q_norm, HS, a->eps);
        if (cp) mp_fwd_rope(qh, cp, sp, R);
    }
    for (int h = 0; h < a->NKV; h++) {
        float *kh = kt + (int64_t)h * HS;
        if (a->k_norm && !a->norm_whole) ar->rmsnorm(kh, kh, a->k_norm, HS, a->eps);
        if (cp) mp_fwd_rope(kh, cp, sp, R);
        mp_fwd_attn_pack_key((float *)a->kp + (size_t)h * kpf, kh, HS, t);
        memcpy(a->vh + ((size_t)h * a->ldt + t) * HS, a->v + t * ldk + (int64_t)h * HS, sizeof(float) * (size_t)HS);
    }
}

static void cpu_qk_prepare(MpFwdCtx *c, const MpFwdQKV *a) {
    const MpFwdCpuArith *ar = mp_fwd_cpu_ctx(c)->ar;
    FWD_PAR_FOR((double)(a->T - a->t0) * a->NH * a->HS,
    for (int t = a->t0; t < a->T; t++) cpu_qk_row(ar, a, t););
}

/* ================================================================ elementwise */

#define CPU_CHUNK 4096 /* elements per work item of the elementwise ops */

/* Work items of n elements in chunks of CPU_CHUNK: body(o, m) for [o, o + m). */
#define CPU_CHUNKS(n, work, body)                                                                  \
    do {                                                                                           \
        const int64_t nc_ = (int64_t)(((n) + CPU_CHUNK - 1) / CPU_CHUNK);                          \
        FWD_PAR_FOR((work),                                                                        \
        for (int64_t i_ = 0; i_ < nc_; i_++) {                                                     \
            const size_t o = (size_t)i_ * CPU_CHUNK, m = (n) - o < CPU_CHUNK ? (n) - o : CPU_CHUNK; \
            body;                                                                                  \
        });                                                                                        \
    } while (0)

static void cpu_bf16_round(MpFwdCtx *c, float *x, int64_t ld, int64_t rows, int64_t n) {
    (void)c;
    FWD_PAR_FOR((double)rows * n,
    for (int64_t t = 0; t < rows; t++) mp_fwd_bf16_round(x + (size_t)t * (size_t)ld, (size_t)n););
}

static void cpu_swiglu(MpFwdCtx *c, float *out, const float *g, const float *u, size_t n) {
    const MpFwdCpuArith *ar = mp_fwd_cpu_ctx(c)->ar;
    CPU_CHUNKS(n, (double)n * 10, ar->swiglu(out + o, g + o, u + o, m));
}
static void cpu_geglu(MpFwdCtx *c, float *out, const float *g, const float *u, size_t n) {
    (void)c;
    CPU_CHUNKS(n, (double)n * 10, mp_fwd_geglu(out + o, g + o, u + o, m));
}
static void cpu_gelu(MpFwdCtx *c, float *out, const float *x, size_t n) {
    (void)c;
    CPU_CHUNKS(n, (double)n * 10, mp_fwd_gelu_erf(out + o, x + o, m));
}
static void cpu_softcap(MpFwdCtx *c, float *x, size_t n, float cap) {
    (void)c;
    CPU_CHUNKS(n, (double)n * 10, mp_fwd_softcap(x + o, m, cap));
}
static void cpu_scale(MpFwdCtx *c, float *x, size_t n, float s) {
    (void)c;
    FWD_PAR_FOR((double)n,
    for (size_t i = 0; i < n; i++) x[i] *= s;);
}

static void cpu_add_bias(MpFwdCtx *c, float *y, int64_t ld, const float *b, int64_t n, int64_t rows) {
    (void)c;
    FWD_PAR_FOR((double)rows * n,
    for (int64_t t = 0; t < rows; t++)
        for (int64_t i = 0; i < n; i++) y[t * ld + i] += b[i];);
}
static void cpu_add(MpFwdCtx *c, float *x, const float *y, size_t n) {
    (void)c;
    FWD_PAR_FOR((double)n,
    for (size_t i = 0; i < n; i++) x[i] += y[i];);
}
static void cpu_copy(MpFwdCtx *c, float *dst, const float *src, size_t n) { (void)c, memcpy(dst, src, sizeof(float) * n); }
static void cpu_zero(MpFwdCtx *c, float *x, size_t n) { (void)c, memset(x, 0, sizeof(float) * n); }

/* ================================================================ reductions */

static void cpu_amax(MpFwdCtx *c, uint32_t *out, const MpFwdSpan *t, int n) {
    (void)c;
    for (int k = 0; k < n; k++) out[k] = t[k].n ? mp_fwd_check_amax_bits(t[k].x, t[k].n) : 0;
}

/* ================================================================ mixture of experts */

static void cpu_moe_route(MpFwdCtx *c, float *p, float *w, int32_t *sel, int n, int E, int KE, int norm_topk) {
    (void)c;
    for (int t = 0; t < n; t++) mp_fwd_moe_route(p + (size_t)t * E, w + (size_t)t * KE, sel + (size_t)t * KE, E, KE, norm_topk);
}

static void cpu_moe_count(MpFwdCtx *c, int32_t *cnt, const int32_t *sel, int n, int KE, int E) {
    (void)c;
    memset(cnt, 0, sizeof *cnt * (size_t)E);
    for (size_t i = 0; i < (size_t)n * KE; i++)
        if (sel[i] >= 0 && sel[i] < E) cnt[sel[i]]++;
}

static void cpu_moe_gather(MpFwdCtx *c, float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int n, int KE, int C) {
    (void)c;
    int cnt = 0;
    for (int t = 0; t < n; t++)
        for (int k = 0; k < KE; k++)
            if (sel[(size_t)t * KE + k] == j) rows[cnt++] = t * KE + k; /* (row, rank) */
    for (int i = 0; i < cnt; i++) memcpy(xg + (size_t)i * C, x + (size_t)(rows[i] / KE) * C, sizeof(float) * (size_t)C);
}

static void cpu_moe_scatter(MpFwdCtx *c, float *y, const float *o, const int32_t *rows, const float *w, int cnt, int KE, int C) {
    (void)c;
    for (int i = 0; i < cnt; i++) {
        const float wt = w[rows[i]];
        float *yt = y + (size_t)(rows[i] / KE) * C;
        const float *oi = o + (size_t)i * C;
        for (int k = 0; k < C; k++) yt[k] += oi[k] * wt;
    }
}

static void cpu_moe_shared_mix(MpFwdCtx *c, float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C) {
    (void)c;
    for (int i = 0; i < n; i++) { /* the gate's one output: a dot product in f32, in order */
        float a = 0;
        for (int k = 0; k < C; k++) a += x[(size_t)i * C + k] * gate[k];
        sl[i] = a;
    }
    for (int i = 0; i < n; i++) {
        const float g = (float)(1.0 / (1.0 + exp(-(double)sl[i])));
        float *yi = y + (size_t)i * C;
        const float *oi = o + (size_t)i * C;
        for (int k = 0; k < C; k++) yi[k] += g * oi[k];
    }
}

/* ================================================================ the two instances */

/* cpu-plain's matmul: one order of sums for every kernel (the reference loops of the plain section). */
static void plain_matmul(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    (void)k;
    mp_fwd_matmul_plain(y, ldy, x, ldx, w, T);
}

static const MpFwdCpuArith cpu_fast = {
    .matmul = mp_fwd_matmul_kernel, .rmsnorm = mp_fwd_rmsnorm, .rope_table = mp_fwd_rope_table,
    .attn_scores = mp_fwd_attn_scores, .softmax_row = mp_fwd_softmax_row, .attn_mix = mp_fwd_attn_mix,
    .swiglu = mp_fwd_swiglu,
};

/* The training model's arithmetic where it has its own; LayerNorm, GeGLU, GELU, soft-cap and the
 * MoE routing it has none of (the shared loops above), and plain compute is f32: no bf16 inputs. */
static const MpFwdCpuArith cpu_plain = {
    .matmul = plain_matmul, .rmsnorm = mp_fwd_rmsnorm_plain, .rope_table = mp_fwd_rope_table_plain,
    .attn_scores = mp_fwd_attn_scores_plain, .softmax_row = mp_fwd_softmax_row_plain, .attn_mix = mp_fwd_attn_mix_plain,
    .swiglu = mp_fwd_swiglu_plain,
};

/* Every op but open: the same loops for both instances. */
#define FWD_OPS_CPU_SHARED                                                                         \
    .abi = MP_FWD_OPS_ABI, .host_memory = 1, .close = cpu_close, .alloc = cpu_alloc, .free = cpu_free, \
    .upload = cpu_memcpy, .to_host = cpu_memcpy, .synchronize = cpu_synchronize,                   \
    .weight_plan = cpu_weight_plan, .weight_upload = cpu_weight_upload, .matmul = cpu_matmul,      \
    .rmsnorm = cpu_rmsnorm, .layernorm = cpu_layernorm, .rope_table = cpu_rope_table,              \
    .qk_prepare = cpu_qk_prepare, .attention = mp_fwd_cpu_attention, .kv_bytes = mp_fwd_cpu_kv_bytes, \
    .tap_bytes = mp_fwd_cpu_tap_bytes, .bf16_round = cpu_bf16_round, .swiglu = cpu_swiglu,         \
    .geglu = cpu_geglu, .gelu = cpu_gelu, .softcap = cpu_softcap, .scale = cpu_scale,              \
    .add_bias = cpu_add_bias, .add = cpu_add, .copy = cpu_copy, .zero = cpu_zero, .amax = cpu_amax, \
    .moe_route = cpu_moe_route, .moe_count = cpu_moe_count, .moe_gather = cpu_moe_gather,          \
    .moe_scatter = cpu_moe_scatter, .moe_shared_mix = cpu_moe_shared_mix

const MpFwdOps mp_fwd_ops_cpu = {
    .name = "cpu",
    .exact = MP_FWD_OP_BIT(MP_FWD_OP_COUNT) - 1, /* the reference */
    .dtypes = MP_FWD_DT_BIT(MP_FWD_DT_F32) | MP_FWD_DT_BIT(MP_FWD_DT_BF16),
    .open = cpu_open,
    FWD_OPS_CPU_SHARED,
};

/* The ops whose loops run no arithmetic of cpu_plain's own give cpu's bits. */
const MpFwdOps mp_fwd_ops_cpu_plain = {
    .name = "cpu-plain",
    .exact = MP_FWD_OP_BIT(MP_FWD_OP_LAYERNORM) | MP_FWD_OP_BIT(MP_FWD_OP_BF16_ROUND) | MP_FWD_OP_BIT(MP_FWD_OP_GEGLU) |
             MP_FWD_OP_BIT(MP_FWD_OP_GELU) | MP_FWD_OP_BIT(MP_FWD_OP_SOFTCAP) | MP_FWD_OP_BIT(MP_FWD_OP_SCALE) |
             MP_FWD_OP_BIT(MP_FWD_OP_ADD_BIAS) | MP_FWD_OP_BIT(MP_FWD_OP_ADD) | MP_FWD_OP_BIT(MP_FWD_OP_COPY) |
             MP_FWD_OP_BIT(MP_FWD_OP_ZERO) | MP_FWD_OP_BIT(MP_FWD_OP_AMAX) | MP_FWD_OP_BIT(MP_FWD_OP_MOE_ROUTE) |
             MP_FWD_OP_BIT(MP_FWD_OP_MOE_COUNT) | MP_FWD_OP_BIT(MP_FWD_OP_MOE_GATHER) |
             MP_FWD_OP_BIT(MP_FWD_OP_MOE_SCATTER) | MP_FWD_OP_BIT(MP_FWD_OP_MOE_SHARED_MIX),
    .dtypes = MP_FWD_DT_BIT(MP_FWD_DT_F32), /* the training model's arithmetic is f32 */
    .open = plain_open,
    FWD_OPS_CPU_SHARED,
};
