/* hfconfig.c — see hfconfig.h. Parser of untrusted input: every key is type- and range-checked
 * and named in the error message. */
#include "load/hfconfig.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h" /* mp_json_err */

#define CFG_MAX_DIM (1 << 24)   /* hidden/ffn/head sizes: keeps every product far from overflow */
#define CFG_MAX_VOCAB (1 << 27)
#define CFG_MAX_LAYERS 4096
#define CFG_MAX_HEADS 4096

/* Integer key in [lo, hi]; absent (or null) → def when !required. */
static int cfg_int(json_t *root, const char *key, int required, int64_t def, int64_t lo, int64_t hi, int64_t *out,
                   const char *path, MpErr *e) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return mp_err_set(e, "%s: missing key \"%s\"", path, key);
        *out = def;
        return MP_OK;
    }
    if (!json_is_integer(v)) return mp_err_set(e, "%s: key \"%s\" is not an integer", path, key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return mp_err_set(e, "%s: key \"%s\" = %lld is outside [%lld, %lld]", path, key, (long long)x, (long long)lo, (long long)hi);
    *out = x;
    return MP_OK;
}

static int cfg_num(json_t *root, const char *key, int required, double def, double *out, const char *path, MpErr *e) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        if (required) return mp_err_set(e, "%s: missing key \"%s\"", path, key);
        *out = def;
        return MP_OK;
    }
    if (!json_is_number(v)) return mp_err_set(e, "%s: key \"%s\" is not a number", path, key);
    *out = json_number_value(v);
    if (!isfinite(*out)) return mp_err_set(e, "%s: key \"%s\" is not finite", path, key);
    return MP_OK;
}

static int cfg_bool(json_t *root, const char *key, int def, int *out, const char *path, MpErr *e) {
    json_t *v = json_object_get(root, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return MP_OK;
    }
    if (!json_is_boolean(v)) return mp_err_set(e, "%s: key \"%s\" is not a boolean", path, key);
    *out = json_is_true(v);
    return MP_OK;
}

/* bos/eos: an integer, a list of integers (first taken), or null → -1. */
static int cfg_token(json_t *root, const char *key, int *out, const char *path, MpErr *e) {
    json_t *v = json_object_get(root, key);
    *out = -1;
    if (!v || json_is_null(v)) return MP_OK;
    if (json_is_array(v)) {
        if (json_array_size(v) == 0) return MP_OK;
        v = json_array_get(v, 0);
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > CFG_MAX_VOCAB)
        return mp_err_set(e, "%s: key \"%s\" is not a token id", path, key);
    *out = (int)json_integer_value(v);
    return MP_OK;
}

/* A list of exactly n finite numbers → new double array. */
static int cfg_factor_list(json_t *obj, const char *key, size_t n, double **out, const char *path, MpErr *e) {
    json_t *v = json_object_get(obj, key);
    if (!json_is_array(v)) return mp_err_set(e, "%s: rope_scaling.%s is missing or not a list", path, key);
    if (json_array_size(v) != n)
        return mp_err_set(e, "%s: rope_scaling.%s has %zu entries, rotary dim / 2 = %zu", path, key, json_array_size(v), n);
    double *a = mp_try_calloc(n ? n : 1, sizeof *a);
    if (!a) return mp_err_set(e, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_number(x) || !isfinite(json_number_value(x)) || json_number_value(x) <= 0) {
            free(a);
            return mp_err_set(e, "%s: rope_scaling.%s[%zu] is not a positive number", path, key, i);
        }
        a[i] = json_number_value(x);
    }
    *out = a;
    return MP_OK;
}

/* Gemma 2 and 3: the scales and caps, and the window W = "sliding_window" of the local layers
 * (which ones: cfg_gemma_local). */
