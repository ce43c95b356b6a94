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
 * Does not: the model maths (src/train/), tokenization (src/tok/).
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"     /* mp_cli_* */
#include "core/npy.h"    /* mp_npy_write (--dump-batches) */
#include "core/util.h"   /* mp_time_now, mp_mkdir_p, MpAtomicFile */
#include "core/files.h" /* mp_input_open: refuses a FIFO or directory */
#include "tok/tok.h"     /* MpTok: --tokenizer */
#include "train/train.h" /* model, optimiser, data, checkpoints */

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
    "  --force            remove the earlier run's checkpoints and log from --out first\n"
    "  --checkpoint-every K   checkpoint every K steps and at the end (default 100)\n"
    "  --eval-every K     validation loss every K steps (default: --checkpoint-every)\n"
    "  --val-batches N    validation batches per evaluation (default 4)\n"
    "  --log-every K      print every K steps (default 10)\n"
    "  --bf16             store checkpoint weights as BF16 (such checkpoints cannot be resumed:\n"
    "                     keep F32, the default, and use --export-bf16 for a BF16 copy)\n"
    "  --export-bf16 DIR  at the end, also write the final weights as BF16 (config.json +\n"
    "                     model.safetensors) to DIR; with --resume CKPT and --steps equal to its\n"
    "                     step this only converts\n"
    "  --resume DIR       continue from a checkpoint directory; sizes, optimiser settings and seed\n"
    "                     come from it (only --steps, --threads, --out, --data, --tokenizer and the\n"
    "                     intervals may be given); bit-identical to an uninterrupted run\n"
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

typedef struct TrainRun {
    MpTrainConfig cfg;
    MpTrainOptConfig opt;
    uint64_t seed;
    int bf16;
    const char *out;
    double val_frac;
} TrainRun;

static void fill_header(MpTrainOptHeader *h, const TrainRun *r, const MpTrainData *d, const MpTrainTokFiles *tok,
                        size_t n_params, int64_t step) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MP_TRAIN_OPT_MAGIC, 8);
    h->version = MP_TRAIN_OPT_VERSION;
    h->header_bytes = sizeof *h;
    const MpTrainConfig *c = &r->cfg;
    h->layers = c->layers;
    h->dim = c->dim;
    h->heads = c->heads;
    h->kv_heads = c->kv_heads;
    h->ffn = c->ffn;
    h->vocab = c->vocab;
    h->seq = c->seq;
    h->batch = c->batch;
    h->pos = (int32_t)c->pos;
    h->tie = c->tie;
    h->n_params = n_params;
    h->step = step;
    h->seed = r->seed;
    h->data_hash = d->hash;
    h->lr = r->opt.lr;
    h->min_lr_frac = r->opt.min_lr_frac;
    h->beta1 = r->opt.beta1;
    h->beta2 = r->opt.beta2;
    h->eps = r->opt.eps;
    h->wd = r->opt.wd;
    h->clip = r->opt.clip;
    h->warmup = r->opt.warmup;
    h->steps = r->opt.steps;
    h->rope_theta = c->rope_theta;
    h->norm_eps = c->norm_eps;
    h->init_std = c->init_std;
    h->val_frac = r->val_frac;
    h->dtype = r->bf16;
    h->bos = c->bos;
    h->tok_hash = tok ? tok->hash : 0;
}

static void from_header(TrainRun *r, const MpTrainOptHeader *h) {
    MpTrainConfig *c = &r->cfg;
    c->layers = h->layers;
    c->dim = h->dim;
    c->heads = h->heads;
    c->kv_heads = h->kv_heads;
    c->ffn = h->ffn;
    c->vocab = h->vocab;
    c->seq = h->seq;
    c->batch = h->batch;
    c->pos = h->pos == 1 ? MP_TRAIN_POS_NONE : MP_TRAIN_POS_ROPE;
    c->tie = h->tie;
    c->bos = h->bos != 0;
    c->rope_theta = h->rope_theta;
    c->norm_eps = h->norm_eps;
    c->init_std = h->init_std;
    r->seed = h->seed;
    r->opt.lr = h->lr;
    r->opt.min_lr_frac = h->min_lr_frac;
    r->opt.beta1 = h->beta1;
    r->opt.beta2 = h->beta2;
    r->opt.eps = h->eps;
    r->opt.wd = h->wd;
    r->opt.clip = h->clip;
    r->opt.warmup = h->warmup;
    r->opt.steps = h->steps;
    r->val_frac = h->val_frac;
    r->bf16 = h->dtype;
}

