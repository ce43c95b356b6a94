/* cmd_plot.c — `maskpos plot`: .npy score maps → a PNG/PDF/SVG figure (viz/plot.h does the drawing).
 *
 *   maskpos plot layer_scores.npy -o fig2.png --preset fig2
 *   maskpos plot a.npy b.npy -o fig.pdf --layers 1-4 --panel-title "α=0, Layer" --panel-title "α=0.2, Layer"
 * Inputs: float32/float64 .npy of shape [S,S] (one panel), [L,S,S] (a panel per selected layer) or
 * [L,H,S,S] (a panel per selected layer and head, or per layer with --heads mean). Each input file
 * fills its own row(s) of the grid unless --cols is given.
 * Does not: compute maps (theory/simulate/probe do). Bad input → one line
 * "maskpos plot: error: ..." naming the file, exit 2, and no output file (written atomically).
 * Tested by: tests/test_viz.c (bad-input cases, presets end to end).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/npy.h"   /* mp_npy_read, mp_npy_to_f64 */
#include "core/util.h"  /* mp_parse_range_list, mp_parse_double_list, mp_input_open */
#include "core/files.h" /* mp_outfile_claim */
#include "core/json.h"  /* mp_json_read: the run's meta.json beside the map */
#include "viz/signif.h" /* mp_signif_note_meta: each layer's significance */
#include "viz/cmap.h"   /* mp_plot_cmap_find */
#include "viz/plot.h"   /* MpPlotPanel, MpPlotOptions, mp_plot_render_ex */

#define PLOT_MAX_INPUTS 64
#define PLOT_MAX_INDEX 65536 /* largest layer/head number a range may name */

/* One input file, converted to double. */
typedef struct PlotInput {
    const char *path;
    double *data;       /* (L, H, S, S) as read, or (L, S, S) after --heads mean; owned */
    int rank;           /* 2, 3 or 4 as read */
    int L, H, S;        /* H = 1 for rank 2/3; L = 1 for rank 2 */
} PlotInput;

/* Reads one input and checks dtype and shape. */
static int plot_read_input(PlotInput *in, const char *path, MpErr *e) {
    MpNpy a;
    memset(in, 0, sizeof *in);
    in->path = path;
    if (mp_npy_read(path, &a, e) != MP_OK) return MP_ERR;
    if (a.dtype != MP_DT_F32 && a.dtype != MP_DT_F64) {
        mp_err_set(e, "%s: unsupported dtype %s (need float32 or float64)", path, mp_dtype_name(a.dtype));
        mp_npy_free(&a);
        return MP_ERR;
    }
    char shp[128] = "";
    for (int d = 0; d < a.ndim; d++) {
        size_t used = strlen(shp);
        snprintf(shp + used, sizeof shp - used, "%s%lld", d ? "," : "", (long long)a.shape[d]);
    }
    if (a.ndim < 2 || a.ndim > 4) {
        mp_err_set(e, "%s: shape [%s] is not [S,S], [L,S,S] or [L,H,S,S]", path, shp);
        mp_npy_free(&a);
        return MP_ERR;
    }
    int64_t S = a.shape[a.ndim - 1];
    if (a.shape[a.ndim - 2] != S || S < 1 || S > 65536) {
        mp_err_set(e, "%s: shape [%s]: the last two dimensions must be equal (a square map)", path, shp);
        mp_npy_free(&a);
        return MP_ERR;
    }
    int64_t L = a.ndim >= 3 ? a.shape[0] : 1, H = a.ndim == 4 ? a.shape[1] : 1;
    if (L < 1 || H < 1 || L > PLOT_MAX_INDEX || H > PLOT_MAX_INDEX) {
        mp_err_set(e, "%s: shape [%s] has an empty or too large dimension", path, shp);
        mp_npy_free(&a);
        return MP_ERR;
    }
    int rc = mp_npy_to_f64(&a, &in->data, e);
    int ndim = a.ndim;
    mp_npy_free(&a);
    if (rc != MP_OK) return mp_err_prefix(e, "%s", path);
    in->rank = ndim;
    in->L = (int)L;
    in->H = (int)H;
    in->S = (int)S;
    return MP_OK;
}

