/* mkmodel.c — random-weight HF / GGUF test models; see mkmodel.h.
 *
 * Sections: generator → tensor list → HF folder (config.json from the family's keys; the folder
 * through load/hfwrite.h, the one HF checkpoint writer) → GGUF writer (metadata, vocabulary,
 * tensor data) → entry point.
 * Tensor data is produced in row chunks and streamed to the file, so models larger than memory
 * (e.g. the 8B-shaped 4-layer benchmark model) can be written.
 */
#include "load/mkmodel.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>

#include "core/json.h" /* mp_json_text: config.json */
#include "core/rng.h"  /* MpRng: Philox counter streams */
#include "core/util.h" /* MpAtomicFile */
#include "load/hfwrite.h" /* mp_hfwrite: the HF folder */

/* ================================================================ generator */

void mp_mk_spec_default(MpMkSpec *s) {
    memset(s, 0, sizeof *s);
    s->arch = MP_ARCH_LLAMA;
    s->layers = 2;
    s->dim = 64;
    s->heads = 4;
    s->kv_heads = 2;
    s->ffn = 128;
    s->vocab = 512;
    s->seed = 1;
    s->format = MP_FORMAT_HF;
    s->dtype = MP_WT_F32;
    s->shards = 1;
    s->partial_rotary = 1.0;
    s->norm_eps = 1e-5;
    s->parallel_residual = 1;
    s->attn_softcap = 50.0;
    s->final_softcap = 30.0;
    s->sliding_window = 0; /* the family's default */
    s->experts = 4;
    s->experts_used = 2;
}

/* The window written: --sliding-window, else the family's default (the sliding_window entry's:
 * gemma2/3 4096; 0 none). */
static int mk_window(const MpMkSpec *s) {
    const MpHfEntry *sw = mp_family_hf_key(s->arch, MP_HFK_SLIDING_WINDOW);
    return s->sliding_window > 0 ? s->sliding_window : sw ? (int)sw->def : 0;
}

static const MpFamily *mk_fam(const MpMkSpec *s) { return mp_family(s->arch); }

void mp_mk_spec_family(MpMkSpec *s, int kv_given, int rotary_given) {
    const MpFamily *f = mk_fam(s);
    const MpHfEntry *pct = mp_family_hf_key(s->arch, MP_HFK_ROTARY_PCT);
    if (!f) return;
    if (mp_family_mha(s->arch) && !kv_given) s->kv_heads = s->heads; /* Pythia's shape: one key/value head per query head */
    if (pct && !rotary_given) s->partial_rotary = pct->def;           /* and 25% rotary */
    if (f->tie == MP_TIE_ALWAYS) s->tie = 1;                          /* Gemma's head is its embedding */
    if (!f->softcap) s->attn_softcap = s->final_softcap = 0;          /* soft-capping: Gemma 2 only */
}
static const MpHfEntry *mk_key(const MpMkSpec *s, MpHfKey k) { return mp_family_hf_key(s->arch, k); }
/* one expert's width: its own key (moe_intermediate_size) where the family has one, else the MLP's (mixtral) */
static int mk_exp_ffn(const MpMkSpec *s) { return mk_key(s, MP_HFK_MOE_INTERMEDIATE_SIZE) && s->moe_ffn > 0 ? s->moe_ffn : s->ffn; }
static int mk_shared_ffn(const MpMkSpec *s) { return s->shared_ffn > 0 ? s->shared_ffn : s->ffn; } /* qwen2moe */

static int mk_head_dim(const MpMkSpec *s) { return s->head_dim > 0 ? s->head_dim : (s->heads > 0 ? s->dim / s->heads : 0); }
static int mk_rot_dim(const MpMkSpec *s) { return (int)(mk_head_dim(s) * s->partial_rotary); }
static double mk_theta(const MpMkSpec *s) {
    return s->rope_theta > 0 ? s->rope_theta : s->rope_scaling == MP_ROPE_LLAMA3 ? 500000.0 : 10000.0;
}
static int mk_max_pos(const MpMkSpec *s) { return s->max_pos > 0 ? s->max_pos : s->rope_scaling != MP_ROPE_NONE ? 131072 : 4096; }
static int mk_orig_ctx(const MpMkSpec *s) { return s->rope_scaling == MP_ROPE_LLAMA3 ? 8192 : 4096; }

void mp_mk_row(const MpMkSpec *s, MpRole role, int layer, int64_t row, int64_t cols, float *out) {
    /* stream = (layer+1, role, row): independent of the file format and of fused storage */
    uint64_t stream = ((uint64_t)(layer + 1) << 40) | ((uint64_t)role << 32) | (uint64_t)(uint32_t)row;
    MpRng r;
    mp_rng_init(&r, s->seed, stream);
    double scale = 1.0, offset = 0.0;
    switch (role) {
    case MP_ROLE_TOK_EMBD: scale = 1.0; break;
    case MP_ROLE_OUTPUT_NORM: case MP_ROLE_ATTN_NORM: case MP_ROLE_FFN_NORM: case MP_ROLE_Q_NORM: case MP_ROLE_K_NORM:
    case MP_ROLE_ATTN_POST_NORM: case MP_ROLE_FFN_POST_NORM:
        scale = 0.1;
        offset = mk_fam(s)->norm_plus_one ? 0.0 : 1.0; /* Gemma stores w of its (1 + w) norms */
        break;
    case MP_ROLE_Q_BIAS: case MP_ROLE_K_BIAS: case MP_ROLE_V_BIAS: scale = 0.1; break;
    case MP_ROLE_O_BIAS: case MP_ROLE_ATTN_NORM_BIAS: case MP_ROLE_FFN_NORM_BIAS: case MP_ROLE_UP_BIAS: case MP_ROLE_DOWN_BIAS:
    case MP_ROLE_OUTPUT_NORM_BIAS: scale = 0.1; break;
    default: scale = 1.0 / sqrt((double)cols); break;
    }
    double buf[256];
    for (int64_t j = 0; j < cols; j += 256) {
        int64_t k = cols - j < 256 ? cols - j : 256;
        mp_rng_normal_fill(&r, buf, (size_t)k); /* k is even except possibly in the last call */
        for (int64_t i = 0; i < k; i++) out[j + i] = (float)(offset + scale * buf[i]);
    }
}

void mp_mk_row_stored(const MpMkSpec *s, MpRole role, int layer, int64_t row, int64_t cols, float *out) {
    mp_mk_row(s, role, layer, row, cols, out);
    if (s->dtype == MP_WT_F16)
        for (int64_t i = 0; i < cols; i++) out[i] = mp_f16_to_f32(mp_f32_to_f16(out[i]));
    else if (s->dtype == MP_WT_BF16)
        for (int64_t i = 0; i < cols; i++) out[i] = mp_bf16_to_f32(mp_f32_to_bf16(out[i]));
}

