/* test_load.c — HF checkpoints: safetensors parser (valid and malformed), config.json, sharding,
 * the model description and its lazy accessors, RoPE tables, mkmodel -> inspect round trip, and
 * one-line errors with exit 2 for malformed files.
 * Run: make test (or build/tests/test_load). */
#include "test_load_util.h"
#include "test_model_util.h" /* model_poke */

#include "load/hfconfig.h"    /* mp_hfconfig_parse */
#include "load/safetensors.h" /* mp_st_parse */
#include "core/util.h"         /* mp_file_exists */

/* ---------------------------------------------------------------- safetensors parser */

/* 8-byte length + header + data_len zero bytes; *n = total. */
static uint8_t *build_st(const char *header, size_t data_len, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + data_len;
    uint8_t *b = calloc(*n + 1, 1);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, header, h);
    return b;
}

static void st_expect(const char *header, size_t data_len, int ok, const char *needle) {
    size_t n;
    uint8_t *b = build_st(header, data_len, &n);
    MpSt st;
    MpErr e = {{0}};
    int rc = mp_st_parse(&st, b, n, "x.safetensors", &e);
    if (ok) {
        if (rc != MP_OK) fail_msg("expected OK for %s: %s", header, e.msg);
        mp_st_free(&st);
    } else {
        if (rc != MP_ERR) fail_msg("expected an error for %s", header);
        if (!strstr(e.msg, "x.safetensors") || (needle && !strstr(e.msg, needle)))
            fail_msg("message for %s lacks '%s': %s", header, needle ? needle : "", e.msg);
    }
    free(b);
}

