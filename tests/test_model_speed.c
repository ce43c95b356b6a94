/* test_model_speed.c — the fast paths of the forward pass (docs/speed.md): bf16 compute and the
 * matmul kernel dispatch, each against an independent reference, on every kernel this machine
 * can run (forced through MASKPOS_KERNEL=ref|scalar|avx2|avx512 or mp_fwd_kernel_set):
 *   - bf16 rounding: round-to-nearest-even against hand-worked bit patterns (ties, NaN, inf);
 *   - matmul with f32 and bf16 packed weights, every kernel == mp_fwd_matmul_ref (on
 *     bf16-rounded operands for bf16) bit for bit, on awkward shapes, 1 and 2 threads;
 *   - `probe --compute bf16` and `logits --compute bf16` against torch with bf16 Linear layers
 *     (tests/ref/probe_ref_bf16.py, float64 accumulation) for every architecture of
 *     test_model_fwd.c; and the distance of bf16 from the f32 path within the stated bound;
 *   - `logits --compute bf16` on bf16 GGUFs against llama.cpp (which multiplies bf16 weights by
 *     bf16-rounded activations as well), every kernel;
 *   - every kernel gives byte-identical outputs, for f32 and bf16; 1 and 2 threads too;
 *   - bf16 keeps half the weight bytes of f32 (mp_fwd_plan_bytes) and bad flags exit 2.
 * Tolerances (docs/speed.md §Bounds), relative to the map's max |score|:
 *   bf16 vs its torch reference: max 2e-3 and mean 2e-5 (measured max ≤ 5e-4, mean ≤ 2e-6; f32
 *   vs float64 sums give ~1e-7, and the rare activation whose bf16 rounding flips — its f32 value
 *   sits within rounding error of a bf16 rounding boundary — moves one product by 2^-8 of itself,
 *   which shows in the max, not the mean); bf16 vs the f32 path 2e-2 (measured ≤ 4e-3: the bf16 rounding of inputs
 *   and weights, 2^-9 relative each, through 2-3 layers of random weights).
 *   log-probs: bf16 vs torch-bf16 |Δ| ≤ 1e-3 + 1e-3·|ref|; vs llama.cpp on a bf16 GGUF |Δ| ≤ 1e-2
 *   and smaller than the f32 path's distance (measured 5e-7 .. 7e-3 against 1.1e-2 .. 1.8e-2 for
 *   f32; llama.cpp's own summation order and its f32 attention details set the floor).
 */
#include "test_model_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/util.h"         /* mp_file_exists */
#include "load/model.h"        /* mp_model_open */
#include "model/fwd.h"         /* mp_fwd_plan_bytes, MP_FWD_COMPUTE_* */
#include "model/fwd_amx.h"     /* mp_amx_matmul_ref, the tile layout */
#include "model/fwd_kernels.h" /* kernels, bf16 helpers */


static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* ================================================================ bf16 rounding */

static void test_bf16_rounding(void **state) {
    (void)state;
    /* {f32 bits, expected bf16 bits}: exact, below/above half, ties to even (both ways), carry
     * into the exponent, overflow to inf, inf, NaN stays NaN, negative, subnormal */
    const uint32_t cases[][2] = {{0x3f800000u, 0x3f80u}, {0x3f807fffu, 0x3f80u}, {0x3f808001u, 0x3f81u},
                                 {0x3f808000u, 0x3f80u}, {0x3f818000u, 0x3f82u}, {0x3fffffffu, 0x4000u},
                                 {0x7f7fffffu, 0x7f80u}, {0x7f800000u, 0x7f80u}, {0xbf808001u, 0xbf81u},
                                 {0x00018000u, 0x0002u}, {0x00000000u, 0x0000u}, {0x80000000u, 0x8000u}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint16_t b = mp_fwd_bf16_from_f32(bits_f32(cases[i][0]));
        if (b != cases[i][1]) fail_msg("bf16(0x%08x) = 0x%04x, expected 0x%04x", cases[i][0], b, cases[i][1]);
        assert_int_equal(f32_bits(mp_fwd_bf16_to_f32(b)), (uint32_t)b << 16);
    }
    const uint16_t nan = mp_fwd_bf16_from_f32(bits_f32(0x7f800001u)); /* signalling NaN, payload in low bits */
    assert_true(isnan(mp_fwd_bf16_to_f32(nan)));
    float x[3] = {1.00390625f, 3.14159265f, -2.5e-3f}; /* 1 + 2^-8 is a tie: rounds to 1 */
    mp_fwd_bf16_round(x, 3);
    assert_true(x[0] == 1.0f);
    assert_int_equal(f32_bits(x[1]) & 0xffffu, 0);
    assert_true(fabsf(x[1] - 3.14159265f) <= 3.14159265f / 256);
    assert_int_equal(f32_bits(x[2]) & 0xffffu, 0);
}

