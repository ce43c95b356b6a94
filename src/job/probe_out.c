/* probe_out.c — the result of mp_probe_run (job/probe.h) printed and written: the tables
 * `maskpos probe` prints, and the folder it writes (.npy maps, figures, meta.json last).
 * Tested by: tests/test_model_probe.c (the CLI's folder, and mp_probe_result_write's, byte for byte).
 */
#include "job/probe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"       /* mp_json_write_atomic, mp_json_add_provenance */
#include "core/npy.h"        /* mp_npy_write */
#include "core/util.h"       /* mp_path_join, mp_mkdir_p */
#include "job/probe_len.h"   /* mp_probe_len_print, mp_probe_len_write */
#include "job/probe_probs.h" /* mp_probe_probs_print, mp_probe_probs_write */
#include "viz/signif.h"      /* mp_signif_note: each panel's significance */
#include "viz/plot.h"        /* mp_plot_render */

/* "N ≈ 1234" (or "—") into buf: the sequences a layer's residue needs. */
static const char *probe_n_needed(char *buf, size_t cap, const MpProbeSignif *sg) {
    if (!isfinite(sg->n_needed)) snprintf(buf, cap, "-");
    else if (sg->n_needed > 1e9) snprintf(buf, cap, ">1e9");
    else snprintf(buf, cap, "%.0f", sg->n_needed);
    return buf;
}

void mp_probe_result_print(FILE *f, const MpProbeResult *res) {
    const int L = res->L, S = res->S;
    const MpPosStats *st = res->stats;
    char w[512], nn[32];
    if (mp_probe_n_warning(w, sizeof w, res->n)[0]) fprintf(f, "warning: %s\n", w);
    if (res->skip)
        fprintf(f, "every sequence starts with BOS (id %d): the statistics below are over positions 1..%d (the maps "
                   "keep BOS)\n", res->bos_id, S - 1);
    fprintf(f, "%6s %10s %9s %13s %13s %12s %10s %8s %9s %9s %9s %11s %12s\n", "layer", "NRI", "NRI corr", "residue min",
            "residue max", "residue rms", "rms/noise", "block z", "z needed", "resolved", "N needed", "rising rows",
            "mean slope");
    for (int l = 0; l < L; l++) {
        const MpProbeSignif *sg = &res->sig[l];
        if (!st[l].observed) fprintf(f, "%6d %10s  no finite entries: no statistic\n", res->layers[l] + 1, "nan");
        else fprintf(f, "%6d %10.6f %9.4f %13.5f %13.5f %12.6f %10.2f %8.2f %9.2f %9s %9s %10.1f%% %12.3e\n", res->layers[l] + 1,
                     st[l].nri, sg->nri_corr, st[l].res_min, st[l].res_max, st[l].res_rms, st[l].z_rms, res->block_z[l],
                     sg->threshold[0], sg->resolved[0] ? "yes" : "NO", probe_n_needed(nn, sizeof nn, sg),
                     100 * st[l].rise_share, st[l].mean_slope);
    }
    fprintf(f, "resolved: block z above its noise level at N = %lld (z needed = the noise level of %d sign-flipped sums + "
               "%g spreads); N needed: where a residue of this size would cross it (docs/metrics.md)\n",
            (long long)res->n, MP_PROBE_FLIPS, MP_SIGNIF_SIGMAS);
    if (res->probs) mp_probe_probs_print(f, &res->pr, res->layers);
    if (res->recency) mp_probe_len_print(f, &res->rec, res->layers);
}

/* scores_diagnorm.png: every selected layer, diagonal-normalised (the fig5 preset: vlag centred on
 * 0, limits ±max(|1st|, |99th| percentile) per layer); its entry in files names the limits. */
static int probe_plot(const MpProbeResult *res, const char *dir, json_t *files, MpErr *e) {
    const size_t SS = (size_t)res->S * res->S;
    const int np = res->L;
    MpPlotOptions o;
    mp_plot_options_default(&o);
    if (mp_plot_preset_apply(&o, "fig5", e) != MP_OK) return MP_ERR;
    o.cols = np <= 6 ? np : 4; /* stories260K's 5 layers in one row */
    MpPlotPanel *pn = calloc((size_t)np, sizeof *pn);
    double(*lim)[2] = calloc((size_t)np, sizeof *lim);
    char *desc = malloc(256 + (size_t)np * 48);
    if (!pn || !lim || !desc) {
        free(pn), free(lim), free(desc);
        return mp_err_set(e, "%s: out of memory for the figure", dir);
    }
    for (int l = 0; l < np; l++) {
        pn[l].map = res->mean + l * SS;
        pn[l].rows = pn[l].cols = res->S;
        snprintf(pn[l].title, sizeof pn[l].title, "Layer %d", res->layers[l] + 1);
        const MpProbeSignif *sg = &res->sig[l];
        pn[l].unresolved = mp_signif_note(pn[l].note, sizeof pn[l].note, "block z", res->block_z[l], sg->threshold[0],
                                          sg->resolved[0], res->n, sg->n_needed);
    }
    snprintf(o.title, sizeof o.title, "%.200s%s%s", res->title, res->causal ? "" : ", bidirectional",
             res->rope ? "" : ", no RoPE");
    char path[4096];
    int rc = MP_OK;
    if (mp_path_join(path, sizeof path, dir, "scores_diagnorm.png", e) != MP_OK || mp_plot_render_ex(path, pn, np, &o, lim, e) != MP_OK)
        rc = MP_ERR;
    if (rc == MP_OK) {
        int w = snprintf(desc, 256, "figure: diagonal-normalised residue of every selected layer, vlag centred on 0, "
                                    "symmetric limits +-max(|1st|, |99th| percentile):");
        for (int l = 0; l < np; l++)
            w += snprintf(desc + w, 48, " layer %d +-%.3g%s", res->layers[l] + 1, lim[l][1], l + 1 < np ? "," : "");
        json_object_set_new(files, "scores_diagnorm.png", json_string(desc));
    }
    free(pn), free(lim), free(desc);
    return rc;
}

