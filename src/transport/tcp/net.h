/*
 * net.h - the tcp transport's private state, shared by hs.c (listener,
 * handshakes, connect), xfer.c (the data path) and net.c (wake-ups, abort
 * frames, BYE, teardown).
 *
 * Threads: coh_net_xfer / coh_net_connect run on one thread at a time (the
 * engine's guarantee); they own everything here except what coh_net_wake and
 * coh_net_send_abort touch from other threads: the eventfd (write only) and,
 * under conn->wmu, a connection's write side (fd writes, tx_mid, tx_broken,
 * open).
 *
 * Lock order: conn->wmu is a leaf. The transport never fails its group
 * itself (transport.h); the caller's coh_group_fail sends abort frames,
 * taking wmu, after the batch has returned.
 */
#ifndef COH_TCP_NET_H
#define COH_TCP_NET_H

#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>

#include "transport/tcp/wire.h"
#include "transport/tcp/tcp.h"

/* An unexpected message (arrived before its receive was posted). The tail
 * entry of a connection's stash may still be filling (conn->rstash). */
typedef struct tcp_stash {
    struct tcp_stash *next;
    coh_hdr h;
    unsigned char data[];
} tcp_stash;

enum { RX_HDR = 0, RX_BODY = 1, RX_PARKED = 2 };
enum { RXD_OP = 0, RXD_STASH = 1, RXD_ABORT = 2 };

typedef struct tcp_conn {
    int fd; /* -1 until established */
    int peer;
    /* ---- read side (xfer thread only) ---- */
    int rx_state;
    coh_hdr rh;             /* header being read / being delivered */
    size_t rh_got;
    int rx_dst;             /* RXD_* */
    unsigned char *rdst;    /* payload destination */
    size_t rlen, rdone;
    coh_xfer *rop;          /* RXD_OP: the receive being filled */
    tcp_stash *rstash;      /* RXD_STASH: the entry being filled */
    unsigned char *rbuf;    /* small reads land here first (one recv for header + payload) */
    size_t rpos, rend;
    tcp_stash *sq_head, *sq_tail; /* unexpected messages, arrival order */
    int bye;                /* peer said BYE: its EOF is a clean close */
    int eof;                /* EOF/reset seen after BYE: nothing more will come */
    int hup;                /* parked and the peer closed: stop polling, decide on demand */
    /* ---- per-batch bookkeeping (xfer thread) ---- */
    int want;               /* incomplete receives from this peer in the batch */
    int sends;              /* incomplete sends to this peer in the batch */
    int blocked;            /* scratch: a send to this peer would block in this pass */
    size_t slice;           /* this batch's per-pass write limit to this peer (0: none) */
    /* ---- write side (any thread, under wmu) ---- */
    pthread_mutex_t wmu;
    int open;               /* established and writable */
    int tx_mid;             /* a message is partly written: no frame may be inserted */
    int tx_broken;          /* a partial abort frame went out: the stream is unusable */
} tcp_conn;

/* One handshake in progress (either direction). */
typedef struct tcp_hs {
    int fd;
    int outgoing;
    int peer;               /* outgoing: target; incoming: claimed rank once known, else -1 */
    int state;              /* HS_* in hs.c */
    int refuse;             /* incoming: the code being sent before closing */
    uint8_t out[COH_HS_MAX_FRAME];
    size_t olen, ooff;
    uint8_t in[COH_HS_MAX_FRAME];
    size_t iwant, ioff;
    int in_type;            /* type once the prefix is parsed, else 0 */
    uint8_t na[COH_HS_NONCE], nc[COH_HS_NONCE];
    uint64_t deadline_ns;
    uint64_t retry_ns;      /* outgoing: earliest reconnect */
    int attempts;
    char why[160];          /* outgoing: last failure, for the timeout message */
    char from[96];          /* printable remote address */
} tcp_hs;

/* Most bytes a pass writes to one socket before it reads, for every send
 * (COHORT_TCP_SEND_SLICE; 0: the duplex rule below decides). */
#define TCP_TX_SLICE_DEFAULT 0
/* The duplex rule (COHORT_TCP_DUPLEX_SLICE; 0: off): a send to a peer the
 * same batch also receives from is written at most this much per pass, so
 * the peer's data and ACKs queued behind our socket lock are taken between
 * slices; a send with nothing coming back (a broadcast's) goes out whole.
 * Off by default: 128 KiB lost the paired loaded A/B at 4 MiB on loopback
 * and veth alike (docs/performance.md, 2026-12-02 09:17 UTC); the quiet
 * A/B there decides whether it is turned on. */
#define TCP_DUPLEX_SLICE_DEFAULT 0
/* Busy-poll before a sleep, when this host's ranks have a CPU each, and
 * when they outnumber its CPUs (coh_tcp_spin_default_us). */
