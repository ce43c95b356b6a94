/* card_job.c — `maskpos card` as library calls (job/card_job.h): the probe passes of a model, the
 * card's JSON from run folders, its views and figures.
 * Tested by: tests/test_card.c.
 *
 * ================================================================ layout
 *   runs      a run folder's meta.json into a pass (every per-layer number), a folder into a model
 *   card      card.json from the models, the figures, the files in order
 *   passes    the model's probe passes (mp_card_run)
 *   compare   run folders side by side (mp_card_compare)
 */
#include "job/card_job.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/files.h"      /* mp_outdir_claim */
#include "core/json.h"       /* mp_json_read, mp_json_write_atomic, mp_json_add_provenance, MP_VERSION */
#include "core/npy.h"        /* mp_npy_read: the maps of the figure */
#include "core/util.h"       /* mp_path_join, mp_file_exists, mp_time_now */
#include "load/model.h"      /* mp_model_open: one model for every pass */
#include "model/probe.h"     /* mp_probe_stats: the statistics of the probe */
#include "viz/card_html.h"   /* mp_card_passes, mp_card_cols, mp_card_write_html, _md, _tex */
#include "viz/plot.h"        /* mp_plot_render_ex */
#include "viz/signif.h"      /* mp_signif_note_meta: each panel's significance */

void mp_card_config_init(MpCardConfig *c) {
    memset(c, 0, sizeof *c);
    mp_probe_config_init(&c->probe);
}

/* ================================================================ runs */

/* 1 when every element of a is a number, null (not finite, or none at this N) or boolean. */
static int card_is_series(const json_t *a) {
    size_t i;
    const json_t *v;
    json_array_foreach(a, i, v) if (!json_is_number(v) && !json_is_null(v) && !json_is_boolean(v)) return 0;
    return 1;
}

/* [L][H] numbers -> [L] means over heads (null where a head's value is not a number); NULL when a
 * is not such an array. */
static json_t *card_head_mean(const json_t *a, size_t H) {
    size_t l;
    const json_t *row;
    json_array_foreach(a, l, row) if (!json_is_array(row) || json_array_size(row) != H || !card_is_series(row)) return NULL;
    json_t *out = json_array();
    json_array_foreach(a, l, row) {
        double s = 0;
        int ok = 1;
        for (size_t h = 0; h < H; h++) {
            const json_t *v = json_array_get(row, h);
            ok &= json_is_number(v);
            s += json_number_value(v);
        }
        json_array_append_new(out, ok && isfinite(s / (double)H) ? json_real(s / (double)H) : json_null());
    }
    return out;
}

/* 1 when key names standard errors ("..._se"): their mean over heads is no standard error. */
static int card_is_se(const char *key) {
    const size_t n = strlen(key);
    return n >= 3 && !strcmp(key + n - 3, "_se");
}

/* Every per-layer number of the object o (meta.json, or an object in it) into pl, keyed by its
 * dotted path from meta.json's top: arrays of L numbers as they are, [L][H] arrays as their means
 * over heads (".head_mean"; not of standard errors), objects to two levels. */
static void card_flatten(json_t *pl, const char *prefix, const json_t *o, size_t L, size_t H, int depth) {
    const char *k;
    const json_t *v;
    char key[256];
    json_object_foreach((json_t *)o, k, v) {
        if (!depth && (!strcmp(k, "layers") || !strcmp(k, "stats"))) continue;
        snprintf(key, sizeof key, "%s%s%s", prefix, prefix[0] ? "." : "", k);
        json_t *hm;
        if (json_is_array(v) && json_array_size(v) == L && card_is_series(v)) json_object_set_new(pl, key, json_deep_copy(v));
        else if (json_is_array(v) && json_array_size(v) == L && H > 0 && !card_is_se(k) && (hm = card_head_mean(v, H))) {
            char hk[300];
            snprintf(hk, sizeof hk, "%s.head_mean", key);
            json_object_set_new(pl, hk, hm);
        } else if (json_is_object(v) && depth < 2) card_flatten(pl, key, v, L, H, depth + 1);
    }
}

