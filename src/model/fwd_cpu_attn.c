/* fwd_cpu_attn.c — the attention op of the CPU instances (MpFwdOps.attention, fwd_backend.h):
 * one layer, every head, rows [t0, T), with its taps, in blocks of 16 query rows.
 *
 * Implements, in data-flow order: the scores of a block of one head (the instance's score kernel
 * with scale and causal mask fused, the scores check, gemma2's soft-cap, a sliding window), the
 * softmax and p·V of a block, the one-pass loop that the row taps ask for (every head of a block
 * of rows, then the rows tap and the head-sum tap while those rows are in cache, then softmax and
 * p·V), and the two-pass loop without them (all scores, the whole-layer scores tap, then softmax
 * and p·V); the probabilities tap at the end. Blocks run in parallel (OpenMP) above FWD_PAR_MIN;
 * the same bits for any thread count (every block writes its own rows).
 * Does not: project, rotate or pack (qk_prepare in fwd_cpu.c), or choose the taps (fwd.c).
 * Tested by: tests/test_backend_ops.c (against cpu, taps included), tests/test_probe_rows.c (the
 * one-pass and two-pass loops give the same sums), tests/test_model_fwd.c.
 *
 * Shape legend: T tokens, NH query heads, NKV key/value heads, HS head dim, ldt rows of keys,
 * values and scores.
 */
#include "model/fwd_cpu.h"

#include <math.h>

#include "core/util.h"     /* mp_thread_num */
#include "model/fwd_par.h" /* FWD_PAR_FOR2, FWD_PAR_MIN */

#define ATTN_ROWS 16 /* query rows per parallel work item */

/* ================================================================ layouts */

size_t mp_fwd_cpu_kv_bytes(int HS, int ldt) { return sizeof(float) * mp_fwd_attn_keys_floats(HS, ldt); }

/* The head-sum tap's scratch: one [ATTN_ROWS, ldt] block of doubles per worker. */
size_t mp_fwd_cpu_tap_bytes(int NH, int ldt, int workers) {
    (void)NH;
    return sizeof(double) * (size_t)(workers > 0 ? workers : 0) * ATTN_ROWS * (size_t)ldt;
}

/* What every block of one layer needs. */
typedef struct CpuAttn {
    const MpFwdAttn *a;
    const MpFwdCpuArith *ar;
    const MpFwdTaps *tp;
    int rep;       /* query heads per kv head */
    int64_t ldq;   /* NH * HS */
    size_t kpf;    /* floats of one kv head's keys */
    double work;   /* multiply-adds of the layer (FWD_PAR's threshold) */
} CpuAttn;

/* ================================================================ one block of one head */

/* Head h's scores of rows [i0, i1): the kernel (scale and causal mask fused), the check, then
 * gemma2's soft-cap and a sliding window. */
static void attn_scores_rows(const CpuAttn *x, int h, int i0, int i1) {
    const MpFwdAttn *a = x->a;
    float *sh = a->s + (size_t)h * a->ldt * a->ldt;
    const float *kp = (const float *)a->kp + (size_t)(h / x->rep) * x->kpf;
    x->ar->attn_scores(sh, a->q + (int64_t)h * a->HS, x->ldq, kp, a->HS, a->ldt, a->causal, a->scale, i0, i1);
    if (a->chk && a->chk->scores) mp_fwd_check_scores_rows(a->chk, sh, a->ldt, a->T, a->causal, h, i0, i1); /* before the cap hides an Inf */
    if (a->softcap > 0) /* gemma2: the unmasked scores soft-capped; the taps see what the softmax gets */
        for (int i = i0; i < i1; i++) mp_fwd_softcap(sh + (size_t)i * a->ldt, a->causal ? (size_t)i + 1 : (size_t)a->T, a->softcap);
    if (a->window) /* after the cap, as HF adds its mask; -inf like the causal mask's (HF masking_utils, llama.cpp is_masked_swa) */
        for (int i = i0; i < i1; i++) {
            float *row = sh + (size_t)i * a->ldt;
            for (int j = 0; j <= i - a->window; j++) row[j] = -INFINITY;
            if (!a->causal)
                for (int j = i + a->window; j < a->T; j++) row[j] = -INFINITY;
        }
}

/* Head h, rows [i0, i1): softmax in place, then p·v into o while the rows are in cache (a cached
 * run leaves the masked tail of a row alone: never read). */
static void attn_mix_rows(const CpuAttn *x, int h, int i0, int i1) {
    const MpFwdAttn *a = x->a;
    float *sh = a->s + (size_t)h * a->ldt * a->ldt;
    for (int i = i0; i < i1; i++) x->ar->softmax_row(sh + (size_t)i * a->ldt, a->causal ? i + 1 : a->T, a->cached ? i + 1 : a->T);
    x->ar->attn_mix(a->o + (int64_t)h * a->HS, x->ldq, sh, a->vh + (size_t)(h / x->rep) * a->ldt * a->HS, a->HS, a->HS, a->ldt,
                    a->causal, i0, i1);
}