/* ================================================================ matmul: every kernel */


static void test_matmul_every_kernel_matches_reference(void **state) {
    (void)state;
    const int64_t shapes[][3] = {{1, 1, 1}, {13, 70, 300}, {17, 33, 257}, {300, 600, 300}, {9, 545, 700}};
    int ran[MP_FWD_KERNEL_COUNT] = {0};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t T = shapes[s][0], O = shapes[s][1], K = shapes[s][2];
        const int64_t ldx = K + 3, ldy = O + 5;
        float *x = malloc(sizeof(float) * (size_t)(T * ldx)), *w = malloc(sizeof(float) * (size_t)(O * K));
        float *y = malloc(sizeof(float) * (size_t)(T * ldy)), *yr = malloc(sizeof(float) * (size_t)(T * ldy));
        float *yp = malloc(sizeof(float) * (size_t)(T * ldy)); /* the pairs order (bf16 weights) */
        float *yt = malloc(sizeof(float) * (size_t)(T * ldy)); /* the tiles order (bf16 weights) */
        const size_t np = mp_fwd_mat_floats(O, K), nt = mp_amx_weight_elems(O, K);
        float *pf = aligned_alloc(64, (np * 4 + 63) / 64 * 64);
        uint16_t *pb = aligned_alloc(64, (np * 2 + 63) / 64 * 64), *pt = aligned_alloc(64, (nt * 2 + 63) / 64 * 64);
        mp_test_fill(x, (size_t)(T * ldx), 1 + (uint32_t)s, 997.0f);
        mp_test_fill(w, (size_t)(O * K), 100 + (uint32_t)s, 997.0f);
        for (int bf = 0; bf < 2; bf++) {
            MpFwdMat m, mt;
            memset(&m, 0, sizeof m);
            if (bf) {
                /* bf16 operands: x and W rounded; packed in uneven row chunks (7, then 32s), in the
                 * panels and in the tile layout */
                mp_fwd_bf16_round(x, (size_t)(T * ldx));
                mp_fwd_bf16_round(w, (size_t)(O * K));
                m.pb = pb;
                m.out = O;
                m.in = K;
                mt = m;
                mt.pb = pt;
                mt.layout = MP_FWD_LAYOUT_TILES;
                for (int64_t r0 = 0; r0 < O;) {
                    const int64_t n = r0 == 0 ? (O < 7 ? O : 7) : (O - r0 < 32 ? O - r0 : 32);
                    mp_fwd_mat_pack_bf16_rows(&m, w + r0 * K, r0, n);
                    mp_fwd_mat_pack_bf16_rows(&mt, w + r0 * K, r0, n);
                    r0 += n;
                }
            } else {
                m.p = pf;
                mp_fwd_mat_pack(&m, w, O, K);
                mt = m;
            }
            memset(yr, 0, sizeof(float) * (size_t)(T * ldy));
            mp_fwd_matmul_ref(yr, ldy, x, ldx, w, O, K, T);
            memset(yp, 0, sizeof(float) * (size_t)(T * ldy));
            mp_fwd_matmul_ref_pairs(yp, ldy, x, ldx, w, O, K, T);
            memset(yt, 0, sizeof(float) * (size_t)(T * ldy));
            mp_amx_matmul_ref(yt, ldy, x, ldx, w, O, K, T);
            for (int k = MP_FWD_KERNEL_REF; k < MP_FWD_KERNEL_COUNT; k++) {
                if (!mp_fwd_kernel_available((MpFwdKernel)k)) continue;
                /* each bit class against its own reference order (f32 weights: all ascending fmaf) */
                const int bits = mp_fwd_kernel_bits((MpFwdKernel)k, bf);
                if (bits == MP_FWD_BITS_AMXHW) continue; /* no reference: test_model_amx measures it */
                const float *want = bits == MP_FWD_BITS_PAIRS ? yp : bits == MP_FWD_BITS_TILES ? yt : yr;
                const MpFwdMat *mk = mp_fwd_kernel_layout((MpFwdKernel)k) == MP_FWD_LAYOUT_TILES ? &mt : &m;
                assert_int_equal(mp_fwd_kernel_set((MpFwdKernel)k), k);
                for (int th = 1; th <= 2; th++) {
                    mp_test_set_threads(th);
                    memset(y, 0, sizeof(float) * (size_t)(T * ldy));
                    mp_fwd_matmul(y, ldy, x, ldx, mk, T);
                    for (int64_t t = 0; t < T; t++)
                        for (int64_t o = 0; o < O; o++)
                            if (f32_bits(y[t * ldy + o]) != f32_bits(want[t * ldy + o]))
                                fail_msg("%s kernel %s, %d threads, T=%lld O=%lld K=%lld: y[%lld,%lld] = %.9g, reference %.9g",
                                         bf ? "bf16" : "f32", mp_fwd_kernel_name((MpFwdKernel)k), th, (long long)T, (long long)O,
                                         (long long)K, (long long)t, (long long)o, y[t * ldy + o], want[t * ldy + o]);
                }
                ran[k] = 1;
            }
        }
        free(x);
        free(w);
        free(y);
        free(yr);
        free(yp);
        free(yt);
        free(pf);
        free(pb);
        free(pt);
    }
    mp_fwd_kernel_set(MP_FWD_KERNEL_AUTO);
    mp_test_set_threads(2);
    print_message("kernels run:");
    for (int k = MP_FWD_KERNEL_REF; k < MP_FWD_KERNEL_COUNT; k++)
        if (ran[k]) print_message(" %s", mp_fwd_kernel_name((MpFwdKernel)k));
    print_message(" (auto = %s)\n", mp_fwd_kernel_name(mp_fwd_kernel_get()));
    assert_true(ran[MP_FWD_KERNEL_REF] && ran[MP_FWD_KERNEL_SCALAR]);
    assert_int_equal(mp_fwd_kernel_set((MpFwdKernel)MP_FWD_KERNEL_COUNT), -1);
    assert_int_equal(mp_fwd_kernel_parse("avx512"), MP_FWD_KERNEL_AVX512);
    assert_int_equal(mp_fwd_kernel_parse("amx"), MP_FWD_KERNEL_AMX);
    assert_int_equal(mp_fwd_kernel_parse("amx2"), -1);
    assert_true(ran[MP_FWD_KERNEL_AMXEMU]); /* the emulated tile layer runs on every CPU */
}

