/* fwd_amx.c — see fwd_amx.h. Sections in data-flow order: the arithmetic of one step and the
 * reference, the tile layout (packing), the tile layer (emulation, then the instructions), the
 * blocked kernel, availability and the self-check.
 *
 * The tile layer is a macro layer (AMX_BLOCK below) over four operations — zero, load, store,
 * tdpbf16ps — expanded twice: with the emulation's functions and with the intrinsics. GCC writes
 * the intrinsics as inline assembly whose tile numbers are text, so the operations take literal
 * tile numbers and the one block loop is spelled once, as a macro, not as a function taking the
 * operations as pointers.
 */
#include "model/fwd_amx.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/err.h"   /* MP_ASSERT */
#include "load/quant.h" /* mp_f32_to_bf16, mp_bf16_to_f32: the one bf16 conversion */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
#define AMX_X86 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define AMX_X86 0
#endif

/* ================================================================ one step, and the reference */

static uint32_t amx_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float amx_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* DAZ: a subnormal input reads as a zero of its sign. */
static inline float amx_daz(float v) {
    const uint32_t u = amx_bits(v);
    return (u & 0x7f800000u) == 0 ? amx_float(u & 0x80000000u) : v;
}

float mp_fwd_fma_ftz(float a, float b, float c) {
    a = amx_daz(a);
    b = amx_daz(b);
    c = amx_daz(c);
    const float r = fmaf(a, b, c);
    if (!(fabsf(r) <= FLT_MIN) || r == 0.0f) return r; /* normal, inf, NaN, or zero (exact or underflowed: signed) */
    /* r is subnormal or ±FLT_MIN: FTZ asks whether a·b + c, rounded to 24 bits with an unbounded
     * exponent, is below FLT_MIN. Scaled by 2^64 it is a normal number, rounded the same way: the
     * smaller of |a|, |b| and c are scaled exactly (here |a·b| and |c| are below 2^64, else the
     * exact sum would be 0 or far from tiny, so nothing overflows). */
    const float s = 0x1p64f;
    const float rs = fabsf(a) <= fabsf(b) ? fmaf(a * s, b, c * s) : fmaf(a, b * s, c * s);
    if (fabsf(rs) < FLT_MIN * s) return copysignf(0.0f, rs); /* tiny: flushed, the true result's sign */
    return r;                                                  /* rounds to ±FLT_MIN either way */
}

void mp_amx_matmul_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t O, int64_t K,
                       int64_t T) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++) {
            const float *xt = x + t * ldx, *wo = w + o * K;
            float acc = 0.0f;
            for (int64_t k0 = 0; k0 < K; k0 += MP_AMX_KT) { /* one instruction per K tile */
                float even = 0.0f, odd = 0.0f;
                for (int64_t k = k0; k < k0 + MP_AMX_KT && k < K; k += 2) {
                    even = mp_fwd_fma_ftz(xt[k], wo[k], even);
                    if (k + 1 < K) odd = mp_fwd_fma_ftz(xt[k + 1], wo[k + 1], odd);
                }
                acc = mp_fwd_fma_ftz(acc, 1.0f, mp_fwd_fma_ftz(even, 1.0f, odd)); /* out + (even + odd) */
            }
            y[t * ldy + o] = acc;
        }
}

/* ================================================================ the tile layout */

#define AMX_TILE 512 /* bf16 values of one B tile: 16 pair rows x 16 columns x 2 */

size_t mp_amx_weight_elems(int64_t O, int64_t K) {
    return (size_t)((O + MP_AMX_NP - 1) / MP_AMX_NP) * (size_t)((K + MP_AMX_KT - 1) / MP_AMX_KT) * 2 * AMX_TILE;
}

/* Index of W[o][k] in the packed weight: panel o/32, K tile k/32, B tile (o%32)/16, pair row
 * (k%32)/2, column o%16, element k%2. */
