/* arch.c — names, feature flags, sliding-window layers and RoPE tables: everything derived
 * from the hyperparameters alone; see arch.h.
 */
#include "load/arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h" /* mp_try_calloc, mp_err_set */

/* ================================================================ names */

/* Role sets the rows below share (MP_ROLE_BIT of each). */
#define R_(x) MP_ROLE_BIT(MP_ROLE_##x)
#define ARCH_ATTN (R_(Q) | R_(K) | R_(V) | R_(O))                       /* every family */
#define ARCH_PRE (R_(ATTN_NORM) | R_(FFN_NORM))                         /* norms before attention and MLP */
#define ARCH_POST (R_(ATTN_POST_NORM) | R_(FFN_POST_NORM))              /* norms of their outputs */
#define ARCH_QKV_BIAS (R_(Q_BIAS) | R_(K_BIAS) | R_(V_BIAS))
#define ARCH_QK_NORM (R_(Q_NORM) | R_(K_NORM))
#define ARCH_GLU (R_(GATE) | R_(UP) | R_(DOWN))                          /* the dense gated MLP */
#define ARCH_MOE (R_(FFN_ROUTER) | R_(GATE_EXPS) | R_(UP_EXPS) | R_(DOWN_EXPS))
#define ARCH_SHEXP (R_(SHEXP_GATE_INP) | R_(SHEXP_GATE) | R_(SHEXP_UP) | R_(SHEXP_DOWN))
#define ARCH_NEOX_BIAS (R_(O_BIAS) | R_(ATTN_NORM_BIAS) | R_(FFN_NORM_BIAS) | R_(UP_BIAS) | R_(DOWN_BIAS) | R_(OUTPUT_NORM_BIAS))

static const MpFamily families[] = {
    [MP_ARCH_LLAMA] = {"llama", NULL, {"llama", "smollm3"}, "LlamaForCausalLM", MP_ACT_SILU, ARCH_PRE | ARCH_ATTN | ARCH_GLU, 0},
    [MP_ARCH_MISTRAL] = {"mistral", "llama", {"mistral"}, "MistralForCausalLM", MP_ACT_SILU, ARCH_PRE | ARCH_ATTN | ARCH_GLU, 0},
    [MP_ARCH_QWEN2] = {"qwen2", NULL, {"qwen2"}, "Qwen2ForCausalLM", MP_ACT_SILU, ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | ARCH_GLU, 0},
    [MP_ARCH_QWEN3] = {"qwen3", NULL, {"qwen3"}, "Qwen3ForCausalLM", MP_ACT_SILU, ARCH_PRE | ARCH_ATTN | ARCH_QK_NORM | ARCH_GLU, 0},
    [MP_ARCH_PHI3] = {"phi3", NULL, {"phi3"}, "Phi3ForCausalLM", MP_ACT_SILU, ARCH_PRE | ARCH_ATTN | ARCH_GLU, 0},
    [MP_ARCH_OLMO2] = {"olmo2", NULL, {"olmo2"}, "Olmo2ForCausalLM", MP_ACT_SILU, ARCH_ATTN | ARCH_QK_NORM | ARCH_POST | ARCH_GLU, 1},
    [MP_ARCH_GPTNEOX] = {"gptneox", NULL, {"gpt_neox"}, "GPTNeoXForCausalLM", MP_ACT_GELU_ERF,
                         ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | R_(UP) | R_(DOWN) | ARCH_NEOX_BIAS, 0},
    [MP_ARCH_GEMMA2] = {"gemma2", NULL, {"gemma2"}, "Gemma2ForCausalLM", MP_ACT_GELU_TANH, ARCH_PRE | ARCH_ATTN | ARCH_POST | ARCH_GLU, 0},
    [MP_ARCH_GEMMA3] = {"gemma3", NULL, {"gemma3_text", "gemma3"}, "Gemma3ForCausalLM", MP_ACT_GELU_TANH,
                        ARCH_PRE | ARCH_ATTN | ARCH_QK_NORM | ARCH_POST | ARCH_GLU, 0},
    [MP_ARCH_GEMMA] = {"gemma", NULL, {"gemma"}, "GemmaForCausalLM", MP_ACT_GELU_TANH, ARCH_PRE | ARCH_ATTN | ARCH_GLU, 0},
    [MP_ARCH_MIXTRAL] = {"mixtral", "llama", {"mixtral"}, "MixtralForCausalLM", MP_ACT_SILU, ARCH_PRE | ARCH_ATTN | ARCH_MOE, 0},
    [MP_ARCH_QWEN3MOE] = {"qwen3moe", NULL, {"qwen3_moe"}, "Qwen3MoeForCausalLM", MP_ACT_SILU,
                          ARCH_PRE | ARCH_ATTN | ARCH_QK_NORM | ARCH_MOE, 0},
    [MP_ARCH_QWEN2MOE] = {"qwen2moe", NULL, {"qwen2_moe"}, "Qwen2MoeForCausalLM", MP_ACT_SILU,
                          ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | ARCH_MOE | ARCH_SHEXP, 0},
};
_Static_assert(sizeof families / sizeof families[0] == MP_ARCH_COUNT, "one row of families[] per MpArch");
_Static_assert(MP_ROLE_COUNT <= 64, "MpFamily.roles holds one bit per MpRole");

