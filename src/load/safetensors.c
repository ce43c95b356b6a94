/* safetensors.c — see safetensors.h. Parser of untrusted input: never aborts, frees partial
 * state, checks every count, product and offset against overflow and the file length. */
#include "load/safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct StDtype {
    const char *name;
    unsigned bits;
    int wt; /* MpWType, or -1 when the loader cannot serve it */
} StDtype;

static const StDtype st_dtypes[] = {
    {"BOOL", 8, -1},        {"F4", 4, -1},          {"F6_E2M3", 6, -1},     {"F6_E3M2", 6, -1},
    {"U8", 8, -1},          {"I8", 8, -1},          {"F8_E5M2", 8, -1},     {"F8_E4M3", 8, -1},
    {"F8_E8M0", 8, -1},     {"F8_E4M3FNUZ", 8, -1}, {"F8_E5M2FNUZ", 8, -1}, {"I16", 16, -1},
    {"U16", 16, -1},        {"F16", 16, MP_WT_F16}, {"BF16", 16, MP_WT_BF16}, {"I32", 32, -1},
    {"U32", 32, -1},        {"F32", 32, MP_WT_F32}, {"C64", 64, -1},      {"F64", 64, -1},
    {"I64", 64, -1},        {"U64", 64, -1},
};

static const StDtype *st_dtype(const char *s) {
    for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
        if (!strcmp(s, st_dtypes[i].name)) return &st_dtypes[i];
    return NULL;
}

void mp_st_free(MpSt *st) {
    for (size_t i = 0; i < st->n; i++) free(st->t[i].name);
    free(st->t);
    mp_load_map_close(&st->map);
    memset(st, 0, sizeof *st);
}

