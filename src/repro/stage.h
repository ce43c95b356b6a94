/* stage.h — the two tables of `reproduce`, below the stages that fill them and the registry
 * (registry.c) that walks them:
 *
 *   MpReproStage   one entry per stage: name (--only, folder), what its settings key records,
 *                  the runs it adds (by folder), the run function, and its own report part;
 *   MpReproFigure  one entry per figure: file, title, caption, the runs it draws (by folder) and
 *                  its verdict function. Adding a figure = one entry plus its verdict function.
 *
 * Names that join the tables are checked when the tables are registered, before any stage runs
 * (registry.c): a figure's stage is in the stage table, each panel's run is one a stage
 * declares (its `runs`, or the simulation table of sims.h). The stage entries are defined by
 * the stage files (stage_paper.c, stage_models.c, stage_recency.c, stage_length.c,
 * stage_stories.c, stage_beyond.c), the figure tables by stage_paper.c and stage_models.c.
 */
#ifndef MP_REPRO_STAGE_H
#define MP_REPRO_STAGE_H

#include <stddef.h>

#include "core/err.h"    /* MpErr */
#include "repro/ctx.h"   /* MpReproCtx */
#include "viz/report.h"  /* MpReport */

typedef struct MpReproStage {
    const char *name;       /* --only name; its folder under the output */
    const char *key;        /* what its settings key records (store.h) */
    int (*run)(MpReproCtx *c);                   /* returns the number of failed runs */
    /* its verdict rows and figures beyond the figure table's (NULL: none); MP_ERR = a figure
     * could not be drawn (e says why) */
    int (*report)(MpReproCtx *c, MpReport *rp, MpErr *e);
    /* the folders of the runs it adds to the context, beyond its simulations (sims.h); NULL
     * ends the list (NULL list: none) */
    const char *const *runs;
    /* its own names checked when the tables are registered (NULL: none): MP_ERR with one line */
    int (*check)(MpErr *e);
} MpReproStage;

#define MP_REPRO_FIG_PANELS 6

typedef struct MpReproPanel {
    const char *run;        /* folder of the run drawn (NULL ends the list) */
    const char *label;
    int diagnorm;
    int optional;           /* the figure is drawn without it */
} MpReproPanel;

typedef struct MpReproFigure {
    const char *stage;      /* drawn when this stage ran */
    const char *file;       /* relative to the output */
    const char *title;      /* NULL: title_fn(c) */
    void (*title_fn)(char *buf, size_t cap, const MpReproCtx *c);
    double clip_lo, clip_hi; /* NAN: shared colour limits; else per-panel percentiles */
    MpReproPanel panels[MP_REPRO_FIG_PANELS];
    void (*caption)(char *buf, size_t cap, const MpReproCtx *c); /* NULL: caption_text */
    const char *caption_text;
    void (*verdict)(const MpReproCtx *c, MpReport *rp);           /* its rows (NULL: none) */
    /* a figure that is not a set of map panels: ready(c) says it can be shown, draw (NULL: the run
     * drew it itself) draws it */
    int (*ready)(const MpReproCtx *c);
    int (*draw)(const MpReproCtx *c, const char *path, MpErr *e);
} MpReproFigure;

/* The tables a run walks (registry.c: the built-in ones; a test passes its own). */
typedef struct MpReproTables {
    const MpReproStage *const *stages; /* [nstages] in report order; MpReproConfig.stages bit k = stage k */
    int nstages;
    const MpReproFigure *const *figs;  /* [nfigs] figure tables in report order, each ending with a NULL file */
    int nfigs;
} MpReproTables;

/* The stage files' entries (stage_paper.c, stage_models.c, stage_recency.c, stage_length.c,
 * stage_stories.c). */
extern const MpReproStage mp_repro_stage_fig1, mp_repro_stage_fig2, mp_repro_stage_fig2ln, mp_repro_stage_fig3,
    mp_repro_stage_fig4, mp_repro_stage_fig5, mp_repro_stage_recency, mp_repro_stage_length, mp_repro_stage_stories,
    mp_repro_stage_beyond;
extern const MpReproFigure mp_repro_figs_paper[];  /* stage_paper.c: Figures 1, 2, 4 and the appendices; ends with a NULL file */
extern const MpReproFigure mp_repro_figs_models[]; /* stage_models.c: Figures 3 and 5 */

#endif
