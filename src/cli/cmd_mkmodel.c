/* cmd_mkmodel.c — `maskpos mkmodel`: write a random-weight test model in HF or GGUF format.
 *
 *   maskpos mkmodel --arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 \
 *       --vocab 512 --seed 1 --format hf OUTDIR
 *   maskpos mkmodel --arch qwen3 ... --format gguf --dtype q8_0 OUT.gguf
 * The same seed gives the same f32 weights in both formats (src/load/mkmodel.h).
 * Tested by: tests/test_load.c, tests/test_load_gguf.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"       /* mp_cli_* */
#include "core/files.h"    /* mp_outdir_claim, mp_outfile_claim */
#include "load/arch.h"     /* mp_model_arch_name: the success line */
#include "job/shared_opts.h" /* --seed: declared once */
#include "load/mkmodel.h"  /* MpMkSpec, mp_mk_write */

/* The flags' values: the model's spec and the command's own. */
typedef struct MkFlags {
    MpMkSpec s;
    int force;
} MkFlags;

typedef enum MkOpt {
    MK_ARCH, MK_LAYERS, MK_DIM, MK_HEADS, MK_KV_HEADS, MK_HEAD_DIM, MK_FFN, MK_VOCAB, MK_SEED, MK_FORMAT, MK_DTYPE, MK_SHARDS,
    MK_ROPE_SCALING, MK_ROPE_THETA, MK_PARTIAL_ROTARY, MK_NO_PARALLEL_RESIDUAL, MK_ATTN_SOFTCAP, MK_FINAL_SOFTCAP,
    MK_SLIDING_WINDOW, MK_EXPERTS, MK_EXPERTS_USED, MK_MOE_FFN, MK_SHARED_FFN, MK_NO_NORM_TOPK, MK_TIE, MK_NORM_EPS, MK_MAX_POS,
    MK_FORCE, MK_COUNT
} MkOpt;

/* --arch: a name of the family table (src/load/arch.c). */
static int mk_set_arch(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    const int a = mp_family_from_name(v);
    if (a < 0) {
        char list[512];
        mp_family_list(MP_FAMILY_NAMES, ", ", list, sizeof list);
        return mp_err_set(e, "--arch: '%s' is not one of %s", v, list);
    }
    ((MkFlags *)cfg)->s.arch = (MpArch)a;
    return MP_OK;
}

/* --arch's help: the family table's names. */
static void mk_help_arch(char *buf, size_t cap) {
    mp_family_list(MP_FAMILY_NAMES, " | ", buf, cap);
    const size_t n = strlen(buf);
    snprintf(buf + n, cap - n, "\n(default llama)");
}

/* --dtype: a type the writer can encode. */
static int mk_set_dtype(void *cfg, const MpOpt *o, const char *v, MpErr *e) {
    (void)o;
    MpWType t;
    if (mp_quant_parse(v, &t) != MP_OK || !mp_quant_can_encode(t))
        return mp_err_set(e, "--dtype: '%s' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k", v);
    ((MkFlags *)cfg)->s.dtype = t;
    return MP_OK;
}

static const MpOptChoice mk_formats[] = {{"hf", MP_FORMAT_HF}, {"gguf", MP_FORMAT_GGUF}, {NULL, 0}};
static const MpOptChoice mk_scalings[] = {{"none", MP_ROPE_NONE}, {"llama3", MP_ROPE_LLAMA3}, {"longrope", MP_ROPE_LONGROPE}, {NULL, 0}};
_Static_assert(sizeof(MpFormat) == sizeof(int) && sizeof(MpRopeScaling) == sizeof(int), "choices set an int");

