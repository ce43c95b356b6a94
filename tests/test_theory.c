/* test_theory.c — the closed form (sim/theory.c) against independent evaluations:
 *   - S21 = 1/√(1+(1+2e)²) (paper.md §1), and the printed 3-decimal values;
 *   - an explicit construction: n unit vectors with pairwise inner product exactly α
 *     (x_i = √(1−α) e_i + √α e_0 in R^(n+1)), one causal layer run on them with plain loops,
 *     then the layer-2 scores as normalised inner products: must equal g(i)/(h(i)h(j));
 *   - the Gram recursion's layer 2 equals the closed form, its layer 3 equals the explicit
 *     construction run one layer further;
 *   - the attention output's variance by position (mp_theory_layers) equals the explicit vectors'
 *     |o_i|² and Σ_j a_ij² at layers 1-4, and layer 1's closed form;
 *   - CLI output and bad input (exit 2).
 */
#include "testutil.h"

#include "core/npy.h"
#include "core/util.h"
#include "sim/theory.h"

/* Runs `layers` causal parameter-free layers on explicit vectors and returns the scores of the
 * last one (n,n), NaN above the diagonal; with var and iid (n each, may be NULL), of the last layer
 * the squared norm of each attention output o_i = Σ_j a_ij y_j (d × its variance per dimension: the
 * vectors realise the infinite-width Gram exactly) and Σ_j a_ij². Written independently of theory.c. */
static void explicit_scores(double *out, double alpha, int n, int layers, double *var, double *iid) {
    int dim = n + 1;
    double *x = calloc((size_t)n * dim, sizeof *x), *y = calloc((size_t)n * dim, sizeof *y);
    double *nx = calloc((size_t)n * dim, sizeof *nx);
    for (int i = 0; i < n; i++) {
        x[(size_t)i * dim + 0] = sqrt(alpha);
        x[(size_t)i * dim + 1 + i] = sqrt(1 - alpha);
    }
    for (int l = 0; l < layers; l++) {
        for (int i = 0; i < n; i++) {
            double nn = 0;
            for (int k = 0; k < dim; k++) nn += x[(size_t)i * dim + k] * x[(size_t)i * dim + k];
            for (int k = 0; k < dim; k++) y[(size_t)i * dim + k] = x[(size_t)i * dim + k] / sqrt(nn);
        }
        for (int i = 0; i < n; i++) {
            double w[n], mx = -1e300, den = 0;
            for (int j = 0; j <= i; j++) {
                double s = 0;
                for (int k = 0; k < dim; k++) s += y[(size_t)i * dim + k] * y[(size_t)j * dim + k];
                w[j] = s;
                out[(size_t)i * n + j] = s;
                if (s > mx) mx = s;
            }
            for (int j = i + 1; j < n; j++) out[(size_t)i * n + j] = NAN;
            for (int j = 0; j <= i; j++) den += (w[j] = exp(w[j] - mx));
            double o2 = 0, a2 = 0;
            for (int k = 0; k < dim; k++) {
                double acc = x[(size_t)i * dim + k], o = 0;
                for (int j = 0; j <= i; j++) acc += w[j] / den * y[(size_t)j * dim + k], o += w[j] / den * y[(size_t)j * dim + k];
                nx[(size_t)i * dim + k] = acc;
                o2 += o * o;
            }
            for (int j = 0; j <= i; j++) a2 += (w[j] / den) * (w[j] / den);
            if (var && l + 1 == layers) var[i] = o2, iid[i] = a2;
        }
        memcpy(x, nx, (size_t)n * dim * sizeof *x);
    }
    free(x), free(y), free(nx);
}

