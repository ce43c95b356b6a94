/* repro.h — the paper's experiments as one library call (`maskpos reproduce` is its command line,
 * src/cli/cmd_reproduce.c).
 *
 * Implements: mp_repro_run: every stage asked for, each into its own folder under cfg->out
 * (fig1 theory, fig2 and fig2ln simulations, fig3 the embedded NoPE model, fig4 RoPE
 * simulations, fig5 the embedded RoPE model and --model, recency the later version's grid,
 * length every prefix of one run, stories the pretrained stories260K); a folder whose recorded
 * settings match is reused (store.h); then the figures and report.md + report.html, every number
 * read from this run's results and compared with the one table of expected values (expect.h).
 * The stages are a table (registry.c, this header's implementation, on top of src/repro; stage.h
 * says what an entry holds); the tables are checked before any stage runs.
 * Does not: parse flags or claim the output folder (the CLI does), exit the process: a stage that
 * fails is reported, named in the summary and the report's footer, and the others still run.
 * Implemented by: registry.c (the registry: the stage table and the run).
 * Tested by: tests/test_reproduce.c, tests/test_reproduce_store.c.
 */
#ifndef MP_REPRO_H
#define MP_REPRO_H

#include "core/err.h"      /* MpErr */
#include "repro/config.h"  /* MpReproConfig, MpReproHost */

typedef struct MpReproSummary {
    int failed;             /* failed runs (0: every stage ran) */
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

/* mp_repro_run over other tables (stage.h; tests register bad ones here): the tables are checked
 * first, and a name that does not join them (a figure's stage or panel run, an expected-value
 * key) is MP_ERR with one line naming it, before any stage runs. */
struct MpReproTables;
int mp_repro_run_tables(MpReproSummary *sum, const MpReproConfig *cfg, const struct MpReproTables *t, MpErr *e);

#endif
