/* test_probe_pos.c — `maskpos probe --stats position` (src/model/probe_pos.c; docs/metrics.md,
 * "Position probe"):
 *   - a closed form: hidden states that are an affine function of the position (rank one) give, with
 *     the relative ridge α over K features, predictions shrunk towards the fitted mean by exactly
 *     t = (α/K) / (1 + α/K), so R² = 1 − t² and the MAE is t times the chance MAE (fed to the
 *     accumulator directly, 12 sequences; and with noise and a ±1 projection, R² > 0.99);
 *   - a plain PyTorch forward in float64 (tests/ref/pos_ref.py on probe_ref.py's decoder) of mkmodel
 *     models, whose residual streams numpy's ridge fits on the same split: every column of
 *     pos_probe.npy within its bound (R², its jackknife se, MAE and λ: the forward passes differ by float32
 *     rounding);
 *     the projection, the full width, sampled positions, other ridges, 2 threads, NoPE and the
 *     bidirectional counterfactual;
 *   - the paper's counterfactual (Haviv et al. 2022): the trained NoPE model (models/none) reads the
 *     position from its residual stream under the causal mask (R² > 0.9 in layers 2 and 3) and not
 *     without it (--bidirectional: permutation-equivariant, R² < 0.1, MAE within 10% of chance);
 *     a random NoPE model without the mask, on random tokens, is at chance;
 *   - the memory estimate the probe prints counts exactly the sums allocated;
 *   - the bytes at 1 and 2 threads and after --resume are tests/test_probe_table.c's (every row).
 *
 *   make build/tests/test_probe_pos && build/tests/test_probe_pos
 */
#include <math.h>

#include "test_model_util.h"

#include "model/fwd.h"       /* MP_FWD_AT_LAYER_OUT */
#include "model/probe.h"     /* MpProbeAcc */
#include "model/probe_pos.h" /* mp_probe_pos_out, the columns */

static int have_torch(void) {
    char out[4096];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import torch, numpy'") == 0) return 1;
    print_message("python3-torch is not installed: %s\n", out);
    return 0;
}

/* An accumulator of one layer, S positions, the position probe over C-wide states (K features). */
static void acc_pos(MpProbeAcc *a, int S, int C, int K, int stride, double ridge) {
    const unsigned char mask[1] = {1};
    MpErr e;
    if (mp_probe_acc_init(a, mask, 1, 2, S, 0, 1, 1, &e) != MP_OK) fail_msg("%s", e.msg);
    a->pos_width = C, a->pos_dim = K, a->pos_stride = stride, a->pos_ridge = ridge;
    if (mp_probe_acc_stat_on(a, MP_PROBE_STAT_POSITION, &e) != MP_OK) fail_msg("%s", e.msg);
}

/* N sequences of x[i, d] = i·v_d + c_d (+ noise · a fixed pseudo-random value) into a. */
static void feed_affine(MpProbeAcc *a, int N, int S, int C, double noise, uint32_t seed) {
    float *x = malloc(sizeof(float) * (size_t)S * C);
    uint32_t r = seed;
    for (int s = 0; s < N; s++) {
        for (int i = 0; i < S; i++)
            for (int d = 0; d < C; d++) {
                r = r * 1664525u + 1013904223u;
                const double u = ((r >> 8) / 16777216.0 - 0.5) * 2;
                x[(size_t)i * C + d] = (float)(i * (d % 3 - 1.0 + 0.25 * d) + 0.5 * d + noise * u);
            }
        a->seq_index = s;
        mp_probe_acc_capture(a, 0, MP_FWD_AT_LAYER_OUT, x, S, C);
        mp_probe_acc_seq_end(a);
    }
    free(x);
}

