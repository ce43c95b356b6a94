/* test_model_util.h — helpers shared by tests/test_model_*.c (header-only, static functions).
 *
 * Provides: model_make() (maskpos mkmodel into a scratch dir), model_make_open() (the same, then
 * opened as an MpModel), ids_write() (an int32 [N,S] .npy
 * of pseudo-random or constant ids), npy_load_f64() (a .npy as doubles, failing the test on
 * error), files_equal() (byte comparison), ids_list() (a comma list of pseudo-random ids for
 * `logits --tokens`), logprob_stats(), logprob_diff() and logits_vs_ref() (log-probs of
 * `maskpos logits` against reference logits; test_stories_oracle.c uses them too),
 * logits_and_oracle() (`maskpos logits` and llama.cpp's logits of the same ids),
 * threads_identical() (probe and logits outputs of 1 and 2 threads compared byte for byte),
 * probe_threads_same() (named files of a probe at --threads 1 and 2 compared byte for byte),
 * model_poke() (bytes written over a stored tensor of a model on disk: damaged weights), and
 * meta_key() (one key of a run folder's meta.json as JSON text).
 */
#ifndef MP_TEST_MODEL_UTIL_H
#define MP_TEST_MODEL_UTIL_H

#include "testutil.h"

#include "core/json.h"         /* mp_json_read: meta_key */
#include "core/npy.h"
#include "load/gguf.h"        /* MpGguf: model_poke */
#include "load/model.h"       /* mp_model_open */
#include "load/safetensors.h" /* MpSt: model_poke */

/* meta.json's key of run folder dir as compact JSON text (keys sorted, reals to 17 digits;
 * malloc'd); fails the test when the file or the key is missing. */
static char *meta_key(const char *dir, const char *key) __attribute__((unused));
static char *meta_key(const char *dir, const char *key) {
    char path[512];
    snprintf(path, sizeof path, "%s/meta.json", dir);
    MpErr e;
    json_t *m = mp_json_read(path, &e);
    if (!m) fail_msg("%s", e.msg);
    json_t *v = json_object_get(m, key);
    if (!v) fail_msg("%s: no %s", path, key);
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17) | JSON_ENCODE_ANY);
    json_decref(m);
    return s;
}

/* Runs `maskpos mkmodel <args> OUT`; fails the test on a non-zero exit. */
static void model_make(const char *out, const char *args) __attribute__((unused));
static void model_make(const char *out, const char *args) {
    char buf[4096];
    int rc = mp_test_run(buf, sizeof buf, "mkmodel %s %s", args, out);
    if (rc != 0) fail_msg("mkmodel %s %s failed (%d): %s", args, out, rc, buf);
}

/* model_make(out, args), then *m = that model opened; fails the test on an error. */
static void model_make_open(MpModel *m, const char *out, const char *args) __attribute__((unused));
static void model_make_open(MpModel *m, const char *out, const char *args) {
    MpErr e;
    model_make(out, args);
    memset(m, 0, sizeof *m);
    if (mp_model_open(m, out, &e) != MP_OK) fail_msg("%s: %s", out, e.msg);
}

/* ids [N,S] int32: constant `value` when value >= 0, else pseudo-random in [0, vocab). */
static void ids_write(const char *path, int N, int S, int vocab, int value, uint32_t seed) __attribute__((unused));
static void ids_write(const char *path, int N, int S, int vocab, int value, uint32_t seed) {
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)N * (size_t)S + 4);
    uint32_t s = seed * 747796405u + 2891336453u;
    for (int i = 0; i < N * S; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = value >= 0 ? value : (int32_t)((s >> 8) % (uint32_t)vocab);
    }
    int64_t shp[2] = {N, S};
    MpErr e;
    if (mp_npy_write(path, MP_DT_I32, ids, 2, shp, &e) != MP_OK) fail_msg("%s", e.msg);
    free(ids);
}

