/* test_probe_plots.c — the line figures of `probe --plot` for variance and the position probe
 * (src/job/probe_curves_out.c): on the trained NoPE model (models/none), with --stats
 * variance,position --plot,
 *   - var.png, var_resid.png, pos.png and pos_mae.png are written and listed in meta.json's files;
 *   - each figure's curves sit where the .npy files put them: at chosen x the pixel of the layer's
 *     colour nearest to the y computed here from var_attn.npy / var_resid.npy (log2 variance at
 *     log2(i + 1)) and pos_probe.npy (R², chance R², MAE) through the axes the PNG records, within
 *     3 pixels;
 *   - --plot without those statistics writes none of them.
 *
 *   make build/tests/test_probe_plots && build/tests/test_probe_plots
 */
#include <math.h>

#include "test_model_util.h"
#include "test_png_util.h"

#include "core/json.h"       /* mp_json_read */
#include "model/probe_pos.h" /* the columns of pos_probe.npy */

/* The axes a line plot's PNG records: left, top, right, bottom pixels, x0 x1 y0 y1 data limits. */
typedef struct Axes {
    double l, t, r, b, x0, x1, y0, y1;
} Axes;

static Axes axes_of(const char *path) {
    Axes a;
    char *t = png_panels_text(path);
    if (!t) fail_msg("%s: no maskpos:panels record", path);
    if (sscanf(t, "axes\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf\t%lf", &a.l, &a.t, &a.r, &a.b, &a.x0, &a.x1, &a.y0, &a.y1) != 8)
        fail_msg("%s: no axes line in %s", path, t);
    free(t);
    return a;
}

/* The distance in pixels from the y where (x, y) lies to the nearest pixel of colour c (within 40
 * of each component) in that column; 1e9 when the column has none. */
static double curve_miss(cairo_surface_t *s, const Axes *a, double x, double y, Rgb c) {
    const int px = (int)lround(a->l + (x - a->x0) / (a->x1 - a->x0) * (a->r - a->l));
    const double py = a->b - (y - a->y0) / (a->y1 - a->y0) * (a->b - a->t);
    double best = 1e9;
    for (int dx = -1; dx <= 1; dx++)
        for (int yy = (int)a->t; yy <= (int)a->b; yy++)
            if (rgb_dist(png_pixel(s, px + dx, yy), c) <= 40 && fabs(yy - py) < best) best = fabs(yy - py);
    return best;
}

static double *load(const char *dir, const char *file, size_t *n) {
    char p[600];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return npy_load_f64(p, n, NULL);
}

static void test_figures_where_the_numbers_are(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char d[300], out[16384], p[600];
    snprintf(d, sizeof d, "%s/none", top);
    if (mp_test_run(out, sizeof out, "probe %s/models/none --data %s/models/kjv.txt --pack --n 32 --seq 64 --out %s --layers all "
                    "--stats variance,position --plot --quiet", MP_SOURCE_DIR, MP_SOURCE_DIR, d) != 0)
        fail_msg("probe: %s", out);
    snprintf(p, sizeof p, "%s/meta.json", d);
    json_t *meta = mp_json_read(p, NULL);
    assert_non_null(meta);
    const char *figs[4] = {"var.png", "var_resid.png", "pos.png", "pos_mae.png"};
    for (int k = 0; k < 4; k++)
        if (!json_object_get(json_object_get(meta, "files"), figs[k])) fail_msg("meta.json files lacks %s", figs[k]);
    const Rgb layer_rgb[2] = {{227, 26, 28}, {56, 125, 184}}; /* layers 1 and 2 (probe_curves_out.c's first colours) */
    const int S = 64, L = 4;
    /* var.png and var_resid.png: layers 1 and 2 at positions 3, 15, 40 */
    const char *vf[2] = {"var_attn.npy", "var_resid.npy"};
    double worst = 0;
    for (int f = 0; f < 2; f++) {
        size_t n;
        double *v = load(d, vf[f], &n);
        assert_int_equal(n, (size_t)L * S);
        snprintf(p, sizeof p, "%s/%s", d, figs[f]);
        const Axes a = axes_of(p);
        cairo_surface_t *s = png_load(p);
        const int at[3] = {3, 15, 40};
        for (int l = 0; l < 2; l++)
            for (int k = 0; k < 3; k++) {
                const double miss = curve_miss(s, &a, log2(at[k] + 1.0), log2(v[l * S + at[k]]), layer_rgb[l]);
                if (miss > 3) fail_msg("%s: layer %d at position %d: the curve is %.0f px from log2 variance %.4f", figs[f], l + 1,
                                       at[k], miss, log2(v[l * S + at[k]]));
                worst = fmax(worst, miss);
            }
        cairo_surface_destroy(s);
        free(v);
    }
    /* pos.png: the held-out R² (layer colour 2 of the figure) and the chance R² (grey) at layers 1..4; pos_mae.png: the MAE */
    size_t n;
    double *o = load(d, "pos_probe.npy", &n);
    assert_int_equal(n, (size_t)L * MP_PROBE_POS_COLS);
    snprintf(p, sizeof p, "%s/pos.png", d);
    Axes a = axes_of(p);
    cairo_surface_t *s = png_load(p);
    for (int l = 0; l < L; l++) {
        const double *r = o + (size_t)l * MP_PROBE_POS_COLS;
        worst = fmax(worst, curve_miss(s, &a, l + 1, r[MP_PROBE_POS_R2], (Rgb){56, 125, 184}));
        worst = fmax(worst, curve_miss(s, &a, l + 1, r[MP_PROBE_POS_R2_CHANCE], (Rgb){102, 102, 102}));
    }
    cairo_surface_destroy(s);
    snprintf(p, sizeof p, "%s/pos_mae.png", d);
    a = axes_of(p);
    s = png_load(p);
    for (int l = 0; l < L; l++)
        worst = fmax(worst, curve_miss(s, &a, l + 1, o[(size_t)l * MP_PROBE_POS_COLS + MP_PROBE_POS_MAE], (Rgb){227, 26, 28}));
    cairo_surface_destroy(s);
    free(o);
    print_message("var.png, var_resid.png, pos.png, pos_mae.png: every checked point within %.0f px of the .npy's value\n", worst);
    assert_true(worst <= 3);
    /* layer 1 of the trained NoPE model falls (docs/metrics.md): the slope its legend shows */
    const double b1 = json_real_value(json_array_get(json_object_get(meta, "variance_slope_attn"), 0));
    assert_true(b1 < -0.3);
    json_decref(meta);
}

static void test_no_figures_without_the_statistics(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char d[300], out[16384], p[600];
    snprintf(d, sizeof d, "%s/plain", top);
    if (mp_test_run(out, sizeof out, "probe %s/models/none --data %s/models/kjv.txt --pack --n 4 --seq 32 --out %s --plot --quiet",
                    MP_SOURCE_DIR, MP_SOURCE_DIR, d) != 0)
        fail_msg("probe: %s", out);
    const char *figs[4] = {"var.png", "var_resid.png", "pos.png", "pos_mae.png"};
    for (int k = 0; k < 4; k++) {
        snprintf(p, sizeof p, "%s/%s", d, figs[k]);
        if (mp_file_exists(p)) fail_msg("%s written without its statistic", figs[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_figures_where_the_numbers_are),
        cmocka_unit_test(test_no_figures_without_the_statistics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
