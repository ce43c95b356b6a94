/* probe_signif.h — is a layer's residue resolved at this N? The decision every consumer reads
 * (probe's table and meta.json, the accumulator, figures, the viewer, reproduce's verdicts), and
 * the two numbers that go with it: the noise-corrected NRI and the N a residue of the measured size
 * needs (docs/metrics.md, "Is a residue resolved?").
 *
 * Implements:
 *   - the block test's noise level from the MP_PROBE_FLIPS sign-flipped block sums of the
 *     accumulator (model/probe.h: each sequence's block means times a sign of its own): the rms
 *     z0 and the spread s0 of their block z, for the whole grid and for each region;
 *   - resolved: N >= MP_SIGNIF_MIN_N and block z > z0 + MP_SIGNIF_SIGMAS · s0 (a region likewise,
 *     against its own noise level, and only within a resolved layer);
 *   - N needed: N · (threshold² − z0²) / (z² − z0²) (z² − z0² grows like N for a fixed residue);
 *   - the noise-corrected NRI: (Σ Ŝ² − T_D/N) / (Σ (S − S̄)² − T_C/N), T the unbiased estimate of a
 *     single sequence's noise power from the per-sequence squared norms (rsq, csq).
 * Does not: accumulate (probe_acc.c), print or write (src/job/probe*.c).
 * Tested by: tests/test_probe_signif.c (Gaussian noise and known patterns; the corrected NRI's bias
 * by simulation against a known answer).
 *
 * Shape legend: L selected layers.
 */
#ifndef MP_PROBE_SIGNIF_H
#define MP_PROBE_SIGNIF_H

#include <stdint.h>

#include "kernels/posmap.h" /* MpPosStats */
#include "model/probe.h"    /* MpProbeAcc, MP_PROBE_NREGIONS, MP_PROBE_FLIPS */

#define MP_SIGNIF_MIN_N 30   /* fewer sequences: standard errors too rough to judge (a warning) */
#define MP_SIGNIF_SIGMAS 4.0 /* the threshold's distance above the noise level, in its spreads */
#define MP_SIGNIF_MAP_NOISE 0.5 /* a map more noise than this has no corrected NRI (its variance is noise) */

typedef struct MpProbeSignif {
    double z[MP_PROBE_NREGIONS];        /* block z (region 0: the whole grid) */
    double noise[MP_PROBE_NREGIONS];    /* z0: rms of the sign-flipped block z */
    double spread[MP_PROBE_NREGIONS];   /* s0: their standard deviation */
    double threshold[MP_PROBE_NREGIONS]; /* z0 + MP_SIGNIF_SIGMAS · s0 */
    int resolved[MP_PROBE_NREGIONS];    /* region 0: the layer's residue; others: within a resolved layer */
    double n_needed;                    /* N at which z would cross the threshold (NaN: z ≤ z0) */
    double nri_corr;                    /* noise-corrected NRI (NaN with lengths, N < 3, or a map whose
                                           variance is mostly noise: map_noise > MP_SIGNIF_MAP_NOISE) */
    double map_noise;                   /* the share of the map's variance (the NRI's denominator) that is
                                           noise: (T_C / N) / Σ (S − S̄)² */
    int64_t n;                          /* sequences */
} MpProbeSignif;

/* The significance of layer slot l of a: st its statistics (nri_num, nri_den of the mean map over
 * positions skip..S-1, what mp_probe_layer_stats computed). */
void mp_probe_signif(MpProbeSignif *sg, const MpProbeAcc *a, int l, const MpPosStats *st);

/* The decision from the numbers alone: z above threshold with n >= MP_SIGNIF_MIN_N. */
int mp_signif_resolved(double z, double threshold, int64_t n);

/* The noise-corrected NRI from the mean map's num, den over n sequences and the per-sequence sums
 * rsq = Σ_s ‖D x_s‖², csq = Σ_s ‖C x_s‖² (NaN when n < 3 or the denominator is not positive). */
double mp_signif_nri_corrected(double num, double den, double rsq, double csq, double n);
/* (T_C / N) / den: the share of the map's variance that is noise (NaN when n < 3). */
double mp_signif_map_noise(double den, double csq, double n);

#endif
