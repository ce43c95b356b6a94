/* test_model_probe.c — `maskpos probe` as a tool (src/cli/cmd_probe.c, src/job/probe_job.c, src/model/probe_acc.c):
 *   - checkpoint/resume: a run that SIGKILLs itself between checkpoints (MASKPOS_TEST_KILL_AFTER),
 *     and a child killed with kill -9 from outside after its first checkpoint, resumed with
 *     --resume, write byte-identical maps to an uninterrupted run; a checkpoint of another run
 *     (other flags) is refused; a corrupted checkpoint is refused;
 *   - inputs: a raw uint32 stream (trailing partial sequence skipped and reported) gives the same
 *     maps as the .npy holding the same ids; --n and --seq cut; --layers selects layers;
 *   - meta.json records N, S, layers, flags, hashes, provenance; memory estimate printed;
 *   - bad inputs (malformed/short/empty token files, ids >= vocab, N = 0, bad flags): exit 2 with
 *     a one-line error;
 *   - logits: top-k printed, greedy continuation = argmax of the written log-probs;
 *   - quantised GGUF weights (f16, q8_0, q4_k) stay close to f32, closer with more bits;
 *   - --data: text through the model's tokenizer gives the maps of `maskpos corpus` + --tokens.
 *   - --per-head: scores_heads.npy and scores_heads_se.npy are float32 by default, the float32
 *     rounding of the --heads-f64 files; the per-head standard errors equal the sample standard
 *     deviation over one-sequence runs / sqrt(N) (brute force);
 *   - threads: 1, 2 and 3 threads write the same bytes (a small model runs whole sequences per
 *     thread, merged in sequence order; 7 sequences leave a partial last batch), with --per-head,
 *     --recency, --bidirectional and --probs (which keeps the one-sequence-at-a-time loop);
 *   - the reduced map (head sums from the forward pass, runs without --per-head and --recency)
 *     writes the maps of the per-head rows byte for byte.
 */
#include <signal.h>

#include "test_model_util.h"

#include "core/json.h" /* mp_json_read */
#include "core/util.h" /* mp_file_exists */

static const char *small_model(const char *d) {
    static char model[256];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 12");
    return model;
}

static void test_resume_after_sigkill_is_exact(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    char ids[256], out[8192], a[512], b[512];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 7, 40, 300, -1, 77);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/full --per-head --quiet", model, ids, d);
    if (rc != 0) fail_msg("uninterrupted run failed: %s", out);
    /* killed after 5 sequences; the last checkpoint holds 4 */
    rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=5 %s probe %s --tokens %s --out %s/res --per-head --checkpoint-every 2 --quiet",
            MP_TEST_BIN, model, ids, d);
    if (rc != 128 + SIGKILL) fail_msg("expected death by SIGKILL (137), got %d: %s", rc, out);
    snprintf(a, sizeof a, "%s/res/checkpoint.bin", d);
    assert_true(mp_file_exists(a));
    snprintf(a, sizeof a, "%s/res/scores.npy", d);
    assert_false(mp_file_exists(a)); /* no result yet */
    /* a checkpoint of another run is refused */
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/res --per-head --no-rope --resume --quiet", model, ids, d);
    if (rc != 2 || !strstr(out, "another run")) fail_msg("resume with other flags: expected exit 2, got %d: %s", rc, out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/res --per-head --checkpoint-every 2 --resume", model, ids, d);
    if (rc != 0) fail_msg("resume failed: %s", out);
    if (!strstr(out, "4 of 7 sequences already done")) fail_msg("resume did not start from the checkpoint: %s", out);
    const char *files[] = {"scores.npy", "scores_diagnorm.npy", "scores_heads.npy", "scores_heads_se.npy"};
    for (int i = 0; i < 4; i++) {
        snprintf(a, sizeof a, "%s/full/%s", d, files[i]);
        snprintf(b, sizeof b, "%s/res/%s", d, files[i]);
        if (!files_equal(a, b)) fail_msg("%s after kill + resume differs from the uninterrupted run", files[i]);
    }
    snprintf(a, sizeof a, "%s/res/checkpoint.bin", d);
    assert_false(mp_file_exists(a)); /* removed once the result is complete */
    /* a corrupted checkpoint is refused */
    rc = mp_test_shell(out, sizeof out, "MASKPOS_TEST_KILL_AFTER=3 %s probe %s --tokens %s --out %s/bad --checkpoint-every 2 --quiet", MP_TEST_BIN,
            model, ids, d);
    assert_int_equal(rc, 128 + SIGKILL);
    rc = mp_test_shell(out, sizeof out, "printf 'XXXX' | dd of=%s/bad/checkpoint.bin bs=1 seek=100 conv=notrunc", d);
    assert_int_equal(rc, 0);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/bad --resume --quiet", model, ids, d);
    if (rc != 2 || !strstr(out, "checksum")) fail_msg("corrupt checkpoint: expected exit 2, got %d: %s", rc, out);
}

