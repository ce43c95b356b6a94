/* decode.c — ids back to text (mp_tok_decode), for every kind of tokenizer.
 *
 * Implements: byte-level tokenizers (token bytes concatenated), text tokenizers through the
 * decoder steps (HF's decode_chain: Replace, ByteFallback, Fuse, Strip, Metaspace; no decoder:
 * tokens joined with spaces), the byte vocabulary, GGUF SentencePiece vocabularies (spm.c); then
 * invalid UTF-8 → U+FFFD as HF does. skip_special drops special tokens.
 * Does not: clean_up_tokenization_spaces.
 * Tested by: tests/test_tok.c (test_decode), test_tok_hfspm.c, test_tok_nfkc.c, test_tok_spm.c.
 */
#include <stdlib.h>
#include <string.h>

#include "tok/hf.h"      /* MpTokImpl, MpTokDec */
#include "tok/spm.h"     /* mp_tok_spm_decode */
#include "tok/unicode.h" /* mp_tok_utf8_next */

/* A list of token strings, kept in one arena (decode of text tokenizers). */
typedef struct MpTokStrs {
    MpTokBuf text;
    size_t *off, *len; /* [n] */
    size_t n, cap;
} MpTokStrs;

static void strs_free(MpTokStrs *l) {
    mp_tok_buf_free(&l->text);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof *l);
}

/* Starts a new string (empty) at the end of l. */
static int strs_new(MpTokStrs *l, MpErr *e) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        size_t *o = realloc(l->off, cap * sizeof *o);
        if (o) l->off = o;
        size_t *q = o ? realloc(l->len, cap * sizeof *q) : NULL;
        if (!o || !q) return mp_err_set(e, "decode: out of memory");
        l->len = q;
        l->cap = cap;
    }
    l->off[l->n] = l->text.n;
    l->len[l->n++] = 0;
    return MP_OK;
}

/* Appends bytes to the last string of l. */
static int strs_cat(MpTokStrs *l, const void *p, size_t n, MpErr *e) {
    if (mp_tok_buf_append(&l->text, p, n, e) != MP_OK) return MP_ERR;
    l->len[l->n - 1] += n;
    return MP_OK;
}

/* The byte of a ByteFallback token: exactly "<0xHH>" with u8::from_str_radix(HH, 16) (which also
 * takes "+H"). Returns -1 when the token is no byte. */