static void test_st_valid_and_malformed(void **state) {
    (void)state;
    /* valid: metadata, scalar, empty tensor, F16 and BF16, order not by offset */
    st_expect("{\"__metadata__\":{\"format\":\"pt\"},\"b\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[4,12]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},\"z\":{\"dtype\":\"BF16\",\"shape\":[0,3],\"data_offsets\":[12,12]}}  ",
              12, 1, NULL);
    st_expect("  {\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[0,3]}}", 3, 1, NULL); /* leading whitespace, other dtype */
    /* malformed */
    MpSt st;
    MpErr e;
    uint8_t tiny[5] = {1, 2, 3, 4, 5};
    assert_int_equal(mp_st_parse(&st, tiny, 5, "x.safetensors", &e), MP_ERR);
    assert_non_null(strstr(e.msg, "truncated"));
    size_t n;
    uint8_t *b = build_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, &n);
    b[0] = 0xff; /* header length beyond the file */
    assert_int_equal(mp_st_parse(&st, b, n, "x.safetensors", &e), MP_ERR);
    assert_non_null(strstr(e.msg, "truncated"));
    b[0] = 0;
    b[5] = 0x10; /* header length > 100 MB */
    assert_int_equal(mp_st_parse(&st, b, n, "x.safetensors", &e), MP_ERR);
    assert_non_null(strstr(e.msg, "header length"));
    free(b);
    st_expect("[1,2,3]", 0, 0, "bad magic");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, 0, "JSON");
    st_expect("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, 0, "unknown dtype");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, 0, "needs 8"); /* wrong dtype size */
    st_expect("{\"a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, 0, "'a'");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
              12, 0, "overlaps");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
              20, 0, "hole");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, 0, "outside the file");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, 0, "trailing");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, 0, "overflow");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, 0, "shape[0]");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, 0, "data_offsets");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
              8, 0, "duplicate");
    st_expect("{\"__metadata__\":{\"format\":3}}", 0, 0, "__metadata__");
    st_expect("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, 0, "dimensions");
    st_expect("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 2, 0, "whole number of bytes");
}

/* ---------------------------------------------------------------- config.json */

static void cfg_expect(const char *json, const char *needle) {
    MpModel m;
    memset(&m, 0, sizeof m);
    MpErr e = {{0}};
    int rc = mp_hfconfig_parse(&m, json, strlen(json), "config.json", &e);
    mp_model_free(&m);
    if (needle == NULL) {
        if (rc != MP_OK) fail_msg("expected OK: %s", e.msg);
        return;
    }
    if (rc != MP_ERR || !strstr(e.msg, needle) || !strstr(e.msg, "config.json")) fail_msg("want error with '%s', got rc %d: %s", needle, rc, e.msg);
}

#define CFG_BASE "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":300"

static void test_config(void **state) {
    (void)state;
    cfg_expect("{\"model_type\":\"llama\"," CFG_BASE "}", NULL);
    cfg_expect("{\"model_type\":\"gpt2\"," CFG_BASE "}", "model_type");
    cfg_expect("{" CFG_BASE "}", "model_type");
    cfg_expect("{\"model_type\":\"llama\",\"num_local_experts\":8," CFG_BASE "}", "num_local_experts");
    cfg_expect("{\"model_type\":\"qwen2\",\"use_sliding_window\":true," CFG_BASE "}", "use_sliding_window"); /* no window */
    cfg_expect("{\"model_type\":\"llama\",\"use_sliding_window\":true,\"sliding_window\":8," CFG_BASE "}", "use_sliding_window");
    cfg_expect("{\"model_type\":\"olmo2\",\"layer_types\":[\"sliding_attention\",\"full_attention\"]," CFG_BASE "}", "layer_types");
    cfg_expect("{\"model_type\":\"qwen3\",\"layer_types\":[\"full_attention\",\"sliding_attention\"]," CFG_BASE "}", "layer_types");
    cfg_expect("{\"model_type\":\"llama\",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}," CFG_BASE "}", "rope_type");
    cfg_expect("{\"model_type\":\"llama\",\"hidden_act\":\"gelu\"," CFG_BASE "}", "hidden_act");
    cfg_expect("{\"model_type\":\"qwen3\",\"attention_bias\":true," CFG_BASE "}", "attention_bias"); /* Qwen3 biases: not read */
    cfg_expect("{\"model_type\":\"smollm3\",\"attention_bias\":true," CFG_BASE "}", "attention_bias");
    cfg_expect("{\"model_type\":\"gpt_neox\",\"attention_bias\":false," CFG_BASE "}", "attention_bias");
    cfg_expect("{\"model_type\":\"llama\",\"num_key_value_heads\":3," CFG_BASE "}", "num_key_value_heads");
    cfg_expect("{\"model_type\":\"llama\",\"hidden_size\":\"64\",\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":300}", "hidden_size");
    cfg_expect("{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4}", "vocab_size");
    cfg_expect("{\"model_type\":\"llama\",\"num_hidden_layers\":-1,\"hidden_size\":64,\"intermediate_size\":128,\"num_attention_heads\":4,\"vocab_size\":300}", "num_hidden_layers");
    cfg_expect("{\"model_type\":\"llama\",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}," CFG_BASE "}", "low_freq_factor");
    cfg_expect("{\"model_type\":\"phi3\",\"rope_scaling\":{\"type\":\"su\",\"short_factor\":[1,1],\"long_factor\":[1,1,1,1,1,1,1,1]}," CFG_BASE "}",
               "short_factor");
    cfg_expect("[1]", "not a JSON object");
    cfg_expect("{", "invalid JSON");
    MpModel m;
    memset(&m, 0, sizeof m);
    MpErr e;
    /* HF llama with "attention_bias": true is the llamabias row (LlamaAttention's q/k/v/o biases) */
    const char *lb = "{\"model_type\":\"llama\",\"attention_bias\":true," CFG_BASE "}";
    assert_int_equal(mp_hfconfig_parse(&m, lb, strlen(lb), "config.json", &e), MP_OK);
    assert_true(m.arch == MP_ARCH_LLAMABIAS && m.has_qkv_bias && mp_family_has(m.arch, MP_ROLE_O_BIAS));
    mp_model_free(&m);
    /* head_dim from config (Qwen3-0.6B style: head_dim != hidden/heads) */
    const char *q = "{\"model_type\":\"qwen3\",\"head_dim\":32,\"num_key_value_heads\":2,\"eos_token_id\":[7,8]," CFG_BASE "}";
    assert_int_equal(mp_hfconfig_parse(&m, q, strlen(q), "config.json", &e), MP_OK);
    assert_int_equal(m.head_dim, 32);
    assert_int_equal(m.rot_dim, 32);
    assert_int_equal(m.n_kv_heads, 2);
    assert_int_equal(m.eos_id, 7);
    assert_true(m.has_qk_norm && !m.has_qkv_bias);
    mp_model_free(&m);
    /* smollm3 (HF SmolLM3ForCausalLM): the Llama block, RoPE off where "no_rope_layers" says 0, or
     * by default in every no_rope_layer_interval-th layer (4: layers 4 and 8 of 8, 1-based) */
    const char *sm = "{\"model_type\":\"smollm3\",\"architectures\":[\"SmolLM3ForCausalLM\"],\"hidden_size\":64,"
                     "\"intermediate_size\":128,\"num_hidden_layers\":8,\"num_attention_heads\":4,\"num_key_value_heads\":2,"
                     "\"vocab_size\":300,\"layer_types\":[\"full_attention\",\"full_attention\",\"full_attention\",\"full_attention\","
                     "\"full_attention\",\"full_attention\",\"full_attention\",\"full_attention\"],\"use_sliding_window\":false,"
                     "\"sliding_window\":null,\"rope_theta\":2000000.0}";
    assert_int_equal(mp_hfconfig_parse(&m, sm, strlen(sm), "config.json", &e), MP_OK);
    assert_int_equal(m.arch, MP_ARCH_LLAMA);
    assert_non_null(m.rope_layer);
    const unsigned char every4[8] = {1, 1, 1, 0, 1, 1, 1, 0};
    assert_memory_equal(m.rope_layer, every4, 8);
    mp_model_free(&m);
    const char *sm2 = "{\"model_type\":\"smollm3\",\"no_rope_layer_interval\":2," CFG_BASE "}";
    assert_int_equal(mp_hfconfig_parse(&m, sm2, strlen(sm2), "config.json", &e), MP_OK);
    assert_true(m.rope_layer && m.rope_layer[0] == 1 && m.rope_layer[1] == 0);
    mp_model_free(&m);
    const char *sm3 = "{\"model_type\":\"smollm3\",\"no_rope_layers\":[0,0]," CFG_BASE "}";
    assert_int_equal(mp_hfconfig_parse(&m, sm3, strlen(sm3), "config.json", &e), MP_OK);
    assert_true(m.rope_layer && m.rope_layer[0] == 0 && m.rope_layer[1] == 0);
    mp_model_free(&m);
    cfg_expect("{\"model_type\":\"smollm3\",\"no_rope_layer_interval\":0," CFG_BASE "}", "no_rope_layer_interval");
    /* transformers v5 rope_parameters */
    const char *v5 = "{\"model_type\":\"llama\",\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":250000}," CFG_BASE "}";
    assert_int_equal(mp_hfconfig_parse(&m, v5, strlen(v5), "config.json", &e), MP_OK);
    assert_true(m.rope_theta == 250000 && m.rope_scaling == MP_ROPE_NONE);
    mp_model_free(&m);
}

