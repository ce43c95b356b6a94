/* util.h — small environment helpers shared by every stage.
 *
 * Implements: opening a file we are about to read (mp_input_open / mp_input_open_fd: without
 * blocking, refusing anything that is not a regular file — a FIFO would otherwise hang the reader
 * for ever, a directory fails later with a confusing message; every loader opens its files through
 * these), wall clock, peak resident memory, `mkdir -p`, atomic file output (write to
 * "<path>.tmp.<pid>"; commit fsyncs it, renames it and fsyncs the folder; abort unlinks it: neither
 * a crash nor a power loss leaves a partial file under the final name; only a regular file is ever
 * replaced), strict number parsing for
 * CLI flags, FNV-1a hashing, and the OpenMP thread number (0 in a build without OpenMP).
 * Does not: print progress (progress.h) or decide exit codes (cli/).
 * Tested by: tests/test_core.c
 */
#ifndef MP_UTIL_H
#define MP_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h" /* MpErr, MP_OK/MP_ERR */

double mp_time_now(void);          /* seconds, monotonic */
size_t mp_peak_rss_bytes(void);    /* peak resident set size of this process, bytes */
int mp_thread_num(void);           /* this thread's number in the innermost OpenMP team; 0 outside one or without OpenMP */

/* Thread counts, whatever their source, obey one cap: a flag (--threads), the C API / Python
 * setting "threads", and OpenMP's default (OMP_NUM_THREADS, else the cores). More than this made
 * GOMP_parallel die for want of thread stacks (OMP_NUM_THREADS=100000). */
#define MP_THREADS_MAX 1024
/* *n = requested when > 0, else OpenMP's default (1 without OpenMP). A count outside
 * [1, MP_THREADS_MAX] is refused with one line naming its source: `source` ("--threads",
 * "threads") for a requested count, OMP_NUM_THREADS for the default. */
int mp_threads_resolve(int requested, const char *source, int *n, MpErr *e);

/* Opens path read-only; refuses non-regular files ("<path>: is a directory" / "<path>: not a
 * regular file (a FIFO, socket or device)"). *size (may be NULL) gets the file length. */
int mp_input_open_fd(const char *path, int64_t *size, MpErr *e);      /* fd, or -1 with a message */
FILE *mp_input_open(const char *path, int64_t *size, MpErr *e);       /* "rb" stream, or NULL */

/* fsync of the directory that holds path (the entry a rename created). */
int mp_fsync_parent(const char *path, MpErr *e);

int mp_mkdir_p(const char *dir, MpErr *e);
int mp_path_join(char *out, size_t cap, const char *dir, const char *name, MpErr *e);
int mp_file_exists(const char *path);

/* Atomic output file: fopen a temp sibling; commit renames it into place, abort removes it. */
typedef struct MpAtomicFile {
    FILE *f;
    char path[4096];
    char tmp[4200];
} MpAtomicFile;
int mp_atomic_open(MpAtomicFile *af, const char *path, MpErr *e);
/* fflush+fsync+fclose+rename+fsync folder; removes tmp on failure. Never renames over anything but
 * a regular file: a directory, FIFO, socket, device node or symbolic link at path is refused (the
 * temporary removed, path left as it was). */
int mp_atomic_commit(MpAtomicFile *af, MpErr *e);
void mp_atomic_abort(MpAtomicFile *af);           /* safe on a zeroed or committed struct */
int mp_file_write_atomic(const char *path, const void *buf, size_t n, MpErr *e);
/* The one name of a temporary sibling of path: "<path>.<kind>.<pid>" (kind "tmp": a file or folder
 * being written; "old": one being replaced), told to the write hook before it is made, so that
 * the output folder's marker lists it first (files.c: a killed run's temporaries are known as
 * ours by that list, never by their name alone). */
int mp_temp_path(char *out, size_t cap, const char *path, const char *kind, MpErr *e);
/* The same name, formatted only (nothing told); -1 when it does not fit. */
int mp_temp_name(char *out, size_t cap, const char *path, const char *kind);
/* What a file of this st_mode is, in words for a message ("a directory", "a symbolic link", "a
 * FIFO", "a socket", "a device node"); NULL for a regular file. */
const char *mp_file_kind(unsigned mode);
/* The write hook (files.c lists these paths in the marker of the output folder they are in): called
 * with each temporary's path before it is made (temp 1) and with each committed file's final path
 * (temp 0); NULL: none. */
typedef void (*MpWriteHook)(const char *path, int temp);
void mp_atomic_on_write(MpWriteHook hook);
/* 1 once an atomic write of this process failed for want of space (ENOSPC, EDQUOT, EFBIG): a
 * multi-stage run stops there instead of failing every later write. */
int mp_write_no_space(void);
/* Reads a whole regular file into a new NUL-terminated buffer (*data, *len bytes without the NUL).
 * Files larger than max_bytes are refused with "<path>: N bytes is too large for <what>". */
int mp_file_read_all(const char *path, size_t max_bytes, const char *what, char **data, size_t *len, MpErr *e);

/* Strict parsers: whole string must be a finite number / integer in range. */
int mp_parse_double(const char *s, double *out);
int mp_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* Comma-separated doubles, e.g. "0,0.2,0.4"; at most cap values. Returns count or -1. */
int mp_parse_double_list(const char *s, double *out, int cap);
/* Ranges "1-4", "2", "1,3-5" of positive integers <= hi into a bitmap (1-based). Returns count or -1. */
int mp_parse_range_list(const char *s, int hi, unsigned char *mask);

uint64_t mp_fnv1a64(const void *data, size_t n, uint64_t h); /* start with h = MP_FNV_INIT */
#define MP_FNV_INIT 14695981039346656037ULL
/* A 64-bit hash of bulk data (model weights): four lanes of 8-byte words, each word multiplied in,
 * rotated and multiplied again (the round of xxHash64, our own code; not its output), so any
 * difference in any bit changes the result; memory speed, several GB/s. h chains calls: start
 * with MP_FNV_INIT. Not for files others read: the value is ours alone. */
uint64_t mp_hash64(const void *data, size_t n, uint64_t h);

/* Lowest-level logging: "maskpos: " + message to stderr (unless mp_log_quiet). */
extern int mp_log_quiet;
void mp_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
