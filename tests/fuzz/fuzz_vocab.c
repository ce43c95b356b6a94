/* fuzz_vocab.c — libFuzzer target: a GGUF file's tokenizer.ggml.* vocabulary ("llama" SentencePiece
 * and "gpt2" byte-level BPE) → tokenizer, then encode and decode (issues 14, 19).
 *
 * The bytes are parsed as a GGUF file (mp_tok_init_gguf_buf); the tokenizer must either load or
 * fail with a message; a loaded one encodes fixed texts with and without BOS/EOS, every id must be
 * a token, and decode must take them back; ids outside the vocabulary are an error, not a crash.
 * Build and run: make -f tests/fuzz/Makefile fuzz. Seeds: tests/fuzz/vocab_seeds.c (the
 * vocabulary of stories260K.gguf without its tensors, the same with types/scores removed, and a
 * small byte-level vocabulary).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tok/tok.h" /* mp_tok_init_gguf_buf, encode, decode */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MpTok t;
    MpErr e;
    e.msg[0] = 0;
    if (mp_tok_init_gguf_buf(&t, data, size, "vocab.gguf", &e) != MP_OK) {
        if (e.msg[0] == 0 || t.impl || t.spm) __builtin_trap();
        return 0;
    }
    static const char *texts[] = {"", " ", "Once upon a time, there was a little girl named Lily.\n\n  x",
                                  "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 <s>a</s><unk> <0x41>",
                                  "\xff\xfe bad \xc3", "\xe2\x96\x81\xe2\x96\x81 x  "};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        for (int add = 0; add < 2; add++) {
            MpTokIds ids = {0};
            MpTokBuf out = {0};
            e.msg[0] = 0;
            if (mp_tok_encode(&t, &ids, texts[k], strlen(texts[k]), add, &e) == MP_OK) {
                for (size_t i = 0; i < ids.n; i++)
                    if (ids.ids[i] < 0 || ids.ids[i] >= t.n_ids) __builtin_trap();
                if (mp_tok_decode(&t, &out, ids.ids, ids.n, add, &e) != MP_OK) __builtin_trap();
            } else if (e.msg[0] == 0) {
                __builtin_trap();
            }
            mp_tok_ids_free(&ids);
            mp_tok_buf_free(&out);
        }
    }
    int32_t bad[3] = {-1, t.n_ids, 0};
    MpTokBuf out = {0};
    e.msg[0] = 0;
    if (mp_tok_decode(&t, &out, bad, 3, 0, &e) == MP_OK || e.msg[0] == 0) __builtin_trap();
    mp_tok_buf_free(&out);
    mp_tok_free(&t);
    return 0;
}
