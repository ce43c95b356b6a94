/* stage_beyond.c — reproduce's stage "beyond" (issue 38: positional information beyond the score
 * maps): the variance of the attention output by position (Chi et al. 2023, arXiv 2305.13571) and
 * RoPE frequency usage (Barbero et al. 2025, arXiv 2410.06205) and the position probe (Haviv et al.
 * 2022, arXiv 2203.16634); docs/metrics.md.
 *
 * Implements: the stage: `probe --stats variance,position` (every layer; with freq on the RoPE models) of a randomly initialised NoPE
 * model (mkmodel's llama, 4 layers, d 128, its RoPE switched off) over the embedded corpus's bytes,
 * causal and without the mask; of the embedded NoPE and RoPE models over the same text; of
 * stories260K over the stories stage's corpus; and the parameter-free decoder's simulated variance
 * at layer 1 against its closed forms (`simulate --variance`). Its report part: the verdict rows,
 * every number from this run's outputs.
 * Does not: compute a variance (model/probe_var.c, sim/), or change the other stages' runs.
 * Tested by: tests/test_reproduce.c (--only beyond --quick).
 * Shape legend: L layers (<= VR_MAX_L), S positions.
 *
 * ================================================================ layout
 *   runs            the probes (folders under beyond/) and what each row reads from them
 *   inputs          the random model and the byte ids, written once (their fingerprints key the probes)
 *   simulation      layer 1 of the parameter-free decoder at D = 32768 against both closed forms
 *   report          the rows
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "core/json.h"        /* mp_json_read, MP_VERSION */
#include "core/npy.h"         /* mp_npy_write */
#include "core/util.h"        /* mp_file_exists, mp_mkdir_p */
#include "job/sim_out.h"      /* mp_sim_write_outputs */
#include "load/mkmodel.h"     /* mp_mk_write */
#include "repro/ctx.h"        /* MpReproCtx, mp_repro_state, mp_repro_fail */
#include "repro/expect.h"     /* mp_repro_expect_v */
#include "repro/pretrained.h" /* mp_repro_corpus_stories */
#include "repro/runs.h"       /* mp_repro_probe */
#include "repro/stage.h"      /* MpReproStage */
#include "model/probe_pos.h"  /* MP_PROBE_POS_*: pos_probe.npy's columns */
#include "repro/store.h"      /* mp_repro_store_f64, mp_repro_store_meta_same, mp_repro_store_meta_mark */

#define VR_MAX_L 8     /* layers read per run (stories260K has 5) */
#define VR_SEQ 128     /* tokens per row of the byte-level runs */
#define VR_EARLY 16    /* the early slope: positions 1 .. VR_EARLY - 1 */

/* ================================================================ runs */

enum { VR_RANDOM, VR_RANDOM_BIDIR, VR_NONE, VR_NONE_BIDIR, VR_ROPE, VR_STORIES, VR_NRUNS };

static const struct {
    const char *dir, *label;
} vr_runs[VR_NRUNS] = {
    [VR_RANDOM] = {"beyond/random_nope", "random-init NoPE model (4 layers, d 128)"},
    [VR_RANDOM_BIDIR] = {"beyond/random_nope_bidirectional", "random-init NoPE model, no mask"},
    [VR_NONE] = {"beyond/none", "embedded NoPE model"},
    [VR_NONE_BIDIR] = {"beyond/none_bidirectional", "embedded NoPE model, no mask"},
    [VR_ROPE] = {"beyond/rope", "embedded RoPE model"},
    [VR_STORIES] = {"beyond/stories260K", "stories260K (pretrained, RoPE)"},
};

typedef struct VrRun {
    int ok, L;
    int64_t n;
    double slope[VR_MAX_L], se[VR_MAX_L]; /* meta.json variance_slope_attn(_se): positions 1.. */
    double early[VR_MAX_L];               /* least-squares log-log slope over positions 1 .. VR_EARLY-1 */
    int freq;                             /* the run has --stats freq: */
    double q_low[VR_MAX_L];               /* meta.json freq_low_half_q_norm_share */
    int top[VR_MAX_L], pairs;             /* freq_top_pair, freq_pairs */
    double r2[VR_MAX_L], mae[VR_MAX_L], mae_se[VR_MAX_L], mae_chance[VR_MAX_L]; /* pos_probe.npy (--stats position) */
} VrRun;

