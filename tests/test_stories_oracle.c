/* test_stories_oracle.c — the real pretrained stories260K (data/third_party/stories260K, llama2.c,
 * MIT) end to end against llama.cpp on the same GGUF (tests/oracle-llama: node-llama-cpp's
 * prebuilt CPU backend, flash attention off, F32 KV cache):
 *   - logits: real text (the first 512 tokens, the trained context, of models/kjv.txt, tokenized
 *     by llama.cpp's own tokenizer, BOS first) through `maskpos logits --out`; the log-probs of
 *     EVERY position (512 × 512) equal llama.cpp's (tests/oracle-llama/logits.mjs);
 *   - greedy: `maskpos generate --greedy` from BOS gives llama.cpp's greedy ids for 100 tokens
 *     (tests/oracle-llama/stories.mjs), and from a prompt of real text too;
 *   - tokenize: maskpos' own tokenizer gives llama.cpp's ids on that text (the spm tokenizer);
 *   - probe --data: documents of real text through the model's own tokenizer give the maps of
 *     probe --tokens on llama.cpp's ids of the same documents, byte for byte (skipped, with the
 *     reason, when maskpos cannot read the vocabulary).
 * Tolerance: |Δ log-prob| ≤ 1e-4 (f32 in both, different summation orders; measured 4.0e-5, and
 * 3.0e-5 where the log-prob is above −10; the test prints both). logits.mjs keeps one context cell
 * free: with the context exactly full, llama.cpp's last position came out 0.66 off.
 * A missing oracle is a failure (CI installs it: scripts/setup.sh --test).
 */
#include "test_model_util.h"

#include "core/npy.h"  /* mp_npy_write */
#include "core/util.h" /* mp_file_exists */

#define STORIES MP_SOURCE_DIR "/data/third_party/stories260K/stories260K.gguf"
#define ORACLE MP_SOURCE_DIR "/tests/oracle-llama"

static void need_oracle(void) {
    char p[4096];
    snprintf(p, sizeof p, "%s/node_modules/node-llama-cpp/package.json", ORACLE);
    if (!mp_file_exists(p)) fail_msg("llama.cpp oracle not installed: run scripts/setup.sh --test (scripts/setup_oracle_llama.sh)");
}

/* Writes the first `bytes` bytes of models/kjv.txt (real English text) to path. */
static void real_text(const char *path, size_t bytes) {
    FILE *f = fopen(MP_SOURCE_DIR "/models/kjv.txt", "rb");
    assert_non_null(f);
    char *buf = malloc(bytes);
    const size_t n = fread(buf, 1, bytes, f);
    fclose(f);
    assert_int_equal(n, bytes);
    mp_test_write_file(path, buf, n);
    free(buf);
}

