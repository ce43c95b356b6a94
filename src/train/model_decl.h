/* model_decl.h — declarations of the trainable model for one precision (no include guard: it is
 * included twice by train.h, with MP_TRAIN_REAL = float / suffix _f32 and double / _f64).
 *
 * Implements: nothing; src/train/model_impl.h holds the code. All kernels accumulate into their
 * gradient outputs (+=), so the caller zeroes them; arguments are outputs, inputs, weights, sizes.
 * Shape legend (as train.h): B, T, C, NH, NKV, HS, FF, V, L, N = B*T.
 */
#ifndef MP_TRAIN_REAL
#error "include train/train.h, not this file"
#endif

#define MP_TRAIN_CAT_(a, b) a##b
#define MP_TRAIN_CAT(a, b) MP_TRAIN_CAT_(a, b)
#define MP_TRAIN_FN(name) MP_TRAIN_CAT(name, MP_TRAIN_SUF)

/* Model state of one precision: one block for parameters + gradients, one for activations, one
 * for backward scratch. */
typedef struct MP_TRAIN_FN(MpTrainModel) {
    MpTrainConfig cfg;
    MpTrainLayout lay;
    MP_TRAIN_REAL *params;   /* [lay.total] */
    MP_TRAIN_REAL *grads;    /* [lay.total] */
    MP_TRAIN_REAL *rope_cos; /* [T, HS/2] */
    MP_TRAIN_REAL *rope_sin; /* [T, HS/2] */
    /* activations kept for the backward pass (one block) */
    MP_TRAIN_REAL *acts;
    MP_TRAIN_REAL *resid;    /* [L+1, B, T, C]  resid[l] = input of layer l, resid[L] = last output */
    MP_TRAIN_REAL *ln1;      /* [L, B, T, C] */
    MP_TRAIN_REAL *rstd1;    /* [L, B, T] */
    MP_TRAIN_REAL *q;        /* [L, B, T, NH*HS]  after RoPE */
    MP_TRAIN_REAL *k;        /* [L, B, T, NKV*HS] after RoPE */
    MP_TRAIN_REAL *v;        /* [L, B, T, NKV*HS] */
    MP_TRAIN_REAL *att;      /* [L, B, NH, T, T]  softmax probabilities, exact 0 above the diagonal */
    MP_TRAIN_REAL *atty;     /* [L, B, T, NH*HS]  attention output before o_proj */
    MP_TRAIN_REAL *resid2;   /* [L, B, T, C]     after the attention residual */
    MP_TRAIN_REAL *ln2;      /* [L, B, T, C] */
    MP_TRAIN_REAL *rstd2;    /* [L, B, T] */
    MP_TRAIN_REAL *gate;     /* [L, B, T, FF]    gate_proj output (before SiLU) */
    MP_TRAIN_REAL *up;       /* [L, B, T, FF] */
    MP_TRAIN_REAL *hmid;     /* [L, B, T, FF]    silu(gate) * up */
    MP_TRAIN_REAL *lnf;      /* [B, T, C] */
    MP_TRAIN_REAL *rstdf;    /* [B, T] */
    MP_TRAIN_REAL *probs;    /* [B, T, V]        softmax of the logits */
    MP_TRAIN_REAL *losses;   /* [B, T] */
    /* backward scratch (one block) */
    MP_TRAIN_REAL *scratch;
    MP_TRAIN_REAL *dres;     /* [B, T, C] */
    MP_TRAIN_REAL *dln;      /* [B, T, C] */
    MP_TRAIN_REAL *dq;       /* [B, T, NH*HS] */
    MP_TRAIN_REAL *dk;       /* [B, T, NKV*HS] */
    MP_TRAIN_REAL *dv;       /* [B, T, NKV*HS] */
    MP_TRAIN_REAL *datty;    /* [B, T, NH*HS] */
    MP_TRAIN_REAL *dpre;     /* [B, NH, T, T] */
    MP_TRAIN_REAL *dh;       /* [B, T, FF] */
    MP_TRAIN_REAL *dgate;    /* [B, T, FF] */
    MP_TRAIN_REAL *dup;      /* [B, T, FF] */
    MP_TRAIN_REAL *dlogits;  /* [B, T, V] */
    MP_TRAIN_REAL *wt;       /* [max OC*IC] a weight transposed for the forward matmul */
    MP_TRAIN_REAL *attnt;    /* [B, NH, HS, T] k (forward) or v (backward) transposed per head */
    const int32_t *targets;  /* [B, T] borrowed from the last forward with targets */
    double loss;             /* mean loss of the last forward (NaN when no targets) */
} MP_TRAIN_FN(MpTrainModel);

