/*
 * server.c - the store server: one thread, epoll, non-blocking sockets.
 *
 * Each loop iteration: epoll_wait (timeout = the nearest stall deadline of a
 * connection that is unauthenticated or holds half a frame, else none),
 * accept / read / write the ready sockets, then flush every connection that
 * got replies (waiters completed by one client's SET reply to others), then
 * free the connections closed during the iteration.
 *
 * Reading never blocks and never buffers more than one frame per
 * connection: bytes are read into one shared scratch buffer and frames are
 * handled in place; only the tail of a frame that is still arriving is
 * copied to the connection (a header into 12 inline bytes, a body into a
 * buffer sized by the validated header). A header whose length is over the
 * limit is answered at once (COHORT_ERR_TOO_LARGE) and its body skipped as
 * it arrives, so nothing is allocated for it and the connection stays
 * usable. Before authentication only tiny frames are accepted.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "store/server_int.h"
#include "store/torch.h"
#include "util/auth.h"
#include "util/ratelimit.h"

#define SCRATCH_SIZE (256 * 1024)
#define READS_PER_EVENT 4            /* fairness: then let other sockets run */
#define OUT_HIGH (8u * 1024 * 1024)  /* stop reading a client this far behind */
#define MAX_EVENTS 256

static void conn_close(conn *c);
static void pend_update(conn *c);
static void ready_mark(conn *c);
static void body_release(conn *c);
static void ibuf_free(conn *c);
static void unauth_drop(conn *c);
static void accept_fd_freed(struct cohort_store_server *s);
static void conn_fail(conn *c, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- epoll registration ---- */

/* Backpressure: a client this far behind on reading its replies (bytes
 * queued, or copied reply bytes near its memory budget) is not read from
 * until it catches up, so requests cannot pile up replies in the server. */
static int conn_backlogged(const conn *c)
{
    return c->out_bytes >= OUT_HIGH || c->out_owned >= c->mem.limit / 2;
}

int coh_srv_backlogged(conn *c) { return conn_backlogged(c); }

/* Level-triggered epoll: a connection is registered for what it needs now.
 * The cached mask (c->ev) avoids an epoll_ctl when nothing changes, which is
 * the common case for a request/reply client. */
static void conn_set_events(conn *c, uint32_t ev)
{
    if (c->closed || c->ev == ev)
        return;
    struct epoll_event e = {.events = ev, .data.ptr = c};
    if (epoll_ctl(c->srv->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0)
        c->ev = ev;
}

/* Reading is paused while a client is far behind on its replies, and
 * stopped once an ERROR is queued. EPOLLOUT is wanted only when a flush
 * left bytes behind; replies queued in this iteration are written by
 * flush_all first, so the common request/reply costs no epoll_ctl. */
static void conn_update_events(conn *c)
{
    uint32_t ev = 0;
    if (!c->closing && !conn_backlogged(c) && c->ibuf_len == 0)
        ev |= EPOLLIN;
    if (c->oq_head && !c->in_flush)
        ev |= EPOLLOUT;
    else if (c->in_flush)
        ev |= c->ev & EPOLLOUT;
    conn_set_events(c, ev);
}

/* ---- output ---- */

/* Replies are not written where they are produced: a SET may complete a
 * hundred waiters on other connections, and each of those connections is
 * written once, at the end of the loop iteration (flush_all), with every
 * reply it got in one sendmsg. */
static void flush_mark(conn *c)
{
    if (!c->in_flush && !c->closed) {
        c->in_flush = 1;
        c->flush_next = c->srv->flush_head;
        c->srv->flush_head = c;
    }
}

#define OSEG_SMALL 4096u
#define SPARE_MAX 256 /* 1 MiB of spare segments at most */

static oseg *oseg_new(struct cohort_store_server *srv, size_t n)
{
    oseg *s;
    if (n <= OSEG_SMALL && srv->spare) {
        s = srv->spare;
        srv->spare = s->next;
        srv->nspare--;
    } else {
        size_t cap = n < OSEG_SMALL ? OSEG_SMALL : n;
        s = coh_malloc(sizeof *s + cap);
        if (!s)
            return NULL;
        s->cap = cap;
    }
    size_t cap = s->cap;
    memset(s, 0, sizeof *s);
    s->cap = cap;
    s->p = s->buf;
    return s;
}

static void oseg_free(struct cohort_store_server *srv, oseg *s)
{
    coh_blob_unref(s->ref);
    if (!s->ref && s->cap == OSEG_SMALL && srv->nspare < SPARE_MAX) {
        s->next = srv->spare;
        srv->spare = s;
        srv->nspare++;
        return;
    }
    coh_free(s);
}

/* Copied reply bytes are charged to the connection, its job and the
 * server while queued (the bytes, not the 4 KiB segment they are packed
 * into: a few error replies must not fill a small job's memory). A reply
 * that would not fit was refused by its builder (coh_srv_reply_room), so
 * a charge that fails here is only a small error reply, which is let
 * through (the overshoot is bounded: a backlogged connection is not read,
 * so it makes no more). */
static void out_charge(conn *c, size_t n)
{
    coh_acct a = coh_srv_acct_conn(c);
    coh_acct_force(&a, n);
    c->out_owned += n;
}

static void oseg_release(conn *c, oseg *s)
{
    if (s->ref)
        return;
    coh_acct a = coh_srv_acct_conn(c);
    coh_acct_release(&a, s->len);
    c->out_owned -= s->len;
}

/* Small replies are packed into the tail segment (one 4 KiB buffer holds
 * hundreds of them); a reply larger than that gets a segment of its own. */
int coh_srv_send_raw(conn *c, const void *p, size_t n)
{
    if (c->closed)
        return -1;
    if (!p) {
        /* Caller lost a half-built frame: the stream cannot continue. */
        conn_fail(c, COHORT_ERR_NOMEM, "out of memory in the store server while replying");
        return -1;
    }
    oseg *t = c->oq_tail;
    if (t && !t->ref && t->cap - t->len >= n) {
        memcpy(t->buf + t->len, p, n);
        t->len += n;
        out_charge(c, n);
    } else {
        oseg *s = oseg_new(c->srv, n);
        if (!s) {
            /* Drop the queue: a client missing replies would misread. */
            conn_close(c);
            coh_warn_rl("store: out of memory queueing a reply to %s: connection closed", c->peer);
            return -1;
        }
        out_charge(c, n);
        memcpy(s->buf, p, n);
        s->len = n;
        if (t)
            t->next = s;
        else
            c->oq_head = s;
        c->oq_tail = s;
    }
    c->out_bytes += n;
    flush_mark(c);
    return 0;
}

/* A torch connection's replies are rewritten in TCPStore's form first. */
int coh_srv_send(conn *c, const void *p, size_t n)
{
    if (c->closed)
        return -1;
    if (c->torch)
        return coh_torch_out(c, p, n);
    return coh_srv_send_raw(c, p, n);
}

/* Queues a stored value by reference: the output queue holds a reference,
 * so a SET or DELETE of the key meanwhile cannot free bytes still being
 * written, and a GET of 64 MiB costs no copy in the server. */
int coh_srv_send_blob(conn *c, blob *b)
{
    if (c->closed)
        return -1;
    if (c->torch)
        return coh_torch_out(c, b->data, b->len);
    oseg *s = coh_malloc(sizeof *s);
    if (!s) {
        conn_close(c);
        coh_warn_rl("store: out of memory queueing a reply to %s: connection closed", c->peer);
        return -1;
    }
    memset(s, 0, sizeof *s);
    b->refs++;
    s->ref = b;
    s->p = b->data;
    s->len = b->len;
    if (c->oq_tail)
        c->oq_tail->next = s;
    else
        c->oq_head = s;
    c->oq_tail = s;
    c->out_bytes += b->len;
    flush_mark(c);
    return 0;
}

static void oq_free(conn *c)
{
    for (oseg *s = c->oq_head, *nx; s; s = nx) {
        nx = s->next;
        oseg_release(c, s);
        oseg_free(c->srv, s);
    }
    c->oq_head = c->oq_tail = NULL;
    c->out_bytes = 0;
}

/* Writes as much as the socket takes, up to 64 segments per sendmsg. What
 * is left waits for EPOLLOUT; a connection marked closing is closed once
 * its last byte (the ERROR frame) is out. */
static void conn_flush(conn *c)
{
    while (c->oq_head && !c->closed) {
        struct iovec iov[64];
        int n = 0;
        for (oseg *s = c->oq_head; s && n < 64; s = s->next, n++) {
            iov[n].iov_base = (void *)(s->p + s->off);
            iov[n].iov_len = s->len - s->off;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            coh_info("store: write to %s failed: %s; closing", c->peer, strerror(errno));
            conn_close(c);
            return;
        }
        c->out_bytes -= (size_t)w;
        size_t left = (size_t)w;
        while (left && c->oq_head) {
            oseg *s = c->oq_head;
            size_t take = COH_MIN(left, s->len - s->off);
            s->off += take;
            left -= take;
            if (s->off == s->len) {
                c->oq_head = s->next;
                if (!c->oq_head)
                    c->oq_tail = NULL;
                oseg_release(c, s);
                oseg_free(c->srv, s);
            }
        }
    }
    if (c->closed)
        return;
    if (!c->oq_head && c->closing) {
        conn_close(c);
        return;
    }
    if (c->ibuf_len && !conn_backlogged(c))
        ready_mark(c); /* caught up: its buffered requests run next turn */
    conn_update_events(c);
}

coh_wr *coh_srv_reply_begin(conn *c, uint8_t op, uint32_t id)
{
    coh_wr *w = &c->srv->w;
    w->len = 0;
    w->oom = 0;
    coh_wr_begin_frame(w);
    coh_wr_u8(w, COHORT_OK);
    (void)op;
    (void)id;
    return w;
}

void coh_srv_reply_end(conn *c, uint8_t op, uint32_t id)
{
    coh_wr *w = &c->srv->w;
    if (w->oom) {
        coh_srv_reply_err(c, op, id, COHORT_ERR_NOMEM, "out of memory building the reply");
        return;
    }
    if (w->len - COH_PROTO_HDR > UINT32_MAX) {
        coh_srv_reply_err(c, op, id, COHORT_ERR_TOO_LARGE,
                          "reply of %zu bytes does not fit in one frame (4 GiB)", w->len);
        return;
    }
    if (!coh_srv_reply_room(c, op, id, w->len))
        return;
    coh_wr_end_frame(w, 0, op | COH_PROTO_REPLY, id);
    coh_srv_send(c, w->p, w->len);
    /* One huge LIST should not pin its buffer for the server's lifetime. */
    if (w->cap > (4u << 20))
        coh_wr_free(w);
}

void coh_srv_reply_ok(conn *c, uint8_t op, uint32_t id)
{
    uint8_t f[COH_PROTO_HDR + 1];
    coh_proto_put_hdr(f, op | COH_PROTO_REPLY, id, 1);
    f[COH_PROTO_HDR] = COHORT_OK;
    coh_srv_send(c, f, sizeof f);
}

void coh_srv_limit_hit(conn *c, const coh_budget *b, size_t want, const char *doing, char *msg,
                       size_t msglen)
{
    char d[256];
    coh_budget_describe(b, d, sizeof d);
    const char *jid = c->job ? c->job->id : "-";
    /* one rate-limited line per kind of limit */
    if (b == &c->mem)
        coh_warn_rl("store: %s (job '%s'): %s of %zu bytes refused: %s", c->peer, jid, doing,
                    want, d);
    else if (c->job && b == &c->job->mem)
        coh_warn_rl("store: %s (job '%s'): %s of %zu bytes refused: %s", c->peer, jid, doing,
                    want, d);
    else
        coh_warn_rl("store: %s (job '%s'): %s of %zu bytes refused: %s", c->peer, jid, doing,
                    want, d);
    if (c->job && b == &c->job->mem)
        snprintf(msg, msglen, "job '%s': %s", jid, d);
    else
        snprintf(msg, msglen, "%s", d);
}

/* Checks that n bytes of reply can be queued for c (copied bytes are
 * charged to the connection, its job and the server); if not, answers
 * (op, id) with COHORT_ERR_TOO_LARGE naming the limit and returns 0. */
int coh_srv_reply_room(conn *c, uint8_t op, uint32_t id, size_t n)
{
    coh_acct a = coh_srv_acct_conn(c);
    for (int i = 0; i < COH_ACCT_LEVELS; i++) {
        coh_budget *b = a.b[i];
        if (b && (n > b->limit || b->used > b->limit - n)) {
            char m[320];
            coh_srv_limit_hit(c, b, n, "reply", m, sizeof m);
            coh_srv_reply_err(c, op, id, COHORT_ERR_TOO_LARGE, "reply of %zu bytes refused: %s",
                              n, m);
            return 0;
        }
    }
    return 1;
}

/* Builds [hdr][u8 status][bytes msg] for op (a reply op or COH_OP_ERROR). */
static size_t build_err(uint8_t *f, size_t cap, uint8_t op, uint32_t id, cohort_status st,
                        const char *fmt, va_list ap)
{
    char msg[512];
    int m = vsnprintf(msg, sizeof msg, fmt, ap);
    size_t ml = m < 0 ? 0 : COH_MIN((size_t)m, sizeof msg - 1);
    size_t len = 1 + 4 + ml;
    if (COH_PROTO_HDR + len > cap)
        return 0;
    coh_proto_put_hdr(f, op, id, (uint32_t)len);
    f[COH_PROTO_HDR] = (uint8_t)st;
    coh_put_u32(f + COH_PROTO_HDR + 1, (uint32_t)ml);
    memcpy(f + COH_PROTO_HDR + 5, msg, ml);
    return COH_PROTO_HDR + len;
}

void coh_srv_reply_err(conn *c, uint8_t op, uint32_t id, cohort_status st, const char *fmt, ...)
{
    uint8_t f[600];
    va_list ap;
    va_start(ap, fmt);
    size_t n = build_err(f, sizeof f, op | COH_PROTO_REPLY, id, st, fmt, ap);
    va_end(ap);
    coh_srv_send(c, f, n);
}

/* Queues an unsolicited ERROR frame, reads nothing more from c, and closes
 * it once the frame is written (or at once if it cannot be). */
static void conn_fail(conn *c, cohort_status st, const char *fmt, ...)
{
    if (c->closed || c->closing)
        return;
    uint8_t f[600];
    va_list ap;
    va_start(ap, fmt);
    size_t n = build_err(f, sizeof f, COH_OP_ERROR, 0, st, fmt, ap);
    va_end(ap);
    c->closing = 1;
    /* A client that does not read its ERROR is dropped at the next frame
     * timeout (sweep); the clock restarts now. */
    c->last_rx_ns = coh_now_ns();
    pend_update(c);
    if (coh_srv_send(c, f, n) == 0)
        conn_flush(c);
}

void coh_srv_close_later(conn *c)
{
    if (c->closed || c->closing)
        return;
    c->closing = 1;
    c->last_rx_ns = coh_now_ns();
    pend_update(c);
    flush_mark(c);
}

/* ---- connection lifecycle ----
 * pend: connections that owe the server something with a deadline: an AUTH
 * (not authenticated yet), the rest of a frame, or reading their ERROR frame
 * (closing). Only these are swept, so an idle server with thousands of
 * quiet clients sleeps in epoll_wait without a timeout. */

static void pend_update(conn *c)
{
    int partial = !c->authed || c->closing || c->hdr_have || c->in_body || c->skip ||
                  coh_torch_partial(c);
    int listed = !dl_empty(&c->pnode);
    if (partial && !listed)
        dl_push(&c->srv->pend, &c->pnode);
    else if (!partial && listed)
        dl_del(&c->pnode);
}

/* Unlinks c from everything at once (waiters, job, lists, epoll) so no
 * later event can reach its state; the memory itself is freed by reap_all
 * at the end of the iteration, since events for c may still be in the
 * batch being processed. */
static void conn_close(conn *c)
{
    if (c->closed)
        return;
    struct cohort_store_server *s = c->srv;
    c->closed = 1;
    coh_kv_drop_waiters(c);
    coh_torch_conn_close(c);
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    dl_del(&c->node);
    if (c->authed)
        c->job->nconns--;
    dl_del(&c->jnode);
    dl_del(&c->pnode);
    unauth_drop(c);
    accept_fd_freed(s);
    body_release(c);
    ibuf_free(c);
    oq_free(c);
    s->nconns--;
    c->reap_next = s->reap;
    s->reap = c;
}

/* The nonce each connection was sent, kept for its AUTH. */
typedef struct conn_pre {
    conn c;
    uint8_t nonce[COH_PROTO_NONCE];
} conn_pre;

static void peer_name(const struct sockaddr_storage *a, char *out, size_t n)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *i = (const void *)a;
        inet_ntop(AF_INET, &i->sin_addr, host, sizeof host);
        port = ntohs(i->sin_port);
        snprintf(out, n, "%s:%d", host, port);
    } else if (a->ss_family == AF_INET6) {
        const struct sockaddr_in6 *i = (const void *)a;
        inet_ntop(AF_INET6, &i->sin6_addr, host, sizeof host);
        port = ntohs(i->sin6_port);
        snprintf(out, n, "[%s]:%d", host, port);
    } else {
        snprintf(out, n, "?");
    }
}

