/* expect.c — see expect.h. The one table of expected values and tolerances.
 *
 * Meaning of tol, by kind of entry:
 *   - printed values of the paper (fig1.*, fig2.*, fig4.*): how far ours may lie from them (for
 *     Monte-Carlo rows plus mc.sigmas standard errors of this run; fig1 is exact to the printed
 *     thousandth);
 *   - thresholds (noise.*, *.factor): the number the verdict compares with;
 *   - the later version's recency probabilities (recency.*): tol is unused there (stage_recency.c
 *     combines both runs' standard errors, recency.sigmas of them, plus half a printed digit).
 */
#include "repro/expect.h"

#include <math.h>
#include <string.h>

#include "core/err.h" /* MP_ASSERT */

/* paper.md is our summary of Kim et al. 2025 (Behind RoPE) with the numbers its figures print;
 * the recency values are the later version's (Kim et al., "LayerNorm Induces Recency Bias in
 * Transformer Decoders"): the RP=… that github.com/starmpcc/layernorm_recency_bias (commit
 * d68cf47, B = 1e7, S = 10, float32 torch) prints on its figures' panels, copied from the PDFs'
 * text (pdftotext); NAN where the figure has no panel for that layer. */
static const MpReproExpect table[MP_REPRO_EXPECT_COUNT] = {
    /* ---- Monte-Carlo rows in general */
    [MP_REPRO_EXPECT_MC_SIGMAS] = {"mc.sigmas", 1, {4}, 0, "ours: a row agrees within this many standard errors of this run"},
    [MP_REPRO_EXPECT_NOISE_Z_RMS] = {"noise.z_rms", 1, {1.5}, 0, "ours: rms/noise below this = noise only (pure noise gives 1)"},
    /* ---- Figure 1: the closed form */
    [MP_REPRO_EXPECT_FIG1_S] = {"fig1.S", 3, {0.154, 0.132, 0.150}, 1e-9, "paper.md Figure 1 (S21, S31, S32; printed to the thousandth)"},
    /* ---- Figure 2: L2, α = 0, the last query's scores, layers 2–4 */
    [MP_REPRO_EXPECT_FIG2_FIRST_KEY] = {"fig2.first_key", 3, {0.019, 0.067, 0.147}, 0.003, "paper.md Figure 2 (S(50,1), layers 2, 3, 4)"},
    [MP_REPRO_EXPECT_FIG2_PREV_KEY] = {"fig2.prev_key", 3, {0.031, 0.129, 0.334}, 0.003, "paper.md Figure 2 (S(50,49), layers 2, 3, 4)"},
    [MP_REPRO_EXPECT_FIG2_THEORY] = {"fig2.theory", 1, {0.01}, 0.02, "paper.md §3: the d = 64 simulation follows the closed form (max |diff| ≈ 0.01)"},
    /* ---- Appendix: LayerNorm */
    [MP_REPRO_EXPECT_FIG2LN_FACTOR] = {"fig2ln.factor", 1, {3}, 0, "paper.md appendix: the pattern nearly vanishes with √d and is strong with d"},
    /* ---- Figure 4: RoPE */
    [MP_REPRO_EXPECT_FIG4_RES_LO] = {"fig4.res_lo", 4, {-0.001, -0.03, -0.06, -0.08}, 0.02, "paper.md Figure 4 (causal, α = 0: residue range per layer)"},
    [MP_REPRO_EXPECT_FIG4_RES_HI] = {"fig4.res_hi", 4, {0.001, 0.08, 0.08, 0.04}, 0.02, "paper.md Figure 4"},
    [MP_REPRO_EXPECT_FIG4_ALPHA05_MIN] = {"fig4.alpha05_min", 1, {-0.15}, 0.05, "paper.md Figure 4 (causal, α = 0.5: residue minimum ≈ −0.15)"},
    [MP_REPRO_EXPECT_FIG4_NRI_FACTOR] = {"fig4.nri_factor", 1, {20}, 0, "ours: layer-4 NRI with the mask at least this many times without"},
    /* ---- Figure 3: the embedded NoPE model */
    [MP_REPRO_EXPECT_FIG3_RISE_SHARE] = {"fig3.rise_share", 1, {0.5}, 0, "paper.md Figure 3: scores rise toward the query (share of rising rows above this)"},
    [MP_REPRO_EXPECT_FIG3_SLOPE_FACTOR] = {"fig3.slope_factor", 1, {5}, 0, "paper.md Figure 3: steeper than the parameter-free decoder (slope ratio above this)"},
    [MP_REPRO_EXPECT_FIG3_GRAM_FACTOR] = {"fig3.gram_factor", 1, {5}, 0, "paper.md Figure 3 (i): amplified at layer 2 (range ratio above this)"},
    [MP_REPRO_EXPECT_FIG3_COUNTERFACTUAL] = {"fig3.counterfactual", 1, {0.1}, 0, "ours: without the mask |slope| below this share of the causal slope"},
    /* ---- Figure 5: RoPE models */
    [MP_REPRO_EXPECT_FIG5_PF_FACTOR] = {"fig5.pf_factor", 1, {3}, 0, "paper.md Figure 5: about 10× the parameter-free residue (verdict: above this factor)"},
    /* ---- the later version's grid (stage_recency.c) */
    [MP_REPRO_EXPECT_RECENCY_SIGMAS] = {"recency.sigmas", 1, {4}, 5e-5, "ours: within this many combined standard errors plus half the printed digit (tol)"},
    [MP_REPRO_EXPECT_RECENCY_AUTHORS_BATCH] = {"recency.authors_batch", 1, {1e7}, 0, "the authors' B"},
    [MP_REPRO_EXPECT_RECENCY_D16_NONE_A0] = {"recency.d16_none_a0", 4, {0.5000, 0.5005, 0.0822, 0.0140}, 0, "fig1_d16_d64_L1L2 + fig3_d16_d64_L3L4"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0] = {"recency.d16_ln_a0", 4, {0.5000, 0.5015, 0.5051, 0.5114}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_5] = {"recency.d16_ln_a0.5", 4, {0.5000, 0.6382, 0.8002, 0.9079}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_5_RES] = {"recency.d16_ln_a0.5_res", 4, {0.5000, 0.5931, 0.6610, 0.7078}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D64_NONE_A0] = {"recency.d64_none_a0", 4, {0.5000, 0.5000, 0.0069, 0.0001}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D64_LN_A0] = {"recency.d64_ln_a0", 4, {0.5000, 0.5000, 0.5000, 0.5000}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D64_LN_A0_5] = {"recency.d64_ln_a0.5", 4, {0.5000, 0.5544, 0.6274, 0.7073}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D64_LN_A0_5_RES] = {"recency.d64_ln_a0.5_res", 4, {0.5000, 0.5457, 0.5791, 0.6053}, 0, "fig1 + fig3"},
    [MP_REPRO_EXPECT_RECENCY_D256_NONE_A0] = {"recency.d256_none_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2_d256_d1024_L1L2"},
    [MP_REPRO_EXPECT_RECENCY_D256_LN_A0] = {"recency.d256_ln_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D256_LN_A0_5] = {"recency.d256_ln_a0.5", 4, {0.5000, 0.5023, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D256_LN_A0_5_RES] = {"recency.d256_ln_a0.5_res", 4, {0.5000, 0.5021, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D1024_NONE_A0] = {"recency.d1024_none_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D1024_LN_A0] = {"recency.d1024_ln_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D1024_LN_A0_5] = {"recency.d1024_ln_a0.5", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D1024_LN_A0_5_RES] = {"recency.d1024_ln_a0.5_res", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_2] = {"recency.d16_ln_a0.2", 4, {0.5000, 0.5316, 0.5816, 0.6457}, 0, "simul_alpha"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_4] = {"recency.d16_ln_a0.4", 4, {0.5001, 0.5928, 0.7193, 0.8312}, 0, "simul_alpha"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_6] = {"recency.d16_ln_a0.6", 4, {0.5000, 0.6949, 0.8783, 0.9605}, 0, "simul_alpha"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_8] = {"recency.d16_ln_a0.8", 4, {0.5000, 0.8401, 0.9841, 0.9983}, 0, "simul_alpha"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_RES] = {"recency.d16_ln_a0_res", 4, {0.5000, 0.5009, 0.5019, 0.5028}, 0, "simul_alpha_residual"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_2_RES] = {"recency.d16_ln_a0.2_res", 4, {0.5000, 0.5229, 0.5415, 0.5570}, 0, "simul_alpha_residual"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_4_RES] = {"recency.d16_ln_a0.4_res", 4, {0.5000, 0.5643, 0.6147, 0.6527}, 0, "simul_alpha_residual"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_6_RES] = {"recency.d16_ln_a0.6_res", 4, {0.5000, 0.6265, 0.7091, 0.7604}, 0, "simul_alpha_residual"},
    [MP_REPRO_EXPECT_RECENCY_D16_LN_A0_8_RES] = {"recency.d16_ln_a0.8_res", 4, {0.5000, 0.6936, 0.7862, 0.8340}, 0, "simul_alpha_residual"},
    /* ---- length: the later version's claim on models with a norm */
    [MP_REPRO_EXPECT_LENGTH_RP] = {"length.rp", 1, {0.5}, 0, "the later version: models with a norm favour recent keys (RP − mc.sigmas se above this)"},
};

const MpReproExpect *mp_repro_expect(MpReproExpectKey k) {
    MP_ASSERT(k >= 0 && k < MP_REPRO_EXPECT_COUNT && table[k].key);
    return &table[k];
}

double mp_repro_expect_v(MpReproExpectKey k, int i) {
    const MpReproExpect *x = mp_repro_expect(k);
    MP_ASSERT(i >= 0 && i < x->n);
    return x->v[i];
}

double mp_repro_expect_tol(MpReproExpectKey k) { return mp_repro_expect(k)->tol; }

const MpReproExpect *mp_repro_expect_named(const char *key) {
    for (int k = 0; k < MP_REPRO_EXPECT_COUNT; k++)
        if (table[k].key && !strcmp(table[k].key, key)) return &table[k];
    return NULL;
}

int mp_repro_expect_check(MpErr *e) {
    for (int k = 0; k < MP_REPRO_EXPECT_COUNT; k++) {
        if (!table[k].key)
            return mp_err_set(e, "expected value %d of the enum (after \"%s\") has no row in expect.c's table", k,
                              k > 0 && table[k - 1].key ? table[k - 1].key : "(none)");
        if (table[k].n < 1 || table[k].n > MP_REPRO_EXPECT_MAX)
            return mp_err_set(e, "expected value %s: %d values (1..%d)", table[k].key, table[k].n, MP_REPRO_EXPECT_MAX);
        if (mp_repro_expect_named(table[k].key) != &table[k])
            return mp_err_set(e, "expected value %s: twice in the table", table[k].key);
    }
    return MP_OK;
}
