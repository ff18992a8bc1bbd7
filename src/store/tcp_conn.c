/*
 * tcp_conn.c - the tcp store backend's connection: one TCP connection per
 * root handle, the handshake, pipelined request/reply (tcp_conn.h). The
 * operations that go over it are tcp_ops.c.
 *
 * Pipelining: every request carries an id. Any number of threads may have a
 * request outstanding on one connection; there is no background thread.
 * A thread waiting for its reply either becomes "the reader" (if none is)
 * and reads frames, handing each reply to the waiting thread it belongs to,
 * or sleeps on the condition variable. When the reader's own reply arrives
 * (or its deadline passes) it gives the role up and wakes the others, one
 * of which takes over. So a GET that waits for minutes on one view never
 * blocks a SET on another view of the same connection.
 *
 * Timeouts are client-side deadlines. A request that times out is removed
 * from the pending list and a CANCEL for its id is sent, so the server drops
 * its waiter; a reply that crosses the CANCEL is discarded by id. Replies
 * therefore never go out of step.
 *
 * Failure: EOF, a reset, an ERROR frame or a malformed frame makes the
 * connection dead (sticky): every pending and later call fails at once with
 * the recorded cause (COHORT_ERR_STORE naming the server address, or the
 * server's own status such as COHORT_ERR_AUTH for a generation change).
 *
 * Locking: one mutex (mu) guards the pending list, the reader and sender
 * roles and the dead state; it is never held across a syscall that can
 * block. The socket is written by one thread at a time (the sender role)
 * and read by one at a time (the reader role).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "store/backend.h"
#include "store/proto.h"
#include "store/tcp_conn.h"
#include "util/addr.h"

typedef struct tslot {
    struct tslot *next, *prev;
    uint32_t id;
    int done;
    coh_frame_hdr h;
    uint8_t *payload; /* owned once done */
} tslot;

typedef struct tcp {
    int fd;
    char addr[300];    /* host:port, for messages */
    pthread_mutex_t mu; /* pending, reader, dead, next_id */
    pthread_cond_t cv;
    pthread_cond_t send_cv; /* a sender finished */
    int sending;
    uint32_t next_id;
    tslot pending;     /* sentinel of a circular list */
    int reader;
    int dead;
    cohort_status dead_st;
    char dead_msg[768];
    /* owned by the current reader */
    uint8_t *rbuf;
    size_t rcap, roff, rlen;
    int in_big;
    coh_frame_hdr big_h;
    uint8_t *big;
    uint32_t big_have;
    /* from the server's AUTH reply */
    uint32_t max_key, max_value, max_frame, job_gen;
    int rcvto_ms; /* SO_RCVTIMEO in force (0: none set yet) */
    /* The first failure of a set_nowait (reported by the handle's next
     * call, or by cohort_store_flush). Guarded by mu. */
    cohort_status deferred_st;
    char deferred_msg[600];
} tcp;

/* Replies up to this size are read many at a time; larger ones get a buffer
 * of their own. Small, since a process may hold a thousand handles. */
#define RBUF_SIZE (16 * 1024)

static tcp *T(cohort_store *s) { return coh_store_priv(s); }

/* ---- dead connection ---- */

/* The first cause wins: later failures (the EPIPE of a send after the
 * server closed) would only hide why the connection went away. */
static void mark_dead_locked(tcp *t, cohort_status st, const char *msg)
{
    if (t->dead)
        return;
    t->dead = 1;
    t->dead_st = st;
    snprintf(t->dead_msg, sizeof t->dead_msg, "%s", msg);
    /* Wake a reader blocked in poll() and every thread on the cv. */
    shutdown(t->fd, SHUT_RDWR);
    pthread_cond_broadcast(&t->cv);
}

static void mark_dead(tcp *t, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void mark_dead(tcp *t, cohort_status st, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&t->mu);
    mark_dead_locked(t, st, msg);
    pthread_mutex_unlock(&t->mu);
}

/* ---- sending ---- */

/* Writes p[0..n) by the deadline, never blocking past it. Returns 0 when
 * all went, -2 on the deadline, -1 on an error (errno; EPIPE for a closed
 * peer); *sent says how much went either way. */
static int write_exact(int fd, const uint8_t *p, size_t n, uint64_t deadline, size_t *sent)
{
    size_t off = 0;
    int rc = 0;
    while (off < n) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int ms = coh_ms_left(deadline);
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            int pr = ms > 0 ? poll(&pf, 1, ms) : 0;
            if (pr > 0 || (pr < 0 && errno == EINTR))
                continue;
            rc = -2;
            break;
        }
        if (w == 0)
            errno = EPIPE;
        rc = -1;
        break;
    }
    if (sent)
        *sent = off;
    return rc;
}

