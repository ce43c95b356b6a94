/* util.c — see util.h. POSIX only (clock_gettime, getrusage, rename). */
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

int mp_log_quiet = 0;

double mp_time_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int mp_threads_resolve(int requested, const char *source, int *n, MpErr *e) {
    if (requested < 0 || requested > MP_THREADS_MAX)
        return mp_err_set(e, "%s: %d threads is outside [1, %d]", source, requested, MP_THREADS_MAX);
    *n = requested;
    if (requested > 0) return MP_OK;
#ifdef _OPENMP
    *n = omp_get_max_threads();
#else
    *n = 1;
#endif
    if (*n > MP_THREADS_MAX) {
        const char *env = getenv("OMP_NUM_THREADS");
        return mp_err_set(e, "OMP_NUM_THREADS=%.40s: %d threads is more than the cap of %d; HINT: a smaller "
                             "OMP_NUM_THREADS, or --threads N",
                          env ? env : "?", *n, MP_THREADS_MAX);
    }
    return MP_OK;
}

int mp_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

size_t mp_peak_rss_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

int mp_mkdir_p(const char *dir, MpErr *e) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof buf) return mp_err_set(e, "%s: bad directory path", dir);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return mp_err_set(e, "%s: cannot create directory: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return mp_err_set(e, "%s: exists and is not a directory", dir);
    return MP_OK;
}

int mp_path_join(char *out, size_t cap, const char *dir, const char *name, MpErr *e) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return mp_err_set(e, "%s/%s: path too long", dir, name);
    return MP_OK;
}

int mp_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static MpWriteHook write_hook;
static int write_no_space; /* sticky: a write of this process found the disk (or its quota, or RLIMIT_FSIZE) full */

void mp_atomic_on_write(MpWriteHook hook) { write_hook = hook; }

int mp_temp_name(char *out, size_t cap, const char *path, const char *kind) {
    const int n = snprintf(out, cap, "%s.%s.%ld", path, kind, (long)getpid());
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int mp_temp_path(char *out, size_t cap, const char *path, const char *kind, MpErr *e) {
    if (mp_temp_name(out, cap, path, kind) != 0) return mp_err_set(e, "%s: path too long", path);
    if (write_hook) write_hook(out, 1);
    return MP_OK;
}

int mp_atomic_open(MpAtomicFile *af, const char *path, MpErr *e) {
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) return mp_err_set(e, "%s: path too long", path);
    strcpy(af->path, path);
    if (mp_temp_path(af->tmp, sizeof af->tmp, path, "tmp", e) != MP_OK) return MP_ERR;
    af->f = fopen(af->tmp, "wb");
    if (!af->f) {
        af->tmp[0] = '\0';
        return mp_err_set(e, "%s: cannot write: %s", path, strerror(errno));
    }
    return MP_OK;
}

static void note_no_space(int err) {
    if (err == ENOSPC || err == EDQUOT || err == EFBIG) write_no_space = 1;
}

int mp_write_no_space(void) { return write_no_space; }

const char *mp_file_kind(unsigned mode) {
    return S_ISREG(mode)    ? NULL
           : S_ISDIR(mode)  ? "a directory"
           : S_ISLNK(mode)  ? "a symbolic link"
           : S_ISFIFO(mode) ? "a FIFO"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device node"
                                            : "not a regular file";
}

int mp_atomic_commit(MpAtomicFile *af, MpErr *e) {
    if (!af->f) return mp_err_set(e, "%s: internal: file not open", af->path);
    /* the bytes reach the disk before the name does, and the name after the rename: a power
     * loss leaves the old file or the new one, never a short new one */
    int bad = ferror(af->f) || fflush(af->f) != 0 || fsync(fileno(af->f)) != 0;
    if (fclose(af->f) != 0) bad = 1;
    af->f = NULL;
    if (bad) {
        int err = errno;
        note_no_space(err);
        remove(af->tmp);
        af->tmp[0] = '\0';
        return mp_err_set(e, "%s: write failed: %s", af->path, strerror(err));
    }
    struct stat st; /* (the claims refuse these first: this is the last guard) */
    const char *what = lstat(af->path, &st) == 0 ? mp_file_kind(st.st_mode) : NULL;
    if (what) {
        remove(af->tmp);
        af->tmp[0] = '\0';
        return mp_err_set(e, "%s: is %s: not replaced (only a regular file is)", af->path, what);
    }
    if (rename(af->tmp, af->path) != 0) {
        int err = errno;
        remove(af->tmp);
        af->tmp[0] = '\0';
        return mp_err_set(e, "%s: cannot rename into place: %s", af->path, strerror(err));
    }
    af->tmp[0] = '\0';
    if (write_hook) write_hook(af->path, 0);
    return mp_fsync_parent(af->path, e);
}

void mp_atomic_abort(MpAtomicFile *af) {
    note_no_space(errno); /* (writers abort right after the write that failed) */
    if (af->f) fclose(af->f);
    af->f = NULL;
    if (af->tmp[0]) remove(af->tmp);
    af->tmp[0] = '\0';
}

