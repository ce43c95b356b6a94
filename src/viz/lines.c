/* lines.c — line plots (loss curves, statistics against layer or length) on the shared surface
 * writer.
 *
 * Implements: mp_plot_lines(): one axes box with "nice" ticks (1, 2, 5 × 10^k steps; whole-number
 * steps when every x is an integer, as layers are; a log2 x axis with ticks at the powers of two
 * when every x is a power of two spanning at least 8×, as lengths S' = 16 … 512 are), light grid,
 * one polyline per series (NaN points break the line; where a series has fewer than 40 finite
 * points each point gets a marker, its shape cycling with the series, and series 5 to 8 are
 * dashed, so curves that coincide stay visible), a legend to the right of the axes (never over
 * the data), axis labels and a title; PNG/PDF/SVG by extension, written atomically
 * (viz/surface.h). A PNG records the axes in its tEXt chunk (MP_PLOT_PNG_KEY): a line "axes
 * L T R B x0 x1 y0 y1 xscale" (pixels, data limits, linear or log2), "xticks ..." and the
 * legend's box "legend x y w h".
 * Does not: log y axes or multiple axes.
 * Tested by: tests/test_viz.c (pixels of a known line, legend outside the axes, integer and log2
 * ticks, bad input, no partial file).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viz/plot.h"    /* MpPlotSeries, mp_plot_lines, mp_plot_format_from_path */
#include "viz/surface.h" /* mp_plot_surface_write_text */

#define LINES_AXES_W 620.0 /* the axes box */
#define LINES_H 440.0
#define LINES_ML 78.0 /* margins: left, top, bottom; the legend column follows the axes */
#define LINES_MT 44.0
#define LINES_MB 56.0
#define LINES_MAX_TICKS 64

typedef struct LinesCtx {
    const MpPlotSeries *s;
    int ns;
    const char *title, *xlabel, *ylabel;
    double x0, x1, y0, y1; /* data limits (x in log2 units when xlog) */
    double yt0, ystep;     /* first y tick and step */
    double xt[LINES_MAX_TICKS]; /* x ticks (data units) */
    int nxt, xlog, xint, xdec;
    double W, legend_w;    /* figure width: margins + axes + legend column */
} LinesCtx;

/* A step of 1, 2 or 5 × 10^k giving about 5 ticks over [lo, hi]. */
static double lines_nice_step(double lo, double hi) {
    double raw = (hi - lo) / 5.0;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static double lines_px(const LinesCtx *c, double x) {
    const double u = c->xlog ? log2(x) : x;
    return LINES_ML + (u - c->x0) / (c->x1 - c->x0) * LINES_AXES_W;
}
static double lines_py(const LinesCtx *c, double y) {
    return LINES_H - LINES_MB - (y - c->y0) / (c->y1 - c->y0) * (LINES_H - LINES_MT - LINES_MB);
}

static void lines_text(cairo_t *cr, const char *s, double x, double y, double ax, double ay) {
    cairo_text_extents_t t;
    cairo_text_extents(cr, s, &t);
    cairo_move_to(cr, x - ax * t.width - t.x_bearing, y - ay * t.height - t.y_bearing);
    cairo_show_text(cr, s);
}

static void lines_label(char *buf, size_t cap, double v, double step) {
    int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    if (fabs(v) < step * 1e-9) v = 0;
    snprintf(buf, cap, "%.*f", dec, v);
}

/* Marker k (cycling over 4 shapes) at (x, y). */
static void lines_marker(cairo_t *cr, int k, double x, double y) {
    const double r = 3.6;
    switch (k % 4) {
    case 0: cairo_arc(cr, x, y, r, 0, 2 * M_PI); break;
    case 1: cairo_rectangle(cr, x - r * 0.85, y - r * 0.85, 1.7 * r, 1.7 * r); break;
    case 2:
        cairo_move_to(cr, x, y - r * 1.15);
        cairo_line_to(cr, x + r, y + r * 0.75);
        cairo_line_to(cr, x - r, y + r * 0.75);
        cairo_close_path(cr);
        break;
    default:
        cairo_move_to(cr, x, y - r * 1.2);
        cairo_line_to(cr, x + r, y);
        cairo_line_to(cr, x, y + r * 1.2);
        cairo_line_to(cr, x - r, y);
        cairo_close_path(cr);
    }
    cairo_fill(cr);
}

/* Series 5..8 dashed (series k >= 4), so coinciding curves show both colours. */
static void lines_dash(cairo_t *cr, int k) {
    static const double d[4][2] = {{7, 3}, {3, 2.5}, {10, 4}, {1.5, 2.5}};
    if (k < 4) cairo_set_dash(cr, NULL, 0, 0);
    else cairo_set_dash(cr, d[(k - 4) % 4], 2, 0);
}

/* Grid, tick labels, box, axis labels and title. */
static void lines_axes(cairo_t *cr, const LinesCtx *c) {
    const double L = LINES_ML, R = LINES_ML + LINES_AXES_W, T = LINES_MT, B = LINES_H - LINES_MB;
    char buf[64];
    cairo_set_font_size(cr, 12);
    cairo_set_line_width(cr, 1);
    for (int t = 0; t < c->nxt; t++) {
        const double px = lines_px(c, c->xt[t]);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, px, T);
        cairo_line_to(cr, px, B);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        snprintf(buf, sizeof buf, "%.*f", c->xdec, c->xt[t]);
        lines_text(cr, buf, px, B + 6, 0.5, 0);
    }
    for (double y = c->yt0; y <= c->y1 + c->ystep * 1e-9; y += c->ystep) {
        const double py = lines_py(c, y);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, L, py);
        cairo_line_to(cr, R, py);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        lines_label(buf, sizeof buf, y, c->ystep);
        lines_text(cr, buf, L - 6, py, 1, 0.5);
    }
    cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
    cairo_rectangle(cr, L, T, R - L, B - T);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 13);
    if (c->xlabel) lines_text(cr, c->xlabel, (L + R) / 2, LINES_H - 10, 0.5, 1);
    if (c->ylabel) {
        cairo_save(cr);
        cairo_translate(cr, 18, (T + B) / 2);
        cairo_rotate(cr, -M_PI / 2);
        lines_text(cr, c->ylabel, 0, 0, 0.5, 0.5);
        cairo_restore(cr);
    }
    cairo_set_font_size(cr, 15);
    if (c->title) lines_text(cr, c->title, c->W / 2, 12, 0.5, 0);
}

