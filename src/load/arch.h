/* arch.h — what a model is, before any file is opened: the description types every checkpoint
 * reader fills (MpModel and its roles, tensors and references) and the functions that derive from
 * the hyperparameters alone (architecture names and feature flags, sliding-window layers, RoPE
 * tables). Both readers use it: config.json (hfconfig.c) and GGUF (model.c); neither reaches the
 * other through it, which keeps load/ free of include circles.
 * Does not: open files or read tensors (model.h).
 * Tested by: tests/test_load.c (RoPE tables, features), through every reader test.
 *
 * Shape legend: C hidden size, NH query heads, NKV key/value heads, HS head_dim, FF intermediate
 * size (of one expert in MoE models), V vocabulary size, L layers, R rotary dims (R <= HS, even),
 * E experts, K experts used per token.
 */
#ifndef MP_LOAD_ARCH_H
#define MP_LOAD_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"         /* MpErr, MP_OK/MP_ERR */
#include "load/gguf.h"        /* MpGguf */
#include "load/quant.h"       /* MpWType */
#include "load/safetensors.h" /* MpSt */

typedef enum MpArch {
    MP_ARCH_LLAMA = 0, /* LlamaForCausalLM; GGUF arch "llama" */
    MP_ARCH_MISTRAL,   /* MistralForCausalLM; written to GGUF as "llama" */
    MP_ARCH_QWEN2,     /* q/k/v biases */
    MP_ARCH_QWEN3,     /* per-head q_norm/k_norm before RoPE */
    MP_ARCH_PHI3,      /* fused qkv_proj and gate_up_proj (Phi-3, Phi-4) */
    MP_ARCH_OLMO2,     /* Olmo2ForCausalLM: q/k RMSNorm over the whole projection, norms after
                          attention and after the MLP (no pre-norms) */
    MP_ARCH_GPTNEOX,   /* GPTNeoXForCausalLM (Pythia), HF model_type "gpt_neox": LayerNorm with bias,
                          fused QKV (HF: interleaved per head), partial rotary, parallel residual,
                          GELU MLP with biases, untied head */
    MP_ARCH_GEMMA2,    /* Gemma2ForCausalLM: embeddings x sqrt(C), RMSNorm with (1 + w) (GGUF stores
                          1 + w), norms before and after attention and MLP, GeGLU (tanh GELU),
                          query_pre_attn_scalar, attention and final logit soft-capping, sliding-window
                          layers alternating with global ones, tied head */
    MP_ARCH_GEMMA3,    /* Gemma3ForCausalLM (model_type gemma3_text; gemma3's text_config): Gemma 2's
                          block without soft-capping, per-head (1 + w) q/k norms, five sliding-window
                          layers per global one, local layers with their own RoPE base */
    MP_ARCH_GEMMA,     /* GemmaForCausalLM (Gemma 1): x sqrt(C), (1 + w) pre-norms only, GeGLU (tanh
                          GELU), 1/sqrt(HS), tied head, no soft-capping nor sliding window */
    MP_ARCH_MIXTRAL,   /* MixtralForCausalLM: Llama attention, mixture-of-experts FFN (router softmax over
                          all experts, top-k, the k weights renormalised to sum 1); GGUF arch "llama"
                          with {arch}.expert_count */
    MP_ARCH_QWEN3MOE,  /* Qwen3MoeForCausalLM: Qwen3 attention (per-head q/k norm), mixture-of-experts FFN
                          (renormalised only when norm_topk_prob; GGUF: always, as llama.cpp does) */
    MP_ARCH_QWEN2MOE,  /* Qwen2MoeForCausalLM: Qwen2 attention (q/k/v biases), routed experts (renormalised only
                          when norm_topk_prob; GGUF never, as llama.cpp) plus a shared expert scaled by
                          sigmoid(shared_expert_gate . x) */
    MP_ARCH_LLAMABIAS, /* LlamaForCausalLM with "attention_bias": true: the Llama block with biases on the q, k,
                          v and o projections (HF: self_attn.{q,k,v,o}_proj.bias; GGUF: arch "llama" with
                          attn_{q,k,v,output}.bias, the q/k biases permuted like their rows) */
    MP_ARCH_COUNT
} MpArch;

typedef enum MpFormat { MP_FORMAT_HF = 0, MP_FORMAT_GGUF } MpFormat;

