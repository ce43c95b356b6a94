/* probe_out.c — the result of mp_probe_run (job/probe_job.h): filled from the accumulator, its
 * meta.json, printed and written. The maps are the result's own; every other statistic is a row of
 * the accumulator's table (model/probe.h, mp_probe_stats) whose outputs (MpProbeStat.outs) this
 * file computes, lists in meta.json's "files" and writes as .npy without knowing them, and, where
 * a statistic has more to show (meta.json keys, figures, a printed table), a row of probe_stat_outs
 * below says how.
 * Tested by: tests/test_model_probe.c (the CLI's folder, and mp_probe_result_write's, byte for byte),
 * tests/test_probe_table.c (a statistic's outputs reach the folder).
 *
 * ================================================================ layout
 *   statistics  probe_stat_outs: what the result adds for a statistic beyond its row's outputs
 *   result      fill, meta.json, free
 *   print       the tables
 *   write       the folder
 */
#include "job/probe_job.h"

#include <math.h>
#include <stddef.h> /* offsetof */
#include <stdlib.h>
#include <string.h>

#include "core/json.h"       /* mp_json_write_atomic, mp_json_add_provenance */
#include "core/npy.h"        /* mp_npy_write */
#include "core/util.h"       /* mp_path_join, mp_mkdir_p, mp_try_malloc */
#include "job/probe_len.h"   /* mp_probe_len_print, mp_probe_len_meta, mp_probe_len_write */
#include "job/probe_curves_out.h" /* mp_probe_var_figures, mp_probe_pos_figures */
#include "job/probe_probs.h" /* mp_probe_probs_results, _print, _meta, _figures */
#include "job/sim_out.h"     /* mp_job_stats_json */
#include "model/probe_var.h" /* mp_probe_var_slopes */
#include "job/probe_freq_out.h" /* --stats freq: meta.json, its table, freq.png */
#include "model/probe_pos.h" /* MP_PROBE_POS_*: pos_probe.npy's columns */
#include "viz/signif.h"      /* mp_signif_note: each panel's significance */
#include "viz/plot.h"        /* mp_plot_render */

/* ================================================================ statistics */

/* What the result adds for a statistic beyond its row's outputs (MpProbeStat.outs, handled for
 * every row below): results of its own in MpProbeResult, meta.json keys, figures (with --plot),
 * a printed table. Keyed by MpProbeStatId; a statistic whose outputs are its row's has no row
 * here (the maps are the result's own fields). Every function may be NULL. */
typedef struct ProbeStatOut {
    int (*fill)(MpProbeResult *res, const MpProbeAcc *a, MpErr *e);
    void (*free)(MpProbeResult *res);
    void (*meta)(json_t *meta, const MpProbeResult *res);
    int (*figures)(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e);
    void (*print)(FILE *f, const MpProbeResult *res);
} ProbeStatOut;

static int probs_fill(MpProbeResult *res, const MpProbeAcc *a, MpErr *e) { return mp_probe_probs_results(&res->pr, a, e); }
static void probs_free(MpProbeResult *res) { mp_probe_probs_out_free(&res->pr); }
static void probs_meta(json_t *meta, const MpProbeResult *res) { mp_probe_probs_meta(meta, &res->pr); }
static int probs_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    return mp_probe_probs_figures(dir, &res->pr, mp_probe_result_out(res, MP_PROBE_STAT_PROBS, 0), res->layers, res->title,
                                  files, e);
}
static void probs_print(FILE *f, const MpProbeResult *res) { mp_probe_probs_print(f, &res->pr, res->layers); }

static int recency_fill(MpProbeResult *res, const MpProbeAcc *a, MpErr *e) {
    return mp_probe_recency_results(&res->rec, a, res->mean, res->se, res->heads, e);
}
static void recency_free(MpProbeResult *res) { mp_probe_recency_out_free(&res->rec); }
static void recency_meta(json_t *meta, const MpProbeResult *res) { mp_probe_len_meta(meta, &res->rec); }
static int recency_figures(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    return mp_probe_len_write(dir, &res->rec, res->layers, 1, res->title, files, e);
}
static void recency_print(FILE *f, const MpProbeResult *res) { mp_probe_len_print(f, &res->rec, res->layers); }

static json_t *probe_real(double v); /* (result, below) */

