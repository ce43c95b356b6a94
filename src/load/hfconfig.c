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

/* The row's key k, or NULL (mp_family_hf_key). */
static const MpHfEntry *cfg_key(const MpModel *m, MpHfKey k) { return mp_family_hf_key(m->arch, k); }

/* Embedding-scaled families (Gemma 1, 2, 3): the attention scale (query_pre_attn_scalar^-1/2 where
 * the row lists that key, else HS^-1/2), the soft-caps where it lists them, and the embedding
 * factor sqrt(C) in the checkpoint's dtype. */
static int cfg_scaled(MpModel *m, json_t *root, const char *path, MpErr *e) {
    const MpHfEntry *qp = cfg_key(m, MP_HFK_QUERY_PRE_ATTN_SCALAR);
    double q = 0;
    if (!qp) m->attn_scale = 1.0 / sqrt((double)m->head_dim); /* Gemma 1 */
    if (qp) {
        if (cfg_num(root, "query_pre_attn_scalar", 0, qp->def, &q, path, e)) return MP_ERR;
        if (!(q > 0)) return mp_err_set(e, "%s: key \"query_pre_attn_scalar\" must be > 0", path);
        m->attn_scale = 1.0 / sqrt(q);
    }
    if (cfg_key(m, MP_HFK_ATTN_LOGIT_SOFTCAPPING) && (cfg_num(root, "attn_logit_softcapping", 0, 0, &m->attn_softcap, path, e) ||
                                                      cfg_num(root, "final_logit_softcapping", 0, 0, &m->final_softcap, path, e)))
        return MP_ERR;
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

/* The local layers of an MP_WIN_PERIOD family: "layer_types", or every layer but each
 * win_period-th ("sliding_window_pattern" where the row lists it: Gemma 3, default 6; Gemma 2: HF
 * Gemma2 makes layer l local when l is even, llama.cpp set_swa_pattern(2)); their own RoPE base
 * where the row lists rope_local_base_freq (Gemma 3, default 10000), unscaled. */
static int cfg_local_layers(MpModel *m, json_t *root, const char *path, MpErr *e) {
    const MpFamily *f = mp_family(m->arch);
    double lb = 0;
    int64_t period = f->win_period;
    if ((cfg_key(m, MP_HFK_ROPE_LOCAL_BASE_FREQ) && cfg_num(root, "rope_local_base_freq", 0, f->win_local_base, &lb, path, e)) ||
        (cfg_key(m, MP_HFK_SLIDING_WINDOW_PATTERN) && cfg_int(root, "sliding_window_pattern", 0, f->win_period, 1, 4096, &period, path, e)))
        return MP_ERR;
    if (mp_model_local_layers(m, (int)period, lb, e)) return mp_err_prefix(e, "%s", path);
    return cfg_layer_types(m, root, path, e);
}

/* The sliding windows of the families without local layers, as their HF classes apply them (the
 * row's win):
 *   - MP_WIN_EVERY (mistral, phi3, mixtral): "sliding_window" (null or absent: none) in every
 *     layer (MistralModel and Phi3Model build create_sliding_window_causal_mask whenever it is set);
 *   - MP_WIN_SWITCHED (qwen2, qwen3): only with "use_sliding_window" true, then in layers l >=
 *     max_window_layers (default 28), or as "layer_types" says;
 *   - MP_WIN_NONE: refused unless every layer is full_attention.
 * GGUF files follow llama.cpp instead, which windows none of these (model.c). */
static int cfg_windows_hf(MpModel *m, json_t *root, const char *path, MpErr *e) {
    int64_t v;
    int use_sw = 0;
    const int qwen = mp_family(m->arch)->win == MP_WIN_SWITCHED, mist = mp_family(m->arch)->win == MP_WIN_EVERY;
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
    const MpHfEntry *mw = cfg_key(m, MP_HFK_MAX_WINDOW_LAYERS);
    if (qwen && cfg_int(root, "max_window_layers", 0, mw ? (int64_t)mw->def : 0, 0, INT32_MAX, &mwl, path, e)) return MP_ERR;
    free(m->layer_local);
    m->layer_local = malloc((size_t)m->n_layers);
    if (!m->layer_local) return mp_err_set(e, "%s: out of memory", path);
    for (int l = 0; l < m->n_layers; l++) m->layer_local[l] = (unsigned char)(l >= mwl);
    return cfg_layer_types(m, root, path, e);
}

/* The value of a row's hf_switch key in the configuration (mp_family_from_hf). */
static int cfg_switch(const char *key, void *root) { return json_is_true(json_object_get(root, key)); }

/* model_type → arch (the family table, arch.c), refusing what is not read; the activation the
 * family runs. *type_out: the model_type string (borrowed from root). */
static int cfg_arch(MpModel *m, json_t *root, const char **type_out, const char *path, MpErr *e) {
    if (!json_is_object(root)) return mp_err_set(e, "%s: not a JSON object", path);
    json_t *mt = json_object_get(root, "model_type");
    if (!json_is_string(mt)) return mp_err_set(e, "%s: missing or non-string key \"model_type\"", path);
    const char *type = json_string_value(mt);
    /* smollm3 (HF SmolLM3ForCausalLM) is the Llama block with RoPE switched off in some layers
     * ("no_rope_layers", or every no_rope_layer_interval-th layer): read as llama (the family
     * table's hf_types, arch.c; "gptneox", "qwen3moe", "qwen2moe" are GGUF's names, not HF's) */
    const int a = mp_family_from_hf(type, cfg_switch, root);
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
    const MpFamily *f = mp_family(m->arch);
    const int has_ha = cfg_key(m, MP_HFK_HIDDEN_ACTIVATION) != NULL; /* gemma: hidden_activation, when given, decides */
    json_t *act = json_object_get(root, has_ha && json_object_get(root, "hidden_activation") ? "hidden_activation" : "hidden_act");
    /* gpt_neox: exact (erf) GELU; Gemma 1's released configs say hidden_act "gelu", which
     * GemmaModel runs as the tanh GELU unless hidden_activation says otherwise (hf_act_alias) */
    const char *want_act = mp_act_hf_name(f->act);
    if (f->hf_act_alias && act && json_is_string(act) && !strcmp(json_string_value(act), f->hf_act_alias) &&
        !json_object_get(root, "hidden_activation"))
        act = NULL;
    if (act && !json_is_null(act) && (!json_is_string(act) || strcmp(json_string_value(act), want_act)))
        return mp_err_set(e, "%s: key \"hidden_act\": only \"%s\" is supported for %s", path, want_act, type);
    *type_out = type;
    return MP_OK;
}

/* Sizes, norms, tying, tokens and biases; sets the feature flags. */
static int cfg_dims(MpModel *m, json_t *root, const char *type, const char *path, MpErr *e) {
    const MpFamily *f = mp_family(m->arch);
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
    if (mp_family_mha(m->arch) && m->n_kv_heads != m->n_heads)
        return mp_err_set(e, "%s: %s has one key/value head per query head (num_key_value_heads %d, num_attention_heads %d)",
                          path, type, m->n_kv_heads, m->n_heads);
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
    const MpHfEntry *eps = cfg_key(m, MP_HFK_LAYER_NORM_EPS) ? cfg_key(m, MP_HFK_LAYER_NORM_EPS) : cfg_key(m, MP_HFK_RMS_NORM_EPS);
    const char *eps_key = eps ? mp_hf_key_name(eps->key) : "rms_norm_eps"; /* gptneox: LayerNorm's layer_norm_eps */
    if (cfg_num(root, eps_key, 0, eps ? eps->def : 1e-6, &m->norm_eps, path, e)) return MP_ERR;
    if (!(m->norm_eps >= 0)) return mp_err_set(e, "%s: key \"%s\" is negative", path, eps_key);
    /* absent: unknown (0); present, it must be a context (0 was taken for "unknown" silently) */
    if (cfg_int(root, "max_position_embeddings", 0, 0, 1, INT32_MAX, &v, path, e)) return MP_ERR;
    m->max_pos = (int)v;
    if (cfg_bool(root, "tie_word_embeddings", f->tie == MP_TIE_ALWAYS, &m->tie_embeddings, path, e)) return MP_ERR; /* Gemma: tied by default */
    if (cfg_token(root, "bos_token_id", &m->bos_id, path, e) || cfg_token(root, "eos_token_id", &m->eos_id, path, e)) return MP_ERR;

    /* attention_bias: what the row's roles mean (gptneox, llamabias: true; its default too) */
    const MpHfEntry *ab = cfg_key(m, MP_HFK_ATTENTION_BIAS), *pr = cfg_key(m, MP_HFK_USE_PARALLEL_RESIDUAL);
    const int want_bias = ab && ab->def != 0;
    int attn_bias = 0, mlp_bias = 0;
    if (cfg_bool(root, "attention_bias", want_bias, &attn_bias, path, e) || cfg_bool(root, "mlp_bias", 0, &mlp_bias, path, e)) return MP_ERR;
    if (attn_bias != want_bias)
        return mp_err_set(e, "%s: key \"attention_bias\": %s is not supported for %s", path, attn_bias ? "true" : "false", type);
    if (pr && cfg_bool(root, "use_parallel_residual", pr->def != 0, &m->parallel_residual, path, e)) return MP_ERR;
    if (mlp_bias) return mp_err_set(e, "%s: key \"mlp_bias\": true is not supported", path);
    mp_model_arch_features(m);
    return MP_OK;
}

/* Sliding windows (cfg_windows_hf; local layers: the window here, which layers in
 * cfg_local_layers after the RoPE tables), then the scales of embedding-scaled families. */
static int cfg_windows(MpModel *m, json_t *root, const char *path, MpErr *e) {
    const MpFamily *f = mp_family(m->arch);
    if (f->win == MP_WIN_PERIOD) {
        const MpHfEntry *sw = cfg_key(m, MP_HFK_SLIDING_WINDOW);
        int64_t v;
        if (cfg_int(root, "sliding_window", 0, sw ? (int64_t)sw->def : 4096, 1, INT32_MAX, &v, path, e)) return MP_ERR;
        m->sliding_window = (int)v;
    } else if (cfg_windows_hf(m, root, path, e)) {
        return MP_ERR;
    }
    return f->embed_scaled ? cfg_scaled(m, root, path, e) : MP_OK;
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
    if ((mp_family(m->arch)->opts & MP_FAM_OPT_LONGROPE) && (!strcmp(t, "su") || !strcmp(t, "yarn"))) t = "longrope"; /* Phi3Config */
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
        const MpHfEntry *oe = cfg_key(m, MP_HFK_ORIGINAL_MAX_POSITION_EMBEDDINGS);
        if (!orig && oe) orig = (int64_t)oe->def; /* Phi3Config default */
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
    const MpFamily *f = mp_family(m->arch);
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
    } else if (cfg_key(m, MP_HFK_ROTARY_EMB_BASE) && !json_object_get(root, "rope_theta") &&
               cfg_num(root, "rotary_emb_base", 0, 10000.0, &m->rope_theta, path, e)) { /* gptneox */
        return MP_ERR;
    }
    if (!(m->rope_theta > 1)) return mp_err_set(e, "%s: key \"rope_theta\" must be > 1", path);
    double prf;
    const MpHfEntry *pct = cfg_key(m, MP_HFK_ROTARY_PCT); /* gptneox: rotary_pct, default 0.25 */
    const char *prf_key = pct && !json_object_get(root, "partial_rotary_factor") ? "rotary_pct" : "partial_rotary_factor";
    if (cfg_num(root, prf_key, 0, pct ? pct->def : 1.0, &prf, path, e)) return MP_ERR;
    if (!(prf > 0 && prf <= 1)) return mp_err_set(e, "%s: key \"%s\" must be in (0, 1]", path, prf_key);
    m->rot_dim = (int)(m->head_dim * prf);
    if (m->rot_dim < 2 || m->rot_dim % 2)
        return mp_err_set(e, "%s: rotary dim %d (head_dim x partial_rotary_factor) must be even and >= 2", path, m->rot_dim);
    if (cfg_rope_layers(m, root, f->hf_nope_type && !strcmp(type, f->hf_nope_type), path, e)) return MP_ERR;
    m->rope_scaling = MP_ROPE_NONE;
    m->rope_attn_factor = 1.0;
    m->rope_factor = 1.0;
    double *sf = NULL, *lf = NULL;
    if (rs && !json_is_null(rs) && cfg_rope_scaling(m, root, rs, rs_key, &sf, &lf, path, e)) return MP_ERR;
    int rc = mp_model_rope_init(m, sf, lf, e);
    free(sf);
    free(lf);
    if (rc == MP_OK && f->win == MP_WIN_PERIOD) rc = cfg_local_layers(m, root, path, e);
    return rc;
}

