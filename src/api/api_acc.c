/* api_acc.c — maskpos_acc_* of the public C API (include/maskpos.h): the probe's streaming score
 * accumulator (model/probe.h, MpProbeAcc) fed from outside — pre-softmax scores a caller computed
 * (PyTorch, HF transformers, another program), a layer and a batch of sequences at a time — and
 * its result as the same MpProbeResult, writer and folder as `maskpos probe`.
 *
 * Implements: options → an MpProbeAcc (every layer slot selected, sliding windows, the first
 * position of the statistics, the statistics asked for: probs, recency, stats by name, those
 * rows of the accumulator's table that scores and probabilities feed); adding [B,H,S,S] f32/f64
 * scores through the probe's own row sums (mp_probe_acc_hook / mp_probe_acc_rows_f64,
 * mp_probe_acc_layer_done) and probabilities through its probs hook (given, or from the scores
 * with the forward pass's own softmax, mp_fwd_softmax_row); partial sums computed elsewhere (a
 * GPU) added array by array;
 * merging two accumulators (mp_probe_acc_merge); the state as named arrays and as the probe's
 * checkpoint file; the result (mp_probe_result_fill) and a forward pass's scores of one sequence
 * (maskpos_model_scores, what the probe's hook sees) for tests and comparisons.
 * Every input is checked before anything is added: a failed call leaves the state unchanged.
 * Counts are kept per layer (layers may be added in any order); the result needs every layer to
 * have seen the same sequences.
 * Does not: run a model except in maskpos_model_scores; print.
 * Tested by: python/tests_torch/test_accumulator.py (tests/test_pyapi.c): equality with `maskpos probe`
 * byte for byte, merge, state, bad input.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "api/api.h"            /* MaskposResult insides, mp_api_fail* */
#include "core/util.h"          /* mp_try_malloc, mp_fnv1a64, mp_thread_num */
#include "job/probe.h"          /* MpProbeResult, mp_probe_result_fill, mp_probe_result_write */
#include "model/fwd.h"          /* MpFwd: maskpos_model_scores */
#include "model/fwd_kernels.h"  /* mp_fwd_softmax_row: the forward pass's softmax */
#include "model/probe.h"        /* MpProbeAcc, mp_probe_stats */

struct MaskposAcc {
    MpProbeAcc a;
    MaskposAccOptions o;     /* windows, layer_ids, stats point into the arrays below */
    int windows[256], layer_ids[256];
    char stats[512];         /* the optional statistics on, "probs,recency" */
    int64_t n_layer[256];    /* sequences added per layer slot */
    float *pbuf;             /* [H,S,S] one sequence's probabilities (given or computed) */
    json_t *extra;           /* meta keys the caller set (maskpos_acc_set_meta), or NULL */
};

/* ================================================================ set-up */

static int acc_check_options(const MaskposAccOptions *o) {
    if (o->n_layers < 1 || o->n_layers > 256) return mp_api_failf("accumulator: n_layers %d is outside [1, 256]", o->n_layers);
    if (o->n_heads < 1 || o->n_heads > 4096) return mp_api_failf("accumulator: n_heads %d is outside [1, 4096]", o->n_heads);
    if (o->seq < 2 || o->seq > 65536) return mp_api_failf("accumulator: seq %d is outside [2, 65536]", o->seq);
    if (o->first < 0 || o->seq - o->first < 2)
        return mp_api_failf("accumulator: first position %d leaves fewer than 2 positions of %d", o->first, o->seq);
    for (int l = 0; o->windows && l < o->n_layers; l++)
        if (o->windows[l] < 0) return mp_api_failf("accumulator: layer %d: window %d is negative", l, o->windows[l]);
    for (int l = 0; o->layer_ids && l < o->n_layers; l++)
        if (o->layer_ids[l] < 1) return mp_api_failf("accumulator: layer id %d is not a 1-based layer number", o->layer_ids[l]);
    return MP_OK;
}

/* The statistics of opt (probs, recency, stats by name) into c->a, and c->o's probs, recency and
 * stats set to match; refused: a statistic that reads more than scores and probabilities. */
