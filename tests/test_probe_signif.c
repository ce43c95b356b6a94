/* test_probe_signif.c — is a residue resolved at this N (src/model/probe_signif.c), on synthetic
 * scores whose answer is known, and the accumulator's sequences shorter than S
 * (mp_probe_acc_lengths_on, mp_probe_acc_embed):
 *   - noise (Gaussian, and heavy-tailed: Student t with 3 degrees of freedom and a per-sequence
 *     scale) is never called resolved over 20 seeds, while a fixed threshold of 1.3 would have
 *     called some of it a residue; the noise level of the sign-flipped sums sits at 1;
 *   - a small non-relative pattern is resolved once N is large enough, and the N the test predicts
 *     from a smaller run resolves it;
 *   - fewer than MP_SIGNIF_MIN_N sequences: never resolved, and the warning says so;
 *   - the noise-corrected NRI against the NRI of the noiseless map (its bias, by simulation over 40
 *     runs of noise correlated along each key's column: within 3 standard errors of the truth, where
 *     the raw NRI is far above it); a map that is mostly noise gets none;
 *   - the sign-flipped sums are sums over sequences: two halves merged give one run's (1e-12);
 *   - the sign bits against a second implementation of their hash (mp_fnv1a64 over the floats'
 *     bytes); one sequence's rsq and csq against their definition summed entry by entry (1e-12);
 *   - lengths: sequences of S' < S enter the top-left S' x S' block with the bits of an S'
 *     accumulator, standard errors with per-entry counts; merging accumulators of two lengths gives
 *     the accumulator of both.
 */
#include "testutil.h"

#include <math.h>

#include "core/util.h"           /* mp_fnv1a64, MP_FNV_INIT */
#include "job/probe_job.h"          /* mp_probe_n_warning */
#include "kernels/posmap.h"     /* mp_posmap_stats, mp_posmap_diagnorm */
#include "model/probe.h"        /* MpProbeAcc */
#include "model/probe_signif.h" /* mp_probe_signif */

static uint64_t g_state = 88172645463325252ull;
static double unif(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (double)(g_state >> 11) / 9007199254740992.0;
}
static double gauss(void) {
    double u = unif(), v = unif();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}
/* Student t with 3 degrees of freedom (heavy tails: infinite fourth moment). */
static double student3(void) {
    double c = 0;
    for (int k = 0; k < 3; k++) {
        const double g = gauss();
        c += g * g;
    }
    return gauss() / sqrt(c / 3.0);
}

enum { NOISE_GAUSS, NOISE_HEAVY, NOISE_COLS };

/* The expected map of the synthetic model: relative part + pattern * (j < 4) (NaN above the diagonal). */
static double expected(int i, int j, double pattern) { return 0.3 * exp(-(i - j) / 5.0) + (j < 4 ? pattern : 0.0); }

/* One sequence's scores [H,S,S] of length len (entries past it are garbage, never read). Heavy
 * noise is what real text gives: every key token lifts or lowers its whole column (its content), by
 * an amount with heavy tails (Student t, 3 degrees of freedom), over a sequence-wide scale. */
static void make(float *sc, int H, int S, int len, int kind, double pattern) {
    double col[64];
    const double scale = kind == NOISE_HEAVY ? 0.3 * fabs(student3()) + 0.2 : 1.0; /* a sequence-wide scale */
    for (int j = 0; j < S && j < 64; j++) col[j] = kind == NOISE_HEAVY ? student3() : kind == NOISE_COLS ? gauss() : 0.0;
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                float *p = sc + ((size_t)h * S + i) * S + j;
                if (j > i) *p = -INFINITY;
                else if (i >= len) *p = 1e30f; /* padding: must never be read */
                else *p = (float)(expected(i, j, pattern) + scale * (kind != NOISE_GAUSS ? 0.5 * gauss() + col[j] : gauss()));
            }
}

