/*
 * xfer.c - tcp transport data path: batches of sends and receives over
 * non-blocking sockets, header-first contract checks, unexpected-message
 * stash, abort/bye frames, peer-death detection.
 *
 * Matching (per connection, the TCP stream gives FIFO order):
 *   - COLL: an arriving COLL header is matched with the earliest posted,
 *     unmatched COLL receive from that peer; the contract is compared on the
 *     header before one payload byte is written to the user buffer.
 *   - P2P: matched by tag with the earliest posted P2P receive of that tag
 *     (same tag FIFO, different tags may overtake, as in MPI).
 *   - No match: the message is stashed (malloc'd, bounded by
 *     COHORT_MAX_UNEXPECTED). When the budget is spent and no receive from
 *     that peer is waiting, the connection is "parked": its header is kept,
 *     the payload stays in the kernel, and the sender is flow-controlled
 *     until a receive is posted. When a receive IS waiting behind it, the
 *     budget overflow is an error (TOO_LARGE), never an OOM.
 *
 * Progress: a pass tries every pending send (sendmsg header+payload) and
 * reads the connections the batch waits on; no progress -> spin for
 * spin_ns with the same non-blocking attempts (small-message latency), then
 * poll() every connection of the group (EOF, reset and abort frames are
 * seen even on connections the batch does not use), the wake-up eventfd and
 * the listener, for at most COH_WAIT_SLICE_MS, and run coh_wait_check.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "contract/contract.h"
#include "trace/trace.h"
#include "transport/tcp/net.h"

enum { OP_PENDING = 0, OP_ACTIVE = 1, OP_DONE = 2 };

/* Payload remainders at least this large are read straight into their
 * destination; smaller ones go through rbuf with whatever follows them. */
#define DIRECT_MIN (16 * 1024)

#define HDR_LEN sizeof(coh_hdr)

/* g->park_ahead: messages at least this large are parked, not stashed. */
#define PARK_AHEAD_MIN (64 * 1024)

/* What a stashed message costs against COHORT_MAX_UNEXPECTED: its payload
 * and its bookkeeping (header, link). Counting the payload alone let a peer
 * that sends empty messages ahead (a barrier's, or a zero-byte send's) grow
 * the stash without limit: 7 million of them, ~550 MB, in 1.5 s under a
 * 256 KiB budget (test_tcp_data empty_message_flood_bounded). The shm
 * stash counts the same way (COHORT_SHM_P2P_STASH_BYTES). */
#define STASH_COST(len) (sizeof(tcp_stash) + (size_t)(len))

/* ---- failures ---- */

/* The contract module builds the message (both sides, call sites) and
 * fails the group with COHORT_ERR_CONTRACT. */
static cohort_status mismatch(coh_net *n, int peer, const coh_hdr *exp, const coh_hdr *got)
{
    return coh_tp_mismatch(n->g, n->call, peer, exp, got);
}

static cohort_status lost(coh_net *n, tcp_conn *c, int err, const char *doing)
{
    char how[200];
    if (n->closing && !c->bye)
        snprintf(how, sizeof how,
                 "it closed its connection without the goodbye of cohort_finalize (it exited, "
                 "or was killed, before finalizing)");
    else if (c->bye)
        snprintf(how, sizeof how,
                 "it closed its connection (left the group) while this rank still %s it", doing);
    else if (err)
        snprintf(how, sizeof how, "connection %s: %s (errno %d)",
                 err == ECONNRESET ? "reset" : "failed", strerror(err), err);
    else if (c->rx_state == RX_HDR && c->rh_got)
        snprintf(how, sizeof how,
                 "connection closed by peer in the middle of a message (%zu of its %zu header "
                 "bytes arrived)",
                 c->rh_got, HDR_LEN);
    else if (c->rx_state != RX_HDR && c->rh.kind == COH_MSG_ABORT)
        snprintf(how, sizeof how,
                 "connection closed by peer in the middle of a message (an abort frame: %zu of "
                 "%llu bytes arrived)",
                 c->rx_state == RX_BODY ? c->rdone : (size_t)0, (unsigned long long)c->rh.len);
    else if (c->rx_state != RX_HDR)
        /* The header arrived (and was checked): name the message it
         * announced and how much of its body came (a parked one: none read). */
        snprintf(how, sizeof how,
                 "connection closed by peer in the middle of a message (%s #%llu step %u: %zu of "
                 "%llu bytes arrived)",
                 coh_coll_name(c->rh.coll), (unsigned long long)c->rh.seq, c->rh.step,
                 c->rx_state == RX_BODY ? c->rdone : (size_t)0, (unsigned long long)c->rh.len);
    else
        snprintf(how, sizeof how, "connection closed by peer");
    return coh_tp_peer_lost(n->g, c->peer, how);
}

/* What this batch still waits for from or on each peer, for the timeout
 * error (w->note): a peer that announced a message and then stopped (its
 * header arrived, its body does not) reads differently from one that sent
 * nothing. Built only when the wait has run out. */
