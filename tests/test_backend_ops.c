/* test_backend_ops.c — every op of the forward pass's backend interface (src/model/fwd_backend.h),
 * instance by instance, against the reference CPU instance (mp_fwd_ops_cpu), over many shapes: a
 * new backend is checked op by op, as llama.cpp's test-backend-ops checks ggml's.
 *
 * Each op runs on the same inputs in the reference (1 thread) and in the instance under test (2
 * threads), each on its own memory: inputs uploaded, outputs read back with to_host, buffers
 * around the outputs filled with a sentinel that must survive (no write outside a tensor's rows or
 * past a row's width). An op whose bit MpFwdOps.exact claims must give the reference's bits; the
 * others must put non-finite values (-inf of the masks, NaN) in the same places and stay within
 * max |a - ref| / max |ref| <= 1e-5 (the f32 bound of issue #36 and of the torch oracles,
 * docs/speed.md). Integer outputs (MoE choices, counts, rows) are always exact.
 * Shapes: T = 1, T off every block size (5, 17, 40, 67, 70), GQA (4/2, 6/3, 4/1, 8/2) and MHA,
 * head dims 16 .. 128, partial rotary (R < HS), RoPE off (a NoPE layer), per-head and whole q/k
 * norms, causal and not, sliding windows shorter and longer than T, soft-cap, a key/value-cache
 * run (t0 > 0, ldt > T), f32 and bf16 weights (where the instance holds them), row strides wider
 * than rows, matrix uploads in ranges of rows, every tap of the attention (rows, head-sum map,
 * whole-layer scores, probabilities) and its scores check.
 * Instances: cpu (against itself: the thread count changes no bit), cpu-plain, the counted test
 * instance (tests/test_backend_util.h: cpu-plain's ops, host_memory 0, and every op one call), and
 * each device instance this build has (test_device_instances; here none: skipped, saying so).
 * Every op id is exercised (a new op without cases fails). BK_DEBUG=1 in the environment lists
 * every comparison whose error exceeds 1e-6 (a new backend's worst ops at a glance). Runs in
 * under a second.
 *
 * Shape legend: T tokens, O outputs, K inner size, NH query heads, NKV key/value heads, HS head
 * dim, R rotary dims, E experts, KE chosen experts a row, C hidden.
 */
#include "testutil.h"

#include "model/fwd_backend.h" /* the interface under test */
#include "model/fwd_kernels.h" /* mp_fwd_kernel_resolve, mp_fwd_bf16_round, mp_fwd_rope_table: inputs */
#include "test_backend_util.h" /* bk_counted */

#define SENTINEL 7.25f
#define TOL 1e-5

/* ================================================================ instances and their memory */

typedef struct Inst {
    const MpFwdOps *ops;
    MpFwdCtx *ctx;
    int threads;
    void *bufs[64];
    int nb;
} Inst;

static void inst_open(Inst *in, const MpFwdOps *ops, int threads) {
    MpErr e;
    memset(in, 0, sizeof *in);
    in->ops = ops;
    in->threads = threads;
    in->ctx = ops->open(NULL, mp_fwd_kernel_resolve(MP_FWD_KERNEL_AUTO), &e);
    if (!in->ctx) fail_msg("%s: open: %s", ops->name, e.msg);
}

/* Frees the case's buffers. */
static void inst_reset(Inst *in) {
    for (int i = 0; i < in->nb; i++) in->ops->free(in->ctx, in->bufs[i]);
    in->nb = 0;
}

static void inst_close(Inst *in) {
    inst_reset(in);
    in->ops->close(in->ctx);
}

/* bytes of the instance's memory, for this case. */
static void *inst_buf(Inst *in, size_t bytes) {
    assert_true(in->nb < 64);
    void *p = in->ops->alloc(in->ctx, bytes ? bytes : 4);
    assert_non_null(p);
    return in->bufs[in->nb++] = p;
}

/* n floats of the instance's memory holding host [n] (or the sentinel when host is NULL). */
static float *inst_put(Inst *in, const float *host, size_t n) {
    float *d = inst_buf(in, sizeof(float) * (n ? n : 1));
    float *tmp = NULL;
    if (!host) {
        tmp = malloc(sizeof(float) * (n ? n : 1));
        for (size_t i = 0; i < n; i++) tmp[i] = SENTINEL;
        host = tmp;
    }
    in->ops->upload(in->ctx, d, host, sizeof(float) * n);
    free(tmp);
    return d;
}

static void *inst_put_bytes(Inst *in, const void *host, size_t bytes) {
    void *d = inst_buf(in, bytes);
    in->ops->upload(in->ctx, d, host, bytes);
    return d;
}

static void inst_get(Inst *in, void *host, const void *dev, size_t bytes) { in->ops->to_host(in->ctx, host, dev, bytes); }

/* Sets the threads of the op about to run in `in`. */
static void inst_run(const Inst *in) { mp_test_set_threads(in->threads); }

/* ================================================================ comparison */

typedef struct OpStat {
    int cases;
    double max_err; /* normalised, over the non-exact cases */
} OpStat;
static OpStat stats[MP_FWD_OP_COUNT];
static char cur[200]; /* the case at hand, for messages */

static int claims(const Inst *in, int op) { return (int)((in->ops->exact >> op) & 1); }

static int same_class(double a, double r) {
    if (isnan(r)) return isnan(a);
    if (isinf(r)) return a == r;
    return isfinite(a);
}

/* The same bits, a NaN matching any NaN: its payload is the hardware's (x86 keeps the input NaN's,
 * a CUDA GPU writes the canonical 0x7fffffff), and nothing reads it. */
static int same_bits_nan(const float *af, const float *rf, const double *ad, const double *rd, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const double a = af ? af[i] : ad[i], r = af ? rf[i] : rd[i];
        if (isnan(a) && isnan(r)) continue;
        if (af ? memcmp(af + i, rf + i, sizeof(float)) : memcmp(ad + i, rd + i, sizeof(double))) return 0;
    }
    return 1;
}

/* a [n] of the instance vs r [n] of the reference (floats or doubles: one is NULL in each pair); the
 * error normalised by max |ref|, or by scale when larger (a sum that cancels: the head-sum map is
 * held to the scale of its scores, as issue #36's maps are). */
