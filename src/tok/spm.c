/* spm.c — SentencePiece BPE from a GGUF vocabulary (tokenizer.ggml.model "llama"), ids identical
 * to llama.cpp's own tokenizer on the same file.
 *
 * Implements (docs/tokenizer.md "GGUF llama vocabularies" has the account):
 *   - the vocabulary: pieces, scores, token types (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED,
 *     BYTE; anything else UNDEFINED), BOS/EOS, add_bos/add_eos, add_space_prefix; an empty piece
 *     is renamed "[EMPTY_<id>]" as llama.cpp does; two pieces with one text are refused (llama.cpp
 *     aborts on them); the "control-looking" pieces llama.cpp promotes to CONTROL by name;
 *   - encode: special pieces (CONTROL, UNKNOWN, USER_DEFINED) are cut out of the raw text longest
 *     first (llama.cpp's partition; ties between equal lengths by id); each remaining fragment
 *     gets a leading space when it starts the text or follows a special piece (the "dummy
 *     prefix"), spaces become U+2581, and adjacent symbols (UTF-8 characters at first) merge
 *     while any adjacent pair spells a piece, the pair of highest score first (ties: leftmost);
 *     a symbol that is no piece is written as its byte pieces <0xNN> (byte fallback);
 *   - decode: llama.cpp's detokenize without removing specials: NORMAL pieces with U+2581 → space,
 *     BYTE pieces as their byte, USER_DEFINED as written, CONTROL/UNKNOWN only when specials are
 *     kept, UNUSED/UNDEFINED never; one leading space of the first piece dropped.
 * Deliberate differences: a byte with neither a <0xNN> nor a one-byte piece becomes the unknown
 * piece (llama.cpp throws and aborts); the per-model lstrip/rstrip attributes llama.cpp sets by
 * general.name (Phi-3) and pre-tokenizer (jina-v2) are not applied.
 * Does not: Unigram ("t5"), WordPiece ("bert"), RWKV vocabularies (refused by gguf_vocab.c).
 * Not thread-safe: encode keeps scratch in the tokenizer.
 * Tested by: tests/test_tok_spm.c (every id against llama.cpp through node-llama-cpp on
 * stories260K.gguf and a 32000-piece Llama-2 vocabulary written to GGUF), tests/fuzz/fuzz_vocab.c.
 */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"        /* mp_fnv1a64 */
#include "tok/tok.h"     /* MpTok, MpTokSpmVocab, ids/buf helpers */
#include "tok/spm.h"     /* the spm entry points */
#include "tok/unicode.h" /* UTF-8 helpers */

/* llama.cpp's token attributes (llama_token_attr bits) */
enum {
    SPM_A_UNDEFINED = 0,
    SPM_A_UNKNOWN = 1,
    SPM_A_UNUSED = 2,
    SPM_A_NORMAL = 4,
    SPM_A_CONTROL = 8,
    SPM_A_USER_DEFINED = 16,
    SPM_A_BYTE = 32,
};
#define SPM_A_SPECIAL (SPM_A_UNKNOWN | SPM_A_CONTROL)

typedef struct SpmSym {
    uint32_t off, n;    /* bytes in the escaped text; n 0 once merged into the left neighbour */
    int32_t prev, next; /* -1 at the ends */
} SpmSym;

typedef struct SpmBigram {
    float score;
    int32_t left, right;
    uint32_t size;
} SpmBigram;

typedef struct SpmSpan {
    size_t start, end;
    int32_t id;
} SpmSpan;