typedef struct MpReproBeyond {
    int ran;
    VrRun run[VR_NRUNS];
    int sim_ok, sim_S;
    int64_t sim_B;
    int sim_D;
    double sim_gap_z, sim_formula_z; /* max over positions of |sim − closed| / se, |sim − formula| / se */
} MpReproBeyond;

static MpReproBeyond *beyond_state(MpReproCtx *c) { return mp_repro_state(c, "beyond", sizeof(MpReproBeyond), NULL); }

/* The log-log least-squares slope of v[i] against i + 1 over positions [a, b). */
static double vr_loglog(const double *v, int a, int b) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int n = 0;
    for (int i = a; i < b; i++) {
        if (!(v[i] > 0)) continue;
        const double x = log(i + 1.0), y = log(v[i]);
        sx += x, sy += y, sxx += x * x, sxy += x * y;
        n++;
    }
    const double d = n * sxx - sx * sx;
    return n >= 2 && d > 0 ? (n * sxy - sx * sy) / d : NAN;
}

/* Reads a finished probe's slopes (meta.json) and its var_attn.npy (the early slopes). */
static int vr_read(VrRun *r, const char *dir) {
    char path[4300];
    MpErr e;
    snprintf(path, sizeof path, "%s/meta.json", dir);
    json_t *m = mp_json_read(path, &e);
    json_t *s = json_object_get(m, "variance_slope_attn"), *se = json_object_get(m, "variance_slope_attn_se");
    const size_t L = json_array_size(s);
    int rc = m && L >= 1 && L <= VR_MAX_L && json_array_size(se) == L ? MP_OK : MP_ERR;
    for (size_t l = 0; rc == MP_OK && l < L; l++) {
        json_t *a = json_array_get(s, l), *b = json_array_get(se, l);
        r->slope[l] = json_is_number(a) ? json_number_value(a) : NAN;
        r->se[l] = json_is_number(b) ? json_number_value(b) : NAN;
    }
    json_t *fq = json_object_get(m, "freq_low_half_q_norm_share"), *ft = json_object_get(m, "freq_top_pair");
    r->freq = fq != NULL;
    if (r->freq && (json_array_size(fq) != L || json_array_size(ft) != L)) rc = MP_ERR;
    for (size_t l = 0; rc == MP_OK && r->freq && l < L; l++) {
        json_t *a = json_array_get(fq, l);
        r->q_low[l] = json_is_number(a) ? json_number_value(a) : NAN;
        r->top[l] = (int)json_integer_value(json_array_get(ft, l));
    }
    r->pairs = (int)json_integer_value(json_object_get(m, "freq_pairs"));
    json_decref(m);
    double *v = NULL;
    int64_t sh[2];
    if (rc == MP_OK && (mp_repro_store_f64(&v, sh, dir, "var_attn.npy", 2, &e) != MP_OK || sh[0] != (int64_t)L || sh[1] < VR_EARLY))
        rc = MP_ERR;
    for (size_t l = 0; rc == MP_OK && l < L; l++) r->early[l] = vr_loglog(v + l * (size_t)sh[1], 1, VR_EARLY);
    free(v);
    double *pp = NULL; /* the position probe, [L, MP_PROBE_POS_COLS] */
    if (rc == MP_OK && (mp_repro_store_f64(&pp, sh, dir, "pos_probe.npy", 2, &e) != MP_OK || sh[0] != (int64_t)L ||
                        sh[1] != MP_PROBE_POS_COLS))
        rc = MP_ERR;
    for (size_t l = 0; rc == MP_OK && l < L; l++) {
        const double *row = pp + l * MP_PROBE_POS_COLS;
        r->r2[l] = row[MP_PROBE_POS_R2], r->mae[l] = row[MP_PROBE_POS_MAE], r->mae_se[l] = row[MP_PROBE_POS_MAE_SE];
        r->mae_chance[l] = row[MP_PROBE_POS_MAE_CHANCE];
    }
    free(pp);
    if (rc != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: %s: no complete variance and position statistics\n", dir);
        return MP_ERR;
    }
    r->L = (int)L;
    r->ok = 1;
    return MP_OK;
}

