/* pretrained.h — what `reproduce`'s stages on a pretrained model share, below them:
 *
 *   - stories260K's corpus (stages stories and length): N sequences of S = 512 tokens (its trained
 *     context) that the model writes itself from BOS (model/generate.h, temperature 1, the
 *     reproduce seed) into out/stories/corpus/ids.npy, reused when its folder records the same
 *     settings, made once per run;
 *   - the regional block test a probe wrote (meta.json residue_block_z_regions);
 *   - the measured Figure-5 rows of a pretrained model (stories260K's in stage stories, --model's
 *     in stage fig5): is layer 1 relative, is there a residue above noise in the later layers, in
 *     which region, does it fall without the mask. Every number from the runs given; nothing
 *     compared with another model.
 * Does not: tokenise text (the corpus is ids), or probe (the stages do, runs.h).
 * Tested by: tests/test_reproduce.c (--quick, --only length, --model), tests/test_stories_generate.c
 * (the generator).
 * Shape legend: N sequences, S tokens per sequence.
 */
#ifndef MP_REPRO_PRETRAINED_H
#define MP_REPRO_PRETRAINED_H

#include <stdint.h>

#include "repro/ctx.h"  /* MpReproCtx, MpReproMaps */
#include "viz/report.h" /* MpReport */

#define MP_REPRO_STORIES_SEQ 512 /* stories260K's trained context */

/* The corpus of this run: its ids.npy, N and S. */
typedef struct MpReproCorpus {
    char ids[4200];
    int64_t n;
    int seq;
} MpReproCorpus;

/* Makes (or reuses) the corpus, once per run; out is filled (N and S even on failure). MP_OK or
 * MP_ERR (message printed). */
int mp_repro_corpus_stories(MpReproCtx *c, MpReproCorpus *out);

/* Regions of the block test, as in meta.json residue_block_z_regions. */
enum { MP_REPRO_STORIES_NREG = 4 };

/* One probe's regional block test per layer: z and whether the region is resolved at this N
 * (meta.json residue_block_z_regions and residue_regions_resolved). */
typedef struct MpReproRegions {
    double z[64][MP_REPRO_STORIES_NREG];      /* NaN where absent */
    int resolved[64][MP_REPRO_STORIES_NREG];  /* against the region's own noise level, in a resolved layer */
} MpReproRegions;

/* The regional block test of dir/meta.json into reg. */
void mp_repro_regions_read(MpReproRegions *reg, const char *dir);

typedef struct MpReproFig5Rows {
    const char *name;        /* "stories260K", or --model's name */
    const char *tag;         /* after the name in the layer-1 row (" (pretrained, real)" or "") */
    const char *layer1_note; /* printf format with the first keys' and the interior's z (layer 1) */
    const MpReproMaps *causal, *bidir; /* NULL when not run */
    const MpReproRegions *regions; /* [causal/bidir] */
} MpReproFig5Rows;
void mp_repro_fig5_rows(MpReport *rp, const MpReproFig5Rows *r);

#endif
