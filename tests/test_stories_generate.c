/* test_stories_generate.c — sampling (src/model/generate.c) and the key/value cache it runs on
 * (mp_fwd_extend in src/model/fwd.c), and `maskpos generate`:
 *   - the cache: logits of mp_fwd_extend, one token at a time and in uneven chunks, are bit for bit
 *     those of a whole-sequence mp_fwd_run, for llama (GQA), qwen2 (biases), qwen3 (q/k norm),
 *     phi3 (partial rotary), smollm3 (NoPE layers), f32 and bf16, and with the reference kernel;
 *   - the sampler against closed forms computed here: over a fine grid of uniforms the share of
 *     each id equals softmax(logits / T) (within the grid step), top-k and top-p sets and their
 *     renormalised shares, greedy = argmax with the lowest id on ties, NLL = −log softmax;
 *   - determinism: 1 and 2 threads, and one-forward-per-thread vs threads within a step, give
 *     identical ids; sequence i is the same for any N; another seed gives other ids;
 *   - greedy decoding of stories260K from BOS is the sequence llama2.c's own program writes
 *     (data/third_party/stories260K/README.md), and `logits --greedy` agrees;
 *   - bad input: one-line error, exit 2.
 */
#include "test_model_util.h"

#include "core/util.h"      /* mp_file_exists */
#include "load/model.h"     /* mp_model_open */
#include "model/fwd.h"      /* mp_fwd_run, mp_fwd_extend */
#include "model/generate.h" /* mp_gen_* */

#define STORIES MP_SOURCE_DIR "/data/third_party/stories260K/stories260K.gguf"

/* ---------------------------------------------------------------- the cache */

/* logits of mp_fwd_run over ids[0..T) == those of mp_fwd_extend in chunks ending at cuts[]. */
/* mk: mkmodel flags, or a path starting with '/' (an existing checkpoint). */
static void extend_matches_run(const char *name, const char *mk, int compute) {
    const char *d = mp_test_tmpdir();
    char model[512];
    if (mk[0] == '/')
        snprintf(model, sizeof model, "%s", mk);
    else {
        snprintf(model, sizeof model, "%s/%s.gguf", d, name);
        char flags[512];
        snprintf(flags, sizeof flags, "%s --format gguf", mk);
        model_make(model, flags);
    }
    MpModel m;
    MpErr e;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, model, &e) != MP_OK) fail_msg("%s", e.msg);
    enum { T = 37 };
    int32_t ids[T];
    uint32_t s = 77;
    for (int t = 0; t < T; t++) {
        s = s * 1664525u + 1013904223u;
        ids[t] = (int32_t)((s >> 8) % (uint32_t)m.vocab);
    }
    MpFwdConfig fc = {.n_layers = m.n_layers, .max_seq = T, .causal = 1, .rope = 1, .logits = 1, .compute = compute};
    MpFwd whole, cached;
    if (mp_fwd_init(&whole, &m, &fc, &e) != MP_OK || mp_fwd_run(&whole, ids, T, NULL, NULL, &e) != MP_OK) fail_msg("%s", e.msg);
    fc.kv_cache = 1;
    if (mp_fwd_init(&cached, &m, &fc, &e) != MP_OK) fail_msg("%s", e.msg);
    const int V = m.vocab;
    /* two passes: one token at a time; then chunks 0..5, 5..6, 6..20, 20..37 (a new sequence) */
    const int cuts[2][40] = {{0}, {0, 5, 6, 20, T}};
    int ncut[2] = {T + 1, 5};
    int one[40];
    for (int i = 0; i <= T; i++) one[i] = i;
    for (int pass = 0; pass < 2; pass++) {
        const int *c = pass ? cuts[1] : one;
        for (int k = 0; k + 1 < ncut[pass]; k++)
            if (mp_fwd_extend(&cached, ids, c[k], c[k + 1], &e) != MP_OK) fail_msg("%s: %s", name, e.msg);
        if (memcmp(whole.logits, cached.logits, sizeof(float) * (size_t)T * V))
            fail_msg("%s (%s, pass %d): cached logits differ from the whole-sequence run", name, mp_fwd_compute_name(compute), pass);
    }
    /* the cache refuses what it cannot do */
    assert_int_equal(mp_fwd_extend(&whole, ids, 0, 1, &e), MP_ERR);
    assert_int_equal(mp_fwd_extend(&cached, ids, 3, 3, &e), MP_ERR);
    assert_int_equal(mp_fwd_extend(&cached, ids, 0, T + 1, &e), MP_ERR);
    print_message("%-10s %s: mp_fwd_extend == mp_fwd_run bit for bit over %d positions\n", name, mp_fwd_compute_name(compute), T);
    mp_fwd_free(&cached);
    mp_fwd_free(&whole);
    mp_model_free(&m);
}

