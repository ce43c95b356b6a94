/* fwd_cpu.h — what the two CPU instances of the backend interface (fwd_backend.h) share between
 * their files: a worker's state (the matmul kernel and the arithmetic of the instance) and the
 * attention op. Private to fwd_cpu.c and fwd_cpu_attn.c; nothing else includes it.
 *
 * Implements: MpFwdCpuArith, the kernels in which cpu and cpu-plain differ (matmul, RMSNorm, the
 * RoPE table, scores, softmax, p·V, SwiGLU: fwd_kernels.h's fast ones or its plain ones), and
 * MpFwdCpuCtx, what MpFwdOps.open hands out (an MpFwdCtx * is one of these).
 * Does not: hold weights or activations (fwd.c carves them out of the instance's blocks).
 * Implemented by: fwd_cpu_attn.c (the attention op and its scratch sizes; fwd_cpu.c defines
 *   none of its functions: it fills the structs).
 * Tested by: tests/test_backend_ops.c, tests/test_model_fwd.c.
 *
 * Shape legend: T tokens, K inner size, O outputs, HS head dim, R rotary dims.
 */
#ifndef MP_FWD_CPU_H
#define MP_FWD_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "model/fwd_backend.h" /* MpFwdCtx, MpFwdAttn, MpFwdTaps */
#include "model/fwd_kernels.h" /* MpFwdMat (the CPU's panel layout), MpFwdKernel, the kernels */

/* The kernels of one CPU instance (fwd_kernels.h's contracts). */
typedef struct MpFwdCpuArith {
    void (*matmul)(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T);
    void (*rmsnorm)(float *y, const float *x, const float *w, int n, double eps);
    void (*rope_table)(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn);
    void (*attn_scores)(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T, int causal, float scale, int i0, int i1);
    void (*softmax_row)(float *row, int n, int len);
    void (*attn_mix)(float *o, int64_t ldo, const float *p, const float *v, int64_t ldv, int HS, int T, int causal, int i0, int i1);
    void (*swiglu)(float *out, const float *g, const float *u, size_t n);
} MpFwdCpuArith;

/* A worker's handle on a CPU instance. */
typedef struct MpFwdCpuCtx {
    MpFwdKernel kernel;       /* the pass's matmul kernel (resolved) */
    const MpFwdCpuArith *ar;  /* the instance's arithmetic */
} MpFwdCpuCtx;

static inline const MpFwdCpuCtx *mp_fwd_cpu_ctx(const MpFwdCtx *c) { return (const MpFwdCpuCtx *)(const void *)c; }

/* MpFwdOps.attention, .kv_bytes, .tap_bytes of both CPU instances (fwd_cpu_attn.c). */
void mp_fwd_cpu_attention(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp);
size_t mp_fwd_cpu_kv_bytes(int HS, int ldt);
size_t mp_fwd_cpu_tap_bytes(int NH, int ldt, int workers);

#endif
