/* probe_job.c — see probe_job.h. The run: set-up (model, layers, statistics, tokens, memory plan, output
 * folder, accumulator, run key, resume), the loop over sequences, and the run's half of meta.json.
 * The result (filled from the accumulator, its statistics' half of meta.json, printed, written):
 * probe_out.c.
 *
 * Test hook: MASKPOS_TEST_KILL_AFTER=K makes the process SIGKILL itself after K sequences (after
 * any checkpoint due then) — tests/test_model_probe.c uses it to test resuming; under mpirun,
 * MASKPOS_TEST_KILL_RANK=R makes rank R do it, once it has computed a sequence >= K - 1 (before
 * sending it).
 */
#include "job/probe_job.h"

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
#include "model/fwd.h"     /* MpFwd */
#include "model/fwd_plugin.h" /* the GPU of --device cuda: its memory check, meta.json's device */
#include "model/probe_freq.h" /* mp_probe_freq_geometry: --stats freq's heads and RoPE tables */
#include "model/probe_pos.h" /* the position probe's defaults */
#include "tok/corpus.h"    /* mp_tok_corpus_build */
#include "tok/tok.h"       /* the model's tokenizer */

void mp_probe_config_init(MpProbeConfig *c) {
    memset(c, 0, sizeof *c);
    c->max_mem_gib = -1;
    c->rope_keep_high = 1.0;
    c->out_mode = MP_OUTDIR_NEW;
    c->pos_dim = MP_PROBE_POS_DIM_DEFAULT;
    c->pos_stride = MP_PROBE_POS_STRIDE_DEFAULT;
    c->pos_ridge = MP_PROBE_POS_RIDGE_DEFAULT;
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
    unsigned stats;         /* the statistics asked for (mp_probe_config_stats) */
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

void mp_probe_pos_settings(MpProbeAcc *a, const MpProbeConfig *c, const MpModel *m) {
    a->pos_width = m->dim;
    a->pos_dim = c->pos_dim;
    a->pos_stride = c->pos_stride;
    a->pos_ridge = c->pos_ridge;
}

int mp_probe_resid_stride(const MpProbeConfig *c, int64_t n) {
    if (c->resid_stride > 0) return c->resid_stride;
    return n < MP_PROBE_RESID_AUTO_N ? 1 : MP_PROBE_RESID_AUTO_STRIDE;
}

int mp_probe_config_stats(const MpProbeConfig *c, unsigned *set, MpErr *e) {
    *set = MP_PROBE_STAT_BIT(MP_PROBE_STAT_MAPS) | (c->probs ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_PROBS) : 0) |
           (c->recency ? MP_PROBE_STAT_BIT(MP_PROBE_STAT_RECENCY) : 0); /* the two statistics with a switch of their own */
    return mp_probe_stats_parse(c->stats, set, e) == MP_OK ? MP_OK : mp_err_prefix(e, "--stats");
}

/* The forward pass's taps for the statistics of set (model/probe.h: each row's inputs): the
 * reduced map for every worker of the run when no statistic needs every head's score rows, else
 * none (the rows of every head go to the accumulator); the capture points they read. */
static void probe_taps(MpFwdConfig *fc, unsigned set, int per_head, int threads) {
    fc->tap_headsum_workers = mp_probe_stats_inputs(set, per_head) & MP_PROBE_IN_HEADS ? 0 : threads;
    fc->tap_points = mp_probe_stats_points(set);
}

