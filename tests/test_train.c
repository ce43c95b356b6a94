/* test_train.c — the trainable model (src/train/) and `maskpos train` against independent checks:
 *   - finite differences in double (the _f64 instance of model_impl.h) for every op's backward and
 *     for the whole model (RoPE and NoPE, tied and untied, GQA);
 *   - the f32 instance against the f64 instance (same weights, same batch);
 *   - tests/ref/train_ref.py (python3-torch, written from the spec) reproduces loss, every
 *     gradient and three AdamW steps from the same initial weights and batch;
 *   - a golden loss curve: the first 30 steps of a tiny run, values from the torch reference
 *     (data/fixtures/train/golden_loss.json, regenerated as docs/train.md says);
 *   - resume exactness (bit-identical files), 1 vs 2 threads, checkpoints open in `inspect`;
 *     a version-1 optimizer.bin (before --tokenizer) still resumes bit-identically;
 *   - --tokenizer with a small byte-level BPE tokenizer written here: the batches are windows
 *     of mp_tok_encode of the corpus (train split only), config.json carries the tokenizer's
 *     vocabulary and BOS, the tokenizer files are copied byte for byte, probe and gram run on
 *     the checkpoint with its own tokenizer, resume is bit-identical, another tokenizer (or
 *     one on a byte checkpoint) is refused;
 *   - bad input: too-small corpus (bytes and tokens), non-finite loss, unwritable --out, bad
 *     flags, malformed/missing/GGUF tokenizer, a vocabulary too large for memory → exit 2.
 */
#include "testutil.h"

#include <jansson.h>
#include <sys/stat.h>

#include "core/npy.h"     /* mp_npy_write: batches for the torch reference */
#include "core/rng.h"     /* MpRng: random test inputs */
#include "core/util.h"    /* mp_file_exists, mp_fnv1a64, mp_file_read_all */
#include "tok/tok.h"      /* mp_tok_init, mp_tok_encode: the ids --tokenizer must feed */
#include "train/train.h"  /* the model (f32, f64), optimiser, checkpoints */

#define FIXTURE MP_SOURCE_DIR "/data/fixtures/train/tiny.txt"

/* ================================ finite-difference helpers ============================== */

static void fill_normal(double *x, size_t n, uint64_t stream, double scale) {
    MpRng r;
    mp_rng_init(&r, 1234, stream);
    double buf[256];
    for (size_t i = 0; i < n; i += 256) {
        size_t k = n - i < 256 ? n - i : 256;
        mp_rng_normal_fill(&r, buf, 256);
        for (size_t j = 0; j < k; j++) x[i + j] = scale * buf[j];
    }
}

static double dot(const double *a, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Compares analytic gradient g[n] with central differences of f at x[n] (x is perturbed and
 * restored). Tolerance |g - fd| <= 1e-6 + 1e-5 |fd| (double, h = 1e-5: truncation ~1e-10).
 * Returns the max error relative to max(1, |fd|). */
typedef double (*FdFn)(void *ctx);
static double fd_check(const char *what, double *x, const double *g, size_t n, FdFn f, void *ctx) {
    const double h = 1e-5;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i];
        x[i] = x0 + h;
        double fp = f(ctx);
        x[i] = x0 - h;
        double fm = f(ctx);
        x[i] = x0;
        double fd = (fp - fm) / (2 * h);
        double err = fabs(g[i] - fd);
        double rel = err / (fabs(fd) > 1 ? fabs(fd) : 1);
        if (rel > worst) worst = rel;
        if (!(err <= 1e-6 + 1e-5 * fabs(fd)))
            fail_msg("%s[%zu]: backward %.10g, finite difference %.10g", what, i, g[i], fd);
    }
    print_message("  %-28s %5zu values, worst rel. diff %.2e\n", what, n, worst);
    return worst;
}

/* ===================================== per-op checks ===================================== */

typedef struct OpCtx {
    int op;
    int B, T, NH, NKV, HS, C, OC, N, V;
    double *a, *b, *c, *w, *wproj, *out, *aux, *aux2;
    int32_t *ids;
} OpCtx;

enum { OP_RMSNORM, OP_MATMUL, OP_ROPE, OP_ATTN, OP_SWIGLU, OP_CE, OP_EMBED };

/* Scalar objective sum(out * wproj) of the op's forward at the current inputs. */
static double op_loss(void *vctx) {
    OpCtx *c = vctx;
    size_t n = 0;
    switch (c->op) {
    case OP_RMSNORM:
        mp_train_rmsnorm_forward_f64(c->out, c->aux, c->a, c->w, c->N, c->C, 1e-5);
        n = (size_t)c->N * c->C;
        break;
    case OP_MATMUL:
        mp_train_matmul_forward_f64(c->out, c->a, c->w, c->N, c->C, c->OC);
        n = (size_t)c->N * c->OC;
        break;
    case OP_ROPE: {
        n = (size_t)c->B * c->T * c->NH * c->HS;
        memcpy(c->out, c->a, n * sizeof(double));
        mp_train_rope_forward_f64(c->out, c->aux, c->aux2, c->B, c->T, c->NH, c->HS);
        break;
    }
    case OP_ATTN: {
        n = (size_t)c->B * c->T * c->NH * c->HS;
        mp_train_attention_forward_f64(c->out, c->aux, c->aux2, c->a, c->b, c->c, c->B, c->T, c->NH, c->NKV, c->HS);
        break;
    }
    case OP_SWIGLU:
        n = (size_t)c->N * c->C;
        mp_train_swiglu_forward_f64(c->out, c->a, c->b, n);
        break;
    case OP_CE: {
        mp_train_crossentropy_forward_f64(c->out, c->aux, c->a, c->ids, c->N, c->V);
        double s = 0;
        for (int i = 0; i < c->N; i++) s += c->aux[i] * 0.7;
        return s;
    }
    case OP_EMBED:
        mp_train_embed_forward_f64(c->out, c->ids, c->w, c->N, c->C);
        n = (size_t)c->N * c->C;
        break;
    }
    return dot(c->out, c->wproj, n);
}

