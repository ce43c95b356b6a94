/* hf_load.c — loading a tokenizer.json (+ tokenizer_config.json) into the internal state (hf.h).
 *
 * Implements: the BPE model (vocab, merges as "a b" strings or [a, b] pairs, ignore_merges,
 * unk_token / fuse_unk, byte_fallback); tokens kept as raw bytes (the byte-level alphabet
 * decoded at load time, so the ByteLevel step of encoding is free); the added tokens with the
 * ids HF assigns (AddedVocabulary::add_tokens replayed); tokenizer_config.json's add_bos_token /
 * add_eos_token for Llama*TokenizerFast; mp_tok_init_json and mp_tok_hf_free.
 * Does not: Unigram / WordPiece / WordLevel models, dropout, subword affixes (refused by name).
 * Tested by: tests/test_tok.c (real files, bad files), test_tok_hfspm.c, test_tok_nfkc.c,
 * tests/fuzz/fuzz_tok.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"     /* mp_fnv1a64 */
#include "tok/bpe.h"       /* the vocab and merge maps */
#include "tok/hf.h"        /* MpTokImpl */
#include "tok/hf_load.h"   /* its entry points */
#include "tok/hf_parts.h"  /* the part parsers, JSON field helpers */
#include "tok/normalize.h" /* mp_tok_normalize_text */
#include "tok/unicode.h"   /* mp_tok_utf8_next */

/* =============================== byte-level alphabet =============================== */

/* GPT-2 bytes_to_unicode: printable bytes map to themselves, the other 68 to U+0100.. in order. */
static void alphabet_init(uint32_t byte_to_cp[256], int16_t cp_to_byte[0x144]) {
    int extra = 0;
    for (int i = 0; i < 0x144; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        uint32_t cp = printable ? (uint32_t)b : (uint32_t)(256 + extra++);
        byte_to_cp[b] = cp;
        cp_to_byte[cp] = (int16_t)b;
    }
}

/* Decodes a byte-level token string to raw bytes (appended to m->bytes). Returns 1 if every
 * character is in the alphabet, else 0 and appends the string's own UTF-8 (what HF's ByteLevel
 * decoder emits for such a token). */
static int token_to_bytes(MpTokImpl *m, const char *s, size_t n, const int16_t cp_to_byte[0x144], MpErr *e,
                          int *status) {
    size_t start = m->bytes.n, i = 0;
    const unsigned char *u = (const unsigned char *)s;
    int ok = 1;
    if (!m->byte_level) { /* tokens are text: their bytes are their UTF-8 */
        if (mp_tok_buf_append(&m->bytes, s, n, e) != MP_OK) *status = MP_ERR;
        return 1;
    }
    while (i < n) {
        uint32_t cp;
        i += (size_t)mp_tok_utf8_next(u + i, n - i, &cp);
        if (cp >= 0x144 || cp_to_byte[cp] < 0) {
            ok = 0;
            break;
        }
        unsigned char b = (unsigned char)cp_to_byte[cp];
        if (mp_tok_buf_append(&m->bytes, &b, 1, e) != MP_OK) {
            *status = MP_ERR;
            return 0;
        }
    }
    if (!ok) {
        m->bytes.n = start;
        if (mp_tok_buf_append(&m->bytes, s, n, e) != MP_OK) *status = MP_ERR;
    }
    return ok;
}

/* Registers id with its token string (as in the file) and decode bytes. */
static int set_token(MpTokImpl *m, int32_t id, const char *s, size_t n, int flags, const int16_t cp_to_byte[0x144],
                     int *byte_level, MpErr *e) {
    int status = MP_OK;
    m->b_off[id] = m->bytes.n;
    int bl = token_to_bytes(m, s, n, cp_to_byte, e, &status);
    if (status != MP_OK) return MP_ERR;
    m->b_len[id] = (uint32_t)(m->bytes.n - m->b_off[id]);
    m->s_off[id] = m->strs.n;
    if (mp_tok_buf_append(&m->strs, s, n, e) != MP_OK || mp_tok_buf_append(&m->strs, "", 0, e) != MP_OK) return MP_ERR;
    m->strs.n++; /* keep the NUL */
    m->flags[id] = (uint8_t)(MP_TOK_F_PRESENT | flags);
    if (byte_level) *byte_level = bl;
    return MP_OK;
}