/* Refuses a connection we cannot take: one ERROR frame, best effort. */
static void refuse_fd(int fd, cohort_status st, const char *fmt, ...)
{
    uint8_t f[600];
    va_list ap;
    va_start(ap, fmt);
    size_t n = build_err(f, sizeof f, COH_OP_ERROR, 0, st, fmt, ap);
    va_end(ap);
    ssize_t w = send(fd, f, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)w;
    close(fd);
}

/* ---- admission: descriptor limit, client limit, unauthenticated cap ----
 *
 * Connections that have not authenticated are the cheapest thing for a
 * stranger to hold, so they are the first to go when something runs out:
 * at the descriptor limit, at max_clients or at max_unauth, the oldest
 * unauthenticated connection that has had AUTH_GRACE to answer its HELLO
 * is closed to make room (an honest client answers within one round trip).
 * An authenticated client is never closed to make room.
 *
 * Out of descriptors with nothing to evict, accept4 fails with EMFILE
 * before the kernel looks at the backlog, so the listen socket stays
 * readable: looping on it spins. Instead the reserve descriptor is spent on
 * one accept, that client is told why (a retryable refusal), and accepting
 * pauses (listen socket out of epoll) for a backoff of 50 ms doubling to
 * 1 s, or until a connection closes. Meanwhile the loop serves the clients
 * it has and sees stop requests and signals. */

