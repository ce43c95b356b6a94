/* test_tok_util.h — shared by the tokenizer tests (test_tok.c, test_tok_spm.c, test_tok_hfspm.c):
 * file helpers, the real-text corpus and the hand-written edge cases every tokenizer is checked on,
 * and the oracle scaffolding: running a reference tokenizer (HF tokenizers' encode.js, llama.cpp's
 * tokenize.mjs) on files, reading its ids and decoded texts back, comparing ids with context.
 *
 * The real text: every licence in /usr/share/common-licenses (Debian base-files) followed by the
 * fortune files of Debian's `fortunes` package (BSD licence), about 2.9 MB; under AddressSanitizer
 * the first 512 KB (cut after a newline). Edge cases: CRLF, runs of spaces and newlines, digits,
 * contractions, accents and combining marks, CJK, emoji, invalid UTF-8, special-token strings,
 * Unicode-version code points, control characters, three long runs.
 * Include after testutil.h; everything here is static.
 */
#ifndef MP_TEST_TOK_UTIL_H
#define MP_TEST_TOK_UTIL_H

#include <dirent.h>
#include <sys/stat.h>

#include "load/gguf.h" /* MpGgufWriter */

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0, got;
    char *buf = malloc(cap + 1);
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static void append_file(FILE *out, const char *path, size_t *total) {
    size_t n;
    char *s = slurp(path, &n);
    if (!s) return;
    fwrite(s, 1, n, out);
    *total += n;
    free(s);
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Appends every regular file of dir (sorted; skipping names ending in any of skip) to out. */
static void append_dir(FILE *out, const char *dir, const char *const *skip, size_t *total) {
    DIR *d = opendir(dir);
    if (!d) return;
    char *names[512];
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512) {
        if (de->d_name[0] == '.') continue;
        int bad = 0;
        for (const char *const *s = skip; s && *s; s++) {
            size_t a = strlen(de->d_name), b = strlen(*s);
            if (a >= b && !strcmp(de->d_name + a - b, *s)) bad = 1;
        }
        if (!bad) names[n++] = strdup(de->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n; i++) {
        char p[1024];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) append_file(out, p, total);
        free(names[i]);
    }
}

static const char *real_corpus(size_t *bytes) {
    static char path[256];
    static size_t total;
    if (path[0]) {
        *bytes = total;
        return path;
    }
    struct stat st;
    if (stat("/usr/share/games/fortunes/computers", &st) != 0)
        fail_msg("test corpus missing: install the Debian package 'fortunes' (scripts/setup.sh)");
    snprintf(path, sizeof path, "%s/corpus.txt", mp_test_tmpdir_shared());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    static const char *const skip[] = {".dat", ".u8", NULL};
    append_dir(f, "/usr/share/common-licenses", NULL, &total);
    append_dir(f, "/usr/share/games/fortunes", skip, &total);
    fclose(f);
    if (UNDER_ASAN && total > (512u << 10)) { /* ASan: the first 512 KB, cut after a newline */
        size_t n;
        char *s = slurp(path, &n);
        size_t cut = 512u << 10;
        while (cut > 0 && s[cut - 1] != '\n') cut--;
        mp_test_write_file(path, s, cut);
        free(s);
        total = cut;
    }
    if (!UNDER_ASAN && total < (1u << 20)) fail_msg("test corpus has only %zu bytes (want >= 1 MB)", total);
    *bytes = total;
    return path;
}

