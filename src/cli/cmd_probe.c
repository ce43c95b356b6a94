/* cmd_probe.c — `maskpos probe`: mean pre-softmax attention-score maps of a real model over a corpus
 * of token ids (paper §5.2, Figure 5), with counterfactuals (no mask, no RoPE).
 *
 *   maskpos probe MODEL --tokens ids.npy --seq 1024 --n 1000 --layers 1-4 --out results/llama
 * Parses the flags into an MpProbeConfig through the probe's option table (job/probe_opts.h: the
 * getopt rows, values, messages and the options' --help lines come from it), runs mp_probe_run (src/job/probe_job.h: the loop over
 * sequences, checkpoints, the statistics), prints its tables and writes the folder with
 * mp_probe_result_write: scores.npy, scores_diagnorm.npy, scores_se.npy (standard errors),
 * optional scores_heads.npy and meta.json. --checkpoint-every K / --resume make long runs
 * restartable with bit-identical results.
 * Under mpirun (N ranks) the sequences are shared out by model/probe_ranks.c; rank 0 alone prints,
 * checkpoints and writes (docs/mpi.md).
 */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"        /* mp_cli_* */
#include "core/files.h"     /* MP_OUTDIR_* */
#include "core/mpi.h"       /* mp_mpi_rank, mp_mpi_size: under mpirun */
#include "core/progress.h"  /* MpProgress */
#include "core/json.h"      /* mp_json_read: the files meta.json lists */
#include "core/util.h"      /* mp_time_now, mp_peak_rss_bytes, mp_path_join */
#include "job/probe_job.h"      /* mp_probe_run, mp_probe_result_print, mp_probe_result_write */
#include "job/probe_opts.h" /* mp_probe_opts: the flags, their values and checks */

/* --help: this text, the option rows of the table (job/probe_opts.h), probe_help_end. */
static const char probe_help[] =
    "usage: maskpos probe MODEL --tokens FILE --out DIR [options]\n"
    "       maskpos probe MODEL --data TEXT --n N --seq S --out DIR [options]\n"
    "\n"
    "Runs MODEL (an HF directory or a .gguf file) over N token sequences and averages, per layer,\n"
    "the pre-softmax attention scores q.k/sqrt(head_dim) (RoPE applied, qwen3 q/k norm applied,\n"
    "causal mask) over sequences and heads. Only the layers up to the deepest one asked for are\n"
    "loaded and run. Computation is f32 with f32 accumulation (--compute bf16: see below); maps are\n"
    "summed in double.\n"
    "\n";

static const char probe_help_end[] =
    "\n"
    "Printed: the expected peak memory before starting; per layer the NRI (non-relative index,\n"
    "docs/metrics.md) and the range and rms of the diagonal-normalised residue; tokens/s.\n"
    "Bad input (malformed token file, ids >= vocab, N = 0, bad flags): one-line error, exit 2.\n"
    "Under mpirun -np N (make MPI=1) the ranks share the sequences and rank 0 writes the bytes of a\n"
    "one-process run; --threads is per rank (docs/mpi.md).\n";

/* The progress bar of the run: tokens, labelled with the sequence count. */
typedef struct ProbeBar {
    MpProgress pg;
    const MpProbeResult *res; /* S and first are set before the first call */
    int started;
} ProbeBar;

static int probe_bar(void *ctx, int64_t done, int64_t total) {
    ProbeBar *b = ctx;
    const int64_t S = b->res->S;
    if (!b->started) {
        mp_progress_init(&b->pg, "probe", "tok", (total - done) * S);
        b->started = 1;
        return 0;
    }
    snprintf(b->pg.label, sizeof b->pg.label, "probe: seq %lld/%lld", (long long)done, (long long)total);
    mp_progress_update(&b->pg, (done - b->res->first) * S);
    return 0;
}

/* "wrote DIR/: every file meta.json lists, meta.json" (read back from the folder, so the line and
 * meta.json's files agree), then the figure's colour limits. */
static void probe_wrote(const char *out, int plot) {
    char path[4096];
    MpErr e;
    json_t *m = mp_path_join(path, sizeof path, out, "meta.json", &e) == MP_OK ? mp_json_read(path, &e) : NULL;
    const json_t *files = m ? json_object_get(m, "files") : NULL;
    printf("wrote %s/:", out);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)files, k, v) printf(" %s,", k);
    printf(" meta.json (peak RSS %.1f MiB)\n", mp_peak_rss_bytes() / 1048576.0);
    const char *fig = plot && files ? json_string_value(json_object_get(files, "scores_diagnorm.png")) : NULL;
    if (fig) printf("scores_diagnorm.png: %s\n", fig + (strncmp(fig, "figure: ", 8) ? 0 : 8));
    if (m) json_decref(m);
}

