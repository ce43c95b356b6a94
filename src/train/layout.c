/* layout.c — configuration checks, the parameter table (HF names, shapes, offsets) and the initial
 * weights of the trainable model; see train.h.
 *
 * Implements: mp_train_config_default/check, mp_train_layout_*, mp_train_init_params.
 * Does not: allocate activations (model_impl.h) or write files (ckpt.c).
 * Tested by: tests/test_train.c (the loader opens checkpoints written from this table).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"    /* MpErr, mp_try_calloc */
#include "core/rng.h"    /* MpRng: Philox streams for the initial weights */
#include "train/train.h" /* MpTrainConfig, MpTrainLayout */

void mp_train_config_default(MpTrainConfig *c) {
    memset(c, 0, sizeof *c);
    c->layers = 4;
    c->dim = 128;
    c->heads = 4;
    c->kv_heads = 2;
    c->ffn = 344;
    c->vocab = 256;
    c->seq = 128;
    c->batch = 16;
    c->pos = MP_TRAIN_POS_ROPE;
    c->rope_theta = 10000.0;
    c->tie = 0;
    c->norm_eps = 1e-5;
    c->init_std = 0.02;
}

int mp_train_config_check(MpTrainConfig *c, MpErr *e) {
    if (c->layers < 1 || c->layers > 256) return mp_err_set(e, "layers %d is outside [1, 256]", c->layers);
    if (c->dim < 2 || c->dim > 16384) return mp_err_set(e, "dim %d is outside [2, 16384]", c->dim);
    if (c->heads < 1 || c->dim % c->heads) return mp_err_set(e, "dim %d is not a multiple of heads %d", c->dim, c->heads);
    if (c->kv_heads < 1 || c->heads % c->kv_heads)
        return mp_err_set(e, "heads %d is not a multiple of kv-heads %d", c->heads, c->kv_heads);
    c->head_dim = c->dim / c->heads;
    if (c->head_dim % 2) return mp_err_set(e, "head size dim/heads = %d must be even (RoPE pairs)", c->head_dim);
    if (c->ffn < 1 || c->ffn > 65536) return mp_err_set(e, "ffn %d is outside [1, 65536]", c->ffn);
    if (c->vocab < 2 || c->vocab > 1 << 20) return mp_err_set(e, "vocab %d is outside [2, 2^20]", c->vocab);
    if (c->seq < 1 || c->seq > 8192) return mp_err_set(e, "seq %d is outside [1, 8192]", c->seq);
    if (c->batch < 1 || c->batch > 65536) return mp_err_set(e, "batch %d is outside [1, 65536]", c->batch);
    if (!(c->rope_theta > 1 && c->rope_theta <= 1e12)) return mp_err_set(e, "rope theta %g is outside (1, 1e12]", c->rope_theta);
    if (!(c->norm_eps >= 0 && c->norm_eps <= 1)) return mp_err_set(e, "norm eps %g is outside [0, 1]", c->norm_eps);
    if (!(c->init_std > 0 && c->init_std <= 1e3)) return mp_err_set(e, "init std %g is outside (0, 1e3]", c->init_std);
    if (c->pos != MP_TRAIN_POS_ROPE && c->pos != MP_TRAIN_POS_NONE) return mp_err_set(e, "position mode %d is not rope (0) or none (1)", (int)c->pos);
    if ((c->tie != 0 && c->tie != 1) || (c->bos != 0 && c->bos != 1))
        return mp_err_set(e, "tie %d / bos %d must each be 0 or 1", c->tie, c->bos);
    /* activations: the attention maps dominate; keep every product within 2^40 elements */
    double acts = (double)c->layers * c->batch * c->seq * ((double)c->heads * c->seq + 8.0 * c->dim + 3.0 * c->ffn) +
                  (double)c->batch * c->seq * c->vocab * 2;
    if (acts > 1e11) return mp_err_set(e, "model too large: about %.3g activations", acts);
    return MP_OK;
}