static void test_fd_ops(void **state) {
    (void)state;
    enum { B = 2, T = 5, NH = 4, NKV = 2, HS = 6, C = 7, OC = 5, V = 9 };
    const int N = B * T;
    size_t big = (size_t)B * T * NH * HS * 4 + (size_t)B * NH * T * T + 4096;
    double *a = calloc(big, 8), *b = calloc(big, 8), *c = calloc(big, 8), *w = calloc(big, 8), *wp = calloc(big, 8);
    double *out = calloc(big, 8), *aux = calloc(big, 8), *aux2 = calloc(big, 8);
    double *da = calloc(big, 8), *db = calloc(big, 8), *dc = calloc(big, 8), *dw = calloc(big, 8), *scr = calloc(big, 8);
    int32_t ids[B * T] = {3, 1, 4, 1, 5, 8, 2, 6, 5, 3};
    OpCtx x = {.B = B, .T = T, .NH = NH, .NKV = NKV, .HS = HS, .C = C, .OC = OC, .N = N, .V = V, .a = a, .b = b,
               .c = c, .w = w, .wproj = wp, .out = out, .aux = aux, .aux2 = aux2, .ids = ids};
    fill_normal(wp, big, 99, 1.0);

    /* RMSNorm: dinp and dw */
    x.op = OP_RMSNORM;
    fill_normal(a, (size_t)N * C, 1, 1.0);
    fill_normal(w, C, 2, 0.5);
    for (int i = 0; i < C; i++) w[i] += 1;
    op_loss(&x);
    memset(da, 0, big * 8);
    memset(dw, 0, big * 8);
    mp_train_rmsnorm_backward_f64(da, dw, wp, a, w, aux, N, C);
    fd_check("rmsnorm dinp", a, da, (size_t)N * C, op_loss, &x);
    fd_check("rmsnorm dw", w, dw, C, op_loss, &x);

    /* matmul: dinp and dw */
    x.op = OP_MATMUL;
    fill_normal(a, (size_t)N * C, 3, 1.0);
    fill_normal(w, (size_t)OC * C, 4, 0.5);
    memset(da, 0, big * 8);
    memset(dw, 0, big * 8);
    mp_train_matmul_backward_f64(da, dw, wp, a, w, N, C, OC);
    fd_check("matmul dinp", a, da, (size_t)N * C, op_loss, &x);
    fd_check("matmul dw", w, dw, (size_t)OC * C, op_loss, &x);

    /* RoPE (theta small so every pair rotates visibly) */
    x.op = OP_ROPE;
    mp_train_rope_table_f64(aux, aux2, T, HS, 10.0);
    size_t nq = (size_t)B * T * NH * HS;
    fill_normal(a, nq, 5, 1.0);
    memcpy(da, wp, nq * 8);
    mp_train_rope_backward_f64(da, aux, aux2, B, T, NH, HS);
    fd_check("rope dx", a, da, nq, op_loss, &x);

    /* attention with GQA: dq, dk, dv */
    x.op = OP_ATTN;
    size_t nk = (size_t)B * T * NKV * HS;
    fill_normal(a, nq, 6, 1.0);
    fill_normal(b, nk, 7, 1.0);
    fill_normal(c, nk, 8, 1.0);
    op_loss(&x);
    memset(da, 0, big * 8);
    memset(db, 0, big * 8);
    memset(dc, 0, big * 8);
    mp_train_attention_backward_f64(da, db, dc, scr, aux2, wp, aux, a, b, c, B, T, NH, NKV, HS);
    /* masked entries are exact zeros */
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++)
            for (int s = t + 1; s < T; s++) assert_true(aux[((size_t)bh * T + t) * T + s] == 0.0);
    fd_check("attention dq", a, da, nq, op_loss, &x);
    fd_check("attention dk", b, db, nk, op_loss, &x);
    fd_check("attention dv", c, dc, nk, op_loss, &x);

    /* SwiGLU */
    x.op = OP_SWIGLU;
    fill_normal(a, (size_t)N * C, 9, 2.0);
    fill_normal(b, (size_t)N * C, 10, 1.0);
    memset(da, 0, big * 8);
    memset(db, 0, big * 8);
    mp_train_swiglu_backward_f64(da, db, wp, a, b, (size_t)N * C);
    fd_check("swiglu dgate", a, da, (size_t)N * C, op_loss, &x);
    fd_check("swiglu dup", b, db, (size_t)N * C, op_loss, &x);

    /* cross-entropy: objective 0.7 * sum(losses) */
    x.op = OP_CE;
    fill_normal(a, (size_t)N * V, 11, 2.0);
    op_loss(&x);
    memset(da, 0, big * 8);
    mp_train_crossentropy_backward_f64(da, out, ids, 0.7, N, V);
    fd_check("cross-entropy dlogits", a, da, (size_t)N * V, op_loss, &x);

    /* embedding */
    x.op = OP_EMBED;
    fill_normal(w, (size_t)V * C, 12, 1.0);
    memset(dw, 0, big * 8);
    mp_train_embed_backward_f64(dw, wp, ids, N, C);
    fd_check("embedding dwte", w, dw, (size_t)V * C, op_loss, &x);

    free(a), free(b), free(c), free(w), free(wp), free(out), free(aux), free(aux2);
    free(da), free(db), free(dc), free(dw), free(scr);
}

/* The register-blocked matmul (transposed weights) and the blocked backward equal the one-row
 * reference loops bit for bit, on shapes with leftovers in every blocked dimension. */
static void test_matmul_variants(void **state) {
    (void)state;
    const int shapes[][3] = {{1, 1, 1}, {4, 16, 16}, {7, 13, 37}, {33, 64, 50}, {9, 5, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int N = shapes[s][0], IC = shapes[s][1], OC = shapes[s][2];
        double *buf = malloc(sizeof(double) * (size_t)(N * IC + OC * IC + N * OC));
        fill_normal(buf, (size_t)(N * IC + OC * IC + N * OC), 50 + s, 1.0);
        float *x = malloc(sizeof(float) * (size_t)N * IC), *w = malloc(sizeof(float) * (size_t)OC * IC);
        float *wt = malloc(sizeof(float) * (size_t)OC * IC), *dy = malloc(sizeof(float) * (size_t)N * OC);
        float *o1 = calloc((size_t)N * OC, 4), *o2 = calloc((size_t)N * OC, 4);
        float *dx1 = calloc((size_t)N * IC, 4), *dw1 = calloc((size_t)OC * IC, 4);
        for (int i = 0; i < N * IC; i++) x[i] = (float)buf[i];
        for (int i = 0; i < OC * IC; i++) w[i] = (float)buf[N * IC + i];
        for (int i = 0; i < N * OC; i++) dy[i] = (float)buf[N * IC + OC * IC + i];
        mp_train_matmul_forward_f32(o1, x, w, N, IC, OC);
        mp_train_transpose_f32(wt, w, OC, IC);
        mp_train_matmul_forward_wt_f32(o2, x, wt, N, IC, OC);
        assert_memory_equal(o1, o2, sizeof(float) * (size_t)N * OC);
        /* backward against one-row loops written here, summing in the same index order */
        mp_train_matmul_backward_f32(dx1, dw1, dy, x, w, N, IC, OC);
        for (int n = 0; n < N; n++)
            for (int i = 0; i < IC; i++) {
                float v = 0;
                for (int o = 0; o < OC; o++) v += dy[n * OC + o] * w[o * IC + i];
                assert_true(v == dx1[n * IC + i]);
            }
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < IC; i++) {
                float v = 0;
                for (int n = 0; n < N; n++) v += dy[n * OC + o] * x[n * IC + i];
                assert_true(v == dw1[o * IC + i]);
            }
        free(buf), free(x), free(w), free(wt), free(dy), free(o1), free(o2), free(dx1), free(dw1);
    }
}

/* ==================================== whole-model checks ================================= */

static void tiny_config(MpTrainConfig *c, MpTrainPos pos, int tie) {
    mp_train_config_default(c);
    c->layers = 2;
    c->dim = 8;
    c->heads = 2;
    c->kv_heads = 1;
    c->ffn = 12;
    c->vocab = 11;
    c->seq = 5;
    c->batch = 2;
    c->pos = pos;
    c->rope_theta = 10.0;
    c->tie = tie;
    c->init_std = 0.3; /* large weights: every path carries gradient */
}

typedef struct ModelCtx {
    MpTrainModel_f64 *m;
    const int32_t *in, *tg;
} ModelCtx;

static double model_loss(void *v) {
    ModelCtx *c = v;
    return mp_train_forward_f64(c->m, c->in, c->tg);
}

static void random_batch(int32_t *in, int32_t *tg, int n, int V, uint64_t stream) {
    MpRng r;
    mp_rng_init(&r, 77, stream);
    for (int i = 0; i < n; i++) {
        in[i] = (int32_t)(mp_rng_u32(&r) % (uint32_t)V);
        tg[i] = (int32_t)(mp_rng_u32(&r) % (uint32_t)V);
    }
}

static void params_to_f64(double *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

static void test_fd_model(void **state) {
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        MpTrainConfig cfg;
        tiny_config(&cfg, variant == 1 ? MP_TRAIN_POS_NONE : MP_TRAIN_POS_ROPE, variant == 2);
        MpErr e;
        assert_int_equal(mp_train_config_check(&cfg, &e), MP_OK);
        MpTrainModel_f64 m;
        assert_int_equal(mp_train_model_init_f64(&m, &cfg, &e), MP_OK);
        float *p32 = malloc(m.lay.total * sizeof(float));
        mp_train_init_params(p32, &m.lay, &cfg, 5 + (uint64_t)variant);
        params_to_f64(m.params, p32, m.lay.total);
        /* norms away from 1 so their gradients are exercised off the identity */
        for (int i = 0; i < m.lay.n; i++)
            if (m.lay.t[i].ndim == 1)
                for (size_t j = 0; j < m.lay.t[i].n; j++) m.params[m.lay.t[i].off + j] = 1 + 0.3 * sin((double)j + i);
        int32_t in[10], tg[10];
        random_batch(in, tg, 10, cfg.vocab, (uint64_t)variant);
        double loss = mp_train_forward_f64(&m, in, tg);
        assert_true(isfinite(loss));
        mp_train_backward_f64(&m, in);
        double *g = malloc(m.lay.total * sizeof(double));
        memcpy(g, m.grads, m.lay.total * sizeof(double));
        print_message("model %s%s: loss %.6f, %zu parameters\n", variant == 1 ? "NoPE" : "RoPE",
                      variant == 2 ? " tied" : "", loss, m.lay.total);
        ModelCtx ctx = {&m, in, tg};
        double worst = 0;
        for (int i = 0; i < m.lay.n; i++) {
            double w = fd_check(m.lay.t[i].name, m.params + m.lay.t[i].off, g + m.lay.t[i].off, m.lay.t[i].n,
                                model_loss, &ctx);
            if (w > worst) worst = w;
        }
        print_message("  whole model: worst rel. diff %.2e\n", worst);
        free(g);
        free(p32);
        mp_train_model_free_f64(&m);
    }
}

