/* expect.h — the values the papers print and the tolerances our verdicts allow, in one table
 * (expect.c), each with its source.
 *
 * Implements: mp_repro_expect(key): the entry of that key. Keys are an enum and the table is
 * keyed by it, so a verdict cannot name a key that is not there (it does not compile); a key
 * left without its entry is found by mp_repro_expect_check when the tables are registered,
 * before any stage runs.
 * Does not: decide a verdict (the stages' verdict functions do, with these numbers).
 * Tested by: tests/test_reproduce.c (the rows print these values; the recency grid's are checked
 * against a row copied from the authors' figure).
 */
#ifndef MP_REPRO_EXPECT_H
#define MP_REPRO_EXPECT_H

#include "core/err.h" /* MpErr */

#define MP_REPRO_EXPECT_MAX 4

/* The keys, one per entry of the table (expect.c, designated initializers keyed by them). */
typedef enum MpReproExpectKey {
    MP_REPRO_EXPECT_MC_SIGMAS, /* "mc.sigmas" */
    MP_REPRO_EXPECT_NOISE_Z_RMS, /* "noise.z_rms" */
    MP_REPRO_EXPECT_FIG1_S, /* "fig1.S" */
    MP_REPRO_EXPECT_FIG2_FIRST_KEY, /* "fig2.first_key" */
    MP_REPRO_EXPECT_FIG2_PREV_KEY, /* "fig2.prev_key" */
    MP_REPRO_EXPECT_FIG2_THEORY, /* "fig2.theory" */
    MP_REPRO_EXPECT_FIG2LN_FACTOR, /* "fig2ln.factor" */
    MP_REPRO_EXPECT_FIG4_RES_LO, /* "fig4.res_lo" */
    MP_REPRO_EXPECT_FIG4_RES_HI, /* "fig4.res_hi" */
    MP_REPRO_EXPECT_FIG4_ALPHA05_MIN, /* "fig4.alpha05_min" */
    MP_REPRO_EXPECT_FIG4_NRI_FACTOR, /* "fig4.nri_factor" */
    MP_REPRO_EXPECT_FIG3_RISE_SHARE, /* "fig3.rise_share" */
    MP_REPRO_EXPECT_FIG3_SLOPE_FACTOR, /* "fig3.slope_factor" */
    MP_REPRO_EXPECT_FIG3_GRAM_FACTOR, /* "fig3.gram_factor" */
    MP_REPRO_EXPECT_FIG3_COUNTERFACTUAL, /* "fig3.counterfactual" */
    MP_REPRO_EXPECT_FIG5_PF_FACTOR, /* "fig5.pf_factor" */
    MP_REPRO_EXPECT_RECENCY_SIGMAS, /* "recency.sigmas" */
    MP_REPRO_EXPECT_RECENCY_AUTHORS_BATCH, /* "recency.authors_batch" */
    MP_REPRO_EXPECT_RECENCY_D16_NONE_A0, /* "recency.d16_none_a0" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0, /* "recency.d16_ln_a0" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_5, /* "recency.d16_ln_a0.5" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_5_RES, /* "recency.d16_ln_a0.5_res" */
    MP_REPRO_EXPECT_RECENCY_D64_NONE_A0, /* "recency.d64_none_a0" */
    MP_REPRO_EXPECT_RECENCY_D64_LN_A0, /* "recency.d64_ln_a0" */
    MP_REPRO_EXPECT_RECENCY_D64_LN_A0_5, /* "recency.d64_ln_a0.5" */
    MP_REPRO_EXPECT_RECENCY_D64_LN_A0_5_RES, /* "recency.d64_ln_a0.5_res" */
    MP_REPRO_EXPECT_RECENCY_D256_NONE_A0, /* "recency.d256_none_a0" */
    MP_REPRO_EXPECT_RECENCY_D256_LN_A0, /* "recency.d256_ln_a0" */
    MP_REPRO_EXPECT_RECENCY_D256_LN_A0_5, /* "recency.d256_ln_a0.5" */
    MP_REPRO_EXPECT_RECENCY_D256_LN_A0_5_RES, /* "recency.d256_ln_a0.5_res" */
    MP_REPRO_EXPECT_RECENCY_D1024_NONE_A0, /* "recency.d1024_none_a0" */
    MP_REPRO_EXPECT_RECENCY_D1024_LN_A0, /* "recency.d1024_ln_a0" */
    MP_REPRO_EXPECT_RECENCY_D1024_LN_A0_5, /* "recency.d1024_ln_a0.5" */
    MP_REPRO_EXPECT_RECENCY_D1024_LN_A0_5_RES, /* "recency.d1024_ln_a0.5_res" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_2, /* "recency.d16_ln_a0.2" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_4, /* "recency.d16_ln_a0.4" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_6, /* "recency.d16_ln_a0.6" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_8, /* "recency.d16_ln_a0.8" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_RES, /* "recency.d16_ln_a0_res" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_2_RES, /* "recency.d16_ln_a0.2_res" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_4_RES, /* "recency.d16_ln_a0.4_res" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_6_RES, /* "recency.d16_ln_a0.6_res" */
    MP_REPRO_EXPECT_RECENCY_D16_LN_A0_8_RES, /* "recency.d16_ln_a0.8_res" */
    MP_REPRO_EXPECT_LENGTH_RP, /* "length.rp" */
    MP_REPRO_EXPECT_COUNT
} MpReproExpectKey;

typedef struct MpReproExpect {
    const char *key;    /* "fig2.first_key", "recency.d16_ln_a0.5", ... */
    int n;              /* values used (per layer where there are several) */
    double v[MP_REPRO_EXPECT_MAX]; /* NAN: the source prints no value there */
    double tol;         /* absolute tolerance or threshold (meaning per entry, see expect.c) */
    const char *source; /* where the values come from */
} MpReproExpect;

const MpReproExpect *mp_repro_expect(MpReproExpectKey k);
/* v[i] of k (asserts i < n). */
double mp_repro_expect_v(MpReproExpectKey k, int i);
/* tol of k. */
double mp_repro_expect_tol(MpReproExpectKey k);
/* The entry named key ("recency.d16_ln_a0"), NULL when there is none (for names made at run
 * time: the stage checks them when the tables are registered). */
const MpReproExpect *mp_repro_expect_named(const char *key);
/* The table itself, when the tables are registered: every key of the enum has its entry, names
 * are unique, counts in range. MP_ERR with one line naming the key. */
int mp_repro_expect_check(MpErr *e);

#endif
