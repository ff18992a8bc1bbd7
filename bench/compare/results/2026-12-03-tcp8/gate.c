/* gate.c - LD_PRELOAD experiment: a non-blocking recv() on a socket first asks poll(fd, 0)
 * (tcp_poll reads the socket without its lock) and returns EAGAIN when nothing is there,
 * as Open MPI's leaf polls before it reads. Not library code. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    static ssize_t (*real)(int, void *, size_t, int);
    if (!real) real = (ssize_t (*)(int, void *, size_t, int))dlsym(RTLD_NEXT, "recv");
    if (flags & MSG_DONTWAIT) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 0) == 0) { errno = EAGAIN; return -1; }
    }
    return real(fd, buf, len, flags);
}
