/* test_load_gguf.c — GGUF: every metadata value type through writer and reader, HF vs GGUF from
 * the same seed (bit-identical f32 for f32/f16/bf16, every arch, llama Q/K permutation undone,
 * RoPE tables equal), quantised GGUF models, and malformed files (exit 2, one line naming the
 * file and the tensor or key).
 * Run: make test (or build/tests/test_load_gguf). */
#include "test_load_util.h"

#include "load/gguf.h" /* MpGguf, MpGgufWriter */

/* Patch with byte literals that may hold NULs (sizeof, not strlen). */
#define PATCHB(path, from, to) (assert_int_equal(sizeof(from), sizeof(to)), lt_patchn((path), (from), (to), sizeof(from) - 1))

/* ---------------------------------------------------------------- metadata types */

static void test_metadata_types(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char path[256];
    snprintf(path, sizeof path, "%s/kv.gguf", d);
    MpGgufWriter w;
    mp_gguf_writer_init(&w, 64);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    uint32_t u32 = 4000000000u;
    int32_t i32 = -2000000000;
    float f32 = 1.5f;
    uint64_t u64 = 10000000000000ull;
    int64_t i64 = -10000000000000ll;
    double f64 = -2.25;
    mp_gguf_w_scalar(&w, "t.u8", MP_GGUF_UINT8, &u8);
    mp_gguf_w_scalar(&w, "t.i8", MP_GGUF_INT8, &i8);
    mp_gguf_w_scalar(&w, "t.u16", MP_GGUF_UINT16, &u16);
    mp_gguf_w_scalar(&w, "t.i16", MP_GGUF_INT16, &i16);
    mp_gguf_w_scalar(&w, "t.u32", MP_GGUF_UINT32, &u32);
    mp_gguf_w_scalar(&w, "t.i32", MP_GGUF_INT32, &i32);
    mp_gguf_w_scalar(&w, "t.f32", MP_GGUF_FLOAT32, &f32);
    mp_gguf_w_bool(&w, "t.bool", 1);
    mp_gguf_w_str(&w, "t.str", "héllo");
    mp_gguf_w_scalar(&w, "t.u64", MP_GGUF_UINT64, &u64);
    mp_gguf_w_scalar(&w, "t.i64", MP_GGUF_INT64, &i64);
    mp_gguf_w_scalar(&w, "t.f64", MP_GGUF_FLOAT64, &f64);
    int16_t arr[3] = {-1, 2, -3};
    mp_gguf_w_arr(&w, "t.arr_i16", MP_GGUF_INT16, arr, 3);
    const char *strs[3] = {"a", "", "ccc"};
    mp_gguf_w_arr_str(&w, "t.arr_str", strs, 3);
    mp_gguf_w_u32(&w, "general.alignment", 64);
    int64_t ne[2] = {32, 3};
    size_t nb = mp_gguf_w_tensor(&w, "x", 2, ne, MP_WT_Q8_0);
    assert_int_equal(nb, 3 * 34);
    int64_t ne1[1] = {5};
    assert_int_equal(mp_gguf_w_tensor(&w, "y", 1, ne1, MP_WT_F32), 20);
    FILE *f = fopen(path, "wb");
    MpErr e;
    assert_int_equal(mp_gguf_w_header(&w, f, &e), MP_OK);
    uint8_t data[102];
    memset(data, 0x11, sizeof data);
    fwrite(data, 1, nb, f);
    mp_gguf_w_pad(&w, f, nb, &e);
    float yv[5] = {1, 2, 3, 4, 5};
    fwrite(yv, 4, 5, f);
    mp_gguf_w_pad(&w, f, 20, &e);
    fclose(f);
    mp_gguf_writer_free(&w);

    MpGguf g;
    if (mp_gguf_open(&g, path, &e) != MP_OK) fail_msg("%s", e.msg);
    assert_int_equal(g.version, 3);
    assert_int_equal(g.alignment, 64);
    assert_int_equal(g.data_start % 64, 0);
    int64_t v;
    double x;
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.u8"), &v), MP_OK);
    assert_int_equal(v, 200);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.i8"), &v), MP_OK);
    assert_int_equal(v, -100);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.u16"), &v), MP_OK);
    assert_int_equal(v, 60000);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.i16"), &v), MP_OK);
    assert_int_equal(v, -30000);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.u32"), &v), MP_OK);
    assert_int_equal(v, 4000000000ll);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.i32"), &v), MP_OK);
    assert_int_equal(v, -2000000000ll);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.u64"), &v), MP_OK);
    assert_true(v == 10000000000000ll);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.i64"), &v), MP_OK);
    assert_true(v == -10000000000000ll);
    assert_int_equal(mp_gguf_kv_num(mp_gguf_find(&g, "t.f32"), &x), MP_OK);
    assert_true(x == 1.5);
    assert_int_equal(mp_gguf_kv_num(mp_gguf_find(&g, "t.f64"), &x), MP_OK);
    assert_true(x == -2.25);
    assert_int_equal(mp_gguf_find(&g, "t.bool")->type, MP_GGUF_BOOL);
    assert_int_equal(mp_gguf_find(&g, "t.bool")->u, 1);
    assert_int_equal(mp_gguf_kv_int(mp_gguf_find(&g, "t.f32"), &v), MP_ERR); /* type mismatch */
    char s[16];
    assert_int_equal(mp_gguf_kv_str(mp_gguf_find(&g, "t.str"), s, sizeof s), MP_OK);
    assert_string_equal(s, "héllo");
    assert_int_equal(mp_gguf_kv_str(mp_gguf_find(&g, "t.str"), s, 4), MP_ERR); /* too long */
    const MpGgufKv *a = mp_gguf_find(&g, "t.arr_i16");
    assert_int_equal(a->arr_n, 3);
    assert_int_equal(mp_gguf_arr_num(a, 2, &x), MP_OK);
    assert_true(x == -3);
    assert_int_equal(mp_gguf_arr_num(a, 3, &x), MP_ERR);
    const MpGgufKv *as = mp_gguf_find(&g, "t.arr_str");
    size_t cur[2] = {0, 0};
    const uint8_t *sp;
    uint64_t len;
    assert_int_equal(mp_gguf_arr_next_str(as, cur, &sp, &len), MP_OK);
    assert_true(len == 1 && sp[0] == 'a');
    assert_int_equal(mp_gguf_arr_next_str(as, cur, &sp, &len), MP_OK);
    assert_true(len == 0);
    assert_int_equal(mp_gguf_arr_next_str(as, cur, &sp, &len), MP_OK);
    assert_true(len == 3 && !memcmp(sp, "ccc", 3));
    assert_int_equal(mp_gguf_arr_next_str(as, cur, &sp, &len), MP_ERR);
    const MpGgufTensor *t = mp_gguf_find_tensor(&g, "x"), *ty = mp_gguf_find_tensor(&g, "y");
    assert_true(t->ne[0] == 32 && t->ne[1] == 3 && t->type == MP_WT_Q8_0 && t->nbytes == 102);
    assert_int_equal(ty->offset, 128); /* 102 aligned to 64 */
    float got[5];
    mp_quant_dequant(got, ty->data, MP_WT_F32, 5);
    assert_memory_equal(got, yv, sizeof yv);
    mp_gguf_free(&g);
}

