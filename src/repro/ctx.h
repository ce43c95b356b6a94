/* ctx.h — the context of `reproduce`'s stages: what every stage file (stage_paper.c,
 * stage_models.c, stage_recency.c, stage_length.c, stage_stories.c) and the units below them
 * share, and nothing of the stage table or the report's order (registry.c, above the stages, owns
 * those).
 *
 * Implements:
 *   MpReproCtx     the run's settings, its named runs, fig1's closed form, fig3's Gram
 *                  matrices, the failed steps, and one named state block per stage that keeps
 *                  its own (mp_repro_state);
 *   MpReproMaps    one run's maps and statistics (a simulation or a probe), found by its folder
 *                  under the output ("fig4/causal_alpha_0"), never by index: a run that was not
 *                  asked for, or failed, is simply not there.
 * Does not: run anything (runs.h, sims.h, pretrained.h do), or know which stages exist.
 * Tested by: tests/test_reproduce.c, tests/test_reproduce_store.c.
 * Shape legend: L layers, S tokens per sequence.
 */
#ifndef MP_REPRO_CTX_H
#define MP_REPRO_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/posmap.h" /* MpPosStats */
#include "repro/config.h"   /* MpReproConfig */
#include "sim/theory.h"     /* MpTheory */
#include "viz/figs.h"       /* MpFigNote */

#include <jansson.h>

/* The paper's Figure-3 and Figure-5 settings on the embedded models (their context is 128). */
#define MP_REPRO_GRAM_SEQ 50
#define MP_REPRO_MODEL_SEQ 128

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
    int resolved[64];       /* per layer: the residue resolved at this N (viz/signif.h: a probe's block z
                               against its noise level, a simulation's rms/noise) */
    MpFigNote note[64];     /* per layer: that in words, under the layer's panel of a residue figure */
    double z_threshold[64]; /* per layer: what block z (probes) or rms/noise (simulations) must exceed */
    double nri_corr[64];    /* per layer: the noise-corrected NRI (probes; NaN for simulations and where none) */
    double wall_s;
} MpReproMaps;

typedef struct MpReproGram {
    int ok, skipped;
    int S;
    double *gram;           /* [9,S,S] owned: (a)..(i) of paper.md §2.2 */
    double wall_s;
} MpReproGram;

/* A stage's own state (mp_repro_state). */
typedef struct MpReproState {
    const char *name;
    size_t size;
    void *data;                  /* [size bytes] owned */
    void (*release)(void *data); /* what data owns (NULL: nothing) */
} MpReproState;

typedef struct MpReproCtx {
    const MpReproConfig *cfg;
    const char *out;
    MpReproMaps **runs;     /* [nruns] owned, in the order they ran */
    int nruns, cap_runs;
    MpTheory th;            /* fig1 */
    int have_th;
    MpReproGram gram;       /* fig3 */
    const char *user_name;  /* --model's last path component */
    int64_t n_embedded;     /* sequences of the embedded-model probes */
    MpReproState *states;   /* [nstates] owned */
    int nstates, cap_states;
    int failed;
    char *failed_names;     /* owned: "fig3/gram, fig5/rope" (NULL: none failed) */
    /* whether some stage declares a run of folder dir (set by the registry: mp_repro_maps asserts
     * it, so a verdict that names a run no stage declares stops the tests instead of losing its
     * rows; NULL: not checked) */
    int (*declares)(const void *tables, const char *dir);
    const void *tables;
} MpReproCtx;

/* A context for cfg (borrowed); mp_repro_ctx_free releases it. */
void mp_repro_ctx_init(MpReproCtx *c, const MpReproConfig *cfg);
void mp_repro_ctx_free(MpReproCtx *c);

/* Records a failed step ("fig3/gram"); returns 1 (to add to a failure count). */
int mp_repro_fail(MpReproCtx *c, const char *what);
/* A new run named dir (label: its statistics-table name, NULL = dir); owned by c. */
MpReproMaps *mp_repro_maps_add(MpReproCtx *c, const char *dir, const char *label);
/* m's resolved and note per layer: from a probe's meta.json (meta), or from m's statistics and n
 * (a simulation: meta NULL). */
void mp_repro_maps_signif(MpReproMaps *m, const json_t *meta);
/* The run of that folder when it has its outputs, else NULL (a folder no stage declares is a
 * programmer error). */
const MpReproMaps *mp_repro_maps(const MpReproCtx *c, const char *dir);
void mp_repro_maps_free(MpReproMaps *m);
void mp_repro_gram_free(MpReproGram *g);

/* The state block named name (a stage's: "recency"), size bytes, zeroed when first asked for;
 * released with the context (release(data) first when not NULL). Every call for one name gives
 * the same block and must give the same size. */
void *mp_repro_state(MpReproCtx *c, const char *name, size_t size, void (*release)(void *data));

/* The largest residue magnitude of layer l. */
double mp_repro_max_abs_res(const MpPosStats *st, int l);

#endif
