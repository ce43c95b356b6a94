/* cmd_inspect.c — `maskpos inspect MODEL`: describe an HF directory or a GGUF file.
 *
 *   maskpos inspect MODEL                     architecture, dims, RoPE, dtypes, parameters, memory
 *   maskpos inspect MODEL --tensors           + every stored tensor (HF orientation shapes)
 *   maskpos inspect MODEL --json --layers 4   the same as one JSON object, for scripts
 * Exit 2 with "maskpos inspect: error: <file>: <what>" on any malformed input.
 * Tested by: tests/test_load.c (round trip mkmodel -> inspect, malformed files).
 */
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "cli/cli.h"     /* mp_cli_* */
#include "job/probe_job.h"   /* mp_probe_peak: the probe's memory estimate */
#include "job/shared_opts.h" /* --seq: declared once */
#include "load/model.h"  /* MpModel, mp_model_open */

/* The flags' values. */
typedef struct InspectFlags {
    int tensors, json, layers, seq;
} InspectFlags;

typedef enum InspectOpt { IN_TENSORS, IN_JSON, IN_LAYERS, IN_SEQ, IN_COUNT } InspectOpt;

#define F(m) offsetof(InspectFlags, m)
static const MpOpt inspect_opts[IN_COUNT] = {
    [IN_TENSORS] = {MP_OPT_DECL("tensors", MP_OPT_BOOL, NULL,
                                .help = "list every stored tensor: name, dtype, shape ([out, in] as in torch), bytes"), F(tensors)},
    [IN_JSON] = {MP_OPT_DECL("json", MP_OPT_BOOL, NULL, .help = "one JSON object on stdout instead of text"), F(json)},
    [IN_LAYERS] = {MP_OPT_DECL("layers", MP_OPT_INT, "L",
                               .help = "layers a probe would run (default 4, at most the model's); their weights, the\n"
                                       "embedding, the final norm and the output are checked to be finite (NaN or\n"
                                       "±Inf: exit 2 naming the file and tensor)",
                               .lo = 1, .hi = 4096), F(layers)},
    [IN_SEQ] = {&mp_shared_opts[MP_SHARED_SEQ], F(seq), .help = "sequence length for the memory estimate (default 1024)"},
};
_Static_assert(sizeof inspect_opts / sizeof *inspect_opts == IN_COUNT, "one row per InspectOpt");

static const MpOptTable inspect_table = {"inspect", inspect_opts, IN_COUNT, 15,
    "usage: maskpos inspect MODEL [--tensors] [--json] [--layers L] [--seq S]\n"
    "\n"
    "MODEL is an HF directory (config.json + model.safetensors or sharded\n"
    "model-*.safetensors with model.safetensors.index.json), a .gguf file, or a config.json\n"
    "alone (e.g. a published configuration: the counts it implies, no weights read).\n"
    "Prints the architecture, dimensions, RoPE settings (theta, scaling, rotary dim), stored\n"
    "dtypes, parameter count and the memory a probe of the first L layers needs.\n"
    "\n",
    "\n"
    "Probe memory estimate: the expected peak `maskpos probe --layers 1-L` prints and compares with\n"
    "--max-mem-gib, for one sequence of S tokens (f32, no --per-head): f32 weights of layers 1..L +\n"
    "the weight-loading scratch + one sequence's activations + its scores NH*S*S*4 + the maps\n"
    "(float64 sums, sums of squares and outputs, (5L+6)*S*S*8). Mapped weights of other layers\n"
    "are not read.\n"};

typedef struct Mem {
    uint64_t weights, acts, scores, maps, total;
} Mem;

/* The probe's own estimate (mp_probe_peak); weights exact (without the allocator's 64-byte
 * rounding of each packed piece), scratch, tokens and the allocator's rounding in acts. */
