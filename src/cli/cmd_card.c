/* cmd_card.c — `maskpos card`: one card per model (docs/card.md).
 *
 *   maskpos card MODEL --data TEXT --n 64 --seq 128 --out cards/llama   one model: its probe passes
 *   maskpos card cards/llama cards/qwen probe-runs/x --out cards/both    run folders side by side
 * Parses the flags into an MpCardConfig through the probe's option table (job/probe_opts.h: the
 * same rows, less those the card sets itself — the statistics and the counterfactual switches —
 * and --resume/--checkpoint-every) and the card's own switch, then calls mp_card_run or
 * mp_card_compare (job/card_job.h) and prints the table it wrote (card.md).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"        /* mp_cli_* */
#include "core/files.h"     /* MP_OUTDIR_* */
#include "core/mpi.h"       /* mp_mpi_size: the card runs in one process */
#include "core/util.h"      /* mp_path_join, mp_file_read_all */
#include "job/card_job.h"   /* mp_card_run, mp_card_compare, mp_card_is_run */
#include "job/probe_opts.h" /* mp_probe_opts: the probe's rows */

_Static_assert(offsetof(MpCardConfig, probe) == 0, "the probe's rows set MpCardConfig.probe through their offsets");

static const char card_help[] =
    "usage: maskpos card MODEL --data TEXT --n N --seq S --out DIR [options]\n"
    "       maskpos card MODEL --tokens FILE --out DIR [options]\n"
    "       maskpos card RUN [RUN ...] --out DIR\n"
    "\n"
    "One card per model: a probe of MODEL over the sequences with every statistic of the probe\n"
    "(probe --stats: the maps, NRI, block z, probabilities and first-token mass, recency, variance,\n"
    "and any statistic added later), then its counterfactuals as separate passes over the same\n"
    "sequences: --no-rope (queries and keys not rotated; only where the model has RoPE) and\n"
    "--bidirectional (no causal mask). Each pass costs what one probe costs; the plan is printed\n"
    "before the first. DIR gets the passes' probe folders (probe/, no-rope/, bidirectional/), a\n"
    "one-page card.html (no script, no network), card.json (every per-layer number of the runs,\n"
    "with its standard error where the probe has one), the per-layer table as card.md and card.tex,\n"
    "and maps-1.png. With run folders (cards, or `maskpos probe` outputs) instead of MODEL, the card\n"
    "shows them side by side; a folder that is not a run, or runs of different S, is refused.\n"
    "\n";

static const char card_help_end[] =
    "\n"
    "Not taken (the card sets them): --stats, --probs, --recency, --no-rope, --bidirectional;\n"
    "nor --resume and --checkpoint-every. docs/card.md says what each number is.\n"
    "Bad input: one-line error naming the folder or file, exit 2; card.json is written last.\n";

/* The probe's rows the card does not take. */
static const int card_left_out[] = {MP_PROBE_OPT_MODEL,   MP_PROBE_OPT_PROBS,  MP_PROBE_OPT_RECENCY,
                                    MP_PROBE_OPT_STATS,   MP_PROBE_OPT_BIDIRECTIONAL, MP_PROBE_OPT_NO_ROPE,
                                    MP_PROBE_OPT_RESUME,  MP_PROBE_OPT_CHECKPOINT_EVERY};

/* The card's own switch. */
static const MpOptDecl card_no_cf = {.name = "no-counterfactuals", .kind = MP_OPT_BOOL,
                                     .help = "the probe pass only (no --no-rope and --bidirectional passes)"};

#define CARD_NROWS (MP_PROBE_OPT_COUNT + 1)
/* The card's table: its own switch, then the probe's rows it takes; row_of[id]: the row of probe
 * option id, or -1. */
typedef struct CardTable {
    MpOpt rows[CARD_NROWS];
    int row_of[MP_PROBE_OPT_COUNT];
    MpOptTable t;
} CardTable;

