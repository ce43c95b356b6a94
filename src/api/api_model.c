/* api_model.c — what the public C API (include/maskpos.h) does with a model besides probing it:
 * its tokenizer both ways, next-token logits, sampled continuations, and the figure of a stack of
 * score maps. Each is a thin adapter over the function the command uses, so the bits are the
 * command's.
 *
 * Implements: maskpos_tokenize / maskpos_detokenize (tok/tok.h, as `maskpos tokenize`),
 * maskpos_logits (model/fwd.h + mp_gen_log_softmax, as `maskpos logits --out`), maskpos_generate
 * (model/generate.h, as `maskpos generate --out`), maskpos_plot (viz/plot.h, as `maskpos plot`),
 * maskpos_free for the buffers the first two return.
 * Does not: print, or keep state between calls (the tokenizer is loaded per call: it is small
 * next to any model, and a caller tokenizing a corpus hands it over in one string).
 * Tested by: tests/test_pyapi.c (python/tests/test_model_calls.py: equality with the commands).
 *
 * Shape legend: T tokens, V vocabulary, N sequences, L tokens per sequence, M maps.
 */
#include <stdlib.h>
#include <string.h>

#include "api/api.h"        /* MaskposModel insides, mp_api_fail */
#include "core/files.h"     /* mp_outfile_claim: an existing figure is replaced only with force */
#include "model/fwd.h"      /* MpFwd, mp_fwd_compute_parse */
#include "model/generate.h" /* mp_gen_run, mp_gen_log_softmax */
#include "tok/tok.h"        /* MpTok, mp_tok_encode, mp_tok_decode */
#include "viz/plot.h"       /* mp_plot_render, mp_plot_panels_add_stack */
#include "viz/signif.h"     /* mp_signif_note_meta: each panel's significance */

MASKPOS_API void maskpos_free(void *p) { free(p); }

/* ================================================================ tokenizer */