static void test_closed_form(void **state) {
    (void)state;
    const int S = 24, C = 8, N = 12;
    const double alpha = 1e-3;
    MpProbeAcc a;
    acc_pos(&a, S, C, 0, 1, alpha);
    assert_int_equal(a.pos_dim, C); /* 0: the whole width, no projection */
    feed_affine(&a, N, S, C, 0, 12345);
    double o[MP_PROBE_POS_COLS];
    mp_probe_pos_out(&a, o);
    const double t = (alpha / C) / (1 + alpha / C), chance = 6.0; /* mean |i − 11.5| over i = 0..23 */
    print_message("affine states: R2 %.12f (1 - t^2 = %.12f), MAE %.6g (t * chance %.6g), chance R2 %g, n %g/%g/%g\n",
                  o[MP_PROBE_POS_R2], 1 - t * t, o[MP_PROBE_POS_MAE], t * chance, o[MP_PROBE_POS_R2_CHANCE],
                  o[MP_PROBE_POS_N_FIT], o[MP_PROBE_POS_N_TEST], o[MP_PROBE_POS_N_MAE]);
    assert_true(fabs(o[MP_PROBE_POS_R2] - (1 - t * t)) < 1e-9);
    assert_true(fabs(o[MP_PROBE_POS_R2_FIT] - (1 - t * t)) < 1e-9);
    assert_true(fabs(o[MP_PROBE_POS_MAE] - t * chance) < 1e-9 * chance);
    assert_true(fabs(o[MP_PROBE_POS_MAE_CHANCE] - chance) < 1e-12);
    assert_true(fabs(o[MP_PROBE_POS_R2_CHANCE]) < 1e-12); /* both splits have every position: equal means */
    assert_true(o[MP_PROBE_POS_N_FIT] == 9 * S && o[MP_PROBE_POS_N_TEST] == 3 * S && o[MP_PROBE_POS_N_MAE] == 3 * S);
    mp_probe_acc_free(&a);
    /* with noise, 16-wide states projected to 4 features, every 3rd position: still read */
    acc_pos(&a, 64, 16, 4, 3, alpha);
    feed_affine(&a, 16, 64, 16, 0.5, 12345);
    mp_probe_pos_out(&a, o);
    print_message("noisy states, 4 of 16 dimensions, stride 3: R2 %.5f, MAE %.3f (chance %.3f), %g positions fitted\n",
                  o[MP_PROBE_POS_R2], o[MP_PROBE_POS_MAE], o[MP_PROBE_POS_MAE_CHANCE], o[MP_PROBE_POS_N_FIT]);
    assert_true(o[MP_PROBE_POS_R2] > 0.99 && o[MP_PROBE_POS_MAE] < 0.1 * o[MP_PROBE_POS_MAE_CHANCE]);
    mp_probe_acc_free(&a);
}

/* R²'s jackknife standard error against the spread of R² over independent replicates: 40 runs of
 * 64 noisy sequences (16 held out, one per group), 4 features of 16 noisy dimensions. */
static void test_r2_se_against_replicates(void **state) {
    (void)state;
    enum { R = 40 };
    double r2[R], se = 0, m = 0;
    for (int k = 0; k < R; k++) {
        MpProbeAcc a;
        acc_pos(&a, 32, 16, 4, 1, 1e-3);
        feed_affine(&a, 64, 32, 16, 40.0, 1000u + 7919u * (uint32_t)k);
        double o[MP_PROBE_POS_COLS];
        mp_probe_pos_out(&a, o);
        r2[k] = o[MP_PROBE_POS_R2];
        se += o[MP_PROBE_POS_R2_SE] / R;
        m += r2[k] / R;
        mp_probe_acc_free(&a);
    }
    double v = 0;
    for (int k = 0; k < R; k++) v += (r2[k] - m) * (r2[k] - m) / (R - 1);
    print_message("R2 %.4f over %d replicates: their spread %.4g, mean jackknife se %.4g (ratio %.3f)\n", m, R, sqrt(v), se,
                  se / sqrt(v));
    assert_true(m > 0.2 && m < 0.95); /* noisy enough that R² varies */
    assert_true(se > 0.6 * sqrt(v) && se < 1.6 * sqrt(v));
}

/* The memory estimate (mp_probe_stats_bytes_acc, the figure the probe prints) counts the sums an
 * accumulator with the position probe allocates, hashed and at the whole width. */
static void test_estimate_is_the_allocation(void **state) {
    (void)state;
    const int dims[2] = {6, 0};
    for (int k = 0; k < 2; k++) {
        MpProbeAcc a;
        acc_pos(&a, 20, 16, dims[k], 3, 0);
        MpProbeArray t[MP_PROBE_MAX_ARRAYS];
        const int n = mp_probe_acc_arrays(&a, t);
        uint64_t have = 0, sums, scratch, outs;
        for (int q = 0; q < n; q++) have += 8 * (uint64_t)t[q].n;
        MpProbeAcc like = {.L = 1, .H = 2, .S = 20, .threads = 1, .pos_width = 16, .pos_dim = dims[k], .pos_stride = 3};
        mp_probe_stats_bytes_acc(&like, MP_PROBE_STAT_BIT(MP_PROBE_STAT_POSITION), &sums, &scratch, &outs);
        const uint64_t K = (uint64_t)a.pos_dim, W = 3 + 2 * K + K * K;
        print_message("K %llu: %llu bytes of sums, estimate %llu\n", (unsigned long long)K, (unsigned long long)have,
                      (unsigned long long)sums);
        assert_int_equal(sums, have);
        /* the maps' sums (known to test_probe_table.c) and the position probe's: 2 splits and 16 groups of W, 1024 rows of K + 1 */
        MpProbeAcc m;
        const unsigned char mask[1] = {1};
        MpErr e;
        if (mp_probe_acc_init(&m, mask, 1, 2, 20, 0, 1, 1, &e) != MP_OK) fail_msg("%s", e.msg);
        const int nm = mp_probe_acc_arrays(&m, t);
        uint64_t maps = 0;
        for (int q = 0; q < nm; q++) maps += 8 * (uint64_t)t[q].n;
        assert_int_equal(have - maps, 8 * ((2 + 16) * W + MP_PROBE_POS_MAE_ROWS * (K + 1)));
        mp_probe_acc_free(&m);
        mp_probe_acc_free(&a);
    }
}

