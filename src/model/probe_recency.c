/* probe_recency.c — see probe_recency.h. Sections: accumulation, results. */
#include "model/probe_recency.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"       /* mp_try_calloc */
#include "kernels/posmap.h"  /* mp_posmap_diagnorm, mp_posmap_stats */
#include "kernels/recency.h" /* mp_recency_row_count, mp_recency_triples */

#define PR_NB 16 /* block grid side, as the full map's */

/* ================================================================ accumulation */

int mp_probe_recency_dims(MpProbeAcc *a, MpErr *e) {
    const int S = a->S;
    if (S - a->skip < 3) return mp_err_set(e, "--recency needs at least 3 positions after the first (S = %d)", S);
    a->nlen = 0;
    for (int s = 16; s < S && a->nlen < 23; s *= 2)
        if (s - a->skip >= 3) a->lens[a->nlen++] = s;
    a->lens[a->nlen++] = S;
    for (int k = 0; k < a->nlen; k++) a->lnb[k] = a->lens[k] - a->skip < PR_NB ? a->lens[k] - a->skip : PR_NB;
    return MP_OK;
}

int mp_probe_recency_scratch(MpProbeAcc *a) {
    const int S = a->S, H = a->H;
    a->rp_seq = mp_try_calloc((size_t)H * S, sizeof *a->rp_seq);
    a->rp_scratch = mp_try_calloc((size_t)a->threads * 3 * S, sizeof *a->rp_scratch);
    a->lsub = mp_try_calloc((size_t)S * S, sizeof *a->lsub);
    a->lres = mp_try_calloc((size_t)S * S, sizeof *a->lres);
    return a->rp_seq && a->rp_scratch && a->lsub && a->lres ? MP_OK : MP_ERR;
}

void mp_probe_recency_off(MpProbeAcc *a) { /* the sums are the table's (mp_probe_acc_free) */
    free(a->rp_seq);
    free(a->rp_scratch);
    free(a->lsub);
    free(a->lres);
}

uint64_t mp_probe_recency_scratch_bytes(const MpProbeAcc *a) {
    return 8 * ((uint64_t)a->H * a->S + 3 * (uint64_t)a->threads * a->S + 2 * (uint64_t)a->S * a->S);
}

/* out [P,P] = rows and columns first..n-1 of map [S,S] (P = n - first). */
static void pr_corner(double *out, const double *map, int S, int first, int n) {
    const int P = n - first;
    for (int i = 0; i < P; i++) memcpy(out + (size_t)i * P, map + (size_t)(i + first) * S + first, (size_t)P * sizeof *out);
}

/* The first key query row i of slot li counts: position `first` (after a BOS), or the first key
 * of a sliding window. */
static int pr_first_key(const MpProbeAcc *a, int li, int i) {
    int lo, hi;
    mp_probe_acc_row_keys(a, li, i, &lo, &hi);
    return lo > a->skip ? lo : a->skip;
}

/* Triples j < k < i of query rows i < n that slot li observes: C(n - first, 3) without a window
 * (mp_recency_triples), else the sum over rows of the pairs of their window's keys. */
static uint64_t pr_triples(const MpProbeAcc *a, int li, int n) {
    if (!a->window[li]) return mp_recency_triples(n, a->skip);
    uint64_t t = 0;
    for (int i = 0; i < n; i++) {
        const uint64_t m = i > pr_first_key(a, li, i) ? (uint64_t)(i - pr_first_key(a, li, i)) : 0;
        t += m * (m > 0 ? m - 1 : 0) / 2;
    }
    return t;
}

void mp_probe_recency_rows(MpProbeAcc *a, int li, const float *scores, const double *scores64, int i0, int i1, int worker) {
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    double *sc = a->rp_scratch + (size_t)worker * 3 * S;
    for (int h = 0; h < H; h++) { /* triples per head and query row (counts are integers: order-free) */
        uint64_t *cnt = a->rp_seq + (size_t)h * S;
        for (int i = i0; i < i1; i++) {
            const int k0 = pr_first_key(a, li, i); /* from position first, or a sliding window's first key */
            cnt[i] = 0;
            if (i < k0 + 2) continue;
            const size_t off = (size_t)h * SS + (size_t)i * S + k0;
            cnt[i] = scores ? mp_recency_row_count_f32(scores + off, i - k0, sc) : mp_recency_row_count(scores64 + off, i - k0, sc);
        }
    }
}

