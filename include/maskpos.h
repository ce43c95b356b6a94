/* maskpos.h — the public C API of libmaskpos: run the theory, a simulation or a probe of a model,
 * read the results, load a saved run. The same API is what the Python module (python/maskpos)
 * sees through ctypes.
 *
 *   cc prog.c $(pkg-config --cflags --libs maskpos)        (after `make install PREFIX=...`)
 *
 * Implements: opaque handles (MaskposConfig, MaskposModel, MaskposResult) and plain C types only;
 * no other header of the project or of a third party is needed. libmaskpos.so.0 exports exactly
 * the functions below (every other symbol of the library is hidden).
 * Conventions:
 *   - functions that can fail return MASKPOS_OK (0) or MASKPOS_ERR (-1) (MASKPOS_STOPPED (-2)
 *     when a progress callback asked to stop); maskpos_last_error() then gives the one-line
 *     message `maskpos <command>` prints after "error: " for the same input (kept per thread);
 *   - settings are strings named like the command's flags without the dashes ("batch", "alpha",
 *     "rope-theta" or "rope_theta"), with the command's defaults and checks; a switch takes
 *     "1"/"0" ("true"/"false", "on"/"off" too);
 *   - arrays belong to their result (valid until maskpos_result_free); C order, little-endian.
 * Does not: print, draw figures, or call exit(); a result is written only by maskpos_result_save.
 * Tested by: tests/test_api.c (this header alone), tests/test_pyapi.c (python/tests and
 * python/tests_torch: equality with the command line byte for byte), examples/ (built against an
 * installed copy).
 * Docs: docs/c-api.md, docs/python.md.
 */
#ifndef MASKPOS_H
#define MASKPOS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define MASKPOS_API __attribute__((visibility("default")))
#else
#define MASKPOS_API
#endif

#define MASKPOS_OK 0
#define MASKPOS_ERR (-1)
#define MASKPOS_STOPPED (-2) /* the progress callback returned nonzero: no result */

/* Element types of result arrays (the .npy descr in brackets). */
typedef enum MaskposDtype {
    MASKPOS_F64 = 0, /* <f8 */
    MASKPOS_F32 = 1, /* <f4 */
    MASKPOS_I32 = 2, /* <i4 */
    MASKPOS_I64 = 3, /* <i8 */
    MASKPOS_U32 = 4, /* <u4 */
    MASKPOS_U8 = 5,  /* |u1 */
    MASKPOS_U16 = 6, /* <u2 */
    MASKPOS_I16 = 7, /* <i2 */
} MaskposDtype;

#define MASKPOS_MAX_DIMS 8

typedef struct MaskposConfig MaskposConfig; /* the settings of one job */
typedef struct MaskposModel MaskposModel;   /* an open checkpoint (HF folder or .gguf) */
typedef struct MaskposResult MaskposResult; /* arrays, statistics and meta of one run */

/* Progress of a job: work done so far and the total (sequences for simulate and probe), called
 * from the thread that started the job, at least once before the first unit and once at the end.
 * Return 0 to go on, nonzero to stop: the job then returns MASKPOS_STOPPED at its next unit
 * boundary ("stopped by the caller"). */
typedef int (*MaskposProgressFn)(void *user, int64_t done, int64_t total);

/* "0.1.0" (also the soname's version: libmaskpos.so.0). */
MASKPOS_API const char *maskpos_version(void);
/* The message of this thread's last failed call ("" when none failed yet). */
MASKPOS_API const char *maskpos_last_error(void);

