/* test_probe_var.c — `probe --stats variance` (src/model/probe_var.c, the row MP_PROBE_STAT_VARIANCE
 * of the statistics table) against independent computations:
 *   - a plain PyTorch forward in float64 (tests/ref/var_ref.py on probe_ref.py's decoder) of mkmodel
 *     models of three RoPE layouts — llama (rotate-half, every dimension; layers 1 and 3 of 3, so
 *     the deepest probed layer must run through its MLP and a layer between is skipped), gptneox
 *     (rotary_pct 0.25, parallel residual, LayerNorm with bias) and phi3 (partial rotary 0.5, fused
 *     projections) — computing the variances over sequences and dimensions, their standard errors
 *     and the log-log slopes from its own tensors: var_attn, var_attn_heads, var_resid within 2e-6
 *     relative (an f32 forward), their standard errors within 2e-5 relative, the slopes in
 *     meta.json within 1e-5; likewise qwen3 (per-head q/k norms, GQA), gemma3 (local and global
 *     RoPE bases, an 8-token window), llama with llama3 scaling and phi3 with longrope;
 *   - --threads 1 and 2 (sequence-parallel workers, each capture into its own one-sequence part)
 *     write the same bytes;
 *   - the forward pass runs the deepest layer of a run without logits through when a capture point
 *     after its scores is asked for (MpFwdConfig.tap_points): its LAYER_OUT equals, bit for bit, the
 *     same layer's in a run with logits; with tap_points 0 ("every point", what gram asks) it still
 *     stops after the scores (nothing captured past them);
 *   - the sums by hand: captures of pseudo-random activations (a mean and a variance that shrinks
 *     with position) fed to an accumulator of layers 1 and 3 of 3; variances by two passes over
 *     the N·D values, standard errors from each sequence's own moments, and the slopes' jackknife
 *     by brute force (each group's variances recomputed from the raw values without it; the group
 *     of a sequence by the documented hash), within 1e-12 relative;
 *   - Chi et al.'s setting: a randomly initialised NoPE decoder (mkmodel llama, --no-rope, random
 *     tokens, 64 sequences of 64): with the causal mask the attention output's variance falls with
 *     position (layer 1: slope -0.73 +- 0.006, layer 2 -0.68 +- 0.005, measured), without it the
 *     slopes of both layers and both vectors are within 3 standard errors of 0 (measured within 1.9);
 *   - accumulators of different lengths do not merge with variance (one line), of one length do;
 *   - the slope's jackknife standard error is calibrated: over 40 independent replicates of 64
 *     sequences whose variance at position i is 1/(i+1) + 0.01 (a shared shift per sequence) the
 *     mean jackknife standard error is within 30% of the spread of the slopes, and the slopes
 *     centre on the slope of that curve.
 *
 *   make build/tests/test_probe_var && build/tests/test_probe_var
 */
#include <math.h>

#include "test_model_util.h"

#include "core/json.h"      /* mp_json_read */
#include "model/fwd.h"      /* MpFwd, MP_FWD_AT_* */
#include "model/probe.h"    /* MpProbeAcc */
#include "model/probe_var.h"

static int have_torch(void) {
    char out[4096];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import torch, numpy'") == 0) return 1;
    print_message("python3-torch is not installed: %s\n", out);
    return 0;
}

/* meta.json's array `key` of dir as doubles (null: NaN); *n its length. */
static double *meta_1d(const char *dir, const char *key, int *n) {
    char p[600];
    snprintf(p, sizeof p, "%s/meta.json", dir);
    json_t *m = mp_json_read(p, NULL);
    if (!m) fail_msg("%s: no meta.json", dir);
    json_t *a = json_object_get(m, key);
    if (!json_is_array(a)) fail_msg("meta.json lacks %s", key);
    *n = (int)json_array_size(a);
    double *x = malloc(sizeof(double) * (size_t)(*n + 1));
    for (int i = 0; i < *n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        x[i] = json_is_number(v) ? json_number_value(v) : NAN;
    }
    json_decref(m);
    return x;
}

