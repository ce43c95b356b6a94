/* model_impl.h — the trainable Llama decoder, written once for a real type R (no include guard:
 * model_f32.c includes it with R = float, model_f64.c with R = double).
 *
 * Implements: the op kernels (forward and backward, naive reference loops with OpenMP on the
 * outer loop only; each output element is summed by one thread in a fixed order, so results do
 * not depend on the thread count) and the model forward/backward declared in model_decl.h.
 * Does not: optimise (no blocking beyond a four-row inner kernel in matmul_forward, no
 * intrinsics), or allocate anything after mp_train_model_init.
 * Tested by: tests/test_train.c (finite differences in double on the _f64 instance, torch one-step
 * reference on the _f32 instance).
 *
 * Shape legend: B, T, C, NH, NKV, HS, FF, V, L, N = B*T (train.h).
 */
#ifndef MP_TRAIN_REAL
#error "define MP_TRAIN_REAL and MP_TRAIN_SUF before including model_impl.h"
#endif

#define R MP_TRAIN_REAL
#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define FN(name) CAT(name, MP_TRAIN_SUF)
#define Model FN(MpTrainModel)

/* Hot kernels are compiled for AVX-512, AVX2 and baseline x86-64 (GCC function clones). */
#ifndef MP_TRAIN_CLONES
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(MP_NO_CLONES)
#define MP_TRAIN_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define MP_TRAIN_CLONES
#endif
#endif

/* ===================================== embedding ========================================= */

void FN(mp_train_embed_forward)(R *out, const int32_t *ids, const R *wte, int N, int C) {
#pragma omp parallel for if ((size_t)N * C > 32768)
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * C, wte + (size_t)ids[n] * C, (size_t)C * sizeof(R));
}

/* Serial over rows: several rows may hit the same token, and the order of their sums is fixed. */
void FN(mp_train_embed_backward)(R *dwte, const R *dout, const int32_t *ids, int N, int C) {
    for (int n = 0; n < N; n++) {
        R *d = dwte + (size_t)ids[n] * C;
        const R *g = dout + (size_t)n * C;
        for (int c = 0; c < C; c++) d[c] += g[c];
    }
}

/* ======================================= RMSNorm ========================================= */

void FN(mp_train_rmsnorm_forward)(R *out, R *rstd, const R *inp, const R *w, int N, int C, double eps) {
#pragma omp parallel for if ((size_t)N * C > 32768)
    for (int n = 0; n < N; n++) {
        const R *x = inp + (size_t)n * C;
        R *o = out + (size_t)n * C;
        R ss = 0;
        for (int c = 0; c < C; c++) ss += x[c] * x[c];
        R s = (R)(1.0 / sqrt((double)(ss / (R)C) + eps));
        rstd[n] = s;
        for (int c = 0; c < C; c++) o[c] = x[c] * s * w[c];
    }
}

/* y_c = w_c x_c s, s = (mean x^2 + eps)^-1/2:
 *   dx_c = s (w_c dy_c) - s^3 x_c / C * sum_j (w_j dy_j x_j),   dw_c = sum_n dy_c x_c s. */
void FN(mp_train_rmsnorm_backward)(R *dinp, R *dw, const R *dout, const R *inp, const R *w, const R *rstd, int N,
                                   int C) {
#pragma omp parallel for if ((size_t)N * C > 32768)
    for (int n = 0; n < N; n++) {
        const R *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        R *dx = dinp + (size_t)n * C;
        R s = rstd[n], dot = 0;
        for (int c = 0; c < C; c++) dot += w[c] * dy[c] * x[c];
        R k = s * s * s * dot / (R)C;
        for (int c = 0; c < C; c++) dx[c] += s * w[c] * dy[c] - k * x[c];
    }
    /* dw: one thread per channel block would stride; rows are summed serially in row order. */
    for (int n = 0; n < N; n++) {
        const R *x = inp + (size_t)n * C, *dy = dout + (size_t)n * C;
        R s = rstd[n];
        for (int c = 0; c < C; c++) dw[c] += dy[c] * x[c] * s;
    }
}

/* ======================================== matmul ========================================= */

