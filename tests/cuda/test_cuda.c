/* test_cuda.c — the CUDA plugin's kernels (src/cuda) against the CPU's (src/model/fwd_kernels.c,
 * the probe's accumulator), on a GPU. Built by make CUDA=1 (src/cuda/cuda.mk), linked with the
 * kernels directly and libmaskpos.a for the references. On a machine without a GPU it prints why
 * and skips every test (tests/expected_skips.txt: no-cuda-device).
 *
 * What is held, and how tightly (normalised error: max |gpu - cpu| / max |cpu|):
 *   - bit for bit: the reference GEMM kernel (f32 and bf16) against mp_fwd_matmul_ref; bf16
 *     rounding, scale, add, add_bias, amax; the head-sum map; the RoPE rotation for the same
 *     table; the key/value packing; every sum of the probe's accumulator but entropy (the block
 *     test's sign-flipped sums and the squared norms of residue and centred map included);
 *   - cuBLASLt products (f32, bf16 in / f32 accumulate, a batch sharing one operand, both operand
 *     layouts): 1e-5, and the same bytes on a second run;
 *   - SwiGLU, GeGLU, GELU, soft-cap, norms, the RoPE table, softmax: 1e-6 (a few ulp of libm);
 *   - attention scores (f32 GEMM, GQA, soft-cap, window, bidirectional, t0 > 0): 1e-5 and -inf
 *     exactly where masked; a planted NaN reported at its (row, head); the mix: 1e-5;
 *   - the accumulator's entropy: 1e-12 relative;
 *   - end to end, every dense family mkmodel writes (and the MoE ones), HF and GGUF (f16, q8_0):
 *     `probe --device cuda` against `probe` on the CPU: f32 maps (scores, per head, probabilities)
 *     within 1e-5 of max |score|, bf16 maps within the CPU bf16 bounds of docs/speed.md (max 2e-3,
 *     mean 2e-5 of max |score|, against the CPU's bf16), the same bytes on a second GPU run;
 *     `logits --device cuda` log-probs within 1e-4; a run checkpointed on the CPU and resumed on
 *     the GPU (--checkpoint-every, --resume) within 1e-5 of the CPU's whole run. The binary is
 *     $MASKPOS_BIN, else this build's.
 * Run: build/tests/test_cuda (seconds on a GPU; scripts/device_check.sh runs it there).
 */
#include <cuda_runtime_api.h>

#include "cuda/cuda_acc.h"     /* the device accumulator */
#include "cuda/cuda_attn.h"    /* attention steps */
#include "cuda/cuda_ctx.h"     /* MpCuda */
#include "cuda/cuda_ew.h"      /* elementwise, amax */
#include "cuda/cuda_gemm.h"    /* GEMMs */
#include "cuda/cuda_norm.h"    /* norms */
#include "cuda/cuda_rope.h"    /* RoPE, qk_prepare */
#include "model/fwd_kernels.h" /* the CPU references */
#include "core/npy.h"         /* reading the runs' maps */
#include "model/probe.h"       /* MpProbeAcc: the CPU's accumulator */
#include "testutil.h"

static MpCuda ctx;
static int have_gpu;
static char no_gpu_why[512];

