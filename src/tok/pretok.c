/* pretok.c — the pre-tokenizer of a tokenizer.json tokenizer: the normalized text cut into pieces.
 *
 * Implements: Split steps (Regex through PCRE2 or String patterns; behaviours Removed, Isolated,
 * MergedWithPrevious, MergedWithNext, Contiguous; invert) with HF's Pattern::find_matches
 * semantics for empty matches; ByteLevel's add_prefix_space; Metaspace (spaces → replacement,
 * prepend_scheme always / first / never); mp_tok_pretokenize runs the steps in order.
 * Does not: offsets; the other pre-tokenizer types (refused by hf_parts.c).
 * Tested by: tests/test_tok.c (Split behaviours, real regexes), test_tok_hfspm.c (Metaspace).
 */
#include <stdlib.h>
#include <string.h>

#include "tok/bpe.h"     /* mp_tok_grow */
#include "tok/hf.h"      /* MpTokImpl, MpTokStep */
#include "tok/pretok.h"  /* its entry points */
#include "tok/unicode.h" /* mp_tok_utf8_next */

/* ================================== pre-tokenizer ================================== */

int mp_tok_push_piece(MpTokPiece **p, size_t *cap, size_t *n, size_t off, size_t len, MpErr *e) {
    if (len == 0) return MP_OK; /* HF drops empty splits */
    if (mp_tok_grow((void **)p, cap, *n + 1, sizeof **p, e) != MP_OK) return MP_ERR;
    (*p)[*n].off = off;
    (*p)[*n].len = len;
    (*n)++;
    return MP_OK;
}

/* Splits one piece into (offset, length, is_match) segments covering it, as HF's
 * Pattern::find_matches over Oniguruma's find_iter does: an empty match is kept (it splits the
 * text) unless it sits right at the end of the previous match, in which case the search moves
 * on by one character. Returns the number of segments or -1. */
long mp_tok_find_segments(MpTokImpl *m, const MpTokStep *st, const char *s, size_t n, MpErr *e) {
    size_t ns = 0, prev = 0, pos = 0, last_end = SIZE_MAX;
    while (pos <= n) {
        size_t ms, me;
        if (st->kind == MP_TOK_STEP_SPLIT_STR) {
            if (st->lit_len == 0 || pos + st->lit_len > n) break;
            const char *hit = NULL;
            for (size_t i = pos; i + st->lit_len <= n; i++)
                if (!memcmp(s + i, st->lit, st->lit_len)) {
                    hit = s + i;
                    break;
                }
            if (!hit) break;
            ms = (size_t)(hit - s);
            me = ms + st->lit_len;
        } else {
            int rc = st->jit ? pcre2_jit_match(st->re, (PCRE2_SPTR)s, n, pos, 0, m->md, NULL)
                             : pcre2_match(st->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, m->md, NULL);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0) {
                PCRE2_UCHAR msg[256];
                pcre2_get_error_message(rc, msg, sizeof msg);
                return mp_err_set(e, "split regex: %s", (const char *)msg), -1;
            }
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(m->md);
            ms = ov[0];
            me = ov[1];
        }
        if (me == ms && me == last_end) { /* empty match right after the last one: step a char */
            if (pos >= n) break;
            uint32_t cp;
            pos += (size_t)mp_tok_utf8_next((const unsigned char *)s + pos, n - pos, &cp);
            continue;
        }
        pos = last_end = me;
        if (mp_tok_grow((void **)&m->segs, &m->seg_cap, ns + 2, sizeof *m->segs, e) != MP_OK) return -1;
        if (ms > prev) m->segs[ns++] = (MpTokSeg){prev, ms - prev, 0};
        m->segs[ns++] = (MpTokSeg){ms, me - ms, 1};
        prev = me;
    }
    if (mp_tok_grow((void **)&m->segs, &m->seg_cap, ns + 1, sizeof *m->segs, e) != MP_OK) return -1;
    if (prev < n) m->segs[ns++] = (MpTokSeg){prev, n - prev, 0};
    if (st->invert)
        for (size_t i = 0; i < ns; i++) m->segs[i].is_match = !m->segs[i].is_match;
    return (long)ns;
}