/* Configs shaped like the published ones (key sets and values from model-formats.md §2). */
static void test_real_world_configs(void **state) {
    (void)state;
    MpModel m;
    MpErr e;
    const char *llama31 =
        "{\"architectures\":[\"LlamaForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,\"bos_token_id\":128000,"
        "\"eos_token_id\":[128001,128008,128009],\"hidden_act\":\"silu\",\"hidden_size\":4096,\"initializer_range\":0.02,"
        "\"intermediate_size\":14336,\"max_position_embeddings\":131072,\"mlp_bias\":false,\"model_type\":\"llama\","
        "\"num_attention_heads\":32,\"num_hidden_layers\":32,\"num_key_value_heads\":8,\"pretraining_tp\":1,\"rms_norm_eps\":1e-05,"
        "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,\"original_max_position_embeddings\":8192,"
        "\"rope_type\":\"llama3\"},\"rope_theta\":500000.0,\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\","
        "\"transformers_version\":\"4.43.0.dev0\",\"use_cache\":true,\"vocab_size\":128256}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, llama31, strlen(llama31), "config.json", &e), MP_OK);
    assert_true(m.head_dim == 128 && m.rot_dim == 128 && m.n_kv_heads == 8 && m.eos_id == 128001 && m.bos_id == 128000);
    assert_int_equal(m.rope_scaling, MP_ROPE_LLAMA3);
    assert_true(fabs(m.inv_freq[29] / 2.166571e-3 - 1) < 1e-6 && fabs(m.inv_freq[35] / 9.556212e-5 - 1) < 1e-6);
    mp_model_free(&m);
    const char *qwen3 =
        "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"attention_dropout\":0.0,\"bos_token_id\":151643,"
        "\"eos_token_id\":151645,\"head_dim\":128,\"hidden_act\":\"silu\",\"hidden_size\":4096,\"intermediate_size\":12288,"
        "\"max_position_embeddings\":40960,\"max_window_layers\":36,\"model_type\":\"qwen3\",\"num_attention_heads\":32,"
        "\"num_hidden_layers\":36,\"num_key_value_heads\":8,\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":1000000,"
        "\"sliding_window\":null,\"tie_word_embeddings\":false,\"torch_dtype\":\"bfloat16\",\"use_cache\":true,"
        "\"use_sliding_window\":false,\"vocab_size\":151936}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, qwen3, strlen(qwen3), "config.json", &e), MP_OK);
    assert_true(m.has_qk_norm && m.head_dim == 128 && m.n_layers == 36 && m.rope_theta == 1e6 && m.norm_eps == 1e-6);
    mp_model_free(&m);
    const char *phi4 =
        "{\"architectures\":[\"Phi3ForCausalLM\"],\"attention_bias\":false,\"bos_token_id\":100257,\"embd_pdrop\":0.0,"
        "\"eos_token_id\":100257,\"hidden_act\":\"silu\",\"hidden_size\":5120,\"intermediate_size\":17920,"
        "\"max_position_embeddings\":16384,\"model_type\":\"phi3\",\"num_attention_heads\":40,\"num_hidden_layers\":40,"
        "\"num_key_value_heads\":10,\"original_max_position_embeddings\":16384,\"pad_token_id\":100257,\"resid_pdrop\":0.0,"
        "\"rms_norm_eps\":1e-05,\"rope_scaling\":null,\"rope_theta\":250000,\"sliding_window\":null,\"tie_word_embeddings\":false,"
        "\"torch_dtype\":\"bfloat16\",\"transformers_version\":\"4.47.0\",\"use_cache\":true,\"vocab_size\":100352}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, phi4, strlen(phi4), "config.json", &e), MP_OK);
    assert_true(m.arch == MP_ARCH_PHI3 && m.head_dim == 128 && m.n_kv_heads == 10 && m.rope_scaling == MP_ROPE_NONE && m.sliding_window == 0);
    mp_model_free(&m);
    const char *mistral01 = "{\"model_type\":\"mistral\",\"hidden_size\":4096,\"intermediate_size\":14336,\"num_hidden_layers\":32,"
                            "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"sliding_window\":4096,\"vocab_size\":32000,"
                            "\"rope_theta\":10000.0,\"max_position_embeddings\":32768}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, mistral01, strlen(mistral01), "config.json", &e), MP_OK);
    assert_int_equal(m.sliding_window, 4096); /* MistralModel windows every layer */
    assert_true(mp_model_layer_window(&m, 0) == 4096 && mp_model_layer_window(&m, 31) == 4096 && !mp_model_layer_window(&m, 32));
    mp_model_free(&m);
    /* Qwen2Config: with use_sliding_window, layers i >= max_window_layers; "layer_types" overrides */
    const char *qsw = "{\"model_type\":\"qwen2\",\"use_sliding_window\":true,\"sliding_window\":8,\"max_window_layers\":1," CFG_BASE "}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, qsw, strlen(qsw), "config.json", &e), MP_OK);
    assert_true(mp_model_layer_window(&m, 0) == 0 && mp_model_layer_window(&m, 1) == 8);
    mp_model_free(&m);
    const char *qlt = "{\"model_type\":\"qwen3\",\"use_sliding_window\":true,\"sliding_window\":8,\"layer_types\":[\"sliding_attention\",\"full_attention\"]," CFG_BASE "}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, qlt, strlen(qlt), "config.json", &e), MP_OK);
    assert_true(mp_model_layer_window(&m, 0) == 8 && mp_model_layer_window(&m, 1) == 0);
    mp_model_free(&m);
    /* Gemma 2: even layers local (0-based), window "sliding_window" */
    const char *g2 = "{\"model_type\":\"gemma2\",\"sliding_window\":16,\"head_dim\":16,\"hidden_size\":64,\"intermediate_size\":128,"
                     "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"vocab_size\":300}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, g2, strlen(g2), "config.json", &e), MP_OK);
    assert_true(mp_model_layer_window(&m, 0) == 16 && !mp_model_layer_window(&m, 1) && mp_model_layer_window(&m, 2) == 16 && !mp_model_layer_window(&m, 3));
    mp_model_free(&m);
    const char *qwen25 = "{\"model_type\":\"qwen2\",\"hidden_size\":3584,\"intermediate_size\":18944,\"num_hidden_layers\":28,"
                         "\"num_attention_heads\":28,\"num_key_value_heads\":4,\"sliding_window\":131072,\"use_sliding_window\":false,"
                         "\"max_window_layers\":28,\"vocab_size\":152064,\"rope_theta\":1000000.0,\"rms_norm_eps\":1e-06}";
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, qwen25, strlen(qwen25), "config.json", &e), MP_OK);
    assert_true(m.has_qkv_bias && m.head_dim == 128 && m.sliding_window == 0);
    mp_model_free(&m);
}

