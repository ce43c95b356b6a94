/* probe.c — `maskpos probe`: mean pre-softmax attention-score maps of a real model over a corpus
 * of token ids (paper §5.2, Figure 5), with counterfactuals (no mask, no RoPE).
 *
 *   maskpos probe MODEL --tokens ids.npy --seq 1024 --n 1000 --layers 1-4 --out results/llama
 * Parses the flags into an MpProbeConfig, runs mp_probe_run (src/job/probe.h: the loop over
 * sequences, checkpoints, the statistics), prints its tables and writes the folder with
 * mp_probe_result_write: scores.npy, scores_diagnorm.npy, scores_se.npy (standard errors),
 * optional scores_heads.npy and meta.json. --checkpoint-every K / --resume make long runs
 * restartable with bit-identical results.
 * Under mpirun (N ranks) the sequences are shared out by model/probe_ranks.c; rank 0 alone prints,
 * checkpoints and writes (docs/mpi.md).
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"        /* mp_cli_* */
#include "core/files.h"     /* MP_OUTDIR_* */
#include "core/mpi.h"       /* mp_mpi_rank, mp_mpi_size: under mpirun */
#include "core/progress.h"  /* MpProgress */
#include "core/json.h"      /* mp_json_read: the files meta.json lists */
#include "core/util.h"      /* mp_time_now, mp_peak_rss_bytes, mp_path_join */
#include "job/probe.h"      /* mp_probe_run, mp_probe_result_print, mp_probe_result_write */
#include "model/fwd.h"      /* mp_fwd_compute_parse */

static const char *probe_help =
    "usage: maskpos probe MODEL --tokens FILE --out DIR [options]\n"
    "       maskpos probe MODEL --data TEXT --n N --seq S --out DIR [options]\n"
    "\n"
    "Runs MODEL (an HF directory or a .gguf file) over N token sequences and averages, per layer,\n"
    "the pre-softmax attention scores q.k/sqrt(head_dim) (RoPE applied, qwen3 q/k norm applied,\n"
    "causal mask) over sequences and heads. Only the layers up to the deepest one asked for are\n"
    "loaded and run. Computation is f32 with f32 accumulation (--compute bf16: see below); maps are\n"
    "summed in double.\n"
    "\n"
    "  --tokens FILE        token ids: .npy int32/int64/uint32 [N, S'] (rows cut to --seq), or a raw\n"
    "                       little-endian uint32 stream cut into consecutive sequences of --seq\n"
    "  --seq S              tokens per sequence (default: the .npy row length; required for raw).\n"
    "                       .npy rows shorter than S are an error (exit 2); in a raw stream a\n"
    "                       trailing remainder shorter than S is skipped and reported\n"
    "  --n N                use the first N sequences (default all; more than the file holds: exit 2)\n"
    "  --data TEXT          instead of --tokens: documents (.jsonl, text file with blank-line separated\n"
    "                       documents, or a directory of .txt files) tokenized with the model's own\n"
    "                       tokenizer (src/tok/, as 'maskpos corpus'); the first N documents with at\n"
    "                       least S tokens are kept, cut to S (shorter ones are skipped and counted;\n"
    "                       fewer than N such documents: exit 2). Needs --n and --seq\n"
    "  --tokenizer PATH     tokenizer for --data: a directory with tokenizer.json, a tokenizer.json\n"
    "                       or a .gguf (default: MODEL)\n"
    "  --field NAME         --data .jsonl: the text field (default \"text\")\n"
    "  --whole              --data text files: one document per file\n"
    "  --shuffle            --data: visit documents in a random order fixed by --seed (default 0)\n"
    "  --seed K             seed of --shuffle\n"
    "  --no-special         --data: do not add BOS/EOS\n"
    "  --pack               --data: concatenate the documents' ids and cut the stream into N rows of\n"
    "                       S (rows may span documents; for a few long or many short documents);\n"
    "                       with a tokenizer that adds BOS every row is BOS + the next S-1 ids\n"
    "  --layers SPEC        1-based layers, e.g. 1-4, 2,5, all (default 1-4, the paper's Figure 5,\n"
    "                       or all when fewer; the set-up line says when layers are left out)\n"
    "  --per-head           also write scores_heads.npy [L,H,S,S] and its standard errors\n"
    "                       scores_heads_se.npy, float32 (and probs_heads.npy with --probs)\n"
    "  --heads-f64          --per-head: write those two as float64 (summed in double either way)\n"
    "  --probs              also average the post-softmax attention: probs.npy [L,S,S] (rows sum to\n"
    "                       1), per head the mass on the first token and the mean entropy (meta.json\n"
    "                       attention_sink, attention_entropy); with --plot probs.png and\n"
    "                       sink_entropy.png. Memory: O(L S^2) sums, one sequence's scores at a time\n"
    "  --recency            also the recency probability per layer and head (triples j<k<i with\n"
    "                       score(i,k) > score(i,j), per sequence and of the mean maps) and, from the\n"
    "                       same run, NRI, block z and RP of the first S' = 16, 32, ... positions (a\n"
    "                       causal model scores them as the S'-token prefix) and the residue by query\n"
    "                       position (meta.json; --plot: length_*.png; docs/recency.md)\n"
    "  --bidirectional      counterfactual: no causal mask in any layer\n"
    "  --no-rope            counterfactual: queries and keys not rotated\n"
    "  --threads T          worker threads (default: all cores); results are bit-identical for any T\n"
    "  --compute MODE       f32 (default, the reference) or bf16: Linear weights kept in bf16 (bf16\n"
    "                       checkpoints as stored, others rounded once; half the memory) and Linear\n"
    "                       inputs rounded to bf16, f32 accumulation, attention in f32 (docs/speed.md;\n"
    "                       maps within 2e-2 of max |score| of f32 on random-weight test models)\n"
    "  --device NAME        the forward pass's backend: cpu (default; the only one built here: cuda\n"
    "                       needs make CUDA=1)\n"
    "  --checkpoint-every K save partial sums to DIR/checkpoint.bin every K sequences (atomically)\n"
    "  --resume             continue from DIR/checkpoint.bin (same model, tokens and flags)\n"
    "  --allow-long         run S past the model's trained context (max_position_embeddings, or a\n"
    "                       model that does not state it): refused without it; warned and recorded\n"
    "                       in meta.json (beyond_trained_context) with it\n"
    "  --force              replace the outputs of an earlier run in --out (else such a folder is\n"
    "                       refused: a folder holds one run's outputs)\n"
    "  --out DIR            outputs: scores.npy float64 [L,S,S] (mean over sequences and heads; NaN\n"
    "                       where masked), scores_diagnorm.npy, scores_se.npy, scores_heads*.npy,\n"
    "                       meta.json (its \"files\" lists every file written, as the last line does)\n"
    "  --plot               also draw DIR/scores_diagnorm.png (every selected layer, diagonal-\n"
    "                       normalised, vlag centred on 0, limits +-max(|1st|, |99th| percentile),\n"
    "                       printed and in meta.json's files)\n"
    "  --max-mem-gib G      refuse to start when the expected peak exceeds G GiB (default: the\n"
    "                       memory available now)\n"
    "  --quiet              no progress bar and no tables (meta.json holds every statistic)\n"
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