/* The vdpbf16ps kernel (bf16 weights): bit for bit the pair order of mp_fwd_matmul_ref_pairs, and
 * both within the f32 summation bound of the exact sum (float64 of the same exact products):
 * |y - exact| <= (K + 1) * 2^-24 * sum |x w|. Skipped on a CPU without AVX512-BF16. */
static void test_matmul_avx512bf16_kernel(void **state) {
    (void)state;
    if (!mp_fwd_kernel_available(MP_FWD_KERNEL_AVX512BF16)) {
        print_message("this CPU (or build) lacks avx512_bf16: the vdpbf16ps kernel cannot run here\n");
        skip();
    }
    const int64_t T = 37, O = 100, K = 4099, ldx = K + 1, ldy = O + 3;
    float *x = malloc(sizeof(float) * (size_t)(T * ldx)), *w = malloc(sizeof(float) * (size_t)(O * K));
    float *y = calloc((size_t)(T * ldy), sizeof(float)), *yp = calloc((size_t)(T * ldy), sizeof(float));
    float *yr = calloc((size_t)(T * ldy), sizeof(float));
    uint16_t *pb = aligned_alloc(64, (mp_fwd_mat_floats(O, K) * 2 + 63) / 64 * 64);
    mp_test_fill(x, (size_t)(T * ldx), 7, 997.0f);
    mp_test_fill(w, (size_t)(O * K), 8, 997.0f);
    mp_fwd_bf16_round(x, (size_t)(T * ldx));
    mp_fwd_bf16_round(w, (size_t)(O * K));
    MpFwdMat m = {.pb = pb, .out = O, .in = K};
    for (int64_t r0 = 0; r0 < O; r0 += 32) mp_fwd_mat_pack_bf16_rows(&m, w + r0 * K, r0, O - r0 < 32 ? O - r0 : 32);
    mp_fwd_matmul_ref_pairs(yp, ldy, x, ldx, w, O, K, T);
    mp_fwd_matmul_ref(yr, ldy, x, ldx, w, O, K, T);
    assert_int_equal(mp_fwd_kernel_set(MP_FWD_KERNEL_AVX512BF16), MP_FWD_KERNEL_AVX512BF16);
    double worst = 0, worst_ref = 0;
    size_t same_asc = 0;
    for (int th = 1; th <= 2; th++) {
        mp_test_set_threads(th);
        mp_fwd_matmul(y, ldy, x, ldx, &m, T);
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < O; o++) {
                double exact = 0, mag = 0;
                for (int64_t k = 0; k < K; k++) {
                    const double p = (double)x[t * ldx + k] * (double)w[o * K + k];
                    exact += p; /* float64 of exact products: error far below the f32 bound */
                    mag += fabs(p);
                }
                const float v = y[t * ldy + o];
                if (f32_bits(v) != f32_bits(yp[t * ldy + o]))
                    fail_msg("avx512bf16, %d threads: y[%lld,%lld] = %.9g, pair-order reference %.9g", th, (long long)t, (long long)o, v,
                             yp[t * ldy + o]);
                const double bound = (double)(K + 1) * ldexp(1.0, -24) * mag;
                if (!(fabs(v - exact) <= bound)) fail_msg("y[%lld,%lld] = %.9g, exact %.9g: off by more than %.3g", (long long)t, (long long)o, v, exact, bound);
                if (fabs(v - exact) / bound > worst) worst = fabs(v - exact) / bound;
                if (fabs(yr[t * ldy + o] - exact) / bound > worst_ref) worst_ref = fabs(yr[t * ldy + o] - exact) / bound;
                same_asc += th == 1 && f32_bits(v) == f32_bits(yr[t * ldy + o]);
            }
    }
    print_message("avx512bf16 == pair-order reference bit for bit (1 and 2 threads); |y - exact| at most %.3g of the bound "
                  "(ascending fmaf reference %.3g); equal to the ascending order in %zu of %lld entries\n",
                  worst, worst_ref, same_asc, (long long)(T * O));
    mp_fwd_kernel_set(MP_FWD_KERNEL_AUTO);
    mp_test_set_threads(2);
    free(x);
    free(w);
    free(y);
    free(yp);
    free(yr);
    free(pb);
}

