/* test_model_probe_merge.c — merging probe accumulators (src/model/probe_acc.c: mp_probe_acc_arrays,
 * mp_probe_acc_reset, mp_probe_acc_merge), the operation under multi-process runs:
 *   - one-sequence accumulators merged in sequence order give every sum bit for bit as the
 *     sequences fed straight into one accumulator (what makes N MPI ranks equal one process),
 *     with per-head sums and a skipped BOS position, causal and not;
 *   - two partials of several sequences merge to the mean, standard errors and block test of all
 *     sequences, against a brute-force long-double computation from the raw scores;
 *   - reset zeroes every listed sum; accumulators of other runs (length, layers, flags) refuse to
 *     merge; the table lists each sum once and covers the per-head sums only when kept;
 *   - with every option on, the table lists the 15 sums in the checkpoint's documented order with
 *     their closed-form sizes, and a checkpoint (probe_ckpt.c) is the 56-byte header, each array's
 *     bytes at its running offset, and an 8-byte checksum.
 */
#include "testutil.h"

#include "model/probe.h"

enum { NL = 3, H = 3, S = 9, NSEQ = 5 };

/* scores [H,S,S] of sequence q, model layer l: pseudo-random, masked entries -inf when causal */
static void fake_scores(float *sc, int q, int l, int causal) {
    uint32_t s = (uint32_t)(q * 7919 + l * 104729 + 17);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j < S; j++) {
                s = s * 1664525u + 1013904223u;
                const float v = (float)((s >> 8) % 20000) / 1000.0f - 10.0f + 0.37f * (float)(i - j);
                sc[((size_t)h * S + i) * S + j] = causal && j > i ? -INFINITY : v;
            }
}

static void feed(MpProbeAcc *a, int q, int causal) {
    float sc[H * S * S];
    for (int l = 0; l < NL; l++) {
        fake_scores(sc, q, l, causal);
        mp_probe_acc_hook(a, l, sc, H, S);
    }
    a->n_done++;
}

static void init(MpProbeAcc *a, int causal, int per_head, int skip) {
    const unsigned char mask[NL] = {1, 0, 1};
    MpErr e;
    if (mp_probe_acc_init(a, mask, NL, H, S, per_head, causal, 1, &e) != MP_OK) fail_msg("%s", e.msg);
    if (skip) mp_probe_acc_skip(a, skip);
}

