/* test_viz.c — figures (src/viz, src/cli/cmd_plot.c): colours read back from rendered PNGs, NaN cells
 * as background, constant maps, area averaging, colour limits, PDF/SVG validity, atomic output,
 * and `maskpos plot` bad-input handling.
 *
 * Independence: expected colours are the published anchor bytes written out below as literals (and
 * midpoints computed here by hand), never values from the drawing code; PNGs are decoded by cairo's
 * PNG reader, PDFs checked with poppler's pdfinfo/pdftoppm, SVGs parsed by Debian's python3 XML
 * parser. Run: make test (or build/tests/test_viz).
 */
#include "test_png_util.h"

#include <cairo.h>
#include <sys/stat.h>

#include "core/npy.h"
#include "core/util.h"
#include "viz/cmap.h"
#include "viz/plot.h"
#include "viz/report.h"

/* ---------------------------------------------------------------- helpers */

static Rgb hex_rgb(unsigned v) { return (Rgb){(int)(v >> 16) & 255, (int)(v >> 8) & 255, (int)v & 255}; }

static void expect_rgb(Rgb got, Rgb want, int tol, const char *what) {
    if (rgb_dist(got, want) > tol)
        fail_msg("%s: got (%d,%d,%d), want (%d,%d,%d) within %d", what, got.r, got.g, got.b, want.r, want.g,
                 want.b, tol);
}

/* Centre pixel of cell (i, j) of panel k. */
static Rgb cell_pixel(cairo_surface_t *s, const MpPlotLayout *lay, int k, int rows, int cols, int i, int j) {
    const MpPlotRect *h = &lay->heat[k];
    int x = (int)floor(h->x + (j + 0.5) * h->w / cols), y = (int)floor(h->y + (i + 0.5) * h->h / rows);
    return png_pixel(s, x, y);
}

static MpPlotPanel panel_of(const double *map, int rows, int cols, const char *title) {
    MpPlotPanel p;
    memset(&p, 0, sizeof p);
    p.map = map;
    p.rows = rows;
    p.cols = cols;
    snprintf(p.title, sizeof p.title, "%s", title);
    return p;
}

static const Rgb white = {255, 255, 255};

/* ---------------------------------------------------------------- colour maps */

/* rocket anchors (entries 0, 17, ..., 255 of the published table) at t = k/15, as literals. */
static const unsigned rocket_hex[16] = {0x03051a, 0x1a102a, 0x33183c, 0x4c1d4b, 0x681f55, 0x841e5a,
                                        0xa11a5b, 0xbd1655, 0xd62449, 0xe83f3f, 0xf06043, 0xf47f58,
                                        0xf69c73, 0xf6b893, 0xf8d1b8, 0xfaebdd};

static void test_cmap_anchors(void **state) {
    (void)state;
    MpPlotCmap c;
    assert_int_equal(mp_plot_cmap_find(&c, "rocket"), MP_OK);
    for (int k = 0; k < 16; k++) {
        double rgb[3];
        mp_plot_cmap_eval(&c, k / 15.0, rgb);
        Rgb got = {(int)lround(rgb[0] * 255), (int)lround(rgb[1] * 255), (int)lround(rgb[2] * 255)};
        expect_rgb(got, hex_rgb(rocket_hex[k]), 0, "rocket anchor");
    }
    /* seaborn's 6-colour rocket palette samples the map at j/7: our interpolation lands within 2/255 */
    static const unsigned six[6] = {0x35193e, 0x701f57, 0xad1759, 0xe13342, 0xf37651, 0xf6b48f};
    for (int j = 0; j < 6; j++) {
        double rgb[3];
        mp_plot_cmap_eval(&c, (j + 1) / 7.0, rgb);
        Rgb got = {(int)lround(rgb[0] * 255), (int)lround(rgb[1] * 255), (int)lround(rgb[2] * 255)};
        expect_rgb(got, hex_rgb(six[j]), 3, "rocket palette sample");
    }
    assert_int_equal(mp_plot_cmap_find(&c, "ROCKET_r"), MP_OK);
    double rgb[3];
    mp_plot_cmap_eval(&c, 0, rgb); /* reversed: t = 0 is the light end */
    assert_true(fabs(rgb[0] - 0xfa / 255.0) < 1e-12);
    assert_int_equal(mp_plot_cmap_find(&c, "vlag"), MP_OK);
    assert_true(c.diverging);
    mp_plot_cmap_eval(&c, 0.5, rgb);
    assert_true(fabs(rgb[0] - 0xfa / 255.0) < 1e-12 && fabs(rgb[2] - 0xf5 / 255.0) < 1e-12);
    assert_int_equal(mp_plot_cmap_find(&c, "jet"), MP_ERR);
    assert_int_equal(mp_plot_cmap_find(&c, NULL), MP_ERR);
}

/* ---------------------------------------------------------------- PNG read-back */

static void test_png_cell_colours_and_nan(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/cells.png", d);
    /* lower triangle at anchors t = 0, 5/15, 15/15, 10/15; NaN above the diagonal */
    double map[9] = {0, NAN, NAN, 1.0 / 3, 1, NAN, 1, 0, 2.0 / 3};
    MpPlotPanel p = panel_of(map, 3, 3, "Layer 2");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    o.vmin = 0;
    o.vmax = 1;
    snprintf(o.title, sizeof o.title, "cells");
    MpErr e;
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_OK);
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, &p, 1, &o, &e), MP_OK);
    cairo_surface_t *s = png_load(path);
    assert_int_equal(cairo_image_surface_get_width(s), (int)lay.width);
    assert_int_equal(cairo_image_surface_get_height(s), (int)lay.height);
    expect_rgb(cell_pixel(s, &lay, 0, 3, 3, 0, 0), hex_rgb(rocket_hex[0]), 0, "cell (1,1) = 0");
    expect_rgb(cell_pixel(s, &lay, 0, 3, 3, 1, 0), hex_rgb(rocket_hex[5]), 0, "cell (2,1) = 1/3");
    expect_rgb(cell_pixel(s, &lay, 0, 3, 3, 1, 1), hex_rgb(rocket_hex[15]), 0, "cell (2,2) = 1");
    expect_rgb(cell_pixel(s, &lay, 0, 3, 3, 2, 1), hex_rgb(rocket_hex[0]), 0, "cell (3,2) = 0");
    expect_rgb(cell_pixel(s, &lay, 0, 3, 3, 2, 2), hex_rgb(rocket_hex[10]), 0, "cell (3,3) = 2/3");
    /* NaN cells: blank background, every pixel of the cell */
    const MpPlotRect *h = &lay.heat[0];
    for (int y = (int)(h->y + 2); y < (int)(h->y + h->h / 3 - 2); y++)
        for (int x = (int)(h->x + h->w / 3 + 2); x < (int)(h->x + h->w - 2); x++)
            expect_rgb(png_pixel(s, x, y), white, 0, "NaN cell");
    cairo_surface_destroy(s);

    /* diverging map: limits symmetric about 0 from the data (max |v| = 2) */
    double div[4] = {-2, 0, 1, NAN};
    MpPlotPanel q = panel_of(div, 2, 2, "residue");
    mp_plot_options_default(&o);
    o.cmap = "vlag";
    snprintf(path, sizeof path, "%s/div.png", d);
    assert_int_equal(mp_plot_render(path, &q, 1, &o, &e), MP_OK);
    assert_int_equal(mp_plot_layout_compute(&lay, &q, 1, &o, &e), MP_OK);
    s = png_load(path);
    expect_rgb(cell_pixel(s, &lay, 0, 2, 2, 0, 0), hex_rgb(0x2369bd), 0, "vlag -2 = low end");
    expect_rgb(cell_pixel(s, &lay, 0, 2, 2, 0, 1), hex_rgb(0xfaf5f5), 0, "vlag 0 = centre");
    expect_rgb(cell_pixel(s, &lay, 0, 2, 2, 1, 0), hex_rgb(0xd49896), 0, "vlag 1 = t 0.75");
    expect_rgb(cell_pixel(s, &lay, 0, 2, 2, 1, 1), white, 0, "vlag NaN");
    cairo_surface_destroy(s);
}

