/* probe.h — the pieces of `maskpos probe` below the command line: token-id input
 * (probe_tokens.c), the per-layer score accumulator with its table of statistics and the
 * forward pass's callbacks that feed them (probe_acc.c),
 * the block test (probe_block.c), and checkpoints of its partial sums (probe_ckpt.c). The
 * model's shape hash is mp_model_shape_hash (load/model.h).
 *
 * Implements:
 *   - mp_probe_tokens_read: token ids from a .npy (int32/int64/uint32 [N,S']) or a raw
 *     little-endian uint32 stream cut into sequences of --seq tokens; every id checked against the
 *     vocabulary; malformed files return MP_ERR with a one-line message (never abort);
 *   - MpProbeAcc: Σ over sequences of Σ over heads of the pre-softmax scores, per selected layer,
 *     in double ([L,S,S]; optionally per head [L,H,S,S]), and Σ over sequences of the square of
 *     each sequence's head-mean score (and per head, of each head's score), from which the
 *     standard error of every entry of the mean maps follows (sequences as independent draws);
 *     and, per sequence, the diagonal-mean
 *     normalised residue of that sequence's head-mean map averaged over a 16 × 16 grid of blocks,
 *     summed and squared, so the residue's block means get exact standard errors too (the residue
 *     is linear in the map: the mean of per-sequence residues is the residue of the mean map);
 *     this block test resolves a smooth non-relative pattern long before the per-entry one
 *     does; the order of every sum is fixed
 *     (sequences in file order, heads ascending), so any thread count gives the same bits;
 *   - the table of statistics (mp_probe_stats, below): each statistic one row, which everything
 *     that allocates, merges, transfers, checkpoints, estimates or writes its sums reads;
 *   - checkpoints: the sums and the count of sequences done, in one file with a fixed header
 *     (magic, version, run key, dims) and an FNV-1a checksum, written atomically (temp + rename),
 *     so a run killed at any moment resumes to exactly the bits of an uninterrupted run.
 * Does not: run the model (fwd.h), print, or write the final maps (src/job/probe_job.c, probe_out.c).
 * Implemented by: probe_acc.c (the accumulator and its table of statistics), probe_block.c
 *   (the block test), probe_ckpt.c (checkpoints), probe_tokens.c (token-id input).
 * Tested by: tests/test_model_probe.c, test_model_probe_merge.c, test_probe_stats.c, test_probe_rows.c,
 * test_probe_table.c.
 *
 * Shape legend: N sequences, S tokens per sequence, L selected layers, H query heads.
 */
#ifndef MP_PROBE_H
#define MP_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"   /* MpErr */
#include "kernels/posmap.h" /* MpPosStats */
#include "model/probe_flip.h" /* MP_PROBE_FLIPS, mp_probe_flip_bits */
#include "load/model.h" /* MpModel (mp_probe_acc_windows) */

typedef struct MpProbeTokens {
    int32_t *ids;      /* [N, S] owned */
    int64_t n;         /* N */
    int seq;           /* S */
    int64_t skipped;   /* raw input: trailing tokens that did not fill a sequence */
    int64_t available; /* sequences the file held (before --n) */
    uint64_t hash;     /* FNV-1a of ids as little-endian int32, N*S values */
    int from_npy;
} MpProbeTokens;

/* path: .npy (recognised by its magic) or raw uint32. seq: 0 = the .npy's row length (raw files
 * need seq > 0). n: 0 = every sequence, else exactly n (more than the file holds is an error).
 * Every id must lie in [0, vocab). */
int mp_probe_tokens_read(MpProbeTokens *tk, const char *path, int seq, int64_t n, int vocab, MpErr *e);
void mp_probe_tokens_free(MpProbeTokens *tk);

