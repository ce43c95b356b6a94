/* probe_opts.c — the probe's option table and the functions that read it; see probe_opts.h.
 *
 * ================================================================ layout
 *   table      one row per option (help texts as `maskpos probe --help` prints them)
 *   values     one value into its field (core/opts.c), with the command line's messages
 *   checks     across options
 *   settings   a config back into "name=value" settings
 */
#include "job/probe_opts.h"

#include <stdio.h>
#include <string.h>

#include "job/shared_opts.h" /* the corpus flags, --threads, --compute, --device: declared once */
#include "model/probe.h"     /* mp_probe_stats: --stats, its names in --help */
#include "model/probe_pos.h" /* the position probe's defaults */

/* ================================================================ table */

/* --stats's help: the optional statistics of the table (model/probe.h, mp_probe_stats), one a line. */
static void probe_stats_help(char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "also these statistics, by name, comma-separated (--probs and --recency are\n"
                                          "two of them; the same bits as their switches):");
    for (int id = 1; id < MP_PROBE_NSTATS && k < cap; id++) /* the maps are always on */
        k += (size_t)snprintf(buf + k, cap - k, "\n%s: %s", mp_probe_stats[id].name, mp_probe_stats[id].help);
}

#define F(m) offsetof(MpProbeConfig, m)
#define S(id) (&mp_shared_opts[MP_SHARED_##id]) /* a declaration several commands share */

