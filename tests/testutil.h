/* testutil.h — helpers shared by the cmocka test programs (header-only, static functions).
 *
 * Provides: mp_test_shell() to run a shell command and capture its output and exit status, and
 * mp_test_run() to run the maskpos binary under test (MP_TEST_BIN, set by the Makefile) likewise; mp_test_tmpdir() for a fresh scratch directory;
 * mp_test_write_file() to write fixture bytes; mp_test_max_abs_diff() for map comparisons.
 */
#ifndef MP_TESTUTIL_H
#define MP_TESTUTIL_H

#ifdef _OPENMP
#include <omp.h>
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#ifndef MP_TEST_BIN
#define MP_TEST_BIN "build/maskpos"
#endif
/* Sanitizer builds run 10-20x slower: tests may shrink Monte-Carlo sizes there, with tolerances
 * that follow from the run's own standard errors. */
#if defined(__SANITIZE_ADDRESS__)
#define MP_TEST_SANITIZED 1
#else
#define MP_TEST_SANITIZED 0
#endif

#ifndef MP_SOURCE_DIR
#define MP_SOURCE_DIR "."
#endif

/* Runs a shell command (stderr merged into stdout); returns its exit status (or 128+signal),
 * with up to cap-1 bytes of its output in out (may be NULL). */
static int mp_test_vshell(char *out, size_t cap, const char *fmt, va_list ap) __attribute__((unused));
static int mp_test_vshell(char *out, size_t cap, const char *fmt, va_list ap) {
    char cmd[8192], full[8300];
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    snprintf(full, sizeof full, "%s 2>&1", cmd);
    FILE *p = popen(full, "r");
    if (!p) return -1;
    size_t n = 0;
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, p)) > 0) {
        if (out && n + 1 < cap) {
            size_t take = got < cap - 1 - n ? got : cap - 1 - n;
            memcpy(out + n, buf, take);
            n += take;
        }
    }
    if (out && cap) out[n] = '\0';
    int st = pclose(p);
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

static int mp_test_shell(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4), unused));
static int mp_test_shell(char *out, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = mp_test_vshell(out, cap, fmt, ap);
    va_end(ap);
    return rc;
}

/* Runs `MP_TEST_BIN <args>`, as mp_test_shell. */
static int mp_test_run(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4), unused));
static int mp_test_run(char *out, size_t cap, const char *fmt, ...) {
    char args[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return mp_test_shell(out, cap, "%s %s", MP_TEST_BIN, args);
}

/* Creates a fresh directory /tmp/maskpos-test-XXXXXX; returns a static buffer per call slot. */
static const char *mp_test_tmpdir(void) __attribute__((unused));
static const char *mp_test_tmpdir(void) {
    static char slots[8][64];
    static int next = 0;
    char *d = slots[next++ % 8];
    snprintf(d, 64, "/tmp/maskpos-test-XXXXXX");
    if (!mkdtemp(d)) fail_msg("mkdtemp failed");
    return d;
}

/* The whole file as a NUL-terminated string (NULL when unreadable); the caller frees it. */
static char *mp_test_read_text(const char *path) __attribute__((unused));
static char *mp_test_read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    if (s) s[n] = 0;
    return s;
}

static void mp_test_write_file(const char *path, const void *buf, size_t n) __attribute__((unused));
static void mp_test_write_file(const char *path, const void *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot write %s", path);
    if (n) assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/* Max |a−b| over entries finite in both; NaN patterns must agree (else returns +inf). */
static double mp_test_max_abs_diff(const double *a, const double *b, size_t n) __attribute__((unused));
static double mp_test_max_abs_diff(const double *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY;
        if (isnan(a[i])) continue;
        double d = fabs(a[i] - b[i]);
        if (d > m) m = d;
    }
    return m;
}

/* OpenMP threads for the library calls a test makes in-process (no-op without OpenMP). */
static void mp_test_set_threads(int n) __attribute__((unused));
static void mp_test_set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(n);
#else
    (void)n;
#endif
}

/* The environment words that put python3 in front of this build's library: in the sanitizer build
 * the library carries AddressSanitizer, so its runtime is preloaded (leak reports off: the
 * interpreter's own allocations are not ours); "" otherwise. */
static void mp_test_python_preload(char *buf, size_t cap) __attribute__((unused));
static void mp_test_python_preload(char *buf, size_t cap) {
    buf[0] = '\0';
    if (!MP_TEST_SANITIZED) return;
    char lib[4096];
    assert_int_equal(mp_test_shell(lib, sizeof lib, "cc -print-file-name=libasan.so"), 0);
    lib[strcspn(lib, "\n")] = '\0';
    snprintf(buf, cap, "LD_PRELOAD=%s ASAN_OPTIONS=detect_leaks=0", lib);
}

/* x [n] <- pseudo-random floats k / div, k an integer in [-1000, 1000], from an LCG seeded by seed. */
static void mp_test_fill(float *x, size_t n, uint32_t seed, float div) __attribute__((unused));
static void mp_test_fill(float *x, size_t n, uint32_t seed, float div) {
    uint32_t s = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((int)(s >> 8) % 2001 - 1000) / div;
    }
}

#endif