static int lines_draw(cairo_t *cr, int fmt, void *ctx, MpErr *e) {
    (void)fmt;
    (void)e;
    const LinesCtx *c = ctx;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    const double L = LINES_ML, R = LINES_ML + LINES_AXES_W, T = LINES_MT, B = LINES_H - LINES_MB;
    lines_axes(cr, c);
    cairo_save(cr); /* series, clipped to the axes */
    cairo_rectangle(cr, L, T, R - L, B - T);
    cairo_clip(cr);
    for (int k = 0; k < c->ns; k++) {
        const MpPlotSeries *s = &c->s[k];
        int open = 0, finite = 0;
        for (int i = 0; i < s->n; i++) finite += isfinite(s->x[i]) && isfinite(s->y[i]);
        cairo_set_source_rgb(cr, s->rgb[0], s->rgb[1], s->rgb[2]);
        cairo_set_line_width(cr, finite < 40 ? 2 : 1.4);
        lines_dash(cr, k);
        for (int i = 0; i < s->n; i++) {
            if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
                open = 0;
                continue;
            }
            if (open) cairo_line_to(cr, lines_px(c, s->x[i]), lines_py(c, s->y[i]));
            else cairo_move_to(cr, lines_px(c, s->x[i]), lines_py(c, s->y[i]));
            open = 1;
        }
        cairo_stroke(cr);
        if (finite < 40)
            for (int i = 0; i < s->n; i++)
                if (isfinite(s->x[i]) && isfinite(s->y[i])) lines_marker(cr, k, lines_px(c, s->x[i]), lines_py(c, s->y[i]));
    }
    cairo_restore(cr);
    cairo_set_font_size(cr, 12); /* legend: a column right of the axes */
    for (int k = 0; k < c->ns; k++) {
        const double y = T + 10 + 20 * k, x = R + 14;
        cairo_set_source_rgb(cr, c->s[k].rgb[0], c->s[k].rgb[1], c->s[k].rgb[2]);
        cairo_set_line_width(cr, 2.5);
        lines_dash(cr, k);
        cairo_move_to(cr, x, y);
        cairo_line_to(cr, x + 26, y);
        cairo_stroke(cr);
        lines_marker(cr, k, x + 13, y);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        lines_text(cr, c->s[k].label ? c->s[k].label : "", x + 32, y, 0, 0.5);
    }
    cairo_set_dash(cr, NULL, 0, 0);
    return MP_OK;
}

/* The x axis: log2 when every finite x is a power of two and they span at least 8x (ticks at the
 * powers of two), else linear with a nice step, whole-numbered when every x is an integer. */
