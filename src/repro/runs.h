/* runs.h — the probe and gram runs `reproduce`'s model stages share (stage_models.c,
 * stage_length.c, stage_stories.c), below them: each into its folder under the output, reused
 * when the folder records the same settings key (store.h), its maps added to the context.
 * Every run is a library call (job/probe_job.h, job/gram_job.h); under mpirun a probe's settings (the
 * option table of job/probe_opts.h) are also handed to the other ranks (MpReproHost.share),
 * which run it beside this process; a probe's reuse key is derived from the same settings.
 * Tested by: tests/test_reproduce.c, tests/test_mpi.c.
 */
#ifndef MP_REPRO_RUNS_H
#define MP_REPRO_RUNS_H

#include <stdint.h>

#include "repro/ctx.h" /* MpReproCtx, MpReproMaps, MpReproGram */

/* A probe of model over data (or --tokens ids) into out/dir, reused when unchanged. */
typedef struct MpReproProbeSpec {
    const char *dir, *label;  /* folder under the output; statistics-table name (NULL: not listed) */
    const char *model;
    const char *data;         /* text corpus, or NULL with tokens */
    const char *tokens;       /* ids.npy, or NULL */
    int64_t n;
    int seq;                  /* 0: --tokens' own */
    int causal, pack;
    const char *layers;       /* "1-4", "all" */
    int recency_plot;         /* --recency --plot (stage length) */
    const char *stats;        /* --stats (NULL: none beyond the maps) */
    int no_rope;              /* --no-rope */
} MpReproProbeSpec;

/* Runs (or reuses: its reuse key is derived from the probe's settings, job/probe_opts.h) the
 * probe; the maps are added to c under spec->dir. MP_OK or MP_ERR. */
int mp_repro_probe(MpReproCtx *c, const MpReproProbeSpec *spec, MpReproMaps **out);
/* Runs (or reuses) `gram` of model's layer 1 -> 2 over corpus into out/dir. */
int mp_repro_gram(MpReproCtx *c, MpReproGram *g, const char *dir, const char *model, const char *corpus, int n, int seq,
                  const char *key);

#endif
