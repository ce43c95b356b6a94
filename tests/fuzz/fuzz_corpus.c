/* fuzz_corpus.c — libFuzzer target: the corpus reader (src/tok/corpus.c) on .jsonl files, plain
 * text files and folders of .txt files, through mp_tok_corpus_build (rows of N x S ids, every
 * option) and mp_tok_corpus_join (what `train --data` reads), with the byte vocabulary (with and
 * without BOS) so that the reader, not a tokenizer, is what is fuzzed.
 * Input: byte 0 picks the form (0: .jsonl, 1: text file, 2: folder whose files are the rest split
 * at "\n--8<--\n", named 0.txt, 1.txt, ..., plus one non-.txt file that must be ignored), byte 1
 * the options (whole, shuffle, pack, BOS, no special, field "body"), byte 2 N (1..8) and S
 * (1..32); the rest is the text. Seed corpus: kjv.txt excerpts, jsonl of real documents, and
 * folders (tests/fuzz/Makefile corpus).
 * Build and run: make -f tests/fuzz/Makefile fuzz. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"   /* fuzz_dir, fuzz_put */
#include "tok/corpus.h"  /* mp_tok_corpus_build, mp_tok_corpus_join */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_SEP "\n--8<--\n"

static void clear_folder(const char *dir) {
    char p[1200];
    for (int i = 0; i < 16; i++) {
        snprintf(p, sizeof p, "%s/%d.txt", dir, i);
        unlink(p);
    }
    snprintf(p, sizeof p, "%s/notes.md", dir);
    unlink(p);
}

/* The input's text as the reader should see it; *path the file or folder. */
static void put_input(char *path, size_t cap, int form, const uint8_t *t, size_t n) {
    if (form == 0) {
        fuzz_put(path, cap, "in.jsonl", t, n);
        return;
    }
    if (form == 1) {
        fuzz_put(path, cap, "in.txt", t, n);
        return;
    }
    char dir[1100], name[64], tmp[1300];
    snprintf(dir, sizeof dir, "%s/folder", fuzz_dir());
    mkdir(dir, 0777);
    clear_folder(dir);
    size_t i = 0;
    for (int k = 0; k < 16 && i <= n; k++) {
        const uint8_t *end = NULL;
        for (size_t j = i; j + sizeof FUZZ_SEP - 1 <= n; j++)
            if (!memcmp(t + j, FUZZ_SEP, sizeof FUZZ_SEP - 1)) {
                end = t + j;
                break;
            }
        size_t len = end ? (size_t)(end - (t + i)) : n - i;
        snprintf(name, sizeof name, "folder/%d.txt", k);
        fuzz_put(tmp, sizeof tmp, name, t + i, len);
        if (!end) break;
        i += len + sizeof FUZZ_SEP - 1;
    }
    fuzz_put(tmp, sizeof tmp, "folder/notes.md", "not a document\n", 15);
    snprintf(path, cap, "%s", dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    const int form = data[0] % 3, opt = data[1];
    char path[1200];
    put_input(path, sizeof path, form, data + 3, size - 3);
    MpTok tok;
    mp_tok_init_bytes(&tok);
    if (opt & 8) mp_tok_bytes_add_bos(&tok);
    MpTokCorpusOpts o = {.field = (opt & 32) ? "body" : NULL, .whole = opt & 1, .n = 1 + (data[2] & 7),
                         .seq = 1 + (data[2] >> 3), .shuffle = (opt >> 1) & 1, .seed = data[2],
                         .add_special = !(opt & 16), .pack = (opt >> 2) & 1};
    MpTokCorpus c;
    MpErr e;
    e.msg[0] = 0;
    if (mp_tok_corpus_build(&c, &tok, path, &o, &e) == MP_OK) {
        if (c.n != o.n || c.seq != o.seq || c.n_examined < (o.pack ? 0 : c.n)) __builtin_trap();
        for (int64_t i = 0; i < c.n * c.seq; i++)
            if (c.ids[i] < 0 || c.ids[i] >= tok.n_ids) __builtin_trap();
        mp_tok_corpus_free(&c);
    } else if (!e.msg[0]) {
        __builtin_trap();
    }
    MpTokBuf out = {0};
    int64_t nd = 0;
    e.msg[0] = 0;
    if (mp_tok_corpus_join(&out, path, o.field, &nd, &e) == MP_OK) {
        if (nd < 1) __builtin_trap();
    } else if (!e.msg[0]) {
        __builtin_trap();
    }
    free(out.data);
    mp_tok_free(&tok);
    return 0;
}
