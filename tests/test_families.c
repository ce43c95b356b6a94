/* test_families.c — the model families beyond Llama (olmo2, ...) read from the PUBLISHED
 * configurations of real models (tests/fixtures/configs/, one JSON file each, values as released on the Hub):
 *   - `maskpos inspect CONFIG.json` prints the parameter count the configuration implies, which
 *     must equal the count published for the model (exact where the publisher states it exactly,
 *     e.g. Pythia's table; else the sum of the released tensors' shapes, checked here by hand);
 *   - the probe memory estimate (mp_fwd_plan_bytes, what `probe --max-mem-gib` compares) holds the
 *     f32 weights of the probed layers, checked against the per-layer count worked out by hand;
 *   - an unknown model_type / GGUF architecture is one line naming it and listing the supported.
 * The forward passes themselves are checked in test_model_fwd.c (torch) and test_model_oracle.c
 * (llama.cpp).
 */
#include "test_load_util.h"
#include "test_model_util.h" /* model_make, ids_write */

#include "model/fwd.h" /* mp_fwd_plan_bytes */

#define FIX MP_SOURCE_DIR "/tests/fixtures/configs/"

typedef struct Published {
    const char *file;        /* fixture */
    const char *arch;        /* architecture inspect must print */
    uint64_t params;         /* published total parameters */
    uint64_t layer_params;   /* one decoder layer, worked out by hand from the configuration */
} Published;

static const Published published[] = {
    /* Gemma 2 (tied: the embedding counted once): 2,614,341,888 and 9,241,705,984; layer = q, o
     * 2 x C x NH*HS, k, v 2 x C x NKV*HS, GeGLU 3 x C x FF, four norms 4C */
    {"gemma-2-2b.json", "gemma2", 2614341888ull, 2ull * 2304 * 2048 + 2ull * 2304 * 1024 + 3ull * 2304 * 9216 + 4 * 2304},
    {"gemma-2-9b.json", "gemma2", 9241705984ull, 2ull * 3584 * 4096 + 2ull * 3584 * 2048 + 3ull * 3584 * 14336 + 4 * 3584},
    /* Gemma 3 (text model; tied): 999,885,952 for 1b; 4b's language model 3,880,263,168 (the
     * checkpoint adds the SigLIP vision tower); layer as Gemma 2 + per-head q/k norms 2 x 256 */
    {"gemma-3-1b.json", "gemma3", 999885952ull, 2ull * 1152 * 1024 + 2ull * 1152 * 256 + 3ull * 1152 * 6912 + 4 * 1152 + 2 * 256},
    {"gemma-3-4b.json", "gemma3", 3880263168ull, 2ull * 2560 * 2048 + 2ull * 2560 * 1024 + 3ull * 2560 * 10240 + 4 * 2560 + 2 * 256},
    /* Gemma (1) 2b: 2,506,172,416 (tied); layer = q, o 2 x 2048 x 2048, k, v 2 x 2048 x 256, GeGLU
     * 3 x 2048 x 16384, two norms */
    {"gemma-2b.json", "gemma", 2506172416ull, 2ull * 2048 * 2048 + 2ull * 2048 * 256 + 3ull * 2048 * 16384 + 2 * 2048},
    /* OLMo-2-1124-7B: "7.3B"; exact = 2 x 100352 x 4096 (embed, lm_head) + 4096 (final norm) +
     * 32 x layer; layer = 4 x 4096^2 (q, k, v, o) + 3 x 4096 x 11008 (MLP) + 4 x 4096 (q/k norms
     * over the whole projection, two post-norms) */
    /* Pythia (EleutherAI's table of total parameters: 162,322,944 and 11,846,072,320); layer =
     * query_key_value 3C x C + 3C, dense C x C + C, MLP 2 x C x 4C + 4C + C, two LayerNorms 4C */
    {"pythia-160m.json", "gptneox", 162322944ull, 4ull * 768 * 768 + 4 * 768 + 2ull * 768 * 3072 + 3072 + 768 + 4 * 768},
    {"pythia-12b.json", "gptneox", 11846072320ull, 4ull * 5120 * 5120 + 4 * 5120 + 2ull * 5120 * 20480 + 20480 + 5120 + 4 * 5120},
    {"olmo2-1124-7b.json", "olmo2", 7298617344ull, 4ull * 4096 * 4096 + 3ull * 4096 * 11008 + 4 * 4096},
};

static uint64_t json_line_u64(const char *out, const char *key) {
    const char *p = strstr(out, key);
    if (!p) fail_msg("'%s' not in inspect output:\n%s", key, out);
    return strtoull(p + strlen(key), NULL, 10);
}