#define AUTH_GRACE_MS 250
#define ACCEPT_BACKOFF_MIN_MS 50
#define ACCEPT_BACKOFF_MAX_MS 1000
#define EVICT_PER_WAKEUP 64 /* bounds the work of one accept wakeup */

static void unauth_drop(conn *c)
{
    if (!dl_empty(&c->unode)) {
        dl_del(&c->unode);
        c->srv->nunauth--;
    }
}

/* Closes the oldest unauthenticated connection if it had its grace;
 * returns 1 if one was closed. */
static int evict_oldest_unauth(struct cohort_store_server *s, const char *why)
{
    if (dl_empty(&s->unauth))
        return 0;
    conn *c = dl_entry(s->unauth.next, conn, unode);
    if (coh_now_ns() - c->accept_ns < (uint64_t)AUTH_GRACE_MS * 1000000ull)
        return 0;
    coh_warn_rl("store: closed %s: not authenticated after %" PRIu64 " ms and the server is %s",
                c->peer, (uint64_t)((coh_now_ns() - c->accept_ns) / 1000000u), why);
    if (!c->closing)
        conn_fail(c, COHORT_ERR_STORE,
                  "closed before authenticating: the store server is %s (retry)", why);
    if (!c->closed)
        conn_close(c); /* one non-blocking attempt at the ERROR, then close */
    return 1;
}

/* Takes the listen sockets out of epoll until resume_ns (or until room
 * frees: accept_fd_freed). New connections wait in the kernel's backlog. */
static void accept_pause_until(struct cohort_store_server *s, uint64_t resume_ns)
{
    if (s->accept_paused)
        return;
    epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->lfd, NULL);
    if (s->tlfd >= 0)
        epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->tlfd, NULL);
    s->accept_paused = 1;
    s->accept_resume_ns = resume_ns;
}

static void accept_pause(struct cohort_store_server *s)
{
    s->accept_backoff_ms = s->accept_backoff_ms
                               ? COH_MIN(s->accept_backoff_ms * 2, ACCEPT_BACKOFF_MAX_MS)
                               : ACCEPT_BACKOFF_MIN_MS;
    accept_pause_until(s, coh_now_ns() + (uint64_t)s->accept_backoff_ms * 1000000ull);
}

/* At max_unauth with no connection old enough to close: leave the next
 * clients in the backlog (a connect storm of thousands of ranks is not
 * refused, it is admitted as the first ones authenticate) until one
 * authenticates or closes, or the oldest has had its grace. */
static void accept_pause_unauth(struct cohort_store_server *s)
{
    conn *old = dl_entry(s->unauth.next, conn, unode);
    coh_info_rl("store: %d connections authenticating (max_unauth %d): accepting paused until "
                "one authenticates",
                s->nunauth, s->max_unauth);
    accept_pause_until(s, old->accept_ns + (uint64_t)(AUTH_GRACE_MS + 1) * 1000000ull);
}

/* Called at the top of every loop iteration; returns the ms until the
 * paused listen socket is due back (-1: not paused). */
static int accept_maybe_resume(struct cohort_store_server *s)
{
    if (!s->accept_paused)
        return -1;
    uint64_t now = coh_now_ns();
    if (now < s->accept_resume_ns)
        return (int)((s->accept_resume_ns - now) / 1000000ull) + 1;
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->lfd};
    struct epoll_event te = {.events = EPOLLIN, .data.ptr = &s->tlfd};
    if ((epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &e) < 0 && errno != EEXIST) ||
        (s->tlfd >= 0 && epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->tlfd, &te) < 0 && errno != EEXIST)) {
        s->accept_resume_ns = now + (uint64_t)ACCEPT_BACKOFF_MAX_MS * 1000000ull;
        return ACCEPT_BACKOFF_MAX_MS;
    }
    s->accept_paused = 0;
    return -1;
}

/* A descriptor was freed: let the next iteration try accepting again. */
static void accept_fd_freed(struct cohort_store_server *s)
{
    if (s->accept_paused)
        s->accept_resume_ns = 0;
}

/* EMFILE / ENFILE. Returns 1 to try accept4 again (a descriptor was freed
 * by closing an unauthenticated connection), 0 to return to the loop. */
