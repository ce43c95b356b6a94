/* fuzz_npy.c — libFuzzer target: the .npy reader (mp_npy_parse, then mp_npy_to_f64).
 * Build and run: make -f tests/fuzz/Makefile fuzz. Seed corpus: the .npy files of a
 * `maskpos simulate`, `theory`, `corpus` and `probe` run (every dtype and rank they write) and a
 * numpy-written file of every other dtype (tests/fuzz/Makefile corpus). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/npy.h" /* mp_npy_parse, mp_npy_to_f64 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    MpNpy a;
    MpErr e;
    e.msg[0] = 0;
    if (mp_npy_parse(data, size, &a, &e) != MP_OK) {
        if (!e.msg[0]) __builtin_trap(); /* a refusal always says why */
        return 0;
    }
    /* the element count is the product of the shape, and the data holds that many */
    size_t count = 1;
    for (int d = 0; d < a.ndim; d++) count *= (size_t)a.shape[d];
    if (count != a.count || a.ndim < 0 || a.ndim > MP_NPY_MAX_DIMS) __builtin_trap();
    double *x = NULL;
    if (mp_npy_to_f64(&a, &x, &e) == MP_OK) {
        volatile double s = 0;
        for (size_t i = 0; i < a.count; i++) s += x[i];
        (void)s;
        free(x);
    }
    mp_npy_free(&a);
    return 0;
}