/* f32 training instance vs f64 reference: same weights and batch. Tolerance 2e-4 of the
 * largest gradient of each tensor (f32 rounding through ~20 ops; measured ~1e-6). */
static void test_f32_matches_f64(void **state) {
    (void)state;
    MpTrainConfig cfg;
    tiny_config(&cfg, MP_TRAIN_POS_ROPE, 0);
    cfg.dim = 16;
    cfg.heads = 4;
    cfg.kv_heads = 2;
    cfg.init_std = 0.1;
    MpErr e;
    assert_int_equal(mp_train_config_check(&cfg, &e), MP_OK);
    MpTrainModel_f32 m32;
    MpTrainModel_f64 m64;
    assert_int_equal(mp_train_model_init_f32(&m32, &cfg, &e), MP_OK);
    assert_int_equal(mp_train_model_init_f64(&m64, &cfg, &e), MP_OK);
    mp_train_init_params(m32.params, &m32.lay, &cfg, 3);
    params_to_f64(m64.params, m32.params, m32.lay.total);
    int32_t in[10], tg[10];
    random_batch(in, tg, 10, cfg.vocab, 9);
    double l32 = mp_train_forward_f32(&m32, in, tg), l64 = mp_train_forward_f64(&m64, in, tg);
    print_message("loss f32 %.9f f64 %.9f\n", l32, l64);
    assert_true(fabs(l32 - l64) < 1e-5);
    mp_train_backward_f32(&m32, in);
    mp_train_backward_f64(&m64, in);
    double worst = 0;
    for (int i = 0; i < m32.lay.n; i++) {
        const MpTrainTensor *t = &m32.lay.t[i];
        double gmax = 0, emax = 0;
        for (size_t j = 0; j < t->n; j++) {
            double r = m64.grads[t->off + j];
            gmax = fabs(r) > gmax ? fabs(r) : gmax;
            double d = fabs((double)m32.grads[t->off + j] - r);
            emax = d > emax ? d : emax;
        }
        double rel = emax / (gmax > 0 ? gmax : 1);
        if (rel > worst) worst = rel;
        if (!(rel < 2e-4)) fail_msg("%s: f32 vs f64 gradient error %.3g of max %.3g", t->name, emax, gmax);
    }
    print_message("f32 vs f64 gradients: max |diff| / max |g| per tensor = %.2e\n", worst);
    mp_train_model_free_f32(&m32);
    mp_train_model_free_f64(&m64);
}

/* ====================================== torch reference ================================== */

static int run_python(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run_python(char *out, size_t cap, const char *fmt, ...) {
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    return mp_test_shell(out, cap, "/usr/bin/python3 %s/tests/ref/train_ref.py %s", MP_SOURCE_DIR, args);
}

/* The C side of one training step (3 AdamW steps on the same batch): writes the initial
 * checkpoint, the batch, the gradients of step 1 and the weights after each step; the torch
 * script recomputes all of it from the checkpoint and the batch. */
static void test_torch_reference(void **state) {
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0) skip();
    for (int variant = 0; variant < 2; variant++) {
        MpTrainConfig cfg;
        mp_train_config_default(&cfg);
        cfg.layers = 2;
        cfg.dim = 16;
        cfg.heads = 4;
        cfg.kv_heads = 2;
        cfg.ffn = 24;
        cfg.vocab = 256;
        cfg.seq = 12;
        cfg.batch = 3;
        cfg.pos = variant ? MP_TRAIN_POS_NONE : MP_TRAIN_POS_ROPE;
        cfg.tie = variant;
        cfg.init_std = 0.1;
        MpErr e;
        assert_int_equal(mp_train_config_check(&cfg, &e), MP_OK);
        MpTrainModel_f32 m;
        assert_int_equal(mp_train_model_init_f32(&m, &cfg, &e), MP_OK);
        mp_train_init_params(m.params, &m.lay, &cfg, 21);
        size_t np = m.lay.total;
        float *mm = calloc(np, 4), *vv = calloc(np, 4);
        MpTrainOptConfig o;
        mp_train_opt_default(&o);
        o.lr = 1e-2;
        o.warmup = 2;
        o.steps = 3;
        o.clip = 0.5; /* below the initial norm: clipping is exercised */
        const char *d = mp_test_tmpdir();
        char path[512];
        MpTrainOptHeader h;
        memset(&h, 0, sizeof h);
        memcpy(h.magic, MP_TRAIN_OPT_MAGIC, 8);
        h.version = MP_TRAIN_OPT_VERSION;
        h.header_bytes = sizeof h;
        h.n_params = np;
        snprintf(path, sizeof path, "%s/init", d);
        assert_int_equal(mp_train_ckpt_write(path, &cfg, &m.lay, m.params, mm, vv, &h, 0, &e), MP_OK);
        int32_t in[36], tg[36];
        random_batch(in, tg, 36, 256, 40 + (uint64_t)variant);
        int32_t both[72];
        memcpy(both, in, sizeof in);
        memcpy(both + 36, tg, sizeof tg);
        int64_t shp[3] = {2, 3, 12};
        snprintf(path, sizeof path, "%s/batch.npy", d);
        assert_int_equal(mp_npy_write(path, MP_DT_I32, both, 3, shp, &e), MP_OK);
        double losses[3], norms[3];
        for (int s = 0; s < 3; s++) {
            losses[s] = mp_train_forward_f32(&m, in, tg);
            mp_train_backward_f32(&m, in);
            if (s == 0) {
                snprintf(path, sizeof path, "%s/grads.safetensors", d);
                assert_int_equal(mp_train_safetensors_write(path, &m.lay, m.grads, 0, &e), MP_OK);
            }
            norms[s] = mp_train_clip(m.grads, np, o.clip);
            mp_train_adamw(m.params, mm, vv, m.grads, &m.lay, &o, mp_train_lr(&o, s), s + 1);
            snprintf(path, sizeof path, "%s/after%d.safetensors", d, s + 1);
            assert_int_equal(mp_train_safetensors_write(path, &m.lay, m.params, 0, &e), MP_OK);
        }
        char out[16384];
        int rc = run_python(out, sizeof out,
                            "step --ckpt %s/init --batch %s/batch.npy --grads %s/grads.safetensors --after %s/after "
                            "--steps 3 --lr 1e-2 --warmup 2 --total 3 --clip 0.5 --loss %.9g,%.9g,%.9g --norm %.9g",
                            d, d, d, d, losses[0], losses[1], losses[2], norms[0]);
        print_message("%s", out);
        if (rc != 0) fail_msg("torch reference disagrees (variant %d)", variant);
        free(mm);
        free(vv);
        mp_train_model_free_f32(&m);
    }
}

/* ======================================= CLI runs ======================================== */

#define TINY_FLAGS "--layers 2 --dim 16 --heads 4 --kv-heads 2 --ffn 32 --seq 16 --batch 4 --lr 3e-3 --warmup 5 --quiet"

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

