/* gram.c — the nine Gram matrices of paper.md §2.2 (Figure 3) for layer l → l+1 of any
 * Llama-architecture checkpoint opened by the project's loader; see gram.h.
 *
 * Implements: a forward pass of layers 0..l+1 (f32, the op kernels of model_impl.h plus the
 *   loader's RoPE table, partial rotary dims, qwen2 q/k/v biases and qwen3 per-head q/k norms),
 *   and the matrices, summed over sequences in double:
 *     (a) Y Yᵀ,  Y = RMSNorm_l(X) (with its weight), X the input of layer l
 *     (b) Q Kᵀ/√d  per head, pre-softmax, RoPE applied unless disabled; NaN above the diagonal
 *     (c) (A V)(A V)ᵀ per head, A = Softmax(Causal(Q Kᵀ/√d))
 *     (d) (A V W_O)(A V W_O)ᵀ   (all heads through o_proj)
 *     (e) O Oᵀ,  O = A V W_O + X
 *     (f) RMSNorm(O) RMSNorm(O)ᵀ  (post_attention_layernorm, with its weight)
 *     (g) X' X'ᵀ,  X' = FFN(RMSNorm(O)) + O  (the output of layer l)
 *     (h) the next layer's Y Yᵀ
 *     (i) the next layer's Q Kᵀ/√d per head; NaN above the diagonal
 *   Per-head matrices are averaged over heads; every matrix is averaged over sequences.
 * Does not: tokenise (the caller passes token ids), or plot.
 * Tested by: tests/test_gram.c against tests/ref/gram_ref.py (torch, from the spec).
 *
 * Shape legend: N sequences, S positions, C width, NH/NKV heads, HS head size, FF MLP width,
 * R rotary dims.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"    /* MpErr, mp_try_calloc */
#include "load/model.h"  /* MpModel, mp_model_tensor_f32, mp_model_rows_f32 */
#include "train/gram.h"  /* MpTrainGram */
#include "train/train.h" /* the f32 op kernels */

typedef struct GramLayerW {
    float *w[MP_ROLE_COUNT]; /* per role, NULL when absent */
} GramLayerW;

/* Per-chunk activations: one block. */
typedef struct GramActs {
    float *x, *y, *q, *k, *v, *att, *av, *d, *o, *f, *g, *u, *h, *xo, *rstd, *kt;
} GramActs;

static int gram_load_layer(GramLayerW *lw, float **cursor, MpModel *m, int layer, int count_only, size_t *total,
                           MpErr *e) {
    for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
        int64_t shp[2];
        if (!mp_model_shape(m, (MpRole)r, layer, shp)) {
            lw->w[r] = NULL;
            continue;
        }
        size_t n = (size_t)shp[0] * (size_t)shp[1];
        if (count_only) {
            *total += n;
            continue;
        }
        lw->w[r] = *cursor;
        if (mp_model_tensor_f32(m, (MpRole)r, layer, *cursor, n, NULL, e) != MP_OK) return MP_ERR;
        *cursor += n;
    }
    return MP_OK;
}

/* In place on x [B*S, H, HS]: per-head RMSNorm with weight w [HS] (qwen3 q_norm/k_norm). */
static void gram_head_norm(float *x, const float *w, size_t rows, int H, int HS, double eps, float *rstd_scratch) {
    for (size_t r = 0; r < rows * (size_t)H; r++) {
        float *v = x + r * HS;
        mp_train_rmsnorm_forward_f32(v, rstd_scratch, v, w, 1, HS, eps);
    }
}

/* In place on x [B, S, H, HS]: rotate-half RoPE on the first R dims with cos/sin [S, R/2]. */
static void gram_rope(float *x, const float *cos_t, const float *sin_t, int B, int S, int H, int HS, int R) {
    int h2 = R / 2;
    for (int bt = 0; bt < B * S; bt++) {
        int t = bt % S;
        for (int hh = 0; hh < H; hh++) {
            float *v = x + ((size_t)bt * H + hh) * HS;
            for (int i = 0; i < h2; i++) {
                float a = v[i], b = v[i + h2], c = cos_t[(size_t)t * h2 + i], s = sin_t[(size_t)t * h2 + i];
                v[i] = a * c - b * s;
                v[i + h2] = b * c + a * s;
            }
        }
    }
}

