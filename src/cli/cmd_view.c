/* cmd_view.c — `maskpos view`: one self-contained HTML page to look at runs' maps interactively.
 *
 *   maskpos view results/fig5/rope -o view.html
 *   maskpos view causal/ bidirectional/ --label causal --label "no mask" -o compare.html
 * The library (viz/view.h) reads the folders and writes the page; this file parses flags and
 * prints what was stored (docs/view.md).
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/files.h" /* mp_outfile_claim: an existing -o file is not replaced without --force */
#include "core/util.h"  /* mp_time_now */
#include "viz/view.h"   /* mp_view_write_html */

/* The flags' values: the page's options and the command's own. */
typedef struct ViewFlags {
    MpViewOptions o;
    const char *out, *labels[MP_VIEW_MAX_RUNS];
    int nlabels, force;
} ViewFlags;

typedef enum ViewOpt { VI_OUT, VI_FORCE, VI_LABEL, VI_TITLE, VI_MAX_MB, VI_MAX_SIDE, VI_NO_TEXT, VI_COUNT } ViewOpt;

/* --label NAME, once per folder at most. */
static int view_set_label(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    ViewFlags *fl = cfg;
    if (fl->nlabels >= MP_VIEW_MAX_RUNS) return mp_err_set(e, "--label: at most %d", MP_VIEW_MAX_RUNS);
    fl->labels[fl->nlabels++] = v;
    return MP_OK;
}

/* --title T: the page's title (cut to its field). */
static int view_set_title(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o, (void)e;
    snprintf(((ViewFlags *)cfg)->o.title, sizeof((ViewFlags *)cfg)->o.title, "%s", v);
    return MP_OK;
}

#define F(m) offsetof(ViewFlags, m)
static const MpOpt view_opts[VI_COUNT] = {
    [VI_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "FILE", .letter = 'o', .help = "the page to write (required; an existing FILE is refused)"),
                F(out)},
    [VI_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL, .help = "replace an existing FILE"), F(force)},
    [VI_LABEL] = {MP_OPT_DECL("label", MP_OPT_CUSTOM, "NAME",
                              .help = "name of the next folder's panels (repeat in folder order; default: folder name)",
                              .set = view_set_label), F(labels)},
    [VI_TITLE] = {MP_OPT_DECL("title", MP_OPT_CUSTOM, "T", .help = "page title", .set = view_set_title), F(o.title)},
    [VI_MAX_MB] = {MP_OPT_DECL("max-mb", MP_OPT_DOUBLE, "M",
                               .help = "size budget of the page's data in MiB (default 48): per-head maps that do not\n"
                                       "fit in float16 are stored in 8 bits, then area-averaged by 2, 4, ...",
                               .dlo = 0.01, .dhi = 4096), F(o.max_mb)},
    [VI_MAX_SIDE] = {MP_OPT_DECL("max-side", MP_OPT_INT, "N",
                                 .help = "maps wider than N positions are area-averaged to at most N (default 1024)", .lo = 16,
                                 .hi = 8192), F(o.max_side)},
    [VI_NO_TEXT] = {MP_OPT_DECL("no-text", MP_OPT_BOOL, NULL, .help = "do not rebuild the text of probe --data runs for the hover read-out"),
                    F(o.tokens), MP_OPT_OFF},
};
_Static_assert(sizeof view_opts / sizeof *view_opts == VI_COUNT, "one row per ViewOpt");

static const MpOptTable view_table = {"view", view_opts, VI_COUNT, 19,
    "usage: maskpos view DIR [DIR...] -o FILE.html [--force] [--label NAME]... [--title T]\n"
    "                    [--max-mb M] [--max-side N] [--no-text]\n"
    "\n"
    "Writes one self-contained HTML page (no network, no external scripts) to explore the maps of\n"
    "up to 8 run folders (simulate, probe, reproduce stages, theory --out) side by side: layer and\n"
    "head selectors, raw / diagonal-mean normalised / standard error / z / probability views, the\n"
    "figures' colour maps and limits, hover read-out, drag-zoom, row and column profiles, and the\n"
    "difference of two runs (docs/view.md).\n"
    "\n",
    NULL};

int mp_cmd_view(int argc, char **argv) {
    const char *cmd = "view";
    ViewFlags fl = {.nlabels = 0};
    mp_view_options_default(&fl.o);
    int first;
    const int prc = mp_cli_parse(&view_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    const char *out = fl.out, *const *labels = fl.labels;
    const int nlabels = fl.nlabels, force = fl.force;
    const MpViewOptions o = fl.o;
    int n = argc - first;
    if (n < 1) return mp_cli_error(cmd, "give at least one run folder (see maskpos view --help)");
    if (n > MP_VIEW_MAX_RUNS) return mp_cli_error(cmd, "%d run folders: at most %d", n, MP_VIEW_MAX_RUNS);
    if (!out) return mp_cli_error(cmd, "-o FILE.html is required");
    if (nlabels && nlabels != n) return mp_cli_error(cmd, "%d --label for %d folders: give one per folder", nlabels, n);
    MpErr e;
    if (mp_outfile_claim(out, force, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    double t0 = mp_time_now();
    MpViewSummary sum;
    if (mp_view_write_html(out, (const char *const *)argv + first, nlabels ? labels : NULL, n, &o, &sum, &e) != MP_OK)
        return mp_cli_error(cmd, "%s", e.msg);
    for (int r = 0; r < sum.nruns; r++) printf("%s\n", sum.notes[r]);
    printf("wrote %s (%.1f MiB of map data) in %.2f s\n", out, sum.data_bytes / 1048576.0, mp_time_now() - t0);
    return MP_EXIT_OK;
}
