/* raster.c — the numeric side of drawing a map: area averaging onto a pixel grid, percentiles.
 *
 * Implements (declared in viz/plot.h):
 *   mp_plot_raster_average: each output pixel covers the footprint
 *     [u·rows/oh, (u+1)·rows/oh) × [v·cols/ow, (v+1)·cols/ow) of the map; its value is the mean of
 *     the finite entries under it, each weighted by the area it shares with the footprint. A
 *     1024×1024 checkerboard of 0/1 drawn into 300×300 pixels thus becomes ≈0.5 everywhere (point
 *     sampling would alias it into stripes), and NaN (unobserved) entries neither count nor bleed:
 *     a pixel less than a quarter observed is NaN (blank), so the causal edge stays a clean staircase.
 *   mp_plot_percentile_sorted: numpy's default ("linear") percentile of sorted values.
 * Does not: choose colours or sizes (plot.c).
 * Tested by: tests/test_viz.c (checkerboard, exact block means, NaN footprints).
 */
#include <math.h>
#include <stdlib.h>

#include "viz/plot.h" /* declarations */

/* Overlap of [a,b) with the unit cell [i, i+1). */
static double raster_overlap(double a, double b, int i) {
    double lo = a > i ? a : i, hi = b < i + 1 ? b : i + 1;
    return hi > lo ? hi - lo : 0;
}

int mp_plot_raster_average(double *out, int oh, int ow, const double *map, int rows, int cols,
                           MpErr *e) {
    if (oh < 1 || ow < 1 || rows < 1 || cols < 1) return mp_err_set(e, "raster: empty size");
    /* per input column: weighted sum and finite weight of the rows under output row u */
    double *csum = malloc(2 * (size_t)cols * sizeof *csum);
    if (!csum) return mp_err_set(e, "raster: out of memory for %d columns", cols);
    double *cw = csum + cols;
    double sy = (double)rows / oh, sx = (double)cols / ow;
    for (int u = 0; u < oh; u++) {
        double a = u * sy, b = (u + 1) * sy;
        int i0 = (int)floor(a), i1 = (int)ceil(b);
        if (i1 > rows) i1 = rows;
        for (int j = 0; j < cols; j++) csum[j] = cw[j] = 0;
        for (int i = i0; i < i1; i++) {
            double wy = raster_overlap(a, b, i);
            if (wy <= 0) continue;
            const double *row = map + (size_t)i * cols;
            for (int j = 0; j < cols; j++)
                if (isfinite(row[j])) {
                    csum[j] += wy * row[j];
                    cw[j] += wy;
                }
        }
        for (int v = 0; v < ow; v++) {
            double c = v * sx, d = (v + 1) * sx;
            int j0 = (int)floor(c), j1 = (int)ceil(d);
            if (j1 > cols) j1 = cols;
            double s = 0, w = 0;
            for (int j = j0; j < j1; j++) {
                double wx = raster_overlap(c, d, j);
                s += wx * csum[j];
                w += wx * cw[j];
            }
            /* a pixel is drawn when at least a quarter of its footprint is observed: along the
             * causal diagonal this keeps a clean one-pixel staircase (pixels that only graze a
             * diagonal cell stay blank) while a half-observed diagonal pixel is drawn */
            out[(size_t)u * ow + v] = w > 0 && w >= 0.25 * (b - a) * (d - c) ? s / w : NAN;
        }
    }
    free(csum);
    return MP_OK;
}

double mp_plot_percentile_sorted(const double *sorted, size_t n, double p) {
    if (n == 0) return NAN;
    if (p <= 0) return sorted[0];
    if (p >= 100) return sorted[n - 1];
    double pos = p / 100.0 * (double)(n - 1);
    size_t k = (size_t)floor(pos);
    if (k >= n - 1) return sorted[n - 1];
    double f = pos - (double)k;
    return sorted[k] + f * (sorted[k + 1] - sorted[k]);
}