/* Appends the raw bytes of a byte-level string; returns 0 (nothing appended) if a character is
 * outside the alphabet. *n_out (may be NULL) gets the number of bytes appended. */
static int alpha_decode(MpTokBuf *out, const char *s, size_t n, const int16_t cp_to_byte[0x144], MpErr *e,
                        size_t *n_out) {
    size_t start = out->n, i = 0;
    while (i < n) {
        uint32_t cp;
        i += (size_t)mp_tok_utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (cp >= 0x144 || cp_to_byte[cp] < 0) {
            out->n = start;
            return 0;
        }
        unsigned char c = (unsigned char)cp_to_byte[cp];
        if (mp_tok_buf_append(out, &c, 1, e) != MP_OK) {
            out->n = start;
            return 0;
        }
    }
    if (n_out) *n_out = out->n - start;
    return 1;
}

/* model.merges: "a b" strings or [a, b] pairs; rank = index. Fills the merge map with (left id,
 * right id) → (rank, merged id). */
static int load_merges(MpTokImpl *m, json_t *vocab, json_t *merges, const int16_t cp_to_byte[0x144], MpErr *e) {
    if (!json_is_array(merges)) return mp_err_set(e, "model.merges: missing or not an array");
    size_t nm = json_array_size(merges);
    if (nm > (size_t)MP_TOK_MAX_IDS * 4) return mp_err_set(e, "model.merges: %zu merges is too many", nm);
    size_t cap = mp_tok_pow2_at_least(nm * 2 + 16);
    m->mmask = cap - 1;
    m->mkey = mp_try_malloc(cap * sizeof *m->mkey);
    m->mrank = mp_try_malloc(cap * sizeof *m->mrank);
    m->mnew = mp_try_malloc(cap * sizeof *m->mnew);
    if (!m->mkey || !m->mrank || !m->mnew) return mp_err_set(e, "model.merges: out of memory");
    memset(m->mkey, 0xFF, cap * sizeof *m->mkey);
    MpTokBuf tmp = {0};
    for (size_t r = 0; r < nm; r++) {
        json_t *it = json_array_get(merges, r);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(it)) {
            const char *s = json_string_value(it);
            size_t n = json_string_length(it);
            const char *sp = n > 1 ? memchr(s + 1, ' ', n - 1) : NULL;
            if (!sp) {
                mp_tok_buf_free(&tmp);
                return mp_err_set(e, "model.merges[%zu]: \"%.60s\" is not \"A B\"", r, s);
            }
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = n - la - 1;
        } else if (json_is_array(it) && json_array_size(it) == 2 && json_is_string(json_array_get(it, 0)) &&
                   json_is_string(json_array_get(it, 1))) {
            a = json_string_value(json_array_get(it, 0));
            la = json_string_length(json_array_get(it, 0));
            b = json_string_value(json_array_get(it, 1));
            lb = json_string_length(json_array_get(it, 1));
        } else {
            mp_tok_buf_free(&tmp);
            return mp_err_set(e, "model.merges[%zu]: expected \"A B\" or [\"A\", \"B\"]", r);
        }
        /* ids of a, b and a+b: through our byte map when both parts are in the byte-level
         * alphabet (fast), else through the vocab object (strings as in the file) */
        int32_t ida = -1, idb = -1, idn = -1;
        tmp.n = 0;
        size_t la_b = 0;
        if (!m->byte_level) { /* text tokens: the strings are the keys */
            if (mp_tok_buf_append(&tmp, a, la, e) != MP_OK || mp_tok_buf_append(&tmp, b, lb, e) != MP_OK) {
                mp_tok_buf_free(&tmp);
                return MP_ERR;
            }
            ida = mp_tok_vocab_find(m, a, la);
            idb = mp_tok_vocab_find(m, b, lb);
            idn = mp_tok_vocab_find(m, tmp.data, tmp.n);
        } else if (alpha_decode(&tmp, a, la, cp_to_byte, e, &la_b) && alpha_decode(&tmp, b, lb, cp_to_byte, e, NULL)) {
            ida = mp_tok_vocab_find(m, tmp.data, la_b);
            idb = mp_tok_vocab_find(m, tmp.data + la_b, tmp.n - la_b);
            idn = mp_tok_vocab_find(m, tmp.data, tmp.n);
        } else {
            tmp.n = 0;
            if (mp_tok_buf_append(&tmp, a, la, e) != MP_OK || mp_tok_buf_append(&tmp, b, lb, e) != MP_OK) {
                mp_tok_buf_free(&tmp);
                return MP_ERR;
            }
            json_t *ia = json_object_getn(vocab, a, la), *ib = json_object_getn(vocab, b, lb);
            json_t *in = json_object_getn(vocab, tmp.data, tmp.n);
            ida = ia ? (int32_t)json_integer_value(ia) : -1;
            idb = ib ? (int32_t)json_integer_value(ib) : -1;
            idn = in ? (int32_t)json_integer_value(in) : -1;
        }
        if (ida < 0 || idb < 0 || idn < 0) { /* a and b point into the merge's text: printed by length */
            const int la60 = la < 60 ? (int)la : 60, lb60 = lb < 60 ? (int)lb : 60;
            if (ida < 0) mp_err_set(e, "model.merges[%zu]: token \"%.*s\" is not in the vocab", r, la60, a);
            else if (idb < 0) mp_err_set(e, "model.merges[%zu]: token \"%.*s\" is not in the vocab", r, lb60, b);
            else mp_err_set(e, "model.merges[%zu]: the merged token \"%.*s%.*s\" is not in the vocab", r, la60, a, lb60, b);
            mp_tok_buf_free(&tmp);
            return MP_ERR;
        }
        mp_tok_merge_insert(m, ida, idb, (uint32_t)r, idn);
    }
    mp_tok_buf_free(&tmp);
    return MP_OK;
}