/* The same from outside: `kill -9` of a child process at an arbitrary moment after its first
 * checkpoint appeared (possibly in the middle of writing the next one: only the temp file is
 * then incomplete), then --resume: byte-identical maps. */
static void test_external_sigkill_then_resume(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[8192], ck[600], a[600], b[600], outdir[300];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch qwen3 --layers 2 --dim 128 --heads 4 --kv-heads 2 --ffn 256 --vocab 300 --seed 4");
    ids_write(ids, 120, 48, 300, -1, 5);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/full --quiet", model, ids, d);
    if (rc != 0) fail_msg("uninterrupted run failed: %s", out);
    snprintf(outdir, sizeof outdir, "%s/res", d);
    snprintf(ck, sizeof ck, "%s/checkpoint.bin", outdir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stdout) || !freopen("/dev/null", "w", stderr)) _exit(127);
        execl(MP_TEST_BIN, MP_TEST_BIN, "probe", model, "--tokens", ids, "--out", outdir, "--checkpoint-every", "3",
              "--quiet", (char *)NULL);
        _exit(127);
    }
    int killed = 0, status = 0;
    for (int i = 0; i < 60000 && !killed; i++) { /* up to 60 s */
        if (mp_file_exists(ck)) {
            usleep(2000 + (unsigned)(i % 7) * 300); /* land somewhere in the following work */
            killed = kill(pid, SIGKILL) == 0;
            break;
        }
        if (waitpid(pid, &status, WNOHANG) == pid) break; /* finished before any checkpoint */
        usleep(1000);
    }
    if (!killed) {
        waitpid(pid, &status, 0);
        fail_msg("the probe finished before it could be killed after a checkpoint");
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status)) {
        /* it may have completed in the last 2 ms; then there is nothing to resume */
        print_message("child ended before the signal (status %d): retry on a slower machine\n", status);
        skip();
    }
    assert_int_equal(WTERMSIG(status), SIGKILL);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --checkpoint-every 3 --resume --quiet", model, ids, outdir);
    if (rc != 0) fail_msg("resume failed: %s", out);
    const char *done = strstr(out, "resume: ");
    print_message("%.*s\n", done ? (int)(strchr(done, '\n') - done) : 0, done ? done : "");
    snprintf(a, sizeof a, "%s/full/scores.npy", d);
    snprintf(b, sizeof b, "%s/scores.npy", outdir);
    if (!files_equal(a, b)) fail_msg("scores.npy after kill -9 + resume differs from the uninterrupted run");
}