struct MpTokSpm {
    int32_t n;            /* pieces */
    MpTokBuf text;        /* arena of piece strings, each NUL-terminated */
    size_t *off;          /* [n] piece i at text.data + off[i] */
    uint32_t *len;        /* [n] bytes */
    float *score;         /* [n] */
    uint8_t *attr;        /* [n] SPM_A_* */
    int32_t *map;         /* [mask + 1] open addressing text → id, -1 empty */
    size_t mask;
    uint32_t max_len;     /* longest piece, bytes */
    int32_t byte_tok[256];/* piece of each byte for byte fallback, -1 none */
    int32_t *special;     /* [n_special] CONTROL/UNKNOWN/USER_DEFINED ids, longest first */
    int n_special;
    int add_space_prefix, add_bos, add_eos;
    int32_t bos, eos, unk;
    /* scratch reused by every encode */
    MpTokBuf clean, esc;
    SpmSym *sym;
    size_t sym_cap;
    SpmBigram *heap;
    size_t heap_cap;
    SpmSpan *spans;
    size_t span_cap;
    uint8_t *taken;
    size_t taken_cap;
};

/* =================================== vocabulary =================================== */

static uint64_t spm_hash(const char *p, size_t n) { return mp_fnv1a64(p, n, MP_FNV_INIT); }

static int32_t spm_find(const MpTokSpm *s, const char *p, size_t n) {
    if (n > s->max_len) return -1;
    size_t i = (size_t)spm_hash(p, n) & s->mask;
    for (;;) {
        int32_t id = s->map[i];
        if (id < 0) return -1;
        if (s->len[id] == n && !memcmp(s->text.data + s->off[id], p, n)) return id;
        i = (i + 1) & s->mask;
    }
}

/* Inserts id. Two pieces with one text are refused (llama.cpp aborts on them). */
static int spm_insert(MpTokSpm *s, int32_t id, MpErr *e) {
    const char *p = s->text.data + s->off[id];
    size_t n = s->len[id], i = (size_t)spm_hash(p, n) & s->mask;
    for (;;) {
        int32_t *slot = &s->map[i];
        if (*slot < 0) {
            *slot = id;
            return MP_OK;
        }
        if (s->len[*slot] == n && !memcmp(s->text.data + s->off[*slot], p, n))
            return mp_err_set(e, "piece \"%.40s\" is both id %d and id %d", p, *slot, id);
        i = (i + 1) & s->mask;
    }
}

static uint8_t spm_attr_of_type(int32_t type) {
    switch (type) {
    case 1: return SPM_A_NORMAL;
    case 2: return SPM_A_UNKNOWN;
    case 3: return SPM_A_CONTROL;
    case 4: return SPM_A_USER_DEFINED;
    case 5: return SPM_A_UNUSED;
    case 6: return SPM_A_BYTE;
    default: return SPM_A_UNDEFINED;
    }
}

/* Pieces llama.cpp marks CONTROL by their text whatever their type (end-of-turn, fill-in-the-
 * middle and end-of-generation names). */
static const char *const spm_control_names[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", "<|eom_id|>", "<|fim_prefix|>", "<fim-prefix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>", "<PRE>", "<|fim_suffix|>", "<fim-suffix>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81hole\xef\xbd\x9c>", "<SUF>", "<|fim_middle|>", "<fim-middle>",
    "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>", "<MID>", "<|fim_pad|>", "<fim-pad>", "<PAD>", "<|fim_repo|>",
    "<|repo_name|>", "<fim-repo>", "<REPO>", "<|file_sep|>",
};

