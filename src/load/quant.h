/* quant.h — weight element types of safetensors and GGUF, and their conversion to f32.
 *
 * Implements: the type table (block size, bytes per block, name) for F32, F16, BF16 and the ggml
 * block formats Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K; scalar f16/bf16 <-> f32
 * conversions (round to nearest even); dequantisation of whole blocks to f32 (spec:
 * ../shared/docs/model-formats.md §3.2); quantisation f32 -> every one of these types for the
 * test-model writer (mkmodel): simple min/max grids, valid blocks, not error-optimal like
 * llama.cpp's quantize (the reader is what must match ggml; the writer only needs valid files).
 * Does not: know about files or tensors (safetensors.h, gguf.h), or validate anything beyond
 * "this type id is known" — callers check that element counts are whole blocks.
 * This is the one place where dtype conversion lives (house style §6).
 * Tested by: tests/test_load_quant.c (hand-built blocks with hand-written expected values).
 */
#ifndef MP_LOAD_QUANT_H
#define MP_LOAD_QUANT_H

#include <stddef.h>
#include <stdint.h>

/* Values are the ggml_type ids, so GGUF tensor infos map directly; new values only appended. */
typedef enum MpWType {
    MP_WT_F32 = 0,
    MP_WT_F16 = 1,
    MP_WT_Q4_0 = 2,
    MP_WT_Q4_1 = 3,
    MP_WT_Q5_0 = 6,
    MP_WT_Q5_1 = 7,
    MP_WT_Q8_0 = 8,
    MP_WT_Q2_K = 10,
    MP_WT_Q3_K = 11,
    MP_WT_Q4_K = 12,
    MP_WT_Q5_K = 13,
    MP_WT_Q6_K = 14,
    MP_WT_BF16 = 30,
} MpWType;

#define MP_QK_K 256 /* elements per K-quant super-block */

/* 1 if t is one of the types above (and so has a dequantiser), else 0. */
int mp_quant_known(uint32_t t);
/* Elements per block (1 for float types), bytes per block; 0 for unknown types. */
size_t mp_quant_block_elems(MpWType t);
size_t mp_quant_block_bytes(MpWType t);
/* "F32", "Q4_K", ...; "?" for unknown ids. */
const char *mp_quant_name(MpWType t);
/* Case-insensitive parse of a name ("q8_0", "bf16"); MP_OK/MP_ERR. */
int mp_quant_parse(const char *s, MpWType *out);
/* Bytes of n elements: MP_ERR when n is not a whole number of blocks or the product overflows. */
int mp_quant_row_bytes(MpWType t, uint64_t n, size_t *out);

float mp_f16_to_f32(uint16_t h);
uint16_t mp_f32_to_f16(float f);   /* round to nearest even; overflow -> inf; NaN kept */
float mp_bf16_to_f32(uint16_t h);
uint16_t mp_f32_to_bf16(float f);  /* round to nearest even; NaN kept quiet */

/* dst[n] = values of the n elements stored at src (n a multiple of the block size; checked by
 * the caller). src need not be aligned; values are little-endian. */
void mp_quant_dequant(float *dst, const void *src, MpWType t, size_t n);
/* dst = encoding of src[n] in type t (n a multiple of the block size). Returns MP_OK, or MP_ERR
 * for an unknown type. */
int mp_quant_encode(void *dst, const float *src, MpWType t, size_t n);
/* 1 if mp_quant_encode supports t. */
int mp_quant_can_encode(MpWType t);

#endif
