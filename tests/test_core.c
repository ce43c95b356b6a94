/* test_core.c — core module: Philox known answers, normal moments, .npy round trips and malformed
 * files, atomic writes, strict flag parsing, overflow-checked sizes.
 * Run: make test (or build/tests/test_core). */
#include "testutil.h"

#include <pthread.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "core/err.h"
#include "core/files.h"
#include "core/json.h"
#include "core/npy.h"
#include "core/rng.h"
#include "core/util.h"

/* Random123's published kat_vectors for philox4x32-10 (independent of our code). */
static void test_philox_known_answers(void **state) {
    (void)state;
    static const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                       {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                       {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    static const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
    static const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                        {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                        {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
    for (int k = 0; k < 3; k++) {
        uint32_t out[4];
        mp_philox4x32_10(out, ctr[k], key[k]);
        for (int i = 0; i < 4; i++) assert_int_equal(out[i], want[k][i]);
    }
}

static void test_normal_moments_and_streams(void **state) {
    (void)state;
    enum { N = 400000 };
    double *x = malloc(N * sizeof *x);
    MpRng r;
    mp_rng_init(&r, 42, 7);
    mp_rng_normal_fill(&r, x, N);
    double m = 0, v = 0, k4 = 0;
    for (int i = 0; i < N; i++) m += x[i];
    m /= N;
    for (int i = 0; i < N; i++) {
        v += (x[i] - m) * (x[i] - m);
        k4 += pow(x[i] - m, 4);
    }
    v /= N;
    k4 /= N;
    /* standard errors: mean 1/sqrt(N)=0.0016, var sqrt(2/N)=0.0022, 4th moment sqrt(96/N)=0.015 */
    assert_true(fabs(m) < 0.008);
    assert_true(fabs(v - 1) < 0.011);
    assert_true(fabs(k4 - 3) < 0.08);
    /* same (seed, stream) → same numbers; another stream → different numbers */
    MpRng a, b, c;
    mp_rng_init(&a, 42, 7);
    mp_rng_init(&b, 42, 7);
    mp_rng_init(&c, 42, 8);
    double xa[5], xb[5], xc[5];
    mp_rng_normal_fill(&a, xa, 5);
    mp_rng_normal_fill(&b, xb, 5);
    mp_rng_normal_fill(&c, xc, 5);
    assert_memory_equal(xa, xb, sizeof xa);
    assert_memory_not_equal(xa, xc, sizeof xa);
    free(x);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The ziggurat against the normal distribution itself: Kolmogorov–Smirnov distance to
 * Φ(x) = erfc(−x/√2)/2 below the 1% critical value 1.63/√n, and the share beyond the ziggurat's
 * tail start R = 3.4426 (drawn by its separate tail sampler) within 5 standard deviations of
 * 2(1 − Φ(R)). */
static void test_normal_distribution(void **state) {
    (void)state;
    enum { N = 200000 };
    double *x = malloc(N * sizeof *x);
    MpRng r;
    mp_rng_init(&r, 7, 3);
    mp_rng_normal_fill(&r, x, N);
    int tail = 0;
    for (int i = 0; i < N; i++) tail += fabs(x[i]) > 3.442619855899;
    qsort(x, N, sizeof *x, cmp_double);
    double ks = 0;
    for (int i = 0; i < N; i++) {
        double f = 0.5 * erfc(-x[i] / sqrt(2.0));
        double d1 = fabs(f - (double)i / N), d2 = fabs(f - (double)(i + 1) / N);
        if (d1 > ks) ks = d1;
        if (d2 > ks) ks = d2;
    }
    double p_tail = erfc(3.442619855899 / sqrt(2.0)), want = p_tail * N, sd = sqrt(N * p_tail * (1 - p_tail));
    print_message("KS distance %.5f (1%% critical %.5f); tail draws %d (expected %.1f +- %.1f)\n", ks,
                  1.63 / sqrt((double)N), tail, want, sd);
    assert_true(ks < 1.63 / sqrt((double)N));
    assert_true(fabs(tail - want) < 5 * sd);
    free(x);
}

static void test_npy_roundtrip(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/a.npy", d);
    double data[6] = {1, 2.5, NAN, -4, 5e-300, 6};
    int64_t shp[2] = {2, 3};
    MpErr e;
    assert_int_equal(mp_npy_write(path, MP_DT_F64, data, 2, shp, &e), MP_OK);
    MpNpy a;
    assert_int_equal(mp_npy_read(path, &a, &e), MP_OK);
    assert_int_equal(a.dtype, MP_DT_F64);
    assert_int_equal(a.ndim, 2);
    assert_int_equal(a.shape[0], 2);
    assert_int_equal(a.shape[1], 3);
    assert_memory_equal(a.data, data, sizeof data);
    mp_npy_free(&a);
    /* 1-D and 3-D headers, float32 */
    float f[4] = {1, 2, 3, 4};
    int64_t s1[1] = {4}, s3[3] = {1, 2, 2};
    assert_int_equal(mp_npy_write(path, MP_DT_F32, f, 1, s1, &e), MP_OK);
    assert_int_equal(mp_npy_read(path, &a, &e), MP_OK);
    assert_int_equal(a.ndim, 1);
    assert_int_equal(a.shape[0], 4);
    mp_npy_free(&a);
    assert_int_equal(mp_npy_write(path, MP_DT_F32, f, 3, s3, &e), MP_OK);
    assert_int_equal(mp_npy_read(path, &a, &e), MP_OK);
    assert_int_equal(a.ndim, 3);
    double *dd;
    assert_int_equal(mp_npy_to_f64(&a, &dd, &e), MP_OK);
    assert_true(dd[3] == 4.0);
    free(dd);
    mp_npy_free(&a);
    /* the header is 64-byte aligned and ends in a newline, as numpy writes it */
    FILE *fp = fopen(path, "rb");
    unsigned char hdr[10];
    assert_int_equal(fread(hdr, 1, 10, fp), 10);
    fclose(fp);
    size_t hlen = hdr[8] | (hdr[9] << 8);
    assert_int_equal((10 + hlen) % 64, 0);
}

/* Builds a version-1 .npy image from a header dict string, followed by ndata zero bytes. */
static size_t npy_image(unsigned char *buf, size_t cap, const char *dict, size_t ndata) {
    size_t hlen = strlen(dict);
    assert_true(10 + hlen + ndata <= cap);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, hlen);
    memset(buf + 10 + hlen, 0, ndata);
    return 10 + hlen + ndata;
}

static void test_npy_malformed(void **state) {
    (void)state;
    MpNpy a;
    MpErr e;
    unsigned char buf[512];
    size_t n = npy_image(buf, sizeof buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", 16);
    assert_int_equal(mp_npy_parse(buf, n, &a, &e), MP_OK);
    assert_int_equal(a.count, 2);
    mp_npy_free(&a);
    /* truncated data, truncated header, bad magic, empty */
    assert_int_equal(mp_npy_parse(buf, n - 1, &a, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "truncated"));
    assert_int_equal(mp_npy_parse(buf, 20, &a, &e), MP_ERR);
    assert_int_equal(mp_npy_parse((const unsigned char *)"NUMPY", 5, &a, &e), MP_ERR);
    assert_int_equal(mp_npy_parse(buf, 0, &a, &e), MP_ERR);
    /* unsupported dtype, fortran order, huge shape (overflow), garbage shape, bad version */
    const char *bad[] = {
        "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }\n",
        "{'descr': '<f8', 'fortran_order': True, 'shape': (2,), }\n",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999, 99999999), }\n",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2,x), }\n",
        "{'descr': '<f8', 'fortran_order': False}\n",
        "{'descr': <f8, 'fortran_order': False, 'shape': (2,), }\n",
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        n = npy_image(buf, sizeof buf, bad[k], 16);
        assert_int_equal(mp_npy_parse(buf, n, &a, &e), MP_ERR);
        assert_true(strlen(e.msg) > 0);
        assert_null(a.data);
    }
    n = npy_image(buf, sizeof buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }\n", 16);
    buf[6] = 9; /* version 9 */
    assert_int_equal(mp_npy_parse(buf, n, &a, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "version"));
    /* a missing file is named in the message */
    assert_int_equal(mp_npy_read("/nonexistent/x.npy", &a, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "/nonexistent/x.npy"));
}

static void test_atomic_file(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256], tmp[sizeof(((MpAtomicFile *)0)->tmp)];
    snprintf(path, sizeof path, "%s/out.bin", d);
    MpAtomicFile af;
    MpErr e;
    assert_int_equal(mp_atomic_open(&af, path, &e), MP_OK);
    fputs("partial", af.f);
    snprintf(tmp, sizeof tmp, "%s", af.tmp);
    assert_true(mp_file_exists(tmp));
    assert_false(mp_file_exists(path));
    mp_atomic_abort(&af);
    assert_false(mp_file_exists(tmp)); /* nothing left behind */
    assert_false(mp_file_exists(path));
    assert_int_equal(mp_file_write_atomic(path, "abc", 3, &e), MP_OK);
    assert_true(mp_file_exists(path));
    /* an unwritable location fails with the path in the message */
    assert_int_equal(mp_file_write_atomic("/proc/nope/x", "abc", 3, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "/proc/nope/x"));
}

/* Class: a FIFO, or a directory, where a loader expects a file. Opening a FIFO for reading used to
 * block for ever (no writer); every loader goes through mp_input_open / mp_file_read_all. */
static void test_input_refuses_non_regular(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char fifo[256], empty[256];
    snprintf(fifo, sizeof fifo, "%s/pipe.npy", d);
    snprintf(empty, sizeof empty, "%s/empty.json", d);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    MpErr e;
    const double t0 = mp_time_now();
    assert_null(mp_input_open(fifo, NULL, &e));
    assert_non_null(strstr(e.msg, "pipe.npy: not a regular file"));
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(mp_file_read_all(fifo, 100, "x", &data, &len, &e), MP_ERR);
    MpNpy a;
    assert_int_equal(mp_npy_read(fifo, &a, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "pipe.npy"));
    assert_null(mp_json_read(fifo, &e));
    assert_true(mp_time_now() - t0 < 5); /* none of them waited for a writer */
    assert_null(mp_input_open(d, NULL, &e));
    assert_non_null(strstr(e.msg, "is a directory"));
    /* an empty JSON file is named as such (was "invalid JSON at line -1") */
    mp_test_write_file(empty, "", 0);
    assert_null(mp_json_read(empty, &e));
    assert_non_null(strstr(e.msg, "empty.json: empty"));
    int64_t size = -1;
    FILE *f = mp_input_open(empty, &size, &e);
    assert_non_null(f);
    assert_int_equal(size, 0);
    fclose(f);
}

/* Class: a second run into an output folder. One run per folder: new, resumed or replaced. */
static void test_outdir_claim(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[256], p[512];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/out/sub", d);
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e), MP_OK); /* created */
    snprintf(p, sizeof p, "%s/%s", dir, MP_OUTDIR_MARKER);
    assert_true(mp_file_exists(p));
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e), MP_OK); /* empty: still free */
    snprintf(p, sizeof p, "%s/scores_heads.npy", dir); /* written by the run: listed in the marker */
    assert_int_equal(mp_file_write_atomic(p, "x", 1, &e), MP_OK);
    snprintf(p, sizeof p, "%s/deep/er", dir);
    assert_int_equal(mp_mkdir_p(p, &e), MP_OK);
    snprintf(p, sizeof p, "%s/deep/er/x.npy", dir);
    assert_int_equal(mp_file_write_atomic(p, "x", 1, &e), MP_OK);
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "already holds the outputs of a 'maskpos probe' run"));
    assert_non_null(strstr(e.msg, dir));
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_RESUME, &e), MP_OK);
    assert_int_equal(mp_outdir_claim(dir, "gram", MP_OUTDIR_RESUME, &e), MP_ERR);
    assert_int_equal(mp_outdir_claim(dir, "gram", MP_OUTDIR_FORCE, &e), MP_OK);
    snprintf(p, sizeof p, "%s/scores_heads.npy", dir);
    assert_false(mp_file_exists(p)); /* the earlier run's files are gone, subfolders too */
    snprintf(p, sizeof p, "%s/deep", dir);
    assert_false(mp_file_exists(p));
    mp_outdir_release(dir);
    mp_outdir_release(dir);
    mp_outdir_release(dir);
    /* a folder with someone else's files is never used, nor cleared */
    snprintf(dir, sizeof dir, "%s/foreign", d);
    assert_int_equal(mp_mkdir_p(dir, &e), MP_OK);
    snprintf(p, sizeof p, "%s/notes.txt", dir);
    mp_test_write_file(p, "mine", 4);
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_FORCE, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "holds no maskpos run"));
    assert_int_equal(mp_outdir_clear(dir, &e), MP_ERR);
    assert_true(mp_file_exists(p));
    /* single output files */
    assert_int_equal(mp_outfile_claim(p, 0, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "--force"));
    assert_int_equal(mp_outfile_claim(p, 1, &e), MP_OK);
    assert_true(mp_file_exists(p)); /* claimed, not removed: the atomic write replaces it */
    assert_int_equal(mp_outfile_claim(dir, 1, &e), MP_ERR);
    snprintf(p, sizeof p, "%s/new.npy", dir);
    assert_int_equal(mp_outfile_claim(p, 0, &e), MP_OK);
    assert_false(mp_file_exists(p));
}

