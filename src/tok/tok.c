/* tok.c — HF tokenizer.json byte-level BPE: loading, encoding, decoding (see tok.h).
 *
 * Data flow, one banner per stage below:
 *   buffers → UTF-8 repair → byte-level alphabet → hash maps (vocab, merges, piece cache) →
 *   loading tokenizer.json / tokenizer_config.json → added tokens → pre-tokenizer (Split regexes,
 *   ByteLevel) → BPE → encode → decode.
 * Tokens are kept as raw bytes (the byte-level alphabet decoded at load time), so the ByteLevel
 * step of encoding is free and BPE starts from one symbol per byte.
 * BPE follows HF's `Word::merge_all`: a min-heap of candidate merges ordered by (rank, position);
 * a popped candidate is skipped when its left symbol is gone or when the pair now at that place
 * merges into a different token. Pieces up to 255 bytes are cached.
 * Does not: offsets, truncation, padding, pairs of sequences, dropout.
 * Tested by: tests/test_tok.c.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <errno.h>
#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/util.h"        /* mp_fnv1a64, mp_path_join */
#include "tok/tok.h"          /* MpTok, MpTokIds, MpTokBuf */
#include "tok/tok_internal.h" /* NFC, regex patch, UTF-8 helpers */

#define MP_TOK_MAX_IDS (1 << 24)       /* guard against absurd ids in a malformed file */
#define MP_TOK_MAX_FILE (1ull << 31)   /* tokenizer.json larger than 2 GiB is rejected */
#define MP_TOK_MAX_STEPS 16            /* pre-tokenizer steps after flattening Sequences */
#define MP_TOK_MAX_SPECIAL 16          /* ids a post-processor may add before / after */
#define MP_TOK_CACHE_SLOTS (1u << 16)  /* piece cache: slots, key bytes, ids */
#define MP_TOK_CACHE_KEYS (1u << 22)
#define MP_TOK_CACHE_IDS (1u << 20)
#define MP_TOK_CACHE_MAX_PIECE 255

/* GPT-2's split regex, built into HF's ByteLevel pre-tokenizer (used when use_regex is true). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

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

static int utf8_valid(const char *src, size_t n) {
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

/* ================================= internal state ================================= */

enum { MP_TOK_STEP_SPLIT_RE = 1, MP_TOK_STEP_SPLIT_STR, MP_TOK_STEP_PREFIX_SPACE, MP_TOK_STEP_METASPACE };
/* Metaspace's prepend_scheme */
enum { MP_TOK_PREPEND_ALWAYS = 1, MP_TOK_PREPEND_FIRST, MP_TOK_PREPEND_NEVER };
/* normalizers, applied in order */
enum { MP_TOK_NORM_FORM = 1, MP_TOK_NORM_PREPEND, MP_TOK_NORM_REPLACE };
/* decoders of non-byte-level tokenizers, applied in order */
enum { MP_TOK_DEC_REPLACE = 1, MP_TOK_DEC_BYTE_FALLBACK, MP_TOK_DEC_FUSE, MP_TOK_DEC_STRIP, MP_TOK_DEC_METASPACE };
enum { MP_TOK_BEH_REMOVED = 1, MP_TOK_BEH_ISOLATED, MP_TOK_BEH_MERGED_PREV, MP_TOK_BEH_MERGED_NEXT, MP_TOK_BEH_CONTIGUOUS };

typedef struct MpTokStep {
    int kind;       /* MP_TOK_STEP_* */
    int behavior;   /* MP_TOK_BEH_* (split steps) */
    int invert;
    pcre2_code *re; /* MP_TOK_STEP_SPLIT_RE (owned) */
    int jit;        /* re was JIT-compiled */
    char *lit;      /* MP_TOK_STEP_SPLIT_STR literal, MP_TOK_STEP_METASPACE replacement (owned) */
    size_t lit_len;
    int scheme;     /* MP_TOK_STEP_METASPACE: MP_TOK_PREPEND_* */
} MpTokStep;

typedef struct MpTokNorm {
    int kind;        /* MP_TOK_NORM_* */
    int form;        /* FORM: MP_TOK_NF_C, _D, _KC, _KD (tok_internal.h) */
    MpTokStep pat;   /* REPLACE: the pattern, as a split step (String or Regex: HF's Pattern) */
    char *text;      /* PREPEND: the prefix; REPLACE: the content (owned) */
    size_t text_len;
} MpTokNorm;

typedef struct MpTokDec {
    int kind;              /* MP_TOK_DEC_* */
    char *pat, *content;   /* REPLACE: String pattern → content; METASPACE: replacement in pat (owned) */
    size_t pat_len, content_len;
    uint32_t ch;           /* STRIP: the character */
    long start, stop;      /* STRIP: how many at most at each end */
    int scheme;            /* METASPACE: MP_TOK_PREPEND_* */
} MpTokDec;

#define MP_TOK_MAX_NORMS 16
#define MP_TOK_MAX_DECS 16

typedef struct MpTokAdded {
    int32_t id;
    size_t off, len; /* content in impl->added_text */
    uint8_t special, lstrip, rstrip, single_word, normalized;
} MpTokAdded;

typedef struct MpTokPiece {
    size_t off, len; /* bytes in the current pre-tokenizer buffer */
} MpTokPiece;

typedef struct MpTokSeg {
    size_t off, len;
    int is_match;
} MpTokSeg;

typedef struct MpTokSym {
    int32_t c;          /* token id */
    int32_t prev, next; /* -1 at the ends */
    uint32_t len;       /* bytes; 0 once merged into the left neighbour */
} MpTokSym;

typedef struct MpTokMerge {
    uint32_t rank, pos;
    int32_t new_id;
} MpTokMerge;

typedef struct MpTokVSlot {
    int32_t id;
    uint32_t len;
    size_t off; /* key bytes in impl->bytes */
} MpTokVSlot;

typedef struct MpTokCacheSlot {
    uint64_t h;
    uint32_t koff, ioff;
    uint16_t klen, nids; /* klen 0: empty slot */
} MpTokCacheSlot;

