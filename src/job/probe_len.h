/* probe_len.h — the outputs of `probe --recency`: the recency probability per layer and head (per
 * sequence, and of the mean maps) and the statistics as functions of the length S' from one run
 * (model/probe_recency.h computes them; docs/recency.md).
 *
 * Implements: the printed tables, the meta.json keys recency_probability (+ _se, _heads,
 * _mean_map, _mean_map_heads), length {lengths, nri, residue_block_z, recency_probability, ...},
 * residue_by_position; with --plot the figures length_nri.png, length_block_z.png,
 * length_rp.png and residue_by_position.png.
 * Tested by: tests/test_recency_probe.c.
 */
#ifndef MP_JOB_PROBE_LEN_H
#define MP_JOB_PROBE_LEN_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"            /* MpErr */
#include "model/probe_recency.h" /* MpProbeRecencyOut */

/* The tables; layers[l]: 0-based model layer of slot l. */
void mp_probe_len_print(FILE *f, const MpProbeRecencyOut *o, const int *layers);
/* Adds the keys recency_probability*, length, residue_by_position* to meta. */
void mp_probe_len_meta(json_t *meta, const MpProbeRecencyOut *o);
/* With plot: the figures into dir, described in files (nothing to write without). */
int mp_probe_len_write(const char *dir, const MpProbeRecencyOut *o, const int *layers, int plot, const char *title,
                       json_t *files, MpErr *e);

#endif
