/* fwd.c — see fwd.h. Sections in data-flow order: memory plan, weight loading, set-up, one layer,
 * checks, run. Every piece of arithmetic and every write to an activation goes through the backend
 * instance's whole-tensor ops (fwd_backend.h); this file decides the data flow, the taps and the
 * checks, and never reads or writes the instance's memory itself but through upload/to_host
 * (or in place when the instance's memory is host memory: the embedding rows, the hooks, the
 * logits). */
#include "model/fwd.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ================================================================ memory plan */

/* Carving one block: pass 1 (base NULL) counts bytes, pass 2 hands out pointers into the
 * instance's block (never dereferenced here). Every piece starts on a 64-byte boundary. */
typedef struct FwdCarve {
    char *base;
    size_t used; /* bytes */
} FwdCarve;

static void *fwd_carve(FwdCarve *c, size_t bytes) {
    void *p = c->base ? c->base + c->used : NULL;
    c->used += (bytes + 63) & ~(size_t)63;
    return p;
}
static float *fwd_carve_f(FwdCarve *c, size_t floats) { return fwd_carve(c, floats * sizeof(float)); }

const char *mp_fwd_compute_name(int compute) {
    return compute == MP_FWD_COMPUTE_BF16 ? "bf16" : compute == MP_FWD_COMPUTE_F32_PLAIN ? "f32-plain" : "f32";
}

int mp_fwd_compute_parse(const char *s) {
    if (!strcmp(s, "f32")) return MP_FWD_COMPUTE_F32;
    if (!strcmp(s, "bf16")) return MP_FWD_COMPUTE_BF16;
    return -1;
}

/* The instance and the matmul kernel a config asks for: cfg->ops, else by device and compute. */
static const MpFwdOps *fwd_ops(const MpFwdConfig *cfg, MpErr *e) {
    return cfg->ops ? cfg->ops : mp_fwd_ops_for(cfg->device, cfg->compute == MP_FWD_COMPUTE_F32_PLAIN, e);
}

/* This pass's kernel: MASKPOS_KERNEL (a kernel or a bit class), else the fastest of the CPU's
 * default class (mp_fwd_kernel_choose); -1 and a line in e when unknown or not runnable here. */
static int fwd_kernel(const MpFwdConfig *cfg, MpErr *e) {
    char why[512];
    const int k = mp_fwd_kernel_choose(getenv("MASKPOS_KERNEL"), cfg->compute == MP_FWD_COMPUTE_BF16, why, sizeof why);
    if (k < 0) return mp_err_set(e, "%s", why), -1;
    return k;
}

/* The plan of a layer's weights: one row per tensor the forward pass keeps — the role it is loaded
 * from, its place in MpFwdLayer, and whether it is an f32 vector or a matrix (an MpFwdWeight in the
 * instance's layout). A row is used in every layer of a family that holds its role (the family
 * table, src/load/arch.c); its size is the role's shape (mp_role_shape). The one table drives the
 * layout (fwd_layout_weights), the load (fwd_load) and the memory estimate (mp_fwd_plan_bytes);
 * the experts of MoE layers, [E] matrices per role, follow each layer's rows. */
typedef struct FwdSlot {
    MpRole role;
    size_t off; /* offsetof(MpFwdLayer, field): float * (vector) or MpFwdWeight (matrix) */
    int mat;
} FwdSlot;

#define FWD_VEC(r, field) {MP_ROLE_##r, offsetof(MpFwdLayer, field), 0}
#define FWD_MAT(r, field) {MP_ROLE_##r, offsetof(MpFwdLayer, field), 1}
static const FwdSlot fwd_slots[] = {
    FWD_VEC(ATTN_NORM, attn_norm), FWD_MAT(Q, q), FWD_MAT(K, k), FWD_MAT(V, v), FWD_MAT(O, o),
    FWD_VEC(Q_BIAS, q_bias), FWD_VEC(K_BIAS, k_bias), FWD_VEC(V_BIAS, v_bias), FWD_VEC(Q_NORM, q_norm),
    FWD_VEC(K_NORM, k_norm), FWD_VEC(FFN_NORM, ffn_norm), FWD_VEC(ATTN_POST_NORM, attn_post_norm),
    FWD_VEC(FFN_POST_NORM, ffn_post_norm), FWD_MAT(GATE, gate), FWD_MAT(UP, up), FWD_MAT(DOWN, down),
    FWD_VEC(ATTN_NORM_BIAS, attn_norm_b), FWD_VEC(FFN_NORM_BIAS, ffn_norm_b), FWD_VEC(O_BIAS, o_bias),
    FWD_VEC(UP_BIAS, up_bias), FWD_VEC(DOWN_BIAS, down_bias), FWD_MAT(FFN_ROUTER, router),
    FWD_VEC(SHEXP_GATE_INP, shexp_gate_inp), FWD_MAT(SHEXP_GATE, shexp_gate), FWD_MAT(SHEXP_UP, shexp_up),
    FWD_MAT(SHEXP_DOWN, shexp_down),
};
#define FWD_NSLOTS (sizeof fwd_slots / sizeof fwd_slots[0])

/* The slot's field in layer ly. */
static float **fwd_slot_vec(MpFwdLayer *ly, const FwdSlot *s) { return (float **)(void *)((char *)ly + s->off); }
static MpFwdWeight *fwd_slot_mat(MpFwdLayer *ly, const FwdSlot *s) { return (MpFwdWeight *)(void *)((char *)ly + s->off); }

/* What the weight plan needs besides the model: the instance, its kernel, the dtype. */
typedef struct FwdPlan {
    const MpFwdOps *ops;
    int kernel, dtype;
} FwdPlan;

/* A weight [out, in]: its bytes in the instance's layout (weight_plan), carved. */
static void fwd_weight(FwdCarve *c, const FwdPlan *p, MpFwdWeight *w, int64_t out, int64_t in) {
    *w = (MpFwdWeight){.out = out, .in = in, .dtype = p->dtype};
    w->data = fwd_carve(c, p->ops->weight_plan(w, p->kernel));
}

/* Layer l's slots, then its experts (into W->expmats when given); counted only when ly is scratch. */
static void fwd_layout_layer(FwdCarve *c, const FwdPlan *p, MpFwdWeights *W, MpFwdLayer *ly, int l, const MpModel *m) {
    const MpRoleDims rd = mp_model_role_dims(m);
    const int E = m->n_experts;
    memset(ly, 0, sizeof *ly);
    for (size_t i = 0; i < FWD_NSLOTS; i++) {
        const FwdSlot *s = &fwd_slots[i];
        int64_t rows, cols;
        if (!mp_family_has(m->arch, s->role)) continue;
        mp_role_shape(s->role, &rd, &rows, &cols);
        if (s->mat) fwd_weight(c, p, fwd_slot_mat(ly, s), rows, cols);
        else *fwd_slot_vec(ly, s) = fwd_carve_f(c, (size_t)(rows * cols));
    }
    ly->exps = W && W->expmats ? W->expmats + (size_t)l * E * 3 : NULL;
    for (int j = 0; j < E; j++) { /* expert j's gate [FF, C], up [FF, C], down [C, FF] */
        MpFwdWeight et[3], *w = ly->exps ? ly->exps + (size_t)j * 3 : et;
        fwd_weight(c, p, &w[0], m->ffn, m->dim);
        fwd_weight(c, p, &w[1], m->ffn, m->dim);
        fwd_weight(c, p, &w[2], m->dim, m->ffn);
    }
}

/* Weights: layers [0, L) and (logits) the output head into W; counted only when W->layers is NULL. */
static void fwd_layout_weights(FwdCarve *c, const FwdPlan *p, MpFwdWeights *W, const MpModel *m, const MpFwdConfig *cfg) {
    for (int l = 0; l < cfg->n_layers; l++) {
        MpFwdLayer tmp;
        fwd_layout_layer(c, p, W->layers ? W : NULL, W->layers ? &W->layers[l] : &tmp, l, m);
    }
    W->out_norm_b = NULL;
    if (cfg->logits) {
        W->out_norm = fwd_carve_f(c, (size_t)m->dim);
        fwd_weight(c, p, &W->lm_head, m->vocab, m->dim);
        if (mp_family_has(m->arch, MP_ROLE_OUTPUT_NORM_BIAS)) W->out_norm_b = fwd_carve_f(c, (size_t)m->dim);
    }
}

