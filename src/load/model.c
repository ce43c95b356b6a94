/* model.c — opening HF directories and GGUF files into the description of arch.h, the role
 * table, and lazy dequantising accessors; see model.h.
 *
 * Sections, in the order data flows: names and role table → validation helpers →
 * HF directory (config.json + safetensors shards) → GGUF → accessors → statistics.
 */
#include "load/model.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "core/json.h" /* mp_json_read: model.safetensors.index.json */
#include "load/hfcache.h"  /* mp_hfcache_resolve: hub ids in the local HF cache */
#include "load/hfconfig.h" /* mp_hfconfig_parse */
#include "load/mapfile.h"  /* MpLoadMap */
#include "core/util.h"     /* mp_path_join */

/* ================================================================ names */


/* Expected served shape of a role from the hyperparameters (mp_role_shape): returns ndim (1 or 2). */
static int role_shape(const MpModel *m, MpRole r, int64_t *rows, int64_t *cols) {
    const MpRoleDims d = mp_model_role_dims(m);
    return mp_role_shape(r, &d, rows, cols);
}

/* Is the layer role part of this architecture (its row of the family table)? OUTPUT_NORM_BIAS,
 * global, is bound on its own. */
static int role_present(const MpModel *m, MpRole r) {
    return r != MP_ROLE_OUTPUT_NORM_BIAS && mp_family_has(m->arch, r);
}



/* ================================================================ validation helpers */


void mp_model_free(MpModel *m) {
    free(m->inv_freq_local);
    free(m->layer_local);
    free(m->inv_freq);
    free(m->inv_freq_long);
    free(m->rope_layer);
    if (m->st)
        for (int i = 0; i < m->n_files; i++) mp_st_free(&m->st[i]);
    free(m->st);
    if (m->gguf) mp_gguf_free(m->gguf);
    free(m->gguf);
    if (m->file_names)
        for (int i = 0; i < m->n_files; i++) free(m->file_names[i]);
    free(m->file_names);
    free(m->tensors);
    free(m->layer);
    free(m->expert);
    memset(m, 0, sizeof *m);
}

static int find_tensor(const MpModel *m, const char *name) {
    for (size_t i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name)) return (int)i;
    return -1;
}