static int accept_out_of_fds(struct cohort_store_server *s, int err, int *evicted)
{
    if (*evicted < EVICT_PER_WAKEUP &&
        evict_oldest_unauth(s, "out of file descriptors")) {
        ++*evicted;
        return 1;
    }
    coh_warn_rl("store: out of file descriptors (%s; %d connections, %d unauthenticated): "
                "not accepting for %d ms; raise RLIMIT_NOFILE (ulimit -n)",
                err == ENFILE ? "system-wide limit" : "process limit", s->nconns, s->nunauth,
                s->accept_backoff_ms ? COH_MIN(s->accept_backoff_ms * 2, ACCEPT_BACKOFF_MAX_MS)
                                     : ACCEPT_BACKOFF_MIN_MS);
    if (s->reserve_fd >= 0) {
        close(s->reserve_fd);
        s->reserve_fd = -1;
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            refuse_fd(fd, COHORT_ERR_STORE,
                      "store server is out of file descriptors (raise its RLIMIT_NOFILE); "
                      "retry later");
        s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    accept_pause(s);
    return 0;
}

/* Accepts until EAGAIN (a connect storm of 1000 ranks is drained in one
 * wakeup). Every connection gets its own fresh nonce in the HELLO, which is
 * what makes a recorded AUTH useless on another connection. */
static void do_accept(struct cohort_store_server *s, int lfd, int torch)
{
    int evicted = 0;
    while (!s->accept_paused) {
        if (!torch && s->nunauth >= s->max_unauth &&
            !(evicted < EVICT_PER_WAKEUP &&
              evict_oldest_unauth(s, "at its limit of unauthenticated connections") &&
              ++evicted)) {
            accept_pause_unauth(s);
            return;
        }
        struct sockaddr_storage a;
        socklen_t al = sizeof a;
        int fd = accept4(lfd, (struct sockaddr *)&a, &al, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                if (accept_out_of_fds(s, errno, &evicted))
                    continue;
                return;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                /* ENOBUFS, ENOMEM, EPERM...: not ours to fix; do not spin. */
                coh_warn_rl("store: accept: %s; not accepting for a while", strerror(errno));
                accept_pause(s);
            }
            return;
        }
        s->accept_backoff_ms = 0;
        if (s->nconns >= s->max_clients &&
            !(evicted < EVICT_PER_WAKEUP && evict_oldest_unauth(s, "at its client limit") &&
              ++evicted)) {
            char pn[64];
            peer_name(&a, pn, sizeof pn);
            coh_warn_rl("store: refused %s: at max_clients (%d)", pn, s->max_clients);
            if (torch)
                close(fd); /* TCPStore has no error frame */
            else
                refuse_fd(fd, COHORT_ERR_TOO_LARGE,
                          "store server is at its client limit (max_clients %d)", s->max_clients);
            continue;
        }
        conn_pre *cp = coh_calloc(1, sizeof *cp);
        if (!cp) {
            refuse_fd(fd, COHORT_ERR_NOMEM, "store server is out of memory");
            continue;
        }
        conn *c = &cp->c;
        c->srv = s;
        c->fd = fd;
        c->mem.limit = s->max_conn_memory;
        c->mem.what = "connection";
        c->mem.option = "max_conn_memory";
        peer_name(&a, c->peer, sizeof c->peer);
        dl_init(&c->node);
        dl_init(&c->jnode);
        dl_init(&c->pnode);
        dl_init(&c->unode);
        dl_init(&c->waiters);
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
            coh_warn_rl("store: epoll_ctl: %s", strerror(errno));
            close(fd);
            coh_free(cp);
            continue;
        }
        c->ev = EPOLLIN;
        dl_push(&s->conns, &c->node);
        s->nconns++;
        c->last_rx_ns = c->accept_ns = coh_now_ns();
        if (torch) {
            /* TCPStore: no HELLO, no AUTH; the client speaks first. */
            if (coh_torch_conn_init(c) < 0) {
                coh_warn("store: out of memory accepting torch client %s", c->peer);
                conn_close(c);
            }
            continue;
        }
        if (coh_auth_nonce(cp->nonce) != COHORT_OK) {
            coh_warn_rl("store: no random bytes for %s's challenge: %s; closed", c->peer,
                        coh_tls_err()->msg);
            conn_close(c);
            continue;
        }
        dl_push(&s->unauth, &c->unode);
        s->nunauth++;
        pend_update(c);
        uint8_t f[COH_PROTO_HDR + COH_PROTO_NONCE];
        coh_proto_put_hdr(f, COH_OP_HELLO, 0, COH_PROTO_NONCE);
        memcpy(f + COH_PROTO_HDR, cp->nonce, COH_PROTO_NONCE);
        if (coh_srv_send(c, f, sizeof f) == 0)
            conn_flush(c);
    }
}

/* ---- authentication ---- */

/* After an AUTH error reply: read nothing more, close once it is written. */
static void auth_close(conn *c)
{
    c->closing = 1;
    c->last_rx_ns = coh_now_ns();
    pend_update(c);
    conn_flush(c);
}

/* Moves job j to generation gen and closes its connections of every other
 * non-zero generation (generation 0 is the tools'); returns how many. */
static int job_set_gen(job *j, uint32_t gen, const char *jid)
{
    j->gen = gen;
    int closed = 0;
    for (dl *p = j->conns.next, *nx; p != &j->conns; p = nx) {
        nx = p->next;
        conn *o = dl_entry(p, conn, jnode);
        if (o->gen && o->gen != gen) {
            conn_fail(o, COHORT_ERR_AUTH,
                      "job '%s' moved to generation %u; this connection (generation %u) is "
                      "closed",
                      jid, gen, o->gen);
            closed++;
        }
    }
    return closed;
}

/* SET_GEN: the operator's way to move a job to any generation (back to 0
 * after a runaway one, or ahead), from a generation-0 (tool) connection. */
static void do_set_gen(conn *c, const coh_req *q)
{
    job *j = c->job;
    if (c->gen) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_AUTH,
                          "set-generation is an operator command: connect with generation 0 "
                          "(this connection is generation %u)",
                          c->gen);
        return;
    }
    uint32_t old = j->gen;
    int closed = job_set_gen(j, q->generation, j->id);
    coh_warn("store: %s set job '%s' to generation %u (was %u); closed %d connections", c->peer,
             j->id, j->gen, old, closed);
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_u32(w, old);
    coh_srv_reply_end(c, q->op, q->id);
}

/* Checks an AUTH against the job table. The expected MAC is computed under
 * jobs_mu (add_job may replace the token concurrently) and compared in
 * constant time. Every refusal is logged once, with the peer address and
 * the reason, and answered with a reply the client turns into
 * COHORT_ERR_AUTH; the connection is closed after that reply. */
static void do_auth(conn *c, const coh_req *q)
{
    struct cohort_store_server *s = c->srv;
    char jid[COH_PROTO_MAX_JOB + 1];
    /* Printable copy for messages; the comparison uses the raw bytes. */
    size_t jl = q->job.n;
    for (size_t i = 0; i < jl; i++)
        jid[i] = (q->job.p[i] >= 0x20 && q->job.p[i] < 0x7f) ? (char)q->job.p[i] : '?';
    jid[jl] = 0;
    job *j = NULL;
    uint8_t want[COH_PROTO_MAC] = {0};
    pthread_mutex_lock(&s->jobs_mu);
    for (job *x = s->jobs; x; x = x->next)
        if (x->idlen == jl && !memcmp(x->id, q->job.p, jl)) {
            j = x;
            coh_proto_auth_mac(want, x->token, ((conn_pre *)c)->nonce, q->job.p, jl,
                               q->generation);
            break;
        }
    pthread_mutex_unlock(&s->jobs_mu);
    /* The decision every handshake makes (util/auth.h): job, MAC, then the
     * store's generation window. */
    switch (coh_auth_judge(j != NULL, want, q->mac, COH_AUTH_GEN_STORE, q->generation,
                           j ? j->gen : 0)) {
    case COH_AUTH_OK:
        break;
    case COH_AUTH_WRONG_JOB:
        coh_warn_rl("store: refused %s: unknown job '%s'", c->peer, jid);
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_AUTH, "unknown job '%s'", jid);
        auth_close(c);
        return;
    case COH_AUTH_BAD_MAC:
        coh_warn_rl("store: refused %s: wrong token for job '%s'", c->peer, jid);
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_AUTH, "wrong token for job '%s'", jid);
        auth_close(c);
        return;
    case COH_AUTH_STALE_GEN:
        coh_warn_rl("store: refused %s: job '%s' stale generation %u (job is at %u)", c->peer, jid,
                 q->generation, j->gen);
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_AUTH, "stale generation %u, job is at %u",
                          q->generation, j->gen);
        auth_close(c);
        return;
    default: /* COH_AUTH_GEN_SKIP: only an operator (SET_GEN) moves a job further or back */
        coh_warn_rl("store: refused %s: job '%s' generation %u skips ahead (job is at %u)",
                    c->peer, jid, q->generation, j->gen);
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_AUTH,
                          "generation %u skips ahead: job '%s' is at %u and moves at most %d "
                          "generations at a time (an operator can set it: cohort-kv "
                          "set-generation)",
                          q->generation, jid, j->gen, COH_AUTH_GEN_MAX_STEP);
        auth_close(c);
        return;
    }
    if (q->generation > j->gen) {
        /* A restart under a new generation: connections of older ones are
         * closed, so a lingering old process cannot touch the new run. */
        uint32_t old = j->gen;
        int closed = job_set_gen(j, q->generation, jid);
        if (old || closed)
            coh_info("store: job '%s' now at generation %u (was %u); closed %d older connections",
                     jid, j->gen, old, closed);
    }
    c->authed = 1;
    unauth_drop(c);
    accept_fd_freed(s); /* room under max_unauth: accept again */
    c->job = j;
    /* What the connection holds was charged to (connection, server); from
     * now on it is released from (connection, job, server). */
    coh_acct_force(&(coh_acct){{&j->mem, NULL, NULL}}, c->mem.used);
    c->gen = q->generation;
    dl_push(&j->conns, &c->jnode);
    j->nconns++;
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_u32(w, s->max_key);
    coh_wr_u32(w, s->max_value);
    coh_wr_u32(w, s->max_frame);
    coh_wr_u32(w, j->gen);
    coh_srv_reply_end(c, q->op, q->id);
}