struct MpTokImpl {
    /* tokens, indexed by id: decode bytes and the string as written in the file */
    MpTokBuf bytes;        /* arena of decode bytes */
    MpTokBuf strs;         /* arena of token strings (NUL-separated) */
    size_t *b_off;         /* [n_ids] offset in bytes; SIZE_MAX: no such id */
    uint32_t *b_len;       /* [n_ids] */
    size_t *s_off;         /* [n_ids] offset in strs */
    uint8_t *flags;        /* [n_ids] MP_TOK_F_* */
    /* model vocab: raw bytes → id (open addressing, id -1: empty) */
    MpTokVSlot *vmap;
    size_t vmask;
    int32_t byte_id[256];  /* id of each single byte, -1 if the vocab lacks it */
    int32_t unk_id;        /* -1: none */
    int fuse_unk;
    int byte_level;        /* tokens are in GPT-2's byte-level alphabet (a ByteLevel pre-tokenizer);
                              else they are text and BPE starts from one symbol per character */
    int byte_fallback;     /* model.byte_fallback: unknown characters as <0xNN> tokens */
    int32_t fb_id[256];    /* id of "<0xNN>", -1 if absent */
    MpTokNorm norms[MP_TOK_MAX_NORMS];
    int n_norms;
    MpTokDec decs[MP_TOK_MAX_DECS];
    int n_decs;
    int has_decoder;       /* 0: HF joins the tokens with spaces */
    int at_start;          /* encode: the segment being encoded starts the text (Metaspace "first") */
    /* merges: (left id, right id) → (rank, new id) */
    uint64_t *mkey;        /* UINT64_MAX: empty */
    uint32_t *mrank;
    int32_t *mnew;
    size_t mmask;
    /* added tokens */
    MpTokAdded *added;
    int n_added;
    MpTokBuf added_text;
    int n_added_norm;      /* how many have normalized = true */
    int added_first[257];  /* added[] is sorted by (first byte, length desc); index ranges */
    /* pre-tokenizer and post-processor */
    MpTokStep steps[MP_TOK_MAX_STEPS];
    int n_steps;
    int32_t pre_ids[MP_TOK_MAX_SPECIAL], post_ids[MP_TOK_MAX_SPECIAL];
    int n_pre, n_post;
    /* scratch, reused by every encode */
    pcre2_match_data *md;
    MpTokBuf clean, norm, nsa, nsb, bufa, bufb;
    MpTokPiece *pa, *pb;
    size_t pa_cap, pb_cap;
    MpTokSeg *segs;
    size_t seg_cap;
    MpTokSym *sym;
    size_t sym_cap;
    MpTokMerge *heap;
    size_t heap_cap;
    MpTokNfcWork nfc;
    /* piece cache */
    MpTokCacheSlot *cache;
    char *cache_keys;
    int32_t *cache_ids;
    uint32_t cache_count, cache_key_used, cache_id_used;
};

static int normalize_append(MpTokImpl *m, MpTokBuf *out, const char *s, size_t n, MpErr *e);

enum { MP_TOK_F_PRESENT = 1, MP_TOK_F_ADDED = 2, MP_TOK_F_SPECIAL = 4, MP_TOK_F_NOT_BYTE_LEVEL = 8 };

static int grow(void **p, size_t *cap, size_t need, size_t elem, MpErr *e) {
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

static int32_t vocab_find(const MpTokImpl *m, const void *p, size_t n) {
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
static void vocab_insert(MpTokImpl *m, int32_t id) {
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

static void merge_insert(MpTokImpl *m, int32_t a, int32_t b, uint32_t rank, int32_t new_id) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = (size_t)hash_pair(key) & m->mmask;
    while (m->mkey[i] != UINT64_MAX && m->mkey[i] != key) i = (i + 1) & m->mmask;
    m->mkey[i] = key;
    m->mrank[i] = rank;
    m->mnew[i] = new_id;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c *= 2;
    return c;
}

/* ============================ loading tokenizer.json ============================ */

static int read_file(const char *path, char **data, size_t *len, MpErr *e) {
    return mp_file_read_all(path, MP_TOK_MAX_FILE, "a tokenizer file", data, len, e);
}

/* Field helpers: all report the JSON path of what is wrong. */
static int get_bool(json_t *o, const char *key, int dflt, int *out, const char *where, MpErr *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return MP_OK;
    }
    if (!json_is_boolean(v)) return mp_err_set(e, "%s.%s: expected true/false", where, key);
    *out = json_is_true(v);
    return MP_OK;
}

static const char *get_type(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
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

static int parse_id(json_t *v, int32_t *id, const char *where, MpErr *e) {
    if (!json_is_integer(v)) return mp_err_set(e, "%s: id is not an integer", where);
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= MP_TOK_MAX_IDS) return mp_err_set(e, "%s: id %lld out of range [0, %d)", where, (long long)x, MP_TOK_MAX_IDS);
    *id = (int32_t)x;
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

/* model: {"type":"BPE", "vocab":{...}, "merges":[...], ...} (vocab ids sized by the caller). */
static int load_model(MpTok *t, json_t *model, const int16_t cp_to_byte[0x144], MpErr *e) {
    MpTokImpl *m = t->impl;
    const char *type = get_type(model);
    if (!type && json_object_get(model, "merges")) type = "BPE"; /* old files omit the type */
    if (!type) return mp_err_set(e, "model.type: missing");
    if (strcmp(type, "BPE") != 0)
        return mp_err_set(e, "model.type \"%s\" is not supported (only BPE: byte-level or SentencePiece-style)", type);
    int byte_fallback = 0, ignore_merges = 0;
    if (get_bool(model, "byte_fallback", 0, &byte_fallback, "model", e) != MP_OK ||
        get_bool(model, "ignore_merges", 0, &ignore_merges, "model", e) != MP_OK ||
        get_bool(model, "fuse_unk", 0, &m->fuse_unk, "model", e) != MP_OK)
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
        if (parse_id(val, &id, "model.vocab", e) != MP_OK) return mp_err_prefix(e, "token \"%.40s\"", key);
        int bl = 0;
        if (set_token(m, id, key, key_len, 0, cp_to_byte, &bl, e) != MP_OK) return MP_ERR;
        /* tokens outside the byte-level alphabet can never come out of BPE: not looked up */
        if (!bl) m->flags[id] |= MP_TOK_F_NOT_BYTE_LEVEL;
    }
    /* insert in id order so that the vocab map is deterministic */
    for (int32_t id = 0; id < t->n_ids; id++)
        if ((m->flags[id] & MP_TOK_F_PRESENT) && !(m->flags[id] & MP_TOK_F_NOT_BYTE_LEVEL)) vocab_insert(m, id);
    for (int b = 0; b < 256; b++) {
        unsigned char c = (unsigned char)b;
        char hex[8];
        m->byte_id[b] = vocab_find(m, &c, 1);
        snprintf(hex, sizeof hex, "<0x%02X>", b); /* byte fallback: Rust's format!("<{:#04X}>") */
        m->fb_id[b] = vocab_find(m, hex, 6);
    }
    m->unk_id = -1;
    json_t *unk = json_object_get(model, "unk_token");
    if (json_is_string(unk)) {
        json_t *u = json_object_get(vocab, json_string_value(unk));
        if (u) m->unk_id = (int32_t)json_integer_value(u);
    }
    /* merges: "a b" strings or [a, b] pairs; rank = index */
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges)) return mp_err_set(e, "model.merges: missing or not an array");
    size_t nm = json_array_size(merges);
    if (nm > (size_t)MP_TOK_MAX_IDS * 4) return mp_err_set(e, "model.merges: %zu merges is too many", nm);
    size_t cap = pow2_at_least(nm * 2 + 16);
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
            ida = vocab_find(m, a, la);
            idb = vocab_find(m, b, lb);
            idn = vocab_find(m, tmp.data, tmp.n);
        } else if (alpha_decode(&tmp, a, la, cp_to_byte, e, &la_b) && alpha_decode(&tmp, b, lb, cp_to_byte, e, NULL)) {
            ida = vocab_find(m, tmp.data, la_b);
            idb = vocab_find(m, tmp.data + la_b, tmp.n - la_b);
            idn = vocab_find(m, tmp.data, tmp.n);
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
        if (ida < 0 || idb < 0 || idn < 0) {
            int bad = ida < 0 ? 0 : idb < 0 ? 1 : 2;
            char both[160];
            snprintf(both, sizeof both, "%.60s%.60s", a, b);
            mp_err_set(e, "model.merges[%zu]: token \"%.120s\" is not in the vocab", r,
                       bad == 0 ? a : bad == 1 ? b : both);
            mp_tok_buf_free(&tmp);
            return MP_ERR;
        }
        merge_insert(m, ida, idb, (uint32_t)r, idn);
    }
    mp_tok_buf_free(&tmp);
    return MP_OK;
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
static long added_assign(json_t *vocab, json_t *arr, MpTokAddedReg *regs, int32_t *max_id, MpErr *e) {
    size_t n = json_array_size(arr), vsize = json_object_size(vocab);
    json_t *ids = json_object(), *seen = json_object(); /* content → id; content+flags → 1 */
    long nr = 0, rc = 0;
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
        if (parse_id(json_object_get(o, "id"), &file_id, where, e) || get_bool(o, "special", 0, &sp, where, e) ||
            get_bool(o, "lstrip", 0, &ls, where, e) || get_bool(o, "rstrip", 0, &rs, where, e) ||
            get_bool(o, "single_word", 0, &sw, where, e) || get_bool(o, "normalized", !sp, &no, where, e)) {
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
        if (r.id != file_id)
            mp_log("%s: token \"%.40s\" is written with id %d but HF assigns it %d (using %d, as HF does)", where,
                   r.s, file_id, r.id, r.id);
        json_object_setn_new(ids, r.s, r.n, json_integer(r.id));
        regs[nr++] = r;
    }
    free(key);
    json_decref(ids);
    json_decref(seen);
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
                rc = normalize_append(m, &m->added_text, r->s, r->n, e);
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

static int parse_behavior(json_t *o, const char *where, MpErr *e) {
    json_t *b = json_object_get(o, "behavior");
    const char *s = json_is_string(b) ? json_string_value(b) : "";
    if (!strcmp(s, "Removed")) return MP_TOK_BEH_REMOVED;
    if (!strcmp(s, "Isolated")) return MP_TOK_BEH_ISOLATED;
    if (!strcmp(s, "MergedWithPrevious")) return MP_TOK_BEH_MERGED_PREV;
    if (!strcmp(s, "MergedWithNext")) return MP_TOK_BEH_MERGED_NEXT;
    if (!strcmp(s, "Contiguous")) return MP_TOK_BEH_CONTIGUOUS;
    mp_err_set(e, "%s.behavior: \"%s\" is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous",
               where, s);
    return 0;
}

/* Compiles a pattern of tokenizer.json for PCRE2, patched to HF's Unicode tables, into st. */
static int compile_regex(MpTokStep *st, const char *pat, size_t n, const char *where, MpErr *e) {
    MpTokBuf patched = {0};
    if (mp_tok_regex_patch(&patched, pat, n, e) != MP_OK) {
        mp_tok_buf_free(&patched);
        return mp_err_prefix(e, "%s", where);
    }
    int code;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)patched.data, patched.n, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    mp_tok_buf_free(&patched);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return mp_err_set(e, "%s: regex \"%.80s\" does not compile: %s", where, pat, (const char *)msg);
    }
    st->kind = MP_TOK_STEP_SPLIT_RE;
    st->re = re;
    st->jit = pcre2_jit_compile(re, PCRE2_JIT_COMPLETE) == 0;
    return MP_OK;
}

