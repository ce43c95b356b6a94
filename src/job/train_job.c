/* train_job.c — see train_job.h. Set-up (resume, tokenizer, sizes, memory, corpus, folder, weights),
 * the step loop, the end (log, checkpoints, export). */
#include "job/train_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/files.h" /* mp_outdir_claim */
#include "core/npy.h"   /* mp_npy_write (dump_batches) */
#include "core/util.h"  /* mp_threads_resolve, mp_time_now, MpAtomicFile, mp_input_open */
#include "tok/tok.h"    /* MpTok: the tokenizer */

void mp_train_job_config_init(MpTrainJobConfig *c) {
    memset(c, 0, sizeof *c);
    mp_train_config_default(&c->cfg);
    mp_train_opt_default(&c->opt);
    c->val_frac = 0.05;
    c->steps = -1;
    c->checkpoint_every = 0; /* not given: 100, or the resumed run's */
    c->eval_every = -1;
    c->log_every = 10;
    c->stop_after = -1;
    c->val_batches = 4;
}

typedef struct TrainRun {
    MpTrainConfig cfg;
    MpTrainOptConfig opt;
    uint64_t seed;
    int bf16;
    const char *out;
    double val_frac;
    int64_t ckpt_every, eval_every; /* the intervals in force: given, else the resumed run's, else 100 */
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
    h->checkpoint_every = r->ckpt_every;
    h->eval_every = r->eval_every;
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
    char *buf = mp_try_malloc(cap);
    if (!buf) {
        fclose(f);
        return NULL;
    }
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

/* Everything a run holds; freed by train_job_free (reverse order of creation). */
typedef struct TrainJob {
    const MpTrainJobConfig *c;
    TrainRun run;
    MpTrainOptHeader rh;        /* the resumed checkpoint's header */
    float *m_state, *v_state;   /* AdamW state [np] */
    int64_t step0;
    int use_tok;
    const char *tok_path;
    MpTok tok;
    MpTrainTokFiles tokf;
    MpTrainData data;
    double t_tok;               /* seconds to read and encode the corpus */
    MpTrainModel_f32 model;
    int32_t *ids;               /* [4, B, T] inputs, targets, validation inputs, targets */
    char *old_log;
    LogRow *log;
    int64_t nrows;
    int claimed;                /* 1: c->out is claimed, 2: c->export_dir too */
} TrainJob;

static void train_job_free(TrainJob *j) {
    free(j->log);
    free(j->old_log);
    free(j->ids);
    free(j->m_state);
    free(j->v_state);
    mp_train_model_free_f32(&j->model);
    mp_train_data_free(&j->data);
    mp_tok_free(&j->tok);
    mp_train_tok_files_free(&j->tokf);
}

/* resume: sizes, settings and state from the checkpoint's optimizer.bin. */
static int train_resume(TrainJob *j, MpErr *e) {
    const MpTrainJobConfig *c = j->c;
    if (c->model_flags)
        return mp_err_set(e, "--resume takes sizes, optimiser settings and seed from the checkpoint; drop "
                             "those flags (only --steps, --threads, --out, --data, --tokenizer, intervals may be "
                             "given)");
    char p[4200];
    snprintf(p, sizeof p, "%s/optimizer.bin", c->resume);
    if (mp_train_opt_read(p, &j->rh, &j->m_state, &j->v_state, e) != MP_OK) return MP_ERR;
    from_header(&j->run, &j->rh);
    j->step0 = j->rh.step;
    if (j->rh.dtype) return mp_err_set(e, "%s holds BF16 weights: exact resumption needs an F32 checkpoint", c->resume);
    if (!j->rh.tok_hash && c->tokenizer)
        return mp_err_set(e, "%s was trained on bytes (vocabulary 256): drop --tokenizer", c->resume);
    j->use_tok = j->rh.tok_hash != 0;
    if (j->use_tok && !j->tok_path) j->tok_path = c->resume; /* the checkpoint's own copy */
    return MP_OK;
}

/* The vocabulary (tokenizer or bytes) and the sizes' check. */
static int train_vocab(TrainJob *j, MpErr *e) {
    const MpTrainJobConfig *c = j->c;
    MpTrainConfig *cfg = &j->run.cfg;
    if (j->use_tok) {
        if (mp_train_tok_open(&j->tok, &j->tokf, j->tok_path, e) != MP_OK) return MP_ERR;
        if (c->resume && j->tokf.hash != j->rh.tok_hash)
            return mp_err_set(e, "--tokenizer %s is not the tokenizer %s was trained with (FNV-1a %016llx, "
                                 "checkpoint %016llx)",
                              j->tok_path, c->resume, (unsigned long long)j->tokf.hash, (unsigned long long)j->rh.tok_hash);
        if (!c->resume) cfg->vocab = j->tokf.n_ids;
        if (cfg->bos && j->tokf.bos_id < 0) return mp_err_set(e, "--bos: tokenizer %s adds no BOS token", j->tokf.src);
    } else if (!c->resume)
        cfg->vocab = 256 + cfg->bos; /* bytes; BOS is id 256 */
    if (mp_train_config_check(cfg, e) != MP_OK)
        return j->use_tok ? mp_err_prefix(e, "tokenizer %s (%d ids)", j->tokf.src, j->tokf.n_ids) : MP_ERR;
    if (j->use_tok ? cfg->vocab != j->tokf.n_ids : cfg->vocab != 256 + cfg->bos)
        return mp_err_set(e, "checkpoint vocabulary %d differs from %s (%d)", cfg->vocab,
                          j->use_tok ? "the tokenizer's" : "the byte vocabulary", j->use_tok ? j->tokf.n_ids : 256 + cfg->bos);
    return MP_OK;
}

/* Refuses a model that cannot fit before allocating it (overcommit would let calloc succeed and
 * the kernel kill the run later). */
static int train_fits(const TrainJob *j, MpErr *e) {
    const MpTrainConfig *cfg = &j->run.cfg;
    MpTrainLayout lay;
    if (mp_train_layout_init(&lay, cfg, e) != MP_OK) return MP_ERR;
    double need = train_mem_bytes(cfg, lay.total, 0), have = train_phys_bytes();
    size_t total = lay.total;
    mp_train_layout_free(&lay);
    if (have > 0 && need > have)
        return mp_err_set(e, "vocabulary %d with --dim %d, --batch %d, --seq %d needs about %.1f GB (%zu "
                             "parameters x 4, %d x %d x %d logits x 3), more than the %.1f GB of this machine: "
                             "lower --batch/--seq/--dim or use a smaller vocabulary",
                          cfg->vocab, cfg->dim, cfg->batch, cfg->seq, need / 1e9, total, cfg->batch, cfg->seq, cfg->vocab,
                          have / 1e9);
    return MP_OK;
}

/* The corpus, the folder, the model and its weights, the batch buffers. */
/* The run's key in its --out folder's marker (files.h mp_outdir_key): everything that makes the run
 * (sizes, seed, corpus, tokenizer, optimiser), not how far it goes (step, --steps, the intervals).
 * A --resume of another run's checkpoint into a folder that holds this one's is refused (issue
 * 40: its checkpoints and log.csv rows were mixed with the other run's, exit 0). */
static int train_key(const TrainJob *j, size_t np, MpErr *e) {
    MpTrainOptHeader h;
    TrainRun run = j->run;
    run.opt.steps = run.ckpt_every = run.eval_every = 0;
    run.bf16 = 0;
    fill_header(&h, &run, &j->data, j->use_tok ? &j->tokf : NULL, np, 0);
    char hex[32];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)mp_fnv1a64(&h, sizeof h, MP_FNV_INIT));
    return mp_outdir_key(j->c->out, hex, e);
}

