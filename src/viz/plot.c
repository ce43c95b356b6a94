/* plot.c — figures of positional score maps with cairo; see plot.h for the contract.
 *
 * Data flow (banners below in this order):
 *   options and presets → panel titles and stacks → preparation (checks, diagnorm, colour limits)
 *   → layout (text measured with the same fonts) → drawing (heatmap raster, annotations, ticks,
 *   colour bar, titles) → output (PNG/PDF/SVG through an atomic temp file).
 * Units: PNG pixels = PDF/SVG points; a panel's heatmap is opt->panel_px on its long side and
 * every font size scales with it (12 px tick labels at 300 px).
 * Does not: read .npy (cli/cmd_plot.c), pick layers or heads, or draw NaN cells (they stay background).
 * Run: maskpos plot --help.   Tested by: tests/test_viz.c.
 */
#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"      /* MpAtomicFile */
#include "kernels/posmap.h" /* mp_posmap_diagnorm */
#include "viz/cmap.h"       /* MpPlotCmap, mp_plot_cmap_find/eval */
#include "viz/plot.h"       /* declarations */
#include "viz/surface.h"    /* mp_plot_surface_write */

#define PLOT_FONT "DejaVu Sans"
#define PLOT_MAX_TICKS 24
static const double plot_ink[3] = {0.15, 0.15, 0.15}; /* text, ticks */

/* ================================================================ options and presets */

void mp_plot_options_default(MpPlotOptions *o) {
    memset(o, 0, sizeof *o);
    o->cmap = "rocket";
    o->vmin = o->vmax = NAN;
    o->clip_lo = o->clip_hi = NAN;
    o->annotate_digits = 3;
    o->panel_px = 300;
    o->index_base = 0; /* positions from 0, as the arrays, meta.json and the viewer (docs/outputs.md) */
    snprintf(o->xlabel, sizeof o->xlabel, "Key position");
    snprintf(o->ylabel, sizeof o->ylabel, "Query position");
}

int mp_plot_preset_apply(MpPlotOptions *o, const char *preset, MpErr *e) {
    if (!preset) return mp_err_set(e, "preset: no name given");
    /* common ground: rocket, limits from data, no clipping, no normalisation */
    int fig1 = !strcmp(preset, "fig1"), fig2 = !strcmp(preset, "fig2");
    int fig4 = !strcmp(preset, "fig4"), fig5 = !strcmp(preset, "fig5");
    if (!fig1 && !fig2 && !fig4 && !fig5)
        return mp_err_set(e, "unknown preset '%s' (known: fig1, fig2, fig4, fig5)", preset);
    o->cmap = "rocket";
    o->vmin = o->vmax = NAN;
    o->clip_lo = o->clip_hi = NAN;
    o->diagnorm = 0;
    o->annotate = 0;
    o->shared = 0;
    o->cols = 4;
    if (fig1) { /* Figure 1(d): the 3×3 closed-form layer-2 scores, values printed in the cells */
        o->annotate = 1;
        o->annotate_digits = 3;
        o->cols = 0;
        o->panel_px = 260;
    } else if (fig2) { /* Figure 2: L2 simulation, layers 1–4, colour range [0, 1] */
        o->vmin = 0;
        o->vmax = 1;
        o->shared = 1;
    } else if (fig5) { /* Figure 5: real models, the diagonal-normalised residue in vlag centred on 0,
                          limits ±max(|1st|, |99th| percentile) (as the report's Figure 5) */
        o->cmap = "vlag";
        o->diagnorm = 1;
        o->clip_lo = 1;
        o->clip_hi = 99;
    }
    /* fig4 (RoPE): raw maps with their own limits; callers add the normalised row (vlag). */
    return MP_OK;
}

/* ================================================================ panel titles and stacks */

int mp_plot_title_format(char *out, size_t cap, const char *fmt, int num, int num2, MpErr *e) {
    size_t n = 0;
    if (!cap) return mp_err_set(e, "title: no room");
    for (const char *p = fmt ? fmt : ""; *p; p++) {
        char buf[32];
        if (*p == '%') {
            p++;
            if (*p == 'd') snprintf(buf, sizeof buf, "%d", num);
            else if (*p == 'h') snprintf(buf, sizeof buf, "%d", num2);
            else if (*p == '%') snprintf(buf, sizeof buf, "%%");
            else
                return mp_err_set(e, "title '%s': only %%d (layer), %%h (head) and %%%% may follow '%%'",
                                  fmt);
        } else {
            buf[0] = *p;
            buf[1] = '\0';
        }
        size_t len = strlen(buf);
        if (n + len >= cap) return mp_err_set(e, "title '%s' is too long (at most %zu bytes)", fmt, cap - 1);
        memcpy(out + n, buf, len);
        n += len;
    }
    out[n] = '\0';
    return MP_OK;
}

int mp_plot_panels_add_stack(MpPlotPanel *panels, int *n, int cap, const double *maps, int L, int S,
                             const unsigned char *layer_mask, const char *title_fmt, int group,
                             int diagnorm, const char *cmap, MpErr *e) {
    if (!maps || L < 1 || S < 1) return mp_err_set(e, "stack: empty map stack");
    char fmt[200];
    const char *f = title_fmt ? title_fmt : "Layer %d";
    if (*f && !strstr(f, "%d")) {
        if ((size_t)snprintf(fmt, sizeof fmt, "%s %%d", f) >= sizeof fmt)
            return mp_err_set(e, "title '%s' is too long", f);
        f = fmt;
    }
    for (int l = 1; l <= L; l++) {
        if (layer_mask && !layer_mask[l]) continue;
        if (*n >= cap) return mp_err_set(e, "too many panels (at most %d)", cap);
        MpPlotPanel *p = &panels[*n];
        memset(p, 0, sizeof *p);
        p->map = maps + (size_t)(l - 1) * (size_t)S * (size_t)S;
        p->rows = p->cols = S;
        if (mp_plot_title_format(p->title, sizeof p->title, f, l, 0, e) != MP_OK) return MP_ERR;
        p->group = group;
        p->diagnorm = diagnorm;
        p->cmap = cmap;
        (*n)++;
    }
    return MP_OK;
}

/* ================================================================ preparation */

/* One panel ready to draw. */
typedef struct PlotPrep {
    const double *map; /* (rows, cols) to draw: the panel's map or `owned` */
    double *owned;     /* (rows, cols) diagonal-normalised copy, or NULL */
    MpPlotCmap cmap;
    double lo, hi;     /* colour limits, lo < hi */
} PlotPrep;