static MpTokSpm *spm_t; /* comparison context for qsort (load time only) */
static int spm_cmp_special(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (spm_t->len[a] != spm_t->len[b]) return spm_t->len[a] > spm_t->len[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int spm_build(MpTokSpm *s, const MpTokSpmVocab *v, MpErr *e) {
    size_t n = (size_t)v->n_tokens, cap = 16;
    while (cap < 2 * n) cap *= 2;
    s->n = (int32_t)n;
    s->off = mp_try_malloc(n * sizeof *s->off);
    s->len = mp_try_malloc(n * sizeof *s->len);
    s->score = mp_try_malloc(n * sizeof *s->score);
    s->attr = mp_try_malloc(n);
    s->map = mp_try_malloc(cap * sizeof *s->map);
    s->special = mp_try_malloc(n * sizeof *s->special);
    if (!s->off || !s->len || !s->score || !s->attr || !s->map || !s->special)
        return mp_err_set(e, "out of memory for %zu pieces", n);
    memset(s->map, 0xFF, cap * sizeof *s->map);
    s->mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        char empty[40];
        const char *p = v->tokens[i];
        size_t l = v->token_lens[i];
        if (l > UINT32_MAX / 2) return mp_err_set(e, "piece %zu is %zu bytes long", i, l);
        if (l == 0) { /* llama.cpp: "[EMPTY_<id>]" */
            l = (size_t)snprintf(empty, sizeof empty, "[EMPTY_%zu]", i);
            p = empty;
        }
        s->off[i] = s->text.n;
        s->len[i] = (uint32_t)l;
        if (mp_tok_buf_append(&s->text, p, l, e) != MP_OK || mp_tok_buf_append(&s->text, "", 0, e) != MP_OK)
            return MP_ERR;
        s->text.n++; /* keep the NUL */
        s->score[i] = v->scores ? v->scores[i] : 0.0f;
        s->attr[i] = v->token_types ? spm_attr_of_type(v->token_types[i]) : SPM_A_NORMAL;
        if (s->len[i] > s->max_len) s->max_len = s->len[i];
    }
    for (size_t i = 0; i < n; i++)
        if (spm_insert(s, (int32_t)i, e) != MP_OK) return MP_ERR;
    for (size_t k = 0; k < sizeof spm_control_names / sizeof spm_control_names[0]; k++) {
        int32_t id = spm_find(s, spm_control_names[k], strlen(spm_control_names[k]));
        if (id >= 0) s->attr[id] = SPM_A_CONTROL;
    }
    for (int b = 0; b < 256; b++) {
        char hex[7], one = (char)b;
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        s->byte_tok[b] = spm_find(s, hex, 6);
        if (s->byte_tok[b] < 0) s->byte_tok[b] = spm_find(s, &one, 1);
    }
    for (size_t i = 0; i < n; i++)
        if (s->attr[i] & (SPM_A_CONTROL | SPM_A_USER_DEFINED | SPM_A_UNKNOWN)) s->special[s->n_special++] = (int32_t)i;
    spm_t = s;
    qsort(s->special, (size_t)s->n_special, sizeof *s->special, spm_cmp_special);
    spm_t = NULL;
    return MP_OK;
}

void mp_tok_spm_free(MpTokSpm *s) {
    if (!s) return;
    free(s->taken);
    free(s->spans);
    free(s->heap);
    free(s->sym);
    mp_tok_buf_free(&s->esc);
    mp_tok_buf_free(&s->clean);
    free(s->special);
    free(s->map);
    free(s->attr);
    free(s->score);
    free(s->len);
    free(s->off);
    mp_tok_buf_free(&s->text);
    free(s);
}

int mp_tok_init_spm(MpTok *t, const MpTokSpmVocab *v, MpErr *e) {
    memset(t, 0, sizeof *t);
    t->bos_id = t->eos_id = -1;
    if (v->n_tokens <= 0 || v->n_tokens > (1 << 24))
        return mp_err_set(e, "SentencePiece vocabulary: %lld pieces is out of range [1, %d]", (long long)v->n_tokens, 1 << 24);
    if ((v->add_bos && (v->bos_id < 0 || v->bos_id >= v->n_tokens)) ||
        (v->add_eos && (v->eos_id < 0 || v->eos_id >= v->n_tokens)))
        return mp_err_set(e, "SentencePiece vocabulary: BOS %d / EOS %d is not one of the %lld pieces", v->bos_id,
                          v->eos_id, (long long)v->n_tokens);
    MpTokSpm *s = mp_try_calloc(1, sizeof *s);
    if (!s) return mp_err_set(e, "SentencePiece vocabulary: out of memory");
    if (spm_build(s, v, e) != MP_OK) {
        mp_tok_spm_free(s);
        return mp_err_prefix(e, "SentencePiece vocabulary");
    }
    s->add_space_prefix = v->add_space_prefix != 0;
    s->add_bos = v->add_bos != 0;
    s->add_eos = v->add_eos != 0;
    s->bos = v->bos_id;
    s->eos = v->eos_id;
    s->unk = v->unk_id >= 0 && v->unk_id < v->n_tokens ? v->unk_id : -1;
    t->spm = s;
    t->n_ids = s->n;
    t->bos_id = s->add_bos ? s->bos : -1;
    t->eos_id = s->add_eos ? s->eos : -1;
    t->n_added = s->n_special;
    uint64_t h = mp_fnv1a64("llama-spm", 9, MP_FNV_INIT);
    for (int32_t i = 0; i < s->n; i++) {
        h = mp_fnv1a64(s->text.data + s->off[i], s->len[i] + 1, h);
        h = mp_fnv1a64(&s->score[i], sizeof s->score[i], h);
        h = mp_fnv1a64(&s->attr[i], 1, h);
    }
    int32_t flags[6] = {s->add_space_prefix, s->add_bos, s->add_eos, s->bos, s->eos, s->unk};
    t->hash = mp_fnv1a64(flags, sizeof flags, h);
    return MP_OK;
}

/* ================================= special pieces ================================= */

static int spm_grow(void **p, size_t *cap, size_t need, size_t elem, MpErr *e) {
    if (need <= *cap) return MP_OK;
    size_t c = *cap ? *cap : 64, bytes;
    while (c < need) {
        if (c > SIZE_MAX / 4) return mp_err_set(e, "tokenizer scratch: size overflow");
        c *= 2;
    }
    if (mp_size_mul(c, elem, &bytes) != MP_OK) return mp_err_set(e, "tokenizer scratch: size overflow");
    void *q = realloc(*p, bytes);
    if (!q) return mp_err_set(e, "tokenizer scratch: out of memory (%zu bytes)", bytes);
    *p = q;
    *cap = c;
    return MP_OK;
}

static int spm_span_cmp(const void *pa, const void *pb) {
    const SpmSpan *a = pa, *b = pb;
    return a->start < b->start ? -1 : a->start > b->start;
}

/* llama.cpp's tokenizer_st_partition, as spans: for each special piece, longest first, its
 * occurrences in the raw text left to right, each taken when none of its bytes was taken by a
 * longer piece, the next search starting after it. Returns the number of spans (sorted). */
static long spm_partition(MpTokSpm *s, const char *text, size_t n, MpErr *e) {
    if (s->n_special == 0 || n == 0) return 0;
    uint8_t first[256] = {0};
    for (size_t i = 0; i < n; i++) first[(unsigned char)text[i]] = 1;
    size_t ns = 0;
    int have_taken = 0;
    for (int k = 0; k < s->n_special; k++) {
        int32_t id = s->special[k];
        const char *p = s->text.data + s->off[id];
        size_t l = s->len[id];
        if (l > n || !first[(unsigned char)p[0]]) continue;
        size_t pos = 0;
        while (pos + l <= n) {
            const char *hit = memmem(text + pos, n - pos, p, l);
            if (!hit) break;
            size_t at = (size_t)(hit - text);
            int free_span = 1;
            if (have_taken)
                for (size_t j = at; j < at + l && free_span; j++) free_span = !s->taken[j];
            if (!free_span) {
                pos = at + 1;
                continue;
            }
            if (!have_taken) {
                if (spm_grow((void **)&s->taken, &s->taken_cap, n, 1, e) != MP_OK) return -1;
                memset(s->taken, 0, n);
                have_taken = 1;
            }
            memset(s->taken + at, 1, l);
            if (spm_grow((void **)&s->spans, &s->span_cap, ns + 1, sizeof *s->spans, e) != MP_OK) return -1;
            s->spans[ns++] = (SpmSpan){at, at + l, id};
            pos = at + l;
        }
    }
    if (ns > 1) qsort(s->spans, ns, sizeof *s->spans, spm_span_cmp);
    return (long)ns;
}

/* ================================ merging by score ================================ */

/* a before b: higher score, then the leftmost (llama.cpp's llm_bigram_spm comparator) */
static int spm_better(const SpmBigram *a, const SpmBigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void spm_heap_push(SpmBigram *h, size_t *n, SpmBigram x) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!spm_better(&x, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static SpmBigram spm_heap_pop(SpmBigram *h, size_t *n) {
    SpmBigram top = h[0], x = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, c = i;
        const SpmBigram *best = &x;
        if (l < *n && spm_better(&h[l], best)) {
            c = l;
            best = &h[l];
        }
        if (r < *n && spm_better(&h[r], best)) c = r;
        if (c == i) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = x;
    return top;
}

static int spm_try_bigram(MpTokSpm *s, size_t *hn, int32_t left, int32_t right, MpErr *e) {
    if (left < 0 || right < 0) return MP_OK;
    uint32_t size = s->sym[left].n + s->sym[right].n;
    int32_t id = spm_find(s, s->esc.data + s->sym[left].off, size);
    if (id < 0) return MP_OK;
    if (spm_grow((void **)&s->heap, &s->heap_cap, *hn + 1, sizeof *s->heap, e) != MP_OK) return MP_ERR;
    spm_heap_push(s->heap, hn, (SpmBigram){s->score[id], left, right, size});
    return MP_OK;
}

/* Appends the ids of one escaped fragment (s->esc). */
static int spm_session(MpTokSpm *s, MpTokIds *out, MpErr *e) {
    const unsigned char *u = (const unsigned char *)s->esc.data;
    size_t n = s->esc.n, ns = 0;
    if (n == 0) return MP_OK;
    if (n > UINT32_MAX / 2) return mp_err_set(e, "a text fragment of %zu bytes is too long", n);
    if (spm_grow((void **)&s->sym, &s->sym_cap, n, sizeof *s->sym, e) != MP_OK) return MP_ERR;
    for (size_t off = 0; off < n;) {
        uint32_t cp;
        size_t l = (size_t)mp_tok_utf8_next(u + off, n - off, &cp);
        s->sym[ns] = (SpmSym){(uint32_t)off, (uint32_t)l, (int32_t)ns - 1, off + l == n ? -1 : (int32_t)ns + 1};
        off += l;
        ns++;
    }
    size_t hn = 0;
    for (size_t i = 1; i < ns; i++)
        if (spm_try_bigram(s, &hn, (int32_t)i - 1, (int32_t)i, e) != MP_OK) return MP_ERR;
    while (hn > 0) {
        SpmBigram b = spm_heap_pop(s->heap, &hn);
        SpmSym *l = &s->sym[b.left], *r = &s->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->sym[r->next].prev = b.left;
        if (spm_try_bigram(s, &hn, l->prev, b.left, e) != MP_OK || spm_try_bigram(s, &hn, b.left, l->next, e) != MP_OK)
            return MP_ERR;
    }
    for (int32_t i = 0; i >= 0; i = s->sym[i].next) {
        const SpmSym *y = &s->sym[i];
        int32_t id = spm_find(s, s->esc.data + y->off, y->n);
        if (id >= 0) {
            if (mp_tok_ids_push(out, id, e) != MP_OK) return MP_ERR;
            continue;
        }
        for (uint32_t j = 0; j < y->n; j++) { /* byte fallback */
            int32_t bt = s->byte_tok[u[y->off + j]];
            if (bt < 0) bt = s->unk;
            if (bt < 0) return mp_err_set(e, "byte 0x%02X has no piece (<0x%02X>) and there is no unknown piece", u[y->off + j], u[y->off + j]);
            if (mp_tok_ids_push(out, bt, e) != MP_OK) return MP_ERR;
        }
    }
    return MP_OK;
}

/* One raw fragment: dummy prefix, spaces → U+2581, merge. */
static int spm_fragment(MpTokSpm *s, MpTokIds *out, const char *p, size_t n, int prefix, MpErr *e) {
    static const char ws[3] = {(char)0xE2, (char)0x96, (char)0x81};
    s->esc.n = 0;
    if (prefix && mp_tok_buf_append(&s->esc, ws, 3, e) != MP_OK) return MP_ERR;
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] != ' ') continue;
        if (mp_tok_buf_append(&s->esc, p + run, i - run, e) != MP_OK || mp_tok_buf_append(&s->esc, ws, 3, e) != MP_OK)
            return MP_ERR;
        run = i + 1;
    }
    if (mp_tok_buf_append(&s->esc, p + run, n - run, e) != MP_OK) return MP_ERR;
    return spm_session(s, out, e);
}