/* Loads a .npy as doubles; *n = element count; shape (may be NULL) gets up to 4 dims. */
static double *npy_load_f64(const char *path, size_t *n, int64_t *shape) __attribute__((unused));
static double *npy_load_f64(const char *path, size_t *n, int64_t *shape) {
    MpNpy a;
    MpErr e;
    double *d = NULL;
    if (mp_npy_read(path, &a, &e) != MP_OK) fail_msg("%s", e.msg);
    if (mp_npy_to_f64(&a, &d, &e) != MP_OK) fail_msg("%s", e.msg);
    *n = a.count;
    if (shape)
        for (int i = 0; i < 4; i++) shape[i] = i < a.ndim ? a.shape[i] : 0;
    mp_npy_free(&a);
    return d;
}

static int files_equal(const char *a, const char *b) __attribute__((unused));
static int files_equal(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) eq = 0;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return eq;
}

/* `maskpos probe MODEL --tokens IDS <flags>` at --threads 1 and 2 into top/thr1 and top/thr2; fails
 * the test unless each of the n files is the same in both. */
static void probe_threads_same(const char *top, const char *model, const char *ids, const char *flags,
                               const char *const *files, size_t n) __attribute__((unused));
static void probe_threads_same(const char *top, const char *model, const char *ids, const char *flags,
                               const char *const *files, size_t n) {
    char out[16384], a[600], b[600];
    for (int t = 1; t <= 2; t++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/thr%d %s --threads %d --quiet", model, ids, top, t,
                             flags, t);
        if (rc != 0) fail_msg("probe --threads %d: %s", t, out);
    }
    for (size_t k = 0; k < n; k++) {
        snprintf(a, sizeof a, "%s/thr1/%s", top, files[k]);
        snprintf(b, sizeof b, "%s/thr2/%s", top, files[k]);
        if (!files_equal(a, b)) fail_msg("%s differs between --threads 1 and 2", files[k]);
    }
}

/* list <- T comma-separated ids in [0, V) from an LCG seeded with seed. */
static void ids_list(char *list, size_t cap, int T, int V, uint32_t seed) __attribute__((unused));
static void ids_list(char *list, size_t cap, int T, int V, uint32_t seed) {
    list[0] = '\0';
    for (int t = 0; t < T; t++) {
        seed = seed * 1664525u + 1013904223u;
        snprintf(list + strlen(list), cap - strlen(list), "%s%u", t ? "," : "", (seed >> 8) % (uint32_t)V);
    }
}

/* Makes a 2-layer qwen2 model (mkmodel flags + extra_mk) large enough that every parallel region
 * runs on 2 threads, runs probe (--per-head) and logits with 1 and 2 threads (+ flags), and fails
 * unless scores, normalised scores, per-head maps and log-probs are byte-identical. */
static void threads_identical(const char *d, const char *extra_mk, const char *flags) __attribute__((unused));
static void threads_identical(const char *d, const char *extra_mk, const char *flags) {
    char model[256], ids[256], mk[512], out[8192], a[512], b[512];
    snprintf(model, sizeof model, "%s/m", d);
    snprintf(ids, sizeof ids, "%s/ids.npy", d);
    snprintf(mk, sizeof mk, "--arch qwen2 --layers 2 --dim 128 --heads 4 --kv-heads 2 --ffn 256 --vocab 300 --seed 6 %s", extra_mk);
    model_make(model, mk);
    ids_write(ids, 2, 160, 300, -1, 9);
    for (int t = 1; t <= 2; t++) {
        int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --out %s/t%d --per-head --threads %d --quiet %s", model, ids,
                             d, t, t, flags);
        if (rc != 0) fail_msg("probe --threads %d %s failed: %s", t, flags, out);
        rc = mp_test_run(out, sizeof out, "logits %s --tokens 5,6,7,8,9,10 --threads %d --out %s/l%d.npy %s", model, t, d, t, flags);
        if (rc != 0) fail_msg("logits --threads %d %s failed: %s", t, flags, out);
    }
    const char *files[] = {"t%d/scores.npy", "t%d/scores_diagnorm.npy", "t%d/scores_heads.npy", "l%d.npy"};
    for (int i = 0; i < 4; i++) {
        char fa[64], fb[64];
        snprintf(fa, sizeof fa, files[i], 1);
        snprintf(fb, sizeof fb, files[i], 2);
        snprintf(a, sizeof a, "%s/%s", d, fa);
        snprintf(b, sizeof b, "%s/%s", d, fb);
        if (!files_equal(a, b)) fail_msg("%s %s differs between 1 and 2 threads", flags, fa);
    }
}