void mp_probe_peak(MpProbePeak *p, const MpModel *m, const MpProbeConfig *c, int L, int deepest, int S, int64_t n,
                   int threads, int nranks, int rank) {
    MpFwdConfig fc = {.n_layers = deepest, .max_seq = S, .causal = 1, .rope = 1, .logits = 0, .compute = c->compute,
                      .device = c->device};
    unsigned set;
    MpErr e;
    (void)mp_probe_config_stats(c, &set, &e); /* a bad name: the run says so; here the statistics named before it */
    probe_taps(&fc, set, c->per_head, threads);
    mp_fwd_plan_bytes(m, &fc, &p->weights, &p->acts);
    /* every statistic's sums and scratch (the maps: three one-sequence maps, head mean, residue and
     * the part after BOS), twice on rank 0 of an MPI job (a one-sequence part to merge); the
     * outputs: the maps' mean, diagnorm, standard errors (and the heads'), the statistics' scratch,
     * every statistic's outputs, and the float32 copy of the heads' maps written */
    uint64_t sums, scratch, outs;
    MpProbeAcc like = {.L = L, .H = m->n_heads, .S = S, .per_head = c->per_head, .threads = threads};
    mp_probe_pos_settings(&like, c, m);
    mp_probe_stats_bytes_acc(&like, set, &sums, &scratch, &outs);
    p->maps = (sums + scratch) * (nranks > 1 && rank == 0 ? 2 : 1);
    p->outs = outs;
    if (c->per_head && !c->heads_f64) p->outs += (uint64_t)S * S * 4 * L * (uint64_t)m->n_heads;
    p->tokens = (uint64_t)n * S * 4;
    /* bf16 packs one panel of 32 rows at a time */
    const int wide = m->ffn_shexp > m->ffn ? m->ffn_shexp : m->ffn; /* qwen2moe: the shared expert's down rows */
    p->scratch = c->compute == MP_FWD_COMPUTE_BF16 ? 4 * 32 * (uint64_t)(wide > m->dim ? wide : m->dim) : probe_scratch_bytes(m);
    p->total = p->weights + p->acts + p->maps + p->outs + p->tokens + p->scratch;
}

/* --stats position's cost, on the log: its multiply-adds (double) per token and layer probed beside
 * the layer's own matmuls (f32; a dense layer: q, k, v, o and a gated MLP), and its sums. */
static void probe_pos_cost(FILE *lg, const MpProbeConfig *c, const MpModel *m, int L) {
    MpProbeAcc a = {.S = 1};
    mp_probe_pos_settings(&a, c, m);
    MpErr e;
    if (mp_probe_pos_dims(&a, &e) != MP_OK) return; /* the run says why */
    const double K = a.pos_dim, C = a.pos_width, per = (K < C ? C : 0) + K * (K + 1) / 2 + 2 * K;
    const double layer = C * ((double)m->n_heads * m->head_dim * 2 + 2.0 * m->n_kv_heads * m->head_dim) + 3.0 * C * m->ffn;
    fprintf(lg, "--stats position: %d features of %d (%s), every %d position(s): %.3g multiply-adds a token and layer in double "
                "(%.1f%% of a dense layer's %.3g in its matmuls), sums %.1f MiB (in the maps above)\n",
            a.pos_dim, a.pos_width, K < C ? "hashed" : "the whole width", a.pos_stride,
            per / a.pos_stride, 100 * per / a.pos_stride / layer, layer,
            L * 8.0 * ((2 + mp_probe_pos_groups(a.pos_dim)) * (3 + 2 * K + K * K) + MP_PROBE_POS_MAE_ROWS * (K + 1)) / 1048576.0);
}

/* The residual-stream statistics' sampling of sequences, on the log. */
static void probe_resid_log(FILE *lg, const MpProbeConfig *c, int64_t n, int deepest) {
    const int k = mp_probe_resid_stride(c, n);
    fprintf(lg, "residual stream (--stats variance, position): %lld of %lld sequences (s %% %d == 0, --resid-stride %d%s); "
                "layer %d runs its o_proj and MLP for those only\n",
            (long long)((n + k - 1) / k), (long long)n, k, k, c->resid_stride ? "" : ": the default at this N", deepest);
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
        char keep[128];
        snprintf(keep, sizeof keep, "on, the lowest %d of %d frequency pairs not (--rope-keep-high)", s->fc.rope_unrotated, m->rot_dim / 2);
        const char *rope_word = !s->rope                       ? "off (--no-rope)"
                                : s->fc.rope_unrotated > 0     ? keep
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
    if (lg && (s->stats & MP_PROBE_STAT_BIT(MP_PROBE_STAT_POSITION))) probe_pos_cost(lg, r, m, L);
    if (lg && (s->stats & (MP_PROBE_STAT_BIT(MP_PROBE_STAT_POSITION) | MP_PROBE_STAT_BIT(MP_PROBE_STAT_VARIANCE))))
        probe_resid_log(lg, r, tk->n, s->deepest);
    const uint64_t limit = r->max_mem_gib > 0 ? (uint64_t)(r->max_mem_gib * 1073741824.0) : probe_mem_available();
    if (limit && peak > limit)
        return mp_err_set(e, "expected peak %.1f MiB exceeds the %s %.1f MiB; HINT: %sfewer --layers, a shorter --seq or no --per-head",
                          peak / 1048576.0, r->max_mem_gib > 0 ? "--max-mem-gib limit" : "memory available", limit / 1048576.0,
                          r->compute == MP_FWD_COMPUTE_F32 ? "--compute bf16 (weights in half the memory), " : "");
    /* a device (--device cuda): the weights, the activations and the sums live in its memory */
    return mp_fwd_plugin_mem_check(r->device, wbytes + abytes + maps, e);
}

