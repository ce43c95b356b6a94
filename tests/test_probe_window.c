/* test_probe_window.c — sliding-window layers in the probe accumulator (src/model/probe_acc.c,
 * src/model/probe_recency.c) and through `maskpos probe`:
 *   - keys outside a layer's window are unobserved, not 0: an accumulator fed scores whose
 *     out-of-window entries are -inf (what the forward pass gives) and one fed 1e6 there hold
 *     the same bits in every sum (scores, per head, probabilities, recency, block sums);
 *   - against definitions written here (double, two-pass): the mean map is NaN exactly where
 *     j > i or i - j >= W, and elsewhere the mean over sequences and heads; standard errors; the
 *     block test (each observed diagonal minus its mean, block means over observed entries); the
 *     recency probability (triples j < k < i inside the window only);
 *   - one-sequence accumulators merged in order give the direct sums bit for bit; accumulators
 *     of different windows refuse to merge;
 *   - through the tool, on a gemma2 model with --sliding-window 6 and S = 20: the windowed
 *     layers' maps have exactly S(S-1)/2 + (S-W)(S-W+1)/2 NaN entries (the boundary i - j < W),
 *     the global ones S(S-1)/2; meta.json lists each layer's window; a run killed between
 *     checkpoints and resumed writes the uninterrupted run's bytes; a window >= S changes no
 *     byte of the maps (W = S and W = 4096 give the same files), W = S - 1 masks one entry.
 */
#include "test_model_util.h" /* model_make, ids_write, npy_load_f64, files_equal */

#include <math.h>
#include <signal.h>

#include "core/json.h"           /* mp_json_read */
#include "core/util.h"           /* mp_file_exists */
#include "model/probe.h"         /* MpProbeAcc */
#include "model/probe_recency.h" /* mp_probe_recency_results */

enum { H = 2, S = 20, W = 6, N = 30 };

static uint64_t g_state = 0x9E3779B97F4A7C15ull;
static double unif(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (double)(g_state >> 11) / 9007199254740992.0;
}

static int visible(int i, int j) { return j <= i && i - j < W; }

/* One sequence's scores [H,S,S]: a relative part, an early-key bump and noise where visible;
 * outside, `outside` (-inf as the forward pass writes, or a large finite decoy). */
static void make_scores(float *sc, float outside) {
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++)
                sc[((size_t)h * S + i) * S + j] =
                    visible(i, j) ? (float)(0.4 * exp(-(i - j) / 3.0) + (j < 3 ? 0.2 : 0.0) + unif() - 0.5) : outside;
}

/* Softmax of each row over its visible keys (0 elsewhere), as the forward pass gives them. */
static void make_probs(float *p, const float *sc) {
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++) {
            const float *r = sc + ((size_t)h * S + i) * S;
            float *o = p + ((size_t)h * S + i) * S;
            double mx = -INFINITY, z = 0;
            for (int j = 0; j < S; j++)
                if (visible(i, j) && r[j] > mx) mx = r[j];
            for (int j = 0; j < S; j++) z += visible(i, j) ? exp(r[j] - mx) : 0;
            for (int j = 0; j < S; j++) o[j] = visible(i, j) ? (float)(exp(r[j] - mx) / z) : 0.0f;
        }
}

static void acc_init(MpProbeAcc *a, int window) {
    const unsigned char mask[1] = {1};
    MpErr e;
    if (mp_probe_acc_init(a, mask, 1, H, S, 1, 1, 1, &e) != MP_OK) fail_msg("%s", e.msg);
    a->window[0] = window; /* what mp_probe_acc_windows sets for a layer with W < S */
    if (mp_probe_acc_stat_on(a, MP_PROBE_STAT_PROBS, &e) != MP_OK || mp_probe_acc_stat_on(a, MP_PROBE_STAT_RECENCY, &e) != MP_OK) fail_msg("%s", e.msg);
}

