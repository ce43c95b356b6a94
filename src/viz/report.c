/* report.c — see report.h. */
#include "viz/report.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* MpAtomicFile, mp_path_join, mp_file_exists, mp_input_open */
#include "viz/view.h"  /* interactive viewers under the figures */

/* ================================================================ the document */

static char *report_strdup(const char *s) {
    const size_t n = strlen(s) + 1;
    return memcpy(mp_malloc_or_die(n, "report text"), s, n);
}

void mp_report_free(MpReport *r) {
    for (int i = 0; i < r->nfigs; i++) {
        for (int v = 0; v < r->figs[i].nviews; v++) free(r->figs[i].views[v]);
        free(r->figs[i].views);
        free(r->figs[i].caption);
        free(r->figs[i].path);
    }
    for (int i = 0; i < r->nrows; i++) {
        free(r->rows[i].what);
        free(r->rows[i].expected);
        free(r->rows[i].measured);
        free(r->rows[i].note);
    }
    free(r->footer);
    for (int c = 0; c < r->stats_cols; c++) free(r->stats_head[c]);
    for (int i = 0; i < r->stats_rows * r->stats_cols; i++) free(r->stats[i]);
    free(r->rows);
    free(r->figs);
    free(r->stats_head);
    free(r->stats);
    memset(r, 0, sizeof *r);
}

void mp_report_row(MpReport *r, const char *what, const char *expected, const char *measured, int ok,
                   const char *note) {
    r->rows = mp_grow_or_die(r->rows, &r->cap_rows, r->nrows, sizeof *r->rows, "the report's rows");
    MpReportRow *w = &r->rows[r->nrows++];
    w->what = report_strdup(what);
    w->expected = report_strdup(expected);
    w->measured = report_strdup(measured);
    w->note = report_strdup(note ? note : "");
    w->ok = ok;
    r->npass += ok != 0;
}

void mp_report_fig(MpReport *r, const char *caption, const char *path) {
    r->figs = mp_grow_or_die(r->figs, &r->cap_figs, r->nfigs, sizeof *r->figs, "the report's figures");
    MpReportFig *g = &r->figs[r->nfigs++];
    memset(g, 0, sizeof *g);
    g->caption = report_strdup(caption);
    g->path = report_strdup(path);
}

void mp_report_footer(MpReport *r, const char *a, const char *b, const char *c) {
    const char *part[3] = {a, b ? b : "", c ? c : ""};
    size_t n = 0;
    for (int i = 0; i < 3; i++) n += strlen(part[i]);
    free(r->footer);
    r->footer = mp_malloc_or_die(n + 1, "report text");
    r->footer[0] = '\0';
    for (int i = 0; i < 3; i++) strcat(r->footer, part[i]);
}

void mp_report_fig_view(MpReport *r, const char *fig_path, const char *dir) {
    int found = 0;
    for (int i = 0; i < r->nfigs; i++) {
        MpReportFig *g = &r->figs[i];
        if (strcmp(g->path, fig_path)) continue;
        g->views = mp_grow_or_die(g->views, &g->cap_views, g->nviews, sizeof *g->views, "the report's viewer folders");
        g->views[g->nviews++] = report_strdup(dir);
        found = 1;
    }
    MP_ASSERT(found); /* a viewer under a figure that was never added */
}

void mp_report_stats_head(MpReport *r, const char *title, const char *const *head, int ncols) {
    MP_ASSERT(ncols >= 1 && !r->stats_cols && !r->stats_rows);
    snprintf(r->stats_title, sizeof r->stats_title, "%s", title);
    r->stats_head = mp_calloc_or_die((size_t)ncols, sizeof *r->stats_head, "report head");
    for (int c = 0; c < ncols; c++) r->stats_head[c] = report_strdup(head[c]);
    r->stats_cols = ncols;
}

int mp_report_stats_row(MpReport *r, const char *const *cells, int ncols, MpErr *e) {
    if (ncols != r->stats_cols)
        return mp_err_set(e, "report: a statistics row of %d columns in a table of %d (\"%s\")", ncols, r->stats_cols,
                          ncols > 0 ? cells[0] : "");
    for (int c = 0; c < ncols; c++) {
        r->stats = mp_grow_or_die(r->stats, &r->cap_stats, r->stats_rows * ncols + c, sizeof *r->stats, "the report's statistics cells");
        r->stats[r->stats_rows * ncols + c] = report_strdup(cells[c]);
    }
    r->stats_rows++;
    return MP_OK;
}

/* ================================================================ Markdown */

/* A table cell: '|' would end the cell, so it is written as '\|' (GitHub-flavoured Markdown). */
static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputc('\\', f);
        fputc(*s, f);
    }
}

