/* test_model_amx.c — maskpos' own AMX kernel (src/model/fwd_amx.c, issue #37) and the bit classes
 * of the bf16 matmul kernels (src/model/fwd_kernels.c), each against an independent reference:
 *   - mp_fwd_fma_ftz, the step of the bf16 dot-product instructions: hand-worked cases of DAZ
 *     (subnormal inputs read as zero) and FTZ (tininess after rounding with an unbounded exponent,
 *     the sign kept), and, where the CPU has it, vdpbf16ps itself on those cases and on 2^18 random
 *     steps full of subnormal and tiny values (test_fma_ftz_*);
 *   - the pairs class on such data: avx512bf16 (vdpbf16ps), avx512pairs and avx2pairs (FMA with
 *     MXCSR FTZ|DAZ) == mp_fwd_matmul_ref_pairs bit for bit;
 *   - the tile layout: every W[o][k] read back, the padding zero;
 *   - the emulated AMX kernel == mp_amx_matmul_ref (the SDM's order as plain loops) bit for bit on
 *     shapes off every block size, 1 and 2 threads, a batch split in two and a panel split; the
 *     tiles order within the f32 summation bound of the exact sum and different from the fma and
 *     pairs orders (so the reference is not one of them by mistake);
 *   - the instruction (where the CPU has AMX; an expected skip elsewhere, saying why): the
 *     self-check's line, and the real kernel == mp_amx_matmul_ref bit for bit when the self-check
 *     passed, else within the f32 summation bound and the same for 1 and 2 threads;
 *   - auto and MASKPOS_KERNEL: the kernel auto takes is of the default class; class names pick a
 *     kernel of that class; f32 weights are class fma whatever the request;
 *   - end to end with the emulated kernel: probe and logits --compute bf16 byte-identical for 1 and
 *     2 threads; a checkpoint of one bit class refused by a resume of another with the
 *     MASKPOS_KERNEL that resumes it, and resumed with it to the bytes of the uninterrupted run.
 * MPI: tests/test_mpi.c (ranks with the emulated kernel == one process; ranks of two classes stop).
 */
#include "test_model_util.h"

#include <float.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define T_X86 1
#else
#define T_X86 0
#endif

#include "model/fwd_amx.h"     /* mp_fwd_fma_ftz, mp_amx_*: the AMX kernel */
#include "model/fwd_kernels.h" /* kernels, classes, bf16 helpers */

static uint32_t bits_of(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ================================================================ one step: DAZ and FTZ */

typedef struct FtzCase {
    const char *what;
    float a, b, c, want;
} FtzCase;

/* Worked by hand: FLT_MIN = 2^-126; subnormals below it; a result is tiny when, rounded to 24 bits
 * with an unbounded exponent, it is below FLT_MIN (x86's rule: tininess after rounding). */
static const FtzCase ftz_cases[] = {
    {"normal", 1.5f, 2.0f, 0.25f, 3.25f},
    {"subnormal a reads as 0 (plain fma: 2^-49)", 0x1p-149f, 0x1p100f, 0.0f, 0.0f},
    {"subnormal c reads as 0", 0.0f, 0.0f, 0x1p-130f, 0.0f},
    {"-subnormal c reads as -0, + (+0): +0", 0.0f, 0.0f, -0x1p-130f, 0.0f},
    {"2^-130 flushed (plain fma: 2^-130)", 0x1p-70f, 0x1p-60f, 0.0f, 0.0f},
    {"-2^-130 flushed to -0", -0x1p-70f, 0x1p-60f, 0.0f, -0.0f},
    {"FLT_MIN - 2^-150: exact in 24 bits below FLT_MIN, flushed (plain fma: FLT_MIN)", 0x1p-75f, -0x1p-75f, 0x1p-126f, 0.0f},
    {"FLT_MIN - 2^-152 rounds to FLT_MIN first: not tiny (tininess before rounding would flush)", 0x1p-76f, -0x1p-76f, 0x1p-126f, 0x1p-126f},
    {"-(FLT_MIN - 2^-150) flushed to -0", 0x1p-75f, 0x1p-75f, -0x1p-126f, -0.0f},
    {"exact cancellation: +0", 3.0f, 2.0f, -6.0f, 0.0f},
    {"2 FLT_MIN - FLT_MIN = FLT_MIN (not tiny)", 0x1p-126f, -1.0f, 0x1p-125f, 0x1p-126f},
};

static void test_fma_ftz_cases(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof ftz_cases / sizeof ftz_cases[0]; i++) {
        const FtzCase *c = &ftz_cases[i];
        const float r = mp_fwd_fma_ftz(c->a, c->b, c->c);
        if (bits_of(r) != bits_of(c->want)) fail_msg("%s: mp_fwd_fma_ftz(%a, %a, %a) = %a, expected %a", c->what, c->a, c->b, c->c, r, c->want);
    }
}