static void test_check_values(void **state) {
    (void)state;
    MpTheory t;
    MpErr e;
    assert_int_equal(mp_theory_init(&t, 0.0, 3, &e), MP_OK);
    const double E = exp(1.0);
    assert_true(fabs(t.s2[1 * 3 + 0] - 1.0 / sqrt(1 + (1 + 2 * E) * (1 + 2 * E))) < 1e-15);
    assert_true(fabs(t.h[0] - 2.0) < 1e-15); /* x_1(1) = 2 x_1 */
    /* 3-decimal values: paper Figure 1(d) shows 0.154, 0.132, 0.150; the closed form gives
     * S32 = 0.150818 (it rounds to 0.151 — see docs/theory.md) */
    assert_true(fabs(t.s2[1 * 3 + 0] - 0.154) < 0.0005);
    assert_true(fabs(t.s2[2 * 3 + 0] - 0.132) < 0.0005);
    assert_true(fabs(t.s2[2 * 3 + 1] - 0.150) < 0.001);
    assert_true(fabs(t.s2[2 * 3 + 1] - 0.1508177) < 1e-6);
    assert_true(isnan(t.s2[0 * 3 + 1]));
    assert_true(t.s2[2 * 3 + 2] == 1.0);
    mp_theory_free(&t);
}

static void test_against_explicit_vectors(void **state) {
    (void)state;
    const double alphas[] = {0.0, 0.2, 0.5, 0.9};
    const int ns[] = {2, 3, 10, 40};
    for (size_t a = 0; a < 4; a++)
        for (size_t k = 0; k < 4; k++) {
            int n = ns[k];
            MpTheory t;
            MpErr e;
            assert_int_equal(mp_theory_init(&t, alphas[a], n, &e), MP_OK);
            double *ex = malloc((size_t)n * n * sizeof *ex);
            explicit_scores(ex, alphas[a], n, 2, NULL, NULL);
            double d = mp_test_max_abs_diff(t.s2, ex, (size_t)n * n);
            if (!(d < 1e-12)) fail_msg("alpha %g n %d: closed form vs explicit vectors differ by %g", alphas[a], n, d);
            /* h strictly decreasing (paper: the mask favours nearby pairs) */
            for (int i = 1; i < n; i++) assert_true(t.h[i] < t.h[i - 1]);
            free(ex);
            mp_theory_free(&t);
        }
}

static void test_gram_recursion(void **state) {
    (void)state;
    const int n = 12, L = 4;
    for (double alpha = 0; alpha < 0.95; alpha += 0.3) {
        double *g = malloc((size_t)L * n * n * sizeof *g), *ex = malloc((size_t)n * n * sizeof *ex);
        MpErr e;
        MpTheory t;
        assert_int_equal(mp_theory_gram_layers(g, alpha, n, L, 1, &e), MP_OK);
        assert_int_equal(mp_theory_init(&t, alpha, n, &e), MP_OK);
        assert_true(mp_test_max_abs_diff(g + (size_t)n * n, t.s2, (size_t)n * n) < 1e-12);
        for (int l = 1; l <= L; l++) {
            explicit_scores(ex, alpha, n, l, NULL, NULL);
            double d = mp_test_max_abs_diff(g + (size_t)(l - 1) * n * n, ex, (size_t)n * n);
            if (!(d < 1e-11)) fail_msg("alpha %g layer %d: recursion vs explicit differ by %g", alpha, l, d);
        }
        mp_theory_free(&t);
        free(g), free(ex);
    }
}

/* The attention output's variance by position (mp_theory_layers, and theory_job's layer-1 closed
 * form): equal to the explicit vectors' |o_i|² and Σ_j a_ij² at every layer (1e-12); layer 1's
 * closed form (e² + (i−1)e^{2α})/Z_i² and (1−α)·it + α equal the recursion's layer 1; the scores
 * unchanged by asking for the variances. */
