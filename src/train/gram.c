/* gram.c — the nine Gram matrices of paper.md §2.2 (Figure 3) for layer l → l+1 of any
 * Llama-architecture checkpoint opened by the project's loader; see gram.h.
 *
 * Implements: the matrices, summed over sequences in double, from the capture points of the
 *   model's forward pass (model/fwd.h, MpFwdPoint) over layers 0..l+1, run in its plain compute
 *   mode (MP_FWD_COMPUTE_F32_PLAIN: the arithmetic of the training model's kernels, which gram's
 *   own forward pass used until it was replaced by these capture points; the same bits):
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
 * Does not: run a forward pass of its own, tokenise (the caller passes token ids), or plot.
 * Tested by: tests/test_gram.c against tests/ref/gram_ref.py (torch, from the spec).
 *
 * Shape legend: N sequences, S positions, C width, NH/NKV heads, HS head size, FF MLP width,
 * R rotary dims.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"    /* MpErr, mp_try_calloc */
#include "load/model.h"  /* MpModel, mp_model_shape */
#include "model/fwd.h"   /* MpFwd, its capture points and plain compute mode */
#include "train/gram.h"  /* MpTrainGram */

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

/* What the capture callback needs: the sums and the layer pair. */
typedef struct GramCap {
    double *G;      /* [9, S, S] sums, borrowed from MpTrainGram */
    int layer;      /* l (0-based); l + 1 is the next layer */
    int NH, NKV, HS;
    const float *q; /* [S, NH*HS] the layer's captured queries (valid until its keys are captured) */
} GramCap;

/* One capture point of one layer of one sequence (x [T, width]): into the sums of its matrix. */
static void gram_capture(void *ctx, int layer, int point, const float *x, int T, int width) {
    GramCap *g = ctx;
    const size_t SS = (size_t)T * T;
    const int base = layer == g->layer ? 0 : layer == g->layer + 1 ? 7 : -1; /* (a), or (h) */
    if (base < 0) return;
    if (point == MP_FWD_AT_ATTN_IN) gram_acc(g->G + (size_t)base * SS, x, 1, T, width, 1.0);
    else if (point == MP_FWD_AT_Q) g->q = x;
    else if (point == MP_FWD_AT_K) gram_scores(g->G + (size_t)(base + 1) * SS, g->q, x, 1, T, g->NH, g->NKV, g->HS);
    else if (base == 0 && point == MP_FWD_AT_ATTN_MIX) gram_acc(g->G + 2 * SS, x, 1, T, width, 1.0 / g->NH); /* mean of the per-head Grams */
    else if (base == 0 && point >= MP_FWD_AT_ATTN_OUT && point <= MP_FWD_AT_LAYER_OUT)
        gram_acc(g->G + (size_t)(3 + point - MP_FWD_AT_ATTN_OUT) * SS, x, 1, T, width, 1.0); /* (d) (e) (f) (g) */
}

/* Every layer of [0, L) must have the weights of the Llama block (the matrices are defined on it). */
static int gram_check_block(const MpModel *m, int L, MpErr *e) {
    static const MpRole need[] = {MP_ROLE_Q,  MP_ROLE_K,    MP_ROLE_V,         MP_ROLE_O,        MP_ROLE_GATE,
                                  MP_ROLE_UP, MP_ROLE_DOWN, MP_ROLE_ATTN_NORM, MP_ROLE_FFN_NORM};
    int64_t shp[2];
    for (int j = 0; j < L; j++)
        for (size_t r = 0; r < sizeof need / sizeof need[0]; r++)
            if (!mp_model_shape(m, need[r], j, shp)) return mp_err_set(e, "%s: layer %d lacks a weight of the Llama block", m->path, j);
    return MP_OK;
}

/* The checks of a run before any memory is taken. */
static int gram_check(const MpModel *m, const int32_t *tokens, int N, int S, int layer, MpErr *e) {
    if (layer < 0 || layer + 1 >= m->n_layers)
        return mp_err_set(e, "--layer %d: the model has %d layers (need l and l+1)", layer + 1, m->n_layers);
    if (S < 1 || N < 1) return mp_err_set(e, "need at least one sequence of one token");
    if (m->sliding_window > 0 && S > m->sliding_window)
        return mp_err_set(e, "--seq %d exceeds the model's sliding window %d", S, m->sliding_window);
    if (m->rot_dim > m->head_dim || m->rot_dim % 2) return mp_err_set(e, "rotary dims %d do not fit head_dim %d", m->rot_dim, m->head_dim);
    for (size_t i = 0; i < (size_t)N * S; i++)
        if (tokens[i] < 0 || tokens[i] >= m->vocab) return mp_err_set(e, "token id %d outside the vocabulary %d", tokens[i], m->vocab);
    return gram_check_block(m, layer + 2, e);
}

int mp_train_gram_run(MpTrainGram *out, MpModel *m, const int32_t *tokens, int N, int S, int layer, int rope,
                      MpProgressFn progress, void *pctx, MpErr *e) {
    memset(out, 0, sizeof *out);
    if (gram_check(m, tokens, N, S, layer, e) != MP_OK) return MP_ERR;
    const MpFwdConfig fc = {.n_layers = layer + 2, .max_seq = S, .causal = 1, .rope = rope, .compute = MP_FWD_COMPUTE_F32_PLAIN};
    MpFwd f;
    memset(&f, 0, sizeof f);
    out->sum = mp_try_calloc((size_t)MP_GRAM_NMATS * S * S, sizeof(double));
    if (!out->sum) return mp_err_set(e, "out of memory for the sums (%d positions)", S);
    if (mp_fwd_init(&f, m, &fc, e) != MP_OK) {
        mp_train_gram_free(out);
        return MP_ERR;
    }
    GramCap g = {.G = out->sum, .layer = layer, .NH = m->n_heads, .NKV = m->n_kv_heads, .HS = m->head_dim};
    f.capture = gram_capture;
    f.capture_ctx = &g;
    out->S = S, out->N = N, out->layer = layer;
    int rc = MP_OK;
    if (progress && progress(pctx, 0, N)) rc = mp_err_set(e, MP_JOB_STOPPED_MSG);
    for (int n = 0; n < N && rc == MP_OK; n++) {
        rc = mp_fwd_run(&f, tokens + (size_t)n * S, S, NULL, NULL, e);
        if (rc == MP_OK && progress && ((n + 1) % 32 == 0 || n + 1 == N) && progress(pctx, n + 1, N))
            rc = mp_err_set(e, MP_JOB_STOPPED_MSG);
    }
    mp_fwd_free(&f);
    if (rc != MP_OK) {
        mp_train_gram_free(out);
        return MP_ERR;
    }
    /* sums → means; scores NaN above the diagonal */
    const size_t SS = (size_t)S * S;
    for (int k = 0; k < MP_GRAM_NMATS; k++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                double *v = &out->sum[(size_t)k * SS + (size_t)i * S + j];
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