static void fmt_shape(char *out, size_t cap, int ndim, const int64_t *shape) {
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < ndim && k < cap; d++) k += (size_t)snprintf(out + k, cap - k, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

/* Binds ref to tensor `name` (rows [row0, row0+rows) of a [total_rows, cols] or [total_rows]
 * tensor). missing_ok: absent → ref->tensor = -1 without error. */
static int bind(MpModel *m, MpModelRef *ref, const char *name, int ndim, int64_t total_rows, int64_t cols, int64_t row0,
                int64_t rows, int missing_ok, const char *cfg_name, MpErr *e) {
    ref->tensor = -1;
    int ti = find_tensor(m, name);
    if (ti < 0) {
        if (missing_ok) return MP_OK;
        return mp_err_set(e, "%s: missing tensor '%s'", m->path, name);
    }
    const MpModelTensor *t = &m->tensors[ti];
    if (!mp_quant_known(t->type)) {
        const MpStTensor *st = m->st ? mp_st_find(&m->st[t->file], name) : NULL;
        return mp_err_set(e, "%s: tensor '%s': dtype %s is unsupported (F32, F16, BF16)", m->file_names[t->file], name,
                          st ? st->dtype : "?");
    }
    int64_t want[2] = {total_rows, cols};
    int ok = t->ndim == ndim && t->shape[0] == total_rows && (ndim == 1 || t->shape[1] == cols);
    if (!ok) {
        char a[128], b[128];
        fmt_shape(a, sizeof a, t->ndim, t->shape);
        fmt_shape(b, sizeof b, ndim, want);
        return mp_err_set(e, "%s: tensor '%s' has shape %s but %s implies %s", m->file_names[t->file], name, a, cfg_name, b);
    }
    size_t rb;
    if (mp_quant_row_bytes(t->type, (uint64_t)(ndim == 2 ? cols : total_rows), &rb))
        return mp_err_set(e, "%s: tensor '%s': %s rows of %lld elements are not whole blocks", m->file_names[t->file], name,
                          mp_quant_name(t->type), (long long)(ndim == 2 ? cols : total_rows));
    ref->tensor = ti;
    ref->ndim = ndim;
    ref->row0 = row0;
    ref->rows = rows;
    ref->cols = ndim == 2 ? cols : 1;
    ref->unpermute_heads = 0;
    return MP_OK;
}

/* GGUF experts: expert j of the 3-D tensor `name` [E, rows, cols] (HF orientation) as a row slice. */
static int bind_expert3(MpModel *m, MpModelRef *ref, const char *name, int64_t rows, int64_t cols, int j, const char *cfg_name, MpErr *e) {
    ref->tensor = -1;
    const int ti = find_tensor(m, name);
    if (ti < 0) return mp_err_set(e, "%s: missing tensor '%s'", m->path, name);
    const MpModelTensor *t = &m->tensors[ti];
    if (!mp_quant_known(t->type)) return mp_err_set(e, "%s: tensor '%s': unsupported type", m->file_names[t->file], name);
    if (t->ndim != 3 || t->shape[0] != m->n_experts || t->shape[1] != rows || t->shape[2] != cols) {
        char a[128], b[128];
        const int64_t want[3] = {m->n_experts, rows, cols};
        fmt_shape(a, sizeof a, t->ndim, t->shape);
        fmt_shape(b, sizeof b, 3, want);
        return mp_err_set(e, "%s: tensor '%s' has shape %s but %s implies %s", m->file_names[t->file], name, a, cfg_name, b);
    }
    size_t rb;
    if (mp_quant_row_bytes(t->type, (uint64_t)cols, &rb))
        return mp_err_set(e, "%s: tensor '%s': %s rows of %lld elements are not whole blocks", m->file_names[t->file], name,
                          mp_quant_name(t->type), (long long)cols);
    memset(ref, 0, sizeof *ref);
    ref->tensor = ti;
    ref->ndim = 2;
    ref->row0 = (int64_t)j * rows;
    ref->rows = rows;
    ref->cols = cols;
    return MP_OK;
}

/* MoE layers, both formats: the router (a layer role) and every expert's gate/up/down into
 * m->expert: HF one [FF, C] / [C, FF] tensor per expert, GGUF row slices of the 3-D tensors. */
static int bind_moe(MpModel *m, const char *cfg_name, MpErr *e) {
    const size_t E = (size_t)m->n_experts;
    char name[512];
    /* the table is L x E x 3 references: first the files must hold that many experts (an untrusted
     * expert count cannot make it large: HF one tensor each, GGUF E rows of each layer's tensors) */
    if (m->format == MP_FORMAT_HF && m->n_tensors / 3 / (size_t)m->n_layers < E)
        return mp_err_set(e, "%s: %zu tensors, but %s implies %d layers of %zu experts", m->path, m->n_tensors, cfg_name, m->n_layers, E);
    for (int l = 0; l < m->n_layers && m->format == MP_FORMAT_GGUF; l++) {
        mp_model_expert_name(m->format, m->arch, MP_ROLE_GATE_EXPS, l, 0, name, sizeof name);
        const int ti = find_tensor(m, name);
        if (ti < 0) return mp_err_set(e, "%s: missing tensor '%s'", m->path, name);
        if (m->tensors[ti].ndim != 3 || m->tensors[ti].shape[0] != m->n_experts)
            return mp_err_set(e, "%s: tensor '%s' does not hold %zu experts as %s implies", m->path, name, E, cfg_name);
    }
    m->expert = mp_try_calloc((size_t)m->n_layers * E * 3, sizeof *m->expert);
    if (!m->expert) return mp_err_set(e, "%s: out of memory", m->path);
    for (int l = 0; l < m->n_layers; l++) {
        int64_t rows, cols;
        int nd = role_shape(m, MP_ROLE_FFN_ROUTER, &rows, &cols);
        mp_model_stored_name(m->format, m->arch, MP_ROLE_FFN_ROUTER, l, name, sizeof name);
        if (bind(m, &m->layer[(size_t)l * MP_ROLE_COUNT + MP_ROLE_FFN_ROUTER], name, nd, rows, cols, 0, rows, 0, cfg_name, e)) return MP_ERR;
        for (int r = MP_ROLE_SHEXP_GATE_INP; r <= MP_ROLE_SHEXP_DOWN && m->ffn_shexp > 0; r++) { /* qwen2moe's shared expert */
            MpModelRef *ref = &m->layer[(size_t)l * MP_ROLE_COUNT + r];
            nd = role_shape(m, (MpRole)r, &rows, &cols);
            mp_model_stored_name(m->format, m->arch, (MpRole)r, l, name, sizeof name);
            const int gguf_vec = r == MP_ROLE_SHEXP_GATE_INP && m->format == MP_FORMAT_GGUF; /* GGUF 1-D [C], served [1, C] */
            if (bind(m, ref, name, gguf_vec ? 1 : nd, gguf_vec ? cols : rows, cols, 0, gguf_vec ? cols : rows, 0, cfg_name, e)) return MP_ERR;
            if (gguf_vec) {
                ref->ndim = 2;
                ref->rows = 1;
                ref->cols = cols;
            }
        }
        for (int k = 0; k < 3; k++) {
            const MpRole r = (MpRole)(MP_ROLE_GATE_EXPS + k);
            const int64_t er = k == 2 ? m->dim : m->ffn, ec = k == 2 ? m->ffn : m->dim;
            for (size_t j = 0; j < E; j++) {
                MpModelRef *ref = &m->expert[((size_t)l * E + j) * 3 + (size_t)k];
                mp_model_expert_name(m->format, m->arch, r, l, (int)j, name, sizeof name);
                if (m->format == MP_FORMAT_GGUF ? bind_expert3(m, ref, name, er, ec, (int)j, cfg_name, e)
                                                : bind(m, ref, name, 2, er, ec, 0, er, 0, cfg_name, e))
                    return MP_ERR;
            }
        }
    }
    return MP_OK;
}

static int alloc_layers(MpModel *m, MpErr *e) {
    m->layer = mp_try_calloc((size_t)m->n_layers * MP_ROLE_COUNT, sizeof *m->layer);
    if (!m->layer) return mp_err_set(e, "%s: out of memory", m->path);
    for (size_t i = 0; i < (size_t)m->n_layers * MP_ROLE_COUNT; i++) m->layer[i].tensor = -1;
    for (int r = 0; r < MP_ROLE_COUNT; r++) m->global[r].tensor = -1;
    return MP_OK;
}

/* Binds every role the family's row declares, both formats: names from mp_model_stored_name;
 * fused roles (phi3's qkv_proj and gate_up_proj, GPT-NeoX's query_key_value) as row slices of their
 * tensor — stacked [Q; K; V] / [gate; up], or per head [q, k, v] blocks of HS rows in HF where the
 * row says so (GPTNeoXAttention's view); the head optional in GGUF (none: tied); HF (1 + w) norms
 * (Gemma) served as 1 + w; the experts (bind_moe). */
static int bind_roles(MpModel *m, const char *cfg_name, MpErr *e) {
    const MpFamily *f = mp_family(m->arch);
    if (mp_family_mha(m->arch) && m->n_kv_heads != m->n_heads)
        return mp_err_set(e, "%s: %s with %d key/value heads for %d query heads: %s has one per query head", m->path, f->name,
                          m->n_kv_heads, m->n_heads, f->name);
    if (alloc_layers(m, e)) return MP_ERR;
    char name[512];
    const int hf = m->format == MP_FORMAT_HF;
    static const MpRole globals[] = {MP_ROLE_TOK_EMBD, MP_ROLE_OUTPUT_NORM, MP_ROLE_OUTPUT, MP_ROLE_OUTPUT_NORM_BIAS};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++) {
        const MpRole r = globals[i];
        int64_t rows, cols;
        int nd = role_shape(m, r, &rows, &cols);
        if ((r == MP_ROLE_OUTPUT && m->tie_embeddings) || (r == MP_ROLE_OUTPUT_NORM_BIAS && !mp_family_has(m->arch, r))) continue;
        mp_model_stored_name(m->format, m->arch, r, -1, name, sizeof name);
        if (bind(m, &m->global[r], name, nd, rows, cols, 0, rows, !hf && r == MP_ROLE_OUTPUT, cfg_name, e)) return MP_ERR;
        if (r == MP_ROLE_OUTPUT && m->global[r].tensor < 0) m->tie_embeddings = 1; /* GGUF: no output.weight means tied */
    }
    const int64_t HS = m->head_dim;
    for (int l = 0; l < m->n_layers; l++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            if (!role_present(m, (MpRole)r) || r >= MP_ROLE_FFN_ROUTER) continue; /* MoE: bind_moe */
            MpModelRef *ref = &m->layer[(size_t)l * MP_ROLE_COUNT + r];
            int64_t rows, cols, total = 0, row0 = 0;
            const int nd = role_shape(m, (MpRole)r, &rows, &cols);
            MpRole first;
            int part;
            const int nparts = mp_family_fused(m->arch, (MpRole)r, &first, &part);
            for (int k = 0; k < nparts; k++) { /* the fused tensor's rows, and where r's begin */
                int64_t pr, pc;
                role_shape(m, (MpRole)(first + k), &pr, &pc);
                if (k < part) row0 += pr;
                total += pr;
            }
            const int heads = nparts > 1 && hf && (f->fuse & MP_FUSE_HF_HEADS); /* equal parts (NH == NKV) of HS rows per head */
            mp_model_stored_name(m->format, m->arch, (MpRole)r, l, name, sizeof name);
            if (bind(m, ref, name, nd, total, cols, heads ? part * HS : row0, rows, 0, cfg_name, e)) return MP_ERR;
            if (heads) ref->qkv_interleave = (int)HS;
            /* HF Gemma keeps w of its (1 + w) norms; GGUF stores 1 + w (convert_hf_to_gguf) */
            ref->add_one = hf && f->norm_plus_one && nd == 1 && r != MP_ROLE_Q_BIAS && r != MP_ROLE_K_BIAS && r != MP_ROLE_V_BIAS;
        }
    if (hf && f->norm_plus_one) m->global[MP_ROLE_OUTPUT_NORM].add_one = 1;
    if (m->n_experts > 0 && bind_moe(m, cfg_name, e)) return MP_ERR;
    return MP_OK;
}

/* ================================================================ HF directory */

static int add_file(MpModel *m, const char *path, MpErr *e) {
    char **nf = realloc(m->file_names, (size_t)(m->n_files + 1) * sizeof *nf);
    if (!nf) return mp_err_set(e, "out of memory");
    m->file_names = nf;
    MpSt *ns = realloc(m->st, (size_t)(m->n_files + 1) * sizeof *ns);
    if (!ns) return mp_err_set(e, "out of memory");
    m->st = ns;
    memset(&m->st[m->n_files], 0, sizeof *m->st);
    if (!(m->file_names[m->n_files] = strdup(path))) return mp_err_set(e, "out of memory");
    m->n_files++;
    return MP_OK;
}