/* Writes a whole frame by the deadline. A frame cut off midway leaves the
 * stream unusable, so that kills the connection; a frame not started at all
 * only times out. */
static cohort_status send_all(cohort_store *s, tcp *t, const uint8_t *p, size_t n,
                              uint64_t deadline, const char *what)
{
    size_t off = 0;
    cohort_status st = COHORT_OK;
    /* Another thread may be sending while a stalled server does not read:
     * waiting for it is bounded by this call's own deadline. */
    pthread_mutex_lock(&t->mu);
    while (t->sending) {
        if (coh_ms_left(deadline) == 0) {
            pthread_mutex_unlock(&t->mu);
            return coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                               "%s: timed out waiting to send to store %s (another thread's "
                               "send is stalled)",
                               what, t->addr);
        }
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&t->send_cv, &t->mu);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                                  .tv_nsec = (long)(deadline % 1000000000ull)};
            pthread_cond_timedwait(&t->send_cv, &t->mu, &ts);
        }
    }
    t->sending = 1;
    pthread_mutex_unlock(&t->mu);
    int r = write_exact(t->fd, p, n, deadline, &off);
    if (r == -2 && off == 0) {
        st = coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                         "%s: timed out sending to store %s (server not reading)", what, t->addr);
    } else if (r == -2) {
        mark_dead(t, COHORT_ERR_STORE,
                  "connection to store %s abandoned: timed out mid-frame while sending", t->addr);
        st = coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                         "%s: timed out sending to store %s; connection closed", what, t->addr);
    } else if (r < 0) {
        int e = errno;
        mark_dead(t, COHORT_ERR_STORE, "connection to store server %s lost: send: %s", t->addr,
                  strerror(e));
        pthread_mutex_lock(&t->mu);
        st = coh_err_set(coh_store_err(s), t->dead_st, "%s: %s", what, t->dead_msg);
        pthread_mutex_unlock(&t->mu);
    }
    pthread_mutex_lock(&t->mu);
    t->sending = 0;
    pthread_cond_signal(&t->send_cv);
    pthread_mutex_unlock(&t->mu);
    return st;
}

/* ---- receiving (reader only) ---- */

/* One blocking recv bounded by deadline (the socket is blocking once
 * connected; sends pass MSG_DONTWAIT). Waiting in recv itself rather than
 * in poll and then recv saves a system call per reply. SO_RCVTIMEO is only
 * changed when the deadline is sooner than the timeout in force by more
 * than 1/64 of the time left (2 ms at least), or when it is less than half
 * of the time left: calls with the handle's usual timeout set it once. So
 * a deadline is overshot by at most that slack; a recv that returns early
 * only makes the caller loop. -1 with EAGAIN: nothing arrived in time. */
static ssize_t recv_until(int fd, int *rcvto_ms, void *p, size_t n, uint64_t deadline)
{
    int ms = coh_ms_left(deadline);
    if (ms == 0)
        return recv(fd, p, n, MSG_DONTWAIT);
    long long slack = ms / 64 > 2 ? ms / 64 : 2; /* ms may be INT_MAX (no deadline) */
    if (*rcvto_ms <= 0 || *rcvto_ms > (long long)ms + slack || *rcvto_ms < ms / 2) {
        struct timeval tv = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) < 0) {
            /* cannot bound a blocking recv: wait in poll instead */
            struct pollfd pf = {.fd = fd, .events = POLLIN};
            if (poll(&pf, 1, ms) < 0)
                return -1;
            return recv(fd, p, n, MSG_DONTWAIT);
        }
        *rcvto_ms = ms;
    }
    return recv(fd, p, n, 0);
}

/* Hands one complete frame to its owner; takes payload (malloc'd). An
 * ERROR frame (id 0) is the server's last word on this connection (auth
 * revoked by a newer generation, shutdown, a protocol violation): it
 * becomes the sticky cause every pending and later call reports. */