#if T_X86
/* One vdpbf16ps lane: acc + a_odd·b_odd, then + a_even·b_even (bf16 operands). */
__attribute__((target("avx512f,avx512bf16"))) static float vdp_lane(float acc, uint16_t ao, uint16_t bo, uint16_t ae, uint16_t be) {
    const __m512bh a = (__m512bh)_mm512_set1_epi32((int)((uint32_t)ae | (uint32_t)ao << 16));
    const __m512bh b = (__m512bh)_mm512_set1_epi32((int)((uint32_t)be | (uint32_t)bo << 16));
    float out[16];
    _mm512_storeu_ps(out, _mm512_dpbf16_ps(_mm512_set1_ps(acc), a, b));
    return out[0];
}
#endif

/* A bf16 value for the random steps: normal over 2^-80 .. 2^10 (products near FLT_MIN), subnormal
 * one time in eight, zero one time in sixteen. */
static uint16_t step_value(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = (uint32_t)(*s >> 33), sign = (r & 1u) << 15, man = (r >> 1) & 0x7fu;
    if ((r >> 8) % 16 == 0) return (uint16_t)sign;
    if ((r >> 8) % 8 == 1) return (uint16_t)(sign | (man ? man : 1u));
    return (uint16_t)(sign | (uint32_t)(127 - 80 + (r >> 12) % 91) << 7 | man);
}

/* The step against the instruction (AVX512-BF16: vdpbf16ps does two of them, the odd product first). */
static void test_fma_ftz_matches_vdpbf16ps(void **state) {
    (void)state;
    if (!mp_fwd_kernel_available(MP_FWD_KERNEL_AVX512BF16)) {
        print_message("this CPU (or build) lacks avx512_bf16: mp_fwd_fma_ftz is checked by hand-worked cases only\n");
        skip();
    }
#if T_X86
    for (size_t i = 0; i < sizeof ftz_cases / sizeof ftz_cases[0]; i++) { /* as the odd step, the even one 0 · 0 */
        const FtzCase *c = &ftz_cases[i];
        const uint16_t a = mp_fwd_bf16_from_f32(c->a), b = mp_fwd_bf16_from_f32(c->b);
        if (mp_fwd_bf16_to_f32(a) != c->a || mp_fwd_bf16_to_f32(b) != c->b) continue; /* not bf16 operands */
        const float hw = vdp_lane(c->c, a, b, 0, 0), sw = mp_fwd_fma_ftz(0.0f, 0.0f, mp_fwd_fma_ftz(c->a, c->b, c->c));
        if (bits_of(hw) != bits_of(sw)) fail_msg("%s: vdpbf16ps %a, mp_fwd_fma_ftz %a", c->what, hw, sw);
    }
    uint64_t s = 77;
    long tiny = 0;
    for (long i = 0; i < (1l << 18); i++) {
        const uint16_t ao = step_value(&s), bo = step_value(&s), ae = step_value(&s), be = step_value(&s);
        const float acc = float_of((uint32_t)step_value(&s) << 16 | (uint32_t)(s >> 40 & 0xffffu));
        const float hw = vdp_lane(acc, ao, bo, ae, be);
        const float sw = mp_fwd_fma_ftz(mp_fwd_bf16_to_f32(ae), mp_fwd_bf16_to_f32(be),
                                        mp_fwd_fma_ftz(mp_fwd_bf16_to_f32(ao), mp_fwd_bf16_to_f32(bo), acc));
        if (bits_of(hw) != bits_of(sw))
            fail_msg("step %ld: acc %a + %a·%a + %a·%a: vdpbf16ps %a, mp_fwd_fma_ftz %a", i, acc, mp_fwd_bf16_to_f32(ao),
                     mp_fwd_bf16_to_f32(bo), mp_fwd_bf16_to_f32(ae), mp_fwd_bf16_to_f32(be), hw, sw);
        tiny += fabsf(hw) < 0x1p-120f;
    }
    print_message("vdpbf16ps == two mp_fwd_fma_ftz steps on the %zu hand-worked cases and 2^18 random steps (%ld results below "
                  "2^-120)\n", sizeof ftz_cases / sizeof ftz_cases[0], tiny);
#endif
}