static int hf_collect_tensors(MpModel *m, MpErr *e) {
    size_t total = 0;
    for (int f = 0; f < m->n_files; f++) total += m->st[f].n;
    m->tensors = mp_try_calloc(total ? total : 1, sizeof *m->tensors);
    if (!m->tensors) return mp_err_set(e, "out of memory");
    for (int f = 0; f < m->n_files; f++) {
        for (size_t i = 0; i < m->st[f].n; i++) {
            const MpStTensor *s = &m->st[f].t[i];
            int dup = find_tensor(m, s->name);
            if (dup >= 0)
                return mp_err_set(e, "%s: tensor '%s' also appears in %s", m->file_names[f], s->name,
                                  m->file_names[m->tensors[dup].file]);
            MpModelTensor *t = &m->tensors[m->n_tensors++];
            t->name = s->name;
            t->type = s->supported ? s->type : (MpWType)0xffff; /* reported only if a role uses it */
            t->ndim = s->ndim; /* <= MP_ST_MAX_DIMS = 8 */
            for (int d = 0; d < t->ndim; d++) t->shape[d] = s->shape[d];
            t->data = s->data;
            t->nbytes = (size_t)(s->end - s->begin);
            t->file = f;
        }
    }
    return MP_OK;
}

/* 1 when path exists, 0 when there is nothing by that name, -1 (message set) when it cannot be
 * told or followed: a symbolic-link loop (ELOOP), a dangling link, no permission. */
static int hf_exists(const char *path, MpErr *e) {
    struct stat sb;
    if (stat(path, &sb) == 0) return 1;
    const int err = errno;
    if (err == ENOENT && lstat(path, &sb) == 0)
        return mp_err_set(e, "%s: a symbolic link to a file that does not exist", path), -1;
    if (err == ENOENT) return 0;
    return mp_err_set(e, "%s: %s", path, strerror(err)), -1;
}

static int hf_open_shards(MpModel *m, const char *dir, MpErr *e) {
    char path[4096], idx[4096];
    if (mp_path_join(idx, sizeof idx, dir, "model.safetensors.index.json", e)) return MP_ERR;
    const int has_idx = hf_exists(idx, e);
    if (has_idx < 0) return MP_ERR;
    if (has_idx) {
        json_t *root = mp_json_read(idx, e); /* a FIFO, an empty file, bad JSON: refused, named */
        if (!root) return MP_ERR;
        json_t *wm = json_object_get(root, "weight_map");
        if (!json_is_object(wm) || json_object_size(wm) == 0) {
            json_decref(root);
            return mp_err_set(e, "%s: missing or empty \"weight_map\"", idx);
        }
        const char *name;
        json_t *v;
        int rc = MP_OK;
        json_object_foreach(wm, name, v) {
            if (!json_is_string(v) || strchr(json_string_value(v), '/') || json_string_value(v)[0] == '\0' ||
                !strcmp(json_string_value(v), "..") || !strcmp(json_string_value(v), ".")) {
                rc = mp_err_set(e, "%s: weight_map entry of '%s' is not a file name", idx, name);
                break;
            }
            const char *fn = json_string_value(v);
            int f;
            if (mp_path_join(path, sizeof path, dir, fn, e)) {
                rc = MP_ERR;
                break;
            }
            for (f = 0; f < m->n_files; f++)
                if (!strcmp(m->file_names[f], path)) break;
            if (f == m->n_files) {
                const int has = hf_exists(path, e);
                if (has <= 0) {
                    rc = has < 0 ? MP_ERR : mp_err_set(e, "%s: missing shard '%s' (listed for tensor '%s')", idx, fn, name);
                    break;
                }
                if ((rc = add_file(m, path, e)) != MP_OK) break;
                if ((rc = mp_st_open(&m->st[f], path, e)) != MP_OK) break;
            }
            if (!mp_st_find(&m->st[f], name)) {
                rc = mp_err_set(e, "%s: missing tensor '%s' (model.safetensors.index.json maps it to this shard)", path, name);
                break;
            }
        }
        json_decref(root);
        return rc;
    }
    if (mp_path_join(path, sizeof path, dir, "model.safetensors", e)) return MP_ERR;
    const int has = hf_exists(path, e);
    if (has <= 0)
        return has < 0 ? MP_ERR : mp_err_set(e, "%s: no model.safetensors or model.safetensors.index.json in this directory", dir);
    if (add_file(m, path, e)) return MP_ERR;
    return mp_st_open(&m->st[0], path, e);
}

static int hf_open(MpModel *m, const char *dir, MpErr *e) {
    m->format = MP_FORMAT_HF;
    char cfg[4096];
    if (mp_path_join(cfg, sizeof cfg, dir, "config.json", e)) return MP_ERR;
    MpLoadMap mm;
    if (mp_load_map_open(&mm, cfg, e)) return MP_ERR;
    int rc = mp_hfconfig_parse(m, (const char *)mm.data, mm.size, cfg, e);
    mp_load_map_close(&mm);
    if (rc) return MP_ERR;
    if (hf_open_shards(m, dir, e) || hf_collect_tensors(m, e)) return MP_ERR;
    return bind_roles(m, "config.json", e);
}

/* ================================================================ GGUF */

static int gguf_key(const MpGguf *g, const char *arch, const char *suffix, const MpGgufKv **kv) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *kv = mp_gguf_find(g, key);
    return *kv != NULL;
}

