/* data.c — the training corpus: a text file read as bytes (vocabulary 256), the last val_frac
 * held out for validation, batches drawn by the Philox counter RNG keyed by (seed, step) so a
 * resumed run sees exactly the batches an uninterrupted one would; see train.h.
 *
 * Implements: mp_train_data_open/free/batch/val_windows/val_batch.
 * Does not: tokenise with a BPE vocabulary, or stream files larger than memory.
 * Tested by: tests/test_train.c (too-small corpus, resume exactness).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"    /* MpErr */
#include "core/rng.h"    /* MpRng */
#include "core/util.h"   /* mp_fnv1a64 */
#include "train/train.h" /* MpTrainData */

#define DATA_BATCH_STREAM UINT64_C(0x6261746368000000) /* "batch": Philox stream base, + step */

int mp_train_data_open(MpTrainData *d, const char *path, double val_frac, int seq, MpErr *e) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) return mp_err_set(e, "cannot open corpus %s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return mp_err_set(e, "cannot seek in corpus %s", path);
    }
    long len = ftell(f);
    rewind(f);
    if (len < 0) {
        fclose(f);
        return mp_err_set(e, "cannot size corpus %s", path);
    }
    d->n = (size_t)len;
    d->bytes = mp_try_malloc(d->n ? d->n : 1);
    if (!d->bytes) {
        fclose(f);
        return mp_err_set(e, "out of memory for corpus %s (%zu bytes)", path, d->n);
    }
    size_t got = d->n ? fread(d->bytes, 1, d->n, f) : 0;
    fclose(f);
    if (got != d->n) {
        mp_train_data_free(d);
        return mp_err_set(e, "short read of corpus %s (%zu of %zu bytes)", path, got, (size_t)len);
    }
    d->hash = mp_fnv1a64(d->bytes, d->n, MP_FNV_INIT);
    size_t nval = (size_t)((double)d->n * val_frac);
    d->n_train = d->n - nval;
    /* a window needs T+1 bytes (inputs and the shifted targets), in both splits */
    size_t need = (size_t)seq + 1;
    if (d->n_train < need || nval < need) {
        size_t min_total = (size_t)((double)need / (val_frac < 1 - val_frac ? val_frac : 1 - val_frac)) + 2;
        mp_train_data_free(d);
        return mp_err_set(e, "corpus %s is too small for --seq %d: %zu bytes, need at least %zu (%d + 1 bytes in the "
                             "train split and in the %.0f%% validation split)",
                          path, seq, (size_t)len, min_total, seq, 100 * val_frac);
    }
    return MP_OK;
}

void mp_train_data_free(MpTrainData *d) {
    free(d->bytes);
    memset(d, 0, sizeof *d);
}

void mp_train_data_batch(int32_t *inputs, int32_t *targets, const MpTrainData *d, int B, int T, uint64_t seed,
                         int64_t step) {
    MpRng r;
    mp_rng_init(&r, seed, DATA_BATCH_STREAM + (uint64_t)step);
    uint64_t span = (uint64_t)(d->n_train - (size_t)T); /* offsets 0 .. n_train - T - 1 */
    for (int b = 0; b < B; b++) {
        uint64_t off = (uint64_t)(mp_rng_uniform(&r) * (double)span);
        if (off >= span) off = span - 1;
        for (int t = 0; t < T; t++) {
            inputs[(size_t)b * T + t] = d->bytes[off + (uint64_t)t];
            targets[(size_t)b * T + t] = d->bytes[off + (uint64_t)t + 1];
        }
    }
}

int64_t mp_train_data_val_windows(const MpTrainData *d, int T) {
    return (int64_t)((d->n - d->n_train) / ((size_t)T + 1));
}

void mp_train_data_val_batch(int32_t *inputs, int32_t *targets, const MpTrainData *d, int B, int T, int64_t w0) {
    int64_t nw = mp_train_data_val_windows(d, T);
    for (int b = 0; b < B; b++) {
        size_t off = d->n_train + (size_t)((w0 + b) % nw) * ((size_t)T + 1);
        for (int t = 0; t < T; t++) {
            inputs[(size_t)b * T + t] = d->bytes[off + (size_t)t];
            targets[(size_t)b * T + t] = d->bytes[off + (size_t)t + 1];
        }
    }
}