#define F(m) offsetof(MkFlags, m)
#define I(nm, meta, hlp, l, h) MP_OPT_DECL(nm, MP_OPT_INT, meta, .help = hlp, .lo = l, .hi = h)
#define D(nm, meta, hlp, l, h) MP_OPT_DECL(nm, MP_OPT_DOUBLE, meta, .help = hlp, .dlo = l, .dhi = h)
static const MpOpt mkmodel_opts[MK_COUNT] = {
    [MK_ARCH] = {MP_OPT_DECL("arch", MP_OPT_CUSTOM, "A", .set = mk_set_arch, .help_fn = mk_help_arch), F(s.arch)},
    [MK_LAYERS] = {I("layers", "L", "decoder layers (default 2)", 1, 4096), F(s.layers)},
    [MK_DIM] = {I("dim", "C", "hidden size (default 64)", 1, 1 << 24), F(s.dim)},
    [MK_HEADS] = {I("heads", "H", "query heads (default 4)", 1, 4096), F(s.heads)},
    [MK_KV_HEADS] = {I("kv-heads", "K", "key/value heads, divides H (default 2)", 1, 4096), F(s.kv_heads)},
    [MK_HEAD_DIM] = {I("head-dim", "D", "head dim (default C/H; llama.cpp's phi3 needs H x D = C)", 2, 1 << 16), F(s.head_dim)},
    [MK_FFN] = {I("ffn", "F", "MLP intermediate size (default 128)", 1, 1 << 24), F(s.ffn)},
    [MK_VOCAB] = {I("vocab", "V", "vocabulary size (default 512; GGUF needs >= 258)", 1, 1 << 27), F(s.vocab)},
    [MK_SEED] = {&mp_shared_opts[MP_SHARED_SEED], F(s.seed), .arg = "S", .help = "RNG seed (default 1)"},
    [MK_FORMAT] = {MP_OPT_DECL("format", MP_OPT_CHOICE, "F", .help = "hf | gguf (default hf)", .choices = mk_formats), F(s.format)},
    [MK_DTYPE] = {MP_OPT_DECL("dtype", MP_OPT_CUSTOM, "T",
                              .help = "f32 | f16 | bf16 (both formats); q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | q2_k |\n"
                                      "q3_k | q4_k | q5_k | q6_k (GGUF; simple grids, not llama.cpp's optimal\n"
                                      "quantisers; rows that are not whole blocks fall back to q8_0 then f16;\n"
                                      "1-D tensors stay f32)",
                              .set = mk_set_dtype), F(s.dtype)},
    [MK_SHARDS] = {I("shards", "N", "HF: split into N safetensors files + index (default 1)", 1, 99999), F(s.shards)},
    [MK_ROPE_SCALING] = {MP_OPT_DECL("rope-scaling", MP_OPT_CHOICE, "S", .help = "none | llama3 (llama, mistral) | longrope (phi3)",
                                     .choices = mk_scalings), F(s.rope_scaling)},
    [MK_ROPE_THETA] = {D("rope-theta", "X", "RoPE base (default 10000; 500000 with llama3)", 1.0001, 1e12), F(s.rope_theta)},
    [MK_PARTIAL_ROTARY] = {D("partial-rotary", "X",
                             "phi3 partial_rotary_factor, gptneox rotary_pct, in (0, 1] (default 1;\n"
                             "gptneox 0.25 as Pythia)", 1e-6, 1), F(s.partial_rotary)},
    [MK_NO_PARALLEL_RESIDUAL] = {MP_OPT_DECL("no-parallel-residual", MP_OPT_BOOL, NULL,
                                             .help = "gptneox: attention then MLP in sequence (default parallel, as Pythia)"),
                                 F(s.parallel_residual), MP_OPT_OFF},
    [MK_ATTN_SOFTCAP] = {D("attn-softcap", "X", "gemma2 attn_logit_softcapping (default 50; 0 = none)", 0, 1e6), F(s.attn_softcap)},
    [MK_FINAL_SOFTCAP] = {D("final-softcap", "X", "gemma2 final_logit_softcapping (default 30; 0 = none)", 0, 1e6),
                          F(s.final_softcap)},
    [MK_SLIDING_WINDOW] = {I("sliding-window", "N",
                             "gemma2/3 sliding_window of their local layers (default 4096);\n"
                             "mistral, phi3: of every layer; qwen2/3: use_sliding_window with\n"
                             "max_window_layers = layers / 2 (HF only: llama.cpp windows none of these;\n"
                             "default none)\n"
                             "(gemma3: local layers 5 of 6 with RoPE base 10000, global ones --rope-theta)",
                             1, INT32_MAX), F(s.sliding_window)},
    [MK_EXPERTS] = {I("experts", "N", "mixtral, qwen3moe, qwen2moe: experts per layer (default 4)", 1, 4096), F(s.experts)},
    [MK_EXPERTS_USED] = {I("experts-used", "K", "experts each token is routed to, 1..N (default 2)", 1, 4096), F(s.experts_used)},
    [MK_MOE_FFN] = {I("moe-ffn", "F",
                      "qwen3moe, qwen2moe moe_intermediate_size, one expert's width (default --ffn;\n"
                      "mixtral's experts are --ffn wide)", 1, 1 << 24), F(s.moe_ffn)},
    [MK_SHARED_FFN] = {I("shared-ffn", "F", "qwen2moe shared_expert_intermediate_size (default --ffn)", 1, 1 << 24), F(s.shared_ffn)},
    [MK_NO_NORM_TOPK] = {MP_OPT_DECL("no-norm-topk", MP_OPT_BOOL, NULL,
                                     .help = "qwen3moe, --format hf: norm_topk_prob false (weights not renormalised)"),
                         F(s.no_norm_topk)},
    [MK_TIE] = {MP_OPT_DECL("tie", MP_OPT_BOOL, NULL, .help = "tie_word_embeddings (no lm_head / output tensor)"), F(s.tie)},
    [MK_NORM_EPS] = {D("norm-eps", "X", "rms_norm_eps (default 1e-5)", 0, 1), F(s.norm_eps)},
    [MK_MAX_POS] = {I("max-pos", "N", "max_position_embeddings (default 4096; 131072 with rope scaling)", 1, INT32_MAX), F(s.max_pos)},
    [MK_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL, .help = "replace an existing model at OUT (else it is refused)"), F(force)},
};
_Static_assert(sizeof mkmodel_opts / sizeof *mkmodel_opts == MK_COUNT, "one row per MkOpt");

