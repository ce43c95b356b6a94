/* repro_stories.h — reproduce's stage "stories": the paper's Figure 5 on a real pretrained model
 * that maskpos did not train, stories260K (llama2.c; data/third_party/stories260K/).
 *
 * Implements:
 *   - mp_repro_stories_path: where the carried model is (MASKPOS_STORIES, else
 *     data/third_party/stories260K/stories260K.gguf beside the executable's build folder, else
 *     below the current directory);
 *   - mp_repro_stories_stage: the corpus — N sequences of S = 512 tokens (the trained context)
 *     that the model writes itself from BOS (model/generate.h, temperature 1, the reproduce seed)
 *     — then `maskpos probe --tokens` over every layer, causal and without the mask; each of the
 *     three steps is skipped when its folder records the same settings;
 *   - mp_repro_stories_report: the verdict rows (layer 1 relative? residue above noise in later
 *     layers, and in which region of the map? does it fall without the mask?), every number and
 *     every verdict from this run's outputs; the figure; the per-layer statistics rows.
 * Does not: tokenise text (the corpus is ids), or change the other stages.
 * Tested by: tests/test_reproduce.c (--quick), tests/test_stories_generate.c (the generator).
 *
 * Shape legend: N sequences, S tokens per sequence, L = 5 layers.
 */
#ifndef MP_CLI_REPRO_STORIES_H
#define MP_CLI_REPRO_STORIES_H

#include <stddef.h>
#include <stdint.h>

#include "cli/report.h"       /* MpReport */
#include "cli/repro_models.h" /* MpReproProbe */

#define MP_REPRO_STORIES_SEQ 512 /* stories260K's trained context */

/* Regions of the block test, as in meta.json residue_block_z_regions. */
enum { MP_REPRO_STORIES_NREG = 4 };

typedef struct MpReproStories {
    int ran;                      /* the stage was asked for */
    int ok_corpus;
    int64_t n;                    /* sequences */
    int seq;                      /* S */
    double gen_wall_s, gen_nll;   /* generation time (this run or the recorded one); mean NLL/token */
    int gen_skipped;
    MpReproProbe causal, bidir;   /* maps of every layer */
    double regions[2][64][MP_REPRO_STORIES_NREG]; /* [causal/bidir][layer][first keys, last queries,
                                                     last keys, interior] block z */
    const char *fig;              /* report-relative figure path, or NULL */
} MpReproStories;

typedef struct MpReproStoriesOpts {
    const char *model;  /* the .gguf, or NULL when not found (the stage then fails with a hint) */
    int64_t n;          /* sequences */
    int seq;            /* tokens per sequence */
    uint64_t seed;
    int threads, force;
    const char *compute; /* "f32" / "bf16" */
} MpReproStoriesOpts;

/* Finds the carried stories260K.gguf; 1 and out filled, or 0. */
int mp_repro_stories_path(char *out, size_t cap);

/* Runs the stage into out/stories/; returns the number of failed steps (each is also reported on
 * stderr and named by fail(name)). */
int mp_repro_stories_stage(MpReproStories *st, const char *out, const MpReproStoriesOpts *o, int (*fail)(const char *));

/* Draws out/stories/figure5_stories260K.png and adds the figure, the verdict rows and the
 * statistics rows to rp. Returns MP_OK or MP_ERR (figure not drawn; e says why). */
int mp_repro_stories_report(MpReport *rp, MpReproStories *st, const char *out, MpErr *e);

void mp_repro_stories_free(MpReproStories *st);

#endif