typedef enum MpRopeScaling {
    MP_ROPE_NONE = 0,    /* default: inv_freq[i] = theta^(-2i/R) */
    MP_ROPE_LINEAR,      /* default / factor */
    MP_ROPE_LLAMA3,      /* Llama-3.1 smooth low-frequency scaling (HF rope_scaling llama3) */
    MP_ROPE_FREQ_FACTORS,/* GGUF rope_freqs.weight: default / rope_freqs[i] (what llama3 becomes) */
    MP_ROPE_LONGROPE,    /* Phi-3 longrope: short/long factor tables, cos/sin * attn_factor */
} MpRopeScaling;

/* Per-layer tensor roles. Global roles (layer argument ignored) come first. */
typedef enum MpRole {
    MP_ROLE_TOK_EMBD = 0, /* [V, C]                          model.embed_tokens / token_embd */
    MP_ROLE_OUTPUT_NORM,  /* [C]                             model.norm / output_norm */
    MP_ROLE_OUTPUT,       /* [V, C]                          lm_head / output (tied: TOK_EMBD) */
    MP_ROLE_ATTN_NORM,    /* [C]                             input_layernorm / attn_norm */
    MP_ROLE_Q,            /* [NH*HS, C]                      q_proj (phi3: rows of qkv_proj) */
    MP_ROLE_K,            /* [NKV*HS, C]                     k_proj */
    MP_ROLE_V,            /* [NKV*HS, C]                     v_proj */
    MP_ROLE_Q_BIAS,       /* [NH*HS]     qwen2 only */
    MP_ROLE_K_BIAS,       /* [NKV*HS]    qwen2 only */
    MP_ROLE_V_BIAS,       /* [NKV*HS]    qwen2 only */
    MP_ROLE_O,            /* [C, NH*HS]                      o_proj / attn_output */
    MP_ROLE_Q_NORM,       /* [HS]        qwen3, shared by all heads; olmo2: [NH*HS] */
    MP_ROLE_K_NORM,       /* [HS]        qwen3; olmo2: [NKV*HS] */
    MP_ROLE_FFN_NORM,     /* [C]                             post_attention_layernorm / ffn_norm */
    MP_ROLE_GATE,         /* [FF, C]                         gate_proj (phi3: rows [0,FF) of gate_up) */
    MP_ROLE_UP,           /* [FF, C]                         up_proj (phi3: rows [FF,2FF)) */
    MP_ROLE_DOWN,         /* [C, FF]                         down_proj / ffn_down */
    MP_ROLE_ATTN_POST_NORM, /* [C]  olmo2 post_attention_layernorm / post_attention_norm */
    MP_ROLE_FFN_POST_NORM,  /* [C]  olmo2 post_feedforward_layernorm / post_ffw_norm */
    MP_ROLE_O_BIAS,         /* [C]  gptneox attention.dense.bias / attn_output.bias */
    MP_ROLE_ATTN_NORM_BIAS, /* [C]  gptneox input_layernorm.bias / attn_norm.bias */
    MP_ROLE_FFN_NORM_BIAS,  /* [C]  gptneox post_attention_layernorm.bias / ffn_norm.bias */
    MP_ROLE_UP_BIAS,        /* [FF] gptneox mlp.dense_h_to_4h.bias / ffn_up.bias */
    MP_ROLE_DOWN_BIAS,      /* [C]  gptneox mlp.dense_4h_to_h.bias / ffn_down.bias */
    MP_ROLE_OUTPUT_NORM_BIAS, /* [C] GLOBAL (see mp_model_role_is_global): gptneox
                                 final_layer_norm.bias / output_norm.bias */
    MP_ROLE_FFN_ROUTER,     /* [E, C]   MoE router: mixtral block_sparse_moe.gate, qwen3moe mlp.gate / ffn_gate_inp */
    MP_ROLE_GATE_EXPS,      /* [E*FF, C] the experts' gate projections stacked (expert j: rows [j*FF, (j+1)*FF));
                               HF experts.J.w1 / gate_proj, GGUF ffn_gate_exps [E, FF, C]. Served per expert
                               (mp_model_expert_rows_f32), never through the role accessors */
    MP_ROLE_UP_EXPS,        /* [E*FF, C] w3 / up_proj / ffn_up_exps */
    MP_ROLE_DOWN_EXPS,      /* [E*C, FF] w2 / down_proj / ffn_down_exps [E, C, FF] */
    MP_ROLE_SHEXP_GATE_INP, /* [1, C]   qwen2moe mlp.shared_expert_gate / ffn_gate_inp_shexp (GGUF 1-D [C]) */
    MP_ROLE_SHEXP_GATE,     /* [FFS, C] qwen2moe mlp.shared_expert.gate_proj / ffn_gate_shexp */
    MP_ROLE_SHEXP_UP,       /* [FFS, C] mlp.shared_expert.up_proj / ffn_up_shexp */
    MP_ROLE_SHEXP_DOWN,     /* [C, FFS] mlp.shared_expert.down_proj / ffn_down_shexp */
    MP_ROLE_COUNT
} MpRole;
#define MP_ROLE_FIRST_LAYER MP_ROLE_ATTN_NORM /* roles < this are global */

