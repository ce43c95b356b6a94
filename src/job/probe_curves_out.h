/* probe_curves_out.h — the line figures of `probe --plot` for the statistics read from activations:
 * var.png (the variance of the attention output and of the residual stream against the position,
 * log-log, a line per layer, each layer's slope in its legend) and pos.png (the position probe's
 * held-out R² per layer with its ± standard error and the chance level, and the mean absolute error
 * against its chance level).
 * Does not: compute the statistics (model/probe_var.c, model/probe_pos.c), write the .npy files or
 * meta.json (probe_out.c).
 * Tested by: tests/test_probe_plots.c (the figures' files, their listing in meta.json, and the
 * curves' pixels at the values of the .npy files).
 *
 * Shape legend: L selected layers, S positions.
 */
#ifndef MP_JOB_PROBE_CURVES_OUT_H
#define MP_JOB_PROBE_CURVES_OUT_H

#include <jansson.h>

#include "core/err.h"      /* MpErr */
#include "job/probe_job.h" /* MpProbeResult */

/* The rows of probe_out.c's table for MP_PROBE_STAT_VARIANCE and MP_PROBE_STAT_POSITION: their
 * figures into dir, each listed in files. */
int mp_probe_var_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e);
int mp_probe_pos_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e);

/* The points of var.png's line of one layer: x [n] = log2(i + 1), y [n] = log2 v_i over the
 * positions i >= from with v_i > 0 (others NaN: a break in the line); returns n = S - from. */
int mp_probe_var_curve(const double *v, int S, int from, double *x, double *y);

#endif