static size_t amx_index(int64_t K, int64_t o, int64_t k) {
    const int64_t KT = (K + MP_AMX_KT - 1) / MP_AMX_KT, c = o % MP_AMX_NP, kk = k % MP_AMX_KT;
    const size_t tile = ((size_t)(o / MP_AMX_NP) * (size_t)KT + (size_t)(k / MP_AMX_KT)) * 2 + (size_t)(c / 16);
    return tile * AMX_TILE + (size_t)(kk / 2) * 32 + (size_t)(c % 16) * 2 + (size_t)(kk % 2);
}

void mp_amx_pack_rows(uint16_t *wt, int64_t O, int64_t K, const float *rows, int64_t r0, int64_t n) {
    const int64_t Kp = (K + MP_AMX_KT - 1) / MP_AMX_KT * MP_AMX_KT;
    for (int64_t j = 0; j < n; j++)
        for (int64_t k = 0; k < Kp; k++) /* the row's padding past K with it */
            wt[amx_index(K, r0 + j, k)] = k < K ? mp_f32_to_bf16(rows[(size_t)j * (size_t)K + (size_t)k]) : 0;
    if (n > 0 && r0 + n == O) /* the padding rows of the last panel */
        for (int64_t o = O; o % MP_AMX_NP; o++)
            for (int64_t k = 0; k < Kp; k++) wt[amx_index(K, o, k)] = 0;
}

float mp_amx_weight_at(const uint16_t *wt, int64_t O, int64_t K, int64_t o, int64_t k) {
    MP_ASSERT(o >= 0 && o < O && k >= 0 && k < K);
    return mp_bf16_to_f32(wt[amx_index(K, o, k)]);
}

/* ================================================================ the tile layer: emulation */

/* The 64-byte operand of ldtilecfg (palette 1): per tile, bytes per row and rows. */
typedef struct AmxCfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} AmxCfg;
_Static_assert(sizeof(AmxCfg) == 64, "the tile configuration is 64 bytes");

/* The configuration of this kernel: tiles 0-7 all 16 rows x 64 bytes (C: 16 x 16 f32; A: 16 rows
 * x 32 bf16; B: 16 pair rows x 16 columns x 2 bf16). */
static AmxCfg amx_cfg(void) {
    AmxCfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = 64;
        c.rows[t] = 16;
    }
    return c;
}

/* Eight tile registers and their shapes, as the emulation holds them. */
typedef struct AmxEmu {
    uint8_t t[8][16][64]; /* [tile][row][byte] */
    uint8_t rows[8];
    uint16_t colsb[8];
} AmxEmu;

static void amx_emu_config(AmxEmu *em, const AmxCfg *c) {
    memset(em, 0, sizeof *em); /* ldtilecfg zeroes the tiles */
    for (int t = 0; t < 8; t++) {
        MP_ASSERT(c->rows[t] <= 16 && c->colsb[t] <= 64 && c->colsb[t] % 4 == 0);
        em->rows[t] = c->rows[t];
        em->colsb[t] = c->colsb[t];
    }
}

static void amx_emu_zero(AmxEmu *em, int t) { memset(em->t[t], 0, sizeof em->t[t]); }

/* tileloadd: rows [0, rows) of colsb bytes from base + r·stride; the rest of the tile zeroed. */
static void amx_emu_load(AmxEmu *em, int t, const void *base, long stride) {
    memset(em->t[t], 0, sizeof em->t[t]);
    for (int r = 0; r < em->rows[t]; r++) memcpy(em->t[t][r], (const char *)base + (long)r * stride, em->colsb[t]);
}

static void amx_emu_store(AmxEmu *em, int t, void *base, long stride) {
    for (int r = 0; r < em->rows[t]; r++) memcpy((char *)base + (long)r * stride, em->t[t][r], em->colsb[t]);
}

static float amx_emu_bf16(const AmxEmu *em, int t, int r, int i) { /* element i of row r as bf16 */
    uint16_t v;
    memcpy(&v, &em->t[t][r][2 * i], 2);
    return mp_bf16_to_f32(v);
}