static int train_open(TrainJob *j, MpErr *e) {
    const MpTrainJobConfig *c = j->c;
    const MpTrainConfig *cfg = &j->run.cfg;
    double t_tok = mp_time_now();
    if (mp_train_data_open(&j->data, c->data, j->use_tok ? &j->tok : NULL, j->run.val_frac, cfg->seq, e) != MP_OK)
        return MP_ERR;
    j->t_tok = mp_time_now() - t_tok;
    j->data.bos = !cfg->bos ? -1 : j->use_tok ? j->tokf.bos_id : 256;
    mp_tok_free(&j->tok); /* the ids are all it was needed for; tokf keeps the files */
    if (c->resume && j->data.hash != j->rh.data_hash)
        return mp_err_set(e, "%s is not the corpus the checkpoint was trained on (hash differs)", c->data);
    /* one run per folder (resume continues it, force replaces it); the output directory must be
     * writable before any work is done */
    if (mp_outdir_claim(c->out, "train", c->resume ? MP_OUTDIR_RESUME : (MpOutdirMode)c->out_mode, e) != MP_OK)
        return MP_ERR;
    j->claimed = 1;
    /* the BF16 copy's folder and the batch dump follow the same rule: nothing there is replaced
     * without --force (and a folder maskpos did not write, never) */
    const int force = c->out_mode == MP_OUTDIR_FORCE;
    if (c->export_dir && mp_outdir_claim(c->export_dir, "train", force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, e) != MP_OK)
        return mp_err_prefix(e, "--export-bf16");
    j->claimed |= c->export_dir ? 2 : 0;
    if (c->dump_batches && mp_outfile_claim(c->dump_batches, force, e) != MP_OK) return mp_err_prefix(e, "--dump-batches");
    if (mp_train_model_init_f32(&j->model, cfg, e) != MP_OK) return MP_ERR;
    const size_t np = j->model.lay.total;
    if (train_key(j, np, e) != MP_OK) return MP_ERR;
    const int B = cfg->batch, T = cfg->seq;
    j->ids = mp_try_malloc((size_t)4 * B * T * sizeof(int32_t));
    if (!j->ids) return mp_err_set(e, "out of memory for the batch buffers");
    if (c->resume) {
        if (j->rh.n_params != np) return mp_err_set(e, "%s: parameter count differs", c->resume);
        if (mp_train_ckpt_load_params(j->model.params, c->resume, cfg, &j->model.lay, &j->rh, e) != MP_OK) return MP_ERR;
    } else {
        mp_train_init_params(j->model.params, &j->model.lay, cfg, j->run.seed);
        j->m_state = mp_try_calloc(np, sizeof(float));
        j->v_state = mp_try_calloc(np, sizeof(float));
        if (!j->m_state || !j->v_state) return mp_err_set(e, "out of memory for the AdamW state (%zu parameters)", np);
    }
    return MP_OK;
}