/* Bytes the run will hold, estimated to refuse a model that cannot fit before allocating it:
 * parameters, gradients and AdamW m, v (4 copies), activations and scratch of
 * mp_train_model_init (per layer B*T*(NH*T + 8C + 3FF), the B*T*V logits three times, the
 * attention maps once more), and the corpus ids. Large vocabularies dominate through V*C and
 * B*T*V. */
static double train_mem_bytes(const MpTrainConfig *c, size_t n_params, size_t n_ids) {
    double N = (double)c->batch * c->seq;
    double acts = (double)c->layers * N * ((double)c->heads * c->seq + 8.0 * c->dim + 3.0 * c->ffn) +
                  3.0 * N * c->vocab + (double)c->batch * c->heads * c->seq * c->seq + 3.0 * N * c->ffn +
                  (double)c->vocab * c->dim;
    return 4.0 * (4.0 * (double)n_params + acts) + 4.0 * (double)n_ids;
}

static double train_phys_bytes(void) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    return pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
}

/* Mean validation loss over nb batches of validation windows (double). */
static double val_loss(MpTrainModel_f32 *m, const MpTrainData *d, int32_t *in, int32_t *tg, int nb) {
    const MpTrainConfig *c = &m->cfg;
    double s = 0;
    for (int b = 0; b < nb; b++) {
        mp_train_data_val_batch(in, tg, d, c->batch, c->seq, (int64_t)b * c->batch);
        s += mp_train_forward_f32(m, in, tg);
    }
    return s / nb;
}

typedef struct LogRow {
    int64_t step;
    double lr, loss, norm, val, tok_s;
} LogRow;

