/* normalize.c — the normalizer of a tokenizer.json tokenizer, applied to the text between added
 * tokens (and to the content of added tokens with normalized true).
 *
 * Implements: the normalizer steps in order, as HF's Sequence applies them: Unicode normal forms
 * (NFC, NFD, NFKC, NFKD through unicode.c), Prepend (to non-empty text only), Replace (every
 * match of a String or Regex pattern, found as the Split pre-tokenizer finds them).
 * Does not: Lowercase, Strip, StripAccents, BertNormalizer, Precompiled, Nmt (refused by
 * hf_parts.c).
 * Tested by: tests/test_tok_nfkc.c (normal forms), test_tok_hfspm.c (Prepend, Replace), test_tok.c (NFC).
 */
#include "tok/hf.h"        /* MpTokImpl, MpTokNorm */
#include "tok/normalize.h" /* mp_tok_normalize_text */
#include "tok/pretok.h"    /* mp_tok_find_segments */
#include "tok/unicode.h"   /* mp_tok_normalize */

/* Appends the normalized s[0..n) (valid UTF-8) to out: the normalizer steps in order, as HF's
 * Sequence applies them. */
int mp_tok_normalize_text(MpTokImpl *m, MpTokBuf *out, const char *s, size_t n, MpErr *e) {
    const char *cur = s;
    size_t cn = n;
    for (int k = 0; k < m->n_norms; k++) {
        const MpTokNorm *nm = &m->norms[k];
        MpTokBuf *dst = k % 2 ? &m->nsb : &m->nsa;
        dst->n = 0;
        if (nm->kind == MP_TOK_NORM_FORM) {
            if (mp_tok_normalize(dst, cur, cn, nm->form, &m->nfc, e) != MP_OK) return MP_ERR;
        } else if (nm->kind == MP_TOK_NORM_PREPEND) { /* HF prepends to non-empty text only */
            if (cn && (mp_tok_buf_append(dst, nm->text, nm->text_len, e) != MP_OK || mp_tok_buf_append(dst, cur, cn, e) != MP_OK))
                return MP_ERR;
        } else { /* Replace: every match of the pattern (HF's Pattern, as in Split) by the content */
            long ns = mp_tok_find_segments(m, &nm->pat, cur, cn, e);
            if (ns < 0) return MP_ERR;
            for (long i = 0; i < ns; i++) {
                const MpTokSeg *g = &m->segs[i];
                if (mp_tok_buf_append(dst, g->is_match ? nm->text : cur + g->off, g->is_match ? nm->text_len : g->len, e) != MP_OK)
                    return MP_ERR;
            }
        }
        cur = dst->data ? dst->data : "";
        cn = dst->n;
    }
    return mp_tok_buf_append(out, cur, cn, e);
}

