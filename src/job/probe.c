/* probe.c — see probe.h. The run: set-up (model, layers, tokens, memory plan, output folder,
 * accumulator, run key, resume), the loop over sequences, and the result (maps, statistics,
 * meta.json). Writing and printing the result: probe_out.c.
 *
 * Test hook: MASKPOS_TEST_KILL_AFTER=K makes the process SIGKILL itself after K sequences (after
 * any checkpoint due then) — tests/test_model_probe.c uses it to test resuming; under mpirun,
 * MASKPOS_TEST_KILL_RANK=R makes rank R do it, once it has computed a sequence >= K - 1 (before
 * sending it).
 */
#include "job/probe.h"

#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/files.h"    /* mp_outdir_claim */
#include "core/json.h"     /* MP_VERSION */
#include "core/mpi.h"      /* mp_mpi_rank, mp_mpi_size, mp_mpi_agree */
#include "core/util.h"     /* mp_parse_range_list, mp_path_join, mp_time_now, mp_fnv1a64,
                              mp_threads_resolve */
#include "job/probe_len.h"  /* mp_probe_len_meta */
#include "job/sim_out.h"   /* mp_job_stats_json */
#include "model/fwd.h"     /* MpFwd */
#include "tok/corpus.h"    /* mp_tok_corpus_build */
#include "tok/tok.h"       /* the model's tokenizer */

void mp_probe_config_init(MpProbeConfig *c) {
    memset(c, 0, sizeof *c);
    c->max_mem_gib = -1;
    c->out_mode = MP_OUTDIR_NEW;
}

/* ================================================================ set-up */

/* Everything the run holds between set-up and result; freed in reverse order by probe_state_free. */
typedef struct ProbeState {
    const MpProbeConfig *c;
    MpModel own;            /* the model when the run opened it */
    MpModel *m;
    MpProbeTokens tk;
    int tk_borrowed;        /* tk.ids points to c->ids */
    uint64_t corpus_hash;   /* --data */
    int beyond;             /* S past the trained context */
    unsigned char mask0[256];
    int layers[256], L, deepest;
    int causal, rope, threads;
    MpFwdConfig fc;
    MpFwd f;
    MpProbeAcc acc;
    uint64_t model_hash, key;
    uint64_t weights_hash;  /* mp_model_weights_hash of the layers run: in the key and meta.json */
    char ckpt[4096];        /* out/checkpoint.bin, or "" */
} ProbeState;

static void probe_state_free(ProbeState *s) {
    mp_fwd_free(&s->f);
    mp_probe_acc_free(&s->acc);
    if (s->tk_borrowed) s->tk.ids = NULL;
    mp_probe_tokens_free(&s->tk);
    mp_model_free(&s->own);
}

/* MemAvailable from /proc/meminfo in bytes, 0 when unknown. */
static uint64_t probe_mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

/* Bytes of the stored tensors of layers [0, n) (each tensor once): the file pages the weight
 * loading reads through the read-only mapping (reclaimable, but counted in RSS while mapped). */
static uint64_t probe_mapped_bytes(const MpModel *m, int n) {
    uint64_t b = 0;
    unsigned char *seen = calloc(m->n_tensors ? m->n_tensors : 1, 1);
    if (!seen) return 0;
    for (int l = 0; l < n && l < m->n_layers; l++)
        for (int r = MP_ROLE_FIRST_LAYER; r < MP_ROLE_COUNT; r++) {
            const int t = m->layer[(size_t)l * MP_ROLE_COUNT + r].tensor;
            if (t >= 0 && (size_t)t < m->n_tensors && !seen[t]) {
                seen[t] = 1;
                b += m->tensors[t].nbytes;
            }
        }
    free(seen);
    return b;
}

/* f32 scratch the weight loader uses once per tensor (the largest [out, in] matrix). */
static uint64_t probe_scratch_bytes(const MpModel *m) {
    uint64_t a = (uint64_t)m->n_heads * m->head_dim * m->dim, b = (uint64_t)m->ffn * m->dim;
    const uint64_t moe = (uint64_t)(m->ffn_shexp > m->n_experts ? m->ffn_shexp : m->n_experts) * m->dim; /* MoE router, qwen2moe shared expert */
    if (moe > b) b = moe;
    return 4 * (a > b ? a : b);
}

/* The selected layers: s->mask0[l] for 0-based l, s->layers[0..L), s->deepest (1-based). */
static int probe_layers(ProbeState *s, MpErr *e) {
    const MpModel *m = s->m;
    const char *spec = s->c->layers;
    unsigned char mask[1024] = {0};
    if (m->n_layers > 256) return mp_err_set(e, "%s: %d layers (at most 256 supported)", m->path, m->n_layers);
    if (!spec || !strcmp(spec, "all")) {
        const int upto = !spec ? (m->n_layers < 4 ? m->n_layers : 4) : m->n_layers;
        for (int l = 1; l <= upto; l++) mask[l] = 1;
    } else {
        /* parse against a generous bound first, so an out-of-range layer gets its own message */
        unsigned char *big = calloc((1 << 16) + 1, 1);
        if (!big) return mp_err_set(e, "out of memory");
        if (mp_parse_range_list(spec, 1 << 16, big) < 1) {
            free(big);
            return mp_err_set(e, "--layers: '%s' is not a list of layers like 1-4 or 2,5 or all", spec);
        }
        for (int l = 1; l <= (1 << 16); l++)
            if (big[l] && l > m->n_layers) {
                free(big);
                return mp_err_set(e, "--layers: layer %d does not exist (the model has %d)", l, m->n_layers);
            }
        for (int l = 1; l <= m->n_layers; l++) mask[l] = big[l];
        free(big);
    }
    memset(s->mask0, 0, sizeof s->mask0);
    s->L = s->deepest = 0;
    for (int l = 1; l <= m->n_layers; l++)
        if (mask[l]) {
            s->mask0[l - 1] = 1;
            s->layers[s->L++] = l - 1;
            s->deepest = l;
        }
    /* NaN weights: refused, not all-NaN maps */
    return mp_model_check_finite(m, s->deepest, e);
}