/* probe --stats position of a model (mkmodel args) on N × S ids against pos_ref.py; flags: more of
 * both (the counterfactuals), probe: the probe's own (--pos-*), ref: pos_ref.py's. */
static void against_torch(const char *name, const char *mk, const char *layers, const char *flags, const char *probe,
                          const char *ref, int threads, int n) {
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], d[300], out[16384];
    snprintf(model, sizeof model, "%s/%s", top, name);
    snprintf(ids, sizeof ids, "%s/%s-ids.npy", top, name);
    snprintf(d, sizeof d, "%s/%s-out", top, name);
    model_make(model, mk);
    ids_write(ids, n, 40, 300, -1, 21);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers %s --stats position %s %s --threads %d --quiet",
                         model, ids, d, layers, probe, flags, threads);
    if (rc != 0) fail_msg("%s: probe failed: %s", name, out);
    rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/pos_ref.py %s %s %s --layers %s %s %s", MP_SOURCE_DIR,
                       model, ids, d, layers, ref, flags);
    if (rc != 0) fail_msg("pos_ref.py failed: %s", out);
    char p[600];
    size_t n1, n2;
    snprintf(p, sizeof p, "%s/pos_probe.npy", d);
    double *a = npy_load_f64(p, &n1, NULL);
    snprintf(p, sizeof p, "%s/ref_pos_probe.npy", d);
    double *b = npy_load_f64(p, &n2, NULL);
    assert_int_equal(n1, n2);
    double er = 0, em = 0; /* R²s and R²'s se absolute; MAEs, their se and λ relative */
    for (size_t k = 0; k < n1; k++) {
        const int c = (int)(k % MP_PROBE_POS_COLS);
        if (!isfinite(a[k]) || !isfinite(b[k])) fail_msg("%s: column %d: maskpos %g, numpy %g", name, c, a[k], b[k]);
        if (c == MP_PROBE_POS_R2 || c == MP_PROBE_POS_R2_CHANCE || c == MP_PROBE_POS_R2_FIT || c == MP_PROBE_POS_R2_SE)
            er = fmax(er, fabs(a[k] - b[k]));
        else if (c >= MP_PROBE_POS_N_FIT && c <= MP_PROBE_POS_N_MAE) assert_true(a[k] == b[k]); /* counts */
        else em = fmax(em, fabs(a[k] - b[k]) / fabs(b[k]));
    }
    print_message("%s (layers %s %s%s): R2 and its se within %.2g of numpy's ridge on torch's states (float64), MAE and "
                  "lambda %.2g relative; R2 %.4f +- %.4f, MAE %.3f (chance %.3f)\n", name, layers, probe, flags, er, em,
                  a[MP_PROBE_POS_R2], a[MP_PROBE_POS_R2_SE], a[MP_PROBE_POS_MAE], a[MP_PROBE_POS_MAE_CHANCE]);
    assert_true(er < 1e-5);
    assert_true(em < 1e-5);
    free(a);
    free(b);
}