/* ================================================================ families
 * One row per MpArch (designated initializers; arch.c checks the count): everything that makes a
 * family what it is, for every reader and writer — its names in each format, its block (the
 * activation, the tensor roles its layers hold, the norms and scales), where its tensors are
 * stored (names, fused tensors, GGUF's Q/K row order), its config.json keys with the defaults its
 * HF class gives them, its GGUF metadata keys, and what mkmodel can write beyond the block. The
 * loader (model.c), config.json's reader (hfconfig.c), the writer (mkmodel.c), the feature flags
 * below and the forward pass's plan (src/model/fwd.c, through mp_family_has) read it; nothing
 * outside arch.c compares MpArch values. Adding a family: docs/architecture.md, "a family". */
#define MP_ROLE_BIT(r) (UINT64_C(1) << (r))

typedef enum MpAct {
    MP_ACT_SILU = 0,  /* SwiGLU: silu(gate) * up */
    MP_ACT_GELU_ERF,  /* exact GELU of up, no gate (gptneox) */
    MP_ACT_GELU_TANH, /* GeGLU: gelu_tanh(gate) * up (gemma) */
} MpAct;
const char *mp_act_hf_name(MpAct a); /* HF's hidden_act: "silu", "gelu", "gelu_pytorch_tanh" */

/* config.json keys: each family's row lists those its configuration holds, in the order mkmodel
 * writes them; mp_hf_key_name spells them. */
typedef enum MpHfKey {
    MP_HFK_ARCHITECTURES = 0, MP_HFK_MODEL_TYPE, MP_HFK_HIDDEN_SIZE, MP_HFK_INTERMEDIATE_SIZE, MP_HFK_NUM_HIDDEN_LAYERS,
    MP_HFK_NUM_ATTENTION_HEADS, MP_HFK_NUM_KEY_VALUE_HEADS, MP_HFK_HEAD_DIM, MP_HFK_HIDDEN_ACT, MP_HFK_RMS_NORM_EPS,
    MP_HFK_ROPE_THETA, MP_HFK_MAX_POSITION_EMBEDDINGS, MP_HFK_VOCAB_SIZE, MP_HFK_TIE_WORD_EMBEDDINGS, MP_HFK_BOS_TOKEN_ID,
    MP_HFK_EOS_TOKEN_ID, MP_HFK_PAD_TOKEN_ID, MP_HFK_ATTENTION_BIAS, MP_HFK_MLP_BIAS, MP_HFK_USE_SLIDING_WINDOW,
    MP_HFK_MAX_WINDOW_LAYERS, MP_HFK_SLIDING_WINDOW, MP_HFK_PARTIAL_ROTARY_FACTOR, MP_HFK_ORIGINAL_MAX_POSITION_EMBEDDINGS,
    MP_HFK_ROPE_SCALING, MP_HFK_HIDDEN_ACTIVATION, MP_HFK_QUERY_PRE_ATTN_SCALAR, MP_HFK_ATTN_LOGIT_SOFTCAPPING,
    MP_HFK_FINAL_LOGIT_SOFTCAPPING, MP_HFK_SLIDING_WINDOW_PATTERN, MP_HFK_ROPE_LOCAL_BASE_FREQ, MP_HFK_LAYER_NORM_EPS,
    MP_HFK_ROTARY_EMB_BASE, MP_HFK_ROTARY_PCT, MP_HFK_USE_PARALLEL_RESIDUAL, MP_HFK_NUM_LOCAL_EXPERTS, MP_HFK_NUM_EXPERTS,
    MP_HFK_NUM_EXPERTS_PER_TOK, MP_HFK_ROUTER_JITTER_NOISE, MP_HFK_OUTPUT_ROUTER_LOGITS, MP_HFK_MOE_INTERMEDIATE_SIZE,
    MP_HFK_NORM_TOPK_PROB, MP_HFK_DECODER_SPARSE_STEP, MP_HFK_MLP_ONLY_LAYERS, MP_HFK_SHARED_EXPERT_INTERMEDIATE_SIZE,
    MP_HFK_TORCH_DTYPE,
    MP_HFK_COUNT
} MpHfKey;
const char *mp_hf_key_name(MpHfKey k); /* "hidden_size", ... */

