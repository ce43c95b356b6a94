/* generate.h — seeded sampling from a decoder: N sequences of L token ids each, from BOS or a
 * prompt, with a key/value cache (`maskpos generate`; the in-distribution corpus of reproduce's
 * stories260K stage).
 *
 * Implements:
 *   - mp_gen_run: every sequence starts with the prompt (default: the model's BOS) and is
 *     extended one token at a time from the model's next-token distribution, through
 *     mp_fwd_extend (model/fwd.h: the logits of a whole-sequence mp_fwd_run, bit for bit, at
 *     the cost of one row per token);
 *   - mp_gen_sample, the sampler: greedy (temperature 0: the lowest id among the largest
 *     logits, as llama.cpp's greedy sampler and `maskpos logits --greedy`), else
 *     p_i ∝ exp((logit_i − max) / temperature) in double, optionally cut to the top k and/or to
 *     the top-p nucleus (ids ranked by probability, ties by id; the shortest prefix whose mass
 *     reaches p), then inverse CDF over ascending ids with one uniform draw;
 *   - determinism: the uniform of token t of sequence i is draw t of Philox stream (seed, i), and
 *     the logits do not depend on threads (fwd.h), so sequence i is the same for any thread
 *     count and any N;
 *   - parallelism: a small model (packed weights under MP_GEN_SMALL_BYTES) runs whole sequences
 *     on separate threads, each with its own forward pass; a larger one runs one sequence at a
 *     time with the forward pass's own threads. The same ids either way.
 * Does not: stop at an end-of-text token (every row holds exactly L ids; a model trained on
 *     packed stories writes BOS/EOS and starts the next one, as its training stream did),
 *     tokenise or decode text (src/cli/cmd_generate.c does, with src/tok), or batch sequences.
 * Tested by: tests/test_stories_generate.c (mp_fwd_extend == mp_fwd_run bit for bit; sampler
 *     frequencies against exact probabilities, top-k/top-p sets; threads; greedy ids against
 *     llama.cpp and llama2.c on stories260K).
 *
 * Shape legend: N sequences, L tokens per sequence, V vocabulary.
 */
#ifndef MP_GENERATE_H
#define MP_GENERATE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"   /* MpErr */
#include "load/model.h" /* MpModel */

#define MP_GEN_SMALL_BYTES ((uint64_t)64 << 20) /* below: one forward pass per thread */

typedef enum MpGenParallel {
    MP_GEN_PARALLEL_AUTO = 0,  /* sequences for small models, else within the forward pass */
    MP_GEN_PARALLEL_SEQUENCES, /* one forward pass per thread, whole sequences per thread */
    MP_GEN_PARALLEL_WITHIN,    /* one forward pass, its own threads */
} MpGenParallel;

typedef struct MpGenSampler {
    double temperature; /* 0: greedy; else > 0 */
    int top_k;          /* 0: no cut; else keep the k most likely ids */
    double top_p;       /* 1: no cut; else in (0, 1]: keep the nucleus of mass p */
} MpGenSampler;

typedef struct MpGenConfig {
    int64_t n;             /* sequences N >= 1 */
    int len;               /* tokens per sequence L, prompt included (n_prompt < L) */
    MpGenSampler sampler;
    uint64_t seed;
    const int32_t *prompt; /* [n_prompt] borrowed, or NULL: the model's BOS alone */
    int n_prompt;
    int compute;           /* MpFwdCompute */
    const char *device;    /* the forward pass's backend (MpFwdConfig.device): NULL = cpu */
    int threads;           /* 0: all cores */
    int parallel;          /* MpGenParallel */
    void (*progress)(void *ctx, int64_t done, int64_t n); /* may be NULL; called in order */
    void *progress_ctx;
} MpGenConfig;

typedef struct MpGenResult {
    int32_t *ids;      /* [N, L] owned */
    int64_t n;         /* N */
    int len;           /* L */
    int n_prompt;      /* positions [0, n_prompt) of every row are the prompt */
    double nll_sum;    /* Σ over sampled tokens of −log p(token) under the model (temperature 1) */
    int64_t n_sampled; /* N·(L − n_prompt) */
    int parallel;      /* the MpGenParallel mode that ran (SEQUENCES or WITHIN) */
    int threads;       /* threads used */
    double wall_s;
} MpGenResult;

/* Samples cfg->n sequences from m. Returns MP_OK, or MP_ERR with a one-line message (bad
 * config, prompt ids outside the vocabulary, no BOS in the model and no prompt, out of memory). */
int mp_gen_run(MpGenResult *r, MpModel *m, const MpGenConfig *cfg, MpErr *e);
void mp_gen_result_free(MpGenResult *r); /* accepts a zeroed struct */

/* Workspace of mp_gen_sample for a vocabulary of V ids. */
typedef struct MpGenWork {
    double *p;    /* [V] probabilities (unnormalised) */
    int32_t *idx; /* [V] ids ranked for top-k / top-p */
    int V;
} MpGenWork;
int mp_gen_work_init(MpGenWork *w, int V, MpErr *e);
void mp_gen_work_free(MpGenWork *w);

/* One id from logits [V] under sampler s with the uniform u in [0, 1) (ignored when greedy).
 * *nll (may be NULL) gets −log p(id) under the model itself (softmax of the logits, temperature
 * 1, no cut), in double. */
int mp_gen_sample(const float *logits, const MpGenSampler *s, double u, MpGenWork *w, double *nll);

/* lp [V] = log_softmax(logits [V]) in double (max subtracted; `maskpos logits` and the C API's
 * maskpos_logits). */
void mp_gen_log_softmax(double *lp, const float *logits, int V);

/* "sampler validity": NULL when s is usable, else a message naming the bad field. */
const char *mp_gen_sampler_check(const MpGenSampler *s);

#endif