static void acc_new(MpProbeAcc *a, int H, int S) {
    unsigned char mask[1] = {1};
    MpErr e;
    if (mp_probe_acc_init(a, mask, 1, H, S, 0, 1, 1, &e) != MP_OK) fail_msg("%s", e.msg);
}

static void feed(MpProbeAcc *a, int N, int len, int kind, double pattern) {
    float *sc = malloc((size_t)a->H * a->S * a->S * sizeof(float));
    for (int n = 0; n < N; n++) {
        make(sc, a->H, a->S, len, kind, pattern);
        a->cur_len = len;
        mp_probe_acc_hook(a, 0, sc, a->H, a->S);
        a->n_done++;
    }
    a->cur_len = 0;
    free(sc);
}

/* The significance of layer slot 0 (its statistics computed as the probe does). */
static void signif(MpProbeSignif *sg, const MpProbeAcc *a, MpPosStats *st) {
    const int S = a->S;
    double *m = malloc((size_t)S * S * sizeof(double)), *se = malloc((size_t)S * S * sizeof(double)),
           *dn = malloc((size_t)S * S * sizeof(double));
    mp_probe_acc_mean(a, m, NULL);
    mp_probe_acc_se(a, se);
    mp_probe_layer_stats(st, dn, m, se, a->n_done >= 2, 1, S, 0, NULL);
    mp_probe_signif(sg, a, 0, st);
    free(m), free(se), free(dn);
}

static void test_noise_is_not_resolved(void **state) {
    (void)state;
    int resolved = 0, above_fixed = 0;
    double z0_min = 9, z0_max = 0;
    for (int kind = NOISE_GAUSS; kind <= NOISE_HEAVY; kind++)
        for (int seed = 0; seed < 10; seed++) {
            MpProbeAcc a;
            acc_new(&a, 2, 32);
            feed(&a, 100, 32, kind, 0.0);
            MpProbeSignif sg;
            MpPosStats st;
            signif(&sg, &a, &st);
            resolved += sg.resolved[0];
            for (int g = 1; g < MP_PROBE_NREGIONS; g++) resolved += sg.resolved[g];
            above_fixed += sg.z[0] > 1.3;
            if (sg.noise[0] < z0_min) z0_min = sg.noise[0];
            if (sg.noise[0] > z0_max) z0_max = sg.noise[0];
            if (kind == NOISE_HEAVY && seed < 3)
                print_message("heavy-tailed noise, seed %d: block z %.2f, noise level %.2f +- %.2f, needs %.2f\n", seed,
                              sg.z[0], sg.noise[0], sg.spread[0], sg.threshold[0]);
            mp_probe_acc_free(&a);
        }
    print_message("noise: %d of 20 runs above a fixed 1.3, %d layers or regions resolved; noise levels %.2f..%.2f\n",
                  above_fixed, resolved, z0_min, z0_max);
    assert_int_equal(resolved, 0);
    assert_true(above_fixed > 0); /* the fixed threshold reproduce used would have called noise a residue */
    assert_true(z0_min > 0.8 && z0_max < 1.3);
}

static void test_pattern_resolved_and_n_needed(void **state) {
    (void)state;
    MpProbeAcc a;
    MpProbeSignif sg;
    MpPosStats st;
    acc_new(&a, 2, 32);
    feed(&a, 120, 32, NOISE_GAUSS, 0.06);
    signif(&sg, &a, &st);
    print_message("pattern 0.06 at N = 120: block z %.2f, needs %.2f, resolved %d, N needed %.0f\n", sg.z[0], sg.threshold[0],
                  sg.resolved[0], sg.n_needed);
    assert_true(isfinite(sg.n_needed) && sg.n_needed > 120);
    const int want = (int)ceil(2.0 * sg.n_needed);
    mp_probe_acc_free(&a);
    acc_new(&a, 2, 32);
    feed(&a, want, 32, NOISE_GAUSS, 0.06);
    signif(&sg, &a, &st);
    print_message("at 2 x the N needed (%d): block z %.2f, needs %.2f, resolved %d; first keys %.2f (needs %.2f) %d\n", want,
                  sg.z[0], sg.threshold[0], sg.resolved[0], sg.z[MP_PROBE_REGION_FIRST_KEYS],
                  sg.threshold[MP_PROBE_REGION_FIRST_KEYS], sg.resolved[MP_PROBE_REGION_FIRST_KEYS]);
    assert_true(sg.resolved[0]);
    assert_true(sg.resolved[MP_PROBE_REGION_FIRST_KEYS]); /* where the pattern is */
    assert_false(sg.resolved[MP_PROBE_REGION_LAST_QUERIES] && sg.resolved[MP_PROBE_REGION_INTERIOR]);
    mp_probe_acc_free(&a);
}