/* tdpbf16ps c, a, b: the SDM's Operation, line by line (elements_src1 = a.colsb/4 pairs,
 * elements_dest = c.colsb/4 outputs, temp1 [c.colsb/2] even and odd chains per output). The
 * shapes the instruction faults on are assertions. */
static void amx_emu_dp(AmxEmu *em, int c, int a, int b) {
    MP_ASSERT(em->rows[c] == em->rows[a] && em->colsb[c] == em->colsb[b] && em->rows[b] == em->colsb[a] / 4);
    const int na = em->colsb[a] / 4, nd = em->colsb[c] / 4;
    for (int m = 0; m < em->rows[c]; m++) {
        float temp1[32] = {0};
        for (int k = 0; k < na; k++)
            for (int n = 0; n < nd; n++) {
                temp1[2 * n] = mp_fwd_fma_ftz(amx_emu_bf16(em, a, m, 2 * k), amx_emu_bf16(em, b, k, 2 * n), temp1[2 * n]);
                temp1[2 * n + 1] = mp_fwd_fma_ftz(amx_emu_bf16(em, a, m, 2 * k + 1), amx_emu_bf16(em, b, k, 2 * n + 1), temp1[2 * n + 1]);
            }
        for (int n = 0; n < nd; n++) {
            float d;
            memcpy(&d, &em->t[c][m][4 * n], 4);
            d = mp_fwd_fma_ftz(d, 1.0f, mp_fwd_fma_ftz(temp1[2 * n], 1.0f, temp1[2 * n + 1]));
            memcpy(&em->t[c][m][4 * n], &d, 4);
        }
        memset(&em->t[c][m][em->colsb[c]], 0, (size_t)(64 - em->colsb[c])); /* write_row_and_zero */
    }
    for (int m = em->rows[c]; m < 16; m++) memset(em->t[c][m], 0, 64); /* zero_upper_rows */
}

/* ================================================================ the blocked kernel */

#define AMX_MC 128 /* tokens per block: its bf16 copy [MC, KC] (128 KiB) is read by every panel of a group */
#define AMX_KC 512 /* k per chunk: 16 K tiles; a panel's slice is 32 KiB */
#define AMX_NB 8   /* panels per group: the group's partial sums y [MC, NB·32] (128 KiB) stay in L2 */

/* Per thread: the token block in bf16 (row stride KC) and the bounce buffer of an edge block. */
static _Thread_local uint16_t amx_xb[AMX_MC * AMX_KC] __attribute__((aligned(64)));
static _Thread_local float amx_cb[32 * 32] __attribute__((aligned(64)));

/* One 32 x 32 output block over nkt K tiles. */
typedef struct AmxBlock {
    float *y;           /* [rv, cv] of y, row stride ldy */
    int64_t ldy;
    int rv, cv;         /* valid rows and columns (<= 32) */
    int first;          /* 1: the sums start here (C from zero), else continue y's */
    const uint16_t *a;  /* amx_xb rows of the block, at the chunk's first k */
    const uint16_t *b;  /* the panel's packed weight at the chunk's first K tile */
    int nkt;
} AmxBlock;

/* An edge block runs through amx_cb [32][32]: y's sums copied in (zeros elsewhere) and back. */
static void amx_bounce_in(const AmxBlock *bk) {
    memset(amx_cb, 0, sizeof amx_cb);
    if (!bk->first)
        for (int r = 0; r < bk->rv; r++) memcpy(amx_cb + r * 32, bk->y + r * bk->ldy, (size_t)bk->cv * sizeof(float));
}

static void amx_bounce_out(const AmxBlock *bk) {
    for (int r = 0; r < bk->rv; r++) memcpy(bk->y + r * bk->ldy, amx_cb + r * 32, (size_t)bk->cv * sizeof(float));
}

/* The block on tiles: C 0-3 = rows 0-15/16-31 x columns 0-15/16-31, A 4-5 = the two 16-row halves
 * of x, B 6-7 = the two 16-column halves of the panel; per K tile two A and two B loads and four
 * tdpbf16ps. ZERO, LOAD, STORE and DP are the tile layer (literal tile numbers). */
