/*
 * etcd.h - what the etcd store backend offers beyond the backend vtable
 * (store/backend.h). Implemented in libcohort (src/store/etcd_load.c), which
 * forwards to the plugin; without COHORT_ETCD, or before an etcd:// handle
 * exists, every function here fails with COHORT_ERR_UNSUPPORTED.
 */
#ifndef COH_STORE_ETCD_H
#define COH_STORE_ETCD_H

#include "cohort_store.h"

/* Puts key = val bound to the handle's etcd lease: the key disappears when
 * this process dies (the keep-alive thread stops and etcd expires the lease
 * within COHORT_ETCD_LEASE_TTL seconds, default 5) or at once when the
 * handle is closed (the lease is revoked). The lease is granted on the first
 * call and shared by every leased key of the handle; the key is relative to
 * s like any other (a prefixed view's prefix applies).
 *
 * Returns COHORT_OK; COHORT_ERR_UNSUPPORTED if s is not an etcd handle (or
 * the backend is not built); COHORT_ERR_STORE if the lease already expired
 * (it is never silently replaced: peers may have acted on the vanished
 * keys) or the cluster is unreachable; the usual store statuses otherwise.
 * Thread-safe like the other calls on s. */
cohort_status coh_store_etcd_put_lease(cohort_store *s, const void *key, size_t klen,
                                       const void *val, size_t vlen);

/* 1 while the handle's lease is alive, 0 if none was granted yet, -1 if it
 * expired (leased keys are gone) or s is not an etcd handle. */
int coh_store_etcd_lease_state(cohort_store *s);

#endif