/* One key of a family's config.json and, where the reader takes the family's own, the default
 * its HF config class gives it: the norm epsilon, the rotary fraction, attention_bias (also the
 * value mkmodel writes: what the family's roles mean), max_window_layers, sliding_window (gemma),
 * query_pre_attn_scalar, original_max_position_embeddings, the expert counts and sizes,
 * norm_topk_prob, use_parallel_residual, pad_token_id (written only when this default falls
 * outside the vocabulary, where transformers would refuse the model). Other keys: 0, unused. */
typedef struct MpHfEntry {
    MpHfKey key;
    double def;
} MpHfEntry;

/* GGUF metadata keys "{arch}.<suffix>" beyond general.* and tokenizer.*: each family's row lists
 * those its files hold, in the order mkmodel writes them; mp_gguf_key_suffix spells them. */
typedef enum MpGgufKey {
    MP_GGK_CONTEXT_LENGTH = 0, MP_GGK_EMBEDDING_LENGTH, MP_GGK_BLOCK_COUNT, MP_GGK_FEED_FORWARD_LENGTH, MP_GGK_HEAD_COUNT,
    MP_GGK_HEAD_COUNT_KV, MP_GGK_KEY_LENGTH, MP_GGK_VALUE_LENGTH, MP_GGK_ATTN_LOGIT_SOFTCAPPING,
    MP_GGK_FINAL_LOGIT_SOFTCAPPING, MP_GGK_SLIDING_WINDOW, MP_GGK_ROPE_FREQ_BASE_SWA, MP_GGK_LAYER_NORM_EPSILON,
    MP_GGK_USE_PARALLEL_RESIDUAL, MP_GGK_LAYER_NORM_RMS_EPSILON, MP_GGK_ROPE_FREQ_BASE, MP_GGK_ROPE_DIMENSION_COUNT,
    MP_GGK_VOCAB_SIZE, MP_GGK_EXPERT_COUNT, MP_GGK_EXPERT_USED_COUNT, MP_GGK_EXPERT_FEED_FORWARD_LENGTH,
    MP_GGK_EXPERT_SHARED_FEED_FORWARD_LENGTH, MP_GGK_ROPE_SCALING_ORIGINAL_CONTEXT_LENGTH, MP_GGK_ROPE_SCALING_ATTN_FACTOR,
    MP_GGK_COUNT
} MpGgufKey;
const char *mp_gguf_key_suffix(MpGgufKey k); /* "context_length", "attention.sliding_window", ... */

/* A family's own stored name of a role (NULL: the common one). HF names of layer roles follow
 * the layer prefix; HF expert names hold a %d for the expert. */
typedef struct MpRoleName {
    MpRole role;
    const char *hf, *gguf;
} MpRoleName;

/* Roles stored as row blocks of one tensor (named by the first role's name). */
enum {
    MP_FUSE_QKV = 1,      /* Q, K, V: rows [Q; K; V] */
    MP_FUSE_QKV_BIAS = 2, /* Q_BIAS, K_BIAS, V_BIAS: [Q; K; V] */
    MP_FUSE_GATE_UP = 4,  /* GATE, UP: rows [gate; up] */
    MP_FUSE_HF_HEADS = 8, /* HF groups the fused Q/K/V rows per head: [q, k, v] blocks of HS rows */
};

/* Which layers attend through a sliding window, as the family's HF class (or llama.cpp) decides. */
typedef enum MpWinRule {
    MP_WIN_NONE = 0,  /* HF: none (a "layer_types" must say full_attention throughout); GGUF: the key
                         is ignored, as llama.cpp windows none of these families */
    MP_WIN_EVERY,     /* HF: "sliding_window" (null: none) in every layer, or as "layer_types" says */
    MP_WIN_SWITCHED,  /* HF: only with "use_sliding_window", in layers >= "max_window_layers" or as
                         "layer_types" says */
    MP_WIN_PERIOD,    /* local layers: all but every win_period-th ("sliding_window_pattern" where the
                         row lists it), or as "layer_types" says; the window the default of the
                         row's sliding_window entry (HF) or gguf_win_def (GGUF) */
    MP_WIN_REFUSED,   /* GGUF: a window llama.cpp applies that maskpos does not (olmo2): refused */
} MpWinRule;

