/*
 * tcp.h - the tcp transport: authenticated connections to every peer and
 * batches of framed messages (coh_xfer, transport.h). Attached to its group
 * as coh_tcp_transport (transport.h's ops table).
 */
#ifndef COH_TCP_H
#define COH_TCP_H

#include <stddef.h>

#include "transport/transport.h"

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

/* How the sends of this net's batches were written (the slice rule of
 * net.h): counts of payload-carrying sends, by the limit a pass had. */
typedef struct coh_net_tx_stats {
    long sliced;       /* sends under a slice (duplex rule or COHORT_TCP_SEND_SLICE) */
    long whole;        /* sends written without a limit */
    long duplex;       /* of the sliced: chosen by the duplex rule */
    long slice_writes; /* passes that stopped at a slice's end with bytes left */
    size_t last_slice; /* the limit of the latest send (0: none) */
    long acks_now;     /* completed receives with ack_now: acknowledgments flushed */
    long parks;        /* (receive side) messages left in the kernel at their header:
                          park_ahead, or over COHORT_MAX_UNEXPECTED */
    long stash_scans;  /* stashed messages the stale check at a call's start looked at */
    long stash_peak;   /* the most messages stashed at once */
    long stashes;      /* messages stashed (read ahead into memory), in all */
} coh_net_tx_stats;
void coh_net_get_tx_stats(const coh_net *n, coh_net_tx_stats *out);

/* The busy-poll a wait does before it sleeps in poll(), in us, when
 * COHORT_TCP_SPIN_US is not set: 200 while the group's ranks on this
 * machine (local_ranks: g->machine_size, network namespaces included) have
 * a CPU each, 20 when they outnumber its online CPUs (a spinning rank would
 * hold a CPU its peer needs) or the count is unknown (cpus <= 0). Applied
 * at coh_net_connect, once the rendezvous has counted them. */
unsigned coh_tcp_spin_default_us(int local_ranks, long cpus);
/* The spin in force (ns), for tests. */
uint64_t coh_net_spin_ns(const coh_net *n);
/* "congestion control reno on 1 (auto: reno to this host; the system's
 * bbr)": what each connection runs, asked of its socket (cohort_describe). */
void coh_net_cc_info(const coh_net *n, char *out, size_t len);

/* Its ops table: abort = coh_net_send_abort (not for a peer's abort),
 * wake = coh_net_wake, close_check, destroy. */
extern const coh_transport_ops coh_tcp_transport;

#endif
