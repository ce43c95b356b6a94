/* hfconfig.h — HF config.json → MpModel hyperparameters (spec: model-formats.md §2).
 *
 * Implements: the family from model_type (and the row's hf_switch key: llama with
 * attention_bias true is llamabias), then every key as the family's row of the table lists it
 * (arch.c: its keys, the defaults its transformers class gives them, aliases such as gptneox's
 * layer_norm_eps / rotary_pct / rotary_emb_base, gemma3's text_config over Gemma3TextConfig's
 * defaults); head_dim from config when given; rope_theta / rope_scaling (default, linear, llama3,
 * longrope incl. the old "su"/"yarn" spellings that Phi3Config renames) and transformers-v5
 * rope_parameters; partial_rotary_factor; sliding windows as each class applies them;
 * mixture-of-experts keys; tie_word_embeddings; bos/eos ids (first of a list). Unsupported
 * features are errors naming the key: MoE keys in a dense family, sliding-window layers a family
 * does not have, attention_bias / mlp_bias other than the family's, another hidden_act, rope
 * types other than the above, dense layers among MoE ones.
 * Does not: look at tensors (model.c checks shapes against these numbers).
 * Tested by: tests/test_load.c, tests/test_families.c, tests/fuzz/fuzz_config.c.
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
