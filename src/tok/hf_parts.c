/* hf_parts.c — parsing the parts of tokenizer.json around the model: normalizer, pre-tokenizer,
 * decoder, post-processor (model-formats.md §4).
 *
 * Implements: JSON field helpers that name the JSON path of what is wrong; the normalizer
 * (NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence), pre-tokenizer (Split, Metaspace, ByteLevel
 * with GPT-2's built-in regex, Sequence) and decoder (Replace, ByteFallback, Fuse, Strip,
 * Metaspace, Sequence) flattened into step lists; split patterns compiled with PCRE2 after the
 * rewrite to HF's Unicode tables (unicode.c); the post-processor's BOS/EOS ids
 * (TemplateProcessing single sequence, ByteLevel, Sequence).
 * Does not: other types of each part — refused with a message naming the JSON path and the type.
 * Tested by: tests/test_tok_hfspm.c (test_unsupported_kinds), tests/test_tok.c (bad files).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok/hf.h"       /* MpTokImpl, step kinds */
#include "tok/hf_parts.h" /* its entry points */
#include "tok/unicode.h"  /* mp_tok_regex_patch, mp_tok_utf8_next */

/* GPT-2's split regex, built into HF's ByteLevel pre-tokenizer (used when use_regex is true). */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

int mp_tok_json_bool(json_t *o, const char *key, int dflt, int *out, const char *where, MpErr *e) {
    json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) {
        *out = dflt;
        return MP_OK;
    }
    if (!json_is_boolean(v)) return mp_err_set(e, "%s.%s: expected true/false", where, key);
    *out = json_is_true(v);
    return MP_OK;
}
const char *mp_tok_json_type(json_t *o) {
    json_t *t = json_object_get(o, "type");
    return json_is_string(t) ? json_string_value(t) : NULL;
}
int mp_tok_json_id(json_t *v, int32_t *id, const char *where, MpErr *e) {
    if (!json_is_integer(v)) return mp_err_set(e, "%s: id is not an integer", where);
    json_int_t x = json_integer_value(v);
    if (x < 0 || x >= MP_TOK_MAX_IDS) return mp_err_set(e, "%s: id %lld out of range [0, %d)", where, (long long)x, MP_TOK_MAX_IDS);
    *id = (int32_t)x;
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
    if (mp_tok_json_bool(o, "add_prefix_space", 1, &aps, where, e) != MP_OK) return MP_ERR;
    *scheme = aps ? MP_TOK_PREPEND_ALWAYS : MP_TOK_PREPEND_NEVER;
    return MP_OK;
}

/* Flattens the pre_tokenizer into steps; *byte_level is set when a ByteLevel step was seen
 * (it must be the last one: every split before it works on text, as HF's order implies). */
int mp_tok_load_pre(MpTok *t, json_t *o, int *byte_level, const char *where, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (!o || json_is_null(o)) return MP_OK;
    const char *type = mp_tok_json_type(o);
    if (!type) return mp_err_set(e, "%s.type: missing", where);
    if (*byte_level) return mp_err_set(e, "%s: a %s step after ByteLevel is not supported", where, type);
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "pretokenizers");
        if (!json_is_array(arr)) return mp_err_set(e, "%s.pretokenizers: missing", where);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.pretokenizers[%zu]", where, i);
            if (mp_tok_load_pre(t, json_array_get(arr, i), byte_level, w, e) != MP_OK) return MP_ERR;
        }
        return MP_OK;
    }
    if (!strcmp(type, "Split")) {
        int behavior = parse_behavior(o, where, e), invert = 0;
        if (!behavior || mp_tok_json_bool(o, "invert", 0, &invert, where, e) != MP_OK) return MP_ERR;
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
        if (parse_metaspace(o, repl, &rl, &scheme, where, e) != MP_OK || mp_tok_json_bool(o, "split", 1, &split, where, e) != MP_OK)
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
        if (mp_tok_json_bool(o, "add_prefix_space", 0, &aps, where, e) || mp_tok_json_bool(o, "use_regex", 1, &use_regex, where, e))
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

int mp_tok_load_normalizer(MpTok *t, json_t *o, const char *where, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (!o || json_is_null(o)) return MP_OK;
    const char *type = mp_tok_json_type(o);
    if (!type) return mp_err_set(e, "%s.type: missing", where);
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "normalizers");
        if (!json_is_array(arr)) return mp_err_set(e, "%s.normalizers: missing", where);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.normalizers[%zu]", where, i);
            if (mp_tok_load_normalizer(t, json_array_get(arr, i), w, e) != MP_OK) return MP_ERR;
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
int mp_tok_load_decoder(MpTokImpl *m, json_t *o, const char *where, MpErr *e) {
    const char *type = mp_tok_json_type(o);
    if (!type) return mp_err_set(e, "%s.type: missing", where);
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "decoders");
        if (!json_is_array(arr)) return mp_err_set(e, "%s.decoders: missing", where);
        for (size_t i = 0; i < json_array_size(arr); i++) {
            char w[96];
            snprintf(w, sizeof w, "%s.decoders[%zu]", where, i);
            if (mp_tok_load_decoder(m, json_array_get(arr, i), w, e) != MP_OK) return MP_ERR;
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
int mp_tok_pre_has_byte_level(json_t *o) {
    const char *type = mp_tok_json_type(o);
    if (!type) return 0;
    if (!strcmp(type, "ByteLevel")) return 1;
    if (strcmp(type, "Sequence") != 0) return 0;
    json_t *arr = json_object_get(o, "pretokenizers");
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (mp_tok_pre_has_byte_level(json_array_get(arr, i))) return 1;
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
        if (mp_tok_json_id(json_array_get(ids, i), &id, "post_processor", e) != MP_OK) return MP_ERR;
        dst[(*n)++] = id;
    }
    (void)m;
    return MP_OK;
}

int mp_tok_load_post(MpTok *t, json_t *o, MpErr *e) {
    MpTokImpl *m = t->impl;
    if (!o || json_is_null(o)) return MP_OK;
    const char *type = mp_tok_json_type(o);
    if (!type) return mp_err_set(e, "post_processor.type: missing");
    if (!strcmp(type, "ByteLevel")) return MP_OK; /* offsets only */
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(o, "processors");
        if (!json_is_array(arr)) return mp_err_set(e, "post_processor.processors: missing");
        for (size_t i = 0; i < json_array_size(arr); i++)
            if (mp_tok_load_post(t, json_array_get(arr, i), e) != MP_OK) return MP_ERR;
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

