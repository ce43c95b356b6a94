/* test_probe_rows.c — the one-pass map sums (MpFwd.rows_hook, src/model/fwd.c fwd_attn_by_rows;
 * mp_probe_acc_rows / mp_probe_acc_layer_done in src/model/probe_acc.c) against the two-pass ones
 * (mp_fwd_run's layer hook, mp_probe_acc_hook, which sees each layer's whole [H, S, S] scores
 * before any softmax):
 *   - every sum of the accumulator (scores, per head, squares, block residues, --recency counts
 *     and lengths, --probs probabilities) is bit for bit the same, for a GQA llama at S = 300
 *     (row blocks handed out to 1, 2 and 3 threads), gemma2 with a sliding window shorter than S
 *     and a soft-cap, a bidirectional run, and runs with and without logits (the last layer
 *     stopping at its scores or going on through softmax and values);
 *   - logits and the probabilities the probs hook sees are unchanged by the rows hook;
 *   - the same for the reduced map (MpFwd.rows_headsum into mp_probe_acc_rows_headsum) of an
 *     accumulator without per-head maps or --recency, the path probe takes for such runs;
 *   - mp_fwd_run refuses a layer hook and a rows hook at once, and a rows hook without done().
 */
#include "test_model_util.h" /* model_make_open */

#ifdef _OPENMP
#include <omp.h>
#endif

#include "model/fwd.h"           /* mp_fwd_run, MpFwdRowsHook */
#include "model/probe.h"         /* MpProbeAcc */

typedef struct RowsCase {
    const char *name, *mk; /* mkmodel flags */
    int S, causal, logits, probs, threads;
    int reduced; /* 1: no per-head maps, no --recency, so the one-pass run takes the reduced map */
} RowsCase;

/* reduced: the accumulator of a plain probe (head sums only); else per head, with --recency. */
static void acc_make(MpProbeAcc *a, const MpModel *m, int S, int causal, int probs, int threads, int reduced) {
    unsigned char mask[256];
    MpErr e;
    for (int l = 0; l < 256; l++) mask[l] = l < m->n_layers;
    if (mp_probe_acc_init(a, mask, m->n_layers, m->n_heads, S, !reduced, causal, threads, &e) != MP_OK) fail_msg("%s", e.msg);
    mp_probe_acc_skip(a, 1);
    mp_probe_acc_windows(a, m);
    if ((!reduced && mp_probe_acc_stat_on(a, MP_PROBE_STAT_RECENCY, &e) != MP_OK) || (probs && mp_probe_acc_stat_on(a, MP_PROBE_STAT_PROBS, &e) != MP_OK))
        fail_msg("%s", e.msg);
    assert_int_equal(mp_probe_acc_needs_heads(a), !reduced);
}

static void ids_fill(int32_t *ids, int S, int V, uint32_t s) {
    for (int t = 0; t < S; t++) {
        s = s * 1664525u + 1013904223u;
        ids[t] = (int32_t)((s >> 8) % (uint32_t)V);
    }
}

/* Two sequences through the two-pass hook into a, and through the rows hook into b: its reduced
 * map (the forward pass's head sums, MpFwd.rows_headsum) when b needs no head's rows. */
static void run_both(MpFwd *f, MpProbeAcc *a, MpProbeAcc *b, const int32_t *ids, int S, int V, float *logits2) {
    MpErr e;
    for (int s = 0; s < 2; s++) {
        const int32_t *x = ids + (size_t)s * S;
        if (mp_probe_acc_has(a, MP_PROBE_STAT_PROBS)) f->probs_hook = mp_probe_acc_probs_hook, f->probs_ctx = a;
        if (mp_fwd_run(f, x, S, mp_probe_acc_hook, a, &e) != MP_OK) fail_msg("%s", e.msg);
        if (f->cfg.logits && s == 1) memcpy(logits2, f->logits, sizeof(float) * (size_t)S * V);
        mp_probe_acc_seq_end(a);
        if (mp_probe_acc_has(b, MP_PROBE_STAT_PROBS)) f->probs_ctx = b;
        const int reduced = !mp_probe_acc_needs_heads(b);
        f->rows_hook = (MpFwdRowsHook){reduced ? NULL : mp_probe_acc_rows, mp_probe_acc_layer_done, b, b->threads};
        f->rows_headsum = reduced ? mp_probe_acc_rows_headsum : NULL;
        if (mp_fwd_run(f, x, S, NULL, NULL, &e) != MP_OK) fail_msg("%s", e.msg);
        f->rows_hook = (MpFwdRowsHook){0};
        f->rows_headsum = NULL;
        mp_probe_acc_seq_end(b);
    }
}