/* ================================================================ helpers for matmuls */

/* x [T, ldx] and w [O, K] of bf16 values: fill 0 — uniform over [-1, 1) scaled by up to 2^10, with
 * cancellation; fill 1 — step_value's subnormals and tiny products. */
static void fill_bf16(float *v, size_t n, uint32_t seed, int tiny) {
    uint64_t s = seed;
    if (tiny) {
        for (size_t i = 0; i < n; i++) v[i] = mp_fwd_bf16_to_f32(step_value(&s));
        return;
    }
    mp_test_fill(v, n, seed, 997.0f);
    for (size_t i = 0; i < n; i++) v[i] *= (float)(1u << (i * 7 % 11));
    mp_fwd_bf16_round(v, n);
}

/* W packed for kernel k's layout (rows in uneven chunks: 5, then 32s). pb sized for either. */
static MpFwdMat pack_for(MpFwdKernel k, uint16_t *pb, const float *w, int64_t O, int64_t K) {
    MpFwdMat m = {.pb = pb, .out = O, .in = K, .layout = mp_fwd_kernel_layout(k)};
    for (int64_t r0 = 0; r0 < O;) {
        const int64_t n = r0 == 0 ? (O < 5 ? O : 5) : (O - r0 < 32 ? O - r0 : 32);
        mp_fwd_mat_pack_bf16_rows(&m, w + r0 * K, r0, n);
        r0 += n;
    }
    return m;
}

static uint16_t *pack_buf(int64_t O, int64_t K) {
    const size_t a = mp_fwd_mat_floats(O, K), b = mp_amx_weight_elems(O, K);
    return aligned_alloc(64, ((a > b ? a : b) * 2 + 63) / 64 * 64);
}

/* Number of entries of y [T, ldy] that differ from want bit for bit (the first printed). */
static long count_diff(const char *what, const float *y, const float *want, int64_t T, int64_t O, int64_t ldy, int show) {
    long bad = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++)
            if (bits_of(y[t * ldy + o]) != bits_of(want[t * ldy + o]) && bad++ == 0 && show)
                print_message("%s: y[%lld,%lld] = %a, reference %a\n", what, (long long)t, (long long)o, y[t * ldy + o], want[t * ldy + o]);
    return bad;
}

/* ================================================================ the pairs class on subnormals */

/* Every y [T, O] (row stride ldy) of x [T, K] (ldx) · w [O, K]ᵀ within the f32 summation bound
 * (K + 1)·2⁻²⁴·Σ|x·w| of the exact product (in double); *worst keeps the largest error / bound. */
