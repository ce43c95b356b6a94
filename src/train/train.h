/* train.h — a small Llama-style decoder that can be trained: the model behind `maskpos train`.
 *
 * Implements (prefix mp_train_):
 *   - the configuration and the parameter table (HF tensor names, shapes, offsets into one block);
 *   - the model in two precisions generated from one source (src/train/model_impl.h, included by
 *     model_f32.c with float and model_f64.c with double): every op as a forward/backward pair
 *     (embedding, RMSNorm, matmul, RoPE rotate-half, causal GQA attention, SwiGLU, cross-entropy)
 *     and the whole model forward (keeping activations) and backward. The f32 model trains; the
 *     f64 model is the finite-difference reference of tests/test_train.c;
 *   - AdamW (decoupled weight decay), linear warm-up + cosine schedule, global-norm clipping
 *     (optim.c); the corpus as bytes or as the ids of a tokenizer (src/tok/), its held-out split
 *     and deterministic batch sampling (data.c); checkpoints in the HF layout plus our
 *     optimiser-state file, carrying the tokenizer's files (ckpt.c).
 * Does not: mixed precision, or anything on GPUs.
 * Determinism: initial weights and batches come from the Philox counter RNG keyed by (seed,
 *   tensor) and (seed, step); OpenMP runs over outer loops only and every output element is
 *   summed by one thread in a fixed order, so results are bit-identical for any thread count.
 * Implemented by: layout.c (the parameter table), model_f32.c, model_f64.c (the model,
 *   through model_decl.h and model_impl.h), optim.c, data.c, ckpt.c.
 * Run: maskpos train --help. Tested by: tests/test_train.c (finite differences, torch one-step
 *   reference tests/ref/train_ref.py, golden loss curve, resume, bad inputs).
 *
 * Shape legend: B batch, T sequence length, C model width, NH query heads, NKV key/value heads,
 * HS head size (C / NH), FF MLP width, V vocabulary, L layers, N = B*T rows.
 */
#ifndef MP_TRAIN_H
#define MP_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"  /* MpErr, MP_OK/MP_ERR */
#include "core/opts.h" /* MpOptRange: the ranges train's flags read */

/* ------------------------------------------------------------------------------------------ */
/* configuration and parameter table */

typedef enum MpTrainPos { MP_TRAIN_POS_ROPE = 0, MP_TRAIN_POS_NONE } MpTrainPos;

typedef struct MpTrainConfig {
    int layers;       /* L */
    int dim;          /* C */
    int heads;        /* NH */
    int kv_heads;     /* NKV (divides NH) */
    int head_dim;     /* HS = C / NH (set by mp_train_config_check) */
    int ffn;          /* FF */
    int vocab;        /* V (256: bytes, 257 with --bos; else the tokenizer's n_ids) */
    int seq;          /* T */
    int batch;        /* B */
    MpTrainPos pos;   /* RoPE (HF rotate-half, positions 0..T-1) or none (NoPE) */
    double rope_theta;
    int tie;          /* lm_head shares the embedding */
    double norm_eps;  /* RMSNorm epsilon */
    double init_std;  /* weights ~ N(0, std^2); o_proj and down_proj scaled by 1/sqrt(2L) */
    int bos;          /* 1: --bos, every window starts with BOS (bytes: id 256; else the
                         tokenizer's); 0: windows are plain slices of the stream */
} MpTrainConfig;

void mp_train_config_default(MpTrainConfig *c);
int mp_train_config_check(MpTrainConfig *c, MpErr *e); /* fills head_dim */

/* Per-layer tensor roles, in storage order. */
typedef enum MpTrainRole {
    MP_TRAIN_ATTN_NORM = 0, /* [C]        input_layernorm */
    MP_TRAIN_Q,             /* [NH*HS, C] */
    MP_TRAIN_K,             /* [NKV*HS, C] */
    MP_TRAIN_V,             /* [NKV*HS, C] */
    MP_TRAIN_O,             /* [C, NH*HS] */
    MP_TRAIN_FFN_NORM,      /* [C]        post_attention_layernorm */
    MP_TRAIN_GATE,          /* [FF, C] */
    MP_TRAIN_UP,            /* [FF, C] */
    MP_TRAIN_DOWN,          /* [C, FF] */
    MP_TRAIN_NROLES
} MpTrainRole;

