/* test_plugin.c — device backends as plugins (src/model/fwd_plugin.c): every way --device cuda can
 * be refused, each one line with exit 2 and nothing written, for probe, logits and generate, and
 * the plugin found beside the binary and beside libmaskpos.so.
 *
 *   - no plugin file (MASKPOS_CUDA_PLUGIN naming a missing file): "not built: make CUDA=1";
 *   - a file that is no shared library; one without the entry function; one of another
 *     interface version (tests/plugin_stub.c built three ways by the Makefile);
 *   - the stub with no device, and with two: cuda:5 refused, cuda:x refused before loading,
 *     cuda:1 accepted by the device check and refused for having no forward pass;
 *   - no variable set: the binary and libmaskpos.so (dlopen'd here, as Python's ctypes does) look
 *     beside themselves: the real plugin when make CUDA=1 built it (then, with
 *     CUDA_VISIBLE_DEVICES='', "no CUDA device here"), else "not built" naming that place;
 *   - the real plugin (make CUDA=1) on a machine without a device, or with its devices hidden:
 *     "no CUDA device here" (skipped without the plugin: tests/expected_skips.txt,
 *     build-without-cuda).
 * Run: build/tests/test_plugin (about 2 s).
 */
#include <dlfcn.h>
#include <sys/stat.h>

#include "model/fwd_plugin.h" /* mp_fwd_plugin_known */
#include "testutil.h"

static char model_dir[512], ids_path[512], build_dir[512];

static int plugin_setup(void **state) {
    (void)state;
    snprintf(build_dir, sizeof build_dir, "%s", MP_TEST_BIN);
    *strrchr(build_dir, '/') = 0;
    const char *d = mp_test_tmpdir();
    snprintf(model_dir, sizeof model_dir, "%s/m", d);
    snprintf(ids_path, sizeof ids_path, "%s/ids.u32", d);
    char out[4096];
    if (mp_test_run(out, sizeof out, "mkmodel --arch llama --layers 2 --vocab 300 --dim 32 --heads 4 %s", model_dir) != 0)
        fail_msg("mkmodel: %s", out);
    const uint32_t ids[8] = {1, 5, 9, 13, 2, 6, 10, 14};
    mp_test_write_file(ids_path, ids, sizeof ids);
    return 0;
}

static int exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs probe, logits and generate with --device `dev` and the environment `env` (shell
 * assignments); each must exit 2 with one line holding `want`, and write nothing. */
static void refused_everywhere(const char *env, const char *dev, const char *want) {
    const char *d = mp_test_tmpdir();
    char outs[3][600];
    snprintf(outs[0], sizeof outs[0], "%s/probe-out", d);
    snprintf(outs[1], sizeof outs[1], "%s/logits.npy", d);
    snprintf(outs[2], sizeof outs[2], "%s/gen.npy", d);
    char cmds[3][2048];
    snprintf(cmds[0], sizeof cmds[0], "probe %s --tokens %s --seq 4 --out %s --device %s", model_dir, ids_path, outs[0], dev);
    snprintf(cmds[1], sizeof cmds[1], "logits %s --tokens 1,2,3 --out %s --device %s", model_dir, outs[1], dev);
    snprintf(cmds[2], sizeof cmds[2], "generate %s --n 2 --len 4 --out %s --device %s", model_dir, outs[2], dev);
    for (int i = 0; i < 3; i++) {
        char out[4096];
        const int rc = mp_test_shell(out, sizeof out, "%s %s %s", env, MP_TEST_BIN, cmds[i]);
        const char *nl = strchr(out, '\n');
        if (rc != 2 || !strstr(out, want) || (nl && nl[1]))
            fail_msg("%s maskpos %s: exit %d, wanted 2 and one line with '%s', got: %s", env, cmds[i], rc, want, out);
        if (exists(outs[i])) fail_msg("%s maskpos %s: refused, yet %s was written", env, cmds[i], outs[i]);
    }
}

