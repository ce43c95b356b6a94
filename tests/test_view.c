/* test_view.c — `maskpos view` (src/viz/view.c, src/cli/cmd_view.c, src/viz/view.js).
 *
 * In a real browser (Debian chromium, headless, through playwright-core from tests/browser):
 * tests/browser/check_view.js opens the page, switches layer, head and view, hovers cells and
 * compares the value shown with the .npy entry it reads itself, within the storage precision of
 * docs/view.md (float16: 2^-11 of the residue; 8-bit: half a step ≤ 1/200 of the range), and the
 * colour bars' ends with the anchors of viz/cmap.c; and the check fails when it compares with the
 * neighbouring cell. Runs: simulate causal vs bidirectional (with probabilities), probe --per-head
 * --data on the embedded RoPE model (heads, text), and a synthetic run whose per-head maps must be
 * stored in 8 bits and area-averaged to fit a small budget, and again with --max-side (3 x 3 blocks); and the viewer folded under a figure
 * of report.html (every viewer of the page must start).
 * In C: the float16 exponent rule; bad input (one line, exit 2, no page left behind); the size
 * budget; theory's layer2_scores.npy.
 */
#include <sys/stat.h>

#include "core/npy.h"  /* mp_npy_write: synthetic runs */
#include "core/util.h" /* mp_file_exists */
#include "testutil.h"
#include "viz/view.h" /* mp_view_f16_exponent */

static void need_browser(void) {
    char mod[512];
    snprintf(mod, sizeof mod, "%s/tests/browser/node_modules/playwright-core", MP_SOURCE_DIR);
    if (!mp_file_exists(mod) || !mp_file_exists("/usr/bin/chromium"))
        fail_msg("browser check needs chromium and tests/browser/node_modules: run scripts/setup.sh --test");
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

/* Runs check_view.js on page for dir (and dir2); asserts it passes, and fails with --wrong. */
static void browser_check(const char *page, const char *dir, const char *dir2, const char *extra) {
    char out[16384];
    int rc = mp_test_shell(out, sizeof out, "cd %s/tests/browser && node check_view.js %s %s %s %s", MP_SOURCE_DIR, page,
                           dir, dir2 ? dir2 : "", extra ? extra : "");
    print_message("%s", out);
    if (rc != 0) fail_msg("browser check of %s failed", page);
    rc = mp_test_shell(out, sizeof out, "cd %s/tests/browser && node check_view.js %s %s %s %s --wrong", MP_SOURCE_DIR,
                       page, dir, dir2 ? dir2 : "", extra ? extra : "");
    if (rc == 0) fail_msg("check_view.js --wrong passed: the value check cannot fail\n%s", out);
}

static void test_f16_exponent(void **state) {
    (void)state;
    double v[4] = {NAN, -32768, 3, 0};
    assert_int_equal(mp_view_f16_exponent(v, 4), 0);
    v[1] = -32769;
    assert_int_equal(mp_view_f16_exponent(v, 4), 1);
    v[1] = 1;
    assert_int_equal(mp_view_f16_exponent(v, 2), -15); /* 1 · 2^15 = 32768 */
    v[1] = 0;
    assert_int_equal(mp_view_f16_exponent(v, 2), 0);
    v[1] = 1e-30; /* tiny maps keep their relative precision */
    int k = mp_view_f16_exponent(v, 2);
    assert_true(ldexp(1e-30, -k) <= 32768 && ldexp(1e-30, -k) > 16384);
}

/* simulate causal vs bidirectional: raw, residue, standard error, probabilities, difference. */
static void test_simulate_pair_in_browser(void **state) {
    (void)state;
    need_browser();
    const char *d = mp_test_tmpdir();
    char out[8192], page[512];
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --batch 300 --quiet --out %s/causal", d), 0);
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --batch 300 --bidirectional --quiet --out %s/bidir", d), 0);
    snprintf(page, sizeof page, "%s/view.html", d);
    assert_int_equal(mp_test_run(out, sizeof out, "view %s/causal %s/bidir -o %s", d, d, page), 0);
    assert_non_null(strstr(out, "causal; scores float16; se float16; probs float16"));
    char c1[512], c2[512];
    snprintf(c1, sizeof c1, "%s/causal", d);
    snprintf(c2, sizeof c2, "%s/bidir", d);
    browser_check(page, c1, c2, NULL);
}

/* probe --per-head --data on the embedded RoPE model: heads, and the text of sequence 1. */
static void test_probe_heads_and_text_in_browser(void **state) {
    (void)state;
    need_browser();
    const char *d = mp_test_tmpdir();
    char out[8192], page[512], run[512];
    snprintf(run, sizeof run, "%s/probe", d);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s/models/rope --data %s/models/kjv.txt --pack --n 12 --seq 64 --per-head --quiet --out %s",
                                 MP_SOURCE_DIR, MP_SOURCE_DIR, run), 0);
    snprintf(page, sizeof page, "%s/view.html", d);
    assert_int_equal(mp_test_run(out, sizeof out, "view %s -o %s", run, page), 0);
    assert_non_null(strstr(out, "heads float16 (4 heads, with standard errors)"));
    assert_null(strstr(out, "text not shown"));
    char extra[512];
    snprintf(extra, sizeof extra, "--bytes-text %s/models/kjv.txt", MP_SOURCE_DIR);
    browser_check(page, run, NULL, extra);
}

