/* test_hfcache.c — hub ids ("org/name") resolved in the local HF hub cache, offline (issue 39): a
 * cache folder built here the way huggingface_hub lays it out (models--org--name/refs/main holding a
 * commit hash, snapshots/<commit>/ whose files are links into blobs/), found through HF_HUB_CACHE,
 * HF_HOME and HOME; `maskpos probe acme/tiny` and `maskpos tokenize --model acme/tiny` read the
 * snapshot (the maps byte for byte those of the folder itself); another revision by branch and by
 * commit; a missing repository, ref or snapshot is one line naming the cache folder, exit 2;
 * mp_hfcache_is_id accepts ids and refuses paths.
 */
#include "testutil.h"

#include "core/err.h"      /* MpErr */
#include "load/hfcache.h"  /* mp_hfcache_is_id, mp_hfcache_resolve */

#define COMMIT "0123456789abcdef0123456789abcdef01234567"
#define COMMIT2 "fedcba9876543210fedcba9876543210fedcba98"

/* A cache in dir/hub with acme/tiny at COMMIT (refs/main) and COMMIT2 (refs/v2): mkmodel's folder,
 * its files moved into blobs/ and linked from the snapshots, as huggingface_hub does. */
static void make_cache(const char *dir) {
    char out[8192];
    int rc = mp_test_run(out, sizeof out, "mkmodel --arch llama --layers 2 --vocab 300 %s/src", dir);
    if (rc) fail_msg("mkmodel: %s", out);
    rc = mp_test_shell(out, sizeof out,
                       "set -e; r=%s/hub/models--acme--tiny; mkdir -p $r/blobs $r/refs $r/snapshots/%s $r/snapshots/%s; "
                       "for f in $(ls %s/src); do h=$(sha256sum %s/src/$f | cut -c1-40); mv %s/src/$f $r/blobs/$h; "
                       "ln -s ../../blobs/$h $r/snapshots/%s/$f; ln -s ../../blobs/$h $r/snapshots/%s/$f; done; "
                       "printf %s > $r/refs/main; printf '%s\\n' > $r/refs/v2",
                       dir, COMMIT, COMMIT2, dir, dir, dir, COMMIT, COMMIT2, COMMIT, COMMIT2);
    if (rc) fail_msg("building the cache: %s", out);
}

