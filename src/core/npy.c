/* npy.c — see npy.h. Format reference: numpy/lib/format.py ("NEP 1"). */
#include "core/npy.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* MpAtomicFile, mp_input_open */

static const struct {
    MpDtype dt;
    const char *descr;
    size_t size;
} npy_types[] = {
    {MP_DT_F64, "<f8", 8}, {MP_DT_F32, "<f4", 4}, {MP_DT_I32, "<i4", 4}, {MP_DT_I64, "<i8", 8},
    {MP_DT_U32, "<u4", 4}, {MP_DT_U8, "|u1", 1},  {MP_DT_U16, "<u2", 2}, {MP_DT_I16, "<i2", 2},
};
#define NPY_NTYPES (sizeof npy_types / sizeof npy_types[0])

size_t mp_dtype_size(MpDtype dt) {
    for (size_t i = 0; i < NPY_NTYPES; i++)
        if (npy_types[i].dt == dt) return npy_types[i].size;
    return 0;
}

const char *mp_dtype_name(MpDtype dt) {
    for (size_t i = 0; i < NPY_NTYPES; i++)
        if (npy_types[i].dt == dt) return npy_types[i].descr;
    return "?";
}

/* ---------------------------------------------------------------- writing */

int mp_npy_write(const char *path, MpDtype dt, const void *data, int ndim, const int64_t *shape,
                 MpErr *e) {
    char hdr[1024];
    size_t esize = mp_dtype_size(dt);
    if (esize == 0 || ndim < 0 || ndim > MP_NPY_MAX_DIMS)
        return mp_err_set(e, "%s: internal: bad dtype or rank", path);
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     mp_dtype_name(dt));
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 || mp_size_mul(count, (size_t)shape[i], &count) != MP_OK)
            return mp_err_set(e, "%s: internal: bad shape", path);
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%lld%s", (long long)shape[i],
                      i + 1 < ndim ? ", " : "");
    }
    /* a 1-tuple keeps its comma: "(3,)" */
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    /* pad so that magic(6)+version(2)+len(2)+header is a multiple of 64, ending in '\n' */
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(hdr + n, ' ', pad);
    hdr[(size_t)n + pad] = '\n';
    size_t hlen = (size_t)n + pad + 1;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    size_t nbytes;
    if (mp_size_mul(count, esize, &nbytes) != MP_OK)
        return mp_err_set(e, "%s: internal: size overflow", path);
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    if (fwrite(pre, 1, 10, af.f) != 10 || fwrite(hdr, 1, hlen, af.f) != hlen ||
        (nbytes && fwrite(data, 1, nbytes, af.f) != nbytes)) {
        mp_atomic_abort(&af);
        return mp_err_set(e, "%s: write failed: %s", path, strerror(errno));
    }
    return mp_atomic_commit(&af, e);
}

/* ---------------------------------------------------------------- reading */

/* Finds 'key': in the header dict and returns a pointer just after the colon, or NULL. */
static const char *npy_find_key(const char *h, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(h, pat);
    }
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

