/* cmd_generate.c — `maskpos generate`: seeded samples from a checkpoint (src/model/generate.h).
 *
 *   maskpos generate MODEL --n 4 --len 128 --temperature 1 --seed 0       text on stdout
 *   maskpos generate MODEL --greedy --len 20 --ids                        greedy ids from BOS
 *   maskpos generate MODEL --n 1000 --len 512 --seed 7 --out ids.npy --quiet
 * Parses flags, tokenizes --prompt with the model's own tokenizer, calls mp_gen_run, writes the
 * ids ([N, L] int32, what `probe --tokens` reads) and prints text (or ids when the tokenizer
 * cannot load: the reason goes to stderr). A summary line goes to stderr.
 * Exit 0 ok, 2 bad input (one-line message). Tested by: tests/test_stories_generate.c.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"        /* mp_cli_* */
#include "core/files.h"     /* mp_outfile_claim: an existing --out is not replaced without --force */
#include "core/npy.h"       /* mp_npy_write */
#include "core/progress.h"  /* MpProgress */
#include "core/util.h"      /* mp_parse_i64 */
#include "load/model.h"     /* mp_model_open */
#include "job/shared_opts.h"  /* --n, --seed, --threads, --compute, --device */
#include "model/generate.h" /* mp_gen_run */
#include "tok/tok.h"        /* --prompt, text output */

typedef struct GenOpts {
    const char *model, *prompt, *prompt_ids, *out;
    MpGenConfig cfg;
    int print_ids, quiet, force, greedy;
} GenOpts;

typedef enum GenOpt {
    GE_N, GE_LEN, GE_TEMPERATURE, GE_GREEDY, GE_TOP_K, GE_TOP_P, GE_SEED, GE_PROMPT, GE_PROMPT_IDS, GE_OUT, GE_FORCE, GE_IDS,
    GE_QUIET, GE_THREADS, GE_COMPUTE, GE_DEVICE, GE_COUNT
} GenOpt;

#define F(m) offsetof(GenOpts, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* declared once for every command (job/shared_opts.h) */
static const MpOpt generate_opts[GE_COUNT] = {
    [GE_N] = {S(N), F(cfg.n), MP_OPT_NARROW, .help = "sequences (default 1)", .lo = 1, .hi = INT64_C(1) << 31},
    [GE_LEN] = {MP_OPT_DECL("len", MP_OPT_INT, "L",
                            .help = "tokens per sequence, prompt included (default 64; at most the model's context)", .lo = 2,
                            .hi = 1 << 20), F(cfg.len)},
    [GE_TEMPERATURE] = {MP_OPT_DECL("temperature", MP_OPT_DOUBLE, "T", .help = "sample from softmax(logits / T) (default 1; 0 = greedy)",
                                    .dlo = 0, .dhi = 1e6), F(cfg.sampler.temperature)},
    [GE_GREEDY] = {MP_OPT_DECL("greedy", MP_OPT_BOOL, NULL,
                               .help = "the most likely id every time (lowest id on ties), as llama.cpp's greedy"), F(greedy)},
    [GE_TOP_K] = {MP_OPT_DECL("top-k", MP_OPT_INT, "K", .help = "sample among the K most likely ids only (default 0: all)", .lo = 0,
                              .hi = INT32_MAX), F(cfg.sampler.top_k)},
    [GE_TOP_P] = {MP_OPT_DECL("top-p", MP_OPT_DOUBLE, "P",
                              .help = "sample within the smallest set of most likely ids whose probability reaches\n"
                                      "P (nucleus; default 1: all)",
                              .dlo = 1e-12, .dhi = 1), F(cfg.sampler.top_p)},
    [GE_SEED] = {S(SEED), F(cfg.seed), .help = "random seed (default 0)"},
    [GE_PROMPT] = {MP_OPT_DECL("prompt", MP_OPT_STRING, "TEXT",
                               .help = "start from TEXT, tokenized with the model's own tokenizer (BOS added as it says)"), F(prompt)},
    [GE_PROMPT_IDS] = {MP_OPT_DECL("prompt-ids", MP_OPT_STRING, "L", .help = "start from these comma-separated ids instead"),
                       F(prompt_ids)},
    [GE_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "F.npy",
                            .help = "write the ids as int32 [N, L] (the input of `maskpos probe --tokens`); an\n"
                                    "existing F is refused before anything is computed"), F(out)},
    [GE_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL, .help = "replace an existing --out file"), F(force)},
    [GE_IDS] = {MP_OPT_DECL("ids", MP_OPT_BOOL, NULL, .help = "print ids instead of text"), F(print_ids)},
    [GE_QUIET] = {MP_OPT_DECL("quiet", MP_OPT_BOOL, NULL,
                              .help = "print nothing on stdout and no progress bar (the summary still goes to stderr)"), F(quiet)},
    [GE_THREADS] = {S(THREADS), F(cfg.threads), .help = "worker threads (default: all cores; the ids do not depend on it)"},
    [GE_COMPUTE] = {S(COMPUTE), F(cfg.compute)},
    [GE_DEVICE] = {S(DEVICE), F(cfg.device)},
};
_Static_assert(sizeof generate_opts / sizeof *generate_opts == GE_COUNT, "one row per GenOpt");