/* ================================================================ against torch (bf16 Linear) */

/* max |a - b| / max |ref| over the observed entries of two maps of one shape; *mean (may be
 * NULL) gets mean |a - b| / max |ref|. */
static double map_rel_diff(const char *what, const char *pa, const char *pb, const char *pref, double *mean) {
    size_t n1, n2, n3;
    int64_t s1[4], s2[4], s3[4];
    double *a = npy_load_f64(pa, &n1, s1), *b = npy_load_f64(pb, &n2, s2), *r = npy_load_f64(pref, &n3, s3);
    if (n1 != n2 || n1 != n3 || memcmp(s1, s2, sizeof s1)) fail_msg("%s: shapes differ", what);
    double mx = 0, err = 0, sum = 0;
    size_t cnt = 0;
    for (size_t i = 0; i < n1; i++) {
        if (isnan(a[i]) != isnan(b[i])) fail_msg("%s: masked entries differ at flat index %zu", what, i);
        if (isnan(r[i])) continue;
        if (fabs(r[i]) > mx) mx = fabs(r[i]);
        if (fabs(a[i] - b[i]) > err) err = fabs(a[i] - b[i]);
        sum += fabs(a[i] - b[i]);
        cnt++;
    }
    free(a);
    free(b);
    free(r);
    if (mean) *mean = sum / (double)(cnt ? cnt : 1) / mx;
    return err / mx;
}