/* [L,H,S,S] → [L,S,S]: mean over heads of the finite entries (NaN where no head has one). */
static int plot_heads_mean(PlotInput *in, MpErr *e) {
    size_t SS = (size_t)in->S * in->S;
    double *m = malloc((size_t)in->L * SS * sizeof *m);
    if (!m) return mp_err_set(e, "%s: out of memory", in->path);
    for (int l = 0; l < in->L; l++)
        for (size_t a = 0; a < SS; a++) {
            double s = 0;
            int c = 0;
            for (int h = 0; h < in->H; h++) {
                double v = in->data[((size_t)l * in->H + h) * SS + a];
                if (isfinite(v)) {
                    s += v;
                    c++;
                }
            }
            m[(size_t)l * SS + a] = c ? s / c : NAN;
        }
    free(in->data);
    in->data = m;
    in->H = 1;
    return MP_OK;
}

/* Checks a range list against a dimension: every selected index must exist. */
static int plot_select(unsigned char *mask, const char *spec, int n, const char *what, const char *path,
                       MpErr *e) {
    static unsigned char big[PLOT_MAX_INDEX + 1];
    if (!spec) {
        memset(mask, 1, (size_t)n + 1);
        return MP_OK;
    }
    if (mp_parse_range_list(spec, PLOT_MAX_INDEX, big) < 0)
        return mp_err_set(e, "--%s: '%s' is not a list of ranges like 1-4 or 1,3", what, spec);
    for (int i = n + 1; i <= PLOT_MAX_INDEX; i++)
        if (big[i]) return mp_err_set(e, "%s: has %d %s, but --%s %s selects number %d", path, n, what, what, spec, i);
    memcpy(mask, big, (size_t)n + 1);
    return MP_OK;
}

static const char *plot_basename_stem(char *buf, size_t cap, const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(buf, cap, "%s", b);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf) *dot = '\0';
    return buf;
}

/* --curve: a CSV with a header naming its columns; draws "loss" and "val_loss" against "step".
 * Empty cells (e.g. val_loss on steps without evaluation) are gaps. */
static int plot_curve(const char *cmd, const char *csv, const char *out, const char *title) {
    MpErr oe;
    FILE *f = mp_input_open(csv, NULL, &oe);
    if (!f) return mp_cli_error(cmd, "%s", oe.msg);
    char line[4096];
    int col_step = -1, col_loss = -1, col_val = -1, rc = MP_EXIT_ERROR;
    size_t n = 0, cap = 0;
    double *xs = NULL, *ls = NULL, *vs = NULL;
    if (!fgets(line, sizeof line, f)) {
        mp_cli_error(cmd, "%s: empty file", csv);
        goto done;
    }
    {
        int k = 0;
        for (char *save = NULL, *tok = strtok_r(line, ",\r\n", &save); tok; tok = strtok_r(NULL, ",\r\n", &save), k++) {
            if (!strcmp(tok, "step")) col_step = k;
            else if (!strcmp(tok, "loss")) col_loss = k;
            else if (!strcmp(tok, "val_loss")) col_val = k;
        }
    }
    if (col_step < 0 || col_loss < 0) {
        mp_cli_error(cmd, "%s: the header must name columns 'step' and 'loss'", csv);
        goto done;
    }
    for (size_t row = 2; fgets(line, sizeof line, f); row++) {
        if (n == cap) {
            cap = cap ? 2 * cap : 256;
            double *a = realloc(xs, cap * sizeof *a), *b = a ? realloc(ls, cap * sizeof *b) : NULL,
                   *c = b ? realloc(vs, cap * sizeof *c) : NULL;
            if (a) xs = a;
            if (b) ls = b;
            if (c) vs = c;
            if (!a || !b || !c) {
                mp_cli_error(cmd, "%s: out of memory", csv);
                goto done;
            }
        }
        xs[n] = ls[n] = vs[n] = NAN;
        int k = 0;
        char *p = line;
        for (;; k++) { /* cells may be empty: split by hand, not with strtok */
            char *end = p + strcspn(p, ",\r\n");
            char sep = *end;
            *end = '\0';
            double v = NAN;
            if (*p && mp_parse_double(p, &v) != MP_OK) {
                mp_cli_error(cmd, "%s:%zu: '%s' is not a number", csv, row, p);
                goto done;
            }
            if (k == col_step) xs[n] = v;
            else if (k == col_loss) ls[n] = v;
            else if (k == col_val) vs[n] = v;
            if (sep != ',') break;
            p = end + 1;
        }
        n++;
    }
    {
        MpPlotSeries s[2] = {{xs, ls, (int)n, "training loss", {0.12, 0.47, 0.71}},
                             {xs, vs, (int)n, "validation loss", {0.84, 0.15, 0.16}}};
        MpErr e;
        if (mp_plot_lines(out, title ? title : "Training", "step", "loss (nats per byte)", s, col_val >= 0 ? 2 : 1, &e) != MP_OK)
            mp_cli_error(cmd, "%s", e.msg);
        else
            rc = MP_EXIT_OK;
    }
done:
    fclose(f);
    free(xs), free(ls), free(vs);
    mp_plot_release();
    return rc;
}

