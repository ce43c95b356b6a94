/* tok.h — the model's own tokenizer: HF tokenizer.json byte-level BPE, ids identical to HF.
 *
 * Implements (docs/tokenizer.md has the full account, model-formats.md §4 the file format):
 *   - loading tokenizer.json (+ tokenizer_config.json beside it): BPE model with merges as "a b"
 *     strings or [a, b] pairs, ignore_merges, byte_fallback, unk_token/fuse_unk, added/special
 *     tokens, normalizer (null, NFC, NFKC, NFD, NFKD, Prepend, Replace, Sequence), pre-tokenizer
 *     (Sequence of Split {Regex|String, all five behaviours, invert}, Metaspace and ByteLevel
 *     {add_prefix_space, use_regex}), post-processor (ByteLevel, TemplateProcessing, Sequence)
 *     giving BOS/EOS, decoder (ByteLevel; Replace, ByteFallback, Fuse, Strip, Metaspace);
 *   - encode: added tokens matched on the raw text first (leftmost-longest), then per segment the
 *     normalizers, the Split regexes (taken from the file, compiled with PCRE2 UTF+UCP, patched
 *     to HF's Unicode tables: unicode.c), byte-level mapping, BPE with a merge hash map and a
 *     rank-ordered heap, and a cache of frequent pieces; BOS/EOS per the post-processor;
 *   - decode: ids back to text (byte-level alphabet, invalid UTF-8 → U+FFFD as HF does).
 * Invalid UTF-8 in the input is replaced by U+FFFD per maximal subpart (WHATWG, Python's
 * errors="replace", Node's Buffer.toString) before anything else; HF itself only accepts valid
 * strings, so this is the text HF would be given.
 *   - the same tokenizer from a GGUF-style vocabulary (tokenizer.ggml.tokens/token_type/merges/
 *     pre, handed over as arrays by the GGUF reader): mp_tok_init_vocab.
 * Does not: Unigram / WordPiece / WordLevel models, normalizers other than the above — each is
 * rejected with a message naming it. (.gguf files are read by mp_tok_init_gguf,
 * src/tok/gguf_vocab.c; the byte vocabulary of maskpos-trained models by mp_tok_init_bytes.)
 * Not thread-safe: encode uses scratch buffers inside MpTok; use one MpTok per thread.
 * Implemented by: open.c (opening by path, free, id look-ups), vocab.c, gguf_vocab.c,
 *   hf_load.c, spm.c (the vocabularies), encode.c, decode.c.
 * Tested by: tests/test_tok.c (every id against HF tokenizers on the real Llama-3.1, Qwen3 and
 * cl100k tokenizer files, ≥ 1 MB of text and edge cases; malformed files), test_tok_hfspm.c
 * (Llama-2, Gemma-3), test_tok_nfkc.c (the NFKC Claude file, every normal form), test_tok_spm.c.
 */
#ifndef MP_TOK_H
#define MP_TOK_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr, MP_OK/MP_ERR */
#include "tok/text.h" /* MpTokIds, MpTokBuf and their helpers */

typedef struct MpTokImpl MpTokImpl; /* maps, regexes, scratch: hf.h */
typedef struct MpTokSpm MpTokSpm;   /* a GGUF "llama" (SentencePiece) vocabulary: spm.c */

typedef struct MpTok {
    char path[4096];      /* tokenizer.json that was loaded ("" when loaded from memory) */
    uint64_t hash;        /* FNV-1a of tokenizer.json bytes, then tokenizer_config.json bytes */
    int32_t n_ids;        /* one past the largest id (model vocab and added tokens) */
    int32_t bos_id;       /* -1 when the post-processor adds no BOS */
    int32_t eos_id;       /* -1 when the post-processor adds no EOS */
    int n_added;          /* added tokens (special or not) */
    int nfc;              /* 1 when the normalizer applies NFC */
    int ignore_merges;    /* model.ignore_merges */
    int bytes;            /* 1: the byte vocabulary of maskpos-trained models (id = byte value,
                             n_ids 256, no normalisation; impl is NULL), or with a BOS: id 256,
                             n_ids 257 (mp_tok_bytes_add_bos) */
    char byte_strs[512];  /* bytes: id i's token string at byte_strs + 2i (one byte + NUL) */
    MpTokImpl *impl;      /* owned */
    MpTokSpm *spm;        /* owned; set instead of impl for a GGUF "llama" vocabulary */
} MpTok;

/* Loads a tokenizer: `model` is a directory holding tokenizer.json (and maybe
 * tokenizer_config.json), the path of a tokenizer.json, a .gguf file (mp_tok_init_gguf), the word
 * "bytes", or a model directory without tokenizer.json whose config.json says
 * "maskpos_tokenizer": "bytes" (the byte vocabulary: mp_tok_init_bytes). Never aborts on a bad
 * file; on failure t is left zeroed. */