/* ---- input ---- */

/* One complete frame. Before authentication only AUTH is accepted and any
 * mistake closes the connection; after it, a malformed or over-limit
 * request is answered with an error reply and the connection carries on,
 * because the frame boundary (from the validated header) is still sound. */
static void handle_frame(conn *c, const coh_frame_hdr *h, const uint8_t *payload)
{
    struct cohort_store_server *s = c->srv;
    coh_proto_limits lim = {s->max_key, s->max_value};
    coh_req q;
    char err[256];
    if (!c->authed && h->op != COH_OP_AUTH) {
        coh_warn_rl("store: %s sent %s (op 0x%02x) before authenticating: closing", c->peer,
                 coh_proto_op_name(h->op), h->op);
        conn_fail(c, COHORT_ERR_PROTOCOL, "expected AUTH, got op 0x%02x", h->op);
        return;
    }
    cohort_status st = coh_proto_decode_req(h, payload, &lim, &q, err, sizeof err);
    if (st != COHORT_OK) {
        if (!c->authed) {
            coh_warn_rl("store: refused %s: bad AUTH frame: %s", c->peer, err);
            conn_fail(c, st, "bad AUTH frame: %s", err);
            return;
        }
        /* The frame's extent was sound: answer it and keep the connection. */
        if (h->op != COH_OP_CANCEL)
            coh_srv_reply_err(c, h->op, h->id, st, "%s", err);
        return;
    }
    if (h->op == COH_OP_AUTH) {
        if (c->authed)
            coh_srv_reply_err(c, h->op, h->id, COHORT_ERR_PROTOCOL, "already authenticated");
        else
            do_auth(c, &q);
        return;
    }
    if (h->op == COH_OP_SET_GEN) {
        do_set_gen(c, &q);
        return;
    }
    coh_kv_handle(c, &q);
}

/* Validates a complete header; returns 0 to read its body, -1 if the
 * connection was failed, 1 if the body is to be skipped (already answered). */
static int take_header(conn *c, const uint8_t *hb)
{
    struct cohort_store_server *s = c->srv;
    coh_frame_hdr h;
    int r = coh_proto_parse_hdr(hb, COH_PROTO_HDR, &h);
    if (r == COH_HDR_BAD_MAGIC) {
        coh_warn_rl("store: %s sent bytes that are not a store frame (%02x %02x ...): closing",
                 c->peer, hb[0], hb[1]);
        conn_fail(c, COHORT_ERR_PROTOCOL, "not a cohort store frame (bad magic %02x %02x)",
                  hb[0], hb[1]);
        return -1;
    }
    if (r == COH_HDR_BAD_VERSION) {
        coh_warn_rl("store: refused %s: it speaks store protocol version %u, this server %u",
                 c->peer, h.version, COH_PROTO_VERSION);
        conn_fail(c, COHORT_ERR_PROTOCOL,
                  "store protocol version %u not supported: this server speaks version %u",
                  h.version, COH_PROTO_VERSION);
        return -1;
    }
    c->fh = h;
    if (!c->authed && h.len > COH_PROTO_MAX_PREAUTH) {
        coh_warn_rl("store: refused %s: %u-byte frame before authenticating", c->peer, h.len);
        conn_fail(c, COHORT_ERR_PROTOCOL, "frame of %u bytes before authentication (max %d)",
                  h.len, COH_PROTO_MAX_PREAUTH);
        return -1;
    }
    if (h.len > s->max_frame) {
        c->skip = h.len;
        coh_srv_reply_err(c, h.op, h.id, COHORT_ERR_TOO_LARGE,
                          "request of %u bytes is over the server's frame limit (%u bytes: "
                          "max_value %u + 1 MiB)",
                          h.len, s->max_frame, s->max_value);
        return 1;
    }
    return 0;
}

/* Releases the body buffer of the frame being received (if a SET did not
 * adopt it) and its charge. */
static void body_release(conn *c)
{
    if (c->body_cap) {
        coh_acct a = coh_srv_acct_conn(c);
        coh_acct_release(&a, c->body_cap);
        c->body_cap = 0;
    }
    coh_blob_unref(c->body_blob);
    c->body_blob = NULL;
    c->body = NULL;
}

/* The buffered body of c->fh is complete: handle it and release it (unless
 * a SET adopted it as its value, which then carries its own charge). */
static void body_done(conn *c)
{
    uint8_t *b = c->body;
    c->in_body = 0;
    handle_frame(c, &c->fh, b);
    body_release(c);
}

#define BODY_FIRST (64u * 1024)

/* Makes room in the body buffer for want more bytes (at least one). The
 * buffer grows as bytes arrive, doubling (amortised O(bytes)), and each
 * growth is charged to the connection, its job and the server: a header
 * that declares 64 MiB costs nothing until 64 MiB arrive. Returns 0, or -1
 * if refused: the request is then answered COHORT_ERR_TOO_LARGE naming the
 * limit, and the rest of its body is discarded as it arrives. */
static int body_reserve(conn *c, size_t want)
{
    size_t left = c->fh.len - c->body_have;
    size_t need = c->body_have + COH_MIN(want, left);
    if (need <= c->body_cap)
        return 0;
    size_t ncap = COH_MAX(BODY_FIRST, c->body_cap * 2);
    ncap = COH_MIN(COH_MAX(ncap, need), (size_t)c->fh.len);
    size_t delta = ncap - c->body_cap;
    coh_acct a = coh_srv_acct_conn(c);
    const coh_budget *no = coh_acct_charge(&a, delta);
    blob *nb = NULL;
    if (!no) {
        nb = coh_realloc(c->body_blob, sizeof(blob) + ncap);
        if (!nb)
            coh_acct_release(&a, delta);
    }
    if (!nb) {
        char m[320];
        if (no)
            coh_srv_limit_hit(c, no, c->fh.len, coh_proto_op_name(c->fh.op), m, sizeof m);
        else
            snprintf(m, sizeof m, "store server out of memory");
        coh_srv_reply_err(c, c->fh.op, c->fh.id, no ? COHORT_ERR_TOO_LARGE : COHORT_ERR_NOMEM,
                          "request of %u bytes refused: %s", c->fh.len, m);
        c->skip = left;
        c->in_body = 0;
        body_release(c);
        return -1;
    }
    if (!c->body_blob) {
        nb->refs = 1;
        nb->orphan[0] = nb->orphan[1] = NULL;
    }
    nb->data = nb->storage;
    nb->len = nb->room = ncap;
    nb->cost = sizeof(blob) + ncap;
    c->body_blob = nb;
    c->body = nb->storage;
    c->body_cap = ncap;
    return 0;
}

/* Work one connection may do per loop iteration before the others get
 * their turn: a pipeline of 10000 requests (or 40 APPENDs) runs over
 * several iterations, interleaved with every other client's. The time
 * bound covers requests whose cost is not their size (a MULTI_GET of many
 * keys, a LIST, a copy of a large value). */
#define FRAMES_PER_TURN 64
#define BYTES_PER_TURN (1u << 20)
#define NS_PER_TURN (2u * 1000 * 1000)

/* Consumes up to n bytes of input, handling complete frames in place;
 * returns how many were consumed. It stops early (the rest is the caller's
 * to keep) once this turn's work bound is reached, or when the client is
 * backlogged on its replies. */
