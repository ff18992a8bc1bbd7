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
 * except on a segment that holds the whole group, where the fold divides
 * (coh_avg_folds: float16/bfloat16 in float32 before their one rounding,
 * float32/float64 each piece as it is reduced).
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

#include "contract/hdr.h"
#include "core/group.h"
#include "transport/shm/shm.h"

/* A call begins on a poisoned group: the segment's abort word names the
 * collective call that failed, which the group's failure may not know yet
 * (it came through the store's record first): learns it, and returns
 * coh_group_entry's status for c (the cause when c is that call, else
 * COHORT_ERR_ABORTED). s may be NULL. */
cohort_status coh_shm_entry_failed(coh_shm *s, cohort_group *g, const coh_call *c);

/* Collectives on local ranks; `c` is the contract (c->count, c->dtype ...),
 * buffers are explicit so hierarchical algorithms can pass their own.
 * bytes/counts are per the op's definition in cohort.h, relative to the
 * local group. */
cohort_status coh_shm_all_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t count);
cohort_status coh_shm_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                             size_t count, int root);
/* coh_shm_broadcast (bcast_pieces.c): with ranks outnumbering cpus and a
 * message above the ring's slot, up to half the ring, a sequence of
 * coh_shm_broadcast_plain calls of at most the slot (shm_ring_pieces;
 * docs/shm.md "Broadcast in ring pieces"); else coh_shm_broadcast_plain:
 * the ring, the single copy, a cohort_mem_alloc root buffer or two copies
 * (shm_coll.c). */
cohort_status coh_shm_broadcast(coh_shm *s, const coh_call *c, void *buf, size_t bytes, int root);
cohort_status coh_shm_broadcast_plain(coh_shm *s, const coh_call *c, void *buf, size_t bytes,
                                      int root);
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

/* Point-to-point between this rank and local rank q through the pair's
 * channel (shm_p2p.c; docs/shm.md "Send and receive"). h is the message
 * header both sides build (coh_p2p normalises it); the receiver compares
 * the sender's with its own before a byte lands in buf. Sends of at most
 * SHM_P2P_SLOTS x COHORT_SHM_P2P_BYTES (all outstanding ones together; up
 * to SHM_P2P_HEADS messages of <= SHM_CHAN_INLINE bytes, which need no
 * data slot) return without the receiver (eager); larger ones wait for it to drain
 * the channel, and a single-copy send waits until the receiver has read
 * its buffer. coh_shm_p2p_peer: q for group rank peer, -1 when the pair
 * does not use the segment (another host, channels off). */
int coh_shm_p2p_peer(const coh_shm *s, int peer);
cohort_status coh_shm_send(coh_shm *s, const coh_call *c, int q, const coh_hdr *h,
                           const void *buf, size_t bytes);
cohort_status coh_shm_recv(coh_shm *s, const coh_call *c, int q, const coh_hdr *h, void *buf,
                           size_t bytes);
/* The copy loops of the collectives (nt: streaming stores). */
void coh_shm_copy(void *dst, const void *src, size_t n, int nt);

#endif
