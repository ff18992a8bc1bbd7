/*
 * fuzz_addr.c - libFuzzer target for the address parser (src/util/addr.c):
 * COHORT_STORE, MASTER_ADDR, COHORT_BIND_ADDR, cohortrun's --master, and
 * every rank's address as published through the store.
 *
 * Properties beyond "no crash, no out-of-bounds access": on success the
 * host is non-empty without '/', the port is "" or 1-5 digits, rest is NULL
 * or points at a '/' inside the input, a bare IPv6 host has no port; and
 * the fields written back in the grammar split again to the same fields.
 * The checked-in corpus replays in every normal ctest run (replay_main.c).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/addr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *s = malloc(size + 1);
    must(s != NULL);
    memcpy(s, data, size);
    s[size] = 0;
    coh_addr a;
    if (coh_addr_split(s, &a) == 0) {
        size_t hl = strlen(a.host), pl = strlen(a.port);
        must(hl >= 1 && hl < sizeof a.host && !strchr(a.host, '/'));
        must(pl <= 5 && strspn(a.port, "0123456789") == pl);
        must(!a.rest || (a.rest >= s && a.rest < s + strlen(s) && *a.rest == '/'));
        must(!(a.bare_v6 && pl));
        int p = coh_addr_port(&a, 0);
        must(pl ? p >= -1 && p <= 65535 : p == -1);
        char back[4096 + 512];
        int v6 = strchr(a.host, ':') != NULL && !a.bare_v6;
        snprintf(back, sizeof back, "%s%s%s%s%s%s%s%s", a.scheme, a.scheme[0] ? "://" : "",
                 v6 ? "[" : "", a.host, v6 ? "]" : "", pl ? ":" : "", a.port,
                 a.rest ? a.rest : "");
        coh_addr b;
        must(coh_addr_split(back, &b) == 0);
        must(!strcmp(a.scheme, b.scheme) && !strcmp(a.host, b.host) && !strcmp(a.port, b.port));
        must(a.bare_v6 == b.bare_v6 && !a.rest == !b.rest);
        must(!a.rest || !strcmp(a.rest, b.rest));
    }
    free(s);
    return 0;
}
