/* expect.c — see expect.h. The one table of expected values and tolerances.
 *
 * Meaning of tol, by kind of entry:
 *   - printed values of the paper (fig1.*, fig2.*, fig4.*): how far ours may lie from them (for
 *     Monte-Carlo rows plus mc.sigmas standard errors of this run; fig1 is exact to the printed
 *     thousandth);
 *   - thresholds (noise.*, *.factor): the number the verdict compares with;
 *   - the later version's recency probabilities (recency.*): tol is unused there (recency.c
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
static const MpReproExpect table[] = {
    /* ---- Monte-Carlo rows in general */
    {"mc.sigmas", 1, {4}, 0, "ours: a row agrees within this many standard errors of this run"},
    {"noise.z_rms", 1, {1.5}, 0, "ours: rms/noise below this = noise only (pure noise gives 1)"},
    {"noise.block_z", 1, {1.3}, 0, "ours: block z above this = a residue above noise (noise gives 1 ± 0.1; docs/metrics.md)"},
    /* ---- Figure 1: the closed form */
    {"fig1.S", 3, {0.154, 0.132, 0.150}, 1e-9, "paper.md Figure 1 (S21, S31, S32; printed to the thousandth)"},
    /* ---- Figure 2: L2, α = 0, the last query's scores, layers 2–4 */
    {"fig2.first_key", 3, {0.019, 0.067, 0.147}, 0.003, "paper.md Figure 2 (S(50,1), layers 2, 3, 4)"},
    {"fig2.prev_key", 3, {0.031, 0.129, 0.334}, 0.003, "paper.md Figure 2 (S(50,49), layers 2, 3, 4)"},
    {"fig2.theory", 1, {0.01}, 0.02, "paper.md §3: the d = 64 simulation follows the closed form (max |diff| ≈ 0.01)"},
    /* ---- Appendix: LayerNorm */
    {"fig2ln.factor", 1, {3}, 0, "paper.md appendix: the pattern nearly vanishes with √d and is strong with d"},
    /* ---- Figure 4: RoPE */
    {"fig4.res_lo", 4, {-0.001, -0.03, -0.06, -0.08}, 0.02, "paper.md Figure 4 (causal, α = 0: residue range per layer)"},
    {"fig4.res_hi", 4, {0.001, 0.08, 0.08, 0.04}, 0.02, "paper.md Figure 4"},
    {"fig4.alpha05_min", 1, {-0.15}, 0.05, "paper.md Figure 4 (causal, α = 0.5: residue minimum ≈ −0.15)"},
    {"fig4.nri_factor", 1, {20}, 0, "ours: layer-4 NRI with the mask at least this many times without"},
    /* ---- Figure 3: the embedded NoPE model */
    {"fig3.rise_share", 1, {0.5}, 0, "paper.md Figure 3: scores rise toward the query (share of rising rows above this)"},
    {"fig3.slope_factor", 1, {5}, 0, "paper.md Figure 3: steeper than the parameter-free decoder (slope ratio above this)"},
    {"fig3.gram_factor", 1, {5}, 0, "paper.md Figure 3 (i): amplified at layer 2 (range ratio above this)"},
    {"fig3.counterfactual", 1, {0.1}, 0, "ours: without the mask |slope| below this share of the causal slope"},
    /* ---- Figure 5: RoPE models */
    {"fig5.pf_factor", 1, {3}, 0, "paper.md Figure 5: about 10× the parameter-free residue (verdict: above this factor)"},
    /* ---- the later version's grid (recency.c) */
    {"recency.sigmas", 1, {4}, 5e-5, "ours: within this many combined standard errors plus half the printed digit (tol)"},
    {"recency.authors_batch", 1, {1e7}, 0, "the authors' B"},
    {"recency.d16_none_a0", 4, {0.5000, 0.5005, 0.0822, 0.0140}, 0, "fig1_d16_d64_L1L2 + fig3_d16_d64_L3L4"},
    {"recency.d16_ln_a0", 4, {0.5000, 0.5015, 0.5051, 0.5114}, 0, "fig1 + fig3"},
    {"recency.d16_ln_a0.5", 4, {0.5000, 0.6382, 0.8002, 0.9079}, 0, "fig1 + fig3"},
    {"recency.d16_ln_a0.5_res", 4, {0.5000, 0.5931, 0.6610, 0.7078}, 0, "fig1 + fig3"},
    {"recency.d64_none_a0", 4, {0.5000, 0.5000, 0.0069, 0.0001}, 0, "fig1 + fig3"},
    {"recency.d64_ln_a0", 4, {0.5000, 0.5000, 0.5000, 0.5000}, 0, "fig1 + fig3"},
    {"recency.d64_ln_a0.5", 4, {0.5000, 0.5544, 0.6274, 0.7073}, 0, "fig1 + fig3"},
    {"recency.d64_ln_a0.5_res", 4, {0.5000, 0.5457, 0.5791, 0.6053}, 0, "fig1 + fig3"},
    {"recency.d256_none_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2_d256_d1024_L1L2"},
    {"recency.d256_ln_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    {"recency.d256_ln_a0.5", 4, {0.5000, 0.5023, NAN, NAN}, 0, "fig2"},
    {"recency.d256_ln_a0.5_res", 4, {0.5000, 0.5021, NAN, NAN}, 0, "fig2"},
    {"recency.d1024_none_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    {"recency.d1024_ln_a0", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    {"recency.d1024_ln_a0.5", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    {"recency.d1024_ln_a0.5_res", 4, {0.5000, 0.5000, NAN, NAN}, 0, "fig2"},
    {"recency.d16_ln_a0.2", 4, {0.5000, 0.5316, 0.5816, 0.6457}, 0, "simul_alpha"},
    {"recency.d16_ln_a0.4", 4, {0.5001, 0.5928, 0.7193, 0.8312}, 0, "simul_alpha"},
    {"recency.d16_ln_a0.6", 4, {0.5000, 0.6949, 0.8783, 0.9605}, 0, "simul_alpha"},
    {"recency.d16_ln_a0.8", 4, {0.5000, 0.8401, 0.9841, 0.9983}, 0, "simul_alpha"},
    {"recency.d16_ln_a0_res", 4, {0.5000, 0.5009, 0.5019, 0.5028}, 0, "simul_alpha_residual"},
    {"recency.d16_ln_a0.2_res", 4, {0.5000, 0.5229, 0.5415, 0.5570}, 0, "simul_alpha_residual"},
    {"recency.d16_ln_a0.4_res", 4, {0.5000, 0.5643, 0.6147, 0.6527}, 0, "simul_alpha_residual"},
    {"recency.d16_ln_a0.6_res", 4, {0.5000, 0.6265, 0.7091, 0.7604}, 0, "simul_alpha_residual"},
    {"recency.d16_ln_a0.8_res", 4, {0.5000, 0.6936, 0.7862, 0.8340}, 0, "simul_alpha_residual"},
    /* ---- length: the later version's claim on models with a norm */
    {"length.rp", 1, {0.5}, 0, "the later version: models with a norm favour recent keys (RP − mc.sigmas se above this)"},
};

const MpReproExpect *mp_repro_expect(const char *key) {
    for (size_t k = 0; k < sizeof table / sizeof table[0]; k++)
        if (!strcmp(table[k].key, key)) return &table[k];
    MP_ASSERT(!"mp_repro_expect: a key that is not in the table");
    return NULL;
}

double mp_repro_expect_v(const char *key, int i) {
    const MpReproExpect *x = mp_repro_expect(key);
    MP_ASSERT(i >= 0 && i < x->n);
    return x->v[i];
}

double mp_repro_expect_tol(const char *key) { return mp_repro_expect(key)->tol; }
