/* stub_coll.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "coll/coll.h"
#include <stddef.h>

cohort_status coh_coll_run(cohort_group *g, coh_call *c)
{
    (void)g;
    (void)c;
    return COHORT_ERR_UNSUPPORTED;
}

const coh_algo * coh_coll_select(const cohort_group *g, const coh_call *c, cohort_status *err)
{
    (void)g;
    (void)c;
    (void)err;
    return NULL;
}

const coh_algo *const * coh_coll_algos(void)
{
    return NULL;
}

size_t coh_coll_chunk_bytes(void)
{
    return 0;
}