static void test_no_plugin_file(void **state) {
    (void)state;
    refused_everywhere("MASKPOS_CUDA_PLUGIN=/nonexistent/libmaskpos-cuda.so", "cuda",
                       "--device cuda: not built: make CUDA=1 (no /nonexistent/libmaskpos-cuda.so)");
    refused_everywhere("MASKPOS_CUDA_PLUGIN=/nonexistent/libmaskpos-cuda.so", "cuda:1", "--device cuda:1: not built: make CUDA=1");
}

static void test_not_a_library(void **state) {
    (void)state;
    char path[600], env[700];
    snprintf(path, sizeof path, "%s/fake.so", mp_test_tmpdir());
    mp_test_write_file(path, "not an ELF file\n", 16);
    snprintf(env, sizeof env, "MASKPOS_CUDA_PLUGIN=%s", path);
    refused_everywhere(env, "cuda", "cannot be loaded (");
    refused_everywhere(env, "cuda", "HINT: it needs the CUDA 13 libraries (libcublasLt.so.13) on the library path");
}

static void test_no_entry(void **state) {
    (void)state;
    char env[700];
    snprintf(env, sizeof env, "MASKPOS_CUDA_PLUGIN=%s/tests/plugin_stub_noentry.so", build_dir);
    refused_everywhere(env, "cuda", "is not a maskpos plugin (no function maskpos_fwd_plugin); HINT: rebuild it with make CUDA=1");
}

static void test_other_version(void **state) {
    (void)state;
    char env[700], want[200];
    snprintf(env, sizeof env, "MASKPOS_CUDA_PLUGIN=%s/tests/plugin_stub_abi.so", build_dir);
    snprintf(want, sizeof want, "speaks plugin interface %d (a %zu-byte descriptor), this maskpos %d (%zu bytes); HINT: rebuild both with make CUDA=1",
             MP_FWD_PLUGIN_ABI + 1, sizeof(MpFwdPlugin), MP_FWD_PLUGIN_ABI, sizeof(MpFwdPlugin));
    refused_everywhere(env, "cuda", want);
}

static void test_stub_devices(void **state) {
    (void)state;
    char env[700];
    snprintf(env, sizeof env, "MASKPOS_CUDA_PLUGIN=%s/tests/plugin_stub.so", build_dir);
    refused_everywhere(env, "cuda", "--device cuda: no CUDA device here (stub: STUB_DEVICES=(unset))");
    snprintf(env, sizeof env, "STUB_DEVICES=2 MASKPOS_CUDA_PLUGIN=%s/tests/plugin_stub.so", build_dir);
    refused_everywhere(env, "cuda:5", "--device cuda:5: no device 5 (this machine shows 2 devices: cuda:0 .. cuda:1)");
    refused_everywhere(env, "cuda:x", "--device cuda:x: 'x' is not a device number (cuda or cuda:N)");
    refused_everywhere(env, "cuda:1", "--device cuda:1: the plugin");
    refused_everywhere(env, "cuda:1", "(stub) has no forward pass");
    /* names: known plugin backends, and the rest */
    assert_true(mp_fwd_plugin_known("cuda") && mp_fwd_plugin_known("cuda:3") && mp_fwd_plugin_known("cuda:x"));
    assert_false(mp_fwd_plugin_known("cudax") || mp_fwd_plugin_known("cpu") || mp_fwd_plugin_known(NULL));
    refused_everywhere(env, "cudax", "--device cudax: no such backend (known: cpu, cuda)");
}

/* What --device cuda says with no variable set, the devices hidden: the real plugin's line when it
 * sits in the build folder, else "not built" naming that folder. */
static void want_beside(char *want, size_t cap) {
    char plug[700], real[4096];
    snprintf(plug, sizeof plug, "%s/libmaskpos-cuda.so", build_dir);
    if (exists(plug)) snprintf(want, cap, "--device cuda: no CUDA device here (");
    else snprintf(want, cap, "--device cuda: not built: make CUDA=1 (no %s/libmaskpos-cuda.so)", realpath(build_dir, real) ? real : build_dir);
}