/* A literal pattern into st (owned copy). */
static int literal_step(MpTokStep *st, const char *lit, size_t n, const char *where, MpErr *e) {
    st->kind = MP_TOK_STEP_SPLIT_STR;
    st->lit_len = n;
    st->lit = mp_try_malloc(n + 1);
    if (!st->lit) return mp_err_set(e, "%s: out of memory", where);
    memcpy(st->lit, lit, n);
    st->lit[n] = '\0';
    return MP_OK;
}

/* {"String": s} or {"Regex": r} (HF's Pattern) into st. */
static int parse_pattern(MpTokStep *st, json_t *pat, const char *where, MpErr *e) {
    json_t *re = json_object_get(pat, "Regex"), *str = json_object_get(pat, "String");
    if (json_is_string(re)) return compile_regex(st, json_string_value(re), json_string_length(re), where, e);
    if (json_is_string(str)) return literal_step(st, json_string_value(str), json_string_length(str), where, e);
    return mp_err_set(e, "%s.pattern: expected {\"Regex\": ...} or {\"String\": ...}", where);
}

static int add_regex_step(MpTok *t, const char *pat, size_t n, int behavior, int invert, const char *where, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (m->n_steps >= MP_TOK_MAX_STEPS) return mp_err_set(e, "%s: more than %d pre-tokenizer steps", where, MP_TOK_MAX_STEPS);
    MpTokStep *s = &m->steps[m->n_steps];
    if (compile_regex(s, pat, n, where, e) != MP_OK) return MP_ERR;
    m->n_steps++;
    s->behavior = behavior;
    s->invert = invert;
    return MP_OK;
}

/* Metaspace's replacement and prepend scheme (prepend_scheme, or the older add_prefix_space). */
static int parse_metaspace(json_t *o, char *repl, size_t *repl_len, int *scheme, const char *where, MpErr *e) {
    json_t *r = json_object_get(o, "replacement"), *ps = json_object_get(o, "prepend_scheme");
    const char *rs = json_is_string(r) ? json_string_value(r) : "\xe2\x96\x81";
    size_t rl = json_is_string(r) ? json_string_length(r) : 3;
    uint32_t cp;
    if (rl == 0 || rl > 4 || (size_t)mp_tok_utf8_next((const unsigned char *)rs, rl, &cp) != rl)
        return mp_err_set(e, "%s.replacement: expected one character", where);
    memcpy(repl, rs, rl);
    *repl_len = rl;
    if (json_is_string(ps)) {
        const char *v = json_string_value(ps);
        *scheme = !strcmp(v, "always") ? MP_TOK_PREPEND_ALWAYS
                  : !strcmp(v, "first") ? MP_TOK_PREPEND_FIRST
                  : !strcmp(v, "never") ? MP_TOK_PREPEND_NEVER
                                        : 0;
        if (!*scheme) return mp_err_set(e, "%s.prepend_scheme \"%.20s\" is not always, first or never", where, v);
        return MP_OK;
    }
    int aps = 1;
    if (get_bool(o, "add_prefix_space", 1, &aps, where, e) != MP_OK) return MP_ERR;
    *scheme = aps ? MP_TOK_PREPEND_ALWAYS : MP_TOK_PREPEND_NEVER;
    return MP_OK;
}

/* Flattens the pre_tokenizer into steps; *byte_level is set when a ByteLevel step was seen
 * (it must be the last one: every split before it works on text, as HF's order implies). */
