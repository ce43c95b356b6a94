/* cuda_ew.h — the CUDA plugin's elementwise kernels and the overflow reduction: whole tensors in
 * device memory, one launch each, queued on the context's stream.
 *
 * Implements (the CPU's formula of fwd_kernels.c for each):
 *   - exact ones, the CPU's bits (compiled with --fmad=false: nothing contracted): bf16 rounding
 *     of rows (mp_fwd_bf16_round's integer recipe), x · s, y += bias per row, x += y, copy, zero,
 *     amax (the largest |x| as IEEE bits without the sign: an integer max, so any order gives the
 *     same answer; >= 0x7f800000 flags a NaN or an infinity);
 *   - libm ones, within a few ulp of the CPU's (CUDA's expf/tanhf/erf against glibc's): SwiGLU
 *     g / (1 + e^-g) · u, GeGLU with gelu_tanh in f32, exact GELU in double, soft-cap
 *     cap · tanh(x / cap).
 * Does not: synchronise (amax copies its answers to the host after the launch, on the stream:
 * the caller waits, mp_cuda_sync).
 * Tested by: tests/cuda/test_cuda.c (each against the CPU kernel: bit for bit where exact, else
 * within 4 ulp-scale relative error; odd sizes, NaN and inf for amax).
 *
 * Shape legend: n elements, rows x n with row stride ld.
 */
#ifndef MP_CUDA_EW_H
#define MP_CUDA_EW_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

void mp_cuda_bf16_round(MpCuda *c, float *x, int64_t ld, int64_t rows, int64_t n);
void mp_cuda_swiglu(MpCuda *c, float *out, const float *g, const float *u, int64_t n);
void mp_cuda_geglu(MpCuda *c, float *out, const float *g, const float *u, int64_t n);
void mp_cuda_gelu(MpCuda *c, float *out, const float *x, int64_t n);
void mp_cuda_softcap(MpCuda *c, float *x, int64_t n, float cap);
void mp_cuda_scale(MpCuda *c, float *x, int64_t n, float s);
/* y [rows, n] (row stride ld) += b [n] */
void mp_cuda_add_bias(MpCuda *c, float *y, int64_t ld, const float *b, int64_t n, int64_t rows);
void mp_cuda_add(MpCuda *c, float *x, const float *y, int64_t n);
void mp_cuda_copy(MpCuda *c, float *dst, const float *src, int64_t n);
void mp_cuda_zero(MpCuda *c, float *x, int64_t n);

/* One tensor of amax's list. */
typedef struct MpCudaSpan {
    const float *x; /* [n] device */
    int64_t n;
} MpCudaSpan;
/* out [n_spans] (device scratch, uint32) = the largest |x| of each span as bits without the sign
 * (0 for an empty span); then copied to host_out [n_spans] on the stream (host_out: pinned or
 * pageable host memory; valid once the stream is synchronised). */
void mp_cuda_amax(MpCuda *c, uint32_t *host_out, uint32_t *out, const MpCudaSpan *spans, int n_spans);

#ifdef __cplusplus
}
#endif

#endif
