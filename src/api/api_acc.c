/* api_acc.c — maskpos_acc_* of the public C API (include/maskpos.h): the probe's streaming score
 * accumulator (model/probe.h, MpProbeAcc) fed from outside — pre-softmax scores a caller computed
 * (PyTorch, HF transformers, another program), a layer and a batch of sequences at a time — and
 * its result as the same MpProbeResult, writer and folder as `maskpos probe`.
 *
 * Implements: options → an MpProbeAcc (every layer slot selected, sliding windows, the first
 * position of the statistics, the statistics asked for: probs, recency, stats by name, those
 * rows of the accumulator's table that scores and probabilities feed, and those that read capture
 * points — variance, freq, position — with the model's geometry the options give (heads, RoPE
 * layout and tables, the residual stream's width, the position probe's settings, resid_stride),
 * fed by maskpos_acc_add_capture through the probe's own capture dispatch (mp_probe_acc_capture):
 * a batch's queries kept until its keys come, interleaved RoPE pairs turned half-split, the
 * residual stream of one sequence in resid_stride (maskpos_acc_capture_rows), the counts per layer
 * and point checked against the scores'; maskpos_acc_check: the
 * options' sizes alone); adding [B,H,S,S] f32/f64 scores through the
 * probe's own row sums (mp_probe_acc_hook / mp_probe_acc_rows_f64, mp_probe_acc_layer_done) and
 * probabilities through its probs hook (given, or from the scores with the forward pass's own
 * softmax, mp_fwd_softmax_row); partial sums computed elsewhere (a GPU) added array by array;
 * merging two accumulators (mp_probe_acc_merge; of different S, mp_probe_acc_embed after the shorter
 * grows: acc_grow); sequences shorter than S (maskpos_acc_add_lengths: the probe's per-position
 * counts, mp_probe_acc_lengths_on) and each sequence's block means from a GPU (add_sums'
 * "block_means"); the input check (api_acc_check.c: mask and padding values named); the state as
 * named arrays and as one file holding the options, meta and counts ("MPACCST1": JSON header,
 * sums, checksum; maskpos_acc_open_state reads it alone; the probe's checkpoint format still
 * loads with options); the result (mp_probe_result_fill) and a forward pass's scores of one
 * sequence (maskpos_model_scores, what the probe's hook sees) for tests and comparisons.
 * Every input is checked before anything is added: a failed call leaves the state unchanged.
 * Counts are kept per layer (layers may be added in any order); the result needs every layer to
 * have seen the same sequences.
 * Does not: run a model except in maskpos_model_scores; print.
 * Tested by: python/tests_torch/test_accumulator.py, test_accumulator_more.py,
 * test_accumulator_var.py and test_accumulator_freqpos.py (tests/test_pyapi.c), tests/test_api.c
 * (captures against m2 - m1², resid_stride's rows):
 * equality with `maskpos probe` byte for byte, merge, lengths, state, bad input; tests/fuzz/fuzz_acc_state.c.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "api/api.h"            /* MaskposResult insides, mp_api_fail* */
#include "api/api_acc_check.h"  /* mp_api_acc_check: the input check */
#include "core/util.h"          /* mp_try_malloc, mp_fnv1a64, mp_thread_num */
#include "job/probe_job.h"          /* MpProbeResult, mp_probe_result_fill, mp_probe_result_write */
#include "model/fwd.h"          /* MpFwd: maskpos_model_scores */
#include "model/fwd_kernels.h"  /* mp_fwd_softmax_row: the forward pass's softmax */
#include "model/probe.h"        /* MpProbeAcc, mp_probe_stats */
#include "model/probe_pos.h"    /* MP_PROBE_POS_*_DEFAULT: the position probe's defaults */

/* The kinds of captures counted per layer slot (MaskposAcc.n_cap). */
enum { ACC_MIX = 0, ACC_OUT, ACC_QK, ACC_NCAP };

struct MaskposAcc {
    MpProbeAcc a;
    MaskposAccOptions o;     /* windows, layer_ids, stats, inv_freq, rope_base point into the arrays below */
    int windows[256], layer_ids[256];
    char stats[512];         /* the optional statistics on, "probs,recency" (lengths aside: switched on by the data) */
    double *inv_freq;        /* [n_layers, R/2] the caller's inverse frequencies (freq), or NULL */
    double *rope_base;       /* [n_layers] the caller's RoPE bases (freq), or NULL */
    int64_t n_layer[256];    /* sequences added per layer slot */
    int64_t n_cap[ACC_NCAP][256]; /* sequences each kind of capture covered per layer slot: ATTN_MIX (variance),
                                     LAYER_OUT (variance, position; those resid_stride passes over included),
                                     query-key pairs (freq) */
    float *qbuf;             /* [q_batch, S, H·HS] queries waiting for their keys (half-split pairs) */
    size_t qcap;             /* floats qbuf holds */
    int q_layer;             /* their layer slot */
    int64_t q_batch;         /* their sequences (0: none waiting) */
    float *kbuf;             /* [batch, S, NKV·HS] scratch: keys turned to half-split pairs */
    size_t kcap;
    float *pbuf;             /* [H,S,S] one sequence's probabilities (given or computed) */
    json_t *extra;           /* meta keys the caller set (maskpos_acc_set_meta), or NULL */
};

/* ================================================================ set-up */

/* The model's geometry (freq's heads and RoPE, position's residual stream): each size in range,
 * the heads' division, the rotary dims even and within the head, the tables finite. */
static int acc_check_geometry(const MaskposAccOptions *o) {
    if (o->head_dim < 0 || o->head_dim > 65536) return mp_api_failf("accumulator: head_dim %d is outside [0, 65536]", o->head_dim);
    if (o->n_kv_heads < 0 || (o->n_kv_heads && o->n_heads % o->n_kv_heads))
        return mp_api_failf("accumulator: n_heads %d is not a multiple of n_kv_heads %d", o->n_heads, o->n_kv_heads);
    if (o->rot_dim < 0 || o->rot_dim % 2 || o->rot_dim > o->head_dim)
        return mp_api_failf("accumulator: rot_dim %d is not an even number of dims within head_dim %d", o->rot_dim, o->head_dim);
    if (!(o->scale >= 0) || !isfinite(o->scale)) return mp_api_failf("accumulator: scale %g is not a finite number >= 0", o->scale);
    if ((o->inv_freq || o->rope_base) && !o->head_dim)
        return mp_api_failf("accumulator: inv_freq or rope_base given without head_dim (the heads' geometry)");
    const int P = (o->rot_dim ? o->rot_dim : o->head_dim) / 2;
    for (int k = 0; o->inv_freq && k < o->n_layers * P; k++)
        if (!(o->inv_freq[k] >= 0) || !isfinite(o->inv_freq[k]))
            return mp_api_failf("accumulator: inv_freq[%d, %d] = %g is not a finite frequency >= 0", k / P, k % P, o->inv_freq[k]);
    for (int l = 0; o->rope_base && l < o->n_layers; l++)
        if (!(o->rope_base[l] >= 0) || !isfinite(o->rope_base[l]))
            return mp_api_failf("accumulator: rope_base[%d] = %g is not a finite base >= 0", l, o->rope_base[l]);
    if (o->resid_width < 0 || o->resid_width > (1 << 20))
        return mp_api_failf("accumulator: resid_width %d is outside [0, 2^20]", o->resid_width);
    if (o->pos_dim < 0 || o->pos_stride < 0 || o->resid_stride < 0 || o->pos_stride > 65536 || o->resid_stride > (1 << 20))
        return mp_api_failf("accumulator: pos_dim %d, pos_stride %d or resid_stride %d is negative or too large", o->pos_dim,
                            o->pos_stride, o->resid_stride);
    if ((o->pos_dim ? o->pos_dim : MP_PROBE_POS_DIM_DEFAULT) > 46340 && o->resid_width > 46340)
        return mp_api_failf("accumulator: the position probe's features, min(pos_dim %d, resid_width %d), are above 46340 "
                            "(its K^2 sums)", o->pos_dim, o->resid_width);
    if (!(o->pos_ridge >= 0 && o->pos_ridge <= 1e6))
        return mp_api_failf("accumulator: pos_ridge %g is not a number in [0, 1e6] (0: the default)", o->pos_ridge);
    return MP_OK;
}

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
    return acc_check_geometry(o);
}

/* The capture points the accumulator takes (maskpos_acc_add_capture): variance's, freq's, position's. */
#define ACC_POINTS (1u << MP_FWD_AT_Q | 1u << MP_FWD_AT_K | 1u << MP_FWD_AT_ATTN_MIX | 1u << MP_FWD_AT_LAYER_OUT)

