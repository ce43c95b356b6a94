/* fwd_backend.h — the backend interface of the decoder forward pass (src/model/fwd.c): a table of
 * whole-tensor operations (MpFwdOps) that a backend instance runs on its own memory, the taps a
 * layer's attention hands over, and the device names --device accepts.
 *
 * Implements: the contract of every op (shapes, aliasing, which bits), in the manner of llm.c's
 * kernels and ggml's backend interface: an op takes whole tensors ([T, C], [NH, T, T] ...) and does
 * its own looping — a CPU instance keeps its OpenMP loops inside the op, a device instance launches
 * its kernels — so a layer is a few dozen op calls whatever T (about 40 for a Llama layer). The
 * instance owns the layout of what it holds: the Linear weights are opaque handles (MpFwdWeight:
 * panels on the CPU, AMX tiles for its amx kernels, row-major [O, K] for cuBLAS) filled through
 * weight_upload; vectors (norm weights, biases, RoPE frequencies) and the embedding rows reach it
 * through upload; keys are packed in its own attention layout (kv_bytes); what the host reads
 * comes back through to_host or the few bytes of a reduction (amax, moe_count, the scores check).
 * The instances here (fwd_cpu.c, fwd_cpu_attn.c):
 *   - mp_fwd_ops_cpu: the fast kernels of fwd_kernels.h — the REFERENCE instance: the same bits
 *     for every matmul kernel but avx512bf16 on bf16 weights (docs/speed.md) and every thread
 *     count; f32 and bf16 compute;
 *   - mp_fwd_ops_cpu_plain: the training model's arithmetic (MP_FWD_COMPUTE_F32_PLAIN: no fma, f32
 *     sums, exp in double), what gram's matrices are computed with.
 * A device instance (CUDA, issue #36) is a third table, loaded from a plugin by mp_fwd_ops_for;
 * what it must implement is every member below (docs/architecture.md, "a backend").
 *
 * Memory. Every float * or void * an op takes is the instance's memory (host memory when
 * host_memory is 1; device memory otherwise, never dereferenced by the host): fwd.c carves its
 * weight block and its activation blocks out of alloc'd blocks by byte offsets. Ops of one
 * MpFwdCtx run in the order they are called (a device queues them on one stream); only to_host,
 * synchronize and the ops that return values to host memory (amax, moe_count, attention's scores
 * check, taps handed to host consumers) wait for the work before them. The embedding does not
 * cross as ids: fwd.c dequantises the rows of a run's ids on the host, from the model's mapping
 * (any GGUF quantisation), and uploads them [T, C]; the table itself is never uploaded.
 *
 * Workers and the weights. One weight block per device and model, read-only after loading,
 * shared by every worker of the process (probe's sequence-parallel workers, generate's); each
 * worker has its own MpFwdCtx (a device: its own stream and handles) and its own activations.
 * Ops may be called from several host threads at once, each with its own ctx.
 *
 * Bits. bit MP_FWD_OP_x of MpFwdOps.exact: that op gives mp_fwd_ops_cpu's bits on every input;
 * tests/test_backend_ops.c checks those bit for bit and the others by normalised error
 * (max |a - ref| / max |ref|) within the per-op bounds it lists (f32 ops 1e-5, the bf16 matmul's
 * order within docs/speed.md's bounds). The data-movement and rounding ops (upload, to_host,
 * copy, zero, add, add_bias, scale, bf16_round, amax, moe_count, moe_gather, moe_scatter) are
 * exact by nature: a device gives the same bits too (compile them without contraction of a·b+c,
 * e.g. nvcc -fmad=false or __fmul_rn/__fadd_rn). The rest (matmul, norms, RoPE, the activations'
 * libm functions, the attention) may differ by f32 rounding; the maps and logits they give are
 * held to issue #36's bounds end to end (f32 maps within 1e-5 of max |score|, bf16 within the CPU
 * bf16 bounds of docs/speed.md, log-probs within 1e-4).
 *
 * Does not: decide the model's data flow (fwd.c), read the model file (fwd.c does, on the host),
 * or choose a backend (mp_fwd_ops_for).
 * Tested by: tests/test_backend_ops.c (every op of every instance built against mp_fwd_ops_cpu
 * over many shapes: bit for bit where claimed, else by normalised error; a device instance when
 * present), tests/test_model_fwd.c (a counted instance: cpu-plain's ops, each call counted, the
 * same bits as cpu-plain end to end; refusals).
 *
 * Shape legend: T tokens (rows [t0, T) of a run), C hidden, K inner size, O outputs, NH query
 * heads, NKV key/value heads, HS head dim, R rotary dims, E experts, KE chosen experts a row, FF
 * MLP size, V vocabulary, ldt rows of keys/values/scores (T, or max_seq for a key/value cache).
 */