void FN(mp_train_matmul_forward)(R *out, const R *inp, const R *w, int N, int IC, int OC) {
    /* four rows of inp share each pass over a weight row; every dot is summed in index order */
    int nb = (N + 3) / 4;
#pragma omp parallel for if ((size_t)N * IC * OC > 100000)
    for (int b = 0; b < nb; b++) {
        int n0 = b * 4, rows = N - n0 < 4 ? N - n0 : 4;
        if (rows == 4) {
            const R *x0 = inp + (size_t)n0 * IC, *x1 = x0 + IC, *x2 = x1 + IC, *x3 = x2 + IC;
            for (int o = 0; o < OC; o++) {
                const R *wr = w + (size_t)o * IC;
                R s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                for (int i = 0; i < IC; i++) {
                    R wi = wr[i];
                    s0 += x0[i] * wi;
                    s1 += x1[i] * wi;
                    s2 += x2[i] * wi;
                    s3 += x3[i] * wi;
                }
                out[(size_t)n0 * OC + o] = s0;
                out[(size_t)(n0 + 1) * OC + o] = s1;
                out[(size_t)(n0 + 2) * OC + o] = s2;
                out[(size_t)(n0 + 3) * OC + o] = s3;
            }
        } else {
            for (int r = 0; r < rows; r++) {
                const R *x = inp + (size_t)(n0 + r) * IC;
                for (int o = 0; o < OC; o++) {
                    const R *wr = w + (size_t)o * IC;
                    R s = 0;
                    for (int i = 0; i < IC; i++) s += x[i] * wr[i];
                    out[(size_t)(n0 + r) * OC + o] = s;
                }
            }
        }
    }
}

/* The same product with the weight transposed, wt [IC, OC]: 4 rows x 16 outputs in registers,
 * vectorised over outputs. Every output is still summed over i in index order, so the result is
 * bit-identical to mp_train_matmul_forward (tests/test_train.c checks it). */
/* One block of at most 4 rows of the transposed-weight matmul. Compiled for AVX-512, AVX2 and
 * baseline x86-64, chosen at run time; every clone computes the same bits (ISO C: no contraction
 * into FMA, no loop is reassociated). */
MP_TRAIN_CLONES
static void FN(mm_fwd_block)(R *out, const R *inp, const R *wt, int n0, int rows, int IC, int OC) {
    for (int o0 = 0; o0 < OC; o0 += 16) {
        int ow = OC - o0 < 16 ? OC - o0 : 16;
        R acc[4][16];
        memset(acc, 0, sizeof acc);
        if (rows == 4 && ow == 16) {
            const R *x0 = inp + (size_t)n0 * IC, *x1 = x0 + IC, *x2 = x1 + IC, *x3 = x2 + IC;
            for (int i = 0; i < IC; i++) {
                const R *wr = wt + (size_t)i * OC + o0;
                R a0 = x0[i], a1 = x1[i], a2 = x2[i], a3 = x3[i];
#pragma omp simd
                for (int o = 0; o < 16; o++) {
                    acc[0][o] += a0 * wr[o];
                    acc[1][o] += a1 * wr[o];
                    acc[2][o] += a2 * wr[o];
                    acc[3][o] += a3 * wr[o];
                }
            }
        } else {
            for (int i = 0; i < IC; i++) {
                const R *wr = wt + (size_t)i * OC + o0;
                for (int r = 0; r < rows; r++) {
                    R a = inp[(size_t)(n0 + r) * IC + i];
                    for (int o = 0; o < ow; o++) acc[r][o] += a * wr[o];
                }
            }
        }
        for (int r = 0; r < rows; r++) memcpy(out + (size_t)(n0 + r) * OC + o0, acc[r], (size_t)ow * sizeof(R));
    }
}

/* The same product with the weight transposed, wt [IC, OC]: 4 rows x 16 outputs in registers,
 * vectorised over outputs. Every output is still summed over i in index order, so the result is
 * bit-identical to mp_train_matmul_forward (tests/test_train.c checks it). */
void FN(mp_train_matmul_forward_wt)(R *out, const R *inp, const R *wt, int N, int IC, int OC) {
    int nb = (N + 3) / 4;
#pragma omp parallel for if ((size_t)N * IC * OC > 100000)
    for (int b = 0; b < nb; b++) {
        int n0 = b * 4, rows = N - n0 < 4 ? N - n0 : 4;
        FN(mm_fwd_block)(out, inp, wt, n0, rows, IC, OC);
    }
}

/* dst [cols, rows] = src [rows, cols]^T */
void FN(mp_train_transpose)(R *dst, const R *src, int rows, int cols) {
#pragma omp parallel for if ((size_t)rows * cols > 100000)
    for (int c0 = 0; c0 < cols; c0 += 16)
        for (int r = 0; r < rows; r++)
            for (int c = c0; c < cols && c < c0 + 16; c++) dst[(size_t)c * rows + r] = src[(size_t)r * cols + c];
}

