/* fwd_backend.h — the backends of the decoder forward pass (src/model/fwd.c): a per-instance table
 * of the operations whose arithmetic or storage is the backend's, and the device names --device
 * accepts.
 *
 * Implements: MpFwdOps, the operations fwd.c calls for every piece of arithmetic a backend may do
 * its own way — storage of the weight and activation blocks, matmul (with the MpFwd's own matmul
 * kernel), RMSNorm / LayerNorm, the RoPE table and rotation, key packing, attention scores,
 * softmax and p·V, the MLP's activations (SwiGLU, GeGLU, GELU; the experts' too), soft-capping
 * and bf16 rounding of Linear inputs; every other write to an activation (biases, residual adds,
 * copies, zeroing, sliding-window masks, the experts' gathered rows and weighted sums, qwen2moe's
 * gated shared expert); and the stage-level ops: the embedding, the MoE routing, the reduced map
 * (head sums of a block of score rows) and the output head (logits) — and its two CPU instances:
 *   - mp_fwd_ops_cpu: the fast kernels of fwd_kernels.h (the same bits for every matmul kernel and
 *     thread count); f32 and bf16 compute;
 *   - mp_fwd_ops_cpu_plain: the training model's arithmetic (MP_FWD_COMPUTE_F32_PLAIN: no fma, f32
 *     sums, exp in double), what gram's matrices are computed with.
 * fwd.c picks the instance from MpFwdConfig (device, compute, or an explicit ops for tests) and
 * never asks which one it has: there is no process-wide kernel choice and no `plain ?` branch.
 * A new backend (CUDA, issue #28) is a new instance: its own storage (alloc/free), its ops on those
 * buffers, and host copies only where a tap asks for them (MpFwdConfig.tap_*, fwd.h); the host
 * reads fwd.c still makes are listed in docs/architecture.md ("a backend").
 * Does not: decide the model's data flow (fwd.c), or parallelise (fwd.c's loops call the row ops).
 * Tested by: tests/test_model_fwd.c (a third instance: cpu-plain's ops counted, the same bits as
 * cpu-plain, and every stage-level op seen; a backend whose storage fails, one line; --device
 * refusals).
 *
 * Shape legend: T tokens, K inner size, O outputs, HS head dim, R rotary dims, C hidden, V
 * vocabulary, NH query heads, E experts, K chosen experts (moe_route).
 */
#ifndef MP_FWD_BACKEND_H
#define MP_FWD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"          /* MpErr */
#include "load/model.h"        /* MpModel: the embedding rows the embed op reads */
#include "model/fwd_kernels.h" /* MpFwdMat, MpFwdKernel, the kernels the CPU instances call */

/* The output head, as MpFwdOps.logits runs it: the final norm, the lm_head (with bf16 compute's
 * rounding of its input) and gemma2's final soft-cap. Borrows the MpFwd's weights. */
typedef struct MpFwdHead {
    const float *norm;   /* [C] the final norm's weight */
    const float *norm_b; /* [C] gptneox's LayerNorm bias; else NULL */
    const MpFwdMat *w;   /* [V, C] lm_head */
    int C, V;
    int layer_norm;      /* 1: LayerNorm with norm_b (gptneox); 0: RMSNorm */
    int bf16_in;         /* 1: the normed rows rounded to bf16 before the matmul (bf16 compute) */
    double eps;
    float softcap;       /* gemma2's final soft-cap; 0: none */
    MpFwdKernel kernel;  /* the pass's matmul kernel */
} MpFwdHead;

