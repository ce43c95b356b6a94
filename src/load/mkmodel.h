/* mkmodel.h — writer of random-weight test models in both real formats.
 *
 * Implements: an HF directory (config.json + model.safetensors, or N shards
 * model-0000K-of-0000N.safetensors + model.safetensors.index.json) or a GGUF v3 file with the
 * metadata llama.cpp needs to load it (architecture keys, byte-level BPE vocabulary "gpt2" with
 * tokens/token_type/merges/bos/eos, rope_freqs.weight for llama3 scaling, rope_factors_* for
 * longrope, llama Q/K rows permuted as convert_hf_to_gguf does). Weights come from the Philox
 * counter RNG keyed by (seed, role, layer, row), so the same seed gives the same f32 weights in
 * both formats, sharded or not, and phi3's fused tensors hold the same Q/K/V/gate/up rows as the
 * separate tensors of the other archs. For F16/BF16 every value (norms too) is rounded to that
 * type first, so HF and GGUF dequantise to bit-identical f32 even where GGUF stores F32.
 * Quantised GGUF: any type of quant.h (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) for 2-D weights
 * (rows that are not whole blocks fall back to Q8_0, then F16); 1-D tensors stay F32 as in
 * llama.cpp. The quantisers are simple grids, not llama.cpp's error-optimal ones.
 * Mixture of experts (mixtral, qwen3moe): the router and the experts of a layer come from the
 * stacked roles GATE_EXPS / UP_EXPS / DOWN_EXPS (expert j = rows [j*FF, (j+1)*FF) of the stack),
 * written one tensor per expert in HF and one 3-D tensor per layer in GGUF, the same values.
 * Does not: write tokenizer.json, or quantised safetensors (not a thing).
 * Run: maskpos mkmodel --help. Tested by: tests/test_load.c, tests/test_load_gguf.c.
 */
#ifndef MP_LOAD_MKMODEL_H
#define MP_LOAD_MKMODEL_H

#include <stdint.h>

#include "core/err.h"   /* MpErr */
#include "load/model.h" /* MpArch, MpFormat, MpRole, MpRopeScaling */
#include "load/quant.h" /* MpWType */

typedef struct MpMkSpec {
    MpArch arch;
    int layers, dim, heads, kv_heads, head_dim, ffn, vocab; /* head_dim 0: dim / heads */
    uint64_t seed;
    MpFormat format;
    MpWType dtype;
    int shards;                 /* HF only; 1 = single model.safetensors */
    MpRopeScaling rope_scaling; /* NONE, LLAMA3 (llama/mistral), LONGROPE (phi3) */
    double rope_theta;          /* 0: 500000 with llama3 scaling, else 10000 */
    double partial_rotary;      /* phi3 partial_rotary_factor, gptneox rotary_pct (1 = full) */
    int tie;                    /* tie_word_embeddings */
    double norm_eps;
    int max_pos;                /* 0: 131072 with rope scaling, else 4096 */
    int parallel_residual;      /* gptneox use_parallel_residual (default 1) */
    double attn_softcap, final_softcap; /* gemma2 soft-capping (defaults 50, 30 as Gemma 2) */
    int sliding_window;         /* 0: the family's default (gemma2/3 4096, others none); gemma2/3 local
                                   layers', mistral/phi3 every layer's, qwen2/3 layers >= L/2 (HF) */
    int experts, experts_used;  /* mixtral, qwen3moe: E experts, K used per token (defaults 4, 2) */
    int moe_ffn;                /* qwen3moe/qwen2moe moe_intermediate_size (0: = ffn); mixtral's experts are ffn wide */
    int shared_ffn;             /* qwen2moe shared_expert_intermediate_size (0: = ffn) */
    int no_norm_topk;           /* qwen3moe, HF only: norm_topk_prob false (llama.cpp's qwen3moe always
                                   renormalises, so GGUF cannot say it) */
} MpMkSpec;

void mp_mk_spec_default(MpMkSpec *s);
/* s->arch's own defaults for what was not given (its row of the family table): one key/value
 * head per query head (unless kv_given) and the class's rotary fraction (unless rotary_given) for
 * gptneox, a tied head for Gemma, no soft-capping but for Gemma 2. */
void mp_mk_spec_family(MpMkSpec *s, int kv_given, int rotary_given);

/* The options only some families have (mkmodel.c's mk_options[] says which). */
typedef enum MpMkOption {
    MP_MK_LLAMA3 = 0,       /* --rope-scaling llama3 */
    MP_MK_LONGROPE,         /* --rope-scaling longrope */
    MP_MK_PARTIAL_ROTARY,   /* --partial-rotary */
    MP_MK_SERIAL_RESIDUAL,  /* --no-parallel-residual */
    MP_MK_SLIDING_WINDOW,   /* --sliding-window */
    MP_MK_EXPERTS,          /* --experts, --experts-used */
    MP_MK_MOE_FFN,          /* --moe-ffn */
    MP_MK_SHARED_FFN,       /* --shared-ffn */
    MP_MK_NO_NORM_TOPK,     /* --no-norm-topk */
    MP_MK_OPTION_COUNT
} MpMkOption;
/* 1 when family a has option o. */
int mp_mk_option_for(MpMkOption o, MpArch a);
/* 0 when family a has option o; else 1 with "--flag is for --arch x, y or z" in e. */
int mp_mk_option_refused(MpMkOption o, MpArch a, MpErr *e);
/* Checks the combination (divisibility, dtype vs format, vocab >= 258 for GGUF, ...). */
int mp_mk_check(const MpMkSpec *s, MpErr *e);
/* Largest model mp_mk_write writes (bytes of tensor data): these are test models. */
#define MP_MK_MAX_BYTES 64e9
/* mp_mk_check, then the size limits of mp_mk_write, without writing anything. */
int mp_mk_size_check(const MpMkSpec *s, const char *out, MpErr *e);
/* Writes the model to out (a directory for HF, a file for GGUF). Refuses, before writing, a
 * model over MP_MK_MAX_BYTES or over the free space of out's file system. */
int mp_mk_write(const MpMkSpec *s, const char *out, MpErr *e);
/* The generator: out[cols] = row `row` of (role, layer), HF orientation, f32 before storage
 * rounding (1-D tensors are row 0). Exposed so tests can recompute expected weights. */
void mp_mk_row(const MpMkSpec *s, MpRole role, int layer, int64_t row, int64_t cols, float *out);
/* The stored (dequantised) value: mp_mk_row rounded to F16/BF16 when that is the dtype. */
void mp_mk_row_stored(const MpMkSpec *s, MpRole role, int layer, int64_t row, int64_t cols, float *out);

#endif
