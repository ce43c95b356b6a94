/* gguf_vocab.c — a tokenizer from a GGUF file's vocabulary (model-formats.md §3.6).
 *
 * Implements: mp_tok_init_gguf(): reads tokenizer.ggml.{model,pre,tokens,token_type,merges,
 * bos_token_id,eos_token_id,add_bos_token,add_eos_token} with the project's GGUF reader and hands
 * the arrays to mp_tok_init_vocab(), which copies them, so the file is closed before returning.
 * Only "gpt2" (byte-level BPE) vocabularies are supported; others are refused by name.
 * Does not: read tensors (the file is parsed for its metadata only).
 * Tested by: tests/test_tok.c (real Llama-3.1 and Qwen3 vocabularies written to GGUF files give
 * the same ids as their tokenizer.json).
 */
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

int mp_tok_init_gguf(MpTok *t, const char *path, MpErr *e) {
    memset(t, 0, sizeof *t);
    MpGguf g;
    if (mp_gguf_open(&g, path, e) != MP_OK) return MP_ERR;
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
    if (strcmp(model, "gpt2") != 0) {
        mp_err_set(e, "%s: GGUF tokenizer model \"%s\" is not supported (only byte-level BPE, \"gpt2\")", path, model);
        goto done;
    }
    kv = mp_gguf_find(&g, "tokenizer.ggml.pre");
    int have_pre = kv && mp_gguf_kv_str(kv, pre, sizeof pre) == MP_OK; /* absent: init_vocab says so */
    if (gguf_str_array(&g, "tokenizer.ggml.tokens", &tokens, &tlen, &nt, path, e) != MP_OK ||
        gguf_str_array(&g, "tokenizer.ggml.merges", &merges, &mlen, &nm, path, e) != MP_OK)
        goto done;
    kv = mp_gguf_find(&g, "tokenizer.ggml.token_type");
    if (kv) {
        if (kv->type != MP_GGUF_ARRAY || kv->arr_n != (uint64_t)nt) {
            mp_err_set(e, "%s: GGUF tokenizer: token_type has %llu entries for %lld tokens", path,
                       (unsigned long long)kv->arr_n, (long long)nt);
            goto done;
        }
        types = calloc((size_t)(nt ? nt : 1), sizeof *types);
        if (!types) {
            mp_err_set(e, "%s: out of memory", path);
            goto done;
        }
        for (int64_t i = 0; i < nt; i++) {
            double v;
            if (mp_gguf_arr_num(kv, (uint64_t)i, &v) != MP_OK) {
                mp_err_set(e, "%s: GGUF tokenizer: token_type is not numeric", path);
                goto done;
            }
            types[i] = (int32_t)v;
        }
    }
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
    return rc;
}