typedef struct MpProbeAcc {
    int L, H, S;          /* selected layers, heads, sequence length */
    int per_head;
    int causal;           /* 1: only j <= i observed */
    int layer_of[256];    /* model layer (0-based) -> slot in [0, L), or -1 */
    int window[256];      /* [L] per slot: the sliding window W of a layer whose window masks keys at
                             this S (W < S; mp_probe_acc_windows), else 0. Query i observes keys j
                             with i - j < W only: the others are NaN in every map, like j > i */
    int64_t n_done;       /* sequences accumulated */
    double *sum;          /* [L, S, S] Σ_seq Σ_h score */
    double *sum_heads;    /* [L, H, S, S] Σ_seq score, or NULL */
    double *sumsq_heads;  /* [L, H, S, S] Σ_seq score², or NULL (per_head only: the heads' standard errors) */
    double *sumsq;        /* [L, S, S] Σ_seq (Σ_h score / H)² */
    int skip;             /* the block test looks at positions skip..S-1 only (mp_probe_acc_skip) */
    int nb;               /* blocks per side: min(P, 16), P = S - skip; block b holds positions
                             skip + [⌈bP/nb⌉, ⌈(b+1)P/nb⌉) */
    double *bsum, *bsumsq; /* [L, nb, nb] Σ_seq of the sequence's block-mean residue, and of its square */
    double *seqmap, *seqres, *seqsub; /* [S, S] scratch: one sequence's head-mean map, its residue,
                                         its [P, P] part from position skip */
    int threads;          /* rows hooks may come from this many threads at once (worker < threads) */
    unsigned stats;       /* the statistics on: bit MpProbeStatId (MP_PROBE_STAT_MAPS always) */
    /* attention probabilities (MP_PROBE_STAT_PROBS; probe --probs), summed like the scores */
    double *psum;         /* [L, S, S] Σ_seq Σ_h p */
    double *psum_heads;   /* [L, H, S, S] Σ_seq p, or NULL (per_head only) */
    double *sink;         /* [L, H] Σ_seq Σ_{i≥1} p[i, 0]: attention mass on the first token */
    double *entropy;      /* [L, H] Σ_seq Σ_{i≥1} −Σ_j p[i, j] ln p[i, j] (nats) */
    double *pent;         /* [H, S] scratch: one sequence's row entropies */
    /* recency probability and statistics per length (MP_PROBE_STAT_RECENCY; model/probe_recency.h) */
    int nlen;             /* lengths S' = 16, 32, 64, ... below S, then S */
    int lens[24];
    double *rp_row;       /* [L, H, S] Σ_seq recent triples of query row i (keys from skip), per head
                             (integers, exact in a double below 2^53) */
    double *rp_lsq;       /* [L, nlen] Σ_seq (the sequence's recent triples over all heads, rows < S')² */
    double *rp_hsq;       /* [L, H] Σ_seq (the sequence's recent triples of head h)² */
    int lnb[24];          /* blocks per side at length k: min(S'_k - skip, 16) */
    double *lbsum, *lbsumsq; /* [nlen, L, 16, 16] block sums of the S'×S' corner's residue */
    uint64_t *rp_seq;     /* [H, S] scratch: this sequence's row counts */
    double *rp_scratch;   /* [threads, 3S] scratch of the triple count */
    double *lsub, *lres;  /* [S, S] scratch: a corner and its residue */
    /* the noise level of the block test (docs/metrics.md, "Is a residue resolved?"): the block sums
     * once more for each of MP_PROBE_FLIPS signs ε = ±1 per sequence (bits of a hash of the
     * sequence's own block means, mp_probe_flip_bits), whose block z is a draw of the test under
     * pure noise with the data's own tails and correlations between blocks (the squares are bsumsq) */
    double *bflip;        /* [L, F, nb, nb] Σ_seq ε_f · block mean, F = MP_PROBE_FLIPS */
    /* the noise-corrected NRI (docs/metrics.md): per sequence, the squared norms of its own residue
     * and of its own centred map (positions skip..S-1, the entries the NRI sums) */
    double *rsq;          /* [L] Σ_seq Σ_ij Ŝ_s[i,j]² */
    double *csq;          /* [L] Σ_seq Σ_ij (x_s[i,j] − mean x_s)² */
    /* sequences shorter than S (mp_probe_acc_lengths_on; maskpos_acc_add with lengths): a sequence
     * of length S' adds the top-left S' × S' block of the maps; NULL when every sequence has S */
    double *npos;         /* [L, S] Σ_seq [p < the sequence's length]: the sequences entry (i, j)
                             has seen are npos[max(i, j)] */
    double *bcnt;         /* [L, nb, nb] sequences in each block's test (those with ≥ nb positions
                             from skip: a sequence's own residue on its own nb × nb grid) */
    int cur_len;          /* the length of the sequence being added (0 = S; set by the caller) */
    double *bmeans;       /* [nb, nb] scratch: one sequence's block means */
    /* the variance of the attention output and of the residual stream by position (MP_PROBE_STAT_VARIANCE;
     * model/probe_var.h): for each sequence and position the mean over dimensions of the values, u1, and of
     * their squares, u2, summed over sequences as the M = MP_PROBE_VAR_MOMENTS moments [Σu1, Σu2, Σu1²,
     * Σu2², Σu1·u2] (the variance over sequences and dimensions is Σu2/N − (Σu1/N)², its standard error
     * from the others) */
    double *vattn;        /* [L, M, S] the attention output before o_proj, every head's dimensions together */
    double *vheads;       /* [L, H, M, S] the same per head */
    double *vresid;       /* [L, M, S] the residual stream after the layer */
    double *vgroup;       /* [L, G, J, S] the slopes' jackknife: per group of sequences (G = MP_PROBE_VAR_GROUPS,
                             a sequence's group a hash of its own moments) Σu1, Σu2 and the count of the
                             attention output, then the same of the residual stream (J = 6 rows) */
    double *vscr;         /* [2, S] scratch: one sequence's u1, u2 at one capture point */
    /* RoPE frequency usage (MP_PROBE_STAT_FREQ; model/probe_freq.h): the heads' geometry (set by
     * mp_probe_freq_geometry before the row is on) and per sequence the means over its positions of
     * the norms of the query's and the key's 2-D component of each frequency pair and of the pair's
     * |contribution| to the score, summed over sequences with their squares */
    int fr_hs, fr_nkv, fr_rot; /* head size HS, key/value heads, rotary dims R (P = R/2 pairs) */
    double fr_scale;      /* the score scale (1/sqrt(HS); gemma: query_pre_attn_scalar^-1/2) */
    double *fr_sum;       /* [L, H, 6, Q] Q = P + 1 (column P: the unrotated dims HS - R together): rows
                             2k the sum over sequences of quantity k's sequence mean (q norm, k norm,
                             |contribution|), rows 2k + 1 of its square */
    double *fr_table;     /* [L, P + 1] owned, the accumulator the probe set up (NULL in parts): per slot
                             the angle per position of each pair in this run (0: not rotated), then the
                             RoPE base of the slot's table (0: not rotated) */
    float *fr_q;          /* [S, H·HS] scratch: the sequence's rotated queries until its keys come */
    double *fr_seq;       /* [H, 3, Q] scratch: one sequence's sums */
    /* the position probe (MP_PROBE_STAT_POSITION; model/probe_pos.h): its settings, set before the
     * row is on (mp_probe_acc_init_like copies them), and its sums per split of the sequences */
    int pos_width;        /* C, the residual stream's width (0: taken as pos_dim, no projection) */
    int pos_dim;          /* K, the features: each of the C dimensions added with a sign to one of K
                             (feature hashing; 0 or >= C: K = C, none) */
    int pos_stride;       /* every pos_stride-th position of a sequence sampled (0: 1) */
    double pos_ridge;     /* λ relative to tr(C)/K (0: MP_PROBE_POS_RIDGE_DEFAULT) */
    int resid_stride;     /* the residual stream (LAYER_OUT: variance's residual part, the position probe) of
                             sequence s only when s % resid_stride == 0 (0, 1: every sequence): the caller
                             leaves the point out of the others' forward passes (MpFwd.skip_points); the
                             position probe's split and offsets go by s / resid_stride */
    int64_t seq_index;    /* the index of the sequence being added in the run's order (set by the
                             caller before its forward pass: the split and the sampled positions) */
    double *pos_sums;     /* [L, 2, W] per split (fitted, held out): n, Σi, Σi², Σz [K], Σz·i [K],
                             Σz·zᵀ [K, K] (upper triangle), W = 3 + 2K + K² */
    double *pos_test;     /* [L, M, K + 1] the first M held-out positions: z, then i + 1 (0: empty) */
    int32_t *pos_map;     /* [C] scratch: the feature each dimension adds to (NULL when K = C) */
    double *pos_sign;     /* [C] scratch: its sign, +1 or -1 (NULL when K = C) */
    double *pos_z;        /* [S, K] scratch: one sequence's sampled features */
    double *pos_seq;      /* [W] scratch: one sequence's sums */
    /* set by mp_probe_dev_attach (model/probe_dev.c) while the sums live on a device (--device
     * cuda): dev its state, dev_sync copies the device's sums into the arrays above (a checkpoint
     * calls it before reading them); both NULL otherwise */
    void *dev;
    int (*dev_sync)(const struct MpProbeAcc *a, MpErr *e);
} MpProbeAcc;

