/* test_model_fwd.c — the forward pass (src/model/fwd.c) through `maskpos probe` / `maskpos logits`
 * against independent references:
 *   - torch: tests/ref/probe_ref.py (float64, HF semantics from model-formats.md, its own numpy
 *     safetensors reader) gives per-layer, per-head pre-softmax scores and logits for llama (GQA,
 *     tied, sharded bf16, llama3 rope scaling), mistral, qwen2 (biases), qwen3 (q/k norm, head_dim
 *     ≠ C/NH), phi3 (fused tensors, partial rotary, longrope), and the two counterfactuals;
 *     sliding windows shorter than the sequence (gemma2, gemma3, mistral, qwen2's layers >=
 *     max_window_layers, phi3; gemma2 also without the causal mask): NaN exactly outside;
 *     mixtral, qwen3moe and qwen2moe (experts; with and without qwen3moe's renormalisation;
 *     qwen2moe's shared expert);
 *   - format equivalence: the same random model written as an HF directory and as a GGUF (f32)
 *     gives the same maps, per arch, GQA ratio 2;
 *   - counterfactual sanity: without the mask, identical tokens give a purely relative map;
 *   - determinism: 1 and 2 threads give byte-identical outputs;
 *   - overflow (issue 31, class 7): finite but huge weights end the run with the layer, the
 *     position and the tensor named (q_proj 3e38; q·k past FLT_MAX from finite q and k; the
 *     scores-only last layer of a probe; the key/value-cache path), not NaN (failed before:
 *     every run returned MP_OK with NaN scores or logits).
 *   - the backend interface (fwd_backend.h) is the only way to the arithmetic: a third instance
 *     (cpu-plain's ops, each call counted) gives cpu-plain's logits bit for bit and calls matmul
 *     7L times, softmax NH·L·T times, the embedding and the output head once each (counted by
 *     hand for Llama), the MoE routing once per layer and the experts' SwiGLU once per routed row
 *     (mixtral, qwen2moe with its shared expert), the RoPE table twice for gemma3 (its local
 *     layers' table through the instance too), the residual adds (2L), the value copies (L·T·NKV), the experts' gathers (E per layer),
 *     qwen2moe's shared-expert mix (once per layer)
 *     and the sliding window's row masks (gemma3: every row of its local layers); a backend whose storage
 *     fails stops init with one line; devices this version lacks or unknown are refused with one line; the
 *     matmul kernel is the pass's own (MASKPOS_KERNEL), not a process-wide choice; capture taps
 *     fire only where asked for before the run; the reduced map (head sums of a block of rows, in
 *     double, heads ascending; the instance's attn_headsum, once per block) equals the sums of the raw
 *     rows bit for bit, only for the layers asked.
 * Tolerances: f32 forward vs float64 reference. Scores: |Δ| ≤ 1e-5 · max|ref| over the map
 * (measured ≤ 6e-7 relative); log-probs: |Δ| ≤ 1e-5 + 1e-5·|ref| (measured ≤ 2.3e-6 absolute).
 */
#include "test_model_util.h"

#include "model/fwd.h" /* mp_fwd_run, mp_fwd_extend: the overflow cases; MpFwdOps: the backend tests */

typedef struct RefCase {
    const char *name;
    const char *mk;    /* mkmodel flags */
    const char *probe; /* extra probe flags */
    const char *ref;   /* matching probe_ref.py flags */
    int N, S;
    int logits;        /* also compare maskpos logits with the reference */
    const char *sed;   /* optional sed expression applied to config.json after mkmodel */
} RefCase;

/* Phi-3 longrope with original_max_position_embeddings lowered to 16, so a 24-token sequence
 * takes the long factor table (HF: seq_len > original) and a 12-token one the short table. */
#define ORIG16 "s/\"original_max_position_embeddings\": 4096/\"original_max_position_embeddings\": 16/"

