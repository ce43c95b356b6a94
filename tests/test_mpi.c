/* test_mpi.c — `maskpos probe|simulate|reproduce` under mpirun (src/core/mpi.c, src/cli/mpi_job.c,
 * src/model/probe_ranks.c, the MPI path of src/sim/simulate.c), against one process:
 *   - probe with 3 ranks (more ranks than cores: --oversubscribe) writes maps, standard errors,
 *     per-head maps and every statistic of meta.json byte for byte as one process with 2
 *     threads, causal with BOS-first rows (block test from position 1) and without the mask,
 *     and with --stats variance (its .npy files and slopes), --stats freq --rope-keep-high 0.75 (its
 *     .npy files) and --stats position (pos_probe.npy); meta.json records mpi_ranks 3 and 1;
 *   - simulate with 3 ranks (11 blocks of 64: the last rank gets fewer) equals one process (the
 *     maps and, with --variance, the variance maps);
 *   - a rank killed (SIGKILL) after a few sequences: mpirun ends the job with an error, rank 0
 *     says the checkpoint is resumable, no meta.json is left; --resume with 2 ranks then writes
 *     the bytes of the uninterrupted one-process run;
 *   - reproduce --only fig5 on 2 ranks: its probe stages (handed by rank 0 to rank 1 as the
 *     probe's settings, src/job/probe_opts.h, read there into an MpProbeConfig: mpi_job_probe in
 *     src/cli/mpi_job.c) write the maps of a one-process `probe` with the stage's flags, byte for
 *     byte;
 *   - other commands are refused under mpirun with more than one rank (exit 2);
 *   - bf16 on the emulated AMX kernel (MASKPOS_KERNEL=amxemu, issue #37) with 3 ranks equals one
 *     process; ranks whose kernels are of two bit classes (an MPMD launch, as two CPUs would
 *     choose) all stop before a sequence, with the class to set for every rank.
 * The merge itself (mp_probe_acc_merge) is checked against direct accumulation in
 * tests/test_model_probe_merge.c. Skipped (with the reason) in a build without MPI (make MPI=1
 * builds build-mpi/, which runs this test) or when mpirun is missing.
 * mpirun flags that work as root in a container: --allow-run-as-root --oversubscribe --bind-to
 * none (docs/mpi.md); no OMPI_MCA_* setting was needed on the machines we ran.
 */
#include "test_model_util.h"

#include <signal.h>

#include "core/util.h" /* mp_file_exists */

#define MPIRUN "mpirun --allow-run-as-root --oversubscribe --bind-to none"

static int mpi_ready(void) {
#ifndef MP_MPI
    return 0;
#else
    return system("command -v mpirun > /dev/null 2>&1") == 0;
#endif
}

#define SKIP_WITHOUT_MPI()                                                                                             \
    do {                                                                                                               \
        if (!mpi_ready()) {                                                                                            \
            printf("SKIPPED: %s\n", mp_mpi_reason());                                                                  \
            skip();                                                                                                    \
        }                                                                                                              \
    } while (0)

static const char *mp_mpi_reason(void) {
#ifndef MP_MPI
    return "this build has no MPI (make MPI=1 builds build-mpi/ with its own copy of this test)";
#else
    return "mpirun not found (apt-get install openmpi-bin)";
#endif
}

static void same_files(const char *a, const char *b, const char **files, int n) {
    char pa[512], pb[512];
    for (int i = 0; i < n; i++) {
        snprintf(pa, sizeof pa, "%s/%s", a, files[i]);
        snprintf(pb, sizeof pb, "%s/%s", b, files[i]);
        if (!mp_file_exists(pa)) fail_msg("%s is missing", pa);
        if (!files_equal(pa, pb)) fail_msg("%s and %s differ", pa, pb);
    }
}

static void same_meta(const char *a, const char *b, const char **keys, int n) {
    for (int i = 0; i < n; i++) {
        char *x = meta_key(a, keys[i]), *y = meta_key(b, keys[i]);
        if (strcmp(x, y)) fail_msg("meta.json %s differs: %s vs %s", keys[i], x, y);
        free(x);
        free(y);
    }
}

