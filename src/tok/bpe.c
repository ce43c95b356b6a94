/* bpe.c — the BPE model of a tokenizer.json tokenizer: vocab and merge maps, the merge loop.
 *
 * Implements: the open-addressing maps (raw token bytes → id; (left id, right id) → (rank, new
 * id)); mp_tok_bpe_piece, HF's `Word::merge_all`: one symbol per byte (byte-level tokenizers) or
 * per character with byte fallback / unknown token (SentencePiece-style), then a min-heap of
 * candidate merges ordered by (rank, position); a popped candidate is skipped when its left
 * symbol is gone or the pair now at that place merges into a different token. Pieces up to 255
 * bytes are cached (the cache starts over when full).
 * Does not: dropout, continuing-subword prefixes, word-end suffixes (refused by hf_load.c).
 * Tested by: tests/test_tok.c, test_tok_hfspm.c, test_tok_nfkc.c (ids equal to HF's).
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h" /* mp_fnv1a64, mp_size_mul */
#include "tok/bpe.h"   /* its entry points */
#include "tok/hf.h"    /* MpTokImpl */

/* mp_tok_ids_push with its common case (room left) inline: the merge loop and the piece cache push
 * one id at a time. */
static inline int push_id(MpTokIds *v, int32_t id, MpErr *e) {
    if (v->n < v->cap) {
        v->ids[v->n++] = id;
        return MP_OK;
    }
    return mp_tok_ids_push(v, id, e);
}

int mp_tok_grow_slow(void **p, size_t *cap, size_t need, size_t elem, MpErr *e) {
    if (need <= *cap) return MP_OK;
    size_t cap2 = *cap ? *cap : 64, bytes;
    while (cap2 < need) cap2 *= 2;
    if (mp_size_mul(cap2, elem, &bytes) != MP_OK) return mp_err_set(e, "tokenizer scratch: size overflow");
    void *q = realloc(*p, bytes);
    if (!q) return mp_err_set(e, "tokenizer scratch: out of memory (%zu bytes)", bytes);
    *p = q;
    *cap = cap2;
    return MP_OK;
}

/* =================================== hash maps =================================== */

static uint64_t hash_bytes(const void *p, size_t n) { return mp_fnv1a64(p, n, MP_FNV_INIT); }

static uint64_t hash_pair(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    key *= 0xc4ceb9fe1a85ec53ULL;
    key ^= key >> 33;
    return key;
}

int32_t mp_tok_vocab_find(const MpTokImpl *m, const void *p, size_t n) {
    size_t i = (size_t)hash_bytes(p, n) & m->vmask;
    for (;;) {
        const MpTokVSlot *v = &m->vmap[i];
        if (v->id < 0) return -1;
        if (v->len == n && !memcmp(m->bytes.data + v->off, p, n)) return v->id;
        i = (i + 1) & m->vmask;
    }
}

/* Inserts id under its current bytes; a later id with the same bytes wins (as a Rust HashMap
 * collect). The slot keeps its own copy of offset and length: an added token with the same id
 * may later change the id's decode bytes. */
void mp_tok_vocab_insert(MpTokImpl *m, int32_t id) {
    size_t off = m->b_off[id], n = m->b_len[id];
    const char *p = m->bytes.data + off;
    size_t i = (size_t)hash_bytes(p, n) & m->vmask;
    for (;;) {
        MpTokVSlot *v = &m->vmap[i];
        if (v->id < 0 || (v->len == n && !memcmp(m->bytes.data + v->off, p, n))) {
            *v = (MpTokVSlot){id, (uint32_t)n, off};
            return;
        }
        i = (i + 1) & m->vmask;
    }
}

static int merge_find(const MpTokImpl *m, int32_t a, int32_t b, uint32_t *rank, int32_t *new_id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)hash_pair(key) & m->mmask;
    for (;;) {
        if (m->mkey[i] == UINT64_MAX) return 0;
        if (m->mkey[i] == key) {
            *rank = m->mrank[i];
            *new_id = m->mnew[i];
            return 1;
        }
        i = (i + 1) & m->mmask;
    }
}

void mp_tok_merge_insert(MpTokImpl *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)hash_pair(key) & m->mmask;
    while (m->mkey[i] != UINT64_MAX && m->mkey[i] != key) i = (i + 1) & m->mmask;
    m->mkey[i] = key;
    m->mrank[i] = rank;
    m->mnew[i] = new_id;
}

