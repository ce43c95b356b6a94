/* data.c — the training corpus: a text file read as bytes (vocabulary 256, id = byte value) or
 * encoded once with a tokenizer (src/tok/, vocabulary MpTok.n_ids), the last val_frac of the ids
 * held out for validation, batches drawn by the Philox counter RNG keyed by (seed, step) so a
 * resumed run sees exactly the batches an uninterrupted one would; see train.h. A .jsonl file or
 * a directory of .txt files is read through the corpus reader (src/tok/corpus.h): its documents
 * joined by blank lines into one stream; any other file is read as it is.
 *
 * Implements: mp_train_tok_open/files_free (the tokenizer from the bytes a checkpoint will
 *   carry), mp_train_data_open/free/batch/val_windows/val_batch; with --bos (MpTrainData.bos)
 *   every window starts with the BOS id.
 * Does not: stream files larger than memory, put BOS/EOS at document boundaries (the file is one
 *   stream of ids, as the byte path is one stream of bytes; docs/train.md), or read GGUF
 *   tokenizers (refused: checkpoints carry tokenizer.json).
 * Tested by: tests/test_train.c (too-small corpus, resume exactness, ids = mp_tok_encode).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/err.h"    /* MpErr */
#include "core/rng.h"    /* MpRng */
#include "core/util.h"   /* mp_fnv1a64, mp_file_read_all, mp_path_join */
#include "tok/tok.h"     /* MpTok, mp_tok_init_json, mp_tok_encode */
#include "tok/corpus.h"  /* mp_tok_corpus_join: .jsonl and directory corpora */
#include "train/train.h" /* MpTrainData, MpTrainTokFiles */

#define DATA_BATCH_STREAM UINT64_C(0x6261746368000000) /* "batch": Philox stream base, + step */
#define DATA_TOK_MAX_BYTES ((size_t)1 << 30)           /* tokenizer.json larger than 1 GB: refused */

/* ======================================= tokenizer ======================================= */

void mp_train_tok_files_free(MpTrainTokFiles *f) {
    free(f->json);
    free(f->config);
    memset(f, 0, sizeof *f);
}

static int tok_is_gguf_name(const char *path) {
    size_t n = strlen(path);
    return n >= 5 && !strcmp(path + n - 5, ".gguf");
}

int mp_train_tok_open(MpTok *tok, MpTrainTokFiles *f, const char *path, MpErr *e) {
    memset(tok, 0, sizeof *tok);
    memset(f, 0, sizeof *f);
    static const char gguf_msg[] = "--tokenizer %s: a GGUF tokenizer cannot be copied into the checkpoints (they carry "
                                   "tokenizer.json); give the model's HF directory or tokenizer.json";
    if (tok_is_gguf_name(path)) return mp_err_set(e, gguf_msg, path);
    struct stat st;
    if (stat(path, &st) != 0) return mp_err_set(e, "--tokenizer %s: %s", path, strerror(errno));
    char cfg_path[4200];
    if (S_ISDIR(st.st_mode)) {
        if (mp_path_join(f->src, sizeof f->src, path, "tokenizer.json", e) != MP_OK) return MP_ERR;
        if (!mp_file_exists(f->src)) {
            memset(f, 0, sizeof *f);
            return mp_err_set(e, "--tokenizer %s: no tokenizer.json in this directory", path);
        }
    } else {
        if (strlen(path) >= sizeof f->src) return mp_err_set(e, "--tokenizer %s: path too long", path);
        snprintf(f->src, sizeof f->src, "%s", path);
    }
    /* tokenizer_config.json beside tokenizer.json, as mp_tok_init looks for it */
    const char *slash = strrchr(f->src, '/');
    if (slash) snprintf(cfg_path, sizeof cfg_path, "%.*s/tokenizer_config.json", (int)(slash - f->src), f->src);
    else snprintf(cfg_path, sizeof cfg_path, "tokenizer_config.json");
    if (mp_file_read_all(f->src, DATA_TOK_MAX_BYTES, "a tokenizer", &f->json, &f->json_len, e) != MP_OK) {
        mp_train_tok_files_free(f);
        return mp_err_prefix(e, "--tokenizer");
    }
    if (f->json_len >= 4 && !memcmp(f->json, "GGUF", 4)) {
        mp_train_tok_files_free(f);
        return mp_err_set(e, gguf_msg, path);
    }
    if (mp_file_exists(cfg_path) &&
        mp_file_read_all(cfg_path, DATA_TOK_MAX_BYTES, "a tokenizer config", &f->config, &f->config_len, e) != MP_OK) {
        mp_train_tok_files_free(f);
        return mp_err_prefix(e, "--tokenizer");
    }
    if (mp_tok_init_json(tok, f->json, f->json_len, f->config, f->config_len, e) != MP_OK) {
        char src[4096];
        snprintf(src, sizeof src, "%s", f->src);
        mp_train_tok_files_free(f);
        return mp_err_prefix(e, "--tokenizer %s", src);
    }
    snprintf(tok->path, sizeof tok->path, "%s", f->src);
    f->hash = tok->hash;
    f->n_ids = tok->n_ids;
    f->bos_id = tok->bos_id;
    f->eos_id = tok->eos_id;
    return MP_OK;
}