/* N x S raw uint32 ids, pseudo-random in [0, V), with BOS (V - 2, mkmodel's) first when bos. */
static void raw_ids(const char *path, int N, int S, int V, int bos) {
    uint32_t *ids = malloc(sizeof *ids * (size_t)N * S), s = 12345;
    for (int i = 0; i < N * S; i++) {
        s = s * 1664525u + 1013904223u;
        ids[i] = (bos && i % S == 0) ? (uint32_t)(V - 2) : (s >> 8) % (uint32_t)V;
    }
    mp_test_write_file(path, ids, sizeof *ids * (size_t)N * S);
    free(ids);
}

static void probe_case(const char *d, const char *model, const char *ids, const char *flags, const char *tag) {
    char out[16384], one[512], three[512];
    snprintf(one, sizeof one, "%s/one_%s", d, tag);
    snprintf(three, sizeof three, "%s/three_%s", d, tag);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --seq 24 --out %s --threads 2 --per-head --quiet %s", model,
                         ids, one, flags);
    if (rc != 0) fail_msg("one process failed (%d): %s", rc, out);
    rc = mp_test_shell(out, sizeof out, MPIRUN " -np 3 %s probe %s --tokens %s --seq 24 --out %s --threads 1 --per-head %s",
                       MP_TEST_BIN, model, ids, three, flags);
    if (rc != 0) fail_msg("mpirun -np 3 failed (%d): %s", rc, out);
    if (!strstr(out, "3 MPI ranks")) fail_msg("rank 0 did not report 3 ranks: %s", out);
    /* only rank 0 prints: one header line, not three */
    const char *p = strstr(out, "probe: ");
    if (!p || strstr(p + 1, "probe: ")) fail_msg("expected one header line from rank 0: %s", out);
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy", "scores_heads.npy"};
    same_files(one, three, files, 4);
    const char *keys[] = {"stats", "residue_block_z", "residue_block_z_regions", "n", "stats_first_position"};
    same_meta(one, three, keys, 5);
    if (strstr(flags, "variance")) { /* the variance row's sums through the ranks' parts */
        const char *vf[] = {"var_attn.npy", "var_attn_se.npy", "var_attn_heads.npy", "var_attn_heads_se.npy", "var_resid.npy",
                            "var_resid_se.npy"};
        same_files(one, three, vf, 6);
        const char *vk[] = {"variance_slope_attn", "variance_slope_attn_se", "variance_slope_resid", "variance_slope_resid_se"};
        same_meta(one, three, vk, 4);
    }
    if (strstr(flags, "freq")) { /* the RoPE frequency row's sums through the ranks' parts */
        const char *ff[] = {"freq_q_norm.npy", "freq_q_norm_se.npy", "freq_k_norm.npy", "freq_k_norm_se.npy", "freq_contrib.npy",
                            "freq_contrib_se.npy", "freq_rest.npy", "freq_rest_se.npy", "freq_angle.npy", "freq_base.npy"};
        same_files(one, three, ff, 10);
    }
    if (strstr(flags, "position")) { /* the position probe's per-split sums and held-out rows through the ranks' parts */
        const char *pf[] = {"pos_probe.npy"};
        same_files(one, three, pf, 1);
    }
    char *r1 = meta_key(one, "mpi_ranks"), *r3 = meta_key(three, "mpi_ranks");
    assert_string_equal(r1, "1");
    assert_string_equal(r3, "3");
    free(r1);
    free(r3);
}

static void test_probe_three_ranks_equal_one_process(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], bos[256];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 3 --heads 4 --kv-heads 2 --vocab 300 --seed 5");
    snprintf(ids, sizeof ids, "%s/ids.bin", d);
    snprintf(bos, sizeof bos, "%s/bos.bin", d);
    raw_ids(ids, 11, 24, 300, 0);
    raw_ids(bos, 11, 24, 300, 1);
    probe_case(d, model, bos, "--layers 1,3", "bos");
    probe_case(d, model, ids, "--bidirectional", "bidir");
    probe_case(d, model, ids, "--layers 1,3 --stats variance", "var");
    probe_case(d, model, ids, "--layers 1,3 --stats freq --rope-keep-high 0.75", "freq");
    probe_case(d, model, ids, "--layers 1,3 --stats position --pos-dim 16 --pos-stride 2", "pos");
    /* the residual stream of sequences 0, 2, ... 10 only: each rank picks them by their index in the run */
    probe_case(d, model, ids, "--layers 1,3 --stats variance,position --pos-dim 16 --resid-stride 2", "rs2");
    /* sliding windows (8 of 24 tokens in layer 1): every rank's sums leave the same keys out */
    char g2[256];
    snprintf(g2, sizeof g2, "%s/g2", d);
    model_make(g2, "--arch gemma2 --layers 2 --head-dim 16 --vocab 300 --seed 7 --sliding-window 8");
    probe_case(d, g2, ids, "--layers all --probs --recency", "window");
}

