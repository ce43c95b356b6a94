/* open.c — the tokenizer module's entry: opening a tokenizer by path, freeing it, id → token.
 * (Not named tok.c: tok.h is the public header of the whole module, which the files below
 * include and implement; a tok.c would pair with it and look included by the files it calls.)
 *
 * Implements: mp_tok_init (a directory with tokenizer.json and maybe tokenizer_config.json, a
 * tokenizer.json path, a .gguf file or any file with the GGUF magic, "bytes", or a model
 * directory whose config.json names the byte vocabulary), mp_tok_init_bytes /
 * mp_tok_bytes_add_bos, mp_tok_free, mp_tok_id_to_token.
 * The module's files by pipeline stage (each with its own purpose block): text.c (buffers, UTF-8
 * repair) and unicode.c (normal forms, regex classes) at the bottom; for tokenizer.json:
 * hf_parts.c and hf_load.c (loading), normalize.c, pretok.c, bpe.c, encode.c, decode.c (hf.h holds
 * their shared state); vocab.c (GGUF-style byte-level vocabularies), gguf_vocab.c (reading them
 * from GGUF files), spm.c (GGUF SentencePiece vocabularies); this file on top. Calls go downward
 * only: nothing below calls back into this file.
 * Does not: encode or decode (encode.c, decode.c).
 * Tested by: tests/test_tok.c (paths, CLI, bad files) and the other tokenizer tests.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/util.h"    /* mp_fnv1a64, mp_path_join, mp_file_read_all */
#include "load/hfcache.h" /* mp_hfcache_resolve: hub ids in the local HF cache */
#include "tok/hf.h"       /* MpTokImpl (id → token) */
#include "tok/hf_load.h"  /* mp_tok_hf_free */
#include "tok/spm.h"      /* mp_tok_spm_free, mp_tok_spm_piece */

#define MP_TOK_MAX_FILE (1ull << 31) /* tokenizer.json larger than 2 GiB is rejected */

static int read_file(const char *path, char **data, size_t *len, MpErr *e) {
    return mp_file_read_all(path, MP_TOK_MAX_FILE, "a tokenizer file", data, len, e);
}
void mp_tok_init_bytes(MpTok *t) {
    memset(t, 0, sizeof *t);
    t->bytes = 1;
    t->n_ids = 256;
    for (int i = 0; i < 256; i++) t->byte_strs[2 * i] = (char)i;
    t->bos_id = t->eos_id = -1;
    t->hash = mp_fnv1a64("maskpos byte vocabulary", 23, MP_FNV_INIT);
    snprintf(t->path, sizeof t->path, "bytes");
}

void mp_tok_bytes_add_bos(MpTok *t) {
    MP_ASSERT(t->bytes);
    t->n_ids = 257;
    t->bos_id = 256;
    t->hash = mp_fnv1a64("maskpos byte vocabulary + BOS 256", 33, MP_FNV_INIT);
    snprintf(t->path, sizeof t->path, "bytes+bos");
}

/* 1 when dir/config.json names the byte vocabulary ("maskpos_tokenizer": "bytes"), 2 when it
 * also has the BOS of `maskpos train --bos` ("bos_token_id": 256, "vocab_size": 257). */
static int tok_dir_is_bytes(const char *dir) {
    char path[4096];
    MpErr e;
    char *s = NULL;
    size_t n = 0;
    if (mp_path_join(path, sizeof path, dir, "config.json", &e) != MP_OK || !mp_file_exists(path) ||
        read_file(path, &s, &n, &e) != MP_OK)
        return 0;
    json_t *cfg = json_loadb(s, n, 0, NULL);
    free(s);
    const char *v = json_string_value(json_object_get(cfg, "maskpos_tokenizer"));
    int yes = v && !strcmp(v, "bytes");
    if (yes && json_integer_value(json_object_get(cfg, "bos_token_id")) == 256 &&
        json_integer_value(json_object_get(cfg, "vocab_size")) == 257)
        yes = 2;
    json_decref(cfg);
    return yes;
}

int mp_tok_init(MpTok *t, const char *model, MpErr *e) {
    memset(t, 0, sizeof *t);
    size_t ml = strlen(model);
    if (!strcmp(model, "bytes")) {
        mp_tok_init_bytes(t);
        return MP_OK;
    }
    if (ml >= 5 && !strcmp(model + ml - 5, ".gguf")) return mp_tok_init_gguf(t, model, e);
    struct stat st;
    char snap[4096]; /* a hub id ("org/name"): its snapshot in the local HF cache (load/hfcache.h) */
    if (stat(model, &st) != 0 && errno == ENOENT && mp_hfcache_is_id(model)) {
        if (mp_hfcache_resolve(model, snap, sizeof snap, e) != MP_OK) return MP_ERR;
        model = snap;
        ml = strlen(model);
    }
    if (stat(model, &st) != 0) return mp_err_set(e, "%s: %s", model, strerror(errno));
    char path[4096], cfg_path[4096];
    if (S_ISDIR(st.st_mode)) {
        if (mp_path_join(path, sizeof path, model, "tokenizer.json", e) != MP_OK) return MP_ERR;
        int bytes = mp_file_exists(path) ? 0 : tok_dir_is_bytes(model);
        if (bytes) {
            mp_tok_init_bytes(t);
            if (bytes == 2) mp_tok_bytes_add_bos(t);
            return MP_OK;
        }
        if (!mp_file_exists(path)) return mp_err_set(e, "%s: no tokenizer.json in this directory", model);
    } else {
        if (ml >= sizeof path) return mp_err_set(e, "%s: path too long", model);
        memcpy(path, model, ml + 1);
    }
    /* tokenizer_config.json beside tokenizer.json */
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t dl = (size_t)(slash - path);
        if (dl + 30 >= sizeof cfg_path) return mp_err_set(e, "%s: path too long", path);
        memcpy(cfg_path, path, dl);
        snprintf(cfg_path + dl, sizeof cfg_path - dl, "/tokenizer_config.json");
    } else
        snprintf(cfg_path, sizeof cfg_path, "tokenizer_config.json");
    char *json = NULL, *cfg = NULL;
    size_t jl = 0, cl = 0;
    if (read_file(path, &json, &jl, e) != MP_OK) return MP_ERR;
    if (jl >= 4 && !memcmp(json, "GGUF", 4)) {
        free(json);
        return mp_tok_init_gguf(t, path, e);
    }
    if (mp_file_exists(cfg_path) && read_file(cfg_path, &cfg, &cl, e) != MP_OK) {
        free(json);
        return MP_ERR;
    }
    int rc = mp_tok_init_json(t, json, jl, cfg, cl, e);
    free(json);
    free(cfg);
    if (rc != MP_OK) return mp_err_prefix(e, "%s", path);
    snprintf(t->path, sizeof t->path, "%s", path);
    return MP_OK;
}

void mp_tok_free(MpTok *t) {
    mp_tok_spm_free(t->spm);
    mp_tok_hf_free(t->impl);
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
}

const char *mp_tok_id_to_token(const MpTok *t, int32_t id) {
    if (t->spm) return mp_tok_spm_piece(t->spm, id);
    if (t->bytes) return id >= 0 && id < 256 ? t->byte_strs + 2 * id : id == 256 && t->bos_id == 256 ? "<bos>" : NULL;
    if (!t->impl || id < 0 || id >= t->n_ids || !(t->impl->flags[id] & MP_TOK_F_PRESENT)) return NULL;
    return t->impl->strs.data + t->impl->s_off[id];
}

