/* test_load_util.h — helpers shared by tests/test_load*.c (header-only, static functions).
 *
 * Provides: slurp/patch of files, writing models with the library writer, comparing every
 * (role, layer) of two models or of a model and the generator, and running `maskpos inspect`
 * expecting exit 2 with given words in the message.
 */
#ifndef MP_TEST_LOAD_UTIL_H
#define MP_TEST_LOAD_UTIL_H

#include "testutil.h"

#include <jansson.h>

#include "load/mkmodel.h" /* MpMkSpec, mp_mk_write, mp_mk_row_stored */
#include "load/model.h"   /* MpModel */

static uint8_t *lt_slurp(const char *path, size_t *n) __attribute__((unused));
static uint8_t *lt_slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot read %s", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return b;
}

static void lt_mk(const MpMkSpec *s, const char *out) __attribute__((unused));
static void lt_mk(const MpMkSpec *s, const char *out) {
    MpErr e;
    if (mp_mk_write(s, out, &e) != MP_OK) fail_msg("mkmodel %s: %s", out, e.msg);
}

static void lt_open(MpModel *m, const char *path) __attribute__((unused));
static void lt_open(MpModel *m, const char *path) {
    MpErr e;
    if (mp_model_open(m, path, &e) != MP_OK) fail_msg("open %s: %s", path, e.msg);
}

/* Every (role, layer) of a and b: same shape, bit-identical f32. Returns roles compared. */
static int lt_models_equal(MpModel *a, MpModel *b) __attribute__((unused));
static int lt_models_equal(MpModel *a, MpModel *b) {
    int n = 0;
    for (int l = -1; l < a->n_layers; l++)
        for (int r = 0; r < MP_ROLE_COUNT; r++) {
            if ((l < 0) != mp_model_role_is_global((MpRole)r)) continue;
            int64_t sa[2], sb[2];
            int na = mp_model_shape(a, (MpRole)r, l, sa), nb = mp_model_shape(b, (MpRole)r, l, sb);
            if (na != nb) fail_msg("role %s layer %d: present %d vs %d", mp_model_role_name((MpRole)r), l, na, nb);
            if (!na) continue;
            assert_int_equal(sa[0], sb[0]);
            assert_int_equal(sa[1], sb[1]);
            size_t cnt = (size_t)(sa[0] * sa[1]);
            float *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
            MpErr e;
            assert_int_equal(mp_model_tensor_f32(a, (MpRole)r, l, x, cnt, NULL, &e), MP_OK);
            assert_int_equal(mp_model_tensor_f32(b, (MpRole)r, l, y, cnt, NULL, &e), MP_OK);
            if (memcmp(x, y, cnt * sizeof *x)) {
                size_t k = 0;
                while (x[k] == y[k]) k++;
                fail_msg("role %s layer %d differs at %zu: %.9g vs %.9g", mp_model_role_name((MpRole)r), l, k, x[k], y[k]);
            }
            free(x);
            free(y);
            n++;
        }
    for (int l = 0; l < a->n_layers && a->n_experts; l++) /* MoE: every expert's gate, up, down */
        for (int r = MP_ROLE_GATE_EXPS; r <= MP_ROLE_DOWN_EXPS; r++)
            for (int j = 0; j < a->n_experts; j++) {
                int64_t sa[2], sb[2];
                assert_int_equal(mp_model_expert_shape(a, (MpRole)r, l, j, sa), 2);
                assert_int_equal(mp_model_expert_shape(b, (MpRole)r, l, j, sb), 2);
                assert_memory_equal(sa, sb, sizeof sa);
                size_t cnt = (size_t)(sa[0] * sa[1]);
                float *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
                MpErr e;
                assert_int_equal(mp_model_expert_rows_f32(a, (MpRole)r, l, j, 0, sa[0], x, &e), MP_OK);
                assert_int_equal(mp_model_expert_rows_f32(b, (MpRole)r, l, j, 0, sa[0], y, &e), MP_OK);
                if (memcmp(x, y, cnt * sizeof *x)) fail_msg("expert %d %s layer %d differs", j, mp_model_role_name((MpRole)r), l);
                free(x);
                free(y);
                n++;
            }
    return n;
}