static size_t conn_feed(conn *c, const uint8_t *p, size_t n)
{
    if (c->torch)
        return coh_torch_feed(c, p, n, FRAMES_PER_TURN, BYTES_PER_TURN);
    const uint8_t *p0 = p;
    unsigned frames = 0;
    size_t work = 0;
    uint64_t t0 = coh_now_ns();
    while (n && !c->closed && !c->closing) {
        if (c->skip) {
            size_t k = (size_t)COH_MIN((uint64_t)n, c->skip);
            c->skip -= k;
            p += k;
            n -= k;
            continue;
        }
        if (c->in_body) {
            size_t k = COH_MIN(n, c->fh.len - c->body_have);
            if (body_reserve(c, k) < 0)
                continue; /* answered; the rest is skipped */
            k = COH_MIN(k, c->body_cap - c->body_have);
            memcpy(c->body + c->body_have, p, k);
            c->body_have += k;
            p += k;
            n -= k;
            if (c->body_have == c->fh.len) {
                body_done(c);
                frames++;
                work += c->fh.len;
            }
            continue;
        }
        if (!c->hdr_have &&
            (frames >= FRAMES_PER_TURN || work >= BYTES_PER_TURN || conn_backlogged(c) ||
             (frames && coh_now_ns() - t0 >= NS_PER_TURN)))
            break; /* the next frame waits for a later turn */
        const uint8_t *hb;
        if (c->hdr_have || n < COH_PROTO_HDR) {
            size_t k = COH_MIN(n, (size_t)(COH_PROTO_HDR - c->hdr_have));
            memcpy(c->hdr + c->hdr_have, p, k);
            c->hdr_have = (uint8_t)(c->hdr_have + k);
            p += k;
            n -= k;
            if (c->hdr_have < COH_PROTO_HDR)
                break;
            c->hdr_have = 0;
            hb = c->hdr;
        } else {
            hb = p;
            p += COH_PROTO_HDR;
            n -= COH_PROTO_HDR;
        }
        int r = take_header(c, hb);
        if (r)
            continue; /* failed (loop ends) or skipping */
        if (n >= c->fh.len) {
            /* Common case: the whole frame is in the buffer. */
            handle_frame(c, &c->fh, p);
            p += c->fh.len;
            n -= c->fh.len;
            frames++;
            work += COH_PROTO_HDR + c->fh.len;
            continue;
        }
        /* The body is still arriving: it is buffered as it comes. */
        c->body_have = 0;
        c->in_body = 1;
    }
    return (size_t)(p - p0);
}

/* ---- input kept for a later turn ---- */

static void ready_mark(conn *c)
{
    if (!c->ready && !c->closed) {
        c->ready = 1;
        c->ready_next = c->srv->ready_head;
        c->srv->ready_head = c;
    }
}

static void ibuf_free(conn *c)
{
    if (c->ibuf) {
        coh_acct a = coh_srv_acct_conn(c);
        coh_acct_release(&a, c->ibuf_off + c->ibuf_len);
        coh_free(c->ibuf);
        c->ibuf = NULL;
    }
    c->ibuf_off = c->ibuf_len = 0;
}

/* Keeps the n bytes the frame loop did not get to (at most one read's
 * worth). They are charged to the connection regardless of its limit:
 * they are already read, and the connection is not read again until they
 * are handled, which bounds them. */
static int ibuf_keep(conn *c, const uint8_t *p, size_t n)
{
    c->ibuf = coh_malloc(n);
    if (!c->ibuf) {
        coh_warn_rl("store: out of memory keeping %zu bytes of input of %s: closing", n,
                    c->peer);
        conn_close(c);
        return -1;
    }
    memcpy(c->ibuf, p, n);
    c->ibuf_off = 0;
    c->ibuf_len = n;
    coh_acct a = coh_srv_acct_conn(c);
    coh_acct_force(&a, n);
    return 0;
}

/* Handles kept input (a turn's worth); returns once it is gone or the
 * turn's bound is reached again. */
static void conn_run_ibuf(conn *c)
{
    size_t k = conn_feed(c, c->ibuf + c->ibuf_off, c->ibuf_len);
    if (c->closed)
        return;
    c->ibuf_off += k;
    c->ibuf_len -= k;
    if (!c->ibuf_len)
        ibuf_free(c);
    else if (!conn_backlogged(c) && !c->closing)
        ready_mark(c);
    pend_update(c);
    conn_update_events(c);
}

static void ready_run(struct cohort_store_server *s)
{
    conn *list = s->ready_head;
    s->ready_head = NULL;
    while (list) {
        conn *c = list;
        list = c->ready_next;
        c->ready = 0;
        if (c->closed || !c->ibuf_len)
            continue;
        if (c->closing) {
            ibuf_free(c);
            continue;
        }
        if (!conn_backlogged(c))
            conn_run_ibuf(c);
    }
}

/* At most READS_PER_EVENT reads per readiness event, so one client
 * streaming large values cannot starve the others in this iteration;
 * level-triggered epoll brings it back next time. */
static void conn_read(conn *c)
{
    struct cohort_store_server *s = c->srv;
    for (int i = 0; i < READS_PER_EVENT && !c->closed && !c->closing; i++) {
        if (conn_backlogged(c) || c->ibuf_len)
            break;
        uint8_t *dst = s->scratch;
        size_t cap = s->scratch_cap;
        int direct = 0;
        /* A large body is read straight into its buffer: no second copy.
         * The buffer still grows by doubling, not to the declared size. */
        if (c->in_body && !c->skip && c->fh.len - c->body_have >= cap / 2) {
            size_t grow = COH_MAX((size_t)BODY_FIRST, c->body_cap);
            if (body_reserve(c, COH_MIN(grow, c->fh.len - c->body_have)) == 0) {
                dst = c->body + c->body_have;
                cap = c->body_cap - c->body_have;
                direct = 1;
            }
        }
        ssize_t r = recv(c->fd, dst, cap, MSG_DONTWAIT);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            coh_info("store: read from %s failed: %s; closing", c->peer, strerror(errno));
            conn_close(c);
            return;
        }
        if (r == 0) {
            if (c->hdr_have || c->in_body)
                coh_info("store: %s closed the connection mid-frame", c->peer);
            conn_close(c);
            return;
        }
        c->last_rx_ns = coh_now_ns();
        if (direct) {
            c->body_have += (size_t)r;
            if (c->body_have == c->fh.len)
                body_done(c);
        } else {
            size_t k = conn_feed(c, dst, (size_t)r);
            if (!c->closed && !c->closing && k < (size_t)r) {
                if (ibuf_keep(c, dst + k, (size_t)r - k) < 0)
                    return;
                if (!conn_backlogged(c))
                    ready_mark(c);
                break;
            }
        }
        if ((size_t)r < cap)
            break; /* the socket is drained */
    }
    if (!c->closed) {
        pend_update(c);
        conn_update_events(c);
    }
}

/* Closes connections that stalled mid-frame or did not authenticate in
 * time; returns the ms until the next such deadline (-1: none). The
 * authentication deadline counts from the accept and bytes do not extend
 * it (a byte every few seconds would otherwise hold a connection for
 * ever); a stalled frame counts from the last byte received. */
static int sweep(struct cohort_store_server *s)
{
    if (dl_empty(&s->pend))
        return -1;
    uint64_t now = coh_now_ns();
    uint64_t to = (uint64_t)s->frame_timeout_ms * 1000000ull;
    uint64_t ato = (uint64_t)s->auth_timeout_ms * 1000000ull;
    uint64_t next = UINT64_MAX;
    for (dl *p = s->pend.next, *nx; p != &s->pend; p = nx) {
        nx = p->next;
        conn *c = dl_entry(p, conn, pnode);
        int auth = !c->authed && !c->closing;
        uint64_t dead = auth ? c->accept_ns + ato : c->last_rx_ns + to;
        if (now >= dead && c->closing) {
            conn_close(c); /* it never read its ERROR frame */
            continue;
        }
        if (now >= dead && auth) {
            coh_warn_rl("store: %s did not authenticate within %d ms (auth timeout): closing",
                        c->peer, s->auth_timeout_ms);
            conn_fail(c, COHORT_ERR_TIMEOUT,
                      "connection did not authenticate within %d ms (auth timeout): closed",
                      s->auth_timeout_ms);
            continue;
        }
        if (now >= dead) {
            coh_warn_rl("store: %s stalled mid-frame (frame timeout %d ms): closing", c->peer,
                        s->frame_timeout_ms);
            conn_fail(c, COHORT_ERR_TIMEOUT,
                      "connection stalled mid-frame (frame timeout %d ms): closed",
                      s->frame_timeout_ms);
            continue;
        }
        if (dead < next)
            next = dead;
    }
    if (next == UINT64_MAX)
        return -1;
    return (int)((next - now) / 1000000ull) + 1;
}