/* Run k (S tokens a row, for the log) of spec. */
static int vr_probe(MpReproCtx *c, int k, const MpReproProbeSpec *spec, int S) {
    VrRun *r = &beyond_state(c)->run[k];
    printf("  beyond  %-34s every layer over %lld x %d tokens%s\n", vr_runs[k].dir + 7, (long long)spec->n, S,
           spec->causal ? "" : ", no mask");
    fflush(stdout);
    MpReproMaps *m = NULL;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", c->out, vr_runs[k].dir);
    r->n = spec->n;
    if (mp_repro_probe(c, spec, &m) != MP_OK || vr_read(r, dir) != MP_OK) return mp_repro_fail(c, vr_runs[k].dir);
    return 0;
}

/* ================================================================ inputs */

/* out/beyond/random_llama_L4_d128_seed1: mkmodel's llama with these settings (written once: its
 * files' fingerprint keys the probes that read it). */
static int vr_random_model(MpReproCtx *c, char *path, size_t cap) {
    MpErr e;
    snprintf(path, cap, "%s/beyond/random_llama_L4_d128_seed1", c->out);
    char cfg[4400];
    snprintf(cfg, sizeof cfg, "%s/config.json", path);
    if (mp_file_exists(cfg)) return MP_OK;
    MpMkSpec s;
    mp_mk_spec_default(&s);
    s.arch = MP_ARCH_LLAMA;
    s.layers = 4, s.dim = 128, s.heads = 4, s.kv_heads = 4, s.vocab = 256, s.seed = 1;
    mp_mk_spec_family(&s, 1, 0);
    if (mp_mk_check(&s, &e) != MP_OK || mp_mk_write(&s, path, &e) != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: stage beyond: the random model: %s\n", e.msg);
        return MP_ERR;
    }
    return MP_OK;
}

/* out/beyond/kjv_bytes_NxS.npy: the first n·S bytes of the corpus as int32 ids (the random
 * model's vocabulary is the 256 byte values; written once). */
static int vr_byte_ids(MpReproCtx *c, const char *corpus, int64_t n, char *path, size_t cap) {
    MpErr e;
    snprintf(path, cap, "%s/beyond/kjv_bytes_%lldx%d.npy", c->out, (long long)n, VR_SEQ);
    if (mp_file_exists(path)) return MP_OK;
    FILE *f = fopen(corpus, "rb");
    const size_t want = (size_t)n * VR_SEQ;
    int32_t *ids = malloc(want * sizeof *ids);
    unsigned char *b = malloc(want);
    const size_t got = f && ids && b ? fread(b, 1, want, f) : 0;
    if (f) fclose(f);
    for (size_t i = 0; i < got; i++) ids[i] = b[i];
    const int64_t shape[2] = {n, VR_SEQ};
    const int rc = got == want && mp_npy_write(path, MP_DT_I32, ids, 2, shape, &e) == MP_OK ? MP_OK : MP_ERR;
    if (rc != MP_OK)
        fprintf(stderr, "maskpos reproduce: error: stage beyond: %s: %s\n", got == want ? path : corpus,
                got == want ? e.msg : "shorter than the bytes the random model's run needs");
    free(ids), free(b);
    return rc;
}

/* ================================================================ simulation */

/* Layer 1 of the parameter-free decoder (α 0, L2 rows, scale 1, causal) with the variance maps at
 * D = 32768: the simulated variance against the per-sequence closed form σ²·Σ_j a_ij² (var_gap_se)
 * and against the infinite-width value of uniform unit rows, (e² + i − 1) / (e + i − 1)² / D for a
 * query seeing i keys (its own score 1, the others 0). */