/* ---------------------------------------------------------------- settings */
/* job: "theory", "simulate" or "probe"; the command's defaults. NULL on an unknown job. */
MASKPOS_API MaskposConfig *maskpos_config_new(const char *job);
MASKPOS_API void maskpos_config_free(MaskposConfig *c);
/* Sets one setting from its text, checked as the command line checks the flag of that name.
 *   theory:   alpha, n, layers
 *   simulate: batch, seq, dim, layers, alpha (one value), norm, scale, rope, rope-theta,
 *             bidirectional, seed, threads, layer-form, residual
 *   probe:    the rows of maskpos_probe_option_name (tokens, seq, n, data, tokenizer, field,
 *             whole, shuffle, seed, no-special, pack, layers, per-head, heads-f64, probs,
 *             recency, bidirectional, no-rope, threads, compute, device, allow-long,
 *             max-mem-gib) */
MASKPOS_API int maskpos_config_set(MaskposConfig *c, const char *key, const char *value);
/* The probe's settings, from the table `maskpos probe` reads its flags from: count, and of the
 * i-th (0 <= i < count; NULL outside) its name (the flag without "--"), its kind ("bool", "int",
 * "number" or "string") and its help text (the lines of `maskpos probe --help`). */
MASKPOS_API int maskpos_probe_option_count(void);
MASKPOS_API const char *maskpos_probe_option_name(int i);
MASKPOS_API const char *maskpos_probe_option_kind(int i);
MASKPOS_API const char *maskpos_probe_option_help(int i);

/* ---------------------------------------------------------------- jobs */
/* The closed form (layer2_scores [n,n], z, g, h [n]) and, with layers > 0, the infinite-width
 * recursion (layer_scores [L,n,n]). */
MASKPOS_API int maskpos_theory(const MaskposConfig *c, MaskposResult **out);
/* The parameter-free decoder by Monte Carlo: scores, scores_se, probs, scores_diagnorm [L,S,S]
 * (the bits `maskpos simulate` writes for the same settings, any thread count). progress may be
 * NULL. */
MASKPOS_API int maskpos_simulate(const MaskposConfig *c, MaskposProgressFn progress, void *user,
                                 MaskposResult **out);

MASKPOS_API int maskpos_model_open(const char *path, MaskposModel **out);
MASKPOS_API void maskpos_model_close(MaskposModel *m);
/* Model layers, query heads, trained context (0 when the checkpoint does not state it), vocab. */
MASKPOS_API int maskpos_model_info(const MaskposModel *m, int *layers, int *heads, int64_t *context,
                                   int64_t *vocab);
/* The probe of `maskpos probe`: scores, scores_diagnorm, scores_se [L,S,S] (scores_heads
 * [L,H,S,S] with per-head, probs... with probs). Tokens: ids [n, seq] (int32, borrowed for the
 * call) when ids is not NULL, else the "tokens" or "data" setting; with ids, the "n" and "seq"
 * settings take the first rows and columns (as `probe --tokens F.npy --n --seq` does), and more
 * than the array holds is an error. progress may be NULL. */
MASKPOS_API int maskpos_probe(MaskposModel *m, const MaskposConfig *c, const int32_t *ids, int64_t n,
                              int seq, MaskposProgressFn progress, void *user, MaskposResult **out);

/* ---------------------------------------------------------------- text, logits, samples, figures */
/* The token ids of text [len bytes] by a model's own tokenizer (tokenizer: the model's folder with
 * tokenizer.json, a tokenizer.json, or a .gguf; as `maskpos tokenize --model`). add_special: BOS /
 * EOS as the tokenizer's config says. *ids [*n] is freed with maskpos_free. */
MASKPOS_API int maskpos_tokenize(const char *tokenizer, const char *text, int64_t len, int add_special,
                                 int32_t **ids, int64_t *n);
/* The text of ids [n] (`maskpos tokenize --decode`): *text [*len bytes + NUL], maskpos_free. */
MASKPOS_API int maskpos_detokenize(const char *tokenizer, const int32_t *ids, int64_t n, int skip_special,
                                   char **text, int64_t *len);
MASKPOS_API void maskpos_free(void *p);
/* The whole model on ids [n]: out [n, vocab] (the caller's buffer) = row t the next-token log-probs
 * after position t (log_probs = 1: the bits of `maskpos logits --out`) or the raw logits (0).
 * compute: "f32" (NULL) or "bf16". */