static void f32_bound_check(const char *what, const float *y, int64_t ldy, const float *x, int64_t ldx, const float *w,
                            int64_t T, int64_t O, int64_t K, double *worst) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++) {
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                const double p = (double)x[t * ldx + k] * (double)w[o * K + k];
                exact += p;
                mag += fabs(p);
            }
            const double bound = (double)(K + 1) * ldexp(1.0, -24) * mag, err = fabs(y[t * ldy + o] - exact);
            if (!(err <= bound)) fail_msg("%s: y[%lld,%lld] = %.9g, exact %.9g (bound %.3g)", what, (long long)t, (long long)o, y[t * ldy + o], exact, bound);
            if (bound > 0 && err / bound > *worst) *worst = err / bound;
        }
}

static void test_pairs_kernels_on_subnormals(void **state) {
    (void)state;
    const int64_t T = 21, O = 70, K = 301, ldx = K + 2, ldy = O + 1;
    float *x = calloc((size_t)(T * ldx), sizeof(float)), *w = malloc(sizeof(float) * (size_t)(O * K));
    float *y = calloc((size_t)(T * ldy), sizeof(float)), *yp = calloc((size_t)(T * ldy), sizeof(float));
    uint16_t *pb = pack_buf(O, K);
    fill_bf16(x, (size_t)(T * ldx), 3, 1);
    fill_bf16(w, (size_t)(O * K), 4, 1);
    mp_fwd_matmul_ref_pairs(yp, ldy, x, ldx, w, O, K, T);
    int ran = 0;
    for (int k = MP_FWD_KERNEL_REF; k < MP_FWD_KERNEL_COUNT; k++) {
        if (mp_fwd_kernel_bits((MpFwdKernel)k, 1) != MP_FWD_BITS_PAIRS || !mp_fwd_kernel_available((MpFwdKernel)k)) continue;
        const MpFwdMat m = pack_for((MpFwdKernel)k, pb, w, O, K);
        for (int th = 1; th <= 2; th++) {
            mp_test_set_threads(th);
            memset(y, 0, sizeof(float) * (size_t)(T * ldy));
            mp_fwd_matmul_kernel((MpFwdKernel)k, y, ldy, x, ldx, &m, T);
            if (count_diff(mp_fwd_kernel_name((MpFwdKernel)k), y, yp, T, O, ldy, 1))
                fail_msg("kernel %s (%d threads) differs from the pairs reference on subnormal-heavy data", mp_fwd_kernel_name((MpFwdKernel)k), th);
        }
        print_message("%s == pairs reference (DAZ/FTZ) on subnormal-heavy data, 1 and 2 threads\n", mp_fwd_kernel_name((MpFwdKernel)k));
        ran++;
    }
    mp_test_set_threads(2);
    if (!ran) print_message("no kernel of the pairs class runs on this CPU\n");
    free(x);
    free(w);
    free(y);
    free(yp);
    free(pb);
}

/* ================================================================ the tile layout */

static void test_tile_layout(void **state) {
    (void)state;
    const int64_t shapes[][2] = {{1, 1}, {33, 31}, {64, 64}, {70, 100}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t O = shapes[s][0], K = shapes[s][1], P = (O + 31) / 32, KT = (K + 31) / 32;
        const size_t n = mp_amx_weight_elems(O, K);
        assert_int_equal(n, (size_t)(P * KT * 1024));
        float *w = malloc(sizeof(float) * (size_t)(O * K));
        uint16_t *wt = malloc(n * 2);
        memset(wt, 0xff, n * 2); /* the packing must write every padding value */
        fill_bf16(w, (size_t)(O * K), 9 + (uint32_t)s, 0);
        for (int64_t r0 = 0; r0 < O; r0 += 7) mp_amx_pack_rows(wt, O, K, w + r0 * K, r0, O - r0 < 7 ? O - r0 : 7);
        size_t nonzero = 0;
        for (int64_t o = 0; o < O; o++)
            for (int64_t k = 0; k < K; k++) {
                assert_true(bits_of(mp_amx_weight_at(wt, O, K, o, k)) == bits_of(w[o * K + k]));
                nonzero += w[o * K + k] != 0.0f;
            }
        /* the rest is padding: as many nonzero values in the block as in W, every other value +0 */
        size_t nz_block = 0;
        for (size_t i = 0; i < n; i++) nz_block += wt[i] != 0;
        assert_int_equal(nz_block, nonzero);
        /* B tile of panel 0, K tile 0: pair row j holds (k = 2j, 2j+1) of column c at 2c, 2c+1 */
        if (O > 1 && K > 3) assert_true(mp_fwd_bf16_to_f32(wt[1 * 32 + 1 * 2 + 1]) == w[1 * K + 3]);
        free(w);
        free(wt);
    }
}