static void test_variance(void **state) {
    (void)state;
    const int n = 12, L = 4;
    for (double alpha = 0; alpha < 0.95; alpha += 0.3) {
        double *g = malloc((size_t)L * n * n * sizeof *g), *g0 = malloc((size_t)L * n * n * sizeof *g0);
        double *ex = malloc((size_t)n * n * sizeof *ex), vi[L * n], vv[L * n], xv[n], xi[n];
        MpErr e;
        assert_int_equal(mp_theory_layers(g, vi, vv, alpha, n, L, 1, &e), MP_OK);
        assert_int_equal(mp_theory_gram_layers(g0, alpha, n, L, 1, &e), MP_OK);
        assert_memory_equal(g, g0, (size_t)L * n * n * sizeof *g);
        double d = 0;
        for (int l = 1; l <= L; l++) {
            explicit_scores(ex, alpha, n, l, xv, xi);
            d = fmax(d, fmax(mp_test_max_abs_diff(vv + (size_t)(l - 1) * n, xv, n), mp_test_max_abs_diff(vi + (size_t)(l - 1) * n, xi, n)));
        }
        if (!(d < 1e-12)) fail_msg("alpha %g: variances of the recursion vs explicit vectors differ by %g", alpha, d);
        MpTheory t;
        assert_int_equal(mp_theory_init(&t, alpha, n, &e), MP_OK);
        const double E = exp(1.0);
        for (int i = 0; i < n; i++) { /* 0-based i: i keys before the query, each e^α/Z, itself e/Z */
            const double z = E + i * exp(alpha), c = (E * E + i * exp(2 * alpha)) / (z * z);
            assert_true(fabs(vi[i] - c) < 1e-14 && fabs(vv[i] - ((1 - alpha) * c + alpha)) < 1e-14);
        }
        if (alpha == 0) print_message("layer 1, alpha 0: var_iid at i = 1, 2, 12: %.4f %.4f %.4f (uniform attention, 1/i: 1 0.5 0.083)\n", vi[0], vi[1], vi[11]);
        mp_theory_free(&t);
        free(g), free(g0), free(ex);
    }
}

static void test_bad_input(void **state) {
    (void)state;
    MpTheory t;
    MpErr e;
    assert_int_equal(mp_theory_init(&t, 1.0, 3, &e), MP_ERR);
    assert_int_equal(mp_theory_init(&t, -0.1, 3, &e), MP_ERR);
    assert_int_equal(mp_theory_init(&t, 0.0, 0, &e), MP_ERR);
    char out[4096];
    const char *bad[] = {"--alpha 1", "--alpha -0.1", "--alpha abc", "--n 0", "--n 3x", "--bogus", "--alpha", "extra"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = mp_test_run(out, sizeof out, "theory %s", bad[i]);
        if (rc != 2) fail_msg("'theory %s' exited %d, want 2: %s", bad[i], rc, out);
        assert_non_null(strstr(out, "maskpos theory: error:"));
        assert_null(strchr(strchr(out, '\n') + 1, '\n')); /* one line */
    }
}

static void test_cli_output(void **state) {
    (void)state;
    char out[16384];
    const char *dir = mp_test_tmpdir();
    assert_int_equal(mp_test_run(out, sizeof out, "theory --alpha 0 --n 3 --out %s", dir), 0);
    assert_non_null(strstr(out, "0.154"));
    assert_non_null(strstr(out, "0.132"));
    char path[256];
    snprintf(path, sizeof path, "%s/layer2_scores.npy", dir);
    MpNpy a;
    MpErr e;
    assert_int_equal(mp_npy_read(path, &a, &e), MP_OK);
    assert_int_equal(a.dtype, MP_DT_F64);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 3);
    const double *s = a.data;
    assert_true(isnan(s[1]) && isnan(s[2]) && isnan(s[5]));
    assert_true(fabs(s[3] - 0.15352) < 1e-5);
    mp_npy_free(&a);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    assert_true(mp_file_exists(path));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_values), cmocka_unit_test(test_against_explicit_vectors),
        cmocka_unit_test(test_gram_recursion), cmocka_unit_test(test_variance), cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_cli_output),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
