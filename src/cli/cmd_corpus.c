/* cmd_corpus.c — `maskpos corpus`: tokenize a corpus once into an [N,S] token cache for probe.
 *
 *   maskpos corpus --model M --n 100 --seq 1024 --out cache.npy wiki.jsonl
 *   maskpos corpus --model M --n 8 --seq 256 --shuffle --seed 1 --out c.npy books/   (dir of .txt)
 * Writes cache.npy (int32 [N,S], row i = the first S ids of the i-th kept document) and
 * cache.json (provenance: tokenizer path and hash, corpus path and hash, N, S, documents
 * examined and skipped). Exit 0 ok, 2 bad input or too few long documents.
 * Tested by: tests/test_tok.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/json.h"  /* provenance JSON */
#include "core/npy.h"   /* mp_npy_write */
#include "core/util.h"  /* mp_time_now */
#include "job/shared_opts.h" /* the corpus flags */
#include "tok/corpus.h" /* mp_tok_corpus_build */
#include "tok/tok.h"    /* MpTok */
#include "core/files.h" /* mp_outfile_claim: an existing output is not replaced without --force */

/* The flags' values: the corpus reader's options and the command's own. */
typedef struct CorpusFlags {
    MpTokCorpusOpts o;
    const char *model, *out;
    int seq, force;
} CorpusFlags;

typedef enum CorpusOpt {
    CO_MODEL, CO_N, CO_SEQ, CO_OUT, CO_FIELD, CO_WHOLE, CO_SHUFFLE, CO_SEED, CO_NO_SPECIAL, CO_PACK, CO_FORCE, CO_COUNT
} CorpusOpt;

#define F(m) offsetof(CorpusFlags, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* the corpus flags, declared once (job/shared_opts.h) */
static const MpOpt corpus_opts[CO_COUNT] = {
    [CO_MODEL] = {MP_OPT_DECL("model", MP_OPT_STRING, "M", .help = "directory with tokenizer.json, or a tokenizer.json path"), F(model)},
    [CO_N] = {S(N), F(o.n), MP_OPT_NARROW, .help = "documents to keep (1..10000000)", .lo = 1, .hi = 10000000},
    [CO_SEQ] = {S(SEQ), F(seq), .help = "tokens per document (1..1048576)"},
    [CO_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "F.npy", .help = "token cache int32 [N,S]; provenance goes to F.json beside it"),
                F(out)},
    [CO_FIELD] = {S(FIELD), F(o.field)},
    [CO_WHOLE] = {S(WHOLE), F(o.whole)},
    [CO_SHUFFLE] = {S(SHUFFLE), F(o.shuffle)},
    [CO_SEED] = {S(SEED), F(o.seed)},
    [CO_NO_SPECIAL] = {S(NO_SPECIAL), F(o.add_special), MP_OPT_OFF},
    [CO_PACK] = {S(PACK), F(o.pack)},
    [CO_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL, .help = "replace an existing F.npy / F.json (else they are refused)"),
                  F(force)},
};
_Static_assert(sizeof corpus_opts / sizeof *corpus_opts == CO_COUNT, "one row per CorpusOpt");

static const MpOptTable corpus_table = {"corpus", corpus_opts, CO_COUNT, 18,
    "usage: maskpos corpus --model M --n N --seq S --out CACHE.npy [options] INPUT\n"
    "\n"
    "Tokenizes documents with the model's own tokenizer and keeps the first N that have at\n"
    "least S tokens, cut to S (BOS counts when the tokenizer adds one); shorter ones are skipped\n"
    "and counted.\n"
    "\n"
    "INPUT: a .jsonl file (one JSON object per line), a text file (documents are blocks\n"
    "separated by blank lines), or a directory of .txt files (read in name order).\n"
    "\n",
    NULL};

