/* stub_api.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "cohort.h"
#include <stddef.h>

#include "cohort.h"
#include <stddef.h>

size_t cohort_dtype_size(cohort_dtype dt)
{
    (void)dt;
    return 0;
}

const char * cohort_dtype_name(cohort_dtype dt)
{
    (void)dt;
    return NULL;
}

const char * cohort_op_name(cohort_op op)
{
    (void)op;
    return NULL;
}

cohort_status cohort_trace_dump(cohort_group *g, const char *dir)
{
    (void)g;
    (void)dir;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status cohort_validate_fingerprints(const cohort_fingerprint *by_rank, int n, char *msg, size_t msglen)
{
    (void)by_rank;
    (void)n;
    (void)msg;
    (void)msglen;
    return COHORT_ERR_UNSUPPORTED;
}