static void test_extend_matches_run(void **state) {
    (void)state;
    extend_matches_run("llama", "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 2", MP_FWD_COMPUTE_F32);
    extend_matches_run("llama-bf16", "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 2", MP_FWD_COMPUTE_BF16);
    extend_matches_run("qwen2", "--arch qwen2 --layers 2 --vocab 300 --seed 3", MP_FWD_COMPUTE_F32);
    extend_matches_run("qwen3", "--arch qwen3 --layers 2 --heads 4 --kv-heads 1 --head-dim 24 --vocab 300 --seed 4", MP_FWD_COMPUTE_F32);
    extend_matches_run("phi3", "--arch phi3 --partial-rotary 0.5 --layers 2 --vocab 300 --seed 5", MP_FWD_COMPUTE_F32);
    extend_matches_run("gemma2-w8", "--arch gemma2 --layers 2 --head-dim 32 --vocab 300 --seed 8 --sliding-window 8", MP_FWD_COMPUTE_F32); /* windows < T */
    extend_matches_run("gemma3-w8", "--arch gemma3 --layers 6 --head-dim 32 --vocab 300 --seed 9 --sliding-window 8", MP_FWD_COMPUTE_F32);
    /* MoE: one row at a time routes and gathers as the whole sequence does */
    extend_matches_run("mixtral", "--arch mixtral --experts 4 --experts-used 2 --layers 2 --vocab 300 --seed 6", MP_FWD_COMPUTE_F32);
    extend_matches_run("qwen2moe", "--arch qwen2moe --experts 5 --experts-used 2 --moe-ffn 24 --shared-ffn 40 --layers 2 --vocab 300 --seed 6", MP_FWD_COMPUTE_F32);
    extend_matches_run("qwen3moe-bf16", "--arch qwen3moe --experts 6 --experts-used 3 --moe-ffn 40 --layers 2 --vocab 300 --seed 6", MP_FWD_COMPUTE_BF16);
    extend_matches_run("smollm3", MP_SOURCE_DIR "/models/none", MP_FWD_COMPUTE_BF16); /* NoPE layers, bf16 weights */
    extend_matches_run("stories", STORIES, MP_FWD_COMPUTE_F32);
    setenv("MASKPOS_KERNEL", "ref", 1);
    extend_matches_run("llama-ref", "--arch llama --layers 2 --vocab 300 --seed 7", MP_FWD_COMPUTE_F32);
    unsetenv("MASKPOS_KERNEL");
}

/* ---------------------------------------------------------------- the sampler */

/* Shares of each id over M uniforms (k + 0.5) / M. */
static void sample_shares(double *share, const float *lg, int V, const MpGenSampler *s, int M) {
    MpGenWork w;
    MpErr e;
    if (mp_gen_work_init(&w, V, &e) != MP_OK) fail_msg("%s", e.msg);
    for (int i = 0; i < V; i++) share[i] = 0;
    for (int k = 0; k < M; k++) share[mp_gen_sample(lg, s, (k + 0.5) / M, &w, NULL)] += 1.0 / M;
    mp_gen_work_free(&w);
}