/* The files[0..n) of checkpoint step `step` in run directories a and b are byte-identical. */
static void assert_same_checkpoint(const char *a, const char *b, int step, const char *const *files, int n,
                                   const char *what) {
    char p1[900], p2[900];
    for (int i = 0; i < n; i++) {
        snprintf(p1, sizeof p1, "%s/step-%06d/%s", a, step, files[i]);
        snprintf(p2, sizeof p2, "%s/step-%06d/%s", b, step, files[i]);
        if (!files_equal(p1, p2)) fail_msg("%s: %s differs from the uninterrupted run", what, files[i]);
    }
}

/* Rewrites the version-3 optimizer.bin src as the version-1 file of the same state (200-byte
 * header without tok_hash, checksum recomputed), as written before --tokenizer existed. The
 * layout is written out here from docs/train.md, not taken from ckpt.c. */
static void opt_write_v1(const char *dst, const char *src) {
    char *buf;
    size_t n;
    MpErr e;
    assert_int_equal(mp_file_read_all(src, (size_t)1 << 30, "test", &buf, &n, &e), MP_OK);
    assert_true(n > 216);
    uint32_t ver, hb;
    uint64_t tok_hash;
    memcpy(&ver, buf + 8, 4);
    memcpy(&hb, buf + 12, 4);
    memcpy(&tok_hash, buf + 200, 8);
    assert_int_equal(ver, 3);
    assert_int_equal(hb, 240);
    assert_true(tok_hash == 0); /* a byte-vocabulary run */
    size_t body = n - 240 - 8;  /* m and v */
    char *o = malloc(200 + body + 8);
    memcpy(o, buf, 200);
    ver = 1;
    hb = 200;
    memcpy(o + 8, &ver, 4);
    memcpy(o + 12, &hb, 4);
    memcpy(o + 200, buf + 240, body);
    uint64_t h = mp_fnv1a64(o, 200 + body, MP_FNV_INIT);
    memcpy(o + 200 + body, &h, 8);
    mp_test_write_file(dst, o, 200 + body + 8);
    free(o);
    free(buf);
}

/* --resume keeps the run's --checkpoint-every and --eval-every (issue 31: 5 became 100); an
 * interval given on resume overrides the checkpoint's. */
static void test_resume_keeps_intervals(void **state) {
    (void)state;
    const char *a = mp_test_tmpdir(), *b = mp_test_tmpdir();
    char out[8192], p[600];
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 20 --checkpoint-every 5 --eval-every 2 --stop-after 5 "
                         "--data %s --out %s --quiet", FIXTURE, a);
    if (rc) fail_msg("train: %s", out);
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000005 --data %s --out %s --quiet", a, FIXTURE, a);
    if (rc) fail_msg("train --resume: %s", out);
    for (int s = 5; s <= 20; s += 5) {
        snprintf(p, sizeof p, "%s/step-%06d", a, s);
        if (!mp_file_exists(p)) fail_msg("resumed run: no %s (--checkpoint-every 5 not kept)", p);
    }
    /* validation every 2 steps after the resume too: log.csv rows 6..20 have val_loss on even steps */
    snprintf(p, sizeof p, "%s/log.csv", a);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    char line[512];
    int with_val = 0;
    while (fgets(line, sizeof line, f)) {
        int step;
        double lr, loss, norm, val;
        if (sscanf(line, "%d,%lf,%lf,%lf,%lf", &step, &lr, &loss, &norm, &val) == 5 && step > 5) with_val++;
    }
    fclose(f);
    assert_int_equal(with_val, 8); /* 6, 8, ..., 20 */
    /* an interval given on resume wins */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 20 --checkpoint-every 5 --stop-after 5 --data %s --out %s "
                     "--quiet", FIXTURE, b);
    if (rc) fail_msg("train: %s", out);
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000005 --checkpoint-every 10 --data %s --out %s --quiet", b,
                     FIXTURE, b);
    if (rc) fail_msg("train --resume --checkpoint-every 10: %s", out);
    snprintf(p, sizeof p, "%s/step-000010", b);
    assert_true(mp_file_exists(p));
    snprintf(p, sizeof p, "%s/step-000015", b);
    assert_false(mp_file_exists(p));
}

static void test_resume_exact(void **state) {
    (void)state;
    const char *a = mp_test_tmpdir(), *b = mp_test_tmpdir(), *c2 = mp_test_tmpdir();
    char out[8192], p1[600], p2[600];
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 8 --checkpoint-every 4 --data %s --out %s --threads 1",
                         FIXTURE, a);
    if (rc) fail_msg("train: %s", out);
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 8 --checkpoint-every 4 --stop-after 4 --data %s --out %s",
                     FIXTURE, b);
    if (rc) fail_msg("train --stop-after: %s", out);
    snprintf(p1, sizeof p1, "%s/step-000008", b);
    assert_false(mp_file_exists(p1));
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000004 --data %s --out %s --threads 2 --quiet", b, FIXTURE, b);
    if (rc) fail_msg("train --resume: %s", out);
    static const char *files[] = {"model.safetensors", "optimizer.bin", "config.json"};
    assert_same_checkpoint(a, b, 8, files, 3, "resumed");
    /* the resumed run continued log.csv: 8 rows */
    snprintf(p1, sizeof p1, "%s/log.csv", b);
    FILE *lf = fopen(p1, "r");
    assert_non_null(lf);
    int rows = 0;
    char line[512];
    while (fgets(line, sizeof line, lf)) rows++;
    fclose(lf);
    assert_int_equal(rows, 1 + 8);
    /* conversion only: BF16 copy of the step-8 weights, opened by the loader */
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000008 --steps 8 --data %s --out %s --export-bf16 %s/bf16 --quiet",
                     b, FIXTURE, b, b);
    if (rc) fail_msg("export: %s", out);
    rc = mp_test_run(out, sizeof out, "inspect %s/bf16", b);
    if (rc) fail_msg("inspect bf16: %s", out);
    /* thread count does not matter */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 8 --checkpoint-every 8 --data %s --out %s --threads 2",
                     FIXTURE, c2);
    if (rc) fail_msg("train: %s", out);
    snprintf(p1, sizeof p1, "%s/step-000008/model.safetensors", a);
    snprintf(p2, sizeof p2, "%s/step-000008/model.safetensors", c2);
    assert_true(files_equal(p1, p2));
    /* the project's loader opens the checkpoint */
    rc = mp_test_run(out, sizeof out, "inspect %s/step-000008", a);
    if (rc) fail_msg("inspect: %s", out);
    assert_non_null(strstr(out, "llama"));
    /* a version-1 optimizer.bin (written before --tokenizer existed) still resumes exactly */
    const char *v1 = mp_test_tmpdir();
    rc = mp_test_shell(out, sizeof out, "mkdir -p %s/step-000004 && cp %s/step-000004/config.json "
                       "%s/step-000004/model.safetensors %s/step-000004/", v1, b, b, v1);
    if (rc) fail_msg("copy: %s", out);
    snprintf(p1, sizeof p1, "%s/step-000004/optimizer.bin", b);
    snprintf(p2, sizeof p2, "%s/step-000004/optimizer.bin", v1);
    opt_write_v1(p2, p1);
    /* (a version-1 or -2 file does not record the intervals: given, the resumed run's optimizer.bin
     * records the same ones as the uninterrupted run's) */
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000004 --checkpoint-every 4 --data %s --out %s --quiet", v1,
                     FIXTURE, v1);
    if (rc) fail_msg("train --resume (version 1): %s", out);
    assert_same_checkpoint(a, v1, 8, files, 2, "resumed from version 1");
    print_message("resume after step 4 → step 8 bit-identical (weights, optimiser state; also from a version-1 "
                  "optimizer.bin); 1 = 2 threads\n");
}

/* --data as a .jsonl file or a directory of .txt files: the documents joined by a blank line, so
 * training on them equals training on the joined text written here by hand. */