/* variance and position: which sequences read the residual stream (--resid-stride), into meta.json. */
static void resid_fill(MpProbeResult *res, const MpProbeAcc *a) {
    res->resid_stride = a->resid_stride > 1 ? a->resid_stride : 1;
    res->resid_seqs = (a->n_done + res->resid_stride - 1) / res->resid_stride;
}
static void resid_meta(json_t *meta, const MpProbeResult *res) {
    json_object_set_new(meta, "resid_stride", json_integer(res->resid_stride));
    json_object_set_new(meta, "resid_sequences", json_integer((json_int_t)res->resid_seqs));
    json_object_set_new(meta, "resid_of", json_string("variance's residual-stream part (var_resid*.npy, variance_slope_resid) "
                                                      "and the position probe read sequences s with s % resid_stride == 0 "
                                                      "(resid_sequences of them); the position probe's split goes by "
                                                      "s / resid_stride"));
}

/* variance: the log-log slopes of each layer's variances against the position, with their jackknife
 * standard errors (model/probe_var.h), into meta.json and a printed table. */
static int variance_fill(MpProbeResult *res, const MpProbeAcc *a, MpErr *e) {
    resid_fill(res, a);
    res->var_slopes = mp_try_malloc(((size_t)a->L * 4 + (size_t)a->S) * sizeof(double));
    if (!res->var_slopes) return mp_err_set(e, "out of memory for the variance slopes (%d layers)", a->L);
    mp_probe_var_slopes(a, res->var_slopes, res->var_slopes + (size_t)a->L * 4);
    return MP_OK;
}
static void variance_free(MpProbeResult *res) { free(res->var_slopes); }
static void variance_meta(json_t *meta, const MpProbeResult *res) {
    resid_meta(meta, res);
    static const char *key[4] = {"variance_slope_attn", "variance_slope_attn_se", "variance_slope_resid",
                                 "variance_slope_resid_se"};
    for (int k = 0; k < 4; k++) {
        json_t *arr = json_array();
        for (int l = 0; l < res->L; l++) json_array_append_new(arr, probe_real(res->var_slopes[(size_t)l * 4 + k]));
        json_object_set_new(meta, key[k], arr);
    }
    json_object_set_new(meta, "variance_slope_first_position", json_integer(MP_PROBE_VAR_FIT_FROM));
    json_object_set_new(meta, "variance_slope_of",
                        json_string("per layer: least-squares slope of log variance (var_attn.npy, var_resid.npy) against "
                                    "log(i + 1) over 0-based positions i >= variance_slope_first_position (-1: variance "
                                    "proportional to 1/position, as uniform attention over iid values gives); se: "
                                    "delete-a-group jackknife over 16 groups of sequences (a hash of each sequence's own "
                                    "values); null where a variance is not positive"));
}
static void variance_print(FILE *f, const MpProbeResult *res) {
    fprintf(f, "variance by position, log-log slope from position %d (+- jackknife se; -1 = 1/position):\n",
            MP_PROBE_VAR_FIT_FROM + 1);
    fprintf(f, "  layer  attention output        residual stream\n");
    for (int l = 0; l < res->L; l++) {
        const double *o = res->var_slopes + (size_t)l * 4;
        fprintf(f, "  %5d  %8.4f +- %-8.4f      %8.4f +- %.4f\n", res->layers[l] + 1, o[0], o[1], o[2], o[3]);
    }
}

