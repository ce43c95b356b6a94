/* cuda_acc.cu — the probe's sums on the GPU; see cuda_acc.h. One thread per output of every
 * kernel, each a sequential sum in the CPU's order (probe_acc.c, probe_block.c, kernels/posmap.c),
 * compiled without contraction (--fmad=false): the CPU's bits. */
#include "cuda/cuda_acc.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cuda/cuda_dev.cuh" /* MPC_FOR, mpc_grid, MPC_LAUNCHED */
#include "model/probe_flip.h" /* MP_PROBE_FLIPS, mp_probe_flip_bits: the host's signs */

#define ACC_THREADS 256

/* The keys [lo, hi) query i of a slot with window W observes (mp_probe_acc_row_keys). */
static __device__ __forceinline__ void acc_row_keys(int i, int S, int W, int causal, int *lo, int *hi) {
    *lo = W && i - W + 1 > 0 ? i - W + 1 : 0;
    *hi = causal ? i + 1 : W && i + W < S ? i + W : S;
}

/* ================================================================ allocation and the table */

/* field, length in doubles (given the dims), whether a has it */
typedef struct AccSpec {
    const char *name;
    size_t off; /* offsetof(MpCudaAcc, the double * field) */
    int shape;  /* 0 [L,S,S], 1 [L,H,S,S], 2 [L,nb,nb], 3 [L,H], 4 [L,F,nb,nb], 5 [L] */
    int when;   /* 0 always, 1 per_head, 2 probs, 3 probs and per_head */
} AccSpec;

/* MpProbeAcc's names and order (probe_acc.c's probe_arrays, the arrays of the groups this
 * accumulator keeps) */
static const AccSpec acc_specs[MP_CUDA_ACC_ARRAYS] = {
    {"sum", offsetof(MpCudaAcc, sum), 0, 0},           {"sumsq", offsetof(MpCudaAcc, sumsq), 0, 0},
    {"bsum", offsetof(MpCudaAcc, bsum), 2, 0},         {"bsumsq", offsetof(MpCudaAcc, bsumsq), 2, 0},
    {"sum_heads", offsetof(MpCudaAcc, sum_heads), 1, 1}, {"sumsq_heads", offsetof(MpCudaAcc, sumsq_heads), 1, 1},
    {"bflip", offsetof(MpCudaAcc, bflip), 4, 0},       {"rsq", offsetof(MpCudaAcc, rsq), 5, 0},
    {"csq", offsetof(MpCudaAcc, csq), 5, 0},
    {"psum", offsetof(MpCudaAcc, psum), 0, 2},         {"psum_heads", offsetof(MpCudaAcc, psum_heads), 1, 3},
    {"sink", offsetof(MpCudaAcc, sink), 3, 2},         {"entropy", offsetof(MpCudaAcc, entropy), 3, 2},
};

static size_t acc_len(const MpCudaAccDims *d, int shape) {
    const size_t L = (size_t)d->L, H = (size_t)d->H, S = (size_t)d->S, nb = (size_t)d->nb;
    switch (shape) {
    case 0: return L * S * S;
    case 1: return L * H * S * S;
    case 2: return L * nb * nb;
    case 3: return L * H;
    case 4: return L * MP_PROBE_FLIPS * nb * nb;
    default: return L;
    }
}

static int acc_on(const MpCudaAccDims *d, int when) {
    return when == 0 || (when == 1 && d->per_head) || (when == 2 && d->probs) || (when == 3 && d->probs && d->per_head);
}

static double **acc_field(MpCudaAcc *a, const AccSpec *s) { return (double **)((char *)a + s->off); }

extern "C" int mp_cuda_acc_arrays(MpCudaAcc *a, MpCudaAccArray *out) {
    int n = 0;
    for (int k = 0; k < MP_CUDA_ACC_ARRAYS; k++)
        if (acc_on(&a->d, acc_specs[k].when))
            out[n++] = (MpCudaAccArray){acc_specs[k].name, *acc_field(a, &acc_specs[k]), acc_len(&a->d, acc_specs[k].shape)};
    return n;
}