/* One per-head array [L,H,S,S] (summed in double): float32 unless res->heads_f64. */
static int probe_write_heads(const MpProbeResult *res, const char *dir, const char *name, const double *x, MpErr *e) {
    const int64_t shp[4] = {res->L, res->H, res->S, res->S};
    char path[4096];
    if (mp_path_join(path, sizeof path, dir, name, e) != MP_OK) return MP_ERR;
    if (res->heads_f64) return mp_npy_write(path, MP_DT_F64, x, 4, shp, e);
    const size_t n = (size_t)res->L * res->H * res->S * res->S;
    float *f = mp_try_malloc(n * sizeof *f);
    if (!f) return mp_err_set(e, "%s: out of memory for %zu float32 values", path, n);
    for (size_t k = 0; k < n; k++) f[k] = (float)x[k];
    const int rc = mp_npy_write(path, MP_DT_F32, f, 4, shp, e);
    free(f);
    return rc;
}

/* The score maps: scores.npy, scores_diagnorm.npy, scores_se.npy, scores_heads.npy, scores_heads_se.npy. */
static int probe_write_maps(const MpProbeResult *res, const char *dir, MpErr *e) {
    const int64_t shp[3] = {res->L, res->S, res->S};
    static const char *names[3] = {"scores.npy", "scores_diagnorm.npy", "scores_se.npy"};
    const double *maps[3] = {res->mean, res->diagnorm, res->se};
    char path[4096];
    for (int k = 0; k < 3; k++)
        if (mp_path_join(path, sizeof path, dir, names[k], e) != MP_OK || mp_npy_write(path, MP_DT_F64, maps[k], 3, shp, e) != MP_OK)
            return MP_ERR;
    if (res->heads && (probe_write_heads(res, dir, "scores_heads.npy", res->heads, e) != MP_OK ||
                       probe_write_heads(res, dir, "scores_heads_se.npy", res->heads_se, e) != MP_OK))
        return MP_ERR;
    return MP_OK;
}

int mp_probe_result_write(const MpProbeResult *res, const char *dir, const MpJobWriteOptions *o, MpErr *e) {
    if (!res->complete) return mp_err_set(e, "%s: no probe result to write", dir);
    const MpJobWriteOptions none = {0};
    if (!o) o = &none;
    char path[4096];
    if (mp_mkdir_p(dir, e) != MP_OK || mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK) return MP_ERR;
    remove(path); /* meta.json marks a complete result: drop a stale one first */
    if (probe_write_maps(res, dir, e) != MP_OK) return MP_ERR;
    json_t *j = json_deep_copy(res->meta);
    if (!j) return mp_err_set(e, "%s: out of memory for meta.json", dir);
    json_t *files = json_object_get(j, "files");
    int rc = o->plot ? probe_plot(res, dir, files, e) : MP_OK;
    if (rc == MP_OK && res->probs) rc = mp_probe_probs_write(dir, &res->pr, res->layers, o->plot, res->title, files, e);
    if (rc == MP_OK && res->recency) rc = mp_probe_len_write(dir, &res->rec, res->layers, o->plot, res->title, files, e);
    if (o->plot) mp_plot_release(); /* after the last figure: the probability and length figures too */
    if (rc == MP_OK) {
        mp_json_add_provenance(j, o->argc, o->argv, o->wall_s);
        if (mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK || mp_json_write_atomic(path, j, e) != MP_OK)
            rc = MP_ERR;
    }
    json_decref(j);
    if (rc == MP_OK && mp_path_join(path, sizeof path, dir, "checkpoint.bin", e) == MP_OK)
        remove(path); /* the result is complete */
    return rc;
}

char *mp_probe_result_meta_dump(const MpProbeResult *res) {
    if (!res->meta) return NULL;
    return json_dumps(res->meta, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
}
