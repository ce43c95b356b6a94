/* mpi_job.c — see mpi_job.h. */
#include "cli/mpi_job.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"   /* mp_cmd_probe, MP_EXIT_* */
#include "core/mpi.h"  /* mp_mpi_* */

static int mpi_job_reproduce; /* 1 while rank 0 runs reproduce */

void mp_cli_mpi_share(char **args) {
    if (mp_mpi_size() < 2 || mp_mpi_rank() != 0 || !mpi_job_reproduce) return;
    /* the arguments as one buffer of NUL-terminated strings, its length first */
    int64_t len = 0;
    for (int k = 0; args[k]; k++) len += (int64_t)strlen(args[k]) + 1;
    char *buf = malloc((size_t)len);
    if (!buf) {
        fprintf(stderr, "maskpos reproduce: error: out of memory for a stage's arguments\n");
        mp_mpi_abort(MP_EXIT_ERROR);
    }
    char *p = buf;
    for (int k = 0; args[k]; k++) {
        const size_t n = strlen(args[k]) + 1;
        memcpy(p, args[k], n);
        p += n;
    }
    mp_mpi_bcast(&len, sizeof len, 0);
    mp_mpi_bcast(buf, (size_t)len, 0);
    free(buf);
}

/* Ranks 1..N-1 of a reproduce job: run each shared stage until rank 0 sends an empty one. */
static int mpi_job_serve(void) {
    int rc = MP_EXIT_OK;
    for (;;) {
        int64_t len = 0;
        mp_mpi_bcast(&len, sizeof len, 0);
        if (len <= 0) return rc;
        char *buf = malloc((size_t)len), *argv[64];
        if (!buf) {
            fprintf(stderr, "maskpos reproduce (rank %d): error: out of memory for a stage's arguments\n", mp_mpi_rank());
            mp_mpi_abort(MP_EXIT_ERROR);
        }
        mp_mpi_bcast(buf, (size_t)len, 0);
        int argc = 0;
        for (char *p = buf; p < buf + len && argc < 63; p += strlen(p) + 1) argv[argc++] = p;
        argv[argc] = NULL;
        if (argc > 0 && !strcmp(argv[0], "probe") && mp_cmd_probe(argc, argv) != MP_EXIT_OK) rc = MP_EXIT_FAILED;
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