/* gram[S,S] += M Mᵀ (scaled) for each of B sequences of M [B, S, W]. */
static void gram_acc(double *gram, const float *M, int B, int S, int W, double scale) {
#pragma omp parallel for
    for (int i = 0; i < S; i++)
        for (int b = 0; b < B; b++)
            for (int j = 0; j < S; j++) {
                const float *mi = M + ((size_t)b * S + i) * W, *mj = M + ((size_t)b * S + j) * W;
                double s = 0;
                for (int c = 0; c < W; c++) s += (double)mi[c] * mj[c];
                gram[(size_t)i * S + j] += scale * s;
            }
}

/* scores[S,S] += mean over heads of q kᵀ/√HS (lower triangle), q [B,S,NH*HS], k [B,S,NKV*HS]. */
static void gram_scores(double *sc, const float *q, const float *k, int B, int S, int NH, int NKV, int HS) {
    int rep = NH / NKV;
    double scale = 1.0 / sqrt((double)HS) / NH;
#pragma omp parallel for
    for (int i = 0; i < S; i++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int j = 0; j <= i; j++) {
                    const float *qi = q + ((size_t)b * S + i) * NH * HS + (size_t)h * HS;
                    const float *kj = k + ((size_t)b * S + j) * NKV * HS + (size_t)(h / rep) * HS;
                    double s = 0;
                    for (int c = 0; c < HS; c++) s += (double)qi[c] * kj[c];
                    sc[(size_t)i * S + j] += scale * s;
                }
}

/* q, k, v of layer lw from y [B*S, C]; qwen2 biases, qwen3 norms, RoPE when rope. */
static void gram_qkv(GramActs *a, const GramLayerW *lw, const MpModel *m, int B, int S, int rope, const float *cos_t,
                     const float *sin_t) {
    const int N = B * S, C = m->dim, NH = m->n_heads, NKV = m->n_kv_heads, HS = m->head_dim;
    mp_train_matmul_forward_f32(a->q, a->y, lw->w[MP_ROLE_Q], N, C, NH * HS);
    mp_train_matmul_forward_f32(a->k, a->y, lw->w[MP_ROLE_K], N, C, NKV * HS);
    mp_train_matmul_forward_f32(a->v, a->y, lw->w[MP_ROLE_V], N, C, NKV * HS);
    const MpRole bias[3] = {MP_ROLE_Q_BIAS, MP_ROLE_K_BIAS, MP_ROLE_V_BIAS};
    float *dst[3] = {a->q, a->k, a->v};
    int width[3] = {NH * HS, NKV * HS, NKV * HS};
    for (int t = 0; t < 3; t++)
        if (lw->w[bias[t]])
            for (int n = 0; n < N; n++)
                for (int c = 0; c < width[t]; c++) dst[t][(size_t)n * width[t] + c] += lw->w[bias[t]][c];
    if (lw->w[MP_ROLE_Q_NORM]) gram_head_norm(a->q, lw->w[MP_ROLE_Q_NORM], (size_t)N, NH, HS, m->norm_eps, a->rstd);
    if (lw->w[MP_ROLE_K_NORM]) gram_head_norm(a->k, lw->w[MP_ROLE_K_NORM], (size_t)N, NKV, HS, m->norm_eps, a->rstd);
    if (rope) {
        gram_rope(a->q, cos_t, sin_t, B, S, NH, HS, m->rot_dim);
        gram_rope(a->k, cos_t, sin_t, B, S, NKV, HS, m->rot_dim);
    }
}

/* The weights of layers 0..L-1 as f32, one block (*wblock), carved per role into (*lw)[L]; every
 * layer must have the Llama block's weights. */
static int gram_weights(GramLayerW **lw_out, float **wblock_out, MpModel *m, int L, MpErr *e) {
    GramLayerW *lw = mp_try_calloc((size_t)L, sizeof *lw);
    if (!lw) return mp_err_set(e, "out of memory");
    size_t wtotal = 0;
    for (int j = 0; j < L; j++) gram_load_layer(&lw[j], NULL, m, j, 1, &wtotal, e);
    float *wblock = mp_try_malloc((wtotal + 1) * sizeof(float));
    if (!wblock) {
        free(lw);
        return mp_err_set(e, "out of memory for %zu weights", wtotal);
    }
    float *cur = wblock;
    for (int j = 0; j < L; j++)
        if (gram_load_layer(&lw[j], &cur, m, j, 0, NULL, e) != MP_OK) {
            free(wblock);
            free(lw);
            return MP_ERR;
        }
    for (int j = 0; j < L; j++)
        if (!lw[j].w[MP_ROLE_Q] || !lw[j].w[MP_ROLE_K] || !lw[j].w[MP_ROLE_V] || !lw[j].w[MP_ROLE_O] ||
            !lw[j].w[MP_ROLE_GATE] || !lw[j].w[MP_ROLE_UP] || !lw[j].w[MP_ROLE_DOWN] || !lw[j].w[MP_ROLE_ATTN_NORM] ||
            !lw[j].w[MP_ROLE_FFN_NORM]) {
            free(wblock);
            free(lw);
            return mp_err_set(e, "%s: layer %d lacks a weight of the Llama block", m->path, j);
        }
    *lw_out = lw;
    *wblock_out = wblock;
    return MP_OK;
}