typedef struct MpTrainTensor {
    char name[96];        /* HF name, e.g. "model.layers.0.self_attn.q_proj.weight" */
    int ndim;             /* 1 or 2 */
    int64_t shape[2];     /* [rows, cols] ([n, 1] for 1-D) */
    size_t off, n;        /* element offset into the parameter block, element count */
    int decay;            /* 1: AdamW weight decay applies (matrices), 0: norms */
} MpTrainTensor;

/* Tensor order: embed_tokens, then per layer the roles above, then model.norm, then lm_head
 * (untied only). */
typedef struct MpTrainLayout {
    int n;                /* number of tensors */
    MpTrainTensor *t;     /* [n] owned */
    size_t total;         /* parameters */
} MpTrainLayout;

int mp_train_layout_init(MpTrainLayout *lay, const MpTrainConfig *c, MpErr *e);
void mp_train_layout_free(MpTrainLayout *lay);
int mp_train_layout_embed(void);                            /* index of embed_tokens */
int mp_train_layout_index(const MpTrainConfig *c, int layer, MpTrainRole r);
int mp_train_layout_norm(const MpTrainConfig *c);           /* model.norm */
int mp_train_layout_lm_head(const MpTrainConfig *c);        /* lm_head (embed when tied) */

/* Initial weights (f32) into params[lay->total]: Philox stream per tensor. */
void mp_train_init_params(float *params, const MpTrainLayout *lay, const MpTrainConfig *c, uint64_t seed);

/* ------------------------------------------------------------------------------------------ */
/* the model, in f32 (training) and f64 (finite-difference reference) */

#define MP_TRAIN_REAL float
#define MP_TRAIN_SUF _f32
#include "train/model_decl.h"
#undef MP_TRAIN_REAL
#undef MP_TRAIN_SUF
#define MP_TRAIN_REAL double
#define MP_TRAIN_SUF _f64
#include "train/model_decl.h"
#undef MP_TRAIN_REAL
#undef MP_TRAIN_SUF

/* ------------------------------------------------------------------------------------------ */
/* optimiser */

typedef struct MpTrainOptConfig {
    double lr, min_lr_frac;  /* peak learning rate; the cosine ends at lr * min_lr_frac */
    int64_t warmup, steps;   /* linear warm-up steps, total steps */
    double beta1, beta2, eps, wd, clip; /* clip <= 0: no clipping */
} MpTrainOptConfig;

void mp_train_opt_default(MpTrainOptConfig *o);

/* Accepted ranges of a run's settings, closed [lo, hi]: `train`'s flags and the check of a
 * checkpoint's optimizer.bin read the same table, so a file cannot carry what the CLI refuses.
 * Settings without a flag (beta1, eps, the validation fraction) are fixed by the defaults and
 * bounded here all the same. */
typedef enum MpTrainSetting {
    MP_TRAIN_SET_LR = 0,
    MP_TRAIN_SET_MIN_LR_FRAC,
    MP_TRAIN_SET_WARMUP,
    MP_TRAIN_SET_STEPS,
    MP_TRAIN_SET_WD,
    MP_TRAIN_SET_CLIP,
    MP_TRAIN_SET_BETA1,
    MP_TRAIN_SET_BETA2,
    MP_TRAIN_SET_EPS,
    MP_TRAIN_SET_VAL_FRAC,
    MP_TRAIN_NSETTINGS
} MpTrainSetting;
/* name: the flag ("--lr"), or the setting's name when it has none; [lo, hi]. The option table of
 * `maskpos train` points its rows at these (core/opts.h's MpOptDecl.range). */
typedef MpOptRange MpTrainRange;
extern const MpTrainRange mp_train_ranges[MP_TRAIN_NSETTINGS];
/* Every optimiser setting and val_frac inside mp_train_ranges (NaN is outside). */
int mp_train_opt_check(const MpTrainOptConfig *o, double val_frac, MpErr *e);
/* Learning rate of step s (0-based): lr (s+1)/warmup during warm-up, then cosine to lr*min_frac. */
double mp_train_lr(const MpTrainOptConfig *o, int64_t step);
/* Global L2 norm of grads (double, fixed order). When clip > 0 and the norm exceeds it, grads are
 * scaled by clip / (norm + 1e-6) (torch.nn.utils.clip_grad_norm_). Returns the norm before. */