/* dump_batches: the batches of the run's steps as int32 [steps, 2, B, T]. */
static int train_dump(const TrainJob *j, MpErr *e) {
    const int B = j->run.cfg.batch, T = j->run.cfg.seq;
    int64_t ns = j->run.opt.steps - j->step0;
    size_t per = (size_t)2 * B * T;
    int32_t *all = mp_try_malloc((size_t)(ns > 0 ? ns : 1) * per * sizeof(int32_t));
    if (!all) return mp_err_set(e, "out of memory for the batch dump");
    for (int64_t s = 0; s < ns; s++)
        mp_train_data_batch(all + (size_t)s * per, all + (size_t)s * per + (size_t)B * T, &j->data, B, T, j->run.seed,
                            j->step0 + s);
    int64_t shp[4] = {ns, 2, B, T};
    int rc = mp_npy_write(j->c->dump_batches, MP_DT_I32, all, 4, shp, e);
    free(all);
    return rc;
}

/* A checkpoint of the weights at step `done` into dir (m, v NULL: none; bf16: BF16 weights). */
static int train_ckpt(TrainJob *j, const char *dir, int64_t done, const float *m, const float *v, int bf16, MpErr *e) {
    MpTrainOptHeader h;
    const MpTrainTokFiles *tkf = j->use_tok ? &j->tokf : NULL;
    fill_header(&h, &j->run, &j->data, tkf, j->model.lay.total, done);
    return mp_train_ckpt_write_tok(dir, &j->run.cfg, &j->model.lay, j->model.params, m, v, &h, bf16, tkf, e);
}

static void train_banner(const TrainJob *j, FILE *lg) {
    const MpTrainConfig *cfg = &j->run.cfg;
    if (!lg) return;
    if (j->use_tok)
        fprintf(lg, "tokenizer %s: vocabulary %d; corpus %zu bytes -> %zu tokens (%.2f bytes/token) in %.1f s\n",
                j->tokf.src, j->tokf.n_ids, j->data.n_bytes, j->data.n,
                j->data.n ? (double)j->data.n_bytes / (double)j->data.n : 0.0, j->t_tok);
    fprintf(lg, "train: %d layers, dim %d, heads %d/%d, ffn %d, seq %d, batch %d, pos %s%s, %zu parameters; "
                "corpus %zu %s (%zu train); steps %lld..%lld, lr %g, seed %llu\n",
            cfg->layers, cfg->dim, cfg->heads, cfg->kv_heads, cfg->ffn, cfg->seq, cfg->batch,
            cfg->pos == MP_TRAIN_POS_ROPE ? "rope" : "none", cfg->tie ? ", tied" : "", j->model.lay.total, j->data.n,
            j->use_tok ? "tokens" : "bytes", j->data.n_train, (long long)j->step0, (long long)j->run.opt.steps,
            j->run.opt.lr, (unsigned long long)j->run.seed);
    fflush(lg);
}