/* ---------------------------------------------------------------- HF vs GGUF */

/* this file's models: 2 layers, seed 11 */
static MpMkSpec spec(MpArch arch, MpFormat fmt, MpWType dt) { return lt_spec(arch, fmt, dt, 2, 11); }

static void test_hf_vs_gguf_bit_identical(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char hf[256], gg[256];
    int variants = 0;
    for (int a = 0; a < MP_ARCH_COUNT; a++) {
        MpWType dts[3] = {MP_WT_F32, MP_WT_F16, MP_WT_BF16};
        for (int k = 0; k < 3; k++) {
            MpMkSpec s = spec((MpArch)a, MP_FORMAT_HF, dts[k]);
            if (a == MP_ARCH_LLAMA && k == 0) s.rope_scaling = MP_ROPE_LLAMA3;
            if (a == MP_ARCH_LLAMA && k == 1) s.tie = 1;
            if (a == MP_ARCH_MISTRAL) s.kv_heads = 1;
            if (a == MP_ARCH_QWEN3) s.head_dim = 32;
            if (a == MP_ARCH_PHI3 && k != 1) {
                s.rope_scaling = MP_ROPE_LONGROPE;
                s.partial_rotary = 0.75;
            }
            snprintf(hf, sizeof hf, "%s/%d-%d", d, a, k);
            snprintf(gg, sizeof gg, "%s/%d-%d.gguf", d, a, k);
            lt_mk(&s, hf);
            s.format = MP_FORMAT_GGUF;
            lt_mk(&s, gg);
            MpModel x, y;
            lt_open(&x, hf);
            lt_open(&y, gg);
            assert_int_equal(y.format, MP_FORMAT_GGUF);
            assert_int_equal(x.n_layers, y.n_layers);
            assert_int_equal(x.head_dim, y.head_dim);
            assert_int_equal(x.rot_dim, y.rot_dim);
            assert_int_equal(x.vocab, y.vocab);
            assert_int_equal(x.tie_embeddings, y.tie_embeddings);
            assert_int_equal(x.bos_id, y.bos_id);
            assert_int_equal(x.eos_id, y.eos_id);
            assert_true(fabs(x.norm_eps / y.norm_eps - 1) < 1e-6); /* GGUF stores f32 */
            assert_true(x.rope_theta == y.rope_theta);
            assert_true(fabs(x.rope_attn_factor / y.rope_attn_factor - 1) < 1e-6);
            if (a == MP_ARCH_MISTRAL) assert_int_equal(y.arch, MP_ARCH_LLAMA); /* GGUF has no mistral arch */
            else assert_int_equal(x.arch, y.arch);
            for (int i = 0; i < x.rot_dim / 2; i++) {
                if (fabs(x.inv_freq[i] / y.inv_freq[i] - 1) > 1e-6) fail_msg("arch %d inv_freq[%d]: %.9g vs %.9g", a, i, x.inv_freq[i], y.inv_freq[i]);
                if (x.inv_freq_long && fabs(x.inv_freq_long[i] / y.inv_freq_long[i] - 1) > 1e-6) fail_msg("inv_freq_long[%d]", i);
            }
            assert_int_equal(!!x.inv_freq_long, !!y.inv_freq_long);
            int roles = lt_models_equal(&x, &y);
            assert_true(roles >= 3 + 2 * 9);
            assert_int_equal(mp_model_param_count(&x), mp_model_param_count(&y));
            if (a == MP_ARCH_LLAMA) {
                /* the file really holds permuted rows: GGUF row 1 of head 0 = HF row head_dim/2 */
                const MpGgufTensor *q = mp_gguf_find_tensor(y.gguf, "blk.0.attn_q.weight");
                float raw[64], want[64];
                mp_quant_dequant(raw, q->data + q->nbytes / 64 * 1, q->type, 64);
                mp_mk_row_stored(&s, MP_ROLE_Q, 0, 8, 64, want);
                assert_memory_equal(raw, want, sizeof raw);
                if (k == 0) assert_int_equal(y.rope_scaling, MP_ROPE_FREQ_FACTORS);
            }
            mp_model_free(&x);
            mp_model_free(&y);
            variants++;
        }
    }
    assert_int_equal(variants, 3 * MP_ARCH_COUNT); /* every arch, 3 dtypes */
}