/* ================================================================ tensor list */

enum { MK_PLAIN = 0, MK_ROPE_FREQS, MK_FACTORS_SHORT, MK_FACTORS_LONG };

typedef struct MkTensor {
    char name[160];
    int ndim;                /* 1: [rows]; 2: [rows, cols] (HF orientation) */
    int64_t rows, cols;
    MpWType type;
    int layer;
    int nparts;              /* fused tensors: parts stacked along rows */
    MpRole part_role[3];
    int64_t part_rows[3];
    int permute_heads;       /* GGUF llama Q/K: rows written in interleaved order */
    int interleave_hd;       /* HF gptneox query_key_value: per head [q, k, v] blocks of this many rows */
    int plus_one;            /* GGUF gemma norms: 1 + w stored (as convert_hf_to_gguf writes them) */
    int special;             /* MK_* */
    int experts;             /* > 0: GGUF 3-D tensor [experts, rows / experts, cols] */
    int64_t row_off;         /* HF expert tensors: row 0 is row row_off of the stacked role */
    size_t nbytes;
} MkTensor;

typedef struct MkList {
    MkTensor *t;
    size_t n, cap;
} MkList;

static MkTensor *mk_add(MkList *l, MpErr *e) {
    if (l->n == l->cap) {
        size_t nc = l->cap ? 2 * l->cap : 64;
        MkTensor *nt = realloc(l->t, nc * sizeof *nt);
        if (!nt) {
            mp_err_set(e, "out of memory");
            return NULL;
        }
        l->t = nt;
        l->cap = nc;
    }
    MkTensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    return t;
}

/* Storage type of a 2-D tensor with rows of `cols` elements. */
static MpWType mk_type2(const MpMkSpec *s, int64_t cols) {
    size_t b;
    if (mp_quant_row_bytes(s->dtype, (uint64_t)cols, &b) == MP_OK) return s->dtype;
    if (mp_quant_row_bytes(MP_WT_Q8_0, (uint64_t)cols, &b) == MP_OK) return MP_WT_Q8_0;
    return MP_WT_F16;
}

/* A layer role the writer stores: the family's (arch.c). */
static int mk_role_in_arch(const MpMkSpec *s, MpRole r) { return r != MP_ROLE_OUTPUT_NORM_BIAS && mp_family_has(s->arch, r); }

/* Role r of a layer (or a global role) into the list: fused roles as one tensor with their parts
 * stacked (phi3 qkv_proj, gate_up_proj; GPT-NeoX query_key_value, per head in HF), written with
 * the first part; GGUF llama Q/K rows in the converter's interleaved order, Gemma norms as 1 + w. */
static int mk_one(const MpMkSpec *s, MkList *l, MpRole r, int layer, MpErr *e) {
    const MpFamily *f = mk_fam(s);
    int64_t C = s->dim, HD = mk_head_dim(s), Q = (int64_t)s->heads * HD, KV = (int64_t)s->kv_heads * HD;
    const int gguf = s->format == MP_FORMAT_GGUF;
    MpRole first;
    int part;
    const int nparts = mp_family_fused(s->arch, r, &first, &part);
    if (part > 0) return MP_OK; /* inside the fused tensor */
    MkTensor *t = mk_add(l, e);
    if (!t) return MP_ERR;
    mp_model_stored_name(s->format, s->arch, r, layer, t->name, sizeof t->name);
    t->layer = layer;
    t->nparts = nparts;
    const MpRoleDims d = {C, Q, KV, HD, s->ffn, s->vocab, s->experts, mk_shared_ffn(s), f->qk_norm_whole};
    if (r >= MP_ROLE_GATE_EXPS && r <= MP_ROLE_DOWN_EXPS) return mp_err_set(e, "internal: role %d", (int)r); /* mk_experts */
    t->ndim = mp_role_shape(r, &d, &t->rows, &t->cols);
    if (r == MP_ROLE_SHEXP_GATE_INP && gguf) { /* HF Linear [1, C]; GGUF 1-D [C] (the same C values) */
        t->ndim = 1;
        t->rows = C;
    }
    if (nparts > 1) { /* the parts' rows stacked */
        t->rows = 0;
        for (int k = 0; k < nparts; k++) {
            int64_t cols;
            t->part_role[k] = (MpRole)(first + k);
            mp_role_shape(t->part_role[k], &d, &t->part_rows[k], &cols);
            t->rows += t->part_rows[k];
        }
        if (!gguf && (f->fuse & MP_FUSE_HF_HEADS)) t->interleave_hd = (int)HD;
    } else {
        t->part_role[0] = r;
        t->part_rows[0] = t->rows;
    }
    if (t->ndim == 1) t->cols = 1;
    if (gguf && f->gguf_permute_qk && (r == MP_ROLE_Q || r == MP_ROLE_Q_BIAS)) t->permute_heads = s->heads;
    if (gguf && f->gguf_permute_qk && (r == MP_ROLE_K || r == MP_ROLE_K_BIAS)) t->permute_heads = s->kv_heads;
    if (gguf && f->norm_plus_one && t->ndim == 1) t->plus_one = 1;
    if (!gguf) t->type = s->dtype;
    else t->type = t->ndim == 1 ? MP_WT_F32 : mk_type2(s, t->cols);
    return MP_OK;
}

/* The experts of stacked role r (GATE_EXPS, UP_EXPS, DOWN_EXPS) of a layer: one 3-D GGUF tensor, or
 * one HF tensor per expert (rows row_off.. of the stack). */
static int mk_experts(const MpMkSpec *s, MkList *l, MpRole r, int layer, MpErr *e) {
    const int64_t FF = mk_exp_ffn(s), rows = r == MP_ROLE_DOWN_EXPS ? s->dim : FF, cols = r == MP_ROLE_DOWN_EXPS ? FF : s->dim;
    const int gguf = s->format == MP_FORMAT_GGUF;
    for (int j = 0; j < (gguf ? 1 : s->experts); j++) {
        MkTensor *t = mk_add(l, e);
        if (!t) return MP_ERR;
        mp_model_expert_name(s->format, s->arch, r, layer, j, t->name, sizeof t->name);
        t->layer = layer;
        t->nparts = 1;
        t->part_role[0] = r;
        t->ndim = 2;
        t->rows = gguf ? rows * s->experts : rows;
        t->part_rows[0] = t->rows;
        t->cols = cols;
        t->experts = gguf ? s->experts : 0;
        t->row_off = gguf ? 0 : j * rows;
        t->type = gguf ? mk_type2(s, cols) : s->dtype;
    }
    return MP_OK;
}

