/* test_model_kernels.c — src/model/fwd_kernels.c: every fast kernel against its naive reference.
 *   - packed, blocked matmul == reference bit for bit, on awkward shapes (rows not a multiple of
 *     the 8-row block and across the 256-row cache block, outputs not a multiple of the 32-column
 *     panel and across the 16-panel group, inner sizes across the 256-chunk boundary), with 1 and
 *     2 OpenMP threads;
 *   - attention scores (causal and not) from packed keys == reference bit for bit, at head dims and
 *     lengths on and off the register blocks; masked entries −inf;
 *   - softmax rows sum to 1, masked entries exact zeros; attention mix == the plain fmaf loop bit
 *     for bit and within 1e-5 of a double sum;
 *   - the softmax's exponential (mp_fwd_exp_neg) within 1 ulp of libm's double exp on every 61st
 *     float in [-104, 0] and every float whose result is subnormal; exactly 1 at ±0, 0 at -inf and
 *     below -104, NaN at NaN; the softmax within 1e-6 of a double softmax, an exact 0 where a
 *     score is -inf, and the same bits wherever the row sits in memory (vector loops peel
 *     differently at each alignment, the lanes of the sum must not move);
 *   - RoPE: rotate-half pairing (i, i+R/2) against hand-computed values; dims ≥ R untouched;
 *   - RMSNorm against a double computation.
 */
#include "testutil.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#include "model/fwd_kernels.h"



static void test_matmul_matches_reference(void **state) {
    (void)state;
    const int64_t shapes[][3] = {{1, 1, 1}, {13, 70, 300}, {8, 32, 256}, {17, 33, 257}, {40, 96, 600}, {200, 64, 40}, {300, 600, 300}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t T = shapes[s][0], O = shapes[s][1], K = shapes[s][2];
        const int64_t ldx = K + 3, ldy = O + 5; /* strided rows, as the forward pass uses */
        float *x = calloc((size_t)(T * ldx), sizeof *x), *w = calloc((size_t)(O * K), sizeof *w);
        float *y0 = calloc((size_t)(T * ldy), sizeof *y0), *y1 = calloc((size_t)(T * ldy), sizeof *y1),
              *y2 = calloc((size_t)(T * ldy), sizeof *y2);
        MpFwdMat m = {.p = calloc(mp_fwd_mat_floats(O, K), sizeof(float))};
        mp_test_fill(x, (size_t)(T * ldx), 1 + (uint32_t)s, 1000.0f);
        mp_test_fill(w, (size_t)(O * K), 100 + (uint32_t)s, 1000.0f);
        mp_fwd_mat_pack(&m, w, O, K);
        mp_fwd_matmul_ref(y0, ldy, x, ldx, w, O, K, T);
        mp_test_set_threads(1);
        mp_fwd_matmul(y1, ldy, x, ldx, &m, T);
        mp_test_set_threads(2);
        mp_fwd_matmul(y2, ldy, x, ldx, &m, T);
        size_t bad = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = 0; o < O; o++) {
                const size_t k = (size_t)(t * ldy + o);
                if (memcmp(&y0[k], &y1[k], 4) || memcmp(&y0[k], &y2[k], 4)) {
                    if (bad < 3) print_message("T%lld O%lld K%lld: y[%lld,%lld] ref %.9g fast %.9g / %.9g\n", (long long)T,
                                               (long long)O, (long long)K, (long long)t, (long long)o, y0[k], y1[k], y2[k]);
                    bad++;
                }
            }
        /* the padding columns of y were not written */
        for (int64_t t = 0; t < T; t++)
            for (int64_t o = O; o < ldy; o++) assert_true(y1[t * ldy + o] == 0.0f);
        if (bad) fail_msg("matmul %lldx%lldx%lld: %zu entries differ from the reference", (long long)T, (long long)O, (long long)K, bad);
        free(m.p);
        free(x);
        free(w);
        free(y0);
        free(y1);
        free(y2);
    }
}

/* The plain attention mix in the reference order: o_i[d] = fmaf over j ascending from 0. */
static void mix_plain(float *o, int ldo, const float *p, const float *v, int ldv, int HS, int T, int causal) {
    for (int i = 0; i < T; i++)
        for (int d = 0; d < HS; d++) {
            float acc = 0.0f;
            for (int j = 0; j < (causal ? i + 1 : T); j++) acc = fmaf(p[i * T + j], v[j * ldv + d], acc);
            o[i * ldo + d] = acc;
        }
}