static void lines_xaxis(LinesCtx *c) {
    int pow2 = 1, ints = 1;
    for (int k = 0; k < c->ns; k++)
        for (int i = 0; i < c->s[k].n; i++) {
            const double x = c->s[k].x[i];
            if (!isfinite(x) || !isfinite(c->s[k].y[i])) continue;
            int ex;
            pow2 &= x > 0 && frexp(x, &ex) == 0.5;
            ints &= x == floor(x) && fabs(x) < 1e15;
        }
    c->xlog = pow2 && c->x1 >= 8 * c->x0;
    c->xint = ints;
    c->nxt = 0;
    if (c->xlog) {
        for (double v = c->x0; v <= c->x1 * (1 + 1e-12) && c->nxt < LINES_MAX_TICKS; v *= 2) c->xt[c->nxt++] = v;
        c->xdec = c->x0 >= 1 ? 0 : (int)ceil(-log10(c->x0) - 1e-9);
        c->x0 = log2(c->x0), c->x1 = log2(c->x1);
        const double pad = 0.04 * (c->x1 - c->x0);
        c->x0 -= pad, c->x1 += pad;
        return;
    }
    if (c->x1 == c->x0) c->x0 -= 0.5, c->x1 += 0.5;
    double step = lines_nice_step(c->x0, c->x1);
    if (ints && step < 1) step = 1; /* layers 1, 2, 3, 4: no tick at 1.5 */
    c->xdec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    for (double x = ceil(c->x0 / step - 1e-9) * step; x <= c->x1 + step * 1e-9 && c->nxt < LINES_MAX_TICKS; x += step)
        c->xt[c->nxt++] = fabs(x) < step * 1e-9 ? 0 : x;
    if (ints) { /* a little room so end points and their markers are not cut by the box */
        const double pad = 0.03 * (c->x1 - c->x0);
        c->x0 -= pad, c->x1 += pad;
    }
}

/* The legend column's width from the longest label (measured with the figure's font). */
static double lines_legend_width(const MpPlotSeries *s, int ns) {
    cairo_surface_t *m = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(m);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 12);
    double w = 0;
    for (int k = 0; k < ns; k++) {
        cairo_text_extents_t t;
        cairo_text_extents(cr, s[k].label ? s[k].label : "", &t);
        w = fmax(w, t.x_advance);
    }
    cairo_destroy(cr);
    cairo_surface_destroy(m);
    return ceil(14 + 32 + w + 16);
}

int mp_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const MpPlotSeries *s, int ns, MpErr *e) {
    int fmt = mp_plot_format_from_path(path);
    if (fmt < 0) return mp_err_set(e, "%s: unknown figure format (use .png, .pdf or .svg)", path);
    if (ns < 1 || ns > 8) return mp_err_set(e, "%s: 1 to 8 series, got %d", path, ns);
    LinesCtx c;
    memset(&c, 0, sizeof c);
    c.s = s, c.ns = ns, c.title = title, c.xlabel = xlabel, c.ylabel = ylabel;
    c.x0 = c.y0 = INFINITY, c.x1 = c.y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i])) {
                c.x0 = fmin(c.x0, s[k].x[i]), c.x1 = fmax(c.x1, s[k].x[i]);
                c.y0 = fmin(c.y0, s[k].y[i]), c.y1 = fmax(c.y1, s[k].y[i]);
            }
    if (!(c.x0 <= c.x1)) return mp_err_set(e, "%s: no finite points to plot", path);
    if (c.y1 == c.y0) c.y0 -= fabs(c.y0) * 0.1 + 0.5, c.y1 += fabs(c.y1) * 0.1 + 0.5;
    double pad = 0.05 * (c.y1 - c.y0);
    c.y0 -= pad, c.y1 += pad;
    lines_xaxis(&c);
    c.ystep = lines_nice_step(c.y0, c.y1);
    c.yt0 = ceil(c.y0 / c.ystep - 1e-9) * c.ystep;
    c.legend_w = lines_legend_width(s, ns);
    c.W = ceil(LINES_ML + LINES_AXES_W + c.legend_w);
    /* the PNG's record of the axes (tests read it; any PNG tool shows it) */
    char text[2048];
    int w = snprintf(text, sizeof text, "axes\t%g\t%g\t%g\t%g\t%.9g\t%.9g\t%.9g\t%.9g\t%s\nxticks", LINES_ML, LINES_MT,
                     LINES_ML + LINES_AXES_W, LINES_H - LINES_MB, c.x0, c.x1, c.y0, c.y1, c.xlog ? "log2" : "linear");
    for (int t = 0; t < c.nxt && w > 0 && (size_t)w < sizeof text - 32; t++) w += snprintf(text + w, sizeof text - (size_t)w, "\t%.9g", c.xt[t]);
    if (w > 0 && (size_t)w < sizeof text - 64)
        snprintf(text + w, sizeof text - (size_t)w, "\nlegend\t%g\t%g\t%g\t%g\n", LINES_ML + LINES_AXES_W + 14, LINES_MT,
                 c.legend_w - 14, 20.0 * ns);
    return mp_plot_surface_write_text(path, fmt, c.W, LINES_H, title ? title : "", text, lines_draw, &c, e);
}
