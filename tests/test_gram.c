/* test_gram.c — `maskpos gram` (src/train/gram.c, src/cli/cmd_gram.c) against tests/ref/gram_ref.py,
 * an independent torch recomputation of the nine matrices from the same checkpoint and tokens:
 *   - a RoPE model at layer 2 → 3 (two chunks of sequences), the same with --no-rope, and a NoPE
 *     model (config "no_rope_layers") at layer 1 → 2;
 *   - outputs: gram.npy [9, S, S] with NaN exactly above the diagonal of (b) and (i), tokens.npy,
 *     meta.json, the figure with --plot;
 *   - other architectures (qwen3 q/k norms, qwen2 biases, phi3 fused tensors, a GGUF llama with
 *     permuted Q/K rows; random weights by `maskpos mkmodel`): (b) and (i) equal the mean
 *     pre-softmax scores of `maskpos probe` (src/model/, tested against HF) at layers l and l+1;
 *   - bad input exits 2 with one line.
 */
#include "testutil.h"

#include "core/npy.h"  /* mp_npy_read/write: gram.npy, scores.npy, tokens */
#include "core/util.h" /* mp_file_exists */

#define FIXTURE MP_SOURCE_DIR "/data/fixtures/train/tiny.txt"

static void train_tiny(const char *dir, const char *extra) {
    char out[8192];
    int rc = mp_test_run(out, sizeof out,
                         "train --layers 3 --dim 16 --heads 4 --kv-heads 2 --ffn 32 --seq 16 --batch 4 --steps 5 "
                         "--checkpoint-every 5 --quiet --threads 1 --data %s --out %s %s",
                         FIXTURE, dir, extra);
    if (rc) fail_msg("train: %s", out);
}

static void check_against_torch(const char *ckpt, const char *gdir, int layer, int no_rope) {
    char out[8192];
    int rc = mp_test_shell(out, sizeof out, "/usr/bin/python3 %s/tests/ref/gram_ref.py %s %s --layer %d %s", MP_SOURCE_DIR,
                           ckpt, gdir, layer, no_rope ? "--no-rope" : "");
    print_message("%s", out);
    if (rc != 0) fail_msg("torch reference disagrees (%s layer %d)", ckpt, layer);
}

static void test_rope_model(void **state) {
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0) skip();
    const char *d = mp_test_tmpdir();
    train_tiny(d, "");
    char out[8192], ck[600], path[700];
    snprintf(ck, sizeof ck, "%s/step-000005", d);
    int rc = mp_test_run(out, sizeof out, "gram %s --layer 2 --data %s --seq 10 --n 40 --out %s/g --plot", ck, FIXTURE, d);
    if (rc) fail_msg("gram: %s", out);
    assert_non_null(strstr(out, "RoPE on/on"));
    snprintf(path, sizeof path, "%s/g", d);
    check_against_torch(ck, path, 2, 0);
    /* file shapes and the NaN pattern */
    MpNpy a;
    MpErr e;
    snprintf(path, sizeof path, "%s/g/gram.npy", d);
    assert_int_equal(mp_npy_read(path, &a, &e), MP_OK);
    assert_int_equal(a.ndim, 3);
    assert_true(a.shape[0] == 9 && a.shape[1] == 10 && a.shape[2] == 10);
    const double *g = a.data;
    for (int k = 0; k < 9; k++)
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 10; j++) {
                int masked = (k == 1 || k == 8) && j > i;
                assert_int_equal(isnan(g[(k * 10 + i) * 10 + j]) != 0, masked);
            }
    mp_npy_free(&a);
    snprintf(path, sizeof path, "%s/g/tokens.npy", d);
    assert_int_equal(mp_npy_read(path, &a, &e), MP_OK);
    assert_true(a.dtype == MP_DT_I32 && a.shape[0] == 40 && a.shape[1] == 10);
    mp_npy_free(&a);
    snprintf(path, sizeof path, "%s/g/gram.png", d);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    snprintf(path, sizeof path, "%s/g/meta.json", d);
    assert_true(mp_file_exists(path));
    /* counterfactual: RoPE off */
    rc = mp_test_run(out, sizeof out, "gram %s --layer 1 --no-rope --data %s --seq 9 --n 5 --out %s/g2", ck, FIXTURE, d);
    if (rc) fail_msg("gram --no-rope: %s", out);
    assert_non_null(strstr(out, "RoPE off/off"));
    snprintf(path, sizeof path, "%s/g2", d);
    check_against_torch(ck, path, 1, 1);
}

static void test_nope_model(void **state) {
    (void)state;
    if (access("/usr/bin/python3", X_OK) != 0) skip();
    const char *d = mp_test_tmpdir();
    train_tiny(d, "--pos none --tie");
    char out[8192], ck[600], path[700];
    snprintf(ck, sizeof ck, "%s/step-000005", d);
    int rc = mp_test_run(out, sizeof out, "gram %s --layer 1 --data %s --seq 12 --n 6 --out %s/g", ck, FIXTURE, d);
    if (rc) fail_msg("gram: %s", out);
    assert_non_null(strstr(out, "RoPE off/off")); /* read from config.json "no_rope_layers" */
    snprintf(path, sizeof path, "%s/g", d);
    check_against_torch(ck, path, 1, 0);
}

static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

/* The NoPE marker travels from `train --pos none` through the loader (MpModel.rope_layer) to
 * inspect and the forward pass: probe of a NoPE checkpoint equals probe --no-rope byte for byte,
 * while for a RoPE checkpoint the two differ (so the comparison can fail). */