static void acc_feed(MpProbeAcc *a, const float *sc) {
    float p[H * S * S];
    make_probs(p, sc);
    mp_probe_acc_hook(a, 0, sc, H, S);
    mp_probe_acc_probs_hook(a, 0, p, H, S);
    mp_probe_acc_seq_end(a);
}

static void same_bits(const MpProbeAcc *x, const MpProbeAcc *y, const char *what) {
    MpProbeArray tx[MP_PROBE_MAX_ARRAYS], ty[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(x, tx);
    assert_int_equal(n, mp_probe_acc_arrays(y, ty));
    for (int k = 0; k < n; k++)
        if (tx[k].n != ty[k].n || memcmp(tx[k].p, ty[k].p, tx[k].n * sizeof(double))) fail_msg("%s: array %s differs", what, tx[k].name);
}

/* The block test from its definition on head-mean maps hm [N,S,S] (NaN where unobserved): per
 * sequence each diagonal minus the mean of its observed entries, block means over the observed
 * entries of a 16 x 16 grid, z = sqrt(mean over blocks of (mean / se)^2). */
static double block_z_definition(const double *hm) {
    const int nb = 16;
    double bm[N][16][16];
    int cnt[16][16] = {{0}};
    memset(bm, 0, sizeof bm);
    for (int n = 0; n < N; n++) {
        const double *x = hm + (size_t)n * S * S;
        for (int k = 0; k < S; k++) {
            double dm = 0;
            int c = 0;
            for (int i = k; i < S; i++)
                if (!isnan(x[i * S + i - k])) dm += x[i * S + i - k], c++;
            if (!c) continue;
            dm /= c;
            for (int i = k; i < S; i++) {
                if (isnan(x[i * S + i - k])) continue;
                int bi = 0, bj = 0;
                while (i >= ((bi + 1) * S + nb - 1) / nb) bi++;
                while (i - k >= ((bj + 1) * S + nb - 1) / nb) bj++;
                bm[n][bi][bj] += x[i * S + i - k] - dm;
                if (n == 0) cnt[bi][bj]++;
            }
        }
    }
    double acc = 0;
    int used = 0;
    for (int bi = 0; bi < nb; bi++)
        for (int bj = 0; bj < nb; bj++) {
            if (!cnt[bi][bj]) continue;
            double m = 0, v = 0;
            for (int n = 0; n < N; n++) m += bm[n][bi][bj] / cnt[bi][bj];
            m /= N;
            for (int n = 0; n < N; n++) v += pow(bm[n][bi][bj] / cnt[bi][bj] - m, 2);
            v /= N - 1;
            if (!(v > 0)) continue;
            acc += m * m / (v / N);
            used++;
        }
    return sqrt(acc / used);
}

static void test_window_sums_against_definitions(void **state) {
    (void)state;
    MpProbeAcc a, decoy, merged, part;
    acc_init(&a, W);
    acc_init(&decoy, W);
    acc_init(&merged, W);
    acc_init(&part, W);
    float sc[H * S * S], sd[H * S * S];
    double *hm = malloc(sizeof(double) * N * S * S), *sum = calloc((size_t)S * S, sizeof(double));
    uint64_t recent = 0;
    MpErr e;
    for (int n = 0; n < N; n++) {
        const uint64_t st = g_state;
        make_scores(sc, -INFINITY);
        g_state = st;
        make_scores(sd, 1e6f); /* the same visible scores; a decoy outside */
        acc_feed(&a, sc);
        acc_feed(&decoy, sd);
        mp_probe_acc_reset(&part);
        acc_feed(&part, sc);
        assert_int_equal(mp_probe_acc_merge(&merged, &part, &e), MP_OK);
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                double s = 0;
                for (int h = 0; h < H; h++) s += sc[((size_t)h * S + i) * S + j];
                hm[((size_t)n * S + i) * S + j] = visible(i, j) ? s / H : NAN;
                if (visible(i, j)) sum[i * S + j] += s / H;
            }
        for (int h = 0; h < H; h++) /* recent triples j < k < i, both keys in the window */
            for (int i = 0; i < S; i++)
                for (int k = 0; k < i; k++)
                    for (int j = 0; j < k; j++)
                        if (visible(i, j) && visible(i, k) && sc[((size_t)h * S + i) * S + k] > sc[((size_t)h * S + i) * S + j]) recent++;
    }
    same_bits(&a, &decoy, "-inf vs a finite decoy outside the window");
    same_bits(&a, &merged, "one-sequence merges vs direct");
    /* mean and se */
    double mean[S * S], se[S * S], mh[H * S * S];
    mp_probe_acc_mean(&a, mean, mh);
    mp_probe_acc_se(&a, se);
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) {
            const int k = i * S + j;
            if (!visible(i, j)) {
                if (!isnan(mean[k]) || !isnan(se[k]) || !isnan(mh[k]) || !isnan(mh[S * S + k]))
                    fail_msg("entry (%d, %d) outside the window is not NaN (mean %g, se %g)", i, j, mean[k], se[k]);
                continue;
            }
            const double m = sum[k] / N;
            double v = 0;
            for (int n = 0; n < N; n++) v += pow(hm[((size_t)n * S + i) * S + j] - m, 2);
            const double want_se = sqrt(v / (N - 1) / N);
            if (fabs(mean[k] - m) > 1e-12 * (fabs(m) + 1e-3) || fabs(se[k] - want_se) > 1e-10 * want_se)
                fail_msg("(%d, %d): mean %.17g se %.17g, want %.17g %.17g", i, j, mean[k], se[k], m, want_se);
        }
    /* block test */
    const double bz = mp_probe_acc_block_z(&a, 0), bzw = block_z_definition(hm);
    print_message("windowed block z %.6f (definition %.6f)\n", bz, bzw);
    if (!(fabs(bz - bzw) <= 1e-10 * bzw)) fail_msg("block z %.17g, want %.17g", bz, bzw);
    /* recency: triples inside the window only */
    uint64_t triples = 0;
    for (int i = 0; i < S; i++) {
        const uint64_t m = (uint64_t)(i < W - 1 ? i : W - 1);
        triples += m * (m - (m > 0)) / 2;
    }
    MpProbeRecencyOut o;
    if (mp_probe_recency_results(&o, &a, mean, se, mh, &e) != MP_OK) fail_msg("%s", e.msg);
    const double want_rp = (double)recent / ((double)N * H * (double)triples);
    print_message("windowed RP %.6f (definition %.6f, %llu triples per head)\n", o.rp[0], want_rp, (unsigned long long)triples);
    if (!(fabs(o.rp[0] - want_rp) <= 1e-12)) fail_msg("RP %.17g, want %.17g", o.rp[0], want_rp);
    mp_probe_recency_out_free(&o);
    /* a different window does not merge */
    MpProbeAcc other;
    acc_init(&other, W + 1);
    assert_int_equal(mp_probe_acc_merge(&other, &part, &e), MP_ERR);
    mp_probe_acc_free(&other);
    free(hm);
    free(sum);
    mp_probe_acc_free(&a);
    mp_probe_acc_free(&decoy);
    mp_probe_acc_free(&merged);
    mp_probe_acc_free(&part);
}