/* A run of cmd in dir killed while it wrote name: a child process claims dir (continuing it), opens
 * the atomic write and dies without a word. tmp gets the temporary's path. */
static void killed_run_temp(const char *dir, const char *cmd, const char *name, char *tmp, size_t cap) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        MpErr ce;
        MpAtomicFile af;
        if (mp_outdir_claim(dir, cmd, MP_OUTDIR_CONTINUE, &ce) != MP_OK || mp_atomic_open(&af, p, &ce) != MP_OK) _exit(1);
        fputs("half", af.f);
        fflush(af.f);
        if (write(fd[1], af.tmp, strlen(af.tmp) + 1) < 0) _exit(1);
        _exit(0); /* (no abort, no release: killed) */
    }
    close(fd[1]);
    ssize_t n = read(fd[0], tmp, cap - 1);
    close(fd[0]);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n > 0);
    tmp[n] = '\0';
}

/* Issue 31: --force removes only what a run of ours wrote (the marker lists it); a file
 * someone else put into the folder refuses the whole clearing, nothing removed (before: every
 * file but the marker went, notes.txt included). A killed run's temporaries go when the run is
 * continued; reproduce's CONTINUE refuses a foreign folder (before: RESUME took it over). */
static void test_outdir_force_only_ours(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[256], p[512], q[512];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/own", d);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_NEW, &e), MP_OK);
    snprintf(p, sizeof p, "%s/meta.json", dir);
    assert_int_equal(mp_file_write_atomic(p, "{}", 2, &e), MP_OK);
    mp_outdir_release(dir);
    snprintf(q, sizeof q, "%s/notes.txt", dir);
    mp_test_write_file(q, "mine", 4);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_FORCE, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "notes.txt"));
    assert_true(mp_file_exists(q) && mp_file_exists(p)); /* nothing removed */
    assert_int_equal(mp_outdir_clear(dir, &e), MP_ERR);
    assert_true(mp_file_exists(q) && mp_file_exists(p));
    remove(q);
    /* a killed run's temporary (NAME.tmp.PID, listed in the marker before it was made) is removed
     * by the run that continues the folder */
    killed_run_temp(dir, "theory", "scores.npy", q, sizeof q);
    assert_true(mp_file_exists(q));
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_CONTINUE, &e), MP_OK);
    assert_false(mp_file_exists(q));
    assert_true(mp_file_exists(p));
    mp_outdir_release(dir);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_FORCE, &e), MP_OK);
    assert_false(mp_file_exists(p));
    mp_outdir_release(dir);
    /* CONTINUE (reproduce) never takes over a folder without a marker; RESUME (an explicit
     * --resume) still may */
    snprintf(dir, sizeof dir, "%s/theirs", d);
    assert_int_equal(mp_mkdir_p(dir, &e), MP_OK);
    snprintf(q, sizeof q, "%s/notes.txt", dir);
    mp_test_write_file(q, "mine", 4);
    assert_int_equal(mp_outdir_claim(dir, "reproduce", MP_OUTDIR_CONTINUE, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "holds no maskpos run"));
    snprintf(p, sizeof p, "%s/%s", dir, MP_OUTDIR_MARKER);
    assert_false(mp_file_exists(p)); /* the refused claim left no marker */
}

