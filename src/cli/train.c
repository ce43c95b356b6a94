/* train.c — `maskpos train`: train a small Llama-style decoder (RoPE or NoPE) on a corpus read as
 * bytes (vocabulary 256) or encoded with a tokenizer (--tokenizer: vocabulary of the tokenizer).
 *
 *   maskpos train --data corpus.txt --pos none --out runs/nope
 *   maskpos train --data corpus.txt --tokenizer models/llama-3.1 --out runs/llama-vocab
 *   maskpos train --resume runs/nope/step-000500 --data corpus.txt --out runs/nope
 * Writes OUT/step-NNNNNN/{config.json, model.safetensors, optimizer.bin} every K steps and at the
 * end (HF layout, readable by `maskpos inspect`, probe and gram; plus tokenizer.json and
 * tokenizer_config.json with --tokenizer), and OUT/log.csv (step, lr, loss, grad norm,
 * validation loss, tokens/s) beside them. See docs/train.md.
 * Parses the flags and calls mp_train_job_run (src/job/train.h), which prints the run's lines;
 * the model maths: src/train/; tokenization: src/tok/.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"     /* mp_cli_* */
#include "core/files.h"  /* MP_OUTDIR_* */
#include "core/util.h"   /* MP_THREADS_MAX */
#include "job/train.h"   /* mp_train_job_run */

static const char *train_help =
    "usage: maskpos train --data FILE --out DIR [options]\n"
    "       maskpos train --resume CKPT_DIR --data FILE --out DIR [--steps N] [--threads N]\n"
    "\n"
    "Trains a Llama-style decoder (RMSNorm, GQA attention, RoPE or none, SwiGLU MLP) on the bytes\n"
    "of a text file (vocabulary 256) or on its ids under --tokenizer (the tokenizer's vocabulary);\n"
    "the last 5% of the bytes or ids is held out for validation loss.\n"
    "AdamW with linear warm-up and cosine decay to lr * min-lr-frac, global-norm clipping.\n"
    "Runs are deterministic for a given --seed whatever --threads is.\n"
    "\n"
    "model:\n"
    "  --layers L         decoder layers (default 4)\n"
    "  --dim C            width (default 128)\n"
    "  --heads NH         query heads (default 4; head size C/NH, even)\n"
    "  --kv-heads NKV     key/value heads, divides NH (default 2)\n"
    "  --ffn FF           MLP width (default 344)\n"
    "  --seq T            training sequence length (default 128)\n"
    "  --pos rope|none    rotary position encoding (HF rotate-half, theta 10000) or none (NoPE;\n"
    "                     config.json then carries \"no_rope_layers\": [0, ...])\n"
    "  --rope-theta X     RoPE base (default 10000)\n"
    "  --tie              tie lm_head to the embedding\n"
    "  --bos              start every training window with a BOS token, as every document does\n"
    "                     for a tokenizer that adds one: bytes get id 256 (vocabulary 257,\n"
    "                     config \"bos_token_id\": 256), --tokenizer its own BOS; the window's\n"
    "                     first text id is then predicted from BOS alone\n"
    "optimiser:\n"
    "  --batch B          sequences per step (default 16)\n"
    "  --steps N          total steps (default 1000)\n"
    "  --lr X             peak learning rate (default 3e-3)\n"
    "  --min-lr-frac X    final lr as a fraction of --lr (default 0.1)\n"
    "  --warmup N         linear warm-up steps (default 100)\n"
    "  --wd X             decoupled weight decay of the matrices (default 0.1)\n"
    "  --clip X           global gradient-norm clip, 0 = off (default 1)\n"
    "  --beta2 X          Adam beta2 (default 0.95; beta1 0.9, eps 1e-8)\n"
    "  --seed N           initial weights and batch order (default 0)\n"
    "run:\n"
    "  --data FILE        text corpus (read as bytes, or encoded once with --tokenizer): a text file\n"
    "                     as it is, or a .jsonl file (field \"text\") or a directory of .txt files,\n"
    "                     whose documents are joined by a blank line\n"
    "  --tokenizer PATH   a directory with tokenizer.json (and tokenizer_config.json) or a\n"
    "                     tokenizer.json: the whole file is encoded without BOS/EOS and the\n"
    "                     vocabulary is the tokenizer's; both files are copied into every\n"
    "                     checkpoint (GGUF tokenizers are refused). On --resume the checkpoint's\n"
    "                     own copy is used; a given PATH must be the same tokenizer\n"
    "  --out DIR          output directory (created); a folder holds one run: an earlier run's\n"
    "                     folder is refused unless --resume continues it or --force replaces it\n"
    "  --force            remove the earlier run's checkpoints and log from --out first (only\n"
    "                     files a maskpos run wrote; the same for --export-bf16 DIR and\n"
    "                     --dump-batches F, which are otherwise refused when they exist)\n"
    "  --checkpoint-every K   checkpoint every K steps and at the end (default 100; on --resume the\n"
    "                     resumed run's)\n"
    "  --eval-every K     validation loss every K steps (default: --checkpoint-every; on --resume\n"
    "                     the resumed run's)\n"
    "  --val-batches N    validation batches per evaluation (default 4)\n"
    "  --log-every K      print every K steps (default 10)\n"
    "  --bf16             store checkpoint weights as BF16 (such checkpoints cannot be resumed:\n"
    "                     keep F32, the default, and use --export-bf16 for a BF16 copy)\n"
    "  --export-bf16 DIR  at the end, also write the final weights as BF16 (config.json +\n"
    "                     model.safetensors) to DIR; with --resume CKPT and --steps equal to its\n"
    "                     step this only converts\n"
    "  --resume DIR       continue from a checkpoint directory; sizes, optimiser settings and seed\n"
    "                     come from it (only --steps, --threads, --out, --data, --tokenizer and the\n"
    "                     intervals may be given: a given interval overrides the checkpoint's);\n"
    "                     bit-identical to an uninterrupted run; a checkpoint whose weights or\n"
    "                     config.json were edited, or that holds NaN/Inf, is refused\n"
    "                     (a different --steps moves the end of the cosine schedule)\n"
    "  --threads N        worker threads (default: all cores)\n"
    "  --quiet            no per-step lines\n"
    "testing:\n"
    "  --stop-after N     stop after step N with a checkpoint, as if interrupted\n"
    "  --save-init        also checkpoint the initial weights as step-000000\n"
    "  --dump-batches F   write the training batches of this run as int32 .npy [steps, 2, B, T]\n"
    "                     (inputs, targets) for tests/ref/train_ref.py\n"
    "\n"
    "Exit status: 0 done; 2 bad flags, unreadable or too small corpus, unreadable or malformed\n"
    "tokenizer, a model too large for memory, unwritable --out, or a non-finite loss (the last\n"
    "good checkpoint is kept).\n";