static int vr_sim(MpReproCtx *c) {
    MpReproBeyond *st = beyond_state(c);
    static const char *rel = "beyond/sim_layer1_D32768";
    char dir[4200], settings[256];
    MpErr e;
    snprintf(dir, sizeof dir, "%s/%s", c->out, rel);
    MpSimConfig s = c->cfg->base;
    s.dim = 32768, s.seq = 16, s.layers = 1, s.batch = c->cfg->quick ? 100 : 300, s.alpha = 0, s.scale = 1, s.rope = 0;
    s.causal = 1, s.variance = 1, s.norm = MP_NORM_L2, s.residual = 1;
    snprintf(settings, sizeof settings, "v%s variance B=%lld S=%d D=%d seed=%llu", MP_VERSION, (long long)s.batch, s.seq, s.dim,
             (unsigned long long)s.seed);
    st->sim_S = s.seq, st->sim_B = s.batch, st->sim_D = s.dim;
    json_t *same = c->cfg->force ? NULL : mp_repro_store_meta_same(dir, settings);
    if (same) {
        json_decref(same);
        printf("  beyond  %-34s up to date, skipped (--force to redo)\n", "sim_layer1_D32768");
    } else {
        printf("  beyond  %-34s layer 1 of the parameter-free decoder, D = %d, B = %lld\n", "sim_layer1_D32768", s.dim,
               (long long)s.batch);
        fflush(stdout);
        MpSimResult r;
        memset(&r, 0, sizeof r);
        if (mp_sim_run(&r, &s, &e) != MP_OK || mp_sim_write_outputs(dir, &s, "1", &r, 0, c->cfg->argc, c->cfg->argv, &e) != MP_OK) {
            fprintf(stderr, "maskpos reproduce: error: stage %s: %s\n", rel, e.msg);
            if (r.scores) mp_sim_result_free(&r);
            return mp_repro_fail(c, rel);
        }
        mp_sim_result_free(&r);
        mp_repro_store_meta_mark(dir, settings);
    }
    double *v = NULL, *se = NULL, *cl = NULL, *gap = NULL;
    int64_t sh[4][2];
    int rc = mp_repro_store_f64(&v, sh[0], dir, "var_attn.npy", 2, &e) | mp_repro_store_f64(&se, sh[1], dir, "var_attn_se.npy", 2, &e) |
             mp_repro_store_f64(&cl, sh[2], dir, "var_closed.npy", 2, &e) | mp_repro_store_f64(&gap, sh[3], dir, "var_gap_se.npy", 2, &e);
    for (int k = 0; rc == MP_OK && k < 4; k++)
        if (sh[k][0] != 1 || sh[k][1] != s.seq) rc = MP_ERR;
    st->sim_gap_z = st->sim_formula_z = 0;
    for (int i = 1; rc == MP_OK && i < s.seq; i++) { /* position 0: its own key alone, variance 1/D exactly */
        const double keys = i + 1.0, e1 = exp(1.0), formula = (e1 * e1 + keys - 1) / ((e1 + keys - 1) * (e1 + keys - 1)) / s.dim;
        st->sim_gap_z = fmax(st->sim_gap_z, fabs(v[i] - cl[i]) / gap[i]);
        st->sim_formula_z = fmax(st->sim_formula_z, fabs(v[i] - formula) / se[i]);
    }
    free(v), free(se), free(cl), free(gap);
    if (rc != MP_OK) {
        fprintf(stderr, "maskpos reproduce: error: %s: no complete variance maps\n", dir);
        return mp_repro_fail(c, rel);
    }
    st->sim_ok = 1;
    return 0;
}

/* ================================================================ the stage */

