/* posmap.c — see posmap.h. Every sum is in double, in a fixed order. */
#include "kernels/posmap.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Reference: one diagonal at a time (offset k = i − j over −(S−1)..S−1), no scratch. Strided
 * reads (stride S+1): slow on large maps, kept as the definition the fast version is tested on. */
void mp_posmap_diagnorm_ref(double *out, const double *map, int S) {
    for (int k = -(S - 1); k <= S - 1; k++) {
        int i0 = k >= 0 ? k : 0;
        int i1 = k >= 0 ? S : S + k;
        double sum = 0;
        int64_t cnt = 0;
        for (int i = i0; i < i1; i++) {
            double v = map[(size_t)i * S + (i - k)];
            if (isfinite(v)) {
                sum += v;
                cnt++;
            }
        }
        double mean = cnt ? sum / (double)cnt : NAN;
        for (int i = i0; i < i1; i++) {
            size_t at = (size_t)i * S + (i - k);
            out[at] = isfinite(map[at]) ? map[at] - mean : NAN;
        }
    }
}

/* Row by row, with one running sum per diagonal: every diagonal still receives its entries in
 * ascending i, so each sum (and the result) is bit-identical to the reference's, read in
 * memory order. Falls back to the reference when the 2S−1 sums cannot be allocated. */
void mp_posmap_diagnorm(double *out, const double *map, int S) {
    if (S <= 0) return;
    const size_t nd = 2 * (size_t)S - 1;
    double *sum = calloc(nd, sizeof *sum);  /* [2S−1] indexed by k + S − 1 */
    int64_t *cnt = calloc(nd, sizeof *cnt); /* [2S−1] */
    if (!sum || !cnt) {
        free(sum);
        free(cnt);
        mp_posmap_diagnorm_ref(out, map, S);
        return;
    }
    for (int i = 0; i < S; i++) {
        const double *row = map + (size_t)i * S;
        double *s = sum + (size_t)i + (size_t)(S - 1); /* s[-j] is diagonal k = i − j */
        int64_t *c = cnt + (size_t)i + (size_t)(S - 1);
        for (int j = 0; j < S; j++)
            if (isfinite(row[j])) {
                s[-j] += row[j];
                c[-j]++;
            }
    }
    for (size_t d = 0; d < nd; d++) sum[d] = cnt[d] ? sum[d] / (double)cnt[d] : NAN;
    for (int i = 0; i < S; i++) {
        const double *row = map + (size_t)i * S;
        const double *mean = sum + (size_t)i + (size_t)(S - 1);
        double *o = out + (size_t)i * S;
        for (int j = 0; j < S; j++) o[j] = isfinite(row[j]) ? row[j] - mean[-j] : NAN;
    }
    free(sum);
    free(cnt);
}

void mp_posmap_stats(MpPosStats *st, const double *map, const double *resid, const double *se,
                     int S) {
    size_t n = (size_t)S * S;
    double sum = 0;
    int64_t cnt = 0;
    for (size_t a = 0; a < n; a++)
        if (isfinite(map[a])) {
            sum += map[a];
            cnt++;
        }
    double mean = cnt ? sum / (double)cnt : 0;
    double num = 0, den = 0, rmin = INFINITY, rmax = -INFINITY, r2 = 0, se2 = 0, z2 = 0;
    int64_t noff = 0, nz = 0;
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) {
            size_t a = (size_t)i * S + j;
            if (!isfinite(map[a])) continue;
            double r = resid[a];
            num += r * r;
            den += (map[a] - mean) * (map[a] - mean);
            if (i == j) continue;
            noff++;
            r2 += r * r;
            if (r < rmin) rmin = r;
            if (r > rmax) rmax = r;
            if (se && isfinite(se[a])) {
                se2 += se[a] * se[a];
                if (se[a] > 0) {
                    z2 += (r / se[a]) * (r / se[a]);
                    nz++;
                }
            }
        }
    st->observed = cnt;
    st->nri_num = num;
    st->nri_den = den;
    /* a map with no finite entry has no NRI: NaN, never 0 ("purely relative") */
    st->nri = cnt == 0 ? NAN : den > 0 ? num / den : 0.0;
    st->res_min = noff ? rmin : NAN;
    st->res_max = noff ? rmax : NAN;
    st->res_rms = noff ? sqrt(r2 / (double)noff) : NAN;
    st->noise_rms = (se && noff) ? sqrt(se2 / (double)noff) : NAN;
    st->z_rms = nz ? sqrt(z2 / (double)nz) : NAN;
    /* recency slopes over the keys before each query */
    int64_t rows = 0, rising = 0;
    double slope_sum = 0;
    for (int i = 0; i < S; i++) {
        double sj = 0, sv = 0;
        int64_t m = 0;
        for (int j = 0; j < i; j++)
            if (isfinite(map[(size_t)i * S + j])) sj += j, sv += map[(size_t)i * S + j], m++;
        if (m < 2) continue;
        double jbar = sj / (double)m, vbar = sv / (double)m, sxy = 0, sxx = 0;
        for (int j = 0; j < i; j++) {
            double v = map[(size_t)i * S + j];
            if (!isfinite(v)) continue;
            sxy += (j - jbar) * (v - vbar);
            sxx += (j - jbar) * (j - jbar);
        }
        double slope = sxy / sxx;
        rows++;
        rising += slope > 0;
        slope_sum += slope;
    }
    st->rise_share = rows ? (double)rising / (double)rows : NAN;
    st->mean_slope = rows ? slope_sum / (double)rows : NAN;
}

void mp_posmap_sub(double *out, const double *map, int S, int k) {
    const int P = S - k;
    for (int i = 0; i < P; i++)
        for (int j = 0; j < P; j++) out[(size_t)i * P + j] = map[(size_t)(i + k) * S + (j + k)];
}

double mp_posmap_max_abs_diff(const double *a, const double *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return INFINITY;
        if (isnan(a[i])) continue;
        double d = fabs(a[i] - b[i]);
        if (d > m) m = d;
    }
    return m;
}