MASKPOS_API int maskpos_tokenize(const char *tokenizer, const char *text, int64_t len, int add_special, int32_t **ids,
                                 int64_t *n) {
    MpErr e;
    if (!tokenizer || (!text && len) || len < 0 || !ids || !n) return mp_api_failf("maskpos_tokenize: NULL argument");
    *ids = NULL;
    *n = 0;
    MpTok t;
    memset(&t, 0, sizeof t);
    if (mp_tok_init(&t, tokenizer, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    MpTokIds out = {0};
    int rc = mp_tok_encode(&t, &out, text ? text : "", (size_t)len, add_special, &e);
    mp_tok_free(&t);
    if (rc != MP_OK) {
        mp_tok_ids_free(&out);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    *ids = out.ids ? out.ids : malloc(sizeof(int32_t)); /* never NULL on success, even for no ids */
    *n = (int64_t)out.n;
    return *ids ? MASKPOS_OK : mp_api_failf("out of memory");
}

MASKPOS_API int maskpos_detokenize(const char *tokenizer, const int32_t *ids, int64_t n, int skip_special, char **text,
                                   int64_t *len) {
    MpErr e;
    if (!tokenizer || (!ids && n) || n < 0 || !text || !len) return mp_api_failf("maskpos_detokenize: NULL argument");
    *text = NULL;
    *len = 0;
    MpTok t;
    memset(&t, 0, sizeof t);
    if (mp_tok_init(&t, tokenizer, &e) != MP_OK) return mp_api_fail(&e, MASKPOS_ERR);
    MpTokBuf b = {0};
    int rc = mp_tok_decode(&t, &b, ids, (size_t)n, skip_special, &e);
    mp_tok_free(&t);
    if (rc != MP_OK) {
        mp_tok_buf_free(&b);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    *text = b.data ? b.data : calloc(1, 1);
    *len = (int64_t)b.n;
    return *text ? MASKPOS_OK : mp_api_failf("out of memory");
}

/* ================================================================ logits */

MASKPOS_API int maskpos_logits(MaskposModel *mh, const int32_t *ids, int64_t n, const char *compute, int log_probs,
                               double *out) {
    MpErr e;
    if (!mh || !ids || !out) return mp_api_failf("maskpos_logits: NULL argument");
    MpModel *m = &mh->m;
    const int mode = compute ? mp_fwd_compute_parse(compute) : MP_FWD_COMPUTE_F32;
    if (mode < 0) return mp_api_failf("--compute: '%s' is not f32 or bf16", compute);
    if (n < 1 || n > (1 << 20)) return mp_api_failf("tokens: %lld ids (give 1 to 2^20)", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= m->vocab)
            return mp_api_failf("tokens: id %d (position %lld) is outside the vocabulary [0, %d)", ids[i], (long long)i,
                                m->vocab);
    int beyond = 0;
    if (mp_model_check_finite(m, m->n_layers, &e) != MP_OK || mp_model_context_check(m, n, 0, &beyond, &e) != MP_OK)
        return mp_api_fail(&e, MASKPOS_ERR);
    MpFwd f;
    memset(&f, 0, sizeof f);
    MpFwdConfig fc = {.n_layers = m->n_layers, .max_seq = (int)n, .causal = 1, .rope = 1, .logits = 1, .compute = mode};
    int rc = mp_fwd_init(&f, m, &fc, &e);
    if (rc == MP_OK) rc = mp_fwd_run(&f, ids, (int)n, NULL, NULL, &e);
    if (rc == MP_OK) /* row t: the distribution of the token after position t */
        for (int64_t t = 0; t < n; t++) {
            const float *lg = f.logits + (size_t)t * (size_t)m->vocab;
            double *row = out + (size_t)t * (size_t)m->vocab;
            if (log_probs) mp_gen_log_softmax(row, lg, m->vocab);
            else
                for (int v = 0; v < m->vocab; v++) row[v] = lg[v];
        }
    mp_fwd_free(&f);
    return rc == MP_OK ? MASKPOS_OK : mp_api_fail(&e, MASKPOS_ERR);
}

/* ================================================================ generate */

MASKPOS_API int maskpos_generate(MaskposModel *mh, int64_t n, int len, double temperature, int top_k, double top_p,
                                 uint64_t seed, const int32_t *prompt, int n_prompt, const char *compute, int threads,
                                 int32_t *ids, double *nll) {
    MpErr e;
    if (!mh || !ids || (!prompt && n_prompt)) return mp_api_failf("maskpos_generate: NULL argument");
    MpModel *m = &mh->m;
    MpGenConfig c = {.n = n, .len = len, .seed = seed, .prompt = n_prompt ? prompt : NULL, .n_prompt = n_prompt,
                     .threads = threads, .compute = compute ? mp_fwd_compute_parse(compute) : MP_FWD_COMPUTE_F32};
    c.sampler.temperature = temperature;
    c.sampler.top_k = top_k;
    c.sampler.top_p = top_p;
    if (c.compute < 0) return mp_api_failf("--compute: '%s' is not f32 or bf16", compute);
    if (n < 1 || len < 2) return mp_api_failf("generate: %lld sequences of %d tokens (give n >= 1 and len >= 2)", (long long)n, len);
    if (m->max_pos > 0 && len > m->max_pos)
        return mp_api_failf("generate: sequences of %d tokens exceed the model's context (%d positions)", len, m->max_pos);
    const char *bad = mp_gen_sampler_check(&c.sampler);
    if (bad) return mp_api_failf("generate: %s", bad);
    MpGenResult r;
    memset(&r, 0, sizeof r);
    if (mp_gen_run(&r, m, &c, &e) != MP_OK) {
        mp_gen_result_free(&r);
        return mp_api_fail(&e, MASKPOS_ERR);
    }
    memcpy(ids, r.ids, (size_t)r.n * (size_t)r.len * sizeof *ids);
    if (nll) *nll = r.n_sampled ? r.nll_sum / (double)r.n_sampled : 0.0;
    mp_gen_result_free(&r);
    return MASKPOS_OK;
}

/* ================================================================ figures */

MASKPOS_API int maskpos_plot(const char *path, const double *maps, int n, int rows, const int *layers, int n_layers,
                             const char *preset, const char *cmap, int diagnorm, const char *title, int force) {
    return maskpos_plot_run(path, maps, n, rows, layers, n_layers, preset, cmap, diagnorm, title, force, NULL, 0);
}

/* Each panel's significance from a run's meta.json (meta_json), as `maskpos plot` of its folder. */
static int plot_notes(MpPlotPanel *pp, int np, const unsigned char *mask, int n, const char *meta_json, int residue, MpErr *e) {
    json_error_t je;
    json_t *meta = json_loads(meta_json, 0, &je);
    if (!json_is_object(meta)) {
        if (meta) json_decref(meta);
        return mp_err_set(e, "plot: meta is not a JSON object (%s)", je.text);
    }
    for (int l = 1, k = 0; l <= n && k < np; l++) {
        if (!mask[l]) continue;
        const int r = mp_signif_note_meta(pp[k].note, sizeof pp[k].note, meta, l - 1);
        pp[k].unresolved = r == 1 && residue;
        k++;
    }
    json_decref(meta);
    return MP_OK;
}

MASKPOS_API int maskpos_plot_run(const char *path, const double *maps, int n, int rows, const int *layers, int n_layers,
                                 const char *preset, const char *cmap, int diagnorm, const char *title, int force,
                                 const char *meta_json, int residue) {
    MpErr e;
    if (!path || !maps || (!layers && n_layers)) return mp_api_failf("maskpos_plot: NULL argument");
    if (n < 1 || n > 65536 || rows < 1 || rows > 65536)
        return mp_api_failf("plot: %d maps of %d x %d (give 1 to 65536 square maps)", n, rows, rows);
    if (mp_plot_format_from_path(path) < 0) return mp_api_failf("%s: the figure's name must end in .png, .pdf or .svg", path);
    unsigned char *mask = calloc((size_t)n + 1, 1); /* [n+1], 1-based: the maps drawn */
    MpPlotPanel *pp = calloc(MP_PLOT_MAX_PANELS, sizeof *pp);
    if (!mask || !pp) {
        free(mask);
        free(pp);
        return mp_api_failf("out of memory");
    }
    int rc = MP_OK, drawn = 0;
    for (int i = 0; i < (layers ? n_layers : n) && rc == MP_OK; i++) {
        const int l = layers ? layers[i] : i + 1;
        if (l < 1 || l > n) rc = mp_err_set(&e, "--layers: layer %d does not exist (the maps have %d)", l, n);
        else drawn += !mask[l], mask[l] = 1;
    }
    if (rc == MP_OK && (drawn < 1 || drawn > MP_PLOT_MAX_PANELS))
        rc = mp_err_set(&e, "--layers: %d panels (give 1 to %d)", drawn, MP_PLOT_MAX_PANELS);
    MpPlotOptions o;
    mp_plot_options_default(&o);
    if (rc == MP_OK && preset && mp_plot_preset_apply(&o, preset, &e) != MP_OK) rc = mp_err_prefix(&e, "--preset");
    if (cmap) o.cmap = cmap;
    if (diagnorm) o.diagnorm = 1;
    if (title) snprintf(o.title, sizeof o.title, "%s", title);
    int np = 0;
    if (rc == MP_OK) rc = mp_plot_panels_add_stack(pp, &np, MP_PLOT_MAX_PANELS, maps, n, rows, mask, "Layer %d", 0, 0, NULL, &e);
    if (rc == MP_OK && meta_json) rc = plot_notes(pp, np, mask, n, meta_json, residue || diagnorm || o.diagnorm, &e);
    if (rc == MP_OK) rc = mp_outfile_claim(path, force, &e);
    if (rc == MP_OK) rc = mp_plot_render(path, pp, np, &o, &e);
    free(mask);
    free(pp);
    return rc == MP_OK ? MASKPOS_OK : mp_api_fail(&e, MASKPOS_ERR);
}