/* --data: tokenizes documents into s->tk (N x S ids), the way `maskpos corpus` does. */
static int probe_tokens_from_text(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    MpTok t;
    memset(&t, 0, sizeof t);
    if (mp_tok_init(&t, r->tokenizer ? r->tokenizer : s->m->path, e) != MP_OK) return MP_ERR;
    MpTokCorpusOpts o = {.field = r->field, .whole = r->whole, .n = r->n, .seq = r->seq, .shuffle = r->shuffle,
                         .seed = r->seed, .add_special = !r->no_special, .pack = r->pack};
    MpTokCorpus cp;
    memset(&cp, 0, sizeof cp);
    int rc = mp_tok_corpus_build(&cp, &t, r->data, &o, e);
    mp_tok_free(&t);
    if (rc != MP_OK) return MP_ERR;
    MpProbeTokens *tk = &s->tk;
    memset(tk, 0, sizeof *tk);
    uint64_t h = MP_FNV_INIT;
    for (int64_t i = 0; i < cp.n * cp.seq; i++) {
        if (cp.ids[i] < 0 || cp.ids[i] >= s->m->vocab) {
            rc = mp_err_set(e, "%s: the tokenizer gave id %d (document %lld), outside the model's vocabulary [0, %d)",
                            r->data, cp.ids[i], (long long)(i / cp.seq), s->m->vocab);
            mp_tok_corpus_free(&cp);
            return rc;
        }
        h = mp_fnv1a64(&cp.ids[i], 4, h);
    }
    tk->ids = cp.ids;
    cp.ids = NULL;
    tk->n = cp.n;
    tk->seq = (int)cp.seq;
    tk->available = cp.n;
    tk->hash = h;
    s->corpus_hash = cp.hash;
    if (r->log)
        fprintf(r->log, "data: %s (%s, %lld file%s): %lld documents examined, %lld shorter than %d tokens skipped\n",
                r->data, cp.format, (long long)cp.n_files, cp.n_files == 1 ? "" : "s", (long long)cp.n_examined,
                (long long)cp.n_skipped, tk->seq);
    mp_tok_corpus_free(&cp);
    return MP_OK;
}

/* In memory: borrowed ids [n, seq], checked against the vocabulary and hashed like a file's. */
static int probe_tokens_borrow(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    if (r->n < 1 || r->seq < 1) return mp_err_set(e, "tokens: %lld sequences of %d (both must be >= 1)", (long long)r->n, r->seq);
    uint64_t h = MP_FNV_INIT;
    const size_t total = (size_t)r->n * (size_t)r->seq;
    for (size_t i = 0; i < total; i++) {
        if (r->ids[i] < 0 || r->ids[i] >= s->m->vocab)
            return mp_err_set(e, "tokens: id %d (sequence %lld) outside the model's vocabulary [0, %d)", r->ids[i],
                              (long long)(i / (size_t)r->seq), s->m->vocab);
        h = mp_fnv1a64(&r->ids[i], 4, h);
    }
    memset(&s->tk, 0, sizeof s->tk);
    s->tk.ids = (int32_t *)r->ids; /* not freed: tk_borrowed */
    s->tk_borrowed = 1;
    s->tk.n = s->tk.available = r->n;
    s->tk.seq = r->seq;
    s->tk.hash = h;
    return MP_OK;
}

/* The tokens from one of the three sources, then the context check. */
static int probe_tokens(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    const int nsrc = !!r->ids + !!r->tokens_path + !!r->data;
    if (nsrc != 1) return mp_err_set(e, nsrc ? "--tokens and --data exclude each other" : "--tokens FILE or --data TEXT is required");
    if (r->data && (!r->n || !r->seq)) return mp_err_set(e, "--data needs --n N and --seq S");
    int rc = r->ids    ? probe_tokens_borrow(s, e)
             : r->data ? probe_tokens_from_text(s, e)
                       : mp_probe_tokens_read(&s->tk, r->tokens_path, r->seq, r->n, s->m->vocab, e);
    if (rc != MP_OK) return MP_ERR;
    if (mp_model_context_check(s->m, s->tk.seq, r->allow_long, &s->beyond, e) != MP_OK) return MP_ERR;
    if (s->beyond && r->log)
        fprintf(stderr, "maskpos probe: warning: S=%d runs past the trained context of %s (max_position_embeddings %d%s); "
                        "recorded in meta.json\n", s->tk.seq, s->m->path, s->m->max_pos, s->m->max_pos ? "" : ": not stated");
    if (s->tk.skipped && r->log)
        fprintf(r->log, "note: %lld trailing token%s of %s did not fill a sequence of %d and %s skipped\n",
                (long long)s->tk.skipped, s->tk.skipped == 1 ? "" : "s", r->tokens_path ? r->tokens_path : r->data,
                s->tk.seq, s->tk.skipped == 1 ? "was" : "were");
    return MP_OK;
}

/* 1 when every sequence starts with the model's BOS: its row and column are one fixed token's,
 * content rather than position, and the statistics cover positions 1..S-1 (docs/metrics.md). */
static int probe_stats_skip(const MpModel *m, const MpProbeTokens *tk) {
    if (m->bos_id < 0 || !tk->ids || tk->n < 1 || tk->seq < 3) return 0;
    for (int64_t i = 0; i < tk->n; i++)
        if (tk->ids[(size_t)i * (size_t)tk->seq] != m->bos_id) return 0;
    return 1;
}

/* Workers of the forward pass's reduced map (MpFwdConfig.tap_headsum_workers): every worker of
 * the run when the sums need only each row's head sum (no --per-head maps, no --recency counts:
 * mp_probe_acc_needs_heads), else none (the rows of every head go to the accumulator). */
