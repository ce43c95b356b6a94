/* test_probe_job.c — the probe as a library call (src/job/probe_job.h), without the command line:
 *   - mp_probe_run on in-memory ids + mp_probe_result_write give the .npy files of
 *     `maskpos probe --tokens` on the same ids byte for byte (with --per-head --probs --recency),
 *     and the same statistics in meta.json;
 *   - the mean map of N sequences equals the average of the N one-sequence runs' mean maps
 *     (within 1e-12 relative: the sums are added in another order), and the standard errors
 *     equal the sample standard deviation of those N maps / sqrt(N);
 *   - a borrowed open model gives the bits of a model opened by the run;
 *   - the progress callback is called with 0/N first and then after every sequence, and a
 *     nonzero return stops the run with "stopped by the caller" and an empty result;
 *   - bad input (an id outside the vocabulary, no tokens, N = 0) returns MP_ERR with a one-line
 *     message, never a crash.
 */
#include <math.h>

#include "test_model_util.h"

#include "core/json.h" /* mp_json_read */
#include "job/probe_job.h" /* mp_probe_run */

enum { N = 5, S = 24, V = 300 };

static int32_t *make_ids(uint32_t seed) {
    int32_t *ids = malloc(sizeof(int32_t) * N * S);
    uint32_t s = seed * 747796405u + 2891336453u;
    for (int i = 0; i < N * S; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (int32_t)((s >> 8) % (uint32_t)V);
    }
    return ids;
}

static void config_for(MpProbeConfig *c, const char *model, const int32_t *ids, int64_t n) {
    mp_probe_config_init(c);
    c->model_path = model;
    c->ids = ids;
    c->n = n;
    c->seq = S;
    c->threads = 2;
}

/* Runs c, which must succeed (what names the run in a failure). */
static void run_ok(MpProbeResult *res, const MpProbeConfig *c, const char *what) {
    MpErr e;
    if (mp_probe_run(res, c, &e) != MP_OK) fail_msg("%s: %s", what, e.msg);
}

/* Runs c, which must be refused with a one-line message holding want (NULL: any message) and
 * leave an incomplete result. */
static void run_refused(const MpProbeConfig *c, const char *want) {
    MpProbeResult res;
    MpErr e;
    assert_int_equal(mp_probe_run(&res, c, &e), MP_ERR);
    if (want && !strstr(e.msg, want)) fail_msg("message: %s", e.msg);
    assert_null(strchr(e.msg, '\n'));
    assert_int_equal(res.complete, 0);
}

static void test_library_equals_cli(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], npy[256], out[8192], a[512], b[512];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(npy, sizeof npy, "%s/ids.npy", d);
    model_make(model, "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 21");
    int32_t *ids = make_ids(3);
    int64_t shp[2] = {N, S};
    MpErr e;
    if (mp_npy_write(npy, MP_DT_I32, ids, 2, shp, &e) != MP_OK) fail_msg("%s", e.msg);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/cli --layers 1,3 --per-head --probs --recency --quiet",
                         model, npy, d);
    if (rc != 0) fail_msg("probe failed: %s", out);
    MpProbeConfig c;
    config_for(&c, model, ids, N);
    c.layers = "1,3";
    c.per_head = c.probs = c.recency = 1;
    MpProbeResult res;
    if (mp_probe_run(&res, &c, &e) != MP_OK) fail_msg("mp_probe_run: %s", e.msg);
    assert_int_equal(res.complete, 1);
    assert_int_equal(res.L, 2);
    assert_int_equal(res.layers[1], 2);
    snprintf(a, sizeof a, "%s/lib", d);
    if (mp_probe_result_write(&res, a, NULL, &e) != MP_OK) fail_msg("mp_probe_result_write: %s", e.msg);
    const char *files[] = {"scores.npy", "scores_diagnorm.npy", "scores_se.npy", "scores_heads.npy", "probs.npy", "probs_heads.npy"};
    for (int i = 0; i < 6; i++) {
        snprintf(a, sizeof a, "%s/cli/%s", d, files[i]);
        snprintf(b, sizeof b, "%s/lib/%s", d, files[i]);
        if (!files_equal(a, b)) fail_msg("%s of the library call differs from the CLI's", files[i]);
    }
    /* the statistics in meta.json: equal, and the library's string holds them too */
    snprintf(a, sizeof a, "%s/cli/meta.json", d);
    snprintf(b, sizeof b, "%s/lib/meta.json", d);
    json_t *ja = mp_json_read(a, &e), *jb = mp_json_read(b, &e);
    assert_non_null(ja);
    assert_non_null(jb);
    const char *keys[] = {"stats", "residue_block_z", "residue_block_z_regions", "attention_sink", "recency_probability", "length", "files"};
    for (int k = 0; k < 7; k++)
        if (!json_equal(json_object_get(ja, keys[k]), json_object_get(jb, keys[k]))) fail_msg("meta.json %s differs", keys[k]);
    char *dump = mp_probe_result_meta_dump(&res);
    assert_non_null(dump);
    assert_non_null(strstr(dump, "\"residue_block_z\""));
    free(dump);
    json_decref(ja);
    json_decref(jb);
    mp_probe_result_free(&res);
    assert_null(res.mean); /* free leaves a zeroed struct */
    mp_probe_result_free(&res);
    free(ids);
}

