/* plot.h — publication figures of positional score maps (cairo): PNG, PDF or SVG by extension.
 *
 * Legend: S = sequence length, L = layers; a map is (rows, cols) row-major, row = query i,
 * column = key j, double, NaN (or ±inf) = not observed, drawn as blank background.
 *
 * Implements:
 *   - a grid of heatmap panels, each with a title, "Key position"/"Query position" axis labels
 *     and position ticks, and its own colour bar with tick labels; a figure title;
 *   - colour limits per panel or shared per group: --vmin/--vmax, percentiles of the finite
 *     entries (--clip P,Q), else min/max; diverging maps get limits symmetric about 0;
 *     a constant map gets a small range around its value (no division by zero);
 *   - optional diagonal-mean normalisation (kernels/posmap.h, the code simulate uses);
 *   - maps larger than the panel are area-averaged over their finite entries
 *     (mp_plot_raster_average), never point-sampled;
 *   - cell annotations (small maps), presets for the paper's figures;
 *   - atomic output: the file is written under a temporary name and renamed, so a failure
 *     never leaves a partial file under the final name; a PNG records each panel's title, colour
 *     map and limits in a tEXt chunk "maskpos:panels" (lines "title<TAB>cmap<TAB>lo<TAB>hi", and
 *     "<TAB>note" when the panel has a note: its significance);
 *   - a panel's note (its significance) under its title; when unresolved the note is red and the
 *     map washed out and framed in red dashes.
 * Does not: read .npy files or pick layers/heads (cli/cmd_plot.c and callers do), or draw NaN.
 * Implemented by: plot.c (the heatmaps), raster.c (the cells), lines.c (the line plots).
 * Tested by: tests/test_viz.c (PNG read-back of cell colours, NaN, constant maps, area
 * averaging of a 1024² checkerboard, pdfinfo on PDF, XML parse of SVG, CLI bad input).
 */
#ifndef MP_VIZ_PLOT_H
#define MP_VIZ_PLOT_H

#include <stddef.h>

#include "core/err.h" /* MpErr, MP_OK/MP_ERR */

#define MP_PLOT_MAX_PANELS 256

typedef struct MpPlotPanel {
    const double *map; /* (rows, cols) row-major: row = query, column = key; NaN = blank; borrowed */
    int rows, cols;
    char title[128];
    const char *cmap;  /* NULL = the figure's colour map */
    int group;         /* with opt->shared, panels of the same group share colour limits */
    /* Added fields: zero = default (callers should zero-initialise the struct). */
    int diagnorm;      /* 1: diagonal-mean normalise this panel (besides opt->diagnorm) */
    int limit_skip;    /* colour limits from rows and columns >= limit_skip only (e.g. 1: without the
                          BOS row and column, which then may saturate); drawn in full */
    char note[128];    /* a second line under the title ("block z 1.1 < 1.6: not resolved"), "" = none;
                          recorded as a fifth tEXt field */
    int unresolved;    /* 1: the residue is not resolved at this N: the note in red and the map
                          washed out and framed in red dashes (still readable), so noise is never
                          read as pattern */
} MpPlotPanel;

typedef struct MpPlotOptions {
    char title[256];         /* figure title ("" = none) */
    const char *cmap;        /* "rocket" (default; also when NULL), "vlag", "RdBu", "..._r" */
    int cols;                /* panels per row; 0 = automatic */
    int shared;              /* shared limits (per group) */
    double vmin, vmax;       /* NaN = from data */
    double clip_lo, clip_hi; /* percentiles in [0,100]; NaN = off */
    int diagnorm;            /* apply mp_posmap_diagnorm to each panel before drawing */
    int annotate;            /* print cell values (small maps) */
    int annotate_digits;     /* default 3 */
    int panel_px;            /* panel side in PNG pixels, default 300 */
    /* Added fields, set by mp_plot_options_default. */
    int index_base;          /* label of the first position on the axes: 0 (default: docs/outputs.md) or 1 */
    char xlabel[64];         /* "Key position" */
    char ylabel[64];         /* "Query position" */
    const int *row_labels;   /* NULL: rows numbered from index_base; else [n_row_labels] the label of
                                row r (e.g. the model layers a figure's rows are), also recorded
                                in the PNG's tEXt as a line "rows<TAB>2,5" (borrowed) */
    int n_row_labels;
} MpPlotOptions;

