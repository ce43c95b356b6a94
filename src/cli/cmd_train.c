/* cmd_train.c — `maskpos train`: train a small Llama-style decoder (RoPE or NoPE) on a corpus read as
 * bytes (vocabulary 256) or encoded with a tokenizer (--tokenizer: vocabulary of the tokenizer).
 *
 *   maskpos train --data corpus.txt --pos none --out runs/nope
 *   maskpos train --data corpus.txt --tokenizer models/llama-3.1 --out runs/llama-vocab
 *   maskpos train --resume runs/nope/step-000500 --data corpus.txt --out runs/nope
 * Writes OUT/step-NNNNNN/{config.json, model.safetensors, optimizer.bin} every K steps and at the
 * end (HF layout, readable by `maskpos inspect`, probe and gram; plus tokenizer.json and
 * tokenizer_config.json with --tokenizer), and OUT/log.csv (step, lr, loss, grad norm,
 * validation loss, tokens/s) beside them. See docs/train.md.
 * Parses the flags and calls mp_train_job_run (src/job/train_job.h), which prints the run's lines;
 * the model maths: src/train/; tokenization: src/tok/.
 */
#include <stddef.h>
#include <stdio.h>

#include "cli/cli.h"     /* mp_cli_* */
#include "core/files.h"  /* MP_OUTDIR_* */
#include "core/util.h"   /* MP_THREADS_MAX */
#include "job/shared_opts.h" /* --seq, --seed, --data, --tokenizer, --threads: declared once */
#include "job/train_job.h"   /* mp_train_job_run */

/* The flags' values: the job's config and the command's own. */
typedef struct TrainFlags {
    MpTrainJobConfig c;
    int force;
} TrainFlags;

typedef enum TrainOpt {
    TR_LAYERS, TR_DIM, TR_HEADS, TR_KV_HEADS, TR_FFN, TR_SEQ, TR_POS, TR_ROPE_THETA, TR_TIE, TR_BOS, /* model */
    TR_BATCH, TR_STEPS, TR_LR, TR_MIN_LR_FRAC, TR_WARMUP, TR_WD, TR_CLIP, TR_BETA2, TR_SEED,        /* optimiser */
    TR_DATA, TR_TOKENIZER, TR_OUT, TR_FORCE, TR_CHECKPOINT_EVERY, TR_EVAL_EVERY, TR_VAL_BATCHES, TR_LOG_EVERY, TR_BF16,
    TR_EXPORT_BF16, TR_RESUME, TR_THREADS, TR_QUIET,                                                  /* run */
    TR_STOP_AFTER, TR_SAVE_INIT, TR_DUMP_BATCHES,                                                     /* testing */
    TR_COUNT
} TrainOpt;

static const MpOptChoice train_pos[] = {{"rope", MP_TRAIN_POS_ROPE}, {"none", MP_TRAIN_POS_NONE}, {NULL, 0}};
_Static_assert(sizeof(MpTrainPos) == sizeof(int), "--pos sets an int");