/* What logprob_stats measures of lp against log_softmax(logits). */
typedef struct LogprobStats {
    double max_abs;   /* largest |lp − ref| */
    double max_above; /* largest |lp − ref| where ref > the `above` given */
    double max_rel;   /* largest |lp − ref| / |ref| */
} LogprobStats;

/* Compares lp [T, V] with the log-softmax of the reference logits [T, V], taken here in double.
 * With atol >= 0, fails at the first entry beyond atol + rtol·|reference log-prob|. */
static LogprobStats logprob_stats(const char *name, const double *lp, const double *logits, int T, int64_t V, double atol,
                                  double rtol, double above) __attribute__((unused));
static LogprobStats logprob_stats(const char *name, const double *lp, const double *logits, int T, int64_t V, double atol,
                                  double rtol, double above) {
    LogprobStats st = {0, 0, 0};
    for (int t = 0; t < T; t++) {
        const double *r = logits + (size_t)t * V;
        double mx = -INFINITY, z = 0;
        for (int64_t v = 0; v < V; v++) mx = r[v] > mx ? r[v] : mx;
        for (int64_t v = 0; v < V; v++) z += exp(r[v] - mx);
        for (int64_t v = 0; v < V; v++) {
            const double ref = r[v] - mx - log(z), d = fabs(lp[(size_t)t * V + v] - ref);
            if (d > st.max_abs) st.max_abs = d;
            if (ref > above && d > st.max_above) st.max_above = d;
            if (d / fabs(ref) > st.max_rel) st.max_rel = d / fabs(ref);
            if (atol >= 0 && !(d <= atol + rtol * fabs(ref)))
                fail_msg("%s: log-prob [%d, %lld] maskpos %.9g reference %.9g", name, t, (long long)v, lp[(size_t)t * V + v], ref);
        }
    }
    return st;
}

/* `maskpos logits MODEL --tokens LIST --out LP` and llama.cpp's logits of the same ids (node
 * logits.mjs in oracle_dir, writing the raw f64 file LL); *mine gets the [T, V] log-probs and *ref
 * the [T, V] logits (both malloc'd). Fails the test (naming `name`) on any error or shape. */
static void logits_and_oracle(const char *name, const char *model, const char *list, const char *lp, const char *ll,
                              const char *oracle_dir, int T, int V, double **mine, double **ref) __attribute__((unused));
static void logits_and_oracle(const char *name, const char *model, const char *list, const char *lp, const char *ll,
                              const char *oracle_dir, int T, int V, double **mine, double **ref) {
    static char out[1 << 16];
    int rc = mp_test_run(out, sizeof out, "logits %s --tokens %s --out %s", model, list, lp);
    if (rc != 0) fail_msg("%s: maskpos logits failed: %s", name, out);
    rc = mp_test_shell(out, sizeof out, "cd %s && node logits.mjs %s %s %s", oracle_dir, model, list, ll);
    if (rc != 0) fail_msg("%s: llama.cpp oracle failed (%d): %s", name, rc, out);
    int tn = 0, vn = 0;
    if (sscanf(out, "%d %d", &tn, &vn) != 2 || tn != T || vn != V) fail_msg("%s: oracle output '%s'", name, out);
    size_t cnt;
    *mine = npy_load_f64(lp, &cnt, NULL);
    assert_int_equal(cnt, (size_t)T * V);
    *ref = malloc(sizeof(double) * (size_t)T * V);
    FILE *f = fopen(ll, "rb");
    assert_non_null(f);
    assert_int_equal(fread(*ref, sizeof(double), (size_t)T * V, f), (size_t)T * V);
    fclose(f);
}