const MpOpt mp_probe_opts[MP_PROBE_OPT_COUNT] = {
    [MP_PROBE_OPT_MODEL] = {MP_OPT_DECL("model", MP_OPT_STRING, "MODEL", .help = "an HF directory or a .gguf file"), F(model_path),
             MP_OPT_POSITIONAL},
    [MP_PROBE_OPT_TOKENS] = {MP_OPT_DECL("tokens", MP_OPT_STRING, "FILE",
             .help = "token ids: .npy int32/int64/uint32 [N, S'] (rows cut to --seq), or a raw\n"
             "little-endian uint32 stream cut into consecutive sequences of --seq"), F(tokens_path)},
    [MP_PROBE_OPT_SEQ] = {S(SEQ), F(seq)},
    [MP_PROBE_OPT_N] = {S(N), F(n)},
    [MP_PROBE_OPT_DATA] = {S(DATA), F(data)},
    [MP_PROBE_OPT_TOKENIZER] = {S(TOKENIZER), F(tokenizer)},
    [MP_PROBE_OPT_FIELD] = {S(FIELD), F(field)},
    [MP_PROBE_OPT_WHOLE] = {S(WHOLE), F(whole)},
    [MP_PROBE_OPT_SHUFFLE] = {S(SHUFFLE), F(shuffle)},
    [MP_PROBE_OPT_SEED] = {S(SEED), F(seed)},
    [MP_PROBE_OPT_NO_SPECIAL] = {S(NO_SPECIAL), F(no_special)},
    [MP_PROBE_OPT_PACK] = {S(PACK), F(pack)},
    [MP_PROBE_OPT_LAYERS] = {MP_OPT_DECL("layers", MP_OPT_STRING, "SPEC",
             .help = "1-based layers, e.g. 1-4, 2,5, all (default 1-4, the paper's Figure 5,\n"
             "or all when fewer; the set-up line says when layers are left out)"), F(layers)},
    [MP_PROBE_OPT_PER_HEAD] = {MP_OPT_DECL("per-head", MP_OPT_BOOL, NULL,
             .help = "also write scores_heads.npy [L,H,S,S] and its standard errors\n"
             "scores_heads_se.npy, float32 (and probs_heads.npy with --probs)"), F(per_head)},
    [MP_PROBE_OPT_HEADS_F64] = {MP_OPT_DECL("heads-f64", MP_OPT_BOOL, NULL,
             .help = "--per-head: write those two as float64 (summed in double either way)"), F(heads_f64)},
    [MP_PROBE_OPT_PROBS] = {MP_OPT_DECL("probs", MP_OPT_BOOL, NULL,
             .help = "also average the post-softmax attention: probs.npy [L,S,S] (rows sum to\n"
             "1), per head the mass on the first token and the mean entropy (meta.json\n"
             "attention_sink, attention_entropy); with --plot probs.png and\n"
             "sink_entropy.png. Memory: O(L S^2) sums, one sequence's scores at a time"), F(probs)},
    [MP_PROBE_OPT_RECENCY] = {MP_OPT_DECL("recency", MP_OPT_BOOL, NULL,
             .help = "also the recency probability per layer and head (triples j<k<i with\n"
             "score(i,k) > score(i,j), per sequence and of the mean maps) and, from the\n"
             "same run, NRI, block z and RP of the first S' = 16, 32, ... positions (a\n"
             "causal model scores them as the S'-token prefix) and the residue by query\n"
             "position (meta.json; --plot: length_*.png; docs/recency.md)"), F(recency)},
    [MP_PROBE_OPT_STATS] = {MP_OPT_DECL("stats", MP_OPT_STRING, "LIST", .help_fn = probe_stats_help), F(stats)},
    [MP_PROBE_OPT_POS_DIM] = {MP_OPT_DECL("pos-dim", MP_OPT_INT, "K",
             .help = "--stats position: the probe's features, the residual stream hashed to K\n"
             "(each dimension added with a fixed sign to one of K; default 256; 0: the\n"
             "whole width, K^2 sums per layer: 128 MiB at width 4096; docs/metrics.md)", .lo = 0, .hi = 46340), F(pos_dim)},
    [MP_PROBE_OPT_POS_STRIDE] = {MP_OPT_DECL("pos-stride", MP_OPT_INT, "K",
             .help = "--stats position: every K-th position of each sequence (from an offset\n"
             "hashed from its index; default 1: every position)", .lo = 1, .hi = 1 << 20), F(pos_stride)},
    [MP_PROBE_OPT_POS_RIDGE] = {MP_OPT_DECL("pos-ridge", MP_OPT_DOUBLE, "A",
             .help = "--stats position: the ridge, lambda = A * the centred features' mean\n"
             "variance * the positions fitted (default 1e-3)", .dlo = 1e-12, .dhi = 1e6), F(pos_ridge)},
    [MP_PROBE_OPT_RESID_STRIDE] = {MP_OPT_DECL("resid-stride", MP_OPT_INT, "K",
             .help = "--stats variance (its residual-stream part) and position read the residual\n"
             "stream after the layer of one sequence in K (those of index s, s % K == 0;\n"
             "the deepest probed layer runs its o_proj and MLP for those only); default\n"
             "0: 1 below 256 sequences, else 8 (docs/metrics.md)", .lo = 0, .hi = 1 << 20), F(resid_stride)},
    [MP_PROBE_OPT_BIDIRECTIONAL] = {MP_OPT_DECL("bidirectional", MP_OPT_BOOL, NULL,
             .help = "counterfactual: no causal mask in any layer"), F(bidirectional)},
    [MP_PROBE_OPT_NO_ROPE] = {MP_OPT_DECL("no-rope", MP_OPT_BOOL, NULL,
             .help = "counterfactual: queries and keys not rotated"), F(no_rope)},
    [MP_PROBE_OPT_ROPE_KEEP_HIGH] = {MP_OPT_DECL("rope-keep-high", MP_OPT_DOUBLE, "P",
             .help = "counterfactual p-RoPE (Barbero et al. 2025): only the highest-frequency\n"
             "floor(P * R/2) of the R/2 frequency pairs rotate, the lowest-frequency rest\n"
             "does not (1, the default: every pair; 0: none, as --no-rope)", .dlo = 0, .dhi = 1), F(rope_keep_high)},
    [MP_PROBE_OPT_THREADS] = {S(THREADS), F(threads), MP_OPT_RUN,
             .help = "worker threads (default: all cores); results are bit-identical for any T", .arg = "T"},
    [MP_PROBE_OPT_COMPUTE] = {S(COMPUTE), F(compute),
             .help = "f32 (default, the reference) or bf16: Linear weights kept in bf16 (bf16\n"
                     "checkpoints as stored, others rounded once; half the memory) and Linear\n"
                     "inputs rounded to bf16, f32 accumulation, attention in f32 (docs/speed.md;\n"
                     "maps within 2e-2 of max |score| of f32 on random-weight test models)"},
    [MP_PROBE_OPT_DEVICE] = {S(DEVICE), F(device)},
    [MP_PROBE_OPT_CHECKPOINT_EVERY] = {MP_OPT_DECL("checkpoint-every", MP_OPT_I64, "K",
             .help = "save partial sums to DIR/checkpoint.bin every K sequences (atomically)", .lo = 1, .hi = INT64_C(1) << 40),
             F(checkpoint_every), MP_OPT_CLI | MP_OPT_RUN},
    [MP_PROBE_OPT_RESUME] = {MP_OPT_DECL("resume", MP_OPT_BOOL, NULL,
             .help = "continue from DIR/checkpoint.bin (same model, tokens and flags)"), F(resume), MP_OPT_CLI | MP_OPT_RUN},
    [MP_PROBE_OPT_ALLOW_LONG] = {MP_OPT_DECL("allow-long", MP_OPT_BOOL, NULL,
             .help = "run S past the model's trained context (max_position_embeddings, or a\n"
             "model that does not state it): refused without it; warned and recorded\n"
             "in meta.json (beyond_trained_context) with it"), F(allow_long)},
    [MP_PROBE_OPT_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL,
             .help = "replace the outputs of an earlier run in --out (else such a folder is\n"
             "refused: a folder holds one run's outputs)"), MP_OPT_NO_FIELD, MP_OPT_CLI | MP_OPT_RUN},
    [MP_PROBE_OPT_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "DIR",
             .help = "outputs: scores.npy float64 [L,S,S] (mean over sequences and heads; NaN\n"
             "where masked), scores_diagnorm.npy, scores_se.npy, scores_heads*.npy,\n"
             "meta.json (its \"files\" lists every file written, as the last line does)"), F(out), MP_OPT_CLI | MP_OPT_RUN},
    [MP_PROBE_OPT_PLOT] = {MP_OPT_DECL("plot", MP_OPT_BOOL, NULL,
             .help = "also draw DIR/scores_diagnorm.png (every selected layer, diagonal-\n"
             "normalised, vlag centred on 0, limits +-max(|1st|, |99th| percentile),\n"
             "printed and in meta.json's files)"), MP_OPT_NO_FIELD, MP_OPT_CLI},
    [MP_PROBE_OPT_MAX_MEM_GIB] = {MP_OPT_DECL("max-mem-gib", MP_OPT_DOUBLE, "G",
             .help = "refuse to start when the expected peak exceeds G GiB (default: the\n"
             "memory available now)", .dlo = 1e-6, .dhi = 1e6), F(max_mem_gib), MP_OPT_RUN},
    [MP_PROBE_OPT_QUIET] = {MP_OPT_DECL("quiet", MP_OPT_BOOL, NULL,
             .help = "print nothing but warnings (on stderr): no set-up lines, progress bar\n"
             "or tables (meta.json holds every statistic)"), MP_OPT_NO_FIELD, MP_OPT_CLI | MP_OPT_RUN},
    [MP_PROBE_OPT_HELP] = {MP_OPT_DECL("help", MP_OPT_BOOL, NULL, .help = "this text"), MP_OPT_NO_FIELD,
             MP_OPT_CLI | MP_OPT_RUN | MP_OPT_HELP | MP_OPT_HIDE},
};