static void test_few_sequences(void **state) {
    (void)state;
    MpProbeAcc a;
    MpProbeSignif sg;
    MpPosStats st;
    acc_new(&a, 2, 32);
    feed(&a, 3, 32, NOISE_GAUSS, 2.0); /* even a large pattern: 3 sequences cannot judge it */
    signif(&sg, &a, &st);
    assert_false(sg.resolved[0]);
    char w[512];
    assert_non_null(strstr(mp_probe_n_warning(w, sizeof w, 3), "N = 3 sequences is too few"));
    assert_string_equal(mp_probe_n_warning(w, sizeof w, MP_SIGNIF_MIN_N), "");
    mp_probe_acc_free(&a);
}

/* The NRI of the noiseless expected map (what the corrected estimator aims at), its numerator
 * Σ Ŝ² and denominator Σ (S − S̄)². */
static double true_nri(int S, double pattern, double *num, double *den) {
    double *m = malloc((size_t)S * S * sizeof(double)), *r = malloc((size_t)S * S * sizeof(double));
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) m[i * S + j] = j > i ? NAN : expected(i, j, pattern);
    mp_posmap_diagnorm(r, m, S);
    MpPosStats st;
    mp_posmap_stats(&st, m, r, NULL, S);
    free(m), free(r);
    *num = st.nri_num, *den = st.nri_den;
    return st.nri;
}

/* mean and its standard error of x [R] */
static void mean_se(const double *x, int R, double *m, double *se) {
    double s = 0, s2 = 0;
    for (int r = 0; r < R; r++) s += x[r], s2 += x[r] * x[r];
    *m = s / R;
    *se = sqrt((s2 / R - *m * *m) / (R - 1));
}

/* R runs of 400 sequences with a pattern of size p: the numerator and denominator with the noise
 * power taken out (computed here from their definition) are unbiased; the ratio is within 3
 * standard errors of the truth and nearer to it than the raw NRI. */
static void nri_bias_case(double p, double raw_bias_min) {
    enum { R = 40, S = 24, N = 400 };
    double num, den, want = true_nri(S, p, &num, &den);
    double raw[R], cor[R], nc[R], dc[R];
    for (int r = 0; r < R; r++) {
        MpProbeAcc a;
        MpProbeSignif sg;
        MpPosStats st;
        acc_new(&a, 2, S);
        feed(&a, N, S, NOISE_COLS, p);
        signif(&sg, &a, &st);
        raw[r] = st.nri, cor[r] = sg.nri_corr;
        /* E ||D m||^2 = ||D mu||^2 + T / N, T by the sample variance over the sequences */
        nc[r] = st.nri_num - (a.rsq[0] - N * st.nri_num) / (N - 1.0) / N;
        dc[r] = st.nri_den - (a.csq[0] - N * st.nri_den) / (N - 1.0) / N;
        mp_probe_acc_free(&a);
    }
    double rm, rse, cm, cse, nm, nse, dm, dse;
    mean_se(raw, R, &rm, &rse), mean_se(cor, R, &cm, &cse), mean_se(nc, R, &nm, &nse), mean_se(dc, R, &dm, &dse);
    print_message("pattern %.2f: NRI of the noiseless map %.4f; raw %.4f +- %.4f, corrected %.4f +- %.4f; numerator %.3f vs "
                  "%.3f +- %.3f, denominator %.3f vs %.3f +- %.3f (%d runs of %d sequences)\n",
                  p, want, rm, rse, cm, cse, num, nm, nse, den, dm, dse, R, N);
    assert_true(fabs(nm - num) < 3 * nse && fabs(dm - den) < 3 * dse);
    assert_true(fabs(cm - want) < 3 * cse);
    assert_true(rm - want > raw_bias_min);              /* the raw NRI counts the noise as residue */
    assert_true(fabs(cm - want) < 0.5 * (rm - want)); /* the corrected one is nearer the truth */
}