MASKPOS_API int maskpos_logits(MaskposModel *m, const int32_t *ids, int64_t n, const char *compute, int log_probs,
                               double *out);
/* n sequences of len ids each into ids [n, len] (the caller's buffer), as `maskpos generate --out`
 * with the same settings (temperature 0 = greedy; top_k 0 and top_p 1 = no cut; prompt NULL = BOS;
 * threads 0 = all cores; the ids do not depend on it). *nll (may be NULL): the mean negative
 * log-likelihood of the sampled tokens, nats per token. */
MASKPOS_API int maskpos_generate(MaskposModel *m, int64_t n, int len, double temperature, int top_k, double top_p,
                                 uint64_t seed, const int32_t *prompt, int n_prompt, const char *compute, int threads,
                                 int32_t *ids, double *nll);
/* The figure of `maskpos plot` for a stack of n square maps [n, rows, rows] (row = query, column
 * = key; NaN blank): one panel per map in layers [n_layers] (1-based; NULL = all), titled
 * "Layer <number>"; .png, .pdf or .svg by path's extension; preset "fig1".."fig5" or NULL; cmap /
 * title NULL = the preset's; diagnorm: diagonal-mean normalise each map first. An existing file is
 * replaced only with force; the file is written atomically. */
MASKPOS_API int maskpos_plot(const char *path, const double *maps, int n, int rows, const int *layers, int n_layers,
                             const char *preset, const char *cmap, int diagnorm, const char *title, int force);
/* The same for the maps of a run, with its meta.json (meta_json; NULL: none) saying under each
 * panel's title whether that layer's residue is resolved at this N, as `maskpos plot` of the
 * run's folder does; residue (or diagnorm, or a preset that normalises): unresolved panels are
 * marked (washed out, framed in red dashes). */
MASKPOS_API int maskpos_plot_run(const char *path, const double *maps, int n, int rows, const int *layers, int n_layers,
                                 const char *preset, const char *cmap, int diagnorm, const char *title, int force,
                                 const char *meta_json, int residue);

/* The page `maskpos view` writes (one self-contained HTML file, written atomically) from n run
 * folders dirs[n] (1..8; labels[n] or NULL: the folder names), with a title (NULL: from the
 * runs). An existing file is replaced only with force. */
MASKPOS_API int maskpos_view(const char *out, const char *const *dirs, const char *const *labels, int n, const char *title,
                             int force);

/* A finished run folder written by maskpos (its meta.json marks it complete): every .npy the
 * meta lists, and the meta. */
MASKPOS_API int maskpos_load(const char *dir, MaskposResult **out);

/* ---------------------------------------------------------------- results */
MASKPOS_API void maskpos_result_free(MaskposResult *r);
/* "theory", "simulate", "probe", or the "kind" of a loaded run's meta.json. */
MASKPOS_API const char *maskpos_result_kind(const MaskposResult *r);
MASKPOS_API int maskpos_result_narrays(const MaskposResult *r);
/* Name of array i < narrays (its file name without .npy), NULL when out of range. */
MASKPOS_API const char *maskpos_result_array_name(const MaskposResult *r, int i);
/* The array called name: its data (NULL + last error when there is none), dtype, ndim and shape
 * (room for MASKPOS_MAX_DIMS); any output pointer may be NULL. */
MASKPOS_API const void *maskpos_result_array(const MaskposResult *r, const char *name, int *dtype,
                                             int *ndim, int64_t *shape);
/* meta.json of the run as text (what maskpos_result_save writes, or what the folder held). */
MASKPOS_API const char *maskpos_result_meta(const MaskposResult *r);
/* Statistic `name` (a key of meta.json "stats": "nri", "residue_z_rms", ...) of the i-th map
 * (i < maskpos_result_nstats); NaN when absent or null. */