static void test_constant_map(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/const.png", d);
    double map[16];
    for (int i = 0; i < 16; i++) map[i] = 5;
    MpPlotPanel p = panel_of(map, 4, 4, "constant");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    MpErr e;
    double lim[1][2];
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(lim[0][0] < 5 && lim[0][1] > 5 && isfinite(lim[0][0]) && isfinite(lim[0][1]));
    assert_true(fabs((lim[0][0] + lim[0][1]) / 2 - 5) < 1e-12);
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_OK);
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, &p, 1, &o, &e), MP_OK);
    cairo_surface_t *s = png_load(path);
    /* the value sits mid-range: halfway between rocket anchors 7 and 8, computed here by hand */
    Rgb a = hex_rgb(rocket_hex[7]), b = hex_rgb(rocket_hex[8]);
    Rgb mid = {(a.r + b.r + 1) / 2, (a.g + b.g + 1) / 2, (a.b + b.b + 1) / 2};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) expect_rgb(cell_pixel(s, &lay, 0, 4, 4, i, j), mid, 1, "constant cell");
    cairo_surface_destroy(s);
    /* a constant zero map on a diverging map */
    for (int i = 0; i < 16; i++) map[i] = 0;
    o.cmap = "RdBu";
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(lim[0][0] < 0 && lim[0][1] > 0);
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_OK);
}

static int rects_overlap(const MpPlotRect *a, const MpPlotRect *b) {
    return a->x < b->x + b->w && b->x < a->x + a->w && a->y < b->y + b->h && b->y < a->y + a->h;
}

static void test_grid_and_nonsquare(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/grid.png", d);
    /* a 2×5 map (t = 0, 1/3, 2/3, 1, NaN | 1, 2/3, 1/3, 0, NaN) and four 3×3 maps, 2 per row */
    double wide[10] = {0, 1.0 / 3, 2.0 / 3, 1, NAN, 1, 2.0 / 3, 1.0 / 3, 0, NAN};
    double sq[9] = {0, NAN, NAN, 0.5, 1, NAN, 0.25, 0.75, 1};
    MpPlotPanel ps[5] = {panel_of(wide, 2, 5, "wide"), panel_of(sq, 3, 3, "a"), panel_of(sq, 3, 3, "b"),
                         panel_of(sq, 3, 3, "c"), panel_of(sq, 3, 3, "d")};
    MpPlotOptions o;
    mp_plot_options_default(&o);
    o.vmin = 0;
    o.vmax = 1;
    o.cols = 2;
    o.panel_px = 200;
    MpErr e;
    assert_int_equal(mp_plot_render(path, ps, 5, &o, &e), MP_OK);
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, ps, 5, &o, &e), MP_OK);
    assert_int_equal(lay.grid_cols, 2);
    assert_int_equal(lay.grid_rows, 3);
    /* the wide map keeps square cells: 200 × 80 */
    assert_true(fabs(lay.heat[0].w - 200) < 1e-9 && fabs(lay.heat[0].h - 80) < 1e-9);
    for (int k = 0; k < 5; k++) {
        assert_true(lay.heat[k].x >= 0 && lay.heat[k].y >= 0);
        assert_true(lay.cbar[k].x + lay.cbar[k].w <= lay.width && lay.heat[k].y + lay.heat[k].h <= lay.height);
        assert_false(rects_overlap(&lay.heat[k], &lay.cbar[k]));
        for (int j = 0; j < k; j++) {
            assert_false(rects_overlap(&lay.heat[k], &lay.heat[j]));
            assert_false(rects_overlap(&lay.cbar[k], &lay.heat[j]));
        }
    }
    assert_true(lay.heat[2].y > lay.heat[0].y && lay.heat[1].x > lay.heat[0].x); /* row-major order */
    cairo_surface_t *s = png_load(path);
    static const int anchor[5] = {0, 5, 10, 15, -1};
    for (int j = 0; j < 5; j++) {
        Rgb want = anchor[j] < 0 ? white : hex_rgb(rocket_hex[anchor[j]]);
        expect_rgb(cell_pixel(s, &lay, 0, 2, 5, 0, j), want, 0, "wide map, row 1");
        want = anchor[j] < 0 ? white : hex_rgb(rocket_hex[15 - anchor[j]]);
        expect_rgb(cell_pixel(s, &lay, 0, 2, 5, 1, j), want, 0, "wide map, row 2");
    }
    expect_rgb(cell_pixel(s, &lay, 4, 3, 3, 2, 2), hex_rgb(rocket_hex[15]), 0, "last panel");
    cairo_surface_destroy(s);
}

/* ---------------------------------------------------------------- area averaging */

static void test_raster_average(void **state) {
    (void)state;
    MpErr e;
    /* exact block means, a NaN block, and a partly observed block */
    double m[16] = {1, 2, NAN, NAN, 3, 4, NAN, NAN, 5, 5, 7, NAN, 5, 5, NAN, NAN};
    double out[4];
    assert_int_equal(mp_plot_raster_average(out, 2, 2, m, 4, 4, &e), MP_OK);
    assert_true(fabs(out[0] - 2.5) < 1e-12);
    assert_true(isnan(out[1]));
    assert_true(fabs(out[2] - 5) < 1e-12);
    assert_true(fabs(out[3] - 7) < 1e-12); /* 1 of 4 observed: drawn, with the observed value */
    /* a 1024² checkerboard of 0/1 into 300² pixels: ≈ 0.5 everywhere, not 0/1 stripes */
    enum { N = 1024, P = 300 };
    double *cb = malloc((size_t)N * N * sizeof *cb), *r = malloc((size_t)P * P * sizeof *r);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) cb[(size_t)i * N + j] = (i + j) % 2;
    assert_int_equal(mp_plot_raster_average(r, P, P, cb, N, N, &e), MP_OK);
    double worst = 0;
    for (int a = 0; a < P * P; a++) worst = fmax(worst, fabs(r[a] - 0.5));
    /* bound: one unbalanced cell per footprint of (1024/300)² cells → ≤ 0.5/11.6 = 0.043 */
    assert_true(worst < 0.045);
    free(r);
    free(cb);
}