double mp_train_clip(float *grads, size_t n, double clip);
/* One AdamW step (torch.optim.AdamW semantics) with t = step number from 1; m, v [n] state. */
void mp_train_adamw(float *params, float *m, float *v, const float *grads, const MpTrainLayout *lay,
                    const MpTrainOptConfig *o, double lr, int64_t t);

/* ------------------------------------------------------------------------------------------ */
/* data: a corpus as bytes or as the ids of a tokenizer, the last val_frac held out */

struct MpTok; /* tok/tok.h */

/* The tokenizer of a run as its checkpoints carry it: the bytes of tokenizer.json (and of
 * tokenizer_config.json when present), read once and written into every checkpoint, so the
 * tokenizer a checkpoint names is the one that was used even if the source files change. */
typedef struct MpTrainTokFiles {
    char *json;           /* [json_len] owned: tokenizer.json */
    size_t json_len;
    char *config;         /* [config_len] owned, NULL when there is no tokenizer_config.json */
    size_t config_len;
    char src[4096];       /* the tokenizer.json it was read from (messages, config.json) */
    uint64_t hash;        /* MpTok.hash: FNV-1a of json, then config */
    int32_t n_ids;        /* vocabulary V */
    int32_t bos_id, eos_id; /* -1: none */
} MpTrainTokFiles;

/* Loads the tokenizer at path (a directory with tokenizer.json, or a tokenizer.json; a GGUF
 * tokenizer is refused: checkpoints carry tokenizer.json, docs/train.md) into tok (mp_tok_init_json
 * of the very bytes kept in f). On failure both are left zeroed. */
int mp_train_tok_open(struct MpTok *tok, MpTrainTokFiles *f, const char *path, MpErr *e);
void mp_train_tok_files_free(MpTrainTokFiles *f);

typedef struct MpTrainData {
    int32_t *ids;            /* [n] owned: the token stream (bytes: id = byte value) */
    size_t n;                /* tokens */
    size_t n_train;          /* ids [0, n_train) train, [n_train, n) validation */
    size_t n_bytes;          /* corpus file size */
    uint64_t hash;           /* FNV-1a of the file (resume refuses another corpus) */
    int32_t bos;             /* -1 (set by mp_train_data_open); else every window starts with it */
} MpTrainData;

/* Reads the corpus at path; tok NULL: its bytes are the ids (vocabulary 256); else the whole
 * file is encoded once with tok (mp_tok_encode, add_special 0). Both splits need seq + 1 ids. */
int mp_train_data_open(MpTrainData *d, const char *path, struct MpTok *tok, double val_frac, int seq, MpErr *e);
void mp_train_data_free(MpTrainData *d);
/* inputs/targets [B, T] int32 of step `step`: B windows at Philox-drawn train offsets. With
 * d->bos >= 0 a window is BOS + T-1 ids as inputs and the T ids after BOS as targets. */
void mp_train_data_batch(int32_t *inputs, int32_t *targets, const MpTrainData *d, int B, int T, uint64_t seed,
                         int64_t step);
/* Number of disjoint validation windows of T+1 ids. */
int64_t mp_train_data_val_windows(const MpTrainData *d, int T);
/* inputs/targets [B, T] of validation windows w0..w0+B-1 (wrapping over the windows). */
void mp_train_data_val_batch(int32_t *inputs, int32_t *targets, const MpTrainData *d, int B, int T, int64_t w0);

/* ------------------------------------------------------------------------------------------ */
/* checkpoints: DIR/config.json + DIR/model.safetensors (F32 or BF16) + DIR/optimizer.bin */

#define MP_TRAIN_OPT_MAGIC "MPTROPT\0"
#define MP_TRAIN_OPT_VERSION 3u /* 2 added tok_hash; version-1 files (200-byte header) are read as bytes;
                                   3 added the intervals and the hashes of the weights and config.json */