static void test_nri_corrected_bias(void **state) {
    (void)state;
    nri_bias_case(0.15, 0.05);
    /* pure noise: the map's variance is noise, no corrected NRI */
    const int S = 24;
    MpProbeAcc a;
    MpProbeSignif sg;
    MpPosStats st;
    acc_new(&a, 2, S);
    float *sc = malloc((size_t)2 * S * S * sizeof(float));
    for (int n = 0; n < 100; n++) {
        for (int k = 0; k < 2 * S * S; k++) sc[k] = (k % S) > (k / S % S) ? -INFINITY : (float)gauss();
        mp_probe_acc_hook(&a, 0, sc, 2, S);
        a.n_done++;
    }
    free(sc);
    signif(&sg, &a, &st);
    print_message("pure noise: raw NRI %.3f, map noise share %.2f, corrected %g\n", st.nri, sg.map_noise, sg.nri_corr);
    assert_true(st.nri > 0.5 && sg.map_noise > MP_SIGNIF_MAP_NOISE && isnan(sg.nri_corr));
    mp_probe_acc_free(&a);
}

static void test_flips_are_sums_over_sequences(void **state) {
    (void)state;
    MpProbeAcc all, x, y;
    MpErr e;
    acc_new(&all, 2, 20), acc_new(&x, 2, 20), acc_new(&y, 2, 20);
    const uint64_t st0 = g_state;
    feed(&all, 30, 20, NOISE_GAUSS, 0.1);
    g_state = st0;
    feed(&x, 13, 20, NOISE_GAUSS, 0.1);
    feed(&y, 17, 20, NOISE_GAUSS, 0.1);
    assert_int_equal(mp_probe_acc_merge(&x, &y, &e), MP_OK);
    const size_t n = (size_t)MP_PROBE_FLIPS * all.nb * all.nb;
    for (size_t k = 0; k < n; k++)
        if (!(fabs(all.bflip[k] - x.bflip[k]) <= 1e-12 * (1 + fabs(all.bflip[k]))))
            fail_msg("bflip[%zu]: %.17g one run, %.17g merged", k, all.bflip[k], x.bflip[k]);
    assert_true(fabs(all.rsq[0] - x.rsq[0]) <= 1e-12 * all.rsq[0] && fabs(all.csq[0] - x.csq[0]) <= 1e-12 * all.csq[0]);
    /* each sequence draws its own signs: not all equal */
    double bm[256];
    for (int k = 0; k < 256; k++) bm[k] = k * 0.25;
    const uint32_t b1 = mp_probe_flip_bits(bm, 16);
    bm[7] = -bm[7];
    assert_int_not_equal(b1, mp_probe_flip_bits(bm, 16));
    mp_probe_acc_free(&all), mp_probe_acc_free(&x), mp_probe_acc_free(&y);
}

/* The sign bits against a second implementation (core/util.c's mp_fnv1a64 over the floats' bytes,
 * NaN as 0x7fc00000, then the murmur3 finaliser), for grids of 16 and 5 blocks with NaN blocks; a
 * NaN of another sign or payload draws the same signs. */
