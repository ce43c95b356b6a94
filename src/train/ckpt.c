/* ckpt.c — checkpoints of the trainable model in the HF layout, plus our optimiser-state file.
 *
 * Implements: config.json (model_type "llama", every key src/load/hfconfig.c reads; a NoPE model
 *   is written as model_type "smollm3" / SmolLM3ForCausalLM — the Llama block with HF's
 *   per-layer RoPE switch "no_rope_layers": [0, 0, ...], 1 = RoPE, 0 = none — because that is the
 *   transformers class that honours the switch; LlamaForCausalLM would ignore it and rotate),
 *   the weights in the layout's order (F32 or BF16) and, for a run with a tokenizer, its
 *   tokenizer.json (and tokenizer_config.json) byte for byte, so probe and gram find the model's
 *   own tokenizer there: one HF folder, written by the one HF checkpoint writer (load/hfwrite.h,
 *   which mkmodel uses too); optimizer.bin (fixed header MpTrainOptHeader, m and v as f32, FNV-1a
 *   checksum; version 3 with the run's intervals and the hashes of the weights and config.json
 *   it was written with, versions 1 and 2 still read) and the reader of both for --resume.
 *   A checkpoint directory appears atomically: it is written as "<dir>.tmp.<pid>" and renamed.
 * Does not: parse safetensors itself — weights are read back through the project's loader
 *   (load/model.h), so every checkpoint we resume from has also passed its checks.
 * Tested by: tests/test_train.c (inspect opens it; resume is bit-exact; torch reads it).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"    /* MpErr */
#include "core/files.h"  /* MP_OUTDIR_MARKER, mp_outdir_note: checkpoints in claimed folders */
#include "core/json.h"   /* mp_json_write_atomic */
#include "core/util.h"   /* MpAtomicFile, mp_path_join, mp_fnv1a64, mp_hash64, mp_input_open */
#include "load/hfwrite.h" /* mp_hfwrite: the checkpoint's HF folder */
#include "load/model.h"  /* mp_model_open, mp_model_tensor_f32: resume reads through the loader */
#include "load/quant.h"  /* mp_f32_to_bf16 */
#include "train/train.h" /* MpTrainConfig, MpTrainLayout, MpTrainOptHeader */

/* ===================================== config.json ======================================= */

char *mp_train_config_json(const MpTrainConfig *c, int bf16) { return mp_train_config_json_tok(c, bf16, NULL); }

char *mp_train_config_json_tok(const MpTrainConfig *c, int bf16, const MpTrainTokFiles *tok) {
    json_t *o = json_object();
    const int nope = c->pos != MP_TRAIN_POS_ROPE;
    json_object_set_new(o, "architectures", json_pack("[s]", nope ? "SmolLM3ForCausalLM" : "LlamaForCausalLM"));
    json_object_set_new(o, "model_type", json_string(nope ? "smollm3" : "llama"));
    json_object_set_new(o, "hidden_size", json_integer(c->dim));
    json_object_set_new(o, "intermediate_size", json_integer(c->ffn));
    json_object_set_new(o, "num_hidden_layers", json_integer(c->layers));
    json_object_set_new(o, "num_attention_heads", json_integer(c->heads));
    json_object_set_new(o, "num_key_value_heads", json_integer(c->kv_heads));
    json_object_set_new(o, "head_dim", json_integer(c->head_dim));
    json_object_set_new(o, "hidden_act", json_string("silu"));
    json_object_set_new(o, "rms_norm_eps", json_real(c->norm_eps));
    json_object_set_new(o, "vocab_size", json_integer(c->vocab));
    json_object_set_new(o, "max_position_embeddings", json_integer(c->seq));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(c->tie));
    json_object_set_new(o, "attention_bias", json_false());
    json_object_set_new(o, "mlp_bias", json_false());
    json_object_set_new(o, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(o, "rope_scaling", json_null());
    if (c->pos == MP_TRAIN_POS_NONE) {
        json_t *a = json_array();
        for (int l = 0; l < c->layers; l++) json_array_append_new(a, json_integer(0));
        json_object_set_new(o, "no_rope_layers", a);
    }
    json_object_set_new(o, "bos_token_id", tok && tok->bos_id >= 0 ? json_integer(tok->bos_id)
                                           : !tok && c->bos                ? json_integer(256)
                                                                           : json_null());
    json_object_set_new(o, "eos_token_id", tok && tok->eos_id >= 0 ? json_integer(tok->eos_id) : json_null());
    json_object_set_new(o, "torch_dtype", json_string(bf16 ? "bfloat16" : "float32"));
    json_object_set_new(o, "initializer_range", json_real(c->init_std));
    if (!tok) {
        json_object_set_new(o, "maskpos_tokenizer", json_string("bytes"));
    } else {
        char hex[24];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)tok->hash);
        json_object_set_new(o, "maskpos_tokenizer", json_string("tokenizer.json"));
        json_object_set_new(o, "maskpos_tokenizer_fnv1a64", json_string(hex));
    }
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(o);
    return s;
}