/* ---------------------------------------------------------------- RoPE tables (spec §2.2) */

static void test_rope_tables(void **state) {
    (void)state;
    MpModel m;
    memset(&m, 0, sizeof m);
    MpErr e;
    /* Llama-3.1-8B: base 500000, d=128, factor 8, low 1, high 4, old 8192 (values from the spec) */
    m.rot_dim = 128;
    m.rope_theta = 500000;
    m.rope_scaling = MP_ROPE_LLAMA3;
    m.rope_factor = 8;
    m.rope_low_freq_factor = 1;
    m.rope_high_freq_factor = 4;
    m.rope_orig_ctx = 8192;
    assert_int_equal(mp_model_rope_init(&m, NULL, NULL, &e), MP_OK);
    assert_true(fabs(m.inv_freq[29] / 2.166571e-3 - 1) < 1e-6);
    assert_true(fabs(m.inv_freq[32] / 5.248462e-4 - 1) < 1e-6);
    assert_true(fabs(m.inv_freq[35] / 9.556212e-5 - 1) < 1e-6);
    for (int i = 0; i <= 28; i++) assert_true(fabs(m.inv_freq[i] / (1.0 / pow(500000.0, 2.0 * i / 128)) - 1) < 1e-6);
    for (int i = 35; i < 64; i++) assert_true(fabs(m.inv_freq[i] / (1.0 / pow(500000.0, 2.0 * i / 128) / 8) - 1) < 1e-6);
    /* default: inv_freq[i] = theta^(-2i/d) */
    m.rope_scaling = MP_ROPE_NONE;
    m.rot_dim = 8;
    m.rope_theta = 10000;
    assert_int_equal(mp_model_rope_init(&m, NULL, NULL, &e), MP_OK);
    assert_true(m.inv_freq[0] == 1.0f && fabs(m.inv_freq[1] - 0.1) < 1e-8 && fabs(m.inv_freq[2] - 0.01) < 1e-9);
    mp_model_free(&m);
    /* longrope from config: Phi-3-mini-128k style attention factor sqrt(1 + ln 32 / ln 4096) = 1.1902381 */
    char cfg[2048];
    int k = snprintf(cfg, sizeof cfg, "{\"model_type\":\"phi3\",\"max_position_embeddings\":131072,\"original_max_position_embeddings\":4096,"
                                      "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":300,"
                                      "\"rope_scaling\":{\"type\":\"su\",\"short_factor\":[1,1,1,1,1,1,1,2],\"long_factor\":[1,2,3,4,5,6,7,8]}}");
    assert_true(k < (int)sizeof cfg);
    memset(&m, 0, sizeof m);
    assert_int_equal(mp_hfconfig_parse(&m, cfg, strlen(cfg), "config.json", &e), MP_OK);
    assert_int_equal(m.rope_scaling, MP_ROPE_LONGROPE);
    assert_true(fabs(m.rope_attn_factor - 1.1902381) < 1e-7);
    assert_true(fabs(m.inv_freq[7] - 1.0 / (2 * pow(10000.0, 14.0 / 16))) < 1e-9);
    assert_true(fabs(m.inv_freq_long[3] - 1.0 / (4 * pow(10000.0, 6.0 / 16))) < 1e-9);
    mp_model_free(&m);
}

/* ---------------------------------------------------------------- models: writer -> reader */

/* this file's models: 3 layers, seed 7 */
static MpMkSpec small_spec(MpArch arch, MpFormat fmt, MpWType dt) { return lt_spec(arch, fmt, dt, 3, 7); }