/* meta.json's "stats" ([L] objects: nri, residue_rms, ...) as per-layer series, in their order. */
static void card_stats_series(json_t *pl, const json_t *stats) {
    const json_t *first = json_array_get(stats, 0);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)first, k, v) {
        if (!strcmp(k, "layer") || !(json_is_number(v) || json_is_null(v))) continue;
        json_t *a = json_array();
        size_t l;
        const json_t *s;
        json_array_foreach(stats, l, s) {
            const json_t *x = json_object_get(s, k);
            json_array_append_new(a, json_is_number(x) ? json_copy((json_t *)x) : json_null());
        }
        json_object_set_new(pl, k, a);
    }
}

/* A probe run's meta.json at dir/meta.json (owned, checked: a probe's, with layers and stats). */
static json_t *card_meta_read(const char *dir, MpErr *e) {
    char path[4096];
    if (mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK) return NULL;
    if (!mp_file_exists(path)) {
        mp_err_set(e, "%s: not a run folder (no card.json, no meta.json): a card reads the folders of maskpos card or probe",
                   dir);
        return NULL;
    }
    json_t *m = mp_json_read(path, e);
    if (!m) return NULL;
    const char *kind = json_string_value(json_object_get(m, "kind"));
    const json_t *layers = json_object_get(m, "layers"), *stats = json_object_get(m, "stats");
    if (!kind || strcmp(kind, "probe")) mp_err_set(e, "%s: a %s run, not a probe run: a card reads the folders of maskpos card or probe", dir, kind ? kind : "unknown");
    else if (!json_is_array(layers) || !json_array_size(layers) || !json_is_array(stats) ||
             json_array_size(stats) != json_array_size(layers) || !json_is_integer(json_object_get(m, "seq")))
        mp_err_set(e, "%s/meta.json: no per-layer statistics (layers, stats, seq): not a complete probe run", dir);
    else return m;
    json_decref(m);
    return NULL;
}

/* The pass of run folder dir (shown in the card as folder): its flags, files and per-layer numbers. */
static json_t *card_pass(const char *dir, const char *folder, json_t **meta_out, MpErr *e) {
    json_t *m = card_meta_read(dir, e);
    if (!m) return NULL;
    const json_t *layers = json_object_get(m, "layers");
    const size_t L = json_array_size(layers);
    const json_t *heads = json_object_get(m, "heads");
    json_t *p = json_object(), *pl = json_object();
    json_object_set_new(p, "folder", json_string(folder));
    json_object_set(p, "causal", json_object_get(m, "causal"));
    json_object_set(p, "rope", json_object_get(m, "rope"));
    for (int k = 0; k < 2; k++) { /* the residual-stream statistics' sampling (probe --resid-stride), where run */
        const char *key = k ? "resid_sequences" : "resid_stride";
        if (json_is_integer(json_object_get(m, key))) json_object_set(p, key, json_object_get(m, key));
    }
    card_stats_series(pl, json_object_get(m, "stats"));
    card_flatten(pl, "", m, L, json_is_integer(heads) ? (size_t)json_integer_value(heads) : 0, 0);
    json_object_set_new(p, "per_layer", pl);
    json_t *files = json_object_get(m, "files");
    json_object_set_new(p, "files", files ? json_deep_copy(files) : json_object());
    *meta_out = m;
    return p;
}

/* The model of a card's model json (from card.json) or of a probe folder: its name and run, and its
 * passes read from their folders' meta.json (a card's folders relative to the card). passes: the
 * model's pass folders [MP_CARD_NPASS] (NULL: none), paths to read; shown: how card.json names them. */
