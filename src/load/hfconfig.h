/* hfconfig.h — HF config.json → MpModel hyperparameters (spec: model-formats.md §2).
 *
 * Implements: model_type llama, mistral, qwen2, qwen3, phi3; head_dim from config when given;
 * rope_theta / rope_scaling (default, linear, llama3, longrope incl. the old "su"/"yarn" spellings
 * that Phi3Config renames) and transformers-v5 rope_parameters; partial_rotary_factor;
 * tie_word_embeddings; bos/eos ids (first of a list). Unsupported features are errors naming the
 * key: MoE (num_experts, num_local_experts, n_routed_experts), sliding window applied to layers
 * (use_sliding_window / layer_types), attention_bias / mlp_bias where the arch has none,
 * hidden_act other than silu, rope types other than the above.
 * Sliding windows of mistral/phi3 (`sliding_window`) are recorded in MpModel.sliding_window:
 * they matter only for sequences longer than the window, which the forward pass must refuse.
 * Does not: look at tensors (model.c checks shapes against these numbers).
 * Tested by: tests/test_load.c, tests/fuzz/fuzz_config.c.
 */
#ifndef MP_LOAD_HFCONFIG_H
#define MP_LOAD_HFCONFIG_H

#include <stddef.h>

#include "core/err.h"   /* MpErr */
#include "load/arch.h" /* MpModel, mp_model_rope_init */

/* Fills m's hyperparameters and RoPE tables from the JSON text[n]; path names the file in
 * messages. On error m may hold a partial RoPE table: mp_model_free() it. */
int mp_hfconfig_parse(MpModel *m, const char *text, size_t n, const char *path, MpErr *e);

#endif