/* model: {"type":"BPE", "vocab":{...}, "merges":[...], ...} (vocab ids sized by the caller). */
static int load_model(MpTok *t, json_t *model, const int16_t cp_to_byte[0x144], MpErr *e) {
    MpTokImpl *m = t->impl;
    const char *type = mp_tok_json_type(model);
    if (!type && json_object_get(model, "merges")) type = "BPE"; /* old files omit the type */
    if (!type) return mp_err_set(e, "model.type: missing");
    if (strcmp(type, "BPE") != 0)
        return mp_err_set(e, "model.type \"%s\" is not supported (only BPE: byte-level or SentencePiece-style)", type);
    int byte_fallback = 0, ignore_merges = 0;
    if (mp_tok_json_bool(model, "byte_fallback", 0, &byte_fallback, "model", e) != MP_OK ||
        mp_tok_json_bool(model, "ignore_merges", 0, &ignore_merges, "model", e) != MP_OK ||
        mp_tok_json_bool(model, "fuse_unk", 0, &m->fuse_unk, "model", e) != MP_OK)
        return MP_ERR;
    m->byte_fallback = byte_fallback;
    t->ignore_merges = ignore_merges;
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
        return mp_err_set(e, "model.dropout: BPE dropout is not supported");
    const char *affix[2] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++) {
        json_t *v = json_object_get(model, affix[k]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return mp_err_set(e, "model.%s: only null or \"\" is supported", affix[k]);
    }
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab)) return mp_err_set(e, "model.vocab: missing or not an object");
    const char *key;
    size_t key_len;
    json_t *val;
    json_object_keylen_foreach(vocab, key, key_len, val) {
        int32_t id;
        if (mp_tok_json_id(val, &id, "model.vocab", e) != MP_OK) return mp_err_prefix(e, "token \"%.40s\"", key);
        int bl = 0;
        if (set_token(m, id, key, key_len, 0, cp_to_byte, &bl, e) != MP_OK) return MP_ERR;
        /* tokens outside the byte-level alphabet can never come out of BPE: not looked up */
        if (!bl) m->flags[id] |= MP_TOK_F_NOT_BYTE_LEVEL;
    }
    /* insert in id order so that the vocab map is deterministic */
    for (int32_t id = 0; id < t->n_ids; id++)
        if ((m->flags[id] & MP_TOK_F_PRESENT) && !(m->flags[id] & MP_TOK_F_NOT_BYTE_LEVEL)) mp_tok_vocab_insert(m, id);
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        char hex[8];
        m->byte_id[b] = mp_tok_vocab_find(m, &c, 1);
        snprintf(hex, sizeof hex, "<0x%02X>", b); /* byte fallback: Rust's format!("<{:#04X}>") */
        m->fb_id[b] = mp_tok_vocab_find(m, hex, 6);
    }
    m->unk_id = -1;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        json_t *u = json_object_get(vocab, json_string_value(unk));
        if (u) m->unk_id = (int32_t)json_integer_value(u);
    }
    return load_merges(m, vocab, json_object_get(model, "merges"), cp_to_byte, e);
}