#define AMX_BLOCK(ZERO, LOAD, STORE, DP, bk)                                                                      \
    do {                                                                                                          \
        const int full_ = (bk)->rv == 32 && (bk)->cv == 32;                                                       \
        float *c_ = full_ ? (bk)->y : amx_cb;                                                                     \
        const int64_t ldc_ = full_ ? (bk)->ldy : 32;                                                              \
        const long sc_ = (long)(ldc_ * (int64_t)sizeof(float)), sa_ = AMX_KC * 2;                                \
        if (!full_) amx_bounce_in(bk);                                                                            \
        if ((bk)->first) {                                                                                        \
            ZERO(0); ZERO(1); ZERO(2); ZERO(3);                                                                   \
        } else {                                                                                                  \
            LOAD(0, c_, sc_); LOAD(1, c_ + 16, sc_); LOAD(2, c_ + 16 * ldc_, sc_); LOAD(3, c_ + 16 * ldc_ + 16, sc_); \
        }                                                                                                         \
        for (int kt_ = 0; kt_ < (bk)->nkt; kt_++) {                                                               \
            const uint16_t *a_ = (bk)->a + kt_ * MP_AMX_KT, *b_ = (bk)->b + (size_t)kt_ * 2 * AMX_TILE;          \
            LOAD(4, a_, sa_); LOAD(5, a_ + 16 * AMX_KC, sa_); LOAD(6, b_, 64); LOAD(7, b_ + AMX_TILE, 64);        \
            DP(0, 4, 6); DP(1, 4, 7); DP(2, 5, 6); DP(3, 5, 7);                                                  \
        }                                                                                                         \
        STORE(0, c_, sc_); STORE(1, c_ + 16, sc_); STORE(2, c_ + 16 * ldc_, sc_); STORE(3, c_ + 16 * ldc_ + 16, sc_); \
        if (!full_) amx_bounce_out(bk);                                                                           \
    } while (0)

#define AMX_EMU_ZERO(t) amx_emu_zero(em, t)
#define AMX_EMU_LOAD(t, p, s) amx_emu_load(em, t, p, s)
#define AMX_EMU_STORE(t, p, s) amx_emu_store(em, t, p, s)
#define AMX_EMU_DP(c, a, b) amx_emu_dp(em, c, a, b)

static void amx_block_emu(void *st, const AmxBlock *bk) {
    AmxEmu *em = st;
    AMX_BLOCK(AMX_EMU_ZERO, AMX_EMU_LOAD, AMX_EMU_STORE, AMX_EMU_DP, bk);
}

#if AMX_X86
/* The instructions. tileloadd is written without a memory clobber by GCC's header: the barrier
 * keeps the stores that filled the buffer before the load. */
#define AMX_HW_ZERO(t) _tile_zero(t)
#define AMX_HW_LOAD(t, p, s)                     \
    do {                                         \
        __asm__ volatile("" ::: "memory");       \
        _tile_loadd(t, p, s);                    \
    } while (0)
#define AMX_HW_STORE(t, p, s) _tile_stored(t, p, s)
#define AMX_HW_DP(c, a, b) _tile_dpbf16ps(c, a, b)

__attribute__((target("amx-tile,amx-bf16"))) static void amx_block_hw(void *st, const AmxBlock *bk) {
    (void)st;
    AMX_BLOCK(AMX_HW_ZERO, AMX_HW_LOAD, AMX_HW_STORE, AMX_HW_DP, bk);
}

__attribute__((target("amx-tile"))) static void amx_hw_config(const AmxCfg *c) { _tile_loadconfig(c); }
__attribute__((target("amx-tile"))) static void amx_hw_release(void) { _tile_release(); }
#endif

/* x rows [0, mt) (row stride ldx), k [k0, k0 + kc) -> amx_xb [m32][KC] in bf16 (round to nearest
 * even, as mp_f32_to_bf16: exact for the bf16-valued inputs of a bf16 matmul; written out here so
 * the loop vectorises), zero past K and in rows [mt, m32). */
