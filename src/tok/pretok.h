/* pretok.h — the entry points of pretok.c: the pre-tokenizer's steps (encode.c calls them) and the
 * pattern search normalize.c's Replace shares; not exported.
 * Tested by: tests/test_tok.c, test_tok_hfspm.c.
 */
#ifndef MP_TOK_PRETOK_H
#define MP_TOK_PRETOK_H

#include <stddef.h>

#include "core/err.h" /* MpErr */
#include "tok/hf.h"   /* MpTokImpl, MpTokPiece, MpTokStep */

int mp_tok_push_piece(MpTokPiece **p, size_t *cap, size_t *n, size_t off, size_t len, MpErr *e);
/* Splits s[0..n) into segments (m->segs) as HF's Pattern::find_matches does; returns their
 * number or -1. */
long mp_tok_find_segments(MpTokImpl *m, const MpTokStep *st, const char *s, size_t n, MpErr *e);
/* Runs the pre-tokenizer steps over s[0..n): the pieces end up in m->pa[0..*np) as offsets into
 * *buf (s itself, or a scratch buffer of m when a step rewrote the text). */
int mp_tok_pretokenize(MpTokImpl *m, const char *s, size_t n, const char **buf, size_t *np, MpErr *e);

#endif
