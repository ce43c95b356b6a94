/* cmap.h — colour maps for score heatmaps: name → anchor table → RGB.
 *
 * Implements: a small set of colour maps, each a table of sRGB anchor colours at evenly spaced
 * positions t = k/(n−1) with piecewise-linear interpolation between them:
 *   "rocket"  sequential, near-black purple → red → cream (the paper's map; 16 anchors sampled
 *             from the published 256-entry table, interpolation error ≤ 2/255 per channel);
 *   "vlag"    diverging, blue → near-white → red (13 anchors), centred on 0 by the figure code;
 *   "RdBu"    diverging, ColorBrewer's 11 classes, red (low) → white → blue (high);
 * and any name with "_r" appended, reversed. Names are matched case-insensitively.
 * Does not: build perceptually uniform maps itself (the anchors carry that), or handle NaN
 * (the figure code draws NaN cells as background).
 * Tested by: tests/test_viz.c (anchor colours read back from rendered PNGs, hard-coded there).
 */
#ifndef MP_VIZ_CMAP_H
#define MP_VIZ_CMAP_H

typedef struct MpPlotCmap {
    const char *name;            /* canonical name, e.g. "rocket" */
    const unsigned char *anchor; /* (n, 3) sRGB bytes at t = k/(n−1); borrowed from a static table */
    int n;                       /* number of anchors, >= 2 */
    int diverging;               /* 1: the figure code centres the limits on 0 */
    int reversed;                /* 1: "_r" variant, t → 1 − t */
} MpPlotCmap;

/* Looks a map up by name ("rocket", "vlag_r", ...). Returns MP_OK, or MP_ERR when unknown. */
int mp_plot_cmap_find(MpPlotCmap *out, const char *name);
/* rgb[3] in [0,1] for t in [0,1] (clamped; NaN → t = 0). */
void mp_plot_cmap_eval(const MpPlotCmap *c, double t, double rgb[3]);
/* The list of base names, comma separated, for help texts and error messages. */
const char *mp_plot_cmap_names(void);

#endif