/* The statistics of opt (probs, recency, stats by name) as bits of MpProbeStatId; refused: a
 * statistic that reads captures the accumulator does not take, freq without the heads' geometry,
 * position without the residual stream's width. */
static int acc_stat_set(const MaskposAccOptions *opt, unsigned *set, MpErr *e) {
    *set = (opt->probs ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) : 0) |
           (opt->recency ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY) : 0); /* their switches of their own */
    if (mp_probe_stats_parse(opt->stats, set, e) != MP_OK) return mp_err_prefix(e, "accumulator: stats");
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if ((*set >> id & 1u) && (mp_probe_stats_points(MP_PROBE_STAT_BIT(id)) & ~ACC_POINTS))
            return mp_err_set(e, "accumulator: the statistic '%s' reads forward-pass activations the accumulator does not "
                                 "take; run maskpos_probe", mp_probe_stats[id].name);
    if ((*set & MP_PROBE_STAT_BIT(MP_PROBE_STAT_FREQ)) && (!opt->head_dim || (opt->rot_dim ? opt->rot_dim : opt->head_dim) < 2))
        return mp_err_set(e, "accumulator: the statistic 'freq' reads the queries and keys per RoPE pair: give head_dim "
                             "(and n_kv_heads, rot_dim, scale, inv_freq as the model has them), with at least 2 rotary dims");
    if ((*set & MP_PROBE_STAT_BIT(MP_PROBE_STAT_POSITION)) && !opt->resid_width)
        return mp_err_set(e, "accumulator: the statistic 'position' reads the residual stream: give resid_width (the "
                             "model's hidden size; Python: hidden_size=)");
    return MP_OK;
}

/* o's geometry with its defaults filled in (the options maskpos_acc_options gives back). */
static void acc_geometry_defaults(MaskposAccOptions *o) {
    if (o->head_dim) {
        if (!o->n_kv_heads) o->n_kv_heads = o->n_heads;
        if (!o->rot_dim) o->rot_dim = o->head_dim;
        if (!(o->scale > 0)) o->scale = 1.0 / sqrt((double)o->head_dim);
    }
    if (!o->pos_dim) o->pos_dim = MP_PROBE_POS_DIM_DEFAULT;
    if (!o->pos_stride) o->pos_stride = MP_PROBE_POS_STRIDE_DEFAULT;
    if (!(o->pos_ridge > 0)) o->pos_ridge = MP_PROBE_POS_RIDGE_DEFAULT;
    if (o->resid_stride < 1) o->resid_stride = 1;
}

/* c's copies of the caller's RoPE tables (o.inv_freq, o.rope_base then point at them). */
static int acc_copy_tables(MaskposAcc *c, const MaskposAccOptions *opt, MpErr *e) {
    const size_t L = (size_t)opt->n_layers, P = (size_t)c->o.rot_dim / 2;
    if (opt->inv_freq && P) {
        if (!(c->inv_freq = mp_try_malloc(L * P * sizeof(double)))) return mp_err_set(e, "out of memory for inv_freq");
        memcpy(c->inv_freq, opt->inv_freq, L * P * sizeof(double));
    }
    if (opt->rope_base) {
        if (!(c->rope_base = mp_try_malloc(L * sizeof(double)))) return mp_err_set(e, "out of memory for rope_base");
        memcpy(c->rope_base, opt->rope_base, L * sizeof(double));
    }
    c->o.inv_freq = c->inv_freq, c->o.rope_base = c->rope_base;
    return MP_OK;
}

MASKPOS_API int maskpos_acc_check(const MaskposAccOptions *opt) {
    if (!opt) return mp_api_failf("maskpos_acc_check: NULL argument");
    return acc_check_options(opt) == MP_OK ? MASKPOS_OK : MASKPOS_ERR;
}

static int acc_make(MpProbeAcc *a, const MaskposAccOptions *o, const int *windows, int S, unsigned set, MpErr *e);

/* 1 when c's statistics read probabilities (given to maskpos_acc_add or computed from the scores). */
static int acc_with_probs(const MaskposAcc *c) { return (mp_probe_acc_inputs(&c->a) & MP_PROBE_IN_PROBS) != 0; }

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
    acc_geometry_defaults(&c->o);
    unsigned set = 0;
    int rc = acc_stat_set(opt, &set, &e);
    if (rc == MP_OK) rc = acc_copy_tables(c, opt, &e);
    if (rc == MP_OK) rc = acc_make(&c->a, &c->o, c->windows, opt->seq, set, &e);
    if (rc == MP_OK && acc_with_probs(c)) { /* one sequence's probabilities, given or computed */
        c->pbuf = mp_try_malloc((size_t)opt->n_heads * opt->seq * opt->seq * sizeof(float));
        if (!c->pbuf) rc = mp_err_set(&e, "out of memory for one sequence's probabilities");
    }
    if (rc == MP_OK) { /* the options say what is on */
        c->o.probs = mp_probe_acc_has(&c->a, MP_PROBE_STAT_PROBS);
        c->o.recency = mp_probe_acc_has(&c->a, MP_PROBE_STAT_RECENCY);
        mp_probe_stats_names(c->a.stats & ~MP_PROBE_STAT_BIT(MP_PROBE_STAT_LENGTHS), c->stats, sizeof c->stats);
        c->o.stats = c->stats;
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
    free(c->qbuf);
    free(c->kbuf);
    free(c->inv_freq);
    free(c->rope_base);
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
        int lo, hi; /* the sequence's keys (c->a.cur_len: its length; none past it) */
        mp_probe_acc_seq_keys(&c->a, li, i, &lo, &hi);
        float *row = c->pbuf + (size_t)h * SS + (size_t)i * S;
        const size_t src = at + (size_t)h * SS + (size_t)i * S;
        const void *x = pr ? pr : sc;
        for (int j = 0; j < S; j++) {
            const int seen = j >= lo && j < hi;
            const double v = dt == MASKPOS_F32 ? ((const float *)x)[src + j] : ((const double *)x)[src + j];
            row[j] = seen ? (float)v : pr ? 0.0f : -INFINITY;
        }
        if (!pr && hi > lo) mp_fwd_softmax_row(row, c->o.causal ? i + 1 : S, S);
    }
}

/* One sequence's f64 scores into layer slot li: the rows (in parallel), then the layer's end. */
static void acc_rows_f64(MaskposAcc *c, int li, const double *sc) {
    const int S = c->o.seq;
#pragma omp parallel for schedule(dynamic, 8) num_threads(c->a.threads) if ((double)S * S * c->o.n_heads > 200000.0)
    for (int i = 0; i < S; i++) mp_probe_acc_rows_f64(&c->a, li, sc, i, i + 1, mp_thread_num());
    mp_probe_acc_layer_done(&c->a, li);
}