/* max over the entries of |a − b| / |b| of dir/name.npy against dir/ref_name.npy */
static double rel_err(const char *dir, const char *name) {
    char p[600];
    size_t n1, n2;
    snprintf(p, sizeof p, "%s/%s.npy", dir, name);
    double *a = npy_load_f64(p, &n1, NULL);
    snprintf(p, sizeof p, "%s/ref_%s.npy", dir, name);
    double *b = npy_load_f64(p, &n2, NULL);
    if (n1 != n2 || n1 == 0) fail_msg("%s: %zu values, torch %zu", name, n1, n2);
    double err = 0;
    for (size_t k = 0; k < n1; k++) {
        if (!isfinite(a[k]) || !isfinite(b[k]) || b[k] <= 0) fail_msg("%s[%zu]: maskpos %g torch %g", name, k, a[k], b[k]);
        err = fmax(err, fabs(a[k] - b[k]) / b[k]);
    }
    free(a);
    free(b);
    return err;
}

/* probe --stats variance of a model (mkmodel args) on N × S ids against var_ref.py; rstride: --resid-stride. */
static void against_torch(const char *name, const char *mk, const char *layers, int threads, int rstride) {
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], d[300], out[16384];
    snprintf(model, sizeof model, "%s/%s", top, name);
    snprintf(ids, sizeof ids, "%s/%s-ids.npy", top, name);
    snprintf(d, sizeof d, "%s/%s-out", top, name);
    model_make(model, mk);
    ids_write(ids, 6, 24, 300, -1, 17);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers %s --stats variance --threads %d --resid-stride %d "
                         "--quiet", model, ids, d, layers, threads, rstride);
    if (rc != 0) fail_msg("%s: probe failed: %s", name, out);
    rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/var_ref.py %s %s %s --layers %s --resid-stride %d",
                       MP_SOURCE_DIR, model, ids, d, layers, rstride);
    if (rc != 0) fail_msg("var_ref.py failed: %s", out);
    const double ev = fmax(fmax(rel_err(d, "var_attn"), rel_err(d, "var_attn_heads")), rel_err(d, "var_resid"));
    const double es = fmax(fmax(rel_err(d, "var_attn_se"), rel_err(d, "var_attn_heads_se")), rel_err(d, "var_resid_se"));
    int na, nr;
    double *sa = meta_1d(d, "variance_slope_attn", &na), *sr = meta_1d(d, "variance_slope_resid", &nr);
    char p[600];
    size_t n;
    snprintf(p, sizeof p, "%s/ref_var_slopes.npy", d);
    double *rs = npy_load_f64(p, &n, NULL);
    assert_int_equal(n, 2 * (size_t)na);
    double eb = 0;
    for (int l = 0; l < na; l++) eb = fmax(eb, fmax(fabs(sa[l] - rs[2 * l]), fabs(sr[l] - rs[2 * l + 1])));
    print_message("%s (layers %s): variances within %.2g relative of torch (float64), standard errors %.2g, slopes %.2g "
                  "(attention layer 1: %.4f)\n", name, layers, ev, es, eb, sa[0]);
    assert_true(ev < 2e-6);
    assert_true(es < 2e-5);
    assert_true(eb < 1e-5);
    free(sa);
    free(sr);
    free(rs);
}

/* --threads 1 and 2 (sequences in parallel workers, their one-sequence parts merged in order)
 * write the same bytes. */
static void test_threads_same_bytes(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char model[300], ids[300];
    snprintf(model, sizeof model, "%s/thr", top);
    snprintf(ids, sizeof ids, "%s/thr-ids.npy", top);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 9");
    ids_write(ids, 7, 20, 300, -1, 4);
    const char *files[] = {"var_attn.npy", "var_attn_se.npy", "var_attn_heads.npy", "var_attn_heads_se.npy", "var_resid.npy",
                           "var_resid_se.npy", "scores.npy"};
    probe_threads_same(top, model, ids, "--layers all --stats variance", files, sizeof files / sizeof files[0]);
    print_message("--threads 2 (two sequences at a time in workers): 7 .npy the same as --threads 1\n");
}

/* Chi et al. 2023's claim on a random NoPE model: causal, the variance shrinks with position;
 * bidirectional (every query sees every key, the model permutation-equivariant), flat. */
