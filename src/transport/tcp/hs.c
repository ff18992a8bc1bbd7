/*
 * hs.c - tcp transport: listening socket and published address, the
 * authenticated connection setup (coh_net_connect) and the listener
 * serviced for the group's lifetime. What runs on the established
 * connections is elsewhere: the data path in xfer.c; wake-ups, abort
 * frames, BYE, teardown and the ops table in net.c.
 *
 * Connection direction: rank i connects to every rank j > i and accepts
 * from every rank j < i, so each pair has exactly one connection and no
 * simultaneous-open race exists. The listener accepts in any order; every
 * accepted socket runs its own non-blocking handshake, so a stray, slow or
 * hostile client never delays the real peers (it is refused and closed, with
 * one log line naming the cause).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "transport/tcp/net.h"
#include "util/addr.h"
#include "util/auth.h"
#include "util/ratelimit.h"

/* Handshake states. 0 means "finished or closed": the entry is dropped at
 * the next compaction. Incoming: SEND(challenge) -> RECV(hello) ->
 * SEND(welcome) -> established. Outgoing: RETRY -> CONNECTING ->
 * RECV(challenge) -> SEND(hello) -> RECV(welcome) -> established. */
enum {
    HS_RETRY = 1,   /* outgoing: not connected, (re)connect at retry_ns */
    HS_CONNECTING,  /* outgoing: non-blocking connect in progress */
    HS_SEND,        /* writing out[] */
    HS_RECV,        /* reading a frame into in[] */
};

#define HS_RETRY_MIN_MS 5
#define HS_RETRY_MAX_MS 500
#define HS_DEFAULT_TIMEOUT_MS 10000

/* ---- addresses ---- */

static void fmt_sa(const struct sockaddr *sa, char *out, size_t len)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const void *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof ip);
        snprintf(out, len, "[%s]:%d", ip, ntohs(s6->sin6_port));
    } else if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const void *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof ip);
        snprintf(out, len, "%s:%d", ip, ntohs(s4->sin_port));
    } else {
        snprintf(out, len, "?");
    }
}

/* An address into host and port strings (util/addr.h's grammar); port is
 * "" when absent. Returns 0, or -1 if it does not split or fit. */
static int split_hostport(const char *s, char *host, size_t hl, char *port, size_t pl)
{
    coh_addr a;
    if (coh_addr_split(s, &a) != 0 || strlen(a.host) >= hl || strlen(a.port) >= pl)
        return -1;
    memcpy(host, a.host, strlen(a.host) + 1);
    memcpy(port, a.port, strlen(a.port) + 1);
    return 0;
}

/* Prefer IPv4: MASTER_ADDR-style setups are IPv4 almost everywhere. */
static int resolve(const char *host, const char *port, int flags, struct sockaddr_storage *ss,
                   socklen_t *sl)
{
    return coh_addr_resolve_one(host, port, COH_RESOLVE_NUMSERV | COH_RESOLVE_PREFER_V4 | flags,
                                ss, sl) != 0
               ? -1
               : 0;
}

/* The local address the kernel would use to reach `host`: a connected UDP
 * socket sends nothing, but getsockname() shows the chosen source address,
 * i.e. the interface peers can reach us on if they can reach `host`. */
static int route_src(const char *host, struct sockaddr_storage *ss, socklen_t *sl)
{
    struct sockaddr_storage dst;
    socklen_t dl;
    if (resolve(host, "9", COH_RESOLVE_DGRAM, &dst, &dl) != 0)
        return -1;
    int fd = socket(dst.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int ok = connect(fd, (struct sockaddr *)&dst, dl) == 0;
    *sl = sizeof *ss;
    ok = ok && getsockname(fd, (struct sockaddr *)ss, sl) == 0;
    close(fd);
    return ok ? 0 : -1;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
    if (ss->ss_family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
}

static int is_any(const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
    return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
}

static void loopback_of(int family, struct sockaddr_storage *ss, socklen_t *sl)
{
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET6) {
        struct sockaddr_in6 *s6 = (void *)ss;
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_loopback;
        *sl = sizeof *s6;
    } else {
        struct sockaddr_in *s4 = (void *)ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        *sl = sizeof *s4;
    }
}

/* Chooses the bind address and the address to publish:
 *   COHORT_BIND_ADDR if set (published as is unless it is a wildcard);
 *   else the interface that routes to MASTER_ADDR / the store host;
 *   else bind 0.0.0.0 and publish 127.0.0.1 (single host). */
static cohort_status pick_addrs(coh_net *n, struct sockaddr_storage *bind_ss, socklen_t *bind_len,
                                struct sockaddr_storage *pub_ss)
{
    const char *b = coh_env_str("COHORT_BIND_ADDR");
    int have_bind = 0;
    if (b) {
        char host[256], port[16];
        if (split_hostport(b, host, sizeof host, port, sizeof port) != 0 ||
            resolve(host, "0", 0, bind_ss, bind_len) != 0)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_BIND_ADDR=%s: not an address of this host", b);
        have_bind = 1;
        if (!is_any(bind_ss)) {
            *pub_ss = *bind_ss;
            return COHORT_OK;
        }
    }
    const char *target = coh_env_str("MASTER_ADDR");
    if (!target && n->g->store_addr[0])
        target = n->g->store_addr;
    if (!target)
        target = coh_env_str("COHORT_STORE");
    struct sockaddr_storage r;
    socklen_t rl;
    char host[256], port[16];
    if (target && split_hostport(target, host, sizeof host, port, sizeof port) == 0 &&
        route_src(host, &r, &rl) == 0) {
        if (!have_bind) {
            *bind_ss = r;
            *bind_len = rl;
        }
        *pub_ss = r;
        return COHORT_OK;
    }
    if (!have_bind) {
        memset(bind_ss, 0, sizeof *bind_ss);
        struct sockaddr_in *s4 = (void *)bind_ss;
        s4->sin_family = AF_INET;
        s4->sin_addr.s_addr = htonl(INADDR_ANY);
        *bind_len = sizeof *s4;
    }
    socklen_t pl;
    loopback_of(bind_ss->ss_family, pub_ss, &pl);
    return COHORT_OK;
}

void tcp_sockopts(coh_net *n, int fd)
{
    int one = 1;
    /* Failures only cost performance, never correctness: ignored. */
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (n->bufsize > 0) {
        (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &n->bufsize, sizeof n->bufsize);
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &n->bufsize, sizeof n->bufsize);
    }
}

