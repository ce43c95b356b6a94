/* cuda_gemm.cu — matrix products through cuBLASLt and the reference kernel; see cuda_gemm.h.
 *
 * Row-major to cuBLAS's column-major: C [M, N] row-major is Cᵀ [N, M] column-major, and
 * Cᵀ = Bᵀ · Aᵀ. So cuBLASLt's first operand is our B (stored [K, N] row-major = [N, K]... seen
 * column-major as N x K, no transpose; or stored [N, K] row-major = K x N column-major, transposed)
 * and its second our A (stored [M, K] row-major = K x M column-major, no transpose): m = N, n = M,
 * k = K. A Linear layer (B = W [O, K]) is the "TN" product.
 */
#include "cuda/cuda_gemm.h"

#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>

#include "cuda/cuda_dev.cuh" /* bf16 bits, MPC_LAUNCHED */

/* ================================================================ the reference kernel */

#define REF_TILE 64 /* C tile per block: 64 x 64, 256 threads of 4 x 4 outputs */
#define REF_K 16    /* inner-dimension step through shared memory */

template <typename T> static __device__ __forceinline__ float ref_ld(const T *p, int64_t i);
template <> __device__ __forceinline__ float ref_ld<float>(const float *p, int64_t i) { return p[i]; }
template <> __device__ __forceinline__ float ref_ld<uint16_t>(const uint16_t *p, int64_t i) { return mpc_bf16_to_f32(p[i]); }

/* One 64 x 64 tile of C[blockIdx.z]: every output one fmaf chain over k ascending from 0 (the
 * tiles of k only decide when operands reach shared memory, never the order of a sum). */
template <typename T> static __global__ void __launch_bounds__(256) gemm_ref_kernel(MpCudaGemm g) {
    __shared__ float as[REF_K][REF_TILE + 1]; /* as[k][m] */
    __shared__ float bs[REF_K][REF_TILE + 1]; /* bs[k][n] */
    const T *A = (const T *)g.a + (int64_t)blockIdx.z * g.stride_a;
    const T *B = (const T *)g.b + (int64_t)blockIdx.z * g.stride_b;
    float *C = g.c + (int64_t)blockIdx.z * g.stride_c;
    const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
    const int64_t m0 = (int64_t)blockIdx.y * REF_TILE, n0 = (int64_t)blockIdx.x * REF_TILE;
    float acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int64_t k0 = 0; k0 < g.K; k0 += REF_K) {
        for (int e = threadIdx.x; e < REF_TILE * REF_K; e += 256) { /* k fastest: rows of A are contiguous in k */
            const int mm = e / REF_K, kk = e % REF_K;
            const int64_t m = m0 + mm, k = k0 + kk;
            as[kk][mm] = m < g.M && k < g.K ? ref_ld(A, m * g.lda + k) : 0.0f;
        }
        for (int e = threadIdx.x; e < REF_TILE * REF_K; e += 256) {
            const int nn = g.b_t ? e / REF_K : e % REF_TILE, kk = g.b_t ? e % REF_K : e / REF_TILE;
            const int64_t n = n0 + nn, k = k0 + kk;
            bs[kk][nn] = n < g.N && k < g.K ? ref_ld(B, g.b_t ? n * g.ldb + k : k * g.ldb + n) : 0.0f;
        }
        __syncthreads();
        const int kmax = g.K - k0 < REF_K ? (int)(g.K - k0) : REF_K; /* no step past K: fmaf(0,0,-0) is +0 */
        for (int kk = 0; kk < kmax; kk++)
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int j = 0; j < 4; j++) acc[i][j] = fmaf(as[kk][ty * 4 + i], bs[kk][tx * 4 + j], acc[i][j]);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int64_t m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (m < g.M && n < g.N) C[m * g.ldc + n] = g.alpha == 1.0f ? acc[i][j] : acc[i][j] * g.alpha;
        }
}

extern "C" int mp_cuda_gemm_ref(MpCuda *c, const MpCudaGemm *g) {
    if (g->M <= 0 || g->N <= 0 || g->batch <= 0) return 0;
    const dim3 grid((unsigned)((g->N + REF_TILE - 1) / REF_TILE), (unsigned)((g->M + REF_TILE - 1) / REF_TILE), (unsigned)g->batch);
    if (g->type == MP_CUDA_BF16) gemm_ref_kernel<uint16_t><<<grid, 256, 0, c->stream>>>(*g);
    else gemm_ref_kernel<float><<<grid, 256, 0, c->stream>>>(*g);
    return MPC_LAUNCHED(c, "the reference GEMM") ? 0 : -1;
}

