/* test_probe_freq.c — `probe --stats freq` (src/model/probe_freq.c, the row MP_PROBE_STAT_FREQ of
 * the statistics table) and `--rope-keep-high` against independent computations:
 *   - a plain PyTorch forward in float64 (tests/ref/freq_ref.py on probe_ref.py's decoder, its own
 *     rotate-half RoPE and masks) of mkmodel models of every RoPE layout and scaling maskpos loads —
 *     llama (every dim rotated; layers 1 and 3 of 3, GQA 2), gptneox (rotary_pct 0.25: the unrotated
 *     rest), phi3 (partial rotary 0.5), qwen3 (per-head q/k norms), gemma3 (local base 10000 and a
 *     global one, an 8-token window, query_pre_attn_scalar; layers 1 and 6 of 6), llama3 scaling,
 *     phi3 longrope — computing the per-pair norms and |contributions| and their standard errors
 *     from its own tensors: means within 1e-6 of the array's largest value (an f32 forward),
 *     standard errors within 1e-5 of theirs; S = 100 samples 64 query rows, S = 24 takes every row;
 *     one run --bidirectional;
 *   - --rope-keep-high 0.5 against the reference with the low half of its frequencies set to 0;
 *     freq_angle.npy 0 exactly on those pairs, freq_base.npy each layer's base (gemma3: local
 *     10000, global the model's --rope-theta);
 *   - GGUF's interleaved pairs: the same model written as GGUF (llama Q/K rows permuted as
 *     convert_hf_to_gguf does) gives the HF model's statistic pair by pair (within 1e-6);
 *   - a closed form: captures of constructed queries and keys (pair p of query i at angle i·θ_p with
 *     norm a_p·(1 + s/8) in sequence s, the key's at j·θ_p + φ_p with norm b_p, θ_p ∈ {0, π}; the
 *     unrotated dims constant) fed to an accumulator of 2 layers, 4 heads, 2 key heads: the norms
 *     are a_p·(1 + s/8) and b_p, the contribution scale·a_p·(1 + s/8)·b_p·|cos φ_p| for every (i, j),
 *     means and standard errors over the sequences by the textbook formulas, within 1e-12;
 *   - --threads 1 and 2 write the same bytes (test_probe_table.c also checks every row after a kill
 *     and --resume, and test_mpi.c the ranks of every row);
 *   - --rope-keep-high outside [0, 1], not a number, or with --no-rope: one line, exit 2.
 *
 *   make build/tests/test_probe_freq && build/tests/test_probe_freq
 */
#include <math.h>

#include "test_model_util.h"

#include <sys/stat.h>

#include "model/fwd.h"  /* MP_FWD_AT_Q, MP_FWD_AT_K, mp_fwd_rope_unrotated */
#include "model/probe.h" /* MpProbeAcc */
#include "model/probe_freq.h"

static int have_torch(void) {
    char out[4096];
    if (mp_test_shell(out, sizeof out, "/usr/bin/python3 -c 'import torch, numpy'") == 0) return 1;
    print_message("python3-torch is not installed: %s\n", out);
    return 0;
}

/* max |a − b| over dir/name.npy and dir/ref_name.npy, over max |b| (each finite; the same count). */
static double norm_err(const char *dir, const char *name, const char *ref) {
    char p[600];
    size_t n1, n2;
    snprintf(p, sizeof p, "%s/%s.npy", dir, name);
    double *a = npy_load_f64(p, &n1, NULL);
    snprintf(p, sizeof p, "%s/%s.npy", ref ? ref : dir, ref ? name : "");
    if (!ref) snprintf(p, sizeof p, "%s/ref_%s.npy", dir, name);
    double *b = npy_load_f64(p, &n2, NULL);
    if (n1 != n2 || n1 == 0) fail_msg("%s: %zu values, reference %zu", name, n1, n2);
    double err = 0, big = 0;
    for (size_t k = 0; k < n1; k++) {
        if (!isfinite(a[k]) || !isfinite(b[k])) fail_msg("%s[%zu]: maskpos %g reference %g", name, k, a[k], b[k]);
        err = fmax(err, fabs(a[k] - b[k]));
        big = fmax(big, fabs(b[k]));
    }
    free(a);
    free(b);
    return big > 0 ? err / big : err;
}