static void plot_prep_free(PlotPrep *pp, int n) {
    if (!pp) return;
    for (int k = n - 1; k >= 0; k--) free(pp[k].owned);
    free(pp);
}

static int plot_check_options(const MpPlotOptions *o, MpErr *e) {
    MpPlotCmap c;
    if (!o) return mp_err_set(e, "no options given");
    if (o->cmap && mp_plot_cmap_find(&c, o->cmap) != MP_OK)
        return mp_err_set(e, "unknown colour map '%s' (known: %s)", o->cmap, mp_plot_cmap_names());
    if (o->panel_px < 40 || o->panel_px > 4000)
        return mp_err_set(e, "panel size %d px is outside [40, 4000]", o->panel_px);
    if (o->annotate_digits < 0 || o->annotate_digits > 12)
        return mp_err_set(e, "annotation digits %d outside [0, 12]", o->annotate_digits);
    if (o->cols < 0 || o->cols > MP_PLOT_MAX_PANELS) return mp_err_set(e, "columns %d out of range", o->cols);
    if (o->index_base != 0 && o->index_base != 1)
        return mp_err_set(e, "index base %d must be 0 or 1", o->index_base);
    if (isnan(o->clip_lo) != isnan(o->clip_hi)) return mp_err_set(e, "clip: give both percentiles");
    if (!isnan(o->clip_lo) && !(o->clip_lo >= 0 && o->clip_lo < o->clip_hi && o->clip_hi <= 100))
        return mp_err_set(e, "clip percentiles %g,%g: need 0 <= P < Q <= 100", o->clip_lo, o->clip_hi);
    if (isinf(o->vmin) || isinf(o->vmax)) return mp_err_set(e, "colour limits must be finite");
    if (!isnan(o->vmin) && !isnan(o->vmax) && !(o->vmin < o->vmax))
        return mp_err_set(e, "vmin %g must be below vmax %g", o->vmin, o->vmax);
    return MP_OK;
}

static int plot_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* 1 when entry a of panel p counts for its colour limits (rows and columns from limit_skip on;
 * every entry when that leaves none). */
static int plot_in_limits(const MpPlotPanel *p, size_t a) {
    const int k = p->limit_skip > 0 && p->limit_skip < p->rows && p->limit_skip < p->cols ? p->limit_skip : 0;
    return (int)(a / (size_t)p->cols) >= k && (int)(a % (size_t)p->cols) >= k;
}

/* Limits over the finite entries of the member panels (before symmetrisation). */
static int plot_group_limits(double *lo, double *hi, const PlotPrep *pp, const MpPlotPanel *panels,
                             const int *mem, int nm, const MpPlotOptions *o, MpErr *e) {
    double mn = INFINITY, mx = -INFINITY;
    size_t total = 0;
    for (int m = 0; m < nm; m++) {
        const MpPlotPanel *p = &panels[mem[m]];
        size_t cnt = (size_t)p->rows * (size_t)p->cols;
        const double *v = pp[mem[m]].map;
        for (size_t a = 0; a < cnt; a++)
            if (isfinite(v[a]) && plot_in_limits(p, a)) {
                if (v[a] < mn) mn = v[a];
                if (v[a] > mx) mx = v[a];
                total++;
            }
    }
    if (!isnan(o->clip_lo)) {
        double *all = malloc((total ? total : 1) * sizeof *all);
        if (!all) return mp_err_set(e, "out of memory for %zu values (percentiles)", total);
        size_t w = 0;
        for (int m = 0; m < nm; m++) {
            const MpPlotPanel *p = &panels[mem[m]];
            size_t cnt = (size_t)p->rows * (size_t)p->cols;
            const double *v = pp[mem[m]].map;
            for (size_t a = 0; a < cnt; a++)
                if (isfinite(v[a]) && plot_in_limits(p, a)) all[w++] = v[a];
        }
        qsort(all, total, sizeof *all, plot_cmp_double);
        mn = mp_plot_percentile_sorted(all, total, o->clip_lo);
        mx = mp_plot_percentile_sorted(all, total, o->clip_hi);
        free(all);
    }
    *lo = isnan(o->vmin) ? mn : o->vmin;
    *hi = isnan(o->vmax) ? mx : o->vmax;
    return MP_OK;
}

static const char *plot_panel_name(char *buf, size_t cap, const MpPlotPanel *p, int k) {
    if (p->title[0]) snprintf(buf, cap, "panel %d ('%.100s')", k + 1, p->title);
    else snprintf(buf, cap, "panel %d", k + 1);
    return buf;
}

