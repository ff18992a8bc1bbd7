/* stub_monitor.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "group/monitor.h"
#include <stddef.h>

cohort_status coh_monitor_start(cohort_group *g)
{
    (void)g;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_monitor_stop(cohort_group *g)
{
    (void)g;
}

void coh_monitor_post_abort(cohort_group *g, cohort_status st, const char *reason)
{
    (void)g;
    (void)st;
    (void)reason;
}

cohort_status coh_monitor_probe(cohort_group *g, const coh_call *call)
{
    (void)g;
    (void)call;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_monitor_stall_report(cohort_group *g, const coh_wait *w, char *out, size_t outlen)
{
    (void)g;
    (void)w;
    (void)out;
    (void)outlen;
}

