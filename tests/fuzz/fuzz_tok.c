/* fuzz_tok.c — libFuzzer target: tokenizer.json (+ tokenizer_config.json) → tokenizer, then
 * encode and decode (issues 14, 19).
 *
 * Input: the tokenizer.json bytes, optionally followed by "\n\x01\n" and tokenizer_config.json
 * bytes, optionally followed by another "\n\x01\n" and a text. The tokenizer must either load or
 * fail with a message; a loaded one encodes the text (with and without specials) and fixed texts,
 * every id it gives must be a token, and decode must take every id back (any id outside the
 * vocabulary is an error, not a crash).
 * Build and run: make -f tests/fuzz/Makefile fuzz. Seeds: tests/fuzz/tok_seeds.js (reduced real
 * tokenizer.json files of Llama-3.1, Qwen3, llama2 and Gemma-3, with their configs, and texts).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tok/tok.h" /* mp_tok_init_json, encode, decode */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char sep[3] = {'\n', 1, '\n'};

/* Splits at the next separator: returns the length of the first part, *rest the remainder. */
static size_t split(const char *p, size_t n, const char **rest, size_t *rest_n) {
    const char *s = memmem(p, n, sep, 3);
    if (!s) {
        *rest = NULL;
        *rest_n = 0;
        return n;
    }
    *rest = s + 3;
    *rest_n = n - (size_t)(s - p) - 3;
    return (size_t)(s - p);
}

static void roundtrip(MpTok *t, const char *text, size_t n, int add) {
    MpTokIds ids = {0};
    MpTokBuf out = {0};
    MpErr e;
    e.msg[0] = 0;
    if (mp_tok_encode(t, &ids, text, n, add, &e) == MP_OK) {
        for (size_t i = 0; i < ids.n; i++)
            if (ids.ids[i] < 0 || ids.ids[i] >= t->n_ids || !mp_tok_id_to_token(t, ids.ids[i])) __builtin_trap();
        if (mp_tok_decode(t, &out, ids.ids, ids.n, 0, &e) != MP_OK || mp_tok_decode(t, &out, ids.ids, ids.n, 1, &e) != MP_OK)
            __builtin_trap(); /* ids of encode always decode */
    } else if (e.msg[0] == 0) {
        __builtin_trap();
    }
    mp_tok_ids_free(&ids);
    mp_tok_buf_free(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *p = (const char *)data, *cfg, *text;
    size_t cfg_n, text_n, json_n = split(p, size, &cfg, &cfg_n);
    if (cfg) cfg_n = split(cfg, cfg_n, &text, &text_n);
    else text = NULL, text_n = 0;
    MpTok t;
    MpErr e;
    e.msg[0] = 0;
    if (mp_tok_init_json(&t, p, json_n, cfg, cfg_n, &e) != MP_OK) {
        if (e.msg[0] == 0 || t.impl || t.spm) __builtin_trap();
        return 0;
    }
    static const char *fixed[] = {"", " ", "Hello world! It's 2025.\n\n  x", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82",
                                  "<s>a</s><|begin_of_text|> <unk>", "\xff\xfe bad \xc3", "\xe2\x96\x81\xe2\x96\x81 x"};
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) roundtrip(&t, fixed[k], strlen(fixed[k]), (int)(k & 1));
    if (text) {
        roundtrip(&t, text, text_n, 0);
        roundtrip(&t, text, text_n, 1);
        /* arbitrary ids: decode either works or says why */
        MpTokBuf out = {0};
        const int32_t *ids = (const int32_t *)(const void *)text;
        size_t n = text_n / sizeof(int32_t);
        int32_t buf[64];
        if (n > 64) n = 64;
        memcpy(buf, ids, n * sizeof *buf);
        e.msg[0] = 0;
        if (mp_tok_decode(&t, &out, buf, n, 0, &e) != MP_OK && e.msg[0] == 0) __builtin_trap();
        mp_tok_buf_free(&out);
    }
    mp_tok_free(&t);
    return 0;
}