static void test_hf_every_arch_matches_generator(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    for (int a = 0; a < MP_ARCH_COUNT; a++) {
        MpWType dts[3] = {MP_WT_F32, MP_WT_BF16, MP_WT_F16};
        for (int k = 0; k < 3; k++) {
            MpMkSpec s = small_spec((MpArch)a, MP_FORMAT_HF, dts[k]);
            if (a == MP_ARCH_QWEN3) s.head_dim = 32; /* head_dim != dim/heads */
            if (a == MP_ARCH_PHI3 && k == 1) {
                s.partial_rotary = 0.75;
                s.head_dim = 16;
                s.rope_scaling = MP_ROPE_LONGROPE;
            }
            if (a == MP_ARCH_LLAMA && k == 2) s.tie = 1;
            snprintf(path, sizeof path, "%s/%s-%d", d, mp_model_arch_name((MpArch)a), k);
            lt_mk(&s, path);
            MpModel m;
            lt_open(&m, path);
            assert_int_equal(m.arch, a);
            assert_int_equal(m.n_layers, 3);
            assert_int_equal(m.head_dim, s.head_dim ? s.head_dim : 16);
            int roles = lt_model_matches_spec(&m, &s);
            /* every role the family's row declares was served and equals the generator's values: the
             * globals (the head tied or not; gptneox's final norm bias), per layer each layer role,
             * and each expert of the stacked expert roles */
            int per_layer = 0;
            for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++)
                if (!mp_model_role_is_global((MpRole)r) && mp_family_has((MpArch)a, (MpRole)r))
                    per_layer += r >= MP_ROLE_GATE_EXPS && r <= MP_ROLE_DOWN_EXPS ? s.experts : 1;
            assert_int_equal(roles, 3 + mp_family_has((MpArch)a, MP_ROLE_OUTPUT_NORM_BIAS) + 3 * per_layer);
            if (a == MP_ARCH_PHI3 && k == 1) assert_int_equal(m.rot_dim, 12);
            if (a == MP_ARCH_LLAMA && k == 2) assert_true(m.tie_embeddings);
            mp_model_free(&m);
        }
    }
}

/* config.json's token ids must index the embedding for every family and vocabulary size: a key
 * left out takes the default of transformers' config class, and Phi3Config's pad_token_id default
 * (32000) made HF refuse every phi3 model with --vocab <= 32000 ("Padding_idx must be within
 * num_embeddings"). The defaults below are those of transformers 5.x's configuration_*.py
 * (field `pad_token_id`); bos/eos have no default here because mkmodel always writes them. */
static int64_t hf_default_pad(const char *model_type) {
    if (!strcmp(model_type, "phi3")) return 32000;                     /* Phi3Config */
    if (!strcmp(model_type, "olmo2")) return 1;                        /* Olmo2Config */
    if (!strncmp(model_type, "gemma", 5)) return 0;                    /* Gemma/Gemma2/Gemma3TextConfig */
    return -1; /* Llama, Mistral, Qwen2/3, GPTNeoX, Mixtral, Qwen2/3-MoE: None */
}

static void test_hf_config_token_ids_in_vocab(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const int vocabs[] = {1, 2, 300, 32000, 32064};
    char path[256], cfg[300];
    for (int a = 0; a < MP_ARCH_COUNT; a++)
        for (size_t k = 0; k < sizeof vocabs / sizeof vocabs[0]; k++) {
            MpMkSpec s = lt_spec((MpArch)a, MP_FORMAT_HF, MP_WT_F32, 1, 3);
            s.vocab = vocabs[k];
            snprintf(path, sizeof path, "%s/%s-v%d", d, mp_model_arch_name((MpArch)a), vocabs[k]);
            lt_mk(&s, path);
            snprintf(cfg, sizeof cfg, "%s/config.json", path);
            json_error_t je;
            json_t *c = json_load_file(cfg, 0, &je);
            assert_non_null(c);
            const char *type = json_string_value(json_object_get(c, "model_type"));
            const char *keys[3] = {"bos_token_id", "eos_token_id", "pad_token_id"};
            for (int i = 0; i < 3; i++) {
                json_t *v = json_object_get(c, keys[i]);
                int64_t id = v ? (json_is_null(v) ? -1 : json_integer_value(v)) : i == 2 ? hf_default_pad(type) : -1;
                if (v && !json_is_null(v)) assert_true(json_is_integer(v));
                if (id >= vocabs[k])
                    fail_msg("%s --vocab %d: %s %lld (%s) is outside the vocabulary", type, vocabs[k], keys[i],
                             (long long)id, v ? "written" : "transformers' default");
            }
            json_decref(c);
        }
}

static void test_sharded_equals_single(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char one[256], three[256], p[300];
    MpMkSpec s = small_spec(MP_ARCH_QWEN2, MP_FORMAT_HF, MP_WT_BF16);
    snprintf(one, sizeof one, "%s/one", d);
    snprintf(three, sizeof three, "%s/three", d);
    lt_mk(&s, one);
    s.shards = 3;
    lt_mk(&s, three);
    snprintf(p, sizeof p, "%s/model-00003-of-00003.safetensors", three);
    assert_true(mp_file_exists(p));
    MpModel a, b;
    lt_open(&a, one);
    lt_open(&b, three);
    assert_int_equal(b.n_files, 3);
    assert_int_equal(a.n_tensors, b.n_tensors);
    assert_int_equal(lt_models_equal(&a, &b), 3 + 3 * 12);
    /* the raw bytes of every stored tensor agree too */
    for (size_t i = 0; i < a.n_tensors; i++) {
        const MpModelTensor *x = &a.tensors[i];
        const MpModelTensor *y = NULL;
        for (size_t j = 0; j < b.n_tensors; j++)
            if (!strcmp(b.tensors[j].name, x->name)) y = &b.tensors[j];
        assert_non_null(y);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_memory_equal(x->data, y->data, x->nbytes);
    }
    mp_model_free(&a);
    mp_model_free(&b);
    /* a missing shard and a tensor missing from its shard are errors naming them */
    snprintf(p, sizeof p, "%s/model-00002-of-00003.safetensors", three);
    char moved[320];
    snprintf(moved, sizeof moved, "%s.bak", p);
    assert_int_equal(rename(p, moved), 0);
    lt_inspect_fails(three, "missing shard", "model-00002-of-00003.safetensors");
    assert_int_equal(rename(moved, p), 0);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", three);
    lt_patch(p, "model.layers.2.mlp.down_proj.weight\": \"model-00003", "model.layers.2.mlp.down_proj.weight\": \"model-00001");
    lt_inspect_fails(three, "missing tensor 'model.layers.2.mlp.down_proj.weight'", "model-00001-of-00003.safetensors");
    lt_patch(p, "model.layers.2.mlp.down_proj.weight\": \"model-00001", "model.layers.2.mlp.down_proj.weight\": \"../../../01");
    lt_inspect_fails(three, "model.safetensors.index.json", "not a file name");
    lt_patch(p, "\"weight_map\"", "\"weight_mop\"");
    lt_inspect_fails(three, "model.safetensors.index.json", "weight_map");
    lt_patch(p, "{", "[");
    lt_inspect_fails(three, "model.safetensors.index.json", "invalid JSON");
}