static void rows_case(const RowsCase *c) {
    const char *d = mp_test_tmpdir();
    char model[512];
    snprintf(model, sizeof model, "%s/%s.gguf", d, c->name);
    MpModel m;
    MpErr e;
    model_make_open(&m, model, c->mk);
#ifdef _OPENMP
    omp_set_num_threads(c->threads); /* without OpenMP every case runs on one thread */
#endif
    MpFwdConfig fc = {.n_layers = m.n_layers, .max_seq = c->S, .causal = c->causal, .rope = 1, .logits = c->logits,
                      .tap_headsum_workers = c->reduced ? c->threads : 0};
    MpFwd f;
    if (mp_fwd_init(&f, &m, &fc, &e) != MP_OK) fail_msg("%s", e.msg);
    MpProbeAcc a, b;
    acc_make(&a, &m, c->S, c->causal, c->probs, c->threads, c->reduced);
    acc_make(&b, &m, c->S, c->causal, c->probs, c->threads, c->reduced);
    int32_t *ids = malloc(sizeof(int32_t) * 2 * (size_t)c->S);
    float *logits = c->logits ? malloc(sizeof(float) * (size_t)c->S * m.vocab) : NULL;
    assert_non_null(ids);
    ids_fill(ids, 2 * c->S, m.vocab, 5);
    run_both(&f, &a, &b, ids, c->S, m.vocab, logits);
    if (logits && memcmp(logits, f.logits, sizeof(float) * (size_t)c->S * m.vocab))
        fail_msg("%s: logits differ with the rows hook", c->name);
    MpProbeArray ta[MP_PROBE_MAX_ARRAYS], tb[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&a, ta);
    assert_int_equal(n, mp_probe_acc_arrays(&b, tb));
    assert_true(n >= (c->reduced ? 4 : 8) + 2 * c->probs); /* sums, squares, blocks, per head, recency (and probabilities) */
    double nonzero = 0;
    for (int k = 0; k < n; k++) {
        assert_int_equal(ta[k].n, tb[k].n);
        if (memcmp(ta[k].p, tb[k].p, ta[k].n * sizeof(double)))
            fail_msg("%s (%d threads): %s differs between the one-pass and two-pass sums", c->name, c->threads, ta[k].name);
        for (size_t i = 0; i < ta[k].n; i++) nonzero += ta[k].p[i] != 0;
    }
    assert_true(nonzero > 1000); /* the sums compared hold something */
    assert_int_equal(a.n_done, 2);
    assert_int_equal(b.n_done, 2);
    mp_probe_acc_free(&a);
    mp_probe_acc_free(&b);
    free(ids);
    free(logits);
    mp_fwd_free(&f);
    mp_model_free(&m);
}

static void test_rows_hook_same_bits(void **state) {
    (void)state;
    const char *llama = "--arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --vocab 300 --seed 3 --format gguf";
    const char *gemma2 = "--arch gemma2 --layers 2 --dim 64 --heads 4 --kv-heads 2 --vocab 300 --seed 4 --sliding-window 8 "
                         "--format gguf";
    const RowsCase cases[] = {
        {"llama", llama, 300, 1, 0, 0, 1, 0}, {"llama", llama, 300, 1, 0, 0, 2, 0}, {"llama", llama, 300, 1, 1, 1, 3, 0},
        {"llama", llama, 300, 0, 0, 0, 2, 0}, {"gemma2", gemma2, 40, 1, 1, 1, 2, 0}, {"gemma2", gemma2, 40, 0, 0, 1, 1, 0},
        /* the reduced map: head sums from the forward pass, blocks from 1 and 3 threads */
        {"llama", llama, 300, 1, 0, 0, 1, 1}, {"llama", llama, 300, 1, 1, 1, 3, 1}, {"llama", llama, 300, 0, 0, 0, 2, 1},
        {"gemma2", gemma2, 40, 1, 1, 1, 2, 1}, {"gemma2", gemma2, 40, 0, 0, 0, 1, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) rows_case(&cases[k]);
}

static void test_rows_hook_refusals(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[512];
    snprintf(model, sizeof model, "%s/small.gguf", d);
    MpModel m;
    MpErr e;
    model_make_open(&m, model, "--arch llama --layers 1 --vocab 300 --format gguf");
    MpFwdConfig fc = {.n_layers = 1, .max_seq = 8, .causal = 1, .rope = 1};
    MpFwd f;
    if (mp_fwd_init(&f, &m, &fc, &e) != MP_OK) fail_msg("%s", e.msg);
    MpProbeAcc a;
    acc_make(&a, &m, 8, 1, 0, 1, 0);
    const int32_t ids[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    f.rows_hook = (MpFwdRowsHook){mp_probe_acc_rows, mp_probe_acc_layer_done, &a, 1};
    assert_int_equal(mp_fwd_run(&f, ids, 8, mp_probe_acc_hook, &a, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "rows hook"));
    f.rows_hook.done = NULL;
    assert_int_equal(mp_fwd_run(&f, ids, 8, NULL, NULL, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "done()"));
    mp_probe_acc_free(&a);
    mp_fwd_free(&f);
    mp_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_hook_same_bits),
        cmocka_unit_test(test_rows_hook_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
