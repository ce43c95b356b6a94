/* card_job.h — one card per model (`maskpos card`, docs/card.md): a probe with every statistic of the
 * probe's table, its counterfactual passes beside it, and a folder that shows them on one page.
 *
 * Implements:
 *   - mp_card_run: MODEL over the tokens of the probe's options, as up to three probe passes through
 *     mp_probe_run (job/probe_job.h; the code `maskpos probe` runs): the model as it is with every
 *     statistic a probe can turn on (the rows of model/probe.h's mp_probe_stats that read the
 *     forward pass), then --no-rope (where the model has RoPE) and --bidirectional, each written
 *     as a probe run folder inside the card's (probe/, no-rope/, bidirectional/); then the card;
 *   - mp_card_compare: the card of run folders (cards, or plain `maskpos probe` outputs) side by
 *     side; a folder that is not a run, or runs of different lengths, is refused with one line
 *     naming the folder before anything is written;
 *   - the card (both): card.json — per model and pass every per-layer number of the run's
 *     meta.json (with its standard error where the run has one), the columns of the per-layer
 *     table and what each pass is — then the views of viz/card_html.h (card.html, card.md,
 *     card.tex) and each model's map figure (maps-K.png). card.json is written last (a stale one
 *     removed first), every file atomically: a folder with a card.json holds a complete card.
 * Does not: parse flags (src/cli/cmd_card.c), compute a statistic (the probe does; the card copies
 * its numbers), draw the page (viz/card_html.c).
 * Implemented by: card_job.c.
 * Tested by: tests/test_card.c (against separate `maskpos probe` runs through the CLI).
 */
#ifndef MP_JOB_CARD_JOB_H
#define MP_JOB_CARD_JOB_H

#include <stdio.h>

#include "core/err.h"      /* MpErr */
#include "job/probe_job.h" /* MpProbeConfig */

#define MP_CARD_MAX_RUNS 16

/* Start from mp_card_config_init. Every pointer is borrowed for the call. */
typedef struct MpCardConfig {
    MpProbeConfig probe;     /* first: the probe's option rows set its fields (their offsets); probe.out is
                                the card's folder; probe.stats, bidirectional, no_rope are the card's */
    int no_counterfactuals;  /* 1: the probe pass only */
    const char *const *runs; /* mp_card_compare: the run folders [n_runs] */
    int n_runs;
    int out_mode;            /* MpOutdirMode of the card's folder */
    int plot;                /* the passes' own figures too (probe --plot) */
    int argc;                /* the command line, for card.json's provenance (may be 0) */
    char **argv;
    FILE *log;               /* the plan, the cost and each pass's set-up lines; NULL: silent */
} MpCardConfig;

void mp_card_config_init(MpCardConfig *c);
/* MODEL (c->probe.model_path) into the card folder c->probe.out. MP_ERR with one line. */
int mp_card_run(const MpCardConfig *c, MpErr *e);
/* The card of c->runs into c->probe.out. MP_ERR with one line naming the folder on bad input. */
int mp_card_compare(const MpCardConfig *c, MpErr *e);
/* 1 when dir holds a run a card reads (a card.json or a probe's meta.json). */
int mp_card_is_run(const char *dir);

#endif
