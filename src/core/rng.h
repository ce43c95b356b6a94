/* rng.h — counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
 *
 * Implements: a stream of uniforms/normals fully determined by (seed, stream id), so that
 * sequence b of a simulation draws the same numbers whichever thread runs it and in whatever
 * order. Normals use a 128-block ziggurat on 53-bit uniforms (double precision).
 * Does not: reproduce torch.randn's stream (tests exchange inputs through .npy files instead).
 * Tested by: tests/test_core.c (published Philox known-answer vectors, moments of the normals).
 */
#ifndef MP_RNG_H
#define MP_RNG_H

#include <stddef.h>
#include <stdint.h>

#define MP_RNG_BATCH 16 /* Philox blocks generated per refill (vectorised) */

typedef struct MpRng {
    uint32_t key[2];                  /* from the seed */
    uint32_t ctr[4];                  /* ctr[0..1] next block counter, ctr[2..3] stream id */
    uint32_t buf[4 * MP_RNG_BATCH];   /* output of blocks ctr−BATCH .. ctr−1, in order */
    int avail;                        /* unread words left at the end of buf */
} MpRng;

/* One Philox4x32-10 block: out = philox(ctr, key). Exposed for known-answer tests. */
void mp_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]);

void mp_rng_init(MpRng *r, uint64_t seed, uint64_t stream);
uint32_t mp_rng_u32(MpRng *r);
double mp_rng_uniform(MpRng *r);                  /* [0, 1), 53 bits */
void mp_rng_normal_fill(MpRng *r, double *out, size_t n); /* n standard normals */

#endif
