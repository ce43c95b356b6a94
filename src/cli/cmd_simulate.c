/* cmd_simulate.c — `maskpos simulate`: the parameter-free decoder by Monte Carlo (paper §4.1, §5.1).
 *
 *   maskpos simulate --alpha 0,0.2 --out results/sim       (paper Figure 2 settings by default)
 *   maskpos simulate --rope --alpha 0.5 --out D             (Figure 4)
 *   maskpos simulate --norm layernorm --scale d --out D     (appendix)
 *   maskpos simulate --layer-form recency --dim 16 --alpha 0.5 --batch 1000000   (the later
 *                    version's LayerNorm layer; recency probability per layer, docs/recency.md)
 * Per α it writes scores.npy, scores_se.npy, probs.npy, scores_diagnorm.npy and meta.json (into
 * DIR itself for one α, into DIR/alpha_<α>/ for several) and prints per-layer statistics.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"      /* mp_cli_* */
#include "job/sim_out.h"  /* mp_sim_write_outputs, mp_sim_print_stats */
#include "core/mpi.h"     /* under mpirun: the ranks share the blocks, rank 0 prints and writes */
#include "core/npy.h"     /* mp_npy_write (--dump-inputs) */
#include "core/util.h"    /* mp_parse_double_list */
#include "job/shared_opts.h" /* --seq, --seed, --threads: declared once */
#include "sim/simulate.h" /* MpSimConfig, mp_sim_run */
#include "viz/plot.h"      /* mp_plot_release */
#include "core/files.h" /* mp_outdir_claim, mp_outfile_claim: one run per --out */

/* The flags' values besides the config: cmd's outputs, and the alphas (one run each). */
typedef struct SimFlags {
    double alphas[32];
    int nalpha, plot, quiet, force;
    const char *scale_word, *out, *dump;
} SimFlags;

/* What the table fills: the config and the flags. */
typedef struct SimArgs {
    MpSimConfig cfg;
    SimFlags fl;
} SimArgs;

typedef enum SimOpt {
    SI_BATCH, SI_SEQ, SI_DIM, SI_LAYERS, SI_ALPHA, SI_NORM, SI_SCALE, SI_ROPE, SI_ROPE_THETA, SI_BIDIRECTIONAL, SI_LAYER_FORM,
    SI_RESIDUAL, SI_VARIANCE, SI_SEED, SI_THREADS, SI_OUT, SI_PLOT, SI_DUMP_INPUTS, SI_QUIET, SI_FORCE, SI_COUNT
} SimOpt;

/* --alpha A[,A...]: each in [0, 1). */
static int sim_set_alpha(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    SimFlags *fl = &((SimArgs *)cfg)->fl;
    fl->nalpha = mp_parse_double_list(v, fl->alphas, 32);
    if (fl->nalpha < 1) return mp_err_set(e, "--alpha: '%s' is not a comma-separated list of numbers", v);
    for (int i = 0; i < fl->nalpha; i++)
        if (!(fl->alphas[i] >= 0 && fl->alphas[i] < 1)) return mp_err_set(e, "--alpha: %g is outside [0, 1)", fl->alphas[i]);
    return MP_OK;
}

/* --scale: its word (the divisor follows --dim and --norm, after the flags). */
static int sim_check_scale(const char *v, MpErr *e) {
    if (strcmp(v, "1") && strcmp(v, "sqrt") && strcmp(v, "d")) return mp_err_set(e, "--scale: '%s' is not 1, sqrt or d", v);
    return MP_OK;
}

static const MpOptChoice sim_norms[] = {{"l2", MP_NORM_L2}, {"layernorm", MP_NORM_LAYERNORM}, {"none", MP_NORM_NONE}, {NULL, 0}};
static const MpOptChoice sim_forms[] = {{"paper", MP_SIM_FORM_PAPER}, {"recency", MP_SIM_FORM_RECENCY}, {NULL, 0}};
static const MpOptChoice sim_on_off[] = {{"on", 1}, {"off", 0}, {NULL, 0}};
_Static_assert(sizeof(MpNorm) == sizeof(int) && sizeof(MpSimForm) == sizeof(int), "choices set an int");