static const RefCase ref_cases[] = {
    {"llama", "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300", "", "", 3, 24, 1, NULL},
    {"llama-llama3-rope", "--arch llama --rope-scaling llama3 --layers 2 --vocab 300", "", "", 2, 64, 1, NULL},
    {"llama-tied-bf16-sharded", "--arch llama --layers 2 --tie --dtype bf16 --shards 2 --vocab 300", "", "", 2, 20, 1, NULL},
    {"mistral-mha", "--arch mistral --layers 2 --heads 4 --kv-heads 4 --vocab 300 --seed 5", "", "", 2, 20, 0, NULL},
    {"qwen2", "--arch qwen2 --layers 2 --vocab 300 --seed 3", "", "", 2, 24, 1, NULL},
    {"qwen3", "--arch qwen3 --layers 2 --heads 4 --kv-heads 1 --head-dim 24 --vocab 300 --seed 4", "", "", 2, 24, 1, NULL},
    {"phi3-longrope-partial", "--arch phi3 --rope-scaling longrope --partial-rotary 0.5 --layers 2 --vocab 300", "", "", 2, 24, 1, NULL},
    {"llama-bidirectional", "--arch llama --layers 2 --vocab 300 --seed 9", "--bidirectional", "--bidirectional", 2, 20, 0, NULL},
    {"qwen3-no-rope", "--arch qwen3 --layers 2 --vocab 300 --seed 8", "--no-rope", "--no-rope", 2, 20, 0, NULL},
    {"phi3-longrope-long-table", "--arch phi3 --rope-scaling longrope --layers 2 --vocab 300 --seed 13", "", "", 2, 24, 1, ORIG16},
    {"olmo2", "--arch olmo2 --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 6", "", "", 2, 24, 1, NULL},
    {"olmo2-no-rope-bidirectional", "--arch olmo2 --layers 2 --vocab 300 --seed 7", "--no-rope --bidirectional", "--no-rope --bidirectional", 2, 20, 0, NULL},
    {"gptneox", "--arch gptneox --layers 2 --vocab 300 --seed 12", "", "", 2, 24, 1, NULL},
    {"gptneox-sequential-half-rotary", "--arch gptneox --layers 2 --vocab 300 --seed 14 --no-parallel-residual --partial-rotary 0.5", "", "", 2, 24, 1, NULL},
    {"gptneox-no-rope", "--arch gptneox --layers 2 --vocab 300 --seed 15", "--no-rope", "--no-rope", 2, 20, 0, NULL},
    {"gemma2", "--arch gemma2 --layers 2 --head-dim 32 --vocab 300 --seed 16", "", "", 2, 24, 1, NULL},
    {"gemma2-capped-bf16", "--arch gemma2 --layers 2 --vocab 300 --seed 17 --attn-softcap 1.5 --final-softcap 4 --dtype bf16", "", "", 2, 24, 1, NULL},
    {"gemma2-capped-bidirectional", "--arch gemma2 --layers 2 --vocab 300 --seed 18 --attn-softcap 1.5", "--bidirectional", "--bidirectional", 2, 20, 0, NULL},
    {"gemma3", "--arch gemma3 --layers 6 --head-dim 32 --vocab 300 --seed 19 --rope-theta 1000000", "", "", 2, 24, 1, NULL},
    {"gemma", "--arch gemma --layers 2 --head-dim 32 --vocab 300 --seed 20", "", "", 2, 24, 1, NULL},
    {"mixtral", "--arch mixtral --layers 3 --experts 4 --experts-used 2 --vocab 300 --seed 22", "", "", 3, 24, 1, NULL},
    {"qwen3moe", "--arch qwen3moe --layers 2 --experts 8 --experts-used 3 --moe-ffn 48 --vocab 300 --seed 23", "", "", 2, 24, 1, NULL},
    {"qwen2moe", "--arch qwen2moe --layers 2 --experts 6 --experts-used 2 --moe-ffn 48 --shared-ffn 80 --vocab 300 --seed 28", "", "", 2, 24, 1, NULL},
    {"qwen3moe-no-norm-topk", "--arch qwen3moe --layers 2 --experts 6 --experts-used 2 --no-norm-topk --vocab 300 --seed 24", "", "", 2, 24, 1, NULL},
    {"phi3-longrope-short-table", "--arch phi3 --rope-scaling longrope --layers 2 --vocab 300 --seed 13", "", "", 2, 12, 0, ORIG16},
    /* sliding windows shorter than the sequence: keys with i - j >= W NaN, like the causal mask's */
    {"gemma2-window8", "--arch gemma2 --layers 2 --head-dim 32 --vocab 300 --seed 22 --sliding-window 8", "", "", 2, 24, 1, NULL},
    {"gemma2-window6-capped-bidir", "--arch gemma2 --layers 2 --vocab 300 --seed 23 --attn-softcap 1.5 --sliding-window 6", "--bidirectional", "--bidirectional", 2, 20, 0, NULL},
    {"gemma3-window8", "--arch gemma3 --layers 6 --head-dim 32 --vocab 300 --seed 24 --rope-theta 1000000 --sliding-window 8", "", "", 2, 24, 1, NULL},
    {"mistral-window8", "--arch mistral --layers 2 --vocab 300 --seed 25 --sliding-window 8", "", "", 2, 24, 1, NULL},
    {"qwen2-window8-layer2", "--arch qwen2 --layers 2 --vocab 300 --seed 26 --sliding-window 8", "", "", 2, 24, 1, NULL},
    {"phi3-window5", "--arch phi3 --layers 2 --vocab 300 --seed 27 --sliding-window 5", "", "", 2, 20, 1, NULL},
};

static void compare_scores(const char *what, const char *mine, const char *ref, double tol_rel) {
    size_t n1, n2;
    int64_t s1[4], s2[4];
    double *a = npy_load_f64(mine, &n1, s1), *b = npy_load_f64(ref, &n2, s2);
    if (n1 != n2 || memcmp(s1, s2, sizeof s1)) fail_msg("%s: shapes differ (%zu vs %zu values)", what, n1, n2);
    double mx = 0, err = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n1; i++) {
        if (isnan(a[i]) != isnan(b[i])) fail_msg("%s: masked entries differ at flat index %zu (%g vs %g)", what, i, a[i], b[i]);
        if (isnan(b[i])) continue;
        if (fabs(b[i]) > mx) mx = fabs(b[i]);
        if (fabs(a[i] - b[i]) > err) {
            err = fabs(a[i] - b[i]);
            worst = i;
        }
    }
    print_message("%-26s scores: max |difference| = %.3g (%.2g of max |score| %.3g)\n", what, err, err / mx, mx);
    if (!(err <= tol_rel * mx))
        fail_msg("%s: scores differ by %g at flat index %zu (maskpos %.9g, torch %.9g), tolerance %g", what, err, worst,
                 a[worst], b[worst], tol_rel * mx);
    free(a);
    free(b);
}

