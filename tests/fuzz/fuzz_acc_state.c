/* fuzz_acc_state.c — libFuzzer target: the accumulator's state file reader (maskpos_acc_open_state,
 * what maskpos.Accumulator.load_state(path) reads: "MPACCST1", a JSON header of options, counts,
 * meta and array names, the sums, a checksum). Every input is either refused with a message or
 * gives an accumulator whose result can be computed (its options within the API's ranges, every
 * size checked against the file's before a byte of sums is read). Seed corpus: state files of small
 * accumulators (python: Accumulator.save_state; one with lengths, one per head with probs).
 * Build: clang -fsanitize=fuzzer,address,undefined with every file of src/ but src/cli (it needs the
 * whole library: the reader makes the accumulator it fills). */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_util.h" /* fuzz_put */
#include "maskpos.h"   /* maskpos_acc_open_state */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1024];
    fuzz_put(path, sizeof path, "state.bin", data, size);
    MaskposAcc *a = NULL;
    if (maskpos_acc_open_state(path, &a) == MASKPOS_OK) {
        if (!a) __builtin_trap();
        MaskposResult *r = NULL;
        if (maskpos_acc_count(a, -1) > 0 && maskpos_acc_result(a, &r) == MASKPOS_OK) maskpos_result_free(r);
        maskpos_acc_free(a);
    } else if (a || !maskpos_last_error()[0]) {
        __builtin_trap();
    }
    return 0;
}