static void check_vals(const Inst *in, int op, const char *what, const float *af, const float *rf, const double *ad,
                       const double *rd, size_t n, double scale) {
    const int exact = claims(in, op);
    if (exact && !same_bits_nan(af, rf, ad, rd, n))
        fail_msg("%s: %s: %s: not the reference's bits (claimed by the instance)", in->ops->name, cur, what);
    double mx = 0, err = 0;
    for (size_t i = 0; i < n; i++) {
        const double a = af ? af[i] : ad[i], r = af ? rf[i] : rd[i];
        if (!same_class(a, r)) fail_msg("%s: %s: %s[%zu] = %g, reference %g", in->ops->name, cur, what, i, a, r);
        if (isfinite(r)) {
            mx = fabs(r) > mx ? fabs(r) : mx;
            err = fabs(a - r) > err ? fabs(a - r) : err;
        }
    }
    mx = scale > mx ? scale : mx;
    const double rel = err / (mx > 0 ? mx : 1.0);
    if (rel > TOL) fail_msg("%s: %s: %s: max |a - ref| %.3g = %.3g of max |ref| (bound %g)", in->ops->name, cur, what, err, rel, TOL);
    if (!exact && rel > stats[op].max_err) stats[op].max_err = rel;
    if (getenv("BK_DEBUG") && rel > 1e-6) print_message("   %s %s %g\n", cur, what, rel);
}
static void check_f32(const Inst *in, int op, const char *what, const float *a, const float *r, size_t n) {
    check_vals(in, op, what, a, r, NULL, NULL, n, 0);
}
static void check_f64(const Inst *in, int op, const char *what, const double *a, const double *r, size_t n, double scale) {
    check_vals(in, op, what, NULL, NULL, a, r, n, scale);
}
static void check_i32(const Inst *in, const char *what, const int32_t *a, const int32_t *r, size_t n) {
    if (memcmp(a, r, sizeof(int32_t) * n)) fail_msg("%s: %s: %s differ from the reference's", in->ops->name, cur, what);
}

/* A case of op id ran: counted, and (the counted instance) one call of the op did it all. */
static void case_done(const Inst *in, int op, long calls_before) {
    stats[op].cases++;
    if (in->ops == &bk_counted && bk_calls[op] - calls_before != 1)
        fail_msg("%s: %s: %ld calls of the op (a whole-tensor op is one)", in->ops->name, cur, bk_calls[op] - calls_before);
}

static float *host_fill(size_t n, uint32_t seed, float div) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(x);
    mp_test_fill(x, n, seed, div);
    return x;
}

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* ================================================================ matmul */

/* y [T, ldy] (sentinel between rows) = x [T, ldx] · Wᵀ in `in`, W [O, K] uploaded in ranges of chunk rows. */
static void run_matmul(Inst *in, float *y, const float *x, const float *w, int64_t T, int64_t O, int64_t K, int64_t ldx,
                       int64_t ldy, int dtype, int64_t chunk) {
    MpFwdWeight wt = {.out = O, .in = K, .dtype = dtype};
    wt.data = inst_buf(in, in->ops->weight_plan(&wt, mp_fwd_kernel_resolve(MP_FWD_KERNEL_AUTO)));
    for (int64_t r0 = 0; r0 < O; r0 += chunk) in->ops->weight_upload(in->ctx, &wt, w + r0 * K, r0, MIN(chunk, O - r0));
    float *dx = inst_put(in, x, (size_t)(T * ldx)), *dy = inst_put(in, NULL, (size_t)(T * ldy));
    inst_run(in);
    in->ops->matmul(in->ctx, dy, ldy, dx, ldx, &wt, T);
    inst_get(in, y, dy, sizeof(float) * (size_t)(T * ldy));
}

static void ops_matmul(Inst *ref, Inst *in) {
    static const int64_t sh[][5] = {/* T, O, K, extra ldx, extra ldy */
                                    {1, 1, 1, 0, 0}, {1, 33, 17, 0, 0}, {3, 32, 64, 5, 0}, {7, 64, 100, 0, 3},
                                    {19, 70, 257, 1, 2}, {40, 96, 33, 0, 0}, {8, 5, 300, 0, 0}};
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
        for (int dt = MP_FWD_DT_F32; dt <= MP_FWD_DT_BF16; dt++) {
            if (!(in->ops->dtypes & MP_FWD_DT_BIT(dt))) continue;
            const int64_t T = sh[s][0], O = sh[s][1], K = sh[s][2], ldx = K + sh[s][3], ldy = O + sh[s][4];
            snprintf(cur, sizeof cur, "matmul T %lld O %lld K %lld ldx %lld ldy %lld %s", (long long)T, (long long)O, (long long)K,
                     (long long)ldx, (long long)ldy, dt ? "bf16" : "f32");
            float *x = host_fill((size_t)(T * ldx), (uint32_t)s + 1, 700), *w = host_fill((size_t)(O * K), (uint32_t)s + 50, 900);
            if (dt == MP_FWD_DT_BF16) mp_fwd_bf16_round(x, (size_t)(T * ldx)); /* bf16 compute's Linear inputs */
            float *a = malloc(sizeof(float) * (size_t)(T * ldy)), *r = malloc(sizeof(float) * (size_t)(T * ldy));
            run_matmul(ref, r, x, w, T, O, K, ldx, ldy, dt, dt ? 32 : O); /* the loader's ranges */
            const long c0 = bk_calls[MP_FWD_OP_MATMUL];
            run_matmul(in, a, x, w, T, O, K, ldx, ldy, dt, 5); /* ranges of 5 rows */
            case_done(in, MP_FWD_OP_MATMUL, c0);
            check_f32(in, MP_FWD_OP_MATMUL, "y", a, r, (size_t)(T * ldy));
            inst_reset(ref), inst_reset(in);
            free(x), free(w), free(a), free(r);
        }
}

/* ================================================================ norms */

/* y [rows, n] = norm(x) in `in`, in place when alias; layer: LayerNorm with (w, b), else RMSNorm with w. */
static void run_norm(Inst *in, float *y, const float *x, const float *w, const float *b, int64_t rows, int n, int layer, int alias) {
    const size_t N = (size_t)rows * n;
    float *dx = inst_put(in, x, N), *dy = alias ? dx : inst_put(in, NULL, N);
    const float *dw = w ? inst_put(in, w, (size_t)n) : NULL, *db = b ? inst_put(in, b, (size_t)n) : NULL;
    inst_run(in);
    if (layer) in->ops->layernorm(in->ctx, dy, dx, dw, db, rows, n, 1e-5);
    else in->ops->rmsnorm(in->ctx, dy, dx, dw, rows, n, 1e-6);
    inst_get(in, y, dy, sizeof(float) * N);
}

