/* stub_trace.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "trace/trace.h"
#include <stddef.h>

cohort_status coh_trace_create(coh_trace **out, int capacity)
{
    (void)out;
    (void)capacity;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_trace_destroy(coh_trace *t)
{
    (void)t;
}

uint64_t coh_trace_issue(coh_trace *t, const coh_call *c)
{
    (void)t;
    (void)c;
    return 0;
}

void coh_trace_start(coh_trace *t, uint64_t idx)
{
    (void)t;
    (void)idx;
}

void coh_trace_end(coh_trace *t, uint64_t idx, cohort_status st)
{
    (void)t;
    (void)idx;
    (void)st;
}

int coh_trace_last(const coh_trace *t, coh_trace_entry *out, int n)
{
    (void)t;
    (void)out;
    (void)n;
    return 0;
}

void coh_trace_progress(const coh_trace *t, uint64_t *last_done, coh_trace_entry *cur, int *has_cur)
{
    (void)t;
    (void)last_done;
    (void)cur;
    (void)has_cur;
}

cohort_status coh_trace_dump(cohort_group *g, const char *dir, const char *reason)
{
    (void)g;
    (void)dir;
    (void)reason;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_trace_install_signal(void)
{
}

int coh_trace_signal_pending(void)
{
    return 0;
}

