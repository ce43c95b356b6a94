/* train_job.h — training a small Llama-style decoder as one library call (the job behind `maskpos
 * train`; the model, optimiser, data and checkpoints: train/train.h).
 *
 * Implements mp_train_job_run: a run from scratch or resumed from a checkpoint (sizes, optimiser
 * settings and seed from its optimizer.bin; bit-identical to an uninterrupted run), on bytes or
 * on a tokenizer's ids; the memory check before allocating; one run per output folder; the
 * step loop (batch, forward, backward, clipping, AdamW), validation, OUT/log.csv, checkpoints
 * every K steps and at the end, the BF16 export; the lines `maskpos train` prints go to
 * cfg.log. A non-finite loss or gradient norm stops the run with MP_ERR (the last good
 * checkpoint is kept and named).
 * Does not: parse flags (src/cli/cmd_train.c).
 * Tested by: tests/test_train.c (through the CLI: torch reference, golden curve, resume, bad
 * inputs), tests/test_jobs.c (the call against the CLI, progress and stop).
 */
#ifndef MP_JOB_TRAIN_JOB_H
#define MP_JOB_TRAIN_JOB_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"    /* MpErr */
#include "job/job.h"     /* MpProgressFn */
#include "train/train.h" /* MpTrainConfig, MpTrainOptConfig */

typedef struct MpTrainJobConfig {
    MpTrainConfig cfg;        /* sizes (vocab is set by the run: 256 (+1 with bos) or the tokenizer's) */
    MpTrainOptConfig opt;     /* optimiser */
    uint64_t seed;
    int bf16;                 /* checkpoints hold BF16 weights (not resumable) */
    double val_frac;          /* held-out share of the corpus */
    int model_flags;          /* sizes/optimiser/seed were set by the caller: refused with resume */
    int64_t steps;            /* >= 0: overrides opt.steps (also on resume); -1: keep */
    const char *data;         /* the corpus */
    const char *tokenizer;    /* NULL: bytes */
    const char *out;          /* the run's folder (claimed; out_mode: MpOutdirMode) */
    int out_mode;
    const char *resume;       /* a checkpoint directory, or NULL */
    const char *export_dir;   /* at the end also a BF16 copy here, or NULL */
    const char *dump_batches; /* testing: the run's batches as .npy, or NULL */
    int64_t checkpoint_every, eval_every, log_every; /* checkpoint_every <= 0: 100, eval_every <= 0:
                                                        checkpoint_every; with resume, each not given
                                                        (<= 0) is the resumed run's */
    int64_t stop_after;       /* testing: stop after this step with a checkpoint (-1: no) */
    int val_batches;
    int save_init;            /* testing: also checkpoint the initial weights as step-000000 */
    int threads;              /* 0: the OpenMP default */
    int quiet;                /* no per-step lines */
    FILE *log;                /* the run's lines (stdout in the CLI); NULL: silent */
    MpProgressFn progress;    /* steps done / total, at the start and after every step; a
                                 nonzero return stops after a checkpoint of that step */
    void *progress_ctx;
} MpTrainJobConfig;

/* The defaults of `maskpos train`. */
void mp_train_job_config_init(MpTrainJobConfig *c);

/* The last step's figures (no arrays: the run's files hold the weights and the log). */
typedef struct MpTrainJobResult {
    int64_t step0;            /* first step of this run (after a resume) */
    int64_t steps_run;        /* steps done by this call */
    int64_t last_step;
    double last_loss, last_val; /* NaN when not evaluated */
    double wall_s;            /* seconds in the step loop */
    size_t n_params;
    char last_checkpoint[4200]; /* "" when none was written */
} MpTrainJobResult;

int mp_train_job_run(MpTrainJobResult *r, const MpTrainJobConfig *c, MpErr *e);

#endif