size_t mp_tok_pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* ======================================= BPE ======================================= */

static int heap_less(const MpTokMerge *a, const MpTokMerge *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(MpTokMerge *h, size_t *n, MpTokMerge x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static MpTokMerge heap_pop(MpTokMerge *h, size_t *n) {
    MpTokMerge top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, c = i;
        const MpTokMerge *best = &x;
        if (l < *n && heap_less(&h[l], best)) {
            c = l;
            best = &h[l];
        }
        if (r < *n && heap_less(&h[r], best)) c = r;
        if (c == i) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

static int cache_get(MpTokImpl *m, const char *p, size_t n, uint64_t h, MpTokIds *out, MpErr *e, int *hit) {
    *hit = 0;
    uint32_t i = (uint32_t)h & (MP_TOK_CACHE_SLOTS - 1);
    for (;;) {
        MpTokCacheSlot *s = &m->cache[i];
        if (s->klen == 0) return MP_OK;
        if (s->h == h && s->klen == n && !memcmp(m->cache_keys + s->koff, p, n)) {
            for (uint32_t k = 0; k < s->nids; k++)
                if (push_id(out, m->cache_ids[s->ioff + k], e) != MP_OK) return MP_ERR;
            *hit = 1;
            return MP_OK;
        }
        i = (i + 1) & (MP_TOK_CACHE_SLOTS - 1);
    }
}

static void cache_put(MpTokImpl *m, const char *p, size_t n, uint64_t h, const int32_t *ids, size_t nids) {
    if (m->cache_count >= MP_TOK_CACHE_SLOTS / 2 || m->cache_key_used + n > MP_TOK_CACHE_KEYS ||
        m->cache_id_used + nids > MP_TOK_CACHE_IDS) { /* full: start over */
        memset(m->cache, 0, MP_TOK_CACHE_SLOTS * sizeof *m->cache);
        m->cache_count = m->cache_key_used = m->cache_id_used = 0;
    }
    uint32_t i = (uint32_t)h & (MP_TOK_CACHE_SLOTS - 1);
    while (m->cache[i].klen) i = (i + 1) & (MP_TOK_CACHE_SLOTS - 1);
    MpTokCacheSlot *s = &m->cache[i];
    s->h = h;
    s->koff = m->cache_key_used;
    s->klen = (uint16_t)n;
    s->ioff = m->cache_id_used;
    s->nids = (uint16_t)nids;
    memcpy(m->cache_keys + s->koff, p, n);
    if (nids) memcpy(m->cache_ids + s->ioff, ids, nids * sizeof *ids);
    m->cache_key_used += (uint32_t)n;
    m->cache_id_used += (uint32_t)nids;
    m->cache_count++;
}

/* Adds a symbol (id, bytes) at the end of the chain s[0..*ns). */
static void sym_add(MpTokSym *s, int32_t *ns, int32_t id, uint32_t len) {
    s[*ns] = (MpTokSym){id, *ns - 1, -1, len};
    if (*ns > 0) s[*ns - 1].next = *ns;
    (*ns)++;
}

/* Initial symbols of a text (non-byte-level) piece, as HF's BPE::merge_word builds them: one per
 * character; a character that is no token becomes its <0xNN> tokens (byte_fallback, when all
 * exist), else the unknown token (runs fused with fuse_unk), else nothing. As in HF, a pending
 * unknown token is written only when the next known character (or the end) comes, after any
 * byte-fallback tokens in between. Returns the number of symbols (at most n). */
static int32_t char_symbols(const MpTokImpl *m, MpTokSym *s, const char *p, size_t n) {
    int32_t ns = 0, unk_len = -1;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = (size_t)mp_tok_utf8_next((const unsigned char *)p + i, n - i, &cp);
        int32_t id = mp_tok_vocab_find(m, p + i, l);
        if (id >= 0) {
            if (unk_len >= 0) sym_add(s, &ns, m->unk_id, (uint32_t)unk_len);
            unk_len = -1;
            sym_add(s, &ns, id, (uint32_t)l);
        } else {
            int all = m->byte_fallback;
            for (size_t j = 0; j < l && all; j++) all = m->fb_id[(unsigned char)p[i + j]] >= 0;
            if (all) {
                for (size_t j = 0; j < l; j++) sym_add(s, &ns, m->fb_id[(unsigned char)p[i + j]], 1);
            } else if (m->unk_id >= 0) {
                if (unk_len >= 0 && m->fuse_unk) unk_len += (int32_t)l;
                else {
                    if (unk_len >= 0) sym_add(s, &ns, m->unk_id, (uint32_t)unk_len);
                    unk_len = (int32_t)l;
                }
            }
        }
        i += l;
    }
    if (unk_len >= 0) sym_add(s, &ns, m->unk_id, (uint32_t)unk_len);
    return ns;
}

/* BPE of one pre-token (raw bytes), appending its ids. */
int mp_tok_bpe_piece(MpTok *t, MpTokIds *out, const char *p, size_t n, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (t->ignore_merges) {
        int32_t id = mp_tok_vocab_find(m, p, n);
        if (id >= 0) return push_id(out, id, e);
    }
    if (m->byte_level && n == 1 && m->byte_id[(unsigned char)p[0]] >= 0) return push_id(out, m->byte_id[(unsigned char)p[0]], e);
    int cacheable = n <= MP_TOK_CACHE_MAX_PIECE;
    uint64_t h = 0;
    if (cacheable) {
        int hit;
        h = hash_bytes(p, n);
        if (cache_get(m, p, n, h, out, e, &hit) != MP_OK) return MP_ERR;
        if (hit) return MP_OK;
    }
    /* one symbol per byte (HF: per byte-level character); unknown bytes become unk or vanish */
    if (mp_tok_grow((void **)&m->sym, &m->sym_cap, n, sizeof *m->sym, e) != MP_OK) return MP_ERR;
    MpTokSym *s = m->sym;
    int32_t ns = 0;
    if (!m->byte_level) ns = char_symbols(m, s, p, n);
    for (size_t i = 0; i < n && m->byte_level; i++) {
        int32_t id = m->byte_id[(unsigned char)p[i]];
        if (id < 0) {
            if (m->unk_id < 0) continue;
            if (m->fuse_unk && ns > 0 && s[ns - 1].c == m->unk_id) {
                s[ns - 1].len++;
                continue;
            }
            id = m->unk_id;
        }
        s[ns] = (MpTokSym){id, ns - 1, -1, 1};
        if (ns > 0) s[ns - 1].next = ns;
        ns++;
    }
    if (ns > 1) {
        size_t cap_needed;
        if (mp_size_mul((size_t)ns, 3, &cap_needed) != MP_OK ||
            mp_tok_grow((void **)&m->heap, &m->heap_cap, cap_needed, sizeof *m->heap, e) != MP_OK)
            return MP_ERR;
        size_t hn = 0;
        for (int32_t i = 0; i + 1 < ns; i++) {
            uint32_t rank;
            int32_t nid;
            if (merge_find(m, s[i].c, s[i + 1].c, &rank, &nid)) heap_push(m->heap, &hn, (MpTokMerge){rank, (uint32_t)i, nid});
        }
        while (hn > 0) {
            MpTokMerge top = heap_pop(m->heap, &hn);
            MpTokSym *cur = &s[top.pos];
            if (cur->len == 0 || cur->next < 0) continue;
            MpTokSym *right = &s[cur->next];
            uint32_t rank;
            int32_t nid;
            if (!merge_find(m, cur->c, right->c, &rank, &nid) || nid != top.new_id) continue;
            cur->c = top.new_id;
            cur->len += right->len;
            right->len = 0;
            cur->next = right->next;
            if (cur->next >= 0) s[cur->next].prev = (int32_t)top.pos;
            if (cur->prev >= 0) {
                MpTokSym *prev = &s[cur->prev];
                if (merge_find(m, prev->c, cur->c, &rank, &nid))
                    heap_push(m->heap, &hn, (MpTokMerge){rank, (uint32_t)cur->prev, nid});
            }
            if (cur->next >= 0 && merge_find(m, cur->c, s[cur->next].c, &rank, &nid))
                heap_push(m->heap, &hn, (MpTokMerge){rank, top.pos, nid});
        }
    }
    size_t first = out->n;
    for (int32_t i = ns > 0 ? 0 : -1; i >= 0; i = s[i].next)
        if (push_id(out, s[i].c, e) != MP_OK) return MP_ERR;
    /* a piece may give no ids at all (bytes outside the vocabulary, no unk): out->ids can still be
     * NULL then, so no pointer is formed from it (issue 19: UB under UBSan) */
    if (cacheable && out->n - first <= UINT16_MAX) cache_put(m, p, n, h, out->n > first ? out->ids + first : NULL, out->n - first);
    return MP_OK;
}