/* MP_OPT_MARK: a setting --resume takes from the checkpoint (given with it: refused, model_flags) */
#define F(m) offsetof(TrainFlags, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* declared once for every command (job/shared_opts.h) */
#define I(nm, meta, hlp, l, h) MP_OPT_DECL(nm, MP_OPT_INT, meta, .help = hlp, .lo = l, .hi = h)
#define I64(nm, meta, hlp) MP_OPT_DECL(nm, MP_OPT_I64, meta, .help = hlp, .lo = 1, .hi = INT64_C(1) << 40)
#define R(nm, kind, hlp, set) MP_OPT_DECL(nm, kind, "X", .help = hlp, .range = &mp_train_ranges[set]) /* train/optim.c's range */
#define SWITCH(nm, hlp) MP_OPT_DECL(nm, MP_OPT_BOOL, NULL, .help = hlp)
#define MARK MP_OPT_MARK
static const MpOpt train_opts[TR_COUNT] = {
    [TR_LAYERS] = {I("layers", "L", "decoder layers (default 4)", 1, 256), F(c.cfg.layers), MARK, .before = "model:\n"},
    [TR_DIM] = {I("dim", "C", "width (default 128)", 2, 16384), F(c.cfg.dim), MARK},
    [TR_HEADS] = {I("heads", "NH", "query heads (default 4; head size C/NH, even)", 1, 1024), F(c.cfg.heads), MARK},
    [TR_KV_HEADS] = {I("kv-heads", "NKV", "key/value heads, divides NH (default 2)", 1, 1024), F(c.cfg.kv_heads), MARK},
    [TR_FFN] = {I("ffn", "FF", "MLP width (default 344)", 1, 65536), F(c.cfg.ffn), MARK},
    /* the model's context: its attention maps are [T, T] per head and layer */
    [TR_SEQ] = {S(SEQ), F(c.cfg.seq), MARK | MP_OPT_NARROW, .arg = "T", .help = "training sequence length (default 128)", .lo = 1,
                .hi = 8192},
    [TR_POS] = {MP_OPT_DECL("pos", MP_OPT_CHOICE, "rope|none",
                            .help = "rotary position encoding (HF rotate-half, theta 10000) or none (NoPE;\n"
                                    "config.json then carries \"no_rope_layers\": [0, ...])",
                            .choices = train_pos), F(c.cfg.pos), MARK},
    [TR_ROPE_THETA] = {MP_OPT_DECL("rope-theta", MP_OPT_DOUBLE, "X", .help = "RoPE base (default 10000)", .dlo = 1.0000001, .dhi = 1e12),
                       F(c.cfg.rope_theta), MARK},
    [TR_TIE] = {SWITCH("tie", "tie lm_head to the embedding"), F(c.cfg.tie), MARK},
    [TR_BOS] = {SWITCH("bos", "start every training window with a BOS token, as every document does\n"
                              "for a tokenizer that adds one: bytes get id 256 (vocabulary 257,\n"
                              "config \"bos_token_id\": 256), --tokenizer its own BOS; the window's\n"
                              "first text id is then predicted from BOS alone"), F(c.cfg.bos), MARK},
    [TR_BATCH] = {I("batch", "B", "sequences per step (default 16)", 1, 65536), F(c.cfg.batch), MARK, .before = "optimiser:\n"},
    [TR_STEPS] = {MP_OPT_DECL("steps", MP_OPT_I64, "N", .help = "total steps (default 1000)", .range = &mp_train_ranges[MP_TRAIN_SET_STEPS]),
                  F(c.steps)},
    [TR_LR] = {R("lr", MP_OPT_DOUBLE, "peak learning rate (default 3e-3)", MP_TRAIN_SET_LR), F(c.opt.lr), MARK},
    [TR_MIN_LR_FRAC] = {R("min-lr-frac", MP_OPT_DOUBLE, "final lr as a fraction of --lr (default 0.1)", MP_TRAIN_SET_MIN_LR_FRAC),
                        F(c.opt.min_lr_frac), MARK},
    [TR_WARMUP] = {MP_OPT_DECL("warmup", MP_OPT_I64, "N", .help = "linear warm-up steps (default 100)",
                               .range = &mp_train_ranges[MP_TRAIN_SET_WARMUP]), F(c.opt.warmup), MARK},
    [TR_WD] = {R("wd", MP_OPT_DOUBLE, "decoupled weight decay of the matrices (default 0.1)", MP_TRAIN_SET_WD), F(c.opt.wd), MARK},
    [TR_CLIP] = {R("clip", MP_OPT_DOUBLE, "global gradient-norm clip, 0 = off (default 1)", MP_TRAIN_SET_CLIP), F(c.opt.clip), MARK},
    [TR_BETA2] = {R("beta2", MP_OPT_DOUBLE, "Adam beta2 (default 0.95; beta1 0.9, eps 1e-8)", MP_TRAIN_SET_BETA2), F(c.opt.beta2), MARK},
    [TR_SEED] = {S(SEED), F(c.seed), MARK, .arg = "N", .help = "initial weights and batch order (default 0)"},
    [TR_DATA] = {S(DATA), F(c.data), .arg = "FILE", .before = "run:\n",
                 .help = "text corpus (read as bytes, or encoded once with --tokenizer): a text file\n"
                         "as it is, or a .jsonl file (field \"text\") or a directory of .txt files,\n"
                         "whose documents are joined by a blank line"},
    [TR_TOKENIZER] = {S(TOKENIZER), F(c.tokenizer),
                      .help = "a directory with tokenizer.json (and tokenizer_config.json) or a\n"
                              "tokenizer.json: the whole file is encoded without BOS/EOS and the\n"
                              "vocabulary is the tokenizer's; both files are copied into every\n"
                              "checkpoint (GGUF tokenizers are refused). On --resume the checkpoint's\n"
                              "own copy is used; a given PATH must be the same tokenizer"},
    [TR_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "DIR",
                            .help = "output directory (created); a folder holds one run: an earlier run's\n"
                                    "folder is refused unless --resume continues it or --force replaces it"), F(c.out)},
    [TR_FORCE] = {SWITCH("force", "remove the earlier run's checkpoints and log from --out first (only\n"
                                  "files a maskpos run wrote; the same for --export-bf16 DIR and\n"
                                  "--dump-batches F, which are otherwise refused when they exist)"), F(force)},
    [TR_CHECKPOINT_EVERY] = {I64("checkpoint-every", "K",
                                 "checkpoint every K steps and at the end (default 100; on --resume the\n"
                                 "resumed run's)"), F(c.checkpoint_every)},
    [TR_EVAL_EVERY] = {I64("eval-every", "K",
                           "validation loss every K steps (default: --checkpoint-every; on --resume\n"
                           "the resumed run's)"), F(c.eval_every)},
    [TR_VAL_BATCHES] = {I("val-batches", "N", "validation batches per evaluation (default 4)", 1, 100000), F(c.val_batches)},
    [TR_LOG_EVERY] = {I64("log-every", "K", "print every K steps (default 10)"), F(c.log_every)},
    [TR_BF16] = {SWITCH("bf16", "store checkpoint weights as BF16 (such checkpoints cannot be resumed:\n"
                                "keep F32, the default, and use --export-bf16 for a BF16 copy)"), F(c.bf16), MARK},
    [TR_EXPORT_BF16] = {MP_OPT_DECL("export-bf16", MP_OPT_STRING, "DIR",
                                    .help = "at the end, also write the final weights as BF16 (config.json +\n"
                                            "model.safetensors) to DIR; with --resume CKPT and --steps equal to its\n"
                                            "step this only converts"), F(c.export_dir)},
    [TR_RESUME] = {MP_OPT_DECL("resume", MP_OPT_STRING, "DIR",
                               .help = "continue from a checkpoint directory; sizes, optimiser settings and seed\n"
                                       "come from it (only --steps, --threads, --out, --data, --tokenizer and the\n"
                                       "intervals may be given: a given interval overrides the checkpoint's);\n"
                                       "bit-identical to an uninterrupted run; a checkpoint whose weights or\n"
                                       "config.json were edited, or that holds NaN/Inf, is refused\n"
                                       "(a different --steps moves the end of the cosine schedule)"), F(c.resume)},
    [TR_THREADS] = {S(THREADS), F(c.threads)},
    [TR_QUIET] = {SWITCH("quiet", "no per-step lines"), F(c.quiet)},
    [TR_STOP_AFTER] = {I64("stop-after", "N", "stop after step N with a checkpoint, as if interrupted"), F(c.stop_after),
                       .before = "testing:\n"},
    [TR_SAVE_INIT] = {SWITCH("save-init", "also checkpoint the initial weights as step-000000"), F(c.save_init)},
    [TR_DUMP_BATCHES] = {MP_OPT_DECL("dump-batches", MP_OPT_STRING, "F",
                                     .help = "write the training batches of this run as int32 .npy [steps, 2, B, T]\n"
                                             "(inputs, targets) for tests/ref/train_ref.py"), F(c.dump_batches)},
};
_Static_assert(sizeof train_opts / sizeof *train_opts == TR_COUNT, "one row per TrainOpt");

