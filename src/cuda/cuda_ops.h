/* cuda_ops.h — the CUDA instance of the forward pass's backend interface (mp_cuda_fwd_ops, an
 * MpFwdOps of src/model/fwd_backend.h) and its worker handle, shared with the device accumulator
 * (cuda_accops.cu), whose taps run on the same stream.
 *
 * Implements: see cuda_ops.cu (the ops) and cuda_accops.cu (the probe's sums on the device).
 * Does not: load itself (src/model/fwd_plugin.c dlopens the plugin; cuda_plugin.cu hands these
 * tables over).
 * Tested by: tests/test_backend_ops.c (device instances), on a GPU.
 */
#ifndef MP_CUDA_OPS_H
#define MP_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/cuda_ctx.h"     /* MpCuda */
#include "model/fwd_plugin.h"  /* MpFwdDevAcc, mp_fwd_plugin_local_rank */

#ifdef __cplusplus
extern "C" {
#endif
#include "model/fwd_backend.h" /* MpFwdOps and its argument structs */
#ifdef __cplusplus
}
#endif

#define MP_CUDA_OPS_AMAX 16 /* spans per amax batch */

/* A worker's handle (MpFwdCtx of fwd_backend.h): its CUDA context and the buffers its ops keep. */
struct MpFwdCtx {
    MpCuda cu;
    uint16_t *xb;       /* [xb_cap] device: bf16 operands of a matmul's input */
    size_t xb_cap;
    uint16_t *wb;       /* [wb_cap] host: one range of a bf16 weight's rows before its upload */
    size_t wb_cap;
    int *chk;           /* [1] device: the scores check, i·NH + h of the first non-finite score */
    uint32_t *amax_d;   /* [MP_CUDA_OPS_AMAX] device */
    uint32_t *amax_h;   /* [MP_CUDA_OPS_AMAX] pinned host */
    int32_t *moe_d;     /* [moe_cap] device: expert counts */
    int32_t *moe_h;     /* [moe_cap] host: the last counts (the gathers' sizes) */
    int moe_cap;
    void *stage;        /* [stage_cap bytes] pinned host: what a host tap reads */
    size_t stage_cap;
};

#ifdef __cplusplus
extern "C" {
#endif

extern const MpFwdOps mp_cuda_fwd_ops;
extern const MpFwdDevAcc mp_cuda_dev_acc;

void mp_cuda_fwd_close(MpFwdCtx *c);
void mp_cuda_fwd_attention(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp);
/* Makes c's device the calling thread's current one (workers may run on other threads). */
void mp_cuda_fwd_use(MpFwdCtx *c);

#ifdef __cplusplus
}
#endif

#endif