void mp_probe_recency_layer(MpProbeAcc *a, int li) {
    const int S = a->S, H = a->H, first = a->skip;
    double *acc = a->rp_row + (size_t)li * H * S;
    for (int h = 0; h < H; h++) {
        uint64_t th = 0;
        for (int i = 0; i < S; i++) {
            acc[(size_t)h * S + i] += (double)a->rp_seq[(size_t)h * S + i];
            th += a->rp_seq[(size_t)h * S + i];
        }
        a->rp_hsq[(size_t)li * H + h] += (double)th * (double)th;
    }
    for (int k = 0; k < a->nlen; k++) {
        uint64_t t = 0;
        for (int h = 0; h < H; h++)
            for (int i = 0; i < a->lens[k]; i++) t += a->rp_seq[(size_t)h * S + i];
        a->rp_lsq[(size_t)li * a->nlen + k] += (double)t * (double)t;
    }
    /* the residue of every S'×S' corner of this sequence's head-mean map, per block */
    for (int k = 0; k < a->nlen; k++) {
        const int P = a->lens[k] - first;
        pr_corner(a->lsub, a->seqmap, S, first, a->lens[k]);
        mp_posmap_diagnorm(a->lres, a->lsub, P);
        const size_t off = ((size_t)k * a->L + li) * PR_NB * PR_NB;
        mp_probe_block_add(a->lbsum + off, a->lbsumsq + off, a->lres, P, a->lnb[k], a->causal);
    }
}

/* ================================================================ results */

void mp_probe_recency_out_free(MpProbeRecencyOut *o) {
    double **f[] = {&o->rp, &o->rp_se, &o->rp_heads, &o->rp_heads_se, &o->rp_map, &o->rp_map_heads, &o->len_nri,
                    &o->len_block_z, &o->len_rp, &o->len_rp_se, &o->len_rp_map, &o->pos_rms, &o->pos_z};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) free(*f[i]);
    memset(o, 0, sizeof *o);
}

/* mean and its standard error of per-sequence values v with Σv = s1, Σv² = s2 over n, as shares of T. */
static void pr_share(double *m, double *se, double s1, double s2, double n, double T) {
    const double mu = s1 / n, var = n > 1 ? (s2 / n - mu * mu) * n / (n - 1) : NAN;
    *m = T > 0 ? mu / T : NAN;
    *se = T > 0 && n > 1 ? sqrt(var > 0 ? var / n : 0) / T : NAN;
}

/* RP per length and overall of one map [S,S] of slot li from position first (or a sliding
 * window's first key): row counts into cnt [S]. */
static void pr_map_rows(uint64_t *cnt, const double *map, const MpProbeAcc *a, int li, double *scratch) {
    const int S = a->S;
    for (int i = 0; i < S; i++) {
        const int k0 = pr_first_key(a, li, i);
        cnt[i] = i < k0 + 2 ? 0 : mp_recency_row_count(map + (size_t)i * S + k0, i - k0, scratch);
    }
}

/* Residue profile against the query position: per row i ≥ first+1, rms of the residue over its
 * off-diagonal keys, and the rms of residue / se. */
static void pr_profile(double *rms, double *z, const double *mean, const double *se, int S, int first, int causal,
                       double *sub, double *res, double *sesub) {
    const int P = S - first;
    pr_corner(sub, mean, S, first, S);
    pr_corner(sesub, se, S, first, S);
    mp_posmap_diagnorm(res, sub, P);
    for (int i = 0; i < S; i++) rms[i] = z[i] = NAN;
    for (int i = 0; i < P; i++) {
        double s2 = 0, z2 = 0;
        int n = 0, nz = 0;
        for (int j = 0; j < (causal ? i : P); j++) {
            if (j == i) continue;
            const double r = res[(size_t)i * P + j], e = sesub[(size_t)i * P + j];
            if (!isfinite(r)) continue;
            s2 += r * r, n++;
            if (isfinite(e) && e > 0) z2 += (r / e) * (r / e), nz++;
        }
        if (n) rms[i + first] = sqrt(s2 / n);
        if (nz) z[i + first] = sqrt(z2 / nz);
    }
}