/* One registration of HF's AddedVocabulary::add_tokens (tokenizer.json added_tokens, in order). */
typedef struct MpTokAddedReg {
    const char *s; /* content (borrowed from the JSON document) */
    size_t n;
    int32_t id; /* the id HF assigns, which may differ from the file's */
    uint8_t special, lstrip, rstrip, single_word, normalized;
} MpTokAddedReg;

/* HF's id assignment, replayed: a token whose content is already an added token or a model
 * token takes that id; otherwise the next free one (model vocab size, then max + 1). The ids
 * written in the file are only checked (HF warns; we log). Fills regs (file order, duplicates
 * dropped) and returns their count, or -1. */
#define ADDED_LOG_MAX 3 /* id mismatches logged one by one (20,000 of them printed 20,000 lines) */
static long added_assign(json_t *vocab, json_t *arr, MpTokAddedReg *regs, int32_t *max_id, MpErr *e) {
    size_t n = json_array_size(arr), vsize = json_object_size(vocab);
    json_t *ids = json_object(), *seen = json_object(); /* content → id; content+flags → 1 */
    long nr = 0, rc = 0, nmoved = 0; /* nmoved: tokens whose written id is not HF's */
    int64_t max_added = -1;
    char *key = NULL;
    for (size_t i = 0; i < n && rc == 0; i++) {
        json_t *o = json_array_get(arr, i);
        char where[64];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        json_t *content = json_object_get(o, "content");
        if (!json_is_object(o) || !json_is_string(content)) {
            rc = mp_err_set(e, "%s: expected an object with a string \"content\"", where);
            break;
        }
        MpTokAddedReg r = {json_string_value(content), json_string_length(content), 0, 0, 0, 0, 0, 0};
        int32_t file_id;
        int sp = 0, ls = 0, rs = 0, sw = 0, no = 0;
        if (mp_tok_json_id(json_object_get(o, "id"), &file_id, where, e) || mp_tok_json_bool(o, "special", 0, &sp, where, e) ||
            mp_tok_json_bool(o, "lstrip", 0, &ls, where, e) || mp_tok_json_bool(o, "rstrip", 0, &rs, where, e) ||
            mp_tok_json_bool(o, "single_word", 0, &sw, where, e) || mp_tok_json_bool(o, "normalized", !sp, &no, where, e)) {
            rc = MP_ERR;
            break;
        }
        r.special = (uint8_t)sp, r.lstrip = (uint8_t)ls, r.rstrip = (uint8_t)rs, r.single_word = (uint8_t)sw;
        r.normalized = (uint8_t)no;
        if (r.n == 0) continue; /* HF ignores empty tokens */
        free(key);
        key = mp_try_malloc(r.n + 8);
        if (!key) {
            rc = mp_err_set(e, "added_tokens: out of memory");
            break;
        }
        memcpy(key, r.s, r.n);
        key[r.n] = 1;
        for (int f = 0; f < 5; f++) key[r.n + 1 + f] = (char)('0' + (&r.special)[f]);
        if (json_object_getn(seen, key, r.n + 6)) continue; /* the very same token again */
        json_object_setn_new(seen, key, r.n + 6, json_true());
        json_t *have = json_object_getn(ids, r.s, r.n);
        if (!have) have = json_object_getn(vocab, r.s, r.n);
        if (have && json_is_integer(have)) r.id = (int32_t)json_integer_value(have);
        else if (max_added < 0) r.id = (int32_t)vsize;
        else r.id = (int32_t)(max_added >= (int64_t)vsize || vsize == 0 ? max_added + 1 : (int64_t)vsize);
        if (r.id < 0 || r.id >= MP_TOK_MAX_IDS) {
            rc = mp_err_set(e, "%s: id %d out of range", where, r.id);
            break;
        }
        if (r.id > max_added) max_added = r.id;
        if (r.id > *max_id) *max_id = r.id;
        if (r.id != file_id && ++nmoved <= ADDED_LOG_MAX) /* the first few; then one line with the count */
            mp_log("%s: token \"%.40s\" is written with id %d but HF assigns it %d (using %d, as HF does)", where,
                   r.s, file_id, r.id, r.id);
        json_object_setn_new(ids, r.s, r.n, json_integer(r.id));
        regs[nr++] = r;
    }
    free(key);
    json_decref(ids);
    json_decref(seen);
    if (rc == 0 && nmoved > ADDED_LOG_MAX)
        mp_log("added_tokens: %ld tokens in all are written with ids HF does not assign them (the first %d above); "
               "HF's ids used for each",
               nmoved, ADDED_LOG_MAX);
    return rc == 0 ? nr : -1;
}

