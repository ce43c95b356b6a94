/* bpe.h — the entry points of bpe.c: the vocab and merge maps (hf_load.c fills them), BPE of one
 * pre-token (encode.c), and the growth of scratch arrays the pre-tokenizer shares; not exported.
 * Tested by: tests/test_tok.c, test_tok_hfspm.c, test_tok_nfkc.c (ids equal to HF's).
 */
#ifndef MP_TOK_BPE_H
#define MP_TOK_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr, MP_OK */
#include "tok/hf.h"   /* MpTok, MpTokImpl */
#include "tok/text.h" /* MpTokIds */

/* Grows *p (elements of elem bytes) to at least need elements; doubles from 64. The check that
 * there is room already is inline (the pre-tokenizer calls it once per match). */
int mp_tok_grow_slow(void **p, size_t *cap, size_t need, size_t elem, MpErr *e);
static inline int mp_tok_grow(void **p, size_t *cap, size_t need, size_t elem, MpErr *e) {
    return need <= *cap ? MP_OK : mp_tok_grow_slow(p, cap, need, elem, e);
}
int32_t mp_tok_vocab_find(const MpTokImpl *m, const void *p, size_t n); /* -1: none */
void mp_tok_vocab_insert(MpTokImpl *m, int32_t id);
void mp_tok_merge_insert(MpTokImpl *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id);
size_t mp_tok_pow2_at_least(size_t n); /* a power of two >= n (at least 16) */
/* BPE of one pre-token (raw bytes), appending its ids. */
int mp_tok_bpe_piece(MpTok *t, MpTokIds *out, const char *p, size_t n, MpErr *e);

#endif
