/* fwd_backend.c — the two CPU instances of the forward pass's ops table and the device names;
 * see fwd_backend.h.
 */
#include "model/fwd_backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/fwd_par.h" /* FWD_PAR_FOR: the row loops of the stage-level ops */

/* ================================================================ storage */

static void *cpu_alloc(size_t bytes) { return aligned_alloc(64, bytes ? bytes : 64); }
static void cpu_free(void *p) { free(p); }

/* ================================================================ housekeeping (both instances) */

static void cpu_add_bias(float *y, int64_t ld, const float *b, int64_t n, int rows) {
    FWD_PAR_FOR((double)rows * n,
    for (int t = 0; t < rows; t++)
        for (int64_t i = 0; i < n; i++) y[t * ld + i] += b[i];);
}

static void cpu_add(float *x, const float *y, size_t n) {
    FWD_PAR_FOR((double)n,
    for (size_t i = 0; i < n; i++) x[i] += y[i];);
}

static void cpu_copy(float *dst, const float *src, size_t n) { memcpy(dst, src, sizeof(float) * n); }

/* As HF's masking_utils and llama.cpp's is_masked_swa: -inf like the causal mask's; the softmax
 * then gives those keys an exact 0. */
static void cpu_mask_window(float *row, int i, int T, int W, int causal) {
    for (int j = 0; j <= i - W; j++) row[j] = -INFINITY;
    if (!causal)
        for (int j = i + W; j < T; j++) row[j] = -INFINITY;
}

static void cpu_zero(float *x, size_t n) { memset(x, 0, sizeof(float) * n); }

/* ================================================================ MoE rows (both instances) */

static int cpu_moe_gather(float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int t0, int T, int K, int C) {
    int cnt = 0;
    for (int t = t0; t < T; t++)
        for (int k = 0; k < K; k++)
            if (sel[(size_t)t * K + k] == j) rows[cnt++] = t * K + k; /* (row, rank) */
    for (int i = 0; i < cnt; i++) memcpy(xg + (size_t)i * C, x + (size_t)(rows[i] / K) * C, sizeof(float) * (size_t)C);
    return cnt;
}

static void cpu_moe_scatter(float *y, const float *o, const int32_t *rows, const float *w, int cnt, int K, int C) {
    for (int i = 0; i < cnt; i++) {
        const float wt = w[rows[i]];
        float *yt = y + (size_t)(rows[i] / K) * C;
        const float *oi = o + (size_t)i * C;
        for (int c = 0; c < C; c++) yt[c] += oi[c] * wt;
    }
}

static void cpu_moe_shared_mix(float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C) {
    for (int i = 0; i < n; i++) { /* the gate's one output: a dot product in f32, in order */
        float a = 0;
        for (int c = 0; c < C; c++) a += x[(size_t)i * C + c] * gate[c];
        sl[i] = a;
    }
    for (int i = 0; i < n; i++) {
        const float g = (float)(1.0 / (1.0 + exp(-(double)sl[i])));
        float *yi = y + (size_t)i * C;
        const float *oi = o + (size_t)i * C;
        for (int c = 0; c < C; c++) yi[c] += g * oi[c];
    }
}

/* ================================================================ stage-level ops (both instances) */

static int cpu_embed(float *x, MpModel *m, const int32_t *ids, int n, MpErr *e) {
    const int C = m->dim;
    for (int t = 0; t < n; t++) {
        float *xt = x + (size_t)t * C;
        if (mp_model_rows_f32(m, MP_ROLE_TOK_EMBD, 0, ids[t], 1, xt, e) != MP_OK) return MP_ERR;
        if (m->embed_scale > 0) /* gemma: x sqrt(C) */
            for (int c = 0; c < C; c++) xt[c] *= (float)m->embed_scale;
    }
    return MP_OK;
}

static void cpu_moe_route(float *p, float *w, int32_t *sel, int n, int E, int K, int norm_topk) {
    for (int t = 0; t < n; t++) mp_fwd_moe_route(p + (size_t)t * E, w + (size_t)t * K, sel + (size_t)t * K, E, K, norm_topk);
}

/* The output head through instance o's own norm, rounding, matmul and soft-cap. */
static void head_run(const MpFwdOps *o, float *y, float *xn, const float *x, const MpFwdHead *h, int n) {
    const int C = h->C;
    FWD_PAR_FOR((double)n * C,
    for (int t = 0; t < n; t++) {
        if (h->layer_norm) o->layernorm(xn + (size_t)t * C, x + (size_t)t * C, h->norm, h->norm_b, C, h->eps);
        else o->rmsnorm(xn + (size_t)t * C, x + (size_t)t * C, h->norm, C, h->eps);
    });
    if (h->bf16_in) FWD_PAR_FOR((double)n * C, for (int t = 0; t < n; t++) o->bf16_round(xn + (size_t)t * C, (size_t)C););
    o->matmul(h->kernel, y, h->V, xn, C, h->w, n);
    if (h->softcap > 0) o->softcap(y, (size_t)n * (size_t)h->V, h->softcap); /* gemma2 */
}

