/* fuzz_probe_ckpt.c — libFuzzer target: the probe checkpoint reader (mp_probe_ckpt_load), what
 * `maskpos probe --resume` reads back from OUT/checkpoint.bin.
 * The accumulator is sized from the input's own header when its sizes are small (L <= 4,
 * H <= 4, 2 <= S <= 32) and the run key is taken from it too, so mutations of a real checkpoint
 * get past the "another run" check to the sums, the counts and the checksum; other inputs meet a
 * fixed 2-layer, 2-head, S = 8 accumulator. Seed corpus: checkpoints of real probe runs
 * (tests/fuzz/Makefile corpus: probe --checkpoint-every, stopped by MASKPOS_TEST_KILL_AFTER).
 * Build and run: make -f tests/fuzz/Makefile fuzz. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"     /* fuzz_put */
#include "model/probe.h"   /* MpProbeAcc, mp_probe_ckpt_load */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int32_t rd32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int L = 2, H = 2, S = 8, per_head = 0, causal = 1;
    uint64_t key = 1;
    if (size >= 56) { /* CkptHeader: magic, version, header_bytes, key, n_done, L, H, S, per_head, causal */
        int32_t l = rd32(data + 32), h = rd32(data + 36), s = rd32(data + 40);
        if (l >= 1 && l <= 4 && h >= 1 && h <= 4 && s >= 2 && s <= 32) {
            L = l;
            H = h;
            S = s;
            per_head = rd32(data + 44) != 0;
            causal = rd32(data + 48) != 0;
            memcpy(&key, data + 16, 8);
        }
    }
    char path[1024];
    fuzz_put(path, sizeof path, "checkpoint.bin", data, size);
    unsigned char mask[4] = {0};
    for (int l = 0; l < L; l++) mask[l] = 1;
    for (int skip = 0; skip <= (S >= 3); skip++) { /* mp_probe_acc_skip needs S - skip >= 2 (as probe ensures) */
        MpProbeAcc a;
        MpErr e;
        e.msg[0] = 0;
        if (mp_probe_acc_init(&a, mask, L, H, S, per_head, causal, 1, &e) != MP_OK) __builtin_trap();
        if (skip) mp_probe_acc_skip(&a, 1);
        int missing = 0;
        if (mp_probe_ckpt_load(path, &a, key, &missing, &e) == MP_OK) {
            /* what a resumed run computes next: means, errors, block test */
            if (a.n_done < 0) __builtin_trap();
            const size_t SS = (size_t)S * S;
            double *mean = calloc(SS * (size_t)L, sizeof(double)), *se = calloc(SS * (size_t)L, sizeof(double));
            double *mh = per_head ? calloc(SS * (size_t)L * (size_t)H, sizeof(double)) : NULL;
            if (!mean || !se || (per_head && !mh)) __builtin_trap();
            mp_probe_acc_mean(&a, mean, mh);
            mp_probe_acc_se(&a, se);
            for (int l = 0; l < L; l++) (void)mp_probe_acc_block_z(&a, l);
            free(mean);
            free(se);
            free(mh);
        } else if (!e.msg[0] || missing) {
            __builtin_trap();
        }
        mp_probe_acc_free(&a);
    }
    return 0;
}
