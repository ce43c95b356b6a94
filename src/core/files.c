/* files.c — see files.h. POSIX only (flock, nftw, opendir, realpath, pthread mutex). */
#include "core/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h" /* mp_mkdir_p, mp_path_join, mp_atomic_open/abort, mp_atomic_on_write */

/* ================================================================ the folders this process holds
 *
 * A claimed folder stays open here until released (or the process ends): its marker is open and
 * locked (flock LOCK_EX, so a second process is refused at once), and every temporary made and
 * every file committed under it is appended to the marker, so a later --force or re-run knows
 * what is ours. A folder is known by what it names (realpath: a claim through a symbolic link is
 * a claim of the folder it names), and belongs to the thread that claimed it: another thread's
 * claim is refused as another process's is (two Python threads saving into one folder). The table
 * is guarded by one mutex (recursive: a claim's own writes call the hook). */

#define MP_OUTDIR_MAX_HELD 64

typedef struct OutNames {
    char **v; /* relative paths under the folder, no duplicates */
    int n, cap;
} OutNames;

typedef struct OutHeld {
    char dir[4096];  /* as claimed, without trailing slashes: messages, and the paths writers give */
    char real[4096]; /* the folder it names (realpath) */
    char cmd[64];
    char key[40];    /* the run's key (mp_outdir_key; "" none yet, or a marker of an older maskpos) */
    int fd;          /* the marker: open (O_APPEND), locked */
    int refs;        /* claims of this folder by this thread not yet released */
    pthread_t owner; /* the thread that claimed it */
    OutNames names;
} OutHeld;

static OutHeld held[MP_OUTDIR_MAX_HELD];
static int n_held;
static pthread_mutex_t held_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;

static void names_free(OutNames *nm) {
    for (int i = 0; i < nm->n; i++) free(nm->v[i]);
    free(nm->v);
    memset(nm, 0, sizeof *nm);
}

static int names_has(const OutNames *nm, const char *rel) {
    for (int i = nm ? nm->n - 1 : -1; i >= 0; i--)
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
    if (strncmp(path, dir, n) || (path[n] != '/' && !(n == 1 && dir[0] == '/'))) return NULL;
    const char *p = path + n;
    while (*p == '/') p++;
    return *p && !strchr(p, '\n') ? p : NULL;
}

