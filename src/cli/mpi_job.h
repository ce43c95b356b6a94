/* mpi_job.h — `maskpos` under mpirun (more than one rank): which commands run, what the ranks
 * other than 0 do, and how `reproduce` hands its probe stages to them (docs/mpi.md).
 *
 * Implements: mp_cli_mpi_run, the entry of every rank when the job has N > 1 ranks: probe and
 * simulate run on every rank (they split the sequences among themselves); reproduce runs on rank
 * 0, and ranks 1..N-1 wait for the probe stages it shares (mp_cli_mpi_share: the probe's
 * settings) and run them beside it through the library (mp_probe_run); any other command is refused. Ranks other than 0 print nothing on stdout (rank 0 alone
 * prints progress and writes outputs); their errors still reach stderr.
 * Does not: split or merge work (model/probe_ranks.c, sim/simulate.c); talk to MPI (core/mpi.c).
 * Tested by: tests/test_mpi.c.
 */
#ifndef MP_CLI_MPI_JOB_H
#define MP_CLI_MPI_JOB_H

#include <stddef.h>

/* dispatch: the one-process command dispatcher of main.c (argv[0] = "maskpos"). */
int mp_cli_mpi_run(int argc, char **argv, int (*dispatch)(int argc, char **argv));
/* Rank 0 of a reproduce job: ranks 1..N-1 run the job beside the caller, who runs it next. job
 * "probe": settings [len bytes] are NUL-terminated "name=value" strings of the probe's option
 * table (job/probe_opts.h), parsed there into the same MpProbeConfig (not an argv re-parsed by
 * `maskpos probe`). A no-op with one rank. */
void mp_cli_mpi_share(const char *job, const char *settings, size_t len);

#endif