/* ===================================== safetensors ======================================= */

static int st_fail(MpAtomicFile *af, MpErr *e, const char *what) {
    mp_atomic_abort(af);
    return mp_err_set(e, "%s: %s: %s", af->path, what, strerror(errno));
}

/* The parameters as the HF writer's tensors (load/hfwrite.h): the layout's names, shapes and
 * order, F32 or BF16. */
typedef struct CkptWeights {
    const MpTrainLayout *lay;
    const float *params;
    int bf16;
} CkptWeights;

static int ckpt_tensor_bytes(void *ctx, size_t i, FILE *f, MpErr *e) {
    const CkptWeights *w = ctx;
    const MpTrainTensor *t = &w->lay->t[i];
    const float *p = w->params + t->off;
    int ok = 1;
    if (!w->bf16) {
        ok = fwrite(p, 4, t->n, f) == t->n; /* little-endian host (x86-64, arm64) */
    } else {
        uint16_t buf[4096];
        for (size_t j = 0; j < t->n && ok; j += 4096) {
            size_t k = t->n - j < 4096 ? t->n - j : 4096;
            for (size_t a = 0; a < k; a++) buf[a] = mp_f32_to_bf16(p[j + a]);
            ok = fwrite(buf, 2, k, f) == k;
        }
    }
    return ok ? MP_OK : mp_err_set(e, "tensor '%s': write failed: %s", t->name, strerror(errno));
}

/* tensors[lay->n] for the writer (free it); NULL when out of memory. */
static MpHfTensor *ckpt_tensors(const MpTrainLayout *lay, int bf16) {
    MpHfTensor *t = mp_try_calloc((size_t)(lay->n > 0 ? lay->n : 1), sizeof *t);
    for (int i = 0; t && i < lay->n; i++) {
        const MpTrainTensor *s = &lay->t[i];
        t[i] = (MpHfTensor){s->name, bf16 ? MP_WT_BF16 : MP_WT_F32, s->ndim, s->shape[0], s->ndim == 2 ? s->shape[1] : 1,
                            s->n * (bf16 ? 2 : 4)};
    }
    return t;
}

int mp_train_safetensors_write(const char *path, const MpTrainLayout *lay, const float *params, int bf16, MpErr *e) {
    MpHfTensor *t = ckpt_tensors(lay, bf16);
    if (!t) return mp_err_set(e, "%s: out of memory", path);
    CkptWeights w = {lay, params, bf16};
    const MpHfCheckpoint ck = {NULL, 0, t, (size_t)lay->n, ckpt_tensor_bytes, &w, 1, NULL, 0};
    const int rc = mp_hfwrite_safetensors(path, &ck, 0, (size_t)lay->n, e);
    free(t);
    return rc;
}

/* ==================================== optimizer.bin ====================================== */

_Static_assert(sizeof(MpTrainOptHeader) == 240, "optimizer.bin header layout (docs/train.md) changed");
_Static_assert(offsetof(MpTrainOptHeader, tok_hash) == MP_TRAIN_OPT_V1_BYTES, "version 2 appends to version 1");
_Static_assert(offsetof(MpTrainOptHeader, checkpoint_every) == MP_TRAIN_OPT_V2_BYTES, "version 3 appends to version 2");