/* position: the probe's settings into meta.json, and a printed table of pos_probe.npy. */
static int position_fill(MpProbeResult *res, const MpProbeAcc *a, MpErr *e) {
    (void)e;
    resid_fill(res, a);
    res->pos_set[0] = a->pos_width, res->pos_set[1] = a->pos_dim, res->pos_set[2] = a->pos_stride, res->pos_set[3] = a->pos_ridge;
    return MP_OK;
}
static void position_meta(json_t *meta, const MpProbeResult *res) {
    resid_meta(meta, res);
    json_t *o = json_object();
    json_object_set_new(o, "width", json_integer((json_int_t)res->pos_set[0]));
    json_object_set_new(o, "features", json_integer((json_int_t)res->pos_set[1]));
    json_object_set_new(o, "projection", json_string(res->pos_set[1] < res->pos_set[0] ? "feature hashing: dimension d adds sign(d) x_d to feature h(d) mod features, h(d) the low 31 bits of splitmix64(d), sign(d) -1 where its top bit is set" : "none"));
    json_object_set_new(o, "stride", json_integer((json_int_t)res->pos_set[2]));
    json_object_set_new(o, "ridge", json_real(res->pos_set[3]));
    json_object_set_new(o, "held_out", json_string("sequence s when (s / resid_stride) % 4 == 3 (of those read: s % resid_stride == 0)"));
    json_object_set_new(o, "mae_rows", json_integer(MP_PROBE_POS_MAE_ROWS));
    json_object_set_new(o, "target", json_string("the 0-based position i, unscaled"));
    /* per layer (card.json's columns): pos_probe.npy's columns by name */
    static const struct { const char *key; int col; } cols[] = {
        {"r2", MP_PROBE_POS_R2},         {"r2_se", MP_PROBE_POS_R2_SE},           {"r2_chance", MP_PROBE_POS_R2_CHANCE},
        {"mae", MP_PROBE_POS_MAE},       {"mae_se", MP_PROBE_POS_MAE_SE},         {"mae_chance", MP_PROBE_POS_MAE_CHANCE},
    };
    const double *pp = mp_probe_result_out(res, MP_PROBE_STAT_POSITION, 0);
    for (size_t k = 0; pp && k < sizeof cols / sizeof cols[0]; k++) {
        json_t *a = json_array();
        for (int l = 0; l < res->L; l++) {
            const double v = pp[(size_t)l * MP_PROBE_POS_COLS + cols[k].col];
            json_array_append_new(a, isfinite(v) ? json_real(v) : json_null());
        }
        json_object_set_new(o, cols[k].key, a);
    }
    json_object_set_new(meta, "position_probe", o);
}
static void position_print(FILE *f, const MpProbeResult *res) {
    const double *o = mp_probe_result_out(res, MP_PROBE_STAT_POSITION, 0);
    char every[32] = "every position";
    if (res->pos_set[2] > 1) snprintf(every, sizeof every, "every %gth position", res->pos_set[2]);
    fprintf(f, "position probe (ridge from the residual stream, %g features, %s; held out: 1 sequence in %d):\n",
            res->pos_set[1], every, MP_PROBE_POS_FOLDS);
    fprintf(f, "  layer  R2 held out (chance)             MAE positions (chance)   R2 fitted  positions fitted/held out\n");
    for (int l = 0; o && l < res->L; l++) {
        const double *r = o + (size_t)l * MP_PROBE_POS_COLS;
        fprintf(f, "  %5d  %8.4f +- %-7.4f (%7.4f)   %7.2f +- %-5.2f (%6.2f)   %8.4f  %.0f/%.0f\n", res->layers[l] + 1,
                r[MP_PROBE_POS_R2], r[MP_PROBE_POS_R2_SE], r[MP_PROBE_POS_R2_CHANCE], r[MP_PROBE_POS_MAE], r[MP_PROBE_POS_MAE_SE], r[MP_PROBE_POS_MAE_CHANCE],
                r[MP_PROBE_POS_R2_FIT], r[MP_PROBE_POS_N_FIT], r[MP_PROBE_POS_N_TEST]);
    }
}

static const ProbeStatOut probe_stat_outs[MP_PROBE_NSTATS] = {
    [MP_PROBE_STAT_PROBS] = {probs_fill, probs_free, probs_meta, probs_figures, probs_print},
    [MP_PROBE_STAT_RECENCY] = {recency_fill, recency_free, recency_meta, recency_figures, recency_print},
    [MP_PROBE_STAT_VARIANCE] = {variance_fill, variance_free, variance_meta, mp_probe_var_figures, variance_print},
    [MP_PROBE_STAT_FREQ] = {NULL, NULL, mp_probe_freq_meta, mp_probe_freq_figures, mp_probe_freq_print},
    [MP_PROBE_STAT_POSITION] = {position_fill, NULL, position_meta, mp_probe_pos_figures, position_print},
};

/* 1 when res holds statistic id. */
static int res_has(const MpProbeResult *res, int id) { return (res->stat_set >> id) & 1u; }