static int probe_headsum_workers(const MpProbeConfig *c, int threads) { return c->per_head || c->recency ? 0 : threads; }

void mp_probe_peak(MpProbePeak *p, const MpModel *m, const MpProbeConfig *c, int L, int deepest, int S, int64_t n,
                   int threads, int nranks, int rank) {
    const MpFwdConfig fc = {.n_layers = deepest, .max_seq = S, .causal = 1, .rope = 1, .logits = 0, .compute = c->compute,
                            .tap_headsum_workers = probe_headsum_workers(c, threads)};
    mp_fwd_plan_bytes(m, &fc, &p->weights, &p->acts);
    const uint64_t SS = (uint64_t)S * S;
    /* sums and sums of squares per layer (and per head), three one-sequence maps (head mean,
     * residue, the part after BOS) */
    p->maps = SS * 8 * (L * (c->per_head ? 2 + 2 * (uint64_t)m->n_heads : 2) + 3) * (nranks > 1 && rank == 0 ? 2 : 1);
    if (c->probs) p->maps += SS * 8 * L * (c->per_head ? 1 + (uint64_t)m->n_heads : 1); /* probability sums */
    if (c->recency) /* triple counts per row and head, two corner maps, counting scratch, length blocks */
        p->maps += 8 * ((uint64_t)L * m->n_heads * S + 2 * SS + (uint64_t)S * (3 * threads + m->n_heads) + (uint64_t)L * 24 * 512);
    /* mean, diagnorm, standard errors, heads and their standard errors at the end (and the float32
     * copy written), and the statistics' scratch */
    p->outs = SS * 8 * (L * (c->per_head ? 3 + 2 * (uint64_t)m->n_heads : 3) + 3);
    if (c->per_head && !c->heads_f64) p->outs += SS * 4 * L * (uint64_t)m->n_heads;
    if (c->probs) p->outs += SS * 8 * L * (c->per_head ? 1 + (uint64_t)m->n_heads : 1); /* probs.npy, probs_heads.npy */
    p->tokens = (uint64_t)n * S * 4;
    /* bf16 packs one panel of 32 rows at a time */
    const int wide = m->ffn_shexp > m->ffn ? m->ffn_shexp : m->ffn; /* qwen2moe: the shared expert's down rows */
    p->scratch = c->compute == MP_FWD_COMPUTE_BF16 ? 4 * 32 * (uint64_t)(wide > m->dim ? wide : m->dim) : probe_scratch_bytes(m);
    p->total = p->weights + p->acts + p->maps + p->outs + p->tokens + p->scratch;
}

/* The expected peak memory (printed to the log), refused above the limit. */
static int probe_plan(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    const MpModel *m = s->m;
    const MpProbeTokens *tk = &s->tk;
    const int nranks = mp_mpi_size(), rank = mp_mpi_rank(), L = s->L;
    MpProbePeak pk;
    mp_probe_peak(&pk, m, r, L, s->deepest, tk->seq, tk->n, s->threads, nranks, rank);
    const uint64_t wbytes = pk.weights, abytes = pk.acts, maps = pk.maps, outs = pk.outs, tokb = pk.tokens, scratch = pk.scratch;
    const uint64_t mapped = probe_mapped_bytes(m, s->deepest);
    const uint64_t peak = pk.total;
    FILE *lg = r->log;
    if (lg) {
        fprintf(lg, "probe: %s (%s, %d of %d layers run), N=%lld S=%d, layers", m->path, mp_model_arch_name(m->arch),
                s->deepest, m->n_layers, (long long)tk->n, tk->seq);
        for (int l = 0; l < L; l++) fprintf(lg, "%s%d", l ? "," : " ", s->layers[l] + 1);
        if (!r->layers && m->n_layers > L) /* the default left layers out: say so */
            fprintf(lg, " (the default --layers 1-%d, as the paper's Figure 5; --layers all for all %d)", L, m->n_layers);
        int nope_layers = 0;
        for (int l = 0; l < m->n_layers && m->rope_layer; l++) nope_layers += !m->rope_layer[l];
        const char *rope_word = !s->rope                       ? "off (--no-rope)"
                                : nope_layers == m->n_layers   ? "none (NoPE checkpoint)"
                                : nope_layers > 0              ? "on (NoPE in some layers)"
                                                               : "on";
        fprintf(lg, ", %s, rope %s, %d thread%s, compute %s", s->causal ? "causal" : "bidirectional", rope_word,
                s->threads, s->threads == 1 ? "" : "s", mp_fwd_compute_name(r->compute));
        if (nranks > 1) fprintf(lg, " (per rank), %d MPI ranks", nranks);
        fprintf(lg, "\n");
        fprintf(lg, "expected peak memory: weights %.1f MiB (%s) + load scratch %.1f MiB + activations and one sequence's "
                    "scores %.1f MiB + maps %.1f MiB + outputs %.1f MiB = %.1f MiB; plus up to %.1f MiB of model file pages "
                    "read through the mapping (reclaimable; released once packed)\n",
                wbytes / 1048576.0, mp_fwd_compute_name(r->compute), scratch / 1048576.0, abytes / 1048576.0,
                maps / 1048576.0, (outs + tokb) / 1048576.0, peak / 1048576.0, mapped / 1048576.0);
    }
    const uint64_t limit = r->max_mem_gib > 0 ? (uint64_t)(r->max_mem_gib * 1073741824.0) : probe_mem_available();
    if (limit && peak > limit)
        return mp_err_set(e, "expected peak %.1f MiB exceeds the %s %.1f MiB; HINT: %sfewer --layers, a shorter --seq or no --per-head",
                          peak / 1048576.0, r->max_mem_gib > 0 ? "--max-mem-gib limit" : "memory available", limit / 1048576.0,
                          r->compute == MP_FWD_COMPUTE_F32 ? "--compute bf16 (weights in half the memory), " : "");
    return MP_OK;
}

