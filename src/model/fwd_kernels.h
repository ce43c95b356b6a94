/* fwd_kernels.h — the f32 kernels of the decoder forward pass (src/model/fwd.c).
 *
 * Implements, each as a naive reference and (where it matters) a fast variant that computes the
 * SAME BITS: every output element is one sequential sum over its inner index, in ascending order,
 * with fmaf (one rounding per step), so the packed/vectorised loops below only change which
 * elements are computed side by side, never the order of one element's sum. Results are
 * therefore identical for any thread count, vector width (AVX-512, AVX2 or scalar clone) and
 * blocking:
 *   - matmul   y[T,O] = x[T,K] · W[O,K]ᵀ  (HF Linear, W row-major [out,in]); the fast form reads
 *              W "panel-packed" (MpFwdMat: [ceil(O/32)][K][32]) and is register-blocked 8×32.
 *              W is stored either as f32 or as bf16 (--compute bf16: half the bytes; each [KC,32]
 *              slice of a bf16 panel is widened to f32 in an L1 buffer, exactly, and reused for
 *              every row block, so the same f32 micro-kernel and the same sums run on it);
 *   - kernel dispatch: the matmul runs as one of MpFwdKernel — the naive loop, or the blocked
 *              loops compiled for plain x86-64 (scalar, fmaf from libm), x86-64-v3 (AVX2/FMA) or
 *              x86-64-v4 (AVX-512), vdpbf16ps (AVX512-BF16), the same loops in vdpbf16ps's order
 *              on FMA (avx512pairs, avx2pairs), or the AMX tiles (fwd_amx.h: the instructions, or
 *              their emulation amxemu) — forced by name (MASKPOS_KERNEL, mp_fwd_kernel_set) so tests
 *              run each. On f32 weights all give the same bits. On bf16 weights they fall into bit
 *              classes (MpFwdBits): kernels of one class give the same bits, each class has its own
 *              reference loops; `auto` keeps the CPU's default class (today's: pairs where the CPU
 *              has AVX512-BF16, else fma; tiles where AMX runs and matches its emulation) and takes
 *              the fastest kernel of that class, measured once per process (mp_fwd_kernel_choose);
 *   - attention keys packed in blocks of 64 positions (mp_fwd_attn_pack_key) for the score
 *              kernel;
 *   - bf16 rounding (round to nearest even, as torch and llama.cpp do) of weights at packing and
 *              of activations before a bf16-compute matmul;
 *   - rmsnorm  (HF: x · rsqrt(mean(x²)+eps), then · weight; the mean is taken in double);
 *   - rope     (HF rotate-half on the first R dims of each head; angles pos·inv_freq in f32);
 *   - attention scores s = (q·kᵀ)·scale for one head, causal or not, and the mix o = p·v;
 *   - softmax over the unmasked prefix of a row (max subtracted; masked entries become 0);
 *   - the head sum of a block of score rows in double (the probe's reduced map) and the MoE
 *              routing of a row (softmax of the router logits, top-k).
 * Does not: allocate (callers pass every buffer), thread (the CPU instances' ops, fwd_cpu.c,
 * parallelise outer loops), or know about models (fwd.c does).
 * Tested by: tests/test_model_kernels.c (fast == reference bit for bit, on awkward shapes too),
 * tests/test_model_speed.c (every kernel, f32 and bf16 weights, == its class's reference bit for
 * bit; avx512bf16 also within the f32 summation bound of the exact sum; skipped without the CPU
 * flag; the pairs kernels == vdpbf16ps on subnormal-heavy data), tests/test_model_amx.c.
 *
 * Shape legend: T tokens, K inner size, O outputs, HS head dim, R rotary dims (R <= HS, even).
 */
#ifndef MP_FWD_KERNELS_H
#define MP_FWD_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "model/fwd_moe_route.h" /* mp_fwd_moe_route: one row of MoE routing (host and device) */

#define MP_FWD_NR 32 /* output columns per packed panel */
#define MP_FWD_MR 8  /* token rows per register block */

/* How a bf16 weight is laid out (MpFwdMat.layout). */
typedef enum MpFwdLayout {
    MP_FWD_LAYOUT_PANELS = 0, /* [ceil(O/NR)][K][NR], as p */
    MP_FWD_LAYOUT_TILES,      /* the AMX tile layout of fwd_amx.h (mp_amx_weight_elems values) */
} MpFwdLayout;

