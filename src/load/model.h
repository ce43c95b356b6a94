/* model.h — the one model description every checkpoint reader fills (HF safetensors or GGUF).
 *
 * Implements: mp_model_open() for an HF directory (config.json + model.safetensors or sharded
 * model-*.safetensors with model.safetensors.index.json) or a .gguf file, filling the description
 * of arch.h (hyperparameters from config.json via hfconfig.c, or from GGUF keys); and lazy access to
 * any weight by (role, layer), dequantised to f32, in HF orientation, whatever the file stores:
 *   - phi3's fused qkv_proj / gate_up_proj are served as separate Q, K, V, GATE, UP row slices;
 *   - GGUF llama Q/K rows (permuted by convert_hf_to_gguf for interleaved RoPE) are un-permuted,
 *     so Q/K vectors, and hence scores, follow HF's rotate_half convention for every format;
 *   - tied embeddings: MP_ROLE_OUTPUT serves the embedding matrix.
 * Files are memory-mapped read-only; tensor bytes are read only when a role is requested, so
 * asking for layers 0..3 of a 32-layer model never reads the other layers' bytes
 * (MpModel.bytes_read counts what was read). After mp_model_open the accessors only read the
 * model (the counter is atomic), so threads may call them concurrently.
 * Does not: run the forward pass (src/model/), tokenise, or write files (mkmodel.h).
 * Implemented by: model.c, model_hash.c (mp_model_shape_hash, mp_model_weights_hash).
 * Run: `maskpos inspect MODEL`. Tested by: tests/test_load.c, tests/test_load_gguf.c.
 *
 * Shape legend: C hidden size, NH query heads, NKV key/value heads, HS head_dim, FF intermediate
 * size, V vocabulary size, L layers, R rotary dims (R <= HS, even).
 * All weight shapes are HF/torch orientation: a Linear weight is [out, in] row-major.
 */
#ifndef MP_LOAD_MODEL_H
#define MP_LOAD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"   /* MpErr, MP_OK/MP_ERR */
#include "load/arch.h"  /* MpModel, MpArch, MpRole, ...: the description types */

/* Opens an HF directory (or a file inside one) or a GGUF file. Everything is validated:
 * config keys, tensor presence, dtypes and shapes against the config, offsets against the file.
 * On error returns MP_ERR with a one-line message naming the file and the key or tensor. */
int mp_model_open(MpModel *m, const char *path, MpErr *e);
/* Only a config.json (no weights): the hyperparameters and the RoPE table, no tensors. For
 * `inspect CONFIG.json` on published configurations: mp_model_param_count and
 * mp_model_layer_f32_bytes then count what the configuration implies. */
int mp_model_open_config(MpModel *m, const char *path, MpErr *e);
/* GGUF from a caller-owned buffer (kept borrowed for the model's lifetime; used by the fuzzer). */
int mp_model_open_gguf_buffer(MpModel *m, const uint8_t *buf, size_t n, const char *name, MpErr *e);
void mp_model_free(MpModel *m); /* accepts a zeroed struct */

/* Role names and stored tensor names: arch.h (mp_model_role_name, mp_model_stored_name,
 * mp_model_expert_name). */
/* Expert accessors (role GATE_EXPS, UP_EXPS or DOWN_EXPS): the expert's [FF, C] / [C, FF] shape
 * (0 when absent), rows [r0, r0+n) dequantised to f32, and the index of its stored tensor (-1). */
int mp_model_expert_shape(const MpModel *m, MpRole role, int layer, int expert, int64_t shape[2]);
int mp_model_expert_rows_f32(MpModel *m, MpRole role, int layer, int expert, int64_t r0, int64_t n, float *out, MpErr *e);
int mp_model_expert_tensor(const MpModel *m, MpRole role, int layer, int expert);

/* Shape of (role, layer) in HF orientation; returns ndim (1 or 2), or 0 when the role is absent
 * (e.g. Q_BIAS of llama) or layer is out of range. shape[1] = 1 for 1-D tensors. */
