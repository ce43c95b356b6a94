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
 * One row per MpArch (designated initializers; arch.c checks the count): what a family is called
 * in each format, the activation its MLP runs, and the declaration of its tensors — every role a
 * layer holds, plus the global roles beyond TOK_EMBD, OUTPUT_NORM and OUTPUT. The loader
 * (model.c), the writer (mkmodel.c), the feature flags below and the forward pass's plan
 * (src/model/fwd.c) all read `roles`; names, HF classes and the lists in messages and help come
 * from the other fields. Adding a family: its enum value (at the end), its row, the forward-pass
 * differences, tests (docs/architecture.md). */
#define MP_ROLE_BIT(r) (UINT64_C(1) << (r))

typedef enum MpAct {
    MP_ACT_SILU = 0,  /* SwiGLU: silu(gate) * up */
    MP_ACT_GELU_ERF,  /* exact GELU of up, no gate (gptneox) */
    MP_ACT_GELU_TANH, /* GeGLU: gelu_tanh(gate) * up (gemma) */
} MpAct;
const char *mp_act_hf_name(MpAct a); /* HF's hidden_act: "silu", "gelu", "gelu_pytorch_tanh" */

typedef struct MpFamily {
    const char *name;        /* --arch, meta.json "arch", GGUF general.architecture */
    const char *gguf_arch;   /* what GGUF calls it when not name (mistral, mixtral: "llama"), else NULL */
    const char *hf_types[2]; /* HF model_type values read as this family; [0] is what mkmodel writes */
    const char *hf_class;    /* the config.json "architectures" entry mkmodel writes */
    MpAct act;               /* the MLP's nonlinearity (hidden_act: silu, gelu, gelu_pytorch_tanh) */
    uint64_t roles;          /* MP_ROLE_BIT of every tensor role it holds (see above) */
    int qk_norm_whole;       /* olmo2: q/k norm over the whole projection, not per head */
} MpFamily;

/* The row of family a (NULL when a is out of range). */
const MpFamily *mp_family(MpArch a);
/* 1 when family a holds tensor role r (layer roles, and OUTPUT_NORM_BIAS; not TOK_EMBD,
 * OUTPUT_NORM, OUTPUT, which every family has). */
int mp_family_has(MpArch a, MpRole r);
/* The family whose HF model_type is `type` (any of hf_types), else -1. */
int mp_family_from_hf(const char *type);
/* The family GGUF names `arch` (families written under their own name only), else -1. */
int mp_family_from_gguf(const char *arch);
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
