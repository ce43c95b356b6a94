/* vocab.c — a byte-level BPE tokenizer from a GGUF-style vocabulary (tokenizer.ggml.* arrays,
 * model "gpt2"), as the tokenizer.json it was converted from (model-formats.md §3.6).
 *
 * Implements: mp_tok_init_vocab: CONTROL tokens become special added tokens, USER_DEFINED plain
 * added tokens, UNUSED ones are left out; the split regex, NFC and ignore_merges follow from
 * tokenizer.ggml.pre (llama.cpp's names); the tokenizer.json equivalent is built in memory and
 * loaded by hf_load.c.
 * Does not: read GGUF files (gguf_vocab.c does, then calls this).
 * Tested by: tests/test_tok.c (test_gguf_vocab_equals_json), tests/fuzz/fuzz_vocab.c.
 */
#include <stdio.h>
#include <string.h>

#include "core/util.h"   /* mp_fnv1a64 */
#include "tok/hf.h"      /* MP_TOK_MAX_IDS */
#include "tok/hf_load.h" /* mp_tok_hf_init_root */

/* The split regexes of the tokenizer.json files these GGUF pre-tokenizer names stand for
 * (llama.cpp's names; model-formats.md §3.6). */
static const char re_llama3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_qwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int mp_tok_init_vocab(MpTok *t, const MpTokVocab *v, MpErr *e) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    if (!v->pre) return mp_err_set(e, "GGUF vocabulary: tokenizer.ggml.pre is missing");
    const char *re = NULL;
    int ignore_merges = 0, nfc = 0, gpt2 = 0, add_bos = v->add_bos;
    if (!strcmp(v->pre, "llama-bpe") || !strcmp(v->pre, "llama3") || !strcmp(v->pre, "llama-v3")) {
        re = re_llama3;
        ignore_merges = 1;
        if (add_bos < 0) add_bos = 1;
    } else if (!strcmp(v->pre, "dbrx") || !strcmp(v->pre, "smaug-bpe")) {
        re = re_llama3;
    } else if (!strcmp(v->pre, "qwen2")) {
        re = re_qwen2;
        nfc = 1;
    } else if (!strcmp(v->pre, "gpt-2")) {
        gpt2 = 1;
    } else {
        return mp_err_set(e, "GGUF vocabulary: pre-tokenizer \"%.60s\" is not supported (llama-bpe, llama3, "
                             "llama-v3, dbrx, smaug-bpe, qwen2, gpt-2 are)", v->pre);
    }
    if (add_bos < 0) add_bos = 0;
    if (v->n_tokens <= 0 || v->n_tokens > MP_TOK_MAX_IDS)
        return mp_err_set(e, "GGUF vocabulary: %lld tokens is out of range [1, %d]", (long long)v->n_tokens,
                          MP_TOK_MAX_IDS);
    if ((add_bos && (v->bos_id < 0 || v->bos_id >= v->n_tokens)) ||
        (v->add_eos > 0 && (v->eos_id < 0 || v->eos_id >= v->n_tokens)))
        return mp_err_set(e, "GGUF vocabulary: BOS/EOS id out of range");
    int rc = MP_ERR;
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    for (int64_t i = 0; i < v->n_tokens; i++) {
        int type = v->token_types ? v->token_types[i] : 1;
        if (type == 5) continue; /* UNUSED: "[PAD{id}]" fillers */
        json_object_setn_new(vocab, v->tokens[i], v->token_lens[i], json_integer(i));
        if (type == 3 || type == 4) /* CONTROL → special, USER_DEFINED → plain added token */
            json_array_append_new(added, json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
                                                   "content", v->tokens[i], v->token_lens[i], "single_word", 0,
                                                   "lstrip", 0, "rstrip", 0, "normalized", 0, "special", type == 3));
    }
    for (int64_t i = 0; i < v->n_merges; i++)
        json_array_append_new(merges, json_stringn(v->merges[i], v->merge_lens[i]));
    json_t *bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                           "use_regex", gpt2);
    json_t *pre = gpt2 ? bl
                       : json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type",
                                   "Split", "pattern", "Regex", re, "behavior", "Isolated", "invert", 0, bl);
    json_t *single = json_array(), *specials = json_object();
    char name[32];
    if (add_bos) {
        snprintf(name, sizeof name, "bos%d", v->bos_id);
        json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", name, "type_id", 0));
        json_object_set_new(specials, name, json_pack("{s:s, s:[i], s:[]}", "id", name, "ids", v->bos_id, "tokens"));
    }
    json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0));
    if (v->add_eos > 0) {
        snprintf(name, sizeof name, "eos%d", v->eos_id);
        json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", name, "type_id", 0));
        json_object_set_new(specials, name, json_pack("{s:s, s:[i], s:[]}", "id", name, "ids", v->eos_id, "tokens"));
    }
    json_t *post = json_pack("{s:s, s:o, s:o}", "type", "TemplateProcessing", "single", single, "special_tokens", specials);
    json_t *root = json_pack("{s:o, s:o, s:o, s:o, s:{s:s}, s:{s:s, s:b, s:o, s:o}}", "added_tokens", added,
                             "normalizer", nfc ? json_pack("{s:s}", "type", "NFC") : json_null(), "pre_tokenizer", pre,
                             "post_processor", post, "decoder", "type", "ByteLevel", "model", "type", "BPE",
                             "ignore_merges", ignore_merges, "vocab", vocab, "merges", merges);
    if (!root) {
        mp_err_set(e, "GGUF vocabulary: out of memory");
    } else {
        rc = mp_tok_hf_init_root(t, root, NULL, 0, e);
        if (rc != MP_OK) mp_err_prefix(e, "GGUF vocabulary");
    }
    json_decref(root);
    if (rc != MP_OK) return MP_ERR;
    uint64_t h = mp_fnv1a64(v->pre, strlen(v->pre), MP_FNV_INIT);
    for (int64_t i = 0; i < v->n_tokens; i++) h = mp_fnv1a64(v->tokens[i], v->token_lens[i] + 0, h);
    for (int64_t i = 0; i < v->n_merges; i++) h = mp_fnv1a64(v->merges[i], v->merge_lens[i], h);
    t->hash = h;
    return MP_OK;
}

