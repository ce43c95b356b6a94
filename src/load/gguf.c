/* gguf.c — see gguf.h. The reader is a parser of untrusted input: it never aborts, frees partial
 * state, and checks every count, size product and offset against overflow and the file length. */
#include "load/gguf.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reading cursor */

typedef struct Cur {
    const uint8_t *b;
    size_t n, pos;
    const char *path;
    MpErr *e;
} Cur;

static int cur_need(Cur *c, size_t k, const char *what) {
    if (c->n - c->pos < k)
        return mp_err_set(c->e, "%s: truncated: %s needs %zu bytes at offset %zu but the file has %zu", c->path, what, k,
                          c->pos, c->n);
    return MP_OK;
}

static uint64_t le(const uint8_t *p, int k) {
    uint64_t v = 0;
    for (int i = k - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static int cur_u32(Cur *c, uint32_t *v, const char *what) {
    if (cur_need(c, 4, what)) return MP_ERR;
    *v = (uint32_t)le(c->b + c->pos, 4);
    c->pos += 4;
    return MP_OK;
}

static int cur_u64(Cur *c, uint64_t *v, const char *what) {
    if (cur_need(c, 8, what)) return MP_ERR;
    *v = le(c->b + c->pos, 8);
    c->pos += 8;
    return MP_OK;
}

/* gguf_string: u64 length + bytes; returns a borrowed pointer. */
static int cur_str(Cur *c, const uint8_t **s, uint64_t *len, const char *what) {
    if (cur_u64(c, len, what)) return MP_ERR;
    if (*len > c->n - c->pos)
        return mp_err_set(c->e, "%s: truncated or bad length: %s of %llu bytes at offset %zu, file has %zu", c->path, what,
                          (unsigned long long)*len, c->pos, c->n);
    *s = c->b + c->pos;
    c->pos += (size_t)*len;
    return MP_OK;
}

static size_t type_size(MpGgufType t) {
    switch (t) {
    case MP_GGUF_UINT8: case MP_GGUF_INT8: case MP_GGUF_BOOL: return 1;
    case MP_GGUF_UINT16: case MP_GGUF_INT16: return 2;
    case MP_GGUF_UINT32: case MP_GGUF_INT32: case MP_GGUF_FLOAT32: return 4;
    case MP_GGUF_UINT64: case MP_GGUF_INT64: case MP_GGUF_FLOAT64: return 8;
    default: return 0; /* STRING, ARRAY: variable */
    }
}

static const char *gguf_type_names[MP_GGUF_TYPE_COUNT] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                                          "bool", "string", "array", "uint64", "int64", "float64"};
const char *mp_gguf_type_name(MpGgufType t) { return (unsigned)t < MP_GGUF_TYPE_COUNT ? gguf_type_names[t] : "?"; }

/* Decodes a scalar at p into kv's numeric fields. */
static void scalar_decode(MpGgufKv *kv, MpGgufType t, const uint8_t *p) {
    uint64_t raw = le(p, (int)type_size(t));
    switch (t) {
    case MP_GGUF_UINT8: case MP_GGUF_UINT16: case MP_GGUF_UINT32: case MP_GGUF_UINT64: case MP_GGUF_BOOL:
        kv->u = raw;
        kv->i = (int64_t)raw;
        kv->f = (double)raw;
        break;
    case MP_GGUF_INT8: kv->i = (int8_t)raw; break;
    case MP_GGUF_INT16: kv->i = (int16_t)raw; break;
    case MP_GGUF_INT32: kv->i = (int32_t)raw; break;
    case MP_GGUF_INT64: kv->i = (int64_t)raw; break;
    case MP_GGUF_FLOAT32: {
        uint32_t b = (uint32_t)raw;
        float f;
        memcpy(&f, &b, 4);
        kv->f = f;
        return;
    }
    case MP_GGUF_FLOAT64: memcpy(&kv->f, &raw, 8); return;
    default: return;
    }
    if (t == MP_GGUF_INT8 || t == MP_GGUF_INT16 || t == MP_GGUF_INT32 || t == MP_GGUF_INT64) {
        kv->u = (uint64_t)kv->i;
        kv->f = (double)kv->i;
    }
}

static int kv_value(Cur *c, MpGgufKv *kv) {
    const char *k = kv->key;
    switch (kv->type) {
    case MP_GGUF_STRING:
        return cur_str(c, &kv->str, &kv->str_len, "string value");
    case MP_GGUF_ARRAY: {
        uint32_t at;
        if (cur_u32(c, &at, "array type") || cur_u64(c, &kv->arr_n, "array length")) return MP_ERR;
        if (at >= MP_GGUF_TYPE_COUNT) return mp_err_set(c->e, "%s: key '%s': unknown array element type %u", c->path, k, at);
        if (at == MP_GGUF_ARRAY) return mp_err_set(c->e, "%s: key '%s': nested arrays are not supported", c->path, k);
        kv->arr_type = (MpGgufType)at;
        kv->arr = c->b + c->pos;
        if (at == MP_GGUF_STRING) {
            /* each element needs >= 8 bytes: bound the count before walking */
            if (kv->arr_n > (c->n - c->pos) / 8)
                return mp_err_set(c->e, "%s: key '%s': array of %llu strings does not fit in the file", c->path, k,
                                  (unsigned long long)kv->arr_n);
            for (uint64_t j = 0; j < kv->arr_n; j++) {
                const uint8_t *s;
                uint64_t len;
                if (cur_str(c, &s, &len, "array string")) return mp_err_prefix(c->e, "key '%s' element %llu", k, (unsigned long long)j);
            }
            return MP_OK;
        }
        size_t bytes;
        if (kv->arr_n > SIZE_MAX || mp_size_mul((size_t)kv->arr_n, type_size(kv->arr_type), &bytes) || bytes > c->n - c->pos)
            return mp_err_set(c->e, "%s: truncated or bad length: key '%s': array of %llu %s does not fit in the file", c->path, k,
                              (unsigned long long)kv->arr_n, mp_gguf_type_name(kv->arr_type));
        c->pos += bytes;
        return MP_OK;
    }
    default: {
        size_t sz = type_size(kv->type);
        if (cur_need(c, sz, "scalar value")) return MP_ERR;
        scalar_decode(kv, kv->type, c->b + c->pos);
        c->pos += sz;
        return MP_OK;
    }
    }
}

/* Copies a length-delimited name; rejects embedded NULs (they would truncate the C string). */
static char *dup_name(const uint8_t *s, uint64_t len) {
    if (memchr(s, 0, (size_t)len)) return NULL;
    char *p = malloc((size_t)len + 1);
    if (!p) return NULL;
    memcpy(p, s, (size_t)len);
    p[len] = '\0';
    return p;
}

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Rejects duplicate names among n strings (sorted copy of the pointers). */
static int check_unique(char **names, size_t n, const char *what, const char *path, MpErr *e) {
    if (n < 2) return MP_OK;
    char **s = mp_try_malloc(n * sizeof *s);
    if (!s) return mp_err_set(e, "%s: out of memory", path);
    memcpy(s, names, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_str_ptr);
    int rc = MP_OK;
    for (size_t i = 1; i < n; i++)
        if (!strcmp(s[i], s[i - 1])) {
            rc = mp_err_set(e, "%s: duplicate %s '%s'", path, what, s[i]);
            break;
        }
    free(s);
    return rc;
}

static int cmp_tensor_off(const void *a, const void *b) {
    const MpGgufTensor *x = *(const MpGgufTensor *const *)a, *y = *(const MpGgufTensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset ? 1 : 0;
}

void mp_gguf_free(MpGguf *g) {
    for (size_t i = 0; i < g->n_kv; i++) free(g->kv[i].key);
    free(g->kv);
    for (size_t i = 0; i < g->n_tensors; i++) free(g->t[i].name);
    free(g->t);
    mp_load_map_close(&g->map);
    memset(g, 0, sizeof *g);
}

static int gguf_parse_body(MpGguf *g, Cur *c) {
    MpErr *e = c->e;
    const char *path = c->path;
    if (c->n < 4 || memcmp(c->b, MP_GGUF_MAGIC, 4) != 0) return mp_err_set(e, "%s: bad magic (not a GGUF file)", path);
    c->pos = 4;
    uint64_t nt, nkv;
    if (cur_u32(c, &g->version, "version")) return MP_ERR;
    if (g->version != 2 && g->version != 3)
        return mp_err_set(e, "%s: GGUF version %u is not supported (2 or 3)", path, g->version);
    if (cur_u64(c, &nt, "tensor count") || cur_u64(c, &nkv, "metadata count")) return MP_ERR;
    /* a KV needs >= 12 bytes (key length + type), a tensor info >= 24: bound counts by the file */
    if (nkv > (c->n - c->pos) / 12) return mp_err_set(e, "%s: metadata count %llu does not fit in the file", path, (unsigned long long)nkv);
    if (nt > (c->n - c->pos) / 24) return mp_err_set(e, "%s: tensor count %llu does not fit in the file", path, (unsigned long long)nt);
    g->kv = mp_try_calloc(nkv ? (size_t)nkv : 1, sizeof *g->kv);
    g->t = mp_try_calloc(nt ? (size_t)nt : 1, sizeof *g->t);
    if (!g->kv || !g->t) return mp_err_set(e, "%s: out of memory", path);
    g->alignment = MP_GGUF_DEFAULT_ALIGNMENT;
    for (uint64_t i = 0; i < nkv; i++) {
        MpGgufKv *kv = &g->kv[i];
        const uint8_t *ks;
        uint64_t kl;
        uint32_t t;
        if (cur_str(c, &ks, &kl, "metadata key")) return MP_ERR;
        if (!(kv->key = dup_name(ks, kl))) return mp_err_set(e, "%s: metadata key %llu contains a NUL byte", path, (unsigned long long)i);
        g->n_kv++;
        if (cur_u32(c, &t, "metadata type")) return mp_err_prefix(e, "key '%s'", kv->key);
        if (t >= MP_GGUF_TYPE_COUNT) return mp_err_set(e, "%s: key '%s': unknown value type %u", path, kv->key, t);
        kv->type = (MpGgufType)t;
        if (kv_value(c, kv)) return MP_ERR;
    }
    {
        char **names = mp_try_malloc((g->n_kv ? g->n_kv : 1) * sizeof *names);
        if (!names) return mp_err_set(e, "%s: out of memory", path);
        for (size_t i = 0; i < g->n_kv; i++) names[i] = g->kv[i].key;
        int rc = check_unique(names, g->n_kv, "metadata key", path, e);
        free(names);
        if (rc) return rc;
    }
    const MpGgufKv *al = mp_gguf_find(g, "general.alignment");
    if (al) {
        int64_t a;
        if (mp_gguf_kv_int(al, &a) || a <= 0 || a > (1 << 30) || (a & (a - 1)))
            return mp_err_set(e, "%s: general.alignment is not a power of two (type %s)", path, mp_gguf_type_name(al->type));
        g->alignment = (uint32_t)a;
    }
    for (uint64_t i = 0; i < nt; i++) {
        MpGgufTensor *t = &g->t[i];
        const uint8_t *ns;
        uint64_t nl;
        uint32_t ty;
        if (cur_str(c, &ns, &nl, "tensor name")) return MP_ERR;
        if (!(t->name = dup_name(ns, nl))) return mp_err_set(e, "%s: tensor name %llu contains a NUL byte", path, (unsigned long long)i);
        g->n_tensors++;
        if (cur_u32(c, &t->n_dims, "tensor dims")) return mp_err_prefix(e, "tensor '%s'", t->name);
        if (t->n_dims < 1 || t->n_dims > MP_GGUF_MAX_DIMS)
            return mp_err_set(e, "%s: tensor '%s': %u dimensions (1..%d)", path, t->name, t->n_dims, MP_GGUF_MAX_DIMS);
        uint64_t count = 1;
        for (int d = 0; d < MP_GGUF_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t v;
            if (cur_u64(c, &v, "tensor dim")) return mp_err_prefix(e, "tensor '%s'", t->name);
            if (v > (uint64_t)INT64_MAX) return mp_err_set(e, "%s: tensor '%s': negative dimension ne[%u]", path, t->name, d);
            t->ne[d] = (int64_t)v;
            if (v && count > (uint64_t)INT64_MAX / v) return mp_err_set(e, "%s: tensor '%s': element count overflows", path, t->name);
            count *= v;
        }
        if (cur_u32(c, &ty, "tensor type")) return mp_err_prefix(e, "tensor '%s'", t->name);
        if (!mp_quant_known(ty))
            return mp_err_set(e, "%s: tensor '%s': ggml type %u is not supported (F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K)",
                              path, t->name, ty);
        t->type = (MpWType)ty;
        size_t row;
        if (mp_quant_row_bytes(t->type, (uint64_t)t->ne[0], &row))
            return mp_err_set(e, "%s: tensor '%s': ne[0] = %lld is not a multiple of the %s block size %zu", path, t->name,
                              (long long)t->ne[0], mp_quant_name(t->type), mp_quant_block_elems(t->type));
        uint64_t rows = t->ne[0] ? count / (uint64_t)t->ne[0] : 0;
        if (rows > SIZE_MAX || mp_size_mul(row, (size_t)rows, &t->nbytes))
            return mp_err_set(e, "%s: tensor '%s': byte size overflows", path, t->name);
        if (cur_u64(c, &t->offset, "tensor offset")) return mp_err_prefix(e, "tensor '%s'", t->name);
        if (t->offset % g->alignment)
            return mp_err_set(e, "%s: tensor '%s': offset %llu is not a multiple of the alignment %u", path, t->name,
                              (unsigned long long)t->offset, g->alignment);
    }
    {
        char **names = mp_try_malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *names);
        if (!names) return mp_err_set(e, "%s: out of memory", path);
        for (size_t i = 0; i < g->n_tensors; i++) names[i] = g->t[i].name;
        int rc = check_unique(names, g->n_tensors, "tensor name", path, e);
        free(names);
        if (rc) return rc;
    }
    size_t ds;
    if (mp_size_add(c->pos, g->alignment - 1, &ds)) return mp_err_set(e, "%s: data start overflows", path);
    ds -= ds % g->alignment;
    if (ds > c->n && g->n_tensors)
        return mp_err_set(e, "%s: truncated: data section starts at %zu but the file has %zu bytes", path, ds, c->n);
    g->data_start = ds;
    size_t avail = ds <= c->n ? c->n - ds : 0;
    MpGgufTensor **ord = mp_try_malloc((g->n_tensors ? g->n_tensors : 1) * sizeof *ord);
    if (!ord) return mp_err_set(e, "%s: out of memory", path);
    for (size_t i = 0; i < g->n_tensors; i++) ord[i] = &g->t[i];
    qsort(ord, g->n_tensors, sizeof *ord, cmp_tensor_off);
    int rc = MP_OK;
    for (size_t i = 0; i < g->n_tensors && rc == MP_OK; i++) {
        MpGgufTensor *t = ord[i];
        if (t->offset > avail || t->nbytes > avail - t->offset)
            rc = mp_err_set(e, "%s: tensor '%s': data [%llu, +%zu) lies outside the file (data section of %zu bytes; truncated?)",
                            path, t->name, (unsigned long long)t->offset, t->nbytes, avail);
        else if (i + 1 < g->n_tensors && t->offset + t->nbytes > ord[i + 1]->offset)
            rc = mp_err_set(e, "%s: tensor '%s' overlaps tensor '%s'", path, t->name, ord[i + 1]->name);
        else
            t->data = c->b + ds + t->offset;
    }
    free(ord);
    return rc;
}

int mp_gguf_parse(MpGguf *g, const uint8_t *buf, size_t n, const char *path, MpErr *e) {
    memset(g, 0, sizeof *g);
    snprintf(g->path, sizeof g->path, "%s", path);
    Cur c = {buf, n, 0, path, e};
    if (gguf_parse_body(g, &c) != MP_OK) {
        mp_gguf_free(g); /* map is zero: borrowed buffer untouched */
        return MP_ERR;
    }
    g->map.data = buf;
    g->map.size = n;
    g->map.mapped = 0;
    return MP_OK;
}

int mp_gguf_open(MpGguf *g, const char *path, MpErr *e) {
    MpLoadMap mm;
    if (mp_load_map_open(&mm, path, e) != MP_OK) {
        memset(g, 0, sizeof *g);
        return MP_ERR;
    }
    if (mp_gguf_parse(g, mm.data, mm.size, path, e) != MP_OK) {
        mp_load_map_close(&mm);
        return MP_ERR;
    }
    g->map = mm;
    return MP_OK;
}

const MpGgufKv *mp_gguf_find(const MpGguf *g, const char *key) {
    for (size_t i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

const MpGgufTensor *mp_gguf_find_tensor(const MpGguf *g, const char *name) {
    for (size_t i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->t[i].name, name)) return &g->t[i];
    return NULL;
}

static int is_int_type(MpGgufType t) {
    return t == MP_GGUF_UINT8 || t == MP_GGUF_INT8 || t == MP_GGUF_UINT16 || t == MP_GGUF_INT16 || t == MP_GGUF_UINT32 ||
           t == MP_GGUF_INT32 || t == MP_GGUF_UINT64 || t == MP_GGUF_INT64;
}

int mp_gguf_kv_int(const MpGgufKv *kv, int64_t *out) {
    if (!is_int_type(kv->type)) return MP_ERR;
    if (kv->type == MP_GGUF_UINT64 && kv->u > (uint64_t)INT64_MAX) return MP_ERR;
    *out = kv->i;
    return MP_OK;
}

int mp_gguf_kv_num(const MpGgufKv *kv, double *out) {
    if (!is_int_type(kv->type) && kv->type != MP_GGUF_FLOAT32 && kv->type != MP_GGUF_FLOAT64) return MP_ERR;
    *out = kv->f;
    return MP_OK;
}

int mp_gguf_kv_str(const MpGgufKv *kv, char *out, size_t cap) {
    if (kv->type != MP_GGUF_STRING || kv->str_len >= cap) return MP_ERR;
    memcpy(out, kv->str, (size_t)kv->str_len);
    out[kv->str_len] = '\0';
    return MP_OK;
}

int mp_gguf_arr_num(const MpGgufKv *kv, uint64_t idx, double *out) {
    if (kv->type != MP_GGUF_ARRAY || idx >= kv->arr_n) return MP_ERR;
    MpGgufType t = kv->arr_type;
    if (!is_int_type(t) && t != MP_GGUF_FLOAT32 && t != MP_GGUF_FLOAT64 && t != MP_GGUF_BOOL) return MP_ERR;
    MpGgufKv tmp = {0};
    scalar_decode(&tmp, t, kv->arr + idx * type_size(t));
    *out = tmp.f;
    return MP_OK;
}

int mp_gguf_arr_next_str(const MpGgufKv *kv, size_t cursor[2], const uint8_t **s, uint64_t *len) {
    /* the parser validated every length, so the walk stays inside the buffer */
    if (kv->type != MP_GGUF_ARRAY || kv->arr_type != MP_GGUF_STRING) return MP_ERR;
    size_t idx = cursor[0], off = cursor[1];
    if (idx >= kv->arr_n) return MP_ERR;
    *len = le(kv->arr + off, 8);
    *s = kv->arr + off + 8;
    cursor[0] = idx + 1;
    cursor[1] = off + 8 + (size_t)*len;
    return MP_OK;
}

/* ---------------------------------------------------------------- writer */

void mp_gguf_writer_init(MpGgufWriter *w, uint32_t alignment) {
    memset(w, 0, sizeof *w);
    w->alignment = alignment ? alignment : MP_GGUF_DEFAULT_ALIGNMENT;
}

void mp_gguf_writer_free(MpGgufWriter *w) {
    free(w->kv);
    free(w->ti);
    memset(w, 0, sizeof *w);
}

static void buf_put(MpGgufWriter *w, uint8_t **b, size_t *len, size_t *cap, const void *p, size_t k) {
    if (w->oom) return;
    if (*len + k > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *len + k) nc *= 2;
        uint8_t *nb = realloc(*b, nc);
        if (!nb) {
            w->oom = 1;
            return;
        }
        *b = nb;
        *cap = nc;
    }
    memcpy(*b + *len, p, k);
    *len += k;
}

static void put_le(MpGgufWriter *w, uint8_t **b, size_t *len, size_t *cap, uint64_t v, int k) {
    uint8_t t[8];
    for (int i = 0; i < k; i++) t[i] = (uint8_t)(v >> (8 * i));
    buf_put(w, b, len, cap, t, (size_t)k);
}

static void kv_str_raw(MpGgufWriter *w, const char *s) {
    size_t n = strlen(s);
    put_le(w, &w->kv, &w->kv_len, &w->kv_cap, n, 8);
    buf_put(w, &w->kv, &w->kv_len, &w->kv_cap, s, n);
}

static void kv_head(MpGgufWriter *w, const char *key, MpGgufType t) {
    kv_str_raw(w, key);
    put_le(w, &w->kv, &w->kv_len, &w->kv_cap, (uint64_t)t, 4);
    w->n_kv++;
}

void mp_gguf_w_scalar(MpGgufWriter *w, const char *key, MpGgufType t, const void *v) {
    kv_head(w, key, t);
    buf_put(w, &w->kv, &w->kv_len, &w->kv_cap, v, type_size(t)); /* little-endian host */
}

void mp_gguf_w_u32(MpGgufWriter *w, const char *key, uint32_t v) { mp_gguf_w_scalar(w, key, MP_GGUF_UINT32, &v); }
void mp_gguf_w_f32(MpGgufWriter *w, const char *key, float v) { mp_gguf_w_scalar(w, key, MP_GGUF_FLOAT32, &v); }
void mp_gguf_w_bool(MpGgufWriter *w, const char *key, int v) {
    uint8_t b = v ? 1 : 0;
    mp_gguf_w_scalar(w, key, MP_GGUF_BOOL, &b);
}
void mp_gguf_w_str(MpGgufWriter *w, const char *key, const char *s) {
    kv_head(w, key, MP_GGUF_STRING);
    kv_str_raw(w, s);
}

void mp_gguf_w_arr(MpGgufWriter *w, const char *key, MpGgufType t, const void *v, uint64_t n) {
    kv_head(w, key, MP_GGUF_ARRAY);
    put_le(w, &w->kv, &w->kv_len, &w->kv_cap, (uint64_t)t, 4);
    put_le(w, &w->kv, &w->kv_len, &w->kv_cap, n, 8);
    buf_put(w, &w->kv, &w->kv_len, &w->kv_cap, v, (size_t)n * type_size(t));
}

void mp_gguf_w_arr_str(MpGgufWriter *w, const char *key, const char *const *s, uint64_t n) {
    kv_head(w, key, MP_GGUF_ARRAY);
    put_le(w, &w->kv, &w->kv_len, &w->kv_cap, (uint64_t)MP_GGUF_STRING, 4);
    put_le(w, &w->kv, &w->kv_len, &w->kv_cap, n, 8);
    for (uint64_t i = 0; i < n; i++) kv_str_raw(w, s[i]);
}

size_t mp_gguf_w_tensor(MpGgufWriter *w, const char *name, uint32_t n_dims, const int64_t *ne, MpWType t) {
    size_t row, nbytes;
    uint64_t rows = 1;
    for (uint32_t d = 1; d < n_dims; d++) rows *= (uint64_t)ne[d];
    if (n_dims < 1 || n_dims > MP_GGUF_MAX_DIMS || mp_quant_row_bytes(t, (uint64_t)ne[0], &row) ||
        mp_size_mul(row, (size_t)rows, &nbytes))
        return 0;
    size_t n = strlen(name);
    put_le(w, &w->ti, &w->ti_len, &w->ti_cap, n, 8);
    buf_put(w, &w->ti, &w->ti_len, &w->ti_cap, name, n);
    put_le(w, &w->ti, &w->ti_len, &w->ti_cap, n_dims, 4);
    for (uint32_t d = 0; d < n_dims; d++) put_le(w, &w->ti, &w->ti_len, &w->ti_cap, (uint64_t)ne[d], 8);
    put_le(w, &w->ti, &w->ti_len, &w->ti_cap, (uint64_t)t, 4);
    put_le(w, &w->ti, &w->ti_len, &w->ti_cap, w->data_size, 8);
    w->n_tensors++;
    uint64_t a = w->alignment;
    w->data_size += (nbytes + a - 1) / a * a;
    return nbytes;
}

static int fwrite_all(FILE *f, const void *p, size_t n, MpErr *e) {
    if (n && fwrite(p, 1, n, f) != n) return mp_err_set(e, "write failed (disk full?)");
    return MP_OK;
}

int mp_gguf_w_header(MpGgufWriter *w, FILE *f, MpErr *e) {
    if (w->oom) return mp_err_set(e, "out of memory while building the GGUF header");
    uint8_t h[24];
    memcpy(h, MP_GGUF_MAGIC, 4);
    uint32_t ver = 3;
    memcpy(h + 4, &ver, 4);
    memcpy(h + 8, &w->n_tensors, 8);
    memcpy(h + 16, &w->n_kv, 8);
    if (fwrite_all(f, h, 24, e) || fwrite_all(f, w->kv, w->kv_len, e) || fwrite_all(f, w->ti, w->ti_len, e)) return MP_ERR;
    size_t pos = 24 + w->kv_len + w->ti_len;
    return mp_gguf_w_pad(w, f, pos, e);
}

int mp_gguf_w_pad(const MpGgufWriter *w, FILE *f, size_t nbytes, MpErr *e) {
    static const uint8_t zeros[64] = {0};
    size_t pad = (w->alignment - nbytes % w->alignment) % w->alignment;
    while (pad) {
        size_t k = pad < sizeof zeros ? pad : sizeof zeros;
        if (fwrite_all(f, zeros, k, e)) return MP_ERR;
        pad -= k;
    }
    return MP_OK;
}
