/* probe.c — `maskpos probe`: mean pre-softmax attention-score maps of a real model over a corpus
 * of token ids (paper §5.2, Figure 5), with counterfactuals (no mask, no RoPE).
 *
 *   maskpos probe MODEL --tokens ids.npy --seq 1024 --n 1000 --layers 1-4 --out results/llama
 * Streams one sequence at a time through the first layers (src/model/fwd.h), adding every
 * selected layer's scores to double sums (src/model/probe.h); writes scores.npy,
 * scores_diagnorm.npy, scores_se.npy (standard errors), optional scores_heads.npy and meta.json; prints per-layer NRI and residue
 * range. --checkpoint-every K / --resume make long runs restartable with bit-identical results.
 * Test hook: MASKPOS_TEST_KILL_AFTER=K makes the process SIGKILL itself after K sequences (after
 * any checkpoint due then) — tests/test_model_probe.c uses it to test resuming; under mpirun,
 * MASKPOS_TEST_KILL_RANK=R makes rank R do it, once it has computed a sequence >= K - 1 (before
 * sending it).
 * Under mpirun (N ranks) the sequences are shared out by model/probe_ranks.c; rank 0 alone prints,
 * checkpoints and writes (docs/mpi.md).
 */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cli/cli.h"       /* mp_cli_* */
#include "cli/sim_out.h"   /* mp_cli_stats_json */
#include "core/json.h"      /* meta.json, MP_VERSION */
#include "core/npy.h"       /* mp_npy_write */
#include "core/progress.h"  /* MpProgress */
#include "core/util.h"      /* mp_parse_range_list, mp_mkdir_p, mp_path_join, mp_time_now, mp_peak_rss_bytes */
#include "kernels/posmap.h" /* mp_posmap_diagnorm, mp_posmap_stats */
#include "load/model.h"     /* mp_model_open */
#include "model/fwd.h"      /* MpFwd */
#include "model/probe.h"    /* MpProbeTokens, MpProbeAcc, checkpoints */
#include "core/mpi.h"       /* mp_mpi_rank, mp_mpi_size: under mpirun */
#include "model/probe_ranks.h" /* mp_probe_run_ranks: the loop over sequences */
#include "cli/probe_probs.h" /* --probs: probs.npy, sink and entropy */
#include "cli/probe_len.h"   /* --recency: RP per layer and head, statistics by length */
#include "model/probe_recency.h" /* mp_probe_acc_recency_on */
#include "tok/corpus.h"     /* --data: mp_tok_corpus_build */
#include "tok/tok.h"        /* --data: the model's tokenizer */
#include "viz/plot.h"       /* --plot */
#include "core/files.h" /* mp_outdir_claim, mp_outfile_claim: one run per --out */

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
    "  --layers SPEC        1-based layers, e.g. 1-4, 2,5, all (default 1-4, or all when fewer)\n"
    "  --per-head           also write scores_heads.npy [L,H,S,S] (and probs_heads.npy with --probs)\n"
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
    "  --checkpoint-every K save partial sums to DIR/checkpoint.bin every K sequences (atomically)\n"
    "  --resume             continue from DIR/checkpoint.bin (same model, tokens and flags)\n"
    "  --allow-long         run S past the model's trained context (max_position_embeddings, or a\n"
    "                       model that does not state it): refused without it; warned and recorded\n"
    "                       in meta.json (beyond_trained_context) with it\n"
    "  --force              replace the outputs of an earlier run in --out (else such a folder is\n"
    "                       refused: a folder holds one run's outputs)\n"
    "  --out DIR            outputs: scores.npy float64 [L,S,S] (mean over sequences and heads; NaN\n"
    "                       where masked), scores_diagnorm.npy, scores_heads.npy, meta.json\n"
    "  --plot               also draw DIR/scores_diagnorm.png (first 4 selected layers, diagonal-\n"
    "                       normalised, colour limits at the 1st/99th percentile)\n"
    "  --max-mem-gib G      refuse to start when the expected peak exceeds G GiB (default: the\n"
    "                       memory available now)\n"
    "  --quiet              no progress bar\n"
    "\n"
    "Printed: the expected peak memory before starting; per layer the NRI (non-relative index,\n"
    "docs/metrics.md) and the range and rms of the diagonal-normalised residue; tokens/s.\n"
    "Bad input (malformed token file, ids >= vocab, N = 0, bad flags): one-line error, exit 2.\n"
    "Under mpirun -np N (make MPI=1) the ranks share the sequences and rank 0 writes the bytes of a\n"
    "one-process run; --threads is per rank (docs/mpi.md).\n";

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
    return 4 * (a > b ? a : b);
}