typedef enum MpTie {
    MP_TIE_FREE = 0, /* tie_word_embeddings, default false */
    MP_TIE_ALWAYS,   /* the head is the embedding (gemma): tied by default; mkmodel ties */
    MP_TIE_NEVER,    /* the head is its own tensor (gptneox embed_out): mkmodel refuses --tie */
} MpTie;

/* What mkmodel writes beyond the block for some families (the readers accept these from any). */
enum {
    MP_FAM_OPT_LLAMA3 = 1,   /* Llama-3 RoPE scaling: HF rope_scaling llama3, GGUF rope_freqs.weight */
    MP_FAM_OPT_LONGROPE = 2, /* Phi-3 longrope: HF rope_scaling longrope (also spelt "su", "yarn") with
                                original_max_position_embeddings; GGUF rope_factors_* and
                                rope.scaling.attn_factor */
    MP_FAM_OPT_WINDOW = 4,   /* --sliding-window: the row's HF window rule with a window */
};

typedef struct MpFamily {
    /* names */
    const char *name;        /* --arch, meta.json "arch", GGUF general.architecture */
    const char *gguf_arch;   /* what GGUF calls it when not name (mistral, mixtral: "llama"), else NULL */
    const char *gguf_marker; /* with gguf_arch: what tells its files apart among that arch's: a key
                                "{arch}.<marker>" with a nonzero value, or (holding a '.') a tensor
                                present; NULL: read back as the family named gguf_arch (mistral) */
    const char *hf_types[2]; /* HF model_type values read as this family; [0] is what mkmodel writes */
    const char *hf_switch;   /* a boolean config.json key that, true, makes a model of hf_types[0]
                                this family rather than the row that also reads that type */
    const char *hf_class;    /* the config.json "architectures" entry mkmodel writes */
    const char *hf_nested;   /* a key that may hold the text model's own configuration (gemma3's
                                multimodal configs: text_config) */
    const char *hf_defaults; /* JSON: the class's defaults for keys its published configurations
                                leave out (read under the configuration) */
    const char *hf_nope_type;/* the model_type whose class switches RoPE off in every
                                no_rope_layer_interval-th layer by default (SmolLM3Config: 4) */
    const char *hf_act_alias;/* a hidden_act its released configurations give for act, read as act
                                unless hidden_activation says otherwise (Gemma 1: "gelu") */
    /* the block */
    MpAct act;               /* the MLP's nonlinearity */
    uint64_t roles;          /* MP_ROLE_BIT of every tensor role it holds: every layer role, and the
                                global ones beyond TOK_EMBD, OUTPUT_NORM and OUTPUT */
    int qk_norm_whole;       /* olmo2: q/k norm over the whole projection, not per head */
    int norm_plus_one;       /* RMSNorm by (1 + w): HF stores w, GGUF 1 + w (gemma) */
    int embed_scaled;        /* embeddings x sqrt(C), attention scale set (gemma) */
    int softcap;             /* attention and final logit soft-capping (gemma2) */
    MpTie tie;
    MpWinRule win;           /* HF */
    int win_period;          /* MP_WIN_PERIOD: every win_period-th layer global */
    double win_local_base;   /* > 0: the local layers' own RoPE base (gemma3: HF rope_local_base_freq,
                                GGUF rope.freq_base_swa; this the default), unscaled */
    MpWinRule gguf_win;      /* GGUF: NONE, PERIOD or REFUSED */
    int gguf_win_def;        /* GGUF MP_WIN_PERIOD: the window when the file has none (0: required) */
    int gguf_scale_layers;   /* embed_scaled in GGUF: llama.cpp's attention scale (C/NH)^-1/2 at this
                                layer count (the 27B models), HS^-1/2 otherwise (0: always HS^-1/2) */
    int gguf_moe_renorm;     /* MoE in GGUF: llama.cpp renormalises the K routing weights */
    /* where its tensors are */
    const MpRoleName *names; /* its own stored names, {MP_ROLE_COUNT} ends (NULL: none) */
    const char *hf_layers;   /* HF layer tensors' prefix (NULL: "model.layers.%d.") */
    unsigned fuse;           /* MP_FUSE_* */
    int gguf_permute_qk;     /* GGUF Q/K rows (and biases) in the llama converter's interleaved order */
    /* its configuration */
    const MpHfEntry *hf_keys;   /* its config.json keys in file order, {MP_HFK_COUNT} ends */
    const MpGgufKey *gguf_keys; /* its GGUF keys in file order, MP_GGK_COUNT ends */
    const char *gguf_tok_pre;   /* tokenizer.ggml.pre of its byte-level BPE vocabulary, which then adds
                                   no BOS ("qwen2"); NULL: "llama-bpe", with BOS */
    unsigned opts;              /* MP_FAM_OPT_* */
} MpFamily;

