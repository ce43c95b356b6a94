/* view.c — see view.h. The page's script and style are src/viz/view.js and view.css, turned into
 * C strings at build time (Makefile: $(BUILD)/gen/viz/view_assets.h).
 *
 * Data flow: run folder → ViewRun (the .npy arrays as read) → plan (stored side and encoding of
 * each kind of map, within the size budget) → blob (bytes) + JSON header → page.
 */
#include "viz/view.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"       /* mp_json_read */
#include "core/npy.h"        /* mp_npy_read, mp_npy_to_f64 */
#include "core/util.h"       /* mp_path_join, mp_file_exists, MpAtomicFile, mp_fnv1a64 */
#include "kernels/posmap.h"  /* mp_posmap_diagnorm */
#include "load/quant.h"      /* mp_f32_to_f16 */
#include "model/probe.h"     /* MP_PROBE_POS_COLS: pos_probe.npy's columns */
#include "tok/corpus.h"      /* mp_tok_corpus_build: the text of --data runs */
#include "train/gram.h"      /* mp_train_gram_title: names of gram.npy's matrices */
#include "viz/cmap.h"        /* mp_plot_cmap_find: the figures' colour maps */
#include "viz/signif.h"      /* mp_signif_note_meta: each layer's significance */
#include "viz/view_assets.h" /* view_css, view_js (generated from view.css, view.js) */

void mp_view_options_default(MpViewOptions *o) {
    memset(o, 0, sizeof *o);
    o->max_mb = 48;
    o->max_side = 1024;
    o->tokens = 1;
}

/* ================================================================ blob: the bytes of one run */

typedef struct ViewBlob {
    unsigned char *b;
    size_t n, cap;
} ViewBlob;

/* Reserves len bytes at an offset aligned to align (zero padding); returns the offset. */
static int view_blob_reserve(ViewBlob *bl, size_t len, size_t align, size_t *off, MpErr *e) {
    size_t at = (bl->n + align - 1) / align * align;
    if (at + len < at) return mp_err_set(e, "view: data size overflows");
    if (at + len > bl->cap) {
        size_t cap = bl->cap ? bl->cap : 1 << 16;
        while (cap < at + len) cap *= 2;
        unsigned char *nb = realloc(bl->b, cap);
        if (!nb) return mp_err_set(e, "view: out of memory for %zu bytes of map data", cap);
        bl->b = nb;
        bl->cap = cap;
    }
    memset(bl->b + bl->n, 0, at + len - bl->n);
    bl->n = at + len;
    *off = at;
    return MP_OK;
}

/* ================================================================ reading a run */

typedef struct ViewArr {
    MpNpy npy;    /* as read (owned); npy.data == NULL: file absent */
    double *f64;  /* converted copy when the file is not float64 (owned), else NULL */
} ViewArr;

static const double *view_arr(const ViewArr *a) { return a->f64 ? a->f64 : (const double *)a->npy.data; }

typedef struct ViewRun {
    const char *dir;          /* borrowed from the caller */
    char label[256];
    int L, H, S;
    ViewArr scores, se, probs, heads, heads_se; /* (L,S,S), (L,S,S), (L,S,S), (L,H,S,S), (L,H,S,S) */
    json_t *meta;             /* meta.json or NULL (owned) */
    int causal;               /* every scores map is NaN above its diagonal */
    int gram;                 /* the maps are gram.npy's nine matrices (a)-(i), not layers */
    json_t *tokens;           /* array of S strings (first sequence) or NULL (owned) */
    json_t *stats;            /* the small arrays of probe --stats variance/position/freq, or NULL (owned) */
    char text_note[256];      /* why no text is shown, or "" */
} ViewRun;

static void view_arr_free(ViewArr *a) {
    mp_npy_free(&a->npy);
    free(a->f64);
    memset(a, 0, sizeof *a);
}

static void view_run_free(ViewRun *r) {
    view_arr_free(&r->scores);
    view_arr_free(&r->se);
    view_arr_free(&r->probs);
    view_arr_free(&r->heads);
    view_arr_free(&r->heads_se);
    if (r->meta) json_decref(r->meta);
    if (r->tokens) json_decref(r->tokens);
    if (r->stats) json_decref(r->stats);
    memset(r, 0, sizeof *r);
}

/* Reads dir/name into a when the file exists (MP_OK with a->npy.data NULL when it does not). */
static int view_arr_read(ViewArr *a, const char *dir, const char *name, MpErr *e) {
    char path[4096];
    memset(a, 0, sizeof *a);
    if (mp_path_join(path, sizeof path, dir, name, e) != MP_OK) return MP_ERR;
    if (!mp_file_exists(path)) return MP_OK;
    if (mp_npy_read(path, &a->npy, e) != MP_OK) return MP_ERR;
    if (a->npy.dtype != MP_DT_F64 && mp_npy_to_f64(&a->npy, &a->f64, e) != MP_OK) return mp_err_prefix(e, "%s", path);
    return MP_OK;
}