static void wait_note(coh_net *n, coh_wait *w)
{
    size_t pos = 0, cap = sizeof w->note;
    w->note[0] = 0;
    for (int i = 0; i < n->ndpeers && pos < cap; i++) {
        const tcp_conn *c = &n->c[n->dpeers[i]];
        int k = 0;
        const char *sep = pos ? "; " : "";
        if (c->want > 0 && c->rx_state == RX_BODY && c->rx_dst == RXD_OP)
            k = snprintf(w->note + pos, cap - pos,
                         "%swaiting for rank %d: it announced %s #%llu step %u, %zu of %llu "
                         "bytes arrived",
                         sep, c->peer, coh_coll_name(c->rh.coll), (unsigned long long)c->rh.seq,
                         c->rh.step, c->rdone, (unsigned long long)c->rh.len);
        else if (c->want > 0 && c->rx_state == RX_HDR && c->rh_got)
            k = snprintf(w->note + pos, cap - pos,
                         "%swaiting for rank %d: %zu of a message header's %zu bytes arrived", sep,
                         c->peer, c->rh_got, HDR_LEN);
        else if (c->want > 0)
            k = snprintf(w->note + pos, cap - pos, "%swaiting for rank %d: nothing arrived", sep,
                         c->peer);
        else if (c->sends > 0)
            k = snprintf(w->note + pos, cap - pos,
                         "%ssending to rank %d: it does not read (socket full)", sep, c->peer);
        if (k > 0)
            pos += (size_t)k;
    }
    if (pos >= cap)
        w->note[cap - 1] = 0;
}

/* ---- receive side ---- */

static coh_xfer *find_recv(coh_net *n, int peer, const coh_hdr *h)
{
    for (int i = 0; i < n->nops; i++) {
        coh_xfer *op = &n->ops[i];
        if (!op->is_send && op->state == OP_PENDING && op->peer == peer &&
            op->hdr.kind == h->kind && (h->kind != COH_MSG_P2P || op->hdr.tag == h->tag))
            return op;
    }
    return NULL;
}

/* A collective message of a call this rank has finished (got->seq below
 * the call it is in): a field that differs is named at that call. A rank
 * that took itself for a broadcast's root sends and goes on, and the true
 * root's message reaches it in its next call - "root differs" at #N, not
 * "sequence number differs" at #N+1 (test_coll_barlead, seen once under
 * ASan). The contract reads the recorder (coh_contract_finished); with the
 * fields equal, or the call no longer recorded: 0, and the caller reports
 * the sequence numbers. */
static int past_mismatch(coh_net *n, const coh_hdr *got, cohort_status *st)
{
    coh_call pc;
    coh_hdr e;
    if (!coh_contract_finished(n->g, got, &pc, &e))
        return 0;
    *st = coh_tp_mismatch(n->g, &pc, got->src, &e, got);
    return 1;
}

/* The contract check of a matched message, on its header only. */
static cohort_status check_hdr(coh_net *n, coh_xfer *op, const coh_hdr *got)
{
    coh_hdr e = op->hdr;
    int f;
    if (!n->g->check_contract) {
        /* Contract checks off (benchmarks): the size still must fit. */
        f = got->len == e.len ? COH_FIELD_NONE : COH_FIELD_STEP;
    } else {
        if (got->kind == COH_MSG_P2P) {
            /* Matched by tag; sender and receiver number their own p2p calls
             * and name each other as peer: only dtype/count/size compare. */
            e.seq = got->seq;
            e.coll = got->coll;
            e.root = got->root;
            e.step = got->step;
        }
        f = coh_hdr_match(&e, got);
    }
    cohort_status st;
    if (f == COH_FIELD_SEQ && got->seq < e.seq && past_mismatch(n, got, &st))
        return st;
    return f == COH_FIELD_NONE ? COHORT_OK : mismatch(n, op->peer, &e, got);
}

/* A message nobody waits for: legitimate only if it belongs to this group
 * and generation and is not older than what this rank already expects. */
static cohort_status check_unexpected(coh_net *n, const coh_hdr *h)
{
    int f = COH_FIELD_NONE;
    if (h->group != n->me.group)
        f = COH_FIELD_GROUP;
    else if (h->gen != n->me.gen)
        f = COH_FIELD_GENERATION;
    else if (h->kind == COH_MSG_COLL && h->seq < n->coll_floor && n->call) {
        f = COH_FIELD_SEQ; /* (closing: coh_net_close_check judges leftovers itself) */
        cohort_status st;
        if (past_mismatch(n, h, &st))
            return st;
    }
    if (f == COH_FIELD_NONE && n->call && h->kind == COH_MSG_COLL && h->seq == n->call->seq &&
        n->call->coll != COH_COLL_SEND && n->call->coll != COH_COLL_RECV) {
        /* For the call running now, though not for this step or from this
         * peer (e.g. from a rank that believes it is the root): its
         * fingerprint can be compared at once. */
        coh_hdr e;
        coh_hdr_from_call(&e, n->g, n->call, h->kind, h->step, h->len);
        int cf = coh_hdr_match(&e, h);
        if (cf != COH_FIELD_NONE && cf != COH_FIELD_STEP)
            return mismatch(n, h->src, &e, h);
    }
    if (f == COH_FIELD_NONE)
        return COHORT_OK;
    coh_hdr e = *h;
    if (n->call)
        coh_hdr_from_call(&e, n->g, n->call, h->kind, h->step, h->len);
    e.group = n->me.group;
    e.gen = n->me.gen;
    if (h->kind == COH_MSG_COLL)
        e.seq = n->coll_floor;
    return mismatch(n, h->src, &e, h);
}