static void test_quantised_gguf(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char p[256];
    /* every writable quant type; tolerance = relative RMS error of its grid (see test_load_quant) */
    static const MpWType qs[10] = {MP_WT_Q8_0, MP_WT_Q4_0, MP_WT_Q4_K, MP_WT_Q4_1, MP_WT_Q5_0,
                                   MP_WT_Q5_1, MP_WT_Q2_K, MP_WT_Q3_K, MP_WT_Q5_K, MP_WT_Q6_K};
    static const double tols[10] = {0.01, 0.12, 0.15, 0.12, 0.07, 0.07, 0.5, 0.3, 0.08, 0.04};
    for (int k = 0; k < 10; k++) {
        MpMkSpec s = spec(k % 3 == 2 ? MP_ARCH_QWEN3 : k % 3 == 1 ? MP_ARCH_PHI3 : MP_ARCH_LLAMA, MP_FORMAT_GGUF, qs[k]);
        s.dim = 256;
        s.ffn = 512;
        s.heads = 4;
        s.kv_heads = 2;
        snprintf(p, sizeof p, "%s/q%d.gguf", d, k);
        lt_mk(&s, p);
        MpModel m;
        lt_open(&m, p);
        assert_int_equal(mp_model_stored_type(&m, MP_ROLE_Q, 1), qs[k]);
        assert_int_equal(mp_model_stored_type(&m, MP_ROLE_ATTN_NORM, 1), MP_WT_F32);
        /* every served weight is close to the generator's f32 value */
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            int64_t sh[2];
            if (!mp_model_shape(&m, (MpRole)r, 1, sh)) continue;
            size_t n = (size_t)(sh[0] * sh[1]);
            float *x = malloc(n * 4), *y = malloc(n * 4);
            MpErr e;
            assert_int_equal(mp_model_tensor_f32(&m, (MpRole)r, 1, x, n, NULL, &e), MP_OK);
            if (sh[1] == 1 && mp_model_shape(&m, (MpRole)r, 1, sh) == 1) mp_mk_row(&s, (MpRole)r, 1, 0, sh[0], y);
            else
                for (int64_t i = 0; i < sh[0]; i++) mp_mk_row(&s, (MpRole)r, 1, i, sh[1], y + i * sh[1]);
            double num = 0, den = 0;
            for (size_t i = 0; i < n; i++) {
                num += (x[i] - y[i]) * (double)(x[i] - y[i]);
                den += (double)y[i] * y[i];
            }
            double rel = sqrt(num / den), tol = tols[k];
            if (rel > tol) fail_msg("%s role %s: relative RMS error %g > %g", mp_quant_name(qs[k]), mp_model_role_name((MpRole)r), rel, tol);
            free(x);
            free(y);
        }
        mp_model_free(&m);
    }
    /* rows that are not whole blocks fall back: dim 48 → Q8_0 for q4_k, F16 for ffn_down rows of 40 */
    MpMkSpec s = spec(MP_ARCH_LLAMA, MP_FORMAT_GGUF, MP_WT_Q4_K);
    s.dim = 64;
    s.ffn = 40;
    snprintf(p, sizeof p, "%s/fallback.gguf", d);
    lt_mk(&s, p);
    MpModel m;
    lt_open(&m, p);
    assert_int_equal(mp_model_stored_type(&m, MP_ROLE_Q, 0), MP_WT_Q8_0);
    assert_int_equal(mp_model_stored_type(&m, MP_ROLE_DOWN, 0), MP_WT_F16);
    mp_model_free(&m);
}

