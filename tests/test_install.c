/* test_install.c — the library as a user gets it: `make install PREFIX=tmp` puts bin, lib (the
 * shared library with its soname, the static one), include/maskpos.h, lib/pkgconfig/maskpos.pc
 * and the Python package in place; examples/api_example.c builds against that copy with
 * `pkg-config --cflags --libs maskpos` alone and runs: its files equal `maskpos simulate`'s byte
 * for byte; the shared library exports the public API and nothing else; the installed Python
 * package finds the installed library; `pip install --no-build-isolation --no-index ./python`
 * works offline with Debian's pip and setuptools and bundles the library (python/setup.py); the
 * README's install line, run as written in a fresh venv (whichever python3 is first on PATH),
 * gives a package that imports from any folder with its own copy of the library.
 */
#include "testutil.h"

static char build[4096];

static void set_build(void) {
    snprintf(build, sizeof build, "%s", MP_TEST_BIN);
    *strrchr(build, '/') = '\0';
}

static void test_install_and_example(void **state) {
    (void)state;
    char out[1 << 16];
    set_build();
    const char *tmp = mp_test_tmpdir();
    /* the objects are up to date (make test built them): install only copies */
    int rc = mp_test_shell(out, sizeof out, "MAKEFLAGS= make -s -C %s BUILD=%s install PREFIX=%s/prefix", MP_SOURCE_DIR,
                           build, tmp);
    if (rc) fail_msg("make install failed (%d): %s", rc, out);
    const char *installed[] = {"bin/maskpos", "lib/libmaskpos.so", "lib/libmaskpos.so.0", "lib/libmaskpos.a",
                               "include/maskpos.h", "lib/pkgconfig/maskpos.pc"};
    for (size_t i = 0; i < sizeof installed / sizeof *installed; i++)
        if (mp_test_shell(NULL, 0, "test -e %s/prefix/%s", tmp, installed[i])) fail_msg("not installed: %s", installed[i]);
    /* soname, and only the public symbols exported */
    assert_int_equal(mp_test_shell(out, sizeof out, "readelf -d %s/prefix/lib/libmaskpos.so | grep SONAME", tmp), 0);
    assert_non_null(strstr(out, "[libmaskpos.so.0]"));
    assert_int_equal(mp_test_shell(out, sizeof out, "nm -D --defined-only %s/prefix/lib/libmaskpos.so.0 | awk '{print $3}' "
                                                    "| grep -v '^maskpos_' | grep -v '^MASKPOS_0$'; true", tmp), 0);
    if (out[0]) fail_msg("libmaskpos.so exports more than the public API:\n%s", out);
    /* the example, built with pkg-config only (a sanitizer build's library needs its runtime first) */
    rc = mp_test_shell(out, sizeof out,
                       "PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig cc -std=c11 -Wall -Wextra -Werror %s %s/examples/api_example.c "
                       "$(PKG_CONFIG_PATH=%s/prefix/lib/pkgconfig pkg-config --cflags --libs maskpos) -o %s/api_example",
                       tmp, MP_TEST_SANITIZED ? "-fsanitize=address,undefined" : "", MP_SOURCE_DIR, tmp, tmp);
    if (rc) fail_msg("the example does not build against the installed copy (%d): %s", rc, out);
    rc = mp_test_shell(out, sizeof out, "LD_LIBRARY_PATH=%s/prefix/lib %s/api_example %s/run", tmp, tmp, tmp);
    if (rc) fail_msg("the example failed (%d): %s", rc, out);
    assert_non_null(strstr(out, " 0.132103 0.150818 1.000000")); /* S31, S32 of README's theory */
    assert_non_null(strstr(out, "refused: --alpha: 1.5 is outside [0, 1)"));
    assert_non_null(strstr(out, "simulate: 0 of 2000 sequences"));
    assert_non_null(strstr(out, "simulate: 2000 of 2000 sequences"));
    assert_non_null(strstr(out, "loaded simulate run from"));
    assert_int_equal(mp_test_run(out, sizeof out, "simulate --rope --batch 2000 --seq 16 --layers 3 --quiet --out %s/cli", tmp), 0);
    const char *files[] = {"scores", "scores_se", "probs", "scores_diagnorm"};
    for (int i = 0; i < 4; i++)
        if (mp_test_shell(out, sizeof out, "cmp %s/cli/%s.npy %s/run/%s.npy", tmp, files[i], tmp, files[i]))
            fail_msg("the example's %s.npy differs from the command's: %s", files[i], out);
    /* the installed Python package finds the installed library */
    if (mp_test_shell(NULL, 0, "/usr/bin/python3 -c 'import numpy'") == 0 && !MP_TEST_SANITIZED) {
        rc = mp_test_shell(out, sizeof out,
                           "cd / && PYTHONPATH=$(ls -d %s/prefix/lib/python3*/dist-packages) /usr/bin/python3 -c "
                           "'import maskpos; print(maskpos.library_path); print(maskpos.theory(n=3).scores[2, 1])'", tmp);
        if (rc) fail_msg("the installed Python package does not load (%d): %s", rc, out);
        char want[4200];
        snprintf(want, sizeof want, "%s/prefix/lib/libmaskpos.so.0", tmp);
        assert_non_null(strstr(out, want));
        assert_non_null(strstr(out, "0.1508177"));
    }
    mp_test_shell(NULL, 0, "rm -rf %s", tmp);
}

/* Offline install with Debian's pip (no index, no build isolation: setuptools from Debian), from a
 * copy of python/ with the library built beforehand (MASKPOS_BUILD_LIB): it ends up in the package. */
