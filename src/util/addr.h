/*
 * addr.h - the one parser of network addresses written by people
 * (COHORT_STORE, MASTER_ADDR, COHORT_BIND_ADDR, published rank addresses,
 * cohortrun's --master): "[scheme://]host[:port][/rest]".
 *
 * host is a name, an IPv4 literal, "[v6]" (brackets dropped), or a bare
 * IPv6 literal - two or more colons without brackets - which can carry no
 * port (its last colon would be ambiguous). After "]" only ":port", "/" or
 * the end may follow. Each caller decides what it accepts on top (a
 * scheme, a path, a port range); the splitting is the same everywhere.
 */
#ifndef COH_UTIL_ADDR_H
#define COH_UTIL_ADDR_H

#include <stddef.h>
#include <sys/socket.h>

struct addrinfo;

typedef struct coh_addr {
    char scheme[16]; /* "" when absent, else what precedes "://" */
    char host[256];  /* never empty on success */
    char port[8];    /* "" when absent, else 1-5 decimal digits */
    const char *rest; /* into the input: from the first "/" after the authority, or NULL */
    int bare_v6;     /* host is an unbracketed IPv6 literal */
} coh_addr;

/* 0 on success, -1 when s does not split (empty host, a host or scheme too
 * long, a port that is not 1-5 digits, text after "]"). */
int coh_addr_split(const char *s, coh_addr *a);

/* The port as a number if it lies in lo..65535, else -1 ("" is -1). */
int coh_addr_port(const coh_addr *a, int lo);

/* ---- the one resolver of those hosts (getaddrinfo with each caller's
 * options). No AI_ADDRCONFIG: on a loopback-only host it would hide
 * 127.0.0.1. No deadline: a caller with one retries around this call. */
enum {
    COH_RESOLVE_PASSIVE = 1,   /* an address to bind; a NULL host is the wildcard */
    COH_RESOLVE_NUMSERV = 2,   /* port must be decimal digits (AI_NUMERICSERV) */
    COH_RESOLVE_NUMHOST = 4,   /* host must be a literal: no name lookup */
    COH_RESOLVE_DGRAM = 8,     /* datagram sockets, else stream */
    COH_RESOLVE_PREFER_V4 = 16 /* coh_addr_resolve_one: the first IPv4 address, if any */
};

/* Every address of host:port in getaddrinfo's order (IPv6 before IPv4 where
 * the system says so). 0 and *out (free with coh_addr_freeinfo), or an
 * EAI_* code for coh_addr_strerror: EAI_NONAME for a NULL/empty host of a
 * connect, or a NULL out. */
int coh_addr_resolve(const char *host, const char *port, int flags, struct addrinfo **out);
void coh_addr_freeinfo(struct addrinfo *ai);
const char *coh_addr_strerror(int rc);

/* One address of host:port into *ss (the first, or with
 * COH_RESOLVE_PREFER_V4 the first IPv4 one). 0 or an EAI_* code. */
int coh_addr_resolve_one(const char *host, const char *port, int flags,
                         struct sockaddr_storage *ss, socklen_t *sl);

#endif