/* Probabilities of the embedded RoPE model on packed text: a sequence's heads reach the map as
 * one sum on every rank (added head by head before, they rounded differently through a rank's
 * part: 2252 of 65536 entries of probs.npy, by up to 2.8e-17) */
static void test_probe_probs_two_ranks_equal_one_process(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char out[16384], one[512], two[512];
    snprintf(one, sizeof one, "%s/one", d);
    snprintf(two, sizeof two, "%s/two", d);
    const char *args = "probe " MP_SOURCE_DIR "/models/rope --data " MP_SOURCE_DIR
                       "/models/kjv.txt --pack --n 40 --seq 128 --probs --quiet";
    int rc = mp_test_run(out, sizeof out, "%s --out %s", args, one);
    if (rc != 0) fail_msg("one process failed (%d): %s", rc, out);
    rc = mp_test_shell(out, sizeof out, MPIRUN " -np 2 %s %s --out %s", MP_TEST_BIN, args, two);
    if (rc != 0) fail_msg("mpirun -np 2 failed (%d): %s", rc, out);
    const char *files[] = {"probs.npy", "scores.npy"};
    same_files(one, two, files, 2);
    const char *keys[] = {"attention_sink", "attention_entropy"};
    same_meta(one, two, keys, 2);
}

static void test_simulate_three_ranks_equal_one_process(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char out[16384], one[512], three[512];
    snprintf(one, sizeof one, "%s/one", d);
    snprintf(three, sizeof three, "%s/three", d);
    /* 700 sequences: 11 blocks of 64, the last one short; ranks get 4, 4 and 3 blocks */
    int rc = mp_test_run(out, sizeof out, "simulate --batch 700 --seq 20 --rope --alpha 0.3 --variance --threads 2 --quiet --out %s",
                         one);
    if (rc != 0) fail_msg("one process failed (%d): %s", rc, out);
    rc = mp_test_shell(out, sizeof out, MPIRUN " -np 3 %s simulate --batch 700 --seq 20 --rope --alpha 0.3 --variance --threads 1 "
                                        "--out %s", MP_TEST_BIN, three);
    if (rc != 0) fail_msg("mpirun -np 3 failed (%d): %s", rc, out);
    const char *files[] = {"scores.npy", "scores_se.npy", "probs.npy", "scores_diagnorm.npy", "var_attn.npy", "var_attn_se.npy",
                           "var_closed.npy", "var_closed_se.npy", "var_gap_se.npy"};
    same_files(one, three, files, 9);
    const char *keys[] = {"stats", "batch"};
    same_meta(one, three, keys, 2);
    char *r3 = meta_key(three, "mpi_ranks");
    assert_string_equal(r3, "3");
    free(r3);
}