#define F(m) offsetof(SimArgs, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* declared once for every command (job/shared_opts.h) */
static const MpOpt simulate_opts[SI_COUNT] = {
    [SI_BATCH] = {MP_OPT_DECL("batch", MP_OPT_I64, "B", .help = "sequences (default 100000)", .lo = 1, .hi = INT64_C(1) << 40),
                  F(cfg.batch)},
    [SI_SEQ] = {S(SEQ), F(cfg.seq), MP_OPT_NARROW, .help = "positions (default 50)", .lo = 1, .hi = 4096},
    [SI_DIM] = {MP_OPT_DECL("dim", MP_OPT_INT, "D", .help = "width (default 64)", .lo = 1, .hi = 65536), F(cfg.dim)},
    [SI_LAYERS] = {MP_OPT_DECL("layers", MP_OPT_INT, "L", .help = "stacked layers (default 4)", .lo = 1, .hi = 64), F(cfg.layers)},
    [SI_ALPHA] = {MP_OPT_DECL("alpha", MP_OPT_CUSTOM, "A[,A...]", .help = "input correlation(s) in [0,1) (default 0)",
                              .set = sim_set_alpha), F(fl.alphas)},
    [SI_NORM] = {MP_OPT_DECL("norm", MP_OPT_CHOICE, "l2|layernorm|none",
                             .help = "row normalisation (default l2; layernorm has no affine, eps 1e-12)", .choices = sim_norms),
                 F(cfg.norm)},
    [SI_SCALE] = {MP_OPT_DECL("scale", MP_OPT_STRING, "1|sqrt|d", .help = "score divisor (default 1 for l2, sqrt for layernorm)",
                              .check = sim_check_scale), F(fl.scale_word)},
    [SI_ROPE] = {MP_OPT_DECL("rope", MP_OPT_BOOL, NULL,
                             .help = "rotate queries and keys (HF rotate-half, positions 0..S-1); values unrotated"), F(cfg.rope)},
    [SI_ROPE_THETA] = {MP_OPT_DECL("rope-theta", MP_OPT_DOUBLE, "T", .help = "RoPE base (default 10000)", .dlo = 1.0000001, .dhi = 1e12),
                       F(cfg.rope_theta)},
    [SI_BIDIRECTIONAL] = {MP_OPT_DECL("bidirectional", MP_OPT_BOOL, NULL, .help = "no causal mask (control)"), F(cfg.causal), MP_OPT_OFF},
    [SI_LAYER_FORM] = {MP_OPT_DECL("layer-form", MP_OPT_CHOICE, "paper|recency",
                                   .help = "paper (default): the layer above; recency: the later version's\n"
                                           "(\"LayerNorm Induces Recency Bias\"): x = (randn(S,D) + l randn(1,D))/sqrt(D),\n"
                                           "h = norm(x), scores h h^T/sqrt(D), X <- A h (+ X with --residual on); its\n"
                                           "defaults: --seq 10 --norm layernorm --residual off --scale sqrt. Also\n"
                                           "prints the recency probability (RP) per layer with its standard error:\n"
                                           "the share of triples j<k<i with score(i,k) > score(i,j) (docs/recency.md)",
                                   .choices = sim_forms), F(cfg.form)},
    [SI_RESIDUAL] = {MP_OPT_DECL("residual", MP_OPT_CHOICE, "on|off",
                                 .help = "add the layer's input to its output (default on; recency form: off)", .choices = sim_on_off),
                     F(cfg.residual)},
    [SI_VARIANCE] = {MP_OPT_DECL("variance", MP_OPT_BOOL, NULL,
                                 .help = "also the attention output's variance by position and its closed form\n"
                                         "sigma^2 sum_j a_ij^2 from each sequence's own weights, with standard errors\n"
                                         "(var_*.npy [L,S]; docs/metrics.md, \"Variance by position\")"),
                     F(cfg.variance)},
    [SI_SEED] = {S(SEED), F(cfg.seed), .arg = "N", .help = "random seed (default 0); results are bit-identical for any --threads"},
    [SI_THREADS] = {S(THREADS), F(cfg.threads)},
    [SI_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "DIR",
                            .help = "write scores.npy [L,S,S] (NaN where masked), scores_se.npy (standard\n"
                                    "errors), probs.npy (0 where masked), scores_diagnorm.npy, meta.json;\n"
                                    "into DIR for one alpha, DIR/alpha_<a>/ for several"), F(fl.out)},
    [SI_PLOT] = {MP_OPT_DECL("plot", MP_OPT_BOOL, NULL, .help = "also draw figures beside the .npy files (see maskpos plot)"),
                 F(fl.plot)},
    [SI_DUMP_INPUTS] = {MP_OPT_DECL("dump-inputs", MP_OPT_STRING, "F",
                                    .help = "debug: write the inputs x as float64 [B,S,D] .npy (B*S*D <= 5e7); an\n"
                                            "existing F is replaced only with --force"), F(fl.dump)},
    [SI_QUIET] = {MP_OPT_DECL("quiet", MP_OPT_BOOL, NULL, .help = "no progress bar and no tables (meta.json holds every statistic)"),
                  F(fl.quiet)},
    [SI_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL,
                              .help = "replace the outputs of an earlier run in --out (else such a folder is refused)"), F(fl.force)},
};
_Static_assert(sizeof simulate_opts / sizeof *simulate_opts == SI_COUNT, "one row per SimOpt");