/* The accumulator and the forward pass, with the optional sums. */
static int probe_acc_setup(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    if (mp_probe_acc_init(&s->acc, s->mask0, s->m->n_layers, s->m->n_heads, s->tk.seq, r->per_head, s->causal, s->threads,
                          e) != MP_OK ||
        mp_fwd_init(&s->f, s->m, &s->fc, e) != MP_OK)
        return MP_ERR;
    if (probe_stats_skip(s->m, &s->tk)) mp_probe_acc_skip(&s->acc, 1);
    mp_probe_acc_windows(&s->acc, s->m); /* sliding-window layers: keys outside the window unobserved */
    if (r->probs) { /* the probabilities after each layer's softmax */
        if (mp_probe_acc_probs_on(&s->acc, e) != MP_OK) return MP_ERR;
        s->f.probs_hook = mp_probe_acc_probs_hook;
        s->f.probs_ctx = &s->acc;
    }
    if (r->recency && mp_probe_acc_recency_on(&s->acc, e) != MP_OK) return MP_ERR;
    return MP_OK;
}

/* The run key: model (its description and the bytes of the weights the run reads), tokens and
 * every flag that changes the sums; a checkpoint resumes only under the same key. */
static uint64_t probe_run_key(const ProbeState *s) {
    const MpProbeConfig *r = s->c;
    uint64_t key = mp_fnv1a64(&s->model_hash, 8, MP_FNV_INIT);
    key = mp_fnv1a64(&s->weights_hash, 8, key);
    key = mp_fnv1a64(&s->tk.hash, 8, key);
    const int64_t kv[] = {s->tk.n, s->tk.seq, s->causal, s->rope, r->per_head};
    key = mp_fnv1a64(kv, sizeof kv, key);
    key = mp_fnv1a64(s->mask0, sizeof s->mask0, key);
    if (r->compute != MP_FWD_COMPUTE_F32) { /* f32 keys unchanged: older checkpoints still resume */
        const int64_t cm = r->compute;
        key = mp_fnv1a64(&cm, sizeof cm, key);
    }
    if (s->acc.skip) { /* the block sums start at position 1: not those of an older maskpos */
        const int64_t sk = s->acc.skip;
        key = mp_fnv1a64(&sk, sizeof sk, key);
    }
    int windowed = 0; /* sliding windows that mask at this S (none: the key of an older maskpos) */
    for (int l = 0; l < s->acc.L; l++) windowed |= s->acc.window[l] > 0;
    if (windowed) key = mp_fnv1a64(s->acc.window, sizeof(int) * (size_t)s->acc.L, key);
    return key;
}

/* --resume without a checkpoint: a finished run in the folder (its meta.json) must be of this
 * model, or it would be replaced by another model's run. */
static int probe_resume_finished(const ProbeState *s, MpErr *e) {
    char path[4200], ours[32];
    if (mp_path_join(path, sizeof path, s->c->out, "meta.json", e) != MP_OK) return MP_ERR;
    if (!mp_file_exists(path)) return MP_OK;
    MpErr je;
    json_t *j = mp_json_read(path, &je);
    const char *theirs = json_string_value(json_object_get(j, "weights_hash"));
    snprintf(ours, sizeof ours, "%016llx", (unsigned long long)s->weights_hash);
    int rc = MP_OK;
    if (!theirs)
        rc = mp_err_set(e, "--resume: %s holds a finished run that names no weights_hash (another command, or an older "
                           "maskpos): cannot tell whether it is of this model; HINT: another --out, or --force to replace it",
                        s->c->out);
    else if (strcmp(theirs, ours))
        rc = mp_err_set(e, "--resume: %s holds a finished run of another model or other weights (weights_hash %.20s, this "
                           "run %s); HINT: another --out, or --force to replace it",
                        s->c->out, theirs, ours);
    json_decref(j);
    return rc;
}

/* --resume on rank 0: the checkpoint's sums (none: from the first sequence). */
static int probe_resume(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    int missing;
    if (mp_probe_ckpt_load(s->ckpt, &s->acc, s->key, &missing, e) != MP_OK) {
        if (!missing) return mp_err_prefix(e, "--resume");
        if (probe_resume_finished(s, e) != MP_OK) return MP_ERR;
        if (r->log) fprintf(r->log, "resume: no checkpoint in %s, starting from the first sequence\n", r->out);
        return MP_OK;
    }
    if (r->log)
        fprintf(r->log, "resume: %lld of %lld sequences already done (%s)\n", (long long)s->acc.n_done,
                (long long)s->tk.n, s->ckpt);
    if (s->acc.n_done > s->tk.n)
        return mp_err_set(e, "--resume: checkpoint counts %lld sequences, more than %lld", (long long)s->acc.n_done,
                          (long long)s->tk.n);
    return MP_OK;
}

