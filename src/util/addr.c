/* addr.c - splitting "[scheme://]host[:port][/rest]" (addr.h). Pure; the
 * resolver is resolve.c. */
#include "util/addr.h"

#include <string.h>

#include "cohort.h"

int coh_addr_split(const char *s, coh_addr *a)
{
    memset(a, 0, sizeof *a);
    if (!s)
        return -1;
    const char *p = s;
    const char *sep = strstr(s, "://");
    if (sep) {
        size_t n = (size_t)(sep - s);
        if (n == 0 || n >= sizeof a->scheme || memchr(s, '/', n) || memchr(s, ':', n))
            return -1;
        memcpy(a->scheme, s, n);
        p = sep + 3;
    }
    const char *end = p + strcspn(p, "/");
    if (*end)
        a->rest = end;
    const char *hs = p, *he, *ps = NULL;
    if (*p == '[') {
        hs = p + 1;
        he = memchr(hs, ']', (size_t)(end - hs));
        if (!he)
            return -1;
        if (he + 1 < end) {
            if (he[1] != ':')
                return -1;
            ps = he + 2;
        }
    } else {
        const char *colon = NULL;
        int ncolon = 0;
        for (const char *q = p; q < end; q++)
            if (*q == ':') {
                colon = q;
                ncolon++;
            }
        if (ncolon > 1) {
            a->bare_v6 = 1;
            colon = NULL;
        }
        he = colon ? colon : end;
        if (colon)
            ps = colon + 1;
    }
    size_t n = (size_t)(he - hs);
    /* No host name or address holds a bracket: "[[]" is not the host "[". */
    if (n == 0 || n >= sizeof a->host || memchr(hs, '[', n) || memchr(hs, ']', n))
        return -1;
    memcpy(a->host, hs, n);
    if (ps) {
        size_t m = (size_t)(end - ps);
        if (m == 0 || m > 5 || strspn(ps, "0123456789") < m)
            return -1;
        memcpy(a->port, ps, m);
    }
    return 0;
}

int coh_addr_port(const coh_addr *a, int lo)
{
    if (!a->port[0])
        return -1;
    long v = 0;
    for (const char *q = a->port; *q; q++)
        v = v * 10 + (*q - '0');
    return v >= lo && v <= 65535 ? (int)v : -1;
}

cohort_status cohort_hostport_split(const char *addr, char *host, size_t hostlen, char *port,
                                    size_t portlen)
{
    coh_addr a;
    if (!addr || !host || !port || coh_addr_split(addr, &a) != 0 || a.scheme[0] || a.rest ||
        a.bare_v6 || !a.port[0] || strlen(a.host) >= hostlen || strlen(a.port) >= portlen)
        return COHORT_ERR_INVALID;
    memcpy(host, a.host, strlen(a.host) + 1);
    memcpy(port, a.port, strlen(a.port) + 1);
    return COHORT_OK;
}
