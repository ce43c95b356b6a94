/* test_probe_stats.c — the noise estimates of the probe accumulator (src/model/probe_acc.c) and the
 * text inputs the reproduce stages feed it:
 *   - per-entry standard errors and the block test of the residue, against a second, two-pass
 *     computation written here from the definitions (double, ≤ 1e-12 relative), also from
 *     position 1 on (mp_probe_acc_skip);
 *   - a sink column (a BOS) makes the whole map non-relative; from position 1 on it is noise again;
 *   - statistical behaviour: on synthetic scores that are relative plus noise, the block z and the
 *     per-entry rms/noise are ≈ 1; adding a small non-relative pattern (early keys favoured) lifts
 *     the block z well above 1 while the per-entry one barely moves — why the block test exists —
 *     and the block test of the first keys' region shows where it is;
 *   - the byte vocabulary and --pack: `probe models/rope --data TEXT --pack` reads exactly the
 *     maps of `probe --tokens` on the text's bytes, each row after a BOS, written here as raw
 *     uint32.
 */
#include "test_model_util.h" /* files_equal, testutil.h */

#include <math.h>

#include "core/util.h"      /* mp_file_exists */
#include "kernels/posmap.h" /* mp_posmap_stats */
#include "model/probe.h"    /* MpProbeAcc */

/* A small deterministic generator (test-side, independent of core/rng). */
static uint64_t g_state = 88172645463325252ull;
static double unif(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return (double)(g_state >> 11) / 9007199254740992.0;
}
static double gauss(void) {
    double u = unif(), v = unif();
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

/* Synthetic scores [H,S,S]: relative part f(i-j) + noise + nonrel * (j < 4) + sink * (j == 0),
 * −inf above the diagonal. */
static double g_sink; /* the sink column's offset (a BOS at position 0); 0 unless a test sets it */
static void make_scores(float *sc, int H, int S, double noise, double nonrel) {
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                float *p = sc + ((size_t)h * S + i) * S + j;
                if (j > i) {
                    *p = -INFINITY;
                    continue;
                }
                *p = (float)(0.3 * exp(-(i - j) / 5.0) + noise * gauss() + (j < 4 ? nonrel : 0.0) + (j == 0 ? g_sink : 0.0));
            }
}

/* Runs N sequences through an accumulator; keeps every sequence's head-mean map in hm [N,S,S]. */
static void feed(MpProbeAcc *a, int N, int H, int S, double noise, double nonrel, double *hm) {
    float *sc = malloc((size_t)H * S * S * sizeof(float));
    for (int n = 0; n < N; n++) {
        make_scores(sc, H, S, noise, nonrel);
        mp_probe_acc_hook(a, 0, sc, H, S);
        a->n_done++;
        if (hm)
            for (int i = 0; i < S; i++)
                for (int j = 0; j <= i; j++) {
                    double s = 0;
                    for (int h = 0; h < H; h++) s += sc[((size_t)h * S + i) * S + j];
                    hm[((size_t)n * S + i) * S + j] = s / H;
                }
    }
    free(sc);
}

/* The block test from its definition, on the head-mean maps hm [N,S,S] of N sequences restricted
 * to positions skip..S-1 (P of them): per sequence the residue (each diagonal minus its mean),
 * its means over the min(P,16)-per-side block grid, and z = sqrt(mean over blocks of
 * (mean / standard error)^2); first_keys_only: over the first column of blocks only. */
