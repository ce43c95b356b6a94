/* train_step.c — the maskpos side of bench/train_vs_torch: times training steps of the f32 model.
 *
 * Builds the model of the given sizes with the initial weights of `maskpos train --seed 0`, takes
 * one batch of random bytes (Philox), writes the initial checkpoint and the batch for the torch
 * side (DIR/init, DIR/batch.npy), then runs 1 warm-up + K timed steps on that batch (forward,
 * backward, clip, AdamW) and prints "maskpos_step_ms <median> loss1 <loss of step 1>".
 * Not a test; compiled by bench/train_vs_torch against the project's library.
 * usage: train_step DIR LAYERS DIM HEADS KV FFN SEQ BATCH K THREADS
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h"     /* mp_npy_write: the batch for the torch side */
#include "core/rng.h"     /* MpRng: the random batch */
#include "core/util.h"    /* mp_time_now */
#include "train/train.h"  /* the f32 model, AdamW, checkpoint writer */

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 11) {
        fprintf(stderr, "usage: train_step DIR LAYERS DIM HEADS KV FFN SEQ BATCH K THREADS\n");
        return 2;
    }
    MpTrainConfig c;
    mp_train_config_default(&c);
    c.layers = atoi(argv[2]);
    c.dim = atoi(argv[3]);
    c.heads = atoi(argv[4]);
    c.kv_heads = atoi(argv[5]);
    c.ffn = atoi(argv[6]);
    c.seq = atoi(argv[7]);
    c.batch = atoi(argv[8]);
    int K = atoi(argv[9]);
    omp_set_num_threads(atoi(argv[10]));
    MpErr e;
    MpTrainModel_f32 m;
    if (mp_train_config_check(&c, &e) || mp_train_model_init_f32(&m, &c, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    mp_train_init_params(m.params, &m.lay, &c, 0);
    size_t np = m.lay.total, BT = (size_t)c.batch * c.seq;
    float *mm = calloc(np, 4), *vv = calloc(np, 4);
    int32_t *ids = malloc(2 * BT * sizeof(int32_t));
    MpRng r;
    mp_rng_init(&r, 0, 99);
    for (size_t i = 0; i < 2 * BT; i++) ids[i] = (int32_t)(mp_rng_u32(&r) % 256);
    char path[4200];
    MpTrainOptHeader h;
    memset(&h, 0, sizeof h);
    snprintf(path, sizeof path, "%s/init", argv[1]);
    if (mp_train_ckpt_write(path, &c, &m.lay, m.params, NULL, NULL, &h, 0, &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    int64_t shp[3] = {2, c.batch, c.seq};
    snprintf(path, sizeof path, "%s/batch.npy", argv[1]);
    if (mp_npy_write(path, MP_DT_I32, ids, 3, shp, &e)) return 2;
    MpTrainOptConfig o;
    mp_train_opt_default(&o);
    double *t = malloc(sizeof(double) * (size_t)(K + 1)), loss1 = 0;
    for (int s = 0; s <= K; s++) {
        double t0 = mp_time_now();
        double loss = mp_train_forward_f32(&m, ids, ids + BT);
        mp_train_backward_f32(&m, ids);
        mp_train_clip(m.grads, np, o.clip);
        mp_train_adamw(m.params, mm, vv, m.grads, &m.lay, &o, o.lr, s + 1);
        t[s] = mp_time_now() - t0;
        if (s == 0) loss1 = loss;
    }
    qsort(t + 1, (size_t)K, sizeof(double), cmp);
    printf("maskpos_step_ms %.2f loss1 %.6f params %zu\n", 1e3 * t[1 + K / 2], loss1, np);
    free(t), free(mm), free(vv), free(ids);
    mp_train_model_free_f32(&m);
    return 0;
}