int mp_tok_spm_encode(MpTokSpm *s, MpTokIds *out, const char *text, size_t len, int add_special, MpErr *e) {
    s->clean.n = 0;
    if (mp_tok_utf8_sanitize(&s->clean, text, len, NULL, e) != MP_OK) return MP_ERR;
    text = s->clean.data ? s->clean.data : "";
    len = s->clean.n;
    if (add_special && s->add_bos && mp_tok_ids_push(out, s->bos, e) != MP_OK) return MP_ERR;
    long ns = spm_partition(s, text, len, e);
    if (ns < 0) return MP_ERR;
    int prev_special = 1;
    size_t pos = 0;
    for (long k = 0; k <= ns; k++) {
        size_t end = k < ns ? s->spans[k].start : len;
        if (end > pos) {
            if (spm_fragment(s, out, text + pos, end - pos, s->add_space_prefix && prev_special, e) != MP_OK) return MP_ERR;
            prev_special = 0;
        }
        if (k < ns) {
            if (mp_tok_ids_push(out, s->spans[k].id, e) != MP_OK) return MP_ERR;
            prev_special = 1;
            pos = s->spans[k].end;
        }
    }
    if (add_special && s->add_eos && mp_tok_ids_push(out, s->eos, e) != MP_OK) return MP_ERR;
    return MP_OK;
}