static void card_table_init(CardTable *ct) {
    int n = 0;
    ct->rows[n++] = (MpOpt){.decl = &card_no_cf, .field = offsetof(MpCardConfig, no_counterfactuals), .flags = MP_OPT_CLI};
    for (int id = 0; id < MP_PROBE_OPT_COUNT; id++) {
        int out = 0;
        for (size_t k = 0; k < sizeof card_left_out / sizeof *card_left_out; k++) out |= card_left_out[k] == id;
        ct->row_of[id] = out ? -1 : n;
        if (out) continue;
        ct->rows[n] = mp_probe_opts[id];
        if (id == MP_PROBE_OPT_OUT)
            ct->rows[n].help = "the card's folder: probe/ no-rope/ bidirectional/ (probe runs), card.html,\n"
                               "card.json, card.md, card.tex, maps-1.png";
        if (id == MP_PROBE_OPT_PLOT) ct->rows[n].help = "also each pass's own figures (probe --plot) in its folder";
        n++;
    }
    ct->t = (MpOptTable){"card", ct->rows, n, 23, card_help, card_help_end};
}

/* 1 when option id was given. */
static int card_given(const CardTable *ct, const int *given, int id) { return ct->row_of[id] >= 0 && given[ct->row_of[id]] > 0; }

/* With run folders the card runs nothing: only --out, --force, --quiet, --threads are taken. */
static int card_folder_flags(const CardTable *ct, const int *given) {
    static const int ok[] = {MP_PROBE_OPT_OUT, MP_PROBE_OPT_FORCE, MP_PROBE_OPT_QUIET, MP_PROBE_OPT_THREADS, MP_PROBE_OPT_HELP};
    for (int id = 0; id < MP_PROBE_OPT_COUNT; id++) {
        int fine = 0;
        for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) fine |= ok[k] == id;
        if (!fine && card_given(ct, given, id))
            return mp_cli_error("card", "--%s: run folders are shown as they are (it is an option of MODEL's card)",
                                mp_opt_name(&mp_probe_opts[id]));
    }
    if (given[0]) return mp_cli_error("card", "--no-counterfactuals: run folders are shown as they are (it is an option of MODEL's card)");
    return MP_CLI_GO;
}

/* The table card.md holds, on stdout, and the files. */
static void card_report(const char *dir) {
    char path[4096];
    MpErr e;
    char *md = NULL;
    size_t n = 0;
    if (mp_path_join(path, sizeof path, dir, "card.md", &e) == MP_OK && mp_file_read_all(path, 1 << 24, "the table", &md, &n, &e) == MP_OK)
        fputs(md, stdout);
    free(md);
    printf("wrote %s/: card.html, card.json, card.md, card.tex, maps-*.png\n", dir);
}

int mp_cmd_card(int argc, char **argv) {
    const char *cmd = "card";
    static CardTable ct;
    card_table_init(&ct);
    MpCardConfig c;
    mp_card_config_init(&c);
    int given[CARD_NROWS], first;
    int rc = mp_cli_parse(&ct.t, &c, argc, argv, &first, given);
    if (rc != MP_CLI_GO) return rc;
    if (mp_mpi_size() > 1) return mp_cli_error(cmd, "runs in one process (under mpirun, run `maskpos probe` per pass)");
    const int quiet = card_given(&ct, given, MP_PROBE_OPT_QUIET);
    const int npos = argc - first;
    if (npos < 1) return mp_cli_error(cmd, "no MODEL or run folder given (see 'maskpos card --help')");
    if (!c.probe.out) return mp_cli_error(cmd, "--out DIR is required");
    c.out_mode = card_given(&ct, given, MP_PROBE_OPT_FORCE) ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    c.plot = card_given(&ct, given, MP_PROBE_OPT_PLOT);
    c.argc = argc, c.argv = argv;
    c.log = quiet ? NULL : stdout;
    MpErr e;
    if (npos > 1 || mp_card_is_run(argv[first])) {
        if ((rc = card_folder_flags(&ct, given)) != MP_CLI_GO) return rc;
        c.runs = (const char *const *)argv + first, c.n_runs = npos;
        if (mp_card_compare(&c, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    } else {
        c.probe.model_path = argv[first];
        if (mp_probe_opts_check(&c.probe, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
        if (mp_card_run(&c, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    }
    if (!quiet) card_report(c.probe.out);
    return MP_EXIT_OK;
}