static void test_document_corpora(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    static char doc[2][4096], jsonl[9000], joined[9000];
    for (int k = 0; k < 2; k++) { /* multi-line, no blank line inside */
        doc[k][0] = '\0';
        for (int i = 0; i < 60; i++)
            snprintf(doc[k] + strlen(doc[k]), sizeof doc[k] - strlen(doc[k]), "line %d of document %c: words %d\n", i,
                     'A' + k, i * (k + 3));
        doc[k][strlen(doc[k]) - 1] = '\0'; /* no trailing newline: the reader drops it anyway */
    }
    snprintf(joined, sizeof joined, "%s\n\n%s", doc[0], doc[1]);
    size_t jl = 0;
    for (int k = 0; k < 2; k++) {
        jl += (size_t)snprintf(jsonl + jl, sizeof jsonl - jl, "{\"text\": \"");
        for (const char *c = doc[k]; *c; c++) {
            if (*c == '\n') jsonl[jl++] = '\\', jsonl[jl++] = 'n';
            else jsonl[jl++] = *c;
        }
        jl += (size_t)snprintf(jsonl + jl, sizeof jsonl - jl, "\"}\n");
    }
    char p[600], out[8192], a[600], b[600];
    snprintf(p, sizeof p, "%s/joined.txt", d);
    mp_test_write_file(p, joined, strlen(joined));
    snprintf(p, sizeof p, "%s/c.jsonl", d);
    mp_test_write_file(p, jsonl, strlen(jsonl));
    assert_int_equal(mp_test_shell(NULL, 0, "mkdir -p %s/dir", d), 0);
    for (int k = 0; k < 2; k++) {
        snprintf(p, sizeof p, "%s/dir/%c.txt", d, 'a' + k);
        char body[4200];
        snprintf(body, sizeof body, "%.4000s\n", doc[k]);
        mp_test_write_file(p, body, strlen(body));
    }
    const char *inputs[3] = {"joined.txt", "c.jsonl", "dir"};
    for (int k = 0; k < 3; k++) {
        int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 3 --checkpoint-every 3 --data %s/%s --out %s/r%d --threads 1",
                             d, inputs[k], d, k);
        if (rc) fail_msg("train --data %s: %s", inputs[k], out);
    }
    for (int k = 1; k < 3; k++) {
        snprintf(a, sizeof a, "%s/r0/step-000003/model.safetensors", d);
        snprintf(b, sizeof b, "%s/r%d/step-000003/model.safetensors", d, k);
        if (!files_equal(a, b)) fail_msg("training on %s differs from training on the joined text", inputs[k]);
    }
    /* an empty directory is a one-line error */
    assert_int_equal(mp_test_shell(NULL, 0, "mkdir -p %s/empty", d), 0);
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 1 --data %s/empty --out %s/r9", d, d);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "no .txt files"));
}

static void test_nope_and_tied_checkpoints(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], path[600];
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --pos none --tie --bf16 --steps 2 --checkpoint-every 2 --data %s --out %s",
                         FIXTURE, d);
    if (rc) fail_msg("train: %s", out);
    snprintf(path, sizeof path, "%s/step-000002/config.json", d);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char cfg[8192];
    size_t n = fread(cfg, 1, sizeof cfg - 1, f);
    cfg[n] = 0;
    fclose(f);
    assert_non_null(strstr(cfg, "\"no_rope_layers\": [\n    0,\n    0\n  ]"));
    /* HF's class for per-layer NoPE (LlamaForCausalLM would ignore no_rope_layers) */
    assert_non_null(strstr(cfg, "\"model_type\": \"smollm3\""));
    assert_non_null(strstr(cfg, "\"SmolLM3ForCausalLM\""));
    assert_non_null(strstr(cfg, "\"tie_word_embeddings\": true"));
    assert_non_null(strstr(cfg, "\"torch_dtype\": \"bfloat16\""));
    rc = mp_test_run(out, sizeof out, "inspect %s/step-000002", d);
    if (rc) fail_msg("inspect: %s", out);
    /* BF16 checkpoints cannot be resumed exactly: refused */
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000002 --data %s --out %s", d, FIXTURE, d);
    assert_int_equal(rc, 2);
}

/* Golden curve: the torch reference's losses for the same initial weights and batches
 * (data/fixtures/train/golden_loss.json). Tolerance 1e-4 absolute: the C run is f32, the
 * reference f64, and log.csv keeps 6 decimals; measured max difference 5.5e-7 over 30 steps. */
static void test_golden_curve(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[16384], path[600];
    FILE *g = fopen(MP_SOURCE_DIR "/data/fixtures/train/golden_loss.json", "r");
    if (!g) fail_msg("missing data/fixtures/train/golden_loss.json");
    char js[16384];
    size_t n = fread(js, 1, sizeof js - 1, g);
    js[n] = 0;
    fclose(g);
    /* flags are stored in the fixture; the test uses the same string */
    char *fl = strstr(js, "\"flags\": \"");
    assert_non_null(fl);
    fl += 10;
    char flags[1024];
    size_t k = 0;
    while (fl[k] && fl[k] != '"' && k < sizeof flags - 1) {
        flags[k] = fl[k];
        k++;
    }
    flags[k] = 0;
    int rc = mp_test_run(out, sizeof out, "train %s --data %s --out %s --quiet", flags, FIXTURE, d);
    if (rc) fail_msg("train: %s", out);
    snprintf(path, sizeof path, "%s/log.csv", d);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    double got[256];
    int ng = 0;
    if (!fgets(line, sizeof line, f)) fail_msg("empty log");
    while (fgets(line, sizeof line, f) && ng < 256) {
        long long st;
        double lr, loss;
        if (sscanf(line, "%lld,%lf,%lf", &st, &lr, &loss) == 3) got[ng++] = loss;
    }
    fclose(f);
    char *lp = strstr(js, "\"loss\": [");
    assert_non_null(lp);
    lp += 9;
    double worst = 0;
    int i = 0;
    for (; i < ng; i++) {
        char *end;
        double ref = strtod(lp, &end);
        if (end == lp) break;
        lp = end + 1;
        double dlt = fabs(ref - got[i]);
        if (dlt > worst) worst = dlt;
        if (!(dlt < 1e-4)) fail_msg("step %d: loss %.6f, torch reference %.6f", i + 1, got[i], ref);
    }
    assert_true(i == ng && ng >= 20);
    assert_true(got[ng - 1] < got[0] - 0.5); /* it learns */
    print_message("golden curve: %d steps, loss %.4f -> %.4f, max |C - torch| = %.2e\n", ng, got[0], got[ng - 1], worst);
}

static void test_bad_inputs(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], path[600];
    /* corpus too small for --seq */
    snprintf(path, sizeof path, "%s/small.txt", d);
    mp_test_write_file(path, "hello world, this is short", 26);
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --out %s/o", path, d);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "too small for --seq 16"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out)); /* one line */
    /* missing corpus */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s/nope.txt --out %s/o", d, d);
    assert_int_equal(rc, 2);
    /* unwritable output */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --out /proc/maskpos-test/o", FIXTURE);
    assert_int_equal(rc, 2);
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --out %s/small.txt", FIXTURE, d);
    assert_int_equal(rc, 2);
    /* non-finite loss: stop, keep the last good checkpoint */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --lr 1e30 --warmup 0 --clip 0 --steps 20 --checkpoint-every 1 --data %s --out %s/nan",
                     FIXTURE, d);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "non-finite"));
    assert_non_null(strstr(out, "last good checkpoint: "));
    char *lg = strstr(out, "last good checkpoint: ") + strlen("last good checkpoint: ");
    char ck[600];
    size_t k = 0;
    while (lg[k] && lg[k] != '\n' && k < sizeof ck - 1) ck[k] = lg[k], k++;
    ck[k] = 0;
    rc = mp_test_run(out, sizeof out, "inspect %s", ck);
    if (rc) fail_msg("last good checkpoint %s does not open: %s", ck, out);
    /* bad flags */
    rc = mp_test_run(out, sizeof out, "train --pos alibi --data %s --out %s/o", FIXTURE, d);
    assert_int_equal(rc, 2);
    rc = mp_test_run(out, sizeof out, "train --heads 3 --dim 16 --data %s --out %s/o", FIXTURE, d);
    assert_int_equal(rc, 2);
    rc = mp_test_run(out, sizeof out, "train --resume %s/nan --dim 8 --data %s --out %s/o", d, FIXTURE, d);
    assert_int_equal(rc, 2);
    rc = mp_test_run(out, sizeof out, "train --resume %s --data %s --out %s/o", ck, path, d);
    assert_int_equal(rc, 2); /* another corpus */
    rc = mp_test_run(out, sizeof out, "train --help");
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "--checkpoint-every"));
}