/* The flags as given (NaN / -1: not given); applied over the preset by plot_options. */
typedef struct PlotFlags {
    const char *out, *preset, *layers, *heads, *cmap, *title, *curve;
    const char *ptitle[PLOT_MAX_INPUTS];
    int nptitle, cols, shared, diagnorm, annotate, digits, panel_px, index_base, force;
    double vmin, vmax, clip[2];
} PlotFlags;

typedef enum PlotOpt {
    PL_OUT, PL_PRESET, PL_LAYERS, PL_HEADS, PL_COLS, PL_TITLE, PL_PANEL_TITLE, PL_CMAP, PL_VMIN, PL_VMAX, PL_CLIP, PL_SHARED,
    PL_DIAGNORM, PL_ANNOTATE, PL_DIGITS, PL_PANEL_PX, PL_INDEX_BASE, PL_CURVE, PL_FORCE, PL_HELP, PL_COUNT
} PlotOpt;

/* --title: within the figure's title field. */
static int plot_set_title(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    if (strlen(v) >= sizeof((MpPlotOptions *)0)->title)
        return mp_err_set(e, "--title: longer than %zu bytes", sizeof((MpPlotOptions *)0)->title - 1);
    ((PlotFlags *)cfg)->title = v;
    return MP_OK;
}

/* --panel-title, once per input at most. */
static int plot_set_ptitle(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    PlotFlags *fl = cfg;
    if (fl->nptitle >= PLOT_MAX_INPUTS) return mp_err_set(e, "--panel-title: given too often");
    fl->ptitle[fl->nptitle++] = v;
    return MP_OK;
}

/* --clip P,Q: two percentiles. */
static int plot_set_clip(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    double *clip = ((PlotFlags *)cfg)->clip;
    if (mp_parse_double_list(v, clip, 2) != 2 || !(clip[0] >= 0 && clip[0] < clip[1] && clip[1] <= 100))
        return mp_err_set(e, "--clip: '%s' is not P,Q with 0 <= P < Q <= 100", v);
    return MP_OK;
}