static void ops_norms(Inst *ref, Inst *in) {
    static const int sh[][2] = {{1, 1}, {1, 64}, {5, 130}, {33, 8}, {300, 64}};
    for (int layer = 0; layer < 2; layer++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++)
            for (int v = 0; v < 4; v++) { /* weight (and bias) present or not, in place or not */
                const int64_t rows = sh[s][0];
                const int n = sh[s][1], op = layer ? MP_FWD_OP_LAYERNORM : MP_FWD_OP_RMSNORM;
                snprintf(cur, sizeof cur, "%s rows %lld n %d weight %d alias %d", layer ? "layernorm" : "rmsnorm", (long long)rows, n,
                         v & 1, v >> 1);
                float *x = host_fill((size_t)rows * n, (uint32_t)s + 3, 300), *w = host_fill((size_t)n, 9, 500);
                float *b = host_fill((size_t)n, 10, 800), *a = malloc(sizeof(float) * (size_t)rows * n), *r = malloc(sizeof(float) * (size_t)rows * n);
                run_norm(ref, r, x, v & 1 ? w : NULL, v & 1 ? b : NULL, rows, n, layer, v >> 1);
                const long c0 = bk_calls[op];
                run_norm(in, a, x, v & 1 ? w : NULL, v & 1 ? b : NULL, rows, n, layer, v >> 1);
                case_done(in, op, c0);
                check_f32(in, op, "y", a, r, (size_t)rows * n);
                inst_reset(ref), inst_reset(in);
                free(x), free(w), free(b), free(a), free(r);
            }
}

/* ================================================================ RoPE */

/* inv [R/2]: 10000^(-2i/R), the long ones divided by 8 (llama3's low-frequency band) when scaled. */
static void rope_freqs(float *inv, int R, int scaled) {
    for (int i = 0; i < R / 2; i++) inv[i] = (float)pow(10000.0, -2.0 * i / R) / (scaled && i > R / 4 ? 8.0f : 1.0f);
}

static void run_rope_table(Inst *in, float *cs, float *sn, const float *inv, int R, int T, double attn) {
    const size_t n = (size_t)T * (R / 2);
    float *dinv = inst_put(in, inv, (size_t)R / 2), *dc = inst_put(in, NULL, n), *ds = inst_put(in, NULL, n);
    inst_run(in);
    in->ops->rope_table(in->ctx, dc, ds, dinv, R, T, attn);
    inst_get(in, cs, dc, sizeof(float) * n);
    inst_get(in, sn, ds, sizeof(float) * n);
}

static void ops_rope_table(Inst *ref, Inst *in) {
    static const struct {
        int R, T, scaled;
        double attn;
    } cs[] = {{2, 1, 0, 1.0}, {16, 17, 0, 1.0}, {64, 100, 1, 1.0}, {6, 300, 0, 1.19}, {128, 70, 1, 0.9}};
    for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
        const int R = cs[s].R, T = cs[s].T;
        const size_t n = (size_t)T * (R / 2);
        snprintf(cur, sizeof cur, "rope_table R %d T %d attn %g%s", R, T, cs[s].attn, cs[s].scaled ? " scaled" : "");
        float inv[64], *ac = malloc(sizeof(float) * n), *as = malloc(sizeof(float) * n), *rc = malloc(sizeof(float) * n),
                       *rs = malloc(sizeof(float) * n);
        rope_freqs(inv, R, cs[s].scaled);
        run_rope_table(ref, rc, rs, inv, R, T, cs[s].attn);
        const long c0 = bk_calls[MP_FWD_OP_ROPE_TABLE];
        run_rope_table(in, ac, as, inv, R, T, cs[s].attn);
        case_done(in, MP_FWD_OP_ROPE_TABLE, c0);
        check_f32(in, MP_FWD_OP_ROPE_TABLE, "cos", ac, rc, n);
        check_f32(in, MP_FWD_OP_ROPE_TABLE, "sin", as, rs, n);
        inst_reset(ref), inst_reset(in);
        free(ac), free(as), free(rc), free(rs);
    }
}

/* ================================================================ q/k norms, RoPE, keys and values */

typedef struct QkCase {
    int NH, NKV, HS, R, t0, T, ldt;
    int norm; /* 0 none, 1 per head (qwen3), 2 over the whole row (olmo2) */
    int rope; /* 0: a NoPE layer (no table) */
} QkCase;

/* The host inputs of a qk_prepare case: q [ldt, NH*HS], k, v [ldt, NKV*HS], the norm weights, the
 * RoPE table [ldt, R/2] (the reference kernel's, the same for every instance). */
typedef struct QkIn {
    float *q, *k, *v, *qn, *kn, *cs, *sn;
} QkIn;

static QkIn qk_inputs(const QkCase *c, uint32_t seed) {
    const size_t L = (size_t)c->ldt, Q = (size_t)c->NH * c->HS, KV = (size_t)c->NKV * c->HS;
    QkIn h = {host_fill(L * Q, seed, 200), host_fill(L * KV, seed + 1, 200), host_fill(L * KV, seed + 2, 200),
              host_fill(Q, seed + 3, 900), host_fill(KV, seed + 4, 900), malloc(sizeof(float) * (L * (size_t)(c->R / 2) + 1)),
              malloc(sizeof(float) * (L * (size_t)(c->R / 2) + 1))};
    float inv[64];
    rope_freqs(inv, c->R, 0);
    mp_fwd_rope_table(h.cs, h.sn, inv, c->R, c->ldt, 1.0);
    return h;
}

static void qk_free(QkIn *h) { free(h->q), free(h->k), free(h->v), free(h->qn), free(h->kn), free(h->cs), free(h->sn); }

/* qk_prepare of case c in `in` on the uploaded inputs; the keys in kp (NKV × kv_bytes, the instance's
 * layout), the values in vh [NKV, ldt, HS] (sentinel elsewhere). */
static MpFwdQKV qk_args(Inst *in, const QkCase *c, const QkIn *h) {
    const size_t L = (size_t)c->ldt, Q = (size_t)c->NH * c->HS, KV = (size_t)c->NKV * c->HS;
    const size_t kvb = in->ops->kv_bytes(c->HS, c->ldt), half = (size_t)(c->R / 2);
    MpFwdQKV a = {.q = inst_put(in, h->q, L * Q), .k = inst_put(in, h->k, L * KV), .v = inst_put(in, h->v, L * KV),
                  .kp = inst_buf(in, (size_t)c->NKV * kvb), .vh = inst_put(in, NULL, L * KV), .kv_head = kvb,
                  .t0 = c->t0, .T = c->T, .ldt = c->ldt, .NH = c->NH, .NKV = c->NKV, .HS = c->HS, .R = c->R,
                  .norm_whole = c->norm == 2, .eps = 1e-6};
    if (c->norm) {
        a.q_norm = inst_put(in, h->qn, c->norm == 2 ? Q : (size_t)c->HS);
        a.k_norm = inst_put(in, h->kn, c->norm == 2 ? KV : (size_t)c->HS);
    }
    if (c->rope) {
        a.cos = inst_put(in, h->cs, L * half);
        a.sin = inst_put(in, h->sn, L * half);
    }
    return a;
}

