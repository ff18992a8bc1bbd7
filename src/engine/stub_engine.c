/* stub_engine.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "engine/engine.h"
#include <stddef.h>

cohort_status coh_engine_create(cohort_group *g, coh_engine **out)
{
    (void)g;
    (void)out;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_engine_destroy(coh_engine *e)
{
    (void)e;
}

cohort_status coh_engine_submit(cohort_group *g, coh_call *c, cohort_work **work)
{
    (void)g;
    (void)c;
    (void)work;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_engine_wake(coh_engine *e)
{
    (void)e;
}

