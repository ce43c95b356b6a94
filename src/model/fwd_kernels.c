/* fwd_kernels.c — see fwd_kernels.h. Reference kernels first, then the blocked variants, the
 * matmul kernel dispatch (one loop nest compiled per instruction set, chosen at run time or forced
 * by MASKPOS_KERNEL; docs/speed.md) and the bf16 helpers.
 *
 * Why the fast variants are bit-identical to the references: the C11 build contracts no a*b+c
 * (ISO mode means -ffp-contract=off), and every sum below is written as fmaf steps in ascending
 * inner index starting from 0, both in the reference and in the blocked loops. fmaf is exactly
 * rounded wherever it runs (a vfmadd instruction in the x86-64-v3/v4 clones, glibc's fmaf in the
 * baseline clone), so the clone picked at run time never changes a bit, only the speed.
 */
#include "model/fwd_kernels.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef _OPENMP
#include <omp.h>
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
#include <immintrin.h>
#endif

#include "core/err.h"      /* MP_ASSERT */
#include "kernels/vexp.h"   /* mp_vexpf_neg: the softmax's exponential */
#include "model/fwd_amx.h"  /* the AMX kernel (real and emulated), mp_fwd_fma_ftz */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
#define FWD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"), flatten))
#else
#define FWD_CLONES
#endif

/* ================================================================ matmul: reference */

void mp_fwd_matmul_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t O,
                       int64_t K, int64_t T) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k++) acc = fmaf(x[t * ldx + k], w[o * K + k], acc);
            y[t * ldy + o] = acc;
        }
}

void mp_fwd_matmul_ref_pairs(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t O, int64_t K,
                             int64_t T) {
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; k += 2) {
                /* the odd element first (a zero partner past K: +0 · +0 turns a -0 sum into +0),
                 * then the even one */
                acc = k + 1 < K ? mp_fwd_fma_ftz(x[t * ldx + k + 1], w[o * K + k + 1], acc) : mp_fwd_fma_ftz(0.0f, 0.0f, acc);
                acc = mp_fwd_fma_ftz(x[t * ldx + k], w[o * K + k], acc);
            }
            y[t * ldy + o] = acc;
        }
}

/* ================================================================ matmul: packed, blocked */

size_t mp_fwd_mat_floats(int64_t out, int64_t in) {
    return (size_t)((out + MP_FWD_NR - 1) / MP_FWD_NR) * (size_t)in * MP_FWD_NR;
}

void mp_fwd_mat_pack(MpFwdMat *dst, const float *w, int64_t out, int64_t in) {
    const int64_t P = (out + MP_FWD_NR - 1) / MP_FWD_NR;
    dst->pb = NULL; /* an f32 weight */
    dst->out = out;
    dst->in = in;
    for (int64_t b = 0; b < P; b++)
        for (int64_t k = 0; k < in; k++) {
            float *d = dst->p + ((size_t)b * (size_t)in + (size_t)k) * MP_FWD_NR;
            for (int c = 0; c < MP_FWD_NR; c++) {
                int64_t o = b * MP_FWD_NR + c;
                d[c] = o < out ? w[(size_t)o * (size_t)in + (size_t)k] : 0.0f;
            }
        }
}

#ifndef FWD_MC
#define FWD_MC 256 /* tokens per cache block: x block [MC, KC] = 256 KiB stays in L2 */
#endif
#ifndef FWD_NB
#define FWD_NB 16 /* panels per group: partial sums y [MC, NB*NR] = 512 KiB stay in L2 */
#endif
#ifndef FWD_KC
#define FWD_KC 256 /* inner-index chunk: one panel slice [KC, NR] = 32 KiB stays in L1 */
#endif

/* One step k of every row's sums: acc[r][c] = fmaf(x[r, k], w[k][c], acc[r][c]). */
#define MM_STEP(k)                                                                                  \
    do {                                                                                            \
        const float *w_ = wp + (k) * MP_FWD_NR;                                                     \
        _Pragma("GCC unroll 8") for (int r = 0; r < MP_FWD_MR; r++) {                               \
            const float xv = x[r * ldx + (k)];                                                      \
            _Pragma("omp simd") for (int c = 0; c < MP_FWD_NR; c++) acc[r][c] = fmaf(xv, w_[c], acc[r][c]); \
        }                                                                                           \
    } while (0)

/* y [MR, nc] (+)= x [MR, k0..k1) · panel slice; first: start from 0, else continue y's sums.
 * pairs (a constant after inlining): the steps in vdpbf16ps's order — k+1, then k, for each pair
 * from an even k0, and an odd k1 (= K) a zero partner first (+0 · +0 added: the instruction's
 * padding) — else ascending. Accumulators live in registers (16 zmm in the v4 clone). */
static inline void mm_micro(float *y, int64_t ldy, const float *x, int64_t ldx, const float *wp, int64_t k0,
                            int64_t k1, int first, int nc, const int pairs) {
    float acc[MP_FWD_MR][MP_FWD_NR];
    for (int r = 0; r < MP_FWD_MR; r++) {
        if (first || nc < MP_FWD_NR) {
#pragma omp simd
            for (int c = 0; c < MP_FWD_NR; c++) acc[r][c] = 0.0f;
        }
        if (!first) {
            if (nc == MP_FWD_NR) {
#pragma omp simd
                for (int c = 0; c < MP_FWD_NR; c++) acc[r][c] = y[r * ldy + c];
            } else {
                for (int c = 0; c < nc; c++) acc[r][c] = y[r * ldy + c];
            }
        }
    }
    if (!pairs) {
        for (int64_t k = k0; k < k1; k++) MM_STEP(k);
    } else {
        int64_t k = k0;
        for (; k + 1 < k1; k += 2) {
            MM_STEP(k + 1);
            MM_STEP(k);
        }
        if (k < k1) {
            for (int r = 0; r < MP_FWD_MR; r++) {
#pragma omp simd
                for (int c = 0; c < MP_FWD_NR; c++) acc[r][c] = acc[r][c] + 0.0f;
            }
            MM_STEP(k);
        }
    }
    for (int r = 0; r < MP_FWD_MR; r++) {
        if (nc == MP_FWD_NR) {
#pragma omp simd
            for (int c = 0; c < MP_FWD_NR; c++) y[r * ldy + c] = acc[r][c];
        } else {
            for (int c = 0; c < nc; c++) y[r * ldy + c] = acc[r][c];
        }
    }
}

/* Leftover rows (mr < MR; every row of a one-token decoding step): the same order per element,
 * one row at a time, vectorised across the panel's NR columns (columns past nc are the panel's
 * zero padding, computed and dropped). */
static void mm_edge(float *y, int64_t ldy, const float *x, int64_t ldx, const float *wp, int64_t k0, int64_t k1,
                    int first, int nc, int mr, const int pairs) {
#define MM_EDGE_STEP(k)                                                                  \
    do {                                                                                 \
        const float xv = x[r * ldx + (k)], *w = wp + (k) * MP_FWD_NR;                    \
        _Pragma("omp simd") for (int c = 0; c < MP_FWD_NR; c++) acc[c] = fmaf(xv, w[c], acc[c]); \
    } while (0)
    for (int r = 0; r < mr; r++) {
        float acc[MP_FWD_NR];
        for (int c = 0; c < MP_FWD_NR; c++) acc[c] = first || c >= nc ? 0.0f : y[r * ldy + c];
        if (!pairs) {
            for (int64_t k = k0; k < k1; k++) MM_EDGE_STEP(k);
        } else { /* mm_micro's order */
            for (int64_t k = k0; k < k1; k += 2) {
                if (k + 1 < k1) MM_EDGE_STEP(k + 1);
                else {
#pragma omp simd
                    for (int c = 0; c < MP_FWD_NR; c++) acc[c] = acc[c] + 0.0f;
                }
                MM_EDGE_STEP(k);
            }
        }
        for (int c = 0; c < nc; c++) y[r * ldy + c] = acc[c];
    }
#undef MM_EDGE_STEP
}

