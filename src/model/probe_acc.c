/* probe_acc.c — the accumulator of probe.h (MpProbeAcc): its table of statistics (mp_probe_stats,
 * one row per statistic: name, inputs, sums, scratch, update functions, outputs) and everything
 * that reads the table (allocation, freeing, reset, merge, the one-sequence parts of MPI ranks and
 * worker threads, the inputs and capture points asked of the forward pass, the memory estimate),
 * the forward pass's callbacks that hand each input to the statistics that read it, and three
 * statistics of its own: the score maps (always on; with the block test's sign-flipped sums and
 * the noise-corrected NRI's norms), the probabilities (--probs) and the counts of sequences
 * shorter than S (lengths: mp_probe_acc_lengths_on, merging accumulators of different S:
 * mp_probe_acc_embed), with the means and standard errors read from the maps' sums.
 * Does not: read tokens (probe_tokens.c), test blocks (probe_block.c), save or load
 * (probe_ckpt.c), count recent triples (probe_recency.c, a row of the table), write results
 * (src/job/probe_out.c reads the rows' outputs).
 * Tested by: tests/test_model_probe.c, tests/test_model_probe_merge.c, tests/test_probe_rows.c,
 * tests/test_probe_table.c (the table's rules and what reads it).
 *
 * ================================================================ layout
 *   maps        the score maps' row functions (MP_PROBE_STAT_MAPS)
 *   probs       the probabilities' functions (MP_PROBE_STAT_PROBS)
 *   lengths     the per-position counts' function (MP_PROBE_STAT_LENGTHS)
 *   table       mp_probe_stats, and its check
 *   engine      what reads the table: arrays, init, free, reset, merge, parts, inputs, names, bytes
 *   sequences shorter than S: lengths on, embed (merging a shorter accumulator into a longer)
 *   callbacks   the forward pass's hooks, dispatched to the rows
 *   results     means and standard errors of the maps
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence, nb blocks per side,
 * nlen lengths of --recency.
 */
#include "model/probe.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"           /* mp_try_calloc, mp_size_mul, mp_thread_num */
#include "kernels/posmap.h"      /* mp_posmap_diagnorm: per-sequence residues */
#include "model/probe_recency.h" /* the recency row's functions */
#include "model/probe_var.h"     /* the variance row's functions */
#include "model/probe_freq.h"    /* the RoPE frequency row's functions */
#include "model/probe_pos.h"     /* the position probe's row */
#include "model/fwd.h"           /* MP_FWD_AT_ATTN_MIX, MP_FWD_AT_LAYER_OUT: the variance row's points */

/* ================================================================ maps */

/* dst[j] += row[j] for j in [j0, n), in double: row is f32[off..] or, when f32 is NULL, f64[off..]
 * (a float widened to double is exact, so both give the same bits for the same values). */
static inline void probe_add(double *dst, const float *f32, const double *f64, size_t off, int j0, int n) {
    if (f32)
        for (int j = j0; j < n; j++) dst[j] += (double)f32[off + j];
    else
        for (int j = j0; j < n; j++) dst[j] += f64[off + j];
}

/* The same into sh, and the squares into sq. */
static inline void probe_add_sq(double *sh, double *sq, const float *f32, const double *f64, size_t off, int j0, int n) {
    for (int j = j0; j < n; j++) {
        const double x = f32 ? (double)f32[off + j] : f64[off + j];
        sh[j] += x;
        sq[j] += x * x;
    }
}

/* Query row i of layer slot li, its head sum in the row of seqmap (sm [S]) over the observed keys
 * [j0, n): added to sum and sumsq, turned into the head mean there, NaN outside. */
static void probe_row_finish(MpProbeAcc *a, int li, int i, int j0, int n) {
    const int S = a->S;
    const size_t SS = (size_t)S * S;
    const double inv_h = 1.0 / a->H;
    double *sm = a->seqmap + (size_t)i * S;
    double *out = a->sum + (size_t)li * SS + (size_t)i * S, *out2 = a->sumsq + (size_t)li * SS + (size_t)i * S;
    for (int j = 0; j < j0; j++) sm[j] = NAN;
    for (int j = j0; j < n; j++) {
        out[j] += sm[j];
        out2[j] += (sm[j] * inv_h) * (sm[j] * inv_h);
        sm[j] = sm[j] * inv_h;
    }
    for (int j = n; j < S; j++) sm[j] = NAN;
}

/* Query row i of layer slot li: the head sum of its observed scores in double, heads ascending
 * (kept in the row of seqmap, then turned into the head mean there), added to sum, sumsq,
 * sum_heads and sumsq_heads. Rows are independent: any order, any thread, the same bits. Scores
 * are f32 [H,S,S], or f64 when f32 is NULL (mp_probe_acc_rows_f64). */
static void probe_row(MpProbeAcc *a, int li, const float *f32, const double *f64, int i) {
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    int j0, n; /* observed keys [j0, n): the causal mask's, a sliding window's, the sequence's length */
    mp_probe_acc_seq_keys(a, li, i, &j0, &n);
    double *sm = a->seqmap + (size_t)i * S;
    for (int j = j0; j < n; j++) sm[j] = 0.0;
    for (int h = 0; h < H; h++) {
        const size_t src = (size_t)h * SS + (size_t)i * S;
        probe_add(sm, f32, f64, src, j0, n);
        if (a->sum_heads) {
            const size_t off = ((size_t)li * H + h) * SS + (size_t)i * S;
            probe_add_sq(a->sum_heads + off, a->sumsq_heads + off, f32, f64, src, j0, n);
        }
    }
    probe_row_finish(a, li, i, j0, n);
}

static void maps_rows(MpProbeAcc *a, int li, const float *f32, const double *f64, int i0, int i1, int worker) {
    (void)worker; /* rows own their row of seqmap */
    for (int i = i0; i < i1; i++) probe_row(a, li, f32, f64, i);
}

/* The reduced map: rows [i0, i1) from their head sums hs [i1 - i0, S] (double, heads ascending
 * from 0.0, as probe_row sums them): the same bits as maps_rows on the per-head rows. */
static void maps_headsum(MpProbeAcc *a, int li, const double *hs, int i0, int i1, int worker) {
    (void)worker;
    const int S = a->S;
    for (int i = i0; i < i1; i++) {
        int j0, n;
        mp_probe_acc_seq_keys(a, li, i, &j0, &n);
        const double *src = hs + (size_t)(i - i0) * S;
        double *sm = a->seqmap + (size_t)i * S;
        for (int j = j0; j < n; j++) sm[j] = src[j]; /* the sum probe_row forms: the same bits */
        probe_row_finish(a, li, i, j0, n);
    }
}

/* Σ over the finite entries of one sequence's map x [P,P] of its residue r squared (into *rs) and of
 * (x − its mean)² (into *cs): the numerator and denominator of its own NRI (mp_posmap_stats). Each
 * sum row by row: a row's entries in ascending j from 0.0, then the rows' sums in ascending i (the
 * count in int64), so the device accumulator (cuda_acc.cu's acc_norms_kernel) forms the rows in
 * parallel and gets the same bits. */