#define NEED_GPU()                                                                                 \
    do {                                                                                           \
        if (!have_gpu) {                                                                           \
            printf("no CUDA device here (%s)\n", no_gpu_why);                                      \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* ================================================================ helpers */

static void *dput(const void *h, size_t bytes) {
    void *d = NULL;
    if (cudaMalloc(&d, bytes ? bytes : 4) != cudaSuccess) fail_msg("cudaMalloc %zu", bytes);
    if (h && bytes) assert_int_equal(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
}

static void dsync(void) {
    char why[512];
    if (mp_cuda_sync(&ctx, why, sizeof why) != 0) fail_msg("%s", why);
}

static void dget(void *h, const void *d, size_t bytes) {
    dsync();
    assert_int_equal(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
}

static float *fput(const float *h, size_t n) { return dput(h, n * sizeof(float)); }
static float *fnew(size_t n) { return dput(NULL, n * sizeof(float)); }
static void fget(float *h, const float *d, size_t n) { dget(h, d, n * sizeof(float)); }
static float *hnew(size_t n) { return calloc(n ? n : 1, sizeof(float)); }

static float *filled(size_t n, uint32_t seed, float div) {
    float *x = hnew(n);
    mp_test_fill(x, n, seed, div);
    return x;
}

/* max |a - b| / max |b| over finite b; -inf and NaN must sit at the same places */
static double norm_err(const float *a, const float *b, size_t n, const char *what) {
    double m = 0, d = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(b[i]) || !isfinite(a[i])) {
            if (memcmp(&a[i], &b[i], sizeof a[i]) && !(isnan(a[i]) && isnan(b[i])))
                fail_msg("%s: entry %zu is %g on the GPU, %g on the CPU", what, i, a[i], b[i]);
            continue;
        }
        m = fmax(m, fabs(b[i]));
        d = fmax(d, fabs((double)a[i] - b[i]));
    }
    return m > 0 ? d / m : d;
}

static void same_bits(const void *a, const void *b, size_t bytes, const char *what) {
    if (memcmp(a, b, bytes)) {
        const unsigned char *x = a, *y = b;
        size_t i = 0;
        while (x[i] == y[i]) i++;
        fail_msg("%s: bytes differ from byte %zu of %zu", what, i, bytes);
    }
}

static void bf16_values(float *x, size_t n) { mp_fwd_bf16_round(x, n); }

/* ================================================================ GEMM */

/* y = x · Wᵀ [T, O] on the GPU by `gemm` (type f32 or bf16) */
static void gpu_linear(float *y, const float *x, const float *w, int64_t T, int64_t O, int64_t K, int type,
                       int (*gemm)(MpCuda *, const MpCudaGemm *)) {
    void *dx, *dw;
    if (type == MP_CUDA_BF16) {
        float *fx = fput(x, (size_t)(T * K)), *fw = fput(w, (size_t)(O * K));
        dx = dput(NULL, (size_t)(T * K) * 2);
        dw = dput(NULL, (size_t)(O * K) * 2);
        mp_cuda_to_bf16(&ctx, dx, fx, T * K);
        mp_cuda_to_bf16(&ctx, dw, fw, O * K);
        dsync();
        cudaFree(fx);
        cudaFree(fw);
    } else {
        dx = fput(x, (size_t)(T * K));
        dw = fput(w, (size_t)(O * K));
    }
    float *dy = fnew((size_t)(T * O));
    MpCudaGemm g = {.M = T, .N = O, .K = K, .a = dx, .b = dw, .c = dy, .lda = K, .ldb = K, .ldc = O, .batch = 1, .b_t = 1,
                    .type = type, .alpha = 1.0f};
    assert_int_equal(gemm(&ctx, &g), 0);
    fget(y, dy, (size_t)(T * O));
    cudaFree(dx);
    cudaFree(dw);
    cudaFree(dy);
}

static void test_gemm_reference_is_cpu_bits(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t shapes[][3] = {{37, 67, 129}, {1, 5, 7}, {64, 64, 16}, {130, 33, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t T = shapes[s][0], O = shapes[s][1], K = shapes[s][2];
        for (int type = 0; type < 2; type++) {
            float *x = filled((size_t)(T * K), 1 + (uint32_t)s, 997.0f), *w = filled((size_t)(O * K), 7 + (uint32_t)s, 1013.0f);
            if (type == MP_CUDA_BF16) {
                bf16_values(x, (size_t)(T * K));
                bf16_values(w, (size_t)(O * K));
            }
            float *yg = hnew((size_t)(T * O)), *yc = hnew((size_t)(T * O));
            gpu_linear(yg, x, w, T, O, K, type, mp_cuda_gemm_ref);
            mp_fwd_matmul_ref(yc, O, x, K, w, O, K, T);
            same_bits(yg, yc, (size_t)(T * O) * sizeof(float), type ? "reference GEMM, bf16" : "reference GEMM, f32");
            free(x), free(w), free(yg), free(yc);
        }
    }
}

static void test_gemm_cublaslt(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t T = 100, O = 96, K = 1000;
    for (int type = 0; type < 2; type++) {
        float *x = filled((size_t)(T * K), 3, 997.0f), *w = filled((size_t)(O * K), 5, 1013.0f);
        if (type == MP_CUDA_BF16) {
            bf16_values(x, (size_t)(T * K));
            bf16_values(w, (size_t)(O * K));
        }
        float *yg = hnew((size_t)(T * O)), *yg2 = hnew((size_t)(T * O)), *yc = hnew((size_t)(T * O));
        gpu_linear(yg, x, w, T, O, K, type, mp_cuda_gemm);
        gpu_linear(yg2, x, w, T, O, K, type, mp_cuda_gemm);
        mp_fwd_matmul_ref(yc, O, x, K, w, O, K, T);
        const double err = norm_err(yg, yc, (size_t)(T * O), "cuBLASLt");
        printf("cuBLASLt %s [%lld,%lld]x[%lld,%lld]^T: normalised error %.3g\n", type ? "bf16" : "f32", (long long)T, (long long)K,
               (long long)O, (long long)K, err);
        assert_true(err <= 1e-5);
        same_bits(yg, yg2, (size_t)(T * O) * sizeof(float), "cuBLASLt, two runs");
        free(x), free(w), free(yg), free(yg2), free(yc);
    }
}

/* A batch of 3 products sharing B, B given as [K, N] (b_t 0), alpha 0.5: against the reference
 * kernel (the CPU's order, checked above). */
static void test_gemm_batched_shared_operand(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t M = 45, N = 33, K = 70, B = 3;
    float *a = filled((size_t)(B * M * K), 11, 500.0f), *b = filled((size_t)(K * N), 13, 500.0f);
    float *da = fput(a, (size_t)(B * M * K)), *db = fput(b, (size_t)(K * N)), *dc = fnew((size_t)(B * M * N)),
          *dr = fnew((size_t)(B * M * N));
    MpCudaGemm g = {.M = M, .N = N, .K = K, .a = da, .b = db, .c = dc, .lda = K, .ldb = N, .ldc = N, .stride_a = M * K,
                    .stride_b = 0, .stride_c = M * N, .batch = (int)B, .b_t = 0, .type = MP_CUDA_F32, .alpha = 0.5f};
    assert_int_equal(mp_cuda_gemm(&ctx, &g), 0);
    g.c = dr;
    assert_int_equal(mp_cuda_gemm_ref(&ctx, &g), 0);
    float *c1 = hnew((size_t)(B * M * N)), *c2 = hnew((size_t)(B * M * N));
    fget(c1, dc, (size_t)(B * M * N));
    fget(c2, dr, (size_t)(B * M * N));
    assert_true(norm_err(c1, c2, (size_t)(B * M * N), "batched GEMM") <= 1e-5);
    cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dr);
    free(a), free(b), free(c1), free(c2);
}

/* ================================================================ elementwise */

static void test_elementwise(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t n = 10007;
    float *g = filled((size_t)n, 21, 150.0f), *u = filled((size_t)n, 22, 300.0f);
    float *dg = fput(g, (size_t)n), *du = fput(u, (size_t)n), *dout = fnew((size_t)n);
    float *cpu = hnew((size_t)n), *gpu = hnew((size_t)n);
    /* the libm ones */
    mp_cuda_swiglu(&ctx, dout, dg, du, n);
    fget(gpu, dout, (size_t)n);
    mp_fwd_swiglu(cpu, g, u, (size_t)n);
    assert_true(norm_err(gpu, cpu, (size_t)n, "swiglu") <= 1e-6);
    mp_cuda_geglu(&ctx, dout, dg, du, n);
    fget(gpu, dout, (size_t)n);
    mp_fwd_geglu(cpu, g, u, (size_t)n);
    assert_true(norm_err(gpu, cpu, (size_t)n, "geglu") <= 1e-6);
    mp_cuda_gelu(&ctx, dout, dg, n);
    fget(gpu, dout, (size_t)n);
    mp_fwd_gelu_erf(cpu, g, (size_t)n);
    assert_true(norm_err(gpu, cpu, (size_t)n, "gelu") <= 1e-6);
    mp_cuda_copy(&ctx, dout, dg, n);
    mp_cuda_softcap(&ctx, dout, n, 3.5f);
    fget(gpu, dout, (size_t)n);
    memcpy(cpu, g, (size_t)n * sizeof(float));
    mp_fwd_softcap(cpu, (size_t)n, 3.5f);
    assert_true(norm_err(gpu, cpu, (size_t)n, "softcap") <= 1e-6);
    /* the exact ones: rows of 101 with row stride 103 */
    const int64_t rows = 97, ld = 103, w = 101;
    float *y = filled((size_t)(rows * ld), 23, 7.0f), *b = filled((size_t)w, 24, 3.0f);
    float *dy = fput(y, (size_t)(rows * ld)), *db = fput(b, (size_t)w);
    mp_cuda_add_bias(&ctx, dy, ld, db, w, rows);
    mp_cuda_bf16_round(&ctx, dy, ld, rows, w);
    mp_cuda_scale(&ctx, dy, rows * ld, 1.7f);
    mp_cuda_add(&ctx, dy, dy, rows * ld);
    float *yg = hnew((size_t)(rows * ld));
    fget(yg, dy, (size_t)(rows * ld));
    for (int64_t t = 0; t < rows; t++) {
        for (int64_t i = 0; i < w; i++) y[t * ld + i] += b[i];
        mp_fwd_bf16_round(y + t * ld, (size_t)w);
    }
    for (int64_t i = 0; i < rows * ld; i++) y[i] = y[i] * 1.7f;
    for (int64_t i = 0; i < rows * ld; i++) y[i] += y[i];
    same_bits(yg, y, (size_t)(rows * ld) * sizeof(float), "add_bias, bf16_round, scale, add");
    mp_cuda_zero(&ctx, dy, rows * ld);
    fget(yg, dy, (size_t)(rows * ld));
    for (int64_t i = 0; i < rows * ld; i++) assert_true(yg[i] == 0.0f && !signbit(yg[i]));
    cudaFree(dg), cudaFree(du), cudaFree(dout), cudaFree(dy), cudaFree(db);
    free(g), free(u), free(cpu), free(gpu), free(y), free(b), free(yg);
}

static void test_amax(void **state) {
    (void)state;
    NEED_GPU();
    const int64_t n = 300001;
    float *x = filled((size_t)n, 31, 10.0f);
    x[123456] = -1e30f;
    float *y = filled(1000, 32, 10.0f);
    y[999] = NAN;
    float *z = filled(77, 33, 10.0f);
    z[5] = -INFINITY;
    float *dx = fput(x, (size_t)n), *dy = fput(y, 1000), *dz = fput(z, 77);
    MpCudaSpan sp[4] = {{dx, n}, {dy, 1000}, {dz, 77}, {dx, 0}};
    uint32_t *dout = dput(NULL, 4 * sizeof(uint32_t)), out[4];
    mp_cuda_amax(&ctx, out, dout, sp, 4);
    dsync();
    uint32_t nanbits;
    memcpy(&nanbits, &y[999], 4);
    assert_int_equal(out[0], 0x7149f2cau); /* 1e30f */
    assert_int_equal(out[1], nanbits & 0x7fffffffu);
    assert_int_equal(out[2], 0x7f800000u);
    assert_int_equal(out[3], 0u);
    cudaFree(dx), cudaFree(dy), cudaFree(dz), cudaFree(dout);
    free(x), free(y), free(z);
}

/* ================================================================ norms and RoPE */

static void test_norms(void **state) {
    (void)state;
    NEED_GPU();
    const int shapes[][2] = {{7, 4096}, {33, 128}, {5, 37}, {3, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s][0], n = shapes[s][1];
        float *x = filled((size_t)rows * n, 40 + (uint32_t)s, 100.0f), *w = filled((size_t)n, 50 + (uint32_t)s, 500.0f),
              *b = filled((size_t)n, 60 + (uint32_t)s, 500.0f);
        float *dx = fput(x, (size_t)rows * n), *dw = fput(w, (size_t)n), *db = fput(b, (size_t)n), *dy = fnew((size_t)rows * n);
        float *gpu = hnew((size_t)rows * n), *cpu = hnew((size_t)rows * n);
        for (int variant = 0; variant < 4; variant++) {
            const int ln = variant >= 2, use_w = variant % 2 == 0;
            if (ln) mp_cuda_layernorm(&ctx, dy, dx, use_w ? dw : NULL, use_w ? db : NULL, rows, n, 1e-5);
            else mp_cuda_rmsnorm(&ctx, dy, dx, use_w ? dw : NULL, rows, n, 1e-6);
            fget(gpu, dy, (size_t)rows * n);
            for (int r = 0; r < rows; r++) {
                if (ln) mp_fwd_layernorm(cpu + (size_t)r * n, x + (size_t)r * n, use_w ? w : NULL, use_w ? b : NULL, n, 1e-5);
                else mp_fwd_rmsnorm(cpu + (size_t)r * n, x + (size_t)r * n, use_w ? w : NULL, n, 1e-6);
            }
            assert_true(norm_err(gpu, cpu, (size_t)rows * n, ln ? "layernorm" : "rmsnorm") <= 1e-6);
        }
        mp_cuda_rmsnorm(&ctx, dx, dx, dw, rows, n, 1e-6); /* in place */
        fget(gpu, dx, (size_t)rows * n);
        for (int r = 0; r < rows; r++) mp_fwd_rmsnorm(cpu + (size_t)r * n, x + (size_t)r * n, w, n, 1e-6);
        assert_true(norm_err(gpu, cpu, (size_t)rows * n, "rmsnorm in place") <= 1e-6);
        cudaFree(dx), cudaFree(dw), cudaFree(db), cudaFree(dy);
        free(x), free(w), free(b), free(gpu), free(cpu);
    }
}

/* qk_prepare against the CPU's sequence (rmsnorm per head or whole, then rope per head), R < HS,
 * rows [t0, T); the table against mp_fwd_rope_table. */
static void test_rope_and_qk_prepare(void **state) {
    (void)state;
    NEED_GPU();
    const int T = 19, t0 = 4, NH = 6, NKV = 2, HS = 16, R = 12, ldt = 24;
    float inv[6];
    for (int i = 0; i < R / 2; i++) inv[i] = (float)pow(10000.0, -2.0 * i / R) * (i % 2 ? 0.25f : 1.0f); /* a scaled table */
    float *dinv = fput(inv, R / 2), *dcos = fnew((size_t)T * R / 2), *dsin = fnew((size_t)T * R / 2);
    mp_cuda_rope_table(&ctx, dcos, dsin, dinv, R, T, 1.25);
    float *cg = hnew((size_t)T * R / 2), *sg = hnew((size_t)T * R / 2), *cc = hnew((size_t)T * R / 2), *sc = hnew((size_t)T * R / 2);
    fget(cg, dcos, (size_t)T * R / 2);
    fget(sg, dsin, (size_t)T * R / 2);
    mp_fwd_rope_table(cc, sc, inv, R, T, 1.25);
    assert_true(norm_err(cg, cc, (size_t)T * R / 2, "rope cos") <= 1e-6 && norm_err(sg, sc, (size_t)T * R / 2, "rope sin") <= 1e-6);
    for (int whole = 0; whole < 2; whole++) {
        float *q = filled((size_t)T * NH * HS, 70, 50.0f), *k = filled((size_t)T * NKV * HS, 71, 50.0f),
              *v = filled((size_t)T * NKV * HS, 72, 50.0f);
        float *qn = filled((size_t)NH * HS, 73, 500.0f), *kn = filled((size_t)NKV * HS, 74, 500.0f);
        float *dq = fput(q, (size_t)T * NH * HS), *dk = fput(k, (size_t)T * NKV * HS), *dv = fput(v, (size_t)T * NKV * HS);
        float *dqn = fput(qn, (size_t)NH * HS), *dkn = fput(kn, (size_t)NKV * HS);
        float *dkh = fnew((size_t)NKV * ldt * HS), *dvh = fnew((size_t)NKV * ldt * HS);
        /* the device's own table, so the rotation itself is held bit for bit */
        MpCudaQKV a = {.q = dq, .k = dk, .v = dv, .kh = dkh, .vh = dvh, .q_norm = dqn, .k_norm = dkn, .cos = dcos, .sin = dsin,
                       .t0 = t0, .T = T, .ldt = ldt, .NH = NH, .NKV = NKV, .HS = HS, .R = R, .norm_whole = whole, .eps = 1e-6};
        mp_cuda_qk_prepare(&ctx, &a);
        float *qg = hnew((size_t)T * NH * HS), *kg = hnew((size_t)T * NKV * HS), *khg = hnew((size_t)NKV * ldt * HS),
              *vhg = hnew((size_t)NKV * ldt * HS);
        fget(qg, dq, (size_t)T * NH * HS);
        fget(kg, dk, (size_t)T * NKV * HS);
        fget(khg, dkh, (size_t)NKV * ldt * HS);
        fget(vhg, dvh, (size_t)NKV * ldt * HS);
        for (int t = t0; t < T; t++) {
            float *qr = q + (size_t)t * NH * HS, *kr = k + (size_t)t * NKV * HS;
            if (whole) {
                mp_fwd_rmsnorm(qr, qr, qn, NH * HS, 1e-6);
                mp_fwd_rmsnorm(kr, kr, kn, NKV * HS, 1e-6);
            }
            for (int h = 0; h < NH; h++) {
                if (!whole) mp_fwd_rmsnorm(qr + h * HS, qr + h * HS, qn, HS, 1e-6);
                mp_fwd_rope(qr + h * HS, cg + (size_t)t * R / 2, sg + (size_t)t * R / 2, R);
            }
            for (int h = 0; h < NKV; h++) {
                if (!whole) mp_fwd_rmsnorm(kr + h * HS, kr + h * HS, kn, HS, 1e-6);
                mp_fwd_rope(kr + h * HS, cg + (size_t)t * R / 2, sg + (size_t)t * R / 2, R);
            }
        }
        assert_true(norm_err(qg, q, (size_t)T * NH * HS, "qk_prepare q") <= 1e-6);
        assert_true(norm_err(kg, k, (size_t)T * NKV * HS, "qk_prepare k") <= 1e-6);
        for (int g = 0; g < NKV; g++)
            for (int t = t0; t < T; t++) {
                same_bits(khg + ((size_t)g * ldt + t) * HS, kg + (size_t)t * NKV * HS + g * HS, HS * sizeof(float), "packed keys");
                same_bits(vhg + ((size_t)g * ldt + t) * HS, v + (size_t)t * NKV * HS + g * HS, HS * sizeof(float), "packed values");
            }
        cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dqn), cudaFree(dkn), cudaFree(dkh), cudaFree(dvh);
        free(q), free(k), free(v), free(qn), free(kn), free(qg), free(kg), free(khg), free(vhg);
    }
    cudaFree(dinv), cudaFree(dcos), cudaFree(dsin);
    free(cg), free(sg), free(cc), free(sc);
}

/* ================================================================ attention */

/* The CPU's scores of head h (rows [0, T), row stride T): mp_fwd_attn_scores_ref, then the
 * soft-cap of the visible entries and the window, as the CPU instance orders them. */
static void cpu_scores(float *s, const float *q, const float *kh, const MpCudaAttn *a, int h) {
    const int T = a->T, g = h / (a->NH / a->NKV);
    mp_fwd_attn_scores_ref(s, q + (size_t)h * a->HS, (int64_t)a->NH * a->HS, kh + (size_t)g * a->ldt * a->HS, a->HS, a->HS, T,
                           a->causal, a->scale);
    for (int i = 0; i < T; i++) {
        float *row = s + (size_t)i * T;
        const int n = a->causal ? i + 1 : T, W = a->window;
        if (a->softcap > 0) mp_fwd_softcap(row, (size_t)n, a->softcap);
        for (int j = 0; W > 0 && j < T; j++)
            if (i - j >= W || (!a->causal && j - i >= W)) row[j] = -INFINITY;
    }
}

/* rows [t0, T) of head h of s [NH, ldt, ldt] into dst [T, T] (rows < t0 untouched) */
static void head_rows(float *dst, const float *s, const MpCudaAttn *a, int h) {
    for (int i = a->t0; i < a->T; i++) memcpy(dst + (size_t)i * a->T, s + ((size_t)h * a->ldt + i) * a->ldt, (size_t)a->T * sizeof(float));
}

static void attention_case(int causal, int window, float softcap, int t0) {
    const int T = 41, NH = 8, NKV = 2, HS = 16, ldt = 45;
    MpCudaAttn a = {.t0 = t0, .T = T, .ldt = ldt, .NH = NH, .NKV = NKV, .HS = HS, .causal = causal, .window = window,
                    .scale = 0.25f, .softcap = softcap};
    const size_t nq = (size_t)T * NH * HS, nkv = (size_t)NKV * ldt * HS, ns = (size_t)NH * ldt * ldt;
    float *q = filled(nq, 80, 40.0f), *kh = filled(nkv, 81, 40.0f), *vh = filled(nkv, 82, 40.0f);
    q[(size_t)9 * NH * HS + 5 * HS + 3] = NAN; /* row 9, head 5: every visible score of it NaN */
    a.q = fput(q, nq), a.kh = fput(kh, nkv), a.vh = fput(vh, nkv), a.s = fnew(ns), a.o = fnew(nq);
    int big = 0x7fffffff, *dchk = dput(&big, sizeof big), chk;
    double *dhs = dput(NULL, (size_t)T * T * sizeof(double));
    assert_int_equal(mp_cuda_attn_scores(&ctx, &a, dchk), 0);
    mp_cuda_attn_headsum(&ctx, dhs, &a);
    float *s = hnew(ns), *ref = hnew((size_t)T * T), *got = hnew((size_t)T * T);
    double *hs = calloc((size_t)T * T, sizeof(double)), *hc = calloc((size_t)T * T, sizeof(double));
    fget(s, a.s, ns);
    dget(hs, dhs, (size_t)T * T * sizeof(double));
    dget(&chk, dchk, sizeof chk);
    assert_int_equal(chk, t0 <= 9 ? 9 * NH + 5 : 0x7fffffff);
    float *sc = hnew((size_t)NH * T * T); /* the GPU's scores as [NH, T, T] */
    for (int h = 0; h < NH; h++) {
        cpu_scores(ref, q, kh, &a, h);
        head_rows(got, s, &a, h);
        head_rows(sc + (size_t)h * T * T, s, &a, h);
        for (int i = t0; i < T; i++)
            if (!(i == 9 && h == 5) && norm_err(got + (size_t)i * T, ref + (size_t)i * T, (size_t)T, "scores") > 1e-5)
                fail_msg("scores head %d row %d beyond 1e-5", h, i);
    }
    mp_fwd_attn_headsum(hc + (size_t)t0 * T, sc, NH, T, causal, t0, T);
    for (int i = t0; i < T; i++)
        same_bits(hs + (size_t)i * T, hc + (size_t)i * T, (size_t)(causal ? i + 1 : T) * sizeof(double), "head-sum map");
    /* softmax and mix, from the GPU's own scores */
    mp_cuda_attn_softmax(&ctx, &a);
    assert_int_equal(mp_cuda_attn_mix(&ctx, &a), 0);
    float *p = hnew(ns), *o = hnew(nq), *oc = filled(nq, 83, 1.0f);
    fget(p, a.s, ns);
    fget(o, a.o, nq);
    for (int h = 0; h < NH; h++) {
        float *sh = sc + (size_t)h * T * T;
        for (int i = t0; i < T; i++) mp_fwd_softmax_row(sh + (size_t)i * T, causal ? i + 1 : T, T);
        head_rows(got, p, &a, h);
        if (h != 5 && norm_err(got + (size_t)t0 * T, sh + (size_t)t0 * T, (size_t)(T - t0) * T, "softmax") > 1e-6)
            fail_msg("softmax head %d beyond 1e-6", h);
        mp_fwd_attn_mix(oc + (size_t)h * HS, (int64_t)NH * HS, got, vh + (size_t)(h / (NH / NKV)) * ldt * HS, HS, HS, T, causal, t0, T);
    }
    for (int i = t0; i < T; i++)
        for (int h = 0; h < NH; h++)
            if (!(i == 9 && h == 5) &&
                norm_err(o + ((size_t)i * NH + h) * HS, oc + ((size_t)i * NH + h) * HS, HS, "p.v") > 1e-5)
                fail_msg("p.v row %d head %d beyond 1e-5", i, h);
    cudaFree((void *)a.q), cudaFree((void *)a.kh), cudaFree((void *)a.vh), cudaFree(a.s), cudaFree(a.o), cudaFree(dchk), cudaFree(dhs);
    free(q), free(kh), free(vh), free(s), free(ref), free(got), free(hs), free(hc), free(sc), free(p), free(o), free(oc);
}

static void test_attention(void **state) {
    (void)state;
    NEED_GPU();
    attention_case(1, 0, 0.0f, 0);
    attention_case(1, 7, 0.0f, 0);   /* a sliding window */
    attention_case(0, 6, 2.5f, 0);   /* bidirectional, window both ways, soft-cap */
    attention_case(1, 0, 30.0f, 13); /* rows [13, T) only (the NaN row before them: no check) */
    attention_case(1, 0, 0.0f, 3);
}

/* ================================================================ the probe's accumulator */

/* Three sequences of S positions, scores and probabilities, into the CPU's MpProbeAcc and into the
 * device accumulator (from the scores, and, without per-head sums, also from the attention's
 * head-sum map): every array of the same name the same bits, entropy within 1e-12 — the block
 * test's sign-flipped sums (bflip) and the squared norms (rsq, csq) among them, which the device
 * must keep for probe_dev.c to use it. */
static void accumulator_case(int causal, int W, int skip, int per_head, int probs, int S) {
    const int H = 4, NL = 3, N = 3;
    const unsigned char mask[3] = {1, 0, 1}; /* model layers 0 and 2: slots 0 and 1 */
    MpProbeAcc acc;
    MpErr e;
    assert_int_equal(mp_probe_acc_init(&acc, mask, NL, H, S, per_head, causal, 1, &e), MP_OK);
    acc.window[1] = W;
    if (skip) mp_probe_acc_skip(&acc, skip);
    if (probs) assert_int_equal(mp_probe_acc_stat_on(&acc, MP_PROBE_STAT_PROBS, &e), MP_OK);
    MpCudaAccDims d = {.L = 2, .H = H, .S = S, .causal = causal, .skip = skip, .nb = acc.nb, .per_head = per_head, .probs = probs};
    d.window[1] = W;
    MpCudaAcc da, db;
    char why[512];
    if (mp_cuda_acc_init(&da, &d, why, sizeof why) || mp_cuda_acc_init(&db, &d, why, sizeof why)) fail_msg("%s", why);
    const size_t n = (size_t)H * S * S;
    float *ds = fnew(n), *dp = fnew(n);
    double *dhs = dput(NULL, (size_t)S * S * sizeof(double));
    for (int q = 0; q < N; q++) {
        for (int li = 0; li < 2; li++) {
            float *s = filled(n, 100 + 7 * (uint32_t)q + (uint32_t)li, 37.0f), *p = filled(n, 200 + 7 * (uint32_t)q + (uint32_t)li, 1000.0f);
            for (size_t k = 0; k < n; k++) p[k] = fabsf(p[k]) + 1e-3f;
            mp_probe_acc_hook(&acc, li ? 2 : 0, s, H, S);
            if (probs) mp_probe_acc_probs_hook(&acc, li ? 2 : 0, p, H, S);
            assert_int_equal(cudaMemcpy(ds, s, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
            assert_int_equal(cudaMemcpy(dp, p, n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
            mp_cuda_acc_scores(&ctx, &da, li, ds);
            mp_cuda_acc_probs(&ctx, &da, li, dp);
            if (!per_head) { /* the attention's head-sum tap, then the rest */
                MpCudaAttn a = {.s = ds, .t0 = 0, .T = S, .ldt = S, .NH = H, .NKV = H, .causal = causal};
                mp_cuda_attn_headsum(&ctx, dhs, &a);
                mp_cuda_acc_headsum(&ctx, &db, li, dhs);
                mp_cuda_acc_probs(&ctx, &db, li, dp);
            }
            dsync();
            free(s), free(p);
        }
        mp_probe_acc_seq_end(&acc);
    }
    MpProbeArray ha[MP_PROBE_MAX_ARRAYS];
    MpCudaAccArray ga[MP_CUDA_ACC_ARRAYS], gb[MP_CUDA_ACC_ARRAYS];
    const int nh = mp_probe_acc_arrays(&acc, ha), ng = mp_cuda_acc_arrays(&da, ga);
    mp_cuda_acc_arrays(&db, gb);
    assert_int_equal(nh, ng);
    int noise = 0; /* bflip, rsq, csq compared */
    for (int k = 0; k < nh; k++) {
        noise += !strcmp(ha[k].name, "bflip") || !strcmp(ha[k].name, "rsq") || !strcmp(ha[k].name, "csq");
        assert_string_equal(ha[k].name, ga[k].name);
        assert_int_equal(ha[k].n, ga[k].n);
        double *g = calloc(ha[k].n, sizeof(double));
        dget(g, ga[k].p, ha[k].n * sizeof(double));
        if (!strcmp(ha[k].name, "entropy")) {
            for (size_t i = 0; i < ha[k].n; i++) assert_true(fabs(g[i] - ha[k].p[i]) <= 1e-12 * fabs(ha[k].p[i]));
        } else
            same_bits(g, ha[k].p, ha[k].n * sizeof(double), ha[k].name);
        if (!per_head) {
            double *g2 = calloc(ha[k].n, sizeof(double));
            dget(g2, gb[k].p, ha[k].n * sizeof(double));
            same_bits(g2, g, ha[k].n * sizeof(double), "the head-sum tap's path");
            free(g2);
        }
        free(g);
    }
    assert_int_equal(noise, 3);
    mp_cuda_acc_free(&da);
    mp_cuda_acc_free(&db);
    cudaFree(ds), cudaFree(dp), cudaFree(dhs);
    mp_probe_acc_free(&acc);
}

static void test_accumulator(void **state) {
    (void)state;
    NEED_GPU();
    accumulator_case(1, 0, 0, 0, 1, 37);
    accumulator_case(1, 5, 1, 1, 1, 37); /* a window on slot 1, BOS skipped, per head */
    accumulator_case(0, 0, 0, 1, 0, 37); /* bidirectional */
    accumulator_case(0, 6, 1, 0, 1, 37); /* bidirectional with a window both ways */
    accumulator_case(1, 40, 1, 0, 0, 300); /* rows beyond one thread each (P 299 > 256), blocks of ~350 entries */
}

/* ================================================================ end to end: the binary */

static const char *bin(void) {
    const char *b = getenv("MASKPOS_BIN");
    return b && *b ? b : MP_TEST_BIN;
}

/* Runs the binary with args (printf-style); fails the test on a non-zero exit. */
static void run_ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run_ok(const char *fmt, ...) {
    char args[4096], out[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    if (mp_test_shell(out, sizeof out, "%s %s", bin(), args) != 0) fail_msg("maskpos %s: %s", args, out);
}

/* A .npy as doubles (*n of them). */
static double *npy_f64(const char *dir, const char *name, size_t *n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    MpNpy a;
    MpErr e;
    double *d = NULL;
    if (mp_npy_read(path, &a, &e) != MP_OK || mp_npy_to_f64(&a, &d, &e) != MP_OK) fail_msg("%s: %s", path, e.msg);
    *n = a.count;
    mp_npy_free(&a);
    return d;
}

/* max and mean |a - b| over max |b| (NaN in the same places); the bytes' equality in *same */
static void npy_cmp(const char *da, const char *db, const char *name, double *mx, double *mean) {
    size_t na, nb;
    double *a = npy_f64(da, name, &na), *b = npy_f64(db, name, &nb);
    assert_int_equal(na, nb);
    double m = 0, d = 0, sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < na; i++) {
        if (isnan(a[i]) != isnan(b[i])) fail_msg("%s: entry %zu NaN in one run only (%s, %s)", name, i, da, db);
        if (isnan(a[i])) continue;
        m = fmax(m, fabs(b[i]));
        d = fmax(d, fabs(a[i] - b[i]));
        sum += fabs(a[i] - b[i]);
        cnt++;
    }
    *mx = m > 0 ? d / m : d;
    *mean = m > 0 && cnt ? sum / cnt / m : 0;
    free(a), free(b);
}

static int same_file(const char *da, const char *db, const char *name) {
    char out[256];
    return mp_test_shell(out, sizeof out, "cmp -s %s/%s %s/%s", da, name, db, name) == 0;
}

/* A family's failure: printed, counted, and the test goes on to the next family (one GPU run shows
 * every family's state); test_families_end_to_end fails at the end when any was counted. */
static int family_failures;
#define FAMILY_FAIL(...) do { printf("  FAILED: "), printf(__VA_ARGS__), printf("\n"); family_failures++; } while (0)

/* Runs the binary like run_ok; a failure is a family's (FAMILY_FAIL), answered 0. */
static int run_family(const char *tag, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int run_family(const char *tag, const char *fmt, ...) {
    char args[4096], out[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    if (mp_test_shell(out, sizeof out, "%s %s", bin(), args) == 0) return 1;
    FAMILY_FAIL("%s: maskpos %s: %s", tag, args, out);
    return 0;
}

/* One model: the probes and logits on the GPU against the CPU's.
 * f32: within 1e-5 of max |map|, and two GPU runs the same bytes.
 * bf16: against the CPU's bf16 (each accumulates in f32 in its own order, so an activation within
 * rounding error of a bf16 boundary can round the other way in one of them, and a random-weight
 * model amplifies such flips layer by layer): within max 2e-3 and mean 2e-5 of max |map| (the CPU's
 * bounds against torch), or, in deeper models, within half of bf16's own distance from f32 (max)
 * and a quarter of it (mean): a rounding missing on the GPU would put it about as far from the
 * CPU's bf16 as bf16 is from f32 (ratio ~1). Measured on the CPU for a 4-layer llama: bf16 vs
 * exact-sum bf16 mean 2.9e-8, 3.1e-6, 2.4e-5, 4.9e-5 at layers 1-4; smollm3's bf16 vs f32 max
 * 5.6e-3, mean 9.8e-4. */
static void family_case(const char *tmp, const char *tag, const char *mkargs, int gguf, const char *model_type) {
    char m[512], ids[512], d[6][600], out[1024];
    snprintf(m, sizeof m, "%s/%s%s", tmp, tag, gguf ? ".gguf" : "");
    snprintf(ids, sizeof ids, "%s/ids.npy", tmp);
    if (!run_family(tag, "mkmodel %s --vocab 300 --seed 3 %s %s", mkargs, gguf ? "--format gguf" : "", m)) return;
    if (model_type && /* a family mkmodel does not write: its block under another model_type (smollm3: llama's with NoPE layers) */
        mp_test_shell(out, sizeof out, "sed -i 's/\"model_type\": \"[a-z0-9]*\"/\"model_type\": \"%s\"/' %s/config.json", model_type, m))
        fail_msg("%s: %s", m, out);
    const char *names[6] = {"cpu32", "gpu32", "gpu32b", "cpu16", "gpu16", "gpulogits"};
    for (int i = 0; i < 6; i++) snprintf(d[i], sizeof d[i], "%s/%s-%s", tmp, tag, names[i]);
    const char *p = "probe %s --tokens %s --layers all --out %s --force --quiet --probs --per-head --compute %s%s";
    if (!run_family(tag, p, m, ids, d[0], "f32", "") || !run_family(tag, p, m, ids, d[1], "f32", " --device cuda") ||
        !run_family(tag, p, m, ids, d[2], "f32", " --device cuda") || !run_family(tag, p, m, ids, d[3], "bf16", "") ||
        !run_family(tag, p, m, ids, d[4], "bf16", " --device cuda"))
        return;
    double mx, mean, omx, omean;
    static const char *const maps[] = {"scores.npy", "scores_heads.npy", "probs.npy"};
    for (int k = 0; k < 3; k++) {
        npy_cmp(d[1], d[0], maps[k], &mx, &mean);
        printf("  %-14s %-17s f32: max %.2e mean %.2e of max |map|", tag, maps[k], mx, mean);
        if (mx > 1e-5) FAMILY_FAIL("%s %s: the GPU's f32 map is %.2e of max |map| from the CPU's (bound 1e-5)", tag, maps[k], mx);
        if (!same_file(d[1], d[2], maps[k])) FAMILY_FAIL("%s %s: two GPU runs differ", tag, maps[k]);
        npy_cmp(d[4], d[3], maps[k], &mx, &mean);
        npy_cmp(d[3], d[0], maps[k], &omx, &omean);
        printf("; bf16 vs the CPU's bf16: max %.2e mean %.2e (bf16 vs f32: max %.2e mean %.2e)\n", mx, mean, omx, omean);
        if (!(mx <= 2e-3 && mean <= 2e-5) && !(mx <= 0.5 * omx && mean <= 0.25 * omean))
            FAMILY_FAIL("%s %s: bf16 beyond the bounds (max %.2e, mean %.2e; bf16 vs f32 max %.2e, mean %.2e)", tag, maps[k], mx,
                        mean, omx, omean);
    }
    /* log-probs of the whole model */
    if (!run_family(tag, "logits %s --tokens 5,17,2,250,9,33,41,7 --out %s-cpu.npy --force", m, d[5]) ||
        !run_family(tag, "logits %s --tokens 5,17,2,250,9,33,41,7 --out %s-gpu.npy --force --device cuda", m, d[5]))
        return;
    char a[700], b[700];
    snprintf(a, sizeof a, "%s-gpulogits-gpu.npy", tag); /* d[5] = tmp/TAG-gpulogits, as written above */
    snprintf(b, sizeof b, "%s-gpulogits-cpu.npy", tag);
    size_t na, nb;
    double *la = npy_f64(tmp, a, &na), *lb = npy_f64(tmp, b, &nb);
    assert_int_equal(na, nb);
    double dl = 0;
    for (size_t i = 0; i < na; i++) dl = fmax(dl, fabs(la[i] - lb[i]));
    printf("  %-14s logits: max |log-prob difference| %.2e\n", tag, dl);
    if (!(dl <= 1e-4)) FAMILY_FAIL("%s: log-probs differ by %.2e (bound 1e-4)", tag, dl);
    free(la), free(lb);
}

static void test_families_end_to_end(void **state) {
    (void)state;
    NEED_GPU();
    static const struct {
        const char *tag, *args;
        int gguf;
        const char *model_type; /* config.json's model_type rewritten to it (NULL: as written) */
    } cases[] = {
        {"llama", "--arch llama --rope-scaling llama3", 0, NULL},
        {"llama-q8", "--arch llama --dtype q8_0", 1, NULL},
        {"llama3", "--arch llama --rope-scaling llama3 --rope-theta 500000", 0, NULL}, /* Llama 3.1's scaled frequencies (the bench's model) */
        {"mistral", "--arch mistral --sliding-window 16", 0, NULL},
        {"qwen2", "--arch qwen2 --sliding-window 16", 0, NULL},
        {"qwen3", "--arch qwen3", 0, NULL},
        {"qwen3-f16", "--arch qwen3 --dtype f16", 1, NULL},
        {"phi3", "--arch phi3 --rope-scaling longrope --partial-rotary 0.5", 0, NULL},
        {"smollm3", "--arch llama --layers 4", 0, "smollm3"}, /* layer 4 without RoPE */
        {"olmo2", "--arch olmo2", 0, NULL},
        {"gemma", "--arch gemma", 0, NULL},
        {"gemma2", "--arch gemma2 --sliding-window 16 --layers 3", 0, NULL},
        {"gemma3", "--arch gemma3 --sliding-window 16 --layers 6", 0, NULL},
        {"gptneox", "--arch gptneox", 0, NULL},
        {"mixtral", "--arch mixtral", 0, NULL},
        {"qwen3moe", "--arch qwen3moe", 0, NULL},
        {"qwen2moe", "--arch qwen2moe", 0, NULL},
    };
    const char *tmp = mp_test_tmpdir();
    char ids[600];
    snprintf(ids, sizeof ids, "%s/ids.npy", tmp);
    int32_t t[4 * 48];
    uint32_t sd = 12345;
    for (int i = 0; i < 4 * 48; i++) t[i] = (int32_t)((sd = sd * 1664525u + 1013904223u) >> 8) % 300;
    MpErr e;
    const int64_t shape[2] = {4, 48};
    if (mp_npy_write(ids, MP_DT_I32, t, 2, shape, &e) != MP_OK) fail_msg("%s", e.msg);
    family_failures = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) family_case(tmp, cases[i].tag, cases[i].args, cases[i].gguf, cases[i].model_type);
    if (family_failures) fail_msg("%d failures in the families above (each printed as FAILED)", family_failures);
}

/* A run checkpointed on the CPU, killed, resumed on the GPU: within 1e-5 of the CPU's whole run. */
static void test_resume_across_devices(void **state) {
    (void)state;
    NEED_GPU();
    const char *tmp = mp_test_tmpdir();
    char m[600], ids[600], out[8192];
    snprintf(m, sizeof m, "%s/m", tmp);
    snprintf(ids, sizeof ids, "%s/ids.npy", tmp);
    run_ok("mkmodel --arch llama --layers 2 --vocab 300 %s", m);
    int32_t t[6 * 40];
    for (int i = 0; i < 6 * 40; i++) t[i] = (i * 37 + 11) % 300;
    MpErr e;
    const int64_t shape[2] = {6, 40};
    if (mp_npy_write(ids, MP_DT_I32, t, 2, shape, &e) != MP_OK) fail_msg("%s", e.msg);
    run_ok("probe %s --tokens %s --out %s/whole --quiet", m, ids, tmp);
    const int rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=3 %s probe %s --tokens %s --out %s/part --quiet --checkpoint-every 1",
                                 bin(), m, ids, tmp);
    if (rc == 0) fail_msg("the killed run ended normally: %s", out);
    run_ok("probe %s --tokens %s --out %s/part --quiet --checkpoint-every 1 --resume --device cuda", m, ids, tmp);
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/part", tmp);
    snprintf(b, sizeof b, "%s/whole", tmp);
    double mx, mean;
    npy_cmp(a, b, "scores.npy", &mx, &mean);
    npy_cmp(a, b, "scores_se.npy", &mx, &mean);
    printf("resumed on the GPU after 3 of 6 sequences on the CPU: max %.2e of max |map|\n", mx);
    assert_true(mx <= 1e-5);
}

/* ================================================================ main */

static int cuda_setup(void **state) {
    (void)state;
    if (mp_cuda_device_count(no_gpu_why, sizeof no_gpu_why) < 1) return 0;
    char why[512];
    if (mp_cuda_open(&ctx, 0, why, sizeof why) != 0) {
        snprintf(no_gpu_why, sizeof no_gpu_why, "%s", why);
        return 0;
    }
    MpFwdDeviceInfo info;
    if (mp_cuda_device_info(0, &info, why, sizeof why) == 0)
        printf("cuda:0: %s, compute capability %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d, cuBLASLt %d\n", info.name,
               info.cc_major, info.cc_minor, info.sms, info.mem_total / 1073741824.0, info.driver, info.runtime, info.blas);
    have_gpu = 1;
    return 0;
}

static int cuda_teardown(void **state) {
    (void)state;
    if (have_gpu) mp_cuda_close(&ctx);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_reference_is_cpu_bits),
        cmocka_unit_test(test_gemm_cublaslt),
        cmocka_unit_test(test_gemm_batched_shared_operand),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_amax),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_rope_and_qk_prepare),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_accumulator),
        cmocka_unit_test(test_families_end_to_end),
        cmocka_unit_test(test_resume_across_devices),
    };
    return cmocka_run_group_tests(tests, cuda_setup, cuda_teardown);
}