static void op_done(coh_net *n, tcp_conn *c, coh_xfer *op)
{
    op->state = OP_DONE;
    op->done = op->len;
    c->want--;
    n->left--;
}

/* Header complete: decide where the payload goes. */
static cohort_status rx_dispatch(coh_net *n, tcp_conn *c)
{
    coh_hdr *h = &c->rh;
    const char *why = coh_hdr_sanity(h, c->peer, n->size);
    if (!why && c->bye)
        why = "data after its bye frame";
    if (why)
        return coh_tp_fail_set(n->g, COHORT_ERR_PROTOCOL,
                               "tcp: rank %d sent a malformed message: %s (magic 0x%08x kind %u "
                               "len %llu)",
                               c->peer, why, h->magic, h->kind, (unsigned long long)h->len);
    if (h->kind == COH_MSG_BYE) {
        c->bye = 1;
        c->rx_state = RX_HDR;
        c->rh_got = 0;
        return COHORT_OK;
    }
    if (h->kind == COH_MSG_ABORT) {
        c->rx_dst = RXD_ABORT;
        c->rdst = (unsigned char *)n->abort_txt;
        c->rlen = (size_t)h->len;
    } else {
        coh_xfer *op = find_recv(n, c->peer, h);
        if (op) {
            cohort_status st = check_hdr(n, op, h);
            if (st != COHORT_OK)
                return st;
            op->state = OP_ACTIVE;
            c->rx_dst = RXD_OP;
            c->rop = op;
            c->rdst = op->buf;
            c->rlen = op->len;
        } else {
            cohort_status st = check_unexpected(n, h);
            if (st != COHORT_OK)
                return st;
            /* An algorithm that will post the receive in a later batch of
             * this call, or in the next call, asks for large messages to
             * wait in the kernel: a stash is a fresh allocation and a second
             * copy of every byte (the broadcast tree's relays, 4 ranks on 2
             * cores: 100-145 page faults per 512 KiB call, 1,300-7,300 per
             * 64 MiB one; docs/performance.md). */
            int park = n->g->park_ahead && c->want == 0 && h->kind == COH_MSG_COLL &&
                       h->len >= PARK_AHEAD_MIN;
            if (park || h->len > n->stash_max ||
                STASH_COST(h->len) > n->stash_max - n->stash_bytes) {
                if (c->want > 0)
                    return coh_tp_fail_set(
                        n->g, COHORT_ERR_TOO_LARGE,
                        "tcp: rank %d sent a %llu-byte message no posted receive matches (%s #%llu "
                        "tag %d) ahead of the one this rank waits for; %zu unexpected bytes "
                        "(payloads and their headers) are already held and COHORT_MAX_UNEXPECTED "
                        "is %zu",
                        c->peer, (unsigned long long)h->len, coh_coll_name(h->coll),
                        (unsigned long long)h->seq, h->tag, n->stash_bytes, n->stash_max);
                /* Nobody waits on this peer: leave the payload in the kernel. */
                c->rx_state = RX_PARKED;
                n->tx_st.parks++;
                return COHORT_OK;
            }
            tcp_stash *s = coh_malloc(sizeof *s + (size_t)h->len);
            if (!s)
                return coh_tp_fail_set(n->g, COHORT_ERR_NOMEM,
                                       "tcp: no memory to hold an unexpected %llu-byte message "
                                       "from rank %d",
                                       (unsigned long long)h->len, c->peer);
            s->next = NULL;
            s->h = *h;
            if (c->sq_tail)
                c->sq_tail->next = s;
            else
                c->sq_head = s;
            c->sq_tail = s;
            n->stash_bytes += STASH_COST(h->len);
            n->nstash++;
            n->tx_st.stashes++;
            if (n->nstash > n->tx_st.stash_peak)
                n->tx_st.stash_peak = n->nstash;
            c->rx_dst = RXD_STASH;
            c->rstash = s;
            c->rdst = s->data;
            c->rlen = (size_t)h->len;
        }
    }
    c->rdone = 0;
    c->rx_state = RX_BODY;
    return COHORT_OK;
}

static cohort_status rx_complete(coh_net *n, tcp_conn *c, int *moved)
{
    c->rx_state = RX_HDR;
    c->rh_got = 0;
    if (c->rx_dst == RXD_OP) {
        op_done(n, c, c->rop);
        c->rop = NULL;
        *moved = 1;
    } else if (c->rx_dst == RXD_STASH) {
        c->rstash = NULL;
    } else {
        char *t = n->abort_txt;
        t[c->rlen] = 0;
        for (size_t i = 0; i < c->rlen; i++)
            if ((unsigned char)t[i] < 0x20 && t[i] != '\n' && t[i] != '\t')
                t[i] = '?';
        int st = c->rh.tag;
        if (st <= COHORT_OK || st > COHORT_ERR_UNSUPPORTED)
            st = COHORT_ERR_ABORTED;
        char reason[COH_ERRLEN + 64];
        /* A relayed cause already names the rank that aborted: keep it. */
        int relayed = !strncmp(t, "rank ", 5) && strstr(t, " aborted the group: ") != NULL;
        if (relayed)
            snprintf(reason, sizeof reason, "%s", t);
        else
            snprintf(reason, sizeof reason, "rank %d aborted the group: %s", c->peer, t);
        return coh_tp_remote_abort_at(n->g, (cohort_status)st, reason, c->rh.seq);
    }
    return COHORT_OK;
}