typedef struct Bf16Case {
    const char *name, *mk, *probe, *layers;
    int S, logits;
} Bf16Case;

static const Bf16Case bf16_cases[] = {
    {"llama-gqa", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300", "", "1,2,3", 24, 1},
    {"llama-llama3-bf16-tied", "--arch llama --rope-scaling llama3 --layers 2 --tie --dtype bf16 --shards 2 --vocab 300", "", "1,2", 40, 1},
    {"mistral-mha-f16", "--arch mistral --layers 2 --heads 4 --kv-heads 4 --dtype f16 --vocab 300 --seed 5", "", "1,2", 20, 0},
    {"qwen2-bias", "--arch qwen2 --layers 2 --vocab 300 --seed 3", "", "1,2", 24, 1},
    {"qwen3-qknorm", "--arch qwen3 --layers 2 --heads 4 --kv-heads 1 --head-dim 24 --vocab 300 --seed 4", "", "1,2", 24, 1},
    {"phi3-longrope-partial", "--arch phi3 --rope-scaling longrope --partial-rotary 0.5 --layers 2 --vocab 300", "", "1,2", 24, 1},
    {"llama-bidirectional", "--arch llama --layers 2 --vocab 300 --seed 9", "--bidirectional", "1,2", 20, 0},
    {"qwen3-no-rope", "--arch qwen3 --layers 2 --vocab 300 --seed 8", "--no-rope", "1,2", 20, 0},
};

static void kernel_env(int k) { setenv("MASKPOS_KERNEL", mp_fwd_kernel_name((MpFwdKernel)k), 1); }

static void test_bf16_against_torch_every_kernel(void **state) {
    (void)state;
    double worst_ref = 0, worst_f32 = 0, worst_lp = 0;
    for (size_t c = 0; c < sizeof bf16_cases / sizeof bf16_cases[0]; c++) {
        const Bf16Case *k = &bf16_cases[c];
        const char *d = mp_test_tmpdir();
        char model[256], ids[256], out[16384], a[512], b[512], r[512];
        snprintf(model, sizeof model, "%s/model", d);
        snprintf(ids, sizeof ids, "%s/ids.npy", d);
        model_make(model, k->mk);
        ids_write(ids, 2, k->S, 300, -1, 40 + (uint32_t)c);
        int rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/probe_ref_bf16.py %s %s %s --layers %s %s %s", MP_SOURCE_DIR,
                               model, ids, d, k->layers, k->probe, k->logits ? "--logits" : "");
        if (rc != 0) fail_msg("%s: probe_ref_bf16.py failed (%d): %s", k->name, rc, out);
        snprintf(r, sizeof r, "%s/ref_scores_heads.npy", d);
        /* the f32 path, once (auto kernel) */
        unsetenv("MASKPOS_KERNEL");
        rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/f32 --layers all --per-head --quiet %s", model, ids, d, k->probe);
        if (rc != 0) fail_msg("%s: probe f32 failed (%d): %s", k->name, rc, out);
        char first[512] = "", first_of[MP_FWD_BITS_COUNT][512] = {{0}}; /* the first kernel's maps, per bit class */
        for (int kern = MP_FWD_KERNEL_REF; kern < MP_FWD_KERNEL_COUNT; kern++) {
            if (!mp_fwd_kernel_available((MpFwdKernel)kern)) continue;
            kernel_env(kern);
            rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/bf16_%d --layers all --per-head --quiet --compute bf16 %s",
                             model, ids, d, kern, k->probe);
            if (rc != 0) fail_msg("%s: probe --compute bf16 (kernel %s) failed (%d): %s", k->name, mp_fwd_kernel_name((MpFwdKernel)kern), rc, out);
            snprintf(a, sizeof a, "%s/bf16_%d/scores_heads.npy", d, kern);
            double m_ref, m_f32;
            const double e_ref = map_rel_diff(k->name, a, r, r, &m_ref);
            if (!(e_ref <= 2e-3 && m_ref <= 2e-5))
                fail_msg("%s (kernel %s): bf16 scores differ from torch-bf16 by %.3g (max) / %.3g (mean) of max |score| (bounds 2e-3 / 2e-5)",
                         k->name, mp_fwd_kernel_name((MpFwdKernel)kern), e_ref, m_ref);
            if (e_ref > worst_ref) worst_ref = e_ref;
            if (!*first) {
                snprintf(first, sizeof first, "%s", a);
                snprintf(b, sizeof b, "%s/f32/scores_heads.npy", d);
                const double e_f32 = map_rel_diff(k->name, a, b, b, &m_f32);
                print_message("%-24s |bf16 - torch-bf16| max %.2g mean %.2g; |bf16 - f32 path| max %.2g mean %.2g (of max |score|)\n",
                              k->name, e_ref, m_ref, e_f32, m_f32);
                if (!(e_f32 <= 2e-2)) fail_msg("%s: bf16 differs from the f32 path by %.3g of max |score| (bound 2e-2)", k->name, e_f32);
                if (e_f32 > worst_f32) worst_f32 = e_f32;
            }
            /* kernels of one bit class: the same bytes; another class: its own sums, held to the bounds above */
            const int bits = mp_fwd_kernel_bits((MpFwdKernel)kern, 1);
            if (!first_of[bits][0]) {
                snprintf(first_of[bits], sizeof first_of[bits], "%s", a);
                if (bits != MP_FWD_BITS_FMA)
                    print_message("%-24s kernel %s (class %s): |bf16 - torch-bf16| max %.2g mean %.2g\n", k->name,
                                  mp_fwd_kernel_name((MpFwdKernel)kern), mp_fwd_bits_name(bits), e_ref, m_ref);
            } else if (!files_equal(first_of[bits], a)) {
                fail_msg("%s: bf16 scores of kernel %s differ from those of the first kernel of its class %s (they must be "
                         "bit-identical)", k->name, mp_fwd_kernel_name((MpFwdKernel)kern), mp_fwd_bits_name(bits));
            }
        }
        unsetenv("MASKPOS_KERNEL");
        if (!k->logits) continue;
        const double e = logits_vs_ref(k->name, model, ids, k->S, d, "--compute bf16", 1e-3, 1e-3);
        if (e > worst_lp) worst_lp = e;
    }
    print_message("worst: bf16 vs torch-bf16 scores %.2g, bf16 vs f32 scores %.2g, log-probs vs torch-bf16 %.2g\n", worst_ref,
                  worst_f32, worst_lp);
}