static const MpOptTable generate_table = {"generate", generate_opts, GE_COUNT, 19,
    "usage: maskpos generate MODEL [--n N] [--len L] [--temperature T | --greedy] [--top-k K]\n"
    "                        [--top-p P] [--seed K] [--prompt TEXT | --prompt-ids LIST]\n"
    "                        [--out ids.npy [--force]] [--ids] [--quiet] [--threads N]\n"
    "                        [--compute f32|bf16] [--device cpu]\n"
    "\n"
    "Samples N sequences of exactly L token ids from MODEL (HF directory or .gguf), each starting\n"
    "with the prompt (default: the model's BOS alone) and extended one token at a time from the\n"
    "model's next-token distribution (key/value cache; the logits of a whole-sequence run, bit for\n"
    "bit). Deterministic: token t of sequence i uses draw t of the Philox stream (seed, i), so the\n"
    "same seed gives the same ids for any --threads and any N. Generation does not stop at an\n"
    "end-of-text token: a model trained on packed documents starts the next one.\n"
    "\n",
    "Stdout: each sequence's text (special tokens left out), or its ids when --ids is given or the\n"
    "model's tokenizer cannot be read (then stderr says why), one block per sequence.\n"
    "Stderr: a summary: tokens/s, and the mean negative log-likelihood of the sampled tokens under\n"
    "the model (nats per token; its exp is the perplexity of the model on its own samples).\n"
    "Bad input: one-line error, exit 2.\n"};

/* Parses "a,b,c" into ids (owned by the caller). Returns the count, or -1 on a bad list. */
static int gen_parse_ids(const char *list, int32_t **out) {
    int n = 1;
    for (const char *p = list; *p; p++) n += *p == ',';
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    char *dup = strdup(list), *save = NULL;
    int k = 0, bad = !ids || !dup || !*list;
    for (char *tok = dup && !bad ? strtok_r(dup, ",", &save) : NULL; tok && !bad; tok = strtok_r(NULL, ",", &save)) {
        int64_t v;
        if (k >= n || mp_parse_i64(tok, 0, INT32_MAX, &v) != MP_OK) bad = 1;
        else ids[k++] = (int32_t)v;
    }
    free(dup);
    if (bad || k != n) {
        free(ids);
        return -1;
    }
    *out = ids;
    return n;
}

static void gen_progress(void *ctx, int64_t done, int64_t n) {
    (void)n;
    mp_progress_update(ctx, done);
}

/* Prints every row as text (tok != NULL) or ids. */
static int gen_print(const MpGenResult *r, MpTok *tok, MpErr *e) {
    for (int64_t i = 0; i < r->n; i++) {
        const int32_t *row = r->ids + (size_t)i * r->len;
        if (r->n > 1) printf("%s[sequence %lld]\n", i ? "\n" : "", (long long)i);
        if (!tok) {
            for (int t = 0; t < r->len; t++) printf("%s%d", t ? " " : "", row[t]);
            printf("\n");
            continue;
        }
        MpTokBuf b;
        memset(&b, 0, sizeof b);
        if (mp_tok_decode(tok, &b, row, (size_t)r->len, 1, e) != MP_OK) return MP_ERR;
        printf("%s\n", b.n ? b.data : "");
        mp_tok_buf_free(&b);
    }
    return MP_OK;
}

/* The flags into o; MP_CLI_GO, or the exit status of a refusal or of --help. */
static int gen_parse(GenOpts *o, int argc, char **argv) {
    const char *cmd = "generate";
    int given[GE_COUNT], first;
    const int rc = mp_cli_parse(&generate_table, o, argc, argv, &first, given);
    if (rc != MP_CLI_GO) return rc;
    if (first >= argc) return mp_cli_error(cmd, "no MODEL given (see 'maskpos generate --help')");
    o->model = argv[first++];
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    const int greedy = o->greedy, have_t = given[GE_TEMPERATURE] > 0;
    if (greedy && have_t && o->cfg.sampler.temperature != 0) return mp_cli_error(cmd, "--greedy and --temperature %g contradict each other", o->cfg.sampler.temperature);
    if (greedy) o->cfg.sampler.temperature = 0;
    if (o->prompt && o->prompt_ids) return mp_cli_error(cmd, "--prompt and --prompt-ids exclude each other");
    MpErr oe; /* an existing --out is kept unless --force; an unwritable folder is found now */
    if (o->out && mp_outfile_claim(o->out, o->force, &oe) != MP_OK) return mp_cli_error(cmd, "%s", oe.msg);
    return MP_CLI_GO;
}

