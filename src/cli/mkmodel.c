/* mkmodel.c — `maskpos mkmodel`: write a random-weight test model in HF or GGUF format.
 *
 *   maskpos mkmodel --arch llama --layers 2 --dim 64 --heads 4 --kv-heads 2 --ffn 128 \
 *       --vocab 512 --seed 1 --format hf OUTDIR
 *   maskpos mkmodel --arch qwen3 ... --format gguf --dtype q8_0 OUT.gguf
 * The same seed gives the same f32 weights in both formats (src/load/mkmodel.h).
 * Tested by: tests/test_load.c, tests/test_load_gguf.c.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"       /* mp_cli_* */
#include "core/files.h"    /* mp_outdir_claim, mp_outfile_claim */
#include "load/arch.h"     /* mp_model_arch_name: the success line */
#include "load/mkmodel.h"  /* MpMkSpec, mp_mk_write */

static const char *mkmodel_help =
    "usage: maskpos mkmodel [options] OUT\n"
    "\n"
    "Writes a model with random weights (Philox RNG keyed by seed, role, layer, row) in a real\n"
    "checkpoint format: an HF directory (config.json + safetensors, optionally sharded with\n"
    "model.safetensors.index.json) or a GGUF v3 file loadable by llama.cpp (byte-level BPE\n"
    "vocabulary, llama Q/K rows permuted as convert_hf_to_gguf does).\n"
    "\n"
    "  --arch A          %s\n" /* the family table's names (src/load/arch.c), wrapped */
    "                    (default llama)\n"
    "  --layers L        decoder layers (default 2)\n"
    "  --dim C           hidden size (default 64)\n"
    "  --heads H         query heads (default 4)\n"
    "  --kv-heads K      key/value heads, divides H (default 2)\n"
    "  --head-dim D      head dim (default C/H; llama.cpp's phi3 needs H x D = C)\n"

    "  --ffn F           MLP intermediate size (default 128)\n"
    "  --vocab V         vocabulary size (default 512; GGUF needs >= 258)\n"
    "  --seed S          RNG seed (default 1)\n"
    "  --format F        hf | gguf (default hf)\n"
    "  --dtype T         f32 | f16 | bf16 (both formats); q8_0 | q4_0 | q4_1 | q5_0 | q5_1 | q2_k |\n"
    "                    q3_k | q4_k | q5_k | q6_k (GGUF; simple grids, not llama.cpp's optimal\n"
    "                    quantisers; rows that are not whole blocks fall back to q8_0 then f16;\n"
    "                    1-D tensors stay f32)\n"
    "  --shards N        HF: split into N safetensors files + index (default 1)\n"
    "  --rope-scaling S  none | llama3 (llama, mistral) | longrope (phi3)\n"
    "  --rope-theta X    RoPE base (default 10000; 500000 with llama3)\n"
    "  --partial-rotary X  phi3 partial_rotary_factor, gptneox rotary_pct, in (0, 1] (default 1;\n"
    "                    gptneox 0.25 as Pythia)\n"
    "  --no-parallel-residual  gptneox: attention then MLP in sequence (default parallel, as Pythia)\n"
    "  --attn-softcap X  gemma2 attn_logit_softcapping (default 50; 0 = none)\n"
    "  --final-softcap X gemma2 final_logit_softcapping (default 30; 0 = none)\n"
    "  --sliding-window N  gemma2/3 sliding_window of their local layers (default 4096);\n"
    "                    mistral, phi3: of every layer; qwen2/3: use_sliding_window with\n"
    "                    max_window_layers = layers / 2 (HF only: llama.cpp windows none of these;\n"
    "                    default none)\n"
    "                    (gemma3: local layers 5 of 6 with RoPE base 10000, global ones --rope-theta)\n"
    "  --experts N       mixtral, qwen3moe, qwen2moe: experts per layer (default 4)\n"
    "  --experts-used K  experts each token is routed to, 1..N (default 2)\n"
    "  --moe-ffn F       qwen3moe, qwen2moe moe_intermediate_size, one expert's width (default --ffn;\n"
    "                    mixtral's experts are --ffn wide)\n"
    "  --shared-ffn F    qwen2moe shared_expert_intermediate_size (default --ffn)\n"
    "  --no-norm-topk    qwen3moe, --format hf: norm_topk_prob false (weights not renormalised)\n"
    "  --tie             tie_word_embeddings (no lm_head / output tensor)\n"
    "  --norm-eps X      rms_norm_eps (default 1e-5)\n"
    "  --max-pos N       max_position_embeddings (default 4096; 131072 with rope scaling)\n"
    "  --force           replace an existing model at OUT (else it is refused)\n"
    "\n"
    "Models over 64 GB of weights, or over the free space where OUT goes, are refused before\n"
    "anything is written.\n";

