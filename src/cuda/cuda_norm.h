/* cuda_norm.h — the CUDA plugin's row norms: RMSNorm (HF: x · rsqrt(mean(x²) + eps) · w) and
 * LayerNorm with bias (GPT-NeoX), over rows of n, one block of threads per row.
 *
 * Implements the CPU's formulas (mp_fwd_rmsnorm, mp_fwd_layernorm): the mean of x² (LayerNorm: the
 * mean, then the mean of (x - mean)²) in double, 1 / sqrt(· + eps) in double rounded once to f32,
 * then each element x · inv (· w) (+ b) in f32. The double sums are a fixed tree over the block
 * (mpc_block_sum) instead of the CPU's sequential order: the same bits run after run, within a few
 * ulp of the CPU's inv.
 * Does not: fuse the bf16 rounding of the next matmul's input (the ops instance calls it).
 * Tested by: tests/cuda/test_cuda.c (against the CPU kernels, rows of odd sizes, w and b NULL).
 *
 * Shape legend: rows x n, contiguous (row stride n).
 */
#ifndef MP_CUDA_NORM_H
#define MP_CUDA_NORM_H

#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

/* y [rows, n] = RMSNorm(x [rows, n]) · w [n] (w NULL: no weight); y may alias x. */
void mp_cuda_rmsnorm(MpCuda *c, float *y, const float *x, const float *w, int64_t rows, int n, double eps);
/* y [rows, n] = LayerNorm(x) · w + b (w, b may be NULL); y may alias x. */
void mp_cuda_layernorm(MpCuda *c, float *y, const float *x, const float *w, const float *b, int64_t rows, int n, double eps);

#ifdef __cplusplus
}
#endif

#endif
