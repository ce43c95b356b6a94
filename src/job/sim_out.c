/* sim_out.c — see sim_out.h. */
#include "job/sim_out.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h" /* meta.json */
#include "core/npy.h"  /* mp_npy_write */
#include "core/util.h" /* mp_mkdir_p, mp_path_join */
#include "viz/signif.h" /* mp_signif_sim_meta, mp_signif_note */
#include "viz/figs.h" /* mp_fig_rows */

void mp_sim_print_stats(FILE *f, const MpPosStats *st, int layers) {
    fprintf(f, "%6s %10s %13s %13s %12s %14s %11s %12s\n", "layer", "NRI", "residue min", "residue max",
            "residue rms", "rms/noise (z)", "rising rows", "mean slope");
    for (int l = 0; l < layers; l++)
        if (!st[l].observed) fprintf(f, "%6d %10s  no finite entries: no statistic\n", l + 1, "nan");
        else fprintf(f, "%6d %10.6f %13.5f %13.5f %12.6f %14.2f %10.1f%% %12.3e\n", l + 1, st[l].nri, st[l].res_min,
                st[l].res_max, st[l].res_rms, st[l].z_rms, 100 * st[l].rise_share, st[l].mean_slope);
}

void mp_sim_print_recency(FILE *f, const MpSimResult *r) {
    fprintf(f, "%6s %10s %10s %18s   (recency probability: share of triples j<k<i with S[i,k] > S[i,j])\n",
            "layer", "RP", "se", "recent triples");
    for (int l = 0; l < r->layers; l++)
        fprintf(f, "%6d %10.5f %10.5f %18llu\n", l + 1, r->rp[l], r->rp_se[l], (unsigned long long)r->rp_count[l]);
}

const char *mp_sim_norm_name(MpNorm n) {
    return n == MP_NORM_L2 ? "l2" : n == MP_NORM_LAYERNORM ? "layernorm" : "none";
}