static void test_binary_looks_beside_itself(void **state) {
    (void)state;
    char want[5000];
    want_beside(want, sizeof want);
    refused_everywhere("env -u MASKPOS_CUDA_PLUGIN CUDA_VISIBLE_DEVICES=", "cuda", want);
}

typedef void *(*ConfigNew)(const char *);
typedef int (*ConfigSet)(void *, const char *, const char *);
typedef const char *(*LastError)(void);
typedef void (*ConfigFree)(void *);
typedef int (*ModelOpen)(const char *, void **);
typedef void (*ModelClose)(void *);
typedef int (*Probe)(void *, const void *, const int32_t *, int64_t, int, void *, void *, void **);

static void test_library_looks_beside_itself(void **state) {
    (void)state;
    char lib[700], want[5000];
    snprintf(lib, sizeof lib, "%s/libmaskpos.so", build_dir);
    want_beside(want, sizeof want);
    unsetenv("MASKPOS_CUDA_PLUGIN");
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) fail_msg("dlopen %s: %s", lib, dlerror());
    ConfigNew cnew;
    ConfigSet cset;
    LastError lerr;
    ConfigFree cfree;
    ModelOpen mopen;
    ModelClose mclose;
    Probe probe;
    *(void **)&cnew = dlsym(h, "maskpos_config_new");
    *(void **)&cset = dlsym(h, "maskpos_config_set");
    *(void **)&lerr = dlsym(h, "maskpos_last_error");
    *(void **)&cfree = dlsym(h, "maskpos_config_free");
    *(void **)&mopen = dlsym(h, "maskpos_model_open");
    *(void **)&mclose = dlsym(h, "maskpos_model_close");
    *(void **)&probe = dlsym(h, "maskpos_probe");
    assert_true(cnew && cset && lerr && cfree && mopen && mclose && probe);
    void *c = cnew("probe"), *m = NULL, *res = NULL;
    assert_non_null(c);
    if (mopen(model_dir, &m) != 0) fail_msg("maskpos_model_open: %s", lerr());
    const int32_t ids[8] = {1, 5, 9, 13, 2, 6, 10, 14};
    assert_int_equal(cset(c, "device", "cuda"), 0); /* settings are checked when the job starts */
    assert_int_not_equal(probe(m, c, ids, 2, 4, NULL, NULL, &res), 0);
    assert_null(res);
    if (!strstr(lerr(), want) || strchr(lerr(), '\n')) fail_msg("libmaskpos.so, device=cuda: wanted one line with '%s', got '%s'", want, lerr());
    mclose(m);
    cfree(c);
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static void test_real_plugin_without_device(void **state) {
    (void)state;
    char plug[700], env[900];
    snprintf(plug, sizeof plug, "%s/libmaskpos-cuda.so", build_dir);
    if (!exists(plug)) {
        printf("no %s (make CUDA=1 builds it): the real plugin is not loaded here\n", plug);
        skip();
    }
    /* no driver here; on a GPU machine the devices hidden */
    snprintf(env, sizeof env, "CUDA_VISIBLE_DEVICES= MASKPOS_CUDA_PLUGIN=%s", plug);
    refused_everywhere(env, "cuda", "--device cuda: no CUDA device here (");
    refused_everywhere(env, "cuda:0", "--device cuda:0: no CUDA device here (");
    refused_everywhere(env, "cuda:zero", "is not a device number");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_plugin_file),
        cmocka_unit_test(test_not_a_library),
        cmocka_unit_test(test_no_entry),
        cmocka_unit_test(test_other_version),
        cmocka_unit_test(test_stub_devices),
        cmocka_unit_test(test_binary_looks_beside_itself),
        cmocka_unit_test(test_library_looks_beside_itself),
        cmocka_unit_test(test_real_plugin_without_device),
    };
    return cmocka_run_group_tests(tests, plugin_setup, NULL);
}