/* probe --stats variance,position,freq on the embedded RoPE model: the statistics section (the
 * position table's numbers against pos_probe.npy, the variance chart, the frequency maps). */
static void test_statistics_in_browser(void **state) {
    (void)state;
    need_browser();
    const char *d = mp_test_tmpdir();
    char out[8192], page[512], run[512];
    snprintf(run, sizeof run, "%s/stats", d);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s/models/rope --data %s/models/kjv.txt --pack --n 16 --seq 64 --layers all "
                                 "--stats variance,position,freq --quiet --out %s", MP_SOURCE_DIR, MP_SOURCE_DIR, run), 0);
    snprintf(page, sizeof page, "%s/view.html", d);
    assert_int_equal(mp_test_run(out, sizeof out, "view %s -o %s", run, page), 0);
    browser_check(page, run, NULL, NULL);
}

/* Issue 31: hostile strings in the folder name (the label), meta.json, --title and the token
 * text: none runs as script in Chromium, each is shown as text (tests/browser/check_hostile.js).
 * Issue 40: with "<!--<script>" in them the page never left "loading the maps…" (no code ran: the
 * JSON's '<' was not escaped), as with main at adce9dc. */
static void test_hostile_strings_in_browser(void **state) {
    (void)state;
    need_browser();
    const char *d = mp_test_tmpdir();
    char out[8192], page[512], run[512], data[512], cmd[2048];
    static const char text[] = "</script><script>window.__pwned=1</script><img src=x onerror=window.__pwned=2> "
                               "\"};window.__pwned=6;// <!-- <svg onload=alert(7)> ";
    snprintf(data, sizeof data, "%s/<svg onload=alert(4)>.txt", d);
    FILE *f = fopen(data, "w");
    assert_non_null(f);
    for (int k = 0; k < 20; k++) fputs(text, f);
    fclose(f);
    snprintf(run, sizeof run, "%s/<!--<script><img src=x onerror=alert(1)>", d); /* (issue 40: "<!--<script>" left the
                                                                                  * page "loading the maps…") */
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s/models/rope --data '%s' --pack --n 2 --seq 64 --quiet --out '%s'",
                                 MP_SOURCE_DIR, data, run), 0);
    snprintf(cmd, sizeof cmd, "sed -i 's|\"model\": \"[^\"]*\"|\"model\": \"<!--<script><\\\\/script><script>window.__pwned=3<\\\\/script>\"|' '%s/meta.json' && grep -c pwned=3 '%s/meta.json'",
             run, run);
    assert_int_equal(mp_test_shell(out, sizeof out, "%s", cmd), 0);
    snprintf(page, sizeof page, "%s/hostile.html", d);
    assert_int_equal(mp_test_run(out, sizeof out, "view '%s' --title '<!--<script></title><script>window.__pwned=5</script>' -o %s", run,
                                 page), 0);
    assert_null(strstr(out, "text not shown"));
    int rc = mp_test_shell(out, sizeof out, "cd %s/tests/browser && node check_hostile.js %s 'onerror=alert(1)'",
                           MP_SOURCE_DIR, page);
    print_message("%s", out);
    if (rc != 0) fail_msg("hostile strings: the page ran or mangled them");
}

