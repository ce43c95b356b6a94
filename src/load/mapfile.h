/* mapfile.h — read-only memory mapping of checkpoint files.
 *
 * Implements: mp_load_map_open (open + fstat + mmap PROT_READ, MAP_PRIVATE; pages are read by the
 * kernel only when touched, which is what makes tensor access lazy) and mp_load_map_close.
 * Does not: parse anything. Zero-length files map to {NULL, 0} without calling mmap.
 * Tested by: tests/test_load.c (every model test goes through it).
 */
#ifndef MP_LOAD_MAPFILE_H
#define MP_LOAD_MAPFILE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr */

typedef struct MpLoadMap {
    const uint8_t *data; /* [size] bytes, read-only mapping (or borrowed when mapped == 0) */
    size_t size;
    int mapped;          /* 1: munmap on close */
} MpLoadMap;

int mp_load_map_open(MpLoadMap *mm, const char *path, MpErr *e);
void mp_load_map_close(MpLoadMap *mm); /* accepts a zeroed struct */

#endif