/* dinp rows [n0, n0+rows) += dout @ w (cloned like mm_fwd_block). */
MP_TRAIN_CLONES
static void FN(mm_bwd_dinp_block)(R *dinp, const R *dout, const R *w, int n0, int rows, int IC, int OC) {
    if (rows == 4) {
        R *d0 = dinp + (size_t)n0 * IC, *d1 = d0 + IC, *d2 = d1 + IC, *d3 = d2 + IC;
        const R *g0 = dout + (size_t)n0 * OC, *g1 = g0 + OC, *g2 = g1 + OC, *g3 = g2 + OC;
        for (int o = 0; o < OC; o++) {
            const R *wr = w + (size_t)o * IC;
            R a0 = g0[o], a1 = g1[o], a2 = g2[o], a3 = g3[o];
#pragma omp simd
            for (int i = 0; i < IC; i++) {
                R wi = wr[i];
                d0[i] += a0 * wi;
                d1[i] += a1 * wi;
                d2[i] += a2 * wi;
                d3[i] += a3 * wi;
            }
        }
        return;
    }
    for (int r = 0; r < rows; r++) {
        R *dx = dinp + (size_t)(n0 + r) * IC;
        const R *dy = dout + (size_t)(n0 + r) * OC;
        for (int o = 0; o < OC; o++) {
            R d = dy[o];
            const R *wr = w + (size_t)o * IC;
#pragma omp simd
            for (int i = 0; i < IC; i++) dx[i] += d * wr[i];
        }
    }
}

/* dw rows [o0, o0+orows) += dout^T @ inp, rows of inp in blocks of four (cloned). */
MP_TRAIN_CLONES
static void FN(mm_bwd_dw_block)(R *dw, const R *dout, const R *inp, int o0, int orows, int N, int IC, int OC) {
    int n = 0;
    for (; n + 4 <= N; n += 4) {
        const R *x0 = inp + (size_t)n * IC, *x1 = x0 + IC, *x2 = x1 + IC, *x3 = x2 + IC;
        for (int o = o0; o < o0 + orows; o++) {
            R *dwr = dw + (size_t)o * IC;
            R a0 = dout[(size_t)n * OC + o], a1 = dout[(size_t)(n + 1) * OC + o];
            R a2 = dout[(size_t)(n + 2) * OC + o], a3 = dout[(size_t)(n + 3) * OC + o];
#pragma omp simd
            for (int i = 0; i < IC; i++) {
                R v = dwr[i];
                v += a0 * x0[i];
                v += a1 * x1[i];
                v += a2 * x2[i];
                v += a3 * x3[i];
                dwr[i] = v;
            }
        }
    }
    for (; n < N; n++) {
        const R *x = inp + (size_t)n * IC;
        for (int o = o0; o < o0 + orows; o++) {
            R *dwr = dw + (size_t)o * IC;
            R d = dout[(size_t)n * OC + o];
#pragma omp simd
            for (int i = 0; i < IC; i++) dwr[i] += d * x[i];
        }
    }
}

/* dinp [N, IC] += dout @ w ; dw [OC, IC] += dout^T @ inp. Rows (and weight rows) in blocks of
 * four share each pass over memory; each element is still summed in index order of o (dinp) and
 * n (dw), as in the one-row loops (tests/test_train.c checks bit equality). */
void FN(mp_train_matmul_backward)(R *dinp, R *dw, const R *dout, const R *inp, const R *w, int N, int IC, int OC) {
    int nb = (N + 3) / 4;
#pragma omp parallel for if ((size_t)N * IC * OC > 100000)
    for (int b = 0; b < nb; b++) {
        int n0 = b * 4, rows = N - n0 < 4 ? N - n0 : 4;
        FN(mm_bwd_dinp_block)(dinp, dout, w, n0, rows, IC, OC);
    }
    int ob = (OC + 3) / 4;
#pragma omp parallel for if ((size_t)N * IC * OC > 100000)
    for (int b = 0; b < ob; b++) {
        int o0 = b * 4, orows = OC - o0 < 4 ? OC - o0 : 4;
        FN(mm_bwd_dw_block)(dw, dout, inp, o0, orows, N, IC, OC);
    }
}

/* ========================================= RoPE ========================================== */

void FN(mp_train_rope_table)(R *cos_t, R *sin_t, int T, int HS, double theta) {
    int h2 = HS / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < h2; i++) {
            double inv = pow(theta, -(double)(2 * i) / (double)HS);
            cos_t[(size_t)t * h2 + i] = (R)cos((double)t * inv);
            sin_t[(size_t)t * h2 + i] = (R)sin((double)t * inv);
        }
}

/* x'_i = x_i cos - x_{i+HS/2} sin ; x'_{i+HS/2} = x_{i+HS/2} cos + x_i sin (pairs (i, i+HS/2)). */
void FN(mp_train_rope_forward)(R *x, const R *cos_t, const R *sin_t, int B, int T, int H, int HS) {
    int h2 = HS / 2;
#pragma omp parallel for if ((size_t)B * T * H * HS > 32768)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const R *c = cos_t + (size_t)t * h2, *s = sin_t + (size_t)t * h2;
        for (int h = 0; h < H; h++) {
            R *v = x + ((size_t)bt * H + h) * HS;
            for (int i = 0; i < h2; i++) {
                R a = v[i], b = v[i + h2];
                v[i] = a * c[i] - b * s[i];
                v[i + h2] = b * c[i] + a * s[i];
            }
        }
    }
}

