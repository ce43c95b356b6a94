/* spm.h — the entry points of spm.c (llama.cpp's SentencePiece tokenizer for GGUF "llama"
 * vocabularies) that the dispatchers of open.c, encode.c and decode.c call; not exported.
 *
 * Implements nothing itself (spm.c does; mp_tok_init_spm is public, in tok.h).
 */
#ifndef MP_TOK_SPM_H
#define MP_TOK_SPM_H

#include <stddef.h>
#include <stdint.h>

#include "tok/text.h" /* MpTokIds, MpTokBuf */
#include "tok/tok.h"  /* MpTokSpm */

/* SentencePiece BPE of a GGUF "llama" vocabulary, llama.cpp's algorithm (spm.c). */
void mp_tok_spm_free(MpTokSpm *s); /* accepts NULL */
int mp_tok_spm_encode(MpTokSpm *s, MpTokIds *out, const char *text, size_t len, int add_special, MpErr *e);
/* Appends the raw bytes of ids (may be invalid UTF-8; the caller repairs it). */
int mp_tok_spm_decode(const MpTokSpm *s, MpTokBuf *raw, const int32_t *ids, size_t n, int skip_special, MpErr *e);
const char *mp_tok_spm_piece(const MpTokSpm *s, int32_t id);

#endif