#ifndef MP_FWD_BACKEND_H
#define MP_FWD_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"        /* MpErr */
#include "model/fwd_check.h" /* MpFwdCheck: the scores check the attention op records */

/* The interface version a plugin is built against (MpFwdOps.abi); a table of another version is
 * refused with one line. Bumped when a member or a contract below changes. */
#define MP_FWD_OPS_ABI 1

/* One worker's handle on an instance (MpFwdOps.open): never defined here — each instance casts it
 * to its own state (CPU: the matmul kernel and its arithmetic; a device: stream, BLAS handle,
 * host staging). */
typedef struct MpFwdCtx MpFwdCtx;

/* How a Linear weight's values are held. */
typedef enum MpFwdDtype {
    MP_FWD_DT_F32 = 0, /* f32 (f32 and plain compute) */
    MP_FWD_DT_BF16,    /* bf16, rounded to nearest even once at upload (bf16 compute) */
} MpFwdDtype;
#define MP_FWD_DT_BIT(d) (1u << (d))

/* An opaque matrix handle: a Linear weight W [O, K] (HF's [out, in]) in the instance's layout.
 * fwd.c sets out, in and dtype, asks weight_plan for the bytes, points data into its weight block
 * and fills it with weight_upload; only the instance reads data. */
typedef struct MpFwdWeight {
    void *data;      /* [weight_plan bytes] the instance's memory, its layout */
    int64_t out, in; /* O, K */
    int dtype;       /* MpFwdDtype */
    int layout;      /* the instance's own tag, set by weight_plan (CPU: MpFwdLayout — 0 = panels [ceil(O/32)][K][32], 1 = the AMX tiles of fwd_amx.h for bf16 weights of the amx kernels) */
} MpFwdWeight;

/* ---------------------------------------------------------------- taps of the attention */

/* A layer's pre-softmax scores [NH, T, T] (row = query i, column = key j; -inf where masked), or
 * its post-softmax probabilities (0 where masked), whole. */
typedef void (*MpFwdHook)(void *ctx, int layer, const float *scores, int n_heads, int T);

/* Row blocks of a layer's pre-softmax scores, seen inside the attention pass while they are still
 * in cache (the probe's map sums: one pass over the scores instead of a second one over
 * [NH, T, T]). rows(): rows [i0, i1) of every head are final in scores [NH, T, T] (row stride T,
 * -inf where masked); the blocks of a layer are disjoint, cover [0, T) and come in no fixed order
 * and of no fixed size, up to `workers` at once from different threads (worker in [0, workers)
 * names the caller's scratch). done(): every row of the layer has been seen; called before the
 * next layer starts. */
typedef struct MpFwdRowsHook {
    void (*rows)(void *ctx, int layer, const float *scores, int n_heads, int T, int i0, int i1, int worker);
    void (*done)(void *ctx, int layer);
    void *ctx;
    int workers; /* >= 1 */
} MpFwdRowsHook;

/* The reduced map of rows [i0, i1): hs [i1 - i0, T] doubles (row stride T), hs[(i - i0)·T + j] =
 * Σ_h (double) score (h, i, j) in ascending h from 0.0, written for the keys row i sees (j <= i
 * under the causal mask, else all; -inf where a sliding window masks), not beyond. */