static uint32_t flip_bits_ref(const double *bm, int nb) {
    float r[256];
    for (int k = 0; k < nb * nb; k++) {
        const uint32_t qnan = 0x7fc00000u;
        if (isnan(bm[k])) memcpy(&r[k], &qnan, sizeof qnan);
        else r[k] = (float)bm[k];
    }
    uint64_t h = mp_fnv1a64(r, (size_t)nb * nb * sizeof(float), MP_FNV_INIT);
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return (uint32_t)h;
}

/* One sequence's squared norms (rsq, csq) against their definition summed entry by entry in
 * row-major order from the head-mean map (heads summed, then divided by H) and its residue
 * (mp_posmap_diagnorm_ref): 1e-12 relative. */
static void norms_case(int S, int skip) {
    enum { H = 3 };
    MpProbeAcc a;
    acc_new(&a, H, S);
    if (skip) mp_probe_acc_skip(&a, skip);
    float *sc = malloc((size_t)H * S * S * sizeof(float));
    make(sc, H, S, S, NOISE_HEAVY, 0.2);
    mp_probe_acc_hook(&a, 0, sc, H, S);
    a.n_done++;
    const int P = S - skip;
    double *x = malloc((size_t)P * P * sizeof(double)), *r = malloc((size_t)P * P * sizeof(double));
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) {
            double t = 0;
            for (int h = 0; h < H; h++) t += sc[((size_t)h * S + i + skip) * S + j + skip];
            x[(size_t)i * P + j] = j > i ? NAN : t / H;
        }
    mp_posmap_diagnorm_ref(r, x, P);
    double sum = 0, num = 0, den = 0;
    int cnt = 0;
    for (int k = 0; k < P * P; k++)
        if (!isnan(x[k])) sum += x[k], cnt++;
    for (int k = 0; k < P * P; k++)
        if (!isnan(x[k])) num += r[k] * r[k], den += (x[k] - sum / cnt) * (x[k] - sum / cnt);
    if (!(fabs(a.rsq[0] - num) <= 1e-12 * num && fabs(a.csq[0] - den) <= 1e-12 * den))
        fail_msg("S %d skip %d: rsq %.17g csq %.17g, by definition %.17g %.17g", S, skip, a.rsq[0], a.csq[0], num, den);
    free(x), free(r), free(sc);
    mp_probe_acc_free(&a);
}

static void test_flip_bits_and_norms(void **state) {
    (void)state;
    double bm[256];
    for (int nb = 5; nb <= 16; nb += 11)
        for (int t = 0; t < 20; t++) {
            for (int k = 0; k < nb * nb; k++) bm[k] = k % nb > k / nb ? NAN : gauss() * pow(10.0, (double)(t % 7) - 3);
            assert_int_equal(mp_probe_flip_bits(bm, nb), flip_bits_ref(bm, nb));
            const uint32_t b = mp_probe_flip_bits(bm, nb);
            bm[nb - 1] = -NAN; /* above the diagonal: already NaN */
            assert_int_equal(mp_probe_flip_bits(bm, nb), b);
        }
    norms_case(20, 0);
    norms_case(37, 1);
}

/* Sequences of 20 positions in an S = 32 accumulator: the top-left 20 x 20 sums are an S = 20
 * accumulator's bits; entries past them unobserved; standard errors per entry; merging. */
