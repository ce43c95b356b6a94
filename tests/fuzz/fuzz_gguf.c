/* fuzz_gguf.c — libFuzzer target: the GGUF reader, then the model description built from it,
 * then dequantisation of every role of every layer (bounded in size), i.e. everything a user's
 * .gguf file goes through before the forward pass.
 * Build and run: make -f tests/fuzz/Makefile fuzz. Seed corpus: tiny `maskpos mkmodel --format
 * gguf` models of every arch and quant type. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "load/model.h" /* mp_model_open_gguf_buffer, mp_model_tensor_f32 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MpModel m;
    MpErr e;
    e.msg[0] = 0;
    if (mp_model_open_gguf_buffer(&m, data, size, "fuzz.gguf", &e) != MP_OK) {
        if (e.msg[0] == 0) __builtin_trap(); /* an error must come with a message */
        /* the bare reader too (it may accept files the model layer rejects) */
        MpGguf g;
        if (mp_gguf_parse(&g, data, size, "fuzz.gguf", &e) == MP_OK) {
            for (size_t i = 0; i < g.n_kv; i++) {
                const MpGgufKv *kv = &g.kv[i];
                int64_t v;
                double x;
                char s[64];
                (void)mp_gguf_kv_int(kv, &v);
                (void)mp_gguf_kv_num(kv, &x);
                (void)mp_gguf_kv_str(kv, s, sizeof s);
                size_t cur[2] = {0, 0};
                const uint8_t *sp;
                uint64_t len;
                for (int k = 0; k < 1000 && mp_gguf_arr_next_str(kv, cur, &sp, &len) == MP_OK; k++) (void)sp;
                for (uint64_t k = 0; k < kv->arr_n && k < 1000; k++) (void)mp_gguf_arr_num(kv, k, &x);
            }
            mp_gguf_free(&g);
        }
        return 0;
    }
    size_t budget = 1u << 22; /* floats dequantised per input, keeps each run fast */
    for (int l = -1; l < m.n_layers; l++)
        for (int r = 0; r < MP_ROLE_COUNT; r++) {
            if ((l < 0) != mp_model_role_is_global((MpRole)r)) continue;
            int64_t sh[2];
            if (!mp_model_shape(&m, (MpRole)r, l, sh)) continue;
            size_t n = (size_t)sh[0] * (size_t)sh[1];
            if (n > budget) continue;
            budget -= n;
            float *buf = malloc(n ? n * sizeof *buf : 1);
            if (!buf) continue;
            if (mp_model_tensor_f32(&m, (MpRole)r, l, buf, n, NULL, &e) != MP_OK) __builtin_trap();
            free(buf);
        }
    (void)mp_model_param_count(&m);
    mp_model_free(&m);
    return 0;
}
