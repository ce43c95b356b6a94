/* cmd_reproduce.c — `maskpos reproduce`: the paper's experiments in one command, a thin front end of
 * the repro library (src/repro/repro.h: the stages, their figures and verdicts, the report).
 *
 *   maskpos reproduce --out results/            paper settings (B = 100000, S = 50, d = 64)
 *   maskpos reproduce --quick --out results/    B = 2000 and 400 model sequences, for CI
 *   maskpos reproduce --only fig1,fig4
 *   maskpos reproduce --model ~/Llama-3.1-8B --data docs.jsonl --n 100 --seq 1024
 * This file parses the flags, checks --model/--data before minutes of stages, claims the output
 * folder, hands the library what only the command line can do (sharing the probes with the other
 * ranks under mpirun: MpReproHost), and prints the summary.
 * Exit status: 0 all stages ran, 1 a stage failed (the others still ran), 2 bad flags.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"      /* mp_cli_* */
#include "cli/mpi_job.h"  /* mp_cli_mpi_share: probe stages under mpirun */
#include "core/files.h"   /* mp_outdir_claim */
#include "core/mpi.h"     /* mp_mpi_size */
#include "core/util.h"    /* mp_file_exists, mp_input_open */
#include "job/shared_opts.h" /* the corpus flags, --seed, --threads, --compute: declared once */
#include "load/model.h"   /* --model: opened before the stages */
#include "model/fwd.h"    /* mp_fwd_compute_name: --compute's word */
#include "repro/repro.h"  /* mp_repro_run */
#include "repro/store.h"  /* mp_repro_models_ok, mp_repro_models_dir, mp_repro_stories_path */
#include "tok/tok.h"      /* mp_tok_init: --model's tokenizer, checked before the stages */

/* The flags' values: the run's config and what the command turns into it. */
typedef struct ReproFlags {
    MpReproConfig cfg;
    const char *only, *models;
    int compute; /* MpFwdCompute, into cfg.compute's word */
} ReproFlags;

typedef enum ReproOpt {
    RE_OUT, RE_QUICK, RE_ONLY, RE_FORCE, RE_BATCH, RE_SEED, RE_THREADS, RE_COMPUTE, RE_DEVICE, RE_STORIES_N, RE_MODELS, RE_N, RE_MODEL,
    RE_DATA, RE_SEQ, RE_PACK, RE_COUNT
} ReproOpt;

#define F(m) offsetof(ReproFlags, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* declared once for every command (job/shared_opts.h) */
static const MpOpt reproduce_opts[RE_COUNT] = {
    [RE_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "DIR", .help = "output folder (default results)"), F(cfg.out)},
    [RE_QUICK] = {MP_OPT_DECL("quick", MP_OPT_BOOL, NULL,
                              .help = "B = 2000 simulated sequences instead of 100000 and 100 model sequences\n"
                                      "instead of 1000 (for CI; verdicts use the run's own standard errors)"), F(cfg.quick)},
    [RE_ONLY] = {MP_OPT_DECL("only", MP_OPT_STRING, "LIST",
                             .help = "comma-separated stages: fig1, fig2, fig2ln, fig3, fig4, fig5 (default: all)\n"
                                     "and recency (the later version's LayerNorm-recency grid, docs/recency.md),\n"
                                     "length (RP, block z and NRI of every prefix of the embedded models' rows and\n"
                                     "of stories260K's own stories)\n"
                                     "and stories (Figure 5 on the pretrained stories260K)\n"
                                     "and beyond (issue 38: variance by position, RoPE frequency usage, position probes)"), F(only)},
    [RE_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL, .help = "recompute stages whose outputs already match the settings"),
                  F(cfg.force)},
    [RE_BATCH] = {MP_OPT_DECL("batch", MP_OPT_I64, "B", .help = "override the number of simulated sequences", .lo = 1,
                              .hi = INT64_C(1) << 40), F(cfg.batch_flag)},
    [RE_SEED] = {S(SEED), F(cfg.base.seed), .arg = "N", .help = "random seed (default 0)"},
    [RE_THREADS] = {S(THREADS), F(cfg.base.threads)},
    [RE_COMPUTE] = {S(COMPUTE), F(compute), .arg = "M",
                    .help = "f32 (default, the reference) or bf16 for every model probe (docs/speed.md)"},
    [RE_DEVICE] = {S(DEVICE), F(cfg.device), .arg = "D",
                   .help = "the model probes' forward pass: cpu (default) or cuda[:N] (make CUDA=1;\n"
                           "docs/cuda.md); the simulations run on the CPU"},
    [RE_STORIES_N] = {MP_OPT_DECL("stories-n", MP_OPT_I64, "N",
                                  .help = "sequences of the stories stage (Figure 5 on the pretrained stories260K over\n"
                                          "N x 512 tokens it writes itself from BOS; default 1000, --quick 32)",
                                  .lo = 2, .hi = INT64_C(1) << 24), F(cfg.stories_n)},
    [RE_MODELS] = {MP_OPT_DECL("models", MP_OPT_STRING, "DIR",
                               .help = "the embedded models and their corpus (none/, rope/, kjv.txt; default:\n"
                                       "MASKPOS_MODELS, else models/ beside the build folder, else ./models)"), F(models)},
    /* the model probes' N and S: standard errors need N >= 2, a map S >= 2 */
    [RE_N] = {S(N), F(cfg.model_n), MP_OPT_NARROW, .lo = 2, .hi = INT64_C(1) << 31,
              .help = "sequences of the model probes (default: embedded models 8000 x 128 bytes, the\n"
                      "paper's 1000 x 1024 tokens; --model 1000; --quick 400 and 100)"},
    [RE_MODEL] = {MP_OPT_DECL("model", MP_OPT_STRING, "PATH", .help = "an HF directory or .gguf file `maskpos probe` reads"),
                  F(cfg.model),
                  .before = "Figure 5 on your own checkpoint instead of the embedded RoPE model (stage fig5; --only fig5 runs\n"
                            "that alone), with its own measured rows (those of stories260K):\n"},
    [RE_DATA] = {S(DATA), F(cfg.data), .arg = "FILE",
                 .help = "its corpus: .jsonl, text with blank-line separated documents, or a folder of\n"
                         ".txt (`maskpos probe --data`), tokenized with the model's own tokenizer"},
    [RE_SEQ] = {S(SEQ), F(cfg.model_seq), MP_OPT_NARROW, .lo = 2, .hi = 1 << 20,
                .help = "tokens per sequence (default 1024 or the model's context, if shorter)"},
    [RE_PACK] = {S(PACK), F(cfg.pack)},
};
_Static_assert(sizeof reproduce_opts / sizeof *reproduce_opts == RE_COUNT, "one row per ReproOpt");

