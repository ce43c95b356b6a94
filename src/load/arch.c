/* arch.c — the family table (names, block, stored tensor names, config.json and GGUF keys of
 * every family), role names and shapes, feature flags, sliding-window layers and RoPE tables:
 * everything derived from the family and the hyperparameters alone; see arch.h.
 */
#include "load/arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h" /* mp_try_calloc, mp_err_set */

/* ================================================================ names and keys */

/* Every role: its name (messages, inspect) and its common stored names, HF (after the layer
 * prefix for layer roles; experts: one tensor each, %d the expert) and GGUF (after "blk.N.");
 * a family's own names are in its row. */
typedef struct RoleNames {
    const char *name, *hf, *gguf;
} RoleNames;
static const RoleNames role_info[] = {
    [MP_ROLE_TOK_EMBD] = {"tok_embd", "model.embed_tokens.weight", "token_embd.weight"},
    [MP_ROLE_OUTPUT_NORM] = {"output_norm", "model.norm.weight", "output_norm.weight"},
    [MP_ROLE_OUTPUT] = {"output", "lm_head.weight", "output.weight"},
    [MP_ROLE_ATTN_NORM] = {"attn_norm", "input_layernorm.weight", "attn_norm.weight"},
    [MP_ROLE_Q] = {"q", "self_attn.q_proj.weight", "attn_q.weight"},
    [MP_ROLE_K] = {"k", "self_attn.k_proj.weight", "attn_k.weight"},
    [MP_ROLE_V] = {"v", "self_attn.v_proj.weight", "attn_v.weight"},
    [MP_ROLE_Q_BIAS] = {"q_bias", "self_attn.q_proj.bias", "attn_q.bias"},
    [MP_ROLE_K_BIAS] = {"k_bias", "self_attn.k_proj.bias", "attn_k.bias"},
    [MP_ROLE_V_BIAS] = {"v_bias", "self_attn.v_proj.bias", "attn_v.bias"},
    [MP_ROLE_O] = {"o", "self_attn.o_proj.weight", "attn_output.weight"},
    [MP_ROLE_Q_NORM] = {"q_norm", "self_attn.q_norm.weight", "attn_q_norm.weight"},
    [MP_ROLE_K_NORM] = {"k_norm", "self_attn.k_norm.weight", "attn_k_norm.weight"},
    [MP_ROLE_FFN_NORM] = {"ffn_norm", "post_attention_layernorm.weight", "ffn_norm.weight"},
    [MP_ROLE_GATE] = {"gate", "mlp.gate_proj.weight", "ffn_gate.weight"},
    [MP_ROLE_UP] = {"up", "mlp.up_proj.weight", "ffn_up.weight"},
    [MP_ROLE_DOWN] = {"down", "mlp.down_proj.weight", "ffn_down.weight"},
    [MP_ROLE_ATTN_POST_NORM] = {"attn_post_norm", "post_attention_layernorm.weight", "post_attention_norm.weight"},
    [MP_ROLE_FFN_POST_NORM] = {"ffn_post_norm", "post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
    [MP_ROLE_O_BIAS] = {"o_bias", "self_attn.o_proj.bias", "attn_output.bias"},
    [MP_ROLE_ATTN_NORM_BIAS] = {"attn_norm_bias", "input_layernorm.bias", "attn_norm.bias"},
    [MP_ROLE_FFN_NORM_BIAS] = {"ffn_norm_bias", "post_attention_layernorm.bias", "ffn_norm.bias"},
    [MP_ROLE_UP_BIAS] = {"up_bias", "mlp.up_proj.bias", "ffn_up.bias"},
    [MP_ROLE_DOWN_BIAS] = {"down_bias", "mlp.down_proj.bias", "ffn_down.bias"},
    [MP_ROLE_OUTPUT_NORM_BIAS] = {"output_norm_bias", "model.norm.bias", "output_norm.bias"},
    [MP_ROLE_FFN_ROUTER] = {"router", "mlp.gate.weight", "ffn_gate_inp.weight"},
    [MP_ROLE_GATE_EXPS] = {"gate_exps", "mlp.experts.%d.gate_proj.weight", "ffn_gate_exps.weight"},
    [MP_ROLE_UP_EXPS] = {"up_exps", "mlp.experts.%d.up_proj.weight", "ffn_up_exps.weight"},
    [MP_ROLE_DOWN_EXPS] = {"down_exps", "mlp.experts.%d.down_proj.weight", "ffn_down_exps.weight"},
    [MP_ROLE_SHEXP_GATE_INP] = {"shexp_gate_inp", "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight"},
    [MP_ROLE_SHEXP_GATE] = {"shexp_gate", "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight"},
    [MP_ROLE_SHEXP_UP] = {"shexp_up", "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight"},
    [MP_ROLE_SHEXP_DOWN] = {"shexp_down", "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight"},
};
_Static_assert(sizeof role_info / sizeof role_info[0] == MP_ROLE_COUNT, "one row of role_info[] per MpRole");

static const char *const hf_key_names[] = {
    [MP_HFK_ARCHITECTURES] = "architectures", [MP_HFK_MODEL_TYPE] = "model_type", [MP_HFK_HIDDEN_SIZE] = "hidden_size",
    [MP_HFK_INTERMEDIATE_SIZE] = "intermediate_size", [MP_HFK_NUM_HIDDEN_LAYERS] = "num_hidden_layers",
    [MP_HFK_NUM_ATTENTION_HEADS] = "num_attention_heads", [MP_HFK_NUM_KEY_VALUE_HEADS] = "num_key_value_heads",
    [MP_HFK_HEAD_DIM] = "head_dim", [MP_HFK_HIDDEN_ACT] = "hidden_act", [MP_HFK_RMS_NORM_EPS] = "rms_norm_eps",
    [MP_HFK_ROPE_THETA] = "rope_theta", [MP_HFK_MAX_POSITION_EMBEDDINGS] = "max_position_embeddings",
    [MP_HFK_VOCAB_SIZE] = "vocab_size", [MP_HFK_TIE_WORD_EMBEDDINGS] = "tie_word_embeddings",
    [MP_HFK_BOS_TOKEN_ID] = "bos_token_id", [MP_HFK_EOS_TOKEN_ID] = "eos_token_id", [MP_HFK_PAD_TOKEN_ID] = "pad_token_id",
    [MP_HFK_ATTENTION_BIAS] = "attention_bias", [MP_HFK_MLP_BIAS] = "mlp_bias",
    [MP_HFK_USE_SLIDING_WINDOW] = "use_sliding_window", [MP_HFK_MAX_WINDOW_LAYERS] = "max_window_layers",
    [MP_HFK_SLIDING_WINDOW] = "sliding_window", [MP_HFK_PARTIAL_ROTARY_FACTOR] = "partial_rotary_factor",
    [MP_HFK_ORIGINAL_MAX_POSITION_EMBEDDINGS] = "original_max_position_embeddings", [MP_HFK_ROPE_SCALING] = "rope_scaling",
    [MP_HFK_HIDDEN_ACTIVATION] = "hidden_activation", [MP_HFK_QUERY_PRE_ATTN_SCALAR] = "query_pre_attn_scalar",
    [MP_HFK_ATTN_LOGIT_SOFTCAPPING] = "attn_logit_softcapping", [MP_HFK_FINAL_LOGIT_SOFTCAPPING] = "final_logit_softcapping",
    [MP_HFK_SLIDING_WINDOW_PATTERN] = "sliding_window_pattern", [MP_HFK_ROPE_LOCAL_BASE_FREQ] = "rope_local_base_freq",
    [MP_HFK_LAYER_NORM_EPS] = "layer_norm_eps", [MP_HFK_ROTARY_EMB_BASE] = "rotary_emb_base", [MP_HFK_ROTARY_PCT] = "rotary_pct",
    [MP_HFK_USE_PARALLEL_RESIDUAL] = "use_parallel_residual", [MP_HFK_NUM_LOCAL_EXPERTS] = "num_local_experts",
    [MP_HFK_NUM_EXPERTS] = "num_experts", [MP_HFK_NUM_EXPERTS_PER_TOK] = "num_experts_per_tok",
    [MP_HFK_ROUTER_JITTER_NOISE] = "router_jitter_noise", [MP_HFK_OUTPUT_ROUTER_LOGITS] = "output_router_logits",
    [MP_HFK_MOE_INTERMEDIATE_SIZE] = "moe_intermediate_size", [MP_HFK_NORM_TOPK_PROB] = "norm_topk_prob",
    [MP_HFK_DECODER_SPARSE_STEP] = "decoder_sparse_step", [MP_HFK_MLP_ONLY_LAYERS] = "mlp_only_layers",
    [MP_HFK_SHARED_EXPERT_INTERMEDIATE_SIZE] = "shared_expert_intermediate_size", [MP_HFK_TORCH_DTYPE] = "torch_dtype",
};
_Static_assert(sizeof hf_key_names / sizeof hf_key_names[0] == MP_HFK_COUNT, "one name per MpHfKey");

static const char *const gguf_key_suffixes[] = {
    [MP_GGK_CONTEXT_LENGTH] = "context_length", [MP_GGK_EMBEDDING_LENGTH] = "embedding_length",
    [MP_GGK_BLOCK_COUNT] = "block_count", [MP_GGK_FEED_FORWARD_LENGTH] = "feed_forward_length",
    [MP_GGK_HEAD_COUNT] = "attention.head_count", [MP_GGK_HEAD_COUNT_KV] = "attention.head_count_kv",
    [MP_GGK_KEY_LENGTH] = "attention.key_length", [MP_GGK_VALUE_LENGTH] = "attention.value_length",
    [MP_GGK_ATTN_LOGIT_SOFTCAPPING] = "attn_logit_softcapping", [MP_GGK_FINAL_LOGIT_SOFTCAPPING] = "final_logit_softcapping",
    [MP_GGK_SLIDING_WINDOW] = "attention.sliding_window", [MP_GGK_ROPE_FREQ_BASE_SWA] = "rope.freq_base_swa",
    [MP_GGK_LAYER_NORM_EPSILON] = "attention.layer_norm_epsilon", [MP_GGK_USE_PARALLEL_RESIDUAL] = "use_parallel_residual",
    [MP_GGK_LAYER_NORM_RMS_EPSILON] = "attention.layer_norm_rms_epsilon", [MP_GGK_ROPE_FREQ_BASE] = "rope.freq_base",
    [MP_GGK_ROPE_DIMENSION_COUNT] = "rope.dimension_count", [MP_GGK_VOCAB_SIZE] = "vocab_size",
    [MP_GGK_EXPERT_COUNT] = "expert_count", [MP_GGK_EXPERT_USED_COUNT] = "expert_used_count",
    [MP_GGK_EXPERT_FEED_FORWARD_LENGTH] = "expert_feed_forward_length",
    [MP_GGK_EXPERT_SHARED_FEED_FORWARD_LENGTH] = "expert_shared_feed_forward_length",
    [MP_GGK_ROPE_SCALING_ORIGINAL_CONTEXT_LENGTH] = "rope.scaling.original_context_length",
    [MP_GGK_ROPE_SCALING_ATTN_FACTOR] = "rope.scaling.attn_factor",
};
_Static_assert(sizeof gguf_key_suffixes / sizeof gguf_key_suffixes[0] == MP_GGK_COUNT, "one suffix per MpGgufKey");

/* ================================================================ families */

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

/* config.json keys: K(x) a key, KD(x, d) one read with the family's default d (MpHfEntry). */
#define K(x) {MP_HFK_##x, 0}
#define KD(x, d) {MP_HFK_##x, d}
#define HF_END {MP_HFK_COUNT, 0}
#define HF_SIZES K(ARCHITECTURES), K(MODEL_TYPE), K(HIDDEN_SIZE), K(INTERMEDIATE_SIZE), K(NUM_HIDDEN_LAYERS), K(NUM_ATTENTION_HEADS)
#define HF_HEADS K(NUM_KEY_VALUE_HEADS), K(HEAD_DIM), K(HIDDEN_ACT), KD(RMS_NORM_EPS, 1e-6), K(ROPE_THETA)
#define HF_VOCAB K(MAX_POSITION_EMBEDDINGS), K(VOCAB_SIZE), K(TIE_WORD_EMBEDDINGS), K(BOS_TOKEN_ID), K(EOS_TOKEN_ID)
#define HF_BASE HF_SIZES, HF_HEADS, HF_VOCAB
#define HF_GEMMA K(ROPE_SCALING), K(HIDDEN_ACTIVATION)
#define HF_GEMMA_HEADS K(NUM_KEY_VALUE_HEADS), K(HEAD_DIM), KD(RMS_NORM_EPS, 1e-6), K(ROPE_THETA) /* Gemma3TextConfig: no hidden_act */
#define HF_WINDOW_SWITCH K(USE_SLIDING_WINDOW), KD(MAX_WINDOW_LAYERS, 28), K(SLIDING_WINDOW)
#define HF_QWEN_MOE(ff) K(OUTPUT_ROUTER_LOGITS), K(SLIDING_WINDOW), KD(MOE_INTERMEDIATE_SIZE, ff), KD(NORM_TOPK_PROB, 0), \
    KD(DECODER_SPARSE_STEP, 1), K(MLP_ONLY_LAYERS), KD(MAX_WINDOW_LAYERS, 28), K(USE_SLIDING_WINDOW)

/* GGUF keys. */
#define G(x) MP_GGK_##x
#define GG_SIZES G(CONTEXT_LENGTH), G(EMBEDDING_LENGTH), G(BLOCK_COUNT), G(FEED_FORWARD_LENGTH), G(HEAD_COUNT), G(HEAD_COUNT_KV), \
    G(KEY_LENGTH), G(VALUE_LENGTH)
#define GG_RMS_ROPE G(LAYER_NORM_RMS_EPSILON), G(ROPE_FREQ_BASE)
#define GG_LLAMA GG_SIZES, GG_RMS_ROPE, G(ROPE_DIMENSION_COUNT), G(VOCAB_SIZE) /* llama.cpp's llama converter */
#define GG_END MP_GGK_COUNT

/* Stored names of the families that differ. */
#define NAMES_END {MP_ROLE_COUNT, NULL, NULL}
static const MpRoleName phi3_names[] = { /* fused qkv_proj and gate_up_proj (llama.cpp: attn_qkv, ffn_up) */
    {MP_ROLE_Q, "self_attn.qkv_proj.weight", "attn_qkv.weight"}, {MP_ROLE_K, "self_attn.qkv_proj.weight", "attn_qkv.weight"},
    {MP_ROLE_V, "self_attn.qkv_proj.weight", "attn_qkv.weight"},  {MP_ROLE_GATE, "mlp.gate_up_proj.weight", "ffn_up.weight"},
    {MP_ROLE_UP, "mlp.gate_up_proj.weight", "ffn_up.weight"},     NAMES_END};
static const MpRoleName neox_names[] = { /* GPTNeoXForCausalLM (layers under "gpt_neox.layers.N.") */
    {MP_ROLE_TOK_EMBD, "gpt_neox.embed_in.weight", NULL},
    {MP_ROLE_OUTPUT_NORM, "gpt_neox.final_layer_norm.weight", NULL},
    {MP_ROLE_OUTPUT, "embed_out.weight", NULL},
    {MP_ROLE_Q, "attention.query_key_value.weight", "attn_qkv.weight"},
    {MP_ROLE_K, "attention.query_key_value.weight", "attn_qkv.weight"},
    {MP_ROLE_V, "attention.query_key_value.weight", "attn_qkv.weight"},
    {MP_ROLE_Q_BIAS, "attention.query_key_value.bias", "attn_qkv.bias"},
    {MP_ROLE_K_BIAS, "attention.query_key_value.bias", "attn_qkv.bias"},
    {MP_ROLE_V_BIAS, "attention.query_key_value.bias", "attn_qkv.bias"},
    {MP_ROLE_O, "attention.dense.weight", NULL},
    {MP_ROLE_UP, "mlp.dense_h_to_4h.weight", NULL},
    {MP_ROLE_DOWN, "mlp.dense_4h_to_h.weight", NULL},
    {MP_ROLE_O_BIAS, "attention.dense.bias", NULL},
    {MP_ROLE_UP_BIAS, "mlp.dense_h_to_4h.bias", NULL},
    {MP_ROLE_DOWN_BIAS, "mlp.dense_4h_to_h.bias", NULL},
    {MP_ROLE_OUTPUT_NORM_BIAS, "gpt_neox.final_layer_norm.bias", NULL},
    NAMES_END};
static const MpRoleName gemma23_names[] = {{MP_ROLE_FFN_NORM, "pre_feedforward_layernorm.weight", NULL}, NAMES_END};
static const MpRoleName mixtral_names[] = {
    {MP_ROLE_FFN_ROUTER, "block_sparse_moe.gate.weight", NULL},
    {MP_ROLE_GATE_EXPS, "block_sparse_moe.experts.%d.w1.weight", NULL},
    {MP_ROLE_UP_EXPS, "block_sparse_moe.experts.%d.w3.weight", NULL},
    {MP_ROLE_DOWN_EXPS, "block_sparse_moe.experts.%d.w2.weight", NULL},
    NAMES_END};

/* Gemma3TextConfig's defaults for what gemma3's multimodal configurations leave out of text_config. */
#define GEMMA3_DEFAULTS                                                                                                      \
    "{\"vocab_size\": 262208, \"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256, "                   \
    "\"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-6, \"rope_theta\": 1000000.0, \"query_pre_attn_scalar\": 256, " \
    "\"sliding_window\": 4096, \"sliding_window_pattern\": 6, \"hidden_activation\": \"gelu_pytorch_tanh\", "                \
    "\"tie_word_embeddings\": true}"

static const MpFamily families[] = {
    [MP_ARCH_LLAMA] = {
        .name = "llama", .hf_types = {"llama", "smollm3"}, .hf_class = "LlamaForCausalLM", .hf_nope_type = "smollm3",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_GLU, .gguf_permute_qk = 1,
        .hf_keys = (const MpHfEntry[]){HF_BASE, K(ATTENTION_BIAS), K(MLP_BIAS), K(ROPE_SCALING), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_LLAMA, GG_END}, .opts = MP_FAM_OPT_LLAMA3},
    [MP_ARCH_MISTRAL] = {
        .name = "mistral", .gguf_arch = "llama", .hf_types = {"mistral"}, .hf_class = "MistralForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_GLU, .win = MP_WIN_EVERY, .gguf_permute_qk = 1,
        .hf_keys = (const MpHfEntry[]){HF_BASE, K(SLIDING_WINDOW), K(ROPE_SCALING), K(TORCH_DTYPE), HF_END}, /* no attention_bias: MistralConfig has none */
        .gguf_keys = (const MpGgufKey[]){GG_LLAMA, GG_END}, .opts = MP_FAM_OPT_LLAMA3 | MP_FAM_OPT_WINDOW},
    [MP_ARCH_QWEN2] = {
        .name = "qwen2", .hf_types = {"qwen2"}, .hf_class = "Qwen2ForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | ARCH_GLU, .win = MP_WIN_SWITCHED,
        .hf_keys = (const MpHfEntry[]){HF_BASE, HF_WINDOW_SWITCH, K(ROPE_SCALING), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, GG_END}, .gguf_tok_pre = "qwen2", .opts = MP_FAM_OPT_WINDOW},
    [MP_ARCH_QWEN3] = {
        .name = "qwen3", .hf_types = {"qwen3"}, .hf_class = "Qwen3ForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QK_NORM | ARCH_GLU, .win = MP_WIN_SWITCHED,
        .hf_keys = (const MpHfEntry[]){HF_BASE, K(ATTENTION_BIAS), HF_WINDOW_SWITCH, K(ROPE_SCALING), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, GG_END}, .gguf_tok_pre = "qwen2", .opts = MP_FAM_OPT_WINDOW},
    [MP_ARCH_PHI3] = {
        .name = "phi3", .hf_types = {"phi3"}, .hf_class = "Phi3ForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_GLU, .win = MP_WIN_EVERY,
        .names = phi3_names, .fuse = MP_FUSE_QKV | MP_FUSE_GATE_UP,
        .hf_keys = (const MpHfEntry[]){HF_BASE, KD(PAD_TOKEN_ID, 32000), K(ATTENTION_BIAS), K(SLIDING_WINDOW),
                                       KD(PARTIAL_ROTARY_FACTOR, 1.0), KD(ORIGINAL_MAX_POSITION_EMBEDDINGS, 4096),
                                       K(ROPE_SCALING), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, G(ROPE_DIMENSION_COUNT), G(ROPE_SCALING_ORIGINAL_CONTEXT_LENGTH),
                                         G(SLIDING_WINDOW), G(ROPE_SCALING_ATTN_FACTOR), GG_END},
        .opts = MP_FAM_OPT_LONGROPE | MP_FAM_OPT_WINDOW},
    [MP_ARCH_OLMO2] = {
        .name = "olmo2", .hf_types = {"olmo2"}, .hf_class = "Olmo2ForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_ATTN | ARCH_QK_NORM | ARCH_POST | ARCH_GLU, .qk_norm_whole = 1,
        .gguf_win = MP_WIN_REFUSED, /* llama.cpp windows 3 of 4 olmo2 layers when the key is set */
        .hf_keys = (const MpHfEntry[]){HF_BASE, KD(PAD_TOKEN_ID, 1), K(ATTENTION_BIAS), K(ROPE_SCALING), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, GG_END}},
    [MP_ARCH_GPTNEOX] = {
        .name = "gptneox", .hf_types = {"gpt_neox"}, .hf_class = "GPTNeoXForCausalLM",
        .act = MP_ACT_GELU_ERF, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | R_(UP) | R_(DOWN) | ARCH_NEOX_BIAS,
        .tie = MP_TIE_NEVER, .names = neox_names, .hf_layers = "gpt_neox.layers.%d.",
        .fuse = MP_FUSE_QKV | MP_FUSE_QKV_BIAS | MP_FUSE_HF_HEADS,
        .hf_keys = (const MpHfEntry[]){HF_SIZES, K(HIDDEN_ACT), HF_VOCAB, KD(ATTENTION_BIAS, 1), K(ROPE_SCALING),
                                       KD(LAYER_NORM_EPS, 1e-5), K(ROTARY_EMB_BASE), KD(ROTARY_PCT, 0.25),
                                       KD(USE_PARALLEL_RESIDUAL, 1), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, G(LAYER_NORM_EPSILON), G(USE_PARALLEL_RESIDUAL), G(ROPE_FREQ_BASE),
                                         G(ROPE_DIMENSION_COUNT), GG_END}},
    [MP_ARCH_GEMMA2] = {
        .name = "gemma2", .hf_types = {"gemma2"}, .hf_class = "Gemma2ForCausalLM",
        .act = MP_ACT_GELU_TANH, .roles = ARCH_PRE | ARCH_ATTN | ARCH_POST | ARCH_GLU,
        .norm_plus_one = 1, .embed_scaled = 1, .softcap = 1, .tie = MP_TIE_ALWAYS,
        .win = MP_WIN_PERIOD, .win_period = 2, .gguf_win = MP_WIN_PERIOD, .gguf_win_def = 4096, .gguf_scale_layers = 46,
        .names = gemma23_names,
        .hf_keys = (const MpHfEntry[]){HF_BASE, KD(PAD_TOKEN_ID, 0), K(ATTENTION_BIAS), HF_GEMMA, KD(QUERY_PRE_ATTN_SCALAR, 256),
                                       K(ATTN_LOGIT_SOFTCAPPING), K(FINAL_LOGIT_SOFTCAPPING), KD(SLIDING_WINDOW, 4096),
                                       K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, G(ATTN_LOGIT_SOFTCAPPING), G(FINAL_LOGIT_SOFTCAPPING), G(SLIDING_WINDOW),
                                         GG_RMS_ROPE, GG_END},
        .opts = MP_FAM_OPT_WINDOW},
    [MP_ARCH_GEMMA3] = {
        .name = "gemma3", .hf_types = {"gemma3_text", "gemma3"}, .hf_class = "Gemma3ForCausalLM",
        .hf_nested = "text_config", .hf_defaults = GEMMA3_DEFAULTS,
        .act = MP_ACT_GELU_TANH, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QK_NORM | ARCH_POST | ARCH_GLU,
        .norm_plus_one = 1, .embed_scaled = 1, .tie = MP_TIE_ALWAYS,
        .win = MP_WIN_PERIOD, .win_period = 6, .win_local_base = 10000.0, .gguf_win = MP_WIN_PERIOD, .gguf_scale_layers = 62,
        .names = gemma23_names,
        .hf_keys = (const MpHfEntry[]){HF_SIZES, HF_GEMMA_HEADS, HF_VOCAB, KD(PAD_TOKEN_ID, 0), K(ATTENTION_BIAS), HF_GEMMA,
                                       KD(QUERY_PRE_ATTN_SCALAR, 256), K(ATTN_LOGIT_SOFTCAPPING), K(FINAL_LOGIT_SOFTCAPPING),
                                       KD(SLIDING_WINDOW, 4096), K(SLIDING_WINDOW_PATTERN), K(ROPE_LOCAL_BASE_FREQ), K(TORCH_DTYPE),
                                       HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, G(SLIDING_WINDOW), G(ROPE_FREQ_BASE_SWA), GG_RMS_ROPE, GG_END},
        .opts = MP_FAM_OPT_WINDOW},
    [MP_ARCH_GEMMA] = {
        .name = "gemma", .hf_types = {"gemma"}, .hf_class = "GemmaForCausalLM", .hf_act_alias = "gelu",
        .act = MP_ACT_GELU_TANH, .roles = ARCH_PRE | ARCH_ATTN | ARCH_GLU,
        .norm_plus_one = 1, .embed_scaled = 1, .tie = MP_TIE_ALWAYS,
        .hf_keys = (const MpHfEntry[]){HF_BASE, KD(PAD_TOKEN_ID, 0), K(ATTENTION_BIAS), HF_GEMMA, K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, GG_END}},
    [MP_ARCH_MIXTRAL] = {
        .name = "mixtral", .gguf_arch = "llama", .gguf_marker = "expert_count", .hf_types = {"mixtral"},
        .hf_class = "MixtralForCausalLM", .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_MOE, .win = MP_WIN_EVERY,
        .gguf_moe_renorm = 1, .names = mixtral_names, .gguf_permute_qk = 1,
        .hf_keys = (const MpHfEntry[]){HF_BASE, K(ROPE_SCALING), KD(NUM_LOCAL_EXPERTS, 8), /* MixtralConfig: no attention_bias */
                                       KD(NUM_EXPERTS_PER_TOK, 2), K(ROUTER_JITTER_NOISE), K(OUTPUT_ROUTER_LOGITS),
                                       K(SLIDING_WINDOW), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_LLAMA, G(EXPERT_COUNT), G(EXPERT_USED_COUNT), GG_END}},
    [MP_ARCH_QWEN3MOE] = {
        .name = "qwen3moe", .hf_types = {"qwen3_moe"}, .hf_class = "Qwen3MoeForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QK_NORM | ARCH_MOE, .gguf_moe_renorm = 1,
        .hf_keys = (const MpHfEntry[]){HF_BASE, K(ATTENTION_BIAS), K(ROPE_SCALING), KD(NUM_EXPERTS, 128),
                                       KD(NUM_EXPERTS_PER_TOK, 8), HF_QWEN_MOE(768), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, G(EXPERT_COUNT), G(EXPERT_USED_COUNT),
                                         G(EXPERT_FEED_FORWARD_LENGTH), GG_END},
        .gguf_tok_pre = "qwen2"},
    [MP_ARCH_QWEN2MOE] = {
        .name = "qwen2moe", .hf_types = {"qwen2_moe"}, .hf_class = "Qwen2MoeForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | ARCH_MOE | ARCH_SHEXP,
        .hf_keys = (const MpHfEntry[]){HF_BASE, K(ROPE_SCALING), KD(NUM_EXPERTS, 60), KD(NUM_EXPERTS_PER_TOK, 4), HF_QWEN_MOE(1408),
                                       KD(SHARED_EXPERT_INTERMEDIATE_SIZE, 5632), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_SIZES, GG_RMS_ROPE, G(EXPERT_COUNT), G(EXPERT_USED_COUNT),
                                         G(EXPERT_FEED_FORWARD_LENGTH), G(EXPERT_SHARED_FEED_FORWARD_LENGTH), GG_END},
        .gguf_tok_pre = "qwen2"},
    [MP_ARCH_LLAMABIAS] = {
        .name = "llamabias", .gguf_arch = "llama", .gguf_marker = "blk.0.attn_q.bias", .hf_types = {"llama"},
        .hf_switch = "attention_bias", .hf_class = "LlamaForCausalLM",
        .act = MP_ACT_SILU, .roles = ARCH_PRE | ARCH_ATTN | ARCH_QKV_BIAS | R_(O_BIAS) | ARCH_GLU, .gguf_permute_qk = 1,
        .hf_keys = (const MpHfEntry[]){HF_BASE, KD(ATTENTION_BIAS, 1), K(MLP_BIAS), K(ROPE_SCALING), K(TORCH_DTYPE), HF_END},
        .gguf_keys = (const MpGgufKey[]){GG_LLAMA, GG_END}, .opts = MP_FAM_OPT_LLAMA3},
};
_Static_assert(sizeof families / sizeof families[0] == MP_ARCH_COUNT, "one row of families[] per MpArch");
_Static_assert(MP_ROLE_COUNT <= 64, "MpFamily.roles holds one bit per MpRole");

#undef K
#undef KD
#undef G

const char *mp_act_hf_name(MpAct a) {
    switch (a) {
    case MP_ACT_SILU: return "silu";
    case MP_ACT_GELU_ERF: return "gelu";
    case MP_ACT_GELU_TANH: return "gelu_pytorch_tanh";
    }
    return "?";
}

const char *mp_hf_key_name(MpHfKey k) { return (unsigned)k < MP_HFK_COUNT ? hf_key_names[k] : "?"; }
const char *mp_gguf_key_suffix(MpGgufKey k) { return (unsigned)k < MP_GGK_COUNT ? gguf_key_suffixes[k] : "?"; }

const MpFamily *mp_family(MpArch a) { return (unsigned)a < MP_ARCH_COUNT ? &families[a] : NULL; }
const char *mp_model_arch_name(MpArch a) { return (unsigned)a < MP_ARCH_COUNT ? families[a].name : "?"; }
int mp_family_has(MpArch a, MpRole r) { return (unsigned)a < MP_ARCH_COUNT && (unsigned)r < MP_ROLE_COUNT && (families[a].roles & MP_ROLE_BIT(r)); }

const MpHfEntry *mp_family_hf_key(MpArch a, MpHfKey k) {
    if ((unsigned)a >= MP_ARCH_COUNT) return NULL;
    for (const MpHfEntry *p = families[a].hf_keys; p && p->key != MP_HFK_COUNT; p++)
        if (p->key == k) return p;
    return NULL;
}

int mp_family_gguf_key(MpArch a, MpGgufKey k) {
    if ((unsigned)a >= MP_ARCH_COUNT) return 0;
    for (const MpGgufKey *p = families[a].gguf_keys; p && *p != MP_GGK_COUNT; p++)
        if (*p == k) return 1;
    return 0;
}

int mp_family_mha(MpArch a) { return (unsigned)a < MP_ARCH_COUNT && !mp_family_hf_key(a, MP_HFK_NUM_KEY_VALUE_HEADS); }

int mp_family_from_hf(const char *type, int (*switch_on)(const char *key, void *ctx), void *ctx) {
    int plain = -1;
    for (int a = 0; a < MP_ARCH_COUNT; a++)
        for (int i = 0; i < 2; i++) {
            const MpFamily *f = &families[a];
            if (!f->hf_types[i] || strcmp(type, f->hf_types[i])) continue;
            if (!f->hf_switch && plain < 0) plain = a;
            if (f->hf_switch && switch_on && switch_on(f->hf_switch, ctx)) return a;
        }
    return plain;
}

int mp_family_from_gguf(const char *arch, int (*has_marker)(const char *marker, void *ctx), void *ctx) {
    int plain = -1;
    for (int a = 0; a < MP_ARCH_COUNT; a++) {
        const MpFamily *f = &families[a];
        if (!f->gguf_arch && !strcmp(arch, f->name) && plain < 0) plain = a;
        if (f->gguf_arch && f->gguf_marker && !strcmp(arch, f->gguf_arch) && has_marker && has_marker(f->gguf_marker, ctx)) return a;
    }
    return plain;
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

/* ================================================================ stored names */

_Static_assert(MP_ROLE_K == MP_ROLE_Q + 1 && MP_ROLE_V == MP_ROLE_Q + 2 && MP_ROLE_K_BIAS == MP_ROLE_Q_BIAS + 1 &&
                   MP_ROLE_V_BIAS == MP_ROLE_Q_BIAS + 2 && MP_ROLE_UP == MP_ROLE_GATE + 1,
               "the parts of a fused tensor follow its first role");

int mp_family_fused(MpArch a, MpRole r, MpRole *first, int *part) {
    const unsigned fu = (unsigned)a < MP_ARCH_COUNT ? families[a].fuse : 0;
    MpRole f0 = r;
    int n = 1;
    if ((fu & MP_FUSE_QKV) && r >= MP_ROLE_Q && r <= MP_ROLE_V) f0 = MP_ROLE_Q, n = 3;
    if ((fu & MP_FUSE_QKV_BIAS) && r >= MP_ROLE_Q_BIAS && r <= MP_ROLE_V_BIAS) f0 = MP_ROLE_Q_BIAS, n = 3;
    if ((fu & MP_FUSE_GATE_UP) && (r == MP_ROLE_GATE || r == MP_ROLE_UP)) f0 = MP_ROLE_GATE, n = 2;
    *first = f0;
    *part = (int)(r - f0);
    return n;
}

const char *mp_model_role_name(MpRole r) { return (unsigned)r < MP_ROLE_COUNT ? role_info[r].name : "?"; }
int mp_model_role_is_global(MpRole r) { return r < MP_ROLE_FIRST_LAYER || r == MP_ROLE_OUTPUT_NORM_BIAS; }

/* The stored name of (role, layer, expert) in a file of format fmt for arch. */
static void stored_name(MpFormat fmt, MpArch arch, MpRole role, int layer, int expert, char *out, size_t cap) {
    const MpFamily *f = mp_family(arch);
    const int hf = fmt == MP_FORMAT_HF;
    const char *sfx = NULL;
    for (const MpRoleName *p = f ? f->names : NULL; p && p->role != MP_ROLE_COUNT && !sfx; p++)
        if (p->role == role) sfx = hf ? p->hf : p->gguf;
    if (!sfx) sfx = (unsigned)role < MP_ROLE_COUNT ? (hf ? role_info[role].hf : role_info[role].gguf) : "?";
    char name[256], pre[128] = "";
    snprintf(name, sizeof name, sfx, expert); /* HF expert names hold the expert's %d; the others no conversion */
    if (!mp_model_role_is_global(role)) snprintf(pre, sizeof pre, hf ? (f && f->hf_layers ? f->hf_layers : "model.layers.%d.") : "blk.%d.", layer);
    snprintf(out, cap, "%s%s", pre, name);
}

void mp_model_stored_name(MpFormat fmt, MpArch arch, MpRole role, int layer, char *out, size_t cap) {
    stored_name(fmt, arch, role, layer, 0, out, cap);
}

void mp_model_expert_name(MpFormat fmt, MpArch arch, MpRole role, int layer, int expert, char *out, size_t cap) {
    stored_name(fmt, arch, role, layer, fmt == MP_FORMAT_GGUF ? 0 : expert, out, cap); /* GGUF: one 3-D tensor holds every expert */
}

void mp_family_tensor_count(MpArch a, MpFormat fmt, int tied, int experts, int *globals, int *per_layer) {
    *globals = 2 + !tied + mp_family_has(a, MP_ROLE_OUTPUT_NORM_BIAS);
    *per_layer = 0;
    for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
        MpRole first;
        int part;
        if (mp_model_role_is_global((MpRole)r) || !mp_family_has(a, (MpRole)r)) continue;
        mp_family_fused(a, (MpRole)r, &first, &part);
        if (part > 0) continue; /* stored with the fused tensor's first role */
        const int exps = r >= MP_ROLE_GATE_EXPS && r <= MP_ROLE_DOWN_EXPS;
        *per_layer += exps && fmt == MP_FORMAT_HF ? experts : 1;
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
        m->rope_local_theta = local_base;
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
