/* fwd.h — the decoder forward pass in f32 (Llama / Mistral / Qwen2 / Qwen3 / Phi-3 / Phi-4), with an
 * attention-capture hook.
 *
 * Implements exactly the HF semantics of docs model-formats.md §2.1: embedding → per layer
 * RMSNorm, Q/K/V (+ q/k/v biases for qwen2), per-head q/k RMSNorm (qwen3), RoPE (HF rotate-half on
 * the first R dims; llama3/linear scaling through the loader's inv_freq; longrope: the long table
 * when the sequence is longer than the original context, cos/sin × rope_attn_factor), scores
 * q·kᵀ/√HS, causal mask, softmax, attention-weighted values, o_proj, residual, RMSNorm, SwiGLU MLP,
 * residual; optionally final RMSNorm + lm_head. GQA: query head h reads key/value head
 * h / (NH/NKV). Two counterfactuals: no causal mask in any layer, and no RoPE.
 * The hook sees each layer's pre-softmax scores [NH,T,T] of the current sequence (masked
 * entries −inf) before they are turned into probabilities (or, f->rows_hook, each block of rows of
 * them in the attention's own pass, before their softmax); capture points (MpFwdPoint, f->capture)
 * show the layer's activations on the way (normed input, q, k, attention mix and output, the
 * residual stream, the MLP's input, the layer output) — tests/test_train_fwd.c checks each
 * against the training model's forward.
 * This file decides the data flow; every piece of arithmetic is a whole-tensor op of a backend
 * instance (fwd_backend.h: the CPU's, or a device's), which owns the weights' layout and its
 * loops. Only the layers asked for are loaded (once, at init, into one weight block that every
 * worker of the process shares: mp_fwd_init_worker); everything the token loop needs is
 * allocated at init, nothing inside mp_fwd_run. Deterministic: the same bits for any OpenMP
 * thread count and any matmul kernel (see fwd_kernels.h).
 * Compute modes (MpFwdConfig.compute; docs/speed.md):
 *   - MP_FWD_COMPUTE_F32, the reference: weights dequantised to f32, f32 everywhere;
 *   - MP_FWD_COMPUTE_BF16: the Linear weights are kept in bf16 (bf16 checkpoints bit for bit;
 *     f32/f16/quantised ones rounded once to bf16 at init, a panel of 32 rows at a time, never
 *     held as a whole in f32) and every Linear input (normed hidden state, attention output,
 *     SwiGLU output) is rounded to bf16 before its matmul — the products of a bf16 matmul, as on
 *     AMX / AVX512-BF16 — with f32 accumulation. Norm weights, biases, RoPE, attention
 *     (q·k, softmax, p·v) and the residual stream stay f32.
 *   - MP_FWD_COMPUTE_F32_PLAIN: f32 with the arithmetic of the training model's kernels (the
 *     plain ops of fwd_kernels.h); gram's matrices (src/train/gram.c) come from it, bit for bit
 *     what they were when gram had its own forward pass (docs/library.md).
 * Mapped weight pages are released (madvise) once packed, and embedding pages after each run,
 * so the resident set is the packed layers plus activations.
 * mp_fwd_extend (cfg.kv_cache) adds one position at a time — sampling — with every layer's keys
 * and values cached: the same bits as mp_fwd_run on the whole prefix, at the cost of one row.
 * Sliding-window layers (mp_model_layer_window: gemma2/3's local layers, mistral, phi3, qwen2/3
 * with use_sliding_window) mask keys j with i - j >= W like the causal mask (-inf in the hook's
 * scores, 0 after the softmax) once a sequence is longer than W; --bidirectional keeps the
 * window, both ways.
 * Does not: tokenise.
 * Tested by: tests/test_model_fwd.c (tests/ref/probe_ref.py in torch; HF vs GGUF; threads; the
 * counted instance: the ops a run makes, a device's paths, shared weights), tests/test_backend_ops.c
 * (each op of each instance),
 * tests/test_stories_generate.c (mp_fwd_extend == mp_fwd_run bit for bit, every arch),
 * tests/test_model_speed.c (bf16 against tests/ref/probe_ref_bf16.py and llama.cpp; every kernel).
 *
 * Shape legend: T tokens, C hidden, NH query heads, NKV key/value heads, HS head dim, FF MLP
 * size, V vocabulary, R rotary dims.
 */