static void amx_x_block(const float *x, int64_t ldx, int64_t mt, int64_t m32, int64_t k0, int64_t kc, int64_t K) {
    const int64_t kv = K - k0 < kc ? K - k0 : kc; /* columns inside K */
    for (int64_t r = 0; r < m32; r++) {
        uint16_t *d = amx_xb + r * AMX_KC;
        if (r >= mt) {
            memset(d, 0, (size_t)kc * 2);
            continue;
        }
        const float *xr = x + r * ldx + k0;
#pragma omp simd
        for (int64_t j = 0; j < kv; j++) {
            uint32_t u;
            memcpy(&u, &xr[j], sizeof u);
            const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, nan = (u >> 16) | 0x40u;
            d[j] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
        }
        for (int64_t j = kv; j < kc; j++) d[j] = 0;
    }
}

typedef void (*AmxBlockFn)(void *st, const AmxBlock *bk);

/* Panels [p0, p1) for all T rows: token blocks, panel groups, k chunks (x converted once per
 * chunk and group), panels, 32-row blocks. Each output's sum runs over the K tiles in ascending
 * order from the zero tile, continued through y between chunks. */
static void amx_panels(AmxBlockFn fn, void *st, float *y, int64_t ldy, const float *x, int64_t ldx, const uint16_t *wt,
                       int64_t O, int64_t K, int64_t T, int64_t p0, int64_t p1) {
    const int64_t KT = (K + MP_AMX_KT - 1) / MP_AMX_KT, Kp = KT * MP_AMX_KT;
    for (int64_t t0 = 0; t0 < T; t0 += AMX_MC) {
        const int64_t mt = T - t0 < AMX_MC ? T - t0 : AMX_MC, m32 = (mt + 31) / 32 * 32;
        for (int64_t g0 = p0; g0 < p1; g0 += AMX_NB) {
            const int64_t g1 = g0 + AMX_NB < p1 ? g0 + AMX_NB : p1;
            for (int64_t k0 = 0; k0 < Kp; k0 += AMX_KC) {
                const int64_t kc = Kp - k0 < AMX_KC ? Kp - k0 : AMX_KC;
                amx_x_block(x + t0 * ldx, ldx, mt, m32, k0, kc, K);
                for (int64_t p = g0; p < g1; p++)
                    for (int64_t r = 0; r < m32; r += 32) {
                        const AmxBlock bk = {.y = y + (t0 + r) * ldy + p * MP_AMX_NP,
                                             .ldy = ldy,
                                             .rv = (int)(mt - r < 32 ? mt - r : 32),
                                             .cv = (int)(O - p * MP_AMX_NP < MP_AMX_NP ? O - p * MP_AMX_NP : MP_AMX_NP),
                                             .first = k0 == 0,
                                             .a = amx_xb + r * AMX_KC,
                                             .b = wt + ((size_t)p * (size_t)KT + (size_t)(k0 / MP_AMX_KT)) * 2 * AMX_TILE,
                                             .nkt = (int)(kc / MP_AMX_KT)};
                        fn(st, &bk);
                    }
            }
        }
    }
}

void mp_amx_matmul_panels(MpAmxImpl impl, float *y, int64_t ldy, const float *x, int64_t ldx, const uint16_t *wt,
                          int64_t O, int64_t K, int64_t T, int64_t p0, int64_t p1) {
    if (T <= 0 || p0 >= p1) return;
    const AmxCfg cfg = amx_cfg();
    if (impl == MP_AMX_EMU) {
        AmxEmu em;
        amx_emu_config(&em, &cfg);
        amx_panels(amx_block_emu, &em, y, ldy, x, ldx, wt, O, K, T, p0, p1);
        return;
    }
#if AMX_X86
    MP_ASSERT(mp_amx_usable(NULL));
    amx_hw_config(&cfg); /* this thread's tile configuration */
    amx_panels(amx_block_hw, NULL, y, ldy, x, ldx, wt, O, K, T, p0, p1);
    amx_hw_release();
#else
    MP_ASSERT(!"the AMX instructions are not built here");
#endif
}

