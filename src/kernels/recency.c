/* recency.c — see recency.h. Sections: row counts (naive, merge), map counts. */
#include "kernels/recency.h"

#include <stddef.h>


/* ================================================================ row counts */

uint64_t mp_recency_row_count_naive(const double *row, int n) {
    uint64_t c = 0;
    for (int k = 1; k < n; k++)
        for (int j = 0; j < k; j++) c += row[k] > row[j];
    return c;
}

/* Runs of this many keys are sorted (and counted) by insertion before the merges. */
#define RECENCY_RUN 16

/* Sorts each run of RECENCY_RUN of row (n) ascending into a and returns the pairs p < q inside a
 * run with row[q] > row[p]: inserting row[q], the elements it passes over are those >= it, so the
 * ones left before it are the run's earlier keys strictly below it. */
static uint64_t recency_runs(double *a, const double *row, int n) {
    uint64_t c = 0;
    for (int s = 0; s < n; s += RECENCY_RUN) {
        const int e = s + RECENCY_RUN < n ? s + RECENCY_RUN : n;
        for (int q = s; q < e; q++) {
            const double v = row[q];
            int m = q;
            while (m > s && a[m - 1] >= v) {
                a[m] = a[m - 1];
                m--;
            }
            a[m] = v;
            c += (uint64_t)(m - s);
        }
    }
    return c;
}

/* Merges the sorted halves src[0, h) and src[h, n) into dst and returns the pairs (left p, right
 * q) with src[q] > src[p]: when a right element is taken, the left ones taken before it are
 * exactly those strictly below it (ties take the right one first, uncounted). Branch-free: the
 * comparison picks the element and the count. */
static uint64_t recency_merge(double *dst, const double *src, int h, int n) {
    uint64_t c = 0;
    int p = 0, q = h, o = 0;
    while (p < h && q < n) {
        const double x = src[p], y = src[q];
        const int left = x < y;
        dst[o++] = left ? x : y;
        c += left ? 0 : (uint64_t)p;
        p += left;
        q += !left;
    }
    while (p < h) dst[o++] = src[p++];
    for (; q < n; q++) {
        c += (uint64_t)h;
        dst[o++] = src[q];
    }
    return c;
}

/* Compiled for AVX-512, AVX2 and baseline x86-64, chosen at run time (as model/fwd_kernels.c). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
#define RECENCY_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RECENCY_CLONES
#endif

/* The naive count with each key compared against all earlier ones side by side: no branch and
 * no dependence between the comparisons, 8 (double) or 16 (float) per AVX-512 instruction. The
 * count is an integer, so the lanes' order does not matter. Each key's loop runs to a whole
 * number of vectors (keys from k on are read and masked out) rather than ending in a scalar
 * tail. For rows up to MP_RECENCY_VEC_MAX this beats the merge count, whose every step waits on
 * the one before. */
#define RECENCY_COUNT_VEC(name, T)                                                                 \
    RECENCY_CLONES static uint64_t name(const T *row, int n) {                                     \
        uint64_t c = 0;                                                                            \
        for (int k = 1; k < n; k++) {                                                              \
            const T v = row[k];                                                                    \
            const int je = ((k + 15) & ~15) < n ? ((k + 15) & ~15) : n; /* keys >= k masked */    \
            int m = 0;                                                                             \
            _Pragma("omp simd reduction(+ : m)") for (int j = 0; j < je; j++) m += (row[j] < v) & (j < k); \
            c += (uint64_t)m;                                                                      \
        }                                                                                          \
        return c;                                                                                  \
    }
RECENCY_COUNT_VEC(recency_count_vec, double)    /* rows of doubles (the simulations' maps) */
RECENCY_COUNT_VEC(recency_count_vec_f32, float) /* rows of floats (a head's scores) */

uint64_t mp_recency_row_count_f32(const float *row, int n, double *scratch) {
    if (n <= MP_RECENCY_VEC_MAX) return recency_count_vec_f32(row, n);
    double *d = scratch + 2 * (size_t)n; /* the row as doubles, after the merge scratch */
    for (int j = 0; j < n; j++) d[j] = row[j];
    return mp_recency_row_count(d, n, scratch);
}

uint64_t mp_recency_row_count(const double *row, int n, double *scratch) {
    if (n <= MP_RECENCY_NAIVE_MAX) return mp_recency_row_count_naive(row, n);
    if (n <= MP_RECENCY_VEC_MAX) return recency_count_vec(row, n);
    /* bottom-up: sorted runs, then merges of doubling width, between the two halves of scratch */
    double *src = scratch, *dst = scratch + n;
    uint64_t c = recency_runs(src, row, n);
    for (int w = RECENCY_RUN; w < n; w *= 2) {
        for (int s = 0; s < n; s += 2 * w) {
            const int h = s + w < n ? w : n - s, e = s + 2 * w < n ? 2 * w : n - s;
            c += recency_merge(dst + s, src + s, h, e);
        }
        double *t = src;
        src = dst;
        dst = t;
    }
    return c;
}

/* ================================================================ map counts */

uint64_t mp_recency_map_count(const double *map, int S, int first, double *scratch) {
    uint64_t c = 0;
    for (int i = first + 2; i < S; i++) c += mp_recency_row_count(map + (size_t)i * S + first, i - first, scratch);
    return c;
}

uint64_t mp_recency_map_count_f32(const float *map, int S, int first, double *scratch) {
    uint64_t c = 0;
    for (int i = first + 2; i < S; i++) c += mp_recency_row_count_f32(map + (size_t)i * S + first, i - first, scratch);
    return c;
}

uint64_t mp_recency_triples(int S, int first) {
    const uint64_t n = S > first ? (uint64_t)(S - first) : 0;
    return n < 3 ? 0 : n * (n - 1) * (n - 2) / 6;
}