static void ops_qk_prepare(Inst *ref, Inst *in) {
    static const QkCase cs[] = {
        {4, 2, 16, 16, 0, 17, 17, 0, 1}, {4, 4, 24, 12, 0, 5, 5, 1, 1}, /* partial rotary, per-head norms */
        {8, 2, 64, 64, 0, 70, 70, 0, 1}, {2, 1, 32, 32, 0, 1, 1, 2, 1}, /* T = 1, olmo2's whole-row norms */
        {4, 2, 16, 16, 0, 9, 9, 1, 0},                                   /* a NoPE layer */
        {4, 2, 16, 8, 5, 9, 12, 1, 1},                                   /* a cache run: rows [5, 9) of 12 */
    };
    for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
        const QkCase *c = &cs[s];
        const size_t L = (size_t)c->ldt, Q = (size_t)c->NH * c->HS, KV = (size_t)c->NKV * c->HS;
        snprintf(cur, sizeof cur, "qk_prepare NH %d NKV %d HS %d R %d rows [%d, %d) of %d norm %d rope %d", c->NH, c->NKV, c->HS, c->R,
                 c->t0, c->T, c->ldt, c->norm, c->rope);
        QkIn h = qk_inputs(c, (uint32_t)s * 7 + 1);
        float *out[2][3];
        Inst *who[2] = {ref, in};
        for (int k = 0; k < 2; k++) {
            const MpFwdQKV a = qk_args(who[k], c, &h);
            const long c0 = bk_calls[MP_FWD_OP_QK_PREPARE];
            inst_run(who[k]);
            who[k]->ops->qk_prepare(who[k]->ctx, &a);
            if (k) case_done(in, MP_FWD_OP_QK_PREPARE, c0);
            out[k][0] = malloc(sizeof(float) * L * Q), out[k][1] = malloc(sizeof(float) * L * KV), out[k][2] = malloc(sizeof(float) * L * KV);
            inst_get(who[k], out[k][0], a.q, sizeof(float) * L * Q);
            inst_get(who[k], out[k][1], a.k, sizeof(float) * L * KV);
            inst_get(who[k], out[k][2], a.vh, sizeof(float) * L * KV);
        }
        check_f32(in, MP_FWD_OP_QK_PREPARE, "q", out[1][0], out[0][0], L * Q);
        check_f32(in, MP_FWD_OP_QK_PREPARE, "k", out[1][1], out[0][1], L * KV);
        check_f32(in, MP_FWD_OP_QK_PREPARE, "values", out[1][2], out[0][2], L * KV);
        for (int k = 0; k < 2; k++) free(out[k][0]), free(out[k][1]), free(out[k][2]);
        inst_reset(ref), inst_reset(in);
        qk_free(&h);
    }
}

/* ================================================================ attention */

enum { TAP_NONE, TAP_ROWS, TAP_HS, TAP_SCORES }; /* rows + head sums (2 workers) + probabilities; head sums only; the whole layer + probabilities */

typedef struct AttnCase {
    int NH, NKV, HS, t0, T, ldt, causal, window;
    float softcap;
    int taps, scores_only;
    int bad; /* 1: q of row 3, head 1 made +Inf (the scores check must name them) */
} AttnCase;

/* What the taps handed over, gathered on the host. */
typedef struct Sink {
    int NH, T, causal;
    float *rows, *scores, *probs; /* [NH, T, T] */
    double *hs;                   /* [T, T]: the visible entries; NaN elsewhere */
    int nrows, nhs, ndone, nscores, nprobs;
    double max_score; /* max |score| of the layer (the reference's, for the head sums' scale) */
} Sink;

static void sink_rows(void *ctx, int layer, const float *s, int NH, int T, int i0, int i1, int worker) {
    Sink *k = ctx;
    assert_true(layer == 3 && NH == k->NH && T == k->T && worker >= 0 && worker < 2);
    for (int h = 0; h < NH; h++) memcpy(k->rows + ((size_t)h * T + i0) * T, s + ((size_t)h * T + i0) * T, sizeof(float) * (size_t)(i1 - i0) * T);
    __atomic_fetch_add(&k->nrows, 1, __ATOMIC_RELAXED);
}
static void sink_hs(void *ctx, int layer, const double *hs, int T, int i0, int i1, int worker) {
    Sink *k = ctx;
    assert_true(layer == 3 && T == k->T && worker >= 0 && worker < 2);
    for (int i = i0; i < i1; i++) memcpy(k->hs + (size_t)i * T, hs + (size_t)(i - i0) * T, sizeof(double) * (size_t)(k->causal ? i + 1 : T));
    __atomic_fetch_add(&k->nhs, 1, __ATOMIC_RELAXED);
}
static void sink_done(void *ctx, int layer) { (void)layer, ((Sink *)ctx)->ndone++; }
static void sink_scores(void *ctx, int layer, const float *s, int NH, int T) {
    Sink *k = ctx;
    assert_true(layer == 3 && NH == k->NH && T == k->T);
    memcpy(k->scores, s, sizeof(float) * (size_t)NH * T * T), k->nscores++;
}
static void sink_probs(void *ctx, int layer, const float *p, int NH, int T) {
    Sink *k = ctx;
    assert_true(layer == 3 && NH == k->NH && T == k->T);
    memcpy(k->probs, p, sizeof(float) * (size_t)NH * T * T), k->nprobs++;
}

static void sink_init(Sink *k, const AttnCase *c) {
    const size_t n = (size_t)c->NH * c->T * c->T;
    *k = (Sink){.NH = c->NH, .T = c->T, .causal = c->causal, .rows = calloc(n, 4), .scores = calloc(n, 4), .probs = calloc(n, 4),
                .hs = malloc(sizeof(double) * (size_t)c->T * c->T)};
    for (size_t i = 0; i < (size_t)c->T * c->T; i++) k->hs[i] = NAN;
}
static void sink_free(Sink *k) { free(k->rows), free(k->scores), free(k->probs), free(k->hs); }

