/* unicode.h — Unicode as HF tokenizers sees it (unicode.c): normal forms, regex classes, UTF-8
 * code points.
 *
 * Implements nothing itself; declares unicode.c's helpers, used by the tokenizer.json pipeline
 * (hf_*.c, normalize.c, pretok.c, encode.c, bpe.c) and spm.c. Builds only on text.h.
 */
#ifndef MP_TOK_UNICODE_H
#define MP_TOK_UNICODE_H

#include <stddef.h>
#include <stdint.h>

#include "tok/text.h" /* MpTokBuf, MpErr */

/* Scratch for NFC: a UTF-32 buffer reused across calls (owned). */
typedef struct MpTokNfcWork {
    int32_t *cps; /* [cap] */
    size_t cap;
} MpTokNfcWork;

/* Appends NFC(s[0..n)) to out, as HF tokenizers' NFC normalizer computes it: utf8proc's NFC,
 * except that code points HF's older normalization tables do not know are left alone (they
 * neither reorder, decompose nor compose, and block composition across them). s must be valid
 * UTF-8. */
int mp_tok_nfc(MpTokBuf *out, const char *s, size_t n, MpTokNfcWork *w, MpErr *e);
/* Unicode normal forms as HF tokenizers' normalizers compute them (NFC as mp_tok_nfc; the others
 * the same way: utf8proc, with the code points HF's tables do not know left alone). */
enum { MP_TOK_NF_C = 1, MP_TOK_NF_D, MP_TOK_NF_KC, MP_TOK_NF_KD };
int mp_tok_normalize(MpTokBuf *out, const char *s, size_t n, int form, MpTokNfcWork *w, MpErr *e);
void mp_tok_nfc_work_free(MpTokNfcWork *w);

/* Rewrites a split pattern from tokenizer.json for PCRE2 (UTF+UCP) so that \p{L}, \p{N}, \s,
 * \S (and \P{L}, \P{N} outside classes) mean what they mean in HF's regex engine (Oniguruma,
 * Unicode 16 classes; \s = White_Space without U+180E). Appends the result (NUL-terminated). */
int mp_tok_regex_patch(MpTokBuf *out, const char *pattern, size_t n, MpErr *e);

/* Decodes one code point of valid UTF-8 at s (n > 0 bytes left); returns its length. */
int mp_tok_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);
/* Encodes cp as UTF-8 into b (4 bytes room); returns the length. */
int mp_tok_utf8_put(unsigned char *b, uint32_t cp);

/* Rust char::is_whitespace (Unicode White_Space), for added tokens' lstrip/rstrip. */
int mp_tok_is_white_space(uint32_t cp);
/* Word character (Rust regex \\w, approximately) for added tokens' single_word. */
int mp_tok_is_word_char(uint32_t cp);

#endif
