/* probe_job.h — the probe as one library call: mean pre-softmax attention-score maps of a real model
 * over a corpus of token ids (paper §5.2, Figure 5), with counterfactuals (no mask, no RoPE).
 *
 * Implements:
 *   - mp_probe_run (probe_job.c): opens the model (or borrows an open one), chooses the layers and
 *     the statistics (mp_probe_config_stats), reads or tokenizes the tokens (or borrows an
 *     in-memory array), checks the context and the expected peak memory, decides whether every
 *     sequence starts with BOS (the statistics then start at position 1), keys and resumes
 *     checkpoints, runs the loop over sequences (one process or the ranks of an MPI job,
 *     model/probe_ranks.h), and fills an MpProbeResult: the maps, their standard errors and
 *     statistics, every other statistic's outputs and results, and the meta.json object;
 *   - mp_probe_result_fill, _free, _print, _write (probe_out.c): the result from an accumulator,
 *     the tables `maskpos probe` prints after the run, and the folder `maskpos probe --out DIR`
 *     writes (scores.npy, scores_diagnorm.npy, scores_se.npy, scores_heads.npy,
 *     scores_heads_se.npy, each statistic's .npy files such as probs*.npy, figures, meta.json
 *     last), byte for byte.
 * Does not: parse flags (src/cli/cmd_probe.c), accumulate (model/probe_acc.c), run the model (model/fwd.c).
 * Implemented by: probe_job.c (mp_probe_run), probe_out.c (the result: fill, free, print,
 *   write).
 * Tested by: tests/test_model_probe.c (through the CLI and through mp_probe_run), tests/test_mpi.c,
 * tests/test_probe_table.c.
 *
 * Shape legend: N sequences, S tokens per sequence, L selected layers, H query heads.
 */
#ifndef MP_JOB_PROBE_JOB_H
#define MP_JOB_PROBE_JOB_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"            /* MpErr */
#include "job/job.h"             /* MpProgressFn */
#include "job/probe_probs.h"     /* MpProbeProbsOut */
#include "kernels/posmap.h"      /* MpPosStats */
#include "load/model.h"          /* MpModel */
#include "model/probe.h"         /* MP_PROBE_NREGIONS */
#include "model/probe_ranks.h"   /* MpProbeRanksStats */
#include "model/probe_recency.h" /* MpProbeRecencyOut */
#include "model/probe_signif.h"  /* MpProbeSignif */

/* Every pointer is borrowed for the duration of mp_probe_run. Start from mp_probe_config_init. */
typedef struct MpProbeConfig {
    /* the model: an open one (borrowed), else model_path is opened and closed by the run */
    MpModel *model;
    const char *model_path;
    /* the tokens, one of three sources: */
    const int32_t *ids;      /* (a) in memory [n, seq] (n and seq required) */
    const char *tokens_path; /* (b) .npy int32/int64/uint32 [N,S'] or raw little-endian uint32 */
    const char *data;        /* (c) documents tokenized with the model's tokenizer (needs n, seq) */
    int64_t n;               /* sequences: 0 = all the file holds (b) */
    int seq;                 /* S: 0 = the .npy row length (b) */
    const char *tokenizer, *field; /* (c): tokenizer (default the model), .jsonl field */
    int whole, shuffle, no_special, pack; /* (c): as `maskpos corpus` */
    uint64_t seed;                        /* (c) shuffle seed */
    /* what to measure */
    const char *layers;      /* "1-4", "2,5", "all"; NULL = 1-4 (all when fewer) */
    int per_head;            /* also [L,H,S,S] and its standard errors */
    int heads_f64;           /* per_head: write the heads' maps as float64 (default float32; summed in double either way) */
    int bidirectional;       /* counterfactual: no causal mask */
    int no_rope;             /* counterfactual: no rotation */
    double rope_keep_high;   /* counterfactual p-RoPE: the fraction of frequency pairs rotated, the highest
                                frequencies (mp_fwd_rope_unrotated); 1 (the default) every pair */
    int probs;               /* also the post-softmax probabilities, sink and entropy */
    int recency;             /* also the recency probability and statistics by length */
    const char *stats;       /* also these statistics, by name ("probs,recency": the rows of model/probe.h's
                                mp_probe_stats; probs and recency above are two of them); NULL none */
    int pos_dim;             /* --stats position: features, a ±1 projection of the residual stream to this many
                                (0: the whole width; model/probe_pos.h) */
    int pos_stride;          /* --stats position: every pos_stride-th position of a sequence */
    double pos_ridge;        /* --stats position: the ridge λ relative to the features' mean variance */
    int resid_stride;        /* --stats variance, position: the residual stream of one sequence in this many
                                (0: mp_probe_resid_stride's default) */
    int compute;             /* MpFwdCompute: MP_FWD_COMPUTE_F32 (0, the reference) or _BF16 */
    const char *device;      /* the forward pass's backend (MpFwdConfig.device): NULL = cpu */
    int allow_long;          /* run past the trained context (else refused) */
    int threads;             /* 0 = all cores */
    double max_mem_gib;      /* refuse above this expected peak; <= 0: the memory available now */
    /* the output folder (NULL: none; no checkpoint then): claimed for this run before the compute
     * (out_mode: MpOutdirMode), and where checkpoint.bin lives */
    const char *out;
    int out_mode;
    int64_t checkpoint_every; /* save partial sums every K sequences (needs out) */
    int resume;               /* continue from out/checkpoint.bin */
    FILE *log;                /* progress of the set-up (the lines `maskpos probe` prints); NULL: silent */
    MpProgressFn progress; /* sequences done / total; may be NULL */
    void *progress_ctx;
} MpProbeConfig;