/* One worker's activations (f's dims, cfg and ops set), into f. */
static void fwd_layout_acts(FwdCarve *c, MpFwd *f, const MpModel *m, const MpFwdConfig *cfg) {
    const size_t T = (size_t)cfg->max_seq, C = (size_t)f->C, Q = (size_t)f->NH * f->HS, KV = (size_t)f->NKV * f->HS;
    const size_t half = (size_t)(f->R / 2 > 0 ? f->R / 2 : 1), kvb = f->ops->kv_bytes(f->HS, (int)T);
    f->x = fwd_carve_f(c, T * C);
    f->xn = fwd_carve_f(c, T * C);
    f->q = fwd_carve_f(c, T * Q);
    f->k = fwd_carve_f(c, T * KV);
    f->v = fwd_carve_f(c, T * KV);
    f->kp = fwd_carve(c, (size_t)f->NKV * kvb);
    f->vh = fwd_carve_f(c, T * KV);
    f->scores = fwd_carve_f(c, (size_t)f->NH * T * T);
    f->ao = fwd_carve_f(c, T * Q);
    f->gate = fwd_carve_f(c, T * (size_t)f->FF);
    f->up = fwd_carve_f(c, T * (size_t)f->FF);
    f->cos_t = fwd_carve_f(c, T * half);
    f->sin_t = fwd_carve_f(c, T * half);
    f->lg = cfg->logits ? fwd_carve_f(c, T * (size_t)f->V) : NULL;
    f->tap_hs = cfg->tap_headsum_workers > 0 ? fwd_carve(c, f->ops->tap_bytes(f->NH, (int)T, cfg->tap_headsum_workers)) : NULL;
    f->xp = m->parallel_residual ? fwd_carve_f(c, T * C) : NULL;
    f->cos_l = m->inv_freq_local ? fwd_carve_f(c, T * half) : NULL;
    f->sin_l = m->inv_freq_local ? fwd_carve_f(c, T * half) : NULL;
    f->kc = cfg->kv_cache ? fwd_carve(c, (size_t)cfg->n_layers * f->NKV * kvb) : NULL;
    f->vc = cfg->kv_cache ? fwd_carve_f(c, (size_t)cfg->n_layers * T * KV) : NULL;
    if (m->n_experts) { /* MoE routing and gathering (the int32 arrays carved as 4-byte floats) */
        const size_t E = (size_t)m->n_experts, K = (size_t)m->n_experts_used;
        f->moe_p = fwd_carve_f(c, T * E);
        f->moe_w = fwd_carve_f(c, T * K);
        f->moe_sel = (int32_t *)fwd_carve_f(c, T * K);
        f->moe_rows = (int32_t *)fwd_carve_f(c, T * K);
        f->moe_xg = fwd_carve_f(c, T * C);
        f->moe_y = fwd_carve_f(c, T * C);
        f->moe_sg = m->ffn_shexp > 0 ? fwd_carve_f(c, T * (size_t)m->ffn_shexp) : NULL;
        f->moe_su = m->ffn_shexp > 0 ? fwd_carve_f(c, T * (size_t)m->ffn_shexp) : NULL;
        f->moe_sl = m->ffn_shexp > 0 ? fwd_carve_f(c, T) : NULL;
    }
    /* the RoPE frequencies, uploaded once per worker (the loader's host arrays) */
    f->inv_freq = f->R > 0 && m->inv_freq ? fwd_carve_f(c, half) : NULL;
    f->inv_freq_long = f->R > 0 && m->inv_freq_long ? fwd_carve_f(c, half) : NULL;
    f->inv_freq_local = f->R > 0 && m->inv_freq_local ? fwd_carve_f(c, half) : NULL;
}

/* f's dims, config, instance and kernel (nothing allocated). */
static void fwd_set(MpFwd *f, MpModel *m, const MpFwdConfig *cfg, const MpFwdOps *ops, int kernel) {
    f->m = m;
    f->cfg = *cfg;
    f->ops = ops;
    f->kernel = (MpFwdKernel)kernel;
    f->C = m->dim;
    f->NH = m->n_heads;
    f->NKV = m->n_kv_heads;
    f->HS = m->head_dim;
    f->FF = m->ffn;
    f->V = m->vocab;
    f->R = m->rot_dim;
}

void mp_fwd_plan_bytes(const MpModel *m, const MpFwdConfig *cfg, uint64_t *weights, uint64_t *acts) {
    MpErr e;
    const MpFwdOps *ops = fwd_ops(cfg, &e);
    int kernel = fwd_kernel(cfg, &e);
    if (!ops) ops = &mp_fwd_ops_cpu; /* a device not built: refused at init, estimated as the CPU */
    if (kernel < 0) kernel = mp_fwd_kernel_choose(NULL, cfg->compute == MP_FWD_COMPUTE_BF16, NULL, 0);
    const FwdPlan p = {ops, kernel, cfg->compute == MP_FWD_COMPUTE_BF16 ? MP_FWD_DT_BF16 : MP_FWD_DT_F32};
    FwdCarve cw = {0}, ca = {0};
    MpFwdWeights W;
    MpFwd f;
    memset(&W, 0, sizeof W);
    memset(&f, 0, sizeof f);
    fwd_set(&f, (MpModel *)m, cfg, ops, kernel);
    fwd_layout_weights(&cw, &p, &W, m, cfg);
    fwd_layout_acts(&ca, &f, m, cfg);
    *weights = (uint64_t)cw.used;
    *acts = (uint64_t)ca.used;
}

/* ================================================================ weight loading */

/* Drops the process's pages of the mapped tensor behind (role, layer) — they were packed and
 * will not be read again (the embedding: its rows are read again on the next run, from the page
 * cache). Only for file mappings: a borrowed buffer (fuzzer) is left alone. Advisory: errors are
 * ignored. */
static void fwd_release_tensor(const MpModel *m, int tensor) {
    if (tensor < 0) return;
    const MpModelTensor *t = &m->tensors[tensor];
    const int mapped = m->gguf ? m->gguf->map.mapped : (m->st && t->file >= 0 && t->file < m->n_files) ? m->st[t->file].map.mapped : 0;
    if (!mapped || !t->nbytes) return;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = (uintptr_t)t->data & ~(pg - 1), b = ((uintptr_t)t->data + t->nbytes + pg - 1) & ~(pg - 1);
    (void)madvise((void *)a, (size_t)(b - a), MADV_DONTNEED);
}

static void fwd_release_mapped(const MpModel *m, MpRole role, int layer) {
    const MpModelRef *r = mp_model_role_is_global(role) ? &m->global[role]
                          : (layer >= 0 && layer < m->n_layers) ? &m->layer[(size_t)layer * MP_ROLE_COUNT + role] : NULL;
    if (r) fwd_release_tensor(m, r->tensor);
}

/* The loading's host side: the model, the instance and the worker's ctx that uploads, and a
 * scratch of cap floats (one whole f32 tensor, or one panel of 32 rows of a bf16 one, or a vector). */
typedef struct FwdLoad {
    MpModel *m;
    const MpFwdOps *ops;
    MpFwdCtx *ctx;
    float *scratch;
    size_t cap;
} FwdLoad;

/* dst (n floats, the instance's) <- the 1-D tensor (role, layer), which must hold exactly n values. */
static int fwd_load_vec(const FwdLoad *L, MpRole role, int layer, float *dst, int64_t n, MpErr *e) {
    MpModel *m = L->m;
    int64_t s[2];
    if (!mp_model_shape(m, role, layer, s)) return mp_err_set(e, "%s: layer %d has no '%s' tensor", m->path, layer, mp_model_role_name(role));
    if (s[0] * s[1] != n)
        return mp_err_set(e, "%s: layer %d '%s' has %lld values, expected %lld", m->path, layer, mp_model_role_name(role),
                          (long long)(s[0] * s[1]), (long long)n);
    if ((size_t)n > L->cap) return mp_err_set(e, "internal: vector scratch");
    if (mp_model_tensor_f32(m, role, layer, L->scratch, (size_t)n, NULL, e) != MP_OK) return MP_ERR;
    L->ops->upload(L->ctx, dst, L->scratch, sizeof(float) * (size_t)n);
    return MP_OK;
}

/* w <- rows of W [out, in] read by rows(r0, n, scratch): bf16 one panel of 32 rows at a time (never a
 * whole f32 copy), f32 the whole tensor at once; each range uploaded through the instance. */