/* Everything before the loop; *agreed says whether the MPI ranks have agreed (set-up done). */
static int probe_setup(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    if (r->model) s->m = r->model;
    else if (!r->model_path) return mp_err_set(e, "no model given");
    else if (mp_model_open(&s->own, r->model_path, e) != MP_OK) return MP_ERR;
    else s->m = &s->own;
    if (probe_layers(s, e) != MP_OK || probe_tokens(s, e) != MP_OK) return MP_ERR;
    s->fc = (MpFwdConfig){.n_layers = s->deepest, .max_seq = s->tk.seq, .causal = s->causal, .rope = s->rope,
                          .logits = 0, .compute = r->compute, .device = r->device,
                          .tap_headsum_workers = probe_headsum_workers(r, s->threads)};
    for (int l = 0; l < s->m->n_layers && l < 256; l++) /* only the probed layers' rows come out (bit 63: 63 and on) */
        if (s->mask0[l]) s->fc.tap_layers |= (uint64_t)1 << (l < 63 ? l : 63);
    if (probe_plan(s, e) != MP_OK) return MP_ERR;
    /* one run per folder (resume continues it, force replaces it); also the check that the folder
     * is writable, before the compute */
    if ((r->checkpoint_every > 0 || r->resume) && !r->out)
        return mp_err_set(e, "checkpoints need an output folder (--out)");
    if (r->out && mp_mpi_rank() == 0 && mp_outdir_claim(r->out, "probe", (MpOutdirMode)r->out_mode, e) != MP_OK)
        return MP_ERR;
    if (probe_acc_setup(s, e) != MP_OK) return MP_ERR;
    s->model_hash = mp_model_shape_hash(s->m);
    if (mp_mpi_rank() == 0 && !(s->weights_hash = mp_model_weights_hash(s->m, s->deepest)))
        return mp_err_set(e, "%s: out of memory", s->m->path);
    s->key = probe_run_key(s);
    s->ckpt[0] = 0;
    if (r->out && mp_path_join(s->ckpt, sizeof s->ckpt, r->out, "checkpoint.bin", e) != MP_OK) return MP_ERR;
    if (r->resume && mp_mpi_rank() == 0 && probe_resume(s, e) != MP_OK) return MP_ERR;
    return MP_OK;
}

/* ================================================================ the loop */

/* What the loop does after each sequence (model/probe_ranks.h): rank 0 checkpoints and reports
 * progress; the test hook kills the chosen rank. */
typedef struct ProbeStep {
    const MpProbeConfig *c;
    const char *ckpt;
    uint64_t key;
    int64_t n, kill_after;
    int kill_rank;
} ProbeStep;

static int probe_step(void *ctx, const MpProbeAcc *a, int64_t s, MpErr *e) {
    const ProbeStep *p = ctx;
    const int rank = mp_mpi_rank();
    if (rank == 0) {
        if (p->c->checkpoint_every > 0 && a->n_done % p->c->checkpoint_every == 0 && a->n_done < p->n &&
            mp_probe_ckpt_save(p->ckpt, a, p->key, e) != MP_OK)
            return mp_err_prefix(e, "checkpoint");
        if (p->c->progress && p->c->progress(p->c->progress_ctx, a->n_done, p->n))
            return mp_err_set(e, MP_JOB_STOPPED_MSG);
    }
    if (p->kill_after >= 0 && rank == p->kill_rank && (rank ? s + 1 >= p->kill_after : s + 1 == p->kill_after)) {
        fflush(stdout);
        raise(SIGKILL);
    }
    return MP_OK;
}

/* Rank 0 of an MPI job: mpirun ends it with SIGTERM when another rank died. */
static char probe_term_msg[4600];
static void probe_on_term(int sig) {
    (void)sig;
    if (write(2, probe_term_msg, strlen(probe_term_msg)) < 0) _exit(MP_EXIT_FAILED);
    _exit(MP_EXIT_FAILED);
}

/* The sequences not yet done, over the job's ranks. */
static int probe_loop(ProbeState *s, MpProbeResult *res, MpErr *e) {
    const MpProbeConfig *r = s->c;
    ProbeStep ps = {.c = r, .ckpt = s->ckpt, .key = s->key, .n = s->tk.n, .kill_after = -1};
    const char *ka = getenv("MASKPOS_TEST_KILL_AFTER"), *kr = getenv("MASKPOS_TEST_KILL_RANK");
    if (ka && *ka) ps.kill_after = atoll(ka);
    if (kr && *kr) ps.kill_rank = atoi(kr);
    res->first = s->acc.n_done; /* rank 0's; the others learn it in mp_probe_run_ranks */
    if (mp_mpi_size() > 1 && mp_mpi_rank() == 0) {
        snprintf(probe_term_msg, sizeof probe_term_msg,
                 "maskpos probe: error: stopped by mpirun (another rank ended, see its message, or the job was interrupted); %s\n",
                 r->checkpoint_every > 0 ? "the sums of the last checkpoint are in the --out folder: run again with --resume"
                                         : "no checkpoint was kept (--checkpoint-every K makes a run resumable)");
        signal(SIGTERM, probe_on_term);
    }
    if (mp_mpi_rank() == 0 && r->progress && r->progress(r->progress_ctx, s->acc.n_done, s->tk.n))
        return mp_err_set(e, MP_JOB_STOPPED_MSG);
    const double t0 = mp_time_now();
    const int rc = mp_probe_run_ranks(&s->acc, &s->f, s->tk.ids, s->tk.n, s->tk.seq, probe_step, &ps, &res->ranks, e);
    res->compute_s = mp_time_now() - t0;
    res->gflop = mp_fwd_flops(&s->f, s->tk.seq) * (double)(s->tk.n - res->first) / 1e9;
    return rc;
}

/* ================================================================ the result */

static json_t *probe_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* path made absolute (realpath) for meta.json, so `maskpos view` finds the text from any folder;
 * as given when it cannot be resolved. */
static json_t *probe_abs_path(const char *path) {
    char buf[PATH_MAX];
    return json_string(realpath(path, buf) ? buf : path);
}

void mp_probe_meta_first(json_t *j, int skip) {
    json_object_set_new(j, "stats_first_position", json_integer(skip));
    json_object_set_new(j, "stats_first_position_of",
                        json_string("NRI, residue, block z, rising rows and slope cover positions from this one on "
                                    "(diagonal-normalised among themselves): 1 when every sequence starts with BOS"));
}

void mp_probe_meta_windows(json_t *j, const int *w, int L) {
    json_t *wj = json_array();
    for (int l = 0; l < L; l++) json_array_append_new(wj, w[l] > 0 ? json_integer(w[l]) : json_null());
    json_object_set_new(j, "layer_windows", wj);
    json_object_set_new(j, "layer_windows_of",
                        json_string("per selected layer: its sliding window W (null: every earlier key). Query i sees key "
                                    "j only when i - j < W; the other entries are not observed, NaN in the score maps like "
                                    "the causal mask's, 0 in probs; they mask nothing when seq <= W"));
}