/* Appends a piece, empty ones included (split_step drops them at the end, as HF does after
 * applying the behaviour). */
static int push_seg(MpTokPiece **p, size_t *cap, size_t *n, size_t off, size_t len, MpErr *e) {
    if (mp_tok_grow((void **)p, cap, *n + 1, sizeof **p, e) != MP_OK) return MP_ERR;
    (*p)[*n].off = off;
    (*p)[*n].len = len;
    (*n)++;
    return MP_OK;
}

/* One split step over every piece of (buf, in) into out (same buffer). */
static int mp_tok_split_step(MpTokImpl *m, const MpTokStep *st, const char *buf, const MpTokPiece *in, size_t nin,
                      MpTokPiece **out, size_t *out_cap, size_t *nout, MpErr *e) {
    *nout = 0;
    for (size_t p = 0; p < nin; p++) {
        const char *s = buf + in[p].off;
        long ns = mp_tok_find_segments(m, st, s, in[p].len, e);
        if (ns < 0) return MP_ERR;
        MpTokSeg *g = m->segs;
        size_t base = in[p].off;
        switch (st->behavior) {
        case MP_TOK_BEH_REMOVED:
            for (long i = 0; i < ns; i++)
                if (!g[i].is_match && push_seg(out, out_cap, nout, base + g[i].off, g[i].len, e) != MP_OK) return MP_ERR;
            break;
        case MP_TOK_BEH_ISOLATED:
            for (long i = 0; i < ns; i++)
                if (push_seg(out, out_cap, nout, base + g[i].off, g[i].len, e) != MP_OK) return MP_ERR;
            break;
        case MP_TOK_BEH_MERGED_PREV: {
            /* a match is glued to the piece before it (unless that was a match too) */
            size_t first = *nout;
            int prev_match = 0;
            for (long i = 0; i < ns; i++) {
                if (g[i].is_match && !prev_match && *nout > first)
                    (*out)[*nout - 1].len += g[i].len;
                else if (push_seg(out, out_cap, nout, base + g[i].off, g[i].len, e) != MP_OK)
                    return MP_ERR;
                prev_match = g[i].is_match;
            }
            break;
        }
        case MP_TOK_BEH_MERGED_NEXT: {
            /* a match is glued to the piece after it: walk backwards, then reverse */
            size_t first = *nout;
            int prev_match = 0;
            for (long i = ns - 1; i >= 0; i--) {
                if (g[i].is_match && !prev_match && *nout > first) {
                    (*out)[*nout - 1].off = base + g[i].off;
                    (*out)[*nout - 1].len += g[i].len;
                } else if (push_seg(out, out_cap, nout, base + g[i].off, g[i].len, e) != MP_OK)
                    return MP_ERR;
                prev_match = g[i].is_match;
            }
            for (size_t a = first, b = *nout ? *nout - 1 : 0; a < b; a++, b--) {
                MpTokPiece tmp = (*out)[a];
                (*out)[a] = (*out)[b];
                (*out)[b] = tmp;
            }
            break;
        }
        case MP_TOK_BEH_CONTIGUOUS: {
            size_t first = *nout;
            int prev_match = 0;
            for (long i = 0; i < ns; i++) {
                if (g[i].is_match == prev_match && *nout > first)
                    (*out)[*nout - 1].len += g[i].len;
                else if (push_seg(out, out_cap, nout, base + g[i].off, g[i].len, e) != MP_OK)
                    return MP_ERR;
                prev_match = g[i].is_match;
            }
            break;
        }
        default: MP_ASSERT(0);
        }
    }
    size_t k = 0; /* drop empty pieces */
    for (size_t i = 0; i < *nout; i++)
        if ((*out)[i].len) (*out)[k++] = (*out)[i];
    *nout = k;
    return MP_OK;
}


/* ByteLevel's add_prefix_space: each piece of (buf, m->pa[0..na)) copied into dst with " " before
 * it unless it starts with one; the new pieces in m->pb[0..*nb). */