typedef int (*FwdRowsFn)(const FwdLoad *L, const void *arg, int64_t r0, int64_t n, MpErr *e);
static int fwd_load_rows(const FwdLoad *L, MpFwdWeight *w, FwdRowsFn rows, const void *arg, MpErr *e) {
    const int64_t step = w->dtype == MP_FWD_DT_BF16 ? 32 : w->out;
    for (int64_t r0 = 0; r0 < w->out; r0 += step) {
        const int64_t n = w->out - r0 < step ? w->out - r0 : step;
        if ((size_t)(n * w->in) > L->cap) return mp_err_set(e, "internal: weight scratch");
        if (rows(L, arg, r0, n, e) != MP_OK) return MP_ERR;
        L->ops->weight_upload(L->ctx, w, L->scratch, r0, n);
    }
    return MP_OK;
}

typedef struct FwdTensorArg {
    MpRole role;
    int layer, expert; /* expert < 0: a plain tensor */
} FwdTensorArg;

static int fwd_rows_tensor(const FwdLoad *L, const void *arg, int64_t r0, int64_t n, MpErr *e) {
    const FwdTensorArg *a = arg;
    if (a->expert >= 0) return mp_model_expert_rows_f32(L->m, a->role, a->layer, a->expert, r0, n, L->scratch, e);
    return mp_model_rows_f32(L->m, a->role, a->layer, r0, n, L->scratch, e);
}

/* w <- (role, layer) [out, in]; its mapped pages released once uploaded. */
static int fwd_load_mat(const FwdLoad *L, MpRole role, int layer, MpFwdWeight *w, MpErr *e) {
    MpModel *m = L->m;
    int64_t s[2];
    if (mp_model_shape(m, role, layer, s) != 2) return mp_err_set(e, "%s: layer %d has no 2-D '%s' tensor", m->path, layer, mp_model_role_name(role));
    if (s[0] != w->out || s[1] != w->in)
        return mp_err_set(e, "%s: layer %d '%s' is [%lld, %lld], expected [%lld, %lld]", m->path, layer,
                          mp_model_role_name(role), (long long)s[0], (long long)s[1], (long long)w->out, (long long)w->in);
    const FwdTensorArg a = {role, layer, -1};
    if (fwd_load_rows(L, w, fwd_rows_tensor, &a, e) != MP_OK) return MP_ERR;
    fwd_release_mapped(m, role, layer);
    return MP_OK;
}

/* w <- expert j's (role, layer) [out, in] (GATE_EXPS, UP_EXPS, DOWN_EXPS), as fwd_load_mat does;
 * the pages of its tensor are released once the layer's last expert is uploaded (GGUF: one tensor
 * holds them all). */
static int fwd_load_expert(const FwdLoad *L, MpRole role, int layer, int j, MpFwdWeight *w, MpErr *e) {
    MpModel *m = L->m;
    int64_t s[2];
    if (!mp_model_expert_shape(m, role, layer, j, s) || s[0] != w->out || s[1] != w->in)
        return mp_err_set(e, "%s: layer %d has no [%lld, %lld] expert %d '%s'", m->path, layer, (long long)w->out, (long long)w->in, j,
                          mp_model_role_name(role));
    const FwdTensorArg a = {role, layer, j};
    if (fwd_load_rows(L, w, fwd_rows_tensor, &a, e) != MP_OK) return MP_ERR;
    if (m->format == MP_FORMAT_HF || j == m->n_experts - 1) fwd_release_tensor(m, mp_model_expert_tensor(m, role, layer, j));
    return MP_OK;
}

/* Layer l's weights: every slot of the plan its family holds, then (MoE) its experts. */
static int fwd_load_layer(const FwdLoad *L, MpFwdLayer *ly, int l, MpErr *e) {
    MpModel *m = L->m;
    const MpRoleDims rd = mp_model_role_dims(m);
    int rc = MP_OK;
    for (size_t i = 0; i < FWD_NSLOTS && rc == MP_OK; i++) {
        const FwdSlot *s = &fwd_slots[i];
        int64_t rows, cols;
        if (!mp_family_has(m->arch, s->role)) continue;
        mp_role_shape(s->role, &rd, &rows, &cols);
        rc = s->mat ? fwd_load_mat(L, s->role, l, fwd_slot_mat(ly, s), e) : fwd_load_vec(L, s->role, l, *fwd_slot_vec(ly, s), rows * cols, e);
    }
    for (int k = 0; k < 3 && rc == MP_OK; k++)
        for (int j = 0; j < m->n_experts && rc == MP_OK; j++)
            rc = fwd_load_expert(L, (MpRole)(MP_ROLE_GATE_EXPS + k), l, j, &ly->exps[(size_t)j * 3 + (size_t)k], e);
    return rc;
}

/* Floats of the host scratch: the largest f32 tensor (bf16: 32 rows of it) or vector loaded. */
static size_t fwd_load_cap(const MpFwd *f) {
    const MpModel *m = f->m;
    const int64_t sizes[][2] = {{(int64_t)f->NH * f->HS, f->C}, {f->C, (int64_t)f->NH * f->HS}, {f->FF, f->C},
                                {f->C, f->FF}, {f->cfg.logits ? f->V : 0, f->C}, {m->n_experts, f->C},
                                {m->ffn_shexp, f->C}, {f->C, m->ffn_shexp}};
    size_t cap = (size_t)f->C;
    if ((size_t)f->FF > cap) cap = (size_t)f->FF;
    if ((size_t)f->NH * f->HS > cap) cap = (size_t)f->NH * f->HS;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const size_t rows = f->cfg.compute == MP_FWD_COMPUTE_BF16 && sizes[i][0] > 32 ? 32 : (size_t)sizes[i][0];
        if (rows * (size_t)sizes[i][1] > cap) cap = rows * (size_t)sizes[i][1];
    }
    return cap;
}

/* The weights of layers [0, n_layers) (+ the output head) into f->w, through f's ctx. */
static int fwd_load(MpFwd *f, MpErr *e) {
    FwdLoad L = {.m = f->m, .ops = f->ops, .ctx = f->ctx, .cap = fwd_load_cap(f)};
    L.scratch = malloc(sizeof(float) * L.cap);
    if (!L.scratch) return mp_err_set(e, "out of memory for a %zu-float weight scratch buffer", L.cap);
    MpFwdWeights *W = f->w;
    int rc = MP_OK;
    for (int l = 0; l < f->cfg.n_layers && rc == MP_OK; l++) rc = fwd_load_layer(&L, &W->layers[l], l, e);
    if (rc == MP_OK && f->cfg.logits) {
        rc = fwd_load_vec(&L, MP_ROLE_OUTPUT_NORM, 0, W->out_norm, f->C, e);
        if (rc == MP_OK) rc = fwd_load_mat(&L, MP_ROLE_OUTPUT, 0, &W->lm_head, e);
        if (rc == MP_OK && W->out_norm_b) rc = fwd_load_vec(&L, MP_ROLE_OUTPUT_NORM_BIAS, 0, W->out_norm_b, f->C, e);
    }
    free(L.scratch);
    return rc;
}

/* ================================================================ set-up */

static int fwd_config_check(const MpModel *m, const MpFwdConfig *cfg, MpErr *e) {
    if (cfg->n_layers < 1 || cfg->n_layers > m->n_layers) return mp_err_set(e, "layers: asked for %d, the model has %d", cfg->n_layers, m->n_layers);
    if (cfg->logits && cfg->n_layers != m->n_layers)
        return mp_err_set(e, "logits need all %d layers (asked for %d)", m->n_layers, cfg->n_layers);
    if (cfg->max_seq < 1 || cfg->max_seq > (1 << 20)) return mp_err_set(e, "sequence length %d out of range", cfg->max_seq);
    if (m->n_kv_heads < 1 || m->n_heads % m->n_kv_heads)
        return mp_err_set(e, "%s: %d query heads are not a multiple of %d key/value heads", m->path, m->n_heads, m->n_kv_heads);
    if (m->rot_dim < 0 || m->rot_dim > m->head_dim || m->rot_dim % 2)
        return mp_err_set(e, "%s: rotary dims %d do not fit head_dim %d", m->path, m->rot_dim, m->head_dim);
    if (cfg->compute != MP_FWD_COMPUTE_F32 && cfg->compute != MP_FWD_COMPUTE_BF16 && cfg->compute != MP_FWD_COMPUTE_F32_PLAIN)
        return mp_err_set(e, "compute mode %d unknown (f32 or bf16)", cfg->compute);
    if (cfg->kv_cache && !cfg->causal) return mp_err_set(e, "a key/value cache needs the causal mask");
    if (cfg->rope_unrotated < 0 || cfg->rope_unrotated > m->rot_dim / 2)
        return mp_err_set(e, "unrotated RoPE pairs: %d of %d", cfg->rope_unrotated, m->rot_dim / 2);
    return MP_OK;
}