/* [n] bf16 panel slice -> f32, exactly (the bf16 bits are the upper half of the f32 pattern). */
static inline void mm_widen(float *dst, const uint16_t *src, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const union {
            uint32_t u;
            float f;
        } v = {.u = (uint32_t)src[i] << 16};
        dst[i] = v.f;
    }
}

/* One thread's share: panels [p0, p1) for all T rows. Loop order: token blocks (x rows reused
 * from L2), panel groups (their partial sums stay in L2 across the k chunks), k chunks, panels
 * (one [KC, NR] slice in L1 for all MR-row blocks; a bf16 slice is first widened into wbuf).
 * The sum of every y element still runs over k in ascending order, from 0 (pairs: in vdpbf16ps's
 * order, mm_micro; the chunks start at even k). Inlined into one wrapper per instruction set
 * below (flatten), so each wrapper is the whole loop nest compiled for its target. */
static inline void mm_panels_impl(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T,
                                  int64_t p0, int64_t p1, const int pairs) {
    const int64_t K = w->in, O = w->out;
    float wbuf[FWD_KC * MP_FWD_NR] __attribute__((aligned(64))); /* 32 KiB: one widened bf16 slice */
    for (int64_t t0 = 0; t0 < T; t0 += FWD_MC) {
        const int64_t t1 = t0 + FWD_MC < T ? t0 + FWD_MC : T;
        for (int64_t g0 = p0; g0 < p1; g0 += FWD_NB) {
            const int64_t g1 = g0 + FWD_NB < p1 ? g0 + FWD_NB : p1;
            for (int64_t k0 = 0; k0 < K; k0 += FWD_KC) {
                const int64_t k1 = k0 + FWD_KC < K ? k0 + FWD_KC : K;
                for (int64_t p = g0; p < g1; p++) {
                    const int nc = (int)(O - p * MP_FWD_NR < MP_FWD_NR ? O - p * MP_FWD_NR : MP_FWD_NR);
                    float *yp = y + p * MP_FWD_NR;
                    /* wp + k*NR is the slice's row k, for k in [kb, k1) */
                    const float *wp;
                    int64_t kb, ke;
                    const float *xk;
                    if (w->pb) {
                        mm_widen(wbuf, w->pb + ((size_t)p * (size_t)K + (size_t)k0) * MP_FWD_NR, (size_t)(k1 - k0) * MP_FWD_NR);
                        wp = wbuf;
                        kb = 0;
                        ke = k1 - k0;
                        xk = x + k0;
                    } else {
                        wp = w->p + (size_t)p * (size_t)K * MP_FWD_NR;
                        kb = k0;
                        ke = k1;
                        xk = x;
                    }
                    int64_t t = t0;
                    for (; t + MP_FWD_MR <= t1; t += MP_FWD_MR)
                        mm_micro(yp + t * ldy, ldy, xk + t * ldx, ldx, wp, kb, ke, k0 == 0, nc, pairs);
                    if (t < t1) mm_edge(yp + t * ldy, ldy, xk + t * ldx, ldx, wp, kb, ke, k0 == 0, nc, (int)(t1 - t), pairs);
                }
            }
        }
    }
}

/* ================================================================ matmul: kernels and dispatch */

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
#define FWD_X86 1
#else
#define FWD_X86 0
#endif

typedef void (*FwdPanelsFn)(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T, int64_t p0,
                            int64_t p1);

#if FWD_X86
__attribute__((target("arch=x86-64-v4"), flatten)) static void mm_panels_avx512(float *y, int64_t ldy, const float *x,
                                                                                int64_t ldx, const MpFwdMat *w, int64_t T,
                                                                                int64_t p0, int64_t p1) {
    mm_panels_impl(y, ldy, x, ldx, w, T, p0, p1, 0);
}

__attribute__((target("arch=x86-64-v3"), flatten)) static void mm_panels_avx2(float *y, int64_t ldy, const float *x,
                                                                              int64_t ldx, const MpFwdMat *w, int64_t T,
                                                                              int64_t p0, int64_t p1) {
    mm_panels_impl(y, ldy, x, ldx, w, T, p0, p1, 0);
}

/* ---------------------------------------------------------------- AVX512-BF16 (vdpbf16ps)
 * bf16 weights only (an f32 weight runs the avx512 loop nest, same bits as every other kernel).
 * vdpbf16ps takes 32 bf16 pairs and adds the two products of each pair to one of 16 f32 lanes,
 * so the operands are regrouped by pairs of k: per (token block, panel group, k chunk) the x
 * block [MC, KC] is converted to bf16 once (xb, row stride KC), and per panel the [KC, 32] slice
 * is interleaved into [KC/2][32][2] (wb: lanes = columns, pairs = k, k+1), reused by every 12-row
 * block. An odd last k gets a zero partner. Every y element is still one sum over k from 0 in a
 * fixed order (pair after pair; within a pair, the hardware's), so results do not depend on
 * threads or blocking — but they differ from the fmaf order of the other kernels by f32 rounding
 * (bounds in docs/speed.md; the instruction also flushes subnormal inputs and outputs). */

#ifndef FWD_BMR
#define FWD_BMR 12 /* rows of the vdpbf16ps micro-kernel: 2 x BMR zmm accumulators */
#endif

/* x [rows, n] (row stride ldx) -> bf16 xb [rows, KC] (round to nearest even, as
 * mp_fwd_bf16_from_f32: exact for the bf16-valued inputs of a bf16 matmul); an odd n gets a zero
 * column n. */
__attribute__((target("arch=x86-64-v4,avx512bf16"))) static void mm_bf16_x(uint16_t *xb, const float *x, int64_t ldx,
                                                                           int64_t rows, int64_t n) {
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * ldx;
        uint16_t *d = xb + r * FWD_KC;
#pragma omp simd
        for (int64_t k = 0; k < n; k++) {
            uint32_t u;
            memcpy(&u, &xr[k], sizeof u);
            const uint32_t rne = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, nan = (u >> 16) | 0x40u;
            d[k] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rne);
        }
        if (n & 1) d[n] = 0;
    }
}

/* The [n, 32] bf16 slice s (rows k) -> wb [(n+1)/2][32][2]: wb[j][c] = (s[2j][c], s[2j+1][c]). */
__attribute__((target("arch=x86-64-v4,avx512bf16"))) static void mm_bf16_w(uint16_t *wb, const uint16_t *s, int64_t n) {
    static const uint16_t lo[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                    8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
    static const uint16_t hi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
                                    24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};
    const __m512i ilo = _mm512_loadu_si512(lo), ihi = _mm512_loadu_si512(hi);
    for (int64_t j = 0; 2 * j < n; j++) {
        const __m512i a = _mm512_loadu_si512(s + 2 * j * MP_FWD_NR);
        const __m512i b = 2 * j + 1 < n ? _mm512_loadu_si512(s + (2 * j + 1) * MP_FWD_NR) : _mm512_setzero_si512();
        _mm512_store_si512(wb + j * 2 * MP_FWD_NR, _mm512_permutex2var_epi16(a, ilo, b));
        _mm512_store_si512(wb + j * 2 * MP_FWD_NR + MP_FWD_NR, _mm512_permutex2var_epi16(a, ihi, b));
    }
}

/* y [mr, nc] (+)= xb [mr, 2 kp] · wb [kp][32][2]; mr <= BMR is a constant after inlining, so the
 * 2·mr accumulators stay in registers. */
