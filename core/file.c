/* file.c - writing a file atomically: a temporary file beside it, fsync'd
 * and renamed over it, so a failed write never clobbers the previous file
 * (safetensors keeps its own, streaming variant). */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nb_impl.h"

nb_status nb_write_file_atomic(const char *op, const char *path, const void *data, size_t len) {
    static atomic_uint counter;
    char tmp[4200];
    if (!op) op = "write_file_atomic";
    if (!path || strlen(path) > 4000 || (!data && len))
        return nb_set_error(NB_ERR_INVALID_ARG, "%s: %s", op, data || !len ? "bad output path" : "NULL data");
    int fd = -1;
    for (int tries = 0; fd < 0 && tries < 100; tries++) {
        snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&counter, 1));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) return nb_set_error(NB_ERR_IO, "%s: cannot create %s: %s", op, tmp, strerror(errno));
    nb_status st = NB_OK;
    for (const char *p = data; !st && len > 0;) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) st = nb_set_error(NB_ERR_IO, "%s: cannot write %s: %s", op, tmp, strerror(errno));
        else p += w, len -= (size_t)w;
    }
    if (!st && fsync(fd)) st = nb_set_error(NB_ERR_IO, "%s: cannot fsync %s: %s", op, tmp, strerror(errno));
    if (close(fd) && !st) st = nb_set_error(NB_ERR_IO, "%s: cannot close %s: %s", op, tmp, strerror(errno));
    if (!st && rename(tmp, path)) st = nb_set_error(NB_ERR_IO, "%s: cannot rename %s to %s: %s", op, tmp, path, strerror(errno));
    if (st) unlink(tmp);
    return st;
}