void mp_probe_config_init(MpProbeConfig *c);

/* One output of a statistic's row (model/probe.h MpProbeOutSpec), computed from the sums. */
typedef struct MpProbeOut {
    const MpProbeOutSpec *spec; /* its row's: file name, meta.json text */
    int stat;                   /* MpProbeStatId of the row */
    int ndim;
    int64_t shape[4];
    double *x;                  /* [shape] owned */
} MpProbeOut;
#define MP_PROBE_MAX_OUTS (MP_PROBE_NSTATS * MP_PROBE_STAT_OUTS)

/* Owns every array and meta (free accepts a zeroed struct). On ranks 1..N-1 of an MPI job the
 * run leaves it empty (complete = 0): rank 0 holds the result. */
typedef struct MpProbeResult {
    int complete;            /* 1: the arrays below hold the result */
    int L, H, S;
    int64_t n;               /* sequences */
    int layers[256];         /* 0-based model layer of slot l < L */
    double *mean;            /* [L,S,S] mean over sequences and heads; NaN where masked */
    double *diagnorm;        /* [L,S,S] mean minus the mean of its diagonal */
    double *se;              /* [L,S,S] standard error of each entry (NaN when N < 2) */
    double *heads;           /* [L,H,S,S] mean per head, or NULL */
    double *heads_se;        /* [L,H,S,S] standard error per head (NaN when N < 2), or NULL */
    int heads_f64;           /* write heads, heads_se as float64 (else float32) */
    MpPosStats *stats;       /* [L] NRI, residue, ... over positions skip..S-1 */
    double *block_z;         /* [L] the residue's block test */
    double *block_z_regions; /* [MP_PROBE_NREGIONS, L] per region (row 0 unused: NaN) */
    MpProbeSignif *sig;      /* [L] resolved at this N?, the noise levels, N needed, corrected NRI */
    int lengths;             /* 1: sequences of several lengths (maskpos_acc_add with lengths) */
    int skip;                /* 1 when every sequence starts with BOS */
    int bos_id;
    int causal, rope, per_head, compute, threads, nranks;
    unsigned stat_set;       /* the statistics of the run (bit MpProbeStatId; from the accumulator) */
    MpProbeProbsOut pr;      /* probs: sink and entropy */
    MpProbeRecencyOut rec;   /* recency */
    double *var_slopes;      /* variance: [L, 4] log-log slopes (attention output, its se, residual stream, its se;
                                model/probe_var.h), then [S] scratch */
    double pos_set[4];       /* position: the probe's width C, features K, stride and ridge (model/probe_pos.h) */
    int resid_stride;        /* variance, position: one sequence in resid_stride read the residual stream */
    int64_t resid_seqs;      /* ... this many of the run's */
    MpProbeOut outs[MP_PROBE_MAX_OUTS]; /* the outputs of the statistics' rows (MpProbeStat.outs), in */
    int n_outs;                         /* table order: each a .npy and its meta.json "files" entry */
    char title[256];         /* the model's file name, for figure titles */
    /* the run */
    int64_t first;           /* sequences done before this call (resume) */
    double compute_s;        /* seconds in the loop */
    double gflop;            /* floating-point work of the sequences run */
    MpProbeRanksStats ranks; /* rank 0's receive and merge figures (MPI) */
    json_t *meta;            /* meta.json without "files" and provenance (added when written) */
} MpProbeResult;