/* Allocates everything for cfg (checked by mp_train_config_check) and zeroes the parameters. */
int MP_TRAIN_FN(mp_train_model_init)(MP_TRAIN_FN(MpTrainModel) *m, const MpTrainConfig *cfg, MpErr *e);
void MP_TRAIN_FN(mp_train_model_free)(MP_TRAIN_FN(MpTrainModel) *m); /* accepts a zeroed struct */
/* Forward over inputs [B, T]; with targets [B, T] also the mean cross-entropy (returned; NaN
 * without). Keeps every activation; probs holds the softmax of the logits. */
double MP_TRAIN_FN(mp_train_forward)(MP_TRAIN_FN(MpTrainModel) *m, const int32_t *inputs, const int32_t *targets);
/* Gradients of the mean loss of the last forward (which must have had targets) into m->grads
 * (overwritten). */
void MP_TRAIN_FN(mp_train_backward)(MP_TRAIN_FN(MpTrainModel) *m, const int32_t *inputs);

/* ---- ops: forward/backward pairs (exported for the finite-difference tests) ---- */
/* out [N, C] = wte[ids[n]] ; wte [V, C] */
void MP_TRAIN_FN(mp_train_embed_forward)(MP_TRAIN_REAL *out, const int32_t *ids, const MP_TRAIN_REAL *wte, int N, int C);
void MP_TRAIN_FN(mp_train_embed_backward)(MP_TRAIN_REAL *dwte, const MP_TRAIN_REAL *dout, const int32_t *ids, int N, int C);
/* out [N, C] = inp * rstd * w ; rstd [N] = 1/sqrt(mean(inp^2) + eps) */
void MP_TRAIN_FN(mp_train_rmsnorm_forward)(MP_TRAIN_REAL *out, MP_TRAIN_REAL *rstd, const MP_TRAIN_REAL *inp,
                                           const MP_TRAIN_REAL *w, int N, int C, double eps);
void MP_TRAIN_FN(mp_train_rmsnorm_backward)(MP_TRAIN_REAL *dinp, MP_TRAIN_REAL *dw, const MP_TRAIN_REAL *dout,
                                            const MP_TRAIN_REAL *inp, const MP_TRAIN_REAL *w,
                                            const MP_TRAIN_REAL *rstd, int N, int C);
/* out [N, OC] = inp [N, IC] @ w^T ; w [OC, IC] (HF Linear, no bias) */
void MP_TRAIN_FN(mp_train_matmul_forward)(MP_TRAIN_REAL *out, const MP_TRAIN_REAL *inp, const MP_TRAIN_REAL *w,
                                          int N, int IC, int OC);
void MP_TRAIN_FN(mp_train_matmul_backward)(MP_TRAIN_REAL *dinp, MP_TRAIN_REAL *dw, const MP_TRAIN_REAL *dout,
                                           const MP_TRAIN_REAL *inp, const MP_TRAIN_REAL *w, int N, int IC, int OC);
/* The same with wt [IC, OC] = w^T: register-blocked, bit-identical to matmul_forward. */
void MP_TRAIN_FN(mp_train_matmul_forward_wt)(MP_TRAIN_REAL *out, const MP_TRAIN_REAL *inp, const MP_TRAIN_REAL *wt,
                                             int N, int IC, int OC);