static int mk_special(const MpMkSpec *s, MkList *l, const char *name, int special, MpErr *e) {
    MkTensor *t = mk_add(l, e);
    if (!t) return MP_ERR;
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = 1;
    t->rows = mk_rot_dim(s) / 2;
    t->cols = 1;
    t->type = MP_WT_F32;
    t->special = special;
    t->layer = -1;
    return MP_OK;
}

static int mk_build(const MpMkSpec *s, MkList *l, MpErr *e) {
    memset(l, 0, sizeof *l);
    int gguf = s->format == MP_FORMAT_GGUF;
    if (mk_one(s, l, MP_ROLE_TOK_EMBD, -1, e)) return MP_ERR;
    for (int layer = 0; layer < s->layers; layer++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++)
            if (mk_role_in_arch(s, (MpRole)r) &&
                (r >= MP_ROLE_GATE_EXPS && r <= MP_ROLE_DOWN_EXPS ? mk_experts(s, l, (MpRole)r, layer, e) : mk_one(s, l, (MpRole)r, layer, e)))
                return MP_ERR;
    if (mk_one(s, l, MP_ROLE_OUTPUT_NORM, -1, e)) return MP_ERR;
    if (mp_family_has(s->arch, MP_ROLE_OUTPUT_NORM_BIAS) && mk_one(s, l, MP_ROLE_OUTPUT_NORM_BIAS, -1, e)) return MP_ERR;
    if (!s->tie && mk_one(s, l, MP_ROLE_OUTPUT, -1, e)) return MP_ERR;
    if (gguf && s->rope_scaling == MP_ROPE_LLAMA3 && mk_special(s, l, "rope_freqs.weight", MK_ROPE_FREQS, e)) return MP_ERR;
    if (gguf && s->rope_scaling == MP_ROPE_LONGROPE &&
        (mk_special(s, l, "rope_factors_long.weight", MK_FACTORS_LONG, e) ||
         mk_special(s, l, "rope_factors_short.weight", MK_FACTORS_SHORT, e)))
        return MP_ERR;
    for (size_t i = 0; i < l->n; i++) {
        MkTensor *t = &l->t[i];
        size_t rb;
        if (mp_quant_row_bytes(t->type, (uint64_t)(t->ndim == 2 ? t->cols : t->rows), &rb) ||
            mp_size_mul(rb, (size_t)(t->ndim == 2 ? t->rows : 1), &t->nbytes))
            return mp_err_set(e, "tensor '%s': size overflows", t->name);
    }
    return MP_OK;
}

/* Longrope factor lists (exact in f32 and in JSON). */
static double mk_short_factor(int i) { return 1.0 + 0.25 * (i % 4); }
static double mk_long_factor(int i) { return 1.0 + 0.5 * i; }

/* Llama-3.1 rope_freqs divisor, as convert_hf_to_gguf computes it (spec §3.5). */
static double mk_llama3_divisor(const MpMkSpec *s, int i) {
    const double factor = 8.0, lo = 1.0, hi = 4.0, old = mk_orig_ctx(s), two_pi = 6.283185307179586476925286766559;
    int R = mk_rot_dim(s);
    double freq = 1.0 / pow(mk_theta(s), (2.0 * i) / R), wl = two_pi / freq;
    if (wl < old / hi) return 1.0;
    if (wl > old / lo) return factor;
    double sm = (old / wl - lo) / (hi - lo);
    return 1.0 / ((1 - sm) / factor + sm);
}

/* Rows [r0, r0+n) of tensor t as stored (after permutation), f32 values in out. */
static void mk_rows(const MpMkSpec *s, const MkTensor *t, int64_t r0, int64_t n, float *out) {
    if (t->special) {
        for (int64_t i = 0; i < t->rows; i++)
            out[i] = (float)(t->special == MK_ROPE_FREQS ? mk_llama3_divisor(s, (int)i)
                             : t->special == MK_FACTORS_SHORT ? mk_short_factor((int)i) : mk_long_factor((int)i));
        return;
    }
    if (t->ndim == 1) {
        if (t->permute_heads) { /* biases of permuted heads: whole vector, rows moved like Q/K rows */
            float *tmp = mp_malloc_or_die((size_t)t->rows * sizeof *tmp, "bias");
            mp_mk_row_stored(s, t->part_role[0], t->layer, 0, t->rows, tmp);
            int64_t hd = t->rows / t->permute_heads, d2 = hd / 2;
            for (int64_t g = 0; g < t->rows; g++) {
                int64_t h = g / hd, gg = g % hd;
                out[g] = tmp[h * hd + (gg % 2) * d2 + gg / 2];
            }
            free(tmp);
        } else if (t->nparts > 1) { /* fused biases: each part is its role's vector */
            int64_t off = 0, hd = t->interleave_hd;
            for (int p = 0; p < t->nparts; p++) {
                float *tmp = mp_malloc_or_die((size_t)t->part_rows[p] * sizeof *tmp, "bias");
                mp_mk_row_stored(s, t->part_role[p], t->layer, 0, t->part_rows[p], tmp);
                for (int64_t i = 0; i < t->part_rows[p]; i++) /* HF gptneox: head i/hd's block p */
                    out[hd > 0 ? (i / hd) * t->nparts * hd + p * hd + i % hd : off + i] = tmp[i];
                off += t->part_rows[p];
                free(tmp);
            }
        } else {
            mp_mk_row_stored(s, t->part_role[0], t->layer, 0, t->rows, out);
            if (t->plus_one)
                for (int64_t i = 0; i < t->rows; i++) out[i] = 1.0f + out[i];
        }
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        int64_t g = r0 + j, hf = g;
        if (t->permute_heads) { /* file row g = 2i+p within a head holds HF row p*d2+i */
            int64_t hd = t->rows / t->permute_heads, d2 = hd / 2, h = g / hd, gg = g % hd;
            hf = h * hd + (gg % 2) * d2 + gg / 2;
        }
        int p = 0;
        if (t->interleave_hd > 0) { /* file row g: head g/(3 hd), part (g/hd)%3, row g%hd of that head */
            const int64_t hd = t->interleave_hd;
            p = (int)((g / hd) % t->nparts);
            hf = (g / (t->nparts * hd)) * hd + g % hd;
        } else {
            while (p < t->nparts - 1 && hf >= t->part_rows[p]) hf -= t->part_rows[p++];
        }
        hf += t->row_off; /* HF expert j */
        mp_mk_row_stored(s, t->part_role[p], t->layer, hf, t->cols, out + (size_t)j * (size_t)t->cols);
    }
}