int mp_npy_parse(const unsigned char *buf, size_t len, MpNpy *out, MpErr *e) {
    memset(out, 0, sizeof *out);
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return mp_err_set(e, "not a .npy file (bad magic)");
    int major = buf[6];
    size_t hlen, hstart;
    if (major == 1) {
        hlen = (size_t)buf[8] | ((size_t)buf[9] << 8);
        hstart = 10;
    } else if (major == 2 || major == 3) {
        if (len < 12) return mp_err_set(e, "truncated .npy header");
        hlen = (size_t)buf[8] | ((size_t)buf[9] << 8) | ((size_t)buf[10] << 16) |
               ((size_t)buf[11] << 24);
        hstart = 12;
    } else {
        return mp_err_set(e, "unsupported .npy version %d", major);
    }
    if (hlen > len - hstart || hlen > 65536) return mp_err_set(e, "truncated .npy header");
    char *h = malloc(hlen + 1);
    if (!h) return mp_err_set(e, "out of memory");
    memcpy(h, buf + hstart, hlen);
    h[hlen] = '\0';
    if (strlen(h) != hlen) {
        free(h);
        return mp_err_set(e, "NUL byte in .npy header");
    }
    int rc = MP_ERR;
    const char *p = npy_find_key(h, "descr");
    char descr[16] = {0};
    if (!p || (*p != '\'' && *p != '"')) {
        mp_err_set(e, "malformed .npy header: no 'descr'");
        goto done;
    }
    {
        char q = *p++;
        size_t i = 0;
        while (*p && *p != q && i < sizeof descr - 1) descr[i++] = *p++;
        if (*p != q) {
            mp_err_set(e, "malformed .npy header: bad 'descr'");
            goto done;
        }
    }
    int found = 0;
    for (size_t i = 0; i < NPY_NTYPES; i++) {
        const char *d = npy_types[i].descr;
        /* '|u1' may also be spelled '<u1' or '>u1'; 1-byte types have no byte order. */
        if (strcmp(descr, d) == 0 || (npy_types[i].size == 1 && strlen(descr) == 3 &&
                                      strcmp(descr + 1, d + 1) == 0)) {
            out->dtype = npy_types[i].dt;
            found = 1;
        }
    }
    if (!found) {
        mp_err_set(e, "unsupported .npy dtype '%s' (supported: <f8 <f4 <i4 <i8 <u4 <u2 <i2 |u1)",
                   descr);
        goto done;
    }
    p = npy_find_key(h, "fortran_order");
    if (!p || strncmp(p, "False", 5) != 0) {
        mp_err_set(e, "unsupported .npy layout: fortran_order must be False");
        goto done;
    }
    p = npy_find_key(h, "shape");
    if (!p || *p != '(') {
        mp_err_set(e, "malformed .npy header: no 'shape'");
        goto done;
    }
    p++;
    size_t count = 1;
    out->ndim = 0;
    for (;;) {
        while (*p == ' ') p++;
        if (*p == ')') break;
        if (!isdigit((unsigned char)*p)) {
            mp_err_set(e, "malformed .npy header: bad shape");
            goto done;
        }
        errno = 0;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || v > (unsigned long long)INT64_MAX || out->ndim >= MP_NPY_MAX_DIMS ||
            mp_size_mul(count, (size_t)v, &count) != MP_OK) {
            mp_err_set(e, "unsupported .npy shape (too many dimensions or too large)");
            goto done;
        }
        out->shape[out->ndim++] = (int64_t)v;
        p = end;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p != ')') {
            mp_err_set(e, "malformed .npy header: bad shape");
            goto done;
        }
    }
    size_t nbytes, avail = len - hstart - hlen;
    if (mp_size_mul(count, mp_dtype_size(out->dtype), &nbytes) != MP_OK || nbytes > avail) {
        mp_err_set(e, "truncated .npy data: header promises %zu elements, file holds %zu bytes",
                   count, avail);
        goto done;
    }
    out->count = count;
    out->data = malloc(nbytes ? nbytes : 1);
    if (!out->data) {
        mp_err_set(e, "out of memory for %zu bytes", nbytes);
        goto done;
    }
    memcpy(out->data, buf + hstart + hlen, nbytes);
    rc = MP_OK;
done:
    free(h);
    if (rc != MP_OK) memset(out, 0, sizeof *out);
    return rc;
}

int mp_npy_read(const char *path, MpNpy *out, MpErr *e) {
    memset(out, 0, sizeof *out);
    FILE *f = mp_input_open(path, NULL, e); /* refuses a FIFO or a directory */
    if (!f) return MP_ERR;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            unsigned char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                fclose(f);
                return mp_err_set(e, "%s: out of memory", path);
            }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return mp_err_set(e, "%s: read error", path);
    }
    int rc = mp_npy_parse(buf, len, out, e);
    free(buf);
    if (rc != MP_OK) return mp_err_prefix(e, "%s", path);
    return MP_OK;
}

int mp_npy_to_f64(const MpNpy *a, double **out, MpErr *e) {
    double *d = malloc((a->count ? a->count : 1) * sizeof(double));
    if (!d) return mp_err_set(e, "out of memory");
    for (size_t i = 0; i < a->count; i++) {
        switch (a->dtype) {
        case MP_DT_F64: d[i] = ((const double *)a->data)[i]; break;
        case MP_DT_F32: d[i] = ((const float *)a->data)[i]; break;
        case MP_DT_I32: d[i] = ((const int32_t *)a->data)[i]; break;
        case MP_DT_I64: d[i] = (double)((const int64_t *)a->data)[i]; break;
        case MP_DT_U32: d[i] = ((const uint32_t *)a->data)[i]; break;
        case MP_DT_U8: d[i] = ((const uint8_t *)a->data)[i]; break;
        case MP_DT_U16: d[i] = ((const uint16_t *)a->data)[i]; break;
        case MP_DT_I16: d[i] = ((const int16_t *)a->data)[i]; break;
        }
    }
    *out = d;
    return MP_OK;
}

void mp_npy_free(MpNpy *a) {
    free(a->data);
    memset(a, 0, sizeof *a);
}