static json_t *card_model(const char *const *dirs, const char *const *shown, const char *label, MpErr *e) {
    json_t *model = json_object(), *passes = json_object(), *main_meta = NULL;
    json_object_set_new(model, "passes", passes);
    for (int p = 0; p < MP_CARD_NPASS; p++) {
        if (!dirs[p]) continue;
        json_t *meta = NULL, *pass = card_pass(dirs[p], shown[p], &meta, e);
        if (!pass) goto fail;
        if (main_meta && !json_equal(json_object_get(meta, "layers"), json_object_get(main_meta, "layers"))) {
            json_decref(pass), json_decref(meta);
            mp_err_set(e, "%s: its layers differ from those of its probe pass %s", dirs[p], dirs[0]);
            goto fail;
        }
        json_object_set_new(passes, mp_card_passes[p].name, pass);
        if (main_meta) json_decref(meta);
        else main_meta = meta;
    }
    if (!main_meta) {
        mp_err_set(e, "%s: a card without its probe pass", label);
        goto fail;
    }
    static const char *copy[] = {"model", "arch", "n", "seq", "heads", "layers", "data"};
    for (size_t k = 0; k < sizeof copy / sizeof *copy; k++)
        if (json_object_get(main_meta, copy[k])) json_object_set(model, copy[k], json_object_get(main_meta, copy[k]));
    json_object_set_new(model, "folder", json_string(label));
    json_decref(main_meta);
    return model;
fail:
    if (main_meta) json_decref(main_meta);
    json_decref(model);
    return NULL;
}

/* 1 when dir holds file name. */
static int card_has(const char *dir, const char *name) {
    char path[4096];
    MpErr e;
    return mp_path_join(path, sizeof path, dir, name, &e) == MP_OK && mp_file_exists(path);
}

int mp_card_is_run(const char *dir) { return card_has(dir, "card.json") || card_has(dir, "meta.json"); }

/* The models of run folder dir appended to models: a card's (its card.json, every model's passes
 * re-read from their folders) or a probe folder's (one model, one pass). */
static int card_models_of(json_t *models, const char *dir, MpErr *e) {
    char real[PATH_MAX];
    if (!realpath(dir, real)) return mp_err_set(e, "%s: not a run folder (it cannot be opened)", dir);
    if (!card_has(dir, "card.json")) {
        const char *d[MP_CARD_NPASS] = {real}, *s[MP_CARD_NPASS] = {real};
        json_t *m = card_model(d, s, dir, e);
        if (!m) return MP_ERR;
        json_array_append_new(models, m);
        return MP_OK;
    }
    char path[4096];
    if (mp_path_join(path, sizeof path, dir, "card.json", e) != MP_OK) return MP_ERR;
    json_t *card = mp_json_read(path, e);
    if (!card) return MP_ERR;
    const json_t *ms = json_object_get(card, "models");
    int rc = json_is_array(ms) && json_array_size(ms) ? MP_OK : mp_err_set(e, "%s: card.json lists no models", dir);
    size_t k;
    const json_t *md;
    json_array_foreach(ms, k, md) {
        if (rc != MP_OK) break;
        char buf[MP_CARD_NPASS][4096];
        const char *d[MP_CARD_NPASS] = {0}, *s[MP_CARD_NPASS] = {0};
        for (int p = 0; p < MP_CARD_NPASS && rc == MP_OK; p++) {
            const char *f = json_string_value(json_object_get(json_object_get(json_object_get(md, "passes"), mp_card_passes[p].name), "folder"));
            if (!f) continue;
            if (f[0] == '/') snprintf(buf[p], sizeof buf[p], "%s", f);
            else rc = mp_path_join(buf[p], sizeof buf[p], real, f, e);
            d[p] = s[p] = buf[p];
        }
        json_t *m = rc == MP_OK ? card_model(d, s, dir, e) : NULL;
        if (!m) rc = MP_ERR;
        else json_array_append_new(models, m);
    }
    json_decref(card);
    return rc;
}

/* ================================================================ card */

/* Names the models (the model's file name; the folder's where two share one) and refuses runs of
 * different lengths, naming the folder. */