static int fwd_oom(double wbytes, double abytes, MpErr *e) {
    return mp_err_set(e, "cannot allocate %.1f MiB of weights + %.1f MiB of activations; HINT: fewer --layers or a shorter --seq",
                      wbytes / 1048576.0, abytes / 1048576.0);
}

/* f's weights: the handles (host), the block (the instance's), carved; not yet loaded. */
static int fwd_weights_alloc(MpFwd *f, size_t *bytes) {
    const MpModel *m = f->m;
    const FwdPlan p = {f->ops, f->kernel, f->cfg.compute == MP_FWD_COMPUTE_BF16 ? MP_FWD_DT_BF16 : MP_FWD_DT_F32};
    MpFwdWeights *W = f->w = calloc(1, sizeof *W);
    f->w_owner = 1;
    if (!W || !(W->layers = calloc((size_t)f->cfg.n_layers, sizeof *W->layers))) return MP_ERR;
    if (m->n_experts > 0 && !(W->expmats = calloc((size_t)f->cfg.n_layers * (size_t)m->n_experts * 3, sizeof *W->expmats))) return MP_ERR;
    FwdCarve c = {0};
    fwd_layout_weights(&c, &p, W, m, &f->cfg);
    *bytes = W->bytes = c.used;
    if (!(W->block = f->ops->alloc(f->ctx, c.used ? c.used : 64))) return MP_ERR;
    c = (FwdCarve){.base = W->block};
    fwd_layout_weights(&c, &p, W, m, &f->cfg);
    return MP_OK;
}

/* One RoPE frequency table (bytes: R/2 floats) to the instance: the loader's, with the last
 * cfg.rope_unrotated entries (the lowest frequencies; p-RoPE, --rope-keep-high) set to 0, so their
 * cos is 1 and their sin 0 (times longrope's attention factor, as every pair): those dims pass
 * unrotated. The copy is freed once upload returns: a pageable host buffer has been read by then
 * (CUDA's cudaMemcpyAsync from pageable memory stages it before returning). */
static int fwd_upload_freq(MpFwd *f, void *dst, const float *src, size_t bytes) {
    const int half = (int)(bytes / sizeof(float));
    const int drop = f->cfg.rope_unrotated < half ? f->cfg.rope_unrotated : half;
    if (drop <= 0) {
        f->ops->upload(f->ctx, dst, src, bytes);
        return MP_OK;
    }
    float *t = malloc(bytes);
    if (!t) return MP_ERR;
    memcpy(t, src, bytes);
    for (int p = half - drop; p < half; p++) t[p] = 0.0f;
    f->ops->upload(f->ctx, dst, t, bytes);
    free(t);
    return MP_OK;
}

/* f's activations (the instance's block, carved), its host staging when the instance's memory is
 * not host memory, and the RoPE frequencies uploaded. */
static int fwd_acts_alloc(MpFwd *f, size_t *bytes) {
    const MpModel *m = f->m;
    const size_t T = (size_t)f->cfg.max_seq, half = sizeof(float) * (size_t)(f->R / 2);
    FwdCarve c = {0};
    fwd_layout_acts(&c, f, m, &f->cfg);
    *bytes = c.used;
    if (!(f->ablock = f->ops->alloc(f->ctx, c.used ? c.used : 64))) return MP_ERR;
    f->afloats = c.used / sizeof(float);
    c = (FwdCarve){.base = (char *)f->ablock};
    fwd_layout_acts(&c, f, m, &f->cfg);
    if (m->n_experts && !(f->moe_cnt = calloc((size_t)m->n_experts, sizeof *f->moe_cnt))) return MP_ERR;
    if (!f->ops->host_memory) {
        const size_t w = (size_t)(f->C > f->NH * f->HS ? f->C : f->NH * f->HS);
        if (!(f->tap_host = malloc(sizeof(float) * T * w)) || !(f->emb_host = malloc(sizeof(float) * T * (size_t)f->C))) return MP_ERR;
        if (f->cfg.logits && !(f->logits_host = malloc(sizeof(float) * T * (size_t)f->V))) return MP_ERR;
    }
    f->logits = f->cfg.logits ? (f->ops->host_memory ? f->lg : f->logits_host) : NULL;
    if (f->inv_freq && fwd_upload_freq(f, f->inv_freq, m->inv_freq, half) != MP_OK) return MP_ERR;
    if (f->inv_freq_long && fwd_upload_freq(f, f->inv_freq_long, m->inv_freq_long, half) != MP_OK) return MP_ERR;
    if (f->inv_freq_local && fwd_upload_freq(f, f->inv_freq_local, m->inv_freq_local, half) != MP_OK) return MP_ERR;
    return MP_OK;
}

/* The instance of cfg checked against this build's interface, and a ctx of it for f. */
static int fwd_open(MpFwd *f, MpModel *m, const MpFwdConfig *cfg, MpErr *e) {
    if (fwd_config_check(m, cfg, e) != MP_OK) return MP_ERR;
    const int kernel = fwd_kernel(cfg, e);
    if (kernel < 0) return MP_ERR;
    const MpFwdOps *ops = fwd_ops(cfg, e);
    if (!ops) return MP_ERR;
    if (ops->abi != MP_FWD_OPS_ABI)
        return mp_err_set(e, "backend '%s' implements interface version %u, this build needs %u; HINT: rebuild it", ops->name, ops->abi,
                          MP_FWD_OPS_ABI);
    const int dtype = cfg->compute == MP_FWD_COMPUTE_BF16 ? MP_FWD_DT_BF16 : MP_FWD_DT_F32;
    if (!(ops->dtypes & MP_FWD_DT_BIT(dtype)))
        return mp_err_set(e, "backend '%s' cannot hold %s weights (--compute %s)", ops->name, dtype == MP_FWD_DT_BF16 ? "bf16" : "f32",
                          mp_fwd_compute_name(cfg->compute));
    if (m->n_experts && !ops->moe_route)
        return mp_err_set(e, "backend '%s' has no mixture-of-experts ops (%s, %d experts)", ops->name, m->path, m->n_experts);
    fwd_set(f, m, cfg, ops, kernel);
    return (f->ctx = ops->open(cfg->device, kernel, e)) ? MP_OK : MP_ERR;
}

int mp_fwd_init(MpFwd *f, MpModel *m, const MpFwdConfig *cfg, MpErr *e) {
    memset(f, 0, sizeof *f);
    if (fwd_open(f, m, cfg, e) != MP_OK) {
        mp_fwd_free(f);
        return MP_ERR;
    }
    size_t wb = 0, ab = 0;
    if (fwd_weights_alloc(f, &wb) != MP_OK || fwd_acts_alloc(f, &ab) != MP_OK) {
        mp_fwd_free(f);
        return fwd_oom((double)wb, (double)ab, e);
    }
    if (fwd_load(f, e) != MP_OK) {
        mp_fwd_free(f);
        return MP_ERR;
    }
    return MP_OK;
}

int mp_fwd_init_worker(MpFwd *f, const MpFwd *src, MpErr *e) {
    memset(f, 0, sizeof *f);
    fwd_set(f, src->m, &src->cfg, src->ops, src->kernel);
    f->w = src->w; /* borrowed: one copy of the weights per device */
    if (!(f->ctx = f->ops->open(f->cfg.device, f->kernel, e))) {
        mp_fwd_free(f);
        return MP_ERR;
    }
    size_t ab = 0;
    if (fwd_acts_alloc(f, &ab) != MP_OK) {
        mp_fwd_free(f);
        return fwd_oom(0, (double)ab, e);
    }
    return MP_OK;
}

void mp_fwd_free(MpFwd *f) {
    if (f->ops) { /* nothing of the instance's without a ctx */
        if (f->ablock) f->ops->free(f->ctx, f->ablock);
        if (f->w_owner && f->w && f->w->block) f->ops->free(f->ctx, f->w->block);
        if (f->ctx) f->ops->close(f->ctx);
    }
    if (f->w_owner && f->w) {
        free(f->w->layers);
        free(f->w->expmats);
        free(f->w);
    }
    free(f->tap_host);
    free(f->emb_host);
    free(f->logits_host);
    free(f->moe_cnt);
    memset(f, 0, sizeof *f);
}