static int acc_stats_on(MaskposAcc *c, const MaskposAccOptions *opt, MpErr *e) {
    unsigned set = (opt->probs ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) : 0) |
                   (opt->recency ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY) : 0); /* their switches of their own */
    if (mp_probe_stats_parse(opt->stats, &set, e) != MP_OK) return mp_err_prefix(e, "accumulator: stats");
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if ((set >> id & 1u) && (mp_probe_stats[id].in & MP_PROBE_IN_CAPTURE))
            return mp_err_set(e, "accumulator: the statistic '%s' reads the forward pass's activations, which "
                                 "maskpos_acc_add does not carry (scores and probabilities only); run maskpos_probe",
                              mp_probe_stats[id].name);
    if (mp_probe_acc_stats_on(&c->a, set, e) != MP_OK) return MP_ERR;
    if (mp_probe_acc_inputs(&c->a) & MP_PROBE_IN_PROBS) { /* one sequence's probabilities, given or computed */
        c->pbuf = mp_try_malloc((size_t)opt->n_heads * opt->seq * opt->seq * sizeof(float));
        if (!c->pbuf) return mp_err_set(e, "out of memory for one sequence's probabilities");
    }
    c->o.probs = mp_probe_acc_has(&c->a, MP_PROBE_STAT_PROBS);
    c->o.recency = mp_probe_acc_has(&c->a, MP_PROBE_STAT_RECENCY);
    mp_probe_stats_names(c->a.stats, c->stats, sizeof c->stats);
    c->o.stats = c->stats;
    return MP_OK;
}

MASKPOS_API int maskpos_acc_check(const MaskposAccOptions *opt) {
    if (!opt) return mp_api_failf("maskpos_acc_check: NULL argument");
    return acc_check_options(opt) == MP_OK ? MASKPOS_OK : MASKPOS_ERR;
}

MASKPOS_API int maskpos_acc_new(const MaskposAccOptions *opt, MaskposAcc **out) {
    MpErr e;
    if (!opt || !out) return mp_api_failf("maskpos_acc_new: NULL argument");
    *out = NULL;
    if (acc_check_options(opt) != MP_OK) return MASKPOS_ERR;
    MaskposAcc *c = calloc(1, sizeof *c);
    if (!c) return mp_api_failf("out of memory");
    c->o = *opt;
    const int L = opt->n_layers;
    for (int l = 0; l < L; l++) {
        c->windows[l] = opt->windows ? opt->windows[l] : 0;
        c->layer_ids[l] = opt->layer_ids ? opt->layer_ids[l] : l + 1;
    }
    c->o.windows = c->windows;
    c->o.layer_ids = c->layer_ids;
    unsigned char mask[256];
    memset(mask, 1, sizeof mask);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int rc = mp_probe_acc_init(&c->a, mask, L, opt->n_heads, opt->seq, !!opt->per_head, !!opt->causal, threads, &e);
    if (rc == MP_OK) {
        if (opt->first) mp_probe_acc_skip(&c->a, opt->first);
        for (int l = 0; l < L; l++) /* as mp_probe_acc_windows: a window masks only below S */
            c->a.window[l] = c->windows[l] > 0 && c->windows[l] < opt->seq ? c->windows[l] : 0;
        rc = acc_stats_on(c, opt, &e);
    }
    if (rc != MP_OK) {
        maskpos_acc_free(c);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    *out = c;
    return MASKPOS_OK;
}

MASKPOS_API void maskpos_acc_free(MaskposAcc *c) {
    if (!c) return;
    if (c->a.sum) mp_probe_acc_free(&c->a);
    free(c->pbuf);
    if (c->extra) json_decref(c->extra);
    free(c);
}

MASKPOS_API int maskpos_acc_options(const MaskposAcc *c, MaskposAccOptions *o) {
    if (!c || !o) return mp_api_failf("maskpos_acc_options: NULL argument");
    *o = c->o;
    return MASKPOS_OK;
}

MASKPOS_API int64_t maskpos_acc_count(const MaskposAcc *c, int layer) {
    if (!c) return -1;
    if (layer < 0) { /* the sequences every layer has seen */
        int64_t m = c->n_layer[0];
        for (int l = 1; l < c->o.n_layers; l++) m = c->n_layer[l] < m ? c->n_layer[l] : m;
        return m;
    }
    return layer < c->o.n_layers ? c->n_layer[layer] : -1;
}

MASKPOS_API int maskpos_acc_set_meta(MaskposAcc *c, const char *json) {
    if (!c || !json) return mp_api_failf("maskpos_acc_set_meta: NULL argument");
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    if (!j || !json_is_object(j)) {
        if (j) json_decref(j);
        return mp_api_failf("accumulator meta: not a JSON object (%s)", j ? "another JSON value" : je.text);
    }
    if (c->extra) json_decref(c->extra);
    c->extra = j;
    return MASKPOS_OK;
}

/* ================================================================ adding scores */

/* 1 when x of dtype dt at index k is finite. */
static int acc_finite(const void *x, int dt, size_t k) {
    return dt == MASKPOS_F32 ? isfinite(((const float *)x)[k]) : isfinite(((const double *)x)[k]);
}

/* Every observed entry of the B sequences [B,H,S,S] finite (probs: also in [0, 1]); else a message. */
static int acc_check_values(const MaskposAcc *c, int li, const void *x, int dt, int64_t B, const char *what, int probs) {
    const int H = c->o.n_heads, S = c->o.seq;
    const size_t SS = (size_t)S * S;
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < S; i++) {
                int lo, hi;
                mp_probe_acc_row_keys(&c->a, li, i, &lo, &hi);
                const size_t base = ((size_t)b * H + h) * SS + (size_t)i * S;
                for (int j = lo; j < hi; j++) {
                    const double v = dt == MASKPOS_F32 ? ((const float *)x)[base + j] : ((const double *)x)[base + j];
                    if (!acc_finite(x, dt, base + j) || (probs && (v < 0 || v > 1)))
                        return mp_api_failf("accumulator: layer %d: %s[%lld, %d, %d, %d] = %g %s; nothing was added", li,
                                            what, (long long)b, h, i, j, v,
                                            probs ? "is not a probability" : "is not finite in an observed entry");
                }
            }
    return MP_OK;
}