static void test_against_torch(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof ref_cases / sizeof ref_cases[0]; c++) {
        const RefCase *k = &ref_cases[c];
        const char *d = mp_test_tmpdir();
        char model[256], ids[256], out[16384], a[512], b[512];
        snprintf(model, sizeof model, "%s/model", d);
        snprintf(ids, sizeof ids, "%s/ids.npy", d);
        model_make(model, k->mk);
        if (k->sed) {
            int src = mp_test_shell(out, sizeof out, "sed -i '%s' %s/config.json && grep -q '\"original_max_position_embeddings\": 16' %s/config.json",
                         k->sed, model, model);
            if (src != 0) fail_msg("%s: editing config.json failed: %s", k->name, out);
        }
        ids_write(ids, k->N, k->S, 300, -1, 11 + (uint32_t)c);
        char pout[300]; /* its own folder: --out holds one run's outputs, not the inputs */
        snprintf(pout, sizeof pout, "%s/probe", d);
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s --layers all --per-head --quiet %s", model, ids,
                             pout, k->probe);
        if (rc != 0) fail_msg("%s: probe failed (%d): %s", k->name, rc, out);
        rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/probe_ref.py %s %s %s --layers %s %s %s", MP_SOURCE_DIR, model,
                ids, d, strstr(k->mk, "--layers 3") ? "1,2,3" : strstr(k->mk, "--layers 6") ? "1,2,3,4,5,6" : "1,2", k->ref, k->logits ? "--logits" : "");
        if (rc != 0) fail_msg("%s: probe_ref.py failed (%d): %s", k->name, rc, out);
        snprintf(a, sizeof a, "%s/scores_heads.npy", pout);
        snprintf(b, sizeof b, "%s/ref_scores_heads.npy", d);
        compare_scores(k->name, a, b, 1e-5);
        if (!k->logits) continue;
        /* logits of sequence 0 through `maskpos logits` */
        const double err = logits_vs_ref(k->name, model, ids, k->S, d, "", 1e-5, 1e-5);
        print_message("%-26s log-probs: max |maskpos - torch| = %.3g over %d positions\n", k->name, err, k->S);
    }
}

/* Same seed, f32 weights, HF directory vs GGUF file: the loader serves identical f32 weights and
 * the same RoPE table, so the maps are byte-identical (asserted; and within 1e-5 relative, which
 * names the worst entry should they ever differ). */
static void test_hf_gguf_equivalent(void **state) {
    (void)state;
    const char *archs[][2] = {{"llama", "--arch llama"},
                              {"llama-llama3", "--arch llama --rope-scaling llama3"},
                              {"qwen3", "--arch qwen3"},
                              {"qwen2", "--arch qwen2"},
                              {"phi3", "--arch phi3"},
                              {"phi3-longrope", "--arch phi3 --rope-scaling longrope"},
                              {"olmo2", "--arch olmo2"},
                              {"gptneox", "--arch gptneox --kv-heads 4"},
                              {"gemma2", "--arch gemma2 --attn-softcap 1.5 --final-softcap 4"},
                              {"gemma3", "--arch gemma3 --layers 6 --rope-theta 1000000"},
                              {"gemma", "--arch gemma"},
                              {"gemma2-window8", "--arch gemma2 --sliding-window 8"},
                              {"gemma3-window16", "--arch gemma3 --layers 6 --rope-theta 1000000 --sliding-window 16"},
                              {"mixtral", "--arch mixtral --experts 4 --experts-used 2"},
                              {"qwen3moe", "--arch qwen3moe --experts 8 --experts-used 3 --moe-ffn 48"},
                              {"qwen2moe", "--arch qwen2moe --experts 6 --experts-used 2 --moe-ffn 48 --shared-ffn 80"}};
    const char *d = mp_test_tmpdir();
    char ids[256], out[8192];
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    ids_write(ids, 2, 40, 300, -1, 5);
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        char p[2][512];
        for (int g = 0; g < 2; g++) {
            char model[256], mk[256];
            snprintf(model, sizeof model, "%s/%s%s", d, archs[i][0], g ? ".gguf" : "");
            snprintf(mk, sizeof mk, "--layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 21 --format %s %s", g ? "gguf" : "hf", archs[i][1]);
            model_make(model, mk);
            int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/o_%s_%d --layers all --per-head --quiet", model, ids, d,
                                 archs[i][0], g);
            if (rc != 0) fail_msg("%s: probe failed: %s", model, out);
            snprintf(p[g], sizeof p[g], "%s/o_%s_%d/scores_heads.npy", d, archs[i][0], g);
        }
        char what[64];
        snprintf(what, sizeof what, "%s hf vs gguf", archs[i][0]);
        compare_scores(what, p[1], p[0], 1e-5);
        /* the loader serves bit-identical f32 weights from both: the maps are byte for byte equal */
        if (!files_equal(p[0], p[1])) fail_msg("%s: HF and GGUF maps are not byte-identical", archs[i][0]);
    }
}

/* Without the mask every row of an identical-token input stays identical in every layer (values
 * are not rotated, so attention returns the same vector), and RoPE makes q_i·k_j a function of
 * i − j: the diagonal-normalised residue is zero up to float rounding (bound 1e-5 of the map's
 * scale). Control: random tokens with the mask leave a residue of order 0.1. */