static void test_large_map_png_is_averaged(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/checker.png", d);
    enum { N = 1024 };
    double *cb = malloc((size_t)N * N * sizeof *cb);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) cb[(size_t)i * N + j] = (i + j) % 2;
    MpPlotPanel p = panel_of(cb, N, N, "checkerboard");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    MpErr e;
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_OK);
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, &p, 1, &o, &e), MP_OK);
    assert_true(lay.heat[0].w <= 300 && lay.heat[0].w >= 299);
    cairo_surface_t *s = png_load(path);
    /* every heatmap pixel near the mid colour; point sampling would give the two end colours */
    Rgb a = hex_rgb(rocket_hex[7]), b = hex_rgb(rocket_hex[8]);
    Rgb mid = {(a.r + b.r + 1) / 2, (a.g + b.g + 1) / 2, (a.b + b.b + 1) / 2};
    int worst = 0;
    const MpPlotRect *h = &lay.heat[0];
    for (int y = (int)h->y; y < (int)(h->y + h->h); y++)
        for (int x = (int)h->x; x < (int)(h->x + h->w); x++) {
            int dd = rgb_dist(png_pixel(s, x, y), mid);
            if (dd > worst) worst = dd;
        }
    /* ±0.043 in value moves rocket by at most ~25/255 per channel near the middle */
    if (worst > 30) fail_msg("checkerboard pixel %d/255 away from the mid colour (aliasing?)", worst);
    cairo_surface_destroy(s);
    free(cb);
}

/* ---------------------------------------------------------------- limits, diagnorm, titles */

static void test_limits_clip_shared_diverging(void **state) {
    (void)state;
    MpErr e;
    MpPlotOptions o;
    double v[121];
    for (int i = 0; i < 121; i++) v[i] = i < 101 ? i : NAN; /* 0..100 and NaN */
    MpPlotPanel p = panel_of(v, 11, 11, "ramp");
    mp_plot_options_default(&o);
    o.clip_lo = 1;
    o.clip_hi = 99;
    double lim[3][2];
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(fabs(lim[0][0] - 1) < 1e-12 && fabs(lim[0][1] - 99) < 1e-12);
    o.clip_lo = 2.5; /* numpy: percentile(0..100, 2.5) = 2.5 */
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(fabs(lim[0][0] - 2.5) < 1e-12);
    /* shared per group */
    double a[4] = {0, 1, 0.5, NAN}, b[4] = {0, 3, 1, NAN}, c[4] = {-1, 10, 2, 2};
    MpPlotPanel ps[3] = {panel_of(a, 2, 2, "a"), panel_of(b, 2, 2, "b"), panel_of(c, 2, 2, "c")};
    ps[2].group = 1;
    mp_plot_options_default(&o);
    o.shared = 1;
    assert_int_equal(mp_plot_limits(lim, ps, 3, &o, &e), MP_OK);
    assert_true(lim[0][0] == 0 && lim[0][1] == 3 && lim[1][0] == 0 && lim[1][1] == 3);
    assert_true(lim[2][0] == -1 && lim[2][1] == 10);
    o.shared = 0;
    assert_int_equal(mp_plot_limits(lim, ps, 3, &o, &e), MP_OK);
    assert_true(lim[0][1] == 1 && lim[1][1] == 3);
    /* diverging: symmetric about 0 unless limits are given */
    ps[2].cmap = "vlag";
    assert_int_equal(mp_plot_limits(lim, ps, 3, &o, &e), MP_OK);
    assert_true(lim[2][0] == -10 && lim[2][1] == 10);
    o.vmin = -1;
    o.vmax = 2;
    assert_int_equal(mp_plot_limits(lim, ps, 3, &o, &e), MP_OK);
    assert_true(lim[2][0] == -1 && lim[2][1] == 2);
    /* bad options */
    o.vmin = 3;
    assert_int_equal(mp_plot_limits(lim, ps, 3, &o, &e), MP_ERR);
    mp_plot_options_default(&o);
    o.clip_lo = 50;
    o.clip_hi = 10;
    assert_int_equal(mp_plot_limits(lim, ps, 3, &o, &e), MP_ERR);
}

static void test_diagnorm_limits(void **state) {
    (void)state;
    MpErr e;
    /* by hand: diagonals {1,3,6} mean 10/3 → −7/3, −1/3, 8/3; {2,5} mean 3.5 → ∓1.5; {4} → 0 */
    double m[9] = {1, NAN, NAN, 2, 3, NAN, 4, 5, 6};
    MpPlotPanel p = panel_of(m, 3, 3, "x");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    double lim[1][2];
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(lim[0][0] == 1 && lim[0][1] == 6);
    o.diagnorm = 1;
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(fabs(lim[0][0] + 7.0 / 3) < 1e-12 && fabs(lim[0][1] - 8.0 / 3) < 1e-12);
    o.diagnorm = 0;
    p.diagnorm = 1; /* per panel, same effect */
    assert_int_equal(mp_plot_limits(lim, &p, 1, &o, &e), MP_OK);
    assert_true(fabs(lim[0][0] + 7.0 / 3) < 1e-12);
    /* a purely relative (Toeplitz) map normalises to exactly 0: a constant, no division by zero */
    double t[16];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) t[i * 4 + j] = j <= i ? 0.3 * (i - j) + 1 : NAN;
    MpPlotPanel q = panel_of(t, 4, 4, "relative");
    q.diagnorm = 1;
    q.cmap = "vlag";
    assert_int_equal(mp_plot_limits(lim, &q, 1, &o, &e), MP_OK);
    assert_true(lim[0][0] == -1 && lim[0][1] == 1);
    /* diagnorm needs a square map */
    double r[6] = {1, 2, 3, 4, 5, 6};
    MpPlotPanel rr = panel_of(r, 2, 3, "rect");
    rr.diagnorm = 1;
    assert_int_equal(mp_plot_limits(lim, &rr, 1, &o, &e), MP_ERR);
}