/* Streams tensor t's encoded bytes to f. */
static int mk_write_tensor(const MpMkSpec *s, const MkTensor *t, FILE *f, MpErr *e) {
    int64_t rows = t->ndim == 2 ? t->rows : 1, cols = t->ndim == 2 ? t->cols : t->rows;
    int64_t chunk = cols > 0 && cols < (1 << 20) ? (1 << 20) / cols : 1;
    if (chunk > rows) chunk = rows;
    if (chunk < 1) chunk = 1;
    size_t rb;
    if (mp_quant_row_bytes(t->type, (uint64_t)cols, &rb)) return mp_err_set(e, "tensor '%s': bad row size", t->name);
    float *vals = mp_try_malloc((size_t)(chunk * cols > 0 ? chunk * cols : 1) * sizeof *vals);
    uint8_t *enc = mp_try_malloc(rb * (size_t)chunk + 1);
    if (!vals || !enc) {
        free(vals);
        free(enc);
        return mp_err_set(e, "out of memory for tensor '%s'", t->name);
    }
    int rc = MP_OK;
    for (int64_t r0 = 0; r0 < rows && rc == MP_OK; r0 += chunk) {
        int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        if (t->ndim == 1 || t->special) {
            mk_rows(s, t, r0, n, vals);
            mp_quant_encode(enc, vals, t->type, (size_t)cols);
        } else {
            /* rows are independent Philox streams: generate and encode them in parallel */
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if (n * cols > 65536)
#endif
            for (int64_t j = 0; j < n; j++) {
                mk_rows(s, t, r0 + j, 1, vals + (size_t)j * (size_t)cols);
                mp_quant_encode(enc + (size_t)j * rb, vals + (size_t)j * (size_t)cols, t->type, (size_t)cols);
            }
        }
        if (fwrite(enc, 1, rb * (size_t)n, f) != rb * (size_t)n) rc = mp_err_set(e, "write failed for tensor '%s' (disk full?)", t->name);
    }
    free(vals);
    free(enc);
    return rc;
}

/* ================================================================ HF writer */

/* rope_scaling: llama3's numbers, longrope's factor lists, or null. */
static json_t *mk_rope_scaling(const MpMkSpec *s) {
    json_t *rs = json_null();
    if (s->rope_scaling == MP_ROPE_LLAMA3) {
        rs = json_object();
        json_object_set_new(rs, "rope_type", json_string("llama3"));
        json_object_set_new(rs, "factor", json_real(8.0));
        json_object_set_new(rs, "low_freq_factor", json_real(1.0));
        json_object_set_new(rs, "high_freq_factor", json_real(4.0));
        json_object_set_new(rs, "original_max_position_embeddings", json_integer(mk_orig_ctx(s)));
    } else if (s->rope_scaling == MP_ROPE_LONGROPE) {
        rs = json_object();
        json_object_set_new(rs, "type", json_string("longrope"));
        json_t *sf = json_array(), *lf = json_array();
        for (int i = 0; i < mk_rot_dim(s) / 2; i++) {
            json_array_append_new(sf, json_real(mk_short_factor(i)));
            json_array_append_new(lf, json_real(mk_long_factor(i)));
        }
        json_object_set_new(rs, "short_factor", sf);
        json_object_set_new(rs, "long_factor", lf);
    }
    return rs;
}

/* The value of config.json key k (an entry of the family's row) for this model; NULL: not written. */
static json_t *mk_hf_value(const MpMkSpec *s, const MpHfEntry *k) {
    const MpFamily *f = mk_fam(s);
    const int sw = s->sliding_window;
    switch (k->key) {
    case MP_HFK_ARCHITECTURES: return json_pack("[s]", f->hf_class);
    case MP_HFK_MODEL_TYPE: return json_string(f->hf_types[0]);
    case MP_HFK_HIDDEN_SIZE: return json_integer(s->dim);
    case MP_HFK_INTERMEDIATE_SIZE: return json_integer(s->ffn);
    case MP_HFK_NUM_HIDDEN_LAYERS: return json_integer(s->layers);
    case MP_HFK_NUM_ATTENTION_HEADS: return json_integer(s->heads);
    case MP_HFK_NUM_KEY_VALUE_HEADS: return json_integer(s->kv_heads);
    case MP_HFK_HEAD_DIM: return json_integer(mk_head_dim(s));
    case MP_HFK_HIDDEN_ACT: case MP_HFK_HIDDEN_ACTIVATION: return json_string(mp_act_hf_name(f->act));
    case MP_HFK_RMS_NORM_EPS: case MP_HFK_LAYER_NORM_EPS: return json_real(s->norm_eps);
    case MP_HFK_ROPE_THETA: case MP_HFK_ROTARY_EMB_BASE: return json_real(mk_theta(s));
    case MP_HFK_MAX_POSITION_EMBEDDINGS: return json_integer(mk_max_pos(s));
    case MP_HFK_VOCAB_SIZE: return json_integer(s->vocab);
    case MP_HFK_TIE_WORD_EMBEDDINGS: return json_boolean(s->tie);
    case MP_HFK_BOS_TOKEN_ID: return json_integer(s->vocab >= 2 ? s->vocab - 2 : 0);
    case MP_HFK_EOS_TOKEN_ID: return json_integer(s->vocab - 1);
    /* a pad id the family's HF config class would default to outside the vocabulary (Phi3Config:
     * 32000, Olmo2Config: 1) is written as the eos id, as Phi-3's own checkpoints pad with eos */
    case MP_HFK_PAD_TOKEN_ID: return k->def >= s->vocab ? json_integer(s->vocab - 1) : NULL;
    case MP_HFK_ATTENTION_BIAS: return json_boolean(k->def != 0); /* what the family's roles mean */
    case MP_HFK_MLP_BIAS: return json_false();
    case MP_HFK_USE_SLIDING_WINDOW: return json_boolean(sw > 0);
    case MP_HFK_MAX_WINDOW_LAYERS: return sw > 0 ? json_integer(s->layers / 2) : NULL;
    case MP_HFK_SLIDING_WINDOW: return mk_window(s) > 0 ? json_integer(mk_window(s)) : json_null();
    case MP_HFK_PARTIAL_ROTARY_FACTOR: case MP_HFK_ROTARY_PCT: return json_real(s->partial_rotary);
    case MP_HFK_ORIGINAL_MAX_POSITION_EMBEDDINGS: return json_integer(mk_orig_ctx(s));
    case MP_HFK_ROPE_SCALING: return mk_rope_scaling(s);
    /* Gemma 2/3: scaled like llama.cpp reads it (query_pre_attn_scalar = head dim) */
    case MP_HFK_QUERY_PRE_ATTN_SCALAR: return json_integer(mk_head_dim(s));
    case MP_HFK_ATTN_LOGIT_SOFTCAPPING: return s->attn_softcap > 0 ? json_real(s->attn_softcap) : json_null();
    case MP_HFK_FINAL_LOGIT_SOFTCAPPING: return s->final_softcap > 0 ? json_real(s->final_softcap) : json_null();
    case MP_HFK_SLIDING_WINDOW_PATTERN: return json_integer(f->win_period);
    case MP_HFK_ROPE_LOCAL_BASE_FREQ: return json_real(f->win_local_base); /* llama.cpp's fixed value */
    case MP_HFK_USE_PARALLEL_RESIDUAL: return json_boolean(s->parallel_residual);
    case MP_HFK_NUM_LOCAL_EXPERTS: case MP_HFK_NUM_EXPERTS: return json_integer(s->experts);
    case MP_HFK_NUM_EXPERTS_PER_TOK: return json_integer(s->experts_used);
    case MP_HFK_ROUTER_JITTER_NOISE: return json_real(0.0);
    case MP_HFK_OUTPUT_ROUTER_LOGITS: return json_false();
    case MP_HFK_MOE_INTERMEDIATE_SIZE: return json_integer(mk_exp_ffn(s));
    case MP_HFK_NORM_TOPK_PROB: return json_boolean(f->gguf_moe_renorm && !s->no_norm_topk); /* qwen2moe: as its GGUF */
    case MP_HFK_DECODER_SPARSE_STEP: return json_integer(1);
    case MP_HFK_MLP_ONLY_LAYERS: return json_array();
    case MP_HFK_SHARED_EXPERT_INTERMEDIATE_SIZE: return json_integer(mk_shared_ffn(s));
    case MP_HFK_TORCH_DTYPE: return json_string(s->dtype == MP_WT_BF16 ? "bfloat16" : s->dtype == MP_WT_F16 ? "float16" : "float32");
    case MP_HFK_COUNT: break;
    }
    return NULL;
}