/* Between two sockets of one kernel - loopback, or network namespaces
 * joined by veth - there is no network to share, and a congestion
 * controller only paces the sender: BBR, the default on some hosts,
 * measures a ~2 us minimum RTT there, keeps a few segments in flight and
 * makes a rank that sends 1 MiB at once wait on every ACK (streaks of
 * 400 us calls against 120; docs/wire-protocol.md "Connections"). Reno is
 * allowed to every process. Set once the peer is known (the handshake
 * names it); it paces this side's sends only, so both ends set it. A
 * refusal costs speed, never correctness: counted for the report. */
static void cc_apply(coh_net *n, int fd, int peer)
{
    int local = !n->g->peers || !n->g->peers[peer].other_machine;
    if (n->cc_mode == TCP_CC_NAMED || (n->cc_mode == TCP_CC_AUTO && local))
        if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, n->cc, (socklen_t)strlen(n->cc)) < 0)
            n->cc_fail++;
}

void coh_net_cc_info(const coh_net *n, char *out, size_t len)
{
    char name[4][TCP_CC_NAME];
    int count[4] = {0}, kinds = 0;
    for (int i = 0; i < n->size; i++) {
        char got[TCP_CC_NAME] = "";
        socklen_t l = sizeof got - 1;
        if (i == n->rank || n->c[i].fd < 0 ||
            getsockopt(n->c[i].fd, IPPROTO_TCP, TCP_CONGESTION, got, &l) < 0)
            continue;
        got[COH_MIN((size_t)l, sizeof got - 1)] = 0;
        int k = 0;
        while (k < kinds && strcmp(name[k], got))
            k++;
        if (k == kinds && kinds < 4)
            memcpy(name[kinds++], got, sizeof got);
        if (k < kinds)
            count[k]++;
    }
    size_t o = (size_t)snprintf(out, len, "congestion control");
    for (int k = 0; k < kinds && o < len; k++)
        o += (size_t)snprintf(out + o, len - o, "%s %s on %d", k ? "," : "",
                              name[k], count[k]);
    if (o < len)
        snprintf(out + o, len - o, "%s (%s; the system's %s)%s",
                 kinds ? "" : " -", n->cc_mode == TCP_CC_AUTO     ? "auto: reno on this machine"
                                    : n->cc_mode == TCP_CC_SYSTEM ? "COHORT_TCP_CONGESTION=system"
                                                                  : "COHORT_TCP_CONGESTION",
                 n->cc_system[0] ? n->cc_system : "unknown",
                 n->cc_fail ? "; refused on some connections" : "");
}

/* ---- listen ---- */

/* Tunables, read once per net; a malformed value is an error naming the
 * variable, never silently the default. */
static cohort_status read_env(coh_net *n)
{
    long v = 1l << 30;
    if (coh_env_int("COHORT_MAX_UNEXPECTED", &v) < 0 || v < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_MAX_UNEXPECTED=%s: expected a byte count >= 0",
                           coh_env_str("COHORT_MAX_UNEXPECTED"));
    n->stash_max = (size_t)v;
    v = TCP_SPIN_US_OVERSUB; /* until coh_net_connect applies the rule */
    n->spin_env = coh_env_str("COHORT_TCP_SPIN_US") != NULL;
    if (coh_env_int("COHORT_TCP_SPIN_US", &v) < 0 || v < 0 || v > 1000000)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TCP_SPIN_US=%s: expected microseconds in 0..1000000",
                           coh_env_str("COHORT_TCP_SPIN_US"));
    n->spin_ns = (uint64_t)v * 1000;
    v = 0;
    if (coh_env_int("COHORT_TCP_BUFSIZE", &v) < 0 || v < 0 || v > (1l << 30))
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TCP_BUFSIZE=%s: expected bytes in 0..1073741824 (0: autotune)",
                           coh_env_str("COHORT_TCP_BUFSIZE"));
    n->bufsize = (int)v;
    v = TCP_TX_SLICE_DEFAULT;
    if (coh_env_int("COHORT_TCP_SEND_SLICE", &v) < 0 || v < 0 || v > (1l << 30))
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TCP_SEND_SLICE=%s: expected bytes in 0..1073741824 (0: no "
                           "limit)",
                           coh_env_str("COHORT_TCP_SEND_SLICE"));
    n->tx_slice = (size_t)v;
    v = TCP_DUPLEX_SLICE_DEFAULT;
    if (coh_env_int("COHORT_TCP_DUPLEX_SLICE", &v) < 0 || v < 0 || v > (1l << 30))
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TCP_DUPLEX_SLICE=%s: expected bytes in 0..1073741824 (0: "
                           "off)",
                           coh_env_str("COHORT_TCP_DUPLEX_SLICE"));
    n->duplex_slice = (size_t)v;
    const char *cc = coh_env_str("COHORT_TCP_CONGESTION");
    n->cc_mode = !cc || !*cc || !strcmp(cc, "auto") ? TCP_CC_AUTO
                 : !strcmp(cc, "system")             ? TCP_CC_SYSTEM
                                                     : TCP_CC_NAMED;
    if (n->cc_mode == TCP_CC_NAMED) {
        size_t l = strlen(cc);
        int ok = l < sizeof n->cc;
        for (size_t i = 0; ok && i < l; i++)
            ok = (cc[i] >= 'a' && cc[i] <= 'z') || (cc[i] >= '0' && cc[i] <= '9') || cc[i] == '_';
        if (!ok)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "COHORT_TCP_CONGESTION=%s: expected auto, system or the name of a "
                               "TCP congestion control algorithm (reno, cubic, bbr, ...)",
                               cc);
        memcpy(n->cc, cc, l + 1);
    }
    else
        snprintf(n->cc, sizeof n->cc, "%s", TCP_CC_LOCAL);
    return COHORT_OK;
}