/* ===================================== decode ===================================== */

/* The byte of a BYTE piece: two hex digits after "<0x" (strtol's reading of them). */
static unsigned char spm_piece_byte(const char *p, size_t n) {
    unsigned v = 0;
    for (size_t i = 3; i < 5 && i < n; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) break;
        v = v * 16 + (unsigned)d;
    }
    return (unsigned char)v;
}

int mp_tok_spm_decode(const MpTokSpm *s, MpTokBuf *raw, const int32_t *ids, size_t n, int skip_special, MpErr *e) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= s->n)
            return mp_err_set(e, "decode: id %d (position %zu) is not one of the %d pieces", id, i, s->n);
        uint8_t a = s->attr[id];
        const char *p = s->text.data + s->off[id];
        size_t l = s->len[id], start = raw->n;
        if (skip_special && (a & SPM_A_SPECIAL)) continue;
        if (a & (SPM_A_SPECIAL | SPM_A_USER_DEFINED)) {
            if (mp_tok_buf_append(raw, p, l, e) != MP_OK) return MP_ERR;
        } else if (a & SPM_A_NORMAL) {
            size_t run = 0;
            for (size_t j = 0; j + 3 <= l; j++) { /* U+2581 → space */
                if (memcmp(p + j, "\xe2\x96\x81", 3)) continue;
                if (mp_tok_buf_append(raw, p + run, j - run, e) != MP_OK || mp_tok_buf_append(raw, " ", 1, e) != MP_OK)
                    return MP_ERR;
                j += 2;
                run = j + 1;
            }
            if (mp_tok_buf_append(raw, p + run, l - run, e) != MP_OK) return MP_ERR;
        } else if (a & SPM_A_BYTE) {
            unsigned char b = spm_piece_byte(p, l);
            if (mp_tok_buf_append(raw, &b, 1, e) != MP_OK) return MP_ERR;
        }
        /* the first piece loses one leading space (the dummy prefix) */
        if (i == 0 && s->add_space_prefix && raw->n > start && raw->data[start] == ' ') {
            memmove(raw->data + start, raw->data + start + 1, raw->n - start - 1);
            raw->data[--raw->n] = '\0';
        }
    }
    return MP_OK;
}

const char *mp_tok_spm_piece(const MpTokSpm *s, int32_t id) {
    return id >= 0 && id < s->n ? s->text.data + s->off[id] : NULL;
}
