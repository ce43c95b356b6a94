/* expect.h — the values the papers print and the tolerances our verdicts allow, in one table
 * (expect.c), each with its source.
 *
 * Implements: mp_repro_expect(key): the entry of that key. A key that is not in the table is a
 * programmer error (always-on assert), never a silent 0.
 * Does not: decide a verdict (the stages' verdict functions do, with these numbers).
 * Tested by: tests/test_reproduce.c (the rows print these values; the recency grid's are checked
 * against a row copied from the authors' figure).
 */
#ifndef MP_REPRO_EXPECT_H
#define MP_REPRO_EXPECT_H

#define MP_REPRO_EXPECT_MAX 4

typedef struct MpReproExpect {
    const char *key;    /* "fig2.first_key", "recency.d16_ln_a0.5", ... */
    int n;              /* values used (per layer where there are several) */
    double v[MP_REPRO_EXPECT_MAX]; /* NAN: the source prints no value there */
    double tol;         /* absolute tolerance or threshold (meaning per entry, see expect.c) */
    const char *source; /* where the values come from */
} MpReproExpect;

const MpReproExpect *mp_repro_expect(const char *key);
/* v[i] of key (asserts i < n). */
double mp_repro_expect_v(const char *key, int i);
/* tol of key. */
double mp_repro_expect_tol(const char *key);

#endif
