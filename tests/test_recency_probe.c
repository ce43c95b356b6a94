/* test_recency_probe.c — `probe --probs` and `probe --recency` (model/probe_acc.c probability sums,
 * model/probe_recency.c, job/probe_probs.c, job/probe_len.c) against independent references:
 *   - probabilities: per-head mean probabilities, first-token mass and entropy against
 *     tests/ref/probe_ref.py (torch, float64); rows of probs.npy sum to 1, masked entries are 0;
 *   - recency probability: per sequence, the sum over sequences of a brute-force triple count
 *     (three loops, here) on each sequence's own captured per-head scores (a probe run of that
 *     sequence alone) equals the run's count exactly; of the mean maps, against the brute-force
 *     count on the torch reference's mean maps;
 *   - the prefix identity: a run at S' equals the S'×S' corner of a run at S bit for bit (scores,
 *     per-head scores, probabilities), and the length statistics at S' of the S run are the S' run's;
 *   - memory: peak RSS does not grow with N (what output_attentions would hold grows as N·H·S²·L);
 *   - threads 1 vs 2 and a SIGKILL + --resume give identical bytes.
 */
#include <signal.h>

#include "testutil.h"
#include "test_model_util.h"

#include <jansson.h>

/* Reads key path ("a" or "a.b") of DIR/meta.json as doubles [rows, cols] (a 1-D array: one row). */
static double *meta_array(const char *dir, const char *key, const char *sub, int *rows, int *cols) {
    char path[600];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_error_t je;
    json_t *m = json_load_file(path, 0, &je);
    if (!m) fail_msg("%s: %s", path, je.text);
    json_t *v = json_object_get(m, key);
    if (sub) v = json_object_get(v, sub);
    if (!json_is_array(v)) fail_msg("%s: no array %s%s%s", path, key, sub ? "." : "", sub ? sub : "");
    const int r = json_is_array(json_array_get(v, 0)) ? (int)json_array_size(v) : 1;
    const int c = r == 1 && !json_is_array(json_array_get(v, 0)) ? (int)json_array_size(v) : (int)json_array_size(json_array_get(v, 0));
    double *out = calloc((size_t)r * c, sizeof *out);
    for (int i = 0; i < r; i++)
        for (int j = 0; j < c; j++) {
            json_t *x = json_is_array(json_array_get(v, 0)) ? json_array_get(json_array_get(v, (size_t)i), (size_t)j)
                                                             : json_array_get(v, (size_t)j);
            out[(size_t)i * c + j] = json_is_number(x) ? json_number_value(x) : NAN;
        }
    json_decref(m);
    *rows = r;
    *cols = c;
    return out;
}

/* Triples j < k < i (from `first`) with map[i,k] > map[i,j], by three loops. map [S,S]. */
static uint64_t brute_triples(const double *map, int S, int first) {
    uint64_t c = 0;
    for (int i = first; i < S; i++)
        for (int j = first; j < i; j++)
            for (int k = j + 1; k < i; k++) c += map[(size_t)i * S + k] > map[(size_t)i * S + j];
    return c;
}

static int have_torch(void) {
    char out[4096];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import torch, numpy'") == 0) return 1;
    print_message("python3-torch is not installed: %s\n", out);
    return 0;
}

enum { PN = 3, PS = 24, PL = 2, PH = 4 };