static void test_raw_input_and_selection(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    char ids[256], raw[256], out[8192], a[512], b[512];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    snprintf(raw, sizeof raw, "%s/ids.u32", d);
    ids_write(ids, 3, 30, 300, -1, 4);
    /* the same ids as raw uint32, plus 7 trailing tokens that do not fill a sequence */
    size_t n;
    double *v = npy_load_f64(ids, &n, NULL);
    uint32_t *u = malloc((n + 7) * 4);
    for (size_t i = 0; i < n + 7; i++) u[i] = i < n ? (uint32_t)v[i] : 1;
    mp_test_write_file(raw, u, (n + 7) * 4);
    free(u);
    free(v);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/npy --layers 2,3 --quiet", model, ids, d);
    if (rc != 0) fail_msg("%s", out);
    /* --quiet: nothing but the warning of too few sequences, on stderr (issue 39: it printed five
     * status lines; issue 30 took the tables away) */
    if (!strstr(out, "maskpos probe: warning: N = 3 sequences is too few") || strchr(out, '\n') != strrchr(out, '\n'))
        fail_msg("probe --quiet printed: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/npy --layers 2,3 --force", model, ids, d);
    if (rc != 0) fail_msg("%s", out);
    assert_non_null(strstr(out, "expected peak memory"));
    assert_non_null(strstr(out, "NRI"));
    /* the last line lists every file meta.json lists */
    if (!strstr(out, "/npy/: scores.npy, scores_diagnorm.npy, scores_se.npy, meta.json (peak RSS"))
        fail_msg("the wrote line does not list every file: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --seq 30 --out %s/raw --layers 2,3 --plot", model, raw, d);
    if (rc != 0) fail_msg("%s", out);
    if (!strstr(out, "7 trailing tokens")) fail_msg("skipped remainder not reported: %s", out);
    snprintf(a, sizeof a, "%s/npy/scores.npy", d);
    snprintf(b, sizeof b, "%s/raw/scores.npy", d);
    assert_true(files_equal(a, b));
    {
        char png[512];
        snprintf(png, sizeof png, "%s/raw/scores_diagnorm.png", d);
        assert_true(mp_file_exists(png)); /* --plot */
    }
    int64_t shp[4];
    double *m = npy_load_f64(a, &n, shp);
    assert_int_equal(shp[0], 2);
    assert_int_equal(shp[1], 30);
    assert_int_equal(shp[2], 30);
    assert_true(isnan(m[1]) && !isnan(m[30])); /* (0,1) masked, (1,0) observed */
    free(m);
    /* --n 2 --seq 16 cuts; layer 2 of a 2-layer selection equals layer 2 of an all-layer run */
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --n 2 --seq 16 --out %s/cut --layers 2 --quiet", model, ids, d);
    if (rc != 0) fail_msg("%s", out);
    snprintf(a, sizeof a, "%s/cut/meta.json", d);
    MpErr e;
    json_t *j = mp_json_read(a, &e);
    if (!j) fail_msg("%s", e.msg);
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 2);
    assert_int_equal(json_integer_value(json_object_get(j, "seq")), 16);
    assert_int_equal(json_array_size(json_object_get(j, "layers")), 1);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(j, "layers"), 0)), 2);
    assert_true(json_is_true(json_object_get(j, "causal")));
    assert_non_null(json_object_get(j, "model_hash"));
    assert_non_null(json_object_get(j, "data_hash"));
    assert_non_null(json_object_get(j, "peak_rss_bytes"));
    assert_non_null(json_object_get(j, "wall_time_s"));
    assert_non_null(json_object_get(j, "maskpos_version"));
    json_decref(j);
}

