/* mpi.c — see mpi.h. With -DMP_MPI (make MPI=1, mpicc): OpenMPI; without: one-process stubs. */
#include "core/mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef MP_MPI
#include <mpi.h>

static int mpi_on, mpi_rank, mpi_size = 1;

/* Pieces of at most 2^27 elements keep every count an int. */
#define MPI_PIECE ((size_t)1 << 27)
#define MPI_TAG 7

int mp_mpi_built(void) { return 1; }

int mp_mpi_init(int *argc, char ***argv) {
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK")) return 0;
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "maskpos: error: MPI_Init_thread failed\n");
        return -1;
    }
    mpi_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    if (provided < MPI_THREAD_SERIALIZED && mpi_size > 1) {
        fprintf(stderr, "maskpos: error: this MPI gives thread level %d, below MPI_THREAD_SERIALIZED\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return 0;
}

void mp_mpi_finalize(void) {
    if (mpi_on) MPI_Finalize();
    mpi_on = 0;
}

void mp_mpi_abort(int code) {
    fflush(stdout);
    if (mpi_on) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

int mp_mpi_rank(void) { return mpi_rank; }
int mp_mpi_size(void) { return mpi_size; }

/* Waits for q, sleeping between tests: 0 at first, growing to 0.2 ms, so a waiting rank leaves
 * its core to the ranks still computing (MPI's own blocking calls poll at full speed). */
static void mpi_wait(MPI_Request *q) {
    int done = 0;
    long ns = 0;
    for (;;) {
        MPI_Test(q, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (ns) {
            struct timespec ts = {0, ns};
            nanosleep(&ts, NULL);
        }
        ns = ns ? (ns < 200000 ? ns * 2 : 200000) : 1000;
    }
}

static void mpi_xfer(void *buf, size_t n, size_t size, MPI_Datatype t, int peer, int send) {
    for (size_t k = 0; k < n; k += MPI_PIECE) {
        const int cnt = (int)(n - k < MPI_PIECE ? n - k : MPI_PIECE);
        MPI_Request q;
        char *p = (char *)buf + k * size;
        if (send) MPI_Isend(p, cnt, t, peer, MPI_TAG, MPI_COMM_WORLD, &q);
        else MPI_Irecv(p, cnt, t, peer, MPI_TAG, MPI_COMM_WORLD, &q);
        mpi_wait(&q);
    }
}

void mp_mpi_send_f64(const double *buf, size_t n, int dest) { mpi_xfer((void *)buf, n, 8, MPI_DOUBLE, dest, 1); }
void mp_mpi_recv_f64(double *buf, size_t n, int src) { mpi_xfer(buf, n, 8, MPI_DOUBLE, src, 0); }
void mp_mpi_send_i64(const int64_t *buf, size_t n, int dest) { mpi_xfer((void *)buf, n, 8, MPI_INT64_T, dest, 1); }
void mp_mpi_recv_i64(int64_t *buf, size_t n, int src) { mpi_xfer(buf, n, 8, MPI_INT64_T, src, 0); }

void mp_mpi_bcast(void *buf, size_t n, int root) {
    if (!mpi_on) return;
    for (size_t k = 0; k < n; k += MPI_PIECE) {
        MPI_Request q;
        MPI_Ibcast((char *)buf + k, (int)(n - k < MPI_PIECE ? n - k : MPI_PIECE), MPI_BYTE, root, MPI_COMM_WORLD, &q);
        mpi_wait(&q);
    }
}

int mp_mpi_agree(int ok) {
    if (!mpi_on) return ok != 0;
    int in = ok != 0, out = 0;
    MPI_Request q;
    MPI_Iallreduce(&in, &out, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &q);
    mpi_wait(&q);
    return out;
}

#else /* one process */

int mp_mpi_built(void) { return 0; }
int mp_mpi_init(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}
void mp_mpi_finalize(void) {}
void mp_mpi_abort(int code) {
    fflush(stdout);
    exit(code);
}
int mp_mpi_rank(void) { return 0; }
int mp_mpi_size(void) { return 1; }

static void mpi_unreachable(void) {
    fprintf(stderr, "maskpos: internal error: an MPI transfer in a build without MPI\n");
    abort();
}
void mp_mpi_send_f64(const double *buf, size_t n, int dest) { (void)buf, (void)n, (void)dest, mpi_unreachable(); }
void mp_mpi_recv_f64(double *buf, size_t n, int src) { (void)buf, (void)n, (void)src, mpi_unreachable(); }
void mp_mpi_send_i64(const int64_t *buf, size_t n, int dest) { (void)buf, (void)n, (void)dest, mpi_unreachable(); }
void mp_mpi_recv_i64(int64_t *buf, size_t n, int src) { (void)buf, (void)n, (void)src, mpi_unreachable(); }
void mp_mpi_bcast(void *buf, size_t n, int root) { (void)buf, (void)n, (void)root; }
int mp_mpi_agree(int ok) { return ok != 0; }

#endif