static void cpu_logits(float *y, float *xn, const float *x, const MpFwdHead *h, int n) { head_run(&mp_fwd_ops_cpu, y, xn, x, h, n); }
static void plain_logits(float *y, float *xn, const float *x, const MpFwdHead *h, int n) {
    head_run(&mp_fwd_ops_cpu_plain, y, xn, x, h, n);
}

/* ================================================================ the two instances */

/* cpu: the MpFwd's own kernel, whatever mp_fwd_kernel_set chose for the process. */
static void cpu_matmul(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    mp_fwd_matmul_kernel(k, y, ldy, x, ldx, w, T);
}

/* cpu-plain: one order of sums for every kernel (the reference loops of the plain section). */
static void plain_matmul(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    (void)k;
    mp_fwd_matmul_plain(y, ldy, x, ldx, w, T);
}

/* The ops both CPU instances share: storage, what the training model has no arithmetic of its own
 * for (LayerNorm, GeGLU, GELU, soft-cap, MoE routing; plain compute is f32: no bf16 inputs), the
 * exact ones (RoPE rotation, key packing, copies, masks, the reduced map), and the activations'
 * housekeeping. */
#define FWD_OPS_CPU_SHARED                                                                         \
    .alloc = cpu_alloc, .free = cpu_free, .act_alloc = cpu_alloc, .act_free = cpu_free, .layernorm = mp_fwd_layernorm, .rope = mp_fwd_rope,     \
    .pack_key = mp_fwd_attn_pack_key, .geglu = mp_fwd_geglu, .gelu = mp_fwd_gelu_erf,              \
    .softcap = mp_fwd_softcap, .bf16_round = mp_fwd_bf16_round, .add_bias = cpu_add_bias,          \
    .add = cpu_add, .copy = cpu_copy, .mask_window = cpu_mask_window, .zero = cpu_zero,            \
    .moe_gather = cpu_moe_gather, .moe_scatter = cpu_moe_scatter,                                 \
    .moe_shared_mix = cpu_moe_shared_mix, .embed = cpu_embed, .moe_route = cpu_moe_route,         \
    .attn_headsum = mp_fwd_attn_headsum

const MpFwdOps mp_fwd_ops_cpu = {
    .name = "cpu",
    FWD_OPS_CPU_SHARED,
    .matmul = cpu_matmul,
    .rmsnorm = mp_fwd_rmsnorm,
    .rope_table = mp_fwd_rope_table,
    .attn_scores = mp_fwd_attn_scores,
    .softmax_row = mp_fwd_softmax_row,
    .attn_mix = mp_fwd_attn_mix,
    .swiglu = mp_fwd_swiglu,
    .logits = cpu_logits,
};

/* The training model's arithmetic where it has its own (matmul, RMSNorm, RoPE table, scores,
 * softmax, p·V, SwiGLU — the experts' too); the rest shared with cpu. Its output head runs
 * through its own norm and matmul. */
const MpFwdOps mp_fwd_ops_cpu_plain = {
    .name = "cpu-plain",
    FWD_OPS_CPU_SHARED,
    .matmul = plain_matmul,
    .rmsnorm = mp_fwd_rmsnorm_plain,
    .rope_table = mp_fwd_rope_table_plain,
    .attn_scores = mp_fwd_attn_scores_plain,
    .softmax_row = mp_fwd_softmax_row_plain,
    .attn_mix = mp_fwd_attn_mix_plain,
    .swiglu = mp_fwd_swiglu_plain,
    .logits = plain_logits,
};

/* ================================================================ devices */

/* Backends maskpos will have but this version lacks, and what is true of them today (no build of
 * this tree has them: the CUDA backend is being written, issue 36; its plugin replaces this row). */
static const struct {
    const char *name, *hint;
} fwd_unbuilt[] = {{"cuda", "this version of maskpos has no CUDA backend yet (issue 36 adds it); use --device cpu"}};

const MpFwdOps *mp_fwd_ops_for(const char *device, int plain, MpErr *e) {
    if (!device || !strcmp(device, "cpu")) return plain ? &mp_fwd_ops_cpu_plain : &mp_fwd_ops_cpu;
    for (size_t i = 0; i < sizeof fwd_unbuilt / sizeof fwd_unbuilt[0]; i++)
        if (!strcmp(device, fwd_unbuilt[i].name)) {
            mp_err_set(e, "--device %s: %s", device, fwd_unbuilt[i].hint);
            return NULL;
        }
    mp_err_set(e, "--device %.40s: no such backend (this build has: cpu)", device);
    return NULL;
}

int mp_fwd_device_check(const char *device, MpErr *e) { return mp_fwd_ops_for(device, 0, e) ? MP_OK : MP_ERR; }