/* ========================================= corpus ======================================== */

static int data_read_file(const char *path, char **buf, size_t *n, MpErr *e) {
    *buf = NULL;
    *n = 0;
    return mp_file_read_all(path, SIZE_MAX - 1, "a corpus", buf, n, e); /* refuses a FIFO */
}

/* A .jsonl file or a directory of .txt files: the corpus reader's documents joined by blank lines. */
static int data_is_documents(const char *path) {
    struct stat st;
    size_t n = strlen(path);
    return (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) || (n > 6 && !strcmp(path + n - 6, ".jsonl"));
}

int mp_train_data_open(MpTrainData *d, const char *path, MpTok *tok, double val_frac, int seq, MpErr *e) {
    memset(d, 0, sizeof *d);
    /* (a fraction above 1 or NaN made the train split's size wrap around) */
    if (!(val_frac >= mp_train_ranges[MP_TRAIN_SET_VAL_FRAC].lo && val_frac <= mp_train_ranges[MP_TRAIN_SET_VAL_FRAC].hi))
        return mp_err_set(e, "corpus %s: validation fraction %g is outside [%g, %g]", path, val_frac,
                          mp_train_ranges[MP_TRAIN_SET_VAL_FRAC].lo, mp_train_ranges[MP_TRAIN_SET_VAL_FRAC].hi);
    char *text;
    size_t len;
    if (data_is_documents(path)) {
        MpTokBuf b = {0};
        int64_t ndocs;
        if (mp_tok_corpus_join(&b, path, NULL, &ndocs, e) != MP_OK) {
            mp_tok_buf_free(&b);
            return mp_err_prefix(e, "corpus");
        }
        text = b.data ? b.data : calloc(1, 1);
        len = b.n;
        if (!text) return mp_err_set(e, "out of memory for corpus %s", path);
    } else if (data_read_file(path, &text, &len, e) != MP_OK)
        return MP_ERR;
    d->n_bytes = len;
    d->hash = mp_fnv1a64(text, len, MP_FNV_INIT);
    if (!tok) {
        d->n = len;
        d->ids = mp_try_malloc((len ? len : 1) * sizeof(int32_t));
        if (!d->ids) {
            free(text);
            return mp_err_set(e, "out of memory for corpus %s (%zu ids)", path, len);
        }
        for (size_t i = 0; i < len; i++) d->ids[i] = (uint8_t)text[i];
    } else {
        MpTokIds ids;
        memset(&ids, 0, sizeof ids);
        if (mp_tok_encode(tok, &ids, text, len, 0, e) != MP_OK) {
            free(text);
            mp_tok_ids_free(&ids);
            return mp_err_prefix(e, "tokenizing corpus %s", path);
        }
        for (size_t i = 0; i < ids.n; i++)
            if (ids.ids[i] < 0 || ids.ids[i] >= tok->n_ids) {
                int32_t bad = ids.ids[i];
                free(text);
                mp_tok_ids_free(&ids);
                return mp_err_set(e, "tokenizing corpus %s: id %d outside the vocabulary [0, %d)", path, bad,
                                  tok->n_ids);
            }
        d->ids = ids.ids; /* ownership moves to d */
        d->n = ids.n;
    }
    free(text);
    d->bos = -1;
    size_t nval = (size_t)((double)d->n * val_frac);
    d->n_train = d->n - nval;
    /* a window needs T+1 ids (inputs and the shifted targets), in both splits */
    size_t need = (size_t)seq + 1;
    if (d->n_train < need || nval < need) {
        size_t min_total = (size_t)((double)need / (val_frac < 1 - val_frac ? val_frac : 1 - val_frac)) + 2;
        size_t n = d->n;
        mp_train_data_free(d);
        if (!tok)
            return mp_err_set(e, "corpus %s is too small for --seq %d: %zu bytes, need at least %zu (%d + 1 bytes in "
                                 "the train split and in the %.0f%% validation split)",
                              path, seq, len, min_total, seq, 100 * val_frac);
        return mp_err_set(e, "corpus %s is too small for --seq %d: %zu tokens (%zu bytes), need at least %zu tokens "
                             "(%d + 1 in the train split and in the %.0f%% validation split)",
                          path, seq, n, len, min_total, seq, 100 * val_frac);
    }
    return MP_OK;
}