/* The steps [step0, steps): one training step each, with validation, the printed line, the log
 * and checkpoints. */
static int train_loop(TrainJob *j, MpTrainJobResult *r, MpErr *e) {
    const MpTrainJobConfig *c = j->c;
    const int B = j->run.cfg.batch, T = j->run.cfg.seq;
    const size_t np = j->model.lay.total;
    const int64_t eval_every = j->run.eval_every;
    int32_t *inputs = j->ids, *targets = j->ids + (size_t)B * T, *vin = targets + (size_t)B * T, *vtg = vin + (size_t)B * T;
    FILE *lg = c->log;
    double t_last = mp_time_now();
    int64_t tok_since = 0;
    if (c->progress && c->progress(c->progress_ctx, j->step0, j->run.opt.steps)) return mp_err_set(e, MP_JOB_STOPPED_MSG);
    for (int64_t step = j->step0; step < j->run.opt.steps; step++) {
        double lr = mp_train_lr(&j->run.opt, step);
        mp_train_data_batch(inputs, targets, &j->data, B, T, j->run.seed, step);
        double loss = mp_train_forward_f32(&j->model, inputs, targets), norm = NAN;
        if (isfinite(loss)) {
            mp_train_backward_f32(&j->model, inputs);
            norm = mp_train_clip(j->model.grads, np, j->run.opt.clip);
        }
        if (!isfinite(loss) || !isfinite(norm))
            return mp_err_set(e, "%s at step %lld (lr %g): stopping; last good checkpoint: %s",
                              isfinite(loss) ? "non-finite gradient norm" : "non-finite loss", (long long)step + 1, lr,
                              r->last_checkpoint[0] ? r->last_checkpoint : "none (nothing written)");
        mp_train_adamw(j->model.params, j->m_state, j->v_state, j->model.grads, &j->model.lay, &j->run.opt, lr, step + 1);
        tok_since += (int64_t)B * T;
        const int64_t done = step + 1;
        LogRow *row = &j->log[j->nrows++];
        *row = (LogRow){.step = done, .lr = lr, .loss = loss, .norm = norm, .val = NAN};
        double now = mp_time_now();
        row->tok_s = (double)tok_since / (now - t_last > 1e-9 ? now - t_last : 1e-9);
        const int stop = c->progress && c->progress(c->progress_ctx, done, j->run.opt.steps);
        const int last = done == j->run.opt.steps || done == c->stop_after || stop;
        if (done % eval_every == 0 || last) row->val = val_loss(&j->model, &j->data, vin, vtg, c->val_batches);
        if (lg && !c->quiet && (done % c->log_every == 0 || last || done == j->step0 + 1)) {
            fprintf(lg, "step %6lld/%lld  lr %.3e  loss %.4f  |g| %.3f", (long long)done, (long long)j->run.opt.steps, lr,
                    loss, norm);
            if (!isnan(row->val)) fprintf(lg, "  val %.4f", row->val);
            fprintf(lg, "  %.0f tok/s\n", row->tok_s);
            fflush(lg);
        }
        if (done % c->log_every == 0) {
            t_last = mp_time_now();
            tok_since = 0;
        }
        r->last_step = done, r->last_loss = loss, r->last_val = row->val, r->steps_run = j->nrows;
        if (done % j->run.ckpt_every == 0 || last) {
            char dir[4200];
            snprintf(dir, sizeof dir, "%s/step-%06lld", c->out, (long long)done);
            if (train_ckpt(j, dir, done, j->m_state, j->v_state, j->run.bf16, e) != MP_OK ||
                write_log(c->out, j->old_log, j->log, j->nrows, e) != MP_OK) {
                char msg[sizeof e->msg];
                memcpy(msg, e->msg, sizeof msg);
                return mp_err_set(e, "%.900s (last good checkpoint: %s)", msg, r->last_checkpoint[0] ? r->last_checkpoint : "none");
            }
            snprintf(r->last_checkpoint, sizeof r->last_checkpoint, "%s", dir);
        }
        if (stop) return mp_err_set(e, MP_JOB_STOPPED_MSG);
        if (done == c->stop_after) {
            if (lg) fprintf(lg, "stopped after step %lld as asked (--stop-after)\n", (long long)done);
            break;
        }
    }
    return MP_OK;
}