__attribute__((target("arch=x86-64-v4,avx512bf16"), always_inline)) static inline void
mm_bf16_micro(float *y, int64_t ldy, const uint16_t *xb, const uint16_t *wb, int64_t kp, int first, int nc, const int mr) {
    __m512 a0[FWD_BMR], a1[FWD_BMR];
    const __mmask16 m0 = nc >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nc) - 1u);
    const __mmask16 m1 = nc >= 32 ? (__mmask16)0xffff : nc > 16 ? (__mmask16)((1u << (nc - 16)) - 1u) : (__mmask16)0;
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        a0[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m0, y + r * ldy);
        a1[r] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(m1, y + r * ldy + 16);
    }
    for (int64_t j = 0; j < kp; j++) {
        const __m512bh w0 = (__m512bh)_mm512_load_si512(wb + j * 2 * MP_FWD_NR);
        const __m512bh w1 = (__m512bh)_mm512_load_si512(wb + j * 2 * MP_FWD_NR + MP_FWD_NR);
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
            int32_t pair;
            memcpy(&pair, xb + r * FWD_KC + 2 * j, sizeof pair);
            const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
            a0[r] = _mm512_dpbf16_ps(a0[r], xv, w0);
            a1[r] = _mm512_dpbf16_ps(a1[r], xv, w1);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++) {
        _mm512_mask_storeu_ps(y + r * ldy, m0, a0[r]);
        _mm512_mask_storeu_ps(y + r * ldy + 16, m1, a1[r]);
    }
}

__attribute__((target("arch=x86-64-v4,avx512bf16"))) static void mm_bf16_block(float *y, int64_t ldy, const uint16_t *xb,
                                                                               const uint16_t *wb, int64_t kp, int first,
                                                                               int nc, int64_t rows) {
    int64_t t = 0;
    for (; t + FWD_BMR <= rows; t += FWD_BMR) mm_bf16_micro(y + t * ldy, ldy, xb + t * FWD_KC, wb, kp, first, nc, FWD_BMR);
    if (rows - t >= 8) {
        mm_bf16_micro(y + t * ldy, ldy, xb + t * FWD_KC, wb, kp, first, nc, 8);
        t += 8;
    }
    y += t * ldy;
    xb += t * FWD_KC;
    switch (rows - t) { /* one constant-size instance per leftover row count */
    case 7: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 7); break;
    case 6: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 6); break;
    case 5: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 5); break;
    case 4: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 4); break;
    case 3: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 3); break;
    case 2: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 2); break;
    case 1: mm_bf16_micro(y, ldy, xb, wb, kp, first, nc, 1); break;
    default: break;
    }
}

/* Per thread: the bf16 x block (128 KiB) and one interleaved weight slice (16 KiB). */
static _Thread_local uint16_t mm_bf16_xbuf[FWD_MC * FWD_KC] __attribute__((aligned(64)));
static _Thread_local uint16_t mm_bf16_wbuf[FWD_KC * MP_FWD_NR] __attribute__((aligned(64)));

__attribute__((target("arch=x86-64-v4,avx512bf16"))) static void mm_panels_avx512bf16(float *y, int64_t ldy, const float *x,
                                                                                      int64_t ldx, const MpFwdMat *w,
                                                                                      int64_t T, int64_t p0, int64_t p1) {
    if (!w->pb) {
        mm_panels_avx512(y, ldy, x, ldx, w, T, p0, p1);
        return;
    }
    const int64_t K = w->in, O = w->out;
    uint16_t *xb = mm_bf16_xbuf, *wb = mm_bf16_wbuf;
    for (int64_t t0 = 0; t0 < T; t0 += FWD_MC) {
        const int64_t t1 = t0 + FWD_MC < T ? t0 + FWD_MC : T;
        for (int64_t g0 = p0; g0 < p1; g0 += FWD_NB) {
            const int64_t g1 = g0 + FWD_NB < p1 ? g0 + FWD_NB : p1;
            for (int64_t k0 = 0; k0 < K; k0 += FWD_KC) {
                const int64_t k1 = k0 + FWD_KC < K ? k0 + FWD_KC : K;
                mm_bf16_x(xb, x + t0 * ldx + k0, ldx, t1 - t0, k1 - k0);
                for (int64_t p = g0; p < g1; p++) {
                    const int nc = (int)(O - p * MP_FWD_NR < MP_FWD_NR ? O - p * MP_FWD_NR : MP_FWD_NR);
                    mm_bf16_w(wb, w->pb + ((size_t)p * (size_t)K + (size_t)k0) * MP_FWD_NR, k1 - k0);
                    mm_bf16_block(y + t0 * ldy + p * MP_FWD_NR, ldy, xb, wb, (k1 - k0 + 1) / 2, k0 == 0, nc, t1 - t0);
                }
            }
        }
    }
}
#endif

__attribute__((flatten)) static void mm_panels_scalar(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w,
                                                      int64_t T, int64_t p0, int64_t p1) {
    mm_panels_impl(y, ldy, x, ldx, w, T, p0, p1, 0);
}

#if FWD_X86
/* ---------------------------------------------------------------- vdpbf16ps's order on FMA units
 * bf16 weights: the blocked loops in the pair order of mm_micro, with this thread's MXCSR set to
 * flush (FTZ, bit 15) and to read subnormal inputs as zero (DAZ, bit 6) as vdpbf16ps does, and
 * restored after; every step is one vfmadd, exactly rounded: avx512bf16's bits (the pairs class),
 * at the FMA units' rate (faster where vdpbf16ps runs at half of it). f32 weights: the fma loops. */
#define FWD_MXCSR_FTZ_DAZ 0x8040u

__attribute__((target("arch=x86-64-v4"), flatten)) static void mm_panels_avx512pairs(float *y, int64_t ldy, const float *x,
                                                                                     int64_t ldx, const MpFwdMat *w,
                                                                                     int64_t T, int64_t p0, int64_t p1) {
    if (!w->pb) {
        mm_panels_avx512(y, ldy, x, ldx, w, T, p0, p1);
        return;
    }
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | FWD_MXCSR_FTZ_DAZ);
    mm_panels_impl(y, ldy, x, ldx, w, T, p0, p1, 1);
    _mm_setcsr(csr);
}

__attribute__((target("arch=x86-64-v3"), flatten)) static void mm_panels_avx2pairs(float *y, int64_t ldy, const float *x,
                                                                                   int64_t ldx, const MpFwdMat *w, int64_t T,
                                                                                   int64_t p0, int64_t p1) {
    if (!w->pb) {
        mm_panels_avx2(y, ldy, x, ldx, w, T, p0, p1);
        return;
    }
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | FWD_MXCSR_FTZ_DAZ);
    mm_panels_impl(y, ldy, x, ldx, w, T, p0, p1, 1);
    _mm_setcsr(csr);
}
#endif

/* ---------------------------------------------------------------- AMX (fwd_amx.h)
 * bf16 weights in the tile layout: the tile kernel, real or emulated, on this thread's panels.
 * f32 weights: the fastest fma loops built and run here. */
static void mm_panels_f32_best(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T,
                               int64_t p0, int64_t p1) {
#if FWD_X86
    if (__builtin_cpu_supports("x86-64-v4") > 0) mm_panels_avx512(y, ldy, x, ldx, w, T, p0, p1);
    else if (__builtin_cpu_supports("x86-64-v3") > 0) mm_panels_avx2(y, ldy, x, ldx, w, T, p0, p1);
    else
#endif
        mm_panels_scalar(y, ldy, x, ldx, w, T, p0, p1);
}

