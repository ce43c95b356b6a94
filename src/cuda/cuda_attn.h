/* cuda_attn.h — the CUDA plugin's attention of one layer, all heads at once: scores through
 * batched GEMMs, the mask / soft-cap / window / finiteness pass, the head-sum map in double, the
 * softmax, and the mix p · v through batched GEMMs.
 *
 * Implements, for rows [t0, T) of a layer (query head h reading kv head h / (NH/NKV)):
 *   - mp_cuda_attn_scores: s[h, i, j] = (q_i · k_j) · scale for every key j < T (cuda_gemm; the
 *     query heads sharing a kv head are one batch over the shared keys: NH/NKV launches), then per
 *     visible entry (j < i + 1 causal, j < T without the mask) the check (the first non-finite
 *     visible score before cap and window: the smallest row, then head, as i·NH + h, an integer
 *     atomicMin, so no order matters), gemma2's soft-cap cap · tanh(s / cap), and -inf for the
 *     keys a sliding window of W hides (i - j >= W; without the causal mask also j - i >= W) and
 *     those the causal mask hides;
 *   - mp_cuda_attn_headsum: hs [T, T] doubles = Σ_h (double) s[h, i, j] in ascending h from 0.0
 *     (mp_fwd_attn_headsum's order: the CPU's bits for the same scores) for j < i + 1 (causal) or
 *     j < T, rows [t0, T); the rest not written;
 *   - mp_cuda_attn_softmax: each row softmax over its visible keys (the maximum subtracted, expf,
 *     the sum in a fixed tree of the block, each entry divided by it), 0 for keys [n_i, T);
 *   - mp_cuda_attn_mix: o [T, NH*HS] rows [t0, T) = p · v per head (batched GEMMs over all T keys:
 *     the masked ones are exact zeros).
 * Precision: the GEMMs of the attention run in f32 (no TF32) unless the caller asks for
 * MP_CUDA_BF16 operands (a: the caller converts; not used by the ops instance today).
 * Does not: hold the taps' consumers (the ops instance calls them between these steps).
 * Tested by: tests/cuda/test_cuda.c (each step against mp_fwd_attn_scores_ref, mp_fwd_attn_headsum,
 * mp_fwd_softmax_row, mp_fwd_attn_mix on GQA shapes with window, soft-cap, bidirectional, t0 > 0,
 * and a planted NaN found at its (row, head)).
 *
 * Shape legend: T tokens, NH query heads, NKV key/value heads, HS head dim, ldt rows of the
 * per-head keys and values and of the scores' rows and columns (T, or a key/value cache's).
 */
#ifndef MP_CUDA_ATTN_H
#define MP_CUDA_ATTN_H

#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

typedef struct MpCudaAttn {
    float *o;        /* [T, NH*HS] rows [t0, T) written by mix */
    float *s;        /* [NH, ldt, ldt]: rows [t0, T) get the scores, then the probabilities */
    const float *q;  /* [T, NH*HS] */
    const float *kh; /* [NKV, ldt, HS] keys of positions [0, T) */
    const float *vh; /* [NKV, ldt, HS] values of positions [0, T) */
    int t0, T, ldt, NH, NKV, HS;
    int causal;      /* 1: keys j > i masked */
    int window;      /* > 0: a sliding window of this many keys; 0 none */
    float scale;     /* the scores' factor */
    float softcap;   /* > 0: gemma2's soft-cap of the scores */
} MpCudaAttn;

/* Scores and their mask. check (device int, or NULL): lowered to i·NH + h of the first
 * non-finite visible score (the caller sets it to INT_MAX first). 0, or -1 (latched in c). */
int mp_cuda_attn_scores(MpCuda *c, const MpCudaAttn *a, int *check);
/* hs [T, T] doubles (device, row stride T): rows [t0, T) of the head-sum map of a->s. */
void mp_cuda_attn_headsum(MpCuda *c, double *hs, const MpCudaAttn *a);
/* Scores -> probabilities in place, rows [t0, T). */
void mp_cuda_attn_softmax(MpCuda *c, const MpCudaAttn *a);
/* o = p · v, rows [t0, T). 0, or -1 (latched in c). */
int mp_cuda_attn_mix(MpCuda *c, const MpCudaAttn *a);

#ifdef __cplusplus
}
#endif

#endif
