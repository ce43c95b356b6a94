/* hf_load.h — the entry points of hf_load.c: a tokenizer.json tokenizer built from its parsed
 * document (vocab.c calls it) and freed (open.c); not exported (the public opener is tok.h's).
 * Tested by: tests/test_tok.c, test_tok_hfspm.c, test_tok_nfkc.c (ids equal to HF's).
 */
#ifndef MP_TOK_HF_LOAD_H
#define MP_TOK_HF_LOAD_H

#include <jansson.h>
#include <stddef.h>

#include "core/err.h" /* MpErr */
#include "tok/hf.h"   /* MpTok, MpTokImpl */

/* Builds the tokenizer from a parsed tokenizer.json document (borrowed). t is zeroed first and
 * left zeroed on failure. */
int mp_tok_hf_init_root(MpTok *t, json_t *root, const char *config, size_t config_len, MpErr *e);
void mp_tok_hf_free(MpTokImpl *m); /* accepts NULL */

#endif