/* ================================================================ the statistics table
 *
 * A statistic is one row of the table mp_probe_stats (probe_acc.c), keyed by MpProbeStatId: its
 * name (the setting that turns it on: probe --stats NAME, the C API's and Python's `stats`), the
 * forward-pass inputs it reads, its sums (arrays of MpProbeAcc), its scratch, its update functions
 * and its outputs. Everything else reads the row: allocation, freeing, reset and merge (here),
 * the checkpoint (probe_ckpt.c: the arrays in table order, the optional statistics' bits in its
 * header), the MPI ranks' and worker threads' one-sequence parts (mp_probe_acc_init_like) and
 * their transfer (mp_probe_acc_arrays), the forward pass's taps and hooks (mp_probe_stats_inputs,
 * mp_probe_stats_points), the memory estimate (mp_probe_stats_bytes), the result, its .npy files
 * and meta.json's "files" (the outs; job/probe_out.c), the C API's accumulator (src/api/api_acc.c)
 * and the Python module (through both). */

/* The statistics. New ids go at the end: the checkpoint writes the rows' arrays in id order and
 * marks an optional statistic by bit id - 1 of its header's flags. */
typedef enum MpProbeStatId {
    MP_PROBE_STAT_MAPS = 0, /* always on: the score maps' sums and squares (per head with per_head), the
                               block residue sums, their sign-flipped copies (the block test's noise
                               level) and the noise-corrected NRI's per-sequence norms */
    MP_PROBE_STAT_PROBS,    /* "probs": post-softmax probabilities, first-token mass, entropy */
    MP_PROBE_STAT_RECENCY,  /* "recency": recent triples and the statistics by length (probe_recency.h) */
    MP_PROBE_STAT_LENGTHS,  /* "lengths": per-position and per-block counts of sequences shorter than S
                               (mp_probe_acc_lengths_on; with recency only while every sequence is whole) */
    MP_PROBE_STAT_VARIANCE, /* "variance": the variance over sequences and dimensions of the attention output
                               (before o_proj; per head and all heads) and of the residual stream after the
                               layer, by position, with standard errors and log-log slopes (probe_var.h) */
    MP_PROBE_STAT_FREQ,     /* "freq": RoPE frequency usage per layer, head and frequency pair: the mean norm of
                               the rotated query's and key's 2-D components and the pair's mean |contribution|
                               to the score, with standard errors (probe_freq.h) */
    MP_PROBE_STAT_POSITION, /* "position": a ridge probe of the position from the residual stream after the
                               layer, fitted on 3 of 4 sequences, R² and mean absolute error on the rest
                               with their chance levels (probe_pos.h) */
    MP_PROBE_NSTATS
} MpProbeStatId;
#define MP_PROBE_STAT_BIT(id) (1u << (id))
_Static_assert(MP_PROBE_NSTATS <= 32, "a statistic is a bit of MpProbeAcc.stats");