double mp_fwd_flops(const MpFwd *f, int T) {
    const double C = f->C, q = (double)f->NH * f->HS, kv = (double)f->NKV * f->HS;
    const double FF = f->m->n_experts ? (double)f->FF * f->m->n_experts_used + f->m->ffn_shexp : f->FF; /* MoE: the K experts a token uses (+ qwen2moe's shared one) */
    const double per_tok = 2.0 * (C * q + 2 * C * kv + q * C + 3 * C * FF + C * f->m->n_experts);
    const double pairs = f->cfg.causal ? (double)T * (T + 1) / 2 : (double)T * T;
    const double attn = 2.0 * 2.0 * pairs * f->HS * f->NH;
    double fl = f->cfg.n_layers * ((double)T * per_tok + attn);
    if (f->cfg.logits) fl += 2.0 * T * C * f->V;
    return fl;
}

/* ================================================================ one layer */

/* Rows [t0, T) of one run: t0 = 0 for mp_fwd_run (keys, values and scores of this run, row
 * stride T), t0 >= 0 for mp_fwd_extend (keys and values of positions [0, t0) already in the
 * cache; everything with row stride max_seq). Activation rows are positions. */
typedef struct FwdRows {
    int t0, T;
    int cached; /* 1: mp_fwd_extend */
} FwdRows;

/* y [n, O] (row stride ldy) = x [n, K] · Wᵀ through the instance. */
static void fwd_matmul(const MpFwd *f, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdWeight *w, int64_t n) {
    f->ops->matmul(f->ctx, y, ldy, x, ldx, w, n);
}

/* Rows [t0, T) of y (row stride ld) += b [n]; no bias (b NULL): nothing. */
static void fwd_add_bias(const MpFwd *f, float *y, int64_t ld, const float *b, int64_t n, int t0, int T) {
    if (b) f->ops->add_bias(f->ctx, y + (size_t)t0 * (size_t)ld, ld, b, n, T - t0);
}

/* RMSNorm of rows [t0, T) of x [T, C] with weight w [C] into y; without a weight (olmo2 has no
 * pre-norm: the block reads the residual stream as it is) a copy. */
static void fwd_norm_rows(const MpFwd *f, float *y, const float *x, const float *w, int t0, int T) {
    const size_t o = (size_t)t0 * f->C;
    if (!w) f->ops->copy(f->ctx, y + o, x + o, (size_t)(T - t0) * f->C);
    else f->ops->rmsnorm(f->ctx, y + o, x + o, w, T - t0, f->C, f->m->norm_eps);
}

/* The block's norm of rows [t0, T): RMSNorm, or LayerNorm with bias b (gptneox). */
static void fwd_norm(const MpFwd *f, float *y, const float *x, const float *w, const float *b, int t0, int T) {
    const size_t o = (size_t)t0 * f->C;
    if (f->m->layer_norm) f->ops->layernorm(f->ctx, y + o, x + o, w, b, T - t0, f->C, f->m->norm_eps);
    else fwd_norm_rows(f, y, x, w, t0, T);
}

/* bf16 compute: rows [t0, T) of a Linear input x [T, n] (row stride ld) rounded to bf16 in place
 * (it is read by matmuls only). f32 compute: nothing. */
static void fwd_linear_input(const MpFwd *f, float *x, int64_t ld, int t0, int T, int64_t n) {
    if (f->cfg.compute == MP_FWD_COMPUTE_BF16) f->ops->bf16_round(f->ctx, x + (size_t)t0 * (size_t)ld, ld, T - t0, n);
}

/* Where a run's keys (the instance's layout) and values (contiguous per kv head) live: the run's
 * own buffers (row stride T) or, for mp_fwd_extend, the layer's cache (row stride max_seq). */
typedef struct FwdKV {
    void *kp;   /* [NKV] heads of kvb bytes */
    float *vh;  /* [NKV, ldt, HS] */
    size_t kvb; /* bytes of one kv head's keys */
    int ldt;    /* rows of keys, values and scores: T, or max_seq when cached */
} FwdKV;

static FwdKV fwd_kv(const MpFwd *f, int layer, FwdRows r) {
    FwdKV kv;
    kv.ldt = r.cached ? f->cfg.max_seq : r.T;
    kv.kvb = f->ops->kv_bytes(f->HS, kv.ldt);
    kv.kp = r.cached ? (char *)f->kc + (size_t)layer * f->NKV * kv.kvb : f->kp;
    kv.vh = r.cached ? f->vc + (size_t)layer * f->NKV * kv.ldt * f->HS : f->vh;
    return kv;
}

/* Was (layer, point) asked for before the run (cfg.tap_layers / tap_points; both 0: all)? */
static int fwd_tapped(const MpFwd *f, int layer, int point) {
    const uint64_t lm = f->cfg.tap_layers;
    const unsigned pm = f->cfg.tap_points;
    if ((f->skip_points >> point) & 1u) return 0; /* left out of this run */
    if (!lm && !pm) return 1;
    return (!lm || ((lm >> (layer < 63 ? layer : 63)) & 1)) && (!pm || ((pm >> point) & 1));
}

/* Was layer asked for (cfg.tap_layers; 0: every layer)? */
static int fwd_tapped_layer(const MpFwd *f, int layer) {
    return !f->cfg.tap_layers || ((f->cfg.tap_layers >> (layer < 63 ? layer : 63)) & 1);
}

/* A capture point (mp_fwd_run only: every row is this run's), in place on host memory, else its
 * rows copied to the host first. */
static void fwd_capture(const MpFwd *f, FwdRows r, int layer, int point, const float *x, int width) {
    if (!f->capture || r.cached || !fwd_tapped(f, layer, point)) return;
    if (!f->ops->host_memory) {
        f->ops->to_host(f->ctx, f->tap_host, x, sizeof(float) * (size_t)r.T * (size_t)width);
        x = f->tap_host;
    }
    f->capture(f->capture_ctx, layer, point, x, r.T, width);
}

/* Rows [t0, T): q [T, NH*HS], k, v [T, NKV*HS] of the normed input f->xn — projections, biases,
 * then (qk_prepare) the per-head q/k norm (qwen3, olmo2), RoPE, the keys packed and the values
 * per kv head into kv (for mp_fwd_extend, the cache). */
static void fwd_attn_project(MpFwd *f, const MpFwdLayer *ly, int layer, FwdRows r, const FwdKV *kv) {
    const int t0 = r.t0, T = r.T, n = T - t0;
    const int64_t ldq = (int64_t)f->NH * f->HS, ldk = (int64_t)f->NKV * f->HS;
    /* RoPE in this layer: not switched off (--no-rope) nor a NoPE layer of the checkpoint */
    const int rope = f->cfg.rope && f->R > 0 && (!f->m->rope_layer || f->m->rope_layer[layer]);
    /* gemma3: the sliding-window layers rotate with their own base */
    const int local = f->cos_l && f->m->layer_local && f->m->layer_local[layer];
    const float *xn = f->xn + (size_t)t0 * f->C;
    fwd_linear_input(f, f->xn, f->C, t0, T, f->C);
    fwd_matmul(f, f->q + (size_t)t0 * ldq, ldq, xn, f->C, &ly->q, n);
    fwd_matmul(f, f->k + (size_t)t0 * ldk, ldk, xn, f->C, &ly->k, n);
    fwd_matmul(f, f->v + (size_t)t0 * ldk, ldk, xn, f->C, &ly->v, n);
    fwd_add_bias(f, f->q, ldq, ly->q_bias, ldq, t0, T);
    fwd_add_bias(f, f->k, ldk, ly->k_bias, ldk, t0, T);
    fwd_add_bias(f, f->v, ldk, ly->v_bias, ldk, t0, T);
    const MpFwdQKV a = {
        .q = f->q, .k = f->k, .v = f->v, .kp = kv->kp, .vh = kv->vh, .kv_head = kv->kvb, .q_norm = ly->q_norm, .k_norm = ly->k_norm,
        .cos = rope ? (local ? f->cos_l : f->cos_t) : NULL, .sin = rope ? (local ? f->sin_l : f->sin_t) : NULL,
        .t0 = t0, .T = T, .ldt = kv->ldt, .NH = f->NH, .NKV = f->NKV, .HS = f->HS, .R = f->R,
        .norm_whole = f->m->qk_norm_whole, .eps = f->m->norm_eps,
    };
    f->ops->qk_prepare(f->ctx, &a);
    fwd_capture(f, r, layer, MP_FWD_AT_Q, f->q, (int)ldq);
    fwd_capture(f, r, layer, MP_FWD_AT_K, f->k, (int)ldk);
}