extern "C" void mp_cuda_acc_free(MpCudaAcc *a) {
    for (int k = 0; k < MP_CUDA_ACC_ARRAYS; k++) cudaFree(*acc_field(a, &acc_specs[k]));
    cudaFree(a->seqmap);
    cudaFree(a->dmean);
    cudaFree(a->rows);
    cudaFree(a->rcnt);
    cudaFree(a->hs);
    cudaFree(a->pent);
    memset(a, 0, sizeof *a);
}

extern "C" int mp_cuda_acc_init(MpCudaAcc *a, const MpCudaAccDims *d, char *why, size_t cap) {
    memset(a, 0, sizeof *a);
    if (d->L < 1 || d->L > MP_CUDA_ACC_MAX_LAYERS || d->H < 1 || d->S < 2 || d->skip < 0 || d->S - d->skip < 2 || d->nb < 1 ||
        d->nb > 16 || d->nb > d->S - d->skip) {
        snprintf(why, cap, "device accumulator: bad dimensions (L %d, H %d, S %d, skip %d, nb %d)", d->L, d->H, d->S, d->skip, d->nb);
        return -1;
    }
    a->d = *d;
    const size_t SS = (size_t)d->S * d->S, P = (size_t)(d->S - d->skip);
    cudaError_t rc = cudaSuccess;
    for (int k = 0; k < MP_CUDA_ACC_ARRAYS && rc == cudaSuccess; k++) {
        if (!acc_on(d, acc_specs[k].when)) continue;
        const size_t bytes = acc_len(d, acc_specs[k].shape) * sizeof(double);
        rc = cudaMalloc((void **)acc_field(a, &acc_specs[k]), bytes);
        if (rc == cudaSuccess) rc = cudaMemset(*acc_field(a, &acc_specs[k]), 0, bytes);
    }
    if (rc == cudaSuccess) rc = cudaMalloc((void **)&a->seqmap, SS * sizeof(double));
    if (rc == cudaSuccess) rc = cudaMalloc((void **)&a->dmean, (2 * P - 1) * sizeof(double));
    if (rc == cudaSuccess) rc = cudaMalloc((void **)&a->rows, 2 * P * sizeof(double));
    if (rc == cudaSuccess) rc = cudaMalloc((void **)&a->rcnt, P * sizeof(int64_t));
    if (rc == cudaSuccess) rc = cudaMalloc((void **)&a->hs, SS * sizeof(double));
    if (rc == cudaSuccess && d->probs) rc = cudaMalloc((void **)&a->pent, (size_t)d->H * d->S * sizeof(double));
    if (rc != cudaSuccess) {
        snprintf(why, cap, "device accumulator (%d layers of %d x %d%s): %s", d->L, d->S, d->S, d->per_head ? ", per head" : "",
                 cudaGetErrorString(rc));
        mp_cuda_acc_free(a);
        return -1;
    }
    cudaDeviceSynchronize(); /* the zeroing (legacy stream) done before a worker's stream adds */
    return 0;
}

extern "C" void mp_cuda_acc_reset(MpCuda *c, MpCudaAcc *a) {
    MpCudaAccArray t[MP_CUDA_ACC_ARRAYS];
    const int n = mp_cuda_acc_arrays(a, t);
    for (int k = 0; k < n; k++) mp_cuda_ok(c, cudaMemsetAsync(t[k].p, 0, t[k].n * sizeof(double), c->stream), "accumulator reset");
}

/* ================================================================ the maps */

/* hs [S, S] = Σ_h (double) s[h, i, j] from 0.0, h ascending, over the observed keys */
static __global__ void acc_headsum_kernel(double *hs, const float *s, int H, int S, int W, int causal) {
    MPC_FOR(k, (int64_t)S * S) {
        const int i = (int)(k / S), j = (int)(k % S);
        int lo, hi;
        acc_row_keys(i, S, W, causal, &lo, &hi);
        if (j < lo || j >= hi) continue;
        double acc = 0.0;
        for (int h = 0; h < H; h++) acc += (double)s[(int64_t)h * S * S + k];
        hs[k] = acc;
    }
}

