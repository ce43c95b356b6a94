/* err.c — see err.h. Messages go to stderr; nothing here allocates. */
#include "core/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mp_err_set(MpErr *e, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return MP_ERR;
}

int mp_err_prefix(MpErr *e, const char *fmt, ...) {
    if (!e) return MP_ERR;
    char prefix[512];
    char old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    old[sizeof old - 1] = '\0';
    size_t np = strlen(prefix);
    if (np > sizeof e->msg - 3) np = sizeof e->msg - 3;
    memcpy(e->msg, prefix, np);
    e->msg[np] = ':';
    e->msg[np + 1] = ' ';
    size_t room = sizeof e->msg - np - 2;
    size_t no = strlen(old);
    if (no > room - 1) no = room - 1;
    memcpy(e->msg + np + 2, old, no);
    e->msg[np + 2 + no] = '\0';
    return MP_ERR;
}

void mp_die(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fputs("maskpos: error: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(MP_EXIT_ERROR);
}

void mp_assert_fail(const char *expr, const char *file, int line) {
    fflush(stdout);
    fprintf(stderr, "maskpos: internal error: assertion '%s' failed at %s:%d (please report)\n",
            expr, file, line);
    abort();
}

void *mp_try_malloc(size_t n) { return malloc(n ? n : 1); }

void *mp_try_calloc(size_t count, size_t size) {
    return calloc(count ? count : 1, size ? size : 1);
}

void *mp_malloc_or_die(size_t n, const char *what) {
    void *p = mp_try_malloc(n);
    if (!p)
        mp_die("out of memory allocating %zu bytes for %s (HINT: lower --batch/--seq or free memory)",
               n, what);
    return p;
}

void *mp_calloc_or_die(size_t count, size_t size, const char *what) {
    size_t n;
    if (mp_size_mul(count, size, &n) != MP_OK)
        mp_die("size overflow allocating %zu x %zu bytes for %s", count, size, what);
    void *p = mp_try_calloc(count, size);
    if (!p)
        mp_die("out of memory allocating %zu bytes for %s (HINT: lower --batch/--seq or free memory)",
               n, what);
    return p;
}

void *mp_grow_or_die(void *p, int *cap, int n, size_t elem, const char *what) {
    if (n < *cap) return p;
    MP_ASSERT(n == *cap && *cap <= INT32_MAX / 2);
    const int c = *cap ? 2 * *cap : 16;
    size_t bytes;
    if (mp_size_mul((size_t)c, elem, &bytes) != MP_OK) mp_die("size overflow growing %s to %d entries", what, c);
    void *q = realloc(p, bytes);
    if (!q) mp_die("out of memory growing %s to %d entries (%zu bytes)", what, c, bytes);
    *cap = c;
    return q;
}

int mp_size_mul(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return MP_ERR;
    *out = a * b;
    return MP_OK;
}

int mp_size_add(size_t a, size_t b, size_t *out) {
    if (b > SIZE_MAX - a) return MP_ERR;
    *out = a + b;
    return MP_OK;
}