/* c->pbuf [H,S,S] = one sequence's probabilities: the given ones (f32 or f64 rounded to f32) with
 * unobserved entries 0, or the softmax of the scores with the forward pass's own kernel, over the
 * row the forward pass gives it (keys j <= i when causal, every key otherwise; keys outside a
 * sliding window at -inf, so exactly 0). */
static void acc_seq_probs(MaskposAcc *c, int li, const void *sc, const void *pr, int dt, size_t at) {
    const int H = c->o.n_heads, S = c->o.seq;
    const size_t SS = (size_t)S * S;
#pragma omp parallel for schedule(static) if ((double)H * SS > 200000.0)
    for (int hi_ = 0; hi_ < H * S; hi_++) {
        const int h = hi_ / S, i = hi_ % S;
        int lo, hi;
        mp_probe_acc_row_keys(&c->a, li, i, &lo, &hi);
        float *row = c->pbuf + (size_t)h * SS + (size_t)i * S;
        const size_t src = at + (size_t)h * SS + (size_t)i * S;
        const void *x = pr ? pr : sc;
        for (int j = 0; j < S; j++) {
            const int seen = j >= lo && j < hi;
            const double v = dt == MASKPOS_F32 ? ((const float *)x)[src + j] : ((const double *)x)[src + j];
            row[j] = seen ? (float)v : pr ? 0.0f : -INFINITY;
        }
        if (!pr) mp_fwd_softmax_row(row, c->o.causal ? i + 1 : S, S);
    }
}

/* One sequence's f64 scores into layer slot li: the rows (in parallel), then the layer's end. */
static void acc_rows_f64(MaskposAcc *c, int li, const double *sc) {
    const int S = c->o.seq;
#pragma omp parallel for schedule(dynamic, 8) num_threads(c->a.threads) if ((double)S * S * c->o.n_heads > 200000.0)
    for (int i = 0; i < S; i++) mp_probe_acc_rows_f64(&c->a, li, sc, i, i + 1, mp_thread_num());
    mp_probe_acc_layer_done(&c->a, li);
}

MASKPOS_API int maskpos_acc_add(MaskposAcc *c, int layer, int64_t batch, int dtype, const void *scores,
                                const void *probs) {
    if (!c || !scores) return mp_api_failf("maskpos_acc_add: NULL argument");
    if (layer < 0 || layer >= c->o.n_layers)
        return mp_api_failf("accumulator: layer %d is out of range [0, %d)", layer, c->o.n_layers);
    if (dtype != MASKPOS_F32 && dtype != MASKPOS_F64) return mp_api_failf("accumulator: scores must be float32 or float64");
    if (batch < 0) return mp_api_failf("accumulator: batch %lld is negative", (long long)batch);
    const int with_probs = (mp_probe_acc_inputs(&c->a) & MP_PROBE_IN_PROBS) != 0;
    if (probs && !with_probs) return mp_api_failf("accumulator: probabilities given but the accumulator was made without probs");
    if (acc_check_values(c, layer, scores, dtype, batch, "scores", 0) != MP_OK ||
        (probs && acc_check_values(c, layer, probs, dtype, batch, "probs", 1) != MP_OK))
        return MASKPOS_ERR;
    const size_t per = (size_t)c->o.n_heads * c->o.seq * c->o.seq;
    for (int64_t b = 0; b < batch; b++) {
        const size_t at = (size_t)b * per;
        if (dtype == MASKPOS_F32) mp_probe_acc_hook(&c->a, layer, (const float *)scores + at, c->o.n_heads, c->o.seq);
        else acc_rows_f64(c, layer, (const double *)scores + at);
        if (with_probs) {
            acc_seq_probs(c, layer, scores, probs, dtype, at);
            mp_probe_acc_probs_hook(&c->a, layer, c->pbuf, c->o.n_heads, c->o.seq);
        }
        c->n_layer[layer]++;
    }
    return MASKPOS_OK;
}

