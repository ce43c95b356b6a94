/* test_card.c — `maskpos card` (src/cli/cmd_card.c, src/job/card_job.c, src/viz/card_html.c).
 *
 * On a mkmodel model and a small text, the card is checked against `maskpos probe` runs made apart
 * through the CLI with the same options (an independent path to the same numbers), by
 * tests/ref/card_check.py (Debian's /usr/bin/python3, standard library only): every number of the
 * per-layer table equals the one the separate run's meta.json gives (by the script's own rules), the
 * counterfactual columns the separate --no-rope and --bidirectional runs', every .npy of each pass
 * the separate run's byte for byte; card.html parses (html.parser: every element closed in order,
 * no script, nothing from outside) with one row per layer and the cells as the script formats
 * them; card.md and card.tex have one row per layer. The check is shown to fail when a pass is
 * compared with the wrong run. Then `card A B` (a card and a plain probe folder side by side),
 * --no-counterfactuals, a model without RoPE (models/none: no no-rope pass), and bad input: a folder that is no
 * run, a simulate run, runs of another S, a folder given twice, a probe option with run folders —
 * each one line naming the folder, exit 2, and no card written.
 */
#include "core/util.h"   /* mp_file_exists */
#include "model/probe.h"  /* mp_probe_stats: the rows the card turns on */
#include "testutil.h"

/* The model, the text and the probe options every run of this file shares. */
typedef struct CardFix {
    char dir[256], model[320], nope[320], txt[320];
} CardFix;
static CardFix fx;
static const char *card_opts = "--pack --n 10 --seq 24 --layers 1-3 --threads 2";

static int need_python(void) {
    char out[1024];
    if (mp_file_exists("/usr/bin/python3") && mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import html.parser, json'") == 0)
        return 1;
    print_message("Debian's /usr/bin/python3 is not installed: the card's check is skipped\n");
    return 0;
}

static int card_setup(void **state) {
    (void)state;
    snprintf(fx.dir, sizeof fx.dir, "%s", mp_test_tmpdir_shared());
    snprintf(fx.model, sizeof fx.model, "%s/m.gguf", fx.dir);
    snprintf(fx.nope, sizeof fx.nope, "%s/models/none", MP_SOURCE_DIR); /* trained without positional encoding */
    snprintf(fx.txt, sizeof fx.txt, "%s/text.txt", fx.dir);
    char out[8192];
    if (mp_test_run(out, sizeof out, "mkmodel --arch llama --layers 3 --vocab 300 --format gguf --seed 5 %s", fx.model)) {
        print_message("mkmodel: %s\n", out);
        return -1;
    }
    FILE *f = fopen(fx.txt, "w");
    if (!f) return -1;
    for (int i = 0; i < 60; i++)
        fprintf(f, "Sentence %d of the card's text: the quick brown fox jumps over the lazy dog, %d times.\n", i, i * 7 % 13);
    fclose(f);
    return 0;
}

/* probe MODEL with the card's options and the statistics the card turns on (every row of the
 * statistics table that reads the forward pass: probs, recency, variance, freq, ... by name),
 * plus extra, into dir. */
static void probe_apart(const char *model, const char *dir, const char *extra) {
    char out[8192], stats[512] = "";
    size_t u = 0;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_stats[id].in && u < sizeof stats)
            u += (size_t)snprintf(stats + u, sizeof stats - u, "%s%s", u ? "," : "", mp_probe_stats[id].name);
    int rc = mp_test_run(out, sizeof out, "probe %s --data %s %s --stats %s %s --quiet --out %s", model, fx.txt, card_opts, stats,
                         extra, dir);
    if (rc != 0) fail_msg("probe %s: %s", extra, out);
}

/* card_check.py on card with args; asserts it passes (want 0) or fails (want 1). */
static void check(const char *card, const char *args, int want) {
    char out[8192];
    int rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/card_check.py %s %s", MP_SOURCE_DIR, card, args);
    print_message("%s", out);
    if (rc != want) fail_msg("card_check.py %s %s: exit %d, expected %d", card, args, rc, want);
}

