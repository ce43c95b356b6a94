/* hfwrite.c — HF checkpoint folders: config.json, safetensors (single or sharded with its
 * index) and the tokenizer's files; see hfwrite.h.
 */
#include "load/hfwrite.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h" /* mp_json_write_atomic: the shard index */
#include "core/util.h" /* MpAtomicFile, mp_mkdir_p, mp_path_join, mp_file_write_atomic */

const char *mp_hfwrite_dtype(MpWType t) { return t == MP_WT_BF16 ? "BF16" : t == MP_WT_F16 ? "F16" : "F32"; }

/* The header of tensors [a, b): compact JSON, tensors in order, offsets contiguous from 0. */
static char *st_header(const MpHfCheckpoint *c, size_t a, size_t b) {
    json_t *h = json_object(), *meta = json_object();
    json_object_set_new(meta, "format", json_string("pt"));
    json_object_set_new(h, "__metadata__", meta);
    uint64_t off = 0;
    for (size_t i = a; i < b; i++) {
        const MpHfTensor *t = &c->tensors[i];
        json_t *o = json_object(), *sh = json_array(), *of = json_array();
        json_object_set_new(o, "dtype", json_string(mp_hfwrite_dtype(t->type)));
        json_array_append_new(sh, json_integer(t->rows));
        if (t->ndim == 2) json_array_append_new(sh, json_integer(t->cols));
        json_object_set_new(o, "shape", sh);
        json_array_append_new(of, json_integer((json_int_t)off));
        json_array_append_new(of, json_integer((json_int_t)(off + t->nbytes)));
        json_object_set_new(o, "data_offsets", of);
        json_object_set_new(h, t->name, o);
        off += t->nbytes;
    }
    char *txt = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(h);
    return txt;
}

int mp_hfwrite_safetensors(const char *path, const MpHfCheckpoint *c, size_t a, size_t b, MpErr *e) {
    char *txt = st_header(c, a, b);
    if (!txt) return mp_err_set(e, "%s: cannot serialise the header", path);
    const size_t n = strlen(txt), padded = (n + 7) / 8 * 8; /* the data starts 8-aligned */
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e)) {
        free(txt);
        return MP_ERR;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int rc = MP_OK;
    if (fwrite(len8, 1, 8, af.f) != 8 || fwrite(txt, 1, n, af.f) != n) rc = mp_err_set(e, "%s: write failed", path);
    for (size_t i = n; i < padded && rc == MP_OK; i++)
        if (fputc(' ', af.f) == EOF) rc = mp_err_set(e, "%s: write failed", path);
    free(txt);
    for (size_t i = a; i < b && rc == MP_OK; i++)
        if (c->bytes(c->ctx, i, af.f, e)) rc = mp_err_prefix(e, "%s", path);
    if (rc == MP_OK) rc = mp_atomic_commit(&af, e);
    else mp_atomic_abort(&af);
    return rc;
}

/* N shards: consecutive, non-empty groups of about total / N bytes each, then the index. */
static int write_shards(const char *dir, const MpHfCheckpoint *c, MpErr *e) {
    char path[4096];
    uint64_t total = 0;
    for (size_t i = 0; i < c->n_tensors; i++) total += c->tensors[i].nbytes;
    json_t *wm = json_object();
    size_t a = 0;
    uint64_t acc = 0;
    int rc = MP_OK;
    for (int k = 0; k < c->shards && rc == MP_OK; k++) {
        size_t b = a + 1;
        acc += c->tensors[a].nbytes;
        const size_t left_needed = (size_t)(c->shards - 1 - k); /* tensors the remaining shards need */
        while (b < c->n_tensors - left_needed && acc < total / (uint64_t)c->shards * (uint64_t)(k + 1)) acc += c->tensors[b++].nbytes;
        if (k == c->shards - 1)
            while (b < c->n_tensors) acc += c->tensors[b++].nbytes;
        char fn[64];
        snprintf(fn, sizeof fn, "model-%05d-of-%05d.safetensors", k + 1, c->shards);
        for (size_t i = a; i < b; i++) json_object_set_new(wm, c->tensors[i].name, json_string(fn));
        if (mp_path_join(path, sizeof path, dir, fn, e) || mp_hfwrite_safetensors(path, c, a, b, e)) rc = MP_ERR;
        a = b;
    }
    if (rc == MP_OK) {
        json_t *idx = json_object(), *meta = json_object();
        json_object_set_new(meta, "total_size", json_integer((json_int_t)total));
        json_object_set_new(idx, "metadata", meta);
        json_object_set_new(idx, "weight_map", wm);
        wm = NULL;
        if (mp_path_join(path, sizeof path, dir, "model.safetensors.index.json", e) || mp_json_write_atomic(path, idx, e)) rc = MP_ERR;
        json_decref(idx);
    }
    if (wm) json_decref(wm);
    return rc;
}

int mp_hfwrite(const char *dir, const MpHfCheckpoint *c, MpErr *e) {
    char path[4096];
    if (c->shards < 1 || (size_t)c->shards > (c->n_tensors ? c->n_tensors : 1))
        return mp_err_set(e, "%s: %d shards for %zu tensors", dir, c->shards, c->n_tensors);
    if (mp_mkdir_p(dir, e) || mp_path_join(path, sizeof path, dir, "config.json", e) ||
        mp_file_write_atomic(path, c->config, c->config_len, e))
        return MP_ERR;
    int rc;
    if (c->shards == 1) {
        rc = mp_path_join(path, sizeof path, dir, "model.safetensors", e);
        if (rc == MP_OK) rc = mp_hfwrite_safetensors(path, c, 0, c->n_tensors, e);
    } else {
        rc = write_shards(dir, c, e);
    }
    for (size_t i = 0; i < c->n_files && rc == MP_OK; i++)
        if (mp_path_join(path, sizeof path, dir, c->files[i].name, e) || mp_file_write_atomic(path, c->files[i].data, c->files[i].len, e))
            rc = MP_ERR;
    return rc;
}