static void probe_seq_norms(const double *x, const double *r, int P, double *rs, double *cs) {
    double sum = 0, num = 0, den = 0;
    int64_t cnt = 0;
    for (int i = 0; i < P; i++) {
        const double *xi = x + (size_t)i * P;
        double s = 0;
        for (int j = 0; j < P; j++)
            if (isfinite(xi[j])) s += xi[j], cnt++;
        sum += s;
    }
    const double mean = cnt ? sum / (double)cnt : 0;
    for (int i = 0; i < P; i++) {
        const double *xi = x + (size_t)i * P, *ri = r + (size_t)i * P;
        double n = 0, d = 0;
        for (int j = 0; j < P; j++)
            if (isfinite(xi[j])) {
                n += ri[j] * ri[j];
                d += (xi[j] - mean) * (xi[j] - mean);
            }
        num += n, den += d;
    }
    *rs = num, *cs = den;
}

void mp_probe_acc_block_seq(MpProbeAcc *a, int li, const double *bm) {
    const int nb = a->nb, nbb = nb * nb;
    double *bs = a->bsum + (size_t)li * nbb, *bq = a->bsumsq + (size_t)li * nbb;
    double *bf = a->bflip + (size_t)li * MP_PROBE_FLIPS * nbb;
    const uint32_t bits = mp_probe_flip_bits(bm, nb);
    for (int k = 0; k < nbb; k++) {
        if (isnan(bm[k])) continue;
        bs[k] += bm[k];
        bq[k] += bm[k] * bm[k];
        for (int f = 0; f < MP_PROBE_FLIPS; f++) bf[(size_t)f * nbb + k] += (bits >> f & 1u) ? -bm[k] : bm[k];
        if (a->bcnt) a->bcnt[(size_t)li * nbb + k] += 1.0; /* the lengths row's block counts */
    }
}

/* Once every row of slot li is in: this sequence's residue (of positions skip..len-1, len its length),
 * averaged per block, into the block sums and their sign-flipped copies; full-length sequences'
 * squared norms of residue and centred map (rsq, csq). seqmap keeps the head-mean map for the rows
 * after this one (--recency's corners). */
static void maps_layer(MpProbeAcc *a, int li) {
    const int S = a->S, len = a->cur_len > 0 ? a->cur_len : S, P = len - a->skip;
    if (P < 1) return;
    const double *src = a->seqmap;
    if (a->skip || len < S) {
        for (int i = 0; i < P; i++) /* its [P, P] corner from position skip (mp_posmap_sub when len = S) */
            memcpy(a->seqsub + (size_t)i * P, a->seqmap + (size_t)(i + a->skip) * S + a->skip, (size_t)P * sizeof(double));
        src = a->seqsub;
    }
    mp_posmap_diagnorm(a->seqres, src, P);
    if (P >= a->nb) {
        mp_probe_block_means(a->bmeans, a->seqres, P, a->nb, a->causal);
        mp_probe_acc_block_seq(a, li, a->bmeans);
    }
    if (len == S) { /* the noise-corrected NRI's sums: sequences of the full length only */
        double rs, cs;
        probe_seq_norms(src, a->seqres, P, &rs, &cs);
        a->rsq[li] += rs;
        a->csq[li] += cs;
    }
}

static int maps_scratch(MpProbeAcc *a) {
    const size_t SS = (size_t)a->S * a->S;
    a->seqmap = mp_try_malloc(SS * sizeof(double));
    a->seqres = mp_try_malloc(SS * sizeof(double));
    a->seqsub = mp_try_malloc(SS * sizeof(double));
    a->bmeans = mp_try_malloc(16 * 16 * sizeof(double));
    return a->seqmap && a->seqres && a->seqsub && a->bmeans ? MP_OK : MP_ERR;
}

static void maps_off(MpProbeAcc *a) {
    free(a->seqmap);
    free(a->seqres);
    free(a->seqsub);
    free(a->bmeans);
}

static uint64_t maps_scratch_bytes(const MpProbeAcc *a) { return 3 * 8 * (uint64_t)a->S * a->S + 8 * 16 * 16; }

/* The result's maps (job/probe_out.c): mean, diagonal-normalised and standard error per layer (and
 * the heads' means and standard errors), and three [S,S] maps of the statistics' scratch. */
static uint64_t maps_out_bytes(const MpProbeAcc *a) {
    return 8 * (uint64_t)a->S * a->S * ((uint64_t)a->L * (a->per_head ? 3 + 2 * (uint64_t)a->H : 3) + 3);
}

/* ================================================================ probs */

/* Rows in parallel: the row entropies of every head, the per-head sums, and each entry's sum over
 * heads (ascending), then one addition to the map: a sequence adds the same bits here as through
 * a merged part (MPI ranks, Accumulator.merge). Then sink and entropy over rows in order. */
static void probs_add(MpProbeAcc *a, int li, const float *probs) {
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    double *psum = a->psum + (size_t)li * SS;
#pragma omp parallel for schedule(dynamic, 8) num_threads(a->threads) if ((double)S * S * H > 200000.0)
    for (int i = 0; i < S; i++) {
        int j0, n; /* the sequence's keys (a causal row's are 0..i; rows past its length none) */
        mp_probe_acc_seq_keys(a, li, i, &j0, &n);
        if (!a->npos) j0 = 0, n = a->causal ? i + 1 : S; /* every row whole, as before lengths */
        (void)j0;
        double *out = psum + (size_t)i * S;
        for (int h = 0; h < H; h++) {
            const float *row = probs + (size_t)h * SS + (size_t)i * S;
            double ent = 0;
            for (int j = 0; j < n; j++) {
                const double p = row[j];
                if (p > 0) ent -= p * log(p);
            }
            a->pent[(size_t)h * S + i] = ent;
            if (a->psum_heads) {
                double *sh = a->psum_heads + ((size_t)li * H + h) * SS + (size_t)i * S;
                for (int j = 0; j < n; j++) sh[j] += (double)row[j];
            }
        }
        const float *col = probs + (size_t)i * S;
        for (int j = 0; j < n; j++) {
            double t = 0;
            for (int h = 0; h < H; h++) t += (double)col[(size_t)h * SS + j];
            out[j] += t;
        }
    }
    const int len = a->cur_len > 0 ? a->cur_len : S;
    for (int h = 0; h < H; h++) { /* queries 1..len-1: query 0 sees only itself */
        double sk = 0, en = 0;
        for (int i = 1; i < len; i++) {
            sk += (double)probs[(size_t)h * SS + (size_t)i * S];
            en += a->pent[(size_t)h * S + i];
        }
        a->sink[(size_t)li * H + h] += sk;
        a->entropy[(size_t)li * H + h] += en;
    }
}

static int probs_scratch(MpProbeAcc *a) {
    a->pent = mp_try_calloc((size_t)a->H * a->S, sizeof(double));
    return a->pent ? MP_OK : MP_ERR;
}

static void probs_off(MpProbeAcc *a) { free(a->pent); }

static uint64_t probs_scratch_bytes(const MpProbeAcc *a) { return 8 * (uint64_t)a->H * a->S; }

/* probs.npy [L,S,S] = psum / (n_done·H): rows sum to 1, 0 where masked (lengths on: over the
 * sequences each entry has seen, NaN where none has). */