static int beyond_run(MpReproCtx *c) {
    MpReproBeyond *st = beyond_state(c);
    const MpReproConfig *cfg = c->cfg;
    st->ran = 1;
    int failed = vr_sim(c);
    const int64_t n = cfg->model_n ? cfg->model_n : cfg->quick ? 32 : 64;
    char model[4300], corpus[4300], ids[4300];
    if (!cfg->models) {
        fprintf(stderr, "maskpos reproduce: error: stage beyond: the embedded models were not found; HINT: --models DIR\n");
        failed += mp_repro_fail(c, "beyond");
    } else {
        snprintf(corpus, sizeof corpus, "%s/kjv.txt", cfg->models);
        MpErr e;
        char vdir[4200];
        snprintf(vdir, sizeof vdir, "%s/beyond", c->out);
        if (mp_mkdir_p(vdir, &e) != MP_OK || vr_random_model(c, model, sizeof model) != MP_OK ||
            vr_byte_ids(c, corpus, n, ids, sizeof ids) != MP_OK)
            failed += mp_repro_fail(c, "beyond/random_nope");
        else
            for (int k = VR_RANDOM; k <= VR_RANDOM_BIDIR; k++) {
                const MpReproProbeSpec spec = {.dir = vr_runs[k].dir, .model = model, .tokens = ids, .n = n, .causal = k == VR_RANDOM,
                                               .layers = "all", .stats = "variance,position", .no_rope = 1};
                failed += vr_probe(c, k, &spec, VR_SEQ);
            }
        for (int k = VR_NONE; k <= VR_ROPE; k++) {
            char m[4300];
            snprintf(m, sizeof m, "%s/%s", cfg->models, k == VR_ROPE ? "rope" : "none");
            const MpReproProbeSpec spec = {.dir = vr_runs[k].dir, .model = m, .data = corpus, .n = n, .seq = VR_SEQ,
                                           .causal = k != VR_NONE_BIDIR, .pack = 1, .layers = "all",
                                           .stats = k == VR_ROPE ? "variance,freq,position" : "variance,position"};
            failed += vr_probe(c, k, &spec, VR_SEQ);
        }
    }
    MpReproCorpus cp; /* stories260K over the stories stage's corpus (generated here when that stage has not run) */
    if (mp_repro_corpus_stories(c, &cp) != MP_OK) return failed + mp_repro_fail(c, vr_runs[VR_STORIES].dir);
    const int64_t want = cfg->quick ? 64 : 200; /* 16 leave layer 1's slope (-0.02) within 3 se of 0 */
    const int64_t ns = cp.n < want ? cp.n : want;
    const MpReproProbeSpec spec = {.dir = vr_runs[VR_STORIES].dir, .model = cfg->stories, .tokens = cp.ids, .n = ns, .causal = 1,
                                   .layers = "all", .stats = "variance,freq,position"};
    return failed + vr_probe(c, VR_STORIES, &spec, cp.seq);
}

/* ================================================================ report */

/* "−0.285 ± 0.007, …" of the slopes of r (or the early ones, se NULL) */
static void vr_slopes(char *buf, size_t cap, const VrRun *r, int l0, int l1, int early) {
    size_t u = 0;
    buf[0] = '\0';
    for (int l = l0; l < l1 && l < r->L && u < cap; l++)
        u += early ? (size_t)snprintf(buf + u, cap - u, "%s%d: %+.3f", l > l0 ? ", " : "", l + 1, r->early[l])
                   : (size_t)snprintf(buf + u, cap - u, "%s%d: %+.3f ± %.3f", l > l0 ? ", " : "", l + 1, r->slope[l], r->se[l]);
}

static void vr_rows_random(MpReport *rp, const MpReproBeyond *st, double sig) {
    const VrRun *a = &st->run[VR_RANDOM], *b = &st->run[VR_RANDOM_BIDIR];
    char got[512], note[512];
    if (a->ok) {
        int ok = 1;
        for (int l = 0; l < a->L; l++) ok &= a->slope[l] + sig * a->se[l] < 0;
        vr_slopes(got, sizeof got, a, 0, a->L, 0);
        snprintf(note, sizeof note, "%lld × %d bytes of the embedded corpus; Chi et al.'s setting (random, frozen, no positional "
                 "encoding). Above −1: bytes repeat, so the values are correlated and attention is not uniform", (long long)a->n, VR_SEQ);
        mp_report_row(rp, "Variance (Chi et al.): random-init causal NoPE model, attention output, log-log slope by layer",
                      "< 0 in every layer (falls with position)", got, ok, note);
    }
    if (a->ok && b->ok) {
        const double f = mp_repro_expect_v(MP_REPRO_EXPECT_FIG3_COUNTERFACTUAL, 0);
        int ok = b->L == a->L;
        for (int l = 0; ok && l < b->L; l++) ok &= fabs(b->slope[l]) < f * fabs(a->slope[l]);
        vr_slopes(got, sizeof got, b, 0, b->L, 0);
        snprintf(note, sizeof note, "the same model and bytes, --bidirectional: every query sees every key (fig3.counterfactual: "
                 "|slope| below %g of the causal one)", f);
        mp_report_row(rp, "Variance: the same model without the mask", "flat", got, ok, note);
    }
}