/* The help, with the --arch names of the family table (src/load/arch.c) as "a | b | ...", lines
 * wrapped before column 98 and continued under column 20. */
static void mkmodel_print_help(void) {
    char wrapped[640];
    size_t k = 0, col = 20;
    for (int a = 0; a < MP_ARCH_COUNT; a++) {
        const char *name = mp_model_arch_name((MpArch)a);
        const size_t n = strlen(name) + (a ? 3 : 0);
        if (a && col + n + 2 > 98) { /* " |" ends the line, the name starts the next */
            k += (size_t)snprintf(wrapped + k, sizeof wrapped - k, " |\n%20s%s", "", name);
            col = 20 + strlen(name);
        } else {
            k += (size_t)snprintf(wrapped + k, sizeof wrapped - k, "%s%s", a ? " | " : "", name);
            col += n;
        }
        if (k >= sizeof wrapped) break;
    }
    printf(mkmodel_help, wrapped);
}

int mp_cmd_mkmodel(int argc, char **argv) {
    const char *cmd = "mkmodel";
    MpMkSpec s;
    mp_mk_spec_default(&s);
    static const struct option opts[] = {{"arch", required_argument, 0, 'a'},       {"layers", required_argument, 0, 'L'},
                                         {"dim", required_argument, 0, 'd'},        {"heads", required_argument, 0, 'H'},
                                         {"kv-heads", required_argument, 0, 'K'},   {"head-dim", required_argument, 0, 'D'},
                                         {"ffn", required_argument, 0, 'f'},        {"vocab", required_argument, 0, 'V'},
                                         {"seed", required_argument, 0, 's'},       {"format", required_argument, 0, 'F'},
                                         {"dtype", required_argument, 0, 't'},      {"shards", required_argument, 0, 'n'},
                                         {"rope-scaling", required_argument, 0, 'r'}, {"rope-theta", required_argument, 0, 'T'},
                                         {"partial-rotary", required_argument, 0, 'p'}, {"tie", no_argument, 0, 'y'},
                                         {"norm-eps", required_argument, 0, 'e'},   {"max-pos", required_argument, 0, 'm'},
                                         {"force", no_argument, 0, 'z'},            {"no-parallel-residual", no_argument, 0, 'P'},
                                         {"attn-softcap", required_argument, 0, 'A'}, {"final-softcap", required_argument, 0, 'B'},
                                         {"sliding-window", required_argument, 0, 'W'},
                                         {"experts", required_argument, 0, 'X'},    {"experts-used", required_argument, 0, 'U'},
                                         {"moe-ffn", required_argument, 0, 'M'},    {"no-norm-topk", no_argument, 0, 'N'},
                                         {"shared-ffn", required_argument, 0, 'S'},
                                         {"help", no_argument, 0, 'h'},             {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c, force = 0, kv_given = 0, prf_given = 0, moe_given = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': {
            const int a = mp_family_from_name(optarg);
            if (a < 0) {
                char list[512];
                mp_family_list(MP_FAMILY_NAMES, ", ", list, sizeof list);
                return mp_cli_error(cmd, "--arch: '%s' is not one of %s", optarg, list);
            }
            s.arch = (MpArch)a;
            break;
        }
        case 'L': s.layers = (int)mp_cli_i64(cmd, "--layers", optarg, 1, 4096); break;
        case 'd': s.dim = (int)mp_cli_i64(cmd, "--dim", optarg, 1, 1 << 24); break;
        case 'H': s.heads = (int)mp_cli_i64(cmd, "--heads", optarg, 1, 4096); break;
        case 'K': s.kv_heads = (int)mp_cli_i64(cmd, "--kv-heads", optarg, 1, 4096); kv_given = 1; break;
        case 'D': s.head_dim = (int)mp_cli_i64(cmd, "--head-dim", optarg, 2, 1 << 16); break;
        case 'f': s.ffn = (int)mp_cli_i64(cmd, "--ffn", optarg, 1, 1 << 24); break;
        case 'V': s.vocab = (int)mp_cli_i64(cmd, "--vocab", optarg, 1, 1 << 27); break;
        case 's': s.seed = (uint64_t)mp_cli_i64(cmd, "--seed", optarg, 0, INT64_MAX); break;
        case 'F':
            if (!strcmp(optarg, "hf")) s.format = MP_FORMAT_HF;
            else if (!strcmp(optarg, "gguf")) s.format = MP_FORMAT_GGUF;
            else return mp_cli_error(cmd, "--format: '%s' is not hf or gguf", optarg);
            break;
        case 't':
            if (mp_quant_parse(optarg, &s.dtype) != MP_OK || !mp_quant_can_encode(s.dtype))
                return mp_cli_error(cmd, "--dtype: '%s' is not one of f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k", optarg);
            break;
        case 'n': s.shards = (int)mp_cli_i64(cmd, "--shards", optarg, 1, 99999); break;
        case 'r':
            if (!strcmp(optarg, "none")) s.rope_scaling = MP_ROPE_NONE;
            else if (!strcmp(optarg, "llama3")) s.rope_scaling = MP_ROPE_LLAMA3;
            else if (!strcmp(optarg, "longrope")) s.rope_scaling = MP_ROPE_LONGROPE;
            else return mp_cli_error(cmd, "--rope-scaling: '%s' is not none, llama3 or longrope", optarg);
            break;
        case 'T': s.rope_theta = mp_cli_double(cmd, "--rope-theta", optarg, 1.0001, 1e12); break;
        case 'p': s.partial_rotary = mp_cli_double(cmd, "--partial-rotary", optarg, 1e-6, 1); prf_given = 1; break;
        case 'P': s.parallel_residual = 0; break;
        case 'A': s.attn_softcap = mp_cli_double(cmd, "--attn-softcap", optarg, 0, 1e6); break;
        case 'B': s.final_softcap = mp_cli_double(cmd, "--final-softcap", optarg, 0, 1e6); break;
        case 'W': s.sliding_window = (int)mp_cli_i64(cmd, "--sliding-window", optarg, 1, INT32_MAX); break;
        case 'X': s.experts = (int)mp_cli_i64(cmd, "--experts", optarg, 1, 4096); moe_given = 1; break;
        case 'U': s.experts_used = (int)mp_cli_i64(cmd, "--experts-used", optarg, 1, 4096); moe_given = 1; break;
        case 'M': s.moe_ffn = (int)mp_cli_i64(cmd, "--moe-ffn", optarg, 1, 1 << 24); break;
        case 'N': s.no_norm_topk = 1; break;
        case 'S': s.shared_ffn = (int)mp_cli_i64(cmd, "--shared-ffn", optarg, 1, 1 << 24); break;
        case 'y': s.tie = 1; break;
        case 'e': s.norm_eps = mp_cli_double(cmd, "--norm-eps", optarg, 0, 1); break;
        case 'm': s.max_pos = (int)mp_cli_i64(cmd, "--max-pos", optarg, 1, INT32_MAX); break;
        case 'z': force = 1; break;
        case 'h': mkmodel_print_help(); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind != argc - 1) return mp_cli_error(cmd, optind < argc ? "exactly one OUT path expected" : "missing OUT path (see 'maskpos mkmodel --help')");
    mp_mk_spec_family(&s, kv_given, prf_given); /* the family's own defaults (gptneox's heads and rotary, Gemma's tie) */
    MpErr e;
    if (moe_given && mp_mk_option_refused(MP_MK_EXPERTS, s.arch, &e)) return mp_cli_error(cmd, "%s", e.msg);
    const char *out = argv[optind];
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