MASKPOS_API int maskpos_acc_add_lengths(MaskposAcc *c, int layer, int64_t batch, int dtype, const void *scores,
                                        const void *probs, const int32_t *lengths) {
    MpErr e;
    if (!c || !scores) return mp_api_failf("maskpos_acc_add: NULL argument");
    if (layer < 0 || layer >= c->o.n_layers)
        return mp_api_failf("accumulator: layer %d is out of range [0, %d)", layer, c->o.n_layers);
    if (dtype != MASKPOS_F32 && dtype != MASKPOS_F64) return mp_api_failf("accumulator: scores must be float32 or float64");
    if (batch < 0) return mp_api_failf("accumulator: batch %lld is negative", (long long)batch);
    const int with_probs = acc_with_probs(c);
    if (probs && !with_probs) return mp_api_failf("accumulator: probabilities given but the accumulator was made without probs");
    int ragged = 0;
    for (int64_t b = 0; lengths && b < batch; b++) {
        if (lengths[b] < c->o.first + 2 || lengths[b] > c->o.seq)
            return mp_api_failf("accumulator: lengths[%lld] = %d is outside [%d, %d] (at least two positions from first = %d, "
                                "at most S); nothing was added", (long long)b, lengths[b], c->o.first + 2, c->o.seq, c->o.first);
        ragged |= lengths[b] < c->o.seq;
    }
    if (ragged && mp_probe_acc_has(&c->a, MP_PROBE_STAT_VARIANCE))
        return mp_api_failf("accumulator: lengths shorter than S cannot be counted with the variance statistic (its captures "
                            "are whole sequences of S positions); nothing was added");
    if (ragged && mp_probe_acc_has(&c->a, MP_PROBE_STAT_RECENCY))
        return mp_api_failf("accumulator: lengths shorter than S cannot be counted with recency=True (its triple counts and "
                            "prefix lengths need whole sequences); nothing was added");
    if (mp_api_acc_check(&c->a, layer, scores, dtype, batch, lengths, "scores", 0) != MP_OK ||
        (probs && mp_api_acc_check(&c->a, layer, probs, dtype, batch, lengths, "probs", 1) != MP_OK))
        return MASKPOS_ERR;
    if (ragged && mp_probe_acc_lengths_on(&c->a, c->n_layer, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    const size_t per = (size_t)c->o.n_heads * c->o.seq * c->o.seq;
    for (int64_t b = 0; b < batch; b++) {
        const size_t at = (size_t)b * per;
        c->a.cur_len = lengths ? lengths[b] : 0;
        if (dtype == MASKPOS_F32) mp_probe_acc_hook(&c->a, layer, (const float *)scores + at, c->o.n_heads, c->o.seq);
        else acc_rows_f64(c, layer, (const double *)scores + at);
        if (with_probs) {
            acc_seq_probs(c, layer, scores, probs, dtype, at);
            mp_probe_acc_probs_hook(&c->a, layer, c->pbuf, c->o.n_heads, c->o.seq);
        }
        c->n_layer[layer]++;
    }
    c->a.cur_len = 0;
    return MASKPOS_OK;
}

MASKPOS_API int maskpos_acc_check_add(const MaskposAcc *c, int layer, int64_t batch, int dtype, const void *scores,
                                      const void *probs, const int32_t *lengths) {
    if (!c || !scores) return mp_api_failf("maskpos_acc_check_add: NULL argument");
    if (layer < 0 || layer >= c->o.n_layers)
        return mp_api_failf("accumulator: layer %d is out of range [0, %d)", layer, c->o.n_layers);
    if (dtype != MASKPOS_F32 && dtype != MASKPOS_F64) return mp_api_failf("accumulator: scores must be float32 or float64");
    for (int64_t b = 0; lengths && b < batch; b++)
        if (lengths[b] < c->o.first + 2 || lengths[b] > c->o.seq)
            return mp_api_failf("accumulator: lengths[%lld] = %d is outside [%d, %d]; nothing was added", (long long)b, lengths[b],
                                c->o.first + 2, c->o.seq);
    if (mp_api_acc_check(&c->a, layer, scores, dtype, batch, lengths, "scores", 0) != MP_OK ||
        (probs && mp_api_acc_check(&c->a, layer, probs, dtype, batch, lengths, "probs", 1) != MP_OK))
        return MASKPOS_ERR;
    return MASKPOS_OK;
}

MASKPOS_API int maskpos_acc_lengths_on(MaskposAcc *c) {
    MpErr e;
    if (!c) return mp_api_failf("maskpos_acc_lengths_on: NULL argument");
    if (mp_probe_acc_has(&c->a, MP_PROBE_STAT_RECENCY)) return mp_api_failf("accumulator: lengths cannot be counted with recency=True");
    return mp_probe_acc_lengths_on(&c->a, c->n_layer, &e) == MP_OK ? MASKPOS_OK : mp_api_fail(&e, MASKPOS_ERR);
}

MASKPOS_API char *maskpos_acc_meta(const MaskposAcc *c) {
    return c && c->extra ? json_dumps(c->extra, JSON_COMPACT) : NULL;
}

MASKPOS_API int maskpos_acc_add(MaskposAcc *c, int layer, int64_t batch, int dtype, const void *scores,
                                const void *probs) {
    return maskpos_acc_add_lengths(c, layer, batch, dtype, scores, probs, NULL);
}

/* ================================================================ state */

/* ---------------------------------------------------------------- adding captures */
_Static_assert((int)MASKPOS_AT_ATTN_MIX == (int)MP_FWD_AT_ATTN_MIX && (int)MASKPOS_AT_LAYER_OUT == (int)MP_FWD_AT_LAYER_OUT &&
                   (int)MASKPOS_AT_Q == (int)MP_FWD_AT_Q && (int)MASKPOS_AT_K == (int)MP_FWD_AT_K,
               "the public capture points are MpFwdPoint's");

/* The kind of count a capture point adds to (n_cap). */
static int acc_cap_kind(int point) {
    return point == MASKPOS_AT_ATTN_MIX ? ACC_MIX : point == MASKPOS_AT_LAYER_OUT ? ACC_OUT : ACC_QK;
}

/* The capture points the statistics on read (bits MpFwdPoint). */
static unsigned acc_points(const MaskposAcc *c) { return mp_probe_stats_points(c->a.stats); }

/* 1 when point's capture of sequence s (counted per layer slot from 0) is read: every one, but at
 * LAYER_OUT one sequence in resid_stride. */
static int acc_reads(const MaskposAcc *c, int point, int64_t s) {
    return point != MASKPOS_AT_LAYER_OUT || c->o.resid_stride <= 1 || s % c->o.resid_stride == 0;
}

/* The rows of the next batch sequences of slot li read at point (their indices into rows, when
 * given), and how many. */
static int64_t acc_rows(const MaskposAcc *c, int li, int point, int64_t batch, int64_t *rows) {
    int64_t n = 0;
    for (int64_t b = 0; b < batch; b++)
        if (acc_reads(c, point, c->n_cap[ACC_OUT][li] + b)) {
            if (rows) rows[n] = b;
            n++;
        }
    return n;
}

/* The width point must have (0: any; the attention output's checked as a multiple of n_heads). */
static int64_t acc_point_width(const MaskposAcc *c, int point) {
    if (point == MASKPOS_AT_Q) return (int64_t)c->o.n_heads * c->o.head_dim;
    if (point == MASKPOS_AT_K) return (int64_t)c->o.n_kv_heads * c->o.head_dim;
    if (point == MASKPOS_AT_LAYER_OUT && mp_probe_acc_has(&c->a, MP_PROBE_STAT_POSITION)) return c->o.resid_width;
    return 0;
}

/* The check maskpos_acc_add_capture makes (every argument, every value of its rows finite), adding nothing. */
static int acc_capture_check(const MaskposAcc *c, int layer, int point, int64_t batch, int dtype, const float *x, int64_t width) {
    if (point < 0 || point > 31 || !(ACC_POINTS >> point & 1u) || !(acc_points(c) >> point & 1u))
        return mp_api_failf("accumulator: capture point %d is read by no statistic asked (variance reads MASKPOS_AT_ATTN_MIX and "
                            "MASKPOS_AT_LAYER_OUT, position MASKPOS_AT_LAYER_OUT, freq MASKPOS_AT_Q and MASKPOS_AT_K)", point);
    if (layer < 0 || layer >= c->o.n_layers) return mp_api_failf("accumulator: layer %d is out of range [0, %d)", layer, c->o.n_layers);
    if (dtype != MASKPOS_F32) return mp_api_failf("accumulator: captures must be float32 (what the forward pass captures)");
    if (batch < 0) return mp_api_failf("accumulator: batch %lld is negative", (long long)batch);
    const int64_t want = acc_point_width(c, point);
    if (width < 1 || width > (1 << 20) || (want && width != want))
        return mp_api_failf("accumulator: capture point %d: width %lld, expected %lld (%s)", point, (long long)width,
                            (long long)want, point == MASKPOS_AT_Q ? "n_heads x head_dim" : point == MASKPOS_AT_K ? "n_kv_heads x head_dim"
                                                                     : "resid_width");
    if (point == MASKPOS_AT_ATTN_MIX && width % c->o.n_heads)
        return mp_api_failf("accumulator: the attention output's width %lld is not n_heads %d x head_dim", (long long)width,
                            c->o.n_heads);
    if (point == MASKPOS_AT_Q && c->q_batch)
        return mp_api_failf("accumulator: the queries of layer %d's last batch still wait for their keys (MASKPOS_AT_K)", c->q_layer);
    if (point == MASKPOS_AT_K && (c->q_batch != batch || c->q_layer != layer || !c->q_batch))
        return mp_api_failf("accumulator: keys of layer %d (%lld sequences) without their queries: give MASKPOS_AT_Q of the same "
                            "batch first", layer, (long long)batch);
    if (mp_probe_acc_has(&c->a, MP_PROBE_STAT_LENGTHS))
        return mp_api_failf("accumulator: captures cannot be added once sequences shorter than S were (lengths)");
    const size_t n = (size_t)acc_rows(c, layer, point, batch, NULL) * c->o.seq * (size_t)width;
    for (size_t k = 0; k < n; k++)
        if (!isfinite(x[k])) {
            const size_t per = (size_t)c->o.seq * (size_t)width;
            return mp_api_failf("accumulator: capture[%zu, %zu, %zu] = %g is not finite; nothing was added", k / per,
                                k % per / (size_t)width, k % (size_t)width, (double)x[k]);
        }
    return MP_OK;
}

/* x [n, S, G·HS] (G heads) into dst with each head's rotary dims in half-split order: dims (2p, 2p + 1)
 * to (p, p + R/2) when the caller's RoPE is interleaved (the unrotated dims R..HS-1 as they are). */
static void acc_half_split(const MaskposAcc *c, float *dst, const float *x, int64_t n, int64_t width) {
    const int HS = c->o.head_dim, P = c->o.rot_dim / 2;
    const size_t rows = (size_t)n * c->o.seq * (size_t)(width / HS);
    if (!c->o.rope_interleaved) {
        memcpy(dst, x, rows * HS * sizeof(float));
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        const float *v = x + r * HS;
        float *d = dst + r * HS;
        for (int p = 0; p < P; p++) d[p] = v[2 * p], d[p + P] = v[2 * p + 1];
        memcpy(d + 2 * P, v + 2 * P, (size_t)(HS - 2 * P) * sizeof(float));
    }
}

/* *buf grown to hold n floats (*cap its size). */
static int acc_reserve(float **buf, size_t *cap, size_t n) {
    if (n <= *cap) return MP_OK;
    float *p = realloc(*buf, n * sizeof(float));
    if (!p) return mp_api_failf("accumulator: out of memory for %zu captured values", n);
    *buf = p, *cap = n;
    return MP_OK;
}

/* The queries of a batch kept (half-split pairs) until its keys come. */
static int acc_queries(MaskposAcc *c, int layer, int64_t batch, const float *x, int64_t width) {
    if (acc_reserve(&c->qbuf, &c->qcap, (size_t)batch * c->o.seq * (size_t)width) != MP_OK) return MASKPOS_ERR;
    acc_half_split(c, c->qbuf, x, batch, width);
    c->q_layer = layer, c->q_batch = batch;
    return MASKPOS_OK;
}

/* The keys of the batch whose queries wait: each sequence's queries, then its keys, to the probe's dispatch. */
static int acc_keys(MaskposAcc *c, int layer, int64_t batch, const float *x, int64_t width) {
    if (acc_reserve(&c->kbuf, &c->kcap, (size_t)batch * c->o.seq * (size_t)width) != MP_OK) return MASKPOS_ERR;
    acc_half_split(c, c->kbuf, x, batch, width);
    const size_t pq = (size_t)c->o.seq * c->o.n_heads * c->o.head_dim, pk = (size_t)c->o.seq * (size_t)width;
    for (int64_t b = 0; b < batch; b++) {
        mp_probe_acc_capture(&c->a, layer, MP_FWD_AT_Q, c->qbuf + (size_t)b * pq, c->o.seq, c->o.n_heads * c->o.head_dim);
        mp_probe_acc_capture(&c->a, layer, MP_FWD_AT_K, c->kbuf + (size_t)b * pk, c->o.seq, (int)width);
    }
    c->q_batch = 0;
    return MASKPOS_OK;
}

MASKPOS_API int maskpos_acc_add_capture(MaskposAcc *c, int layer, int point, int64_t batch, int dtype, const void *x,
                                        int64_t width) {
    if (!c || !x) return mp_api_failf("maskpos_acc_add_capture: NULL argument");
    if (acc_capture_check(c, layer, point, batch, dtype, x, width) != MP_OK) return MASKPOS_ERR;
    if (point == MASKPOS_AT_Q) return acc_queries(c, layer, batch, x, width); /* (counted with the keys) */
    if (point == MASKPOS_AT_K && acc_keys(c, layer, batch, x, width) != MASKPOS_OK) return MASKPOS_ERR;
    if (point != MASKPOS_AT_K) { /* the probe's own dispatch: the rows of the statistics table */
        const int64_t s0 = c->n_cap[ACC_OUT][layer];
        const size_t per = (size_t)c->o.seq * (size_t)width;
        for (int64_t b = 0, r = 0; b < batch; b++) {
            if (!acc_reads(c, point, s0 + b)) continue; /* (x holds the rows read only) */
            c->a.seq_index = point == MASKPOS_AT_LAYER_OUT ? s0 + b : 0; /* the position probe's split and positions */
            mp_probe_acc_capture(&c->a, layer, point, (const float *)x + (size_t)r++ * per, c->o.seq, (int)width);
        }
    }
    c->n_cap[acc_cap_kind(point)][layer] += batch;
    return MASKPOS_OK;
}

MASKPOS_API int64_t maskpos_acc_capture_rows(const MaskposAcc *c, int layer, int point, int64_t batch, int64_t *rows) {
    if (!c || layer < 0 || layer >= c->o.n_layers || batch < 0) {
        mp_api_failf("maskpos_acc_capture_rows: a NULL accumulator, layer %d out of range or batch %lld negative", layer,
                     (long long)batch);
        return -1;
    }
    return acc_rows(c, layer, point, batch, rows);
}

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
    for (int p = 0; p < ACC_NCAP; p++) memcpy(c->n_cap[p], counts, sizeof(int64_t) * (size_t)c->o.n_layers); /* a whole state's */
    return MASKPOS_OK;
}

/* 1 when the tables x and y of n doubles (either NULL) hold the same values. */
static int acc_same_table(const double *x, const double *y, size_t n) {
    return (!x && !y) || (x && y && !memcmp(x, y, n * sizeof(double)));
}

/* 1 when a and b have the same geometry (freq's heads and RoPE tables, position's settings). */
static int acc_same_geometry(const MaskposAcc *a, const MaskposAcc *b) {
    const MaskposAccOptions *x = &a->o, *y = &b->o;
    return x->head_dim == y->head_dim && x->n_kv_heads == y->n_kv_heads && x->rot_dim == y->rot_dim &&
           !x->rope_interleaved == !y->rope_interleaved && x->scale == y->scale && x->resid_width == y->resid_width &&
           x->pos_dim == y->pos_dim && x->pos_stride == y->pos_stride && x->pos_ridge == y->pos_ridge &&
           x->resid_stride == y->resid_stride && acc_same_table(a->inv_freq, b->inv_freq, (size_t)x->n_layers * (x->rot_dim / 2)) &&
           acc_same_table(a->rope_base, b->rope_base, (size_t)x->n_layers);
}

/* 1 when a and b were made with the same options (seq aside when any_seq; the lengths row, which
 * the data switches on, aside). */
static int acc_same(const MaskposAcc *a, const MaskposAcc *b, int any_seq) {
    const MaskposAccOptions *x = &a->o, *y = &b->o;
    const unsigned len_bit = MP_PROBE_STAT_BIT(MP_PROBE_STAT_LENGTHS);
    return x->n_layers == y->n_layers && x->n_heads == y->n_heads && (any_seq || x->seq == y->seq) && !x->causal == !y->causal &&
           x->first == y->first && !x->per_head == !y->per_head && (a->a.stats & ~len_bit) == (b->a.stats & ~len_bit) &&
           !memcmp(a->windows, b->windows, sizeof a->windows) && !memcmp(a->layer_ids, b->layer_ids, sizeof a->layer_ids) &&
           acc_same_geometry(a, b);
}

/* The statistics named in a's stats other than those with switches of their own (probs, recency). */
static unsigned acc_other_stats(const MaskposAcc *a) {
    unsigned set = 0;
    MpErr e;
    if (mp_probe_stats_parse(a->stats, &set, &e) != MP_OK) return ~0u; /* (names this library wrote) */
    return set & ~(MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) | MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY));
}