/* Parses white-space separated ids into ids [cap]; returns the count. */
static int parse_ids(const char *s, int32_t *ids, int cap) {
    int n = 0;
    char *end;
    for (;;) {
        while (*s == ' ' || *s == '\n') s++;
        if (!*s || n == cap) break;
        long v = strtol(s, &end, 10);
        if (end == s) break;
        ids[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

/* llama.cpp's ids of the text in path (BOS first). */
static int oracle_tokenize(const char *path, int32_t *ids, int cap) {
    static char out[1 << 20];
    int rc = mp_test_shell(out, sizeof out, "cd %s && node stories.mjs tokenize %s %s", ORACLE, STORIES, path);
    if (rc != 0) fail_msg("llama.cpp tokenize failed (%d): %.500s", rc, out);
    return parse_ids(out, ids, cap);
}

static void test_logits_every_position(void **state) {
    (void)state;
    need_oracle();
    enum { T = 512, V = 512 };
    const char *d = mp_test_tmpdir();
    char txt[512], lp[512], ll[512];
    snprintf(txt, sizeof txt, "%s/kjv.txt", d);
    real_text(txt, 4000);
    int32_t *ids = malloc(sizeof(int32_t) * 4096);
    const int n = oracle_tokenize(txt, ids, 4096);
    assert_true(n >= T);
    assert_int_equal(ids[0], 1); /* BOS */
    char *list = malloc(8 * T);
    list[0] = '\0';
    for (int t = 0; t < T; t++) snprintf(list + strlen(list), 8, "%s%d", t ? "," : "", ids[t]);
    snprintf(lp, sizeof lp, "%s/lp.npy", d);
    snprintf(ll, sizeof ll, "%s/ll.f64", d);
    double *mine, *lg;
    logits_and_oracle("stories260K", STORIES, list, lp, ll, ORACLE, T, V, &mine, &lg);
    /* |Δ| ≤ 1e-4: f32 in both, different summation orders, through 5 layers of trained weights whose
     * log-probs reach −25 (measured 4.0e-5; 3.0e-5 where the log-prob is above −10) */
    const LogprobStats st = logprob_stats("stories260K", mine, lg, T, V, 1e-4, 0, -10); /* reference: llama.cpp */
    const double err = st.max_abs, err_likely = st.max_above, rel = st.max_rel;
    print_message("stories260K: largest relative difference %.2g; where the log-prob is above -10: max |difference| %.3g\n",
                  rel, err_likely);
    /* and the text is real text to the model: its mean NLL is far below log V */
    double nll = 0;
    for (int t = 0; t + 1 < T; t++) nll -= mine[(size_t)t * V + ids[t + 1]];
    nll /= T - 1;
    print_message("stories260K: max |log-prob maskpos - llama.cpp| = %.3g over %d positions x %d tokens (real text, mean NLL "
                  "%.3f nats/token vs log V = %.3f)\n", err, T, V, nll, log((double)V));
    assert_true(nll < 0.75 * log((double)V));
    free(lg);
    free(mine);
    free(list);
    free(ids);
}

static void test_greedy_matches_llama_cpp(void **state) {
    (void)state;
    need_oracle();
    enum { N = 100 };
    static char out[1 << 16];
    int32_t want[N + 1], got[N + 8];
    int rc = mp_test_shell(out, sizeof out, "cd %s && node stories.mjs greedy %s %d", ORACLE, STORIES, N);
    if (rc != 0) fail_msg("llama.cpp greedy failed (%d): %s", rc, out);
    assert_int_equal(parse_ids(out, want, N + 1), N);
    rc = mp_test_run(out, sizeof out, "generate %s --greedy --len %d --ids", STORIES, N + 1);
    if (rc != 0) fail_msg("generate failed: %s", out);
    /* the ids are the line that starts with BOS */
    const char *line = strstr(out, "1 ");
    while (line && line != out && line[-1] != '\n') line = strstr(line + 1, "1 ");
    assert_non_null(line);
    assert_int_equal(parse_ids(line, got, N + 8) >= N + 1, 1);
    assert_int_equal(got[0], 1);
    for (int i = 0; i < N; i++)
        if (got[i + 1] != want[i]) fail_msg("greedy id %d: maskpos %d, llama.cpp %d", i, got[i + 1], want[i]);
    /* from a prompt of real text (llama.cpp's ids of it) */
    const char *d = mp_test_tmpdir();
    char txt[512], list[2048];
    snprintf(txt, sizeof txt, "%s/p.txt", d);
    real_text(txt, 200);
    int32_t p[512];
    const int np = oracle_tokenize(txt, p, 512);
    list[0] = '\0';
    for (int i = 0; i < np; i++) snprintf(list + strlen(list), 16, "%s%d", i ? "," : "", p[i]);
    rc = mp_test_shell(out, sizeof out, "cd %s && node stories.mjs greedy %s 40 %s", ORACLE, STORIES, list);
    if (rc != 0) fail_msg("llama.cpp greedy failed (%d): %s", rc, out);
    assert_int_equal(parse_ids(out, want, N + 1), 40);
    rc = mp_test_run(out, sizeof out, "generate %s --greedy --prompt-ids %s --len %d --ids", STORIES, list, np + 40);
    if (rc != 0) fail_msg("generate failed: %s", out);
    line = strstr(out, "1 ");
    while (line && line != out && line[-1] != '\n') line = strstr(line + 1, "1 ");
    assert_non_null(line);
    int32_t *g2 = malloc(sizeof(int32_t) * (size_t)(np + 48));
    assert_true(parse_ids(line, g2, np + 48) >= np + 40);
    for (int i = 0; i < 40; i++)
        if (g2[np + i] != want[i]) fail_msg("greedy after a %d-token prompt, id %d: maskpos %d, llama.cpp %d", np, i, g2[np + i], want[i]);
    print_message("greedy: %d ids from BOS and 40 after a %d-token prompt identical to llama.cpp's\n", N, np);
    free(g2);
}

/* 1 when maskpos reads stories260K's SentencePiece vocabulary (src/tok); else prints why. */
static int tokenizer_present(char *why, size_t cap) {
    char out[4096];
    const int rc = mp_test_shell(out, sizeof out, "printf 'Once upon a time' | %s tokenize --model %s -", MP_TEST_BIN, STORIES);
    snprintf(why, cap, "%s", out);
    return rc == 0;
}

static void test_tokenize_and_probe_data(void **state) {
    (void)state;
    char why[4096];
    if (!tokenizer_present(why, sizeof why)) {
        print_message("SKIPPED: maskpos cannot read stories260K's tokenizer yet: %s", why);
        skip();
    }
    need_oracle();
    const char *d = mp_test_tmpdir();
    char txt[512], out[1 << 14];
    snprintf(txt, sizeof txt, "%s/kjv.txt", d);
    real_text(txt, 4000);
    static int32_t ref[4096], mine[4096];
    const int nr = oracle_tokenize(txt, ref, 4096);
    static char big[1 << 20];
    int rc = mp_test_run(big, sizeof big, "tokenize --model %s %s", STORIES, txt);
    if (rc != 0) fail_msg("tokenize failed: %.300s", big);
    const int nm = parse_ids(big, mine, 4096);
    assert_int_equal(nm, nr);
    assert_memory_equal(mine, ref, sizeof(int32_t) * (size_t)nr);
    /* probe --data: three one-line documents of real text (blank-line separated), each the model's
     * ids from BOS cut to 128; the same maps as probe --tokens on llama.cpp's ids of each document */
    enum { ND = 3, S = 128 };
    FILE *kf = fopen(MP_SOURCE_DIR "/models/kjv.txt", "rb");
    assert_non_null(kf);
    static char kjv[8000];
    assert_int_equal(fread(kjv, 1, sizeof kjv, kf), sizeof kjv);
    fclose(kf);
    for (size_t i = 0; i < sizeof kjv; i++) kjv[i] = kjv[i] == '\n' || kjv[i] == '\r' ? ' ' : kjv[i];
    char data[512], dk[512];
    snprintf(data, sizeof data, "%s/docs.txt", d);
    FILE *df = fopen(data, "wb");
    assert_non_null(df);
    static int32_t rows[ND * S];
    for (int k = 0; k < ND; k++) {
        const char *doc = kjv + 2500 * k + 100;
        fwrite(doc, 1, 2000, df);
        fputs(k + 1 < ND ? "\n\n" : "\n", df);
        snprintf(dk, sizeof dk, "%s/doc%d.txt", d, k);
        mp_test_write_file(dk, doc, 2000);
        assert_true(oracle_tokenize(dk, ref, 4096) >= S);
        memcpy(rows + k * S, ref, sizeof(int32_t) * S);
    }
    fclose(df);
    char ids[512];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    const int64_t shp[2] = {ND, S};
    MpErr e;
    if (mp_npy_write(ids, MP_DT_I32, rows, 2, shp, &e) != MP_OK) fail_msg("%s", e.msg);
    rc = mp_test_run(out, sizeof out, "probe %s --data %s --n %d --seq %d --layers all --out %s/pd --quiet", STORIES, data, ND, S, d);
    if (rc != 0) fail_msg("probe --data failed: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --layers all --out %s/pt --quiet", STORIES, ids, d);
    if (rc != 0) fail_msg("probe --tokens failed: %s", out);
    char a[512], b[512];
    snprintf(a, sizeof a, "%s/pd/scores.npy", d);
    snprintf(b, sizeof b, "%s/pt/scores.npy", d);
    size_t n;
    int64_t sh[4];
    double *m = npy_load_f64(a, &n, sh);
    assert_int_equal(sh[0], 5);
    assert_int_equal(sh[1], S);
    free(m);
    if (!files_equal(a, b)) fail_msg("probe --data maps differ from probe --tokens on llama.cpp's ids");
    print_message("tokenize: %d ids identical to llama.cpp; probe --data over %d documents x %d ids = probe --tokens on "
                  "llama.cpp's ids, byte for byte\n", nr, ND, S);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logits_every_position),
        cmocka_unit_test(test_greedy_matches_llama_cpp),
        cmocka_unit_test(test_tokenize_and_probe_data),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