/* Issue 31 class 5: a claimed folder is locked for the whole run; a second process is refused at
 * once, even while the folder holds only the first one's marker (before: it counted as free). */
static void test_outdir_lock(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[256];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/locked", d);
    int go[2], done[2];
    assert_int_equal(pipe(go), 0);
    assert_int_equal(pipe(done), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) { /* the first run: claims, says so, waits to be told to end */
        char c = mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e) == MP_OK ? 'y' : 'n';
        if (write(go[1], &c, 1) != 1 || read(done[0], &c, 1) != 1) _exit(1);
        _exit(0);
    }
    char c = 0;
    assert_int_equal(read(go[0], &c, 1), 1);
    assert_int_equal(c, 'y');
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "another maskpos run is writing into this folder"));
    assert_non_null(strstr(e.msg, dir));
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_FORCE, &e), MP_ERR);
    assert_int_equal(write(done[1], "x", 1), 1);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e), MP_OK); /* its lock went with it */
    mp_outdir_release(dir);
    close(go[0]), close(go[1]), close(done[0]), close(done[1]);
}

/* Issue 40 class 1: temporaries are known by the marker of the run that made them, never by their
 * name alone. A folder whose entries are all named like temporaries (photos.old.2023/,
 * draft.tmp.1) counted as empty: a claim deleted them (folders recursively) and went on; --force
 * deleted a user's notes.tmp.5 in a folder of ours. */
