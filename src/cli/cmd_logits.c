/* cmd_logits.c — `maskpos logits`: the whole model to next-token log-probabilities, the sanity check
 * after loading a model.
 *
 *   maskpos logits MODEL --tokens 1,2,3                 top-5 next tokens with log-probs
 *   maskpos logits MODEL --tokens 1,2,3 --greedy 8      and a greedy continuation of 8 tokens
 *   maskpos logits MODEL --tokens 1,2,3 --out lp.npy    log-probs of every position, float64 [T, V]
 * The forward pass is src/model/fwd.h (f32); log-softmax is taken in double. Greedy decoding
 * recomputes the whole sequence per new token (no key/value cache: meant for small checks).
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"    /* mp_cli_* */
#include "core/npy.h"   /* mp_npy_write */
#include "core/util.h"  /* mp_parse_i64 */
#include "job/shared_opts.h" /* --threads, --compute, --device */
#include "load/model.h" /* mp_model_open */
#include "model/fwd.h"  /* MpFwd */
#include "model/generate.h" /* mp_gen_log_softmax */
#include "core/files.h" /* mp_outfile_claim: an existing output is not replaced without --force */

/* The flags' values. */
typedef struct LogitsFlags {
    const char *tokens, *out, *device;
    int top, greedy, threads, compute, force, allow_long;
} LogitsFlags;

typedef enum LogitsOpt { LO_TOKENS, LO_TOP, LO_GREEDY, LO_OUT, LO_FORCE, LO_ALLOW_LONG, LO_THREADS, LO_COMPUTE, LO_DEVICE, LO_COUNT } LogitsOpt;

#define F(m) offsetof(LogitsFlags, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* declared once for every command (job/shared_opts.h) */
static const MpOpt logits_opts[LO_COUNT] = {
    [LO_TOKENS] = {MP_OPT_DECL("tokens", MP_OPT_STRING, "LIST", .help = "comma-separated token ids (at least one; each in [0, vocab))"),
                   F(tokens)},
    [LO_TOP] = {MP_OPT_DECL("top", MP_OPT_INT, "K", .help = "how many next tokens to print (default 5)", .lo = 1, .hi = 1000), F(top)},
    [LO_GREEDY] = {MP_OPT_DECL("greedy", MP_OPT_INT, "N", .help = "append the most likely token N times and print the continuation",
                               .lo = 0, .hi = 100000), F(greedy)},
    [LO_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "FILE.npy",
                            .help = "write the log-probabilities of every position of the input, float64 [T, V]\n"
                                    "(row t = distribution of the token after position t); an existing file is\n"
                                    "replaced only with --force"), F(out)},
    [LO_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL, .help = "replace an existing --out file"), F(force), MP_OPT_HIDE},
    [LO_ALLOW_LONG] = {MP_OPT_DECL("allow-long", MP_OPT_BOOL, NULL,
                                   .help = "allow more positions (ids + --greedy) than the model's trained context"), F(allow_long)},
    [LO_THREADS] = {S(THREADS), F(threads), .arg = "T", .help = "worker threads (default: all cores; results are identical for any T)"},
    [LO_COMPUTE] = {S(COMPUTE), F(compute),
                    .help = "f32 (default, the reference) or bf16 (bf16 Linear weights and inputs, f32\n"
                            "accumulation; docs/speed.md)"},
    [LO_DEVICE] = {S(DEVICE), F(device)},
};
_Static_assert(sizeof logits_opts / sizeof *logits_opts == LO_COUNT, "one row per LogitsOpt");

static const MpOptTable logits_table = {"logits", logits_opts, LO_COUNT, 18,
    "usage: maskpos logits MODEL --tokens ID,ID,... [options]\n"
    "\n"
    "Runs every layer of MODEL (HF directory or .gguf) on the token ids and prints the most likely\n"
    "next tokens after the last one, with log-probabilities (f32 forward pass, log-softmax in\n"
    "double).\n"
    "\n",
    "Bad input: one-line error, exit 2.\n"};

static int logits_argmax(const double *lp, int V) {
    int b = 0;
    for (int i = 1; i < V; i++)
        if (lp[i] > lp[b]) b = i;
    return b;
}

/* "ID,ID,..." -> *ids64 [*n] (mp_malloc_or_die'd); MP_ERR when it is not such a list. */
static int logits_parse_ids(const char *tokens, int64_t **ids64, int *n_out) {
    int n = 1;
    for (const char *p = tokens; *p; p++) n += *p == ',';
    int64_t *ids = mp_malloc_or_die((size_t)n * sizeof *ids, "token ids");
    char *dup = strdup(tokens), *save = NULL;
    int k = 0, bad = dup == NULL;
    for (char *tok = dup ? strtok_r(dup, ",", &save) : NULL; tok && !bad; tok = strtok_r(NULL, ",", &save)) {
        if (k >= n || mp_parse_i64(tok, 0, INT32_MAX, &ids[k]) != MP_OK) bad = 1;
        k++;
    }
    free(dup);
    if (bad || k != n) {
        free(ids);
        return MP_ERR;
    }
    *ids64 = ids;
    *n_out = n;
    return MP_OK;
}

/* The table of the top most likely next tokens of lp [V]. */
static void logits_print_top(const double *lp, int V, int top) {
    printf("%6s %10s %12s %10s\n", "rank", "id", "log-prob", "prob");
    if (top > V) top = V;
    unsigned char *used = mp_calloc_or_die((size_t)V, 1, "ranks");
    for (int r = 0; r < top; r++) {
        int b = -1;
        for (int i = 0; i < V; i++)
            if (!used[i] && (b < 0 || lp[i] > lp[b])) b = i;
        used[b] = 1;
        printf("%6d %10d %12.6f %10.6f\n", r + 1, b, lp[b], exp(lp[b]));
    }
    free(used);
}

