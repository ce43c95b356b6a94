/* hf_parts.h — the entry points of hf_parts.c that hf_load.c calls: JSON field helpers (all report
 * the JSON path of what is wrong) and the parsers of tokenizer.json's normalizer, pre-tokenizer,
 * decoder and post-processor objects; not exported.
 * Tested by: tests/test_tok.c, test_tok_hfspm.c (through the tokenizers they load).
 */
#ifndef MP_TOK_HF_PARTS_H
#define MP_TOK_HF_PARTS_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h" /* MpErr */
#include "tok/hf.h"   /* MpTok, MpTokImpl */

int mp_tok_json_bool(json_t *o, const char *key, int dflt, int *out, const char *where, MpErr *e);
const char *mp_tok_json_type(json_t *o); /* the "type" string, or NULL */
int mp_tok_json_id(json_t *v, int32_t *id, const char *where, MpErr *e);
/* Flattens the pre_tokenizer into steps; *byte_level is set when a ByteLevel step was seen. */
int mp_tok_load_pre(MpTok *t, json_t *o, int *byte_level, const char *where, MpErr *e);
int mp_tok_load_normalizer(MpTok *t, json_t *o, const char *where, MpErr *e);
/* Decoders of a text (non-byte-level) tokenizer, flattened in order. */
int mp_tok_load_decoder(MpTokImpl *m, json_t *o, const char *where, MpErr *e);
int mp_tok_load_post(MpTok *t, json_t *o, MpErr *e);
/* 1 when the pre-tokenizer (or a step of its Sequence) is ByteLevel. */
int mp_tok_pre_has_byte_level(json_t *o);

#endif