static void test_killed_rank_then_resume(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384], path[1024], full[256], res[256];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 6");
    snprintf(ids, sizeof ids, "%s/ids.bin", d);
    raw_ids(ids, 13, 24, 300, 0);
    snprintf(full, sizeof full, "%s/full", d);
    snprintf(res, sizeof res, "%s/res", d);
    int rc = mp_test_run(out, sizeof out, "probe %s --tokens %s --seq 24 --out %s --per-head --quiet", model, ids, full);
    if (rc != 0) fail_msg("uninterrupted run failed (%d): %s", rc, out);
    /* rank 1 of 3 runs sequences 1, 4, 7, 10 and kills itself once it has computed 7, unsent.
     * mpirun's SIGTERM-to-SIGKILL grace is 1 s by default: with other work on the machine rank 0
     * did not always run its handler within it (3 runs in 25 lost the line beside three busy
     * loops; 0 in 25 with 10 s) */
    rc = mp_test_shell(out, sizeof out,
                       "MASKPOS_TEST_KILL_RANK=1 MASKPOS_TEST_KILL_AFTER=7 " MPIRUN
                       " --mca odls_base_sigkill_timeout 10 -np 3 %s probe %s --tokens %s --seq 24 --out %s --per-head --threads 1 --checkpoint-every 2",
                       MP_TEST_BIN, model, ids, res);
    if (rc == 0) fail_msg("the job with a killed rank exited 0: %s", out);
    if (!strstr(out, "exited on signal 9")) fail_msg("mpirun did not report the killed rank: %s", out);
    if (!strstr(out, "run again with --resume")) fail_msg("rank 0 did not say the run is resumable: %s", out);
    snprintf(path, sizeof path, "%s/checkpoint.bin", res);
    if (!mp_file_exists(path)) fail_msg("no checkpoint left after the killed rank: %s", out);
    snprintf(path, sizeof path, "%s/meta.json", res);
    assert_false(mp_file_exists(path)); /* nothing looks complete */
    /* resumed with another number of ranks */
    rc = mp_test_shell(out, sizeof out, MPIRUN " -np 2 %s probe %s --tokens %s --seq 24 --out %s --per-head --threads 1 --resume",
                       MP_TEST_BIN, model, ids, res);
    if (rc != 0) fail_msg("resume with 2 ranks failed (%d): %s", rc, out);
    if (!strstr(out, "sequences already done")) fail_msg("resume did not start from the checkpoint: %s", out);
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy", "scores_heads.npy"};
    same_files(full, res, files, 4);
    snprintf(path, sizeof path, "%s/checkpoint.bin", res);
    assert_false(mp_file_exists(path)); /* removed once the result is complete */
}

static void test_reproduce_model_stages(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char out[16384], a[512], b[512];
    int rc = mp_test_shell(out, sizeof out, MPIRUN " -np 2 %s reproduce --only fig5 --n 24 --threads 1 --out %s/rep",
                           MP_TEST_BIN, d);
    if (rc != 0 && rc != 1) fail_msg("reproduce under mpirun -np 2 failed (%d): %s", rc, out); /* 1: rows that differ */
    /* the stage's own settings (src/repro/runs.c: probe_config) as flags, in one process */
    rc = mp_test_run(out, sizeof out, "probe %s/models/rope --data %s/models/kjv.txt --n 24 --seq 128 --layers 1-4 --quiet "
                     "--compute f32 --pack --threads 1 --out %s/one", MP_SOURCE_DIR, MP_SOURCE_DIR, d);
    if (rc != 0) fail_msg("one-process probe failed (%d): %s", rc, out);
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy"};
    snprintf(a, sizeof a, "%s/one", d);
    snprintf(b, sizeof b, "%s/rep/fig5/rope", d);
    same_files(a, b, files, 3);
    char *r2 = meta_key(b, "mpi_ranks");
    assert_string_equal(r2, "2");
    free(r2);
    snprintf(a, sizeof a, "%s/rep/report.md", d);
    assert_true(mp_file_exists(a)); /* rank 0 wrote the report */
}

/* bf16 through the emulated tile layer: 3 ranks (1 thread each) == one process with 2 threads. */
static void test_probe_amx_ranks_equal_one_process(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384], one[512], three[512];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 2 --heads 4 --kv-heads 2 --vocab 300 --seed 5 --dtype bf16");
    snprintf(ids, sizeof ids, "%s/ids.bin", d);
    raw_ids(ids, 7, 24, 300, 0);
    snprintf(one, sizeof one, "%s/one", d);
    snprintf(three, sizeof three, "%s/three", d);
    int rc = mp_test_shell(out, sizeof out, "MASKPOS_KERNEL=amxemu %s probe %s --tokens %s --seq 24 --out %s --threads 2 --per-head "
                           "--quiet --compute bf16", MP_TEST_BIN, model, ids, one);
    if (rc != 0) fail_msg("one process failed (%d): %s", rc, out);
    rc = mp_test_shell(out, sizeof out, MPIRUN " -np 3 -x MASKPOS_KERNEL=amxemu %s probe %s --tokens %s --seq 24 --out %s "
                       "--threads 1 --per-head --compute bf16", MP_TEST_BIN, model, ids, three);
    if (rc != 0) fail_msg("mpirun -np 3 failed (%d): %s", rc, out);
    if (!strstr(out, "matmul: kernel amxemu, bit class tiles")) fail_msg("rank 0 did not name the kernel: %s", out);
    const char *files[] = {"scores.npy", "scores_se.npy", "scores_diagnorm.npy", "scores_heads.npy"};
    same_files(one, three, files, 4);
    const char *keys[] = {"stats", "matmul_kernel", "matmul_bits"};
    same_meta(one, three, keys, 3);
}

