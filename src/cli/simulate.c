/* simulate.c — `maskpos simulate`: the parameter-free decoder by Monte Carlo (paper §4.1, §5.1).
 *
 *   maskpos simulate --alpha 0,0.2 --out results/sim       (paper Figure 2 settings by default)
 *   maskpos simulate --rope --alpha 0.5 --out D             (Figure 4)
 *   maskpos simulate --norm layernorm --scale d --out D     (appendix)
 *   maskpos simulate --layer-form recency --dim 16 --alpha 0.5 --batch 1000000   (the later
 *                    version's LayerNorm layer; recency probability per layer, docs/recency.md)
 * Per α it writes scores.npy, scores_se.npy, probs.npy, scores_diagnorm.npy and meta.json (into
 * DIR itself for one α, into DIR/alpha_<α>/ for several) and prints per-layer statistics.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"      /* mp_cli_* */
#include "job/sim_out.h"  /* mp_sim_write_outputs, mp_sim_print_stats */
#include "core/mpi.h"     /* under mpirun: the ranks share the blocks, rank 0 prints and writes */
#include "core/npy.h"     /* mp_npy_write (--dump-inputs) */
#include "core/util.h"    /* mp_parse_double_list */
#include "sim/simulate.h" /* MpSimConfig, mp_sim_run */
#include "viz/plot.h"      /* mp_plot_release */
#include "core/files.h" /* mp_outdir_claim, mp_outfile_claim: one run per --out */

static const char *simulate_help =
    "usage: maskpos simulate [options]\n"
    "\n"
    "Monte-Carlo run of the parameter-free decoder (no weights): per layer Y = norm(X),\n"
    "scores = q(Y)q(Y)^T / scale, A = softmax(mask(scores)), X <- A Y + X, with inputs\n"
    "x = normalize(randn(S,D) + l randn(1,D)), l = sqrt(a/(1-a)). Mean maps over B sequences.\n"
    "\n"
    "  --batch B          sequences (default 100000)\n"
    "  --seq S            positions (default 50)\n"
    "  --dim D            width (default 64)\n"
    "  --layers L         stacked layers (default 4)\n"
    "  --alpha A[,A...]   input correlation(s) in [0,1) (default 0)\n"
    "  --norm l2|layernorm|none  row normalisation (default l2; layernorm has no affine, eps 1e-12)\n"
    "  --scale 1|sqrt|d   score divisor (default 1 for l2, sqrt for layernorm)\n"
    "  --rope             rotate queries and keys (HF rotate-half, positions 0..S-1); values unrotated\n"
    "  --rope-theta T     RoPE base (default 10000)\n"
    "  --bidirectional    no causal mask (control)\n"
    "  --layer-form paper|recency  paper (default): the layer above; recency: the later version's\n"
    "                     (\"LayerNorm Induces Recency Bias\"): x = (randn(S,D) + l randn(1,D))/sqrt(D),\n"
    "                     h = norm(x), scores h h^T/sqrt(D), X <- A h (+ X with --residual on); its\n"
    "                     defaults: --seq 10 --norm layernorm --residual off --scale sqrt. Also\n"
    "                     prints the recency probability (RP) per layer with its standard error:\n"
    "                     the share of triples j<k<i with score(i,k) > score(i,j) (docs/recency.md)\n"
    "  --residual on|off  add the layer's input to its output (default on; recency form: off)\n"
    "  --seed N           random seed (default 0); results are bit-identical for any --threads\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --out DIR          write scores.npy [L,S,S] (NaN where masked), scores_se.npy (standard\n"
    "                     errors), probs.npy (0 where masked), scores_diagnorm.npy, meta.json;\n"
    "                     into DIR for one alpha, DIR/alpha_<a>/ for several\n"
    "  --plot             also draw figures beside the .npy files (see maskpos plot)\n"
    "  --dump-inputs F    debug: write the inputs x as float64 [B,S,D] .npy (B*S*D <= 5e7); an\n"
    "                     existing F is replaced only with --force\n"
    "  --quiet            no progress bar and no tables (meta.json holds every statistic)\n"
    "  --force            replace the outputs of an earlier run in --out (else such a folder is refused)\n"
    "\n"
    "Printed per layer: NRI (non-relative index, docs/metrics.md), the range of the diagonal-\n"
    "normalised residue, and its rms in units of the per-entry standard error (~1 = noise).\n"
    "Under mpirun -np N (make MPI=1) the ranks share the blocks of 64 sequences and rank 0 writes the\n"
    "bytes of a one-process run; --threads is per rank (docs/mpi.md).\n";

/* The flags (and cmd's form defaults) into cfg; MP_EXIT_OK, or the exit status of a refusal (or
 * of --help: *done = 1). */
typedef struct SimFlags {
    double alphas[32];
    int nalpha, plot, quiet, force, done;
    const char *scale_word, *out, *dump;
} SimFlags;

