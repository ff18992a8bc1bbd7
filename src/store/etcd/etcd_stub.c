/* etcd_stub.c - built instead of the etcd backend when COHORT_ETCD=OFF. */
#include "store/backend.h"
#include "store/etcd/etcd.h"

const coh_store_backend *coh_store_etcd_backend(void) { return NULL; }

cohort_status coh_store_etcd_put_lease(cohort_store *s, const void *key, size_t klen,
                                       const void *val, size_t vlen)
{
    (void)s;
    (void)key;
    (void)klen;
    (void)val;
    (void)vlen;
    return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED,
                       "etcd store backend not built (configure with -DCOHORT_ETCD=ON)");
}

int coh_store_etcd_lease_state(cohort_store *s)
{
    (void)s;
    return -1;
}
