/* fwd.c — see fwd.h. Sections in data-flow order: memory plan, weight loading, one layer, run. */
#include "model/fwd.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/util.h"     /* mp_thread_num */
#include "model/fwd_amx.h"  /* mp_amx_weight_elems: the AMX tile layout's size */
#include "model/fwd_par.h" /* FWD_PAR_FOR, FWD_PAR_FOR2, FWD_PAR_MIN: loops parallel above a work threshold */

/* ================================================================ memory plan */

#define FWD_ROWS 16 /* query rows per parallel work item of the attention */

/* Carving one block: pass 1 (base NULL) counts floats, pass 2 hands out pointers. Every piece
 * starts on a 64-byte boundary. */
typedef struct FwdCarve {
    float *base;
    size_t used; /* floats */
} FwdCarve;

static float *fwd_carve(FwdCarve *c, size_t n) {
    float *p = c->base ? c->base + c->used : NULL;
    c->used += (n + 15) & ~(size_t)15;
    return p;
}

/* A packed weight: f32 panels, or bf16 values (half the floats) when bf16 is set, in the layout of
 * the pass's kernel (panels, or the AMX tiles of fwd_amx.h). */
static void fwd_mat(FwdCarve *c, MpFwdMat *w, int64_t out, int64_t in, int compute, MpFwdKernel kernel) {
    const int bf16 = compute == MP_FWD_COMPUTE_BF16;
    w->layout = bf16 ? mp_fwd_kernel_layout(kernel) : MP_FWD_LAYOUT_PANELS;
    const size_t n = w->layout == MP_FWD_LAYOUT_TILES ? mp_amx_weight_elems(out, in) : mp_fwd_mat_floats(out, in);
    float *p = fwd_carve(c, bf16 ? (n + 1) / 2 : n);
    w->p = bf16 ? NULL : p;
    w->pb = bf16 ? (uint16_t *)p : NULL;
    w->out = out;
    w->in = in;
}

const char *mp_fwd_compute_name(int compute) {
    return compute == MP_FWD_COMPUTE_BF16 ? "bf16" : compute == MP_FWD_COMPUTE_F32_PLAIN ? "f32-plain" : "f32";
}

int mp_fwd_compute_parse(const char *s) {
    if (!strcmp(s, "f32")) return MP_FWD_COMPUTE_F32;
    if (!strcmp(s, "bf16")) return MP_FWD_COMPUTE_BF16;
    return -1;
}

typedef struct FwdDims {
    int C, NH, NKV, HS, FF, V, R, L;
} FwdDims;

static FwdDims fwd_dims(const MpModel *m, const MpFwdConfig *cfg) {
    FwdDims d = {m->dim, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn, m->vocab, m->rot_dim, cfg->n_layers};
    return d;
}

/* The plan of a layer's weights: one row per tensor the forward pass keeps — the role it is loaded
 * from, its place in MpFwdLayer, and whether it is an f32 vector or a packed matrix (f32 or bf16
 * panels). A row is used in every layer of a family that holds its role (the family table,
 * src/load/arch.c); its size is the role's shape (mp_role_shape). The one table drives the layout
 * (fwd_layout_weights), the load (fwd_load) and the memory estimate (mp_fwd_plan_bytes); the
 * experts of MoE layers, [E] matrices per role, follow each layer's rows. */
