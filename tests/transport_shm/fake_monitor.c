/*
 * fake_monitor.c - TEST ONLY. Stands in for src/group/monitor.c until it
 * lands (the placeholder's probe returns UNSUPPORTED, which would end every
 * wait longer than 100 ms). Defines every symbol of monitor.h.
 */
#include <stdio.h>

#include "group/monitor.h"

cohort_status coh_monitor_start(cohort_group *g)
{
    (void)g;
    return COHORT_OK;
}

void coh_monitor_stop(cohort_group *g) { (void)g; }

void coh_monitor_post_abort(cohort_group *g, cohort_status st, const char *reason)
{
    (void)g, (void)st, (void)reason;
}

cohort_status coh_monitor_probe(cohort_group *g, const coh_call *call)
{
    (void)g, (void)call;
    return COHORT_OK;
}

void coh_monitor_stall_report(cohort_group *g, const coh_wait *w, char *out, size_t outlen)
{
    char r[256] = "?";
    if (w->waiting_for)
        coh_fmt_ranks(r, sizeof r, w->waiting_for, w->n_waiting_for);
    snprintf(out, outlen, "rank %d waits for rank(s) %s in seq %llu", g->rank, r,
             w->call ? (unsigned long long)w->call->seq : 0ull);
}