static void deliver(tcp *t, const coh_frame_hdr *h, uint8_t *payload)
{
    if (h->op == COH_OP_ERROR) {
        coh_reply r;
        char err[128];
        if (coh_proto_decode_reply(h, payload, &r, err, sizeof err) == COHORT_OK &&
            r.status != COHORT_OK)
            mark_dead(t, r.status, "store server %s closed the connection: %.*s", t->addr,
                      (int)r.msg.n,
                      (const char *)r.msg.p);
        else
            mark_dead(t, COHORT_ERR_PROTOCOL, "store server %s sent a malformed ERROR frame",
                      t->addr);
        coh_free(payload);
        return;
    }
    if (!(h->op & COH_PROTO_REPLY)) {
        mark_dead(t, COHORT_ERR_PROTOCOL, "store server %s sent unexpected op 0x%02x", t->addr,
                  h->op);
        coh_free(payload);
        return;
    }
    if ((h->op & 0x7F) == COH_OP_SET_NOREPLY) {
        /* Sent only when a set_nowait failed: kept for the next call. */
        coh_reply r;
        char err[128];
        pthread_mutex_lock(&t->mu);
        if (coh_proto_decode_reply(h, payload, &r, err, sizeof err) != COHORT_OK) {
            pthread_mutex_unlock(&t->mu);
            coh_free(payload);
            mark_dead(t, COHORT_ERR_PROTOCOL, "store server %s sent a malformed reply: %s",
                      t->addr, err);
            return;
        }
        if (r.status != COHORT_OK && t->deferred_st == COHORT_OK) {
            t->deferred_st = r.status;
            snprintf(t->deferred_msg, sizeof t->deferred_msg, "store %s: %.*s", t->addr,
                     (int)r.msg.n, (const char *)r.msg.p);
        }
        pthread_mutex_unlock(&t->mu);
        coh_free(payload);
        return;
    }
    pthread_mutex_lock(&t->mu);
    for (tslot *sl = t->pending.next; sl != &t->pending; sl = sl->next)
        if (sl->id == h->id) {
            sl->h = *h;
            sl->payload = payload;
            sl->done = 1;
            sl->prev->next = sl->next;
            sl->next->prev = sl->prev;
            sl->next = sl->prev = sl;
            pthread_cond_broadcast(&t->cv);
            pthread_mutex_unlock(&t->mu);
            return;
        }
    pthread_mutex_unlock(&t->mu);
    /* A reply to a request that timed out and was cancelled. */
    coh_free(payload);
}

/* Parses the frames in rbuf; 0 ok, -1 connection failed. Small replies are
 * copied out of the shared buffer (it is reused at once); a reply larger
 * than what is buffered gets its own buffer and the rest is read straight
 * into it. The client trusts frame lengths from a server that passed the
 * handshake; an allocation failure still ends cleanly (NOMEM, dead). */
static int parse_rbuf(tcp *t)
{
    while (t->rlen - t->roff >= COH_PROTO_HDR) {
        const uint8_t *p = t->rbuf + t->roff;
        coh_frame_hdr h;
        int r = coh_proto_parse_hdr(p, COH_PROTO_HDR, &h);
        if (r != COH_HDR_OK) {
            mark_dead(t, COHORT_ERR_PROTOCOL,
                      r == COH_HDR_BAD_VERSION
                          ? "store server %s switched protocol version mid-stream"
                          : "store server %s sent bytes that are not a store frame",
                      t->addr);
            return -1;
        }
        size_t avail = t->rlen - t->roff - COH_PROTO_HDR;
        uint8_t *pl = coh_malloc(h.len ? h.len : 1);
        if (!pl) {
            mark_dead(t, COHORT_ERR_NOMEM,
                      "out of memory for a %u-byte reply from store %s; connection closed",
                      h.len, t->addr);
            return -1;
        }
        if (avail >= h.len) {
            memcpy(pl, p + COH_PROTO_HDR, h.len);
            t->roff += COH_PROTO_HDR + h.len;
            deliver(t, &h, pl);
            continue;
        }
        /* A frame longer than what is buffered: read the rest straight into
         * its own buffer. */
        memcpy(pl, p + COH_PROTO_HDR, avail);
        t->in_big = 1;
        t->big_h = h;
        t->big = pl;
        t->big_have = (uint32_t)avail;
        t->roff = t->rlen = 0;
        return 0;
    }
    if (t->roff == t->rlen) {
        t->roff = t->rlen = 0;
    } else if (t->roff > t->rcap / 2) {
        memmove(t->rbuf, t->rbuf + t->roff, t->rlen - t->roff);
        t->rlen -= t->roff;
        t->roff = 0;
    }
    return 0;
}

/* Waits for input until deadline and processes it: 1 progress, 0 deadline,
 * -1 connection failed. */
