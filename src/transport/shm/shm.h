/*
 * shm.h - the host-local shared segment: create/attach, wake, abort, the
 * per-rank published state and the aux regions. The collectives that run
 * on it live above the transport, in src/coll/shm (coll/shm/shm_coll.h);
 * they reach the segment through the phase protocol of shm_seg.h.
 *
 * The ranks of one host (g->local_ranks) share one job-private segment
 * (memfd passed over an authenticated abstract unix socket). Each local rank
 * owns a control line and a double-buffered slot. Waiting spins briefly,
 * then yields, then blocks on a futex, checking coh_wait_check (abort,
 * deadline, stall) and peers' liveness (pidfd) every slice, so ranks may
 * outnumber cores. Design, tuning variables and measurements: docs/shm.md.
 */
#ifndef COH_SHM_H
#define COH_SHM_H

#include <stddef.h>

#include "core/group.h"
#include "transport/transport.h"

typedef struct coh_shm coh_shm;

/* Its ops table: attached to the group by coh_shm_create, detached by
 * coh_shm_destroy. */
extern const coh_transport_ops coh_shm_transport;

/* Collective over the local ranks of g: creates or attaches the segment.
 * Uses g->store for the rendezvous of the local ranks. */
cohort_status coh_shm_create(cohort_group *g, coh_shm **out);
void coh_shm_destroy(coh_shm *s);
/* From any thread: wake every waiter on this segment (abort). */
void coh_shm_wake(coh_shm *s);
/* Marks the segment aborted so every local rank's waits end at once. */
void coh_shm_abort(coh_shm *s, cohort_status st, const char *reason);

/* COHORT_SHM_BAR_SCATTER (default 1: a ring scatter's root leads the
 * barrier after it too), which the ranks of a host must share: the
 * rendezvous compares it (group/agree.c). */
int coh_shm_bar_scatter_setting(void);

/* One whole handshake message of `len` bytes from the rendezvous socket fd
 * (and a passed descriptor into *got_fd, if given): 0, or -errno (-EPROTO
 * for another size, -ECONNRESET when the peer closed and nothing is
 * queued, -ETIMEDOUT past deadline_ns). A message queued before the peer's
 * reset is still returned. Used by the attach; public for test_shm_fault. */
int coh_shm_hs_recv(int fd, void *buf, size_t len, int *got_fd, uint64_t deadline_ns);

/* The copy path large calls take on this segment and why ("single copy
 * (process_vm_readv) from 65536 B ..." or "two copies through the segment
 * (single copy unavailable: ...)"); for cohort-perf and logs. */
const char *coh_shm_copy_info(const coh_shm *s);
/* The group's publish mode on the segment and why (membarrier or fence;
 * docs/shm.md "Publishing"). */
const char *coh_shm_publish_info(const coh_shm *s);
/* The copy path one call takes: "single copy (cma)", "two copies
 * (segment)", or why neither (coll is a COH_COLL_*; bytes per rank block,
 * the whole message for broadcast). */
const char *coh_shm_copy_path(const coh_shm *s, int coll, size_t bytes);
/* 2 ranks apart under COHORT_SHM_XCORE=auto, on the lead: what its last
 * probe that measured says ("near", "far"; "not yet measured"), the verdict
 * the next call's copy path follows; NULL elsewhere (cohort_describe
 * appends it, so cohort-perf records it whenever it changes). */
const char *coh_shm_xc_verdict(const coh_shm *s);
/* 1 when a broadcast of `bytes` goes through the small-broadcast ring (then
 * *slots and *max say its geometry, and *pieces how many ring phases it
 * takes: 1, or more for a broadcast in ring pieces), for cohort_describe. */
int coh_shm_ring_takes(const coh_shm *s, size_t bytes, size_t *slots, size_t *max,
                       size_t *pieces);
/* How a ring writer of `bytes` takes its next call's lines early (shm_seg.h
 * "Taking the next lines early"): 0 not at all (the cpu has no PREFETCHW),
 * 1 its records, 2 its records and slot; for cohort_describe. */
int coh_shm_ring_prefetch(const coh_shm *s, size_t bytes);

/* Per local rank, COH_SHM_AUX_BYTES of zero-initialised shared memory after
 * the slots, owned by src/check (the external-collective checker keeps its
 * outbound fingerprint ring and published position there). Pages nobody
 * touches are never backed. NULL if li is out of range. */
#define COH_SHM_AUX_BYTES (260u * 1024u)
void *coh_shm_aux(coh_shm *s, int li);

#endif