static void test_sampler_closed_forms(void **state) {
    (void)state;
    enum { V = 6, M = 200000 };
    const float lg[V] = {1.0f, 2.5f, -0.5f, 2.5f, 0.25f, -3.0f};
    double p[V], share[V], z = 0;
    const double T = 0.7;
    for (int i = 0; i < V; i++) z += exp(lg[i] / T);
    for (int i = 0; i < V; i++) p[i] = exp(lg[i] / T) / z;
    MpGenSampler s = {.temperature = T, .top_k = 0, .top_p = 1};
    sample_shares(share, lg, V, &s, M);
    for (int i = 0; i < V; i++)
        if (fabs(share[i] - p[i]) > 2.0 / M) fail_msg("id %d: share %.6f, softmax %.6f", i, share[i], p[i]);
    /* top-k 3: ids 1, 3 (tied, both kept) and 0, renormalised */
    s.top_k = 3;
    sample_shares(share, lg, V, &s, M);
    const double z3 = p[0] + p[1] + p[3];
    for (int i = 0; i < V; i++) {
        const double want = (i == 0 || i == 1 || i == 3) ? p[i] / z3 : 0;
        if (fabs(share[i] - want) > 2.0 / M) fail_msg("top-k 3, id %d: share %.6f, want %.6f", i, share[i], want);
    }
    /* top-p: the smallest prefix of ranks (1, 3 — the tie by id —, 0, 4, ...) whose mass reaches p */
    s.top_k = 0;
    s.top_p = (p[1] + p[3]) * 0.999; /* reached after two ids */
    sample_shares(share, lg, V, &s, M);
    for (int i = 0; i < V; i++) {
        const double want = (i == 1 || i == 3) ? 0.5 : 0;
        if (fabs(share[i] - want) > 2.0 / M) fail_msg("top-p, id %d: share %.6f, want %.6f", i, share[i], want);
    }
    s.top_p = p[1] * 0.5; /* the first ranked id alone: id 1 (tie with 3, lower id first) */
    sample_shares(share, lg, V, &s, M);
    assert_true(fabs(share[1] - 1.0) < 1e-9);
    /* greedy: argmax, lowest id on ties; NLL under temperature 1 */
    MpGenWork w;
    MpErr e;
    assert_int_equal(mp_gen_work_init(&w, V, &e), MP_OK);
    MpGenSampler g = {.temperature = 0, .top_k = 0, .top_p = 1};
    double nll = 0, z1 = 0;
    assert_int_equal(mp_gen_sample(lg, &g, 0.99, &w, &nll), 1);
    for (int i = 0; i < V; i++) z1 += exp((double)lg[i]);
    assert_true(fabs(nll - (log(z1) - 2.5)) < 1e-12);
    mp_gen_work_free(&w);
    /* bad samplers are named */
    MpGenSampler bad = {.temperature = -1, .top_p = 1};
    assert_non_null(mp_gen_sampler_check(&bad));
    bad = (MpGenSampler){.temperature = 1, .top_p = 0};
    assert_non_null(mp_gen_sampler_check(&bad));
    print_message("sampler: shares within %.1e of softmax / top-k / top-p over %d uniforms\n", 2.0 / M, M);
}

/* ---------------------------------------------------------------- determinism */

static void test_generate_deterministic(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[512], out[8192], a[512], b[512];
    snprintf(model, sizeof model, "%s/m.gguf", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 11 --format gguf");
    const char *runs[][2] = {{"t1.npy", "--n 5 --threads 1"}, {"t2.npy", "--n 5 --threads 2"}, {"n3.npy", "--n 3 --threads 2"},
                             {"s9.npy", "--n 5 --seed 9"}};
    for (int i = 0; i < 4; i++) {
        int rc = mp_test_run(out, sizeof out, "generate %s --prompt-ids 5 --len 40 --temperature 0.9 --quiet --out %s/%s %s", model, d,
                             runs[i][0], runs[i][1]);
        if (rc != 0) fail_msg("generate %s failed: %s", runs[i][1], out);
    }
    snprintf(a, sizeof a, "%s/t1.npy", d);
    snprintf(b, sizeof b, "%s/t2.npy", d);
    if (!files_equal(a, b)) fail_msg("1 and 2 threads give different ids");
    size_t n5, n3, n9;
    int64_t sh[4];
    double *x5 = npy_load_f64(a, &n5, sh);
    assert_int_equal(sh[0], 5);
    assert_int_equal(sh[1], 40);
    snprintf(b, sizeof b, "%s/n3.npy", d);
    double *x3 = npy_load_f64(b, &n3, NULL);
    assert_int_equal(n3, 3 * 40);
    assert_memory_equal(x3, x5, n3 * sizeof *x3); /* sequence i does not depend on N */
    snprintf(b, sizeof b, "%s/s9.npy", d);
    double *x9 = npy_load_f64(b, &n9, NULL);
    int differ = 0;
    for (size_t i = 0; i < n5; i++) differ += x9[i] != x5[i];
    assert_true(differ > (int)n5 / 2); /* another seed, other samples */
    for (int r = 0; r < 5; r++) assert_true(x5[r * 40] == 5.0); /* the prompt starts every row */
    /* in the library: one forward pass per thread vs threads within a step, same ids */
    MpModel m;
    MpErr e;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, model, &e) != MP_OK) fail_msg("%s", e.msg);
    const int32_t prompt[1] = {5};
    MpGenConfig c = {.n = 5, .len = 40, .sampler = {.temperature = 0.9, .top_p = 1}, .prompt = prompt, .n_prompt = 1,
                     .threads = 2, .parallel = MP_GEN_PARALLEL_WITHIN};
    MpGenResult r1, r2;
    if (mp_gen_run(&r1, &m, &c, &e) != MP_OK) fail_msg("%s", e.msg);
    c.parallel = MP_GEN_PARALLEL_SEQUENCES;
    if (mp_gen_run(&r2, &m, &c, &e) != MP_OK) fail_msg("%s", e.msg);
    assert_int_equal(r1.parallel, MP_GEN_PARALLEL_WITHIN);
    assert_int_equal(r2.parallel, MP_GEN_PARALLEL_SEQUENCES);
    assert_memory_equal(r1.ids, r2.ids, sizeof(int32_t) * 5 * 40);
    assert_true(r1.nll_sum == r2.nll_sum && r1.nll_sum > 0);
    for (int i = 0; i < 5 * 40; i++) assert_true(r1.ids[i] == (int32_t)x5[i]);
    mp_gen_result_free(&r1);
    mp_gen_result_free(&r2);
    mp_model_free(&m);
    free(x5);
    free(x3);
    free(x9);
}

