/* npy.h — NumPy .npy files (format versions 1.0, 2.0, 3.0), the interchange format of every map.
 *
 * Implements: writing C-order little-endian arrays atomically (temp file + rename), and a reader
 * for untrusted files that never aborts: magic, version, header length, the header dict (descr,
 * fortran_order, shape), every shape product and the data size are checked against overflow and
 * the file length.
 * Does not: handle Fortran order, big-endian data, structured or object dtypes (rejected with a
 * message), or memory-map (arrays here are at most a few hundred MB).
 * Tested by: tests/test_core.c (round trips; truncated/malformed headers), tests/ref/check_npy.py.
 */
#ifndef MP_NPY_H
#define MP_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr */

typedef enum MpDtype {
    MP_DT_F64 = 0,
    MP_DT_F32 = 1,
    MP_DT_I32 = 2,
    MP_DT_I64 = 3,
    MP_DT_U32 = 4,
    MP_DT_U8 = 5,
    MP_DT_U16 = 6,
    MP_DT_I16 = 7,
} MpDtype;

#define MP_NPY_MAX_DIMS 8

typedef struct MpNpy {
    MpDtype dtype;
    int ndim;
    int64_t shape[MP_NPY_MAX_DIMS];
    size_t count;  /* product of shape */
    void *data;    /* owned; count elements of dtype, C order */
} MpNpy;

size_t mp_dtype_size(MpDtype dt);
const char *mp_dtype_name(MpDtype dt); /* numpy descr, e.g. "<f8" */

int mp_npy_write(const char *path, MpDtype dt, const void *data, int ndim, const int64_t *shape,
                 MpErr *e);
int mp_npy_read(const char *path, MpNpy *out, MpErr *e);
/* Parses an in-memory .npy image (used by the reader and by the fuzz target). Copies the data. */
int mp_npy_parse(const unsigned char *buf, size_t len, MpNpy *out, MpErr *e);
/* Converts to a newly allocated double array (any numeric dtype). */
int mp_npy_to_f64(const MpNpy *a, double **out, MpErr *e);
void mp_npy_free(MpNpy *a);

#endif