static int plot_prepare(PlotPrep **out, const MpPlotPanel *panels, int n, const MpPlotOptions *o,
                        MpErr *e) {
    *out = NULL;
    if (plot_check_options(o, e) != MP_OK) return MP_ERR;
    if (!panels || n < 1) return mp_err_set(e, "no panels to draw");
    if (n > MP_PLOT_MAX_PANELS) return mp_err_set(e, "%d panels: at most %d", n, MP_PLOT_MAX_PANELS);
    PlotPrep *pp = calloc((size_t)n, sizeof *pp);
    if (!pp) return mp_err_set(e, "out of memory");
    char name[160];
    for (int k = 0; k < n; k++) {
        const MpPlotPanel *p = &panels[k];
        size_t cnt;
        plot_panel_name(name, sizeof name, p, k);
        if (!p->map || p->rows < 1 || p->cols < 1 || p->rows > (1 << 20) || p->cols > (1 << 20) ||
            mp_size_mul((size_t)p->rows, (size_t)p->cols, &cnt) != MP_OK) {
            mp_err_set(e, "%s: bad map (%d x %d)", name, p->rows, p->cols);
            goto fail;
        }
        const char *cn = p->cmap ? p->cmap : o->cmap ? o->cmap : "rocket";
        if (mp_plot_cmap_find(&pp[k].cmap, cn) != MP_OK) {
            mp_err_set(e, "%s: unknown colour map '%s' (known: %s)", name, cn, mp_plot_cmap_names());
            goto fail;
        }
        pp[k].map = p->map;
        if (o->diagnorm || p->diagnorm) {
            if (p->rows != p->cols) {
                mp_err_set(e, "%s: diagonal normalisation needs a square map, not %d x %d", name,
                           p->rows, p->cols);
                goto fail;
            }
            pp[k].owned = malloc(cnt * sizeof(double));
            if (!pp[k].owned) {
                mp_err_set(e, "%s: out of memory", name);
                goto fail;
            }
            mp_posmap_diagnorm(pp[k].owned, p->map, p->rows);
            pp[k].map = pp[k].owned;
        }
        size_t fin = 0;
        for (size_t a = 0; a < cnt; a++) fin += isfinite(pp[k].map[a]) != 0;
        if (fin == 0) {
            mp_err_set(e, "%s: the map has no finite entries (all NaN/inf)", name);
            goto fail;
        }
    }
    /* colour limits, per panel or per group */
    int *mem = malloc((size_t)n * sizeof *mem);
    unsigned char *done = calloc((size_t)n, 1);
    if (!mem || !done) {
        free(mem);
        free(done);
        mp_err_set(e, "out of memory");
        goto fail;
    }
    for (int k = 0; k < n; k++) {
        if (done[k]) continue;
        int nm = 0;
        for (int j = k; j < n; j++)
            if (j == k || (o->shared && !done[j] && panels[j].group == panels[k].group)) mem[nm++] = j;
        double lo = 0, hi = 0;
        if (plot_group_limits(&lo, &hi, pp, panels, mem, nm, o, e) != MP_OK) {
            free(mem);
            free(done);
            goto fail;
        }
        for (int m = 0; m < nm; m++) {
            PlotPrep *q = &pp[mem[m]];
            double a = lo, b = hi;
            if (q->cmap.diverging && isnan(o->vmin) && isnan(o->vmax)) {
                double s = fmax(fabs(a), fabs(b));
                a = -s;
                b = s;
            }
            if (a == b) { /* constant map: a small range around the value, never a zero division */
                double d = a != 0 ? fabs(a) * 0.1 : 1;
                a -= d;
                b += d;
            }
            if (!(a < b)) {
                mp_err_set(e, "%s: colour limits [%g, %g] are empty (check vmin/vmax against the data)",
                           plot_panel_name(name, sizeof name, &panels[mem[m]], mem[m]), a, b);
                free(mem);
                free(done);
                goto fail;
            }
            q->lo = a;
            q->hi = b;
            done[mem[m]] = 1;
        }
    }
    free(mem);
    free(done);
    *out = pp;
    return MP_OK;
fail:
    plot_prep_free(pp, n);
    return MP_ERR;
}

int mp_plot_limits(double (*lim)[2], const MpPlotPanel *panels, int npanels, const MpPlotOptions *o,
                   MpErr *e) {
    PlotPrep *pp;
    if (plot_prepare(&pp, panels, npanels, o, e) != MP_OK) return MP_ERR;
    for (int k = 0; k < npanels; k++) {
        lim[k][0] = pp[k].lo;
        lim[k][1] = pp[k].hi;
    }
    plot_prep_free(pp, npanels);
    return MP_OK;
}

/* ================================================================ text, ticks and labels */

static void plot_font(cairo_t *cr, double size) {
    cairo_select_font_face(cr, PLOT_FONT, CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, size);
}

/* Unhinted metrics so that measuring on an image surface matches drawing on any surface. */
static void plot_font_setup(cairo_t *cr) {
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_NONE);
    cairo_set_font_options(cr, fo);
    cairo_font_options_destroy(fo);
}

static double plot_text_width(cairo_t *cr, const char *s) {
    cairo_text_extents_t t;
    cairo_text_extents(cr, s, &t);
    return t.x_advance;
}

/* Height of a digit in the current font (the box text is aligned on). */
static double plot_digit_height(cairo_t *cr) {
    cairo_text_extents_t d;
    cairo_text_extents(cr, "0", &d);
    return d.height;
}

/* Draws s anchored at (x, y): ha 0/0.5/1 = left/centre/right; va 0/0.5/1 = top/middle/bottom of
 * the digit box (so labels of one row share a baseline whatever their glyphs). */
static void plot_text(cairo_t *cr, const char *s, double x, double y, double ha, double va) {
    cairo_text_extents_t d;
    cairo_text_extents(cr, "0", &d);
    double w = plot_text_width(cr, s);
    cairo_move_to(cr, x - ha * w, y - va * d.height - d.y_bearing);
    cairo_show_text(cr, s);
}

/* Shrinks the current font until s fits in maxw. */
static void plot_fit_font(cairo_t *cr, const char *s, double size, double maxw) {
    plot_font(cr, size);
    double w = plot_text_width(cr, s);
    if (w > maxw && w > 0) plot_font(cr, fmax(size * maxw / w, 4.0));
}

/* Replaces a leading '-' with U+2212 MINUS SIGN; drops the sign of a printed zero ("-0.00"). */
static void plot_minus(char *buf, size_t cap) {
    if (buf[0] != '-') return;
    if (strspn(buf + 1, "0.") == strlen(buf + 1)) {
        memmove(buf, buf + 1, strlen(buf));
        return;
    }
    size_t len = strlen(buf);
    if (len + 3 > cap) return;
    memmove(buf + 3, buf + 1, len); /* includes the NUL */
    memcpy(buf, "\xe2\x88\x92", 3);
}

/* Ticks of one step between base and last; writes at most cap, returns how many there are. */
static int plot_pos_ticks_step(int *ticks, int cap, long long base, long long last, long long step) {
    int n = 0;
    long long first = base;
    if (step > 2) { /* multiples of the step, plus the first position if not crowded */
        first = ((base + step - 1) / step) * step;
        if (first - base >= step / 2.0 || first > last) {
            if (n < cap) ticks[n] = (int)base;
            n++;
        }
    }
    for (long long p = first; p <= last; p += step) {
        if (n < cap) ticks[n] = (int)p;
        n++;
    }
    return n;
}

/* The label of row tick `tick` (index_base-based): the caller's row label where it gave them. */
static int plot_row_label(const MpPlotOptions *o, int tick) {
    const int r = tick - o->index_base;
    return o->row_labels && r >= 0 && r < o->n_row_labels ? o->row_labels[r] : tick;
}

/* Position ticks (labels base .. base+npos-1): at most maxn, at a 1-2-2.5-5 step. */
static int plot_pos_ticks(int *ticks, int npos, int base, int maxn) {
    if (maxn < 2) maxn = 2;
    if (maxn > PLOT_MAX_TICKS) maxn = PLOT_MAX_TICKS;
    static const int mant[4] = {10, 20, 25, 50}; /* tenths */
    for (long long scale = 1; scale < 10000000000LL; scale *= 10)
        for (int m = 0; m < 4; m++) {
            if (mant[m] * scale % 10) continue; /* 2.5 is not an integer step */
            long long step = mant[m] * scale / 10;
            if (plot_pos_ticks_step(ticks, maxn, base, (long long)base + npos - 1, step) <= maxn)
                return plot_pos_ticks_step(ticks, maxn, base, (long long)base + npos - 1, step);
        }
    ticks[0] = base;
    return 1;
}