/* dst [cols, rows] = src [rows, cols]^T */
void MP_TRAIN_FN(mp_train_transpose)(MP_TRAIN_REAL *dst, const MP_TRAIN_REAL *src, int rows, int cols);
/* In place on x [B, T, H, HS]: HF rotate-half RoPE with cos/sin [T, HS/2]; backward rotates the
 * gradient by the transposed rotation. */
void MP_TRAIN_FN(mp_train_rope_forward)(MP_TRAIN_REAL *x, const MP_TRAIN_REAL *cos_t, const MP_TRAIN_REAL *sin_t,
                                        int B, int T, int H, int HS);
void MP_TRAIN_FN(mp_train_rope_backward)(MP_TRAIN_REAL *dx, const MP_TRAIN_REAL *cos_t,
                                         const MP_TRAIN_REAL *sin_t, int B, int T, int H, int HS);
/* Causal GQA attention: out [B, T, NH*HS], att [B, NH, T, T] (probabilities, 0 above the
 * diagonal) from q [B, T, NH*HS], k, v [B, T, NKV*HS]; scores scaled by 1/sqrt(HS); query head h
 * uses kv head h / (NH/NKV). scratch [B, NH, HS, T] holds k (forward) or v (backward) transposed;
 * backward also uses dpre [B, NH, T, T]. */
void MP_TRAIN_FN(mp_train_attention_forward)(MP_TRAIN_REAL *out, MP_TRAIN_REAL *att, MP_TRAIN_REAL *scratch,
                                             const MP_TRAIN_REAL *q,
                                             const MP_TRAIN_REAL *k, const MP_TRAIN_REAL *v, int B, int T, int NH,
                                             int NKV, int HS);
void MP_TRAIN_FN(mp_train_attention_backward)(MP_TRAIN_REAL *dq, MP_TRAIN_REAL *dk, MP_TRAIN_REAL *dv,
                                              MP_TRAIN_REAL *dpre, MP_TRAIN_REAL *scratch, const MP_TRAIN_REAL *dout,
                                              const MP_TRAIN_REAL *att, const MP_TRAIN_REAL *q,
                                              const MP_TRAIN_REAL *k, const MP_TRAIN_REAL *v, int B, int T,
                                              int NH, int NKV, int HS);
/* out [n] = silu(gate) * up */
void MP_TRAIN_FN(mp_train_swiglu_forward)(MP_TRAIN_REAL *out, const MP_TRAIN_REAL *gate, const MP_TRAIN_REAL *up,
                                          size_t n);
void MP_TRAIN_FN(mp_train_swiglu_backward)(MP_TRAIN_REAL *dgate, MP_TRAIN_REAL *dup, const MP_TRAIN_REAL *dout,
                                           const MP_TRAIN_REAL *gate, const MP_TRAIN_REAL *up, size_t n);
/* probs [N, V] = softmax(logits) (may alias logits), losses [N] = -log probs[target]. */
void MP_TRAIN_FN(mp_train_crossentropy_forward)(MP_TRAIN_REAL *probs, MP_TRAIN_REAL *losses,
                                                const MP_TRAIN_REAL *logits, const int32_t *targets, int N, int V);
/* dlogits [N, V] += scale * (probs - onehot(target)) : the gradient of scale * sum(losses). */
void MP_TRAIN_FN(mp_train_crossentropy_backward)(MP_TRAIN_REAL *dlogits, const MP_TRAIN_REAL *probs,
                                                 const int32_t *targets, double scale, int N, int V);
/* cos/sin tables [T, HS/2] for theta (inv_freq = theta^(-2i/HS), HF default RoPE). */
void MP_TRAIN_FN(mp_train_rope_table)(MP_TRAIN_REAL *cos_t, MP_TRAIN_REAL *sin_t, int T, int HS, double theta);

#undef MP_TRAIN_FN
#undef MP_TRAIN_CAT
#undef MP_TRAIN_CAT_