#define F(m) offsetof(PlotFlags, m)
#define STR(nm, meta, hlp) MP_OPT_DECL(nm, MP_OPT_STRING, meta, .help = hlp)
#define SWITCH(nm, hlp) MP_OPT_DECL(nm, MP_OPT_BOOL, NULL, .help = hlp)
static const MpOpt plot_opts[PL_COUNT] = {
    [PL_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "PATH", .letter = 'o',
                            .help = "the figure; format from the extension: .png, .pdf or .svg (an existing\n"
                                    "file is replaced only with --force)"), F(out)},
    [PL_PRESET] = {STR("preset", "NAME",
                       "the paper's figures (other flags override the preset):\n"
                       "  fig1  small annotated theory map (e.g. theory --n 3 layer2_scores.npy)\n"
                       "  fig2  layers 1-4, rocket, colour range [0,1] shared\n"
                       "  fig4  layers 1-4: raw row (rocket) + diagonal-normalised row (vlag;\n"
                       "        --cmap sets both rows)\n"
                       "  fig5  layers 1-4 diagonal-normalised, vlag centred on 0, limits\n"
                       "        +-max(|1st|, |99th| percentile) (the report's Figure 5)"), F(preset)},
    [PL_LAYERS] = {STR("layers", "RANGE",
                       "layers of [L,...] inputs, 1-based: 1-4, 2, 1,3-5 (default: all;\n"
                       "fig2/fig4/fig5: 1-4); [S,S] inputs have one map and ignore it"), F(layers)},
    [PL_HEADS] = {STR("heads", "RANGE|mean",
                      "heads of [L,H,S,S] inputs, 1-based (default all); 'mean' averages the\n"
                      "heads' finite entries into one map per layer"), F(heads)},
    [PL_COLS] = {MP_OPT_DECL("cols", MP_OPT_INT, "N", .help = "panels per row (default: one row per input, else up to 4 per row)",
                             .lo = 1, .hi = MP_PLOT_MAX_PANELS), F(cols)},
    [PL_TITLE] = {MP_OPT_DECL("title", MP_OPT_CUSTOM, "TEXT", .help = "figure title", .set = plot_set_title), F(title)},
    [PL_PANEL_TITLE] = {MP_OPT_DECL("panel-title", MP_OPT_CUSTOM, "FMT",
                                    .help = "panel titles: %d = layer, %h = head, %% = %; without %d the text is a\n"
                                            "prefix ('Llama-3, Layer' gives 'Llama-3, Layer 2'). Give it once per\n"
                                            "input to title each input's row (default 'Layer %d')",
                                    .set = plot_set_ptitle), F(ptitle)},
    [PL_CMAP] = {STR("cmap", "NAME",
                     "rocket (default), vlag, RdBu; append _r to reverse. Diverging maps\n"
                     "(vlag, RdBu) get limits symmetric about 0 unless --vmin/--vmax are set"), F(cmap)},
    [PL_VMIN] = {MP_OPT_DECL("vmin", MP_OPT_DOUBLE, "X", .help = "colour limits (default: from the data)", .dlo = -1e300, .dhi = 1e300),
                 F(vmin), .head = "--vmin X, --vmax X"},
    /* the rows HIDE'd are named by another row's line of --help (or the usage's) */
    [PL_VMAX] = {MP_OPT_DECL("vmax", MP_OPT_DOUBLE, "X", .dlo = -1e300, .dhi = 1e300), F(vmax), MP_OPT_HIDE},
    [PL_CLIP] = {MP_OPT_DECL("clip", MP_OPT_CUSTOM, "P,Q", .help = "limits at the P-th and Q-th percentiles of the finite entries",
                             .set = plot_set_clip), F(clip)},
    [PL_SHARED] = {SWITCH("shared", "one set of limits for all panels (raw and normalised rows apart)"), F(shared)},
    [PL_DIAGNORM] = {SWITCH("diagnorm",
                            "diagonal-mean normalise each map first: S_ij - mean over i'-j' = i-j;\n"
                            "the residue is then drawn with vlag centred on 0 and limits\n"
                            "+-max(|1st|, |99th| percentile) per panel, unless --cmap, --clip,\n"
                            "--vmin/--vmax or a preset say otherwise"), F(diagnorm)},
    [PL_ANNOTATE] = {SWITCH("annotate", "print each cell's value (small maps); --digits K decimals (default 3)"), F(annotate)},
    [PL_DIGITS] = {MP_OPT_DECL("digits", MP_OPT_INT, "K", .lo = 0, .hi = 12), F(digits), MP_OPT_HIDE},
    [PL_PANEL_PX] = {MP_OPT_DECL("panel-px", MP_OPT_INT, "N", .help = "heatmap side in pixels (points for PDF/SVG), 40..4000 (default 300)",
                                 .lo = 40, .hi = 4000), F(panel_px)},
    [PL_INDEX_BASE] = {MP_OPT_DECL("index-base", MP_OPT_INT, "0|1",
                                   .help = "label of the first position on the axes (default 0: positions are\n"
                                           "numbered from 0 everywhere, layers and heads from 1; docs/outputs.md)",
                                   .lo = 0, .hi = 1), F(index_base)},
    [PL_CURVE] = {STR("curve", "LOG.csv", NULL), F(curve), MP_OPT_HIDE},
    [PL_FORCE] = {SWITCH("force", NULL), F(force), MP_OPT_HIDE},
    [PL_HELP] = {MP_OPT_DECL("help", MP_OPT_BOOL, NULL, .letter = 'h', .help = "this text"), MP_OPT_NO_FIELD, MP_OPT_HELP},
};
_Static_assert(sizeof plot_opts / sizeof *plot_opts == PL_COUNT, "one row per PlotOpt");