typedef void (*MpFwdHeadsumFn)(void *ctx, int layer, const double *hs, int T, int i0, int i1, int worker);

/* What one layer's attention hands over (fwd.c asks for it per layer, before the op runs; a tap
 * not asked for costs nothing). All consumers are host functions; what they are handed is:
 *   - device 0: host memory. The CPU instances hand their own buffers in place, block by block
 *     (16 rows, fused into the pass). A device instance computes the whole layer, copies what is
 *     asked to host staging of its own and calls each consumer once, as one block [0, T) with
 *     worker 0;
 *   - device 1: the instance's memory, valid until the consumer returns, the work before it done
 *     or queued on the ctx's stream (MpFwd.ctx: the consumer may queue its own work there): a device
 *     accumulator (issue #36) adds the map on the device, in float64 and a fixed order, and only
 *     its sums ever come back. The whole layer as one block [0, T), worker 0: hs is then the
 *     [T, T] head-sum map of the layer, the scores [NH, T, T] and the probabilities [NH, T, T]
 *     stay where the instance made them.
 * At most one of rows_hook (rows and/or headsum) and scores is set. */
typedef struct MpFwdTaps {
    MpFwdRowsHook rows_hook; /* rows: every head's pre-softmax rows (rows may be NULL with headsum) */
    MpFwdHeadsumFn headsum;  /* the head-sum map (ctx, done, workers: rows_hook's); needs the op's tap_hs */
    MpFwdHook scores;        /* the layer's whole pre-softmax scores, once they are all made */
    void *scores_ctx;
    MpFwdHook probs;         /* the layer's whole post-softmax probabilities, once p·V is done */
    void *probs_ctx;
    int device;              /* 1: the consumers read the instance's memory (above) */
} MpFwdTaps;

/* ---------------------------------------------------------------- arguments of the layer ops */

/* qk_prepare: rows [t0, T) of one layer's projections, after their biases. */
typedef struct MpFwdQKV {
    float *q;                     /* [T, NH*HS] rows [t0, T): per-head q norm, then RoPE, in place */
    float *k;                     /* [T, NKV*HS] rows [t0, T): the same with k norm */
    const float *v;               /* [T, NKV*HS] rows [t0, T) */
    void *kp;                     /* NKV heads × kv_head bytes: keys of positions [t0, T), the instance's layout */
    float *vh;                    /* [NKV, ldt, HS]: values of positions [t0, T), contiguous per kv head */
    size_t kv_head;               /* bytes of one kv head's keys: kv_bytes(HS, ldt) */
    const float *q_norm, *k_norm; /* RMSNorm weights: [HS] per head, or [NH*HS], [NKV*HS] over the whole row
                                     when norm_whole (olmo2); NULL: none */
    const float *cos, *sin;       /* [>= T, R/2] RoPE table rows by position (rope_table); NULL: this layer has
                                     no RoPE (--no-rope, a NoPE layer) */
    int t0, T, ldt, NH, NKV, HS, R;
    int norm_whole;
    double eps;                   /* the q/k norms' epsilon */
} MpFwdQKV;

/* attention: rows [t0, T) of one layer's o = softmax(mask(softcap(q·kᵀ · scale))) · v per head,
 * query head h reading kv head h / (NH / NKV). */