/* ---------------------------------------------------------------- stories260K */

static void test_greedy_stories_is_llama2c(void **state) {
    (void)state;
    /* llama2.c's run.c, greedy from BOS on stories260K.bin (README of the fixture) */
    const char *want = "1 403 407 261 378 432 383 286 261 376 298 315 421 395 317 426 338 401 396 267";
    char out[8192], line[512];
    int rc = mp_test_run(out, sizeof out, "generate %s --greedy --len 20 --ids --threads 2", STORIES);
    if (rc != 0) fail_msg("generate failed: %s", out);
    snprintf(line, sizeof line, "%s\n", want); /* stdout: the ids alone on their line */
    const char *at = strstr(out, line);
    if (!at || (at != out && at[-1] != '\n')) fail_msg("greedy ids\n  %s\nllama2.c writes\n  %s", out, want);
    /* the same continuation through `logits --greedy` (whole sequence recomputed per token) */
    rc = mp_test_run(out, sizeof out, "logits %s --tokens 1 --greedy 19", STORIES);
    if (rc != 0) fail_msg("logits failed: %s", out);
    const char *g = strstr(out, "greedy continuation (19 tokens): ");
    assert_non_null(g);
    char list[512];
    snprintf(list, sizeof list, "%s", want + 2);
    for (char *p = list; *p; p++) *p = *p == ' ' ? ',' : *p;
    if (strncmp(g + strlen("greedy continuation (19 tokens): "), list, strlen(list))) fail_msg("logits --greedy: %s", g);
}

static void test_generate_bad_input(void **state) {
    (void)state;
    char out[4096];
    const char *bad[] = {
        "generate " STORIES " --temperature -1",
        "generate " STORIES " --top-p 0",
        "generate " STORIES " --len 1",
        "generate " STORIES " --prompt-ids 1,99999",
        "generate " STORIES " --prompt-ids 1,x",
        "generate " STORIES " --greedy --temperature 0.5",
        "generate " STORIES " --prompt hello --prompt-ids 1",
        "generate " STORIES " --len 3000",
        "generate /nonexistent.gguf",
        "generate " STORIES " --bogus",
        "generate",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = mp_test_run(out, sizeof out, "%s", bad[i]);
        if (rc != 2) fail_msg("'%s' exited %d, want 2: %s", bad[i], rc, out);
        if (!strstr(out, "error")) fail_msg("'%s': no error line: %s", bad[i], out);
        if (strchr(out, '\n') != out + strlen(out) - 1) fail_msg("'%s': more than one line: %s", bad[i], out);
    }
    /* nothing is left behind for a run that failed */
    const char *d = mp_test_tmpdir();
    int rc = mp_test_run(out, sizeof out, "generate %s --prompt-ids 1,99999 --out %s/x.npy", STORIES, d);
    assert_int_equal(rc, 2);
    char p[512];
    snprintf(p, sizeof p, "%s/x.npy", d);
    assert_false(mp_file_exists(p));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extend_matches_run),
        cmocka_unit_test(test_sampler_closed_forms),
        cmocka_unit_test(test_generate_deterministic),
        cmocka_unit_test(test_greedy_stories_is_llama2c),
        cmocka_unit_test(test_generate_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