static const MpOptTable plot_table = {"plot", plot_opts, PL_COUNT, 23,
    "usage: maskpos plot IN.npy [IN2.npy ...] -o OUT.{png,pdf,svg} [options]\n"
    "       maskpos plot --curve LOG.csv -o OUT.{png,pdf,svg} [--title T]\n"
    "\n"
    "--curve draws a training log (the log.csv of maskpos train: columns step, loss and,\n"
    "where evaluated, val_loss) as training and validation loss curves.\n"
    "\n"
    "Draws score maps (row = query position, column = key position; NaN = not observed, left\n"
    "blank) as heatmaps with colour bars, one panel per map. Inputs are float32/float64 .npy of\n"
    "shape [S,S], [L,S,S] (one panel per layer) or [L,H,S,S] (one panel per layer and head).\n"
    "\n",
    "\n"
    "Maps larger than the panel are area-averaged over their finite entries (not point-sampled).\n"};

/* Parses argv into fl; MP_CLI_GO with the inputs at argv[*first..], else the exit status
 * (--help, a bad flag). */
static int plot_parse(PlotFlags *fl, int argc, char **argv, int *first) {
    memset(fl, 0, sizeof *fl);
    fl->cols = fl->shared = fl->diagnorm = fl->annotate = fl->digits = fl->panel_px = fl->index_base = -1;
    fl->vmin = fl->vmax = fl->clip[0] = fl->clip[1] = NAN;
    return mp_cli_parse(&plot_table, fl, argc, argv, first, NULL);
}

/* The checks of the flags for ninputs maps, and o = the preset with the flags over it; returns -1
 * to go on, else the exit status. */
