/* simulate.c — see simulate.h.
 *
 * ================================================================ layout
 *   inputs           one sequence's x from its own Philox stream (paper's or the later version's)
 *   layer kernels    norm, RoPE, scores, softmax, A·Y + X (naive loops, vectorisable over the
 *                    innermost index; no reassociation, so any build gives the same bits)
 *   driver           blocks of sequences in parallel, block sums merged in order
 */
#include "sim/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/mpi.h"      /* mp_mpi_*: blocks shared among MPI ranks (cfg.mpi) */
#include "core/progress.h" /* MpProgress */
#include "core/rng.h"      /* MpRng, mp_rng_normal_fill */
#include "core/util.h"     /* mp_time_now, mp_threads_resolve */
#include "kernels/recency.h" /* mp_recency_map_count: recency triples per sequence */
#include "kernels/vexp.h"   /* mp_vexp: vectorisable exp */

/* Sequences per block: the unit of work and of ordered summation. Changing it changes the
 * rounding of the sums (not their meaning), so it is fixed. */
#define SIM_BLOCK 64
/* Blocks per round of the parallel loop: a stop asked by the progress callback ends the run at
 * the end of the round (the rounds run in order, and so do the blocks within one: the sums do
 * not depend on it). */
#define SIM_ROUND 256

void mp_sim_config_default(MpSimConfig *c) {
    memset(c, 0, sizeof *c);
    c->batch = 100000;
    c->seq = 50;
    c->dim = 64;
    c->layers = 4;
    c->alpha = 0;
    c->norm = MP_NORM_L2;
    c->scale = 1;
    c->rope = 0;
    c->rope_theta = 10000;
    c->causal = 1;
    c->seed = 0;
    c->threads = 0;
    c->ln_eps = 1e-12;
    c->form = MP_SIM_FORM_PAPER;
    c->residual = 1;
}

double mp_sim_scale_value(const char *word, int dim) {
    if (!strcmp(word, "1")) return 1.0;
    if (!strcmp(word, "sqrt")) return sqrt((double)dim);
    if (!strcmp(word, "d")) return (double)dim;
    return -1;
}

int mp_sim_config_check(const MpSimConfig *c, MpErr *e) {
    if (c->batch < 1) return mp_err_set(e, "batch must be >= 1");
    if (c->seq < 1 || c->seq > 4096) return mp_err_set(e, "seq must be in [1, 4096]");
    if (c->dim < 1 || c->dim > 65536) return mp_err_set(e, "dim must be in [1, 65536]");
    if (c->layers < 1 || c->layers > 64) return mp_err_set(e, "layers must be in [1, 64]");
    int nt; /* the count sim_blocks_run will use: --threads, else OMP_NUM_THREADS or the cores */
    if (mp_threads_resolve(c->threads, "threads", &nt, e) != MP_OK) return MP_ERR;
    if (!(c->alpha >= 0 && c->alpha < 1)) return mp_err_set(e, "alpha must be in [0, 1)");
    if (!(c->scale > 0) || !isfinite(c->scale)) return mp_err_set(e, "scale must be > 0");
    if (c->rope && c->dim % 2) return mp_err_set(e, "--rope needs an even --dim (got %d)", c->dim);
    if (c->rope && !(c->rope_theta > 1)) return mp_err_set(e, "rope theta must be > 1");
    if (c->norm == MP_NORM_LAYERNORM && c->dim < 2) return mp_err_set(e, "layernorm needs dim >= 2");
    if (c->norm != MP_NORM_L2 && c->norm != MP_NORM_LAYERNORM && c->norm != MP_NORM_NONE)
        return mp_err_set(e, "unknown norm %d", (int)c->norm);
    if (c->form != MP_SIM_FORM_PAPER && c->form != MP_SIM_FORM_RECENCY)
        return mp_err_set(e, "unknown layer form %d", (int)c->form);
    if (c->form == MP_SIM_FORM_RECENCY && c->seq >= 3 &&
        (double)c->batch * (double)mp_recency_triples(c->seq, 0) > 9e18)
        return mp_err_set(e, "batch x C(seq,3) = %lld x %llu triples overflows the recency count", (long long)c->batch,
                          (unsigned long long)mp_recency_triples(c->seq, 0));
    return MP_OK;
}

/* Σ a_k·b_k over n entries in 8 lanes (lane u takes k ≡ u mod 8) combined in a fixed tree: a
 * fixed summation order that vectorises at any width without changing a bit, and 8 independent
 * add chains instead of one. */
static inline double sim_dot8(const double *a, const double *b, int n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int k = 0;
    for (; k + 8 <= n; k += 8)
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) acc[u] += a[k + u] * b[k + u];
    for (int u = 0; k < n; k++, u++) acc[u] += a[k] * b[k];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Σ a_k over n entries, in the same lane order as sim_dot8. */