static int cfg_gemma(MpModel *m, json_t *root, const char *path, MpErr *e) {
    int64_t v;
    double q;
    if (m->arch == MP_ARCH_GEMMA) m->attn_scale = 1.0 / sqrt((double)m->head_dim); /* Gemma 1: no window, no caps */
    if (m->arch != MP_ARCH_GEMMA) {
        if (cfg_int(root, "sliding_window", 0, 4096, 1, INT32_MAX, &v, path, e)) return MP_ERR;
        m->sliding_window = (int)v;
        if (cfg_num(root, "query_pre_attn_scalar", 0, 256, &q, path, e)) return MP_ERR;
        if (!(q > 0)) return mp_err_set(e, "%s: key \"query_pre_attn_scalar\" must be > 0", path);
        m->attn_scale = 1.0 / sqrt(q);
        if (cfg_num(root, "attn_logit_softcapping", 0, 0, &m->attn_softcap, path, e) ||
            cfg_num(root, "final_logit_softcapping", 0, 0, &m->final_softcap, path, e))
            return MP_ERR;
    }
    if (m->attn_softcap < 0 || m->final_softcap < 0) return mp_err_set(e, "%s: a soft-capping value is negative", path);
    /* Gemma2Model: hidden * torch.tensor(sqrt(hidden_size), dtype=hidden.dtype) */
    json_t *dt = json_object_get(root, "torch_dtype");
    const char *d = json_is_string(dt) ? json_string_value(dt) : "float32";
    const float s = (float)sqrt((double)m->dim);
    m->embed_scale = !strcmp(d, "bfloat16") ? mp_bf16_to_f32(mp_f32_to_bf16(s)) : !strcmp(d, "float16") ? mp_f16_to_f32(mp_f32_to_f16(s)) : s;
    return MP_OK;
}

/* "layer_types" (sliding_attention / full_attention per layer), when present, into layer_local
 * (allocated by the caller). */
static int cfg_layer_types(MpModel *m, json_t *root, const char *path, MpErr *e) {
    json_t *lt = json_object_get(root, "layer_types");
    if (!json_is_array(lt)) return MP_OK;
    if (json_array_size(lt) != (size_t)m->n_layers)
        return mp_err_set(e, "%s: key \"layer_types\" must list the %d layers", path, m->n_layers);
    for (int l = 0; l < m->n_layers; l++) {
        const char *t = json_string_value(json_array_get(lt, (size_t)l));
        if (!t || (strcmp(t, "sliding_attention") && strcmp(t, "full_attention")))
            return mp_err_set(e, "%s: key \"layer_types\"[%d] is not sliding_attention or full_attention", path, l);
        m->layer_local[l] = !strcmp(t, "sliding_attention");
    }
    return MP_OK;
}

/* Gemma 3's local layers: "layer_types" or every layer but each sliding_window_pattern-th; their
 * RoPE base rope_local_base_freq, unscaled. Gemma 2: every other layer (HF Gemma2: layer l is
 * local when l is even; llama.cpp set_swa_pattern(2)), or "layer_types". */
static int cfg_gemma_local(MpModel *m, json_t *root, const char *path, MpErr *e) {
    double lb = 0;
    int64_t period = 2;
    if (m->arch == MP_ARCH_GEMMA3 && (cfg_num(root, "rope_local_base_freq", 0, 10000.0, &lb, path, e) ||
                                      cfg_int(root, "sliding_window_pattern", 0, 6, 1, 4096, &period, path, e)))
        return MP_ERR;
    if (mp_model_local_layers(m, (int)period, lb, e)) return mp_err_prefix(e, "%s", path);
    return cfg_layer_types(m, root, path, e);
}

/* The sliding windows of the other families, as their HF classes apply them:
 *   - mistral, phi3: "sliding_window" (null or absent: none) in every layer (MistralModel and
 *     Phi3Model build create_sliding_window_causal_mask whenever it is set);
 *   - qwen2, qwen3: only with "use_sliding_window" true, then in layers l >= max_window_layers
 *     (default 28), or as "layer_types" says;
 *   - the rest: refused unless every layer is full_attention.
 * GGUF files follow llama.cpp instead, which windows none of these (model.c). */
