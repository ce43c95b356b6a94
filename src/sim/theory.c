/* theory.c — see theory.h. All arithmetic in double. */
#include "sim/theory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int mp_theory_init(MpTheory *t, double alpha, int n, MpErr *e) {
    memset(t, 0, sizeof *t);
    if (!(alpha >= 0 && alpha < 1)) return mp_err_set(e, "alpha must be in [0,1), got %g", alpha);
    if (n < 1 || n > 100000) return mp_err_set(e, "n must be in [1,100000], got %d", n);
    t->n = n;
    t->alpha = alpha;
    t->z = mp_try_calloc((size_t)n, sizeof(double));
    t->g = mp_try_calloc((size_t)n, sizeof(double));
    t->h = mp_try_calloc((size_t)n, sizeof(double));
    t->s2 = mp_try_calloc((size_t)n * (size_t)n, sizeof(double));
    if (!t->z || !t->g || !t->h || !t->s2) {
        mp_theory_free(t);
        return mp_err_set(e, "out of memory for n = %d", n);
    }
    const double E = exp(1.0), ea = exp(alpha), a = alpha;
    for (int i = 0; i < n; i++) {
        double zi = E + (double)i * ea; /* position i+1: Z = e + (i)e^α */
        t->z[i] = zi;
        t->g[i] = 2 * (1 - a) * ea / zi + 4 * a;
        double h2 = 1 + 3 * a + (1 - a) * (2 * E + ea) / zi + (1 - a) * (E * E - exp(1 + a)) / (zi * zi);
        t->h[i] = sqrt(h2);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            t->s2[(size_t)i * n + j] = j > i ? NAN : (j == i ? 1.0 : t->g[i] / (t->h[i] * t->h[j]));
    return MP_OK;
}

void mp_theory_free(MpTheory *t) {
    free(t->z);
    free(t->g);
    free(t->h);
    free(t->s2);
    memset(t, 0, sizeof *t);
}

/* Layer l's variance of the attention output per position i (D × the variance per dimension; unit
 * rows): the closed form for values independent of the weights, Σ_j a_ij² (into iid[i]), and the
 * exact one with the values' inner products, Σ_jk a_ij a_ik Ĝ_jk (into var[i]). Row i of M holds
 * a_ij·inv[j] (+1 on the diagonal); Ĝ_jk = G_jk·inv[j]·inv[k], so Σ_jk b_j b_k G_jk with
 * b_j = a_ij·inv[j], M's row without its diagonal 1. b [n] scratch. */
static void theory_variance(double *iid, double *var, const double *M, const double *G, const double *inv, int n, double *b) {
    for (int i = 0; i < n; i++) {
        const double *mi = M + (size_t)i * n;
        double s2 = 0, ex = 0;
        for (int j = 0; j < n; j++) {
            b[j] = mi[j] - (i == j ? 1.0 : 0.0);
            s2 += (b[j] / inv[j]) * (b[j] / inv[j]);
        }
        for (int j = 0; j < n; j++) {
            const double *gj = G + (size_t)j * n;
            double t = 0;
            for (int k = 0; k < n; k++) t += b[k] * gj[k];
            ex += b[j] * t;
        }
        iid[i] = s2, var[i] = ex;
    }
}

int mp_theory_gram_layers(double *out, double alpha, int n, int layers, int causal, MpErr *e) {
    return mp_theory_layers(out, NULL, NULL, alpha, n, layers, causal, e);
}

int mp_theory_layers(double *out, double *var_iid, double *var, double alpha, int n, int layers, int causal, MpErr *e) {
    if (!(alpha >= 0 && alpha < 1)) return mp_err_set(e, "alpha must be in [0,1), got %g", alpha);
    if (n < 1 || layers < 1) return mp_err_set(e, "n and layers must be >= 1");
    size_t nn = (size_t)n * n;
    double *G = malloc(nn * sizeof *G), *M = malloc(nn * sizeof *M), *T = malloc(nn * sizeof *T);
    double *inv = malloc((size_t)n * sizeof *inv), *b = malloc((size_t)n * sizeof *b);
    if (!G || !M || !T || !inv || !b) {
        free(G), free(M), free(T), free(inv), free(b);
        return mp_err_set(e, "out of memory for n = %d", n);
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) G[(size_t)i * n + j] = i == j ? 1.0 : alpha;
    for (int l = 0; l < layers; l++) {
        double *S = out + (size_t)l * nn; /* (n,n) this layer's scores */
        for (int i = 0; i < n; i++) inv[i] = 1.0 / sqrt(G[(size_t)i * n + i]);
        for (int i = 0; i < n; i++) {
            int jmax = causal ? i : n - 1;
            double mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                double s = G[(size_t)i * n + j] * inv[i] * inv[j];
                S[(size_t)i * n + j] = j <= jmax ? s : NAN;
                if (j <= jmax && s > mx) mx = s;
            }
            /* M_i = softmax row · N⁻¹ (+ I below) */
            double den = 0;
            for (int j = 0; j <= jmax; j++) den += exp(S[(size_t)i * n + j] - mx);
            for (int j = 0; j < n; j++)
                M[(size_t)i * n + j] =
                    (j <= jmax ? exp(S[(size_t)i * n + j] - mx) / den * inv[j] : 0.0) + (i == j ? 1.0 : 0.0);
        }
        if (var_iid) theory_variance(var_iid + (size_t)l * n, var + (size_t)l * n, M, G, inv, n, b);
        if (l + 1 == layers) break;
        /* G ← M G Mᵀ */
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int k = 0; k < n; k++) acc += M[(size_t)i * n + k] * G[(size_t)k * n + j];
                T[(size_t)i * n + j] = acc;
            }
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                double acc = 0;
                for (int k = 0; k < n; k++) acc += T[(size_t)i * n + k] * M[(size_t)j * n + k];
                G[(size_t)i * n + j] = acc;
            }
    }
    free(G), free(M), free(T), free(inv), free(b);
    return MP_OK;
}
