/* view.h — the interactive map viewer: one self-contained HTML page (no network, no external
 * script) made from runs' .npy and meta.json files, drawn on canvases by a script embedded in it.
 *
 * Legend: L = layers, H = query heads, S = positions; a map is (S,S) row-major, row = query i,
 * column = key j, NaN = not observed (the causal mask).
 *
 * Implements:
 *   - reading a run folder: scores.npy (or theory's layer_scores.npy / layer2_scores.npy, or
 *     gram's gram.npy, its nine matrices in place of layers),
 *     and when present scores_se.npy, probs.npy and scores_heads.npy, with meta.json; shapes are
 *     checked against scores.npy, a bad file is an error naming it;
 *   - the storage of every map (docs/view.md): scores and per-head maps as their residue
 *     R = S − (mean of S's diagonal i − j) plus the diagonal means in float64; residues, standard
 *     errors and probabilities in float16 scaled by a power of two per map (|error| ≤ 2^-11·|value|),
 *     or, for per-head maps that do not fit the size budget, quantised to 8 bits per map
 *     (value = lo + code·sc, |error| ≤ sc/2, code 255 = not observed) and area-averaged by
 *     2, 4, ... until they fit; maps wider than max_side are averaged over f x f blocks (f the
 *     smallest integer giving at most max_side; observed entries only, blank under a quarter
 *     observed, as viz/plot.h's mp_plot_raster_average), with a note; causal maps store their
 *     lower triangle only;
 *   - for runs made with `probe --data`: the text of the first sequence, rebuilt with the run's
 *     tokenizer and trusted only when the ids hash to meta.json's data_hash;
 *   - the page: style, per-viewer data (JSON header + one base64 blob per run) and the script
 *     (view.js, view.css, embedded at build time as C strings); the escaping of every string
 *     embedded in a page (mp_html_text, mp_html_json: also report.html's).
 * Does not: compute statistics (probe/simulate did), or draw anything itself (the page does).
 * Tested by: tests/test_view.c (encoding against the .npy within the stated precision, bad input)
 * and tests/browser/check_view.js (the page in headless Chromium: hover values, switches, errors).
 */
#ifndef MP_VIZ_VIEW_H
#define MP_VIZ_VIEW_H

#include <stddef.h>
#include <stdio.h>

#include "core/err.h" /* MpErr */

#define MP_VIEW_MAX_RUNS 8

typedef struct MpViewOptions {
    double max_mb;      /* size budget of one viewer's data in the page (MiB, base64 included); 48 */
    int max_side;       /* maps wider than this are area-averaged to at most it; 1024 */
    int tokens;         /* 1: show the text of --data runs (rebuilds the first sequence); 1 */
    char title[256];    /* page title ("" = from the runs) */
    int compact;        /* 1: the mean maps too in 8 bits (report.html's viewers); 0 */
} MpViewOptions;

void mp_view_options_default(MpViewOptions *o);

/* What a viewer holds, for the caller to print. */
typedef struct MpViewSummary {
    size_t data_bytes;           /* base64 bytes of all blobs */
    int nruns;
    char notes[MP_VIEW_MAX_RUNS][800]; /* per run: shapes, encodings, averaging */
} MpViewSummary;

/* A whole page at path (written atomically) showing the runs in dirs[n] (1..MP_VIEW_MAX_RUNS);
 * labels[n] may be NULL (the folder names are used). sum may be NULL. MP_ERR + message naming
 * the folder or file on bad input. */
int mp_view_write_html(const char *path, const char *const *dirs, const char *const *labels, int n,
                       const MpViewOptions *o, MpViewSummary *sum, MpErr *e);

/* Parts, to put viewers into another page (viz/report.c): the <style> element (in <head>), one
 * viewer (an element with the given id, unique in the page, and its data), and the <script>
 * element with the viewer code, once, after the last viewer. */
void mp_view_write_style(FILE *f);
int mp_view_write_block(FILE *f, const char *id, const char *const *dirs, const char *const *labels, int n,
                        const MpViewOptions *o, MpViewSummary *sum, MpErr *e);
void mp_view_write_script(FILE *f);

/* Strings in a page, one escaping for every context (issue 40: `<!--<script>` in a label left the
 * viewer's JSON unparsed). mp_html_text: element text and double- or single-quoted attribute
 * values (& < > " ' as entities). mp_html_json: JSON text inside a <script> element, with every
 * < > & as \u003c \u003e \u0026 (they occur only inside JSON strings, where these escapes mean
 * the same characters), so no "</script", "<!--" or "<script" can appear in it. */
void mp_html_text(FILE *f, const char *s);
void mp_html_json(FILE *f, const char *json);

/* ---------------------------------------------------------------- storage (also for tests) */

/* The float16 exponent of a map: the smallest k with max|v|·2^-k ≤ 32768 (0 when no finite v). */
int mp_view_f16_exponent(const double *v, size_t n);

#endif