static void test_bad_inputs_exit_2(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    char p[512], out[8192];
    /* fixtures */
    snprintf(p, sizeof p, "%s/ok.npy", d);
    ids_write(p, 2, 16, 300, -1, 1);
    snprintf(p, sizeof p, "%s/big.npy", d);
    ids_write(p, 2, 16, 300, 300, 1); /* id 300 = vocab */
    snprintf(p, sizeof p, "%s/empty.npy", d);
    ids_write(p, 0, 16, 300, -1, 1);
    snprintf(p, sizeof p, "%s/garbage.npy", d);
    mp_test_write_file(p, "\x93NUMPY\x01\x00garbage", 15);
    snprintf(p, sizeof p, "%s/odd.u32", d);
    mp_test_write_file(p, "abcdefg", 7);
    {
        MpErr e;
        double fv[6] = {1, 2, 3, 4, 5, 6};
        int64_t shp[2] = {2, 3}, shp3[3] = {1, 2, 3}, shp1[1] = {6};
        int64_t neg[6] = {1, 2, -3, 4, 5, 6};
        snprintf(p, sizeof p, "%s/float.npy", d);
        assert_int_equal(mp_npy_write(p, MP_DT_F64, fv, 2, shp, &e), MP_OK);
        snprintf(p, sizeof p, "%s/3d.npy", d);
        assert_int_equal(mp_npy_write(p, MP_DT_I64, neg, 3, shp3, &e), MP_OK);
        snprintf(p, sizeof p, "%s/1d.npy", d);
        assert_int_equal(mp_npy_write(p, MP_DT_I64, neg, 1, shp1, &e), MP_OK);
        snprintf(p, sizeof p, "%s/neg.npy", d);
        assert_int_equal(mp_npy_write(p, MP_DT_I64, neg, 2, shp, &e), MP_OK);
    }
    const char *cases[][2] = {
        {"--tokens %s/garbage.npy --out %s/o", "malformed .npy"},
        {"--tokens %s/float.npy --out %s/o", "float token ids"},
        {"--tokens %s/3d.npy --out %s/o", "3-D ids"},
        {"--tokens %s/1d.npy --out %s/o", "1-D ids"},
        {"--tokens %s/neg.npy --out %s/o", "negative id"},
        {"--tokens %s/big.npy --out %s/o", "id >= vocab"},
        {"--tokens %s/empty.npy --out %s/o", "N = 0"},
        {"--tokens %s/ok.npy --seq 17 --out %s/o", "rows shorter than --seq"},
        {"--tokens %s/ok.npy --n 3 --out %s/o", "--n above the file"},
        {"--tokens %s/ok.npy --n 0 --out %s/o", "--n 0"},
        {"--tokens %s/odd.u32 --seq 2 --out %s/o", "raw size not a multiple of 4"},
        {"--tokens %s/odd.u32 --out %s/o", "raw without --seq"},
        {"--tokens %s/missing.npy --out %s/o", "missing file"},
        {"--tokens %s/ok.npy --layers 4 --out %s/o", "layer beyond the model"},
        {"--tokens %s/ok.npy --layers 0-2 --out %s/o", "layer 0"},
        {"--tokens %s/ok.npy --threads 0 --out %s/o", "--threads 0"},
        {"--tokens %s/ok.npy --checkpoint-every x --out %s/o", "bad --checkpoint-every"},
        {"--tokens %s/ok.npy --bogus --out %s/o", "unknown flag"},
        {"--tokens %s/ok.npy --max-mem-gib 0.000001 --out %s/o", "over the memory limit"},
        {"--tokens %s/ok.npy %s/extra", "no --out, extra argument"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, cases[i][0], d, d);
        int rc = mp_test_run(out, sizeof out, "probe %s %s", model, args);
        const char *nl = strchr(out, '\n');
        /* everything before the error line is the normal preamble; the error is one line */
        const char *err = strstr(out, "error:");
        if (rc != 2 || !err) fail_msg("%s: expected exit 2 with an error, got %d: %s", cases[i][1], rc, out);
        nl = strchr(err, '\n');
        if (nl && nl[1]) fail_msg("%s: error is not one line: %s", cases[i][1], out);
        print_message("%-32s -> %s", cases[i][1], err);
    }
    /* the memory refusal suggests bf16 weights (issue 30), not when they are bf16 already */
    int rm = mp_test_run(out, sizeof out, "probe %s --tokens %s/ok.npy --max-mem-gib 0.000001 --out %s/o", model, d, d);
    if (rm != 2 || !strstr(out, "HINT: --compute bf16")) fail_msg("the memory refusal names no --compute bf16: %s", out);
    rm = mp_test_run(out, sizeof out, "probe %s --tokens %s/ok.npy --max-mem-gib 0.000001 --compute bf16 --out %s/o", model, d, d);
    if (rm != 2 || strstr(out, "--compute bf16 (")) fail_msg("bf16 run told to use bf16: %s", out);
        /* no model, missing model */
    assert_int_equal(mp_test_run(out, sizeof out, "probe"), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s/nope --tokens %s/ok.npy --out %s/o", d, d, d), 2);
    /* logits: bad ids */
    assert_int_equal(mp_test_run(out, sizeof out, "logits %s --tokens 1,2,300", model), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "logits %s --tokens 1,,2", model), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "logits %s --tokens -1", model), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "logits %s", model), 2);
}

static void test_logits_greedy(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    char out[8192], p[512];
    int rc = mp_test_run(out, sizeof out, "logits %s --tokens 3,1,4,1,5 --top 3 --greedy 1 --out %s/lp.npy", model, d);
    if (rc != 0) fail_msg("%s", out);
    snprintf(p, sizeof p, "%s/lp.npy", d);
    size_t n;
    int64_t shp[4];
    double *lp = npy_load_f64(p, &n, shp);
    assert_int_equal(shp[0], 5);
    assert_int_equal(shp[1], 300);
    const double *last = lp + 4 * 300;
    int best = 0;
    double z = 0;
    for (int i = 0; i < 300; i++) {
        if (last[i] > last[best]) best = i;
        z += exp(last[i]);
    }
    assert_true(fabs(z - 1) < 1e-9);
    char want[64];
    snprintf(want, sizeof want, "greedy continuation (1 token): %d", best);
    if (!strstr(out, want)) fail_msg("expected '%s' in: %s", want, out);
    snprintf(want, sizeof want, "     1 %10d", best);
    if (!strstr(out, want)) fail_msg("top-1 should be %d: %s", best, out);
    free(lp);
}

