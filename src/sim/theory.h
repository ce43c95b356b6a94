/* theory.h — closed forms of the parameter-free causal decoder (paper.md §1).
 *
 * Legend: n = number of positions (1-based in the paper, 0-based in arrays).
 * Implements:
 *   - Z_i, g(i), h(i) and the layer-2 score map S(2)_ij = g(i)/(h(i)h(j)) (j<i), 1 on the diagonal;
 *   - the exact infinite-width recursion on the Gram matrix, G ← M G Mᵀ with
 *     M = Softmax(Causal(N⁻¹GN⁻¹))·N⁻¹ + I, N = diag(√G_ii), which gives the scores of every
 *     layer l ≥ 1 when input rows have unit norm and pairwise inner product exactly α (layer 2
 *     equals the closed form; deeper layers have no closed form in the paper).
 * Does not: model finite-d noise (that is `simulate`), LayerNorm or RoPE.
 * Tested by: tests/test_theory.c (check values, explicit α-correlated vectors, recursion).
 */
#ifndef MP_THEORY_H
#define MP_THEORY_H

#include "core/err.h" /* MpErr */

typedef struct MpTheory {
    int n;
    double alpha;
    double *z;  /* (n) Z_i = e + (i−1)e^α */
    double *g;  /* (n) g(i), the inner product <x_i(1), x_j(1)> for any j < i */
    double *h;  /* (n) h(i) = |x_i(1)| */
    double *s2; /* (n,n) layer-2 scores; NaN above the diagonal */
} MpTheory;

int mp_theory_init(MpTheory *t, double alpha, int n, MpErr *e);
void mp_theory_free(MpTheory *t);

/* out (layers,n,n): scores of layers 1..layers from the Gram recursion; NaN above the diagonal
 * when causal. causal=0 gives the bidirectional decoder. */
int mp_theory_gram_layers(double *out, double alpha, int n, int layers, int causal, MpErr *e);

#endif