/* ================================================================ the emulated kernel */

/* y = the kernel (impl) over x, one call, and again with the batch split at t = split and the
 * panels split at panel 1: bit for bit the same as want. */
static void amx_splits(MpAmxImpl impl, const char *what, const float *x, int64_t ldx, const uint16_t *wt, int64_t O,
                       int64_t K, int64_t T, int64_t ldy, const float *want) {
    const int64_t P = (O + 31) / 32, split = T > 45 ? 45 : T / 2;
    float *y = calloc((size_t)(T * ldy), sizeof(float));
    mp_amx_matmul_panels(impl, y, ldy, x, ldx, wt, O, K, T, 0, P);
    if (count_diff(what, y, want, T, O, ldy, 1)) fail_msg("%s: one call differs from the reference", what);
    memset(y, 0, sizeof(float) * (size_t)(T * ldy));
    mp_amx_matmul_panels(impl, y, ldy, x, ldx, wt, O, K, split, 0, P);
    mp_amx_matmul_panels(impl, y + split * ldy, ldy, x + split * ldx, ldx, wt, O, K, T - split, 0, P);
    if (count_diff(what, y, want, T, O, ldy, 1)) fail_msg("%s: the batch split at %lld differs", what, (long long)split);
    memset(y, 0, sizeof(float) * (size_t)(T * ldy));
    mp_amx_matmul_panels(impl, y, ldy, x, ldx, wt, O, K, T, 1, P);
    mp_amx_matmul_panels(impl, y, ldy, x, ldx, wt, O, K, T, 0, 1);
    if (count_diff(what, y, want, T, O, ldy, 1)) fail_msg("%s: the panel split differs", what);
    free(y);
}

static const int64_t amx_shapes[][3] = {{1, 1, 1}, {1, 17, 31}, {32, 32, 32}, {31, 33, 33}, {45, 64, 96},
                                        {129, 70, 513}, {130, 100, 1100}};