static void test_outdir_temps_by_marker(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[256], a[512], b[512], q[512];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/photos", d);
    snprintf(a, sizeof a, "%s/photos.old.2023/a.jpg", dir);
    snprintf(b, sizeof b, "%s/draft.tmp.1", dir);
    snprintf(q, sizeof q, "%s/photos.old.2023", dir);
    assert_int_equal(mp_mkdir_p(q, &e), MP_OK);
    mp_test_write_file(a, "jpg", 3);
    mp_test_write_file(b, "draft", 5);
    const MpOutdirMode modes[3] = {MP_OUTDIR_NEW, MP_OUTDIR_FORCE, MP_OUTDIR_CONTINUE};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(mp_outdir_claim(dir, "theory", modes[k], &e), MP_ERR);
        assert_non_null(strstr(e.msg, "not empty and holds no maskpos run"));
        assert_true(mp_file_exists(a) && mp_file_exists(b));
    }
    /* an explicit --resume takes an unmarked folder at its word: nothing in it is removed */
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_RESUME, &e), MP_OK);
    mp_outdir_release(dir);
    assert_true(mp_file_exists(a) && mp_file_exists(b));
    /* a folder of ours with a file of yours named like a temporary: --force refuses, nothing goes;
     * a run that continues the folder leaves it */
    snprintf(dir, sizeof dir, "%s/ours", d);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_NEW, &e), MP_OK);
    snprintf(a, sizeof a, "%s/meta.json", dir);
    assert_int_equal(mp_file_write_atomic(a, "{}", 2, &e), MP_OK);
    mp_outdir_release(dir);
    snprintf(b, sizeof b, "%s/notes.tmp.5", dir);
    mp_test_write_file(b, "mine", 4);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_FORCE, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "notes.tmp.5"));
    assert_true(mp_file_exists(a) && mp_file_exists(b));
    assert_int_equal(mp_outdir_clear(dir, &e), MP_ERR);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_CONTINUE, &e), MP_OK);
    mp_outdir_release(dir);
    assert_true(mp_file_exists(a) && mp_file_exists(b));
    remove(b);
    /* a temporary the marker lists (a killed run's) is ours: a folder holding only that and the
     * marker is empty, and the next run removes it */
    snprintf(dir, sizeof dir, "%s/killed", d);
    assert_int_equal(mp_mkdir_p(dir, &e), MP_OK);
    killed_run_temp(dir, "simulate", "scores.npy", q, sizeof q);
    assert_true(mp_file_exists(q));
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_NEW, &e), MP_OK);
    assert_false(mp_file_exists(q));
    mp_outdir_release(dir);
}