MASKPOS_API int maskpos_result_nstats(const MaskposResult *r);
MASKPOS_API double maskpos_result_stat(const MaskposResult *r, int i, const char *name);
/* Writes the run folder the command writes (the same .npy bytes; meta.json last), claiming dir
 * as the command does: a folder holding another run is refused unless force. */
MASKPOS_API int maskpos_result_save(const MaskposResult *r, const char *dir, int force);

/* ---------------------------------------------------------------- accumulator */
/* The probe's streaming accumulator fed with scores computed elsewhere (PyTorch, HF transformers,
 * another program): the same sums, statistics, result and run folder as `maskpos probe`, the same
 * bits for the same scores (docs/python.md, "Accumulator"). Layers are slots 0..n_layers-1 and may
 * be added in any order; sequences enter each layer in the order added. A failed call changes
 * nothing. */
typedef struct MaskposAcc MaskposAcc;
typedef struct MaskposAccOptions {
    int n_layers, n_heads, seq; /* slots, query heads, S */
    int causal;                 /* 1: query i observes keys j <= i only */
    const int *windows;         /* [n_layers] sliding window W per layer (0: none; i - j < W observed) or NULL */
    const int *layer_ids;       /* [n_layers] 1-based model layer numbers for meta.json, or NULL: 1..n_layers */
    int first;                  /* the statistics cover positions first..S-1 (1 after a BOS, as the probe) */
    int per_head;               /* also [L,H,S,S] maps */
    int probs;                  /* also probabilities, sink and entropy */
    int recency;                /* also the recency probability and statistics by length */
    int heads_f64;              /* per-head maps written as float64 (default float32, as probe --heads-f64) */
    const char *stats;          /* also these statistics, by name, comma-separated (probe --stats: "probs,recency";
                                   probs and recency above are two of them), or NULL. maskpos_acc_options gives
                                   back every optional statistic on, and probs and recency set to match */
    /* The model's geometry, for the statistics that read its activations (maskpos_acc_add_capture);
     * 0 / NULL: not given. freq (RoPE frequency usage) needs head_dim: */
    int head_dim;               /* HS, the size of a query/key head */
    int n_kv_heads;             /* key/value heads (0: n_heads); n_heads a multiple of it */
    int rot_dim;                /* R, the rotated dims at the start of a head, even (0: head_dim; partial rotary below) */
    int rope_interleaved;       /* 1: RoPE rotates dims (2p, 2p + 1) of a head (GPT-J, GGUF); 0: (p, p + R/2), HF's rotate_half */
    double scale;               /* the score scale (0: 1/sqrt(head_dim)) */
    const double *inv_freq;     /* [n_layers, R/2] each layer's inverse frequency of pair p (0: not rotated), or NULL */
    const double *rope_base;    /* [n_layers] each layer's RoPE base (0: none), or NULL (freq_angle, freq_base: NaN) */
    /* position (the position probe) needs resid_width: */
    int resid_width;            /* C, the residual stream's width (the hidden size) */
    int pos_dim;                /* the probe's features (0: 256; C when above it), as probe --pos-dim */
    int pos_stride;             /* every pos_stride-th position of a sequence (0: 1), as probe --pos-stride */
    double pos_ridge;           /* its ridge, relative (0: 1e-3), as probe --pos-ridge */
    int resid_stride;           /* variance's residual part and the position probe read the residual stream of
                                   sequence s only when s % resid_stride == 0 (0, 1: every one), as probe
                                   --resid-stride: maskpos_acc_capture_rows says which */
} MaskposAccOptions;
MASKPOS_API int maskpos_acc_new(const MaskposAccOptions *o, MaskposAcc **out);
/* The checks maskpos_acc_new makes (sizes, first, windows, layer ids), allocating nothing: a
 * binding checks the sizes before it builds the per-layer arrays (which may be NULL here). */
MASKPOS_API int maskpos_acc_check(const MaskposAccOptions *o);
MASKPOS_API void maskpos_acc_free(MaskposAcc *a);
/* The options it was made with (windows, layer_ids and stats point into a; probs, recency and stats
 * say every statistic on, however it was asked for). */