/* A Linear weight packed for mp_fwd_matmul; exactly one of p, pb is set. Both point into a block
 * owned by the caller. */
typedef struct MpFwdMat {
    float *p;       /* [ceil(O/NR)][K][NR] f32: p[(b*K + k)*NR + c] = W[b*NR + c][k] (0 past O) */
    uint16_t *pb;   /* bf16 bits (upper half of the f32 pattern): the same layout, or the tile layout */
    int64_t out, in; /* O, K */
    int plain;       /* 1: summed by mp_fwd_matmul_plain's arithmetic (MP_FWD_COMPUTE_F32_PLAIN, fwd.h) */
    int layout;      /* MpFwdLayout of pb: set by the caller before packing; only the amx kernels read TILES */
} MpFwdMat;

/* Elements (floats, or bf16 values) needed to pack a [O,K] weight. */
size_t mp_fwd_mat_floats(int64_t out, int64_t in);
/* dst->p (mp_fwd_mat_floats floats, set by caller) <- w [O,K] row-major; sets dst->pb = NULL. */
void mp_fwd_mat_pack(MpFwdMat *dst, const float *w, int64_t out, int64_t in);
/* dst->pb (mp_fwd_mat_floats bf16 values, or mp_amx_weight_elems for the tile layout; set by
 * caller with dst->out/in/layout) <- rows [r0, r0+n) of W, given as f32 rows [n, K], each rounded
 * to bf16 (exact when they came from a bf16 tensor); sets dst->p = NULL.
 * Rows past O of the last panel are zeroed when that panel is written. */
void mp_fwd_mat_pack_bf16_rows(MpFwdMat *dst, const float *rows, int64_t r0, int64_t n);

/* 1 when this thread may open a parallel region: none is active around it. Inside a worker of a
 * sequence-parallel run the forward runs serially without entering OpenMP at all (see
 * FWD_PAR_FOR in fwd_par.h); the bits are the same either way. 0 without OpenMP. */
int mp_fwd_top_level(void);

/* y [T,O] (row stride ldy) = x [T,K] (row stride ldx) · Wᵀ, parallel over panels (OpenMP), with
 * the kernel chosen by mp_fwd_kernel_set. Any W dtype: products x·w are formed in f32 (for a bf16
 * W and bf16-valued x they are exact) and summed with fmaf in ascending k. */
void mp_fwd_matmul(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T);
/* Reference: y[t,o] = Σ_k fmaf(x[t,k], W[o,k], ·) in ascending k, from 0. w [O,K]. */
void mp_fwd_matmul_ref(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t O,
                       int64_t K, int64_t T);

/* Reference of the pairs class (avx512bf16, avx512pairs, avx2pairs): per output, pairs (k, k+1)
 * in ascending k, within a pair the odd product added first, then the even one (the order Intel's
 * SDM defines for vdpbf16ps, verified on AMD Zen 4 too; products of bf16 values are exact in f32,
 * so each step is one FMA), every step with the instruction's DAZ and FTZ (mp_fwd_fma_ftz,
 * fwd_amx.h); an odd K's last pair has no odd product. x and w bf16-valued. w [O,K]. */
void mp_fwd_matmul_ref_pairs(float *y, int64_t ldy, const float *x, int64_t ldx, const float *w, int64_t O,
                             int64_t K, int64_t T);