/* The run's half of meta.json: model, data, flags. */
static json_t *probe_meta_run(const ProbeState *s, const MpProbeResult *res) {
    const MpProbeConfig *r = s->c;
    const MpModel *m = s->m;
    json_t *j = json_object(), *lj = json_array();
    char hex[32];
    json_object_set_new(j, "kind", json_string("probe"));
    json_object_set_new(j, "model", json_string(m->path));
    json_object_set_new(j, "model_format", json_string(m->format == MP_FORMAT_GGUF ? "gguf" : "hf"));
    json_object_set_new(j, "arch", json_string(mp_model_arch_name(m->arch)));
    json_object_set_new(j, "max_position_embeddings", json_integer(m->max_pos));
    json_object_set_new(j, "beyond_trained_context", json_boolean(s->beyond)); /* --allow-long */
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->model_hash);
    json_object_set_new(j, "model_hash", json_string(hex));
    json_object_set_new(j, "model_hash_of", json_string("fnv1a64 of hyperparameters and tensor table (names, types, shapes, sizes)"));
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->weights_hash);
    json_object_set_new(j, "weights_hash", json_string(hex));
    json_object_set_new(j, "weights_hash_of",
                        json_string("mp_hash64 of the description and the stored bytes of every tensor the layers run read "
                                    "(probe --resume continues only a run with the same value)"));
    if (r->data) {
        json_object_set_new(j, "data", probe_abs_path(r->data)); /* absolute: issue 30 (view from elsewhere) */
        json_object_set_new(j, "tokenizer", probe_abs_path(r->tokenizer ? r->tokenizer : m->path));
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->corpus_hash);
        json_object_set_new(j, "data_files_hash", json_string(hex));
        json_object_set_new(j, "packed", json_boolean(r->pack));
    } else {
        json_object_set_new(j, "tokens", r->tokens_path ? json_string(r->tokens_path) : json_string("(in memory)"));
    }
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->tk.hash);
    json_object_set_new(j, "data_hash", json_string(hex));
    json_object_set_new(j, "data_hash_of", json_string("fnv1a64 of the N*S ids used, as little-endian int32"));
    json_object_set_new(j, "n", json_integer(s->tk.n));
    json_object_set_new(j, "seq", json_integer(res->S));
    json_object_set_new(j, "skipped_tokens", json_integer(s->tk.skipped));
    mp_probe_meta_first(j, res->skip);
    for (int l = 0; l < res->L; l++) json_array_append_new(lj, json_integer(res->layers[l] + 1));
    json_object_set_new(j, "layers", lj);
    json_object_set_new(j, "heads", json_integer(res->H));
    json_object_set_new(j, "kv_heads", json_integer(m->n_kv_heads));
    json_object_set_new(j, "head_dim", json_integer(m->head_dim));
    json_object_set_new(j, "causal", json_boolean(s->causal));
    json_object_set_new(j, "rope", json_boolean(s->rope));
    if (m->sliding_window > 0) { /* each selected layer's window */
        int w[256];
        for (int l = 0; l < res->L; l++) w[l] = mp_model_layer_window(m, res->layers[l]);
        mp_probe_meta_windows(j, w, res->L);
    }
    if (m->attn_softcap > 0) { /* gemma2: which scores the maps hold */
        json_object_set_new(j, "scores_are", json_string("soft-capped: c * tanh(s / c) of the scaled scores s, with c = "
                                                         "attn_logit_softcapping (meta: attn_softcap); what the softmax receives"));
        json_object_set_new(j, "attn_softcap", json_real(m->attn_softcap));
    }
    json_object_set_new(j, "per_head", json_boolean(r->per_head));
    json_object_set_new(j, "threads", json_integer(s->threads));
    json_object_set_new(j, "mpi_ranks", json_integer(mp_mpi_size()));
    json_object_set_new(j, "compute", json_string(r->compute == MP_FWD_COMPUTE_BF16
                                                      ? "bf16: bf16 Linear weights and inputs, f32 accumulation, f32 attention; map sums in double"
                                                      : "f32 weights and activations, f32 accumulation; map sums in double"));
    json_object_set_new(j, "compute_mode", json_string(mp_fwd_compute_name(r->compute)));
    json_object_set_new(j, "matmul_kernel", json_string(mp_fwd_kernel_name(s->f.kernel))); /* this pass's kernel */
    json_object_set_new(j, "compute_time_s", json_real(res->compute_s));
    return j;
}

const char *mp_probe_n_warning(char *buf, size_t cap, int64_t n) {
    if (n >= MP_SIGNIF_MIN_N) snprintf(buf, cap, "%s", "");
    else snprintf(buf, cap, "N = %lld sequences is too few for the standard errors to mean much (block z, rms/noise and "
                            "the noise levels are rough below %d): no residue is called resolved", (long long)n, MP_SIGNIF_MIN_N);
    return buf;
}

/* [L] numbers of the significance table as a JSON array (non-finite: null). */
static json_t *signif_series(const MpProbeResult *res, size_t off, int region) {
    json_t *a = json_array();
    for (int l = 0; l < res->L; l++) {
        const char *sg = (const char *)&res->sig[l];
        const double v = region < 0 ? *(const double *)(sg + off) : ((const double *)(sg + off))[region];
        json_array_append_new(a, probe_real(v));
    }
    return a;
}

/* meta.json: is each layer's residue resolved at this N (and where), the noise levels of the block
 * tests, N needed, the noise-corrected NRI (docs/metrics.md, "Is a residue resolved?"). */