/* A flag's value within its range of mp_train_ranges (shared with the resume check). */
static double train_flag(const char *cmd, MpTrainSetting s, const char *arg) {
    return mp_cli_double(cmd, mp_train_ranges[s].name, arg, mp_train_ranges[s].lo, mp_train_ranges[s].hi);
}
static int64_t train_flag_i64(const char *cmd, MpTrainSetting s, const char *arg) {
    return mp_cli_i64(cmd, mp_train_ranges[s].name, arg, (int64_t)mp_train_ranges[s].lo, (int64_t)mp_train_ranges[s].hi);
}

int mp_cmd_train(int argc, char **argv) {
    const char *cmd = "train";
    MpTrainJobConfig c;
    mp_train_job_config_init(&c);
    int force = 0;
    static const struct option opts[] = {
        {"layers", required_argument, 0, 'L'},      {"dim", required_argument, 0, 'C'},
        {"heads", required_argument, 0, 'H'},       {"kv-heads", required_argument, 0, 'K'},
        {"ffn", required_argument, 0, 'F'},         {"seq", required_argument, 0, 'T'},
        {"pos", required_argument, 0, 'P'},         {"rope-theta", required_argument, 0, 'R'},
        {"tie", no_argument, 0, 'y'},               {"batch", required_argument, 0, 'B'},
        {"steps", required_argument, 0, 'N'},       {"lr", required_argument, 0, 'l'},
        {"min-lr-frac", required_argument, 0, 'm'}, {"warmup", required_argument, 0, 'w'},
        {"wd", required_argument, 0, 'W'},          {"clip", required_argument, 0, 'c'},
        {"beta2", required_argument, 0, '2'},       {"seed", required_argument, 0, 's'},
        {"data", required_argument, 0, 'd'},        {"out", required_argument, 0, 'o'},
        {"checkpoint-every", required_argument, 0, 'k'}, {"eval-every", required_argument, 0, 'e'},
        {"val-batches", required_argument, 0, 'v'}, {"log-every", required_argument, 0, 'g'},
        {"bf16", no_argument, 0, 'b'},              {"resume", required_argument, 0, 'r'},
        {"threads", required_argument, 0, 'j'},     {"quiet", no_argument, 0, 'q'},
        {"stop-after", required_argument, 0, 'S'},  {"save-init", no_argument, 0, 'I'},
        {"dump-batches", required_argument, 0, 'D'}, {"export-bf16", required_argument, 0, 'X'},
        {"tokenizer", required_argument, 0, 't'},   {"help", no_argument, 0, 'h'},
        {"bos", no_argument, 0, 'O'},               {"force", no_argument, 0, 'f'},
        {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (ch) {
        case 'L': c.cfg.layers = (int)mp_cli_i64(cmd, "--layers", optarg, 1, 256); c.model_flags++; break;
        case 'C': c.cfg.dim = (int)mp_cli_i64(cmd, "--dim", optarg, 2, 16384); c.model_flags++; break;
        case 'H': c.cfg.heads = (int)mp_cli_i64(cmd, "--heads", optarg, 1, 1024); c.model_flags++; break;
        case 'K': c.cfg.kv_heads = (int)mp_cli_i64(cmd, "--kv-heads", optarg, 1, 1024); c.model_flags++; break;
        case 'F': c.cfg.ffn = (int)mp_cli_i64(cmd, "--ffn", optarg, 1, 65536); c.model_flags++; break;
        case 'T': c.cfg.seq = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 8192); c.model_flags++; break;
        case 'P':
            if (!strcmp(optarg, "rope")) c.cfg.pos = MP_TRAIN_POS_ROPE;
            else if (!strcmp(optarg, "none")) c.cfg.pos = MP_TRAIN_POS_NONE;
            else return mp_cli_error(cmd, "--pos: '%s' is not rope or none", optarg);
            c.model_flags++;
            break;
        case 'R': c.cfg.rope_theta = mp_cli_double(cmd, "--rope-theta", optarg, 1.0000001, 1e12); c.model_flags++; break;
        case 'y': c.cfg.tie = 1; c.model_flags++; break;
        case 'O': c.cfg.bos = 1; c.model_flags++; break;
        case 'B': c.cfg.batch = (int)mp_cli_i64(cmd, "--batch", optarg, 1, 65536); c.model_flags++; break;
        case 'N': c.steps = train_flag_i64(cmd, MP_TRAIN_SET_STEPS, optarg); break;
        case 'l': c.opt.lr = train_flag(cmd, MP_TRAIN_SET_LR, optarg); c.model_flags++; break;
        case 'm': c.opt.min_lr_frac = train_flag(cmd, MP_TRAIN_SET_MIN_LR_FRAC, optarg); c.model_flags++; break;
        case 'w': c.opt.warmup = train_flag_i64(cmd, MP_TRAIN_SET_WARMUP, optarg); c.model_flags++; break;
        case 'W': c.opt.wd = train_flag(cmd, MP_TRAIN_SET_WD, optarg); c.model_flags++; break;
        case 'c': c.opt.clip = train_flag(cmd, MP_TRAIN_SET_CLIP, optarg); c.model_flags++; break;
        case '2': c.opt.beta2 = train_flag(cmd, MP_TRAIN_SET_BETA2, optarg); c.model_flags++; break;
        case 's': c.seed = (uint64_t)mp_cli_i64(cmd, "--seed", optarg, 0, INT64_MAX); c.model_flags++; break;
        case 'd': c.data = optarg; break;
        case 'o': c.out = optarg; break;
        case 'k': c.checkpoint_every = mp_cli_i64(cmd, "--checkpoint-every", optarg, 1, INT64_C(1) << 40); break;
        case 'e': c.eval_every = mp_cli_i64(cmd, "--eval-every", optarg, 1, INT64_C(1) << 40); break;
        case 'v': c.val_batches = (int)mp_cli_i64(cmd, "--val-batches", optarg, 1, 100000); break;
        case 'g': c.log_every = mp_cli_i64(cmd, "--log-every", optarg, 1, INT64_C(1) << 40); break;
        case 'b': c.bf16 = 1; c.model_flags++; break;
        case 'r': c.resume = optarg; break;
        case 'j': c.threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, MP_THREADS_MAX); break;
        case 'q': c.quiet = 1; break;
        case 'S': c.stop_after = mp_cli_i64(cmd, "--stop-after", optarg, 1, INT64_C(1) << 40); break;
        case 'I': c.save_init = 1; break;
        case 'D': c.dump_batches = optarg; break;
        case 'X': c.export_dir = optarg; break;
        case 't': c.tokenizer = optarg; break;
        case 'f': force = 1; break;
        case 'h': fputs(train_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!c.data) return mp_cli_error(cmd, "--data FILE is required");
    if (!c.out) return mp_cli_error(cmd, "--out DIR is required");
    c.out_mode = force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW;
    c.log = stdout;
    MpErr e;
    MpTrainJobResult r;
    if (mp_train_job_run(&r, &c, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    return MP_EXIT_OK;
}