const char *mp_act_hf_name(MpAct a) {
    switch (a) {
    case MP_ACT_SILU: return "silu";
    case MP_ACT_GELU_ERF: return "gelu";
    case MP_ACT_GELU_TANH: return "gelu_pytorch_tanh";
    }
    return "?";
}

const MpFamily *mp_family(MpArch a) { return (unsigned)a < MP_ARCH_COUNT ? &families[a] : NULL; }
const char *mp_model_arch_name(MpArch a) { return (unsigned)a < MP_ARCH_COUNT ? families[a].name : "?"; }
int mp_family_has(MpArch a, MpRole r) { return (unsigned)a < MP_ARCH_COUNT && (unsigned)r < MP_ROLE_COUNT && (families[a].roles & MP_ROLE_BIT(r)); }

int mp_family_from_hf(const char *type) {
    for (int a = 0; a < MP_ARCH_COUNT; a++)
        for (int i = 0; i < 2; i++)
            if (families[a].hf_types[i] && !strcmp(type, families[a].hf_types[i])) return a;
    return -1;
}

int mp_family_from_gguf(const char *arch) {
    for (int a = 0; a < MP_ARCH_COUNT; a++)
        if (!families[a].gguf_arch && !strcmp(arch, families[a].name)) return a;
    return -1;
}

int mp_family_from_name(const char *name) {
    for (int a = 0; a < MP_ARCH_COUNT; a++)
        if (!strcmp(name, families[a].name)) return a;
    return -1;
}

void mp_family_list(MpFamilyList kind, const char *sep, char *out, size_t cap) {
    size_t k = 0;
    out[0] = 0;
    for (int a = 0; a < MP_ARCH_COUNT; a++) {
        const MpFamily *f = &families[a];
        const int gguf = !f->gguf_arch, moe = (f->roles & MP_ROLE_BIT(MP_ROLE_FFN_ROUTER)) != 0;
        if ((kind == MP_FAMILY_GGUF && !gguf) || (kind == MP_FAMILY_GGUF_MOE && !(gguf && moe))) continue;
        for (int i = 0; i < (kind == MP_FAMILY_HF ? 2 : 1); i++) {
            const char *s = kind == MP_FAMILY_HF ? f->hf_types[i] : f->name;
            if (s && k < cap) k += (size_t)snprintf(out + k, cap - k, "%s%s", k ? sep : "", s);
        }
    }
}

const char *mp_model_rope_scaling_name(MpRopeScaling s) {
    switch (s) {
    case MP_ROPE_NONE: return "none";
    case MP_ROPE_LINEAR: return "linear";
    case MP_ROPE_LLAMA3: return "llama3";
    case MP_ROPE_FREQ_FACTORS: return "freq_factors";
    case MP_ROPE_LONGROPE: return "longrope";
    }
    return "?";
}

