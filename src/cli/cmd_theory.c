/* cmd_theory.c — `maskpos theory`: prints and saves the closed-form scores (paper.md §1).
 *
 *   maskpos theory --alpha 0 --n 3             Z_i, g(i), h(i), S(2) to 3 decimals
 *   maskpos theory --n 50 --layers 4 --out D   + layers 1..4 of the infinite-width recursion
 * Outputs (--out): layer2_scores.npy (float64 [N,N], NaN above the diagonal), layer_scores.npy
 * (float64 [L,N,N], when --layers is given), meta.json. The work: src/job/theory_job.h.
 */
#include <stddef.h>
#include <stdio.h>

#include "cli/cli.h"    /* mp_cli_* */
#include "core/files.h" /* mp_outdir_claim: one run per --out */
#include "core/util.h"  /* mp_time_now */
#include "job/theory_job.h" /* mp_theory_run, mp_theory_result_print, mp_theory_result_write */

#define THEORY_PRINT_ROWS 64 /* positions printed when --out holds them all */

/* The flags' values (the defaults of `maskpos theory`). */
typedef struct TheoryFlags {
    double alpha;
    int n, layers, digits, force;
    const char *out;
} TheoryFlags;

typedef enum TheoryOpt { TH_ALPHA, TH_N, TH_LAYERS, TH_DIGITS, TH_OUT, TH_FORCE, TH_COUNT } TheoryOpt;

#define F(m) offsetof(TheoryFlags, m)
static const MpOpt theory_opts[TH_COUNT] = {
    [TH_ALPHA] = {MP_OPT_DECL("alpha", MP_OPT_DOUBLE, "A", .help = "inner product of distinct input rows, in [0,1) (default 0)", .dlo = 0,
                              .dhi = 1, .flags = MP_OPT_OPEN), F(alpha)},
    [TH_N] = {MP_OPT_DECL("n", MP_OPT_INT, "N", .help = "number of positions, 1..100000 (default 3)", .lo = 1, .hi = 100000), F(n)},
    [TH_LAYERS] = {MP_OPT_DECL("layers", MP_OPT_INT, "L",
                               .help = "also print/save layers 1..L from the exact infinite-width Gram recursion\n"
                               "(layer 2 of it equals the closed form); default: layer 2 only",
                               .lo = 1, .hi = 64), F(layers)},
    [TH_DIGITS] = {MP_OPT_DECL("digits", MP_OPT_INT, "K", .help = "decimals printed (default 3)", .lo = 0, .hi = 17), F(digits)},
    [TH_OUT] = {MP_OPT_DECL("out", MP_OPT_STRING, "DIR",
                            .help = "write layer2_scores.npy [N,N] (NaN above the diagonal), layer_scores.npy\n"
                            "[L,N,N] when --layers is given, variance.npy and variance_iid.npy [L,N] (the\n"
                            "attention output's variance by position; layer 1 without --layers), and\n"
                            "meta.json; the tables printed then stop at the first 64 positions"), F(out)},
    [TH_FORCE] = {MP_OPT_DECL("force", MP_OPT_BOOL, NULL,
                              .help = "replace the outputs of an earlier run in --out (else such a folder is refused)"), F(force)},
};
_Static_assert(sizeof theory_opts / sizeof *theory_opts == TH_COUNT, "one row per TheoryOpt");

static const MpOptTable theory_table = {"theory", theory_opts, TH_COUNT, 15,
    "usage: maskpos theory [--alpha A] [--n N] [--layers L] [--digits K] [--out DIR]\n"
    "\n"
    "Closed form of the parameter-free causal decoder (no weights, L2 row norm, residual):\n"
    "  Z_i = e + (i-1)e^a,  g(i) = 2(1-a)e^a/Z_i + 4a,\n"
    "  h(i)^2 = 1 + 3a + (1-a)(2e + e^a)/Z_i + (1-a)(e^2 - e^(1+a))/Z_i^2,\n"
    "  layer-2 score S(2)_ij = g(i)/(h(i)h(j)) for j < i, 1 on the diagonal.\n"
    "\n",
    NULL};

int mp_cmd_theory(int argc, char **argv) {
    const char *cmd = "theory";
    TheoryFlags fl = {.n = 3, .digits = 3};
    int first;
    const int prc = mp_cli_parse(&theory_table, &fl, argc, argv, &first, NULL);
    if (prc != MP_CLI_GO) return prc;
    if (first < argc) return mp_cli_error(cmd, "unexpected argument '%s'", argv[first]);
    double t0 = mp_time_now();
    MpErr e;
    if (fl.out && mp_outdir_claim(fl.out, "theory", fl.force ? MP_OUTDIR_FORCE : MP_OUTDIR_NEW, &e) != MP_OK)
        return mp_cli_error(cmd, "%s", e.msg);
    const MpTheoryConfig tc = {.alpha = fl.alpha, .n = fl.n, .layers = fl.layers};
    MpTheoryResult r;
    if (mp_theory_run(&r, &tc, &e) != MP_OK) return mp_cli_error(cmd, "%s", e.msg);
    /* with --out the folder has every value: stdout gets the first THEORY_PRINT_ROWS positions
     * (N = 20000 would print gigabytes) */
    mp_theory_result_print(stdout, &r, fl.digits, fl.out ? THEORY_PRINT_ROWS : 0);
    int rc = MP_EXIT_OK;
    const MpJobWriteOptions wo = {.argc = argc, .argv = argv, .wall_s = mp_time_now() - t0};
    if (fl.out && mp_theory_result_write(&r, fl.out, &wo, &e) != MP_OK) rc = mp_cli_error(cmd, "%s", e.msg);
    mp_theory_result_free(&r);
    return rc;
}