/* ======================================= --tokenizer ===================================== */

/* Writes DIR/tokenizer.json and DIR/tokenizer_config.json: a GPT-2-style byte-level BPE
 * (the 256 byte tokens in byte order, then one token per merge), an added special token <s>
 * that a TemplateProcessing post-processor puts first, and — when big_id > 0 — a vocabulary
 * token with id big_id (a huge, sparse vocabulary). variant 1 drops the last merges (another
 * tokenizer, other ids). */
static void write_tokenizer(const char *dir, int variant, int big_id) {
    static const char *merges[][2] = {
        {"\xc4\xa0", "t"}, {"h", "e"},   {"\xc4\xa0t", "he"}, {"a", "n"}, {"n", "d"},   {"\xc4\xa0", "a"},
        {"i", "n"},        {"e", "r"},   {"o", "f"},          {"\xc4\xa0", "o"}, {"\xc4\xa0o", "f"}, {"\xc4\xa0" "a", "nd"},
        {"\xc4\xa0", "s"}, {"o", "u"},   {"r", "e"},          {"\xc4\xa0", "w"}, {"a", "t"},   {"e", "d"},
    };
    size_t nm = sizeof merges / sizeof merges[0] - (variant ? 6 : 0);
    json_t *vocab = json_object(), *ml = json_array();
    int next = 0, shifted = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2's bytes_to_unicode */
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned cp = keep ? (unsigned)b : 256u + (unsigned)shifted++;
        char u[3] = {0};
        if (cp < 0x80) u[0] = (char)cp;
        else u[0] = (char)(0xC0 | (cp >> 6)), u[1] = (char)(0x80 | (cp & 63));
        json_object_set_new(vocab, u, json_integer(next++));
    }
    for (size_t i = 0; i < nm; i++) {
        char cat[16], m[20];
        snprintf(cat, sizeof cat, "%s%s", merges[i][0], merges[i][1]);
        snprintf(m, sizeof m, "%s %s", merges[i][0], merges[i][1]);
        json_object_set_new(vocab, cat, json_integer(next++));
        json_array_append_new(ml, json_string(m));
    }
    if (big_id > 0) json_object_set_new(vocab, "<big>", json_integer(big_id));
    int bos = (int)json_object_size(vocab); /* HF numbers added tokens after the vocabulary entries */
    json_t *added = json_array();
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", bos, "content", "<s>",
                                           "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1));
    json_t *model = json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout",
                              "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
                              "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", ml);
    json_t *post = json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[], s:{s:{s:s, s:[i], s:[s]}}}", "type",
                             "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0, "Sequence",
                             "id", "A", "type_id", 0, "pair", "special_tokens", "<s>", "id", "<s>", "ids", bos,
                             "tokens", "<s>");
    json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:o, s:{s:s, s:b, s:b, s:b}, s:o}",
                             "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer",
                             "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                             "use_regex", 1, "post_processor", post, "decoder", "type", "ByteLevel",
                             "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model", model);
    assert_non_null(root);
    char path[600];
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    assert_int_equal(json_dump_file(root, path, JSON_INDENT(1)), 0);
    json_decref(root);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    const char *cfg = "{\"bos_token\": \"<s>\", \"add_bos_token\": true, \"model_max_length\": 64}\n";
    mp_test_write_file(path, cfg, strlen(cfg));
}

/* Reads dir/name (.npy) into a, failing the test when it cannot be read. */
static void read_npy_in(MpNpy *a, const char *dir, const char *name) {
    char path[1100];
    MpErr e;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (mp_npy_read(path, a, &e) != MP_OK) fail_msg("%s", e.msg);
}

static json_t *read_json_in(const char *dir, const char *name) {
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s", path, je.text);
    return j;
}

static json_t *read_config(const char *ckpt) { return read_json_in(ckpt, "config.json"); }

/* Does ids[0..T) occur at offset off of s? */
static int window_at(const int32_t *ids, const int32_t *s, size_t off, int T) {
    return !memcmp(ids, s + off, (size_t)T * sizeof(int32_t));
}

static void test_tokenizer_train(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char tdir[600], tdir2[600], a[600], b[600], out[16384], p1[900], p2[900];
    snprintf(tdir, sizeof tdir, "%s/tokA", d);
    snprintf(tdir2, sizeof tdir2, "%s/tokB", d);
    snprintf(a, sizeof a, "%s/a", d);
    snprintf(b, sizeof b, "%s/b", d);
    write_tokenizer(tdir, 0, 0);
    write_tokenizer(tdir2, 1, 0);
    /* the reference ids: the tokenizer itself on the whole corpus, no BOS */
    MpTok tok;
    MpErr e;
    assert_int_equal(mp_tok_init(&tok, tdir, &e), MP_OK);
    char *text;
    size_t tlen;
    assert_int_equal(mp_file_read_all(FIXTURE, (size_t)1 << 20, "corpus", &text, &tlen, &e), MP_OK);
    MpTokIds ref;
    memset(&ref, 0, sizeof ref);
    assert_int_equal(mp_tok_encode(&tok, &ref, text, tlen, 0, &e), MP_OK);
    free(text);
    assert_true(tok.n_ids > 256 && tok.bos_id >= 256);
    assert_true(ref.n < tlen); /* merges happened */
    print_message("tokenizer: %d ids, BOS %d; corpus %zu bytes -> %zu tokens\n", tok.n_ids, tok.bos_id, tlen, ref.n);

    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 8 --checkpoint-every 4 --data %s --tokenizer %s "
                         "--out %s --threads 1 --dump-batches %s/batches.npy", FIXTURE, tdir, a, a);
    if (rc) fail_msg("train --tokenizer: %s", out);
    /* config.json: the tokenizer's vocabulary and BOS, not "bytes" */
    snprintf(p1, sizeof p1, "%s/step-000008", a);
    json_t *cfg = read_config(p1);
    assert_int_equal(json_integer_value(json_object_get(cfg, "vocab_size")), tok.n_ids);
    assert_int_equal(json_integer_value(json_object_get(cfg, "bos_token_id")), tok.bos_id);
    assert_true(json_is_null(json_object_get(cfg, "eos_token_id")));
    assert_string_equal(json_string_value(json_object_get(cfg, "maskpos_tokenizer")), "tokenizer.json");
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)tok.hash);
    assert_string_equal(json_string_value(json_object_get(cfg, "maskpos_tokenizer_fnv1a64")), hex);
    json_decref(cfg);
    /* the tokenizer files, byte for byte, in every checkpoint */
    static const char *tfiles[] = {"tokenizer.json", "tokenizer_config.json"};
    for (int i = 0; i < 2; i++)
        for (int s = 4; s <= 8; s += 4) {
            snprintf(p1, sizeof p1, "%s/%s", tdir, tfiles[i]);
            snprintf(p2, sizeof p2, "%s/step-%06d/%s", a, s, tfiles[i]);
            if (!files_equal(p1, p2)) fail_msg("%s is not a copy of %s", p2, p1);
        }
    /* the batches are windows of the tokenizer's ids in the train split (the last 5% held out) */
    MpNpy bt;
    read_npy_in(&bt, a, "batches.npy");
    assert_int_equal(bt.dtype, MP_DT_I32);
    assert_int_equal(bt.ndim, 4);
    const int S = (int)bt.shape[0], B = (int)bt.shape[2], T = (int)bt.shape[3];
    assert_int_equal(S, 8);
    assert_int_equal(B, 4);
    assert_int_equal(T, 16);
    size_t n_train = ref.n - (size_t)((double)ref.n * 0.05);
    int above_bytes = 0;
    for (int st = 0; st < S; st++)
        for (int r = 0; r < B; r++) {
            const int32_t *in = (const int32_t *)bt.data + ((size_t)st * 2 * B + r) * T;
            const int32_t *tg = in + (size_t)B * T;
            int found = 0;
            for (size_t off = 0; off + (size_t)T < n_train && !found; off++)
                found = window_at(in, ref.ids, off, T) && window_at(tg, ref.ids, off + 1, T);
            if (!found) fail_msg("step %d row %d: not a window of mp_tok_encode's ids in the train split", st, r);
            for (int t = 0; t < T; t++) above_bytes += in[t] >= 256;
        }
    assert_true(above_bytes > 0); /* merged tokens, not bytes */
    mp_npy_free(&bt);

    /* resume after step 4 from the checkpoint's own tokenizer copy: bit-identical */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 8 --checkpoint-every 4 --stop-after 4 --data %s "
                     "--tokenizer %s --out %s", FIXTURE, tdir, b);
    if (rc) fail_msg("train --stop-after: %s", out);
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000004 --data %s --out %s --threads 2 --quiet", b, FIXTURE, b);
    if (rc) fail_msg("train --resume (tokenizer): %s", out);
    static const char *files[] = {"model.safetensors", "optimizer.bin", "config.json", "tokenizer.json",
                                  "tokenizer_config.json"};
    assert_same_checkpoint(a, b, 8, files, 5, "resumed (tokenizer)");
    /* the same tokenizer given explicitly is accepted (conversion-only resume) */
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000008 --steps 8 --tokenizer %s/tokenizer.json --data %s "
                     "--out %s --quiet", b, tdir, FIXTURE, b);
    if (rc) fail_msg("resume with the same --tokenizer: %s", out);
    /* another tokenizer is refused, in one line */
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000004 --tokenizer %s --data %s --out %s/c", b, tdir2,
                     FIXTURE, d);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "is not the tokenizer"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));

    /* probe and gram run on the checkpoint with its own tokenizer */
    rc = mp_test_run(out, sizeof out, "probe %s/step-000008 --data %s --n 1 --seq 16 --out %s/probe --quiet", a, FIXTURE,
                     d);
    if (rc) fail_msg("probe on the tokenizer checkpoint: %s", out);
    rc = mp_test_run(out, sizeof out, "gram %s/step-000008 --layer 1 --data %s --seq 16 --n 4 --out %s/gram", a, FIXTURE,
                     d);
    if (rc) fail_msg("gram on the tokenizer checkpoint: %s", out);
    MpNpy gt;
    read_npy_in(&gt, d, "gram/tokens.npy");
    assert_int_equal(gt.dtype, MP_DT_I32);
    /* gram's first window starts the corpus as a document does: the tokenizer's BOS, then its
     * ids (not bytes) */
    assert_int_equal(((const int32_t *)gt.data)[0], tok.bos_id);
    assert_memory_equal((const int32_t *)gt.data + 1, ref.ids, 15 * sizeof(int32_t));
    mp_npy_free(&gt);
    mp_tok_ids_free(&ref);
    mp_tok_free(&tok);
    print_message("--tokenizer: batches = windows of mp_tok_encode, files copied, probe/gram run, resume "
                  "bit-identical, another tokenizer refused\n");
}

