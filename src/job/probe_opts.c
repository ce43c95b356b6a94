/* probe_opts.c — the probe's option table and the functions that read it; see probe_opts.h.
 *
 * ================================================================ layout
 *   table      one row per option (help texts as `maskpos probe --help` prints them)
 *   values     one value into its field, with the command line's messages
 *   checks     across options
 *   settings   a config back into "name=value" settings; the help rows
 */
#include "job/probe_opts.h"

#include <inttypes.h>
#include <string.h>

#include "core/util.h"         /* mp_parse_i64, mp_parse_double, MP_THREADS_MAX */
#include "model/fwd.h"         /* mp_fwd_compute_parse, mp_fwd_compute_name */
#include "model/fwd_backend.h" /* mp_fwd_device_check */
#include "model/probe.h"       /* mp_probe_stats: --stats, its names in --help */

/* ================================================================ table */

#define F(m) offsetof(MpProbeConfig, m)

const MpProbeOpt mp_probe_opts[MP_PROBE_OPT_COUNT] = {
    [MP_PROBE_OPT_MODEL] = {"model", MP_PROBE_KIND_STRING, MP_PROBE_OPT_POSITIONAL, F(model_path), .arg = "MODEL",
             .help = "an HF directory or a .gguf file"},
    [MP_PROBE_OPT_TOKENS] = {"tokens", MP_PROBE_KIND_STRING, 0, F(tokens_path), .arg = "FILE",
             .help = "token ids: .npy int32/int64/uint32 [N, S'] (rows cut to --seq), or a raw\n"
                     "little-endian uint32 stream cut into consecutive sequences of --seq"},
    [MP_PROBE_OPT_SEQ] = {"seq", MP_PROBE_KIND_INT, 0, F(seq), .lo = 1, .hi = 1 << 20, .arg = "S",
             .help = "tokens per sequence (default: the .npy row length; required for raw).\n"
                     ".npy rows shorter than S are an error (exit 2); in a raw stream a\n"
                     "trailing remainder shorter than S is skipped and reported"},
    [MP_PROBE_OPT_N] = {"n", MP_PROBE_KIND_I64, 0, F(n), .lo = 1, .hi = INT64_C(1) << 40, .arg = "N",
             .help = "use the first N sequences (default all; more than the file holds: exit 2)"},
    [MP_PROBE_OPT_DATA] = {"data", MP_PROBE_KIND_STRING, 0, F(data), .arg = "TEXT",
             .help = "instead of --tokens: documents (.jsonl, text file with blank-line separated\n"
                     "documents, or a directory of .txt files) tokenized with the model's own\n"
                     "tokenizer (src/tok/, as 'maskpos corpus'); the first N documents with at\n"
                     "least S tokens are kept, cut to S (shorter ones are skipped and counted;\n"
                     "fewer than N such documents: exit 2). Needs --n and --seq"},
    [MP_PROBE_OPT_TOKENIZER] = {"tokenizer", MP_PROBE_KIND_STRING, 0, F(tokenizer), .arg = "PATH",
             .help = "tokenizer for --data: a directory with tokenizer.json, a tokenizer.json\n"
                     "or a .gguf (default: MODEL)"},
    [MP_PROBE_OPT_FIELD] = {"field", MP_PROBE_KIND_STRING, 0, F(field), .arg = "NAME",
             .help = "--data .jsonl: the text field (default \"text\")"},
    [MP_PROBE_OPT_WHOLE] = {"whole", MP_PROBE_KIND_BOOL, 0, F(whole),
             .help = "--data text files: one document per file"},
    [MP_PROBE_OPT_SHUFFLE] = {"shuffle", MP_PROBE_KIND_BOOL, 0, F(shuffle),
             .help = "--data: visit documents in a random order fixed by --seed (default 0)"},
    [MP_PROBE_OPT_SEED] = {"seed", MP_PROBE_KIND_U64, 0, F(seed), .lo = 0, .hi = INT64_MAX, .arg = "K",
             .help = "seed of --shuffle"},
    [MP_PROBE_OPT_NO_SPECIAL] = {"no-special", MP_PROBE_KIND_BOOL, 0, F(no_special),
             .help = "--data: do not add BOS/EOS"},
    [MP_PROBE_OPT_PACK] = {"pack", MP_PROBE_KIND_BOOL, 0, F(pack),
             .help = "--data: concatenate the documents' ids and cut the stream into N rows of\n"
                     "S (rows may span documents; for a few long or many short documents);\n"
                     "with a tokenizer that adds BOS every row is BOS + the next S-1 ids"},
    [MP_PROBE_OPT_LAYERS] = {"layers", MP_PROBE_KIND_STRING, 0, F(layers), .arg = "SPEC",
             .help = "1-based layers, e.g. 1-4, 2,5, all (default 1-4, the paper's Figure 5,\n"
                     "or all when fewer; the set-up line says when layers are left out)"},
    [MP_PROBE_OPT_PER_HEAD] = {"per-head", MP_PROBE_KIND_BOOL, 0, F(per_head),
             .help = "also write scores_heads.npy [L,H,S,S] and its standard errors\n"
                     "scores_heads_se.npy, float32 (and probs_heads.npy with --probs)"},
    [MP_PROBE_OPT_HEADS_F64] = {"heads-f64", MP_PROBE_KIND_BOOL, 0, F(heads_f64),
             .help = "--per-head: write those two as float64 (summed in double either way)"},
    [MP_PROBE_OPT_PROBS] = {"probs", MP_PROBE_KIND_BOOL, 0, F(probs),
             .help = "also average the post-softmax attention: probs.npy [L,S,S] (rows sum to\n"
                     "1), per head the mass on the first token and the mean entropy (meta.json\n"
                     "attention_sink, attention_entropy); with --plot probs.png and\n"
                     "sink_entropy.png. Memory: O(L S^2) sums, one sequence's scores at a time"},
    [MP_PROBE_OPT_RECENCY] = {"recency", MP_PROBE_KIND_BOOL, 0, F(recency),
             .help = "also the recency probability per layer and head (triples j<k<i with\n"
                     "score(i,k) > score(i,j), per sequence and of the mean maps) and, from the\n"
                     "same run, NRI, block z and RP of the first S' = 16, 32, ... positions (a\n"
                     "causal model scores them as the S'-token prefix) and the residue by query\n"
                     "position (meta.json; --plot: length_*.png; docs/recency.md)"},
    [MP_PROBE_OPT_STATS] = {"stats", MP_PROBE_KIND_STRING, MP_PROBE_OPT_STAT_LIST, F(stats), .arg = "LIST",
             .help = "also these statistics, by name, comma-separated (--probs and --recency are\n"
                     "two of them; the same bits as their switches):"},
    [MP_PROBE_OPT_BIDIRECTIONAL] = {"bidirectional", MP_PROBE_KIND_BOOL, 0, F(bidirectional),
             .help = "counterfactual: no causal mask in any layer"},
    [MP_PROBE_OPT_NO_ROPE] = {"no-rope", MP_PROBE_KIND_BOOL, 0, F(no_rope),
             .help = "counterfactual: queries and keys not rotated"},
    [MP_PROBE_OPT_THREADS] = {"threads", MP_PROBE_KIND_INT, MP_PROBE_OPT_RUN, F(threads), .lo = 1, .hi = MP_THREADS_MAX, .arg = "T",
             .help = "worker threads (default: all cores); results are bit-identical for any T"},
    [MP_PROBE_OPT_COMPUTE] = {"compute", MP_PROBE_KIND_COMPUTE, 0, F(compute), .arg = "MODE",
             .help = "f32 (default, the reference) or bf16: Linear weights kept in bf16 (bf16\n"
                     "checkpoints as stored, others rounded once; half the memory) and Linear\n"
                     "inputs rounded to bf16, f32 accumulation, attention in f32 (docs/speed.md;\n"
                     "maps within 2e-2 of max |score| of f32 on random-weight test models)"},
    [MP_PROBE_OPT_DEVICE] = {"device", MP_PROBE_KIND_DEVICE, 0, F(device), .arg = "NAME",
             .help = "the forward pass's backend: cpu (default; the only one built here: cuda\n"
                     "needs make CUDA=1)"},
    [MP_PROBE_OPT_CHECKPOINT_EVERY] = {"checkpoint-every", MP_PROBE_KIND_I64, MP_PROBE_OPT_CLI | MP_PROBE_OPT_RUN, F(checkpoint_every), .lo = 1, .hi = INT64_C(1) << 40, .arg = "K",
             .help = "save partial sums to DIR/checkpoint.bin every K sequences (atomically)"},
    [MP_PROBE_OPT_RESUME] = {"resume", MP_PROBE_KIND_BOOL, MP_PROBE_OPT_CLI | MP_PROBE_OPT_RUN, F(resume),
             .help = "continue from DIR/checkpoint.bin (same model, tokens and flags)"},
    [MP_PROBE_OPT_ALLOW_LONG] = {"allow-long", MP_PROBE_KIND_BOOL, 0, F(allow_long),
             .help = "run S past the model's trained context (max_position_embeddings, or a\n"
                     "model that does not state it): refused without it; warned and recorded\n"
                     "in meta.json (beyond_trained_context) with it"},
    [MP_PROBE_OPT_FORCE] = {"force", MP_PROBE_KIND_BOOL, MP_PROBE_OPT_CLI | MP_PROBE_OPT_RUN, MP_PROBE_OPT_NO_FIELD,
             .help = "replace the outputs of an earlier run in --out (else such a folder is\n"
                     "refused: a folder holds one run's outputs)"},
    [MP_PROBE_OPT_OUT] = {"out", MP_PROBE_KIND_STRING, MP_PROBE_OPT_CLI | MP_PROBE_OPT_RUN, F(out), .arg = "DIR",
             .help = "outputs: scores.npy float64 [L,S,S] (mean over sequences and heads; NaN\n"
                     "where masked), scores_diagnorm.npy, scores_se.npy, scores_heads*.npy,\n"
                     "meta.json (its \"files\" lists every file written, as the last line does)"},
    [MP_PROBE_OPT_PLOT] = {"plot", MP_PROBE_KIND_BOOL, MP_PROBE_OPT_CLI, MP_PROBE_OPT_NO_FIELD,
             .help = "also draw DIR/scores_diagnorm.png (every selected layer, diagonal-\n"
                     "normalised, vlag centred on 0, limits +-max(|1st|, |99th| percentile),\n"
                     "printed and in meta.json's files)"},
    [MP_PROBE_OPT_MAX_MEM_GIB] = {"max-mem-gib", MP_PROBE_KIND_DOUBLE, MP_PROBE_OPT_RUN, F(max_mem_gib), .dlo = 1e-6, .dhi = 1e6, .arg = "G",
             .help = "refuse to start when the expected peak exceeds G GiB (default: the\n"
                     "memory available now)"},
    [MP_PROBE_OPT_QUIET] = {"quiet", MP_PROBE_KIND_BOOL, MP_PROBE_OPT_CLI | MP_PROBE_OPT_RUN, MP_PROBE_OPT_NO_FIELD,
             .help = "print nothing but warnings (on stderr): no set-up lines, progress bar or tables\n"
                     "(meta.json holds every statistic)"},
    [MP_PROBE_OPT_HELP] = {"help", MP_PROBE_KIND_BOOL, MP_PROBE_OPT_CLI | MP_PROBE_OPT_RUN, MP_PROBE_OPT_NO_FIELD,
             .help = "this text"},
};