/* 1 for the paper's own figures ("Figure ..."), the ones the summary names first. */
static int report_fig_main(const MpReportFig *g) { return !strncmp(g->caption, "Figure", 6); }

/* The short name of figure k for the summary: its caption up to the first ':' or " at ", cut at
 * a word boundary past 52 bytes. */
static void report_fig_name(char *buf, size_t cap, const MpReportFig *g) {
    size_t n = strcspn(g->caption, ":");
    const char *at = strstr(g->caption, " at ");
    if (at && (size_t)(at - g->caption) < n) n = (size_t)(at - g->caption);
    if (n > 52) {
        size_t b = 52;
        while (b > 30 && g->caption[b] != ' ') b--;
        n = b;
    }
    snprintf(buf, cap, "%.*s", (int)n, g->caption);
}

/* The figures of one list (the paper's or the others) as groups of equal short names: the first
 * index of each group in first[], its size in count[]; returns the number of groups. */
static int report_fig_groups(const MpReport *r, int main_figs, int *first, int *count) {
    char a[96], b[96];
    int ng = 0;
    for (int i = 0; i < r->nfigs; i++) {
        if (report_fig_main(&r->figs[i]) != main_figs) continue;
        report_fig_name(a, sizeof a, &r->figs[i]);
        int g = 0;
        for (; g < ng; g++) {
            report_fig_name(b, sizeof b, &r->figs[first[g]]);
            if (!strcmp(a, b)) break;
        }
        if (g == ng) first[ng] = i, count[ng++] = 0;
        count[g]++;
    }
    return ng;
}

/* The one-screen summary at the top: verdict counts, the rows that differ, the figures. */
static void report_md_summary(FILE *f, const MpReport *r) {
    fprintf(f, "**Summary: %d of %d rows agree with the paper, %d differ.**", r->npass, r->nrows, r->nrows - r->npass);
    for (int i = 0, k = 0; i < r->nrows; i++)
        if (!r->rows[i].ok) fprintf(f, "%s%s", k++ ? "; " : " Differ: ", r->rows[i].what);
    char name[96];
    int *first = mp_calloc_or_die((size_t)r->nfigs + 1, 2 * sizeof(int), "report summary"), *count = first + r->nfigs + 1;
    for (int pass = 0; pass < 2; pass++) {
        fprintf(f, pass ? "\n\nMore figures:" : "\n\nFigures of the paper:");
        const int ng = report_fig_groups(r, !pass, first, count);
        for (int g = 0; g < ng; g++) {
            report_fig_name(name, sizeof name, &r->figs[first[g]]);
            fprintf(f, "%s [%s](%s)", g ? " ·" : "", name, r->figs[first[g]].path);
            if (count[g] > 1) fprintf(f, " (%d figures)", count[g]);
        }
    }
    free(first);
    fprintf(f, "\n\n");
}

int mp_report_write_md(const MpReport *r, const char *path, MpErr *e) {
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    FILE *f = af.f;
    fprintf(f, "# %s\n\n", r->title);
    report_md_summary(f, r);
    fprintf(f, "%s\n\n%s\n\n| quantity | expected (paper) | measured (this run) | verdict |\n|---|---|---|---|\n", r->intro,
            r->method);
    for (int i = 0; i < r->nrows; i++) {
        const MpReportRow *w = &r->rows[i];
        const char *cells[3] = {w->what, w->expected, w->measured};
        for (int c = 0; c < 3; c++) {
            fputs("| ", f);
            md_cell(f, cells[c]);
            fputc(' ', f);
        }
        fprintf(f, "| %s%s", w->ok ? "✓ agrees" : "⚠ differs", w->note[0] ? ": " : "");
        md_cell(f, w->note);
        fputs(" |\n", f);
    }
    fprintf(f, "\n%d of %d rows agree.\n\n", r->npass, r->nrows);
    if (r->nfigs) fprintf(f, "## Figures\n\n");
    for (int i = 0; i < r->nfigs; i++)
        fprintf(f, "### %s\n\n![%s](%s)\n\n", r->figs[i].caption, r->figs[i].caption, r->figs[i].path);
    if (r->stats_rows) {
        fprintf(f, "## %s\n\n|", r->stats_title);
        for (int c = 0; c < r->stats_cols; c++) fprintf(f, " %s |", r->stats_head[c]);
        fprintf(f, "\n|");
        for (int c = 0; c < r->stats_cols; c++) fprintf(f, "---|");
        fprintf(f, "\n");
        for (int i = 0; i < r->stats_rows; i++) {
            fprintf(f, "|");
            for (int c = 0; c < r->stats_cols; c++) fprintf(f, " %s |", r->stats[i * r->stats_cols + c]);
            fprintf(f, "\n");
        }
    }
    if (r->footer && r->footer[0]) fprintf(f, "\n%s\n", r->footer);
    return mp_atomic_commit(&af, e);
}