/* meta.json of a token cache: the file, the tokenizer and the corpus it came from. */
static json_t *corpus_meta(const MpTokCorpus *cor, const MpTok *tok, const MpTokCorpusOpts *o, const char *out,
                           const char *input) {
    char hex[32];
    json_t *meta = json_object();
    json_object_set_new(meta, "kind", json_string("token_cache"));
    json_object_set_new(meta, "file", json_string(out));
    json_object_set_new(meta, "dtype", json_string("int32"));
    json_t *shp = json_array();
    json_array_append_new(shp, json_integer(cor->n));
    json_array_append_new(shp, json_integer(cor->seq));
    json_object_set_new(meta, "shape", shp);
    json_object_set_new(meta, "n", json_integer(cor->n));
    json_object_set_new(meta, "seq", json_integer(cor->seq));
    json_t *tj = json_object();
    json_object_set_new(tj, "path", json_string(tok->path));
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)tok->hash);
    json_object_set_new(tj, "hash_fnv1a64", json_string(hex));
    json_object_set_new(tj, "add_special", json_boolean(o->add_special));
    json_object_set_new(tj, "bos_id", json_integer(tok->bos_id));
    json_object_set_new(tj, "eos_id", json_integer(tok->eos_id));
    json_object_set_new(meta, "tokenizer", tj);
    json_t *cj = json_object();
    json_object_set_new(cj, "path", json_string(input));
    json_object_set_new(cj, "format", json_string(cor->format));
    if (!strcmp(cor->format, "jsonl")) json_object_set_new(cj, "field", json_string(o->field));
    else json_object_set_new(cj, "documents_are", json_string(o->whole ? "whole files" : "blank-line-separated blocks"));
    json_object_set_new(cj, "files", json_integer(cor->n_files));
    json_object_set_new(cj, "bytes", json_integer((json_int_t)cor->n_bytes));
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)cor->hash);
    json_object_set_new(cj, "hash_fnv1a64", json_string(hex));
    json_object_set_new(cj, "documents", json_integer(cor->n_docs));
    json_object_set_new(meta, "corpus", cj);
    json_object_set_new(meta, "shuffle", json_boolean(o->shuffle));
    json_object_set_new(meta, "packed", json_boolean(o->pack));
    if (o->shuffle) json_object_set_new(meta, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(meta, "documents_examined", json_integer(cor->n_examined));
    json_object_set_new(meta, "skipped_short", json_integer(cor->n_skipped));
    return meta;
}

int mp_cmd_corpus(int argc, char **argv) {
    const char *cmd = "corpus";
    CorpusFlags fl = {.o = {.field = "text", .n = 0, .seq = 0, .add_special = 1}};
    int given[CO_COUNT], first;
    const int prc = mp_cli_parse(&corpus_table, &fl, argc, argv, &first, given);
    if (prc != MP_CLI_GO) return prc;
    MpTokCorpusOpts o = fl.o;
    o.seq = fl.seq;
    const char *model = fl.model, *out = fl.out;
    if (!model) return mp_cli_error(cmd, "--model is required (a directory with tokenizer.json, or its path)");
    if (!o.n || !o.seq) return mp_cli_error(cmd, "--n and --seq are required");
    if (!out) return mp_cli_error(cmd, "--out CACHE.npy is required");
    if (given[CO_SEED] && !o.shuffle) return mp_cli_error(cmd, "--seed only makes sense with --shuffle");
    if (first + 1 != argc)
        return mp_cli_error(cmd, first == argc ? "give one INPUT (.jsonl, text file or directory)"
                                               : "unexpected argument '%s'", argv[first + (first < argc)]);
    const char *input = argv[first];
    size_t ol = strlen(out);
    if (ol < 5 || strcmp(out + ol - 4, ".npy") != 0 || ol + 2 > 4096)
        return mp_cli_error(cmd, "--out %s: the cache file name must end in .npy", out);
    char meta_path[4096];
    memcpy(meta_path, out, ol - 4);
    memcpy(meta_path + ol - 4, ".json", 6);

    double t0 = mp_time_now();
    MpErr e;
    /* F.npy and F.json are one run's: neither is replaced without --force, and a stale F.json
     * is removed before F.npy is rewritten (it marks the pair complete) */
    if (mp_outfile_claim(out, fl.force, &e) != MP_OK || mp_outfile_claim(meta_path, fl.force, &e) != MP_OK)
        return mp_cli_error(cmd, "%s", e.msg);
    MpTok tok;
    if (mp_tok_init(&tok, model, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    MpTokCorpus cor;
    if (mp_tok_corpus_build(&cor, &tok, input, &o, &e) != MP_OK) {
        mp_tok_free(&tok);
        return mp_cli_error(cmd, "%s", e.msg);
    }
    int rc = MP_EXIT_OK;
    int64_t shape[2] = {cor.n, cor.seq};
    remove(meta_path);
    if (mp_npy_write(out, MP_DT_I32, cor.ids, 2, shape, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
    } else {
        json_t *meta = corpus_meta(&cor, &tok, &o, out, input);
        mp_json_add_provenance(meta, argc, argv, mp_time_now() - t0);
        if (mp_json_write_atomic(meta_path, meta, &e) != MP_OK) rc = mp_cli_error(cmd, "%s", e.msg);
        json_decref(meta);
    }
    if (rc == MP_EXIT_OK)
        printf("corpus: wrote %s [%lld,%lld] int32 and %s; %lld documents examined, %lld skipped (< %lld tokens), "
               "%lld in the corpus\n",
               out, (long long)cor.n, (long long)cor.seq, meta_path, (long long)cor.n_examined,
               (long long)cor.n_skipped, (long long)cor.seq, (long long)cor.n_docs);
    mp_tok_corpus_free(&cor);
    mp_tok_free(&tok);
    return rc;
}