static inline double sim_sum8(const double *a, int n) {
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int k = 0;
    for (; k + 8 <= n; k += 8)
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) acc[u] += a[k + u];
    for (int u = 0; k < n; k++, u++) acc[u] += a[k];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Σ o_k and Σ o_k² of o = a − b over n entries, in the lanes and tree of sim_dot8 (one pass). */
static inline void sim_diff_moments8(const double *a, const double *b, int n, double *s1, double *s2) {
    double p[8] = {0, 0, 0, 0, 0, 0, 0, 0}, q[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int k = 0;
    for (; k + 8 <= n; k += 8)
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            const double o = a[k + u] - b[k + u];
            p[u] += o;
            q[u] += o * o;
        }
    for (int u = 0; k < n; k++, u++) {
        const double o = a[k] - b[k];
        p[u] += o;
        q[u] += o * o;
    }
    *s1 = ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
    *s2 = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
}

/* ================================================================ inputs */

void mp_sim_sequence_input(double *x, const MpSimConfig *c, int64_t b) {
    const int S = c->seq, D = c->dim;
    const double l = sqrt(c->alpha / (1 - c->alpha));
    MpRng r;
    mp_rng_init(&r, c->seed, (uint64_t)b);
    /* first the shared component (D), then the rows (S·D) */
    double shared[D];
    mp_rng_normal_fill(&r, shared, (size_t)D);
    mp_rng_normal_fill(&r, x, (size_t)S * D);
    if (c->form == MP_SIM_FORM_RECENCY) { /* (randn + l·shared) / √D, not normalised */
        const double inv_sd = 1.0 / sqrt((double)D);
        for (int i = 0; i < S; i++)
            for (int k = 0; k < D; k++) x[(size_t)i * D + k] = (x[(size_t)i * D + k] + l * shared[k]) * inv_sd;
        return;
    }
    for (int i = 0; i < S; i++) {
        double *xi = x + (size_t)i * D;
        for (int k = 0; k < D; k++) xi[k] += l * shared[k];
        const double inv = 1.0 / sqrt(sim_dot8(xi, xi, D));
        for (int k = 0; k < D; k++) xi[k] *= inv;
    }
}

/* ================================================================ layer kernels */

typedef struct SimWork {
    double *x;     /* (S,D) residual stream */
    double *y;     /* (S,D) normalised rows: the values */
    double *q;     /* (S,D) queries = keys: y, rotated when RoPE */
    double *qt;    /* (D,Sp) q transposed, Sp = S rounded up to 8 */
    double *sc;    /* (S,S) scores, then probabilities */
    double *psum;  /* (L,S,S) block sum of scores */
    double *psq;   /* (L,S,S) block sum of squared scores */
    double *pprob; /* (L,S,S) block sum of probabilities */
    double *prc;   /* (L) block sum of recency triple counts (recency form; an integer, exact in a
                      double: ≤ 64·C(4096,3) < 2^53) */
    double *prq;   /* (L) block sum of squared per-sequence counts */
    double *pvar;  /* (L,SIM_VM,S) block sums of the variance moments (sim_variance_add) */
    double *rsc;   /* (2S) scratch of the recency count */
    double *x0;    /* (S,D) x before the layer's mix: the attention output is x − x0 */
    double *ny;    /* (S) |y_j|² of the layer's values */
} SimWork;

/* The variance moments per layer and position (sim_variance_add): of each sequence's attention
 * output o_i = Σ_j a_ij y_j (before the residual), u1 = mean_k o_ik and u2 = mean_k o_ik², and of
 * the closed form for values independent of the weights, c = Σ_j a_ij² |y_j|² / D (σ²·Σ_j a_ij²
 * with the values' own mean square per dimension): Σu1, Σu2, Σu1², Σu2², Σu1·u2, Σc, Σc², Σu2·c,
 * Σu1·c over the sequences. */
#define SIM_VM 9

/* y (S,D) = norm(x) row by row (a copy without a norm). */
static void sim_norm_forward(double *y, const double *x, const MpSimConfig *c) {
    const int S = c->seq, D = c->dim;
    if (c->norm == MP_NORM_NONE) {
        memcpy(y, x, (size_t)S * D * sizeof *y);
        return;
    }
    for (int i = 0; i < S; i++) {
        const double *xi = x + (size_t)i * D;
        double *yi = y + (size_t)i * D;
        if (c->norm == MP_NORM_L2) {
            const double inv = 1.0 / sqrt(sim_dot8(xi, xi, D));
            for (int k = 0; k < D; k++) yi[k] = xi[k] * inv;
        } else {
            const double mu = sim_sum8(xi, D) / D;
            for (int k = 0; k < D; k++) yi[k] = xi[k] - mu; /* centred, then scaled in place */
            const double var = sim_dot8(yi, yi, D) / D;
            const double inv = 1.0 / sqrt(var + c->ln_eps);
            for (int k = 0; k < D; k++) yi[k] *= inv;
        }
    }
}