/* Checks that a has shape (L,S,S) (or (L,H,S,S) when H > 0). */
static int view_arr_check(const ViewArr *a, const char *dir, const char *name, int L, int H, int S, MpErr *e) {
    const int64_t *sh = a->npy.shape;
    int ok = H > 0 ? a->npy.ndim == 4 && sh[0] == L && sh[2] == S && sh[3] == S
                   : a->npy.ndim == 3 && sh[0] == L && sh[1] == S && sh[2] == S;
    if (!ok)
        return mp_err_set(e, "%s/%s: shape does not match scores.npy [%d,%s%d,%d] (ndim %d, first dims %lld,%lld)", dir,
                          name, L, H > 0 ? "H," : "", S, S, a->npy.ndim, (long long)sh[0],
                          (long long)(a->npy.ndim > 1 ? sh[1] : 0));
    return MP_OK;
}

static int view_read_scores(ViewRun *r, MpErr *e) {
    static const char *names[4] = {"scores.npy", "layer_scores.npy", "layer2_scores.npy", "gram.npy"};
    const char *name = NULL;
    for (int k = 0; k < 4 && !name; k++) {
        if (view_arr_read(&r->scores, r->dir, names[k], e) != MP_OK) return MP_ERR;
        if (r->scores.npy.data) name = names[k];
    }
    if (!name)
        return mp_err_set(e, "%s: no scores.npy (nor theory's layer_scores.npy or layer2_scores.npy, nor gram.npy)", r->dir);
    r->gram = !strcmp(name, "gram.npy");
    const MpNpy *a = &r->scores.npy;
    int nd = a->ndim;
    if ((nd != 2 && nd != 3) || a->shape[nd - 1] != a->shape[nd - 2] || a->shape[nd - 1] < 1 ||
        a->shape[nd - 1] > 65536 || (nd == 3 && (a->shape[0] < 1 || a->shape[0] > 4096)))
        return mp_err_set(e, "%s/%s: want square maps [S,S] or [L,S,S] (S ≤ 65536, L ≤ 4096)", r->dir, name);
    r->L = nd == 3 ? (int)a->shape[0] : 1;
    r->S = (int)a->shape[nd - 1];
    return MP_OK;
}