static MpFwdTaps sink_taps(Sink *k, int mode) {
    MpFwdTaps tp = {0};
    if (mode == TAP_ROWS || mode == TAP_HS) tp.rows_hook = (MpFwdRowsHook){mode == TAP_ROWS ? sink_rows : NULL, sink_done, k, 2}, tp.headsum = sink_hs;
    if (mode == TAP_SCORES) tp.scores = sink_scores, tp.scores_ctx = k;
    if (mode == TAP_ROWS || mode == TAP_SCORES) tp.probs = sink_probs, tp.probs_ctx = k;
    return tp;
}

/* Case c's attention in `in` on keys and values of positions [0, T) packed by its own qk_prepare
 * (no norm, no RoPE: a copy into its layout); o [ldt, NH*HS] read back, the taps into k. */
static void run_attention(Inst *in, const AttnCase *c, const QkIn *h, float *o, Sink *k, MpFwdCheck *chk) {
    const QkCase qc = {c->NH, c->NKV, c->HS, 0, 0, c->T, c->ldt, 0, 0};
    const MpFwdQKV p = qk_args(in, &qc, h);
    inst_run(in);
    in->ops->qk_prepare(in->ctx, &p);
    const size_t L = (size_t)c->ldt, Q = (size_t)c->NH * c->HS;
    const MpFwdAttn a = {
        .o = inst_put(in, NULL, L * Q), .s = inst_put(in, NULL, (size_t)c->NH * L * L), .q = p.q, .kp = p.kp, .vh = p.vh,
        .kv_head = p.kv_head, .tap_hs = c->taps == TAP_ROWS || c->taps == TAP_HS ? inst_buf(in, in->ops->tap_bytes(c->NH, c->ldt, 2)) : NULL,
        .chk = chk, .layer = 3, .t0 = c->t0, .T = c->T, .ldt = c->ldt, .NH = c->NH, .NKV = c->NKV, .HS = c->HS, .causal = c->causal,
        .window = c->window, .scale = (float)(1.0 / sqrt((double)c->HS)), .softcap = c->softcap, .cached = c->t0 > 0,
        .scores_only = c->scores_only,
    };
    const MpFwdTaps tp = sink_taps(k, c->taps);
    const long c0 = bk_calls[MP_FWD_OP_ATTENTION];
    in->ops->attention(in->ctx, &a, c->taps ? &tp : NULL);
    if (in->threads == 2) case_done(in, MP_FWD_OP_ATTENTION, c0);
    inst_get(in, o, a.o, sizeof(float) * L * Q);
}

static void attn_compare(const Inst *in, const AttnCase *c, Sink k[2], float *o[2], const MpFwdCheck chk[2]) {
    const size_t n = (size_t)c->NH * c->T * c->T;
    check_f32(in, MP_FWD_OP_ATTENTION, "o", o[1], o[0], (size_t)c->ldt * c->NH * c->HS);
    if (chk[1].row != chk[0].row || chk[1].head != chk[0].head)
        fail_msg("%s: %s: scores check (row %d, head %d), reference (%d, %d)", in->ops->name, cur, chk[1].row, chk[1].head, chk[0].row, chk[0].head);
    if (c->taps == TAP_ROWS) check_f32(in, MP_FWD_OP_ATTENTION, "rows tap", k[1].rows, k[0].rows, n);
    if (c->taps == TAP_ROWS || c->taps == TAP_HS)
        check_f64(in, MP_FWD_OP_ATTENTION, "head-sum tap", k[1].hs, k[0].hs, (size_t)c->T * c->T, k[0].max_score);
    if (c->taps == TAP_SCORES) check_f32(in, MP_FWD_OP_ATTENTION, "scores tap", k[1].scores, k[0].scores, n);
    if ((c->taps == TAP_ROWS || c->taps == TAP_SCORES) && !c->scores_only)
        check_f32(in, MP_FWD_OP_ATTENTION, "probabilities tap", k[1].probs, k[0].probs, n);
    for (int w = 0; w < 2; w++) { /* each consumer once per layer (rows: the blocks cover [0, T)) */
        const Sink *s = &k[w];
        const int rows = c->taps == TAP_ROWS || c->taps == TAP_HS;
        if ((rows && (s->ndone != 1 || s->nhs < 1)) || (c->taps == TAP_SCORES && s->nscores != 1) ||
            ((c->taps == TAP_ROWS || c->taps == TAP_SCORES) && !c->scores_only && s->nprobs != 1))
            fail_msg("%s: %s: taps called %d/%d/%d/%d times", w ? in->ops->name : "cpu", cur, s->ndone, s->nhs, s->nscores, s->nprobs);
    }
}

/* max |score| (finite) of case c's layer: a reference run with the scores tap, scores only. */
static double ref_max_score(Inst *ref, const AttnCase *c, const QkIn *h) {
    AttnCase sc = *c;
    sc.taps = TAP_SCORES, sc.scores_only = 1;
    Sink k;
    sink_init(&k, &sc);
    float *o = malloc(sizeof(float) * (size_t)c->ldt * c->NH * c->HS);
    MpFwdCheck chk = {.row = -1, .head = -1};
    run_attention(ref, &sc, h, o, &k, &chk);
    double mx = 0;
    for (size_t i = 0; i < (size_t)c->NH * c->T * c->T; i++)
        if (isfinite(k.scores[i]) && fabs(k.scores[i]) > mx) mx = fabs(k.scores[i]);
    sink_free(&k), free(o);
    return mx;
}