/* Quantised GGUF weights go through the loader's dequantisation: the maps stay close to the f32
 * model's, closer the more bits (measured relative deviations: f16 6e-4, q8_0 1.2e-2, q4_k 0.14
 * on random weights, whose flat distributions suit 4-bit blocks poorly). */
static void test_quantised_gguf(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *dts[] = {"f32", "f16", "q8_0", "q4_k"};
    char ids[256], out[8192], p[512];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 2, 24, 300, -1, 8);
    double *ref = NULL, prev = -1;
    size_t n = 0;
    for (int i = 0; i < 4; i++) {
        char model[512], mk[256];
        snprintf(model, sizeof model, "%s/%s.gguf", d, dts[i]);
        snprintf(mk, sizeof mk, "--arch qwen3 --layers 2 --dim 256 --heads 4 --kv-heads 2 --ffn 512 --vocab 300 --seed 21 --format gguf --dtype %s", dts[i]);
        model_make(model, mk);
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/o_%s --quiet", model, ids, d, dts[i]);
        if (rc != 0) fail_msg("%s: %s", dts[i], out);
        snprintf(p, sizeof p, "%s/o_%s/scores.npy", d, dts[i]);
        size_t m;
        double *s = npy_load_f64(p, &m, NULL);
        if (!ref) {
            ref = s;
            n = m;
            continue;
        }
        assert_int_equal(m, n);
        double err = 0, mx = 0;
        for (size_t k = 0; k < n; k++) {
            if (isnan(ref[k])) {
                assert_true(isnan(s[k]));
                continue;
            }
            assert_true(isfinite(s[k]));
            if (fabs(ref[k] - s[k]) > err) err = fabs(ref[k] - s[k]);
            if (fabs(ref[k]) > mx) mx = fabs(ref[k]);
        }
        print_message("%-5s vs f32: max relative deviation %.3g\n", dts[i], err / mx);
        assert_true(err / mx > prev);   /* fewer bits, larger deviation */
        assert_true(err / mx < 0.5);    /* but still the same model */
        assert_true(err > 0);           /* and really quantised */
        prev = err / mx;
        free(s);
    }
    free(ref);
}

/* --data tokenizes text with the model's own tokenizer (src/tok/, here the GGUF vocabulary that
 * mkmodel writes) exactly as `maskpos corpus` does: the maps equal those of --tokens on the
 * corpus command's token cache. Too few long documents, or --data without --n/--seq: exit 2. */
static void test_text_input(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], txt[256], out[8192], a[512], b[512];
    snprintf(model, sizeof model, "%s/m.gguf", d);
    snprintf(txt, sizeof txt, "%s/docs.txt", d);
    model_make(model, "--arch qwen2 --layers 2 --vocab 300 --format gguf --seed 3");
    const char *docs = "The quick brown fox jumps over the lazy dog, again and again.\n\n"
                       "Short.\n\n"
                       "A second long document: numbers 12345, words, and punctuation!\n";
    mp_test_write_file(txt, docs, strlen(docs));
    int rc = mp_test_run(out, sizeof out, "corpus --model %s --n 2 --seq 12 --out %s/c.npy %s", model, d, txt);
    if (rc != 0) fail_msg("corpus: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s/c.npy --out %s/t --quiet", model, d, d);
    if (rc != 0) fail_msg("probe --tokens: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --data %s --n 2 --seq 12 --out %s/x", model, txt, d);
    if (rc != 0) fail_msg("probe --data: %s", out);
    if (!strstr(out, "1 shorter than 12 tokens skipped")) fail_msg("short document not reported: %s", out);
    snprintf(a, sizeof a, "%s/t/scores.npy", d);
    snprintf(b, sizeof b, "%s/x/scores.npy", d);
    assert_true(files_equal(a, b));
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --data %s --n 3 --seq 12 --out %s/y", model, txt, d), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --data %s --out %s/y", model, txt, d), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --data %s --tokens %s/c.npy --n 2 --seq 12 --out %s/y", model, txt, d, d), 2);
    assert_int_equal(mp_test_run(out, sizeof out, "probe %s --tokens %s/c.npy --shuffle --out %s/y", model, d, d), 2);
}

