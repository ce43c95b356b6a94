/* json.h — JSON output helpers on top of jansson (Debian libjansson-dev).
 *
 * Implements: atomic writing of a JSON object (pretty, keys in insertion order) and the common
 * provenance block every meta.json carries (tool version, command line, wall time, peak memory).
 * Does not: parse model configs (load/ does that with jansson directly, checking every field).
 * Tested by: tests/test_core.c, and every command's meta.json is reloaded by tests/ref scripts.
 */
#ifndef MP_JSON_H
#define MP_JSON_H

#include <jansson.h>

#include "core/err.h" /* MpErr */

#define MP_VERSION "0.1.0"

int mp_json_write_atomic(const char *path, json_t *obj, MpErr *e);
/* The text mp_json_write_atomic writes: pretty (2 spaces), keys in insertion order, reals to 17
 * significant digits, a final newline; a new string (free it), NULL when out of memory. */
char *mp_json_text(json_t *obj);
/* Adds "maskpos_version", "command" (argv joined), "wall_time_s", "peak_rss_bytes". */
void mp_json_add_provenance(json_t *obj, int argc, char **argv, double wall_s);
/* Sets e to "<path>: invalid JSON at line L column C: <why>", or "<path>: empty or truncated JSON
 * (<why>)" when the parser reached the end of the text (jansson reports line -1 there). */
int mp_json_err(MpErr *e, const char *path, const json_error_t *je);
/* Reads a JSON file into a new object (NULL + message on failure; an empty file, a FIFO or a
 * directory is refused with a message naming the file). */
json_t *mp_json_read(const char *path, MpErr *e);

#endif