/* Integer hyperparameter {arch}.suffix (any integer type; an array → all entries must agree). */
static int gguf_int(const MpGguf *g, const char *arch, const char *suffix, int required, int64_t def, int64_t lo,
                    int64_t hi, int64_t *out, MpErr *e) {
    const MpGgufKv *kv;
    if (!gguf_key(g, arch, suffix, &kv)) {
        if (required) return mp_err_set(e, "%s: missing key '%s.%s'", g->path, arch, suffix);
        *out = def;
        return MP_OK;
    }
    int64_t v;
    if (kv->type == MP_GGUF_ARRAY) {
        double d0, d;
        if (kv->arr_n == 0 || mp_gguf_arr_num(kv, 0, &d0))
            return mp_err_set(e, "%s: key '%s.%s' is not an integer array", g->path, arch, suffix);
        for (uint64_t i = 1; i < kv->arr_n; i++)
            if (mp_gguf_arr_num(kv, i, &d) || d != d0)
                return mp_err_set(e, "%s: key '%s.%s': per-layer values that differ are not supported", g->path, arch, suffix);
        if (!(d0 >= (double)lo && d0 <= (double)hi) || d0 != floor(d0))
            return mp_err_set(e, "%s: key '%s.%s' is out of range", g->path, arch, suffix);
        *out = (int64_t)d0;
        return MP_OK;
    }
    if (mp_gguf_kv_int(kv, &v)) return mp_err_set(e, "%s: key '%s.%s' is not an integer (%s)", g->path, arch, suffix, mp_gguf_type_name(kv->type));
    if (v < lo || v > hi)
        return mp_err_set(e, "%s: key '%s.%s' = %lld is outside [%lld, %lld]", g->path, arch, suffix, (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return MP_OK;
}

static int gguf_num(const MpGguf *g, const char *arch, const char *suffix, int required, double def, double *out, MpErr *e) {
    const MpGgufKv *kv;
    if (!gguf_key(g, arch, suffix, &kv)) {
        if (required) return mp_err_set(e, "%s: missing key '%s.%s'", g->path, arch, suffix);
        *out = def;
        return MP_OK;
    }
    if (mp_gguf_kv_num(kv, out) || !isfinite(*out))
        return mp_err_set(e, "%s: key '%s.%s' is not a finite number", g->path, arch, suffix);
    return MP_OK;
}

/* A global F32 tensor of n values (rope_freqs / rope_factors_*) → new double array. */
static int gguf_factors(MpModel *m, const char *name, size_t n, double **out, MpErr *e) {
    const MpGgufTensor *t = mp_gguf_find_tensor(m->gguf, name);
    if (!t) return mp_err_set(e, "%s: missing tensor '%s'", m->path, name);
    if (t->n_dims != 1 || (size_t)t->ne[0] != n || t->type != MP_WT_F32)
        return mp_err_set(e, "%s: tensor '%s' must be F32 with %zu values (rotary dim / 2)", m->path, name, n);
    float *tmp = mp_try_calloc(n ? n : 1, sizeof *tmp);
    double *d = mp_try_calloc(n ? n : 1, sizeof *d);
    if (!tmp || !d) {
        free(tmp);
        free(d);
        return mp_err_set(e, "out of memory");
    }
    mp_quant_dequant(tmp, t->data, t->type, n);
    m->bytes_read += t->nbytes;
    for (size_t i = 0; i < n; i++) {
        if (!(tmp[i] > 0) || !isfinite(tmp[i])) {
            free(tmp);
            free(d);
            return mp_err_set(e, "%s: tensor '%s'[%zu] is not a positive number", m->path, name, i);
        }
        d[i] = tmp[i];
    }
    free(tmp);
    *out = d;
    return MP_OK;
}

/* What tells a family's GGUF files apart from others of the same general.architecture (its row's
 * gguf_marker): a key {arch}.<marker> with a nonzero integer, or a tensor of that name. */
typedef struct GgufMarkerCtx {
    const MpGguf *g;
    const char *arch;
} GgufMarkerCtx;
static int gguf_has_marker(const char *marker, void *ctx) {
    const GgufMarkerCtx *c = ctx;
    if (strchr(marker, '.')) return mp_gguf_find_tensor(c->g, marker) != NULL;
    int64_t v;
    MpErr ignored;
    return gguf_int(c->g, c->arch, marker, 0, 0, 0, INT32_MAX, &v, &ignored) == MP_OK && v > 0;
}

/* general.architecture → arch into arch[64] (the family table's names and markers, arch.c); split
 * files and experts of a dense family refused. */
static int gguf_arch(MpModel *m, char arch[64], MpErr *e) {
    const MpGguf *g = m->gguf;
    const MpGgufKv *kv = mp_gguf_find(g, "general.architecture");
    if (!kv) return mp_err_set(e, "%s: missing key 'general.architecture'", g->path);
    if (mp_gguf_kv_str(kv, arch, 64)) return mp_err_set(e, "%s: key 'general.architecture' is not a short string", g->path);
    if (mp_family_from_gguf(arch, NULL, NULL) < 0) {
        char list[512];
        mp_family_list(MP_FAMILY_GGUF, ", ", list, sizeof list);
        return mp_err_set(e, "%s: general.architecture '%.40s' is not supported (%s; mixtral is llama with experts)", g->path, arch, list);
    }
    int64_t v;
    const MpGgufKv *split = mp_gguf_find(g, "split.count");
    if (split && mp_gguf_kv_int(split, &v) == MP_OK && v > 1)
        return mp_err_set(e, "%s: key 'split.count' = %lld: split GGUF files are not supported (merge them with llama.cpp's gguf-split --merge)",
                          g->path, (long long)v);
    if (gguf_int(g, arch, "expert_count", 0, 0, 0, INT32_MAX, &v, e)) return MP_ERR;
    GgufMarkerCtx mc = {g, arch};
    m->arch = (MpArch)mp_family_from_gguf(arch, gguf_has_marker, &mc); /* convert_hf_to_gguf writes Mixtral as llama */
    if (v > 0 && !mp_family_has(m->arch, MP_ROLE_FFN_ROUTER)) {
        char list[256];
        mp_family_list(MP_FAMILY_GGUF_MOE, ", ", list, sizeof list);
        return mp_err_set(e, "%s: key '%s.expert_count': mixture-of-experts %s models are not supported (llama with experts, %s)", g->path, arch, arch, list);
    }
    return MP_OK;
}

/* Sizes, heads, norm epsilon, residual layout, RoPE dims, context, window, special tokens. */
static int gguf_dims(MpModel *m, const char *arch, MpErr *e) {
    const MpGguf *g = m->gguf;
    int64_t v;
    if (gguf_int(g, arch, "block_count", 1, 0, 1, 4096, &v, e)) return MP_ERR;
    m->n_layers = (int)v;
    if (gguf_int(g, arch, "embedding_length", 1, 0, 1, 1 << 24, &v, e)) return MP_ERR;
    m->dim = (int)v;
    if (gguf_int(g, arch, "feed_forward_length", 1, 0, 1, 1 << 24, &v, e)) return MP_ERR;
    m->ffn = (int)v;
    if (gguf_int(g, arch, "attention.head_count", 1, 0, 1, 4096, &v, e)) return MP_ERR;
    m->n_heads = (int)v;
    if (gguf_int(g, arch, "attention.head_count_kv", 0, m->n_heads, 1, 4096, &v, e)) return MP_ERR;
    m->n_kv_heads = (int)v;
    if (m->n_heads % m->n_kv_heads)
        return mp_err_set(e, "%s: head_count %d is not a multiple of head_count_kv %d", g->path, m->n_heads, m->n_kv_heads);
    int64_t def_hd = m->dim % m->n_heads == 0 ? m->dim / m->n_heads : 0;
    if (gguf_int(g, arch, "attention.key_length", def_hd == 0, def_hd, 2, 1 << 24, &v, e)) return MP_ERR;
    m->head_dim = (int)v;
    if (gguf_int(g, arch, "attention.value_length", 0, m->head_dim, 1, 1 << 24, &v, e)) return MP_ERR;
    if (v != m->head_dim) return mp_err_set(e, "%s: key '%s.attention.value_length' differs from key_length: not supported", g->path, arch);
    if ((int64_t)m->n_heads * m->head_dim > (1 << 24)) return mp_err_set(e, "%s: head_count x key_length is too large", g->path);
    const char *eps_key = mp_gguf_key_suffix(mp_family_gguf_key(m->arch, MP_GGK_LAYER_NORM_EPSILON) ? MP_GGK_LAYER_NORM_EPSILON
                                                                                                  : MP_GGK_LAYER_NORM_RMS_EPSILON);
    if (gguf_num(g, arch, eps_key, 1, 0, &m->norm_eps, e)) return MP_ERR;
    if (!(m->norm_eps >= 0)) return mp_err_set(e, "%s: key '%s.%s' is negative", g->path, arch, eps_key);
    if (mp_family_gguf_key(m->arch, MP_GGK_USE_PARALLEL_RESIDUAL)) { /* llama.cpp's default: parallel */
        const MpGgufKv *pr;
        m->parallel_residual = 1;
        if (gguf_key(g, arch, "use_parallel_residual", &pr)) {
            if (pr->type != MP_GGUF_BOOL) return mp_err_set(e, "%s: key '%s.use_parallel_residual' is not a boolean", g->path, arch);
            m->parallel_residual = pr->u != 0;
        }
    }
    if (gguf_num(g, arch, "rope.freq_base", 0, 10000.0, &m->rope_theta, e)) return MP_ERR;
    if (!(m->rope_theta > 1)) return mp_err_set(e, "%s: key '%s.rope.freq_base' must be > 1", g->path, arch);
    if (gguf_int(g, arch, "rope.dimension_count", 0, m->head_dim, 2, m->head_dim, &v, e)) return MP_ERR;
    if (v % 2) return mp_err_set(e, "%s: key '%s.rope.dimension_count' must be even", g->path, arch);
    m->rot_dim = (int)v;
    if (gguf_int(g, arch, "context_length", 0, 0, 1, INT32_MAX, &v, e)) return MP_ERR; /* present: >= 1 */
    m->max_pos = (int)v;
    if (gguf_int(g, arch, "attention.sliding_window", 0, 0, 0, INT32_MAX, &v, e)) return MP_ERR;
    /* windows as llama.cpp applies them (the row's gguf_win): gemma2 and gemma3's local layers
     * (gguf_scaled); its llama (Mistral's GGUFs), qwen2/3 and phi3 ("Phi SWA is currently
     * disabled") attend to every earlier key whatever this key says; its olmo2 windows 3 of 4
     * layers, which maskpos does not do */
    const MpWinRule win = mp_family(m->arch)->gguf_win;
    if (win == MP_WIN_REFUSED && v > 0)
        return mp_err_set(e, "%s: key '%s.attention.sliding_window' = %lld: sliding-window %s layers are not supported", g->path,
                          arch, (long long)v, mp_model_arch_name(m->arch));
    m->sliding_window = win == MP_WIN_PERIOD ? (int)v : 0;
    const MpGgufKv *bk = mp_gguf_find(g, "tokenizer.ggml.bos_token_id"), *ek = mp_gguf_find(g, "tokenizer.ggml.eos_token_id");
    m->bos_id = m->eos_id = -1;
    if (bk && (mp_gguf_kv_int(bk, &v) == MP_OK) && v >= 0 && v <= INT32_MAX) m->bos_id = (int)v;
    if (ek && (mp_gguf_kv_int(ek, &v) == MP_OK) && v >= 0 && v <= INT32_MAX) m->eos_id = (int)v;
    mp_model_arch_features(m);
    return MP_OK;
}

/* Embedding-scaled families (Gemma 1/2/3): llama.cpp's scales, caps and local layers. */
static int gguf_scaled(MpModel *m, const char *arch, MpErr *e) {
    const MpGguf *g = m->gguf;
    const MpFamily *f = mp_family(m->arch);
    if (!f->embed_scaled) return MP_OK;
    m->embed_scale = sqrtf((float)m->dim); /* f32 sqrt(C) */
    /* llama.cpp's attention scale: (C/NH)^-1/2 for the 27B models (gemma2: 46 layers, gemma3: 62), HS^-1/2 otherwise */
    m->attn_scale = f->gguf_scale_layers && m->n_layers == f->gguf_scale_layers ? 1.0 / sqrt((double)(m->dim / m->n_heads))
                                                                                : 1.0 / sqrt((double)m->head_dim);
    if (mp_family_gguf_key(m->arch, MP_GGK_ATTN_LOGIT_SOFTCAPPING) &&
        (gguf_num(g, arch, "attn_logit_softcapping", 0, 0, &m->attn_softcap, e) ||
         gguf_num(g, arch, "final_logit_softcapping", 0, 0, &m->final_softcap, e)))
        return MP_ERR;
    if (m->attn_softcap < 0 || m->final_softcap < 0) return mp_err_set(e, "%s: a negative soft-capping value", g->path);
    if (f->gguf_win != MP_WIN_PERIOD) return MP_OK;
    if (!m->sliding_window && !f->gguf_win_def) return mp_err_set(e, "%s: missing key '%s.attention.sliding_window'", g->path, arch);
    if (!m->sliding_window) m->sliding_window = f->gguf_win_def; /* llama.cpp's default (gemma2 4096) */
    double lb = 0; /* gemma3's local layers: their own base (rope.freq_base_swa, default 10000) */
    if (mp_family_gguf_key(m->arch, MP_GGK_ROPE_FREQ_BASE_SWA) && gguf_num(g, arch, "rope.freq_base_swa", 0, f->win_local_base, &lb, e))
        return MP_ERR;
    return mp_model_local_layers(m, f->win_period, lb, e); /* gemma2: layers 0, 2, 4, ... local (set_swa_pattern(2)); gemma3: 5 of 6 */
}

/* Vocabulary from the embedding's rows, checked against {arch}.vocab_size. */
static int gguf_vocab(MpModel *m, const char *arch, MpErr *e) {
    const MpGguf *g = m->gguf;
    int64_t v;
    /* vocab from the embedding (ne[1]) */
    const MpGgufTensor *te = mp_gguf_find_tensor(g, "token_embd.weight");
    if (!te) return mp_err_set(e, "%s: missing tensor 'token_embd.weight'", g->path);
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1 << 27))
        return mp_err_set(e, "%s: tensor 'token_embd.weight' is not [n_embd, n_vocab]", g->path);
    m->vocab = (int)te->ne[1];
    if (gguf_int(g, arch, "vocab_size", 0, m->vocab, 1, 1 << 27, &v, e)) return MP_ERR;
    if (v != m->vocab)
        return mp_err_set(e, "%s: key '%s.vocab_size' = %lld but tensor 'token_embd.weight' has %d rows", g->path, arch, (long long)v, m->vocab);

    return MP_OK;
}

