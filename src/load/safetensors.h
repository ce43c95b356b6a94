/* safetensors.h — reader of one safetensors file (spec: ../shared/docs/model-formats.md §1).
 *
 * Implements: header parsing and full validation the way the reference reader does it
 * (u64 header length <= 100 MB and inside the file, header starts with '{', JSON object of
 * {dtype, shape, data_offsets} per tensor plus an optional string-valued "__metadata__",
 * no duplicate names, byte size == prod(shape) * dtype size, offsets contiguous from 0 without
 * holes or overlap, data end == file size). Every dtype name of the format is recognised; the
 * loader only serves F32, F16 and BF16 (others are reported by name when used).
 * Does not: read tensor bytes (callers index into the mapping), or handle shards (model.c).
 * Tested by: tests/test_load.c (malformed cases), tests/fuzz/fuzz_safetensors.c.
 */
#ifndef MP_LOAD_SAFETENSORS_H
#define MP_LOAD_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"     /* MpErr */
#include "load/mapfile.h" /* MpLoadMap */
#include "load/quant.h"   /* MpWType */

#define MP_ST_MAX_HEADER 100000000u
#define MP_ST_MAX_DIMS 8

typedef struct MpStTensor {
    char *name;                   /* owned */
    char dtype[16];               /* as spelled in the header ("BF16") */
    int supported;                /* 1 if dtype is F32/F16/BF16 (then type is valid) */
    MpWType type;
    int ndim;                     /* 0..MP_ST_MAX_DIMS */
    int64_t shape[MP_ST_MAX_DIMS];
    uint64_t begin, end;          /* data_offsets, relative to the data section */
    const uint8_t *data;          /* borrowed: mapping + data_start + begin */
} MpStTensor;

typedef struct MpSt {
    char path[4096];
    MpLoadMap map;                /* the whole file */
    size_t data_start;            /* 8 + header length */
    MpStTensor *t;                /* [n] owned, in header order */
    size_t n;
} MpSt;

/* Parses buf[n] (borrowed for the lifetime of st). path names the file in messages. */
int mp_st_parse(MpSt *st, const uint8_t *buf, size_t n, const char *path, MpErr *e);
/* mmaps path and parses it. */
int mp_st_open(MpSt *st, const char *path, MpErr *e);
void mp_st_free(MpSt *st); /* accepts a zeroed struct */
const MpStTensor *mp_st_find(const MpSt *st, const char *name);

#endif