/* Every map NaN above its diagonal (and something finite on or below it). */
static int view_is_causal(const double *maps, int nmaps, int S) {
    if (S < 2) return 0;
    for (int m = 0; m < nmaps; m++) {
        const double *v = maps + (size_t)m * S * S;
        for (int i = 0; i < S; i++)
            for (int j = i + 1; j < S; j++)
                if (!isnan(v[(size_t)i * S + j])) return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- the text of --data runs */

/* Flag value in meta.json's command (argv array): "--flag VALUE"; NULL when absent. */
static const char *view_cmd_arg(const json_t *cmd, const char *flag, int *present) {
    size_t n = json_array_size(cmd);
    for (size_t k = 0; k < n; k++) {
        const char *s = json_string_value(json_array_get(cmd, k));
        if (s && !strcmp(s, flag)) {
            if (present) *present = 1;
            return k + 1 < n ? json_string_value(json_array_get(cmd, k + 1)) : NULL;
        }
    }
    return NULL;
}

/* Rebuilds the run's N x S ids from its --data corpus with the options of its command; keeps the
 * first sequence's tokens only when the ids hash to meta.json's data_hash. */
static void view_read_text(ViewRun *r) {
    const json_t *m = r->meta;
    const char *data = json_string_value(json_object_get(m, "data"));
    const char *tokz = json_string_value(json_object_get(m, "tokenizer"));
    const char *hash = json_string_value(json_object_get(m, "data_hash"));
    json_int_t n = json_integer_value(json_object_get(m, "n")), seq = json_integer_value(json_object_get(m, "seq"));
    if (!data || !hash) return; /* not a --data run: nothing to say */
    if (!tokz) tokz = json_string_value(json_object_get(m, "model"));
    if (!tokz || n < 1 || seq != r->S) {
        snprintf(r->text_note, sizeof r->text_note, "text not shown: meta.json lacks the tokenizer, n or seq");
        return;
    }
    const json_t *cmd = json_object_get(m, "command");
    int whole = 0, shuffle = 0, nospecial = 0;
    const char *field = view_cmd_arg(cmd, "--field", NULL), *seed = view_cmd_arg(cmd, "--seed", NULL);
    view_cmd_arg(cmd, "--whole", &whole);
    view_cmd_arg(cmd, "--shuffle", &shuffle);
    view_cmd_arg(cmd, "--no-special", &nospecial);
    MpTokCorpusOpts o = {.field = field, .whole = whole, .n = n, .seq = seq, .shuffle = shuffle,
                         .seed = seed ? strtoull(seed, NULL, 10) : 0, .add_special = !nospecial,
                         .pack = json_is_true(json_object_get(m, "packed"))};
    MpTok t;
    MpTokCorpus c;
    MpErr e = {0};
    memset(&t, 0, sizeof t);
    memset(&c, 0, sizeof c);
    if (mp_tok_init(&t, tokz, &e) != MP_OK || mp_tok_corpus_build(&c, &t, data, &o, &e) != MP_OK) {
        snprintf(r->text_note, sizeof r->text_note, "text not shown: %.120s%s", e.msg,
                 data[0] != '/' ? " (meta.json's path is relative, as older runs stored it: run view from the probe's folder)"
                                : "");
        goto done;
    }
    uint64_t h = MP_FNV_INIT;
    for (int64_t i = 0; i < c.n * c.seq; i++) h = mp_fnv1a64(&c.ids[i], 4, h);
    char hs[32];
    snprintf(hs, sizeof hs, "%016llx", (unsigned long long)h);
    if (strcmp(hs, hash)) {
        snprintf(r->text_note, sizeof r->text_note, "text not shown: %s read now does not give the run's ids (data_hash)", data);
        goto done;
    }
    r->tokens = json_array();
    for (int64_t j = 0; j < c.seq && r->tokens; j++) {
        MpTokBuf raw = {0}, clean = {0};
        const char *s = "?";
        if (mp_tok_decode(&t, &raw, &c.ids[j], 1, 0, &e) == MP_OK &&
            mp_tok_utf8_sanitize(&clean, raw.data ? raw.data : "", raw.n, NULL, &e) == MP_OK && clean.data)
            s = clean.data;
        json_array_append_new(r->tokens, json_string(s));
        mp_tok_buf_free(&raw);
        mp_tok_buf_free(&clean);
    }
done:
    mp_tok_corpus_free(&c);
    mp_tok_free(&t);
}

/* meta.json, written last, marks a finished run: a folder without one (or with one that is no
 * object, or that disagrees with the maps' shape) is refused. */
static int view_read_meta(ViewRun *r, MpErr *e) {
    char path[4096];
    if (mp_path_join(path, sizeof path, r->dir, "meta.json", e) != MP_OK) return MP_ERR;
    if (!mp_file_exists(path)) return mp_err_set(e, "%s: no meta.json: not the folder of a finished maskpos run", r->dir);
    if (!(r->meta = mp_json_read(path, e))) return MP_ERR;
    if (!json_is_object(r->meta)) return mp_err_set(e, "%s: not a JSON object", path);
    const json_t *kind = json_object_get(r->meta, "kind"), *seq = json_object_get(r->meta, "seq"),
                 *n = json_object_get(r->meta, "n"), *layers = json_object_get(r->meta, "layers");
    const int theory = json_is_string(kind) && !strcmp(json_string_value(kind), "theory");
    const json_t *side = theory ? n : seq;
    if (json_is_number(side) && json_number_value(side) != r->S)
        return mp_err_set(e, "%s: %s %g does not match the maps' side %d", path, theory ? "n" : "seq",
                          json_number_value(side), r->S);
    if (json_is_array(layers) && json_array_size(layers) != (size_t)r->L)
        return mp_err_set(e, "%s: %zu layers listed, the maps have %d", path, json_array_size(layers), r->L);
    return MP_OK;
}

/* ---------------------------------------------------------------- the statistics beside the maps */

/* The arrays of `probe --stats variance, position, freq` the page shows (docs/outputs.md), each with
 * its shape in terms of the run's L and S: 'S' [L, S], 'Q' [L, MP_PROBE_POS_COLS], 'P' [L, H', P]. */
static const struct {
    const char *file, *key;
    char shape;
} view_stat_files[] = {
    {"var_attn.npy", "var_attn", 'S'},   {"var_attn_se.npy", "var_attn_se", 'S'}, {"var_resid.npy", "var_resid", 'S'},
    {"var_resid_se.npy", "var_resid_se", 'S'}, {"pos_probe.npy", "pos_probe", 'Q'}, {"freq_q_norm.npy", "freq_q_norm", 'P'},
    {"freq_contrib.npy", "freq_contrib", 'P'},
};

/* v [n] as a JSON array of numbers, null where not finite. */
static json_t *view_num_array(const double *v, size_t n) {
    json_t *a = json_array();
    for (size_t k = 0; a && k < n; k++) json_array_append_new(a, isfinite(v[k]) ? json_real(v[k]) : json_null());
    return a;
}

/* Reads the statistics' arrays present in r->dir into r->stats ({key: flat array, key_shape: [...]});
 * a file of another shape than the run's is refused, naming it. */
static int view_read_stats(ViewRun *r, MpErr *e) {
    for (size_t k = 0; k < sizeof view_stat_files / sizeof view_stat_files[0]; k++) {
        ViewArr a;
        if (view_arr_read(&a, r->dir, view_stat_files[k].file, e) != MP_OK) return MP_ERR;
        if (!a.npy.data) continue;
        const int64_t *sh = a.npy.shape;
        const char s = view_stat_files[k].shape;
        const int ok = s == 'S' ? a.npy.ndim == 2 && sh[0] == r->L && sh[1] == r->S
                     : s == 'Q' ? a.npy.ndim == 2 && sh[0] == r->L && sh[1] == MP_PROBE_POS_COLS
                                : a.npy.ndim == 3 && sh[0] == r->L && sh[1] >= 1 && sh[2] >= 1 && sh[1] * sh[2] <= (1 << 20);
        if (!ok) {
            view_arr_free(&a);
            return mp_err_set(e, "%s/%s: shape does not match the run (want [%d,%s]; docs/outputs.md)", r->dir,
                              view_stat_files[k].file, r->L, s == 'S' ? "S" : s == 'Q' ? "11" : "H,P");
        }
        if (!r->stats && !(r->stats = json_object())) {
            view_arr_free(&a);
            return mp_err_set(e, "view: out of memory");
        }
        size_t n = 1;
        json_t *shape = json_array();
        for (int d = 0; d < a.npy.ndim; d++) n *= (size_t)sh[d], json_array_append_new(shape, json_integer(sh[d]));
        char sk[64];
        snprintf(sk, sizeof sk, "%s_shape", view_stat_files[k].key);
        json_object_set_new(r->stats, view_stat_files[k].key, view_num_array(view_arr(&a), n));
        json_object_set_new(r->stats, sk, shape);
        view_arr_free(&a);
    }
    if (r->stats && r->meta) { /* the slopes and the sequences read, as meta.json has them */
        static const char *keys[] = {"variance_slope_attn", "variance_slope_attn_se", "variance_slope_resid",
                                     "variance_slope_resid_se", "resid_sequences"};
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
            json_t *v = json_object_get(r->meta, keys[k]);
            if (v) json_object_set(r->stats, keys[k], v);
        }
    }
    return MP_OK;
}

/* Reads one run folder (scores first, then the optional arrays, meta.json and the text). */
static int view_run_load(ViewRun *r, const char *dir, const char *label, const MpViewOptions *o, MpErr *e) {
    memset(r, 0, sizeof *r);
    r->dir = dir;
    if (view_read_scores(r, e) != MP_OK) return MP_ERR;
    if (view_arr_read(&r->se, dir, "scores_se.npy", e) != MP_OK ||
        (r->se.npy.data && view_arr_check(&r->se, dir, "scores_se.npy", r->L, 0, r->S, e) != MP_OK))
        return MP_ERR;
    if (view_arr_read(&r->probs, dir, "probs.npy", e) != MP_OK ||
        (r->probs.npy.data && view_arr_check(&r->probs, dir, "probs.npy", r->L, 0, r->S, e) != MP_OK))
        return MP_ERR;
    if (view_arr_read(&r->heads, dir, "scores_heads.npy", e) != MP_OK) return MP_ERR;
    if (r->heads.npy.data) {
        const int64_t *sh = r->heads.npy.shape;
        if (r->heads.npy.ndim != 4 || sh[1] < 1 || sh[1] > 1024)
            return mp_err_set(e, "%s/scores_heads.npy: want [L,H,S,S] with 1 ≤ H ≤ 1024", dir);
        r->H = (int)sh[1];
        if (view_arr_check(&r->heads, dir, "scores_heads.npy", r->L, r->H, r->S, e) != MP_OK) return MP_ERR;
        if (view_arr_read(&r->heads_se, dir, "scores_heads_se.npy", e) != MP_OK ||
            (r->heads_se.npy.data && view_arr_check(&r->heads_se, dir, "scores_heads_se.npy", r->L, r->H, r->S, e) != MP_OK))
            return MP_ERR;
        if (r->heads_se.npy.data && r->heads_se.npy.shape[1] != r->H)
            return mp_err_set(e, "%s/scores_heads_se.npy: %lld heads, scores_heads.npy %d", dir,
                              (long long)r->heads_se.npy.shape[1], r->H);
    }
    if (view_read_meta(r, e) != MP_OK || view_read_stats(r, e) != MP_OK) return MP_ERR;
    r->causal = view_is_causal(view_arr(&r->scores), r->L, r->S);
    if (label) snprintf(r->label, sizeof r->label, "%s", label);
    else {
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/') n--;
        size_t b = n;
        while (b > 0 && dir[b - 1] != '/') b--;
        snprintf(r->label, sizeof r->label, "%.*s", (int)(n - b), dir + b);
    }
    if (o->tokens && r->meta) view_read_text(r);
    return MP_OK;
}

/* ================================================================ encoding one map */

enum { VIEW_F16 = 0, VIEW_U8 = 1 };

int mp_view_f16_exponent(const double *v, size_t n) {
    double mx = 0;
    for (size_t a = 0; a < n; a++)
        if (isfinite(v[a]) && fabs(v[a]) > mx) mx = fabs(v[a]);
    if (mx == 0) return 0;
    int k = (int)ceil(log2(mx / 32768.0));
    while (ldexp(mx, -k) > 32768.0) k++; /* log2 rounding */
    return k;
}

/* Side of the stored map: S, or the map area-averaged by factor f (ceil(S / f)). */
static int view_side(int S, int f) { return (S + f - 1) / f; }

/* Bytes of one stored map of side n. */
static size_t view_map_bytes(int n, int tri, int enc, int resid) {
    size_t cnt = tri ? (size_t)n * (n + 1) / 2 : (size_t)n * n;
    return cnt * (enc == VIEW_F16 ? 2 : 1) + (resid ? (2 * (size_t)n - 1) * 8 : 0) + 8;
}

/* The map at side n = ceil(S / f) into out (n,n): the mean of the finite entries of each f x f
 * block [u·f, min(S, (u+1)·f)) x [v·f, ...), NaN when less than a quarter of the block is observed
 * (the rule of mp_plot_raster_average, so the causal edge stays a staircase). f = 1: a copy. */
static void view_block_mean(double *out, int n, const double *map, int S, int f) {
    for (int u = 0; u < n; u++)
        for (int v = 0; v < n; v++) {
            int i1 = (u + 1) * f < S ? (u + 1) * f : S, j1 = (v + 1) * f < S ? (v + 1) * f : S;
            double s = 0;
            int w = 0;
            for (int i = u * f; i < i1; i++)
                for (int j = v * f; j < j1; j++)
                    if (isfinite(map[(size_t)i * S + j])) s += map[(size_t)i * S + j], w++;
            out[(size_t)u * n + v] = w > 0 && 4 * w >= (i1 - u * f) * (j1 - v * f) ? s / w : NAN;
        }
}

/* Appends one map (n,n) to the blob: residue R = v − (diagonal mean) and the diagonal means in
 * float64 when resid, else v itself; lower triangle only when tri; float16 · 2^k or 8-bit codes.
 * v is overwritten (scratch). Returns the JSON record of the map. */
static json_t *view_encode_map(ViewBlob *bl, double *v, double *tmp, int n, int tri, int enc, int resid, MpErr *e) {
    json_t *rec = json_object();
    if (!rec) return mp_err_set(e, "view: out of memory"), NULL;
    size_t off;
    if (resid) {
        mp_posmap_diagnorm(tmp, v, n);
        if (view_blob_reserve(bl, (2 * (size_t)n - 1) * 8, 8, &off, e) != MP_OK) goto fail;
        double *dm = (double *)(bl->b + off); /* index d = i − j + n − 1 */
        for (int d = 0; d < 2 * n - 1; d++) dm[d] = NAN;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                size_t a = (size_t)i * n + j;
                if (isfinite(v[a]) && isnan(dm[i - j + n - 1])) dm[i - j + n - 1] = v[a] - tmp[a];
            }
        memcpy(v, tmp, (size_t)n * n * sizeof *v);
        json_object_set_new(rec, "d", json_integer((json_int_t)off));
    }
    for (size_t a = 0; a < (size_t)n * n; a++)
        if (!isfinite(v[a])) v[a] = NAN;
    size_t cnt = tri ? (size_t)n * (n + 1) / 2 : (size_t)n * n;
    if (view_blob_reserve(bl, cnt * (enc == VIEW_F16 ? 2 : 1), 4, &off, e) != MP_OK) goto fail;
    json_object_set_new(rec, "o", json_integer((json_int_t)off));
    if (enc == VIEW_F16) {
        int k = mp_view_f16_exponent(v, (size_t)n * n);
        uint16_t *q = (uint16_t *)(bl->b + off);
        size_t w = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < (tri ? i + 1 : n); j++) q[w++] = mp_f32_to_f16((float)ldexp(v[(size_t)i * n + j], -k));
        json_object_set_new(rec, "k", json_integer(k));
    } else {
        double lo = INFINITY, hi = -INFINITY;
        for (size_t a = 0; a < (size_t)n * n; a++)
            if (!isnan(v[a])) lo = fmin(lo, v[a]), hi = fmax(hi, v[a]);
        if (!(lo <= hi)) lo = hi = 0;
        double sc = hi > lo ? (hi - lo) / 254 : 1;
        unsigned char *q = bl->b + off;
        size_t w = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < (tri ? i + 1 : n); j++) {
                double x = v[(size_t)i * n + j];
                q[w++] = isnan(x) ? 255 : (unsigned char)lround((x - lo) / sc);
            }
        json_object_set_new(rec, "lo", json_real(lo));
        json_object_set_new(rec, "sc", json_real(sc));
    }
    return rec;
