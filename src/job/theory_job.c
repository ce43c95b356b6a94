/* theory_job.c — see theory_job.h. */
#include "job/theory_job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h" /* mp_json_write_atomic, mp_json_add_provenance */
#include "core/npy.h"  /* mp_npy_write */
#include "core/util.h" /* mp_path_join */

int mp_theory_run(MpTheoryResult *r, const MpTheoryConfig *c, MpErr *e) {
    memset(r, 0, sizeof *r);
    r->c = *c;
    if (!(c->alpha >= 0 && c->alpha < 1)) return mp_err_set(e, "alpha %g is outside [0, 1)", c->alpha);
    if (c->n < 1 || c->layers < 0) return mp_err_set(e, "n = %d, layers = %d: need n >= 1 and layers >= 0", c->n, c->layers);
    if (mp_theory_init(&r->th, c->alpha, c->n, e) != MP_OK) return MP_ERR;
    r->var_layers = c->layers > 0 ? c->layers : 1;
    r->var_iid = mp_try_calloc((size_t)r->var_layers * c->n, sizeof(double));
    r->var = mp_try_calloc((size_t)r->var_layers * c->n, sizeof(double));
    if (!r->var_iid || !r->var) {
        mp_theory_result_free(r);
        return mp_err_set(e, "out of memory for the variances of %d layers of %d positions", r->var_layers, c->n);
    }
    if (c->layers > 0) {
        r->deep = mp_try_calloc((size_t)c->layers * c->n * c->n, sizeof(double));
        if (!r->deep) {
            mp_theory_result_free(r);
            return mp_err_set(e, "out of memory for %d layer maps of %d x %d", c->layers, c->n, c->n);
        }
        if (mp_theory_layers(r->deep, r->var_iid, r->var, c->alpha, c->n, c->layers, 1, e) != MP_OK) {
            mp_theory_result_free(r);
            return MP_ERR;
        }
        return MP_OK;
    }
    const double E = exp(1.0), e2a = exp(2 * c->alpha); /* layer 1: a_ii = e/Z_i, a_ij = e^α/Z_i (j < i) */
    for (int i = 0; i < c->n; i++) {
        const double z = r->th.z[i];
        r->var_iid[i] = (E * E + i * e2a) / (z * z);
        r->var[i] = (1 - c->alpha) * r->var_iid[i] + c->alpha;
    }
    return MP_OK;
}

void mp_theory_result_free(MpTheoryResult *r) {
    mp_theory_free(&r->th);
    free(r->deep);
    free(r->var_iid);
    free(r->var);
    memset(r, 0, sizeof *r);
}

void mp_theory_result_print(FILE *f, const MpTheoryResult *r, int digits, int max_rows) {
    const int n = r->c.n, layers = r->c.layers, w = digits + 4;
    const int rows = max_rows > 0 && max_rows < n ? max_rows : n; /* rows (and columns) printed */
    const MpTheory *th = &r->th;
    fprintf(f, "parameter-free causal decoder: alpha = %g, n = %d\n", r->c.alpha, n);
    fprintf(f, "%5s  %*s  %*s  %*s\n", "i", w + 2, "Z_i", w + 2, "g(i)", w + 2, "h(i)");
    for (int i = 0; i < rows; i++)
        fprintf(f, "%5d  %*.*f  %*.*f  %*.*f\n", i + 1, w + 2, digits + 2, th->z[i], w + 2, digits + 2, th->g[i],
                w + 2, digits + 2, th->h[i]);
    const int lo = layers > 0 ? 1 : 2, hi = layers > 0 ? layers : 2;
    for (int l = lo; l <= hi; l++) {
        const double *m = layers > 0 ? r->deep + (size_t)(l - 1) * n * n : th->s2;
        fprintf(f, "\nlayer-%d scores%s (row: query i, column: key j)\n", l,
                l == 2 ? " S(2)_ij = g(i)/(h(i)h(j))" : " (infinite-width recursion)");
        fprintf(f, "%6s", "");
        for (int j = 0; j < rows; j++) fprintf(f, " %*s%d", w - 1 - (j + 1 >= 10) - (j + 1 >= 100) - (j + 1 >= 1000), "j=", j + 1);
        fprintf(f, "\n");
        for (int i = 0; i < rows; i++) {
            fprintf(f, "i=%-4d", i + 1);
            for (int j = 0; j <= i; j++) fprintf(f, " %*.*f", w, digits, m[(size_t)i * n + j]);
            fprintf(f, "\n");
        }
    }
    if (rows < n) fprintf(f, "\n(the first %d of %d positions; every value is in the --out folder)\n", rows, n);
}

