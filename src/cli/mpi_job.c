/* mpi_job.c — see mpi_job.h. */
#include "cli/mpi_job.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"        /* mp_cli_error, MP_EXIT_* */
#include "core/files.h"     /* MP_OUTDIR_* */
#include "core/mpi.h"       /* mp_mpi_* */
#include "job/probe_job.h"      /* mp_probe_run */
#include "job/probe_opts.h" /* mp_probe_opt_parse: the shared settings */

static int mpi_job_reproduce; /* 1 while rank 0 runs reproduce */

void mp_cli_mpi_share(const char *job, const char *settings, size_t len) {
    if (mp_mpi_size() < 2 || mp_mpi_rank() != 0 || !mpi_job_reproduce) return;
    /* one buffer: the job's name, NUL, its settings; its length first */
    const size_t jl = strlen(job) + 1;
    int64_t total = (int64_t)(jl + len);
    char *buf = malloc(jl + len);
    if (!buf) {
        fprintf(stderr, "maskpos reproduce: error: out of memory for a stage's settings\n");
        mp_mpi_abort(MP_EXIT_ERROR);
    }
    memcpy(buf, job, jl);
    memcpy(buf + jl, settings, len);
    mp_mpi_bcast(&total, sizeof total, 0);
    mp_mpi_bcast(buf, (size_t)total, 0);
    free(buf);
}

/* A probe shared by rank 0: its settings (NUL-terminated "name=value" strings, [p, end)) into a
 * config through the probe's option table, then the run; this rank's part goes to rank 0. */
static int mpi_job_probe(const char *p, const char *end) {
    MpProbeConfig c;
    mp_probe_config_init(&c);
    MpErr e = {0};
    int rc = MP_OK;
    for (; rc == MP_OK && p < end; p += strlen(p) + 1) rc = mp_probe_opt_parse(&c, p, &e);
    if (rc != MP_OK) { /* rank 0 wrote them from the same table: a bug, not bad input */
        fprintf(stderr, "maskpos probe (rank %d): error: a shared setting: %s\n", mp_mpi_rank(), e.msg);
        mp_mpi_abort(MP_EXIT_ERROR);
    }
    c.out_mode = c.resume ? MP_OUTDIR_RESUME : MP_OUTDIR_NEW;
    c.log = stdout;
    MpProbeResult res;
    rc = mp_probe_run(&res, &c, &e);
    if (rc != MP_OK && e.msg[0]) mp_cli_error("probe", "%s", e.msg);
    mp_probe_result_free(&res);
    return rc == MP_OK ? MP_EXIT_OK : MP_EXIT_FAILED;
}

/* Ranks 1..N-1 of a reproduce job: run each shared stage until rank 0 sends an empty one. */
static int mpi_job_serve(void) {
    int rc = MP_EXIT_OK;
    for (;;) {
        int64_t len = 0;
        mp_mpi_bcast(&len, sizeof len, 0);
        if (len <= 0) return rc;
        char *buf = malloc((size_t)len + 1);
        if (!buf) {
            fprintf(stderr, "maskpos reproduce (rank %d): error: out of memory for a stage's settings\n", mp_mpi_rank());
            mp_mpi_abort(MP_EXIT_ERROR);
        }
        mp_mpi_bcast(buf, (size_t)len, 0);
        buf[len] = 0;
        const char *settings = buf + strlen(buf) + 1;
        if (!strcmp(buf, "probe") && mpi_job_probe(settings, buf + len) != MP_EXIT_OK) rc = MP_EXIT_FAILED;
        free(buf);
    }
}

int mp_cli_mpi_run(int argc, char **argv, int (*dispatch)(int argc, char **argv)) {
    const char *cmd = argc > 1 ? argv[1] : "";
    const int rank = mp_mpi_rank();
    if (strcmp(cmd, "probe") && strcmp(cmd, "simulate") && strcmp(cmd, "reproduce")) {
        if (rank == 0)
            fprintf(stderr, "maskpos: error: '%s' runs in one process; under mpirun only probe, simulate and reproduce "
                            "split their work (HINT: run it without mpirun, or with -np 1)\n", cmd);
        return MP_EXIT_ERROR;
    }
    if (rank > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "maskpos (rank %d): error: cannot silence stdout\n", rank);
        mp_mpi_abort(MP_EXIT_ERROR);
    }
    if (!strcmp(cmd, "reproduce")) {
        if (rank > 0) return mpi_job_serve();
        mpi_job_reproduce = 1;
        const int rc = dispatch(argc, argv);
        int64_t end = 0; /* releases ranks 1..N-1 */
        mp_mpi_bcast(&end, sizeof end, 0);
        mpi_job_reproduce = 0;
        return rc;
    }
    return dispatch(argc, argv);
}