/* --greedy: ids [T] gets T - n argmax tokens after its n given ones (lp [V]: the log-probs after
 * position n - 1, then scratch); prints them. */
static int logits_greedy(MpFwd *f, int32_t *ids, int n, int T, double *lp, int V, MpErr *e) {
    int len = n;
    ids[len++] = logits_argmax(lp, V);
    while (len < T) {
        if (mp_fwd_run(f, ids, len, NULL, NULL, e) != MP_OK) return MP_ERR;
        mp_gen_log_softmax(lp, f->logits + (size_t)(len - 1) * V, V);
        ids[len++] = logits_argmax(lp, V);
    }
    printf("greedy continuation (%d token%s):", T - n, T - n == 1 ? "" : "s");
    for (int i = n; i < T; i++) printf("%s%d", i == n ? " " : ",", ids[i]);
    printf("\n");
    return MP_OK;
}

int mp_cmd_logits(int argc, char **argv) {
    const char *cmd = "logits";
    LogitsFlags fl = {.top = 5, .compute = MP_FWD_COMPUTE_F32};
    int first;
    const int prc = mp_cli_parse(&logits_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    const char *tokens = fl.tokens, *out = fl.out, *device = fl.device;
    const int top = fl.top, greedy = fl.greedy, threads = fl.threads, compute = fl.compute, force = fl.force,
              allow_long = fl.allow_long;
    if (first >= argc) return mp_cli_error(cmd, "no MODEL given (see 'maskpos logits --help')");
    const char *model_path = argv[first++];
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    if (!tokens || !*tokens) return mp_cli_error(cmd, "--tokens ID,ID,... is required");
    if (out) { /* .npy bytes go to a .npy name; an existing file is kept unless --force */
        const size_t ol = strlen(out);
        MpErr oe;
        if (ol < 5 || strcmp(out + ol - 4, ".npy"))
            return mp_cli_error(cmd, "--out %s: the output is a .npy array; give a name ending in .npy", out);
        if (mp_outfile_claim(out, force, &oe) != MP_OK) return mp_cli_error(cmd, "%s", oe.msg);
    }
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    /* parse the id list (ranges checked against the vocabulary once the model is open) */
    int n = 0;
    int64_t *ids64 = NULL;
    if (logits_parse_ids(tokens, &ids64, &n) != MP_OK)
        return mp_cli_error(cmd, "--tokens: '%s' is not a comma-separated list of non-negative ids", tokens);
    MpErr e;
    MpModel m;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, model_path, &e) != MP_OK || mp_model_check_finite(&m, m.n_layers, &e) != MP_OK) {
        free(ids64);
        mp_model_free(&m);
        return mp_cli_error(cmd, "%s", e.msg);
    }
    int rc = MP_EXIT_OK;
    const int T = n + greedy;
    int beyond = 0;
    if (mp_model_context_check(&m, T, allow_long, &beyond, &e) != MP_OK) {
        free(ids64);
        mp_model_free(&m);
        return mp_cli_error(cmd, "%s", e.msg);
    }
    if (beyond)
        fprintf(stderr, "maskpos logits: warning: %d positions run past the trained context of %s (max_position_embeddings %d)\n",
                T, model_path, m.max_pos);
    int32_t *ids = mp_malloc_or_die((size_t)T * sizeof *ids, "token ids");
    double *lp = mp_malloc_or_die((size_t)m.vocab * sizeof *lp, "log-probs");
    double *all = NULL;
    MpFwd f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < n; i++) {
        if (ids64[i] >= m.vocab) {
            rc = mp_cli_error(cmd, "--tokens: id %lld is outside the vocabulary [0, %d)", (long long)ids64[i], m.vocab);
            goto done;
        }
        ids[i] = (int32_t)ids64[i];
    }
    MpFwdConfig fc = {.n_layers = m.n_layers, .max_seq = T, .causal = 1, .rope = 1, .logits = 1, .compute = compute, .device = device};
    if (mp_fwd_init(&f, &m, &fc, &e) != MP_OK || mp_fwd_run(&f, ids, n, NULL, NULL, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (out) {
        all = mp_malloc_or_die((size_t)n * (size_t)m.vocab * sizeof *all, "log-probs");
        for (int t = 0; t < n; t++) mp_gen_log_softmax(all + (size_t)t * m.vocab, f.logits + (size_t)t * m.vocab, m.vocab);
        int64_t shp[2] = {n, m.vocab};
        if (mp_npy_write(out, MP_DT_F64, all, 2, shp, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
    }
    mp_gen_log_softmax(lp, f.logits + (size_t)(n - 1) * m.vocab, m.vocab);
    printf("%s (%s, %d layers): %d input token%s; next token after position %d:\n", model_path,
           mp_model_arch_name(m.arch), m.n_layers, n, n == 1 ? "" : "s", n - 1);
    logits_print_top(lp, m.vocab, top);
    if (greedy > 0 && logits_greedy(&f, ids, n, T, lp, m.vocab, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (out) printf("wrote %s (float64 [%d, %d] log-probabilities)\n", out, n, m.vocab);
done:
    mp_fwd_free(&f);
    free(all);
    free(lp);
    free(ids);
    free(ids64);
    mp_model_free(&m);
    return rc;
}
