/* job.h — what every job of the library (probe, simulate, theory, gram, train) shares: the progress
 * callback.
 *
 * A job is one library call: a config struct in, a result struct out that owns its arrays, and a
 * progress callback through which the caller draws a bar and may ask for a clean stop (Python's
 * Ctrl-C). The command-line files under src/cli parse flags, call the job, print and write.
 * Tested by: the tests of each job (docs/library.md lists them).
 */
#ifndef MP_JOB_H
#define MP_JOB_H

#include <stdint.h>

#include "core/progress.h" /* MpProgressFn, MP_JOB_STOPPED_MSG: declared low so src/sim and src/train can take them */

/* MpProgressFn is called with the work done so far and the total (in the job's unit: sequences,
 * steps, ...): once before the first unit (done may be > 0 after a resume) and after every unit.
 * A nonzero return asks the job to stop: it returns MP_ERR with the message
 * MP_JOB_STOPPED_MSG at the next unit boundary, leaving its checkpoint (if any) resumable. */


/* How a job's result is written to a folder (every *_result_write takes one; NULL = zeros). */
typedef struct MpJobWriteOptions {
    int plot;      /* also the figures */
    int argc;      /* provenance in meta.json: the command line (may be 0) */
    char **argv;
    double wall_s; /* provenance: seconds since the job started */
} MpJobWriteOptions;

#endif
