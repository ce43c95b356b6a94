/* corpus.c — corpus reader (see corpus.h): files → documents → [N, S] token ids.
 *
 * Data flow: read the input (file or directory) → split into documents (JSONL lines, blank-line
 * blocks, or whole files), kept as spans of one text arena → optional seeded shuffle of the
 * document order → tokenize in that order until N documents with ≥ S ids are found.
 * Tested by: tests/test_tok.c.
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/rng.h"  /* MpRng: the --shuffle order */
#include "core/util.h" /* mp_fnv1a64, mp_path_join */
#include "tok/corpus.h" /* MpTokCorpus, MpTokCorpusOpts; MpTok encode via tok/tok.h */

typedef struct MpTokDoc {
    size_t off, len; /* in the text arena */
} MpTokDoc;

typedef struct MpTokDocs {
    MpTokBuf text;
    MpTokDoc *doc;
    size_t n, cap;
} MpTokDocs;

static int docs_add(MpTokDocs *d, const char *s, size_t n, MpErr *e) {
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 1024, bytes;
        if (mp_size_mul(cap, sizeof *d->doc, &bytes) != MP_OK) return mp_err_set(e, "corpus: too many documents");
        MpTokDoc *p = realloc(d->doc, bytes);
        if (!p) return mp_err_set(e, "corpus: out of memory");
        d->doc = p;
        d->cap = cap;
    }
    d->doc[d->n].off = d->text.n;
    d->doc[d->n].len = n;
    d->n++;
    return mp_tok_buf_append(&d->text, s, n, e);
}

static int read_file(const char *path, char **data, size_t *len, MpErr *e) {
    return mp_file_read_all(path, SIZE_MAX - 1, "a corpus file", data, len, e);
}

/* A line is blank when it holds only spaces, tabs and a CR. */
static int line_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r') return 0;
    return 1;
}

/* Documents of a plain-text file: maximal runs of non-blank lines, with their inner line ends
 * and without the last one; or the whole file. */
static int split_text(MpTokDocs *d, const char *s, size_t n, int whole, MpErr *e) {
    if (whole) return n ? docs_add(d, s, n, e) : MP_OK;
    size_t i = 0, start = 0, end = 0;
    int in_doc = 0;
    while (i < n) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t le = nl ? (size_t)(nl - s) : n; /* line is s[i..le) */
        if (line_blank(s + i, le - i)) {
            if (in_doc && docs_add(d, s + start, end - start, e) != MP_OK) return MP_ERR;
            in_doc = 0;
        } else {
            if (!in_doc) start = i;
            in_doc = 1;
            end = le;
            if (end > start && s[end - 1] == '\r') end--;
        }
        i = nl ? le + 1 : n;
    }
    if (in_doc) return docs_add(d, s + start, end - start, e);
    return MP_OK;
}