/* Runs the probe. MP_ERR with a one-line message on bad input (model, tokens, layers, flags,
 * memory, output folder) or when the progress callback asks to stop. res is initialised here. */
int mp_probe_run(MpProbeResult *res, const MpProbeConfig *c, MpErr *e);

/* The expected peak memory of a probe (what its log prints and --max-mem-gib compares), in
 * bytes: weights and activations (incl. one sequence's scores [NH,S,S]) as mp_fwd_init will
 * allocate them for layers 1..deepest, the accumulated maps of the L selected layers (and the
 * options of c: per_head, probs, recency, compute), the outputs, n sequences of token ids, the
 * weight-loading scratch. rank 0 of nranks > 1 holds a second set of sums (the merge). */
typedef struct MpProbePeak {
    uint64_t weights, acts, maps, outs, tokens, scratch, total;
} MpProbePeak;
void mp_probe_peak(MpProbePeak *p, const MpModel *m, const MpProbeConfig *c, int L, int deepest, int S, int64_t n,
                   int threads, int nranks, int rank);
void mp_probe_result_free(MpProbeResult *res);
/* The statistics a config asks for: the maps, c->probs, c->recency and the names in c->stats
 * (MP_ERR "--stats: 'x' is not a statistic of the probe (...)"). */
int mp_probe_config_stats(const MpProbeConfig *c, unsigned *set, MpErr *e);
/* The position probe's settings of c (and m's width) into a, before its statistics are on. */
void mp_probe_pos_settings(MpProbeAcc *a, const MpProbeConfig *c, const MpModel *m);
/* The stride of the residual-stream statistics for n sequences: c->resid_stride, or when 0 the
 * default (1 below MP_PROBE_RESID_AUTO_N sequences, else MP_PROBE_RESID_AUTO_STRIDE). */
#define MP_PROBE_RESID_AUTO_N 256
#define MP_PROBE_RESID_AUTO_STRIDE 8
int mp_probe_resid_stride(const MpProbeConfig *c, int64_t n);
/* Output k of statistic stat's row in res, or NULL when the run has none. */
const double *mp_probe_result_out(const MpProbeResult *res, int stat, int k);

/* The result's arrays, statistics, block tests and the results of every statistic a holds (its
 * row's outputs, and what probe_out.c's table adds for it: the probabilities' sink and entropy,
 * the recency results), from an accumulator (what mp_probe_run does after its loop;
 * maskpos_acc_result calls it for sums added from outside): res's dimensions and flags (L, H, S,
 * n, layers, skip, causal, per_head) set by the caller, res->stats from a; meta_run (owned from
 * here on, also on failure) is the run's half of meta.json, to which the files and statistics are
 * added. (probe_out.c) */
int mp_probe_result_fill(MpProbeResult *res, const MpProbeAcc *a, json_t *meta_run, MpErr *e);
/* meta.json keys shared by the probe and the accumulator: stats_first_position (and its
 * description); layer_windows w [L] (<= 0: null) and its description. */
/* The line that warns of too few sequences (N < MP_SIGNIF_MIN_N) into buf, or "" (returns buf). */
const char *mp_probe_n_warning(char *buf, size_t cap, int64_t n);
void mp_probe_meta_first(json_t *j, int skip);
void mp_probe_meta_windows(json_t *j, const int *w, int L);

/* The BOS note and the per-layer table, then the tables of the statistics that print one (--probs,
 * --recency). */
void mp_probe_result_print(FILE *f, const MpProbeResult *res);

/* Writes the result into dir (created if missing): the .npy files (the maps', then every output of
 * the statistics' rows), figures, and meta.json last (a stale one is removed first), then removes a
 * checkpoint.bin left in dir: a folder with a meta.json holds one complete result. o may be NULL
 * (no figures, no command line). */
int mp_probe_result_write(const MpProbeResult *res, const char *dir, const MpJobWriteOptions *o, MpErr *e);
/* meta.json as a string (malloc'd; free()); NULL when out of memory. */
char *mp_probe_result_meta_dump(const MpProbeResult *res);

#endif
