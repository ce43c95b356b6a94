/* probe_signif.c — see probe_signif.h. */
#include "model/probe_signif.h"

#include <math.h>

int mp_signif_resolved(double z, double threshold, int64_t n) {
    return n >= MP_SIGNIF_MIN_N && isfinite(z) && isfinite(threshold) && z > threshold;
}

double mp_signif_nri_corrected(double num, double den, double rsq, double csq, double n) {
    if (!(n >= 3) || !isfinite(num) || !isfinite(den)) return NAN;
    /* E‖D m‖² = ‖D μ‖² + T_D / n, T_D = E‖D (x − μ)‖² estimated without bias by the sample
     * variance (Σ_s ‖D x_s‖² − n ‖D m‖²) / (n − 1); likewise C, the centring of the NRI's
     * denominator */
    const double td = (rsq - n * num) / (n - 1.0), tc = (csq - n * den) / (n - 1.0);
    const double nc = num - td / n, dc = den - tc / n;
    return dc > 0 ? nc / dc : NAN;
}

double mp_signif_map_noise(double den, double csq, double n) {
    if (!(n >= 3) || !(den > 0)) return NAN;
    return (csq - n * den) / (n - 1.0) / n / den;
}

/* z0, s0 of the flipped block z of one region: rms and standard deviation over the finite draws. */
static void signif_noise(const double *zf, double *z0, double *s0) {
    double s = 0, s2 = 0;
    int m = 0;
    for (int f = 0; f < MP_PROBE_FLIPS; f++)
        if (isfinite(zf[f])) s += zf[f], s2 += zf[f] * zf[f], m++;
    if (m < 2) {
        *z0 = *s0 = NAN;
        return;
    }
    const double mean = s / m, var = (s2 / m - mean * mean) * m / (m - 1.0);
    *z0 = sqrt(s2 / m);
    *s0 = sqrt(var > 0 ? var : 0.0);
}

void mp_probe_signif(MpProbeSignif *sg, const MpProbeAcc *a, int l, const MpPosStats *st) {
    double zf[MP_PROBE_FLIPS];
    sg->n = a->n_done;
    for (int g = 0; g < MP_PROBE_NREGIONS; g++) {
        sg->z[g] = mp_probe_acc_block_z_region(a, l, g);
        mp_probe_acc_block_z_null(a, l, g, zf);
        signif_noise(zf, &sg->noise[g], &sg->spread[g]);
        sg->threshold[g] = sg->noise[g] + MP_SIGNIF_SIGMAS * sg->spread[g];
        sg->resolved[g] = mp_signif_resolved(sg->z[g], sg->threshold[g], a->n_done) && (g == 0 || sg->resolved[0]);
    }
    const double z = sg->z[0], z0 = sg->noise[0], zt = sg->threshold[0];
    sg->n_needed = isfinite(z) && isfinite(zt) && z * z > z0 * z0 ? (double)a->n_done * (zt * zt - z0 * z0) / (z * z - z0 * z0)
                                                                  : NAN;
    if (isfinite(sg->n_needed) && sg->n_needed < MP_SIGNIF_MIN_N) sg->n_needed = MP_SIGNIF_MIN_N;
    const double n = (double)a->n_done;
    sg->map_noise = a->npos ? NAN : mp_signif_map_noise(st->nri_den, a->csq[l], n);
    sg->nri_corr = a->npos || !(sg->map_noise <= MP_SIGNIF_MAP_NOISE)
                       ? NAN
                       : mp_signif_nri_corrected(st->nri_num, st->nri_den, a->rsq[l], a->csq[l], n);
}
