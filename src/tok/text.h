/* text.h — the tokenizer module's lowest layer: growable id and byte buffers, UTF-8 repair.
 *
 * Implements (text.c): MpTokIds / MpTokBuf and their push, append and free; replacing invalid
 * UTF-8 by U+FFFD (the WHATWG rule) and checking UTF-8 validity.
 * Does not: know anything about tokenizers (every other file of src/tok/ builds on this one; it
 * includes none of them).
 * Tested by: tests/test_tok.c (test_utf8_sanitize) and every tokenizer test through encode/decode.
 */
#ifndef MP_TOK_TEXT_H
#define MP_TOK_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr, MP_OK/MP_ERR */

/* A growable array of token ids (owned). */
typedef struct MpTokIds {
    int32_t *ids; /* [n] */
    size_t n, cap;
} MpTokIds;

/* A growable byte buffer (owned), e.g. decoded text; always NUL-terminated when non-empty. */
typedef struct MpTokBuf {
    char *data; /* [n] bytes + NUL */
    size_t n, cap;
} MpTokBuf;

void mp_tok_ids_free(MpTokIds *ids);
void mp_tok_buf_free(MpTokBuf *b);
int mp_tok_ids_push(MpTokIds *ids, int32_t id, MpErr *e);
int mp_tok_buf_append(MpTokBuf *b, const void *data, size_t n, MpErr *e);

/* Appends src[0..n) to out with invalid UTF-8 replaced by U+FFFD (one per maximal subpart, the
 * WHATWG rule); *n_replaced (may be NULL) gets the number of replacements. */
int mp_tok_utf8_sanitize(MpTokBuf *out, const char *src, size_t n, size_t *n_replaced, MpErr *e);
/* 1 when src[0..n) is well-formed UTF-8. */
int mp_tok_utf8_valid(const char *src, size_t n);

#endif