/* each head's score and its square, over the observed keys */
static __global__ void acc_heads_kernel(double *sh, double *sq, const float *s, int H, int S, int W, int causal) {
    MPC_FOR(k, (int64_t)H * S * S) {
        const int64_t ij = k % ((int64_t)S * S);
        const int i = (int)(ij / S), j = (int)(ij % S);
        int lo, hi;
        acc_row_keys(i, S, W, causal, &lo, &hi);
        if (j < lo || j >= hi) continue;
        const double x = (double)s[k];
        sh[k] += x;
        sq[k] += x * x;
    }
}

/* probe_row_finish: sum += hs, sumsq += (hs/H)², seqmap = hs/H (NaN where not observed) */
static __global__ void acc_finish_kernel(double *sum, double *sumsq, double *seqmap, const double *hs, int H, int S, int W,
                                         int causal) {
    const double inv_h = 1.0 / H;
    MPC_FOR(k, (int64_t)S * S) {
        const int i = (int)(k / S), j = (int)(k % S);
        int lo, hi;
        acc_row_keys(i, S, W, causal, &lo, &hi);
        if (j < lo || j >= hi) {
            seqmap[k] = NAN;
            continue;
        }
        const double sm = hs[k];
        sum[k] += sm;
        sumsq[k] += (sm * inv_h) * (sm * inv_h);
        seqmap[k] = sm * inv_h;
    }
}

/* ================================================================ the block residue */

/* One thread per diagonal k = i - j of the P x P map from position skip: the mean of its finite
 * entries, summed in ascending i (mp_posmap_diagnorm_ref's order); NaN when none. */
static __global__ void acc_diag_kernel(double *dmean, const double *map, int S, int skip) {
    const int P = S - skip;
    MPC_FOR(d, 2 * (int64_t)P - 1) {
        const int k = (int)d - (P - 1);
        const int i0 = k >= 0 ? k : 0, i1 = k >= 0 ? P : P + k;
        double sum = 0;
        int64_t cnt = 0;
        for (int i = i0; i < i1; i++) {
            const double v = map[(int64_t)(i + skip) * S + (i - k + skip)];
            if (isfinite(v)) {
                sum += v;
                cnt++;
            }
        }
        dmean[d] = cnt ? sum / (double)cnt : NAN;
    }
}

/* One block of threads for the nb x nb grid (nb <= 16), one thread per block (bi, bj) of it: the
 * mean of the residue's observed entries, summed row by row (mp_probe_block_means), NaN for a block
 * with none (above the diagonal when causal); then the sequence's sign bits from all of them
 * (mp_probe_flip_bits, thread 0) and, per block with a mean, its mean into bs, its square into bq
 * and ±mean into each of the F flipped sums bf (mp_probe_acc_block_seq). */
static __global__ void acc_block_kernel(double *bs, double *bq, double *bf, const double *map, const double *dmean, int S, int skip,
                                        int nb, int causal) {
    __shared__ double bm[16 * 16];
    __shared__ uint32_t bits;
    const int P = S - skip, nbb = nb * nb;
    for (int b = threadIdx.x; b < nbb; b += blockDim.x) {
        const int bi = b / nb, bj = b % nb;
        bm[b] = NAN;
        if (causal && bj > bi) continue;
        const int i0 = (int)(((int64_t)bi * P + nb - 1) / nb), i1 = (int)(((int64_t)(bi + 1) * P + nb - 1) / nb);
        const int j0 = (int)(((int64_t)bj * P + nb - 1) / nb), j1 = (int)(((int64_t)(bj + 1) * P + nb - 1) / nb);
        double acc = 0;
        int cnt = 0;
        for (int i = i0; i < i1; i++)
            for (int j = j0; j < j1 && (!causal || j <= i); j++) {
                const double v = map[(int64_t)(i + skip) * S + (j + skip)];
                const double r = isfinite(v) ? v - dmean[i - j + P - 1] : NAN;
                if (isnan(r)) continue;
                acc += r;
                cnt++;
            }
        if (cnt) bm[b] = acc / cnt;
    }
    __syncthreads();
    if (threadIdx.x == 0) bits = mp_probe_flip_bits(bm, nb);
    __syncthreads();
    for (int b = threadIdx.x; b < nbb; b += blockDim.x) {
        const double m = bm[b];
        if (isnan(m)) continue;
        bs[b] += m;
        bq[b] += m * m;
        for (int f = 0; f < MP_PROBE_FLIPS; f++) bf[(int64_t)f * nbb + b] += (bits >> f & 1u) ? -m : m;
    }
}