static int load_pre(MpTok *t, json_t *o, int *byte_level, const char *where, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (!o || json_is_null(o)) return MP_OK;
    const char *type = get_type(o);
    if (!type) return mp_err_set(e, "%s.type: missing", where);
    if (*byte_level) return mp_err_set(e, "%s: a %s step after ByteLevel is not supported", where, type);
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "pretokenizers");
        if (!json_is_array(arr)) return mp_err_set(e, "%s.pretokenizers: missing", where);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.pretokenizers[%zu]", where, i);
            if (load_pre(t, json_array_get(arr, i), byte_level, w, e) != MP_OK) return MP_ERR;
        }
        return MP_OK;
    }
    if (!strcmp(type, "Split")) {
        int behavior = parse_behavior(o, where, e), invert = 0;
        if (!behavior || get_bool(o, "invert", 0, &invert, where, e) != MP_OK) return MP_ERR;
        if (m->n_steps >= MP_TOK_MAX_STEPS) return mp_err_set(e, "%s: more than %d pre-tokenizer steps", where, MP_TOK_MAX_STEPS);
        MpTokStep *s = &m->steps[m->n_steps];
        if (parse_pattern(s, json_object_get(o, "pattern"), where, e) != MP_OK) return MP_ERR;
        m->n_steps++;
        s->behavior = behavior;
        s->invert = invert;
        return MP_OK;
    }
    if (!strcmp(type, "Metaspace")) { /* spaces → replacement, maybe prepended, then split before each */
        char repl[4];
        size_t rl;
        int scheme, split = 1;
        if (parse_metaspace(o, repl, &rl, &scheme, where, e) != MP_OK || get_bool(o, "split", 1, &split, where, e) != MP_OK)
            return MP_ERR;
        if (m->n_steps + 2 > MP_TOK_MAX_STEPS) return mp_err_set(e, "%s: more than %d pre-tokenizer steps", where, MP_TOK_MAX_STEPS);
        MpTokStep *s = &m->steps[m->n_steps];
        if (literal_step(s, repl, rl, where, e) != MP_OK) return MP_ERR;
        m->n_steps++;
        s->kind = MP_TOK_STEP_METASPACE;
        s->scheme = scheme;
        if (split) {
            s = &m->steps[m->n_steps];
            if (literal_step(s, repl, rl, where, e) != MP_OK) return MP_ERR;
            m->n_steps++;
            s->behavior = MP_TOK_BEH_MERGED_NEXT;
        }
        return MP_OK;
    }
    if (!strcmp(type, "ByteLevel")) {
        int aps = 0, use_regex = 1;
        if (get_bool(o, "add_prefix_space", 0, &aps, where, e) || get_bool(o, "use_regex", 1, &use_regex, where, e))
            return MP_ERR;
        if (aps) {
            if (m->n_steps >= MP_TOK_MAX_STEPS) return mp_err_set(e, "%s: too many steps", where);
            m->steps[m->n_steps++].kind = MP_TOK_STEP_PREFIX_SPACE;
        }
        if (use_regex && add_regex_step(t, gpt2_pattern, strlen(gpt2_pattern), MP_TOK_BEH_ISOLATED, 0, where, e) != MP_OK)
            return MP_ERR;
        *byte_level = 1;
        return MP_OK;
    }
    return mp_err_set(e, "%s.type \"%s\" is not supported (Sequence, Split, ByteLevel, Metaspace are)", where, type);
}

static int load_normalizer(MpTok *t, json_t *o, const char *where, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (!o || json_is_null(o)) return MP_OK;
    const char *type = get_type(o);
    if (!type) return mp_err_set(e, "%s.type: missing", where);
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "normalizers");
        if (!json_is_array(arr)) return mp_err_set(e, "%s.normalizers: missing", where);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.normalizers[%zu]", where, i);
            if (load_normalizer(t, json_array_get(arr, i), w, e) != MP_OK) return MP_ERR;
        }
        return MP_OK;
    }
    if (m->n_norms >= MP_TOK_MAX_NORMS) return mp_err_set(e, "%s: more than %d normalizers", where, MP_TOK_MAX_NORMS);
    MpTokNorm *nm = &m->norms[m->n_norms];
    json_t *txt = NULL;
    static const char *const forms[] = {"NFC", "NFD", "NFKC", "NFKD"}; /* index + 1 = MP_TOK_NF_* */
    for (int f = 0; f < 4; f++)
        if (!strcmp(type, forms[f])) nm->kind = MP_TOK_NORM_FORM, nm->form = f + 1;
    if (nm->kind == MP_TOK_NORM_FORM) {
        if (nm->form == MP_TOK_NF_C) t->nfc = 1;
    } else if (!strcmp(type, "Prepend")) {
        nm->kind = MP_TOK_NORM_PREPEND;
        txt = json_object_get(o, "prepend");
        if (!json_is_string(txt)) return mp_err_set(e, "%s.prepend: expected a string", where);
    } else if (!strcmp(type, "Replace")) {
        nm->kind = MP_TOK_NORM_REPLACE;
        txt = json_object_get(o, "content");
        if (!json_is_string(txt)) return mp_err_set(e, "%s.content: expected a string", where);
        if (parse_pattern(&nm->pat, json_object_get(o, "pattern"), where, e) != MP_OK) return MP_ERR;
    } else {
        return mp_err_set(e, "%s.type \"%s\" is not supported (NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence are)",
                          where, type);
    }
    m->n_norms++;
    if (txt) {
        nm->text_len = json_string_length(txt);
        nm->text = mp_try_malloc(nm->text_len + 1);
        if (!nm->text) return mp_err_set(e, "%s: out of memory", where);
        memcpy(nm->text, json_string_value(txt), nm->text_len + 1);
    }
    return MP_OK;
}