/* After the run: the speed (and the MPI figures), the tables (not with --quiet), the folder. */
static int probe_report(const char *cmd, const MpProbeResult *res, const char *out, int plot, int quiet, double t_start,
                        int argc, char **argv) {
    const int64_t ran = res->n - res->first;
    const double toks = (double)ran * res->S, cs = res->compute_s;
    printf("ran %lld sequence%s (%.0f tokens) in %.2f s: %.1f tokens/s, %.2f GFLOP/s\n", (long long)ran,
           ran == 1 ? "" : "s", toks, cs, cs > 0 ? toks / cs : 0.0, cs > 0 ? res->gflop / cs : 0.0);
    if (res->nranks > 1)
        printf("MPI: %d ranks; rank 0 received %lld sequences (%.1f MiB) in %.3f s and merged them in %.3f s\n",
               res->nranks, (long long)res->ranks.received, res->ranks.bytes / 1048576.0, res->ranks.wait_s,
               res->ranks.merge_s);
    if (!quiet) mp_probe_result_print(stdout, res);
    MpErr e;
    const MpJobWriteOptions wo = {.plot = plot, .argc = argc, .argv = argv, .wall_s = mp_time_now() - t_start};
    if (mp_probe_result_write(res, out, &wo, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    probe_wrote(out, plot);
    return MP_EXIT_OK;
}

/* The flags into c; MP_EXIT_OK, or the exit status of a refusal (or of --help: *done = 1). */
static int probe_flags(MpProbeConfig *c, int *plot, int *quiet, int *done, int argc, char **argv) {
    const char *cmd = "probe";
    static const struct option opts[] = {
        {"tokens", required_argument, 0, 't'}, {"seq", required_argument, 0, 'S'},
        {"n", required_argument, 0, 'n'},      {"layers", required_argument, 0, 'L'},
        {"per-head", no_argument, 0, 'H'},     {"bidirectional", no_argument, 0, 'b'},
        {"no-rope", no_argument, 0, 'r'},      {"threads", required_argument, 0, 'j'},
        {"checkpoint-every", required_argument, 0, 'k'}, {"resume", no_argument, 0, 'R'},
        {"out", required_argument, 0, 'o'},    {"plot", no_argument, 0, 'p'},
        {"max-mem-gib", required_argument, 0, 'M'}, {"quiet", no_argument, 0, 'q'},
        {"data", required_argument, 0, 'D'},   {"tokenizer", required_argument, 0, 'T'},
        {"field", required_argument, 0, 'F'},  {"whole", no_argument, 0, 'W'},
        {"shuffle", no_argument, 0, 'U'},      {"seed", required_argument, 0, 'E'},
        {"no-special", no_argument, 0, 'N'},   {"pack", no_argument, 0, 'K'},
        {"compute", required_argument, 0, 'P'}, {"device", required_argument, 0, 'V'},
        {"force", no_argument, 0, 'f'},        {"allow-long", no_argument, 0, 'A'},
        {"probs", no_argument, 0, 'Z'},        {"recency", no_argument, 0, 'Y'},
        {"heads-f64", no_argument, 0, '6'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int ch, force = 0;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 't': c->tokens_path = optarg; break;
        case 'S': c->seq = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 1 << 20); break;
        case 'n': c->n = mp_cli_i64(cmd, "--n", optarg, 1, INT64_C(1) << 40); break;
        case 'L': c->layers = optarg; break;
        case 'H': c->per_head = 1; break;
        case '6': c->heads_f64 = 1; break;
        case 'Z': c->probs = 1; break;
        case 'Y': c->recency = 1; break;
        case 'b': c->bidirectional = 1; break;
        case 'r': c->no_rope = 1; break;
        case 'j': c->threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, MP_THREADS_MAX); break;
        case 'k': c->checkpoint_every = mp_cli_i64(cmd, "--checkpoint-every", optarg, 1, INT64_C(1) << 40); break;
        case 'R': c->resume = 1; break;
        case 'o': c->out = optarg; break;
        case 'p': *plot = 1; break;
        case 'M': c->max_mem_gib = mp_cli_double(cmd, "--max-mem-gib", optarg, 1e-6, 1e6); break;
        case 'q': *quiet = 1; break;
        case 'V': {
            MpErr de;
            if (mp_fwd_device_check(optarg, &de) != MP_OK) return mp_cli_error(cmd, "%s", de.msg);
            c->device = optarg;
            break;
        }
        case 'P':
            if ((c->compute = mp_fwd_compute_parse(optarg)) < 0) return mp_cli_error(cmd, "--compute: '%s' is not f32 or bf16", optarg);
            break;
        case 'D': c->data = optarg; break;
        case 'T': c->tokenizer = optarg; break;
        case 'F': c->field = optarg; break;
        case 'W': c->whole = 1; break;
        case 'U': c->shuffle = 1; break;
        case 'E': c->seed = (uint64_t)mp_cli_i64(cmd, "--seed", optarg, 0, INT64_MAX); break;
        case 'N': c->no_special = 1; break;
        case 'K': c->pack = 1; break;
        case 'f': force = 1; break;
        case 'A': c->allow_long = 1; break;
        case 'h': fputs(probe_help, stdout); *done = 1; return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind >= argc) return mp_cli_error(cmd, "no MODEL given (see 'maskpos probe --help')");
    c->model_path = argv[optind++];
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!c->tokens_path && !c->data) return mp_cli_error(cmd, "--tokens FILE or --data TEXT is required");
    if (c->tokens_path && c->data) return mp_cli_error(cmd, "--tokens and --data exclude each other");
    if (c->data && (!c->n || !c->seq)) return mp_cli_error(cmd, "--data needs --n N and --seq S");
    if (!c->data && (c->tokenizer || c->field || c->whole || c->shuffle || c->no_special || c->pack))
        return mp_cli_error(cmd, "--tokenizer, --field, --whole, --shuffle, --no-special and --pack go with --data");
    if (c->heads_f64 && !c->per_head) return mp_cli_error(cmd, "--heads-f64 goes with --per-head");
    if (!c->out) return mp_cli_error(cmd, "--out DIR is required");
    c->out_mode = c->resume ? MP_OUTDIR_RESUME : force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    return MP_EXIT_OK;
}

int mp_cmd_probe(int argc, char **argv) {
    const char *cmd = "probe";
    const double t_start = mp_time_now();
    MpProbeConfig c;
    mp_probe_config_init(&c);
    int plot = 0, quiet = 0, done = 0;
    int rc = probe_flags(&c, &plot, &quiet, &done, argc, argv);
    if (rc != MP_EXIT_OK || done) return rc;
    MpProbeResult res;
    ProbeBar bar = {.res = &res};
    c.log = stdout;
    if (!quiet && mp_mpi_rank() == 0) {
        c.progress = probe_bar;
        c.progress_ctx = &bar;
    }
    MpErr e;
    if (mp_probe_run(&res, &c, &e) != MP_OK) {
        if (!e.msg[0]) return MP_EXIT_ERROR; /* another rank said why */
        return mp_cli_error(cmd, "%s", e.msg);
    }
    if (bar.started) mp_progress_finish(&bar.pg);
    if (mp_mpi_rank() == 0) rc = probe_report(cmd, &res, c.out, plot, quiet, t_start, argc, argv);
    mp_probe_result_free(&res);
    return rc;
}