static void test_titles_and_stacks(void **state) {
    (void)state;
    MpErr e;
    char t[32];
    assert_int_equal(mp_plot_title_format(t, sizeof t, "Llama-3, Layer %d", 2, 0, &e), MP_OK);
    assert_string_equal(t, "Llama-3, Layer 2");
    assert_int_equal(mp_plot_title_format(t, sizeof t, "L%d H%h 100%%", 3, 7, &e), MP_OK);
    assert_string_equal(t, "L3 H7 100%");
    assert_int_equal(mp_plot_title_format(t, sizeof t, "bad %s", 1, 0, &e), MP_ERR);
    assert_int_equal(mp_plot_title_format(t, sizeof t, "trailing %", 1, 0, &e), MP_ERR);
    assert_int_equal(mp_plot_title_format(t, 8, "Layer %d", 123, 0, &e), MP_ERR);
    double maps[4 * 9];
    for (int i = 0; i < 36; i++) maps[i] = i;
    MpPlotPanel ps[8];
    int n = 0;
    unsigned char mask[5] = {0, 0, 1, 0, 1};
    assert_int_equal(mp_plot_panels_add_stack(ps, &n, 8, maps, 4, 3, mask, "Layer 3, α=0.2", 1, 1, "vlag", &e),
                     MP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(ps[0].title, "Layer 3, α=0.2 2");
    assert_true(ps[1].map == maps + 27 && ps[1].group == 1 && ps[1].diagnorm == 1);
    assert_int_equal(mp_plot_panels_add_stack(ps, &n, 3, maps, 4, 3, NULL, NULL, 0, 0, NULL, &e), MP_ERR);
    MpPlotOptions o;
    mp_plot_options_default(&o);
    assert_int_equal(o.index_base, 0); /* positions from 0, as arrays, meta.json and the viewer (docs/outputs.md) */
    assert_int_equal(mp_plot_preset_apply(&o, "fig5", &e), MP_OK);
    assert_true(o.diagnorm == 1 && o.clip_lo == 1 && o.clip_hi == 99 && !strcmp(o.cmap, "vlag"));
    assert_int_equal(mp_plot_preset_apply(&o, "fig2", &e), MP_OK);
    assert_true(o.vmin == 0 && o.vmax == 1 && o.diagnorm == 0 && isnan(o.clip_lo));
    assert_int_equal(mp_plot_preset_apply(&o, "fig3", &e), MP_ERR);
    assert_non_null(strstr(e.msg, "fig3"));
}

static void test_annotations_drawn(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    double map[9] = {1, NAN, NAN, 0.154, 1, NAN, 0.132, 0.151, 1};
    MpPlotPanel p = panel_of(map, 3, 3, "Layer 2");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    MpErr e;
    int changed[2];
    for (int ann = 0; ann < 2; ann++) {
        assert_int_equal(mp_plot_preset_apply(&o, "fig1", &e), MP_OK);
        o.annotate = ann;
        snprintf(path, sizeof path, "%s/ann%d.png", d, ann);
        assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_OK);
        MpPlotLayout lay;
        assert_int_equal(mp_plot_layout_compute(&lay, &p, 1, &o, &e), MP_OK);
        cairo_surface_t *s = png_load(path);
        /* cell (2,1) = 0.154 is dark: count light (text) pixels inside it */
        const MpPlotRect *h = &lay.heat[0];
        Rgb fill = cell_pixel(s, &lay, 0, 3, 3, 1, 0);
        (void)fill;
        changed[ann] = 0;
        for (int y = (int)(h->y + h->h / 3 + 3); y < (int)(h->y + 2 * h->h / 3 - 3); y++)
            for (int x = (int)(h->x + 3); x < (int)(h->x + h->w / 3 - 3); x++) {
                Rgb q = png_pixel(s, x, y);
                if (q.r + q.g + q.b > 600) changed[ann]++; /* white text on a dark cell */
            }
        cairo_surface_destroy(s);
    }
    assert_int_equal(changed[0], 0);
    assert_true(changed[1] > 30);
}

/* ---------------------------------------------------------------- PDF, SVG, errors, atomicity */

static void test_pdf_and_svg_valid(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char pdf[256], svg[256], cmd[1024], out[4096];
    snprintf(pdf, sizeof pdf, "%s/fig.pdf", d);
    snprintf(svg, sizeof svg, "%s/fig.svg", d);
    double map[9] = {0, NAN, NAN, 1.0 / 3, 1, NAN, 1, 0, 2.0 / 3};
    MpPlotPanel ps[2] = {panel_of(map, 3, 3, "Layer 1"), panel_of(map, 3, 3, "Layer 2")};
    MpPlotOptions o;
    mp_plot_options_default(&o);
    o.vmin = 0;
    o.vmax = 1;
    snprintf(o.title, sizeof o.title, "PDF and SVG");
    MpErr e;
    assert_int_equal(mp_plot_render(pdf, ps, 2, &o, &e), MP_OK);
    assert_int_equal(mp_plot_render(svg, ps, 2, &o, &e), MP_OK);
    /* pdfinfo accepts it: one page of the layout's size */
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, ps, 2, &o, &e), MP_OK);
    snprintf(cmd, sizeof cmd, "pdfinfo '%s' 2>&1", pdf);
    FILE *f = popen(cmd, "r");
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    assert_int_equal(pclose(f), 0);
    assert_non_null(strstr(out, "Pages:           1"));
    char want[64];
    snprintf(want, sizeof want, "Page size:       %.0f x %.0f pts", lay.width, lay.height);
    if (!strstr(out, want)) fail_msg("pdfinfo: no '%s' in:\n%s", want, out);
    /* rasterised by poppler at 72 dpi (1 pt = 1 px): the cells carry their colours */
    snprintf(cmd, sizeof cmd, "pdftoppm -r 72 -png -singlefile '%s' '%s/pdfpage'", pdf, d);
    assert_int_equal(system(cmd), 0);
    char png[256];
    snprintf(png, sizeof png, "%s/pdfpage.png", d);
    cairo_surface_t *s = png_load(png);
    expect_rgb(cell_pixel(s, &lay, 1, 3, 3, 1, 0), hex_rgb(rocket_hex[5]), 2, "PDF cell = 1/3");
    expect_rgb(cell_pixel(s, &lay, 1, 3, 3, 0, 2), white, 0, "PDF NaN cell");
    cairo_surface_destroy(s);
    /* the SVG is well-formed XML with an <svg> root (Debian's python3 parser) */
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c \"import sys, xml.dom.minidom as m; "
             "r = m.parse(sys.argv[1]).documentElement; sys.exit(0 if r.tagName == 'svg' else 3)\" '%s'",
             svg);
    assert_int_equal(system(cmd), 0);
}

static void test_render_errors_leave_no_file(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    MpErr e;
    double ok[4] = {1, 2, 3, 4}, nan4[4] = {NAN, NAN, NAN, NAN};
    MpPlotPanel p = panel_of(ok, 2, 2, "ok"), bad = panel_of(nan4, 2, 2, "all NaN");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    /* unknown extension */
    snprintf(path, sizeof path, "%s/fig.jpg", d);
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_ERR);
    assert_non_null(strstr(e.msg, path));
    assert_false(mp_file_exists(path));
    /* all-NaN map: an error naming the output, and a previous file stays untouched */
    snprintf(path, sizeof path, "%s/fig.png", d);
    mp_test_write_file(path, "old", 3);
    assert_int_equal(mp_plot_render(path, &bad, 1, &o, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "no finite entries"));
    assert_non_null(strstr(e.msg, path));
    FILE *f = fopen(path, "rb");
    char buf[8] = {0};
    assert_int_equal(fread(buf, 1, sizeof buf, f), 3);
    fclose(f);
    assert_string_equal(buf, "old");
    /* unknown colour map, bad panel, unwritable directory */
    o.cmap = "nope";
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "nope"));
    mp_plot_options_default(&o);
    p.cmap = "also-nope";
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_ERR);
    p.cmap = NULL;
    p.rows = 0;
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_ERR);
    p.rows = 2;
    snprintf(path, sizeof path, "%s/no/such/dir/fig.svg", d);
    assert_int_equal(mp_plot_render(path, &p, 1, &o, &e), MP_ERR);
    /* no temp files left anywhere in the directory */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A '%s' | grep -q tmp", d);
    assert_int_not_equal(system(cmd), 0);
}

/* ---------------------------------------------------------------- the CLI */

static void write_npy_f32(const char *path, const double *v, int ndim, const int64_t *shape) {
    size_t n = 1;
    for (int k = 0; k < ndim; k++) n *= (size_t)shape[k];
    float *f = malloc(n * sizeof *f);
    for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
    MpErr e;
    assert_int_equal(mp_npy_write(path, MP_DT_F32, f, ndim, shape, &e), MP_OK);
    free(f);
}

