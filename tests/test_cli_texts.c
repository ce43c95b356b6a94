/* test_cli_texts.c — what every subcommand says about its flags, pinned: each case of
 * tests/fixtures/cli/cases.txt (every --help and -h, unknown flags, missing values, values that are
 * not numbers or outside their range, words no choice knows, flags that contradict each other, a
 * unique prefix and an ambiguous one) is run by scripts/cli_texts.sh on the binary under test, and
 * its exit status, standard output and standard error must equal tests/fixtures/cli/<command>.txt
 * byte for byte.
 *
 * The fixtures were written by the same script from the binary of main before the option tables
 * (/work/baseline/build-main/maskpos, main at adce9dc); the texts changed since on purpose are
 * listed with their reasons in tests/fixtures/cli/README.md (and are their own commits: `git log
 * tests/fixtures/cli`). A difference prints `diff -u` of the first subcommand that differs.
 *
 *   make build/tests/test_cli_texts && build/tests/test_cli_texts     (about 10 s: 522 runs)
 */
#include "testutil.h"

static const char *const commands[] = {"theory", "simulate", "reproduce", "plot",   "inspect", "mkmodel",  "tokenize",
                                       "corpus", "probe",    "logits",    "generate", "train",  "gram",     "view"};

/* Every subcommand's texts equal the fixtures'. */
static void test_texts_as_pinned(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    static char out[1 << 16];
    const int rc = mp_test_shell(out, sizeof out, "%s/scripts/cli_texts.sh %s %s/tests/fixtures/cli/cases.txt %s/texts 2>&1",
                                 MP_SOURCE_DIR, MP_TEST_BIN, MP_SOURCE_DIR, d);
    if (rc != 0) fail_msg("cli_texts.sh failed (%d): %s", rc, out);
    int bad = 0;
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        if (mp_test_shell(out, sizeof out, "diff -u %s/tests/fixtures/cli/%s.txt %s/texts/%s.txt", MP_SOURCE_DIR, commands[i], d,
                          commands[i]) == 0)
            continue;
        if (!bad++) print_message("maskpos %s: its texts differ from the fixture:\n%s\n", commands[i], out);
        else print_message("maskpos %s: its texts differ from the fixture too\n", commands[i]);
    }
    /* no case's subcommand is missing from the list above */
    assert_int_equal(mp_test_shell(out, sizeof out, "ls %s/texts | wc -l", d), 0);
    assert_int_equal(atoi(out), (int)(sizeof commands / sizeof *commands));
    mp_test_shell(out, sizeof out, "rm -rf %s", d);
    if (bad) fail_msg("%d subcommand(s) say something else than tests/fixtures/cli", bad);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_texts_as_pinned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