/* The taps of layer `layer` (mp_fwd_run only): the rows hooks on the layers asked for, else the
 * layer hook; the probabilities hook. */
static MpFwdTaps fwd_taps(const MpFwd *f, int layer, MpFwdHook hook, void *ctx) {
    MpFwdTaps tp = {.probs = f->probs_hook, .probs_ctx = f->probs_ctx, .device = f->tap_device};
    if ((f->rows_hook.rows || f->rows_headsum) && fwd_tapped_layer(f, layer)) {
        tp.rows_hook = f->rows_hook;
        tp.headsum = f->rows_headsum;
    } else if (hook) {
        tp.scores = hook;
        tp.scores_ctx = ctx;
    }
    return tp;
}

/* Rows [t0, T) of f->ao = the layer's attention (one op: scores, soft-cap, window, the taps,
 * softmax, p·V), after the scores check is planned from max |q| and max |k| (the amax reduction).
 * scores_only: stop once the taps have seen the scores (the last layer of a run without logits:
 * nothing reads on). After it, f->scores holds the layer's post-softmax probabilities. */
static void fwd_attn_core(MpFwd *f, int layer, FwdRows r, const FwdKV *kv, MpFwdHook hook, void *ctx, int scores_only) {
    const int NH = f->NH, HS = f->HS, T = r.T, n = T - r.t0;
    const int W = mp_model_layer_window(f->m, layer);
    const float scale = f->m->attn_scale > 0 ? (float)f->m->attn_scale : (float)(1.0 / sqrt((double)HS)); /* gemma: query_pre_attn_scalar */
    const MpFwdSpan qk[2] = {{f->q + (size_t)r.t0 * NH * HS, (size_t)n * NH * HS}, {f->k + (size_t)r.t0 * f->NKV * HS, (size_t)n * f->NKV * HS}};
    uint32_t amax[2];
    f->ops->amax(f->ctx, amax, qk, 2);
    mp_fwd_check_scores_plan(&f->chk, amax[0], amax[1], HS, scale, r.cached);
    const MpFwdAttn a = {
        .o = f->ao, .s = f->scores, .q = f->q, .kp = kv->kp, .vh = kv->vh, .kv_head = kv->kvb, .tap_hs = f->tap_hs, .chk = &f->chk,
        .layer = layer, .t0 = r.t0, .T = T, .ldt = kv->ldt, .NH = NH, .NKV = f->NKV, .HS = HS, .causal = f->cfg.causal,
        .window = W > 0 && T > W ? W : 0, /* within the window: nothing masked */
        .scale = scale, .softcap = (float)f->m->attn_softcap, .cached = r.cached, .scores_only = scores_only,
    };
    const MpFwdTaps tp = fwd_taps(f, layer, hook, ctx);
    f->ops->attention(f->ctx, &a, r.cached ? NULL : &tp);
}

/* scores_only: stop once the hook has seen the scores (the last layer of a run without logits:
 * nothing reads its output); mix_only: once ATTN_MIX is captured (nothing reads past it). */