/* Expects exit 2, a single "maskpos plot: error:" line mentioning `needle`, and no output file. */
static void expect_cli_error(const char *out, const char *needle, const char *args) {
    char buf[4096];
    int rc = mp_test_run(buf, sizeof buf, "plot %s", args);
    if (rc != 2) fail_msg("maskpos plot %s: exit %d, want 2; output:\n%s", args, rc, buf);
    if (strncmp(buf, "maskpos plot: error: ", 21) != 0 || strchr(buf, '\n') != buf + strlen(buf) - 1)
        fail_msg("maskpos plot %s: want one error line, got:\n%s", args, buf);
    if (needle && !strstr(buf, needle)) fail_msg("maskpos plot %s: '%s' not in: %s", args, needle, buf);
    if (mp_file_exists(out)) fail_msg("maskpos plot %s: left %s behind", args, out);
}

static void test_cli(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char stack[256], nanf[256], ints[256], rank1[256], junk[256], out[256], args[2048];
    snprintf(stack, sizeof stack, "%s/layers.npy", d);
    snprintf(nanf, sizeof nanf, "%s/nan.npy", d);
    snprintf(ints, sizeof ints, "%s/ints.npy", d);
    snprintf(rank1, sizeof rank1, "%s/rank1.npy", d);
    snprintf(junk, sizeof junk, "%s/junk.npy", d);
    snprintf(out, sizeof out, "%s/fig.png", d);
    /* a [4,8,8] stack with NaN above the diagonal; layer 3 all NaN in a second file */
    double v[4 * 64];
    for (int l = 0; l < 4; l++)
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) v[l * 64 + i * 8 + j] = j <= i ? 0.1 * l + 0.01 * (i - j) : NAN;
    int64_t s3[3] = {4, 8, 8};
    write_npy_f32(stack, v, 3, s3);
    for (int a = 128; a < 192; a++) v[a] = NAN;
    write_npy_f32(nanf, v, 3, s3);
    int32_t iv[4] = {1, 2, 3, 4};
    int64_t s2[2] = {2, 2}, s1[1] = {4};
    MpErr e;
    assert_int_equal(mp_npy_write(ints, MP_DT_I32, iv, 2, s2, &e), MP_OK);
    write_npy_f32(rank1, v, 1, s1);
    mp_test_write_file(junk, "\x93NUMPY garbage", 14);

    snprintf(args, sizeof args, "%s/missing.npy -o %s", d, out);
    expect_cli_error(out, "missing.npy", args);
    snprintf(args, sizeof args, "%s -o %s", junk, out);
    expect_cli_error(out, "junk.npy", args);
    snprintf(args, sizeof args, "%s -o %s", ints, out);
    expect_cli_error(out, "dtype", args);
    snprintf(args, sizeof args, "%s -o %s", rank1, out);
    expect_cli_error(out, "rank1.npy", args);
    snprintf(args, sizeof args, "%s -o %s", nanf, out);
    expect_cli_error(out, "layer 3", args);
    snprintf(args, sizeof args, "%s -o %s/fig.gif", stack, d);
    expect_cli_error(out, "fig.gif", args);
    snprintf(args, sizeof args, "%s -o %s --clip 5", stack, out);
    expect_cli_error(out, "--clip", args);
    snprintf(args, sizeof args, "%s -o %s --layers 2-7", stack, out);
    expect_cli_error(out, "layers.npy", args);
    snprintf(args, sizeof args, "%s -o %s --cmap jet", stack, out);
    expect_cli_error(out, "jet", args);
    snprintf(args, sizeof args, "%s -o %s --vmin 1 --vmax 0", stack, out);
    expect_cli_error(out, "--vmin", args);
    snprintf(args, sizeof args, "%s -o %s --preset fig9", stack, out);
    expect_cli_error(out, "fig9", args);
    snprintf(args, sizeof args, "%s -o %s --panel-title 'Layer %%s'", stack, out);
    expect_cli_error(out, "%s", args);
    snprintf(args, sizeof args, "%s -o %s --bogus", stack, out);
    expect_cli_error(out, "--bogus", args);
    snprintf(args, sizeof args, "%s", stack);
    expect_cli_error(out, "-o", args);
    snprintf(args, sizeof args, "%s -o %s/no/dir/fig.png", stack, d);
    expect_cli_error(out, "no/dir", args);

    /* good runs: presets end to end, every format */
    char buf[4096];
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s -o %s --preset fig2", stack, out), 0);
    cairo_surface_t *s = png_load(out);
    assert_true(cairo_image_surface_get_width(s) > 4 * 300);
    cairo_surface_destroy(s);
    assert_non_null(strstr(buf, "Layer 4"));
    snprintf(out, sizeof out, "%s/fig4.pdf", d);
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s -o %s --preset fig4 --layers 2-3", stack, out), 0);
    assert_non_null(strstr(buf, "Layer 3, normalised"));
    assert_true(mp_file_exists(out));
    snprintf(out, sizeof out, "%s/fig5.svg", d);
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s %s -o %s --preset fig5 --layers 1,2 --panel-title A "
                                                  "--panel-title 'B, L%%d'", stack, stack, out), 0);
    assert_non_null(strstr(buf, "A 2"));
    assert_non_null(strstr(buf, "B, L1"));
    /* flags over a preset: --vmax keeps fig2's vmin 0; --clip replaces its fixed limits */
    snprintf(out, sizeof out, "%s/over.png", d);
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s -o %s --preset fig2 --layers 4 --vmax 0.5", stack, out), 0);
    assert_non_null(strstr(buf, "[0, 0.5]"));
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s -o %s --preset fig2 --layers 4 --clip 0,100 --force", stack, out), 0);
    assert_non_null(strstr(buf, "[0.3, 0.37]")); /* layer 4: 0.3 + 0.01 (i - j), float32 */
    snprintf(out, sizeof out, "%s/over2.png", d);
    snprintf(args, sizeof args, "%s -o %s --preset fig2 --vmin 2", stack, out);
    expect_cli_error(out, "vmin", args);
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot --help"), 0);
    assert_non_null(strstr(buf, "--preset"));
}

/* ---------------------------------------------------------------- line plots */

/* Rows of column x holding a strongly red / blue pixel: (first, last) or (-1, -1). */

static void colour_band(cairo_surface_t *s, int x, int want_red, int *first, int *last) {
    *first = *last = -1;
    for (int y = 0; y < cairo_image_surface_get_height(s); y++) {
        Rgb p = png_pixel(s, x, y);
        int hit = want_red ? (p.r > 200 && p.g < 60 && p.b < 60) : (p.b > 200 && p.r < 60 && p.g < 60);
        if (hit) {
            if (*first < 0) *first = y;
            *last = y;
        }
    }
}