/* Decoders of a text (non-byte-level) tokenizer, flattened in order. */
static int load_decoder(MpTokImpl *m, json_t *o, const char *where, MpErr *e) {
    const char *type = get_type(o);
    if (!type) return mp_err_set(e, "%s.type: missing", where);
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "decoders");
        if (!json_is_array(arr)) return mp_err_set(e, "%s.decoders: missing", where);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.decoders[%zu]", where, i);
            if (load_decoder(m, json_array_get(arr, i), w, e) != MP_OK) return MP_ERR;
        }
        return MP_OK;
    }
    if (m->n_decs >= MP_TOK_MAX_DECS) return mp_err_set(e, "%s: more than %d decoders", where, MP_TOK_MAX_DECS);
    MpTokDec *d = &m->decs[m->n_decs];
    if (!strcmp(type, "ByteFallback")) d->kind = MP_TOK_DEC_BYTE_FALLBACK;
    else if (!strcmp(type, "Fuse")) d->kind = MP_TOK_DEC_FUSE;
    else if (!strcmp(type, "Replace")) {
        json_t *pat = json_object_get(json_object_get(o, "pattern"), "String"), *c = json_object_get(o, "content");
        if (!json_is_string(pat) || !json_is_string(c))
            return mp_err_set(e, "%s: expected pattern {\"String\": ...} and a string content (a Regex pattern is not supported)", where);
        d->kind = MP_TOK_DEC_REPLACE;
        d->pat_len = json_string_length(pat);
        d->content_len = json_string_length(c);
        d->pat = mp_try_malloc(d->pat_len + 1);
        d->content = mp_try_malloc(d->content_len + 1);
        if (!d->pat || !d->content) {
            free(d->pat), free(d->content), d->pat = d->content = NULL;
            return mp_err_set(e, "%s: out of memory", where);
        }
        memcpy(d->pat, json_string_value(pat), d->pat_len + 1);
        memcpy(d->content, json_string_value(c), d->content_len + 1);
    } else if (!strcmp(type, "Strip")) {
        json_t *c = json_object_get(o, "content"), *st = json_object_get(o, "start"), *sp = json_object_get(o, "stop");
        uint32_t cp = 0;
        if (!json_is_string(c) || json_string_length(c) == 0 ||
            (size_t)mp_tok_utf8_next((const unsigned char *)json_string_value(c), json_string_length(c), &cp) != json_string_length(c) ||
            !json_is_integer(st) || !json_is_integer(sp) || json_integer_value(st) < 0 || json_integer_value(sp) < 0)
            return mp_err_set(e, "%s: expected a one-character content and non-negative start, stop", where);
        d->kind = MP_TOK_DEC_STRIP;
        d->ch = cp;
        d->start = (long)(json_integer_value(st) > 1000000 ? 1000000 : json_integer_value(st));
        d->stop = (long)(json_integer_value(sp) > 1000000 ? 1000000 : json_integer_value(sp));
    } else if (!strcmp(type, "Metaspace")) {
        char repl[4];
        size_t rl;
        if (parse_metaspace(o, repl, &rl, &d->scheme, where, e) != MP_OK) return MP_ERR;
        d->kind = MP_TOK_DEC_METASPACE;
        d->pat = mp_try_malloc(rl + 1);
        if (!d->pat) return mp_err_set(e, "%s: out of memory", where);
        memcpy(d->pat, repl, rl);
        d->pat[rl] = '\0';
        d->pat_len = rl;
    } else if (!strcmp(type, "ByteLevel")) {
        return mp_err_set(e, "%s: a ByteLevel decoder needs a ByteLevel pre-tokenizer", where);
    } else {
        return mp_err_set(e, "%s.type \"%s\" is not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, "
                             "Sequence are)", where, type);
    }
    m->n_decs++;
    return MP_OK;
}

/* 1 when the pre-tokenizer (or a step of its Sequence) is ByteLevel. */
static int pre_has_byte_level(json_t *o) {
    const char *type = get_type(o);
    if (!type) return 0;
    if (!strcmp(type, "ByteLevel")) return 1;
    if (strcmp(type, "Sequence") != 0) return 0;
    json_t *arr = json_object_get(o, "pretokenizers");
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (pre_has_byte_level(json_array_get(arr, i))) return 1;
    return 0;
}

/* ids of a TemplateProcessing special token name */
static int template_ids(MpTokImpl *m, json_t *specials, const char *name, int32_t *dst, int *n, MpErr *e) {
    json_t *sp = json_object_get(specials, name);
    json_t *ids = json_object_get(sp, "ids");
    if (!json_is_array(ids)) return mp_err_set(e, "post_processor: special token \"%.60s\" has no ids", name);
    for (size_t i = 0; i < json_array_size(ids); i++) {
        int32_t id;
        if (*n >= MP_TOK_MAX_SPECIAL) return mp_err_set(e, "post_processor: too many special tokens");
        if (parse_id(json_array_get(ids, i), &id, "post_processor", e) != MP_OK) return MP_ERR;
        dst[(*n)++] = id;
    }
    (void)m;
    return MP_OK;
}

static int load_post(MpTok *t, json_t *o, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (!o || json_is_null(o)) return MP_OK;
    const char *type = get_type(o);
    if (!type) return mp_err_set(e, "post_processor.type: missing");
    if (!strcmp(type, "ByteLevel")) return MP_OK; /* offsets only */
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "processors");
        if (!json_is_array(arr)) return mp_err_set(e, "post_processor.processors: missing");
        for (size_t i = 0; i < json_array_size(arr); i++)
            if (load_post(t, json_array_get(arr, i), e) != MP_OK) return MP_ERR;
        return MP_OK;
    }
    if (!strcmp(type, "TemplateProcessing")) {
        json_t *single = json_object_get(o, "single"), *specials = json_object_get(o, "special_tokens");
        if (!json_is_array(single)) return mp_err_set(e, "post_processor.single: missing");
        int seen_a = 0;
        m->n_pre = m->n_post = 0;
        for (size_t i = 0; i < json_array_size(single); i++) {
            json_t *it = json_array_get(single, i);
            json_t *st = json_object_get(it, "SpecialToken"), *sq = json_object_get(it, "Sequence");
            if (json_is_object(sq)) {
                if (seen_a) return mp_err_set(e, "post_processor.single: two sequences");
                seen_a = 1;
            } else if (json_is_object(st) && json_is_string(json_object_get(st, "id"))) {
                const char *name = json_string_value(json_object_get(st, "id"));
                if (template_ids(m, specials, name, seen_a ? m->post_ids : m->pre_ids, seen_a ? &m->n_post : &m->n_pre,
                                 e) != MP_OK)
                    return MP_ERR;
            } else
                return mp_err_set(e, "post_processor.single[%zu]: expected SpecialToken or Sequence", i);
        }
        if (!seen_a) return mp_err_set(e, "post_processor.single: no $A sequence");
        return MP_OK;
    }
    return mp_err_set(e, "post_processor.type \"%s\" is not supported (ByteLevel, TemplateProcessing, Sequence are)",
                      type);
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
            if ((rc = get_bool(c, flags[k], dflt[k], &add, "tokenizer_config", e)) != MP_OK) break;
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

/* Builds the tokenizer from a parsed tokenizer.json document (borrowed). t is zeroed first and
 * left zeroed on failure. */
static int init_root(MpTok *t, json_t *root, const char *config, size_t config_len, MpErr *e) {
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
    const char *mtype = get_type(model);
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
    size_t nid = (size_t)t->n_ids, vcap = pow2_at_least(nid * 2);
    m->b_off = mp_try_malloc(nid * sizeof *m->b_off);
    m->b_len = mp_try_calloc(nid, sizeof *m->b_len);
    m->s_off = mp_try_calloc(nid, sizeof *m->s_off);
    m->flags = mp_try_calloc(nid, 1);
    m->vmap = mp_try_malloc(vcap * sizeof *m->vmap);
    if (!m->b_off || !m->b_len || !m->s_off || !m->flags || !m->vmap) {
        mp_err_set(e, "tokenizer: out of memory for %zu ids", nid);
        goto done;
    }
    for (size_t i = 0; i < vcap; i++) m->vmap[i].id = -1;
    m->vmask = vcap - 1;
    uint32_t byte_to_cp[256];
    int16_t cp_to_byte[0x144];
    alphabet_init(byte_to_cp, cp_to_byte);
    m->byte_level = pre_has_byte_level(json_object_get(root, "pre_tokenizer"));
    m->md = pcre2_match_data_create(1, NULL); /* normalizers may match patterns while loading */
    if (!m->md) {
        mp_err_set(e, "tokenizer: out of memory");
        goto done;
    }
    if (load_normalizer(t, json_object_get(root, "normalizer"), "normalizer", e) != MP_OK) goto done;
    if (load_model(t, model, cp_to_byte, e) != MP_OK) goto done;
    if (load_added(t, regs, nregs, cp_to_byte, e) != MP_OK) goto done;
    int byte_level = 0;
    if (load_pre(t, json_object_get(root, "pre_tokenizer"), &byte_level, "pre_tokenizer", e) != MP_OK) goto done;
    json_t *dec = json_object_get(root, "decoder");
    const char *dtype = get_type(dec);
    m->has_decoder = dec && !json_is_null(dec);
    if (byte_level && m->has_decoder && (!dtype || (strcmp(dtype, "ByteLevel") && strcmp(dtype, "Sequence")))) {
        mp_err_set(e, "decoder.type \"%s\" is not supported with a ByteLevel pre-tokenizer (ByteLevel is)", dtype ? dtype : "?");
        goto done;
    }
    if (!byte_level && m->has_decoder && load_decoder(m, dec, "decoder", e) != MP_OK) goto done;
    if (load_post(t, json_object_get(root, "post_processor"), e) != MP_OK) goto done;
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
    if (rc != MP_OK) mp_tok_free(t);
    return rc;
}

