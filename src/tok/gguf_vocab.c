/* gguf_vocab.c — a tokenizer from a GGUF file's vocabulary (model-formats.md §3.6).
 *
 * Implements: mp_tok_init_gguf(): reads tokenizer.ggml.{model,pre,tokens,token_type,merges,
 * bos_token_id,eos_token_id,add_bos_token,add_eos_token} with the project's GGUF reader and hands
 * the arrays to mp_tok_init_vocab(), which copies them, so the file is closed before returning.
 * "gpt2" (byte-level BPE) vocabularies go to mp_tok_init_vocab(); "llama" (SentencePiece BPE:
 * tokens, scores, token_type, BOS/EOS/UNK ids, add_bos/add_eos/add_space_prefix) to
 * mp_tok_init_spm() (spm.c); other models are refused by name.
 * Does not: read tensors (the file is parsed for its metadata only).
 * Tested by: tests/test_tok.c (real Llama-3.1 and Qwen3 vocabularies written to GGUF files give
 * the same ids as their tokenizer.json).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "load/gguf.h" /* mp_gguf_open, key look-ups */
#include "tok/tok.h"   /* MpTok, MpTokVocab, mp_tok_init_vocab */

/* Reads a string array into newly allocated (pointer, length) arrays borrowing g's bytes. */
static int gguf_str_array(const MpGguf *g, const char *key, const char ***s, size_t **len, int64_t *n,
                          const char *path, MpErr *e) {
    const MpGgufKv *kv = mp_gguf_find(g, key);
    if (!kv || kv->type != MP_GGUF_ARRAY || kv->arr_type != MP_GGUF_STRING)
        return mp_err_set(e, "%s: GGUF tokenizer: '%s' is missing or not a string array", path, key);
    if (kv->arr_n > (uint64_t)INT32_MAX) return mp_err_set(e, "%s: GGUF tokenizer: '%s' is too long", path, key);
    *n = (int64_t)kv->arr_n;
    *s = calloc(kv->arr_n ? kv->arr_n : 1, sizeof **s);
    *len = calloc(kv->arr_n ? kv->arr_n : 1, sizeof **len);
    if (!*s || !*len) return mp_err_set(e, "%s: out of memory for '%s'", path, key);
    size_t cur[2] = {0, 0};
    for (uint64_t i = 0; i < kv->arr_n; i++) {
        const uint8_t *p;
        uint64_t l;
        if (mp_gguf_arr_next_str(kv, cur, &p, &l) != MP_OK)
            return mp_err_set(e, "%s: GGUF tokenizer: '%s' ends early at %llu", path, key, (unsigned long long)i);
        (*s)[i] = (const char *)p;
        (*len)[i] = (size_t)l;
    }
    return MP_OK;
}

static int gguf_opt_int(const MpGguf *g, const char *key, int64_t dflt, int64_t *out) {
    const MpGgufKv *kv = mp_gguf_find(g, key);
    *out = dflt;
    if (!kv) return MP_OK;
    if (kv->type == MP_GGUF_BOOL) {
        *out = kv->u != 0;
        return MP_OK;
    }
    return mp_gguf_kv_int(kv, out);
}

/* Reads the numeric array `key` (n entries, any numeric type) as float or int32; absent: NULL. */
static int gguf_num_array(const MpGguf *g, const char *key, int64_t n, float **f, int32_t **i32, const char *path,
                          MpErr *e) {
    const MpGgufKv *kv = mp_gguf_find(g, key);
    if (!kv) return MP_OK;
    if (kv->type != MP_GGUF_ARRAY || kv->arr_n != (uint64_t)n)
        return mp_err_set(e, "%s: GGUF tokenizer: '%s' has %llu entries for %lld tokens", path, key,
                          (unsigned long long)(kv->type == MP_GGUF_ARRAY ? kv->arr_n : 0), (long long)n);
    if (f) *f = calloc((size_t)(n ? n : 1), sizeof **f);
    if (i32) *i32 = calloc((size_t)(n ? n : 1), sizeof **i32);
    if ((f && !*f) || (i32 && !*i32)) return mp_err_set(e, "%s: out of memory for '%s'", path, key);
    for (int64_t k = 0; k < n; k++) {
        double v;
        if (mp_gguf_arr_num(kv, (uint64_t)k, &v) != MP_OK)
            return mp_err_set(e, "%s: GGUF tokenizer: '%s' is not numeric", path, key);
        if (f) (*f)[k] = (float)v;
        if (i32) (*i32)[k] = v >= -2147483648.0 && v <= 2147483647.0 ? (int32_t)v : 0;
    }
    return MP_OK;
}

static int gguf_opt_int(const MpGguf *g, const char *key, int64_t dflt, int64_t *out);

/* tokenizer.ggml.model "llama": SentencePiece BPE with scores (spm.c). Special ids outside the
 * vocabulary keep llama.cpp's defaults (BOS 1, EOS 2, UNK 0), as llama.cpp does. */