static void test_random_nope_causal_falls_bidirectional_flat(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], out[16384], d[300];
    snprintf(model, sizeof model, "%s/rnd", top);
    snprintf(ids, sizeof ids, "%s/rnd-ids.npy", top);
    model_make(model, "--arch llama --layers 2 --dim 128 --heads 4 --kv-heads 4 --vocab 300 --seed 11");
    ids_write(ids, 64, 64, 300, -1, 5);
    for (int bi = 0; bi < 2; bi++) {
        snprintf(d, sizeof d, "%s/rnd-%s", top, bi ? "bidir" : "causal");
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --no-rope --layers all --stats variance --quiet %s", model,
                             ids, d, bi ? "--bidirectional" : "");
        if (rc != 0) fail_msg("probe: %s", out);
        int n;
        double *s[4];
        const char *keys[4] = {"variance_slope_attn", "variance_slope_attn_se", "variance_slope_resid", "variance_slope_resid_se"};
        for (int k = 0; k < 4; k++) s[k] = meta_1d(d, keys[k], &n);
        print_message("%s: attention slope %.4f +- %.4f, %.4f +- %.4f; residual %.4f +- %.4f, %.4f +- %.4f (layers 1, 2)\n",
                      bi ? "bidirectional" : "causal", s[0][0], s[1][0], s[0][1], s[1][1], s[2][0], s[3][0], s[2][1], s[3][1]);
        for (int l = 0; l < 2; l++)
            if (bi) assert_true(fabs(s[0][l]) < 3 * s[1][l] && fabs(s[2][l]) < 3 * s[3][l]);
            else assert_true(s[0][l] < -0.5 && s[0][l] < -20 * s[1][l]);
        for (int k = 0; k < 4; k++) free(s[k]);
    }
}

