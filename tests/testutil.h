/* testutil.h — helpers shared by the cmocka test programs (header-only, static functions).
 *
 * Provides: mp_test_shell() to run a shell command and capture its output and exit status, and
 * mp_test_run() to run the maskpos binary under test (MP_TEST_BIN, set by the Makefile) likewise; mp_test_tmpdir() for a fresh scratch directory
 * (removed when its test passes, kept and named when it fails);
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
#include <ftw.h>
#include <sys/stat.h>
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

/* ---------------------------------------------------------------- scratch folders
 * mp_test_tmpdir() makes a fresh $TMPDIR/maskpos-test-XXXXXX (TMPDIR unset: /tmp) that belongs to
 * the test running (or, made outside any test, as the fixtures of a group setup are, to the
 * program). A test's folders are removed when it ends passed or skipped; when it fails (an
 * assertion, a signal) they are kept and their paths printed. The program's own folders go at
 * exit when no test failed, else they are kept and printed too. Every test program has this by
 * including this header: cmocka_unit_test(f) runs f between the two hooks below (f gets its state
 * as before: the tests use none). issue 40: a suite left ~450 folders (up to 406 MB each) behind. */
typedef struct MpTestCase {
    CMUnitTestFunction f;
} MpTestCase;

typedef struct MpTestScratch {
    char **dirs;      /* folders made and not yet removed or kept */
    int n, cap;
    int mark;         /* dirs[mark..n) belong to the running test; -1 outside a test */
    int finished;     /* the running test's function returned */
    int skipping;     /* it called skip() */
    int failed;       /* a test of this program failed */
    pid_t pid;        /* the process that made them (a forked child never removes them) */
} MpTestScratch;

static MpTestScratch mp_test_scratch = {.mark = -1};

static int mp_test_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) __attribute__((unused));
static int mp_test_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)ftw;
    if (flag == FTW_D) chmod(p, 0700); /* (pre-order pass: a folder a test made read-only) */
    else if (flag == FTW_DP) rmdir(p);
    else unlink(p);
    return 0;
}

/* Removes dir whole (a read-only folder inside too; other file systems mounted inside are left);
 * 0 when nothing is left. */
static int mp_test_rm_tree(const char *dir) __attribute__((unused));
static int mp_test_rm_tree(const char *dir) {
    nftw(dir, mp_test_rm_one, 16, FTW_PHYS | FTW_MOUNT);
    nftw(dir, mp_test_rm_one, 16, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
    struct stat st;
    return lstat(dir, &st) == 0 ? -1 : 0;
}

/* Removes (keep 0) or keeps and prints (keep 1) the folders dirs[from..n), and forgets them. */
static void mp_test_scratch_end(int from, int keep, const char *whose) __attribute__((unused));
static void mp_test_scratch_end(int from, int keep, const char *whose) {
    MpTestScratch *s = &mp_test_scratch;
    for (int i = from; i < s->n; i++) {
        if (keep) fprintf(stderr, "kept for a look (%s failed): %s\n", whose, s->dirs[i]);
        else if (mp_test_rm_tree(s->dirs[i]) != 0) fprintf(stderr, "could not remove all of %s\n", s->dirs[i]);
        free(s->dirs[i]);
    }
    s->n = from;
}

static void mp_test_scratch_atexit(void) {
    if (getpid() == mp_test_scratch.pid) mp_test_scratch_end(0, mp_test_scratch.failed, "a test of this program");
}

static int mp_test_pre(void **state) __attribute__((unused));
static int mp_test_pre(void **state) {
    (void)state;
    mp_test_scratch.mark = mp_test_scratch.n;
    mp_test_scratch.finished = mp_test_scratch.skipping = 0;
    return 0;
}

static void mp_test_body(void **state) __attribute__((unused));
static void mp_test_body(void **state) {
    ((const MpTestCase *)*state)->f(state);
    mp_test_scratch.finished = 1;
}

static int mp_test_post(void **state) __attribute__((unused));
static int mp_test_post(void **state) {
    (void)state;
    const int failed = !mp_test_scratch.finished && !mp_test_scratch.skipping;
    mp_test_scratch.failed |= failed;
    mp_test_scratch_end(mp_test_scratch.mark, failed, "this test");
    mp_test_scratch.mark = -1;
    return 0;
}

#undef cmocka_unit_test
#define cmocka_unit_test(fn) {#fn, mp_test_body, mp_test_pre, mp_test_post, (void *)&(MpTestCase){fn}}
#undef skip
#define skip() (mp_test_scratch.skipping = 1, _skip(__FILE__, __LINE__))

/* The folder scratch files go under: $TMPDIR, else /tmp. */
static const char *mp_test_tmp_root(void) __attribute__((unused));
static const char *mp_test_tmp_root(void) {
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

/* A fresh $TMPDIR/maskpos-test-XXXXXX, the test's (shared 0) or the program's (1); a static buffer
 * per call slot. */
static const char *mp_test_tmpdir_of(int shared) __attribute__((unused));
static const char *mp_test_tmpdir_of(int shared) {
    static char slots[8][512];
    static int next = 0;
    MpTestScratch *s = &mp_test_scratch;
    char *d = slots[next++ % 8];
    snprintf(d, 512, "%s/maskpos-test-XXXXXX", mp_test_tmp_root());
    if (!mkdtemp(d)) fail_msg("mkdtemp %s failed", d);
    if (s->pid != getpid()) { /* the first folder of this process */
        s->pid = getpid();
        s->n = 0;
        atexit(mp_test_scratch_atexit);
    }
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->dirs = realloc(s->dirs, (size_t)s->cap * sizeof *s->dirs);
        if (!s->dirs) fail_msg("out of memory");
    }
    int at = s->n++;
    if (shared && s->mark >= 0) { /* below the running test's own: it outlives the test */
        memmove(s->dirs + s->mark + 1, s->dirs + s->mark, (size_t)(s->n - 1 - s->mark) * sizeof *s->dirs);
        at = s->mark++;
    }
    s->dirs[at] = strdup(d);
    return d;
}

/* A fresh folder for the running test (see above: removed when it passes, kept when it fails). */
static const char *mp_test_tmpdir(void) __attribute__((unused));
static const char *mp_test_tmpdir(void) { return mp_test_tmpdir_of(0); }

/* A fresh folder for fixtures several tests share (made once by the first that needs them, and
 * cached): the program's, removed at exit when no test failed. */
static const char *mp_test_tmpdir_shared(void) __attribute__((unused));
static const char *mp_test_tmpdir_shared(void) { return mp_test_tmpdir_of(1); }

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