static void test_ids(void **state) {
    (void)state;
    const char *yes[] = {"acme/tiny", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-8B", "a_b.c/d-e", "acme/tiny@v2"};
    const char *no[] = {"tiny", "./acme/tiny", "/abs/x", "acme/tiny/extra", "../x/y", "acme/..x", "acme/-x", "a/b c",
                        "acme/", "/tiny", "acme/tiny@", "models/rope.gguf/x"};
    for (size_t k = 0; k < sizeof yes / sizeof *yes; k++)
        if (!mp_hfcache_is_id(yes[k])) fail_msg("'%s' should read as a hub id", yes[k]);
    for (size_t k = 0; k < sizeof no / sizeof *no; k++)
        if (mp_hfcache_is_id(no[k])) fail_msg("'%s' should not read as a hub id", no[k]);
}

static void test_probe_from_cache(void **state) {
    (void)state;
    char out[1 << 15];
    const char *d = mp_test_tmpdir();
    make_cache(d);
    /* the folder itself, for the reference maps */
    int rc = mp_test_shell(out, sizeof out, "cp -rL %s/hub/models--acme--tiny/snapshots/%s %s/plain", d, COMMIT, d);
    assert_int_equal(rc, 0);
    rc = mp_test_run(out, sizeof out, "generate %s/plain --n 3 --len 24 --out %s/ids.npy --quiet", d, d);
    if (rc) fail_msg("generate: %s", out);
    rc = mp_test_run(out, sizeof out, "probe %s/plain --tokens %s/ids.npy --quiet --out %s/a", d, d, d);
    if (rc) fail_msg("probe of the folder: %s", out);
    /* from / (no folder of that name here), HF_HUB_CACHE naming the cache */
    rc = mp_test_shell(out, sizeof out, "cd / && HF_HUB_CACHE=%s/hub %s probe acme/tiny --tokens %s/ids.npy --quiet --out %s/b", d,
                       MP_TEST_BIN, d, d);
    if (rc) fail_msg("probe acme/tiny from the cache: %s", out);
    assert_int_equal(mp_test_shell(out, sizeof out, "cmp %s/a/scores.npy %s/b/scores.npy", d, d), 0);
    assert_int_equal(mp_test_shell(out, sizeof out, "grep -c 'snapshots/%s' %s/b/meta.json", COMMIT, d), 0);
    /* HF_HOME/hub, and HOME/.cache/huggingface/hub */
    rc = mp_test_shell(out, sizeof out, "mkdir -p %s/home/.cache/huggingface && cp -r %s/hub %s/home/.cache/huggingface/hub && "
                                        "cd / && env -u HF_HUB_CACHE HF_HOME=%s %s inspect acme/tiny | head -1 && "
                                        "env -u HF_HUB_CACHE -u HF_HOME -u XDG_CACHE_HOME HOME=%s/home %s inspect acme/tiny | head -1",
                       d, d, d, d, MP_TEST_BIN, d, MP_TEST_BIN);
    char home[4300], hfhome[4300];
    snprintf(hfhome, sizeof hfhome, "model:          %s/hub/models--acme--tiny/snapshots/" COMMIT "\n", d);
    snprintf(home, sizeof home, "model:          %s/home/.cache/huggingface/hub/models--acme--tiny/snapshots/" COMMIT "\n", d);
    if (rc || !strstr(out, hfhome) || !strstr(out, home)) fail_msg("HF_HOME / HOME: %s", out);
    /* another revision: a branch (refs/v2) and a commit */
    rc = mp_test_shell(out, sizeof out, "cd / && HF_HUB_CACHE=%s/hub %s inspect acme/tiny@v2 | head -1 && "
                                        "HF_HUB_CACHE=%s/hub %s inspect acme/tiny@%s | head -1", d, MP_TEST_BIN, d, MP_TEST_BIN, COMMIT2);
    if (rc || !strstr(out, "snapshots/" COMMIT2 "\nmodel:") || !strstr(out, "snapshots/" COMMIT2 "\n"))
        fail_msg("revisions: %s", out);
    /* the C function names the snapshot */
    char snap[4096];
    MpErr e;
    char env[4200];
    snprintf(env, sizeof env, "%s/hub", d);
    setenv("HF_HUB_CACHE", env, 1);
    assert_int_equal(mp_hfcache_resolve("acme/tiny", snap, sizeof snap, &e), MP_OK);
    char want[4200];
    snprintf(want, sizeof want, "%s/hub/models--acme--tiny/snapshots/%s", d, COMMIT);
    assert_string_equal(snap, want);
    unsetenv("HF_HUB_CACHE");
    mp_test_shell(NULL, 0, "rm -rf %s", d);
}

static void test_missing_named(void **state) {
    (void)state;
    char out[1 << 14];
    const char *d = mp_test_tmpdir();
    make_cache(d);
    assert_int_equal(mp_test_shell(out, sizeof out, "printf 'a text\\n' > %s/t.txt && printf 'x' > %s/ids.npy", d, d), 0);
    struct {
        const char *id, *setup, *want;
    } cases[] = {
        {"acme/other", "true", "acme/other: no such file or folder, and not in the local HF cache"},
        {"acme/tiny", "rm %s/hub/models--acme--tiny/refs/main", "but no refs/main (an interrupted download?)"},
        {"acme/tiny@v2", "rm -r %s/hub/models--acme--tiny/snapshots/" COMMIT2, "has no snapshot"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char setup[4400];
        snprintf(setup, sizeof setup, cases[k].setup, d);
        assert_int_equal(mp_test_shell(out, sizeof out, "%s", setup), 0);
        const int rc = mp_test_shell(out, sizeof out, "cd / && HF_HUB_CACHE=%s/hub %s probe %s --tokens %s/ids.npy --quiet --out %s/x",
                                     d, MP_TEST_BIN, cases[k].id, d, d);
        if (rc != 2 || !strstr(out, cases[k].want) || strchr(out, '\n') != strrchr(out, '\n'))
            fail_msg("%s: exit %d (want 2 and one line with '%s'): %s", cases[k].id, rc, cases[k].want, out);
    }
    assert_non_null(strstr(out, "error:"));
    /* the message names the cache folder and where it came from, and how to fill it */
    const int rc = mp_test_shell(out, sizeof out, "cd / && HF_HUB_CACHE=%s/hub %s tokenize --model nobody/nothing %s/t.txt", d, MP_TEST_BIN, d);
    if (rc != 2 || !strstr(out, "from HF_HUB_CACHE") || !strstr(out, "huggingface-cli download nobody/nothing"))
        fail_msg("tokenize of a missing id: exit %d: %s", rc, out);
    mp_test_shell(NULL, 0, "rm -rf %s", d);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_ids), cmocka_unit_test(test_probe_from_cache),
                                       cmocka_unit_test(test_missing_named)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
