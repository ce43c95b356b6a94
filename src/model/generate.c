/* generate.c — see generate.h. Sections: the sampler, one sequence, the run. */
#include "model/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/rng.h"     /* MpRng: Philox stream per sequence */
#include "core/util.h"    /* mp_time_now, mp_thread_num */
#include "kernels/vexp.h" /* mp_vexp: exp in double, vectorisable */
#include "model/fwd.h"    /* MpFwd, mp_fwd_extend */

/* ================================================================ the sampler */

const char *mp_gen_sampler_check(const MpGenSampler *s) {
    if (!(s->temperature >= 0) || !isfinite(s->temperature)) return "temperature must be a finite number >= 0";
    if (s->top_k < 0) return "top-k must be >= 0";
    if (!(s->top_p > 0 && s->top_p <= 1)) return "top-p must lie in (0, 1]";
    return NULL;
}

int mp_gen_work_init(MpGenWork *w, int V, MpErr *e) {
    memset(w, 0, sizeof *w);
    if (V < 1) return mp_err_set(e, "vocabulary of %d ids", V);
    w->p = mp_try_malloc((size_t)V * sizeof *w->p);
    w->idx = mp_try_malloc((size_t)V * sizeof *w->idx);
    if (!w->p || !w->idx) {
        mp_gen_work_free(w);
        return mp_err_set(e, "out of memory for a sampler over %d ids", V);
    }
    w->V = V;
    return MP_OK;
}

void mp_gen_work_free(MpGenWork *w) {
    free(w->p);
    free(w->idx);
    memset(w, 0, sizeof *w);
}

/* Sorts idx [n] by p[idx] descending, ties by id ascending (insertion into runs, then merges
 * would be faster; V is small and cuts are optional, so a plain heap sort keeps it simple). */
static int gen_before(const double *p, int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); }

static void gen_sift(int32_t *idx, const double *p, int root, int n) {
    for (;;) {
        int c = 2 * root + 1;
        if (c >= n) return;
        /* a min-heap in the ranking order: the root is the element ranked last */
        if (c + 1 < n && gen_before(p, idx[c], idx[c + 1])) c++;
        if (!gen_before(p, idx[root], idx[c])) return;
        const int32_t t = idx[root];
        idx[root] = idx[c];
        idx[c] = t;
        root = c;
    }
}

static void gen_rank(int32_t *idx, const double *p, int n) {
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = n / 2 - 1; i >= 0; i--) gen_sift(idx, p, i, n);
    for (int end = n - 1; end > 0; end--) {
        const int32_t t = idx[0];
        idx[0] = idx[end];
        idx[end] = t;
        gen_sift(idx, p, 0, end);
    }
}

/* Zeroes p of every id outside the top-k / top-p set (p unnormalised, > 0 for every id). */
static void gen_cut(const MpGenSampler *s, MpGenWork *w) {
    const int V = w->V;
    int keep = s->top_k > 0 && s->top_k < V ? s->top_k : V;
    if (keep == V && s->top_p >= 1) return;
    gen_rank(w->idx, w->p, V);
    if (s->top_p < 1) {
        double total = 0, cum = 0;
        for (int r = 0; r < keep; r++) total += w->p[w->idx[r]];
        for (int r = 0; r < keep; r++) {
            cum += w->p[w->idx[r]];
            if (cum >= s->top_p * total) {
                keep = r + 1;
                break;
            }
        }
    }
    for (int r = keep; r < V; r++) w->p[w->idx[r]] = 0.0;
}