static void test_lengths(void **state) {
    (void)state;
    MpProbeAcc big, small, both, mixed;
    MpErr e;
    acc_new(&big, 2, 32), acc_new(&small, 2, 20), acc_new(&both, 2, 32), acc_new(&mixed, 2, 32);
    assert_int_equal(mp_probe_acc_lengths_on(&big, NULL, &e), MP_OK);
    assert_int_equal(mp_probe_acc_lengths_on(&both, NULL, &e), MP_OK);
    const uint64_t st0 = g_state;
    feed(&big, 25, 20, NOISE_GAUSS, 0.2); /* S = 32 accumulator, sequences of 20 */
    g_state = st0;
    feed(&small, 25, 20, NOISE_GAUSS, 0.2);
    for (int i = 0; i < 20; i++)
        for (int j = 0; j <= i; j++) {
            if (big.sum[i * 32 + j] != small.sum[i * 20 + j] || big.sumsq[i * 32 + j] != small.sumsq[i * 20 + j])
                fail_msg("sums at (%d, %d): %.17g of the longer accumulator, %.17g of S = 20", i, j, big.sum[i * 32 + j],
                         small.sum[i * 20 + j]);
        }
    for (int k = 0; k < 16 * 16; k++) /* the block test: each sequence's own grid */
        assert_true(big.bsum[k] == small.bsum[k] && big.bsumsq[k] == small.bsumsq[k]);
    double *m = malloc(32 * 32 * sizeof(double)), *se = malloc(32 * 32 * sizeof(double));
    mp_probe_acc_mean(&big, m, NULL);
    assert_true(isnan(m[25 * 32 + 3]) && isfinite(m[19 * 32 + 3]));
    /* 25 sequences of 20, then 15 of 32: entry (25, 3) has 15, entry (10, 3) 40 */
    feed(&big, 15, 32, NOISE_GAUSS, 0.2);
    mp_probe_acc_se(&big, se);
    mp_probe_acc_mean(&big, m, NULL);
    assert_true(mp_probe_acc_entry_count(&big, 0, 25, 3) == 15 && mp_probe_acc_entry_count(&big, 0, 10, 3) == 40);
    const double m253 = big.sum[25 * 32 + 3] / (15 * 2.0), v = (big.sumsq[25 * 32 + 3] / 15 - m253 * m253) * 15 / 14;
    assert_true(fabs(m[25 * 32 + 3] - m253) <= 1e-15 * fabs(m253) && fabs(se[25 * 32 + 3] - sqrt(v / 15)) <= 1e-14 * se[25 * 32 + 3]);
    /* merging: an S = 20 accumulator into an S = 32 one of 15 full sequences = one accumulator of both */
    g_state = st0;
    feed(&both, 25, 20, NOISE_GAUSS, 0.2);
    feed(&both, 15, 32, NOISE_GAUSS, 0.2);
    uint64_t later = g_state;
    (void)later;
    g_state = st0;
    MpProbeAcc dummy;
    acc_new(&dummy, 2, 20);
    feed(&dummy, 25, 20, NOISE_GAUSS, 0.2); /* advance the generator as `small` did */
    feed(&mixed, 15, 32, NOISE_GAUSS, 0.2);
    assert_int_equal(mp_probe_acc_merge(&mixed, &small, &e), MP_OK);
    assert_int_equal(mixed.n_done, 40);
    for (int i = 0; i < 32; i++)
        for (int j = 0; j <= i; j++) {
            const size_t k = (size_t)i * 32 + j;
            if (!(fabs(both.sum[k] - mixed.sum[k]) <= 1e-12 * (1 + fabs(both.sum[k]))))
                fail_msg("merged sums at (%d, %d): %.17g, one accumulator %.17g", i, j, mixed.sum[k], both.sum[k]);
        }
    for (int p = 0; p < 32; p++) assert_true(both.npos[p] == mixed.npos[p]);
    for (int k = 0; k < 256; k++) assert_true(both.bcnt[k] == mixed.bcnt[k]);
    /* an S = 32 accumulator into an S = 20 one is the caller's to turn around */
    assert_int_equal(mp_probe_acc_merge(&small, &mixed, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "the longer one takes the other"));
    free(m), free(se);
    mp_probe_acc_free(&big), mp_probe_acc_free(&small), mp_probe_acc_free(&both), mp_probe_acc_free(&mixed);
    mp_probe_acc_free(&dummy);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_noise_is_not_resolved),
        cmocka_unit_test(test_pattern_resolved_and_n_needed),
        cmocka_unit_test(test_few_sequences),
        cmocka_unit_test(test_nri_corrected_bias),
        cmocka_unit_test(test_flips_are_sums_over_sequences),
        cmocka_unit_test(test_flip_bits_and_norms),
        cmocka_unit_test(test_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