#define S(x) {x, sizeof(x) - 1}
static const struct {
    const char *s;
    size_t n;
} edge[] = {
    S("Hello\r\nworld\r\n\r\n  x\n\n\n   \n\t\ty\r\r\n"),
    S("a b  c   d    e     f                    g   \n   h\n \n  \n"),
    S("   leading and trailing   "),
    S("1 12 123 1234 12345 123456 3.14159 1,000,000 \xd9\xa3\xd9\xa4\xd9\xa5 \xe2\x91\xa0\xe2\x91\xa1 \xc2\xbd 2024-01-01 0x1F"),
    S("I'm you're he's we've they'll I'd don't DON'T I'M She'S 'tis y'all it\xe2\x80\x99s '\xc5\xbf 'Ll 'LL 'K"),
    /* accents, decomposed forms (NFC for Qwen), mark reordering, Hangul jamo, Angstrom sign */
    S("caf\xc3\xa9 na\xc3\xafve r\xc3\xa9sum\xc3\xa9 \xc3\x85ngstr\xc3\xb6m cafe\xcc\x81 e\xcc\x81\xcc\x96 a\xcc\x96\xcc\x81 "
      "\xe1\x84\x80\xe1\x85\xa1\xe1\x86\xa8 \xe2\x84\xab"),
    S("\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xe3\x81\xae\xe3\x83\x86\xe3\x82\xad\xe3\x82\xb9\xe3\x83\x88\xe3\x80\x81"
      "\xe4\xb8\xad\xe6\x96\x87\xe3\x80\x82\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xef\xbd\x86\xef\xbd\x95\xef\xbd\x8c\xef\xbd\x8c"),
    S("\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 "
      "\xf0\x9f\x87\xab\xf0\x9f\x87\xb7 \xe2\x9d\xa4\xef\xb8\x8f \xf0\x9f\x99\x82\xf0\x9f\x99\x82\xf0\x9f\x99\x82"),
    /* invalid UTF-8: stray bytes, truncated sequences, surrogates, overlongs, > U+10FFFF */
    S("\xff\xfe abc \xc3\x28 \xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \x80\x80 end\xe2"),
    S("<|begin_of_text|>hi<|end_of_text|> <|im_start|>user\n<|im_end|><think></think> <|eot_id|>"
      "<|reserved_special_token_5|> <|begin_of_text <tool_call>x</tool_call><|endoftext|><|endoftext|>"),
    /* Unicode-version code points: letters of Unicode 15/16 (U+1C89, U+A7CB, U+105C0, U+31350,
     * U+2EBF0), numbers (U+1CCF0, U+1D2C0), U+0085 (space for HF), U+FEFF (not), U+180E (not a
     * space for HF, a space for PCRE2), U+2028, U+3000, U+00A0 */
    S("L:\xe1\xb2\x89 \xea\x9f\x8b\xf0\x90\x97\x80 \xf0\x90\x97\x80x \xf0\xb1\x8d\x90 \xf0\xae\xaf\xb0 "
      "N:\xf0\x9c\xb3\xb0 1\xf0\x9d\x8b\x80 a\xf0\x9c\xb3\xb0\xf0\x9c\xb3\xb0\xf0\x9c\xb3\xb0\xf0\x9c\xb3\xb0 "
      "S:a\xc2\x85 b a\xc2\x85\xc2\x85" "b \xef\xbb\xbfx a\xe1\xa0\x8e b a\xe1\xa0\x8e\xe1\xa0\x8e \xe2\x80\xa8 "
      "\xe3\x80\x80 \xc2\xa0x \xe2\x80\x80\xe2\x80\x80" "a x \xc2\x85\n \xe1\xa0\x8e\n"),
    /* NFC where utf8proc (Unicode 15) and HF's older tables differ: U+11935 U+11930 (composes to
     * U+11938 since Unicode 13), marks U+1ABF, U+0898 (class != 0 since Unicode 14) */
    S("NFC:\xf0\x91\xa4\xb5\xf0\x91\xa4\xb0 a\xe1\xaa\xbf\xcc\x81 x\xe0\xa2\x98\xcd\x85 a\xcc\x81\xe1\xaa\xbf "
      "\xe0\xa4\x95\xe0\xa4\xbc \xe0\xa5\x98 e\xcc\x81\xe0\xa2\x98\xcc\x96"),
    S(""),
    S(" "),
    S("\n"),
    S("\xd8\xa7\xd9\x84\xd8\xb9\xd8\xb1\xd8\xa8\xd9\x8a\xd8\xa9 \xd7\xa2\xd7\x91\xd7\xa8\xd7\x99\xd7\xaa "
      "\xe0\xa4\xb9\xe0\xa4\xbf\xe0\xa4\xa8\xe0\xa5\x8d\xe0\xa4\xa6\xe0\xa5\x80 \xe0\xb8\xa0\xe0\xb8\xb2\xe0\xb8\xa9\xe0\xb8\xb2 "
      "\xce\x95\xce\xbb\xce\xbb\xce\xb7\xce\xbd\xce\xb9\xce\xba\xce\xac \xd0\xa0\xd1\x83\xd1\x81\xd1\x81\xd0\xba\xd0\xb8\xd0\xb9"),
    S("\x00\x01\x07\x1b[0m tab\there\x7f \x0b\x0c"),
    S("x\xc2\xa0\xc2\xa0\xc2\xa0y  \t\n\x0b z"),
    S("def f(x):\n    return x**2  # comment\n\n\nclass A:\n\tpass\r\n"),
};
#undef S

/* ==================================== oracles ==================================== */

static MpTokIds *tok_oracle_ids(const char *cmd_prefix, char **files, int nfiles, const char *out_name)
    __attribute__((unused));
static void tok_oracle_texts(const char *cmd_prefix, const MpTokIds *ids, int n, char **texts, size_t *lens,
                             const char *tag) __attribute__((unused));