/* Rows of an existing OUT/log.csv with step <= upto (a resumed run continues the file). */
static char *read_old_log(const char *out, int64_t upto) {
    char path[4200], line[512];
    snprintf(path, sizeof path, "%s/log.csv", out);
    FILE *f = mp_input_open(path, NULL, NULL);
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = mp_malloc_or_die(cap, "old log");
    buf[0] = 0;
    if (!fgets(line, sizeof line, f)) line[0] = 0; /* header */
    while (fgets(line, sizeof line, f)) {
        long long st;
        if (sscanf(line, "%lld,", &st) != 1 || st > upto) continue;
        size_t k = strlen(line);
        if (n + k + 1 > cap) {
            cap = 2 * (n + k + 1);
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        memcpy(buf + n, line, k + 1);
        n += k;
    }
    fclose(f);
    return buf;
}

static int write_log(const char *out, const char *old, const LogRow *rows, int64_t n, MpErr *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/log.csv", out);
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    fprintf(af.f, "step,lr,loss,grad_norm,val_loss,tokens_per_s\n");
    if (old) fputs(old, af.f);
    for (int64_t i = 0; i < n; i++) {
        fprintf(af.f, "%lld,%.6g,%.6f,%.6g,", (long long)rows[i].step, rows[i].lr, rows[i].loss, rows[i].norm);
        if (isnan(rows[i].val)) fprintf(af.f, ",");
        else fprintf(af.f, "%.6f,", rows[i].val);
        fprintf(af.f, "%.1f\n", rows[i].tok_s);
    }
    return mp_atomic_commit(&af, e);
}

/* A flag's value within its range of mp_train_ranges (shared with the resume check). */
static double train_flag(const char *cmd, MpTrainSetting s, const char *arg) {
    return mp_cli_double(cmd, mp_train_ranges[s].name, arg, mp_train_ranges[s].lo, mp_train_ranges[s].hi);
}
static int64_t train_flag_i64(const char *cmd, MpTrainSetting s, const char *arg) {
    return mp_cli_i64(cmd, mp_train_ranges[s].name, arg, (int64_t)mp_train_ranges[s].lo, (int64_t)mp_train_ranges[s].hi);
}

int mp_cmd_train(int argc, char **argv) {
    const char *cmd = "train";
    TrainRun run;
    memset(&run, 0, sizeof run);
    mp_train_config_default(&run.cfg);
    mp_train_opt_default(&run.opt);
    run.val_frac = 0.05;
    const char *data_path = NULL, *resume = NULL, *dump_batches = NULL, *export_dir = NULL, *tok_path = NULL;
    int64_t ckpt_every = 100, eval_every = -1, log_every = 10, stop_after = -1, steps_flag = -1;
    int val_batches = 4, threads = 0, quiet = 0, save_init = 0, model_flags = 0, force = 0;
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
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'L': run.cfg.layers = (int)mp_cli_i64(cmd, "--layers", optarg, 1, 256); model_flags++; break;
        case 'C': run.cfg.dim = (int)mp_cli_i64(cmd, "--dim", optarg, 2, 16384); model_flags++; break;
        case 'H': run.cfg.heads = (int)mp_cli_i64(cmd, "--heads", optarg, 1, 1024); model_flags++; break;
        case 'K': run.cfg.kv_heads = (int)mp_cli_i64(cmd, "--kv-heads", optarg, 1, 1024); model_flags++; break;
        case 'F': run.cfg.ffn = (int)mp_cli_i64(cmd, "--ffn", optarg, 1, 65536); model_flags++; break;
        case 'T': run.cfg.seq = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 8192); model_flags++; break;
        case 'P':
            if (!strcmp(optarg, "rope")) run.cfg.pos = MP_TRAIN_POS_ROPE;
            else if (!strcmp(optarg, "none")) run.cfg.pos = MP_TRAIN_POS_NONE;
            else return mp_cli_error(cmd, "--pos: '%s' is not rope or none", optarg);
            model_flags++;
            break;
        case 'R': run.cfg.rope_theta = mp_cli_double(cmd, "--rope-theta", optarg, 1.0000001, 1e12); model_flags++; break;
        case 'y': run.cfg.tie = 1; model_flags++; break;
        case 'O': run.cfg.bos = 1; model_flags++; break;
        case 'B': run.cfg.batch = (int)mp_cli_i64(cmd, "--batch", optarg, 1, 65536); model_flags++; break;
        case 'N': steps_flag = train_flag_i64(cmd, MP_TRAIN_SET_STEPS, optarg); break;
        case 'l': run.opt.lr = train_flag(cmd, MP_TRAIN_SET_LR, optarg); model_flags++; break;
        case 'm': run.opt.min_lr_frac = train_flag(cmd, MP_TRAIN_SET_MIN_LR_FRAC, optarg); model_flags++; break;
        case 'w': run.opt.warmup = train_flag_i64(cmd, MP_TRAIN_SET_WARMUP, optarg); model_flags++; break;
        case 'W': run.opt.wd = train_flag(cmd, MP_TRAIN_SET_WD, optarg); model_flags++; break;
        case 'c': run.opt.clip = train_flag(cmd, MP_TRAIN_SET_CLIP, optarg); model_flags++; break;
        case '2': run.opt.beta2 = train_flag(cmd, MP_TRAIN_SET_BETA2, optarg); model_flags++; break;
        case 's': run.seed = (uint64_t)mp_cli_i64(cmd, "--seed", optarg, 0, INT64_MAX); model_flags++; break;
        case 'd': data_path = optarg; break;
        case 'o': run.out = optarg; break;
        case 'k': ckpt_every = mp_cli_i64(cmd, "--checkpoint-every", optarg, 1, INT64_C(1) << 40); break;
        case 'e': eval_every = mp_cli_i64(cmd, "--eval-every", optarg, 1, INT64_C(1) << 40); break;
        case 'v': val_batches = (int)mp_cli_i64(cmd, "--val-batches", optarg, 1, 100000); break;
        case 'g': log_every = mp_cli_i64(cmd, "--log-every", optarg, 1, INT64_C(1) << 40); break;
        case 'b': run.bf16 = 1; model_flags++; break;
        case 'r': resume = optarg; break;
        case 'j': threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, 1024); break;
        case 'q': quiet = 1; break;
        case 'S': stop_after = mp_cli_i64(cmd, "--stop-after", optarg, 1, INT64_C(1) << 40); break;
        case 'I': save_init = 1; break;
        case 'D': dump_batches = optarg; break;
        case 'X': export_dir = optarg; break;
        case 't': tok_path = optarg; break;
        case 'f': force = 1; break;
        case 'h': fputs(train_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!data_path) return mp_cli_error(cmd, "--data FILE is required");
    if (!run.out) return mp_cli_error(cmd, "--out DIR is required");
    if (eval_every < 0) eval_every = ckpt_every;
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    MpErr e;
    int rc = MP_EXIT_OK;
    MpTrainOptHeader rh;
    float *m_state = NULL, *v_state = NULL;
    int64_t step0 = 0;
    MpTok tok;
    MpTrainTokFiles tokf;
    MpTrainData data;
    MpTrainModel_f32 model;
    memset(&tok, 0, sizeof tok);
    memset(&tokf, 0, sizeof tokf);
    memset(&data, 0, sizeof data);
    memset(&model, 0, sizeof model);
    int use_tok = tok_path != NULL;
    if (resume) {
        if (model_flags) {
            rc = mp_cli_error(cmd, "--resume takes sizes, optimiser settings and seed from the checkpoint; drop "
                                   "those flags (only --steps, --threads, --out, --data, --tokenizer, intervals may be "
                                   "given)");
            goto done;
        }
        char p[4200];
        snprintf(p, sizeof p, "%s/optimizer.bin", resume);
        if (mp_train_opt_read(p, &rh, &m_state, &v_state, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
        from_header(&run, &rh);
        step0 = rh.step;
        if (rh.dtype) {
            rc = mp_cli_error(cmd, "%s holds BF16 weights: exact resumption needs an F32 checkpoint", resume);
            goto done;
        }
        if (!rh.tok_hash && tok_path) {
            rc = mp_cli_error(cmd, "%s was trained on bytes (vocabulary 256): drop --tokenizer", resume);
            goto done;
        }
        use_tok = rh.tok_hash != 0;
        if (use_tok && !tok_path) tok_path = resume; /* the checkpoint's own copy */
    }
    if (steps_flag >= 0) run.opt.steps = steps_flag;
    if (step0 > run.opt.steps) {
        rc = mp_cli_error(cmd, "checkpoint is at step %lld, beyond --steps %lld", (long long)step0,
                          (long long)run.opt.steps);
        goto done;
    }
    if (use_tok) {
        if (mp_train_tok_open(&tok, &tokf, tok_path, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
        if (resume && tokf.hash != rh.tok_hash) {
            rc = mp_cli_error(cmd, "--tokenizer %s is not the tokenizer %s was trained with (FNV-1a %016llx, "
                                   "checkpoint %016llx)",
                              tok_path, resume, (unsigned long long)tokf.hash, (unsigned long long)rh.tok_hash);
            goto done;
        }
        if (!resume) run.cfg.vocab = tokf.n_ids;
        if (run.cfg.bos && tokf.bos_id < 0) {
            rc = mp_cli_error(cmd, "--bos: tokenizer %s adds no BOS token", tokf.src);
            goto done;
        }
    } else if (!resume)
        run.cfg.vocab = 256 + run.cfg.bos; /* bytes; BOS is id 256 */
    if (mp_train_config_check(&run.cfg, &e) != MP_OK) {
        rc = use_tok ? mp_cli_error(cmd, "tokenizer %s (%d ids): %s", tokf.src, tokf.n_ids, e.msg)
                     : mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (use_tok ? run.cfg.vocab != tokf.n_ids : run.cfg.vocab != 256 + run.cfg.bos) {
        rc = mp_cli_error(cmd, "checkpoint vocabulary %d differs from %s (%d)", run.cfg.vocab,
                          use_tok ? "the tokenizer's" : "the byte vocabulary", use_tok ? tokf.n_ids : 256 + run.cfg.bos);
        goto done;
    }
    {
        /* refuse a model that cannot fit before allocating it (overcommit would let calloc
         * succeed and the kernel kill the run later) */
        MpTrainLayout lay;
        if (mp_train_layout_init(&lay, &run.cfg, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
        double need = train_mem_bytes(&run.cfg, lay.total, 0), have = train_phys_bytes();
        size_t total = lay.total;
        mp_train_layout_free(&lay);
        if (have > 0 && need > have) {
            rc = mp_cli_error(cmd, "vocabulary %d with --dim %d, --batch %d, --seq %d needs about %.1f GB (%zu "
                                   "parameters x 4, %d x %d x %d logits x 3), more than the %.1f GB of this machine: "
                                   "lower --batch/--seq/--dim or use a smaller vocabulary",
                              run.cfg.vocab, run.cfg.dim, run.cfg.batch, run.cfg.seq, need / 1e9, total, run.cfg.batch,
                              run.cfg.seq, run.cfg.vocab, have / 1e9);
            goto done;
        }
    }
    double t_tok = mp_time_now();
    if (mp_train_data_open(&data, data_path, use_tok ? &tok : NULL, run.val_frac, run.cfg.seq, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    t_tok = mp_time_now() - t_tok;
    data.bos = !run.cfg.bos ? -1 : use_tok ? tokf.bos_id : 256;
    mp_tok_free(&tok); /* the ids are all it was needed for; tokf keeps the files */
    if (resume && data.hash != rh.data_hash) {
        rc = mp_cli_error(cmd, "%s is not the corpus the checkpoint was trained on (hash differs)", data_path);
        goto done;
    }
    /* one run per folder (--resume continues it, --force replaces it); the output directory
     * must be writable before any work is done */
    if (mp_outdir_claim(run.out, "train", resume ? MP_OUTDIR_RESUME : force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) !=
        MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }

    if (mp_train_model_init_f32(&model, &run.cfg, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    const size_t np = model.lay.total;
    const int B = run.cfg.batch, T = run.cfg.seq;
    /* per-run block: optimiser state (unless resumed) and the batch buffers */
    int32_t *ids = mp_malloc_or_die((size_t)4 * B * T * sizeof(int32_t), "batch buffers");
    int32_t *inputs = ids, *targets = ids + (size_t)B * T, *vin = targets + (size_t)B * T, *vtg = vin + (size_t)B * T;
    if (resume) {
        if (rh.n_params != np ||
            mp_train_ckpt_load_params(model.params, resume, &run.cfg, &model.lay, &e) != MP_OK) {
            if (rh.n_params != np) snprintf(e.msg, sizeof e.msg, "%s: parameter count differs", resume);
            free(ids);
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
    } else {
        mp_train_init_params(model.params, &model.lay, &run.cfg, run.seed);
        m_state = mp_calloc_or_die(np, sizeof(float), "AdamW m");
        v_state = mp_calloc_or_die(np, sizeof(float), "AdamW v");
    }
    if (dump_batches) {
        int64_t ns = run.opt.steps - step0;
        size_t per = (size_t)2 * B * T;
        int32_t *all = mp_malloc_or_die((size_t)(ns > 0 ? ns : 1) * per * sizeof(int32_t), "batch dump");
        for (int64_t s = 0; s < ns; s++)
            mp_train_data_batch(all + (size_t)s * per, all + (size_t)s * per + (size_t)B * T, &data, B, T, run.seed,
                                step0 + s);
        int64_t shp[4] = {ns, 2, B, T};
        if (mp_npy_write(dump_batches, MP_DT_I32, all, 4, shp, &e) != MP_OK) rc = mp_cli_error(cmd, "%s", e.msg);
        free(all);
    }
    char dir[4200];
    MpTrainOptHeader h;
    const MpTrainTokFiles *tkf = use_tok ? &tokf : NULL;
    if (rc == MP_OK && save_init && !resume) {
        snprintf(dir, sizeof dir, "%s/step-%06lld", run.out, 0LL);
        fill_header(&h, &run, &data, tkf, np, 0);
        if (mp_train_ckpt_write_tok(dir, &run.cfg, &model.lay, model.params, m_state, v_state, &h, run.bf16, tkf, &e) !=
            MP_OK)
            rc = mp_cli_error(cmd, "%s", e.msg);
    }
    char *old_log = resume ? read_old_log(run.out, step0) : NULL;
    int64_t nlog = run.opt.steps - step0;
    LogRow *log = mp_calloc_or_die((size_t)(nlog > 0 ? nlog : 1), sizeof *log, "log");
    int64_t nrows = 0;
    if (use_tok)
        printf("tokenizer %s: vocabulary %d; corpus %zu bytes -> %zu tokens (%.2f bytes/token) in %.1f s\n", tokf.src,
               tokf.n_ids, data.n_bytes, data.n, data.n ? (double)data.n_bytes / (double)data.n : 0.0, t_tok);
    printf("train: %d layers, dim %d, heads %d/%d, ffn %d, seq %d, batch %d, pos %s%s, %zu parameters; "
           "corpus %zu %s (%zu train); steps %lld..%lld, lr %g, seed %llu\n",
           run.cfg.layers, run.cfg.dim, run.cfg.heads, run.cfg.kv_heads, run.cfg.ffn, T, B,
           run.cfg.pos == MP_TRAIN_POS_ROPE ? "rope" : "none", run.cfg.tie ? ", tied" : "", np, data.n,
           use_tok ? "tokens" : "bytes", data.n_train, (long long)step0, (long long)run.opt.steps, run.opt.lr,
           (unsigned long long)run.seed);
    fflush(stdout);
    const char *last_ckpt = resume ? resume : NULL;
    char last_buf[4200] = "";
    double t_start = mp_time_now(), t_last = t_start;
    int64_t tok_since = 0;
    for (int64_t step = step0; step < run.opt.steps && rc == MP_EXIT_OK; step++) {
        double lr = mp_train_lr(&run.opt, step);
        mp_train_data_batch(inputs, targets, &data, B, T, run.seed, step);
        double loss = mp_train_forward_f32(&model, inputs, targets);
        double norm = NAN;
        if (isfinite(loss)) {
            mp_train_backward_f32(&model, inputs);
            norm = mp_train_clip(model.grads, np, run.opt.clip);
        }
        if (!isfinite(loss) || !isfinite(norm)) {
            rc = mp_cli_error(cmd, "%s at step %lld (lr %g): stopping; last good checkpoint: %s",
                              isfinite(loss) ? "non-finite gradient norm" : "non-finite loss", (long long)step + 1, lr,
                              last_ckpt ? last_ckpt : "none (nothing written)");
            break;
        }
        mp_train_adamw(model.params, m_state, v_state, model.grads, &model.lay, &run.opt, lr, step + 1);
        tok_since += (int64_t)B * T;
        int64_t done = step + 1;
        LogRow *row = &log[nrows++];
        row->step = done;
        row->lr = lr;
        row->loss = loss;
        row->norm = norm;
        row->val = NAN;
        double now = mp_time_now();
        row->tok_s = (double)tok_since / (now - t_last > 1e-9 ? now - t_last : 1e-9);
        int last = done == run.opt.steps || done == stop_after;
        if (done % eval_every == 0 || last) row->val = val_loss(&model, &data, vin, vtg, val_batches);
        if (!quiet && (done % log_every == 0 || last || done == step0 + 1)) {
            printf("step %6lld/%lld  lr %.3e  loss %.4f  |g| %.3f", (long long)done, (long long)run.opt.steps, lr, loss,
                   norm);
            if (!isnan(row->val)) printf("  val %.4f", row->val);
            printf("  %.0f tok/s\n", row->tok_s);
            fflush(stdout);
        }
        if (done % log_every == 0) {
            t_last = mp_time_now();
            tok_since = 0;
        }
        if (done % ckpt_every == 0 || last) {
            snprintf(dir, sizeof dir, "%s/step-%06lld", run.out, (long long)done);
            fill_header(&h, &run, &data, tkf, np, done);
            if (mp_train_ckpt_write_tok(dir, &run.cfg, &model.lay, model.params, m_state, v_state, &h, run.bf16, tkf,
                                        &e) != MP_OK ||
                write_log(run.out, old_log, log, nrows, &e) != MP_OK) {
                rc = mp_cli_error(cmd, "%s (last good checkpoint: %s)", e.msg, last_ckpt ? last_ckpt : "none");
                break;
            }
            snprintf(last_buf, sizeof last_buf, "%s", dir);
            last_ckpt = last_buf;
        }
        if (done == stop_after) {
            printf("stopped after step %lld as asked (--stop-after)\n", (long long)done);
            break;
        }
    }
    if (rc == MP_EXIT_OK) {
        double wall = mp_time_now() - t_start;
        printf("done: %lld steps in %.1f s (%.0f tok/s); last checkpoint %s\n", (long long)nrows, wall,
               wall > 0 ? (double)nrows * B * T / wall : 0.0, last_ckpt ? last_ckpt : "none");
    }
    if (rc == MP_EXIT_OK && export_dir) {
        fill_header(&h, &run, &data, tkf, np, run.opt.steps);
        if (mp_train_ckpt_write_tok(export_dir, &run.cfg, &model.lay, model.params, NULL, NULL, &h, 1, tkf, &e) != MP_OK)
            rc = mp_cli_error(cmd, "--export-bf16: %s", e.msg);
        else
            printf("wrote BF16 copy of the final weights: %s\n", export_dir);
    }
    free(old_log);
    free(log);
    free(ids);
done: /* setup failures jump here: everything below is zeroed or owned from the start */
    free(m_state);
    free(v_state);
    mp_train_model_free_f32(&model);
    mp_train_data_free(&data);
    mp_tok_free(&tok);
    mp_train_tok_files_free(&tokf);
    return rc;
}
