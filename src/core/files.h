/* files.h — the output folders (and single output files) a command claims for one run.
 *
 * Implements:
 *   - mp_outdir_claim: one run per output folder. A command that writes --out DIR claims it:
 *     an empty or new folder is claimed (a marker file ".maskpos-run" naming the command is
 *     written into it); a folder that already holds a maskpos run is refused unless the new run
 *     continues it (resume) or replaces it (force: the previous run's files are removed first);
 *     a non-empty folder that holds no maskpos run is refused unless the run says it continues
 *     what is there (resume), and nothing of the user's is ever deleted. mp_outfile_claim: the same for a single output file.
 * Does not: decide exit codes (cli/), write the outputs (npy.h, json.h, util.h), or open inputs
 * (mp_input_open and mp_fsync_parent are in util.h: the atomic writes below them need them).
 * Tested by: tests/test_core.c (FIFO, directory, claims), tests/test_badinput.c (every command).
 */
#ifndef MP_FILES_H
#define MP_FILES_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h" /* MpErr */

#define MP_OUTDIR_MARKER ".maskpos-run"

typedef enum MpOutdirMode {
    MP_OUTDIR_NEW = 0,    /* refuse a folder that holds an earlier run */
    MP_OUTDIR_RESUME = 1, /* an earlier run of the same command is continued (or an unmarked folder) */
    MP_OUTDIR_FORCE = 2,  /* an earlier maskpos run's files are removed first */
} MpOutdirMode;

/* Creates dir (mkdir -p) and claims it for one run of command cmd (e.g. "probe"); checks that
 * the folder is writable. Refusals name the folder and say what to do. */
int mp_outdir_claim(const char *dir, const char *cmd, MpOutdirMode mode, MpErr *e);
/* The same rule for a command whose output is one file (corpus, logits, plot, mkmodel --format
 * gguf): an existing path is refused unless force (a directory always is); the folder it goes
 * into must be writable (checked now, by creating and removing a temp sibling). */
int mp_outfile_claim(const char *path, int force, MpErr *e);
/* Removes everything in a claimed folder (recursively) except the marker; MP_ERR if dir holds
 * no marker (never removes a folder maskpos did not claim). */
int mp_outdir_clear(const char *dir, MpErr *e);

#endif