static void test_attention_matches_reference(void **state) {
    (void)state;
    /* head dims below, at and off the 64-dim block; lengths across the 64-key block and off the
     * 4-row block; rows split at an odd place (as the parallel row blocks do) */
    const int shapes[][2] = {{77, 24}, {133, 128}, {70, 72}};
    for (size_t c = 0; c < sizeof shapes / sizeof shapes[0]; c++) {
        const int T = shapes[c][0], HS = shapes[c][1], ld = 3 * HS;
        float *q = malloc(sizeof(float) * T * ld), *k = malloc(sizeof(float) * T * ld);
        float *kp = malloc(sizeof(float) * mp_fwd_attn_keys_floats(HS, T));
        float *s0 = malloc(sizeof(float) * T * T), *s1 = malloc(sizeof(float) * T * T);
        mp_test_fill(q, (size_t)T * ld, 5 + (uint32_t)c, 1000.0f);
        mp_test_fill(k, (size_t)T * ld, 6 + (uint32_t)c, 1000.0f);
        for (int t = 0; t < T; t++) mp_fwd_attn_pack_key(kp, k + t * ld, HS, t);
        const float scale = 0.2041241452f;
        for (int causal = 0; causal < 2; causal++) {
            mp_fwd_attn_scores_ref(s0, q, ld, k, ld, HS, T, causal, scale);
            mp_fwd_attn_scores(s1, q, ld, kp, HS, T, causal, scale, 0, 37);
            mp_fwd_attn_scores(s1, q, ld, kp, HS, T, causal, scale, 37, T);
            assert_memory_equal(s0, s1, sizeof(float) * T * T);
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    if (causal && j > i) assert_true(isinf(s1[i * T + j]) && s1[i * T + j] < 0);
                    else assert_true(isfinite(s1[i * T + j]));
            /* softmax + mix: rows sum to 1, masked entries 0; mix == the plain fmaf loop bit for bit
             * and within 1e-5 of a double sum */
            float *o = calloc((size_t)T * HS, sizeof *o), *o0 = calloc((size_t)T * HS, sizeof *o0);
            for (int i = 0; i < T; i++) mp_fwd_softmax_row(s1 + i * T, causal ? i + 1 : T, T);
            mp_fwd_attn_mix(o, HS, s1, k, ld, HS, T, causal, 0, 37);
            mp_fwd_attn_mix(o, HS, s1, k, ld, HS, T, causal, 37, T);
            mix_plain(o0, HS, s1, k, ld, HS, T, causal);
            assert_memory_equal(o, o0, sizeof(float) * T * HS);
            for (int i = 0; i < T; i++) {
                double sum = 0;
                for (int j = 0; j < T; j++) sum += s1[i * T + j];
                assert_true(fabs(sum - 1) < 1e-5);
                if (causal)
                    for (int j = i + 1; j < T; j++) assert_true(s1[i * T + j] == 0.0f);
                for (int d = 0; d < HS; d++) {
                    double ref = 0;
                    for (int j = 0; j < T; j++) ref += (double)s1[i * T + j] * k[j * ld + d];
                    assert_true(fabs(ref - o[i * HS + d]) < 1e-5);
                }
            }
            free(o);
            free(o0);
        }
        free(q);
        free(k);
        free(kp);
        free(s0);
        free(s1);
    }
}

/* |y - e^x| in units in the last place of e^x as a float (2^-149 below 2^-126). */
static double exp_ulps(float y, float x) {
    const double r = exp((double)x);
    const double u = r < 0x1p-126 ? 0x1p-149 : ldexp(1.0, ilogb(r) - 23);
    return fabs((double)y - r) / u;
}

static void test_exp_neg(void **state) {
    (void)state;
    enum { B = 1 << 16 };
    float *x = malloc(sizeof(float) * B), *y = malloc(sizeof(float) * B);
    assert_non_null(x);
    assert_non_null(y);
    double worst = 0;
    uint64_t checked = 0;
    /* bit patterns of -0 .. -104 by 61, then every float of -87.3 .. -104 (subnormal results) */
    const uint32_t ranges[2][3] = {{0x80000000u, 0xC2D00000u, 61}, {0xC2AE0000u, 0xC2D00000u, 1}};
    for (int g = 0; g < 2; g++)
        for (uint64_t u = ranges[g][0]; u <= ranges[g][1];) {
            int n = 0;
            for (; n < B && u <= ranges[g][1]; n++, u += ranges[g][2]) {
                const uint32_t b = (uint32_t)u;
                memcpy(&x[n], &b, sizeof b);
            }
            mp_fwd_exp_neg(y, x, n);
            for (int i = 0; i < n; i++) {
                const double e = exp_ulps(y[i], x[i]);
                if (e > worst) worst = e;
            }
            checked += (uint64_t)n;
        }
    assert_true(checked > 20000000u);
    if (worst > 1.0) fail_msg("mp_fwd_exp_neg: %.3f ulp from exp", worst);
    const float sx[6] = {0.0f, -0.0f, -INFINITY, -104.5f, -1e30f, NAN};
    float sy[6];
    mp_fwd_exp_neg(sy, sx, 6);
    assert_true(sy[0] == 1.0f && sy[1] == 1.0f && sy[2] == 0.0f && sy[3] == 0.0f && sy[4] == 0.0f && isnan(sy[5]));
    free(x);
    free(y);
}

