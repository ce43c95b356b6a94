/* figs.h — the figures `simulate --plot` and `reproduce` draw, on top of viz/plot.h.
 *
 * A figure here is a set of rows; each row is one run's layer maps (L,S,S), drawn raw (colour
 * map "rocket") or diagonal-mean normalised ("vlag", centred on 0), with colour limits shared
 * along the row. Titles read "<row label>, Layer l".
 */
#ifndef MP_VIZ_FIGS_H
#define MP_VIZ_FIGS_H

#include "core/err.h" /* MpErr */

/* One layer's significance under its panel's title (viz/signif.h writes them). */
typedef struct MpFigNote {
    char text[128];     /* "" = none */
    int unresolved;     /* 1: the panel is marked (washed out, red dashed frame, red note) */
} MpFigNote;

typedef struct MpFigRow {
    const double *maps; /* (L,S,S) borrowed */
    int L, S;
    const char *label;  /* e.g. "α=0.2" or "causal, α=0 (normalised)" */
    int diagnorm;       /* draw diagonal-mean normalised maps with a diverging colour map */
    const MpFigNote *notes; /* [L] per layer, or NULL (borrowed); a diagnorm row's unresolved panels are marked */
} MpFigRow;

/* Draws rows (one panel per layer) into path (.png/.pdf/.svg by extension). */
int mp_fig_rows(const char *path, const char *title, const MpFigRow *rows, int nrows, MpErr *e);
/* The same with each panel's colour limits at the clip_lo and clip_hi percentiles of its finite
 * entries (the paper's Figure 5 uses 1 and 99), so that a few extreme entries, or a deeper layer
 * a hundred times stronger, do not wash out the rest. */
int mp_fig_rows_clip(const char *path, const char *title, const MpFigRow *rows, int nrows, double clip_lo,
                     double clip_hi, MpErr *e);

#endif
