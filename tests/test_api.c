/* test_api.c — a program written against include/maskpos.h alone, as a library user would:
 * theory → simulate → statistics, checking the library's documented contracts (NaN above the
 * diagonal, rows of probabilities summing to 1, standard errors shrinking like 1/√B), and the API's
 * own: settings refused with the command's message, a result saved and loaded back bit for bit and
 * equal to the command line's folder, a stop asked by the progress callback, theory against its
 * closed form. */
#include "testutil.h"

#include "maskpos.h"

static MaskposConfig *sim_config(int seq, int dim, int layers, const char *alpha, const char *batch) {
    char s[16], d[16], l[16];
    snprintf(s, sizeof s, "%d", seq);
    snprintf(d, sizeof d, "%d", dim);
    snprintf(l, sizeof l, "%d", layers);
    MaskposConfig *c = maskpos_config_new("simulate");
    assert_non_null(c);
    assert_int_equal(maskpos_config_set(c, "seq", s), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "dim", d), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "layers", l), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "alpha", alpha), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "batch", batch), MASKPOS_OK);
    return c;
}

static const double *array3(const MaskposResult *r, const char *name, int64_t L, int64_t S) {
    int dt = -1, nd = 0;
    int64_t shp[MASKPOS_MAX_DIMS] = {0};
    const double *a = maskpos_result_array(r, name, &dt, &nd, shp);
    assert_non_null(a);
    assert_int_equal(dt, MASKPOS_F64);
    assert_int_equal(nd, 3);
    assert_true(shp[0] == L && shp[1] == S && shp[2] == S);
    return a;
}

static void test_library_round_trip(void **state) {
    (void)state;
    double se_small = 0, se_big = 0;
    for (int k = 0; k < 2; k++) {
        MaskposConfig *c = sim_config(6, 16, 2, "0.1", k ? "1600" : "400");
        MaskposResult *r = NULL;
        assert_int_equal(maskpos_simulate(c, NULL, NULL, &r), MASKPOS_OK);
        const double *probs = array3(r, "probs", 2, 6), *scores = array3(r, "scores", 2, 6);
        const double *se = array3(r, "scores_se", 2, 6);
        for (int i = 0; i < 6; i++) {
            double s = 0;
            for (int j = 0; j < 6; j++) {
                s += probs[i * 6 + j];
                if (j > i) assert_true(isnan(scores[i * 6 + j]));
            }
            assert_true(fabs(s - 1) < 1e-12);
        }
        if (k) se_big = se[36 + 5 * 6 + 0];
        else se_small = se[36 + 5 * 6 + 0];
        assert_int_equal(maskpos_result_nstats(r), 2);
        assert_true(maskpos_result_stat(r, 1, "nri") >= 0 && maskpos_result_stat(r, 1, "nri") <= 1);
        assert_true(isnan(maskpos_result_stat(r, 1, "no_such_statistic")));
        maskpos_result_free(r);
        maskpos_config_free(c);
    }
    /* 4× the sequences → about half the standard error */
    assert_true(se_big / se_small > 0.4 && se_big / se_small < 0.6);
}

/* Bad settings are rejected, not clamped, with the message `maskpos simulate` prints. */
static void test_errors_are_the_commands(void **state) {
    (void)state;
    MaskposConfig *c = maskpos_config_new("simulate");
    assert_int_equal(maskpos_config_set(c, "alpha", "1.0"), MASKPOS_ERR);
    assert_string_equal(maskpos_last_error(), "--alpha: 1 is outside [0, 1)");
    char out[4096];
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --alpha 1.0"), 2);
    assert_non_null(strstr(out, "maskpos simulate: error: --alpha: 1 is outside [0, 1)"));
    assert_int_equal(maskpos_config_set(c, "batch", "0"), MASKPOS_ERR);
    assert_string_equal(maskpos_last_error(), "--batch: 0 is outside [1, 1099511627776]");
    assert_int_equal(maskpos_config_set(c, "norm", "l3"), MASKPOS_ERR);
    assert_string_equal(maskpos_last_error(), "--norm: 'l3' is not l2, layernorm or none");
    assert_int_equal(maskpos_config_set(c, "colour", "red"), MASKPOS_ERR);
    assert_string_equal(maskpos_last_error(), "unknown option or missing value: '--colour' (see 'maskpos simulate --help')");
    /* a refused value leaves the setting as it was; an odd --dim with --rope is refused at the run */
    assert_int_equal(maskpos_config_set(c, "rope", "1"), MASKPOS_OK);
    assert_int_equal(maskpos_config_set(c, "dim", "7"), MASKPOS_OK);
    MaskposResult *r = (MaskposResult *)c; /* overwritten with NULL on failure */
    assert_int_equal(maskpos_simulate(c, NULL, NULL, &r), MASKPOS_ERR);
    assert_null(r);
    assert_string_equal(maskpos_last_error(), "--rope needs an even --dim (got 7)");
    maskpos_config_free(c);
    assert_null(maskpos_config_new("train-a-dragon"));
    MaskposResult *l = NULL;
    assert_int_equal(maskpos_load("/nonexistent-folder", &l), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "/nonexistent-folder: no meta.json"));
    MaskposModel *m = NULL;
    assert_int_equal(maskpos_model_open("/nonexistent-model.gguf", &m), MASKPOS_ERR);
    assert_null(m);
    assert_non_null(strstr(maskpos_last_error(), "/nonexistent-model.gguf"));
}