static void test_probs_against_torch(void **state) {
    (void)state;
    if (!have_torch()) skip();
    const char *top = mp_test_tmpdir();
    char model[256], ids[256], out[16384], path[600], d[300];
    snprintf(model, sizeof model, "%s/m", top);
    snprintf(ids, sizeof ids, "%s/ids.npy", top);
    snprintf(d, sizeof d, "%s/o", top); /* probe writes only into a new folder */
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 3");
    ids_write(ids, PN, PS, 300, -1, 21);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers all --per-head --probs --recency --quiet", model, ids, d);
    if (rc != 0) fail_msg("probe failed: %s", out);
    rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/probe_ref.py %s %s %s --layers 1,2", MP_SOURCE_DIR, model, ids, d);
    if (rc != 0) fail_msg("probe_ref.py failed: %s", out);
    size_t n1, n2;
    snprintf(path, sizeof path, "%s/probs_heads.npy", d);
    double *ph = npy_load_f64(path, &n1, NULL);
    snprintf(path, sizeof path, "%s/ref_probs_heads.npy", d);
    double *rh = npy_load_f64(path, &n2, NULL);
    assert_int_equal(n1, (size_t)PL * PH * PS * PS);
    assert_int_equal(n1, n2);
    double err = 0;
    for (size_t k = 0; k < n1; k++) err = fmax(err, fabs(ph[k] - rh[k]));
    print_message("probabilities per head: max |maskpos - torch| = %.3g\n", err);
    assert_true(err < 1e-6); /* f32 softmax of scores within 1e-5 relative of float64 */
    snprintf(path, sizeof path, "%s/probs.npy", d);
    double *p = npy_load_f64(path, &n1, NULL);
    for (int l = 0; l < PL; l++)
        for (int i = 0; i < PS; i++) {
            double s = 0, hm = 0;
            for (int j = 0; j < PS; j++) {
                const size_t k = ((size_t)l * PS + i) * PS + j;
                s += p[k];
                if (j > i) assert_true(p[k] == 0.0);
                hm = 0;
                for (int h = 0; h < PH; h++) hm += rh[(((size_t)l * PH + h) * PS + i) * PS + j] / PH;
                assert_true(fabs(p[k] - hm) < 1e-6);
            }
            assert_true(fabs(s - 1) < 1e-6); /* a sum of f32 probabilities: 1 to f32 rounding */
        }
    /* sink and entropy per layer and head */
    const char *keys[2][2] = {{"attention_sink", "ref_sink.npy"}, {"attention_entropy", "ref_entropy.npy"}};
    for (int q = 0; q < 2; q++) {
        int r, c;
        double *got = meta_array(d, keys[q][0], NULL, &r, &c);
        assert_int_equal(r, PL);
        assert_int_equal(c, PH);
        snprintf(path, sizeof path, "%s/%s", d, keys[q][1]);
        double *want = npy_load_f64(path, &n2, NULL);
        for (int k = 0; k < PL * PH; k++)
            if (!(fabs(got[k] - want[k]) < 1e-6)) fail_msg("%s [%d]: maskpos %.9g torch %.9g", keys[q][0], k, got[k], want[k]);
        free(got);
        free(want);
    }
    /* RP of each head's mean map against the brute-force count on torch's mean maps (float64;
     * an f32 near-tie may flip one triple: 1 allowed per map) */
    int r, c;
    double *rpm = meta_array(d, "recency_probability_mean_map_heads", NULL, &r, &c);
    snprintf(path, sizeof path, "%s/ref_scores_heads.npy", d);
    double *rs = npy_load_f64(path, &n2, NULL);
    const double T = PS * (PS - 1) * (PS - 2) / 6.0;
    for (int k = 0; k < PL * PH; k++) {
        const uint64_t want = brute_triples(rs + (size_t)k * PS * PS, PS, 0);
        if (!(fabs(rpm[k] * T - (double)want) <= 1.0)) fail_msg("mean-map RP [%d]: %.1f triples, torch %llu", k, rpm[k] * T, (unsigned long long)want);
    }
    free(rpm);
    free(rs);
    free(ph);
    free(rh);
    free(p);
}

/* The per-sequence RP of a run over N sequences = Σ over sequences of the brute-force count on
 * that sequence's own scores (probe of it alone: its per-head "mean" map is its scores). */