const double *mp_probe_result_out(const MpProbeResult *res, int stat, int k) {
    for (int i = 0; i < res->n_outs; i++)
        if (res->outs[i].spec == &mp_probe_stats[stat].outs[k]) return res->outs[i].x;
    return NULL;
}

/* The outputs of the rows of the statistics a holds, computed from its sums into res->outs. */
static int probe_outs_fill(MpProbeResult *res, const MpProbeAcc *a, MpErr *e) {
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        for (int k = 0; k < MP_PROBE_STAT_OUTS && mp_probe_stats[id].outs[k].file; k++) {
            const MpProbeOutSpec *o = &mp_probe_stats[id].outs[k];
            if (!mp_probe_acc_has(a, id) || (o->per_head && !a->per_head)) continue;
            MpProbeOut *r = &res->outs[res->n_outs];
            r->spec = o, r->stat = id;
            r->ndim = mp_probe_shape_dims(a, o->shape, r->shape);
            size_t n = 1;
            for (int d = 0; d < r->ndim; d++) n *= (size_t)r->shape[d];
            if (!(r->x = mp_try_malloc(n * sizeof(double))))
                return mp_err_set(e, "out of memory for %s (%zu values)", o->file, n);
            res->n_outs++;
            o->fill(a, r->x);
        }
    return MP_OK;
}

/* ================================================================ result */


static json_t *probe_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

const char *mp_probe_n_warning(char *buf, size_t cap, int64_t n) {
    if (n >= MP_SIGNIF_MIN_N) snprintf(buf, cap, "%s", "");
    else snprintf(buf, cap, "N = %lld sequences is too few for the standard errors to mean much (block z, rms/noise and "
                            "the noise levels are rough below %d): no residue is called resolved", (long long)n, MP_SIGNIF_MIN_N);
    return buf;
}

/* [L] numbers of the significance table as a JSON array (non-finite: null). */
static json_t *signif_series(const MpProbeResult *res, size_t off, int region) {
    json_t *a = json_array();
    for (int l = 0; l < res->L; l++) {
        const char *sg = (const char *)&res->sig[l];
        const double v = region < 0 ? *(const double *)(sg + off) : ((const double *)(sg + off))[region];
        json_array_append_new(a, probe_real(v));
    }
    return a;
}

/* meta.json: is each layer's residue resolved at this N (and where), the noise levels of the block
 * tests, N needed, the noise-corrected NRI (docs/metrics.md, "Is a residue resolved?"). */
static void probe_meta_signif(json_t *j, const MpProbeResult *res) {
    static const char *rname[MP_PROBE_NREGIONS] = {NULL, "first_keys", "last_queries", "last_keys", "interior"};
    const int L = res->L;
    json_t *rv = json_array(), *rr = json_object();
    for (int l = 0; l < L; l++) json_array_append_new(rv, json_boolean(res->sig[l].resolved[0]));
    json_object_set_new(j, "residue_resolved", rv);
    json_t *nz = json_object();
    json_object_set_new(nz, "block_z", signif_series(res, offsetof(MpProbeSignif, noise), 0));
    json_object_set_new(nz, "block_z_spread", signif_series(res, offsetof(MpProbeSignif, spread), 0));
    json_object_set_new(nz, "block_z_threshold", signif_series(res, offsetof(MpProbeSignif, threshold), 0));
    json_t *reg = json_object();
    for (int g = 1; g < MP_PROBE_NREGIONS; g++) {
        json_t *o = json_object(), *b = json_array();
        json_object_set_new(o, "block_z", signif_series(res, offsetof(MpProbeSignif, noise), g));
        json_object_set_new(o, "block_z_threshold", signif_series(res, offsetof(MpProbeSignif, threshold), g));
        json_object_set_new(reg, rname[g], o);
        for (int l = 0; l < L; l++) json_array_append_new(b, json_boolean(res->sig[l].resolved[g]));
        json_object_set_new(rr, rname[g], b);
    }
    json_object_set_new(nz, "regions", reg);
    json_object_set_new(j, "residue_noise", nz);
    json_object_set_new(j, "residue_regions_resolved", rr);
    json_object_set_new(j, "residue_n_needed", signif_series(res, offsetof(MpProbeSignif, n_needed), -1));
    json_object_set_new(j, "nri_corrected", signif_series(res, offsetof(MpProbeSignif, nri_corr), -1));
    json_object_set_new(j, "map_noise_share", signif_series(res, offsetof(MpProbeSignif, map_noise), -1));
    char d[512];
    snprintf(d, sizeof d,
             "residue_resolved: block z above its noise level (block_z: rms of the block z of %d sign-flipped sums, each "
             "sequence's block means times its own sign; spread: their standard deviation; threshold = noise + %g spreads) "
             "with N >= %d; a region likewise within a resolved layer; residue_n_needed: N at which block z would cross the "
             "threshold (z^2 - noise^2 grows like N); nri_corrected: the NRI with the noise power of the mean map taken out "
             "of numerator and denominator (docs/metrics.md)",
             MP_PROBE_FLIPS, MP_SIGNIF_SIGMAS, MP_SIGNIF_MIN_N);
    json_object_set_new(j, "residue_resolved_of", json_string(d));
    if (mp_probe_n_warning(d, sizeof d, res->n)[0]) json_object_set_new(j, "warning", json_string(d));
}