static void test_pip_install_offline(void **state) {
    (void)state;
    char out[1 << 16];
    set_build();
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import numpy' && /usr/bin/python3 -m pip --version && /usr/bin/python3 -c 'import setuptools'") != 0) {
        print_message("python3 with numpy, pip and setuptools is needed (scripts/setup.sh --test): %s\n", out);
        skip();
    }
    const char *tmp = mp_test_tmpdir();
    /* from a copy, so that setuptools' build files stay out of the source tree */
    int rc = mp_test_shell(out, sizeof out,
                           "cp -r %s/python %s/src && rm -rf %s/src/build %s/src/*.egg-info && MASKPOS_BUILD_LIB=%s/libmaskpos.so.0 "
                           "/usr/bin/python3 -m pip install -q --break-system-packages --no-build-isolation --no-index --prefix %s/pip %s/src",
                           MP_SOURCE_DIR, tmp, tmp, tmp, build, tmp, tmp);
    if (rc) fail_msg("pip install failed (%d): %s", rc, out);
    if (MP_TEST_SANITIZED) return; /* loading an ASan library into python3: tests/test_pyapi.c */
    rc = mp_test_shell(out, sizeof out,
                       "cd / && PYTHONPATH=$(ls -d %s/pip/lib/python3*/site-packages "
                       "%s/pip/local/lib/python3*/dist-packages 2>/dev/null | head -1) /usr/bin/python3 -c "
                       "'import maskpos; print(maskpos.__file__); print(maskpos.library_path); print(maskpos.version())'",
                       tmp, tmp);
    if (rc) fail_msg("the pip-installed package does not load (%d): %s", rc, out);
    assert_non_null(strstr(out, tmp));
    assert_non_null(strstr(out, "maskpos/libmaskpos.so.0")); /* its own copy, not MASKPOS_LIB's */
    assert_non_null(strstr(out, "0.1.0"));
    mp_test_shell(NULL, 0, "rm -rf %s", tmp);
}

/* README.md's install line, as written (its ".venv" put in a temporary folder), run at the
 * repository's root with the PATH a user has: on this project's machines `python3` is a pyenv 3.11
 * without Debian's packages (the line before issue 39, `python3 -m venv ...`, failed there with
 * "invalid command 'bdist_wheel'"), so the line names Debian's python3; it is run twice, with the
 * test's PATH as it is and with a `python3` first on PATH that is not Debian's at all. Then: a venv
 * seeing Debian's numpy, the package with the library inside, importable from / without
 * MASKPOS_LIB or PYTHONPATH. */
static void readme_line_run(const char *line, const char *path_prefix, const char *tmp, const char *venv) {
    char out[1 << 16];
    const char *b = strrchr(build, '/') ? strrchr(build, '/') + 1 : build; /* BUILD for setup.py's make */
    int rc = mp_test_shell(out, sizeof out,
                           "cd %s && rm -rf python/build python/maskpos.egg-info && "
                           "(PATH=%s$PATH BUILD=%s env -u MASKPOS_LIB sh -c \"$(echo '%s' | sed 's#\\.venv#%s/%s#g')\"); "
                           "rc=$?; rm -rf python/build python/maskpos.egg-info; exit $rc",
                           MP_SOURCE_DIR, path_prefix, b, line, tmp, venv);
    if (rc) fail_msg("README's install line failed with PATH=%s$PATH (%d): %s\n%s", path_prefix, rc, line, out);
    rc = mp_test_shell(out, sizeof out,
                       "cd / && env -u MASKPOS_LIB -u PYTHONPATH %s/%s/bin/python -c 'import maskpos; "
                       "print(maskpos.library_path); print(maskpos.theory(n=3).scores[2, 1]); print(maskpos.Accumulator(1, 2, 4))'",
                       tmp, venv);
    if (rc) fail_msg("the venv's package does not load (%d): %s", rc, out);
    char want[4200];
    snprintf(want, sizeof want, "%s/%s/lib/", tmp, venv);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "maskpos/libmaskpos.so.0"));
    assert_non_null(strstr(out, "0.1508177"));
}

static void test_readme_venv_install(void **state) {
    (void)state;
    char out[1 << 16], line[2048], stub[4200];
    set_build();
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import numpy, ensurepip, setuptools'") != 0) {
        print_message("python3 with numpy, venv (ensurepip) and setuptools is needed: %s\n", out);
        skip();
    }
    if (MP_TEST_SANITIZED) skip(); /* the library the line builds would be the sanitizer build's */
    int rc = mp_test_shell(line, sizeof line, "grep -m1 -E '^    [^ ]*python3 -m venv --system-site-packages' %s/README.md",
                           MP_SOURCE_DIR);
    if (rc || !strstr(line, ".venv/bin/pip install")) fail_msg("README.md has no venv install line: %s", line);
    line[strcspn(line, "\n")] = '\0';
    const char *tmp = mp_test_tmpdir();
    mp_test_shell(out, sizeof out, "command -v python3");
    print_message("python3 first on this PATH: %s", out);
    readme_line_run(line, "", tmp, "venv1");
    /* a python3 first on PATH that is not Debian's (a pyenv, a conda, ...): here one that refuses */
    snprintf(stub, sizeof stub, "%s/stub", tmp);
    assert_int_equal(mp_test_shell(out, sizeof out, "mkdir -p %s && printf '#!/bin/sh\\necho not Debian python3 >&2\\nexit 9\\n' > %s/python3 "
                                                    "&& chmod +x %s/python3 && PATH=%s:$PATH python3; test $? = 9",
                                   stub, stub, stub, stub),
                     0);
    char prefix[4300];
    snprintf(prefix, sizeof prefix, "%s:", stub);
    readme_line_run(line, prefix, tmp, "venv2");
    mp_test_shell(NULL, 0, "rm -rf %s", tmp);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_install_and_example), cmocka_unit_test(test_pip_install_offline),
                                       cmocka_unit_test(test_readme_venv_install)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
