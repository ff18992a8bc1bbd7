/* stub_backend.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "store/backend.h"
#include <stddef.h>

/* coh_store_etcd_backend: src/store/etcd/ (etcd_stub.c when COHORT_ETCD=OFF). */

cohort_status coh_store_connect_gen(cohort_store **out, const char *addr, const char *job_id, const char *token, uint32_t generation, int timeout_ms)
{
    (void)out;
    (void)addr;
    (void)job_id;
    (void)token;
    (void)generation;
    (void)timeout_ms;
    return COHORT_ERR_UNSUPPORTED;
}