static void test_bidirectional_identical_tokens_relative(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], rnd[256], out[8192], p[512];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/same.npy", d);
    snprintf(rnd, sizeof rnd, "%s/rnd.npy", d);
    model_make(model, "--arch qwen3 --layers 3 --vocab 300 --seed 2");
    ids_write(ids, 2, 48, 300, 17, 0);
    ids_write(rnd, 2, 48, 300, -1, 3);
    const char *runs[][3] = {{"same", "--bidirectional", "bidirectional, identical tokens"},
                             {"rnd", "", "causal, random tokens"}};
    for (int r = 0; r < 2; r++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s/%s.npy --out %s/%s --layers all --quiet %s", model, d, runs[r][0],
                             d, runs[r][0], runs[r][1]);
        if (rc != 0) fail_msg("probe failed: %s", out);
        size_t n, n2;
        snprintf(p, sizeof p, "%s/%s/scores_diagnorm.npy", d, runs[r][0]);
        double *res = npy_load_f64(p, &n, NULL);
        snprintf(p, sizeof p, "%s/%s/scores.npy", d, runs[r][0]);
        double *sc = npy_load_f64(p, &n2, NULL);
        double mr = 0, ms = 0;
        size_t nans = 0;
        for (size_t i = 0; i < n; i++) {
            if (isnan(sc[i])) {
                nans++;
                continue;
            }
            if (fabs(res[i]) > mr) mr = fabs(res[i]);
            if (fabs(sc[i]) > ms) ms = fabs(sc[i]);
        }
        print_message("%-34s max |residue| %.3g, max |score| %.3g, masked entries %zu\n", runs[r][2], mr, ms, nans);
        if (r == 0) {
            assert_int_equal(nans, 0); /* no mask: the whole map is observed */
            if (!(mr <= 1e-5 * ms)) fail_msg("bidirectional identical tokens: residue %g is not zero (scale %g)", mr, ms);
        } else {
            assert_true(nans > 0);
            if (!(mr > 1e-2)) fail_msg("control: causal random tokens should leave a residue, got %g", mr);
        }
        free(res);
        free(sc);
    }
}

/* A model large enough that every parallel region really runs on 2 threads. */
static void test_threads_bit_identical(void **state) {
    (void)state;
    threads_identical(mp_test_tmpdir(), "", "");
}

/* ================================================================ overflow */

/* Runs ids 0..T-1 (mod 64) through the model at path: the whole sequence (kv = 0) or position by
 * position with the key/value cache (kv = 1); returns the status, the message in e. */
static int overflow_run(const char *path, int n_layers, int logits, int kv, MpErr *e) {
    MpModel m;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, path, e) != MP_OK) fail_msg("%s: %s", path, e->msg);
    enum { T = 12 };
    int32_t ids[T];
    for (int t = 0; t < T; t++) ids[t] = (t * 7 + 3) % 64;
    MpFwdConfig fc = {.n_layers = n_layers, .max_seq = T, .causal = 1, .rope = 1, .logits = logits, .kv_cache = kv};
    MpFwd f;
    int rc = mp_fwd_init(&f, &m, &fc, e);
    if (rc != MP_OK) fail_msg("%s: %s", path, e->msg);
    for (int t = 0; t < T && rc == MP_OK; t++) rc = kv ? mp_fwd_extend(&f, ids, t, t + 1, e) : MP_OK;
    if (!kv) rc = mp_fwd_run(&f, ids, T, NULL, NULL, e);
    for (size_t i = 0; rc == MP_OK && logits && i < (size_t)T * (size_t)f.V; i++)
        if (!isfinite(f.logits[i])) fail_msg("%s: MP_OK with a non-finite logit", path);
    mp_fwd_free(&f);
    mp_model_free(&m);
    return rc;
}

/* rc is MP_ERR and the message holds each of the strings. */
static void overflow_expect(const char *name, int rc, const MpErr *e, const char *a, const char *b) {
    print_message("%-28s %s\n", name, rc == MP_OK ? "MP_OK" : e->msg);
    if (rc == MP_OK) fail_msg("%s: the run succeeded (NaN or ±Inf went unnoticed)", name);
    if (!strstr(e->msg, a) || !strstr(e->msg, b)) fail_msg("%s: the message lacks '%s' or '%s': %s", name, a, b, e->msg);
}

static void test_fwd_overflow_named(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    const char *mk = "--arch llama --layers 2 --dim 16 --heads 2 --kv-heads 1 --ffn 16 --vocab 64 --max-pos 64";
    char ok[512], q[512], qk[512], l2[512];
    snprintf(ok, sizeof ok, "%s/ok", d);
    snprintf(q, sizeof q, "%s/q", d);
    snprintf(qk, sizeof qk, "%s/qk", d);
    snprintf(l2, sizeof l2, "%s/l2", d);
    model_make(ok, mk);
    model_make(q, mk);
    model_make(qk, mk);
    model_make(l2, mk);
    MpErr e;
    /* control: the same model untouched runs, with finite logits, both ways */
    assert_int_equal(overflow_run(ok, 2, 1, 0, &e), MP_OK);
    assert_int_equal(overflow_run(ok, 2, 1, 1, &e), MP_OK);
    const float big = 3e38f, e20[16] = {1e20f, 1e20f, 1e20f, 1e20f, 1e20f, 1e20f, 1e20f, 1e20f,
                                        1e20f, 1e20f, 1e20f, 1e20f, 1e20f, 1e20f, 1e20f, 1e20f};
    model_poke(q, "model.layers.0.self_attn.q_proj.weight", 5 * 4, &big, 4);
    overflow_expect("q_proj 3e38, logits", overflow_run(q, 2, 1, 0, &e), &e, "layer 1 of 2, position", "the queries (q_proj)");
    overflow_expect("q_proj 3e38, kv cache", overflow_run(q, 2, 1, 1, &e), &e, "layer 1 of 2, position", "the queries (q_proj)");
    overflow_expect("q_proj 3e38, scores only", overflow_run(q, 1, 0, 0, &e), &e, "layer 1 of 2", "the queries (q_proj)");
    /* q and k finite (about 1e20) but q·k past FLT_MAX: the scores overflowed, in head 0 (row 0 of q) */
    model_poke(qk, "model.layers.0.self_attn.q_proj.weight", 0, e20, sizeof e20);
    model_poke(qk, "model.layers.0.self_attn.k_proj.weight", 0, e20, sizeof e20);
    overflow_expect("q·k past FLT_MAX", overflow_run(qk, 2, 1, 0, &e), &e, "layer 1 of 2, position 0",
                    "the attention scores q·k of head 0 overflowed");
    /* the probe's last layer stops at its scores: they are checked themselves */
    model_poke(l2, "model.layers.1.self_attn.q_proj.weight", 5 * 4, &big, 4);
    overflow_expect("layer 2 q_proj, scores only", overflow_run(l2, 2, 0, 0, &e), &e, "layer 2 of 2, position",
                    "the queries (q_proj)");
}