/* ================================================================ HTML */

int mp_html_base64_file(FILE *f, const char *path, MpErr *e) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    FILE *in = mp_input_open(path, NULL, e);
    if (!in) return MP_ERR;
    unsigned char b[3];
    size_t n;
    while ((n = fread(b, 1, 3, in)) > 0) {
        unsigned v = (unsigned)b[0] << 16 | (n > 1 ? (unsigned)b[1] << 8 : 0) | (n > 2 ? b[2] : 0);
        fputc(tab[v >> 18 & 63], f);
        fputc(tab[v >> 12 & 63], f);
        fputc(n > 1 ? tab[v >> 6 & 63] : '=', f);
        fputc(n > 2 ? tab[v & 63] : '=', f);
        if (n < 3) break;
    }
    int bad = ferror(in);
    fclose(in);
    return bad ? mp_err_set(e, "%s: read error", path) : MP_OK;
}

/* The figure's run folders in an interactive viewer, folded under the figure; a viewer that
 * cannot be made (a folder without maps) is a note, never a failed report. */
static void html_viewer(FILE *f, const char *dir, const MpReportFig *g, int k) {
    char(*paths)[4096] = mp_calloc_or_die((size_t)g->nviews, sizeof *paths, "report viewer");
    char id[32];
    const char **dirs = mp_calloc_or_die((size_t)g->nviews, sizeof *dirs, "report viewer");
    MpErr e;
    int n = 0;
    for (int v = 0; v < g->nviews; v++) /* a stage that failed left no folder: view the others */
        if (mp_path_join(paths[n], sizeof paths[n], dir, g->views[v], &e) == MP_OK && mp_file_exists(paths[n]))
            dirs[n] = paths[n], n++;
    if (!n) {
        free(paths);
        free(dirs);
        return;
    }
    MpViewOptions o;
    mp_view_options_default(&o);
    /* per figure: the report stays one file under 8 MB (issue 30; 17 MB before): maps in 8 bits
     * (half a step <= 1/508 of a map's range, shown on hover), those wider than 128 area-averaged
     * (the run folders, and `maskpos view` of them, keep every entry in float16) */
    o.max_mb = 2;
    o.max_side = 128;
    o.compact = 1;
    snprintf(id, sizeof id, "mpv-fig%d", k + 1);
    fputs("<details class=\"mpv-details\"><summary>Explore these maps: layers, raw / residue / standard error / z, hover, "
          "zoom, difference</summary>\n", f);
    if (mp_view_write_block(f, id, dirs, (const char *const *)NULL, n, &o, NULL, &e) != MP_OK) {
        fputs("<p>viewer unavailable: ", f);
        mp_html_text(f, e.msg);
        fputs("</p>", f);
    }
    fputs("</details>\n", f);
    free(paths);
    free(dirs);
}

/* The one-screen summary: verdict counts, the rows that differ (linked to the table), links to
 * the paper's figures first, then the others. */
static void report_html_summary(FILE *f, const MpReport *r) {
    fprintf(f, "<div class=\"summary\"><p><b>%d of %d rows agree with the paper; %d differ</b>%s</p>\n", r->npass, r->nrows,
            r->nrows - r->npass, r->npass < r->nrows ? " (shaded in the table below):" : ".");
    if (r->npass < r->nrows) {
        fputs("<ul>", f);
        for (int i = 0; i < r->nrows; i++)
            if (!r->rows[i].ok) {
                fprintf(f, "<li><a href=\"#row-%d\">", i + 1);
                mp_html_text(f, r->rows[i].what);
                fputs("</a>: measured ", f);
                mp_html_text(f, r->rows[i].measured);
                fputs(", expected ", f);
                mp_html_text(f, r->rows[i].expected);
                fputs("</li>", f);
            }
        fputs("</ul>\n", f);
    }
    char name[96];
    int *first = mp_calloc_or_die((size_t)r->nfigs + 1, 2 * sizeof(int), "report summary"), *count = first + r->nfigs + 1;
    for (int pass = 0; pass < 2; pass++) {
        fputs(pass ? "<p>More figures: " : "<p>The paper's figures: ", f);
        const int ng = report_fig_groups(r, !pass, first, count);
        for (int g = 0; g < ng; g++) {
            report_fig_name(name, sizeof name, &r->figs[first[g]]);
            fprintf(f, "%s<a href=\"#fig-%d\">", g ? " · " : "", first[g] + 1);
            mp_html_text(f, name);
            fputs("</a>", f);
            if (count[g] > 1) fprintf(f, " (%d figures)", count[g]);
        }
        fputs("</p>\n", f);
    }
    free(first);
    fputs("</div>\n", f);
}