/* The system's algorithm, then a named one proven on the listener, so that
 * a name the kernel does not have, or does not allow this process, is an
 * error at start naming the variable, not a silent default later. */
static cohort_status cc_setup(coh_net *n)
{
    socklen_t l = sizeof n->cc_system - 1;
    if (getsockopt(n->lfd, IPPROTO_TCP, TCP_CONGESTION, n->cc_system, &l) < 0)
        n->cc_system[0] = 0;
    else
        n->cc_system[COH_MIN((size_t)l, sizeof n->cc_system - 1)] = 0;
    if (n->cc_mode != TCP_CC_NAMED ||
        setsockopt(n->lfd, IPPROTO_TCP, TCP_CONGESTION, n->cc, (socklen_t)strlen(n->cc)) == 0)
        return COHORT_OK;
    int e = errno;
    char list[200] = "?";
    FILE *f = fopen(e == EPERM ? "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
                               : "/proc/sys/net/ipv4/tcp_available_congestion_control",
                    "re");
    if (f && fgets(list, sizeof list, f))
        list[strcspn(list, "\n")] = 0;
    if (f)
        fclose(f);
    if (e == EPERM)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TCP_CONGESTION=%s: not allowed to this process (allowed: %s; "
                           "root widens /proc/sys/net/ipv4/tcp_allowed_congestion_control)",
                           n->cc, list);
    if (e == ENOENT)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TCP_CONGESTION=%s: no such congestion control in this kernel "
                           "(available: %s)",
                           n->cc, list);
    return coh_err_sys(NULL, COHORT_ERR_INVALID, "setsockopt TCP_CONGESTION", e,
                       "COHORT_TCP_CONGESTION=%s", n->cc);
}

cohort_status coh_net_listen(cohort_group *g, coh_net **out, char *addr, size_t addrlen)
{
    *out = NULL;
    if (!g || g->size < 1 || g->rank < 0 || g->rank >= g->size || !addr || addrlen < 8)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "coh_net_listen: bad group or buffer");
    if (sodium_init() < 0)
        return coh_err_set(NULL, COHORT_ERR_SYSTEM, "coh_net_listen: sodium_init failed");
    coh_net *n = coh_calloc(1, sizeof *n);
    if (!n)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "coh_net_listen: out of memory");
    n->g = g;
    n->rank = g->rank;
    n->size = g->size;
    n->lfd = n->efd = -1;
    n->rbuf_size = 32 * 1024;
    n->hs_cap = TCP_HS_MAX_IN + g->size;
    n->pfd_cap = 2 + g->size + n->hs_cap;
    cohort_status st = read_env(n);
    if (st != COHORT_OK) {
        coh_free(n);
        return st;
    }
    n->hs_timeout_ms = g->timeout_ms > 0 && g->timeout_ms < HS_DEFAULT_TIMEOUT_MS
                           ? g->timeout_ms
                           : HS_DEFAULT_TIMEOUT_MS;
    n->c = coh_calloc((size_t)g->size, sizeof *n->c);
    n->hs = coh_calloc((size_t)n->hs_cap, sizeof *n->hs);
    n->pfd = coh_calloc((size_t)n->pfd_cap, sizeof *n->pfd);
    n->pmap = coh_calloc((size_t)n->pfd_cap, sizeof *n->pmap);
    n->scratch = coh_calloc((size_t)g->size, sizeof *n->scratch);
    n->dpeers = coh_calloc((size_t)g->size, sizeof *n->dpeers);
    if (!n->c || !n->hs || !n->pfd || !n->pmap || !n->scratch || !n->dpeers) {
        coh_free(n->c); /* no mutex initialised yet: free by hand */
        coh_free(n->hs);
        coh_free(n->pfd);
        coh_free(n->pmap);
        coh_free(n->scratch);
        coh_free(n->dpeers);
        coh_free(n);
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "coh_net_listen: out of memory");
    }
    for (int i = 0; i < g->size; i++) {
        n->c[i].fd = -1;
        n->c[i].peer = i;
        pthread_mutex_init(&n->c[i].wmu, NULL);
    }
    coh_hs_key(n->key, g->token);
    memset(&n->me, 0, sizeof n->me);
    snprintf(n->me.job, sizeof n->me.job, "%s", g->job_id);
    n->me.gen = g->generation;
    n->me.group = g->id;
    n->me.rank = g->rank;
    n->me.size = g->size;

    n->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (n->efd < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "eventfd", errno, "tcp listen");
        goto fail;
    }
    struct sockaddr_storage bss, pss;
    socklen_t bl = 0;
    st = pick_addrs(n, &bss, &bl, &pss);
    if (st != COHORT_OK)
        goto fail;
    n->lfd = socket(bss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (n->lfd < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "socket", errno, "tcp listen");
        goto fail;
    }
    st = cc_setup(n);
    if (st != COHORT_OK)
        goto fail;
    /* Accepted sockets inherit the buffer sizes; they must be set before
     * listen() so the window scale is negotiated for them. */
    if (n->bufsize > 0) {
        (void)setsockopt(n->lfd, SOL_SOCKET, SO_SNDBUF, &n->bufsize, sizeof n->bufsize);
        (void)setsockopt(n->lfd, SOL_SOCKET, SO_RCVBUF, &n->bufsize, sizeof n->bufsize);
    }
    set_port(&bss, 0);
    char where[80];
    fmt_sa((struct sockaddr *)&bss, where, sizeof where);
    if (bind(n->lfd, (struct sockaddr *)&bss, bl) < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "bind", errno, "tcp listen on %s", where);
        goto fail;
    }
    if (listen(n->lfd, SOMAXCONN) < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "listen", errno, "tcp listen on %s", where);
        goto fail;
    }
    struct sockaddr_storage got;
    socklen_t gl = sizeof got;
    if (getsockname(n->lfd, (struct sockaddr *)&got, &gl) < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "getsockname", errno, "tcp listen");
        goto fail;
    }
    int port = got.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&got)->sin6_port)
                                         : ntohs(((struct sockaddr_in *)&got)->sin_port);
    set_port(&pss, port);
    fmt_sa((struct sockaddr *)&pss, n->addr, sizeof n->addr);
    if (strlen(n->addr) + 1 > addrlen) {
        st = coh_err_set(NULL, COHORT_ERR_INVALID, "tcp listen: address buffer too small");
        goto fail;
    }
    memcpy(addr, n->addr, strlen(n->addr) + 1);
    coh_debug("tcp: rank %d listening on %s (bound %s)", g->rank, n->addr, where);
    *out = n;
    coh_transport_attach(g, &coh_tcp_transport, n);
    return COHORT_OK;