static int cmp_added(const void *pa, const void *pb, void *ctx) {
    const MpTokAdded *a = pa, *b = pb;
    const char *text = ctx;
    unsigned char fa = (unsigned char)text[a->off], fb = (unsigned char)text[b->off];
    if (fa != fb) return fa < fb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Builds the matcher list (HF: special tokens, then the others, each content once) and the
 * per-id decode data. For every id, the last registration made for it gives its content and
 * its lstrip/rstrip/single_word (HF keeps one AddedToken per id); a content is special when any
 * registration of it was. */
static int load_added(MpTok *t, const MpTokAddedReg *regs, long nr, const int16_t cp_to_byte[0x144], MpErr *e) {
    MpTokImpl *m = t->impl;
    m->added = mp_try_calloc(nr ? (size_t)nr : 1, sizeof *m->added);
    if (!m->added) return mp_err_set(e, "added_tokens: out of memory");
    json_t *last = json_object(), *special = json_object(), *listed = json_object();
    char idk[16];
    for (long i = 0; i < nr; i++) {
        snprintf(idk, sizeof idk, "%d", regs[i].id);
        json_object_set_new(last, idk, json_integer(i));
        if (regs[i].special) json_object_setn_new(special, regs[i].s, regs[i].n, json_true());
    }
    int rc = MP_OK;
    /* decode data: one content per id */
    const char *k;
    json_t *v;
    json_object_foreach(last, k, v) {
        const MpTokAddedReg *r = &regs[json_integer_value(v)];
        int sp = json_object_getn(special, r->s, r->n) != NULL;
        if ((rc = set_token(m, r->id, r->s, r->n, MP_TOK_F_ADDED | (sp ? MP_TOK_F_SPECIAL : 0), cp_to_byte, NULL, e)) != MP_OK)
            break;
    }
    /* matcher: specials first, then the others; a content once */
    for (int pass = 0; pass < 2 && rc == MP_OK; pass++) {
        for (long i = 0; i < nr && rc == MP_OK; i++) {
            const MpTokAddedReg *r = &regs[i];
            int sp = json_object_getn(special, r->s, r->n) != NULL;
            if ((pass == 0) != (sp != 0) || json_object_getn(listed, r->s, r->n)) continue;
            json_object_setn_new(listed, r->s, r->n, json_true());
            snprintf(idk, sizeof idk, "%d", r->id);
            const MpTokAddedReg *owner = &regs[json_integer_value(json_object_get(last, idk))];
            MpTokAdded *a = &m->added[m->n_added];
            a->id = r->id;
            a->special = (uint8_t)sp;
            a->lstrip = owner->lstrip;
            a->rstrip = owner->rstrip;
            a->single_word = owner->single_word;
            a->normalized = r->normalized;
            a->off = m->added_text.n;
            if (a->normalized && m->n_norms) /* matched on normalized text: normalize the content too */
                rc = mp_tok_normalize_text(m, &m->added_text, r->s, r->n, e);
            else
                rc = mp_tok_buf_append(&m->added_text, r->s, r->n, e);
            a->len = m->added_text.n - a->off;
            if (rc == MP_OK && a->len > 0) {
                m->n_added_norm += a->normalized;
                m->n_added++;
            }
        }
    }
    json_decref(last);
    json_decref(special);
    json_decref(listed);
    if (rc != MP_OK) return MP_ERR;
    t->n_added = m->n_added;
    if (m->n_added) qsort_r(m->added, (size_t)m->n_added, sizeof *m->added, cmp_added, m->added_text.data);
    for (int b = 0, j = 0; b <= 256; b++) {
        while (j < m->n_added && (unsigned char)m->added_text.data[m->added[j].off] < b) j++;
        m->added_first[b] = j;
    }
    return MP_OK;
}

/* tokenizer_config.json: only Llama(Code)TokenizerFast rebuild the post-processor from
 * add_bos_token / add_eos_token (transformers' update_post_processor); others keep the file's. */
static int load_config(MpTok *t, const char *cfg, size_t len, MpErr *e) {
    json_error_t je;
    json_t *c = json_loadb(cfg, len, JSON_DECODE_INT_AS_REAL, &je); /* model_max_length: 1e30 */
    if (!c) return mp_err_set(e, "tokenizer_config.json: line %d: %s", je.line, je.text);
    int rc = MP_OK;
    json_t *cls = json_object_get(c, "tokenizer_class");
    const char *name = json_is_string(cls) ? json_string_value(cls) : "";
    if (!strncmp(name, "Llama", 5) || !strncmp(name, "CodeLlama", 9)) {
        MpTokImpl *m = t->impl;
        const char *keys[2] = {"bos_token", "eos_token"}, *flags[2] = {"add_bos_token", "add_eos_token"};
        int dflt[2] = {1, 0};
        for (int k = 0; k < 2 && rc == MP_OK; k++) {
            int add = 0;
            if ((rc = mp_tok_json_bool(c, flags[k], dflt[k], &add, "tokenizer_config", e)) != MP_OK) break;
            int32_t *dst = k ? m->post_ids : m->pre_ids;
            int *n = k ? &m->n_post : &m->n_pre;
            *n = 0;
            if (!add) continue;
            json_t *tok = json_object_get(c, keys[k]);
            if (json_is_object(tok)) tok = json_object_get(tok, "content");
            if (!json_is_string(tok)) {
                rc = mp_err_set(e, "tokenizer_config.%s: missing while %s is true", keys[k], flags[k]);
                break;
            }
            int32_t id = -1;
            for (int i = 0; i < m->n_added; i++)
                if (m->added[i].len == json_string_length(tok) &&
                    !memcmp(m->added_text.data + m->added[i].off, json_string_value(tok), m->added[i].len))
                    id = m->added[i].id;
            if (id < 0) {
                rc = mp_err_set(e, "tokenizer_config.%s \"%.60s\" is not an added token", keys[k], json_string_value(tok));
                break;
            }
            dst[(*n)++] = id;
        }
    }
    json_decref(c);
    return rc;
}

/* The per-id arrays and the vocab map (all ids absent, all slots empty) for nid ids. */
static int alloc_ids(MpTokImpl *m, size_t nid, MpErr *e) {
    size_t vcap = mp_tok_pow2_at_least(nid * 2);
    m->b_off = mp_try_malloc(nid * sizeof *m->b_off);
    m->b_len = mp_try_calloc(nid, sizeof *m->b_len);
    m->s_off = mp_try_calloc(nid, sizeof *m->s_off);
    m->flags = mp_try_calloc(nid, 1);
    m->vmap = mp_try_malloc(vcap * sizeof *m->vmap);
    if (!m->b_off || !m->b_len || !m->s_off || !m->flags || !m->vmap)
        return mp_err_set(e, "tokenizer: out of memory for %zu ids", nid);
    for (size_t i = 0; i < vcap; i++) m->vmap[i].id = -1;
    m->vmask = vcap - 1;
    return MP_OK;
}

/* Builds the tokenizer from a parsed tokenizer.json document (borrowed). t is zeroed first and
 * left zeroed on failure. */
int mp_tok_hf_init_root(MpTok *t, json_t *root, const char *config, size_t config_len, MpErr *e) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    MpTokAddedReg *regs = NULL;
    int rc = MP_ERR;
    MpTokImpl *m = t->impl = mp_try_calloc(1, sizeof *m);
    if (!m) {
        mp_err_set(e, "tokenizer: out of memory");
        goto done;
    }
    json_t *model = json_object_get(root, "model");
    if (!json_is_object(root) || !json_is_object(model)) {
        mp_err_set(e, "tokenizer.json: no \"model\" object (is this a tokenizer.json?)");
        goto done;
    }
    const char *mtype = mp_tok_json_type(model);
    if (mtype && strcmp(mtype, "BPE") != 0) {
        mp_err_set(e, "model.type \"%s\" is not supported (only BPE: byte-level or SentencePiece-style)", mtype);
        goto done;
    }
    /* id range: the largest id of the vocab and of the added tokens (as HF assigns them) */
    int64_t max_vocab = -1;
    json_t *vocab = json_object_get(model, "vocab"), *added = json_object_get(root, "added_tokens");
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        if (json_is_integer(val) && json_integer_value(val) > max_vocab) max_vocab = json_integer_value(val);
    }
    if (!json_is_object(vocab)) {
        mp_err_set(e, "model.vocab: missing or not an object");
        goto done;
    }
    if (added && !json_is_null(added) && !json_is_array(added)) {
        mp_err_set(e, "added_tokens: not an array");
        goto done;
    }
    if (max_vocab >= MP_TOK_MAX_IDS) {
        mp_err_set(e, "model.vocab: token id %lld is out of range [0, %d)", (long long)max_vocab, MP_TOK_MAX_IDS);
        goto done;
    }
    regs = mp_try_calloc(json_array_size(added) + 1, sizeof *regs);
    if (!regs) {
        mp_err_set(e, "added_tokens: out of memory");
        goto done;
    }
    int32_t max_id = (int32_t)max_vocab;
    long nregs = added_assign(vocab, added, regs, &max_id, e);
    if (nregs < 0) goto done;
    if (max_id < 0) {
        mp_err_set(e, "model.vocab: empty");
        goto done;
    }
    t->n_ids = (int32_t)max_id + 1;
    if (alloc_ids(m, (size_t)t->n_ids, e) != MP_OK) goto done;
    uint32_t byte_to_cp[256];
    int16_t cp_to_byte[0x144];
    alphabet_init(byte_to_cp, cp_to_byte);
    m->byte_level = mp_tok_pre_has_byte_level(json_object_get(root, "pre_tokenizer"));
    m->md = pcre2_match_data_create(1, NULL); /* normalizers may match patterns while loading */
    if (!m->md) {
        mp_err_set(e, "tokenizer: out of memory");
        goto done;
    }
    if (mp_tok_load_normalizer(t, json_object_get(root, "normalizer"), "normalizer", e) != MP_OK) goto done;
    if (load_model(t, model, cp_to_byte, e) != MP_OK) goto done;
    if (load_added(t, regs, nregs, cp_to_byte, e) != MP_OK) goto done;
    int byte_level = 0;
    if (mp_tok_load_pre(t, json_object_get(root, "pre_tokenizer"), &byte_level, "pre_tokenizer", e) != MP_OK) goto done;
    json_t *dec = json_object_get(root, "decoder");
    const char *dtype = mp_tok_json_type(dec);
    m->has_decoder = dec && !json_is_null(dec);
    if (byte_level && m->has_decoder && (!dtype || (strcmp(dtype, "ByteLevel") && strcmp(dtype, "Sequence")))) {
        mp_err_set(e, "decoder.type \"%s\" is not supported with a ByteLevel pre-tokenizer (ByteLevel is)", dtype ? dtype : "?");
        goto done;
    }
    if (!byte_level && m->has_decoder && mp_tok_load_decoder(m, dec, "decoder", e) != MP_OK) goto done;
    if (mp_tok_load_post(t, json_object_get(root, "post_processor"), e) != MP_OK) goto done;
    if (config && load_config(t, config, config_len, e) != MP_OK) goto done;
    for (int k = 0; k < m->n_pre + m->n_post; k++) {
        int32_t id = k < m->n_pre ? m->pre_ids[k] : m->post_ids[k - m->n_pre];
        if (id >= t->n_ids || !(m->flags[id] & MP_TOK_F_PRESENT)) {
            mp_err_set(e, "post_processor: special id %d is not a token", id);
            goto done;
        }
    }
    t->bos_id = m->n_pre == 1 ? m->pre_ids[0] : -1;
    t->eos_id = m->n_post == 1 ? m->post_ids[0] : -1;
    /* scratch that lives as long as the tokenizer */
    m->cache = mp_try_calloc(MP_TOK_CACHE_SLOTS, sizeof *m->cache);
    m->cache_keys = mp_try_malloc(MP_TOK_CACHE_KEYS);
    m->cache_ids = mp_try_malloc(MP_TOK_CACHE_IDS * sizeof *m->cache_ids);
    if (!m->cache || !m->cache_keys || !m->cache_ids) {
        mp_err_set(e, "tokenizer: out of memory for scratch");
        goto done;
    }
    rc = MP_OK;