static int card_models_check(json_t *models, MpErr *e) {
    size_t m, k;
    json_t *md;
    const json_t *first = json_array_get(models, 0);
    json_array_foreach(models, m, md) {
        if (json_integer_value(json_object_get(md, "seq")) != json_integer_value(json_object_get(first, "seq")))
            return mp_err_set(e, "%s: its runs have S = %lld tokens, %s's S = %lld: a card compares runs of one length "
                                 "(the NRI and block z depend on S)",
                              json_string_value(json_object_get(md, "folder")), (long long)json_integer_value(json_object_get(md, "seq")),
                              json_string_value(json_object_get(first, "folder")),
                              (long long)json_integer_value(json_object_get(first, "seq")));
        const char *path = json_string_value(json_object_get(md, "model"));
        const char *base = path ? strrchr(path, '/') : NULL;
        json_object_set_new(md, "name", json_string(base && base[1] ? base + 1 : path ? path : "model"));
    }
    int dup[MP_CARD_MAX_RUNS] = {0}; /* (the caller keeps to MP_CARD_MAX_RUNS models) */
    json_array_foreach(models, m, md) for (k = 0; k < json_array_size(models) && m < MP_CARD_MAX_RUNS; k++)
        dup[m] |= k != m && json_equal(json_object_get(md, "name"), json_object_get(json_array_get(models, k), "name"));
    json_array_foreach(models, m, md) {
        const json_t *pass = json_object_get(json_object_get(md, "passes"), "probe");
        if (json_is_false(json_object_get(pass, "causal")) || json_is_false(json_object_get(pass, "rope"))) {
            char nm[512]; /* a probe folder of a counterfactual run says so in its name */
            snprintf(nm, sizeof nm, "%s%s%s", json_string_value(json_object_get(md, "name")),
                     json_is_false(json_object_get(pass, "causal")) ? ", bidirectional" : "",
                     json_is_false(json_object_get(pass, "rope")) ? ", no RoPE" : "");
            json_object_set_new(md, "name", json_string(nm));
        }
        if (m < MP_CARD_MAX_RUNS && dup[m]) {
            char nm[512];
            snprintf(nm, sizeof nm, "%s (%s)", json_string_value(json_object_get(md, "name")),
                     json_string_value(json_object_get(md, "folder")));
            json_object_set_new(md, "name", json_string(nm));
        }
    }
    return MP_OK;
}

/* The card's own keys: what it is, its columns, what each pass is. */
static json_t *card_object(json_t *models, const char *note) {
    json_t *j = json_object();
    json_object_set_new(j, "kind", json_string("card"));
    json_object_set_new(j, "card_of",
                        json_string("Per model: a probe with every statistic of the probe's table over the same "
                                    "sequences, and its counterfactual passes; every number is the run's own (its "
                                    "meta.json, under passes.NAME.per_layer, keyed as there; .head_mean: the mean over "
                                    "heads), with its standard error under the key + \"_se\" where the probe has one "
                                    "(docs/card.md, docs/metrics.md)."));
    json_t *po = json_object();
    for (int p = 0; p < MP_CARD_NPASS; p++) json_object_set_new(po, mp_card_passes[p].name, json_string(mp_card_passes[p].of));
    json_object_set_new(j, "passes_of", po);
    if (note) json_object_set_new(j, "passes_note", json_string(note));
    json_t *cols = json_array();
    for (int c = 0; c < mp_card_ncols; c++) {
        const MpCardCol *cc = &mp_card_cols[c];
        json_t *o = json_object();
        json_object_set_new(o, "head", json_string(cc->head));
        json_object_set_new(o, "pass", json_string(mp_card_passes[cc->pass].name));
        json_object_set_new(o, "key", json_string(cc->key));
        json_object_set_new(o, "se", cc->se_key ? json_string(cc->se_key) : json_null());
        json_object_set_new(o, "of", json_string(cc->of));
        json_array_append_new(cols, o);
    }
    json_object_set_new(j, "columns", cols);
    json_object_set_new(j, "models", models);
    return j;
}

