/* api_view.c — maskpos_view of the public C API (include/maskpos.h): the page `maskpos view` writes,
 * from run folders, for programs and notebooks (maskpos.view, Result.view).
 * Implements: the same claim of the output file (replaced only with force) and the same page as
 * src/cli/cmd_view.c (mp_view_write_html with the default options, a title when given).
 * Does not: print (the command prints the summary).
 * Tested by: python/tests/test_notebook.py (Result.view, maskpos.view against `maskpos view`).
 */
#include <stdio.h>

#include "api/api.h"     /* mp_api_fail */
#include "core/files.h"  /* mp_outfile_claim */
#include "viz/view.h"    /* mp_view_write_html */

MASKPOS_API int maskpos_view(const char *out, const char *const *dirs, const char *const *labels, int n, const char *title,
                             int force) {
    MpErr e;
    if (!out || !dirs) return mp_api_failf("maskpos_view: NULL argument");
    if (n < 1 || n > MP_VIEW_MAX_RUNS) return mp_api_failf("view: %d run folders: give 1 to %d", n, MP_VIEW_MAX_RUNS);
    for (int k = 0; k < n; k++)
        if (!dirs[k] || (labels && !labels[k])) return mp_api_failf("maskpos_view: NULL argument");
    MpViewOptions o;
    mp_view_options_default(&o);
    if (title) snprintf(o.title, sizeof o.title, "%s", title);
    if (mp_outfile_claim(out, force, &e) != MP_OK || mp_view_write_html(out, dirs, labels, n, &o, NULL, &e) != MP_OK)
        return mp_api_fail(&e, MASKPOS_ERR);
    return MASKPOS_OK;
}