static const char *const freq_vals[] = {"freq_q_norm", "freq_k_norm", "freq_contrib", "freq_rest"};
static const char *const freq_ses[] = {"freq_q_norm_se", "freq_k_norm_se", "freq_contrib_se", "freq_rest_se"};

/* probe --stats freq of a model (mkmodel args) on N × S ids against freq_ref.py (extra flags to
 * both: "" or "--bidirectional"; keep: --rope-keep-high, 1 none). */
static void against_torch(const char *name, const char *mk, const char *layers, int S, const char *flags, double keep) {
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], d[300], out[16384], kh[64] = "";
    snprintf(model, sizeof model, "%s/%s", top, name);
    snprintf(ids, sizeof ids, "%s/%s-ids.npy", top, name);
    snprintf(d, sizeof d, "%s/%s-out-%d", top, name, S);
    model_make(model, mk);
    ids_write(ids, 5, S, 300, -1, 17);
    if (keep < 1) snprintf(kh, sizeof kh, "--rope-keep-high %g", keep);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers %s --stats freq --threads 2 --quiet %s %s --force",
                         model, ids, d, layers, flags, kh);
    if (rc != 0) fail_msg("%s: probe failed: %s", name, out);
    rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/freq_ref.py %s %s %s --layers %s %s --keep-high %g",
                       MP_SOURCE_DIR, model, ids, d, layers, flags, keep);
    if (rc != 0) fail_msg("freq_ref.py failed: %s", out);
    double ev = 0, es = 0;
    for (int k = 0; k < 4; k++) {
        ev = fmax(ev, norm_err(d, freq_vals[k], NULL));
        es = fmax(es, norm_err(d, freq_ses[k], NULL));
    }
    print_message("%s (layers %s, S %d%s%s): means within %.2g of torch (float64), standard errors %.2g\n", name, layers, S,
                  flags[0] ? ", " : "", flags, ev, es);
    assert_true(ev < 1e-6);
    assert_true(es < 1e-5);
}