/* q (S,D) = q(y): HF rotate-half RoPE at positions 0..S−1, or a copy.
 * cs, sn (S, D/2): cos and sin of position·inv_freq. */
static void sim_rope_forward(double *q, const double *y, const double *cs, const double *sn,
                             const MpSimConfig *c) {
    const int S = c->seq, D = c->dim, H = D / 2;
    if (!c->rope) {
        memcpy(q, y, (size_t)S * D * sizeof *q);
        return;
    }
    for (int i = 0; i < S; i++) {
        const double *yi = y + (size_t)i * D, *ci = cs + (size_t)i * H, *si = sn + (size_t)i * H;
        double *qi = q + (size_t)i * D;
        for (int k = 0; k < H; k++) {
            qi[k] = yi[k] * ci[k] - yi[k + H] * si[k];
            qi[k + H] = yi[k + H] * ci[k] + yi[k] * si[k];
        }
    }
}

/* The score kernel works on tiles of SIM_QB queries × SIM_KB keys: SIM_QB independent
 * accumulator vectors hide the add latency, and causal rows waste at most one tile of keys. */
#define SIM_QB 4
#define SIM_KB 8
#define SIM_PAD(S) (((S) + SIM_KB - 1) / SIM_KB * SIM_KB)

/* qt (D, Sp) = qᵀ, Sp = S rounded up to a multiple of SIM_KB, zero padded. */
static void sim_transpose(double *qt, const double *q, int S, int D) {
    const int Sp = SIM_PAD(S);
    for (int k = 0; k < D; k++) {
        double *row = qt + (size_t)k * Sp;
        for (int i = 0; i < S; i++) row[i] = q[(size_t)i * D + k];
        for (int i = S; i < Sp; i++) row[i] = 0;
    }
}

/* sc (S,S): row i holds q_i·q_j / scale for the keys j it sees (j ≤ i when causal), computed
 * in SIM_QB × SIM_KB tiles from q (S,D) and qt (D,Sp): each entry is summed over k in ascending
 * order, exactly as the naive loop would, so any tiling or vector width gives the same bits.
 * The map is symmetric, so the bidirectional upper triangle is mirrored from the lower one. */
static void sim_scores_forward(double *sc, const double *q, const double *qt, const MpSimConfig *c) {
    const int S = c->seq, D = c->dim, Sp = SIM_PAD(S);
    const double inv_scale = 1.0 / c->scale;
    for (int i0 = 0; i0 < S; i0 += SIM_QB) {
        const int nq = S - i0 < SIM_QB ? S - i0 : SIM_QB;
        /* rows of a partial last tile repeat row i0 (computed, never stored) */
        const double *qr[SIM_QB];
        for (int r = 0; r < SIM_QB; r++) qr[r] = q + (size_t)(i0 + (r < nq ? r : 0)) * D;
        const int jmax = i0 + nq - 1; /* the tile's last row sees keys 0..jmax */
        for (int j0 = 0; j0 <= jmax; j0 += SIM_KB) {
            double acc[SIM_QB][SIM_KB] = {{0}};
            for (int k = 0; k < D; k++) {
                const double *t = qt + (size_t)k * Sp + j0;
#pragma GCC unroll 4
                for (int r = 0; r < SIM_QB; r++) {
                    const double a = qr[r][k];
#pragma GCC unroll 8
                    for (int u = 0; u < SIM_KB; u++) acc[r][u] += a * t[u];
                }
            }
            for (int r = 0; r < nq; r++) {
                double *row = sc + (size_t)(i0 + r) * S;
                for (int u = 0; u < SIM_KB && j0 + u <= i0 + r; u++) row[j0 + u] = acc[r][u] * inv_scale;
            }
        }
    }
    if (!c->causal)
        for (int i = 0; i < S; i++)
            for (int j = i + 1; j < S; j++) sc[(size_t)i * S + j] = sc[(size_t)j * S + i];
}

/* Adds this sequence's scores to the block sums, then turns sc into probabilities in place
 * (max subtracted; masked entries stay exact zeros) and adds those too. */
static void sim_softmax_accumulate(double *sc, double *psum, double *psq, double *pprob,
                                   const MpSimConfig *c) {
    const int S = c->seq;
    for (int i = 0; i < S; i++) {
        double *row = sc + (size_t)i * S;
        const int jn = c->causal ? i + 1 : S;
        double *ps = psum + (size_t)i * S, *pq = psq + (size_t)i * S, *pp = pprob + (size_t)i * S;
        double mx = row[0];
#pragma omp simd
        for (int j = 0; j < jn; j++) {
            ps[j] += row[j];
            pq[j] += row[j] * row[j];
        }
        /* max is exact in any order, so this one reduction may be vectorised */
#pragma omp simd reduction(max : mx)
        for (int j = 0; j < jn; j++) mx = row[j] > mx ? row[j] : mx;
        double den = 0;
#pragma omp simd
        for (int j = 0; j < jn; j++) row[j] = mp_vexp(row[j] - mx);
        for (int j = 0; j < jn; j++) den += row[j];
        const double inv = 1.0 / den;
        for (int j = 0; j < jn; j++) {
            row[j] *= inv;
            pp[j] += row[j];
        }
    }
}