static void test_position_against_torch(void **state) {
    (void)state;
    if (!have_torch()) skip();
    against_torch("llama", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 3", "1,3", "",
                  "--pos-dim 16 --pos-stride 3 --pos-ridge 0.01", "--dim 16 --stride 3 --ridge 0.01", 2, 12);
    against_torch("phi3", "--arch phi3 --layers 2 --heads 4 --kv-heads 4 --vocab 300 --seed 5 --partial-rotary 0.5", "1,2", "",
                  "--pos-dim 0", "--dim 0", 1, 12);
    against_torch("gemma3", "--arch gemma3 --layers 2 --head-dim 16 --sliding-window 8 --vocab 300 --seed 4", "1,2", "", "", "", 1, 12);
    against_torch("nope", "--arch llama --layers 2 --dim 128 --heads 4 --kv-heads 4 --vocab 300 --seed 11", "1,2",
                  " --no-rope", "--pos-stride 2", "--stride 2", 2, 12);
    /* the residual stream of one sequence in 3 (30 sequences: 10 read, 2 of them held out) */
    against_torch("rs3", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 3", "1,3", "",
                  "--resid-stride 3 --pos-dim 16", "--resid-stride 3 --dim 16", 2, 30);
    against_torch("nopebi", "--arch llama --layers 2 --dim 128 --heads 4 --kv-heads 4 --vocab 300 --seed 11", "1,2",
                  " --no-rope --bidirectional", "", "", 1, 12);
}

/* The held-out R² and MAE per layer of a run folder, and the chance MAE. */
static void pos_read(const char *dir, double *r2, double *mae, double *chance, int L) {
    char p[600];
    size_t n;
    snprintf(p, sizeof p, "%s/pos_probe.npy", dir);
    double *o = npy_load_f64(p, &n, NULL);
    assert_int_equal(n, (size_t)L * MP_PROBE_POS_COLS);
    for (int l = 0; l < L; l++) {
        r2[l] = o[l * MP_PROBE_POS_COLS + MP_PROBE_POS_R2];
        mae[l] = o[l * MP_PROBE_POS_COLS + MP_PROBE_POS_MAE];
        chance[l] = o[l * MP_PROBE_POS_COLS + MP_PROBE_POS_MAE_CHANCE];
    }
    free(o);
}

static void test_nope_causal_reads_position_bidirectional_does_not(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char out[16384], d[300], model[600];
    snprintf(model, sizeof model, "%s/models/none", MP_SOURCE_DIR);
    double r2[2][4], mae[2][4], ch[2][4];
    for (int bi = 0; bi < 2; bi++) {
        snprintf(d, sizeof d, "%s/none-%d", top, bi);
        const int rc = mp_test_run(out, sizeof out, "probe %s --data %s/models/kjv.txt --pack --n 32 --seq 64 --out %s --layers all "
                                   "--stats position --quiet %s", model, MP_SOURCE_DIR, d, bi ? "--bidirectional" : "");
        if (rc != 0) fail_msg("probe: %s", out);
        pos_read(d, r2[bi], mae[bi], ch[bi], 4);
        print_message("trained NoPE, %s: R2 %.4f %.4f %.4f %.4f, MAE %.2f %.2f %.2f %.2f (chance %.2f)\n",
                      bi ? "bidirectional" : "causal", r2[bi][0], r2[bi][1], r2[bi][2], r2[bi][3], mae[bi][0], mae[bi][1],
                      mae[bi][2], mae[bi][3], ch[bi][0]);
    }
    for (int l = 1; l <= 2; l++) assert_true(r2[0][l] > 0.9 && mae[0][l] < 0.25 * ch[0][l]);
    for (int l = 0; l < 4; l++) assert_true(r2[1][l] < 0.1 && mae[1][l] > 0.9 * ch[1][l]);
    /* a random NoPE model without the mask, random tokens: nothing to read */
    char rnd[300], ids[300];
    snprintf(rnd, sizeof rnd, "%s/rnd", top);
    snprintf(ids, sizeof ids, "%s/rnd-ids.npy", top);
    model_make(rnd, "--arch llama --layers 2 --dim 64 --heads 4 --kv-heads 4 --vocab 300 --seed 11");
    ids_write(ids, 32, 48, 300, -1, 5);
    snprintf(d, sizeof d, "%s/rnd-bi", top);
    if (mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers all --stats position --no-rope --bidirectional --quiet",
                    rnd, ids, d) != 0)
        fail_msg("probe: %s", out);
    pos_read(d, r2[0], mae[0], ch[0], 2);
    print_message("random NoPE, bidirectional: R2 %.4f %.4f, MAE %.2f %.2f (chance %.2f)\n", r2[0][0], r2[0][1], mae[0][0],
                  mae[0][1], ch[0][0]);
    for (int l = 0; l < 2; l++) assert_true(r2[0][l] < 0.05 && mae[0][l] > 0.95 * ch[0][l]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_form),
        cmocka_unit_test(test_r2_se_against_replicates),
        cmocka_unit_test(test_estimate_is_the_allocation),
        cmocka_unit_test(test_nope_causal_reads_position_bidirectional_does_not),
        cmocka_unit_test(test_position_against_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