/* The card of the RoPE model against three probe runs made apart; then A B. */
static void test_card_against_probe_runs(void **state) {
    (void)state;
    if (!need_python()) skip();
    const char *d = mp_test_tmpdir();
    char out[16384], card[512], args[2048], cmp[512];
    snprintf(card, sizeof card, "%s/card", d);
    int rc = mp_test_run(out, sizeof out, "card %s --data %s %s --out %s", fx.model, fx.txt, card_opts, card);
    if (rc != 0) fail_msg("card: %s", out);
    /* the plan and its cost before the first pass */
    const char *plan = strstr(out, "card: 3 probe passes"), *first = strstr(out, "card: pass probe");
    assert_non_null(plan);
    assert_non_null(first);
    assert_true(plan < first);
    assert_non_null(strstr(out, "| layer | NRI |"));
    static const char *pass[3][2] = {{"probe", ""}, {"no-rope", "--no-rope"}, {"bidirectional", "--bidirectional"}};
    int w = 0;
    for (int p = 0; p < 3; p++) {
        char run[512];
        snprintf(run, sizeof run, "%s/apart-%s", d, pass[p][0]);
        probe_apart(fx.model, run, pass[p][1]);
        w += snprintf(args + w, sizeof args - (size_t)w, " --pass %s=%s", pass[p][0], run);
    }
    check(card, args, 0);
    char both[2600];
    snprintf(both, sizeof both, "%s --same-bytes", args);
    check(card, both, 0);
    /* the check fails when the card is compared with the wrong run */
    snprintf(both, sizeof both, "--pass probe=%s/apart-bidirectional", d);
    check(card, both, 1);
    /* card A B: the card and the --bidirectional probe folder side by side */
    snprintf(cmp, sizeof cmp, "%s/both", d);
    rc = mp_test_run(out, sizeof out, "card %s %s/apart-bidirectional --out %s", card, d, cmp);
    if (rc != 0) fail_msg("card A B: %s", out);
    char a2[2700];
    snprintf(a2, sizeof a2, "--models 2 --model 0 %s", args);
    check(cmp, a2, 0);
    snprintf(a2, sizeof a2, "--models 2 --model 1 --pass probe=%s/apart-bidirectional", d);
    check(cmp, a2, 0);
    /* a card of the compared card: its models again, read from their folders */
    char again[512];
    snprintf(again, sizeof again, "%s/again", d);
    rc = mp_test_run(out, sizeof out, "card %s --quiet --out %s", cmp, again);
    if (rc != 0) fail_msg("card of a card: %s", out);
    check(again, a2, 0);
}

/* --no-counterfactuals: one pass; a model without RoPE: no no-rope pass; --resid-stride named in the runs table. */
static void test_card_passes(void **state) {
    (void)state;
    if (!need_python()) skip();
    const char *d = mp_test_tmpdir();
    char out[16384], card[512], run[512], args[1200];
    snprintf(card, sizeof card, "%s/one", d);
    snprintf(run, sizeof run, "%s/apart", d);
    int rc = mp_test_run(out, sizeof out, "card %s --data %s %s --no-counterfactuals --quiet --out %s", fx.model, fx.txt, card_opts, card);
    if (rc != 0) fail_msg("card --no-counterfactuals: %s", out);
    probe_apart(fx.model, run, "");
    snprintf(args, sizeof args, "--pass probe=%s --same-bytes", run);
    check(card, args, 0);
    assert_false(mp_file_exists(strcat(strcpy(out, card), "/no-rope/meta.json")));
    snprintf(card, sizeof card, "%s/nope", d);
    rc = mp_test_run(out, sizeof out, "card %s --data %s %s --out %s", fx.nope, fx.txt, card_opts, card);
    if (rc != 0) fail_msg("card of a NoPE model: %s", out);
    assert_non_null(strstr(out, "the model has no RoPE: no no-rope pass"));
    snprintf(run, sizeof run, "%s/nope-bidir", d);
    probe_apart(fx.nope, run, "--bidirectional");
    char run0[512];
    snprintf(run0, sizeof run0, "%s/nope-probe", d);
    probe_apart(fx.nope, run0, "");
    snprintf(args, sizeof args, "--pass probe=%s --pass bidirectional=%s --same-bytes", run0, run);
    check(card, args, 0);
    /* --resid-stride 2: the runs table says the residual stream of 1 sequence in 2 (5 of 10) was read;
     * checked against a probe run with the same stride, and refused against one without */
    snprintf(card, sizeof card, "%s/stride", d);
    rc = mp_test_run(out, sizeof out, "card %s --data %s %s --resid-stride 2 --no-counterfactuals --quiet --out %s", fx.model,
                     fx.txt, card_opts, card);
    if (rc != 0) fail_msg("card --resid-stride 2: %s", out);
    snprintf(run, sizeof run, "%s/apart-stride", d);
    probe_apart(fx.model, run, "--resid-stride 2");
    snprintf(args, sizeof args, "--pass probe=%s --same-bytes", run);
    check(card, args, 0);
    snprintf(args, sizeof args, "--pass probe=%s/apart", d); /* the same model, every sequence read */
    check(card, args, 1);
    /* a model named with a '|' (its folder's name): card.md escapes it, its rows keep their cells */
    char cmp[600];
    assert_int_equal(mp_test_shell(out, sizeof out, "ln -s %s/apart '%s/a|b'", d, d), 0);
    snprintf(cmp, sizeof cmp, "%s/pipe", d);
    rc = mp_test_run(out, sizeof out, "card %s '%s/a|b' --quiet --out %s", card, d, cmp);
    if (rc != 0) fail_msg("card A 'a|b': %s", out);
    snprintf(args, sizeof args, "--models 2 --model 1 --pass probe=%s/apart", d);
    check(cmp, args, 0);
    assert_true(mp_file_exists(strcat(strcpy(out, cmp), "/card.md")));
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, sizeof out - 1, f);
    fclose(f);
    out[n] = 0;
    assert_non_null(strstr(out, "/a\\|b) |")); /* (both are m.gguf: each name adds its folder) */
}