static int opt_write(const char *path, const MpTrainOptHeader *h, const float *m, const float *v, size_t n, MpErr *e) {
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    uint64_t hash = mp_fnv1a64(h, sizeof *h, MP_FNV_INIT);
    hash = mp_fnv1a64(m, n * sizeof *m, hash);
    hash = mp_fnv1a64(v, n * sizeof *v, hash);
    int ok = fwrite(h, sizeof *h, 1, af.f) == 1 && fwrite(m, sizeof *m, n, af.f) == n &&
             fwrite(v, sizeof *v, n, af.f) == n && fwrite(&hash, sizeof hash, 1, af.f) == 1;
    if (!ok) return st_fail(&af, e, "write failed");
    return mp_atomic_commit(&af, e);
}

/* Every field of a header against the rules a new run's flags obey (mp_train_config_check,
 * mp_train_ranges): a checksum proves the file is what was written, not that it is sane. */
int mp_train_opt_header_check(const MpTrainOptHeader *h, MpErr *e) {
    MpTrainConfig c;
    MpTrainOptConfig o;
    memset(&c, 0, sizeof c);
    memset(&o, 0, sizeof o);
    c.layers = h->layers;
    c.dim = h->dim;
    c.heads = h->heads;
    c.kv_heads = h->kv_heads;
    c.ffn = h->ffn;
    c.vocab = h->vocab;
    c.seq = h->seq;
    c.batch = h->batch;
    c.pos = (MpTrainPos)h->pos;
    c.tie = h->tie;
    c.bos = h->bos;
    c.rope_theta = h->rope_theta;
    c.norm_eps = h->norm_eps;
    c.init_std = h->init_std;
    o.lr = h->lr;
    o.min_lr_frac = h->min_lr_frac;
    o.beta1 = h->beta1;
    o.beta2 = h->beta2;
    o.eps = h->eps;
    o.wd = h->wd;
    o.clip = h->clip;
    o.warmup = h->warmup;
    o.steps = h->steps;
    if (mp_train_config_check(&c, e) != MP_OK || mp_train_opt_check(&o, h->val_frac, e) != MP_OK) return MP_ERR;
    if (h->step < 0 || h->step > h->steps)
        return mp_err_set(e, "step %lld is outside [0, steps %lld]", (long long)h->step, (long long)h->steps);
    if (h->dtype != 0 && h->dtype != 1) return mp_err_set(e, "weight dtype %d is not 0 (F32) or 1 (BF16)", h->dtype);
    if (h->checkpoint_every < 0 || h->eval_every < 0 || h->checkpoint_every > (INT64_C(1) << 40) ||
        h->eval_every > (INT64_C(1) << 40))
        return mp_err_set(e, "intervals %lld / %lld are outside [0, 2^40]", (long long)h->checkpoint_every,
                          (long long)h->eval_every);
    MpTrainLayout lay;
    if (mp_train_layout_init(&lay, &c, e) != MP_OK) return MP_ERR;
    const size_t total = lay.total;
    mp_train_layout_free(&lay);
    if (h->n_params != total)
        return mp_err_set(e, "%llu parameters, the sizes it records make %zu", (unsigned long long)h->n_params, total);
    return MP_OK;
}