static void fwd_attention(MpFwd *f, const MpFwdLayer *ly, int layer, FwdRows r, MpFwdHook hook, void *ctx, int scores_only,
                          int mix_only) {
    const int t0 = r.t0, n = r.T - t0;
    const int64_t ldq = (int64_t)f->NH * f->HS;
    const FwdKV kv = fwd_kv(f, layer, r);
    fwd_attn_project(f, ly, layer, r, &kv);
    fwd_attn_core(f, layer, r, &kv, hook, ctx, scores_only);
    if (scores_only) return;
    fwd_capture(f, r, layer, MP_FWD_AT_ATTN_MIX, f->ao, (int)ldq);
    if (mix_only) return;
    /* output projection + residual */
    float *xn = f->xn + (size_t)t0 * f->C, *ao = f->ao + (size_t)t0 * ldq;
    fwd_linear_input(f, f->ao, ldq, t0, r.T, ldq);
    fwd_matmul(f, xn, f->C, ao, ldq, &ly->o, n);
    fwd_add_bias(f, f->xn, f->C, ly->o_bias, f->C, t0, r.T); /* gptneox */
    if (ly->attn_post_norm) fwd_norm_rows(f, f->xn, f->xn, ly->attn_post_norm, t0, r.T); /* olmo2 */
    fwd_capture(f, r, layer, MP_FWD_AT_ATTN_OUT, f->xn, f->C);
    f->ops->add(f->ctx, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
    fwd_capture(f, r, layer, MP_FWD_AT_RESID_MID, f->x, f->C);
}

/* GPT-NeoX's MLP on the normed rows in f->xn: up (+bias) -> exact GELU -> down (+bias), added to x. */
static void fwd_mlp_gelu(MpFwd *f, const MpFwdLayer *ly, int t0, int T) {
    const int n = T - t0;
    float *xn = f->xn + (size_t)t0 * f->C, *up = f->up + (size_t)t0 * f->FF;
    fwd_linear_input(f, f->xn, f->C, t0, T, f->C);
    fwd_matmul(f, up, f->FF, xn, f->C, &ly->up, n);
    fwd_add_bias(f, f->up, f->FF, ly->up_bias, f->FF, t0, T);
    f->ops->gelu(f->ctx, up, up, (size_t)n * f->FF);
    fwd_linear_input(f, f->up, f->FF, t0, T, f->FF);
    fwd_matmul(f, xn, f->C, up, f->FF, &ly->down, n);
    fwd_add_bias(f, f->xn, f->C, ly->down_bias, f->C, t0, T);
    f->ops->add(f->ctx, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
}

/* qwen2moe's shared expert on rows [t0, T) of f->xn: its SwiGLU times sigmoid(shared_expert_gate . x)
 * (f32), added to the routed sum in f->moe_y (HF: final + sigmoid(gate) * shared; the backend's
 * moe_shared_mix). */
static void fwd_moe_shared(MpFwd *f, const MpFwdLayer *ly, int t0, int T) {
    const int C = f->C, FS = f->m->ffn_shexp, n = T - t0;
    const float *xn = f->xn + (size_t)t0 * C;
    fwd_matmul(f, f->moe_sg, FS, xn, C, &ly->shexp_gate, n);
    fwd_matmul(f, f->moe_su, FS, xn, C, &ly->shexp_up, n);
    f->ops->swiglu(f->ctx, f->moe_sg, f->moe_sg, f->moe_su, (size_t)n * FS);
    fwd_linear_input(f, f->moe_sg, FS, 0, n, FS);
    fwd_matmul(f, f->moe_xg, C, f->moe_sg, FS, &ly->shexp_down, n);
    f->ops->moe_shared_mix(f->ctx, f->moe_y + (size_t)t0 * C, f->moe_sl, f->moe_xg, xn, ly->shexp_gate_inp, n, C);
}

/* Expert j's SwiGLU of its cnt rows (gathered into f->moe_xg), each output row times its weight
 * added into the routed sum y [n, C]. */
static void fwd_moe_expert(MpFwd *f, const MpFwdWeight *w, float *y, const float *xn, const int32_t *sel, const float *wt, int j,
                           int cnt, int n) {
    const int K = f->m->n_experts_used, C = f->C, FF = f->FF;
    f->ops->moe_gather(f->ctx, f->moe_xg, f->moe_rows, xn, sel, j, n, K, C);
    fwd_matmul(f, f->gate, FF, f->moe_xg, C, &w[0], cnt);
    fwd_matmul(f, f->up, FF, f->moe_xg, C, &w[1], cnt);
    f->ops->swiglu(f->ctx, f->gate, f->gate, f->up, (size_t)cnt * FF);
    fwd_linear_input(f, f->gate, FF, 0, cnt, FF);
    fwd_matmul(f, f->moe_xg, C, f->gate, FF, &w[2], cnt);
    f->ops->moe_scatter(f->ctx, y, f->moe_xg, f->moe_rows, wt, cnt, K, C);
}

/* Mixture of experts (mixtral, qwen3moe, qwen2moe) on the normed rows [t0, T) of f->xn (Linear inputs already
 * rounded), the result into f->xn: router logits (a Linear), the routing (the backend's moe_route:
 * softmax, top-k, renormalised when m->moe_norm_topk), each expert's row count to the host (one
 * small copy), then expert by expert in index order (the order in which HF's loop adds them into
 * zeros). Only the experts that some row chose are computed. */
static void fwd_moe(MpFwd *f, const MpFwdLayer *ly, int t0, int T) {
    const int E = f->m->n_experts, K = f->m->n_experts_used, C = f->C, n = T - t0;
    float *xn = f->xn + (size_t)t0 * C, *p = f->moe_p + (size_t)t0 * E, *wt = f->moe_w + (size_t)t0 * K, *y = f->moe_y + (size_t)t0 * C;
    int32_t *sel = f->moe_sel + (size_t)t0 * K;
    fwd_matmul(f, p, E, xn, C, &ly->router, n);
    f->ops->moe_route(f->ctx, p, wt, sel, n, E, K, f->m->moe_norm_topk);
    f->ops->zero(f->ctx, y, (size_t)n * (size_t)C);
    f->ops->moe_count(f->ctx, f->moe_cnt, sel, n, K, E);
    for (int j = 0; j < E; j++)
        if (f->moe_cnt[j]) fwd_moe_expert(f, ly->exps + (size_t)j * 3, y, xn, sel, wt, j, f->moe_cnt[j], n);
    if (f->m->ffn_shexp > 0) fwd_moe_shared(f, ly, t0, T);
    f->ops->copy(f->ctx, xn, y, (size_t)n * (size_t)C);
}

static void fwd_mlp(MpFwd *f, const MpFwdLayer *ly, int layer, FwdRows r) {
    const int t0 = r.t0, T = r.T, n = T - t0;
    float *xn = f->xn + (size_t)t0 * f->C, *gate = f->gate + (size_t)t0 * f->FF, *up = f->up + (size_t)t0 * f->FF;
    if (f->m->gelu_mlp) { /* gptneox: input = ln2 of the layer's input (parallel) or of x now */
        if (f->xp) f->ops->copy(f->ctx, xn, f->xp + (size_t)t0 * f->C, (size_t)n * f->C);
        else fwd_norm(f, f->xn, f->x, ly->ffn_norm, ly->ffn_norm_b, t0, T);
        fwd_capture(f, r, layer, MP_FWD_AT_FFN_IN, f->xn, f->C);
        fwd_mlp_gelu(f, ly, t0, T);
        fwd_capture(f, r, layer, MP_FWD_AT_LAYER_OUT, f->x, f->C);
        return;
    }
    fwd_norm_rows(f, f->xn, f->x, ly->ffn_norm, t0, T);
    fwd_capture(f, r, layer, MP_FWD_AT_FFN_IN, f->xn, f->C);
    fwd_linear_input(f, f->xn, f->C, t0, T, f->C);
    if (f->m->n_experts) { /* mixtral, qwen3moe */
        fwd_moe(f, ly, t0, T);
    } else {
        fwd_matmul(f, gate, f->FF, xn, f->C, &ly->gate, n);
        fwd_matmul(f, up, f->FF, xn, f->C, &ly->up, n);
        if (f->m->geglu) f->ops->geglu(f->ctx, gate, gate, up, (size_t)n * f->FF); /* gemma */
        else f->ops->swiglu(f->ctx, gate, gate, up, (size_t)n * f->FF);
        fwd_linear_input(f, f->gate, f->FF, t0, T, f->FF);
        fwd_matmul(f, xn, f->C, gate, f->FF, &ly->down, n);
        if (ly->ffn_post_norm) fwd_norm_rows(f, f->xn, f->xn, ly->ffn_post_norm, t0, T); /* olmo2 */
    }
    f->ops->add(f->ctx, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
    fwd_capture(f, r, layer, MP_FWD_AT_LAYER_OUT, f->x, f->C);
}

/* ================================================================ checks */

/* A host view of n floats x of the instance's memory: x itself on host memory, else a copy made
 * into *own (the caller frees it). NULL when x is NULL or no memory is left. */
static const float *fwd_host_view(const MpFwd *f, const float *x, size_t n, float **own) {
    *own = NULL;
    if (!x || f->ops->host_memory) return x;
    if (!(*own = malloc(sizeof(float) * (n ? n : 1)))) return NULL;
    f->ops->to_host(f->ctx, *own, x, sizeof(float) * n);
    return *own;
}

/* A check failed in layer `layer`: its buffers read on the host (copied first from a device) and
 * searched in data-flow order for the tensor and the position to name (fwd_check.h). */
static int fwd_check_diagnose(MpFwd *f, int layer, FwdRows r, int scores_only, MpErr *e) {
    const int moe = f->m->n_experts > 0, ldt = r.cached ? f->cfg.max_seq : r.T;
    const size_t T = (size_t)r.T, ldq = (size_t)f->NH * f->HS, ldk = (size_t)f->NKV * f->HS;
    const struct {
        const float *x;
        size_t n;
    } src[8] = {{f->x, T * f->C}, {f->q, T * ldq}, {f->k, T * ldk}, {f->v, T * ldk}, {f->scores, (size_t)f->NH * ldt * ldt},
                {f->ao, T * ldq}, {moe ? NULL : f->up, T * f->FF}, {moe || f->m->gelu_mlp ? NULL : f->gate, T * f->FF}};
    float *own[8];
    const float *v[8];
    int lost = 0;
    for (int i = 0; i < 8; i++) lost |= (v[i] = fwd_host_view(f, src[i].x, src[i].n, &own[i])) == NULL && src[i].x;
    const MpFwdCheckBufs b = {
        .path = f->m->path, .layer = layer, .n_layers = f->m->n_layers, .x = v[0], .q = v[1], .k = v[2], .v = v[3],
        .probs = v[4], .ao = v[5], .up = v[6], .gate = v[7], .C = f->C, .FF = f->FF, .NH = f->NH, .ldt = ldt,
        .causal = f->cfg.causal, .gelu = f->m->gelu_mlp, .ldq = (int64_t)ldq, .ldk = (int64_t)ldk,
    };
    const int rc = lost ? mp_err_set(e, "%s: layer %d of %d: NaN or ±Inf, and no memory left to find where", f->m->path, layer + 1, f->m->n_layers)
                        : mp_fwd_check_layer(&f->chk, &b, r.t0, r.T, scores_only, e);
    for (int i = 0; i < 8; i++) free(own[i]);
    return rc;
}

/* Layer `layer`'s activations checked for NaN and ±Inf once it has run: the scores record (the
 * attention op's) and max |x| over rows [t0, T) (the amax reduction: a few bytes); the layer's
 * buffers are read only when one fails. */
static int fwd_check(MpFwd *f, int layer, FwdRows r, int scores_only, MpErr *e) {
    if (f->chk.row < 0) {
        if (scores_only) return MP_OK; /* x is not made */
        const MpFwdSpan xs = {f->x + (size_t)r.t0 * f->C, (size_t)(r.T - r.t0) * f->C};
        uint32_t bits;
        f->ops->amax(f->ctx, &bits, &xs, 1);
        if (bits < MP_FWD_CHECK_NONFINITE) return MP_OK;
    }
    return fwd_check_diagnose(f, layer, r, scores_only, e);
}

/* The logits of rows [t0, T) checked (amax; the first bad row named from a host view), then, for a
 * device, copied to f->logits: every row of the run or, with cfg.logits_last, the last. */
static int fwd_logits_out(MpFwd *f, FwdRows r, MpErr *e) {
    const size_t V = (size_t)f->V, t0 = (size_t)r.t0, n = (size_t)(r.T - r.t0);
    const MpFwdSpan s = {f->lg + t0 * V, n * V};
    uint32_t bits;
    f->ops->amax(f->ctx, &bits, &s, 1);
    if (bits >= MP_FWD_CHECK_NONFINITE) {
        float *own;
        const float *lg = fwd_host_view(f, f->lg, (size_t)r.T * V, &own);
        const int rc = lg ? mp_fwd_check_logits(lg, f->V, r.t0, r.T, f->m->path, e)
                          : mp_err_set(e, "%s: NaN or ±Inf in the logits, and no memory left to find where", f->m->path);
        free(own);
        return rc;
    }
    if (!f->ops->host_memory) {
        const size_t r0 = f->cfg.logits_last ? (size_t)r.T - 1 : t0;
        f->ops->to_host(f->ctx, f->logits_host + r0 * V, f->lg + r0 * V, sizeof(float) * ((size_t)r.T - r0) * V);
    }
    return MP_OK;
}

/* ================================================================ run */

/* Embeddings of positions [t0, T) into x: every id checked, the rows dequantised on the host from
 * the model's mapping (into x itself on host memory, else into host staging, then uploaded), then
 * gemma's scale through the instance. */
static int fwd_embed(MpFwd *f, const int32_t *ids, int t0, int T, MpErr *e) {
    for (int t = t0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= f->V) return mp_err_set(e, "token id %d at position %d is outside the vocabulary [0, %d)", ids[t], t, f->V);
    const size_t C = (size_t)f->C, n = (size_t)(T - t0);
    float *x = f->x + (size_t)t0 * C, *dst = f->ops->host_memory ? x : f->emb_host;
    for (int t = t0; t < T; t++)
        if (mp_model_rows_f32(f->m, MP_ROLE_TOK_EMBD, 0, ids[t], 1, dst + (size_t)(t - t0) * C, e) != MP_OK) return MP_ERR;
    if (!f->ops->host_memory) f->ops->upload(f->ctx, x, dst, sizeof(float) * n * C);
    if (f->m->embed_scale > 0) f->ops->scale(f->ctx, x, n * C, (float)f->m->embed_scale); /* gemma: x sqrt(C) */
    return MP_OK;
}

/* The RoPE tables of positions [0, T) from the uploaded frequencies: longrope's long table once a
 * run outgrows the original context (HF >= 4.48; mp_fwd_run only: long_ok), gemma3's local one. */
static void fwd_rope_tables(MpFwd *f, int T, int long_ok) {
    const MpModel *m = f->m;
    if (!f->cfg.rope || f->R <= 0) return;
    const float *inv = long_ok && f->inv_freq_long && m->rope_orig_ctx > 0 && T > m->rope_orig_ctx ? f->inv_freq_long : f->inv_freq;
    f->ops->rope_table(f->ctx, f->cos_t, f->sin_t, inv, f->R, T, m->rope_attn_factor > 0 ? m->rope_attn_factor : 1.0);
    if (f->cos_l) f->ops->rope_table(f->ctx, f->cos_l, f->sin_l, f->inv_freq_local, f->R, T, 1.0); /* gemma3 local layers */
}

/* The output head over rows [t0, T): the final norm, bf16 compute's rounding, lm_head, gemma2's
 * final soft-cap; then the check and the copy out. */
static int fwd_head(MpFwd *f, FwdRows r, MpErr *e) {
    const MpFwdWeights *W = f->w;
    const size_t t0 = (size_t)r.t0, n = (size_t)(r.T - r.t0), V = (size_t)f->V;
    fwd_norm(f, f->xn, f->x, W->out_norm, W->out_norm_b, r.t0, r.T);
    fwd_linear_input(f, f->xn, f->C, r.t0, r.T, f->C);
    fwd_matmul(f, f->lg + t0 * V, (int64_t)V, f->xn + t0 * f->C, f->C, &W->lm_head, (int64_t)n);
    if (f->m->final_softcap > 0) f->ops->softcap(f->ctx, f->lg + t0 * V, n * V, (float)f->m->final_softcap);
    return fwd_logits_out(f, r, e);
}

/* Where layer l stops. Every layer but the last of a run without logits runs through
 * (FWD_STOP_NONE). That last layer's softmax, values and MLP would feed nothing, so it stops after
 * its scores (FWD_STOP_SCORES) unless something reads past them — a capture point after the scores
 * asked for by name (cfg.tap_points less this run's skip_points, l among cfg.tap_layers, a capture
 * hook set): after the attention's mix of values (FWD_STOP_MIX) when ATTN_MIX is the last such
 * point, else through. The probabilities' hook runs the attention op to its end (fwd_layers) but
 * not the MLP. tap_points 0 ("every point") does not run it through: gram reads the last layer's
 * scores only. */
enum { FWD_STOP_NONE = 0, FWD_STOP_MIX, FWD_STOP_SCORES };
static int fwd_stop(const MpFwd *f, int l) {
    if (l != f->cfg.n_layers - 1 || f->cfg.logits) return FWD_STOP_NONE;
    const unsigned pm = f->cfg.tap_points & ~f->skip_points;
    const unsigned from_mix = ~((1u << MP_FWD_AT_ATTN_MIX) - 1u), past_mix = ~((2u << MP_FWD_AT_ATTN_MIX) - 1u);
    if (!(f->capture && (pm & from_mix) && fwd_tapped_layer(f, l))) return FWD_STOP_SCORES;
    return pm & past_mix ? FWD_STOP_NONE : FWD_STOP_MIX;
}

/* The layers and the output head over rows [t0, T) (embeddings and RoPE tables in place); each
 * layer's activations checked for NaN and ±Inf as it ends (fwd_check.h); the instance's errors
 * collected at the end (synchronize). */
static int fwd_layers(MpFwd *f, FwdRows r, MpFwdHook hook, void *ctx, MpErr *e) {
    for (int l = 0; l < f->cfg.n_layers; l++) {
        const MpFwdLayer *ly = &f->w->layers[l];
        if (f->xp) fwd_norm(f, f->xp, f->x, ly->ffn_norm, ly->ffn_norm_b, r.t0, r.T); /* parallel residual: ln2(x) before attention */
        fwd_norm(f, f->xn, f->x, ly->attn_norm, ly->attn_norm_b, r.t0, r.T);
        fwd_capture(f, r, l, MP_FWD_AT_ATTN_IN, f->xn, f->C);
        const int stop = fwd_stop(f, l); /* x is not made past FWD_STOP_NONE: the checks skip it */
        fwd_attention(f, ly, l, r, hook, ctx, stop == FWD_STOP_SCORES && !f->probs_hook, /* probe --probs needs the softmax */
                      stop != FWD_STOP_NONE);
        if (stop == FWD_STOP_NONE) fwd_mlp(f, ly, l, r);
        if (fwd_check(f, l, r, stop != FWD_STOP_NONE, e) != MP_OK) return MP_ERR;
    }
    if (f->cfg.logits && fwd_head(f, r, e) != MP_OK) return MP_ERR;
    return f->ops->synchronize(f->ctx, e);
}

int mp_fwd_run(MpFwd *f, const int32_t *ids, int T, MpFwdHook hook, void *ctx, MpErr *e) {
    if (T < 1 || T > f->cfg.max_seq) return mp_err_set(e, "sequence of %d tokens (1..%d allowed)", T, f->cfg.max_seq);
    const int rows_hook = f->rows_hook.rows || f->rows_headsum;
    if (hook && rows_hook) return mp_err_set(e, "mp_fwd_run: a layer hook and a rows hook at once");
    if (rows_hook && (!f->rows_hook.done || f->rows_hook.workers < 1))
        return mp_err_set(e, "mp_fwd_run: a rows hook needs done() and workers >= 1");
    if (f->rows_headsum && f->rows_hook.workers > f->cfg.tap_headsum_workers)
        return mp_err_set(e, "mp_fwd_run: the reduced map of %d workers was not asked for at init (tap_headsum_workers %d)",
                          f->rows_hook.workers, f->cfg.tap_headsum_workers);
    if (fwd_embed(f, ids, 0, T, e) != MP_OK) return MP_ERR;
    fwd_release_mapped(f->m, MP_ROLE_TOK_EMBD, 0); /* rows copied; keeps the resident set flat over a corpus */
    fwd_rope_tables(f, T, 1);
    return fwd_layers(f, (FwdRows){0, T, 0}, hook, ctx, e);
}

int mp_fwd_extend(MpFwd *f, const int32_t *ids, int t0, int T, MpErr *e) {
    MpModel *m = f->m;
    if (!f->cfg.kv_cache) return mp_err_set(e, "mp_fwd_extend needs a forward pass made with kv_cache");
    if (t0 < 0 || t0 >= T || T > f->cfg.max_seq)
        return mp_err_set(e, "positions [%d, %d) out of range (1..%d tokens allowed)", t0, T, f->cfg.max_seq);
    if (m->inv_freq_long && m->rope_orig_ctx > 0 && f->cfg.max_seq > m->rope_orig_ctx)
        return mp_err_set(e, "%s: longrope beyond the original context (%d) changes the RoPE table of cached keys; "
                             "not supported with a key/value cache", m->path, m->rope_orig_ctx);
    if (fwd_embed(f, ids, t0, T, e) != MP_OK) return MP_ERR;
    /* a new sequence: the table of every position (rows do not depend on the length; mp_fwd_run
     * may have written the same rows in between) */
    if (t0 == 0) fwd_rope_tables(f, f->cfg.max_seq, 0);
    return fwd_layers(f, (FwdRows){t0, T, 1}, NULL, NULL, e);
}