static void same_bits(const MpProbeAcc *x, const MpProbeAcc *y) {
    MpProbeArray tx[MP_PROBE_MAX_ARRAYS], ty[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(x, tx);
    assert_int_equal(n, mp_probe_acc_arrays(y, ty));
    for (int k = 0; k < n; k++) {
        assert_int_equal(tx[k].n, ty[k].n);
        if (memcmp(tx[k].p, ty[k].p, tx[k].n * sizeof(double)))
            fail_msg("array %s differs after merging one-sequence accumulators", tx[k].name);
    }
    assert_int_equal(x->n_done, y->n_done);
}

static void one_by_one(int causal, int per_head, int skip) {
    MpProbeAcc direct, merged, part;
    init(&direct, causal, per_head, skip);
    init(&merged, causal, per_head, skip);
    init(&part, causal, per_head, skip);
    MpErr e;
    for (int q = 0; q < NSEQ; q++) {
        feed(&direct, q, causal);
        mp_probe_acc_reset(&part);
        feed(&part, q, causal);
        assert_int_equal(mp_probe_acc_merge(&merged, &part, &e), MP_OK);
    }
    same_bits(&direct, &merged);
    mp_probe_acc_free(&direct);
    mp_probe_acc_free(&merged);
    mp_probe_acc_free(&part);
}

static void test_one_sequence_merges_equal_direct(void **state) {
    (void)state;
    one_by_one(1, 1, 0);
    one_by_one(1, 0, 1);
    one_by_one(0, 1, 1);
}

/* Two partials (sequences 0-1 and 2-4) merged: mean and standard error of every entry against a
 * long-double brute force over the raw scores. */
static void test_partials_merge_to_all_sequences(void **state) {
    (void)state;
    MpProbeAcc x, y;
    init(&x, 1, 0, 0);
    init(&y, 1, 0, 0);
    for (int q = 0; q < NSEQ; q++) feed(q < 2 ? &x : &y, q, 1);
    MpErr e;
    assert_int_equal(mp_probe_acc_merge(&x, &y, &e), MP_OK);
    assert_int_equal(x.n_done, NSEQ);
    double mean[2 * S * S], se[2 * S * S];
    mp_probe_acc_mean(&x, mean, NULL);
    mp_probe_acc_se(&x, se);
    const int model_layer[2] = {0, 2};
    float sc[H * S * S];
    for (int l = 0; l < 2; l++)
        for (int i = 0; i < S; i++)
            for (int j = 0; j <= i; j++) {
                long double m1 = 0, m2 = 0;
                for (int q = 0; q < NSEQ; q++) {
                    fake_scores(sc, q, model_layer[l], 1);
                    long double hm = 0;
                    for (int h = 0; h < H; h++) hm += sc[((size_t)h * S + i) * S + j];
                    hm /= H;
                    m1 += hm;
                    m2 += hm * hm;
                }
                m1 /= NSEQ;
                const long double var = (m2 / NSEQ - m1 * m1) * NSEQ / (NSEQ - 1);
                const double want_se = (double)sqrtl(var / NSEQ);
                const size_t k = (size_t)l * S * S + (size_t)i * S + j;
                if (fabs(mean[k] - (double)m1) > 1e-12 * (1 + fabs((double)m1)))
                    fail_msg("layer %d (%d,%d): merged mean %.17g, brute force %.17g", l, i, j, mean[k], (double)m1);
                if (fabs(se[k] - want_se) > 1e-9 * (1 + want_se))
                    fail_msg("layer %d (%d,%d): merged se %.17g, brute force %.17g", l, i, j, se[k], want_se);
            }
    assert_true(isnan(mean[1])); /* (0,1) is masked */
    /* the block test of the merged sums equals that of one accumulator of all sequences */
    MpProbeAcc all;
    init(&all, 1, 0, 0);
    for (int q = 0; q < NSEQ; q++) feed(&all, q, 1);
    for (int l = 0; l < 2; l++) {
        const double za = mp_probe_acc_block_z(&all, l), zx = mp_probe_acc_block_z(&x, l);
        if (!(fabs(za - zx) <= 1e-12 * za)) fail_msg("layer %d: block z %.17g merged, %.17g direct", l, zx, za);
    }
    mp_probe_acc_free(&all);
    mp_probe_acc_free(&x);
    mp_probe_acc_free(&y);
}

static void test_reset_table_and_refusals(void **state) {
    (void)state;
    MpProbeAcc a, b;
    init(&a, 1, 1, 0);
    feed(&a, 0, 1);
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&a, t);
    assert_int_equal(n, 9); /* sum, sumsq, bsum, bsumsq, sum_heads, sumsq_heads, bflip, rsq, csq */
    assert_int_equal(t[0].n, (size_t)2 * S * S);
    assert_int_equal(t[4].n, (size_t)2 * H * S * S);
    assert_int_equal(t[5].n, (size_t)2 * H * S * S);
    mp_probe_acc_reset(&a);
    assert_int_equal(a.n_done, 0);
    for (int k = 0; k < n; k++)
        for (size_t i = 0; i < t[k].n; i++)
            if (t[k].p[i] != 0) fail_msg("%s[%zu] = %g after reset", t[k].name, i, t[k].p[i]);
    MpErr e;
    init(&b, 1, 0, 0); /* no per-head sums */
    assert_int_equal(mp_probe_acc_arrays(&b, t), 7);
    assert_int_equal(mp_probe_acc_merge(&a, &b, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "different runs"));
    mp_probe_acc_free(&b);
    init(&b, 0, 1, 0); /* no mask */
    assert_int_equal(mp_probe_acc_merge(&a, &b, &e), MP_ERR);
    mp_probe_acc_free(&b);
    init(&b, 1, 1, 1); /* BOS skipped */
    assert_int_equal(mp_probe_acc_merge(&a, &b, &e), MP_ERR);
    mp_probe_acc_free(&b);
    mp_probe_acc_free(&a);
}