static void test_gguf_lazy(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char p[256];
    MpMkSpec s = spec(MP_ARCH_QWEN2, MP_FORMAT_GGUF, MP_WT_Q8_0);
    s.layers = 6;
    snprintf(p, sizeof p, "%s/l.gguf", d);
    lt_mk(&s, p);
    MpModel m;
    lt_open(&m, p);
    assert_int_equal(m.bytes_read, 0);
    float *buf = malloc(1 << 20);
    MpErr e;
    size_t want = 0;
    for (int l = 0; l < 2; l++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            int64_t sh[2];
            if (!mp_model_shape(&m, (MpRole)r, l, sh)) continue;
            assert_int_equal(mp_model_tensor_f32(&m, (MpRole)r, l, buf, 1 << 18, NULL, &e), MP_OK);
            char name[128];
            mp_model_stored_name(MP_FORMAT_GGUF, m.arch, (MpRole)r, l, name, sizeof name);
            want += mp_gguf_find_tensor(m.gguf, name)->nbytes;
        }
    assert_int_equal(m.bytes_read, want);
    free(buf);
    mp_model_free(&m);
}

/* ---------------------------------------------------------------- malformed GGUF */

/* Byte offset of the tensor info of `name` (its u64 name length). */
static size_t info_off(const uint8_t *b, size_t n, const char *name) {
    size_t k = strlen(name);
    for (size_t i = 8; i + k <= n; i++)
        if (!memcmp(b + i, name, k) && b[i - 8] == k && !b[i - 7]) return i - 8;
    fail_msg("tensor info %s not found", name);
    return 0;
}