/* --bos on bytes: every window is BOS (id 256) + text, the vocabulary 257, config.json names the
 * BOS, resume keeps it; the checkpoint's byte tokenizer puts BOS first; packed probe rows and
 * gram windows start with it. Windows are checked against the corpus file itself. */
static void test_bos_windows(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char a[600], b[600], out[16384], p1[900], p2[900];
    snprintf(a, sizeof a, "%s/a", d);
    snprintf(b, sizeof b, "%s/b", d);
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --bos --steps 6 --checkpoint-every 3 --data %s --out %s "
                         "--threads 1 --dump-batches %s/batches.npy", FIXTURE, a, a);
    if (rc) fail_msg("train --bos: %s", out);
    snprintf(p1, sizeof p1, "%s/step-000006", a);
    json_t *cfg = read_config(p1);
    assert_int_equal(json_integer_value(json_object_get(cfg, "vocab_size")), 257);
    assert_int_equal(json_integer_value(json_object_get(cfg, "bos_token_id")), 256);
    assert_string_equal(json_string_value(json_object_get(cfg, "maskpos_tokenizer")), "bytes");
    json_decref(cfg);
    MpErr e;
    char *text;
    size_t tlen;
    assert_int_equal(mp_file_read_all(FIXTURE, (size_t)1 << 20, "corpus", &text, &tlen, &e), MP_OK);
    size_t n_train = tlen - (size_t)((double)tlen * 0.05);
    MpNpy bt;
    read_npy_in(&bt, a, "batches.npy");
    assert_int_equal(bt.ndim, 4);
    const int S = (int)bt.shape[0], B = (int)bt.shape[2], T = (int)bt.shape[3];
    assert_int_equal(T, 16);
    for (int st = 0; st < S; st++)
        for (int r = 0; r < B; r++) {
            const int32_t *in = (const int32_t *)bt.data + ((size_t)st * 2 * B + r) * T;
            const int32_t *tg = in + (size_t)B * T;
            assert_int_equal(in[0], 256);
            for (int t = 1; t < T; t++) assert_int_equal(in[t], tg[t - 1]);
            char w[16];
            for (int t = 0; t < T; t++) w[t] = (char)tg[t];
            const char *at = memmem(text, n_train, w, (size_t)T);
            if (!at) fail_msg("step %d row %d: the targets are not %d consecutive bytes of the train split", st, r, T);
        }
    mp_npy_free(&bt);
    /* resume: the BOS setting comes from the checkpoint */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --bos --steps 6 --checkpoint-every 3 --stop-after 3 --data %s "
                     "--out %s", FIXTURE, b);
    if (rc) fail_msg("train --bos --stop-after: %s", out);
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000003 --data %s --out %s --quiet", b, FIXTURE, b);
    if (rc) fail_msg("train --resume (bos): %s", out);
    static const char *files[] = {"model.safetensors", "optimizer.bin", "config.json"};
    assert_same_checkpoint(a, b, 6, files, 3, "resumed --bos run");
    /* the checkpoint's tokenizer: bytes with BOS 256 */
    snprintf(p1, sizeof p1, "%s/step-000006", a);
    MpTok tok;
    assert_int_equal(mp_tok_init(&tok, p1, &e), MP_OK);
    assert_true(tok.bytes);
    assert_int_equal(tok.n_ids, 257);
    assert_int_equal(tok.bos_id, 256);
    MpTokIds ids;
    memset(&ids, 0, sizeof ids);
    assert_int_equal(mp_tok_encode(&tok, &ids, "ab", 2, 1, &e), MP_OK);
    assert_int_equal(ids.n, 3);
    assert_int_equal(ids.ids[0], 256);
    assert_int_equal(ids.ids[1], 'a');
    MpTokBuf txt = {0};
    assert_int_equal(mp_tok_decode(&tok, &txt, ids.ids, ids.n, 1, &e), MP_OK);
    assert_string_equal(txt.data, "ab");
    txt.n = 0;
    assert_int_equal(mp_tok_decode(&tok, &txt, ids.ids, ids.n, 0, &e), MP_OK);
    assert_string_equal(txt.data, "<bos>ab");
    mp_tok_buf_free(&txt);
    mp_tok_ids_free(&ids);
    mp_tok_free(&tok);
    /* packed rows (corpus --pack, as probe --data --pack builds them): BOS + the next 15 bytes */
    rc = mp_test_run(out, sizeof out, "corpus --model %s/step-000006 --pack --whole --n 3 --seq 16 --out %s/c.npy %s", a, d,
                     FIXTURE);
    if (rc) fail_msg("corpus --pack: %s", out);
    MpNpy ct;
    read_npy_in(&ct, d, "c.npy");
    for (int r = 0; r < 3; r++) {
        const int32_t *row = (const int32_t *)ct.data + r * 16;
        assert_int_equal(row[0], 256);
        for (int t = 1; t < 16; t++) assert_int_equal(row[t], (unsigned char)text[r * 15 + t - 1]);
    }
    mp_npy_free(&ct);
    /* probe on packed rows: the statistics cover positions 1.. (and not with
     * --no-special, whose rows are plain bytes) */
    for (int ns = 0; ns <= 1; ns++) {
        rc = mp_test_run(out, sizeof out, "probe %s/step-000006 --data %s --pack --n 4 --seq 16 --out %s/p%d%s", a,
                         FIXTURE, d, ns, ns ? " --no-special" : "");
        if (rc) fail_msg("probe --pack on a --bos checkpoint: %s", out);
        assert_int_equal(strstr(out, "every sequence starts with BOS (id 256)") != NULL, !ns);
        snprintf(p2, sizeof p2, "%s/p%d", d, ns);
        json_t *meta = read_json_in(p2, "meta.json");
        assert_int_equal(json_integer_value(json_object_get(meta, "stats_first_position")), !ns);
        json_decref(meta);
    }
    /* gram: its first window is BOS + the file's first 15 bytes */
    rc = mp_test_run(out, sizeof out, "gram %s/step-000006 --layer 1 --data %s --seq 16 --n 4 --out %s/gram", a, FIXTURE, d);
    if (rc) fail_msg("gram on a --bos checkpoint: %s", out);
    MpNpy gt;
    read_npy_in(&gt, d, "gram/tokens.npy");
    for (int r = 0; r < 4; r++) assert_int_equal(((const int32_t *)gt.data)[r * 16], 256);
    for (int t = 1; t < 16; t++) assert_int_equal(((const int32_t *)gt.data)[t], (unsigned char)text[t - 1]);
    mp_npy_free(&gt);
    free(text);
    /* --bos with a tokenizer: its own BOS starts every window; a tokenizer without one is refused */
    char tdir[600];
    snprintf(tdir, sizeof tdir, "%s/tok", d);
    write_tokenizer(tdir, 0, 0);
    MpTok tt;
    assert_int_equal(mp_tok_init(&tt, tdir, &e), MP_OK);
    assert_true(tt.bos_id >= 256);
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --bos --steps 2 --checkpoint-every 2 --data %s --tokenizer %s "
                     "--out %s/t --dump-batches %s/t.npy", FIXTURE, tdir, d, d);
    if (rc) fail_msg("train --bos --tokenizer: %s", out);
    read_npy_in(&bt, d, "t.npy");
    for (int k = 0; k < (int)(bt.shape[0] * bt.shape[2]); k++) {
        const int32_t *in = (const int32_t *)bt.data + ((size_t)(k / bt.shape[2]) * 2 * bt.shape[2] + k % bt.shape[2]) * 16;
        assert_int_equal(in[0], tt.bos_id);
    }
    mp_npy_free(&bt);
    mp_tok_free(&tt);
    snprintf(p2, sizeof p2, "%s/tokenizer_config.json", tdir);
    const char *nobos = "{\"tokenizer_class\": \"LlamaTokenizerFast\", \"bos_token\": \"<s>\", \"add_bos_token\": false}\n";
    mp_test_write_file(p2, nobos, strlen(nobos));
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --bos --steps 2 --data %s --tokenizer %s --out %s/t2", FIXTURE,
                     tdir, d);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "adds no BOS token"));
    assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));
    print_message("--bos: windows BOS + train-split bytes, vocabulary 257, resume bit-identical, packed and gram rows "
                  "start with BOS; a tokenizer's own BOS; none: refused\n");
}