static void probs_out_mean(const MpProbeAcc *a, double *out) {
    const int S = a->S;
    const size_t SS = (size_t)S * S;
    const double dnh = (double)a->n_done * a->H;
    for (size_t k = 0; k < SS * a->L; k++) {
        if (!a->npos) {
            out[k] = a->psum[k] / dnh;
            continue;
        }
        const double c = mp_probe_acc_entry_count(a, (int)(k / SS), (int)(k / S % S), (int)(k % S));
        out[k] = c > 0 ? a->psum[k] / (c * a->H) : NAN;
    }
}

/* probs_heads.npy [L,H,S,S] = psum_heads / n_done (lengths on: per entry, as probs.npy). */
static void probs_out_heads(const MpProbeAcc *a, double *out) {
    const int S = a->S;
    const size_t SS = (size_t)S * S, LH = (size_t)a->L * a->H;
    const double dn = (double)a->n_done;
    for (size_t k = 0; k < SS * LH; k++) {
        if (!a->npos) {
            out[k] = a->psum_heads[k] / dn;
            continue;
        }
        const double c = mp_probe_acc_entry_count(a, (int)(k / SS / a->H), (int)(k / S % S), (int)(k % S));
        out[k] = c > 0 ? a->psum_heads[k] / c : NAN;
    }
}

void mp_probe_acc_probs_mean(const MpProbeAcc *a, double *sink, double *entropy) {
    const int S = a->S, H = a->H;
    const double nq = (double)a->n_done * (S - 1);
    for (int l = 0; l < a->L; l++) {
        double q = nq; /* query rows 1.. over the sequences */
        if (a->npos) {
            q = 0;
            for (int p = 1; p < S; p++) q += a->npos[(size_t)l * S + p];
        }
        for (int h = 0; h < H; h++) {
            const size_t k = (size_t)l * H + h;
            sink[k] = S > 1 ? a->sink[k] / q : NAN;
            entropy[k] = S > 1 ? a->entropy[k] / q : NAN;
        }
    }
}

/* ================================================================ lengths */

/* Once every row of slot li is in: the positions the sequence has (the block counts are added with
 * its block means, mp_probe_acc_block_seq). */
static void lengths_layer(MpProbeAcc *a, int li) {
    const int len = a->cur_len > 0 ? a->cur_len : a->S;
    for (int p = 0; p < len; p++) a->npos[(size_t)li * a->S + p] += 1.0;
}

/* ================================================================ table */

#define ARR(f, sh, ph, ck) {#f, offsetof(MpProbeAcc, f), MP_PROBE_SH_##sh, ph, ck}

/* One row per statistic, keyed by MpProbeStatId. The arrays' order is the checkpoint's (versions
 * 8 and 9, probe_ckpt.c): do not reorder them, nor the rows. A row left out of the middle is all zeros and
 * stops every accumulator at its first init (probe_stats_check); one left off the end, or one too
 * many, does not compile (the assertion below: probe.h declares the table without its size). */
