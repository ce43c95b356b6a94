/* files.c — see files.h. POSIX only (flock, nftw, opendir). */
#include "core/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h" /* mp_mkdir_p, mp_path_join, mp_atomic_open/abort, mp_atomic_on_commit */

/* ================================================================ the folders this process holds
 *
 * A claimed folder stays open here until released (or the process ends): its marker is open and
 * locked (flock LOCK_EX, so a second process is refused at once), and every file an atomic write
 * commits under it is appended to the marker, so a later --force knows what is ours. Files are
 * committed from one thread at a time (every writer in maskpos is). */

#define MP_OUTDIR_MAX_HELD 64

typedef struct OutNames {
    char **v; /* relative paths under the folder, no duplicates */
    int n, cap;
} OutNames;

typedef struct OutHeld {
    char dir[4096]; /* as claimed, without trailing slashes */
    char cmd[64];
    int fd;   /* the marker: open (O_APPEND), locked */
    int refs; /* claims of this folder by this process not yet released */
    OutNames names;
} OutHeld;

static OutHeld held[MP_OUTDIR_MAX_HELD];
static int n_held;

static void names_free(OutNames *nm) {
    for (int i = 0; i < nm->n; i++) free(nm->v[i]);
    free(nm->v);
    memset(nm, 0, sizeof *nm);
}

static int names_has(const OutNames *nm, const char *rel) {
    for (int i = nm->n - 1; i >= 0; i--)
        if (!strcmp(nm->v[i], rel)) return 1;
    return 0;
}

/* 1 when added (0: already there, or out of memory: the file then counts as not ours, the safe side) */
static int names_add(OutNames *nm, const char *rel) {
    if (names_has(nm, rel)) return 0;
    if (nm->n == nm->cap) {
        int cap = nm->cap ? 2 * nm->cap : 32;
        char **v = realloc(nm->v, (size_t)cap * sizeof *v);
        if (!v) return 0;
        nm->v = v, nm->cap = cap;
    }
    char *s = strdup(rel);
    if (!s) return 0;
    nm->v[nm->n++] = s;
    return 1;
}

/* The part of path below dir ("a/b.npy" for dir "x", path "x/a/b.npy"), or NULL. */
static const char *path_below(const char *dir, const char *path) {
    size_t n = strlen(dir);
    if (strncmp(path, dir, n) || path[n] != '/') return NULL;
    const char *p = path + n;
    while (*p == '/') p++;
    return *p && !strchr(p, '\n') ? p : NULL;
}

static OutHeld *held_find(const char *dir) {
    for (int i = 0; i < n_held; i++)
        if (!strcmp(held[i].dir, dir)) return &held[i];
    return NULL;
}

static int is_temp_name(const char *name);

/* 1 when a component of rel is a temporary's name (a file inside a checkpoint folder not yet
 * renamed into place: the folder is listed once renamed) */
static int in_temp(const char *rel) {
    char part[256];
    for (const char *p = rel; *p;) {
        size_t k = strcspn(p, "/");
        snprintf(part, sizeof part, "%.*s", (int)(k < sizeof part ? k : sizeof part - 1), p);
        if (is_temp_name(part)) return 1;
        p += k;
        while (*p == '/') p++;
    }
    return 0;
}

/* The commit hook (util.h): a file committed under a held folder is listed in its marker (and in
 * the marker of every held folder above it). */
static void held_note(const char *path) {
    for (int i = 0; i < n_held; i++) {
        const char *rel = path_below(held[i].dir, path);
        if (!rel || in_temp(rel) || !names_add(&held[i].names, rel)) continue;
        size_t n = strlen(rel);
        if (write(held[i].fd, rel, n) != (ssize_t)n || write(held[i].fd, "\n", 1) != 1) {
            /* a name the marker lacks only makes a later --force refuse: the safe side */
        }
    }
}

void mp_outdir_note(const char *path) { held_note(path); }

