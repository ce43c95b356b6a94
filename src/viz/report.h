/* report.h — a small document model for run reports, written as Markdown and as a
 * self-contained HTML page (figures embedded as base64 data URIs, no external files).
 *
 * Implements: verdict rows (quantity, expected, measured, agrees?, note), figures with captions,
 * one free-form statistics table, and the two writers; both files are written atomically.
 * Does not: compute anything — callers fill the rows from their own run's results.
 * Tested by: tests/test_reproduce.c (both files, verdicts, embedded images decode).
 */
#ifndef MP_REPORT_H
#define MP_REPORT_H

#include "core/err.h" /* MpErr */

#define MP_REPORT_MAX_ROWS 128
#define MP_REPORT_MAX_FIGS 32
#define MP_REPORT_MAX_COLS 8
#define MP_REPORT_MAX_STATS 256

typedef struct MpReportRow {
    char what[160], expected[96], measured[192], note[256];
    int ok;
} MpReportRow;

#define MP_REPORT_MAX_VIEWS 8

typedef struct MpReportFig {
    char caption[256];
    char path[256]; /* relative to the report's folder */
    /* run folders (relative to the report's folder) explored by an interactive viewer under the
     * figure in report.html (viz/view.h); none: no viewer */
    char views[MP_REPORT_MAX_VIEWS][128];
    int nviews;
} MpReportFig;

typedef struct MpReport {
    char title[256];
    char intro[1024];  /* one paragraph of plain text */
    char method[512];  /* how verdicts are decided */
    MpReportRow rows[MP_REPORT_MAX_ROWS];
    int nrows, npass;
    MpReportFig figs[MP_REPORT_MAX_FIGS];
    int nfigs;
    char stats_title[128];
    int stats_cols, stats_rows;
    char stats_head[MP_REPORT_MAX_COLS][32];
    char stats[MP_REPORT_MAX_STATS][MP_REPORT_MAX_COLS][48];
    char footer[1024];
} MpReport;

/* Adds a verdict row (silently ignores rows past the maximum; callers stay far below it). */
void mp_report_row(MpReport *r, const char *what, const char *expected, const char *measured, int ok,
                   const char *note);
void mp_report_fig(MpReport *r, const char *caption, const char *path);
/* Adds a run folder to the interactive viewer of the figure whose path is fig_path (ignored when
 * no such figure or the viewer is full). */
void mp_report_fig_view(MpReport *r, const char *fig_path, const char *dir);

int mp_report_write_md(const MpReport *r, const char *path, MpErr *e);
/* dir: the folder figure paths are relative to (read to embed them). */
int mp_report_write_html(const MpReport *r, const char *dir, const char *path, MpErr *e);

#endif