int mp_tok_init(MpTok *t, const char *model, MpErr *e);
/* The same from memory: tokenizer.json text and optional tokenizer_config.json text (NULL). */
int mp_tok_init_json(MpTok *t, const char *json, size_t json_len, const char *config, size_t config_len,
                     MpErr *e);
void mp_tok_free(MpTok *t); /* safe on a zeroed struct */
/* The byte vocabulary: encode maps every byte to its value (invalid UTF-8 kept as is), decode
 * maps ids 0..255 back to bytes (then invalid UTF-8 → U+FFFD, as for every tokenizer). */
void mp_tok_init_bytes(MpTok *t);
/* Gives a byte vocabulary the BOS of `maskpos train --bos`: id 256 (n_ids 257), put before the
 * text by mp_tok_encode with add_special, dropped by mp_tok_decode with skip_special. Such a
 * model directory says "maskpos_tokenizer": "bytes", "bos_token_id": 256, "vocab_size": 257. */
void mp_tok_bytes_add_bos(MpTok *t);

/* A GGUF-style byte-level BPE vocabulary (tokenizer.ggml.model "gpt2"), all borrowed: what the
 * GGUF reader hands over (model-formats.md §3.6). */
typedef struct MpTokVocab {
    const char *const *tokens;  /* [n_tokens] token strings (byte-level alphabet), id = index */
    const size_t *token_lens;   /* [n_tokens] bytes */
    const int32_t *token_types; /* [n_tokens] 1 NORMAL .. 6 BYTE, or NULL (all NORMAL) */
    int64_t n_tokens;
    const char *const *merges;  /* [n_merges] "A B", rank = index */
    const size_t *merge_lens;
    int64_t n_merges;
    const char *pre;            /* tokenizer.ggml.pre: llama-bpe/llama3/llama-v3, dbrx, smaug-bpe,
                                   qwen2, gpt-2 */
    int32_t bos_id, eos_id;     /* -1: none */
    int add_bos, add_eos;       /* tokenizer.ggml.add_*_token; -1 when absent (llama-bpe: BOS) */
} MpTokVocab;

/* The same tokenizer as the model's tokenizer.json, from its GGUF vocabulary: CONTROL tokens
 * are special added tokens, USER_DEFINED plain added tokens, UNUSED ones are left out; the
 * split regex, NFC and ignore_merges follow from `pre`. */
int mp_tok_init_vocab(MpTok *t, const MpTokVocab *v, MpErr *e);
/* The same from a GGUF file's tokenizer.ggml.* metadata (src/tok/gguf_vocab.c). */
int mp_tok_init_gguf(MpTok *t, const char *path, MpErr *e);
/* The same from a GGUF file's bytes (borrowed; name is used in messages): fuzzing, tests. */
int mp_tok_init_gguf_buf(MpTok *t, const uint8_t *buf, size_t n, const char *name, MpErr *e);

/* A GGUF SentencePiece vocabulary (tokenizer.ggml.model "llama"), all borrowed: what the GGUF
 * reader hands over. Encoded exactly as llama.cpp encodes it (src/tok/spm.c). */
typedef struct MpTokSpmVocab {
    const char *const *tokens;  /* [n_tokens] pieces (spaces written as U+2581), id = index */
    const size_t *token_lens;   /* [n_tokens] bytes */
    const float *scores;        /* [n_tokens] merge priority (higher first), or NULL (all 0) */
    const int32_t *token_types; /* [n_tokens] 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED,
                                   5 UNUSED, 6 BYTE; NULL: all NORMAL */
    int64_t n_tokens;
    int32_t bos_id, eos_id, unk_id; /* llama.cpp's defaults: 1, 2, 0 */
    int add_bos, add_eos;           /* defaults: 1, 0 */
    int add_space_prefix;           /* tokenizer.ggml.add_space_prefix, default 1 */
} MpTokSpmVocab;

int mp_tok_init_spm(MpTok *t, const MpTokSpmVocab *v, MpErr *e);

/* Appends the ids of `text` (len bytes, any bytes) to out. add_special: BOS/EOS as the
 * post-processor says (HF add_special_tokens=True); added-token strings in the text are matched
 * either way, as HF does. */
int mp_tok_encode(MpTok *t, MpTokIds *out, const char *text, size_t len, int add_special, MpErr *e);

/* Appends the text of ids to out (HF decode with skip_special_tokens as given). An id that is
 * not a token is an error. */
int mp_tok_decode(const MpTok *t, MpTokBuf *out, const int32_t *ids, size_t n, int skip_special, MpErr *e);

/* The token string of id as stored in tokenizer.json (byte-level alphabet for model tokens), or
 * NULL when id is not a token. */
const char *mp_tok_id_to_token(const MpTok *t, int32_t id);

#endif