static void vr_rows_models(MpReport *rp, const MpReproBeyond *st, double sig) {
    const VrRun *r = &st->run[VR_NONE];
    char got[512], early[256], note[512];
    if (r->ok && r->L >= 4) {
        vr_slopes(got, sizeof got, r, 0, 2, 0);
        mp_report_row(rp, "Variance: embedded NoPE model (trained), layers 1–2", "fall (slope < 0)", got,
                      r->slope[0] + sig * r->se[0] < 0 && r->slope[1] + sig * r->se[1] < 0, "");
        vr_slopes(got, sizeof got, r, 2, 4, 0);
        vr_slopes(early, sizeof early, r, 2, 4, 1);
        snprintf(note, sizeof note, "over positions 1–%d: %s (they rise, as an independent check saw), then fall: the slope over "
                 "all positions is below 0", VR_EARLY - 1, early);
        mp_report_row(rp, "Variance: embedded NoPE model, layers 3–4", "rise (an independent check)", got,
                      r->early[2] > 0 && r->early[3] > 0, note);
    }
    r = &st->run[VR_ROPE];
    if (r->ok) {
        vr_slopes(got, sizeof got, r, 0, r->L, 0);
        mp_report_row(rp, "Variance: embedded RoPE model, attention output by layer", "layer 1 falls (the mask's averaging)", got,
                      r->slope[0] + sig * r->se[0] < 0,
                      "Chi et al.'s argument is for NoPE; RoPE leaves layer 1's averaging over more keys as it is and makes "
                      "no claim for the later layers");
    }
    r = &st->run[VR_STORIES];
    if (r->ok) {
        int falls = 0;
        for (int l = 0; l < r->L; l++) falls += r->slope[l] + sig * r->se[l] < 0;
        vr_slopes(got, sizeof got, r, 0, r->L, 0);
        snprintf(note, sizeof note, "%d of %d layers fall beyond mc.sigmas se (%lld sequences of the stories corpus); layer 1's "
                 "slope is the weakest: its attention is the most local", falls, r->L, (long long)r->n);
        mp_report_row(rp, "Variance: stories260K (pretrained, RoPE), attention output by layer", "falls in most layers", got,
                      2 * falls > r->L, note);
    }
}

/* RoPE frequency usage (Barbero et al.): in Gemma 7B the lowest frequencies carry most of the query
 * and key norm; the rows say where ours put it, and why where they differ. */
static void vr_rows_freq(MpReport *rp, const MpReproBeyond *st) {
    const int ks[2] = {VR_ROPE, VR_STORIES};
    for (int q = 0; q < 2; q++) {
        const VrRun *r = &st->run[ks[q]];
        if (!r->ok || !r->freq) continue;
        char what[192], got[512], note[640];
        size_t u = 0;
        int ok = 1;
        for (int l = 0; l < r->L && u < sizeof got; l++) {
            u += (size_t)snprintf(got + u, sizeof got - u, "%s%d: %.2f (top pair %d)", l ? ", " : "", l + 1, r->q_low[l], r->top[l]);
            ok &= r->q_low[l] > 0.5;
        }
        snprintf(what, sizeof what, "RoPE frequency usage (Barbero et al.): %s, share of the query norm in the lowest-frequency "
                 "half of its %d pairs, by layer", vr_runs[ks[q]].label, r->pairs);
        snprintf(note, sizeof note, "%s", ok ? "as in Gemma 7B: the slowly rotating pairs carry the semantic norm"
                 : "Gemma 7B (128 pairs a head, 8K context) keeps most of the norm in its lowest frequencies, which hardly "
                   "rotate over its context (semantic channels); this small model spreads it more evenly and its largest "
                   "contributions to the score come from pairs whose wavelengths are about its training rows' length: it "
                   "spends its few pairs on position (docs/metrics.md, \"RoPE frequency usage\")");
        mp_report_row(rp, what, "above 0.5 in every layer (most of the norm, as in Gemma 7B)", got, ok, note);
    }
}