typedef struct MpFwdAttn {
    float *o;           /* [T, NH*HS] rows [t0, T) written */
    float *s;           /* [NH, ldt, ldt] scratch: rows [t0, T) get the scores, then the probabilities (row i:
                           keys [0, causal ? i + 1 : T) then 0, or, cached, keys past i left as they are) */
    const float *q;     /* [T, NH*HS] rows [t0, T) (qk_prepare's) */
    const void *kp;     /* NKV heads × kv_head bytes: keys of positions [0, T) (qk_prepare's) */
    const float *vh;    /* [NKV, ldt, HS] values of positions [0, T) */
    size_t kv_head;     /* bytes of one kv head's keys */
    void *tap_hs;       /* scratch of the head-sum tap: tap_bytes(NH, ldt, workers) bytes; NULL without it */
    MpFwdCheck *chk;    /* host: when chk->scores, the first non-finite visible score (before cap and window;
                           smallest row, then head) is recorded in chk->row, chk->head by return */
    int layer, t0, T, ldt, NH, NKV, HS;
    int causal;         /* 1: keys j > i masked */
    int window;         /* > 0: keys with i - j >= window masked too, and j - i >= window without the causal
                           mask (a sliding-window layer of a sequence longer than its window); 0: none */
    float scale;        /* 1/sqrt(HS), or gemma's query_pre_attn_scalar */
    float softcap;      /* gemma2: visible scores = cap · tanh(s / cap) before the window; 0: none */
    int cached;         /* 1: a key/value-cache run (mp_fwd_extend): no taps */
    int scores_only;    /* 1: stop once the scores and their taps are done (o not written) */
} MpFwdAttn;

/* amax: one tensor to reduce. */
typedef struct MpFwdSpan {
    const float *x; /* [n] */
    size_t n;
} MpFwdSpan;

/* ---------------------------------------------------------------- the ops table */

/* Op ids: the bits of MpFwdOps.exact, and the rows of tests/test_backend_ops.c. New ids at the end. */
typedef enum MpFwdOpId {
    MP_FWD_OP_MATMUL = 0, MP_FWD_OP_RMSNORM, MP_FWD_OP_LAYERNORM, MP_FWD_OP_ROPE_TABLE, MP_FWD_OP_QK_PREPARE,
    MP_FWD_OP_ATTENTION, MP_FWD_OP_BF16_ROUND, MP_FWD_OP_SWIGLU, MP_FWD_OP_GEGLU, MP_FWD_OP_GELU,
    MP_FWD_OP_SOFTCAP, MP_FWD_OP_SCALE, MP_FWD_OP_ADD_BIAS, MP_FWD_OP_ADD, MP_FWD_OP_COPY, MP_FWD_OP_ZERO,
    MP_FWD_OP_AMAX, MP_FWD_OP_MOE_ROUTE, MP_FWD_OP_MOE_COUNT, MP_FWD_OP_MOE_GATHER, MP_FWD_OP_MOE_SCATTER,
    MP_FWD_OP_MOE_SHARED_MIX,
    MP_FWD_OP_COUNT
} MpFwdOpId;
#define MP_FWD_OP_BIT(id) (UINT64_C(1) << (id))

