/* mapfile.c — see mapfile.h. */
#include "load/mapfile.h"

#include "core/util.h" /* mp_input_open_fd */

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int mp_load_map_open(MpLoadMap *mm, const char *path, MpErr *e) {
    memset(mm, 0, sizeof *mm);
    int64_t size = 0;
    int fd = mp_input_open_fd(path, &size, e); /* refuses a FIFO or directory without blocking */
    if (fd < 0) return MP_ERR;
    struct stat sb;
    sb.st_size = (off_t)size;
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