/* Matmul kernels; new values go at the end. */
typedef enum MpFwdKernel {
    MP_FWD_KERNEL_AUTO = 0, /* the fastest kernel of the CPU's default class (mp_fwd_kernel_resolve) */
    MP_FWD_KERNEL_REF,      /* the naive triple loop over the packed layout (mp_fwd_matmul_ref's order) */
    MP_FWD_KERNEL_SCALAR,   /* blocked loops, baseline x86-64 (or any other CPU): plain C + libm fmaf */
    MP_FWD_KERNEL_AVX2,     /* blocked loops compiled for x86-64-v3 (AVX2 + FMA) */
    MP_FWD_KERNEL_AVX512,   /* blocked loops compiled for x86-64-v4 (AVX-512 F/BW/DQ/VL) */
    MP_FWD_KERNEL_AVX512BF16, /* bf16 weights: vdpbf16ps (AVX512-BF16), pairs of k per instruction,
                                 f32 sums in a different order (within the bounds of docs/speed.md,
                                 not bit-identical); f32 weights: the avx512 loops */
    MP_FWD_KERNEL_AVX512PAIRS, /* bf16 weights: the avx512 loops in vdpbf16ps's order (odd product
                                  first, DAZ/FTZ through MXCSR): avx512bf16's bits on FMA units */
    MP_FWD_KERNEL_AVX2PAIRS,   /* the same compiled for x86-64-v3 */
    MP_FWD_KERNEL_AMX,         /* bf16 weights in the tile layout: tdpbf16ps (fwd_amx.h); f32: avx512 */
    MP_FWD_KERNEL_AMXEMU,      /* the same kernel on the emulated tile layer: any CPU, slow (tests, resumes) */
    MP_FWD_KERNEL_COUNT
} MpFwdKernel;

/* Bit classes of the kernels on bf16 weights (on f32 weights every kernel is MP_FWD_BITS_FMA):
 * kernels of one class give the same bits for any thread count, batch split or blocking. New
 * values at the end. */
typedef enum MpFwdBits {
    MP_FWD_BITS_FMA = 0, /* one fmaf chain per output, ascending k: ref, scalar, avx2, avx512 */
    MP_FWD_BITS_PAIRS,   /* vdpbf16ps's order (mp_fwd_matmul_ref_pairs): avx512bf16, avx512pairs, avx2pairs */
    MP_FWD_BITS_TILES,   /* tdpbf16ps's order as the SDM defines it (mp_amx_matmul_ref): amxemu, and amx
                            where its self-check found the instruction equal to the emulation */
    MP_FWD_BITS_AMXHW,   /* amx where the instruction's sums differ from the SDM's (its own class) */
    MP_FWD_BITS_COUNT
} MpFwdBits;

/* "auto", "ref", "scalar", "avx2", "avx512", "avx512bf16", "avx512pairs", "avx2pairs", "amx", "amxemu". */
const char *mp_fwd_kernel_name(MpFwdKernel k);
/* Parses a name as above; returns -1 when unknown. */
int mp_fwd_kernel_parse(const char *name);
/* "fma", "pairs", "tiles", "amx-hw"; "?" out of range. */
const char *mp_fwd_bits_name(int bits);
/* Parses a class name; -1 when unknown. */
int mp_fwd_bits_parse(const char *name);
/* The class of kernel k on bf16 (bf16 = 1) or f32 weights; AUTO: -1. */
int mp_fwd_kernel_bits(MpFwdKernel k, int bf16);
/* The layout kernel k reads bf16 weights in (MpFwdLayout). */
int mp_fwd_kernel_layout(MpFwdKernel k);
/* The class `auto` keeps on this CPU: f32 weights fma; bf16 weights tiles where amx runs and its
 * self-check passed, else pairs where the CPU has AVX512-BF16, else fma. */
int mp_fwd_bits_default(int bf16);
/* The fastest kernel of class bits that runs here (bf16 or f32 weights), or -1 when none does:
 * the candidates (the blocked and instruction kernels of the class; the naive loops, the scalar
 * build and the emulation only when nothing else runs the class) are timed once per process on one
 * thread ([128, 512] x [512, 256], CPU time, best of 3) and the choice is cached (thread-safe). */
int mp_fwd_kernel_pick(int bits, int bf16);
/* The kernel a matmul pass uses for request `name` (NULL or "" or "auto": the fastest of
 * mp_fwd_bits_default; a kernel name: that kernel; a class name: mp_fwd_kernel_pick), or -1 with
 * one line in msg [n] (unknown name; a kernel or class this CPU or build cannot run, and why). */
int mp_fwd_kernel_choose(const char *name, int bf16, char *msg, size_t n);
/* A line saying how the last mp_fwd_kernel_pick of (bits, bf16) chose ("avx512bf16 165.1,
 * avx512pairs 88.0 GFLOP/s measured" or "the only kernel of the class here"), "" before one. */