/* ================================================================ f32 -> bf16 */

static __global__ void to_bf16_kernel(uint16_t *dst, const float *src, int64_t n) {
    MPC_FOR(i, n) dst[i] = mpc_bf16_from_f32(src[i]);
}

extern "C" void mp_cuda_to_bf16(MpCuda *c, uint16_t *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    to_bf16_kernel<<<mpc_grid(n, 256), 256, 0, c->stream>>>(dst, src, n);
    MPC_LAUNCHED(c, "f32 to bf16");
}

static __global__ void to_bf16_rows_kernel(uint16_t *dst, const float *src, int64_t lds, int64_t T, int64_t K) {
    MPC_FOR(i, T * K) dst[i] = mpc_bf16_from_f32(src[(i / K) * lds + i % K]);
}

extern "C" void mp_cuda_to_bf16_rows(MpCuda *c, uint16_t *dst, const float *src, int64_t lds, int64_t T, int64_t K) {
    if (T <= 0 || K <= 0) return;
    to_bf16_rows_kernel<<<mpc_grid(T * K, 256), 256, 0, c->stream>>>(dst, src, lds, T, K);
    MPC_LAUNCHED(c, "f32 to bf16 rows");
}

/* ================================================================ cuBLASLt plans */

#define PLAN_SLOTS 128

/* A product's descriptor, its three layouts (C is D) and the algorithm the heuristic gave. */
typedef struct Plan {
    uint64_t key; /* 0: empty */
    int ok;       /* 0: cuBLASLt offered nothing: the reference kernel runs it */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} Plan;

typedef struct Plans {
    Plan p[PLAN_SLOTS];
    int next; /* the slot reused when all are taken */
} Plans;

/* the largest power of two (<= 256) dividing the address: cuBLASLt picks kernels by it */
static uint32_t plan_align(const void *p) {
    uint32_t a = 256;
    while (a > 1 && ((uintptr_t)p % a)) a /= 2;
    return a;
}

/* The alignment every matrix of a batch keeps: the base's and, with batches, the stride's. */
static uint32_t plan_align_batch(const void *p, int64_t stride, int batch, size_t elem) {
    const uint32_t a = plan_align(p);
    if (batch <= 1 || stride == 0) return a;
    const uint32_t s = plan_align((const void *)(uintptr_t)((uint64_t)stride * elem));
    return a < s ? a : s;
}

/* the alignments of a, b, c (as cuBLASLt's operands B, A, C) */
static void plan_aligns(const MpCudaGemm *g, uint32_t *aa, uint32_t *ab, uint32_t *ac) {
    const size_t el = g->type == MP_CUDA_BF16 ? 2 : 4;
    *aa = plan_align_batch(g->a, g->stride_a, g->batch, el);
    *ab = plan_align_batch(g->b, g->stride_b, g->batch, el);
    *ac = plan_align_batch(g->c, g->stride_c, g->batch, sizeof(float));
}

static uint64_t plan_key(const MpCudaGemm *g) {
    uint32_t aa, ab, ac;
    plan_aligns(g, &aa, &ab, &ac);
    const int64_t f[] = {g->M, g->N, g->K, g->lda, g->ldb, g->ldc, g->stride_a, g->stride_b, g->stride_c, g->batch, g->b_t,
                         g->type, aa, ab, ac};
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        h ^= (uint64_t)f[i];
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

static void plan_free(Plan *p) {
    if (p->lc) cublasLtMatrixLayoutDestroy(p->lc);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

/* a column-major layout rows x cols (ld), batched when batch > 1 */
static cublasStatus_t plan_layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int batch,
                                  int64_t stride) {
    cublasStatus_t s = cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, ld);
    if (s == CUBLAS_STATUS_SUCCESS && batch > 1) {
        const int32_t b = batch;
        s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, sizeof b);
        if (s == CUBLAS_STATUS_SUCCESS)
            s = cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride);
    }
    return s;
}

