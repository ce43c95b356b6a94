/* theory.h — closed forms of the parameter-free causal decoder (paper.md §1).
 *
 * Legend: n = number of positions (1-based in the paper, 0-based in arrays).
 * Implements:
 *   - Z_i, g(i), h(i) and the layer-2 score map S(2)_ij = g(i)/(h(i)h(j)) (j<i), 1 on the diagonal;
 *   - the exact infinite-width recursion on the Gram matrix, G ← M G Mᵀ with
 *     M = Softmax(Causal(N⁻¹GN⁻¹))·N⁻¹ + I, N = diag(√G_ii), which gives the scores of every
 *     layer l ≥ 1 when input rows have unit norm and pairwise inner product exactly α (layer 2
 *     equals the closed form; deeper layers have no closed form in the paper);
 *   - the variance of each layer's attention output by position from the same recursion: the
 *     closed form σ²·Σ_j a_ij² for values independent of the weights, and the decoder's own.
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
/* The scores out (layers,n,n) as mp_theory_gram_layers gives them and, when var_iid is not NULL,
 * per layer and position the variance of the attention output o_i = Σ_j a_ij y_j over sequences
 * and dimensions in units of the values' per-dimension variance σ² = 1/d (unit rows): var_iid
 * (layers,n) = Σ_j a_ij², the closed form for values independent of the weights (Chi et al. 2023;
 * 1/i for uniform attention), and var (layers,n) = Σ_jk a_ij a_ik <y_j,y_k>, the decoder's own at
 * infinite width (its values are correlated: α between inputs, and more after layer 1). At
 * layer 1: var_iid_i = (e² + (i−1)e^{2α}) / Z_i², var_i = (1−α)·var_iid_i + α. */
int mp_theory_layers(double *out, double *var_iid, double *var, double alpha, int n, int layers, int causal, MpErr *e);

#endif