static int read_some(tcp *t, uint64_t deadline)
{
    uint8_t *dst;
    size_t cap;
    if (t->in_big) {
        dst = t->big + t->big_have;
        cap = t->big_h.len - t->big_have;
    } else {
        if (t->rlen == t->rcap && t->roff) {
            memmove(t->rbuf, t->rbuf + t->roff, t->rlen - t->roff);
            t->rlen -= t->roff;
            t->roff = 0;
        }
        dst = t->rbuf + t->rlen;
        cap = t->rcap - t->rlen;
    }
    ssize_t n = recv_until(t->fd, &t->rcvto_ms, dst, cap, deadline);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return coh_ms_left(deadline) ? 1 : 0;
    if (n < 0 && errno == EINTR)
        return 1;
    if (n <= 0) {
        if (n == 0)
            mark_dead(t, COHORT_ERR_STORE, "store server %s closed the connection", t->addr);
        else
            mark_dead(t, COHORT_ERR_STORE, "connection to store server %s lost: recv: %s",
                      t->addr, strerror(errno));
        return -1;
    }
    if (t->in_big) {
        t->big_have += (uint32_t)n;
        if (t->big_have == t->big_h.len) {
            t->in_big = 0;
            uint8_t *pl = t->big;
            t->big = NULL;
            deliver(t, &t->big_h, pl);
        }
        return 1;
    }
    t->rlen += (size_t)n;
    return parse_rbuf(t) < 0 ? -1 : 1;
}

/* ---- request / reply ---- */

static void slot_unlink(tslot *sl)
{
    sl->prev->next = sl->next;
    sl->next->prev = sl->prev;
    sl->next = sl->prev = sl;
}

/* Tells the server to drop the waiter of a request this client gave up on.
 * The error detail of the timed-out call is kept: a failed CANCEL must not
 * replace "timed out waiting for key X" with a send error. */
static void send_cancel(cohort_store *s, tcp *t, uint32_t target)
{
    uint8_t f[COH_PROTO_HDR + 4];
    coh_proto_put_hdr(f, COH_OP_CANCEL, 0, 4);
    coh_put_u32(f + COH_PROTO_HDR, target);
    /* Best effort within 100 ms; if even that fails the connection is
     * marked dead by send_all, which is the safe outcome. */
    coh_err keep = *coh_store_err(s);
    send_all(s, t, f, sizeof f, coh_deadline_ns(100), "cancel");
    *coh_store_err(s) = keep;
}

/* With mu held: the connection's failure, or a set_nowait's failure not yet
 * reported (reported once: this call is not sent and fails with it). */
static cohort_status take_failure_locked(cohort_store *s, tcp *t, const char *what)
{
    if (t->dead)
        return coh_err_set(coh_store_err(s), t->dead_st, "%s: %s", what, t->dead_msg);
    if (t->deferred_st != COHORT_OK) {
        cohort_status st = coh_err_set(coh_store_err(s), t->deferred_st,
                                       "%s: not done: an earlier set_nowait failed: %s", what,
                                       t->deferred_msg);
        t->deferred_st = COHORT_OK;
        return st;
    }
    return COHORT_OK;
}

static uint32_t new_id_locked(tcp *t)
{
    if (++t->next_id == 0)
        t->next_id = 1; /* id 0 is the handshake's */
    return t->next_id;
}

/* A built request can go out: it was fully allocated and fits the
 * server's frame limit (from the AUTH reply). */
static cohort_status frame_ok(cohort_store *s, tcp *t, const coh_wr *w, const char *what)
{
    if (w->oom)
        return coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s: out of memory", what);
    if (w->len - COH_PROTO_HDR > t->max_frame)
        return coh_err_set(coh_store_err(s), COHORT_ERR_TOO_LARGE,
                           "%s: request of %zu bytes is over store %s's frame limit (%u bytes)",
                           what, w->len - COH_PROTO_HDR, t->addr, t->max_frame);
    return COHORT_OK;
}

/* Sends the frame in w (header already written; the id is patched in) and
 * waits for its reply until deadline. On COHORT_OK *rep is the decoded
 * reply (status OK) and *payload must be freed by the caller. */