json_t *mp_theory_result_meta(const MpTheoryResult *r, const MpJobWriteOptions *o) {
    const MpJobWriteOptions none = {0};
    if (!o) o = &none;
    const int n = r->c.n;
    json_t *meta = json_object();
    json_object_set_new(meta, "kind", json_string("theory"));
    json_object_set_new(meta, "alpha", json_real(r->c.alpha));
    json_object_set_new(meta, "n", json_integer(n));
    json_object_set_new(meta, "layers", json_integer(r->c.layers > 0 ? r->c.layers : 2));
    json_t *files = json_object();
    json_object_set_new(files, "layer2_scores.npy",
                        json_string("float64 [N,N] S(2)_ij, query i (row), key j; NaN above the diagonal"));
    if (r->deep)
        json_object_set_new(files, "layer_scores.npy",
                            json_string("float64 [L,N,N] layers 1..L of the infinite-width Gram recursion"));
    json_object_set_new(files, "variance.npy",
                        json_string("float64 [L,N] variance over sequences and dimensions of the attention output "
                                    "sum_j a_ij y_j at position i, in units of the values' per-dimension variance 1/d, at "
                                    "infinite width (layers 1..L of the recursion; without --layers layer 1's closed form "
                                    "(1-alpha) sum_j a_ij^2 + alpha)"));
    json_object_set_new(files, "variance_iid.npy",
                        json_string("float64 [L,N] the closed form for values independent of the weights, sum_j a_ij^2 "
                                    "(sigma^2 sum_j a_ij^2 in units of sigma^2; Chi et al. 2023), from the same weights"));
    json_object_set_new(meta, "files", files);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_real(r->th.g[i]));
    json_object_set_new(meta, "g", arr);
    arr = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(arr, json_real(r->th.h[i]));
    json_object_set_new(meta, "h", arr);
    mp_json_add_provenance(meta, o->argc, o->argv, o->wall_s);
    return meta;
}

int mp_theory_result_write(const MpTheoryResult *r, const char *dir, const MpJobWriteOptions *o, MpErr *e) {
    const MpJobWriteOptions none = {0};
    if (!o) o = &none;
    const int n = r->c.n;
    char path[4096];
    const int64_t shp2[2] = {n, n}, shp3[3] = {r->c.layers, n, n};
    if (mp_path_join(path, sizeof path, dir, "layer2_scores.npy", e) ||
        mp_npy_write(path, MP_DT_F64, r->th.s2, 2, shp2, e) != MP_OK ||
        (r->deep && (mp_path_join(path, sizeof path, dir, "layer_scores.npy", e) ||
                     mp_npy_write(path, MP_DT_F64, r->deep, 3, shp3, e) != MP_OK)))
        return MP_ERR;
    const int64_t shpv[2] = {r->var_layers, n};
    if (mp_path_join(path, sizeof path, dir, "variance.npy", e) || mp_npy_write(path, MP_DT_F64, r->var, 2, shpv, e) != MP_OK ||
        mp_path_join(path, sizeof path, dir, "variance_iid.npy", e) ||
        mp_npy_write(path, MP_DT_F64, r->var_iid, 2, shpv, e) != MP_OK)
        return MP_ERR;
    json_t *meta = mp_theory_result_meta(r, o);
    int rc = MP_OK;
    if (mp_path_join(path, sizeof path, dir, "meta.json", e) || mp_json_write_atomic(path, meta, e) != MP_OK) rc = MP_ERR;
    json_decref(meta);
    return rc;
}