done:
    free(regs);
    if (rc != MP_OK) {
        mp_tok_hf_free(t->impl);
        memset(t, 0, sizeof *t);
        t->bos_id = t->eos_id = -1;
    }
    return rc;
}

int mp_tok_init_json(MpTok *t, const char *json, size_t json_len, const char *config, size_t config_len, MpErr *e) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    json_error_t je;
    json_t *root = json_loadb(json, json_len, JSON_ALLOW_NUL, &je);
    if (!root) return mp_err_set(e, "tokenizer.json: not valid JSON (line %d: %s)", je.line, je.text);
    int rc = mp_tok_hf_init_root(t, root, config, config_len, e);
    json_decref(root);
    if (rc != MP_OK) return MP_ERR;
    t->hash = mp_fnv1a64(json, json_len, MP_FNV_INIT);
    if (config) t->hash = mp_fnv1a64(config, config_len, t->hash);
    return MP_OK;
}


void mp_tok_hf_free(MpTokImpl *m) {
    if (!m) return;
    for (int i = 0; i < m->n_steps; i++) {
        pcre2_code_free(m->steps[i].re);
        free(m->steps[i].lit);
    }
    for (int i = 0; i < m->n_norms; i++) {
        pcre2_code_free(m->norms[i].pat.re);
        free(m->norms[i].pat.lit);
        free(m->norms[i].text);
    }
    for (int i = 0; i < m->n_decs; i++) free(m->decs[i].pat), free(m->decs[i].content);
    mp_tok_buf_free(&m->nsa);
    mp_tok_buf_free(&m->nsb);
    pcre2_match_data_free(m->md);
    free(m->cache_ids);
    free(m->cache_keys);
    free(m->cache);
    mp_tok_nfc_work_free(&m->nfc);
    free(m->heap);
    free(m->sym);
    free(m->segs);
    free(m->pb);
    free(m->pa);
    mp_tok_buf_free(&m->bufb);
    mp_tok_buf_free(&m->bufa);
    mp_tok_buf_free(&m->norm);
    mp_tok_buf_free(&m->clean);
    mp_tok_buf_free(&m->added_text);
    free(m->added);
    free(m->mnew);
    free(m->mrank);
    free(m->mkey);
    free(m->vmap);
    free(m->flags);
    free(m->s_off);
    free(m->b_len);
    free(m->b_off);
    mp_tok_buf_free(&m->strs);
    mp_tok_buf_free(&m->bytes);
    free(m);
}