/* config.json: the keys of the family's row, in its order (as its published configurations and
 * its transformers class have them). */
static json_t *mk_config(const MpMkSpec *s) {
    json_t *c = json_object();
    for (const MpHfEntry *k = mk_fam(s)->hf_keys; k && k->key != MP_HFK_COUNT; k++) {
        json_t *v = mk_hf_value(s, k);
        if (v) json_object_set_new(c, mp_hf_key_name(k->key), v);
    }
    return c;
}

/* The writer's view of the list (mk_hf_bytes streams each tensor). */
typedef struct MkHf {
    const MpMkSpec *s;
    const MkList *l;
} MkHf;
static int mk_hf_bytes(void *ctx, size_t i, FILE *f, MpErr *e) {
    const MkHf *h = ctx;
    return mk_write_tensor(h->s, &h->l->t[i], f, e);
}

/* The HF folder: config.json (the family's keys) and the tensors, through the one HF writer. */
static int mk_write_hf(const MpMkSpec *s, const MkList *l, const char *dir, MpErr *e) {
    json_t *c = mk_config(s);
    char *cfg = mp_json_text(c);
    json_decref(c);
    MpHfTensor *t = mp_try_calloc(l->n ? l->n : 1, sizeof *t);
    int rc = MP_OK;
    if (!cfg || !t) rc = mp_err_set(e, "%s: out of memory", dir);
    for (size_t i = 0; i < l->n && rc == MP_OK; i++)
        t[i] = (MpHfTensor){l->t[i].name, l->t[i].type, l->t[i].ndim, l->t[i].rows, l->t[i].cols, l->t[i].nbytes};
    MkHf h = {s, l};
    const MpHfCheckpoint ck = {cfg, cfg ? strlen(cfg) : 0, t, l->n, mk_hf_bytes, &h, s->shards, NULL, 0};
    if (rc == MP_OK) rc = mp_hfwrite(dir, &ck, e);
    free(t);
    free(cfg);
    return rc;
}

/* ================================================================ GGUF writer */

/* GPT-2 bytes_to_unicode: byte b → code point (printable bytes map to themselves). */
static unsigned mk_byte_cp(unsigned b) {
    if ((b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff)) return b;
    unsigned k = 0;
    for (unsigned x = 0; x < b; x++)
        if (!((x >= 0x21 && x <= 0x7e) || (x >= 0xa1 && x <= 0xac) || (x >= 0xae && x <= 0xff))) k++;
    return 256 + k;
}

static void mk_utf8(char *out, unsigned cp) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else { /* < 0x800 suffices for this alphabet */
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        out[2] = 0;
    }
}

/* Byte-level BPE vocabulary of size V: 256 byte tokens, merges of ASCII letter pairs ("Ġt",
 * "th", ...), [PADn] fillers (UNUSED), then BOS = V-2 and EOS = V-1 (CONTROL). */
static int mk_vocab(MpGgufWriter *w, int V, const char *pre, MpErr *e) {
    char **tok = mp_try_calloc((size_t)V, sizeof *tok);
    int32_t *type = mp_try_calloc((size_t)V, sizeof *type);
    char **merges = mp_try_calloc((size_t)V, sizeof *merges);
    int nm = 0, rc = MP_OK;
    if (!tok || !type || !merges) rc = mp_err_set(e, "out of memory for the vocabulary");
    static const char letters[] = "etaoinshrdlucmfwypvbgkjqxz";
    char sp[4];
    mk_utf8(sp, mk_byte_cp(' '));
    for (int id = 0; id < V && rc == MP_OK; id++) {
        char buf[64], mg[64];
        mg[0] = 0;
        if (id < 256) {
            mk_utf8(buf, mk_byte_cp((unsigned)id));
            type[id] = 1;
        } else if (id >= V - 2) {
            snprintf(buf, sizeof buf, "%s", id == V - 2 ? "<|begin_of_text|>" : "<|end_of_text|>");
            type[id] = 3;
        } else if (id - 256 < 26) {
            int a = id - 256;
            snprintf(buf, sizeof buf, "%s%c", sp, letters[a]);
            snprintf(mg, sizeof mg, "%s %c", sp, letters[a]);
            type[id] = 1;
        } else if (id - 256 - 26 < 26 * 26) {
            int k = id - 256 - 26;
            snprintf(buf, sizeof buf, "%c%c", letters[k / 26], letters[k % 26]);
            snprintf(mg, sizeof mg, "%c %c", letters[k / 26], letters[k % 26]);
            type[id] = 1;
        } else {
            snprintf(buf, sizeof buf, "[PAD%d]", id);
            type[id] = 5;
        }
        if (!(tok[id] = strdup(buf))) rc = mp_err_set(e, "out of memory");
        if (mg[0] && rc == MP_OK && !(merges[nm++] = strdup(mg))) rc = mp_err_set(e, "out of memory");
    }
    if (rc == MP_OK) {
        mp_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
        mp_gguf_w_str(w, "tokenizer.ggml.pre", pre ? pre : "llama-bpe");
        mp_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)V);
        mp_gguf_w_arr(w, "tokenizer.ggml.token_type", MP_GGUF_INT32, type, (uint64_t)V);
        mp_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)merges, (uint64_t)nm);
        mp_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)(V - 2));
        mp_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)(V - 1));
        mp_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", !pre); /* qwen2's pre-tokenizer: no BOS */
    }
    for (int i = 0; tok && i < V; i++) free(tok[i]);
    for (int i = 0; merges && i < nm; i++) free(merges[i]);
    free(tok);
    free(type);
    free(merges);
    return rc;
}