static double block_z_definition(const double *hm, int N, int S, int skip, int first_keys_only) {
    const int P = S - skip, nb = P < 16 ? P : 16;
    double *bm = calloc((size_t)N * nb * nb, sizeof(double));
    int cnt[16][16] = {{0}};
    for (int n = 0; n < N; n++) {
        const double *x = hm + (size_t)n * S * S;
#define X(i, j) x[((i) + skip) * S + (j) + skip]
        for (int k = 0; k < P; k++) {
            double dm = 0;
            for (int i = k; i < P; i++) dm += X(i, i - k);
            dm /= P - k;
            for (int i = k; i < P; i++) {
                /* block of position p: the b with ceil(b P / nb) <= p < ceil((b+1) P / nb) */
                int bi = 0, bj = 0;
                while (i >= ((bi + 1) * P + nb - 1) / nb) bi++;
                while (i - k >= ((bj + 1) * P + nb - 1) / nb) bj++;
                bm[((size_t)n * nb + bi) * nb + bj] += X(i, i - k) - dm;
                if (n == 0) cnt[bi][bj]++;
            }
        }
#undef X
    }
    double acc = 0;
    int used = 0;
    for (int b = 0; b < nb * nb; b++) {
        if (!cnt[b / nb][b % nb] || (first_keys_only && b % nb != 0)) continue;
        double m = 0, v = 0;
        for (int n = 0; n < N; n++) m += bm[(size_t)n * nb * nb + b] / cnt[b / nb][b % nb];
        m /= N;
        for (int n = 0; n < N; n++) v += pow(bm[(size_t)n * nb * nb + b] / cnt[b / nb][b % nb] - m, 2);
        v /= N - 1;
        if (!(v > 0)) continue;
        acc += m * m / (v / N);
        used++;
    }
    free(bm);
    return sqrt(acc / used);
}

static void test_se_and_block_z_match_definitions(void **state) {
    (void)state;
    const int N = 40, H = 3, S = 20, nb = 16;
    unsigned char mask[1] = {1};
    MpProbeAcc a;
    MpErr e;
    assert_int_equal(mp_probe_acc_init(&a, mask, 1, H, S, 0, 1, 2, &e), MP_OK);
    assert_int_equal(a.nb, nb);
    double *hm = calloc((size_t)N * S * S, sizeof(double));
    feed(&a, N, H, S, 0.5, 0.1, hm);
    double *se = malloc((size_t)S * S * sizeof(double));
    mp_probe_acc_se(&a, se);
    /* two-pass standard error of every observed entry */
    for (int i = 0; i < S; i++)
        for (int j = 0; j < S; j++) {
            if (j > i) {
                assert_true(isnan(se[i * S + j]));
                continue;
            }
            double m = 0, v = 0;
            for (int n = 0; n < N; n++) m += hm[((size_t)n * S + i) * S + j];
            m /= N;
            for (int n = 0; n < N; n++) v += pow(hm[((size_t)n * S + i) * S + j] - m, 2);
            const double want = sqrt(v / (N - 1) / N);
            if (fabs(se[i * S + j] - want) > 1e-12 * want) fail_msg("se[%d,%d] = %.17g, want %.17g", i, j, se[i * S + j], want);
        }
    const double want = block_z_definition(hm, N, S, 0, 0), got = mp_probe_acc_block_z(&a, 0);
    print_message("block z %.6f\n", got);
    if (fabs(got - want) > 1e-10 * want) fail_msg("block z %.17g, want %.17g", got, want);
    const double wantf = block_z_definition(hm, N, S, 0, 1),
                 gotf = mp_probe_acc_block_z_region(&a, 0, MP_PROBE_REGION_FIRST_KEYS);
    if (fabs(gotf - wantf) > 1e-10 * wantf) fail_msg("block z of the first keys %.17g, want %.17g", gotf, wantf);
    /* the same sequences from position 1 on (mp_probe_acc_skip) */
    MpProbeAcc a1;
    assert_int_equal(mp_probe_acc_init(&a1, mask, 1, H, S, 0, 1, 2, &e), MP_OK);
    mp_probe_acc_skip(&a1, 1);
    g_state = 88172645463325252ull; /* the same scores again */
    double *hm1 = calloc((size_t)N * S * S, sizeof(double));
    feed(&a1, N, H, S, 0.5, 0.1, hm1);
    assert_memory_equal(hm, hm1, (size_t)N * S * S * sizeof(double));
    const double want1 = block_z_definition(hm, N, S, 1, 0), got1 = mp_probe_acc_block_z(&a1, 0);
    print_message("from position 1: block z %.6f\n", got1);
    if (fabs(got1 - want1) > 1e-10 * want1) fail_msg("block z from position 1 %.17g, want %.17g", got1, want1);
    free(hm1);
    mp_probe_acc_free(&a1);
    assert_true(isnan(mp_probe_acc_block_z(&a, 1))); /* no such layer slot */
    free(se);
    free(hm);
    mp_probe_acc_free(&a);
}