void mp_train_data_free(MpTrainData *d) {
    free(d->ids);
    memset(d, 0, sizeof *d);
}

/* ======================================== batches ======================================== */

/* One window from ids[off]: inputs ids[off..off+T-1], targets shifted by one; with a BOS
 * (--bos) the inputs are BOS, ids[off..off+T-2] and the targets ids[off..off+T-1], so every
 * window starts as a document does for a tokenizer that adds BOS. */
static void data_window(int32_t *inputs, int32_t *targets, const MpTrainData *d, size_t off, int T) {
    if (d->bos >= 0) {
        inputs[0] = d->bos;
        for (int t = 1; t < T; t++) inputs[t] = d->ids[off + (size_t)t - 1];
        for (int t = 0; t < T; t++) targets[t] = d->ids[off + (size_t)t];
        return;
    }
    for (int t = 0; t < T; t++) {
        inputs[t] = d->ids[off + (size_t)t];
        targets[t] = d->ids[off + (size_t)t + 1];
    }
}

void mp_train_data_batch(int32_t *inputs, int32_t *targets, const MpTrainData *d, int B, int T, uint64_t seed,
                         int64_t step) {
    MpRng r;
    mp_rng_init(&r, seed, DATA_BATCH_STREAM + (uint64_t)step);
    uint64_t span = (uint64_t)(d->n_train - (size_t)T); /* offsets 0 .. n_train - T - 1 */
    for (int b = 0; b < B; b++) {
        uint64_t off = (uint64_t)(mp_rng_uniform(&r) * (double)span);
        if (off >= span) off = span - 1;
        data_window(inputs + (size_t)b * T, targets + (size_t)b * T, d, (size_t)off, T);
    }
}

int64_t mp_train_data_val_windows(const MpTrainData *d, int T) {
    return (int64_t)((d->n - d->n_train) / ((size_t)T + 1));
}

void mp_train_data_val_batch(int32_t *inputs, int32_t *targets, const MpTrainData *d, int B, int T, int64_t w0) {
    int64_t nw = mp_train_data_val_windows(d, T);
    for (int b = 0; b < B; b++) {
        size_t off = d->n_train + (size_t)((w0 + b) % nw) * ((size_t)T + 1);
        data_window(inputs + (size_t)b * T, targets + (size_t)b * T, d, (size_t)off, T);
    }
}
