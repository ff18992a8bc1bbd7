/*
 * transport.h - the message transport contract (tcp today), and the header
 * every data-plane message carries.
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

typedef struct coh_net coh_net;

/* Builds connections to every peer of g (g->peers[].addr published by the
 * rendezvous), authenticating with job id, token MAC, generation and group
 * id. Listening socket: coh_net_listen() must have run before the addresses
 * were published. */
cohort_status coh_net_listen(cohort_group *g, coh_net **out, char *addr, size_t addrlen);
cohort_status coh_net_connect(coh_net *n);
/* Completes every op of the batch (any order), or fails the group. Sends and
 * receives progress together, so a ring step cannot deadlock on full socket
 * buffers. Blocks (poll) while nothing moves; checks coh_wait_check. */
cohort_status coh_net_xfer(coh_net *n, const coh_call *call, coh_xfer *ops, int nops);
/* From any thread: makes a blocked coh_net_xfer return (it then sees the
 * poisoned group). */
void coh_net_wake(coh_net *n);
/* Best effort: tells every connected peer the group is aborted. */
void coh_net_send_abort(coh_net *n, cohort_status st, const char *reason);
/* cohort_finalize's closing handshake: BYE to every peer, then reads every
 * connection up to the peer's BYE (bounded by timeout_ms). A message no call
 * of this rank received is a broken contract (COHORT_ERR_CONTRACT: a rank
 * whose part was send-only, a send without its recv); a peer that closes
 * without BYE is lost. Peers that do not arrive in time are logged and
 * COHORT_ERR_TIMEOUT returned, without failing the group: a rank busy after
 * its last call is not an error. */
cohort_status coh_net_close_check(coh_net *n, int timeout_ms);
void coh_net_destroy(coh_net *n);

#endif
