/* cmd_tokenize.c — `maskpos tokenize`: text to the model's own token ids, and back (src/tok/).
 *
 *   maskpos tokenize --model M FILE            ids of FILE's text on one line, space-separated
 *   maskpos tokenize --model M --out ids.npy FILE      the same as int32 [n] .npy
 *   maskpos tokenize --model M --decode IDS    IDS: a file of ids separated by white space, a .npy,
 *                                              or the ids themselves ("1 403 407")
 * M is a directory with tokenizer.json (and tokenizer_config.json) or a tokenizer.json path.
 * FILE "-" reads standard input. Exit 0 ok, 2 bad input (one-line message).
 * Tested by: tests/test_tok.c (ids against HF tokenizers; bad inputs).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"   /* mp_cli_* */
#include "core/npy.h"  /* mp_npy_write / mp_npy_read */
#include "core/util.h" /* mp_parse_i64, mp_time_now, mp_input_open */
#include "core/files.h" /* mp_outfile_claim */
#include "job/shared_opts.h" /* --no-special: declared once */
#include "tok/tok.h"   /* MpTok, encode/decode */

/* The flags' values. */
typedef struct TokFlags {
    const char *model, *out;
    int no_special, decode, skip_special, count, timing, force;
} TokFlags;

typedef enum TokOpt { TO_MODEL, TO_NO_SPECIAL, TO_OUT, TO_FORCE, TO_DECODE, TO_SKIP_SPECIAL, TO_COUNT_IDS, TO_TIME, TO_COUNT } TokOpt;

#define F(m) offsetof(TokFlags, m)
#define SWITCH(nm, hlp) MP_OPT_DECL(nm, MP_OPT_BOOL, NULL, .help = hlp)
static const MpOpt tokenize_opts[TO_COUNT] = {
    [TO_MODEL] = {MP_OPT_DECL("model", MP_OPT_STRING, "M",
                              .help = "directory holding tokenizer.json (+ tokenizer_config.json), the path of\n"
                                      "a tokenizer.json, or a .gguf file (its byte-level BPE vocabulary)"), F(model)},
    [TO_NO_SPECIAL] = {&mp_shared_opts[MP_SHARED_NO_SPECIAL], F(no_special),
                       .help = "do not add BOS/EOS (HF add_special_tokens=False); special-token strings\n"
                               "in the text are still matched, as HF does"},
    [TO_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "F.npy",
                            .help = "write the ids as int32 [n] instead of printing them (an existing F is refused)"), F(out)},
    [TO_FORCE] = {SWITCH("force", "replace an existing --out file"), F(force)},
    [TO_DECODE] = {SWITCH("decode", "IDS holds ids (a file of white-space separated ids, an int .npy, or the ids\n"
                                    "themselves: --decode \"1 403 407\"): print the text"), F(decode)},
    [TO_SKIP_SPECIAL] = {SWITCH("skip-special", "with --decode: leave out special tokens (HF skip_special_tokens=True)"),
                         F(skip_special)},
    [TO_COUNT_IDS] = {SWITCH("count", "print only the number of ids"), F(count)},
    [TO_TIME] = {SWITCH("time", "report on stderr the encode time alone (no loading, no output) and tokens/s"), F(timing)},
};
_Static_assert(sizeof tokenize_opts / sizeof *tokenize_opts == TO_COUNT, "one row per TokOpt");

static const MpOptTable tokenize_table = {"tokenize", tokenize_opts, TO_COUNT, 19,
    "usage: maskpos tokenize --model M [--no-special] [--out ids.npy [--force]] FILE\n"
    "       maskpos tokenize --model M --decode [--skip-special] IDS\n"
    "\n"
    "Encodes the text of FILE (\"-\": standard input) with the model's own tokenizer; the ids are\n"
    "those of HF tokenizers' encode(text) (invalid UTF-8 is first replaced by U+FFFD).\n"
    "\n",
    NULL};

static int read_all(const char *path, char **data, size_t *len, MpErr *e) {
    FILE *f = strcmp(path, "-") ? mp_input_open(path, NULL, e) : stdin;
    if (!f) return MP_ERR;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *p = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int err = !buf || ferror(f);
    if (f != stdin) fclose(f);
    if (err) {
        free(buf);
        return mp_err_set(e, "%s: read failed after %zu bytes", path, n);
    }
    *data = buf;
    *len = n;
    return MP_OK;
}

