/* repro.h — the paper's experiments as one library call (`maskpos reproduce` is its command line,
 * src/cli/reproduce.c).
 *
 * Implements: mp_repro_run: every stage asked for, each into its own folder under cfg->out
 * (fig1 theory, fig2 and fig2ln simulations, fig3 the embedded NoPE model, fig4 RoPE
 * simulations, fig5 the embedded RoPE model and --model, recency the later version's grid,
 * length every prefix of one run, stories the pretrained stories260K); a folder whose recorded
 * settings match is reused (store.h); then the figures and report.md + report.html, every number
 * read from this run's results and compared with the one table of expected values (expect.h).
 * The stages are a table (registry.c; stage.h says what an entry holds).
 * Does not: parse flags or claim the output folder (the CLI does), exit the process: a stage that
 * fails is reported, named in the summary and the report's footer, and the others still run.
 * Tested by: tests/test_reproduce.c.
 */
#ifndef MP_REPRO_H
#define MP_REPRO_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"      /* MpErr */
#include "core/progress.h" /* MpProgressFn, MP_JOB_STOPPED_MSG */
#include "sim/simulate.h" /* MpSimConfig */

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

typedef struct MpReproSummary {
    int failed;             /* failed runs (0: every stage ran) */
    char failed_names[1024];
    int npass, nrows;       /* verdict rows that agree, of all */
    double wall_s;
    int no_space;           /* a write found the disk full: the run stopped there, no report written */
} MpReproSummary;

/* The stages, in report order: name of stage k (NULL past the last), index of a name (-1: none). */
const char *mp_repro_stage_name(int k);
int mp_repro_stage_find(const char *name);

/* Runs the stages and writes the report. MP_OK (summary filled; failed stages are in it) or
 * MP_ERR when the report could not be written or the progress callback stopped the run (e says
 * why; the summary is filled). */
int mp_repro_run(MpReproSummary *sum, const MpReproConfig *cfg, MpErr *e);

#endif