/* ================================================================ role shapes */

int mp_role_shape(MpRole r, const MpRoleDims *d, int64_t *rows, int64_t *cols) {
    *cols = 1;
    switch (r) {
    case MP_ROLE_TOK_EMBD: case MP_ROLE_OUTPUT: *rows = d->V; *cols = d->C; return 2;
    case MP_ROLE_OUTPUT_NORM: case MP_ROLE_ATTN_NORM: case MP_ROLE_FFN_NORM: *rows = d->C; return 1;
    case MP_ROLE_ATTN_POST_NORM: case MP_ROLE_FFN_POST_NORM: *rows = d->C; return 1;
    case MP_ROLE_Q: *rows = d->Q; *cols = d->C; return 2;
    case MP_ROLE_K: case MP_ROLE_V: *rows = d->KV; *cols = d->C; return 2;
    case MP_ROLE_Q_BIAS: *rows = d->Q; return 1;
    case MP_ROLE_K_BIAS: case MP_ROLE_V_BIAS: *rows = d->KV; return 1;
    case MP_ROLE_O: *rows = d->C; *cols = d->Q; return 2;
    case MP_ROLE_Q_NORM: *rows = d->qk_whole ? d->Q : d->HS; return 1;
    case MP_ROLE_K_NORM: *rows = d->qk_whole ? d->KV : d->HS; return 1;
    case MP_ROLE_GATE: case MP_ROLE_UP: *rows = d->FF; *cols = d->C; return 2;
    case MP_ROLE_DOWN: *rows = d->C; *cols = d->FF; return 2;
    case MP_ROLE_O_BIAS: case MP_ROLE_ATTN_NORM_BIAS: case MP_ROLE_FFN_NORM_BIAS: case MP_ROLE_DOWN_BIAS:
    case MP_ROLE_OUTPUT_NORM_BIAS: *rows = d->C; return 1;
    case MP_ROLE_UP_BIAS: *rows = d->FF; return 1;
    case MP_ROLE_FFN_ROUTER: *rows = d->E; *cols = d->C; return 2;
    case MP_ROLE_GATE_EXPS: case MP_ROLE_UP_EXPS: *rows = d->E * d->FF; *cols = d->C; return 2;
    case MP_ROLE_DOWN_EXPS: *rows = d->E * d->C; *cols = d->FF; return 2;
    case MP_ROLE_SHEXP_GATE_INP: *rows = 1; *cols = d->C; return 2;
    case MP_ROLE_SHEXP_GATE: case MP_ROLE_SHEXP_UP: *rows = d->FFS; *cols = d->C; return 2;
    case MP_ROLE_SHEXP_DOWN: *rows = d->C; *cols = d->FFS; return 2;
    case MP_ROLE_COUNT: break;
    }
    *rows = 0;
    return 0;
}

MpRoleDims mp_model_role_dims(const MpModel *m) {
    const MpRoleDims d = {m->dim, (int64_t)m->n_heads * m->head_dim, (int64_t)m->n_kv_heads * m->head_dim, m->head_dim, m->ffn,
                          m->vocab, m->n_experts, m->ffn_shexp, m->qk_norm_whole};
    return d;
}

/* ================================================================ features */

void mp_model_arch_features(MpModel *m) {
    const MpFamily *f = mp_family(m->arch);
    if (!f) return;
    m->has_qkv_bias = mp_family_has(m->arch, MP_ROLE_Q_BIAS);
    m->has_qk_norm = mp_family_has(m->arch, MP_ROLE_Q_NORM);
    m->qk_norm_whole = f->qk_norm_whole;
    m->no_pre_norm = !mp_family_has(m->arch, MP_ROLE_ATTN_NORM);
    m->post_norm = mp_family_has(m->arch, MP_ROLE_ATTN_POST_NORM);
    m->geglu = f->act == MP_ACT_GELU_TANH;
    m->layer_norm = mp_family_has(m->arch, MP_ROLE_ATTN_NORM_BIAS);
    m->gelu_mlp = f->act == MP_ACT_GELU_ERF;
}

