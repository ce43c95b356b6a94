/* theory.c — `maskpos theory`: prints and saves the closed-form scores (paper.md §1).
 *
 *   maskpos theory --alpha 0 --n 3             Z_i, g(i), h(i), S(2) to 3 decimals
 *   maskpos theory --n 50 --layers 4 --out D   + layers 1..4 of the infinite-width recursion
 * Outputs (--out): layer2_scores.npy (float64 [N,N], NaN above the diagonal), layer_scores.npy
 * (float64 [L,N,N], when --layers is given), meta.json.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/json.h"  /* meta.json */
#include "core/npy.h"   /* mp_npy_write */
#include "core/util.h"  /* mp_mkdir_p, mp_time_now */
#include "sim/theory.h" /* MpTheory */
#include "core/files.h" /* mp_outdir_claim, mp_outfile_claim: one run per --out */

static const char *theory_help =
    "usage: maskpos theory [--alpha A] [--n N] [--layers L] [--digits K] [--out DIR]\n"
    "\n"
    "Closed form of the parameter-free causal decoder (no weights, L2 row norm, residual):\n"
    "  Z_i = e + (i-1)e^a,  g(i) = 2(1-a)e^a/Z_i + 4a,\n"
    "  h(i)^2 = 1 + 3a + (1-a)(2e + e^a)/Z_i + (1-a)(e^2 - e^(1+a))/Z_i^2,\n"
    "  layer-2 score S(2)_ij = g(i)/(h(i)h(j)) for j < i, 1 on the diagonal.\n"
    "\n"
    "  --alpha A    inner product of distinct input rows, in [0,1) (default 0)\n"
    "  --n N        number of positions, 1..100000 (default 3)\n"
    "  --layers L   also print/save layers 1..L from the exact infinite-width Gram recursion\n"
    "               (layer 2 of it equals the closed form); default: layer 2 only\n"
    "  --digits K   decimals printed (default 3)\n"
    "  --out DIR    write layer2_scores.npy [N,N] (NaN above the diagonal), layer_scores.npy\n"
    "               [L,N,N] when --layers is given, and meta.json\n"
    "  --force      replace the outputs of an earlier run in --out (else such a folder is refused)\n";