/* Two ranks whose kernels sum bf16 matmuls in two orders: both stop, rank 0 before any sequence. */
static void test_probe_ranks_of_two_classes_stop(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    const char *d = mp_test_tmpdir();
    char model[256], ids[256], out[16384];
    snprintf(model, sizeof model, "%s/m", d);
    model_make(model, "--arch llama --layers 1 --vocab 300 --seed 5 --dtype bf16");
    snprintf(ids, sizeof ids, "%s/ids.bin", d);
    raw_ids(ids, 4, 16, 300, 0);
    const char *args = "probe %s --tokens %s --seq 16 --out %s/o --compute bf16 --quiet";
    char one[1024], cmd[4096];
    snprintf(one, sizeof one, args, model, ids, d);
    snprintf(cmd, sizeof cmd, MPIRUN " -np 1 -x MASKPOS_KERNEL=scalar %s %s : -np 1 -x MASKPOS_KERNEL=amxemu %s %s", MP_TEST_BIN, one,
             MP_TEST_BIN, one);
    int rc = mp_test_shell(out, sizeof out, "%s", cmd);
    print_message("%s", out);
    assert_true(rc != 0);
    assert_non_null(strstr(out, "MPI rank 1 sums bf16 matmuls in bit class tiles (kernel amxemu), rank 0 in class fma"));
    assert_non_null(strstr(out, "MASKPOS_KERNEL=fma for every rank"));
    char meta[512];
    snprintf(meta, sizeof meta, "%s/o/meta.json", d);
    assert_false(mp_file_exists(meta));
    /* the class named for every rank: the job runs */
    snprintf(cmd, sizeof cmd, MPIRUN " -np 1 -x MASKPOS_KERNEL=scalar %s %s --force : -np 1 -x MASKPOS_KERNEL=fma %s %s --force",
             MP_TEST_BIN, one, MP_TEST_BIN, one);
    rc = mp_test_shell(out, sizeof out, "%s", cmd);
    if (rc != 0) fail_msg("two kernels of class fma failed (%d): %s", rc, out);
}

static void test_other_commands_refused(void **state) {
    (void)state;
    SKIP_WITHOUT_MPI();
    char out[8192];
    int rc = mp_test_shell(out, sizeof out, MPIRUN " -np 2 %s theory --alpha 0 --n 3", MP_TEST_BIN);
    if (rc != 2 || !strstr(out, "runs in one process")) fail_msg("theory under mpirun -np 2: expected exit 2, got %d: %s", rc, out);
    /* one rank is a plain run */
    rc = mp_test_shell(out, sizeof out, MPIRUN " -np 1 %s theory --alpha 0 --n 3", MP_TEST_BIN);
    if (rc != 0 || !strstr(out, "0.151")) fail_msg("theory under mpirun -np 1 failed (%d): %s", rc, out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_three_ranks_equal_one_process),
        cmocka_unit_test(test_probe_probs_two_ranks_equal_one_process),
        cmocka_unit_test(test_simulate_three_ranks_equal_one_process),
        cmocka_unit_test(test_killed_rank_then_resume),
        cmocka_unit_test(test_reproduce_model_stages),
        cmocka_unit_test(test_probe_amx_ranks_equal_one_process),
        cmocka_unit_test(test_probe_ranks_of_two_classes_stop),
        cmocka_unit_test(test_other_commands_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