static void test_rp_per_sequence_brute_force(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384], path[600], one[600], dir[600];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch qwen2 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 5");
    const int N = 4, S = 40;
    ids_write(ids, N, S, 300, -1, 33);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/all --layers all --recency --quiet", model, ids, d);
    if (rc != 0) fail_msg("probe failed: %s", out);
    snprintf(dir, sizeof dir, "%s/all", d);
    int r, c;
    double *rph = meta_array(dir, "recency_probability_heads", NULL, &r, &c);
    double *rp = meta_array(dir, "recency_probability", NULL, &r, &c);
    assert_int_equal(c, PL);
    size_t n;
    int64_t shp[4];
    double *all = npy_load_f64(ids, &n, shp);
    uint64_t want[PL * PH] = {0};
    for (int s = 0; s < N; s++) {
        int32_t row[64];
        for (int t = 0; t < S; t++) row[t] = (int32_t)all[(size_t)s * S + t];
        int64_t sh[2] = {1, S};
        MpErr e;
        snprintf(one, sizeof one, "%s/one%d.npy", d, s);
        if (mp_npy_write(one, MP_DT_I32, row, 2, sh, &e) != MP_OK) fail_msg("%s", e.msg);
        rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/s%d --layers all --per-head --quiet", model, one, d, s);
        if (rc != 0) fail_msg("probe of sequence %d failed: %s", s, out);
        snprintf(path, sizeof path, "%s/s%d/scores_heads.npy", d, s);
        double *sc = npy_load_f64(path, &n, NULL);
        for (int k = 0; k < PL * PH; k++) want[k] += brute_triples(sc + (size_t)k * S * S, S, 0);
        free(sc);
    }
    const double T = (double)S * (S - 1) * (S - 2) / 6.0;
    for (int l = 0; l < PL; l++) {
        uint64_t tl = 0;
        for (int h = 0; h < PH; h++) {
            const int k = l * PH + h;
            tl += want[k];
            if (!(fabs(rph[k] * N * T - (double)want[k]) < 1e-6)) /* integer counts: exact up to the division */
                fail_msg("layer %d head %d: %.3f triples, brute force %llu", l + 1, h + 1, rph[k] * N * T, (unsigned long long)want[k]);
        }
        print_message("layer %d: RP %.5f = %llu / %.0f recent triples (brute force)\n", l + 1, rp[l], (unsigned long long)tl, N * PH * T);
        assert_true(fabs(rp[l] * N * PH * T - (double)tl) < 1e-6);
    }
    free(all);
    free(rph);
    free(rp);
}

/* A causal model's scores for the first S' positions are those of the S'-token prefix. */
static void test_prefix_identity(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384], a[600], b[600];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --vocab 300 --seed 7");
    const int N = 5, S = 64, SP = 32;
    ids_write(ids, N, S, 300, -1, 44);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/long --layers all --per-head --probs --recency --quiet", model, ids, d);
    if (rc != 0) fail_msg("probe at S failed: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --seq %d --out %s/short --layers all --per-head --probs --recency --quiet", model, ids, SP, d);
    if (rc != 0) fail_msg("probe at S' failed: %s", out);
    const char *files[] = {"scores.npy", "scores_heads.npy", "probs.npy", "probs_heads.npy"};
    for (int f = 0; f < 4; f++) {
        size_t nl, ns;
        int64_t shl[4], shs[4];
        snprintf(a, sizeof a, "%s/long/%s", d, files[f]);
        snprintf(b, sizeof b, "%s/short/%s", d, files[f]);
        double *L = npy_load_f64(a, &nl, shl), *Sh = npy_load_f64(b, &ns, shs);
        const size_t maps = ns / ((size_t)SP * SP);
        for (size_t m = 0; m < maps; m++)
            for (int i = 0; i < SP; i++)
                if (memcmp(L + (m * S + i) * S, Sh + (m * SP + i) * SP, (size_t)SP * sizeof(double)))
                    fail_msg("%s: map %zu row %d of the S'=%d run differs from the corner of the S=%d run", files[f], m, i, SP, S);
        free(L);
        free(Sh);
    }
    /* the S run's statistics at length S' are the S' run's own (RP and block z from identical sums) */
    snprintf(a, sizeof a, "%s/long", d);
    snprintf(b, sizeof b, "%s/short", d);
    int r, c, r2, c2, rl, cl;
    double *lens = meta_array(a, "length", "lengths", &rl, &cl);
    int k = -1;
    for (int q = 0; q < cl; q++)
        if (lens[q] == SP) k = q;
    assert_true(k >= 0);
    const char *stats[][2] = {{"recency_probability", "recency_probability"}, {"residue_block_z", NULL}, {"nri", NULL}};
    for (int q = 0; q < 3; q++) {
        double *lv = meta_array(a, "length", stats[q][0], &r, &c);
        double *sv = meta_array(b, "length", stats[q][0], &r2, &c2);
        for (int l = 0; l < r; l++) {
            print_message("%s layer %d: S run at S'=%d %.6f, S' run %.6f\n", stats[q][0], l + 1, SP, lv[l * c + k], sv[l * c2 + c2 - 1]);
            assert_true(lv[l * c + k] == sv[l * c2 + c2 - 1]);
        }
        free(lv);
        free(sv);
    }
    free(lens);
}