/* Noise only: both tests ≈ 1. A small early-key preference: the block test sees it clearly. */
static void test_block_z_sees_what_the_entry_test_misses(void **state) {
    (void)state;
    const int N = 1500, H = 2, S = 48;
    unsigned char mask[1] = {1};
    double z_block[2], z_entry[2], z_first[2], z_inner[2];
    for (int k = 0; k < 2; k++) {
        MpProbeAcc a;
        MpErr e;
        assert_int_equal(mp_probe_acc_init(&a, mask, 1, H, S, 0, 1, 2, &e), MP_OK);
        feed(&a, N, H, S, 1.0, k ? 0.03 : 0.0, NULL);
        double *mean = malloc((size_t)S * S * sizeof(double)), *se = malloc((size_t)S * S * sizeof(double)),
               *dn = malloc((size_t)S * S * sizeof(double));
        mp_probe_acc_mean(&a, mean, NULL);
        mp_probe_acc_se(&a, se);
        mp_posmap_diagnorm(dn, mean, S);
        MpPosStats st;
        mp_posmap_stats(&st, mean, dn, se, S);
        z_entry[k] = st.z_rms;
        z_block[k] = mp_probe_acc_block_z(&a, 0);
        z_first[k] = mp_probe_acc_block_z_region(&a, 0, MP_PROBE_REGION_FIRST_KEYS);
        z_inner[k] = mp_probe_acc_block_z_region(&a, 0, MP_PROBE_REGION_INTERIOR);
        free(mean);
        free(se);
        free(dn);
        mp_probe_acc_free(&a);
    }
    print_message("noise: block z %.3f, entry z %.3f; with the pattern: block z %.3f, entry z %.3f\n", z_block[0],
                  z_entry[0], z_block[1], z_entry[1]);
    assert_true(z_block[0] > 0.8 && z_block[0] < 1.25);
    assert_true(z_entry[0] > 0.9 && z_entry[0] < 1.1);
    assert_true(z_block[1] > 1.6);
    assert_true(z_entry[1] < 1.3);
    assert_true(z_block[1] - 1 > 2 * (z_entry[1] - 1));
    /* where: the pattern sits in the first keys' blocks; the interior gets only its echo through
     * the diagonal means (each diagonal's mean holds a few first-key entries) */
    print_message("regions: first keys %.2f → %.2f, interior %.2f → %.2f\n", z_first[0], z_first[1], z_inner[0], z_inner[1]);
    assert_true(z_first[0] > 0.6 && z_first[0] < 1.5);
    assert_true(z_inner[0] > 0.8 && z_inner[0] < 1.25);
    assert_true(z_first[1] > 2 * z_block[1] && z_first[1] > 3 * z_inner[1]);
}

/* A sink column (every sequence's position 0, as a BOS gets) is non-relative by itself; with
 * mp_probe_acc_skip(1) the block test and mp_probe_layer_stats look at positions 1.. only, where
 * the scores are relative plus noise again, while a real pattern at keys 1..3 is still seen. */
static void test_skip_leaves_the_sink_out(void **state) {
    (void)state;
    const int N = 600, H = 2, S = 40;
    unsigned char mask[1] = {1};
    double z[3], zl[3];
    g_sink = 2.0;
    for (int k = 0; k < 3; k++) { /* whole map; from position 1; from 1 with a pattern at keys 1..3 */
        MpProbeAcc a;
        MpErr e;
        assert_int_equal(mp_probe_acc_init(&a, mask, 1, H, S, 0, 1, 2, &e), MP_OK);
        if (k) mp_probe_acc_skip(&a, 1);
        feed(&a, N, H, S, 1.0, k == 2 ? 0.06 : 0.0, NULL);
        double *mean = malloc((size_t)S * S * sizeof(double)), *se = malloc((size_t)S * S * sizeof(double)),
               *dn = malloc((size_t)S * S * sizeof(double)), *scratch = malloc(3 * (size_t)S * S * sizeof(double));
        mp_probe_acc_mean(&a, mean, NULL);
        mp_probe_acc_se(&a, se);
        MpPosStats st;
        mp_probe_layer_stats(&st, dn, mean, se, 1, 1, S, a.skip, scratch);
        z[k] = mp_probe_acc_block_z(&a, 0);
        zl[k] = st.z_rms;
        free(mean);
        free(se);
        free(scratch);
        free(dn);
        mp_probe_acc_free(&a);
    }
    g_sink = 0;
    print_message("sink column: block z %.2f (entry %.2f); from position 1: %.2f (%.2f); plus a pattern: %.2f (%.2f)\n",
                  z[0], zl[0], z[1], zl[1], z[2], zl[2]);
    assert_true(z[0] > 5 && zl[0] > 3);
    assert_true(z[1] > 0.8 && z[1] < 1.25);
    assert_true(zl[1] > 0.9 && zl[1] < 1.1);
    assert_true(z[2] > 1.6);
}