static void test_line_plot(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/lines.png", d);
    double x[11], hi[11], lo[11];
    for (int i = 0; i <= 10; i++) x[i] = i, hi[i] = (i >= 4 && i <= 6) ? NAN : 1.0, lo[i] = 0.0;
    MpPlotSeries sr[2] = {{x, hi, 11, "high", {1, 0, 0}}, {x, lo, 11, "low", {0, 0, 1}}};
    MpErr e;
    assert_int_equal(mp_plot_lines(path, "t", "step", "loss", sr, 2, &e), MP_OK);
    cairo_surface_t *s = png_load(path);
    int h = cairo_image_surface_get_height(s);
    /* the axes from the PNG's record: x = 2.5 (between markers) and x = 5 (in the NaN gap of the red series) */
    double ax[8];
    char *t = png_panels_text(path);
    assert_non_null(t);
    assert_int_equal(sscanf(t, "axes\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf", &ax[0], &ax[1], &ax[2], &ax[3], &ax[4], &ax[5],
                            &ax[6], &ax[7]), 8);
    free(t);
    int x2 = (int)(ax[0] + (2.5 - ax[4]) / (ax[5] - ax[4]) * (ax[2] - ax[0])), x5 = (int)(ax[0] + (5 - ax[4]) / (ax[5] - ax[4]) * (ax[2] - ax[0]));
    int rf, rl, bf, bl;
    colour_band(s, x2, 1, &rf, &rl);
    colour_band(s, x2, 0, &bf, &bl);
    assert_true(rf >= 0 && bf >= 0);
    assert_true(rl < h / 4 && bf > 3 * h / 4); /* y = 1 near the top, y = 0 near the bottom */
    assert_true(rl - rf <= 4);                  /* a line, not a filled area */
    colour_band(s, x5, 1, &rf, &rl);
    assert_int_equal(rf, -1);                   /* the gap is not bridged */
    colour_band(s, x5, 0, &bf, &bl);
    assert_true(bf >= 0);
    cairo_surface_destroy(s);
    /* nothing finite, an unknown extension: errors, no file */
    double nan3[3] = {NAN, NAN, NAN};
    MpPlotSeries bad = {nan3, nan3, 3, "x", {0, 0, 0}};
    snprintf(path, sizeof path, "%s/none.png", d);
    assert_int_equal(mp_plot_lines(path, "t", "x", "y", &bad, 1, &e), MP_ERR);
    assert_false(mp_file_exists(path));
    snprintf(path, sizeof path, "%s/lines.jpg", d);
    assert_int_equal(mp_plot_lines(path, "t", "x", "y", sr, 2, &e), MP_ERR);
    assert_false(mp_file_exists(path));
}

static void test_cli_curve(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char csv[256], png[256], out[4096];
    snprintf(csv, sizeof csv, "%s/log.csv", d);
    snprintf(png, sizeof png, "%s/loss.png", d);
    const char good[] = "step,lr,loss,grad_norm,val_loss,tokens_per_s\n1,1e-4,5.6,8.4,,3000\n2,2e-4,5.1,7.0,5.2,3000\n"
                        "3,3e-4,4.0,3.1,,3100\n4,4e-4,3.2,1.5,3.4,3100\n";
    mp_test_write_file(csv, good, sizeof good - 1);
    assert_int_equal(mp_test_run(out, sizeof out, "plot --curve %s -o %s --title 'NoPE model'", csv, png), 0);
    cairo_surface_t *s = png_load(png);
    cairo_surface_destroy(s);
    const char *bad[] = {"step,lr,grad\n1,2,3\n", "step,loss\n1,abc\n", ""};
    for (int k = 0; k < 3; k++) {
        remove(png);
        mp_test_write_file(csv, bad[k], strlen(bad[k]));
        int rc = mp_test_run(out, sizeof out, "plot --curve %s -o %s", csv, png);
        if (rc != 2) fail_msg("bad csv %d: exit %d: %s", k, rc, out);
        assert_non_null(strstr(out, "maskpos plot: error:"));
        assert_false(mp_file_exists(png));
    }
    assert_int_equal(mp_test_run(out, sizeof out, "plot --curve %s/absent.csv -o %s", d, png), 2);
}

/* ---------------------------------------------------------------- colour maps and limits in the PNG */

/* Checks every line "title<TAB>cmap<TAB>lo<TAB>hi" of a PNG: colour map `cmap`, lo = -hi (centred
 * on 0), hi <= hi_max; returns the number of panels. */
static int png_expect_symmetric(const char *path, const char *cmap, double hi_max) {
    char *t = png_panels_text(path);
    if (!t) fail_msg("%s: no maskpos:panels tEXt chunk", path);
    int n = 0;
    for (char *save = NULL, *line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++) {
        char title[128], cm[32];
        double lo, hi;
        if (sscanf(line, "%127[^\t]\t%31[^\t]\t%lf\t%lf", title, cm, &lo, &hi) != 4) fail_msg("%s: bad line '%s'", path, line);
        if (strcmp(cm, cmap)) fail_msg("%s: %s drawn with %s, want %s", path, title, cm, cmap);
        if (!(lo == -hi && hi > 0)) fail_msg("%s: %s limits [%g, %g] not symmetric about 0", path, title, lo, hi);
        if (!(hi <= hi_max)) fail_msg("%s: %s limit %g above %g (not robust)", path, title, hi, hi_max);
    }
    free(t);
    return n;
}

/* In folder d: a 5-layer llama written by mkmodel (model), 6 x 24 token ids (ids) and the
 * path of a probe folder (outd); each buffer 256 bytes. */
static void probe_fixture(const char *d, char *model, char *ids, char *outd) {
    char buf[8192];
    MpErr e;
    snprintf(model, 256, "%s/model", d);
    snprintf(ids, 256, "%s/ids.npy", d);
    snprintf(outd, 256, "%s/probe", d);
    assert_int_equal(mp_test_run(buf, sizeof buf, "mkmodel --arch llama --layers 5 --dim 32 --heads 2 --kv-heads 2 --ffn 64 --vocab 64 --seed 3 %s", model), 0);
    int32_t tok[6 * 24];
    for (int k = 0; k < 6 * 24; k++) tok[k] = (k * 37 + 11) % 64;
    const int64_t ts[2] = {6, 24};
    assert_int_equal(mp_npy_write(ids, MP_DT_I32, tok, 2, ts, &e), MP_OK);
}

/* The residue figures (issue 30): `plot --preset fig5`, `plot --diagnorm` and `probe --plot` draw the
 * diagonal-normalised residue in vlag centred on 0 with robust symmetric limits (an outlier of
 * 1000 in a map of |residue| <= ~1 does not set them), recorded in the PNG; the pixel of a
 * zero residue is vlag's centre. */