/* Issue 40 class 2: --out through a symbolic link (or link/) is the folder it names. --force
 * removed nothing there (nftw does not follow the link), the old run's files stayed beside the
 * new ones, the marker forgot them, and the next --force was refused. */
static void test_outdir_through_symlink(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char real[256], link[256], link_slash[256], p[512], q[512];
    MpErr e;
    snprintf(real, sizeof real, "%s/real", d);
    snprintf(link, sizeof link, "%s/link", d);
    snprintf(link_slash, sizeof link_slash, "%s/link/", d);
    assert_int_equal(mp_outdir_claim(real, "probe", MP_OUTDIR_NEW, &e), MP_OK);
    snprintf(p, sizeof p, "%s/scores_heads.npy", real);
    assert_int_equal(mp_file_write_atomic(p, "x", 1, &e), MP_OK);
    mp_outdir_release(real);
    assert_int_equal(symlink("real", link), 0);
    const char *via[2] = {link, link_slash};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(mp_outdir_claim(via[k], "probe", MP_OUTDIR_FORCE, &e), MP_OK);
        assert_false(mp_file_exists(p)); /* the old run's file went */
        snprintf(q, sizeof q, "%s/scores.npy", via[k]); /* written through the link: listed */
        assert_int_equal(mp_file_write_atomic(q, "y", 1, &e), MP_OK);
        /* the same folder by its own name, in the same thread: the same claim */
        assert_int_equal(mp_outdir_claim(real, "probe", MP_OUTDIR_RESUME, &e), MP_OK);
        mp_outdir_release(real);
        mp_outdir_release(via[k]);
        snprintf(p, sizeof p, "%s/scores.npy", real);
        assert_true(mp_file_exists(p));
    }
    assert_int_equal(mp_outdir_claim(real, "probe", MP_OUTDIR_FORCE, &e), MP_OK); /* the marker knew it */
    assert_false(mp_file_exists(p));
    mp_outdir_release(real);
}