static const MpOptTable simulate_table = {"simulate", simulate_opts, SI_COUNT, 21,
    "usage: maskpos simulate [options]\n"
    "\n"
    "Monte-Carlo run of the parameter-free decoder (no weights): per layer Y = norm(X),\n"
    "scores = q(Y)q(Y)^T / scale, A = softmax(mask(scores)), X <- A Y + X, with inputs\n"
    "x = normalize(randn(S,D) + l randn(1,D)), l = sqrt(a/(1-a)). Mean maps over B sequences.\n"
    "\n",
    "\n"
    "Printed per layer: NRI (non-relative index, docs/metrics.md), the range of the diagonal-\n"
    "normalised residue, and its rms in units of the per-entry standard error (~1 = noise).\n"
    "Under mpirun -np N (make MPI=1) the ranks share the blocks of 64 sequences and rank 0 writes the\n"
    "bytes of a one-process run; --threads is per rank (docs/mpi.md).\n"};

/* The flags (and the recency form's defaults) into a; MP_CLI_GO, or the exit status of a refusal
 * or of --help. */
static int simulate_flags(SimArgs *a, int argc, char **argv) {
    const char *cmd = "simulate";
    int given[SI_COUNT], first;
    const int rc = mp_cli_parse(&simulate_table, a, argc, argv, &first, given);
    if (rc != MP_CLI_GO) return rc;
    MpSimConfig *cfg = &a->cfg;
    SimFlags *fl = &a->fl;
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    if (cfg->form == MP_SIM_FORM_RECENCY) { /* the later version's defaults */
        if (!given[SI_SEQ]) cfg->seq = 10;
        if (!given[SI_NORM]) cfg->norm = MP_NORM_LAYERNORM;
        if (!given[SI_RESIDUAL]) cfg->residual = 0;
        if (!given[SI_SCALE]) fl->scale_word = "sqrt";
    }
    if (!fl->scale_word) fl->scale_word = cfg->norm == MP_NORM_L2 ? "1" : "sqrt";
    cfg->scale = mp_sim_scale_value(fl->scale_word, cfg->dim);
    return MP_CLI_GO;
}

/* Several alphas go into DIR/alpha_<%g>: two alphas with one name would write one folder twice. */
static int simulate_alpha_names(const SimFlags *fl) {
    for (int i = 0; fl->nalpha > 1 && i < fl->nalpha; i++)
        for (int j = 0; j < i; j++) {
            char a[64], b[64];
            snprintf(a, sizeof a, "alpha_%g", fl->alphas[i]);
            snprintf(b, sizeof b, "alpha_%g", fl->alphas[j]);
            if (!strcmp(a, b))
                return mp_cli_error("simulate",
                                    "--alpha: %.17g and %.17g would both be written to %s/%s; HINT: give alphas that "
                                    "differ within 6 significant digits",
                                    fl->alphas[j], fl->alphas[i], fl->out, a);
        }
    return MP_EXIT_OK;
}

/* --dump-inputs: the inputs x of every sequence as float64 [B,S,D]. */
static int simulate_dump(const MpSimConfig *cfg, const SimFlags *fl) {
    const char *cmd = "simulate";
    MpErr e;
    size_t n;
    if (mp_size_mul((size_t)cfg->batch, (size_t)cfg->seq * cfg->dim, &n) != MP_OK || n > 50000000)
        return mp_cli_error(cmd, "--dump-inputs: B*S*D = %lld*%d*%d is over the 5e7 limit",
                            (long long)cfg->batch, cfg->seq, cfg->dim);
    if (fl->nalpha != 1) return mp_cli_error(cmd, "--dump-inputs takes a single --alpha");
    double *x = mp_malloc_or_die(n * sizeof(double), "inputs");
    for (int64_t b = 0; b < cfg->batch; b++) mp_sim_sequence_input(x + (size_t)b * cfg->seq * cfg->dim, cfg, b);
    int64_t shp[3] = {cfg->batch, cfg->seq, cfg->dim};
    int rc = mp_npy_write(fl->dump, MP_DT_F64, x, 3, shp, &e);
    free(x);
    return rc != MP_OK ? mp_cli_error(cmd, "%s", e.msg) : MP_EXIT_OK;
}

