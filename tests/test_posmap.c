/* test_posmap.c — kernels/posmap.c and kernels/vexp.h:
 *   - a purely relative map (any function of i−j) normalises to exactly 0, NRI 0;
 *   - a hand-computed 3×3 example of the residue and the NRI;
 *   - recency slopes, also of the part of a map after a sink column (mp_posmap_sub);
 *   - noise z ≈ 1 for a synthetic relative map plus independent noise of known se;
 *   - the fast residue equals the reference (diagonal walk) bit for bit;
 *   - mp_vexp against libm exp over [−745, 0] within 2 ulp-ish relative error. */
#include "testutil.h"

#include "core/rng.h"
#include "kernels/posmap.h"
#include "kernels/vexp.h"

/* Class: a map with no finite entry (all NaN, or ±Inf only). Its NRI is undefined (NaN), not 0,
 * which would read "purely relative" (it was 0 before). A constant finite map stays 0. */
static void test_no_finite_entries(void **state) {
    (void)state;
    enum { S = 5 };
    double map[S * S], res[S * S];
    for (int k = 0; k < 3; k++) {
        for (int a = 0; a < S * S; a++) map[a] = k == 0 ? NAN : k == 1 ? (a % 2 ? INFINITY : -INFINITY) : 2.5;
        mp_posmap_diagnorm(res, map, S);
        MpPosStats st;
        mp_posmap_stats(&st, map, res, NULL, S);
        if (k < 2) {
            assert_int_equal(st.observed, 0);
            assert_true(isnan(st.nri));
        } else {
            assert_int_equal(st.observed, S * S);
            assert_true(st.nri == 0.0);
        }
    }
}

static void test_relative_map_is_zero(void **state) {
    (void)state;
    enum { S = 17 };
    double m[S * S], r[S * S];
    for (int causal = 0; causal <= 1; causal++) {
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) m[i * S + j] = (causal && j > i) ? NAN : sin(0.3 * (i - j)) + 0.01 * (i - j) * (i - j);
        mp_posmap_diagnorm(r, m, S);
        for (int a = 0; a < S * S; a++) {
            if (isnan(m[a])) assert_true(isnan(r[a]));
            else assert_true(fabs(r[a]) < 1e-15);
        }
        MpPosStats st;
        mp_posmap_stats(&st, m, r, NULL, S);
        assert_true(st.nri < 1e-28);
        assert_int_equal(st.observed, causal ? S * (S + 1) / 2 : S * S);
    }
}

/* 3×3 causal map [[1],[a,1],[b,c,1]]: diagonal offset 1 holds a and c, offset 2 holds b alone.
 * Residue: a−(a+c)/2, c−(a+c)/2, 0 elsewhere. With a = 0.2, c = 0.6: ±0.2.
 * NRI = 0.08 / Σ(S − mean)², mean = (3 + 0.2 + 0.6 + 0.5)/6. */
static void test_hand_example(void **state) {
    (void)state;
    double m[9] = {1, NAN, NAN, 0.2, 1, NAN, 0.5, 0.6, 1}, r[9];
    mp_posmap_diagnorm(r, m, 3);
    assert_true(fabs(r[3] + 0.2) < 1e-15 && fabs(r[7] - 0.2) < 1e-15 && fabs(r[6]) < 1e-15);
    MpPosStats st;
    mp_posmap_stats(&st, m, r, NULL, 3);
    double mean = (3 + 0.2 + 0.6 + 0.5) / 6, den = 0;
    const double v[6] = {1, 1, 1, 0.2, 0.6, 0.5};
    for (int k = 0; k < 6; k++) den += (v[k] - mean) * (v[k] - mean);
    assert_true(fabs(st.nri - 0.08 / den) < 1e-14);
    assert_true(fabs(st.res_min + 0.2) < 1e-15 && fabs(st.res_max - 0.2) < 1e-15);
}

/* Recency slopes: S_ij = 0.01·j + (row offset) rises with j in every row (share 1, slope 0.01);
 * its mirror falls (share 0, slope −0.01); rows with fewer than two keys are not counted. */