typedef struct ProbeRun {
    const char *model_path, *tokens_path, *out;
    int seq, per_head, causal, rope, threads, plot, quiet;
    int compute; /* MpFwdCompute */
    int probs;   /* --probs */
    int recency; /* --recency */
    int64_t n, ckpt_every;
    int resume;
    double max_mem_gib;
    const char *layers_spec;
    /* --data */
    const char *data, *tokenizer, *field;
    int whole, shuffle, no_special, pack;
    uint64_t seed;
    uint64_t corpus_hash;
    int allow_long, beyond; /* --allow-long; 1 when S is past the trained context (meta.json) */
} ProbeRun;

/* --data: tokenizes documents into tk (N x S ids), the way `maskpos corpus` does. */
static int probe_tokens_from_text(MpProbeTokens *tk, ProbeRun *r, int vocab, MpErr *e) {
    MpTok t;
    memset(&t, 0, sizeof t);
    if (mp_tok_init(&t, r->tokenizer ? r->tokenizer : r->model_path, e) != MP_OK) return MP_ERR;
    MpTokCorpusOpts o = {.field = r->field, .whole = r->whole, .n = r->n, .seq = r->seq, .shuffle = r->shuffle,
                         .seed = r->seed, .add_special = !r->no_special, .pack = r->pack};
    MpTokCorpus c;
    memset(&c, 0, sizeof c);
    int rc = mp_tok_corpus_build(&c, &t, r->data, &o, e);
    mp_tok_free(&t);
    if (rc != MP_OK) return MP_ERR;
    memset(tk, 0, sizeof *tk);
    uint64_t h = MP_FNV_INIT;
    for (int64_t i = 0; i < c.n * c.seq; i++) {
        if (c.ids[i] < 0 || c.ids[i] >= vocab) {
            rc = mp_err_set(e, "%s: the tokenizer gave id %d (document %lld), outside the model's vocabulary [0, %d)",
                            r->data, c.ids[i], (long long)(i / c.seq), vocab);
            mp_tok_corpus_free(&c);
            return rc;
        }
        h = mp_fnv1a64(&c.ids[i], 4, h);
    }
    tk->ids = c.ids;
    c.ids = NULL;
    tk->n = c.n;
    tk->seq = (int)c.seq;
    tk->available = c.n;
    tk->hash = h;
    r->corpus_hash = c.hash;
    printf("data: %s (%s, %lld file%s): %lld documents examined, %lld shorter than %d tokens skipped\n", r->data, c.format,
           (long long)c.n_files, c.n_files == 1 ? "" : "s", (long long)c.n_examined, (long long)c.n_skipped, tk->seq);
    mp_tok_corpus_free(&c);
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

static int probe_write_outputs(const ProbeRun *r, const MpModel *m, const MpProbeTokens *tk, const MpProbeAcc *a,
                               const int *layers, uint64_t model_hash, double wall, double compute_s,
                               int argc, char **argv, MpErr *e) {
    const int L = a->L, S = a->S, H = a->H;
    const size_t SS = (size_t)S * S;
    double *mean = mp_malloc_or_die(SS * L * sizeof(double), "score maps");
    double *dn = mp_malloc_or_die(SS * L * sizeof(double), "normalised maps");
    double *se = mp_malloc_or_die(SS * L * sizeof(double), "standard errors");
    double *heads = a->per_head ? mp_malloc_or_die(SS * L * H * sizeof(double), "per-head maps") : NULL;
    MpPosStats *st = mp_calloc_or_die((size_t)L, sizeof *st, "stats");
    mp_probe_acc_mean(a, mean, heads);
    mp_probe_acc_se(a, se);
    double *scratch = a->skip ? mp_malloc_or_die(3 * SS * sizeof(double), "statistics scratch") : NULL;
    mp_probe_layer_stats(st, dn, mean, se, a->n_done >= 2, L, S, a->skip, scratch);
    free(scratch);
    if (a->skip)
        printf("every sequence starts with BOS (id %d): the statistics below are over positions 1..%d (the maps "
               "keep BOS)\n", m->bos_id, S - 1);
    printf("%6s %10s %13s %13s %12s %10s %8s %11s %12s\n", "layer", "NRI", "residue min", "residue max", "residue rms",
           "rms/noise", "block z", "rising rows", "mean slope");
    for (int l = 0; l < L; l++)
        if (!st[l].observed) printf("%6d %10s  no finite entries: no statistic\n", layers[l] + 1, "nan");
        else printf("%6d %10.6f %13.5f %13.5f %12.6f %10.2f %8.2f %10.1f%% %12.3e\n", layers[l] + 1, st[l].nri, st[l].res_min,
               st[l].res_max, st[l].res_rms, st[l].z_rms, mp_probe_acc_block_z(a, l), 100 * st[l].rise_share,
               st[l].mean_slope);
    char path[4096];
    int rc = MP_OK;
    int64_t shp[4] = {L, S, S, 0}, shph[4] = {L, H, S, S};
    if (mp_path_join(path, sizeof path, r->out, "meta.json", e) != MP_OK) rc = MP_ERR;
    else remove(path); /* meta.json marks a complete result: drop a stale one first */
    if (rc == MP_OK && (mp_path_join(path, sizeof path, r->out, "scores.npy", e) != MP_OK ||
                        mp_npy_write(path, MP_DT_F64, mean, 3, shp, e) != MP_OK))
        rc = MP_ERR;
    if (rc == MP_OK && (mp_path_join(path, sizeof path, r->out, "scores_diagnorm.npy", e) != MP_OK ||
                        mp_npy_write(path, MP_DT_F64, dn, 3, shp, e) != MP_OK))
        rc = MP_ERR;
    if (rc == MP_OK && (mp_path_join(path, sizeof path, r->out, "scores_se.npy", e) != MP_OK ||
                        mp_npy_write(path, MP_DT_F64, se, 3, shp, e) != MP_OK))
        rc = MP_ERR;
    if (rc == MP_OK && heads &&
        (mp_path_join(path, sizeof path, r->out, "scores_heads.npy", e) != MP_OK ||
         mp_npy_write(path, MP_DT_F64, heads, 4, shph, e) != MP_OK))
        rc = MP_ERR;
    if (rc == MP_OK && r->plot) {
        MpPlotOptions o;
        mp_plot_options_default(&o);
        if (mp_plot_preset_apply(&o, "fig5", e) != MP_OK) rc = MP_ERR;
        MpPlotPanel pn[4];
        memset(pn, 0, sizeof pn);
        int np = L < 4 ? L : 4;
        for (int l = 0; l < np; l++) {
            pn[l].map = mean + l * SS;
            pn[l].rows = pn[l].cols = S;
            snprintf(pn[l].title, sizeof pn[l].title, "Layer %d", layers[l] + 1);
        }
        if (rc == MP_OK) {
            const char *slash = strrchr(m->path, '/');
            snprintf(o.title, sizeof o.title, "%.200s%s%s", slash && slash[1] ? slash + 1 : m->path,
                     r->causal ? "" : ", bidirectional", r->rope ? "" : ", no RoPE");
            if (mp_path_join(path, sizeof path, r->out, "scores_diagnorm.png", e) != MP_OK ||
                mp_plot_render(path, pn, np, &o, e) != MP_OK)
                rc = MP_ERR;
            mp_plot_release();
        }
    }
    if (rc == MP_OK) {
        json_t *j = json_object(), *lj = json_array();
        char hex[32];
        json_object_set_new(j, "kind", json_string("probe"));
        json_object_set_new(j, "model", json_string(m->path));
        json_object_set_new(j, "model_format", json_string(m->format == MP_FORMAT_GGUF ? "gguf" : "hf"));
        json_object_set_new(j, "arch", json_string(mp_model_arch_name(m->arch)));
        json_object_set_new(j, "max_position_embeddings", json_integer(m->max_pos));
        json_object_set_new(j, "beyond_trained_context", json_boolean(r->beyond)); /* --allow-long */
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)model_hash);
        json_object_set_new(j, "model_hash", json_string(hex));
        json_object_set_new(j, "model_hash_of", json_string("fnv1a64 of hyperparameters and tensor table (names, types, shapes, sizes)"));
        if (r->data) {
            json_object_set_new(j, "data", json_string(r->data));
            json_object_set_new(j, "tokenizer", json_string(r->tokenizer ? r->tokenizer : r->model_path));
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r->corpus_hash);
            json_object_set_new(j, "data_files_hash", json_string(hex));
            json_object_set_new(j, "packed", json_boolean(r->pack));
        } else {
            json_object_set_new(j, "tokens", json_string(r->tokens_path));
        }
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)tk->hash);
        json_object_set_new(j, "data_hash", json_string(hex));
        json_object_set_new(j, "data_hash_of", json_string("fnv1a64 of the N*S ids used, as little-endian int32"));
        json_object_set_new(j, "n", json_integer(tk->n));
        json_object_set_new(j, "seq", json_integer(S));
        json_object_set_new(j, "skipped_tokens", json_integer(tk->skipped));
        json_object_set_new(j, "stats_first_position", json_integer(a->skip));
        json_object_set_new(j, "stats_first_position_of",
                            json_string("NRI, residue, block z, rising rows and slope cover positions from this one on "
                                        "(diagonal-normalised among themselves): 1 when every sequence starts with BOS"));
        for (int l = 0; l < L; l++) json_array_append_new(lj, json_integer(layers[l] + 1));
        json_object_set_new(j, "layers", lj);
        json_object_set_new(j, "heads", json_integer(H));
        json_object_set_new(j, "kv_heads", json_integer(m->n_kv_heads));
        json_object_set_new(j, "head_dim", json_integer(m->head_dim));
        json_object_set_new(j, "causal", json_boolean(r->causal));
        json_object_set_new(j, "rope", json_boolean(r->rope));
        json_object_set_new(j, "per_head", json_boolean(r->per_head));
        json_object_set_new(j, "threads", json_integer(r->threads));
        json_object_set_new(j, "mpi_ranks", json_integer(mp_mpi_size()));
        json_object_set_new(j, "compute", json_string(r->compute == MP_FWD_COMPUTE_BF16
                                                          ? "bf16: bf16 Linear weights and inputs, f32 accumulation, f32 attention; map sums in double"
                                                          : "f32 weights and activations, f32 accumulation; map sums in double"));
        json_object_set_new(j, "compute_mode", json_string(mp_fwd_compute_name(r->compute)));
        json_object_set_new(j, "matmul_kernel", json_string(mp_fwd_kernel_name(mp_fwd_kernel_get())));
        json_object_set_new(j, "compute_time_s", json_real(compute_s));
        json_t *fj = json_object();
        json_object_set_new(fj, "scores.npy", json_string("float64 [L,S,S] mean pre-softmax score over sequences and heads, row = query, column = key; NaN where masked"));
        json_object_set_new(fj, "scores_diagnorm.npy", json_string("float64 [L,S,S] scores minus the mean of their diagonal (i-j)"));
        json_object_set_new(fj, "scores_se.npy", json_string("float64 [L,S,S] standard error of each entry of scores.npy: sample standard deviation over sequences of the head-mean score / sqrt(N); NaN where masked or N < 2"));
        if (heads) json_object_set_new(fj, "scores_heads.npy", json_string("float64 [L,H,S,S] mean over sequences per query head"));
        json_object_set_new(j, "files", fj);
        json_object_set_new(j, "stats", mp_cli_stats_json(st, layers, L));
        json_t *bz = json_array();
        for (int l = 0; l < L; l++) {
            const double z = mp_probe_acc_block_z(a, l);
            json_array_append_new(bz, isfinite(z) ? json_real(z) : json_null());
        }
        json_object_set_new(j, "residue_block_z", bz);
        static const char *rname[MP_PROBE_NREGIONS] = {NULL, "first_keys", "last_queries", "last_keys", "interior"};
        json_t *rz = json_object();
        for (int g = 1; g < MP_PROBE_NREGIONS; g++) {
            json_t *arr = json_array();
            for (int l = 0; l < L; l++) {
                const double z = mp_probe_acc_block_z_region(a, l, g);
                json_array_append_new(arr, isfinite(z) ? json_real(z) : json_null());
            }
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
        const char *slash = strrchr(m->path, '/');
        const char *base = slash && slash[1] ? slash + 1 : m->path;
        int prc = r->probs ? mp_probe_probs_write(r->out, a, layers, r->plot, base, j, fj, e) : MP_OK;
        if (prc == MP_OK && r->recency) prc = mp_probe_len_write(r->out, a, mean, se, heads, layers, r->plot, base, j, fj, e);
        mp_json_add_provenance(j, argc, argv, wall);
        if (prc != MP_OK || mp_path_join(path, sizeof path, r->out, "meta.json", e) != MP_OK ||
            mp_json_write_atomic(path, j, e) != MP_OK)
            rc = MP_ERR;
        json_decref(j);
    }
    free(st);
    free(heads);
    free(se);
    free(dn);
    free(mean);
    return rc;
}