static void simulate_banner(const MpSimConfig *cfg, const char *scale_word) {
    printf("simulate: B=%lld S=%d D=%d L=%d norm=%s scale=%s (%g) %s rope=%s seed=%llu", (long long)cfg->batch,
           cfg->seq, cfg->dim, cfg->layers, mp_sim_norm_name(cfg->norm), scale_word, cfg->scale,
           cfg->causal ? "causal" : "bidirectional", cfg->rope ? "on" : "off", (unsigned long long)cfg->seed);
    if (cfg->form == MP_SIM_FORM_RECENCY) printf(" form=recency residual=%s", cfg->residual ? "on" : "off");
    else if (!cfg->residual) printf(" residual=off");
    printf("\n");
    if (mp_mpi_size() > 1) printf("MPI: %d ranks share the blocks of %d sequences\n", mp_mpi_size(), 64);
}

int mp_cmd_simulate(int argc, char **argv) {
    const char *cmd = "simulate";
    SimArgs args = {.fl = {.nalpha = 1}};
    mp_sim_config_default(&args.cfg);
    int rc = simulate_flags(&args, argc, argv);
    if (rc != MP_CLI_GO) return rc;
    MpSimConfig cfg = args.cfg;
    const SimFlags fl = args.fl;
    rc = MP_EXIT_OK;
    cfg.progress = !fl.quiet;
    cfg.mpi = 1; /* under mpirun: every rank runs its share of the blocks */
    const int rank = mp_mpi_rank();
    if (fl.plot && !fl.out) return mp_cli_error(cmd, "--plot needs --out DIR");
    MpErr e;
    cfg.alpha = fl.alphas[0];
    if (mp_sim_config_check(&cfg, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    if (fl.out && (rc = simulate_alpha_names(&fl)) != MP_EXIT_OK) return rc;
    /* one run per folder (and the --dump-inputs file), claimed by rank 0 (the writer) before the
     * compute; every rank leaves together when it is refused */
    int claimed = rank != 0 ||
                  !fl.out || mp_outdir_claim(fl.out, "simulate", fl.force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) == MP_OK;
    if (claimed && rank == 0 && fl.dump && mp_outfile_claim(fl.dump, fl.force, &e) != MP_OK)
        claimed = mp_err_prefix(&e, "--dump-inputs") == MP_OK;
    if (!mp_mpi_agree(claimed)) return claimed ? MP_EXIT_ERROR : mp_cli_error(cmd, "%s", e.msg);
    if (fl.dump && rank == 0 && (rc = simulate_dump(&cfg, &fl)) != MP_EXIT_OK) return rc;
    simulate_banner(&cfg, fl.scale_word);
    for (int ai = 0; ai < fl.nalpha && rc == MP_EXIT_OK; ai++) {
        cfg.alpha = fl.alphas[ai];
        MpSimResult res;
        if (mp_sim_run(&res, &cfg, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
        if (rank > 0) { /* rank 0 holds the maps */
            mp_sim_result_free(&res);
            continue;
        }
        printf("\nalpha = %g: %.2f s\n", cfg.alpha, res.wall_s);
        if (!fl.quiet) { /* --quiet: no tables (meta.json holds every statistic) */
            mp_sim_print_stats(stdout, res.stats, res.layers);
            if (res.rp) mp_sim_print_recency(stdout, &res);
        }
        if (fl.out) {
            char dir[4096];
            if (fl.nalpha == 1) snprintf(dir, sizeof dir, "%s", fl.out);
            else snprintf(dir, sizeof dir, "%s/alpha_%g", fl.out, cfg.alpha);
            if (mp_sim_write_outputs(dir, &cfg, fl.scale_word, &res, fl.plot, argc, argv, &e) != MP_OK)
                rc = mp_cli_error(cmd, "%s", e.msg);
            else
                printf("wrote %s/{scores,scores_se,probs,scores_diagnorm%s}.npy, meta.json%s\n", dir,
                       cfg.variance ? ",var_attn,var_attn_se,var_closed,var_closed_se,var_gap_se" : "", fl.plot ? ", scores.png" : "");
        }
        mp_sim_result_free(&res);
    }
    if (fl.plot) mp_plot_release();
    return rc;
}