/* RoPE scaling (none, linear, rope_freqs, longrope) and the tables. */
static int gguf_rope(MpModel *m, const char *arch, MpErr *e) {
    const MpGguf *g = m->gguf;
    int64_t v;
    /* RoPE scaling */
    char st[32] = "none";
    const MpGgufKv *sk;
    if (gguf_key(g, arch, "rope.scaling.type", &sk) && mp_gguf_kv_str(sk, st, sizeof st))
        return mp_err_set(e, "%s: key '%s.rope.scaling.type' is not a short string", g->path, arch);
    m->rope_factor = 1.0;
    m->rope_attn_factor = 1.0;
    double *sf = NULL, *lf = NULL;
    size_t half = (size_t)m->rot_dim / 2;
    int rc = MP_OK;
    if (mp_gguf_find_tensor(g, "rope_factors_long.weight") || !strcmp(st, "longrope")) {
        m->rope_scaling = MP_ROPE_LONGROPE;
        if (gguf_int(g, arch, "rope.scaling.original_context_length", 1, 0, 1, INT32_MAX, &v, e)) return MP_ERR;
        m->rope_orig_ctx = (int)v;
        m->rope_factor = m->max_pos > 0 ? (double)m->max_pos / (double)m->rope_orig_ctx : 1.0;
        double def = m->rope_factor <= 1 ? 1.0 : sqrt(1 + log(m->rope_factor) / log((double)m->rope_orig_ctx));
        if (gguf_num(g, arch, "rope.scaling.attn_factor", 0, def, &m->rope_attn_factor, e)) return MP_ERR;
        if (gguf_factors(m, "rope_factors_short.weight", half, &sf, e) || gguf_factors(m, "rope_factors_long.weight", half, &lf, e))
            rc = MP_ERR;
    } else if (!strcmp(st, "linear") || !strcmp(st, "none")) {
        if (gguf_num(g, arch, "rope.scaling.factor", 0, 1.0, &m->rope_factor, e)) return MP_ERR;
        if (!(m->rope_factor > 0)) return mp_err_set(e, "%s: key '%s.rope.scaling.factor' must be > 0", g->path, arch);
        if (m->rope_factor != 1.0) m->rope_scaling = MP_ROPE_LINEAR;
        if (mp_gguf_find_tensor(g, "rope_freqs.weight")) {
            if (m->rope_scaling != MP_ROPE_NONE)
                return mp_err_set(e, "%s: tensor 'rope_freqs.weight' together with linear scaling is not supported", g->path);
            m->rope_scaling = MP_ROPE_FREQ_FACTORS;
            if (gguf_factors(m, "rope_freqs.weight", half, &sf, e)) rc = MP_ERR;
        }
    } else {
        return mp_err_set(e, "%s: key '%s.rope.scaling.type' = '%s' is not supported (none, linear, longrope)", g->path, arch, st);
    }
    if (rc == MP_OK) rc = mp_model_rope_init(m, sf, lf, e);
    free(sf);
    free(lf);
    return rc;
}