static void mm_panels_amx_any(MpAmxImpl impl, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w,
                              int64_t T, int64_t p0, int64_t p1) {
    if (!w->pb) {
        mm_panels_f32_best(y, ldy, x, ldx, w, T, p0, p1);
        return;
    }
    mp_amx_matmul_panels(impl, y, ldy, x, ldx, w->pb, w->out, w->in, T, p0, p1);
}

static void mm_panels_amx(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T, int64_t p0,
                          int64_t p1) {
    mm_panels_amx_any(MP_AMX_REAL, y, ldy, x, ldx, w, T, p0, p1);
}

static void mm_panels_amxemu(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T,
                             int64_t p0, int64_t p1) {
    mm_panels_amx_any(MP_AMX_EMU, y, ldy, x, ldx, w, T, p0, p1);
}

/* W[o][k] of a packed weight, whatever its dtype. */
static inline float mm_at(const MpFwdMat *w, int64_t o, int64_t k) {
    const size_t i = ((size_t)(o / MP_FWD_NR) * (size_t)w->in + (size_t)k) * MP_FWD_NR + (size_t)(o % MP_FWD_NR);
    return w->pb ? mp_fwd_bf16_to_f32(w->pb[i]) : w->p[i];
}

/* The reference order on the packed layout: columns of panels [p0, p1), every sum from 0 in
 * ascending k (as mp_fwd_matmul_ref). */
static void mm_panels_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T, int64_t p0,
                          int64_t p1) {
    const int64_t o1 = p1 * MP_FWD_NR < w->out ? p1 * MP_FWD_NR : w->out;
    for (int64_t t = 0; t < T; t++)
        for (int64_t o = p0 * MP_FWD_NR; o < o1; o++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < w->in; k++) acc = fmaf(x[t * ldx + k], mm_at(w, o, k), acc);
            y[t * ldy + o] = acc;
        }
}

/* The kernels: one row each. bits: the class on bf16 weights (on f32 weights every kernel sums
 * in the fma order; amx's class is decided by its self-check); layout: where it reads bf16
 * weights; f32: it has f32 loops of its own (the others run the fma loops of another row on f32
 * weights); rank: 0 = a candidate of mp_fwd_kernel_pick, 1 = only when no rank-0 kernel of the
 * class runs here, 2 = never picked (the naive loops); pref: among candidates measured within 10%
 * of each other, the higher pref wins (so a close call does not flip between processes). */
typedef struct FwdKernelRow {
    const char *name;
    int bits, layout, f32, rank, pref;
    FwdPanelsFn fn; /* NULL: not built */
} FwdKernelRow;

#if FWD_X86
#define FWD_FN(f) f
#else
#define FWD_FN(f) NULL
#endif
static const FwdKernelRow fwd_kernels[MP_FWD_KERNEL_COUNT] = {
    [MP_FWD_KERNEL_AUTO] = {"auto", -1, MP_FWD_LAYOUT_PANELS, 0, 2, 0, NULL},
    [MP_FWD_KERNEL_REF] = {"ref", MP_FWD_BITS_FMA, MP_FWD_LAYOUT_PANELS, 1, 2, 0, mm_panels_ref},
    [MP_FWD_KERNEL_SCALAR] = {"scalar", MP_FWD_BITS_FMA, MP_FWD_LAYOUT_PANELS, 1, 1, 0, mm_panels_scalar},
    [MP_FWD_KERNEL_AVX2] = {"avx2", MP_FWD_BITS_FMA, MP_FWD_LAYOUT_PANELS, 1, 0, 1, FWD_FN(mm_panels_avx2)},
    [MP_FWD_KERNEL_AVX512] = {"avx512", MP_FWD_BITS_FMA, MP_FWD_LAYOUT_PANELS, 1, 0, 2, FWD_FN(mm_panels_avx512)},
    [MP_FWD_KERNEL_AVX512BF16] = {"avx512bf16", MP_FWD_BITS_PAIRS, MP_FWD_LAYOUT_PANELS, 0, 0, 3, FWD_FN(mm_panels_avx512bf16)},
    [MP_FWD_KERNEL_AVX512PAIRS] = {"avx512pairs", MP_FWD_BITS_PAIRS, MP_FWD_LAYOUT_PANELS, 0, 0, 2, FWD_FN(mm_panels_avx512pairs)},
    [MP_FWD_KERNEL_AVX2PAIRS] = {"avx2pairs", MP_FWD_BITS_PAIRS, MP_FWD_LAYOUT_PANELS, 0, 0, 1, FWD_FN(mm_panels_avx2pairs)},
    [MP_FWD_KERNEL_AMX] = {"amx", MP_FWD_BITS_TILES, MP_FWD_LAYOUT_TILES, 0, 0, 1, mm_panels_amx}, /* runs where mp_amx_usable */
    [MP_FWD_KERNEL_AMXEMU] = {"amxemu", MP_FWD_BITS_TILES, MP_FWD_LAYOUT_TILES, 0, 1, 0, mm_panels_amxemu},
};
#undef FWD_FN

static const char *const fwd_bits_names[MP_FWD_BITS_COUNT] = {
    [MP_FWD_BITS_FMA] = "fma", [MP_FWD_BITS_PAIRS] = "pairs", [MP_FWD_BITS_TILES] = "tiles", [MP_FWD_BITS_AMXHW] = "amx-hw"};

static MpFwdKernel fwd_kernel = MP_FWD_KERNEL_AUTO; /* resolved on first use or by mp_fwd_kernel_set */

const char *mp_fwd_kernel_name(MpFwdKernel k) { return k >= 0 && k < MP_FWD_KERNEL_COUNT ? fwd_kernels[k].name : "?"; }

int mp_fwd_kernel_parse(const char *name) {
    for (int k = 0; k < MP_FWD_KERNEL_COUNT; k++)
        if (!strcmp(name, fwd_kernels[k].name)) return k;
    return -1;
}

const char *mp_fwd_bits_name(int bits) { return bits >= 0 && bits < MP_FWD_BITS_COUNT ? fwd_bits_names[bits] : "?"; }

int mp_fwd_bits_parse(const char *name) {
    for (int b = 0; b < MP_FWD_BITS_COUNT; b++)
        if (!strcmp(name, fwd_bits_names[b])) return b;
    return -1;
}

int mp_fwd_kernel_available(MpFwdKernel k) {
    if (k < 0 || k >= MP_FWD_KERNEL_COUNT) return 0;
    if (k == MP_FWD_KERNEL_AUTO) return 1;
    if (!fwd_kernels[k].fn) return 0;
    switch (k) {
#if FWD_X86
    case MP_FWD_KERNEL_AVX2:
    case MP_FWD_KERNEL_AVX2PAIRS: return __builtin_cpu_supports("x86-64-v3") > 0;
    case MP_FWD_KERNEL_AVX512:
    case MP_FWD_KERNEL_AVX512PAIRS: return __builtin_cpu_supports("x86-64-v4") > 0;
    case MP_FWD_KERNEL_AVX512BF16: return __builtin_cpu_supports("x86-64-v4") > 0 && __builtin_cpu_supports("avx512bf16") > 0;
#endif
    case MP_FWD_KERNEL_AMX: return FWD_X86 && mp_amx_usable(NULL);
    default: return 1;
    }
}

int mp_fwd_kernel_bits(MpFwdKernel k, int bf16) {
    if (k <= MP_FWD_KERNEL_AUTO || k >= MP_FWD_KERNEL_COUNT) return -1;
    if (!bf16) return MP_FWD_BITS_FMA;
    if (k == MP_FWD_KERNEL_AMX) return mp_amx_selfcheck(NULL, 0) ? MP_FWD_BITS_TILES : MP_FWD_BITS_AMXHW;
    return fwd_kernels[k].bits;
}