/* What a statistic reads from the forward pass (MpProbeStat.in), each delivered through one of
 * its callbacks (model/fwd.h): */
enum {
    MP_PROBE_IN_HEADSUM = 1, /* each query row's scores summed over heads, in double, heads ascending
                                (MpFwd.rows_headsum, the reduced map: no head's rows cross), or every
                                head's rows when another statistic needs them (MpFwdRowsHook.rows) */
    MP_PROBE_IN_HEADS = 2,   /* every head's score rows (MpFwdRowsHook.rows) */
    MP_PROBE_IN_PROBS = 4,   /* each layer's post-softmax probabilities [H, S, S] (MpFwd.probs_hook) */
    MP_PROBE_IN_CAPTURE = 8, /* activations at capture points (MpFwd.capture; the row's points) */
};

/* The variance statistic's sums (model/probe_var.h): the moments kept per position, the groups of
 * sequences of its slopes' jackknife and the rows kept per group. */
#define MP_PROBE_VAR_MOMENTS 5
#define MP_PROBE_VAR_GROUPS 16
#define MP_PROBE_VAR_GROUP_ROWS 6
/* The position probe's (model/probe_pos.h): held-out positions kept for the mean absolute error,
 * and the columns of its output. */
#define MP_PROBE_POS_MAE_ROWS 1024
#define MP_PROBE_POS_COLS 11
/* The held-out sequences' groups of the R² jackknife (position probe; none above MP_PROBE_POS_GROUP_MAX_DIM
 * features: 16 more splits of K² sums). */
#define MP_PROBE_POS_GROUPS 16
#define MP_PROBE_POS_GROUP_MAX_DIM 1024

/* The length of an array (or an output) of a statistic, in terms of the accumulator's dimensions. */
typedef enum MpProbeShape {
    MP_PROBE_SH_LSS,    /* [L, S, S] */
    MP_PROBE_SH_LHSS,   /* [L, H, S, S] */
    MP_PROBE_SH_LBB,    /* [L, nb, nb] */
    MP_PROBE_SH_LH,     /* [L, H] */
    MP_PROBE_SH_LHS,    /* [L, H, S] */
    MP_PROBE_SH_LN,     /* [L, nlen] */
    MP_PROBE_SH_NL1616, /* [nlen, L, 16, 16] (not by layer slot) */
    MP_PROBE_SH_L,      /* [L] */
    MP_PROBE_SH_LS,     /* [L, S] */
    MP_PROBE_SH_LFBB,   /* [L, F, nb, nb], F = MP_PROBE_FLIPS */
    MP_PROBE_SH_LMS,    /* [L, M, S], M = MP_PROBE_VAR_MOMENTS */
    MP_PROBE_SH_LHMS,   /* [L, H, M, S] */
    MP_PROBE_SH_LGJS,   /* [L, G, J, S], G = MP_PROBE_VAR_GROUPS, J = MP_PROBE_VAR_GROUP_ROWS */
    MP_PROBE_SH_LH6Q,   /* [L, H, 6, P + 1], P = fr_rot / 2 frequency pairs (probe_freq.h) */
    MP_PROBE_SH_LHP,    /* [L, H, P] */
    MP_PROBE_SH_LH3,    /* [L, H, 3] */
    MP_PROBE_SH_LP,     /* [L, P] */
    MP_PROBE_SH_LPOS,   /* [L, 2 + G, 3 + 2K + K²], K = pos_dim, G = mp_probe_pos_groups(K) */
    MP_PROBE_SH_LPMK,   /* [L, M, K + 1], M = MP_PROBE_POS_MAE_ROWS */
    MP_PROBE_SH_LPQ,    /* [L, Q], Q = MP_PROBE_POS_COLS */
} MpProbeShape;

/* One sum of a statistic: a double array of MpProbeAcc, a sum over sequences (merged by addition,
 * checkpointed, sent between ranks). */
typedef struct MpProbeArrSpec {
    const char *name; /* the field's name: messages, the C API's state names */
    size_t off;       /* offsetof(MpProbeAcc, the double * field) */
    int shape;        /* MpProbeShape */
    int per_head;     /* 1: only when per_head */
    int check;        /* on checkpoint load: 0 none, 1 finite, 2 finite and >= 0 (a sum of squares) */
} MpProbeArrSpec;

