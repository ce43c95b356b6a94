/* json.c — see json.h. */
#include "core/json.h"

#include <string.h>

#include "core/util.h" /* mp_file_write_atomic, mp_peak_rss_bytes */

int mp_json_write_atomic(const char *path, json_t *obj, MpErr *e) {
    char *s = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s) return mp_err_set(e, "%s: cannot serialise JSON", path);
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return mp_err_set(e, "%s: out of memory", path);
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    int rc = mp_file_write_atomic(path, t, n + 1, e);
    free(t);
    return rc;
}

void mp_json_add_provenance(json_t *obj, int argc, char **argv, double wall_s) {
    json_object_set_new(obj, "maskpos_version", json_string(MP_VERSION));
    json_t *cmd = json_array();
    for (int i = 0; i < argc; i++) json_array_append_new(cmd, json_string(argv[i]));
    json_object_set_new(obj, "command", cmd);
    json_object_set_new(obj, "wall_time_s", json_real(wall_s));
    json_object_set_new(obj, "peak_rss_bytes", json_integer((json_int_t)mp_peak_rss_bytes()));
}

json_t *mp_json_read(const char *path, MpErr *e) {
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        mp_err_set(e, "%s: invalid JSON at line %d column %d: %s", path, je.line, je.column, je.text);
        return NULL;
    }
    return j;
}