int mp_tok_init_json(MpTok *t, const char *json, size_t json_len, const char *config, size_t config_len, MpErr *e) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    json_error_t je;
    json_t *root = json_loadb(json, json_len, JSON_ALLOW_NUL, &je);
    if (!root) return mp_err_set(e, "tokenizer.json: not valid JSON (line %d: %s)", je.line, je.text);
    int rc = init_root(t, root, config, config_len, e);
    json_decref(root);
    if (rc != MP_OK) return MP_ERR;
    t->hash = mp_fnv1a64(json, json_len, MP_FNV_INIT);
    if (config) t->hash = mp_fnv1a64(config, config_len, t->hash);
    return MP_OK;
}

/* ======================= GGUF-style vocabulary (tokenizer.ggml.*) ======================= */

/* The split regexes of the tokenizer.json files these GGUF pre-tokenizer names stand for
 * (llama.cpp's names; model-formats.md §3.6). */
static const char re_llama3[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
                                "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char re_qwen2[] = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                               "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

int mp_tok_init_vocab(MpTok *t, const MpTokVocab *v, MpErr *e) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    if (!v->pre) return mp_err_set(e, "GGUF vocabulary: tokenizer.ggml.pre is missing");
    const char *re = NULL;
    int ignore_merges = 0, nfc = 0, gpt2 = 0, add_bos = v->add_bos;
    if (!strcmp(v->pre, "llama-bpe") || !strcmp(v->pre, "llama3") || !strcmp(v->pre, "llama-v3")) {
        re = re_llama3;
        ignore_merges = 1;
        if (add_bos < 0) add_bos = 1;
    } else if (!strcmp(v->pre, "dbrx") || !strcmp(v->pre, "smaug-bpe")) {
        re = re_llama3;
    } else if (!strcmp(v->pre, "qwen2")) {
        re = re_qwen2;
        nfc = 1;
    } else if (!strcmp(v->pre, "gpt-2")) {
        gpt2 = 1;
    } else {
        return mp_err_set(e, "GGUF vocabulary: pre-tokenizer \"%.60s\" is not supported (llama-bpe, llama3, "
                             "llama-v3, dbrx, smaug-bpe, qwen2, gpt-2 are)", v->pre);
    }
    if (add_bos < 0) add_bos = 0;
    if (v->n_tokens <= 0 || v->n_tokens > MP_TOK_MAX_IDS)
        return mp_err_set(e, "GGUF vocabulary: %lld tokens is out of range [1, %d]", (long long)v->n_tokens,
                          MP_TOK_MAX_IDS);
    if ((add_bos && (v->bos_id < 0 || v->bos_id >= v->n_tokens)) ||
        (v->add_eos > 0 && (v->eos_id < 0 || v->eos_id >= v->n_tokens)))
        return mp_err_set(e, "GGUF vocabulary: BOS/EOS id out of range");
    int rc = MP_ERR;
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    for (int64_t i = 0; i < v->n_tokens; i++) {
        int type = v->token_types ? v->token_types[i] : 1;
        if (type == 5) continue; /* UNUSED: "[PAD{id}]" fillers */
        json_object_setn_new(vocab, v->tokens[i], v->token_lens[i], json_integer(i));
        if (type == 3 || type == 4) /* CONTROL → special, USER_DEFINED → plain added token */
            json_array_append_new(added, json_pack("{s:I, s:s%, s:b, s:b, s:b, s:b, s:b}", "id", (json_int_t)i,
                                                   "content", v->tokens[i], v->token_lens[i], "single_word", 0,
                                                   "lstrip", 0, "rstrip", 0, "normalized", 0, "special", type == 3));
    }
    for (int64_t i = 0; i < v->n_merges; i++)
        json_array_append_new(merges, json_stringn(v->merges[i], v->merge_lens[i]));
    json_t *bl = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0,
                           "use_regex", gpt2);
    json_t *pre = gpt2 ? bl
                       : json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, o]}", "type", "Sequence", "pretokenizers", "type",
                                   "Split", "pattern", "Regex", re, "behavior", "Isolated", "invert", 0, bl);
    json_t *single = json_array(), *specials = json_object();
    char name[32];
    if (add_bos) {
        snprintf(name, sizeof name, "bos%d", v->bos_id);
        json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", name, "type_id", 0));
        json_object_set_new(specials, name, json_pack("{s:s, s:[i], s:[]}", "id", name, "ids", v->bos_id, "tokens"));
    }
    json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "Sequence", "id", "A", "type_id", 0));
    if (v->add_eos > 0) {
        snprintf(name, sizeof name, "eos%d", v->eos_id);
        json_array_append_new(single, json_pack("{s:{s:s, s:i}}", "SpecialToken", "id", name, "type_id", 0));
        json_object_set_new(specials, name, json_pack("{s:s, s:[i], s:[]}", "id", name, "ids", v->eos_id, "tokens"));
    }
    json_t *post = json_pack("{s:s, s:o, s:o}", "type", "TemplateProcessing", "single", single, "special_tokens", specials);
    json_t *root = json_pack("{s:o, s:o, s:o, s:o, s:{s:s}, s:{s:s, s:b, s:o, s:o}}", "added_tokens", added,
                             "normalizer", nfc ? json_pack("{s:s}", "type", "NFC") : json_null(), "pre_tokenizer", pre,
                             "post_processor", post, "decoder", "type", "ByteLevel", "model", "type", "BPE",
                             "ignore_merges", ignore_merges, "vocab", vocab, "merges", merges);
    if (!root) {
        mp_err_set(e, "GGUF vocabulary: out of memory");
    } else {
        rc = init_root(t, root, NULL, 0, e);
        if (rc != MP_OK) mp_err_prefix(e, "GGUF vocabulary");
    }
    json_decref(root);
    if (rc != MP_OK) return MP_ERR;
    uint64_t h = mp_fnv1a64(v->pre, strlen(v->pre), MP_FNV_INIT);
    for (int64_t i = 0; i < v->n_tokens; i++) h = mp_fnv1a64(v->tokens[i], v->token_lens[i] + 0, h);
    for (int64_t i = 0; i < v->n_merges; i++) h = mp_fnv1a64(v->merges[i], v->merge_lens[i], h);
    t->hash = h;
    return MP_OK;
}