/* What the loop does after each sequence (model/probe_ranks.h): rank 0 checkpoints and draws
 * progress; the test hook kills the chosen rank. */
typedef struct ProbeStep {
    const ProbeRun *r;
    const char *ckpt;
    uint64_t key;
    int64_t n, first, kill_after;
    int kill_rank, seq;
    MpProgress *pg;
} ProbeStep;

static int probe_step(void *ctx, const MpProbeAcc *a, int64_t s, MpErr *e) {
    const ProbeStep *p = ctx;
    const int rank = mp_mpi_rank();
    if (rank == 0) {
        if (p->r->ckpt_every > 0 && a->n_done % p->r->ckpt_every == 0 && a->n_done < p->n &&
            mp_probe_ckpt_save(p->ckpt, a, p->key, e) != MP_OK)
            return mp_err_prefix(e, "checkpoint");
        snprintf(p->pg->label, sizeof p->pg->label, "probe: seq %lld/%lld", (long long)a->n_done, (long long)p->n);
        mp_progress_update(p->pg, (a->n_done - p->first) * p->seq);
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

int mp_cmd_probe(int argc, char **argv) {
    const char *cmd = "probe";
    ProbeRun r;
    memset(&r, 0, sizeof r);
    r.causal = 1;
    r.rope = 1;
    r.max_mem_gib = -1;
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
        {"compute", required_argument, 0, 'P'},
        {"force", no_argument, 0, 'f'},        {"allow-long", no_argument, 0, 'A'},
        {"probs", no_argument, 0, 'Z'},        {"recency", no_argument, 0, 'Y'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c, force = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': r.tokens_path = optarg; break;
        case 'S': r.seq = (int)mp_cli_i64(cmd, "--seq", optarg, 1, 1 << 20); break;
        case 'n': r.n = mp_cli_i64(cmd, "--n", optarg, 1, INT64_C(1) << 40); break;
        case 'L': r.layers_spec = optarg; break;
        case 'H': r.per_head = 1; break;
        case 'Z': r.probs = 1; break;
        case 'Y': r.recency = 1; break;
        case 'b': r.causal = 0; break;
        case 'r': r.rope = 0; break;
        case 'j': r.threads = (int)mp_cli_i64(cmd, "--threads", optarg, 1, 1024); break;
        case 'k': r.ckpt_every = mp_cli_i64(cmd, "--checkpoint-every", optarg, 1, INT64_C(1) << 40); break;
        case 'R': r.resume = 1; break;
        case 'o': r.out = optarg; break;
        case 'p': r.plot = 1; break;
        case 'M': r.max_mem_gib = mp_cli_double(cmd, "--max-mem-gib", optarg, 1e-6, 1e6); break;
        case 'q': r.quiet = 1; break;
        case 'P':
            if ((r.compute = mp_fwd_compute_parse(optarg)) < 0) return mp_cli_error(cmd, "--compute: '%s' is not f32 or bf16", optarg);
            break;
        case 'D': r.data = optarg; break;
        case 'T': r.tokenizer = optarg; break;
        case 'F': r.field = optarg; break;
        case 'W': r.whole = 1; break;
        case 'U': r.shuffle = 1; break;
        case 'E': r.seed = (uint64_t)mp_cli_i64(cmd, "--seed", optarg, 0, INT64_MAX); break;
        case 'N': r.no_special = 1; break;
        case 'K': r.pack = 1; break;
        case 'f': force = 1; break;
        case 'A': r.allow_long = 1; break;
        case 'h': fputs(probe_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind >= argc) return mp_cli_error(cmd, "no MODEL given (see 'maskpos probe --help')");
    r.model_path = argv[optind++];
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    if (!r.tokens_path && !r.data) return mp_cli_error(cmd, "--tokens FILE or --data TEXT is required");
    if (r.tokens_path && r.data) return mp_cli_error(cmd, "--tokens and --data exclude each other");
    if (r.data && (!r.n || !r.seq)) return mp_cli_error(cmd, "--data needs --n N and --seq S");
    if (!r.data && (r.tokenizer || r.field || r.whole || r.shuffle || r.no_special || r.pack))
        return mp_cli_error(cmd, "--tokenizer, --field, --whole, --shuffle, --no-special and --pack go with --data");
    if (!r.out) return mp_cli_error(cmd, "--out DIR is required");
    const int rank = mp_mpi_rank(), nranks = mp_mpi_size();
    int agreed = nranks < 2; /* ranks agree once, before the loop, that each could set up */
    if (rank > 0) r.quiet = 1;
    const double t_start = mp_time_now();
#ifdef _OPENMP
    if (r.threads == 0) r.threads = omp_get_max_threads();
    omp_set_num_threads(r.threads);
#else
    r.threads = 1;
#endif

    MpErr e;
    MpModel m;
    memset(&m, 0, sizeof m);
    if (mp_model_open(&m, r.model_path, &e) != MP_OK) {
        const int erc = mp_cli_error(cmd, "%s", e.msg);
        if (!agreed) mp_mpi_agree(0);
        return erc;
    }
    int rc = MP_EXIT_OK;
    MpProbeTokens tk;
    MpProbeAcc acc;
    MpFwd f;
    memset(&tk, 0, sizeof tk);
    memset(&acc, 0, sizeof acc);
    memset(&f, 0, sizeof f);
    unsigned char mask[1024] = {0};
    int layers[256], L = 0, deepest = 0;
    if (m.n_layers > 256) {
        rc = mp_cli_error(cmd, "%s: %d layers (at most 256 supported)", r.model_path, m.n_layers);
        goto done;
    }
    if (!r.layers_spec || !strcmp(r.layers_spec, "all")) {
        const int upto = !r.layers_spec ? (m.n_layers < 4 ? m.n_layers : 4) : m.n_layers;
        for (int l = 1; l <= upto; l++) mask[l] = 1;
    }
    if (r.layers_spec && strcmp(r.layers_spec, "all")) {
        /* parse against a generous bound first, so an out-of-range layer gets its own message */
        static unsigned char big[(1 << 16) + 1];
        memset(big, 0, sizeof big);
        if (mp_parse_range_list(r.layers_spec, 1 << 16, big) < 1) {
            rc = mp_cli_error(cmd, "--layers: '%s' is not a list of layers like 1-4 or 2,5 or all", r.layers_spec);
            goto done;
        }
        for (int l = 1; l <= (1 << 16); l++)
            if (big[l] && l > m.n_layers) {
                rc = mp_cli_error(cmd, "--layers: layer %d does not exist (the model has %d)", l, m.n_layers);
                goto done;
            }
        memset(mask, 0, sizeof mask);
        for (int l = 1; l <= m.n_layers; l++) mask[l] = big[l];
    }
    unsigned char mask0[256] = {0};
    for (int l = 1; l <= m.n_layers; l++)
        if (mask[l]) {
            mask0[l - 1] = 1;
            layers[L++] = l - 1;
            deepest = l;
        }
    if (mp_model_check_finite(&m, deepest, &e) != MP_OK) { /* NaN weights: refused, not all-NaN maps */
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }

    if (r.data ? probe_tokens_from_text(&tk, &r, m.vocab, &e) != MP_OK
               : mp_probe_tokens_read(&tk, r.tokens_path, r.seq, r.n, m.vocab, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (mp_model_context_check(&m, tk.seq, r.allow_long, &r.beyond, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (r.beyond)
        fprintf(stderr, "maskpos probe: warning: S=%d runs past the trained context of %s (max_position_embeddings %d%s); "
                        "recorded in meta.json\n", tk.seq, r.model_path, m.max_pos, m.max_pos ? "" : ": not stated");
    if (tk.skipped)
        printf("note: %lld trailing token%s of %s did not fill a sequence of %d and %s skipped\n",
               (long long)tk.skipped, tk.skipped == 1 ? "" : "s", r.tokens_path ? r.tokens_path : r.data, tk.seq,
               tk.skipped == 1 ? "was" : "were");

    MpFwdConfig fc = {.n_layers = deepest, .max_seq = tk.seq, .causal = r.causal, .rope = r.rope, .logits = 0,
                       .compute = r.compute};
    uint64_t wbytes, abytes;
    mp_fwd_plan_bytes(&m, &fc, &wbytes, &abytes);
    const uint64_t SS = (uint64_t)tk.seq * tk.seq;
    /* sums and sums of squares per layer (and per head), three one-sequence maps (head mean,
     * residue, the part after BOS) */
    uint64_t maps = SS * 8 * (L * (r.per_head ? 2 + (uint64_t)m.n_heads : 2) + 3) * (nranks > 1 && rank == 0 ? 2 : 1);
    if (r.probs) maps += SS * 8 * L * (r.per_head ? 1 + (uint64_t)m.n_heads : 1); /* probability sums */
    if (r.recency) /* triple counts per row and head, two corner maps, counting scratch, length blocks */
        maps += 8 * ((uint64_t)L * m.n_heads * tk.seq + 2 * SS + (uint64_t)tk.seq * (3 * r.threads + m.n_heads) +
                     (uint64_t)L * 24 * 512);
    /* mean, diagnorm, standard errors, heads at the end, and the statistics' scratch */
    uint64_t outs = SS * 8 * (L * (r.per_head ? 3 + (uint64_t)m.n_heads : 3) + 3);
    if (r.probs) outs += SS * 8 * L * (r.per_head ? 1 + (uint64_t)m.n_heads : 1); /* probs.npy, probs_heads.npy */
    const uint64_t tokb = (uint64_t)tk.n * tk.seq * 4;
    const uint64_t mapped = probe_mapped_bytes(&m, deepest);
    /* bf16 packs one panel of 32 rows at a time */
    const uint64_t scratch = r.compute == MP_FWD_COMPUTE_BF16 ? 4 * 32 * (uint64_t)(m.ffn > m.dim ? m.ffn : m.dim) : probe_scratch_bytes(&m);
    const uint64_t peak = wbytes + abytes + maps + outs + tokb + scratch;
    printf("probe: %s (%s, %d of %d layers run), N=%lld S=%d, layers", r.model_path, mp_model_arch_name(m.arch),
           deepest, m.n_layers, (long long)tk.n, tk.seq);
    for (int l = 0; l < L; l++) printf("%s%d", l ? "," : " ", layers[l] + 1);
    int nope_layers = 0;
    for (int l = 0; l < m.n_layers && m.rope_layer; l++) nope_layers += !m.rope_layer[l];
    const char *rope_word = !r.rope                           ? "off (--no-rope)"
                            : nope_layers == m.n_layers       ? "none (NoPE checkpoint)"
                            : nope_layers > 0                 ? "on (NoPE in some layers)"
                                                              : "on";
    printf(", %s, rope %s, %d thread%s, compute %s", r.causal ? "causal" : "bidirectional", rope_word, r.threads,
           r.threads == 1 ? "" : "s", mp_fwd_compute_name(r.compute));
    if (nranks > 1) printf(" (per rank), %d MPI ranks", nranks);
    printf("\n");
    printf("expected peak memory: weights %.1f MiB (%s) + load scratch %.1f MiB + activations and one sequence's "
           "scores %.1f MiB + maps %.1f MiB + outputs %.1f MiB = %.1f MiB; plus up to %.1f MiB of model file pages "
           "read through the mapping (reclaimable; released once packed)\n",
           wbytes / 1048576.0, mp_fwd_compute_name(r.compute), scratch / 1048576.0, abytes / 1048576.0, maps / 1048576.0, (outs + tokb) / 1048576.0,
           peak / 1048576.0, mapped / 1048576.0);
    {
        const uint64_t limit = r.max_mem_gib > 0 ? (uint64_t)(r.max_mem_gib * 1073741824.0) : probe_mem_available();
        if (limit && peak > limit) {
            rc = mp_cli_error(cmd, "expected peak %.1f MiB exceeds the %s %.1f MiB; HINT: fewer --layers, a shorter --seq or no --per-head",
                              peak / 1048576.0, r.max_mem_gib > 0 ? "--max-mem-gib limit" : "memory available", limit / 1048576.0);
            goto done;
        }
    }
    /* one run per folder (--resume continues it, --force replaces it); also the check that
     * --out is writable, before the compute */
    if (rank == 0 &&
        mp_outdir_claim(r.out, "probe", r.resume ? MP_OUTDIR_RESUME : force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) !=
            MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (mp_probe_acc_init(&acc, mask0, m.n_layers, m.n_heads, tk.seq, r.per_head, r.causal, r.threads, &e) != MP_OK ||
        mp_fwd_init(&f, &m, &fc, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (probe_stats_skip(&m, &tk)) mp_probe_acc_skip(&acc, 1);
    if (r.probs) { /* --probs: the probabilities after each layer's softmax */
        if (mp_probe_acc_probs_on(&acc, &e) != MP_OK) {
            rc = mp_cli_error(cmd, "%s", e.msg);
            goto done;
        }
        f.probs_hook = mp_probe_acc_probs_hook;
        f.probs_ctx = &acc;
    }
    if (r.recency && mp_probe_acc_recency_on(&acc, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    const uint64_t model_hash = mp_probe_model_hash(&m);
    uint64_t key = mp_fnv1a64(&model_hash, 8, MP_FNV_INIT);
    key = mp_fnv1a64(&tk.hash, 8, key);
    {
        const int64_t kv[] = {tk.n, tk.seq, r.causal, r.rope, r.per_head};
        key = mp_fnv1a64(kv, sizeof kv, key);
        key = mp_fnv1a64(mask0, sizeof mask0, key);
        if (r.compute != MP_FWD_COMPUTE_F32) { /* f32 keys unchanged: older checkpoints still resume */
            const int64_t cm = r.compute;
            key = mp_fnv1a64(&cm, sizeof cm, key);
        }
        if (acc.skip) { /* the block sums start at position 1: not those of an older maskpos */
            const int64_t sk = acc.skip;
            key = mp_fnv1a64(&sk, sizeof sk, key);
        }
    }
    char ckpt[4096];
    if (mp_path_join(ckpt, sizeof ckpt, r.out, "checkpoint.bin", &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (r.resume && rank == 0) {
        int missing;
        if (mp_probe_ckpt_load(ckpt, &acc, key, &missing, &e) != MP_OK) {
            if (!missing) {
                rc = mp_cli_error(cmd, "--resume: %s", e.msg);
                goto done;
            }
            printf("resume: no checkpoint in %s, starting from the first sequence\n", r.out);
        } else {
            printf("resume: %lld of %lld sequences already done (%s)\n", (long long)acc.n_done, (long long)tk.n, ckpt);
            if (acc.n_done > tk.n) {
                rc = mp_cli_error(cmd, "--resume: checkpoint counts %lld sequences, more than %lld", (long long)acc.n_done, (long long)tk.n);
                goto done;
            }
        }
    }

    if (!agreed) { /* every rank set up; rank 0's checkpoint decides where all start */
        agreed = 1;
        if (!mp_mpi_agree(1)) {
            rc = rank == 0 ? mp_cli_error(cmd, "another MPI rank could not set up (its message is above)") : MP_EXIT_ERROR;
            goto done;
        }
        mp_mpi_bcast(&acc.n_done, sizeof acc.n_done, 0);
        if (rank == 0) {
            snprintf(probe_term_msg, sizeof probe_term_msg,
                     "maskpos probe: error: stopped by mpirun (another rank ended, see its message, or the job was interrupted); %s\n",
                     r.ckpt_every > 0 ? "the sums of the last checkpoint are in the --out folder: run again with --resume"
                                      : "no checkpoint was kept (--checkpoint-every K makes a run resumable)");
            signal(SIGTERM, probe_on_term);
        }
    }
    ProbeStep ps = {.r = &r, .ckpt = ckpt, .key = key, .n = tk.n, .first = acc.n_done, .kill_after = -1, .seq = tk.seq};
    {
        const char *ka = getenv("MASKPOS_TEST_KILL_AFTER"), *kr = getenv("MASKPOS_TEST_KILL_RANK");
        if (ka && *ka) ps.kill_after = atoll(ka);
        if (kr && *kr) ps.kill_rank = atoi(kr);
    }
    MpProgress pg;
    mp_progress_init(&pg, "probe", "tok", (tk.n - acc.n_done) * tk.seq);
    if (r.quiet) pg.enabled = pg.forced = 0;
    ps.pg = &pg;
    const double t0 = mp_time_now();
    const int64_t first = acc.n_done;
    MpProbeRanksStats rs;
    if (mp_probe_run_ranks(&acc, &f, tk.ids, tk.n, tk.seq, probe_step, &ps, &rs, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    if (rank > 0) goto done; /* rank 0 reports and writes */
    mp_progress_finish(&pg);
    const double compute_s = mp_time_now() - t0;
    {
        const double toks = (double)(tk.n - first) * tk.seq;
        const double gf = mp_fwd_flops(&f, tk.seq) * (double)(tk.n - first) / 1e9;
        printf("ran %lld sequence%s (%.0f tokens) in %.2f s: %.1f tokens/s, %.2f GFLOP/s\n", (long long)(tk.n - first),
               tk.n - first == 1 ? "" : "s", toks, compute_s, compute_s > 0 ? toks / compute_s : 0.0,
               compute_s > 0 ? gf / compute_s : 0.0);
        if (nranks > 1)
            printf("MPI: %d ranks; rank 0 received %lld sequences (%.1f MiB) in %.3f s and merged them in %.3f s\n",
                   nranks, (long long)rs.received, rs.bytes / 1048576.0, rs.wait_s, rs.merge_s);
    }
    if (probe_write_outputs(&r, &m, &tk, &acc, layers, model_hash, mp_time_now() - t_start, compute_s, argc, argv, &e) != MP_OK) {
        rc = mp_cli_error(cmd, "%s", e.msg);
        goto done;
    }
    remove(ckpt); /* the result is complete */
    printf("wrote %s/{scores,scores_diagnorm%s%s%s}.npy, meta.json%s%s (peak RSS %.1f MiB)\n", r.out,
           r.per_head ? ",scores_heads" : "", r.probs ? ",probs" : "", r.probs && r.per_head ? ",probs_heads" : "",
           r.plot ? ", scores_diagnorm.png" : "", r.plot && r.probs ? ", probs.png, sink_entropy.png" : "",
           mp_peak_rss_bytes() / 1048576.0);
done:
    if (!agreed) mp_mpi_agree(0); /* a rank that failed before the loop lets the others stop */
    if (nranks > 1 && rank == 0) signal(SIGTERM, SIG_DFL);
    mp_fwd_free(&f);
    mp_probe_acc_free(&acc);
    mp_probe_tokens_free(&tk);
    mp_model_free(&m);
    return rc;
}
