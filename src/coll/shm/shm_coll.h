/*
 * shm_coll.h - the collectives on the host segment (src/transport/shm).
 *
 * A collective is: wait until peers released my slot buffer, write my part
 * plus my fingerprint (a coh_hdr) into it, publish a flag, wait for the
 * flags of the ranks I read from, compare their fingerprints with mine (the
 * contract check, before any payload is read), read/reduce, release. Large
 * messages are pipelined through the slot in pieces, reduced in place by
 * all ranks on disjoint slices (one copy in, one copy out).
 *
 * All functions work on the local ranks only; `root` arguments are local
 * indices (0..local_size-1). They fail the group on error (coh_group_fail;
 * the segment's own failures through coh_coll_transport_failed).
 * AVG is computed as SUM: the caller divides by the group size once -
 * except a float16/bfloat16 AVG on a segment that holds the whole group,
 * which is divided in float32 before its one rounding (coh_avg_wide).
 *
 * Buffers: send == recv is in place for all_reduce, reduce (root) and
 * all_to_all; all_gather and gather accept any overlap of send with recv;
 * scatter's root accepts recv == send and recv == send + root*bytes;
 * reduce_scatter accepts recv == send and recv == send + local_rank*count.
 * Any other overlap is COHORT_ERR_INVALID. No receive buffer is written
 * before every local rank's fingerprint for the call matched. Design,
 * tuning variables and measurements: docs/shm.md.
 */
#ifndef COH_COLL_SHM_H
#define COH_COLL_SHM_H

#include <stddef.h>

#include "core/group.h"
#include "transport/shm/shm.h"

/* Collectives on local ranks; `c` is the contract (c->count, c->dtype ...),
 * buffers are explicit so hierarchical algorithms can pass their own.
 * bytes/counts are per the op's definition in cohort.h, relative to the
 * local group. */
cohort_status coh_shm_all_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t count);
cohort_status coh_shm_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                             size_t count, int root);
cohort_status coh_shm_broadcast(coh_shm *s, const coh_call *c, void *buf, size_t bytes, int root);
cohort_status coh_shm_all_gather(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t bytes_per_rank);
cohort_status coh_shm_gather(coh_shm *s, const coh_call *c, const void *send, void *recv,
                             size_t bytes_per_rank, int root);
cohort_status coh_shm_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv,
                              size_t bytes_per_rank, int root);
cohort_status coh_shm_reduce_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                     size_t count_per_rank);
cohort_status coh_shm_all_to_all(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t bytes_per_peer);
cohort_status coh_shm_barrier(coh_shm *s, const coh_call *c);

#endif