void mp_tok_init_bytes(MpTok *t) {
    memset(t, 0, sizeof *t);
    t->bytes = 1;
    t->n_ids = 256;
    for (int i = 0; i < 256; i++) t->byte_strs[2 * i] = (char)i;
    t->bos_id = t->eos_id = -1;
    t->hash = mp_fnv1a64("maskpos byte vocabulary", 23, MP_FNV_INIT);
    snprintf(t->path, sizeof t->path, "bytes");
}

void mp_tok_bytes_add_bos(MpTok *t) {
    MP_ASSERT(t->bytes);
    t->n_ids = 257;
    t->bos_id = 256;
    t->hash = mp_fnv1a64("maskpos byte vocabulary + BOS 256", 33, MP_FNV_INIT);
    snprintf(t->path, sizeof t->path, "bytes+bos");
}

/* 1 when dir/config.json names the byte vocabulary ("maskpos_tokenizer": "bytes"), 2 when it
 * also has the BOS of `maskpos train --bos` ("bos_token_id": 256, "vocab_size": 257). */
static int tok_dir_is_bytes(const char *dir) {
    char path[4096];
    MpErr e;
    char *s = NULL;
    size_t n = 0;
    if (mp_path_join(path, sizeof path, dir, "config.json", &e) != MP_OK || !mp_file_exists(path) ||
        read_file(path, &s, &n, &e) != MP_OK)
        return 0;
    json_t *cfg = json_loadb(s, n, 0, NULL);
    free(s);
    const char *v = json_string_value(json_object_get(cfg, "maskpos_tokenizer"));
    int yes = v && !strcmp(v, "bytes");
    if (yes && json_integer_value(json_object_get(cfg, "bos_token_id")) == 256 &&
        json_integer_value(json_object_get(cfg, "vocab_size")) == 257)
        yes = 2;
    json_decref(cfg);
    return yes;
}

int mp_tok_init(MpTok *t, const char *model, MpErr *e) {
    memset(t, 0, sizeof *t);
    size_t ml = strlen(model);
    if (!strcmp(model, "bytes")) {
        mp_tok_init_bytes(t);
        return MP_OK;
    }
    if (ml >= 5 && !strcmp(model + ml - 5, ".gguf")) return mp_tok_init_gguf(t, model, e);
    struct stat st;
    if (stat(model, &st) != 0) return mp_err_set(e, "%s: %s", model, strerror(errno));
    char path[4096], cfg_path[4096];
    if (S_ISDIR(st.st_mode)) {
        if (mp_path_join(path, sizeof path, model, "tokenizer.json", e) != MP_OK) return MP_ERR;
        int bytes = mp_file_exists(path) ? 0 : tok_dir_is_bytes(model);
        if (bytes) {
            mp_tok_init_bytes(t);
            if (bytes == 2) mp_tok_bytes_add_bos(t);
            return MP_OK;
        }
        if (!mp_file_exists(path)) return mp_err_set(e, "%s: no tokenizer.json in this directory", model);
    } else {
        if (ml >= sizeof path) return mp_err_set(e, "%s: path too long", model);
        memcpy(path, model, ml + 1);
    }
    /* tokenizer_config.json beside tokenizer.json */
    const char *slash = strrchr(path, '/');
    if (slash) {
        size_t dl = (size_t)(slash - path);
        if (dl + 30 >= sizeof cfg_path) return mp_err_set(e, "%s: path too long", path);
        memcpy(cfg_path, path, dl);
        snprintf(cfg_path + dl, sizeof cfg_path - dl, "/tokenizer_config.json");
    } else
        snprintf(cfg_path, sizeof cfg_path, "tokenizer_config.json");
    char *json = NULL, *cfg = NULL;
    size_t jl = 0, cl = 0;
    if (read_file(path, &json, &jl, e) != MP_OK) return MP_ERR;
    if (jl >= 4 && !memcmp(json, "GGUF", 4)) {
        free(json);
        return mp_tok_init_gguf(t, path, e);
    }
    if (mp_file_exists(cfg_path) && read_file(cfg_path, &cfg, &cl, e) != MP_OK) {
        free(json);
        return MP_ERR;
    }
    int rc = mp_tok_init_json(t, json, jl, cfg, cl, e);
    free(json);
    free(cfg);
    if (rc != MP_OK) return mp_err_prefix(e, "%s", path);
    snprintf(t->path, sizeof t->path, "%s", path);
    return MP_OK;
}

void mp_tok_free(MpTok *t) {
    mp_tok_spm_free(t->spm);
    MpTokImpl *m = t->impl;
    if (m) {
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
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
}

const char *mp_tok_id_to_token(const MpTok *t, int32_t id) {
    if (t->spm) return mp_tok_spm_piece(t->spm, id);
    if (t->bytes) return id >= 0 && id < 256 ? t->byte_strs + 2 * id : id == 256 && t->bos_id == 256 ? "<bos>" : NULL;
    if (!t->impl || id < 0 || id >= t->n_ids || !(t->impl->flags[id] & MP_TOK_F_PRESENT)) return NULL;
    return t->impl->strs.data + t->impl->s_off[id];
}

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

/* ================================== pre-tokenizer ================================== */

static int push_piece(MpTokPiece **p, size_t *cap, size_t *n, size_t off, size_t len, MpErr *e) {
    if (len == 0) return MP_OK; /* HF drops empty splits */
    if (grow((void **)p, cap, *n + 1, sizeof **p, e) != MP_OK) return MP_ERR;
    (*p)[*n].off = off;
    (*p)[*n].len = len;
    (*n)++;
    return MP_OK;
}

/* Splits one piece into (offset, length, is_match) segments covering it, as HF's
 * Pattern::find_matches over Oniguruma's find_iter does: an empty match is kept (it splits the
 * text) unless it sits right at the end of the previous match, in which case the search moves
 * on by one character. Returns the number of segments or -1. */
static long find_segments(MpTokImpl *m, const MpTokStep *st, const char *s, size_t n, MpErr *e) {
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
        if (grow((void **)&m->segs, &m->seg_cap, ns + 2, sizeof *m->segs, e) != MP_OK) return -1;
        if (ms > prev) m->segs[ns++] = (MpTokSeg){prev, ms - prev, 0};
        m->segs[ns++] = (MpTokSeg){ms, me - ms, 1};
        prev = me;
    }
    if (grow((void **)&m->segs, &m->seg_cap, ns + 1, sizeof *m->segs, e) != MP_OK) return -1;
    if (prev < n) m->segs[ns++] = (MpTokSeg){prev, n - prev, 0};
    if (st->invert)
        for (size_t i = 0; i < ns; i++) m->segs[i].is_match = !m->segs[i].is_match;
    return (long)ns;
}

/* Appends a piece, empty ones included (split_step drops them at the end, as HF does after
 * applying the behaviour). */