/* Every option on: the table's order, sizes and layouts, and the checkpoint file laid out by it. */
static void test_table_all_options_and_checkpoint_layout(void **state) {
    (void)state;
    MpProbeAcc a;
    MpErr e;
    init(&a, 1, 1, 0);
    if (mp_probe_acc_stat_on(&a, MP_PROBE_STAT_PROBS, &e) != MP_OK || mp_probe_acc_stat_on(&a, MP_PROBE_STAT_RECENCY, &e) != MP_OK) fail_msg("%s", e.msg);
    feed(&a, 0, 1);
    feed(&a, 1, 1);
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&a, t);
    /* L = 2 kept layers, nb = S = 9 < 16, nlen = 1 (S = 9 < 16: the only length is S) */
    const size_t L = 2, SS = (size_t)S * S;
    static const char *const names[] = {"sum",  "sumsq",   "bsum",  "bsumsq", "sum_heads", "sumsq_heads", "bflip",
                                        "rsq",  "csq",     "psum",  "psum_heads", "sink",  "entropy",     "rp_row",
                                        "rp_lsq", "rp_hsq", "lbsum", "lbsumsq"};
    const size_t lens[] = {L * SS, L * SS, L * 81, L * 81, L * H * SS, L * H * SS, L * MP_PROBE_FLIPS * 81,
                           L,      L,      L * SS, L * H * SS, L * H, L * H,      L * H * S,
                           L * 1,  L * H,  1 * L * 256, 1 * L * 256};
    assert_int_equal(n, 18);
    size_t total = 0;
    for (int k = 0; k < n; k++) {
        if (strcmp(t[k].name, names[k])) fail_msg("array %d is %s, the checkpoint's order has %s", k, t[k].name, names[k]);
        if (t[k].n != lens[k]) fail_msg("%s: %zu doubles, expected %zu", names[k], t[k].n, lens[k]);
        assert_int_equal(t[k].by_layer, k < 16); /* lbsum, lbsumsq: [nlen, L, 16, 16] */
        total += t[k].n;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/ck.bin", mp_test_tmpdir());
    if (mp_probe_ckpt_save(path, &a, 42, &e) != MP_OK) fail_msg("%s", e.msg);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char *buf = malloc(56 + total * 8 + 8 + 1);
    const size_t got = fread(buf, 1, 56 + total * 8 + 8 + 1, f);
    fclose(f);
    assert_int_equal(got, 56 + total * 8 + 8);
    size_t off = 56; /* magic 8, version 4, header_bytes 4, key 8, n_done 8, six int32 24 */
    for (int k = 0; k < n; k++) {
        if (memcmp(buf + off, t[k].p, t[k].n * 8)) fail_msg("%s: not at byte %zu of the checkpoint", t[k].name, off);
        off += t[k].n * 8;
    }
    free(buf);
    MpProbeAcc b;
    int missing;
    init(&b, 1, 1, 0);
    if (mp_probe_acc_stat_on(&b, MP_PROBE_STAT_PROBS, &e) != MP_OK || mp_probe_acc_stat_on(&b, MP_PROBE_STAT_RECENCY, &e) != MP_OK) fail_msg("%s", e.msg);
    if (mp_probe_ckpt_load(path, &b, 42, &missing, &e) != MP_OK) fail_msg("%s", e.msg);
    same_bits(&a, &b);
    remove(path);
    mp_probe_acc_free(&b);
    mp_probe_acc_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_sequence_merges_equal_direct),
        cmocka_unit_test(test_partials_merge_to_all_sequences),
        cmocka_unit_test(test_reset_table_and_refusals),
        cmocka_unit_test(test_table_all_options_and_checkpoint_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