static void test_freq_against_torch(void **state) {
    (void)state;
    if (!have_torch()) skip();
    against_torch("llama", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 3", "1,3", 100, "", 1);
    against_torch("llama", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 3", "1,3", 24, "", 1);
    against_torch("gptneox", "--arch gptneox --layers 2 --heads 4 --kv-heads 4 --vocab 300 --seed 4", "1,2", 100, "", 1);
    against_torch("phi3", "--arch phi3 --layers 2 --heads 4 --kv-heads 4 --vocab 300 --seed 5 --partial-rotary 0.5", "1,2", 24,
                  "--bidirectional", 1);
    against_torch("qwen3", "--arch qwen3 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 4", "1,2", 100, "", 1);
    against_torch("gemma3", "--arch gemma3 --layers 6 --head-dim 16 --sliding-window 8 --rope-theta 50000 --vocab 300 --seed 4",
                  "1,6", 100, "", 1);
    against_torch("llama3", "--arch llama --layers 2 --rope-scaling llama3 --vocab 300 --seed 4", "1,2", 100, "", 1);
    against_torch("longrope", "--arch phi3 --layers 2 --heads 4 --kv-heads 4 --rope-scaling longrope --partial-rotary 0.5 "
                              "--vocab 300 --seed 6", "1,2", 100, "", 1);
}

/* gemma3's bases per layer in freq_base.npy: local 10000, global the model's. */
static void test_gemma3_bases(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], d[300], out[16384], p[600];
    snprintf(model, sizeof model, "%s/g3b", top);
    snprintf(ids, sizeof ids, "%s/g3b-ids.npy", top);
    snprintf(d, sizeof d, "%s/g3b-out", top);
    model_make(model, "--arch gemma3 --layers 6 --head-dim 16 --sliding-window 8 --rope-theta 50000 --vocab 300 --seed 4");
    ids_write(ids, 2, 20, 300, -1, 3);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers 1,6 --stats freq --quiet", model, ids, d);
    if (rc != 0) fail_msg("probe: %s", out);
    size_t n;
    snprintf(p, sizeof p, "%s/freq_base.npy", d);
    double *b = npy_load_f64(p, &n, NULL);
    assert_int_equal(n, 2);
    print_message("gemma3 layers 1 (local) and 6 (global): bases %g and %g\n", b[0], b[1]);
    assert_true(b[0] == 10000.0 && b[1] == 50000.0);
    free(b);
}

/* p-RoPE against the reference (torch), and the angles: 0 on the unrotated pairs, the model's
 * elsewhere; the rule's edges. */
static void test_keep_high(void **state) {
    (void)state;
    if (have_torch()) {
        against_torch("keep", "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 8", "1,2", 100, "", 0.5);
        against_torch("keepneox", "--arch gptneox --layers 2 --heads 2 --kv-heads 2 --vocab 300 --seed 8", "1,2", 24, "", 0.25);
    }
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], out[16384], p[600];
    snprintf(model, sizeof model, "%s/ang", top);
    snprintf(ids, sizeof ids, "%s/ang-ids.npy", top);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 8");
    ids_write(ids, 2, 20, 300, -1, 5);
    double *t[2];
    size_t n;
    int64_t sh[4];
    for (int k = 0; k < 2; k++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/ang%d --layers all --stats freq --quiet --rope-keep-high %s",
                             model, ids, top, k, k ? "0.5" : "1");
        if (rc != 0) fail_msg("probe: %s", out);
        snprintf(p, sizeof p, "%s/ang%d/freq_angle.npy", top, k);
        t[k] = npy_load_f64(p, &n, sh);
    }
    const int P = (int)sh[1], keep = P - mp_fwd_rope_unrotated(0.5, P);
    assert_int_equal(P, 8);
    assert_int_equal(keep, 4);
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < P; k++) {
            assert_true(t[0][l * P + k] > 0 && fabs(t[0][l * P + k] - pow(10000.0, -2.0 * k / (2 * P))) < 1e-7);
            if (k < keep) assert_true(t[1][l * P + k] == t[0][l * P + k]);
            else assert_true(t[1][l * P + k] == 0.0);
        }
    print_message("--rope-keep-high 0.5: pairs 0-3 rotate (angles %.4g .. %.4g, 10000^(-2p/R)), pairs 4-7 angle 0\n", t[1][0],
                  t[1][3]);
    free(t[0]);
    free(t[1]);
    /* the rule's edges: 0.29 of 100 pairs rotate 29 (rounded to 1e-9 first), 1 all, 0 none */
    assert_int_equal(mp_fwd_rope_unrotated(0.29, 100), 71);
    assert_int_equal(mp_fwd_rope_unrotated(1.0, 64), 0);
    assert_int_equal(mp_fwd_rope_unrotated(0.0, 64), 64);
    assert_int_equal(mp_fwd_rope_unrotated(0.999, 64), 1);
}

/* GGUF stores llama's pairs interleaved (rows permuted); the loader undoes it, so pair p is the same
 * frequency in both files: the same statistic pair by pair. */
