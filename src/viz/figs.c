/* figs.c — see figs.h. */
#include "viz/figs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "viz/plot.h" /* mp_plot_render */

int mp_fig_rows(const char *path, const char *title, const MpFigRow *rows, int nrows, MpErr *e) {
    return mp_fig_rows_clip(path, title, rows, nrows, NAN, NAN, e);
}

int mp_fig_rows_clip(const char *path, const char *title, const MpFigRow *rows, int nrows, double clip_lo,
                     double clip_hi, MpErr *e) {
    MpPlotPanel panels[MP_PLOT_MAX_PANELS];
    memset(panels, 0, sizeof panels);
    int n = 0, cols = 1;
    MpPlotOptions o;
    mp_plot_options_default(&o);
    snprintf(o.title, sizeof o.title, "%s", title);
    o.shared = isnan(clip_lo); /* percentile limits are per panel: layers differ by orders of magnitude */
    o.clip_lo = clip_lo;
    o.clip_hi = clip_hi;
    for (int r = 0; r < nrows; r++) {
        if (rows[r].L > cols) cols = rows[r].L;
        for (int l = 0; l < rows[r].L; l++) {
            if (n >= MP_PLOT_MAX_PANELS) return mp_err_set(e, "%s: too many panels", path);
            MpPlotPanel *p = &panels[n++];
            p->map = rows[r].maps + (size_t)l * rows[r].S * rows[r].S;
            p->rows = p->cols = rows[r].S;
            snprintf(p->title, sizeof p->title, "%s, Layer %d", rows[r].label, l + 1);
            p->cmap = rows[r].diagnorm ? "vlag" : "rocket";
            p->diagnorm = rows[r].diagnorm;
            if (rows[r].notes) {
                snprintf(p->note, sizeof p->note, "%s", rows[r].notes[l].text);
                p->unresolved = rows[r].notes[l].unresolved && rows[r].diagnorm; /* raw maps: the note only */
            }
            p->group = r;
        }
    }
    o.cols = cols;
    return mp_plot_render(path, panels, n, &o, e);
}