int mp_train_opt_read(const char *path, MpTrainOptHeader *h, float **m, float **v, MpErr *e) {
    *m = *v = NULL;
    int64_t fsize = 0;
    FILE *f = mp_input_open(path, &fsize, e); /* refuses a FIFO or a directory */
    if (!f) return MP_ERR;
    size_t flen = (size_t)fsize;
    memset(h, 0, sizeof *h);
    /* the version-1 prefix first; version 2 appends tok_hash */
    if (flen < MP_TRAIN_OPT_V1_BYTES || fread(h, MP_TRAIN_OPT_V1_BYTES, 1, f) != 1) {
        fclose(f);
        return mp_err_set(e, "%s: shorter than the %u-byte header", path, MP_TRAIN_OPT_V1_BYTES);
    }
    if (memcmp(h->magic, MP_TRAIN_OPT_MAGIC, 8)) {
        fclose(f);
        return mp_err_set(e, "%s: not a maskpos optimiser-state file (bad magic)", path);
    }
    const size_t hb = h->version == 1 ? MP_TRAIN_OPT_V1_BYTES : h->version == 2 ? MP_TRAIN_OPT_V2_BYTES : sizeof *h;
    if (h->version < 1 || h->version > MP_TRAIN_OPT_VERSION || h->header_bytes != hb) {
        fclose(f);
        return mp_err_set(e, "%s: version %u with a %u-byte header; this build reads versions 1 (%u bytes), 2 (%u bytes) "
                             "and %u (%zu bytes)",
                          path, h->version, h->header_bytes, MP_TRAIN_OPT_V1_BYTES, MP_TRAIN_OPT_V2_BYTES,
                          MP_TRAIN_OPT_VERSION, sizeof *h);
    }
    if (hb > MP_TRAIN_OPT_V1_BYTES &&
        (flen < hb || fread((char *)h + MP_TRAIN_OPT_V1_BYTES, hb - MP_TRAIN_OPT_V1_BYTES, 1, f) != 1)) {
        fclose(f);
        return mp_err_set(e, "%s: shorter than the %zu-byte header", path, hb);
    }
    size_t n = (size_t)h->n_params, body;
    if (h->n_params > (UINT64_C(1) << 40) || mp_size_mul(n, 8, &body) != MP_OK || body + hb + 8 != flen) {
        fclose(f);
        return mp_err_set(e, "%s: %zu bytes, header says %llu parameters", path, flen, (unsigned long long)h->n_params);
    }
    *m = mp_try_malloc(n * 4 + 4);
    *v = mp_try_malloc(n * 4 + 4);
    uint64_t stored = 0;
    int ok = *m && *v && fread(*m, 4, n, f) == n && fread(*v, 4, n, f) == n && fread(&stored, 8, 1, f) == 1;
    fclose(f);
    if (ok) {
        uint64_t hash = mp_fnv1a64(h, hb, MP_FNV_INIT); /* the header as stored */
        hash = mp_fnv1a64(*m, n * 4, hash);
        hash = mp_fnv1a64(*v, n * 4, hash);
        if (hash != stored) {
            free(*m);
            free(*v);
            *m = *v = NULL;
            return mp_err_set(e, "%s: checksum mismatch (corrupt file)", path);
        }
        if (h->version < MP_TRAIN_OPT_VERSION) { /* read as version 3: intervals and hashes unknown (0) */
            if (h->version == 1) h->tok_hash = 0; /* byte-vocabulary run */
            h->version = MP_TRAIN_OPT_VERSION;
            h->header_bytes = sizeof *h;
        }
        if (mp_train_opt_header_check(h, e) == MP_OK) return MP_OK;
        mp_err_prefix(e, "%s: invalid optimiser state", path);
        free(*m);
        free(*v);
        *m = *v = NULL;
        return MP_ERR;
    }
    free(*m);
    free(*v);
    *m = *v = NULL;
    return mp_err_set(e, "%s: read failed", path);
}

/* ===================================== checkpoint ======================================== */

static void rm_tree_files(const char *dir) {
    static const char *names[] = {"config.json", "model.safetensors", "optimizer.bin", "tokenizer.json",
                                  "tokenizer_config.json"};
    char p[4400];
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

/* Index of the first NaN or ±Inf among params [n]; SIZE_MAX when all are finite. */
static size_t ckpt_first_nonfinite(const float *params, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(params[i])) return i;
    return SIZE_MAX;
}

/* The name of the layout's tensor holding parameter i. */
static const char *ckpt_tensor_of(const MpTrainLayout *lay, size_t i) {
    for (int t = 0; t < lay->n; t++)
        if (i >= lay->t[t].off && i < lay->t[t].off + lay->t[t].n) return lay->t[t].name;
    return "?";
}

int mp_train_ckpt_write(const char *dir, const MpTrainConfig *c, const MpTrainLayout *lay, const float *params,
                        const float *m, const float *v, const MpTrainOptHeader *h, int bf16, MpErr *e) {
    return mp_train_ckpt_write_tok(dir, c, lay, params, m, v, h, bf16, NULL, e);
}

