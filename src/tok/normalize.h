/* normalize.h — the entry point of normalize.c: tokenizer.json's normalizer steps over a text
 * (encode.c and hf_load.c call it); not exported.
 * Tested by: tests/test_tok.c, test_tok_nfkc.c.
 */
#ifndef MP_TOK_NORMALIZE_H
#define MP_TOK_NORMALIZE_H

#include <stddef.h>

#include "core/err.h" /* MpErr */
#include "tok/hf.h"   /* MpTokImpl */
#include "tok/text.h" /* MpTokBuf */

/* Appends the normalized s[0..n) (valid UTF-8) to out: the normalizer steps in order. */
int mp_tok_normalize_text(MpTokImpl *m, MpTokBuf *out, const char *s, size_t n, MpErr *e);

#endif