static int split_jsonl(MpTokDocs *d, const char *path, const char *s, size_t n, const char *field, MpErr *e) {
    size_t i = 0, line = 0;
    while (i < n) {
        const char *nl = memchr(s + i, '\n', n - i);
        size_t le = nl ? (size_t)(nl - s) : n;
        line++;
        if (!line_blank(s + i, le - i)) {
            json_error_t je;
            json_t *o = json_loadb(s + i, le - i, JSON_DECODE_INT_AS_REAL, &je);
            if (!o) return mp_err_set(e, "%s:%zu: not valid JSON (%s)", path, line, je.text);
            json_t *v = json_object_get(o, field);
            if (!json_is_string(v)) {
                json_decref(o);
                return mp_err_set(e, "%s:%zu: no string field \"%s\" (choose it with --field)", path, line, field);
            }
            int rc = docs_add(d, json_string_value(v), json_string_length(v), e);
            json_decref(o);
            if (rc != MP_OK) return MP_ERR;
        }
        i = nl ? le + 1 : n;
    }
    return MP_OK;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads one file into documents and folds its bytes into the corpus hash. */
static int read_one(MpTokCorpus *c, MpTokDocs *d, const char *path, int jsonl, const MpTokCorpusOpts *o, MpErr *e) {
    char *s = NULL;
    size_t n = 0;
    if (read_file(path, &s, &n, e) != MP_OK) return MP_ERR;
    c->hash = mp_fnv1a64(s, n, c->hash);
    c->n_files++;
    c->n_bytes += n;
    int rc = jsonl ? split_jsonl(d, path, s, n, o->field ? o->field : "text", e) : split_text(d, s, n, o->whole, e);
    free(s);
    return rc;
}

static int read_dir(MpTokCorpus *c, MpTokDocs *d, const char *dir, const MpTokCorpusOpts *o, MpErr *e) {
    DIR *dp = opendir(dir);
    if (!dp) return mp_err_set(e, "%s: cannot open directory (%s)", dir, strerror(errno));
    char **names = NULL;
    size_t nn = 0, cap = 0;
    int rc = MP_OK;
    struct dirent *de;
    while (rc == MP_OK && (de = readdir(dp)) != NULL) {
        if (de->d_name[0] == '.' || !ends_with(de->d_name, ".txt")) continue;
        if (nn == cap) {
            cap = cap ? cap * 2 : 64;
            char **p = realloc(names, cap * sizeof *names);
            if (!p) {
                rc = mp_err_set(e, "%s: out of memory", dir);
                break;
            }
            names = p;
        }
        names[nn] = strdup(de->d_name);
        if (!names[nn]) rc = mp_err_set(e, "%s: out of memory", dir);
        else nn++;
    }
    closedir(dp);
    if (rc == MP_OK && nn == 0) rc = mp_err_set(e, "%s: no .txt files in this directory", dir);
    if (rc == MP_OK) qsort(names, nn, sizeof *names, cmp_str);
    for (size_t i = 0; rc == MP_OK && i < nn; i++) {
        char path[4096];
        rc = mp_path_join(path, sizeof path, dir, names[i], e);
        if (rc == MP_OK) rc = read_one(c, d, path, 0, o, e);
    }
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    return rc;
}

int mp_tok_corpus_build(MpTokCorpus *c, MpTok *t, const char *input, const MpTokCorpusOpts *o, MpErr *e) {
    memset(c, 0, sizeof *c);
    MP_ASSERT(o->n >= 1 && o->seq >= 1);
    c->n = o->n;
    c->seq = o->seq;
    c->hash = MP_FNV_INIT;
    struct stat st;
    if (stat(input, &st) != 0) return mp_err_set(e, "%s: %s", input, strerror(errno));
    MpTokDocs d = {0};
    int rc;
    if (S_ISDIR(st.st_mode)) {
        c->format = "dir";
        rc = read_dir(c, &d, input, o, e);
    } else {
        int jsonl = ends_with(input, ".jsonl");
        c->format = jsonl ? "jsonl" : "txt";
        rc = read_one(c, &d, input, jsonl, o, e);
    }
    c->n_docs = (int64_t)d.n;
    size_t *order = NULL, total = 0;
    MpTokIds ids = {0};
    if (rc == MP_OK && d.n == 0) rc = mp_err_set(e, "%s: no documents found", input);
    if (rc == MP_OK && (mp_size_mul((size_t)o->n, (size_t)o->seq, &total) != MP_OK || total > ((size_t)1 << 34)))
        rc = mp_err_set(e, "corpus: --n %lld x --seq %lld tokens is too large", (long long)o->n, (long long)o->seq);
    if (rc == MP_OK) {
        order = mp_try_malloc(d.n * sizeof *order);
        c->ids = mp_try_malloc(total * sizeof *c->ids);
        if (!order || !c->ids) rc = mp_err_set(e, "corpus: out of memory for %zu tokens", total);
    }
    if (rc == MP_OK) {
        for (size_t i = 0; i < d.n; i++) order[i] = i;
        if (o->shuffle) { /* Fisher–Yates with Philox (seed, stream 0) */
            MpRng r;
            mp_rng_init(&r, o->seed, 0);
            for (size_t i = d.n; i > 1; i--) {
                size_t j = (size_t)(mp_rng_uniform(&r) * (double)i);
                if (j >= i) j = i - 1;
                size_t tmp = order[i - 1];
                order[i - 1] = order[j];
                order[j] = tmp;
            }
        }
        int64_t kept = 0;
        if (o->pack) { /* ids of whole documents appended until n rows of seq are filled */
            for (size_t k = 0; rc == MP_OK && k < d.n && ids.n < total; k++) {
                const MpTokDoc *doc = &d.doc[order[k]];
                rc = mp_tok_encode(t, &ids, d.text.data + doc->off, doc->len, o->add_special, e);
                c->n_examined++;
            }
            if (rc == MP_OK && ids.n < total)
                rc = mp_err_set(e, "%s: %zu tokens in all (%lld documents), fewer than --n %lld x --seq %lld = %zu; lower --n or --seq",
                                input, ids.n, (long long)c->n_docs, (long long)o->n, (long long)o->seq, total);
            if (rc == MP_OK && o->add_special && t->bos_id >= 0) {
                /* every row starts with BOS, as an unpacked document does: BOS + the next S-1
                 * ids of the stream (a document's own BOS right there is not doubled) */
                size_t at = 0;
                for (int64_t r = 0; r < o->n; r++) {
                    int32_t *row = c->ids + (size_t)r * (size_t)o->seq;
                    row[0] = t->bos_id;
                    if (o->seq > 1 && at < ids.n && ids.ids[at] == t->bos_id) at++;
                    for (int64_t k = 1; k < o->seq; k++) row[k] = ids.ids[at++]; /* at < ids.n: ids.n >= n*S */
                }
            } else if (rc == MP_OK)
                memcpy(c->ids, ids.ids, total * sizeof *ids.ids);
            kept = rc == MP_OK ? o->n : 0;
        }
        for (size_t k = 0; rc == MP_OK && !o->pack && k < d.n && kept < o->n; k++) {
            const MpTokDoc *doc = &d.doc[order[k]];
            ids.n = 0;
            rc = mp_tok_encode(t, &ids, d.text.data + doc->off, doc->len, o->add_special, e);
            if (rc != MP_OK) break;
            c->n_examined++;
            if ((int64_t)ids.n < o->seq) {
                c->n_skipped++;
                continue;
            }
            memcpy(c->ids + (size_t)kept * (size_t)o->seq, ids.ids, (size_t)o->seq * sizeof *ids.ids);
            kept++;
        }
        if (rc == MP_OK && kept < o->n) {
            if (kept == 0)
                rc = mp_err_set(e, "%s: no document has %lld tokens (%lld documents, all shorter; try a smaller --seq)",
                                input, (long long)o->seq, (long long)c->n_docs);
            else
                rc = mp_err_set(e, "%s: only %lld of %lld documents have %lld tokens (%lld skipped as shorter); "
                                   "lower --n or --seq",
                                input, (long long)kept, (long long)o->n, (long long)o->seq, (long long)c->n_skipped);
        }
    }
    mp_tok_ids_free(&ids);
    free(order);
    free(d.doc);
    mp_tok_buf_free(&d.text);
    if (rc != MP_OK) {
        free(c->ids);
        c->ids = NULL;
    }
    return rc;
}

int mp_tok_corpus_join(MpTokBuf *out, const char *input, const char *field, int64_t *n_docs, MpErr *e) {
    MpTokCorpus c; /* only its file counters and hash are used */
    memset(&c, 0, sizeof c);
    c.hash = MP_FNV_INIT;
    const MpTokCorpusOpts o = {.field = field, .n = 1, .seq = 1};
    struct stat st;
    if (stat(input, &st) != 0) return mp_err_set(e, "%s: %s", input, strerror(errno));
    MpTokDocs d = {0};
    int rc = S_ISDIR(st.st_mode) ? read_dir(&c, &d, input, &o, e) : read_one(&c, &d, input, ends_with(input, ".jsonl"), &o, e);
    if (rc == MP_OK && d.n == 0) rc = mp_err_set(e, "%s: no documents found", input);
    for (size_t k = 0; rc == MP_OK && k < d.n; k++) {
        if (k) rc = mp_tok_buf_append(out, "\n\n", 2, e);
        if (rc == MP_OK) rc = mp_tok_buf_append(out, d.text.data + d.doc[k].off, d.doc[k].len, e);
    }
    *n_docs = (int64_t)d.n;
    free(d.doc);
    mp_tok_buf_free(&d.text);
    return rc;
}

void mp_tok_corpus_free(MpTokCorpus *c) {
    free(c->ids);
    memset(c, 0, sizeof *c);
}