static int fallback_byte(const char *p, size_t n) {
    if (n != 6 || memcmp(p, "<0x", 3) || p[5] != '>') return -1;
    int v = 0;
    for (int i = p[3] == '+' ? 4 : 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

/* One decoder step over every string of in, into out (HF's decode_chain). */
static int decode_step(const MpTokDec *d, const MpTokStrs *in, MpTokStrs *out, MpErr *e) {
    const unsigned char *base = (const unsigned char *)(in->text.data ? in->text.data : ""); /* all empty: NULL */
    MpTokBuf bytes = {0}; /* ByteFallback: the pending run of bytes */
    int rc = MP_OK;
    if (d->kind == MP_TOK_DEC_FUSE) rc = strs_new(out, e);
    for (size_t i = 0; i <= in->n && rc == MP_OK; i++) {
        const char *p = i < in->n ? (const char *)base + in->off[i] : "";
        size_t l = i < in->n ? in->len[i] : 0;
        if (d->kind == MP_TOK_DEC_BYTE_FALLBACK) {
            int b = i < in->n ? fallback_byte(p, l) : -1;
            if (b >= 0) {
                unsigned char c = (unsigned char)b;
                rc = mp_tok_buf_append(&bytes, &c, 1, e);
                continue;
            }
            if (bytes.n) { /* the run as one string if valid UTF-8, else one U+FFFD per byte */
                rc = strs_new(out, e);
                if (rc == MP_OK && mp_tok_utf8_valid(bytes.data, bytes.n)) rc = strs_cat(out, bytes.data, bytes.n, e);
                for (size_t k = 0; k < bytes.n && rc == MP_OK && !mp_tok_utf8_valid(bytes.data, bytes.n); k++)
                    rc = (k ? strs_new(out, e) : MP_OK) == MP_OK ? strs_cat(out, "\xef\xbf\xbd", 3, e) : MP_ERR;
                bytes.n = 0;
            }
            if (i < in->n && rc == MP_OK && (rc = strs_new(out, e)) == MP_OK) rc = strs_cat(out, p, l, e);
            continue;
        }
        if (i == in->n) break;
        if (d->kind == MP_TOK_DEC_FUSE) {
            rc = strs_cat(out, p, l, e);
            continue;
        }
        if ((rc = strs_new(out, e)) != MP_OK) break;
        if (d->kind == MP_TOK_DEC_REPLACE) {
            size_t run = 0;
            for (size_t j = 0; d->pat_len && j + d->pat_len <= l && rc == MP_OK;) {
                if (memcmp(p + j, d->pat, d->pat_len)) {
                    j++;
                    continue;
                }
                rc = strs_cat(out, p + run, j - run, e);
                if (rc == MP_OK) rc = strs_cat(out, d->content, d->content_len, e);
                j += d->pat_len;
                run = j;
            }
            if (rc == MP_OK) rc = strs_cat(out, p + run, l - run, e);
        } else if (d->kind == MP_TOK_DEC_STRIP) { /* up to start / stop copies of the character at each end */
            size_t a = 0, z = l;
            uint32_t cp;
            for (long k = 0; k < d->start && a < z; k++) {
                int cl = mp_tok_utf8_next((const unsigned char *)p + a, z - a, &cp);
                if (cp != d->ch) break;
                a += (size_t)cl;
            }
            for (long k = 0; k < d->stop && z > a; k++) {
                size_t q = z - 1;
                while (q > a && ((unsigned char)p[q] & 0xC0) == 0x80) q--;
                mp_tok_utf8_next((const unsigned char *)p + q, z - q, &cp);
                if (cp != d->ch) break;
                z = q;
            }
            rc = strs_cat(out, p + a, z - a, e);
        } else { /* Metaspace: the replacement becomes a space; in the first string it goes (unless never) */
            size_t run = 0;
            for (size_t j = 0; j + d->pat_len <= l && rc == MP_OK;) {
                if (memcmp(p + j, d->pat, d->pat_len)) {
                    j++;
                    continue;
                }
                rc = strs_cat(out, p + run, j - run, e);
                if (rc == MP_OK && !(i == 0 && d->scheme != MP_TOK_PREPEND_NEVER)) rc = strs_cat(out, " ", 1, e);
                j += d->pat_len;
                run = j;
            }
            if (rc == MP_OK) rc = strs_cat(out, p + run, l - run, e);
        }
    }
    mp_tok_buf_free(&bytes);
    return rc;
}

/* Decode of a text (non-byte-level) tokenizer: the tokens as written, through the decoder steps,
 * concatenated (no decoder: joined with spaces, as HF does). */
static int decode_text(const MpTok *t, MpTokBuf *raw, const int32_t *ids, size_t n, int skip_special, MpErr *e) {
    const MpTokImpl *m = t->impl;
    MpTokStrs l[2] = {{{0}, 0, 0, 0, 0}, {{0}, 0, 0, 0, 0}};
    int rc = MP_OK, cur = 0;
    for (size_t i = 0; i < n && rc == MP_OK; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_ids || !(m->flags[id] & MP_TOK_F_PRESENT)) {
            rc = mp_err_set(e, "%s%sdecode: id %d (position %zu) is not a token of this tokenizer (%d ids)", t->path,
                            t->path[0] ? ": " : "", id, i, t->n_ids);
            break;
        }
        if (skip_special && (m->flags[id] & MP_TOK_F_SPECIAL)) continue;
        const char *str = m->strs.data + m->s_off[id];
        if ((rc = strs_new(&l[0], e)) == MP_OK) rc = strs_cat(&l[0], str, strlen(str), e);
    }
    for (int k = 0; k < m->n_decs && rc == MP_OK; k++, cur ^= 1) {
        strs_free(&l[cur ^ 1]);
        rc = decode_step(&m->decs[k], &l[cur], &l[cur ^ 1], e);
    }
    for (size_t i = 0; i < l[cur].n && rc == MP_OK; i++) {
        if (!m->has_decoder && i > 0) rc = mp_tok_buf_append(raw, " ", 1, e);
        if (rc == MP_OK && l[cur].len[i]) rc = mp_tok_buf_append(raw, l[cur].text.data + l[cur].off[i], l[cur].len[i], e);
    }
    strs_free(&l[0]);
    strs_free(&l[1]);
    return rc;
}

int mp_tok_decode(const MpTok *t, MpTokBuf *out, const int32_t *ids, size_t n, int skip_special, MpErr *e) {
    const MpTokImpl *m = t->impl;
    MP_ASSERT(m != NULL || t->bytes || t->spm);
    MpTokBuf raw = {0};
    if (t->spm) {
        int rc = mp_tok_spm_decode(t->spm, &raw, ids, n, skip_special, e);
        if (rc == MP_OK) rc = mp_tok_utf8_sanitize(out, raw.data ? raw.data : "", raw.n, NULL, e);
        else if (t->path[0]) mp_err_prefix(e, "%s", t->path);
        mp_tok_buf_free(&raw);
        return rc;
    }
    if (m && !m->byte_level) {
        int rc = decode_text(t, &raw, ids, n, skip_special, e);
        if (rc == MP_OK) rc = mp_tok_utf8_sanitize(out, raw.data ? raw.data : "", raw.n, NULL, e);
        mp_tok_buf_free(&raw);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (t->bytes) {
            unsigned char b = (unsigned char)id;
            if (id == 256 && t->bos_id == 256) {
                if (!skip_special && mp_tok_buf_append(&raw, "<bos>", 5, e) != MP_OK) {
                    mp_tok_buf_free(&raw);
                    return MP_ERR;
                }
                continue;
            }
            if (id < 0 || id > 255) {
                mp_tok_buf_free(&raw);
                return mp_err_set(e, "decode: id %d (position %zu) is not a byte (0..255)", id, i);
            }
            if (mp_tok_buf_append(&raw, &b, 1, e) != MP_OK) {
                mp_tok_buf_free(&raw);
                return MP_ERR;
            }
            continue;
        }
        if (id < 0 || id >= t->n_ids || !(m->flags[id] & MP_TOK_F_PRESENT)) {
            mp_tok_buf_free(&raw);
            return mp_err_set(e, "%s%sdecode: id %d (position %zu) is not a token of this tokenizer (%d ids)", t->path,
                              t->path[0] ? ": " : "", id, i, t->n_ids);
        }
        if (skip_special && (m->flags[id] & MP_TOK_F_SPECIAL)) continue;
        if (mp_tok_buf_append(&raw, m->bytes.data + m->b_off[id], m->b_len[id], e) != MP_OK) {
            mp_tok_buf_free(&raw);
            return MP_ERR;
        }
    }
    int rc = mp_tok_utf8_sanitize(out, raw.data ? raw.data : "", raw.n, NULL, e);
    mp_tok_buf_free(&raw);
    return rc;
}