/* The accumulator with the statistics of the run, and the forward pass with the hooks their inputs
 * need beside the rows hook and the capture hook (mp_probe_run_ranks sets those per sequence): the
 * probabilities after each layer's softmax. */
static int probe_acc_setup(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    if (mp_probe_acc_init(&s->acc, s->mask0, s->m->n_layers, s->m->n_heads, s->tk.seq, r->per_head, s->causal, s->threads,
                          e) != MP_OK ||
        mp_fwd_init(&s->f, s->m, &s->fc, e) != MP_OK)
        return MP_ERR;
    if (probe_stats_skip(s->m, &s->tk)) mp_probe_acc_skip(&s->acc, 1);
    mp_probe_acc_windows(&s->acc, s->m); /* sliding-window layers: keys outside the window unobserved */
    if ((s->stats & MP_PROBE_STAT_BIT(MP_PROBE_STAT_FREQ)) && /* --stats freq: the heads and their RoPE tables */
        mp_probe_freq_geometry(&s->acc, s->m, s->rope, s->fc.rope_unrotated, e) != MP_OK)
        return MP_ERR;
    mp_probe_pos_settings(&s->acc, r, s->m);
    s->acc.resid_stride = mp_probe_resid_stride(r, s->tk.n);
    if (mp_probe_acc_stats_on(&s->acc, s->stats, e) != MP_OK) return MP_ERR;
    const unsigned in = mp_probe_acc_inputs(&s->acc);
    if (in & MP_PROBE_IN_PROBS) s->f.probs_hook = mp_probe_acc_probs_hook, s->f.probs_ctx = &s->acc;
    /* the capture points (MP_PROBE_IN_CAPTURE): mp_probe_run_ranks sets f.capture per sequence, to the
     * accumulator (or worker's part) at hand */
    return MP_OK;
}

/* The run key: model (its description and the bytes of the weights the run reads), tokens and
 * every flag that changes the sums; a checkpoint resumes only under the same key. bits: the bf16
 * matmul's bit class (MpFwdBits) in the key; -1: none (the key of maskpos before issue #37). */
static uint64_t probe_run_key(const ProbeState *s, int bits) {
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
        if (bits >= 0) { /* kernels of two classes sum in two orders: a resume never mixes them */
            const int64_t bc = bits;
            key = mp_fnv1a64(&bc, sizeof bc, key);
        }
    }
    if (s->acc.skip) { /* the block sums start at position 1: not those of an older maskpos */
        const int64_t sk = s->acc.skip;
        key = mp_fnv1a64(&sk, sizeof sk, key);
    }
    int windowed = 0; /* sliding windows that mask at this S (none: the key of an older maskpos) */
    for (int l = 0; l < s->acc.L; l++) windowed |= s->acc.window[l] > 0;
    if (windowed) key = mp_fnv1a64(s->acc.window, sizeof(int) * (size_t)s->acc.L, key);
    if (s->fc.rope_unrotated) { /* --rope-keep-high: other scores (none: the key of an older maskpos) */
        const int64_t un = s->fc.rope_unrotated;
        key = mp_fnv1a64(&un, sizeof un, key);
    }
    if (s->acc.resid_stride > 1 && (mp_probe_acc_has(&s->acc, MP_PROBE_STAT_POSITION) ||
                                    mp_probe_acc_has(&s->acc, MP_PROBE_STAT_VARIANCE))) { /* other sequences (1: the old key) */
        const int64_t rs = s->acc.resid_stride;
        key = mp_fnv1a64(&rs, sizeof rs, key);
    }
    if (mp_probe_acc_has(&s->acc, MP_PROBE_STAT_POSITION)) { /* its features and positions (λ acts on the result only) */
        const int64_t ps[2] = {s->acc.pos_dim, s->acc.pos_stride};
        key = mp_fnv1a64(ps, sizeof ps, key);
    }
    return key;
}