static void test_softmax_row(void **state) {
    (void)state;
    enum { N = 1000 };
    float *buf = malloc(sizeof(float) * (N + 32)), *first = malloc(sizeof(float) * N), *src = malloc(sizeof(float) * N);
    assert_non_null(buf);
    mp_test_fill(src, N, 77, 1000.0f);
    for (int j = 0; j < N; j++) src[j] = src[j] * 0.02f; /* scores of a few units, as attention's */
    for (int j = 0; j < N; j += 7) src[j] = -INFINITY;  /* keys a window masks */
    const int lens[] = {1, 2, 15, 16, 17, 33, 255, 1000};
    for (size_t c = 0; c < sizeof lens / sizeof lens[0]; c++) {
        const int n = lens[c], len = n + 5 < N ? n + 5 : N;
        if (isinf(src[0])) src[0] = 0.5f; /* a row has at least one key */
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) mx = src[j] > mx ? src[j] : mx;
        for (int j = 0; j < n; j++) sum += exp((double)src[j] - mx);
        for (int off = 0; off < 16; off++) {
            float *row = buf + off;
            memcpy(row, src, sizeof(float) * (size_t)len);
            mp_fwd_softmax_row(row, n, len);
            if (off == 0) memcpy(first, row, sizeof(float) * (size_t)len);
            else if (memcmp(first, row, sizeof(float) * (size_t)len))
                fail_msg("softmax of %d entries: other bits at offset %d floats", n, off);
        }
        for (int j = 0; j < len; j++) {
            const double ref = j < n ? exp((double)src[j] - mx) / sum : 0.0;
            if (ref == 0.0) assert_true(first[j] == 0.0f);
            else if (fabs(first[j] - ref) > 1e-6 * ref) fail_msg("softmax n %d, entry %d: %.9g vs %.9g", n, j, first[j], ref);
        }
    }
    free(buf);
    free(first);
    free(src);
}

static void test_rope_and_rmsnorm(void **state) {
    (void)state;
    /* R = 4 of HS = 6: pairs (0,2), (1,3); dims 4,5 unchanged. */
    float x[6] = {1, 2, 3, 4, 5, 6};
    const float inv[2] = {1.0f, 0.1f};
    float c[3 * 2], s[3 * 2];
    mp_fwd_rope_table(c, s, inv, 4, 3, 1.0);
    mp_fwd_rope(x, c + 2 * 2, s + 2 * 2, 4); /* position 2: angles 2, 0.2 */
    const double a0 = 2.0, a1 = 0.2;
    const double ex[6] = {1 * cos(a0) - 3 * sin(a0), 2 * cos(a1) - 4 * sin(a1), 3 * cos(a0) + 1 * sin(a0),
                          4 * cos(a1) + 2 * sin(a1), 5, 6};
    for (int i = 0; i < 6; i++)
        if (fabs(x[i] - ex[i]) > 1e-6) fail_msg("rope x[%d] = %.8g, expected %.8g", i, x[i], ex[i]);
    /* attention factor scales cos and sin */
    float c2[2], s2[2];
    mp_fwd_rope_table(c2, s2, inv, 4, 1, 1.5);
    assert_true(c2[0] == 1.5f && s2[0] == 0.0f);
    /* RMSNorm */
    float v[5] = {1, -2, 3, -4, 5}, w[5] = {1, 2, 3, 4, 5}, y[5];
    mp_fwd_rmsnorm(y, v, w, 5, 1e-5);
    const double rms = sqrt((1 + 4 + 9 + 16 + 25) / 5.0 + 1e-5);
    for (int i = 0; i < 5; i++) assert_true(fabs(y[i] - w[i] * v[i] / rms) < 1e-6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matmul_matches_reference),
        cmocka_unit_test(test_attention_matches_reference),
        cmocka_unit_test(test_exp_neg),
        cmocka_unit_test(test_softmax_row),
        cmocka_unit_test(test_rope_and_rmsnorm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
