/* fuzz_safetensors.c — libFuzzer target: the safetensors header parser on arbitrary bytes.
 * Build and run: make -f tests/fuzz/Makefile fuzz (see tests/fuzz/Makefile). Seed corpus: the
 * model.safetensors files of tiny `maskpos mkmodel` models. A crash, leak or UB report is a bug:
 * the parser must return MP_ERR with a message for every malformed input. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "load/safetensors.h" /* mp_st_parse */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MpSt st;
    MpErr e;
    if (mp_st_parse(&st, data, size, "fuzz.safetensors", &e) == MP_OK) {
        /* touch every tensor's first and last byte: offsets must lie inside the input */
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < st.n; i++) {
            size_t nb = (size_t)(st.t[i].end - st.t[i].begin);
            if (nb) sink ^= st.t[i].data[0] ^ st.t[i].data[nb - 1];
            (void)mp_st_find(&st, st.t[i].name);
        }
        (void)sink;
        mp_st_free(&st);
    } else if (!memchr(e.msg, 0, sizeof e.msg) || e.msg[0] == 0) {
        __builtin_trap(); /* an error must come with a message */
    }
    return 0;
}
