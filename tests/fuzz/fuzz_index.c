/* fuzz_index.c — libFuzzer target: model.safetensors.index.json of a sharded HF checkpoint, read
 * by mp_model_open beside a real config.json and two real shards (names that leave the folder,
 * missing shards or tensors, duplicate keys, non-strings, empty maps must all be refused with a
 * message; an accepted map must give a model whose tensors can be read).
 * Fixtures: $FUZZ_FIXTURES/sharded (default build-fuzz/fixtures/sharded), from
 * `maskpos mkmodel --shards 2`; seed corpus: index files of mkmodel models with 2 and 3 shards.
 * Build and run: make -f tests/fuzz/Makefile fuzz. */
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"  /* fuzz_dir, fuzz_put, fuzz_copy */
#include "load/model.h" /* mp_model_open, mp_model_tensor_f32 */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void setup(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *fx = getenv("FUZZ_FIXTURES");
    char dir[1024], src[1400];
    snprintf(dir, sizeof dir, "%s/sharded", fx && *fx ? fx : "build-fuzz/fixtures");
    DIR *d = opendir(dir);
    if (!d) abort();
    for (struct dirent *de; (de = readdir(d));) {
        size_t n = strlen(de->d_name);
        if (!strcmp(de->d_name, "config.json") || (n > 12 && !strcmp(de->d_name + n - 12, ".safetensors"))) {
            snprintf(src, sizeof src, "%s/%s", dir, de->d_name);
            fuzz_copy(src, de->d_name);
        }
    }
    closedir(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    char path[1024];
    fuzz_put(path, sizeof path, "model.safetensors.index.json", data, size);
    MpModel m;
    MpErr e;
    e.msg[0] = 0;
    if (mp_model_open(&m, fuzz_dir(), &e) != MP_OK) {
        if (!e.msg[0]) __builtin_trap();
        return 0;
    }
    /* accepted: the embedding and layer 0's query weights come from the shards */
    float buf[4096];
    int64_t shape[2];
    (void)mp_model_tensor_f32(&m, MP_ROLE_TOK_EMBD, 0, buf, sizeof buf / sizeof buf[0], shape, &e);
    (void)mp_model_tensor_f32(&m, MP_ROLE_Q, 0, buf, sizeof buf / sizeof buf[0], shape, &e);
    mp_model_free(&m);
    return 0;
}