typedef struct MpFwdOps {
    const char *name; /* "cpu", "cpu-plain" */
    /* storage of an MpFwd's weight block (alloc/free) and activation block (act_alloc/act_free):
     * bytes (a multiple of 64), 64-byte aligned; NULL when it cannot be had. The weight block is
     * written by the host as it packs (fwd.c's loading) */
    void *(*alloc)(size_t bytes);
    void (*free)(void *p);
    void *(*act_alloc)(size_t bytes);
    void (*act_free)(void *p);
    /* host [bytes] = src [bytes] of the activation block: what the taps asked for (captures, the
     * reduced map's blocks) reach the host through it. NULL: the activations are host memory
     * (the CPU instances), handed over in place */
    void (*to_host)(void *host, const void *src, size_t bytes);
    /* y [T,O] (row stride ldy) = x [T,K] (row stride ldx) · Wᵀ; k: the MpFwd's resolved kernel */
    void (*matmul)(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T);
    /* y [n] = RMSNorm(x) · w; LayerNorm with bias b (gptneox); y may alias x */
    void (*rmsnorm)(float *y, const float *x, const float *w, int n, double eps);
    void (*layernorm)(float *y, const float *x, const float *w, const float *b, int n, double eps);
    /* cos/sin [T, R/2] of positions 0..T-1; rotation of one head vector x [HS] in place */
    void (*rope_table)(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn);
    void (*rope)(float *x, const float *cos_p, const float *sin_p, int R);
    /* key k [HS] of position t into the packed keys kp (mp_fwd_attn_pack_key's layout) */
    void (*pack_key)(float *kp, const float *k, int HS, int t);
    /* one head's scores of rows [i0, i1) (scale and causal mask fused; -inf where masked) */
    void (*attn_scores)(float *s, const float *q, int64_t ldq, const float *kp, int HS, int T, int causal, float scale, int i0, int i1);
    /* softmax in place over row[0, n), row[n, len) = 0; then p·V of rows [i0, i1) */
    void (*softmax_row)(float *row, int n, int len);
    void (*attn_mix)(float *o, int64_t ldo, const float *p, const float *v, int64_t ldv, int HS, int T, int causal, int i0, int i1);
    /* the MLP's activations: silu(g)·u, gelu_tanh(g)·u, exact GELU; out may alias g / x */
    void (*swiglu)(float *out, const float *g, const float *u, size_t n);
    void (*geglu)(float *out, const float *g, const float *u, size_t n);
    void (*gelu)(float *out, const float *x, size_t n);
    /* x = cap tanh(x / cap) (gemma2); x rounded to bf16 values (bf16 compute's Linear inputs) */
    void (*softcap)(float *x, size_t n, float cap);
    void (*bf16_round)(float *x, size_t n);
    /* ---- the activations' housekeeping (parallel host loops on a CPU, kernels on a device) */
    /* y rows [0, rows) (row stride ld): y[t, i] += b[i] for i < n (the Linear biases) */
    void (*add_bias)(float *y, int64_t ld, const float *b, int64_t n, int rows);
    /* x [n] += y [n] (the residual stream) */
    void (*add)(float *x, const float *y, size_t n);
    /* dst [n] = src [n] (activation to activation: values per head, a parallel residual's input) */
    void (*copy)(float *dst, const float *src, size_t n);
    /* row i of a sliding-window layer's scores [T] (T > W): keys j with i - j >= W -> -inf, and
     * without the causal mask also j - i >= W */
    void (*mask_window)(float *row, int i, int T, int W, int causal);
    /* x [n] = 0 */
    void (*zero)(float *x, size_t n);
    /* ---- MoE: the rows of one expert in, its outputs back (host loops on a CPU) */
    /* expert j's entries of rows [t0, T): rows [cnt] = t·K + k wherever sel [T, K] names j (t, then k,
     * ascending), xg [cnt, C] = those rows of x [T, C]; returns cnt */
    int (*moe_gather)(float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int t0, int T, int K, int C);
    /* y [T, C] rows rows[i] / K += o [cnt, C] row i times w [T·K] at rows[i], for i ascending */
    void (*moe_scatter)(float *y, const float *o, const int32_t *rows, const float *w, int cnt, int K, int C);
    /* qwen2moe's shared expert: sl [n] = x [n, C] · gate [C] (f32, in order); y [n, C] += (float)
     * sigmoid(sl) (in double) · o [n, C] */
    void (*moe_shared_mix)(float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C);
    /* ---- stage-level ops */
    /* x [n, C] = the token embedding's rows ids [n] (dequantised from the model's storage), times
     * m->embed_scale when > 0 (gemma); ids already checked against the vocabulary. MP_ERR with a
     * line when the model cannot be read. */
    int (*embed)(float *x, MpModel *m, const int32_t *ids, int n, MpErr *e);
    /* MoE routing of n rows: p [n, E] router logits -> probabilities in place; sel, w [n, K] the
     * chosen experts, most probable first, and their weights (mp_fwd_moe_route's rules) */
    void (*moe_route)(float *p, float *w, int32_t *sel, int n, int E, int K, int norm_topk);
    /* the reduced map of rows [i0, i1) of s [NH, T, T]: hs [i1 - i0, T] doubles, the head sum in
     * ascending order from 0.0 (mp_fwd_attn_headsum's rules; MpFwd.rows_headsum hands it over) */
    void (*attn_headsum)(double *hs, const float *s, int NH, int T, int causal, int i0, int i1);
    /* y [n, V] = the output head of x [n, C] (xn [n, C]: scratch, left holding the normed rows) */
    void (*logits)(float *y, float *xn, const float *x, const MpFwdHead *h, int n);
} MpFwdOps;

extern const MpFwdOps mp_fwd_ops_cpu;
extern const MpFwdOps mp_fwd_ops_cpu_plain;

/* The instance for a device: device NULL or "cpu" gives mp_fwd_ops_cpu, or mp_fwd_ops_cpu_plain
 * when plain (MP_FWD_COMPUTE_F32_PLAIN, fwd.h). Any other name: NULL and
 * one line in e — "cuda" (a backend this version lacks): "this version of maskpos has no CUDA backend yet"; names
 * no backend knows: unknown, and the list of those built. */
const MpFwdOps *mp_fwd_ops_for(const char *device, int plain, MpErr *e);

/* MP_OK when --device NAME can run here (mp_fwd_ops_for's rules), else MP_ERR and its line. */
int mp_fwd_device_check(const char *device, MpErr *e);

#endif