/* The log's line on the matmul kernel: which, its bit class, and how it was chosen. */
static void probe_log_kernel(const ProbeState *s) {
    if (!s->c->log || mp_mpi_rank() != 0) return;
    const int bf16 = s->c->compute == MP_FWD_COMPUTE_BF16, bits = mp_fwd_kernel_bits(s->f.kernel, bf16);
    const char *req = getenv("MASKPOS_KERNEL");
    fprintf(s->c->log, "matmul: kernel %s, bit class %s", mp_fwd_kernel_name(s->f.kernel), mp_fwd_bits_name(bits));
    if (req && *req && strcmp(req, "auto") && mp_fwd_bits_parse(req) < 0) fprintf(s->c->log, " (MASKPOS_KERNEL=%s)\n", req);
    else fprintf(s->c->log, " (%s%s, the fastest of its class: %s)\n", req && *req && strcmp(req, "auto") ? "MASKPOS_KERNEL=" : "",
                 req && *req && strcmp(req, "auto") ? req : "auto", mp_fwd_kernel_pick_note(bits, bf16));
}

/* --resume without a checkpoint: a finished run in the folder (its meta.json) must be this run
 * (its whole key: model, weights, ids, N, S, every flag), or its files would be mixed with another
 * run's (a --per-head run's scores_heads.npy beside maps of other tokens). */
static int probe_resume_finished(const ProbeState *s, MpErr *e) {
    char path[4200], ours[32], our_weights[32];
    if (mp_path_join(path, sizeof path, s->c->out, "meta.json", e) != MP_OK) return MP_ERR;
    if (!mp_file_exists(path)) return MP_OK;
    MpErr je;
    json_t *j = mp_json_read(path, &je);
    const char *theirs = json_string_value(json_object_get(j, "run_key"));
    const char *weights = json_string_value(json_object_get(j, "weights_hash"));
    snprintf(ours, sizeof ours, "%016llx", (unsigned long long)s->key);
    snprintf(our_weights, sizeof our_weights, "%016llx", (unsigned long long)s->weights_hash);
    int rc = MP_OK;
    if (!theirs)
        rc = mp_err_set(e, "--resume: %s holds a finished run that names no run_key (another command, or an older "
                           "maskpos): cannot tell whether it is this run; HINT: another --out, or --force to replace it",
                        s->c->out);
    else if (strcmp(theirs, ours))
        rc = mp_err_set(e, "--resume: %s holds a finished run of %s (run_key %.20s, this run %s): its files would be "
                           "mixed with this run's; HINT: the same model, tokens and flags, another --out, or --force to "
                           "replace it",
                        s->c->out,
                        weights && !strcmp(weights, our_weights) ? "other tokens or flags"
                                                                 : "another model or other weights",
                        theirs, ours);
    json_decref(j);
    return rc;
}

/* The matmul's bit class of this run (bf16; -1 for f32, whose key has none). */
static int probe_bits(const ProbeState *s) {
    return s->c->compute == MP_FWD_COMPUTE_BF16 ? mp_fwd_kernel_bits(s->f.kernel, 1) : -1;
}

/* A bf16 checkpoint refused under this run's key: when it is this run under another bit class
 * (or the class-less key of an older maskpos), say so and how to resume it. MP_ERR either way. */