/* Mixture-of-experts FFN, from the keys and defaults of the row (MixtralConfig, Qwen3MoeConfig,
 * Qwen2MoeConfig): the expert count, the experts used, one expert's size (m->ffn, where the row
 * lists moe_intermediate_size), the shared expert's, whether the K weights are renormalised
 * (always, or as norm_topk_prob says where the row lists it). Dense layers among the MoE ones
 * (decoder_sparse_step, mlp_only_layers, where listed) are refused. */
static int cfg_moe(MpModel *m, json_t *root, const char *path, MpErr *e) {
    int64_t v;
    if (!mp_family_has(m->arch, MP_ROLE_FFN_ROUTER)) return MP_OK;
    const MpHfEntry *ne = cfg_key(m, MP_HFK_NUM_LOCAL_EXPERTS) ? cfg_key(m, MP_HFK_NUM_LOCAL_EXPERTS) : cfg_key(m, MP_HFK_NUM_EXPERTS);
    const MpHfEntry *nk = cfg_key(m, MP_HFK_NUM_EXPERTS_PER_TOK), *x;
    MP_ASSERT(ne && nk); /* every MoE row lists them */
    if (cfg_int(root, mp_hf_key_name(ne->key), 0, (int64_t)ne->def, 1, 1 << 16, &v, path, e)) return MP_ERR;
    m->n_experts = (int)v;
    if (cfg_int(root, "num_experts_per_tok", 0, (int64_t)nk->def, 1, m->n_experts, &v, path, e)) return MP_ERR;
    m->n_experts_used = (int)v;
    m->moe_norm_topk = 1;
    if ((x = cfg_key(m, MP_HFK_MOE_INTERMEDIATE_SIZE))) {
        if (cfg_int(root, "moe_intermediate_size", 0, (int64_t)x->def, 1, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
        m->ffn = (int)v;
    }
    if ((x = cfg_key(m, MP_HFK_SHARED_EXPERT_INTERMEDIATE_SIZE))) {
        if (cfg_int(root, "shared_expert_intermediate_size", 0, (int64_t)x->def, 1, CFG_MAX_DIM, &v, path, e)) return MP_ERR;
        m->ffn_shexp = (int)v;
    }
    if ((x = cfg_key(m, MP_HFK_NORM_TOPK_PROB)) && cfg_bool(root, "norm_topk_prob", x->def != 0, &m->moe_norm_topk, path, e)) return MP_ERR;
    if ((x = cfg_key(m, MP_HFK_DECODER_SPARSE_STEP))) {
        if (cfg_int(root, "decoder_sparse_step", 0, (int64_t)x->def, 0, INT32_MAX, &v, path, e)) return MP_ERR;
        if (v != 1) return mp_err_set(e, "%s: key \"decoder_sparse_step\" = %lld: dense layers among the MoE ones are not supported (1 only)", path, (long long)v);
    }
    json_t *mo = json_object_get(root, "mlp_only_layers");
    if (cfg_key(m, MP_HFK_MLP_ONLY_LAYERS) && mo && !json_is_null(mo) && (!json_is_array(mo) || json_array_size(mo) > 0))
        return mp_err_set(e, "%s: key \"mlp_only_layers\": dense layers among the MoE ones are not supported (an empty list only)", path);
    return MP_OK;
}

static int cfg_parse(MpModel *m, json_t *root, const char *path, MpErr *e) {
    const char *type = NULL;
    if (cfg_arch(m, root, &type, path, e) || cfg_dims(m, root, type, path, e) || cfg_moe(m, root, path, e) || cfg_windows(m, root, path, e)) return MP_ERR;
    return cfg_rope(m, root, type, path, e);
}

/* The configuration as the family's class reads it (rows with hf_nested or hf_defaults: Gemma 3):
 * the text model's own configuration where the key hf_nested holds one (torch_dtype and the token
 * ids from the outer one where it has none), over the class's defaults hf_defaults. Returns a new
 * reference (root itself for the other families), NULL when out of memory or a default is bad. */
static json_t *cfg_class_view(json_t *root) {
    json_t *mt = json_is_object(root) ? json_object_get(root, "model_type") : NULL;
    const int a = json_is_string(mt) ? mp_family_from_hf(json_string_value(mt), cfg_switch, root) : -1;
    const MpFamily *f = a >= 0 ? mp_family((MpArch)a) : NULL;
    if (!f || (!f->hf_nested && !f->hf_defaults)) return json_incref(root);
    json_t *src = root, *tc = f->hf_nested ? json_object_get(root, f->hf_nested) : NULL;
    if (json_is_object(tc)) src = tc;
    json_t *o = f->hf_defaults ? json_loads(f->hf_defaults, 0, NULL) : json_object();
    if (!o) return NULL;
    json_object_update(o, src);
    json_object_set(o, "model_type", mt); /* the outer one: a text config may name another */
    static const char *outer[] = {"torch_dtype", "bos_token_id", "eos_token_id"}; /* kept by the outer config */
    for (size_t i = 0; i < 3 && src != root; i++)
        if (!json_object_get(src, outer[i]) && json_object_get(root, outer[i])) json_object_set(o, outer[i], json_object_get(root, outer[i]));
    return o;
}

int mp_hfconfig_parse(MpModel *m, const char *text, size_t n, const char *path, MpErr *e) {
    json_error_t je;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mp_json_err(e, path, &je);
    json_t *view = cfg_class_view(root);
    json_decref(root);
    if (!view) return mp_err_set(e, "%s: out of memory", path);
    int rc = cfg_parse(m, view, path, e);
    json_decref(view);
    return rc;
}
