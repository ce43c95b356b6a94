/* test_pyapi.c — runs the Python package's tests (Debian's pytest) against this build's
 * libmaskpos.so and maskpos binary, in three pytest processes:
 *   python/tests        maskpos.theory / simulate / probe / load equal the command line byte for
 *                       byte, errors carry its messages, Ctrl-C stops a run cleanly;
 *   python/tests_torch  (python3-torch, CPU) maskpos.Accumulator equals `maskpos probe` byte for
 *                       byte on the C forward pass's scores, within stated bounds on the torch
 *                       reference's; maskpos.hf's hook on a tiny torch decoder; in its own
 *                       process because importing torch sets the OpenMP thread count;
 *   python/tests_hf     (HF transformers) maskpos.hf.probe on real transformers models built
 *                       from `maskpos mkmodel` folders.
 * Each is skipped (with the reason; an unexpected skip fails `make test`: tests/expected_skips.txt)
 * when what it needs is missing: scripts/setup.sh --test installs python3, numpy, pytest and torch;
 * transformers is not a Debian package (the GPU machine has it: scripts/device_check.sh).
 * In the sanitizer build the library carries AddressSanitizer: python3 runs with its runtime
 * preloaded (leak reports off: the interpreter's own allocations are not ours).
 */
#include "testutil.h"

/* Runs pytest on python/<dir> after checking that `import <modules>` works (else skip). */
static void run_pytest(const char *dir, const char *modules) {
    char out[1 << 16], build[4096];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import %s'", modules) != 0) {
        print_message("python3 with %s is needed for python/%s: %s\n", modules, dir, out);
        skip();
    }
    snprintf(build, sizeof build, "%s", MP_TEST_BIN);
    *strrchr(build, '/') = '\0';
    char preload[4200];
    mp_test_python_preload(preload, sizeof preload);
    const char *tmp = mp_test_tmpdir(); /* pytest's tmp_path and Python's tempfile: removed with it */
    int rc = mp_test_shell(out, sizeof out,
                           "cd %s && %s MASKPOS_LIB=%s/libmaskpos.so MASKPOS_BIN=%s PYTHONDONTWRITEBYTECODE=1 TMPDIR=%s "
                           "/usr/bin/python3 -m pytest -q -p no:cacheprovider --basetemp=%s/pytest python/%s",
                           MP_SOURCE_DIR, preload, build, MP_TEST_BIN, tmp, tmp, dir);
    const char *tail = strlen(out) > 6000 ? out + strlen(out) - 6000 : out;
    if (rc != 0) fail_msg("pytest python/%s failed (status %d):\n%s", dir, rc, tail);
    /* pytest's summary line, e.g. "17 passed in 12.3s": nothing skipped, something passed */
    assert_non_null(strstr(out, " passed"));
    if (strstr(out, "skipped")) fail_msg("a Python test was skipped:\n%s", tail);
    print_message("%s", tail);
}

static void test_python_package(void **state) {
    (void)state;
    run_pytest("tests", "numpy, pytest");
}

static void test_python_torch(void **state) {
    (void)state;
    run_pytest("tests_torch", "numpy, pytest, torch");
}

static void test_python_transformers(void **state) {
    (void)state;
    run_pytest("tests_hf", "numpy, pytest, torch, transformers");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_python_package), cmocka_unit_test(test_python_torch),
                                       cmocka_unit_test(test_python_transformers)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
