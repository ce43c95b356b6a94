/* stage.h — inside the registry of `reproduce` (registry.c): the context the stages share, the
 * named runs they produce, and the two tables a stage adds entries to.
 *
 *   MpReproStage   one entry per stage: name (--only, folder), what its settings key records,
 *                  the run function, and its verdict rows;
 *   MpReproFigure  one entry per figure: file, title, caption, the runs it draws (by folder) and
 *                  its verdict function. Adding a figure = one entry plus its verdict function.
 *
 * Runs are found by their folder under the output ("fig4/causal_alpha_0"), never by index: a
 * run that was not asked for, or failed, is simply not ok.
 * Shape legend: L layers, S tokens per sequence.
 */
#ifndef MP_REPRO_STAGE_H
#define MP_REPRO_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/posmap.h" /* MpPosStats */
#include "repro/repro.h"    /* MpReproConfig */
#include "sim/theory.h"     /* MpTheory */
#include "viz/report.h"     /* MpReport */

/* One run's maps and statistics: a simulation or a probe. */
typedef struct MpReproMaps {
    char dir[128];          /* folder under the output, and the run's name */
    char label[48];         /* its name in the statistics table ("" = not listed there) */
    int ok, skipped;        /* has its outputs; reused from an earlier run */
    int L, S;
    int64_t n;              /* sequences averaged */
    double *scores, *se;    /* [L,S,S] owned: mean pre-softmax scores and their standard errors */
    double *diagnorm;       /* [L,S,S] owned: scores minus their diagonal means */
    MpPosStats stats[64];   /* per layer */
    int has_block_z;        /* probes: the block test of the residue (simulations have none) */
    double block_z[64];
    double wall_s;
} MpReproMaps;

#define MP_REPRO_MAX_RUNS 48
/* The paper's Figure-3 and Figure-5 settings on the embedded models (their context is 128). */
#define MP_REPRO_GRAM_SEQ 50
#define MP_REPRO_MODEL_SEQ 128

typedef struct MpReproGram {
    int ok, skipped;
    int S;
    double *gram;           /* [9,S,S] owned: (a)..(i) of paper.md §2.2 */
    double wall_s;
} MpReproGram;

struct MpReproRecency;
struct MpReproLength;
struct MpReproStories;

typedef struct MpReproCtx {
    const MpReproConfig *cfg;
    const char *out;
    MpReproMaps *runs[MP_REPRO_MAX_RUNS]; /* owned, in the order they ran */
    int nruns;
    MpTheory th;            /* fig1 */
    int have_th;
    MpReproGram gram;       /* fig3 */
    const char *user_name;  /* --model's last path component */
    int64_t n_embedded;     /* sequences of the embedded-model probes */
    struct MpReproRecency *rec;
    struct MpReproLength *len;
    struct MpReproStories *stories;
    int failed;
    char failed_names[1024];
} MpReproCtx;

/* Records a failed step ("fig3/gram"); returns 1 (to add to a failure count). */
int mp_repro_fail(MpReproCtx *c, const char *what);
/* A new run named dir (label: its statistics-table name, NULL = dir); owned by c. */
MpReproMaps *mp_repro_maps_add(MpReproCtx *c, const char *dir, const char *label);
/* The run of that folder when it has its outputs, else NULL. */
const MpReproMaps *mp_repro_maps(const MpReproCtx *c, const char *dir);
void mp_repro_maps_free(MpReproMaps *m);

/* ================================================================ the tables */

typedef struct MpReproStage {
    const char *name;       /* --only name; its folder under the output */
    const char *key;        /* what its settings key records (store.h) */
    int (*run)(MpReproCtx *c);                   /* returns the number of failed runs */
    /* its verdict rows and figures beyond the figure table's (NULL: none); MP_ERR = a figure
     * could not be drawn (e says why) */
    int (*report)(MpReproCtx *c, MpReport *rp, MpErr *e);
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

/* The stage files' entries (paper.c, models.c, recency.c, length.c, stories.c). */
extern const MpReproStage mp_repro_stage_fig1, mp_repro_stage_fig2, mp_repro_stage_fig2ln, mp_repro_stage_fig3,
    mp_repro_stage_fig4, mp_repro_stage_fig5, mp_repro_stage_recency, mp_repro_stage_length, mp_repro_stage_stories;
extern const MpReproFigure mp_repro_figs_paper[];  /* paper.c: Figures 1, 2, 4 and the appendices; ends with a NULL file */
extern const MpReproFigure mp_repro_figs_models[]; /* models.c: Figures 3 and 5 */
/* paper.c: the simulations of stage (its entries of the simulation table); failures. */
int mp_repro_paper_sims(MpReproCtx *c, const char *stage);

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
} MpReproProbeSpec;

/* Runs (or reuses: its reuse key is derived from the probe's settings, job/probe_opts.h) the
 * probe; the maps are added to c under spec->dir. MP_OK or MP_ERR. */
int mp_repro_probe(MpReproCtx *c, const MpReproProbeSpec *spec, MpReproMaps **out);
/* Runs (or reuses) `gram` of model's layer 1 -> 2 over corpus into out/dir. */
int mp_repro_gram(MpReproCtx *c, MpReproGram *g, const char *dir, const char *model, const char *corpus, int n, int seq,
                  const char *key);
void mp_repro_gram_free(MpReproGram *g);

/* The largest residue magnitude of layer l. */
double mp_repro_max_abs_res(const MpPosStats *st, int l);

#endif