/* The options saved (a) that differ from c's, as "probs=True, not False, ..." into buf; 0 when none. */
static int acc_differs(char *buf, size_t cap, const MaskposAcc *a, const MaskposAcc *c) {
    const MaskposAccOptions *x = &a->o, *y = &c->o;
    const struct {
        const char *name;
        int saved, given, flag;
    } t[] = {{"n_layers", x->n_layers, y->n_layers, 0}, {"n_heads", x->n_heads, y->n_heads, 0}, {"seq", x->seq, y->seq, 0},
             {"causal", !!x->causal, !!y->causal, 1},      {"first", x->first, y->first, 0},
             {"per_head", !!x->per_head, !!y->per_head, 1}, {"probs", !!x->probs, !!y->probs, 1},
             {"recency", !!x->recency, !!y->recency, 1},    {"heads_f64", !!x->heads_f64, !!y->heads_f64, 1},
             {"stats", acc_other_stats(a) != acc_other_stats(c), 0, 2},
             {"window", memcmp(a->windows, c->windows, sizeof a->windows) != 0, 0, 2},
             {"layer_ids", memcmp(a->layer_ids, c->layer_ids, sizeof a->layer_ids) != 0, 0, 2},
             {"geometry (head_dim, n_kv_heads, rot_dim, rope_interleaved, scale, inv_freq, rope_base, resid_width, pos_dim, "
              "pos_stride, pos_ridge, resid_stride)", x->n_layers == y->n_layers && !acc_same_geometry(a, c), 0, 2}};
    size_t w = 0;
    buf[0] = 0;
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        if (t[k].saved == t[k].given) continue;
        int m = t[k].flag == 2 ? snprintf(buf + w, cap - w, "%s%s differs", w ? ", " : "", t[k].name)
                : t[k].flag    ? snprintf(buf + w, cap - w, "%s%s=%s, not %s", w ? ", " : "", t[k].name,
                                          t[k].saved ? "True" : "False", t[k].given ? "True" : "False")
                               : snprintf(buf + w, cap - w, "%s%s=%d, not %d", w ? ", " : "", t[k].name, t[k].saved, t[k].given);
        if (m < 0 || (size_t)m >= cap - w) break;
        w += (size_t)m;
    }
    return w > 0;
}