const MpProbeStat mp_probe_stats[] = {
    [MP_PROBE_STAT_MAPS] = {
        .name = "maps", .help = "the mean score maps, their standard errors and the block test (always on)",
        .what = "the score maps", .in = MP_PROBE_IN_HEADSUM, .in_heads = MP_PROBE_IN_HEADS,
        .arrays = {ARR(sum, LSS, 0, 1), ARR(sumsq, LSS, 0, 2), ARR(bsum, LBB, 0, 1), ARR(bsumsq, LBB, 0, 2),
                   ARR(sum_heads, LHSS, 1, 1), ARR(sumsq_heads, LHSS, 1, 0), ARR(bflip, LFBB, 0, 1), ARR(rsq, L, 0, 2),
                   ARR(csq, L, 0, 2)},
        .scratch = maps_scratch, .off = maps_off, .rows = maps_rows, .headsum = maps_headsum, .layer = maps_layer,
        .scratch_bytes = maps_scratch_bytes, .out_bytes = maps_out_bytes,
    },
    [MP_PROBE_STAT_PROBS] = {
        .name = "probs", .help = "mean post-softmax maps, first-token mass and entropy per head",
        .what = "the probability maps", .in = MP_PROBE_IN_PROBS,
        .arrays = {ARR(psum, LSS, 0, 0), ARR(psum_heads, LHSS, 1, 0), ARR(sink, LH, 0, 0), ARR(entropy, LH, 0, 0)},
        .outs = {{"probs.npy", MP_PROBE_SH_LSS, 0,
                  "float64 [L,S,S] mean post-softmax attention over sequences and heads; rows sum to 1, 0 where masked",
                  probs_out_mean},
                 {"probs_heads.npy", MP_PROBE_SH_LHSS, 1, "float64 [L,H,S,S] mean post-softmax attention per head",
                  probs_out_heads}},
        .scratch = probs_scratch, .off = probs_off, .probs = probs_add, .scratch_bytes = probs_scratch_bytes,
    },
    [MP_PROBE_STAT_RECENCY] = {
        .name = "recency", .help = "recency probability per layer and head; NRI, block z by length",
        .what = "the recency sums", .in = MP_PROBE_IN_HEADS,
        .arrays = {ARR(rp_row, LHS, 0, 0), ARR(rp_lsq, LN, 0, 0), ARR(rp_hsq, LH, 0, 0), ARR(lbsum, NL1616, 0, 0),
                   ARR(lbsumsq, NL1616, 0, 0)},
        .dims = mp_probe_recency_dims, .scratch = mp_probe_recency_scratch, .off = mp_probe_recency_off,
        .rows = mp_probe_recency_rows, .layer = mp_probe_recency_layer, .scratch_bytes = mp_probe_recency_scratch_bytes,
    },
    [MP_PROBE_STAT_LENGTHS] = {
        .name = "lengths", .help = "counts of sequences shorter than S per position and block (the C API's padded batches)",
        .what = "the per-position counts", .arrays = {ARR(npos, LS, 0, 2), ARR(bcnt, LBB, 0, 2)},
        .layer = lengths_layer,
    },
    [MP_PROBE_STAT_VARIANCE] = {
        .name = "variance", .help = "variance of the attention output and the residual stream by position, its slope",
        .what = "the variance sums", .in = MP_PROBE_IN_CAPTURE,
        .points = 1u << MP_FWD_AT_ATTN_MIX | 1u << MP_FWD_AT_LAYER_OUT,
        .arrays = {ARR(vattn, LMS, 0, 1), ARR(vheads, LHMS, 0, 1), ARR(vresid, LMS, 0, 1), ARR(vgroup, LGJS, 0, 1)},
        .outs = {{"var_attn.npy", MP_PROBE_SH_LS, 0,
                  "float64 [L,S] variance over sequences and dimensions of the attention output before o_proj "
                  "(every head's dimensions together), by position", mp_probe_var_attn},
                 {"var_attn_se.npy", MP_PROBE_SH_LS, 0, "float64 [L,S] its standard error (sequences as independent draws)",
                  mp_probe_var_attn_se},
                 {"var_attn_heads.npy", MP_PROBE_SH_LHS, 0, "float64 [L,H,S] the same per head", mp_probe_var_heads},
                 {"var_attn_heads_se.npy", MP_PROBE_SH_LHS, 0, "float64 [L,H,S] its standard error", mp_probe_var_heads_se},
                 {"var_resid.npy", MP_PROBE_SH_LS, 0,
                  "float64 [L,S] variance over sequences and dimensions of the residual stream after the layer, by position",
                  mp_probe_var_resid},
                 {"var_resid_se.npy", MP_PROBE_SH_LS, 0, "float64 [L,S] its standard error", mp_probe_var_resid_se}},
        .scratch = mp_probe_var_scratch, .off = mp_probe_var_off, .capture = mp_probe_var_capture,
        .scratch_bytes = mp_probe_var_scratch_bytes,
    },
    [MP_PROBE_STAT_FREQ] = {
        .name = "freq", .help = "RoPE frequency usage: per head and frequency pair the q and k norms, |contribution|",
        .what = "the RoPE frequency sums", .in = MP_PROBE_IN_CAPTURE, .points = 1u << MP_FWD_AT_Q | 1u << MP_FWD_AT_K,
        .arrays = {ARR(fr_sum, LH6Q, 0, 1)},
        .outs = {{"freq_q_norm.npy", MP_PROBE_SH_LHP, 0,
                  "float64 [L,H,P] mean over sequences and positions of the norm of the rotated query's 2-D component of "
                  "frequency pair p (dims p and p+R/2 of the head; pair 0 the highest frequency)", mp_probe_freq_q_norm},
                 {"freq_q_norm_se.npy", MP_PROBE_SH_LHP, 0, "float64 [L,H,P] its standard error (sequences as independent draws)",
                  mp_probe_freq_q_norm_se},
                 {"freq_k_norm.npy", MP_PROBE_SH_LHP, 0, "float64 [L,H,P] the same of the key head query head h reads",
                  mp_probe_freq_k_norm},
                 {"freq_k_norm_se.npy", MP_PROBE_SH_LHP, 0, "float64 [L,H,P] its standard error", mp_probe_freq_k_norm_se},
                 {"freq_contrib.npy", MP_PROBE_SH_LHP, 0,
                  "float64 [L,H,P] mean over sequences and the observed (i, j) of the sampled query rows of "
                  "|scale * (q_i . k_j) over pair p|, the pair's contribution to the pre-softmax score", mp_probe_freq_contrib},
                 {"freq_contrib_se.npy", MP_PROBE_SH_LHP, 0, "float64 [L,H,P] its standard error", mp_probe_freq_contrib_se},
                 {"freq_rest.npy", MP_PROBE_SH_LH3, 0,
                  "float64 [L,H,3] the unrotated dims R..HS-1 together (partial rotary): q norm, k norm, |contribution| "
                  "(0 when every dim rotates)", mp_probe_freq_rest},
                 {"freq_rest_se.npy", MP_PROBE_SH_LH3, 0, "float64 [L,H,3] their standard errors", mp_probe_freq_rest_se},
                 {"freq_angle.npy", MP_PROBE_SH_LP, 0,
                  "float64 [L,P] the angle per position of each pair in this run (scaling applied; 0 where not rotated: "
                  "--no-rope, a NoPE layer, the pairs --rope-keep-high leaves)", mp_probe_freq_table},
                 {"freq_base.npy", MP_PROBE_SH_L, 0, "float64 [L] the RoPE base of each layer's table (gemma3: local or "
                  "global; 0 where not rotated)", mp_probe_freq_base}},
        .dims = mp_probe_freq_dims, .scratch = mp_probe_freq_scratch, .off = mp_probe_freq_off,
        .capture = mp_probe_freq_capture, .scratch_bytes = mp_probe_freq_scratch_bytes,
    },
    [MP_PROBE_STAT_POSITION] = {
        .name = "position", .help = "ridge probe of the position from the residual stream: held-out R2, mean abs error",
        .what = "the position probe's sums", .in = MP_PROBE_IN_CAPTURE, .points = 1u << MP_FWD_AT_LAYER_OUT,
        .arrays = {ARR(pos_sums, LPOS, 0, 1), ARR(pos_test, LPMK, 0, 1)},
        .outs = {{"pos_probe.npy", MP_PROBE_SH_LPQ, 0,
                  "float64 [L,11] position probe per layer: held-out R2, MAE (positions), its se, chance R2, chance MAE, "
                  "in-sample R2, positions fitted, held out, in the MAE, lambda, held-out R2's se (docs/outputs.md)", mp_probe_pos_out}},
        .dims = mp_probe_pos_dims, .scratch = mp_probe_pos_scratch, .off = mp_probe_pos_off, .capture = mp_probe_pos_capture,
        .scratch_bytes = mp_probe_pos_scratch_bytes, .out_bytes = mp_probe_pos_out_bytes,
    },
};
#undef ARR
_Static_assert(sizeof mp_probe_stats / sizeof mp_probe_stats[0] == MP_PROBE_NSTATS, "one row per MpProbeStatId");

/* A row breaks a rule: say which and stop (a programmer's error, found by the first accumulator). */
static void probe_stats_fail(int id, const char *rule) {
    fprintf(stderr, "maskpos: mp_probe_stats[%d] (%s): %s\n", id, mp_probe_stats[id].name ? mp_probe_stats[id].name : "no row",
            rule);
    MP_ASSERT(!"a row of the statistics table breaks a rule (above)");
}

/* Every row is there and has the functions its inputs call; no field is a sum of two rows. */
static void probe_stats_check(void) {
    size_t offs[MP_PROBE_MAX_ARRAYS];
    int noff = 0;
    for (int id = 0; id < MP_PROBE_NSTATS; id++) {
        const MpProbeStat *s = &mp_probe_stats[id];
        const unsigned in = s->in | s->in_heads;
        if (!s->name || !s->help || !s->what) probe_stats_fail(id, "no name, help or what: a row left out of the table?");
        if ((in & (MP_PROBE_IN_HEADS | MP_PROBE_IN_HEADSUM)) && !s->rows)
            probe_stats_fail(id, "reads score rows but has no rows()");
        if ((in & MP_PROBE_IN_HEADSUM) && !s->headsum) probe_stats_fail(id, "reads head sums but has no headsum()");
        if ((in & MP_PROBE_IN_PROBS) && !s->probs) probe_stats_fail(id, "reads probabilities but has no probs()");
        if ((in & MP_PROBE_IN_CAPTURE) && (!s->capture || !s->points))
            probe_stats_fail(id, "reads captures but has no capture() or no points");
        if (!(in & MP_PROBE_IN_CAPTURE) && (s->capture || s->points))
            probe_stats_fail(id, "capture() or points without the input");
        if (s->rows && !(in & (MP_PROBE_IN_HEADS | MP_PROBE_IN_HEADSUM))) probe_stats_fail(id, "rows() without the input");
        if (s->headsum && !(in & MP_PROBE_IN_HEADSUM)) probe_stats_fail(id, "headsum() without the input");
        if (s->probs && !(in & MP_PROBE_IN_PROBS)) probe_stats_fail(id, "probs() without the input");
        if (s->scratch && (!s->off || !s->scratch_bytes)) probe_stats_fail(id, "scratch() without off() or scratch_bytes()");
        if (!in && !s->layer) probe_stats_fail(id, "reads no input and has no layer(): its sums would stay 0");
        if (!s->arrays[0].name) probe_stats_fail(id, "no sums: a statistic is its sums");
        for (int k = 0; k < MP_PROBE_STAT_ARRAYS && s->arrays[k].name; k++) {
            for (int q = 0; q < noff; q++)
                if (offs[q] == s->arrays[k].off) probe_stats_fail(id, "a field listed twice");
            offs[noff++] = s->arrays[k].off;
        }
        for (int k = 0; k < MP_PROBE_STAT_OUTS && s->outs[k].file; k++)
            if (!s->outs[k].fill || !s->outs[k].of) probe_stats_fail(id, "an output without fill() or its text");
    }
}