static int cfg_windows_hf(MpModel *m, json_t *root, const char *path, MpErr *e) {
    int64_t v;
    int use_sw = 0;
    const int qwen = m->arch == MP_ARCH_QWEN2 || m->arch == MP_ARCH_QWEN3;
    const int mist = m->arch == MP_ARCH_MISTRAL || m->arch == MP_ARCH_PHI3 || m->arch == MP_ARCH_MIXTRAL; /* mixtral: as mistral */
    if (cfg_bool(root, "use_sliding_window", 0, &use_sw, path, e)) return MP_ERR;
    if (use_sw && !qwen) return mp_err_set(e, "%s: key \"use_sliding_window\": sliding-window layers are not supported for this family", path);
    json_t *lt = json_object_get(root, "layer_types");
    if (json_is_array(lt) && !mist && !(qwen && use_sw)) { /* qwen: sliding layers only with use_sliding_window */
        size_t i;
        json_t *x;
        json_array_foreach(lt, i, x) if (json_is_string(x) && strcmp(json_string_value(x), "full_attention"))
            return mp_err_set(e, "%s: key \"layer_types\"[%zu] = \"%.30s\": only full_attention layers are supported", path, i, json_string_value(x));
    }
    if (!mist && !use_sw) return MP_OK;
    if (cfg_int(root, "sliding_window", 0, 0, 0, INT32_MAX, &v, path, e)) return MP_ERR;
    if (qwen && v < 1) return mp_err_set(e, "%s: key \"use_sliding_window\" is true but \"sliding_window\" is not a positive integer", path);
    m->sliding_window = (int)v;
    if (!m->sliding_window || (mist && !json_is_array(lt))) return MP_OK; /* mistral, phi3: every layer */
    int64_t mwl = 0;
    if (qwen && cfg_int(root, "max_window_layers", 0, 28, 0, INT32_MAX, &mwl, path, e)) return MP_ERR;
    free(m->layer_local);
    m->layer_local = malloc((size_t)m->n_layers);
    if (!m->layer_local) return mp_err_set(e, "%s: out of memory", path);
    for (int l = 0; l < m->n_layers; l++) m->layer_local[l] = (unsigned char)(l >= mwl);
    return cfg_layer_types(m, root, path, e);
}

/* model_type → arch, refusing what is not read; the activation the family runs. *type_out: the
 * model_type string (borrowed from root). */