static int plot_options(MpPlotOptions *o, const PlotFlags *fl, int ninputs) {
    const char *cmd = "plot";
    if (ninputs < 1) return mp_cli_error(cmd, "no input .npy file (see 'maskpos plot --help')");
    if (ninputs > PLOT_MAX_INPUTS) return mp_cli_error(cmd, "at most %d input files", PLOT_MAX_INPUTS);
    if (!fl->out) return mp_cli_error(cmd, "no output file: give -o OUT.png, .pdf or .svg");
    if (mp_plot_format_from_path(fl->out) < 0)
        return mp_cli_error(cmd, "%s: unknown output extension (use .png, .pdf or .svg)", fl->out);
    if (fl->nptitle > 1 && fl->nptitle != ninputs)
        return mp_cli_error(cmd, "--panel-title given %d times for %d inputs (give it once, or once per input)",
                            fl->nptitle, ninputs);
    MpErr e;
    if (fl->preset && mp_plot_preset_apply(o, fl->preset, &e) != MP_OK) return mp_cli_error(cmd, "--preset: %s", e.msg);
    MpPlotCmap cm;
    if (fl->cmap && mp_plot_cmap_find(&cm, fl->cmap) != MP_OK)
        return mp_cli_error(cmd, "--cmap: unknown colour map '%s' (known: %s)", fl->cmap, mp_plot_cmap_names());
    if (!isnan(fl->vmin) && !isnan(fl->vmax) && !(fl->vmin < fl->vmax))
        return mp_cli_error(cmd, "--vmin %g must be below --vmax %g", fl->vmin, fl->vmax);
    static unsigned char probe[PLOT_MAX_INDEX + 1];
    if (fl->heads && strcmp(fl->heads, "mean") && mp_parse_range_list(fl->heads, PLOT_MAX_INDEX, probe) < 0)
        return mp_cli_error(cmd, "--heads: '%s' is not 'mean' or a list of ranges like 1-4", fl->heads);
    if (fl->layers && mp_parse_range_list(fl->layers, PLOT_MAX_INDEX, probe) < 0)
        return mp_cli_error(cmd, "--layers: '%s' is not a list of ranges like 1-4 or 1,3", fl->layers);
    /* explicit flags over the preset */
    if (fl->cmap) o->cmap = fl->cmap;
    if (fl->title) snprintf(o->title, sizeof o->title, "%s", fl->title);
    if (fl->shared >= 0) o->shared = fl->shared;
    if (fl->diagnorm >= 0) o->diagnorm = fl->diagnorm;
    if (fl->diagnorm > 0 && !fl->preset) { /* a residue: signed, centred on 0, robust limits */
        if (!fl->cmap) o->cmap = "vlag";
        if (isnan(fl->clip[0]) && isnan(fl->vmin) && isnan(fl->vmax)) o->clip_lo = 1, o->clip_hi = 99;
    }
    if (fl->annotate >= 0) o->annotate = fl->annotate;
    if (fl->digits >= 0) o->annotate_digits = fl->digits;
    if (fl->panel_px >= 0) o->panel_px = fl->panel_px;
    if (fl->index_base >= 0) o->index_base = fl->index_base;
    if (!isnan(fl->clip[0])) { /* percentiles replace the preset's fixed limits */
        o->clip_lo = fl->clip[0];
        o->clip_hi = fl->clip[1];
        o->vmin = o->vmax = NAN;
    }
    if (!isnan(fl->vmin)) o->vmin = fl->vmin;
    if (!isnan(fl->vmax)) o->vmax = fl->vmax;
    if (!isnan(o->vmin) && !isnan(o->vmax) && !(o->vmin < o->vmax))
        return mp_cli_error(cmd, "colour limits: vmin %g must be below vmax %g (--vmin/--vmax with the preset's)",
                            o->vmin, o->vmax);
    return -1;
}

/* The panels being built: the grid so far and the row length of each input (fig4: of each pass). */
typedef struct PlotGrid {
    MpPlotPanel *panels; /* [MP_PLOT_MAX_PANELS] */
    int np, rowlen, rows_consistent;
    unsigned char *lmask, *hmask; /* [PLOT_MAX_INDEX + 1] scratch: selected layers, heads */
} PlotGrid;

/* Panel (layer l, head h) of input x in pass `pass` (fig4's second pass: the normalised residue),
 * titled by fmt. Returns MP_EXIT_OK or the exit status of an error. */
static int plot_add_panel(PlotGrid *g, const PlotFlags *fl, const PlotInput *x, int l, int h, int pass, const char *fmt,
                          int head_each) {
    const char *cmd = "plot";
    if (g->np >= MP_PLOT_MAX_PANELS)
        return mp_cli_error(cmd, "too many panels (at most %d): select fewer with --layers/--heads", MP_PLOT_MAX_PANELS);
    const size_t SS = (size_t)x->S * x->S;
    MpPlotPanel *p = &g->panels[g->np];
    memset(p, 0, sizeof *p);
    p->map = x->data + ((size_t)(l - 1) * x->H + (h - 1)) * SS;
    p->rows = p->cols = x->S;
    p->group = pass;
    if (pass == 1) { /* fig4's second row: the non-relative residue */
        p->diagnorm = 1;
        if (!fl->cmap) p->cmap = "vlag"; /* signed residue; --cmap sets both rows */
    }
    char t[sizeof p->title];
    MpErr e;
    if (mp_plot_title_format(t, sizeof t, fmt, l, h, &e) != MP_OK) return mp_cli_error(cmd, "--panel-title: %s", e.msg);
    const char *suffix = pass == 1 ? (t[0] ? ", normalised" : "normalised") : "";
    size_t tl = strlen(t), sl = strlen(suffix);
    if (tl + sl < sizeof p->title) memcpy(t + tl, suffix, sl + 1); /* else: no suffix */
    memcpy(p->title, t, sizeof p->title);
    /* an all-NaN map is an input error: name the file and the layer */
    size_t fin = 0;
    for (size_t a = 0; a < SS; a++) fin += isfinite(p->map[a]) != 0;
    if (!fin) {
        if (x->rank == 2) return mp_cli_error(cmd, "%s: the map has no finite entries (only NaN or ±Inf)", x->path);
        if (head_each) return mp_cli_error(cmd, "%s: layer %d, head %d has no finite entries (only NaN or ±Inf)", x->path, l, h);
        return mp_cli_error(cmd, "%s: layer %d has no finite entries (only NaN or ±Inf)", x->path, l);
    }
    g->np++;
    return MP_EXIT_OK;
}