int mp_gen_sample(const float *logits, const MpGenSampler *s, double u, MpGenWork *w, double *nll) {
    const int V = w->V;
    int best = 0;
    for (int i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    const double mx = logits[best];
    int pick = best;
    double z1 = -1; /* Σ exp(logit − max) at temperature 1, when computed on the way */
    if (s->temperature > 0) {
        const double inv_t = 1.0 / s->temperature;
        for (int i = 0; i < V; i++) w->p[i] = mp_vexp(((double)logits[i] - mx) * inv_t);
        gen_cut(s, w);
        double z = 0;
        for (int i = 0; i < V; i++) z += w->p[i];
        if (s->temperature == 1 && s->top_k == 0 && s->top_p >= 1) z1 = z;
        /* inverse CDF over ascending ids; rounding can leave target >= the last partial sum:
         * then the last id with mass */
        const double target = u * z;
        double cum = 0;
        for (int i = 0; i < V; i++) {
            if (w->p[i] <= 0) continue;
            cum += w->p[i];
            pick = i;
            if (target < cum) break;
        }
    }
    if (nll) {
        if (z1 < 0) {
            z1 = 0;
            for (int i = 0; i < V; i++) z1 += mp_vexp((double)logits[i] - mx);
        }
        *nll = mx + log(z1) - (double)logits[pick];
    }
    return pick;
}

/* ================================================================ one sequence */

typedef struct GenWorker {
    MpFwd f;
    MpGenWork w;
} GenWorker;

/* row [L] <- prompt, then sampled ids; *nll gets Σ −log p of the sampled ones. */
static int gen_sequence(GenWorker *g, int32_t *row, int64_t seq, const MpGenConfig *c, const int32_t *prompt, int np,
                        double *nll, MpErr *e) {
    const int L = c->len, V = g->f.V;
    MpRng rng;
    mp_rng_init(&rng, c->seed, (uint64_t)seq);
    memcpy(row, prompt, (size_t)np * sizeof *row);
    if (mp_fwd_extend(&g->f, row, 0, np, e) != MP_OK) return MP_ERR;
    double acc = 0;
    for (int t = np; t < L; t++) {
        double one = 0;
        const double u = mp_rng_uniform(&rng);
        row[t] = mp_gen_sample(g->f.logits + (size_t)(t - 1) * V, &c->sampler, u, &g->w, &one);
        acc += one;
        if (t + 1 < L && mp_fwd_extend(&g->f, row, t, t + 1, e) != MP_OK) return MP_ERR;
    }
    *nll = acc;
    return MP_OK;
}

/* ================================================================ the run */

static int bad_seen(const int *flag) {
    int v;
#pragma omp atomic read
    v = *flag;
    return v;
}

static int gen_check(const MpModel *m, const MpGenConfig *c, int np, const int32_t *prompt, MpErr *e) {
    const char *bad = mp_gen_sampler_check(&c->sampler);
    if (bad) return mp_err_set(e, "%s", bad);
    if (c->n < 1) return mp_err_set(e, "%lld sequences asked for (at least 1)", (long long)c->n);
    if (c->len < 2 || c->len > (1 << 20)) return mp_err_set(e, "sequence length %d out of range (2..%d)", c->len, 1 << 20);
    if (np < 1 || np >= c->len) return mp_err_set(e, "a prompt of %d tokens leaves no room in %d", np, c->len);
    for (int i = 0; i < np; i++)
        if (prompt[i] < 0 || prompt[i] >= m->vocab)
            return mp_err_set(e, "prompt id %d at position %d is outside the vocabulary [0, %d)", prompt[i], i, m->vocab);
    size_t cells;
    if (mp_size_mul((size_t)c->n, (size_t)c->len, &cells) != MP_OK || cells > ((size_t)1 << 34))
        return mp_err_set(e, "%lld x %d tokens is too many", (long long)c->n, c->len);
    return MP_OK;
}

int mp_gen_run(MpGenResult *r, MpModel *m, const MpGenConfig *c, MpErr *e) {
    memset(r, 0, sizeof *r);
    const double t_start = mp_time_now();
    int32_t bos = m->bos_id;
    const int32_t *prompt = c->prompt ? c->prompt : &bos;
    const int np = c->prompt ? c->n_prompt : 1;
    if (!c->prompt && m->bos_id < 0) return mp_err_set(e, "%s: the model names no BOS token; give a prompt", m->path);
    if (gen_check(m, c, np, prompt, e) != MP_OK) return MP_ERR;
    if (mp_model_check_finite(m, m->n_layers, e) != MP_OK) return MP_ERR; /* NaN weights: refused, not NaN samples */
    int nt;
    if (mp_threads_resolve(c->threads, "threads", &nt, e) != MP_OK) return MP_ERR;
#ifndef _OPENMP
    nt = 1;
#endif
    const MpFwdConfig fc = {.n_layers = m->n_layers, .max_seq = c->len, .causal = 1, .rope = 1, .logits = 1,
                            .compute = c->compute, .kv_cache = 1, .device = c->device, .logits_last = 1};
    uint64_t wbytes = 0, abytes = 0;
    mp_fwd_plan_bytes(m, &fc, &wbytes, &abytes);
    int mode = c->parallel;
    if (mode == MP_GEN_PARALLEL_AUTO) mode = wbytes < MP_GEN_SMALL_BYTES ? MP_GEN_PARALLEL_SEQUENCES : MP_GEN_PARALLEL_WITHIN;
    const int nw = mode == MP_GEN_PARALLEL_SEQUENCES ? (int)(c->n < nt ? c->n : nt) : 1;
    r->ids = mp_try_malloc((size_t)c->n * (size_t)c->len * sizeof *r->ids);
    double *nll = mp_try_calloc((size_t)c->n, sizeof *nll);
    GenWorker *g = mp_try_calloc((size_t)nw, sizeof *g);
    if (!r->ids || !nll || !g) {
        free(nll);
        free(g);
        mp_gen_result_free(r);
        return mp_err_set(e, "out of memory for %lld x %d generated ids", (long long)c->n, c->len);
    }
    int rc = MP_OK;
    for (int k = 0; k < nw && rc == MP_OK; k++) /* one copy of the weights: workers 1.. share worker 0's */
        if ((k ? mp_fwd_init_worker(&g[k].f, &g[0].f, e) : mp_fwd_init(&g[k].f, m, &fc, e)) != MP_OK ||
            mp_gen_work_init(&g[k].w, m->vocab, e) != MP_OK)
            rc = MP_ERR;
    int64_t done = 0;
    int failed = 0;
    MpErr first;
    first.msg[0] = '\0';
#pragma omp parallel num_threads(nw) if (nw > 1 && rc == MP_OK)
    {
        const int tid = mp_thread_num();
        MpErr te;
#pragma omp for schedule(dynamic, 1)
        for (int64_t i = 0; i < c->n; i++) {
            if (bad_seen(&failed) || rc != MP_OK) continue;
            if (gen_sequence(&g[tid], r->ids + (size_t)i * c->len, i, c, prompt, np, &nll[i], &te) != MP_OK) {
#pragma omp critical(mp_gen_error)
                {
                    if (!bad_seen(&failed)) first = te;
#pragma omp atomic write
                    failed = 1;
                }
                continue;
            }
#pragma omp critical(mp_gen_progress)
            {
                done++;
                if (c->progress) c->progress(c->progress_ctx, done, c->n);
            }
        }
    }
    for (int k = nw - 1; k >= 0; k--) { /* worker 0 last: it owns the weights */
        mp_gen_work_free(&g[k].w);
        mp_fwd_free(&g[k].f);
    }
    free(g);
    if (rc == MP_OK && failed) rc = mp_err_set(e, "%s", first.msg);
    if (rc != MP_OK) {
        free(nll);
        mp_gen_result_free(r);
        return MP_ERR;
    }
    for (int64_t i = 0; i < c->n; i++) r->nll_sum += nll[i]; /* in sequence order: the same bits for any threads */
    free(nll);
    r->n = c->n;
    r->len = c->len;
    r->n_prompt = np;
    r->n_sampled = c->n * (int64_t)(c->len - np);
    r->parallel = mode;
    r->threads = mode == MP_GEN_PARALLEL_SEQUENCES ? nw : nt;
    r->wall_s = mp_time_now() - t_start;
    return MP_OK;
}

void mp_gen_result_free(MpGenResult *r) {
    free(r->ids);
    memset(r, 0, sizeof *r);
}

void mp_gen_log_softmax(double *lp, const float *logits, int V) {
    double mx = -INFINITY, s = 0;
    for (int i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < V; i++) s += exp((double)logits[i] - mx);
    const double lse = mx + log(s);
    for (int i = 0; i < V; i++) lp[i] = (double)logits[i] - lse;
}