/* Peak RSS stays flat in N; output_attentions would hold N·H·S²·L floats. */
static void test_probs_memory_flat_in_n(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384], dir[600];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --vocab 300 --seed 8");
    const int S = 256, N1 = 8, N2 = MP_TEST_SANITIZED ? 40 : 160;
    ids_write(ids, N2, S, 300, -1, 55);
    double rss[2];
    /* Under AddressSanitizer freed blocks wait in a quarantine (256 MB by default) before reuse,
     * so the RSS of a sanitized run grows with every allocation ever freed, whatever the program
     * holds. Measure the program's memory: no quarantine for the children run here. */
    if (MP_TEST_SANITIZED) setenv("ASAN_OPTIONS", "quarantine_size_mb=0", 1);
    for (int t = 0; t < 2; t++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --n %d --out %s/n%d --layers all --probs --recency --per-head --quiet --threads 1",
                             model, ids, t ? N2 : N1, d, t);
        if (rc != 0) fail_msg("probe failed: %s", out);
        snprintf(dir, sizeof dir, "%s/n%d/meta.json", d, t);
        json_error_t je;
        json_t *m = json_load_file(dir, 0, &je);
        assert_non_null(m);
        rss[t] = json_number_value(json_object_get(m, "peak_rss_bytes")) / 1048576.0;
        json_decref(m);
    }
    const double oa = (double)N2 * PH * S * S * 4 * PL / 1048576.0;
    if (MP_TEST_SANITIZED) unsetenv("ASAN_OPTIONS");
    print_message("peak RSS: N=%d %.1f MiB, N=%d %.1f MiB; output_attentions of N=%d would hold %.0f MiB\n", N1, rss[0], N2, rss[1], N2, oa);
    assert_true(rss[0] > 0 && rss[1] - rss[0] < 3.0);
}

static void test_threads_and_resume(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384], a[600], b[600];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch qwen2 --layers 2 --dim 128 --heads 4 --kv-heads 2 --ffn 256 --vocab 300 --seed 6");
    ids_write(ids, 6, 160, 300, -1, 9);
    const char *flags = "--layers all --per-head --probs --recency --quiet";
    for (int t = 1; t <= 2; t++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/t%d --threads %d %s", model, ids, d, t, t, flags);
        if (rc != 0) fail_msg("probe --threads %d failed: %s", t, out);
    }
    int rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=3 %s probe %s --tokens %s --out %s/res --checkpoint-every 2 %s",
                           MP_TEST_BIN, model, ids, d, flags);
    assert_int_equal(rc, 128 + SIGKILL);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/res --checkpoint-every 2 --resume --layers all --per-head --probs "
                     "--recency", model, ids, d); /* not --quiet: the resume line is a set-up line */
    if (rc != 0 || !strstr(out, "resume: 2 of 6")) fail_msg("resume failed: %s", out);
    const char *files[] = {"probs.npy", "probs_heads.npy", "scores.npy"};
    for (int f = 0; f < 3; f++)
        for (int w = 0; w < 2; w++) {
            snprintf(a, sizeof a, "%s/t1/%s", d, files[f]);
            snprintf(b, sizeof b, "%s/%s/%s", d, w ? "res" : "t2", files[f]);
            if (!files_equal(a, b)) fail_msg("%s differs (%s)", files[f], w ? "resumed" : "2 threads");
        }
    const char *keys[][2] = {{"recency_probability_heads", NULL}, {"attention_entropy", NULL}, {"length", "residue_block_z"}};
    for (int q = 0; q < 3; q++) {
        int r, c, r2, c2;
        snprintf(a, sizeof a, "%s/t1", d);
        double *x = meta_array(a, keys[q][0], keys[q][1], &r, &c);
        for (int w = 0; w < 2; w++) {
            snprintf(b, sizeof b, "%s/%s", d, w ? "res" : "t2");
            double *y = meta_array(b, keys[q][0], keys[q][1], &r2, &c2);
            assert_int_equal(r * c, r2 * c2);
            assert_memory_equal(x, y, (size_t)r * c * sizeof(double));
            free(y);
        }
        free(x);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probs_against_torch),     cmocka_unit_test(test_rp_per_sequence_brute_force),
        cmocka_unit_test(test_prefix_identity),         cmocka_unit_test(test_probs_memory_flat_in_n),
        cmocka_unit_test(test_threads_and_resume),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