/* The result's half of meta.json: the files, the statistics, block tests, and each statistic's. */
static void probe_meta_stats(json_t *j, const MpProbeResult *res) {
    const int L = res->L;
    json_t *fj = json_object();
    json_object_set_new(fj, "scores.npy", json_string("float64 [L,S,S] mean pre-softmax score over sequences and heads, row = query, column = key; NaN where masked"));
    json_object_set_new(fj, "scores_diagnorm.npy", json_string("float64 [L,S,S] scores minus the mean of their diagonal (i-j)"));
    json_object_set_new(fj, "scores_se.npy", json_string("float64 [L,S,S] standard error of each entry of scores.npy: sample standard deviation over sequences of the head-mean score / sqrt(N); NaN where masked or N < 2"));
    if (res->heads) {
        const char *dt = res->heads_f64 ? "float64" : "float32";
        char d[256];
        snprintf(d, sizeof d, "%s [L,H,S,S] mean over sequences per query head (summed in double; --heads-f64: float64)", dt);
        json_object_set_new(fj, "scores_heads.npy", json_string(d));
        snprintf(d, sizeof d, "%s [L,H,S,S] standard error of each entry of scores_heads.npy: sample standard deviation "
                              "over sequences of the head's score / sqrt(N); NaN where masked or N < 2", dt);
        json_object_set_new(fj, "scores_heads_se.npy", json_string(d));
    }
    json_object_set_new(j, "files", fj);
    json_object_set_new(j, "stats", mp_job_stats_json(res->stats, res->layers, L));
    json_t *bz = json_array();
    for (int l = 0; l < L; l++) json_array_append_new(bz, probe_real(res->block_z[l]));
    json_object_set_new(j, "residue_block_z", bz);
    static const char *rname[MP_PROBE_NREGIONS] = {NULL, "first_keys", "last_queries", "last_keys", "interior"};
    json_t *rz = json_object();
    for (int g = 1; g < MP_PROBE_NREGIONS; g++) {
        json_t *arr = json_array();
        for (int l = 0; l < L; l++) json_array_append_new(arr, probe_real(res->block_z_regions[(size_t)g * L + l]));
        json_object_set_new(rz, rname[g], arr);
    }
    json_object_set_new(j, "residue_block_z_regions", rz);
    json_object_set_new(j, "residue_block_z_regions_of",
                        json_string("the block test per layer over one region of the 16x16 block grid: the first "
                                    "column of blocks (first keys), the last row (last queries), the last column "
                                    "(last keys; without the mask only), the interior (none of these, nor the first row)"));
    json_object_set_new(j, "residue_block_z_of",
                        json_string("per layer: sqrt(mean over a 16x16 grid of blocks of (block mean of the diagonal-mean "
                                    "normalised residue / its standard error over sequences)^2); about 1 for noise"));
    probe_meta_signif(j, res);
    for (int id = 0; id < MP_PROBE_NSTATS; id++) { /* each statistic's outputs, then its own keys */
        if (!res_has(res, id)) continue;
        for (int i = 0; i < res->n_outs; i++)
            if (res->outs[i].stat == id) json_object_set_new(fj, res->outs[i].spec->file, json_string(res->outs[i].spec->of));
        if (probe_stat_outs[id].meta) probe_stat_outs[id].meta(j, res);
    }
}