fail:
    coh_net_destroy(n);
    return st;
}

/* ---- handshakes ---- */

/* hs[] is preallocated (TCP_HS_MAX_IN incoming + one per higher rank):
 * no allocation on behalf of unauthenticated clients. */
static tcp_hs *hs_new(coh_net *n)
{
    if (n->nhs >= n->hs_cap)
        return NULL;
    tcp_hs *h = &n->hs[n->nhs++];
    memset(h, 0, sizeof *h);
    h->fd = -1;
    h->peer = -1;
    return h;
}

static void hs_close(tcp_hs *h)
{
    if (h->fd >= 0)
        close(h->fd);
    h->fd = -1;
    h->state = 0; /* removed at the next compaction */
}

static int n_incoming(const coh_net *n)
{
    int k = 0;
    for (int i = 0; i < n->nhs; i++)
        if (!n->hs[i].outgoing && n->hs[i].state)
            k++;
    return k;
}

static void hs_send_refusal(tcp_hs *h, int code, const char *detail);
static void hs_compact(coh_net *n);

/* Refuses an incoming connection: one log line (rate-limited: a flood of
 * strays writes a few lines and then counts), a best-effort REFUSE frame
 * (the client may be a misconfigured rank that deserves to know why), close. */
static void hs_refuse(coh_net *n, tcp_hs *h, int code, const char *detail)
{
    if (h->peer >= 0)
        coh_warn_rl("tcp: group %u rank %d refused a connection from %s claiming rank %d: %s%s%s",
                 n->me.group, n->rank, h->from, h->peer, coh_hs_refuse_text(code),
                 detail ? ": " : "", detail ? detail : "");
    else
        coh_warn_rl("tcp: group %u rank %d refused a connection from %s: %s%s%s", n->me.group,
                 n->rank, h->from, coh_hs_refuse_text(code), detail ? ": " : "",
                 detail ? detail : "");
    hs_send_refusal(h, code, detail);
}

/* Sends the refusal frame (best effort) and closes: hs_refuse without the
 * log line, for causes that are counted instead (floods). */
static void hs_refuse_quiet(coh_net *n, tcp_hs *h, int code)
{
    (void)n;
    hs_send_refusal(h, code, NULL);
}

static void hs_send_refusal(tcp_hs *h, int code, const char *detail)
{
    /* Generation and group numbers help a misconfigured rank; job names
     * and the token's fate are not told to unauthenticated peers. */
    char text[96];
    if (detail && (code == COH_HS_OLD_GEN || code == COH_HS_NEW_GEN || code == COH_HS_WRONG_GROUP))
        snprintf(text, sizeof text, "%s: %s", coh_hs_refuse_text(code), detail);
    else
        snprintf(text, sizeof text, "%s", coh_hs_refuse_text(code));
    uint8_t f[COH_HS_PREFIX + COH_HS_REFUSE_LEN];
    size_t l = coh_hs_refuse_put(f, code, text);
    ssize_t w = send(h->fd, f, l, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    hs_close(h);
}

/* An outgoing handshake failed in a way that may heal (peer not listening
 * yet, reset, busy): retry with backoff until the connect deadline. */
static void hs_retry(tcp_hs *h, const char *fmt, int err)
{
    if (err)
        snprintf(h->why, sizeof h->why, "%s: %s", fmt, strerror(err));
    else
        snprintf(h->why, sizeof h->why, "%s", fmt);
    if (h->fd >= 0)
        close(h->fd);
    h->fd = -1;
    h->state = HS_RETRY;
    int ms = HS_RETRY_MIN_MS << (h->attempts < 7 ? h->attempts : 7);
    h->retry_ns = coh_now_ns() + (uint64_t)COH_MIN(ms, HS_RETRY_MAX_MS) * 1000000ull;
}

static void hs_start_recv(tcp_hs *h)
{
    h->state = HS_RECV;
    h->ioff = 0;
    h->iwant = COH_HS_PREFIX;
    h->in_type = 0;
}

static void hs_start_send(tcp_hs *h, size_t len)
{
    h->state = HS_SEND;
    h->olen = len;
    h->ooff = 0;
}

/* The socket becomes the pair's data connection. fd/open are published
 * under wmu because coh_net_send_abort may run on another thread. */
static cohort_status establish(coh_net *n, tcp_hs *h)
{
    tcp_conn *c = &n->c[h->peer];
    if (!c->rbuf) {
        c->rbuf = coh_malloc(n->rbuf_size);
        if (!c->rbuf)
            return coh_tp_fail_set(n->g, COHORT_ERR_NOMEM,
                                   "tcp: out of memory for the connection to rank %d", h->peer);
    }
    cc_apply(n, h->fd, h->peer);
    pthread_mutex_lock(&c->wmu);
    c->fd = h->fd;
    c->open = 1;
    pthread_mutex_unlock(&c->wmu);
    coh_debug("tcp: rank %d connected to rank %d (%s, %s)", n->rank, h->peer, h->from,
              h->outgoing ? "outgoing" : "incoming");
    h->fd = -1;
    h->state = 0;
    return COHORT_OK;
}

/* Resolved again on every attempt: cheap next to a TCP connect, and the
 * entry stays a plain struct (no saved sockaddr per retry). */
static void hs_start_connect(coh_net *n, tcp_hs *h)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    char host[128], port[16];
    /* The address was validated when the handshake was created. */
    if (split_hostport(n->g->peers[h->peer].addr, host, sizeof host, port, sizeof port) != 0 ||
        resolve(host, port, 0, &ss, &sl) != 0) {
        hs_retry(h, "cannot resolve its address", 0);
        return;
    }
    h->attempts++;
    h->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (h->fd < 0) {
        hs_retry(h, "socket", errno);
        return;
    }
    tcp_sockopts(n, h->fd);
    if (connect(h->fd, (struct sockaddr *)&ss, sl) == 0 || errno == EINPROGRESS) {
        h->state = HS_CONNECTING;
        return;
    }
    hs_retry(h, "connect", errno);
}