/* The heuristic's first algorithm for g (ok = 0 when it has none). */
static cublasStatus_t plan_make(MpCuda *c, const MpCudaGemm *g, Plan *p) {
    const cudaDataType_t t = g->type == MP_CUDA_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    const cublasOperation_t ta = g->b_t ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasStatus_t s = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = g->b_t ? plan_layout(&p->la, t, g->K, g->N, g->ldb, g->batch, g->stride_b)
                   : plan_layout(&p->la, t, g->N, g->K, g->ldb, g->batch, g->stride_b);
    if (s == CUBLAS_STATUS_SUCCESS) s = plan_layout(&p->lb, t, g->K, g->M, g->lda, g->batch, g->stride_a);
    if (s == CUBLAS_STATUS_SUCCESS) s = plan_layout(&p->lc, CUDA_R_32F, g->N, g->M, g->ldc, g->batch, g->stride_c);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    cublasLtMatmulPreference_t pref;
    s = cublasLtMatmulPreferenceCreate(&pref);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    const uint64_t ws = MP_CUDA_WORKSPACE;
    uint32_t aa, ab, ac;
    plan_aligns(g, &aa, &ab, &ac);
    const uint32_t al[4] = {ab, aa, ac, ac}; /* cuBLASLt's A is our b, its B our a */
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al[0], sizeof al[0]);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al[1], sizeof al[1]);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al[2], sizeof al[2]);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al[3], sizeof al[3]);
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    s = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)c->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res, &n);
    cublasLtMatmulPreferenceDestroy(pref);
    p->ok = s == CUBLAS_STATUS_SUCCESS && n > 0;
    if (p->ok) p->algo = res.algo;
    return s == CUBLAS_STATUS_NOT_SUPPORTED ? CUBLAS_STATUS_SUCCESS : s; /* not supported: the reference runs it */
}

/* The cached plan of g, made when first seen; NULL when it cannot be made (latched in c). */
static Plan *plan_get(MpCuda *c, const MpCudaGemm *g) {
    Plans *ps = (Plans *)c->plans;
    if (!ps) {
        ps = (Plans *)calloc(1, sizeof *ps);
        if (!ps) {
            mp_cuda_ok(c, cudaErrorMemoryAllocation, "the GEMM plan cache");
            return NULL;
        }
        c->plans = ps;
    }
    const uint64_t key = plan_key(g);
    for (int i = 0; i < PLAN_SLOTS; i++)
        if (ps->p[i].key == key) return &ps->p[i];
    int slot = -1;
    for (int i = 0; i < PLAN_SLOTS && slot < 0; i++)
        if (!ps->p[i].key) slot = i;
    if (slot < 0) { /* all taken: reuse one, round robin */
        slot = ps->next;
        ps->next = (ps->next + 1) % PLAN_SLOTS;
        plan_free(&ps->p[slot]);
    }
    Plan *p = &ps->p[slot];
    const cublasStatus_t s = plan_make(c, g, p);
    if (s != CUBLAS_STATUS_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "cuBLASLt plan of a %lld x %lld x %lld product: %s", (long long)g->M, (long long)g->N,
                 (long long)g->K, cublasLtGetStatusString(s));
        mp_cuda_ok(c, cudaErrorUnknown, what);
        plan_free(p);
        return NULL;
    }
    p->key = key;
    return p;
}

extern "C" void mp_cuda_gemm_forget(MpCuda *c) {
    Plans *ps = (Plans *)c->plans;
    if (!ps) return;
    for (int i = 0; i < PLAN_SLOTS; i++)
        if (ps->p[i].key) plan_free(&ps->p[i]);
    free(ps);
    c->plans = NULL;
}

/* ================================================================ the product */

extern "C" int mp_cuda_gemm(MpCuda *c, const MpCudaGemm *g) {
    if (g->M <= 0 || g->N <= 0 || g->batch <= 0) return 0;
    if (c->gemm_ref || g->K == 0) return mp_cuda_gemm_ref(c, g); /* K = 0: zeros, as the CPU writes */
    Plan *p = plan_get(c, g);
    if (!p) return -1;
    if (!p->ok) return mp_cuda_gemm_ref(c, g);
    const float beta = 0.0f;
    const cublasStatus_t s = cublasLtMatmul((cublasLtHandle_t)c->lt, p->op, &g->alpha, g->b, p->la, g->a, p->lb, &beta, g->c, p->lc,
                                            g->c, p->lc, &p->algo, c->ws, MP_CUDA_WORKSPACE, c->stream);
    if (s != CUBLAS_STATUS_SUCCESS) {
        char what[160];
        snprintf(what, sizeof what, "cuBLASLt %lld x %lld x %lld product: %s", (long long)g->M, (long long)g->N, (long long)g->K,
                 cublasLtGetStatusString(s));
        mp_cuda_ok(c, cudaErrorUnknown, what);
        return -1;
    }
    return 0;
}