static void test_amx_emulated_matches_reference(void **state) {
    (void)state;
    double worst = 0;
    long diff_fma = 0, diff_pairs = 0, total = 0;
    for (size_t s = 0; s < sizeof amx_shapes / sizeof amx_shapes[0]; s++) {
        for (int tiny = 0; tiny < 2; tiny++) {
            const int64_t T = amx_shapes[s][0], O = amx_shapes[s][1], K = amx_shapes[s][2], ldx = K + 3, ldy = O + 5;
            float *x = calloc((size_t)(T * ldx), sizeof(float)), *w = malloc(sizeof(float) * (size_t)(O * K));
            float *yt = calloc((size_t)(T * ldy), sizeof(float)), *yr = calloc((size_t)(T * ldy), sizeof(float));
            float *yp = calloc((size_t)(T * ldy), sizeof(float)), *y = calloc((size_t)(T * ldy), sizeof(float));
            uint16_t *pb = pack_buf(O, K);
            fill_bf16(x, (size_t)(T * ldx), 20 + (uint32_t)s, tiny);
            fill_bf16(w, (size_t)(O * K), 40 + (uint32_t)s, tiny);
            mp_amx_matmul_ref(yt, ldy, x, ldx, w, O, K, T);
            const MpFwdMat m = pack_for(MP_FWD_KERNEL_AMXEMU, pb, w, O, K);
            char what[128];
            snprintf(what, sizeof what, "amxemu T=%lld O=%lld K=%lld%s", (long long)T, (long long)O, (long long)K, tiny ? " (tiny)" : "");
            amx_splits(MP_AMX_EMU, what, x, ldx, pb, O, K, T, ldy, yt);
            for (int th = 1; th <= 2; th++) { /* through the dispatcher: panels split across threads */
                mp_test_set_threads(th);
                memset(y, 0, sizeof(float) * (size_t)(T * ldy));
                mp_fwd_matmul_kernel(MP_FWD_KERNEL_AMXEMU, y, ldy, x, ldx, &m, T);
                if (count_diff(what, y, yt, T, O, ldy, 1)) fail_msg("%s, %d threads: differs from the reference", what, th);
                for (int64_t t = 0; t < T; t++) /* nothing written past O */
                    for (int64_t o = O; o < ldy; o++) assert_true(y[t * ldy + o] == 0.0f);
            }
            if (!tiny) { /* accuracy, and the orders really differ */
                mp_fwd_matmul_ref(yr, ldy, x, ldx, w, O, K, T);
                mp_fwd_matmul_ref_pairs(yp, ldy, x, ldx, w, O, K, T);
                diff_fma += count_diff(what, yr, yt, T, O, ldy, 0);
                diff_pairs += count_diff(what, yp, yt, T, O, ldy, 0);
                total += T * O;
                f32_bound_check(what, yt, ldy, x, ldx, w, T, O, K, &worst);
            }
            free(x);
            free(w);
            free(yt);
            free(yr);
            free(yp);
            free(y);
            free(pb);
        }
    }
    mp_test_set_threads(2);
    print_message("amxemu == tiles reference bit for bit (%zu shapes x normal/tiny data, one call, batch split, panel split, 1 and "
                  "2 threads); |y - exact| at most %.3g of the f32 bound; the tiles order differs from fma in %ld and from "
                  "pairs in %ld of %ld outputs\n", sizeof amx_shapes / sizeof amx_shapes[0], worst, diff_fma, diff_pairs, total);
    assert_true(diff_fma > 0 && diff_pairs > 0);
}

/* ================================================================ the instruction */

