/* api_example.c — a program that uses libmaskpos through its public header only (docs/c-api.md).
 *
 *   cc api_example.c $(pkg-config --cflags --libs maskpos) -o api_example
 *   ./api_example OUTDIR
 *
 * Prints the closed-form layer-2 map at alpha = 0 for 3 positions (as `maskpos theory --alpha 0
 * --n 3`), runs a small RoPE simulation (as `maskpos simulate --rope --batch 2000 --seq 16
 * --layers 3`), prints its NRI per layer, saves it to OUTDIR (the files `maskpos simulate --out`
 * writes) and loads it back. Built and run against an installed copy by tests/test_install.c.
 */
#include <stdint.h>
#include <stdio.h>

#include <maskpos.h>

/* Stops nothing; counts the calls and says when the run starts and ends. */
static int show_progress(void *user, int64_t done, int64_t total) {
    int *calls = user;
    if (++*calls == 1 || done == total) printf("simulate: %lld of %lld sequences\n", (long long)done, (long long)total);
    return 0;
}

static int fail(const char *what) {
    fprintf(stderr, "api_example: %s: %s\n", what, maskpos_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: api_example OUTDIR\n");
        return 2;
    }
    printf("libmaskpos %s\n", maskpos_version());

    /* the theory: S(2) for alpha = 0, n = 3 */
    MaskposConfig *c = maskpos_config_new("theory");
    MaskposResult *r = NULL;
    if (maskpos_config_set(c, "n", "3") || maskpos_theory(c, &r)) return fail("theory");
    int64_t shape[MASKPOS_MAX_DIMS];
    const double *s2 = maskpos_result_array(r, "layer2_scores", NULL, NULL, shape);
    for (int i = 0; i < shape[0]; i++) {
        for (int j = 0; j <= i; j++) printf(" %8.6f", s2[i * shape[1] + j]);
        printf("\n");
    }
    maskpos_result_free(r);
    maskpos_config_free(c);

    /* a simulation; a bad setting is refused with the command's message */
    int calls = 0;
    c = maskpos_config_new("simulate");
    if (maskpos_config_set(c, "alpha", "1.5") == MASKPOS_ERR) printf("refused: %s\n", maskpos_last_error());
    if (maskpos_config_set(c, "rope", "1") || maskpos_config_set(c, "batch", "2000") ||
        maskpos_config_set(c, "seq", "16") || maskpos_config_set(c, "layers", "3") ||
        maskpos_simulate(c, show_progress, &calls, &r))
        return fail("simulate");
    printf("progress called %d times\n", calls);
    for (int l = 0; l < maskpos_result_nstats(r); l++)
        printf("layer %d: NRI %.6f, residue rms/noise %.2f\n", l + 1, maskpos_result_stat(r, l, "nri"),
               maskpos_result_stat(r, l, "residue_z_rms"));
    if (maskpos_result_save(r, argv[1], 0)) return fail("save");
    maskpos_result_free(r);
    maskpos_config_free(c);

    /* the saved run, loaded back */
    if (maskpos_load(argv[1], &r)) return fail("load");
    printf("loaded %s run from %s:", maskpos_result_kind(r), argv[1]);
    for (int i = 0; i < maskpos_result_narrays(r); i++) {
        int nd;
        maskpos_result_array(r, maskpos_result_array_name(r, i), NULL, &nd, shape);
        printf(" %s[%lld,%lld,%lld]", maskpos_result_array_name(r, i), (long long)shape[0], (long long)shape[1],
               (long long)shape[2]);
    }
    printf("\n");
    maskpos_result_free(r);
    return 0;
}