cohort_status coh_tconn_call(cohort_store *s, coh_wr *w, uint64_t deadline, const char *what,
                             coh_reply *rep, uint8_t **payload)
{
    tcp *t = T(s);
    *payload = NULL;
    cohort_status fst = frame_ok(s, t, w, what);
    if (fst != COHORT_OK)
        return fst;
    tslot sl;
    memset(&sl, 0, sizeof sl);
    pthread_mutex_lock(&t->mu);
    cohort_status pre = take_failure_locked(s, t, what);
    if (pre != COHORT_OK) {
        pthread_mutex_unlock(&t->mu);
        return pre;
    }
    sl.id = new_id_locked(t);
    sl.next = &t->pending;
    sl.prev = t->pending.prev;
    t->pending.prev->next = &sl;
    t->pending.prev = &sl;
    pthread_mutex_unlock(&t->mu);

    coh_put_u32(w->p + 4, sl.id);
    cohort_status st = send_all(s, t, w->p, w->len, deadline, what);
    if (st != COHORT_OK) {
        pthread_mutex_lock(&t->mu);
        if (!sl.done)
            slot_unlink(&sl);
        pthread_mutex_unlock(&t->mu);
        coh_free(sl.payload);
        return st;
    }

    int timed_out = 0;
    uint64_t t_sent = coh_now_ns();
    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (sl.done)
            break;
        if (t->dead) {
            slot_unlink(&sl);
            st = coh_err_set(coh_store_err(s), t->dead_st, "%s: %s", what, t->dead_msg);
            break;
        }
        if (coh_ms_left(deadline) == 0) {
            slot_unlink(&sl);
            timed_out = 1;
            break;
        }
        if (!t->reader) {
            t->reader = 1;
            pthread_mutex_unlock(&t->mu);
            read_some(t, deadline);
            pthread_mutex_lock(&t->mu);
            t->reader = 0;
            /* Another waiter may need to take over reading. */
            pthread_cond_broadcast(&t->cv);
            continue;
        }
        if (deadline == UINT64_MAX) {
            pthread_cond_wait(&t->cv, &t->mu);
        } else {
            struct timespec ts = {.tv_sec = (time_t)(deadline / 1000000000ull),
                                  .tv_nsec = (long)(deadline % 1000000000ull)};
            pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        }
    }
    pthread_mutex_unlock(&t->mu);
    if (timed_out) {
        send_cancel(s, t, sl.id);
        return coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                           "%s: timed out after %d ms (store %s)", what,
                           (int)((coh_now_ns() - t_sent) / 1000000ull), t->addr);
    }
    if (st != COHORT_OK)
        return st;
    char err[256];
    st = coh_proto_decode_reply(&sl.h, sl.payload, rep, err, sizeof err);
    if (st != COHORT_OK) {
        coh_free(sl.payload);
        return coh_err_set(coh_store_err(s), st, "%s: store %s: %s", what, t->addr, err);
    }
    if (rep->op != (w->p[3] & 0x7F)) {
        coh_free(sl.payload);
        return coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL,
                           "%s: store %s answered request %u with a reply to op 0x%02x", what,
                           t->addr, sl.id, rep->op);
    }
    if (rep->status != COHORT_OK) {
        st = coh_err_set(coh_store_err(s), rep->status, "%s: store %s: %.*s", what, t->addr,
                         (int)rep->msg.n, (const char *)rep->msg.p);
        coh_free(sl.payload);
        return st;
    }
    *payload = sl.payload;
    return COHORT_OK;
}

/* ---- connect and handshake ---- */

/* Splits "tcp://host:port", "host:port", "[v6]:port". A bare IPv6 address
 * without brackets is refused: its last colon is ambiguous. */
static cohort_status parse_addr(cohort_store *s, const char *addr, char *host, size_t hl,
                                char *port, size_t pl)
{
    coh_addr a;
    if (coh_addr_split(addr, &a) != 0 || (a.scheme[0] && strcmp(a.scheme, "tcp") != 0) ||
        a.rest || a.bare_v6 || coh_addr_port(&a, 1) < 0 || strlen(a.host) >= hl ||
        strlen(a.port) >= pl)
        goto bad;
    memcpy(host, a.host, strlen(a.host) + 1);
    memcpy(port, a.port, strlen(a.port) + 1);
    return COHORT_OK;
bad:
    return coh_err_set(coh_store_err(s), COHORT_ERR_INVALID,
                       "store address '%s' is not host:port, [v6]:port or tcp://host:port", addr);
}

/* Reads exactly n bytes by deadline: 0 ok, -1 EOF/error (errno; 0 = EOF),
 * -2 deadline. For the handshake only, before any reader exists. */