int mp_model_shape(const MpModel *m, MpRole role, int layer, int64_t shape[2]);
/* Stored type of the tensor behind (role, layer) (MP_WT_F32 when absent). */
MpWType mp_model_stored_type(const MpModel *m, MpRole role, int layer);

/* out[rows*cols] = (role, layer) dequantised to f32, HF orientation; cap = capacity of out in
 * floats. shape (may be NULL) receives the shape. MP_ERR if absent or cap too small. */
int mp_model_tensor_f32(MpModel *m, MpRole role, int layer, float *out, size_t cap, int64_t shape[2],
                        MpErr *e);
/* out[n*cols] = rows [r0, r0+n) of (role, layer) (e.g. embedding rows of some token ids). */
int mp_model_rows_f32(MpModel *m, MpRole role, int layer, int64_t r0, int64_t n, float *out, MpErr *e);
/* Borrowed pointer to [rows, cols] f32 values inside the mmap when the stored tensor is F32,
 * 4-byte aligned, not sliced and not permuted; NULL otherwise (use mp_model_tensor_f32). */
const float *mp_model_tensor_borrow(MpModel *m, MpRole role, int layer, int64_t shape[2]);

/* Refuses a model with a NaN or ±Inf among the weights that a run of layers 0..n_layers-1 reads
 * (embedding, final norm, output, and those layers): "<file>: tensor '<name>' holds a non-finite
 * value (NaN or ±Inf) at element I". F32/F16/BF16 are scanned as bit patterns (memory speed);
 * quantised types are dequantised block by block (their scales are where a NaN can hide). */
int mp_model_check_finite(const MpModel *m, int n_layers, MpErr *e);
/* The stored tensors a run of layers 0..n_layers-1 reads (embedding, final norm, output, those
 * layers, their experts): a new [n_tensors] array of 0/1 (free it), NULL when out of memory. */
unsigned char *mp_model_read_set(const MpModel *m, int n_layers);
/* A hash of everything a run of layers 0..n_layers-1 computes with: the bytes of the tensors of
 * mp_model_read_set as mapped (with their names, types and shapes) and the description that
 * changes the arithmetic (dimensions, family switches, norms, scales, soft-caps, experts, the RoPE
 * tables as built, NoPE and sliding-window layers). Two models with the same value give the same
 * activations. mp_hash64 (core/util.h); model_hash.c. 0 when out of memory. */
uint64_t mp_model_weights_hash(const MpModel *m, int n_layers);
/* A stable fingerprint of the model's shape: hyperparameters and the tensor table (names, types,
 * shapes, byte sizes), FNV-1a (mp_fnv1a64); a part of the probe's run key. model_hash.c. */
uint64_t mp_model_shape_hash(const MpModel *m);

/* Running seq positions past the model's trained context (max_position_embeddings, or a model
 * that does not state it) is a legitimate experiment, but an explicit one: without allow_long it
 * is refused ("<model>: --seq N is beyond ..., HINT: --allow-long"); with it *beyond = 1 and the
 * caller warns and records it. *beyond = 0 when seq is within the context. */
int mp_model_context_check(const MpModel *m, int64_t seq, int allow_long, int *beyond, MpErr *e);

/* Parameter count of everything stored (tied output counted once); of everything the
 * configuration implies for a model from mp_model_open_config. */
uint64_t mp_model_param_count(const MpModel *m);
/* MoE: the parameters one token uses (every expert but K per layer left out); = the count otherwise. */
uint64_t mp_model_active_param_count(const MpModel *m);
/* f32 bytes of the weights of layers [0, n_layers) (all roles): what a probe of the first
 * layers keeps resident after dequantisation (the embedding is read row by row, not counted). */
uint64_t mp_model_layer_f32_bytes(const MpModel *m, int n_layers);


#endif
