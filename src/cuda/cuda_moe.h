/* cuda_moe.h — the CUDA plugin's mixture-of-experts rows (mixtral, qwen3moe, qwen2moe): the
 * routing, each expert's row count (one small copy to the host per layer), the gather of an
 * expert's rows and the weighted scatter of its outputs, qwen2moe's gated shared expert.
 *
 * Implements the CPU's rules (fwd_cpu.c, mp_fwd_moe_route): per row the router softmax in double
 * (exponentials and their sum), f32 probabilities, a stable descending top-k (ties: the lower
 * index), renormalised in rank order when norm_topk — one thread per row, the CPU's order, with
 * CUDA's exp (within an ulp of glibc's); counts as integers; the gather's (row, rank) list in
 * ascending t then k, one thread scanning (n·KE entries), the copies in parallel; the scatter
 * y += o · w, exact (each row appears once per expert); the shared gate's dot product in f32 in
 * order (one thread per row), sigmoid in double.
 * Does not: run the experts' matmuls (the ops instance, through cuda_gemm).
 * Tested by: tests/test_backend_ops.c's device instances (every MoE op against mp_fwd_ops_cpu),
 * on a GPU.
 *
 * Shape legend: n rows, E experts, KE chosen experts a row, C hidden.
 */
#ifndef MP_CUDA_MOE_H
#define MP_CUDA_MOE_H

#include <stdint.h>

#include "cuda/cuda_ctx.h" /* MpCuda */

#ifdef __cplusplus
extern "C" {
#endif

/* p [n, E] logits -> probabilities; sel, w [n, KE] (device) */
void mp_cuda_moe_route(MpCuda *c, float *p, float *w, int32_t *sel, int n, int E, int KE, int norm_topk);
/* dcnt [E] (device scratch) counted, then copied to cnt [E] (host) and waited for */
void mp_cuda_moe_count(MpCuda *c, int32_t *cnt, int32_t *dcnt, const int32_t *sel, int n, int KE, int E);
/* rows [cnt] and xg [cnt, C] of expert j */
void mp_cuda_moe_gather(MpCuda *c, float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int n, int KE, int C,
                        int cnt);
void mp_cuda_moe_scatter(MpCuda *c, float *y, const float *o, const int32_t *rows, const float *w, int cnt, int KE, int C);
void mp_cuda_moe_shared_mix(MpCuda *c, float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C);

#ifdef __cplusplus
}
#endif

#endif