static void probe_meta_signif(json_t *j, const MpProbeResult *res) {
    static const char *rname[MP_PROBE_NREGIONS] = {NULL, "first_keys", "last_queries", "last_keys", "interior"};
    const int L = res->L;
    json_t *rv = json_array(), *rr = json_object();
    for (int l = 0; l < L; l++) json_array_append_new(rv, json_boolean(res->sig[l].resolved[0]));
    json_object_set_new(j, "residue_resolved", rv);
    json_t *nz = json_object();
    json_object_set_new(nz, "block_z", signif_series(res, offsetof(MpProbeSignif, noise), 0));
    json_object_set_new(nz, "block_z_spread", signif_series(res, offsetof(MpProbeSignif, spread), 0));
    json_object_set_new(nz, "block_z_threshold", signif_series(res, offsetof(MpProbeSignif, threshold), 0));
    json_t *reg = json_object();
    for (int g = 1; g < MP_PROBE_NREGIONS; g++) {
        json_t *o = json_object(), *b = json_array();
        json_object_set_new(o, "block_z", signif_series(res, offsetof(MpProbeSignif, noise), g));
        json_object_set_new(o, "block_z_threshold", signif_series(res, offsetof(MpProbeSignif, threshold), g));
        json_object_set_new(reg, rname[g], o);
        for (int l = 0; l < L; l++) json_array_append_new(b, json_boolean(res->sig[l].resolved[g]));
        json_object_set_new(rr, rname[g], b);
    }
    json_object_set_new(nz, "regions", reg);
    json_object_set_new(j, "residue_noise", nz);
    json_object_set_new(j, "residue_regions_resolved", rr);
    json_object_set_new(j, "residue_n_needed", signif_series(res, offsetof(MpProbeSignif, n_needed), -1));
    json_object_set_new(j, "nri_corrected", signif_series(res, offsetof(MpProbeSignif, nri_corr), -1));
    json_object_set_new(j, "map_noise_share", signif_series(res, offsetof(MpProbeSignif, map_noise), -1));
    char d[512];
    snprintf(d, sizeof d,
             "residue_resolved: block z above its noise level (block_z: rms of the block z of %d sign-flipped sums, each "
             "sequence's block means times its own sign; spread: their standard deviation; threshold = noise + %g spreads) "
             "with N >= %d; a region likewise within a resolved layer; residue_n_needed: N at which block z would cross the "
             "threshold (z^2 - noise^2 grows like N); nri_corrected: the NRI with the noise power of the mean map taken out "
             "of numerator and denominator (docs/metrics.md)",
             MP_PROBE_FLIPS, MP_SIGNIF_SIGMAS, MP_SIGNIF_MIN_N);
    json_object_set_new(j, "residue_resolved_of", json_string(d));
    if (mp_probe_n_warning(d, sizeof d, res->n)[0]) json_object_set_new(j, "warning", json_string(d));
}

/* The result's half of meta.json: the files, the statistics, block tests, --probs, --recency. */
static void probe_meta_stats(json_t *j, const MpProbeResult *res) {
    const int L = res->L;
    json_t *fj = json_object();
    json_object_set_new(fj, "scores.npy", json_string("float64 [L,S,S] mean pre-softmax score over sequences and heads, row = query, column = key; NaN where masked"));
    json_object_set_new(fj, "scores_diagnorm.npy", json_string("float64 [L,S,S] scores minus the mean of their diagonal (i-j)"));
    json_object_set_new(fj, "scores_se.npy", json_string("float64 [L,S,S] standard error of each entry of scores.npy: sample standard deviation over sequences of the head-mean score / sqrt(N); NaN where masked or N < 2"));
    if (res->heads) {
        const char *dt = res->heads_f64 ? "float64" : "float32";
        char d[256];
        snprintf(d, sizeof d, "%s [L,H,S,S] mean over sequences per query head (summed in double; --heads-f64: float64)", dt);
        json_object_set_new(fj, "scores_heads.npy", json_string(d));
        snprintf(d, sizeof d, "%s [L,H,S,S] standard error of each entry of scores_heads.npy: sample standard deviation "
                              "over sequences of the head's score / sqrt(N); NaN where masked or N < 2", dt);
        json_object_set_new(fj, "scores_heads_se.npy", json_string(d));
    }
    json_object_set_new(j, "files", fj);
    json_object_set_new(j, "stats", mp_job_stats_json(res->stats, res->layers, L));
    json_t *bz = json_array();
    for (int l = 0; l < L; l++) json_array_append_new(bz, probe_real(res->block_z[l]));
    json_object_set_new(j, "residue_block_z", bz);
    static const char *rname[MP_PROBE_NREGIONS] = {NULL, "first_keys", "last_queries", "last_keys", "interior"};
    json_t *rz = json_object();
    for (int g = 1; g < MP_PROBE_NREGIONS; g++) {
        json_t *arr = json_array();
        for (int l = 0; l < L; l++) json_array_append_new(arr, probe_real(res->block_z_regions[(size_t)g * L + l]));
        json_object_set_new(rz, rname[g], arr);
    }
    json_object_set_new(j, "residue_block_z_regions", rz);
    json_object_set_new(j, "residue_block_z_regions_of",
                        json_string("the block test per layer over one region of the 16x16 block grid: the first "
                                    "column of blocks (first keys), the last row (last queries), the last column "
                                    "(last keys; without the mask only), the interior (none of these, nor the first row)"));
    json_object_set_new(j, "residue_block_z_of",
                        json_string("per layer: sqrt(mean over a 16x16 grid of blocks of (block mean of the diagonal-mean "
                                    "normalised residue / its standard error over sequences)^2); about 1 for noise"));
    probe_meta_signif(j, res);
    if (res->probs) mp_probe_probs_meta(j, fj, &res->pr);
    if (res->recency) mp_probe_len_meta(j, &res->rec);
}