/* ================================================================ against llama.cpp (bf16 GGUF) */

static void test_bf16_logprobs_match_llama_cpp(void **state) {
    (void)state;
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/oracle-llama/node_modules/node-llama-cpp/package.json", MP_SOURCE_DIR);
    if (!mp_file_exists(p)) fail_msg("llama.cpp oracle not installed: run scripts/setup.sh --test (scripts/setup_oracle_llama.sh)");
    const char *archs[][2] = {{"llama", "--arch llama"}, {"llama-llama3", "--arch llama --rope-scaling llama3"},
                              {"qwen3", "--arch qwen3"}, {"qwen2", "--arch qwen2"}, {"phi3", "--arch phi3"}};
    const char *d = mp_test_tmpdir();
    enum { T = 40, V = 300 };
    char list[1024];
    ids_list(list, sizeof list, T, V, 777);
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        char model[512], mk[512], out[8192], ll[512];
        snprintf(model, sizeof model, "%s/%s.gguf", d, archs[a][0]);
        snprintf(mk, sizeof mk, "%s --layers 2 --heads 4 --kv-heads 2 --vocab %d --seed %zu --dtype bf16 --format gguf", archs[a][1], V, 61 + a);
        model_make(model, mk);
        snprintf(ll, sizeof ll, "%s/%s_ll.f64", d, archs[a][0]);
        int rc = mp_test_shell(out, sizeof out, "cd %s/tests/oracle-llama && node logits.mjs %s %s %s", MP_SOURCE_DIR, model, list, ll);
        if (rc != 0) fail_msg("%s: llama.cpp oracle failed (%d): %s", archs[a][0], rc, out);
        double *lg = malloc(sizeof(double) * T * V);
        FILE *f = fopen(ll, "rb");
        assert_non_null(f);
        assert_int_equal(fread(lg, sizeof(double), (size_t)T * V, f), (size_t)T * V);
        fclose(f);
        double err_k[MP_FWD_KERNEL_COUNT + 1] = {0};
        for (int kern = MP_FWD_KERNEL_REF; kern <= MP_FWD_KERNEL_COUNT; kern++) { /* COUNT: the f32 path, for scale */
            const int f32 = kern == MP_FWD_KERNEL_COUNT;
            if (!f32 && !mp_fwd_kernel_available((MpFwdKernel)kern)) continue;
            if (f32) unsetenv("MASKPOS_KERNEL");
            else kernel_env(kern);
            char lp[512];
            snprintf(lp, sizeof lp, "%s/%s_lp_%d.npy", d, archs[a][0], kern);
            rc = mp_test_run(out, sizeof out, "logits %s --tokens %s --compute %s --out %s", model, list, f32 ? "f32" : "bf16", lp);
            if (rc != 0) fail_msg("%s: maskpos logits failed: %s", archs[a][0], out);
            size_t n;
            double *mine = npy_load_f64(lp, &n, NULL);
            assert_int_equal(n, (size_t)T * V);
            err_k[kern] = logprob_diff(archs[a][0], mine, lg, T, V, -1, 0); /* bounds checked below */
            free(mine);
            if (!f32 && !(err_k[kern] <= 1e-2))
                fail_msg("%s (kernel %s): bf16 log-probs differ from llama.cpp by %.3g (bound 1e-2)", archs[a][0],
                         mp_fwd_kernel_name((MpFwdKernel)kern), err_k[kern]);
        }
        /* llama.cpp rounds activations to bf16 before bf16 matmuls too: the bf16 path is the closer */
        if (!(err_k[MP_FWD_KERNEL_REF] < err_k[MP_FWD_KERNEL_COUNT]))
            fail_msg("%s: the bf16 path (%.3g) is not closer to llama.cpp on a bf16 GGUF than the f32 path (%.3g)", archs[a][0],
                     err_k[MP_FWD_KERNEL_REF], err_k[MP_FWD_KERNEL_COUNT]);
        unsetenv("MASKPOS_KERNEL");
        print_message("%-14s max |log-prob maskpos - llama.cpp| on a bf16 GGUF: bf16 path %.3g (kernel ref), f32 path %.3g", archs[a][0],
                      err_k[MP_FWD_KERNEL_REF], err_k[MP_FWD_KERNEL_COUNT]);
        if (mp_fwd_kernel_available(MP_FWD_KERNEL_AVX512BF16)) print_message(", kernel avx512bf16 %.3g", err_k[MP_FWD_KERNEL_AVX512BF16]);
        print_message("\n");
        free(lg);
    }
}

