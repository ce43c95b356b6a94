/* test_pyapi.c — runs the Python package's tests (python/tests, Debian's pytest) against this
 * build's libmaskpos.so and maskpos binary: maskpos.theory / simulate / probe / load equal the
 * command line byte for byte, errors carry its messages, Ctrl-C stops a run cleanly.
 * Skipped (with the reason; an unexpected skip fails `make test`: tests/expected_skips.txt) when
 * python3, numpy or pytest is missing: scripts/setup.sh --test installs them.
 * In the sanitizer build the library carries AddressSanitizer: python3 runs with its runtime
 * preloaded (leak reports off: the interpreter's own allocations are not ours).
 */
#include "testutil.h"

static void test_python_package(void **state) {
    (void)state;
    char out[1 << 16], build[4096];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import numpy, pytest'") != 0) {
        print_message("python3 with numpy and pytest is needed (scripts/setup.sh --test): %s\n", out);
        skip();
    }
    snprintf(build, sizeof build, "%s", MP_TEST_BIN);
    *strrchr(build, '/') = '\0';
    char preload[4200] = "";
    if (MP_TEST_SANITIZED) {
        char lib[4096];
        assert_int_equal(mp_test_shell(lib, sizeof lib, "cc -print-file-name=libasan.so"), 0);
        lib[strcspn(lib, "\n")] = '\0';
        snprintf(preload, sizeof preload, "LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0", lib);
    }
    int rc = mp_test_shell(out, sizeof out,
                           "cd %s && %s MASKPOS_LIB=%s/libmaskpos.so MASKPOS_BIN=%s PYTHONDONTWRITEBYTECODE=1 "
                           "/usr/bin/python3 -m pytest -q -p no:cacheprovider python/tests",
                           MP_SOURCE_DIR, preload, build, MP_TEST_BIN);
    const char *tail = strlen(out) > 6000 ? out + strlen(out) - 6000 : out;
    if (rc != 0) fail_msg("pytest python/tests failed (status %d):\n%s", rc, tail);
    /* pytest's summary line, e.g. "17 passed in 12.3s": nothing skipped, something passed */
    assert_non_null(strstr(out, " passed"));
    if (strstr(out, "skipped")) fail_msg("a Python test was skipped:\n%s", tail);
    print_message("%s", tail);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_python_package)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