static int read_ids(const char *path, MpTokIds *ids, MpErr *e) {
    size_t pl = strlen(path);
    if (pl > 4 && !strcmp(path + pl - 4, ".npy")) {
        MpNpy a;
        if (mp_npy_read(path, &a, e) != MP_OK) return MP_ERR;
        double *v = NULL;
        int rc = mp_npy_to_f64(&a, &v, e);
        for (size_t i = 0; rc == MP_OK && i < a.count; i++) {
            if (!(v[i] >= 0 && v[i] <= INT32_MAX && v[i] == (double)(int32_t)v[i]))
                rc = mp_err_set(e, "%s: element %zu (%g) is not a token id", path, i, v[i]);
            else
                rc = mp_tok_ids_push(ids, (int32_t)v[i], e);
        }
        free(v);
        mp_npy_free(&a);
        return rc;
    }
    char *text;
    size_t n;
    /* the ids themselves ("1 403 407", "1,403"): not a file name, only digits and separators */
    const int inline_ids = strcmp(path, "-") && !mp_file_exists(path) && path[strspn(path, "0123456789 \t\r\n,")] == '\0' &&
                           strpbrk(path, "0123456789");
    if (inline_ids) {
        n = strlen(path);
        text = malloc(n + 1);
        if (!text) return mp_err_set(e, "out of memory");
        memcpy(text, path, n + 1);
        path = "the ids given";
    } else if (read_all(path, &text, &n, e) != MP_OK)
        return MP_ERR;
    int rc = MP_OK;
    size_t i = 0;
    while (rc == MP_OK && i < n) {
        while (i < n && strchr(" \t\r\n,", text[i])) i++;
        if (i == n) break;
        size_t j = i;
        while (j < n && !strchr(" \t\r\n,", text[j])) j++;
        char tok[32];
        int64_t v;
        if (j - i >= sizeof tok) rc = mp_err_set(e, "%s: '%.20s...' is not a token id", path, text + i);
        else {
            memcpy(tok, text + i, j - i);
            tok[j - i] = '\0';
            if (mp_parse_i64(tok, 0, INT32_MAX, &v) != MP_OK) rc = mp_err_set(e, "%s: '%s' is not a token id", path, tok);
            else rc = mp_tok_ids_push(ids, (int32_t)v, e);
        }
        i = j;
    }
    free(text);
    return rc;
}

int mp_cmd_tokenize(int argc, char **argv) {
    const char *cmd = "tokenize";
    TokFlags fl = {.model = NULL};
    int first;
    const int prc = mp_cli_parse(&tokenize_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    const char *model = fl.model, *out = fl.out;
    const int no_special = fl.no_special, decode = fl.decode, skip_special = fl.skip_special, count = fl.count,
              timing = fl.timing, force = fl.force;
    if (!model) return mp_cli_error(cmd, "--model is required (a directory with tokenizer.json, or its path)");
    if (first + 1 != argc)
        return mp_cli_error(cmd, first == argc ? "give one input FILE (\"-\" for standard input)"
                                               : "unexpected argument '%s'", argv[first + (first < argc)]);
    const char *input = argv[first];
    MpErr e;
    /* an existing --out is kept unless --force; an unwritable folder is found before any work */
    if (out && !decode && mp_outfile_claim(out, force, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    /* the input first: a missing file is reported before the tokenizer is loaded */
    MpTokIds ids = {0};
    char *text = NULL;
    size_t n = 0;
    if ((decode ? read_ids(input, &ids, &e) : read_all(input, &text, &n, &e)) != MP_OK) {
        mp_tok_ids_free(&ids);
        return mp_cli_error(cmd, "%s", e.msg);
    }
    MpTok tok;
    if (mp_tok_init(&tok, model, &e) != MP_OK) {
        mp_tok_ids_free(&ids);
        free(text);
        return mp_cli_error(cmd, "%s", e.msg);
    }
    int rc = MP_EXIT_OK;
    if (decode) {
        MpTokBuf dec = {0};
        if (mp_tok_decode(&tok, &dec, ids.ids, ids.n, skip_special, &e) != MP_OK)
            rc = mp_cli_error(cmd, "%s: %s", input, e.msg); /* the ids file, then the tokenizer's message */
        else if (dec.n && fwrite(dec.data, 1, dec.n, stdout) != dec.n)
            rc = mp_cli_error(cmd, "writing standard output failed");
        mp_tok_buf_free(&dec);
    } else {
        double t0 = mp_time_now();
        int ok = mp_tok_encode(&tok, &ids, text, n, !no_special, &e) == MP_OK;
        double t1 = mp_time_now();
        if (ok && timing)
            fprintf(stderr, "maskpos tokenize: encoded %zu bytes into %zu ids in %.4f s (%.0f tokens/s, one thread)\n", n,
                    ids.n, t1 - t0, (double)ids.n / (t1 - t0 > 0 ? t1 - t0 : 1e-9));
        if (!ok) {
            rc = mp_cli_error(cmd, "%s: %s", input, e.msg); /* the text file, then the tokenizer's message */
        } else if (out) {
            int64_t shape[1] = {(int64_t)ids.n};
            if (mp_npy_write(out, MP_DT_I32, ids.ids, 1, shape, &e) != MP_OK) rc = mp_cli_error(cmd, "%s", e.msg);
        } else if (count) {
            printf("%zu\n", ids.n);
        } else {
            for (size_t i = 0; i < ids.n; i++) printf(i ? " %d" : "%d", ids.ids[i]);
            printf("\n");
        }
    }
    free(text);
    if (rc == MP_EXIT_OK && fflush(stdout) != 0) rc = mp_cli_error(cmd, "writing standard output failed");
    mp_tok_ids_free(&ids);
    mp_tok_free(&tok);
    return rc;
}