static int gguf_init_llama(MpTok *t, const MpGguf *g, const char *path, MpErr *e) {
    const char **tokens = NULL;
    size_t *tlen = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    int64_t nt = 0, ids[3], dflt[3] = {1, 2, 0}, flags[3];
    static const char *const id_keys[3] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                           "tokenizer.ggml.unknown_token_id"};
    static const char *const flag_keys[3] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                             "tokenizer.ggml.add_space_prefix"};
    int64_t flag_dflt[3] = {1, 0, 1};
    int rc = MP_ERR;
    if (gguf_str_array(g, "tokenizer.ggml.tokens", &tokens, &tlen, &nt, path, e) != MP_OK ||
        gguf_num_array(g, "tokenizer.ggml.scores", nt, &scores, NULL, path, e) != MP_OK ||
        gguf_num_array(g, "tokenizer.ggml.token_type", nt, NULL, &types, path, e) != MP_OK)
        goto done;
    for (int k = 0; k < 3; k++) {
        if (gguf_opt_int(g, id_keys[k], dflt[k], &ids[k]) != MP_OK || gguf_opt_int(g, flag_keys[k], flag_dflt[k], &flags[k]) != MP_OK) {
            mp_err_set(e, "%s: GGUF tokenizer: '%s' or '%s' is not a number", path, id_keys[k], flag_keys[k]);
            goto done;
        }
        if (ids[k] < 0 || ids[k] >= nt) ids[k] = dflt[k];
    }
    MpTokSpmVocab v = {tokens, tlen, scores, types, nt, (int32_t)ids[0], (int32_t)ids[1], (int32_t)ids[2],
                       flags[0] != 0, flags[1] != 0, flags[2] != 0};
    if (mp_tok_init_spm(t, &v, e) != MP_OK) {
        mp_err_prefix(e, "%s", path);
        goto done;
    }
    rc = MP_OK;
done:
    free(tokens), free(tlen), free(scores), free(types);
    return rc;
}

static int init_from_gguf(MpTok *t, MpGguf *gp, const char *path, MpErr *e);

int mp_tok_init_gguf(MpTok *t, const char *path, MpErr *e) {
    memset(t, 0, sizeof *t);
    MpGguf g;
    if (mp_gguf_open(&g, path, e) != MP_OK) return MP_ERR;
    return init_from_gguf(t, &g, path, e);
}

int mp_tok_init_gguf_buf(MpTok *t, const uint8_t *buf, size_t n, const char *name, MpErr *e) {
    memset(t, 0, sizeof *t);
    MpGguf g;
    if (mp_gguf_parse(&g, buf, n, name, e) != MP_OK) return MP_ERR;
    return init_from_gguf(t, &g, name, e);
}

/* Builds the tokenizer from a parsed GGUF file and frees g. */
static int init_from_gguf(MpTok *t, MpGguf *gp, const char *path, MpErr *e) {
    MpGguf g = *gp;
    const char **tokens = NULL, **merges = NULL;
    size_t *tlen = NULL, *mlen = NULL;
    int32_t *types = NULL;
    int64_t nt = 0, nm = 0, bos, eos, add_bos, add_eos;
    char model[64], pre[64];
    int rc = MP_ERR;
    const MpGgufKv *kv = mp_gguf_find(&g, "tokenizer.ggml.model");
    if (!kv || mp_gguf_kv_str(kv, model, sizeof model) != MP_OK) {
        mp_err_set(e, "%s: GGUF file has no tokenizer (tokenizer.ggml.model)", path);
        goto done;
    }
    if (!strcmp(model, "llama")) {
        rc = gguf_init_llama(t, &g, path, e);
        goto done;
    }
    if (strcmp(model, "gpt2") != 0) {
        mp_err_set(e, "%s: tokenizer.ggml.model \"%s\" is not supported (\"gpt2\": byte-level BPE and \"llama\": "
                      "SentencePiece BPE are)", path, model);
        goto done;
    }
    kv = mp_gguf_find(&g, "tokenizer.ggml.pre");
    int have_pre = kv && mp_gguf_kv_str(kv, pre, sizeof pre) == MP_OK; /* absent: init_vocab says so */
    if (gguf_str_array(&g, "tokenizer.ggml.tokens", &tokens, &tlen, &nt, path, e) != MP_OK ||
        gguf_str_array(&g, "tokenizer.ggml.merges", &merges, &mlen, &nm, path, e) != MP_OK)
        goto done;
    /* token types as the llama path reads them: an entry that is no int32 (a float of 1e24, NaN)
     * is type 0, undefined (fuzz_vocab found the unchecked conversion: undefined behaviour) */
    if (gguf_num_array(&g, "tokenizer.ggml.token_type", nt, NULL, &types, path, e) != MP_OK) goto done;
    if (gguf_opt_int(&g, "tokenizer.ggml.bos_token_id", -1, &bos) != MP_OK ||
        gguf_opt_int(&g, "tokenizer.ggml.eos_token_id", -1, &eos) != MP_OK ||
        gguf_opt_int(&g, "tokenizer.ggml.add_bos_token", -1, &add_bos) != MP_OK ||
        gguf_opt_int(&g, "tokenizer.ggml.add_eos_token", -1, &add_eos) != MP_OK) {
        mp_err_set(e, "%s: GGUF tokenizer: a bos/eos key is not an integer", path);
        goto done;
    }
    if (bos < -1 || bos >= nt || eos < -1 || eos >= nt) {
        mp_err_set(e, "%s: GGUF tokenizer: bos/eos id outside the %lld tokens", path, (long long)nt);
        goto done;
    }
    MpTokVocab v = {tokens, tlen, types, nt, merges, mlen, nm, have_pre ? pre : NULL, (int32_t)bos, (int32_t)eos,
                    (int)add_bos, add_eos < 0 ? 0 : (int)add_eos};
    if (mp_tok_init_vocab(t, &v, e) != MP_OK) {
        mp_err_prefix(e, "%s", path);
        goto done;
    }
    rc = MP_OK;
done:
    free(tokens), free(tlen), free(merges), free(mlen), free(types);
    mp_gguf_free(&g);
    if (rc == MP_OK) snprintf(t->path, sizeof t->path, "%s", path);
    return rc;
}