typedef struct Calls {
    int n, stop_at;
    int64_t last, total;
    int increasing;
} Calls;

static int count_calls(void *user, int64_t done, int64_t total) {
    Calls *c = user;
    c->increasing &= c->n == 0 || done > c->last;
    c->n++;
    c->last = done;
    c->total = total;
    return c->stop_at && c->n == c->stop_at;
}

/* One thread: the callback sees 0, then every block of 64 sequences, in order; a nonzero return
 * stops the run (no result, "stopped by the caller"), at the first call or midway. */
static void test_progress_stop(void **state) {
    (void)state;
    MaskposConfig *c = sim_config(6, 16, 2, "0", "640");
    assert_int_equal(maskpos_config_set(c, "threads", "1"), MASKPOS_OK);
    MaskposResult *r = NULL;
    Calls all = {0, 0, -1, 0, 1};
    assert_int_equal(maskpos_simulate(c, count_calls, &all, &r), MASKPOS_OK);
    assert_int_equal(all.n, 1 + 640 / 64);
    assert_true(all.increasing && all.last == 640 && all.total == 640);
    maskpos_result_free(r);
    for (int stop_at = 1; stop_at <= 3; stop_at += 2) {
        Calls some = {0, stop_at, -1, 0, 1};
        r = (MaskposResult *)c;
        assert_int_equal(maskpos_simulate(c, count_calls, &some, &r), MASKPOS_STOPPED);
        assert_null(r);
        assert_int_equal(some.n, stop_at);
        assert_string_equal(maskpos_last_error(), "stopped by the caller");
    }
    maskpos_config_free(c);
}

/* Saved through the API = written by the command, byte for byte (the .npy files); loaded back =
 * the same arrays. */