static void test_published_configs(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof published / sizeof published[0]; i++) {
        const Published *p = &published[i];
        char out[16384], path[1024], want[128];
        snprintf(path, sizeof path, FIX "%s", p->file);
        int rc = mp_test_run(out, sizeof out, "inspect %s --layers 2 --seq 512 --json", path);
        if (rc != 0) fail_msg("inspect %s: %s", p->file, out);
        snprintf(want, sizeof want, "\"architecture\": \"%s\"", p->arch);
        if (!strstr(out, want)) fail_msg("%s: no %s in\n%s", p->file, want, out);
        const uint64_t n = json_line_u64(out, "\"parameters\": ");
        print_message("%-24s parameters %llu (published %llu)\n", p->file, (unsigned long long)n, (unsigned long long)p->params);
        if (n != p->params) fail_msg("%s: inspect counts %llu parameters, published %llu", p->file, (unsigned long long)n, (unsigned long long)p->params);
        const uint64_t wb = json_line_u64(out, "\"weights_bytes\": ");
        if (wb != 2 * p->layer_params * 4) fail_msg("%s: probe weights of 2 layers %llu bytes, by hand %llu", p->file, (unsigned long long)wb, (unsigned long long)(2 * p->layer_params * 4));
        /* the forward pass's own plan (probe's expected peak): the same weights up to the
         * 64-byte alignment of each packed piece */
        MpModel m;
        MpErr e;
        if (mp_model_open_config(&m, path, &e) != MP_OK) fail_msg("%s", e.msg);
        MpFwdConfig cfg = {.n_layers = 2, .max_seq = 512, .causal = 1, .rope = 1};
        uint64_t w, a;
        mp_fwd_plan_bytes(&m, &cfg, &w, &a);
        const double rel = fabs((double)w - 2.0 * p->layer_params * 4) / (2.0 * p->layer_params * 4);
        print_message("%-24s probe plan: weights %.1f MiB (by hand %.1f MiB), activations %.1f MiB\n", p->file, w / 1048576.0,
                      2.0 * p->layer_params * 4 / 1048576.0, a / 1048576.0);
        if (!(w >= 2 * p->layer_params * 4 && rel < 1e-4)) fail_msg("%s: forward plan %llu bytes of weights", p->file, (unsigned long long)w);
        mp_model_free(&m);
    }
    /* Gemma 2's scales from the published values: sqrt(2304) = 48, query_pre_attn_scalar 256 */
    char out[16384];
    assert_int_equal(mp_test_run(out, sizeof out, "inspect %s", FIX "gemma-2-2b.json"), 0);
    if (!strstr(out, "embeddings x 48, attention scale 0.0625, soft-capping 50 (scores) / 30 (logits)"))
        fail_msg("gemma-2-2b scales:\n%s", out);
    /* Gemma 3 4b from the multimodal config's sparse text_config: Gemma3TextConfig's defaults
     * (8 heads, 4 kv, head_dim 256, vocab 262208), sqrt(2560) = 50.596 rounded to bf16 = 50.5
     * as Gemma3TextScaledWordEmbedding does in the checkpoint's dtype; global RoPE linear x8
     * (theta 1e6), local layers (all but every 6th: 29 of 34, window 1024) base 10000 unscaled */
    assert_int_equal(mp_test_run(out, sizeof out, "inspect %s", FIX "gemma-3-4b.json"), 0);
    if (!strstr(out, "embeddings x 50.5,") || !strstr(out, "heads:          8 query, 4 key/value (GQA group 2), head_dim 256") ||
        !strstr(out, "sliding window: 1024") || !strstr(out, "local layers:   29 of 34 (RoPE base 10000)") || !strstr(out, "scaling linear (factor 8)"))
        fail_msg("gemma-3-4b:\n%s", out);
}

/* probe on a soft-capped Gemma 2 says in meta.json that the maps hold the capped scores */
static void test_softcap_meta(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char model[512], ids[512], out[8192], meta[512];
    snprintf(model, sizeof model, "%s/g2", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    model_make(model, "--arch gemma2 --layers 2 --vocab 300 --attn-softcap 1.5");
    ids_write(ids, 2, 16, 300, -1, 3);
    if (mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/p --quiet", model, ids, d) != 0) fail_msg("probe: %s", out);
    snprintf(meta, sizeof meta, "%s/p/meta.json", d);
    size_t n;
    uint8_t *b = lt_slurp(meta, &n);
    b[n] = 0;
    if (!strstr((char *)b, "\"scores_are\": \"soft-capped") || !strstr((char *)b, "\"attn_softcap\": 1.5")) fail_msg("meta.json: %s", (char *)b);
    free(b);
}

/* Unknown families: one line naming the type and listing what is supported, exit 2. */
static void test_unknown_family(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char cfg[512], out[4096];
    snprintf(cfg, sizeof cfg, "%s/config.json", d);
    FILE *f = fopen(cfg, "w");
    assert_non_null(f);
    fputs("{\"model_type\": \"falcon_mamba\", \"hidden_size\": 64}", f);
    fclose(f);
    int rc = mp_test_run(out, sizeof out, "inspect %s", cfg);
    assert_int_equal(rc, 2);
    if (!strstr(out, "falcon_mamba") || !strstr(out, "olmo2") || !strstr(out, "llama") || strchr(out, '\n') != strrchr(out, '\n'))
        fail_msg("unknown model_type message: %s", out);
    /* GGUF: an olmo2 file whose architecture is renamed (same length) */
    char gg[512];
    snprintf(gg, sizeof gg, "%s/x.gguf", d);
    MpMkSpec s;
    mp_mk_spec_default(&s);
    s.arch = MP_ARCH_OLMO2;
    s.format = MP_FORMAT_GGUF;
    s.vocab = 300;
    lt_mk(&s, gg);
    size_t n;
    uint8_t *b = lt_slurp(gg, &n);
    int hits = 0;
    for (size_t i = 0; i + 5 <= n; i++)
        if (!memcmp(b + i, "olmo2", 5)) {
            memcpy(b + i, "zzzz9", 5);
            hits++;
        }
    assert_true(hits > 0);
    f = fopen(gg, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
    free(b);
    rc = mp_test_run(out, sizeof out, "inspect %s", gg);
    assert_int_equal(rc, 2);
    if (!strstr(out, "zzzz9") || !strstr(out, "olmo2") || strchr(out, '\n') != strrchr(out, '\n'))
        fail_msg("unknown GGUF architecture message: %s", out);
    print_message("unknown families: %s", out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_published_configs),
        cmocka_unit_test(test_unknown_family),
        cmocka_unit_test(test_softcap_meta),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
