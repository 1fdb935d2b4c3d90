/* SPDX-License-Identifier: MIT */
/* Shared memory for buffers: POSIX shm objects by name (cpu backend), and
 * sealed memfds passed by descriptor (either backend). */
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

int gg_client_memfd_create(const char *name, size_t size, void **ptr, int *fd)
{
    if (!name || !size || !ptr || !fd || size > (size_t)INT64_MAX)
        return -EINVAL;
    *ptr = NULL;
    *fd = -1;
    int f = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0)
        return -errno;
    int rc = 0;
    while (ftruncate(f, (off_t)size) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            break;
        }
    }
    /* its size is fixed, so neither side can make the other's mapping fault */
    if (rc == 0 && fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
        rc = -errno;
    void *p = MAP_FAILED;
    if (rc == 0 && (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0)) == MAP_FAILED)
        rc = -errno;
    if (rc < 0) {
        close(f);
        return rc;
    }
    *ptr = p;
    *fd = f;
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