static void test_save_load_equals_cli(void **state) {
    (void)state;
    char out[8192];
    const char *dir = mp_test_tmpdir();
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --batch 300 --seq 8 --dim 16 --layers 2 --alpha 0.3 --rope --quiet --out %s/cli", dir), 0);
    MaskposConfig *c = sim_config(8, 16, 2, "0.3", "300");
    assert_int_equal(maskpos_config_set(c, "rope", "true"), MASKPOS_OK);
    MaskposResult *r = NULL;
    assert_int_equal(maskpos_simulate(c, NULL, NULL, &r), MASKPOS_OK);
    char api_dir[600];
    snprintf(api_dir, sizeof api_dir, "%s/api", dir);
    assert_int_equal(maskpos_result_save(r, api_dir, 0), MASKPOS_OK);
    assert_int_equal(maskpos_result_save(r, api_dir, 0), MASKPOS_ERR); /* one run per folder */
    assert_non_null(strstr(maskpos_last_error(), api_dir));
    assert_int_equal(maskpos_result_save(r, api_dir, 1), MASKPOS_OK);
    const char *files[] = {"scores", "scores_se", "probs", "scores_diagnorm"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(mp_test_shell(out, sizeof out, "cmp %s/cli/%s.npy %s/api/%s.npy", dir, files[i], dir, files[i]), 0);
    /* the meta names the same settings (and the command line that gives them) */
    const char *meta = maskpos_result_meta(r);
    assert_non_null(meta);
    assert_non_null(strstr(meta, "\"rope\": true"));
    assert_non_null(strstr(meta, "\"--rope\""));
    MaskposResult *l = NULL;
    assert_int_equal(maskpos_load(api_dir, &l), MASKPOS_OK);
    assert_string_equal(maskpos_result_kind(l), "simulate");
    assert_int_equal(maskpos_result_narrays(l), 4);
    for (int i = 0; i < 4; i++) {
        const double *a = array3(r, files[i], 2, 8), *b = array3(l, files[i], 2, 8);
        assert_memory_equal(a, b, 2 * 8 * 8 * sizeof(double));
    }
    assert_true(maskpos_result_stat(l, 0, "nri") == maskpos_result_stat(r, 0, "nri"));
    maskpos_result_free(l);
    maskpos_result_free(r);
    maskpos_config_free(c);
    mp_test_shell(NULL, 0, "rm -rf %s", dir);
}

/* The theory's layer-2 map against its closed form S(2)_ij = g(i)/(h(i)h(j)) at α = 0:
 * Z_i = e + (i−1), g(i) = 2/Z_i, h(i)² = 1 + (2e + 1)/Z_i + (e² − e)/Z_i² (docs/theory.md). */
static void test_theory_closed_form(void **state) {
    (void)state;
    MaskposConfig *c = maskpos_config_new("theory");
    assert_int_equal(maskpos_config_set(c, "n", "5"), MASKPOS_OK);
    MaskposResult *r = NULL;
    assert_int_equal(maskpos_theory(c, &r), MASKPOS_OK);
    int nd = 0;
    int64_t shp[MASKPOS_MAX_DIMS];
    const double *s2 = maskpos_result_array(r, "layer2_scores", NULL, &nd, shp);
    assert_true(s2 && nd == 2 && shp[0] == 5 && shp[1] == 5);
    assert_null(maskpos_result_array(r, "layer_scores", NULL, NULL, NULL)); /* no --layers */
    const double e1 = exp(1.0);
    double h[5], g[5];
    for (int i = 0; i < 5; i++) {
        const double z = e1 + i;
        g[i] = 2 / z;
        h[i] = sqrt(1 + (2 * e1 + 1) / z + (e1 * e1 - e1) / (z * z));
    }
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++) {
            const double v = s2[i * 5 + j];
            if (j > i) assert_true(isnan(v));
            else if (j == i) assert_true(fabs(v - 1) < 1e-12);
            else assert_true(fabs(v - g[i] / (h[i] * h[j])) < 1e-12);
        }
    assert_true(fabs(s2[2 * 5 + 1] - 0.150818) < 1e-6); /* README: S32 = 0.150818 */
    maskpos_result_free(r);
    maskpos_config_free(c);
}

/* Issue 31: load refuses a folder whose arrays disagree (mixed from two runs), and one whose
 * meta.json is no object (before: both loaded). Through the CLI: a simulate folder whose
 * scores_se.npy is replaced by another run's. */
static void test_load_refuses_mixed_folder(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], dir[512];
    snprintf(dir, sizeof dir, "%s/mixed", d);
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --batch 20 --seq 5 --dim 4 --layers 2 --quiet --out %s", dir), 0);
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --batch 20 --seq 6 --dim 4 --layers 2 --quiet --out %s/b", d), 0);
    MaskposResult *l = NULL;
    assert_int_equal(maskpos_load(dir, &l), MASKPOS_OK); /* as written: loads */
    maskpos_result_free(l);
    l = NULL;
    assert_int_equal(mp_test_shell(NULL, 0, "cp %s/b/scores_se.npy %s/", d, dir), 0);
    assert_int_equal(maskpos_load(dir, &l), MASKPOS_ERR);
    assert_null(l);
    assert_non_null(strstr(maskpos_last_error(), "differ in shape"));
    assert_int_equal(mp_test_shell(NULL, 0, "cp %s/b/scores_se.npy %s/b/scores.npy %s/b/probs.npy %s/b/scores_diagnorm.npy %s/",
                                   d, d, d, d, dir), 0); /* arrays of seq 6, meta.json of seq 5 */
    assert_int_equal(maskpos_load(dir, &l), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "seq 5 does not match"));
    assert_int_equal(mp_test_shell(NULL, 0, "echo '[1]' > %s/meta.json", dir), 0);
    assert_int_equal(maskpos_load(dir, &l), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "not a JSON object"));
}

/* The accumulator through the header alone: two sequences of hand-made scores [1, 2, 4, 4] (causal,
 * the masked half full of NaN) give the mean of the observed entries and NaN elsewhere, the head
 * mean's sample standard error; a NaN in an observed entry is refused with a message naming it and
 * leaves the count; a merge doubles the count and keeps the mean. */