/* Sequence-parallel workers (src/model/probe_ranks.c) against the one-thread loop, byte for byte. */
static void test_threads_same_bytes(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    char ids[256], out[8192], a[600], b[600];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 7, 40, 300, -1, 31);
    const char *flags[] = {"--per-head --recency", "--bidirectional --probs --per-head"};
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy", "scores_heads.npy", "probs.npy"};
    for (int f = 0; f < 2; f++)
        for (int t = 1; t <= 3; t++) {
            int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/t%d_%d %s --threads %d --quiet", model, ids, d, f, t,
                                 flags[f], t);
            if (rc != 0) fail_msg("probe %s --threads %d failed: %s", flags[f], t, out);
            for (int k = 0; k < 5 && t > 1; k++) {
                snprintf(a, sizeof a, "%s/t%d_1/%s", d, f, files[k]);
                snprintf(b, sizeof b, "%s/t%d_%d/%s", d, f, t, files[k]);
                if (mp_file_exists(a) != mp_file_exists(b)) fail_msg("%s: present with one thread count only", b);
                if (mp_file_exists(a) && !files_equal(a, b)) fail_msg("%s (%s) differs from the one-thread run", b, flags[f]);
            }
        }
    snprintf(a, sizeof a, "%s/t0_1/scores_heads.npy", d);
    assert_true(mp_file_exists(a)); /* the comparison above compared something */
}

/* The reduced map: a probe that needs only each row's head sum (no --per-head, no --recency) takes
 * it from the forward pass (MpFwd.rows_headsum); one that needs every head's rows sums them
 * itself. Both write the same head-mean maps byte for byte: one thread and two (whole sequences
 * per thread), --probs with two threads (row blocks of one sequence on two threads), and
 * --bidirectional. */
static void test_reduced_map_same_bytes(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    char ids[256], out[8192], a[600], b[600];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 5, 80, 300, -1, 37);
    const char *flags[][2] = {{"--threads 1", "--threads 1 --per-head --recency"},
                              {"--threads 2", "--threads 2 --per-head"},
                              {"--threads 2 --probs", "--threads 2 --probs --per-head"},
                              {"--threads 2 --bidirectional", "--threads 2 --bidirectional --recency"}};
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy", "probs.npy"};
    int compared = 0;
    for (int f = 0; f < 4; f++) {
        for (int k = 0; k < 2; k++) {
            int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/r%d_%d --layers all %s --quiet", model, ids, d, f,
                                 k, flags[f][k]);
            if (rc != 0) fail_msg("probe %s failed: %s", flags[f][k], out);
        }
        for (int k = 0; k < 4; k++) {
            snprintf(a, sizeof a, "%s/r%d_0/%s", d, f, files[k]);
            snprintf(b, sizeof b, "%s/r%d_1/%s", d, f, files[k]);
            if (mp_file_exists(a) != mp_file_exists(b)) fail_msg("%s: present in one run only", b);
            if (!mp_file_exists(a)) continue;
            if (!files_equal(a, b)) fail_msg("%s: %s (head sums from the forward pass) differs from %s", files[k], flags[f][0], flags[f][1]);
            compared++;
        }
    }
    assert_int_equal(compared, 13);
}

/* The dtype of one .npy (fails the test on a read error). */
static MpDtype npy_dtype(const char *path) {
    MpNpy a;
    MpErr e;
    if (mp_npy_read(path, &a, &e) != MP_OK) fail_msg("%s", e.msg);
    const MpDtype dt = a.dtype;
    mp_npy_free(&a);
    return dt;
}

/* --per-head: float32 files by default (the rounding of --heads-f64's), and per-head standard
 * errors against brute force: N one-sequence runs, sample standard deviation / sqrt(N). */