int mp_report_write_html(const MpReport *r, const char *dir, const char *path, MpErr *e) {
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    FILE *f = af.f;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
    mp_html_text(f, r->title);
    /* text in a 1100 px column; figures as wide as the window allows, at most their own size (the
     * stories260K Figure 5 is 2147 px wide: 1100 px made it unreadable) */
    fputs("</title>\n<style>body{font-family:sans-serif;margin:2em auto;padding:0 1em;color:#222;max-width:96vw}"
          "h1,h2,p,table,.summary{max-width:1100px}"
          "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;font-size:14px}"
          "th{background:#f4f4f4}tr.bad td{background:#fff4e0}img{max-width:100%;border:1px solid #eee}"
          "figure{margin:2em 0}figcaption{font-weight:bold;margin-bottom:.5em;max-width:1100px}"
          ".summary{border:1px solid #ccc;background:#f8f8f8;padding:.2em 1em;margin:1em 0}"
          ".summary li{margin:.15em 0}</style>\n",
          f);
    int views = 0;
    for (int i = 0; i < r->nfigs; i++) views += r->figs[i].nviews > 0;
    if (views) mp_view_write_style(f);
    fputs("</head><body>\n<h1>", f);
    mp_html_text(f, r->title);
    fputs("</h1>\n", f);
    report_html_summary(f, r);
    fputs("<p>", f);
    mp_html_text(f, r->intro);
    fputs("</p>\n<p>", f);
    mp_html_text(f, r->method);
    fputs("</p>\n<table><tr><th>quantity</th><th>expected (paper)</th><th>measured (this run)</th><th>verdict</th></tr>\n", f);
    for (int i = 0; i < r->nrows; i++) {
        const MpReportRow *w = &r->rows[i];
        fprintf(f, "<tr id=\"row-%d\"%s><td>", i + 1, w->ok ? "" : " class=\"bad\"");
        mp_html_text(f, w->what);
        fputs("</td><td>", f);
        mp_html_text(f, w->expected);
        fputs("</td><td>", f);
        mp_html_text(f, w->measured);
        fputs(w->ok ? "</td><td>✓ agrees" : "</td><td>⚠ differs", f);
        if (w->note[0]) {
            fputs(": ", f);
            mp_html_text(f, w->note);
        }
        fputs("</td></tr>\n", f);
    }
    fprintf(f, "</table>\n<p>%d of %d rows agree.</p>\n", r->npass, r->nrows);
    for (int i = 0; i < r->nfigs; i++) {
        char fp[4096];
        if (mp_path_join(fp, sizeof fp, dir, r->figs[i].path, e) != MP_OK) goto fail;
        fprintf(f, "<figure id=\"fig-%d\"><figcaption>", i + 1);
        mp_html_text(f, r->figs[i].caption);
        fputs("</figcaption><img alt=\"", f);
        mp_html_text(f, r->figs[i].caption);
        fputs("\" src=\"data:image/png;base64,", f);
        if (mp_html_base64_file(f, fp, e) != MP_OK) goto fail;
        fputs("\"></figure>\n", f);
        if (r->figs[i].nviews) html_viewer(f, dir, &r->figs[i], i);
    }
    if (r->stats_rows) {
        fputs("<h2>", f);
        mp_html_text(f, r->stats_title);
        fputs("</h2>\n<table><tr>", f);
        for (int c = 0; c < r->stats_cols; c++) {
            fputs("<th>", f);
            mp_html_text(f, r->stats_head[c]);
            fputs("</th>", f);
        }
        fputs("</tr>\n", f);
        for (int i = 0; i < r->stats_rows; i++) {
            fputs("<tr>", f);
            for (int c = 0; c < r->stats_cols; c++) {
                fputs("<td>", f);
                mp_html_text(f, r->stats[i * r->stats_cols + c]);
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
        fputs("</table>\n", f);
    }
    if (r->footer && r->footer[0]) {
        fputs("<p>", f);
        mp_html_text(f, r->footer);
        fputs("</p>\n", f);
    }
    if (views) mp_view_write_script(f);
    fputs("</body></html>\n", f);
    return mp_atomic_commit(&af, e);
fail:
    mp_atomic_abort(&af);
    return MP_ERR;
}