/* Value ticks in [lo, hi] at multiples of a 1-2-2.5-5 step, at most maxn; returns the count. */
static int plot_val_ticks(double *ticks, double *step_out, double lo, double hi, int maxn) {
    if (maxn < 2) maxn = 2;
    if (maxn > PLOT_MAX_TICKS) maxn = PLOT_MAX_TICKS;
    double range = hi - lo;
    double scale = pow(10, floor(log10(range)) - 2);
    static const double mant[4] = {1, 2, 2.5, 5};
    for (int it = 0; it < 60; it++, scale *= 10) {
        for (int m = 0; m < 4; m++) {
            double step = mant[m] * scale;
            double first = ceil(lo / step - 1e-9), last = floor(hi / step + 1e-9);
            double cnt = last - first + 1;
            if (cnt <= maxn) {
                int n = 0;
                for (double q = first; q <= last && n < PLOT_MAX_TICKS; q += 1) {
                    double v = q * step;
                    if (fabs(v) < step * 1e-9) v = 0;
                    ticks[n++] = v;
                }
                *step_out = step;
                return n;
            }
        }
    }
    *step_out = range;
    return 0;
}

static void plot_val_label(char *buf, size_t cap, double v, double step) {
    int d = 0;
    for (; d < 12; d++) {
        double s = step * pow(10, d);
        if (fabs(s - round(s)) < 1e-6 * s) break;
    }
    if (d > 6 || fabs(v) >= 1e6) snprintf(buf, cap, "%.3g", v);
    else snprintf(buf, cap, "%.*f", d, v);
    plot_minus(buf, cap);
}

/* ================================================================ layout */

/* Sizes that do not depend on the panel (fonts, gaps), in PNG pixels / points. */
typedef struct PlotGeom {
    double fs_tick, fs_label, fs_ptitle, fs_ftitle, fs_annot_max;
    double tick_len, pad, lw;
    double heat_x, heat_y; /* heatmap offset inside a grid cell */
    double cell_w, cell_h, top;
    double ytick_w;        /* widest y tick label */
    int maxn_pos;
} PlotGeom;

/* Colour-bar ticks that fit a bar of height h: one per four label heights. */
static int plot_cbar_maxn(const PlotGeom *g, double h) { return (int)(h / (4 * g->fs_tick)); }

static void plot_panel_box(const MpPlotPanel *p, int P, double *w, double *h) {
    int big = p->rows > p->cols ? p->rows : p->cols;
    *w = fmax(1, round((double)P * p->cols / big));
    *h = fmax(1, round((double)P * p->rows / big));
}

static int plot_layout(MpPlotLayout *lay, PlotGeom *g, cairo_t *cr, const MpPlotPanel *panels,
                       const PlotPrep *pp, int n, const MpPlotOptions *o) {
    int P = o->panel_px;
    double f = fmax(P / 300.0, 0.5);
    memset(g, 0, sizeof *g);
    g->fs_tick = fmax(12 * f, 6);
    g->fs_label = fmax(13.5 * f, 6.5);
    g->fs_ptitle = fmax(15 * f, 7);
    g->fs_ftitle = fmax(18 * f, 8);
    g->fs_annot_max = g->fs_tick * 1.9;
    g->tick_len = 3.5 * f;
    g->pad = 3.5 * f;
    g->lw = fmax(0.8 * f, 0.5);
    /* tick counts from the space a label needs */
    plot_font(cr, g->fs_tick);
    int biggest = 1;
    for (int k = 0; k < n; k++) {
        int m = panels[k].rows > panels[k].cols ? panels[k].rows : panels[k].cols;
        if (m > biggest) biggest = m;
    }
    char buf[64];
    snprintf(buf, sizeof buf, "%d", biggest - 1 + o->index_base);
    double numw = plot_text_width(cr, buf);
    g->maxn_pos = (int)(P / (numw + 1.5 * g->fs_tick));
    if (g->maxn_pos > 8) g->maxn_pos = 8;
    /* widest labels over all panels */
    double ytw = 0, cbw = 0;
    int ticks[PLOT_MAX_TICKS];
    double vt[PLOT_MAX_TICKS], step;
    for (int k = 0; k < n; k++) {
        int nt = plot_pos_ticks(ticks, panels[k].rows, o->index_base, g->maxn_pos);
        for (int t = 0; t < nt; t++) {
            snprintf(buf, sizeof buf, "%d", plot_row_label(o, ticks[t]));
            ytw = fmax(ytw, plot_text_width(cr, buf));
        }
        double bw, bh;
        plot_panel_box(&panels[k], P, &bw, &bh);
        int nv = plot_val_ticks(vt, &step, pp[k].lo, pp[k].hi, plot_cbar_maxn(g, bh));
        for (int t = 0; t < nv; t++) {
            plot_val_label(buf, sizeof buf, vt[t], step);
            cbw = fmax(cbw, plot_text_width(cr, buf));
        }
    }
    double digit = plot_digit_height(cr);
    g->ytick_w = ytw;
    int any_title = 0, any_note = 0;
    for (int k = 0; k < n; k++) any_title |= panels[k].title[0] != '\0', any_note |= panels[k].note[0] != '\0';
    double cbar_gap = round(0.05 * P), cbar_w = round(0.05 * P);
    /* the widest and tallest heatmap box: a cell as large as its panels need (P x P when square;
     * wide L x H maps such as sink_entropy.png get no blank half) */
    double pw = 1, ph = 1;
    for (int k = 0; k < n; k++) {
        double bw, bh;
        plot_panel_box(&panels[k], P, &bw, &bh);
        pw = fmax(pw, bw), ph = fmax(ph, bh);
    }
    g->heat_x = round(g->pad * 2 + g->fs_label * 1.1 + g->pad * 2 + ytw + g->pad + g->tick_len);
    g->heat_y = round((any_title ? g->fs_ptitle * 2.1 : g->pad * 3) + (any_note ? g->fs_tick * 1.6 : 0));
    g->cell_w = ceil(g->heat_x + pw + cbar_gap + cbar_w + g->tick_len + g->pad + cbw + g->pad * 4);
    g->cell_h = ceil(g->heat_y + ph + g->tick_len + g->pad + digit + g->pad * 2 + g->fs_label * 1.2 +
                     g->pad * 2);
    g->top = o->title[0] ? round(g->fs_ftitle * 2.4) : round(g->pad * 2);
    /* grid */
    int cols = o->cols > 0 ? o->cols : (n <= 4 ? n : (int)ceil(n / ceil(n / 4.0)));
    if (cols > n) cols = n;
    int rows = (n + cols - 1) / cols;
    lay->npanels = n;
    lay->grid_cols = cols;
    lay->grid_rows = rows;
    lay->width = ceil(cols * g->cell_w + g->pad * 2);
    lay->height = ceil(g->top + rows * g->cell_h);
    for (int k = 0; k < n; k++) {
        double x0 = g->pad + (k % cols) * g->cell_w, y0 = g->top + (k / cols) * g->cell_h;
        double w, h;
        plot_panel_box(&panels[k], P, &w, &h);
        lay->heat[k] = (MpPlotRect){round(x0 + g->heat_x), round(y0 + g->heat_y), w, h};
        lay->cbar[k] = (MpPlotRect){lay->heat[k].x + pw + cbar_gap, lay->heat[k].y, cbar_w, h};
    }
    return MP_OK;
}