static void test_gguf_interleaved_same_pairs(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char hf[300], gg[300], ids[300], d1[300], d2[300], out[16384];
    snprintf(hf, sizeof hf, "%s/ilv-hf", top);
    snprintf(gg, sizeof gg, "%s/ilv.gguf", top);
    snprintf(ids, sizeof ids, "%s/ilv-ids.npy", top);
    snprintf(d1, sizeof d1, "%s/ilv-out-hf", top);
    snprintf(d2, sizeof d2, "%s/ilv-out-gguf", top);
    model_make(hf, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 12");
    model_make(gg, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 12 --format gguf");
    ids_write(ids, 4, 40, 300, -1, 8);
    const char *dirs[2] = {d1, d2}, *models[2] = {hf, gg};
    for (int k = 0; k < 2; k++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers all --stats freq --quiet", models[k], ids,
                             dirs[k]);
        if (rc != 0) fail_msg("probe %s: %s", models[k], out);
    }
    double err = 0;
    for (int k = 0; k < 4; k++) err = fmax(err, norm_err(d2, freq_vals[k], d1));
    print_message("GGUF (interleaved pairs, un-permuted by the loader) against HF: within %.2g pair by pair\n", err);
    assert_true(err < 1e-6);
}

/* ---------------------------------------------------------------- the closed form */

enum { CF_H = 4, CF_NKV = 2, CF_HS = 10, CF_R = 6, CF_P = 3, CF_S = 30, CF_N = 5 };

/* pair p's query norm a_p, key norm b_p, key phase φ_p, angle per position θ_p ∈ {0, π} */
static const double cf_a[CF_P] = {1.5, 0.25, 2.0}, cf_b[CF_P] = {0.5, 3.0, 1.25}, cf_phi[CF_P] = {0.3, 1.1, 2.5},
                    cf_theta[CF_P] = {M_PI, 0.0, M_PI};
/* the unrotated dims: q = u·(1 + s/8) in every dim, k = w (4 dims) */
static const double cf_u = 0.7, cf_w = -0.4;

static void cf_vectors(float *q, float *k, int s) {
    const double g = 1 + s / 8.0;
    for (int i = 0; i < CF_S; i++) {
        for (int h = 0; h < CF_H; h++) {
            float *v = q + ((size_t)i * CF_H + h) * CF_HS;
            for (int p = 0; p < CF_P; p++) {
                v[p] = (float)(cf_a[p] * g * cos(i * cf_theta[p]));
                v[p + CF_P] = (float)(cf_a[p] * g * sin(i * cf_theta[p]));
            }
            for (int x = CF_R; x < CF_HS; x++) v[x] = (float)(cf_u * g);
        }
        for (int h = 0; h < CF_NKV; h++) {
            float *v = k + ((size_t)i * CF_NKV + h) * CF_HS;
            for (int p = 0; p < CF_P; p++) {
                v[p] = (float)(cf_b[p] * cos(i * cf_theta[p] + cf_phi[p]));
                v[p + CF_P] = (float)(cf_b[p] * sin(i * cf_theta[p] + cf_phi[p]));
            }
            for (int x = CF_R; x < CF_HS; x++) v[x] = (float)cf_w;
        }
    }
}

/* mean and standard error over s < N of x_s = c·(1 + s/8) */
static void cf_mean_se(double c, double *m, double *se) {
    double s1 = 0, s2 = 0;
    for (int s = 0; s < CF_N; s++) s1 += c * (1 + s / 8.0);
    *m = s1 / CF_N;
    for (int s = 0; s < CF_N; s++) s2 += (c * (1 + s / 8.0) - *m) * (c * (1 + s / 8.0) - *m);
    *se = sqrt(s2 / (CF_N - 1) / CF_N);
}

static void test_closed_form(void **state) {
    (void)state;
    const unsigned char mask[2] = {1, 1};
    MpProbeAcc a;
    MpErr e;
    if (mp_probe_acc_init(&a, mask, 2, CF_H, CF_S, 0, 1, 1, &e) != MP_OK) fail_msg("%s", e.msg);
    a.fr_hs = CF_HS, a.fr_nkv = CF_NKV, a.fr_rot = CF_R, a.fr_scale = 0.3;
    if (mp_probe_acc_stat_on(&a, MP_PROBE_STAT_FREQ, &e) != MP_OK) fail_msg("%s", e.msg);
    float *q = malloc(sizeof(float) * CF_S * CF_H * CF_HS), *k = malloc(sizeof(float) * CF_S * CF_NKV * CF_HS);
    for (int s = 0; s < CF_N; s++) {
        cf_vectors(q, k, s);
        for (int l = 0; l < 2; l++) {
            mp_probe_acc_capture(&a, l, MP_FWD_AT_Q, q, CF_S, CF_H * CF_HS);
            mp_probe_acc_capture(&a, l, MP_FWD_AT_K, k, CF_S, CF_NKV * CF_HS);
        }
        mp_probe_acc_seq_end(&a);
    }
    double qn[2 * CF_H * CF_P], qs[2 * CF_H * CF_P], kn[2 * CF_H * CF_P], ks[2 * CF_H * CF_P], cn[2 * CF_H * CF_P],
        cs[2 * CF_H * CF_P], rn[2 * CF_H * 3], rs[2 * CF_H * 3];
    mp_probe_freq_q_norm(&a, qn), mp_probe_freq_q_norm_se(&a, qs), mp_probe_freq_k_norm(&a, kn);
    mp_probe_freq_k_norm_se(&a, ks), mp_probe_freq_contrib(&a, cn), mp_probe_freq_contrib_se(&a, cs);
    mp_probe_freq_rest(&a, rn), mp_probe_freq_rest_se(&a, rs);
    double err = 0, m, se;
    for (int lh = 0; lh < 2 * CF_H; lh++) {
        for (int p = 0; p < CF_P; p++) {
            const int x = lh * CF_P + p;
            cf_mean_se(cf_a[p], &m, &se);
            err = fmax(err, fmax(fabs(qn[x] - m) / m, fabs(qs[x] - se) / se));
            err = fmax(err, fmax(fabs(kn[x] - cf_b[p]) / cf_b[p], fabs(ks[x])));
            cf_mean_se(0.3 * cf_a[p] * cf_b[p] * fabs(cos(cf_phi[p])), &m, &se);
            err = fmax(err, fmax(fabs(cn[x] - m) / m, fabs(cs[x] - se) / se));
        }
        const double rd = CF_HS - CF_R;
        cf_mean_se(cf_u * sqrt(rd), &m, &se);
        err = fmax(err, fmax(fabs(rn[lh * 3] - m) / m, fabs(rs[lh * 3] - se) / se));
        err = fmax(err, fabs(rn[lh * 3 + 1] - fabs(cf_w) * sqrt(rd)) / (fabs(cf_w) * sqrt(rd)));
        cf_mean_se(0.3 * rd * cf_u * fabs(cf_w), &m, &se);
        err = fmax(err, fmax(fabs(rn[lh * 3 + 2] - m) / m, fabs(rs[lh * 3 + 2] - se) / se));
    }
    print_message("closed form (norms a_p (1 + s/8) and b_p, contribution scale a_p b_p |cos phi_p|, the unrotated block): "
                  "within %.2g relative\n", err);
    assert_true(err < 1e-6); /* the vectors are float: cos and sin rounded to 2^-24 */
    free(q);
    free(k);
    mp_probe_acc_free(&a);
}

/* ---------------------------------------------------------------- what the run adds */

/* The printed table's low-half shares from the .npy files, meta.json's sampling, freq.png with --plot. */
static void test_table_meta_figure(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], d[300], out[16384], p[600];
    snprintf(model, sizeof model, "%s/tab", top);
    snprintf(ids, sizeof ids, "%s/tab-ids.npy", top);
    snprintf(d, sizeof d, "%s/tab-out", top);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 10");
    ids_write(ids, 3, 30, 300, -1, 6);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers 2 --stats freq --plot", model, ids, d);
    if (rc != 0) fail_msg("probe: %s", out);
    size_t n;
    int64_t sh[4];
    snprintf(p, sizeof p, "%s/freq_q_norm.npy", d);
    double *q = npy_load_f64(p, &n, sh);
    snprintf(p, sizeof p, "%s/freq_contrib.npy", d);
    double *c = npy_load_f64(p, &n, NULL);
    const int H = (int)sh[1], P = (int)sh[2];
    double qa = 0, ql = 0, ca = 0, cl = 0;
    for (int h = 0; h < H; h++)
        for (int k = 0; k < P; k++) {
            qa += q[h * P + k], ca += c[h * P + k];
            if (k >= P / 2) ql += q[h * P + k], cl += c[h * P + k];
        }
    char want[128];
    snprintf(want, sizeof want, "%18.3f  %26.3f", ql / qa, cl / ca);
    if (!strstr(out, "RoPE frequency usage (8 pairs") || !strstr(out, want)) fail_msg("no row '%s' in:\n%s", want, out);
    char *rows = meta_key(d, "freq_rows"), *pairs = meta_key(d, "freq_pairs");
    assert_string_equal(rows, "64");
    assert_string_equal(pairs, "8");
    snprintf(p, sizeof p, "%s/freq.png", d);
    struct stat st;
    assert_true(stat(p, &st) == 0 && st.st_size > 1000);
    print_message("layer 2: q norm %.3f, |contribution| %.3f in the low half (printed as computed from the .npy); "
                  "freq.png written\n", ql / qa, cl / ca);
    free(rows), free(pairs), free(q), free(c);
}