fail:
    json_decref(rec);
    return NULL;
}

/* ================================================================ planning and the header */

/* One kind of map of a run (scores, se, probs or heads) and how it is stored. */
typedef struct ViewKind {
    const char *name;   /* key in the page's JSON */
    const double *maps; /* (nmaps, S, S) borrowed */
    int nmaps, resid, enc, f, n, tri;
} ViewKind;

/* Encodes every map of kind k into the blob; returns its JSON description. */
static json_t *view_encode_kind(ViewBlob *bl, const ViewKind *k, int S, MpErr *e) {
    size_t nn = (size_t)k->n * k->n;
    double *v = malloc(2 * nn * sizeof *v);
    json_t *j = json_object(), *maps = json_array();
    if (!v || !j || !maps) {
        free(v);
        json_decref(j);
        json_decref(maps);
        return mp_err_set(e, "view: out of memory for a %d x %d map", k->n, k->n), NULL;
    }
    json_object_set_new(j, "enc", json_string(k->enc == VIEW_F16 ? "f16" : "u8"));
    json_object_set_new(j, "n", json_integer(k->n));
    json_object_set_new(j, "f", json_integer(k->f));
    json_object_set_new(j, "tri", json_boolean(k->tri));
    json_object_set_new(j, "resid", json_boolean(k->resid));
    json_object_set_new(j, "maps", maps);
    for (int m = 0; m < k->nmaps; m++) {
        json_t *rec = NULL;
        view_block_mean(v, k->n, k->maps + (size_t)m * S * S, S, k->f);
        if (!(rec = view_encode_map(bl, v, v + nn, k->n, k->tri, k->enc, k->resid, e))) {
            free(v);
            json_decref(j);
            return NULL;
        }
        json_array_append_new(maps, rec);
    }
    free(v);
    return j;
}

