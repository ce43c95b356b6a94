/* test_png_util.h — reading the PNGs maskpos writes, for the tests of figures: decoding (cairo),
 * a pixel's colour, colour distance, and the tEXt record "maskpos:panels" that viz/ writes (the
 * axes of a line plot, the panels' colour limits; viz/surface.h).
 * Included by: tests/test_viz.c, tests/test_probe_plots.c.
 */
#ifndef MP_TEST_PNG_UTIL_H
#define MP_TEST_PNG_UTIL_H

#include <cairo.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_file_read_all */
#include "testutil.h"

typedef struct Rgb {
    int r, g, b;
} Rgb;

/* Pixel (x, y) of a decoded PNG (ARGB32 or RGB24). */
static Rgb png_pixel(cairo_surface_t *s, int x, int y) {
    assert_true(x >= 0 && y >= 0 && x < cairo_image_surface_get_width(s) && y < cairo_image_surface_get_height(s));
    const unsigned char *d = cairo_image_surface_get_data(s);
    uint32_t px = *(const uint32_t *)(const void *)(d + (size_t)y * cairo_image_surface_get_stride(s) + 4 * (size_t)x);
    return (Rgb){(int)(px >> 16) & 255, (int)(px >> 8) & 255, (int)px & 255};
}

static cairo_surface_t *png_load(const char *path) {
    cairo_surface_t *s = cairo_image_surface_create_from_png(path);
    if (cairo_surface_status(s) != CAIRO_STATUS_SUCCESS) fail_msg("cannot decode %s as PNG", path);
    cairo_surface_flush(s);
    return s;
}

static int rgb_dist(Rgb a, Rgb b) {
    int d = abs(a.r - b.r);
    if (abs(a.g - b.g) > d) d = abs(a.g - b.g);
    if (abs(a.b - b.b) > d) d = abs(a.b - b.b);
    return d;
}

/* The text of the PNG's tEXt chunk "maskpos:panels" (malloc'd), or NULL when it has none. */
static char *png_panels_text(const char *path) {
    size_t n = 0;
    char *b = NULL;
    MpErr e;
    if (mp_file_read_all(path, (size_t)1 << 28, "a PNG", &b, &n, &e) != MP_OK) fail_msg("%s", e.msg);
    const unsigned char *u = (const unsigned char *)b;
    char *out = NULL;
    for (size_t i = 8; i + 12 <= n && !out;) {
        const size_t len = (size_t)u[i] << 24 | (size_t)u[i + 1] << 16 | (size_t)u[i + 2] << 8 | u[i + 3];
        if (i + 12 + len > n) break;
        const size_t klen = strlen("maskpos:panels") + 1;
        if (!memcmp(u + i + 4, "tEXt", 4) && len >= klen && !memcmp(u + i + 8, "maskpos:panels", klen)) {
            out = calloc(len - klen + 1, 1);
            memcpy(out, u + i + 8 + klen, len - klen);
        }
        i += 12 + len;
    }
    free(b);
    return out;
}

#endif
