/* mpi.h — the only door to MPI: process ranks, ordered point-to-point transfers of doubles,
 * broadcasts and agreement, for runs started by `mpirun -np N maskpos …` (docs/mpi.md).
 *
 * Implements: init/finalize (MPI is started only when a launcher set the job's environment, so
 * the MPI build run by hand behaves exactly like the plain one); rank and size; blocking send and
 * receive of int64/double arrays (any length: split into pieces below INT_MAX) and broadcasts,
 * each waiting by polling with short sleeps, so an idle rank does not spin a core the busy ranks
 * need; mp_mpi_agree, the all-ranks AND of a status, which lets every rank leave together when one
 * failed during setup.
 * Built without MPI (the default: no -DMP_MPI), every function is a stub of a one-process job:
 * rank 0 of 1; the transfers are never reached there and abort if they are.
 * Does not: decide who computes what (the callers: model/probe_ranks.c, sim/simulate.c).
 * Tested by: tests/test_mpi.c (under mpirun, against one process).
 */
#ifndef MP_CORE_MPI_H
#define MP_CORE_MPI_H

#include <stddef.h>
#include <stdint.h>

/* Starts MPI when this process was launched by mpirun/srun (OMPI_COMM_WORLD_SIZE, PMI_SIZE or
 * PMIX_RANK set) and the build has MPI. Threads call MPI one at a time (MPI_THREAD_SERIALIZED).
 * Returns 0, or -1 with a message on stderr when MPI cannot start. */
int mp_mpi_init(int *argc, char ***argv);
/* Ends MPI (when started). */
void mp_mpi_finalize(void);
/* Ends every rank of the job with status code (MPI_Abort), or exits this process without MPI. */
void mp_mpi_abort(int code);
int mp_mpi_rank(void);          /* 0 without MPI */
int mp_mpi_size(void);          /* 1 without MPI */
int mp_mpi_built(void);         /* 1 when built with MPI (make MPI=1) */

/* Blocking, ordered between one pair of ranks (MPI's non-overtaking rule, one tag). */
void mp_mpi_send_f64(const double *buf, size_t n, int dest);
void mp_mpi_recv_f64(double *buf, size_t n, int src);
void mp_mpi_send_i64(const int64_t *buf, size_t n, int dest);
void mp_mpi_recv_i64(int64_t *buf, size_t n, int src);
/* buf (n bytes) from root to every rank. */
void mp_mpi_bcast(void *buf, size_t n, int root);
/* 1 when ok is nonzero on every rank (a collective: every rank must call it). */
int mp_mpi_agree(int ok);

#endif
