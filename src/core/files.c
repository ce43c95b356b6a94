/* files.c — see files.h. POSIX only (nftw). */
#include "core/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/util.h" /* mp_mkdir_p, mp_path_join, mp_file_write_atomic, mp_file_read_all, MpAtomicFile, mp_input_open */

/* ================================================================ output folders */

static int clear_one(const char *fpath, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    if (ftw->level == 0) return 0; /* the folder itself stays */
    if (ftw->level == 1 && !strcmp(fpath + ftw->base, MP_OUTDIR_MARKER)) return 0;
    return remove(fpath) == 0 ? 0 : -1;
}

/* Reads the marker's command name into cmd (empty when there is no marker). */
static int marker_read(const char *dir, char *cmd, size_t cap, MpErr *e) {
    char path[4200], *data = NULL;
    size_t len = 0;
    cmd[0] = '\0';
    if (mp_path_join(path, sizeof path, dir, MP_OUTDIR_MARKER, e) != MP_OK) return MP_ERR;
    struct stat st;
    if (lstat(path, &st) != 0) return MP_OK;
    if (mp_file_read_all(path, 256, "a run marker", &data, &len, e) != MP_OK) return MP_ERR;
    size_t n = strcspn(data, "\n");
    if (n >= cap) n = cap - 1;
    memcpy(cmd, data, n);
    cmd[n] = '\0';
    free(data);
    if (!cmd[0]) snprintf(cmd, cap, "?");
    return MP_OK;
}

int mp_outdir_clear(const char *dir, MpErr *e) {
    char cmd[64];
    if (marker_read(dir, cmd, sizeof cmd, e) != MP_OK) return MP_ERR;
    if (!cmd[0]) return mp_err_set(e, "%s: holds no maskpos run (no %s): not clearing it", dir, MP_OUTDIR_MARKER);
    if (nftw(dir, clear_one, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return mp_err_set(e, "%s: cannot remove the previous run's files: %s", dir, strerror(errno));
    return MP_OK;
}

int mp_outdir_claim(const char *dir, const char *cmd, MpOutdirMode mode, MpErr *e) {
    if (mp_mkdir_p(dir, e) != MP_OK) return MP_ERR;
    DIR *d = opendir(dir);
    if (!d) return mp_err_set(e, "%s: cannot list the folder: %s", dir, strerror(errno));
    int others = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, MP_OUTDIR_MARKER)) others++;
    closedir(d);
    char prev[64];
    if (marker_read(dir, prev, sizeof prev, e) != MP_OK) return MP_ERR;
    /* (--resume says the folder holds the run to continue: one assembled by hand, or written
     * before markers existed, is taken at its word) */
    if (others && !prev[0] && mode != MP_OUTDIR_RESUME)
        return mp_err_set(e, "%s: folder is not empty and holds no maskpos run: refusing to mix outputs; HINT: give "
                             "an empty or new folder",
                          dir);
    if (others && mode == MP_OUTDIR_FORCE) {
        if (mp_outdir_clear(dir, e) != MP_OK) return MP_ERR;
    } else if (others && mode == MP_OUTDIR_RESUME && prev[0] && strcmp(prev, cmd)) {
        return mp_err_set(e, "%s: holds the outputs of a 'maskpos %s' run, not of a '%s' run to continue", dir, prev,
                          cmd);
    } else if (others && mode == MP_OUTDIR_NEW) {
        return mp_err_set(e, "%s: already holds the outputs of a 'maskpos %s' run; HINT: give another folder, or "
                             "--force to replace them",
                          dir, prev);
    }
    /* (re)writing the marker is also the check that the folder is writable */
    char path[4200], text[80];
    if (mp_path_join(path, sizeof path, dir, MP_OUTDIR_MARKER, e) != MP_OK) return MP_ERR;
    snprintf(text, sizeof text, "%s\n", cmd);
    if (mp_file_write_atomic(path, text, strlen(text), e) != MP_OK) return mp_err_prefix(e, "%s: folder is not writable", dir);
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
