/* gram.c — `maskpos gram`: the nine Gram matrices (a)–(i) of paper.md §2.2 (Figure 3) for
 * layer l → l+1 of a checkpoint, averaged over sequences and heads.
 *
 *   maskpos gram models/nope --layer 1 --data corpus.txt --seq 50 --out results/gram
 *   maskpos gram models/rope --layer 1 --data corpus.txt --seq 50 --no-rope --out D   (counterfactual)
 * Writes DIR/gram.npy (float64 [9, S, S], order (a)..(i); (b) and (i) NaN above the diagonal),
 * DIR/tokens.npy (int32 [N, S], the sequences used), DIR/meta.json, and with --plot the 3×3
 * figure DIR/gram.png. See docs/train.md.
 * Does not: the maths (src/train/gram.c).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"    /* mp_cli_* */
#include "core/json.h"  /* mp_json_read, mp_json_write_atomic, mp_json_add_provenance */
#include "core/npy.h"   /* mp_npy_read, mp_npy_write */
#include "core/util.h"  /* mp_mkdir_p, mp_time_now */
#include "load/model.h" /* mp_model_open */
#include "tok/tok.h"    /* MpTok: the model's own tokenizer when it ships tokenizer.json */
#include "train/gram.h" /* mp_train_gram_run */
#include "viz/plot.h"   /* mp_plot_render (--plot) */
#include "core/files.h" /* mp_outdir_claim, mp_outfile_claim: one run per --out */

static const char *gram_help =
    "usage: maskpos gram MODEL --layer L --data FILE --out DIR [options]\n"
    "\n"
    "The nine Gram matrices of the paper's Figure 3 along layer L -> L+1 (1-based), averaged\n"
    "over sequences and heads: (a) YY^T, Y = RMSNorm(X); (b) QK^T/sqrt(d); (c) (AV)(AV)^T;\n"
    "(d) (AVW_O)(AVW_O)^T; (e) OO^T, O = AVW_O + X; (f) RMSNorm(O)RMSNorm(O)^T; (g) X'X'^T,\n"
    "X' = FFN(RMSNorm(O)) + O; (h) next layer's YY^T; (i) next layer's QK^T/sqrt(d).\n"
    "(b) and (i) are pre-softmax scores (NaN above the diagonal); (c) is the mean of the\n"
    "per-head Grams. MODEL is anything `maskpos inspect` opens (HF directory or GGUF).\n"
    "\n"
    "  --layer L          first layer of the pair, 1-based (default 1)\n"
    "  --data FILE        text; sequences are N windows of S tokens spread evenly over it,\n"
    "                     tokenized by MODEL/tokenizer.json, or as bytes for byte models\n"
    "                     (config \"maskpos_tokenizer\": \"bytes\", or vocab_size 256 and no\n"
    "                     \"maskpos_tokenizer\" naming another tokenizer); with a tokenizer that\n"
    "                     adds BOS (or bytes with \"bos_token_id\": 256) each window is BOS + S-1\n"
    "  --tokens F.npy     token ids [rows, >= S] (int32/int64) instead of --data\n"
    "  --seq S            positions (default 50)\n"
    "  --n N              sequences (default 256)\n"
    "  --no-rope          skip RoPE in every layer (view a RoPE model as NoPE); layers marked\n"
    "                     \"no_rope_layers\": 0 in config.json never apply RoPE\n"
    "  --out DIR          gram.npy [9,S,S] float64, tokens.npy [N,S] int32, meta.json\n"
    "  --plot             also draw the 3x3 figure DIR/gram.png\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --allow-long       allow --seq past the model's trained context (warned, recorded in meta.json)\n"
    "  --force            replace the outputs of an earlier run in --out (else such a folder is refused)\n";

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

static int gram_tokens(int32_t **out, const char *model, MpModel *m, const char *data, const char *tokens_path, int N,
                       int S, MpErr *e) {
    *out = mp_try_malloc((size_t)N * S * sizeof(int32_t));
    if (!*out) return mp_err_set(e, "out of memory");
    if (tokens_path) {
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
                (*out)[(size_t)r * S + c] = (int32_t)v;
            }
        mp_npy_free(&a);
        return rc;
    }
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
            if (ids) gram_windows(*out, ids, (size_t)len, N, S, bos);
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
            if (rc == MP_OK) gram_windows(*out, ids.ids, ids.n, N, S, tok.bos_id);
            for (size_t i = 0; rc == MP_OK && i < (size_t)N * S; i++)
                if ((*out)[i] >= m->vocab) rc = mp_err_set(e, "tokenizer id %d outside the model vocabulary %d", (*out)[i], m->vocab);
            mp_tok_ids_free(&ids);
            mp_tok_free(&tok);
        }
    }
    free(text);
    return rc;
}