int mp_cmd_generate(int argc, char **argv) {
    const char *cmd = "generate";
    GenOpts o;
    memset(&o, 0, sizeof o);
    o.cfg.n = 1;
    o.cfg.len = 64;
    o.cfg.sampler.temperature = 1;
    o.cfg.sampler.top_p = 1;
    const int prc = gen_parse(&o, argc, argv);
    if (prc != MP_CLI_GO) return prc;
#ifdef _OPENMP
    if (o.cfg.threads > 0) omp_set_num_threads(o.cfg.threads);
#endif
    MpErr e;
    MpModel m;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, o.model, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    int rc = MP_EXIT_OK;
    MpTok tok;
    memset(&tok, 0, sizeof tok);
    MpTokIds pids;
    memset(&pids, 0, sizeof pids);
    int32_t *list = NULL;
    MpGenResult r;
    memset(&r, 0, sizeof r);
    MpErr te;
    const int have_tok = mp_tok_init(&tok, o.model, &te) == MP_OK;
    if (m.max_pos > 0 && o.cfg.len > m.max_pos) {
        rc = mp_cli_error(cmd, "--len %d exceeds the model's context (%d positions)", o.cfg.len, m.max_pos);
        goto done;
    }
    if (o.prompt) {
        if (!have_tok) {
            rc = mp_cli_error(cmd, "--prompt needs the model's tokenizer: %s", te.msg);
            goto done;
        }
        if (mp_tok_encode(&tok, &pids, o.prompt, strlen(o.prompt), 1, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "--prompt: %s", e.msg);
            goto done;
        }
        o.cfg.prompt = pids.ids;
        o.cfg.n_prompt = (int)pids.n;
        if (!pids.n) {
            rc = mp_cli_error(cmd, "--prompt '%s' gives no token", o.prompt);
            goto done;
        }
    } else if (o.prompt_ids) {
        const int n = gen_parse_ids(o.prompt_ids, &list);
        if (n < 0) {
            rc = mp_cli_error(cmd, "--prompt-ids: '%s' is not a comma-separated list of non-negative ids", o.prompt_ids);
            goto done;
        }
        o.cfg.prompt = list;
        o.cfg.n_prompt = n;
    }
    MpProgress pg;
    mp_progress_init(&pg, "generate", "seq", o.cfg.n);
    if (!o.quiet) {
        o.cfg.progress = gen_progress;
        o.cfg.progress_ctx = &pg;
    }
    if (mp_gen_run(&r, &m, &o.cfg, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (!o.quiet) mp_progress_finish(&pg);
    if (o.out) {
        const int64_t shp[2] = {r.n, r.len};
        if (mp_npy_write(o.out, MP_DT_I32, r.ids, 2, shp, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
    }
    if (!o.quiet) {
        if (!o.print_ids && !have_tok) fprintf(stderr, "maskpos generate: printing ids: %s\n", te.msg);
        if (gen_print(&r, o.print_ids || !have_tok ? NULL : &tok, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
    }
    const double nll = r.n_sampled ? r.nll_sum / (double)r.n_sampled : NAN;
    fprintf(stderr,
            "generate: %s, %lld x %d tokens (prompt %d), temperature %g, top-k %d, top-p %g, seed %llu: %.2f s, %.0f tokens/s "
            "(%d thread%s, %s); mean NLL %.4f nats/token (perplexity %.3f)%s%s\n",
            o.model, (long long)r.n, r.len, r.n_prompt, o.cfg.sampler.temperature, o.cfg.sampler.top_k, o.cfg.sampler.top_p,
            (unsigned long long)o.cfg.seed, r.wall_s, r.wall_s > 0 ? (double)r.n_sampled / r.wall_s : 0.0, r.threads,
            r.threads == 1 ? "" : "s", r.parallel == MP_GEN_PARALLEL_SEQUENCES ? "one sequence per thread" : "threads within each step",
            nll, exp(nll), o.out ? "; wrote " : "", o.out ? o.out : "");
done:
    mp_gen_result_free(&r);
    free(list);
    mp_tok_ids_free(&pids);
    mp_tok_free(&tok);
    mp_model_free(&m);
    return rc;
}
