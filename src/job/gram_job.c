/* gram_job.c — see gram_job.h. */
#include "job/gram_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/files.h" /* mp_outdir_claim */
#include "core/json.h"  /* mp_json_read, mp_json_write_atomic, mp_json_add_provenance */
#include "core/npy.h"   /* mp_npy_read, mp_npy_write */
#include "core/util.h"  /* mp_threads_resolve, mp_file_exists, mp_path_join */
#include "tok/tok.h"    /* MpTok: the model's own tokenizer when it ships tokenizer.json */
#include "viz/plot.h"   /* mp_plot_render */

void mp_gram_config_init(MpGramConfig *c) {
    memset(c, 0, sizeof *c);
    c->layer = 1;
    c->seq = 50;
    c->n = 256;
}

/* ================================================================ tokens */

static int gram_is_bytes(const char *model, const MpModel *m) {
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", model);
    int bytes = m->vocab == 256;
    MpErr e;
    json_t *cfg = mp_file_exists(path) ? mp_json_read(path, &e) : NULL;
    if (cfg) {
        json_t *t = json_object_get(cfg, "maskpos_tokenizer");
        if (json_is_string(t)) bytes = !strcmp(json_string_value(t), "bytes"); /* e.g. "tokenizer.json": not bytes */
        json_decref(cfg);
    }
    return bytes;
}

/* N windows of S tokens spread evenly over the token stream ids[n] (n >= S); with a BOS
 * (bos >= 0) each window is BOS + S-1 stream ids, as a document starts for such a tokenizer. */
static void gram_windows(int32_t *out, const int32_t *ids, size_t n, int N, int S, int32_t bos) {
    size_t w = (size_t)S - (bos >= 0), span = n - w;
    for (int k = 0; k < N; k++) {
        size_t off = N > 1 ? (size_t)((double)k * (double)span / (double)(N - 1)) : 0;
        int32_t *row = out + (size_t)k * S;
        if (bos >= 0) *row++ = bos;
        memcpy(row, ids + off, w * sizeof(int32_t));
    }
}

static int gram_tokens_npy(int32_t *out, const MpModel *m, const char *tokens_path, int N, int S, MpErr *e) {
    MpNpy a;
    if (mp_npy_read(tokens_path, &a, e) != MP_OK) return MP_ERR;
    int rc = MP_OK;
    if (a.ndim != 2 || (a.dtype != MP_DT_I32 && a.dtype != MP_DT_I64) || a.shape[0] < N || a.shape[1] < S)
        rc = mp_err_set(e, "%s: need an int32/int64 array of at least [%d, %d]", tokens_path, N, S);
    for (int r = 0; r < N && rc == MP_OK; r++)
        for (int c = 0; c < S; c++) {
            size_t i = (size_t)r * (size_t)a.shape[1] + c;
            int64_t v = a.dtype == MP_DT_I32 ? ((int32_t *)a.data)[i] : ((int64_t *)a.data)[i];
            if (v < 0 || v >= m->vocab) {
                rc = mp_err_set(e, "%s: token id %lld outside the vocabulary %d", tokens_path, (long long)v, m->vocab);
                break;
            }
            out[(size_t)r * S + c] = (int32_t)v;
        }
    mp_npy_free(&a);
    return rc;
}