/* The row of family a (NULL when a is out of range). */
const MpFamily *mp_family(MpArch a);
/* 1 when family a holds tensor role r (layer roles, and OUTPUT_NORM_BIAS; not TOK_EMBD,
 * OUTPUT_NORM, OUTPUT, which every family has). */
int mp_family_has(MpArch a, MpRole r);
/* Family a's entry for config.json key k (NULL: its configuration has no such key). */
const MpHfEntry *mp_family_hf_key(MpArch a, MpHfKey k);
/* 1 when family a's GGUF files hold key k. */
int mp_family_gguf_key(MpArch a, MpGgufKey k);
/* 1 when family a has one key/value head per query head (no num_key_value_heads: gptneox). */
int mp_family_mha(MpArch a);
/* The family whose HF model_type is `type` (any of hf_types), else -1; switch_on: the value of
 * the key a row's hf_switch names (rows with one are taken only when it is true). */
int mp_family_from_hf(const char *type, int (*switch_on)(const char *key, void *ctx), void *ctx);
/* The family of a GGUF file whose general.architecture is `arch`, else -1: families written under
 * their own name, or under arch and told apart by their gguf_marker (has_marker: 1 when the file
 * holds that key nonzero or that tensor). */
int mp_family_from_gguf(const char *arch, int (*has_marker)(const char *marker, void *ctx), void *ctx);
/* The family called `name` (--arch), else -1. */
int mp_family_from_name(const char *name);
/* The list of names of one kind, joined by sep, into out[cap] (truncated, always terminated). */
typedef enum MpFamilyList {
    MP_FAMILY_NAMES = 0, /* every --arch name */
    MP_FAMILY_HF,        /* every HF model_type read */
    MP_FAMILY_GGUF,      /* every general.architecture read */
    MP_FAMILY_GGUF_MOE,  /* the mixture-of-experts ones among them */
} MpFamilyList;
void mp_family_list(MpFamilyList kind, const char *sep, char *out, size_t cap);

/* How many tensors family a's files store: *globals (embedding, final norm and its bias, the head
 * unless tied) and *per_layer (fused roles once; experts one tensor each in HF, one per role in
 * GGUF), for E experts. From the row alone. */
void mp_family_tensor_count(MpArch a, MpFormat fmt, int tied, int experts, int *globals, int *per_layer);

/* Names of the roles: "q", "k_norm", ... (messages, inspect). */
const char *mp_model_role_name(MpRole r);
int mp_model_role_is_global(MpRole r);
/* Name of the stored tensor holding (role, layer) in a file of format fmt for arch, e.g.
 * "model.layers.3.self_attn.q_proj.weight" / "blk.3.attn_q.weight"; fused roles name their shared
 * tensor (phi3 qkv_proj / attn_qkv). Read by the loader and the writer (mkmodel). */
void mp_model_stored_name(MpFormat fmt, MpArch arch, MpRole role, int layer, char *out, size_t cap);
/* Mixture of experts: the stored name of expert `expert`'s GATE_EXPS / UP_EXPS / DOWN_EXPS in layer
 * `layer` (HF: one tensor per expert, e.g. "model.layers.0.block_sparse_moe.experts.3.w1.weight";
 * GGUF: the layer's 3-D tensor "blk.0.ffn_gate_exps.weight"). */
void mp_model_expert_name(MpFormat fmt, MpArch arch, MpRole role, int layer, int expert, char *out, size_t cap);
/* The fused tensor holding role r in family a's files (both formats): the number of its parts
 * (3 or 2; 1: r is stored alone), its first role (Q, Q_BIAS, GATE; the parts follow it in MpRole
 * order) and the part r is (0-based). */
int mp_family_fused(MpArch a, MpRole r, MpRole *first, int *part);

/* The sizes a role's served shape follows (C, NH*HS, NKV*HS, HS, FF, V, E, FFS) and whether the
 * q/k norms span the whole projection (olmo2). */