/* ================================================================ one pass, with the row taps */

/* One block of rows [i0, i1) through every head: scores, the rows tap, the head-sum tap (summed
 * into worker's block of the scratch, heads ascending, then handed over), then (unless
 * scores_only) softmax and p·v. */
static void attn_block(const CpuAttn *x, int i0, int i1, int worker) {
    const MpFwdAttn *a = x->a;
    const MpFwdRowsHook *rh = &x->tp->rows_hook;
    for (int h = 0; h < a->NH; h++) attn_scores_rows(x, h, i0, i1);
    if (rh->rows) rh->rows(rh->ctx, a->layer, a->s, a->NH, a->T, i0, i1, worker);
    if (x->tp->headsum) {
        double *hs = (double *)a->tap_hs + (size_t)worker * ATTN_ROWS * (size_t)a->T;
        mp_fwd_attn_headsum(hs, a->s, a->NH, a->T, a->causal, i0, i1);
        x->tp->headsum(rh->ctx, a->layer, hs, a->T, i0, i1, worker);
    }
    if (!a->scores_only)
        for (int h = 0; h < a->NH; h++) attn_mix_rows(x, h, i0, i1);
}

/* Blocks of ATTN_ROWS rows, each through every head (a row tap needs a row's every head before its
 * softmax), in parallel from the last (the longest rows under the causal mask) so the threads
 * finish together; one region per layer, the taps' workers as its threads (inside it the
 * worker's number is its thread's). */
static void attn_by_rows(const CpuAttn *x, int nb) {
    const MpFwdAttn *a = x->a;
    const MpFwdRowsHook *rh = &x->tp->rows_hook;
#pragma omp parallel for schedule(dynamic, 1) num_threads(rh->workers) if (rh->workers > 1 && x->work > FWD_PAR_MIN && mp_fwd_top_level())
    for (int k = 0; k < nb; k++) {
        const int i0 = a->t0 + (nb - 1 - k) * ATTN_ROWS, i1 = i0 + ATTN_ROWS < a->T ? i0 + ATTN_ROWS : a->T;
        attn_block(x, i0, i1, mp_thread_num());
    }
    rh->done(rh->ctx, a->layer);
}

/* ================================================================ two passes */

/* 1. scores of every (head, block), then the whole-layer scores tap; 2. per (head, block) softmax
 * and p·v while those rows are in cache. */
static void attn_two_pass(const CpuAttn *x, int nb) {
    const MpFwdAttn *a = x->a;
    FWD_PAR_FOR2(x->work,
    for (int h = 0; h < a->NH; h++)
        for (int b = 0; b < nb; b++) {
            const int i0 = a->t0 + b * ATTN_ROWS, i1 = i0 + ATTN_ROWS < a->T ? i0 + ATTN_ROWS : a->T;
            attn_scores_rows(x, h, i0, i1);
        });
    if (x->tp && x->tp->scores) x->tp->scores(x->tp->scores_ctx, a->layer, a->s, a->NH, a->T);
    if (a->scores_only) return;
    FWD_PAR_FOR2(x->work,
    for (int h = 0; h < a->NH; h++)
        for (int b = 0; b < nb; b++) {
            const int i0 = a->t0 + b * ATTN_ROWS, i1 = i0 + ATTN_ROWS < a->T ? i0 + ATTN_ROWS : a->T;
            attn_mix_rows(x, h, i0, i1);
        });
}

/* ================================================================ the op */

void mp_fwd_cpu_attention(MpFwdCtx *c, const MpFwdAttn *a, const MpFwdTaps *tp) {
    const CpuAttn x = {
        .a = a, .ar = mp_fwd_cpu_ctx(c)->ar, .tp = tp, .rep = a->NH / a->NKV, .ldq = (int64_t)a->NH * a->HS,
        .kpf = mp_fwd_attn_keys_floats(a->HS, a->ldt), .work = (double)a->NH * (a->T - a->t0) * a->T * a->HS,
    };
    const int nb = (a->T - a->t0 + ATTN_ROWS - 1) / ATTN_ROWS;
    const int rows = tp && !a->cached && (tp->rows_hook.rows || tp->headsum);
    if (rows) attn_by_rows(&x, nb);
    else attn_two_pass(&x, nb);
    /* POST-SOFTMAX: a->s [NH, T, T] holds the layer's attention probabilities of this sequence
     * (rows sum to 1; exact 0 where masked) until the next layer overwrites them */
    if (!a->scores_only && !a->cached && tp && tp->probs) tp->probs(tp->probs_ctx, a->layer, a->s, a->NH, a->T);
}