/* maps-K.png: model K's mean maps per layer, diagonal-normalised (the probe's figure, smaller). */
static int card_figure(const char *path, const char *card_dir, const json_t *model, MpErr *e) {
    const char *f = json_string_value(json_object_get(json_object_get(json_object_get(model, "passes"), "probe"), "folder"));
    char dir[4096], npy[4096];
    if (!f) return mp_err_set(e, "%s: a model without its probe pass", path);
    if (f[0] == '/') snprintf(dir, sizeof dir, "%s", f); /* a relative folder is one of this card's passes */
    else if (mp_path_join(dir, sizeof dir, card_dir, f, e) != MP_OK) return MP_ERR;
    MpNpy a = {0};
    double *x = NULL;
    json_t *meta = card_meta_read(dir, e);
    if (!meta || mp_path_join(npy, sizeof npy, dir, "scores.npy", e) != MP_OK || mp_npy_read(npy, &a, e) != MP_OK ||
        mp_npy_to_f64(&a, &x, e) != MP_OK) {
        if (meta) json_decref(meta);
        mp_npy_free(&a);
        return MP_ERR;
    }
    const json_t *layers = json_object_get(meta, "layers");
    const int L = (int)json_array_size(layers);
    int rc = MP_OK;
    if (a.ndim != 3 || a.shape[0] != L || a.shape[1] != a.shape[2] || L > MP_PLOT_MAX_PANELS)
        rc = mp_err_set(e, "%s: not [L,S,S] with L = %d layers", npy, L);
    MpPlotPanel *pn = rc == MP_OK ? calloc((size_t)L, sizeof *pn) : NULL;
    if (rc == MP_OK && !pn) rc = mp_err_set(e, "%s: out of memory for the figure", path);
    MpPlotOptions o;
    mp_plot_options_default(&o);
    if (rc == MP_OK) rc = mp_plot_preset_apply(&o, "fig5", e);
    if (rc == MP_OK) {
        const size_t S = (size_t)a.shape[1];
        o.cols = L <= 6 ? L : 4;
        o.panel_px = 200;
        snprintf(o.title, sizeof o.title, "%.200s", json_string_value(json_object_get(model, "name")));
        for (int l = 0; l < L; l++) {
            pn[l].map = x + (size_t)l * S * S;
            pn[l].rows = pn[l].cols = (int)S;
            snprintf(pn[l].title, sizeof pn[l].title, "Layer %lld", (long long)json_integer_value(json_array_get(layers, (size_t)l)));
            pn[l].unresolved = mp_signif_note_meta(pn[l].note, sizeof pn[l].note, meta, l) == 1;
        }
        rc = mp_plot_render(path, pn, L, &o, e);
    }
    free(pn);
    free(x);
    mp_npy_free(&a);
    json_decref(meta);
    return rc;
}

/* The card into dir: the figures, card.md, card.tex, card.html, card.json last (a stale one removed
 * first). Owns models (checked by card_models_check). */
static int card_write(const char *dir, json_t *models, const char *note, const MpCardConfig *c, double t0, MpErr *e) {
    json_t *card = card_object(models, note);
    char path[4096], figs[MP_CARD_MAX_RUNS][64];
    const char *fig[MP_CARD_MAX_RUNS] = {0};
    char figpath[MP_CARD_MAX_RUNS][4096];
    int rc = mp_path_join(path, sizeof path, dir, "card.json", e);
    if (rc == MP_OK) remove(path);
    size_t m;
    json_t *md;
    json_array_foreach(models, m, md) {
        if (rc != MP_OK || m >= MP_CARD_MAX_RUNS) break;
        snprintf(figs[m], sizeof figs[m], "maps-%zu.png", m + 1);
        if ((rc = mp_path_join(figpath[m], sizeof figpath[m], dir, figs[m], e)) == MP_OK &&
            (rc = card_figure(figpath[m], dir, md, e)) == MP_OK) {
            fig[m] = figpath[m];
            json_object_set_new(md, "maps", json_string(figs[m]));
        }
    }
    mp_plot_release();
    json_object_set_new(card, "maskpos_version", json_string(MP_VERSION));
    static const struct { const char *name; int (*write)(const char *, const json_t *, MpErr *); } text[] = {
        {"card.md", mp_card_write_md}, {"card.tex", mp_card_write_tex}};
    for (size_t k = 0; k < 2 && rc == MP_OK; k++)
        if ((rc = mp_path_join(path, sizeof path, dir, text[k].name, e)) == MP_OK) rc = text[k].write(path, card, e);
    if (rc == MP_OK && (rc = mp_path_join(path, sizeof path, dir, "card.html", e)) == MP_OK)
        rc = mp_card_write_html(path, card, fig, e);
    if (rc == MP_OK) {
        mp_json_add_provenance(card, c->argc, c->argv, mp_time_now() - t0);
        if ((rc = mp_path_join(path, sizeof path, dir, "card.json", e)) == MP_OK) rc = mp_json_write_atomic(path, card, e);
    }
    json_decref(card);
    return rc;
}