/* Everything before the loop. */
static int train_setup(TrainJob *j, MpErr *e) {
    const MpTrainJobConfig *c = j->c;
    if (!c->data) return mp_err_set(e, "--data FILE is required");
    if (!c->out) return mp_err_set(e, "--out DIR is required");
    j->run.cfg = c->cfg, j->run.opt = c->opt, j->run.seed = c->seed, j->run.bf16 = c->bf16;
    j->run.out = c->out, j->run.val_frac = c->val_frac;
    j->tok_path = c->tokenizer;
    j->use_tok = c->tokenizer != NULL;
    if (c->resume && train_resume(j, e) != MP_OK) return MP_ERR;
    /* intervals: a flag given wins; else the resumed run's (0 in an older optimizer.bin); else 100
     * for checkpoints, and evaluation with every checkpoint */
    const int64_t hk = c->resume ? j->rh.checkpoint_every : 0, he = c->resume ? j->rh.eval_every : 0;
    j->run.ckpt_every = c->checkpoint_every > 0 ? c->checkpoint_every : hk > 0 ? hk : 100;
    j->run.eval_every = c->eval_every > 0 ? c->eval_every : he > 0 ? he : j->run.ckpt_every;
    if (c->steps >= 0) j->run.opt.steps = c->steps;
    if (j->step0 > j->run.opt.steps)
        return mp_err_set(e, "checkpoint is at step %lld, beyond --steps %lld", (long long)j->step0,
                          (long long)j->run.opt.steps);
    if (train_vocab(j, e) != MP_OK || train_fits(j, e) != MP_OK || train_open(j, e) != MP_OK) return MP_ERR;
    if (c->dump_batches && train_dump(j, e) != MP_OK) return MP_ERR;
    if (c->save_init && !c->resume) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/step-%06lld", c->out, 0LL);
        if (train_ckpt(j, dir, 0, j->m_state, j->v_state, j->run.bf16, e) != MP_OK) return MP_ERR;
    }
    j->old_log = c->resume ? read_old_log(c->out, j->step0) : NULL;
    const int64_t nlog = j->run.opt.steps - j->step0;
    j->log = mp_try_calloc((size_t)(nlog > 0 ? nlog : 1), sizeof *j->log);
    if (!j->log) return mp_err_set(e, "out of memory for the log");
    return MP_OK;
}

int mp_train_job_run(MpTrainJobResult *r, const MpTrainJobConfig *c, MpErr *e) {
    memset(r, 0, sizeof *r);
    r->last_loss = r->last_val = NAN;
    int nt; /* --threads, else OMP_NUM_THREADS or the cores: under the one cap */
    if (mp_threads_resolve(c->threads, "threads", &nt, e) != MP_OK) return MP_ERR;
#ifdef _OPENMP
    if (c->threads > 0) omp_set_num_threads(c->threads);
#endif
    TrainJob j;
    memset(&j, 0, sizeof j);
    j.c = c;
    int rc = train_setup(&j, e);
    if (rc == MP_OK) {
        r->step0 = j.step0;
        r->n_params = j.model.lay.total;
        if (c->resume) snprintf(r->last_checkpoint, sizeof r->last_checkpoint, "%s", c->resume);
        train_banner(&j, c->log);
        const double t_start = mp_time_now();
        rc = train_loop(&j, r, e);
        r->wall_s = mp_time_now() - t_start;
    }
    if (rc == MP_OK && c->log)
        fprintf(c->log, "done: %lld steps in %.1f s (%.0f tok/s); last checkpoint %s\n", (long long)r->steps_run, r->wall_s,
                r->wall_s > 0 ? (double)r->steps_run * j.run.cfg.batch * j.run.cfg.seq / r->wall_s : 0.0,
                r->last_checkpoint[0] ? r->last_checkpoint : "none");
    if (rc == MP_OK && c->export_dir) {
        if (train_ckpt(&j, c->export_dir, j.run.opt.steps, NULL, NULL, 1, e) != MP_OK) rc = mp_err_prefix(e, "--export-bf16");
        else if (c->log) fprintf(c->log, "wrote BF16 copy of the final weights: %s\n", c->export_dir);
    }
    train_job_free(&j);
    if (j.claimed & 1) mp_outdir_release(c->out); /* the folders' locks go with the job */
    if (j.claimed & 2) mp_outdir_release(c->export_dir);
    return rc;
}