/* Every id has its row (a row left out has no name). */
_Static_assert(sizeof mp_probe_opts / sizeof *mp_probe_opts == MP_PROBE_OPT_COUNT, "one row per MpProbeOptId");

int mp_probe_opt_find(const char *name) {
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++)
        if (mp_probe_opts[i].name && !strcmp(mp_probe_opts[i].name, name)) return i;
    return -1;
}

/* ================================================================ values */

static int opt_i64(int64_t *out, const MpProbeOpt *o, const char *v, MpErr *e) {
    int64_t x;
    if (mp_parse_i64(v, INT64_MIN, INT64_MAX, &x) != MP_OK) return mp_err_set(e, "--%s: '%s' is not an integer", o->name, v);
    if (x < o->lo || x > o->hi)
        return mp_err_set(e, "--%s: %s is outside [%lld, %lld]", o->name, v, (long long)o->lo, (long long)o->hi);
    *out = x;
    return MP_OK;
}

static int opt_bool(int *out, const MpProbeOpt *o, const char *v, MpErr *e) {
    if (!v || !strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "on")) *out = 1;
    else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "off")) *out = 0;
    else return mp_err_set(e, "--%s: '%s' is not 1 or 0 (true or false)", o->name, v);
    return MP_OK;
}

int mp_probe_opt_set(MpProbeConfig *c, int id, const char *v, MpErr *e) {
    MP_ASSERT(id >= 0 && id < MP_PROBE_OPT_COUNT);
    const MpProbeOpt *o = &mp_probe_opts[id];
    if (o->field == MP_PROBE_OPT_NO_FIELD) return mp_err_set(e, "--%s is not a setting of the probe", o->name);
    void *p = (char *)c + o->field;
    if (!v && o->kind != MP_PROBE_KIND_BOOL) return mp_err_set(e, "--%s needs a value", o->name);
    int64_t x;
    double d;
    switch ((MpProbeOptKind)o->kind) {
    case MP_PROBE_KIND_BOOL: return opt_bool(p, o, v, e);
    case MP_PROBE_KIND_INT:
        if (opt_i64(&x, o, v, e) != MP_OK) return MP_ERR;
        *(int *)p = (int)x;
        return MP_OK;
    case MP_PROBE_KIND_I64: return opt_i64(p, o, v, e);
    case MP_PROBE_KIND_U64:
        if (opt_i64(&x, o, v, e) != MP_OK) return MP_ERR;
        *(uint64_t *)p = (uint64_t)x;
        return MP_OK;
    case MP_PROBE_KIND_DOUBLE:
        if (mp_parse_double(v, &d) != MP_OK) return mp_err_set(e, "--%s: '%s' is not a number", o->name, v);
        if (d < o->dlo || d > o->dhi) return mp_err_set(e, "--%s: %s is outside [%g, %g]", o->name, v, o->dlo, o->dhi);
        *(double *)p = d;
        return MP_OK;
    case MP_PROBE_KIND_STRING: *(const char **)p = v; return MP_OK;
    case MP_PROBE_KIND_COMPUTE:
        if ((*(int *)p = mp_fwd_compute_parse(v)) < 0) return mp_err_set(e, "--%s: '%s' is not f32 or bf16", o->name, v);
        return MP_OK;
    case MP_PROBE_KIND_DEVICE:
        if (mp_fwd_device_check(v, e) != MP_OK) return MP_ERR;
        *(const char **)p = v;
        return MP_OK;
    }
    return mp_err_set(e, "--%s: unknown kind %d", o->name, o->kind);
}