/* One output of a statistic that the result computes from the sums and the writer saves as a
 * float64 .npy, listed in meta.json's "files" (and so an array of the C API's and Python's result). */
typedef struct MpProbeOutSpec {
    const char *file; /* "probs.npy" */
    int shape;        /* MpProbeShape: the .npy's dimensions */
    int per_head;     /* 1: only when per_head */
    const char *of;   /* its meta.json "files" text */
    void (*fill)(const MpProbeAcc *a, double *out); /* out [shape] from a's sums (a->n_done >= 1) */
} MpProbeOutSpec;

#define MP_PROBE_STAT_ARRAYS 10 /* sums per statistic (an initialiser with more does not compile) */
#define MP_PROBE_STAT_OUTS 10  /* outputs per statistic */

typedef struct MpProbeStat {
    const char *name;   /* the setting's word ("maps": always on) */
    const char *help;   /* one line for --help and messages */
    const char *what;   /* its sums in messages ("the probability maps") */
    unsigned in;        /* MP_PROBE_IN_*: what it reads */
    unsigned in_heads;  /* what it reads in addition when per_head */
    unsigned points;    /* with MP_PROBE_IN_CAPTURE: bit p = MpFwdPoint p (model/fwd.h). The forward pass
                           stops the deepest layer of a run without logits after its scores unless
                           MpFwdConfig.tap_points asks for a point after them (ATTN_MIX and on; the
                           probe sets tap_points from these bits), so every point is delivered */
    MpProbeArrSpec arrays[MP_PROBE_STAT_ARRAYS]; /* its sums, in checkpoint order (name NULL: no more) */
    MpProbeOutSpec outs[MP_PROBE_STAT_OUTS];     /* its generic outputs (file NULL: no more) */
    /* before its sums are allocated: dimensions derived from L, H, S, skip (NULL: none); MP_ERR with
     * a message when the run cannot have it */
    int (*dims)(MpProbeAcc *a, MpErr *e);
    int (*scratch)(MpProbeAcc *a);    /* allocates its scratch: MP_ERR when out of memory (NULL: none) */
    void (*off)(MpProbeAcc *a);       /* frees its scratch (fields NULL or allocated; NULL: none) */
    /* the inputs, each for layer slot li of the sequence at hand: */
    void (*rows)(MpProbeAcc *a, int li, const float *f32, const double *f64, int i0, int i1, int worker);
    /* HEADS or HEADSUM: rows [i0, i1) of every head's scores [H, S, S], f32 (f64 when f32 is NULL) */
    void (*headsum)(MpProbeAcc *a, int li, const double *hs, int i0, int i1, int worker);
    /* HEADSUM: rows [i0, i1) of the head-sum map hs [i1 - i0, S] (the same bits as from rows) */
    void (*layer)(MpProbeAcc *a, int li);               /* every row of slot li seen (any input) */
    void (*probs)(MpProbeAcc *a, int li, const float *p); /* PROBS: p [H, S, S] */
    void (*capture)(MpProbeAcc *a, int li, int point, const float *x, int T, int width); /* CAPTURE: x [T, width] */
    /* the memory estimate: bytes of its scratch, and of the outputs the result holds beyond its outs
     * (a's dimensions set, its dims run; nothing allocated) */
    uint64_t (*scratch_bytes)(const MpProbeAcc *a);
    uint64_t (*out_bytes)(const MpProbeAcc *a);
} MpProbeStat;

/* MP_PROBE_NSTATS rows, indexed by MpProbeStatId. Declared without its size: the definition's
 * initialiser gives it, and probe_acc.c asserts it is MP_PROBE_NSTATS (a row left off the end, or
 * one too many, does not compile). */
extern const MpProbeStat mp_probe_stats[];

/* 1 when a holds statistic id. */
static inline int mp_probe_acc_has(const MpProbeAcc *a, int id) { return (a->stats >> id) & 1u; }
/* Before any sequence (after mp_probe_acc_skip and mp_probe_acc_windows): turns statistic id on:
 * its dims, its sums (zeroed) and scratch. MP_ERR with a message (its dims', or out of memory). */
int mp_probe_acc_stat_on(MpProbeAcc *a, int id, MpErr *e);
/* Every statistic of set (bits MP_PROBE_STAT_BIT) that a does not hold yet, in id order. */
int mp_probe_acc_stats_on(MpProbeAcc *a, unsigned set, MpErr *e);
/* A new accumulator of `threads` workers shaped like a: layers, heads, length, flags, skipped
 * positions, windows and every statistic a holds (zeroed), so that mp_probe_acc_merge adds it to
 * a (the MPI ranks' and worker threads' one-sequence parts). */
int mp_probe_acc_init_like(MpProbeAcc *part, const MpProbeAcc *a, int threads, MpErr *e);
/* The inputs (MP_PROBE_IN_*) the statistics of set read (with per_head, their in_heads too). */
unsigned mp_probe_stats_inputs(unsigned set, int per_head);
/* The capture points (bit MpFwdPoint) the statistics of set read: MpFwdConfig.tap_points. */
unsigned mp_probe_stats_points(unsigned set);
/* The inputs a's statistics read. */
unsigned mp_probe_acc_inputs(const MpProbeAcc *a);
/* Adds to *set the statistics named in list ("probs,recency": names of mp_probe_stats, '-' and '_'
 * alike; NULL or "" none). MP_ERR "'x' is not a statistic of the probe (probs, recency)". */