/* Writes every connection that got replies in this iteration. */
static void flush_all(struct cohort_store_server *s)
{
    while (s->flush_head) {
        conn *c = s->flush_head;
        s->flush_head = c->flush_next;
        c->in_flush = 0;
        if (!c->closed)
            conn_flush(c);
    }
}

static void reap_all(struct cohort_store_server *s)
{
    /* A reaped conn may still be on the flush list (closed after queueing):
     * flush_all skipped it; unlink it before freeing. */
    conn **pp = &s->flush_head;
    while (*pp) {
        if ((*pp)->closed)
            *pp = (*pp)->flush_next;
        else
            pp = &(*pp)->flush_next;
    }
    for (pp = &s->ready_head; *pp;) {
        if ((*pp)->closed)
            *pp = (*pp)->ready_next;
        else
            pp = &(*pp)->ready_next;
    }
    while (s->reap) {
        conn *c = s->reap;
        s->reap = c->reap_next;
        coh_free((conn_pre *)c);
    }
}

/* ---- the loop ---- */

/* Stop: every client is told "shutting down" (one non-blocking attempt)
 * and closed, so their pending calls fail at once with COHORT_ERR_STORE
 * instead of waiting for a timeout; the listen socket closes too, so new
 * connects are refused rather than left in the backlog. */
static void loop_shutdown(struct cohort_store_server *s)
{
    while (!dl_empty(&s->conns)) {
        conn *c = dl_entry(s->conns.next, conn, node);
        if (!c->closing)
            conn_fail(c, COHORT_ERR_STORE, "store server shutting down");
        /* One non-blocking attempt at the ERROR frame, then close. */
        if (!c->closed)
            conn_close(c);
    }
    flush_all(s);
    reap_all(s);
    if (s->lfd >= 0) {
        close(s->lfd);
        s->lfd = -1;
    }
    if (s->tlfd >= 0) {
        close(s->tlfd);
        s->tlfd = -1;
    }
}

static cohort_status server_loop(struct cohort_store_server *s, volatile int *flag,
                                 const sigset_t *waitmask)
{
    struct epoll_event evs[MAX_EVENTS];
    cohort_status st = COHORT_OK;
    while (!atomic_load(&s->stop) && !(flag && *flag)) {
        int to = sweep(s);
        int ato = accept_maybe_resume(s);
        if (ato >= 0 && (to < 0 || ato < to))
            to = ato;
        if (s->ready_head)
            to = 0; /* input kept from the last turn: poll, then run it */
        flush_all(s); /* ERROR frames queued by the sweep */
        reap_all(s);
        int n = waitmask ? epoll_pwait(s->epfd, evs, MAX_EVENTS, to, waitmask)
                         : epoll_wait(s->epfd, evs, MAX_EVENTS, to);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "epoll_wait", errno, "store server loop");
            coh_error("%s", coh_tls_err()->msg);
            break;
        }
        for (int i = 0; i < n; i++) {
            void *ptr = evs[i].data.ptr;
            uint32_t ev = evs[i].events;
            if (ptr == &s->lfd || ptr == &s->tlfd) {
                do_accept(s, ptr == &s->lfd ? s->lfd : s->tlfd, ptr == &s->tlfd);
                continue;
            }
            if (ptr == &s->evfd) {
                uint64_t v;
                ssize_t r = read(s->evfd, &v, sizeof v);
                (void)r;
                continue;
            }
            conn *c = ptr;
            if (c->closed)
                continue; /* closed earlier in this batch; freed below */
            if ((ev & (EPOLLERR | EPOLLHUP)) && c->closing) {
                conn_close(c);
                continue;
            }
            if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP))
                conn_read(c);
            if (!c->closed && (ev & EPOLLOUT))
                conn_flush(c);
        }
        ready_run(s);
        flush_all(s);
        reap_all(s);
    }
    loop_shutdown(s);
    return st;
}

/* ---- public API ---- */

/* Binds the first address of host that works. "::" listens dual-stack
 * (IPV6_V6ONLY off), so one server takes IPv4 and IPv6 clients. */
static cohort_status listen_on(struct cohort_store_server *s, const char *host, int port)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE};
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gr = getaddrinfo(host, ps, &hints, &res);
    if (gr != 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: cannot resolve bind address '%s': %s",
                           host, gai_strerror(gr));
    int err = 0;
    const char *call = "socket";
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            call = "socket";
            continue;
        }
        int one = 1, zero = 0;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (a->ai_family == AF_INET6)
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        if (bind(fd, a->ai_addr, a->ai_addrlen) < 0) {
            err = errno;
            call = "bind";
            close(fd);
            continue;
        }
        if (listen(fd, SOMAXCONN) < 0) {
            err = errno;
            call = "listen";
            close(fd);
            continue;
        }
        struct sockaddr_storage ss;
        socklen_t sl = sizeof ss;
        getsockname(fd, (struct sockaddr *)&ss, &sl);
        s->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                 : ((struct sockaddr_in *)&ss)->sin_port);
        s->lfd = fd;
        freeaddrinfo(res);
        return COHORT_OK;
    }
    freeaddrinfo(res);
    return coh_err_sys(NULL, COHORT_ERR_SYSTEM, call, err, "store server: cannot listen on %s:%d",
                       host, port);
}

static cohort_status job_check(const char *id, const char *token)
{
    if (!id || !*id || strlen(id) > COH_PROTO_MAX_JOB)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store server: job id must be 1..%d bytes", COH_PROTO_MAX_JOB);
    if (!token || !*token)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: empty token for job '%s'",
                           id);
    return COHORT_OK;
}

cohort_status cohort_store_server_add_job(cohort_store_server *s, const char *job_id,
                                          const char *token)
{
    if (!s)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: NULL server");
    cohort_status st = job_check(job_id, token);
    if (st)
        return st;
    char *tok = coh_strdup(token);
    if (!tok)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "store server: adding job '%s'", job_id);
    pthread_mutex_lock(&s->jobs_mu);
    job **pp = &s->jobs;
    for (; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->id, job_id)) {
            /* Same job again: the new token replaces the old one. */
            char *old = (*pp)->token;
            (*pp)->token = tok;
            pthread_mutex_unlock(&s->jobs_mu);
            sodium_memzero(old, strlen(old));
            coh_free(old);
            return COHORT_OK;
        }
    job *j = coh_calloc(1, sizeof *j);
    char *id = coh_strdup(job_id);
    if (!j || !id) {
        pthread_mutex_unlock(&s->jobs_mu);
        coh_free(j);
        coh_free(id);
        coh_free(tok);
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "store server: adding job '%s'", job_id);
    }
    j->id = id;
    j->idlen = strlen(id);
    j->token = tok;
    j->mem.limit = s->max_job_memory;
    j->mem.what = "job";
    j->mem.option = "max_job_memory";
    coh_kv_job_init(j);
    *pp = j;
    size_t njobs = 0;
    for (job *x = s->jobs; x; x = x->next)
        njobs++;
    /* A job added later gets the same limit: past max_memory in total, a
     * job can be refused at the server's limit before its own. */
    if (njobs > 1 && s->max_job_memory > s->mem.limit / njobs)
        coh_warn_rl("store: %zu jobs x max_job_memory %zu is over max_memory %zu: a job can be "
                    "refused at the server's limit before its own",
                    njobs, s->max_job_memory, s->mem.limit);
    pthread_mutex_unlock(&s->jobs_mu);
    return COHORT_OK;
}

