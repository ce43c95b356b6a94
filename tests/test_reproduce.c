/* test_reproduce.c — `maskpos reproduce` end to end at a small batch: every stage's outputs and
 * report.md appear, a re-run skips up-to-date stages and gives the same report numbers, --force
 * and changed settings recompute, --only selects, bad flags exit 2; the progress bar draws when
 * forced on. */
#include "testutil.h"

#include "core/util.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_full_quick_run_and_rerun(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    static char out[1 << 16];
    int rc = mp_test_run(out, sizeof out, "reproduce --quick --batch %d --out %s", MP_TEST_SANITIZED ? 150 : 600, d);
    if (rc != 0) fail_msg("reproduce exited %d: %s", rc, out);
    const char *files[] = {"fig1/layer2_scores.npy", "fig1/meta.json", "fig2/alpha_0/scores.npy",
                           "fig2/alpha_0.8/meta.json", "fig2ln/layernorm_d/scores_diagnorm.npy",
                           "fig4/causal_alpha_0.5/probs.npy", "fig4/bidirectional_alpha_0/meta.json", "report.md"};
    char path[512];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", d, files[i]);
        if (!mp_file_exists(path)) fail_msg("missing %s", path);
    }
    snprintf(path, sizeof path, "%s/report.md", d);
    char *rep = slurp(path);
    assert_non_null(rep);
    assert_non_null(strstr(rep, "| Fig. 1 S21 (theory, α=0) | 0.154 | 0.15352 (→ 0.154) | ✅ agrees |"));
    assert_non_null(strstr(rep, "Fig. 4 RoPE bidirectional"));
    char *first = strdup(strstr(rep, "| quantity |"));
    /* numbers of the table, not the header's wall time, must be identical on the re-run */
    char *tail = strstr(first, "## Per-run statistics");
    assert_non_null(tail);
    *tail = '\0';
    rc = mp_test_run(out, sizeof out, "reproduce --quick --batch %d --out %s", MP_TEST_SANITIZED ? 150 : 600, d);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "up to date, skipped"));
    rep = slurp(path);
    char *second = strstr(rep, "| quantity |");
    assert_int_equal(strncmp(first, second, strlen(first)), 0);
    free(first);
    /* --force recomputes; a different batch is a different setting */
    rc = mp_test_run(out, sizeof out, "reproduce --quick --batch %d --only fig2 --force --out %s", MP_TEST_SANITIZED ? 150 : 600, d);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "skipped"));
    rc = mp_test_run(out, sizeof out, "reproduce --quick --batch %d --only fig4 --out %s", MP_TEST_SANITIZED ? 160 : 700, d);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "skipped"));
}

static void test_only_and_bad_flags(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], path[512];
    assert_int_equal(mp_test_run(out, sizeof out, "reproduce --quick --only fig1 --out %s", d), 0);
    snprintf(path, sizeof path, "%s/fig2", d);
    assert_false(mp_file_exists(path));
    const char *bad[] = {"--only fig9", "--only fig5", "--batch 0", "--bogus", "--threads x", "stray"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = mp_test_run(out, sizeof out, "reproduce --quick --out %s %s", d, bad[i]);
        if (rc != 2) fail_msg("'reproduce %s' exited %d: %s", bad[i], rc, out);
        assert_non_null(strstr(out, "maskpos reproduce: error:"));
    }
    /* an output path that cannot be created */
    int rc = mp_test_run(out, sizeof out, "reproduce --quick --only fig1 --out /proc/nope");
    assert_int_equal(rc, 2);
}

static void test_progress_bar(void **state) {
    (void)state;
    char out[1 << 15];
    /* not a terminal: no bar */
    int rc = mp_test_run(out, sizeof out, "simulate --batch 300 --seq 20 --threads 1");
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "ETA"));
    /* forced on: drawn from the start, finished with the full count */
    setenv("MASKPOS_PROGRESS", "1", 1);
    rc = mp_test_run(out, sizeof out, "simulate --batch 300 --seq 20 --threads 1");
    unsetenv("MASKPOS_PROGRESS");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "ETA"));
    assert_non_null(strstr(out, "seq/s"));
    assert_non_null(strstr(out, "300/300"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_quick_run_and_rerun),
        cmocka_unit_test(test_only_and_bad_flags),
        cmocka_unit_test(test_progress_bar),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