/* Every id has its row (a row left out has no name). */
_Static_assert(sizeof mp_probe_opts / sizeof *mp_probe_opts == MP_PROBE_OPT_COUNT, "one row per MpProbeOptId");

int mp_probe_opt_find(const char *name) { return mp_opts_find(mp_probe_opts, MP_PROBE_OPT_COUNT, name); }

/* ================================================================ values */

int mp_probe_opt_set(MpProbeConfig *c, int id, const char *v, MpErr *e) {
    MP_ASSERT(id >= 0 && id < MP_PROBE_OPT_COUNT);
    const MpOpt *o = &mp_probe_opts[id];
    if (o->field == MP_OPT_NO_FIELD) return mp_err_set(e, "--%s is not a setting of the probe", mp_opt_name(o));
    return mp_opt_set(o, c, v, e);
}

int mp_probe_opt_parse(MpProbeConfig *c, const char *s, MpErr *e) {
    const char *eq = strchr(s, '=');
    char name[64];
    const size_t len = eq ? (size_t)(eq - s) : strlen(s);
    if (len >= sizeof name) return mp_err_set(e, "unknown probe setting '%.60s...'", s);
    memcpy(name, s, len);
    name[len] = 0;
    const int id = mp_probe_opt_find(name);
    if (id < 0) return mp_err_set(e, "unknown option or missing value: '--%s' (see 'maskpos probe --help')", name);
    return mp_probe_opt_set(c, id, eq ? eq + 1 : NULL, e);
}

/* ================================================================ checks */

int mp_probe_opts_check(const MpProbeConfig *c, MpErr *e) {
    if (!c->ids && !c->tokens_path && !c->data) return mp_err_set(e, "--tokens FILE or --data TEXT is required");
    if (c->tokens_path && c->data) return mp_err_set(e, "--tokens and --data exclude each other");
    if (c->ids && (c->tokens_path || c->data)) return mp_err_set(e, "probe: token ids given twice (an array and a file)");
    if (c->data && (!c->n || !c->seq)) return mp_err_set(e, "--data needs --n N and --seq S");
    if (!c->data && (c->tokenizer || c->field || c->whole || c->shuffle || c->no_special || c->pack))
        return mp_err_set(e, "--tokenizer, --field, --whole, --shuffle, --no-special and --pack go with --data");
    if (c->heads_f64 && !c->per_head) return mp_err_set(e, "--heads-f64 goes with --per-head");
    if (c->no_rope && c->rope_keep_high < 1) return mp_err_set(e, "--rope-keep-high and --no-rope exclude each other");
    unsigned set = 0;
    MpErr ignored; /* a bad name: the run's own message, later */
    if ((c->pos_dim != MP_PROBE_POS_DIM_DEFAULT || c->pos_stride != MP_PROBE_POS_STRIDE_DEFAULT ||
         c->pos_ridge != MP_PROBE_POS_RIDGE_DEFAULT) &&
        mp_probe_stats_parse(c->stats, &set, &ignored) == MP_OK && !(set & MP_PROBE_STAT_BIT(MP_PROBE_STAT_POSITION)))
        return mp_err_set(e, "--pos-dim, --pos-stride and --pos-ridge go with --stats position");
    return MP_OK;
}

/* ================================================================ settings */

size_t mp_probe_opts_write(char *buf, size_t cap, const MpProbeConfig *c, int skip_flags, char sep) {
    MpProbeConfig d;
    mp_probe_config_init(&d);
    return mp_opts_write(buf, cap, mp_probe_opts, MP_PROBE_OPT_COUNT, c, &d, skip_flags, sep);
}