static cairo_t *plot_measure_context(cairo_surface_t **s) {
    *s = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, 1);
    cairo_t *cr = cairo_create(*s);
    plot_font_setup(cr);
    return cr;
}

int mp_plot_layout_compute(MpPlotLayout *lay, const MpPlotPanel *panels, int npanels,
                           const MpPlotOptions *o, MpErr *e) {
    PlotPrep *pp;
    if (plot_prepare(&pp, panels, npanels, o, e) != MP_OK) return MP_ERR;
    cairo_surface_t *s;
    cairo_t *cr = plot_measure_context(&s);
    PlotGeom g;
    memset(lay, 0, sizeof *lay);
    plot_layout(lay, &g, cr, panels, pp, npanels, o);
    cairo_destroy(cr);
    cairo_surface_destroy(s);
    plot_prep_free(pp, npanels);
    return MP_OK;
}

/* ================================================================ drawing */

enum { PLOT_PNG = MP_PLOT_PNG, PLOT_PDF = MP_PLOT_PDF, PLOT_SVG = MP_PLOT_SVG };

static void plot_colour(const PlotPrep *q, double v, double rgb[3]) {
    mp_plot_cmap_eval(&q->cmap, (v - q->lo) / (q->hi - q->lo), rgb);
}

static uint32_t plot_argb(const double rgb[3]) {
    uint32_t px = 0xff000000u;
    for (int ch = 0; ch < 3; ch++) {
        long b = lround(rgb[ch] * 255);
        if (b < 0) b = 0;
        if (b > 255) b = 255;
        px |= (uint32_t)b << (16 - 8 * ch);
    }
    return px;
}

/* The heatmap of one panel: raster (the map or its area average) → an image, NaN transparent. */
static int plot_draw_heat(cairo_t *cr, const MpPlotRect *h, const MpPlotPanel *p, const PlotPrep *q,
                          int fmt, int *averaged, MpErr *e) {
    /* raster resolution: one pixel per device pixel (PNG), two per point (PDF/SVG) */
    int tw = (int)(fmt == PLOT_PNG ? h->w : 2 * h->w), th = (int)(fmt == PLOT_PNG ? h->h : 2 * h->h);
    int rw = p->cols, rh = p->rows;
    const double *src = q->map;
    double *avg = NULL;
    *averaged = 0;
    if (rw > tw || rh > th) {
        rw = rw < tw ? rw : tw;
        rh = rh < th ? rh : th;
        avg = malloc((size_t)rw * (size_t)rh * sizeof *avg);
        if (!avg) return mp_err_set(e, "out of memory for a %d x %d raster", rh, rw);
        if (mp_plot_raster_average(avg, rh, rw, q->map, p->rows, p->cols, e) != MP_OK) {
            free(avg);
            return MP_ERR;
        }
        src = avg;
        *averaged = 1;
    }
    /* PDF/SVG: each cell becomes k×k image pixels (k integer, image ≈ 2 px per point), so viewers
     * that smooth embedded images still show crisp cells, and there are no seams between cells.
     * A transparent border of B pixels keeps viewers that tile the image (SVG patterns) and
     * filter it when zoomed out from bleeding the opposite edge into the heatmap's edge. */
    enum { B = 16 };
    int k = 1;
    if (fmt != PLOT_PNG) {
        k = tw / rw < th / rh ? tw / rw : th / rh;
        if (k < 1) k = 1;
    }
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, rw * k + 2 * B, rh * k + 2 * B);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        free(avg);
        return mp_err_set(e, "cannot create a %d x %d image", rh * k, rw * k);
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    double rgb[3];
    for (int u = 0; u < rh; u++) {
        uint32_t *row = (uint32_t *)(void *)(data + ((size_t)u * k + B) * stride) + B;
        for (int v = 0; v < rw; v++) {
            double val = src[(size_t)u * rw + v];
            uint32_t px = 0; /* NaN: transparent, the background shows */
            if (isfinite(val)) {
                plot_colour(q, val, rgb);
                px = plot_argb(rgb);
            }
            for (int b = 0; b < k; b++) row[(size_t)v * k + b] = px;
        }
        for (int a = 1; a < k; a++) memcpy(data + ((size_t)u * k + B + a) * stride + 4 * B, row, (size_t)rw * k * 4);
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_translate(cr, h->x, h->y);
    cairo_scale(cr, h->w / (rw * k), h->h / (rh * k));
    cairo_set_source_surface(cr, img, -B, -B);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, 0, 0, rw * k, rh * k);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    free(avg);
    return MP_OK;
}