/* A complete frame arrived on an outgoing handshake. Failures here fail the
 * group: a refusal with credentials, a peer that cannot prove the token or
 * a non-cohort listener do not heal by retrying. */
static cohort_status hs_out_frame(coh_net *n, tcp_hs *h)
{
    const uint8_t *body = h->in + COH_HS_PREFIX;
    size_t bl = h->iwant - COH_HS_PREFIX;
    cohort_group *g = n->g;
    if (h->in_type == COH_HS_CHALLENGE) {
        int32_t who;
        if (h->ooff != 0 || coh_hs_challenge_get(body, bl, h->na, &who) != COH_HS_OK)
            return coh_tp_fail_set(g, COHORT_ERR_PROTOCOL,
                                   "tcp connect to rank %d at %s: malformed challenge", h->peer,
                                   h->from);
        if (who != h->peer)
            return coh_tp_fail_set(g, COHORT_ERR_AUTH,
                                   "tcp connect to rank %d at %s: the process there is rank %d "
                                   "(stale or wrong address)",
                                   h->peer, h->from, (int)who);
        coh_hs_hello hello;
        memset(&hello, 0, sizeof hello);
        hello.id = n->me;
        hello.dst = h->peer;
        if (coh_auth_nonce(h->nc) != COHORT_OK)
            return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "tcp connect to rank %d at %s: %s",
                                   h->peer, h->from, coh_tls_err()->msg);
        memcpy(hello.nonce, h->nc, sizeof h->nc);
        coh_hs_hello_mac(hello.mac, n->key, h->na, &hello);
        hs_start_send(h, coh_hs_hello_put(h->out, &hello));
        return COHORT_OK;
    }
    if (h->in_type == COH_HS_WELCOME && h->ooff == h->olen && h->olen) {
        uint8_t mac[COH_HS_MAC], want[COH_HS_MAC];
        coh_hs_welcome_get(body, bl, mac);
        coh_hs_ident acc = n->me;
        acc.rank = h->peer;
        coh_hs_welcome_mac(want, n->key, h->nc, h->na, &acc, n->rank);
        if (!coh_auth_equal(mac, want))
            return coh_tp_fail_set(g, COHORT_ERR_AUTH,
                                   "tcp connect to rank %d at %s: the peer failed to prove the job "
                                   "token (welcome MAC mismatch: another job or token?)",
                                   h->peer, h->from);
        return establish(n, h);
    }
    if (h->in_type == COH_HS_REFUSE) {
        int code;
        char text[64];
        coh_hs_refuse_get(body, bl, &code, text, sizeof text);
        if (code == COH_HS_BUSY || code == COH_HS_TIMEOUT) {
            hs_retry(h, "refused as busy", 0);
            return COHORT_OK;
        }
        return coh_tp_fail_set(g, COHORT_ERR_AUTH,
                               "tcp connect to rank %d at %s: rank %d refused this rank: %s (this "
                               "rank: job %s, generation %u, group %u, rank %d of %d)",
                               h->peer, h->from, h->peer, text, n->me.job, n->me.gen, n->me.group,
                               n->rank, n->size);
    }
    return coh_tp_fail_set(g, COHORT_ERR_PROTOCOL,
                           "tcp connect to rank %d at %s: unexpected handshake frame type %d",
                           h->peer, h->from, h->in_type);
}

/* A complete frame arrived on an incoming handshake: it must be a HELLO. */
static cohort_status hs_in_frame(coh_net *n, tcp_hs *h)
{
    const uint8_t *body = h->in + COH_HS_PREFIX;
    coh_hs_hello hello;
    if (h->in_type != COH_HS_HELLO ||
        coh_hs_hello_get(body, h->iwant - COH_HS_PREFIX, &hello) != COH_HS_OK) {
        hs_refuse(n, h, COH_HS_BAD_FRAME, "expected a hello");
        return COHORT_OK;
    }
    if (hello.id.rank >= 0 && hello.id.rank < n->size)
        h->peer = hello.id.rank;
    int code = coh_hs_hello_check(&hello, &n->me, n->key, h->na);
    char detail[128] = "";
    if (code == COH_HS_OK) {
        int dup = n->c[hello.id.rank].fd >= 0;
        for (int i = 0; i < n->nhs && !dup; i++)
            if (&n->hs[i] != h && !n->hs[i].outgoing && n->hs[i].state == HS_SEND &&
                n->hs[i].peer == hello.id.rank && n->hs[i].in_type == COH_HS_HELLO)
                dup = 1;
        if (dup)
            code = COH_HS_DUPLICATE;
    }
    if (code != COH_HS_OK) {
        if (code == COH_HS_WRONG_JOB) {
            char job[COH_HS_JOB + 1];
            size_t i = 0;
            for (; i < COH_HS_JOB && hello.id.job[i]; i++)
                job[i] = (hello.id.job[i] >= 0x20 && hello.id.job[i] < 0x7f) ? hello.id.job[i]
                                                                             : '?';
            job[i] = 0;
            snprintf(detail, sizeof detail, "job \"%s\", ours \"%s\"", job, n->me.job);
        } else if (code == COH_HS_OLD_GEN || code == COH_HS_NEW_GEN) {
            snprintf(detail, sizeof detail, "gen %u, ours %u", hello.id.gen, n->me.gen);
        } else if (code == COH_HS_WRONG_GROUP) {
            snprintf(detail, sizeof detail, "group %u, ours %u", hello.id.group, n->me.group);
        }
        hs_refuse(n, h, code, detail[0] ? detail : NULL);
        return COHORT_OK;
    }
    uint8_t mac[COH_HS_MAC];
    coh_hs_welcome_mac(mac, n->key, hello.nonce, h->na, &n->me, hello.id.rank);
    hs_start_send(h, coh_hs_welcome_put(h->out, mac));
    return COHORT_OK;
}