static const MpOptTable reproduce_table = {"reproduce", reproduce_opts, RE_COUNT, 16,
    "usage: maskpos reproduce [--out DIR] [--quick] [--only LIST] [--force] [--batch B]\n"
    "                         [--seed N] [--threads N] [--models DIR] [--compute f32|bf16]\n"
    "                         [--device cpu|cuda[:N]]\n"
    "                         [--stories-n N]\n"
    "                         [--model PATH --data FILE [--n N] [--seq S] [--pack]]\n"
    "\n"
    "Runs the paper's experiments (paper.md §2) and writes their .npy/meta.json outputs,\n"
    "figures, and DIR/report.md + DIR/report.html with an expected-vs-measured table.\n"
    "\n",
    "Under mpirun -np N (make MPI=1) every model probe is shared among the ranks, with the bytes of\n"
    "a one-process run; the other stages run on rank 0 (docs/mpi.md).\n"};

/* --model and --data are opened before any stage runs: a bad model fails in a second with exit 2,
 * not after minutes of the other stages. */
static int repro_check_inputs(const char *cmd, const char *model, const char *data, int seq_user) {
    MpModel m;
    MpErr e;
    if (mp_model_open(&m, model, &e) != MP_OK) return mp_cli_error(cmd, "--model: %s", e.msg);
    /* the S the fig5 stage will use (as below): past the trained context is for probe --allow-long */
    const int seq = seq_user ? seq_user : m.max_pos > 0 && m.max_pos < 1024 ? m.max_pos : 1024;
    int beyond = 0;
    int rc = mp_model_check_finite(&m, m.n_layers < 4 ? m.n_layers : 4, &e) == MP_OK &&
                     mp_model_context_check(&m, seq, 0, &beyond, &e) == MP_OK
                 ? MP_EXIT_OK
                 : mp_cli_error(cmd, "--model: %s", e.msg);
    mp_model_free(&m);
    if (rc != MP_EXIT_OK) return rc;
    MpTok t; /* --data is tokenized with the model's own tokenizer (stage fig5) */
    if (mp_tok_init(&t, model, &e) != MP_OK) return mp_cli_error(cmd, "--model: %s", e.msg);
    mp_tok_free(&t);
    struct stat st;
    if (stat(data, &st) == 0 && S_ISDIR(st.st_mode)) return MP_EXIT_OK; /* a folder of .txt files */
    FILE *f = mp_input_open(data, NULL, &e);
    if (!f) return mp_cli_error(cmd, "--data: %s", e.msg);
    fclose(f);
    return MP_EXIT_OK;
}