/* Cell values printed in the cells, dark on light colours and white on dark ones. */
static void plot_draw_annotations(cairo_t *cr, const PlotGeom *g, const MpPlotRect *h,
                                  const MpPlotPanel *p, const PlotPrep *q, int digits) {
    double cw = h->w / p->cols, ch = h->h / p->rows;
    double fs = fmin(fmin(ch * 0.3, cw * 0.3), g->fs_annot_max);
    char buf[64];
    plot_font(cr, fs);
    double widest = 0;
    for (size_t a = 0; a < (size_t)p->rows * p->cols; a++)
        if (isfinite(q->map[a])) {
            snprintf(buf, sizeof buf, "%.*f", digits, q->map[a]);
            plot_minus(buf, sizeof buf);
            widest = fmax(widest, plot_text_width(cr, buf));
        }
    if (widest > 0.85 * cw) fs *= 0.85 * cw / widest;
    if (fs < 5) return; /* cells too small to read: leave them unlabelled */
    plot_font(cr, fs);
    double rgb[3];
    for (int i = 0; i < p->rows; i++)
        for (int j = 0; j < p->cols; j++) {
            double v = q->map[(size_t)i * p->cols + j];
            if (!isfinite(v)) continue;
            plot_colour(q, v, rgb);
            double lum = 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2];
            if (lum < 0.5) cairo_set_source_rgb(cr, 1, 1, 1);
            else cairo_set_source_rgb(cr, plot_ink[0], plot_ink[1], plot_ink[2]);
            snprintf(buf, sizeof buf, "%.*f", digits, v);
            plot_minus(buf, sizeof buf);
            plot_text(cr, buf, h->x + (j + 0.5) * cw, h->y + (i + 0.5) * ch, 0.5, 0.5);
        }
}

static void plot_draw_axes(cairo_t *cr, const PlotGeom *g, const MpPlotRect *h, const MpPlotPanel *p,
                           const MpPlotOptions *o) {
    int ticks[PLOT_MAX_TICKS];
    char buf[32];
    cairo_set_source_rgb(cr, plot_ink[0], plot_ink[1], plot_ink[2]);
    cairo_set_line_width(cr, g->lw);
    plot_font(cr, g->fs_tick);
    double digit = plot_digit_height(cr);
    int nt = plot_pos_ticks(ticks, p->cols, o->index_base, g->maxn_pos);
    for (int t = 0; t < nt; t++) { /* keys along the bottom */
        double x = h->x + (ticks[t] - o->index_base + 0.5) * h->w / p->cols;
        cairo_move_to(cr, x, h->y + h->h);
        cairo_line_to(cr, x, h->y + h->h + g->tick_len);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%d", ticks[t]);
        plot_text(cr, buf, x, h->y + h->h + g->tick_len + g->pad, 0.5, 0);
    }
    nt = plot_pos_ticks(ticks, p->rows, o->index_base, g->maxn_pos);
    for (int t = 0; t < nt; t++) { /* queries down the left side, first query on top */
        double y = h->y + (ticks[t] - o->index_base + 0.5) * h->h / p->rows;
        cairo_move_to(cr, h->x - g->tick_len, y);
        cairo_line_to(cr, h->x, y);
        cairo_stroke(cr);
        snprintf(buf, sizeof buf, "%d", plot_row_label(o, ticks[t]));
        plot_text(cr, buf, h->x - g->tick_len - g->pad, y, 1, 0.5);
    }
    plot_font(cr, g->fs_label);
    plot_text(cr, o->xlabel, h->x + h->w / 2, h->y + h->h + g->tick_len + g->pad + digit + g->pad * 2, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, h->x - g->tick_len - g->pad * 3 - g->ytick_w - g->fs_label * 0.1, h->y + h->h / 2);
    cairo_rotate(cr, -M_PI / 2);
    plot_text(cr, o->ylabel, 0, 0, 0.5, 1);
    cairo_restore(cr);
}

static int plot_draw_cbar(cairo_t *cr, const PlotGeom *g, const MpPlotRect *b, const PlotPrep *q, MpErr *e) {
    enum { NB = 256 };
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, 1, NB);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return mp_err_set(e, "cannot create the colour bar image");
    }
    cairo_surface_flush(img);
    unsigned char *data = cairo_image_surface_get_data(img);
    int stride = cairo_image_surface_get_stride(img);
    double rgb[3];
    for (int y = 0; y < NB; y++) { /* top = high values */
        mp_plot_cmap_eval(&q->cmap, 1.0 - (double)y / (NB - 1), rgb);
        *(uint32_t *)(void *)(data + (size_t)y * stride) = plot_argb(rgb);
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_rectangle(cr, b->x, b->y, b->w, b->h);
    cairo_clip(cr);
    cairo_translate(cr, b->x, b->y);
    cairo_scale(cr, b->w, b->h / NB);
    cairo_set_source_surface(cr, img, 0, 0);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_GOOD);
    cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD);
    cairo_paint(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    /* ticks and labels on the right */
    double vt[PLOT_MAX_TICKS], step;
    char buf[64];
    int nv = plot_val_ticks(vt, &step, q->lo, q->hi, plot_cbar_maxn(g, b->h));
    cairo_set_source_rgb(cr, plot_ink[0], plot_ink[1], plot_ink[2]);
    cairo_set_line_width(cr, g->lw);
    plot_font(cr, g->fs_tick);
    for (int t = 0; t < nv; t++) {
        double y = b->y + b->h * (1 - (vt[t] - q->lo) / (q->hi - q->lo));
        cairo_move_to(cr, b->x + b->w, y);
        cairo_line_to(cr, b->x + b->w + g->tick_len, y);
        cairo_stroke(cr);
        plot_val_label(buf, sizeof buf, vt[t], step);
        plot_text(cr, buf, b->x + b->w + g->tick_len + g->pad, y, 0, 0.5);
    }
    return MP_OK;
}

/* An unresolved residue (noise at this N): the map washed out by a white veil (its colours no
 * longer match the bar: not to be read) and a red dashed frame. Both compress to almost nothing in
 * a PNG, where hatching lines over a noisy map cost kilobytes per line. */
static void plot_draw_unresolved(cairo_t *cr, const MpPlotRect *h, const PlotGeom *g) {
    cairo_save(cr);
    cairo_rectangle(cr, h->x, h->y, h->w, h->h);
    cairo_set_source_rgba(cr, 1, 1, 1, 0.55);
    cairo_fill(cr);
    const double d = fmax(g->lw * 2, 1.5), dash[2] = {6 * d, 4 * d};
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    cairo_set_source_rgb(cr, 0.78, 0.08, 0.08);
    cairo_set_line_width(cr, d);
    cairo_set_dash(cr, dash, 2, 0);
    cairo_rectangle(cr, h->x - d, h->y - d, h->w + 2 * d, h->h + 2 * d);
    cairo_stroke(cr);
    cairo_restore(cr);
}