static int gram_tokens_text(int32_t *out, const char *model, const MpModel *m, const char *data, int N, int S, MpErr *e) {
    char *text = NULL;
    size_t len = 0;
    if (mp_file_read_all(data, SIZE_MAX - 1, "--data", &text, &len, e) != MP_OK) return MP_ERR;
    int rc = MP_OK;
    if (gram_is_bytes(model, m)) {
        MpTok bt; /* the byte vocabulary, with the BOS of `train --bos` when config.json has it */
        int32_t bos = mp_tok_init(&bt, model, e) == MP_OK && bt.bytes ? bt.bos_id : -1;
        mp_tok_free(&bt);
        if (bos >= m->vocab) bos = -1;
        if ((size_t)len < (size_t)S) {
            rc = mp_err_set(e, "--data %s has %ld bytes, fewer than --seq %d", data, len, S);
        } else {
            int32_t *ids = mp_try_malloc((size_t)len * sizeof(int32_t) + 4);
            if (!ids) rc = mp_err_set(e, "out of memory");
            for (size_t i = 0; ids && i < len; i++) ids[i] = (uint8_t)text[i];
            if (ids) gram_windows(out, ids, (size_t)len, N, S, bos);
            free(ids);
        }
    } else {
        MpTok tok;
        MpTokIds ids = {0};
        if (mp_tok_init(&tok, model, e) != MP_OK) {
            rc = mp_err_prefix(e, "MODEL has no byte vocabulary; its tokenizer");
        } else {
            rc = mp_tok_encode(&tok, &ids, text, (size_t)len, 0, e);
            if (rc == MP_OK && ids.n < (size_t)S)
                rc = mp_err_set(e, "--data %s gives %zu tokens, fewer than --seq %d", data, ids.n, S);
            if (rc == MP_OK) gram_windows(out, ids.ids, ids.n, N, S, tok.bos_id);
            for (size_t i = 0; rc == MP_OK && i < (size_t)N * S; i++)
                if (out[i] >= m->vocab) rc = mp_err_set(e, "tokenizer id %d outside the model vocabulary %d", out[i], m->vocab);
            mp_tok_ids_free(&ids);
            mp_tok_free(&tok);
        }
    }
    free(text);
    return rc;
}

/* r->tokens [N, S] from the one source c names. */
static int gram_tokens(MpGramResult *r, const MpGramConfig *c, const MpModel *m, MpErr *e) {
    const int N = c->n, S = c->seq;
    if (!!c->data + !!c->tokens_path + !!c->ids != 1) return mp_err_set(e, "give exactly one of --data FILE and --tokens F.npy");
    r->tokens = mp_try_malloc((size_t)N * S * sizeof(int32_t));
    if (!r->tokens) return mp_err_set(e, "out of memory");
    if (c->tokens_path) return gram_tokens_npy(r->tokens, m, c->tokens_path, N, S, e);
    if (c->data) return gram_tokens_text(r->tokens, m->path, m, c->data, N, S, e);
    for (size_t i = 0; i < (size_t)N * S; i++) {
        if (c->ids[i] < 0 || c->ids[i] >= m->vocab) return mp_err_set(e, "tokens: id %d outside the vocabulary %d", c->ids[i], m->vocab);
        r->tokens[i] = c->ids[i];
    }
    return MP_OK;
}

/* ================================================================ run */

static json_t *gram_meta(const MpGramResult *r, const MpGramConfig *c, const MpModel *m) {
    json_t *meta = json_object();
    json_object_set_new(meta, "what", json_string("Gram matrices (a)-(i) of paper Figure 3, layer l -> l+1, "
                                                  "mean over sequences and heads"));
    json_object_set_new(meta, "model", json_string(r->model));
    json_object_set_new(meta, "arch", json_string(mp_model_arch_name(m->arch)));
    json_object_set_new(meta, "layer", json_integer(r->layer));
    json_object_set_new(meta, "max_position_embeddings", json_integer(m->max_pos));
    json_object_set_new(meta, "beyond_trained_context", json_boolean(r->beyond)); /* --allow-long */
    json_object_set_new(meta, "next_layer", json_integer(r->layer + 1));
    json_object_set_new(meta, "seq", json_integer(r->S));
    json_object_set_new(meta, "sequences", json_integer(r->N));
    json_object_set_new(meta, "data", c->data ? json_string(c->data) : json_null());
    json_object_set_new(meta, "tokens", c->tokens_path ? json_string(c->tokens_path) : json_null());
    json_object_set_new(meta, "rope_layer", json_boolean(r->rope_layer));
    json_object_set_new(meta, "rope_next_layer", json_boolean(r->rope_next_layer));
    json_object_set_new(meta, "no_rope_flag", json_boolean(r->no_rope));
    json_t *names = json_array();
    for (int k = 0; k < MP_GRAM_NMATS; k++) json_array_append_new(names, json_string(mp_train_gram_title(k)));
    json_object_set_new(meta, "gram_npy", json_string("float64 [9, S, S] in this order; (b), (i) NaN above the diagonal"));
    json_object_set_new(meta, "matrices", names);
    return meta;
}