typedef struct MpFwdOps {
    unsigned abi;     /* MP_FWD_OPS_ABI */
    const char *name; /* "cpu", "cpu-plain", "cuda" ... */
    int host_memory;  /* 1: the instance's memory is host memory: what the host reads is read in place */
    uint64_t exact;   /* MP_FWD_OP_BIT(id) for each op that gives mp_fwd_ops_cpu's bits (above) */
    unsigned dtypes;  /* MP_FWD_DT_BIT(d) for each MpFwdDtype its weights may hold: mp_fwd_init refuses a
                         compute mode whose dtype is not here, with one line */

    /* ---- context and storage */
    /* A worker's handle: device "cpu", "cuda", "cuda:1" ... (the --device string; NULL: the default
     * device); kernel: the resolved MpFwdKernel (fwd_kernels.h; a device instance may ignore it).
     * NULL and one line in e when it cannot be had (no device, no driver). */
    MpFwdCtx *(*open)(const char *device, int kernel, MpErr *e);
    void (*close)(MpFwdCtx *c); /* accepts NULL */
    /* bytes (> 0) of the instance's memory, 64-byte aligned; NULL when they cannot be had. A block
     * may be used from every ctx of the same instance and device (the shared weights). */
    void *(*alloc)(MpFwdCtx *c, size_t bytes);
    void (*free)(MpFwdCtx *c, void *p); /* accepts NULL */
    /* dst [bytes] (instance) = src [bytes] (host), and host dst = instance src (waits for the work
     * before it). Host buffers are the caller's: no alignment asked. */
    void (*upload)(MpFwdCtx *c, void *dst, const void *src, size_t bytes);
    void (*to_host)(MpFwdCtx *c, void *dst, const void *src, size_t bytes);
    /* Waits until every op called on c has finished: MP_OK, or MP_ERR and one line in e when one
     * of them failed on the device (ops return nothing; their errors surface here: fwd.c calls it
     * at the end of every run). */
    int (*synchronize)(MpFwdCtx *c, MpErr *e);

    /* ---- weights: opaque handles */
    /* For w->out, w->in, w->dtype (set): sets w->layout and returns the bytes of w->data (a multiple
     * of 64) for the variant `kernel` (what open gets; the memory estimate passes the same). No
     * ctx: the memory estimate runs before any device is opened. */
    size_t (*weight_plan)(MpFwdWeight *w, int kernel);
    /* Rows [r0, r0 + n) of W, given as host f32 rows [n, K] (bf16-valued when the checkpoint is
     * bf16), into w's storage: rounded to bf16 (nearest even) when w->dtype is bf16, else exactly.
     * The calls of one weight give disjoint ranges in ascending order that end at O; the weight is
     * complete (padding included) after the one ending at O. */
    void (*weight_upload)(MpFwdCtx *c, MpFwdWeight *w, const float *rows, int64_t r0, int64_t n);

    /* ---- the layer's arithmetic */
    /* y [T, O] (row stride ldy) = x [T, K] (row stride ldx) · Wᵀ, f32 accumulation (bf16 weights:
     * x is bf16-valued in bf16 compute; products exact in f32). No aliasing of y and x. */
    void (*matmul)(MpFwdCtx *c, float *y, int64_t ldy, const float *x, int64_t ldx, const MpFwdWeight *w, int64_t T);
    /* Rows of n: y [rows, n] = RMSNorm(x) · w (w NULL: no weight; mean of x² in double on the CPU),
     * LayerNorm with bias b (gptneox; mean and variance in double; w, b may be NULL). y may alias x. */
    void (*rmsnorm)(MpFwdCtx *c, float *y, const float *x, const float *w, int64_t rows, int n, double eps);
    void (*layernorm)(MpFwdCtx *c, float *y, const float *x, const float *w, const float *b, int64_t rows, int n, double eps);
    /* cos, sin [T, R/2] of positions 0..T-1: cos/sin((float)pos · inv_freq[i]) · attn, inv_freq [R/2]
     * uploaded (llama3/linear/longrope tables and gemma3's local base are the loader's inv_freq). */
    void (*rope_table)(MpFwdCtx *c, float *cos, float *sin, const float *inv_freq, int R, int T, double attn);
    /* The q/k norms (rmsnorm's arithmetic), RoPE (HF rotate-half on the first R dims of every head)
     * of q and k, the keys packed into kp and the values copied to vh, rows [t0, T) (MpFwdQKV). */
    void (*qk_prepare)(MpFwdCtx *c, const MpFwdQKV *a);
    /* One layer's attention, all heads, rows [t0, T) (MpFwdAttn): scores, soft-cap, window, the
     * taps asked (tp; NULL: none), softmax, p·V. kv_bytes (HS, ldt): bytes of one kv head's keys in
     * this instance's layout; tap_bytes (NH, ldt, workers): the head-sum tap's scratch. */
    void (*attention)(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp);
    size_t (*kv_bytes)(int HS, int ldt);
    size_t (*tap_bytes)(int NH, int ldt, int workers);

    /* ---- elementwise (n elements of a whole tensor; out may alias an input) */
    /* x [rows, n] (row stride ld) rounded to bf16 values (bf16 compute's Linear inputs) */
    void (*bf16_round)(MpFwdCtx *c, float *x, int64_t ld, int64_t rows, int64_t n);
    void (*swiglu)(MpFwdCtx *c, float *out, const float *g, const float *u, size_t n); /* silu(g) · u */
    void (*geglu)(MpFwdCtx *c, float *out, const float *g, const float *u, size_t n);  /* gelu_tanh(g) · u (gemma) */
    void (*gelu)(MpFwdCtx *c, float *out, const float *x, size_t n);                   /* exact GELU (gptneox) */
    void (*softcap)(MpFwdCtx *c, float *x, size_t n, float cap);                       /* cap · tanh(x / cap) */
    void (*scale)(MpFwdCtx *c, float *x, size_t n, float s);                           /* x · s (gemma's embedding) */
    /* y [rows, n] (row stride ld) += b [n] (the Linear biases) */
    void (*add_bias)(MpFwdCtx *c, float *y, int64_t ld, const float *b, int64_t n, int64_t rows);
    void (*add)(MpFwdCtx *c, float *x, const float *y, size_t n); /* x += y (the residual stream) */
    void (*copy)(MpFwdCtx *c, float *dst, const float *src, size_t n); /* no overlap */
    void (*zero)(MpFwdCtx *c, float *x, size_t n);

    /* ---- reductions to the host */
    /* out [n] (host) = for each span, the largest |x[i]| as its IEEE bits without the sign
     * (>= 0x7f800000: a NaN or ±Inf in it); 0 for an empty span. The overflow checks (fwd_check.h):
     * the host reads a tensor only when one fails. */
    void (*amax)(MpFwdCtx *c, uint32_t *out, const MpFwdSpan *t, int n);

    /* ---- mixture of experts: host-driven by one small copy per layer; all five NULL in an
     * instance without them (mp_fwd_init refuses MoE models then, with one line) */
    /* n rows: p [n, E] router logits -> probabilities in place; sel, w [n, KE] the chosen experts,
     * most probable first, and their weights (mp_fwd_moe_route's rules) */
    void (*moe_route)(MpFwdCtx *c, float *p, float *w, int32_t *sel, int n, int E, int KE, int norm_topk);
    /* cnt [E] (host) = how many entries of sel [n, KE] name each expert */
    void (*moe_count)(MpFwdCtx *c, int32_t *cnt, const int32_t *sel, int n, int KE, int E);
    /* expert j's entries of sel [n, KE]: rows [cnt] = t·KE + k (t, then k, ascending), xg [cnt, C] =
     * those rows of x [n, C] (cnt: moe_count's) */
    void (*moe_gather)(MpFwdCtx *c, float *xg, int32_t *rows, const float *x, const int32_t *sel, int j, int n, int KE, int C);
    /* y [n, C] row rows[i] / KE += o [cnt, C] row i times w [n·KE] at rows[i], for i ascending */
    void (*moe_scatter)(MpFwdCtx *c, float *y, const float *o, const int32_t *rows, const float *w, int cnt, int KE, int C);
    /* qwen2moe's shared expert: sl [n] = x [n, C] · gate [C] (f32, in order); y [n, C] += (float)
     * sigmoid(sl) (in double) · o [n, C] */
    void (*moe_shared_mix)(MpFwdCtx *c, float *y, float *sl, const float *o, const float *x, const float *gate, int n, int C);
} MpFwdOps;

extern const MpFwdOps mp_fwd_ops_cpu;
extern const MpFwdOps mp_fwd_ops_cpu_plain;

/* The instance for a device: device NULL or "cpu" gives mp_fwd_ops_cpu, or mp_fwd_ops_cpu_plain
 * when plain (MP_FWD_COMPUTE_F32_PLAIN, fwd.h). "cuda[:N]": the instance of its plugin
 * (fwd_plugin.h), or NULL and one line in e (no plugin: "not built: make CUDA=1"; no driver or
 * device; another interface version ...); names no backend knows: unknown, and the known ones. */
const MpFwdOps *mp_fwd_ops_for(const char *device, int plain, MpErr *e);

/* MP_OK when --device NAME can run here (mp_fwd_ops_for's rules), else MP_ERR and its line. */
int mp_fwd_device_check(const char *device, MpErr *e);

/* "matmul", "rmsnorm", ... for op id `id` (tests and messages); "?" when out of range. */
const char *mp_fwd_op_name(int id);

#endif