static int read_exact(tcp *t, uint8_t *p, size_t n, uint64_t deadline)
{
    size_t off = 0;
    while (off < n) {
        ssize_t r = recv_until(t->fd, &t->rcvto_ms, p + off, n - off, deadline);
        if (r > 0) {
            off += (size_t)r;
            continue;
        }
        if (r == 0) {
            errno = 0;
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -1;
        if (coh_ms_left(deadline) == 0)
            return -2;
    }
    return 0;
}

/* Reads one handshake frame (at most 1 KiB). COHORT_OK, or a status for
 * which retrying cannot help (PROTOCOL), or COHORT_ERR_STORE (retryable:
 * the connection dropped) with detail in err. */
static cohort_status read_frame(tcp *t, uint64_t deadline, coh_frame_hdr *h, uint8_t *body,
                                size_t cap, int *hdr_rc, char *err, size_t errlen)
{
    uint8_t hb[COH_PROTO_HDR];
    int r = read_exact(t, hb, sizeof hb, deadline);
    if (r == -2) {
        snprintf(err, errlen, "no handshake reply");
        return COHORT_ERR_TIMEOUT;
    }
    if (r < 0) {
        snprintf(err, errlen, "connection closed during handshake%s%s", errno ? ": " : "",
                 errno ? strerror(errno) : "");
        return COHORT_ERR_STORE;
    }
    *hdr_rc = coh_proto_parse_hdr(hb, sizeof hb, h);
    if (*hdr_rc == COH_HDR_BAD_MAGIC) {
        snprintf(err, errlen, "not a cohort store server (it sent %02x %02x %02x %02x)", hb[0],
                 hb[1], hb[2], hb[3]);
        return COHORT_ERR_PROTOCOL;
    }
    if (h->len > cap) {
        snprintf(err, errlen, "handshake frame of %u bytes (max %zu)", h->len, cap);
        return COHORT_ERR_PROTOCOL;
    }
    r = read_exact(t, body, h->len, deadline);
    if (r == -2) {
        snprintf(err, errlen, "handshake frame cut off");
        return COHORT_ERR_TIMEOUT;
    }
    if (r < 0) {
        snprintf(err, errlen, "connection closed during handshake");
        return COHORT_ERR_STORE;
    }
    return COHORT_OK;
}

/* HELLO -> AUTH -> AUTH reply, each read with the connect deadline. The
 * token never leaves the process: only the MAC over the server's nonce
 * does, and the copy of it in the frame is wiped after sending. */
static cohort_status handshake(cohort_store *s, tcp *t, const char *job, const char *token,
                               uint32_t gen, uint64_t deadline, char *err, size_t errlen)
{
    coh_frame_hdr h;
    uint8_t body[1024];
    int hrc = 0;
    cohort_status st = read_frame(t, deadline, &h, body, sizeof body, &hrc, err, errlen);
    if (st)
        return st;
    size_t jl = strlen(job);
    uint8_t f[COH_PROTO_HDR + 4 + 4 + 255 + COH_PROTO_MAC];
    size_t fl = COH_PROTO_HDR + 4 + 4 + jl + COH_PROTO_MAC;
    coh_put_u32(f + COH_PROTO_HDR, gen);
    coh_put_u32(f + COH_PROTO_HDR + 4, (uint32_t)jl);
    memcpy(f + COH_PROTO_HDR + 8, job, jl);
    coh_proto_put_hdr(f, COH_OP_AUTH, 0, (uint32_t)(fl - COH_PROTO_HDR));
    if (hrc == COH_HDR_BAD_VERSION) {
        /* Still send our AUTH (MAC zeroed): the server then logs which
         * version this client speaks; both sides report the mismatch. */
        memset(f + fl - COH_PROTO_MAC, 0, COH_PROTO_MAC);
        write_exact(t->fd, f, fl, deadline, NULL);
        snprintf(err, errlen,
                 "it speaks store protocol version %u, this client version %u (upgrade the "
                 "older side)",
                 h.version, COH_PROTO_VERSION);
        return COHORT_ERR_PROTOCOL;
    }
    if (h.op == COH_OP_ERROR) {
        coh_reply r;
        char e2[128];
        if (coh_proto_decode_reply(&h, body, &r, e2, sizeof e2) == COHORT_OK && r.status) {
            snprintf(err, errlen, "refused the connection: %.*s", (int)r.msg.n,
                     (const char *)r.msg.p);
            return r.status;
        }
        snprintf(err, errlen, "sent a malformed ERROR frame");
        return COHORT_ERR_PROTOCOL;
    }
    if (h.op != COH_OP_HELLO || h.len != COH_PROTO_NONCE) {
        snprintf(err, errlen, "expected HELLO, got op 0x%02x with %u bytes", h.op, h.len);
        return COHORT_ERR_PROTOCOL;
    }
    coh_proto_auth_mac(f + fl - COH_PROTO_MAC, token, body, (const uint8_t *)job, jl, gen);
    int w = write_exact(t->fd, f, fl, deadline, NULL);
    sodium_memzero(f + fl - COH_PROTO_MAC, COH_PROTO_MAC);
    if (w < 0) {
        snprintf(err, errlen, "%s during handshake", w == -2 ? "timed out" : "connection lost");
        return w == -2 ? COHORT_ERR_TIMEOUT : COHORT_ERR_STORE;
    }
    st = read_frame(t, deadline, &h, body, sizeof body, &hrc, err, errlen);
    if (st)
        return st;
    if (hrc != COH_HDR_OK || (h.op != (COH_OP_AUTH | COH_PROTO_REPLY) && h.op != COH_OP_ERROR)) {
        snprintf(err, errlen, "unexpected handshake reply (op 0x%02x, version %u)", h.op,
                 h.version);
        return COHORT_ERR_PROTOCOL;
    }
    coh_reply r;
    char e2[128];
    if (coh_proto_decode_reply(&h, body, &r, e2, sizeof e2) != COHORT_OK) {
        snprintf(err, errlen, "malformed AUTH reply: %s", e2);
        return COHORT_ERR_PROTOCOL;
    }
    if (r.status != COHORT_OK) {
        snprintf(err, errlen, "refused job '%s' (generation %u): %.*s", job, gen, (int)r.msg.n,
                 (const char *)r.msg.p);
        return r.status;
    }
    t->max_key = coh_rd_u32(&r.body);
    t->max_value = coh_rd_u32(&r.body);
    t->max_frame = coh_rd_u32(&r.body);
    t->job_gen = coh_rd_u32(&r.body);
    if (r.body.err) {
        snprintf(err, errlen, "AUTH reply too short");
        return COHORT_ERR_PROTOCOL;
    }
    (void)s;
    return COHORT_OK;
}

/* One connect attempt to one address: 0 connected, else errno. Non-blocking
 * so that an unroutable address cannot outlast the caller's deadline. */
static int try_connect(const struct addrinfo *a, uint64_t deadline, int *fdp)
{
    int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0)
        return errno;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            int e = errno;
            close(fd);
            return e;
        }
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int r;
        do
            r = poll(&pf, 1, coh_ms_left(deadline));
        while (r < 0 && errno == EINTR);
        int e = 0;
        socklen_t el = sizeof e;
        if (r == 0)
            e = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0)
            e = errno;
        if (e) {
            close(fd);
            return e;
        }
    }
    /* Blocking from here on: replies are awaited in recv (SO_RCVTIMEO
     * bounds it); every send passes MSG_DONTWAIT. */
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        return e;
    }
    *fdp = fd;
    return 0;
}