int mp_probe_opt_parse(MpProbeConfig *c, const char *s, MpErr *e) {
    const char *eq = strchr(s, '=');
    char name[64];
    const size_t len = eq ? (size_t)(eq - s) : strlen(s);
    if (len >= sizeof name) return mp_err_set(e, "unknown probe setting '%.60s...'", s);
    memcpy(name, s, len);
    name[len] = 0;
    const int id = mp_probe_opt_find(name);
    if (id < 0) return mp_err_set(e, "unknown option or missing value: '--%s' (see 'maskpos probe --help')", name);
    return mp_probe_opt_set(c, id, eq ? eq + 1 : NULL, e);
}

/* ================================================================ checks */

int mp_probe_opts_check(const MpProbeConfig *c, MpErr *e) {
    if (!c->ids && !c->tokens_path && !c->data) return mp_err_set(e, "--tokens FILE or --data TEXT is required");
    if (c->tokens_path && c->data) return mp_err_set(e, "--tokens and --data exclude each other");
    if (c->ids && (c->tokens_path || c->data)) return mp_err_set(e, "probe: token ids given twice (an array and a file)");
    if (c->data && (!c->n || !c->seq)) return mp_err_set(e, "--data needs --n N and --seq S");
    if (!c->data && (c->tokenizer || c->field || c->whole || c->shuffle || c->no_special || c->pack))
        return mp_err_set(e, "--tokenizer, --field, --whole, --shuffle, --no-special and --pack go with --data");
    if (c->heads_f64 && !c->per_head) return mp_err_set(e, "--heads-f64 goes with --per-head");
    return MP_OK;
}