typedef struct MpRoleDims {
    int64_t C, Q, KV, HS, FF, V, E, FFS;
    int qk_whole;
} MpRoleDims;
/* The served shape of role r ([rows] or [rows, cols], HF orientation; experts stacked: [E*FF, C],
 * [E*C, FF]); returns ndim (1 or 2), 0 for MP_ROLE_COUNT. One switch over every role, without
 * default: a new role that is not given a shape here is a -Wswitch error. */
int mp_role_shape(MpRole r, const MpRoleDims *d, int64_t *rows, int64_t *cols);
struct MpModel;
MpRoleDims mp_model_role_dims(const struct MpModel *m); /* the dims of a model's hyperparameters */

/* One tensor as stored in a file (borrowed view into the mmap). */
typedef struct MpModelTensor {
    const char *name;     /* borrowed from the MpSt / MpGguf that owns it */
    MpWType type;
    int ndim;             /* 0..8 (safetensors allows up to MP_ST_MAX_DIMS; GGUF 1..4) */
    int64_t shape[8];     /* HF orientation, outermost first (GGUF ne reversed) */
    const uint8_t *data;  /* nbytes bytes inside the mapped file */
    size_t nbytes;
    int file;             /* index into MpModel.file_names */
} MpModelTensor;

/* Where (role, layer) lives: a row slice of one stored tensor. */
typedef struct MpModelRef {
    int tensor;           /* index into MpModel.tensors, -1 when the role is absent */
    int ndim;             /* shape of the served tensor: 1 ([rows]) or 2 ([rows, cols]) */
    int64_t row0, rows, cols;
    int unpermute_heads;  /* >0: GGUF llama Q/K: undo the interleave permutation over this many heads */
    int add_one;          /* 1: HF gemma norm weight, served as 1 + w (f32) */
    int qkv_interleave;   /* >0: HF gptneox query_key_value: rows stored per head as [q, k, v] blocks
                             of this many rows (HS); served row j is stored row row0 + (j/HS)*3*HS + j%HS */
} MpModelRef;