/* Moves one handshake as far as it goes without blocking. */
static cohort_status hs_step(coh_net *n, tcp_hs *h)
{
    for (;;) {
        if (h->state == HS_CONNECTING) {
            int err = 0;
            socklen_t el = sizeof err;
            if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
                err = errno;
            if (err == EINPROGRESS || err == EALREADY)
                return COHORT_OK;
            if (err) {
                hs_retry(h, "connect", err);
                return COHORT_OK;
            }
            hs_start_recv(h);
            h->olen = h->ooff = 0;
            snprintf(h->why, sizeof h->why, "TCP connected but no handshake answer");
            continue;
        }
        if (h->state == HS_SEND) {
            ssize_t w = send(h->fd, h->out + h->ooff, h->olen - h->ooff,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                if (errno == EAGAIN || errno == EWOULDBLOCK)
                    return COHORT_OK;
                if (h->outgoing) {
                    hs_retry(h, "send", errno);
                } else {
                    coh_warn_rl("tcp: rank %d: handshake with %s failed: send: %s", n->rank, h->from,
                             strerror(errno));
                    hs_close(h);
                }
                return COHORT_OK;
            }
            h->ooff += (size_t)w;
            if (h->ooff < h->olen)
                continue;
            /* Frame sent: an incoming welcome completes the connection;
             * challenge and hello are followed by reading the answer. */
            if (!h->outgoing && h->in_type == COH_HS_HELLO)
                return establish(n, h);
            hs_start_recv(h);
            continue;
        }
        if (h->state == HS_RECV) {
            /* Exact reads: bytes after the handshake belong to the data stream. */
            ssize_t r = recv(h->fd, h->in + h->ioff, h->iwant - h->ioff, MSG_DONTWAIT);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                return COHORT_OK;
            if (r <= 0) {
                int e = r < 0 ? errno : 0;
                if (h->outgoing) {
                    hs_retry(h, e ? "handshake recv" : "peer closed during the handshake", e);
                } else {
                    coh_warn_rl("tcp: group %u rank %d dropped a connection from %s: %s after %zu "
                             "handshake bytes",
                             n->me.group, n->rank, h->from,
                             e ? strerror(e) : "closed (truncated handshake)", h->ioff);
                    hs_close(h);
                }
                return COHORT_OK;
            }
            h->ioff += (size_t)r;
            if (h->ioff < h->iwant)
                continue;
            if (!h->in_type) {
                int type;
                uint32_t bl;
                int code = coh_hs_prefix_parse(h->in, h->ioff, &type, &bl);
                if (code != COH_HS_OK) {
                    if (!h->outgoing) {
                        hs_refuse(n, h, code, NULL);
                        return COHORT_OK;
                    }
                    return coh_tp_fail_set(n->g, COHORT_ERR_PROTOCOL,
                                           "tcp connect to rank %d at %s: not a cohort peer: %s",
                                           h->peer, h->from, coh_hs_refuse_text(code));
                }
                h->in_type = type;
                h->iwant += bl;
                continue;
            }
            cohort_status st = h->outgoing ? hs_out_frame(n, h) : hs_in_frame(n, h);
            if (st != COHORT_OK || h->state == 0 || h->state == HS_RETRY)
                return st;
            continue;
        }
        return COHORT_OK;
    }
}

/* Length of the host part of "ip:port" / "[v6]:port". */
static size_t host_len(const char *from)
{
    const char *c = strrchr(from, ':');
    return c ? (size_t)(c - from) : strlen(from);
}

/* An incoming handshake that has not yet proved the token: a WELCOME being
 * sent means it has (hs_in_frame checked its HELLO). */
static int hs_unauth(const tcp_hs *h)
{
    return !h->outgoing && h->state && !(h->state == HS_SEND && h->in_type == COH_HS_HELLO);
}

/* Closes the oldest unauthenticated incoming handshake of the source host
 * with the most of them (ties: the newcomer's host last). Returns 1 if one
 * was closed. O(TCP_HS_MAX_IN^2) only while the table is full. */
static int hs_evict(coh_net *n, const char *newcomer)
{
    int best = -1, best_cnt = 0;
    for (int i = 0; i < n->nhs; i++) {
        tcp_hs *h = &n->hs[i];
        if (!hs_unauth(h))
            continue;
        size_t hl = host_len(h->from);
        int cnt = 0;
        for (int j = 0; j < n->nhs; j++)
            if (hs_unauth(&n->hs[j]) && host_len(n->hs[j].from) == hl &&
                !memcmp(n->hs[j].from, h->from, hl))
                cnt++;
        if (cnt > best_cnt || (cnt == best_cnt && best >= 0 &&
                               h->deadline_ns < n->hs[best].deadline_ns)) {
            best = i;
            best_cnt = cnt;
        }
    }
    (void)newcomer;
    if (best < 0)
        return 0;
    tcp_hs *v = &n->hs[best];
    if (!n->n_evicted++)
        coh_warn("tcp: group %u rank %d: %d unauthenticated connections pending; evicted the "
                 "oldest (from %s) for a new one from %s; further evictions are counted",
                 n->me.group, n->rank, TCP_HS_MAX_IN, v->from, newcomer);
    snprintf(n->last_evicted, sizeof n->last_evicted, "%.*s", (int)host_len(v->from), v->from);
    hs_refuse_quiet(n, v, COH_HS_BUSY);
    return 1;
}

