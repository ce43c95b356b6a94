/* rng.c — Philox4x32-10 and Box–Muller normals; see rng.h. */
#include "core/rng.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void mp_philox4x32_10(uint32_t out[4], const uint32_t ctr[4], const uint32_t key[2]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

void mp_rng_init(MpRng *r, uint64_t seed, uint64_t stream) {
    r->key[0] = (uint32_t)seed;
    r->key[1] = (uint32_t)(seed >> 32);
    r->ctr[0] = 0;
    r->ctr[1] = 0;
    r->ctr[2] = (uint32_t)stream;
    r->ctr[3] = (uint32_t)(stream >> 32);
    r->avail = 0;
}

static void rng_refill(MpRng *r) {
    mp_philox4x32_10(r->buf, r->ctr, r->key);
    if (++r->ctr[0] == 0) ++r->ctr[1];
    r->avail = 4;
}

uint32_t mp_rng_u32(MpRng *r) {
    if (r->avail == 0) rng_refill(r);
    return r->buf[4 - r->avail--];
}

double mp_rng_uniform(MpRng *r) {
    uint64_t a = mp_rng_u32(r) >> 5, b = mp_rng_u32(r) >> 6; /* 27 + 26 bits */
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

void mp_rng_normal_fill(MpRng *r, double *out, size_t n) {
    const double two_pi = 6.283185307179586476925286766559;
    size_t i = 0;
    while (i < n) {
        double u1 = 1.0 - mp_rng_uniform(r); /* (0, 1]: log is finite */
        double u2 = mp_rng_uniform(r);
        double rad = sqrt(-2.0 * log(u1));
        double ang = two_pi * u2;
        out[i++] = rad * cos(ang);
        if (i < n) out[i++] = rad * sin(ang);
    }
}