/* Every (role, layer) of m equals the generator's stored values for spec s. */
static int lt_model_matches_spec(MpModel *m, const MpMkSpec *s) __attribute__((unused));
static int lt_model_matches_spec(MpModel *m, const MpMkSpec *s) {
    int n = 0;
    for (int l = -1; l < m->n_layers; l++)
        for (int r = 0; r < MP_ROLE_COUNT; r++) {
            if ((l < 0) != mp_model_role_is_global((MpRole)r)) continue;
            int64_t sh[2];
            int nd = mp_model_shape(m, (MpRole)r, l, sh);
            if (!nd) continue;
            size_t cnt = (size_t)(sh[0] * sh[1]);
            float *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
            MpErr e;
            assert_int_equal(mp_model_tensor_f32(m, (MpRole)r, l, x, cnt, NULL, &e), MP_OK);
            MpRole gr = (MpRole)r == MP_ROLE_OUTPUT && m->tie_embeddings ? MP_ROLE_TOK_EMBD : (MpRole)r;
            if (nd == 1) mp_mk_row_stored(s, gr, l, 0, sh[0], y);
            else
                for (int64_t i = 0; i < sh[0]; i++) mp_mk_row_stored(s, gr, l, i, sh[1], y + i * sh[1]);
            if ((m->arch == MP_ARCH_GEMMA2 || m->arch == MP_ARCH_GEMMA3 || m->arch == MP_ARCH_GEMMA) && nd == 1) /* Gemma's norms: 1 + w from both formats */
                for (size_t i = 0; i < cnt; i++) y[i] = 1.0f + y[i];
            if (memcmp(x, y, cnt * sizeof *x)) {
                size_t k = 0;
                while (x[k] == y[k]) k++;
                fail_msg("role %s layer %d differs from the generator at %zu: %.9g vs %.9g", mp_model_role_name((MpRole)r), l, k, x[k], y[k]);
            }
            free(x);
            free(y);
            n++;
        }
    for (int l = 0; l < m->n_layers && m->n_experts; l++) /* MoE: expert j = rows [j*rows, (j+1)*rows) of the stacked role */
        for (int r = MP_ROLE_GATE_EXPS; r <= MP_ROLE_DOWN_EXPS; r++)
            for (int j = 0; j < m->n_experts; j++) {
                int64_t sh[2];
                assert_int_equal(mp_model_expert_shape(m, (MpRole)r, l, j, sh), 2);
                size_t cnt = (size_t)(sh[0] * sh[1]);
                float *x = malloc(cnt * sizeof *x), *y = malloc(cnt * sizeof *y);
                MpErr e;
                assert_int_equal(mp_model_expert_rows_f32(m, (MpRole)r, l, j, 0, sh[0], x, &e), MP_OK);
                for (int64_t i = 0; i < sh[0]; i++) mp_mk_row_stored(s, (MpRole)r, l, j * sh[0] + i, sh[1], y + i * sh[1]);
                if (memcmp(x, y, cnt * sizeof *x)) fail_msg("expert %d %s layer %d differs from the generator", j, mp_model_role_name((MpRole)r), l);
                free(x);
                free(y);
                n++;
            }
    return n;
}

/* Runs `maskpos inspect <path>`; expects exit 2, the CLI prefix and every needle in the output. */
static void lt_inspect_fails(const char *path, const char *n1, const char *n2) __attribute__((unused));
static void lt_inspect_fails(const char *path, const char *n1, const char *n2) {
    char out[4096];
    int rc = mp_test_run(out, sizeof out, "inspect '%s'", path);
    if (rc != 2 || !strstr(out, "maskpos inspect: error: ") || (n1 && !strstr(out, n1)) || (n2 && !strstr(out, n2)))
        fail_msg("inspect %s: rc %d, want 2 with '%s' and '%s'; got: %s", path, rc, n1 ? n1 : "", n2 ? n2 : "", out);
    /* one line */
    char *nl = strchr(out, '\n');
    if (nl && nl[1]) fail_msg("error is not one line: %s", out);
}

/* Replaces the first occurrence of the k bytes `from` by the k bytes `to` in file path. */
static void lt_patchn(const char *path, const char *from, const char *to, size_t k) __attribute__((unused));
static void lt_patchn(const char *path, const char *from, const char *to, size_t k) {
    size_t n;
    uint8_t *b = lt_slurp(path, &n);
    uint8_t *p = memmem(b, n, from, k);
    if (!p) fail_msg("'%s' not found in %s", from, path);
    memcpy(p, to, k);
    mp_test_write_file(path, b, n);
    free(b);
}

/* Same for NUL-free strings of equal length. */
static void lt_patch(const char *path, const char *from, const char *to) __attribute__((unused));
static void lt_patch(const char *path, const char *from, const char *to) {
    assert_int_equal(strlen(from), strlen(to));
    lt_patchn(path, from, to, strlen(from));
}

/* A small random model of arch in format fmt and dtype dt (dim 64, 4 heads / 2 KV heads, FFN 96,
 * vocabulary 300), with the given layer count and seed. */
static MpMkSpec lt_spec(MpArch arch, MpFormat fmt, MpWType dt, int layers, uint64_t seed) __attribute__((unused));
static MpMkSpec lt_spec(MpArch arch, MpFormat fmt, MpWType dt, int layers, uint64_t seed) {
    MpMkSpec s;
    mp_mk_spec_default(&s);
    s.arch = arch;
    s.format = fmt;
    s.dtype = dt;
    s.layers = layers;
    s.dim = 64;
    s.heads = 4;
    s.kv_heads = 2;
    s.ffn = 96;
    s.vocab = 300;
    s.seed = seed;
    mp_mk_spec_family(&s, 0, 0); /* the family's own: gptneox's heads and rotary, Gemma's tie, caps */
    return s;
}

#endif