/* Accepts what the backlog holds (bounded per call so a connection flood
 * cannot starve the data path) and sends each one its challenge at once. */
static void hs_accept(coh_net *n)
{
    for (int k = 0; k < 16; k++) {
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        int fd = accept4(n->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                coh_warn_rl("tcp: rank %d: accept: %s", n->rank, strerror(errno));
            return;
        }
        char from[64];
        fmt_sa((struct sockaddr *)&ss, from, sizeof from);
        uint8_t na[COH_HS_NONCE];
        if (coh_auth_nonce(na) != COHORT_OK) {
            coh_warn_rl("tcp: rank %d: no challenge for a connection from %s: %s; closed",
                        n->rank, from, coh_tls_err()->msg);
            close(fd);
            continue;
        }
        /* Full: the oldest unauthenticated connection from the busiest
         * source address makes room, so a flood evicts itself first and
         * never locks out a real peer (which answers within one round
         * trip, so it is never the oldest for long). */
        if (n_incoming(n) >= TCP_HS_MAX_IN && hs_evict(n, from))
            hs_compact(n);
        tcp_hs *h = n_incoming(n) < TCP_HS_MAX_IN ? hs_new(n) : NULL;
        if (!h) {
            /* Bounded state for unauthenticated clients: turn extras away. */
            coh_warn_rl("tcp: rank %d refused a connection from %s: %s", n->rank, from,
                     coh_hs_refuse_text(COH_HS_BUSY));
            uint8_t f[COH_HS_PREFIX + COH_HS_REFUSE_LEN];
            size_t l = coh_hs_refuse_put(f, COH_HS_BUSY, coh_hs_refuse_text(COH_HS_BUSY));
            ssize_t w = send(fd, f, l, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)w;
            close(fd);
            continue;
        }
        tcp_sockopts(n, fd);
        h->fd = fd;
        snprintf(h->from, sizeof h->from, "%s", from);
        /* The whole handshake's budget, fixed now: bytes cannot extend it. */
        h->deadline_ns = coh_deadline_ns(COH_MIN(n->hs_timeout_ms, TCP_HS_AUTH_MS));
        memcpy(h->na, na, sizeof h->na);
        hs_start_send(h, coh_hs_challenge_put(h->out, h->na, n->rank));
        (void)hs_step(n, h); /* incoming steps never fail the group */
    }
}

static int hs_polled(const tcp_hs *h)
{
    return h->fd >= 0 &&
           (h->state == HS_CONNECTING || h->state == HS_SEND || h->state == HS_RECV);
}

/* Drops finished / closed entries. */
static void hs_compact(coh_net *n)
{
    int j = 0;
    for (int i = 0; i < n->nhs; i++)
        if (n->hs[i].state)
            n->hs[j++] = n->hs[i];
    n->nhs = j;
}

int tcp_hs_pollfds(coh_net *n, struct pollfd *p)
{
    int k = 0;
    if (n->lfd >= 0) {
        p[k].fd = n->lfd;
        p[k].events = POLLIN;
        p[k].revents = 0;
        k++;
    }
    for (int i = 0; i < n->nhs; i++) {
        tcp_hs *h = &n->hs[i];
        if (!hs_polled(h))
            continue;
        p[k].fd = h->fd;
        p[k].events = h->state == HS_RECV ? POLLIN : POLLOUT;
        p[k].revents = 0;
        k++;
    }
    return k;
}

/* Runs after poll() on the area tcp_hs_pollfds filled; also the periodic
 * timeout sweep when called with np == 0. */
cohort_status tcp_hs_service(coh_net *n, const struct pollfd *p, int np)
{
    cohort_status st = COHORT_OK;
    int k = 0, accept_ready = 0;
    if (n->lfd >= 0 && k < np) {
        accept_ready = p[k].revents != 0;
        k++;
    }
    /* Same iteration order and filter as tcp_hs_pollfds. */
    int nhs = n->nhs;
    for (int i = 0; i < nhs && k < np && st == COHORT_OK; i++) {
        tcp_hs *h = &n->hs[i];
        if (!hs_polled(h))
            continue;
        if (p[k].fd == h->fd && p[k].revents)
            st = hs_step(n, h);
        k++;
    }
    uint64_t now = coh_now_ns();
    for (int i = 0; i < n->nhs && st == COHORT_OK; i++) {
        tcp_hs *h = &n->hs[i];
        if (h->outgoing && h->state == HS_RETRY && h->retry_ns <= now) {
            hs_start_connect(n, h);
            if (h->state == HS_CONNECTING)
                st = hs_step(n, h);
        } else if (!h->outgoing && h->state && now >= h->deadline_ns) {
            /* counted, not logged one by one: a flood would fill the log */
            if (!n->n_auth_timeout++)
                coh_warn("tcp: group %u rank %d: a connection from %s did not authenticate "
                         "within %d ms; closed (further ones are counted)",
                         n->me.group, n->rank, h->from, COH_MIN(n->hs_timeout_ms, TCP_HS_AUTH_MS));
            snprintf(n->last_timeout, sizeof n->last_timeout, "%.*s", (int)host_len(h->from),
                     h->from);
            hs_refuse_quiet(n, h, COH_HS_TIMEOUT);
        }
    }
    hs_compact(n);
    if (accept_ready && st == COHORT_OK) {
        hs_accept(n);
        hs_compact(n);
    }
    return st;
}

/* ---- connect ---- */

static int missing_ranks(const coh_net *n, int *out)
{
    int k = 0;
    for (int j = 0; j < n->size; j++)
        if (j != n->rank && n->c[j].fd < 0)
            out[k++] = j;
    return k;
}