static void test_bytes_and_pack_read_the_text(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[600], txt[512], raw[512], out[8192], a[512], b[512];
    snprintf(model, sizeof model, "%s/models/rope", MP_SOURCE_DIR);
    snprintf(txt, sizeof txt, "%s/t.txt", d);
    snprintf(raw, sizeof raw, "%s/t.u32", d);
    /* two documents (blank-line separated); packed, the stream runs across the separator */
    const char *text = "In the beginning was the Word, and the Word was with God.\n\n"
                       "And the earth was without form, and void; and darkness was upon the face of the deep.\n";
    mp_test_write_file(txt, text, strlen(text));
    /* the ids the byte vocabulary with BOS 256 (models/rope was trained with --bos) must give:
     * each document as BOS + its bytes (the blank line between them left out) ... */
    const char *sep = strstr(text, "\n\n");
    uint32_t stream[400], ids[400];
    size_t n = 0, m = 0;
    stream[n++] = 256;
    for (const char *p = text; *p; p++) {
        if (p == sep) stream[n++] = 256;           /* the second document starts */
        if (p >= sep && p < sep + 2) continue;     /* the blank line between the two documents */
        stream[n++] = (unsigned char)*p;
    }
    /* ... and packed, rows of 30 that each start with BOS followed by the next 29 ids of that
     * stream (a document's own BOS right at a row start is not doubled) */
    for (size_t at = 0, r = 0; r < 4; r++) {
        ids[m++] = 256;
        if (stream[at] == 256) at++;
        for (int k = 1; k < 30; k++) ids[m++] = stream[at++];
    }
    assert_true(n <= 400);
    mp_test_write_file(raw, ids, m * sizeof ids[0]);
    int rc = mp_test_run(out, sizeof out, "probe %s --data %s --pack --n 4 --seq 30 --out %s/p --quiet", model, txt, d);
    if (rc != 0) fail_msg("probe --data --pack: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --n 4 --seq 30 --out %s/r --quiet", model, raw, d);
    if (rc != 0) fail_msg("probe --tokens: %s", out);
    snprintf(a, sizeof a, "%s/p/scores.npy", d);
    snprintf(b, sizeof b, "%s/r/scores.npy", d);
    if (!files_equal(a, b)) fail_msg("--pack over the byte vocabulary differs from the raw bytes");
    snprintf(a, sizeof a, "%s/p/scores_se.npy", d);
    assert_true(mp_file_exists(a));
    /* unpacked, the first document alone is too short for 4 rows of 30 */
    rc = mp_test_run(out, sizeof out, "probe %s --data %s --n 4 --seq 30 --out %s/u --quiet", model, txt, d);
    assert_int_equal(rc, 2);
    /* more than the text holds */
    rc = mp_test_run(out, sizeof out, "probe %s --data %s --pack --n 40 --seq 30 --out %s/u --quiet", model, txt, d);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(out, "fewer than --n 40 x --seq 30"));
    /* --pack without --data */
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --tokens %s --pack --seq 30 --out %s/u", model, raw, d), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_se_and_block_z_match_definitions),
        cmocka_unit_test(test_block_z_sees_what_the_entry_test_misses),
        cmocka_unit_test(test_skip_leaves_the_sink_out),
        cmocka_unit_test(test_bytes_and_pack_read_the_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