/* Output columns per pass of the mixing kernel, held in registers across the key loop. */
#define SIM_XB 64

/* x (S,D) += A (S,S) · y (S,D). Each x_ik adds p_ij·y_jk for j ascending, as the naive loop. */
static void sim_mix_forward(double *x, const double *a, const double *y, const MpSimConfig *c) {
    const int S = c->seq, D = c->dim;
    for (int i = 0; i < S; i++) {
        double *xi = x + (size_t)i * D;
        const double *ai = a + (size_t)i * S;
        const int jn = c->causal ? i + 1 : S;
        int k0 = 0;
        for (; k0 + SIM_XB <= D; k0 += SIM_XB) {
            double acc[SIM_XB];
            for (int u = 0; u < SIM_XB; u++) acc[u] = xi[k0 + u];
            for (int j = 0; j < jn; j++) {
                const double p = ai[j];
                const double *yj = y + (size_t)j * D + k0;
#pragma GCC unroll 64
                for (int u = 0; u < SIM_XB; u++) acc[u] += p * yj[u];
            }
            for (int u = 0; u < SIM_XB; u++) xi[k0 + u] = acc[u];
        }
        for (int j = 0; j < jn; j++) {
            const double p = ai[j];
            const double *yj = y + (size_t)j * D;
            for (int k = k0; k < D; k++) xi[k] += p * yj[k];
        }
    }
}

/* The layer's variance moments (SIM_VM) of one sequence into pv (SIM_VM, S): the attention output
 * o = x − x0 (x after the mix, x0 before: the same bits of x as a run without this statistic; o to
 * the rounding of x), probabilities in w->sc, values in w->y. */
__attribute__((noinline)) /* out of sim_sequence_forward's flattened clones: their kernels keep the code of a
                             run without --variance (inlined, they lost 4.7% of instructions to it) */
static void sim_variance_add(SimWork *w, double *pv, const MpSimConfig *c) {
    const int S = c->seq, D = c->dim;
    for (int j = 0; j < S; j++) w->ny[j] = sim_dot8(w->y + (size_t)j * D, w->y + (size_t)j * D, D);
    for (int i = 0; i < S; i++) {
        const double *ai = w->sc + (size_t)i * S;
        double t1, t2, cl = 0;
        sim_diff_moments8(w->x + (size_t)i * D, w->x0 + (size_t)i * D, D, &t1, &t2);
        const int jn = c->causal ? i + 1 : S;
        for (int j = 0; j < jn; j++) cl += ai[j] * ai[j] * w->ny[j];
        const double u1 = t1 / D, u2 = t2 / D, cv = cl / D;
        const double m[SIM_VM] = {u1, u2, u1 * u1, u2 * u2, u1 * u2, cv, cv * cv, u2 * cv, u1 * cv};
        for (int q = 0; q < SIM_VM; q++) pv[(size_t)q * S + i] += m[q];
    }
}

/* One sequence through all layers, adding its maps to the work's block sums. Compiled for
 * AVX-512, AVX2 and baseline x86-64 and chosen at run time (the kernels above inline into it);
 * every clone computes the same bits, since no loop is reassociated. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
__attribute__((target_clones("avx512f", "avx2", "default"), flatten))
#endif
static void sim_sequence_forward(SimWork *w, const double *cs, const double *sn, const MpSimConfig *c,
                                 int64_t b) {
    const size_t SS = (size_t)c->seq * c->seq;
    mp_sim_sequence_input(w->x, c, b);
    for (int l = 0; l < c->layers; l++) {
        sim_norm_forward(w->y, w->x, c);
        sim_rope_forward(w->q, w->y, cs, sn, c);
        sim_transpose(w->qt, w->q, c->seq, c->dim);
        sim_scores_forward(w->sc, w->q, w->qt, c);
        if (c->form == MP_SIM_FORM_RECENCY) {
            const uint64_t n = mp_recency_map_count(w->sc, c->seq, 0, w->rsc);
            w->prc[l] += (double)n;
            w->prq[l] += (double)n * (double)n; /* exact below 2^53 (S = 10: B < 6e11) */
        }
        sim_softmax_accumulate(w->sc, w->psum + l * SS, w->psq + l * SS, w->pprob + l * SS, c);
        if (!c->residual) memset(w->x, 0, (size_t)c->seq * c->dim * sizeof *w->x);
        if (c->variance) memcpy(w->x0, w->x, (size_t)c->seq * c->dim * sizeof *w->x);
        sim_mix_forward(w->x, w->sc, w->y, c);
        if (c->variance) sim_variance_add(w, w->pvar + (size_t)l * SIM_VM * c->seq, c);
    }
}

