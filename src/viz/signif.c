/* signif.c — see signif.h. */
#include "viz/signif.h"

#include <math.h>
#include <stdio.h>

#include "model/probe_signif.h" /* MP_SIGNIF_MIN_N, mp_signif_resolved */

int mp_signif_sim_resolved(const MpPosStats *st, int64_t n) { return mp_signif_resolved(st->z_rms, MP_SIGNIF_SIM_Z, n); }

void mp_signif_sim_meta(json_t *m, const MpPosStats *st, int L, int64_t n) {
    json_t *a = json_array();
    for (int l = 0; l < L; l++) json_array_append_new(a, json_boolean(mp_signif_sim_resolved(&st[l], n)));
    json_object_set_new(m, "residue_resolved", a);
    char d[256];
    snprintf(d, sizeof d, "per layer: rms/noise (residue_z_rms) above %g with N >= %d (Monte-Carlo noise gives 1; "
                          "docs/metrics.md)", MP_SIGNIF_SIM_Z, MP_SIGNIF_MIN_N);
    json_object_set_new(m, "residue_resolved_of", json_string(d));
}

int mp_signif_note(char *note, size_t cap, const char *what, double z, double thr, int resolved, int64_t n,
                   double n_needed) {
    char t[32] = "", nn[48] = "";
    if (isfinite(thr)) snprintf(t, sizeof t, " %s %.2f", z > thr ? ">" : "<", thr);
    if (!resolved && isfinite(n_needed)) snprintf(nn, sizeof nn, n_needed < 1e7 ? " (N ~ %.0f needed)" : " (N ~ %.1e needed)", n_needed);
    if (!isfinite(z)) snprintf(note, cap, "%s: none at N = %lld", what, (long long)n);
    else if (resolved) snprintf(note, cap, "%s %.2f%s: resolved (N = %lld)", what, z, t, (long long)n);
    else if (n < MP_SIGNIF_MIN_N) snprintf(note, cap, "%s %.2f: N = %lld is too few to judge", what, z, (long long)n);
    else snprintf(note, cap, "%s %.2f%s: not resolved at N = %lld%s", what, z, t, (long long)n, nn);
    return !resolved;
}

/* meta[key][l] as a number (NaN when absent or null). */
static double meta_at(const json_t *a, int l) {
    const json_t *v = json_array_get(a, (size_t)l);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

int mp_signif_note_meta(char *note, size_t cap, const json_t *meta, int l) {
    note[0] = 0;
    const json_t *rv = json_object_get(meta, "residue_resolved"), *nj = json_object_get(meta, "n");
    if (!json_is_array(rv) || l < 0 || (size_t)l >= json_array_size(rv)) return -1;
    const int resolved = json_is_true(json_array_get(rv, (size_t)l));
    if (!json_is_integer(nj)) nj = json_object_get(meta, "batch"); /* a simulation */
    const int64_t n = json_is_integer(nj) ? (int64_t)json_integer_value(nj) : 0;
    const json_t *bz = json_object_get(meta, "residue_block_z");
    if (json_is_array(bz)) {
        const json_t *noise = json_object_get(meta, "residue_noise");
        return mp_signif_note(note, cap, "block z", meta_at(bz, l), meta_at(json_object_get(noise, "block_z_threshold"), l),
                              resolved, n, meta_at(json_object_get(meta, "residue_n_needed"), l));
    }
    const json_t *row = json_array_get(json_object_get(meta, "stats"), (size_t)l), *z = json_object_get(row, "residue_z_rms");
    return mp_signif_note(note, cap, "rms/noise", json_is_number(z) ? json_number_value(z) : NAN, MP_SIGNIF_SIM_Z, resolved, n, NAN);
}