static void test_accumulator(void **state) {
    (void)state;
    MaskposAccOptions o = {.n_layers = 1, .n_heads = 2, .seq = 4, .causal = 1};
    MaskposAcc *a = NULL, *b = NULL;
    assert_int_equal(maskpos_acc_new(&o, &a), MASKPOS_OK);
    assert_int_equal(maskpos_acc_new(&o, &b), MASKPOS_OK);
    float x[2][2][4][4];
    for (int s = 0; s < 2; s++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) x[s][h][i][j] = j > i ? NAN : (float)(s * 8 + h * 4 + i - j);
    assert_int_equal(maskpos_acc_add(a, 0, 2, MASKPOS_F32, x, NULL), MASKPOS_OK);
    assert_int_equal(maskpos_acc_count(a, 0), 2);
    float bad[2][4][4];
    memcpy(bad, x[0], sizeof bad);
    bad[1][3][1] = NAN;
    assert_int_equal(maskpos_acc_add(a, 0, 1, MASKPOS_F32, bad, NULL), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "scores[0, 1, 3, 1] = nan"));
    assert_int_equal(maskpos_acc_add(a, 1, 1, MASKPOS_F32, x, NULL), MASKPOS_ERR);
    assert_int_equal(maskpos_acc_count(a, 0), 2);
    MaskposResult *r = NULL;
    assert_int_equal(maskpos_acc_result(a, &r), MASKPOS_OK);
    const double *m = array3(r, "scores", 1, 4), *se = array3(r, "scores_se", 1, 4);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            if (j > i) {
                assert_true(isnan(m[i * 4 + j]) && isnan(se[i * 4 + j]));
                continue;
            }
            /* head means per sequence: s*8 + 2 + i - j; over s = 0, 1: mean 6 + i - j, sd 4*sqrt(2), se 4 */
            assert_true(fabs(m[i * 4 + j] - (6.0 + i - j)) < 1e-12);
            assert_true(fabs(se[i * 4 + j] - 4.0) < 1e-12);
        }
    maskpos_result_free(r);
    assert_int_equal(maskpos_acc_add(b, 0, 2, MASKPOS_F32, x, NULL), MASKPOS_OK);
    assert_int_equal(maskpos_acc_merge(a, b), MASKPOS_OK);
    assert_int_equal(maskpos_acc_count(a, -1), 4);
    assert_int_equal(maskpos_acc_result(a, &r), MASKPOS_OK);
    assert_true(fabs(array3(r, "scores", 1, 4)[3 * 4 + 1] - 8.0) < 1e-12);
    maskpos_result_free(r);
    maskpos_acc_free(a);
    maskpos_acc_free(b);
}

/* Captures into the variance statistic through the header alone: three sequences of made-up
 * attention outputs [3, 4, 2*3] and residual streams [3, 4, 5] give, per position, the variance
 * over sequences and dimensions computed here in double (m2 - m1^2 of the pooled values), per head
 * too; the refusals name their problem and add nothing; freq without the heads' geometry is refused at maskpos_acc_new. */