int mp_probe_result_fill(MpProbeResult *res, const MpProbeAcc *a, json_t *meta_run, MpErr *e) {
    const int L = a->L, S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    res->mean = mp_try_malloc(SS * L * sizeof(double));
    res->diagnorm = mp_try_malloc(SS * L * sizeof(double));
    res->se = mp_try_malloc(SS * L * sizeof(double));
    res->heads = a->per_head ? mp_try_malloc(SS * L * H * sizeof(double)) : NULL;
    res->heads_se = a->per_head ? mp_try_malloc(SS * L * H * sizeof(double)) : NULL;
    res->stats = mp_try_calloc((size_t)L, sizeof *res->stats);
    res->block_z = mp_try_malloc((size_t)L * sizeof(double));
    res->block_z_regions = mp_try_malloc((size_t)L * MP_PROBE_NREGIONS * sizeof(double));
    res->sig = mp_try_calloc((size_t)L, sizeof *res->sig);
    double *scratch = a->skip ? mp_try_malloc(3 * SS * sizeof(double)) : NULL;
    if (!res->mean || !res->diagnorm || !res->se || (a->per_head && (!res->heads || !res->heads_se)) || !res->stats || !res->block_z ||
        !res->block_z_regions || !res->sig || (a->skip && !scratch)) {
        free(scratch);
        json_decref(meta_run);
        return mp_err_set(e, "out of memory for the result maps (%d layers, S=%d)", L, S);
    }
    mp_probe_acc_mean(a, res->mean, res->heads);
    mp_probe_acc_se(a, res->se);
    if (a->per_head) mp_probe_acc_se_heads(a, res->heads_se);
    mp_probe_layer_stats(res->stats, res->diagnorm, res->mean, res->se, a->n_done >= 2, L, S, a->skip, scratch);
    free(scratch);
    for (int l = 0; l < L; l++) {
        res->block_z[l] = mp_probe_acc_block_z(a, l);
        res->block_z_regions[l] = NAN;
        for (int g = 1; g < MP_PROBE_NREGIONS; g++) res->block_z_regions[(size_t)g * L + l] = mp_probe_acc_block_z_region(a, l, g);
        mp_probe_signif(&res->sig[l], a, l, &res->stats[l]);
    }
    res->lengths = a->npos != NULL;
    res->meta = meta_run;
    if (res->probs && mp_probe_probs_results(&res->pr, a, e) != MP_OK) return MP_ERR;
    if (res->recency && mp_probe_recency_results(&res->rec, a, res->mean, res->se, res->heads, e) != MP_OK) return MP_ERR;
    probe_meta_stats(res->meta, res);
    res->complete = 1;
    return MP_OK;
}

/* The maps, standard errors, statistics and block tests from the accumulator. */
static int probe_collect(MpProbeResult *res, const ProbeState *s, MpErr *e) {
    return mp_probe_result_fill(res, &s->acc, probe_meta_run(s, res), e);
}

/* The dimensions and flags the result reports (known before the loop: progress callbacks may read
 * res->S and res->first). */
static void probe_result_dims(MpProbeResult *res, const ProbeState *s) {
    res->L = s->L, res->H = s->m->n_heads, res->S = s->tk.seq, res->n = s->tk.n;
    memcpy(res->layers, s->layers, sizeof res->layers);
    res->skip = s->acc.skip, res->bos_id = s->m->bos_id;
    res->causal = s->causal, res->rope = s->rope, res->per_head = s->c->per_head, res->heads_f64 = s->c->heads_f64, res->compute = s->c->compute;
    res->threads = s->threads, res->nranks = mp_mpi_size();
    res->probs = s->c->probs, res->recency = s->c->recency;
    res->first = s->acc.n_done;
    /* figure titles say what the model is, not only its folder's name ("none" was the NoPE model) */
    const char *slash = strrchr(s->m->path, '/');
    int nope = s->m->rope_layer != NULL;
    for (int l = 0; l < s->m->n_layers && s->m->rope_layer; l++) nope &= !s->m->rope_layer[l];
    snprintf(res->title, sizeof res->title, "%.200s (%s, %s)", slash && slash[1] ? slash + 1 : s->m->path,
             mp_model_arch_name(s->m->arch), !s->rope ? "RoPE off" : nope ? "no positional encoding" : "RoPE");
}

int mp_probe_run(MpProbeResult *res, const MpProbeConfig *c, MpErr *e) {
    memset(res, 0, sizeof *res);
    ProbeState s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.causal = !c->bidirectional;
    s.rope = !c->no_rope;
    if (mp_threads_resolve(c->threads, "threads", &s.threads, e) != MP_OK) return MP_ERR;
#ifdef _OPENMP
    omp_set_num_threads(s.threads);
#endif
    const int nranks = mp_mpi_size();
    int rc = probe_setup(&s, e);
    if (nranks > 1) { /* every rank set up, or all stop; rank 0's checkpoint decides where all start */
        if (!mp_mpi_agree(rc == MP_OK) && rc == MP_OK) {
            if (mp_mpi_rank() == 0) mp_err_set(e, "another MPI rank could not set up (its message is above)");
            else e->msg[0] = 0; /* rank 0 says it */
            rc = MP_ERR;
        }
    }
    if (rc == MP_OK) {
        probe_result_dims(res, &s);
        rc = probe_loop(&s, res, e);
    }
    if (rc == MP_OK && mp_mpi_rank() == 0) rc = probe_collect(res, &s, e);
    if (nranks > 1 && mp_mpi_rank() == 0) signal(SIGTERM, SIG_DFL);
    probe_state_free(&s);
    if (rc != MP_OK) mp_probe_result_free(res);
    return rc;
}

void mp_probe_result_free(MpProbeResult *res) {
    free(res->mean);
    free(res->diagnorm);
    free(res->se);
    free(res->heads);
    free(res->heads_se);
    free(res->stats);
    free(res->block_z);
    free(res->block_z_regions);
    free(res->sig);
    mp_probe_probs_out_free(&res->pr);
    mp_probe_recency_out_free(&res->rec);
    if (res->meta) json_decref(res->meta);
    memset(res, 0, sizeof *res);
}