void FN(mp_train_rope_backward)(R *dx, const R *cos_t, const R *sin_t, int B, int T, int H, int HS) {
    int h2 = HS / 2;
#pragma omp parallel for if ((size_t)B * T * H * HS > 32768)
    for (int bt = 0; bt < B * T; bt++) {
        int t = bt % T;
        const R *c = cos_t + (size_t)t * h2, *s = sin_t + (size_t)t * h2;
        for (int h = 0; h < H; h++) {
            R *v = dx + ((size_t)bt * H + h) * HS;
            for (int i = 0; i < h2; i++) {
                R a = v[i], b = v[i + h2];
                v[i] = a * c[i] + b * s[i];
                v[i + h2] = b * c[i] - a * s[i];
            }
        }
    }
}

/* ====================================== attention ======================================== */

void FN(mp_train_attention_forward)(R *out, R *att, R *scratch, const R *q, const R *k, const R *v, int B, int T,
                                    int NH, int NKV, int HS) {
    const int QC = NH * HS, KC = NKV * HS, rep = NH / NKV;
    const R scale = (R)(1.0 / sqrt((double)HS));
#pragma omp parallel for collapse(2) if ((size_t)B * NH * T * T * HS > 100000)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            int kh = h / rep;
            /* k of this head transposed, kt [HS, T]: the scores of one query row vectorise over keys,
             * each still summed over i in index order */
            R *kt = scratch + ((size_t)b * NH + h) * HS * T;
            for (int s = 0; s < T; s++)
                for (int i = 0; i < HS; i++) kt[(size_t)i * T + s] = k[((size_t)b * T + s) * KC + (size_t)kh * HS + i];
            for (int t = 0; t < T; t++) {
                const R *qt = q + ((size_t)b * T + t) * QC + (size_t)h * HS;
                R *a = att + (((size_t)b * NH + h) * T + t) * T;
                for (int s = 0; s <= t; s++) a[s] = 0;
                for (int i = 0; i < HS; i++) {
                    const R qi = qt[i], *kr = kt + (size_t)i * T;
#pragma omp simd
                    for (int s = 0; s <= t; s++) a[s] += qi * kr[s];
                }
                R mx = -INFINITY;
                for (int s = 0; s <= t; s++) {
                    a[s] *= scale;
                    if (a[s] > mx) mx = a[s];
                }
                R sum = 0;
                for (int s = 0; s <= t; s++) {
                    a[s] = (R)exp((double)(a[s] - mx));
                    sum += a[s];
                }
                R inv = (R)1 / sum;
                for (int s = 0; s <= t; s++) a[s] *= inv;
                for (int s = t + 1; s < T; s++) a[s] = 0;
                R *o = out + ((size_t)b * T + t) * QC + (size_t)h * HS;
                for (int i = 0; i < HS; i++) o[i] = 0;
                for (int s = 0; s <= t; s++) {
                    const R *vs = v + ((size_t)b * T + s) * KC + (size_t)kh * HS;
                    R p = a[s];
#pragma omp simd
                    for (int i = 0; i < HS; i++) o[i] += p * vs[i];
                }
            }
        }
}

/* Per (b, kv head): the query heads of its group in order, so dk/dv sums have a fixed order.
 * scratch holds v of the kv head transposed ([HS, T] per (b, kv head)). */
void FN(mp_train_attention_backward)(R *dq, R *dk, R *dv, R *dpre, R *scratch, const R *dout, const R *att,
                                     const R *q, const R *k, const R *v, int B, int T, int NH, int NKV, int HS) {
    const int QC = NH * HS, KC = NKV * HS, rep = NH / NKV;
    const R scale = (R)(1.0 / sqrt((double)HS));
#pragma omp parallel for collapse(2) if ((size_t)B * NH * T * T * HS > 100000)
    for (int b = 0; b < B; b++)
        for (int kh = 0; kh < NKV; kh++) {
            R *vt = scratch + ((size_t)b * NKV + kh) * HS * T;
            for (int s = 0; s < T; s++)
                for (int i = 0; i < HS; i++) vt[(size_t)i * T + s] = v[((size_t)b * T + s) * KC + (size_t)kh * HS + i];
            for (int h = kh * rep; h < (kh + 1) * rep; h++)
                for (int t = 0; t < T; t++) {
                    const R *a = att + (((size_t)b * NH + h) * T + t) * T;
                    R *dp = dpre + (((size_t)b * NH + h) * T + t) * T;
                    const R *dy = dout + ((size_t)b * T + t) * QC + (size_t)h * HS;
                    const R *qt = q + ((size_t)b * T + t) * QC + (size_t)h * HS;
                    R *dqt = dq + ((size_t)b * T + t) * QC + (size_t)h * HS;
                    /* d probs (vectorised over keys) and dv */
                    for (int s = 0; s <= t; s++) dp[s] = 0;
                    for (int i = 0; i < HS; i++) {
                        const R yi = dy[i], *vr = vt + (size_t)i * T;
#pragma omp simd
                        for (int s = 0; s <= t; s++) dp[s] += yi * vr[s];
                    }
                    R dotp = 0;
                    for (int s = 0; s <= t; s++) {
                        R *dvs = dv + ((size_t)b * T + s) * KC + (size_t)kh * HS;
                        R p = a[s];
#pragma omp simd
                        for (int i = 0; i < HS; i++) dvs[i] += p * dy[i];
                        dotp += p * dp[s];
                    }
                    /* softmax backward, then the scaled dot products */
                    for (int s = 0; s <= t; s++) {
                        R g = a[s] * (dp[s] - dotp) * scale;
                        const R *ks = k + ((size_t)b * T + s) * KC + (size_t)kh * HS;
                        R *dks = dk + ((size_t)b * T + s) * KC + (size_t)kh * HS;
#pragma omp simd
                        for (int i = 0; i < HS; i++) {
                            dqt[i] += g * ks[i];
                            dks[i] += g * qt[i];
                        }
                    }
                }
        }
}

