/* gram.h — the nine Gram matrices (a)–(i) of paper.md §2.2 (Figure 3) for layer l → l+1.
 *
 * Implements: mp_train_gram_run() over token sequences of a model opened with load/model.h (any
 * Llama-architecture checkpoint the loader reads: our own NoPE/RoPE models, llama, mistral, qwen2,
 * qwen3, phi3), from the capture points of the model's forward pass (model/fwd.h) with double
 * accumulation; see gram.c for the exact definitions.
 * Does not: tokenise, write files or plot (src/cli/cmd_gram.c does).
 * Tested by: tests/test_gram.c (tests/ref/gram_ref.py recomputes all nine in torch).
 *
 * Shape legend: N sequences, S positions; maps are [S, S], row = query/position i, column = j.
 */
#ifndef MP_TRAIN_GRAM_H
#define MP_TRAIN_GRAM_H

#include <stdint.h>

#include "core/err.h"   /* MpErr */
#include "core/progress.h" /* MpProgressFn */
#include "load/model.h" /* MpModel */

#define MP_GRAM_NMATS 9

typedef struct MpTrainGram {
    int S, N, layer;   /* positions, sequences, layer l (0-based) */
    double *sum;       /* [9, S, S] owned: the mean matrices (b), (i) NaN above the diagonal */
} MpTrainGram;

/* tokens [N, S]; rope: 1 the model's RoPE (its own NoPE layers stay unrotated), 0 none in any
 * layer (--no-rope). layer is 0-based; layers layer and layer+1 must exist. progress (may be
 * NULL) is called with sequences done / N at 0, after every 32 sequences and at the end; a
 * nonzero return stops the run (MP_ERR, MP_JOB_STOPPED_MSG). */
int mp_train_gram_run(MpTrainGram *out, MpModel *m, const int32_t *tokens, int N, int S, int layer, int rope,
                      MpProgressFn progress, void *pctx, MpErr *e);
void mp_train_gram_free(MpTrainGram *g); /* accepts a zeroed struct */
const char *mp_train_gram_name(int k);   /* "a_YYt", ... (file stems) */
const char *mp_train_gram_title(int k);  /* "(a) YY^T, Y = RMSNorm(X)", ... */

#endif
