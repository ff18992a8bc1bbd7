/* stub_tcp.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "transport/transport.h"
#include <stddef.h>

void coh_hdr_from_call(coh_hdr *h, const cohort_group *g, const coh_call *c, int kind, uint32_t step, uint64_t len)
{
    (void)h;
    (void)g;
    (void)c;
    (void)kind;
    (void)step;
    (void)len;
}

cohort_status coh_net_listen(cohort_group *g, coh_net **out, char *addr, size_t addrlen)
{
    (void)g;
    (void)out;
    (void)addr;
    (void)addrlen;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_net_connect(coh_net *n)
{
    (void)n;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_net_xfer(coh_net *n, const coh_call *call, coh_xfer *ops, int nops)
{
    (void)n;
    (void)call;
    (void)ops;
    (void)nops;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_net_wake(coh_net *n)
{
    (void)n;
}

void coh_net_send_abort(coh_net *n, cohort_status st, const char *reason)
{
    (void)n;
    (void)st;
    (void)reason;
}

void coh_net_destroy(coh_net *n)
{
    (void)n;
}