/* ================================================================ driver */

/* The doubles of one block's sums: the three maps (L,S,S), the recency counts and their squares
 * (L each), the variance moments (L,SIM_VM,S). */
static size_t sim_nblk(const MpSimConfig *c) {
    const size_t L = (size_t)c->layers, S = (size_t)c->seq;
    return 3 * L * S * S + 2 * L + L * SIM_VM * S;
}

/* A rank's block k (its block sums, sim_nblk doubles) to rank 0. A new per-block sum must travel
 * here too, and be added in sim_blocks_recv, or an MPI run drops it (tests/test_mpi.c compares the
 * outputs with one process). */
static void sim_block_send(const double *blk, size_t n, int64_t k) {
    const int64_t hd[1] = {k};
    mp_mpi_send_i64(hd, 1, 0);
    mp_mpi_send_f64(blk, n, 0);
}

/* Rank 0: receives blocks from..to-1 (each from rank k mod nr) into buf and adds them to the
 * sums in block order. Returns to. */
typedef struct SimProgress SimProgress;
static void sim_progress(SimProgress *p, int64_t done);
static int64_t sim_blocks_recv(double *sum, double *sq, double *prob, uint64_t *rpc, double *rpq, double *var, int L,
                               double *buf, size_t LSS, size_t nvar, int64_t from, int64_t to, int nr, int64_t batch,
                               SimProgress *prog) {
    for (int64_t k = from; k < to; k++) {
        int64_t hd[1];
        const int src = (int)(k % nr);
        mp_mpi_recv_i64(hd, 1, src);
        if (hd[0] != k) {
            fprintf(stderr, "maskpos simulate: error: rank %d sent block %lld where %lld was due\n", src,
                    (long long)hd[0], (long long)k);
            mp_mpi_abort(2);
        }
        mp_mpi_recv_f64(buf, 3 * LSS + 2 * (size_t)L + nvar, src);
        for (size_t a = 0; a < LSS; a++) {
            sum[a] += buf[a];
            sq[a] += buf[LSS + a];
            prob[a] += buf[2 * LSS + a];
        }
        for (int l = 0; l < L; l++) {
            rpc[l] += (uint64_t)buf[3 * LSS + l];
            rpq[l] += buf[3 * LSS + L + l];
        }
        for (size_t a = 0; a < nvar; a++) var[a] += buf[3 * LSS + 2 * (size_t)L + a];
        const int64_t b1 = (k + 1) * SIM_BLOCK < batch ? (k + 1) * SIM_BLOCK : batch;
        sim_progress(prog, b1);
    }
    return to;
}

/* The recency probability per layer from the summed counts (rpc, taken over by r) and the summed
 * squares of per-sequence counts (rpq, freed): RP = Σn / (B·T), se = sd(n/T) / √B. */
static void sim_recency_finish(MpSimResult *r, uint64_t *rpc, double *rpq, const MpSimConfig *c) {
    const int L = c->layers;
    const double nb = (double)c->batch;
    r->rp_count = rpc;
    r->rp_triples = mp_recency_triples(c->seq, 0);
    r->rp = malloc((size_t)L * sizeof *r->rp);
    r->rp_se = malloc((size_t)L * sizeof *r->rp_se);
    if (r->rp && r->rp_se)
        for (int l = 0; l < L; l++) {
            const double T = (double)r->rp_triples;
            if (r->rp_triples == 0) {
                r->rp[l] = r->rp_se[l] = NAN;
                continue;
            }
            const double m = (double)rpc[l] / nb, var = c->batch > 1 ? (rpq[l] / nb - m * m) * nb / (nb - 1) : 0;
            r->rp[l] = m / T;
            r->rp_se[l] = sqrt(var > 0 ? var / nb : 0) / T;
        }
    if (!r->rp || !r->rp_se) {
        free(r->rp), free(r->rp_se);
        r->rp = r->rp_se = NULL;
    }
    free(rpq);
}

void mp_sim_result_free(MpSimResult *r) {
    free(r->scores);
    free(r->se);
    free(r->probs);
    free(r->diagnorm);
    free(r->stats);
    free(r->rp_count);
    free(r->rp);
    free(r->rp_se);
    free(r->var);
    memset(r, 0, sizeof *r);
}

/* The run's sums and tables, one lifetime: allocated by sim_sums_init, freed by sim_sums_free
 * (which accepts a zeroed struct and the pointers already taken over by the result). */
typedef struct SimSums {
    double *sum, *sq, *prob; /* (L,S,S) Σ scores, Σ scores², Σ probabilities */
    uint64_t *rpc;           /* (L) Σ recency triple counts */
    double *rpq;             /* (L) Σ squared per-sequence counts */
    double *var;             /* (L,SIM_VM,S) Σ variance moments */
    double *cs, *sn;         /* (S, D/2) RoPE tables */
    double *rbuf;            /* one received block (MPI rank 0 of N > 1), or NULL */
} SimSums;