static int count_nan(const double *x, size_t n) {
    int c = 0;
    for (size_t i = 0; i < n; i++) c += isnan(x[i]);
    return c;
}

/* probe of a gemma2 model (4 layers: 1 and 3 local) into dir; returns the exit status. */
static int probe_run(char *out, size_t cap, const char *model, const char *ids, const char *dir, const char *extra) {
    return mp_test_run(out, cap, "probe %s --tokens %s --out %s --layers all --per-head --quiet --force %s", model, ids, dir, extra);
}

static void test_windowed_probe_tool(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[8192], a[512], b[512];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 5, S, 300, -1, 41);
    const char *mk = "--arch gemma2 --layers 4 --head-dim 16 --vocab 300 --seed 42";
    const int wins[] = {W, S - 1, S, 4096};
    for (int w = 0; w < 4; w++) {
        char flags[256], dir[300];
        snprintf(model, sizeof model, "%s/g%d", d, wins[w]);
        snprintf(flags, sizeof flags, "%s --sliding-window %d", mk, wins[w]);
        model_make(model, flags);
        snprintf(dir, sizeof dir, "%s/p%d", d, wins[w]);
        if (probe_run(out, sizeof out, model, ids, dir, "") != 0) fail_msg("probe failed: %s", out);
        snprintf(a, sizeof a, "%s/scores.npy", dir);
        size_t n;
        double *m = npy_load_f64(a, &n, NULL);
        assert_int_equal(n, (size_t)4 * S * S);
        const int tri = S * (S - 1) / 2, wi = wins[w] < S ? wins[w] : S;
        for (int l = 0; l < 4; l++) {
            const int want = tri + (l % 2 == 0 ? (S - wi) * (S - wi + 1) / 2 : 0), got = count_nan(m + (size_t)l * S * S, (size_t)S * S);
            if (got != want) fail_msg("W = %d, layer %d: %d unobserved entries, want %d", wins[w], l + 1, got, want);
        }
        free(m);
        snprintf(a, sizeof a, "%s/meta.json", dir);
        json_t *meta = json_load_file(a, 0, NULL);
        assert_non_null(meta);
        json_t *lw = json_object_get(meta, "layer_windows");
        if (!json_is_array(lw) || json_array_size(lw) != 4 || json_integer_value(json_array_get(lw, 0)) != wins[w] ||
            !json_is_null(json_array_get(lw, 1)))
            fail_msg("meta.json layer_windows is not [%d, null, %d, null]", wins[w], wins[w]);
        json_decref(meta);
    }
    /* a window as long as the sequence or longer masks nothing: the same bytes */
    const char *files[] = {"scores.npy", "scores_heads.npy", "scores_diagnorm.npy", "scores_se.npy"};
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/p%d/%s", d, S, files[i]);
        snprintf(b, sizeof b, "%s/p4096/%s", d, files[i]);
        if (!files_equal(a, b)) fail_msg("%s: W = S and W = 4096 differ", files[i]);
    }
    /* kill between checkpoints, resume: the bytes of the uninterrupted run */
    snprintf(model, sizeof model, "%s/g%d", d, W);
    int rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=3 %s probe %s --tokens %s --out %s/res --layers all --per-head --probs --recency --checkpoint-every 2 --quiet",
                           MP_TEST_BIN, model, ids, d);
    if (rc != 128 + SIGKILL) fail_msg("expected death by SIGKILL (137), got %d: %s", rc, out);
    char full[300];
    snprintf(full, sizeof full, "%s/full", d);
    if (probe_run(out, sizeof out, model, ids, full, "--probs --recency") != 0) fail_msg("probe failed: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/res --layers all --per-head --probs --recency --checkpoint-every 2 --resume",
                     model, ids, d);
    if (rc != 0 || !strstr(out, "2 of 5 sequences already done")) fail_msg("resume: %d: %s", rc, out);
    const char *rfiles[] = {"scores.npy", "scores_heads.npy", "scores_diagnorm.npy", "scores_se.npy", "probs.npy"};
    for (int i = 0; i < 5; i++) {
        snprintf(a, sizeof a, "%s/full/%s", d, rfiles[i]);
        snprintf(b, sizeof b, "%s/res/%s", d, rfiles[i]);
        if (!files_equal(a, b)) fail_msg("%s after kill + resume differs from the uninterrupted run", rfiles[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_window_sums_against_definitions),
        cmocka_unit_test(test_windowed_probe_tool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
