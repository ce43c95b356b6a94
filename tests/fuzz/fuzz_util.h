/* fuzz_util.h — helpers shared by the libFuzzer targets that read files from disk (header-only).
 *
 * Provides: fuzz_dir() — one private scratch folder per fuzzing process (mkdtemp under $TMPDIR
 * or /tmp), and fuzz_put() — write bytes to a file in it. Targets whose parser takes a path (the
 * checkpoint readers, the model-folder opener, the corpus reader) get the fuzz input this way.
 */
#ifndef MP_FUZZ_UTIL_H
#define MP_FUZZ_UTIL_H

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char fuzz_dir_path[512];

static int fuzz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static void fuzz_dir_remove(void) { nftw(fuzz_dir_path, fuzz_rm_one, 8, FTW_DEPTH | FTW_PHYS); }

static const char *fuzz_dir(void) {
    if (!fuzz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/maskpos-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(fuzz_dir_path)) __builtin_trap();
        atexit(fuzz_dir_remove);
    }
    return fuzz_dir_path;
}

/* Writes n bytes to fuzz_dir()/name; path gets the full path. */
static void fuzz_put(char *path, size_t cap, const char *name, const void *data, size_t n) {
    snprintf(path, cap, "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) __builtin_trap();
}

/* Copies the file at src to fuzz_dir()/name (fixture files the fuzzed one sits beside). */
static void fuzz_copy(const char *src, const char *name) __attribute__((unused));
static void fuzz_copy(const char *src, const char *name) {
    FILE *f = fopen(src, "rb");
    if (!f) {
        fprintf(stderr, "fuzz: cannot open fixture %s\n", src);
        abort();
    }
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    char path[1024];
    fuzz_put(path, sizeof path, name, buf, n);
}

#endif