static uint32_t mk_file_type(MpWType t) {
    switch (t) {
    case MP_WT_F32: return 0;
    case MP_WT_F16: return 1;
    case MP_WT_Q4_0: return 2;
    case MP_WT_Q4_1: return 3;
    case MP_WT_Q8_0: return 7;
    case MP_WT_Q5_0: return 8;
    case MP_WT_Q5_1: return 9;
    case MP_WT_Q2_K: return 10;
    case MP_WT_Q3_K: return 11; /* MOSTLY_Q3_K_S */
    case MP_WT_Q4_K: return 14; /* MOSTLY_Q4_K_S */
    case MP_WT_Q5_K: return 16; /* MOSTLY_Q5_K_S */
    case MP_WT_Q6_K: return 18;
    case MP_WT_BF16: return 32;
    default: return 0;
    }
}

/* GGUF key k (of the family's row) for this model into w; nothing where the model has no value. */
static void mk_gguf_value(const MpMkSpec *s, MpGgufWriter *w, MpGgufKey k, const char *key) {
    const MpFamily *f = mk_fam(s);
    switch (k) {
    case MP_GGK_CONTEXT_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)mk_max_pos(s)); break;
    case MP_GGK_EMBEDDING_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)s->dim); break;
    case MP_GGK_BLOCK_COUNT: mp_gguf_w_u32(w, key, (uint32_t)s->layers); break;
    case MP_GGK_FEED_FORWARD_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)s->ffn); break;
    case MP_GGK_HEAD_COUNT: mp_gguf_w_u32(w, key, (uint32_t)s->heads); break;
    case MP_GGK_HEAD_COUNT_KV: mp_gguf_w_u32(w, key, (uint32_t)s->kv_heads); break;
    case MP_GGK_KEY_LENGTH: case MP_GGK_VALUE_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)mk_head_dim(s)); break;
    case MP_GGK_ATTN_LOGIT_SOFTCAPPING: if (s->attn_softcap > 0) mp_gguf_w_f32(w, key, (float)s->attn_softcap); break;
    case MP_GGK_FINAL_LOGIT_SOFTCAPPING: if (s->final_softcap > 0) mp_gguf_w_f32(w, key, (float)s->final_softcap); break;
    /* the local layers' window; phi3: 0, as its converter writes (llama.cpp windows no phi3 layer) */
    case MP_GGK_SLIDING_WINDOW: mp_gguf_w_u32(w, key, f->gguf_win == MP_WIN_PERIOD ? (uint32_t)mk_window(s) : 0); break;
    case MP_GGK_ROPE_FREQ_BASE_SWA: mp_gguf_w_f32(w, key, (float)f->win_local_base); break;
    case MP_GGK_LAYER_NORM_EPSILON: case MP_GGK_LAYER_NORM_RMS_EPSILON: mp_gguf_w_f32(w, key, (float)s->norm_eps); break;
    case MP_GGK_USE_PARALLEL_RESIDUAL: mp_gguf_w_bool(w, key, s->parallel_residual); break;
    case MP_GGK_ROPE_FREQ_BASE: mp_gguf_w_f32(w, key, (float)mk_theta(s)); break;
    case MP_GGK_ROPE_DIMENSION_COUNT: mp_gguf_w_u32(w, key, (uint32_t)mk_rot_dim(s)); break;
    case MP_GGK_VOCAB_SIZE: mp_gguf_w_u32(w, key, (uint32_t)s->vocab); break;
    case MP_GGK_EXPERT_COUNT: mp_gguf_w_u32(w, key, (uint32_t)s->experts); break;
    case MP_GGK_EXPERT_USED_COUNT: mp_gguf_w_u32(w, key, (uint32_t)s->experts_used); break;
    case MP_GGK_EXPERT_FEED_FORWARD_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)mk_exp_ffn(s)); break;
    case MP_GGK_EXPERT_SHARED_FEED_FORWARD_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)mk_shared_ffn(s)); break;
    case MP_GGK_ROPE_SCALING_ORIGINAL_CONTEXT_LENGTH: mp_gguf_w_u32(w, key, (uint32_t)mk_orig_ctx(s)); break;
    case MP_GGK_ROPE_SCALING_ATTN_FACTOR:
        if (s->rope_scaling == MP_ROPE_LONGROPE) {
            double fa = (double)mk_max_pos(s) / mk_orig_ctx(s);
            mp_gguf_w_f32(w, key, (float)sqrt(1 + log(fa) / log((double)mk_orig_ctx(s))));
        }
        break;
    case MP_GGK_COUNT: break;
    }
}

static int mk_write_gguf(const MpMkSpec *s, const MkList *l, const char *path, MpErr *e) {
    const MpFamily *f = mk_fam(s);
    const char *arch = f->gguf_arch ? f->gguf_arch : f->name;
    MpGgufWriter w;
    mp_gguf_writer_init(&w, MP_GGUF_DEFAULT_ALIGNMENT);
    mp_gguf_w_str(&w, "general.architecture", arch);
    mp_gguf_w_str(&w, "general.name", "maskpos-mkmodel");
    mp_gguf_w_u32(&w, "general.file_type", mk_file_type(s->dtype));
    mp_gguf_w_u32(&w, "general.quantization_version", 2);
    mp_gguf_w_u32(&w, "general.alignment", MP_GGUF_DEFAULT_ALIGNMENT);
    for (const MpGgufKey *k = f->gguf_keys; k && *k != MP_GGK_COUNT; k++) { /* the family's keys, in its row's order */
        char key[128];
        snprintf(key, sizeof key, "%s.%s", arch, mp_gguf_key_suffix(*k));
        mk_gguf_value(s, &w, *k, key);
    }
    int rc = mk_vocab(&w, s->vocab, f->gguf_tok_pre, e);
    for (size_t i = 0; i < l->n && rc == MP_OK; i++) {
        const MkTensor *t = &l->t[i];
        int64_t ne[3] = {t->ndim == 2 ? t->cols : t->rows, t->rows, 1};
        if (t->experts > 0) { /* [E, rows, cols] in HF orientation */
            ne[1] = t->rows / t->experts;
            ne[2] = t->experts;
        }
        if (mp_gguf_w_tensor(&w, t->name, (uint32_t)(t->experts > 0 ? 3 : t->ndim), ne, t->type) != t->nbytes)
            rc = mp_err_set(e, "tensor '%s': size mismatch", t->name);
    }
    MpAtomicFile af;
    if (rc == MP_OK && mp_atomic_open(&af, path, e) == MP_OK) {
        rc = mp_gguf_w_header(&w, af.f, e);
        for (size_t i = 0; i < l->n && rc == MP_OK; i++)
            if (mk_write_tensor(s, &l->t[i], af.f, e) || mp_gguf_w_pad(&w, af.f, l->t[i].nbytes, e)) rc = MP_ERR;
        if (rc == MP_OK) rc = mp_atomic_commit(&af, e);
        else mp_atomic_abort(&af);
        if (rc) mp_err_prefix(e, "%s", path);
    } else if (rc == MP_OK) {
        rc = MP_ERR;
    }
    mp_gguf_writer_free(&w);
    return rc;
}