/* freq's table of the RoPE in this run (model/probe.h fr_table: [L, P + 1], each layer's inverse
 * frequencies, then its base) from the caller's: a NULL one NaN (the outputs that read it say unknown). */
static int acc_freq_table(MpProbeAcc *a, const MaskposAccOptions *o, MpErr *e) {
    const int P = o->rot_dim / 2;
    a->fr_table = mp_try_calloc((size_t)a->L * (size_t)(P + 1), sizeof(double));
    if (!a->fr_table) return mp_err_set(e, "out of memory for the RoPE tables (%d layers)", a->L);
    for (int l = 0; l < o->n_layers; l++) {
        double *t = a->fr_table + (size_t)l * (P + 1);
        for (int p = 0; p < P; p++) t[p] = o->inv_freq ? o->inv_freq[(size_t)l * P + p] : NAN;
        t[P] = o->rope_base ? o->rope_base[l] : NAN;
    }
    return MP_OK;
}

/* The probe accumulator of c's options at length S: layers, windows (those that mask at S), first,
 * the statistics of set (bits of MpProbeStatId; the forward pass's thread count). */
static int acc_make(MpProbeAcc *a, const MaskposAccOptions *o, const int *windows, int S, unsigned set, MpErr *e) {
    unsigned char mask[256];
    memset(mask, 1, sizeof mask);
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    int rc = mp_probe_acc_init(a, mask, o->n_layers, o->n_heads, S, !!o->per_head, !!o->causal, threads, e);
    if (rc != MP_OK) return rc;
    if (o->first) mp_probe_acc_skip(a, o->first);
    for (int l = 0; l < o->n_layers; l++) /* as mp_probe_acc_windows: a window masks only below S */
        a->window[l] = windows[l] > 0 && windows[l] < S ? windows[l] : 0;
    a->fr_hs = o->head_dim, a->fr_nkv = o->n_kv_heads, a->fr_rot = o->rot_dim, a->fr_scale = o->scale; /* freq */
    a->pos_width = o->resid_width, a->pos_dim = o->pos_dim, a->pos_stride = o->pos_stride, a->pos_ridge = o->pos_ridge;
    a->resid_stride = o->resid_stride;
    rc = mp_probe_acc_stats_on(a, set, e);
    if (rc == MP_OK && mp_probe_acc_has(a, MP_PROBE_STAT_FREQ) && (o->inv_freq || o->rope_base)) rc = acc_freq_table(a, o, e);
    if (rc != MP_OK) mp_probe_acc_free(a);
    return rc;
}

/* c grown to length S > its own: a new accumulator holding c's sums in its top-left block. */
static int acc_grow(MaskposAcc *c, int S, MpErr *e) {
    MpProbeAcc big;
    const int with_probs = acc_with_probs(c);
    if (acc_make(&big, &c->o, c->windows, S, c->a.stats & ~MP_PROBE_STAT_BIT(MP_PROBE_STAT_LENGTHS), e) != MP_OK) return MP_ERR;
    float *pbuf = with_probs ? mp_try_malloc((size_t)c->o.n_heads * S * S * sizeof(float)) : NULL;
    if (with_probs && !pbuf) {
        mp_probe_acc_free(&big);
        return mp_err_set(e, "out of memory for one sequence's probabilities");
    }
    if (mp_probe_acc_embed(&big, &c->a, NULL, c->n_layer, e) != MP_OK) {
        free(pbuf);
        mp_probe_acc_free(&big);
        return MP_ERR;
    }
    big.n_done = c->a.n_done;
    mp_probe_acc_free(&c->a);
    c->a = big;
    c->o.seq = S;
    if (pbuf) free(c->pbuf), c->pbuf = pbuf;
    return MP_OK;
}