const char *mp_fwd_kernel_pick_note(int bits, int bf16);
/* 1 when this CPU (and this build) can run kernel k. */
int mp_fwd_kernel_available(MpFwdKernel k);
/* The same with kernel k (a resolved one, mp_fwd_kernel_resolve), whatever the process-wide
 * choice: what the forward pass calls (each MpFwd keeps its own kernel); W f32 or bf16, never plain;
 * a bf16 W in the layout of k (mp_fwd_kernel_layout; asserted). */
void mp_fwd_matmul_kernel(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T);
/* The kernel k stands for here (AUTO: mp_fwd_kernel_pick of the default class of bf16 weights),
 * or -1 when this CPU or build cannot run it; changes nothing. */
int mp_fwd_kernel_resolve(MpFwdKernel k);
/* Selects the kernel used by every later mp_fwd_matmul (AUTO resolves to the best available);
 * returns the kernel now in use, or -1 (selection unchanged) when k is not available here.
 * Not thread-safe: call before any parallel work. */
int mp_fwd_kernel_set(MpFwdKernel k);
MpFwdKernel mp_fwd_kernel_get(void); /* the resolved kernel in use */

/* bf16 (round to nearest even; NaN stays NaN) and back. */
uint16_t mp_fwd_bf16_from_f32(float x);
float mp_fwd_bf16_to_f32(uint16_t b);
/* x [n] <- bf16-rounded x, kept as f32 values (activations before a bf16-compute matmul). */
void mp_fwd_bf16_round(float *x, size_t n);

/* y [n] = x [n] · rsqrt(mean(x²) + eps) · weight [n] (weight may be NULL: no multiply).
 * y may alias x. */
void mp_fwd_rmsnorm(float *y, const float *x, const float *weight, int n, double eps);

/* Tables for positions 0..T-1: cos/sin [T, R/2] = cos/sin((float)pos · inv_freq[i]) · attn. */
void mp_fwd_rope_table(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn);
/* In place on one head vector x [HS] at one position (cos_p, sin_p [R/2]); dims >= R unchanged. */
void mp_fwd_rope(float *x, const float *cos_p, const float *sin_p, int R);

/* Keys packed for mp_fwd_attn_scores: blocks of 64 positions, kp [ceil(T/64)][HS][64]
 * (kp[(t/64)*HS*64 + d*64 + t%64] = k_t[d]), so a block of keys is one contiguous 32 KiB run
 * (HS 128) instead of HS rows T apart. Floats needed: */
size_t mp_fwd_attn_keys_floats(int HS, int T);
/* Writes key k [HS] of position t into kp. */
void mp_fwd_attn_pack_key(float *kp, const float *k, int HS, int t);
/* Scores of one head: s [T,T] row i, j < n_i (n_i = causal ? i+1 : T) = (q_i·k_j) · scale, the sum
 * over d ascending with fmaf (as the reference, bit for bit); s[i,j >= n_i] = -inf. q [T] rows of
 * stride ldq; kp the packed keys (mp_fwd_attn_pack_key). Rows [i0, i1) only; blocks of 8 rows x
 * 64 keys in registers. */
void mp_fwd_attn_scores(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T,
                        int causal, float scale, int i0, int i1);
/* Reference with k [T] rows of stride ldk. */
void mp_fwd_attn_scores_ref(float *s, const float *q, int64_t ldq, const float *k, int64_t ldk,
                            int HS, int T, int causal, float scale);
/* Softmax in place over row[0, n); row[n, len) set to 0. e^x by mp_vexpf_neg (kernels/vexp.h) and
 * the sum in 16 fixed lanes: the same bits for any vector width (fwd_kernels.c). */
void mp_fwd_softmax_row(float *row, int n, int len);
/* y[j] = e^x[j] for x[j] <= 0 (-inf: 0, NaN: NaN; positive x is outside its range), within 1 ulp
 * of the exact value, subnormal results rounded once; the softmax's exponential. */
void mp_fwd_exp_neg(float *y, const float *x, int n);
/* o_i [HS] (row stride ldo) = Σ_{j<n_i} p[i,j] v_j for rows [i0, i1), fmaf in ascending j from 0
 * (the same bits as a plain loop); p [T,T]; v rows stride ldv (contiguous rows, ldv = HS, read
 * fastest). Blocks of 4 rows x 64 dims in registers. */