/* ================================================================ settings */

/* Option o of c as text into v (cap 32 for numbers; strings are pointed to by *s); 0 when it
 * holds the default value of d. */
static int opt_value(char v[32], const char **s, const MpProbeOpt *o, const MpProbeConfig *c, const MpProbeConfig *d) {
    const char *p = (const char *)c + o->field, *q = (const char *)d + o->field;
    *s = v;
    switch ((MpProbeOptKind)o->kind) {
    case MP_PROBE_KIND_BOOL:
    case MP_PROBE_KIND_INT:
        snprintf(v, 32, "%d", *(const int *)p);
        return *(const int *)p != *(const int *)q;
    case MP_PROBE_KIND_COMPUTE:
        *s = mp_fwd_compute_name(*(const int *)p);
        return *(const int *)p != *(const int *)q;
    case MP_PROBE_KIND_I64:
        snprintf(v, 32, "%" PRId64, *(const int64_t *)p);
        return *(const int64_t *)p != *(const int64_t *)q;
    case MP_PROBE_KIND_U64:
        snprintf(v, 32, "%" PRIu64, *(const uint64_t *)p);
        return *(const uint64_t *)p != *(const uint64_t *)q;
    case MP_PROBE_KIND_DOUBLE: /* %.17g reads back as the same double */
        snprintf(v, 32, "%.17g", *(const double *)p);
        return memcmp(p, q, sizeof(double)) != 0;
    case MP_PROBE_KIND_STRING:
    case MP_PROBE_KIND_DEVICE:
        *s = *(const char *const *)p;
        return *s != NULL;
    }
    return 0;
}