/* ================================================================ options of some families */

/* The options only some families have, as their refusal names them; which families: their rows
 * (mp_mk_option_for). Its refusal lists them in the family table's order. */
static const char *const mk_option_what[] = {
    [MP_MK_LLAMA3] = "--rope-scaling llama3 is", [MP_MK_LONGROPE] = "--rope-scaling longrope is",
    [MP_MK_PARTIAL_ROTARY] = "--partial-rotary is", [MP_MK_SERIAL_RESIDUAL] = "--no-parallel-residual is",
    [MP_MK_SLIDING_WINDOW] = "--sliding-window is", [MP_MK_EXPERTS] = "--experts / --experts-used are",
    [MP_MK_MOE_FFN] = "--moe-ffn is", [MP_MK_SHARED_FFN] = "--shared-ffn is", [MP_MK_NO_NORM_TOPK] = "--no-norm-topk is",
};
_Static_assert(sizeof mk_option_what / sizeof mk_option_what[0] == MP_MK_OPTION_COUNT, "one text per MpMkOption");

int mp_mk_option_for(MpMkOption o, MpArch a) {
    const MpFamily *f = mp_family(a);
    if (!f) return 0;
    switch (o) {
    case MP_MK_LLAMA3: return (f->opts & MP_FAM_OPT_LLAMA3) != 0;
    case MP_MK_LONGROPE: return (f->opts & MP_FAM_OPT_LONGROPE) != 0;
    case MP_MK_PARTIAL_ROTARY: return mp_family_hf_key(a, MP_HFK_PARTIAL_ROTARY_FACTOR) || mp_family_hf_key(a, MP_HFK_ROTARY_PCT);
    case MP_MK_SERIAL_RESIDUAL: return mp_family_hf_key(a, MP_HFK_USE_PARALLEL_RESIDUAL) != NULL;
    case MP_MK_SLIDING_WINDOW: return (f->opts & MP_FAM_OPT_WINDOW) != 0;
    case MP_MK_EXPERTS: return mp_family_has(a, MP_ROLE_FFN_ROUTER);
    case MP_MK_MOE_FFN: return mp_family_hf_key(a, MP_HFK_MOE_INTERMEDIATE_SIZE) != NULL;
    case MP_MK_SHARED_FFN: return mp_family_has(a, MP_ROLE_SHEXP_GATE);
    /* norm_topk_prob false, which llama.cpp's renormalising GGUF cannot say (qwen3moe) */
    case MP_MK_NO_NORM_TOPK: return mp_family_hf_key(a, MP_HFK_NORM_TOPK_PROB) && f->gguf_moe_renorm;
    case MP_MK_OPTION_COUNT: break;
    }
    return 0;
}

int mp_mk_option_refused(MpMkOption o, MpArch a, MpErr *e) {
    if (mp_mk_option_for(o, a)) return 0;
    char list[256];
    size_t k = 0;
    int n = 0, total = 0;
    for (int b = 0; b < MP_ARCH_COUNT; b++) total += mp_mk_option_for(o, (MpArch)b);
    list[0] = 0;
    for (int b = 0; b < MP_ARCH_COUNT && k < sizeof list; b++) {
        if (!mp_mk_option_for(o, (MpArch)b)) continue;
        const char *sep = !n ? "" : n == total - 1 ? " or " : ", ";
        k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", sep, mp_model_arch_name((MpArch)b));
        n++;
    }
    mp_err_set(e, "%s for --arch %s", mk_option_what[o], list);
    return 1;
}

/* ================================================================ entry point */

