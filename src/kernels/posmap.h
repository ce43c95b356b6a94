/* posmap.h — statistics of a positional score map, shared by simulate, plot, probe and gram.
 *
 * Legend: S = sequence length; maps are [S,S] row-major (row = query i, column = key j), double,
 * NaN = unobserved (e.g. above the causal diagonal).
 *
 * Implements:
 *   - diagonal-mean normalisation (paper.md §2.3): Ŝ_ij = S_ij − mean{S_i'j' : i'−j' = i−j},
 *     the mean taken over the finite entries of that diagonal; a purely relative map becomes 0;
 *   - the non-relative index NRI = Σ Ŝ² / Σ (S − mean S)² over finite entries (docs/metrics.md),
 *     the residue range, and, given per-entry standard errors, the residue's size in noise units;
 *   - recency: per query row the slope of the score against earlier key positions (docs/metrics.md);
 *   - the part of a map from position k on (to leave out a BOS).
 * Does not: allocate (callers pass [S,S] outputs), or look at more than one map at a time.
 * Tested by: tests/test_posmap.c (relative maps → 0 exactly, hand-computed NRI).
 */
#ifndef MP_POSMAP_H
#define MP_POSMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct MpPosStats {
    double nri_num, nri_den; /* NRI = nri_num / nri_den: Σ Ŝ² and Σ (S − mean S)² over finite entries */
    double nri;          /* non-relative index in [0,1]; 0 for a purely relative map; NaN when
                            the map has no finite entry (observed == 0) */
    double res_min;      /* min of Ŝ over finite off-diagonal entries */
    double res_max;      /* max of Ŝ over finite off-diagonal entries */
    double res_rms;      /* root mean square of Ŝ over the same entries */
    double noise_rms;    /* rms of the standard errors (NaN when none were given) */
    double z_rms;        /* sqrt(mean (Ŝ/se)²): ≈1 for pure noise, ≫1 for a real residue */
    int64_t observed;    /* finite entries */
    /* recency: for each query row with ≥ 2 finite off-diagonal keys j < i, the least-squares
     * slope of S_ij against j (score per position; > 0: the score rises as the key approaches) */
    double rise_share;   /* share of such rows with a positive slope (NaN when there are none) */
    double mean_slope;   /* mean slope over those rows */
} MpPosStats;

/* Ŝ = map minus the mean of its diagonal (offset i − j) over finite entries; NaN stays NaN.
 * out [S,S] may alias nothing; map [S,S]. The fast version reads row by row; the reference
 * walks diagonals. Both give the same bits (tests/test_posmap.c). */
void mp_posmap_diagnorm(double *out, const double *map, int S);
void mp_posmap_diagnorm_ref(double *out, const double *map, int S);
/* map, resid [S,S]; se [S,S] standard errors of map's entries, or NULL. */
void mp_posmap_stats(MpPosStats *st, const double *map, const double *resid, const double *se,
                     int S);
/* out [(S-k), (S-k)] = map's rows and columns k..S-1 (0 <= k < S), e.g. k = 1 to leave out a
 * BOS that starts every sequence; out may not alias map. */
void mp_posmap_sub(double *out, const double *map, int S, int k);

/* max |a − b| over entries finite in both; +inf when their NaN patterns differ. a, b (n). */
double mp_posmap_max_abs_diff(const double *a, const double *b, size_t n);

#endif
