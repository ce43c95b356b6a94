/* recency.h — the recency probability (RP) of a score map, by its definition (Kim et al.,
 * "LayerNorm Induces Recency Bias in Transformer Decoders", the later version of the paper).
 *
 * Legend: S = sequence length; maps are [S,S] row-major doubles, row = query i, column = key j.
 *
 * RP of one map = (number of triples j < k < i with S[i,k] > S[i,j]) / (number of triples).
 * Ties count as not recent. 0.5 = no preference, above = the later key wins (recency), below =
 * the earlier one wins (primacy). Over many sequences the counts and the triples are summed (the
 * later paper's definition: B·S(S−1)(S−2)/6 triples); from position `first` on (first = 1 leaves
 * out a BOS), only keys and queries ≥ first count.
 *
 * Implements: the naive O(n²) pair count of one row (the reference); the fast count: every pair
 * compared with vector instructions up to MP_RECENCY_VEC_MAX keys, beyond that an O(n log n) merge
 * count (insertion-sorted runs of 16, then bottom-up merges between two buffers); a whole map's
 * count; the number of triples. Counts are exact integers, so any order of summation gives the same bits.
 * Does not: allocate (callers pass scratch), or look at probabilities.
 * Tested by: tests/test_recency.c (merge against naive on random rows with ties; brute-force
 * triple count of a map; closed forms for monotone rows).
 */
#ifndef MP_RECENCY_H
#define MP_RECENCY_H

#include <stdint.h>

/* Rows up to this many keys are counted by the naive loop (faster for short rows). */
#define MP_RECENCY_NAIVE_MAX 48

/* Rows up to this many keys (and more than MP_RECENCY_NAIVE_MAX) are counted by comparing every
 * pair with vector instructions; longer ones by the merge count. */
#define MP_RECENCY_VEC_MAX 2048

/* Pairs j < k < n with row[k] > row[j] (strictly), by comparing every pair. row (n). */
uint64_t mp_recency_row_count_naive(const double *row, int n);
/* The same count, fast: every pair compared with vector instructions up to MP_RECENCY_VEC_MAX keys,
 * by merge sort beyond (O(n log n)); scratch (2n doubles). row (n) is not changed. */
uint64_t mp_recency_row_count(const double *row, int n, double *scratch);
/* The same count of a row of floats (a head's scores): the count of the row converted to doubles
 * (the conversion keeps the order); pairs compared 16 per AVX-512 instruction up to
 * MP_RECENCY_VEC_MAX keys. scratch (3n doubles). */
uint64_t mp_recency_row_count_f32(const float *row, int n, double *scratch);
/* Σ over query rows i ≥ first of the row count over keys first..i−1 of map (S,S) (entries with
 * j ≥ i are not read). scratch (2S doubles). */
uint64_t mp_recency_map_count(const double *map, int S, int first, double *scratch);
/* Same, map stored as floats (one head of a probe's scores); scratch (3S doubles). */
uint64_t mp_recency_map_count_f32(const float *map, int S, int first, double *scratch);
/* Triples j < k < i with first ≤ j, i < S: C(S − first, 3). */
uint64_t mp_recency_triples(int S, int first);

#endif
