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
    /* A receive: once the batch has completed, send the acknowledgment the
     * connection still owes its peer now, instead of inside the next
     * receive from it (tcp: coh_net_xfer; coll/algos.c coh_bar_ack_from).
     * Ignored for sends and by transports without one. (Here, in what was
     * the struct's tail padding: the size stays 104 bytes.) */
    int ack_now;
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

/* ---- failures: reported up, never acted on -----------------------------
 * A transport never changes its group's state. Where it finds a failure it
 * records what happened (which peer, why) here and returns the status; the
 * module that owns the call (src/coll; group init and finalize for create,
 * connect and close_check) turns the record into the group's failure with
 * coh_coll_transport_failed (coll/fail/fail.h): coh_group_fail,
 * coh_group_peer_lost, coh_group_remote_abort or coh_contract_mismatch.
 * The record is thread-local: a transport finds failures only on the
 * caller's thread (it has no threads of its own; its failure-path hooks
 * record nothing). A status returned with no record is the group's already
 * (a wait that found the group poisoned or past its deadline,
 * coh_wait_check). scripts/check_layers.py fails the build's test when an
 * object of transport/ calls one of those four functions. */
enum {
    COH_TPF_FAIL = 1,     /* msg is the group's error message */
    COH_TPF_PEER_LOST,    /* peer is dead; msg says how */
    COH_TPF_REMOTE_ABORT, /* a peer aborted the group; msg is its reason */
    COH_TPF_MISMATCH,     /* a message from peer broke the contract of call */
};
typedef struct coh_tp_fail {
    cohort_group *g; /* NULL: nothing recorded */
    int kind;        /* COH_TPF_* */
    cohort_status st;
    int peer;        /* group rank (PEER_LOST, MISMATCH) */
    int has_call;    /* MISMATCH: call is this rank's call (else unknown), */
    coh_call call;   /* exp what it expected and got what came */
    coh_hdr exp, got;
    uint64_t seq;    /* REMOTE_ABORT: the collective call that failed, 0 unknown */
    char msg[COH_ERRLEN];
} coh_tp_fail;

/* Record a failure of g on this thread and return its status (the first
 * three return st, PEER_LOST, st, COHORT_ERR_CONTRACT). A new record
 * replaces an unclaimed one: a transport returns right after recording. */
cohort_status coh_tp_fail_set(cohort_group *g, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
cohort_status coh_tp_peer_lost(cohort_group *g, int peer, const char *how);
cohort_status coh_tp_remote_abort(cohort_group *g, cohort_status st, const char *reason);
/* The same, naming the collective call that failed (0: unknown). */
cohort_status coh_tp_remote_abort_at(cohort_group *g, cohort_status st, const char *reason,
                                     uint64_t seq);
cohort_status coh_tp_mismatch(cohort_group *g, const coh_call *call, int peer,
                              const coh_hdr *exp, const coh_hdr *got);
/* Moves this thread's record for g into out and clears it; 0 when there is
 * none (or it belongs to another group). */
int coh_tp_fail_take(cohort_group *g, coh_tp_fail *out);
/* The recorded message for g (a transport telling its peers why it failed
 * before it returns, e.g. the segment's abort word), else g's error. */
const char *coh_tp_fail_reason(cohort_group *g);

#endif