static void test_gguf_malformed(void **state) {
    (void)state;
    const char *d = mp_test_tmpdir();
    char p[256];
    MpMkSpec s = spec(MP_ARCH_LLAMA, MP_FORMAT_GGUF, MP_WT_F32);
    snprintf(p, sizeof p, "%s/m.gguf", d);
    lt_mk(&s, p);
    size_t n;
    uint8_t *orig = lt_slurp(p, &n), *b = malloc(n);
    char out[4096];
    assert_int_equal(mp_test_run(out, sizeof out, "inspect %s", p), 0);
#define RESET() memcpy(b, orig, n)
#define WRITE(len) mp_test_write_file(p, b, (len))
    RESET();
    b[0] = 'X';
    WRITE(n);
    lt_inspect_fails(p, "m.gguf", "bad magic");
    RESET();
    b[4] = 2; /* v2 has the same layout as v3: accepted */
    WRITE(n);
    assert_int_equal(mp_test_run(out, sizeof out, "inspect %s", p), 0);
    assert_non_null(strstr(out, "gguf version:   2"));
    b[4] = 1;
    WRITE(n);
    lt_inspect_fails(p, "m.gguf", "version 1");
    RESET();
    WRITE(n - 100);
    lt_inspect_fails(p, "m.gguf", "output.weight"); /* the last tensor lies outside the truncated file */
    WRITE(20);
    lt_inspect_fails(p, "m.gguf", "truncated");
    RESET();
    memset(b + 8, 0xff, 7); /* tensor count ~2^56 */
    WRITE(n);
    lt_inspect_fails(p, "m.gguf", "tensor count");
    RESET();
    memset(b + 16, 0x7f, 6); /* kv count huge */
    WRITE(n);
    lt_inspect_fails(p, "m.gguf", "metadata count");
    /* tensor info fields of blk.1.attn_k.weight: name, n_dims u32, ne 2 x u64, type u32, offset u64 */
    size_t ti = info_off(orig, n, "blk.1.attn_k.weight") + 8 + strlen("blk.1.attn_k.weight");
    RESET();
    b[ti + 4 + 16] = 23; /* IQ4_XS: unsupported type */
    WRITE(n);
    lt_inspect_fails(p, "blk.1.attn_k.weight", "ggml type 23");
    RESET();
    b[ti + 4 + 16 + 4] += 4; /* offset not aligned */
    WRITE(n);
    lt_inspect_fails(p, "blk.1.attn_k.weight", "alignment");
    RESET();
    size_t tq = info_off(orig, n, "blk.1.attn_q.weight") + 8 + strlen("blk.1.attn_q.weight");
    memcpy(b + ti + 4 + 16 + 4, b + tq + 4 + 16 + 4, 8); /* k at q's offset → overlap */
    WRITE(n);
    lt_inspect_fails(p, "m.gguf", "overlaps");
    RESET();
    memset(b + ti + 4 + 16 + 4, 0xff, 7); /* offset far outside (aligned) */
    b[ti + 4 + 16 + 4] = 0xe0;
    WRITE(n);
    lt_inspect_fails(p, "blk.1.attn_k.weight", "outside the file");
    RESET();
    b[ti + 4 + 8] = 24; /* ne[1] 32 → 24: shape vs metadata mismatch (data still inside, no overlap) */
    WRITE(n);
    lt_inspect_fails(p, "blk.1.attn_k.weight", "shape [24, 64] but the GGUF metadata implies [32, 64]");
    RESET();
    b[ti] = 5; /* n_dims 5 */
    WRITE(n);
    lt_inspect_fails(p, "blk.1.attn_k.weight", "dimensions");
    RESET();
    memset(b + ti + 4, 0xff, 8); /* ne[0] = -1 */
    WRITE(n);
    lt_inspect_fails(p, "blk.1.attn_k.weight", "negative");
    RESET();
    WRITE(n);
    lt_patch(p, "blk.1.attn_k.weight", "blk.1.attn_K.weight");
    lt_inspect_fails(p, "missing tensor 'blk.1.attn_k.weight'", "m.gguf");
    RESET();
    WRITE(n);
    lt_patch(p, "blk.1.attn_k.weight", "blk.1.attn_q.weight");
    lt_inspect_fails(p, "duplicate tensor name 'blk.1.attn_q.weight'", NULL);
    RESET();
    WRITE(n);
    lt_patch(p, "llama.block_count", "llama.block_xount");
    lt_inspect_fails(p, "missing key 'llama.block_count'", NULL);
    RESET();
    WRITE(n);
    PATCHB(p, "\x05\0\0\0\0\0\0\0llama", "\x05\0\0\0\0\0\0\0mamba");
    lt_inspect_fails(p, "general.architecture 'mamba' is not supported", NULL);
    RESET();
    WRITE(n);
    PATCHB(p, "general.alignment\x04\0\0\0\x20", "general.alignment\x04\0\0\0\x21");
    lt_inspect_fails(p, "general.alignment", NULL);
    RESET();
    WRITE(n);
    PATCHB(p, "tokenizer.ggml.tokens\x09\0\0\0\x08\0\0\0", "tokenizer.ggml.tokens\x09\0\0\0\x09\0\0\0"); /* nested array */
    lt_inspect_fails(p, "nested arrays", NULL);
    RESET();
    WRITE(n);
    PATCHB(p, "tokenizer.ggml.tokens\x09\0\0\0\x08\0\0\0\x2c\x01\0\0\0\0\0\0", "tokenizer.ggml.tokens\x09\0\0\0\x08\0\0\0\x2c\x01\0\0\0\0\x10\0");
    lt_inspect_fails(p, "tokenizer.ggml.tokens", "fit in the file");
    RESET();
    WRITE(n);
    PATCHB(p, "llama.attention.head_count\x04\0\0\0\x04", "llama.attention.head_count\x04\0\0\0\x03");
    lt_inspect_fails(p, "m.gguf", "head_count"); /* 3 heads: not a multiple of 2 kv heads */
#undef RESET
#undef WRITE
    free(orig);
    free(b);
}