/* Chooses how the kinds of a run are stored within budget bytes: the mean maps in float16 at
 * side ≤ max_side (8 bits when compact); the per-head maps in float16, else 8 bits, else area-averaged by 2, 4, ...
 * Returns the number of kinds. */
static int view_plan(ViewKind *kinds, const ViewRun *r, size_t budget, int max_side, int compact) {
    int nk = 0, f0 = (r->S + max_side - 1) / max_side;
    const ViewArr *arr[3] = {&r->scores, &r->se, &r->probs};
    static const char *names[3] = {"scores", "se", "probs"};
    size_t used = 0;
    for (int a = 0; a < 3; a++) {
        if (!arr[a]->npy.data) continue;
        ViewKind *k = &kinds[nk++];
        *k = (ViewKind){names[a], view_arr(arr[a]), r->L, a == 0, compact ? VIEW_U8 : VIEW_F16, f0, view_side(r->S, f0), r->causal};
        used += (size_t)k->nmaps * view_map_bytes(k->n, k->tri, k->enc, k->resid);
    }
    if (r->heads.npy.data) {
        ViewKind *k = &kinds[nk++];
        *k = (ViewKind){"heads", view_arr(&r->heads), r->L * r->H, 1, VIEW_F16, f0, view_side(r->S, f0), 0};
        k->tri = view_is_causal(k->maps, k->nmaps, r->S);
        const int with_se = r->heads_se.npy.data != NULL;
        size_t left = budget > used ? budget - used : 0;
        for (int step = 0;; step++) {
            k->enc = step % 2 ? VIEW_U8 : VIEW_F16;
            k->f = f0 << (step / 2);
            k->n = view_side(r->S, k->f);
            const size_t need = view_map_bytes(k->n, k->tri, k->enc, 1) + (with_se ? view_map_bytes(k->n, k->tri, k->enc, 0) : 0);
            if (k->n <= 16 || (size_t)k->nmaps * need <= left) break;
        }
        if (with_se) { /* the heads' standard errors at the heads' side and encoding (the page pairs them entry by entry) */
            ViewKind *q = &kinds[nk++];
            *q = *k;
            q->name = "heads_se";
            q->maps = view_arr(&r->heads_se);
            q->resid = 0;
        }
    }
    return nk;
}