/* ---------------------------------------------------------------- the backend interface */

static long bk_matmuls, bk_softmax_rows, bk_embeds, bk_routes, bk_headsums, bk_heads, bk_swiglus, bk_ropetabs;
static long bk_adds, bk_copies, bk_masks, bk_gathers, bk_shared, bk_to_hosts, bk_act_allocs;
static MpFwdOps bk_counted;

static void bk_matmul(MpFwdKernel k, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdMat *w, int64_t T) {
    __atomic_fetch_add(&bk_matmuls, 1, __ATOMIC_RELAXED);
    mp_fwd_ops_cpu_plain.matmul(k, y, ldy, x, ldx, w, T);
}
static void bk_softmax(float *row, int n, int len) {
    __atomic_fetch_add(&bk_softmax_rows, 1, __ATOMIC_RELAXED);
    mp_fwd_ops_cpu_plain.softmax_row(row, n, len);
}
static int bk_embed(float *x, MpModel *m, const int32_t *ids, int n, MpErr *e) {
    bk_embeds++;
    return mp_fwd_ops_cpu_plain.embed(x, m, ids, n, e);
}
static void bk_moe_route(float *p, float *w, int32_t *sel, int n, int E, int K, int norm_topk) {
    bk_routes++;
    mp_fwd_ops_cpu_plain.moe_route(p, w, sel, n, E, K, norm_topk);
}
static void bk_headsum(double *hs, const float *s, int NH, int T, int causal, int i0, int i1) {
    __atomic_fetch_add(&bk_headsums, 1, __ATOMIC_RELAXED);
    mp_fwd_ops_cpu_plain.attn_headsum(hs, s, NH, T, causal, i0, i1);
}
static void bk_logits_op(float *y, float *xn, const float *x, const MpFwdHead *h, int n) {
    bk_heads++;
    mp_fwd_ops_cpu_plain.logits(y, xn, x, h, n);
}
static void bk_swiglu(float *out, const float *g, const float *u, size_t n) {
    __atomic_fetch_add(&bk_swiglus, 1, __ATOMIC_RELAXED);
    mp_fwd_ops_cpu_plain.swiglu(out, g, u, n);
}
static void bk_rope_table(float *cos_t, float *sin_t, const float *inv_freq, int R, int T, double attn) {
    bk_ropetabs++;
    mp_fwd_ops_cpu_plain.rope_table(cos_t, sin_t, inv_freq, R, T, attn);
}
static void bk_add(float *x, const float *y, size_t n) {
    bk_adds++;
    mp_fwd_ops_cpu_plain.add(x, y, n);
}
static void bk_copy(float *dst, const float *src, size_t n) {
    __atomic_fetch_add(&bk_copies, 1, __ATOMIC_RELAXED);
    mp_fwd_ops_cpu_plain.copy(dst, src, n);
}
static void bk_mask_window(float *row, int i, int T, int W, int causal) {
    __atomic_fetch_add(&bk_masks, 1, __ATOMIC_RELAXED);
    mp_fwd_ops_cpu_plain.mask_window(row, i, T, W, causal);
}
static int bk_moe_gather(float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int t0, int T, int K, int C) {
    bk_gathers++;
    return mp_fwd_ops_cpu_plain.moe_gather(xg, rows, x, sel, j, t0, T, K, C);
}
static void bk_moe_shared_mix(float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C) {
    bk_shared++;
    mp_fwd_ops_cpu_plain.moe_shared_mix(y, sl, o, x, gate, n, C);
}
/* A backend whose activations are "not host memory": what the taps ask for is copied out. */
static void bk_to_host(void *host, const void *src, size_t bytes) {
    __atomic_fetch_add(&bk_to_hosts, 1, __ATOMIC_RELAXED);
    memcpy(host, src, bytes);
}
static void *bk_act_alloc(size_t bytes) {
    bk_act_allocs++;
    return mp_fwd_ops_cpu_plain.act_alloc(bytes);
}
/* The counted instance: cpu-plain's ops, the calls of each counted, taps copied to the host. */
static void bk_counted_make(void) {
    bk_counted = mp_fwd_ops_cpu_plain;
    bk_counted.name = "cpu-plain-counted";
    bk_counted.matmul = bk_matmul;
    bk_counted.softmax_row = bk_softmax;
    bk_counted.embed = bk_embed;
    bk_counted.moe_route = bk_moe_route;
    bk_counted.attn_headsum = bk_headsum;
    bk_counted.logits = bk_logits_op;
    bk_counted.swiglu = bk_swiglu;
    bk_counted.rope_table = bk_rope_table;
    bk_counted.add = bk_add;
    bk_counted.copy = bk_copy;
    bk_counted.mask_window = bk_mask_window;
    bk_counted.moe_gather = bk_moe_gather;
    bk_counted.moe_shared_mix = bk_moe_shared_mix;
    bk_counted.to_host = bk_to_host;
    bk_counted.act_alloc = bk_act_alloc;
    bk_matmuls = bk_softmax_rows = bk_embeds = bk_routes = bk_headsums = bk_heads = bk_swiglus = bk_ropetabs = 0;
    bk_adds = bk_copies = bk_masks = bk_gathers = bk_shared = bk_to_hosts = bk_act_allocs = 0;
}
static void *bk_no_alloc(size_t bytes) {
    (void)bytes;
    return NULL;
}