int mp_probe_result_fill(MpProbeResult *res, const MpProbeAcc *a, json_t *meta_run, MpErr *e) {
    const int L = a->L, S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    res->mean = mp_try_malloc(SS * L * sizeof(double));
    res->diagnorm = mp_try_malloc(SS * L * sizeof(double));
    res->se = mp_try_malloc(SS * L * sizeof(double));
    res->heads = a->per_head ? mp_try_malloc(SS * L * H * sizeof(double)) : NULL;
    res->heads_se = a->per_head ? mp_try_malloc(SS * L * H * sizeof(double)) : NULL;
    res->stats = mp_try_calloc((size_t)L, sizeof *res->stats);
    res->block_z = mp_try_malloc((size_t)L * sizeof(double));
    res->block_z_regions = mp_try_malloc((size_t)L * MP_PROBE_NREGIONS * sizeof(double));
    res->sig = mp_try_calloc((size_t)L, sizeof *res->sig);
    double *scratch = a->skip ? mp_try_malloc(3 * SS * sizeof(double)) : NULL;
    if (!res->mean || !res->diagnorm || !res->se || (a->per_head && (!res->heads || !res->heads_se)) || !res->stats || !res->block_z ||
        !res->block_z_regions || !res->sig || (a->skip && !scratch)) {
        free(scratch);
        json_decref(meta_run);
        return mp_err_set(e, "out of memory for the result maps (%d layers, S=%d)", L, S);
    }
    mp_probe_acc_mean(a, res->mean, res->heads);
    mp_probe_acc_se(a, res->se);
    if (a->per_head) mp_probe_acc_se_heads(a, res->heads_se);
    mp_probe_layer_stats(res->stats, res->diagnorm, res->mean, res->se, a->n_done >= 2, L, S, a->skip, scratch);
    free(scratch);
    for (int l = 0; l < L; l++) {
        res->block_z[l] = mp_probe_acc_block_z(a, l);
        res->block_z_regions[l] = NAN;
        for (int g = 1; g < MP_PROBE_NREGIONS; g++) res->block_z_regions[(size_t)g * L + l] = mp_probe_acc_block_z_region(a, l, g);
        mp_probe_signif(&res->sig[l], a, l, &res->stats[l]);
    }
    res->lengths = mp_probe_acc_has(a, MP_PROBE_STAT_LENGTHS);
    res->meta = meta_run;
    res->stat_set = a->stats;
    if (probe_outs_fill(res, a, e) != MP_OK) return MP_ERR;
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (res_has(res, id) && probe_stat_outs[id].fill && probe_stat_outs[id].fill(res, a, e) != MP_OK) return MP_ERR;
    probe_meta_stats(res->meta, res);
    res->complete = 1;
    return MP_OK;
}

void mp_probe_result_free(MpProbeResult *res) {
    free(res->mean);
    free(res->diagnorm);
    free(res->se);
    free(res->heads);
    free(res->heads_se);
    free(res->stats);
    free(res->block_z);
    free(res->block_z_regions);
    free(res->sig);
    for (int i = 0; i < res->n_outs; i++) free(res->outs[i].x);
    for (int id = 0; id < MP_PROBE_NSTATS; id++) /* each accepts its zeroed results */
        if (probe_stat_outs[id].free) probe_stat_outs[id].free(res);
    if (res->meta) json_decref(res->meta);
    memset(res, 0, sizeof *res);
}

/* ================================================================ print */

/* "N ≈ 1234" (or "—") into buf: the sequences a layer's residue needs. */
static const char *probe_n_needed(char *buf, size_t cap, const MpProbeSignif *sg) {
    if (!isfinite(sg->n_needed)) snprintf(buf, cap, "-");
    else if (sg->n_needed > 1e9) snprintf(buf, cap, ">1e9");
    else snprintf(buf, cap, "%.0f", sg->n_needed);
    return buf;
}

