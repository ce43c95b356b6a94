/* test_train_fwd.c — one Llama layer, two implementations that must agree: the training model's
 * forward (src/train/model_impl.h, f32, kept for its backward) and the model's forward
 * (src/model/fwd.c, what probe, logits and generate run), on the same weights.
 *
 * The training model is initialised (RoPE and NoPE, GQA, tied and untied), saved as an HF
 * checkpoint (train/ckpt.c), opened by the loader and run by mp_fwd_run with logits on. Checked:
 *   - every layer's attention probabilities [NH,T,T] (train: m.att; fwd: probs_hook) agree
 *     within 1e-5 (measured 1.3e-6 to 1.4e-6 here: f32 sums in two orders, through two layers;
 *     the bound leaves room for the other matmul kernels, MASKPOS_KERNEL);
 *   - the next-token log-probabilities [T,V] (train: log m.probs; fwd: log-softmax of f->logits
 *     in double) agree within 1e-4 nats (measured 6.5e-6 to 9.1e-6; f32 through 2 layers,
 *     C = 64, FF = 96);
 *   - every capture point of fwd (MpFwdPoint: normed input, q and k after RoPE, the attention mix,
 *     the residual after attention, the MLP's normed input, the layer output) equals the training
 *     model's kept activation of every layer within 1e-5 of its largest entry (measured up to 2.0e-6);
 *   - the plain compute mode (MP_FWD_COMPUTE_F32_PLAIN, what gram runs) equals the training
 *     forward bit for bit at every capture point and in every probability without RoPE (with
 *     RoPE the two tables differ in their last bits, so within the tolerance above);
 *   - the check can fail: fwd with RoPE switched off (cfg.rope = 0) on the RoPE checkpoint differs
 *     from the training forward by far more than the tolerance (> 1e-2 in the probabilities and
 *     at the capture points).
 */
#include <math.h>

#include "testutil.h"

#include "load/model.h"   /* mp_model_open */
#include "model/fwd.h"    /* mp_fwd_run */
#include "train/train.h"  /* MpTrainModel_f32, mp_train_ckpt_write */

enum { L = 2, T = 24, V = 256 };

/* The fwd probabilities of every layer: [L, NH, T, T]; and the worst relative difference of each
 * capture point from the training model's activation of the same name. */
typedef struct Probs {
    float *p;
    int NH;
    const MpTrainModel_f32 *tm;
    double cap[MP_FWD_NPOINTS]; /* max |fwd - train| / max |train|, over layers */
    int seen[MP_FWD_NPOINTS];
} Probs;

/* The training model's activation at a capture point of layer l: [T, width] (B = 1), or NULL when
 * it keeps none (the attention output before the residual). */
static const float *train_act(const MpTrainModel_f32 *tm, int l, int point, int T_, int width) {
    const size_t rows = (size_t)T_ * width, C = (size_t)T_ * tm->cfg.dim;
    switch (point) {
    case MP_FWD_AT_ATTN_IN: return tm->ln1 + l * C;
    case MP_FWD_AT_Q: return tm->q + l * rows;
    case MP_FWD_AT_K: return tm->k + l * rows;
    case MP_FWD_AT_ATTN_MIX: return tm->atty + l * rows;
    case MP_FWD_AT_RESID_MID: return tm->resid2 + l * C;
    case MP_FWD_AT_FFN_IN: return tm->ln2 + l * C;
    case MP_FWD_AT_LAYER_OUT: return tm->resid + (l + 1) * C;
    default: return NULL;
    }
}

static void keep_point(void *ctx, int layer, int point, const float *x, int TT, int width) {
    Probs *k = ctx;
    const float *ref = train_act(k->tm, layer, point, TT, width);
    if (!ref) return;
    double mx = 0, d = 0;
    for (size_t i = 0; i < (size_t)TT * width; i++) {
        mx = fabs((double)ref[i]) > mx ? fabs((double)ref[i]) : mx;
        d = fabs((double)x[i] - ref[i]) > d ? fabs((double)x[i] - ref[i]) : d;
    }
    const double rel = d / (mx > 0 ? mx : 1);
    k->cap[point] = rel > k->cap[point] ? rel : k->cap[point];
    k->seen[point]++;
}

static void keep_probs(void *ctx, int layer, const float *probs, int n_heads, int TT) {
    Probs *k = ctx;
    memcpy(k->p + (size_t)layer * n_heads * TT * TT, probs, sizeof(float) * (size_t)n_heads * TT * TT);
}

typedef struct Diff {
    double att, logp, cap; /* cap: the worst capture point (relative) */
} Diff;

/* Runs the fwd of the checkpoint in dir (rope: cfg.rope; compute: MpFwdCompute) and compares with
 * the training model's last forward. */