/* ================================================================ determinism, memory, flags */

static void test_bf16_threads_bit_identical(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192];
    threads_identical(d, "--dtype bf16", "--compute bf16");
    /* meta.json records the mode and the kernel */
    int rc = mp_test_shell(out, sizeof out, "grep -q '\"compute_mode\": \"bf16\"' %s/t1/meta.json && grep -q '\"matmul_kernel\"' %s/t1/meta.json", d, d);
    assert_int_equal(rc, 0);
}

static void test_bf16_weight_bytes_halved(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256];
    snprintf(model, sizeof model, "%s/m", d);
    MpModel m;
    MpErr e;
    model_make_open(&m, model, "--arch llama --layers 2 --dim 128 --heads 4 --kv-heads 2 --ffn 320 --vocab 300 --dtype bf16");
    MpFwdConfig c32 = {.n_layers = 2, .max_seq = 64, .causal = 1, .rope = 1}, c16 = c32;
    c16.compute = MP_FWD_COMPUTE_BF16;
    uint64_t w32, a32, w16, a16;
    mp_fwd_plan_bytes(&m, &c32, &w32, &a32);
    mp_fwd_plan_bytes(&m, &c16, &w16, &a16);
    /* the stored bf16 bytes of the layers: every Linear weight once, 2 bytes per value */
    const uint64_t lin = 2ull * 2 * (128ull * 128 + 2 * 64ull * 128 + 128ull * 128 + 3ull * 320 * 128);
    print_message("weights: f32 %llu bytes, bf16 %llu bytes, stored Linear bf16 bytes %llu\n", (unsigned long long)w32,
                  (unsigned long long)w16, (unsigned long long)lin);
    assert_true(w16 < w32 * 0.52);
    assert_true(w16 >= lin && w16 < lin + 16384); /* + norms (f32) and 64-byte carving */
    assert_int_equal(a16, a32);
    MpFwd f;
    if (mp_fwd_init(&f, &m, &c16, &e) != MP_OK) fail_msg("%s", e.msg);
    assert_int_equal(f.w->layers[0].q.dtype, MP_FWD_DT_BF16); /* the handle holds bf16 values */
    assert_non_null(f.w->layers[0].q.data);
    mp_fwd_free(&f);
    setenv("MASKPOS_KERNEL", "bogus", 1);
    assert_int_equal(mp_fwd_init(&f, &m, &c16, &e), MP_ERR);
    print_message("MASKPOS_KERNEL=bogus: %s\n", e.msg);
    unsetenv("MASKPOS_KERNEL");
    mp_model_free(&m);
}

