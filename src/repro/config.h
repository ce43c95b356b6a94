/* config.h — what a caller of `reproduce` sets (repro.h's mp_repro_run takes it; the context of
 * the stages, ctx.h, points to it): types only, below every file of src/repro.
 * Implements: MpReproHost, MpReproConfig.
 * Does not: declare functions (repro.h is the entry point, ctx.h what the stages share).
 */
#ifndef MP_REPRO_CONFIG_H
#define MP_REPRO_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "core/progress.h" /* MpProgressFn, MP_JOB_STOPPED_MSG */
#include "sim/simulate.h"  /* MpSimConfig */

/* What only the command line can do: under mpirun, hand a job's settings to the other ranks,
 * which run it beside this process (docs/mpi.md). job "probe": settings [len bytes] are
 * "name=value" strings, each NUL-terminated (mp_probe_opts_write, job/probe_opts.h). NULL in one
 * process. */
typedef struct MpReproHost {
    void (*share)(const char *job, const char *settings, size_t len);
} MpReproHost;

typedef struct MpReproConfig {
    const char *out;        /* output folder (claimed by the caller) */
    int quick, force;
    MpSimConfig base;       /* batch, seed, threads, progress of the simulations */
    int64_t batch_flag;     /* --batch as given (0: none): also scales the recency grid */
    const char *models;     /* the embedded models folder, or NULL when none was found */
    const char *model, *data; /* --model, --data (NULL: none) */
    int64_t model_n;        /* --n (0: the stage's default) */
    int model_seq, pack;    /* --seq (0: 1024 or the model's context), --pack */
    const char *compute;    /* "f32" or "bf16" for every probe */
    const char *device;     /* the model probes' backend (--device): NULL = cpu */
    int64_t stories_n;      /* --stories-n (0: 1000, quick 32) */
    const char *stories;    /* the stories260K .gguf, or NULL when none was found */
    uint32_t stages;        /* bit k: stage k of mp_repro_stage_name */
    int argc;               /* the command line, for meta.json's provenance */
    char **argv;
    MpReproHost host;
    /* stages done / stages asked for: once before the first, then after each; nonzero stops
     * before the next stage (the report then holds what ran; mp_repro_run returns MP_ERR with
     * MP_JOB_STOPPED_MSG). NULL: none. */
    MpProgressFn progress;
    void *progress_ctx;
} MpReproConfig;

#endif