static void server_free(cohort_store_server *s)
{
    if (s->lfd >= 0)
        close(s->lfd);
    if (s->tlfd >= 0)
        close(s->tlfd);
    coh_torch_srv_free(s);
    if (s->evfd >= 0)
        close(s->evfd);
    if (s->epfd >= 0)
        close(s->epfd);
    if (s->reserve_fd >= 0)
        close(s->reserve_fd);
    for (job *j = s->jobs, *nx; j; j = nx) {
        nx = j->next;
        coh_kv_job_free(s, j);
        sodium_memzero(j->token, strlen(j->token));
        coh_free(j->token);
        coh_free(j->id);
        coh_free(j);
    }
    coh_free(s->scratch);
    for (oseg *o = s->spare, *nx; o; o = nx) {
        nx = o->next;
        coh_free(o);
    }
    coh_wr_free(&s->w);
    pthread_mutex_destroy(&s->jobs_mu);
    pthread_mutex_destroy(&s->run_mu);
    pthread_cond_destroy(&s->run_cv);
    coh_free(s);
}

/* Validates every option before allocating anything, so a bad
 * configuration is reported as COHORT_ERR_INVALID naming the option. The
 * request frame limit follows from the value and key limits: the largest
 * legal SET plus 1 MiB for multi-key requests. */
cohort_status cohort_store_server_create(cohort_store_server **out,
                                         const cohort_store_server_opts *o)
{
    if (!out || !o)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: NULL argument");
    *out = NULL;
    if (sodium_init() < 0)
        return coh_err_set(NULL, COHORT_ERR_SYSTEM, "store server: libsodium init failed");
    if (o->port < 0 || o->port > 65535)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: port %d out of range",
                           o->port);
    if (o->n_jobs < 0 || (o->n_jobs > 0 && (!o->job_ids || !o->tokens)))
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: bad job list (n_jobs %d)",
                           o->n_jobs);
    for (int i = 0; i < o->n_jobs; i++) {
        cohort_status st = job_check(o->job_ids[i], o->tokens[i]);
        if (st)
            return st;
    }
    size_t max_key = o->max_key ? o->max_key : 4096;
    size_t max_value = o->max_value ? o->max_value : 64u << 20;
    if (max_key > (1u << 20))
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store server: max_key %zu over 1 MiB",
                           max_key);
    if (max_value > (size_t)UINT32_MAX - (4u << 20))
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store server: max_value %zu over the protocol's 4 GiB - 4 MiB",
                           max_value);
    if (o->max_clients < 0 || o->frame_timeout_ms < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store server: negative max_clients or frame_timeout_ms");
    if (o->auth_timeout_ms < 0 || o->max_unauth < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store server: negative auth_timeout_ms or max_unauth");
    cohort_store_server *s = coh_calloc(1, sizeof *s);
    if (!s)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "store server: allocating");
    s->epfd = s->lfd = s->evfd = s->reserve_fd = s->tlfd = -1;
    pthread_mutex_init(&s->jobs_mu, NULL);
    pthread_mutex_init(&s->run_mu, NULL);
    pthread_cond_init(&s->run_cv, NULL);
    dl_init(&s->conns);
    dl_init(&s->pend);
    dl_init(&s->unauth);
    coh_wr_init(&s->w);
    s->max_key = (uint32_t)max_key;
    s->max_value = (uint32_t)max_value;
    s->max_frame = (uint32_t)(max_value + max_key + (1u << 20));
    s->max_clients = o->max_clients ? o->max_clients : 65536;
    s->mem.limit = o->max_memory ? o->max_memory : (size_t)1 << 30;
    s->mem.what = "store";
    s->mem.option = "max_memory";
    /* Job limits that add up to the server's: no job can use memory that
     * another is entitled to. */
    s->max_job_memory = o->max_job_memory ? o->max_job_memory
                                          : s->mem.limit / (size_t)COH_MAX(o->n_jobs, 1);
    s->max_conn_memory = o->max_conn_memory ? o->max_conn_memory
                                            : (size_t)s->max_frame + (8u << 20);
    s->frame_timeout_ms = o->frame_timeout_ms ? o->frame_timeout_ms : 10000;
    s->auth_timeout_ms = o->auth_timeout_ms ? o->auth_timeout_ms : 5000;
    s->max_unauth = o->max_unauth ? o->max_unauth : 1024;
    randombytes_buf(s->hkey, sizeof s->hkey);
    s->scratch_cap = SCRATCH_SIZE;
    s->scratch = coh_malloc(s->scratch_cap);
    cohort_status st = COHORT_OK;
    if (!s->scratch) {
        st = coh_err_set(NULL, COHORT_ERR_NOMEM, "store server: allocating buffers");
        goto fail;
    }
    for (int i = 0; i < o->n_jobs && !st; i++)
        st = cohort_store_server_add_job(s, o->job_ids[i], o->tokens[i]);
    if (st)
        goto fail;
    const char *host = o->bind_addr ? o->bind_addr : "0.0.0.0";
    snprintf(s->bind, sizeof s->bind, "%s", host);
    if ((st = listen_on(s, host, o->port)))
        goto fail;
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    s->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (s->epfd < 0 || s->evfd < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, s->epfd < 0 ? "epoll_create1" : "eventfd",
                         errno, "store server");
        goto fail;
    }
    struct epoll_event e1 = {.events = EPOLLIN, .data.ptr = &s->lfd};
    struct epoll_event e2 = {.events = EPOLLIN, .data.ptr = &s->evfd};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &e1) < 0 ||
        epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, &e2) < 0) {
        st = coh_err_sys(NULL, COHORT_ERR_SYSTEM, "epoll_ctl", errno, "store server");
        goto fail;
    }
    *out = s;
    return COHORT_OK;
fail:
    server_free(s);
    return st;
}

int cohort_store_server_port(const cohort_store_server *s) { return s ? s->port : 0; }

static void *server_thread(void *arg)
{
    cohort_store_server *s = arg;
    /* Signals belong to the application's threads, not to this one. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    server_loop(s, NULL, NULL);
    return NULL;
}

cohort_status coh_store_server_spawn(cohort_store_server *s)
{
    int e = pthread_create(&s->thr, NULL, server_thread, s);
    if (e) {
        server_free(s);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "pthread_create", e, "store server thread");
    }
    s->thr_started = 1;
    return COHORT_OK;
}

cohort_status cohort_store_server_start(cohort_store_server **out,
                                        const cohort_store_server_opts *opts)
{
    cohort_status st = cohort_store_server_create(out, opts);
    if (st)
        return st;
    st = coh_store_server_spawn(*out);
    if (st)
        *out = NULL;
    return st;
}

cohort_status cohort_store_server_run(cohort_store_server *s, volatile int *stop_flag)
{
    if (!s || s->thr_started)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store server: run() on a NULL or already started server");
    /* SIGINT/SIGTERM are blocked except inside epoll_pwait, so a handler
     * that sets *stop_flag can never slip in between the check and the
     * wait. */
    sigset_t block, old, waitmask;
    if (stop_flag) {
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        waitmask = old;
        sigdelset(&waitmask, SIGINT);
        sigdelset(&waitmask, SIGTERM);
    }
    pthread_mutex_lock(&s->run_mu);
    s->running = 1;
    pthread_mutex_unlock(&s->run_mu);
    cohort_status st = server_loop(s, stop_flag, stop_flag ? &waitmask : NULL);
    if (stop_flag)
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_mutex_lock(&s->run_mu);
    s->running = 0;
    pthread_cond_broadcast(&s->run_cv);
    pthread_mutex_unlock(&s->run_mu);
    return st;
}

/* The eventfd wakes the loop wherever it sleeps; the loop sees the stop
 * flag, shuts the clients down and returns. For a loop run by the caller's
 * thread (cohort_store_server_run), stop() waits on run_cv until run() has
 * left the loop before freeing. */
void cohort_store_server_stop(cohort_store_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, 1);
    uint64_t one = 1;
    ssize_t w = write(s->evfd, &one, sizeof one);
    (void)w;
    if (s->thr_started) {
        pthread_join(s->thr, NULL);
    } else {
        pthread_mutex_lock(&s->run_mu);
        while (s->running)
            pthread_cond_wait(&s->run_cv, &s->run_mu);
        pthread_mutex_unlock(&s->run_mu);
    }
    server_free(s);
}