/* Mixture of experts: E, K, one expert's size; llama.cpp renormalises the K weights of llama and
 * qwen3moe (build_moe_ffn with norm_w = true), not of qwen2moe (false), whose shared expert is
 * expert_shared_feed_forward_length wide (default feed_forward_length, as llama.cpp). */
static int gguf_moe(MpModel *m, const char *arch, MpErr *e) {
    const MpGguf *g = m->gguf;
    int64_t v;
    if (!mp_family_has(m->arch, MP_ROLE_FFN_ROUTER)) return MP_OK;
    if (gguf_int(g, arch, "expert_count", 1, 0, 1, 1 << 16, &v, e)) return MP_ERR;
    m->n_experts = (int)v;
    if (gguf_int(g, arch, "expert_used_count", 1, 0, 1, m->n_experts, &v, e)) return MP_ERR;
    m->n_experts_used = (int)v;
    m->moe_norm_topk = mp_family(m->arch)->gguf_moe_renorm;
    if (mp_family_gguf_key(m->arch, MP_GGK_EXPERT_SHARED_FEED_FORWARD_LENGTH)) { /* qwen2moe: default feed_forward_length */
        if (gguf_int(g, arch, "expert_shared_feed_forward_length", 0, m->ffn, 1, 1 << 24, &v, e)) return MP_ERR;
        m->ffn_shexp = (int)v;
    }
    if (mp_family_gguf_key(m->arch, MP_GGK_EXPERT_FEED_FORWARD_LENGTH)) { /* qwen3moe, qwen2moe: one expert's width */
        if (gguf_int(g, arch, "expert_feed_forward_length", 1, 0, 1, 1 << 24, &v, e)) return MP_ERR;
        m->ffn = (int)v;
    }
    return MP_OK;
}

static int gguf_describe(MpModel *m, MpErr *e) {
    char arch[64];
    if (gguf_arch(m, arch, e) || gguf_dims(m, arch, e) || gguf_moe(m, arch, e) || gguf_scaled(m, arch, e) || gguf_vocab(m, arch, e)) return MP_ERR;
    return gguf_rope(m, arch, e);
}

static int gguf_collect(MpModel *m, MpErr *e) {
    const MpGguf *g = m->gguf;
    m->tensors = mp_try_calloc(g->n_tensors ? g->n_tensors : 1, sizeof *m->tensors);
    if (!m->tensors) return mp_err_set(e, "out of memory");
    for (size_t i = 0; i < g->n_tensors; i++) {
        const MpGgufTensor *s = &g->t[i];
        MpModelTensor *t = &m->tensors[m->n_tensors++];
        t->name = s->name;
        t->type = s->type;
        t->ndim = (int)s->n_dims;
        for (int d = 0; d < t->ndim; d++) t->shape[d] = s->ne[t->ndim - 1 - d]; /* reversed: HF orientation */
        t->data = s->data;
        t->nbytes = s->nbytes;
        t->file = 0;
    }
    return MP_OK;
}

static int gguf_finish(MpModel *m, MpErr *e) {
    m->format = MP_FORMAT_GGUF;
    m->n_files = 1;
    m->file_names = mp_try_calloc(1, sizeof *m->file_names);
    if (!m->file_names || !(m->file_names[0] = strdup(m->path))) return mp_err_set(e, "out of memory");
    if (gguf_describe(m, e) || gguf_collect(m, e)) return MP_ERR;
    if (bind_roles(m, "the GGUF metadata", e)) return MP_ERR;
    if (mp_family(m->arch)->gguf_permute_qk) { /* convert_hf_to_gguf permuted llama Q/K rows (and biases) */
        for (int l = 0; l < m->n_layers; l++) {
            MpModelRef *L = &m->layer[(size_t)l * MP_ROLE_COUNT];
            L[MP_ROLE_Q].unpermute_heads = L[MP_ROLE_Q_BIAS].unpermute_heads = m->n_heads;
            L[MP_ROLE_K].unpermute_heads = L[MP_ROLE_K_BIAS].unpermute_heads = m->n_kv_heads;
        }
        if (m->head_dim % 2) return mp_err_set(e, "%s: llama head dim %d is odd", m->path, m->head_dim);
    }
    return MP_OK;
}

int mp_model_open_gguf_buffer(MpModel *m, const uint8_t *buf, size_t n, const char *name, MpErr *e) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", name);
    m->gguf = mp_try_calloc(1, sizeof *m->gguf);
    if (!m->gguf) return mp_err_set(e, "out of memory");
    if (mp_gguf_parse(m->gguf, buf, n, name, e) || gguf_finish(m, e)) {
        mp_model_free(m);
        return MP_ERR;
    }
    return MP_OK;
}

int mp_model_open(MpModel *m, const char *path, MpErr *e) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    struct stat sb;
    char snap[4096]; /* a hub id ("org/name") names its snapshot in the local HF cache (load/hfcache.h) */
    if (stat(path, &sb) != 0 && errno == ENOENT && mp_hfcache_is_id(path)) {
        if (mp_hfcache_resolve(path, snap, sizeof snap, e) != MP_OK) return MP_ERR;
        path = snap;
        snprintf(m->path, sizeof m->path, "%s", path);
    }
    if (stat(path, &sb) != 0) return mp_err_set(e, "%s: %s", path, strerror(errno));
    int rc;
    if (S_ISDIR(sb.st_mode)) {
        rc = hf_open(m, path, e);
    } else {
        size_t n = strlen(path);
        if (n > 12 && !strcmp(path + n - 12, ".safetensors")) { /* a file inside an HF directory */
            char dir[4096];
            snprintf(dir, sizeof dir, "%s", path);
            char *slash = strrchr(dir, '/');
            if (slash) *slash = '\0';
            else snprintf(dir, sizeof dir, ".");
            snprintf(m->path, sizeof m->path, "%s", dir);
            rc = hf_open(m, dir, e);
        } else {
            m->gguf = mp_try_calloc(1, sizeof *m->gguf);
            if (!m->gguf) return mp_err_set(e, "out of memory");
            rc = mp_gguf_open(m->gguf, path, e);
            if (rc == MP_OK) rc = gguf_finish(m, e);
        }
    }
    if (rc != MP_OK) mp_model_free(m);
    return rc;
}