int mp_train_gram_run(MpTrainGram *out, MpModel *m, const int32_t *tokens, int N, int S, int layer,
                      const int *rope_layers, MpProgressFn progress, void *pctx, MpErr *e) {
    memset(out, 0, sizeof *out);
    if (layer < 0 || layer + 1 >= m->n_layers)
        return mp_err_set(e, "--layer %d: the model has %d layers (need l and l+1)", layer + 1, m->n_layers);
    if (S < 1 || N < 1) return mp_err_set(e, "need at least one sequence of one token");
    if (m->sliding_window > 0 && S > m->sliding_window)
        return mp_err_set(e, "--seq %d exceeds the model's sliding window %d", S, m->sliding_window);
    if (m->rot_dim > m->head_dim || m->rot_dim % 2) return mp_err_set(e, "rotary dims %d do not fit head_dim %d", m->rot_dim, m->head_dim);
    for (size_t i = 0; i < (size_t)N * S; i++)
        if (tokens[i] < 0 || tokens[i] >= m->vocab) return mp_err_set(e, "token id %d outside the vocabulary %d", tokens[i], m->vocab);
    const int L = layer + 2, C = m->dim, NH = m->n_heads, NKV = m->n_kv_heads, HS = m->head_dim, FF = m->ffn;
    GramLayerW *lw = NULL;
    float *wblock = NULL;
    if (gram_weights(&lw, &wblock, m, L, e) != MP_OK) return MP_ERR;
    /* activations for a chunk of B sequences: one block */
    const int B = N < 32 ? N : 32;
    size_t BS = (size_t)B * S;
    size_t sz[16] = {BS * C, BS * C, BS * NH * HS, BS * NKV * HS, BS * NKV * HS, (size_t)B * NH * S * S, BS * NH * HS,
                     BS * C, BS * C, BS * C, BS * FF, BS * FF, BS * FF, BS * C, BS, BS * NH * HS};
    size_t atotal = 0;
    for (int i = 0; i < 16; i++) atotal += sz[i];
    size_t h2 = (size_t)(m->rot_dim > 0 ? m->rot_dim / 2 : 1);
    float *ablock = mp_try_malloc((atotal + 2 * (size_t)S * h2) * sizeof(float));
    out->sum = mp_try_calloc((size_t)MP_GRAM_NMATS * S * S, sizeof(double));
    if (!ablock || !out->sum) {
        free(ablock);
        free(wblock);
        free(lw);
        mp_train_gram_free(out);
        return mp_err_set(e, "out of memory for activations (%zu floats)", atotal);
    }
    GramActs a;
    float **fp[16] = {&a.x, &a.y, &a.q, &a.k, &a.v, &a.att, &a.av, &a.d, &a.o, &a.f, &a.g, &a.u, &a.h, &a.xo, &a.rstd, &a.kt};
    float *p = ablock;
    for (int i = 0; i < 16; i++) {
        *fp[i] = p;
        p += sz[i];
    }
    float *cos_t = p, *sin_t = p + (size_t)S * h2;
    const float *inv = (m->inv_freq_long && m->rope_orig_ctx > 0 && S > m->rope_orig_ctx) ? m->inv_freq_long : m->inv_freq;
    double af = m->rope_attn_factor > 0 ? m->rope_attn_factor : 1.0;
    for (int t = 0; t < S; t++)
        for (size_t i = 0; i < h2 && m->rot_dim > 0; i++) {
            double ang = (double)((float)t * inv[i]); /* f32 angle, as HF computes it */
            cos_t[(size_t)t * h2 + i] = (float)(cos(ang) * af);
            sin_t[(size_t)t * h2 + i] = (float)(sin(ang) * af);
        }
    out->S = S;
    out->N = N;
    out->layer = layer;
    double *G = out->sum;
    const size_t SS = (size_t)S * S;
    int rc = MP_OK;
    if (progress && progress(pctx, 0, N)) rc = mp_err_set(e, MP_JOB_STOPPED_MSG);
    for (int n0 = 0; n0 < N && rc == MP_OK; n0 += B) {
        int b = N - n0 < B ? N - n0 : B;
        int bs = b * S;
        for (int r = 0; r < bs && rc == MP_OK; r++)
            rc = mp_model_rows_f32(m, MP_ROLE_TOK_EMBD, 0, tokens[(size_t)n0 * S + r], 1, a.x + (size_t)r * C, e);
        if (rc != MP_OK) break;
        for (int j = 0; j <= layer + 1; j++) {
            const GramLayerW *w = &lw[j];
            int rope = rope_layers[j] && m->rot_dim > 0;
            mp_train_rmsnorm_forward_f32(a.y, a.rstd, a.x, w->w[MP_ROLE_ATTN_NORM], bs, C, m->norm_eps);
            gram_qkv(&a, w, m, b, S, rope, cos_t, sin_t);
            if (j == layer) {
                gram_acc(G + 0 * SS, a.y, b, S, C, 1.0);
                gram_scores(G + 1 * SS, a.q, a.k, b, S, NH, NKV, HS);
            }
            if (j == layer + 1) {
                gram_acc(G + 7 * SS, a.y, b, S, C, 1.0);
                gram_scores(G + 8 * SS, a.q, a.k, b, S, NH, NKV, HS);
                break;
            }
            mp_train_attention_forward_f32(a.av, a.att, a.kt, a.q, a.k, a.v, b, S, NH, NKV, HS);
            mp_train_matmul_forward_f32(a.d, a.av, w->w[MP_ROLE_O], bs, NH * HS, C);
            for (size_t i = 0; i < (size_t)bs * C; i++) a.o[i] = a.d[i] + a.x[i];
            mp_train_rmsnorm_forward_f32(a.f, a.rstd, a.o, w->w[MP_ROLE_FFN_NORM], bs, C, m->norm_eps);
            mp_train_matmul_forward_f32(a.g, a.f, w->w[MP_ROLE_GATE], bs, C, FF);
            mp_train_matmul_forward_f32(a.u, a.f, w->w[MP_ROLE_UP], bs, C, FF);
            mp_train_swiglu_forward_f32(a.h, a.g, a.u, (size_t)bs * FF);
            mp_train_matmul_forward_f32(a.xo, a.h, w->w[MP_ROLE_DOWN], bs, FF, C);
            for (size_t i = 0; i < (size_t)bs * C; i++) a.xo[i] += a.o[i];
            if (j == layer) {
                gram_acc(G + 2 * SS, a.av, b, S, NH * HS, 1.0 / NH); /* mean of the per-head Grams */
                gram_acc(G + 3 * SS, a.d, b, S, C, 1.0);
                gram_acc(G + 4 * SS, a.o, b, S, C, 1.0);
                gram_acc(G + 5 * SS, a.f, b, S, C, 1.0);
                gram_acc(G + 6 * SS, a.xo, b, S, C, 1.0);
            }
            memcpy(a.x, a.xo, (size_t)bs * C * sizeof(float));
        }
        if (progress && progress(pctx, n0 + b, N)) rc = mp_err_set(e, MP_JOB_STOPPED_MSG);
    }
    free(ablock);
    free(wblock);
    free(lw);
    if (rc != MP_OK) {
        mp_train_gram_free(out);
        return MP_ERR;
    }
    /* sums → means; scores NaN above the diagonal */
    for (int k = 0; k < MP_GRAM_NMATS; k++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                double *v = &G[(size_t)k * SS + (size_t)i * S + j];
                *v = ((k == 1 || k == 8) && j > i) ? NAN : *v / N;
            }
    return MP_OK;
}

void mp_train_gram_free(MpTrainGram *g) {
    free(g->sum);
    memset(g, 0, sizeof *g);
}

const char *mp_train_gram_name(int k) {
    static const char *names[MP_GRAM_NMATS] = {"a_YYt",     "b_QKt",   "c_AV_AVt",  "d_AVWo_AVWot", "e_OOt",
                                               "f_normO_normOt", "g_XpXpt", "h_next_YYt", "i_next_QKt"};
    return k >= 0 && k < MP_GRAM_NMATS ? names[k] : "?";
}

const char *mp_train_gram_title(int k) {
    static const char *titles[MP_GRAM_NMATS] = {
        "(a) YY^T, Y = RMSNorm(X)", "(b) QK^T / sqrt(d)", "(c) (AV)(AV)^T", "(d) (AVW_O)(AVW_O)^T",
        "(e) OO^T, O = AVW_O + X", "(f) RMSNorm(O) RMSNorm(O)^T", "(g) X'X'^T, X' = FFN + O",
        "(h) next layer YY^T", "(i) next layer QK^T / sqrt(d)"};
    return k >= 0 && k < MP_GRAM_NMATS ? titles[k] : "?";
}
