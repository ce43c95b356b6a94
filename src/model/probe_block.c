/* probe_block.c — the block test of probe.h: one sequence's residue averaged over a grid of
 * nb × nb blocks (mp_probe_block_add), the z statistic from the blocks' sums over sequences
 * (mp_probe_block_z, by region of the grid), and the per-layer statistics of the mean maps that
 * probe writes (mp_probe_layer_stats).
 * Does not: accumulate scores (probe_acc.c), nor compute a residue (kernels/posmap.c).
 * Tested by: tests/test_probe_stats.c, tests/test_model_probe.c.
 *
 * Shape legend: L selected layers, S tokens per sequence, P = S - skip positions tested,
 * nb blocks per side.
 */
#include "model/probe.h"

#include <math.h>

#include "kernels/posmap.h" /* mp_posmap_diagnorm, mp_posmap_sub, mp_posmap_stats */

void mp_probe_block_means(double *bm, const double *res, int P, int nb, int causal) {
    for (int k = 0; k < nb * nb; k++) bm[k] = NAN;
    for (int bi = 0; bi < nb; bi++)
        for (int bj = 0; bj <= (causal ? bi : nb - 1); bj++) {
            const int i0 = (int)(((int64_t)bi * P + nb - 1) / nb), i1 = (int)(((int64_t)(bi + 1) * P + nb - 1) / nb);
            const int j0 = (int)(((int64_t)bj * P + nb - 1) / nb), j1 = (int)(((int64_t)(bj + 1) * P + nb - 1) / nb);
            double acc = 0;
            int cnt = 0;
            for (int i = i0; i < i1; i++)
                for (int j = j0; j < j1 && (!causal || j <= i); j++) {
                    const double r = res[(size_t)i * P + j];
                    if (isnan(r)) continue; /* outside a sliding window, or past a short sequence */
                    acc += r;
                    cnt++;
                }
            if (cnt) bm[bi * nb + bj] = acc / cnt;
        }
}

void mp_probe_block_add(double *bs, double *bq, const double *res, int P, int nb, int causal) {
    double bm[16 * 16];
    MP_ASSERT(nb <= 16);
    mp_probe_block_means(bm, res, P, nb, causal);
    for (int k = 0; k < nb * nb; k++) {
        if (isnan(bm[k])) continue;
        bs[k] += bm[k];
        bq[k] += bm[k] * bm[k];
    }
}

void mp_probe_layer_stats(MpPosStats *st, double *dn, const double *mean, const double *se, int have_se, int L, int S,
                          int k, double *scratch) {
    const size_t SS = (size_t)S * S;
    const int P = S - k;
    for (int l = 0; l < L; l++) {
        mp_posmap_diagnorm(dn + l * SS, mean + l * SS, S);
        if (!k) {
            mp_posmap_stats(&st[l], mean + l * SS, dn + l * SS, have_se ? se + l * SS : NULL, S);
            continue;
        }
        double *m = scratch, *e = scratch + SS, *r = scratch + 2 * SS;
        mp_posmap_sub(m, mean + l * SS, S, k);
        mp_posmap_sub(e, se + l * SS, S, k);
        mp_posmap_diagnorm(r, m, P);
        mp_posmap_stats(&st[l], m, r, have_se ? e : NULL, P);
    }
}

double mp_probe_acc_block_z(const MpProbeAcc *a, int l) { return mp_probe_acc_block_z_region(a, l, MP_PROBE_REGION_ALL); }

/* 1 when block (bi, bj) belongs to region r (see MpProbeRegion). */
static int probe_in_region(int r, int bi, int bj, int nb) {
    const int first = bj == 0, lastq = bi == nb - 1, lastk = bj == nb - 1;
    switch (r) {
    case MP_PROBE_REGION_FIRST_KEYS: return first;
    case MP_PROBE_REGION_LAST_QUERIES: return lastq;
    case MP_PROBE_REGION_LAST_KEYS: return lastk;
    case MP_PROBE_REGION_INTERIOR: return !first && !lastq && !lastk && bi != 0;
    default: return 1;
    }
}

double mp_probe_acc_block_z_region(const MpProbeAcc *a, int l, int region) {
    if (l < 0 || l >= a->L) return NAN;
    const size_t nbb = (size_t)a->nb * a->nb;
    return mp_probe_block_z_n(a->bsum + l * nbb, a->bsumsq + l * nbb, a->bcnt ? a->bcnt + l * nbb : NULL, a->nb, a->n_done,
                              region);
}

void mp_probe_acc_block_z_null(const MpProbeAcc *a, int l, int region, double *z) {
    const size_t nbb = (size_t)a->nb * a->nb;
    for (int f = 0; f < MP_PROBE_FLIPS; f++)
        z[f] = l < 0 || l >= a->L ? NAN
                                  : mp_probe_block_z_n(a->bflip + ((size_t)l * MP_PROBE_FLIPS + f) * nbb, a->bsumsq + l * nbb,
                                                       a->bcnt ? a->bcnt + l * nbb : NULL, a->nb, a->n_done, region);
}

double mp_probe_block_z(const double *bs, const double *bq, int nb, int64_t n_done, int region) {
    return mp_probe_block_z_n(bs, bq, NULL, nb, n_done, region);
}

double mp_probe_block_z_n(const double *bs, const double *bq, const double *bn, int nb, int64_t n_done, int region) {
    if (!bn && n_done < 2) return NAN;
    double acc = 0;
    int cnt = 0;
    for (int k = 0; k < nb * nb; k++) {
        if (!probe_in_region(region, k / nb, k % nb, nb)) continue;
        if (bs[k] == 0 && bq[k] == 0) continue; /* no observed entry (above the diagonal when causal) */
        const double dn = bn ? bn[k] : (double)n_done;
        if (!(dn >= 2)) continue;
        const double m = bs[k] / dn, var = (bq[k] / dn - m * m) * dn / (dn - 1.0);
        if (!(var > 0)) continue;
        acc += m * m / (var / dn);
        cnt++;
    }
    return cnt ? sqrt(acc / cnt) : NAN;
}
