/* fuzz_config.c — libFuzzer target: HF config.json → hyperparameters and RoPE tables.
 * Build and run: make -f tests/fuzz/Makefile fuzz. Seed corpus: config.json of `maskpos mkmodel`
 * models of every arch (llama3 and longrope scaling included). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "load/hfconfig.h" /* mp_hfconfig_parse */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MpModel m;
    memset(&m, 0, sizeof m);
    MpErr e;
    e.msg[0] = 0;
    int rc = mp_hfconfig_parse(&m, (const char *)data, size, "config.json", &e);
    if (rc == MP_OK) {
        /* the table must be as long as the rotary dim says, and finite-sized */
        volatile float s = 0;
        for (int i = 0; i < m.rot_dim / 2; i++) s += m.inv_freq[i] + (m.inv_freq_long ? m.inv_freq_long[i] : 0);
        (void)s;
        if (m.n_heads % m.n_kv_heads || m.rot_dim > m.head_dim || m.rot_dim < 2) __builtin_trap();
    } else if (e.msg[0] == 0) {
        __builtin_trap();
    }
    mp_model_free(&m);
    return 0;
}