/* "1: 0.96 (MAE 2.6 ± 0.1 of chance 16.0), …" of run r's position probe */
static void vr_pos_text(char *buf, size_t cap, const VrRun *r) {
    size_t u = 0;
    buf[0] = '\0';
    for (int l = 0; l < r->L && u < cap; l++)
        u += (size_t)snprintf(buf + u, cap - u, "%s%d: %.3f (MAE %.1f ± %.1f of chance %.1f)", l ? ", " : "", l + 1, r->r2[l], r->mae[l],
                              r->mae_se[l], r->mae_chance[l]);
}

/* The position probe (Haviv et al. 2022): NoPE models learn position, and a linear probe reads it
 * from the residual stream; without the mask a NoPE model cannot (permutation-equivariant). */
static void vr_rows_position(MpReport *rp, const MpReproBeyond *st) {
    const VrRun *a = &st->run[VR_NONE], *b = &st->run[VR_NONE_BIDIR], *ra = &st->run[VR_RANDOM], *rb = &st->run[VR_RANDOM_BIDIR];
    char got[640];
    if (a->ok) {
        int ok = 1;
        for (int l = 0; l < a->L; l++) ok &= a->r2[l] > 0.5;
        vr_pos_text(got, sizeof got, a);
        mp_report_row(rp, "Position probe (Haviv et al.): embedded NoPE model, held-out R² of a ridge from the residual stream",
                      "high (> 0.5 in every layer): a NoPE model learns position", got, ok,
                      "fitted on 3 of 4 sequences, scored on the rest; chance R² is 0 (docs/metrics.md, \"Position probe\")");
    }
    if (b->ok) {
        int ok = 1;
        for (int l = 0; l < b->L; l++) ok &= b->r2[l] < 0.1;
        vr_pos_text(got, sizeof got, b);
        mp_report_row(rp, "Position probe: the same model without the mask", "at chance (R² < 0.1): without the mask it is "
                      "permutation-equivariant", got, ok, "");
    }
    if (ra->ok && rb->ok && ra->L == rb->L) {
        int ok = 1;
        size_t u = 0;
        for (int l = 0; l < ra->L && u < sizeof got; l++) {
            u += (size_t)snprintf(got + u, sizeof got - u, "%s%d: %.3f against %.3f", l ? ", " : "", l + 1, ra->r2[l], rb->r2[l]);
            ok &= ra->r2[l] > rb->r2[l];
        }
        mp_report_row(rp, "Position probe: random-init NoPE model, causal against no mask, held-out R² by layer",
                      "higher with the mask in every layer (the mask alone puts position in the stream)", got, ok,
                      "untrained, so the probe reads only what the mask's averaging leaves (rising with depth)");
    }
}

static int beyond_report(MpReproCtx *c, MpReport *rp, MpErr *e) {
    (void)e;
    const MpReproBeyond *st = beyond_state(c);
    if (!st->ran) return MP_OK;
    const double sig = mp_repro_expect_v(MP_REPRO_EXPECT_MC_SIGMAS, 0);
    if (st->sim_ok) {
        char got[256], note[256];
        snprintf(got, sizeof got, "max %.2f se (per-sequence closed form), %.2f se ((e² + i − 1)/(e + i − 1)²)", st->sim_gap_z,
                 st->sim_formula_z);
        snprintf(note, sizeof note, "simulate --variance, layer 1, α 0, D %d, B %lld, S %d (beyond/sim_layer1_D32768)", st->sim_D,
                 (long long)st->sim_B, st->sim_S);
        mp_report_row(rp, "Variance: parameter-free decoder, simulated against the closed form σ²·Σ_j a_ij²",
                      "equal within mc.sigmas standard errors at every position", got, st->sim_gap_z < sig && st->sim_formula_z < sig,
                      note);
    }
    vr_rows_random(rp, st, sig);
    vr_rows_models(rp, st, sig);
    vr_rows_freq(rp, st);
    vr_rows_position(rp, st);
    return MP_OK;
}

const MpReproStage mp_repro_stage_beyond = {
    .name = "beyond",
    .key = "meta.json: version, model and ids or corpus with fingerprints, n, stats (simulation: B, S, D, seed)",
    .run = beyond_run,
    .report = beyond_report,
    .runs = (const char *const[]){"beyond/random_nope", "beyond/random_nope_bidirectional", "beyond/none",
                                  "beyond/none_bidirectional", "beyond/rope", "beyond/stories260K", NULL},
};