/* ================================================================ engine */

static double **arr_field(const MpProbeAcc *a, const MpProbeArrSpec *s) { return (double **)((char *)a + s->off); }

/* The length in doubles of shape for a's dimensions. */
static size_t shape_len(const MpProbeAcc *a, int shape) {
    int64_t d[4];
    const int nd = mp_probe_shape_dims(a, shape, d);
    size_t n = 1;
    for (int k = 0; k < nd; k++) n *= (size_t)d[k];
    return n;
}

int mp_probe_shape_dims(const MpProbeAcc *a, int shape, int64_t d[4]) {
    const int64_t L = a->L, H = a->H, S = a->S;
    switch ((MpProbeShape)shape) {
    case MP_PROBE_SH_LSS: d[0] = L, d[1] = S, d[2] = S; return 3;
    case MP_PROBE_SH_LHSS: d[0] = L, d[1] = H, d[2] = S, d[3] = S; return 4;
    case MP_PROBE_SH_LBB: d[0] = L, d[1] = a->nb, d[2] = a->nb; return 3;
    case MP_PROBE_SH_LH: d[0] = L, d[1] = H; return 2;
    case MP_PROBE_SH_LHS: d[0] = L, d[1] = H, d[2] = S; return 3;
    case MP_PROBE_SH_LN: d[0] = L, d[1] = a->nlen; return 2;
    case MP_PROBE_SH_NL1616: d[0] = a->nlen, d[1] = L, d[2] = 16, d[3] = 16; return 4;
    case MP_PROBE_SH_L: d[0] = L; return 1;
    case MP_PROBE_SH_LS: d[0] = L, d[1] = S; return 2;
    case MP_PROBE_SH_LFBB: d[0] = L, d[1] = MP_PROBE_FLIPS, d[2] = a->nb, d[3] = a->nb; return 4;
    case MP_PROBE_SH_LMS: d[0] = L, d[1] = MP_PROBE_VAR_MOMENTS, d[2] = S; return 3;
    case MP_PROBE_SH_LHMS: d[0] = L, d[1] = H, d[2] = MP_PROBE_VAR_MOMENTS, d[3] = S; return 4;
    case MP_PROBE_SH_LGJS: d[0] = L, d[1] = MP_PROBE_VAR_GROUPS, d[2] = MP_PROBE_VAR_GROUP_ROWS, d[3] = S; return 4;
    case MP_PROBE_SH_LH6Q: d[0] = L, d[1] = H, d[2] = 6, d[3] = a->fr_rot / 2 + 1; return 4;
    case MP_PROBE_SH_LHP: d[0] = L, d[1] = H, d[2] = a->fr_rot / 2; return 3;
    case MP_PROBE_SH_LH3: d[0] = L, d[1] = H, d[2] = 3; return 3;
    case MP_PROBE_SH_LP: d[0] = L, d[1] = a->fr_rot / 2; return 2;
    case MP_PROBE_SH_LPOS: d[0] = L, d[1] = 2 + mp_probe_pos_groups(a->pos_dim), d[2] = 3 + 2 * (int64_t)a->pos_dim + (int64_t)a->pos_dim * a->pos_dim; return 3;
    case MP_PROBE_SH_LPMK: d[0] = L, d[1] = MP_PROBE_POS_MAE_ROWS, d[2] = (int64_t)a->pos_dim + 1; return 3;
    case MP_PROBE_SH_LPQ: d[0] = L, d[1] = MP_PROBE_POS_COLS; return 2;
    }
    MP_ASSERT(!"unknown MpProbeShape");
    return 0;
}

/* 1 when array k of row s is one a has (its statistic on; per head only with per_head). */
static int arr_on(const MpProbeAcc *a, int id, const MpProbeArrSpec *s) {
    return mp_probe_acc_has(a, id) && (!s->per_head || a->per_head);
}

int mp_probe_acc_arrays(const MpProbeAcc *a, MpProbeArray *out) {
    int n = 0;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        for (int k = 0; k < MP_PROBE_STAT_ARRAYS && mp_probe_stats[id].arrays[k].name; k++) {
            const MpProbeArrSpec *s = &mp_probe_stats[id].arrays[k];
            if (!arr_on(a, id, s)) continue;
            double *p = *arr_field(a, s);
            MP_ASSERT(p);
            out[n++] = (MpProbeArray){p, shape_len(a, s->shape), s->name, s->shape != MP_PROBE_SH_NL1616, s->check, id};
        }
    return n;
}

/* Statistic id's dims, scratch and zeroed sums, and its bit. */
static int stat_alloc(MpProbeAcc *a, int id, MpErr *e) {
    MP_ASSERT(id >= 0 && id < MP_PROBE_NSTATS && !mp_probe_acc_has(a, id));
    const MpProbeStat *s = &mp_probe_stats[id];
    if (s->dims && s->dims(a, e) != MP_OK) return MP_ERR;
    int ok = !s->scratch || s->scratch(a) == MP_OK;
    for (int k = 0; k < MP_PROBE_STAT_ARRAYS && s->arrays[k].name; k++) {
        if (s->arrays[k].per_head && !a->per_head) continue;
        double **p = arr_field(a, &s->arrays[k]);
        *p = mp_try_calloc(shape_len(a, s->arrays[k].shape), sizeof(double));
        ok = ok && *p;
    }
    if (!ok) /* what was allocated is freed by mp_probe_acc_free */
        return mp_err_set(e, "out of memory for %s (%d layers of %d x %d%s)", s->what, a->L, a->S, a->S,
                          a->per_head ? ", per head" : "");
    a->stats |= MP_PROBE_STAT_BIT(id);
    return MP_OK;
}

int mp_probe_acc_stat_on(MpProbeAcc *a, int id, MpErr *e) {
    MP_ASSERT(a->n_done == 0);
    return stat_alloc(a, id, e);
}

int mp_probe_acc_stats_on(MpProbeAcc *a, unsigned set, MpErr *e) {
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if ((set >> id & 1u) && !mp_probe_acc_has(a, id) && mp_probe_acc_stat_on(a, id, e) != MP_OK) return MP_ERR;
    return MP_OK;
}

int mp_probe_acc_init(MpProbeAcc *a, const unsigned char *layers_mask, int n_model_layers, int H, int S,
                      int per_head, int causal, int threads, MpErr *e) {
    probe_stats_check();
    memset(a, 0, sizeof *a);
    if (n_model_layers > 256) return mp_err_set(e, "more than 256 layers are not supported");
    int L = 0;
    for (int l = 0; l < 256; l++) a->layer_of[l] = -1;
    for (int l = 0; l < n_model_layers; l++)
        if (layers_mask[l]) a->layer_of[l] = L++;
    if (L == 0) return mp_err_set(e, "no layer selected");
    a->L = L;
    a->H = H;
    a->S = S;
    a->per_head = per_head;
    a->causal = causal;
    a->threads = threads < 1 ? 1 : threads;
    size_t map, all, allh;
    if (mp_size_mul((size_t)S, (size_t)S, &map) || mp_size_mul(map, (size_t)L, &all))
        return mp_err_set(e, "maps too large");
    if (per_head && mp_size_mul(all, (size_t)H, &allh)) return mp_err_set(e, "per-head maps too large");
    a->nb = S < 16 ? S : 16;
    if (mp_probe_acc_stat_on(a, MP_PROBE_STAT_MAPS, e) != MP_OK) {
        mp_probe_acc_free(a);
        return MP_ERR;
    }
    return MP_OK;
}