static void test_heads_f32_and_se(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *model = small_model(d);
    enum { N = 5, S = 20, H = 4, L = 3 };
    char ids[256], out[8192], a[600], b[600];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, N, S, 300, -1, 23);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/f32 --per-head --layers all --quiet", model, ids, d);
    if (rc != 0) fail_msg("probe --per-head failed: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/f64 --per-head --heads-f64 --layers all --quiet", model, ids, d);
    if (rc != 0) fail_msg("probe --per-head --heads-f64 failed: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/bad --heads-f64 --quiet", model, ids, d);
    if (rc != 2 || !strstr(out, "--heads-f64 goes with --per-head")) fail_msg("--heads-f64 alone: want exit 2, got %d: %s", rc, out);
    const char *names[2] = {"scores_heads.npy", "scores_heads_se.npy"};
    for (int k = 0; k < 2; k++) {
        snprintf(a, sizeof a, "%s/f32/%s", d, names[k]);
        snprintf(b, sizeof b, "%s/f64/%s", d, names[k]);
        assert_int_equal(npy_dtype(a), MP_DT_F32);
        assert_int_equal(npy_dtype(b), MP_DT_F64);
        size_t na, nb;
        double *x = npy_load_f64(a, &na, NULL), *y = npy_load_f64(b, &nb, NULL);
        assert_int_equal(na, nb);
        assert_int_equal(na, (size_t)L * H * S * S);
        for (size_t i = 0; i < na; i++)
            if (!(isnan(x[i]) && isnan(y[i])) && x[i] != (double)(float)y[i])
                fail_msg("%s[%zu]: float32 file %.9g, float64 file %.17g", names[k], i, x[i], y[i]);
        free(x);
        free(y);
    }
    /* brute force: each sequence alone (--heads-f64), then the standard error over the N maps */
    MpNpy all;
    MpErr e;
    if (mp_npy_read(ids, &all, &e) != MP_OK) fail_msg("%s", e.msg);
    double *one[N];
    for (int q = 0; q < N; q++) {
        snprintf(a, sizeof a, "%s/seq%d.npy", d, q);
        const int64_t shp[2] = {1, S};
        if (mp_npy_write(a, MP_DT_I32, (const int32_t *)all.data + (size_t)q * S, 2, shp, &e) != MP_OK) fail_msg("%s", e.msg);
        rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/one%d --per-head --heads-f64 --layers all --quiet", model, a, d, q);
        if (rc != 0) fail_msg("one-sequence probe failed: %s", out);
        snprintf(b, sizeof b, "%s/one%d/scores_heads.npy", d, q);
        size_t n1;
        one[q] = npy_load_f64(b, &n1, NULL);
        assert_int_equal(n1, (size_t)L * H * S * S);
    }
    mp_npy_free(&all);
    snprintf(b, sizeof b, "%s/f64/scores_heads_se.npy", d);
    size_t nse;
    double *se = npy_load_f64(b, &nse, NULL), worst = 0;
    size_t finite = 0;
    for (size_t i = 0; i < nse; i++) {
        double m = 0, v = 0;
        for (int q = 0; q < N; q++) m += one[q][i] / N;
        for (int q = 0; q < N; q++) v += (one[q][i] - m) * (one[q][i] - m) / (N - 1);
        const double ref = sqrt(v / N);
        if (isnan(one[0][i])) {
            if (!isnan(se[i])) fail_msg("se[%zu] = %g where the map is masked", i, se[i]);
            continue;
        }
        finite++;
        /* the accumulator's Σx²/N - mean² cancels: 1e-9 of the scores' scale (|m| + ref) */
        const double err = fabs(se[i] - ref) / (fabs(m) + ref + 1e-12);
        if (err > worst) worst = err;
        if (err > 1e-9) fail_msg("se[%zu] = %.17g, brute force %.17g (mean %.6g)", i, se[i], ref, m);
    }
    print_message("per-head standard errors: %zu entries, max relative difference from brute force %.3g\n", finite, worst);
    assert_true(finite == (size_t)L * H * S * (S + 1) / 2);
    free(se);
    for (int q = 0; q < N; q++) free(one[q]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_after_sigkill_is_exact),
        cmocka_unit_test(test_external_sigkill_then_resume),
        cmocka_unit_test(test_raw_input_and_selection),
        cmocka_unit_test(test_bad_inputs_exit_2),
        cmocka_unit_test(test_logits_greedy),
        cmocka_unit_test(test_quantised_gguf),
        cmocka_unit_test(test_text_input),
        cmocka_unit_test(test_threads_same_bytes),
        cmocka_unit_test(test_heads_f32_and_se),
        cmocka_unit_test(test_reduced_map_same_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
