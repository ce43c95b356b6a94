/* corpus.h — corpus reader: documents in, an [N, S] block of the model's token ids out.
 *
 * Implements: reading documents from a .jsonl file (one JSON object per line, text in a string
 * field), a plain-text file (documents are blocks separated by blank lines, or the whole file),
 * or a directory of .txt files (sorted by name; blocks or whole files); optional shuffling of the
 * document order (Philox, seed); tokenizing each document with the model's tokenizer and keeping
 * the first N that have at least S ids, cut to their first S ids (BOS included when the
 * tokenizer adds one). Documents shorter than S are counted as skipped. Or, packed: the
 * documents' ids concatenated and cut into N consecutive rows of S (for corpora of few long
 * documents or many short ones); when the tokenizer adds a BOS, each row is BOS + the next S-1
 * ids, so packed rows start as documents do.
 * Does not: write files (cli/cmd_corpus.c writes the .npy and its JSON provenance), or stream corpora
 * larger than memory.
 * Tested by: tests/test_tok.c (formats, shuffling, short-document errors).
 */
#ifndef MP_TOK_CORPUS_H
#define MP_TOK_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h" /* MpErr */
#include "tok/tok.h"  /* MpTok */

typedef struct MpTokCorpusOpts {
    const char *field; /* .jsonl: name of the text field (NULL: "text") */
    int whole;         /* .txt: one document per file instead of per blank-line block */
    int64_t n;         /* documents wanted, ≥ 1 */
    int64_t seq;       /* tokens per document, ≥ 1 */
    int shuffle;       /* visit documents in a seeded random order */
    uint64_t seed;
    int add_special;   /* BOS/EOS as the tokenizer's post-processor says */
    int pack;          /* 1: concatenate the documents' ids (in visiting order) and cut the
                          stream into n consecutive rows of seq ids; a row may span documents.
                          With add_special and a BOS: rows are BOS + seq-1 stream ids */
} MpTokCorpusOpts;

typedef struct MpTokCorpus {
    int32_t *ids;          /* [n, seq] token ids, row-major (owned) */
    int64_t n, seq;
    const char *format;    /* "jsonl", "txt" or "dir" (static string) */
    int64_t n_files;       /* files read */
    size_t n_bytes;        /* bytes read */
    uint64_t hash;         /* FNV-1a 64 over every file's bytes, in reading order */
    int64_t n_docs;        /* documents found */
    int64_t n_examined;    /* documents tokenized until n were kept */
    int64_t n_skipped;     /* of those, shorter than seq tokens */
} MpTokCorpus;

/* Builds the token block. Fails (MP_ERR, message) on unreadable or malformed input and when
 * fewer than n documents have seq tokens. */
int mp_tok_corpus_build(MpTokCorpus *c, MpTok *t, const char *input, const MpTokCorpusOpts *o, MpErr *e);
void mp_tok_corpus_free(MpTokCorpus *c); /* safe on a zeroed struct */

/* Every document of input (a .jsonl file — text in `field`, NULL: "text" — a text file cut at
 * blank lines, or a directory of .txt files, as above) in reading order, joined by one blank line
 * ("\n\n") into out (appended); *n_docs gets their number. For `maskpos train`, which reads one
 * stream. Fails (MP_ERR, message) on unreadable or malformed input and when there is no document. */
int mp_tok_corpus_join(MpTokBuf *out, const char *input, const char *field, int64_t *n_docs, MpErr *e);

#endif