void mp_fwd_attn_mix(float *o, int64_t ldo, const float *p, const float *v, int64_t ldv, int HS, int T,
                     int causal, int i0, int i1);

/* ---- plain arithmetic (MP_FWD_COMPUTE_F32_PLAIN, fwd.h): the ops of the training model's f32
 * kernels (src/train/model_impl.h) bit for bit — every product rounded before it is added (no
 * fma), every sum in f32 from 0 in ascending index — as reference loops (not blocked). What
 * differs from the kernels above, op by op: matmul, scores and the value mix add x·w rounded
 * instead of fmaf; RMSNorm sums x² in f32 (not double); softmax takes exp in double, rounded,
 * and multiplies by 1/sum (not expf and a division); SiLU is g · (1/(1 + exp(-g))) with exp in
 * double; the RoPE table rounds cos·attn once, in double. */
/* y [T,O] = x [T,K] · Wᵀ with W packed in f32 (w->p), y[t,o] = Σ_k x·w rounded, ascending k. */
void mp_fwd_matmul_plain(float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T);
/* y [n] = x · s · weight, s = 1/sqrt(Σx² (f32) / n + eps) (weight NULL: no multiply). y may alias x. */
void mp_fwd_rmsnorm_plain(float *y, const float *x, const float *weight, int n, double eps);
/* cos/sin [T, R/2] = (float)(cos((float)pos · inv_freq[i]) · attn), the product in double. */
void mp_fwd_rope_table_plain(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn);
/* mp_fwd_attn_scores' contract (packed keys, rows [i0, i1), -inf where masked), plain sums. */
void mp_fwd_attn_scores_plain(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T, int causal,
                              float scale, int i0, int i1);
/* Softmax in place over row[0, n): exp in double, rounded; the f32 sum; · (1/sum). row[n, len) = 0. */
void mp_fwd_softmax_row_plain(float *row, int n, int len);
/* mp_fwd_attn_mix's contract, plain sums. */
void mp_fwd_attn_mix_plain(float *o, int64_t ldo, const float *p, const float *v, int64_t ldv, int HS, int T,
                           int causal, int i0, int i1);
/* out [n] = g · (1/(1 + exp(-g))) · u, exp in double; out may alias g. */
void mp_fwd_swiglu_plain(float *out, const float *g, const float *u, size_t n);

/* silu(g) · u elementwise: out [n] (may alias g). */
void mp_fwd_swiglu(float *out, const float *g, const float *u, size_t n);
/* LayerNorm with bias (GPT-NeoX): (x - mean) / sqrt(var + eps) · weight + bias, mean and (biased)
 * variance in double; y may alias x. */
void mp_fwd_layernorm(float *y, const float *x, const float *weight, const float *bias, int n, double eps);
/* out[i] = GELU(x[i]) exactly, x · Φ(x) = x/2 · (1 + erf(x/√2)) (torch's default, GPT-NeoX);
 * out may alias x. */
void mp_fwd_gelu_erf(float *out, const float *x, size_t n);
/* out[i] = gelu_tanh(g[i]) · u[i] (Gemma's GeGLU; torch's gelu approximate="tanh" in f32:
 * g/2 · (1 + tanh(√(2/π) · (g + 0.044715 g³)))); out may alias g. */
void mp_fwd_geglu(float *out, const float *g, const float *u, size_t n);
/* x[i] = cap · tanh(x[i] / cap) in f32 (Gemma 2's soft-capping), for i < n. */
void mp_fwd_softcap(float *x, size_t n, float cap);

/* ---- reductions and routing */
/* The head sum of rows [i0, i1) of s [NH, T, T]: hs [i1 - i0, T] doubles, hs[(i - i0)·T + j] =
 * Σ_h (double)s[h, i, j] in ascending h from 0.0, for j < n_i (n_i = causal ? i+1 : T); entries
 * past n_i are not written. */
void mp_fwd_attn_headsum(double *hs, const float *s, int NH, int T, int causal, int i0, int i1);
/* MoE routing of one row: mp_fwd_moe_route, model/fwd_moe_route.h (one definition for host and device). */

#endif