void mp_probe_result_print(FILE *f, const MpProbeResult *res) {
    const int L = res->L, S = res->S;
    const MpPosStats *st = res->stats;
    char w[512], nn[32];
    if (mp_probe_n_warning(w, sizeof w, res->n)[0]) fprintf(f, "warning: %s\n", w);
    if (res->skip)
        fprintf(f, "every sequence starts with BOS (id %d): the statistics below are over positions 1..%d (the maps "
                   "keep BOS)\n", res->bos_id, S - 1);
    fprintf(f, "%6s %10s %9s %13s %13s %12s %10s %8s %9s %9s %9s %11s %12s\n", "layer", "NRI", "NRI corr", "residue min",
            "residue max", "residue rms", "rms/noise", "block z", "z needed", "resolved", "N needed", "rising rows",
            "mean slope");
    for (int l = 0; l < L; l++) {
        const MpProbeSignif *sg = &res->sig[l];
        if (!st[l].observed) fprintf(f, "%6d %10s  no finite entries: no statistic\n", res->layers[l] + 1, "nan");
        else fprintf(f, "%6d %10.6f %9.4f %13.5f %13.5f %12.6f %10.2f %8.2f %9.2f %9s %9s %10.1f%% %12.3e\n", res->layers[l] + 1,
                     st[l].nri, sg->nri_corr, st[l].res_min, st[l].res_max, st[l].res_rms, st[l].z_rms, res->block_z[l],
                     sg->threshold[0], sg->resolved[0] ? "yes" : "NO", probe_n_needed(nn, sizeof nn, sg),
                     100 * st[l].rise_share, st[l].mean_slope);
    }
    fprintf(f, "resolved: block z above its noise level at N = %lld (z needed = the noise level of %d sign-flipped sums + "
               "%g spreads); N needed: where a residue of this size would cross it (docs/metrics.md)\n",
            (long long)res->n, MP_PROBE_FLIPS, MP_SIGNIF_SIGMAS);
    for (int id = 0; id < MP_PROBE_NSTATS; id++)
        if (res_has(res, id) && probe_stat_outs[id].print) probe_stat_outs[id].print(f, res);
}

/* ================================================================ write */

/* scores_diagnorm.png: every selected layer, diagonal-normalised (the fig5 preset: vlag centred on
 * 0, limits ±max(|1st|, |99th| percentile) per layer); its entry in files names the limits. */
static int probe_plot(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    const size_t SS = (size_t)res->S * res->S;
    const int np = res->L;
    MpPlotOptions o;
    mp_plot_options_default(&o);
    if (mp_plot_preset_apply(&o, "fig5", e) != MP_OK) return MP_ERR;
    o.cols = np <= 6 ? np : 4; /* stories260K's 5 layers in one row */
    MpPlotPanel *pn = calloc((size_t)np, sizeof *pn);
    double(*lim)[2] = calloc((size_t)np, sizeof *lim);
    char *desc = malloc(256 + (size_t)np * 48);
    if (!pn || !lim || !desc) {
        free(pn), free(lim), free(desc);
        return mp_err_set(e, "%s: out of memory for the figure", dir);
    }
    for (int l = 0; l < np; l++) {
        pn[l].map = res->mean + l * SS;
        pn[l].rows = pn[l].cols = res->S;
        snprintf(pn[l].title, sizeof pn[l].title, "Layer %d", res->layers[l] + 1);
        const MpProbeSignif *sg = &res->sig[l];
        pn[l].unresolved = mp_signif_note(pn[l].note, sizeof pn[l].note, "block z", res->block_z[l], sg->threshold[0],
                                          sg->resolved[0], res->n, sg->n_needed);
    }
    snprintf(o.title, sizeof o.title, "%.200s%s%s", res->title, res->causal ? "" : ", bidirectional",
             res->rope ? "" : ", no RoPE");
    char path[4096];
    int rc = MP_OK;
    if (mp_path_join(path, sizeof path, dir, "scores_diagnorm.png", e) != MP_OK || mp_plot_render_ex(path, pn, np, &o, lim, e) != MP_OK)
        rc = MP_ERR;
    if (rc == MP_OK) {
        int w = snprintf(desc, 256, "figure: diagonal-normalised residue of every selected layer, vlag centred on 0, "
                                    "symmetric limits +-max(|1st|, |99th| percentile):");
        for (int l = 0; l < np; l++)
            w += snprintf(desc + w, 48, " layer %d +-%.3g%s", res->layers[l] + 1, lim[l][1], l + 1 < np ? "," : "");
        json_object_set_new(files, "scores_diagnorm.png", json_string(desc));
    }
    free(pn), free(lim), free(desc);
    return rc;
}