#define MP_TRAIN_OPT_V1_BYTES 200u
#define MP_TRAIN_OPT_V2_BYTES 208u

/* Optimiser-state file: fixed little-endian header, then m[n], v[n] as f32, then an FNV-1a
 * checksum (u64) of everything before it. */
typedef struct MpTrainOptHeader {
    char magic[8];          /* MP_TRAIN_OPT_MAGIC */
    uint32_t version;       /* MP_TRAIN_OPT_VERSION */
    uint32_t header_bytes;  /* sizeof(MpTrainOptHeader) */
    int32_t layers, dim, heads, kv_heads, ffn, vocab, seq, batch, pos, tie;
    uint64_t n_params;
    int64_t step;           /* steps done */
    uint64_t seed;
    uint64_t data_hash;     /* FNV-1a of the corpus file */
    double lr, min_lr_frac, beta1, beta2, eps, wd, clip;
    int64_t warmup, steps;
    double rope_theta, norm_eps, init_std, val_frac;
    int32_t dtype;          /* 0: model.safetensors is F32 (exact resume), 1: BF16 */
    int32_t bos;            /* MpTrainConfig.bos (was a reserved 0 before --bos existed) */
    uint64_t tok_hash;      /* version 2: MpTok.hash of the tokenizer, 0 = bytes */
    int64_t checkpoint_every, eval_every; /* version 3: the run's intervals (--resume keeps them); 0 in older files */
    uint64_t params_hash;   /* version 3: mp_hash64 of the f32 weights [n_params] as written; 0 in older files */
    uint64_t config_hash;   /* version 3: mp_hash64 of config.json's bytes as written; 0 in older files */
} MpTrainOptHeader;

/* Writes the checkpoint into dir atomically: files go to "<dir>.tmp.<pid>/" which is renamed to
 * dir at the end (an existing dir is replaced only then). bf16 != 0 stores BF16 weights. m, v
 * NULL: no optimizer.bin. The byte vocabulary; mp_train_ckpt_write_tok for a tokenizer. */
int mp_train_ckpt_write(const char *dir, const MpTrainConfig *c, const MpTrainLayout *lay, const float *params,
                        const float *m, const float *v, const MpTrainOptHeader *h, int bf16, MpErr *e);
/* The same; tok (NULL: bytes) adds tokenizer.json and tokenizer_config.json (when the run has
 * one) to the directory and its vocabulary, BOS/EOS and hash to config.json. */
int mp_train_ckpt_write_tok(const char *dir, const MpTrainConfig *c, const MpTrainLayout *lay, const float *params,
                            const float *m, const float *v, const MpTrainOptHeader *h, int bf16,
                            const MpTrainTokFiles *tok, MpErr *e);
/* The config.json text of a checkpoint (caller frees); tok NULL: bytes. */
char *mp_train_config_json(const MpTrainConfig *c, int bf16);
char *mp_train_config_json_tok(const MpTrainConfig *c, int bf16, const MpTrainTokFiles *tok);
/* Writes a safetensors file of the tensors in lay (F32, or BF16 when bf16). */
int mp_train_safetensors_write(const char *path, const MpTrainLayout *lay, const float *params, int bf16,
                               MpErr *e);
/* Reads optimizer.bin (header checked against the file length and checksum; a version-1 file
 * gets tok_hash 0, versions 1 and 2 intervals and hashes 0, and both are returned as version 3);
 * m, v are allocated [n_params] (caller frees). */
int mp_train_opt_read(const char *path, MpTrainOptHeader *h, float **m, float **v, MpErr *e);
/* Checks every field of a header with the CLI's rules (called by mp_train_opt_read). */
int mp_train_opt_header_check(const MpTrainOptHeader *h, MpErr *e);
/* Loads the weights of a checkpoint directory through the project's loader (load/model.h) into
 * params[lay->total]; checks config and shapes against c, every value finite, and (h from a version-3 optimizer.bin: hashes not 0) the weights and config.json
 * against the hashes h holds: an edited checkpoint is refused, naming the file. */
int mp_train_ckpt_load_params(float *params, const char *dir, const MpTrainConfig *c, const MpTrainLayout *lay,
                              const MpTrainOptHeader *h, MpErr *e);

#endif