int mp_fwd_kernel_layout(MpFwdKernel k) {
    return k > MP_FWD_KERNEL_AUTO && k < MP_FWD_KERNEL_COUNT ? fwd_kernels[k].layout : MP_FWD_LAYOUT_PANELS;
}

int mp_fwd_bits_default(int bf16) {
    if (!bf16) return MP_FWD_BITS_FMA;
    if (mp_fwd_kernel_available(MP_FWD_KERNEL_AMX) && mp_amx_selfcheck(NULL, 0)) return MP_FWD_BITS_TILES;
    if (mp_fwd_kernel_available(MP_FWD_KERNEL_AVX512BF16)) return MP_FWD_BITS_PAIRS;
    return MP_FWD_BITS_FMA;
}

static FwdPanelsFn fwd_panels_fn(MpFwdKernel k) {
    return k > MP_FWD_KERNEL_AUTO && k < MP_FWD_KERNEL_COUNT && fwd_kernels[k].fn ? fwd_kernels[k].fn : mm_panels_scalar;
}

/* ---------------------------------------------------------------- the measured choice */

/* GFLOP per CPU second of kernel k on one thread: [128, 512] x [512, 256] (8 panels), bf16-valued
 * operands, W in the kernel's layout; best of 3. */
static double fwd_kernel_rate(MpFwdKernel k, int bf16) {
    enum { RT = 128, RK = 512, RO = 256 };
    float *x = aligned_alloc(64, sizeof(float) * RT * RK), *w = aligned_alloc(64, sizeof(float) * RO * RK);
    float *y = aligned_alloc(64, sizeof(float) * RT * RO);
    const size_t ne = bf16 && mp_fwd_kernel_layout(k) == MP_FWD_LAYOUT_TILES ? mp_amx_weight_elems(RO, RK) : mp_fwd_mat_floats(RO, RK);
    void *pk = aligned_alloc(64, (ne * (bf16 ? 2 : 4) + 63) / 64 * 64);
    double best = 0;
    if (x && w && y && pk) {
        for (int i = 0; i < RT * RK; i++) x[i] = (float)((i * 37 % 251) - 125) / 64.0f; /* bf16-valued: 8 bits */
        for (int i = 0; i < RO * RK; i++) w[i] = (float)((i * 53 % 241) - 120) / 128.0f;
        MpFwdMat m = {.out = RO, .in = RK, .layout = bf16 ? mp_fwd_kernel_layout(k) : MP_FWD_LAYOUT_PANELS};
        if (bf16) {
            m.pb = pk;
            mp_fwd_mat_pack_bf16_rows(&m, w, 0, RO);
        } else {
            m.p = pk;
            mp_fwd_mat_pack(&m, w, RO, RK);
        }
        const FwdPanelsFn fn = fwd_panels_fn(k);
        for (int rep = 0; rep < 3; rep++) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
            fn(y, RO, x, RK, &m, RT, 0, RO / MP_FWD_NR);
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
            const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            const double rate = 2.0 * RT * RK * RO / (s > 1e-9 ? s : 1e-9) / 1e9;
            if (rate > best) best = rate;
        }
    }
    free(x);
    free(w);
    free(y);
    free(pk);
    return best;
}

static pthread_mutex_t fwd_pick_lock = PTHREAD_MUTEX_INITIALIZER;
static int fwd_pick_done[MP_FWD_BITS_COUNT][2];       /* 1: fwd_pick_kernel holds the choice */
static int fwd_pick_kernel[MP_FWD_BITS_COUNT][2];
static char fwd_pick_notes[MP_FWD_BITS_COUNT][2][256]; /* how it was chosen */

/* The choice of (bits, bf16), made under fwd_pick_lock. */
static int fwd_pick_make(int bits, int bf16, char *note, size_t n) {
    int cand[MP_FWD_KERNEL_COUNT], nc = 0;
    for (int rank = 0; rank <= 1 && nc == 0; rank++)
        for (int k = MP_FWD_KERNEL_REF; k < MP_FWD_KERNEL_COUNT; k++)
            if (fwd_kernels[k].rank == rank && (bf16 || fwd_kernels[k].f32) && mp_fwd_kernel_bits((MpFwdKernel)k, bf16) == bits &&
                mp_fwd_kernel_available((MpFwdKernel)k))
                cand[nc++] = k;
    if (nc == 0) return snprintf(note, n, "no kernel of class %s runs here", mp_fwd_bits_name(bits)), -1;
    if (nc == 1) return snprintf(note, n, "the only kernel of class %s here", mp_fwd_bits_name(bits)), cand[0];
    double rate[MP_FWD_KERNEL_COUNT];
    int best = cand[0];
    size_t used = (size_t)snprintf(note, n, "measured");
    for (int i = 0; i < nc; i++) {
        rate[i] = fwd_kernel_rate((MpFwdKernel)cand[i], bf16);
        if (used < n) used += (size_t)snprintf(note + used, n - used, "%s %s %.1f", i ? "," : "", fwd_kernels[cand[i]].name, rate[i]);
        if (fwd_kernels[cand[i]].pref > fwd_kernels[best].pref) best = cand[i];
    }
    double best_rate = 0; /* the preferred kernel, unless another is faster by more than 10% */
    for (int i = 0; i < nc; i++) best_rate = cand[i] == best ? rate[i] : best_rate;
    for (int i = 0; i < nc; i++)
        if (rate[i] > 1.1 * best_rate) best_rate = rate[i], best = cand[i];
    if (used < n) snprintf(note + used, n - used, " GFLOP per CPU second (one thread, %s weights)", bf16 ? "bf16" : "f32");
    return best;
}

int mp_fwd_kernel_pick(int bits, int bf16) {
    if (bits < 0 || bits >= MP_FWD_BITS_COUNT) return -1;
    bf16 = bf16 != 0;
    pthread_mutex_lock(&fwd_pick_lock);
    if (!fwd_pick_done[bits][bf16]) {
        fwd_pick_kernel[bits][bf16] = fwd_pick_make(bits, bf16, fwd_pick_notes[bits][bf16], sizeof fwd_pick_notes[bits][bf16]);
        fwd_pick_done[bits][bf16] = 1;
    }
    const int k = fwd_pick_kernel[bits][bf16];
    pthread_mutex_unlock(&fwd_pick_lock);
    return k;
}

const char *mp_fwd_kernel_pick_note(int bits, int bf16) {
    if (bits < 0 || bits >= MP_FWD_BITS_COUNT) return "";
    pthread_mutex_lock(&fwd_pick_lock);
    const char *s = fwd_pick_done[bits][bf16 != 0] ? fwd_pick_notes[bits][bf16 != 0] : "";
    pthread_mutex_unlock(&fwd_pick_lock);
    return s;
}

int mp_fwd_kernel_choose(const char *name, int bf16, char *msg, size_t n) {
    if (msg && n) msg[0] = 0;
    const int b = name && *name ? mp_fwd_bits_parse(name) : -1;
    if (!name || !*name || !strcmp(name, "auto") || (b >= 0 && !bf16)) /* a class names bf16 sums only */
        return mp_fwd_kernel_pick(mp_fwd_bits_default(bf16), bf16);
    const int k = mp_fwd_kernel_parse(name);
    if (k > 0) {
        if (mp_fwd_kernel_available((MpFwdKernel)k)) return k;
        const char *why = "";
        if (k == MP_FWD_KERNEL_AMX) mp_amx_usable(&why);
        if (msg) snprintf(msg, n, "MASKPOS_KERNEL=%s: this CPU or build cannot run it%s%s", name, *why ? ": " : "", why);
        return -1;
    }
    if (b >= 0) {
        const int kb = mp_fwd_kernel_pick(b, bf16);
        if (kb < 0 && msg) snprintf(msg, n, "MASKPOS_KERNEL=%s: no kernel of bit class %s runs on this CPU", name, name);
        return kb;
    }
    if (msg) {
        size_t u = (size_t)snprintf(msg, n, "MASKPOS_KERNEL=%s: unknown kernel or bit class (", name);
        for (int i = 0; i < MP_FWD_KERNEL_COUNT && u < n; i++) u += (size_t)snprintf(msg + u, n - u, "%s, ", fwd_kernels[i].name);
        for (int i = 0; i < MP_FWD_BITS_COUNT && u < n; i++)
            u += (size_t)snprintf(msg + u, n - u, "%s%s", fwd_bits_names[i], i + 1 < MP_FWD_BITS_COUNT ? ", " : ")");
    }
    return -1;
}

