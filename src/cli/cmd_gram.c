/* cmd_gram.c — `maskpos gram`: the nine Gram matrices (a)–(i) of paper.md §2.2 (Figure 3) for
 * layer l → l+1 of a checkpoint, averaged over sequences and heads.
 *
 *   maskpos gram models/nope --layer 1 --data corpus.txt --seq 50 --out results/gram
 *   maskpos gram models/rope --layer 1 --data corpus.txt --seq 50 --no-rope --out D   (counterfactual)
 * Writes DIR/gram.npy (float64 [9, S, S], order (a)..(i); (b) and (i) NaN above the diagonal),
 * DIR/tokens.npy (int32 [N, S], the sequences used), DIR/meta.json, and with --plot the 3×3
 * figure DIR/gram.png. See docs/train.md.
 * Parses the flags, calls mp_gram_run (src/job/gram_job.h), writes and prints; the maths:
 * src/train/gram.c.
 */
#include <stddef.h>
#include <stdio.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/files.h" /* MP_OUTDIR_* */
#include "core/util.h"  /* mp_time_now */
#include "job/gram_job.h"   /* mp_gram_run, mp_gram_result_write, mp_gram_result_print */
#include "job/shared_opts.h" /* --data, --seq, --n, --threads: declared once */

/* The flags' values: the gram's config and the command's own. */
typedef struct GramFlags {
    MpGramConfig c;
    int64_t n; /* --n, into c.n */
    int plot, force;
} GramFlags;

typedef enum GramOpt { GR_LAYER, GR_DATA, GR_TOKENS, GR_SEQ, GR_N, GR_NO_ROPE, GR_OUT, GR_PLOT, GR_THREADS, GR_ALLOW_LONG, GR_FORCE, GR_COUNT } GramOpt;

#define F(m) offsetof(GramFlags, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* declared once for every command (job/shared_opts.h) */
static const MpOpt gram_opts[GR_COUNT] = {
    [GR_LAYER] = {MP_OPT_DECL("layer", MP_OPT_INT, "L", .help = "first layer of the pair, 1-based (default 1)", .lo = 1, .hi = 4096),
                  F(c.layer)},
    [GR_DATA] = {S(DATA), F(c.data), .arg = "FILE",
                 .help = "text; sequences are N windows of S tokens spread evenly over it,\n"
                         "tokenized by MODEL/tokenizer.json, or as bytes for byte models\n"
                         "(config \"maskpos_tokenizer\": \"bytes\", or vocab_size 256 and no\n"
                         "\"maskpos_tokenizer\" naming another tokenizer); with a tokenizer that\n"
                         "adds BOS (or bytes with \"bos_token_id\": 256) each window is BOS + S-1"},
    [GR_TOKENS] = {MP_OPT_DECL("tokens", MP_OPT_STRING, "F.npy", .help = "token ids [rows, >= S] (int32/int64) instead of --data"),
                   F(c.tokens_path)},
    /* the maps are [9, S, S] doubles: S at most 8192 (4.8 GB) */
    [GR_SEQ] = {S(SEQ), F(c.seq), MP_OPT_NARROW, .help = "positions (default 50)", .lo = 1, .hi = 8192},
    [GR_N] = {S(N), F(n), MP_OPT_NARROW, .help = "sequences (default 256)", .lo = 1, .hi = 1000000},
    [GR_NO_ROPE] = {MP_OPT_DECL("no-rope", MP_OPT_BOOL, NULL,
                                .help = "skip RoPE in every layer (view a RoPE model as NoPE); layers marked\n"
                                        "\"no_rope_layers\": 0 in config.json never apply RoPE"), F(c.no_rope)},
    [GR_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "DIR", .help = "gram.npy [9,S,S] float64, tokens.npy [N,S] int32, meta.json"), F(c.out)},
    [GR_PLOT] = {MP_OPT_DECL("plot", MP_OPT_BOOL, NULL, .help = "also draw the 3x3 figure DIR/gram.png"), F(plot)},
    [GR_THREADS] = {S(THREADS), F(c.threads)},
    [GR_ALLOW_LONG] = {MP_OPT_DECL("allow-long", MP_OPT_BOOL, NULL,
                                   .help = "allow --seq past the model's trained context (warned, recorded in meta.json)"), F(c.allow_long)},
    [GR_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL,
                              .help = "replace the outputs of an earlier run in --out (else such a folder is refused)"), F(force)},
};
_Static_assert(sizeof gram_opts / sizeof *gram_opts == GR_COUNT, "one row per GramOpt");

static const MpOptTable gram_table = {"gram", gram_opts, GR_COUNT, 21,
    "usage: maskpos gram MODEL --layer L --data FILE --out DIR [options]\n"
    "\n"
    "The nine Gram matrices of the paper's Figure 3 along layer L -> L+1 (1-based), averaged\n"
    "over sequences and heads: (a) YY^T, Y = RMSNorm(X); (b) QK^T/sqrt(d); (c) (AV)(AV)^T;\n"
    "(d) (AVW_O)(AVW_O)^T; (e) OO^T, O = AVW_O + X; (f) RMSNorm(O)RMSNorm(O)^T; (g) X'X'^T,\n"
    "X' = FFN(RMSNorm(O)) + O; (h) next layer's YY^T; (i) next layer's QK^T/sqrt(d).\n"
    "(b) and (i) are pre-softmax scores (NaN above the diagonal); (c) is the mean of the\n"
    "per-head Grams. MODEL is anything `maskpos inspect` opens (HF directory or GGUF).\n"
    "\n",
    NULL};

int mp_cmd_gram(int argc, char **argv) {
    const char *cmd = "gram";
    GramFlags fl = {.plot = 0};
    mp_gram_config_init(&fl.c);
    fl.n = fl.c.n;
    int first;
    const int prc = mp_cli_parse(&gram_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    MpGramConfig c = fl.c;
    c.n = (int)fl.n;
    const int plot = fl.plot;
    if (first < argc) c.model_path = argv[first++];
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    if (!c.model_path) return mp_cli_error(cmd, "MODEL is required (see 'maskpos gram --help')");
    if (!c.data == !c.tokens_path) return mp_cli_error(cmd, "give exactly one of --data FILE and --tokens F.npy");
    if (!c.out) return mp_cli_error(cmd, "--out DIR is required");
    c.out_mode = fl.force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
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