/* One per-head array [L,H,S,S] (summed in double): float32 unless res->heads_f64. */
static int probe_write_heads(const MpProbeResult *res, const char *dir, const char *name, const double *x, MpErr *e) {
    const int64_t shp[4] = {res->L, res->H, res->S, res->S};
    char path[4096];
    if (mp_path_join(path, sizeof path, dir, name, e) != MP_OK) return MP_ERR;
    if (res->heads_f64) return mp_npy_write(path, MP_DT_F64, x, 4, shp, e);
    const size_t n = (size_t)res->L * res->H * res->S * res->S;
    float *f = mp_try_malloc(n * sizeof *f);
    if (!f) return mp_err_set(e, "%s: out of memory for %zu float32 values", path, n);
    for (size_t k = 0; k < n; k++) f[k] = (float)x[k];
    const int rc = mp_npy_write(path, MP_DT_F32, f, 4, shp, e);
    free(f);
    return rc;
}

/* The score maps: scores.npy, scores_diagnorm.npy, scores_se.npy, scores_heads.npy, scores_heads_se.npy;
 * then every output of the statistics' rows, float64. */
static int probe_write_maps(const MpProbeResult *res, const char *dir, MpErr *e) {
    const int64_t shp[3] = {res->L, res->S, res->S};
    static const char *names[3] = {"scores.npy", "scores_diagnorm.npy", "scores_se.npy"};
    const double *maps[3] = {res->mean, res->diagnorm, res->se};
    char path[4096];
    for (int k = 0; k < 3; k++)
        if (mp_path_join(path, sizeof path, dir, names[k], e) != MP_OK || mp_npy_write(path, MP_DT_F64, maps[k], 3, shp, e) != MP_OK)
            return MP_ERR;
    if (res->heads && (probe_write_heads(res, dir, "scores_heads.npy", res->heads, e) != MP_OK ||
                       probe_write_heads(res, dir, "scores_heads_se.npy", res->heads_se, e) != MP_OK))
        return MP_ERR;
    for (int i = 0; i < res->n_outs; i++)
        if (mp_path_join(path, sizeof path, dir, res->outs[i].spec->file, e) != MP_OK ||
            mp_npy_write(path, MP_DT_F64, res->outs[i].x, res->outs[i].ndim, res->outs[i].shape, e) != MP_OK)
            return MP_ERR;
    return MP_OK;
}

int mp_probe_result_write(const MpProbeResult *res, const char *dir, const MpJobWriteOptions *o, MpErr *e) {
    if (!res->complete) return mp_err_set(e, "%s: no probe result to write", dir);
    const MpJobWriteOptions none = {0};
    if (!o) o = &none;
    char path[4096];
    if (mp_mkdir_p(dir, e) != MP_OK || mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK) return MP_ERR;
    remove(path); /* meta.json marks a complete result: drop a stale one first */
    if (probe_write_maps(res, dir, e) != MP_OK) return MP_ERR;
    json_t *j = json_deep_copy(res->meta);
    if (!j) return mp_err_set(e, "%s: out of memory for meta.json", dir);
    json_t *files = json_object_get(j, "files");
    int rc = o->plot ? probe_plot(res, dir, files, e) : MP_OK;
    for (int id = 0; id < MP_PROBE_NSTATS && rc == MP_OK && o->plot; id++)
        if (res_has(res, id) && probe_stat_outs[id].figures) rc = probe_stat_outs[id].figures(res, dir, files, e);
    if (o->plot) mp_plot_release(); /* after the last figure: the probability and length figures too */
    if (rc == MP_OK) {
        mp_json_add_provenance(j, o->argc, o->argv, o->wall_s);
        if (mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK || mp_json_write_atomic(path, j, e) != MP_OK)
            rc = MP_ERR;
    }
    json_decref(j);
    if (rc == MP_OK && mp_path_join(path, sizeof path, dir, "checkpoint.bin", e) == MP_OK)
        remove(path); /* the result is complete */
    return rc;
}

char *mp_probe_result_meta_dump(const MpProbeResult *res) {
    if (!res->meta) return NULL;
    return json_dumps(res->meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
}