int mp_fwd_kernel_resolve(MpFwdKernel k) {
    if (!mp_fwd_kernel_available(k)) return -1;
    return k == MP_FWD_KERNEL_AUTO ? mp_fwd_kernel_pick(mp_fwd_bits_default(1), 1) : (int)k;
}

int mp_fwd_kernel_set(MpFwdKernel k) {
    const int r = mp_fwd_kernel_resolve(k);
    if (r >= 0) fwd_kernel = (MpFwdKernel)r;
    return r;
}

MpFwdKernel mp_fwd_kernel_get(void) {
    if (fwd_kernel == MP_FWD_KERNEL_AUTO) mp_fwd_kernel_set(MP_FWD_KERNEL_AUTO);
    return fwd_kernel;
}

/* mm_panels_ref's order with the plain step (the product rounded, then added), on f32 panels:
 * one row of a panel's 32 outputs at a time, the lanes being different outputs (so vectorising
 * over them changes no sum). */
FWD_CLONES
static void mm_panels_plain(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T, int64_t p0,
                            int64_t p1) {
    const int64_t K = w->in;
    for (int64_t p = p0; p < p1; p++) {
        const float *wp = w->p + (size_t)p * (size_t)K * MP_FWD_NR;
        const int nc = (int)(w->out - p * MP_FWD_NR < MP_FWD_NR ? w->out - p * MP_FWD_NR : MP_FWD_NR);
        for (int64_t t = 0; t < T; t++) {
            const float *xt = x + t * ldx;
            float acc[MP_FWD_NR];
#pragma omp simd
            for (int c = 0; c < MP_FWD_NR; c++) acc[c] = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                const float xv = xt[k], *wk = wp + k * MP_FWD_NR;
#pragma omp simd
                for (int c = 0; c < MP_FWD_NR; c++) {
                    const float prod = xv * wk[c];
                    acc[c] = acc[c] + prod;
                }
            }
            for (int c = 0; c < nc; c++) y[t * ldy + p * MP_FWD_NR + c] = acc[c];
        }
    }
}

void mp_fwd_matmul_plain(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    const int64_t P = (w->out + MP_FWD_NR - 1) / MP_FWD_NR;
#pragma omp parallel for schedule(static) if ((double)T * w->out * w->in > 200000.0 && mp_fwd_top_level())
    for (int64_t p = 0; p < P; p++) mm_panels_plain(y, ldy, x, ldx, w, T, p, p + 1);
}

void mp_fwd_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    if (w->plain) {
        mp_fwd_matmul_plain(y, ldy, x, ldx, w, T);
        return;
    }
    mp_fwd_matmul_kernel(mp_fwd_kernel_get(), y, ldy, x, ldx, w, T);
}

void mp_fwd_matmul_kernel(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    const int64_t P = (w->out + MP_FWD_NR - 1) / MP_FWD_NR;
    if (w->in == 0) { /* empty sum */
        for (int64_t t = 0; t < T; t++) memset(y + t * ldy, 0, (size_t)w->out * sizeof *y);
        return;
    }
    MP_ASSERT(!w->pb || w->layout == mp_fwd_kernel_layout(k)); /* bf16 weights packed for this kernel */
    const FwdPanelsFn fn = fwd_panels_fn(k);
    if (!((double)T * w->out * w->in > 200000.0 && mp_fwd_top_level())) {
        fn(y, ldy, x, ldx, w, T, 0, P); /* every panel computes the same bits whoever runs it */
        return;
    }
#pragma omp parallel
    {
        int64_t tid = 0, nth = 1;
#ifdef _OPENMP
        tid = omp_get_thread_num();
        nth = omp_get_num_threads();
#endif
        fn(y, ldy, x, ldx, w, T, P * tid / nth, P * (tid + 1) / nth);
    }
}

int mp_fwd_top_level(void) {
#ifdef _OPENMP
    return omp_get_active_level() == 0;
#else
    return 0;
#endif
}

/* ================================================================ bf16 */

uint16_t mp_fwd_bf16_from_f32(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u); /* NaN stays a (quiet) NaN */
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest, ties to even (overflow rounds to inf) */
    return (uint16_t)(u >> 16);
}

float mp_fwd_bf16_to_f32(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void mp_fwd_bf16_round(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = mp_fwd_bf16_to_f32(mp_fwd_bf16_from_f32(x[i]));
}

void mp_fwd_mat_pack_bf16_rows(MpFwdMat *dst, const float *rows, int64_t r0, int64_t n) {
    const int64_t K = dst->in;
    dst->p = NULL; /* a bf16 weight */
    if (dst->layout == MP_FWD_LAYOUT_TILES) {
        mp_amx_pack_rows(dst->pb, dst->out, K, rows, r0, n);
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        const int64_t o = r0 + j, b = o / MP_FWD_NR, c = o % MP_FWD_NR;
        for (int64_t k = 0; k < K; k++)
            dst->pb[((size_t)b * (size_t)K + (size_t)k) * MP_FWD_NR + (size_t)c] = mp_fwd_bf16_from_f32(rows[(size_t)j * (size_t)K + (size_t)k]);
    }
    /* zero padding columns of the last panel once its last real row is written */
    const int64_t end = r0 + n;
    if (n > 0 && end == dst->out && end % MP_FWD_NR) {
        const int64_t b = end / MP_FWD_NR;
        for (int64_t k = 0; k < K; k++)
            for (int64_t c = end % MP_FWD_NR; c < MP_FWD_NR; c++) dst->pb[((size_t)b * (size_t)K + (size_t)k) * MP_FWD_NR + (size_t)c] = 0;
    }
}

/* ================================================================ rmsnorm, rope, swiglu */

void mp_fwd_rmsnorm(float *y, const float *x, const float *weight, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) {
        const float v = x[i] * inv;
        y[i] = weight ? weight[i] * v : v;
    }
}

void mp_fwd_rope_table(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn) {
    const int h = R / 2;
    const float af = (float)attn;
    for (int p = 0; p < T; p++)
        for (int i = 0; i < h; i++) {
            const float ang = (float)p * inv_freq[i]; /* HF: float32 product */
            cos_t[(size_t)p * h + i] = (float)cos((double)ang) * af;
            sin_t[(size_t)p * h + i] = (float)sin((double)ang) * af;
        }
}

void mp_fwd_rope(float *x, const float *cos_p, const float *sin_p, int R) {
    const int h = R / 2;
    for (int i = 0; i < h; i++) {
        const float a = x[i], b = x[i + h];
        /* x*cos + rotate_half(x)*sin, rotate_half(x) = cat(-x[h:], x[:h]); each product rounded */
        const float a1 = a * cos_p[i], a2 = -b * sin_p[i];
        const float b1 = b * cos_p[i], b2 = a * sin_p[i];
        x[i] = a1 + a2;
        x[i + h] = b1 + b2;
    }
}

void mp_fwd_swiglu(float *out, const float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float s = g[i] / (1.0f + expf(-g[i]));
        out[i] = s * u[i];
    }
}

