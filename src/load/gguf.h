/* gguf.h — GGUF v2/v3 reader and writer (spec: ../shared/docs/model-formats.md §3.1).
 *
 * Implements:
 *   reader: magic, version (2 or 3; 1 and others rejected), tensor/KV counts bounded by the file
 *   length, every metadata value type (scalars, strings, arrays of scalars or strings; nested
 *   arrays rejected as llama.cpp does), duplicate keys/tensor names rejected, general.alignment
 *   (power of two), tensor infos (1..4 dims, ne[0] innermost, known ggml type, ne[0] a multiple
 *   of the block size, overflow-checked byte size), offsets aligned, inside the file and not
 *   overlapping. Strings and arrays stay in the buffer (borrowed), nothing is copied but names.
 *   writer: KV pairs of any type, tensor infos with aligned offsets, header + padding, so that
 *   callers can stream tensor data afterwards (mkmodel writes models larger than memory).
 * Does not: interpret architecture keys or tensor names (model.c), dequantise (quant.h).
 * Tested by: tests/test_load_gguf.c, tests/fuzz/fuzz_gguf.c.
 */
#ifndef MP_LOAD_GGUF_H
#define MP_LOAD_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"     /* MpErr */
#include "load/mapfile.h" /* MpLoadMap */
#include "load/quant.h"   /* MpWType */

#define MP_GGUF_MAGIC "GGUF"
#define MP_GGUF_DEFAULT_ALIGNMENT 32
#define MP_GGUF_MAX_DIMS 4

/* gguf_type: metadata value types (values are the file's). */
typedef enum MpGgufType {
    MP_GGUF_UINT8 = 0,
    MP_GGUF_INT8 = 1,
    MP_GGUF_UINT16 = 2,
    MP_GGUF_INT16 = 3,
    MP_GGUF_UINT32 = 4,
    MP_GGUF_INT32 = 5,
    MP_GGUF_FLOAT32 = 6,
    MP_GGUF_BOOL = 7,
    MP_GGUF_STRING = 8,
    MP_GGUF_ARRAY = 9,
    MP_GGUF_UINT64 = 10,
    MP_GGUF_INT64 = 11,
    MP_GGUF_FLOAT64 = 12,
    MP_GGUF_TYPE_COUNT
} MpGgufType;

typedef struct MpGgufKv {
    char *key;               /* owned, NUL-terminated */
    MpGgufType type;
    /* scalars: integers in i (signed view) and u (unsigned view); floats in f; bool in u */
    int64_t i;
    uint64_t u;
    double f;
    const uint8_t *str;      /* STRING: borrowed bytes (not NUL-terminated) */
    uint64_t str_len;
    MpGgufType arr_type;     /* ARRAY: element type (never ARRAY) */
    uint64_t arr_n;          /* element count */
    const uint8_t *arr;      /* borrowed: first element (strings: first length prefix) */
} MpGgufKv;

typedef struct MpGgufTensor {
    char *name;              /* owned */
    uint32_t n_dims;         /* 1..4 */
    int64_t ne[MP_GGUF_MAX_DIMS]; /* ne[0] innermost (contiguous); unused dims = 1 */
    MpWType type;
    uint64_t offset;         /* relative to data_start */
    size_t nbytes;
    const uint8_t *data;     /* borrowed: data_start + offset */
} MpGgufTensor;

typedef struct MpGguf {
    char path[4096];
    MpLoadMap map;
    uint32_t version;
    uint32_t alignment;
    size_t data_start;
    MpGgufKv *kv;            /* [n_kv] owned */
    size_t n_kv;
    MpGgufTensor *t;         /* [n_tensors] owned */
    size_t n_tensors;
} MpGguf;

int mp_gguf_parse(MpGguf *g, const uint8_t *buf, size_t n, const char *path, MpErr *e); /* borrows buf */
int mp_gguf_open(MpGguf *g, const char *path, MpErr *e);                                /* mmaps */
void mp_gguf_free(MpGguf *g); /* accepts a zeroed struct */

const MpGgufKv *mp_gguf_find(const MpGguf *g, const char *key);
const MpGgufTensor *mp_gguf_find_tensor(const MpGguf *g, const char *name);
const char *mp_gguf_type_name(MpGgufType t);
/* Typed reads of a KV (any integer type / any numeric type / string). MP_ERR on a type mismatch
 * or a value out of range. */
int mp_gguf_kv_int(const MpGgufKv *kv, int64_t *out);
int mp_gguf_kv_num(const MpGgufKv *kv, double *out);
int mp_gguf_kv_str(const MpGgufKv *kv, char *out, size_t cap); /* MP_ERR if not a string or too long */
/* Array element idx as number (numeric arrays). */
int mp_gguf_arr_num(const MpGgufKv *kv, uint64_t idx, double *out);
/* Walks a string array: cursor[2] (index, byte offset) starts at {0, 0}; returns MP_OK and the
 * next string (borrowed, not NUL-terminated), MP_ERR at the end or on a non-string array. */
int mp_gguf_arr_next_str(const MpGgufKv *kv, size_t cursor[2], const uint8_t **s, uint64_t *len);

/* ---- writer: collect KVs and tensor infos, then write the header; then stream tensor data. */
typedef struct MpGgufWriter {
    uint8_t *kv;             /* serialised KV pairs */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    uint8_t *ti;             /* serialised tensor infos */
    size_t ti_len, ti_cap;
    uint64_t n_tensors;
    uint64_t data_size;      /* aligned end of the data section so far */
    uint32_t alignment;
    int oom;                 /* sticky allocation failure */
} MpGgufWriter;

void mp_gguf_writer_init(MpGgufWriter *w, uint32_t alignment);
void mp_gguf_writer_free(MpGgufWriter *w);
void mp_gguf_w_scalar(MpGgufWriter *w, const char *key, MpGgufType t, const void *v); /* v: value of type t */
void mp_gguf_w_u32(MpGgufWriter *w, const char *key, uint32_t v);
void mp_gguf_w_f32(MpGgufWriter *w, const char *key, float v);
void mp_gguf_w_bool(MpGgufWriter *w, const char *key, int v);
void mp_gguf_w_str(MpGgufWriter *w, const char *key, const char *s);
/* Array of n scalars of type t packed back to back in v (little-endian host). */
void mp_gguf_w_arr(MpGgufWriter *w, const char *key, MpGgufType t, const void *v, uint64_t n);
void mp_gguf_w_arr_str(MpGgufWriter *w, const char *key, const char *const *s, uint64_t n);
/* Declares a tensor (ne innermost first); returns its byte size (0 on bad shape/type). */
size_t mp_gguf_w_tensor(MpGgufWriter *w, const char *name, uint32_t n_dims, const int64_t *ne, MpWType t);
/* Writes magic, version 3, counts, KVs, tensor infos and padding to the data start. */
int mp_gguf_w_header(MpGgufWriter *w, FILE *f, MpErr *e);
/* After writing a tensor's nbytes, pads with zeros to the alignment. */
int mp_gguf_w_pad(const MpGgufWriter *w, FILE *f, size_t nbytes, MpErr *e);

#endif