static void test_accumulator_captures(void **state) {
    (void)state;
    MaskposAccOptions o = {.n_layers = 2, .n_heads = 2, .seq = 4, .causal = 1, .stats = "variance"};
    MaskposAcc *a = NULL;
    assert_int_equal(maskpos_acc_new(&o, &a), MASKPOS_OK);
    float sc[3][2][4][4], at[3][4][6], hid[3][4][5];
    for (int s = 0; s < 3; s++) {
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 4; i++)
                for (int j = 0; j < 4; j++) sc[s][h][i][j] = j > i ? NAN : (float)(i - j);
        for (int i = 0; i < 4; i++) {
            for (int d = 0; d < 6; d++) at[s][i][d] = (float)sin(1.0 + s * 7.1 + i * 3.3 + d * 1.7) * (1.0f + i);
            for (int d = 0; d < 5; d++) hid[s][i][d] = (float)cos(0.5 + s * 5.3 + i * 2.9 + d * 0.7) * (2.0f + d);
        }
    }
    for (int l = 0; l < 2; l++) assert_int_equal(maskpos_acc_add(a, l, 3, MASKPOS_F32, sc, NULL), MASKPOS_OK);
    MaskposResult *r = NULL;
    assert_int_equal(maskpos_acc_result(a, &r), MASKPOS_ERR); /* the captures are missing */
    assert_non_null(strstr(maskpos_last_error(), "captures"));
    assert_int_equal(maskpos_acc_add_capture(a, 2, MASKPOS_AT_ATTN_MIX, 3, MASKPOS_F32, at, 6), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "layer 2 is out of range"));
    assert_int_equal(maskpos_acc_add_capture(a, 0, 1, 3, MASKPOS_F32, at, 6), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "read by no statistic"));
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_ATTN_MIX, 3, MASKPOS_F32, at, 5), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "not n_heads 2"));
    float bad[4][5];
    memcpy(bad, hid[0], sizeof bad);
    bad[2][3] = NAN;
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_LAYER_OUT, 1, MASKPOS_F32, bad, 5), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "capture[0, 2, 3] = nan"));
    for (int l = 0; l < 2; l++) {
        assert_int_equal(maskpos_acc_add_capture(a, l, MASKPOS_AT_ATTN_MIX, 3, MASKPOS_F32, at, 6), MASKPOS_OK);
        assert_int_equal(maskpos_acc_add_capture(a, l, MASKPOS_AT_LAYER_OUT, 3, MASKPOS_F32, hid, 5), MASKPOS_OK);
    }
    assert_int_equal(maskpos_acc_result(a, &r), MASKPOS_OK);
    int dt, nd;
    int64_t sh[MASKPOS_MAX_DIMS];
    const double *va = maskpos_result_array(r, "var_attn", &dt, &nd, sh);
    assert_true(va && dt == MASKPOS_F64 && nd == 2 && sh[0] == 2 && sh[1] == 4);
    const double *vr = maskpos_result_array(r, "var_resid", &dt, &nd, sh);
    assert_true(vr && dt == MASKPOS_F64 && nd == 2 && sh[0] == 2 && sh[1] == 4);
    const double *vh = maskpos_result_array(r, "var_attn_heads", &dt, &nd, sh);
    assert_true(vh && dt == MASKPOS_F64 && nd == 3 && sh[0] == 2 && sh[1] == 2 && sh[2] == 4);
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < 4; i++) {
            double m1 = 0, m2 = 0, r1 = 0, r2 = 0, h1[2] = {0, 0}, h2[2] = {0, 0};
            for (int s = 0; s < 3; s++)
                for (int d = 0; d < 6; d++) m1 += at[s][i][d], m2 += (double)at[s][i][d] * at[s][i][d],
                                            h1[d / 3] += at[s][i][d], h2[d / 3] += (double)at[s][i][d] * at[s][i][d];
            for (int s = 0; s < 3; s++)
                for (int d = 0; d < 5; d++) r1 += hid[s][i][d], r2 += (double)hid[s][i][d] * hid[s][i][d];
            m1 /= 18, m2 /= 18, r1 /= 15, r2 /= 15;
            assert_true(fabs(va[l * 4 + i] - (m2 - m1 * m1)) < 1e-12);
            assert_true(fabs(vr[l * 4 + i] - (r2 - r1 * r1)) < 1e-12);
            for (int h = 0; h < 2; h++)
                assert_true(fabs(vh[(l * 2 + h) * 4 + i] - (h2[h] / 9 - (h1[h] / 9) * (h1[h] / 9))) < 1e-12);
        }
    maskpos_result_free(r);
    maskpos_acc_free(a);
    MaskposAccOptions f = o;
    f.stats = "freq";
    assert_int_equal(maskpos_acc_new(&f, &a), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "'freq'"));
    MaskposAccOptions none = {.n_layers = 1, .n_heads = 2, .seq = 4, .causal = 1};
    assert_int_equal(maskpos_acc_new(&none, &a), MASKPOS_OK);
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_LAYER_OUT, 3, MASKPOS_F32, hid, 5), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "read by no statistic asked"));
    maskpos_acc_free(a);
}

/* resid_stride 2: the residual stream of sequences 0 and 2 of 3 (maskpos_acc_capture_rows names
 * rows 0 and 2 of the batch, then row 1 of the next batch of 2, sequence 4), var_resid the variance
 * of those alone (m2 - m1^2 here), the attention part of all; a missing LAYER_OUT batch refused at the
 * result; freq without head_dim and position without resid_width refused naming what to give. */