static int plot_draw_figure(cairo_t *cr, const MpPlotLayout *lay, const PlotGeom *g,
                            const MpPlotPanel *panels, const PlotPrep *pp, int n,
                            const MpPlotOptions *o, int fmt, MpErr *e) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_rectangle(cr, 0, 0, lay->width, lay->height);
    cairo_fill(cr);
    for (int k = 0; k < n; k++) {
        const MpPlotRect *h = &lay->heat[k];
        int averaged;
        if (plot_draw_heat(cr, h, &panels[k], &pp[k], fmt, &averaged, e) != MP_OK) return MP_ERR;
        if (o->annotate && !averaged) plot_draw_annotations(cr, g, h, &panels[k], &pp[k], o->annotate_digits);
        plot_draw_axes(cr, g, h, &panels[k], o);
        if (plot_draw_cbar(cr, g, &lay->cbar[k], &pp[k], e) != MP_OK) return MP_ERR;
        if (panels[k].unresolved) plot_draw_unresolved(cr, h, g);
        const double note_h = panels[k].note[0] ? g->fs_tick * 1.6 : 0;
        if (panels[k].title[0]) {
            char t[sizeof panels[k].title];
            memcpy(t, panels[k].title, sizeof t);
            t[sizeof t - 1] = '\0';
            cairo_set_source_rgb(cr, plot_ink[0], plot_ink[1], plot_ink[2]);
            plot_fit_font(cr, t, g->fs_ptitle, g->cell_w - 2 * g->pad);
            plot_text(cr, t, h->x + h->w / 2, h->y - note_h - g->fs_ptitle * 0.7, 0.5, 1);
        }
        if (panels[k].note[0]) {
            char t[sizeof panels[k].note];
            memcpy(t, panels[k].note, sizeof t);
            t[sizeof t - 1] = '\0';
            if (panels[k].unresolved) cairo_set_source_rgb(cr, 0.78, 0.08, 0.08);
            else cairo_set_source_rgb(cr, plot_ink[0], plot_ink[1], plot_ink[2]);
            plot_fit_font(cr, t, g->fs_tick, g->cell_w - 2 * g->pad);
            plot_text(cr, t, h->x + h->w / 2, h->y - g->fs_tick * 0.6, 0.5, 1);
        }
    }
    if (o->title[0]) {
        char t[sizeof o->title];
        memcpy(t, o->title, sizeof t);
        t[sizeof t - 1] = '\0';
        cairo_set_source_rgb(cr, plot_ink[0], plot_ink[1], plot_ink[2]);
        plot_fit_font(cr, t, g->fs_ftitle, lay->width - 4 * g->pad);
        plot_text(cr, t, lay->width / 2, g->top * 0.5, 0.5, 0.5);
    }
    return MP_OK;
}

/* ================================================================ output */

int mp_plot_format_from_path(const char *path) {
    if (!path) return -1;
    const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return -1;
    if (!strcasecmp(dot, ".png")) return PLOT_PNG;
    if (!strcasecmp(dot, ".pdf")) return PLOT_PDF;
    if (!strcasecmp(dot, ".svg")) return PLOT_SVG;
    return -1;
}