/* A folder's run key (mp_outdir_key): a run that continues a folder holding another run's outputs
 * is refused, nothing removed; an empty or replaced folder takes any key; a marker without one
 * (older maskpos) is taken at its word. */
static void test_outdir_key(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[256], p[512];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/run", d);
    snprintf(p, sizeof p, "%s/log.csv", dir);
    assert_int_equal(mp_outdir_claim(dir, "train", MP_OUTDIR_NEW, &e), MP_OK);
    assert_int_equal(mp_outdir_key(dir, "aaaa", &e), MP_OK);
    assert_int_equal(mp_file_write_atomic(p, "1\n", 2, &e), MP_OK);
    mp_outdir_release(dir);
    assert_int_equal(mp_outdir_claim(dir, "train", MP_OUTDIR_RESUME, &e), MP_OK);
    assert_int_equal(mp_outdir_key(dir, "bbbb", &e), MP_ERR);
    assert_non_null(strstr(e.msg, "another 'train' run (its key aaaa, this run's bbbb)"));
    assert_int_equal(mp_outdir_key(dir, "aaaa", &e), MP_OK); /* the same run: continued */
    mp_outdir_release(dir);
    assert_true(mp_file_exists(p));
    assert_int_equal(mp_outdir_claim(dir, "train", MP_OUTDIR_FORCE, &e), MP_OK); /* replaced: any key */
    assert_int_equal(mp_outdir_key(dir, "bbbb", &e), MP_OK);
    mp_outdir_release(dir);
    char m[512];
    snprintf(m, sizeof m, "%s/%s", dir, MP_OUTDIR_MARKER);
    mp_test_write_file(p, "1\n", 2);
    mp_test_write_file(m, "train\nlog.csv\n", 14); /* an older marker: no key */
    assert_int_equal(mp_outdir_claim(dir, "train", MP_OUTDIR_RESUME, &e), MP_OK);
    assert_int_equal(mp_outdir_key(dir, "cccc", &e), MP_OK);
    mp_outdir_release(dir);
}

/* A claim by thread 2 while thread 1 holds the folder (two Python threads saving into one folder). */
typedef struct ClaimArg {
    const char *dir;
    int rc;
    char msg[1024];
} ClaimArg;

static void *claim_thread(void *arg) {
    ClaimArg *c = arg;
    MpErr e;
    c->rc = mp_outdir_claim(c->dir, "probe", MP_OUTDIR_NEW, &e);
    snprintf(c->msg, sizeof c->msg, "%s", c->rc == MP_OK ? "" : e.msg);
    if (c->rc == MP_OK) mp_outdir_release(c->dir);
    return NULL;
}

/* One run per folder, also between the threads of one process: the second thread was given the
 * first one's claim (both wrote into the folder). */