/* One line on how the run is stored, for the page and the caller. */
static void view_note(char *out, size_t cap, const ViewRun *r, const ViewKind *kinds, int nk) {
    int w = snprintf(out, cap, "%s: %d layer%s, S=%d%s", r->label, r->L, r->L > 1 ? "s" : "", r->S,
                     r->causal ? ", causal" : "");
    for (int a = 0; a < nk && w > 0 && (size_t)w < cap; a++) {
        const ViewKind *k = &kinds[a];
        if (!strcmp(k->name, "heads_se")) continue; /* stored as the heads are */
        w += snprintf(out + w, cap - (size_t)w, "; %s %s", k->name, k->enc == VIEW_F16 ? "float16" : "8-bit");
        if (!strcmp(k->name, "heads") && (size_t)w < cap) w += snprintf(out + w, cap - (size_t)w, " (%d heads%s)", r->H,
                                                                  a + 1 < nk ? ", with standard errors" : "");
        if (k->f > 1 && (size_t)w < cap)
            w += snprintf(out + w, cap - (size_t)w, " area-averaged %dx%d to %d x %d", k->f, k->f, k->n, k->n);
    }
}

/* The JSON header of one run (labels, shapes, storage, text). */
static json_t *view_run_json(const ViewRun *r, ViewBlob *bl, const ViewKind *kinds, int nk, const char *note, MpErr *e) {
    json_t *j = json_object(), *arrs = json_object();
    if (!j || !arrs) {
        json_decref(j);
        json_decref(arrs);
        return mp_err_set(e, "view: out of memory"), NULL;
    }
    json_object_set_new(j, "label", json_string(r->label));
    json_object_set_new(j, "dir", json_string(r->dir));
    json_object_set_new(j, "L", json_integer(r->L));
    json_object_set_new(j, "S", json_integer(r->S));
    json_object_set_new(j, "H", json_integer(r->H));
    json_object_set_new(j, "causal", json_boolean(r->causal));
    json_object_set_new(j, "note", json_string(note));
    json_object_set_new(j, "arrays", arrs);
    const json_t *layers = r->meta ? json_object_get(r->meta, "layers") : NULL;
    if (json_is_array(layers) && json_array_size(layers) == (size_t)r->L)
        json_object_set(j, "layers", (json_t *)layers);
    if (r->gram && r->L == 9) {
        json_t *names = json_array();
        for (int k = 0; k < 9; k++) json_array_append_new(names, json_string(mp_train_gram_title(k)));
        json_object_set_new(j, "layer_names", names);
    }
    if (r->meta) {
        static const char *keep[] = {"kind", "model", "data", "n", "batch", "seq", "causal", "rope", "alpha", "norm",
                                     "stats_first_position"};
        json_t *info = json_object();
        for (size_t a = 0; a < sizeof keep / sizeof keep[0]; a++) {
            json_t *v = json_object_get(r->meta, keep[a]);
            if (v && !json_is_object(v) && !json_is_array(v)) json_object_set(info, keep[a], v);
        }
        json_object_set_new(j, "info", info);
    }
    if (r->meta && !r->gram) { /* is each layer's residue resolved at this N (docs/metrics.md) */
        json_t *sg = json_array();
        int any = 0;
        for (int l = 0; l < r->L; l++) {
            char txt[128];
            const int u = mp_signif_note_meta(txt, sizeof txt, r->meta, l);
            any |= u >= 0;
            json_array_append_new(sg, json_pack("{s:s, s:b}", "text", txt, "unresolved", u == 1));
        }
        if (any) json_object_set_new(j, "signif", sg);
        else json_decref(sg);
    }
    if (r->tokens) json_object_set(j, "tokens", r->tokens);
    if (r->stats) json_object_set(j, "stats", r->stats);
    if (r->text_note[0]) json_object_set_new(j, "text_note", json_string(r->text_note));
    for (int a = 0; a < nk; a++) {
        json_t *k = view_encode_kind(bl, &kinds[a], r->S, e);
        if (!k) {
            json_decref(j);
            return NULL;
        }
        json_object_set_new(arrs, kinds[a].name, k);
    }
    return j;
}