static int probe_resume_other_bits(ProbeState *s, MpErr *e) {
    const int own = probe_bits(s);
    for (int b = -1; own >= 0 && b < MP_FWD_BITS_COUNT; b++) {
        MpErr e2;
        int missing;
        if (b == own || mp_probe_ckpt_load(s->ckpt, &s->acc, probe_run_key(s, b), &missing, &e2) != MP_OK) continue;
        if (b < 0)
            return mp_err_set(e, "%s is a bf16 checkpoint of an older maskpos, whose run key does not say which "
                                 "bit class of matmul kernels summed it (docs/speed.md); HINT: run again without --resume "
                                 "(--force replaces the folder)",
                              s->ckpt);
        const int k = mp_fwd_kernel_pick(b, 1);
        return mp_err_set(e, "%s was summed by bf16 matmul kernels of bit class %s; this run's kernel %s is of "
                             "class %s, whose sums differ; HINT: MASKPOS_KERNEL=%s resumes it with the same bits (%s%s)",
                          s->ckpt, mp_fwd_bits_name(b), mp_fwd_kernel_name(s->f.kernel), mp_fwd_bits_name(own),
                          mp_fwd_bits_name(b), k >= 0 ? "here: kernel " : "no kernel of that class runs on this CPU",
                          k >= 0 ? mp_fwd_kernel_name((MpFwdKernel)k) : "");
    }
    return MP_ERR;
}

/* --resume on rank 0: the checkpoint's sums (none: from the first sequence). */
static int probe_resume(ProbeState *s, MpErr *e) {
    const MpProbeConfig *r = s->c;
    int missing;
    if (mp_probe_ckpt_load(s->ckpt, &s->acc, s->key, &missing, e) != MP_OK) {
        if (!missing && probe_bits(s) >= 0 && strstr(e->msg, "belongs to another run")) {
            MpErr e3 = *e;
            if (probe_resume_other_bits(s, &e3) == MP_ERR && e3.msg[0] && strcmp(e3.msg, e->msg)) *e = e3;
        }
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
    if (mp_probe_config_stats(r, &s->stats, e) != MP_OK || probe_layers(s, e) != MP_OK || probe_tokens(s, e) != MP_OK)
        return MP_ERR;
    s->fc = (MpFwdConfig){.n_layers = s->deepest, .max_seq = s->tk.seq, .causal = s->causal, .rope = s->rope,
                          .rope_unrotated = mp_fwd_rope_unrotated(r->rope_keep_high, s->m->rot_dim / 2),
                          .logits = 0, .compute = r->compute, .device = r->device};
    probe_taps(&s->fc, s->stats, r->per_head, s->threads);
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
    s->key = probe_run_key(s, probe_bits(s));
    probe_log_kernel(s);
    s->ckpt[0] = 0;
    if (r->out && mp_path_join(s->ckpt, sizeof s->ckpt, r->out, "checkpoint.bin", e) != MP_OK) return MP_ERR;
    if (r->resume && mp_mpi_rank() == 0 && probe_resume(s, e) != MP_OK) return MP_ERR;
    if (r->out && mp_mpi_rank() == 0) { /* the folder's run key (files.h): a later --resume of another run is refused */
        char hex[32];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->key);
        if (mp_outdir_key(r->out, hex, e) != MP_OK) return MP_ERR;
    }
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

/* meta.json's "device": "cpu", or the GPU the forward pass ran on (name, compute capability,
 * memory, the driver's and runtime's CUDA versions, cuBLASLt's version). */
static json_t *probe_meta_device(const char *device) {
    MpFwdDeviceInfo in;
    MpErr e;
    if (!device || !mp_fwd_plugin_known(device) || mp_fwd_plugin_device_info(device, &in, &e) != MP_OK) return json_string("cpu");
    json_t *d = json_object();
    char v[64];
    snprintf(v, sizeof v, "cuda:%d", in.ordinal);
    json_object_set_new(d, "device", json_string(v));
    json_object_set_new(d, "name", json_string(in.name));
    snprintf(v, sizeof v, "%d.%d", in.cc_major, in.cc_minor);
    json_object_set_new(d, "compute_capability", json_string(v));
    json_object_set_new(d, "memory_bytes", json_integer(in.mem_total));
    snprintf(v, sizeof v, "%d.%d", in.driver / 1000, in.driver % 1000 / 10);
    json_object_set_new(d, "driver_cuda_version", json_string(v));
    snprintf(v, sizeof v, "%d.%d", in.runtime / 1000, in.runtime % 1000 / 10);
    json_object_set_new(d, "cuda_runtime", json_string(v));
    snprintf(v, sizeof v, "%d.%d.%d", in.blas / 10000, in.blas / 100 % 100, in.blas % 100);
    json_object_set_new(d, "cublaslt", json_string(v));
    return d;
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
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)s->key);
    json_object_set_new(j, "run_key", json_string(hex));
    json_object_set_new(j, "run_key_of",
                        json_string("fnv1a64 of the model and weights hashes, the ids, N, S and every flag that changes "
                                    "the sums: the key of the run's checkpoints; probe --resume continues a finished "
                                    "folder only under the same key"));
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
    if (s->fc.rope_unrotated) { /* p-RoPE: which pairs were left unrotated */
        json_object_set_new(j, "rope_keep_high", json_real(s->c->rope_keep_high));
        json_object_set_new(j, "rope_unrotated_pairs", json_integer(s->fc.rope_unrotated));
        json_object_set_new(j, "rope_pairs", json_integer(m->rot_dim / 2));
    }
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
    json_object_set_new(j, "device", probe_meta_device(r->device));
    {
        const int bf16 = r->compute == MP_FWD_COMPUTE_BF16, bits = mp_fwd_kernel_bits(s->f.kernel, bf16);
        const char *req = getenv("MASKPOS_KERNEL");
        char how[128];
        if (!req || !*req || !strcmp(req, "auto")) snprintf(how, sizeof how, "auto: the fastest kernel of the default class here");
        else if (mp_fwd_bits_parse(req) >= 0) snprintf(how, sizeof how, "MASKPOS_KERNEL=%.40s: the fastest kernel of that class here", req);
        else snprintf(how, sizeof how, "MASKPOS_KERNEL=%.40s", req);
        json_object_set_new(j, "matmul_bits", json_string(mp_fwd_bits_name(bits))); /* its bit class (docs/speed.md) */
        json_object_set_new(j, "matmul_choice", json_string(how)); /* the measured rates: the log's matmul line */
    }
    json_object_set_new(j, "compute_time_s", json_real(res->compute_s));
    return j;
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
    res->first = s->acc.n_done;
    /* figure titles say what the model is, not only its folder's name ("none" was the NoPE model) */
    const char *slash = strrchr(s->m->path, '/');
    int nope = s->m->rope_layer != NULL;
    for (int l = 0; l < s->m->n_layers && s->m->rope_layer; l++) nope &= !s->m->rope_layer[l];
    snprintf(res->title, sizeof res->title, "%.200s (%s, %s)", slash && slash[1] ? slash + 1 : s->m->path,
             mp_model_arch_name(s->m->arch), !s->rope ? "RoPE off" : nope ? "no positional encoding" : "RoPE");
}