int mp_file_write_atomic(const char *path, const void *buf, size_t n, MpErr *e) {
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    if (n && fwrite(buf, 1, n, af.f) != n) {
        mp_atomic_abort(&af);
        return mp_err_set(e, "%s: write failed: %s", path, strerror(errno));
    }
    return mp_atomic_commit(&af, e);
}

int mp_file_read_all(const char *path, size_t max_bytes, const char *what, char **data, size_t *len, MpErr *e) {
    int64_t size = 0;
    FILE *f = mp_input_open(path, &size, e);
    if (!f) return MP_ERR;
    if ((unsigned long long)size > max_bytes) {
        fclose(f);
        return mp_err_set(e, "%s: %lld bytes is too large for %s", path, (long long)size, what);
    }
    size_t n = (size_t)size;
    char *buf = mp_try_malloc(n + 1);
    if (!buf) {
        fclose(f);
        return mp_err_set(e, "%s: out of memory (%zu bytes)", path, n + 1);
    }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        free(buf);
        return mp_err_set(e, "%s: read %zu of %zu bytes", path, got, n);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return MP_OK;
}

int mp_parse_double(const char *s, double *out) {
    if (!s || !*s) return MP_ERR;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v)) return MP_ERR;
    *out = v;
    return MP_OK;
}

int mp_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (!s || !*s) return MP_ERR;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < lo || v > hi) return MP_ERR;
    *out = (int64_t)v;
    return MP_OK;
}

int mp_parse_double_list(const char *s, double *out, int cap) {
    char buf[1024];
    if (!s || strlen(s) >= sizeof buf) return -1;
    strcpy(buf, s);
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n >= cap || mp_parse_double(tok, &out[n]) != MP_OK) return -1;
        n++;
    }
    if (n == 0 || s[strlen(s) - 1] == ',' || s[0] == ',' || strstr(s, ",,")) return -1;
    return n;
}

int mp_parse_range_list(const char *s, int hi, unsigned char *mask) {
    char buf[1024];
    if (!s || !*s || strlen(s) >= sizeof buf) return -1;
    if (s[strlen(s) - 1] == ',' || s[0] == ',' || strstr(s, ",,")) return -1;
    strcpy(buf, s);
    memset(mask, 0, (size_t)hi + 1);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *dash = strchr(tok, '-');
        int64_t a, b;
        if (dash) {
            *dash = '\0';
            if (mp_parse_i64(tok, 1, hi, &a) != MP_OK || mp_parse_i64(dash + 1, 1, hi, &b) != MP_OK ||
                b < a)
                return -1;
        } else {
            if (mp_parse_i64(tok, 1, hi, &a) != MP_OK) return -1;
            b = a;
        }
        for (int64_t i = a; i <= b; i++) mask[i] = 1;
    }
    int n = 0;
    for (int i = 1; i <= hi; i++) n += mask[i];
    return n;
}

uint64_t mp_fnv1a64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

#define HASH_P1 0x9E3779B185EBCA87ULL
#define HASH_P2 0xC2B2AE3D27D4EB4FULL

static uint64_t hash_round(uint64_t acc, uint64_t w) {
    acc += w * HASH_P2;
    acc = (acc << 31) | (acc >> 33);
    return acc * HASH_P1;
}

uint64_t mp_hash64(const void *data, size_t n, uint64_t h) {
    const unsigned char *p = data;
    uint64_t a[4] = {h + HASH_P1, h ^ HASH_P2, h - HASH_P1, ~h};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, p + i + 8 * k, 8);
            a[k] = hash_round(a[k], w);
        }
    uint64_t r = (uint64_t)n * HASH_P1;
    for (int k = 0; k < 4; k++) r = hash_round(r ^ a[k], (uint64_t)k + 1);
    return mp_fnv1a64(p + i, n - i, r); /* the last n % 32 bytes */
}

void mp_log(const char *fmt, ...) {
    if (mp_log_quiet) return;
    va_list ap;
    fputs("maskpos: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

/* ================================================================ inputs */

int mp_input_open_fd(const char *path, int64_t *size, MpErr *e) {
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer for ever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        mp_err_set(e, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        mp_err_set(e, "%s: cannot stat: %s", path, strerror(err));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        mp_err_set(e, S_ISDIR(st.st_mode) ? "%s: is a directory, not a file"
                                          : "%s: not a regular file (a FIFO, socket or device); HINT: give a file",
                   path);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        mp_err_set(e, "%s: cannot set blocking mode: %s", path, strerror(err));
        return -1;
    }
    if (size) *size = (int64_t)st.st_size;
    return fd;
}

FILE *mp_input_open(const char *path, int64_t *size, MpErr *e) {
    int fd = mp_input_open_fd(path, size, e);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        mp_err_set(e, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}

/* ================================================================ durability */

int mp_fsync_parent(const char *path, MpErr *e) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return mp_err_set(e, "%s: path too long", path);
    strcpy(buf, path);
    const char *dir = dirname(buf);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return mp_err_set(e, "%s: cannot open its folder to sync: %s", path, strerror(errno));
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    /* some file systems cannot sync a directory (EINVAL): the rename itself is then all we have */
    if (rc != 0 && err != EINVAL && err != EROFS)
        return mp_err_set(e, "%s: cannot sync its folder: %s", path, strerror(err));
    return MP_OK;
}
