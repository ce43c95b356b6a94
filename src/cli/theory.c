/* theory.c — `maskpos theory`: prints and saves the closed-form scores (paper.md §1).
 *
 *   maskpos theory --alpha 0 --n 3             Z_i, g(i), h(i), S(2) to 3 decimals
 *   maskpos theory --n 50 --layers 4 --out D   + layers 1..4 of the infinite-width recursion
 * Outputs (--out): layer2_scores.npy (float64 [N,N], NaN above the diagonal), layer_scores.npy
 * (float64 [L,N,N], when --layers is given), meta.json. The work: src/job/theory.h.
 */
#include <getopt.h>
#include <stdio.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/files.h" /* mp_outdir_claim: one run per --out */
#include "core/util.h"  /* mp_time_now */
#include "job/theory.h" /* mp_theory_run, mp_theory_result_print, mp_theory_result_write */

#define THEORY_PRINT_ROWS 64 /* positions printed when --out holds them all */

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
    "               [L,N,N] when --layers is given, and meta.json; the tables printed then stop\n"
    "               at the first 64 positions\n"
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
    const MpTheoryConfig tc = {.alpha = alpha, .n = n, .layers = layers};
    MpTheoryResult r;
    if (mp_theory_run(&r, &tc, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    /* with --out the folder has every value: stdout gets the first THEORY_PRINT_ROWS positions
     * (N = 20000 would print gigabytes) */
    mp_theory_result_print(stdout, &r, digits, out ? THEORY_PRINT_ROWS : 0);
    int rc = MP_EXIT_OK;
    const MpJobWriteOptions wo = {.argc = argc, .argv = argv, .wall_s = mp_time_now() - t0};
    if (out && mp_theory_result_write(&r, out, &wo, &e) != MP_OK) rc = mp_cli_error(cmd, "%s", e.msg);
    mp_theory_result_free(&r);
    return rc;
}