/* ======================================== SwiGLU ========================================= */

void FN(mp_train_swiglu_forward)(R *out, const R *gate, const R *up, size_t n) {
#pragma omp parallel for if (n > 32768)
    for (size_t i = 0; i < n; i++) {
        R g = gate[i];
        R sg = (R)1 / ((R)1 + (R)exp(-(double)g));
        out[i] = g * sg * up[i];
    }
}

/* silu'(g) = s (1 + g (1 - s)), s = sigmoid(g). */
void FN(mp_train_swiglu_backward)(R *dgate, R *dup, const R *dout, const R *gate, const R *up, size_t n) {
#pragma omp parallel for if (n > 32768)
    for (size_t i = 0; i < n; i++) {
        R g = gate[i];
        R sg = (R)1 / ((R)1 + (R)exp(-(double)g));
        dgate[i] += dout[i] * up[i] * sg * ((R)1 + g * ((R)1 - sg));
        dup[i] += dout[i] * g * sg;
    }
}

/* ===================================== cross-entropy ===================================== */

void FN(mp_train_crossentropy_forward)(R *probs, R *losses, const R *logits, const int32_t *targets, int N, int V) {
#pragma omp parallel for if ((size_t)N * V > 32768)
    for (int n = 0; n < N; n++) {
        const R *z = logits + (size_t)n * V;
        R *p = probs + (size_t)n * V;
        R mx = -INFINITY;
        for (int i = 0; i < V; i++)
            if (z[i] > mx) mx = z[i];
        R zt = targets ? z[targets[n]] : 0;
        R sum = 0;
        for (int i = 0; i < V; i++) {
            p[i] = (R)exp((double)(z[i] - mx));
            sum += p[i];
        }
        R inv = (R)1 / sum;
        for (int i = 0; i < V; i++) p[i] *= inv;
        if (losses) losses[n] = targets ? (R)(log((double)sum) + (double)(mx - zt)) : 0;
    }
}

void FN(mp_train_crossentropy_backward)(R *dlogits, const R *probs, const int32_t *targets, double scale, int N,
                                        int V) {
    R sc = (R)scale;
#pragma omp parallel for if ((size_t)N * V > 32768)
    for (int n = 0; n < N; n++) {
        const R *p = probs + (size_t)n * V;
        R *d = dlogits + (size_t)n * V;
        for (int i = 0; i < V; i++) d[i] += sc * (p[i] - (i == targets[n] ? (R)1 : (R)0));
    }
}

/* ====================================== the model ======================================== */

/* Size table of the activation block, in the order of the struct fields. */
static void FN(model_act_sizes)(const MpTrainConfig *c, size_t sz[18]) {
    size_t L = (size_t)c->layers, N = (size_t)c->batch * c->seq, C = (size_t)c->dim;
    size_t QC = (size_t)c->heads * c->head_dim, KC = (size_t)c->kv_heads * c->head_dim, FF = (size_t)c->ffn;
    size_t att = (size_t)c->batch * c->heads * c->seq * c->seq;
    size_t t[18] = {(L + 1) * N * C, L * N * C, L * N, L * N * QC, L * N * KC, L * N * KC, L * att, L * N * QC,
                    L * N * C,       L * N * C, L * N, L * N * FF, L * N * FF, L * N * FF, N * C,   N,
                    N * (size_t)c->vocab, N};
    memcpy(sz, t, sizeof t);
}