/* path with its folder resolved (realpath of the folder, then the last name): 0 when it cannot be. */
static int path_resolve(const char *path, char *out, size_t cap) {
    char parent[4096], real[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(parent, sizeof parent, ".");
    else snprintf(parent, sizeof parent, "%.*s", (int)(slash == path ? 1 : slash - path), path);
    if (!realpath(parent, real)) return 0;
    const char *base = slash ? slash + 1 : path;
    return snprintf(out, cap, "%s%s%s", real, strcmp(real, "/") ? "/" : "", base) < (int)cap;
}

static OutHeld *held_find(const char *real) {
    for (int i = 0; i < n_held; i++)
        if (!strcmp(held[i].real, real)) return &held[i];
    return NULL;
}

/* A name an atomic write gives its temporaries (NAME.tmp.PID, NAME.old.PID: mp_temp_path). The
 * shape alone never makes a file ours: only a temporary a marker lists is (names_temp). */
static int is_temp_name(const char *name) {
    const char *t = strrchr(name, '.');
    if (!t || !t[1] || t - name < 5 || (strncmp(t - 4, ".tmp", 4) && strncmp(t - 4, ".old", 4)) || t - 4 == name)
        return 0;
    for (const char *p = t + 1; *p; p++)
        if (*p < '0' || *p > '9') return 0;
    return 1;
}

/* 1 when rel is a temporary of ours: listed in nm, and named as one (its last component). */
static int names_temp(const OutNames *nm, const char *rel) {
    const char *base = strrchr(rel, '/');
    return is_temp_name(base ? base + 1 : rel) && names_has(nm, rel);
}

/* 1 when a folder above rel's last component has a temporary's name: a file inside a checkpoint
 * folder not yet renamed into place (the folder itself is listed, and once renamed, listed whole) */
static int in_temp_folder(const char *rel) {
    char part[256];
    for (const char *p = rel; *p;) {
        size_t k = strcspn(p, "/");
        if (!p[k]) return 0; /* the last component */
        snprintf(part, sizeof part, "%.*s", (int)(k < sizeof part ? k : sizeof part - 1), p);
        if (is_temp_name(part)) return 1;
        p += k;
        while (*p == '/') p++;
    }
    return 0;
}

/* The write hook (util.h): a temporary about to be made, or a file committed, under a held folder
 * is listed in its marker (and in the marker of every held folder above it). */
static void held_note_path(const char *path, int temp) {
    char res[PATH_MAX + 512];
    int resolved = -1; /* path through the folders' real names: computed once, when needed */
    pthread_mutex_lock(&held_mu);
    for (int i = 0; i < n_held; i++) {
        const char *rel = path_below(held[i].dir, path);
        if (!rel) {
            if (resolved < 0) resolved = path_resolve(path, res, sizeof res);
            rel = resolved ? path_below(held[i].real, res) : NULL;
        }
        if (!rel || in_temp_folder(rel) || !names_add(&held[i].names, rel)) continue;
        size_t n = strlen(rel);
        if (write(held[i].fd, rel, n) != (ssize_t)n || write(held[i].fd, "\n", 1) != 1) {
            /* a name the marker lacks only makes a later --force refuse: the safe side */
        }
    }
    pthread_mutex_unlock(&held_mu);
    (void)temp; /* (a temporary and a committed file are listed alike; a temporary by its name's shape) */
}

void mp_outdir_note(const char *path) { held_note_path(path, 0); }

/* dir as the folder it names (realpath), or as given when it does not exist. */
static void dir_real(char *out, size_t cap, const char *dir) {
    char r[PATH_MAX];
    snprintf(out, cap, "%s", realpath(dir, r) ? r : dir);
}

void mp_outdir_release(const char *dir) {
    char d[4096], real[4096];
    snprintf(d, sizeof d, "%s", dir);
    for (size_t n = strlen(d); n > 1 && d[n - 1] == '/'; n--) d[n - 1] = '\0';
    dir_real(real, sizeof real, d);
    pthread_mutex_lock(&held_mu);
    OutHeld *h = held_find(real);
    for (int i = 0; !h && i < n_held; i++) /* (a folder removed meanwhile: by the name it was claimed under) */
        if (!strcmp(held[i].dir, d)) h = &held[i];
    if (h && pthread_equal(h->owner, pthread_self()) && --h->refs == 0) {
        close(h->fd); /* drops the lock */
        names_free(&h->names);
        *h = held[--n_held];
    }
    pthread_mutex_unlock(&held_mu);
}

/* ================================================================ the marker */

/* Parses a marker's text: the command (and " key=KEY") on the first line, then one written path per
 * line. key may be NULL. */
static void marker_parse(const char *text, char *cmd, size_t cap, char key[40], OutNames *nm) {
    size_t n = strcspn(text, "\n"), c = strcspn(text, " \n");
    cmd[0] = '\0';
    if (key) key[0] = '\0';
    if (!*text) return;
    snprintf(cmd, cap, "%.*s", (int)(c < cap ? c : cap - 1), text);
    if (!cmd[0]) snprintf(cmd, cap, "?");
    if (key && c < n && !strncmp(text + c, " key=", 5))
        snprintf(key, 40, "%.*s", (int)(n - c - 5 < 39 ? n - c - 5 : 39), text + c + 5);
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
static int marker_read_fd(int fd, const char *dir, char *cmd, size_t cap, char key[40], OutNames *nm, MpErr *e) {
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
    marker_parse(text, cmd, cap, key, nm);
    free(text);
    return MP_OK;
}

/* Opens the marker at path (of folder d: messages) creating it (*created says so), and locks it
 * without waiting. A folder whose marker another process holds is refused. The marker may be
 * replaced between open and lock (a refused claim removes the one it made): then the lock is
 * taken again on the new one. */
static int marker_lock(const char *path, const char *d, int *fd_out, int *created, MpErr *e) {
    for (int tries = 0; tries < 100; tries++) {
        *created = 1;
        int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0 && errno == EEXIST) {
            *created = 0;
            fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        }
        if (fd < 0) return mp_err_set(e, "%s: folder is not writable: %s: %s", d, path, strerror(errno));
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
                                  d, MP_OUTDIR_MARKER);
            return mp_err_set(e, "%s: cannot lock: %s", path, strerror(err));
        }
        if (stat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            *fd_out = fd;
            return MP_OK;
        }
        close(fd); /* locked a marker that was removed meanwhile: again */
    }
    return mp_err_set(e, "%s: its %s keeps changing", d, MP_OUTDIR_MARKER);
}