/* Largest |lp − log_softmax(logits)| over [T, V] (logprob_stats' max_abs, same failure rule). */
static double logprob_diff(const char *name, const double *lp, const double *logits, int T, int64_t V, double atol,
                           double rtol) __attribute__((unused));
static double logprob_diff(const char *name, const double *lp, const double *logits, int T, int64_t V, double atol,
                           double rtol) {
    return logprob_stats(name, lp, logits, T, V, atol, rtol, -INFINITY).max_abs;
}

/* Runs `maskpos logits MODEL --tokens <the first S ids of row 0 of ids.npy> FLAGS --out DIR/lp.npy`
 * and compares its log-probs with the log-softmax, taken here in double, of the reference logits
 * DIR/ref_logits.npy ([N, S, V], row 0); fails at the first entry beyond atol + rtol·|ref|.
 * Returns the largest difference. */
static double logits_vs_ref(const char *name, const char *model, const char *ids, int S, const char *dir, const char *flags,
                            double atol, double rtol) __attribute__((unused));
static double logits_vs_ref(const char *name, const char *model, const char *ids, int S, const char *dir, const char *flags,
                            double atol, double rtol) {
    char list[4096] = "", a[512], b[512], out[8192];
    size_t nid, nl, nr;
    double *idv = npy_load_f64(ids, &nid, NULL);
    for (int t = 0; t < S; t++) snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", t ? "," : "", (int)idv[t]);
    free(idv);
    int rc = mp_test_run(out, sizeof out, "logits %s --tokens %s %s --out %s/lp.npy", model, list, flags, dir);
    if (rc != 0) fail_msg("%s: logits %s failed (%d): %s", name, flags, rc, out);
    int64_t sl[4], sr[4];
    snprintf(a, sizeof a, "%s/lp.npy", dir);
    snprintf(b, sizeof b, "%s/ref_logits.npy", dir);
    double *lp = npy_load_f64(a, &nl, sl), *rl = npy_load_f64(b, &nr, sr);
    const int64_t V = sl[1];
    assert_int_equal(sl[0], S);
    assert_int_equal(sr[2], V);
    const double err = logprob_diff(name, lp, rl, S, V, atol, rtol);
    free(lp);
    free(rl);
    return err;
}

/* Writes n bytes over the stored tensor `name` of the model at path (HF folder or .gguf), starting
 * at byte `at` of its data (a weight in its stored dtype, or a quantised block's scale); fails the
 * test when the tensor is missing or too small. */
static void model_poke(const char *path, const char *name, size_t at, const void *bytes, size_t n) __attribute__((unused));
static void model_poke(const char *path, const char *name, size_t at, const void *bytes, size_t n) {
    MpModel m;
    MpErr e;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, path, &e) != MP_OK) fail_msg("%s: %s", path, e.msg);
    char file[4096] = "";
    long off = -1;
    for (size_t i = 0; i < m.n_tensors; i++) {
        const MpModelTensor *t = &m.tensors[i];
        if (strcmp(t->name, name) || at + n > t->nbytes) continue;
        const uint8_t *base = m.gguf ? m.gguf->map.data : m.st[t->file].map.data;
        off = (long)(t->data - base + at);
        snprintf(file, sizeof file, "%s", m.file_names[t->file]);
    }
    mp_model_free(&m);
    if (off < 0) fail_msg("%s: no tensor '%s' of %zu bytes or more", path, name, at + n);
    FILE *f = fopen(file, "r+b");
    if (!f || fseek(f, off, SEEK_SET) || fwrite(bytes, 1, n, f) != n) fail_msg("%s: cannot write at %ld", file, off);
    fclose(f);
}

#endif