/* recv() without blocking. Returns >0 bytes, 0 when nothing is there (or
 * the peer closed cleanly after BYE), -1 with *st set on failure. */
static ssize_t sock_read(coh_net *n, tcp_conn *c, void *buf, size_t len, cohort_status *st)
{
    for (;;) {
        ssize_t r = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        int err = r < 0 ? errno : 0;
        if (c->bye && c->rx_state == RX_HDR && c->rh_got == 0) {
            /* The peer left cleanly: fine unless this batch waits on it. */
            c->eof = 1;
            if (c->want > 0) {
                *st = lost(n, c, 0, "waits for data from");
                return -1;
            }
            return 0;
        }
        *st = lost(n, c, err, "waits for data from");
        return -1;
    }
}

/* Reads and delivers what connection c has, without blocking. greedy=0
 * stops at a message boundary once the batch needs nothing more from c, so
 * the next call's message is read straight into its own buffer later. */
static cohort_status rx_progress(coh_net *n, tcp_conn *c, int greedy, int *moved)
{
    cohort_status st = COHORT_OK;
    for (;;) {
        if (c->rx_state == RX_PARKED || c->eof)
            return COHORT_OK;
        if (c->rx_state == RX_HDR) {
            if (!greedy && c->want == 0 && c->rh_got == 0)
                return COHORT_OK;
            if (c->rpos < c->rend) {
                size_t k = COH_MIN(c->rend - c->rpos, HDR_LEN - c->rh_got);
                memcpy((unsigned char *)&c->rh + c->rh_got, c->rbuf + c->rpos, k);
                c->rpos += k;
                c->rh_got += k;
            } else {
                ssize_t r = sock_read(n, c, c->rbuf, n->rbuf_size, &st);
                if (r <= 0)
                    return r < 0 ? st : COHORT_OK;
                c->rpos = 0;
                c->rend = (size_t)r;
                continue;
            }
            if (c->rh_got == HDR_LEN) {
                st = rx_dispatch(n, c);
                if (st != COHORT_OK)
                    return st;
            }
            continue;
        }
        /* RX_BODY */
        size_t left = c->rlen - c->rdone;
        if (left == 0) {
            st = rx_complete(n, c, moved);
            if (st != COHORT_OK)
                return st;
            continue;
        }
        if (c->rpos < c->rend) {
            size_t k = COH_MIN(left, c->rend - c->rpos);
            memcpy(c->rdst + c->rdone, c->rbuf + c->rpos, k);
            c->rpos += k;
            c->rdone += k;
        } else if (left >= DIRECT_MIN) {
            ssize_t r = sock_read(n, c, c->rdst + c->rdone, left, &st);
            if (r <= 0)
                return r < 0 ? st : COHORT_OK;
            c->rdone += (size_t)r;
        } else {
            ssize_t r = sock_read(n, c, c->rbuf, n->rbuf_size, &st);
            if (r <= 0)
                return r < 0 ? st : COHORT_OK;
            c->rpos = 0;
            c->rend = (size_t)r;
        }
        if (c->rx_dst == RXD_OP)
            *moved = 1;
    }
}

/* A posted receive takes the earliest matching stashed message. If that
 * message is still arriving, the rest of it goes straight to the user. */
static cohort_status match_stash(coh_net *n, coh_xfer *op)
{
    tcp_conn *c = &n->c[op->peer];
    tcp_stash *prev = NULL;
    for (tcp_stash *s = c->sq_head; s; prev = s, s = s->next) {
        if (s->h.kind != op->hdr.kind || (s->h.kind == COH_MSG_P2P && s->h.tag != op->hdr.tag))
            continue;
        cohort_status st = check_hdr(n, op, &s->h);
        if (st != COHORT_OK)
            return st;
        if (prev)
            prev->next = s->next;
        else
            c->sq_head = s->next;
        if (c->sq_tail == s)
            c->sq_tail = prev;
        n->stash_bytes -= STASH_COST(s->h.len);
        n->nstash--;
        if (c->rstash == s) {
            if (c->rdone)
                memcpy(op->buf, s->data, c->rdone);
            c->rx_dst = RXD_OP;
            c->rop = op;
            c->rdst = op->buf;
            c->rstash = NULL;
            op->state = OP_ACTIVE;
        } else {
            if (s->h.len)
                memcpy(op->buf, s->data, (size_t)s->h.len);
            op_done(n, c, op);
        }
        coh_free(s);
        return COHORT_OK;
    }
    return COHORT_OK;
}

void tcp_stash_free(coh_net *n, tcp_conn *c)
{
    for (tcp_stash *s = c->sq_head, *nx; s; s = nx) {
        nx = s->next;
        n->stash_bytes -= STASH_COST(s->h.len);
        n->nstash--;
        coh_free(s);
    }
    c->sq_head = c->sq_tail = c->rstash = NULL;
}