/* logits [T, V] of one run of ids [T] through (compute, ops), copied into out. */
static void bk_logits(MpModel *m, int compute, const MpFwdOps *ops, const int32_t *ids, int T, float *out) {
    MpFwd f;
    MpErr e;
    MpFwdConfig cfg = {.n_layers = m->n_layers, .max_seq = T, .causal = 1, .rope = 1, .logits = 1, .compute = compute, .ops = ops};
    if (mp_fwd_init(&f, m, &cfg, &e) != MP_OK || mp_fwd_run(&f, ids, T, NULL, NULL, &e) != MP_OK) fail_msg("forward: %s", e.msg);
    memcpy(out, f.logits, sizeof(float) * (size_t)T * (size_t)m->vocab);
    mp_fwd_free(&f);
}

static void test_backend_counted_instance(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bk-llama", mp_test_tmpdir());
    MpModel m;
    model_make_open(&m, dir, "--arch llama --layers 3 --vocab 300 --seed 5");
    enum { T = 20 };
    int32_t ids[T];
    for (int t = 0; t < T; t++) ids[t] = (t * 37 + 11) % 300;
    float *a = malloc(sizeof(float) * T * 300), *b = malloc(sizeof(float) * T * 300);
    assert_non_null(a);
    assert_non_null(b);
    bk_counted_make();
    bk_logits(&m, MP_FWD_COMPUTE_F32_PLAIN, NULL, ids, T, a);
    assert_int_equal(bk_matmuls + bk_embeds + bk_heads, 0); /* the built-in instance does not go through the counted one */
    bk_logits(&m, MP_FWD_COMPUTE_F32_PLAIN, &bk_counted, ids, T, b);
    assert_memory_equal(a, b, sizeof(float) * T * 300);
    assert_int_equal(bk_matmuls, 7 * 3);               /* q, k, v, o, gate, up, down per layer (the head's: its own op) */
    assert_int_equal(bk_softmax_rows, 3L * m.n_heads * T); /* every row of every head of every layer */
    assert_int_equal(bk_embeds, 1);                    /* the stage-level ops: one embedding, one head */
    assert_int_equal(bk_heads, 1);
    assert_int_equal(bk_swiglus, 3L * T);              /* the MLP's, a row at a time */
    assert_int_equal(bk_routes, 0);
    assert_int_equal(bk_ropetabs, 1);
    assert_int_equal(bk_adds, 2 * 3);                    /* the two residuals of each layer */
    assert_int_equal(bk_copies, 3L * T * m.n_kv_heads);  /* each value row of each kv head to its head's block */
    assert_int_equal(bk_masks, 0);
    assert_int_equal(bk_act_allocs, 1); /* the activation block through the instance's own allocator */
    assert_int_equal(bk_to_hosts, 0);   /* nothing asked for, nothing copied out */
    /* cpu (fused multiply-adds) is another instance: other bits for the same model */
    bk_logits(&m, MP_FWD_COMPUTE_F32, NULL, ids, T, b);
    assert_true(memcmp(a, b, sizeof(float) * T * 300) != 0);
    print_message("counted instance: %ld matmuls, %ld softmax rows, logits == cpu-plain's\n", bk_matmuls, bk_softmax_rows);
    mp_model_free(&m);
    /* MoE: the routing and the experts' SwiGLU through the instance (qwen2moe: its shared expert too) */
    const char *moe[] = {"--arch mixtral --layers 3 --vocab 300 --seed 6 --experts 4 --experts-used 2",
                         "--arch qwen2moe --layers 3 --vocab 300 --seed 7 --experts 4 --experts-used 2"};
    for (int k = 0; k < 2; k++) {
        snprintf(dir, sizeof dir, "%s/bk-moe%d", mp_test_tmpdir(), k);
        model_make_open(&m, dir, moe[k]);
        bk_counted_make();
        bk_logits(&m, MP_FWD_COMPUTE_F32_PLAIN, NULL, ids, T, a);
        bk_logits(&m, MP_FWD_COMPUTE_F32_PLAIN, &bk_counted, ids, T, b);
        assert_memory_equal(a, b, sizeof(float) * T * 300);
        assert_int_equal(bk_routes, 3);      /* once per layer, every row */
        assert_int_equal(bk_gathers, 3 * 4); /* each expert's rows, once per layer */
        assert_int_equal(bk_shared, 3 * k);  /* qwen2moe's shared expert, once per layer */
        /* each row of each chosen expert's rows, a row at a time (and of the shared expert's) */
        assert_int_equal(bk_swiglus, 3L * T * (2 + k));
        assert_int_equal(bk_heads, 1);
        mp_model_free(&m);
    }
    /* gemma3: its local layers' RoPE table through the instance too (two tables a run) */
    snprintf(dir, sizeof dir, "%s/bk-gemma3", mp_test_tmpdir());
    model_make_open(&m, dir, "--arch gemma3 --layers 6 --vocab 300 --seed 8 --sliding-window 8");
    bk_counted_make();
    bk_logits(&m, MP_FWD_COMPUTE_F32_PLAIN, NULL, ids, T, a);
    bk_logits(&m, MP_FWD_COMPUTE_F32_PLAIN, &bk_counted, ids, T, b);
    assert_memory_equal(a, b, sizeof(float) * T * 300);
    assert_int_equal(bk_ropetabs, 2);
    assert_int_equal(bk_masks, 5L * m.n_heads * T); /* every row of every head of its 5 local layers (T > W = 8) */
    mp_model_free(&m);
    free(a);
    free(b);
}