static void FN(model_scratch_sizes)(const MpTrainConfig *c, size_t sz[13]) {
    size_t N = (size_t)c->batch * c->seq, C = (size_t)c->dim;
    size_t QC = (size_t)c->heads * c->head_dim, KC = (size_t)c->kv_heads * c->head_dim, FF = (size_t)c->ffn;
    size_t att = (size_t)c->batch * c->heads * c->seq * c->seq;
    size_t wmax = (size_t)c->vocab * C;
    if (QC * C > wmax) wmax = QC * C;
    if (FF * C > wmax) wmax = FF * C;
    size_t t[13] = {N * C, N * C, N * QC, N * KC, N * KC, N * QC, att, N * FF, N * FF, N * FF, N * (size_t)c->vocab, wmax,
                    N * QC};
    memcpy(sz, t, sizeof t);
}

int FN(mp_train_model_init)(Model *m, const MpTrainConfig *cfg, MpErr *e) {
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (mp_train_layout_init(&m->lay, cfg, e) != MP_OK) return MP_ERR;
    size_t total = m->lay.total, h2 = (size_t)cfg->head_dim / 2;
    size_t as[18], ss[13], na = 0, ns = 0;
    FN(model_act_sizes)(cfg, as);
    FN(model_scratch_sizes)(cfg, ss);
    for (int i = 0; i < 18; i++) na += as[i];
    for (int i = 0; i < 13; i++) ns += ss[i];
    /* parameters + gradients + RoPE tables: one block */
    m->params = mp_try_calloc(2 * total + 2 * (size_t)cfg->seq * h2 + 1, sizeof(R));
    m->acts = mp_try_calloc(na, sizeof(R));
    m->scratch = mp_try_calloc(ns, sizeof(R));
    if (!m->params || !m->acts || !m->scratch) {
        FN(mp_train_model_free)(m);
        return mp_err_set(e, "out of memory for the model (%zu parameters, %zu activations)", total, na);
    }
    m->grads = m->params + total;
    m->rope_cos = m->grads + total;
    m->rope_sin = m->rope_cos + (size_t)cfg->seq * h2;
    FN(mp_train_rope_table)(m->rope_cos, m->rope_sin, cfg->seq, cfg->head_dim, cfg->rope_theta);
    R **ap[18] = {&m->resid, &m->ln1,  &m->rstd1, &m->q,    &m->k,   &m->v,   &m->att,   &m->atty,  &m->resid2,
                  &m->ln2,   &m->rstd2, &m->gate, &m->up,   &m->hmid, &m->lnf, &m->rstdf, &m->probs, &m->losses};
    R *p = m->acts;
    for (int i = 0; i < 18; i++) {
        *ap[i] = p;
        p += as[i];
    }
    R **sp[13] = {&m->dres, &m->dln, &m->dq, &m->dk, &m->dv, &m->datty, &m->dpre, &m->dh, &m->dgate, &m->dup, &m->dlogits, &m->wt,
                  &m->attnt};
    p = m->scratch;
    for (int i = 0; i < 13; i++) {
        *sp[i] = p;
        p += ss[i];
    }
    m->loss = NAN;
    return MP_OK;
}

void FN(mp_train_model_free)(Model *m) {
    free(m->scratch);
    free(m->acts);
    free(m->params);
    mp_train_layout_free(&m->lay);
    memset(m, 0, sizeof *m);
}

static R *FN(model_w)(Model *m, int layer, MpTrainRole r) {
    return m->params + m->lay.t[mp_train_layout_index(&m->cfg, layer, r)].off;
}
static R *FN(model_dw)(Model *m, int layer, MpTrainRole r) {
    return m->grads + m->lay.t[mp_train_layout_index(&m->cfg, layer, r)].off;
}

/* out [N, OC] = inp [N, IC] @ w^T through the transposed-weight kernel (scratch m->wt). */
static void FN(model_linear)(Model *m, R *out, const R *inp, const R *w, int N, int IC, int OC) {
    FN(mp_train_transpose)(m->wt, w, OC, IC);
    FN(mp_train_matmul_forward_wt)(out, inp, m->wt, N, IC, OC);
}