/* ================================================================ passes */

/* The names of every statistic a probe pass can turn on: the rows of the table that read the
 * forward pass (the maps are always on; "lengths" is fed by the C API's padded batches). */
static void card_stats_all(char *buf, size_t cap) {
    unsigned set = 0;
    for (int id = 1; id < MP_PROBE_NSTATS; id++)
        if (mp_probe_stats[id].in) set |= MP_PROBE_STAT_BIT(id);
    mp_probe_stats_names(set, buf, cap);
}

/* 1 when some layer of m applies RoPE (load/arch.h: rope_layer NULL = every layer). */
static int card_model_has_rope(const MpModel *m) {
    if (!m->rope_layer) return 1;
    for (int l = 0; l < m->n_layers; l++)
        if (m->rope_layer[l]) return 1;
    return 0;
}

/* One probe pass p of the card into dir/<pass name>. */
static int card_pass_run(const MpCardConfig *c, MpModel *m, const char *stats, int p, const char *dir, MpErr *e) {
    MpProbeConfig pc = c->probe;
    char out[4096];
    if (mp_path_join(out, sizeof out, dir, mp_card_passes[p].name, e) != MP_OK) return MP_ERR;
    pc.model = m;
    pc.stats = stats;
    pc.no_rope = p == MP_CARD_PASS_NO_ROPE;
    pc.bidirectional = p == MP_CARD_PASS_BIDIR;
    pc.out = out;
    pc.out_mode = c->out_mode == MP_OUTDIR_FORCE ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    pc.log = c->log;
    if (c->log) fprintf(c->log, "card: pass %s%s%s -> %s\n", mp_card_passes[p].name, p ? ": probe " : "", mp_card_passes[p].flag, out);
    MpProbeResult res;
    const double t0 = mp_time_now();
    if (mp_probe_run(&res, &pc, e) != MP_OK) return mp_err_prefix(e, "%s pass", mp_card_passes[p].name);
    const MpJobWriteOptions wo = {.plot = c->plot, .argc = c->argc, .argv = c->argv, .wall_s = mp_time_now() - t0};
    int rc = mp_probe_result_write(&res, out, &wo, e);
    if (rc == MP_OK && c->log)
        fprintf(c->log, "card: pass %s: %lld sequences in %.2f s\n", mp_card_passes[p].name, (long long)res.n, res.compute_s);
    mp_probe_result_free(&res);
    return rc;
}