/* ================================================================ accessors */

static const MpModelRef *model_ref(const MpModel *m, MpRole role, int layer) {
    const MpModelRef *r;
    if ((unsigned)role >= MP_ROLE_COUNT) return NULL;
    if (mp_model_role_is_global(role)) {
        if (role == MP_ROLE_OUTPUT && m->tie_embeddings) role = MP_ROLE_TOK_EMBD;
        r = &m->global[role];
    } else {
        if (layer < 0 || layer >= m->n_layers || !m->layer) return NULL;
        r = &m->layer[(size_t)layer * MP_ROLE_COUNT + role];
    }
    return r->tensor >= 0 ? r : NULL;
}

int mp_model_shape(const MpModel *m, MpRole role, int layer, int64_t shape[2]) {
    const MpModelRef *r = model_ref(m, role, layer);
    if (!r) return 0;
    shape[0] = r->rows;
    shape[1] = r->cols;
    return r->ndim;
}

MpWType mp_model_stored_type(const MpModel *m, MpRole role, int layer) {
    const MpModelRef *r = model_ref(m, role, layer);
    return r ? m->tensors[r->tensor].type : MP_WT_F32;
}

/* Accessors may run on several threads at once: the statistic is updated atomically. */
static void count_read(MpModel *m, size_t n) { __atomic_fetch_add(&m->bytes_read, n, __ATOMIC_RELAXED); }

/* Stored row of served row j (undoing the llama GGUF interleave within each head):
 * HF_row[p*d2 + i] = GGUF_row[2i + p]. */
static int64_t src_row(const MpModelRef *r, int64_t j) {
    if (r->qkv_interleave > 0) return r->row0 + (j / r->qkv_interleave) * 3 * r->qkv_interleave + j % r->qkv_interleave;
    if (r->unpermute_heads <= 0) return r->row0 + j;
    int64_t hd = r->rows / r->unpermute_heads, d2 = hd / 2, h = j / hd, jj = j % hd;
    int64_t p = jj / d2, i = jj % d2;
    return r->row0 + h * hd + 2 * i + p;
}

static int ref_rows_f32(MpModel *m, const MpModelRef *r, MpRole role, int64_t r0, int64_t n, float *out, MpErr *e) {
    if (r0 < 0 || n < 0 || r0 > r->rows || n > r->rows - r0)
        return mp_err_set(e, "%s: rows [%lld, +%lld) outside role '%s' (%lld rows)", m->path, (long long)r0, (long long)n,
                          mp_model_role_name(role), (long long)r->rows);
    const MpModelTensor *t = &m->tensors[r->tensor];
    if (r->ndim == 1) { /* 1-D: dequantise the whole (small) tensor, then pick elements */
        int64_t total = t->shape[0];
        float *tmp = mp_try_calloc((size_t)(total ? total : 1), sizeof *tmp);
        if (!tmp) return mp_err_set(e, "out of memory");
        mp_quant_dequant(tmp, t->data, t->type, (size_t)total);
        count_read(m, t->nbytes);
        for (int64_t j = 0; j < n; j++) out[j] = r->add_one ? 1.0f + tmp[src_row(r, r0 + j)] : tmp[src_row(r, r0 + j)];
        free(tmp);
        return MP_OK;
    }
    size_t rb;
    if (mp_quant_row_bytes(t->type, (uint64_t)r->cols, &rb)) return mp_err_set(e, "%s: tensor '%s': bad row size", m->path, t->name);
    for (int64_t j = 0; j < n; j++) {
        int64_t s = src_row(r, r0 + j);
        mp_quant_dequant(out + (size_t)j * (size_t)r->cols, t->data + (size_t)s * rb, t->type, (size_t)r->cols);
        count_read(m, rb);
    }
    return MP_OK;
}

int mp_model_rows_f32(MpModel *m, MpRole role, int layer, int64_t r0, int64_t n, float *out, MpErr *e) {
    const MpModelRef *r = model_ref(m, role, layer);
    if (!r) return mp_err_set(e, "%s: no tensor for role '%s' of layer %d", m->path, mp_model_role_name(role), layer);
    return ref_rows_f32(m, r, role, r0, n, out, e);
}

static const MpModelRef *expert_ref(const MpModel *m, MpRole role, int layer, int expert) {
    if (!m->expert || role < MP_ROLE_GATE_EXPS || role > MP_ROLE_DOWN_EXPS || layer < 0 || layer >= m->n_layers || expert < 0 ||
        expert >= m->n_experts)
        return NULL;
    const MpModelRef *r = &m->expert[((size_t)layer * (size_t)m->n_experts + (size_t)expert) * 3 + (size_t)(role - MP_ROLE_GATE_EXPS)];
    return r->tensor >= 0 ? r : NULL;
}

int mp_model_expert_shape(const MpModel *m, MpRole role, int layer, int expert, int64_t shape[2]) {
    const MpModelRef *r = expert_ref(m, role, layer, expert);
    if (!r) return 0;
    shape[0] = r->rows;
    shape[1] = r->cols;
    return 2;
}

int mp_model_expert_rows_f32(MpModel *m, MpRole role, int layer, int expert, int64_t r0, int64_t n, float *out, MpErr *e) {
    const MpModelRef *r = expert_ref(m, role, layer, expert);
    if (!r) return mp_err_set(e, "%s: no expert %d '%s' in layer %d", m->path, expert, mp_model_role_name(role), layer);
    return ref_rows_f32(m, r, role, r0, n, out, e);
}

int mp_model_expert_tensor(const MpModel *m, MpRole role, int layer, int expert) {
    const MpModelRef *r = expert_ref(m, role, layer, expert);
    return r ? r->tensor : -1;
}

int mp_model_tensor_f32(MpModel *m, MpRole role, int layer, float *out, size_t cap, int64_t shape[2], MpErr *e) {
    const MpModelRef *r = model_ref(m, role, layer);
    if (!r) return mp_err_set(e, "%s: no tensor for role '%s' of layer %d", m->path, mp_model_role_name(role), layer);
    size_t need = (size_t)r->rows * (size_t)r->cols; /* both < 2^27 * 2^24: fits in size_t */
    if (cap < need) return mp_err_set(e, "%s: role '%s': buffer of %zu floats, need %zu", m->path, mp_model_role_name(role), cap, need);
    if (shape) {
        shape[0] = r->rows;
        shape[1] = r->cols;
    }
    return mp_model_rows_f32(m, role, layer, 0, r->rows, out, e);
}

const float *mp_model_tensor_borrow(MpModel *m, MpRole role, int layer, int64_t shape[2]) {
    const MpModelRef *r = model_ref(m, role, layer);
    if (!r) return NULL;
    const MpModelTensor *t = &m->tensors[r->tensor];
    if (t->type != MP_WT_F32 || r->unpermute_heads > 0 || r->qkv_interleave > 0 || r->add_one || ((uintptr_t)t->data % sizeof(float))) return NULL;
    if (shape) {
        shape[0] = r->rows;
        shape[1] = r->cols;
    }
    count_read(m, (size_t)r->rows * (size_t)r->cols * 4);
    return (const float *)(const void *)t->data + (size_t)r->row0 * (size_t)r->cols;
}

/* ================================================================ statistics */

