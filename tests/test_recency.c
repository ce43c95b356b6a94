/* test_recency.c — the recency probability (kernels/recency.c) and the later version's layer
 * (`simulate --layer-form recency`) against independent references:
 *   - the merge count against the naive pair count on random rows with many ties, and a map's
 *     count against a brute-force loop over every triple (i, j, k); closed forms for monotone rows;
 *   - torch: tests/ref/recency_ref.py recomputes the layer from the dumped inputs in float64 and
 *     counts every triple (counts must agree exactly; maps within 1e-10), at S = 10 and at S = 60
 *     (rows longer than MP_RECENCY_NAIVE_MAX take the merge path);
 *   - the later version's claims at small B: primacy without a norm, recency with LayerNorm at
 *     α = 0.5, d = 16, RP ≈ 0.5 at d = 256; layer 1 exactly exchangeable (RP = 0.5 within noise);
 *   - determinism over threads, the paper form untouched by the new code, bad flags exit 2.
 */
#include "testutil.h"

#include "core/rng.h"
#include "kernels/recency.h"
#include "sim/simulate.h"

/* ================================================================ kernel */

static void test_merge_matches_naive(void **state) {
    (void)state;
    MpRng r;
    mp_rng_init(&r, 7, 0);
    double row[600], scratch[1200];
    for (int trial = 0; trial < 600; trial++) {
        const int n = 1 + (int)(mp_rng_uniform(&r) * 600); /* up to a 512-token probe's rows */
        const int levels = trial % 3 == 0 ? 3 : trial % 3 == 1 ? 40 : 1 << 30; /* many ties, some, none */
        for (int k = 0; k < n; k++) row[k] = (double)(int)(mp_rng_uniform(&r) * levels);
        if (trial % 7 == 0) row[n / 2] = -0.0; /* -0 == +0: a tie, not recent */
        const uint64_t naive = mp_recency_row_count_naive(row, n);
        double copy[600];
        memcpy(copy, row, sizeof copy);
        /* rows above MP_RECENCY_NAIVE_MAX (most of them) take the merge path */
        const uint64_t fast = mp_recency_row_count(row, n, scratch);
        if (naive != fast) fail_msg("n %d levels %d: naive %llu merge %llu", n, levels, (unsigned long long)naive, (unsigned long long)fast);
        assert_memory_equal(copy, row, sizeof copy); /* the row is not changed */
        float rf[600]; /* the same values as floats (exact: small integers, -0) */
        for (int k = 0; k < n; k++) rf[k] = (float)row[k];
        double sc3[1800];
        const uint64_t f32 = mp_recency_row_count_f32(rf, n, sc3);
        if (naive != f32) fail_msg("n %d levels %d: naive %llu f32 %llu", n, levels, (unsigned long long)naive, (unsigned long long)f32);
    }
    /* rows beyond MP_RECENCY_VEC_MAX take the merge count, doubles and floats */
    {
        enum { N = MP_RECENCY_VEC_MAX + 300 };
        static double big[N], bsc[3 * N];
        static float bigf[N];
        for (int levels = 5; levels <= 5000; levels *= 1000) {
            for (int k = 0; k < N; k++) big[k] = bigf[k] = (float)(int)(mp_rng_uniform(&r) * levels);
            const uint64_t naive = mp_recency_row_count_naive(big, N);
            assert_true(naive == mp_recency_row_count(big, N, bsc));
            assert_true(naive == mp_recency_row_count_f32(bigf, N, bsc));
        }
    }
    /* closed forms: strictly rising n keys give n(n-1)/2 pairs, falling or constant give 0 */
    for (int k = 0; k < 300; k++) row[k] = k * 0.5;
    assert_int_equal(mp_recency_row_count(row, 300, scratch), 300 * 299 / 2);
    for (int k = 0; k < 300; k++) row[k] = -k;
    assert_int_equal(mp_recency_row_count(row, 300, scratch), 0);
    for (int k = 0; k < 300; k++) row[k] = 1.25;
    assert_int_equal(mp_recency_row_count(row, 300, scratch), 0);
    assert_int_equal(mp_recency_triples(10, 0), 120);
    assert_int_equal(mp_recency_triples(10, 1), 84);
    assert_int_equal(mp_recency_triples(2, 0), 0);
}

/* A map's count, from `first` on, against the definition written as three loops. */
static void test_map_count_brute_force(void **state) {
    (void)state;
    MpRng r;
    mp_rng_init(&r, 8, 0);
    enum { S = 70 };
    static double map[S * S], scratch[3 * S];
    static float mapf[S * S];
    for (int trial = 0; trial < 6; trial++) {
        for (int k = 0; k < S * S; k++) {
            map[k] = (double)(int)(mp_rng_uniform(&r) * (trial < 3 ? 5 : 1000000));
            mapf[k] = (float)map[k];
        }
        for (int i = 0; i < S; i++)
            for (int j = i; j < S; j++) map[i * S + j] = mapf[i * S + j] = NAN; /* never read */
        for (int first = 0; first <= 1; first++) {
            uint64_t brute = 0, triples = 0;
            for (int i = first; i < S; i++)
                for (int j = first; j < i; j++)
                    for (int k = j + 1; k < i; k++) {
                        brute += map[i * S + k] > map[i * S + j];
                        triples++;
                    }
            assert_int_equal(mp_recency_map_count(map, S, first, scratch), brute);
            assert_int_equal(mp_recency_map_count_f32(mapf, S, first, scratch), brute);
            assert_int_equal(mp_recency_triples(S, first), triples);
        }
    }
}

