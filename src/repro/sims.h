/* sims.h — the simulations of `reproduce`'s paper stages: one table of the parameter-free
 * decoder's runs (fig2: L2 at five α, fig2ln: LayerNorm at √d and d, fig4: RoPE causal and
 * bidirectional, fig3: the yardstick at the embedded models' S), each into out/<stage>/<name>,
 * reused when its folder records the same settings (meta.json stage_settings).
 * Below the stages: stage_paper.c runs fig2, fig2ln and fig4 from it, stage_models.c fig3's
 * yardstick; the registry reads the table's folders when it checks the figure tables.
 * Tested by: tests/test_reproduce.c.
 */
#ifndef MP_REPRO_SIMS_H
#define MP_REPRO_SIMS_H

#include "repro/ctx.h" /* MpReproCtx */

/* Runs (or reuses) the table's entries of stage; each run is added to c under "stage/name".
 * Returns the number that failed (each printed its one line and is recorded in c). */
int mp_repro_sims_run(MpReproCtx *c, const char *stage);

/* Entry k of the table: its stage and folder name under the stage; 0 past the last. */
int mp_repro_sims_entry(int k, const char **stage, const char **name);

#endif
