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

#endif