/* ================================================================ availability, self-check */

#if AMX_X86
#define AMX_ARCH_GET_XCOMP_PERM 0x1022
#define AMX_ARCH_REQ_XCOMP_PERM 0x1023
#define AMX_XFEATURE_XTILEDATA 18

static int amx_probe(const char **why) {
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7) return *why = "this CPU has no AMX (cpuid leaf 7 missing)", 0;
    __cpuid_count(7, 0, a, b, c, d);
    if (!((d >> 22) & 1u) || !((d >> 24) & 1u)) return *why = "this CPU has no AMX (cpuid: no amx_bf16 / amx_tile)", 0;
    __cpuid(1, a, b, c, d);
    if (!((c >> 27) & 1u)) return *why = "the OS does not enable XSAVE (cpuid: no osxsave)", 0;
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    if ((lo & (3u << 17)) != (3u << 17)) return *why = "the OS does not enable the tile state (XCR0 bits 17-18 clear)", 0;
    if (syscall(SYS_arch_prctl, AMX_ARCH_REQ_XCOMP_PERM, AMX_XFEATURE_XTILEDATA) != 0)
        return *why = "Linux refused the AMX permission (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) failed: a kernel before 5.16?)", 0;
    unsigned long long perm = 0;
    if (syscall(SYS_arch_prctl, AMX_ARCH_GET_XCOMP_PERM, &perm) != 0 || !(perm & (1ull << AMX_XFEATURE_XTILEDATA)))
        return *why = "Linux did not grant the AMX permission (ARCH_GET_XCOMP_PERM lacks XTILEDATA)", 0;
    *why = "";
    return 1;
}
#endif

static int amx_usable_state;
static const char *amx_usable_reason = "";

static void amx_usable_once(void) {
#if AMX_X86
    amx_usable_state = amx_probe(&amx_usable_reason);
#else
    amx_usable_reason = "this build has no AMX code (it needs GCC on x86-64)";
    amx_usable_state = 0;
#endif
}

int mp_amx_usable(const char **why) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_usable_once);
    if (why) *why = amx_usable_reason;
    return amx_usable_state;
}

#if AMX_X86
/* Self-check data: a bf16 value drawn by kind (0: normal over 2^-15 .. 2^15; 1: also subnormal
 * or tiny; 2: near 2^-63, so products land near FLT_MIN). */
static uint16_t amx_check_value(uint64_t *s, int kind) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t r = (uint32_t)(*s >> 33);
    const uint16_t sign = (uint16_t)((r & 1u) << 15), man = (uint16_t)((r >> 1) & 0x7fu);
    if (kind == 1 && (r >> 8) % 8 == 0) return (uint16_t)(sign | (man ? man : 1u)); /* subnormal */
    const int e = kind == 2 ? 127 - 63 + (int)((r >> 8) % 5) - 2 : 127 + (int)((r >> 8) % 31) - 15;
    return (uint16_t)(sign | (uint16_t)(e << 7) | man);
}

/* The Intrinsics Guide's order of the same tile: one chain per output from the accumulator, even
 * product, then odd product, pair after pair (the other documented order the self-check reports). */
static void amx_check_guide(float *c, const uint16_t *a, const uint16_t *b) {
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            float acc = c[m * 16 + n];
            for (int k = 0; k < 16; k++) {
                acc = mp_fwd_fma_ftz(mp_bf16_to_f32(a[m * 32 + 2 * k]), mp_bf16_to_f32(b[k * 32 + 2 * n]), acc);
                acc = mp_fwd_fma_ftz(mp_bf16_to_f32(a[m * 32 + 2 * k + 1]), mp_bf16_to_f32(b[k * 32 + 2 * n + 1]), acc);
            }
            c[m * 16 + n] = acc;
        }
}

