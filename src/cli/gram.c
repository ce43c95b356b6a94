/* gram.c — `maskpos gram`: the nine Gram matrices (a)–(i) of paper.md §2.2 (Figure 3) for
 * layer l → l+1 of a checkpoint, averaged over sequences and heads.
 *
 *   maskpos gram models/nope --layer 1 --data corpus.txt --seq 50 --out results/gram
 *   maskpos gram models/rope --layer 1 --data corpus.txt --seq 50 --no-rope --out D   (counterfactual)
 * Writes DIR/gram.npy (float64 [9, S, S], order (a)..(i); (b) and (i) NaN above the diagonal),
 * DIR/tokens.npy (int32 [N, S], the sequences used), DIR/meta.json, and with --plot the 3×3
 * figure DIR/gram.png. See docs/train.md.
 * Parses the flags, calls mp_gram_run (src/job/gram.h), writes and prints; the maths:
 * src/train/gram.c.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/files.h" /* MP_OUTDIR_* */
#include "core/util.h"  /* mp_time_now */
#include "job/gram.h"   /* mp_gram_run, mp_gram_result_write, mp_gram_result_print */

static const char *gram_help =
    "usage: maskpos gram MODEL --layer L --data FILE --out DIR [options]\n"
    "\n"
    "The nine Gram matrices of the paper's Figure 3 along layer L -> L+1 (1-based), averaged\n"
    "over sequences and heads: (a) YY^T, Y = RMSNorm(X); (b) QK^T/sqrt(d); (c) (AV)(AV)^T;\n"
    "(d) (AVW_O)(AVW_O)^T; (e) OO^T, O = AVW_O + X; (f) RMSNorm(O)RMSNorm(O)^T; (g) X'X'^T,\n"
    "X' = FFN(RMSNorm(O)) + O; (h) next layer's YY^T; (i) next layer's QK^T/sqrt(d).\n"
    "(b) and (i) are pre-softmax scores (NaN above the diagonal); (c) is the mean of the\n"
    "per-head Grams. MODEL is anything `maskpos inspect` opens (HF directory or GGUF).\n"
    "\n"
    "  --layer L          first layer of the pair, 1-based (default 1)\n"
    "  --data FILE        text; sequences are N windows of S tokens spread evenly over it,\n"
    "                     tokenized by MODEL/tokenizer.json, or as bytes for byte models\n"
    "                     (config \"maskpos_tokenizer\": \"bytes\", or vocab_size 256 and no\n"
    "                     \"maskpos_tokenizer\" naming another tokenizer); with a tokenizer that\n"
    "                     adds BOS (or bytes with \"bos_token_id\": 256) each window is BOS + S-1\n"
    "  --tokens F.npy     token ids [rows, >= S] (int32/int64) instead of --data\n"
    "  --seq S            positions (default 50)\n"
    "  --n N              sequences (default 256)\n"
    "  --no-rope          skip RoPE in every layer (view a RoPE model as NoPE); layers marked\n"
    "                     \"no_rope_layers\": 0 in config.json never apply RoPE\n"
    "  --out DIR          gram.npy [9,S,S] float64, tokens.npy [N,S] int32, meta.json\n"
    "  --plot             also draw the 3x3 figure DIR/gram.png\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --allow-long       allow --seq past the model's trained context (warned, recorded in meta.json)\n"
    "  --force            replace the outputs of an earlier run in --out (else such a folder is refused)\n";

int mp_cmd_gram(int argc, char **argv) {
    const char *cmd = "gram";
    MpGramConfig c;
    mp_gram_config_init(&c);
    int plot = 0, force = 0;
    static const struct option opts[] = {
        {"layer", required_argument, 0, 'l'}, {"data", required_argument, 0, 'd'},
        {"tokens", required_argument, 0, 't'}, {"seq", required_argument, 0, 'S'},
        {"n", required_argument, 0, 'n'},     {"no-rope", no_argument, 0, 'r'},
        {"out", required_argument, 0, 'o'},   {"plot", no_argument, 0, 'p'},
        {"threads", required_argument, 0, 'j'}, {"help", no_argument, 0, 'h'},
        {"force", no_argument, 0, 'f'},       {"allow-long", no_argument, 0, 'A'},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'l': c.layer = (int)mp_cli_i64(cmd, "--layer", optarg, 1, 4096); break;
        case 'd': c.data = optarg; break;
        case 't': c.tokens_path = optarg; break;
        case 'S': c.seq = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 8192); break;
        case 'n': c.n = (int)mp_cli_i64(cmd, "--n", optarg, 1, 1000000); break;
        case 'r': c.no_rope = 1; break;
        case 'o': c.out = optarg; break;
        case 'p': plot = 1; break;
        case 'f': force = 1; break;
        case 'A': c.allow_long = 1; break;
        case 'j': c.threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, MP_THREADS_MAX); break;
        case 'h': fputs(gram_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind < argc) c.model_path = argv[optind++];
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!c.model_path) return mp_cli_error(cmd, "MODEL is required (see 'maskpos gram --help')");
    if (!c.data == !c.tokens_path) return mp_cli_error(cmd, "give exactly one of --data FILE and --tokens F.npy");
    if (!c.out) return mp_cli_error(cmd, "--out DIR is required");
    c.out_mode = force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    c.log = stderr;
    const double t0 = mp_time_now();
    MpErr e;
    MpGramResult r;
    if (mp_gram_run(&r, &c, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    const MpJobWriteOptions wo = {.plot = plot, .argc = argc, .argv = argv, .wall_s = mp_time_now() - t0};
    int rc = MP_EXIT_OK;
    if (mp_gram_result_write(&r, c.out, &wo, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
    } else {
        mp_gram_result_print(stdout, &r);
        printf("wrote %s/{gram.npy, tokens.npy, meta.json%s}\n", c.out, plot ? ", gram.png" : "");
    }
    mp_gram_result_free(&r);
    return rc;
}