static void test_lazy_access(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    MpMkSpec s = small_spec(MP_ARCH_LLAMA, MP_FORMAT_HF, MP_WT_BF16);
    s.layers = 8;
    snprintf(path, sizeof path, "%s/m", d);
    lt_mk(&s, path);
    MpModel m;
    lt_open(&m, path);
    assert_int_equal(m.bytes_read, 0); /* opening reads headers only */
    size_t expect = 0;
    float *buf = malloc(1 << 20);
    MpErr e;
    for (int l = 0; l < 4; l++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            int64_t sh[2];
            if (!mp_model_shape(&m, (MpRole)r, l, sh)) continue;
            assert_int_equal(mp_model_tensor_f32(&m, (MpRole)r, l, buf, (1 << 20) / 4, NULL, &e), MP_OK);
            expect += (size_t)(sh[0] * sh[1]) * 2;
        }
    assert_int_equal(m.bytes_read, expect); /* exactly the bytes of layers 0..3 */
    /* a few embedding rows read only those rows */
    size_t before = m.bytes_read;
    assert_int_equal(mp_model_rows_f32(&m, MP_ROLE_TOK_EMBD, -1, 10, 3, buf, &e), MP_OK);
    assert_int_equal(m.bytes_read - before, 3 * 64 * 2);
    /* bad requests are errors, not crashes */
    assert_int_equal(mp_model_rows_f32(&m, MP_ROLE_TOK_EMBD, -1, 299, 2, buf, &e), MP_ERR);
    assert_int_equal(mp_model_tensor_f32(&m, MP_ROLE_Q, 8, buf, 100000, NULL, &e), MP_ERR);
    assert_int_equal(mp_model_tensor_f32(&m, MP_ROLE_Q, 0, buf, 10, NULL, &e), MP_ERR);
    assert_int_equal(mp_model_tensor_f32(&m, MP_ROLE_Q_BIAS, 0, buf, 100000, NULL, &e), MP_ERR);
    mp_model_free(&m);
    /* borrow: only for F32 storage */
    s.dtype = MP_WT_F32;
    snprintf(path, sizeof path, "%s/f32", d);
    lt_mk(&s, path);
    lt_open(&m, path);
    int64_t sh[2];
    const float *w = mp_model_tensor_borrow(&m, MP_ROLE_O, 1, sh);
    assert_non_null(w);
    assert_int_equal(sh[0], 64);
    float row[64];
    mp_mk_row(&s, MP_ROLE_O, 1, 5, 64, row);
    assert_memory_equal(w + 5 * 64, row, sizeof row);
    mp_model_free(&m);
    free(buf);
}

/* ---------------------------------------------------------------- CLI: round trip and errors */

static json_t *inspect_json(const char *path) {
    static char out[1 << 20];
    int rc = mp_test_run(out, sizeof out, "inspect '%s' --json --layers 2 --seq 128 --tensors", path);
    if (rc != 0) fail_msg("inspect %s: %d %s", path, rc, out);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    if (!j) fail_msg("inspect --json output is not JSON: %s", je.text);
    return j;
}

static int64_t jint(json_t *o, const char *k) { return json_integer_value(json_object_get(o, k)); }

