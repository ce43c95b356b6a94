/* stories.h — reproduce's stage "stories": the paper's Figure 5 on a real pretrained model that
 * maskpos did not train, stories260K (llama2.c; data/third_party/stories260K/).
 *
 * Implements:
 *   - the corpus (mp_repro_stories_corpus, shared with the length stage): N sequences of S = 512
 *     tokens (the trained context) that the model writes itself from BOS (model/generate.h,
 *     temperature 1, the reproduce seed), reused when its folder records the same settings;
 *   - the stage: `probe --tokens` over every layer, causal and without the mask;
 *   - the report: the verdict rows (layer 1 relative? residue above noise in later layers, and in
 *     which region of the map? does it fall without the mask?), every number and verdict from
 *     this run's outputs; the figure.
 * Does not: tokenise text (the corpus is ids), or change the other stages.
 * Tested by: tests/test_reproduce.c (--quick), tests/test_stories_generate.c (the generator).
 *
 * Shape legend: N sequences, S tokens per sequence, L = 5 layers.
 */
#ifndef MP_REPRO_STORIES_H
#define MP_REPRO_STORIES_H

#include <stddef.h>
#include <stdint.h>

#include "repro/stage.h" /* MpReproCtx, MpReproMaps */

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
    const MpReproMaps *causal, *bidir; /* maps of every layer (owned by the context), NULL when not run */
    double regions[2][64][MP_REPRO_STORIES_NREG]; /* [causal/bidir][layer][first keys, last queries,
                                                     last keys, interior] block z */
} MpReproStories;

/* The corpus into out/stories/corpus/ids.npy (reused when unchanged; once per run): ids gets its
 * path, *rows its N. MP_OK or MP_ERR (message printed). */
int mp_repro_stories_corpus(MpReproCtx *c, char *ids, size_t cap, int64_t *rows);

void mp_repro_stories_free(MpReproStories *st);

/* residue_block_z_regions of dir/meta.json into reg [64][4] (NaN where absent). */
void mp_repro_regions_read(double reg[64][MP_REPRO_STORIES_NREG], const char *dir);

/* The measured Figure-5 rows of a pretrained model (stories260K's, and --model's): is layer 1
 * relative, is there a residue above noise in the later layers, in which region, does it fall
 * without the mask. Every number from the runs given; nothing compared with another model. */
typedef struct MpReproFig5Rows {
    const char *name;        /* "stories260K", or --model's name */
    const char *tag;         /* after the name in the layer-1 row (" (pretrained, real)" or "") */
    const char *layer1_note; /* printf format with the first keys' and the interior's z (layer 1) */
    const MpReproMaps *causal, *bidir; /* NULL when not run */
    const double (*regions)[64][MP_REPRO_STORIES_NREG]; /* [causal/bidir][layer][region] */
} MpReproFig5Rows;
void mp_repro_fig5_rows(MpReport *rp, const MpReproFig5Rows *r);

#endif
