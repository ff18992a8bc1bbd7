/*
 * net.c - tcp transport: what a group does with its established
 * connections besides moving data (xfer.c): wake-ups, abort frames, BYE,
 * teardown, and the ops table that attaches it to its group. Connection
 * setup is hs.c.
 */
#include <pthread.h>
#include <sched.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "transport/tcp/net.h"

/* ---- wake, abort, teardown ---- */

void coh_net_wake(coh_net *n)
{
    if (!n || n->efd < 0)
        return;
    uint64_t one = 1;
    ssize_t w = write(n->efd, &one, sizeof one);
    (void)w; /* EAGAIN: the counter is already non-zero, the waiter will wake */
}

/* Writes one frame (header + payload) without blocking if the stream is at
 * a message boundary. A partial write leaves the stream mid-frame: marked
 * broken so nothing else is ever written on it. Called with c->wmu held. */
static void frame_locked(tcp_conn *c, const coh_hdr *h, const void *p, size_t len)
{
    if (!c->open || c->tx_mid || c->tx_broken)
        return;
    struct iovec iov[2] = {{(void *)h, sizeof *h}, {(void *)p, len}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0 && (size_t)w < sizeof *h + len)
        c->tx_broken = 1;
}

static int lock_briefly(pthread_mutex_t *mu, uint64_t until_ns)
{
    /* The data path holds wmu only around one non-blocking syscall. */
    while (pthread_mutex_trylock(mu) != 0) {
        if (coh_now_ns() >= until_ns)
            return 0;
        sched_yield();
    }
    return 1;
}

void coh_net_send_abort(coh_net *n, cohort_status st, const char *reason)
{
    if (!n || !n->c)
        return;
    const char *r = reason ? reason : "";
    size_t len = strlen(r);
    if (len > COH_ABORT_MAX_LEN)
        len = COH_ABORT_MAX_LEN;
    coh_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = COH_HDR_MAGIC;
    h.kind = COH_MSG_ABORT;
    h.group = n->me.group;
    h.gen = n->me.gen;
    h.tag = (int32_t)st;
    h.root = -1;
    h.src = n->rank;
    h.len = len;
    /* the collective call that failed, for a peer that makes it late
     * (seq is unused in an abort frame otherwise: 0 before) */
    h.seq = coh_group_failed_seq(n->g);
    uint64_t until = coh_now_ns() + 5000000ull; /* a few ms, all peers together */
    for (int j = 0; j < n->size; j++) {
        if (j == n->rank)
            continue;
        tcp_conn *c = &n->c[j];
        if (!lock_briefly(&c->wmu, until))
            continue;
        frame_locked(c, &h, r, len);
        pthread_mutex_unlock(&c->wmu);
    }
}

void tcp_send_bye(coh_net *n)
{
    coh_hdr bye;
    memset(&bye, 0, sizeof bye);
    bye.magic = COH_HDR_MAGIC;
    bye.kind = COH_MSG_BYE;
    bye.group = n->me.group;
    bye.gen = n->me.gen;
    bye.root = -1;
    bye.src = n->rank;
    for (int j = 0; j < n->size; j++) {
        tcp_conn *c = &n->c[j];
        if (c->fd < 0)
            continue;
        pthread_mutex_lock(&c->wmu);
        frame_locked(c, &bye, NULL, 0);
        c->open = 0; /* nothing may follow a BYE, abort frames included */
        pthread_mutex_unlock(&c->wmu);
    }
}

/* Order matters for the peers: abort reason (if failed), BYE, FIN after
 * the queued data, drain, close - so a peer still reading gets our last
 * message and then a clean end instead of a reset. */
void coh_net_destroy(coh_net *n)
{
    if (!n)
        return;
    if (n->g)
        coh_transport_detach(n->g, n);
    if (n->c) {
        /* Leaving a failed group: say why before the goodbye, so a peer
         * still waiting reports the cause rather than "rank left". */
        int p = n->g ? coh_group_poisoned(n->g) : 0;
        if (p) {
            char why[COH_ERRLEN];
            pthread_mutex_lock(&n->g->err_mu);
            snprintf(why, sizeof why, "%s", n->g->err.msg);
            pthread_mutex_unlock(&n->g->err_mu);
            coh_net_send_abort(n, (cohort_status)p, why);
        }
        tcp_send_bye(n); /* no-op where coh_net_close_check sent it */
        for (int j = 0; j < n->size; j++) {
            tcp_conn *c = &n->c[j];
            if (c->fd >= 0) {
                /* FIN after the queued data; then drain what the peer sent so
                 * close() does not turn into a RST that could destroy our own
                 * unsent tail (the peer may still be reading it). */
                shutdown(c->fd, SHUT_WR);
                char sink[4096];
                for (int k = 0; k < 64; k++)
                    if (recv(c->fd, sink, sizeof sink, MSG_DONTWAIT) <= 0)
                        break;
                close(c->fd);
                c->fd = -1;
            }
            tcp_stash_free(n, c);
            coh_free(c->rbuf);
            pthread_mutex_destroy(&c->wmu);
        }
    }
    for (int i = 0; i < n->nhs; i++)
        if (n->hs[i].fd >= 0)
            close(n->hs[i].fd);
    if (n->lfd >= 0)
        close(n->lfd);
    if (n->efd >= 0)
        close(n->efd);
    sodium_memzero(n->key, sizeof n->key);
    coh_free(n->c);
    coh_free(n->hs);
    coh_free(n->pfd);
    coh_free(n->pmap);
    coh_free(n->scratch);
    coh_free(n->dpeers);
    coh_free(n);
}

/* ---- the ops table (transport.h) ---- */

static void tp_abort(void *t, cohort_status st, const char *reason, int from_peer)
{
    if (!from_peer) /* a peer's abort is not sent back out */
        coh_net_send_abort(t, st, reason);
}
static void tp_wake(void *t) { coh_net_wake(t); }
static cohort_status tp_close_check(void *t, int timeout_ms)
{
    return coh_net_close_check(t, timeout_ms);
}
static void tp_destroy(void *t) { coh_net_destroy(t); }

const coh_transport_ops coh_tcp_transport = {
    .hook = {.name = "tcp", .order = COH_HOOK_TCP, .abort = tp_abort, .wake = tp_wake},
    .close_check = tp_close_check,
    .destroy = tp_destroy,
};
