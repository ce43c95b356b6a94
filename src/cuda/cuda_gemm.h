/* cuda_gemm.h — the CUDA plugin's matrix products, in row-major terms: the Linear layers
 * (y = x · Wᵀ), the attention scores (q · kᵀ, batched over the query heads of one key/value head)
 * and the mix (p · v).
 *
 * Implements:
 *   - mp_cuda_gemm: C[b] [M, N] = alpha · A[b] [M, K] · B[b] (B given as [K, N], or as [N, K] and
 *     transposed), strided batches (a stride of 0 shares one operand across the batch), f32 out,
 *     f32 accumulation; inputs f32 (full f32 products: no TF32) or bf16. Through cuBLASLt, one plan
 *     per shape cached in the context (the heuristic's first algorithm for the operands' alignment;
 *     the same GPU and shapes give the same algorithm, so the same bits run after run);
 *   - the reference kernel (mp_cuda_gemm_ref, and every GEMM when MASKPOS_CUDA_GEMM=ref): one
 *     sequential fmaf chain per output in ascending k from 0, then · alpha unless alpha is 1 — the
 *     order of the CPU's mp_fwd_matmul_ref and mp_fwd_attn_scores_ref, so it gives their bits
 *     (tiled in shared memory, which changes no element's order);
 *   - f32 -> bf16 conversion of an operand (round to nearest even; the values of a bf16-compute
 *     Linear input are bf16 already, so it is exact there).
 * Does not: own weights (the ops instance does), or choose f32 or bf16 (the compute mode does).
 * Tested by: tests/cuda/test_cuda.c (cuBLASLt against the reference kernel and the CPU's
 * mp_fwd_matmul_ref, f32 and bf16, odd shapes, batches with a shared operand).
 *
 * Shape legend: M rows of C, N columns of C, K inner size, b batch index.
 */
#ifndef MP_CUDA_GEMM_H
#define MP_CUDA_GEMM_H

#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum MpCudaType {
    MP_CUDA_F32 = 0, /* f32 operands, f32 products and sums */
    MP_CUDA_BF16,    /* bf16 operands (uint16 bits), f32 sums */
} MpCudaType;

typedef struct MpCudaGemm {
    int64_t M, N, K;
    const void *a;  /* [M, K] row stride lda, of type `type` */
    const void *b;  /* [K, N] row stride ldb (b_t 0), or [N, K] row stride ldb (b_t 1), of type `type` */
    float *c;       /* [M, N] row stride ldc, f32 */
    int64_t lda, ldb, ldc;
    int64_t stride_a, stride_b, stride_c; /* elements between batches (0: the same matrix) */
    int batch;      /* >= 1 */
    int b_t;        /* 1: b holds Bᵀ ([N, K]) */
    int type;       /* MpCudaType of a and b */
    float alpha;
} MpCudaGemm;

/* Queues g on c's stream: through cuBLASLt, or the reference kernel when c->gemm_ref or when
 * cuBLASLt offers no algorithm. 0, or -1 with the failure latched in c. */
int mp_cuda_gemm(MpCuda *c, const MpCudaGemm *g);
/* The reference kernel alone. */
int mp_cuda_gemm_ref(MpCuda *c, const MpCudaGemm *g);
/* dst [n] bf16 bits = src [n] rounded to nearest even (NaN stays NaN), queued on c's stream. */
void mp_cuda_to_bf16(MpCuda *c, uint16_t *dst, const float *src, int64_t n);
/* dst [T, K] bf16 bits (contiguous) = rows of src [T, K] (row stride lds), rounded likewise. */
void mp_cuda_to_bf16_rows(MpCuda *c, uint16_t *dst, const float *src, int64_t lds, int64_t T, int64_t K);
/* Frees the cached plans (mp_cuda_close). */
void mp_cuda_gemm_forget(MpCuda *c);

#ifdef __cplusplus
}
#endif

#endif