void mp_outdir_release(const char *dir) {
    char d[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (size_t n = strlen(d); n > 1 && d[n - 1] == '/'; n--) d[n - 1] = '\0';
    OutHeld *h = held_find(d);
    if (!h || --h->refs > 0) return;
    close(h->fd); /* drops the lock */
    names_free(&h->names);
    *h = held[--n_held];
}

/* ================================================================ the marker */

/* Parses a marker's text: the command on the first line, then one written path per line. */
static void marker_parse(const char *text, char *cmd, size_t cap, OutNames *nm) {
    size_t n = strcspn(text, "\n");
    cmd[0] = '\0';
    if (!*text) return;
    snprintf(cmd, cap, "%.*s", (int)(n < cap ? n : cap - 1), text);
    if (!cmd[0]) snprintf(cmd, cap, "?");
    for (const char *p = text + n; *p;) {
        p += *p == '\n';
        size_t k = strcspn(p, "\n");
        if (k) {
            char rel[4096];
            snprintf(rel, sizeof rel, "%.*s", (int)(k < sizeof rel ? k : sizeof rel - 1), p);
            if (nm) names_add(nm, rel);
        }
        p += k;
    }
}

/* Reads an open marker (at most 64 MiB). */
static int marker_read_fd(int fd, const char *dir, char *cmd, size_t cap, OutNames *nm, MpErr *e) {
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size > ((off_t)64 << 20))
        return mp_err_set(e, "%s: its %s cannot be read or is too large", dir, MP_OUTDIR_MARKER);
    char *text = malloc((size_t)st.st_size + 1);
    if (!text) return mp_err_set(e, "%s: out of memory for its %s", dir, MP_OUTDIR_MARKER);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t k = pread(fd, text + got, (size_t)st.st_size - got, (off_t)got);
        if (k <= 0) break;
        got += (size_t)k;
    }
    text[got] = '\0';
    marker_parse(text, cmd, cap, nm);
    free(text);
    return MP_OK;
}

/* Opens dir's marker (creating it; *created says so) and locks it without waiting. A folder whose
 * marker another process holds is refused. The marker may be replaced between open and lock (a
 * refused claim removes the one it made): then the lock is taken again on the new one. */
static int marker_lock(const char *dir, int *fd_out, int *created, MpErr *e) {
    char path[4200];
    if (mp_path_join(path, sizeof path, dir, MP_OUTDIR_MARKER, e) != MP_OK) return MP_ERR;
    for (int tries = 0; tries < 100; tries++) {
        *created = 1;
        int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno == EEXIST) {
            *created = 0;
            fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        }
        if (fd < 0) return mp_err_set(e, "%s: folder is not writable: %s: %s", dir, path, strerror(errno));
        struct stat a, b;
        if (fstat(fd, &a) != 0 || !S_ISREG(a.st_mode)) {
            close(fd);
            return mp_err_set(e, "%s: is not a regular file", path);
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) { /* (a marker is removed only under its lock) */
            int err = errno;
            close(fd);
            if (err == EWOULDBLOCK)
                return mp_err_set(e, "%s: another maskpos run is writing into this folder now (it holds %s); HINT: wait "
                                     "for it to end, or give another folder",
                                  dir, MP_OUTDIR_MARKER);
            return mp_err_set(e, "%s: cannot lock: %s", path, strerror(err));
        }
        if (stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            *fd_out = fd;
            return MP_OK;
        }
        close(fd); /* locked a marker that was removed meanwhile: again */
    }
    return mp_err_set(e, "%s: its %s keeps changing", dir, MP_OUTDIR_MARKER);
}

/* Rewrites an open marker: the command, then the paths written so far. */
static int marker_rewrite(int fd, const char *dir, const char *cmd, const OutNames *nm, MpErr *e) {
    int bad = ftruncate(fd, 0) != 0;
    size_t n = strlen(cmd);
    bad = bad || write(fd, cmd, n) != (ssize_t)n || write(fd, "\n", 1) != 1;
    for (int i = 0; !bad && i < nm->n; i++) {
        n = strlen(nm->v[i]);
        bad = write(fd, nm->v[i], n) != (ssize_t)n || write(fd, "\n", 1) != 1;
    }
    return bad ? mp_err_set(e, "%s: folder is not writable: %s: %s", dir, MP_OUTDIR_MARKER, strerror(errno)) : MP_OK;
}

/* ================================================================ what a folder holds */