__attribute__((target("amx-tile,amx-bf16"))) static void amx_check_hw(float *c, const uint16_t *a, const uint16_t *b) {
    const AmxCfg cfg = amx_cfg();
    _tile_loadconfig(&cfg);
    AMX_HW_LOAD(0, c, 64);
    AMX_HW_LOAD(4, a, 64);
    AMX_HW_LOAD(6, b, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_stored(0, c, 64);
    _tile_release();
}

static void amx_check_emu(float *c, const uint16_t *a, const uint16_t *b) {
    const AmxCfg cfg = amx_cfg();
    AmxEmu em;
    amx_emu_config(&em, &cfg);
    amx_emu_load(&em, 0, c, 64);
    amx_emu_load(&em, 4, a, 64);
    amx_emu_load(&em, 6, b, 64);
    amx_emu_dp(&em, 0, 4, 6);
    amx_emu_store(&em, 0, c, 64);
}

/* ulps between two finite floats of any sign (the integer distance of their ordered patterns). */
static double amx_ulps(float p, float q) {
    const int64_t a = (int64_t)(int32_t)amx_bits(p), b = (int64_t)(int32_t)amx_bits(q);
    const int64_t oa = a < 0 ? INT32_MIN - a : a, ob = b < 0 ? INT32_MIN - b : b;
    return fabs((double)(oa - ob));
}

#endif

static int amx_selfcheck_run(char *line, size_t n) {
    const char *why;
    if (!mp_amx_usable(&why)) return snprintf(line, n, "tdpbf16ps not run: %s", why), 0;
#if AMX_X86
    uint16_t a[16 * 32], b[16 * 32];
    float c0[256], hw[256], em[256], gd[256];
    uint64_t s = 12345;
    long same = 0, guide = 0, total = 0;
    double worst = 0;
    for (int round = 0; round < 96; round++) {
        const int kind = round % 3;
        for (int i = 0; i < 16 * 32; i++) {
            a[i] = amx_check_value(&s, kind);
            b[i] = amx_check_value(&s, kind);
        }
        if (round % 12 == 5) /* exact cancellation of pairs in row 0: a_odd·b_odd = -(a_even·b_even) */
            for (int k = 0; k < 16; k++) {
                a[2 * k + 1] = a[2 * k];
                for (int j = 0; j < 16; j++) b[k * 32 + 2 * j + 1] = (uint16_t)(b[k * 32 + 2 * j] ^ 0x8000u);
            }
        for (int i = 0; i < 256; i++)
            c0[i] = round % 4 == 3 ? 0.0f : mp_bf16_to_f32(amx_check_value(&s, kind)) * (float)(1 + i % 7);
        memcpy(hw, c0, sizeof hw);
        memcpy(em, c0, sizeof em);
        memcpy(gd, c0, sizeof gd);
        amx_check_hw(hw, a, b);
        amx_check_emu(em, a, b);
        amx_check_guide(gd, a, b);
        for (int i = 0; i < 256; i++) {
            same += amx_bits(hw[i]) == amx_bits(em[i]);
            guide += amx_bits(hw[i]) == amx_bits(gd[i]);
            if (isfinite(hw[i]) && isfinite(em[i]) && amx_ulps(hw[i], em[i]) > worst) worst = amx_ulps(hw[i], em[i]);
            total++;
        }
    }
    if (same == total)
        return snprintf(line, n, "tdpbf16ps == the SDM's order (emulation) on %ld of %ld outputs", same, total), 1;
    snprintf(line, n,
             "tdpbf16ps differs from the SDM's order (emulation) on %ld of %ld outputs (at most %.0f ulp); equals the "
             "Intrinsics Guide's single chain on %ld",
             total - same, total, worst, guide);
    return 0;
#else
    return 0;
#endif
}

static int amx_selfcheck_state;
static char amx_selfcheck_line[256];

static void amx_selfcheck_once(void) { amx_selfcheck_state = amx_selfcheck_run(amx_selfcheck_line, sizeof amx_selfcheck_line); }

int mp_amx_selfcheck(char *msg, size_t n) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, amx_selfcheck_once);
    if (msg && n) snprintf(msg, n, "%s", amx_selfcheck_line);
    return amx_selfcheck_state;
}
