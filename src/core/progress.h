/* progress.h — a progress bar with rate and ETA on stderr.
 *
 * Implements: a one-line bar redrawn at most 10 times a second, shown only when stderr is a
 * terminal and the task has run for more than a second (so logs and CI output stay clean).
 * Call from one thread only (e.g. inside an OpenMP ordered region or the master thread).
 * Does not: print anything when stderr is not a terminal, unless MASKPOS_PROGRESS=1 (which also
 * draws from the first update, without the one-second delay); MASKPOS_PROGRESS=0 silences it.
 */
#ifndef MP_PROGRESS_H
#define MP_PROGRESS_H

#include <stdint.h>

/* The progress callback of every library job (job/job.h): called with the work done so far and
 * the total (in the job's unit: sequences, steps, ...), once before the first unit (done may be
 * > 0 after a resume) and after every unit; a nonzero return asks the job to stop cleanly. */
typedef int (*MpProgressFn)(void *ctx, int64_t done, int64_t total);
/* The message of a job stopped that way. */
#define MP_JOB_STOPPED_MSG "stopped by the caller"

typedef struct MpProgress {
    char label[64];
    char unit[16];
    int64_t total;
    double start, last;
    int enabled;
    int forced; /* MASKPOS_PROGRESS=1: draw from the start, terminal or not */
    int shown;
} MpProgress;

void mp_progress_init(MpProgress *p, const char *label, const char *unit, int64_t total);
void mp_progress_update(MpProgress *p, int64_t done);
void mp_progress_finish(MpProgress *p);

#endif