/* Bad input: one line naming the folder, exit 2, no card written. */
static void test_card_bad_input(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], a[512], s16[512], sim[512], empty[512];
    snprintf(a, sizeof a, "%s/a", d);
    snprintf(s16, sizeof s16, "%s/s16", d);
    snprintf(sim, sizeof sim, "%s/sim", d);
    snprintf(empty, sizeof empty, "%s/empty", d);
    probe_apart(fx.model, a, "");
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --data %s --pack --n 4 --seq 16 --quiet --out %s", fx.model, fx.txt, s16), 0);
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --batch 20 --quiet --out %s", sim), 0);
    assert_int_equal(mp_test_shell(out, sizeof out, "mkdir -p %s", empty), 0);
    const struct {
        const char *args, *says, *names;
    } bad[] = {
        {"%s/a %s/empty", "not a run folder", "/empty"},
        {"%s/a %s/sim", "a simulate run, not a probe run", "/sim"},
        {"%s/a %s/s16", "S = 16 tokens", "/s16"},
        {"%s/a %s/a/", "given twice", "/a/"},
        {"%s/a %s/nothing-here", "not a run folder", "/nothing-here"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char args[1200], o[512];
        snprintf(args, sizeof args, bad[k].args, d, d);
        snprintf(o, sizeof o, "%s/out%zu", d, k);
        int rc = mp_test_run(out, sizeof out, "card %s --out %s", args, o);
        print_message("card %s: %s", args, out);
        assert_int_equal(rc, 2);
        assert_non_null(strstr(out, bad[k].says));
        assert_non_null(strstr(out, bad[k].names));
        assert_int_equal((int)(strchr(out, '\n') - out) + 1, (int)strlen(out)); /* one line */
        assert_false(mp_file_exists(strcat(o, "/card.json")));
    }
    assert_int_equal(mp_test_run(out, sizeof out, "card %s --data %s --out %s/o", a, fx.txt, d), 2);
    assert_non_null(strstr(out, "--data: run folders are shown as they are"));
    assert_int_equal(mp_test_run(out, sizeof out, "card %s --data %s %s --no-rope --out %s/o", fx.model, fx.txt, card_opts, d), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "card %s --data %s %s", fx.model, fx.txt, card_opts), 2);
    assert_non_null(strstr(out, "--out DIR is required"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_card_against_probe_runs),
        cmocka_unit_test(test_card_passes),
        cmocka_unit_test(test_card_bad_input),
    };
    return cmocka_run_group_tests(tests, card_setup, NULL);
}
