/* files.h — the output folders (and single output files) a command claims for one run.
 *
 * Implements:
 *   - mp_outdir_claim: one run per output folder, and the one rule for "this folder is ours to
 *     write". A command that writes --out DIR claims it: a new or empty folder is claimed (a
 *     marker file ".maskpos-run" naming the command is written into it); a folder that holds a
 *     maskpos run is refused unless the new run continues it (resume) or replaces it (force); a
 *     non-empty folder that holds no maskpos run is refused (only an explicit --resume takes it at
 *     its word). The claim lasts until mp_outdir_release (or the process ends): the marker is
 *     held open under an exclusive flock, so a second process claiming the same folder is
 *     refused at once (another thread of this process too), and every temporary an atomic write
 *     (util.h) makes under the folder is listed in the marker before it is made, every file it
 *     commits once committed. --force removes exactly what is so listed: a folder that holds
 *     anything else (or a listed name that became a FIFO, device, socket or link) is refused
 *     whole, nothing removed. A temporary is ours only when listed, never by its name alone. A
 *     folder is the one its path names (realpath): --out through a symbolic link claims, lists
 *     and clears the folder the link points to.
 *   - mp_outfile_claim: the same for a single output file: an existing file is refused unless
 *     force; anything but a regular file (directory, FIFO, socket, device node, symbolic link)
 *     always.
 * Does not: decide exit codes (cli/), write the outputs (npy.h, json.h, util.h), or open inputs
 * (mp_input_open and mp_fsync_parent are in util.h: the atomic writes below them need them).
 * Marker format: the command on the first line (with " key=KEY" once the run has told its key:
 * mp_outdir_key), then one path per line (relative to the folder)
 * of each temporary a run of ours made there (NAME.tmp.PID, NAME.old.PID: util.h mp_temp_path) and
 * each file it committed. A marker without paths (older maskpos) lets a folder be continued, never
 * cleared.
 * Tested by: tests/test_core.c (FIFO, directory, claims, locks, listing, temporaries by the
 * marker, symbolic links, threads, device nodes), tests/test_badinput.c and tests/test_adversarial.c
 * (every command).
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
    MP_OUTDIR_CONTINUE = 3, /* like RESUME, but an unmarked non-empty folder is refused (reproduce) */
} MpOutdirMode;

/* Creates dir (mkdir -p) and claims it for one run of command cmd (e.g. "probe"); checks that
 * the folder is writable. Refusals name the folder and say what to do. */
int mp_outdir_claim(const char *dir, const char *cmd, MpOutdirMode mode, MpErr *e);
/* The same rule for a command whose output is one file (corpus, logits, plot, mkmodel --format
 * gguf): an existing regular file is refused unless force, anything else always (a directory,
 * FIFO, socket, device node or symbolic link); the folder it goes into must be writable (checked
 * now, by creating and removing a temp sibling). */
int mp_outfile_claim(const char *path, int force, MpErr *e);
/* Lists path (a file, or a whole folder renamed into place) in the markers of the held folders
 * above it; atomic writes (util.h) do this by themselves. */
void mp_outdir_note(const char *path);
/* The key of the run writing into the held folder dir (a hex string of everything that makes its
 * outputs: a resumed run has its first run's key). A folder that holds outputs of a run with another
 * key is refused (continuing it would mix two runs: a training run resumed from another run's
 * checkpoint into this one's folder); else the key is recorded in the marker. A marker without a
 * key (older maskpos) is taken at its word. */
int mp_outdir_key(const char *dir, const char *key, MpErr *e);
/* Ends this process's claim of dir (the lock is dropped with the last of its claims); files
 * committed under dir afterwards are no longer listed. A no-op for a folder not held. */
void mp_outdir_release(const char *dir);
/* Removes the files the marker of dir lists (recursively, empty subfolders too) and keeps the
 * marker; MP_ERR, nothing removed, if dir holds no marker or holds a file the marker does not
 * list (never removes what maskpos did not write). */
int mp_outdir_clear(const char *dir, MpErr *e);

#endif