/* ---------------------------------------------------------------- threads, bad input */

static void test_threads_same_bytes(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char model[300], ids[300];
    snprintf(model, sizeof model, "%s/thr", top);
    snprintf(ids, sizeof ids, "%s/thr-ids.npy", top);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 9");
    ids_write(ids, 7, 90, 300, -1, 4);
    const char *files[] = {"freq_q_norm.npy", "freq_q_norm_se.npy", "freq_k_norm.npy", "freq_k_norm_se.npy", "freq_contrib.npy",
                           "freq_contrib_se.npy", "freq_rest.npy", "freq_rest_se.npy", "freq_angle.npy", "freq_base.npy"};
    probe_threads_same(top, model, ids, "--layers all --stats freq", files, sizeof files / sizeof files[0]);
    print_message("--threads 2: 10 .npy the same as --threads 1\n");
}

static void test_bad_input(void **state) {
    (void)state;
    const char *top = mp_test_tmpdir();
    char model[300], ids[300], out[16384];
    snprintf(model, sizeof model, "%s/bad", top);
    snprintf(ids, sizeof ids, "%s/bad-ids.npy", top);
    model_make(model, "--arch llama --layers 1 --vocab 300 --seed 2");
    ids_write(ids, 2, 16, 300, -1, 1);
    static const struct {
        const char *flags, *want;
    } cases[] = {
        {"--rope-keep-high 1.5", "--rope-keep-high: 1.5 is outside [0, 1]"},
        {"--rope-keep-high -0.1", "--rope-keep-high: -0.1 is outside [0, 1]"},
        {"--rope-keep-high x", "--rope-keep-high: 'x' is not a number"},
        {"--rope-keep-high 0.5 --no-rope", "--rope-keep-high and --no-rope exclude each other"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/bad-out %s", model, ids, top, cases[c].flags);
        if (rc != 2 || !strstr(out, cases[c].want)) fail_msg("%s: exit %d, '%s' (wanted 2 and '%s')", cases[c].flags, rc, out, cases[c].want);
    }
    print_message("bad --rope-keep-high: 4 cases, one line and exit 2\n");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closed_form),
        cmocka_unit_test(test_freq_against_torch),
        cmocka_unit_test(test_gemma3_bases),
        cmocka_unit_test(test_keep_high),
        cmocka_unit_test(test_gguf_interleaved_same_pairs),
        cmocka_unit_test(test_table_meta_figure),
        cmocka_unit_test(test_threads_same_bytes),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
