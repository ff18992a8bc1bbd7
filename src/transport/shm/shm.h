/*
 * shm.h - the host-local shared segment and the collectives that run on it.
 *
 * The ranks of one host (g->local_ranks) share one job-private segment
 * (memfd passed over an authenticated abstract unix socket). Each local rank
 * owns a control line and a double-buffered slot; a collective is: wait
 * until peers released my slot buffer, write my part plus my fingerprint
 * (a coh_hdr) into it, publish a flag, wait for the flags of the ranks I
 * read from, compare their fingerprints with mine (the contract check,
 * before any payload is read), read/reduce, release. Large messages are
 * pipelined through the slot in pieces, reduced in place by all ranks on
 * disjoint slices (one copy in, one copy out).
 *
 * Waiting spins briefly, then yields, then blocks on a futex, checking
 * coh_wait_check (abort, deadline, stall) and peers' liveness (pidfd) every
 * slice, so ranks may outnumber cores.
 *
 * All functions work on the local ranks only; `root` arguments are local
 * indices (0..local_size-1). They fail the group (coh_group_fail) on error.
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
#ifndef COH_SHM_H
#define COH_SHM_H

#include <stddef.h>

#include "group/group.h"

typedef struct coh_shm coh_shm;

/* Collective over the local ranks of g: creates or attaches the segment.
 * Uses g->store for the rendezvous of the local ranks. */
cohort_status coh_shm_create(cohort_group *g, coh_shm **out);
void coh_shm_destroy(coh_shm *s);
/* From any thread: wake every waiter on this segment (abort). */
void coh_shm_wake(coh_shm *s);
/* Marks the segment aborted so every local rank's waits end at once. */
void coh_shm_abort(coh_shm *s, cohort_status st, const char *reason);

/* The copy path large calls take on this segment and why ("single copy
 * (process_vm_readv) from 65536 B ..." or "two copies through the segment
 * (single copy unavailable: ...)"); for cohort-perf and logs. */
const char *coh_shm_copy_info(const coh_shm *s);

/* Per local rank, COH_SHM_AUX_BYTES of zero-initialised shared memory after
 * the slots, owned by src/check (the external-collective checker keeps its
 * outbound fingerprint ring and published position there). Pages nobody
 * touches are never backed. NULL if li is out of range. */
#define COH_SHM_AUX_BYTES (260u * 1024u)
void *coh_shm_aux(coh_shm *s, int li);

/* Publishes this rank's state for stall reports: current call (or NULL) and
 * last completed seq. Cheap (a few stores into the control line). */
void coh_shm_set_state(coh_shm *s, const coh_call *cur, uint64_t last_done);

/* Reads local peer li's published state; returns 0 if unavailable. */
int coh_shm_peer_state(coh_shm *s, int li, coh_call *cur, uint64_t *last_done, int *alive);

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