#ifndef MP_FWD_H
#define MP_FWD_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"          /* MpErr */
#include "load/model.h"        /* MpModel, mp_model_* accessors */
#include "model/fwd_check.h"   /* MpFwdCheck */
#include "model/fwd_backend.h" /* MpFwdOps: the backend instances */
#include "model/fwd_kernels.h" /* MpFwdKernel */

typedef struct MpFwdConfig {
    int n_layers; /* run layers [0, n_layers), 1..L */
    int max_seq;  /* longest T a run will be given */
    int causal;   /* 1 the model's causal mask; 0 counterfactual: no mask in any layer */
    int rope;     /* 1 the model's RoPE; 0 counterfactual: q, k not rotated */
    int rope_unrotated; /* counterfactual p-RoPE (probe --rope-keep-high): the last this many pairs (the
                           lowest frequencies; mp_fwd_rope_unrotated) not rotated; 0: every pair */
    int logits;   /* 1: final norm + lm_head after the last layer (needs n_layers == L) */
    int compute;  /* MpFwdCompute; 0 = f32 (the reference) */
    int kv_cache; /* 1: keep every layer's keys and values for mp_fwd_extend (needs causal) */
    const char *device;      /* backend by name (--device): NULL or "cpu" (fwd_backend.h) */
    const MpFwdOps *ops;     /* a backend instance given directly (tests); NULL: from device and compute */
    uint64_t tap_layers;     /* capture taps asked for before the run: bit l = layer l (l < 64; layers */
    unsigned tap_points;     /* past 63 follow bit 63), bit p = MpFwdPoint p; both 0 = every one; tap_layers
                                also limits the rows hook to those layers */
    int tap_headsum_workers; /* > 0: the rows hook's reduced map (MpFwd.rows_headsum) for up to this many workers */
    int logits_last;         /* 1: only the last row of each run reaches f->logits (a device copies one row
                                back, not [T, V]; sampling); 0: every row of the run */
} MpFwdConfig;

typedef enum MpFwdCompute {
    MP_FWD_COMPUTE_F32 = 0, /* f32 weights and activations */
    MP_FWD_COMPUTE_BF16,    /* bf16 Linear weights and inputs, f32 accumulation */
    MP_FWD_COMPUTE_F32_PLAIN, /* f32 with the arithmetic of the training model's kernels (the plain
                                 ops of fwd_kernels.h: no fma, f32 sums, exp in double): what gram's
                                 matrices were computed with before it read this forward pass, kept
                                 so Figure 3's bytes stay the same; not a --compute choice */
} MpFwdCompute;

const char *mp_fwd_compute_name(int compute); /* "f32", "bf16", "f32-plain" */
/* Parses "f32" / "bf16"; -1 otherwise. */
int mp_fwd_compute_parse(const char *s);

/* The layer hook (MpFwdHook), the rows hook (MpFwdRowsHook) and the reduced map's consumer
 * (MpFwdHeadsumFn) are declared in fwd_backend.h: the attention op hands them over (MpFwdTaps). */

/* Capture points of a layer's activations (mp_fwd_run only; rows are positions, all T rows). */
typedef enum MpFwdPoint {
    MP_FWD_AT_ATTN_IN = 0, /* [T, C] RMSNorm(x) with input_layernorm: the attention's input */
    MP_FWD_AT_Q,           /* [T, NH*HS] queries after bias, q norm and RoPE */
    MP_FWD_AT_K,           /* [T, NKV*HS] keys after bias, k norm and RoPE */
    MP_FWD_AT_ATTN_MIX,    /* [T, NH*HS] softmax(scores)·v per head, before o_proj */
    MP_FWD_AT_ATTN_OUT,    /* [T, C] the attention's output after o_proj, before the residual */
    MP_FWD_AT_RESID_MID,   /* [T, C] x after the attention residual */
    MP_FWD_AT_FFN_IN,      /* [T, C] RMSNorm of it with post_attention_layernorm */
    MP_FWD_AT_LAYER_OUT,   /* [T, C] x after the MLP residual: the layer's output */
    MP_FWD_NPOINTS
} MpFwdPoint;
/* Sees one capture point of one layer: x [T, width] row-major, host memory (borrowed until it returns). */
typedef void (*MpFwdCaptureFn)(void *ctx, int layer, int point, const float *x, int T, int width);