double FN(mp_train_forward)(Model *m, const int32_t *inputs, const int32_t *targets) {
    const MpTrainConfig *c = &m->cfg;
    const int B = c->batch, T = c->seq, C = c->dim, NH = c->heads, NKV = c->kv_heads, HS = c->head_dim;
    const int FF = c->ffn, V = c->vocab, N = B * T, QC = NH * HS, KC = NKV * HS;
    const size_t NC = (size_t)N * C, NQ = (size_t)N * QC, NK = (size_t)N * KC, NF = (size_t)N * FF;
    const size_t NA = (size_t)B * NH * T * T;
    FN(mp_train_embed_forward)(m->resid, inputs, m->params + m->lay.t[mp_train_layout_embed()].off, N, C);
    for (int l = 0; l < c->layers; l++) {
        R *x = m->resid + (size_t)l * NC, *ln1 = m->ln1 + (size_t)l * NC, *q = m->q + (size_t)l * NQ;
        R *k = m->k + (size_t)l * NK, *v = m->v + (size_t)l * NK, *att = m->att + (size_t)l * NA;
        R *atty = m->atty + (size_t)l * NQ, *x2 = m->resid2 + (size_t)l * NC, *ln2 = m->ln2 + (size_t)l * NC;
        R *g = m->gate + (size_t)l * NF, *u = m->up + (size_t)l * NF, *hm = m->hmid + (size_t)l * NF;
        R *xo = m->resid + (size_t)(l + 1) * NC;
        FN(mp_train_rmsnorm_forward)(ln1, m->rstd1 + (size_t)l * N, x, FN(model_w)(m, l, MP_TRAIN_ATTN_NORM), N, C,
                                     c->norm_eps);
        FN(model_linear)(m, q, ln1, FN(model_w)(m, l, MP_TRAIN_Q), N, C, QC);
        FN(model_linear)(m, k, ln1, FN(model_w)(m, l, MP_TRAIN_K), N, C, KC);
        FN(model_linear)(m, v, ln1, FN(model_w)(m, l, MP_TRAIN_V), N, C, KC);
        if (c->pos == MP_TRAIN_POS_ROPE) {
            FN(mp_train_rope_forward)(q, m->rope_cos, m->rope_sin, B, T, NH, HS);
            FN(mp_train_rope_forward)(k, m->rope_cos, m->rope_sin, B, T, NKV, HS);
        }
        FN(mp_train_attention_forward)(atty, att, m->attnt, q, k, v, B, T, NH, NKV, HS);
        FN(model_linear)(m, x2, atty, FN(model_w)(m, l, MP_TRAIN_O), N, QC, C);
        for (size_t i = 0; i < NC; i++) x2[i] += x[i];
        FN(mp_train_rmsnorm_forward)(ln2, m->rstd2 + (size_t)l * N, x2, FN(model_w)(m, l, MP_TRAIN_FFN_NORM), N, C,
                                     c->norm_eps);
        FN(model_linear)(m, g, ln2, FN(model_w)(m, l, MP_TRAIN_GATE), N, C, FF);
        FN(model_linear)(m, u, ln2, FN(model_w)(m, l, MP_TRAIN_UP), N, C, FF);
        FN(mp_train_swiglu_forward)(hm, g, u, NF);
        FN(model_linear)(m, xo, hm, FN(model_w)(m, l, MP_TRAIN_DOWN), N, FF, C);
        for (size_t i = 0; i < NC; i++) xo[i] += x2[i];
    }
    R *xl = m->resid + (size_t)c->layers * NC;
    FN(mp_train_rmsnorm_forward)(m->lnf, m->rstdf, xl, m->params + m->lay.t[mp_train_layout_norm(c)].off, N, C,
                                 c->norm_eps);
    FN(model_linear)(m, m->probs, m->lnf, m->params + m->lay.t[mp_train_layout_lm_head(c)].off, N, C, V);
    FN(mp_train_crossentropy_forward)(m->probs, m->losses, m->probs, targets, N, V);
    m->targets = targets;
    if (!targets) {
        m->loss = NAN;
        return m->loss;
    }
    double sum = 0;
    for (int n = 0; n < N; n++) sum += (double)m->losses[n];
    m->loss = sum / N;
    return m->loss;
}

