/* fwd_check.c — see fwd_check.h. Sections: the pass over floats, the scores, the layer's
 * diagnosis. */
#include "model/fwd_check.h"

#include <float.h>
#include <string.h>

#define CHK_NONFINITE MP_FWD_CHECK_NONFINITE

/* ================================================================ the pass over floats */

uint32_t mp_fwd_check_amax_bits(const float *x, size_t n) {
    uint32_t m = 0;
#pragma omp simd reduction(max : m)
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m;
}

static float chk_bits_float(uint32_t u) {
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* First row in [t0, T) of x [T, width] holding a non-finite value; -1 when none. */
static int chk_first_row(const float *x, int64_t width, int t0, int T) {
    for (int t = t0; t < T; t++)
        if (mp_fwd_check_amax_bits(x + (size_t)t * (size_t)width, (size_t)width) >= CHK_NONFINITE) return t;
    return -1;
}

/* ================================================================ the scores */

void mp_fwd_check_scores_plan(MpFwdCheck *c, uint32_t qbits, uint32_t kbits, int HS, float scale, int cached) {
    const float qm = chk_bits_float(qbits), km = chk_bits_float(kbits);
    const double bound = (double)qm * (double)km * HS * (scale > 1 ? scale : 1.0); /* NaN or Inf: fails */
    c->scores = cached || !(bound < FLT_MAX / 2);
    c->row = c->head = -1;
    c->qmax = qm;
    c->kmax = km;
}

void mp_fwd_check_scores_rows(MpFwdCheck *c, const float *sh, int ldt, int T, int causal, int h, int i0, int i1) {
    for (int i = i0; i < i1; i++) {
        const int n = causal ? i + 1 : T;
        if (mp_fwd_check_amax_bits(sh + (size_t)i * ldt, (size_t)n) < CHK_NONFINITE) continue;
#pragma omp critical(mp_fwd_check)
        if (c->row < 0 || i < c->row || (i == c->row && h < c->head)) { /* the first, whatever the threads */
            c->row = i;
            c->head = h;
        }
        return;
    }
}

/* ================================================================ the layer's diagnosis */

/* One buffer of the layer that may hold the first non-finite value, in data-flow order. */
typedef struct ChkBuf {
    const float *x; /* [T, width] */
    int64_t width;
    const char *what;
} ChkBuf;

/* First row in [t0, T) where some head's probabilities (visible part) hold NaN; -1 when none. */
static int chk_probs_row(const MpFwdCheckBufs *b, int t0, int T) {
    for (int t = t0; t < T; t++)
        for (int h = 0; h < b->NH; h++)
            if (mp_fwd_check_amax_bits(b->probs + ((size_t)h * b->ldt + t) * b->ldt, (size_t)(b->causal ? t + 1 : T)) >= CHK_NONFINITE)
                return t;
    return -1;
}

static int chk_fail(const MpFwdCheckBufs *b, int t, const char *what, MpErr *e) {
    return mp_err_set(e, "%s: layer %d of %d, position %d: NaN or ±Inf in %s (finite weights, but too large for f32 "
                         "arithmetic); HINT: check the checkpoint's weights, e.g. maskpos inspect",
                      b->path, b->layer + 1, b->n_layers, t, what);
}

/* The first of bufs[0, n) holding a non-finite value in rows [t0, T): MP_ERR naming it; MP_OK when none. */
static int chk_bufs(const MpFwdCheckBufs *b, const ChkBuf *bufs, size_t n, int t0, int T, MpErr *e) {
    for (size_t i = 0; i < n; i++) {
        const int t = bufs[i].x ? chk_first_row(bufs[i].x, bufs[i].width, t0, T) : -1;
        if (t >= 0) return chk_fail(b, t, bufs[i].what, e);
    }
    return MP_OK;
}

int mp_fwd_check_layer(const MpFwdCheck *c, const MpFwdCheckBufs *b, int t0, int T, int scores_only, MpErr *e) {
    const ChkBuf qkv[] = {{b->q, b->ldq, "the queries (q_proj)"}, {b->k, b->ldk, "the keys (k_proj)"}, {b->v, b->ldk, "the values (v_proj)"}};
    if (c->row >= 0) {
        if (chk_bufs(b, qkv, 2, t0, T, e) != MP_OK) return MP_ERR;
        return mp_err_set(e, "%s: layer %d of %d, position %d: the attention scores q·k of head %d overflowed to NaN or "
                             "±Inf (max |q| %.3g, max |k| %.3g: finite weights, but too large for f32 arithmetic); HINT: "
                             "check the checkpoint's weights, e.g. maskpos inspect",
                          b->path, b->layer + 1, b->n_layers, c->row, c->head, (double)c->qmax, (double)c->kmax);
    }
    if (scores_only || chk_first_row(b->x, b->C, t0, T) < 0) return MP_OK; /* scores_only: x is not made */
    if (chk_bufs(b, qkv, 3, t0, T, e) != MP_OK) return MP_ERR;
    const int t = chk_probs_row(b, t0, T);
    if (t >= 0) return chk_fail(b, t, "the attention probabilities (softmax of q·k)", e);
    const ChkBuf post[] = {{b->ao, b->ldq, "the attention's mix of values"},
                           {b->up, b->FF, b->gelu ? "the MLP's up_proj and GELU" : "the MLP's up_proj"},
                           {b->gate, b->FF, "the MLP's gate_proj and activation"},
                           {b->x, b->C, "the layer output (o_proj, down_proj or the residual stream)"}};
    return chk_bufs(b, post, sizeof post / sizeof post[0], t0, T, e);
}

int mp_fwd_check_logits(const float *logits, int V, int t0, int T, const char *path, MpErr *e) {
    const int t = chk_first_row(logits, V, t0, T);
    if (t < 0) return MP_OK;
    return mp_err_set(e, "%s: position %d: NaN or ±Inf in the logits (final norm and lm_head) (finite weights, but too "
                         "large for f32 arithmetic); HINT: check the checkpoint's weights, e.g. maskpos inspect",
                      path, t);
}