/* The squared norms of one sequence's P x P map from position skip (probe_seq_norms), one block of
 * threads: a thread per row sums its finite entries in ascending j (rows [P] and rcnt [P]); thread
 * 0 sums the rows in ascending i to the map's mean; a thread per row sums its residue's squares and
 * its centred entries' squares in ascending j (rows [2P]); thread 0 sums those rows in ascending i
 * into rsq and csq. */
static __global__ void acc_norms_kernel(double *rsq, double *csq, double *rows, int64_t *rcnt, const double *map,
                                        const double *dmean, int S, int skip) {
    __shared__ double mean;
    const int P = S - skip;
    for (int i = threadIdx.x; i < P; i += blockDim.x) {
        const double *xi = map + (int64_t)(i + skip) * S + skip;
        double s = 0;
        int64_t c = 0;
        for (int j = 0; j < P; j++)
            if (isfinite(xi[j])) {
                s += xi[j];
                c++;
            }
        rows[i] = s;
        rcnt[i] = c;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double sum = 0;
        int64_t cnt = 0;
        for (int i = 0; i < P; i++) sum += rows[i], cnt += rcnt[i];
        mean = cnt ? sum / (double)cnt : 0;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < P; i += blockDim.x) {
        const double *xi = map + (int64_t)(i + skip) * S + skip;
        double n = 0, d = 0;
        for (int j = 0; j < P; j++)
            if (isfinite(xi[j])) {
                const double r = xi[j] - dmean[i - j + P - 1]; /* mp_posmap_diagnorm's residue */
                n += r * r;
                d += (xi[j] - mean) * (xi[j] - mean);
            }
        rows[i] = n;
        rows[P + i] = d;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        double num = 0, den = 0;
        for (int i = 0; i < P; i++) num += rows[i], den += rows[P + i];
        *rsq += num;
        *csq += den;
    }
}

/* sum, sumsq and the residue of slot li from a->hs-like head sums hs */
static void acc_from_headsum(MpCuda *c, MpCudaAcc *a, int li, const double *hs) {
    const MpCudaAccDims *d = &a->d;
    const int64_t SS = (int64_t)d->S * d->S, P = d->S - d->skip, nbb = (int64_t)d->nb * d->nb;
    const int W = d->window[li];
    acc_finish_kernel<<<mpc_grid(SS, ACC_THREADS), ACC_THREADS, 0, c->stream>>>(a->sum + li * SS, a->sumsq + li * SS, a->seqmap, hs, d->H,
                                                                              d->S, W, d->causal);
    acc_diag_kernel<<<mpc_grid(2 * P - 1, 64), 64, 0, c->stream>>>(a->dmean, a->seqmap, d->S, d->skip);
    acc_block_kernel<<<1, 256, 0, c->stream>>>(a->bsum + li * nbb, a->bsumsq + li * nbb, a->bflip + li * MP_PROBE_FLIPS * nbb,
                                               a->seqmap, a->dmean, d->S, d->skip, d->nb, d->causal);
    acc_norms_kernel<<<1, 256, 0, c->stream>>>(a->rsq + li, a->csq + li, a->rows, a->rcnt, a->seqmap, a->dmean, d->S, d->skip);
    MPC_LAUNCHED(c, "accumulator: maps and blocks");
}