static const MpOptTable train_table = {"train", train_opts, TR_COUNT, 21,
    "usage: maskpos train --data FILE --out DIR [options]\n"
    "       maskpos train --resume CKPT_DIR --data FILE --out DIR [--steps N] [--threads N]\n"
    "\n"
    "Trains a Llama-style decoder (RMSNorm, GQA attention, RoPE or none, SwiGLU MLP) on the bytes\n"
    "of a text file (vocabulary 256) or on its ids under --tokenizer (the tokenizer's vocabulary);\n"
    "the last 5% of the bytes or ids is held out for validation loss.\n"
    "AdamW with linear warm-up and cosine decay to lr * min-lr-frac, global-norm clipping.\n"
    "Runs are deterministic for a given --seed whatever --threads is.\n"
    "\n",
    "\n"
    "Exit status: 0 done; 2 bad flags, unreadable or too small corpus, unreadable or malformed\n"
    "tokenizer, a model too large for memory, unwritable --out, or a non-finite loss (the last\n"
    "good checkpoint is kept).\n"};

int mp_cmd_train(int argc, char **argv) {
    const char *cmd = "train";
    TrainFlags fl = {.force = 0};
    mp_train_job_config_init(&fl.c);
    int given[TR_COUNT], first;
    const int prc = mp_cli_parse(&train_table, &fl, argc, argv, &first, given);
    if (prc != MP_CLI_GO) return prc;
    MpTrainJobConfig c = fl.c;
    for (int i = 0; i < TR_COUNT; i++)
        if (train_opts[i].flags & MP_OPT_MARK) c.model_flags += given[i];
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    if (!c.data) return mp_cli_error(cmd, "--data FILE is required");
    if (!c.out) return mp_cli_error(cmd, "--out DIR is required");
    c.out_mode = fl.force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    c.log = stdout;
    MpErr e;
    MpTrainJobResult r;
    if (mp_train_job_run(&r, &c, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    return MP_EXIT_OK;
}
