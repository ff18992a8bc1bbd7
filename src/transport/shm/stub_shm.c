/* stub_shm.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "transport/shm/shm.h"
#include <stddef.h>

cohort_status coh_shm_create(cohort_group *g, coh_shm **out)
{
    (void)g;
    (void)out;
    return COHORT_ERR_UNSUPPORTED;
}

void coh_shm_destroy(coh_shm *s)
{
    (void)s;
}

void coh_shm_wake(coh_shm *s)
{
    (void)s;
}

void coh_shm_abort(coh_shm *s, cohort_status st, const char *reason)
{
    (void)s;
    (void)st;
    (void)reason;
}

void coh_shm_set_state(coh_shm *s, const coh_call *cur, uint64_t last_done)
{
    (void)s;
    (void)cur;
    (void)last_done;
}

int coh_shm_peer_state(coh_shm *s, int li, coh_call *cur, uint64_t *last_done, int *alive)
{
    (void)s;
    (void)li;
    (void)cur;
    (void)last_done;
    (void)alive;
    return 0;
}

cohort_status coh_shm_all_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t count)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)count;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t count, int root)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)count;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_broadcast(coh_shm *s, const coh_call *c, void *buf, size_t bytes, int root)
{
    (void)s;
    (void)c;
    (void)buf;
    (void)bytes;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_all_gather(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t bytes_per_rank)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)bytes_per_rank;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_gather(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t bytes_per_rank, int root)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)bytes_per_rank;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t bytes_per_rank, int root)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)bytes_per_rank;
    (void)root;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_reduce_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t count_per_rank)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)count_per_rank;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_all_to_all(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t bytes_per_peer)
{
    (void)s;
    (void)c;
    (void)send;
    (void)recv;
    (void)bytes_per_peer;
    return COHORT_ERR_UNSUPPORTED;
}

cohort_status coh_shm_barrier(coh_shm *s, const coh_call *c)
{
    (void)s;
    (void)c;
    return COHORT_ERR_UNSUPPORTED;
}