/* A name an atomic write gives its temporary (NAME.tmp.PID, util.h): ours by its name. */
static int is_temp_name(const char *name) {
    const char *t = strrchr(name, '.');
    if (!t || !t[1] || t - name < 5 || (strncmp(t - 4, ".tmp", 4) && strncmp(t - 4, ".old", 4)) || t - 4 == name)
        return 0;
    for (const char *p = t + 1; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

static int rm_one(const char *fpath, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(fpath) == 0 ? 0 : -1;
}

/* Walks dir/rel depth first. With nm: stops at the first file that is not ours (not listed in nm,
 * not a marker, not a temporary) and names it in foreign (returns 1). With drop_temps: removes
 * the temporaries. 0 when the walk ended, -1 on an error (e). */
static int tree_walk(const char *dir, const char *rel, const OutNames *nm, int drop_temps, char *foreign, size_t cap,
                     int depth, MpErr *e) {
    char path[4200];
    if (snprintf(path, sizeof path, rel[0] ? "%s/%s" : "%s", dir, rel) >= (int)sizeof path)
        return mp_err_set(e, "%s/%s: path too long", dir, rel);
    DIR *d = opendir(path);
    if (!d) return mp_err_set(e, "%s: cannot list the folder: %s", path, strerror(errno));
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[4096], full[8400];
        struct stat st;
        int n = snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", dir, sub);
        if (n >= (int)sizeof sub || lstat(full, &st) != 0) continue;
        if (is_temp_name(de->d_name)) { /* (a file, or a checkpoint folder half made or half replaced) */
            if (drop_temps) nftw(full, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        } else if (S_ISDIR(st.st_mode) && !(nm && names_has(nm, sub))) { /* (a listed folder is ours whole) */
            rc = depth < 64 ? tree_walk(dir, sub, nm, drop_temps, foreign, cap, depth + 1, e) : 1;
            if (rc == 1 && depth >= 64) snprintf(foreign, cap, "%s", sub);
        } else if (strcmp(de->d_name, MP_OUTDIR_MARKER) && nm && !names_has(nm, sub)) {
            snprintf(foreign, cap, "%s", sub);
            rc = 1;
        }
    }
    closedir(d);
    return rc;
}

/* Entries of dir other than its marker and temporaries. */
static int outdir_others(const char *dir, MpErr *e) {
    DIR *d = opendir(dir);
    if (!d) return mp_err_set(e, "%s: cannot list the folder: %s", dir, strerror(errno));
    int others = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, MP_OUTDIR_MARKER) &&
            !is_temp_name(de->d_name))
            others++;
    closedir(d);
    return others;
}

static int clear_one(const char *fpath, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    if (ftw->level == 0) return 0; /* the folder itself stays */
    if (ftw->level == 1 && !strcmp(fpath + ftw->base, MP_OUTDIR_MARKER)) return 0;
    return remove(fpath) == 0 ? 0 : -1;
}

/* Removes the files of dir's earlier runs (nm: what they wrote), all or nothing: a file they did
 * not write is never removed, and its presence refuses the whole clearing. */