/* The files of a checkpoint into the folder d (each written atomically). */
static int ckpt_files(const char *d, const MpTrainConfig *c, const MpTrainLayout *lay, const float *params,
                      const float *m, const float *v, const MpTrainOptHeader *h, int bf16, const MpTrainTokFiles *tok,
                      MpErr *e) {
    char p[4400];
    char *cj = mp_train_config_json_tok(c, bf16, tok);
    MpTrainOptHeader hh = *h; /* with the hashes of what is written here */
    if (cj) {
        hh.params_hash = mp_hash64(params, lay->total * sizeof *params, MP_FNV_INIT);
        hh.config_hash = mp_hash64(cj, strlen(cj), MP_FNV_INIT);
    }
    /* config.json, model.safetensors and the tokenizer's files: the one HF writer (load/hfwrite.h) */
    MpHfTensor *t = ckpt_tensors(lay, bf16);
    CkptWeights w = {lay, params, bf16};
    const MpHfFile files[2] = {{"tokenizer.json", tok ? tok->json : NULL, tok ? tok->json_len : 0},
                               {"tokenizer_config.json", tok ? tok->config : NULL, tok ? tok->config_len : 0}};
    const MpHfCheckpoint ck = {cj, cj ? strlen(cj) : 0, t, (size_t)lay->n, ckpt_tensor_bytes, &w, 1, files,
                               !tok ? 0 : tok->config ? 2 : 1};
    int rc = cj && t ? mp_hfwrite(d, &ck, e) : mp_err_set(e, "out of memory for config.json");
    free(t);
    free(cj);
    if (rc == MP_OK && m && v) {
        snprintf(p, sizeof p, "%s/optimizer.bin", d);
        rc = opt_write(p, &hh, m, v, lay->total, e);
    }
    return rc;
}

int mp_train_ckpt_write_tok(const char *dir, const MpTrainConfig *c, const MpTrainLayout *lay, const float *params,
                            const float *m, const float *v, const MpTrainOptHeader *h, int bf16,
                            const MpTrainTokFiles *tok, MpErr *e) {
    char tmp[4200], old[4200];
    if (strlen(dir) > 4000) return mp_err_set(e, "checkpoint path too long: %.60s...", dir);
    const size_t bad = ckpt_first_nonfinite(params, lay->total);
    if (bad != SIZE_MAX) /* a NaN that the loss did not see (an unused embedding row) is no good checkpoint */
        return mp_err_set(e, "%s: not written: weight %zu (%s) is NaN or ±Inf", dir, bad, ckpt_tensor_of(lay, bad));
    /* a folder claimed for this checkpoint (--export-bf16: its marker holds the lock and lists
     * the files) is written in place, file by file */
    snprintf(tmp, sizeof tmp, "%s/%s", dir, MP_OUTDIR_MARKER);
    struct stat st;
    if (lstat(tmp, &st) == 0) return ckpt_files(dir, c, lay, params, m, v, h, bf16, tok, e);
    if (mp_temp_path(tmp, sizeof tmp, dir, "tmp", e) != MP_OK || mp_temp_path(old, sizeof old, dir, "old", e) != MP_OK)
        return MP_ERR; /* (their names listed in the run folder's marker before they exist) */
    if (lstat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) /* only a folder is replaced by a checkpoint */
        return mp_err_set(e, "%s: exists and is not a folder: not replaced", dir);
    rm_tree_files(tmp);
    if (mkdir(tmp, 0777) != 0) return mp_err_set(e, "cannot create %s: %s", tmp, strerror(errno));
    if (ckpt_files(tmp, c, lay, params, m, v, h, bf16, tok, e) != MP_OK) {
        rm_tree_files(tmp);
        return MP_ERR;
    }
    /* swap into place: an existing checkpoint is removed only after the new one is complete */
    int had = stat(dir, &st) == 0;
    if (had && rename(dir, old) != 0) {
        rm_tree_files(tmp);
        return mp_err_set(e, "cannot replace %s: %s", dir, strerror(errno));
    }
    if (rename(tmp, dir) != 0) {
        int err = errno;
        if (had) rename(old, dir);
        rm_tree_files(tmp);
        return mp_err_set(e, "cannot rename %s to %s: %s", tmp, dir, strerror(err));
    }
    if (had) rm_tree_files(old);
    mp_outdir_note(dir); /* the whole folder, in the marker of the run's folder */
    return MP_OK;
}