/* ================================================================ the page */

static void view_base64(FILE *f, const unsigned char *b, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t a = 0; a < n; a += 3) {
        unsigned v = (unsigned)b[a] << 16 | (a + 1 < n ? (unsigned)b[a + 1] << 8 : 0) | (a + 2 < n ? b[a + 2] : 0);
        char q[4] = {tab[v >> 18 & 63], tab[v >> 12 & 63], a + 1 < n ? tab[v >> 6 & 63] : '=', a + 2 < n ? tab[v & 63] : '='};
        fwrite(q, 1, 4, f);
    }
}

void mp_view_write_style(FILE *f) { fprintf(f, "<style>\n%s</style>\n", view_css); }
void mp_view_write_script(FILE *f) { fprintf(f, "<script>\n%s</script>\n", view_js); }

/* The colour maps of viz/cmap.c, so that the page draws the figures' colours. */
static json_t *view_cmaps_json(void) {
    json_t *c = json_object();
    static const char *names[3] = {"rocket", "vlag", "RdBu"};
    for (int k = 0; k < 3; k++) {
        MpPlotCmap m;
        if (mp_plot_cmap_find(&m, names[k]) != MP_OK) continue;
        json_t *a = json_array();
        for (int q = 0; q < 3 * m.n; q++) json_array_append_new(a, json_integer(m.anchor[q]));
        json_t *e = json_object();
        json_object_set_new(e, "rgb", a);
        json_object_set_new(e, "diverging", json_boolean(m.diverging));
        json_object_set_new(c, names[k], e);
    }
    return c;
}