static void sim_sums_free(SimSums *u) {
    free(u->sum), free(u->sq), free(u->prob), free(u->rpc), free(u->rpq), free(u->var), free(u->cs), free(u->sn);
    free(u->rbuf);
    memset(u, 0, sizeof *u);
}

static int sim_sums_init(SimSums *u, const MpSimConfig *c, int recv, MpErr *e) {
    const int S = c->seq, D = c->dim, L = c->layers, H = D / 2;
    const size_t LSS = (size_t)L * S * S;
    memset(u, 0, sizeof *u);
    u->sum = calloc(LSS, sizeof *u->sum), u->sq = calloc(LSS, sizeof *u->sq), u->prob = calloc(LSS, sizeof *u->prob);
    u->rpc = calloc((size_t)L, sizeof *u->rpc), u->rpq = calloc((size_t)L, sizeof *u->rpq);
    u->var = calloc((size_t)L * SIM_VM * S, sizeof *u->var);
    u->cs = calloc((size_t)S * (H ? H : 1), sizeof *u->cs), u->sn = calloc((size_t)S * (H ? H : 1), sizeof *u->sn);
    if (!u->sum || !u->sq || !u->prob || !u->cs || !u->sn || !u->rpc || !u->rpq || !u->var) {
        sim_sums_free(u);
        return mp_err_set(e, "out of memory for maps of %d layers x %d x %d", L, S, S);
    }
    for (int p = 0; p < S; p++)
        for (int k = 0; k < H; k++) {
            double inv_freq = pow(c->rope_theta, -2.0 * k / D);
            u->cs[(size_t)p * H + k] = cos(p * inv_freq);
            u->sn[(size_t)p * H + k] = sin(p * inv_freq);
        }
    if (recv && !(u->rbuf = malloc(sim_nblk(c) * sizeof *u->rbuf))) {
        sim_sums_free(u);
        return mp_err_set(e, "out of memory for a received block");
    }
    return MP_OK;
}

/* Progress of the blocks: the bar and the caller's callback (whose nonzero return stops a
 * one-process run at the next block; under MPI the return is ignored: the ranks cannot stop
 * apart). */
typedef struct SimProgress {
    MpProgress bar;
    const MpSimConfig *c;
    int alone; /* one process: a stop is possible */
    int stop;  /* set once the callback asked to stop */
} SimProgress;

/* Called from one thread at a time (the ordered region). */
static void sim_progress(SimProgress *p, int64_t done) {
    mp_progress_update(&p->bar, done);
    if (p->c->progress_fn && p->c->progress_fn(p->c->progress_ctx, done, p->c->batch) && p->alone) {
#pragma omp atomic write
        p->stop = 1;
    }
}

/* Thread-private buffers of one worker (one allocation), carved into w; NULL when out of memory. */
static double *sim_work_alloc(SimWork *w, const MpSimConfig *c) {
    const int S = c->seq, D = c->dim, L = c->layers;
    const size_t SS = (size_t)S * S, LSS = (size_t)L * SS, NBLK = sim_nblk(c), Sp = (size_t)SIM_PAD(S);
    const size_t per = (size_t)S * D * 4 + (size_t)D * Sp + SS + NBLK + 3 * (size_t)S;
    double *blk = malloc(per * sizeof(double));
    w->x = blk;
    w->y = blk ? w->x + (size_t)S * D : NULL;
    w->q = blk ? w->y + (size_t)S * D : NULL;
    w->qt = blk ? w->q + (size_t)S * D : NULL;
    w->sc = blk ? w->qt + (size_t)D * Sp : NULL;
    w->psum = blk ? w->sc + SS : NULL;
    w->psq = blk ? w->psum + LSS : NULL;
    w->pprob = blk ? w->psq + LSS : NULL;
    w->prc = blk ? w->pprob + LSS : NULL;
    w->prq = blk ? w->prc + L : NULL;
    w->pvar = blk ? w->prq + L : NULL;
    w->rsc = blk ? w->pvar + (size_t)L * SIM_VM * S : NULL;
    w->x0 = blk ? w->rsc + 2 * (size_t)S : NULL;
    w->ny = blk ? w->x0 + (size_t)S * D : NULL;
    return blk;
}

/* The blocks of sequences: this rank's blocks rank, rank + nr, ... in parallel, their sums added
 * in block order (rank 0 of N > 1 adds the other ranks' blocks in between), in rounds of
 * SIM_ROUND blocks so that a stop does not walk the blocks left (16 s at B = 10^7 when it did).
 * Returns 1 when out of memory. */