/* The mean of N sequences against the N one-sequence runs; the standard error against their spread. */
static void test_mean_is_mean_of_sequences(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256];
    snprintf(model, sizeof model, "%s/m", d);
    MpModel m;
    model_make_open(&m, model, "--arch qwen3 --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 --vocab 300 --seed 8");
    int32_t *ids = make_ids(9);
    MpProbeConfig c;
    config_for(&c, NULL, ids, N);
    c.model = &m; /* borrowed */
    MpProbeResult all, one[N];
    run_ok(&all, &c, "all sequences");
    for (int k = 0; k < N; k++) {
        config_for(&c, NULL, ids + (size_t)k * S, 1);
        c.model = &m;
        run_ok(&one[k], &c, "one sequence");
    }
    const size_t cnt = (size_t)all.L * S * S;
    double worst = 0, worst_se = 0;
    int finite = 0;
    for (size_t i = 0; i < cnt; i++) {
        double s1 = 0, s2 = 0;
        for (int k = 0; k < N; k++) s1 += one[k].mean[i];
        const double mu = s1 / N;
        if (isnan(all.mean[i])) {
            assert_true(isnan(mu)); /* masked in every run */
            continue;
        }
        for (int k = 0; k < N; k++) s2 += (one[k].mean[i] - mu) * (one[k].mean[i] - mu);
        const double se = sqrt(s2 / (N - 1) / N);
        const double err = fabs(all.mean[i] - mu) / (1e-300 + fabs(mu) + 1e-3);
        const double err_se = fabs(all.se[i] - se) / (se + 1e-9);
        worst = err > worst ? err : worst;
        worst_se = err_se > worst_se ? err_se : worst_se;
        finite++;
    }
    print_message("mean of %d sequences vs average of one-sequence runs: max rel err %.3g; se: %.3g (%d entries)\n", N,
                  worst, worst_se, finite);
    assert_true(finite == all.L * S * (S + 1) / 2); /* causal: the lower triangle */
    assert_true(worst < 1e-12);
    assert_true(worst_se < 1e-6); /* a sum of squares against a two-pass variance */
    /* a model opened by the run gives the same bits as the borrowed one */
    MpProbeResult again;
    config_for(&c, model, ids, N);
    run_ok(&again, &c, "the model opened by the run");
    assert_memory_equal(again.mean, all.mean, cnt * sizeof(double));
    mp_probe_result_free(&again);
    for (int k = 0; k < N; k++) mp_probe_result_free(&one[k]);
    mp_probe_result_free(&all);
    mp_model_free(&m);
    free(ids);
}

typedef struct Calls {
    int64_t done[16], total[16];
    int n, stop_at;
} Calls;

static int count_calls(void *ctx, int64_t done, int64_t total) {
    Calls *k = ctx;
    if (k->n < 16) k->done[k->n] = done, k->total[k->n] = total;
    k->n++;
    return k->stop_at >= 0 && done >= k->stop_at;
}

static void test_progress_and_stop(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 1 --heads 2 --vocab 300 --seed 2");
    int32_t *ids = make_ids(4);
    MpProbeConfig c;
    config_for(&c, model, ids, N);
    Calls k = {.stop_at = -1};
    c.progress = count_calls;
    c.progress_ctx = &k;
    MpProbeResult res;
    MpErr e;
    if (mp_probe_run(&res, &c, &e) != MP_OK) fail_msg("%s", e.msg);
    assert_int_equal(k.n, N + 1);
    for (int i = 0; i <= N; i++) {
        assert_int_equal(k.done[i], i);
        assert_int_equal(k.total[i], N);
    }
    mp_probe_result_free(&res);
    Calls stop = {.stop_at = 2};
    c.progress_ctx = &stop;
    assert_int_equal(mp_probe_run(&res, &c, &e), MP_ERR);
    assert_string_equal(e.msg, MP_JOB_STOPPED_MSG);
    assert_int_equal(stop.n, 3); /* 0, 1, 2: stopped after the second sequence */
    assert_int_equal(res.complete, 0);
    assert_null(res.mean);
    free(ids);
}

static void test_bad_input(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 1 --heads 2 --vocab 300 --seed 2");
    int32_t *ids = make_ids(4);
    ids[S + 3] = V; /* sequence 1 */
    MpProbeConfig c;
    config_for(&c, model, ids, N);
    run_refused(&c, "id 300 (sequence 1) outside the model's vocabulary");
    config_for(&c, model, ids, 0);
    run_refused(&c, NULL);
    config_for(&c, model, NULL, N);
    run_refused(&c, "required");
    config_for(&c, model, ids, N);
    c.layers = "7";
    run_refused(&c, "layer 7 does not exist");
    c.model_path = "/nonexistent/model";
    c.layers = NULL;
    run_refused(&c, NULL);
    free(ids);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_library_equals_cli),
        cmocka_unit_test(test_mean_is_mean_of_sequences),
        cmocka_unit_test(test_progress_and_stop),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