static void test_recency_slopes(void **state) {
    (void)state;
    enum { S = 9 };
    double m[S * S], r[S * S];
    for (int sign = -1; sign <= 1; sign += 2) {
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) m[i * S + j] = j > i ? NAN : (j == i ? 1.0 : sign * 0.01 * j + 0.1 * i);
        mp_posmap_diagnorm(r, m, S);
        MpPosStats st;
        mp_posmap_stats(&st, m, r, NULL, S);
        assert_true(fabs(st.rise_share - (sign > 0 ? 1.0 : 0.0)) < 1e-15);
        assert_true(fabs(st.mean_slope - sign * 0.01) < 1e-14);
    }
    /* half the rows rise, half fall: share 0.5 */
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) m[i * S + j] = j > i ? NAN : (i % 2 ? 0.02 * j : -0.02 * j);
    mp_posmap_diagnorm(r, m, S);
    MpPosStats st;
    mp_posmap_stats(&st, m, r, NULL, S);
    /* rows 2..8 have ≥ 2 keys: odd rows 3,5,7 rise, even rows 2,4,6,8 fall */
    assert_true(fabs(st.rise_share - 3.0 / 7.0) < 1e-15);
    /* a sink column 0 (+5) in front of keys rising by 0.01: over all keys every row falls; the
     * map from position 1 on (mp_posmap_sub) is the rising one, every entry copied exactly */
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) m[i * S + j] = j > i ? NAN : (j == i ? 1.0 : j == 0 ? 5.0 : 0.01 * j);
    mp_posmap_diagnorm(r, m, S);
    mp_posmap_stats(&st, m, r, NULL, S);
    assert_true(st.rise_share == 0.0 && st.mean_slope < 0);
    enum { P = S - 1 };
    double sub[P * P], rs[P * P];
    mp_posmap_sub(sub, m, S, 1);
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            const double v = m[(i + 1) * S + j + 1], w = sub[i * P + j];
            assert_true(isnan(v) ? isnan(w) : v == w);
        }
    mp_posmap_diagnorm(rs, sub, P);
    mp_posmap_stats(&st, sub, rs, NULL, P);
    assert_true(st.rise_share == 1.0);
    assert_true(fabs(st.mean_slope - 0.01) < 1e-14);
}

static void test_noise_z(void **state) {
    (void)state;
    enum { S = 64 };
    static double m[S * S], r[S * S], se[S * S], noise[S * S];
    MpRng g;
    mp_rng_init(&g, 3, 0);
    mp_rng_normal_fill(&g, noise, S * S);
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) {
            se[i * S + j] = 0.01;
            m[i * S + j] = j > i ? NAN : cos(0.1 * (i - j)) + 0.01 * noise[i * S + j];
        }
    mp_posmap_diagnorm(r, m, S);
    MpPosStats st;
    mp_posmap_stats(&st, m, r, se, S);
    print_message("pure noise: z_rms = %.3f\n", st.z_rms);
    assert_true(st.z_rms > 0.85 && st.z_rms < 1.1);
    /* add an absolute-position pattern of 10 se: z must jump */
    for (int i = 0; i < S; i++)
        for (int j = 0; j <= i; j++) m[i * S + j] += 0.1 * (j < 3);
    mp_posmap_diagnorm(r, m, S);
    mp_posmap_stats(&st, m, r, se, S);
    assert_true(st.z_rms > 2);
}

static void test_vexp_matches_libm(void **state) {
    (void)state;
    double worst = 0;
    for (int k = 0; k <= 2000000; k++) {
        double x = -745.0 * k / 2000000.0;
        double want = exp(x), got = mp_vexp(x);
        if (x < -708.0) { /* documented: flushed to 0 */
            assert_true(got == 0);
            continue;
        }
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    print_message("mp_vexp max relative error vs libm on [-708, 0]: %.3g\n", worst);
    assert_true(worst < 4.5e-16);
    assert_true(mp_vexp(0.0) == 1.0);
    assert_true(mp_vexp(-1e300) == 0.0);
    assert_true(fabs(mp_vexp(1.0) - exp(1.0)) < 1e-15);
}

/* Class: the fast (row-major) residue against the reference (diagonal walk), bit for bit, on
 * random maps with NaN above the diagonal (causal), scattered NaN/±Inf entries, a whole
 * non-finite diagonal, and sizes from 1 to beyond a cache line of rows. */
static void test_diagnorm_fast_equals_reference(void **state) {
    (void)state;
    const int sizes[] = {1, 2, 3, 7, 64, 129, 300};
    MpRng g;
    mp_rng_init(&g, 11, 0);
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++)
        for (int kind = 0; kind < 3; kind++) {
            const int S = sizes[t];
            const size_t n = (size_t)S * S;
            double *m = malloc(n * sizeof *m), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
            assert_non_null(m);
            assert_non_null(a);
            assert_non_null(b);
            mp_rng_normal_fill(&g, m, n);
            for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                    double *v = m + (size_t)i * S + j;
                    if (kind == 0 && j > i) *v = NAN;                           /* causal */
                    if (kind == 1 && mp_rng_uniform(&g) < 0.1) *v = (i + j) % 3 ? NAN : INFINITY;
                    if (kind == 2 && i - j == S / 2) *v = -INFINITY;            /* one dead diagonal */
                    if (kind == 2) *v *= 1e6 * (i + 1);                         /* magnitudes that round */
                }
            mp_posmap_diagnorm(a, m, S);
            mp_posmap_diagnorm_ref(b, m, S);
            assert_memory_equal(a, b, n * sizeof *a);
            free(m);
            free(a);
            free(b);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relative_map_is_zero), cmocka_unit_test(test_hand_example),
        cmocka_unit_test(test_no_finite_entries), cmocka_unit_test(test_diagnorm_fast_equals_reference),
        cmocka_unit_test(test_recency_slopes), cmocka_unit_test(test_noise_z), cmocka_unit_test(test_vexp_matches_libm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