#define TCP_SPIN_US_DEFAULT 200
#define TCP_SPIN_US_OVERSUB 20
#define TCP_HS_MAX_IN 64    /* concurrent unauthenticated connections (then the oldest of
                               the busiest source is evicted) */
/* COHORT_TCP_CONGESTION (docs/wire-protocol.md "Connections"): unset or auto
 * sets TCP_CC_LOCAL on connections to ranks of this machine (any network
 * namespace) and leaves the system's choice to other machines; system never
 * sets one; a name sets it everywhere. */
enum { TCP_CC_AUTO, TCP_CC_SYSTEM, TCP_CC_NAMED };
#define TCP_CC_NAME 16 /* the kernel's TCP_CA_NAME_MAX */
#define TCP_CC_LOCAL "reno"

#define TCP_HS_AUTH_MS 2000 /* an incoming handshake's whole budget, from accept */
/* How often a data path whose waits all end within the spin (and so never
 * reach poll()) still accepts and times out incoming handshakes. */
#define TCP_HS_TICK_MS 10

struct coh_net {
    cohort_group *g;
    int rank, size;
    int lfd;                /* listening socket, open for the net's lifetime */
    int efd;                /* eventfd: coh_net_wake */
    tcp_conn *c;            /* [size]; c[rank] unused */
    uint8_t key[COH_HS_KEY];
    coh_hs_ident me;
    tcp_hs *hs;             /* [hs_cap] */
    int nhs, hs_cap;
    int connected;          /* coh_net_connect succeeded */
    int bufsize;            /* SO_SNDBUF/SO_RCVBUF (0: kernel autotuning) */
    int cc_mode;            /* COHORT_TCP_CONGESTION: TCP_CC_AUTO, _SYSTEM or _NAMED */
    char cc[TCP_CC_NAME];   /* _NAMED: the user's algorithm; _AUTO: TCP_CC_LOCAL */
    char cc_system[TCP_CC_NAME]; /* the system's default (what other sockets get) */
    int cc_fail;            /* setsockopt(TCP_CONGESTION) refused on a connection */
    int hs_timeout_ms;      /* per unauthenticated connection (capped at TCP_HS_AUTH_MS) */
    long n_evicted;         /* unauthenticated connections evicted for newer ones */
    long n_auth_timeout;    /* ... closed at their deadline */
    char last_evicted[64], last_timeout[64]; /* host of the last one of each */
    /* data path */
    size_t stash_bytes, stash_max;
    int nstash;             /* stashed messages, all connections */
    int closing;            /* coh_net_close_check has begun */
    uint64_t coll_floor;    /* highest seq of a posted COLL receive: lower ones are stale */
    coh_xfer *ops;          /* the current batch */
    int nops;
    const coh_call *call;
    int left;               /* incomplete ops of the current batch */
    int acks;               /* some op of the current batch has ack_now */
    uint64_t spin_ns;       /* busy-poll before sleeping in poll() (coh_tcp_spin_default_us) */
    uint64_t hs_tick_ns;    /* the data path services handshakes again from then */
    int spin_env;           /* COHORT_TCP_SPIN_US set: spin_ns is the user's */
    size_t tx_slice;        /* COHORT_TCP_SEND_SLICE: every send's slice (0: duplex rule) */
    size_t duplex_slice;    /* COHORT_TCP_DUPLEX_SLICE (0: duplex sends go out whole) */
    coh_net_tx_stats tx_st; /* what the rule chose (tests, coh_net_get_tx_stats) */
    size_t rbuf_size;
    struct pollfd *pfd;     /* [pfd_cap] */
    int *pmap;              /* [pfd_cap]: >=0 conn peer, -1 eventfd, -2 handshake area */
    int pfd_cap;
    int *scratch;           /* [size]: ranks list for stall reports */
    int *dpeers;            /* [size]: peers the current batch moves data with */
    int ndpeers;
    char abort_txt[COH_ABORT_MAX_LEN + 1];
    char addr[80];
};

/* hs.c: the handshake area of a poll set (listener + handshakes). Adds its
 * fds at p[0..] and returns how many; tcp_hs_service then handles their
 * revents (accept, progress, refuse, timeouts). During xfer only incoming
 * handshakes exist: a completed one for an unconnected rank is refused as a
 * duplicate/late connection. Returns a status only for fatal errors of
 * outgoing handshakes (connect phase). */
int tcp_hs_pollfds(coh_net *n, struct pollfd *p);
cohort_status tcp_hs_service(coh_net *n, const struct pollfd *p, int np);

/* net.c: BYE to every connected peer; the connections are closed for
 * writing from then on (frames after a BYE are a protocol error). */
void tcp_send_bye(coh_net *n);
/* xfer.c: frees a connection's stash. */
void tcp_stash_free(coh_net *n, tcp_conn *c);

/* Sets common options on a data socket (TCP_NODELAY, buffer sizes). */
void tcp_sockopts(coh_net *n, int fd);

#endif