/* Writes a synthetic causal run: scores (L,S,S) and per-head maps (L,H,S,S) with a pattern. */
static void write_synthetic(const char *dir, int L, int H, int S) {
    char path[1024];
    MpErr e;
    double *h = malloc((size_t)L * H * S * S * sizeof *h), *m = calloc((size_t)L * S * S, sizeof *m);
    assert_non_null(h);
    assert_non_null(m);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < H; k++)
            for (int i = 0; i < S; i++)
                for (int j = 0; j < S; j++) {
                    double v = j > i ? NAN : sin(0.05 * (i - j) + 0.3 * k) + 0.01 * (l + 1) * cos(0.02 * i * (k + 1)) + 0.001 * j;
                    h[(((size_t)l * H + k) * S + i) * S + j] = v;
                    m[((size_t)l * S + i) * S + j] += v / H;
                }
    int64_t sh[4] = {L, H, S, S}, sm[3] = {L, S, S};
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/scores_heads.npy", dir);
    assert_int_equal(mp_npy_write(path, MP_DT_F64, h, 4, sh, &e), MP_OK);
    snprintf(path, sizeof path, "%s/scores.npy", dir);
    assert_int_equal(mp_npy_write(path, MP_DT_F64, m, 3, sm, &e), MP_OK);
    char meta[128]; /* a finished run's folder has one (view refuses a folder without) */
    int n = snprintf(meta, sizeof meta, "{\"kind\": \"synthetic\", \"seq\": %d}\n", S);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    mp_test_write_file(path, meta, (size_t)n);
    free(h);
    free(m);
}

/* A budget too small for float16 heads: 8 bits and area-averaged, within the budget, and the
 * values the page shows still match the block means of the .npy within the stated half step. */
static void test_budget_in_browser(void **state) {
    (void)state;
    need_browser();
    const char *d = mp_test_tmpdir();
    char out[8192], page[512], run[512];
    snprintf(run, sizeof run, "%s/synth", d);
    write_synthetic(run, 2, 6, 256);
    snprintf(page, sizeof page, "%s/view.html", d);
    assert_int_equal(mp_test_run(out, sizeof out, "view %s --max-mb 0.4 -o %s", run, page), 0);
    print_message("%s", out);
    assert_non_null(strstr(out, "heads 8-bit (6 heads) area-averaged 2x2 to 128 x 128"));
    /* 0.4 MiB of data plus the page's script and header */
    assert_true(file_size(page) < 0.4 * 1048576 + 120000);
    browser_check(page, run, NULL, NULL);
    /* maps wider than --max-side: every kind averaged over 3 x 3 blocks (256 = 85·3 + 1) */
    assert_int_equal(mp_test_run(out, sizeof out, "view %s --max-side 100 --force -o %s", run, page), 0); /* same page */
    assert_non_null(strstr(out, "scores float16 area-averaged 3x3 to 86 x 86"));
    browser_check(page, run, NULL, NULL);
}

/* report.html: the viewer folded under Figure 4 opens and shows the runs' values. */
static void test_report_viewer_in_browser(void **state) {
    (void)state;
    need_browser();
    const char *d = mp_test_tmpdir();
    char out[8192], page[512], c1[512], c2[512];
    assert_int_equal(mp_test_run(out, sizeof out, "reproduce --quick --only fig4 --batch 200 --out %s", d), 0);
    snprintf(page, sizeof page, "%s/report.html", d);
    snprintf(c1, sizeof c1, "%s/fig4/causal_alpha_0", d);
    snprintf(c2, sizeof c2, "%s/fig4/causal_alpha_0.5", d);
    browser_check(page, c1, c2, "--id mpv-fig1");
}