int mp_probe_acc_init_like(MpProbeAcc *part, const MpProbeAcc *a, int threads, MpErr *e) {
    unsigned char mask[256] = {0};
    for (int l = 0; l < 256; l++) mask[l] = a->layer_of[l] >= 0;
    if (mp_probe_acc_init(part, mask, 256, a->H, a->S, a->per_head, a->causal, threads, e) != MP_OK) return MP_ERR;
    if (a->skip) mp_probe_acc_skip(part, a->skip);
    memcpy(part->window, a->window, sizeof part->window); /* the sliding windows, so the sums merge */
    mp_probe_freq_like(part, a); /* the heads' geometry (--stats freq) */
    part->pos_width = a->pos_width, part->pos_dim = a->pos_dim, part->pos_stride = a->pos_stride; /* the position probe's */
    part->pos_ridge = a->pos_ridge, part->resid_stride = a->resid_stride;
    if (mp_probe_acc_stats_on(part, a->stats, e) != MP_OK) {
        mp_probe_acc_free(part);
        return MP_ERR;
    }
    return MP_OK;
}

void mp_probe_acc_free(MpProbeAcc *a) {
    for (int id = 0; id < MP_PROBE_NSTATS; id++) { /* every row's sums and scratch, allocated or NULL */
        const MpProbeStat *s = &mp_probe_stats[id];
        for (int k = 0; k < MP_PROBE_STAT_ARRAYS && s->arrays[k].name; k++) free(*arr_field(a, &s->arrays[k]));
        if (s->off) s->off(a);
    }
    memset(a, 0, sizeof *a);
}

void mp_probe_acc_reset(MpProbeAcc *a) {
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(a, t);
    for (int k = 0; k < n; k++) memset(t[k].p, 0, t[k].n * sizeof(double));
    a->n_done = 0;
}

void mp_probe_acc_seq_end(MpProbeAcc *a) { a->n_done++; }