/* ================================================================ sliding-window layers */

int mp_model_local_layers(MpModel *m, int period, double local_base, MpErr *e) {
    free(m->layer_local);
    free(m->inv_freq_local);
    m->inv_freq_local = NULL;
    m->layer_local = malloc((size_t)m->n_layers);
    if (!m->layer_local) return mp_err_set(e, "out of memory");
    for (int l = 0; l < m->n_layers; l++) m->layer_local[l] = (unsigned char)(period > 0 && (l + 1) % period != 0);
    if (local_base > 0) {
        if (!(local_base > 1)) return mp_err_set(e, "%s: the local RoPE base must be > 1", m->path);
        const int half = m->rot_dim / 2;
        m->inv_freq_local = mp_try_calloc((size_t)(half > 0 ? half : 1), sizeof(float));
        if (!m->inv_freq_local) return mp_err_set(e, "out of memory for the RoPE table");
        for (int i = 0; i < half; i++) m->inv_freq_local[i] = (float)(1.0 / pow(local_base, (2.0 * i) / m->rot_dim));
    }
    return MP_OK;
}

int mp_model_layer_window(const MpModel *m, int l) {
    if (m->sliding_window <= 0 || l < 0 || l >= m->n_layers) return 0;
    return !m->layer_local || m->layer_local[l] ? m->sliding_window : 0;
}

/* ================================================================ RoPE (spec §2.2) */

int mp_model_rope_init(MpModel *m, const double *short_factor, const double *long_factor, MpErr *e) {
    int half = m->rot_dim / 2;
    free(m->inv_freq);
    free(m->inv_freq_long);
    m->inv_freq_long = NULL;
    m->inv_freq = mp_try_calloc((size_t)(half > 0 ? half : 1), sizeof(float));
    if (!m->inv_freq) return mp_err_set(e, "out of memory for the RoPE table");
    if (m->rope_scaling == MP_ROPE_LONGROPE) {
        m->inv_freq_long = mp_try_calloc((size_t)(half > 0 ? half : 1), sizeof(float));
        if (!m->inv_freq_long) return mp_err_set(e, "out of memory for the RoPE table");
    }
    const double two_pi = 6.283185307179586476925286766559;
    for (int i = 0; i < half; i++) {
        double base = pow(m->rope_theta, (2.0 * i) / m->rot_dim), inv = 1.0 / base;
        switch (m->rope_scaling) {
        case MP_ROPE_NONE: break;
        case MP_ROPE_LINEAR: inv /= m->rope_factor; break;
        case MP_ROPE_LLAMA3: {
            double old = m->rope_orig_ctx, lo = m->rope_low_freq_factor, hi = m->rope_high_freq_factor;
            double low_wl = old / lo, high_wl = old / hi, wl = two_pi / inv;
            double inv_l = wl > low_wl ? inv / m->rope_factor : inv;
            double s = (old / wl - lo) / (hi - lo);
            double smoothed = (1 - s) * inv_l / m->rope_factor + s * inv_l;
            int medium = !(wl < high_wl) && !(wl > low_wl);
            inv = medium ? smoothed : inv_l;
            break;
        }
        case MP_ROPE_FREQ_FACTORS:
            if (!short_factor) return mp_err_set(e, "RoPE frequency factors missing");
            inv /= short_factor[i];
            break;
        case MP_ROPE_LONGROPE:
            if (!short_factor || !long_factor) return mp_err_set(e, "longrope factor lists missing");
            m->inv_freq_long[i] = (float)(1.0 / (long_factor[i] * base));
            inv = 1.0 / (short_factor[i] * base);
            break;
        }
        m->inv_freq[i] = (float)inv;
    }
    return MP_OK;
}