static void ops_attention(Inst *ref, Inst *in) {
    static const AttnCase cs[] = {
        {4, 2, 16, 0, 1, 1, 1, 0, 0, TAP_ROWS, 0, 0},     {4, 2, 16, 0, 17, 17, 1, 0, 0, TAP_ROWS, 0, 0},
        {6, 3, 24, 0, 67, 67, 0, 0, 0, TAP_SCORES, 0, 0},  {4, 1, 72, 0, 40, 40, 1, 5, 20, TAP_ROWS, 0, 0},
        {4, 4, 16, 0, 40, 40, 0, 7, 0, TAP_HS, 0, 0},      {4, 2, 32, 0, 20, 20, 1, 25, 0, TAP_NONE, 0, 0},
        {2, 2, 128, 0, 64, 64, 1, 0, 0, TAP_SCORES, 1, 0}, {4, 2, 16, 16, 20, 24, 1, 0, 0, TAP_NONE, 0, 0},
        {4, 2, 16, 0, 9, 9, 1, 0, 0, TAP_ROWS, 0, 1},      {8, 2, 64, 0, 70, 70, 1, 16, 30, TAP_HS, 1, 0},
    };
    for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
        const AttnCase *c = &cs[s];
        snprintf(cur, sizeof cur, "attention NH %d NKV %d HS %d rows [%d, %d) of %d causal %d window %d softcap %g taps %d scores_only %d bad %d",
                 c->NH, c->NKV, c->HS, c->t0, c->T, c->ldt, c->causal, c->window, (double)c->softcap, c->taps, c->scores_only, c->bad);
        const QkCase qc = {c->NH, c->NKV, c->HS, 0, 0, c->T, c->ldt, 0, 0};
        QkIn h = qk_inputs(&qc, (uint32_t)s * 11 + 5);
        if (c->bad) h.q[3 * (size_t)c->NH * c->HS + (size_t)c->HS] = INFINITY;
        Sink k[2];
        float *o[2];
        MpFwdCheck chk[2];
        Inst *who[2] = {ref, in};
        const double ms = c->taps == TAP_ROWS || c->taps == TAP_HS ? ref_max_score(ref, c, &h) : 0;
        inst_reset(ref);
        for (int w = 0; w < 2; w++) {
            sink_init(&k[w], c);
            k[w].max_score = ms;
            o[w] = malloc(sizeof(float) * (size_t)c->ldt * c->NH * c->HS);
            chk[w] = (MpFwdCheck){.scores = c->bad || c->t0 > 0, .row = -1, .head = -1};
            run_attention(who[w], c, &h, o[w], &k[w], &chk[w]);
        }
        attn_compare(in, c, k, o, chk);
        if (c->bad && chk[0].row != 3) fail_msg("%s: the scores check found row %d, not 3", cur, chk[0].row);
        for (int w = 0; w < 2; w++) sink_free(&k[w]), free(o[w]);
        inst_reset(ref), inst_reset(in);
        qk_free(&h);
    }
}

/* ================================================================ elementwise */

/* Op `op` over n elements in `in`: out = op(a, b) (out in place of a when alias, and for the
 * in-place ops). */
static void run_elem(Inst *in, int op, float *out, const float *a, const float *b, size_t n, int alias) {
    float *da = inst_put(in, a, n), *db = b ? inst_put(in, b, n) : NULL, *dout = alias ? da : inst_put(in, NULL, n);
    MpFwdCtx *c = in->ctx;
    inst_run(in);
    switch (op) {
    case MP_FWD_OP_SWIGLU: in->ops->swiglu(c, dout, da, db, n); break;
    case MP_FWD_OP_GEGLU: in->ops->geglu(c, dout, da, db, n); break;
    case MP_FWD_OP_GELU: in->ops->gelu(c, dout, da, n); break;
    case MP_FWD_OP_COPY: in->ops->copy(c, dout, da, n); break;
    case MP_FWD_OP_SOFTCAP: in->ops->softcap(c, dout = da, n, 30.0f); break;
    case MP_FWD_OP_SCALE: in->ops->scale(c, dout = da, n, 48.0f); break;
    case MP_FWD_OP_ADD: in->ops->add(c, dout = da, db, n); break;
    case MP_FWD_OP_ZERO: in->ops->zero(c, dout = da, n); break;
    default: fail_msg("run_elem: op %d", op);
    }
    inst_get(in, out, dout, sizeof(float) * n);
}

static void ops_elementwise(Inst *ref, Inst *in) {
    static const int op[] = {MP_FWD_OP_SWIGLU, MP_FWD_OP_GEGLU, MP_FWD_OP_GELU, MP_FWD_OP_COPY,
                             MP_FWD_OP_SOFTCAP, MP_FWD_OP_SCALE, MP_FWD_OP_ADD, MP_FWD_OP_ZERO};
    static const size_t ns[] = {1, 17, 4096, 4097, 10007};
    for (size_t o = 0; o < sizeof op / sizeof op[0]; o++)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; s++)
            for (int alias = 0; alias < 2; alias++) {
                const size_t n = ns[s];
                const int two = op[o] == MP_FWD_OP_SWIGLU || op[o] == MP_FWD_OP_GEGLU || op[o] == MP_FWD_OP_ADD;
                snprintf(cur, sizeof cur, "%s n %zu%s", mp_fwd_op_name(op[o]), n, alias ? " in place" : "");
                if (alias && op[o] == MP_FWD_OP_COPY) continue; /* copy: no overlap */
                float *a = host_fill(n, (uint32_t)(o * 10 + s), op[o] == MP_FWD_OP_SOFTCAP ? 10 : 200), *b = host_fill(n, 99, 200);
                float *x = malloc(sizeof(float) * n), *r = malloc(sizeof(float) * n);
                run_elem(ref, op[o], r, a, two ? b : NULL, n, alias);
                const long c0 = bk_calls[op[o]];
                run_elem(in, op[o], x, a, two ? b : NULL, n, alias);
                case_done(in, op[o], c0);
                check_f32(in, op[o], "out", x, r, n);
                inst_reset(ref), inst_reset(in);
                free(a), free(b), free(x), free(r);
            }
}

/* bf16_round of x [rows, ld] (n per row) and add_bias (b [n]) in `in`; the gaps keep their values. */
static void run_rows(Inst *in, int op, float *out, const float *x, const float *b, int64_t rows, int64_t ld, int64_t n) {
    float *dx = inst_put(in, x, (size_t)(rows * ld)), *db = inst_put(in, b, (size_t)n);
    inst_run(in);
    if (op == MP_FWD_OP_BF16_ROUND) in->ops->bf16_round(in->ctx, dx, ld, rows, n);
    else in->ops->add_bias(in->ctx, dx, ld, db, n, rows);
    inst_get(in, out, dx, sizeof(float) * (size_t)(rows * ld));
}