static void test_cli_roundtrip(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192];
    assert_int_equal(mp_test_run(out, sizeof out,
                                 "mkmodel --arch qwen2 --layers 3 --dim 48 --heads 6 --kv-heads 2 --ffn 80 --vocab 400 --seed 9 "
                                 "--format hf --dtype bf16 --shards 2 %s/q2",
                                 d),
                     0);
    char p[256];
    snprintf(p, sizeof p, "%s/q2", d);
    { /* one line on success (issue 30: mkmodel printed nothing) */
        char want[512];
        snprintf(want, sizeof want, "wrote %s: HF folder qwen2, 3 layers, dim 48, 6 heads (2 key/value), vocab 400, seed 9\n", p);
        assert_string_equal(out, want);
    }
    json_t *j = inspect_json(p);
    assert_string_equal(json_string_value(json_object_get(j, "architecture")), "qwen2");
    assert_int_equal(jint(j, "layers"), 3);
    assert_int_equal(jint(j, "hidden_size"), 48);
    assert_int_equal(jint(j, "heads"), 6);
    assert_int_equal(jint(j, "kv_heads"), 2);
    assert_int_equal(jint(j, "head_dim"), 8);
    assert_int_equal(jint(j, "ffn_size"), 80);
    assert_int_equal(jint(j, "vocab_size"), 400);
    assert_int_equal(jint(j, "files"), 2);
    assert_true(json_is_true(json_object_get(j, "qkv_bias")));
    /* parameters by hand: embed + lm_head 2*400*48; per layer: 2 norms 2*48, q 48*48 + bias 48,
     * k,v 2*(16*48 + 16), o 48*48, gate/up/down 3*80*48; final norm 48 */
    int64_t per_layer = 2 * 48 + 48 * 48 + 48 + 2 * (16 * 48 + 16) + 48 * 48 + 3 * 80 * 48;
    assert_int_equal(jint(j, "parameters"), 2 * 400 * 48 + 3 * per_layer + 48);
    assert_int_equal(jint(j, "n_tensors"), 2 + 3 * 12 + 1);
    json_t *pm = json_object_get(j, "probe_memory");
    assert_int_equal(jint(pm, "weights_bytes"), 2 * per_layer * 4);
    assert_int_equal(jint(pm, "scores_bytes"), 6 * 128 * 128 * 4);
    json_t *rope = json_object_get(j, "rope");
    assert_int_equal(jint(rope, "rotary_dim"), 8);
    assert_true(json_real_value(json_object_get(rope, "theta")) == 10000.0);
    assert_int_equal(json_array_size(json_object_get(rope, "inv_freq")), 4);
    assert_true(fabs(json_real_value(json_array_get(json_object_get(rope, "inv_freq"), 1)) - 0.1) < 1e-8);
    json_t *dt = json_object_get(j, "dtypes");
    assert_int_equal(jint(dt, "BF16"), 2 + 3 * 12 + 1);
    json_t *t0 = json_array_get(json_object_get(j, "tensors"), 0);
    assert_string_equal(json_string_value(json_object_get(t0, "name")), "model.embed_tokens.weight");
    assert_int_equal(json_integer_value(json_array_get(json_object_get(t0, "shape"), 0)), 400);
    json_decref(j);
    /* text output carries the same figures */
    assert_int_equal(mp_test_run(out, sizeof out, "inspect %s --tensors", p), 0);
    assert_non_null(strstr(out, "architecture:   qwen2"));
    assert_non_null(strstr(out, "model.layers.2.self_attn.k_proj.bias"));
    char want[64];
    snprintf(want, sizeof want, "parameters:     %lld", (long long)(2 * 400 * 48 + 3 * per_layer + 48));
    assert_non_null(strstr(out, want));
    /* flag errors exit 2 */
    assert_int_equal(mp_test_run(out, sizeof out, "mkmodel --arch gpt2 %s/x", d), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "mkmodel --heads 4 --kv-heads 3 %s/x", d), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "mkmodel --format hf --dtype q8_0 %s/x", d), 2);
    assert_non_null(strstr(out, "maskpos mkmodel: error: "));
    assert_int_equal(mp_test_run(out, sizeof out, "inspect"), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "inspect --help"), 0);
    assert_int_equal(mp_test_run(out, sizeof out, "mkmodel --help"), 0);
}