void mp_fwd_layernorm(float *y, const float *x, const float *weight, const float *bias, int n, double eps) {
    double sum = 0, ss = 0;
    for (int i = 0; i < n; i++) sum += (double)x[i];
    const double mean = sum / n;
    for (int i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    const float inv = (float)(1.0 / sqrt(ss / n + eps)), mf = (float)mean;
    for (int i = 0; i < n; i++) {
        const float v = (x[i] - mf) * inv;
        y[i] = (weight ? weight[i] * v : v) + (bias ? bias[i] : 0.0f);
    }
}

void mp_fwd_gelu_erf(float *out, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = (float)(0.5 * (double)x[i] * (1.0 + erf((double)x[i] * 0.70710678118654752440)));
}

void mp_fwd_geglu(float *out, const float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float x = g[i], c = 0.7978845608028654f; /* sqrt(2/pi) */
        out[i] = 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x))) * u[i];
    }
}

void mp_fwd_softcap(float *x, size_t n, float cap) {
    for (size_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

/* ================================================================ attention */

void mp_fwd_attn_scores_ref(float *s, const float *q, int64_t ldq, const float *k, int64_t ldk, int HS, int T,
                            int causal, float scale) {
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            if (causal && j > i) {
                s[(size_t)i * T + j] = -INFINITY;
                continue;
            }
            float acc = 0.0f;
            for (int d = 0; d < HS; d++) acc = fmaf(q[i * ldq + d], k[j * ldk + d], acc);
            s[(size_t)i * T + j] = acc * scale;
        }
}

#define FWD_JB 64 /* keys per register block of the score kernel */
#define FWD_RB 8  /* query rows per register block of the score and mix kernels */
#define FWD_VB 32 /* keys (scores) or head dims (mix) per register block: RB x VB accumulators */

size_t mp_fwd_attn_keys_floats(int HS, int T) { return (size_t)((T + FWD_JB - 1) / FWD_JB) * (size_t)HS * FWD_JB; }

void mp_fwd_attn_pack_key(float *kp, const float *k, int HS, int t) {
    float *dst = kp + (size_t)(t / FWD_JB) * (size_t)HS * FWD_JB + t % FWD_JB;
    for (int d = 0; d < HS; d++) dst[(size_t)d * FWD_JB] = k[d];
}

/* Scores of the RB rows q [RB] (row stride ldq) for keys [j0, j0+JB), which every one of them sees,
 * in two halves of VB keys: RB x VB accumulators (16 zmm in the v4 clone); the key block kp
 * [HS][JB] (contiguous: 32 KiB at HS 128) is read once per half for RB rows, in order. Per
 * element the sum of the reference: fmaf over d ascending from 0, then · scale. */
static inline void attn_scores_rb(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T, float scale,
                                  int j0) {
    const float *kb = kp + (size_t)(j0 / FWD_JB) * (size_t)HS * FWD_JB;
    for (int h0 = 0; h0 < FWD_JB; h0 += FWD_VB) {
        float acc[FWD_RB][FWD_VB];
        for (int r = 0; r < FWD_RB; r++) {
#pragma omp simd
            for (int u = 0; u < FWD_VB; u++) acc[r][u] = 0.0f;
        }
        for (int d = 0; d < HS; d++) {
            const float *kd = kb + (size_t)d * FWD_JB + h0;
#pragma GCC unroll 8
            for (int r = 0; r < FWD_RB; r++) {
                const float a = q[r * ldq + d];
#pragma omp simd
                for (int u = 0; u < FWD_VB; u++) acc[r][u] = fmaf(a, kd[u], acc[r][u]);
            }
        }
        for (int r = 0; r < FWD_RB; r++) {
#pragma omp simd
            for (int u = 0; u < FWD_VB; u++) s[(size_t)r * T + j0 + h0 + u] = acc[r][u] * scale;
        }
    }
}

/* One row's keys [j0, n): blocks of JB, then one at a time; the masked rest [n, T) is -inf (from n
 * even when j0 > n). */
static inline void attn_scores_row(float *row, const float *qi, const float *kp, int HS, int T, int n, float scale,
                                   int j0) {
    for (; j0 + FWD_JB <= n; j0 += FWD_JB) {
        float acc[FWD_JB];
#pragma omp simd
        for (int u = 0; u < FWD_JB; u++) acc[u] = 0.0f;
        const float *kb = kp + (size_t)(j0 / FWD_JB) * (size_t)HS * FWD_JB;
        for (int d = 0; d < HS; d++) {
            const float a = qi[d];
            const float *kd = kb + (size_t)d * FWD_JB;
#pragma omp simd
            for (int u = 0; u < FWD_JB; u++) acc[u] = fmaf(a, kd[u], acc[u]);
        }
#pragma omp simd
        for (int u = 0; u < FWD_JB; u++) row[j0 + u] = acc[u] * scale;
    }
    for (int j = j0; j < n; j++) {
        float acc = 0.0f;
        const float *kj = kp + (size_t)(j / FWD_JB) * (size_t)HS * FWD_JB + j % FWD_JB;
        for (int d = 0; d < HS; d++) acc = fmaf(qi[d], kj[(size_t)d * FWD_JB], acc);
        row[j] = acc * scale;
    }
    for (int j = n; j < T; j++) row[j] = -INFINITY;
}

FWD_CLONES
void mp_fwd_attn_scores(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T, int causal,
                        float scale, int i0, int i1) {
    int i = i0;
    for (; i + FWD_RB <= i1; i += FWD_RB) {
        /* whole key blocks (in memory: j0 + JB <= T) that any row of the block sees; entries past a
         * row's own n are computed too and then overwritten with -inf by attn_scores_row */
        const int nmax = causal ? i + FWD_RB : T;
        int j0 = 0;
        for (; j0 < nmax && j0 + FWD_JB <= T; j0 += FWD_JB) attn_scores_rb(s + (size_t)i * T, q + i * ldq, ldq, kp, HS, T, scale, j0);
        for (int r = 0; r < FWD_RB; r++)
            attn_scores_row(s + (size_t)(i + r) * T, q + (i + r) * ldq, kp, HS, T, causal ? i + r + 1 : T, scale, j0);
    }
    for (; i < i1; i++) attn_scores_row(s + (size_t)i * T, q + i * ldq, kp, HS, T, causal ? i + 1 : T, scale, 0);
}

FWD_CLONES void mp_fwd_exp_neg(float *y, const float *x, int n) {
#pragma omp simd
    for (int j = 0; j < n; j++) y[j] = mp_vexpf_neg(x[j]);
}

/* Softmax of row[0, n) in place (the maximum subtracted), row[n, len) = 0. Deterministic for any
 * vector width: e^x by mp_vexpf_neg (kernels/vexp.h) per entry, the sum in 16 lanes (lane l adds entries j ≡ l mod
 * 16 in ascending j, then the lanes pairwise in a fixed tree), each entry divided by it (a vector
 * divide rounds each quotient as the scalar one does). The maximum is order-free: x - (+0) and
 * x - (-0) are equal, so a ±0 tie changes nothing. */
FWD_CLONES void mp_fwd_softmax_row(float *row, int n, int len) {
    float mx = row[0];
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < n; j++) mx = row[j] > mx ? row[j] : mx;
#pragma omp simd
    for (int j = 0; j < n; j++) row[j] = mp_vexpf_neg(row[j] - mx);
    float acc[16] = {0};
    int j = 0;
    for (; j + 16 <= n; j += 16) {
#pragma omp simd
        for (int l = 0; l < 16; l++) acc[l] += row[j + l];
    }
    for (int l = 0; j + l < n; l++) acc[l] += row[j + l];
    for (int w = 8; w >= 1; w /= 2)
        for (int l = 0; l < w; l++) acc[l] += acc[l + w];
    const float sum = acc[0];
#pragma omp simd
    for (int i = 0; i < n; i++) row[i] /= sum;
#pragma omp simd
    for (int i = n; i < len; i++) row[i] = 0.0f;
}

