/* mapfile.c — see mapfile.h. */
#include "load/mapfile.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int mp_load_map_open(MpLoadMap *mm, const char *path, MpErr *e) {
    memset(mm, 0, sizeof *mm);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mp_err_set(e, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return mp_err_set(e, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return mp_err_set(e, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return MP_OK;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        close(fd);
        return mp_err_set(e, "%s: file too large to map", path);
    }
    void *p = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) return mp_err_set(e, "%s: cannot mmap %lld bytes: %s", path, (long long)sb.st_size, strerror(err));
    mm->data = p;
    mm->size = (size_t)sb.st_size;
    mm->mapped = 1;
    return MP_OK;
}

void mp_load_map_close(MpLoadMap *mm) {
    if (mm->mapped && mm->data) munmap((void *)mm->data, mm->size);
    memset(mm, 0, sizeof *mm);
}