static void test_nope_checkpoint_in_loader_and_probe(void **state) {
    (void)state;
    char out[8192], ck[600], tok[700], p1[700], p2[700];
    int32_t ids[4 * 12];
    for (int i = 0; i < 4 * 12; i++) ids[i] = (i * 37 + 11) % 256;
    int64_t shp[2] = {4, 12};
    MpErr e;
    for (int pos = 0; pos < 2; pos++) {
        const char *d = mp_test_tmpdir();
        train_tiny(d, pos ? "--pos rope" : "--pos none");
        snprintf(ck, sizeof ck, "%s/step-000005", d);
        snprintf(tok, sizeof tok, "%s/tok.npy", d);
        assert_int_equal(mp_npy_write(tok, MP_DT_I32, ids, 2, shp, &e), MP_OK);
        assert_int_equal(mp_test_run(out, sizeof out, "inspect %s", ck), 0);
        if (pos) assert_null(strstr(out, "NoPE"));
        else assert_non_null(strstr(out, "no positional encoding (NoPE) in 3 of 3 layers"));
        assert_int_equal(mp_test_run(out, sizeof out, "probe %s --tokens %s --layers all --out %s/a --quiet", ck, tok, d), 0);
        assert_int_equal(mp_test_run(out, sizeof out, "probe %s --tokens %s --layers all --no-rope --out %s/b --quiet", ck, tok, d), 0);
        snprintf(p1, sizeof p1, "%s/a/scores.npy", d);
        snprintf(p2, sizeof p2, "%s/b/scores.npy", d);
        if (pos) assert_false(files_equal(p1, p2));
        else assert_true(files_equal(p1, p2));
    }
}

/* (b), (i) against `maskpos probe`: the same mean pre-softmax scores from an independent forward
 * pass. Tolerance 1e-5 absolute (scores of order 0.5; both f32 with different summation orders;
 * measured ~3e-7). */
static void test_matches_probe(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char out[8192], path[700];
    int32_t tok[8 * 20];
    for (int i = 0; i < 8 * 20; i++) tok[i] = (i * 7) % 300;
    int64_t shp[2] = {8, 20};
    MpErr e;
    snprintf(path, sizeof path, "%s/tok.npy", d);
    assert_int_equal(mp_npy_write(path, MP_DT_I32, tok, 2, shp, &e), MP_OK);
    const char *models[][2] = {{"qwen3", "--arch qwen3"}, {"qwen2", "--arch qwen2"}, {"phi3", "--arch phi3"},
                               {"llama.gguf", "--arch llama --format gguf"}};
    for (int k = 0; k < 4; k++) {
        int rc = mp_test_run(out, sizeof out, "mkmodel %s --layers 3 --dim 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 300 %s/%s",
                             models[k][1], d, models[k][0]);
        if (rc) fail_msg("mkmodel: %s", out);
        rc = mp_test_run(out, sizeof out, "gram %s/%s --layer 2 --tokens %s/tok.npy --seq 16 --n 8 --out %s/g%d", d,
                         models[k][0], d, d, k);
        if (rc) fail_msg("gram: %s", out);
        rc = mp_test_run(out, sizeof out, "probe %s/%s --tokens %s/tok.npy --seq 16 --n 8 --layers 1-3 --quiet --out %s/p%d",
                         d, models[k][0], d, d, k);
        if (rc) fail_msg("probe: %s", out);
        MpNpy g, p;
        snprintf(path, sizeof path, "%s/g%d/gram.npy", d, k);
        assert_int_equal(mp_npy_read(path, &g, &e), MP_OK);
        snprintf(path, sizeof path, "%s/p%d/scores.npy", d, k);
        assert_int_equal(mp_npy_read(path, &p, &e), MP_OK);
        assert_true(p.ndim == 3 && p.shape[0] == 3 && p.shape[1] == 16);
        const double *gm = g.data, *pm = p.data;
        double worst = 0;
        for (int which = 0; which < 2; which++) {
            const double *a = gm + (size_t)(which ? 8 : 1) * 256, *b = pm + (size_t)(which ? 2 : 1) * 256;
            double dlt = mp_test_max_abs_diff(a, b, 256);
            if (dlt > worst) worst = dlt;
        }
        print_message("%-10s (b), (i) vs probe layers 2, 3: max |diff| %.2e\n", models[k][0], worst);
        if (!(worst < 1e-5)) fail_msg("%s: gram scores differ from probe by %g", models[k][0], worst);
        mp_npy_free(&g);
        mp_npy_free(&p);
    }
}

static void test_bad_inputs(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    train_tiny(d, "");
    char out[8192];
    int rc = mp_test_run(out, sizeof out, "gram %s/step-000005 --layer 3 --data %s --out %s/g", d, FIXTURE, d);
    assert_int_equal(rc, 2); /* layer 3 needs layer 4 */
    assert_non_null(strstr(out, "layers"));
    rc = mp_test_run(out, sizeof out, "gram %s/step-000005 --layer 1 --out %s/g", d, d);
    assert_int_equal(rc, 2); /* no --data */
    rc = mp_test_run(out, sizeof out, "gram %s/nothing --data %s --out %s/g", d, FIXTURE, d);
    assert_int_equal(rc, 2);
    rc = mp_test_run(out, sizeof out, "gram %s/step-000005 --data %s --seq 5000 --out %s/g", d, FIXTURE, d);
    assert_int_equal(rc, 2); /* fewer bytes than --seq */
    rc = mp_test_run(out, sizeof out, "gram %s/step-000005 --data %s --seq 0 --out %s/g", d, FIXTURE, d);
    assert_int_equal(rc, 2);
    rc = mp_test_run(out, sizeof out, "gram --help");
    assert_int_equal(rc, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_model),
        cmocka_unit_test(test_nope_model),
        cmocka_unit_test(test_nope_checkpoint_in_loader_and_probe),
        cmocka_unit_test(test_matches_probe),
        cmocka_unit_test(test_bad_inputs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