/* o [RB] rows, dims [d0, d0+db) = Σ_j p[r, j] v_j in ascending j from 0: keys [0, nmin) for the
 * RB rows together (each v slice loaded once for RB rows), then each row's own keys [nmin, n_r),
 * continuing its sums, so every element is the reference's fmaf chain. db <= VB; a constant VB
 * keeps the accumulators in registers. */
static inline __attribute__((always_inline)) void attn_mix_rb(float *o, int64_t ldo, const float *p, const float *v,
                                                              int64_t ldv, int T, int nmin, const int *n, int d0,
                                                              const int db) {
    float acc[FWD_RB][FWD_VB];
    for (int r = 0; r < FWD_RB; r++) {
#pragma omp simd
        for (int u = 0; u < db; u++) acc[r][u] = 0.0f;
    }
    for (int j = 0; j < nmin; j++) {
        const float *vj = v + j * ldv + d0;
#pragma GCC unroll 8
        for (int r = 0; r < FWD_RB; r++) {
            const float pj = p[(size_t)r * T + j];
#pragma omp simd
            for (int u = 0; u < db; u++) acc[r][u] = fmaf(pj, vj[u], acc[r][u]);
        }
    }
    for (int r = 0; r < FWD_RB; r++) {
        for (int j = nmin; j < n[r]; j++) {
            const float pj = p[(size_t)r * T + j];
            const float *vj = v + j * ldv + d0;
#pragma omp simd
            for (int u = 0; u < db; u++) acc[r][u] = fmaf(pj, vj[u], acc[r][u]);
        }
#pragma omp simd
        for (int u = 0; u < db; u++) o[r * ldo + d0 + u] = acc[r][u];
    }
}

FWD_CLONES
void mp_fwd_attn_mix(float *o, int64_t ldo, const float *p, const float *v, int64_t ldv, int HS, int T, int causal,
                     int i0, int i1) {
    int i = i0;
    for (; i + FWD_RB <= i1; i += FWD_RB) {
        int n[FWD_RB];
        for (int r = 0; r < FWD_RB; r++) n[r] = causal ? i + r + 1 : T;
        int d0 = 0;
        for (; d0 + FWD_VB <= HS; d0 += FWD_VB) attn_mix_rb(o + i * ldo, ldo, p + (size_t)i * T, v, ldv, T, n[0], n, d0, FWD_VB);
        if (d0 < HS) attn_mix_rb(o + i * ldo, ldo, p + (size_t)i * T, v, ldv, T, n[0], n, d0, HS - d0);
    }
    for (; i < i1; i++) {
        float *oi = o + i * ldo;
        const float *pi = p + (size_t)i * T;
        const int n = causal ? i + 1 : T;
        for (int d = 0; d < HS; d++) oi[d] = 0.0f;
        for (int j = 0; j < n; j++) {
            const float pj = pi[j];
            const float *vj = v + j * ldv;
#pragma omp simd
            for (int d = 0; d < HS; d++) oi[d] = fmaf(pj, vj[d], oi[d]);
        }
    }
}

/* ================================================================ plain arithmetic (fwd_kernels.h) */

void mp_fwd_rmsnorm_plain(float *y, const float *x, const float *weight, int n, double eps) {
    float ss = 0.0f;
    for (int i = 0; i < n; i++) {
        const float sq = x[i] * x[i];
        ss = ss + sq;
    }
    const float s = (float)(1.0 / sqrt((double)(ss / (float)n) + eps));
    for (int i = 0; i < n; i++) {
        const float xs = x[i] * s;
        y[i] = weight ? xs * weight[i] : xs;
    }
}

void mp_fwd_rope_table_plain(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn) {
    const int h = R / 2;
    for (int p = 0; p < T; p++)
        for (int i = 0; i < h; i++) {
            const double ang = (double)((float)p * inv_freq[i]); /* f32 angle, as HF */
            cos_t[(size_t)p * h + i] = (float)(cos(ang) * attn);
            sin_t[(size_t)p * h + i] = (float)(sin(ang) * attn);
        }
}

FWD_CLONES
void mp_fwd_attn_scores_plain(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T, int causal,
                              float scale, int i0, int i1) {
    for (int i = i0; i < i1; i++) {
        const int n = causal ? i + 1 : T;
        const float *qi = q + i * ldq;
        float *row = s + (size_t)i * T;
        int j0 = 0;
        for (; j0 + FWD_JB <= n; j0 += FWD_JB) { /* a block of keys side by side: one sum per lane */
            const float *kb = kp + (size_t)(j0 / FWD_JB) * (size_t)HS * FWD_JB;
            float acc[FWD_JB];
#pragma omp simd
            for (int u = 0; u < FWD_JB; u++) acc[u] = 0.0f;
            for (int d = 0; d < HS; d++) {
                const float a = qi[d], *kd = kb + (size_t)d * FWD_JB;
#pragma omp simd
                for (int u = 0; u < FWD_JB; u++) {
                    const float prod = a * kd[u];
                    acc[u] = acc[u] + prod;
                }
            }
            for (int u = 0; u < FWD_JB; u++) row[j0 + u] = acc[u] * scale;
        }
        for (int j = j0; j < n; j++) {
            const float *kj = kp + (size_t)(j / FWD_JB) * (size_t)HS * FWD_JB + j % FWD_JB;
            float acc = 0.0f;
            for (int d = 0; d < HS; d++) {
                const float prod = qi[d] * kj[(size_t)d * FWD_JB];
                acc = acc + prod;
            }
            row[j] = acc * scale;
        }
        for (int j = n; j < T; j++) row[j] = -INFINITY;
    }
}

void mp_fwd_softmax_row_plain(float *row, int n, int len) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = row[j] > mx ? row[j] : mx;
    float sum = 0.0f;
    for (int j = 0; j < n; j++) {
        row[j] = (float)exp((double)(row[j] - mx));
        sum = sum + row[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) row[j] = row[j] * inv;
    for (int j = n; j < len; j++) row[j] = 0.0f;
}

void mp_fwd_attn_mix_plain(float *o, int64_t ldo, const float *p, const float *v, int64_t ldv, int HS, int T,
                           int causal, int i0, int i1) {
    for (int i = i0; i < i1; i++) {
        float *oi = o + i * ldo;
        const float *pi = p + (size_t)i * T;
        for (int d = 0; d < HS; d++) oi[d] = 0.0f;
        for (int j = 0; j < (causal ? i + 1 : T); j++)
#pragma omp simd
            for (int d = 0; d < HS; d++) {
                const float prod = pi[j] * v[j * ldv + d];
                oi[d] = oi[d] + prod;
            }
    }
}

void mp_fwd_swiglu_plain(float *out, const float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const float gi = g[i], sg = 1.0f / (1.0f + (float)exp(-(double)gi));
        const float gs = gi * sg;
        out[i] = gs * u[i];
    }
}

/* ================================================================ reductions and routing (fwd_kernels.h) */

void mp_fwd_attn_headsum(double *hs, const float *s, int NH, int T, int causal, int i0, int i1) {
    const size_t SS = (size_t)T * T;
    for (int i = i0; i < i1; i++) {
        const int n = causal ? i + 1 : T;
        double *o = hs + (size_t)(i - i0) * T;
        for (int j = 0; j < n; j++) o[j] = 0.0;
        for (int h = 0; h < NH; h++) {
            const float *row = s + h * SS + (size_t)i * T;
            for (int j = 0; j < n; j++) o[j] += (double)row[j];
        }
    }
}