/* One layer's weights in the instance's memory (vectors: float * into the weight block; matrices:
 * opaque handles, MpFwdWeight). */
typedef struct MpFwdLayer {
    float *attn_norm;          /* [C]; NULL in olmo2 (no pre-norm: the block reads x itself) */
    MpFwdWeight q, k, v, o;    /* [NH*HS, C], [NKV*HS, C], [NKV*HS, C], [C, NH*HS]; f32 or bf16 */
    float *q_bias, *k_bias, *v_bias; /* [NH*HS], [NKV*HS], [NKV*HS]; NULL unless qwen2 */
    float *q_norm, *k_norm;    /* [HS] (qwen3); [NH*HS], [NKV*HS] (olmo2); else NULL */
    float *attn_post_norm, *ffn_post_norm; /* [C] olmo2: norms of the block outputs; else NULL */
    float *attn_norm_b, *ffn_norm_b; /* [C] gptneox LayerNorm biases; else NULL */
    float *o_bias, *down_bias; /* [C] gptneox; else NULL */
    float *up_bias;            /* [FF] gptneox; else NULL (gptneox has no gate: `gate` unused) */
    float *ffn_norm;           /* [C]; NULL in olmo2 */
    MpFwdWeight gate, up, down; /* [FF, C], [FF, C], [C, FF]; unused in MoE layers */
    MpFwdWeight router;        /* [E, C] MoE router; else unused */
    MpFwdWeight *exps;         /* [E * 3] MoE: expert j's gate [FF, C], up [FF, C], down [C, FF] at 3j..3j+2
                                  (borrowed from MpFwdWeights.expmats); else NULL */
    float *shexp_gate_inp;     /* [C] qwen2moe shared_expert_gate (one row: kept f32, like a norm); else NULL */
    MpFwdWeight shexp_gate, shexp_up, shexp_down; /* [FFS, C], [FFS, C], [C, FFS] qwen2moe shared expert */
} MpFwdLayer;

/* The weights of one forward pass on one device: read-only once loaded, shared by every worker
 * (mp_fwd_init_worker). One block (block, the instance's memory) carved by the plan of fwd.c. */
typedef struct MpFwdWeights {
    MpFwdLayer *layers;        /* [n_layers] owned */
    MpFwdWeight *expmats;      /* [n_layers * E * 3] owned, MoE only: every layer's expert matrices */
    float *out_norm;           /* [C] (logits only) */
    float *out_norm_b;         /* [C] gptneox final LayerNorm bias (logits only); else NULL */
    MpFwdWeight lm_head;       /* [V, C] (logits only) */
    void *block;               /* the instance's memory; freed through the ctx that made it */
    size_t bytes;
} MpFwdWeights;

