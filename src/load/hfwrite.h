/* hfwrite.h — the one writer of HF checkpoints: a folder with config.json, the weights as
 * safetensors and the model's tokenizer files, as transformers' save_pretrained lays them out.
 *
 * Implements: config.json as given (byte for byte: its callers' bytes are hashed and compared);
 * the weights in one model.safetensors or in N shards model-0000K-of-0000N.safetensors (N
 * consecutive, non-empty groups of about equal bytes) with model.safetensors.index.json
 * ({"metadata": {"total_size"}, "weight_map"}); every safetensors file with the layout of
 * model-formats.md §1 (u64 header length, a compact JSON header with "__metadata__":
 * {"format": "pt"} and the tensors in the given order, contiguous from offset 0, padded with
 * spaces to a multiple of 8); then the tokenizer's files (tokenizer.json, tokenizer_config.json)
 * byte for byte. Each file is written atomically (core/util.h MpAtomicFile); the tensors' bytes
 * are streamed by the caller's function, so models larger than memory can be written.
 * Used by: `maskpos mkmodel` (load/mkmodel.c) and `maskpos train`'s checkpoints (train/ckpt.c).
 * Does not: name tensors or make config.json (the family table and its callers do), quantise.
 * Tested by: tests/test_load.c (mkmodel's folders read back, sharded = single), tests/test_train.c
 * (checkpoints resume bit-exactly and torch reads them).
 */
#ifndef MP_LOAD_HFWRITE_H
#define MP_LOAD_HFWRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"   /* MpErr */
#include "load/quant.h" /* MpWType */

/* One stored tensor: [rows] (ndim 1) or [rows, cols] (ndim 2), HF orientation. */
typedef struct MpHfTensor {
    const char *name;
    MpWType type;  /* F32, F16 or BF16 */
    int ndim;
    int64_t rows, cols;
    size_t nbytes; /* rows x cols x the type's size */
} MpHfTensor;

/* Writes tensor i's nbytes bytes (little-endian) to f; MP_ERR with a message naming it. */
typedef int (*MpHfTensorBytes)(void *ctx, size_t i, FILE *f, MpErr *e);

/* A file copied into the folder as it is (the tokenizer's). */
typedef struct MpHfFile {
    const char *name; /* "tokenizer.json" */
    const void *data;
    size_t len;
} MpHfFile;

typedef struct MpHfCheckpoint {
    const char *config;       /* config.json's text */
    size_t config_len;
    const MpHfTensor *tensors; /* [n_tensors], in file order */
    size_t n_tensors;
    MpHfTensorBytes bytes;     /* the tensors' data */
    void *ctx;
    int shards;                /* 1: model.safetensors; N > 1 (<= n_tensors): shards and index */
    const MpHfFile *files;     /* [n_files] the tokenizer's files, or none */
    size_t n_files;
} MpHfCheckpoint;

/* Writes checkpoint c into the folder dir (created if needed). On error: a one-line message
 * naming the file; the files written before it stay (the callers own the folder). */
int mp_hfwrite(const char *dir, const MpHfCheckpoint *c, MpErr *e);
/* One safetensors file at path holding tensors [a, b) of c. */
int mp_hfwrite_safetensors(const char *path, const MpHfCheckpoint *c, size_t a, size_t b, MpErr *e);
/* The safetensors dtype of a stored type: "F32", "F16", "BF16". */
const char *mp_hfwrite_dtype(MpWType t);

#endif