static void test_accumulator_resid_stride(void **state) {
    (void)state;
    MaskposAccOptions o = {.n_layers = 1, .n_heads = 1, .seq = 3, .causal = 1, .stats = "variance", .resid_stride = 2};
    MaskposAcc *a = NULL;
    assert_int_equal(maskpos_acc_new(&o, &a), MASKPOS_OK);
    float sc[5][3][3], at[5][3][2], hid[5][3][4];
    for (int s = 0; s < 5; s++)
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 3; j++) sc[s][i][j] = (float)(i * j) - s;
            for (int d = 0; d < 2; d++) at[s][i][d] = (float)sin(0.3 + s * 1.9 + i * 0.7 + d);
            for (int d = 0; d < 4; d++) hid[s][i][d] = (float)cos(0.2 + s * 2.3 + i * 1.1 + d * 0.4) * (1.0f + d);
        }
    int64_t rows[3];
    assert_int_equal(maskpos_acc_capture_rows(a, 0, MASKPOS_AT_LAYER_OUT, 3, rows), 2);
    assert_true(rows[0] == 0 && rows[1] == 2);
    assert_int_equal(maskpos_acc_capture_rows(a, 0, MASKPOS_AT_ATTN_MIX, 3, NULL), 3);
    float read[2][3][4];
    memcpy(read[0], hid[0], sizeof read[0]);
    memcpy(read[1], hid[2], sizeof read[1]);
    assert_int_equal(maskpos_acc_add(a, 0, 3, MASKPOS_F32, sc, NULL), MASKPOS_OK);
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_ATTN_MIX, 3, MASKPOS_F32, at, 2), MASKPOS_OK);
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_LAYER_OUT, 3, MASKPOS_F32, read, 4), MASKPOS_OK);
    assert_int_equal(maskpos_acc_add(a, 0, 2, MASKPOS_F32, sc[3], NULL), MASKPOS_OK);
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_ATTN_MIX, 2, MASKPOS_F32, at[3], 2), MASKPOS_OK);
    MaskposResult *r = NULL;
    assert_int_equal(maskpos_acc_result(a, &r), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "hidden (LAYER_OUT)"));
    assert_int_equal(maskpos_acc_capture_rows(a, 0, MASKPOS_AT_LAYER_OUT, 2, rows), 1);
    assert_int_equal(rows[0], 1);
    assert_int_equal(maskpos_acc_add_capture(a, 0, MASKPOS_AT_LAYER_OUT, 2, MASKPOS_F32, hid[4], 4), MASKPOS_OK);
    assert_int_equal(maskpos_acc_result(a, &r), MASKPOS_OK);
    int dt, nd;
    int64_t sh[MASKPOS_MAX_DIMS];
    const double *vr = maskpos_result_array(r, "var_resid", &dt, &nd, sh), *va = maskpos_result_array(r, "var_attn", &dt, &nd, sh);
    assert_true(vr && va);
    for (int i = 0; i < 3; i++) {
        double r1 = 0, r2 = 0, m1 = 0, m2 = 0;
        for (int s = 0; s < 5; s += 2)
            for (int d = 0; d < 4; d++) r1 += hid[s][i][d], r2 += (double)hid[s][i][d] * hid[s][i][d];
        for (int s = 0; s < 5; s++)
            for (int d = 0; d < 2; d++) m1 += at[s][i][d], m2 += (double)at[s][i][d] * at[s][i][d];
        r1 /= 12, r2 /= 12, m1 /= 10, m2 /= 10;
        assert_true(fabs(vr[i] - (r2 - r1 * r1)) < 1e-12);
        assert_true(fabs(va[i] - (m2 - m1 * m1)) < 1e-12);
    }
    maskpos_result_free(r);
    maskpos_acc_free(a);
    MaskposAccOptions f = {.n_layers = 1, .n_heads = 2, .seq = 4, .causal = 1, .stats = "freq"};
    assert_int_equal(maskpos_acc_new(&f, &a), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "give head_dim"));
    f.stats = "position";
    assert_int_equal(maskpos_acc_new(&f, &a), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "give resid_width"));
    f.stats = "freq", f.head_dim = 4, f.rot_dim = 3;
    assert_int_equal(maskpos_acc_new(&f, &a), MASKPOS_ERR);
    assert_non_null(strstr(maskpos_last_error(), "rot_dim 3"));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_library_round_trip), cmocka_unit_test(test_errors_are_the_commands),
                                       cmocka_unit_test(test_progress_stop), cmocka_unit_test(test_save_load_equals_cli),
                                       cmocka_unit_test(test_theory_closed_form),
                                       cmocka_unit_test(test_load_refuses_mixed_folder), cmocka_unit_test(test_accumulator),
                                       cmocka_unit_test(test_accumulator_captures),
                                       cmocka_unit_test(test_accumulator_resid_stride)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