static void ops_rows(Inst *ref, Inst *in) {
    static const int64_t sh[][3] = {{1, 1, 1}, {3, 10, 7}, {50, 100, 100}, {700, 300, 290}};
    static const int ops[] = {MP_FWD_OP_BF16_ROUND, MP_FWD_OP_ADD_BIAS};
    for (size_t o = 0; o < 2; o++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
            const int op = ops[o];
            const int64_t rows = sh[s][0], ld = sh[s][1], n = sh[s][2];
            snprintf(cur, sizeof cur, "%s rows %lld ld %lld n %lld", mp_fwd_op_name(op), (long long)rows, (long long)ld, (long long)n);
            float *x = host_fill((size_t)(rows * ld), (uint32_t)s + 4, 3.3f), *b = host_fill((size_t)n, 5, 7);
            if (rows * ld > 10) x[3] = NAN, x[5] = -INFINITY, x[7] = 3.4e38f, x[9] = 1e-40f; /* NaN, Inf, overflow and subnormal rounding */
            float *a = malloc(sizeof(float) * (size_t)(rows * ld)), *r = malloc(sizeof(float) * (size_t)(rows * ld));
            run_rows(ref, op, r, x, b, rows, ld, n);
            const long c0 = bk_calls[op];
            run_rows(in, op, a, x, b, rows, ld, n);
            case_done(in, op, c0);
            check_f32(in, op, "x", a, r, (size_t)(rows * ld));
            inst_reset(ref), inst_reset(in);
            free(x), free(b), free(a), free(r);
        }
}

/* ================================================================ reductions */

static void ops_amax(Inst *ref, Inst *in) {
    enum { N = 100003 };
    float *x = host_fill(N, 17, 1000);
    x[10] = NAN, x[2000] = -INFINITY, x[50000] = -123.5f;
    static const size_t span[][2] = {{0, 9}, {0, 11}, {1000, 1500}, {2000, 2001}, {3000, 3000}, {40000, N}, {0, N}};
    const int ns = (int)(sizeof span / sizeof span[0]);
    uint32_t out[2][8];
    Inst *who[2] = {ref, in};
    snprintf(cur, sizeof cur, "amax of %d spans (NaN, -Inf, empty, all)", ns);
    for (int w = 0; w < 2; w++) {
        float *d = inst_put(who[w], x, N);
        MpFwdSpan t[8];
        for (int k = 0; k < ns; k++) t[k] = (MpFwdSpan){d + span[k][0], span[k][1] - span[k][0]};
        const long c0 = bk_calls[MP_FWD_OP_AMAX];
        inst_run(who[w]);
        who[w]->ops->amax(who[w]->ctx, out[w], t, ns);
        if (w) case_done(in, MP_FWD_OP_AMAX, c0);
    }
    if (memcmp(out[0], out[1], sizeof(uint32_t) * (size_t)ns)) fail_msg("%s: %s: differ from the reference", in->ops->name, cur);
    assert_true(out[0][0] < MP_FWD_CHECK_NONFINITE && out[0][1] >= MP_FWD_CHECK_NONFINITE && out[0][3] == 0x7f800000u && out[0][4] == 0);
    inst_reset(ref), inst_reset(in);
    free(x);
}

/* ================================================================ mixture of experts */

typedef struct MoeCase {
    int n, E, KE, C, norm;
} MoeCase;

/* The routing of p [n, E] logits in `in`: probabilities, weights [n, KE], choices [n, KE] and the
 * count per expert [E]. */
static void run_route(Inst *in, const MoeCase *m, const float *logits, float *p, float *w, int32_t *sel, int32_t *cnt) {
    const size_t nE = (size_t)m->n * m->E, nK = (size_t)m->n * m->KE;
    float *dp = inst_put(in, logits, nE), *dw = inst_put(in, NULL, nK);
    int32_t *ds = inst_buf(in, sizeof(int32_t) * nK);
    const long c0 = bk_calls[MP_FWD_OP_MOE_ROUTE], c1 = bk_calls[MP_FWD_OP_MOE_COUNT];
    inst_run(in);
    in->ops->moe_route(in->ctx, dp, dw, ds, m->n, m->E, m->KE, m->norm);
    in->ops->moe_count(in->ctx, cnt, ds, m->n, m->KE, m->E);
    if (in->threads == 2) case_done(in, MP_FWD_OP_MOE_ROUTE, c0), case_done(in, MP_FWD_OP_MOE_COUNT, c1);
    inst_get(in, p, dp, sizeof(float) * nE);
    inst_get(in, w, dw, sizeof(float) * nK);
    inst_get(in, sel, ds, sizeof(int32_t) * nK);
}

/* Expert j's gathered rows (xg [cnt, C], rows [cnt]) of x [n, C] by sel, then its outputs o times
 * the weights wt added into y [n, C]; and qwen2moe's shared mix of o into y2 with the gate. */
static void run_experts(Inst *in, const MoeCase *m, const int32_t *sel, const int32_t *cnt, const float *x, const float *o,
                        const float *wt, const float *gate, float *xg, int32_t *rows, float *y, float *y2, float *sl) {
    const size_t nC = (size_t)m->n * m->C;
    float *dx = inst_put(in, x, nC), *dy = inst_put(in, y, nC), *dy2 = inst_put(in, y2, nC), *dxg = inst_put(in, NULL, nC);
    float *dw = inst_put(in, wt, (size_t)m->n * m->KE), *dg = inst_put(in, gate, (size_t)m->C), *dsl = inst_put(in, NULL, (size_t)m->n);
    float *dout = inst_put(in, o, nC);
    int32_t *ds = inst_put_bytes(in, sel, sizeof(int32_t) * (size_t)m->n * m->KE), *dr = inst_buf(in, sizeof(int32_t) * (size_t)m->n * m->KE);
    size_t off = 0;
    inst_run(in);
    for (int j = 0; j < m->E; j++) {
        if (!cnt[j]) continue;
        const long c0 = bk_calls[MP_FWD_OP_MOE_GATHER], c1 = bk_calls[MP_FWD_OP_MOE_SCATTER];
        in->ops->moe_gather(in->ctx, dxg, dr, dx, ds, j, m->n, m->KE, m->C);
        in->ops->moe_scatter(in->ctx, dy, dout, dr, dw, cnt[j], m->KE, m->C);
        if (in->threads == 2) case_done(in, MP_FWD_OP_MOE_GATHER, c0), case_done(in, MP_FWD_OP_MOE_SCATTER, c1);
        inst_get(in, xg + off * m->C, dxg, sizeof(float) * (size_t)cnt[j] * m->C);
        inst_get(in, rows + off, dr, sizeof(int32_t) * (size_t)cnt[j]);
        off += (size_t)cnt[j];
    }
    const long c2 = bk_calls[MP_FWD_OP_MOE_SHARED_MIX];
    in->ops->moe_shared_mix(in->ctx, dy2, dsl, dout, dx, dg, m->n, m->C);
    if (in->threads == 2) case_done(in, MP_FWD_OP_MOE_SHARED_MIX, c2);
    inst_get(in, y, dy, sizeof(float) * nC);
    inst_get(in, y2, dy2, sizeof(float) * nC);
    inst_get(in, sl, dsl, sizeof(float) * (size_t)m->n);
}