void mp_html_text(FILE *f, const char *s) {
    for (; s && *s; s++) { /* (NULL: nothing) */
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default: fputc(*s, f);
        }
    }
}

void mp_html_json(FILE *f, const char *json) {
    for (; *json; json++) {
        switch (*json) {
        case '<': fputs("\\u003c", f); break;
        case '>': fputs("\\u003e", f); break;
        case '&': fputs("\\u0026", f); break;
        default: fputc(*json, f);
        }
    }
}

int mp_view_write_block(FILE *f, const char *id, const char *const *dirs, const char *const *labels, int n,
                        const MpViewOptions *o, MpViewSummary *sum, MpErr *e) {
    if (n < 1 || n > MP_VIEW_MAX_RUNS) return mp_err_set(e, "view: %d runs (want 1..%d)", n, MP_VIEW_MAX_RUNS);
    if (!(o->max_mb > 0) || o->max_side < 16) return mp_err_set(e, "view: bad options (max_mb > 0, max_side ≥ 16)");
    ViewRun *runs = calloc((size_t)n, sizeof *runs);
    json_t *top = json_object(), *jr = json_array();
    ViewBlob *blobs = calloc((size_t)n, sizeof *blobs);
    int rc = MP_ERR;
    if (!runs || !top || !jr || !blobs) {
        mp_err_set(e, "view: out of memory");
        goto done;
    }
    json_object_set_new(top, "runs", jr);
    json_object_set_new(top, "title", json_string(o->title));
    json_object_set_new(top, "cmaps", view_cmaps_json());
    size_t budget = (size_t)(o->max_mb * 1048576.0 * 3 / 4 / n);
    if (sum) memset(sum, 0, sizeof *sum);
    for (int r = 0; r < n; r++) {
        if (view_run_load(&runs[r], dirs[r], labels ? labels[r] : NULL, o, e) != MP_OK) goto done;
        ViewKind kinds[5];
        int nk = view_plan(kinds, &runs[r], budget, o->max_side, o->compact);
        char note[512];
        view_note(note, sizeof note, &runs[r], kinds, nk);
        json_t *j = view_run_json(&runs[r], &blobs[r], kinds, nk, note, e);
        if (!j) goto done;
        json_array_append_new(jr, j);
        if (sum) {
            snprintf(sum->notes[r], sizeof sum->notes[r], "%.500s%s%.250s", note, runs[r].text_note[0] ? "; " : "",
                     runs[r].text_note);
            sum->data_bytes += (blobs[r].n + 2) / 3 * 4;
            sum->nruns = r + 1;
        }
        view_run_free(&runs[r]); /* the .npy arrays are no longer needed */
    }
    char *hdr = json_dumps(top, JSON_COMPACT | JSON_ESCAPE_SLASH);
    if (!hdr) {
        mp_err_set(e, "view: out of memory for the header");
        goto done;
    }
    fprintf(f, "<div class=\"mpv\" id=\"%s\"><p class=\"mpv-loading\">loading the maps…</p></div>\n", id);
    fprintf(f, "<script type=\"application/json\" id=\"%s-meta\">", id);
    mp_html_json(f, hdr);
    fputs("</script>\n", f);
    free(hdr);
    for (int r = 0; r < n; r++) {
        fprintf(f, "<script type=\"application/octet-stream\" id=\"%s-r%d\">", id, r);
        view_base64(f, blobs[r].b, blobs[r].n);
        fputs("</script>\n", f);
    }
    rc = ferror(f) ? mp_err_set(e, "view: write error") : MP_OK;
done:
    for (int r = 0; runs && r < n; r++) view_run_free(&runs[r]);
    for (int r = 0; blobs && r < n; r++) free(blobs[r].b);
    free(runs);
    free(blobs);
    json_decref(top);
    return rc;
}

int mp_view_write_html(const char *path, const char *const *dirs, const char *const *labels, int n,
                       const MpViewOptions *o, MpViewSummary *sum, MpErr *e) {
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    FILE *f = af.f;
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>", f);
    mp_html_text(f, o->title[0] ? o->title : "maskpos view");
    fputs("</title>\n", f);
    mp_view_write_style(f);
    fputs("</head><body class=\"mpv-page\">\n", f);
    if (mp_view_write_block(f, "mpv0", dirs, labels, n, o, sum, e) != MP_OK) {
        mp_atomic_abort(&af);
        return MP_ERR; /* (the message names the run folder at fault; nothing was written to path) */
    }
    mp_view_write_script(f);
    fputs("</body></html>\n", f);
    return mp_atomic_commit(&af, e);
}
