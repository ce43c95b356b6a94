/* surface.h — viz-internal: one way to write a cairo figure to PNG, PDF or SVG.
 *
 * Implements: mp_plot_surface_write(): picks the surface type from the file extension, calls the
 * caller's draw function on it, and writes the result atomically (temp file + rename), so a
 * failed or interrupted render never leaves a file under the final name; a PNG may carry a tEXt
 * chunk (the heatmaps' colour maps and limits, readable with any PNG tool). Used by the heatmaps
 * (plot.c) and the line plots (lines.c).
 * Implemented by: plot.c (the one place a cairo surface is made and finished).
 */
#ifndef MP_VIZ_SURFACE_H
#define MP_VIZ_SURFACE_H

#include <cairo.h>

#include "core/err.h" /* MpErr */

/* Draws the figure on cr (format: MP_PLOT_PNG/PDF/SVG, for format-specific choices). */
typedef int (*MpPlotDrawFn)(cairo_t *cr, int format, void *ctx, MpErr *e);

/* width, height: PNG pixels or PDF/SVG points. title may be "" (PDF metadata only). */
int mp_plot_surface_write(const char *path, int format, double width, double height, const char *title,
                          MpPlotDrawFn draw, void *ctx, MpErr *e);
/* Same; a PNG also gets a tEXt chunk (after IHDR) with keyword MP_PLOT_PNG_KEY and text png_text
 * (Latin-1, may be NULL: no chunk). The heatmaps record each panel's colour map and limits there. */
#define MP_PLOT_PNG_KEY "maskpos:panels"
int mp_plot_surface_write_text(const char *path, int format, double width, double height, const char *title,
                               const char *png_text, MpPlotDrawFn draw, void *ctx, MpErr *e);

#endif