MASKPOS_API int maskpos_acc_merge(MaskposAcc *dst, const MaskposAcc *src) {
    MpErr e;
    if (!dst || !src) return mp_api_failf("maskpos_acc_merge: NULL argument");
    if (!acc_same(dst, src, 1))
        return mp_api_failf("accumulator merge: the two were made with different options (layers, heads, causal, "
                            "window, first, per_head or statistics)");
    if (dst->o.seq != src->o.seq && (acc_points(dst) & ACC_POINTS))
        return mp_api_failf("accumulator merge: lengths %d and %d differ, which the statistics that read captures (variance, "
                            "freq, position) cannot merge", dst->o.seq, src->o.seq);
    if (dst->q_batch || src->q_batch)
        return mp_api_failf("accumulator merge: queries still wait for their keys (MASKPOS_AT_K) in one of the two");
    if (dst->o.seq != src->o.seq && mp_probe_acc_has(&dst->a, MP_PROBE_STAT_RECENCY))
        return mp_api_failf("accumulator merge: lengths %d and %d differ, which recency=True cannot merge", dst->o.seq, src->o.seq);
    if (src->o.seq > dst->o.seq && acc_grow(dst, src->o.seq, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    const int64_t n0 = dst->a.n_done;
    int rc;
    if (dst->o.seq != src->o.seq || mp_probe_acc_has(&dst->a, MP_PROBE_STAT_LENGTHS) != mp_probe_acc_has(&src->a, MP_PROBE_STAT_LENGTHS))
        rc = mp_probe_acc_embed(&dst->a, &src->a, dst->n_layer, src->n_layer, &e);
    else rc = mp_probe_acc_merge(&dst->a, &src->a, &e);
    if (rc != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    dst->a.n_done = n0; /* the API counts per layer */
    for (int l = 0; l < dst->o.n_layers; l++) {
        dst->n_layer[l] += src->n_layer[l];
        for (int p = 0; p < ACC_NCAP; p++) dst->n_cap[p][l] += src->n_cap[p][l];
    }
    return MASKPOS_OK;
}

/* The number of doubles one layer slot holds of array t (0: not laid out by layer, see below). */
static size_t acc_slot_len(const MpProbeAcc *a, const MpProbeArray *t) {
    return t->by_layer ? t->n / (size_t)a->L : 0; /* lbsum, lbsumsq: [nlen, L, 16, 16] (refused by add_sums) */
}

/* 1 for the block sums maskpos_acc_add_sums derives from "block_means" (each sequence's). */
static int acc_from_block_means(const char *name) {
    return !strcmp(name, "bsum") || !strcmp(name, "bsumsq") || !strcmp(name, "bflip") || !strcmp(name, "bcnt");
}

/* 1 for the sums of a statistic that reads captures alone (variance, freq, position): fed by
 * maskpos_acc_add_capture, so the sums of scores computed elsewhere may leave them out. */
static int acc_from_captures(const MpProbeArray *t) { return mp_probe_stats[t->stat].in == MP_PROBE_IN_CAPTURE; }

MASKPOS_API int maskpos_acc_add_sums(MaskposAcc *c, int layer, int64_t count, int k, const char *const *names,
                                     const double *const *data) {
    MpErr e;
    if (!c || (k && (!names || !data))) return mp_api_failf("maskpos_acc_add_sums: NULL argument");
    if (layer < 0 || layer >= c->o.n_layers)
        return mp_api_failf("accumulator: layer %d is out of range [0, %d)", layer, c->o.n_layers);
    if (count < 0) return mp_api_failf("accumulator: negative count %lld", (long long)count);
    const double *bmeans = NULL, *npos = NULL; /* [count, nb, nb] each sequence's block means; [S] */
    for (int i = 0; i < k; i++) {
        if (names[i] && !strcmp(names[i], "block_means")) bmeans = data[i];
        if (names[i] && !strcmp(names[i], "npos")) npos = data[i];
    }
    const size_t nbb = (size_t)c->a.nb * c->a.nb;
    for (size_t q = 0; bmeans && q < (size_t)count * nbb; q++)
        if (isinf(bmeans[q])) return mp_api_failf("accumulator: layer %d: block_means[%zu] is infinite; nothing was added", layer, q);
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&c->a, t);
    for (int j = 0; j < n; j++)
        if (!t[j].by_layer && !acc_from_captures(&t[j]))
            return mp_api_failf("accumulator: sums computed elsewhere come one layer at a time, and the sums of '%s' are "
                                "not all laid out by layer (%s); add the scores", mp_probe_stats[t[j].stat].name, t[j].name);
    const double *src[MP_PROBE_MAX_ARRAYS] = {0};
    for (int i = 0; i < k; i++) {
        int found = -1;
        if (names[i] && (!strcmp(names[i], "block_means") || !strcmp(names[i], "npos"))) continue;
        for (int j = 0; j < n; j++)
            if (names[i] && !strcmp(names[i], t[j].name)) found = j;
        if (found < 0) return mp_api_failf("accumulator: no sum called '%s' in this accumulator", names[i] ? names[i] : "(null)");
        src[found] = data[i];
    }
    for (int j = 0; j < n; j++) {
        if (!strcmp(t[j].name, "npos") || (!src[j] && acc_from_captures(&t[j]))) continue;
        if (!src[j] && bmeans && acc_from_block_means(t[j].name)) continue;
        if (!src[j]) return mp_api_failf("accumulator: the sum '%s' is missing (every sum of the layer is needed)", t[j].name);
        const size_t m = acc_slot_len(&c->a, &t[j]);
        for (size_t q = 0; q < m; q++)
            if (!isfinite(src[j][q]) || (strstr(t[j].name, "sq") && src[j][q] < 0))
                return mp_api_failf("accumulator: layer %d: %s[%zu] = %g is not a finite sum; nothing was added", layer,
                                    t[j].name, q, src[j][q]);
    }
    if (c->a.npos && !npos) return mp_api_failf("accumulator: the sum 'npos' is missing (this accumulator counts lengths)");
    for (int p = 0; npos && p < c->o.seq; p++)
        if (!(npos[p] >= 0 && npos[p] <= (double)count))
            return mp_api_failf("accumulator: layer %d: npos[%d] = %g is not a count in [0, %lld]; nothing was added", layer, p,
                                npos[p], (long long)count);
    if (npos && !c->a.npos && mp_probe_acc_lengths_on(&c->a, c->n_layer, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    for (int j = 0; j < n; j++) {
        if (!src[j]) continue;
        const size_t m = acc_slot_len(&c->a, &t[j]);
        double *d = t[j].p + (size_t)layer * m;
        for (size_t q = 0; q < m; q++) d[q] += src[j][q];
    }
    if (npos)
        for (int p = 0; p < c->o.seq; p++) c->a.npos[(size_t)layer * c->o.seq + p] += npos[p];
    for (int64_t q = 0; bmeans && q < count; q++) mp_probe_acc_block_seq(&c->a, layer, bmeans + (size_t)q * nbb);
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

/* Every layer slot's captures at each point the statistics on read cover the sequences its scores
 * did (the sums are divided by that count), and no queries wait for their keys. */
static int acc_caps_equal(const MaskposAcc *c, const char *what) {
    static const char *const pname[ACC_NCAP] = {"attn_out (ATTN_MIX)", "hidden (LAYER_OUT)", "query and key (Q, K)"};
    static const int point[ACC_NCAP] = {MASKPOS_AT_ATTN_MIX, MASKPOS_AT_LAYER_OUT, MASKPOS_AT_K};
    if (c->q_batch)
        return mp_api_failf("accumulator %s: the queries of layer %d's last batch wait for their keys (MASKPOS_AT_K)", what,
                            c->q_layer);
    for (int l = 0; l < c->o.n_layers; l++)
        for (int p = 0; p < ACC_NCAP; p++)
            if ((acc_points(c) >> point[p] & 1u) && c->n_cap[p][l] != c->n_layer[l])
                return mp_api_failf("accumulator %s: layer %d has %lld sequences of scores but %lld of %s captures (the "
                                    "statistics asked read them for every sequence added)", what, l,
                                    (long long)c->n_layer[l], (long long)c->n_cap[p][l], pname[p]);
    return MP_OK;
}

/* MP_OK when every layer has seen the same number of sequences (and their captures), else the
 * failure, named. */
static int acc_counts_equal(const MaskposAcc *c, const char *what) {
    for (int l = 1; l < c->o.n_layers; l++)
        if (c->n_layer[l] != c->n_layer[0])
            return mp_api_failf("accumulator %s: layer %d has seen %lld sequences, layer 0 %lld (add every layer of each "
                                "batch first)", what, l, (long long)c->n_layer[l], (long long)c->n_layer[0]);
    return acc_caps_equal(c, what);
}

/* ---------------------------------------------------------------- the state file
 * "MPACCST1", u64 n, n bytes of JSON (version, options, counts per layer slot, meta, the arrays'
 * names and lengths), every array of the table (doubles, table order), u64 FNV-1a checksum of all
 * that precedes it. Read back with every size checked against the file's. */
#define ACC_STATE_MAGIC "MPACCST1"
#define ACC_STATE_MAX_JSON (1u << 20)

/* The geometry's integer options by name, in the order of acc_geometry_header and acc_state_geometry. */
static const char *const acc_geom_int[8] = {"head_dim", "n_kv_heads", "rot_dim", "rope_interleaved", "resid_width", "pos_dim",
                                            "pos_stride", "resid_stride"};

static json_t *acc_int_array(const int *x, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(x[i]));
    return a;
}

static json_t *acc_real_array(const double *x, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_real(x[i]));
    return a;
}

/* The geometry's options (freq's, position's) into the header's "options" o. */
static void acc_geometry_header(json_t *o, const MaskposAcc *c) {
    const int ints[] = {c->o.head_dim, c->o.n_kv_heads, c->o.rot_dim, !!c->o.rope_interleaved, c->o.resid_width,
                        c->o.pos_dim, c->o.pos_stride, c->o.resid_stride};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) json_object_set_new(o, acc_geom_int[k], json_integer(ints[k]));
    json_object_set_new(o, "scale", json_real(c->o.scale));
    json_object_set_new(o, "pos_ridge", json_real(c->o.pos_ridge));
    json_object_set_new(o, "inv_freq", c->inv_freq ? acc_real_array(c->inv_freq, (size_t)c->o.n_layers * (c->o.rot_dim / 2)) : json_null());
    json_object_set_new(o, "rope_base", c->rope_base ? acc_real_array(c->rope_base, (size_t)c->o.n_layers) : json_null());
}

/* The JSON header of c's state file. */
static json_t *acc_state_header(const MaskposAcc *c, const MpProbeArray *t, int n) {
    json_t *j = json_object(), *o = json_object(), *cnt = json_array(), *arr = json_array();
    json_object_set_new(j, "version", json_integer(1));
    json_object_set_new(o, "n_layers", json_integer(c->o.n_layers));
    json_object_set_new(o, "n_heads", json_integer(c->o.n_heads));
    json_object_set_new(o, "seq", json_integer(c->o.seq));
    json_object_set_new(o, "causal", json_boolean(c->o.causal));
    json_object_set_new(o, "window", acc_int_array(c->windows, c->o.n_layers));
    json_object_set_new(o, "layer_ids", acc_int_array(c->layer_ids, c->o.n_layers));
    json_object_set_new(o, "first", json_integer(c->o.first));
    json_object_set_new(o, "per_head", json_boolean(c->o.per_head));
    json_object_set_new(o, "probs", json_boolean(c->o.probs));
    json_object_set_new(o, "recency", json_boolean(c->o.recency));
    json_object_set_new(o, "stats", json_string(c->stats));
    json_object_set_new(o, "heads_f64", json_boolean(c->o.heads_f64));
    acc_geometry_header(o, c);
    json_object_set_new(j, "options", o);
    json_object_set_new(j, "lengths", json_boolean(c->a.npos != NULL));
    for (int l = 0; l < c->o.n_layers; l++) json_array_append_new(cnt, json_integer(c->n_layer[l]));
    json_object_set_new(j, "counts", cnt);
    json_object_set_new(j, "meta", c->extra ? json_incref(c->extra) : json_null());
    for (int k = 0; k < n; k++) json_array_append_new(arr, json_pack("{s:s, s:I}", "name", t[k].name, "n", (json_int_t)t[k].n));
    json_object_set_new(j, "arrays", arr);
    return j;
}

MASKPOS_API int maskpos_acc_save_state(const MaskposAcc *c, const char *path) {
    MpErr e;
    if (!c || !path) return mp_api_failf("maskpos_acc_save_state: NULL argument");
    if (acc_caps_equal(c, "state") != MP_OK) return MASKPOS_ERR; /* the file keeps one count per layer */
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&c->a, t);
    json_t *hj = acc_state_header(c, t, n);
    char *text = json_dumps(hj, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(hj);
    if (!text) return mp_api_failf("%s: out of memory for the state's header", path);
    const uint64_t len = strlen(text);
    uint64_t ck = mp_fnv1a64(ACC_STATE_MAGIC, 8, MP_FNV_INIT);
    ck = mp_fnv1a64(&len, sizeof len, ck);
    ck = mp_fnv1a64(text, len, ck);
    for (int k = 0; k < n; k++) ck = mp_fnv1a64(t[k].p, t[k].n * sizeof(double), ck);
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, &e) != MP_OK) {
        free(text);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    int ok = fwrite(ACC_STATE_MAGIC, 8, 1, af.f) == 1 && fwrite(&len, sizeof len, 1, af.f) == 1 && fwrite(text, 1, len, af.f) == len;
    for (int k = 0; k < n && ok; k++) ok = fwrite(t[k].p, sizeof(double), t[k].n, af.f) == t[k].n;
    ok = ok && fwrite(&ck, sizeof ck, 1, af.f) == 1;
    free(text);
    if (!ok) {
        mp_atomic_abort(&af);
        return mp_api_failf("%s: write failed: %s; HINT: is the disk full?", path, strerror(errno));
    }
    return mp_atomic_commit(&af, &e) == MP_OK ? MASKPOS_OK : mp_api_fail(&e, MASKPOS_ERR);
}

static int acc_state_geometry(const char *path, json_t *oj, MaskposAccOptions *o, double **inv, double **base);

/* Options from the header's "options" into o (windows, layer_ids into w, ids [256]; the statistics
 * by name, as maskpos_acc_new names them, into stats [512]; none in a file without "stats"; the
 * geometry, its tables into *inv and *base: acc_state_geometry). */
static int acc_state_options(const char *path, json_t *oj, MaskposAccOptions *o, int *w, int *ids, char *stats, double **inv,
                             double **base) {
    *inv = *base = NULL;
    memset(o, 0, sizeof *o);
    json_t *wa = json_object_get(oj, "window"), *ia = json_object_get(oj, "layer_ids");
    json_int_t nl = 0, nh = 0, sq = 0, fi = 0;
    int causal = 0, ph = 0, pr = 0, rc = 0, hf = 0;
    if (json_unpack(oj, "{s:I, s:I, s:I, s:b, s:I, s:b, s:b, s:b, s:b}", "n_layers", &nl, "n_heads", &nh, "seq", &sq, "causal",
                    &causal, "first", &fi, "per_head", &ph, "probs", &pr, "recency", &rc, "heads_f64", &hf) ||
        nl < 1 || nl > 256 || nh < 1 || nh > 4096 || sq < 2 || sq > 65536 || fi < 0 || fi > sq || !json_is_array(wa) ||
        !json_is_array(ia) || json_array_size(wa) != (size_t)nl || json_array_size(ia) != (size_t)nl)
        return mp_api_failf("%s: the state's options are malformed", path);
    for (int l = 0; l < nl; l++) {
        json_t *a = json_array_get(wa, (size_t)l), *b = json_array_get(ia, (size_t)l);
        if (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 || json_integer_value(a) > 1 << 30 ||
            json_integer_value(b) < 1 || json_integer_value(b) > 1 << 30)
            return mp_api_failf("%s: the state's options are malformed (window or layer_ids)", path);
        w[l] = (int)json_integer_value(a), ids[l] = (int)json_integer_value(b);
    }
    json_t *sj = json_object_get(oj, "stats");
    unsigned set = (pr ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) : 0) | (rc ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY) : 0);
    MpErr e;
    if ((sj && !json_is_string(sj)) || mp_probe_stats_parse(json_string_value(sj), &set, &e) != MP_OK)
        return mp_api_failf("%s: the state's options are malformed (stats)", path);
    mp_probe_stats_names(set & ~MP_PROBE_STAT_BIT(MP_PROBE_STAT_LENGTHS), stats, 512);
    *o = (MaskposAccOptions){.n_layers = (int)nl, .n_heads = (int)nh, .seq = (int)sq, .causal = causal, .windows = w,
                             .layer_ids = ids, .first = (int)fi, .per_head = ph, .probs = pr, .recency = rc, .heads_f64 = hf,
                             .stats = stats};
    return acc_state_geometry(path, oj, o, inv, base);
}

