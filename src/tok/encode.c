/* encode.c — text to ids (mp_tok_encode), for every kind of tokenizer.
 *
 * Implements, for a tokenizer.json tokenizer, HF's order: invalid UTF-8 → U+FFFD; added tokens
 * with normalized false matched on the raw text (leftmost-longest, lstrip / rstrip /
 * single_word); per gap: the normalizer, added tokens with normalized true, the pre-tokenizer,
 * BPE per piece; BOS/EOS of the post-processor with add_special. The byte vocabulary and GGUF
 * SentencePiece vocabularies (spm.c) are dispatched to from here.
 * Does not: offsets, truncation, padding, pairs of sequences.
 * Tested by: tests/test_tok.c, test_tok_hfspm.c, test_tok_nfkc.c, test_tok_spm.c.
 */
#include <string.h>

#include "tok/bpe.h"       /* mp_tok_bpe_piece */
#include "tok/hf.h"        /* MpTokImpl */
#include "tok/normalize.h" /* mp_tok_normalize_text */
#include "tok/pretok.h"    /* mp_tok_pretokenize */
#include "tok/spm.h"       /* mp_tok_spm_encode */
#include "tok/unicode.h"   /* UTF-8 helpers, white space and word characters */

/* ================================== added tokens ================================== */

static size_t utf8_prev_start(const unsigned char *s, size_t i) {
    while (i > 0 && (s[i - 1] & 0xC0) == 0x80) i--;
    return i > 0 ? i - 1 : 0;
}

/* Finds the leftmost-longest added token (of the subset normalized == norm) in s[from..n).
 * Returns 1 with its index and span (after lstrip/rstrip) or 0. Matches rejected by
 * single_word are skipped, as HF's matcher does. */
static int added_find(const MpTokImpl *m, const char *s, size_t n, size_t from, int norm, size_t floor, int *which,
                      size_t *ms, size_t *me) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = from; i < n; i++) {
        int lo = m->added_first[u[i]], hi = m->added_first[u[i] + 1];
        for (int k = lo; k < hi; k++) {
            const MpTokAdded *a = &m->added[k];
            if (a->normalized != norm || a->len > n - i || memcmp(s + i, m->added_text.data + a->off, a->len)) continue;
            size_t st = i, en = i + a->len;
            if (a->single_word) {
                uint32_t cp = 0;
                int before = st > 0 && (mp_tok_utf8_next(u + utf8_prev_start(u, st), n - utf8_prev_start(u, st), &cp),
                                        mp_tok_is_word_char(cp));
                int after = en < n && (mp_tok_utf8_next(u + en, n - en, &cp), mp_tok_is_word_char(cp));
                if (before || after) {
                    i = en - 1; /* HF's matcher moved past this match */
                    goto next_pos;
                }
            }
            if (a->lstrip) {
                while (st > floor) {
                    size_t p = utf8_prev_start(u, st);
                    uint32_t cp;
                    mp_tok_utf8_next(u + p, n - p, &cp);
                    if (!mp_tok_is_white_space(cp)) break;
                    st = p;
                }
            }
            if (a->rstrip) {
                while (en < n) {
                    uint32_t cp;
                    int l = mp_tok_utf8_next(u + en, n - en, &cp);
                    if (!mp_tok_is_white_space(cp)) break;
                    en += (size_t)l;
                }
            }
            *which = k;
            *ms = st;
            *me = en;
            return 1;
        }
    next_pos:;
    }
    return 0;
}

/* ====================================== encode ====================================== */

/* Pre-tokenizes and BPE-encodes one normalized segment. */
static int encode_normalized(MpTok *t, MpTokIds *out, const char *s, size_t n, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (n == 0) return MP_OK;
    const char *buf;
    size_t na;
    if (mp_tok_pretokenize(m, s, n, &buf, &na, e) != MP_OK) return MP_ERR;
    for (size_t i = 0; i < na; i++)
        if (mp_tok_bpe_piece(t, out, buf + m->pa[i].off, m->pa[i].len, e) != MP_OK) return MP_ERR;
    return MP_OK;
}

/* A gap between raw-matched added tokens: normalize, match normalized added tokens, encode. */
static int encode_gap(MpTok *t, MpTokIds *out, const char *s, size_t n, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (n == 0) return MP_OK;
    if (m->n_norms) {
        m->norm.n = 0;
        if (mp_tok_normalize_text(m, &m->norm, s, n, e) != MP_OK) return MP_ERR;
        s = m->norm.data ? m->norm.data : "";
        n = m->norm.n;
    }
    if (m->n_added_norm == 0) return encode_normalized(t, out, s, n, e);
    /* normalized added tokens: the normalized text is kept in its own buffer meanwhile */
    MpTokBuf text = {0};
    if (mp_tok_buf_append(&text, s, n, e) != MP_OK) return MP_ERR;
    size_t pos = 0;
    int rc = MP_OK, k;
    size_t ms, me;
    while (rc == MP_OK && added_find(m, text.data, n, pos, 1, pos, &k, &ms, &me)) {
        rc = encode_normalized(t, out, text.data + pos, ms - pos, e);
        m->at_start = 0;
        if (rc == MP_OK) rc = mp_tok_ids_push(out, m->added[k].id, e);
        pos = me;
    }
    if (rc == MP_OK) rc = encode_normalized(t, out, text.data + pos, n - pos, e);
    mp_tok_buf_free(&text);
    return rc;
}

static int encode_impl(MpTok *t, MpTokIds *out, const char *text, size_t len, int add_special, MpErr *e) {
    if (t->bytes) {
        if (add_special && t->bos_id >= 0 && mp_tok_ids_push(out, t->bos_id, e) != MP_OK) return MP_ERR;
        for (size_t i = 0; i < len; i++)
            if (mp_tok_ids_push(out, (int32_t)(unsigned char)text[i], e) != MP_OK) return MP_ERR;
        return MP_OK;
    }
    if (t->spm) return mp_tok_spm_encode(t->spm, out, text, len, add_special, e);
    MpTokImpl *m = t->impl;
    MP_ASSERT(m != NULL);
    if (!mp_tok_utf8_valid(text, len)) {
        m->clean.n = 0;
        if (mp_tok_utf8_sanitize(&m->clean, text, len, NULL, e) != MP_OK) return MP_ERR;
        text = m->clean.data;
        len = m->clean.n;
    }
    if (add_special)
        for (int i = 0; i < m->n_pre; i++)
            if (mp_tok_ids_push(out, m->pre_ids[i], e) != MP_OK) return MP_ERR;
    size_t pos = 0, ms, me;
    int k;
    while (m->n_added > m->n_added_norm && added_find(m, text, len, pos, 0, pos, &k, &ms, &me)) {
        m->at_start = pos == 0;
        if (encode_gap(t, out, text + pos, ms - pos, e) != MP_OK || mp_tok_ids_push(out, m->added[k].id, e) != MP_OK)
            return MP_ERR;
        pos = me;
    }
    m->at_start = pos == 0;
    if (encode_gap(t, out, text + pos, len - pos, e) != MP_OK) return MP_ERR;
    if (add_special)
        for (int i = 0; i < m->n_post; i++)
            if (mp_tok_ids_push(out, m->post_ids[i], e) != MP_OK) return MP_ERR;
    return MP_OK;
}

int mp_tok_encode(MpTok *t, MpTokIds *out, const char *text, size_t len, int add_special, MpErr *e) {
    int rc = encode_impl(t, out, text, len, add_special, e);
    if (rc != MP_OK && t->path[0]) mp_err_prefix(e, "%s", t->path); /* e.g. the split regex's match limit */
    return rc;
}