/* After the run: the speed (and the MPI figures), the tables, the folder; with --quiet nothing
 * on stdout (a warning of too few sequences goes to stderr). */
static int probe_report(const char *cmd, const MpProbeResult *res, const char *out, int plot, int quiet, double t_start,
                        int argc, char **argv) {
    const int64_t ran = res->n - res->first;
    const double toks = (double)ran * res->S, cs = res->compute_s;
    if (!quiet) {
        printf("ran %lld sequence%s (%.0f tokens) in %.2f s: %.1f tokens/s, %.2f GFLOP/s\n", (long long)ran,
               ran == 1 ? "" : "s", toks, cs, cs > 0 ? toks / cs : 0.0, cs > 0 ? res->gflop / cs : 0.0);
        if (res->nranks > 1)
            printf("MPI: %d ranks; rank 0 received %lld sequences (%.1f MiB) in %.3f s and merged them in %.3f s\n",
                   res->nranks, (long long)res->ranks.received, res->ranks.bytes / 1048576.0, res->ranks.wait_s,
                   res->ranks.merge_s);
        mp_probe_result_print(stdout, res);
    } else {
        char w[512];
        if (mp_probe_n_warning(w, sizeof w, res->n)[0]) fprintf(stderr, "maskpos %s: warning: %s\n", cmd, w);
    }
    MpErr e;
    const MpJobWriteOptions wo = {.plot = plot, .argc = argc, .argv = argv, .wall_s = mp_time_now() - t_start};
    if (mp_probe_result_write(res, out, &wo, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    if (!quiet) probe_wrote(out, plot);
    return MP_EXIT_OK;
}

/* The probe's table (job/probe_opts.h: the rows, shared with the C API, reproduce and MPI ranks)
 * with the prose of its --help. */
static const MpOptTable probe_table = {"probe", mp_probe_opts, MP_PROBE_OPT_COUNT, 23, probe_help, probe_help_end};

/* The flags into c (the rows' values, then the checks across options); MP_CLI_GO, or the exit
 * status of a refusal or of --help. */
static int probe_flags(MpProbeConfig *c, int *plot, int *quiet, int argc, char **argv) {
    const char *cmd = "probe";
    int given[MP_PROBE_OPT_COUNT], first;
    const int rc = mp_cli_parse(&probe_table, c, argc, argv, &first, given);
    if (rc != MP_CLI_GO) return rc;
    *plot = given[MP_PROBE_OPT_PLOT] > 0, *quiet = given[MP_PROBE_OPT_QUIET] > 0;
    MpErr e;
    if (first >= argc) return mp_cli_error(cmd, "no MODEL given (see 'maskpos probe --help')");
    mp_probe_opt_set(c, MP_PROBE_OPT_MODEL, argv[first++], &e);
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    if (mp_probe_opts_check(c, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    if (!c->out) return mp_cli_error(cmd, "--out DIR is required");
    if (c->resume && given[MP_PROBE_OPT_FORCE]) /* (issue 40: accepted, and --resume won without a word) */
        return mp_cli_error(cmd, "--force and --resume contradict each other: --resume continues the folder's run, "
                                 "--force replaces it; HINT: give one of them");
    c->out_mode = c->resume ? MP_OUTDIR_RESUME : given[MP_PROBE_OPT_FORCE] ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    return MP_CLI_GO;
}

int mp_cmd_probe(int argc, char **argv) {
    const char *cmd = "probe";
    const double t_start = mp_time_now();
    MpProbeConfig c;
    mp_probe_config_init(&c);
    int plot = 0, quiet = 0;
    int rc = probe_flags(&c, &plot, &quiet, argc, argv);
    if (rc != MP_CLI_GO) return rc;
    rc = MP_EXIT_OK; /* the ranks but 0 (under mpirun) return it as it is */
    MpProbeResult res;
    ProbeBar bar = {.res = &res};
    /* --quiet: the set-up lines go nowhere (its warnings, which the job prints to stderr when it has a
     * log, still show) */
    FILE *sink = quiet ? fopen("/dev/null", "w") : NULL;
    c.log = quiet ? sink : stdout;
    if (!quiet && mp_mpi_rank() == 0) {
        c.progress = probe_bar;
        c.progress_ctx = &bar;
    }
    MpErr e;
    if (mp_probe_run(&res, &c, &e) != MP_OK) {
        if (sink) fclose(sink);
        if (!e.msg[0]) return MP_EXIT_ERROR; /* another rank said why */
        return mp_cli_error(cmd, "%s", e.msg);
    }
    if (bar.started) mp_progress_finish(&bar.pg);
    if (mp_mpi_rank() == 0) rc = probe_report(cmd, &res, c.out, plot, quiet, t_start, argc, argv);
    mp_probe_result_free(&res);
    if (sink) fclose(sink);
    return rc;
}