static uint64_t tensor_elems(const MpModelTensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

/* Parameters implied by the hyperparameters alone (every role of the arch; output once if tied). */
static uint64_t param_count_config(const MpModel *m) {
    uint64_t n = 0;
    for (int r = 0; r < MP_ROLE_FIRST_LAYER; r++) {
        int64_t rows, cols;
        if (r == MP_ROLE_OUTPUT && m->tie_embeddings) continue;
        role_shape(m, (MpRole)r, &rows, &cols);
        n += (uint64_t)rows * (uint64_t)cols;
    }
    for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
        int64_t rows, cols;
        if (!role_present(m, (MpRole)r) || !role_shape(m, (MpRole)r, &rows, &cols)) continue;
        n += (uint64_t)m->n_layers * (uint64_t)rows * (uint64_t)cols;
    }
    if (m->layer_norm) n += (uint64_t)m->dim; /* OUTPUT_NORM_BIAS */
    return n;
}

int mp_model_open_config(MpModel *m, const char *path, MpErr *e) {
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", path);
    m->format = MP_FORMAT_HF;
    MpLoadMap mm;
    if (mp_load_map_open(&mm, path, e)) return MP_ERR;
    int rc = mp_hfconfig_parse(m, (const char *)mm.data, mm.size, path, e);
    mp_load_map_close(&mm);
    if (rc == MP_OK) rc = alloc_layers(m, e);
    if (rc != MP_OK) mp_model_free(m);
    return rc;
}

uint64_t mp_model_active_param_count(const MpModel *m) {
    const uint64_t idle = (uint64_t)m->n_layers * (uint64_t)(m->n_experts - m->n_experts_used) * 3u * (uint64_t)m->ffn * (uint64_t)m->dim;
    return mp_model_param_count(m) - (m->n_experts > 0 ? idle : 0);
}

uint64_t mp_model_param_count(const MpModel *m) {
    if (m->n_tensors == 0) return param_count_config(m); /* mp_model_open_config */
    uint64_t n = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        const char *nm = m->tensors[i].name;
        if (!strcmp(nm, "rope_freqs.weight") || !strncmp(nm, "rope_factors_", 13)) continue; /* not parameters */
        if (m->tie_embeddings && m->format == MP_FORMAT_HF && !strcmp(nm, "lm_head.weight")) continue;
        n += tensor_elems(&m->tensors[i]);
    }
    return n;
}

uint64_t mp_model_layer_f32_bytes(const MpModel *m, int n_layers) {
    uint64_t b = 0;
    if (n_layers > m->n_layers) n_layers = m->n_layers;
    for (int l = 0; l < n_layers; l++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            int64_t s[2];
            if (mp_model_role_is_global((MpRole)r)) continue;
            if (m->n_tensors == 0 || (r >= MP_ROLE_GATE_EXPS && r <= MP_ROLE_DOWN_EXPS)) { /* shapes from the hyperparameters
                (mp_model_open_config; the experts, served one by one) */
                if (role_present(m, (MpRole)r) && role_shape(m, (MpRole)r, &s[0], &s[1])) b += (uint64_t)s[0] * (uint64_t)s[1] * 4;
            } else if (mp_model_shape(m, (MpRole)r, l, s)) {
                b += (uint64_t)s[0] * (uint64_t)s[1] * 4;
            }
        }
    return b;
}

/* ================================================================ weight sanity */

/* Index of the first non-finite element of a stored tensor, or SIZE_MAX when all are finite. */
static size_t tensor_first_nonfinite(const MpModelTensor *t) {
    const uint8_t *p = t->data;
    if (t->type == MP_WT_F32) {
        for (size_t i = 0; i + 4 <= t->nbytes; i += 4) {
            uint32_t u;
            memcpy(&u, p + i, 4);
            if ((u & 0x7f800000u) == 0x7f800000u) return i / 4;
        }
        return SIZE_MAX;
    }
    if (t->type == MP_WT_F16 || t->type == MP_WT_BF16) {
        const uint16_t mask = t->type == MP_WT_F16 ? 0x7c00u : 0x7f80u;
        for (size_t i = 0; i + 2 <= t->nbytes; i += 2) {
            uint16_t u;
            memcpy(&u, p + i, 2);
            if ((u & mask) == mask) return i / 2;
        }
        return SIZE_MAX;
    }
    const size_t be = mp_quant_block_elems(t->type), bb = mp_quant_block_bytes(t->type);
    if (!be || !bb) return SIZE_MAX;
    float buf[256];
    const size_t per = be <= 256 ? 256 / be : 1; /* blocks per chunk */
    if (be > 256) return SIZE_MAX;
    const size_t nblocks = t->nbytes / bb;
    for (size_t b = 0; b < nblocks; b += per) {
        const size_t k = nblocks - b < per ? nblocks - b : per;
        mp_quant_dequant(buf, p + b * bb, t->type, k * be);
        for (size_t i = 0; i < k * be; i++)
            if (!isfinite(buf[i])) return b * be + i;
    }
    return SIZE_MAX;
}

unsigned char *mp_model_read_set(const MpModel *m, int n_layers) {
    if (n_layers > m->n_layers) n_layers = m->n_layers;
    unsigned char *seen = mp_try_calloc(m->n_tensors ? m->n_tensors : 1, 1);
    if (!seen) return NULL;
    for (int r = 0; r < MP_ROLE_COUNT; r++)
        if (m->global[r].tensor >= 0 && (size_t)m->global[r].tensor < m->n_tensors) seen[m->global[r].tensor] = 1;
    for (int l = 0; l < n_layers && m->layer; l++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            const MpModelRef *ref = &m->layer[(size_t)l * MP_ROLE_COUNT + r];
            if (ref->tensor >= 0 && (size_t)ref->tensor < m->n_tensors) seen[ref->tensor] = 1;
        }
    for (size_t i = 0; m->expert && i < (size_t)n_layers * (size_t)m->n_experts * 3; i++)
        if (m->expert[i].tensor >= 0 && (size_t)m->expert[i].tensor < m->n_tensors) seen[m->expert[i].tensor] = 1;
    return seen;
}

int mp_model_check_finite(const MpModel *m, int n_layers, MpErr *e) {
    unsigned char *seen = mp_model_read_set(m, n_layers);
    if (!seen) return mp_err_set(e, "%s: out of memory", m->path);
    int rc = MP_OK;
    for (size_t i = 0; i < m->n_tensors && rc == MP_OK; i++) {
        if (!seen[i] || !mp_quant_known(m->tensors[i].type)) continue;
        const size_t at = tensor_first_nonfinite(&m->tensors[i]);
        if (at != SIZE_MAX)
            rc = mp_err_set(e, "%s: tensor '%s' holds a non-finite value (NaN or ±Inf) at element %zu",
                            m->n_files ? m->file_names[m->tensors[i].file] : m->path, m->tensors[i].name, at);
    }
    free(seen);
    return rc;
}

int mp_model_context_check(const MpModel *m, int64_t seq, int allow_long, int *beyond, MpErr *e) {
    *beyond = m->max_pos <= 0 || seq > m->max_pos;
    if (!*beyond || allow_long) return MP_OK;
    if (m->max_pos <= 0)
        return mp_err_set(e, "%s: the model does not state its trained context (no max_position_embeddings / "
                             "context_length), so --seq %lld may run past it; HINT: --allow-long runs it anyway "
                             "(recorded in meta.json)",
                          m->path, (long long)seq);
    return mp_err_set(e, "%s: %lld positions are beyond the model's trained context (max_position_embeddings %d); "
                         "HINT: --allow-long runs it anyway (recorded in meta.json)",
                      m->path, (long long)seq, m->max_pos);
}