static int gram_plot(const char *dir, const MpTrainGram *g, const char *model, int no_rope, MpErr *e) {
    MpPlotPanel panels[MP_GRAM_NMATS];
    memset(panels, 0, sizeof panels);
    size_t SS = (size_t)g->S * g->S;
    for (int k = 0; k < MP_GRAM_NMATS; k++) {
        panels[k].map = g->sum + (size_t)k * SS;
        panels[k].rows = panels[k].cols = g->S;
        snprintf(panels[k].title, sizeof panels[k].title, "%s", mp_train_gram_title(k));
    }
    MpPlotOptions o;
    mp_plot_options_default(&o);
    o.cols = 3;
    o.cmap = "rocket";
    const char *base = strrchr(model, '/');
    snprintf(o.title, sizeof o.title, "%s: layer %d -> %d%s", base && base[1] ? base + 1 : model, g->layer + 1,
             g->layer + 2, no_rope ? " (RoPE off)" : "");
    char path[4200];
    snprintf(path, sizeof path, "%s/gram.png", dir);
    int rc = mp_plot_render(path, panels, MP_GRAM_NMATS, &o, e);
    mp_plot_release();
    return rc;
}

int mp_cmd_gram(int argc, char **argv) {
    const char *cmd = "gram";
    const char *data = NULL, *tokens_path = NULL, *out = NULL, *model_path = NULL;
    int layer = 1, S = 50, N = 256, no_rope = 0, plot = 0, threads = 0, force = 0, allow_long = 0, beyond = 0;
    static const struct option opts[] = {
        {"layer", required_argument, 0, 'l'}, {"data", required_argument, 0, 'd'},
        {"tokens", required_argument, 0, 't'}, {"seq", required_argument, 0, 'S'},
        {"n", required_argument, 0, 'n'},     {"no-rope", no_argument, 0, 'r'},
        {"out", required_argument, 0, 'o'},   {"plot", no_argument, 0, 'p'},
        {"threads", required_argument, 0, 'j'}, {"help", no_argument, 0, 'h'},
        {"force", no_argument, 0, 'f'},       {"allow-long", no_argument, 0, 'A'},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'l': layer = (int)mp_cli_i64(cmd, "--layer", optarg, 1, 4096); break;
        case 'd': data = optarg; break;
        case 't': tokens_path = optarg; break;
        case 'S': S = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 8192); break;
        case 'n': N = (int)mp_cli_i64(cmd, "--n", optarg, 1, 1000000); break;
        case 'r': no_rope = 1; break;
        case 'o': out = optarg; break;
        case 'p': plot = 1; break;
        case 'f': force = 1; break;
        case 'A': allow_long = 1; break;
        case 'j': threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, 1024); break;
        case 'h': fputs(gram_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind < argc) model_path = argv[optind++];
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!model_path) return mp_cli_error(cmd, "MODEL is required (see 'maskpos gram --help')");
    if (!data == !tokens_path) return mp_cli_error(cmd, "give exactly one of --data FILE and --tokens F.npy");
    if (!out) return mp_cli_error(cmd, "--out DIR is required");
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    double t0 = mp_time_now();
    MpErr e;
    MpModel m;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, model_path, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    int rc = MP_EXIT_OK;
    int *rope = mp_calloc_or_die((size_t)m.n_layers, sizeof(int), "rope flags");
    int32_t *tokens = NULL;
    MpTrainGram g;
    memset(&g, 0, sizeof g);
    if (layer + 1 > m.n_layers) {
        rc = mp_cli_error(cmd, "--layer %d: %s has %d layers (the pair needs layer %d too)", layer, model_path, m.n_layers,
                          layer + 1);
    } else if (mp_model_check_finite(&m, layer + 1, &e) != MP_OK ||
               mp_model_context_check(&m, S, allow_long, &beyond, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
    } else if (gram_tokens(&tokens, model_path, &m, data, tokens_path, N, S, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
    } else if (mp_outdir_claim(out, "gram", force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
    } else {
        if (beyond)
            fprintf(stderr, "maskpos gram: warning: S=%d runs past the trained context of %s (max_position_embeddings %d); "
                            "recorded in meta.json\n", S, model_path, m.max_pos);
        /* the checkpoint's own per-layer switch (config "no_rope_layers"), or none with --no-rope */
        for (int j = 0; j < m.n_layers; j++) rope[j] = !no_rope && (!m.rope_layer || m.rope_layer[j]);
        if (mp_train_gram_run(&g, &m, tokens, N, S, layer - 1, rope, &e) != MP_OK) rc = mp_cli_error(cmd, "%s", e.msg);
    }
    if (rc == MP_EXIT_OK) {
        char path[4200];
        int64_t shp[3] = {MP_GRAM_NMATS, S, S}, tshp[2] = {N, S};
        snprintf(path, sizeof path, "%s/gram.npy", out);
        int ok = mp_npy_write(path, MP_DT_F64, g.sum, 3, shp, &e) == MP_OK;
        snprintf(path, sizeof path, "%s/tokens.npy", out);
        ok = ok && mp_npy_write(path, MP_DT_I32, tokens, 2, tshp, &e) == MP_OK;
        if (ok && plot) ok = gram_plot(out, &g, model_path, no_rope, &e) == MP_OK;
        if (ok) {
            json_t *meta = json_object();
            json_object_set_new(meta, "what", json_string("Gram matrices (a)-(i) of paper Figure 3, layer l -> l+1, "
                                                          "mean over sequences and heads"));
            json_object_set_new(meta, "model", json_string(model_path));
            json_object_set_new(meta, "arch", json_string(mp_model_arch_name(m.arch)));
            json_object_set_new(meta, "layer", json_integer(layer));
            json_object_set_new(meta, "max_position_embeddings", json_integer(m.max_pos));
            json_object_set_new(meta, "beyond_trained_context", json_boolean(beyond)); /* --allow-long */
            json_object_set_new(meta, "next_layer", json_integer(layer + 1));
            json_object_set_new(meta, "seq", json_integer(S));
            json_object_set_new(meta, "sequences", json_integer(N));
            json_object_set_new(meta, "data", data ? json_string(data) : json_null());
            json_object_set_new(meta, "tokens", tokens_path ? json_string(tokens_path) : json_null());
            json_object_set_new(meta, "rope_layer", json_boolean(rope[layer - 1]));
            json_object_set_new(meta, "rope_next_layer", json_boolean(rope[layer]));
            json_object_set_new(meta, "no_rope_flag", json_boolean(no_rope));
            json_t *names = json_array();
            for (int k = 0; k < MP_GRAM_NMATS; k++) json_array_append_new(names, json_string(mp_train_gram_title(k)));
            json_object_set_new(meta, "gram_npy", json_string("float64 [9, S, S] in this order; (b), (i) NaN above the diagonal"));
            json_object_set_new(meta, "matrices", names);
            mp_json_add_provenance(meta, argc, argv, mp_time_now() - t0);
            snprintf(path, sizeof path, "%s/meta.json", out);
            ok = mp_json_write_atomic(path, meta, &e) == MP_OK;
            json_decref(meta);
        }
        if (!ok) rc = mp_cli_error(cmd, "%s", e.msg);
    }
    if (rc == MP_EXIT_OK) {
        size_t SS = (size_t)S * S;
        printf("gram: %s layer %d -> %d, %d sequences x %d positions, RoPE %s/%s\n", model_path, layer, layer + 1, N, S,
               rope[layer - 1] ? "on" : "off", rope[layer] ? "on" : "off");
        for (int k = 0; k < MP_GRAM_NMATS; k++) {
            const double *M = g.sum + (size_t)k * SS;
            /* the last row: how the last position relates to early vs late positions */
            printf("  %-32s [S,1] %10.4g  [S,S-1] %10.4g  [S,S] %10.4g\n", mp_train_gram_title(k), M[SS - S],
                   S > 1 ? M[SS - 2] : NAN, M[SS - 1]);
        }
        printf("wrote %s/{gram.npy, tokens.npy, meta.json%s}\n", out, plot ? ", gram.png" : "");
    }
    mp_train_gram_free(&g);
    free(tokens);
    free(rope);
    mp_model_free(&m);
    return rc;
}