int mp_probe_acc_merge(MpProbeAcc *dst, const MpProbeAcc *src, MpErr *e) {
    if (dst->S != src->S || mp_probe_acc_has(dst, MP_PROBE_STAT_LENGTHS) != mp_probe_acc_has(src, MP_PROBE_STAT_LENGTHS))
        return mp_probe_acc_embed(dst, src, NULL, NULL, e);
    if (dst->L != src->L || dst->H != src->H || dst->S != src->S || dst->per_head != src->per_head ||
        dst->causal != src->causal || dst->skip != src->skip || dst->nb != src->nb || dst->stats != src->stats ||
        dst->nlen != src->nlen || memcmp(dst->layer_of, src->layer_of, sizeof dst->layer_of) ||
        memcmp(dst->window, src->window, sizeof dst->window) || dst->fr_rot != src->fr_rot)
        return mp_err_set(e, "cannot merge probe sums of different runs (layers, heads, length, flags or statistics differ)");
    MpProbeArray td[MP_PROBE_MAX_ARRAYS], ts[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(dst, td);
    MP_ASSERT(mp_probe_acc_arrays(src, ts) == n);
    for (int k = 0; k < n; k++) {
        double *d = td[k].p;
        const double *s = ts[k].p;
        for (size_t i = 0; i < td[k].n; i++) d[i] += s[i];
    }
    dst->n_done += src->n_done;
    return MP_OK;
}

/* ================================================================ sequences shorter than S */

int mp_probe_acc_lengths_on(MpProbeAcc *a, const int64_t *counts, MpErr *e) {
    if (mp_probe_acc_has(a, MP_PROBE_STAT_LENGTHS)) return MP_OK;
    if (mp_probe_acc_has(a, MP_PROBE_STAT_RECENCY)) /* (the row itself may be on with recency: every sequence whole) */
        return mp_err_set(e, "sequences shorter than S cannot be counted with recency (its triple counts and "
                             "prefix lengths need every sequence whole)");
    if (stat_alloc(a, MP_PROBE_STAT_LENGTHS, e) != MP_OK) return MP_ERR; /* may come after sequences */
    const int nbb = a->nb * a->nb;
    for (int l = 0; l < a->L; l++) { /* what the sequences so far (every one of length S) count */
        const double n = (double)(counts ? counts[l] : a->n_done);
        for (int p = 0; p < a->S; p++) a->npos[(size_t)l * a->S + p] = n;
        for (int k = 0; k < nbb; k++) /* a block the sequences so far observed (mp_probe_block_z's rule) */
            if (a->bsum[(size_t)l * nbb + k] != 0 || a->bsumsq[(size_t)l * nbb + k] != 0) a->bcnt[(size_t)l * nbb + k] = n;
    }
    return MP_OK;
}

/* dst's array s += src's, src's [.., Ss, Ss] maps (and [L, Ss] counts) into dst's top-left corner (Ss <= S). */
static void probe_embed_array(MpProbeAcc *dst, const MpProbeAcc *src, const MpProbeArrSpec *s) {
    double *d = *arr_field(dst, s);
    const double *x = *arr_field(src, s);
    const int S = dst->S, Ss = src->S;
    switch ((MpProbeShape)s->shape) {
    case MP_PROBE_SH_LSS:
    case MP_PROBE_SH_LHSS: {
        const size_t maps = (size_t)dst->L * (s->shape == MP_PROBE_SH_LHSS ? (size_t)dst->H : 1);
        for (size_t m = 0; m < maps; m++)
            for (int i = 0; i < Ss; i++)
                for (int j = 0; j < Ss; j++) d[(m * S + i) * S + j] += x[(m * Ss + i) * Ss + j];
        break;
    }
    case MP_PROBE_SH_LS:
        for (int l = 0; l < dst->L; l++)
            for (int p = 0; p < Ss; p++) d[(size_t)l * S + p] += x[(size_t)l * Ss + p];
        break;
    default: /* sizes independent of S (the block grids are equal; no --recency) */
        for (size_t k = 0; k < shape_len(src, s->shape); k++) d[k] += x[k];
    }
}

int mp_probe_acc_embed(MpProbeAcc *dst, const MpProbeAcc *src, const int64_t *dcounts, const int64_t *scounts, MpErr *e) {
    const unsigned len_bit = MP_PROBE_STAT_BIT(MP_PROBE_STAT_LENGTHS);
    if (src->S > dst->S) return mp_err_set(e, "cannot merge probe sums of length %d into length %d (the longer one takes the other)", src->S, dst->S);
    if (dst->L != src->L || dst->H != src->H || dst->per_head != src->per_head || dst->causal != src->causal ||
        dst->skip != src->skip || ((dst->stats ^ src->stats) & ~len_bit) || memcmp(dst->layer_of, src->layer_of, sizeof dst->layer_of) ||
        dst->fr_rot != src->fr_rot)
        return mp_err_set(e, "cannot merge probe sums of different runs (layers, heads, flags or statistics differ)");
    if (mp_probe_acc_has(dst, MP_PROBE_STAT_RECENCY) || mp_probe_acc_has(src, MP_PROBE_STAT_RECENCY))
        return mp_err_set(e, "cannot merge probe sums of different lengths with recency");
    if (mp_probe_acc_has(dst, MP_PROBE_STAT_VARIANCE) || mp_probe_acc_has(src, MP_PROBE_STAT_VARIANCE))
        return mp_err_set(e, "cannot merge probe sums of different lengths with variance");
    if (dst->nb != src->nb)
        return mp_err_set(e, "cannot merge probe sums of lengths %d and %d: their block grids differ (%d and %d blocks per side; "
                             "both need at least 16 positions from the first)", src->S, dst->S, src->nb, dst->nb);
    for (int l = 0; l < dst->L; l++)
        if (src->window[l] != dst->window[l] && !(src->window[l] == 0 && (dst->window[l] == 0 || dst->window[l] >= src->S)))
            return mp_err_set(e, "cannot merge probe sums: layer slot %d has window %d in one and %d in the other", l,
                              src->window[l], dst->window[l]);
    if (mp_probe_acc_lengths_on(dst, dcounts, e) != MP_OK) return MP_ERR;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        for (int k = 0; k < MP_PROBE_STAT_ARRAYS && mp_probe_stats[id].arrays[k].name; k++) {
            const MpProbeArrSpec *s = &mp_probe_stats[id].arrays[k];
            if (!arr_on(src, id, s)) continue;
            if ((s->off == offsetof(MpProbeAcc, rsq) || s->off == offsetof(MpProbeAcc, csq)) && src->S < dst->S) continue;
            probe_embed_array(dst, src, s); /* rsq, csq: full-length sequences only */
        }
    if (!mp_probe_acc_has(src, MP_PROBE_STAT_LENGTHS)) { /* every sequence of src has its length */
        const int nbb = dst->nb * dst->nb;
        for (int l = 0; l < dst->L; l++) {
            const double n = (double)(scounts ? scounts[l] : src->n_done);
            for (int p = 0; p < src->S; p++) dst->npos[(size_t)l * dst->S + p] += n;
            for (int q = 0; q < nbb; q++)
                if (src->bsum[(size_t)l * nbb + q] != 0 || src->bsumsq[(size_t)l * nbb + q] != 0) dst->bcnt[(size_t)l * nbb + q] += n;
        }
    }
    dst->n_done += src->n_done;
    return MP_OK;
}

void mp_probe_acc_windows(MpProbeAcc *a, const MpModel *m) {
    MP_ASSERT(a->n_done == 0);
    for (int l = 0; l < m->n_layers && l < 256; l++) {
        const int li = a->layer_of[l], W = mp_model_layer_window(m, l);
        if (li >= 0) a->window[li] = W > 0 && W < a->S ? W : 0;
    }
}

void mp_probe_acc_skip(MpProbeAcc *a, int skip) {
    MP_ASSERT(a->n_done == 0 && skip >= 0 && a->S - skip >= 2);
    a->skip = skip;
    a->nb = a->S - skip < 16 ? a->S - skip : 16; /* no more than the blocks allocated for S */
}

unsigned mp_probe_stats_inputs(unsigned set, int per_head) {
    unsigned in = 0;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (set >> id & 1u) in |= mp_probe_stats[id].in | (per_head ? mp_probe_stats[id].in_heads : 0);
    return in;
}

unsigned mp_probe_stats_points(unsigned set) {
    unsigned p = 0;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (set >> id & 1u) p |= mp_probe_stats[id].points;
    return p;
}

unsigned mp_probe_acc_inputs(const MpProbeAcc *a) { return mp_probe_stats_inputs(a->stats, a->per_head); }

int mp_probe_acc_needs_heads(const MpProbeAcc *a) { return (mp_probe_acc_inputs(a) & MP_PROBE_IN_HEADS) != 0; }

/* 1 when the n bytes at w name statistic id ('-' and '_' alike). */
static int stat_named(int id, const char *w, size_t n) {
    const char *s = mp_probe_stats[id].name;
    if (strlen(s) != n) return 0;
    for (size_t k = 0; k < n; k++)
        if (s[k] != w[k] && !((s[k] == '-' || s[k] == '_') && (w[k] == '-' || w[k] == '_'))) return 0;
    return 1;
}

int mp_probe_stats_parse(const char *list, unsigned *set, MpErr *e) {
    for (const char *p = list; p && *p;) {
        while (*p == ',' || *p == ' ') p++;
        const size_t n = strcspn(p, ", ");
        if (!n) break;
        int id = 0;
        while (id < MP_PROBE_NSTATS && !stat_named(id, p, n)) id++;
        if (id == MP_PROBE_NSTATS) {
            char names[512];
            mp_probe_stats_names(~MP_PROBE_STAT_BIT(MP_PROBE_STAT_MAPS), names, sizeof names);
            return mp_err_set(e, "'%.*s' is not a statistic of the probe (one of: %s)", (int)(n < 64 ? n : 64), p, names);
        }
        *set |= MP_PROBE_STAT_BIT(id);
        p += n;
    }
    return MP_OK;
}

size_t mp_probe_stats_names(unsigned set, char *buf, size_t cap) {
    size_t len = 0;
    if (cap) buf[0] = 0;
    for (int id = 1; id < MP_PROBE_NSTATS; id++) /* the maps are always on: not named */
        if (set >> id & 1u) {
            const int w = snprintf(len < cap ? buf + len : NULL, len < cap ? cap - len : 0, "%s%s", len ? "," : "",
                                   mp_probe_stats[id].name);
            len += (size_t)w;
        }
    return len;
}

void mp_probe_stats_bytes(unsigned set, int L, int H, int S, int per_head, int threads, uint64_t *sums, uint64_t *scratch,
                          uint64_t *outs) {
    MpProbeAcc a;
    memset(&a, 0, sizeof a);
    a.L = L, a.H = H, a.S = S, a.per_head = per_head, a.threads = threads;
    mp_probe_stats_bytes_acc(&a, set, sums, scratch, outs);
}

void mp_probe_stats_bytes_acc(const MpProbeAcc *like, unsigned set, uint64_t *sums, uint64_t *scratch, uint64_t *outs) {
    MpProbeAcc a; /* the dimensions and settings only: nothing allocated */
    memset(&a, 0, sizeof a);
    const int S = like->S, per_head = like->per_head;
    a.L = like->L, a.H = like->H, a.S = S, a.per_head = per_head, a.threads = like->threads < 1 ? 1 : like->threads;
    a.nb = S < 16 ? S : 16;
    a.pos_width = like->pos_width, a.pos_dim = like->pos_dim, a.pos_stride = like->pos_stride, a.pos_ridge = like->pos_ridge;
    *sums = *scratch = *outs = 0;
    set |= MP_PROBE_STAT_BIT(MP_PROBE_STAT_MAPS);
    for (int id = 0; id < MP_PROBE_NSTATS; id++) {
        const MpProbeStat *s = &mp_probe_stats[id];
        MpErr e;
        if (!(set >> id & 1u) || (s->dims && s->dims(&a, &e) != MP_OK)) continue; /* a run without it (its message) */
        for (int k = 0; k < MP_PROBE_STAT_ARRAYS && s->arrays[k].name; k++)
            if (!s->arrays[k].per_head || per_head) *sums += 8 * (uint64_t)shape_len(&a, s->arrays[k].shape);
        for (int k = 0; k < MP_PROBE_STAT_OUTS && s->outs[k].file; k++)
            if (!s->outs[k].per_head || per_head) *outs += 8 * (uint64_t)shape_len(&a, s->outs[k].shape);
        if (s->scratch_bytes) *scratch += s->scratch_bytes(&a);
        if (s->out_bytes) *outs += s->out_bytes(&a);
    }
}

/* ================================================================ callbacks */

/* The slot of model layer `layer` in a's maps, or -1 when the layer is not kept. */
static int acc_slot(const MpProbeAcc *a, int layer) { return layer >= 0 && layer < 256 ? a->layer_of[layer] : -1; }

/* The inputs row id reads in a (its in_heads too when per_head). */
static unsigned stat_in(const MpProbeAcc *a, int id) {
    return mp_probe_stats[id].in | (a->per_head ? mp_probe_stats[id].in_heads : 0);
}

/* Rows [i0, i1) of every head (f32, or f64 when f32 is NULL) to the statistics that read rows. */
static void acc_rows(MpProbeAcc *a, int li, const float *f32, const double *f64, int i0, int i1, int worker) {
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_acc_has(a, id) && (stat_in(a, id) & (MP_PROBE_IN_HEADS | MP_PROBE_IN_HEADSUM)))
            mp_probe_stats[id].rows(a, li, f32, f64, i0, i1, worker);
}