/* ---------------------------------------------------------------- independent reader */

/* tests/ref/load_ref.py (numpy, written from the spec) reads the HF directory and the GGUF of the
 * same seed, undoes the llama permutation with the converter's own formula, and checks tensors,
 * metadata, and inspect's parameter count, shapes and inv_freq recomputed from config.json. */
static void test_python_reference_reader(void **state) {
    (void)state;
    if (system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0) skip();
    const char *d = mp_test_tmpdir();
    static const char *variants[4][2] = {{"llama", "--rope-scaling llama3"},
                                         {"phi3", "--rope-scaling longrope --partial-rotary 0.5"},
                                         {"qwen2", "--dtype bf16"},
                                         {"mistral", "--dtype f16 --tie"}};
    char out[8192], cmd[2048];
    for (int v = 0; v < 4; v++) {
        const char *common = "--layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 300 --seed 4";
        assert_int_equal(mp_test_run(out, sizeof out, "mkmodel --arch %s %s %s --format hf --shards 2 %s/m%d", variants[v][0], variants[v][1], common, d, v), 0);
        assert_int_equal(mp_test_run(out, sizeof out, "mkmodel --arch %s %s %s --format gguf %s/m%d.gguf", variants[v][0], variants[v][1], common, d, v), 0);
        snprintf(cmd, sizeof cmd, "%s inspect %s/m%d --json --tensors > %s/m%d.json", MP_TEST_BIN, d, v, d, v);
        assert_int_equal(system(cmd), 0);
        snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s/tests/ref/load_ref.py %s/m%d %s/m%d.gguf --inspect-json %s/m%d.json 2>&1", MP_SOURCE_DIR, d, v,
                 d, v, d, v);
        FILE *p = popen(cmd, "r");
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = 0;
        int rc = pclose(p);
        if (rc != 0 || !strstr(out, " 0 mismatches")) fail_msg("load_ref.py (%s): %s", variants[v][0], out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_types), cmocka_unit_test(test_hf_vs_gguf_bit_identical),
        cmocka_unit_test(test_quantised_gguf), cmocka_unit_test(test_gguf_lazy),
        cmocka_unit_test(test_gguf_malformed), cmocka_unit_test(test_python_reference_reader),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
