/* rng.c — Philox4x32-10 and Box–Muller normals; see rng.h. */
#include "core/rng.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

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

/* Fills buf with MP_RNG_BATCH consecutive blocks. The same rounds as mp_philox4x32_10, written
 * lane-parallel (structure of arrays) so the compiler can vectorise the 32×32→64 multiplies. The
 * words come out exactly as calling mp_philox4x32_10 on counters ctr, ctr+1, ... would give. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void rng_refill(MpRng *r) {
    enum { N = MP_RNG_BATCH };
    uint32_t c0[N], c1[N], c2[N], c3[N];
    uint64_t base = (uint64_t)r->ctr[0] | ((uint64_t)r->ctr[1] << 32);
    for (int b = 0; b < N; b++) {
        uint64_t k = base + (uint64_t)b;
        c0[b] = (uint32_t)k;
        c1[b] = (uint32_t)(k >> 32);
        c2[b] = r->ctr[2];
        c3[b] = r->ctr[3];
    }
    uint32_t k0 = r->key[0], k1 = r->key[1];
    for (int round = 0; round < 10; round++) {
        for (int b = 0; b < N; b++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * c0[b];
            uint64_t p1 = (uint64_t)PHILOX_M1 * c2[b];
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[b] ^ k0;
            uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3[b] ^ k1;
            c1[b] = (uint32_t)p1;
            c3[b] = (uint32_t)p0;
            c0[b] = n0;
            c2[b] = n2;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
    for (int b = 0; b < N; b++) {
        r->buf[4 * b + 0] = c0[b];
        r->buf[4 * b + 1] = c1[b];
        r->buf[4 * b + 2] = c2[b];
        r->buf[4 * b + 3] = c3[b];
    }
    base += N;
    r->ctr[0] = (uint32_t)base;
    r->ctr[1] = (uint32_t)(base >> 32);
    r->avail = 4 * N;
}

static inline uint32_t rng_next_u32(MpRng *r) {
    if (r->avail == 0) rng_refill(r);
    return r->buf[4 * MP_RNG_BATCH - r->avail--];
}

uint32_t mp_rng_u32(MpRng *r) { return rng_next_u32(r); }

double mp_rng_uniform(MpRng *r) {
    uint64_t a = rng_next_u32(r) >> 5, b = rng_next_u32(r) >> 6; /* 27 + 26 bits */
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

/* ---- normals: ziggurat with 128 blocks (Marsaglia & Tsang 2000, in Doornik's 2005 "ZIGNOR"
 * layout: one uniform u in (−1,1) and an independent block index per try). R is the start of
 * the tail, V the common area of the blocks; both are Doornik's published constants. */
#define ZIG_C 128
#define ZIG_R 3.442619855899
#define ZIG_V 9.91256303526217e-3

static double zig_x[ZIG_C + 1]; /* block edges: x[0] = V/f(R) (base strip), x[1] = R, x[C] = 0 */
static double zig_ratio[ZIG_C]; /* x[i+1]/x[i]: |u| below it is inside block i's rectangle */
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void) {
    double f = exp(-0.5 * ZIG_R * ZIG_R);
    zig_x[0] = ZIG_V / f;
    zig_x[1] = ZIG_R;
    zig_x[ZIG_C] = 0;
    for (int i = 2; i < ZIG_C; i++) {
        zig_x[i] = sqrt(-2 * log(ZIG_V / zig_x[i - 1] + f));
        f = exp(-0.5 * zig_x[i] * zig_x[i]);
    }
    for (int i = 0; i < ZIG_C; i++) zig_ratio[i] = zig_x[i + 1] / zig_x[i];
}

static inline uint64_t rng_u64(MpRng *r) {
    uint64_t hi = rng_next_u32(r);
    return (hi << 32) | rng_next_u32(r);
}

/* uniform in (0, 1): never 0, so its log is finite */
static double rng_open01(MpRng *r) { return ((double)(rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0); }

static double zig_tail(MpRng *r, int negative) {
    double x, y;
    do {
        x = log(rng_open01(r)) / ZIG_R;
        y = log(rng_open01(r));
    } while (-2 * y < x * x);
    return negative ? x - ZIG_R : ZIG_R - x;
}

/* The ziggurat's try from one 64-bit word: block index from the low 7 bits, u in (−1, 1) from
 * the top 52 bits placed directly in a double's mantissa ([1, 2) → 2·d − 3); no integer→double
 * conversion, so batches of words vectorise on any x86-64 vector unit. */
static inline double zig_u(uint64_t w) {
    uint64_t bits = UINT64_C(0x3FF0000000000000) | (w >> 12);
    double d;
    memcpy(&d, &bits, sizeof d);
    return 2.0 * d - 3.0 + 0x1p-52; /* + half a step: symmetric, never exactly −1 */
}

static double zig_normal(MpRng *r) {
    for (;;) {
        uint64_t w = rng_u64(r);
        unsigned i = (unsigned)(w & (ZIG_C - 1));
        double u = zig_u(w);
        if (fabs(u) < zig_ratio[i]) return u * zig_x[i]; /* inside a rectangle: ~99% of draws */
        if (i == 0) return zig_tail(r, u < 0);
        double x = u * zig_x[i];
        double f0 = exp(-0.5 * (zig_x[i] * zig_x[i] - x * x));
        double f1 = exp(-0.5 * (zig_x[i + 1] * zig_x[i + 1] - x * x));
        if (f1 + rng_open01(r) * (f0 - f1) < 1.0) return x;
    }
}

/* Normals from the words already in the buffer, up to the first try that leaves the fast path:
 * the tries are computed in a vectorisable loop, then accepted in order. Returns how many normals
 * it wrote; the words it consumed are exactly those zig_normal would have used for them. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static size_t zig_fast_batch(MpRng *r, double *out, size_t n) {
    size_t m = (size_t)r->avail / 2;
    if (m > n) m = n;
    if (m > 32) m = 32;
    const uint32_t *wb = r->buf + (4 * MP_RNG_BATCH - r->avail);
    unsigned char ok[32];
    for (size_t t = 0; t < m; t++) {
        uint64_t w = ((uint64_t)wb[2 * t] << 32) | wb[2 * t + 1];
        unsigned i = (unsigned)(w & (ZIG_C - 1));
        double u = zig_u(w);
        ok[t] = fabs(u) < zig_ratio[i];
        out[t] = u * zig_x[i];
    }
    size_t k = 0;
    while (k < m && ok[k]) k++;
    r->avail -= 2 * (int)k;
    return k;
}
void mp_rng_normal_fill(MpRng *r, double *out, size_t n) {
    pthread_once(&zig_once, zig_init);
    size_t i = 0;
    while (i < n) {
        size_t k = zig_fast_batch(r, out + i, n - i);
        i += k;
        if (i < n && k < 32) out[i++] = zig_normal(r); /* a slow try, or a refill, in order */
    }
}