/* ---- send side ---- */

static cohort_status tx_op(coh_net *n, coh_xfer *op, int *moved)
{
    tcp_conn *c = &n->c[op->peer];
    size_t total = HDR_LEN + op->len;
    int err = 0, broken;
    pthread_mutex_lock(&c->wmu);
    broken = c->tx_broken || !c->open;
    /* At most c->slice bytes this pass (the rule in xfer_run): pass() then
     * reads before it writes again, so the peer's data (and the ACKs our
     * sends wait for) is taken while a large send is still going out. */
    size_t end = c->slice && total - op->done > c->slice ? op->done + c->slice : total;
    while (!broken && op->done < end) {
        struct iovec iov[2];
        int k = 0;
        if (op->done < HDR_LEN) {
            iov[k].iov_base = (unsigned char *)&op->hdr + op->done;
            iov[k++].iov_len = COH_MIN(HDR_LEN, end) - op->done;
            if (op->len && end > HDR_LEN) {
                iov[k].iov_base = op->buf;
                iov[k++].iov_len = end - HDR_LEN;
            }
        } else {
            iov[k].iov_base = (unsigned char *)op->buf + (op->done - HDR_LEN);
            iov[k++].iov_len = end - op->done;
        }
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)k};
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            op->done += (size_t)w;
            *moved = 1;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        err = w < 0 ? errno : EPIPE;
        break;
    }
    c->tx_mid = op->done > 0 && op->done < total;
    pthread_mutex_unlock(&c->wmu);
    if (op->done == end && end < total)
        n->tx_st.slice_writes++;
    if (broken) {
        int p = coh_group_poisoned(n->g);
        return p ? (cohort_status)p
                 : coh_tp_fail_set(n->g, COHORT_ERR_ABORTED,
                                   "tcp: connection to rank %d unusable after an abort", op->peer);
    }
    if (err) {
        /* A peer that fails usually sends an abort frame and then closes;
         * our send then hits the reset. Read what it sent before the reset
         * so the group reports the peer's cause, not a lost connection. */
        int ignored = 0;
        cohort_status st = rx_progress(n, c, 1, &ignored);
        int p = coh_group_poisoned(n->g);
        if (p)
            return (cohort_status)p;
        return st != COHORT_OK ? st : lost(n, c, err, "sends to");
    }
    if (op->done == total) {
        op->state = OP_DONE;
        c->sends--;
        n->left--;
    } else {
        /* the socket is full, or this pass's slice is written: later sends
         * to this peer wait (one stream), the receives go next */
        c->blocked = 1;
    }
    return COHORT_OK;
}

