/* sim_out.h — writing and printing simulation results; shared by `simulate` and `reproduce`. */
#ifndef MP_JOB_SIM_OUT_H
#define MP_JOB_SIM_OUT_H

#include <jansson.h>
#include <stdio.h>

#include "core/err.h"     /* MpErr */
#include "sim/simulate.h" /* MpSimConfig, MpSimResult */

/* The variance maps of MpSimResult.var, in its order: each an (L,S) float64 array, its name (the
 * .npy file's without the suffix; the C API's array) and its meta.json "files" text. */
#define MP_SIM_VAR_FILES 5
typedef struct MpSimVarFile {
    const char *name, *of;
} MpSimVarFile;
extern const MpSimVarFile mp_sim_var_files[MP_SIM_VAR_FILES];

/* meta.json of a simulation as an object (the caller owns it): what mp_sim_write_outputs writes
 * (plot: the figure listed in "files"). */
json_t *mp_sim_result_meta(const MpSimConfig *c, const char *scale_word, const MpSimResult *r, int plot, int argc,
                           char **argv);
/* Writes scores.npy, scores_se.npy, probs.npy, scores_diagnorm.npy, the variance maps with
 * cfg.variance (mp_sim_var_files), meta.json (and figures when
 * plot) into dir, creating it. Every file is written atomically; meta.json goes last, so a
 * directory with a meta.json holds a complete result. */
int mp_sim_write_outputs(const char *dir, const MpSimConfig *c, const char *scale_word,
                         const MpSimResult *r, int plot, int argc, char **argv, MpErr *e);
void mp_sim_print_stats(FILE *f, const MpPosStats *st, int layers);
/* The recency probability per layer with its standard error (recency form). */
void mp_sim_print_recency(FILE *f, const MpSimResult *r);
/* "l2", "layernorm" or "none". */
const char *mp_sim_norm_name(MpNorm n);
/* The statistics of n maps as a JSON array of objects (meta.json "stats"); layers[l] is the
 * 0-based layer of map l (NULL: 0..n-1); non-finite values are written as null. */
json_t *mp_job_stats_json(const MpPosStats *st, const int *layers, int n);

#endif