static size_t tok_compare_ids(const MpTok *t, const char *what, const MpTokIds *ours, const MpTokIds *ref,
                              const char *oracle) __attribute__((unused));

/* Runs `cmd FILE... > TMP/out_name`, where the oracle prints one line of ids per file; returns
 * one id list per file (caller frees each, then the array). Fails the test if the oracle fails or
 * prints too few lines. */
static MpTokIds *tok_oracle_ids(const char *cmd_prefix, char **files, int nfiles, const char *out_name) {
    char out[300], *cmd = malloc(1 << 16);
    assert_non_null(cmd);
    snprintf(out, sizeof out, "%s/%s", mp_test_tmpdir(), out_name);
    int k = snprintf(cmd, 1 << 16, "%s", cmd_prefix);
    for (int i = 0; i < nfiles; i++) k += snprintf(cmd + k, (size_t)(1 << 16) - (size_t)k, " %s", files[i]);
    snprintf(cmd + k, (size_t)(1 << 16) - (size_t)k, " > %s", out);
    if (system(cmd) != 0) fail_msg("oracle failed: %s", cmd);
    free(cmd);
    size_t n;
    char *s = slurp(out, &n), *p = s;
    assert_non_null(s);
    MpTokIds *res = calloc((size_t)nfiles, sizeof *res);
    MpErr e;
    for (int i = 0; i < nfiles; i++) {
        char *nl = strchr(p, '\n');
        if (!nl) fail_msg("oracle printed %d lines for %d files", i, nfiles);
        *nl = '\0';
        for (char *q = p, *end;; q = end) {
            long v = strtol(q, &end, 10);
            if (end == q) break;
            assert_int_equal(mp_tok_ids_push(&res[i], (int32_t)v, &e), MP_OK);
        }
        p = nl + 1;
    }
    free(s);
    return res;
}

/* Writes each id list to TMP/<tag>_idsI.txt, runs `cmd IDFILE... > TMP/<tag>_dec.txt`, where the
 * oracle prints per file the byte length of the text, a newline and the text; texts[i] gets the
 * text of ids[i] (caller frees) and lens[i] its length. One oracle process for all lists. */
static void tok_oracle_texts(const char *cmd_prefix, const MpTokIds *ids, int n, char **texts, size_t *lens,
                             const char *tag) {
    const char *d = mp_test_tmpdir();
    char outp[300], *cmd = malloc(1 << 16);
    assert_non_null(cmd);
    snprintf(outp, sizeof outp, "%s/%s_dec.txt", d, tag);
    int k = snprintf(cmd, 1 << 16, "%s", cmd_prefix);
    for (int i = 0; i < n; i++) {
        char idp[300];
        snprintf(idp, sizeof idp, "%s/%s_ids%d.txt", d, tag, i);
        FILE *f = fopen(idp, "w");
        assert_non_null(f);
        for (size_t j = 0; j < ids[i].n; j++) fprintf(f, "%d ", ids[i].ids[j]);
        fclose(f);
        k += snprintf(cmd + k, (size_t)(1 << 16) - (size_t)k, " %s", idp);
    }
    snprintf(cmd + k, (size_t)(1 << 16) - (size_t)k, " > %s", outp);
    if (system(cmd) != 0) fail_msg("oracle failed: %s", cmd);
    free(cmd);
    size_t total;
    char *s = slurp(outp, &total), *p = s;
    assert_non_null(s);
    for (int i = 0; i < n; i++) {
        char *end;
        unsigned long l = strtoul(p, &end, 10);
        if (end == p || *end != '\n' || (size_t)(end + 1 - s) + l > total) fail_msg("oracle decode output is malformed");
        texts[i] = malloc(l + 1);
        memcpy(texts[i], end + 1, l);
        texts[i][l] = '\0';
        lens[i] = l;
        p = end + 1 + l;
    }
    free(s);
}

/* Compares our ids with the oracle's (named `oracle` in messages); on a difference prints the
 * first one with four ids of context each side and fails. Returns the number of ids compared. */
static size_t tok_compare_ids(const MpTok *t, const char *what, const MpTokIds *ours, const MpTokIds *ref,
                              const char *oracle) {
    size_t n = ours->n < ref->n ? ours->n : ref->n, i = 0;
    while (i < n && ours->ids[i] == ref->ids[i]) i++;
    if (i < n || ours->n != ref->n) {
        fprintf(stderr, "%s: %zu ids (maskpos) vs %zu (%s); first difference at id %zu\n", what, ours->n, ref->n, oracle, i);
        for (size_t j = i > 4 ? i - 4 : 0; j < i + 5; j++) {
            const char *a = j < ours->n ? mp_tok_id_to_token(t, ours->ids[j]) : NULL;
            const char *b = j < ref->n ? mp_tok_id_to_token(t, ref->ids[j]) : NULL;
            fprintf(stderr, "  [%zu] maskpos %d '%s'   %s %d '%s'\n", j, j < ours->n ? ours->ids[j] : -1, a ? a : "",
                    oracle, j < ref->n ? ref->ids[j] : -1, b ? b : "");
        }
        fail_msg("%s: ids differ from %s", what, oracle);
    }
    return n;
}