/* bf16 under MPI (every rank set up): the ranks' matmul kernels are of one bit class, rank 0's,
 * or all stop — the sums of one job never mix two orders (their CPUs may differ: each picked the
 * fastest kernel of its own default class). */
static int probe_bits_agree(const ProbeState *s, MpErr *e) {
    const int mine = probe_bits(s);
    int64_t b0 = mine;
    mp_mpi_bcast(&b0, sizeof b0, 0);
    if (mp_mpi_agree(mine == b0)) return MP_OK;
    if (mine != b0)
        return mp_err_set(e, "MPI rank %d sums bf16 matmuls in bit class %s (kernel %s), rank 0 in class %s: their CPUs "
                             "differ; HINT: MASKPOS_KERNEL=%s for every rank (mpirun -x MASKPOS_KERNEL=%s)",
                          mp_mpi_rank(), mp_fwd_bits_name(mine), mp_fwd_kernel_name(s->f.kernel), mp_fwd_bits_name((int)b0),
                          mp_fwd_bits_name((int)b0), mp_fwd_bits_name((int)b0));
    if (mp_mpi_rank() == 0)
        return mp_err_set(e, "another MPI rank sums bf16 matmuls in another bit class than rank 0's %s (its message is "
                             "above)", mp_fwd_bits_name(mine));
    e->msg[0] = 0;
    return MP_ERR;
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
        if (rc == MP_OK) rc = probe_bits_agree(&s, e);
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
