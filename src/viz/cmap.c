/* cmap.c — see cmap.h. Anchor tables are data (sRGB bytes), interpolation is linear in sRGB. */
#include "viz/cmap.h"

#include <math.h>
#include <string.h>
#include <strings.h>

#include "core/err.h" /* MP_OK, MP_ERR, MP_ASSERT */

/* ---------------------------------------------------------------- anchor tables */

/* rocket: entries 0, 17, 34, ..., 255 of the 256-entry table (t = k/15). */
static const unsigned char cmap_rocket[16][3] = {
    {0x03, 0x05, 0x1a}, {0x1a, 0x10, 0x2a}, {0x33, 0x18, 0x3c}, {0x4c, 0x1d, 0x4b},
    {0x68, 0x1f, 0x55}, {0x84, 0x1e, 0x5a}, {0xa1, 0x1a, 0x5b}, {0xbd, 0x16, 0x55},
    {0xd6, 0x24, 0x49}, {0xe8, 0x3f, 0x3f}, {0xf0, 0x60, 0x43}, {0xf4, 0x7f, 0x58},
    {0xf6, 0x9c, 0x73}, {0xf6, 0xb8, 0x93}, {0xf8, 0xd1, 0xb8}, {0xfa, 0xeb, 0xdd},
};

/* vlag: t = k/12, blue → near-white at t = 0.5 → red. */
static const unsigned char cmap_vlag[13][3] = {
    {0x23, 0x69, 0xbd}, {0x53, 0x80, 0xbc}, {0x78, 0x96, 0xc1}, {0x9a, 0xad, 0xca}, {0xbd, 0xc6, 0xd7},
    {0xdf, 0xe1, 0xe8}, {0xfa, 0xf5, 0xf5}, {0xf0, 0xdb, 0xda}, {0xe1, 0xb9, 0xb6}, {0xd4, 0x98, 0x96},
    {0xc7, 0x79, 0x77}, {0xb9, 0x5a, 0x59}, {0xa9, 0x37, 0x3b},
};

/* RdBu: ColorBrewer's 11-class diverging scheme, t = k/10. */
static const unsigned char cmap_rdbu[11][3] = {
    {0x67, 0x00, 0x1f}, {0xb2, 0x18, 0x2b}, {0xd6, 0x60, 0x4d}, {0xf4, 0xa5, 0x82},
    {0xfd, 0xdb, 0xc7}, {0xf7, 0xf7, 0xf7}, {0xd1, 0xe5, 0xf0}, {0x92, 0xc5, 0xde},
    {0x43, 0x93, 0xc3}, {0x21, 0x66, 0xac}, {0x05, 0x30, 0x61},
};

static const MpPlotCmap cmap_table[] = {
    {"rocket", &cmap_rocket[0][0], 16, 0, 0},
    {"vlag", &cmap_vlag[0][0], 13, 1, 0},
    {"RdBu", &cmap_rdbu[0][0], 11, 1, 0},
};
#define CMAP_COUNT ((int)(sizeof cmap_table / sizeof cmap_table[0]))

/* ---------------------------------------------------------------- lookup */

int mp_plot_cmap_find(MpPlotCmap *out, const char *name) {
    if (!name) return MP_ERR;
    size_t len = strlen(name);
    int rev = 0;
    if (len > 2 && !strcasecmp(name + len - 2, "_r")) {
        rev = 1;
        len -= 2;
    }
    for (int k = 0; k < CMAP_COUNT; k++) {
        if (strlen(cmap_table[k].name) == len && !strncasecmp(cmap_table[k].name, name, len)) {
            *out = cmap_table[k];
            out->reversed = rev;
            return MP_OK;
        }
    }
    return MP_ERR;
}

void mp_plot_cmap_eval(const MpPlotCmap *c, double t, double rgb[3]) {
    MP_ASSERT(c && c->anchor && c->n >= 2);
    if (!(t > 0)) t = 0; /* also NaN */
    if (t > 1) t = 1;
    if (c->reversed) t = 1 - t;
    double x = t * (c->n - 1);
    int k = (int)floor(x);
    if (k >= c->n - 1) k = c->n - 2;
    double f = x - k;
    const unsigned char *a = c->anchor + 3 * k, *b = a + 3;
    for (int ch = 0; ch < 3; ch++) rgb[ch] = ((1 - f) * a[ch] + f * b[ch]) / 255.0;
}

const char *mp_plot_cmap_names(void) { return "rocket, vlag, RdBu (append _r to reverse)"; }