static int cmp_begin(const void *a, const void *b) {
    const MpStTensor *x = *(const MpStTensor *const *)a, *y = *(const MpStTensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

/* One header entry → t. Returns MP_ERR with a message naming the tensor. */
static int st_entry(MpStTensor *t, const char *name, json_t *v, const char *path, MpErr *e) {
    if (!json_is_object(v)) return mp_err_set(e, "%s: tensor '%s': header entry is not an object", path, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"), *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd)) return mp_err_set(e, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    const StDtype *dt = st_dtype(json_string_value(jd));
    if (!dt) return mp_err_set(e, "%s: tensor '%s': unknown dtype '%.20s'", path, name, json_string_value(jd));
    snprintf(t->dtype, sizeof t->dtype, "%s", dt->name);
    t->supported = dt->wt >= 0;
    t->type = dt->wt >= 0 ? (MpWType)dt->wt : MP_WT_F32;
    if (!json_is_array(js)) return mp_err_set(e, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    size_t nd = json_array_size(js);
    if (nd > MP_ST_MAX_DIMS) return mp_err_set(e, "%s: tensor '%s': %zu dimensions (at most %d)", path, name, nd, MP_ST_MAX_DIMS);
    t->ndim = (int)nd;
    size_t count = 1;
    for (size_t k = 0; k < nd; k++) {
        json_t *d = json_array_get(js, k);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return mp_err_set(e, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name, k);
        t->shape[k] = json_integer_value(d);
        if ((uint64_t)t->shape[k] > SIZE_MAX || mp_size_mul(count, (size_t)t->shape[k], &count) != MP_OK)
            return mp_err_set(e, "%s: tensor '%s': element count overflows", path, name);
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)))
        return mp_err_set(e, "%s: tensor '%s': \"data_offsets\" is not [begin, end]", path, name);
    json_int_t b = json_integer_value(json_array_get(jo, 0)), en = json_integer_value(json_array_get(jo, 1));
    if (b < 0 || en < b) return mp_err_set(e, "%s: tensor '%s': bad data_offsets [%lld, %lld]", path, name, (long long)b, (long long)en);
    t->begin = (uint64_t)b;
    t->end = (uint64_t)en;
    size_t bits;
    if (mp_size_mul(count, dt->bits, &bits) != MP_OK)
        return mp_err_set(e, "%s: tensor '%s': byte size overflows", path, name);
    if (bits % 8) return mp_err_set(e, "%s: tensor '%s': %zu %s elements are not a whole number of bytes", path, name, count, dt->name);
    if (t->end - t->begin != bits / 8)
        return mp_err_set(e, "%s: tensor '%s': data_offsets span %llu bytes but shape x dtype %s needs %zu", path, name,
                          (unsigned long long)(t->end - t->begin), dt->name, bits / 8);
    return MP_OK;
}

int mp_st_parse(MpSt *st, const uint8_t *buf, size_t n, const char *path, MpErr *e) {
    memset(st, 0, sizeof *st);
    snprintf(st->path, sizeof st->path, "%s", path);
    st->map.data = buf;
    st->map.size = n;
    if (n < 8) return mp_err_set(e, "%s: truncated: %zu bytes, a safetensors file has at least 8", path, n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | buf[i];
    if (hl > MP_ST_MAX_HEADER) return mp_err_set(e, "%s: bad header length %llu (not a safetensors file?)", path, (unsigned long long)hl);
    if (hl > n - 8) return mp_err_set(e, "%s: truncated: header of %llu bytes but the file has %zu", path, (unsigned long long)hl, n);
    size_t ws = 0; /* the reference reader tolerates leading JSON whitespace */
    while (ws < hl && (buf[8 + ws] == ' ' || buf[8 + ws] == '\t' || buf[8 + ws] == '\n' || buf[8 + ws] == '\r')) ws++;
    if (hl < 2 || ws == hl || buf[8 + ws] != '{') return mp_err_set(e, "%s: bad magic: header does not start with '{' (not a safetensors file?)", path);
    st->data_start = 8 + (size_t)hl;
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &je);
    if (!root) return mp_err_set(e, "%s: header JSON invalid at column %d: %s", path, je.column, je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return mp_err_set(e, "%s: header is not a JSON object", path);
    }
    size_t cap = json_object_size(root);
    st->t = mp_try_calloc(cap ? cap : 1, sizeof *st->t);
    MpStTensor **order = mp_try_calloc(cap ? cap : 1, sizeof *order);
    if (!st->t || !order) {
        free(order);
        json_decref(root);
        mp_st_free(st);
        return mp_err_set(e, "%s: out of memory for %zu tensor entries", path, cap);
    }
    const char *key;
    json_t *v;
    int rc = MP_OK;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(v)) {
                rc = mp_err_set(e, "%s: \"__metadata__\" is not an object", path);
                break;
            }
            json_object_foreach(v, mk, mv) if (!json_is_string(mv)) {
                rc = mp_err_set(e, "%s: \"__metadata__\" value of '%s' is not a string", path, mk);
                break;
            }
            if (rc) break;
            continue;
        }
        MpStTensor *t = &st->t[st->n];
        t->name = strdup(key);
        if (!t->name) {
            rc = mp_err_set(e, "%s: out of memory", path);
            break;
        }
        st->n++;
        if ((rc = st_entry(t, key, v, path, e)) != MP_OK) break;
    }
    json_decref(root);
    if (rc == MP_OK) {
        /* offsets: contiguous from 0, no holes or overlap, ending exactly at the end of the file */
        for (size_t i = 0; i < st->n; i++) order[i] = &st->t[i];
        qsort(order, st->n, sizeof *order, cmp_begin);
        uint64_t pos = 0;
        for (size_t i = 0; i < st->n && rc == MP_OK; i++) {
            if (order[i]->begin < pos)
                rc = mp_err_set(e, "%s: tensor '%s' overlaps tensor '%s' (data_offsets begin %llu < %llu)", path,
                                order[i]->name, order[i - 1]->name, (unsigned long long)order[i]->begin, (unsigned long long)pos);
            else if (order[i]->begin > pos)
                rc = mp_err_set(e, "%s: tensor '%s': hole in the data section before offset %llu", path, order[i]->name,
                                (unsigned long long)order[i]->begin);
            pos = order[i]->end;
        }
        size_t avail = n - st->data_start;
        if (rc == MP_OK && pos != avail) {
            if (pos > avail) {
                const char *nm = st->n ? order[st->n - 1]->name : "?";
                rc = mp_err_set(e, "%s: truncated or offset outside the file: tensor '%s' ends at data offset %llu but the data section has %zu bytes",
                                path, nm, (unsigned long long)pos, avail);
            } else {
                rc = mp_err_set(e, "%s: %zu trailing bytes after the last tensor (data ends at %llu of %zu)", path,
                                avail - (size_t)pos, (unsigned long long)pos, avail);
            }
        }
        for (size_t i = 0; i < st->n && rc == MP_OK; i++) st->t[i].data = buf + st->data_start + st->t[i].begin;
    }
    free(order);
    if (rc != MP_OK) {
        st->map.data = NULL; /* borrowed: not ours to unmap */
        mp_st_free(st);
    }
    return rc;
}

int mp_st_open(MpSt *st, const char *path, MpErr *e) {
    MpLoadMap mm;
    if (mp_load_map_open(&mm, path, e) != MP_OK) {
        memset(st, 0, sizeof *st);
        return MP_ERR;
    }
    if (mp_st_parse(st, mm.data, mm.size, path, e) != MP_OK) {
        mp_load_map_close(&mm);
        return MP_ERR;
    }
    st->map = mm; /* now owned */
    return MP_OK;
}

const MpStTensor *mp_st_find(const MpSt *st, const char *name) {
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->t[i].name, name)) return &st->t[i];
    return NULL;
}
