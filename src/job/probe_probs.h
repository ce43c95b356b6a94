/* probe_probs.h — the outputs of `probe --probs`: mean attention probabilities, the attention
 * mass on the first token (the sink) and the mean entropy per head (docs/probe.md).
 *
 * Implements: the results from the accumulator (mp_probe_probs_results: sink and entropy), the
 * printed per-layer table, the meta.json keys attention_sink / attention_entropy ([L][H]), and
 * with --plot the figures probs.png (mean maps per layer) and sink_entropy.png (sink mass and
 * entropy per layer and head).
 * Does not: accumulate (model/probe_acc.c, the probs row), compute or write probs.npy [L,S,S] and
 * probs_heads.npy [L,H,S,S] (the outputs of the probs row, written with every row's outputs by
 * job/probe_out.c).
 * Tested by: tests/test_model_fwd.c (probs against tests/ref/probe_ref.py), tests/test_model_probe.c.
 *
 * Shape legend: L selected layers, H query heads, S tokens per sequence.
 */
#ifndef MP_JOB_PROBE_PROBS_H
#define MP_JOB_PROBE_PROBS_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"     /* MpErr */
#include "model/probe.h"  /* MpProbeAcc */

/* Owns its arrays (free accepts a zeroed struct). */
typedef struct MpProbeProbsOut {
    int L, H, S;
    double *sink;        /* [L,H] mean mass on key 0 over queries 1..S-1 */
    double *entropy;     /* [L,H] mean row entropy over queries 1..S-1 (nats) */
    double uniform;      /* the entropy of uniform attention (NaN when S < 2) */
} MpProbeProbsOut;

/* From an accumulator with probabilities on (mp_probe_acc_probs_on). MP_ERR when out of memory. */
int mp_probe_probs_results(MpProbeProbsOut *o, const MpProbeAcc *a, MpErr *e);
void mp_probe_probs_out_free(MpProbeProbsOut *o);
/* The per-layer table; layers[l]: 0-based model layer of slot l. */
void mp_probe_probs_print(FILE *f, const MpProbeProbsOut *o, const int *layers);
/* Adds the keys attention_sink, attention_entropy (and their descriptions) to meta. */
void mp_probe_probs_meta(json_t *meta, const MpProbeProbsOut *o);
/* The figures into dir, described in files: probs [L,S,S] the mean maps (probs.npy). title: figure
 * title; layers[l]: 0-based model layer of slot l (the figure's rows are labelled with it, from 1). */
int mp_probe_probs_figures(const char *dir, const MpProbeProbsOut *o, const double *probs, const int *layers,
                           const char *title, json_t *files, MpErr *e);

#endif