static int prefix_space_step(MpTokImpl *m, const char *buf, size_t na, MpTokBuf *dst, size_t *nb, MpErr *e) {
    dst->n = 0;
    *nb = 0;
    for (size_t i = 0; i < na; i++) {
        size_t off = dst->n;
        if (buf[m->pa[i].off] != ' ' && mp_tok_buf_append(dst, " ", 1, e) != MP_OK) return MP_ERR;
        if (mp_tok_buf_append(dst, buf + m->pa[i].off, m->pa[i].len, e) != MP_OK ||
            mp_tok_push_piece(&m->pb, &m->pb_cap, nb, off, dst->n - off, e) != MP_OK)
            return MP_ERR;
    }
    return MP_OK;
}

/* Metaspace: spaces → the replacement, which is also put before a piece (scheme always; first:
 * only before the first piece of the text) that does not start with it or a space. */
static int metaspace_step(MpTokImpl *m, const MpTokStep *st, const char *buf, size_t na, MpTokBuf *dst, size_t *nb,
                          MpErr *e) {
    dst->n = 0;
    *nb = 0;
    for (size_t i = 0; i < na; i++) {
        const char *q = buf + m->pa[i].off;
        size_t ql = m->pa[i].len, off = dst->n;
        int starts = (ql >= st->lit_len && !memcmp(q, st->lit, st->lit_len)) || q[0] == ' ';
        int prepend = !starts && (st->scheme == MP_TOK_PREPEND_ALWAYS ||
                                  (st->scheme == MP_TOK_PREPEND_FIRST && m->at_start && i == 0 && m->pa[0].off == 0));
        if (prepend && mp_tok_buf_append(dst, st->lit, st->lit_len, e) != MP_OK) return MP_ERR;
        size_t run = 0;
        for (size_t j = 0; j < ql; j++) {
            if (q[j] != ' ') continue;
            if (mp_tok_buf_append(dst, q + run, j - run, e) != MP_OK || mp_tok_buf_append(dst, st->lit, st->lit_len, e) != MP_OK)
                return MP_ERR;
            run = j + 1;
        }
        if (mp_tok_buf_append(dst, q + run, ql - run, e) != MP_OK ||
            mp_tok_push_piece(&m->pb, &m->pb_cap, nb, off, dst->n - off, e) != MP_OK)
            return MP_ERR;
    }
    return MP_OK;
}

int mp_tok_pretokenize(MpTokImpl *m, const char *s, size_t n, const char **bufp, size_t *np, MpErr *e) {
    const char *buf = s;
    size_t na = 0, nb = 0;
    if (mp_tok_push_piece(&m->pa, &m->pa_cap, &na, 0, n, e) != MP_OK) return MP_ERR;
    MpTokBuf *space_buf = &m->bufa; /* the steps that rewrite the text alternate between bufa and bufb */
    for (int k = 0; k < m->n_steps; k++) {
        const MpTokStep *st = &m->steps[k];
        if (st->kind == MP_TOK_STEP_PREFIX_SPACE || st->kind == MP_TOK_STEP_METASPACE) {
            int rc = st->kind == MP_TOK_STEP_PREFIX_SPACE ? prefix_space_step(m, buf, na, space_buf, &nb, e)
                                                          : metaspace_step(m, st, buf, na, space_buf, &nb, e);
            if (rc != MP_OK) return MP_ERR;
            buf = space_buf->data;
            space_buf = space_buf == &m->bufa ? &m->bufb : &m->bufa;
        } else if (mp_tok_split_step(m, st, buf, m->pa, na, &m->pb, &m->pb_cap, &nb, e) != MP_OK)
            return MP_ERR;
        MpTokPiece *tp = m->pa;
        size_t tc = m->pa_cap;
        m->pa = m->pb;
        m->pa_cap = m->pb_cap;
        m->pb = tp;
        m->pb_cap = tc;
        na = nb;
    }
    *bufp = buf;
    *np = na;
    return MP_OK;
}