/* ================================================================ state */

/* The accumulator's sums (mp_probe_acc_arrays), with the layer-slot layout of each. */
MASKPOS_API int maskpos_acc_state_narrays(const MaskposAcc *c) {
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    return c ? mp_probe_acc_arrays(&c->a, t) : 0;
}

MASKPOS_API double *maskpos_acc_state_array(MaskposAcc *c, int i, const char **name, int64_t *len) {
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = c ? mp_probe_acc_arrays(&c->a, t) : 0;
    if (i < 0 || i >= n) {
        mp_api_failf("accumulator: no state array %d", i);
        return NULL;
    }
    if (name) *name = t[i].name;
    if (len) *len = (int64_t)t[i].n;
    return t[i].p;
}

MASKPOS_API int maskpos_acc_set_counts(MaskposAcc *c, const int64_t *counts) {
    if (!c || !counts) return mp_api_failf("maskpos_acc_set_counts: NULL argument");
    for (int l = 0; l < c->o.n_layers; l++)
        if (counts[l] < 0 || counts[l] > ((int64_t)1 << 53)) /* (beyond 2^53 a count is no longer exact in a double) */
            return mp_api_failf("accumulator: layer %d: count %lld is outside [0, 2^53]", l, (long long)counts[l]);
    memcpy(c->n_layer, counts, sizeof(int64_t) * (size_t)c->o.n_layers);
    return MASKPOS_OK;
}

/* 1 when a and b were made with the same options. */
static int acc_same(const MaskposAcc *a, const MaskposAcc *b) {
    const MaskposAccOptions *x = &a->o, *y = &b->o;
    return x->n_layers == y->n_layers && x->n_heads == y->n_heads && x->seq == y->seq && !x->causal == !y->causal &&
           x->first == y->first && !x->per_head == !y->per_head && a->a.stats == b->a.stats &&
           !memcmp(a->windows, b->windows, sizeof a->windows) && !memcmp(a->layer_ids, b->layer_ids, sizeof a->layer_ids);
}