static int push_seg(MpTokPiece **p, size_t *cap, size_t *n, size_t off, size_t len, MpErr *e) {
    if (grow((void **)p, cap, *n + 1, sizeof **p, e) != MP_OK) return MP_ERR;
    (*p)[*n].off = off;
    (*p)[*n].len = len;
    (*n)++;
    return MP_OK;
}

/* One split step over every piece of (buf, in) into out (same buffer). */
static int split_step(MpTokImpl *m, const MpTokStep *st, const char *buf, const MpTokPiece *in, size_t nin,
                      MpTokPiece **out, size_t *out_cap, size_t *nout, MpErr *e) {
    *nout = 0;
    for (size_t p = 0; p < nin; p++) {
        const char *s = buf + in[p].off;
        long ns = find_segments(m, st, s, in[p].len, e);
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

/* ==================================== normalizers ==================================== */

/* Appends the normalized s[0..n) (valid UTF-8) to out: the normalizer steps in order, as HF's
 * Sequence applies them. */
static int normalize_append(MpTokImpl *m, MpTokBuf *out, const char *s, size_t n, MpErr *e) {
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
            long ns = find_segments(m, &nm->pat, cur, cn, e);
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
                if (mp_tok_ids_push(out, m->cache_ids[s->ioff + k], e) != MP_OK) return MP_ERR;
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
        int32_t id = vocab_find(m, p + i, l);
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
static int bpe_piece(MpTok *t, MpTokIds *out, const char *p, size_t n, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (t->ignore_merges) {
        int32_t id = vocab_find(m, p, n);
        if (id >= 0) return mp_tok_ids_push(out, id, e);
    }
    if (m->byte_level && n == 1 && m->byte_id[(unsigned char)p[0]] >= 0) return mp_tok_ids_push(out, m->byte_id[(unsigned char)p[0]], e);
    int cacheable = n <= MP_TOK_CACHE_MAX_PIECE;
    uint64_t h = 0;
    if (cacheable) {
        int hit;
        h = hash_bytes(p, n);
        if (cache_get(m, p, n, h, out, e, &hit) != MP_OK) return MP_ERR;
        if (hit) return MP_OK;
    }
    /* one symbol per byte (HF: per byte-level character); unknown bytes become unk or vanish */
    if (grow((void **)&m->sym, &m->sym_cap, n, sizeof *m->sym, e) != MP_OK) return MP_ERR;
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
            grow((void **)&m->heap, &m->heap_cap, cap_needed, sizeof *m->heap, e) != MP_OK)
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
        if (mp_tok_ids_push(out, s[i].c, e) != MP_OK) return MP_ERR;
    /* a piece may give no ids at all (bytes outside the vocabulary, no unk): out->ids can still be
     * NULL then, so no pointer is formed from it (issue 19: UB under UBSan) */
    if (cacheable && out->n - first <= UINT16_MAX) cache_put(m, p, n, h, out->n > first ? out->ids + first : NULL, out->n - first);
    return MP_OK;
}

/* ====================================== encode ====================================== */

/* Pre-tokenizes and BPE-encodes one normalized segment. */
static int encode_normalized(MpTok *t, MpTokIds *out, const char *s, size_t n, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (n == 0) return MP_OK;
    const char *buf = s;
    size_t na = 0, nb = 0;
    if (push_piece(&m->pa, &m->pa_cap, &na, 0, n, e) != MP_OK) return MP_ERR;
    MpTokBuf *space_buf = &m->bufa;
    for (int k = 0; k < m->n_steps; k++) {
        const MpTokStep *st = &m->steps[k];
        if (st->kind == MP_TOK_STEP_PREFIX_SPACE) { /* copy each piece, with " " before it if missing */
            space_buf->n = 0;
            nb = 0;
            for (size_t i = 0; i < na; i++) {
                size_t off = space_buf->n;
                if (buf[m->pa[i].off] != ' ' && mp_tok_buf_append(space_buf, " ", 1, e) != MP_OK) return MP_ERR;
                if (mp_tok_buf_append(space_buf, buf + m->pa[i].off, m->pa[i].len, e) != MP_OK ||
                    push_piece(&m->pb, &m->pb_cap, &nb, off, space_buf->n - off, e) != MP_OK)
                    return MP_ERR;
            }
            buf = space_buf->data;
            space_buf = space_buf == &m->bufa ? &m->bufb : &m->bufa;
        } else if (st->kind == MP_TOK_STEP_METASPACE) { /* spaces → replacement, maybe prepended */
            space_buf->n = 0;
            nb = 0;
            for (size_t i = 0; i < na; i++) {
                const char *q = buf + m->pa[i].off;
                size_t ql = m->pa[i].len, off = space_buf->n;
                int starts = (ql >= st->lit_len && !memcmp(q, st->lit, st->lit_len)) || q[0] == ' ';
                int prepend = !starts && (st->scheme == MP_TOK_PREPEND_ALWAYS ||
                                          (st->scheme == MP_TOK_PREPEND_FIRST && m->at_start && i == 0 && m->pa[0].off == 0));
                if (prepend && mp_tok_buf_append(space_buf, st->lit, st->lit_len, e) != MP_OK) return MP_ERR;
                size_t run = 0;
                for (size_t j = 0; j < ql; j++) {
                    if (q[j] != ' ') continue;
                    if (mp_tok_buf_append(space_buf, q + run, j - run, e) != MP_OK ||
                        mp_tok_buf_append(space_buf, st->lit, st->lit_len, e) != MP_OK)
                        return MP_ERR;
                    run = j + 1;
                }
                if (mp_tok_buf_append(space_buf, q + run, ql - run, e) != MP_OK ||
                    push_piece(&m->pb, &m->pb_cap, &nb, off, space_buf->n - off, e) != MP_OK)
                    return MP_ERR;
            }
            buf = space_buf->data;
            space_buf = space_buf == &m->bufa ? &m->bufb : &m->bufa;
        } else if (split_step(m, st, buf, m->pa, na, &m->pb, &m->pb_cap, &nb, e) != MP_OK)
            return MP_ERR;
        MpTokPiece *tp = m->pa;
        size_t tc = m->pa_cap;
        m->pa = m->pb;
        m->pa_cap = m->pb_cap;
        m->pb = tp;
        m->pb_cap = tc;
        na = nb;
    }
    for (size_t i = 0; i < na; i++)
        if (bpe_piece(t, out, buf + m->pa[i].off, m->pa[i].len, e) != MP_OK) return MP_ERR;
    return MP_OK;
}

/* A gap between raw-matched added tokens: normalize, match normalized added tokens, encode. */
static int encode_gap(MpTok *t, MpTokIds *out, const char *s, size_t n, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (n == 0) return MP_OK;
    if (m->n_norms) {
        m->norm.n = 0;
        if (normalize_append(m, &m->norm, s, n, e) != MP_OK) return MP_ERR;
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
    if (!utf8_valid(text, len)) {
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

/* ====================================== decode ====================================== */

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
                if (rc == MP_OK && utf8_valid(bytes.data, bytes.n)) rc = strs_cat(out, bytes.data, bytes.n, e);
                for (size_t k = 0; k < bytes.n && rc == MP_OK && !utf8_valid(bytes.data, bytes.n); k++)
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