/* The real array key of oj, n values, into *out (malloc'd; NULL when absent or null). */
static int acc_state_reals(const char *path, json_t *oj, const char *key, size_t n, double **out) {
    json_t *a = json_object_get(oj, key);
    *out = NULL;
    if (!a || json_is_null(a)) return MP_OK;
    if (!json_is_array(a) || json_array_size(a) != n || !n || !(*out = mp_try_malloc(n * sizeof(double))))
        return mp_api_failf("%s: the state's options are malformed (%s: %zu values expected)", path, key, n);
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_array_get(a, i);
        if (!json_is_number(v)) return mp_api_failf("%s: the state's options are malformed (%s[%zu])", path, key, i);
        (*out)[i] = json_number_value(v);
    }
    return MP_OK;
}

/* The geometry's options of the header's "options" oj into o (absent in an older state: 0); the
 * tables into *inv, *base (malloc'd, or NULL; the caller frees them, also on failure). The values
 * themselves are checked by maskpos_acc_new. */
static int acc_state_geometry(const char *path, json_t *oj, MaskposAccOptions *o, double **inv, double **base) {
    int *ints[] = {&o->head_dim, &o->n_kv_heads, &o->rot_dim, &o->rope_interleaved, &o->resid_width,
                   &o->pos_dim, &o->pos_stride, &o->resid_stride};
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        json_t *v = json_object_get(oj, acc_geom_int[k]);
        if (v && (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 1 << 30))
            return mp_api_failf("%s: the state's options are malformed (%s)", path, acc_geom_int[k]);
        *ints[k] = v ? (int)json_integer_value(v) : 0;
    }
    json_t *sc = json_object_get(oj, "scale"), *pr = json_object_get(oj, "pos_ridge");
    if ((sc && !json_is_number(sc)) || (pr && !json_is_number(pr)))
        return mp_api_failf("%s: the state's options are malformed (scale or pos_ridge)", path);
    o->scale = sc ? json_number_value(sc) : 0, o->pos_ridge = pr ? json_number_value(pr) : 0;
    if (o->rot_dim % 2 || o->rot_dim > 65536) return mp_api_failf("%s: the state's options are malformed (rot_dim)", path);
    if (acc_state_reals(path, oj, "inv_freq", (size_t)o->n_layers * (o->rot_dim / 2), inv) != MP_OK ||
        acc_state_reals(path, oj, "rope_base", (size_t)o->n_layers, base) != MP_OK)
        return MP_ERR;
    o->inv_freq = *inv, o->rope_base = *base;
    acc_geometry_defaults(o); /* (an older state has none: the defaults an accumulator made now has) */
    return MP_OK;
}

typedef struct AccStateFile {
    FILE *f;
    int64_t size;
    json_t *hd;   /* the header */
    uint64_t ck;  /* the running checksum after the header */
    int64_t data; /* bytes after the header */
} AccStateFile;

/* Opens path and reads its header: MP_OK, MP_ERR with a message, or 1 when it is the probe's
 * checkpoint format (an older state file; f closed). */
static int acc_state_open(AccStateFile *sf, const char *path) {
    MpErr e;
    memset(sf, 0, sizeof *sf);
    sf->f = mp_input_open(path, &sf->size, &e);
    if (!sf->f) return mp_api_fail(&e, MASKPOS_ERR);
    char magic[8];
    uint64_t len = 0;
    if (fread(magic, 8, 1, sf->f) != 1) magic[0] = 0;
    if (!memcmp(magic, "MPPRBCK1", 8)) {
        fclose(sf->f);
        sf->f = NULL;
        return 1;
    }
    int rc = MP_OK;
    char *text = NULL;
    if (memcmp(magic, ACC_STATE_MAGIC, 8)) rc = mp_api_failf("%s: not a maskpos accumulator state (Accumulator.save_state)", path);
    else if (fread(&len, sizeof len, 1, sf->f) != 1 || len < 2 || len > ACC_STATE_MAX_JSON || (int64_t)len > sf->size - 24)
        rc = mp_api_failf("%s: truncated or corrupt accumulator state (header of %llu bytes in a file of %lld)", path,
                          (unsigned long long)len, (long long)sf->size);
    else if (!(text = malloc(len + 1)) || fread(text, 1, len, sf->f) != len)
        rc = mp_api_failf("%s: truncated accumulator state", path);
    if (rc == MP_OK) {
        text[len] = 0;
        json_error_t je;
        sf->hd = json_loads(text, 0, &je);
        if (!json_is_object(sf->hd)) rc = mp_api_failf("%s: the state's header is not a JSON object (%s)", path, je.text);
        else if (json_integer_value(json_object_get(sf->hd, "version")) != 1)
            rc = mp_api_failf("%s: accumulator state version %lld; this maskpos reads version 1", path,
                              (long long)json_integer_value(json_object_get(sf->hd, "version")));
        sf->ck = mp_fnv1a64(ACC_STATE_MAGIC, 8, MP_FNV_INIT);
        sf->ck = mp_fnv1a64(&len, sizeof len, sf->ck);
        sf->ck = mp_fnv1a64(text, len, sf->ck);
        sf->data = sf->size - 16 - (int64_t)len;
    }
    free(text);
    if (rc != MP_OK) {
        if (sf->hd) json_decref(sf->hd);
        fclose(sf->f);
        memset(sf, 0, sizeof *sf);
    }
    return rc;
}