static void tcp_free(tcp *t)
{
    if (t->fd >= 0)
        close(t->fd);
    coh_free(t->rbuf);
    coh_free(t->big);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->send_cv);
    pthread_cond_destroy(&t->cv);
    coh_free(t);
}

/* Connect with retry: refused / unreachable / dropped-during-handshake
 * attempts are retried with backoff until the deadline (the server may not
 * be up yet: rank 0 starts it while the others already connect). A server
 * that answers and refuses (auth, version, limits) is final at once. The
 * first attempt is immediate and costs no sleep. */
cohort_status coh_tconn_connect(cohort_store *s, const char *addr, const char *job,
                                const char *token, uint32_t gen, int timeout_ms)
{
    char host[256], port[16];
    cohort_status st = parse_addr(s, addr, host, sizeof host, port, sizeof port);
    if (st)
        return st;
    if (sodium_init() < 0)
        return coh_err_set(coh_store_err(s), COHORT_ERR_SYSTEM, "libsodium init failed");
    tcp *t = coh_calloc(1, sizeof *t);
    if (!t || !(t->rbuf = coh_malloc(RBUF_SIZE))) {
        coh_free(t);
        return coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "store connect to %s", addr);
    }
    t->fd = -1;
    t->rcap = RBUF_SIZE;
    t->pending.next = t->pending.prev = &t->pending;
    pthread_mutex_init(&t->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* deadlines are coh_now_ns() */
    pthread_cond_init(&t->cv, &ca);
    pthread_cond_init(&t->send_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (host[0] && strchr(host, ':'))
        snprintf(t->addr, sizeof t->addr, "[%s]:%s", host, port);
    else
        snprintf(t->addr, sizeof t->addr, "%s:%s", host, port);

    uint64_t deadline = coh_deadline_ns(timeout_ms);
    uint64_t t0 = coh_now_ns();
    /* Backoff between refused attempts: 2 ms doubling to 500 ms, each
     * drawn from [b/2, b] so that a thousand ranks do not retry in step. */
    uint32_t backoff_us = 2000;
    int attempts = 0;
    char last[512] = "no attempt made";
    cohort_status final = COHORT_OK;
    for (;;) {
        attempts++;
        struct addrinfo *res = NULL;
        int gr = coh_addr_resolve(host, port, COH_RESOLVE_NUMSERV, &res);
        if (gr == EAI_NONAME || gr == EAI_SERVICE || gr == EAI_FAMILY) {
            final = coh_err_set(coh_store_err(s), COHORT_ERR_INVALID,
                                "store address %s: cannot resolve '%s': %s", addr, host,
                                coh_addr_strerror(gr));
            break;
        }
        if (gr != 0) {
            snprintf(last, sizeof last, "getaddrinfo: %s", coh_addr_strerror(gr));
        } else {
            for (struct addrinfo *a = res; a && t->fd < 0; a = a->ai_next) {
                int fd = -1;
                int e = try_connect(a, deadline, &fd);
                if (e) {
                    snprintf(last, sizeof last, "connect: %s", strerror(e));
                    continue;
                }
                t->fd = fd;
                char err[512];
                st = handshake(s, t, job, token, gen, deadline, err, sizeof err);
                if (st == COHORT_OK)
                    break;
                close(t->fd);
                t->fd = -1;
                snprintf(last, sizeof last, "%s", err);
                if (st != COHORT_ERR_STORE && st != COHORT_ERR_TIMEOUT) {
                    /* Refused by a live server (auth, version, limits): final. */
                    final = coh_err_set(coh_store_err(s), st, "store %s %s", t->addr, err);
                    break;
                }
            }
            coh_addr_freeinfo(res);
        }
        if (t->fd >= 0 || final != COHORT_OK)
            break;
        int left = coh_ms_left(deadline);
        if (left == 0) {
            final = coh_err_set(coh_store_err(s), COHORT_ERR_STORE,
                                "could not connect to store %s within %d ms (%d attempts); last "
                                "error: %s",
                                t->addr, (int)((coh_now_ns() - t0) / 1000000ull), attempts,
                                last);
            break;
        }
        uint32_t us = backoff_us / 2 + randombytes_uniform(backoff_us / 2 + 1);
        if ((uint64_t)us > (uint64_t)left * 1000)
            us = (uint32_t)left * 1000;
        struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        backoff_us = backoff_us >= 250000 ? 500000 : backoff_us * 2;
    }
    if (final != COHORT_OK) {
        tcp_free(t);
        return final;
    }
    coh_store_set_priv(s, t);
    return COHORT_OK;
}

/* Called when the last handle of the connection is closed: no thread can
 * be inside an op on it any more. */
void coh_tconn_close(cohort_store *s)
{
    tcp *t = T(s);
    if (!t)
        return;
    coh_store_set_priv(s, NULL);
    tcp_free(t);
}

/* ---- for the operations (tcp_ops.c) ---- */

/* The server's limits arrive in the AUTH reply, so oversized keys and
 * values are refused here, before a byte is sent, with the same message the
 * server would give. */
cohort_status coh_tconn_check_key(cohort_store *s, const char *what, size_t kl)
{
    tcp *t = T(s);
    if (kl > t->max_key)
        return coh_err_set(coh_store_err(s), COHORT_ERR_TOO_LARGE,
                           "%s: key of %zu bytes is over store %s's max_key (%u bytes)", what, kl,
                           t->addr, t->max_key);
    return COHORT_OK;
}

cohort_status coh_tconn_check_val(cohort_store *s, const char *what, size_t vl)
{
    tcp *t = T(s);
    if (vl > t->max_value)
        return coh_err_set(coh_store_err(s), COHORT_ERR_TOO_LARGE,
                           "%s: value of %zu bytes is over store %s's max_value (%u bytes)", what,
                           vl, t->addr, t->max_value);
    return COHORT_OK;
}

/* A request that gets no reply when it succeeds (SET_NOREPLY): returns once
 * the frame is in the socket; a failure reply is kept by the reader for the
 * next call (take_failure_locked). */
cohort_status coh_tconn_send(cohort_store *s, coh_wr *w, uint64_t deadline, const char *what)
{
    tcp *t = T(s);
    cohort_status st = frame_ok(s, t, w, what);
    if (st != COHORT_OK)
        return st;
    pthread_mutex_lock(&t->mu);
    st = take_failure_locked(s, t, what);
    uint32_t id = st == COHORT_OK ? new_id_locked(t) : 0;
    pthread_mutex_unlock(&t->mu);
    if (st == COHORT_OK) {
        coh_put_u32(w->p + 4, id);
        st = send_all(s, t, w->p, w->len, deadline, what);
    }
    return st;
}

cohort_status coh_tconn_take_failure(cohort_store *s, const char *what)
{
    tcp *t = T(s);
    pthread_mutex_lock(&t->mu);
    cohort_status st = take_failure_locked(s, t, what);
    pthread_mutex_unlock(&t->mu);
    return st;
}
