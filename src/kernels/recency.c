/* recency.c — see recency.h. Sections: row counts (naive, merge), map counts. */
#include "kernels/recency.h"

#include <string.h>

/* ================================================================ row counts */

uint64_t mp_recency_row_count_naive(const double *row, int n) {
    uint64_t c = 0;
    for (int k = 1; k < n; k++)
        for (int j = 0; j < k; j++) c += row[k] > row[j];
    return c;
}

/* Sorts a (n) ascending, using tmp (n), and returns the pairs p < q (positions in the input)
 * with a[q] > a[p]. The left half holds earlier positions: for each element of the right half,
 * every left element strictly below it is one such pair. Equal values are not counted, and the
 * merge takes left first on ties, so it stays stable. */
static uint64_t recency_merge_count(double *a, double *tmp, int n) {
    if (n < 2) return 0;
    const int h = n / 2;
    uint64_t c = recency_merge_count(a, tmp, h) + recency_merge_count(a + h, tmp, n - h);
    int p = 0, q = h, o = 0;
    while (p < h && q < n) {
        if (a[p] < a[q]) tmp[o++] = a[p++];
        else {
            c += (uint64_t)p; /* left elements a[0..p) are strictly below a[q] */
            tmp[o++] = a[q++];
        }
    }
    while (p < h) tmp[o++] = a[p++];
    while (q < n) {
        c += (uint64_t)h;
        tmp[o++] = a[q++];
    }
    memcpy(a, tmp, (size_t)n * sizeof *a);
    return c;
}

uint64_t mp_recency_row_count(const double *row, int n, double *scratch) {
    if (n <= MP_RECENCY_NAIVE_MAX) return mp_recency_row_count_naive(row, n);
    memcpy(scratch, row, (size_t)n * sizeof *row);
    return recency_merge_count(scratch, scratch + n, n);
}

/* ================================================================ map counts */

uint64_t mp_recency_map_count(const double *map, int S, int first, double *scratch) {
    uint64_t c = 0;
    for (int i = first + 2; i < S; i++) c += mp_recency_row_count(map + (size_t)i * S + first, i - first, scratch);
    return c;
}

uint64_t mp_recency_map_count_f32(const float *map, int S, int first, double *scratch) {
    uint64_t c = 0;
    double *row = scratch + 2 * (size_t)S; /* the row as doubles, after the merge scratch */
    for (int i = first + 2; i < S; i++) {
        const float *r = map + (size_t)i * S + first;
        for (int j = 0; j < i - first; j++) row[j] = r[j];
        c += mp_recency_row_count(row, i - first, scratch);
    }
    return c;
}

uint64_t mp_recency_triples(int S, int first) {
    const uint64_t n = S > first ? (uint64_t)(S - first) : 0;
    return n < 3 ? 0 : n * (n - 1) * (n - 2) / 6;
}