size_t mp_probe_opts_write(char *buf, size_t cap, const MpProbeConfig *c, int skip_flags, char sep) {
    MpProbeConfig d;
    mp_probe_config_init(&d);
    size_t len = 0;
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpProbeOpt *o = &mp_probe_opts[i];
        char num[32];
        const char *v;
        if (o->field == MP_PROBE_OPT_NO_FIELD || (o->flags & skip_flags) || !opt_value(num, &v, o, c, &d)) continue;
        const size_t nl = strlen(o->name), vl = strlen(v);
        const char *parts[3] = {o->name, "=", v};
        const size_t lens[3] = {nl, 1, vl};
        for (int k = 0; k < 3; k++) {
            if (len + lens[k] < cap) memcpy(buf + len, parts[k], lens[k]);
            len += lens[k];
        }
        if (len + 1 < cap) buf[len] = sep;
        len++;
    }
    if (cap) buf[len < cap ? len : cap - 1] = 0;
    return len;
}

void mp_probe_opts_help(FILE *f) {
    for (int i = 0; i < MP_PROBE_OPT_COUNT; i++) {
        const MpProbeOpt *o = &mp_probe_opts[i];
        if ((o->flags & MP_PROBE_OPT_POSITIONAL) || i == MP_PROBE_OPT_HELP) continue;
        char head[64];
        snprintf(head, sizeof head, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "  %-20s ", head);
        for (const char *p = o->help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n') fprintf(f, "%23s", "");
        }
        fputc('\n', f);
        for (int id = 1; (o->flags & MP_PROBE_OPT_STAT_LIST) && id < MP_PROBE_NSTATS; id++) /* the maps are always on */
            fprintf(f, "%25s%-10s %s\n", "", mp_probe_stats[id].name, mp_probe_stats[id].help);
    }
}
