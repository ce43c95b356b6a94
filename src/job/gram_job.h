/* gram_job.h — the nine Gram matrices of paper.md §2.2 (Figure 3) as one library call.
 *
 * Implements: mp_gram_run (opens the model or borrows an open one, checks the layer pair, the
 * weights and the context, takes the tokens — N windows of S spread over a text, tokenized by
 * the model's tokenizer or as bytes; or a .npy; or ids in memory — and runs
 * mp_train_gram_run), mp_gram_result_print (the table `maskpos gram` prints) and
 * mp_gram_result_write (gram.npy, tokens.npy, gram.png, meta.json: the CLI's folder byte for
 * byte).
 * Does not: the maths (train/gram.c), parse flags (src/cli/cmd_gram.c).
 * Tested by: tests/test_gram.c (torch reference, through the CLI), tests/test_jobs.c (the call
 * against the CLI).
 *
 * Shape legend: N sequences, S positions.
 */
#ifndef MP_JOB_GRAM_JOB_H
#define MP_JOB_GRAM_JOB_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"   /* MpErr */
#include "job/job.h"    /* MpProgressFn, MpJobWriteOptions */
#include "load/model.h" /* MpModel */
#include "train/gram.h" /* MpTrainGram */

typedef struct MpGramConfig {
    MpModel *model;          /* an open model (borrowed), else model_path is opened by the run */
    const char *model_path;  /* also where the tokenizer of data is looked for */
    const char *data;        /* text: N windows of S tokens spread evenly over it, or */
    const char *tokens_path; /* token ids [rows >= N, >= S] (int32/int64 .npy), or */
    const int32_t *ids;      /* ids [N, S] in memory (borrowed) */
    int layer;               /* first layer of the pair, 1-based */
    int seq, n;              /* S, N */
    int no_rope;             /* no RoPE in any layer */
    int allow_long;          /* S past the trained context: warned and recorded */
    int threads;             /* 0: the OpenMP default */
    const char *out;         /* NULL, or the folder claimed for this run (out_mode: MpOutdirMode)
                                once the inputs are good, before the compute */
    int out_mode;
    FILE *log;               /* warnings (stderr in the CLI); NULL: silent */
    MpProgressFn progress;   /* sequences done / N, per chunk of 32; may be NULL */
    void *progress_ctx;
} MpGramConfig;

/* Defaults of `maskpos gram`: layer 1, S 50, N 256. */
void mp_gram_config_init(MpGramConfig *c);

/* Owns its arrays (free accepts a zeroed struct). */
typedef struct MpGramResult {
    MpTrainGram g;       /* g.sum [9, S, S]: the mean matrices (a)..(i) */
    int32_t *tokens;     /* [N, S] the sequences used */
    int N, S, layer;     /* layer 1-based */
    int rope_layer, rope_next_layer; /* RoPE applied in layer and layer+1 */
    int no_rope, beyond;
    char model[4096];    /* the model's path */
    char title[256];     /* figure title */
    json_t *meta;        /* meta.json without provenance */
} MpGramResult;

int mp_gram_run(MpGramResult *r, const MpGramConfig *c, MpErr *e);
void mp_gram_result_free(MpGramResult *r);
void mp_gram_result_print(FILE *f, const MpGramResult *r);
/* gram.npy, tokens.npy (gram.png with o->plot) and meta.json into dir (which must exist). */
int mp_gram_result_write(const MpGramResult *r, const char *dir, const MpJobWriteOptions *o, MpErr *e);

#endif