static void test_outdir_threads(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char dir[256];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/shared", d);
    assert_int_equal(mp_outdir_claim(dir, "probe", MP_OUTDIR_NEW, &e), MP_OK);
    ClaimArg c = {.dir = dir};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, claim_thread, &c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(c.rc, MP_ERR);
    assert_non_null(strstr(c.msg, "another maskpos run is writing into this folder"));
    mp_outdir_release(dir); /* (the claiming thread ends it: now another thread may claim it) */
    assert_int_equal(pthread_create(&t, NULL, claim_thread, &c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(c.rc, MP_OK);
}

/* Issue 40 class 7: only a regular file is ever replaced by an output file, --force or not:
 * `view ... -o /dev/full --force` renamed an HTML file over the machine's /dev/full. Tried on a
 * FIFO, a symbolic link to /dev/null and (as root) a device node made here with the numbers of
 * /dev/null: even a broken claim could only ever replace that node, in this test's folder. */
static void test_outfile_only_regular(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char fifo[256], link[256], dev[256], file[256];
    MpErr e;
    snprintf(fifo, sizeof fifo, "%s/fifo.html", d);
    snprintf(link, sizeof link, "%s/null.html", d);
    snprintf(dev, sizeof dev, "%s/dev.html", d);
    snprintf(file, sizeof file, "%s/file.html", d);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(symlink("/dev/null", link), 0);
    const int root = geteuid() == 0 && mknod(dev, S_IFCHR | 0600, makedev(1, 3)) == 0;
    if (!root) print_message("not root: the device-node case is left out (the FIFO and the link are tried)\n");
    const char *paths[3] = {fifo, link, dev};
    const mode_t kinds[3] = {S_IFIFO, S_IFLNK, S_IFCHR};
    for (int k = 0; k < 2 + root; k++) {
        for (int force = 0; force < 2; force++) {
            assert_int_equal(mp_outfile_claim(paths[k], force, &e), MP_ERR);
            assert_non_null(strstr(e.msg, "not a regular file"));
        }
        assert_int_equal(mp_file_write_atomic(paths[k], "<html>", 6, &e), MP_ERR); /* the last guard */
        assert_non_null(strstr(e.msg, "not replaced"));
        struct stat st;
        assert_int_equal(lstat(paths[k], &st), 0);
        assert_int_equal(st.st_mode & S_IFMT, kinds[k]);
    }
    mp_test_write_file(file, "old", 3); /* a regular file: replaced with force */
    assert_int_equal(mp_outfile_claim(file, 0, &e), MP_ERR);
    assert_int_equal(mp_outfile_claim(file, 1, &e), MP_OK);
    assert_int_equal(mp_file_write_atomic(file, "new", 3, &e), MP_OK);
    /* a folder of ours: a listed file that became a FIFO refuses --force, nothing removed */
    char dir[256], p[512], f2[512];
    snprintf(dir, sizeof dir, "%s/run", d);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_NEW, &e), MP_OK);
    snprintf(p, sizeof p, "%s/scores.npy", dir);
    snprintf(f2, sizeof f2, "%s/meta.json", dir);
    assert_int_equal(mp_file_write_atomic(p, "x", 1, &e), MP_OK);
    assert_int_equal(mp_file_write_atomic(f2, "{}", 2, &e), MP_OK);
    mp_outdir_release(dir);
    assert_int_equal(remove(p), 0);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(mp_outdir_claim(dir, "theory", MP_OUTDIR_FORCE, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "scores.npy"));
    assert_true(mp_file_exists(f2));
}

/* Atomic writes: the data is fsynced before the rename and the folder after it (a power loss
 * leaves the old file or the new one). Seen from outside, with strace, on a real command. */
static void test_atomic_write_fsyncs(void **state) {
    (void)state;
    char out[65536];
    if (mp_test_shell(NULL, 0, "command -v strace") != 0) skip();
    const char *d = mp_test_tmpdir();
    int rc = mp_test_shell(out, sizeof out, "ASAN_OPTIONS=detect_leaks=0 strace -f -e trace=fsync,rename -o %s/trace %s theory --out %s/t > /dev/null && "
                           "cat %s/trace", /* (LeakSanitizer cannot run under ptrace) */
                           d, MP_TEST_BIN, d, d);
    assert_int_equal(rc, 0);
    /* every rename of a .tmp file into place: the line before is an fsync (the file), the line
     * after is an fsync (its folder) */
    char *lines[4096];
    int n = 0, renames = 0;
    for (char *save = NULL, *l = strtok_r(out, "\n", &save); l && n < 4096; l = strtok_r(NULL, "\n", &save)) lines[n++] = l;
    for (int i = 0; i < n; i++) {
        if (!strstr(lines[i], "rename(") || !strstr(lines[i], ".tmp.")) continue;
        renames++;
        if (i == 0 || i + 1 >= n || !strstr(lines[i - 1], "fsync(") || !strstr(lines[i + 1], "fsync("))
            fail_msg("rename without fsync before and after: %s", lines[i]);
    }
    assert_true(renames >= 2); /* layer2_scores.npy, meta.json (and the run marker) */
}