static void test_compute_flag_errors(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[8192];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch llama --layers 1 --vocab 300");
    ids_write(ids, 1, 8, 300, -1, 1);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/o --compute f16", model, ids, d), 2);
    assert_non_null(strstr(out, "--compute"));
    assert_int_equal(mp_test_run(out, sizeof out, "logits %s --tokens 1,2 --compute bf32", model), 2);
    assert_int_equal(mp_test_shell(out, sizeof out, "MASKPOS_KERNEL=amx2 %s logits %s --tokens 1,2", MP_TEST_BIN, model), 2);
    assert_non_null(strstr(out, "MASKPOS_KERNEL=amx2: unknown kernel or bit class"));
    if (!mp_fwd_kernel_available(MP_FWD_KERNEL_AMX)) { /* a kernel this CPU cannot run: one line that says why */
        assert_int_equal(mp_test_shell(out, sizeof out, "MASKPOS_KERNEL=amx %s logits %s --tokens 1,2", MP_TEST_BIN, model), 2);
        assert_non_null(strstr(out, "MASKPOS_KERNEL=amx: this CPU or build cannot run it: "));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_matmul_every_kernel_matches_reference),
        cmocka_unit_test(test_matmul_avx512bf16_kernel),
        cmocka_unit_test(test_bf16_against_torch_every_kernel),
        cmocka_unit_test(test_bf16_logprobs_match_llama_cpp),
        cmocka_unit_test(test_bf16_threads_bit_identical),
        cmocka_unit_test(test_bf16_weight_bytes_halved),
        cmocka_unit_test(test_compute_flag_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
