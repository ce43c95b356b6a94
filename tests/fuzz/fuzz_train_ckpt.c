/* fuzz_train_ckpt.c — libFuzzer target: what `maskpos train --resume DIR` reads back — the
 * optimiser state DIR/optimizer.bin (mp_train_opt_read: header, every field checked with the
 * CLI's rules, m and v, checksum) and, when it is accepted, the weights of the checkpoint through
 * mp_train_ckpt_load_params (config.json + model.safetensors of a real run, whose sizes the
 * header must match), then one learning rate of the schedule it describes.
 * Fixtures: $FUZZ_FIXTURES/train (default build-fuzz/fixtures/train), a checkpoint of a 2-step
 * `maskpos train` run; seed corpus: its optimizer.bin files (tests/fuzz/Makefile corpus).
 * Build and run: make -f tests/fuzz/Makefile fuzz. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"    /* fuzz_dir, fuzz_put, fuzz_copy */
#include "train/train.h"  /* mp_train_opt_read, mp_train_ckpt_load_params */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *fx = getenv("FUZZ_FIXTURES");
    char src[1024];
    static const char *names[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(src, sizeof src, "%s/train/%s", fx && *fx ? fx : "build-fuzz/fixtures", names[i]);
        fuzz_copy(src, names[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    char path[1024];
    fuzz_put(path, sizeof path, "optimizer.bin", data, size);
    MpTrainOptHeader h;
    float *m = NULL, *v = NULL;
    MpErr e;
    e.msg[0] = 0;
    if (mp_train_opt_read(path, &h, &m, &v, &e) != MP_OK) {
        if (!e.msg[0] || m || v) __builtin_trap();
        return 0;
    }
    /* accepted: every field is within the CLI's rules */
    if (!(h.val_frac > 0 && h.val_frac < 1) || h.step < 0 || h.step > h.steps || h.warmup < 0 || !(h.eps > 0) ||
        !(h.clip >= 0) || (h.pos != 0 && h.pos != 1))
        __builtin_trap();
    MpTrainConfig c;
    mp_train_config_default(&c);
    c.layers = h.layers;
    c.dim = h.dim;
    c.heads = h.heads;
    c.kv_heads = h.kv_heads;
    c.ffn = h.ffn;
    c.vocab = h.vocab;
    c.seq = h.seq;
    c.batch = h.batch;
    c.pos = h.pos ? MP_TRAIN_POS_NONE : MP_TRAIN_POS_ROPE;
    c.tie = h.tie;
    c.bos = h.bos;
    c.rope_theta = h.rope_theta;
    c.norm_eps = h.norm_eps;
    c.init_std = h.init_std;
    MpTrainLayout lay;
    if (mp_train_config_check(&c, &e) != MP_OK || mp_train_layout_init(&lay, &c, &e) != MP_OK) __builtin_trap();
    if (lay.total != h.n_params) __builtin_trap();
    if (lay.total <= ((size_t)1 << 24)) {
        float *params = malloc(lay.total * sizeof(float));
        if (!params) __builtin_trap();
        (void)mp_train_ckpt_load_params(params, fuzz_dir(), &c, &lay, NULL, &e);
        free(params);
    }
    MpTrainOptConfig o = {.lr = h.lr, .min_lr_frac = h.min_lr_frac, .warmup = h.warmup, .steps = h.steps,
                          .beta1 = h.beta1, .beta2 = h.beta2, .eps = h.eps, .wd = h.wd, .clip = h.clip};
    if (!isfinite(mp_train_lr(&o, h.step))) __builtin_trap();
    mp_train_layout_free(&lay);
    free(m);
    free(v);
    return 0;
}