static void test_variance_against_torch(void **state) {
    (void)state;
    if (!have_torch()) skip();
    against_torch("llama", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 3", "1,3", 1, 1);
    /* the residual stream of sequences 0, 2, 4 only (layer 3 runs its MLP for those; 1 and 3 stop at the mix) */
    against_torch("llama-rs2", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 3", "1,3", 2, 2);
    against_torch("gptneox", "--arch gptneox --layers 2 --heads 4 --kv-heads 4 --vocab 300 --seed 4", "1,2", 2, 1);
    against_torch("phi3", "--arch phi3 --layers 2 --heads 4 --kv-heads 4 --vocab 300 --seed 5 --partial-rotary 0.5", "1,2", 1, 1);
    /* more RoPE layouts and scalings: qwen3's per-head q/k norms (GQA 2), gemma3's local and global
     * bases with an 8-token window, llama3 scaling, phi3 longrope with partial rotary */
    against_torch("qwen3", "--arch qwen3 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 4", "1,2", 2, 1);
    against_torch("gemma3", "--arch gemma3 --layers 2 --head-dim 16 --sliding-window 8 --vocab 300 --seed 4", "1,2", 1, 1);
    against_torch("llama3", "--arch llama --layers 2 --rope-scaling llama3 --vocab 300 --seed 4", "1,2", 1, 1);
    against_torch("longrope", "--arch phi3 --layers 2 --heads 4 --kv-heads 4 --rope-scaling longrope --partial-rotary 0.5 "
                              "--vocab 300 --seed 6", "1,2", 2, 1);
}

/* ---------------------------------------------------------------- the deepest layer run through */

typedef struct {
    int seen[4][MP_FWD_NPOINTS];
    float out[32 * 64]; /* layer 1's LAYER_OUT [T, C] */
    float mix[32 * 64]; /* layer 1's ATTN_MIX [T, NH * HS] */
} Cap;

static void cap_fn(void *ctx, int layer, int point, const float *x, int T, int width) {
    Cap *c = ctx;
    c->seen[layer][point]++;
    if (layer == 1 && point == MP_FWD_AT_LAYER_OUT) memcpy(c->out, x, sizeof(float) * (size_t)T * width);
    if (layer == 1 && point == MP_FWD_AT_ATTN_MIX) memcpy(c->mix, x, sizeof(float) * (size_t)T * width);
}

static void test_deepest_layer_runs_through(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/through", mp_test_tmpdir());
    MpModel m;
    model_make_open(&m, dir, "--arch llama --layers 2 --vocab 300 --seed 2");
    int32_t ids[20];
    for (int t = 0; t < 20; t++) ids[t] = (t * 37 + 5) % 300;
    static Cap c[4];
    const unsigned pts = 1u << MP_FWD_AT_ATTN_MIX | 1u << MP_FWD_AT_LAYER_OUT | 1u << MP_FWD_AT_ATTN_OUT;
    /* 0: logits (every layer whole); 1: no logits, the points asked for; 2: no logits, tap_points 0
     * ("every point": stops after the scores, as gram relies on); 3: as 1 with this run leaving out
     * LAYER_OUT and ATTN_OUT (the probe's sequences outside --resid-stride): the last layer stops at
     * its mix of values */
    for (int run = 0; run < 4; run++) {
        MpFwdConfig cfg = {.n_layers = 2, .max_seq = 20, .causal = 1, .rope = 1, .logits = run == 0, .tap_points = run == 2 ? 0 : pts};
        MpFwd f;
        MpErr e;
        memset(&f, 0, sizeof f);
        memset(&c[run], 0, sizeof c[run]);
        if (mp_fwd_init(&f, &m, &cfg, &e) != MP_OK) fail_msg("%s", e.msg);
        f.capture = cap_fn, f.capture_ctx = &c[run];
        f.skip_points = run == 3 ? 1u << MP_FWD_AT_LAYER_OUT | 1u << MP_FWD_AT_ATTN_OUT : 0u;
        if (mp_fwd_run(&f, ids, 20, NULL, NULL, &e) != MP_OK) fail_msg("%s", e.msg);
        mp_fwd_free(&f);
    }
    for (int run = 0; run < 2; run++)
        assert_int_equal(c[run].seen[1][MP_FWD_AT_LAYER_OUT], 1);
    assert_int_equal(c[1].seen[1][MP_FWD_AT_ATTN_MIX], 1);
    assert_memory_equal(c[0].out, c[1].out, sizeof(float) * 20 * 64);
    assert_int_equal(c[2].seen[1][MP_FWD_AT_K], 1); /* every point up to the scores ... */
    assert_int_equal(c[2].seen[1][MP_FWD_AT_ATTN_MIX], 0); /* ... and none after */
    assert_int_equal(c[2].seen[1][MP_FWD_AT_LAYER_OUT], 0);
    assert_int_equal(c[2].seen[0][MP_FWD_AT_LAYER_OUT], 1);
    assert_int_equal(c[1].seen[1][MP_FWD_AT_ATTN_OUT], 1);
    for (int l = 0; l < 2; l++) { /* run 3: the mix of every layer, nothing left out */
        assert_int_equal(c[3].seen[l][MP_FWD_AT_ATTN_MIX], 1);
        assert_int_equal(c[3].seen[l][MP_FWD_AT_ATTN_OUT], 0);
        assert_int_equal(c[3].seen[l][MP_FWD_AT_LAYER_OUT], 0);
    }
    assert_memory_equal(c[1].mix, c[3].mix, sizeof(float) * 20 * 64);
    mp_model_free(&m);
}

/* ---------------------------------------------------------------- the sums by hand */

enum { HN = 40, HT = 12, HH = 3, HD = 4, HC = 10, HW = HH * HD };

static uint64_t rng_state;
static double rng_u(void) {
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static double rng_n(void) { return sqrt(-2 * log(rng_u())) * cos(6.283185307179586 * rng_u()); }

/* x [N, T, W] of slot q: floats of mean 0.3 (+0.1 per sequence's draw) and sd 1/sqrt(i + 1) */
static void fill_x(float *x, int N, int T, int W) {
    for (int s = 0; s < N; s++) {
        const double shift = 0.1 * rng_n();
        for (int i = 0; i < T; i++)
            for (int d = 0; d < W; d++) x[((size_t)s * T + i) * W + d] = (float)(0.3 + shift + rng_n() / sqrt(i + 1.0));
    }
}

/* The variance over the values of sequences s with keep[s] (NULL: all) at position i, dimensions
 * [d0, d0 + n), by two passes. */
static double brute_var(const float *x, int N, int T, int W, int i, int d0, int n, const int *keep) {
    double sum = 0, cnt = 0, ss = 0;
    for (int s = 0; s < N; s++)
        if (!keep || keep[s])
            for (int d = d0; d < d0 + n; d++) sum += x[((size_t)s * T + i) * W + d], cnt++;
    const double m = sum / cnt;
    for (int s = 0; s < N; s++)
        if (!keep || keep[s])
            for (int d = d0; d < d0 + n; d++) ss += (x[((size_t)s * T + i) * W + d] - m) * (x[((size_t)s * T + i) * W + d] - m);
    return ss / cnt;
}

/* Its standard error: the sequences' u1, u2, then z = u2 − 2·mean(u1)·u1, sample sd / sqrt N. */
static double brute_se(const float *x, int N, int T, int W, int i, int d0, int n) {
    double u1[HN], u2[HN], m1 = 0, z[HN], mz = 0, v = 0;
    for (int s = 0; s < N; s++) {
        u1[s] = u2[s] = 0;
        for (int d = d0; d < d0 + n; d++) {
            const double y = x[((size_t)s * T + i) * W + d];
            u1[s] += y / n, u2[s] += y * y / n;
        }
        m1 += u1[s] / N;
    }
    for (int s = 0; s < N; s++) z[s] = u2[s] - 2 * m1 * u1[s], mz += z[s] / N;
    for (int s = 0; s < N; s++) v += (z[s] - mz) * (z[s] - mz) / (N - 1);
    return sqrt(v / N);
}

/* The slope of log v against log(i + 1), i in [1, T), by the normal equations. */
static double brute_slope(const double *v, int T) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    const int n = T - 1;
    for (int i = 1; i < T; i++) {
        const double a = log(i + 1.0), b = log(v[i]);
        sx += a, sy += b, sxx += a * a, sxy += a * b;
    }
    return (n * sxy - sx * sy) / (n * sxx - sx * sx);
}

/* The group of sequence s as probe_var.h documents it: FNV-1a 64 of the bytes of its mean squares
 * over all W dimensions (dimensions ascending, in double, rounded to float), bits 40.. mod 16. */
static int brute_group(const float *x, int s, int T, int W) {
    uint64_t h = 1469598103934665603ULL;
    for (int i = 0; i < T; i++) {
        double t2 = 0;
        for (int d = 0; d < W; d++) t2 += (double)x[((size_t)s * T + i) * W + d] * x[((size_t)s * T + i) * W + d];
        const float f = (float)(t2 / W);
        unsigned char b[4];
        memcpy(b, &f, 4);
        for (int k = 0; k < 4; k++) h = (h ^ b[k]) * 1099511628211ULL;
    }
    return (int)((h >> 40) % 16);
}

/* slope and jackknife se of x [N, T, W] by brute force */
static void brute_jack(const float *x, int N, int T, int W, double *slope, double *se) {
    double v[HT], b[16];
    int grp[HN], keep[HN], k = 0;
    for (int i = 0; i < T; i++) v[i] = brute_var(x, N, T, W, i, 0, W, NULL);
    *slope = brute_slope(v, T);
    for (int s = 0; s < N; s++) grp[s] = brute_group(x, s, T, W);
    for (int g = 0; g < 16; g++) {
        int out = 0;
        for (int s = 0; s < N; s++) keep[s] = grp[s] != g, out += grp[s] == g;
        if (!out || out == N) continue;
        for (int i = 0; i < T; i++) v[i] = brute_var(x, N, T, W, i, 0, W, keep);
        b[k++] = brute_slope(v, T);
    }
    double m = 0, ss = 0;
    for (int g = 0; g < k; g++) m += b[g] / k;
    for (int g = 0; g < k; g++) ss += (b[g] - m) * (b[g] - m);
    *se = sqrt((k - 1.0) / k * ss);
}

static void near(const char *what, double got, double want, double rel) {
    if (!(fabs(got - want) <= rel * fabs(want))) fail_msg("%s: %.17g, by hand %.17g", what, got, want);
}

static void test_sums_by_hand(void **state) {
    (void)state;
    const unsigned char mask[3] = {1, 0, 1};
    MpProbeAcc a;
    MpErr e;
    if (mp_probe_acc_init(&a, mask, 3, HH, HT, 0, 1, 1, &e) != MP_OK || mp_probe_acc_stat_on(&a, MP_PROBE_STAT_VARIANCE, &e) != MP_OK)
        fail_msg("%s", e.msg);
    rng_state = 11;
    float *mix = malloc(sizeof(float) * 3 * HN * HT * HW), *res = malloc(sizeof(float) * 3 * HN * HT * HC);
    for (int l = 0; l < 3; l++) fill_x(mix + (size_t)l * HN * HT * HW, HN, HT, HW), fill_x(res + (size_t)l * HN * HT * HC, HN, HT, HC);
    for (int s = 0; s < HN; s++) {
        for (int l = 0; l < 3; l++) {
            mp_probe_acc_capture(&a, l, MP_FWD_AT_ATTN_MIX, mix + ((size_t)l * HN + s) * HT * HW, HT, HW);
            mp_probe_acc_capture(&a, l, MP_FWD_AT_Q, mix + ((size_t)l * HN + s) * HT * HW, HT, HW); /* not read */
            mp_probe_acc_capture(&a, l, MP_FWD_AT_LAYER_OUT, res + ((size_t)l * HN + s) * HT * HC, HT, HC);
        }
        mp_probe_acc_seq_end(&a);
    }
    double va[2 * HT], vas[2 * HT], vh[2 * HH * HT], vhs[2 * HH * HT], vr[2 * HT], vrs[2 * HT], sl[8], scr[HT];
    mp_probe_var_attn(&a, va), mp_probe_var_attn_se(&a, vas), mp_probe_var_heads(&a, vh), mp_probe_var_heads_se(&a, vhs);
    mp_probe_var_resid(&a, vr), mp_probe_var_resid_se(&a, vrs);
    mp_probe_var_slopes(&a, sl, scr);
    for (int li = 0; li < 2; li++) {
        const int l = li ? 2 : 0; /* model layer of the slot */
        const float *xm = mix + (size_t)l * HN * HT * HW, *xr = res + (size_t)l * HN * HT * HC;
        for (int i = 0; i < HT; i++) {
            near("var_attn", va[li * HT + i], brute_var(xm, HN, HT, HW, i, 0, HW, NULL), 1e-12);
            near("var_attn_se", vas[li * HT + i], brute_se(xm, HN, HT, HW, i, 0, HW), 1e-9);
            near("var_resid", vr[li * HT + i], brute_var(xr, HN, HT, HC, i, 0, HC, NULL), 1e-12);
            near("var_resid_se", vrs[li * HT + i], brute_se(xr, HN, HT, HC, i, 0, HC), 1e-9);
            for (int h = 0; h < HH; h++) {
                near("var_attn_heads", vh[(li * HH + h) * HT + i], brute_var(xm, HN, HT, HW, i, h * HD, HD, NULL), 1e-12);
                near("var_attn_heads_se", vhs[(li * HH + h) * HT + i], brute_se(xm, HN, HT, HW, i, h * HD, HD), 1e-9);
            }
        }
        double bs, be;
        brute_jack(xm, HN, HT, HW, &bs, &be);
        near("attention slope", sl[li * 4], bs, 1e-10);
        near("attention slope se", sl[li * 4 + 1], be, 1e-8);
        brute_jack(xr, HN, HT, HC, &bs, &be);
        near("residual slope", sl[li * 4 + 2], bs, 1e-10);
        near("residual slope se", sl[li * 4 + 3], be, 1e-8);
        print_message("slot %d: attention slope %.4f +- %.4f, residual %.4f +- %.4f (by hand alike)\n", li, sl[li * 4],
                      sl[li * 4 + 1], sl[li * 4 + 2], sl[li * 4 + 3]);
    }
    free(mix);
    free(res);
    mp_probe_acc_free(&a);
}

/* Sums of different lengths do not merge with variance (its per-position sums hold whole sequences
 * only); two of one length do, array by array. */
static void test_merge_rules(void **state) {
    (void)state;
    const unsigned char mask[1] = {1};
    MpProbeAcc a, b, c;
    MpErr e;
    if (mp_probe_acc_init(&a, mask, 1, 2, 12, 0, 1, 1, &e) != MP_OK || mp_probe_acc_stat_on(&a, MP_PROBE_STAT_VARIANCE, &e) != MP_OK ||
        mp_probe_acc_init(&b, mask, 1, 2, 8, 0, 1, 1, &e) != MP_OK || mp_probe_acc_stat_on(&b, MP_PROBE_STAT_VARIANCE, &e) != MP_OK ||
        mp_probe_acc_init(&c, mask, 1, 2, 12, 0, 1, 1, &e) != MP_OK || mp_probe_acc_stat_on(&c, MP_PROBE_STAT_VARIANCE, &e) != MP_OK)
        fail_msg("%s", e.msg);
    assert_int_equal(mp_probe_acc_merge(&a, &b, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "different lengths with variance"));
    c.vattn[3] = 2.5, c.vgroup[7] = 1.0, c.n_done = 1;
    assert_int_equal(mp_probe_acc_merge(&a, &c, &e), MP_OK);
    assert_true(a.vattn[3] == 2.5 && a.vgroup[7] == 1.0 && a.n_done == 1);
    mp_probe_acc_free(&a), mp_probe_acc_free(&b), mp_probe_acc_free(&c);
}

/* ---------------------------------------------------------------- the jackknife calibrated */

static void test_slope_se_calibrated(void **state) {
    (void)state;
    enum { R = 40, N = 64, T = 32, W = 16 };
    const unsigned char mask[1] = {1};
    float *x = malloc(sizeof(float) * N * T * W);
    double slope[R], se[R], sl[4], scr[T];
    rng_state = 99;
    for (int r = 0; r < R; r++) {
        MpProbeAcc a;
        MpErr e;
        if (mp_probe_acc_init(&a, mask, 1, 2, T, 0, 1, 1, &e) != MP_OK || mp_probe_acc_stat_on(&a, MP_PROBE_STAT_VARIANCE, &e) != MP_OK)
            fail_msg("%s", e.msg);
        fill_x(x, N, T, W);
        for (int s = 0; s < N; s++) {
            mp_probe_acc_capture(&a, 0, MP_FWD_AT_ATTN_MIX, x + (size_t)s * T * W, T, W);
            mp_probe_acc_capture(&a, 0, MP_FWD_AT_LAYER_OUT, x + (size_t)s * T * W, T, W);
            mp_probe_acc_seq_end(&a);
        }
        mp_probe_var_slopes(&a, sl, scr);
        slope[r] = sl[0], se[r] = sl[1];
        assert_true(sl[0] == sl[2] && sl[1] == sl[3]); /* the same values at both points */
        mp_probe_acc_free(&a);
    }
    double m = 0, sd = 0, mse = 0;
    for (int r = 0; r < R; r++) m += slope[r] / R, mse += se[r] / R;
    for (int r = 0; r < R; r++) sd += (slope[r] - m) * (slope[r] - m) / (R - 1);
    sd = sqrt(sd);
    print_message("%d replicates of %d sequences, variance 1/(i+1) + a shared mean: slope %.4f (sd %.4f over replicates), "
                  "mean jackknife se %.4f (ratio %.2f)\n", R, N, m, sd, mse, mse / sd);
    assert_true(mse > 0.7 * sd && mse < 1.3 * sd);
    double v[T];
    for (int i = 0; i < T; i++) v[i] = 1.0 / (i + 1) + 0.01; /* the shift's variance, 0.1² */
    const double want = brute_slope(v, T);
    print_message("the curve's own slope %.4f\n", want);
    assert_true(fabs(m - want) < 4 * sd / sqrt(R));
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sums_by_hand),
        cmocka_unit_test(test_merge_rules),
        cmocka_unit_test(test_slope_se_calibrated),
        cmocka_unit_test(test_deepest_layer_runs_through),
        cmocka_unit_test(test_threads_same_bytes),
        cmocka_unit_test(test_random_nope_causal_falls_bidirectional_flat),
        cmocka_unit_test(test_variance_against_torch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