static int sim_blocks_run(SimSums *u, const MpSimConfig *c, int nr, int rank, SimProgress *pg) {
    const int L = c->layers;
    const size_t LSS = (size_t)L * c->seq * c->seq, NBLK = sim_nblk(c), NVAR = (size_t)L * SIM_VM * c->seq;
    const int64_t nblocks = (c->batch + SIM_BLOCK - 1) / SIM_BLOCK;
    const int64_t nmine = nblocks > rank ? (nblocks - rank + nr - 1) / nr : 0;
    int64_t merged = 0; /* rank 0: blocks added so far */
    int oom = 0, round_stop = 0;
#ifdef _OPENMP
    const int nthreads = c->threads > 0 ? c->threads : omp_get_max_threads();
#pragma omp parallel num_threads(nthreads)
#endif
    {
        SimWork w;
        double *blk = sim_work_alloc(&w, c);
        if (!blk) {
#pragma omp atomic write
            oom = 1;
        }
        for (int64_t m0 = 0; m0 < nmine; m0 += SIM_ROUND) {
            /* one value for every thread: pg->stop is written in the loop's ordered regions only,
             * and the loop's closing barrier keeps the next write after every thread's read */
#pragma omp single
            {
#pragma omp atomic read
                round_stop = pg->stop;
            }
            if (round_stop) break;
            const int64_t m1 = m0 + SIM_ROUND < nmine ? m0 + SIM_ROUND : nmine;
#pragma omp for ordered schedule(dynamic, 1)
            for (int64_t m = m0; m < m1; m++) {
                const int64_t k = rank + m * nr;
                int64_t b0 = k * SIM_BLOCK, b1 = b0 + SIM_BLOCK < c->batch ? b0 + SIM_BLOCK : c->batch;
                int bad, stop;
#pragma omp atomic read
                bad = oom;
#pragma omp atomic read
                stop = pg->stop;
                if (!bad && !stop) {
                    memset(w.psum, 0, NBLK * sizeof(double)); /* maps and recency counts */
                    for (int64_t b = b0; b < b1; b++) sim_sequence_forward(&w, u->cs, u->sn, c, b);
                }
#pragma omp ordered
                {
                    if (bad && nr > 1) {
                        fprintf(stderr, "maskpos simulate (rank %d): error: out of memory for per-thread buffers\n", rank);
                        mp_mpi_abort(2);
                    }
                    if (nr > 1 && rank > 0) {
                        sim_block_send(w.psum, NBLK, k);
                        bad = 1; /* nothing to add here */
                    } else if (nr > 1) { /* rank 0: the other ranks' blocks before this one */
                        merged = sim_blocks_recv(u->sum, u->sq, u->prob, u->rpc, u->rpq, u->var, L, u->rbuf, LSS, NVAR,
                                                 merged, k, nr, c->batch, pg);
                        merged++;
                    }
                    if (!bad && !stop) {
                        for (size_t a = 0; a < LSS; a++) {
                            u->sum[a] += w.psum[a];
                            u->sq[a] += w.psq[a];
                            u->prob[a] += w.pprob[a];
                        }
                        for (int l = 0; l < L; l++) {
                            u->rpc[l] += (uint64_t)w.prc[l];
                            u->rpq[l] += w.prq[l];
                        }
                        for (size_t a = 0; a < NVAR; a++) u->var[a] += w.pvar[a];
                        sim_progress(pg, b1);
                    }
                }
            }
        }
        free(blk);
    }
    if (nr > 1 && rank == 0) /* the blocks after rank 0's last */
        sim_blocks_recv(u->sum, u->sq, u->prob, u->rpc, u->rpq, u->var, L, u->rbuf, LSS, NVAR, merged, nblocks, nr, c->batch,
                        pg);
    return oom;
}

/* The variance outputs (MpSimResult.var, 5 maps of (L,S)) from the moments v (L,SIM_VM,S) of n
 * sequences: the measured variance m2 − m1² and the closed form's mean mc, their standard errors
 * and that of their difference (the delta method with the sequences as independent draws: the
 * sample variance of u2 − 2·m1·u1, of c, of u2 − 2·m1·u1 − c, over n; NaN below 2 sequences). */