/* JSON has no NaN: a non-finite statistic (e.g. no noise estimate) is written as null. */
static json_t *stats_real(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *mp_job_stats_json(const MpPosStats *st, const int *layers, int n) {
    json_t *arr = json_array();
    for (int l = 0; l < n; l++) {
        json_t *o = json_object();
        json_object_set_new(o, "layer", json_integer((layers ? layers[l] : l) + 1));
        json_object_set_new(o, "nri", stats_real(st[l].nri));
        json_object_set_new(o, "residue_min", stats_real(st[l].res_min));
        json_object_set_new(o, "residue_max", stats_real(st[l].res_max));
        json_object_set_new(o, "residue_rms", stats_real(st[l].res_rms));
        json_object_set_new(o, "noise_rms", stats_real(st[l].noise_rms));
        json_object_set_new(o, "residue_z_rms", stats_real(st[l].z_rms));
        json_object_set_new(o, "rising_row_share", stats_real(st[l].rise_share));
        json_object_set_new(o, "mean_slope", stats_real(st[l].mean_slope));
        json_array_append_new(arr, o);
    }
    return arr;
}

const MpSimVarFile mp_sim_var_files[MP_SIM_VAR_FILES] = {
    {"var_attn", "float64 [L,S] variance over sequences and dimensions of the attention output o_i = sum_j a_ij y_j "
                     "(before the residual), by position"},
    {"var_attn_se", "float64 [L,S] its standard error (sequences as independent draws)"},
    {"var_closed", "float64 [L,S] the closed form for values independent of the weights, sigma^2 sum_j a_ij^2, from "
                       "each sequence's own weights and values (sigma^2 = |y_j|^2 / D; 1/D for L2 rows), mean over sequences"},
    {"var_closed_se", "float64 [L,S] its standard error"},
    {"var_gap_se", "float64 [L,S] standard error of var_attn - var_closed (the same sequences)"},
};

json_t *mp_sim_result_meta(const MpSimConfig *c, const char *scale_word, const MpSimResult *r, int plot, int argc,
                           char **argv) {
    json_t *m = json_object();
    json_object_set_new(m, "kind", json_string("simulate"));
    json_object_set_new(m, "batch", json_integer(c->batch));
    json_object_set_new(m, "seq", json_integer(c->seq));
    json_object_set_new(m, "dim", json_integer(c->dim));
    json_object_set_new(m, "layers", json_integer(c->layers));
    json_object_set_new(m, "alpha", json_real(c->alpha));
    json_object_set_new(m, "norm", json_string(mp_sim_norm_name(c->norm)));
    json_object_set_new(m, "scale", json_string(scale_word));
    json_object_set_new(m, "scale_divisor", json_real(c->scale));
    json_object_set_new(m, "layernorm_eps", json_real(c->ln_eps));
    json_object_set_new(m, "causal", json_boolean(c->causal));
    json_object_set_new(m, "rope", json_boolean(c->rope));
    json_object_set_new(m, "rope_theta", json_real(c->rope_theta));
    json_object_set_new(m, "seed", json_integer((json_int_t)c->seed));
    json_object_set_new(m, "rng", json_string("philox4x32-10, stream = sequence index; box-muller normals"));
    json_object_set_new(m, "threads", json_integer(c->threads));
    json_object_set_new(m, "mpi_ranks", json_integer(r->mpi_ranks > 0 ? r->mpi_ranks : 1));
    json_t *files_j = json_object();
    json_object_set_new(files_j, "scores.npy", json_string("float64 [L,S,S] mean pre-softmax score, row = query, column = key; NaN where masked"));
    json_object_set_new(files_j, "scores_se.npy", json_string("float64 [L,S,S] standard error of the mean score"));
    json_object_set_new(files_j, "probs.npy", json_string("float64 [L,S,S] mean post-softmax probability; 0 where masked"));
    json_object_set_new(files_j, "scores_diagnorm.npy", json_string("float64 [L,S,S] scores minus the mean of their diagonal (i-j)"));
    for (int k = 0; r->var && k < MP_SIM_VAR_FILES; k++) {
        char f[64];
        snprintf(f, sizeof f, "%s.npy", mp_sim_var_files[k].name);
        json_object_set_new(files_j, f, json_string(mp_sim_var_files[k].of));
    }
    if (plot) json_object_set_new(files_j, "scores.png", json_string("figure: raw (top) and diagonal-normalised (bottom) maps per layer"));
    json_object_set_new(m, "files", files_j);
    json_object_set_new(m, "stats", mp_job_stats_json(r->stats, NULL, r->layers));
    mp_signif_sim_meta(m, r->stats, r->layers, c->batch);
    if (c->form == MP_SIM_FORM_RECENCY) { /* only here, so the paper form's meta.json is unchanged */
        json_object_set_new(m, "layer_form", json_string("recency"));
        json_object_set_new(m, "residual", json_boolean(c->residual));
        json_t *rp = json_array(), *se = json_array(), *cnt = json_array();
        for (int l = 0; l < r->layers; l++) {
            json_array_append_new(rp, stats_real(r->rp[l]));
            json_array_append_new(se, stats_real(r->rp_se[l]));
            json_array_append_new(cnt, json_integer((json_int_t)r->rp_count[l]));
        }
        json_object_set_new(m, "recency_probability", rp);
        json_object_set_new(m, "recency_probability_se", se);
        json_object_set_new(m, "recency_triples_recent", cnt);
        json_object_set_new(m, "recency_triples_total", json_integer((json_int_t)(r->rp_triples * (uint64_t)r->batch)));
    } else if (!c->residual)
        json_object_set_new(m, "residual", json_boolean(0));
    json_object_set_new(m, "sim_wall_time_s", json_real(r->wall_s));
    mp_json_add_provenance(m, argc, argv, r->wall_s);
    return m;
}

int mp_sim_write_outputs(const char *dir, const MpSimConfig *c, const char *scale_word,
                         const MpSimResult *r, int plot, int argc, char **argv, MpErr *e) {
    char path[4096];
    int64_t shp[3] = {r->layers, r->seq, r->seq};
    const struct {
        const char *name;
        const double *data;
    } files[] = {{"scores.npy", r->scores},
                 {"scores_se.npy", r->se},
                 {"probs.npy", r->probs},
                 {"scores_diagnorm.npy", r->diagnorm}};
    if (mp_mkdir_p(dir, e) != MP_OK) return MP_ERR;
    /* meta.json marks completeness: remove a stale one before rewriting the arrays */
    if (mp_path_join(path, sizeof path, dir, "meta.json", e) != MP_OK) return MP_ERR;
    remove(path);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (mp_path_join(path, sizeof path, dir, files[i].name, e) != MP_OK ||
            mp_npy_write(path, MP_DT_F64, files[i].data, 3, shp, e) != MP_OK)
            return MP_ERR;
    const int64_t vshp[2] = {r->layers, r->seq};
    for (int k = 0; r->var && k < MP_SIM_VAR_FILES; k++) { /* --variance: r->var's k-th (L,S) */
        char f[64];
        snprintf(f, sizeof f, "%s.npy", mp_sim_var_files[k].name);
        if (mp_path_join(path, sizeof path, dir, f, e) != MP_OK ||
            mp_npy_write(path, MP_DT_F64, r->var + (size_t)k * r->layers * r->seq, 2, vshp, e) != MP_OK)
            return MP_ERR;
    }
    if (plot) {
        char title[256];
        snprintf(title, sizeof title, "Parameter-free decoder: %s, %s, alpha=%g%s (B=%lld, S=%d, d=%d)",
                 c->norm == MP_NORM_L2 ? "L2 norm" : c->norm == MP_NORM_LAYERNORM ? "LayerNorm" : "no norm", c->causal ? "causal" : "bidirectional",
                 c->alpha, c->rope ? ", RoPE" : "", (long long)c->batch, c->seq, c->dim);
        MpFigNote *notes = calloc((size_t)r->layers, sizeof *notes);
        if (!notes) return mp_err_set(e, "%s: out of memory for the figure", dir);
        for (int l = 0; l < r->layers; l++)
            notes[l].unresolved = mp_signif_note(notes[l].text, sizeof notes[l].text, "rms/noise", r->stats[l].z_rms, MP_SIGNIF_SIM_Z,
                                                 mp_signif_sim_resolved(&r->stats[l], c->batch), c->batch, NAN);
        MpFigRow rows[2] = {{r->scores, r->layers, r->seq, "Raw", 0, NULL}, {r->scores, r->layers, r->seq, "Normalised", 1, notes}};
        const int rc = mp_path_join(path, sizeof path, dir, "scores.png", e) || mp_fig_rows(path, title, rows, 2, e) != MP_OK;
        free(notes);
        if (rc) return MP_ERR;
    }
    json_t *m = mp_sim_result_meta(c, scale_word, r, plot, argc, argv);
    int rc = mp_path_join(path, sizeof path, dir, "meta.json", e) == MP_OK ? mp_json_write_atomic(path, m, e) : MP_ERR;
    json_decref(m);
    return rc;
}
