/* text.c — growable id and byte buffers, UTF-8 repair (see text.h).
 *
 * Implements: mp_tok_ids_push / mp_tok_buf_append (doubling growth, size checks), their free;
 * mp_tok_utf8_sanitize (one U+FFFD per maximal ill-formed subpart, the WHATWG rule) and
 * mp_tok_utf8_valid.
 * Does not: decode code points (unicode.c) or touch tokenizer state.
 * Tested by: tests/test_tok.c (test_utf8_sanitize), every tokenizer test.
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_size_add, mp_size_mul */
#include "tok/text.h"  /* MpTokIds, MpTokBuf */

/* ====================================== buffers ====================================== */

int mp_tok_ids_push(MpTokIds *v, int32_t id, MpErr *e) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 256, bytes;
        if (mp_size_mul(cap, sizeof(int32_t), &bytes) != MP_OK) return mp_err_set(e, "token ids: too many");
        int32_t *p = realloc(v->ids, bytes);
        if (!p) return mp_err_set(e, "token ids: out of memory (%zu bytes)", bytes);
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return MP_OK;
}

int mp_tok_buf_append(MpTokBuf *b, const void *data, size_t n, MpErr *e) {
    size_t need;
    if (mp_size_add(b->n, n, &need) != MP_OK || mp_size_add(need, 1, &need) != MP_OK)
        return mp_err_set(e, "text buffer: size overflow");
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) return mp_err_set(e, "text buffer: size overflow");
            cap *= 2;
        }
        char *p = realloc(b->data, cap);
        if (!p) return mp_err_set(e, "text buffer: out of memory (%zu bytes)", cap);
        b->data = p;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->n, data, n);
    b->n += n;
    b->data[b->n] = '\0';
    return MP_OK;
}

void mp_tok_ids_free(MpTokIds *v) {
    free(v->ids);
    memset(v, 0, sizeof *v);
}

void mp_tok_buf_free(MpTokBuf *b) {
    free(b->data);
    memset(b, 0, sizeof *b);
}

/* =================================== UTF-8 repair =================================== */

/* Length of the well-formed sequence starting at s[0], or 0 if ill-formed; *bad is then the
 * length of the maximal subpart to replace by one U+FFFD (≥ 1). */
static size_t utf8_seq(const unsigned char *s, size_t n, size_t *bad) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        *bad = 1;
        return 0;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n) break;
        unsigned d = s[i];
        unsigned l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
        if (d < l || d > h) break;
    }
    if (i == need + 1) return need + 1;
    *bad = i;
    return 0;
}

int mp_tok_utf8_sanitize(MpTokBuf *out, const char *src, size_t n, size_t *n_replaced, MpErr *e) {
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0, run = 0, reps = 0;
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    while (i < n) {
        size_t bad = 0, l = s[i] < 0x80 ? 1 : utf8_seq(s + i, n - i, &bad);
        if (l) {
            i += l;
            continue;
        }
        if (mp_tok_buf_append(out, src + run, i - run, e) != MP_OK || mp_tok_buf_append(out, fffd, 3, e) != MP_OK)
            return MP_ERR;
        reps++;
        i += bad;
        run = i;
    }
    if (mp_tok_buf_append(out, src + run, n - run, e) != MP_OK) return MP_ERR;
    if (n_replaced) *n_replaced = reps;
    return MP_OK;
}

int mp_tok_utf8_valid(const char *src, size_t n) {
    const unsigned char *s = (const unsigned char *)src;
    size_t i = 0, bad;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t l = utf8_seq(s + i, n - i, &bad);
        if (!l) return 0;
        i += l;
    }
    return 1;
}

