/* err.h — maskpos error handling: the three tiers of house style.
 *
 * Implements:
 *   1. MP_ASSERT: programmer invariants, never compiled out; prints file, line, expression, aborts.
 *   2. Environment failures in CLI paths: mp_die() and the *_or_die allocators print
 *      "maskpos: error: ..." (with a HINT where one helps) and exit with MP_EXIT_ERROR.
 *   3. Parsers of untrusted input never abort: they return MP_ERR (-1) and fill an MpErr message.
 *      Overflow-checked size arithmetic (mp_size_mul/mp_size_add) lives here for them.
 * Does not: log (see util.h), or recover — callers decide what a failure means.
 * Tested by: tests/test_core.c
 */
#ifndef MP_ERR_H
#define MP_ERR_H

#include <stddef.h>
#include <stdint.h>

#define MP_OK 0
#define MP_ERR (-1)

/* Exit codes of the CLI: 0 success, 1 a stage of a multi-stage run failed, 2 bad input. */
#define MP_EXIT_OK 0
#define MP_EXIT_FAILED 1
#define MP_EXIT_ERROR 2

typedef struct MpErr {
    char msg[1024];
} MpErr;

/* Sets e->msg (printf-style) and returns MP_ERR, so parsers can `return mp_err_set(e, ...)`. */
int mp_err_set(MpErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prepends "prefix: " to an existing message (e.g. the file name). Returns MP_ERR. */
int mp_err_prefix(MpErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "maskpos: error: <msg>" on stderr and exits MP_EXIT_ERROR. */
void mp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

void mp_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define MP_ASSERT(cond) ((cond) ? (void)0 : mp_assert_fail(#cond, __FILE__, __LINE__))

/* Allocation: the "or die" form (CLI paths) and the "try" form (parsers). */
void *mp_malloc_or_die(size_t n, const char *what);
void *mp_calloc_or_die(size_t count, size_t size, const char *what);
/* p, an array of *cap elements of size elem with n in use, with room for element n: unchanged
 * while n < *cap, else reallocated to double the room (16 at first; *cap updated). */
void *mp_grow_or_die(void *p, int *cap, int n, size_t elem, const char *what);
void *mp_try_malloc(size_t n);
void *mp_try_calloc(size_t count, size_t size);

/* Overflow-checked size arithmetic: return MP_OK and store the result, or MP_ERR on overflow. */
int mp_size_mul(size_t a, size_t b, size_t *out);
int mp_size_add(size_t a, size_t b, size_t *out);

#endif