int mp_mk_check(const MpMkSpec *s, MpErr *e) {
    if ((unsigned)s->arch >= MP_ARCH_COUNT) return mp_err_set(e, "unknown architecture");
    if (s->layers < 1 || s->layers > 4096) return mp_err_set(e, "--layers must be in [1, 4096]");
    if (s->dim < 1 || s->dim > (1 << 24) || s->ffn < 1 || s->ffn > (1 << 24)) return mp_err_set(e, "--dim and --ffn must be in [1, 2^24]");
    if (s->heads < 1 || s->kv_heads < 1 || s->heads > 4096) return mp_err_set(e, "--heads/--kv-heads must be >= 1");
    if (s->heads % s->kv_heads) return mp_err_set(e, "--heads %d is not a multiple of --kv-heads %d", s->heads, s->kv_heads);
    if (s->head_dim == 0 && s->dim % s->heads) return mp_err_set(e, "--dim %d is not a multiple of --heads %d (give --head-dim)", s->dim, s->heads);
    int hd = mk_head_dim(s);
    if (hd < 2 || hd % 2 || (int64_t)hd * s->heads > (1 << 24)) return mp_err_set(e, "head dim %d must be even, >= 2", hd);
    if (s->vocab < 1 || s->vocab > (1 << 27)) return mp_err_set(e, "--vocab must be in [1, 2^27]");
    if (s->format == MP_FORMAT_GGUF && s->vocab < 258)
        return mp_err_set(e, "--vocab %d: a GGUF byte-level BPE vocabulary needs >= 258 tokens (256 bytes + BOS + EOS)", s->vocab);
    if (s->format == MP_FORMAT_HF && s->dtype != MP_WT_F32 && s->dtype != MP_WT_F16 && s->dtype != MP_WT_BF16)
        return mp_err_set(e, "--dtype %s: HF safetensors are written as f32, f16 or bf16", mp_quant_name(s->dtype));
    if (!mp_quant_can_encode(s->dtype)) return mp_err_set(e, "--dtype %s: cannot write this type", mp_quant_name(s->dtype));
    if (s->shards < 1 || (s->shards > 1 && s->format != MP_FORMAT_HF)) return mp_err_set(e, "--shards is for --format hf only, >= 1");
    if (s->rope_scaling == MP_ROPE_LLAMA3 && mp_mk_option_refused(MP_MK_LLAMA3, s->arch, e)) return MP_ERR;
    if (s->rope_scaling == MP_ROPE_LONGROPE && mp_mk_option_refused(MP_MK_LONGROPE, s->arch, e)) return MP_ERR;
    if (s->rope_scaling != MP_ROPE_NONE && s->rope_scaling != MP_ROPE_LLAMA3 && s->rope_scaling != MP_ROPE_LONGROPE)
        return mp_err_set(e, "unsupported --rope-scaling");
    if (!(s->partial_rotary > 0 && s->partial_rotary <= 1)) return mp_err_set(e, "--partial-rotary must be in (0, 1]");
    if (s->partial_rotary != 1 && mp_mk_option_refused(MP_MK_PARTIAL_ROTARY, s->arch, e)) return MP_ERR;
    const MpFamily *f = mk_fam(s);
    if (mp_family_mha(s->arch) && s->kv_heads != s->heads) return mp_err_set(e, "--arch %s has as many key/value heads as query heads", f->name);
    char head[128];
    mp_model_stored_name(MP_FORMAT_HF, s->arch, MP_ROLE_OUTPUT, -1, head, sizeof head);
    if (f->tie == MP_TIE_NEVER && s->tie) return mp_err_set(e, "--tie: %s's output head (%s) is its own tensor", f->name, head);
    if (f->tie == MP_TIE_ALWAYS && !s->tie) return mp_err_set(e, "internal: %s is tied", f->name);
    if (!f->softcap && (s->attn_softcap > 0 || s->final_softcap > 0)) {
        char list[256];
        size_t k = 0;
        list[0] = 0;
        for (int b = 0; b < MP_ARCH_COUNT; b++)
            if (mp_family((MpArch)b)->softcap && k < sizeof list) k += (size_t)snprintf(list + k, sizeof list - k, "%s%s", k ? ", " : "", mp_model_arch_name((MpArch)b));
        return mp_err_set(e, "--attn-softcap / --final-softcap are for --arch %s", list);
    }
    if (!(s->attn_softcap >= 0 && s->final_softcap >= 0) || s->sliding_window < 0) return mp_err_set(e, "bad soft-capping or sliding window");
    if (s->sliding_window > 0 && mp_mk_option_refused(MP_MK_SLIDING_WINDOW, s->arch, e)) return MP_ERR;
    if (s->sliding_window > 0 && f->gguf_win != MP_WIN_PERIOD && s->format == MP_FORMAT_GGUF)
        return mp_err_set(e, "--sliding-window: llama.cpp windows no %s layer, so its GGUF has no such key (HF only)", mp_model_arch_name(s->arch));
    if (!s->parallel_residual && mp_mk_option_refused(MP_MK_SERIAL_RESIDUAL, s->arch, e)) return MP_ERR;
    if (mp_family_has(s->arch, MP_ROLE_FFN_ROUTER) && (s->experts < 1 || s->experts > 4096 || s->experts_used < 1 || s->experts_used > s->experts))
        return mp_err_set(e, "--experts must be in [1, 4096] and --experts-used in [1, --experts]");
    if (s->moe_ffn < 0 || s->moe_ffn > (1 << 24)) return mp_err_set(e, "--moe-ffn must be in [1, 2^24]");
    if (s->moe_ffn > 0 && mp_mk_option_refused(MP_MK_MOE_FFN, s->arch, e)) return MP_ERR;
    if (s->shared_ffn < 0 || s->shared_ffn > (1 << 24)) return mp_err_set(e, "--shared-ffn must be in [1, 2^24]");
    if (s->shared_ffn > 0 && mp_mk_option_refused(MP_MK_SHARED_FFN, s->arch, e)) return MP_ERR;
    if (s->no_norm_topk && mp_mk_option_refused(MP_MK_NO_NORM_TOPK, s->arch, e)) return MP_ERR;
    if (s->no_norm_topk && s->format != MP_FORMAT_HF)
        return mp_err_set(e, "--no-norm-topk is for --format hf (llama.cpp's qwen3moe always renormalises)");
    int rd = mk_rot_dim(s);
    if (rd < 2 || rd % 2) return mp_err_set(e, "rotary dim %d (head dim x partial rotary) must be even and >= 2", rd);
    if (!(s->norm_eps >= 0)) return mp_err_set(e, "bad norm eps");
    return MP_OK;
}

/* Free bytes on the file system that will hold out (its nearest existing folder); -1 unknown. */
static double mk_free_bytes(const char *out) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", out);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        const char *d = slash ? (dir[0] ? dir : "/") : ".";
        struct statvfs vs;
        if (statvfs(d, &vs) == 0) return (double)vs.f_bavail * (double)vs.f_frsize;
        if (!slash) return -1;
    }
}

/* Refuses a model larger than MP_MK_MAX_BYTES or than the free space where it goes, before a
 * byte is written (a multi-TB request used to fill the disk). */
static int mk_size_check(const MkList *l, const char *out, MpErr *e) {
    double bytes = 0;
    for (size_t i = 0; i < l->n; i++) bytes += (double)l->t[i].nbytes;
    if (bytes > MP_MK_MAX_BYTES)
        return mp_err_set(e, "%s: the model would take about %.3g GB, more than the %.0f GB mkmodel writes (it makes test "
                             "models); HINT: fewer --layers or a smaller --dim/--ffn/--vocab",
                          out, bytes / 1e9, MP_MK_MAX_BYTES / 1e9);
    const double avail = mk_free_bytes(out);
    if (avail >= 0 && bytes + 16e6 > avail)
        return mp_err_set(e, "%s: the model would take about %.3g GB but only %.3g GB are free there", out, bytes / 1e9,
                          avail / 1e9);
    return MP_OK;
}

int mp_mk_size_check(const MpMkSpec *s, const char *out, MpErr *e) {
    if (mp_mk_check(s, e)) return MP_ERR;
    MkList l;
    int rc = mk_build(s, &l, e);
    if (rc == MP_OK) rc = mk_size_check(&l, out, e);
    free(l.t);
    return rc;
}

int mp_mk_write(const MpMkSpec *s, const char *out, MpErr *e) {
    if (mp_mk_check(s, e)) return MP_ERR;
    MkList l;
    int rc = mk_build(s, &l, e);
    if (rc == MP_OK) rc = mk_size_check(&l, out, e);
    if (rc == MP_OK && s->format == MP_FORMAT_HF && (size_t)s->shards > l.n)
        rc = mp_err_set(e, "--shards %d: the model has only %zu tensors", s->shards, l.n);
    if (rc == MP_OK) rc = s->format == MP_FORMAT_HF ? mk_write_hf(s, &l, out, e) : mk_write_gguf(s, &l, out, e);
    free(l.t);
    return rc;
}