static void test_backend_refusals(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bk-ref", mp_test_tmpdir());
    MpModel m;
    model_make_open(&m, dir, "--arch qwen3 --layers 2 --vocab 300");
    MpFwd f;
    MpErr e;
    MpFwdOps failing = mp_fwd_ops_cpu;
    failing.alloc = bk_no_alloc;
    MpFwdConfig cfg = {.n_layers = 2, .max_seq = 16, .causal = 1, .rope = 1, .ops = &failing};
    assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_ERR);
    if (!strstr(e.msg, "cannot allocate") || strchr(e.msg, '\n')) fail_msg("failing storage: %s", e.msg);
    cfg.ops = NULL;
    cfg.device = "cuda";
    assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "--device cuda: this version of maskpos has no CUDA backend yet"));
    cfg.device = "tpu9";
    assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_ERR);
    assert_non_null(strstr(e.msg, "tpu9"));
    cfg.device = "cpu";
    assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_OK);
    assert_string_equal(f.ops->name, "cpu");
    mp_fwd_free(&f);
    /* the kernel is the pass's own: MASKPOS_KERNEL=ref for this init, the process-wide choice untouched */
    assert_int_equal(mp_fwd_kernel_set(MP_FWD_KERNEL_SCALAR), MP_FWD_KERNEL_SCALAR);
    setenv("MASKPOS_KERNEL", "ref", 1);
    assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_OK);
    unsetenv("MASKPOS_KERNEL");
    assert_int_equal(f.kernel, MP_FWD_KERNEL_REF);
    assert_int_equal(mp_fwd_kernel_get(), MP_FWD_KERNEL_SCALAR);
    mp_fwd_free(&f);
    mp_fwd_kernel_set(MP_FWD_KERNEL_AUTO);
    mp_model_free(&m);
    /* the commands: one line, exit 2, for probe, logits and generate */
    char out[4096];
    const char *cmds[] = {"probe %s --tokens x.npy --out %s/bk-o --device cuda", "logits %s --tokens 1,2 --device cuda",
                          "generate %s --n 2 --len 4 --device cuda"};
    for (int i = 0; i < 3; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, cmds[i], dir, mp_test_tmpdir());
        int rc = mp_test_run(out, sizeof out, "%s", cmd);
        if (rc != 2 || !strstr(out, "no CUDA backend yet (issue 36 adds it)") || strchr(out, '\n') != strrchr(out, '\n'))
            fail_msg("%s: exit %d: %s", cmd, rc, out);
    }
}

static int bk_taps_seen[8][MP_FWD_NPOINTS], bk_taps_in_place;
static uint64_t bk_taps_hash[8][MP_FWD_NPOINTS];
/* ctx: the MpFwd; counts the taps, hashes their rows, and counts those handed in place (inside
 * the activation block) */
static void bk_capture(void *ctx, int layer, int point, const float *x, int T, int width) {
    const MpFwd *f = ctx;
    if (layer >= 8) return;
    bk_taps_seen[layer][point]++;
    bk_taps_in_place += x >= f->ablock && x < f->ablock + f->afloats;
    uint64_t h = 1469598103934665603ULL;
    const unsigned char *b = (const unsigned char *)x;
    for (size_t i = 0; i < sizeof(float) * (size_t)T * (size_t)width; i++) h = (h ^ b[i]) * 1099511628211ULL;
    bk_taps_hash[layer][point] = h;
}

static void test_backend_taps_asked_before(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bk-taps", mp_test_tmpdir());
    MpModel m;
    model_make_open(&m, dir, "--arch llama --layers 3 --vocab 300");
    const int32_t ids[6] = {1, 2, 3, 4, 5, 6};
    uint64_t asked[2] = {0, 0}; /* pass 1's hashes of the two points asked, for pass 2 */
    /* pass 0: every tap; 1: two asked, cpu-plain (in place); 2: the same through a backend that
     * copies them to the host (the counted instance's to_host): the same rows, out of its block */
    for (int pass = 0; pass < 3; pass++) {
        MpFwd f;
        MpErr e;
        MpFwdConfig cfg = {.n_layers = 3, .max_seq = 6, .causal = 1, .rope = 1, .logits = 1, .compute = MP_FWD_COMPUTE_F32_PLAIN};
        if (pass) cfg.tap_layers = UINT64_C(1) << 1, cfg.tap_points = 1u << MP_FWD_AT_Q | 1u << MP_FWD_AT_LAYER_OUT;
        if (pass == 2) bk_counted_make(), cfg.ops = &bk_counted;
        assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_OK);
        memset(bk_taps_seen, 0, sizeof bk_taps_seen);
        bk_taps_in_place = 0;
        f.capture = bk_capture;
        f.capture_ctx = &f;
        assert_int_equal(mp_fwd_run(&f, ids, 6, NULL, NULL, &e), MP_OK);
        for (int l = 0; l < 3; l++)
            for (int p = 0; p < MP_FWD_NPOINTS; p++) {
                const int want = !pass || (l == 1 && (p == MP_FWD_AT_Q || p == MP_FWD_AT_LAYER_OUT));
                if (bk_taps_seen[l][p] != want) fail_msg("pass %d: layer %d point %d seen %d times, want %d", pass, l, p, bk_taps_seen[l][p], want);
            }
        if (pass == 1) {
            assert_int_equal(bk_taps_in_place, 2);
            asked[0] = bk_taps_hash[1][MP_FWD_AT_Q], asked[1] = bk_taps_hash[1][MP_FWD_AT_LAYER_OUT];
        }
        if (pass == 2) {
            assert_int_equal(bk_taps_in_place, 0);
            assert_int_equal(bk_to_hosts, 2); /* the two points asked, nothing else */
            assert_true(asked[0] == bk_taps_hash[1][MP_FWD_AT_Q] && asked[1] == bk_taps_hash[1][MP_FWD_AT_LAYER_OUT]);
        }
        mp_fwd_free(&f);
    }
    mp_model_free(&m);
}