int mp_probe_stats_parse(const char *list, unsigned *set, MpErr *e);
/* The optional statistics of set as "probs,recency" (id order) into buf (snprintf-like). */
size_t mp_probe_stats_names(unsigned set, char *buf, size_t cap);
/* The memory estimate of an accumulator of set: its sums, its scratch, and the outputs the
 * result computes (outs and out_bytes), in bytes. */
void mp_probe_stats_bytes(unsigned set, int L, int H, int S, int per_head, int threads, uint64_t *sums, uint64_t *scratch,
                          uint64_t *outs);
/* The same for an accumulator shaped like `like`: L, H, S, per_head, threads and the statistics'
 * settings (the position probe's pos_*), nothing else of it read. */
void mp_probe_stats_bytes_acc(const MpProbeAcc *like, unsigned set, uint64_t *sums, uint64_t *scratch, uint64_t *outs);
/* The .npy dimensions of shape for a (returns ndim, dims into d[4]). */
int mp_probe_shape_dims(const MpProbeAcc *a, int shape, int64_t d[4]);

/* The accumulator's sums, as they are listed for the checkpoint, merging, MPI and the C API: each
 * names an MpProbeAcc field of a statistic's row, its length, whether it is laid out by layer slot
 * and the check its values pass when read back from a checkpoint. Every array is double and a sum
 * over sequences: adding two partial accumulators gives the accumulator of both sets of sequences. */
typedef struct MpProbeArray {
    double *p;        /* the array */
    size_t n;         /* its length in doubles */
    const char *name; /* for messages and the API's state names */
    int by_layer;     /* 1: [L, ...], n / L doubles per layer slot; 0: another layout ([nlen, L, ...]) */
    int check;        /* on checkpoint load: 0 none, 1 finite, 2 finite and >= 0 (a sum of squares) */
    int stat;         /* the statistic it belongs to (MpProbeStatId) */
} MpProbeArray;
#define MP_PROBE_MAX_ARRAYS (MP_PROBE_NSTATS * MP_PROBE_STAT_ARRAYS)
/* Fills out[] (room for MP_PROBE_MAX_ARRAYS) with the arrays of the statistics a holds, in table
 * order (the checkpoint's), and returns how many. */
int mp_probe_acc_arrays(const MpProbeAcc *a, MpProbeArray *out);
/* Every sum to zero and n_done = 0 (dimensions, skip and scratch kept). */
void mp_probe_acc_reset(MpProbeAcc *a);
/* dst += src, array by array, entry by entry, and dst->n_done += src->n_done: exactly the bits
 * of accumulating src's sequences into dst after dst's own when src holds one sequence (0 + x
 * is x), so merging one-sequence accumulators in sequence order reproduces a one-process run.
 * MP_ERR when the two differ in layers, heads, length, flags, statistics or skipped positions. */
int mp_probe_acc_merge(MpProbeAcc *dst, const MpProbeAcc *src, MpErr *e);

/* layers_mask[l] (0-based model layer l < n_model_layers) selects the layers kept. The score maps
 * (MP_PROBE_STAT_MAPS) are on; mp_probe_acc_stat_on adds others. */
int mp_probe_acc_init(MpProbeAcc *a, const unsigned char *layers_mask, int n_model_layers, int H, int S,
                      int per_head, int causal, int threads, MpErr *e);
void mp_probe_acc_free(MpProbeAcc *a);
/* Before any sequence: the block test (and so mp_probe_acc_block_z) covers positions skip..S-1
 * only, diagonal-normalised among themselves. skip = 1 when every sequence starts with BOS: its
 * row and column are one fixed token's, content rather than position (docs/metrics.md). The
 * maps (sum, sumsq) always cover every position. Needs S - skip >= 2. */
void mp_probe_acc_skip(MpProbeAcc *a, int skip);
/* Before any sequence: the sliding windows of m's selected layers (mp_model_layer_window) that
 * mask keys at this S. */
void mp_probe_acc_windows(MpProbeAcc *a, const MpModel *m);
/* The keys [*lo, *hi) that query row i of layer slot li observes: the causal mask's and the
 * window's (every key without either). Inline: every statistic reads it, row by row, and none
 * calls back into the table's file (probe_acc.c), which calls the statistics. */
static inline void mp_probe_acc_row_keys(const MpProbeAcc *a, int li, int i, int *lo, int *hi) {
    const int W = a->window[li];
    *lo = W && i - W + 1 > 0 ? i - W + 1 : 0;
    *hi = a->causal ? i + 1 : W && i + W < a->S ? i + W : a->S;
}
/* The keys [*lo, *hi) query row i of layer slot li observes in the sequence being added (those of
 * mp_probe_acc_row_keys within its length a->cur_len; none for rows past it). Inline, as row_keys. */