/* ================================================================ the later version's layer */

static void run_or_fail(MpSimResult *res, const MpSimConfig *c) {
    MpErr e;
    if (mp_sim_run(res, c, &e) != MP_OK) fail_msg("mp_sim_run: %s", e.msg);
}

static void recency_config(MpSimConfig *c, int dim, double alpha, MpNorm norm, int residual, int64_t batch) {
    mp_sim_config_default(c);
    c->form = MP_SIM_FORM_RECENCY;
    c->seq = 10;
    c->dim = dim;
    c->layers = 4;
    c->alpha = alpha;
    c->norm = norm;
    c->residual = residual;
    c->scale = sqrt((double)dim);
    c->batch = batch;
    c->seed = 2;
}

static void test_against_torch(void **state) {
    (void)state;
    char out[16384];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import torch, numpy'") != 0) {
        print_message("python3-torch is not installed: %s\n", out);
        skip();
    }
    const char *variants[][3] = {
        {"--norm none --residual off --alpha 0", "none", "off"},
        {"--norm none --residual on --alpha 0.3 --seq 60", "none", "on"},
        {"--norm layernorm --residual off --alpha 0.5", "layernorm", "off"},
        {"--norm layernorm --residual on --alpha 0.5 --seq 60 --dim 32", "layernorm", "on"},
    };
    for (size_t v = 0; v < sizeof variants / sizeof variants[0]; v++) {
        const char *d = mp_test_tmpdir();
        int rc = mp_test_run(out, sizeof out, "simulate --layer-form recency --batch 200 --dim 16 --seed 3 %s "
                             "--dump-inputs %s/in.npy --out %s --quiet", variants[v][0], d, d);
        if (rc != 0) fail_msg("simulate failed: %s", out);
        rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/recency_ref.py %s/in.npy %s --layers 4 "
                           "--norm %s --residual %s", MP_SOURCE_DIR, d, d, variants[v][1], variants[v][2]);
        print_message("%s\n%s", variants[v][0], out);
        if (rc != 0) fail_msg("torch reference disagrees for '%s'", variants[v][0]);
    }
}

/* The later version's figures (B = 1e7; docs/recency.md) print, at d = 16: no norm, α = 0:
 * 0.5000 0.5005 0.0822 0.0140; LayerNorm, α = 0.5: 0.5000 0.6382 0.8002 0.9079; at d = 256,
 * LayerNorm, α = 0.5: 0.5000 0.5023 (layers 1-2). At B = 3000 (se ≤ 0.004) the claims must hold
 * with room to spare; each value must also lie within 5 se + 0.002 of the printed one. */
static void test_claims_of_the_later_version(void **state) {
    (void)state;
    const struct {
        int dim;
        double alpha;
        MpNorm norm;
        int64_t batch;
        double want[4]; /* NaN: not printed */
    } cases[] = {
        {16, 0.0, MP_NORM_NONE, 3000, {0.5000, 0.5005, 0.0822, 0.0140}},
        {16, 0.5, MP_NORM_LAYERNORM, 3000, {0.5000, 0.6382, 0.8002, 0.9079}},
        {256, 0.5, MP_NORM_LAYERNORM, MP_TEST_SANITIZED ? 300 : 1500, {0.5000, 0.5023, NAN, NAN}},
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        MpSimConfig c;
        recency_config(&c, cases[t].dim, cases[t].alpha, cases[t].norm, 0, cases[t].batch);
        MpSimResult r;
        run_or_fail(&r, &c);
        for (int l = 0; l < 4; l++) {
            print_message("d %d alpha %.1f %s layer %d: RP %.4f +- %.4f (later version: %.4f)\n", c.dim, c.alpha,
                          c.norm == MP_NORM_NONE ? "no norm" : "layernorm", l + 1, r.rp[l], r.rp_se[l], cases[t].want[l]);
            assert_true(r.rp_se[l] > 0 && r.rp_se[l] < 0.01);
            if (!isnan(cases[t].want[l]) && !(fabs(r.rp[l] - cases[t].want[l]) < 5 * r.rp_se[l] + 0.002))
                fail_msg("layer %d: RP %.4f is not within 5 se of the later version's %.4f", l + 1, r.rp[l], cases[t].want[l]);
        }
        /* layer 1: the rows are exchangeable, so no preference */
        assert_true(fabs(r.rp[0] - 0.5) < 4 * r.rp_se[0]);
        if (t == 0) assert_true(r.rp[2] < 0.2 && r.rp[3] < 0.05);            /* primacy without a norm */
        if (t == 1) assert_true(r.rp[1] > 0.6 && r.rp[2] > 0.75 && r.rp[3] > 0.85); /* recency with LayerNorm */
        if (t == 2) for (int l = 0; l < 4; l++) assert_true(fabs(r.rp[l] - 0.5) < 0.02); /* wide: ≈ 0.5 */
        mp_sim_result_free(&r);
    }
}