MASKPOS_API int maskpos_acc_merge(MaskposAcc *dst, const MaskposAcc *src) {
    MpErr e;
    if (!dst || !src) return mp_api_failf("maskpos_acc_merge: NULL argument");
    if (!acc_same(dst, src))
        return mp_api_failf("accumulator merge: the two were made with different options (layers, heads, seq, causal, "
                            "window, first, per_head or statistics)");
    const int64_t n0 = dst->a.n_done;
    if (mp_probe_acc_merge(&dst->a, &src->a, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    dst->a.n_done = n0; /* the API counts per layer */
    for (int l = 0; l < dst->o.n_layers; l++) dst->n_layer[l] += src->n_layer[l];
    return MASKPOS_OK;
}

/* The number of doubles one layer slot holds of array t (0: not laid out by layer, see below). */
static size_t acc_slot_len(const MpProbeAcc *a, const MpProbeArray *t) {
    return t->by_layer ? t->n / (size_t)a->L : 0; /* lbsum, lbsumsq: [nlen, L, 16, 16] */
}

MASKPOS_API int maskpos_acc_add_sums(MaskposAcc *c, int layer, int64_t count, int k, const char *const *names,
                                     const double *const *data) {
    if (!c || (k && (!names || !data))) return mp_api_failf("maskpos_acc_add_sums: NULL argument");
    if (layer < 0 || layer >= c->o.n_layers)
        return mp_api_failf("accumulator: layer %d is out of range [0, %d)", layer, c->o.n_layers);
    if (count < 0) return mp_api_failf("accumulator: negative count %lld", (long long)count);
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&c->a, t);
    for (int j = 0; j < n; j++)
        if (!t[j].by_layer)
            return mp_api_failf("accumulator: sums computed elsewhere come one layer at a time, and the sums of '%s' are "
                                "not all laid out by layer (%s); add the scores", mp_probe_stats[t[j].stat].name, t[j].name);
    const double *src[MP_PROBE_MAX_ARRAYS] = {0};
    for (int i = 0; i < k; i++) {
        int found = -1;
        for (int j = 0; j < n; j++)
            if (names[i] && !strcmp(names[i], t[j].name)) found = j;
        if (found < 0) return mp_api_failf("accumulator: no sum called '%s' in this accumulator", names[i] ? names[i] : "(null)");
        src[found] = data[i];
    }
    for (int j = 0; j < n; j++) {
        if (!src[j]) return mp_api_failf("accumulator: the sum '%s' is missing (every sum of the layer is needed)", t[j].name);
        const size_t m = acc_slot_len(&c->a, &t[j]);
        for (size_t q = 0; q < m; q++)
            if (!isfinite(src[j][q]) || (strstr(t[j].name, "sq") && src[j][q] < 0))
                return mp_api_failf("accumulator: layer %d: %s[%zu] = %g is not a finite sum; nothing was added", layer,
                                    t[j].name, q, src[j][q]);
    }
    for (int j = 0; j < n; j++) {
        const size_t m = acc_slot_len(&c->a, &t[j]);
        double *d = t[j].p + (size_t)layer * m;
        for (size_t q = 0; q < m; q++) d[q] += src[j][q];
    }
    c->n_layer[layer] += count;
    return MASKPOS_OK;
}

/* The checkpoint's run key: every option that shapes the sums. */
static uint64_t acc_key(const MaskposAcc *c) {
    const int64_t kv[] = {c->o.n_layers, c->o.n_heads, c->o.seq, !!c->o.causal, c->o.first,
                          !!c->o.per_head, !!c->o.probs, !!c->o.recency};
    uint64_t k = mp_fnv1a64("maskpos_acc", 11, MP_FNV_INIT);
    k = mp_fnv1a64(kv, sizeof kv, k);
    k = mp_fnv1a64(c->windows, sizeof c->windows, k);
    return mp_fnv1a64(c->layer_ids, sizeof c->layer_ids, k);
}

/* "" when every layer has seen the same number of sequences, else a message into msg. */
static int acc_counts_equal(const MaskposAcc *c, const char *what) {
    for (int l = 1; l < c->o.n_layers; l++)
        if (c->n_layer[l] != c->n_layer[0])
            return mp_api_failf("accumulator %s: layer %d has seen %lld sequences, layer 0 %lld (add every layer of each "
                                "batch first)", what, l, (long long)c->n_layer[l], (long long)c->n_layer[0]);
    return MP_OK;
}

MASKPOS_API int maskpos_acc_save_state(const MaskposAcc *c, const char *path) {
    MpErr e;
    if (!c || !path) return mp_api_failf("maskpos_acc_save_state: NULL argument");
    if (acc_counts_equal(c, "state") != MP_OK) return MASKPOS_ERR;
    MpProbeAcc a = c->a;
    a.n_done = c->n_layer[0];
    return mp_probe_ckpt_save(path, &a, acc_key(c), &e) == MP_OK ? MASKPOS_OK : mp_api_fail(&e, MASKPOS_ERR);
}

MASKPOS_API int maskpos_acc_load_state(MaskposAcc *c, const char *path) {
    MpErr e;
    int missing;
    if (!c || !path) return mp_api_failf("maskpos_acc_load_state: NULL argument");
    for (int l = 0; l < c->o.n_layers; l++)
        if (c->n_layer[l]) return mp_api_failf("%s: the accumulator already holds sequences; load a state into a new one", path);
    if (mp_probe_ckpt_load(path, &c->a, acc_key(c), &missing, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    for (int l = 0; l < c->o.n_layers; l++) c->n_layer[l] = c->a.n_done;
    c->a.n_done = 0;
    return MASKPOS_OK;
}

/* ================================================================ result */

/* The run's half of meta.json (as the probe's, for what an accumulator knows), then the caller's
 * keys (maskpos_acc_set_meta) over it. */
static json_t *acc_meta_run(const MaskposAcc *c, const MpProbeResult *res) {
    json_t *j = json_object(), *lj = json_array();
    json_object_set_new(j, "kind", json_string("probe"));
    json_object_set_new(j, "source", json_string("accumulator: pre-softmax scores added by the caller (maskpos_acc_add)"));
    json_object_set_new(j, "model", json_string("(scores added by the caller)"));
    json_object_set_new(j, "n", json_integer(res->n));
    json_object_set_new(j, "seq", json_integer(res->S));
    mp_probe_meta_first(j, res->skip);
    for (int l = 0; l < res->L; l++) json_array_append_new(lj, json_integer(res->layers[l] + 1));
    json_object_set_new(j, "layers", lj);
    json_object_set_new(j, "heads", json_integer(res->H));
    json_object_set_new(j, "causal", json_boolean(res->causal));
    int windowed = 0;
    for (int l = 0; l < res->L; l++) windowed |= c->windows[l] > 0;
    if (windowed) mp_probe_meta_windows(j, c->windows, res->L);
    json_object_set_new(j, "per_head", json_boolean(res->per_head));
    if (c->extra) json_object_update(j, c->extra);
    return j;
}

MASKPOS_API int maskpos_acc_result(const MaskposAcc *c, MaskposResult **out) {
    MpErr e;
    if (!c || !out) return mp_api_failf("maskpos_acc_result: NULL argument");
    *out = NULL;
    if (acc_counts_equal(c, "result") != MP_OK) return MASKPOS_ERR;
    if (c->n_layer[0] < 1) return mp_api_failf("accumulator result: no sequence was added");
    MaskposResult *r;
    if (mp_api_probe_result_new(&r, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    MpProbeResult *res = mp_api_probe_result_of(r);
    MpProbeAcc a = c->a; /* a view with the count: the sums stay the caller's */
    a.n_done = c->n_layer[0];
    res->L = c->o.n_layers, res->H = c->o.n_heads, res->S = c->o.seq, res->n = a.n_done;
    for (int l = 0; l < res->L; l++) res->layers[l] = c->layer_ids[l] - 1;
    res->skip = a.skip, res->bos_id = -1, res->causal = !!c->o.causal, res->rope = 1;
    res->per_head = !!c->o.per_head;
    res->heads_f64 = !!c->o.heads_f64;
    res->threads = a.threads, res->nranks = 1;
    json_t *mt = c->extra ? json_object_get(c->extra, "model") : NULL;
    snprintf(res->title, sizeof res->title, "%.200s", json_is_string(mt) ? json_string_value(mt) : "accumulator");
    int rc = mp_probe_result_fill(res, &a, acc_meta_run(c, res), &e);
    if (rc == MP_OK) rc = mp_api_result_through_folder(r, 1, &e);
    if (rc != MP_OK) {
        maskpos_result_free(r);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    *out = r;
    return MASKPOS_OK;
}

/* ================================================================ a forward pass's scores */

typedef struct AccScores {
    float *out; /* [upto, H, S, S] */
    int upto;
} AccScores;

static void acc_scores_hook(void *ctx, int layer, const float *scores, int n_heads, int T) {
    AccScores *s = ctx;
    if (layer < s->upto) memcpy(s->out + (size_t)layer * n_heads * T * T, scores, sizeof(float) * (size_t)n_heads * T * T);
}

MASKPOS_API int maskpos_model_scores(MaskposModel *m, const int32_t *ids, int seq, int n_layers, int bidirectional,
                                     float *out) {
    MpErr e;
    if (!m || !ids || !out) return mp_api_failf("maskpos_model_scores: NULL argument");
    if (n_layers < 1 || n_layers > m->m.n_layers)
        return mp_api_failf("model scores: n_layers %d is outside [1, %d]", n_layers, m->m.n_layers);
    if (seq < 1) return mp_api_failf("model scores: seq %d is not positive", seq);
    for (int t = 0; t < seq; t++)
        if (ids[t] < 0 || ids[t] >= m->m.vocab)
            return mp_api_failf("model scores: id %d (position %d) is outside the vocabulary [0, %d)", ids[t], t, m->m.vocab);
    if (mp_model_check_finite(&m->m, n_layers, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    MpFwdConfig fc = {.n_layers = n_layers, .max_seq = seq, .causal = !bidirectional, .rope = 1, .logits = 0};
    MpFwd f;
    memset(&f, 0, sizeof f);
    AccScores s = {out, n_layers};
    int rc = mp_fwd_init(&f, &m->m, &fc, &e);
    if (rc == MP_OK) rc = mp_fwd_run(&f, ids, seq, acc_scores_hook, &s, &e);
    mp_fwd_free(&f);
    return rc == MP_OK ? MASKPOS_OK : mp_api_fail(&e, MASKPOS_ERR);
}