int mp_card_run(const MpCardConfig *c, MpErr *e) {
    const double t0 = mp_time_now();
    const char *dir = c->probe.out;
    if (!dir) return mp_err_set(e, "--out DIR is required");
    MpModel own = {0};
    MpModel *m = c->probe.model;
    if (!m && mp_model_open(&own, c->probe.model_path, e) != MP_OK) return MP_ERR;
    if (!m) m = &own;
    int run[MP_CARD_NPASS] = {1, !c->no_counterfactuals && card_model_has_rope(m), !c->no_counterfactuals};
    char stats[256], note[512];
    card_stats_all(stats, sizeof stats);
    int np = 0;
    for (int p = 0; p < MP_CARD_NPASS; p++) np += run[p];
    snprintf(note, sizeof note, "%s%s", c->no_counterfactuals ? "The counterfactual passes were not run (--no-counterfactuals). " : "",
             !c->no_counterfactuals && !run[MP_CARD_PASS_NO_ROPE] ? "The model has no RoPE: no no-rope pass. " : "");
    if (c->log) {
        fprintf(c->log, "card: %d probe pass%s over the same sequences, each the cost of one probe with --stats %s:", np,
                np == 1 ? "" : "es", stats);
        for (int p = 0; p < MP_CARD_NPASS; p++)
            if (run[p]) fprintf(c->log, " %s%s%s%s", mp_card_passes[p].name, p ? " (" : "", mp_card_passes[p].flag, p ? ")" : "");
        fprintf(c->log, "%s\n", c->no_counterfactuals ? "" : "; --no-counterfactuals runs the first only");
        if (!run[MP_CARD_PASS_NO_ROPE] && !c->no_counterfactuals) fprintf(c->log, "card: the model has no RoPE: no no-rope pass\n");
    }
    int rc = mp_outdir_claim(dir, "card", (MpOutdirMode)c->out_mode, e);
    for (int p = 0; p < MP_CARD_NPASS && rc == MP_OK; p++)
        if (run[p]) rc = card_pass_run(c, m, stats, p, dir, e);
    if (rc == MP_OK) {
        char buf[MP_CARD_NPASS][4096];
        const char *d[MP_CARD_NPASS] = {0}, *s[MP_CARD_NPASS] = {0};
        for (int p = 0; p < MP_CARD_NPASS && rc == MP_OK; p++)
            if (run[p] && (rc = mp_path_join(buf[p], sizeof buf[p], dir, mp_card_passes[p].name, e)) == MP_OK)
                d[p] = buf[p], s[p] = mp_card_passes[p].name;
        json_t *models = json_array(), *md = rc == MP_OK ? card_model(d, s, dir, e) : NULL;
        if (md) {
            /* the passes' folders as the card sees them (relative to it), read back from there */
            json_array_append_new(models, md);
            if (card_models_check(models, e) != MP_OK) json_decref(models), rc = MP_ERR;
            else rc = card_write(dir, models, note[0] ? note : NULL, c, t0, e);
        } else {
            json_decref(models);
            rc = MP_ERR;
        }
    }
    mp_model_free(&own);
    return rc;
}

/* ================================================================ compare */

int mp_card_compare(const MpCardConfig *c, MpErr *e) {
    const double t0 = mp_time_now();
    const char *dir = c->probe.out;
    if (!dir) return mp_err_set(e, "--out DIR is required");
    if (c->n_runs < 1 || c->n_runs > MP_CARD_MAX_RUNS)
        return mp_err_set(e, "%d run folders: a card shows 1 to %d", c->n_runs, MP_CARD_MAX_RUNS);
    json_t *models = json_array();
    char real[MP_CARD_MAX_RUNS][PATH_MAX];
    for (int i = 0; i < c->n_runs; i++) {
        const char *r = c->runs[i];
        if (!realpath(r, real[i])) real[i][0] = 0;
        for (int k = 0; k < i; k++)
            if (real[i][0] && !strcmp(real[i], real[k])) {
                json_decref(models);
                return mp_err_set(e, "%s: given twice (as %s too)", r, c->runs[k]);
            }
        if (card_models_of(models, r, e) != MP_OK) {
            json_decref(models);
            return MP_ERR;
        }
    }
    if (json_array_size(models) > MP_CARD_MAX_RUNS) {
        json_decref(models);
        return mp_err_set(e, "%zu models: a card shows at most %d", json_array_size(models), MP_CARD_MAX_RUNS);
    }
    if (card_models_check(models, e) != MP_OK || mp_outdir_claim(dir, "card", (MpOutdirMode)c->out_mode, e) != MP_OK) {
        json_decref(models);
        return MP_ERR;
    }
    return card_write(dir, models, NULL, c, t0, e);
}