static cairo_status_t plot_write(void *closure, const unsigned char *data, unsigned int len) {
    MpAtomicFile *af = closure;
    return fwrite(data, 1, len, af->f) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* A PNG held in memory until its tEXt chunk is inserted. */
typedef struct PlotPngBuf {
    unsigned char *b;
    size_t n, cap;
} PlotPngBuf;

static cairo_status_t plot_png_append(void *closure, const unsigned char *data, unsigned int len) {
    PlotPngBuf *p = closure;
    if (p->n + len > p->cap) {
        size_t cap = p->cap ? p->cap : 1 << 16;
        while (cap < p->n + len) cap *= 2;
        unsigned char *nb = realloc(p->b, cap);
        if (!nb) return CAIRO_STATUS_NO_MEMORY;
        p->b = nb;
        p->cap = cap;
    }
    memcpy(p->b + p->n, data, len);
    p->n += len;
    return CAIRO_STATUS_SUCCESS;
}

/* CRC-32 of PNG chunks (ISO 3309, polynomial 0xEDB88320), bit by bit: chunks here are short. */
static uint32_t plot_crc32(uint32_t c, const unsigned char *b, size_t n) {
    c = ~c;
    for (size_t i = 0; i < n; i++) {
        c ^= b[i];
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    }
    return ~c;
}

static void plot_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* Writes the PNG in p to af with a tEXt chunk (MP_PLOT_PNG_KEY, text) after the 8-byte signature
 * and the 25-byte IHDR chunk. */
static cairo_status_t plot_png_write_text(MpAtomicFile *af, const PlotPngBuf *p, const char *text) {
    const size_t head = 8 + 25, klen = strlen(MP_PLOT_PNG_KEY) + 1, tlen = strlen(text);
    if (p->n < head || memcmp(p->b + 12, "IHDR", 4) || klen + tlen > 0x7fffffff) return CAIRO_STATUS_WRITE_ERROR;
    unsigned char *ch = malloc(12 + klen + tlen);
    if (!ch) return CAIRO_STATUS_NO_MEMORY;
    plot_be32(ch, (uint32_t)(klen + tlen));
    memcpy(ch + 4, "tEXt", 4);
    memcpy(ch + 8, MP_PLOT_PNG_KEY, klen); /* keyword, NUL separator */
    memcpy(ch + 8 + klen, text, tlen);
    plot_be32(ch + 8 + klen + tlen, plot_crc32(0, ch + 4, 4 + klen + tlen));
    const int ok = fwrite(p->b, 1, head, af->f) == head && fwrite(ch, 1, 12 + klen + tlen, af->f) == 12 + klen + tlen &&
                   fwrite(p->b + head, 1, p->n - head, af->f) == p->n - head;
    free(ch);
    return ok ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

int mp_plot_surface_write(const char *path, int fmt, double width, double height, const char *title,
                          MpPlotDrawFn draw, void *ctx, MpErr *e) {
    return mp_plot_surface_write_text(path, fmt, width, height, title, NULL, draw, ctx, e);
}

int mp_plot_surface_write_text(const char *path, int fmt, double width, double height, const char *title,
                               const char *png_text, MpPlotDrawFn draw, void *ctx, MpErr *e) {
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    cairo_surface_t *surf;
    if (fmt == PLOT_PNG)
        surf = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, (int)width, (int)height);
    else if (fmt == PLOT_PDF)
        surf = cairo_pdf_surface_create_for_stream(plot_write, &af, width, height);
    else
        surf = cairo_svg_surface_create_for_stream(plot_write, &af, width, height);
    if (fmt == PLOT_PDF && cairo_surface_status(surf) == CAIRO_STATUS_SUCCESS) {
        if (title && title[0]) cairo_pdf_surface_set_metadata(surf, CAIRO_PDF_METADATA_TITLE, title);
        cairo_pdf_surface_set_metadata(surf, CAIRO_PDF_METADATA_CREATOR, "maskpos plot");
    }
    cairo_t *cr = cairo_create(surf);
    plot_font_setup(cr);
    int drew = draw(cr, fmt, ctx, e);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (drew == MP_OK && st == CAIRO_STATUS_SUCCESS && fmt == PLOT_PNG && !png_text)
        st = cairo_surface_write_to_png_stream(surf, plot_write, &af);
    else if (drew == MP_OK && st == CAIRO_STATUS_SUCCESS && fmt == PLOT_PNG) {
        PlotPngBuf pb = {0};
        st = cairo_surface_write_to_png_stream(surf, plot_png_append, &pb);
        if (st == CAIRO_STATUS_SUCCESS) st = plot_png_write_text(&af, &pb, png_text);
        free(pb.b);
    }
    cairo_surface_finish(surf);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(surf);
    cairo_surface_destroy(surf);
    if (drew != MP_OK) {
        mp_atomic_abort(&af);
        return mp_err_prefix(e, "%s", path);
    }
    if (st != CAIRO_STATUS_SUCCESS) {
        mp_atomic_abort(&af);
        return mp_err_set(e, "%s: cannot write the figure: %s", path, cairo_status_to_string(st));
    }
    return mp_atomic_commit(&af, e);
}

/* The heatmaps' tEXt: one line per panel, "title<TAB>colour map<TAB>lo<TAB>hi" (limits %.6g), in
 * panel order, then "rows<TAB>l1,l2,..." where the rows carry labels of their own; malloc'd, NULL
 * when out of memory. */
static char *plot_png_text(const MpPlotPanel *panels, const PlotPrep *pp, int n, const MpPlotOptions *o) {
    const int nl = o->row_labels ? o->n_row_labels : 0;
    size_t cap = (size_t)n * 400 + (size_t)nl * 12 + 8, w = 0;
    char *t = malloc(cap);
    if (!t) return NULL;
    t[0] = 0;
    for (int k = 0; k < n; k++) {
        char title[sizeof panels[k].title];
        snprintf(title, sizeof title, "%s", panels[k].title);
        for (char *c = title; *c; c++)
            if (*c == '\t' || *c == '\n' || (unsigned char)*c >= 0x80) *c = '?'; /* tEXt is Latin-1 */
        char note[sizeof panels[k].note];
        snprintf(note, sizeof note, "%s", panels[k].note);
        for (char *c = note; *c; c++)
            if (*c == '\t' || *c == '\n' || (unsigned char)*c >= 0x80) *c = '?';
        int m = snprintf(t + w, cap - w, "%s\t%s%s\t%.6g\t%.6g%s%s\n", title, pp[k].cmap.name, pp[k].cmap.reversed ? "_r" : "",
                         pp[k].lo, pp[k].hi, note[0] ? "\t" : "", note);
        if (m < 0 || (size_t)m >= cap - w) break;
        w += (size_t)m;
    }
    for (int r = 0; r < nl && w + 13 < cap; r++)
        w += (size_t)snprintf(t + w, cap - w, "%s%d%s", r ? "," : "rows\t", o->row_labels[r], r == nl - 1 ? "\n" : "");
    return t;
}

typedef struct PlotDrawCtx {
    const MpPlotLayout *lay;
    const PlotGeom *g;
    const MpPlotPanel *panels;
    const PlotPrep *pp;
    int npanels;
    const MpPlotOptions *o;
} PlotDrawCtx;

static int plot_draw_cb(cairo_t *cr, int fmt, void *ctx, MpErr *e) {
    const PlotDrawCtx *d = ctx;
    return plot_draw_figure(cr, d->lay, d->g, d->panels, d->pp, d->npanels, d->o, fmt, e);
}

int mp_plot_render(const char *path, const MpPlotPanel *panels, int npanels, const MpPlotOptions *o,
                   MpErr *e) {
    return mp_plot_render_ex(path, panels, npanels, o, NULL, e);
}

int mp_plot_render_ex(const char *path, const MpPlotPanel *panels, int npanels,
                      const MpPlotOptions *o, double (*lim)[2], MpErr *e) {
    if (!path || !*path) return mp_err_set(e, "no output path");
    int fmt = mp_plot_format_from_path(path);
    if (fmt < 0) return mp_err_set(e, "%s: unknown output extension (use .png, .pdf or .svg)", path);
    PlotPrep *pp;
    if (plot_prepare(&pp, panels, npanels, o, e) != MP_OK) return mp_err_prefix(e, "%s", path);
    /* layout with a measuring context (same fonts, unhinted metrics) */
    MpPlotLayout *lay = calloc(1, sizeof *lay);
    if (!lay) {
        plot_prep_free(pp, npanels);
        return mp_err_set(e, "%s: out of memory", path);
    }
    PlotGeom g;
    cairo_surface_t *ms;
    cairo_t *mcr = plot_measure_context(&ms);
    plot_layout(lay, &g, mcr, panels, pp, npanels, o);
    cairo_destroy(mcr);
    cairo_surface_destroy(ms);
    int rc = MP_ERR;
    if (lay->width > 32000 || lay->height > 32000) {
        mp_err_set(e, "%s: figure of %.0f x %.0f px is too large (fewer panels or a smaller panel size)",
                   path, lay->width, lay->height);
        goto done;
    }
    PlotDrawCtx dc = {lay, &g, panels, pp, npanels, o};
    char *text = fmt == PLOT_PNG ? plot_png_text(panels, pp, npanels, o) : NULL;
    if (fmt == PLOT_PNG && !text) {
        mp_err_set(e, "%s: out of memory", path);
        goto done;
    }
    rc = mp_plot_surface_write_text(path, fmt, lay->width, lay->height, o->title, text, plot_draw_cb, &dc, e);
    free(text);
    if (rc != MP_OK) goto done;
    if (rc == MP_OK && lim)
        for (int k = 0; k < npanels; k++) {
            lim[k][0] = pp[k].lo;
            lim[k][1] = pp[k].hi;
        }
done:
    free(lay);
    plot_prep_free(pp, npanels);
    return rc;
}

void mp_plot_release(void) {
    /* cairo first (it holds fontconfig patterns), then fontconfig itself. FcFini is looked up at
     * run time: libfontconfig is loaded as cairo's dependency but not linked by name here. */
    cairo_debug_reset_static_data();
    void (*fc_fini)(void) = NULL;
    *(void **)(&fc_fini) = dlsym(RTLD_DEFAULT, "FcFini");
    if (fc_fini) fc_fini();
}