static const MpOptTable mkmodel_table = {"mkmodel", mkmodel_opts, MK_COUNT, 20,
    "usage: maskpos mkmodel [options] OUT\n"
    "\n"
    "Writes a model with random weights (Philox RNG keyed by seed, role, layer, row) in a real\n"
    "checkpoint format: an HF directory (config.json + safetensors, optionally sharded with\n"
    "model.safetensors.index.json) or a GGUF v3 file loadable by llama.cpp (byte-level BPE\n"
    "vocabulary, llama Q/K rows permuted as convert_hf_to_gguf does).\n"
    "\n",
    "\n"
    "Models over 64 GB of weights, or over the free space where OUT goes, are refused before\n"
    "anything is written.\n"};

int mp_cmd_mkmodel(int argc, char **argv) {
    const char *cmd = "mkmodel";
    MkFlags fl = {.force = 0};
    mp_mk_spec_default(&fl.s);
    int given[MK_COUNT], first;
    const int prc = mp_cli_parse(&mkmodel_table, &fl, argc, argv, &first, given);
    if (prc != MP_CLI_GO) return prc;
    MpMkSpec s = fl.s;
    const int force = fl.force, kv_given = given[MK_KV_HEADS] > 0, prf_given = given[MK_PARTIAL_ROTARY] > 0,
              moe_given = given[MK_EXPERTS] + given[MK_EXPERTS_USED] > 0;
    if (first != argc - 1) return mp_cli_error(cmd, first < argc ? "exactly one OUT path expected" : "missing OUT path (see 'maskpos mkmodel --help')");
    mp_mk_spec_family(&s, kv_given, prf_given); /* the family's own defaults (gptneox's heads and rotary, Gemma's tie) */
    MpErr e;
    if (moe_given && mp_mk_option_refused(MP_MK_EXPERTS, s.arch, &e)) return mp_cli_error(cmd, "%s", e.msg);
    const char *out = argv[first];
    /* an existing model is not overwritten without --force (an HF folder holds one model: with
     * --force the earlier one's files, extra shards included, are removed first) */
    if (mp_mk_size_check(&s, out, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    if ((s.format == MP_FORMAT_HF ? mp_outdir_claim(out, "mkmodel", force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e)
                                  : mp_outfile_claim(out, force, &e)) != MP_OK)
        return mp_cli_error(cmd, "%s", e.msg);
    if (mp_mk_write(&s, out, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    /* one line on success (it printed nothing before issue 30) */
    printf("wrote %s: %s %s, %d layers, dim %d, %d heads (%d key/value), vocab %d, seed %llu\n", out,
           s.format == MP_FORMAT_GGUF ? "GGUF" : "HF folder", mp_model_arch_name(s.arch), s.layers, s.dim, s.heads,
           s.kv_heads, s.vocab, (unsigned long long)s.seed);
    return MP_EXIT_OK;
}
