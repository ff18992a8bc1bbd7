/* resolve.c - the one resolver (addr.h): every getaddrinfo of the library
 * goes through here, so hints and errors agree. (The tools use the public
 * API alone; cohortrun's route probe keeps its own getaddrinfo.) */
#include "util/addr.h"

#include <netdb.h>
#include <string.h>

int coh_addr_resolve(const char *host, const char *port, int flags, struct addrinfo **out)
{
    if (out)
        *out = NULL;
    /* A connect needs a host; getaddrinfo would take NULL as loopback and ""
     * differently per libc. */
    if (!out || (!(flags & COH_RESOLVE_PASSIVE) && (!host || !*host)) || (!host && !port))
        return EAI_NONAME;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = (flags & COH_RESOLVE_DGRAM) ? SOCK_DGRAM : SOCK_STREAM;
    if (flags & COH_RESOLVE_PASSIVE)
        hints.ai_flags |= AI_PASSIVE;
    if (flags & COH_RESOLVE_NUMSERV)
        hints.ai_flags |= AI_NUMERICSERV;
    if (flags & COH_RESOLVE_NUMHOST)
        hints.ai_flags |= AI_NUMERICHOST;
    struct addrinfo *res = NULL;
    int gr = getaddrinfo(host, port, &hints, &res);
    if (gr != 0)
        return gr;
    if (!res)
        return EAI_NONAME;
    *out = res;
    return 0;
}

void coh_addr_freeinfo(struct addrinfo *ai)
{
    if (ai)
        freeaddrinfo(ai);
}

const char *coh_addr_strerror(int rc) { return gai_strerror(rc); }

int coh_addr_resolve_one(const char *host, const char *port, int flags,
                         struct sockaddr_storage *ss, socklen_t *sl)
{
    if (!ss || !sl)
        return EAI_NONAME;
    struct addrinfo *res;
    int gr = coh_addr_resolve(host, port, flags, &res);
    if (gr != 0)
        return gr;
    struct addrinfo *pick = res;
    if (flags & COH_RESOLVE_PREFER_V4)
        for (struct addrinfo *a = res; a; a = a->ai_next)
            if (a->ai_family == AF_INET) {
                pick = a;
                break;
            }
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *sl = pick->ai_addrlen;
    coh_addr_freeinfo(res);
    return 0;
}
