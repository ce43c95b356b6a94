/* model_hash.c — mp_model_weights_hash and mp_model_shape_hash (model.h). The first: what a run
 * of the first layers computes with, * hashed, so that a probe checkpoint resumes only with the model that wrote it (issue 31: a run
 * key of shapes alone let models/none resume models/rope's sums, and step-000004 step-000002's).
 *
 * Implements: mp_model_shape_hash, the fingerprint of hyperparameters and tensor table (FNV-1a,
 * unchanged since checkpoint version 1; moved here from model/probe.c); and for the weights hash
 * the description's part (every field that changes the arithmetic, the RoPE tables
 * as built, the per-layer NoPE and sliding-window switches) and the weights' part (the stored
 * bytes of each tensor read, with name, type and shape), both through mp_hash64.
 * Does not: read a tensor the run does not read (probe --layers 1-4 of a 32-layer model hashes
 * 4 layers, the embedding and the head), nor dequantise (the bytes as stored are the identity).
 * Cost: one pass over the mapped bytes, beside mp_model_check_finite's (measured in the commit
 * that added it: stories260K and a 4-layer 1024-wide llama).
 * Tested by: tests/test_model_probe.c (test_resume_other_model_refused), tests/test_load.c
 * (test_weights_hash_sees_one_bit).
 */
#include "load/model.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_hash64, MP_FNV_INIT */

static uint64_t hash_floats(uint64_t h, const float *v, size_t n) {
    const uint64_t k = n;
    h = mp_hash64(&k, sizeof k, h);
    return v ? mp_hash64(v, n * sizeof *v, h) : h;
}

/* The description: integers, reals and the owned arrays of MpModel that shape the computation. */
static uint64_t hash_description(const MpModel *m) {
    const int64_t ints[] = {m->format, m->arch, m->n_layers, m->dim, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn,
                            m->vocab, m->sliding_window, m->has_qkv_bias, m->has_qk_norm, m->qk_norm_whole,
                            m->no_pre_norm, m->post_norm, m->layer_norm, m->gelu_mlp, m->parallel_residual, m->geglu,
                            m->tie_embeddings, m->n_experts, m->n_experts_used, m->moe_norm_topk, m->ffn_shexp,
                            m->rot_dim, m->rope_scaling, m->rope_orig_ctx};
    const double reals[] = {m->norm_eps, m->embed_scale, m->attn_scale, m->attn_softcap, m->final_softcap,
                            m->rope_theta, m->rope_factor, m->rope_low_freq_factor, m->rope_high_freq_factor,
                            m->rope_attn_factor};
    uint64_t h = mp_hash64(ints, sizeof ints, MP_FNV_INIT);
    h = mp_hash64(reals, sizeof reals, h);
    const size_t half = m->rot_dim > 0 ? (size_t)m->rot_dim / 2 : 0, L = m->n_layers > 0 ? (size_t)m->n_layers : 0;
    h = hash_floats(h, m->inv_freq, m->inv_freq ? half : 0);
    h = hash_floats(h, m->inv_freq_long, m->inv_freq_long ? half : 0);
    h = hash_floats(h, m->inv_freq_local, m->inv_freq_local ? half : 0);
    const unsigned char none = 2; /* "no array": differs from every 0/1 entry */
    h = m->layer_local ? mp_hash64(m->layer_local, L, h) : mp_hash64(&none, 1, h);
    h = m->rope_layer ? mp_hash64(m->rope_layer, L, h) : mp_hash64(&none, 1, h);
    return h;
}

uint64_t mp_model_weights_hash(const MpModel *m, int n_layers) {
    unsigned char *seen = mp_model_read_set(m, n_layers);
    if (!seen) return 0;
    uint64_t h = hash_description(m);
    for (size_t i = 0; i < m->n_tensors; i++) {
        if (!seen[i]) continue;
        const MpModelTensor *t = &m->tensors[i];
        const int64_t head[] = {(int64_t)i, t->type, t->ndim, t->shape[0], t->shape[1], t->shape[2], t->shape[3],
                                (int64_t)t->nbytes};
        h = mp_hash64(t->name, strlen(t->name), h);
        h = mp_hash64(head, sizeof head, h);
        h = mp_hash64(t->data, t->nbytes, h);
    }
    free(seen);
    return h;
}

/* ================================================================ shape hash */

static uint64_t shape_hash_i64(uint64_t h, int64_t v) { return mp_fnv1a64(&v, sizeof v, h); }
static uint64_t shape_hash_f64(uint64_t h, double v) { return mp_fnv1a64(&v, sizeof v, h); }

uint64_t mp_model_shape_hash(const MpModel *m) {
    uint64_t h = MP_FNV_INIT;
    const int64_t ints[] = {m->format, m->arch, m->n_layers, m->dim, m->n_heads, m->n_kv_heads, m->head_dim, m->ffn,
                            m->vocab, m->has_qkv_bias, m->has_qk_norm, m->tie_embeddings, m->rot_dim,
                            m->rope_scaling, m->rope_orig_ctx, m->sliding_window, m->max_pos};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) h = shape_hash_i64(h, ints[i]);
    const double dbl[] = {m->norm_eps, m->rope_theta, m->rope_factor, m->rope_low_freq_factor,
                          m->rope_high_freq_factor, m->rope_attn_factor};
    for (size_t i = 0; i < sizeof dbl / sizeof dbl[0]; i++) h = shape_hash_f64(h, dbl[i]);
    for (size_t t = 0; t < m->n_tensors; t++) {
        const MpModelTensor *x = &m->tensors[t];
        h = mp_fnv1a64(x->name, strlen(x->name) + 1, h);
        h = shape_hash_i64(h, x->type);
        for (int d = 0; d < x->ndim && d < 4; d++) h = shape_hash_i64(h, x->shape[d]);
        h = shape_hash_i64(h, (int64_t)x->nbytes);
    }
    return h;
}