/* The residual weakens the LayerNorm recency (later version, α = 0.5, d = 16: 0.5931 vs 0.6382
 * at layer 2), and a larger α strengthens it (α = 0.2 / 0.8 at layer 4: 0.6457 / 0.9983). */
static void test_residual_and_alpha_order(void **state) {
    (void)state;
    MpSimConfig c;
    MpSimResult no, yes, lo, hi;
    recency_config(&c, 16, 0.5, MP_NORM_LAYERNORM, 0, 2000);
    run_or_fail(&no, &c);
    c.residual = 1;
    run_or_fail(&yes, &c);
    recency_config(&c, 16, 0.2, MP_NORM_LAYERNORM, 0, 2000);
    run_or_fail(&lo, &c);
    c.alpha = 0.8;
    run_or_fail(&hi, &c);
    for (int l = 1; l < 4; l++) {
        print_message("layer %d: no residual %.4f, residual %.4f; alpha 0.2 %.4f, 0.8 %.4f\n", l + 1, no.rp[l], yes.rp[l],
                      lo.rp[l], hi.rp[l]);
        assert_true(yes.rp[l] < no.rp[l] - 4 * (no.rp_se[l] + yes.rp_se[l]));
        assert_true(lo.rp[l] < hi.rp[l] - 4 * (lo.rp_se[l] + hi.rp_se[l]));
    }
    mp_sim_result_free(&no);
    mp_sim_result_free(&yes);
    mp_sim_result_free(&lo);
    mp_sim_result_free(&hi);
}

static void test_threads_bit_identical(void **state) {
    (void)state;
    MpSimConfig c;
    recency_config(&c, 24, 0.4, MP_NORM_LAYERNORM, 1, 1000); /* 16 blocks, uneven last one */
    MpSimResult r1, r2;
    c.threads = 1;
    run_or_fail(&r1, &c);
    c.threads = 2;
    run_or_fail(&r2, &c);
    assert_memory_equal(r1.rp_count, r2.rp_count, 4 * sizeof(uint64_t));
    assert_memory_equal(r1.rp, r2.rp, 4 * sizeof(double));
    assert_memory_equal(r1.rp_se, r2.rp_se, 4 * sizeof(double));
    assert_memory_equal(r1.scores, r2.scores, 4 * 100 * sizeof(double));
    assert_int_equal(r1.rp_triples, 120);
    mp_sim_result_free(&r1);
    mp_sim_result_free(&r2);
    /* the paper form computes no recency probability */
    mp_sim_config_default(&c);
    c.batch = 10;
    c.seq = 8;
    c.dim = 8;
    run_or_fail(&r1, &c);
    assert_null(r1.rp);
    mp_sim_result_free(&r1);
}

static void test_cli_outputs_and_bad_flags(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], path[600];
    int rc = mp_test_run(out, sizeof out, "simulate --layer-form recency --batch 100 --dim 16 --alpha 0.5 --out %s", d); /* the RP table: not with --quiet */
    if (rc != 0) fail_msg("simulate failed: %s", out);
    if (!strstr(out, "form=recency residual=off") || !strstr(out, "S=10") || !strstr(out, "norm=layernorm"))
        fail_msg("recency defaults not shown: %s", out);
    if (!strstr(out, "recent triples")) fail_msg("no RP table: %s", out);
    snprintf(path, sizeof path, "%s/meta.json", d);
    assert_int_equal(mp_test_shell(out, sizeof out, "grep -c '\"recency_probability\"' %s", path), 0);
    assert_int_equal(mp_test_shell(out, sizeof out, "grep -c '\"recency_probability_se\"' %s", path), 0);
    const char *bad[] = {"--layer-form newer", "--residual maybe", "--norm rmsnorm", "--layer-form recency --batch 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rc = mp_test_run(out, sizeof out, "simulate --quiet %s", bad[i]);
        if (rc != 2) fail_msg("'simulate %s' exited %d, want 2: %s", bad[i], rc, out);
        if (!strstr(out, "maskpos simulate: error:")) fail_msg("'simulate %s': no error line: %s", bad[i], out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_matches_naive),        cmocka_unit_test(test_map_count_brute_force),
        cmocka_unit_test(test_against_torch),              cmocka_unit_test(test_claims_of_the_later_version),
        cmocka_unit_test(test_residual_and_alpha_order),   cmocka_unit_test(test_threads_bit_identical),
        cmocka_unit_test(test_cli_outputs_and_bad_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