/* The loaded weights and config.json against the hashes of a version-3 optimizer.bin (0: not
 * recorded, an older file), and every weight finite. */
static int ckpt_verify(const float *params, const char *dir, const MpTrainLayout *lay, const MpTrainOptHeader *h,
                       MpErr *e) {
    const size_t bad = ckpt_first_nonfinite(params, lay->total);
    if (bad != SIZE_MAX)
        return mp_err_set(e, "%s/model.safetensors: weight %zu (%s) is NaN or ±Inf: not a checkpoint to resume; HINT: an "
                             "earlier step-NNNNNN",
                          dir, bad, ckpt_tensor_of(lay, bad));
    if (!h) return MP_OK;
    if (h->params_hash && mp_hash64(params, lay->total * sizeof *params, MP_FNV_INIT) != h->params_hash)
        return mp_err_set(e, "%s/model.safetensors: the weights are not those optimizer.bin was written with (edited or "
                             "replaced after the checkpoint)",
                          dir);
    if (!h->config_hash) return MP_OK;
    char p[4400], *cj = NULL;
    size_t n = 0;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (mp_file_read_all(p, (size_t)1 << 24, "config.json", &cj, &n, e) != MP_OK) return MP_ERR;
    const int same = mp_hash64(cj, n, MP_FNV_INIT) == h->config_hash;
    free(cj);
    if (!same)
        return mp_err_set(e, "%s: config.json is not the one written with the checkpoint (edited after it: rope_theta, "
                             "sizes, ...); HINT: restore it, or train a new run",
                          p);
    return MP_OK;
}

int mp_train_ckpt_load_params(float *params, const char *dir, const MpTrainConfig *c, const MpTrainLayout *lay,
                              const MpTrainOptHeader *h, MpErr *e) {
    MpModel mm;
    memset(&mm, 0, sizeof mm);
    if (mp_model_open(&mm, dir, e) != MP_OK) return MP_ERR;
    int rc = MP_OK;
    if (mm.n_layers != c->layers || mm.dim != c->dim || mm.n_heads != c->heads || mm.n_kv_heads != c->kv_heads ||
        mm.ffn != c->ffn || mm.vocab != c->vocab || mm.tie_embeddings != c->tie)
        rc = mp_err_set(e, "%s: model sizes differ from the optimiser state", dir);
    static const MpRole roles[MP_TRAIN_NROLES] = {MP_ROLE_ATTN_NORM, MP_ROLE_Q,        MP_ROLE_K,
                                                  MP_ROLE_V,         MP_ROLE_O,        MP_ROLE_FFN_NORM,
                                                  MP_ROLE_GATE,      MP_ROLE_UP,       MP_ROLE_DOWN};
    for (int i = 0; i < lay->n && rc == MP_OK; i++) {
        MpRole role;
        int layer = 0;
        if (i == mp_train_layout_embed()) role = MP_ROLE_TOK_EMBD;
        else if (i == mp_train_layout_norm(c)) role = MP_ROLE_OUTPUT_NORM;
        else if (!c->tie && i == mp_train_layout_lm_head(c)) role = MP_ROLE_OUTPUT;
        else {
            layer = (i - 1) / MP_TRAIN_NROLES;
            role = roles[(i - 1) % MP_TRAIN_NROLES];
        }
        int64_t shape[2];
        rc = mp_model_tensor_f32(&mm, role, layer, params + lay->t[i].off, lay->t[i].n, shape, e);
        if (rc == MP_OK && (size_t)(shape[0] * shape[1]) != lay->t[i].n)
            rc = mp_err_set(e, "%s: %s has %lld x %lld values, expected %zu", dir, lay->t[i].name, (long long)shape[0],
                            (long long)shape[1], lay->t[i].n);
    }
    mp_model_free(&mm);
    return rc == MP_OK ? ckpt_verify(params, dir, lay, h, e) : rc;
}
