/*
 * transport.h - the transport seam (the ops table every transport gives its
 * group), and the header every data-plane message carries.
 *
 * The header carries the sender's whole fingerprint for the call, so the
 * receiver checks the contract on the message the algorithm sends anyway,
 * before it touches the payload (coh_hdr_match in src/contract).
 */
#ifndef COH_TRANSPORT_H
#define COH_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "group/group.h"

#define COH_HDR_MAGIC 0x31524843u /* "CHR1" little-endian */

enum coh_msg_kind {
    COH_MSG_COLL = 1,  /* a collective's message: seq = group seq, step = algorithm step */
    COH_MSG_P2P = 2,   /* send/recv: seq = per-pair seq, tag = user tag */
    COH_MSG_ABORT = 3, /* payload: UTF-8 reason; status in tag */
    COH_MSG_BYE = 4,   /* no payload: the sender closes cleanly (coh_net_destroy); an EOF
                          after it is not a peer death */
};

/* Wire header, 64 bytes, little-endian host order (all hosts of a job are
 * assumed the same endianness; the handshake checks it). */
typedef struct coh_hdr {
    uint32_t magic;
    uint8_t kind;   /* coh_msg_kind */
    uint8_t coll;   /* coh_coll */
    uint8_t dtype;  /* cohort_dtype */
    int8_t redop;   /* cohort_op or -1 */
    uint32_t group; /* group id */
    uint32_t gen;   /* generation */
    uint64_t seq;
    uint64_t count; /* the call's count (not this message's) */
    int32_t root;   /* root / peer, -1 */
    int32_t tag;
    uint32_t step;  /* algorithm step or chunk index within the call */
    uint32_t site;  /* sender's call-site hash (reported, never compared) */
    uint64_t len;   /* payload bytes following this header */
    int32_t src;    /* sender's group rank */
    uint32_t line;  /* sender's call-site line (for reports) */
} coh_hdr;
_Static_assert(sizeof(coh_hdr) == 64, "coh_hdr is 64 bytes on the wire");

/* Fills h from the call's contract. */
void coh_hdr_from_call(coh_hdr *h, const cohort_group *g, const coh_call *c, int kind,
                       uint32_t step, uint64_t len);

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
