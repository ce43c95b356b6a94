/* json.c — see json.h. */
#include "core/json.h"

#include <string.h>

#include "core/util.h" /* mp_file_write_atomic, mp_file_read_all, mp_peak_rss_bytes */

char *mp_json_text(json_t *obj) {
    char *s = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (!s) return NULL;
    size_t n = strlen(s);
    char *t = realloc(s, n + 2);
    if (!t) {
        free(s);
        return NULL;
    }
    t[n] = '\n';
    t[n + 1] = '\0';
    return t;
}

int mp_json_write_atomic(const char *path, json_t *obj, MpErr *e) {
    char *t = mp_json_text(obj);
    if (!t) return mp_err_set(e, "%s: cannot serialise JSON", path);
    int rc = mp_file_write_atomic(path, t, strlen(t), e);
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

int mp_json_err(MpErr *e, const char *path, const json_error_t *je) {
    if (je->line < 1) return mp_err_set(e, "%s: empty or truncated JSON (%s)", path, je->text);
    return mp_err_set(e, "%s: invalid JSON at line %d column %d: %s", path, je->line, je->column, je->text);
}

json_t *mp_json_read(const char *path, MpErr *e) {
    char *data = NULL;
    size_t len = 0;
    /* through mp_file_read_all: a FIFO or a directory is refused instead of read */
    if (mp_file_read_all(path, (size_t)1 << 30, "a JSON file", &data, &len, e) != MP_OK) return NULL;
    if (len == 0) {
        free(data);
        mp_err_set(e, "%s: empty file (expected a JSON object)", path);
        return NULL;
    }
    json_error_t je;
    json_t *j = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    free(data);
    if (!j) mp_json_err(e, path, &je);
    return j;
}