/* Checks, tokens, the folder, the matrices (m open). */
static int gram_on_model(MpGramResult *r, const MpGramConfig *c, MpModel *m, MpErr *e) {
    const int layer = c->layer, S = c->seq;
    if (layer < 1 || layer + 1 > m->n_layers)
        return mp_err_set(e, "--layer %d: %s has %d layers (the pair needs layer %d too)", layer, r->model, m->n_layers,
                          layer + 1);
    if (c->n < 1 || S < 1) return mp_err_set(e, "need at least one sequence of one token");
    if (mp_model_check_finite(m, layer + 1, e) != MP_OK || mp_model_context_check(m, S, c->allow_long, &r->beyond, e) != MP_OK ||
        gram_tokens(r, c, m, e) != MP_OK)
        return MP_ERR;
    if (c->out && mp_outdir_claim(c->out, "gram", (MpOutdirMode)c->out_mode, e) != MP_OK) return MP_ERR;
    if (r->beyond && c->log)
        fprintf(c->log, "maskpos gram: warning: S=%d runs past the trained context of %s (max_position_embeddings %d); "
                        "recorded in meta.json\n", S, r->model, m->max_pos);
    /* the checkpoint's own per-layer switch (config "no_rope_layers"), or none with --no-rope */
    r->rope_layer = !c->no_rope && (!m->rope_layer || m->rope_layer[layer - 1]);
    r->rope_next_layer = !c->no_rope && (!m->rope_layer || m->rope_layer[layer]);
    if (mp_train_gram_run(&r->g, m, r->tokens, c->n, S, layer - 1, !c->no_rope, c->progress, c->progress_ctx, e) != MP_OK)
        return MP_ERR;
    r->meta = gram_meta(r, c, m);
    return MP_OK;
}

int mp_gram_run(MpGramResult *r, const MpGramConfig *c, MpErr *e) {
    memset(r, 0, sizeof *r);
    int nt; /* --threads, else OMP_NUM_THREADS or the cores: under the one cap */
    if (mp_threads_resolve(c->threads, "threads", &nt, e) != MP_OK) return MP_ERR;
#ifdef _OPENMP
    if (c->threads > 0) omp_set_num_threads(c->threads);
#endif
    MpModel own, *m = c->model;
    memset(&own, 0, sizeof own);
    if (!m) {
        if (!c->model_path) return mp_err_set(e, "MODEL is required (see 'maskpos gram --help')");
        if (mp_model_open(&own, c->model_path, e) != MP_OK) return MP_ERR;
        m = &own;
    }
    r->N = c->n, r->S = c->seq, r->layer = c->layer, r->no_rope = c->no_rope;
    snprintf(r->model, sizeof r->model, "%s", c->model_path ? c->model_path : m->path);
    const char *base = strrchr(r->model, '/');
    int nope = 1; /* a title from what was measured, not the folder's name alone */
    for (int l = 0; l < m->n_layers && m->rope_layer; l++) nope &= !m->rope_layer[l];
    snprintf(r->title, sizeof r->title, "Gram matrices from layer %d to layer %d of %.120s (%s), %d sequences of %d tokens%s",
             c->layer, c->layer + 1, base && base[1] ? base + 1 : r->model,
             c->no_rope ? "RoPE turned off" : nope && m->rope_layer ? "no positional encoding" : "RoPE", c->n, c->seq,
             "; colour limits without position 0");
    const int rc = gram_on_model(r, c, m, e);
    mp_model_free(&own);
    if (rc != MP_OK) mp_gram_result_free(r);
    return rc;
}