typedef struct MpFwd {
    MpModel *m;                /* borrowed; embedding rows are read from it per token */
    MpFwdConfig cfg;
    int C, NH, NKV, HS, FF, V, R;
    const MpFwdOps *ops;       /* the backend instance: every op below goes through it */
    MpFwdCtx *ctx;             /* this worker's handle on it (owned) */
    MpFwdKernel kernel;        /* this pass's matmul kernel, resolved (MASKPOS_KERNEL or the CPU's best);
                                  no process-wide choice: two passes may use two kernels */
    MpFwdWeights *w;           /* the weights: owned when w_owner, else borrowed from the MpFwd given to
                                  mp_fwd_init_worker (which must outlive this one) */
    int w_owner;
    /* activations: one block (ablock, the instance's memory), carved; T <= max_seq */
    float *x;                  /* [T, C] residual stream */
    float *xn;                 /* [T, C] normed input / projection output */
    float *q;                  /* [T, NH*HS] */
    float *k, *v;              /* [T, NKV*HS] */
    void *kp;                  /* [NKV][kv_bytes(HS, T)] keys in the instance's attention layout */
    float *vh;                 /* [NKV, T, HS] values, contiguous per kv head */
    float *scores;             /* [NH, T, T] one sequence's scores, then probabilities */
    float *ao;                 /* [T, NH*HS] attention output before o_proj */
    float *gate, *up;          /* [T, FF] */
    float *xp;                 /* [T, C] gptneox parallel residual: the MLP's normed input; else NULL */
    float *cos_t, *sin_t;      /* [T, R/2] */
    float *cos_l, *sin_l;      /* [T, R/2] gemma3: the local (sliding-window) layers' table; else NULL */
    float *lg;                 /* [T, V] the logits in the instance's memory (logits only) */
    float *moe_p;              /* [T, E] MoE router logits, then probabilities; else NULL */
    float *moe_w;              /* [T, K] weights of the K chosen experts */
    int32_t *moe_sel;          /* [T, K] the chosen experts, most probable first */
    int32_t *moe_rows;         /* [T * K] (row * K + rank) entries routed to the expert at hand */
    float *moe_xg;             /* [T, C] those rows' inputs gathered, then the expert's outputs */
    float *moe_y;              /* [T, C] the weighted sum of the experts' outputs */
    float *moe_sg, *moe_su;    /* [T, FFS] qwen2moe shared expert's gate and up; else NULL */
    float *moe_sl;             /* [T] qwen2moe shared_expert_gate logits; else NULL */
    float *inv_freq;           /* [R/2] the RoPE frequencies uploaded (the loader's: llama3/linear scaled); NULL when R = 0 */
    float *inv_freq_long;      /* [R/2] longrope's long table; else NULL */
    float *inv_freq_local;     /* [R/2] gemma3's local layers' base; else NULL */
    void *tap_hs;              /* the reduced map's scratch: tap_bytes(NH, max_seq, tap_headsum_workers); else NULL */
    void *kc;                  /* [n_layers, NKV][kv_bytes(HS, max_seq)] rotated keys, packed (kv_cache only) */
    float *vc;                 /* [n_layers, NKV, max_seq, HS] values (kv_cache only) */
    float *ablock;
    size_t afloats;
    /* host memory of this worker (host_memory 0 only; else NULL): */
    float *tap_host;           /* [max_seq, max(C, NH*HS)] one capture's rows, copied out */
    float *emb_host;           /* [max_seq, C] the embedding rows before their upload */
    float *logits_host;        /* [max_seq, V] the logits copied out (logits only) */
    int32_t *moe_cnt;          /* [E] host, any instance (MoE only): each expert's row count of the layer at hand */
    /* [T, V] next-token logits in host memory after a run (cfg.logits; rows [t0, T) of the run, or
     * only row T - 1 with cfg.logits_last): the instance's own rows (host_memory) or a host copy */
    float *logits;
    /* optional, set by the caller after init: sees each layer's post-softmax probabilities
     * [NH,T,T] (0 where masked) once the values are mixed (probe --probs); mp_fwd_run only */
    MpFwdHook probs_hook;
    void *probs_ctx;
    /* optional, set by the caller after init (mp_fwd_run only; rows == NULL: none): the scores
     * row block by row block, in place of mp_fwd_run's layer hook (the two exclude each other) */
    MpFwdRowsHook rows_hook;
    /* optional, set by the caller after init: the reduced map (MpFwdHeadsumFn), in place of (or
     * besides) rows_hook.rows, with rows_hook's ctx, done and workers. A backend hands over only
     * this [16, T] block, not [NH, T, T] (a device: the layer's [T, T] map, tap_device). Needs
     * cfg.tap_headsum_workers >= rows_hook.workers (its scratch is planned at init). */
    MpFwdHeadsumFn rows_headsum;
    /* optional, set by the caller after init: 1 when the hooks above read the instance's memory
     * (a device accumulator: MpFwdTaps.device); 0: host memory */
    int tap_device;
    /* optional, set by the caller after init: the capture points asked for in cfg.tap_layers /
     * cfg.tap_points (MpFwdPoint; mp_fwd_run only; the last layer of a run without logits stops
     * after its scores unless tap_points names a point after them, ATTN_MIX and on: then it runs
     * through); a backend copies to the host only those */
    MpFwdCaptureFn capture;
    void *capture_ctx;
    /* optional, set by the caller before each mp_fwd_run: capture points (bit MpFwdPoint) of
     * cfg.tap_points that this run leaves out (0: none). The last layer runs only as far as the
     * points left need: past ATTN_MIX (o_proj, MLP) only when a later point is still asked for.
     * The probe's residual-stream statistics read one sequence in resid_stride this way. */
    unsigned skip_points;
    MpFwdCheck chk;            /* non-finite activations of the layer at hand (fwd_check.h) */
} MpFwd;