static int simulate_flags(MpSimConfig *cfg, SimFlags *fl, int argc, char **argv) {
    const char *cmd = "simulate";
    int scale_set = 0, seq_set = 0, norm_set = 0, resid_set = 0;
    static const struct option opts[] = {
        {"batch", required_argument, 0, 'B'},  {"seq", required_argument, 0, 'S'},
        {"dim", required_argument, 0, 'D'},    {"layers", required_argument, 0, 'L'},
        {"alpha", required_argument, 0, 'a'},  {"norm", required_argument, 0, 'n'},
        {"scale", required_argument, 0, 's'},  {"rope", no_argument, 0, 'r'},
        {"rope-theta", required_argument, 0, 't'}, {"bidirectional", no_argument, 0, 'b'},
        {"seed", required_argument, 0, 'e'},   {"threads", required_argument, 0, 'j'},
        {"out", required_argument, 0, 'o'},    {"plot", no_argument, 0, 'p'},
        {"dump-inputs", required_argument, 0, 'd'}, {"quiet", no_argument, 0, 'q'},
        {"force", no_argument, 0, 'f'},
        {"layer-form", required_argument, 0, 'F'}, {"residual", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'B': cfg->batch = mp_cli_i64(cmd, "--batch", optarg, 1, INT64_C(1) << 40); break;
        case 'S':
            cfg->seq = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 4096);
            seq_set = 1;
            break;
        case 'D': cfg->dim = (int)mp_cli_i64(cmd, "--dim", optarg, 1, 65536); break;
        case 'L': cfg->layers = (int)mp_cli_i64(cmd, "--layers", optarg, 1, 64); break;
        case 'a':
            fl->nalpha = mp_parse_double_list(optarg, fl->alphas, 32);
            if (fl->nalpha < 1) return mp_cli_error(cmd, "--alpha: '%s' is not a comma-separated list of numbers", optarg);
            for (int i = 0; i < fl->nalpha; i++)
                if (!(fl->alphas[i] >= 0 && fl->alphas[i] < 1))
                    return mp_cli_error(cmd, "--alpha: %g is outside [0, 1)", fl->alphas[i]);
            break;
        case 'n':
            if (!strcmp(optarg, "l2")) cfg->norm = MP_NORM_L2;
            else if (!strcmp(optarg, "layernorm")) cfg->norm = MP_NORM_LAYERNORM;
            else if (!strcmp(optarg, "none")) cfg->norm = MP_NORM_NONE;
            else return mp_cli_error(cmd, "--norm: '%s' is not l2, layernorm or none", optarg);
            norm_set = 1;
            break;
        case 'F':
            if (!strcmp(optarg, "paper")) cfg->form = MP_SIM_FORM_PAPER;
            else if (!strcmp(optarg, "recency")) cfg->form = MP_SIM_FORM_RECENCY;
            else return mp_cli_error(cmd, "--layer-form: '%s' is not paper or recency", optarg);
            break;
        case 'R':
            if (!strcmp(optarg, "on")) cfg->residual = 1;
            else if (!strcmp(optarg, "off")) cfg->residual = 0;
            else return mp_cli_error(cmd, "--residual: '%s' is not on or off", optarg);
            resid_set = 1;
            break;
        case 's':
            if (strcmp(optarg, "1") && strcmp(optarg, "sqrt") && strcmp(optarg, "d"))
                return mp_cli_error(cmd, "--scale: '%s' is not 1, sqrt or d", optarg);
            fl->scale_word = optarg;
            scale_set = 1;
            break;
        case 'r': cfg->rope = 1; break;
        case 't': cfg->rope_theta = mp_cli_double(cmd, "--rope-theta", optarg, 1.0000001, 1e12); break;
        case 'b': cfg->causal = 0; break;
        case 'e': cfg->seed = (uint64_t)mp_cli_i64(cmd, "--seed", optarg, 0, INT64_MAX); break;
        case 'j': cfg->threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, MP_THREADS_MAX); break;
        case 'o': fl->out = optarg; break;
        case 'p': fl->plot = 1; break;
        case 'd': fl->dump = optarg; break;
        case 'q': fl->quiet = 1; break;
        case 'f': fl->force = 1; break;
        case 'h': fputs(simulate_help, stdout); fl->done = 1; return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (cfg->form == MP_SIM_FORM_RECENCY) { /* the later version's defaults */
        if (!seq_set) cfg->seq = 10;
        if (!norm_set) cfg->norm = MP_NORM_LAYERNORM;
        if (!resid_set) cfg->residual = 0;
        if (!scale_set) fl->scale_word = "sqrt";
    }
    if (!scale_set && !fl->scale_word) fl->scale_word = cfg->norm == MP_NORM_L2 ? "1" : "sqrt";
    cfg->scale = mp_sim_scale_value(fl->scale_word, cfg->dim);
    return MP_EXIT_OK;
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
    MpSimConfig cfg;
    mp_sim_config_default(&cfg);
    SimFlags fl = {.nalpha = 1};
    int rc = simulate_flags(&cfg, &fl, argc, argv);
    if (rc != MP_EXIT_OK || fl.done) return rc;
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
                printf("wrote %s/{scores,scores_se,probs,scores_diagnorm}.npy, meta.json%s\n", dir,
                       fl.plot ? ", scores.png" : "");
        }
        mp_sim_result_free(&res);
    }
    if (fl.plot) mp_plot_release();
    return rc;
}
