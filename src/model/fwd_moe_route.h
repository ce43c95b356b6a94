/* fwd_moe_route.h — the routing of a mixture-of-experts layer, one row: one definition for the
 * CPU instance (fwd_cpu.c's moe_route op) and the CUDA plugin (src/cuda/cuda_moe.cu, compiled by
 * nvcc as host and device code), so both take the same rules in the same order.
 *
 * Implements: mp_fwd_moe_route — p [E] router logits -> probabilities in place (exponentials and
 *   their sum in double, probabilities f32, as HF's softmax(dtype=float32)); sel [K] the K most
 *   probable experts by a stable descending selection (ties: the lower index first), w [K] their
 *   probabilities, renormalised to sum 1 (f32, summed in rank order) when norm_topk.
 * Implemented by: this header (static inline; host and device under nvcc).
 * Tested by: tests/test_families.c and tests/test_model_fwd.c (MoE families against torch and
 *   llama.cpp), tests/cuda/test_cuda.c (the plugin's routing, on a GPU).
 *
 * Shape legend: E experts, K experts used per token.
 */
#ifndef MP_FWD_MOE_ROUTE_H
#define MP_FWD_MOE_ROUTE_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define MP_FWD_MOE_FN static inline __host__ __device__
#else
#define MP_FWD_MOE_FN static inline
#endif

MP_FWD_MOE_FN void mp_fwd_moe_route(float *p, float *w, int32_t *sel, int E, int K, int norm_topk) {
    float mx = p[0];
    for (int j = 1; j < E; j++) mx = p[j] > mx ? p[j] : mx;
    double sum = 0;
    for (int j = 0; j < E; j++) sum += exp((double)p[j] - (double)mx);
    for (int j = 0; j < E; j++) p[j] = (float)(exp((double)p[j] - (double)mx) / sum);
    for (int k = 0; k < K; k++) { /* k-th largest: the first index holding the largest value not yet taken */
        int best = -1;
        for (int j = 0; j < E; j++) {
            int taken = 0;
            for (int i = 0; i < k; i++) taken |= sel[i] == j;
            if (!taken && (best < 0 || p[j] > p[best])) best = j;
        }
        sel[k] = best;
        w[k] = p[best];
    }
    if (norm_topk) {
        float s = 0;
        for (int k = 0; k < K; k++) s += w[k];
        for (int k = 0; k < K; k++) w[k] /= s;
    }
}

#undef MP_FWD_MOE_FN

#endif