MASKPOS_API int maskpos_acc_options(const MaskposAcc *a, MaskposAccOptions *o);
/* Sequences added to layer slot `layer`; layer < 0: the fewest over layers. -1 on a bad argument. */
MASKPOS_API int64_t maskpos_acc_count(const MaskposAcc *a, int layer);
/* A JSON object whose keys go into the result's meta.json over the accumulator's ("model", ...). */
MASKPOS_API int maskpos_acc_set_meta(MaskposAcc *a, const char *json);
/* Pre-softmax scores of one layer for `batch` sequences, [batch, H, S, S] in dtype MASKPOS_F32 or
 * MASKPOS_F64, C order; entries outside the causal mask or window are never read. probs: the
 * post-softmax probabilities in the same layout and dtype, or NULL: computed from the scores with
 * the forward pass's softmax (f64 scores rounded to f32 first). Every observed entry must be
 * finite (probabilities in [0, 1]). */
MASKPOS_API int maskpos_acc_add(MaskposAcc *a, int layer, int64_t batch, int dtype, const void *scores,
                                const void *probs);
/* The same for sequences of several lengths: lengths [batch] (NULL: every one S) in
 * [first + 2, S]; a sequence of length S' adds the top-left S' x S' block of its maps (entries past
 * it are never read: padding), each entry's standard error counts the sequences that reached it,
 * and its block test is its own residue on its own grid (docs/python.md, "lengths"). Not with
 * recency. A score of magnitude 1e4 or more in an observed entry is refused as a padding or mask
 * value; the message names the pattern of the bad entries (padding, a sliding window). */
MASKPOS_API int maskpos_acc_add_lengths(MaskposAcc *a, int layer, int64_t batch, int dtype, const void *scores,
                                        const void *probs, const int32_t *lengths);
/* The check maskpos_acc_add_lengths makes, adding nothing (for sums reduced elsewhere: a GPU).
 * (maskpos_acc_check checks the options before an accumulator exists.) */
MASKPOS_API int maskpos_acc_check_add(const MaskposAcc *a, int layer, int64_t batch, int dtype, const void *scores,
                                      const void *probs, const int32_t *lengths);
/* Capture points maskpos_acc_add_capture takes (the forward pass's, src/model/fwd.h). */
enum {
    MASKPOS_AT_Q = 1,         /* [batch, S, H*HS] the queries after q norm and RoPE (freq) */
    MASKPOS_AT_K = 2,         /* [batch, S, NKV*HS] the keys after k norm and RoPE, before GQA's repeat (freq) */
    MASKPOS_AT_ATTN_MIX = 3,  /* [batch, S, H*hd] the attention output per head (softmax(scores)·v), before o_proj (variance) */
    MASKPOS_AT_LAYER_OUT = 7, /* [batch, S, C] the residual stream after the layer, after the MLP's residual (variance,
                                 position) */
};
/* Activations x [rows, S, width] (float32, C order, whole sequences of S positions) of capture
 * point `point` for the next `batch` sequences of layer slot `layer`, handed to the statistics that
 * read that point with the probe's own functions: the same sums as `maskpos probe` for the same
 * activations. rows is batch, except at MASKPOS_AT_LAYER_OUT with resid_stride K > 1: only the
 * sequences s (counted per layer from 0 in the order added) with s % K == 0 are given, in order
 * (maskpos_acc_capture_rows names them). The queries of a batch come first, then its keys (the
 * keys add the pair). Every point a statistic asked reads must cover every sequence whose scores
 * were added (maskpos_acc_add) before the result or a state file; not with lengths shorter than S.
 * Refused with one line: no statistic asked reads the point, a layer out of range, another dtype,
 * a width that is not the geometry's (n_heads x head_dim, n_kv_heads x head_dim, resid_width),
 * keys without their queries, a value not finite. */