/* One non-blocking attempt at everything the batch waits for. */
static cohort_status pass(coh_net *n, int *moved)
{
    for (int i = 0; i < n->ndpeers; i++)
        n->c[n->dpeers[i]].blocked = 0;
    for (int i = 0; i < n->nops; i++) {
        coh_xfer *op = &n->ops[i];
        /* Sends to one peer go out in batch order: they share one stream. */
        if (!op->is_send || op->state == OP_DONE || n->c[op->peer].blocked)
            continue;
        cohort_status st = tx_op(n, op, moved);
        if (st != COHORT_OK)
            return st;
    }
    for (int i = 0; i < n->ndpeers; i++) {
        tcp_conn *c = &n->c[n->dpeers[i]];
        if (c->want == 0)
            continue;
        cohort_status st;
        if (c->rx_state == RX_PARKED) {
            /* A receive from this peer is posted now: the parked message
             * must be delivered or stashed to reach it. */
            c->rx_state = RX_HDR;
            st = rx_dispatch(n, c);
            if (st != COHORT_OK)
                return st;
        }
        if (c->eof)
            return lost(n, c, 0, "waits for data from");
        st = rx_progress(n, c, 0, moved);
        if (st != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

/* Nothing moves: wait in poll() for one slice on every connection of the
 * group, the wake-up fd and the listener, then run the wait bookkeeping. */
static cohort_status block(coh_net *n, coh_wait *w, int *moved)
{
    int timeout = COH_WAIT_SLICE_MS;
    struct pollfd *p = n->pfd;
    int k = 0;
    p[k].fd = n->efd;
    p[k].events = POLLIN;
    p[k].revents = 0;
    n->pmap[k++] = -1;
    for (int j = 0; j < n->size; j++) {
        tcp_conn *c = &n->c[j];
        if (j == n->rank || c->fd < 0 || c->eof || (c->rx_state == RX_PARKED && c->hup))
            continue;
        short ev = POLLRDHUP;
        if (c->rx_state != RX_PARKED) {
            ev |= POLLIN;
            if (c->rpos < c->rend)
                timeout = 0; /* bytes already read but not yet delivered */
        }
        if (c->sends > 0 && c->blocked)
            ev |= POLLOUT;
        p[k].fd = c->fd;
        p[k].events = ev;
        p[k].revents = 0;
        n->pmap[k++] = j;
    }
    int nconn = k;
    int nh = tcp_hs_pollfds(n, p + k);
    /* Stall reports name the peers this batch still waits on. */
    int nw = 0;
    for (int j = 0; j < n->size; j++)
        if (j != n->rank && (n->c[j].want > 0 || n->c[j].sends > 0))
            n->scratch[nw++] = j;
    w->waiting_for = n->scratch;
    w->n_waiting_for = nw;

    coh_trace_arrive(n->g->trace); /* the call's issue time, if pending */
    int r = poll(p, (nfds_t)(nconn + nh), timeout);
    if (r < 0 && errno != EINTR)
        return coh_tp_fail_set(n->g, COHORT_ERR_SYSTEM, "tcp: poll: %s (errno %d)",
                               strerror(errno), errno);
    if (r > 0) {
        if (p[0].revents) {
            uint64_t v;
            ssize_t rr = read(n->efd, &v, sizeof v);
            (void)rr;
        }
        /* The batch's own peers first: when their data completes the
         * batch, the call succeeds even if another peer's abort frame is
         * already queued (the next call reads it). */
        for (int round = 0; round < 2; round++) {
            if (round == 1 && n->left == 0)
                return COHORT_OK;
            for (int i = 1; i < nconn; i++) {
                tcp_conn *c = &n->c[n->pmap[i]];
                int mine = c->want > 0 || c->sends > 0;
                if (!p[i].revents || mine != (round == 0))
                    continue;
                if (c->rx_state == RX_PARKED) {
                    if (p[i].revents & (POLLRDHUP | POLLHUP | POLLERR))
                        c->hup = 1; /* decided when a receive needs this peer */
                    continue;
                }
                if (p[i].revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) {
                    /* Read past this batch's needs only from a peer it
                     * expects nothing from (its frames, or the message that
                     * unblocks a peer stuck sending to us). A peer that runs
                     * ahead (a broadcast root) is otherwise stashed without
                     * bound: two copies and fresh pages for every byte,
                     * instead of TCP flow control and one copy. */
                    cohort_status st = rx_progress(n, c, c->want == 0, moved);
                    if (st != COHORT_OK)
                        return st;
                }
            }
        }
        n->hs_tick_ns = coh_now_ns() + TCP_HS_TICK_MS * 1000000ull;
        cohort_status st = tcp_hs_service(n, p + nconn, nh);
        if (st != COHORT_OK)
            return st;
    } else if (timeout == 0) {
        for (int i = 1; i < nconn; i++) {
            tcp_conn *c = &n->c[n->pmap[i]];
            if (c->rpos < c->rend && c->rx_state != RX_PARKED) {
                cohort_status st = rx_progress(n, c, c->want == 0, moved);
                if (st != COHORT_OK)
                    return st;
            }
        }
    } else {
        /* Timeouts of unauthenticated handshakes are checked every slice. */
        n->hs_tick_ns = coh_now_ns() + TCP_HS_TICK_MS * 1000000ull;
        cohort_status st = tcp_hs_service(n, p + nconn, 0);
        if (st != COHORT_OK)
            return st;
    }
    /* In the last slice before the deadline: the check below (now or at
     * the next slice) fails the call with it. */
    if (coh_now_ns() + COH_WAIT_SLICE_MS * 1000000ull >= w->deadline_ns)
        wait_note(n, w);
    return coh_wait_check(w);
}

/* A rank whose every wait ends within its spin never reaches block() and
 * so never polls the listener: strangers would sit unaccepted in the
 * backlog and pending handshakes outlive their deadline for as long as
 * data flows. Every TCP_HS_TICK_MS the data path services them without
 * waiting. */
static cohort_status hs_tick(coh_net *n)
{
    uint64_t now = coh_now_ns();
    if (now < n->hs_tick_ns)
        return COHORT_OK;
    n->hs_tick_ns = now + TCP_HS_TICK_MS * 1000000ull;
    int nh = tcp_hs_pollfds(n, n->pfd);
    int r = nh > 0 ? poll(n->pfd, (nfds_t)nh, 0) : 0;
    return tcp_hs_service(n, n->pfd, r > 0 ? nh : 0);
}

static cohort_status xfer_run(coh_net *n, const coh_call *call, coh_xfer *ops, int nops);

/* A receive's ack_now (transport.h). Linux acknowledges small segments
 * late while a connection is in its interactive ("pingpong") mode: when
 * two of them arrived with nothing sent back in between, the read that
 * empties the socket sends the ACK itself (tcp_cleanup_rbuf), and on
 * loopback or veth that ACK's whole delivery into the peer's socket runs
 * inside that recv - about 1 us here, on the path of whatever the read
 * waited for. TCP_QUICKACK with an even value sends an ACK now if one is
 * owed and stays in pingpong mode; 0 then restores that mode when nothing
 * was owed (a non-zero value leaves it). docs/performance.md, "TCP 2-rank
 * OSU broadcast: the ACK owed after the barrier (session 12)". */
static void ack_now(coh_net *n, tcp_conn *c)
{
    int two = 2, zero = 0;
    if (c->fd < 0)
        return;
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &two, sizeof two);
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero);
    n->tx_st.acks_now++;
}

cohort_status coh_net_xfer(coh_net *n, const coh_call *call, coh_xfer *ops, int nops)
{
    cohort_status st = xfer_run(n, call, ops, nops);
    if (st == COHORT_OK) {
        if (n->acks)
            for (int i = 0; i < nops; i++)
                if (ops[i].ack_now && !ops[i].is_send)
                    ack_now(n, &n->c[ops[i].peer]);
        return st;
    }
    /* Several failures can race (a local abort, the peer's EOF that
     * follows it): report the group's first one, as every later call will. */
    int p = coh_group_poisoned(n->g);
    return p ? (cohort_status)p : st;
}

static cohort_status xfer_run(coh_net *n, const coh_call *call, coh_xfer *ops, int nops)
{
    cohort_group *g = n->g;
    int p = coh_group_poisoned(g);
    if (p)
        return (cohort_status)p;
    if (!n->connected)
        return coh_tp_fail_set(g, COHORT_ERR_INVALID, "tcp: transfer before coh_net_connect");
    if (nops < 0 || (nops > 0 && !ops))
        return coh_tp_fail_set(g, COHORT_ERR_INVALID, "tcp: bad transfer batch");
    int acks = 0;
    n->acks = 0;
    for (int i = 0; i < nops; i++) {
        coh_xfer *op = &ops[i];
        if (op->peer < 0 || op->peer >= n->size || op->peer == n->rank ||
            n->c[op->peer].fd < 0 || (op->len && !op->buf))
            return coh_tp_fail_set(g, COHORT_ERR_INVALID,
                                   "tcp: bad transfer op %d (peer %d, %zu bytes, buffer %p)", i,
                                   op->peer, op->len, op->buf);
        n->c[op->peer].want = n->c[op->peer].sends = 0;
        acks |= op->ack_now;
    }
    n->acks = acks;
    n->ops = ops;
    n->nops = nops;
    n->call = call;
    uint64_t floor0 = n->coll_floor;
    n->left = nops;
    n->ndpeers = 0;
    for (int i = 0; i < nops; i++) {
        coh_xfer *op = &ops[i];
        tcp_conn *c = &n->c[op->peer];
        if (c->want == 0 && c->sends == 0)
            n->dpeers[n->ndpeers++] = op->peer;
        op->done = 0;
        op->state = OP_PENDING;
        if (op->is_send) {
            op->hdr.magic = COH_HDR_MAGIC;
            op->hdr.src = n->rank;
            op->hdr.len = op->len;
            c->sends++;
        } else {
            op->hdr.len = op->len;
            c->want++;
            if (op->hdr.kind == COH_MSG_COLL && op->hdr.seq > n->coll_floor)
                n->coll_floor = op->hdr.seq;
        }
    }
    /* The slice rule, per peer of this step: COHORT_TCP_SEND_SLICE when set
     * cuts every send; otherwise a send to a peer this batch also receives
     * payload from (an exchange: all_reduce's, a 2-rank all_gather's) is cut
     * at duplex_slice, and one with nothing coming back goes out whole. */
    for (int i = 0; i < n->ndpeers; i++)
        n->c[n->dpeers[i]].slice = n->tx_slice;
    if (!n->tx_slice && n->duplex_slice)
        for (int i = 0; i < nops; i++)
            if (!ops[i].is_send && ops[i].len)
                n->c[ops[i].peer].slice = n->duplex_slice;
    for (int i = 0; i < nops; i++) {
        const tcp_conn *c = &n->c[ops[i].peer];
        if (!ops[i].is_send || !ops[i].len)
            continue;
        if (c->slice && HDR_LEN + ops[i].len > c->slice) {
            n->tx_st.sliced++;
            n->tx_st.duplex += !n->tx_slice;
        } else {
            n->tx_st.whole++;
        }
        n->tx_st.last_slice = c->slice;
    }
    if (n->nstash > 0 && n->coll_floor > floor0) {
        /* Stashed while an earlier call ran, never claimed by it: stale.
         * A peer's collective messages arrive in its call order, so its
         * stale ones come first in its stash: the walk stops at its first
         * collective message of the floor's call or later (checked too: the
         * running call's fingerprint). Walking the whole stash every call
         * made a root that its leaves run thousands of calls ahead of pay
         * for all of them per call (4 ranks on 2 cpus, reduce 256 B over
         * 100,000 calls: 40-233 us a call, the cpus busy walking lists). */
        for (int j = 0; j < n->size; j++)
            for (tcp_stash *s = n->c[j].sq_head; s; s = s->next) {
                n->tx_st.stash_scans++;
                cohort_status st = check_unexpected(n, &s->h);
                if (st != COHORT_OK)
                    return st;
                if (s->h.kind == COH_MSG_COLL && s->h.seq >= n->coll_floor)
                    break;
            }
    }
    for (int i = 0; i < nops; i++)
        if (!ops[i].is_send && n->c[ops[i].peer].sq_head) {
            cohort_status st = match_stash(n, &ops[i]);
            if (st != COHORT_OK)
                return st;
        }

    coh_wait w;
    coh_wait_init(&w, g, call);
    uint64_t spin_start = 0;
    int progressed = 0; /* data moved since w's clock started */
    for (;;) {
        int moved = 0;
        cohort_status st = pass(n, &moved);
        if (st != COHORT_OK)
            return st;
        if (n->left == 0)
            return COHORT_OK;
        st = hs_tick(n);
        if (st != COHORT_OK)
            return st;
        if (moved) {
            spin_start = 0;
            progressed = 1;
            continue;
        }
        uint64_t now = coh_now_ns();
        if (!spin_start)
            spin_start = now;
        if (now - spin_start < n->spin_ns && !coh_group_poisoned(g)) {
            /* On loopback the peer we wait for is often woken onto this
             * very CPU (wake-affine): yielding lets it run instead of
             * queueing behind our spin. */
            sched_yield();
            continue;
        }
        if (progressed) {
            /* Progress restarts the stall clock, here where a wait begins:
             * the timeout bounds a wait without progress, not a long
             * transfer - one whose passes all moved (small slices) would
             * otherwise be judged from the batch's start at its first wait. */
            coh_wait_init(&w, g, call);
            progressed = 0;
        }
        moved = 0;
        st = block(n, &w, &moved);
        if (st != COHORT_OK)
            return st;
        spin_start = 0;
        progressed = moved;
    }
}

/* Quiet, with a CPU per rank, a sleeping rank's wake-up is the cost: an
 * idle vCPU halts, and the peer's next burst waits for it to be woken
 * (tens of us), which Open MPI's busy-polling ranks never pay. 200 against
 * 20 us, paired quiet rounds (docs/performance.md, 2026-12-02 07:18 run):
 * broadcast 1 MiB x0.51 loopback and x0.52 across namespaces, all_gather
 * 1-4 MiB x0.82-0.86, 3-5 of 5 rounds in 16 of 18 cells. Oversubscribed,
 * the spinner would hold the CPU its peer needs: 20 us as before. */
unsigned coh_tcp_spin_default_us(int local_ranks, long cpus)
{
    return cpus > 0 && local_ranks <= cpus ? TCP_SPIN_US_DEFAULT : TCP_SPIN_US_OVERSUB;
}

uint64_t coh_net_spin_ns(const coh_net *n)
{
    return n->spin_ns;
}

void coh_net_get_tx_stats(const coh_net *n, coh_net_tx_stats *out)
{
    *out = n->tx_st;
}

/* ---- closing handshake (cohort_finalize) ---- */

/* A message still here after its sender's BYE: no call of this rank took
 * it. The contract judges it (against this rank's own call of that seq when
 * the flight recorder still has it); the transport records the verdict. */
static cohort_status unconsumed(coh_net *n, const coh_hdr *h)
{
    coh_call call;
    coh_hdr exp;
    char msg[COH_ERRLEN];
    if (coh_contract_unconsumed(n->g, h, &call, &exp, msg, sizeof msg))
        return coh_tp_mismatch(n->g, &call, h->src, &exp, h);
    return coh_tp_fail_set(n->g, COHORT_ERR_CONTRACT, "%s", msg);
}

cohort_status coh_net_close_check(coh_net *n, int timeout_ms)
{
    if (!n || !n->c || !n->connected)
        return COHORT_OK;
    cohort_group *g = n->g;
    n->closing = 1;
    n->ops = NULL;
    n->nops = 0;
    n->call = NULL; /* every arrival is unexpected from here on */
    n->left = 0;
    for (int j = 0; j < n->size; j++)
        n->c[j].want = n->c[j].sends = 0;
    tcp_send_bye(n);
    uint64_t dl = coh_deadline_ns(timeout_ms);
    int late = 0;
    for (;;) {
        int nw = 0, k = 0;
        for (int j = 0; j < n->size; j++) {
            tcp_conn *c = &n->c[j];
            if (j == n->rank || c->fd < 0 || c->bye || c->eof)
                continue;
            if (c->rx_state == RX_PARKED)
                return unconsumed(n, &c->rh); /* over the stash budget, still unread */
            int moved = 0;
            cohort_status st = rx_progress(n, c, 1, &moved);
            if (st != COHORT_OK)
                return st;
            if (c->bye || c->eof || c->rx_state == RX_PARKED)
                continue;
            n->scratch[nw++] = j;
            n->pfd[k].fd = c->fd;
            n->pfd[k].events = POLLIN | POLLRDHUP;
            n->pfd[k].revents = 0;
            k++;
        }
        if (nw == 0)
            break;
        int p = coh_group_poisoned(g);
        if (p)
            return (cohort_status)p;
        if (coh_now_ns() >= dl) {
            /* A rank still busy after its last call (writing a checkpoint)
             * is not an error: this rank leaves, unchecked from there. */
            char who[256];
            coh_fmt_ranks(who, sizeof who, n->scratch, nw);
            coh_warn("cohort_finalize: rank%s %s did not reach cohort_finalize within %d ms; "
                     "leaving without checking what %s sent after the last call",
                     nw > 1 ? "s" : "", who, timeout_ms, nw > 1 ? "they" : "it");
            late = 1;
            break;
        }
        if (poll(n->pfd, (nfds_t)k, COH_MIN(coh_ms_left(dl), COH_WAIT_SLICE_MS)) < 0 &&
            errno != EINTR)
            return coh_tp_fail_set(g, COHORT_ERR_SYSTEM, "tcp: poll: %s (errno %d)",
                                   strerror(errno), errno);
    }
    for (int j = 0; j < n->size; j++)
        if (n->c[j].sq_head)
            return unconsumed(n, &n->c[j].sq_head->h);
    return late ? COHORT_ERR_TIMEOUT : COHORT_OK;
}