static void test_parsers_and_sizes(void **state) {
    (void)state;
    double v;
    int64_t i;
    assert_int_equal(mp_parse_double("0.25", &v), MP_OK);
    assert_true(v == 0.25);
    assert_int_equal(mp_parse_double("0.25x", &v), MP_ERR);
    assert_int_equal(mp_parse_double("", &v), MP_ERR);
    assert_int_equal(mp_parse_double("nan", &v), MP_ERR);
    assert_int_equal(mp_parse_double("1e999", &v), MP_ERR);
    assert_int_equal(mp_parse_i64("12", 0, 100, &i), MP_OK);
    assert_int_equal(mp_parse_i64("101", 0, 100, &i), MP_ERR);
    assert_int_equal(mp_parse_i64("1.5", 0, 100, &i), MP_ERR);
    double list[8];
    assert_int_equal(mp_parse_double_list("0,0.2,0.4", list, 8), 3);
    assert_true(list[2] == 0.4);
    assert_int_equal(mp_parse_double_list("0,,1", list, 8), -1);
    assert_int_equal(mp_parse_double_list("0,1,", list, 8), -1);
    unsigned char mask[11];
    assert_int_equal(mp_parse_range_list("1-3,7", 10, mask), 4);
    assert_true(mask[1] && mask[3] && mask[7] && !mask[4]);
    assert_int_equal(mp_parse_range_list("0-3", 10, mask), -1);
    assert_int_equal(mp_parse_range_list("4-2", 10, mask), -1);
    assert_int_equal(mp_parse_range_list("1-11", 10, mask), -1);
    size_t s;
    assert_int_equal(mp_size_mul(SIZE_MAX / 2, 3, &s), MP_ERR);
    assert_int_equal(mp_size_mul(1000, 1000, &s), MP_OK);
    assert_int_equal(s, 1000000);
    assert_int_equal(mp_size_add(SIZE_MAX, 1, &s), MP_ERR);
}

/* mp_hash64: every single-bit flip of a 100-byte buffer, at every length 0..100, gives another
 * value; so does flipping two sign bits one lane apart (a plain xor-multiply round cancels them). */
static void test_hash64_bits(void **state) {
    (void)state;
    unsigned char b[100];
    for (int i = 0; i < 100; i++) b[i] = (unsigned char)(i * 37 + 11);
    for (size_t n = 0; n <= 100; n += n < 40 ? 1 : 20) {
        const uint64_t h = mp_hash64(b, n, MP_FNV_INIT);
        if (n) assert_true(h != mp_hash64(b, n - 1, MP_FNV_INIT));
        for (size_t i = 0; i < n; i++)
            for (int k = 0; k < 8; k++) {
                b[i] ^= (unsigned char)(1u << k);
                if (mp_hash64(b, n, MP_FNV_INIT) == h) fail_msg("bit %d of byte %zu of %zu: same hash", k, i, n);
                b[i] ^= (unsigned char)(1u << k);
            }
    }
    const uint64_t h = mp_hash64(b, 96, MP_FNV_INIT);
    b[7] ^= 0x80;
    b[39] ^= 0x80; /* the same lane, the next round */
    assert_true(mp_hash64(b, 96, MP_FNV_INIT) != h);
    assert_true(mp_hash64(b, 96, 1) != mp_hash64(b, 96, 2)); /* the seed chains */
}

/* mp_grow_or_die: room for element n, doubling from 16, the elements kept (the report's and
 * reproduce's lists grow with it instead of dropping entries past a fixed size). */
static void test_grow_or_die(void **state) {
    (void)state;
    int *a = NULL, cap = 0;
    for (int n = 0; n < 100; n++) {
        a = mp_grow_or_die(a, &cap, n, sizeof *a, "test");
        assert_true(n < cap);
        a[n] = 3 * n + 1;
    }
    assert_int_equal(cap, 128); /* 16, 32, 64, 128 */
    for (int n = 0; n < 100; n++) assert_int_equal(a[n], 3 * n + 1);
    int *same = mp_grow_or_die(a, &cap, 100, sizeof *a, "test");
    assert_ptr_equal(same, a); /* room left: unchanged */
    free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers), cmocka_unit_test(test_normal_moments_and_streams),
        cmocka_unit_test(test_normal_distribution),
        cmocka_unit_test(test_npy_roundtrip),        cmocka_unit_test(test_npy_malformed),
        cmocka_unit_test(test_atomic_file),          cmocka_unit_test(test_parsers_and_sizes),
        cmocka_unit_test(test_input_refuses_non_regular), cmocka_unit_test(test_outdir_claim),
        cmocka_unit_test(test_grow_or_die),
        cmocka_unit_test(test_outdir_force_only_ours), cmocka_unit_test(test_outdir_lock),
        cmocka_unit_test(test_atomic_write_fsyncs),  cmocka_unit_test(test_hash64_bits),
        cmocka_unit_test(test_outdir_temps_by_marker), cmocka_unit_test(test_outdir_through_symlink),
        cmocka_unit_test(test_outdir_threads),       cmocka_unit_test(test_outfile_only_regular),
        cmocka_unit_test(test_outdir_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