static void test_theory_and_bad_input(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], page[512];
    snprintf(page, sizeof page, "%s/v.html", d);
    assert_int_equal(mp_test_run(out, sizeof out, "theory --n 12 --out %s/th", d), 0);
    assert_int_equal(mp_test_run(out, sizeof out, "view %s/th -o %s", d, page), 0);
    assert_non_null(strstr(out, "th: 1 layer, S=12, causal; scores float16"));
    remove(page);
    /* a scores_se.npy of another shape, a truncated scores.npy, a folder without maps */
    char path[512];
    MpErr e;
    double z[2 * 3 * 3] = {0};
    int64_t sh[3] = {2, 3, 3};
    snprintf(path, sizeof path, "%s/bad", d);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/bad/scores.npy", d);
    assert_int_equal(mp_npy_write(path, MP_DT_F64, z, 3, sh, &e), MP_OK);
    sh[0] = 1;
    snprintf(path, sizeof path, "%s/bad/scores_se.npy", d);
    assert_int_equal(mp_npy_write(path, MP_DT_F64, z, 3, sh, &e), MP_OK);
    snprintf(path, sizeof path, "%s/trunc", d);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/trunc/scores.npy", d);
    mp_test_write_file(path, "\x93NUMPY\x01\x00\x10\x00{'descr'", 18);
    snprintf(path, sizeof path, "%s/empty", d);
    mkdir(path, 0755);
    /* a finished run with a pos_probe.npy of another shape than [L, 11] */
    assert_int_equal(mp_test_shell(out, sizeof out, "cp -r %s/th %s/badpos", d, d), 0);
    snprintf(path, sizeof path, "%s/badpos/pos_probe.npy", d);
    int64_t psh[2] = {1, 5};
    assert_int_equal(mp_npy_write(path, MP_DT_F64, z, 2, psh, &e), MP_OK);
    const char *bad[][2] = {
        {"bad", "scores_se.npy: shape does not match"}, {"trunc", "trunc/scores.npy"}, {"empty", "no scores.npy"},
        {"nonexistent", "no scores.npy"},          {"th --max-mb 0", "--max-mb"},        {"th --label a --label b", "--label"},
        {"th --bogus", "bogus"},                   {"th --max-side 4", "--max-side"},
        {"badpos", "badpos/pos_probe.npy: shape does not match the run"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        int rc = mp_test_run(out, sizeof out, "view %s/%s -o %s", d, bad[k][0], page);
        if (rc != 2 || !strstr(out, bad[k][1]) || strchr(out, '\n') != out + strlen(out) - 1)
            fail_msg("'view %s' exited %d: %s", bad[k][0], rc, out);
        assert_false(mp_file_exists(page));
    }
    assert_int_equal(mp_test_run(out, sizeof out, "view %s/th", d), 2); /* no -o */
    assert_int_equal(mp_test_run(out, sizeof out, "view -o %s", page), 2); /* no folder */
}

/* A --data probe run with a relative path, viewed from another folder, shows its text: meta.json
 * records the corpus (and tokenizer) by absolute path (issue 30; the page said "text not shown:
 * corpus.txt: No such file or directory"). */
static void test_text_from_another_folder(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192];
    int rc = mp_test_shell(out, sizeof out, "mkdir -p %s/w %s/elsewhere && cp %s/models/kjv.txt %s/w/corpus.txt && cd %s/w && "
                           "%s probe %s/models/rope --data corpus.txt --pack --n 3 --seq 32 --quiet --out s/p1",
                           d, d, MP_SOURCE_DIR, d, d, MP_TEST_BIN, MP_SOURCE_DIR);
    if (rc != 0) fail_msg("probe: %s", out);
    rc = mp_test_shell(out, sizeof out, "cd %s/elsewhere && %s view ../w/s/p1 -o view.html", d, MP_TEST_BIN);
    if (rc != 0) fail_msg("view: %s", out);
    if (strstr(out, "text not shown")) fail_msg("view from another folder lost the text: %s", out);
    char page[512];
    snprintf(page, sizeof page, "%s/elsewhere/view.html", d);
    assert_true(mp_file_exists(page));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_exponent),
        cmocka_unit_test(test_text_from_another_folder),
        cmocka_unit_test(test_theory_and_bad_input),
        cmocka_unit_test(test_simulate_pair_in_browser),
        cmocka_unit_test(test_probe_heads_and_text_in_browser),
        cmocka_unit_test(test_statistics_in_browser),
        cmocka_unit_test(test_budget_in_browser),
        cmocka_unit_test(test_report_viewer_in_browser),
        cmocka_unit_test(test_hostile_strings_in_browser),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