static Mem probe_memory(const MpModel *m, int L, int64_t S) {
    Mem r;
    MpProbeConfig c;
    mp_probe_config_init(&c);
    MpProbePeak pk;
    mp_probe_peak(&pk, m, &c, L, L, (int)S, 1, 1, 1, 0);
    r.weights = mp_model_layer_f32_bytes(m, L);
    r.scores = (uint64_t)m->n_heads * (uint64_t)S * (uint64_t)S * 4;
    r.acts = pk.total - pk.maps - pk.outs - r.scores - r.weights; /* incl. scratch, ids, rounding */
    r.maps = pk.maps + pk.outs;
    r.total = pk.total;
    return r;
}

static void shape_str(char *out, size_t cap, const MpModelTensor *t) {
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int d = 0; d < t->ndim && k < cap; d++) k += (size_t)snprintf(out + k, cap - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

static uint64_t tensor_elems(const MpModelTensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
    return n;
}

/* Per-dtype tensor counts and bytes. */
typedef struct DtStat {
    MpWType t;
    int count;
    uint64_t bytes;
} DtStat;

static int dtype_stats(const MpModel *m, DtStat *st, int cap) {
    int n = 0;
    for (size_t i = 0; i < m->n_tensors; i++) {
        int k;
        for (k = 0; k < n; k++)
            if (st[k].t == m->tensors[i].type) break;
        if (k == n) {
            if (n == cap) continue;
            st[n].t = m->tensors[i].type;
            st[n].count = 0;
            st[n].bytes = 0;
            n++;
        }
        st[k].count++;
        st[k].bytes += m->tensors[i].nbytes;
    }
    return n;
}

static void print_text(const MpModel *m, int tensors, int L, int64_t S) {
    printf("model:          %s\n", m->path);
    if (m->n_tensors == 0) printf("format:         hf config.json only (no weights: counts from the configuration)\n");
    else printf("format:         %s (%d file%s)\n", m->format == MP_FORMAT_HF ? "hf safetensors" : "gguf", m->n_files, m->n_files == 1 ? "" : "s");
    if (m->gguf) printf("gguf version:   %u (alignment %u)\n", m->gguf->version, m->gguf->alignment);
    printf("architecture:   %s\n", mp_model_arch_name(m->arch));
    printf("layers:         %d\n", m->n_layers);
    printf("hidden size:    %d\n", m->dim);
    printf("heads:          %d query, %d key/value (GQA group %d), head_dim %d\n", m->n_heads, m->n_kv_heads,
           m->n_heads / m->n_kv_heads, m->head_dim);
    printf("ffn size:       %d\n", m->ffn);
    if (m->n_experts) /* mixtral, qwen3moe */
        printf("experts:        %d per layer, %d used per token (router softmax over all, top %d, weights %s); ffn size is one expert's\n",
               m->n_experts, m->n_experts_used, m->n_experts_used, m->moe_norm_topk ? "renormalised to sum 1" : "not renormalised");
    if (m->ffn_shexp) printf("shared expert:  %d wide, on every token, scaled by sigmoid(shared_expert_gate . x)\n", m->ffn_shexp);
    printf("vocab size:     %d\n", m->vocab);
    printf("%s%g\n", m->layer_norm ? "layer norm eps: " : "rms norm eps:   ", m->norm_eps); /* gptneox: LayerNorm's eps */
    printf("qkv bias:       %s\nqk norm:        %s\ntied embedding: %s\n", m->has_qkv_bias ? "yes" : "no",
           m->has_qk_norm ? "yes" : "no", m->tie_embeddings ? "yes" : "no");
    if (m->post_norm || m->layer_norm) /* families whose block differs from Llama's */
        printf("block:          %s\n", m->layer_norm ? (m->parallel_residual ? "LayerNorm with bias, parallel residual x + attn(ln1(x)) + mlp(ln2(x)), GELU MLP with biases"
                                                                              : "LayerNorm with bias, attention then MLP, GELU MLP with biases")
                                     : m->geglu ? "RMSNorm (1 + w) before and after attention and MLP, GeGLU (tanh GELU)"
                                                : "RMSNorm of the attention and MLP outputs before each residual add (no pre-norm), q/k RMSNorm over the whole projection");
    if (m->layer_local) {
        int nl = 0;
        for (int l = 0; l < m->n_layers; l++) nl += m->layer_local[l];
        printf("local layers:   %d of %d", nl, m->n_layers);
        if (m->inv_freq_local) /* gemma3: their own RoPE base */
            printf(" (RoPE base %g)", m->rot_dim >= 4 ? pow((double)m->inv_freq_local[1], -(double)m->rot_dim / 2.0) : 0.0);
        printf("\n");
    }
    if (m->embed_scale > 0)
        printf("gemma:          embeddings x %.7g, attention scale %.7g, soft-capping %g (scores) / %g (logits); 0 = none\n",
               m->embed_scale, m->attn_scale, m->attn_softcap, m->final_softcap);
    printf("max positions:  %d\n", m->max_pos);
    if (m->sliding_window) {
        int nw = 0;
        for (int l = 0; l < m->n_layers; l++) nw += mp_model_layer_window(m, l) > 0;
        printf("sliding window: %d in %d of %d layers (query i sees key j when i - j < %d)\n", m->sliding_window, nw, m->n_layers,
               m->sliding_window);
    }
    else printf("sliding window: none\n");
    printf("bos / eos:      %d / %d\n", m->bos_id, m->eos_id);
    if (m->rope_layer) {
        int nope = 0;
        for (int j = 0; j < m->n_layers; j++) nope += !m->rope_layer[j];
        printf("positions:      no positional encoding (NoPE) in %d of %d layers (no_rope_layers)\n", nope, m->n_layers);
    }
    printf("rope:           theta %g, rotary dim %d of %d, scaling %s", m->rope_theta, m->rot_dim, m->head_dim,
           mp_model_rope_scaling_name(m->rope_scaling));
    if (m->rope_scaling == MP_ROPE_LLAMA3)
        printf(" (factor %g, low_freq_factor %g, high_freq_factor %g, original ctx %d)", m->rope_factor, m->rope_low_freq_factor,
               m->rope_high_freq_factor, m->rope_orig_ctx);
    else if (m->rope_scaling == MP_ROPE_LINEAR) printf(" (factor %g)", m->rope_factor);
    else if (m->rope_scaling == MP_ROPE_LONGROPE)
        printf(" (original ctx %d, factor %g, attention factor %.7g)", m->rope_orig_ctx, m->rope_factor, m->rope_attn_factor);
    else if (m->rope_scaling == MP_ROPE_FREQ_FACTORS) printf(" (rope_freqs.weight: Llama-3.1-style)");
    int half = m->rot_dim / 2;
    printf("\ninv_freq:       [0] %.6e  [1] %.6e  ... [%d] %.6e\n", m->inv_freq[0], half > 1 ? m->inv_freq[1] : m->inv_freq[0], half - 1,
           m->inv_freq[half - 1]);
    DtStat st[16];
    int nd = dtype_stats(m, st, 16);
    printf("dtypes:        ");
    for (int i = 0; i < nd; i++) printf(" %s x%d (%.2f MiB)%s", mp_quant_name(st[i].t), st[i].count, st[i].bytes / 1048576.0, i + 1 < nd ? "," : "");
    uint64_t p = mp_model_param_count(m);
    printf("\nparameters:     %llu (%.3f M)\n", (unsigned long long)p, p / 1e6);
    if (m->n_experts) printf("active:         %llu parameters per token (%.3f M; K of E experts)\n", (unsigned long long)mp_model_active_param_count(m),
                             mp_model_active_param_count(m) / 1e6);
    printf("tensors:        %zu\n", m->n_tensors);
    Mem mem = probe_memory(m, L, S);
    printf("probe memory:   first %d layer%s, seq %lld: weights %.2f MiB + activations %.2f MiB + scores %.2f MiB + maps %.2f MiB = %.2f MiB (probe's expected peak)\n",
           L, L == 1 ? "" : "s", (long long)S, mem.weights / 1048576.0, mem.acts / 1048576.0, mem.scores / 1048576.0,
           mem.maps / 1048576.0, mem.total / 1048576.0);
    if (tensors) {
        printf("\n%-48s %-5s %-18s %12s  %s\n", "tensor", "type", "shape", "bytes", "file");
        for (size_t i = 0; i < m->n_tensors; i++) {
            const MpModelTensor *t = &m->tensors[i];
            char sh[96];
            shape_str(sh, sizeof sh, t);
            const char *fn = m->file_names[t->file], *slash = strrchr(fn, '/');
            printf("%-48s %-5s %-18s %12zu  %s\n", t->name, mp_quant_name(t->type), sh, t->nbytes, slash ? slash + 1 : fn);
        }
    }
}

static void print_json(const MpModel *m, int tensors, int L, int64_t S) {
    json_t *o = json_object();
    json_object_set_new(o, "path", json_string(m->path));
    json_object_set_new(o, "format", json_string(m->format == MP_FORMAT_HF ? "hf" : "gguf"));
    json_object_set_new(o, "files", json_integer(m->n_files));
    json_object_set_new(o, "architecture", json_string(mp_model_arch_name(m->arch)));
    json_object_set_new(o, "layers", json_integer(m->n_layers));
    json_object_set_new(o, "hidden_size", json_integer(m->dim));
    json_object_set_new(o, "heads", json_integer(m->n_heads));
    json_object_set_new(o, "kv_heads", json_integer(m->n_kv_heads));
    json_object_set_new(o, "head_dim", json_integer(m->head_dim));
    json_object_set_new(o, "ffn_size", json_integer(m->ffn));
    json_object_set_new(o, "vocab_size", json_integer(m->vocab));
    json_object_set_new(o, m->layer_norm ? "layer_norm_eps" : "rms_norm_eps", json_real(m->norm_eps)); /* the config's own key */
    json_object_set_new(o, "qkv_bias", json_boolean(m->has_qkv_bias));
    json_object_set_new(o, "qk_norm", json_boolean(m->has_qk_norm));
    json_object_set_new(o, "tie_word_embeddings", json_boolean(m->tie_embeddings));
    json_object_set_new(o, "max_position_embeddings", json_integer(m->max_pos));
    json_object_set_new(o, "sliding_window", json_integer(m->sliding_window));
    if (m->sliding_window) { /* per layer: W, or 0 where every earlier key is seen */
        json_t *lw = json_array();
        for (int l = 0; l < m->n_layers; l++) json_array_append_new(lw, json_integer(mp_model_layer_window(m, l)));
        json_object_set_new(o, "layer_windows", lw);
    }
    json_object_set_new(o, "bos_token_id", json_integer(m->bos_id));
    json_object_set_new(o, "eos_token_id", json_integer(m->eos_id));
    json_t *r = json_object();
    json_object_set_new(r, "theta", json_real(m->rope_theta));
    json_object_set_new(r, "rotary_dim", json_integer(m->rot_dim));
    json_object_set_new(r, "scaling", json_string(mp_model_rope_scaling_name(m->rope_scaling)));
    json_t *rl = json_array();
    for (int j = 0; j < m->n_layers; j++) json_array_append_new(rl, json_boolean(!m->rope_layer || m->rope_layer[j]));
    json_object_set_new(r, "applied_in_layer", rl);
    json_object_set_new(r, "factor", json_real(m->rope_factor));
    json_object_set_new(r, "low_freq_factor", json_real(m->rope_low_freq_factor));
    json_object_set_new(r, "high_freq_factor", json_real(m->rope_high_freq_factor));
    json_object_set_new(r, "original_context", json_integer(m->rope_orig_ctx));
    json_object_set_new(r, "attention_factor", json_real(m->rope_attn_factor));
    json_t *inv = json_array();
    for (int i = 0; i < m->rot_dim / 2; i++) json_array_append_new(inv, json_real(m->inv_freq[i]));
    json_object_set_new(r, "inv_freq", inv);
    if (m->inv_freq_long) {
        json_t *il = json_array();
        for (int i = 0; i < m->rot_dim / 2; i++) json_array_append_new(il, json_real(m->inv_freq_long[i]));
        json_object_set_new(r, "inv_freq_long", il);
    }
    json_object_set_new(o, "rope", r);
    DtStat st[16];
    int nd = dtype_stats(m, st, 16);
    json_t *dt = json_object();
    for (int i = 0; i < nd; i++) json_object_set_new(dt, mp_quant_name(st[i].t), json_integer(st[i].count));
    json_object_set_new(o, "dtypes", dt);
    json_object_set_new(o, "parameters", json_integer((json_int_t)mp_model_param_count(m)));
    if (m->n_experts) {
        json_object_set_new(o, "active_parameters", json_integer((json_int_t)mp_model_active_param_count(m)));
        json_object_set_new(o, "experts", json_integer(m->n_experts));
        json_object_set_new(o, "experts_used", json_integer(m->n_experts_used));
        json_object_set_new(o, "experts_renormalised", json_boolean(m->moe_norm_topk));
        if (m->ffn_shexp) json_object_set_new(o, "shared_expert_size", json_integer(m->ffn_shexp));
    }
    json_object_set_new(o, "n_tensors", json_integer((json_int_t)m->n_tensors));
    Mem mem = probe_memory(m, L, S);
    json_t *pm = json_object();
    json_object_set_new(pm, "layers", json_integer(L));
    json_object_set_new(pm, "seq", json_integer(S));
    json_object_set_new(pm, "weights_bytes", json_integer((json_int_t)mem.weights));
    json_object_set_new(pm, "activations_bytes", json_integer((json_int_t)mem.acts));
    json_object_set_new(pm, "scores_bytes", json_integer((json_int_t)mem.scores));
    json_object_set_new(pm, "maps_bytes", json_integer((json_int_t)mem.maps));
    json_object_set_new(pm, "total_bytes", json_integer((json_int_t)mem.total));
    json_object_set_new(o, "probe_memory", pm);
    if (tensors) {
        json_t *ta = json_array();
        for (size_t i = 0; i < m->n_tensors; i++) {
            const MpModelTensor *t = &m->tensors[i];
            json_t *to = json_object(), *sh = json_array();
            json_object_set_new(to, "name", json_string(t->name));
            json_object_set_new(to, "type", json_string(mp_quant_name(t->type)));
            for (int d = 0; d < t->ndim; d++) json_array_append_new(sh, json_integer(t->shape[d]));
            json_object_set_new(to, "shape", sh);
            json_object_set_new(to, "elements", json_integer((json_int_t)tensor_elems(t)));
            json_object_set_new(to, "bytes", json_integer((json_int_t)t->nbytes));
            json_object_set_new(to, "file", json_string(m->file_names[t->file]));
            json_array_append_new(ta, to);
        }
        json_object_set_new(o, "tensors", ta);
    }
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    if (s) puts(s);
    free(s);
    json_decref(o);
}

int mp_cmd_inspect(int argc, char **argv) {
    const char *cmd = "inspect";
    InspectFlags fl = {.layers = 4, .seq = 1024};
    int first;
    const int prc = mp_cli_parse(&inspect_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    const int tensors = fl.tensors, as_json = fl.json;
    int layers = fl.layers;
    const int64_t seq = fl.seq;
    if (first != argc - 1) return mp_cli_error(cmd, first < argc ? "exactly one MODEL expected" : "missing MODEL (see 'maskpos inspect --help')");
    MpModel m;
    MpErr e;
    const char *path = argv[first];
    const size_t pn = strlen(path);
    /* a config.json alone (e.g. a published configuration): hyperparameters and counts, no weights */
    const int cfg_only = pn >= 5 && !strcmp(path + pn - 5, ".json");
    if ((cfg_only ? mp_model_open_config(&m, path, &e) : mp_model_open(&m, path, &e)) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    if (layers > m.n_layers) layers = m.n_layers;
    /* the weights a probe of these layers would read must be finite (the layers beyond are not
     * read: inspect stays cheap on large models) */
    if (mp_model_check_finite(&m, layers, &e) != MP_OK) {
        mp_model_free(&m);
        return mp_cli_error(cmd, "%s", e.msg);
    }
    if (as_json) print_json(&m, tensors, layers, seq);
    else print_text(&m, tensors, layers, seq);
    mp_model_free(&m);
    return MP_EXIT_OK;
}