static void test_cli_malformed_hf(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[4096], dir[256], st[300], cfg[300];
    snprintf(dir, sizeof dir, "%s/m", d);
    snprintf(st, sizeof st, "%s/model.safetensors", dir);
    snprintf(cfg, sizeof cfg, "%s/config.json", dir);
    MpMkSpec s = small_spec(MP_ARCH_LLAMA, MP_FORMAT_HF, MP_WT_F32);
    lt_mk(&s, dir);
    assert_int_equal(mp_test_run(out, sizeof out, "inspect %s", dir), 0);
    size_t n;
    uint8_t *orig = lt_slurp(st, &n);
    /* truncated file: the last tensor lies outside */
    mp_test_write_file(st, orig, n - 10);
    lt_inspect_fails(dir, "model.safetensors", "truncated");
    lt_inspect_fails(st, "model.safetensors", "lm_head.weight"); /* a .safetensors path inside the directory */
    /* truncated to 4 bytes */
    mp_test_write_file(st, orig, 4);
    lt_inspect_fails(dir, "model.safetensors", "truncated");
    /* bad magic: first header byte */
    uint8_t *b = malloc(n);
    memcpy(b, orig, n);
    b[8] = 'X';
    mp_test_write_file(st, b, n);
    lt_inspect_fails(dir, "model.safetensors", "bad magic");
    /* header length corrupted */
    memcpy(b, orig, n);
    b[6] = 0x7f;
    mp_test_write_file(st, b, n);
    lt_inspect_fails(dir, "model.safetensors", "header length");
    /* offsets outside the file / overlapping / wrong dtype size, by editing the header in place */
    mp_test_write_file(st, orig, n);
    lt_patch(st, "\"F32\",\"shape\":[300,64]", "\"F16\",\"shape\":[300,64]");
    lt_inspect_fails(dir, "model.embed_tokens.weight", "needs 38400");
    mp_test_write_file(st, orig, n);
    lt_patch(st, "\"data_offsets\":[0,76800]", "\"data_offsets\":[0,76804]");
    lt_inspect_fails(dir, "model.embed_tokens.weight", "needs 76800"); /* span != shape x dtype */
    mp_test_write_file(st, orig, n);
    lt_patch(st, "\"data_offsets\":[76800,77056]", "\"data_offsets\":[76796,77052]");
    lt_inspect_fails(dir, "model.safetensors", "overlaps");
    mp_test_write_file(st, orig, n);
    lt_patch(st, "\"shape\":[300,64],\"data_offsets\":[0,76800]", "\"shape\":[301,64],\"data_offsets\":[0,77056]");
    lt_inspect_fails(dir, "model.embed_tokens.weight", NULL);
    /* shape / config mismatch and missing tensors */
    mp_test_write_file(st, orig, n);
    lt_patch(cfg, "\"intermediate_size\": 96", "\"intermediate_size\": 95");
    lt_inspect_fails(dir, "model.layers.0.mlp.gate_proj.weight", "config.json implies [95, 64]");
    lt_patch(cfg, "\"intermediate_size\": 95", "\"intermediate_size\": 96");
    lt_patch(cfg, "\"num_hidden_layers\": 3", "\"num_hidden_layers\": 4");
    lt_inspect_fails(dir, "missing tensor 'model.layers.3.input_layernorm.weight'", NULL);
    lt_patch(cfg, "\"num_hidden_layers\": 4", "\"num_hidden_layers\": 3");
    lt_patch(st, "model.layers.1.self_attn.v_proj.weight", "model.layers.1.self_attn.w_proj.weight");
    lt_inspect_fails(dir, "missing tensor 'model.layers.1.self_attn.v_proj.weight'", NULL);
    mp_test_write_file(st, orig, n);
    lt_patch(st, "\"model.norm.weight\":{\"dtype\":\"F32\"", "\"model.norm.weight\":{\"dtype\":\"I32\"");
    lt_inspect_fails(dir, "model.norm.weight", "unsupported");
    mp_test_write_file(st, orig, n);
    lt_patch(cfg, "\"model_type\": \"llama\"", "\"model_type\": \"gptxx\"");
    lt_inspect_fails(dir, "config.json", "model_type \"gptxx\" is not supported");
    lt_patch(cfg, "\"model_type\": \"gptxx\"", "\"model_type\": \"llama\"");
    lt_patch(cfg, "{", "[");
    lt_inspect_fails(dir, "config.json", "invalid JSON");
    unlink(cfg);
    lt_inspect_fails(dir, "config.json", "cannot open");
    lt_inspect_fails("/nonexistent/model", "/nonexistent/model", NULL);
    free(orig);
    free(b);
}

/* mp_model_weights_hash (issue 31, class 4: the probe's run key): one bit of a weight the run
 * reads changes it, a weight it does not read does not; so do the NoPE switch and the RoPE base. */
static void test_weights_hash_sees_one_bit(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char a[512], out[4096], cfg[600];
    snprintf(a, sizeof a, "%s/a", d);
    if (mp_test_run(out, sizeof out, "mkmodel --layers 2 --dim 16 --heads 2 --kv-heads 1 --ffn 16 --vocab 64 %s", a))
        fail_msg("mkmodel: %s", out);
    MpModel m;
    lt_open(&m, a);
    const uint64_t h1 = mp_model_weights_hash(&m, 1), h2 = mp_model_weights_hash(&m, 2);
    mp_model_free(&m);
    assert_true(h1 != h2 && h1 != 0);
    const uint8_t one = 0x01, sign = 0x80;
    model_poke(a, "model.layers.1.mlp.down_proj.weight", 3, &sign, 1); /* layer 2 only: read by a 2-layer run */
    lt_open(&m, a);
    assert_true(mp_model_weights_hash(&m, 1) == h1);
    const uint64_t h2b = mp_model_weights_hash(&m, 2);
    mp_model_free(&m);
    assert_true(h2b != h2);
    model_poke(a, "model.layers.0.self_attn.q_proj.weight", 40, &one, 1); /* the lowest mantissa bit of a layer-1 weight */
    lt_open(&m, a);
    const uint64_t h1b = mp_model_weights_hash(&m, 1);
    mp_model_free(&m);
    assert_true(h1b != h1);
    snprintf(cfg, sizeof cfg, "%s/config.json", a);
    lt_patch(cfg, "\"rope_theta\": 10000.0", "\"rope_theta\": 10001.0");
    lt_open(&m, a);
    const uint64_t h1c = mp_model_weights_hash(&m, 1);
    mp_model_free(&m);
    assert_true(h1c != h1b);
    lt_patch(cfg, "\"rope_theta\": 10001.0", "\"rope_theta\": 10000.0"); /* back, then layer 1 without RoPE */
    assert_int_equal(mp_test_shell(out, sizeof out, "sed -i 's/\"rope_theta\": 10000.0,/\"rope_theta\": 10000.0, "
                                                    "\"no_rope_layers\": [0, 1],/' %s", cfg), 0);
    lt_open(&m, a);
    const uint64_t h1d = mp_model_weights_hash(&m, 1);
    mp_model_free(&m);
    assert_true(h1d != h1b && h1d != h1c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_st_valid_and_malformed),
        cmocka_unit_test(test_config),
        cmocka_unit_test(test_real_world_configs),
        cmocka_unit_test(test_rope_tables),
        cmocka_unit_test(test_hf_every_arch_matches_generator),
        cmocka_unit_test(test_hf_config_token_ids_in_vocab),
        cmocka_unit_test(test_sharded_equals_single),
        cmocka_unit_test(test_lazy_access),
        cmocka_unit_test(test_cli_roundtrip),
        cmocka_unit_test(test_cli_malformed_hf),
        cmocka_unit_test(test_weights_hash_sees_one_bit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