static void test_residue_figures_centred(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    enum { L = 5, S = 40 };
    double *m = malloc(sizeof(double) * L * S * S);
    for (int l = 0; l < L; l++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) /* lopsided: a residue in [-0.2, 1] plus one outlier */
                m[((size_t)l * S + i) * S + j] = j > i ? NAN : 0.6 * sin(0.3 * i * (l + 1)) * cos(0.2 * j) + 0.4 * (j % 3 == 0) +
                                                                 (i == S - 1 && j == 1 ? 1000.0 : 0.0);
    char npy[256], png[512], buf[8192];
    snprintf(npy, sizeof npy, "%s/m.npy", d);
    const int64_t shp[3] = {L, S, S};
    MpErr e;
    assert_int_equal(mp_npy_write(npy, MP_DT_F64, m, 3, shp, &e), MP_OK);
    snprintf(png, sizeof png, "%s/f5.png", d);
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s -o %s --preset fig5", npy, png), 0);
    assert_int_equal(png_expect_symmetric(png, "vlag", 50), 4);
    if (!strstr(buf, "vlag, colour limits [-") || !strstr(buf, "(symmetric about 0)")) fail_msg("plot's lines: %s", buf);
    snprintf(png, sizeof png, "%s/dn.png", d);
    assert_int_equal(mp_test_run(buf, sizeof buf, "plot %s -o %s --diagnorm", npy, png), 0);
    assert_int_equal(png_expect_symmetric(png, "vlag", 50), L);
    /* the colour of a zero residue: a map that is 0 but for +-1 corners, at cell (1, 1) */
    double z[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    z[2] = 1, z[6] = -1;
    MpPlotPanel pn = panel_of(z, 3, 3, "zero");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    assert_int_equal(mp_plot_preset_apply(&o, "fig5", &e), MP_OK);
    o.diagnorm = 0;
    o.clip_lo = o.clip_hi = NAN;
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, &pn, 1, &o, &e), MP_OK);
    snprintf(png, sizeof png, "%s/zero.png", d);
    assert_int_equal(mp_plot_render(png, &pn, 1, &o, &e), MP_OK);
    MpPlotCmap vlag;
    assert_int_equal(mp_plot_cmap_find(&vlag, "vlag"), MP_OK);
    double mid[3];
    mp_plot_cmap_eval(&vlag, 0.5, mid);
    cairo_surface_t *s = png_load(png);
    expect_rgb(cell_pixel(s, &lay, 0, 3, 3, 1, 1), (Rgb){(int)lround(mid[0] * 255), (int)lround(mid[1] * 255), (int)lround(mid[2] * 255)}, 2,
               "fig5: a zero residue");
    cairo_surface_destroy(s);
    /* probe --plot: every probed layer of a 5-layer model */
    char model[256], ids[256], outd[256];
    probe_fixture(d, model, ids, outd);
    assert_int_equal(mp_test_run(buf, sizeof buf, "probe %s --tokens %s --layers all --plot --out %s", model, ids, outd), 0);
    snprintf(png, sizeof png, "%s/scores_diagnorm.png", outd);
    assert_int_equal(png_expect_symmetric(png, "vlag", 1e30), L);
    if (!strstr(buf, "scores_diagnorm.png: ") || !strstr(buf, "layer 5 +-")) fail_msg("probe's last lines name no limits: %s", buf);
    free(m);
}

/* sink_entropy.png labels its rows with the model layers probed (2 and 5 of 5), not 1..L: one
 * numbering of layers in every figure (docs/outputs.md) */
static void test_sink_rows_are_model_layers(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char buf[8192], model[256], ids[256], outd[256], png[300];
    probe_fixture(d, model, ids, outd);
    assert_int_equal(mp_test_run(buf, sizeof buf, "probe %s --tokens %s --layers 2,5 --probs --plot --quiet --out %s", model, ids, outd), 0);
    snprintf(png, sizeof png, "%s/sink_entropy.png", outd);
    char *t = png_panels_text(png);
    if (!t) fail_msg("%s: no maskpos:panels tEXt chunk", png);
    if (!strstr(t, "rows\t2,5\n")) fail_msg("%s: rows not labelled as layers 2,5:\n%s", png, t);
    free(t);
}

/* The report's figures (issue 30 item 7): line plots with the legend right of the axes, whole-
 * number ticks for layers, a log2 axis for lengths 16 ... 512 (from the PNG's record); a wide
 * L x H map gets a cell as tall as it is (no blank half); colour limits without position 0. */
static void test_report_figure_layout(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    MpErr e;
    double layer[4] = {1, 2, 3, 4}, len[6] = {16, 32, 64, 128, 256, 512}, y4[8][4], y6[6];
    MpPlotSeries sr[8];
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < 4; i++) y4[k][i] = k < 4 ? 0.5 : 0.5 + 0.1 * i; /* four coinciding curves */
        sr[k] = (MpPlotSeries){layer, y4[k], 4, "a rather long legend label, d=16", {k / 8.0, 0.2, 1 - k / 8.0}};
    }
    snprintf(path, sizeof path, "%s/rp.png", d);
    assert_int_equal(mp_plot_lines(path, "RP", "layer", "recency probability", sr, 8, &e), MP_OK);
    char *t = png_panels_text(path);
    assert_non_null(t);
    double ax[8], lg[4];
    char scale[16];
    assert_int_equal(sscanf(t, "axes\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%15s", &ax[0], &ax[1], &ax[2], &ax[3], &ax[4], &ax[5],
                            &ax[6], &ax[7], scale), 9);
    assert_string_equal(scale, "linear");
    const char *xt = strstr(t, "xticks"), *lgl = strstr(t, "legend\t");
    assert_non_null(xt);
    assert_non_null(lgl);
    if (strncmp(xt, "xticks\t1\t2\t3\t4\n", 15)) fail_msg("layer ticks (whole numbers only): %s", xt);
    assert_int_equal(sscanf(lgl, "legend\t%lf\t%lf\t%lf\t%lf", &lg[0], &lg[1], &lg[2], &lg[3]), 4);
    assert_true(lg[0] >= ax[2]); /* the legend starts right of the axes box */
    cairo_surface_t *s = png_load(path);
    assert_true(lg[0] + lg[2] <= cairo_image_surface_get_width(s)); /* and fits in the figure */
    cairo_surface_destroy(s);
    free(t);
    for (int i = 0; i < 6; i++) y6[i] = 0.1 * i;
    MpPlotSeries one = {len, y6, 6, "layer 1", {1, 0, 0}};
    snprintf(path, sizeof path, "%s/len.png", d);
    assert_int_equal(mp_plot_lines(path, "t", "length S'", "NRI", &one, 1, &e), MP_OK);
    t = png_panels_text(path);
    assert_non_null(strstr(t, "\tlog2\n"));
    assert_non_null(strstr(t, "xticks\t16\t32\t64\t128\t256\t512\n"));
    free(t);
    /* a 4 x 8 map: the figure is not a square cell's height */
    double lh[32];
    for (int k = 0; k < 32; k++) lh[k] = k;
    MpPlotPanel pn = panel_of(lh, 4, 8, "sink");
    MpPlotOptions o;
    mp_plot_options_default(&o);
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, &pn, 1, &o, &e), MP_OK);
    if (lay.height > lay.heat[0].y + lay.heat[0].h + 90) fail_msg("4x8 map: figure %g px tall for a %g px map", lay.height, lay.heat[0].h);
    /* limit_skip = 1: a huge first row and column do not set the limits */
    double g[25];
    for (int k = 0; k < 25; k++) g[k] = k < 5 || k % 5 == 0 ? 1000 : k % 3;
    MpPlotPanel gp = panel_of(g, 5, 5, "gram");
    gp.limit_skip = 1;
    double lim[1][2];
    assert_int_equal(mp_plot_limits(lim, &gp, 1, &o, &e), MP_OK);
    assert_true(lim[0][0] == 0 && lim[0][1] == 2);
}

/* The report has no count limits (issue 27 item 4): 40 figures, 200 verdict rows and 300
 * statistics rows all reach report.md and report.html (the old fixed arrays kept 32, 128 and 256
 * and dropped the rest without a word), a figure keeps 9 viewer folders (8 before), and a
 * statistics table of 9 columns holds 9, while a row of another width is refused with one line
 * (a 9th cell used to overwrite the next row's first). */
/* Issue 39: a panel whose residue is not resolved is marked: its note under the title (red) and in
 * the PNG's text as a fifth field, its map washed out (a cell of rocket's darkest anchor drawn
 * lighter than the same cell of a resolved panel, about 55% of the way to white) and framed in red
 * dashes (a red pixel just outside the heat box); the resolved panel's colours are exact. */