void mp_plot_options_default(MpPlotOptions *o); /* start from this: it also sets the added fields */
/* fig1: annotated small theory map; fig2: rocket, limits [0,1] shared, 4 per row; fig4: rocket,
 * 4 per row (callers add a diagonal-normalised row with cmap "vlag", see cli/cmd_plot.c);
 * fig5: diagonal-normalised, vlag centred on 0, limits ±max(|1st|, |99th| percentile), 4 per row.
 * Unknown name → MP_ERR. */
int mp_plot_preset_apply(MpPlotOptions *o, const char *preset, MpErr *e);
int mp_plot_render(const char *path, const MpPlotPanel *panels, int npanels,
                   const MpPlotOptions *o, MpErr *e); /* MP_OK or MP_ERR + message naming path */
/* Same, and stores the colour limits each panel was drawn with in lim[npanels] (may be NULL). */
int mp_plot_render_ex(const char *path, const MpPlotPanel *panels, int npanels,
                      const MpPlotOptions *o, double (*lim)[2], MpErr *e);

/* Frees cairo's and fontconfig's process-wide caches (fonts). Call once before the process exits,
 * after the last render (a later render still works, it reloads them): without it LeakSanitizer
 * (make asan) reports fontconfig's allocations as leaks. */
void mp_plot_release(void);

/* ---------------------------------------------------------------- line plots (lines.c) */

typedef struct MpPlotSeries {
    const double *x, *y; /* (n) borrowed; non-finite points break the line */
    int n;
    const char *label;   /* legend text */
    double rgb[3];       /* line colour, components in [0,1] */
} MpPlotSeries;

/* One axes box with ns (1..8) series, nice ticks, legend, labels and title; PNG/PDF/SVG by
 * extension, written atomically. MP_ERR (message names path) when nothing is finite. */
int mp_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const MpPlotSeries *s, int ns, MpErr *e);

/* Output format from the file name's extension (case-insensitive), or -1 when unknown. */
enum { MP_PLOT_PNG = 0, MP_PLOT_PDF = 1, MP_PLOT_SVG = 2 };
int mp_plot_format_from_path(const char *path);

/* ---------------------------------------------------------------- helpers (also for tests) */

/* Colour limits each panel would be drawn with (after diagnorm): lim[k][0] < lim[k][1]. */
int mp_plot_limits(double (*lim)[2], const MpPlotPanel *panels, int npanels, const MpPlotOptions *o,
                   MpErr *e);

typedef struct MpPlotRect {
    double x, y, w, h;
} MpPlotRect;
typedef struct MpPlotLayout {
    double width, height;             /* figure size: PNG pixels, PDF/SVG points */
    int npanels, grid_cols, grid_rows;
    MpPlotRect heat[MP_PLOT_MAX_PANELS]; /* heatmap area of each panel */
    MpPlotRect cbar[MP_PLOT_MAX_PANELS]; /* colour bar of each panel */
} MpPlotLayout;
/* Where everything goes (the renderer uses exactly this). */
int mp_plot_layout_compute(MpPlotLayout *lay, const MpPlotPanel *panels, int npanels,
                           const MpPlotOptions *o, MpErr *e);

/* out (oh, ow) = area-weighted mean of the finite entries of map (rows, cols) under each output
 * pixel's footprint; NaN where less than a quarter of the footprint is finite (so the causal edge
 * stays a clean staircase). MP_ERR only on alloc failure. */
int mp_plot_raster_average(double *out, int oh, int ow, const double *map, int rows, int cols,
                           MpErr *e);

/* Percentile p in [0,100] of n finite values sorted ascending, linear
 * interpolation between order statistics (numpy's default). */
double mp_plot_percentile_sorted(const double *sorted, size_t n, double p);

/* Appends one panel per selected layer of a stack (L, S, S) to panels[*n..cap). layer_mask is
 * [L+1] (1-based, NULL = all). title_fmt: "%d" is replaced by the layer number (1-based), "%%"
 * by "%"; a format without "%d" is used as a prefix: "<fmt> <layer>". */
int mp_plot_panels_add_stack(MpPlotPanel *panels, int *n, int cap, const double *maps, int L, int S,
                             const unsigned char *layer_mask, const char *title_fmt, int group,
                             int diagnorm, const char *cmap, MpErr *e);
/* Formats a panel title from a user format: "%d" → num, "%h" → num2, "%%" → "%". Any other '%'
 * sequence is an error (user text never reaches printf). */
int mp_plot_title_format(char *out, size_t cap, const char *fmt, int num, int num2, MpErr *e);

#endif