void mp_gram_result_free(MpGramResult *r) {
    mp_train_gram_free(&r->g);
    free(r->tokens);
    if (r->meta) json_decref(r->meta);
    memset(r, 0, sizeof *r);
}

/* ================================================================ print, write */

void mp_gram_result_print(FILE *f, const MpGramResult *r) {
    const int S = r->S;
    const size_t SS = (size_t)S * S;
    fprintf(f, "gram: %s layer %d -> %d, %d sequences x %d positions, RoPE %s/%s\n", r->model, r->layer, r->layer + 1,
            r->N, S, r->rope_layer ? "on" : "off", r->rope_next_layer ? "on" : "off");
    for (int k = 0; k < MP_GRAM_NMATS; k++) {
        const double *M = r->g.sum + (size_t)k * SS;
        /* the last row: how the last position relates to early vs late positions */
        fprintf(f, "  %-32s [S,1] %10.4g  [S,S-1] %10.4g  [S,S] %10.4g\n", mp_train_gram_title(k), M[SS - S],
                S > 1 ? M[SS - 2] : NAN, M[SS - 1]);
    }
}

static int gram_plot(const char *dir, const MpGramResult *r, MpErr *e) {
    MpPlotPanel panels[MP_GRAM_NMATS];
    memset(panels, 0, sizeof panels);
    size_t SS = (size_t)r->S * r->S;
    for (int k = 0; k < MP_GRAM_NMATS; k++) {
        panels[k].map = r->g.sum + (size_t)k * SS;
        panels[k].rows = panels[k].cols = r->S;
        snprintf(panels[k].title, sizeof panels[k].title, "%s", mp_train_gram_title(k));
        panels[k].limit_skip = 1; /* position 0 (BOS, or a first token that sees only itself) would set the scale */
    }
    MpPlotOptions o;
    mp_plot_options_default(&o);
    o.cols = 3;
    o.cmap = "rocket";
    snprintf(o.title, sizeof o.title, "%s", r->title);
    char path[4200];
    snprintf(path, sizeof path, "%s/gram.png", dir);
    int rc = mp_plot_render(path, panels, MP_GRAM_NMATS, &o, e);
    mp_plot_release();
    return rc;
}

int mp_gram_result_write(const MpGramResult *r, const char *dir, const MpJobWriteOptions *o, MpErr *e) {
    const MpJobWriteOptions none = {0};
    if (!o) o = &none;
    if (!r->meta) return mp_err_set(e, "%s: no Gram result to write", dir);
    char path[4200];
    int64_t shp[3] = {MP_GRAM_NMATS, r->S, r->S}, tshp[2] = {r->N, r->S};
    snprintf(path, sizeof path, "%s/gram.npy", dir);
    if (mp_npy_write(path, MP_DT_F64, r->g.sum, 3, shp, e) != MP_OK) return MP_ERR;
    snprintf(path, sizeof path, "%s/tokens.npy", dir);
    if (mp_npy_write(path, MP_DT_I32, r->tokens, 2, tshp, e) != MP_OK) return MP_ERR;
    if (o->plot && gram_plot(dir, r, e) != MP_OK) return MP_ERR;
    json_t *meta = json_deep_copy(r->meta);
    if (!meta) return mp_err_set(e, "%s: out of memory for meta.json", dir);
    mp_json_add_provenance(meta, o->argc, o->argv, o->wall_s);
    snprintf(path, sizeof path, "%s/meta.json", dir);
    const int rc = mp_json_write_atomic(path, meta, e);
    json_decref(meta);
    return rc;
}
