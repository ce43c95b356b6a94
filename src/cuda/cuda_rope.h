/* cuda_rope.h — the CUDA plugin's RoPE: the cos/sin table of a run and the preparation of one
 * layer's q, k and v for the attention (q/k norms, rotation, the keys and values laid out per
 * key/value head).
 *
 * Implements:
 *   - mp_cuda_rope_table: cos, sin [T, R/2] = (float)cos/sin((double)((float)pos · inv_freq[i]))
 *     · (float)attn, as mp_fwd_rope_table rounds them (the angle an f32 product, as HF). Every
 *     variant the CPU has reaches here as inv_freq [R/2] and attn: llama3 / linear / longrope
 *     scaling and gemma3's local base are the loader's inv_freq (and longrope's attention factor
 *     attn), partial rotary is R < HS, a NoPE layer or --no-rope passes no table;
 *   - mp_cuda_qk_prepare (MpCudaQKV): per-head q/k RMSNorm (or one over the whole row: olmo2), HF
 *     rotate-half on the first R dims of every head (each product rounded, then added: the CPU's
 *     bits for the same table), in place, rows [t0, T); then the keys and values copied into their
 *     per-kv-head layout [NKV, ldt, HS] (the attention's GEMM operands; a key/value cache keeps
 *     ldt = max_seq rows per head).
 * Does not: build inv_freq (the loader does, load/model.c).
 * Tested by: tests/cuda/test_cuda.c (the table and the rotation against mp_fwd_rope_table /
 * mp_fwd_rope; qk_prepare against the CPU's sequence of rmsnorm and rope, R < HS, t0 > 0).
 *
 * Shape legend: T tokens, R rotary dims (even, <= HS), HS head dim, NH query heads, NKV key/value
 * heads, ldt rows per head of the packed keys and values.
 */
#ifndef MP_CUDA_ROPE_H
#define MP_CUDA_ROPE_H

#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

/* cos, sin [T, R/2] (device); inv_freq [R/2] (device). */
void mp_cuda_rope_table(MpCuda *c, float *cos, float *sin, const float *inv_freq, int R, int T, double attn);

typedef struct MpCudaQKV {
    float *q;                     /* [T, NH*HS] rows [t0, T), in place */
    float *k;                     /* [T, NKV*HS] rows [t0, T), in place */
    const float *v;               /* [T, NKV*HS] */
    float *kh;                    /* [NKV, ldt, HS]: rows [t0, T) of each kv head's keys written */
    float *vh;                    /* [NKV, ldt, HS]: the values likewise */
    const float *q_norm, *k_norm; /* [HS] per head, or [NH*HS] / [NKV*HS] when norm_whole; NULL: none */
    const float *cos, *sin;       /* [>= T, R/2] by position; NULL: no rotation */
    int t0, T, ldt, NH, NKV, HS, R;
    int norm_whole;
    double eps;
} MpCudaQKV;

void mp_cuda_qk_prepare(MpCuda *c, const MpCudaQKV *a);

#ifdef __cplusplus
}
#endif

#endif