MASKPOS_API int maskpos_acc_add_capture(MaskposAcc *a, int layer, int point, int64_t batch, int dtype, const void *x,
                                        int64_t width);
/* The rows maskpos_acc_add_capture reads of the next `batch` sequences of layer slot `layer` at
 * `point`: their indices in the batch into rows [batch] (may be NULL); returns how many (batch but
 * at MASKPOS_AT_LAYER_OUT with resid_stride > 1), -1 on a bad argument. */
MASKPOS_API int64_t maskpos_acc_capture_rows(const MaskposAcc *a, int layer, int point, int64_t batch, int64_t *rows);
/* Counts lengths from now on (what a sequence shorter than S switches on; a state with them needs
 * it before its sums are set). Not with recency. */
MASKPOS_API int maskpos_acc_lengths_on(MaskposAcc *a);
/* The meta keys set with maskpos_acc_set_meta (or read from a state file) as a JSON object
 * (malloc'd, maskpos_free), or NULL when none. */
MASKPOS_API char *maskpos_acc_meta(const MaskposAcc *a);
/* Sums computed elsewhere (a GPU) for `count` sequences of one layer slot: k arrays named as
 * maskpos_acc_state_array names them, each that array's slot `layer` (its length / n_layers
 * doubles), every sum of the accumulator given but those of the statistics fed by captures alone
 * (variance, freq, position: maskpos_acc_add_capture). Not with recency. */
MASKPOS_API int maskpos_acc_add_sums(MaskposAcc *a, int layer, int64_t count, int k, const char *const *names,
                                     const double *const *data);
/* dst += src (same options but seq): sum by sum, entry by entry; counts per layer added. Merging in
 * a fixed order gives fixed bits: one-sequence accumulators merged in sequence order give those of
 * one. Of different S, the shorter one's sums enter the top-left block of the longer (dst grows to
 * the longer S), as sequences of that length would (maskpos_acc_add_lengths); not with recency. */
MASKPOS_API int maskpos_acc_merge(MaskposAcc *dst, const MaskposAcc *src);
/* The state: i < narrays sums (doubles, C order, first index the layer slot except lbsum and
 * lbsumsq [lengths, L, 16, 16]), named; the pointer is into a (read and write). With
 * maskpos_acc_set_counts, what a copy needs. */
MASKPOS_API int maskpos_acc_state_narrays(const MaskposAcc *a);
MASKPOS_API double *maskpos_acc_state_array(MaskposAcc *a, int i, const char **name, int64_t *len);
MASKPOS_API int maskpos_acc_set_counts(MaskposAcc *a, const int64_t *counts);
/* The state as one file, written atomically: its options, meta, counts per layer and every sum,
 * with a checksum. maskpos_acc_open_state makes a new accumulator from the file alone;
 * maskpos_acc_load_state loads it into a new accumulator of the same options (also the probe's
 * checkpoint format, which older versions wrote and which holds no options; of this version's
 * checkpoint layout only: older ones are refused, see probe_ckpt.c). */
MASKPOS_API int maskpos_acc_save_state(const MaskposAcc *a, const char *path);
MASKPOS_API int maskpos_acc_load_state(MaskposAcc *a, const char *path);
MASKPOS_API int maskpos_acc_open_state(const char *path, MaskposAcc **out);
/* The result maskpos_probe gives (arrays, meta, stats; maskpos_result_save writes the folder
 * `maskpos probe --out` writes). Needs every layer to hold the same count, at least 1. */
MASKPOS_API int maskpos_acc_result(const MaskposAcc *a, MaskposResult **out);
/* The pre-softmax scores the forward pass computes (what the probe's hook sees) for one sequence
 * ids [seq]: out [n_layers, H, S, S] f32 for layers 1..n_layers; -inf where masked. */
MASKPOS_API int maskpos_model_scores(MaskposModel *m, const int32_t *ids, int seq, int n_layers, int bidirectional,
                                     float *out);

#ifdef __cplusplus
}
#endif

#endif
