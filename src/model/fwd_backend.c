/* fwd_backend.c — the two CPU instances of the forward pass's ops table and the device names;
 * see fwd_backend.h.
 */
#include "model/fwd_backend.h"

#include <stdlib.h>
#include <string.h>

/* ================================================================ storage */

static void *cpu_alloc(size_t bytes) { return aligned_alloc(64, bytes ? bytes : 64); }
static void cpu_free(void *p) { free(p); }

/* ================================================================ the two instances */

/* cpu: the MpFwd's own kernel, whatever mp_fwd_kernel_set chose for the process. */
static void cpu_matmul(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    mp_fwd_matmul_kernel(k, y, ldy, x, ldx, w, T);
}

/* cpu-plain: one order of sums for every kernel (the reference loops of the plain section). */
static void plain_matmul(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    (void)k;
    mp_fwd_matmul_plain(y, ldy, x, ldx, w, T);
}

const MpFwdOps mp_fwd_ops_cpu = {
    .name = "cpu",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .matmul = cpu_matmul,
    .rmsnorm = mp_fwd_rmsnorm,
    .layernorm = mp_fwd_layernorm,
    .rope_table = mp_fwd_rope_table,
    .rope = mp_fwd_rope,
    .pack_key = mp_fwd_attn_pack_key,
    .attn_scores = mp_fwd_attn_scores,
    .softmax_row = mp_fwd_softmax_row,
    .attn_mix = mp_fwd_attn_mix,
    .swiglu = mp_fwd_swiglu,
    .geglu = mp_fwd_geglu,
    .gelu = mp_fwd_gelu_erf,
    .moe_swiglu = mp_fwd_swiglu,
    .rope_table_local = mp_fwd_rope_table,
    .softcap = mp_fwd_softcap,
    .bf16_round = mp_fwd_bf16_round,
};

/* The training model's arithmetic where it has its own (matmul, RMSNorm, RoPE table, scores,
 * softmax, p·V, SwiGLU); the rest as cpu (the training model has no LayerNorm, GeGLU, GELU or
 * soft-cap, and plain compute is f32: no bf16 inputs). */
const MpFwdOps mp_fwd_ops_cpu_plain = {
    .name = "cpu-plain",
    .alloc = cpu_alloc,
    .free = cpu_free,
    .matmul = plain_matmul,
    .rmsnorm = mp_fwd_rmsnorm_plain,
    .layernorm = mp_fwd_layernorm,
    .rope_table = mp_fwd_rope_table_plain,
    .rope = mp_fwd_rope,
    .pack_key = mp_fwd_attn_pack_key,
    .attn_scores = mp_fwd_attn_scores_plain,
    .softmax_row = mp_fwd_softmax_row_plain,
    .attn_mix = mp_fwd_attn_mix_plain,
    .swiglu = mp_fwd_swiglu_plain,
    .geglu = mp_fwd_geglu,
    .gelu = mp_fwd_gelu_erf,
    .moe_swiglu = mp_fwd_swiglu,
    .rope_table_local = mp_fwd_rope_table,
    .softcap = mp_fwd_softcap,
    .bf16_round = mp_fwd_bf16_round,
};

/* ================================================================ devices */

/* Backends a build may have, and how to get the ones it lacks. */
static const struct {
    const char *name, *hint;
} fwd_unbuilt[] = {{"cuda", "make CUDA=1"}};

const MpFwdOps *mp_fwd_ops_for(const char *device, int plain, MpErr *e) {
    if (!device || !strcmp(device, "cpu")) return plain ? &mp_fwd_ops_cpu_plain : &mp_fwd_ops_cpu;
    for (size_t i = 0; i < sizeof fwd_unbuilt / sizeof fwd_unbuilt[0]; i++)
        if (!strcmp(device, fwd_unbuilt[i].name)) {
            mp_err_set(e, "--device %s: not built: %s", device, fwd_unbuilt[i].hint);
            return NULL;
        }
    mp_err_set(e, "--device %.40s: no such backend (this build has: cpu)", device);
    return NULL;
}

int mp_fwd_device_check(const char *device, MpErr *e) { return mp_fwd_ops_for(device, 0, e) ? MP_OK : MP_ERR; }
