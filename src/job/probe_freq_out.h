/* probe_freq_out.h — what `probe --stats freq` adds to the probe's result beyond its .npy outputs
 * (model/probe_freq.h): meta.json's keys on the sampling and the pairs, a printed table per layer,
 * and with --plot the heat maps freq.png (per layer: head × frequency pair, the query's norm and the
 * pair's |contribution|).
 * Does not: compute the statistic (model/probe_freq.c) or write the .npy files (probe_out.c).
 * Tested by: tests/test_probe_freq.c (the table, meta.json, the figure's panels).
 *
 * Shape legend: L selected layers, H query heads, P frequency pairs.
 */
#ifndef MP_JOB_PROBE_FREQ_OUT_H
#define MP_JOB_PROBE_FREQ_OUT_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"       /* MpErr */
#include "job/probe_job.h"  /* MpProbeResult */

/* The rows of probe_out.c's table for MP_PROBE_STAT_FREQ (res holds the row's outputs). */
void mp_probe_freq_meta(json_t *meta, const MpProbeResult *res);
void mp_probe_freq_print(FILE *f, const MpProbeResult *res);
int mp_probe_freq_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e);

#endif