/* The significance of each layer under its panel's title, when the input is a run's map with its
 * meta.json beside it (probe, simulate, the Accumulator): a residue panel whose layer is not
 * resolved is washed out and framed in red (docs/plot.md). Panels [from, g->np) of input x, one per layer. */
static void plot_notes(PlotGrid *g, int from, const PlotInput *x, const PlotFlags *fl) {
    char dir[4096], mp[4200];
    snprintf(dir, sizeof dir, "%s", x->path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    snprintf(mp, sizeof mp, "%s/meta.json", slash ? dir : ".");
    MpErr e;
    json_t *meta = mp_file_exists(mp) ? mp_json_read(mp, &e) : NULL;
    const json_t *ly = json_object_get(meta, "layers");
    const int L = json_is_array(ly) ? (int)json_array_size(ly) : json_is_integer(ly) ? (int)json_integer_value(ly) : -1;
    const char *base = slash ? slash + 1 : x->path;
    const int residue = !strncmp(base, "scores_diagnorm", 15);
    if (meta && L == x->L && x->rank == 3 && !strncmp(base, "scores", 6))
        for (int k = from; k < g->np; k++) {
            MpPlotPanel *p = &g->panels[k];
            const int l = (int)((p->map - x->data) / ((size_t)x->S * x->S)); /* the panel's layer slot */
            const int r = mp_signif_note_meta(p->note, sizeof p->note, meta, l);
            p->unresolved = r == 1 && (residue || p->diagnorm || fl->diagnorm || (fl->preset && !strcmp(fl->preset, "fig5")));
        }
    if (meta) json_decref(meta);
}

/* Reads input f (path) into x and adds its panels to g. Returns MP_EXIT_OK or an exit status. */
static int plot_input_panels(PlotGrid *g, PlotInput *x, const PlotFlags *fl, const char *path, int f, int ninputs) {
    const char *cmd = "plot";
    const int fig4 = fl->preset && !strcmp(fl->preset, "fig4");
    const int first4 = fl->preset && (!strcmp(fl->preset, "fig2") || fig4 || !strcmp(fl->preset, "fig5"));
    const int mean = fl->heads && !strcmp(fl->heads, "mean");
    MpErr e;
    if (plot_read_input(x, path, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    if (fl->heads && x->rank != 4) return mp_cli_error(cmd, "%s: --heads needs an [L,H,S,S] input, this one has rank %d", path, x->rank);
    if (mean && plot_heads_mean(x, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    const char *lspec = fl->layers;
    char def[32];
    if (!lspec && first4 && x->rank >= 3) {
        snprintf(def, sizeof def, "1-%d", x->L < 4 ? x->L : 4);
        lspec = def;
    }
    if (x->rank == 2) memset(g->lmask, 1, 2);
    else if (plot_select(g->lmask, lspec, x->L, "layers", path, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    const int head_each = x->H > 1 || (x->rank == 4 && !mean);
    if (head_each && plot_select(g->hmask, fl->heads, x->H, "heads", path, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    /* title format of this input */
    char stem[128], fmtbuf[256];
    const char *fmt = fl->nptitle == 1 ? fl->ptitle[0] : fl->nptitle > 1 ? fl->ptitle[f] : NULL;
    if (!fmt) {
        if (x->rank == 2) fmt = ninputs > 1 ? plot_basename_stem(stem, sizeof stem, path) : "";
        else fmt = head_each ? "Layer %d, head %h" : "Layer %d";
    } else if (x->rank >= 3 && *fmt && !strstr(fmt, "%d")) {
        snprintf(fmtbuf, sizeof fmtbuf, "%s %%d", fmt);
        fmt = fmtbuf;
    }
    const int before = g->np;
    for (int pass = 0; pass < (fig4 ? 2 : 1); pass++) {
        const int start = g->np;
        for (int l = 1; l <= x->L; l++) {
            if (!g->lmask[l]) continue;
            for (int h = 1; h <= x->H; h++) {
                if (head_each && !g->hmask[h]) continue;
                const int rc = plot_add_panel(g, fl, x, l, h, pass, fmt, head_each);
                if (rc != MP_EXIT_OK) return rc;
            }
        }
        const int len = g->np - start;
        if (g->rowlen < 0) g->rowlen = len;
        else if (g->rowlen != len) g->rows_consistent = 0;
    }
    if (g->np == before) return mp_cli_error(cmd, "%s: no panel selected", path);
    plot_notes(g, before, x, fl);
    return MP_EXIT_OK;
}

int mp_cmd_plot(int argc, char **argv) {
    const char *cmd = "plot";
    PlotFlags fl;
    int first;
    int rc = plot_parse(&fl, argc, argv, &first);
    if (rc != MP_CLI_GO) return rc;
    const int ninputs = argc - first;
    if (fl.out) { /* an existing figure is replaced only with --force */
        MpErr oe;
        if (mp_outfile_claim(fl.out, fl.force, &oe) != MP_OK) return mp_cli_error(cmd, "%s", oe.msg);
    }
    if (fl.curve) {
        if (ninputs > 0) return mp_cli_error(cmd, "--curve takes no .npy inputs (got '%s')", argv[first]);
        if (!fl.out) return mp_cli_error(cmd, "no output file: give -o OUT.png, .pdf or .svg");
        return plot_curve(cmd, fl.curve, fl.out, fl.title);
    }
    MpPlotOptions o;
    mp_plot_options_default(&o);
    rc = plot_options(&o, &fl, ninputs);
    if (rc >= 0) return rc;
    const int fig4 = fl.preset && !strcmp(fl.preset, "fig4");

    /* ---- read the inputs and build the panels */
    PlotInput *in = calloc((size_t)ninputs, sizeof *in);
    PlotGrid g = {calloc(MP_PLOT_MAX_PANELS, sizeof *g.panels), 0, -1, 1, malloc(PLOT_MAX_INDEX + 1), malloc(PLOT_MAX_INDEX + 1)};
    double(*lim)[2] = malloc(MP_PLOT_MAX_PANELS * sizeof *lim);
    if (!in || !g.panels || !g.lmask || !g.hmask || !lim) mp_die("out of memory");
    rc = MP_EXIT_OK;
    for (int f = 0; f < ninputs && rc == MP_EXIT_OK; f++) rc = plot_input_panels(&g, &in[f], &fl, argv[first + f], f, ninputs);
    if (rc == MP_EXIT_OK) {
        MpErr e;
        if (fl.cols > 0) o.cols = fl.cols;
        else if ((ninputs > 1 || fig4) && g.rows_consistent && g.rowlen > 0 && g.rowlen <= 8) o.cols = g.rowlen;
        if (mp_plot_render_ex(fl.out, g.panels, g.np, &o, lim, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
        } else {
            printf("maskpos plot: wrote %s (%d panel%s)\n", fl.out, g.np, g.np == 1 ? "" : "s");
            for (int k = 0; k < g.np; k++) {
                const char *cm = g.panels[k].cmap ? g.panels[k].cmap : o.cmap;
                printf("  %-40s %s, colour limits [%.6g, %.6g]%s\n", g.panels[k].title[0] ? g.panels[k].title : "(untitled)",
                       cm, lim[k][0], lim[k][1], lim[k][0] == -lim[k][1] ? " (symmetric about 0)" : "");
            }
        }
    }
    mp_plot_release();
    for (int f = ninputs - 1; f >= 0; f--) free(in[f].data);
    free(lim);
    free(g.hmask);
    free(g.lmask);
    free(g.panels);
    free(in);
    return rc;
}