void mp_probe_acc_rows(void *ctx, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && n_heads == a->H && 0 <= i0 && i0 <= i1 && i1 <= T && worker >= 0 && worker < a->threads);
    const int li = acc_slot(a, layer);
    if (li >= 0) acc_rows(a, li, scores, NULL, i0, i1, worker);
}

void mp_probe_acc_rows_f64(MpProbeAcc *a, int layer, const double *scores, int i0, int i1, int worker) {
    MP_ASSERT(0 <= i0 && i0 <= i1 && i1 <= a->S && worker >= 0 && worker < a->threads);
    const int li = acc_slot(a, layer);
    if (li >= 0) acc_rows(a, li, NULL, scores, i0, i1, worker);
}

void mp_probe_acc_rows_headsum(void *ctx, int layer, const double *hs, int T, int i0, int i1, int worker) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && 0 <= i0 && i0 <= i1 && i1 <= T && worker >= 0 && worker < a->threads);
    MP_ASSERT(!mp_probe_acc_needs_heads(a));
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_acc_has(a, id) && (stat_in(a, id) & MP_PROBE_IN_HEADSUM))
            mp_probe_stats[id].headsum(a, li, hs, i0, i1, worker);
}

void mp_probe_acc_layer_done(void *ctx, int layer) {
    MpProbeAcc *a = ctx;
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_acc_has(a, id) && mp_probe_stats[id].layer) mp_probe_stats[id].layer(a, li);
}

void mp_probe_acc_hook(void *ctx, int layer, const float *scores, int n_heads, int T) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && n_heads == a->H);
    if (acc_slot(a, layer) < 0) return;
#pragma omp parallel for schedule(dynamic, 8) num_threads(a->threads) if ((double)T * T * n_heads > 200000.0)
    for (int i = 0; i < T; i++) mp_probe_acc_rows(a, layer, scores, n_heads, T, i, i + 1, mp_thread_num());
    mp_probe_acc_layer_done(a, layer);
}

void mp_probe_acc_probs_hook(void *ctx, int layer, const float *probs, int n_heads, int T) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && n_heads == a->H && (mp_probe_acc_inputs(a) & MP_PROBE_IN_PROBS));
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_acc_has(a, id) && (stat_in(a, id) & MP_PROBE_IN_PROBS)) mp_probe_stats[id].probs(a, li, probs);
}

void mp_probe_acc_capture(void *ctx, int layer, int point, const float *x, int T, int width) {
    MpProbeAcc *a = ctx;
    MP_ASSERT(T == a->S && point >= 0 && point < 32);
    const int li = acc_slot(a, layer);
    if (li < 0) return;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_acc_has(a, id) && (stat_in(a, id) & MP_PROBE_IN_CAPTURE) && (mp_probe_stats[id].points >> point & 1u))
            mp_probe_stats[id].capture(a, li, point, x, T, width);
}

/* ================================================================ results */

void mp_probe_acc_mean(const MpProbeAcc *a, double *mean, double *mean_heads) {
    const int S = a->S;
    const size_t SS = (size_t)S * S;
    for (int l = 0; l < a->L; l++)
        for (int i = 0; i < S; i++) {
            int lo, hi;
            mp_probe_acc_row_keys(a, l, i, &lo, &hi);
            for (int j = 0; j < S; j++) {
                const size_t k = (size_t)l * SS + (size_t)i * S + j;
                const double dn = mp_probe_acc_entry_count(a, l, i, j), dnh = dn * a->H;
                const int seen = j >= lo && j < hi && dn > 0;
                mean[k] = seen ? a->sum[k] / dnh : NAN;
                if (mean_heads && a->sum_heads)
                    for (int h = 0; h < a->H; h++) {
                        const size_t kh = ((size_t)l * a->H + h) * SS + (size_t)i * S + j;
                        mean_heads[kh] = seen ? a->sum_heads[kh] / dn : NAN;
                    }
            }
        }
}

/* The standard error of a mean m over dn sequences from the sum of squares of their values
 * (sample variance, clipped at 0); NaN below 2 sequences. */
static double probe_se(double m, double sumsq, double dn) {
    if (!(dn >= 2)) return NAN;
    const double var = (sumsq / dn - m * m) * dn / (dn - 1.0);
    return sqrt((var > 0 ? var : 0.0) / dn);
}

void mp_probe_acc_se(const MpProbeAcc *a, double *se) {
    const size_t n = (size_t)a->L * a->S * a->S;
    for (size_t k = 0; k < n; k++) {
        const int l = (int)(k / ((size_t)a->S * a->S)), i = (int)(k / a->S % a->S), j = (int)(k % a->S);
        int lo, hi;
        mp_probe_acc_row_keys(a, l, i, &lo, &hi);
        const double dn = mp_probe_acc_entry_count(a, l, i, j);
        se[k] = j < lo || j >= hi ? NAN : probe_se(a->sum[k] / (dn * a->H), a->sumsq[k], dn);
    }
}

void mp_probe_acc_se_heads(const MpProbeAcc *a, double *se_heads) {
    MP_ASSERT(a->sum_heads && a->sumsq_heads);
    const int S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    for (int l = 0; l < a->L; l++)
        for (int i = 0; i < S; i++) {
            int lo, hi;
            mp_probe_acc_row_keys(a, l, i, &lo, &hi);
            for (int h = 0; h < H; h++)
                for (int j = 0; j < S; j++) {
                    const size_t k = ((size_t)l * H + h) * SS + (size_t)i * S + j;
                    const double dn = mp_probe_acc_entry_count(a, l, i, j);
                    se_heads[k] = j < lo || j >= hi ? NAN : probe_se(a->sum_heads[k] / dn, a->sumsq_heads[k], dn);
                }
        }
}