static cohort_status connect_run(coh_net *n);

/* "N unauthenticated connections evicted (last from H), M did not
 * authenticate within T ms (last from H)", or "" if none. */
static void hs_flood_fmt(const coh_net *n, char *out, size_t len)
{
    int w = 0;
    out[0] = 0;
    if (n->n_evicted)
        w = snprintf(out, len, "%ld unauthenticated connection%s evicted for newer ones (last "
                     "from %s)",
                     n->n_evicted, n->n_evicted > 1 ? "s" : "", n->last_evicted);
    if (n->n_auth_timeout && w >= 0 && (size_t)w < len)
        snprintf(out + w, len - (size_t)w, "%s%ld connection%s did not authenticate within %d ms "
                 "(last from %s)",
                 w ? ", " : "", n->n_auth_timeout, n->n_auth_timeout > 1 ? "s" : "",
                 COH_MIN(n->hs_timeout_ms, TCP_HS_AUTH_MS), n->last_timeout);
}

cohort_status coh_net_connect(coh_net *n)
{
    cohort_status st = connect_run(n);
    int p = st != COHORT_OK ? coh_group_poisoned(n->g) : 0;
    return p ? (cohort_status)p : st;
}

/* Outgoing entries are created up front for every higher rank; incoming
 * ones appear as the listener accepts. Done when every pair has its
 * connection, whichever side finished first. */
static cohort_status connect_run(coh_net *n)
{
    cohort_group *g = n->g;
    if (n->connected)
        return COHORT_OK;
    for (int j = n->rank + 1; j < n->size; j++) {
        char host[128], port[16];
        const char *a = g->peers ? g->peers[j].addr : "";
        if (split_hostport(a, host, sizeof host, port, sizeof port) != 0 || !port[0])
            return coh_tp_fail_set(g, COHORT_ERR_INVALID,
                                   "tcp connect: rank %d published an invalid address \"%s\"", j,
                                   a);
        tcp_hs *h = hs_new(n);
        if (!h)
            return coh_tp_fail_set(g, COHORT_ERR_INVALID, "tcp connect: called twice");
        h->outgoing = 1;
        h->peer = j;
        h->state = HS_RETRY;
        h->retry_ns = 0;
        snprintf(h->from, sizeof h->from, "%s", a);
        snprintf(h->why, sizeof h->why, "not attempted yet");
    }
    uint64_t start = coh_now_ns();
    uint64_t deadline = coh_deadline_ns(g->timeout_ms);
    for (;;) {
        int p = coh_group_poisoned(g);
        if (p)
            return (cohort_status)p;
        int nm = missing_ranks(n, n->scratch);
        if (nm == 0)
            break;
        uint64_t now = coh_now_ns();
        if (now >= deadline) {
            char ranks[256], why[COH_ERRLEN / 2] = "";
            coh_fmt_ranks(ranks, sizeof ranks, n->scratch, nm);
            size_t pos = 0;
            int lower = 0;
            for (int i = 0; i < nm; i++)
                lower += n->scratch[i] < n->rank;
            if (lower) {
                int w = snprintf(why, sizeof why, "; %d lower rank%s never connected to this rank",
                                 lower, lower > 1 ? "s" : "");
                pos = w > 0 ? (size_t)w : 0;
            }
            for (int i = 0; i < n->nhs && pos < sizeof why; i++) {
                tcp_hs *h = &n->hs[i];
                if (!h->outgoing || !h->state)
                    continue;
                int w = snprintf(why + pos, sizeof why - pos, "; rank %d at %s: %s%s", h->peer,
                                 h->from, h->state == HS_RETRY ? "" : "handshake unfinished, ",
                                 h->why);
                if (w < 0)
                    break;
                pos += (size_t)w;
            }
            char flood[192];
            hs_flood_fmt(n, flood, sizeof flood);
            return coh_tp_fail_set(g, COHORT_ERR_TIMEOUT,
                                   "tcp connect: timed out after %d ms: rank %d has no connection "
                                   "to rank%s %s%s%s%s",
                                   (int)((now - start) / 1000000), n->rank, nm > 1 ? "s" : "",
                                   ranks, why, flood[0] ? "; meanwhile " : "", flood);
        }
        /* Wait for socket events, the wake-up fd, the next retry or the deadline. */
        uint64_t wake = deadline;
        for (int i = 0; i < n->nhs; i++)
            if (n->hs[i].outgoing && n->hs[i].state == HS_RETRY && n->hs[i].retry_ns < wake)
                wake = n->hs[i].retry_ns;
        int ms = wake <= now ? 0 : (int)COH_MIN((wake - now + 999999) / 1000000, COH_WAIT_SLICE_MS);
        n->pfd[0].fd = n->efd;
        n->pfd[0].events = POLLIN;
        n->pfd[0].revents = 0;
        int np = tcp_hs_pollfds(n, n->pfd + 1);
        int r = poll(n->pfd, (nfds_t)(np + 1), ms);
        if (r < 0 && errno != EINTR)
            return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "tcp connect: poll: %s", strerror(errno));
        if (r > 0 && n->pfd[0].revents) {
            uint64_t v;
            ssize_t rr = read(n->efd, &v, sizeof v);
            (void)rr;
        }
        cohort_status st = tcp_hs_service(n, n->pfd + 1, r > 0 ? np : 0);
        if (st != COHORT_OK)
            return st;
    }
    /* Outgoing entries are all established; incoming ones left are strays. */
    n->connected = 1;
    if (!n->spin_env)
        n->spin_ns = (uint64_t)coh_tcp_spin_default_us(g->machine_size, coh_group_cpus(g)) * 1000;
    if (n->n_evicted || n->n_auth_timeout) {
        char flood[192];
        hs_flood_fmt(n, flood, sizeof flood);
        coh_warn("tcp: group %u rank %d connected to every rank; meanwhile %s", n->me.group,
                 n->rank, flood);
    }
    return COHORT_OK;
}
