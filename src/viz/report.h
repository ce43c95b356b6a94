/* report.h — a small document model for run reports, written as Markdown and as a
 * self-contained HTML page (figures embedded as base64 data URIs, no external files).
 *
 * Implements: verdict rows (quantity, expected, measured, agrees?, note), figures with captions
 * and the run folders of their viewers, one free-form statistics table, and the two writers;
 * both files are written atomically. Rows, figures, viewer folders and statistics rows grow as
 * they are added (no count limit), and their texts are kept whole (no length limit); the statistics table has as many columns as its head, and a
 * row of another width is refused with a one-line error (never written into the next row).
 * Does not: compute anything — callers fill the rows from their own run's results.
 * Tested by: tests/test_viz.c (test_report_grows: past the old limits), tests/test_reproduce.c
 * (both files, verdicts, embedded images decode).
 */
#ifndef MP_REPORT_H
#define MP_REPORT_H

#include <stdio.h> /* FILE: mp_html_base64_file */

#include "core/err.h" /* MpErr */

typedef struct MpReportRow {
    char *what, *expected, *measured, *note; /* owned, any length ("" for no note) */
    int ok;
} MpReportRow;

typedef struct MpReportFig {
    char *caption; /* owned, any length */
    char *path;    /* owned: relative to the report's folder */
    /* [nviews] owned: run folders (relative to the report's folder) explored by an interactive
     * viewer under the figure in report.html (viz/view.h); none: no viewer */
    char **views;
    int nviews, cap_views;
} MpReportFig;

/* Owns its arrays: a zeroed struct is an empty report; mp_report_free releases it. */
typedef struct MpReport {
    char title[256];
    char intro[1024];  /* one paragraph of plain text */
    char method[512];  /* how verdicts are decided */
    MpReportRow *rows; /* [nrows] */
    int nrows, npass, cap_rows;
    MpReportFig *figs; /* [nfigs] */
    int nfigs, cap_figs;
    char stats_title[128];
    int stats_cols, stats_rows, cap_stats;
    char **stats_head; /* [stats_cols] */
    char **stats;      /* [stats_rows * stats_cols], row by row */
    char *footer;      /* owned, any length (mp_report_footer); NULL: none */
} MpReport;

void mp_report_free(MpReport *r);

/* Adds a verdict row. */
void mp_report_row(MpReport *r, const char *what, const char *expected, const char *measured, int ok,
                   const char *note);
void mp_report_fig(MpReport *r, const char *caption, const char *path);
/* The paragraph under the tables: a, b and c joined (b, c may be NULL), replacing an earlier one. */
void mp_report_footer(MpReport *r, const char *a, const char *b, const char *c);
/* Adds a run folder to the interactive viewer of the figure whose path is fig_path (a figure
 * added before: a programmer error otherwise). */
void mp_report_fig_view(MpReport *r, const char *fig_path, const char *dir);
/* The statistics table's title and head: ncols columns (>= 1), set once, before its rows. */
void mp_report_stats_head(MpReport *r, const char *title, const char *const *head, int ncols);
/* A row of the statistics table: MP_ERR (e says so, one line) when ncols is not the head's. */
int mp_report_stats_row(MpReport *r, const char *const *cells, int ncols, MpErr *e);

int mp_report_write_md(const MpReport *r, const char *path, MpErr *e);
/* dir: the folder figure paths are relative to (read to embed them). */
int mp_report_write_html(const MpReport *r, const char *dir, const char *path, MpErr *e);
/* The bytes of the file at path base64-encoded into f (RFC 4648 alphabet, '=' padding): a figure
 * inside a self-contained page (report.html, card.html). MP_ERR with a line when it cannot be read. */
int mp_html_base64_file(FILE *f, const char *path, MpErr *e);

#endif
