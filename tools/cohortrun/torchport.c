/* torchport.c - the MASTER_ADDR:MASTER_PORT given to workers
 * (docs/launcher.md#torch).
 *
 * torch.distributed's rank 0 binds MASTER_PORT itself (env://, or a
 * program's own TCPStore(is_master=rank == 0)), and so may any program that
 * reads MASTER_PORT. So that port must be free, and it is not the job's
 * store: each generation gets a port nobody holds, picked on node 0 and
 * given to the other nodes through the job's (authenticated) store. The
 * store never serves unauthenticated TCPStore clients on a cohortrun's
 * behalf, and a worker left over from an earlier generation cannot reach
 * the next generation's rank 0.
 *
 * The port is taken below the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range): an outgoing connect() never picks it
 * between the probe here and rank 0's bind. The start point is a hash of
 * the job id and generation, so two jobs starting on one host at once probe
 * different ports.
 */
#include "cohortrun.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PORT_FLOOR 20000 /* below: well-known services live there */
#define PROBES 512

/* Can a server bind and listen on port of every interface, as torch's
 * TCPStore does ([::] dual-stack, else 0.0.0.0, with SO_REUSEADDR)? */
static int port_free(int port)
{
    int one = 1, zero = 0;
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok;
    if (fd >= 0) {
        struct sockaddr_in6 a6;
        memset(&a6, 0, sizeof a6);
        a6.sin6_family = AF_INET6;
        a6.sin6_addr = in6addr_any;
        a6.sin6_port = htons((uint16_t)port);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        ok = bind(fd, (struct sockaddr *)&a6, sizeof a6) == 0 && listen(fd, 1) == 0;
        close(fd);
        if (!ok)
            return 0;
    }
    /* Also on IPv4 alone: a listener bound to 0.0.0.0 (or to one IPv4
     * address) only, with IPv6 sockets v6only by default, would not stop
     * the bind above. */
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a4;
    memset(&a4, 0, sizeof a4);
    a4.sin_family = AF_INET;
    a4.sin_addr.s_addr = htonl(INADDR_ANY);
    a4.sin_port = htons((uint16_t)port);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    ok = bind(fd, (struct sockaddr *)&a4, sizeof a4) == 0 && listen(fd, 1) == 0;
    close(fd);
    return ok;
}

static int ephemeral_low(void)
{
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    return lo;
}

int crun_torch_port(const char *job_id, uint32_t gen)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *p = job_id; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ gen) * 16777619u;
    int lo = PORT_FLOOR, hi = ephemeral_low() - 1;
    if (hi - lo < 1000) {
        /* An ephemeral range reaching down here: anywhere above 1023 that
         * is outside it, else take the risk inside it. */
        lo = 1024;
        if (hi - lo < 1000)
            hi = 65535;
    }
    int span = hi - lo + 1;
    for (int i = 0; i < PROBES && i < span; i++) {
        int port = lo + (int)((h + (uint32_t)i) % (uint32_t)span);
        if (port_free(port))
            return port;
    }
    errno = EADDRINUSE;
    return -1;
}

int crun_local_addr_toward(const char *host, int port, char *out, size_t len)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_DGRAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port > 0 ? port : 9);
    if (getaddrinfo(host, ps, &hints, &ai) != 0 || !ai)
        return -1;
    int rc = -1;
    for (struct addrinfo *a = ai; a && rc < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            continue;
        struct sockaddr_storage me;
        socklen_t ml = sizeof me;
        /* A datagram connect() only picks the route and source address. */
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
            getnameinfo((struct sockaddr *)&me, ml, out, (socklen_t)len, NULL, 0,
                        NI_NUMERICHOST) == 0)
            rc = 0;
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}