int mp_cmd_theory(int argc, char **argv) {
    const char *cmd = "theory";
    double alpha = 0;
    int n = 3, layers = 0, digits = 3, force = 0;
    const char *out = NULL;
    static const struct option opts[] = {{"alpha", required_argument, 0, 'a'},
                                         {"n", required_argument, 0, 'n'},
                                         {"layers", required_argument, 0, 'l'},
                                         {"digits", required_argument, 0, 'k'},
                                         {"out", required_argument, 0, 'o'},
                                         {"force", no_argument, 0, 'f'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'a':
            alpha = mp_cli_double(cmd, "--alpha", optarg, 0, 1);
            if (alpha >= 1) return mp_cli_error(cmd, "--alpha: %s is outside [0, 1)", optarg);
            break;
        case 'n': n = (int)mp_cli_i64(cmd, "--n", optarg, 1, 100000); break;
        case 'l': layers = (int)mp_cli_i64(cmd, "--layers", optarg, 1, 64); break;
        case 'k': digits = (int)mp_cli_i64(cmd, "--digits", optarg, 0, 17); break;
        case 'o': out = optarg; break;
        case 'f': force = 1; break;
        case 'h': fputs(theory_help, stdout); return MP_EXIT_OK;
        default: return mp_cli_bad_option(cmd, argv, optind, optopt);
        }
    }
    if (optind < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[optind]);
    double t0 = mp_time_now();
    MpErr e;
    if (out && mp_outdir_claim(out, "theory", force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) != MP_OK)
        return mp_cli_error(cmd, "%s", e.msg);
    MpTheory th;
    if (mp_theory_init(&th, alpha, n, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    double *deep = NULL;
    if (layers > 0) {
        deep = mp_calloc_or_die((size_t)layers * n * n, sizeof(double), "layer maps");
        if (mp_theory_gram_layers(deep, alpha, n, layers, 1, &e) != MP_OK) {
            mp_theory_free(&th);
            free(deep);
            return mp_cli_error(cmd, "%s", e.msg);
        }
    }
    int w = digits + 4;
    printf("parameter-free causal decoder: alpha = %g, n = %d\n", alpha, n);
    printf("%5s  %*s  %*s  %*s\n", "i", w + 2, "Z_i", w + 2, "g(i)", w + 2, "h(i)");
    for (int i = 0; i < n; i++)
        printf("%5d  %*.*f  %*.*f  %*.*f\n", i + 1, w + 2, digits + 2, th.z[i], w + 2, digits + 2, th.g[i],
               w + 2, digits + 2, th.h[i]);
    int lo = layers > 0 ? 1 : 2, hi = layers > 0 ? layers : 2;
    for (int l = lo; l <= hi; l++) {
        const double *m = (layers > 0) ? deep + (size_t)(l - 1) * n * n : th.s2;
        printf("\nlayer-%d scores%s (row: query i, column: key j)\n", l,
               l == 2 ? " S(2)_ij = g(i)/(h(i)h(j))" : " (infinite-width recursion)");
        printf("%6s", "");
        for (int j = 0; j < n; j++) printf(" %*s%d", w - 1 - (j + 1 >= 10) - (j + 1 >= 100) - (j + 1 >= 1000), "j=", j + 1);
        printf("\n");
        for (int i = 0; i < n; i++) {
            printf("i=%-4d", i + 1);
            for (int j = 0; j <= i; j++) printf(" %*.*f", w, digits, m[(size_t)i * n + j]);
            printf("\n");
        }
    }
    int rc = MP_EXIT_OK;
    if (out) {
        char path[4096];
        int64_t shp2[2] = {n, n}, shp3[3] = {layers, n, n};
        if (mp_path_join(path, sizeof path, out, "layer2_scores.npy", &e) ||
            mp_npy_write(path, MP_DT_F64, th.s2, 2, shp2, &e) != MP_OK ||
            (deep && (mp_path_join(path, sizeof path, out, "layer_scores.npy", &e) ||
                      mp_npy_write(path, MP_DT_F64, deep, 3, shp3, &e) != MP_OK))) {
            rc = mp_cli_error(cmd, "%s", e.msg);
        } else {
            json_t *meta = json_object();
            json_object_set_new(meta, "kind", json_string("theory"));
            json_object_set_new(meta, "alpha", json_real(alpha));
            json_object_set_new(meta, "n", json_integer(n));
            json_object_set_new(meta, "layers", json_integer(layers > 0 ? layers : 2));
            json_t *files = json_object();
            json_object_set_new(files, "layer2_scores.npy",
                                json_string("float64 [N,N] S(2)_ij, query i (row), key j; NaN above the diagonal"));
            if (deep)
                json_object_set_new(files, "layer_scores.npy",
                                    json_string("float64 [L,N,N] layers 1..L of the infinite-width Gram recursion"));
            json_object_set_new(meta, "files", files);
            json_t *arr = json_array();
            for (int i = 0; i < n; i++) json_array_append_new(arr, json_real(th.g[i]));
            json_object_set_new(meta, "g", arr);
            arr = json_array();
            for (int i = 0; i < n; i++) json_array_append_new(arr, json_real(th.h[i]));
            json_object_set_new(meta, "h", arr);
            mp_json_add_provenance(meta, argc, argv, mp_time_now() - t0);
            if (mp_path_join(path, sizeof path, out, "meta.json", &e) || mp_json_write_atomic(path, meta, &e) != MP_OK)
                rc = mp_cli_error(cmd, "%s", e.msg);
            json_decref(meta);
        }
    }
    mp_theory_free(&th);
    free(deep);
    return rc;
}
