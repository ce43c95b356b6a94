/* files.h — what every command does with the files it reads and the folders it writes.
 *
 * Implements:
 *   - mp_input_open / mp_input_open_fd: open a file we are about to read (input of any loader)
 *     without blocking and refuse anything that is not a regular file — a FIFO would otherwise
 *     hang the reader for ever, a directory fails later with a confusing message. Every loader
 *     (safetensors, GGUF, config.json, tokenizer files, .npy, token files, corpora, checkpoints,
 *     plot inputs) opens its files through these.
 *   - mp_fsync_parent: flush a directory entry after a rename (used by atomic writes).
 *   - mp_outdir_claim: one run per output folder. A command that writes --out DIR claims it:
 *     an empty or new folder is claimed (a marker file ".maskpos-run" naming the command is
 *     written into it); a folder that already holds a maskpos run is refused unless the new run
 *     continues it (resume) or replaces it (force: the previous run's files are removed first);
 *     a non-empty folder that holds no maskpos run is refused unless the run says it continues
 *     what is there (resume), and nothing of the user's is ever deleted. mp_outfile_claim: the same for a single output file.
 * Does not: decide exit codes (cli/), or write the outputs (npy.h, json.h, util.h).
 * Tested by: tests/test_core.c (FIFO, directory, claims), tests/test_badinput.c (every command).
 */
#ifndef MP_FILES_H
#define MP_FILES_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h" /* MpErr */

/* Opens path read-only; refuses non-regular files ("<path>: is a directory" / "<path>: not a
 * regular file (a FIFO, socket or device)"). *size (may be NULL) gets the file length. */
int mp_input_open_fd(const char *path, int64_t *size, MpErr *e);      /* fd, or -1 with a message */
FILE *mp_input_open(const char *path, int64_t *size, MpErr *e);       /* "rb" stream, or NULL */

/* fsync of the directory that holds path (the entry a rename created). */
int mp_fsync_parent(const char *path, MpErr *e);

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
