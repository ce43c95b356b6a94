/* signif.h — a layer's significance in words, for every figure and table that shows a residue map
 * (docs/metrics.md, "Is a residue resolved?"): the note under a panel's title and whether the
 * panel is marked unresolved, from a probe's numbers (block z against its noise level,
 * model/probe_signif.h) or a simulation's (rms/noise against MP_SIGNIF_SIM_Z), or from either's
 * meta.json.
 *
 * Implements: mp_signif_note (numbers → note), mp_signif_note_meta (a run's meta.json and a layer
 * slot → note), mp_signif_sim_resolved (a simulation's rule), mp_signif_sim_meta (its meta.json
 * keys).
 * Does not: compute a statistic (model/probe_signif.c, kernels/posmap.c), draw (viz/plot.c).
 * Tested by: tests/test_probe_signif.c (notes), tests/test_viz.c (panels marked), python/tests.
 */
#ifndef MP_VIZ_SIGNIF_H
#define MP_VIZ_SIGNIF_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/posmap.h" /* MpPosStats */

/* A simulation's residue is resolved when its rms/noise exceeds this (Monte-Carlo noise of
 * independent sequences gives 1; the simulations' entries are Gaussian enough for a fixed line). */
#define MP_SIGNIF_SIM_Z 1.3

/* Whether each layer of a simulation of n sequences is resolved (z_rms > MP_SIGNIF_SIM_Z, n >= 30). */
int mp_signif_sim_resolved(const MpPosStats *st, int64_t n);
/* meta.json of a simulation: residue_resolved [L] and its description. */
void mp_signif_sim_meta(json_t *m, const MpPosStats *st, int L, int64_t n);

/* The note of a panel: "block z 2.31 > 1.54: resolved (N = 1000)" or "block z 1.10 < 1.54: not
 * resolved at N = 100 (N ~ 820 needed)" (what: "block z" or "rms/noise"; thr NaN: a fixed line;
 * n_needed NaN: not shown). Returns 1 when not resolved. ASCII only (PNG text). */
int mp_signif_note(char *note, size_t cap, const char *what, double z, double thr, int resolved, int64_t n,
                   double n_needed);
/* The note of layer slot l of a run from its meta.json (a probe's residue_resolved,
 * residue_block_z and residue_noise; a simulation's stats and batch): returns 1 when not resolved,
 * 0 when resolved, -1 when meta says nothing of it (note ""). */
int mp_signif_note_meta(char *note, size_t cap, const json_t *meta, int l);

#endif