typedef struct MpModel {
    char path[4096];
    MpFormat format;
    MpArch arch;
    /* hyperparameters */
    int n_layers;         /* L */
    int dim;              /* C */
    int n_heads;          /* NH */
    int n_kv_heads;       /* NKV */
    int head_dim;         /* HS (config head_dim, else C/NH) */
    int ffn;              /* FF */
    int vocab;            /* V (rows of the embedding) */
    double norm_eps;      /* rms_norm_eps */
    int max_pos;          /* max_position_embeddings / context_length (0 unknown) */
    int sliding_window;   /* 0 none; else W: in the windowed layers (layer_local, or every layer when
                             layer_local is NULL: mistral, phi3) query i sees key j only when
                             i - j < W (mp_model_layer_window) */
    int has_qkv_bias;     /* qwen2 */
    int has_qk_norm;      /* qwen3 (per head), olmo2 (whole projection) */
    int qk_norm_whole;    /* olmo2: q/k norm over all heads' values at once ([NH*HS], [NKV*HS]) */
    int no_pre_norm;      /* olmo2: no norm before attention nor before the MLP */
    int post_norm;        /* olmo2: norms of the attention and MLP outputs before the residual add */
    int layer_norm;       /* gptneox: LayerNorm (mean removed) with bias, not RMSNorm */
    int gelu_mlp;         /* gptneox: up (+bias) -> exact GELU -> down (+bias); no gate */
    int parallel_residual;/* gptneox use_parallel_residual: x + attn(ln1(x)) + mlp(ln2(x)) */
    int geglu;            /* gemma: gelu_pytorch_tanh(gate) * up instead of SwiGLU */
    double embed_scale;   /* gemma: embeddings x this (sqrt(C), in the checkpoint's dtype for HF as
                             Gemma2Model does; f32 for GGUF as llama.cpp does); 0 = none */
    double attn_scale;    /* gemma: query_pre_attn_scalar^-1/2 (GGUF: llama.cpp's rule); 0 = 1/sqrt(HS) */
    double attn_softcap;  /* gemma2 attn_logit_softcapping: scores -> c tanh(s / c) before the mask
                             and softmax (the maps hold these capped scores); 0 = none */
    double final_softcap; /* gemma2 final_logit_softcapping on the logits; 0 = none */
    int tie_embeddings;   /* output projection = embedding */
    int n_experts;        /* E: experts of every MoE FFN (mixtral, qwen3moe); 0 = dense MLP */
    int n_experts_used;   /* K: experts each token is routed to (1..E) */
    int moe_norm_topk;    /* 1: the K routing weights are renormalised to sum 1 */
    int ffn_shexp;        /* FFS: qwen2moe's shared expert size; 0 = no shared expert */
    int bos_id, eos_id;   /* -1 unknown */
    /* RoPE (HF rotate_half convention: pairs (i, i+R/2) of the first R dims of each head) */
    int rot_dim;          /* R = int(HS * partial_rotary_factor) */
    double rope_theta;
    MpRopeScaling rope_scaling;
    double rope_factor;        /* linear/llama3 factor; longrope: max_pos/orig */
    double rope_low_freq_factor, rope_high_freq_factor; /* llama3 */
    int rope_orig_ctx;         /* llama3/longrope original_max_position_embeddings */
    double rope_attn_factor;   /* multiplies cos and sin (longrope); 1 otherwise */
    float *inv_freq;           /* [R/2] owned: the table for sequences <= rope_orig_ctx (or any) */
    float *inv_freq_long;      /* [R/2] owned, longrope only (sequences > rope_orig_ctx), else NULL */
    float *inv_freq_local;     /* [R/2] owned, gemma3: the table of the sliding-window layers
                                  (rope_local_base_freq, unscaled); NULL otherwise */
    double rope_local_theta;   /* gemma3: the base of inv_freq_local (rope_local_base_freq); 0 otherwise */
    unsigned char *layer_local;/* [L] owned, gemma2/3, qwen2/3 (use_sliding_window): 1 for a
                                  sliding-window layer; NULL = every layer windowed when
                                  sliding_window > 0 (mistral, phi3), else none */
    unsigned char *rope_layer; /* [L] owned: 1 where RoPE is applied, 0 in NoPE layers (HF config
                                  "no_rope_layers", as SmolLM3 and `maskpos train --pos none`
                                  write it); NULL = RoPE in every layer (GGUF has no such key) */
    /* storage */
    int n_files;
    char **file_names;         /* [n_files] owned paths */
    MpSt *st;                  /* [n_files] safetensors shards (HF), else NULL */
    MpGguf *gguf;              /* GGUF file, else NULL */
    MpModelTensor *tensors;    /* [n_tensors] every tensor of every file */
    size_t n_tensors;
    MpModelRef global[MP_ROLE_COUNT];         /* TOK_EMBD, OUTPUT_NORM, OUTPUT, OUTPUT_NORM_BIAS (other entries unused) */
    MpModelRef *layer;         /* [L * MP_ROLE_COUNT] owned */
    MpModelRef *expert;        /* [L * E * 3] owned, MoE only: (GATE_EXPS, UP_EXPS, DOWN_EXPS) of expert j
                                  of layer l at ((l * E) + j) * 3 + k; each a [FF, C] / [C, FF] row slice */
    size_t bytes_read;         /* tensor bytes read through the accessors so far */
} MpModel;

const char *mp_model_arch_name(MpArch a);      /* "llama", "qwen3", ... */

/* Gemma: layer l is a sliding-window (local) layer unless (l + 1) % period == 0; local_base > 0
 * also builds inv_freq_local (unscaled, base local_base). Used by both readers. */
int mp_model_local_layers(MpModel *m, int period, double local_base, MpErr *e);

/* The attention window of layer l (0-based): 0 = every earlier key (the causal mask alone); W > 0
 * = key j is visible from query i only when i - j < W (W keys, the query's own included), as
 * transformers' masking_utils (sliding_window_overlay: kv_idx > q_idx - W) and llama.cpp
 * (is_masked_swa, LLAMA_SWA_TYPE_STANDARD: masked when p1 - p0 >= n_swa) both define it. */
int mp_model_layer_window(const MpModel *m, int l);

/* Sets the per-arch feature flags (has_qkv_bias, has_qk_norm, qk_norm_whole, no_pre_norm,
 * post_norm, geglu, layer_norm, gelu_mlp) from m->arch's row of the family table; both readers
 * call it. */
void mp_model_arch_features(MpModel *m);

const char *mp_model_rope_scaling_name(MpRopeScaling s);

/* RoPE table from hyperparameters (spec §2.2): fills inv_freq[R/2] (and inv_freq_long for
 * longrope, from the factor lists given, each R/2 long). Exposed for tests. */
int mp_model_rope_init(MpModel *m, const double *short_factor, const double *long_factor, MpErr *e);

#endif