static void test_tokenizer_bad_inputs(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], path[600], tdir[600], bytes_ck[600];
    snprintf(tdir, sizeof tdir, "%s/tok", d);
    write_tokenizer(tdir, 0, 0);
#define EXPECT_ONE_LINE(what)                                                                                          \
    do {                                                                                                               \
        if (rc != 2) fail_msg("%s: exit %d, expected 2: %s", what, rc, out);                                          \
        assert_int_equal(strchr(out, '\n') - out + 1, (long)strlen(out));                                             \
    } while (0)
    /* malformed tokenizer.json */
    snprintf(path, sizeof path, "%s/bad", d);
    mkdir(path, 0777);
    snprintf(path, sizeof path, "%s/bad/tokenizer.json", d);
    mp_test_write_file(path, "{\"model\": {\"type\": \"BPE\", \"vocab\": [", 36);
    int rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --tokenizer %s --out %s/o", FIXTURE, path, d);
    EXPECT_ONE_LINE("malformed tokenizer");
    assert_non_null(strstr(out, "--tokenizer"));
    /* missing tokenizer, a directory without tokenizer.json, a GGUF file */
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --tokenizer %s/none --out %s/o", FIXTURE, d, d);
    EXPECT_ONE_LINE("missing tokenizer");
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --tokenizer %s --out %s/o", FIXTURE, d, d);
    EXPECT_ONE_LINE("directory without tokenizer.json");
    assert_non_null(strstr(out, "no tokenizer.json"));
    snprintf(path, sizeof path, "%s/model.gguf", d);
    mp_test_write_file(path, "GGUF\3\0\0\0", 8);
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --data %s --tokenizer %s --out %s/o", FIXTURE, path, d);
    EXPECT_ONE_LINE("GGUF tokenizer");
    assert_non_null(strstr(out, "GGUF"));
    /* corpus too small in tokens (but not in bytes: 40 bytes, fewer ids) */
    snprintf(path, sizeof path, "%s/small.txt", d);
    const char *small = "and the and of the and the and of the an";
    mp_test_write_file(path, small, strlen(small));
    rc = mp_test_run(out, sizeof out, "train --layers 1 --dim 8 --heads 2 --kv-heads 1 --ffn 8 --seq 1 --batch 1 "
                     "--steps 1 --data %s --tokenizer %s --out %s/o", path, tdir, d);
    EXPECT_ONE_LINE("too few tokens");
    assert_non_null(strstr(out, "too small for --seq 1"));
    assert_non_null(strstr(out, "tokens"));
    /* a vocabulary too large for memory: 2^20 - 1 ids at width 16384 = 17 G parameters */
    char big[600];
    snprintf(big, sizeof big, "%s/big", d);
    write_tokenizer(big, 0, (1 << 20) - 2);
    rc = mp_test_run(out, sizeof out, "train --dim 16384 --heads 4 --kv-heads 2 --ffn 64 --layers 1 --seq 16 --batch 4 "
                     "--data %s --tokenizer %s --out %s/o", FIXTURE, big, d);
    EXPECT_ONE_LINE("vocabulary too large");
    assert_non_null(strstr(out, "vocabulary 1048575"));
    assert_non_null(strstr(out, "GB"));
    snprintf(path, sizeof path, "%s/o", d);
    assert_false(mp_file_exists(path)); /* refused before any output */
    /* a byte checkpoint resumed with a tokenizer is refused */
    snprintf(bytes_ck, sizeof bytes_ck, "%s/bytes", d);
    rc = mp_test_run(out, sizeof out, "train " TINY_FLAGS " --steps 1 --checkpoint-every 1 --data %s --out %s", FIXTURE,
                     bytes_ck);
    if (rc) fail_msg("train: %s", out);
    rc = mp_test_run(out, sizeof out, "train --resume %s/step-000001 --steps 2 --tokenizer %s --data %s --out %s",
                     bytes_ck, tdir, FIXTURE, bytes_ck);
    EXPECT_ONE_LINE("tokenizer on a byte checkpoint");
    assert_non_null(strstr(out, "bytes"));
#undef EXPECT_ONE_LINE
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_ops),
        cmocka_unit_test(test_matmul_variants),
        cmocka_unit_test(test_fd_model),
        cmocka_unit_test(test_f32_matches_f64),
        cmocka_unit_test(test_torch_reference),
        cmocka_unit_test(test_resume_exact),
        cmocka_unit_test(test_resume_keeps_intervals),
        cmocka_unit_test(test_document_corpora),
        cmocka_unit_test(test_nope_and_tied_checkpoints),
        cmocka_unit_test(test_golden_curve),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_tokenizer_train),
        cmocka_unit_test(test_tokenizer_bad_inputs),
        cmocka_unit_test(test_bos_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
