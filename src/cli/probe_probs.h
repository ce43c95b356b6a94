/* probe_probs.h — the outputs of `probe --probs`: mean attention probabilities, the attention
 * mass on the first token (the sink) and the mean entropy per head (docs/probe.md).
 *
 * Implements: writing probs.npy [L,S,S] (rows sum to 1; 0 where masked), probs_heads.npy
 * [L,H,S,S] (--per-head), the meta.json keys attention_sink / attention_entropy ([L][H]), the
 * printed per-layer table, and with --plot the figures probs.png (mean maps per layer) and
 * sink_entropy.png (sink mass and entropy per layer and head).
 * Does not: accumulate (model/probe.c, mp_probe_acc_probs_hook).
 * Tested by: tests/test_model_fwd.c (probs against tests/ref/probe_ref.py), tests/test_model_probe.c.
 */
#ifndef MP_CLI_PROBE_PROBS_H
#define MP_CLI_PROBE_PROBS_H

#include <jansson.h>

#include "core/err.h"     /* MpErr */
#include "model/probe.h"  /* MpProbeAcc */

/* Writes the files into dir, prints the table, adds the keys to meta (a JSON object) and the
 * file descriptions to files. layers[l]: 0-based model layer of slot l. title: figure title. */
int mp_probe_probs_write(const char *dir, const MpProbeAcc *a, const int *layers, int plot, const char *title,
                         json_t *meta, json_t *files, MpErr *e);

#endif
