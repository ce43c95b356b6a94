/* view.c — `maskpos view`: one self-contained HTML page to look at runs' maps interactively.
 *
 *   maskpos view results/fig5/rope -o view.html
 *   maskpos view causal/ bidirectional/ --label causal --label "no mask" -o compare.html
 * The library (viz/view.h) reads the folders and writes the page; this file parses flags and
 * prints what was stored (docs/view.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/files.h" /* mp_outfile_claim: an existing -o file is not replaced without --force */
#include "core/util.h"  /* mp_time_now */
#include "viz/view.h"   /* mp_view_write_html */

static const char *view_help =
    "usage: maskpos view DIR [DIR...] -o FILE.html [--force] [--label NAME]... [--title T]\n"
    "                    [--max-mb M] [--max-side N] [--no-text]\n"
    "\n"
    "Writes one self-contained HTML page (no network, no external scripts) to explore the maps of\n"
    "up to 8 run folders (simulate, probe, reproduce stages, theory --out) side by side: layer and\n"
    "head selectors, raw / diagonal-mean normalised / standard error / z / probability views, the\n"
    "figures' colour maps and limits, hover read-out, drag-zoom, row and column profiles, and the\n"
    "difference of two runs (docs/view.md).\n"
    "\n"
    "  -o, --out FILE   the page to write (required; an existing FILE is refused)\n"
    "  --force          replace an existing FILE\n"
    "  --label NAME     name of the next folder's panels (repeat in folder order; default: folder name)\n"
    "  --title T        page title\n"
    "  --max-mb M       size budget of the page's data in MiB (default 48): per-head maps that do not\n"
    "                   fit in float16 are stored in 8 bits, then area-averaged by 2, 4, ...\n"
    "  --max-side N     maps wider than N positions are area-averaged to at most N (default 1024)\n"
    "  --no-text        do not rebuild the text of probe --data runs for the hover read-out\n";

int mp_cmd_view(int argc, char **argv) {
    const char *cmd = "view", *out = NULL, *labels[MP_VIEW_MAX_RUNS] = {0};
    int nlabels = 0, force = 0;
    MpViewOptions o;
    mp_view_options_default(&o);
    static const struct option opts[] = {{"out", required_argument, 0, 'o'},      {"label", required_argument, 0, 'l'},
                                         {"title", required_argument, 0, 't'},    {"max-mb", required_argument, 0, 'm'},
                                         {"max-side", required_argument, 0, 's'}, {"no-text", no_argument, 0, 'x'},
                                         {"force", no_argument, 0, 'f'},          {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'l':
            if (nlabels >= MP_VIEW_MAX_RUNS) return mp_cli_error(cmd, "--label: at most %d", MP_VIEW_MAX_RUNS);
            labels[nlabels++] = optarg;
            break;
        case 't': snprintf(o.title, sizeof o.title, "%s", optarg); break;
        case 'm': o.max_mb = mp_cli_double(cmd, "--max-mb", optarg, 0.01, 4096); break;
        case 's': o.max_side = (int)mp_cli_i64(cmd, "--max-side", optarg, 16, 8192); break;
        case 'x': o.tokens = 0; break;
        case 'f': force = 1; break;
        case 'h': fputs(view_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    int n = argc - optind;
    if (n < 1) return mp_cli_error(cmd, "give at least one run folder (see maskpos view --help)");
    if (n > MP_VIEW_MAX_RUNS) return mp_cli_error(cmd, "%d run folders: at most %d", n, MP_VIEW_MAX_RUNS);
    if (!out) return mp_cli_error(cmd, "-o FILE.html is required");
    if (nlabels && nlabels != n) return mp_cli_error(cmd, "%d --label for %d folders: give one per folder", nlabels, n);
    MpErr e;
    if (mp_outfile_claim(out, force, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    double t0 = mp_time_now();
    MpViewSummary sum;
    if (mp_view_write_html(out, (const char *const *)argv + optind, nlabels ? labels : NULL, n, &o, &sum, &e) != MP_OK)
        return mp_cli_error(cmd, "%s", e.msg);
    for (int r = 0; r < sum.nruns; r++) printf("%s\n", sum.notes[r]);
    printf("wrote %s (%.1f MiB of map data) in %.2f s\n", out, sum.data_bytes / 1048576.0, mp_time_now() - t0);
    return MP_EXIT_OK;
}