static void sim_variance_finish(double *out, const double *v, int L, int S, double n) {
    const size_t LS = (size_t)L * S;
    for (int l = 0; l < L; l++)
        for (int i = 0; i < S; i++) {
            const double *m = v + (size_t)l * SIM_VM * S + i;
            double mo[SIM_VM];
            for (int q = 0; q < SIM_VM; q++) mo[q] = m[(size_t)q * S];
            const double m1 = mo[0] / n, m2 = mo[1] / n, mc = mo[5] / n, d = n - 1;
            const double v11 = (mo[2] - n * m1 * m1) / d, v22 = (mo[3] - n * m2 * m2) / d, v12 = (mo[4] - n * m1 * m2) / d;
            const double vcc = (mo[6] - n * mc * mc) / d, v2c = (mo[7] - n * m2 * mc) / d, v1c = (mo[8] - n * m1 * mc) / d;
            const double va = v22 - 4 * m1 * v12 + 4 * m1 * m1 * v11;
            const double vg = va + vcc - 2 * v2c + 4 * m1 * v1c;
            const size_t k = (size_t)l * S + i;
            out[k] = m2 - m1 * m1;
            out[2 * LS + k] = mc;
            out[LS + k] = n >= 2 ? sqrt(va > 0 ? va / n : 0) : NAN;
            out[3 * LS + k] = n >= 2 ? sqrt(vcc > 0 ? vcc / n : 0) : NAN;
            out[4 * LS + k] = n >= 2 ? sqrt(vg > 0 ? vg / n : 0) : NAN;
        }
}

/* The sums into the result: means, standard errors, mean probabilities, diagonal-normalised
 * maps, statistics and (recency form) the recency probability. Takes over u's maps. */
static int sim_finish(MpSimResult *r, SimSums *u, const MpSimConfig *c, MpErr *e) {
    const int S = c->seq, L = c->layers;
    const size_t SS = (size_t)S * S, LSS = (size_t)L * SS;
    double *sum = u->sum, *sq = u->sq, *prob = u->prob;
    r->scores = sum, r->probs = prob, r->se = sq;
    u->sum = u->sq = u->prob = NULL;
    r->diagnorm = malloc(LSS * sizeof(double));
    r->stats = calloc((size_t)L, sizeof(MpPosStats));
    r->var = c->variance ? malloc(5 * (size_t)L * S * sizeof(double)) : NULL;
    if (!r->diagnorm || !r->stats || (c->variance && !r->var)) {
        mp_sim_result_free(r);
        return mp_err_set(e, "out of memory");
    }
    const double nb = (double)c->batch;
    for (int l = 0; l < L; l++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                size_t a = l * SS + (size_t)i * S + j;
                if (c->causal && j > i) {
                    sum[a] = NAN;
                    sq[a] = NAN;
                    continue;
                }
                double mean = sum[a] / nb;
                double var = c->batch > 1 ? (sq[a] / nb - mean * mean) * nb / (nb - 1) : 0;
                sum[a] = mean;
                sq[a] = sqrt(var > 0 ? var / nb : 0);
                prob[a] /= nb;
            }
    for (int l = 0; l < L; l++) {
        mp_posmap_diagnorm(r->diagnorm + l * SS, r->scores + l * SS, S);
        mp_posmap_stats(&r->stats[l], r->scores + l * SS, r->diagnorm + l * SS, r->se + l * SS, S);
    }
    if (r->var) sim_variance_finish(r->var, u->var, L, S, nb);
    if (c->form == MP_SIM_FORM_RECENCY) {
        sim_recency_finish(r, u->rpc, u->rpq, c); /* takes rpc, frees rpq */
        u->rpc = NULL, u->rpq = NULL;
        if (!r->rp) {
            mp_sim_result_free(r);
            return mp_err_set(e, "out of memory");
        }
    }
    return MP_OK;
}

int mp_sim_run(MpSimResult *r, const MpSimConfig *c, MpErr *e) {
    memset(r, 0, sizeof *r);
    if (mp_sim_config_check(c, e) != MP_OK) return MP_ERR;
    const double t0 = mp_time_now();
    /* MPI: this rank runs blocks rank, rank + nr, ...; rank 0 adds every block in order */
    const int nr = c->mpi ? mp_mpi_size() : 1, rank = nr > 1 ? mp_mpi_rank() : 0;
    SimSums u;
    if (sim_sums_init(&u, c, nr > 1 && rank == 0, e) != MP_OK) return MP_ERR;
    SimProgress pg = {.c = c, .alone = nr == 1};
    mp_progress_init(&pg.bar, "simulate", "seq", c->batch);
    if (!c->progress || rank > 0) pg.bar.enabled = 0;
    if (rank == 0 && c->progress_fn && c->progress_fn(c->progress_ctx, 0, c->batch) && pg.alone) pg.stop = 1;
    const int oom = sim_blocks_run(&u, c, nr, rank, &pg);
    mp_progress_finish(&pg.bar);
    r->layers = c->layers;
    r->seq = c->seq;
    r->batch = c->batch;
    r->mpi_ranks = nr;
    int rc = MP_OK;
    if (oom) rc = mp_err_set(e, "out of memory for per-thread buffers");
    else if (pg.stop) rc = mp_err_set(e, MP_JOB_STOPPED_MSG);
    else if (nr == 1 || rank == 0) rc = sim_finish(r, &u, c, e); /* rank 0 holds the result */
    sim_sums_free(&u);
    if (rc != MP_OK) {
        mp_sim_result_free(r);
        return MP_ERR;
    }
    r->wall_s = mp_time_now() - t0;
    return MP_OK;
}