/* The reduced map: the head sums (double, heads ascending) of every row block, handed over by the
 * forward pass itself (MpFwd.rows_headsum), equal bit for bit the sums this test forms from the
 * raw score rows (rows_hook.rows); with tap_layers only the layer asked for is delivered; a
 * reduced map not planned at init is refused. */
enum { HS_L = 3, HS_T = 40 };
static double hs_raw[HS_L][HS_T][HS_T], hs_red[HS_L][HS_T][HS_T];
static int hs_calls[HS_L];
static void hs_rows(void *ctx, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker) {
    (void)ctx, (void)worker;
    for (int i = i0; i < i1; i++)
        for (int j = 0; j <= i; j++) {
            double acc = 0.0;
            for (int h = 0; h < n_heads; h++) acc += (double)scores[((size_t)h * T + i) * T + j];
            hs_raw[layer][i][j] = acc;
        }
}
static void hs_sum(void *ctx, int layer, const double *hs, int T, int i0, int i1, int worker) {
    (void)ctx, (void)worker;
    hs_calls[layer]++;
    for (int i = i0; i < i1; i++)
        for (int j = 0; j <= i; j++) hs_red[layer][i][j] = hs[(size_t)(i - i0) * T + j];
}
static void hs_done(void *ctx, int layer) { (void)ctx, (void)layer; }

static void test_backend_reduced_map(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/bk-hs", mp_test_tmpdir());
    MpModel m;
    model_make_open(&m, dir, "--arch qwen2 --layers 3 --vocab 300 --seed 9");
    int32_t ids[HS_T];
    for (int t = 0; t < HS_T; t++) ids[t] = (t * 53 + 7) % 300;
    memset(hs_raw, 0, sizeof hs_raw);
    memset(hs_red, 0, sizeof hs_red);
    for (int pass = 0; pass < 3; pass++) {
        MpFwd f;
        MpErr e;
        MpFwdConfig cfg = {.n_layers = HS_L, .max_seq = HS_T, .causal = 1, .rope = 1, .tap_headsum_workers = pass ? 1 : 0};
        if (pass) bk_counted_make(), cfg.compute = MP_FWD_COMPUTE_F32_PLAIN, cfg.ops = pass == 1 ? &bk_counted : NULL;
        if (!pass) cfg.compute = MP_FWD_COMPUTE_F32_PLAIN;
        if (pass == 2) cfg.tap_layers = UINT64_C(1) << 2;
        assert_int_equal(mp_fwd_init(&f, &m, &cfg, &e), MP_OK);
        f.rows_hook = (MpFwdRowsHook){pass ? NULL : hs_rows, hs_done, NULL, 1};
        if (pass) f.rows_headsum = hs_sum;
        memset(hs_calls, 0, sizeof hs_calls);
        if (pass == 2) memset(hs_red, 0, sizeof hs_red);
        assert_int_equal(mp_fwd_run(&f, ids, HS_T, NULL, NULL, &e), MP_OK);
        if (pass == 1) {
            assert_memory_equal(hs_raw, hs_red, sizeof hs_raw);
            assert_int_equal(bk_headsums, HS_L * ((HS_T + 15) / 16)); /* the backend's op, every block of every layer */
            assert_int_equal(bk_to_hosts, HS_L * ((HS_T + 15) / 16)); /* each block copied out, nothing else */
        }
        if (pass == 2) {
            assert_int_equal(hs_calls[0] + hs_calls[1], 0);
            assert_int_equal(hs_calls[2], (HS_T + 15) / 16);
            assert_memory_equal(hs_raw[2], hs_red[2], sizeof hs_raw[2]);
            f.rows_hook.workers = 2; /* more workers than planned */
            assert_int_equal(mp_fwd_run(&f, ids, HS_T, NULL, NULL, &e), MP_ERR);
            assert_non_null(strstr(e.msg, "tap_headsum_workers"));
        }
        mp_fwd_free(&f);
    }
    mp_model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fwd_overflow_named),
        cmocka_unit_test(test_against_torch),
        cmocka_unit_test(test_hf_gguf_equivalent),
        cmocka_unit_test(test_bidirectional_identical_tokens_relative),
        cmocka_unit_test(test_threads_bit_identical),
        cmocka_unit_test(test_backend_counted_instance),
        cmocka_unit_test(test_backend_refusals),
        cmocka_unit_test(test_backend_taps_asked_before),
        cmocka_unit_test(test_backend_reduced_map),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