void FN(mp_train_backward)(Model *m, const int32_t *inputs) {
    const MpTrainConfig *c = &m->cfg;
    MP_ASSERT(m->targets != NULL);
    const int B = c->batch, T = c->seq, C = c->dim, NH = c->heads, NKV = c->kv_heads, HS = c->head_dim;
    const int FF = c->ffn, V = c->vocab, N = B * T, QC = NH * HS, KC = NKV * HS;
    const size_t NC = (size_t)N * C, NQ = (size_t)N * QC, NK = (size_t)N * KC, NF = (size_t)N * FF;
    const size_t NA = (size_t)B * NH * T * T;
    memset(m->grads, 0, m->lay.total * sizeof(R));
    /* head: dlogits, final norm */
    memset(m->dlogits, 0, (size_t)N * V * sizeof(R));
    FN(mp_train_crossentropy_backward)(m->dlogits, m->probs, m->targets, 1.0 / N, N, V);
    memset(m->dln, 0, NC * sizeof(R));
    int ih = mp_train_layout_lm_head(c), inorm = mp_train_layout_norm(c);
    FN(mp_train_matmul_backward)(m->dln, m->grads + m->lay.t[ih].off, m->dlogits, m->lnf, m->params + m->lay.t[ih].off,
                                 N, C, V);
    memset(m->dres, 0, NC * sizeof(R));
    FN(mp_train_rmsnorm_backward)(m->dres, m->grads + m->lay.t[inorm].off, m->dln, m->resid + (size_t)c->layers * NC,
                                  m->params + m->lay.t[inorm].off, m->rstdf, N, C);
    for (int l = c->layers - 1; l >= 0; l--) {
        R *x = m->resid + (size_t)l * NC, *ln1 = m->ln1 + (size_t)l * NC, *q = m->q + (size_t)l * NQ;
        R *k = m->k + (size_t)l * NK, *v = m->v + (size_t)l * NK, *att = m->att + (size_t)l * NA;
        R *atty = m->atty + (size_t)l * NQ, *x2 = m->resid2 + (size_t)l * NC, *ln2 = m->ln2 + (size_t)l * NC;
        R *g = m->gate + (size_t)l * NF, *u = m->up + (size_t)l * NF, *hm = m->hmid + (size_t)l * NF;
        /* MLP: xo = x2 + down(silu(gate(ln2)) * up(ln2)); dres holds d xo */
        memset(m->dh, 0, NF * sizeof(R));
        memset(m->dgate, 0, NF * sizeof(R));
        memset(m->dup, 0, NF * sizeof(R));
        memset(m->dln, 0, NC * sizeof(R));
        FN(mp_train_matmul_backward)(m->dh, FN(model_dw)(m, l, MP_TRAIN_DOWN), m->dres, hm,
                                     FN(model_w)(m, l, MP_TRAIN_DOWN), N, FF, C);
        FN(mp_train_swiglu_backward)(m->dgate, m->dup, m->dh, g, u, NF);
        FN(mp_train_matmul_backward)(m->dln, FN(model_dw)(m, l, MP_TRAIN_GATE), m->dgate, ln2,
                                     FN(model_w)(m, l, MP_TRAIN_GATE), N, C, FF);
        FN(mp_train_matmul_backward)(m->dln, FN(model_dw)(m, l, MP_TRAIN_UP), m->dup, ln2,
                                     FN(model_w)(m, l, MP_TRAIN_UP), N, C, FF);
        FN(mp_train_rmsnorm_backward)(m->dres, FN(model_dw)(m, l, MP_TRAIN_FFN_NORM), m->dln, x2,
                                      FN(model_w)(m, l, MP_TRAIN_FFN_NORM), m->rstd2 + (size_t)l * N, N, C);
        /* attention: x2 = x + o_proj(attn(rope(q(ln1)), rope(k(ln1)), v(ln1))); dres holds d x2 */
        memset(m->datty, 0, NQ * sizeof(R));
        memset(m->dq, 0, NQ * sizeof(R));
        memset(m->dk, 0, NK * sizeof(R));
        memset(m->dv, 0, NK * sizeof(R));
        memset(m->dln, 0, NC * sizeof(R));
        FN(mp_train_matmul_backward)(m->datty, FN(model_dw)(m, l, MP_TRAIN_O), m->dres, atty,
                                     FN(model_w)(m, l, MP_TRAIN_O), N, QC, C);
        FN(mp_train_attention_backward)(m->dq, m->dk, m->dv, m->dpre, m->attnt, m->datty, att, q, k, v, B, T, NH, NKV,
                                        HS);
        if (c->pos == MP_TRAIN_POS_ROPE) {
            FN(mp_train_rope_backward)(m->dq, m->rope_cos, m->rope_sin, B, T, NH, HS);
            FN(mp_train_rope_backward)(m->dk, m->rope_cos, m->rope_sin, B, T, NKV, HS);
        }
        FN(mp_train_matmul_backward)(m->dln, FN(model_dw)(m, l, MP_TRAIN_Q), m->dq, ln1, FN(model_w)(m, l, MP_TRAIN_Q),
                                     N, C, QC);
        FN(mp_train_matmul_backward)(m->dln, FN(model_dw)(m, l, MP_TRAIN_K), m->dk, ln1, FN(model_w)(m, l, MP_TRAIN_K),
                                     N, C, KC);
        FN(mp_train_matmul_backward)(m->dln, FN(model_dw)(m, l, MP_TRAIN_V), m->dv, ln1, FN(model_w)(m, l, MP_TRAIN_V),
                                     N, C, KC);
        FN(mp_train_rmsnorm_backward)(m->dres, FN(model_dw)(m, l, MP_TRAIN_ATTN_NORM), m->dln, x,
                                      FN(model_w)(m, l, MP_TRAIN_ATTN_NORM), m->rstd1 + (size_t)l * N, N, C);
    }
    FN(mp_train_embed_backward)(m->grads + m->lay.t[mp_train_layout_embed()].off, m->dres, inputs, N, C);
}

#undef Model
#undef FN
#undef CAT
#undef CAT_
#undef R