/* Host buffers of one instance's MoE results. */
typedef struct MoeOut {
    float *p, *w, *xg, *y, *y2, *sl;
    int32_t *sel, *rows, cnt[16];
} MoeOut;

static void ops_moe(Inst *ref, Inst *in) {
    static const MoeCase cs[] = {{1, 4, 1, 8, 0}, {13, 8, 2, 24, 1}, {40, 4, 2, 64, 0}, {7, 16, 4, 16, 1}};
    for (size_t s = 0; s < sizeof cs / sizeof cs[0]; s++) {
        const MoeCase *m = &cs[s];
        const size_t nC = (size_t)m->n * m->C, nK = (size_t)m->n * m->KE;
        snprintf(cur, sizeof cur, "moe n %d E %d KE %d C %d norm_topk %d", m->n, m->E, m->KE, m->C, m->norm);
        float *logits = host_fill((size_t)m->n * m->E, (uint32_t)s + 30, 100), *x = host_fill(nC, 31, 100), *o = host_fill(nC, 32, 100);
        float *wt = host_fill(nK, 33, 1000), *gate = host_fill((size_t)m->C, 34, 300), *y0 = host_fill(nC, 35, 100);
        MoeOut r[2];
        Inst *who[2] = {ref, in};
        for (int w = 0; w < 2; w++) {
            MoeOut *q = &r[w];
            *q = (MoeOut){.p = malloc(sizeof(float) * (size_t)m->n * m->E), .w = malloc(sizeof(float) * nK), .xg = calloc(nK * m->C, 4),
                          .y = malloc(sizeof(float) * nC), .y2 = malloc(sizeof(float) * nC), .sl = malloc(sizeof(float) * (size_t)m->n),
                          .sel = malloc(sizeof(int32_t) * nK), .rows = calloc(nK, 4)};
            memcpy(q->y, y0, sizeof(float) * nC), memcpy(q->y2, y0, sizeof(float) * nC);
            run_route(who[w], m, logits, q->p, q->w, q->sel, q->cnt);
            /* the experts from the reference's choices, so that both see the same rows */
            run_experts(who[w], m, r[0].sel, r[0].cnt, x, o, wt, gate, q->xg, q->rows, q->y, q->y2, q->sl);
        }
        check_f32(in, MP_FWD_OP_MOE_ROUTE, "probabilities", r[1].p, r[0].p, (size_t)m->n * m->E);
        check_f32(in, MP_FWD_OP_MOE_ROUTE, "weights", r[1].w, r[0].w, nK);
        check_i32(in, "choices", r[1].sel, r[0].sel, nK);
        check_i32(in, "counts", r[1].cnt, r[0].cnt, (size_t)m->E);
        check_i32(in, "gathered rows", r[1].rows, r[0].rows, nK);
        check_f32(in, MP_FWD_OP_MOE_GATHER, "gathered inputs", r[1].xg, r[0].xg, nK * m->C);
        check_f32(in, MP_FWD_OP_MOE_SCATTER, "routed sum", r[1].y, r[0].y, nC);
        check_f32(in, MP_FWD_OP_MOE_SHARED_MIX, "shared mix", r[1].y2, r[0].y2, nC);
        check_f32(in, MP_FWD_OP_MOE_SHARED_MIX, "shared gate logits", r[1].sl, r[0].sl, (size_t)m->n);
        for (int w = 0; w < 2; w++) free(r[w].p), free(r[w].w), free(r[w].xg), free(r[w].y), free(r[w].y2), free(r[w].sl), free(r[w].sel), free(r[w].rows);
        inst_reset(ref), inst_reset(in);
        free(logits), free(x), free(o), free(wt), free(gate), free(y0);
    }
}

/* ================================================================ the suite */

/* Every op of instance `ops` against mp_fwd_ops_cpu; then every op id must have had cases. */
static void suite_run(const MpFwdOps *ops) {
    Inst ref, in;
    memset(stats, 0, sizeof stats);
    inst_open(&ref, &mp_fwd_ops_cpu, 1);
    inst_open(&in, ops, 2);
    ops_matmul(&ref, &in);
    ops_norms(&ref, &in);
    ops_rope_table(&ref, &in);
    ops_qk_prepare(&ref, &in);
    ops_attention(&ref, &in);
    ops_elementwise(&ref, &in);
    ops_rows(&ref, &in);
    ops_amax(&ref, &in);
    ops_moe(&ref, &in);
    inst_close(&in);
    inst_close(&ref);
    mp_test_set_threads(2);
    print_message("%s against cpu:\n", ops->name);
    for (int op = 0; op < MP_FWD_OP_COUNT; op++) {
        if (!stats[op].cases) fail_msg("%s: op %s has no cases", ops->name, mp_fwd_op_name(op));
        if (claims(&in, op)) print_message("  %-15s %3d cases, bit for bit\n", mp_fwd_op_name(op), stats[op].cases);
        else print_message("  %-15s %3d cases, max error %.2g of max |ref|\n", mp_fwd_op_name(op), stats[op].cases, stats[op].max_err);
    }
}

static void test_cpu(void **state) {
    (void)state;
    suite_run(&mp_fwd_ops_cpu); /* the reference against itself on 2 threads: the thread count changes no bit */
}

static void test_cpu_plain(void **state) {
    (void)state;
    suite_run(&mp_fwd_ops_cpu_plain);
}

static void test_counted_instance(void **state) {
    (void)state;
    bk_counted_make();
    suite_run(&bk_counted);
}

/* Each device instance this build has (mp_fwd_ops_for), on its first device: the same suite.
 * None built, or no device to open: skipped, saying which and why. */
static void test_device_instances(void **state) {
    (void)state;
    static const char *const devices[] = {"cuda"};
    int ran = 0;
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        MpErr e;
        const MpFwdOps *ops = mp_fwd_ops_for(devices[i], 0, &e);
        if (!ops) {
            print_message("device instance %s: %s\n", devices[i], e.msg);
            continue;
        }
        MpFwdCtx *c = ops->open(devices[i], 0, &e);
        if (!c) {
            print_message("device instance %s: built, but no device: %s\n", devices[i], e.msg);
            continue;
        }
        ops->close(c);
        suite_run(ops);
        ran++;
    }
    if (!ran) skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_cpu_plain),
        cmocka_unit_test(test_counted_instance),
        cmocka_unit_test(test_device_instances),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