extern "C" void mp_cuda_acc_scores(MpCuda *c, MpCudaAcc *a, int li, const float *s) {
    const MpCudaAccDims *d = &a->d;
    const int64_t SS = (int64_t)d->S * d->S, HSS = (int64_t)d->H * SS;
    const int W = d->window[li];
    if (d->per_head)
        acc_heads_kernel<<<mpc_grid(HSS, ACC_THREADS), ACC_THREADS, 0, c->stream>>>(a->sum_heads + li * HSS, a->sumsq_heads + li * HSS,
                                                                                  s, d->H, d->S, W, d->causal);
    acc_headsum_kernel<<<mpc_grid(SS, ACC_THREADS), ACC_THREADS, 0, c->stream>>>(a->hs, s, d->H, d->S, W, d->causal);
    MPC_LAUNCHED(c, "accumulator: head sums");
    acc_from_headsum(c, a, li, a->hs);
}

extern "C" void mp_cuda_acc_headsum(MpCuda *c, MpCudaAcc *a, int li, const double *hs) { acc_from_headsum(c, a, li, hs); }

/* ================================================================ probabilities */

/* psum [S, S] += Σ_h p (from 0.0, h ascending), psum_heads += p, keys j < n_i (causal: i + 1) */
static __global__ void acc_psum_kernel(double *psum, double *ph, const float *p, int H, int S, int causal) {
    MPC_FOR(k, (int64_t)S * S) {
        const int i = (int)(k / S), j = (int)(k % S);
        if (j >= (causal ? i + 1 : S)) continue;
        double t = 0;
        for (int h = 0; h < H; h++) {
            const double x = (double)p[(int64_t)h * S * S + k];
            if (ph) ph[(int64_t)h * S * S + k] += x;
            t += x;
        }
        psum[k] += t;
    }
}

/* pent [H, S]: the entropy of row (h, i), −Σ_j p ln p over p > 0, j ascending */
static __global__ void acc_entropy_kernel(double *pent, const float *p, int H, int S, int causal) {
    MPC_FOR(k, (int64_t)H * S) {
        const int h = (int)(k / S), i = (int)(k % S), n = causal ? i + 1 : S;
        const float *row = p + ((int64_t)h * S + i) * S;
        double ent = 0;
        for (int j = 0; j < n; j++) {
            const double x = row[j];
            if (x > 0) ent -= x * log(x);
        }
        pent[k] = ent;
    }
}

/* sink, entropy [H] += over queries 1..S-1 in order: p[h, i, 0] and the row entropies */
static __global__ void acc_sink_kernel(double *sink, double *entropy, const double *pent, const float *p, int H, int S) {
    MPC_FOR(h, (int64_t)H) {
        double sk = 0, en = 0;
        for (int i = 1; i < S; i++) {
            sk += (double)p[((int64_t)h * S + i) * S];
            en += pent[h * S + i];
        }
        sink[h] += sk;
        entropy[h] += en;
    }
}

extern "C" void mp_cuda_acc_probs(MpCuda *c, MpCudaAcc *a, int li, const float *p) {
    const MpCudaAccDims *d = &a->d;
    if (!d->probs) return;
    const int64_t SS = (int64_t)d->S * d->S, HSS = (int64_t)d->H * SS;
    acc_psum_kernel<<<mpc_grid(SS, ACC_THREADS), ACC_THREADS, 0, c->stream>>>(a->psum + li * SS,
                                                                            a->psum_heads ? a->psum_heads + li * HSS : NULL, p, d->H, d->S,
                                                                            d->causal);
    acc_entropy_kernel<<<mpc_grid((int64_t)d->H * d->S, ACC_THREADS), ACC_THREADS, 0, c->stream>>>(a->pent, p, d->H, d->S, d->causal);
    acc_sink_kernel<<<1, 32, 0, c->stream>>>(a->sink + (int64_t)li * d->H, a->entropy + (int64_t)li * d->H, a->pent, p, d->H, d->S);
    MPC_LAUNCHED(c, "accumulator: probabilities");
}
