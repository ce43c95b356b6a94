/* main.c — `maskpos`: dispatches to one subcommand per pipeline stage (like git).
 *
 * Run `maskpos help` for the list. Each subcommand lives in src/cli/<name>.c.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"    /* mp_cmd_* */
#include "cli/mpi_job.h" /* mp_cli_mpi_run: under mpirun */
#include "core/mpi.h"    /* mp_mpi_init */
#include "core/json.h"  /* MP_VERSION */
#include "core/util.h"  /* mp_threads_resolve */

typedef struct MpCommand {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} MpCommand;

static const MpCommand commands[] = {
    {"theory", mp_cmd_theory, "closed-form scores of the parameter-free causal decoder (paper §3)"},
    {"simulate", mp_cmd_simulate, "Monte-Carlo parameter-free decoder: L2/LayerNorm, RoPE, causal or not"},
    {"reproduce", mp_cmd_reproduce, "run the paper's experiments and write their outputs"},
    {"plot", mp_cmd_plot, "draw .npy score maps as PNG/PDF/SVG figures"},
    {"inspect", mp_cmd_inspect, "describe a checkpoint (HF safetensors directory or GGUF file)"},
    {"mkmodel", mp_cmd_mkmodel, "write a random-weight test model in HF or GGUF format"},
    {"tokenize", mp_cmd_tokenize, "text to the model's own token ids (HF tokenizer.json / GGUF vocab)"},
    {"corpus", mp_cmd_corpus, "tokenize a corpus into an [N,S] token cache for probe"},
    {"probe", mp_cmd_probe, "mean pre-softmax score maps of a real checkpoint over a corpus"},
    {"logits", mp_cmd_logits, "run a checkpoint to next-token logits (sanity check after loading)"},
    {"generate", mp_cmd_generate, "seeded samples from a checkpoint (key/value cache), ids for probe"},
    {"train", mp_cmd_train, "train a small Llama-style decoder (RoPE or no positional encoding)"},
    {"gram", mp_cmd_gram, "the nine Gram matrices of one layer -> the next (paper Figure 3)"},
    {"card", mp_cmd_card, "one card per model: every probe statistic and its counterfactuals, HTML + JSON + table"},
    {"view", mp_cmd_view, "one self-contained HTML page to explore runs' maps (layers, heads, hover, zoom)"},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "maskpos %s — how much positional information the causal mask puts into attention scores\n\n"
               "usage: maskpos <command> [options]   (maskpos <command> --help for details)\n\ncommands:\n",
            MP_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "  %-10s %s\n", "help", "this list");
    fprintf(f, "  %-10s %s\n", "version", "print the version");
}

static int main_dispatch(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return MP_EXIT_ERROR;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return MP_EXIT_OK;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("maskpos %s\n", MP_VERSION);
        return MP_EXIT_OK;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(cmd, commands[i].name)) {
            /* OpenMP's default team (OMP_NUM_THREADS) under the cap of every other thread count:
             * the parallel regions that take the default would otherwise ask for all of it */
            MpErr e;
            int nt;
            if (mp_threads_resolve(0, NULL, &nt, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
            return commands[i].run(argc - 1, argv + 1);
        }
    fprintf(stderr, "maskpos: error: unknown command '%s' (see 'maskpos help')\n", cmd);
    return MP_EXIT_ERROR;
}

/* What a command printed must have reached its reader: a failed write to stdout (a full disk,
 * /dev/full) is an error, not exit 0 over a truncated table. */
static int main_stdout_check(int rc, const char *cmd) {
    errno = 0;
    if ((fflush(stdout) == 0 && !ferror(stdout)) || rc != MP_EXIT_OK) return rc; /* (a failed run said why) */
    fprintf(stderr, "maskpos %s: error: standard output: write failed: %s\n", cmd,
            errno ? strerror(errno) : "an earlier write failed");
    return MP_EXIT_ERROR;
}

int main(int argc, char **argv) {
    if (mp_mpi_init(&argc, &argv) != 0) return MP_EXIT_ERROR;
    /* past `ulimit -f` a write fails with EFBIG and is reported (one line, the temp file removed)
     * instead of the process being killed with a half-written temporary left behind */
    signal(SIGXFSZ, SIG_IGN);
    int rc = mp_mpi_size() > 1 ? mp_cli_mpi_run(argc, argv, main_dispatch) : main_dispatch(argc, argv);
    rc = main_stdout_check(rc, argc > 1 ? argv[1] : "");
    mp_mpi_finalize();
    return rc;
}
