/* POSIX shared memory for the cpu backend's buffers. */
#include "priv.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static bool shm_name_ok(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n >= 2 && n <= NAME_MAX && name[0] == '/' && !strchr(name + 1, '/');
}

int gg_client_shm_create(const char *name, size_t size, void **ptr)
{
    if (!shm_name_ok(name) || !size || !ptr || size > (size_t)INT64_MAX)
        return -EINVAL;
    *ptr = NULL;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int rc = 0;
    while (ftruncate(fd, (off_t)size) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            break;
        }
    }
    void *p = MAP_FAILED;
    if (rc == 0) {
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = -errno;
    }
    close(fd);
    if (rc < 0) {
        shm_unlink(name);
        return rc;
    }
    *ptr = p;
    return 0;
}

int gg_client_shm_destroy(const char *name, void *ptr, size_t size)
{
    int rc = 0;
    if (ptr && size && munmap(ptr, size) < 0)
        rc = -errno;
    if (name && shm_unlink(name) < 0 && rc == 0)
        rc = -errno;
    return rc;
}