static void acc_state_close(AccStateFile *sf) {
    if (sf->f) fclose(sf->f);
    if (sf->hd) json_decref(sf->hd);
    memset(sf, 0, sizeof *sf);
}

/* The file's sums, counts and meta into c (made with the file's options, empty). */
static int acc_state_read(AccStateFile *sf, MaskposAcc *c, const char *path) {
    MpErr e;
    if (json_is_true(json_object_get(sf->hd, "lengths")) && mp_probe_acc_lengths_on(&c->a, c->n_layer, &e) != MP_OK)
        return mp_api_fail(&e, MASKPOS_ERR);
    MpProbeArray t[MP_PROBE_MAX_ARRAYS];
    const int n = mp_probe_acc_arrays(&c->a, t);
    json_t *arr = json_object_get(sf->hd, "arrays"), *cnt = json_object_get(sf->hd, "counts");
    int64_t bytes = 8;
    if (!json_is_array(arr) || json_array_size(arr) != (size_t)n || !json_is_array(cnt) || json_array_size(cnt) != (size_t)c->o.n_layers)
        return mp_api_failf("%s: the state's sums do not fit its options", path);
    for (int k = 0; k < n; k++) {
        json_t *a = json_array_get(arr, (size_t)k);
        const char *nm = json_string_value(json_object_get(a, "name"));
        if (!nm || strcmp(nm, t[k].name) || json_integer_value(json_object_get(a, "n")) != (json_int_t)t[k].n)
            return mp_api_failf("%s: the state's sum %d is %s, this accumulator's %s of %zu values", path, k, nm ? nm : "(none)",
                                t[k].name, t[k].n);
        bytes += (int64_t)t[k].n * 8;
    }
    if (bytes != sf->data) return mp_api_failf("%s: truncated or oversized accumulator state (%lld bytes of sums, %lld expected)", path,
                                              (long long)sf->data - 8, (long long)bytes - 8);
    int ok = 1;
    for (int k = 0; k < n && ok; k++) {
        ok = fread(t[k].p, sizeof(double), t[k].n, sf->f) == t[k].n;
        sf->ck = mp_fnv1a64(t[k].p, t[k].n * sizeof(double), sf->ck);
    }
    uint64_t stored;
    int rc = MP_OK;
    if (!ok || fread(&stored, sizeof stored, 1, sf->f) != 1) rc = mp_api_failf("%s: truncated accumulator state", path);
    else if (stored != sf->ck) rc = mp_api_failf("%s: accumulator state checksum mismatch", path);
    for (int k = 0; rc == MP_OK && k < n; k++)
        for (size_t i = 0; t[k].check && i < t[k].n; i++)
            if (!isfinite(t[k].p[i]) || (t[k].check == 2 && t[k].p[i] < 0)) {
                rc = mp_api_failf("%s: corrupt accumulator state (%s[%zu] = %g)", path, t[k].name, i, t[k].p[i]);
                break;
            }
    for (int l = 0; rc == MP_OK && l < c->o.n_layers; l++) {
        json_t *v = json_array_get(cnt, (size_t)l);
        if (!json_is_integer(v) || json_integer_value(v) < 0) rc = mp_api_failf("%s: the state's counts are malformed", path);
        else { /* saved whole */
            c->n_layer[l] = json_integer_value(v);
            for (int p = 0; p < ACC_NCAP; p++) c->n_cap[p][l] = c->n_layer[l];
        }
    }
    json_t *meta = json_object_get(sf->hd, "meta");
    if (rc == MP_OK && json_is_object(meta)) {
        if (c->extra) json_decref(c->extra);
        c->extra = json_incref(meta);
    }
    if (rc != MP_OK) {
        mp_probe_acc_reset(&c->a);
        memset(c->n_layer, 0, sizeof c->n_layer);
    }
    return rc;
}

MASKPOS_API int maskpos_acc_open_state(const char *path, MaskposAcc **out) {
    if (!path || !out) return mp_api_failf("maskpos_acc_open_state: NULL argument");
    *out = NULL;
    AccStateFile sf;
    const int rc = acc_state_open(&sf, path);
    if (rc == 1)
        return mp_api_failf("%s: a state file of an older maskpos (the probe's checkpoint format, without the options): load "
                            "it with the options it was made with (Accumulator.load_state(path, **options))", path);
    if (rc != MP_OK) return MASKPOS_ERR;
    MaskposAccOptions o;
    int w[256], ids[256];
    char stats[512];
    double *inv, *base;
    MaskposAcc *c = NULL;
    int r = acc_state_options(path, json_object_get(sf.hd, "options"), &o, w, ids, stats, &inv, &base);
    if (r == MP_OK) r = maskpos_acc_new(&o, &c);
    if (r == MP_OK) r = acc_state_read(&sf, c, path);
    acc_state_close(&sf);
    free(inv);
    free(base);
    if (r != MP_OK) {
        maskpos_acc_free(c);
        return MASKPOS_ERR;
    }
    *out = c;
    return MASKPOS_OK;
}

MASKPOS_API int maskpos_acc_load_state(MaskposAcc *c, const char *path) {
    MpErr e;
    int missing;
    if (!c || !path) return mp_api_failf("maskpos_acc_load_state: NULL argument");
    for (int l = 0; l < c->o.n_layers; l++)
        if (c->n_layer[l]) return mp_api_failf("%s: the accumulator already holds sequences; load a state into a new one", path);
    AccStateFile sf;
    const int rc = acc_state_open(&sf, path);
    if (rc == MP_OK) { /* the options must be these */
        MaskposAccOptions o;
        int w[256], ids[256];
        double *inv, *base;
        MaskposAcc tmp;
        int r = acc_state_options(path, json_object_get(sf.hd, "options"), &o, w, ids, tmp.stats, &inv, &base);
        if (r == MP_OK) {
            char st[512];
            memcpy(st, tmp.stats, sizeof st);
            memset(&tmp, 0, sizeof tmp);
            memcpy(tmp.stats, st, sizeof st);
            tmp.o = o;
            tmp.inv_freq = inv, tmp.rope_base = base;
            memcpy(tmp.windows, w, sizeof(int) * (size_t)o.n_layers);
            memcpy(tmp.layer_ids, ids, sizeof(int) * (size_t)o.n_layers);
            char d[512];
            if (acc_differs(d, sizeof d, &tmp, c))
                r = mp_api_failf("%s: the state was saved with other options (%s): open it alone "
                                 "(Accumulator.load_state(path)) to get them", path, d);
        }
        if (r == MP_OK) r = acc_state_read(&sf, c, path);
        acc_state_close(&sf);
        free(inv);
        free(base);
        return r == MP_OK ? MASKPOS_OK : MASKPOS_ERR;
    }
    if (rc != 1) return MASKPOS_ERR;
    if (mp_probe_ckpt_load(path, &c->a, acc_key(c), &missing, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    for (int l = 0; l < c->o.n_layers; l++) { /* saved whole */
        c->n_layer[l] = c->a.n_done;
        for (int p = 0; p < ACC_NCAP; p++) c->n_cap[p][l] = c->a.n_done;
    }
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
    if (c->a.npos) { /* sequences of several lengths: how many reached each position (layer slot 0) */
        json_t *np = json_array();
        for (int p = 0; p < res->S; p++) json_array_append_new(np, json_integer((json_int_t)c->a.npos[p]));
        json_object_set_new(j, "n_by_position", np);
        json_object_set_new(j, "n_by_position_of", json_string("sequences of the accumulator that reached each position "
                                                               "(their lengths; each entry (i, j) averages n_by_position[max(i, j)])"));
    }
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