static void test_amx_instruction_matches_reference(void **state) {
    (void)state;
    const char *why;
    if (!mp_amx_usable(&why)) {
        print_message("the AMX instructions cannot run here (%s): the emulated tile layer was checked instead\n", why);
        skip();
    }
    char line[256];
    const int same = mp_amx_selfcheck(line, sizeof line);
    print_message("self-check: %s\n", line);
    print_message("bit class of kernel amx here: %s\n", mp_fwd_bits_name(mp_fwd_kernel_bits(MP_FWD_KERNEL_AMX, 1)));
    double worst = 0;
    for (size_t s = 0; s < sizeof amx_shapes / sizeof amx_shapes[0]; s++) {
        const int64_t T = amx_shapes[s][0], O = amx_shapes[s][1], K = amx_shapes[s][2], ldx = K + 3, ldy = O + 5;
        float *x = calloc((size_t)(T * ldx), sizeof(float)), *w = malloc(sizeof(float) * (size_t)(O * K));
        float *yt = calloc((size_t)(T * ldy), sizeof(float)), *y1 = calloc((size_t)(T * ldy), sizeof(float));
        float *y2 = calloc((size_t)(T * ldy), sizeof(float));
        uint16_t *pb = pack_buf(O, K);
        fill_bf16(x, (size_t)(T * ldx), 60 + (uint32_t)s, 0);
        fill_bf16(w, (size_t)(O * K), 80 + (uint32_t)s, 0);
        mp_amx_matmul_ref(yt, ldy, x, ldx, w, O, K, T);
        const MpFwdMat m = pack_for(MP_FWD_KERNEL_AMX, pb, w, O, K);
        char what[128];
        snprintf(what, sizeof what, "amx T=%lld O=%lld K=%lld", (long long)T, (long long)O, (long long)K);
        mp_test_set_threads(1);
        mp_fwd_matmul_kernel(MP_FWD_KERNEL_AMX, y1, ldy, x, ldx, &m, T);
        mp_test_set_threads(2);
        mp_fwd_matmul_kernel(MP_FWD_KERNEL_AMX, y2, ldy, x, ldx, &m, T);
        if (count_diff(what, y2, y1, T, O, ldy, 1)) fail_msg("%s: 1 and 2 threads differ", what);
        if (same) {
            amx_splits(MP_AMX_REAL, what, x, ldx, pb, O, K, T, ldy, yt);
            if (count_diff(what, y1, yt, T, O, ldy, 1)) fail_msg("%s: differs from the tiles reference", what);
        } else
            f32_bound_check(what, y1, ldy, x, ldx, w, T, O, K, &worst); /* the instruction's own order: the f32 summation bound, measured */
        free(x);
        free(w);
        free(yt);
        free(y1);
        free(y2);
        free(pb);
    }
    if (same) print_message("amx == tiles reference bit for bit (%zu shapes; one call, batch and panel splits, 1 and 2 threads)\n",
                            sizeof amx_shapes / sizeof amx_shapes[0]);
    else print_message("amx differs from the SDM's order (class amx-hw): 1 and 2 threads identical, |y - exact| at most %.3g of the "
                       "f32 summation bound\n", worst);
}

/* ================================================================ auto and MASKPOS_KERNEL */

static void test_auto_keeps_the_default_class(void **state) {
    (void)state;
    char msg[512];
    for (int bf16 = 0; bf16 < 2; bf16++) {
        const int k = mp_fwd_kernel_choose(NULL, bf16, msg, sizeof msg), def = mp_fwd_bits_default(bf16);
        assert_true(k > 0 && mp_fwd_kernel_available((MpFwdKernel)k));
        assert_int_equal(mp_fwd_kernel_bits((MpFwdKernel)k, bf16), def);
        assert_int_equal(mp_fwd_kernel_choose("auto", bf16, msg, sizeof msg), k); /* cached: the same every time */
        print_message("%s weights: auto = %s (class %s; %s)\n", bf16 ? "bf16" : "f32", mp_fwd_kernel_name((MpFwdKernel)k),
                      mp_fwd_bits_name(def), mp_fwd_kernel_pick_note(def, bf16));
    }
    /* the default class: today's rule */
    const int want = mp_fwd_kernel_available(MP_FWD_KERNEL_AMX) && mp_amx_selfcheck(NULL, 0) ? MP_FWD_BITS_TILES
                     : mp_fwd_kernel_available(MP_FWD_KERNEL_AVX512BF16)                    ? MP_FWD_BITS_PAIRS
                                                                                             : MP_FWD_BITS_FMA;
    assert_int_equal(mp_fwd_bits_default(1), want);
    assert_int_equal(mp_fwd_bits_default(0), MP_FWD_BITS_FMA);
    /* class names: a kernel of that class for bf16; f32 weights stay fma */
    const char *classes[] = {"fma", "tiles", "pairs"};
    for (int i = 0; i < 3; i++) {
        const int b = mp_fwd_bits_parse(classes[i]), k = mp_fwd_kernel_choose(classes[i], 1, msg, sizeof msg);
        if (k < 0) {
            print_message("class %s: %s\n", classes[i], msg);
            assert_true(b == MP_FWD_BITS_PAIRS && !mp_fwd_kernel_available(MP_FWD_KERNEL_AVX2PAIRS));
            continue;
        }
        assert_int_equal(mp_fwd_kernel_bits((MpFwdKernel)k, 1), b);
        assert_int_equal(mp_fwd_kernel_bits((MpFwdKernel)mp_fwd_kernel_choose(classes[i], 0, msg, sizeof msg), 0), MP_FWD_BITS_FMA);
    }
    assert_int_equal(mp_fwd_kernel_choose("tiles", 1, msg, sizeof msg) > 0, 1); /* amxemu at least */
    assert_int_equal(mp_fwd_kernel_choose("nonsense", 1, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "unknown kernel or bit class"));
    assert_non_null(strstr(msg, "amxemu"));
    assert_non_null(strstr(msg, "tiles"));
}

