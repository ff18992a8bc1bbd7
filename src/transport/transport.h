/*
 * transport.h - the transport seam (the ops table every transport gives its
 * group) and a batch of messages (coh_xfer).
 *
 * Every message carries the sender's whole fingerprint for the call
 * (coh_hdr, owned by the contract: contract/hdr.h), so the receiver checks
 * the contract on the message the algorithm sends anyway, before it touches
 * the payload (coh_hdr_match).
 */
#ifndef COH_TRANSPORT_H
#define COH_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "contract/hdr.h"
#include "core/group.h"

/* One send or receive in a batch. For a receive, hdr is the expected
 * contract (built with coh_hdr_from_call) and len the exact expected payload
 * size; a message whose contract differs fails the batch with
 * COHORT_ERR_CONTRACT (via coh_contract_mismatch) before buf is written. */
typedef struct coh_xfer {
    int peer;     /* group rank */
    int is_send;
    coh_hdr hdr;
    void *buf;    /* const for sends */
    size_t len;
    /* transport-private progress */
    size_t done;
    int state;
} coh_xfer;

/* ---- the transport seam ------------------------------------------------
 * What every transport (shm: transport/shm/shm.h, tcp: transport/tcp/tcp.h)
 * gives the group that owns it. The group reaches a transport only through
 * this table: the failure path through hook (abort frames or the
 * segment's abort word, waking blocked waits), cohort_finalize through
 * close_check, teardown through destroy. A transport attaches itself when
 * it is created (coh_transport_attach) and detaches when destroyed; it
 * never calls the group's teardown or the other transports. Data moves
 * through each transport's own typed calls (coh_net_xfer, the segment's
 * phase protocol in shm_seg.h), which only src/coll uses. */
typedef struct coh_transport_ops {
    coh_hook_ops hook;
    /* cohort_finalize's closing handshake (NULL: nothing to drain). */
    cohort_status (*close_check)(void *t, int timeout_ms);
    void (*destroy)(void *t);
} coh_transport_ops;

/* Attach: registers ops->hook and the transport on g; detach undoes both. */
void coh_transport_attach(cohort_group *g, const coh_transport_ops *ops, void *t);
void coh_transport_detach(cohort_group *g, void *t);

#endif