typedef struct FwdSlot {
    MpRole role;
    size_t off; /* offsetof(MpFwdLayer, field): float * (vector) or MpFwdMat (matrix) */
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
static MpFwdMat *fwd_slot_mat(MpFwdLayer *ly, const FwdSlot *s) { return (MpFwdMat *)(void *)((char *)ly + s->off); }

/* Weights: layers [0, L) (each layer's slots, then its experts into expmats [L * E * 3] when
 * given) and (logits) the output head; counted only when layers is NULL. */
static void fwd_layout_weights(FwdCarve *c, MpFwdLayer *layers, MpFwdMat *expmats, MpFwd *f, const MpModel *m,
                               const MpFwdConfig *cfg) {
    const FwdDims d = fwd_dims(m, cfg);
    const MpRoleDims rd = mp_model_role_dims(m);
    const int b = cfg->compute, E = m->n_experts; /* fwd_mat: bf16 panels, or f32 ones (plain sums or not) */
    for (int l = 0; l < d.L; l++) {
        MpFwdLayer tmp, *ly = layers ? &layers[l] : &tmp;
        memset(ly, 0, sizeof *ly);
        for (size_t i = 0; i < FWD_NSLOTS; i++) {
            const FwdSlot *s = &fwd_slots[i];
            int64_t rows, cols;
            if (!mp_family_has(m->arch, s->role)) continue;
            mp_role_shape(s->role, &rd, &rows, &cols);
            if (s->mat) fwd_mat(c, fwd_slot_mat(ly, s), rows, cols, b, f->kernel);
            else *fwd_slot_vec(ly, s) = fwd_carve(c, (size_t)(rows * cols));
        }
        if (layers) ly->exps = expmats ? expmats + (size_t)l * E * 3 : NULL;
        for (int j = 0; j < E; j++) { /* expert j's gate [FF, C], up [FF, C], down [C, FF] */
            MpFwdMat et[3], *w = layers && expmats ? expmats + ((size_t)l * E + j) * 3 : et;
            fwd_mat(c, &w[0], d.FF, d.C, b, f->kernel);
            fwd_mat(c, &w[1], d.FF, d.C, b, f->kernel);
            fwd_mat(c, &w[2], d.C, d.FF, b, f->kernel);
        }
    }
    f->out_norm_b = NULL;
    if (cfg->logits) {
        f->out_norm = fwd_carve(c, (size_t)d.C);
        fwd_mat(c, &f->lm_head, d.V, d.C, b, f->kernel);
        if (mp_family_has(m->arch, MP_ROLE_OUTPUT_NORM_BIAS)) f->out_norm_b = fwd_carve(c, (size_t)d.C);
    }
}

static void fwd_layout_acts(FwdCarve *c, MpFwd *f, const MpModel *m, const MpFwdConfig *cfg) {
    const FwdDims d = fwd_dims(m, cfg);
    const size_t T = (size_t)cfg->max_seq;
    f->x = fwd_carve(c, T * d.C);
    f->xn = fwd_carve(c, T * d.C);
    f->q = fwd_carve(c, T * d.NH * d.HS);
    f->k = fwd_carve(c, T * d.NKV * d.HS);
    f->v = fwd_carve(c, T * d.NKV * d.HS);
    f->kp = fwd_carve(c, (size_t)d.NKV * mp_fwd_attn_keys_floats(d.HS, (int)T));
    f->vh = fwd_carve(c, T * d.NKV * d.HS);
    f->scores = fwd_carve(c, (size_t)d.NH * T * T);
    f->ao = fwd_carve(c, T * d.NH * d.HS);
    f->gate = fwd_carve(c, T * d.FF);
    f->up = fwd_carve(c, T * d.FF);
    f->cos_t = fwd_carve(c, T * (size_t)(d.R / 2 > 0 ? d.R / 2 : 1));
    f->sin_t = fwd_carve(c, T * (size_t)(d.R / 2 > 0 ? d.R / 2 : 1));
    f->logits = cfg->logits ? fwd_carve(c, T * (size_t)d.V) : NULL;
    /* the reduced map's scratch, doubles carved as pairs of floats: one [FWD_ROWS, T] block per worker */
    f->tap_hs = cfg->tap_headsum_workers > 0 ? (double *)(void *)fwd_carve(c, 2 * (size_t)cfg->tap_headsum_workers * FWD_ROWS * T) : NULL;
    f->xp = m->parallel_residual ? fwd_carve(c, T * d.C) : NULL;
    f->cos_l = m->inv_freq_local ? fwd_carve(c, T * (size_t)(d.R / 2 > 0 ? d.R / 2 : 1)) : NULL;
    f->sin_l = m->inv_freq_local ? fwd_carve(c, T * (size_t)(d.R / 2 > 0 ? d.R / 2 : 1)) : NULL;
    f->kc = cfg->kv_cache ? fwd_carve(c, (size_t)d.L * d.NKV * mp_fwd_attn_keys_floats(d.HS, (int)T)) : NULL;
    f->vc = cfg->kv_cache ? fwd_carve(c, (size_t)d.L * T * d.NKV * d.HS) : NULL;
    if (m->n_experts) { /* MoE routing and gathering (the int32 arrays are carved as 4-byte floats) */
        const size_t E = (size_t)m->n_experts, K = (size_t)m->n_experts_used;
        f->moe_p = fwd_carve(c, T * E);
        f->moe_w = fwd_carve(c, T * K);
        f->moe_sel = (int32_t *)fwd_carve(c, T * K);
        f->moe_rows = (int32_t *)fwd_carve(c, T * K);
        f->moe_xg = fwd_carve(c, T * d.C);
        f->moe_y = fwd_carve(c, T * d.C);
        f->moe_sg = m->ffn_shexp > 0 ? fwd_carve(c, T * (size_t)m->ffn_shexp) : NULL;
        f->moe_su = m->ffn_shexp > 0 ? fwd_carve(c, T * (size_t)m->ffn_shexp) : NULL;
        f->moe_sl = m->ffn_shexp > 0 ? fwd_carve(c, T) : NULL;
    }
}

void mp_fwd_plan_bytes(const MpModel *m, const MpFwdConfig *cfg, uint64_t *weights, uint64_t *acts) {
    FwdCarve cw = {0}, ca = {0};
    MpFwd f;
    memset(&f, 0, sizeof f);
    fwd_layout_weights(&cw, NULL, NULL, &f, m, cfg);
    fwd_layout_acts(&ca, &f, m, cfg);
    *weights = (uint64_t)cw.used * 4;
    *acts = (uint64_t)ca.used * 4;
}

/* A weight (acts 0) or activation block of `floats` floats in the backend's storage. */
static float *fwd_block(const MpFwd *f, size_t floats, int acts) {
    const size_t bytes = (floats * sizeof(float) + 63) & ~(size_t)63;
    return (acts ? f->ops->act_alloc : f->ops->alloc)(bytes ? bytes : 64);
}

/* The host staging of a backend whose activations are not host memory (MpFwd.tap_host): floats of
 * its first part, one capture's rows [max_seq, max(C, NH*HS)] (an even count: the doubles of the
 * reduced map's blocks follow), and of the whole. 0 for host activations. */
static size_t fwd_tap_host_cap_floats(const MpFwd *f) {
    size_t w = (size_t)f->C;
    if ((size_t)f->NH * f->HS > w) w = (size_t)f->NH * f->HS;
    return ((size_t)f->cfg.max_seq * w + 1) & ~(size_t)1;
}
static size_t fwd_tap_host_floats(const MpFwd *f) {
    if (!f->ops->to_host) return 0;
    const size_t W = (size_t)(f->cfg.tap_headsum_workers > 0 ? f->cfg.tap_headsum_workers : 0);
    return fwd_tap_host_cap_floats(f) + 2 * W * FWD_ROWS * (size_t)f->cfg.max_seq;
}

/* Host scratch (weight loading). */
static float *fwd_alloc(size_t floats) {
    size_t bytes = floats * sizeof(float);
    bytes = (bytes + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

/* ================================================================ weight loading */

/* dst (n floats) <- the 1-D tensor (role, layer), which must hold exactly n values. */
static int fwd_load_vec(MpModel *m, MpRole role, int layer, float *dst, int64_t n, MpErr *e) {
    int64_t s[2];
    if (!mp_model_shape(m, role, layer, s)) return mp_err_set(e, "%s: layer %d has no '%s' tensor", m->path, layer, mp_model_role_name(role));
    if (s[0] * s[1] != n)
        return mp_err_set(e, "%s: layer %d '%s' has %lld values, expected %lld", m->path, layer, mp_model_role_name(role),
                          (long long)(s[0] * s[1]), (long long)n);
    return mp_model_tensor_f32(m, role, layer, dst, (size_t)n, NULL, e);
}

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

/* w <- (role, layer) [out, in], through scratch [cap floats]. f32: the whole tensor dequantised,
 * then packed. bf16: one panel of rows at a time (scratch needs NR*in floats), rounded to bf16. */
static int fwd_load_mat(MpModel *m, MpRole role, int layer, MpFwdMat *w, float *scratch, size_t cap, MpErr *e) {
    int64_t s[2];
    if (mp_model_shape(m, role, layer, s) != 2) return mp_err_set(e, "%s: layer %d has no 2-D '%s' tensor", m->path, layer, mp_model_role_name(role));
    if (s[0] != w->out || s[1] != w->in)
        return mp_err_set(e, "%s: layer %d '%s' is [%lld, %lld], expected [%lld, %lld]", m->path, layer,
                          mp_model_role_name(role), (long long)s[0], (long long)s[1], (long long)w->out, (long long)w->in);
    if (w->pb) {
        for (int64_t r0 = 0; r0 < w->out; r0 += MP_FWD_NR) {
            const int64_t n = w->out - r0 < MP_FWD_NR ? w->out - r0 : MP_FWD_NR;
            if (mp_model_rows_f32(m, role, layer, r0, n, scratch, e) != MP_OK) return MP_ERR;
            mp_fwd_mat_pack_bf16_rows(w, scratch, r0, n);
        }
    } else {
        if (mp_model_tensor_f32(m, role, layer, scratch, cap, NULL, e) != MP_OK) return MP_ERR;
        mp_fwd_mat_pack(w, scratch, w->out, w->in);
    }
    fwd_release_mapped(m, role, layer);
    return MP_OK;
}

/* w <- expert j's (role, layer) [out, in] (GATE_EXPS, UP_EXPS, DOWN_EXPS), as fwd_load_mat does;
 * the pages of its tensor are released once the layer's last expert is packed (GGUF: one tensor
 * holds them all). */
static int fwd_load_expert(MpModel *m, MpRole role, int layer, int j, MpFwdMat *w, float *scratch, size_t cap, MpErr *e) {
    int64_t s[2];
    if (!mp_model_expert_shape(m, role, layer, j, s) || s[0] != w->out || s[1] != w->in)
        return mp_err_set(e, "%s: layer %d has no [%lld, %lld] expert %d '%s'", m->path, layer, (long long)w->out, (long long)w->in, j,
                          mp_model_role_name(role));
    if (w->pb) {
        for (int64_t r0 = 0; r0 < w->out; r0 += MP_FWD_NR) {
            const int64_t n = w->out - r0 < MP_FWD_NR ? w->out - r0 : MP_FWD_NR;
            if (mp_model_expert_rows_f32(m, role, layer, j, r0, n, scratch, e) != MP_OK) return MP_ERR;
            mp_fwd_mat_pack_bf16_rows(w, scratch, r0, n);
        }
    } else {
        if ((size_t)(s[0] * s[1]) > cap) return mp_err_set(e, "internal: expert scratch");
        if (mp_model_expert_rows_f32(m, role, layer, j, 0, s[0], scratch, e) != MP_OK) return MP_ERR;
        mp_fwd_mat_pack(w, scratch, w->out, w->in);
    }
    if (m->format == MP_FORMAT_HF || j == m->n_experts - 1) fwd_release_tensor(m, mp_model_expert_tensor(m, role, layer, j));
    return MP_OK;
}

/* Layer l's weights: every slot of the plan its family holds, then (MoE) its experts. */
static int fwd_load_layer(MpFwd *f, int l, float *scratch, size_t cap, MpErr *e) {
    MpModel *m = f->m;
    MpFwdLayer *ly = &f->layers[l];
    const MpRoleDims rd = mp_model_role_dims(m);
    int rc = MP_OK;
    for (size_t i = 0; i < FWD_NSLOTS && rc == MP_OK; i++) {
        const FwdSlot *s = &fwd_slots[i];
        int64_t rows, cols;
        if (!mp_family_has(m->arch, s->role)) continue;
        mp_role_shape(s->role, &rd, &rows, &cols);
        rc = s->mat ? fwd_load_mat(m, s->role, l, fwd_slot_mat(ly, s), scratch, cap, e)
                    : fwd_load_vec(m, s->role, l, *fwd_slot_vec(ly, s), rows * cols, e);
    }
    for (int k = 0; k < 3 && rc == MP_OK; k++)
        for (int j = 0; j < m->n_experts && rc == MP_OK; j++)
            rc = fwd_load_expert(m, (MpRole)(MP_ROLE_GATE_EXPS + k), l, j, &ly->exps[(size_t)j * 3 + (size_t)k], scratch, cap, e);
    return rc;
}

static int fwd_load(MpFwd *f, MpErr *e) {
    MpModel *m = f->m;
    size_t cap = 0;
    const int64_t sizes[][2] = {{(int64_t)f->NH * f->HS, f->C}, {f->C, (int64_t)f->NH * f->HS}, {f->FF, f->C},
                                {f->C, f->FF}, {f->cfg.logits ? f->V : 0, f->C}, {m->n_experts, f->C},
                                {m->ffn_shexp, f->C}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        /* bf16 packs one panel of MP_FWD_NR rows at a time */
        const size_t rows = f->cfg.compute == MP_FWD_COMPUTE_BF16 && sizes[i][0] > MP_FWD_NR ? MP_FWD_NR : (size_t)sizes[i][0];
        if (rows * (size_t)sizes[i][1] > cap) cap = rows * (size_t)sizes[i][1];
    }
    float *scratch = fwd_alloc(cap);
    if (!scratch) return mp_err_set(e, "out of memory for a %zu-float weight scratch buffer", cap);
    int rc = MP_OK;
    for (int l = 0; l < f->cfg.n_layers && rc == MP_OK; l++) rc = fwd_load_layer(f, l, scratch, cap, e);
    if (rc == MP_OK && f->cfg.logits) {
        rc = fwd_load_vec(m, MP_ROLE_OUTPUT_NORM, 0, f->out_norm, f->C, e);
        if (rc == MP_OK) rc = fwd_load_mat(m, MP_ROLE_OUTPUT, 0, &f->lm_head, scratch, cap, e);
        if (rc == MP_OK && f->out_norm_b) rc = fwd_load_vec(m, MP_ROLE_OUTPUT_NORM_BIAS, 0, f->out_norm_b, f->C, e);
    }
    free(scratch);
    return rc;
}

int mp_fwd_init(MpFwd *f, MpModel *m, const MpFwdConfig *cfg, MpErr *e) {
    memset(f, 0, sizeof *f);
    if (cfg->n_layers < 1 || cfg->n_layers > m->n_layers)
        return mp_err_set(e, "layers: asked for %d, the model has %d", cfg->n_layers, m->n_layers);
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
    char kwhy[512];
    const int kset = mp_fwd_kernel_choose(getenv("MASKPOS_KERNEL"), cfg->compute == MP_FWD_COMPUTE_BF16, kwhy, sizeof kwhy);
    if (kset < 0) return mp_err_set(e, "%s", kwhy);
    const MpFwdOps *ops = cfg->ops ? cfg->ops : mp_fwd_ops_for(cfg->device, cfg->compute == MP_FWD_COMPUTE_F32_PLAIN, e);
    if (!ops) return MP_ERR;
    f->m = m;
    f->cfg = *cfg;
    f->ops = ops;
    f->kernel = (MpFwdKernel)kset;
    f->C = m->dim;
    f->NH = m->n_heads;
    f->NKV = m->n_kv_heads;
    f->HS = m->head_dim;
    f->FF = m->ffn;
    f->V = m->vocab;
    f->R = m->rot_dim;
    f->layers = calloc((size_t)cfg->n_layers, sizeof *f->layers);
    if (!f->layers) return mp_err_set(e, "out of memory");
    if (m->n_experts > 0 && !(f->expmats = calloc((size_t)cfg->n_layers * (size_t)m->n_experts * 3, sizeof *f->expmats))) {
        mp_fwd_free(f);
        return mp_err_set(e, "out of memory");
    }
    FwdCarve cw = {0}, ca = {0};
    fwd_layout_weights(&cw, f->layers, f->expmats, f, m, cfg);
    fwd_layout_acts(&ca, f, m, cfg);
    f->wfloats = cw.used;
    f->afloats = ca.used;
    f->wblock = fwd_block(f, cw.used, 0);
    f->ablock = fwd_block(f, ca.used, 1);
    const size_t hf = fwd_tap_host_floats(f);
    if (hf) f->tap_host = fwd_alloc(hf);
    if (!f->wblock || !f->ablock || (hf && !f->tap_host)) {
        size_t wb = cw.used * 4, ab = ca.used * 4;
        mp_fwd_free(f);
        return mp_err_set(e, "cannot allocate %.1f MiB of weights + %.1f MiB of activations; HINT: fewer --layers or a shorter --seq",
                          wb / 1048576.0, ab / 1048576.0);
    }
    cw.base = f->wblock;
    cw.used = 0;
    ca.base = f->ablock;
    ca.used = 0;
    fwd_layout_weights(&cw, f->layers, f->expmats, f, m, cfg);
    fwd_layout_acts(&ca, f, m, cfg);
    if (fwd_load(f, e) != MP_OK) {
        mp_fwd_free(f);
        return MP_ERR;
    }
    return MP_OK;
}

void mp_fwd_free(MpFwd *f) {
    free(f->tap_host);
    if (f->ops) {
        f->ops->act_free(f->ablock);
        f->ops->free(f->wblock);
    }
    free(f->layers);
    free(f->expmats);
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

/* Rows [t0, T) of y (row stride ld) += b [n], through the backend; no bias (b NULL): nothing. */
static void fwd_add_bias(const MpFwd *f, float *y, int64_t ld, const float *b, int64_t n, int t0, int T) {
    if (b) f->ops->add_bias(y + (size_t)t0 * (size_t)ld, ld, b, n, T - t0);
}

/* x [T, C] += y [T, C] */
static void fwd_residual(const MpFwd *f, float *x, const float *y, size_t n) { f->ops->add(x, y, n); }

/* y [T,O] = x [T,K] · Wᵀ through the backend, with this forward pass's matmul kernel. */
static void fwd_matmul(const MpFwd *f, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    f->ops->matmul(f->kernel, y, ldy, x, ldx, w, T);
}

static void fwd_rmsnorm(const MpFwd *f, float *y, const float *x, const float *w, int n) { f->ops->rmsnorm(y, x, w, n, f->m->norm_eps); }

/* RMSNorm of rows [t0, T) of x [T, C] with weight w [C] into y. */
static void fwd_norm_rows(const MpFwd *f, float *y, const float *x, const float *w, int t0, int T) {
    const int n = f->C;
    if (!w) { /* olmo2: no pre-norm, the block reads the residual stream as it is */
        f->ops->copy(y + (size_t)t0 * n, x + (size_t)t0 * n, (size_t)(T - t0) * (size_t)n);
        return;
    }
    FWD_PAR_FOR((double)(T - t0) * n,
    for (int t = t0; t < T; t++) fwd_rmsnorm(f, y + (size_t)t * n, x + (size_t)t * n, w, n););
}

/* The block's norm of rows [t0, T): RMSNorm, or LayerNorm with bias b (gptneox). */
static void fwd_norm(const MpFwd *f, float *y, const float *x, const float *w, const float *b, int t0, int T) {
    if (!f->m->layer_norm) {
        fwd_norm_rows(f, y, x, w, t0, T);
        return;
    }
    const int n = f->C;
    FWD_PAR_FOR((double)(T - t0) * n,
    for (int t = t0; t < T; t++) f->ops->layernorm(y + (size_t)t * n, x + (size_t)t * n, w, b, n, f->m->norm_eps););
}

/* bf16 compute: a Linear input x [T, n] (row stride ld) rounded to bf16 in place (it is read by
 * matmuls only). f32 compute: nothing. */
static void fwd_linear_input(const MpFwd *f, float *x, int64_t ld, int t0, int T, int64_t n) {
    if (f->cfg.compute != MP_FWD_COMPUTE_BF16) return;
    FWD_PAR_FOR((double)(T - t0) * n,
    for (int t = t0; t < T; t++) f->ops->bf16_round(x + (size_t)t * (size_t)ld, (size_t)n););
}


/* Rows [t0, T) of one run: t0 = 0 for mp_fwd_run (keys, values and scores of this run, row
 * stride T), t0 >= 0 for mp_fwd_extend (keys and values of positions [0, t0) already in the
 * cache; everything with row stride max_seq). Activation rows are positions. */
typedef struct FwdRows {
    int t0, T;
    int cached; /* 1: mp_fwd_extend */
} FwdRows;

/* Where a run's keys (packed, mp_fwd_attn_pack_key) and values (contiguous per kv head) live: the
 * run's own buffers (row stride T) or, for mp_fwd_extend, the layer's cache (row stride max_seq). */
typedef struct FwdKV {
    float *kp;  /* [NKV][kpf] */
    float *vh;  /* [NKV, ldt, HS] */
    size_t kpf; /* floats of one kv head's packed keys */
    int ldt;    /* rows of keys, values and scores: T, or max_seq when cached */
} FwdKV;

static FwdKV fwd_kv(const MpFwd *f, int layer, FwdRows r) {
    FwdKV kv;
    kv.ldt = r.cached ? f->cfg.max_seq : r.T;
    kv.kpf = mp_fwd_attn_keys_floats(f->HS, kv.ldt);
    kv.kp = r.cached ? f->kc + (size_t)layer * f->NKV * kv.kpf : f->kp;
    kv.vh = r.cached ? f->vc + (size_t)layer * f->NKV * kv.ldt * f->HS : f->vh;
    return kv;
}

/* Was (layer, point) asked for before the run (cfg.tap_layers / tap_points; both 0: all)? */
static int fwd_tapped(const MpFwd *f, int layer, int point) {
    const uint64_t lm = f->cfg.tap_layers;
    const unsigned pm = f->cfg.tap_points;
    if (!lm && !pm) return 1;
    return (!lm || ((lm >> (layer < 63 ? layer : 63)) & 1)) && (!pm || ((pm >> point) & 1));
}

/* A capture point (mp_fwd_run only: every row is this run's). */
static void fwd_capture(const MpFwd *f, FwdRows r, int layer, int point, const float *x, int width) {
    if (!f->capture || r.cached || !fwd_tapped(f, layer, point)) return;
    if (f->ops->to_host) { /* a backend's own storage: the asked point's rows to the host */
        f->ops->to_host(f->tap_host, x, sizeof(float) * (size_t)r.T * (size_t)width);
        x = f->tap_host;
    }
    f->capture(f->capture_ctx, layer, point, x, r.T, width);
}

/* Rows [t0, T): q [T, NH*HS], k, v [T, NKV*HS] of the normed input f->xn — projections, biases,
 * per-head q/k norm (qwen3), RoPE — then the keys packed and the values made contiguous per kv
 * head into kv (for the attention kernels; for mp_fwd_extend, the cache). */
static void fwd_attn_project(MpFwd *f, const MpFwdLayer *ly, int layer, FwdRows r, const FwdKV *kv) {
    const int NH = f->NH, NKV = f->NKV, HS = f->HS, R = f->R, t0 = r.t0, T = r.T, n = T - t0;
    const int64_t ldq = (int64_t)NH * HS, ldk = (int64_t)NKV * HS;
    /* RoPE in this layer: not switched off (--no-rope) nor a NoPE layer of the checkpoint */
    const int rope = f->cfg.rope && R > 0 && (!f->m->rope_layer || f->m->rope_layer[layer]);
    /* gemma3: the sliding-window layers rotate with their own base */
    const int local = f->cos_l && f->m->layer_local && f->m->layer_local[layer];
    const float *cos_t = local ? f->cos_l : f->cos_t, *sin_t = local ? f->sin_l : f->sin_t;
    float *xn = f->xn + (size_t)t0 * f->C;
    fwd_linear_input(f, f->xn, f->C, t0, T, f->C);
    fwd_matmul(f, f->q + (size_t)t0 * ldq, ldq, xn, f->C, &ly->q, n);
    fwd_matmul(f, f->k + (size_t)t0 * ldk, ldk, xn, f->C, &ly->k, n);
    fwd_matmul(f, f->v + (size_t)t0 * ldk, ldk, xn, f->C, &ly->v, n);
    fwd_add_bias(f, f->q, ldq, ly->q_bias, ldq, t0, T);
    fwd_add_bias(f, f->k, ldk, ly->k_bias, ldk, t0, T);
    fwd_add_bias(f, f->v, ldk, ly->v_bias, ldk, t0, T);
    FWD_PAR_FOR((double)n * ldq,
    for (int t = t0; t < T; t++) {
        if (f->m->qk_norm_whole) { /* olmo2: one RMSNorm over all heads' q (and k) values */
            fwd_rmsnorm(f, f->q + t * ldq, f->q + t * ldq, ly->q_norm, (int)ldq);
            fwd_rmsnorm(f, f->k + t * ldk, f->k + t * ldk, ly->k_norm, (int)ldk);
        }
        for (int h = 0; h < NH; h++) {
            float *qh = f->q + t * ldq + (int64_t)h * HS;
            if (ly->q_norm && !f->m->qk_norm_whole) fwd_rmsnorm(f, qh, qh, ly->q_norm, HS);
            if (rope) f->ops->rope(qh, cos_t + (size_t)t * (R / 2), sin_t + (size_t)t * (R / 2), R);
        }
        for (int h = 0; h < NKV; h++) {
            float *kh = f->k + t * ldk + (int64_t)h * HS;
            if (ly->k_norm && !f->m->qk_norm_whole) fwd_rmsnorm(f, kh, kh, ly->k_norm, HS);
            if (rope) f->ops->rope(kh, cos_t + (size_t)t * (R / 2), sin_t + (size_t)t * (R / 2), R);
            f->ops->pack_key(kv->kp + (size_t)h * kv->kpf, kh, HS, t);
            f->ops->copy(kv->vh + ((size_t)h * kv->ldt + t) * HS, f->v + t * ldk + (int64_t)h * HS, (size_t)HS);
        }
    });
    fwd_capture(f, r, layer, MP_FWD_AT_Q, f->q, (int)ldq);
    fwd_capture(f, r, layer, MP_FWD_AT_K, f->k, (int)ldk);
}

/* What every block of one layer's attention needs (fwd_attn_core). */
typedef struct FwdAttn {
    float scale, cap; /* 1/sqrt(HS) (or gemma's query_pre_attn_scalar); gemma2's soft-cap, 0: none */
    int win;          /* the sliding window when the sequence is longer than it, else 0 */
    int rep, causal, ldt;
    int64_t ldq;
    double work;      /* multiply-adds of the layer's attention (FWD_PAR's threshold) */
} FwdAttn;

/* Head h's scores of rows [i0, i1) into f->scores: the kernel (scale and causal mask fused), then
 * gemma2's soft-cap and a sliding window. */
static void fwd_attn_scores_rows(MpFwd *f, const FwdKV *kv, const FwdAttn *a, int T, int h, int i0, int i1) {
    float *sh = f->scores + (size_t)h * a->ldt * a->ldt;
    f->ops->attn_scores(sh, f->q + (int64_t)h * f->HS, a->ldq, kv->kp + (size_t)(h / a->rep) * kv->kpf, f->HS, a->ldt, a->causal,
                        a->scale, i0, i1);
    if (f->chk.scores) mp_fwd_check_scores_rows(&f->chk, sh, a->ldt, T, a->causal, h, i0, i1); /* before the cap hides an Inf */
    if (a->cap > 0) /* gemma2: the unmasked scores soft-capped; the hook sees what the softmax gets */
        for (int i = i0; i < i1; i++) f->ops->softcap(sh + (size_t)i * a->ldt, a->causal ? (size_t)i + 1 : (size_t)T, a->cap);
    if (a->win) /* a sliding-window layer of a sequence longer than its window: after the cap, as HF adds its mask */
        for (int i = i0; i < i1; i++) f->ops->mask_window(sh + (size_t)i * a->ldt, i, T, a->win, a->causal);
}

/* Head h, rows [i0, i1): softmax in place, then p·v into f->ao while the rows are in cache (a
 * cached run leaves the masked tail of a row alone: never read). */
static void fwd_attn_mix_rows(MpFwd *f, const FwdKV *kv, const FwdAttn *a, FwdRows r, int h, int i0, int i1) {
    float *sh = f->scores + (size_t)h * a->ldt * a->ldt;
    for (int i = i0; i < i1; i++)
        f->ops->softmax_row(sh + (size_t)i * a->ldt, a->causal ? i + 1 : r.T, r.cached ? i + 1 : r.T);
    f->ops->attn_mix(f->ao + (int64_t)h * f->HS, a->ldq, sh, kv->vh + (size_t)(h / a->rep) * a->ldt * f->HS, f->HS, f->HS, a->ldt,
                     a->causal, i0, i1);
}

/* The reduced map of rows [i0, i1) (MpFwd.rows_headsum): the heads' scores summed in double,
 * heads ascending, by the backend (attn_headsum) into worker's block of f->tap_hs, then handed over. */
static void fwd_headsum(MpFwd *f, int layer, int T, int causal, int i0, int i1, int worker) {
    double *hs = f->tap_hs + (size_t)worker * FWD_ROWS * (size_t)T;
    f->ops->attn_headsum(hs, f->scores, f->NH, T, causal, i0, i1);
    if (f->ops->to_host) { /* a backend's own storage: this block to the worker's host staging */
        double *h = (double *)(void *)(f->tap_host + fwd_tap_host_cap_floats(f)) + (size_t)worker * FWD_ROWS * (size_t)T;
        f->ops->to_host(h, hs, sizeof(double) * (size_t)(i1 - i0) * (size_t)T);
        hs = h;
    }
    f->rows_headsum(f->rows_hook.ctx, layer, hs, T, i0, i1, worker);
}

/* Was layer asked for (cfg.tap_layers; 0: every layer)? */
static int fwd_tapped_layer(const MpFwd *f, int layer) {
    return !f->cfg.tap_layers || ((f->cfg.tap_layers >> (layer < 63 ? layer : 63)) & 1);
}

/* One block of rows [i0, i1) through every head: scores, the rows hook, then (unless
 * scores_only) softmax and p·v. */
static void fwd_attn_block(MpFwd *f, int layer, FwdRows r, const FwdKV *kv, const FwdAttn *a, int i0, int i1,
                           int scores_only, int worker) {
    for (int h = 0; h < f->NH; h++) fwd_attn_scores_rows(f, kv, a, r.T, h, i0, i1);
    const MpFwdRowsHook *rh = &f->rows_hook;
    if (rh->rows) rh->rows(rh->ctx, layer, f->scores, f->NH, r.T, i0, i1, worker);
    if (f->rows_headsum) fwd_headsum(f, layer, r.T, a->causal, i0, i1, worker);
    if (!scores_only)
        for (int h = 0; h < f->NH; h++) fwd_attn_mix_rows(f, kv, a, r, h, i0, i1);
}

/* With f->rows_hook: one pass over blocks of FWD_ROWS rows, each through every head (the hook
 * needs a row's every head before its softmax), blocks in parallel from the last (the longest
 * rows under the causal mask) so the threads finish together. The same kernels on the same
 * rows as the two passes of fwd_attn_core: the same bits. One region per layer, so the if(0)
 * region of a sequence-parallel worker costs nothing worth FWD_PAR's two branches; inside it
 * the worker's number is 0. */
static void fwd_attn_by_rows(MpFwd *f, int layer, FwdRows r, const FwdKV *kv, const FwdAttn *a, int nb, int scores_only) {
#pragma omp parallel for schedule(dynamic, 1) num_threads(f->rows_hook.workers) \
    if (f->rows_hook.workers > 1 && a->work > FWD_PAR_MIN && mp_fwd_top_level())
    for (int k = 0; k < nb; k++) {
        const int i0 = r.t0 + (nb - 1 - k) * FWD_ROWS, i1 = i0 + FWD_ROWS < r.T ? i0 + FWD_ROWS : r.T;
        fwd_attn_block(f, layer, r, kv, a, i0, i1, scores_only, mp_thread_num());
    }
    f->rows_hook.done(f->rows_hook.ctx, layer);
}

/* Rows [t0, T) of f->ao [T, NH*HS] = softmax(scores) · v per head. Two parallel passes over
 * (head, 16-row block):
 *   1. scores (scale and causal mask fused into the kernel) into f->scores [NH, ldt, ldt]; the
 *      hook then sees the whole layer's pre-softmax map (it averages over heads, so it needs them
 *      all); scores_only stops here (the last layer of a run without logits: nothing reads on);
 *   2. per row block: softmax in place, then p·v while those rows are in cache.
 * With f->rows_hook (mp_fwd_run only), fwd_attn_by_rows does both in one pass instead.
 * After pass 2, f->scores holds the layer's post-softmax probabilities of this one sequence:
 * the place to read them is marked POST-SOFTMAX below. */
static void fwd_attn_core(MpFwd *f, int layer, FwdRows r, const FwdKV *kv, MpFwdHook hook, void *ctx, int scores_only) {
    const int NH = f->NH, HS = f->HS, T = r.T, n = T - r.t0;
    const int W = mp_model_layer_window(f->m, layer);
    const FwdAttn a = {
        .scale = f->m->attn_scale > 0 ? (float)f->m->attn_scale : (float)(1.0 / sqrt((double)HS)), /* gemma: query_pre_attn_scalar */
        .cap = (float)f->m->attn_softcap,
        .win = W > 0 && T > W ? W : 0, /* within the window: nothing masked */
        .rep = NH / f->NKV, .causal = f->cfg.causal, .ldt = kv->ldt,
        .ldq = (int64_t)NH * HS, .work = (double)NH * n * T * HS,
    };
    const int nb = (n + FWD_ROWS - 1) / FWD_ROWS;
    mp_fwd_check_scores_plan(&f->chk, f->q + (size_t)r.t0 * a.ldq, (size_t)n * a.ldq, f->k + (size_t)r.t0 * f->NKV * HS,
                             (size_t)n * f->NKV * HS, HS, a.scale, r.cached);
    if ((f->rows_hook.rows || f->rows_headsum) && !r.cached && fwd_tapped_layer(f, layer)) {
        fwd_attn_by_rows(f, layer, r, kv, &a, nb, scores_only);
    } else {
        FWD_PAR_FOR2(a.work,
        for (int h = 0; h < NH; h++)
            for (int b = 0; b < nb; b++) {
                const int i0 = r.t0 + b * FWD_ROWS, i1 = i0 + FWD_ROWS < T ? i0 + FWD_ROWS : T;
                fwd_attn_scores_rows(f, kv, &a, T, h, i0, i1);
            });
        if (hook) hook(ctx, layer, f->scores, NH, T);
        if (scores_only) return;
        FWD_PAR_FOR2(a.work,
        for (int h = 0; h < NH; h++)
            for (int b = 0; b < nb; b++) {
                const int i0 = r.t0 + b * FWD_ROWS, i1 = i0 + FWD_ROWS < T ? i0 + FWD_ROWS : T;
                fwd_attn_mix_rows(f, kv, &a, r, h, i0, i1);
            });
    }
    if (scores_only) return;
    /* POST-SOFTMAX: here (mp_fwd_run: t0 = 0, ldt = T) f->scores [NH, T, T] holds layer `layer`'s
     * attention probabilities of this sequence (rows sum to 1; exact 0 where masked); the next
     * layer overwrites them. probe --probs reads them here: */
    if (f->probs_hook && !r.cached) f->probs_hook(f->probs_ctx, layer, f->scores, NH, T);
}

/* scores_only: stop once the hook has seen the scores (the last layer of a run without logits:
 * nothing reads its output). */
static void fwd_attention(MpFwd *f, const MpFwdLayer *ly, int layer, FwdRows r, MpFwdHook hook, void *ctx, int scores_only) {
    const int t0 = r.t0, n = r.T - t0;
    const int64_t ldq = (int64_t)f->NH * f->HS;
    const FwdKV kv = fwd_kv(f, layer, r);
    fwd_attn_project(f, ly, layer, r, &kv);
    fwd_attn_core(f, layer, r, &kv, hook, ctx, scores_only);
    if (scores_only) return;
    fwd_capture(f, r, layer, MP_FWD_AT_ATTN_MIX, f->ao, (int)ldq);
    /* output projection + residual */
    float *xn = f->xn + (size_t)t0 * f->C, *ao = f->ao + (size_t)t0 * ldq;
    fwd_linear_input(f, f->ao, ldq, t0, r.T, ldq);
    fwd_matmul(f, xn, f->C, ao, ldq, &ly->o, n);
    fwd_add_bias(f, f->xn, f->C, ly->o_bias, f->C, t0, r.T); /* gptneox */
    if (ly->attn_post_norm) fwd_norm_rows(f, f->xn, f->xn, ly->attn_post_norm, t0, r.T); /* olmo2 */
    fwd_capture(f, r, layer, MP_FWD_AT_ATTN_OUT, f->xn, f->C);
    fwd_residual(f, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
    fwd_capture(f, r, layer, MP_FWD_AT_RESID_MID, f->x, f->C);
}

/* GPT-NeoX's MLP on the normed rows in f->xn: up (+bias) -> exact GELU -> down (+bias), added to x. */
static void fwd_mlp_gelu(MpFwd *f, const MpFwdLayer *ly, int t0, int T) {
    const int n = T - t0;
    float *xn = f->xn + (size_t)t0 * f->C, *up = f->up + (size_t)t0 * f->FF;
    fwd_linear_input(f, f->xn, f->C, t0, T, f->C);
    fwd_matmul(f, up, f->FF, xn, f->C, &ly->up, n);
    fwd_add_bias(f, f->up, f->FF, ly->up_bias, f->FF, t0, T);
    FWD_PAR_FOR((double)n * f->FF * 10,
    for (int t = t0; t < T; t++) f->ops->gelu(f->up + (size_t)t * f->FF, f->up + (size_t)t * f->FF, (size_t)f->FF););
    fwd_linear_input(f, f->up, f->FF, t0, T, f->FF);
    fwd_matmul(f, xn, f->C, up, f->FF, &ly->down, n);
    fwd_add_bias(f, f->xn, f->C, ly->down_bias, f->C, t0, T);
    fwd_residual(f, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
}

/* qwen2moe's shared expert on rows [t0, T) of f->xn: its SwiGLU times sigmoid(shared_expert_gate . x)
 * (f32), added to the routed sum in f->moe_y (HF: final + sigmoid(gate) * shared; the backend's
 * moe_shared_mix). */
static void fwd_moe_shared(MpFwd *f, const MpFwdLayer *ly, int t0, int T) {
    const int C = f->C, FS = f->m->ffn_shexp, n = T - t0;
    const float *xn = f->xn + (size_t)t0 * C;
    fwd_matmul(f, f->moe_sg, FS, xn, C, &ly->shexp_gate, n);
    fwd_matmul(f, f->moe_su, FS, xn, C, &ly->shexp_up, n);
    FWD_PAR_FOR((double)n * FS * 10,
    for (int i = 0; i < n; i++) f->ops->swiglu(f->moe_sg + (size_t)i * FS, f->moe_sg + (size_t)i * FS, f->moe_su + (size_t)i * FS, (size_t)FS););
    fwd_linear_input(f, f->moe_sg, FS, 0, n, FS);
    fwd_matmul(f, f->moe_xg, C, f->moe_sg, FS, &ly->shexp_down, n);
    f->ops->moe_shared_mix(f->moe_y + (size_t)t0 * C, f->moe_sl, f->moe_xg, xn, ly->shexp_gate_inp, n, C);
}

/* Mixture of experts (mixtral, qwen3moe, qwen2moe) on the normed rows [t0, T) of f->xn (Linear inputs already
 * rounded), the result into f->xn: router logits (a Linear), the routing (the backend's moe_route:
 * softmax, top-k, renormalised when m->moe_norm_topk), then expert by
 * expert in index order (the order in which HF's loop adds them into zeros): the expert's SwiGLU
 * of its rows gathered, each output row times its weight added to the row's sum. Only the
 * experts that some row chose are computed. */
static void fwd_moe(MpFwd *f, const MpFwdLayer *ly, int t0, int T) {
    const int E = f->m->n_experts, K = f->m->n_experts_used, C = f->C, FF = f->FF, n = T - t0;
    fwd_matmul(f, f->moe_p + (size_t)t0 * E, E, f->xn + (size_t)t0 * C, C, &ly->router, n);
    f->ops->moe_route(f->moe_p + (size_t)t0 * E, f->moe_w + (size_t)t0 * K, f->moe_sel + (size_t)t0 * K, n, E, K, f->m->moe_norm_topk);
    f->ops->zero(f->moe_y + (size_t)t0 * C, (size_t)n * (size_t)C);
    for (int j = 0; j < E; j++) {
        const int cnt = f->ops->moe_gather(f->moe_xg, f->moe_rows, f->xn, f->moe_sel, j, t0, T, K, C);
        if (!cnt) continue;
        const MpFwdMat *w = ly->exps + (size_t)j * 3;
        fwd_matmul(f, f->gate, FF, f->moe_xg, C, &w[0], cnt);
        fwd_matmul(f, f->up, FF, f->moe_xg, C, &w[1], cnt);
        FWD_PAR_FOR((double)cnt * FF * 10,
        for (int i = 0; i < cnt; i++) f->ops->swiglu(f->gate + (size_t)i * FF, f->gate + (size_t)i * FF, f->up + (size_t)i * FF, (size_t)FF););
        fwd_linear_input(f, f->gate, FF, 0, cnt, FF);
        fwd_matmul(f, f->moe_xg, C, f->gate, FF, &w[2], cnt);
        f->ops->moe_scatter(f->moe_y, f->moe_xg, f->moe_rows, f->moe_w, cnt, K, C);
    }
    if (f->m->ffn_shexp > 0) fwd_moe_shared(f, ly, t0, T);
    f->ops->copy(f->xn + (size_t)t0 * C, f->moe_y + (size_t)t0 * C, (size_t)n * (size_t)C);
}

static void fwd_mlp(MpFwd *f, const MpFwdLayer *ly, int layer, FwdRows r) {
    const int t0 = r.t0, T = r.T, n = T - t0;
    float *xn = f->xn + (size_t)t0 * f->C, *gate = f->gate + (size_t)t0 * f->FF, *up = f->up + (size_t)t0 * f->FF;
    if (f->m->gelu_mlp) { /* gptneox: input = ln2 of the layer's input (parallel) or of x now */
        if (f->xp) f->ops->copy(xn, f->xp + (size_t)t0 * f->C, (size_t)n * f->C);
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
        fwd_residual(f, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
        fwd_capture(f, r, layer, MP_FWD_AT_LAYER_OUT, f->x, f->C);
        return;
    }
    fwd_matmul(f, gate, f->FF, xn, f->C, &ly->gate, n);
    fwd_matmul(f, up, f->FF, xn, f->C, &ly->up, n);
    const int geglu = f->m->geglu; /* gemma */
    FWD_PAR_FOR((double)n * f->FF * 10,
    for (int t = t0; t < T; t++) {
        if (geglu) f->ops->geglu(f->gate + (size_t)t * f->FF, f->gate + (size_t)t * f->FF, f->up + (size_t)t * f->FF, (size_t)f->FF);
        else f->ops->swiglu(f->gate + (size_t)t * f->FF, f->gate + (size_t)t * f->FF, f->up + (size_t)t * f->FF, (size_t)f->FF);
    });
    fwd_linear_input(f, f->gate, f->FF, t0, T, f->FF);
    fwd_matmul(f, xn, f->C, gate, f->FF, &ly->down, n);
    if (ly->ffn_post_norm) fwd_norm_rows(f, f->xn, f->xn, ly->ffn_post_norm, t0, T); /* olmo2 */
    fwd_residual(f, f->x + (size_t)t0 * f->C, xn, (size_t)n * f->C);
    fwd_capture(f, r, layer, MP_FWD_AT_LAYER_OUT, f->x, f->C);
}

/* ================================================================ run */

/* Embeddings of positions [t0, T) into x, through the backend; every id checked first. */
static int fwd_embed(MpFwd *f, const int32_t *ids, int t0, int T, MpErr *e) {
    for (int t = t0; t < T; t++)
        if (ids[t] < 0 || ids[t] >= f->V) return mp_err_set(e, "token id %d at position %d is outside the vocabulary [0, %d)", ids[t], t, f->V);
    return f->ops->embed(f->x + (size_t)t0 * f->C, f->m, ids + t0, T - t0, e);
}

/* Layer `layer`'s activations checked for NaN and ±Inf (fwd_check.h) once it has run. */
static int fwd_check(const MpFwd *f, int layer, FwdRows r, int scores_only, MpErr *e) {
    const int moe = f->m->n_experts > 0;
    const MpFwdCheckBufs b = {
        .path = f->m->path, .layer = layer, .n_layers = f->m->n_layers, .x = f->x, .q = f->q, .k = f->k, .v = f->v,
        .probs = f->scores, .ao = f->ao, .up = moe ? NULL : f->up, .gate = moe || f->m->gelu_mlp ? NULL : f->gate,
        .C = f->C, .FF = f->FF, .NH = f->NH, .ldt = r.cached ? f->cfg.max_seq : r.T, .causal = f->cfg.causal,
        .gelu = f->m->gelu_mlp, .ldq = (int64_t)f->NH * f->HS, .ldk = (int64_t)f->NKV * f->HS,
    };
    return mp_fwd_check_layer(&f->chk, &b, r.t0, r.T, scores_only, e);
}

/* The layers and the output head over rows [t0, T) (embeddings and RoPE tables in place); each
 * layer's activations checked for NaN and ±Inf as it ends (fwd_check.h). */
static int fwd_layers(MpFwd *f, FwdRows r, MpFwdHook hook, void *ctx, MpErr *e) {
    for (int l = 0; l < f->cfg.n_layers; l++) {
        const MpFwdLayer *ly = &f->layers[l];
        if (f->xp) fwd_norm(f, f->xp, f->x, ly->ffn_norm, ly->ffn_norm_b, r.t0, r.T); /* parallel residual: ln2(x) before attention */
        fwd_norm(f, f->xn, f->x, ly->attn_norm, ly->attn_norm_b, r.t0, r.T);
        fwd_capture(f, r, l, MP_FWD_AT_ATTN_IN, f->xn, f->C);
        const int last = l == f->cfg.n_layers - 1 && !f->cfg.logits;
        fwd_attention(f, ly, l, r, hook, ctx, last && !f->probs_hook); /* probe --probs needs the softmax */
        if (!last) fwd_mlp(f, ly, l, r);
        if (fwd_check(f, l, r, last, e) != MP_OK) return MP_ERR;
    }
    if (f->cfg.logits) {
        const MpFwdHead head = {
            .norm = f->out_norm, .norm_b = f->out_norm_b, .w = &f->lm_head, .C = f->C, .V = f->V,
            .layer_norm = f->m->layer_norm, .bf16_in = f->cfg.compute == MP_FWD_COMPUTE_BF16, .eps = f->m->norm_eps,
            .softcap = (float)f->m->final_softcap, .kernel = f->kernel,
        };
        const size_t t0 = (size_t)r.t0;
        f->ops->logits(f->logits + t0 * f->V, f->xn + t0 * f->C, f->x + t0 * f->C, &head, r.T - r.t0);
        return mp_fwd_check_logits(f->logits, f->V, r.t0, r.T, f->m->path, e);
    }
    return MP_OK;
}

int mp_fwd_run(MpFwd *f, const int32_t *ids, int T, MpFwdHook hook, void *ctx, MpErr *e) {
    MpModel *m = f->m;
    if (T < 1 || T > f->cfg.max_seq) return mp_err_set(e, "sequence of %d tokens (1..%d allowed)", T, f->cfg.max_seq);
    const int rows_hook = f->rows_hook.rows || f->rows_headsum;
    if (hook && rows_hook) return mp_err_set(e, "mp_fwd_run: a layer hook and a rows hook at once");
    if (rows_hook && (!f->rows_hook.done || f->rows_hook.workers < 1))
        return mp_err_set(e, "mp_fwd_run: a rows hook needs done() and workers >= 1");
    if (f->rows_headsum && f->rows_hook.workers > f->cfg.tap_headsum_workers)
        return mp_err_set(e, "mp_fwd_run: the reduced map of %d workers was not asked for at init (tap_headsum_workers %d)",
                          f->rows_hook.workers, f->cfg.tap_headsum_workers);
    if (fwd_embed(f, ids, 0, T, e) != MP_OK) return MP_ERR;
    fwd_release_mapped(m, MP_ROLE_TOK_EMBD, 0); /* rows copied; keeps the resident set flat over a corpus */
    if (f->cfg.rope && f->R > 0) {
        /* longrope: the long table once the sequence outgrows the original context (HF ≥4.48) */
        const float *inv = (m->inv_freq_long && m->rope_orig_ctx > 0 && T > m->rope_orig_ctx) ? m->inv_freq_long : m->inv_freq;
        f->ops->rope_table(f->cos_t, f->sin_t, inv, f->R, T, m->rope_attn_factor > 0 ? m->rope_attn_factor : 1.0);
        if (f->cos_l) f->ops->rope_table(f->cos_l, f->sin_l, m->inv_freq_local, f->R, T, 1.0); /* gemma3 local layers */
    }
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
    if (t0 == 0 && f->cfg.rope && f->R > 0) {
        f->ops->rope_table(f->cos_t, f->sin_t, m->inv_freq, f->R, f->cfg.max_seq, m->rope_attn_factor > 0 ? m->rope_attn_factor : 1.0);
        if (f->cos_l) f->ops->rope_table(f->cos_l, f->sin_l, m->inv_freq_local, f->R, f->cfg.max_seq, 1.0); /* gemma3 */
    }
    return fwd_layers(f, (FwdRows){t0, T, 1}, NULL, NULL, e);
}