static void test_unresolved_panel_marked(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/marked.png", d);
    double map[4] = {0, 1, 1, 0};
    MpPlotPanel p[2] = {panel_of(map, 2, 2, "Layer 1"), panel_of(map, 2, 2, "Layer 2")};
    snprintf(p[0].note, sizeof p[0].note, "block z 3.10 > 1.50: resolved (N = 400)");
    snprintf(p[1].note, sizeof p[1].note, "block z 1.10 < 1.50: not resolved at N = 400");
    p[1].unresolved = 1;
    MpPlotOptions o;
    mp_plot_options_default(&o);
    o.vmin = 0;
    o.vmax = 1;
    MpErr e;
    assert_int_equal(mp_plot_render(path, p, 2, &o, &e), MP_OK);
    MpPlotLayout lay;
    assert_int_equal(mp_plot_layout_compute(&lay, p, 2, &o, &e), MP_OK);
    cairo_surface_t *s = png_load(path);
    const Rgb dark = hex_rgb(rocket_hex[0]);
    expect_rgb(cell_pixel(s, &lay, 0, 2, 2, 0, 0), dark, 0, "resolved panel: exact colour");
    const Rgb veiled = cell_pixel(s, &lay, 1, 2, 2, 0, 0);
    const Rgb want = {(int)lround(dark.r + 0.55 * (255 - dark.r)), (int)lround(dark.g + 0.55 * (255 - dark.g)),
                      (int)lround(dark.b + 0.55 * (255 - dark.b))};
    expect_rgb(veiled, want, 2, "unresolved panel: washed out");
    const MpPlotRect *h = &lay.heat[1];
    int red = 0; /* the dashed frame: red pixels along the box's top edge, just outside it */
    for (int x = (int)h->x; x < (int)(h->x + h->w); x++)
        for (int y = (int)h->y - 4; y < (int)h->y; y++) {
            const Rgb c = png_pixel(s, x, y);
            red += c.r > 150 && c.g < 80 && c.b < 80;
        }
    assert_true(red > 10);
    cairo_surface_destroy(s);
    char *t = png_panels_text(path);
    assert_non_null(t);
    assert_non_null(strstr(t, "Layer 1\trocket\t0\t1\tblock z 3.10 > 1.50: resolved (N = 400)\n"));
    assert_non_null(strstr(t, "Layer 2\trocket\t0\t1\tblock z 1.10 < 1.50: not resolved at N = 400\n"));
    free(t);
}

static void test_report_grows(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[512], a[64], b[64];
    MpErr e;
    MpReport *r = calloc(1, sizeof *r);
    assert_non_null(r);
    snprintf(r->title, sizeof r->title, "limits");
    for (int i = 1; i <= 40; i++) {
        snprintf(a, sizeof a, "Extra figure %d: caption", i);
        snprintf(b, sizeof b, "fig%d.png", i);
        snprintf(path, sizeof path, "%s/%s", d, b);
        mp_test_write_file(path, "png", 3);
        mp_report_fig(r, a, b);
    }
    for (int v = 0; v < 9; v++) {
        snprintf(a, sizeof a, "run%d", v);
        mp_report_fig_view(r, "fig40.png", a);
    }
    for (int i = 1; i <= 200; i++) {
        snprintf(a, sizeof a, "quantity %d", i);
        mp_report_row(r, a, "1", "1", i % 2, "");
    }
    char longtext[1200]; /* texts past the old fixed fields (160..256 bytes; the footer 1024) kept whole */
    memset(longtext, 'x', sizeof longtext - 2);
    longtext[sizeof longtext - 2] = 'Z';
    longtext[sizeof longtext - 1] = '\0';
    mp_report_row(r, longtext, longtext, longtext, 1, longtext);
    mp_report_footer(r, "footer ", longtext, ".");
    const char *head[9] = {"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"};
    mp_report_stats_head(r, "stats", head, 9);
    char cell[9][32];
    const char *cells[10];
    for (int i = 1; i <= 300; i++) {
        for (int c = 0; c < 9; c++) {
            snprintf(cell[c], sizeof cell[c], "r%dc%d", i, c + 1);
            cells[c] = cell[c];
        }
        assert_int_equal(mp_report_stats_row(r, cells, 9, &e), MP_OK);
    }
    cells[9] = "tenth";
    assert_int_equal(mp_report_stats_row(r, cells, 10, &e), MP_ERR);
    print_message("refused: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "10 columns in a table of 9"));
    assert_null(strchr(e.msg, '\n'));
    assert_int_equal(mp_report_stats_row(r, cells, 8, &e), MP_ERR);
    assert_int_equal(r->nfigs, 40);
    assert_int_equal(r->nrows, 201);
    assert_int_equal(r->npass, 101);
    assert_int_equal(r->stats_rows, 300);
    assert_int_equal(r->figs[39].nviews, 9);
    snprintf(path, sizeof path, "%s/report.md", d);
    assert_int_equal(mp_report_write_md(r, path, &e), MP_OK);
    char *md = mp_test_read_text(path);
    assert_non_null(md);
    assert_non_null(strstr(md, "| quantity 200 |"));
    assert_non_null(strstr(md, "101 of 201 rows agree."));
    char *at = md; /* the long text whole, in the row's four cells and the footer */
    int whole = 0;
    while ((at = strstr(at, longtext))) whole++, at += strlen(longtext);
    assert_int_equal(whole, 5);
    assert_non_null(strstr(md, "![Extra figure 40: caption](fig40.png)"));
    assert_non_null(strstr(md, "| c1 | c2 | c3 | c4 | c5 | c6 | c7 | c8 | c9 |"));
    assert_non_null(strstr(md, "| r1c1 | r1c2 | r1c3 | r1c4 | r1c5 | r1c6 | r1c7 | r1c8 | r1c9 |\n| r2c1 |"));
    assert_non_null(strstr(md, "| r300c1 |"));
    assert_null(strstr(md, "tenth"));
    free(md);
    snprintf(path, sizeof path, "%s/report.html", d);
    assert_int_equal(mp_report_write_html(r, d, path, &e), MP_OK);
    char *html = mp_test_read_text(path);
    assert_non_null(html);
    assert_non_null(strstr(html, "<tr id=\"row-200\""));
    assert_non_null(strstr(html, "<figure id=\"fig-40\">"));
    assert_non_null(strstr(html, "<td>r300c9</td>"));
    free(html);
    mp_report_free(r);
    free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cmap_anchors),
        cmocka_unit_test(test_png_cell_colours_and_nan),
        cmocka_unit_test(test_constant_map),
        cmocka_unit_test(test_grid_and_nonsquare),
        cmocka_unit_test(test_raster_average),
        cmocka_unit_test(test_large_map_png_is_averaged),
        cmocka_unit_test(test_limits_clip_shared_diverging),
        cmocka_unit_test(test_diagnorm_limits),
        cmocka_unit_test(test_titles_and_stacks),
        cmocka_unit_test(test_annotations_drawn),
        cmocka_unit_test(test_pdf_and_svg_valid),
        cmocka_unit_test(test_render_errors_leave_no_file),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_line_plot),
        cmocka_unit_test(test_cli_curve),
        cmocka_unit_test(test_residue_figures_centred),
        cmocka_unit_test(test_sink_rows_are_model_layers),
        cmocka_unit_test(test_report_figure_layout),
        cmocka_unit_test(test_report_grows),
        cmocka_unit_test(test_unresolved_panel_marked),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    mp_plot_release(); /* font caches: keeps LeakSanitizer quiet under make asan */
    return failed;
}