/* --only LIST: the bit of every stage named; MP_EXIT_ERROR on a name that is no stage. */
static int parse_only(const char *cmd, const char *only, uint32_t *mask) {
    char buf[256], names[256] = "";
    for (int k = 0; mp_repro_stage_name(k); k++) {
        size_t n = strlen(names);
        snprintf(names + n, sizeof names - n, "%s%s", k ? ", " : "", mp_repro_stage_name(k));
    }
    if (strlen(only) >= sizeof buf) return mp_cli_error(cmd, "--only: list too long");
    strcpy(buf, only);
    *mask = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const int k = mp_repro_stage_find(t);
        if (k < 0) return mp_cli_error(cmd, "--only: unknown stage '%s' (%s)", t, names);
        *mask |= 1u << k;
    }
    if (!*mask) return mp_cli_error(cmd, "--only: '%s' names no stage (%s)", only, names);
    return MP_EXIT_OK;
}

/* Paths the configuration points into (one reproduce per process). */
static char models_buf[4096], stories_buf[4096];

/* Flags into cfg; MP_CLI_GO, or the exit status (2 bad flags; 0 after --help). */
static int reproduce_flags(MpReproConfig *cfg, int argc, char **argv) {
    const char *cmd = "reproduce";
    ReproFlags fl = {.cfg = *cfg, .compute = MP_FWD_COMPUTE_F32};
    int first;
    const int prc = mp_cli_parse(&reproduce_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    *cfg = fl.cfg;
    cfg->compute = mp_fwd_compute_name(fl.compute);
    const char *only = fl.only, *models_flag = fl.models;
    const char *model = cfg->model, *data = cfg->data;
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    if (!model != !data) return mp_cli_error(cmd, "--model PATH and --data FILE go together");
    if (!model && (cfg->model_seq || cfg->pack)) return mp_cli_error(cmd, "--seq and --pack go with --model and --data");
    if (model && !mp_file_exists(model)) return mp_cli_error(cmd, "--model %s: no such file or directory", model);
    if (data && !mp_file_exists(data)) return mp_cli_error(cmd, "--data %s: no such file or directory", data);
    if (model && repro_check_inputs(cmd, model, data, cfg->model_seq) != MP_EXIT_OK) return MP_EXIT_ERROR; /* before minutes of stages */
    if (models_flag) {
        if (strlen(models_flag) >= sizeof models_buf) return mp_cli_error(cmd, "--models: path too long");
        snprintf(models_buf, sizeof models_buf, "%s", models_flag);
        if (!mp_repro_models_ok(models_buf))
            return mp_cli_error(cmd, "--models %s: no none/config.json, rope/config.json and kjv.txt there", models_flag);
        cfg->models = models_buf;
    } else if (mp_repro_models_dir(models_buf, sizeof models_buf))
        cfg->models = models_buf;
    if (mp_repro_stories_path(stories_buf, sizeof stories_buf)) cfg->stories = stories_buf;
    cfg->stages = ~0u;
    if (only && parse_only(cmd, only, &cfg->stages) != MP_EXIT_OK) return MP_EXIT_ERROR;
    cfg->base.batch = cfg->batch_flag ? cfg->batch_flag : cfg->quick ? 2000 : 100000;
    cfg->base.progress = 1;
    return MP_CLI_GO;
}

int mp_cmd_reproduce(int argc, char **argv) {
    MpReproConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    mp_sim_config_default(&cfg.base);
    cfg.out = "results";
    cfg.compute = "f32";
    cfg.argc = argc;
    cfg.argv = argv;
    /* under mpirun the probes are shared with the other ranks */
    cfg.host = (MpReproHost){.share = mp_mpi_size() > 1 ? mp_cli_mpi_share : NULL};
    const int rc = reproduce_flags(&cfg, argc, argv);
    if (rc != MP_CLI_GO) return rc;
    MpErr e;
    /* a re-run continues the same folder (stages whose settings match are reused); --force
     * starts it over; another command's outputs or a foreign folder are refused */
    if (mp_outdir_claim(cfg.out, "reproduce", cfg.force ? MP_OUTDIR_FORCE : MP_OUTDIR_CONTINUE, &e) != MP_OK)
        return mp_cli_error("reproduce", "%s", e.msg);
    MpReproSummary sum;
    if (mp_repro_run(&sum, &cfg, &e) != MP_OK) return mp_cli_error("reproduce", "%s", e.msg);
    if (sum.no_space) return MP_EXIT_FAILED; /* the failed write said so; the run stopped there, no report */
    printf("report: %s/report.md and report.html (%d of %d rows agree with paper.md); total %.1f s\n", cfg.out, sum.npass,
           sum.nrows, sum.wall_s);
    return sum.failed ? MP_EXIT_FAILED : MP_EXIT_OK;
}