int mp_probe_recency_results(MpProbeRecencyOut *o, const MpProbeAcc *a, const double *mean, const double *se,
                             const double *mean_heads, MpErr *e) {
    memset(o, 0, sizeof *o);
    const int L = a->L, H = a->H, S = a->S, K = a->nlen, first = a->skip;
    const size_t SS = (size_t)S * S;
    o->L = L, o->H = H, o->S = S, o->K = K, o->first = first;
    memcpy(o->lens, a->lens, sizeof o->lens);
    o->rp = calloc((size_t)L, sizeof(double)), o->rp_se = calloc((size_t)L, sizeof(double));
    o->rp_heads = calloc((size_t)L * H, sizeof(double)), o->rp_heads_se = calloc((size_t)L * H, sizeof(double));
    o->rp_map = calloc((size_t)L, sizeof(double));
    o->rp_map_heads = mean_heads ? calloc((size_t)L * H, sizeof(double)) : NULL;
    o->len_nri = calloc((size_t)L * K, sizeof(double)), o->len_block_z = calloc((size_t)L * K, sizeof(double));
    o->len_rp = calloc((size_t)L * K, sizeof(double)), o->len_rp_se = calloc((size_t)L * K, sizeof(double));
    o->len_rp_map = calloc((size_t)L * K, sizeof(double));
    o->pos_rms = calloc((size_t)L * S, sizeof(double)), o->pos_z = calloc((size_t)L * S, sizeof(double));
    double *scratch = malloc((4 * SS + 3 * (size_t)S) * sizeof(double));
    uint64_t *cnt = malloc((size_t)S * sizeof *cnt);
    if (!o->rp || !o->rp_se || !o->rp_heads || !o->rp_heads_se || !o->rp_map || (mean_heads && !o->rp_map_heads) ||
        !o->len_nri || !o->len_block_z || !o->len_rp || !o->len_rp_se || !o->len_rp_map || !o->pos_rms || !o->pos_z ||
        !scratch || !cnt) {
        free(scratch), free(cnt);
        mp_probe_recency_out_free(o);
        return mp_err_set(e, "out of memory for the recency results");
    }
    double *sub = scratch, *res = scratch + SS, *sesub = scratch + 2 * SS, *rsc = scratch + 4 * SS;
    const double n = (double)a->n_done;
    for (int l = 0; l < L; l++) {
        const double *rows = a->rp_row + (size_t)l * H * S;
        /* per sequence: all heads by length (the last length is S), and per head */
        for (int k = 0; k < K; k++) {
            double t = 0; /* integers below 2^53: exact in any order */
            for (int h = 0; h < H; h++)
                for (int i = 0; i < a->lens[k]; i++) t += rows[(size_t)h * S + i];
            const double T = (double)H * pr_triples(a, l, a->lens[k]);
            pr_share(&o->len_rp[l * K + k], &o->len_rp_se[l * K + k], (double)t, a->rp_lsq[(size_t)l * K + k], n, T);
        }
        o->rp[l] = o->len_rp[l * K + K - 1], o->rp_se[l] = o->len_rp_se[l * K + K - 1];
        for (int h = 0; h < H; h++) {
            double t = 0;
            for (int i = 0; i < S; i++) t += rows[(size_t)h * S + i];
            pr_share(&o->rp_heads[l * H + h], &o->rp_heads_se[l * H + h], (double)t, a->rp_hsq[(size_t)l * H + h], n,
                     (double)pr_triples(a, l, S));
        }
        /* of the mean maps */
        pr_map_rows(cnt, mean + l * SS, a, l, rsc);
        uint64_t c = 0;
        for (int i = 0, k = 0; i < S; i++) {
            c += cnt[i];
            if (k < K && i == a->lens[k] - 1) o->len_rp_map[l * K + k++] = (double)c / (double)pr_triples(a, l, i + 1);
        }
        o->rp_map[l] = o->len_rp_map[l * K + K - 1];
        for (int h = 0; mean_heads && h < H; h++) {
            pr_map_rows(cnt, mean_heads + ((size_t)l * H + h) * SS, a, l, rsc);
            uint64_t ch = 0;
            for (int i = 0; i < S; i++) ch += cnt[i];
            o->rp_map_heads[l * H + h] = (double)ch / (double)pr_triples(a, l, S);
        }
        /* NRI and block z of every S'×S' corner */
        for (int k = 0; k < K; k++) {
            const int P = a->lens[k] - first;
            MpPosStats st;
            pr_corner(sub, mean + l * SS, S, first, a->lens[k]);
            pr_corner(sesub, se + l * SS, S, first, a->lens[k]);
            mp_posmap_diagnorm(res, sub, P);
            mp_posmap_stats(&st, sub, res, sesub, P);
            o->len_nri[l * K + k] = st.nri;
            const size_t off = ((size_t)k * L + l) * PR_NB * PR_NB;
            o->len_block_z[l * K + k] = mp_probe_block_z(a->lbsum + off, a->lbsumsq + off, a->lnb[k], a->n_done, 0);
        }
        pr_profile(o->pos_rms + (size_t)l * S, o->pos_z + (size_t)l * S, mean + l * SS, se + l * SS, S, first, a->causal,
                   sub, res, sesub);
    }
    free(scratch);
    free(cnt);
    return MP_OK;
}