/* ================================================================ end to end */

static void test_amxemu_probe_threads_identical(void **state) {
    (void)state;
    setenv("MASKPOS_KERNEL", "amxemu", 1);
    threads_identical(mp_test_tmpdir(), "--dtype bf16", "--compute bf16");
    unsetenv("MASKPOS_KERNEL");
}

/* A bf16 checkpoint of class fma, resumed by a run of class tiles: refused with the class and
 * the MASKPOS_KERNEL that resumes it; resumed with it: the bytes of the uninterrupted run. */
static void test_resume_keeps_the_bit_class(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 3 --dtype bf16");
    ids_write(ids, 6, 40, 300, -1, 21);
    const char *base = "probe %s --tokens %s --compute bf16 --per-head --quiet";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "MASKPOS_KERNEL=avx512 " MP_TEST_BIN " %s --out %s/full", base, d);
    int rc = mp_test_shell(out, sizeof out, cmd, model, ids);
    if (rc != 0) fail_msg("uninterrupted run failed: %s", out);
    snprintf(cmd, sizeof cmd, "MASKPOS_TEST_KILL_AFTER=3 MASKPOS_KERNEL=scalar " MP_TEST_BIN " %s --out %s/res --checkpoint-every 1", base, d);
    rc = mp_test_shell(out, sizeof out, cmd, model, ids);
    if (rc == 0) fail_msg("the run did not stop after 3 sequences: %s", out);
    snprintf(cmd, sizeof cmd, "MASKPOS_KERNEL=amxemu " MP_TEST_BIN " %s --out %s/res --resume", base, d);
    rc = mp_test_shell(out, sizeof out, cmd, model, ids);
    print_message("resume in another class: %s", out);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "bit class fma"));
    assert_non_null(strstr(out, "class tiles"));
    assert_non_null(strstr(out, "MASKPOS_KERNEL=fma resumes it"));
    snprintf(cmd, sizeof cmd, "MASKPOS_KERNEL=fma " MP_TEST_BIN " %s --out %s/res --resume", base, d);
    rc = mp_test_shell(out, sizeof out, cmd, model, ids);
    if (rc != 0) fail_msg("resume with MASKPOS_KERNEL=fma failed: %s", out);
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_heads.npy", "scores_diagnorm.npy"};
    for (int i = 0; i < 4; i++) {
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/full/%s", d, files[i]);
        snprintf(b, sizeof b, "%s/res/%s", d, files[i]);
        if (!files_equal(a, b)) fail_msg("%s differs between the resumed and the uninterrupted run", files[i]);
    }
    rc = mp_test_shell(out, sizeof out, "grep -q '\"matmul_bits\": \"fma\"' %s/res/meta.json", d);
    assert_int_equal(rc, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fma_ftz_cases),
        cmocka_unit_test(test_fma_ftz_matches_vdpbf16ps),
        cmocka_unit_test(test_pairs_kernels_on_subnormals),
        cmocka_unit_test(test_tile_layout),
        cmocka_unit_test(test_amx_emulated_matches_reference),
        cmocka_unit_test(test_amx_instruction_matches_reference),
        cmocka_unit_test(test_auto_keeps_the_default_class),
        cmocka_unit_test(test_amxemu_probe_threads_identical),
        cmocka_unit_test(test_resume_keeps_the_bit_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