static int cfg_arch(MpModel *m, json_t *root, const char **type_out, const char *path, MpErr *e) {
    if (!json_is_object(root)) return mp_err_set(e, "%s: not a JSON object", path);
    json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt)) return mp_err_set(e, "%s: missing or non-string key \"model_type\"", path);
    const char *type = json_string_value(mt);
    /* smollm3 (HF SmolLM3ForCausalLM) is the Llama block with RoPE switched off in some layers
     * ("no_rope_layers", or every no_rope_layer_interval-th layer): read as llama (the family
     * table's hf_types, arch.c; "gptneox", "qwen3moe", "qwen2moe" are GGUF's names, not HF's) */
    const int a = mp_family_from_hf(type);
    if (a < 0) {
        char list[512];
        mp_family_list(MP_FAMILY_HF, ", ", list, sizeof list);
        return mp_err_set(e, "%s: model_type \"%.40s\" is not supported (%s)", path, type, list);
    }
    m->arch = (MpArch)a;

    static const char *moe_keys[] = {"num_experts", "num_local_experts", "n_routed_experts"};
    const int moe = mp_family_has(m->arch, MP_ROLE_FFN_ROUTER); /* cfg_moe reads their keys */
    for (size_t i = 0; i < 3 && !moe; i++) {
        json_t *v = json_object_get(root, moe_keys[i]);
        if (v && !json_is_null(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
            return mp_err_set(e, "%s: key \"%s\": mixture-of-experts models are not supported", path, moe_keys[i]);
    }
    const int gemma1 = m->arch == MP_ARCH_GEMMA, gemma = mp_family(m->arch)->act == MP_ACT_GELU_TANH;
    json_t *act = json_object_get(root, gemma && json_object_get(root, "hidden_activation") ? "hidden_activation" : "hidden_act");
    /* gpt_neox: exact (erf) GELU; Gemma 1's released configs say hidden_act "gelu", which
     * GemmaModel runs as the tanh GELU unless hidden_activation says otherwise */
    const char *want_act = mp_act_hf_name(mp_family(m->arch)->act);
    if (gemma1 && act && json_is_string(act) && !strcmp(json_string_value(act), "gelu") && !json_object_get(root, "hidden_activation"))
        act = NULL;
    if (act && !json_is_null(act) && (!json_is_string(act) || strcmp(json_string_value(act), want_act)))
        return mp_err_set(e, "%s: key \"hidden_act\": only \"%s\" is supported for %s", path, want_act, type);
    *type_out = type;
    return MP_OK;
}

/* Sizes, norms, tying, tokens and biases; sets the feature flags. */
static int cfg_dims(MpModel *m, json_t *root, const char *type, const char *path, MpErr *e) {
    const int neox = m->arch == MP_ARCH_GPTNEOX;
    const int gemma = m->arch == MP_ARCH_GEMMA2 || m->arch == MP_ARCH_GEMMA3 || m->arch == MP_ARCH_GEMMA;
    int64_t v;
    if (cfg_int(root, "hidden_size", 1, 0, 1, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
    m->dim = (int)v;
    if (cfg_int(root, "intermediate_size", 1, 0, 1, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
    m->ffn = (int)v;
    if (cfg_int(root, "num_hidden_layers", 1, 0, 1, CFG_MAX_LAYERS, &v, path, e)) return MP_ERR;
    m->n_layers = (int)v;
    if (cfg_int(root, "num_attention_heads", 1, 0, 1, CFG_MAX_HEADS, &v, path, e)) return MP_ERR;
    m->n_heads = (int)v;
    if (cfg_int(root, "num_key_value_heads", 0, m->n_heads, 1, CFG_MAX_HEADS, &v, path, e)) return MP_ERR;
    m->n_kv_heads = (int)v;
    if (m->n_heads % m->n_kv_heads)
        return mp_err_set(e, "%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", path, m->n_heads, m->n_kv_heads);
    if (neox && m->n_kv_heads != m->n_heads)
        return mp_err_set(e, "%s: gpt_neox has one key/value head per query head (num_key_value_heads %d, num_attention_heads %d)",
                          path, m->n_kv_heads, m->n_heads);
    json_t *hd = json_object_get(root, "head_dim");
    if (hd && !json_is_null(hd)) {
        if (cfg_int(root, "head_dim", 1, 0, 2, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
        m->head_dim = (int)v;
    } else {
        if (m->dim % m->n_heads)
            return mp_err_set(e, "%s: hidden_size %d is not a multiple of num_attention_heads %d (and no \"head_dim\")", path, m->dim, m->n_heads);
        m->head_dim = m->dim / m->n_heads;
    }
    if ((int64_t)m->n_heads * m->head_dim > CFG_MAX_DIM)
        return mp_err_set(e, "%s: num_attention_heads x head_dim is too large", path);
    if (cfg_int(root, "vocab_size", 1, 0, 1, CFG_MAX_VOCAB, &v, path, e)) return MP_ERR;
    m->vocab = (int)v;
    if (cfg_num(root, neox ? "layer_norm_eps" : "rms_norm_eps", 0, neox ? 1e-5 : 1e-6, &m->norm_eps, path, e)) return MP_ERR;
    if (!(m->norm_eps >= 0)) return mp_err_set(e, "%s: key \"%s\" is negative", path, neox ? "layer_norm_eps" : "rms_norm_eps");
    /* absent: unknown (0); present, it must be a context (0 was taken for "unknown" silently) */
    if (cfg_int(root, "max_position_embeddings", 0, 0, 1, INT32_MAX, &v, path, e)) return MP_ERR;
    m->max_pos = (int)v;
    if (cfg_bool(root, "tie_word_embeddings", gemma, &m->tie_embeddings, path, e)) return MP_ERR; /* Gemma: tied by default */
    if (cfg_token(root, "bos_token_id", &m->bos_id, path, e) || cfg_token(root, "eos_token_id", &m->eos_id, path, e)) return MP_ERR;

    int attn_bias = 0, mlp_bias = 0;
    if (cfg_bool(root, "attention_bias", 0, &attn_bias, path, e) || cfg_bool(root, "mlp_bias", 0, &mlp_bias, path, e)) return MP_ERR;
    if (neox && cfg_bool(root, "attention_bias", 1, &attn_bias, path, e)) return MP_ERR;
    if (neox && !attn_bias) return mp_err_set(e, "%s: key \"attention_bias\": false is not supported for %s", path, type);
    if (attn_bias && !neox) return mp_err_set(e, "%s: key \"attention_bias\": true is not supported for %s", path, type);
    if (neox && cfg_bool(root, "use_parallel_residual", 1, &m->parallel_residual, path, e)) return MP_ERR;
    if (mlp_bias) return mp_err_set(e, "%s: key \"mlp_bias\": true is not supported", path);
    mp_model_arch_features(m);
    return MP_OK;
}

/* Sliding windows (cfg_windows_hf; Gemma's local layers: cfg_gemma_local, after the RoPE tables)
 * and Gemma's scales and caps. */
static int cfg_windows(MpModel *m, json_t *root, const char *path, MpErr *e) {
    const int gemma = m->arch == MP_ARCH_GEMMA2 || m->arch == MP_ARCH_GEMMA3 || m->arch == MP_ARCH_GEMMA;
    if (!gemma) return cfg_windows_hf(m, root, path, e);
    return cfg_gemma(m, root, path, e);
}

/* Per-layer RoPE switch (SmolLM3, `maskpos train --pos none`). */
static int cfg_rope_layers(MpModel *m, json_t *root, int smollm3, const char *path, MpErr *e) {
    /* per-layer RoPE switch: "no_rope_layers": [1 = RoPE, 0 = none] per layer */
    json_t *nrl = json_object_get(root, "no_rope_layers");
    if (nrl && !json_is_null(nrl)) {
        if (!json_is_array(nrl) || json_array_size(nrl) != (size_t)m->n_layers)
            return mp_err_set(e, "%s: key \"no_rope_layers\" must list one 0 or 1 for each of the %d layers", path, m->n_layers);
        m->rope_layer = malloc((size_t)m->n_layers);
        if (!m->rope_layer) return mp_err_set(e, "%s: out of memory", path);
        for (int j = 0; j < m->n_layers; j++) {
            json_t *x = json_array_get(nrl, (size_t)j);
            if (!json_is_integer(x) || (json_integer_value(x) != 0 && json_integer_value(x) != 1))
                return mp_err_set(e, "%s: key \"no_rope_layers\"[%d] must be 0 or 1", path, j);
            m->rope_layer[j] = (unsigned char)json_integer_value(x);
        }
    } else if (smollm3) { /* SmolLM3Config's default: no RoPE in layers whose 1-based index divides the interval */
        double iv;
        if (cfg_num(root, "no_rope_layer_interval", 0, 4.0, &iv, path, e)) return MP_ERR;
        if (!(iv >= 1 && iv <= 1e6 && iv == (int)iv))
            return mp_err_set(e, "%s: key \"no_rope_layer_interval\" must be a positive integer", path);
        m->rope_layer = malloc((size_t)m->n_layers);
        if (!m->rope_layer) return mp_err_set(e, "%s: out of memory", path);
        for (int j = 0; j < m->n_layers; j++) m->rope_layer[j] = (unsigned char)((j + 1) % (int)iv != 0);
    }
    return MP_OK;
}

/* rope_scaling / rope_parameters (rs, named rs_key): the scaling type and its numbers; longrope's
 * factor lists → *sf_out, *lf_out (new arrays). */
static int cfg_rope_scaling(MpModel *m, json_t *root, json_t *rs, const char *rs_key, double **sf_out, double **lf_out,
                            const char *path, MpErr *e) {
    int64_t v;
    double *sf = NULL, *lf = NULL;
    if (!json_is_object(rs)) return mp_err_set(e, "%s: key \"%s\" is not an object", path, rs_key);
    json_t *ty = json_object_get(rs, "rope_type");
    if (!ty) ty = json_object_get(rs, "type");
    const char *t = json_is_string(ty) ? json_string_value(ty) : NULL;
    if (!t) return mp_err_set(e, "%s: %s.rope_type is missing", path, rs_key);
    if (m->arch == MP_ARCH_PHI3 && (!strcmp(t, "su") || !strcmp(t, "yarn"))) t = "longrope";
    if (!strcmp(t, "default")) {
        /* nothing */
    } else if (!strcmp(t, "linear")) {
        m->rope_scaling = MP_ROPE_LINEAR;
        if (cfg_num(rs, "factor", 1, 1, &m->rope_factor, path, e)) return mp_err_prefix(e, "%s", rs_key);
    } else if (!strcmp(t, "llama3")) {
        m->rope_scaling = MP_ROPE_LLAMA3;
        if (cfg_num(rs, "factor", 1, 1, &m->rope_factor, path, e) ||
            cfg_num(rs, "low_freq_factor", 1, 1, &m->rope_low_freq_factor, path, e) ||
            cfg_num(rs, "high_freq_factor", 1, 1, &m->rope_high_freq_factor, path, e) ||
            cfg_int(rs, "original_max_position_embeddings", 1, 0, 1, INT32_MAX, &v, path, e))
            return mp_err_prefix(e, "%s (llama3)", rs_key);
        m->rope_orig_ctx = (int)v;
        if (!(m->rope_high_freq_factor > m->rope_low_freq_factor) || !(m->rope_low_freq_factor > 0))
            return mp_err_set(e, "%s: %s: need high_freq_factor > low_freq_factor > 0", path, rs_key);
    } else if (!strcmp(t, "longrope")) {
        m->rope_scaling = MP_ROPE_LONGROPE;
        int64_t orig;
        if (cfg_int(root, "original_max_position_embeddings", 0, 0, 0, INT32_MAX, &orig, path, e)) return MP_ERR;
        if (!orig && cfg_int(rs, "original_max_position_embeddings", 0, 0, 0, INT32_MAX, &orig, path, e)) return MP_ERR;
        if (!orig && m->arch == MP_ARCH_PHI3) orig = 4096; /* Phi3Config default */
        if (!orig) return mp_err_set(e, "%s: longrope needs original_max_position_embeddings", path);
        m->rope_orig_ctx = (int)orig;
        if (m->max_pos > 0) m->rope_factor = (double)m->max_pos / (double)orig;
        else if (cfg_num(rs, "factor", 0, 1.0, &m->rope_factor, path, e)) return MP_ERR;
        json_t *af = json_object_get(rs, "attention_factor");
        if (af && !json_is_null(af)) {
            if (cfg_num(rs, "attention_factor", 1, 1, &m->rope_attn_factor, path, e)) return mp_err_prefix(e, "%s", rs_key);
        } else {
            m->rope_attn_factor = m->rope_factor <= 1 ? 1.0 : sqrt(1 + log(m->rope_factor) / log((double)orig));
        }
        if (cfg_factor_list(rs, "short_factor", (size_t)m->rot_dim / 2, &sf, path, e)) return MP_ERR;
        if (cfg_factor_list(rs, "long_factor", (size_t)m->rot_dim / 2, &lf, path, e)) {
            free(sf);
            return MP_ERR;
        }
    } else {
        return mp_err_set(e, "%s: %s.rope_type \"%.30s\" is not supported (default, linear, llama3, longrope)", path, rs_key, t);
    }
    if (!(m->rope_factor > 0)) {
        free(sf);
        free(lf);
        return mp_err_set(e, "%s: %s.factor must be > 0", path, rs_key);
    }
    *sf_out = sf;
    *lf_out = lf;
    return MP_OK;
}

/* RoPE: base, rotary dims, per-layer switch, scaling; builds the tables. */
static int cfg_rope(MpModel *m, json_t *root, const char *type, const char *path, MpErr *e) {
    const int neox = m->arch == MP_ARCH_GPTNEOX;
    /* RoPE: transformers v5 "rope_parameters" or v4 rope_theta + rope_scaling */
    json_t *rp = json_object_get(root, "rope_parameters");
    json_t *rs = json_object_get(root, "rope_scaling");
    const char *rs_key = "rope_scaling";
    if (json_is_object(rp)) {
        if (cfg_num(rp, "rope_theta", 0, 10000.0, &m->rope_theta, path, e)) return mp_err_prefix(e, "rope_parameters");
        rs = rp;
        rs_key = "rope_parameters";
    } else if (cfg_num(root, "rope_theta", 0, 10000.0, &m->rope_theta, path, e)) {
        return MP_ERR;
    } else if (neox && !json_object_get(root, "rope_theta") && cfg_num(root, "rotary_emb_base", 0, 10000.0, &m->rope_theta, path, e)) {
        return MP_ERR;
    }
    if (!(m->rope_theta > 1)) return mp_err_set(e, "%s: key \"rope_theta\" must be > 1", path);
    double prf;
    const char *prf_key = neox && !json_object_get(root, "partial_rotary_factor") ? "rotary_pct" : "partial_rotary_factor";
    if (cfg_num(root, prf_key, 0, neox ? 0.25 : 1.0, &prf, path, e)) return MP_ERR;
    if (!(prf > 0 && prf <= 1)) return mp_err_set(e, "%s: key \"%s\" must be in (0, 1]", path, prf_key);
    m->rot_dim = (int)(m->head_dim * prf);
    if (m->rot_dim < 2 || m->rot_dim % 2)
        return mp_err_set(e, "%s: rotary dim %d (head_dim x partial_rotary_factor) must be even and >= 2", path, m->rot_dim);
    if (cfg_rope_layers(m, root, !strcmp(type, "smollm3"), path, e)) return MP_ERR;
    m->rope_scaling = MP_ROPE_NONE;
    m->rope_attn_factor = 1.0;
    m->rope_factor = 1.0;
    double *sf = NULL, *lf = NULL;
    if (rs && !json_is_null(rs) && cfg_rope_scaling(m, root, rs, rs_key, &sf, &lf, path, e)) return MP_ERR;
    int rc = mp_model_rope_init(m, sf, lf, e);
    free(sf);
    free(lf);
    if (rc == MP_OK && (m->arch == MP_ARCH_GEMMA3 || m->arch == MP_ARCH_GEMMA2)) rc = cfg_gemma_local(m, root, path, e);
    return rc;
}

/* Mixture-of-experts FFN (mixtral: MixtralConfig's keys and defaults; qwen3moe: Qwen3MoeConfig's).
 * m->ffn becomes one expert's size. Qwen3-MoE's dense layers among MoE ones are refused. */
static int cfg_moe(MpModel *m, json_t *root, const char *path, MpErr *e) {
    int64_t v;
    const int mix = m->arch == MP_ARCH_MIXTRAL;
    const int q2 = m->arch == MP_ARCH_QWEN2MOE; /* Qwen2MoeConfig's defaults: 60 experts, 4 used, 1408, shared 5632 */
    if (m->arch != MP_ARCH_MIXTRAL && m->arch != MP_ARCH_QWEN3MOE && !q2) return MP_OK;
    const char *ne_key = mix ? "num_local_experts" : "num_experts";
    if (cfg_int(root, ne_key, 0, mix ? 8 : q2 ? 60 : 128, 1, 1 << 16, &v, path, e)) return MP_ERR;
    m->n_experts = (int)v;
    if (cfg_int(root, "num_experts_per_tok", 0, mix ? 2 : q2 ? 4 : 8, 1, m->n_experts, &v, path, e)) return MP_ERR;
    m->n_experts_used = (int)v;
    m->moe_norm_topk = 1;
    if (mix) return MP_OK;
    if (cfg_int(root, "moe_intermediate_size", 0, q2 ? 1408 : 768, 1, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
    m->ffn = (int)v;
    if (q2 && cfg_int(root, "shared_expert_intermediate_size", 0, 5632, 1, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
    m->ffn_shexp = q2 ? (int)v : 0;
    if (cfg_bool(root, "norm_topk_prob", 0, &m->moe_norm_topk, path, e)) return MP_ERR;
    if (cfg_int(root, "decoder_sparse_step", 0, 1, 0, INT32_MAX, &v, path, e)) return MP_ERR;
    if (v != 1) return mp_err_set(e, "%s: key \"decoder_sparse_step\" = %lld: dense layers among the MoE ones are not supported (1 only)", path, (long long)v);
    json_t *mo = json_object_get(root, "mlp_only_layers");
    if (mo && !json_is_null(mo) && (!json_is_array(mo) || json_array_size(mo) > 0))
        return mp_err_set(e, "%s: key \"mlp_only_layers\": dense layers among the MoE ones are not supported (an empty list only)", path);
    return MP_OK;
}

static int cfg_parse(MpModel *m, json_t *root, const char *path, MpErr *e) {
    const char *type = NULL;
    if (cfg_arch(m, root, &type, path, e) || cfg_dims(m, root, type, path, e) || cfg_moe(m, root, path, e) || cfg_windows(m, root, path, e)) return MP_ERR;
    return cfg_rope(m, root, type, path, e);
}

/* Gemma 3 as Gemma3TextConfig reads it: the multimodal "gemma3" config keeps its text model in
 * "text_config", and both leave out keys whose defaults the class supplies. Returns a new object:
 * the defaults, overlaid with the text config (torch_dtype from the outer config if needed). */
static json_t *gemma3_text(json_t *root) {
    json_t *src = root, *tc = json_object_get(root, "text_config");
    if (json_is_object(tc)) src = tc;
    json_t *o = json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:f, s:f, s:i, s:i, s:i, s:s, s:b}", "model_type", "gemma3",
                          "vocab_size", 262208, "num_attention_heads", 8, "num_key_value_heads", 4, "head_dim", 256,
                          "max_position_embeddings", 131072, "rms_norm_eps", 1e-6, "rope_theta", 1e6, "query_pre_attn_scalar", 256,
                          "sliding_window", 4096, "sliding_window_pattern", 6, "hidden_activation", "gelu_pytorch_tanh",
                          "tie_word_embeddings", 1);
    if (!o) return NULL;
    json_object_update(o, src);
    json_object_set_new(o, "model_type", json_string("gemma3"));
    static const char *outer[] = {"torch_dtype", "bos_token_id", "eos_token_id"}; /* kept by the outer config */
    for (size_t i = 0; i < 3 && src != root; i++)
        if (!json_object_get(src, outer[i]) && json_object_get(root, outer[i])) json_object_set(o, outer[i], json_object_get(root, outer[i]));
    return o;
}

int mp_hfconfig_parse(MpModel *m, const char *text, size_t n, const char *path, MpErr *e) {
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mp_json_err(e, path, &je);
    json_t *mt = json_is_object(root) ? json_object_get(root, "model_type") : NULL;
    if (json_is_string(mt) && (!strcmp(json_string_value(mt), "gemma3") || !strcmp(json_string_value(mt), "gemma3_text"))) {
        json_t *g = gemma3_text(root);
        json_decref(root);
        if (!g) return mp_err_set(e, "%s: out of memory", path);
        root = g;
    }
    int rc = cfg_parse(m, root, path, e);
    json_decref(root);
    return rc;
}