int mp_train_layout_embed(void) { return 0; }
int mp_train_layout_index(const MpTrainConfig *c, int layer, MpTrainRole r) {
    MP_ASSERT(layer >= 0 && layer < c->layers && r >= 0 && r < MP_TRAIN_NROLES);
    return 1 + layer * MP_TRAIN_NROLES + (int)r;
}
int mp_train_layout_norm(const MpTrainConfig *c) { return 1 + c->layers * MP_TRAIN_NROLES; }
int mp_train_layout_lm_head(const MpTrainConfig *c) { return c->tie ? 0 : 2 + c->layers * MP_TRAIN_NROLES; }

static void layout_set(MpTrainTensor *t, const char *name, int64_t rows, int64_t cols, int ndim, size_t *off) {
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    t->shape[0] = rows;
    t->shape[1] = cols;
    t->n = (size_t)rows * (size_t)cols;
    t->off = *off;
    t->decay = ndim == 2;
    *off += t->n;
}

int mp_train_layout_init(MpTrainLayout *lay, const MpTrainConfig *c, MpErr *e) {
    memset(lay, 0, sizeof *lay);
    lay->n = 2 + c->layers * MP_TRAIN_NROLES + (c->tie ? 0 : 1);
    lay->t = mp_try_calloc((size_t)lay->n, sizeof *lay->t);
    if (!lay->t) return mp_err_set(e, "out of memory for the parameter table");
    const int64_t C = c->dim, QC = (int64_t)c->heads * c->head_dim, KC = (int64_t)c->kv_heads * c->head_dim;
    const int64_t FF = c->ffn, V = c->vocab;
    size_t off = 0;
    char nm[96];
    layout_set(&lay->t[0], "model.embed_tokens.weight", V, C, 2, &off);
    static const char *suffix[MP_TRAIN_NROLES] = {
        "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
        "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
        "mlp.gate_proj.weight",   "mlp.up_proj.weight",      "mlp.down_proj.weight"};
    for (int l = 0; l < c->layers; l++) {
        const int64_t rows[MP_TRAIN_NROLES] = {C, QC, KC, KC, C, C, FF, FF, C};
        const int64_t cols[MP_TRAIN_NROLES] = {1, C, C, C, QC, 1, C, C, FF};
        for (int r = 0; r < MP_TRAIN_NROLES; r++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix[r]);
            layout_set(&lay->t[mp_train_layout_index(c, l, (MpTrainRole)r)], nm, rows[r], cols[r], cols[r] == 1 ? 1 : 2,
                       &off);
        }
    }
    layout_set(&lay->t[mp_train_layout_norm(c)], "model.norm.weight", C, 1, 1, &off);
    if (!c->tie) layout_set(&lay->t[mp_train_layout_lm_head(c)], "lm_head.weight", V, C, 2, &off);
    lay->total = off;
    return MP_OK;
}

void mp_train_layout_free(MpTrainLayout *lay) {
    free(lay->t);
    memset(lay, 0, sizeof *lay);
}

/* Norm weights 1; matrices N(0, std^2) with o_proj/down_proj at std/sqrt(2L) (GPT-2's residual
 * scaling). Tensor i draws from Philox stream 0x7472000000 + i, in row-major order. */
void mp_train_init_params(float *params, const MpTrainLayout *lay, const MpTrainConfig *c, uint64_t seed) {
    double buf[1024];
    for (int i = 0; i < lay->n; i++) {
        const MpTrainTensor *t = &lay->t[i];
        float *p = params + t->off;
        if (t->ndim == 1) {
            for (size_t j = 0; j < t->n; j++) p[j] = 1.0f;
            continue;
        }
        double std = c->init_std;
        if (strstr(t->name, "o_proj") || strstr(t->name, "down_proj")) std /= sqrt(2.0 * c->layers);
        MpRng r;
        mp_rng_init(&r, seed, UINT64_C(0x7472000000) + (uint64_t)i);
        for (size_t j = 0; j < t->n; j += 1024) {
            size_t k = t->n - j < 1024 ? t->n - j : 1024;
            mp_rng_normal_fill(&r, buf, 1024);
            for (size_t a = 0; a < k; a++) p[j + a] = (float)(std * buf[a]);
        }
    }
}
