/* hf.h — the internal state of a tokenizer.json tokenizer (src/tok/hf_*.c, normalize.c, pretok.c,
 * bpe.c, encode.c, decode.c), not exported.
 *
 * Implements nothing itself: the MpTokImpl struct (tokens, vocab and merge maps, added tokens,
 * normalizer / pre-tokenizer / decoder steps, scratch) and its limits. It declares no function:
 * the functions the pipeline stages call across files are declared by the header of the file that
 * defines them (hf_parts.h, hf_load.h, normalize.h, pretok.h, bpe.h), so a stage includes the
 * stages it calls and these types, never a header that the files above it implement.
 * Calls go one way, from the top down (no circle): hf_load.c (model, added tokens,
 * tokenizer_config.json: the whole file) → hf_parts.c (normalizer, pre-tokenizer, decoder,
 * post-processor objects) and normalize.c → pretok.c → bpe.c (maps, the merge loop) → unicode.c →
 * text.c; encode.c → normalize.c, pretok.c, bpe.c; decode.c → text.c. Above them: vocab.c →
 * hf_load.c; gguf_vocab.c → vocab.c, spm.c; open.c → gguf_vocab.c, hf_load.c, spm.c.
 */
#ifndef MP_TOK_HF_H
#define MP_TOK_HF_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "tok/text.h"    /* MpTokBuf, MpTokIds */
#include "tok/tok.h"     /* MpTok, MpTokImpl */
#include "tok/unicode.h" /* MpTokNfcWork */

#define MP_TOK_MAX_IDS (1 << 24)       /* guard against absurd ids in a malformed file */
#define MP_TOK_MAX_STEPS 16            /* pre-tokenizer steps after flattening Sequences */
#define MP_TOK_MAX_SPECIAL 16          /* ids a post-processor may add before / after */
#define MP_TOK_CACHE_SLOTS (1u << 16)  /* piece cache: slots, key bytes, ids */
#define MP_TOK_CACHE_KEYS (1u << 22)
#define MP_TOK_CACHE_IDS (1u << 20)
#define MP_TOK_CACHE_MAX_PIECE 255

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
    int form;        /* FORM: MP_TOK_NF_C, _D, _KC, _KD (unicode.h) */
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

enum { MP_TOK_F_PRESENT = 1, MP_TOK_F_ADDED = 2, MP_TOK_F_SPECIAL = 4, MP_TOK_F_NOT_BYTE_LEVEL = 8 };

#endif
