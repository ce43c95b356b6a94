/* lines.c — line plots (training and validation loss curves) on the shared surface writer.
 *
 * Implements: mp_plot_lines(): one axes box with "nice" ticks (1, 2, 5 × 10^k steps), light grid,
 * one polyline per series (NaN points break the line; points are drawn as dots where a series
 * has fewer than 40 finite points), a legend, axis labels and a title; PNG/PDF/SVG by extension,
 * written atomically (viz/surface.h).
 * Does not: log scales or multiple axes.
 * Tested by: tests/test_viz.c (pixels of a known line, legend colours, bad input, no partial file).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "viz/plot.h"    /* MpPlotSeries, mp_plot_lines, mp_plot_format_from_path */
#include "viz/surface.h" /* mp_plot_surface_write */

#define LINES_W 640.0
#define LINES_H 400.0
#define LINES_ML 72.0 /* margins: left, right, top, bottom */
#define LINES_MR 20.0
#define LINES_MT 42.0
#define LINES_MB 52.0

typedef struct LinesCtx {
    const MpPlotSeries *s;
    int ns;
    const char *title, *xlabel, *ylabel;
    double x0, x1, y0, y1;   /* data limits */
    double xt0, xstep, yt0, ystep; /* first tick and tick step */
} LinesCtx;

/* A step of 1, 2 or 5 × 10^k giving about 5 ticks over [lo, hi]. */
static double lines_nice_step(double lo, double hi) {
    double raw = (hi - lo) / 5.0;
    double p = pow(10.0, floor(log10(raw)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

static double lines_px(const LinesCtx *c, double x) {
    return LINES_ML + (x - c->x0) / (c->x1 - c->x0) * (LINES_W - LINES_ML - LINES_MR);
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

static int lines_draw(cairo_t *cr, int fmt, void *ctx, MpErr *e) {
    (void)fmt;
    (void)e;
    const LinesCtx *c = ctx;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    const double L = LINES_ML, R = LINES_W - LINES_MR, T = LINES_MT, B = LINES_H - LINES_MB;
    char buf[64];
    /* grid and ticks */
    cairo_set_font_size(cr, 11);
    cairo_set_line_width(cr, 1);
    for (double x = c->xt0; x <= c->x1 + c->xstep * 1e-9; x += c->xstep) {
        double px = lines_px(c, x);
        cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
        cairo_move_to(cr, px, T);
        cairo_line_to(cr, px, B);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        lines_label(buf, sizeof buf, x, c->xstep);
        lines_text(cr, buf, px, B + 6, 0.5, 0);
    }
    for (double y = c->yt0; y <= c->y1 + c->ystep * 1e-9; y += c->ystep) {
        double py = lines_py(c, y);
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
    /* labels and title */
    cairo_set_font_size(cr, 12);
    if (c->xlabel) lines_text(cr, c->xlabel, (L + R) / 2, LINES_H - 8, 0.5, 1);
    if (c->ylabel) {
        cairo_save(cr);
        cairo_translate(cr, 16, (T + B) / 2);
        cairo_rotate(cr, -M_PI / 2);
        lines_text(cr, c->ylabel, 0, 0, 0.5, 0.5);
        cairo_restore(cr);
    }
    cairo_set_font_size(cr, 14);
    if (c->title) lines_text(cr, c->title, LINES_W / 2, 12, 0.5, 0);
    /* series, clipped to the axes */
    cairo_save(cr);
    cairo_rectangle(cr, L, T, R - L, B - T);
    cairo_clip(cr);
    cairo_set_line_width(cr, 2);
    for (int k = 0; k < c->ns; k++) {
        const MpPlotSeries *s = &c->s[k];
        cairo_set_source_rgb(cr, s->rgb[0], s->rgb[1], s->rgb[2]);
        int open = 0, finite = 0;
        for (int i = 0; i < s->n; i++) {
            if (!isfinite(s->x[i]) || !isfinite(s->y[i])) {
                open = 0;
                continue;
            }
            finite++;
            if (open) cairo_line_to(cr, lines_px(c, s->x[i]), lines_py(c, s->y[i]));
            else cairo_move_to(cr, lines_px(c, s->x[i]), lines_py(c, s->y[i]));
            open = 1;
        }
        cairo_stroke(cr);
        if (finite < 40)
            for (int i = 0; i < s->n; i++)
                if (isfinite(s->x[i]) && isfinite(s->y[i])) {
                    cairo_arc(cr, lines_px(c, s->x[i]), lines_py(c, s->y[i]), 3, 0, 2 * M_PI);
                    cairo_fill(cr);
                }
    }
    cairo_restore(cr);
    /* legend, top right inside the axes */
    cairo_set_font_size(cr, 11);
    for (int k = 0; k < c->ns; k++) {
        double y = T + 14 + 18 * k;
        cairo_set_source_rgb(cr, c->s[k].rgb[0], c->s[k].rgb[1], c->s[k].rgb[2]);
        cairo_set_line_width(cr, 2.5);
        cairo_move_to(cr, R - 150, y);
        cairo_line_to(cr, R - 126, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.15, 0.15, 0.15);
        lines_text(cr, c->s[k].label ? c->s[k].label : "", R - 120, y, 0, 0.5);
    }
    return MP_OK;
}

int mp_plot_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                  const MpPlotSeries *s, int ns, MpErr *e) {
    int fmt = mp_plot_format_from_path(path);
    if (fmt < 0) return mp_err_set(e, "%s: unknown figure format (use .png, .pdf or .svg)", path);
    if (ns < 1 || ns > 8) return mp_err_set(e, "%s: 1 to 8 series, got %d", path, ns);
    LinesCtx c = {s, ns, title, xlabel, ylabel, INFINITY, -INFINITY, INFINITY, -INFINITY, 0, 0, 0, 0};
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i])) {
                c.x0 = fmin(c.x0, s[k].x[i]), c.x1 = fmax(c.x1, s[k].x[i]);
                c.y0 = fmin(c.y0, s[k].y[i]), c.y1 = fmax(c.y1, s[k].y[i]);
            }
    if (!(c.x0 <= c.x1)) return mp_err_set(e, "%s: no finite points to plot", path);
    if (c.x1 == c.x0) c.x0 -= 0.5, c.x1 += 0.5;
    if (c.y1 == c.y0) c.y0 -= fabs(c.y0) * 0.1 + 0.5, c.y1 += fabs(c.y1) * 0.1 + 0.5;
    double pad = 0.05 * (c.y1 - c.y0);
    c.y0 -= pad, c.y1 += pad;
    c.xstep = lines_nice_step(c.x0, c.x1);
    c.ystep = lines_nice_step(c.y0, c.y1);
    c.xt0 = ceil(c.x0 / c.xstep - 1e-9) * c.xstep;
    c.yt0 = ceil(c.y0 / c.ystep - 1e-9) * c.ystep;
    return mp_plot_surface_write(path, fmt, LINES_W, LINES_H, title ? title : "", lines_draw, &c, e);
}