static inline void mp_probe_acc_seq_keys(const MpProbeAcc *a, int li, int i, int *lo, int *hi) {
    mp_probe_acc_row_keys(a, li, i, lo, hi);
    const int len = a->cur_len > 0 ? a->cur_len : a->S;
    if (i >= len) *lo = *hi = 0;
    else if (*hi > len) *hi = len;
}
/* The sequences entry (i, j) of layer slot l has seen (n_done unless lengths are on: npos). */
static inline double mp_probe_acc_entry_count(const MpProbeAcc *a, int l, int i, int j) {
    if (!a->npos) return (double)a->n_done;
    return a->npos[(size_t)l * a->S + (size_t)(i > j ? i : j)];
}
/* Ends one sequence: n_done += 1, once the hook has seen every selected layer of it (the loop of
 * model/probe_ranks.c calls it; the accumulator owns its count). */
void mp_probe_acc_seq_end(MpProbeAcc *a);
/* The forward pass's callbacks (model/fwd.h), each handing its input to the rows of the statistics
 * a holds that read it (in table order). Model layers not selected are ignored. */
/* MpFwdRowsHook.rows (ctx = MpProbeAcc*): adds rows [i0, i1) of one sequence's scores [H, S, S]
 * of model layer `layer` (worker < a->threads: the calling thread's scratch). Rows of a layer
 * in any order and from any threads give the same bits. */
void mp_probe_acc_rows(void *ctx, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker);
/* The same for scores held in double ([H,S,S] f64; maskpos_acc_add): the same sums, the same bits
 * as mp_probe_acc_rows for f64 scores that are floats widened. */
void mp_probe_acc_rows_f64(MpProbeAcc *a, int layer, const double *scores, int i0, int i1, int worker);
/* 1 when a's statistics need every head's score rows (MP_PROBE_IN_HEADS: --per-head's maps,
 * --recency's triple counts); 0 when the head sum of each row is all they add
 * (mp_probe_acc_rows_headsum). */
int mp_probe_acc_needs_heads(const MpProbeAcc *a);
/* MpFwd.rows_headsum (ctx = MpProbeAcc*, only when !mp_probe_acc_needs_heads): adds rows [i0, i1)
 * of model layer `layer` from their head-sum map hs [i1 - i0, T] (double, heads ascending from
 * 0.0, as probe_row sums them): the same bits as mp_probe_acc_rows on the per-head rows. */
void mp_probe_acc_rows_headsum(void *ctx, int layer, const double *hs, int T, int i0, int i1, int worker);
/* MpFwdRowsHook.done: once every row of the layer is in (each statistic's `layer`: the sequence's
 * block residue, --recency's sums). */
void mp_probe_acc_layer_done(void *ctx, int layer);
/* MpFwdHook: adds one sequence's whole scores [H, S, S] of model layer `layer` (ctx = MpProbeAcc*):
 * mp_probe_acc_rows over every row (in parallel), then mp_probe_acc_layer_done. */
void mp_probe_acc_hook(void *ctx, int layer, const float *scores, int n_heads, int T);
/* Sequences of fewer than S tokens (docs/python.md, "lengths"): allocates npos and bcnt and fills
 * them with what the sequences already added count (every one of length S), so a run may switch
 * on at any time. Set a->cur_len before a sequence's rows (0 or S: full length). The sums of a
 * sequence of length S' are those of its top-left S' × S' block; its block test is its own residue
 * (positions skip..S'-1) on its own nb × nb grid (sequences with fewer than nb positions there
 * count in the maps only). Not with --recency. MP_ERR when out of memory. */
int mp_probe_acc_lengths_on(MpProbeAcc *a, const int64_t *counts, MpErr *e); /* counts [L]: sequences per slot (NULL: n_done) */
/* dst += src where src->S <= dst->S (same layers, heads, flags, skip, block grid; no --recency):
 * src's maps enter dst's top-left block, its counts dst's per-position counts (lengths are
 * switched on in dst). dcounts, scounts [L]: the sequences per slot of each (NULL: n_done; the C
 * API counts per slot). MP_ERR naming what differs. */
int mp_probe_acc_embed(MpProbeAcc *dst, const MpProbeAcc *src, const int64_t *dcounts, const int64_t *scounts, MpErr *e);
/* MP_PROBE_FLIPS and mp_probe_flip_bits, the F sign bits of one sequence's block means: a hash of
 * their bytes rounded to float, so every sequence draws its own signs whatever the order, thread,
 * rank or device that summed them (model/probe_flip.h, shared with the CUDA accumulator). */

/* MpFwdHook for MpFwd.probs_hook (ctx = MpProbeAcc*): one sequence's probabilities [H, S, S] of
 * model layer `layer` (MP_PROBE_IN_PROBS). The probabilities' own sums (psum, psum_heads, sink,
 * entropy) are in double in a fixed order (rows in parallel, each entry over heads ascending;
 * sink and entropy summed over rows in order), so any thread count gives the same bits. */