static Diff compare(const char *dir, const MpTrainModel_f32 *tm, const int32_t *ids, int rope, int compute) {
    MpErr e;
    MpModel m;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, dir, &e) != MP_OK) fail_msg("%s", e.msg);
    MpFwdConfig fc = {.n_layers = L, .max_seq = T, .causal = 1, .rope = rope, .logits = 1, .compute = compute};
    MpFwd f;
    memset(&f, 0, sizeof f);
    if (mp_fwd_init(&f, &m, &fc, &e) != MP_OK) fail_msg("%s", e.msg);
    const int NH = tm->cfg.heads;
    Probs k = {calloc((size_t)L * NH * T * T, sizeof(float)), NH, tm, {0}, {0}};
    f.probs_hook = keep_probs;
    f.probs_ctx = &k;
    f.capture = keep_point;
    f.capture_ctx = &k;
    if (mp_fwd_run(&f, ids, T, NULL, NULL, &e) != MP_OK) fail_msg("%s", e.msg);
    Diff d = {0, 0, 0};
    for (int p = 0; p < MP_FWD_NPOINTS; p++) {
        if (p != MP_FWD_AT_ATTN_OUT) assert_int_equal(k.seen[p], L); /* every point of every layer */
        d.cap = k.cap[p] > d.cap ? k.cap[p] : d.cap;
    }
    for (size_t i = 0; i < (size_t)L * NH * T * T; i++) { /* both [L, (B=1), NH, T, T] */
        const double x = fabs((double)k.p[i] - (double)tm->att[i]);
        d.att = x > d.att ? x : d.att;
    }
    for (int t = 0; t < T; t++) {
        const float *lg = f.logits + (size_t)t * V;
        double mx = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) mx = lg[v] > mx ? lg[v] : mx;
        for (int v = 0; v < V; v++) s += exp((double)lg[v] - mx);
        for (int v = 0; v < V; v++) {
            const double lp = (double)lg[v] - mx - log(s), lt = log((double)tm->probs[(size_t)t * V + v]);
            const double x = fabs(lp - lt);
            d.logp = x > d.logp ? x : d.logp;
        }
    }
    free(k.p);
    mp_fwd_free(&f);
    mp_model_free(&m);
    return d;
}

static void run_variant(int variant) {
    MpTrainConfig cfg;
    mp_train_config_default(&cfg);
    cfg.layers = L;
    cfg.dim = 64;
    cfg.heads = 4;
    cfg.kv_heads = variant == 1 ? 4 : 2;
    cfg.ffn = 96;
    cfg.vocab = V;
    cfg.seq = T;
    cfg.batch = 1;
    cfg.pos = variant == 2 ? MP_TRAIN_POS_NONE : MP_TRAIN_POS_ROPE;
    cfg.tie = variant == 1;
    cfg.init_std = 0.2; /* sharper attention than the default: the comparison sees the maps */
    MpErr e;
    if (mp_train_config_check(&cfg, &e) != MP_OK) fail_msg("%s", e.msg);
    MpTrainModel_f32 tm;
    if (mp_train_model_init_f32(&tm, &cfg, &e) != MP_OK) fail_msg("%s", e.msg);
    mp_train_init_params(tm.params, &tm.lay, &cfg, 7 + (uint64_t)variant);
    int32_t ids[T];
    uint32_t s = 99u + (uint32_t)variant;
    for (int t = 0; t < T; t++) {
        s = s * 1664525u + 1013904223u;
        ids[t] = (int32_t)((s >> 8) % V);
    }
    mp_train_forward_f32(&tm, ids, NULL);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/ck%d", mp_test_tmpdir(), variant);
    MpTrainOptHeader h;
    memset(&h, 0, sizeof h);
    if (mp_train_ckpt_write(dir, &cfg, &tm.lay, tm.params, NULL, NULL, &h, 0, &e) != MP_OK) fail_msg("%s", e.msg);
    const Diff d = compare(dir, &tm, ids, 1, MP_FWD_COMPUTE_F32);
    print_message("variant %d (%s, NKV %d, %s): max |dp_att| %.3g, max |dlogp| %.3g, capture points %.3g\n", variant,
                  cfg.pos == MP_TRAIN_POS_ROPE ? "RoPE" : "NoPE", cfg.kv_heads, cfg.tie ? "tied" : "untied", d.att, d.logp,
                  d.cap);
    assert_true(d.att < 1e-5);
    assert_true(d.cap < 1e-5);
    assert_true(d.logp < 1e-4);
    if (cfg.pos == MP_TRAIN_POS_ROPE) { /* the comparison sees a real difference */
        const Diff off = compare(dir, &tm, ids, 0, MP_FWD_COMPUTE_F32);
        print_message("  fwd without RoPE: max |dp_att| %.3g, max |dlogp| %.3g, capture points %.3g\n", off.att, off.logp,
                      off.cap);
        assert_true(off.att > 1e-2);
        assert_true(off.cap > 1e-2);
    }
    /* the plain compute mode (what gram runs) has the training kernels' arithmetic: the same bits
     * at every capture point and in every probability, but for the RoPE table (train: inv_freq in
     * double from theta; the loader: HF's f32 inv_freq), so exactly only without RoPE */
    const Diff pl = compare(dir, &tm, ids, 1, MP_FWD_COMPUTE_F32_PLAIN);
    print_message("  plain compute: max |dp_att| %.3g, capture points %.3g\n", pl.att, pl.cap);
    if (cfg.pos == MP_TRAIN_POS_NONE) {
        assert_true(pl.att == 0);
        assert_true(pl.cap == 0);
    } else {
        assert_true(pl.att < 1e-5);
        assert_true(pl.cap < 1e-5);
    }
    mp_train_model_free_f32(&tm);
}

static void test_train_forward_equals_model_forward(void **state) {
    (void)state;
    for (int v = 0; v < 3; v++) run_variant(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_train_forward_equals_model_forward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