/* HF tokenizers (tests/oracle/encode.js) on files: one id list per file (caller frees). */
static MpTokIds *tok_hf_encode(const char *tok_json, int add_special, char **files, int nfiles) __attribute__((unused));
static MpTokIds *tok_hf_encode(const char *tok_json, int add_special, char **files, int nfiles) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "node %s/tests/oracle/encode.js %s %s", MP_SOURCE_DIR, tok_json,
             add_special ? "" : "--no-special");
    return tok_oracle_ids(cmd, files, nfiles, "hf_oracle.txt");
}

/* HF decode of each id list (skip_special as given); texts[i] (caller frees), lens[i]. */
static void tok_hf_decode(const char *tok_json, const MpTokIds *ids, int n, int skip_special, char **texts,
                          size_t *lens) __attribute__((unused));
static void tok_hf_decode(const char *tok_json, const MpTokIds *ids, int n, int skip_special, char **texts,
                          size_t *lens) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "node %s/tests/oracle/encode.js %s --decode-framed %s", MP_SOURCE_DIR, tok_json,
             skip_special ? "--skip-special" : "");
    tok_oracle_texts(cmd, ids, n, texts, lens, "hf");
}

/* Encodes each file with t and with HF on tok_json (add_special as given) and compares every
 * id; returns the number of ids compared. */
static size_t tok_hf_check_files_add(MpTok *t, const char *tok_json, const char *name, char **files, int nfiles,
                                     int add) __attribute__((unused));
static size_t tok_hf_check_files_add(MpTok *t, const char *tok_json, const char *name, char **files, int nfiles,
                                     int add) {
    size_t total = 0;
    MpTokIds *ref = tok_hf_encode(tok_json, add, files, nfiles);
    for (int i = 0; i < nfiles; i++) {
        size_t n;
        char *s = slurp(files[i], &n), label[600];
        assert_non_null(s);
        MpTokIds ours = {0};
        MpErr e;
        if (mp_tok_encode(t, &ours, s, n, add, &e) != MP_OK) fail_msg("%s: %s", files[i], e.msg);
        snprintf(label, sizeof label, "%s %s (%s)", name, files[i], add ? "special" : "no-special");
        total += tok_compare_ids(t, label, &ours, &ref[i], "HF tokenizers");
        mp_tok_ids_free(&ours);
        mp_tok_ids_free(&ref[i]);
        free(s);
    }
    free(ref);
    return total;
}

/* The same without and with special tokens. */
static size_t tok_hf_check_files(MpTok *t, const char *tok_json, const char *name, char **files, int nfiles)
    __attribute__((unused));
static size_t tok_hf_check_files(MpTok *t, const char *tok_json, const char *name, char **files, int nfiles) {
    return tok_hf_check_files_add(t, tok_json, name, files, nfiles, 0) +
           tok_hf_check_files_add(t, tok_json, name, files, nfiles, 1);
}

static void write_edge_files(const char *dir, char **files, int *nfiles) {
    int n = 0;
    for (size_t i = 0; i < sizeof edge / sizeof edge[0]; i++) {
        files[n] = malloc(300);
        snprintf(files[n], 300, "%s/edge%02zu.txt", dir, i);
        mp_test_write_file(files[n], edge[i].s, edge[i].n);
        n++;
    }
    /* long runs */
    const size_t lens[3] = {5000, 10001, 3001};
    const char fill[3] = {'a', ' ', '1'};
    for (int k = 0; k < 3; k++) {
        char *s = malloc(lens[k]);
        memset(s, fill[k], lens[k]);
        if (k == 1) s[lens[k] - 1] = 'x';
        files[n] = malloc(300);
        snprintf(files[n], 300, "%s/long%d.txt", dir, k);
        mp_test_write_file(files[n], s, lens[k]);
        free(s);
        n++;
    }
    *nfiles = n;
}

/* Writes the metadata w holds as a GGUF file at path (no tensors), then frees w. */
static void tok_gguf_save(MpGgufWriter *w, const char *path) __attribute__((unused));
static void tok_gguf_save(MpGgufWriter *w, const char *path) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    MpErr e;
    assert_int_equal(mp_gguf_w_header(w, f, &e), MP_OK);
    fclose(f);
    mp_gguf_writer_free(w);
}

#endif