/* Bytes mp_fwd_init will allocate for (weights, activations incl. one sequence's scores). */
void mp_fwd_plan_bytes(const MpModel *m, const MpFwdConfig *cfg, uint64_t *weights, uint64_t *acts);
/* Loads and packs the weights of layers [0, cfg->n_layers) (+ output head for logits) into the
 * storage of the backend (cfg->ops, else cfg->device and cfg->compute: fwd_backend.h; a device
 * not built or unknown: MP_ERR, one line).
 * The environment variable MASKPOS_KERNEL (auto, a kernel name, or a bit class: fwd_kernels.h,
 * mp_fwd_kernel_choose) chooses the matmul kernel of this pass (tests use it to run every path on
 * one machine); unknown or unavailable: MP_ERR. Without it, the fastest kernel of the CPU's default
 * bit class (measured once per process). The weights are packed in that kernel's layout. The
 * process-wide mp_fwd_kernel_set is neither read nor changed.
 * Returns MP_ERR with a message on a bad config or when memory cannot be had. */
int mp_fwd_init(MpFwd *f, MpModel *m, const MpFwdConfig *cfg, MpErr *e);
/* Another worker of src's forward pass: the same model, config, instance and kernel, src's
 * weights shared (borrowed: src must outlive f), its own ctx and activations. Hooks are not
 * copied. MP_ERR with a message when memory or the device's handle cannot be had. */
int mp_fwd_init_worker(MpFwd *f, const MpFwd *src, MpErr *e);
void mp_fwd_free(MpFwd *f); /* accepts a zeroed struct; frees the weights only when it owns them */

/* One sequence ids [T] (1 <= T <= max_seq, 0 <= id < V) through the layers; hook (may be NULL)
 * sees every layer's scores (NULL when f->rows_hook is set: MP_ERR). A layer whose activations
 * overflow to NaN or ±Inf ends the run with MP_ERR naming the layer, the position and the tensor
 * (fwd_check.h; the hooks may have seen that layer's bad scores by then). With cfg.logits, f->logits [T, V] holds next-token logits; without,
 * the last layer stops at its scores (its softmax, values and MLP would feed nothing) unless
 * cfg.tap_points (less f->skip_points) names a capture point after them and f->capture is set:
 * then it runs to ATTN_MIX when that is the last point asked for, else through. */
int mp_fwd_run(MpFwd *f, const int32_t *ids, int T, MpFwdHook hook, void *ctx, MpErr *e);

/* p-RoPE (Barbero et al. 2025): of `pairs` frequency pairs (pair p: dims p and p + R/2, the
 * frequency falling with p) the highest ⌊keep·pairs⌋ rotate (keep·pairs rounded to 1e-9 first, so
 * 0.29 of 100 is 29) and the rest, the lowest frequencies, do not: returns their count
 * (MpFwdConfig.rope_unrotated). keep in [0, 1]: 1 every pair rotates, 0 none (as --no-rope). */
static inline int mp_fwd_rope_unrotated(double keep, int pairs) {
    const int k = (int)(keep * pairs + 1e-9);
    return pairs - (k < pairs ? k : pairs);
}

/* Key/value-cache decoding (cfg.kv_cache): runs positions [t0, T) of ids [T] (1 <= T <= max_seq)
 * through the layers, given that an earlier mp_fwd_extend call on the same ids ran [0, t0)
 * (t0 = 0 starts a sequence). Every row goes through the same kernels in the same order as in
 * mp_fwd_run, so f->logits rows [t0, T) (row t = after position t) are bit for bit those of
 * mp_fwd_run on ids[0..T). No hook. Refused for longrope models whose max_seq exceeds the
 * original context (the table would change under the cached keys). */
int mp_fwd_extend(MpFwd *f, const int32_t *ids, int t0, int T, MpErr *e);

/* Multiply-add count of one run over T tokens (matmuls + attention), for throughput reports. */
double mp_fwd_flops(const MpFwd *f, int T);

#endif