static int marker_line(int fd, const char *s) {
    size_t n = strlen(s);
    return write(fd, s, n) == (ssize_t)n && write(fd, "\n", 1) == 1 ? MP_OK : MP_ERR;
}

/* Rewrites an open marker: the command (and its run's key), then the paths written so far. */
static int marker_rewrite(int fd, const char *dir, const char *cmd, const char *key, const OutNames *nm, MpErr *e) {
    char first[128];
    snprintf(first, sizeof first, "%s%s%s", cmd, key[0] ? " key=" : "", key);
    int bad = ftruncate(fd, 0) != 0 || marker_line(fd, first) != MP_OK;
    for (int i = 0; !bad && i < nm->n; i++) bad = marker_line(fd, nm->v[i]) != MP_OK;
    return bad ? mp_err_set(e, "%s: folder is not writable: %s: %s", dir, MP_OUTDIR_MARKER, strerror(errno)) : MP_OK;
}

/* ================================================================ what a folder holds */

static int rm_one(const char *fpath, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(fpath) == 0 ? 0 : -1;
}

/* Removes the temporaries nm lists that are still there (a killed run's: a file, or a checkpoint
 * folder half made or half replaced), then drops from nm every name no longer there. */
static void names_prune(const char *real, OutNames *nm) {
    int k = 0;
    for (int i = 0; i < nm->n; i++) {
        char p[8400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", real, nm->v[i]);
        if (names_temp(nm, nm->v[i]) && lstat(p, &st) == 0) nftw(p, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        if (lstat(p, &st) != 0) {
            free(nm->v[i]);
            continue;
        }
        nm->v[k++] = nm->v[i];
    }
    nm->n = k;
}

/* 1 when a file nm lists, other than a temporary, is there: the folder holds an earlier run's outputs. */
static int names_outputs(const char *real, const OutNames *nm) {
    for (int i = 0; i < nm->n; i++) {
        char p[8400];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", real, nm->v[i]);
        if (!names_temp(nm, nm->v[i]) && lstat(p, &st) == 0) return 1;
    }
    return 0;
}

/* Looks through real/rel (folder d: messages) depth first for an entry that is not ours: one nm
 * does not list (but a marker), or one it lists that is no longer a regular file or a folder (a
 * FIFO, device node, socket or symbolic link put in its place: never ours to remove). Names the
 * first in foreign: 1 (not listed) or 2 (listed, of another kind); 0 when all is ours (a listed
 * folder is ours whole); -1 on an error (e). */
static int tree_foreign(const char *real, const char *d, const char *rel, const OutNames *nm, char *foreign, size_t cap,
                        int depth, MpErr *e) {
    char path[4200];
    if (snprintf(path, sizeof path, rel[0] ? "%s/%s" : "%s", real, rel) >= (int)sizeof path)
        return mp_err_set(e, "%s/%s: path too long", d, rel);
    DIR *dh = opendir(path);
    if (!dh) return mp_err_set(e, "%s%s%s: cannot list the folder: %s", d, rel[0] ? "/" : "", rel, strerror(errno));
    int rc = 0;
    for (struct dirent *de; rc == 0 && (de = readdir(dh));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char sub[4096], full[8400];
        struct stat st;
        int n = snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", real, sub);
        if (n >= (int)sizeof sub || lstat(full, &st) != 0) continue;
        const int kind_ok = S_ISREG(st.st_mode) || S_ISDIR(st.st_mode);
        if (names_has(nm, sub)) {
            rc = kind_ok ? 0 : 2;
        } else if (S_ISDIR(st.st_mode)) {
            rc = depth < 64 ? tree_foreign(real, d, sub, nm, foreign, cap, depth + 1, e) : 1;
            if (rc == 1 && depth >= 64) snprintf(foreign, cap, "%s", sub);
            continue;
        } else {
            rc = strcmp(de->d_name, MP_OUTDIR_MARKER) || !S_ISREG(st.st_mode) ? 1 : 0;
        }
        if (rc > 0) snprintf(foreign, cap, "%s", sub);
    }
    closedir(dh);
    return rc;
}

/* Entries of the folder other than its marker and the temporaries its marker lists. */
static int outdir_others(const char *real, const char *d, const OutNames *nm, MpErr *e) {
    DIR *dh = opendir(real);
    if (!dh) return mp_err_set(e, "%s: cannot list the folder: %s", d, strerror(errno));
    int others = 0;
    for (struct dirent *de; (de = readdir(dh));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, MP_OUTDIR_MARKER) &&
            !names_temp(nm, de->d_name))
            others++;
    closedir(dh);
    return others;
}

static int clear_one(const char *fpath, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    if (ftw->level == 0) return 0; /* the folder itself stays */
    if (ftw->level == 1 && !strcmp(fpath + ftw->base, MP_OUTDIR_MARKER)) return 0;
    return remove(fpath) == 0 ? 0 : -1;
}

/* Removes the files of the folder's earlier runs (nm: what they wrote), all or nothing: a file they
 * did not write is never removed, and its presence refuses the whole clearing. */
static int outdir_clear_names(const char *real, const char *d, const OutNames *nm, MpErr *e) {
    char foreign[4096];
    int w = tree_foreign(real, d, "", nm, foreign, sizeof foreign, 0, e);
    if (w < 0) return MP_ERR;
    if (w == 2)
        return mp_err_set(e, "%s: holds %s, listed as written by a maskpos run but now not a regular file or folder (a "
                             "FIFO, device node, socket or symbolic link): nothing was removed; HINT: move it away",
                          d, foreign);
    if (w > 0)
        return mp_err_set(e, "%s: holds %s, which its %s does not list as written by a maskpos run (a file of yours, "
                             "or of a maskpos older than these lists): nothing was removed; HINT: move it away, or "
                             "remove the folder yourself if all of it is yours to lose",
                          d, foreign, MP_OUTDIR_MARKER);
    if (nftw(real, clear_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return mp_err_set(e, "%s: cannot remove the previous run's files: %s", d, strerror(errno));
    return MP_OK;
}

static int dir_normal(char *d, size_t cap, const char *dir, MpErr *e) {
    size_t n = strlen(dir);
    if (n == 0 || n >= cap) return mp_err_set(e, "%s: bad directory path", dir);
    memcpy(d, dir, n + 1);
    for (; n > 1 && d[n - 1] == '/'; n--) d[n - 1] = '\0';
    return MP_OK;
}

static int outdir_clear_locked(const char *d, const char *real, MpErr *e) {
    char cmd[64], path[PATH_MAX + 64], *text = NULL;
    size_t len = 0;
    if (mp_path_join(path, sizeof path, real, MP_OUTDIR_MARKER, e) != MP_OK) return MP_ERR;
    OutHeld *h = held_find(real);
    if (h && !pthread_equal(h->owner, pthread_self()))
        return mp_err_set(e, "%s: another maskpos run is writing into this folder now (it holds %s)", d, MP_OUTDIR_MARKER);
    OutNames own = {0};
    if (h) {
        snprintf(cmd, sizeof cmd, "%s", h->cmd);
    } else {
        struct stat st;
        if (lstat(path, &st) != 0) cmd[0] = '\0';
        else if (mp_file_read_all(path, (size_t)64 << 20, "a run marker", &text, &len, e) != MP_OK) return MP_ERR;
        else marker_parse(text, cmd, sizeof cmd, NULL, &own);
        free(text);
    }
    if (!cmd[0]) return mp_err_set(e, "%s: holds no maskpos run (no %s): not clearing it", d, MP_OUTDIR_MARKER);
    int rc = outdir_clear_names(real, d, h ? &h->names : &own, e);
    names_free(&own);
    if (rc != MP_OK) return MP_ERR;
    if (h) {
        names_free(&h->names);
        h->key[0] = '\0'; /* (no run's outputs left: the next run's key is the folder's) */
        return marker_rewrite(h->fd, d, h->cmd, h->key, &h->names, e);
    }
    char text1[80];
    snprintf(text1, sizeof text1, "%s\n", cmd);
    return mp_file_write_atomic(path, text1, strlen(text1), e);
}

int mp_outdir_clear(const char *dir, MpErr *e) {
    char d[4096], real[PATH_MAX];
    if (dir_normal(d, sizeof d, dir, e) != MP_OK) return MP_ERR;
    if (!realpath(d, real)) return mp_err_set(e, "%s: cannot open the folder: %s", d, strerror(errno));
    pthread_mutex_lock(&held_mu);
    const int rc = outdir_clear_locked(d, real, e);
    pthread_mutex_unlock(&held_mu);
    return rc;
}

/* ================================================================ claims */

/* Whether a folder holding prev's run (nm: its files) may take a run of cmd in mode; FORCE clears
 * it first; a run that starts in an empty folder or continues one removes the temporaries the
 * marker lists (a killed run's). */
static int claim_decide(const char *real, const char *d, const char *cmd, MpOutdirMode mode, const char *prev,
                        OutNames *nm, MpErr *e) {
    const int others = outdir_others(real, d, nm, e);
    if (others < 0) return MP_ERR;
    if (!others || (!prev[0] && mode == MP_OUTDIR_RESUME)) {
        /* empty (a marker alone, and the temporaries it lists: a run that wrote nothing; not
         * running, the lock says), or --resume into a folder without a marker: one assembled by
         * hand, or written before markers, taken at its word (nothing in it is ours: nothing removed) */
        names_prune(real, nm);
        return MP_OK;
    }
    if (!prev[0])
        return mp_err_set(e, "%s: folder is not empty and holds no maskpos run: refusing to mix outputs (--force never "
                             "clears it); HINT: give an empty or new folder",
                          d);
    if (mode == MP_OUTDIR_FORCE) {
        int rc = outdir_clear_names(real, d, nm, e);
        names_free(nm);
        return rc;
    }
    if (mode == MP_OUTDIR_NEW)
        return mp_err_set(e, "%s: already holds the outputs of a 'maskpos %s' run; HINT: give another folder, or "
                             "--force to replace them",
                          d, prev);
    if (strcmp(prev, cmd))
        return mp_err_set(e, "%s: holds the outputs of a 'maskpos %s' run, not of a '%s' run to continue", d, prev, cmd);
    names_prune(real, nm);
    return MP_OK;
}

/* The claim, under the table's mutex: folder d (as given) that names real. */
static int claim_locked(const char *d, const char *real, const char *cmd, MpOutdirMode mode, MpErr *e) {
    char path[PATH_MAX + 64], prev[64], key[40], tmp_rel[128];
    if (mp_path_join(path, sizeof path, real, MP_OUTDIR_MARKER, e) != MP_OK) return MP_ERR;
    OutHeld *h = held_find(real);
    if (h && !pthread_equal(h->owner, pthread_self())) /* (another thread of this process: as another process) */
        return mp_err_set(e, "%s: another maskpos run is writing into this folder now (it holds %s); HINT: wait for it "
                             "to end, or give another folder",
                          d, MP_OUTDIR_MARKER);
    if (!h && n_held == MP_OUTDIR_MAX_HELD)
        return mp_err_set(e, "%s: this process holds %d output folders already", d, MP_OUTDIR_MAX_HELD);
    int fd = h ? h->fd : -1, created = 0;
    if (!h && marker_lock(path, d, &fd, &created, e) != MP_OK) return MP_ERR;
    OutNames nm = {0};
    int rc = marker_read_fd(fd, d, prev, sizeof prev, key, &nm, e);
    if (rc == MP_OK) rc = claim_decide(real, d, cmd, mode, prev, &nm, e);
    if (rc == MP_OK && !names_outputs(real, &nm)) key[0] = '\0'; /* (nothing of the earlier run left) */
    /* the check that the folder is writable: a temporary made and removed, its name listed first */
    mp_temp_name(tmp_rel, sizeof tmp_rel, MP_OUTDIR_MARKER, "tmp");
    if (rc == MP_OK && names_add(&nm, tmp_rel)) marker_line(fd, tmp_rel);
    MpAtomicFile af;
    if (rc == MP_OK && mp_atomic_open(&af, path, e) != MP_OK) rc = mp_err_prefix(e, "%s: folder is not writable", d);
    else if (rc == MP_OK) mp_atomic_abort(&af);
    if (rc == MP_OK) rc = marker_rewrite(fd, d, cmd, key, &nm, e);
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
        snprintf(h->real, sizeof h->real, "%s", real);
        h->fd = fd;
        h->owner = pthread_self();
        mp_atomic_on_write(held_note_path);
    }
    names_free(&h->names);
    h->names = nm;
    h->refs++;
    snprintf(h->cmd, sizeof h->cmd, "%s", cmd);
    snprintf(h->key, sizeof h->key, "%s", key);
    return MP_OK;
}

int mp_outdir_claim(const char *dir, const char *cmd, MpOutdirMode mode, MpErr *e) {
    char d[4096], real[PATH_MAX];
    if (dir_normal(d, sizeof d, dir, e) != MP_OK || mp_mkdir_p(d, e) != MP_OK) return MP_ERR;
    if (!realpath(d, real)) return mp_err_set(e, "%s: cannot open the folder: %s", d, strerror(errno));
    pthread_mutex_lock(&held_mu);
    const int rc = claim_locked(d, real, cmd, mode, e);
    pthread_mutex_unlock(&held_mu);
    return rc;
}

int mp_outdir_key(const char *dir, const char *key, MpErr *e) {
    char d[4096], real[PATH_MAX];
    if (dir_normal(d, sizeof d, dir, e) != MP_OK) return MP_ERR;
    if (!realpath(d, real)) return mp_err_set(e, "%s: cannot open the folder: %s", d, strerror(errno));
    pthread_mutex_lock(&held_mu);
    OutHeld *h = held_find(real);
    int rc = MP_OK;
    if (!h || !pthread_equal(h->owner, pthread_self()))
        rc = mp_err_set(e, "%s: internal: a run key for a folder this run has not claimed", d);
    else if (h->key[0] && strcmp(h->key, key) && names_outputs(real, &h->names))
        rc = mp_err_set(e, "%s: holds the outputs of another '%s' run (its key %s, this run's %s): continuing it would "
                           "mix the two runs' files; HINT: give another folder, or --force to replace them",
                        d, h->cmd, h->key, key);
    else {
        snprintf(h->key, sizeof h->key, "%s", key);
        rc = marker_rewrite(h->fd, d, h->cmd, h->key, &h->names, e);
    }
    pthread_mutex_unlock(&held_mu);
    return rc;
}

int mp_outfile_claim(const char *path, int force, MpErr *e) {
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return mp_err_set(e, "%s: is a directory, not an output file", path);
        const char *what = mp_file_kind(st.st_mode);
        if (what) /* with --force too: only a regular file is ever replaced (never /dev/full, a FIFO, a link) */
            return mp_err_set(e, "%s: is %s, not a regular file: never replaced, with --force or without; HINT: give "
                                 "the path of a file",
                              path, what);
        if (!force) return mp_err_set(e, "%s: exists; HINT: give another name, or --force to replace it", path);
    }
    MpAtomicFile af;
    if (mp_atomic_open(&af, path, e) != MP_OK) return MP_ERR;
    mp_atomic_abort(&af);
    return MP_OK;
}