void mp_probe_acc_probs_hook(void *ctx, int layer, const float *probs, int n_heads, int T);
/* MpFwdCaptureFn (ctx = MpProbeAcc*): activations x [T, width] of capture point `point` (MpFwdPoint)
 * of model layer `layer` (MP_PROBE_IN_CAPTURE), to the statistics whose points include it. */
void mp_probe_acc_capture(void *ctx, int layer, int point, const float *x, int T, int width);
/* sink, entropy [L,H]: means over sequences and queries 1..S-1 of the probabilities' first-token
 * mass and row entropy (NaN when S < 2). The mean maps are the outputs of the probs row. */
void mp_probe_acc_probs_mean(const MpProbeAcc *a, double *sink, double *entropy);

/* mean [L,S,S] = sum / (n_done·H), NaN where not observed (j > i when causal, outside a sliding
 * window: mp_probe_acc_row_keys); heads likewise
 * (mean_heads may be NULL). */
void mp_probe_acc_mean(const MpProbeAcc *a, double *mean, double *mean_heads);
/* se [L,S,S]: standard error of each entry of the mean map, sqrt(sample variance over sequences
 * of the head-mean score / N); NaN where not observed or when fewer than 2 sequences were run. */
void mp_probe_acc_se(const MpProbeAcc *a, double *se);
/* se_heads [L,H,S,S]: the same per head, from sum_heads and sumsq_heads (per_head only). */
void mp_probe_acc_se_heads(const MpProbeAcc *a, double *se_heads);
/* Block test of layer slot l's residue: z = sqrt(mean over blocks of (block mean / its standard
 * error)²), ≈ 1 when the residue is noise, ≫ 1 when a non-relative pattern is resolved; blocks
 * with at least one observed entry count. NaN with fewer than 2 sequences. */
double mp_probe_acc_block_z(const MpProbeAcc *a, int l);
/* Adds one residue map res [P,P]'s block means (nb × nb grid, only j ≤ i when causal; NaN entries,
 * outside a sliding window, are not observed) and their squares to bs, bq [nb, nb]. */
void mp_probe_block_add(double *bs, double *bq, const double *res, int P, int nb, int causal);
/* One sequence's block means bm [nb, nb] (NaN: no entry) into layer slot li's block sums, their
 * squares, the sign-flipped sums and (lengths on) the block counts: what mp_probe_acc_layer_done
 * does with them (maskpos_acc_add_sums takes block means a GPU computed). */
void mp_probe_acc_block_seq(MpProbeAcc *a, int li, const double *bm);
/* The block means themselves: bm [nb, nb], NaN for a block without an observed entry. */
void mp_probe_block_means(double *bm, const double *res, int P, int nb, int causal);
/* The block test from block sums bs, bq [nb, nb] over n_done sequences, over one MpProbeRegion. */
double mp_probe_block_z(const double *bs, const double *bq, int nb, int64_t n_done, int region);
/* The same with a count per block bn [nb, nb] (NULL: n_done for every block). */
double mp_probe_block_z_n(const double *bs, const double *bq, const double *bn, int nb, int64_t n_done, int region);
/* The block test's noise level for layer slot l and one region: the block z of each of the
 * MP_PROBE_FLIPS sign-flipped sums into z [MP_PROBE_FLIPS] (NaN with fewer than 2 sequences). */
void mp_probe_acc_block_z_null(const MpProbeAcc *a, int l, int region, double *z);
/* Regions of the block grid, to say where a residue sits: the first column of blocks (the first
 * keys), the last row (the last queries), the last column (the last keys; only observed without
 * the mask), and the interior (none of these, nor the first row). */
typedef enum MpProbeRegion {
    MP_PROBE_REGION_ALL = 0,
    MP_PROBE_REGION_FIRST_KEYS,
    MP_PROBE_REGION_LAST_QUERIES,
    MP_PROBE_REGION_LAST_KEYS,
    MP_PROBE_REGION_INTERIOR,
    MP_PROBE_NREGIONS
} MpProbeRegion;
/* The block test over the blocks of one region only (NaN when it has no observed block). */
double mp_probe_acc_block_z_region(const MpProbeAcc *a, int l, int region);

/* dn [L,S,S] = each layer's whole map diagonal-normalised (what probe writes), and st[l] =
 * mp_posmap_stats of layer l's map restricted to positions k..S-1 (mp_posmap_sub; k = 0: the whole
 * map; 1: without a BOS, mp_probe_acc_skip), diagonal-normalised among themselves; se used when
 * have_se. mean, se [L,S,S]; scratch [3,S,S] (unused, may be NULL, when k = 0). */
void mp_probe_layer_stats(MpPosStats *st, double *dn, const double *mean, const double *se, int have_se, int L, int S,
                          int k, double *scratch);

/* Checkpoint file: key identifies the run (model, data, flags); resuming with another key fails. */
int mp_probe_ckpt_save(const char *path, const MpProbeAcc *a, uint64_t key, MpErr *e);
/* Loads into an initialised accumulator of the same dims. Returns MP_OK, or MP_ERR with a
 * message (missing file: *missing = 1). */
int mp_probe_ckpt_load(const char *path, MpProbeAcc *a, uint64_t key, int *missing, MpErr *e);

#endif
