/* fwd_amx.h — maskpos' own AMX kernel for bf16 matmuls (issue #37): y [T,O] = x [T,K] · Wᵀ through
 * the tile instruction tdpbf16ps (pairs of bf16 products, f32 accumulation), with W packed once
 * into the tile layout, and the same tile operations emulated in plain C, so that everything but
 * the instruction itself (blocking, packing, tails, threads, batch splits) is tested bit for bit on
 * any CPU (docs/speed.md, "AMX").
 *
 * Implements:
 *   - mp_fwd_fma_ftz: one FMA step of Intel's bf16 dot-product instructions (vdpbf16ps,
 *     tdpbf16ps): round to nearest even, subnormal inputs read as zero (DAZ), a result that is
 *     tiny after rounding with an unbounded exponent flushed to a zero of its sign (FTZ), whatever
 *     MXCSR says;
 *   - the order of tdpbf16ps as the "Operation" of Intel's SDM defines it (the bit class "tiles"):
 *     per output and per instruction — one K tile of 32 k, tiles from k = 0 in ascending order — two
 *     f32 chains from +0, one over the even k and one over the odd k (ascending), then
 *     out = out + (even + odd), every step mp_fwd_fma_ftz; mp_amx_matmul_ref is that order as plain
 *     loops over W [O,K], the reference every implementation is held to;
 *   - the tile layout: panels of 32 outputs, each [ceil(K/32)] K tiles of two B tiles (outputs
 *     0-15 and 16-31 of the panel) of 16 rows (k pairs) x 16 columns x 2 (the pair), 1 KiB each,
 *     zero past O and past K (zero pairs add nothing to a chain that starts at +0, so the padding
 *     changes no bit);
 *   - the tile layer: configure, zero, load, store and tdpbf16ps in two implementations, the
 *     instructions themselves (a target attribute; run only where cpuid has amx_bf16 and amx_tile,
 *     XCR0 enables tile state and Linux granted arch_prctl(ARCH_REQ_XCOMP_PERM,
 *     XFEATURE_XTILEDATA)) and a plain-C emulation of the SDM's pseudo-code (tile rows and column
 *     bytes from the configuration, the shape checks the instruction faults on as assertions);
 *   - mp_amx_matmul_panels: the blocked kernel for panels [p0, p1) (one thread's share; it loads
 *     its own tile configuration, all scratch is per thread): token blocks of 128 rows converted
 *     to bf16 once per k chunk, 2 x 2 accumulator tiles (32 tokens x 32 outputs), partial sums in
 *     y between k chunks (f32, exact). Every output is the reference's order whatever the thread,
 *     the token block or the panel split;
 *   - availability (cpuid, XCR0, the permission, asked for once per process) and a self-check of
 *     the instruction against the emulation (mp_amx_selfcheck), which decides whether the real
 *     instruction belongs to the bit class "tiles" on this CPU.
 * Does not: parallelise (fwd_kernels.c splits panels across threads), choose a kernel
 * (fwd_kernels.c), or handle f32 weights (the tile layout holds bf16 only).
 * Tested by: tests/test_model_amx.c (the FMA step against hand-worked DAZ/FTZ cases and against
 * vdpbf16ps where the CPU has it; the emulated kernel == mp_amx_matmul_ref bit for bit on awkward
 * shapes, 1 and 2 threads, split batches; the real instruction against the same reference and the
 * self-check where the CPU has AMX, an expected skip elsewhere), tests/test_model_speed.c (the
 * amx kernels end to end).
 *
 * Shape legend: T tokens, K inner size, O outputs.
 */
#ifndef MP_FWD_AMX_H
#define MP_FWD_AMX_H

#include <stddef.h>
#include <stdint.h>

#define MP_AMX_KT 32 /* k per tdpbf16ps (16 pairs): one K tile */
#define MP_AMX_NP 32 /* outputs per packed panel: two 16-column B tiles */

/* Which implementation of the tile layer runs. */
typedef enum MpAmxImpl {
    MP_AMX_EMU = 0, /* the plain-C emulation: any CPU */
    MP_AMX_REAL,    /* the instructions: only where mp_amx_usable */
} MpAmxImpl;

/* a·b + c rounded to nearest even, with DAZ and FTZ as the bf16 dot-product instructions do them. */
float mp_fwd_fma_ftz(float a, float b, float c);

/* Reference of the "tiles" order: y[t,o] from W [O,K] (row-major, bf16-valued) and bf16-valued x,
 * as documented above. */
void mp_amx_matmul_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t O, int64_t K,
                       int64_t T);

/* bf16 values (uint16) of a packed [O,K] weight: ceil(O/32) · ceil(K/32) · 1024. */
size_t mp_amx_weight_elems(int64_t O, int64_t K);
/* wt [mp_amx_weight_elems] <- rows [r0, r0+n) of W, given as f32 rows [n, K], each rounded to bf16
 * (nearest even; exact for a bf16 checkpoint). Calls cover [0, O) in ascending disjoint ranges; the
 * padding of a row is written with it, the padding rows past O with the range that ends at O. */
void mp_amx_pack_rows(uint16_t *wt, int64_t O, int64_t K, const float *rows, int64_t r0, int64_t n);
/* W[o][k] of a packed weight, as f32 (tests). */
float mp_amx_weight_at(const uint16_t *wt, int64_t O, int64_t K, int64_t o, int64_t k);

/* y [T, outputs of panels p0..p1-1] (row stride ldy) = x [T,K] (row stride ldx; bf16-valued, else
 * rounded to bf16 first) · Wᵀ, W packed (wt); the order of mp_amx_matmul_ref. One thread. impl
 * MP_AMX_REAL only where mp_amx_usable. */
void mp_amx_matmul_panels(MpAmxImpl impl, float *y, int64_t ldy, const float *x, int64_t ldx, const uint16_t *wt,
                          int64_t O, int64_t K, int64_t T, int64_t p0, int64_t p1);

/* 1 when this process can run the instructions: the build (GCC on x86-64), cpuid (amx_bf16,
 * amx_tile), XCR0 and Linux's permission (asked for on the first call, once per process; thread-
 * safe). Else 0 and, when why is given, the reason in words. */
int mp_amx_usable(const char **why);
/* Runs the instruction and the emulation on the same random tiles (normal values over 30 binary
 * orders of magnitude, cancellations, and subnormal inputs and results) and compares every output:
 * 1 when all are bit-identical, 0 when not or when the instruction cannot run here. msg (may be
 * NULL) gets a line with the counts and, on a mismatch, which other documented order the
 * instruction matched (the Intrinsics Guide's single ascending chain) or the largest difference
 * in ulps. Computed once per process; later calls return the cached result. */
int mp_amx_selfcheck(char *msg, size_t n);

#endif