static int outdir_clear_names(const char *dir, const OutNames *nm, MpErr *e) {
    char foreign[4096];
    int w = tree_walk(dir, "", nm, 0, foreign, sizeof foreign, 0, e);
    if (w < 0) return MP_ERR;
    if (w > 0)
        return mp_err_set(e, "%s: holds %s, which its %s does not list as written by a maskpos run (a file of yours, "
                             "or of a maskpos older than these lists): nothing was removed; HINT: move it away, or "
                             "remove the folder yourself if all of it is yours to lose",
                          dir, foreign, MP_OUTDIR_MARKER);
    if (nftw(dir, clear_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return mp_err_set(e, "%s: cannot remove the previous run's files: %s", dir, strerror(errno));
    return MP_OK;
}

static int dir_normal(char *d, size_t cap, const char *dir, MpErr *e) {
    size_t n = strlen(dir);
    if (n == 0 || n >= cap) return mp_err_set(e, "%s: bad directory path", dir);
    memcpy(d, dir, n + 1);
    for (; n > 1 && d[n - 1] == '/'; n--) d[n - 1] = '\0';
    return MP_OK;
}

int mp_outdir_clear(const char *dir, MpErr *e) {
    char d[4096], cmd[64], path[4200], *text = NULL;
    size_t len = 0;
    if (dir_normal(d, sizeof d, dir, e) != MP_OK || mp_path_join(path, sizeof path, d, MP_OUTDIR_MARKER, e) != MP_OK)
        return MP_ERR;
    OutHeld *h = held_find(d);
    OutNames own = {0};
    if (h) {
        snprintf(cmd, sizeof cmd, "%s", h->cmd);
    } else {
        struct stat st;
        if (lstat(path, &st) != 0) cmd[0] = '\0';
        else if (mp_file_read_all(path, (size_t)64 << 20, "a run marker", &text, &len, e) != MP_OK) return MP_ERR;
        else marker_parse(text, cmd, sizeof cmd, &own);
        free(text);
    }
    if (!cmd[0]) return mp_err_set(e, "%s: holds no maskpos run (no %s): not clearing it", d, MP_OUTDIR_MARKER);
    int rc = outdir_clear_names(d, h ? &h->names : &own, e);
    names_free(&own);
    if (rc != MP_OK) return MP_ERR;
    if (h) {
        names_free(&h->names);
        return marker_rewrite(h->fd, d, h->cmd, &h->names, e);
    }
    char text1[80];
    snprintf(text1, sizeof text1, "%s\n", cmd);
    return mp_file_write_atomic(path, text1, strlen(text1), e);
}

/* ================================================================ claims */

/* Whether a folder holding prev's run (names: its files) may take a run of cmd in mode; FORCE
 * clears it first, RESUME and CONTINUE drop the temporaries a killed run left. */
static int claim_decide(const char *d, const char *cmd, MpOutdirMode mode, const char *prev, OutNames *nm, MpErr *e) {
    char unused[8];
    const int others = outdir_others(d, e);
    if (others < 0) return MP_ERR;
    if (!others || (!prev[0] && mode == MP_OUTDIR_RESUME)) {
        /* empty (a marker alone: a run that wrote nothing; not running, the lock says), or
         * --resume into a folder without a marker: one assembled by hand, or written before
         * markers, taken at its word; either way nothing in it is known to be ours */
        names_free(nm);
        return !others && tree_walk(d, "", NULL, 1, unused, sizeof unused, 0, e) < 0 ? MP_ERR : MP_OK;
    }
    if (!prev[0])
        return mp_err_set(e, "%s: folder is not empty and holds no maskpos run: refusing to mix outputs (--force never "
                             "clears it); HINT: give an empty or new folder",
                          d);
    if (mode == MP_OUTDIR_FORCE) {
        int rc = outdir_clear_names(d, nm, e);
        names_free(nm);
        return rc;
    }
    if (mode == MP_OUTDIR_NEW)
        return mp_err_set(e, "%s: already holds the outputs of a 'maskpos %s' run; HINT: give another folder, or "
                             "--force to replace them",
                          d, prev);
    if (strcmp(prev, cmd))
        return mp_err_set(e, "%s: holds the outputs of a 'maskpos %s' run, not of a '%s' run to continue", d, prev, cmd);
    return tree_walk(d, "", NULL, 1, unused, sizeof unused, 0, e) < 0 ? MP_ERR : MP_OK;
}

int mp_outdir_claim(const char *dir, const char *cmd, MpOutdirMode mode, MpErr *e) {
    char d[4096], path[4200], prev[64];
    if (dir_normal(d, sizeof d, dir, e) != MP_OK || mp_mkdir_p(d, e) != MP_OK ||
        mp_path_join(path, sizeof path, d, MP_OUTDIR_MARKER, e) != MP_OK)
        return MP_ERR;
    OutHeld *h = held_find(d);
    if (!h && n_held == MP_OUTDIR_MAX_HELD)
        return mp_err_set(e, "%s: this process holds %d output folders already", d, MP_OUTDIR_MAX_HELD);
    int fd = h ? h->fd : -1, created = 0;
    if (!h && marker_lock(d, &fd, &created, e) != MP_OK) return MP_ERR;
    OutNames nm = {0};
    int rc = marker_read_fd(fd, d, prev, sizeof prev, &nm, e);
    if (rc == MP_OK) rc = claim_decide(d, cmd, mode, prev, &nm, e);
    MpAtomicFile af; /* a temp file made and removed: the check that the folder is writable */
    if (rc == MP_OK && mp_atomic_open(&af, path, e) != MP_OK) rc = mp_err_prefix(e, "%s: folder is not writable", d);
    else if (rc == MP_OK) mp_atomic_abort(&af);
    if (rc == MP_OK) rc = marker_rewrite(fd, d, cmd, &nm, e);
    if (rc != MP_OK) {
        names_free(&nm);
        if (created) unlink(path);
        if (!h) close(fd);
        return MP_ERR;
    }
    if (!h) {
        h = &held[n_held++];
        memset(h, 0, sizeof *h);
        snprintf(h->dir, sizeof h->dir, "%s", d);
        h->fd = fd;
        mp_atomic_on_commit(held_note);
    }
    names_free(&h->names);
    h->names = nm;
    h->refs++;
    snprintf(h->cmd, sizeof h->cmd, "%s", cmd);
    return MP_OK;
}

int mp_outfile_claim(const char *path, int force, MpErr *e) {
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return mp_err_set(e, "%s: is a directory, not an output file", path);
        if (!force) return mp_err_set(e, "%s: exists; HINT: give another name, or --force to replace it", path);
    }
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    mp_atomic_abort(&af);
    return MP_OK;
}
