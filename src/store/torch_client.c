/*
 * torch_client.c - the "torch://host:port" store backend: cohort's store API
 * over PyTorch's TCPStore protocol (torch 2.x; torch_proto.h describes it),
 * so a cohort program can rendezvous through a TCPStore it did not start -
 * torchrun's agent store (docs/launcher.md#torchrun) or cohort-store's torch
 * listener.
 *
 * TCPStore requests carry no id and most block the connection until they
 * are answered, so each call takes a connection of its own from a small
 * pool (a new one when all are busy): a thread waiting for a key never holds
 * up another thread's call on the same handle. Every call has a deadline;
 * a wait that times out is cancelled (CANCEL_WAIT) and the connection stays
 * usable. SET, APPEND and MULTI_SET have no reply in TCPStore: a PING sent
 * behind them is, so when they return the server has applied them (the
 * same guarantee as cohort's SET).
 *
 * What TCPStore cannot say: it has no authentication (the token is not
 * used), no wait-for-any (polled with CHECK, 1 to 50 ms apart), no server
 * barrier with cohort's semantics (built from ADD + WAIT), and no errors
 * (a refused request closes the connection: COHORT_ERR_STORE).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "store/backend.h"
#include "store/proto.h"
#include "store/torch_proto.h"
#include "util/addr.h"

#define POOL_MAX 8

typedef struct tstore {
    char kprefix[512]; /* put before every key: torch://host:port/PREFIX */
    size_t kplen;
    char host[256];
    char port[16];
    char addr[300];
    int connect_ms;
    pthread_mutex_t mu;
    int idle[POOL_MAX];
    int nidle;
    uint32_t nonce;
} tstore;

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* deadline < 0: none. */
static int left_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t l = deadline - now_ms();
    return l < 0 ? 0 : (int)(l > 1 << 30 ? 1 << 30 : l);
}

static int64_t deadline_of(int timeout_ms) { return timeout_ms < 0 ? -1 : now_ms() + timeout_ms; }

/* ---- bytes on a socket, within a deadline ---- */

static cohort_status io_wait(cohort_store *s, tstore *t, int fd, short ev, int64_t dl,
                             const char *what)
{
    for (;;) {
        struct pollfd p = {.fd = fd, .events = ev};
        int r = poll(&p, 1, left_ms(dl));
        if (r > 0)
            return COHORT_OK;
        if (r == 0)
            return coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                               "torch store %s: %s: no answer within the timeout", t->addr, what);
        if (errno != EINTR)
            return coh_err_sys(coh_store_err(s), COHORT_ERR_STORE, "poll", errno,
                               "torch store %s: %s", t->addr, what);
    }
}

static cohort_status send_all(cohort_store *s, tstore *t, int fd, const void *p, size_t n,
                              int64_t dl, const char *what)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            cohort_status st = io_wait(s, t, fd, POLLOUT, dl, what);
            if (st)
                return st;
            continue;
        }
        return coh_err_sys(coh_store_err(s), COHORT_ERR_STORE, "send", errno,
                           "torch store %s: %s", t->addr, what);
    }
    return COHORT_OK;
}

static cohort_status recv_all(cohort_store *s, tstore *t, int fd, void *p, size_t n, int64_t dl,
                              const char *what)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = recv(fd, b, n, MSG_DONTWAIT);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return coh_err_set(coh_store_err(s), COHORT_ERR_STORE,
                               "torch store %s: %s: the server closed the connection (it refuses "
                               "what it cannot do: a limit, or an op this TCPStore lacks)",
                               t->addr, what);
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            cohort_status st = io_wait(s, t, fd, POLLIN, dl, what);
            if (st)
                return st;
            continue;
        }
        return coh_err_sys(coh_store_err(s), COHORT_ERR_STORE, "recv", errno,
                           "torch store %s: %s", t->addr, what);
    }
    return COHORT_OK;
}

/* ---- request building ---- */

static void w_str(coh_wr *w, const void *p, size_t n)
{
    uint8_t b[8];
    coh_put_u64(b, n);
    coh_wr_raw(w, b, 8);
    coh_wr_raw(w, p, n);
}

/* A key: the address's prefix, then the key. */
static void w_key(coh_wr *w, const tstore *t, const void *k, size_t kl)
{
    uint8_t b[8];
    coh_put_u64(b, t->kplen + kl);
    coh_wr_raw(w, b, 8);
    coh_wr_raw(w, t->kprefix, t->kplen);
    coh_wr_raw(w, k, kl);
}

static void w_u64(coh_wr *w, uint64_t v)
{
    uint8_t b[8];
    coh_put_u64(b, v);
    coh_wr_raw(w, b, 8);
}

static void w_ping(coh_wr *w, uint32_t nonce)
{
    uint8_t b[5] = {TQ_PING};
    coh_put_u32(b + 1, nonce);
    coh_wr_raw(w, b, 5);
}

/* ---- connections ---- */

static cohort_status dial(cohort_store *s, tstore *t, int64_t dl, int *out)
{
    struct addrinfo *res = NULL;
    int gr = coh_addr_resolve(t->host, t->port, 0, &res);
    if (gr)
        return coh_err_set(coh_store_err(s), COHORT_ERR_STORE, "torch store %s: resolving: %s",
                           t->addr, coh_addr_strerror(gr));
    int err = ECONNREFUSED;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int r = connect(fd, a->ai_addr, a->ai_addrlen);
        if (r < 0 && errno == EINPROGRESS) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            int pr;
            do
                pr = poll(&p, 1, left_ms(dl));
            while (pr < 0 && errno == EINTR);
            socklen_t el = sizeof err;
            if (pr <= 0) {
                err = pr == 0 ? ETIMEDOUT : errno;
                r = -1;
            } else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) {
                r = 0;
            } else {
                r = -1;
            }
        } else if (r < 0) {
            err = errno;
        }
        if (r == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            coh_addr_freeinfo(res);
            *out = fd;
            return COHORT_OK;
        }
        close(fd);
    }
    coh_addr_freeinfo(res);
    return coh_err_sys(coh_store_err(s), COHORT_ERR_STORE, "connect", err, "torch store %s",
                       t->addr);
}

/* A new connection: VALIDATE, then a PING proves a TCPStore answers. */
static cohort_status open_conn(cohort_store *s, tstore *t, int64_t dl, int *out)
{
    int fd = -1;
    cohort_status st;
    /* The server may not listen yet (the agent starts it): retry until dl. */
    int backoff = 2;
    for (;;) {
        st = dial(s, t, dl, &fd);
        if (st == COHORT_OK || left_ms(dl) == 0)
            break;
        struct timespec ts = {0, (long)COH_MIN(backoff, left_ms(dl) < 0 ? backoff : left_ms(dl)) *
                                     1000000L};
        nanosleep(&ts, NULL);
        backoff = COH_MIN(backoff * 2, 200);
    }
    if (st)
        return st;
    pthread_mutex_lock(&t->mu);
    uint32_t nonce = ++t->nonce;
    pthread_mutex_unlock(&t->mu);
    uint8_t b[10] = {TQ_VALIDATE};
    coh_put_u32(b + 1, COH_TORCH_MAGIC);
    b[5] = TQ_PING;
    coh_put_u32(b + 6, nonce);
    uint8_t r[4];
    if ((st = send_all(s, t, fd, b, sizeof b, dl, "handshake")) ||
        (st = recv_all(s, t, fd, r, 4, dl, "handshake"))) {
        close(fd);
        return st;
    }
    if (coh_get_u32(r) != nonce) {
        close(fd);
        return coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL,
                           "torch store %s: not a TCPStore (PING answered 0x%08x, sent 0x%08x)",
                           t->addr, coh_get_u32(r), nonce);
    }
    *out = fd;
    return COHORT_OK;
}

static cohort_status take(cohort_store *s, tstore *t, int64_t dl, int *fd)
{
    pthread_mutex_lock(&t->mu);
    if (t->nidle) {
        *fd = t->idle[--t->nidle];
        pthread_mutex_unlock(&t->mu);
        return COHORT_OK;
    }
    pthread_mutex_unlock(&t->mu);
    return open_conn(s, t, dl, fd);
}

/* A connection back to the pool after a clean call; after a failed one it
 * may be out of step, so it is closed. */
static void give(tstore *t, int fd, cohort_status st)
{
    if (st != COHORT_OK && st != COHORT_ERR_NOT_FOUND) {
        close(fd);
        return;
    }
    pthread_mutex_lock(&t->mu);
    if (t->nidle < POOL_MAX) {
        t->idle[t->nidle++] = fd;
        fd = -1;
    }
    pthread_mutex_unlock(&t->mu);
    if (fd >= 0)
        close(fd);
}

/* ---- one call: build, send, read ---- */

typedef struct call {
    cohort_store *s;
    tstore *t;
    int fd;
    int64_t dl;
    coh_wr w;
    const char *what;
} call;

static cohort_status call_begin(call *c, cohort_store *s, int timeout_ms, const char *what)
{
    memset(c, 0, sizeof *c);
    c->s = s;
    c->t = coh_store_priv(s);
    c->dl = deadline_of(timeout_ms);
    c->what = what;
    coh_wr_init(&c->w);
    c->fd = -1;
    return take(s, c->t, c->dl, &c->fd);
}

static cohort_status call_send(call *c)
{
    if (c->w.oom)
        return coh_err_set(coh_store_err(c->s), COHORT_ERR_NOMEM, "torch store %s: %s",
                           c->t->addr, c->what);
    cohort_status st = send_all(c->s, c->t, c->fd, c->w.p, c->w.len, c->dl, c->what);
    c->w.len = 0;
    return st;
}

static cohort_status call_end(call *c, cohort_status st)
{
    if (c->fd >= 0)
        give(c->t, c->fd, st);
    coh_wr_free(&c->w);
    return st;
}

static cohort_status rd_u8(call *c, uint8_t *v) { return recv_all(c->s, c->t, c->fd, v, 1, c->dl, c->what); }

static cohort_status rd_i64(call *c, int64_t *v)
{
    uint8_t b[8];
    cohort_status st = recv_all(c->s, c->t, c->fd, b, 8, c->dl, c->what);
    if (!st)
        *v = (int64_t)coh_get_u64(b);
    return st;
}

/* u64 length + bytes, as a malloc'd NUL-terminated buffer. */
static cohort_status rd_bytes(call *c, void **out, size_t *outl)
{
    int64_t n;
    cohort_status st = rd_i64(c, &n);
    if (st)
        return st;
    if (n < 0 || (uint64_t)n > (1ull << 30)) /* a foreign server: no 4 GiB mallocs */
        return coh_err_set(coh_store_err(c->s), COHORT_ERR_PROTOCOL,
                           "torch store %s: %s: a value of %lld bytes", c->t->addr, c->what,
                           (long long)n);
    uint8_t *b = coh_malloc((size_t)n + 1);
    if (!b)
        return coh_err_set(coh_store_err(c->s), COHORT_ERR_NOMEM, "torch store %s: %s",
                           c->t->addr, c->what);
    st = recv_all(c->s, c->t, c->fd, b, (size_t)n, c->dl, c->what);
    if (st) {
        coh_free(b);
        return st;
    }
    b[n] = 0;
    *out = b;
    if (outl)
        *outl = (size_t)n;
    return COHORT_OK;
}

/* Sends the request built so far followed by a PING and waits for the
 * nonce: the request was applied when this returns OK. */
static cohort_status send_acked(call *c)
{
    uint32_t nonce = (uint32_t)now_ms() ^ 0x5bd1e995u;
    w_ping(&c->w, nonce);
    cohort_status st = call_send(c);
    uint8_t r[4];
    if (!st)
        st = recv_all(c->s, c->t, c->fd, r, 4, c->dl, c->what);
    if (!st && coh_get_u32(r) != nonce)
        st = coh_err_set(coh_store_err(c->s), COHORT_ERR_PROTOCOL,
                         "torch store %s: %s: out of step (PING answered 0x%08x)", c->t->addr,
                         c->what, coh_get_u32(r));
    return st;
}

/* WAIT for all keys until the call's deadline; on timeout the wait is
 * cancelled so the connection stays usable. */
static cohort_status do_wait(call *c, const void *const *k, const size_t *kl, int n)
{
    uint8_t op = TQ_WAIT;
    coh_wr_raw(&c->w, &op, 1);
    w_u64(&c->w, (uint64_t)n);
    for (int i = 0; i < n; i++)
        w_key(&c->w, c->t, k[i], kl[i]);
    cohort_status st = call_send(c);
    if (st)
        return st;
    uint8_t r;
    st = rd_u8(c, &r);
    if (st == COHORT_ERR_TIMEOUT) {
        /* Cancel; a STOP_WAITING that crossed it comes first. */
        uint8_t cancel = TQ_CANCEL_WAIT;
        int64_t dl = c->dl;
        c->dl = deadline_of(COH_MAX(coh_store_timeout(c->s), 5000));
        coh_err saved = *coh_store_err(c->s);
        cohort_status cs = send_all(c->s, c->t, c->fd, &cancel, 1, c->dl, c->what);
        while (!cs && !(cs = rd_u8(c, &r)) && r != 1)
            ;
        c->dl = dl;
        *coh_store_err(c->s) = saved;
        if (cs) /* out of step: the connection is dropped by call_end */
            return cs;
        /* A timed-out wait leaves the connection usable. */
        if (c->fd >= 0) {
            give(c->t, c->fd, COHORT_OK);
            c->fd = -1;
        }
        return COHORT_ERR_TIMEOUT;
    }
    if (!st && r != 0)
        st = coh_err_set(coh_store_err(c->s), COHORT_ERR_PROTOCOL,
                         "torch store %s: %s: WAIT answered %u", c->t->addr, c->what, r);
    return st;
}

static cohort_status do_check(call *c, const void *const *k, const size_t *kl, int n, int *all)
{
    uint8_t op = TQ_CHECK;
    coh_wr_raw(&c->w, &op, 1);
    w_u64(&c->w, (uint64_t)n);
    for (int i = 0; i < n; i++)
        w_key(&c->w, c->t, k[i], kl[i]);
    uint8_t r;
    cohort_status st = call_send(c);
    if (!st)
        st = rd_u8(c, &r);
    if (!st)
        *all = r == 0;
    return st;
}

/* ---- the backend ---- */

static cohort_status t_connect(cohort_store *s, const char *addr, const char *job_id,
                               const char *token, uint32_t generation, int timeout_ms)
{
    (void)job_id;
    (void)token;
    (void)generation;
    const char *hp = addr + strlen("torch://");
    tstore *t = coh_calloc(1, sizeof *t);
    if (!t)
        return coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "torch store %s", addr);
    snprintf(t->addr, sizeof t->addr, "%s", hp);
    /* torch://host:port/PREFIX: every key lives under "PREFIX/". */
    char hpb[300];
    snprintf(hpb, sizeof hpb, "%s", hp);
    char *slash = strchr(hpb[0] == '[' ? strchr(hpb, ']') ? strchr(hpb, ']') : hpb : hpb, '/');
    if (slash) {
        *slash = 0;
        if (slash[1]) {
            t->kplen = (size_t)snprintf(t->kprefix, sizeof t->kprefix, "%s/", slash + 1);
            if (t->kplen >= sizeof t->kprefix) {
                coh_free(t);
                return coh_err_set(coh_store_err(s), COHORT_ERR_INVALID,
                                   "store address %s: key prefix too long", addr);
            }
        }
        snprintf(t->addr, sizeof t->addr, "%s", hpb);
    }
    hp = hpb;
    const char *colon = strrchr(hp, ':');
    if (hp[0] == '[') {
        const char *rb = strchr(hp, ']');
        if (!rb || rb[1] != ':' || (size_t)(rb - hp - 1) >= sizeof t->host) {
            coh_free(t);
            return coh_err_set(coh_store_err(s), COHORT_ERR_INVALID,
                               "store address %s: expected torch://host:port", addr);
        }
        snprintf(t->host, sizeof t->host, "%.*s", (int)(rb - hp - 1), hp + 1);
        colon = rb + 1;
    } else if (colon && (size_t)(colon - hp) < sizeof t->host) {
        snprintf(t->host, sizeof t->host, "%.*s", (int)(colon - hp), hp);
    }
    char *end = NULL;
    long port = colon ? strtol(colon + 1, &end, 10) : -1;
    if (!colon || !t->host[0] || end == colon + 1 || *end || port < 1 || port > 65535) {
        coh_free(t);
        return coh_err_set(coh_store_err(s), COHORT_ERR_INVALID,
                           "store address %s: expected torch://host:port", addr);
    }
    snprintf(t->port, sizeof t->port, "%ld", port);
    pthread_mutex_init(&t->mu, NULL);
    t->nonce = (uint32_t)getpid() << 8;
    coh_store_set_priv(s, t);
    int fd;
    cohort_status st = open_conn(s, t, deadline_of(timeout_ms), &fd);
    if (st)
        return st; /* close() frees t */
    give(t, fd, COHORT_OK);
    return COHORT_OK;
}

static void t_close(cohort_store *s)
{
    tstore *t = coh_store_priv(s);
    if (!t)
        return;
    for (int i = 0; i < t->nidle; i++)
        close(t->idle[i]);
    pthread_mutex_destroy(&t->mu);
    coh_free(t);
    coh_store_set_priv(s, NULL);
}

static cohort_status t_set(cohort_store *s, const void *k, size_t kl, const void *v, size_t vl)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "set");
    if (!st) {
        uint8_t op = TQ_SET;
        coh_wr_raw(&c.w, &op, 1);
        w_key(&c.w, c.t, k, kl);
        w_str(&c.w, v, vl);
        st = send_acked(&c);
    }
    return call_end(&c, st);
}

static cohort_status t_append(cohort_store *s, const void *k, size_t kl, const void *v,
                              size_t vl)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "append");
    if (!st) {
        uint8_t op = TQ_APPEND;
        coh_wr_raw(&c.w, &op, 1);
        w_key(&c.w, c.t, k, kl);
        w_str(&c.w, v, vl);
        st = send_acked(&c);
    }
    return call_end(&c, st);
}

static cohort_status t_get(cohort_store *s, const void *k, size_t kl, void **v, size_t *vl,
                           int timeout_ms)
{
    call c;
    cohort_status st = call_begin(&c, s, timeout_ms == 0 ? coh_store_timeout(s) : timeout_ms,
                                  "get");
    const void *kp[1] = {k};
    if (!st && timeout_ms == 0) {
        int all = 0;
        st = do_check(&c, kp, &kl, 1, &all);
        if (!st && !all)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOT_FOUND, "get '%.*s': not found",
                             (int)COH_MIN(kl, 200), (const char *)k);
    } else if (!st) {
        st = do_wait(&c, kp, &kl, 1);
        if (st == COHORT_ERR_TIMEOUT)
            coh_err_set(coh_store_err(s), st, "get '%.*s': timed out after %d ms (torch store %s)",
                        (int)COH_MIN(kl, 200), (const char *)k, timeout_ms, c.t->addr);
    }
    if (!st) {
        uint8_t op = TQ_GET;
        coh_wr_raw(&c.w, &op, 1);
        w_key(&c.w, c.t, k, kl);
        st = call_send(&c);
        if (!st)
            st = rd_bytes(&c, v, vl);
    }
    return call_end(&c, st);
}

static cohort_status t_add(cohort_store *s, const void *k, size_t kl, int64_t d, int64_t *res)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "add");
    if (!st) {
        uint8_t op = TQ_ADD;
        coh_wr_raw(&c.w, &op, 1);
        w_key(&c.w, c.t, k, kl);
        w_u64(&c.w, (uint64_t)d);
        st = call_send(&c);
        if (!st)
            st = rd_i64(&c, res);
    }
    return call_end(&c, st);
}

static cohort_status t_cas(cohort_store *s, const void *k, size_t kl, const void *e, size_t el,
                           const void *d, size_t dl, void **cur, size_t *curl)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "compare_set");
    void *v = NULL;
    size_t vn = 0;
    if (!st) {
        uint8_t op = TQ_CAS;
        coh_wr_raw(&c.w, &op, 1);
        w_key(&c.w, c.t, k, kl);
        w_str(&c.w, e, el);
        w_str(&c.w, d, dl);
        st = call_send(&c);
        if (!st)
            st = rd_bytes(&c, &v, &vn);
    }
    /* TCPStore answers "expected" for an absent key with a non-empty
     * expected value: tell that apart from a real match. */
    if (!st && el && vn == el && !memcmp(v, e, el) && !(dl == el && !memcmp(d, e, el))) {
        const void *kp[1] = {k};
        int all = 1;
        st = do_check(&c, kp, &kl, 1, &all);
        if (!st && !all) {
            coh_free(v);
            v = NULL;
        }
    }
    if (!st && cur) {
        *cur = v;
        if (curl)
            *curl = vn;
        v = NULL;
    }
    coh_free(v);
    return call_end(&c, st);
}

static cohort_status t_check(cohort_store *s, const void *const *k, const size_t *kl, int n,
                             int *all)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "check");
    if (!st)
        st = do_check(&c, k, kl, n, all);
    return call_end(&c, st);
}

static cohort_status t_wait(cohort_store *s, const void *const *k, const size_t *kl, int n,
                            int any, int timeout_ms, int *which)
{
    call c;
    cohort_status st = call_begin(&c, s, timeout_ms == 0 ? coh_store_timeout(s) : timeout_ms,
                                  any ? "wait_any" : "wait");
    if (st)
        return call_end(&c, st);
    if (!any && timeout_ms != 0) {
        st = do_wait(&c, k, kl, n);
        if (!st && which)
            *which = 0;
    } else {
        /* TCPStore has no wait-for-any: CHECK each key, 1 to 50 ms apart. */
        int64_t dl = deadline_of(timeout_ms);
        int pause = 1;
        for (;;) {
            int found = -1, all = 1, missing = 0;
            for (int i = 0; i < n && !st; i++) {
                int one = 0;
                st = do_check(&c, &k[i], &kl[i], 1, &one);
                if (one && found < 0)
                    found = i;
                all &= one;
                missing += !one;
            }
            if (st)
                break;
            if (any ? found >= 0 : all) {
                if (which)
                    *which = any ? found : 0;
                break;
            }
            if (timeout_ms == 0 || left_ms(dl) == 0) {
                if (any)
                    st = coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                                     "wait_any: none of the %d keys exists (torch store %s)", n,
                                     c.t->addr);
                else
                    st = coh_err_set(coh_store_err(s), COHORT_ERR_TIMEOUT,
                                     "wait: %d of the %d keys do not exist (torch store %s)",
                                     missing, n, c.t->addr);
                break;
            }
            int l = left_ms(dl);
            int ms = l < 0 ? pause : COH_MIN(pause, l);
            struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
            nanosleep(&ts, NULL);
            pause = COH_MIN(pause * 2, 50);
        }
        /* A TIMEOUT here left the connection in step. */
        if (st == COHORT_ERR_TIMEOUT && c.fd >= 0) {
            give(c.t, c.fd, COHORT_OK);
            c.fd = -1;
        }
    }
    if (st == COHORT_ERR_TIMEOUT && !any && timeout_ms != 0)
        coh_err_set(coh_store_err(s), st, "wait for %d key%s: timed out after %d ms (torch store %s)",
                    n, n == 1 ? "" : "s", timeout_ms, c.t->addr);
    return call_end(&c, st);
}

static cohort_status t_del(cohort_store *s, const void *k, size_t kl, int *deleted)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "delete");
    if (!st) {
        uint8_t op = TQ_DELETE;
        coh_wr_raw(&c.w, &op, 1);
        w_key(&c.w, c.t, k, kl);
        int64_t d = 0;
        st = call_send(&c);
        if (!st)
            st = rd_i64(&c, &d);
        if (!st && deleted)
            *deleted = d > 0;
    }
    return call_end(&c, st);
}

static cohort_status t_list(cohort_store *s, const void *prefix, size_t pl, char ***keys,
                            size_t **klens, int *n)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "list");
    int64_t cnt = 0;
    char **ks = NULL;
    size_t *ls = NULL;
    int m = 0;
    if (!st) {
        uint8_t op = TQ_LIST_KEYS;
        coh_wr_raw(&c.w, &op, 1);
        st = call_send(&c);
        if (!st)
            st = rd_i64(&c, &cnt);
        if (!st && (cnt < 0 || cnt > (1 << 24)))
            st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL,
                             "torch store %s: list: %lld keys", c.t->addr, (long long)cnt);
    }
    if (!st) {
        ks = coh_calloc((size_t)cnt + 1, sizeof *ks);
        ls = coh_calloc((size_t)cnt + 1, sizeof *ls);
        if (!ks || !ls)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "torch store list");
    }
    for (int64_t i = 0; i < cnt && !st; i++) {
        void *v;
        size_t vl;
        st = rd_bytes(&c, &v, &vl);
        if (st)
            break;
        size_t kp = c.t->kplen;
        if (vl >= kp + pl && (kp == 0 || !memcmp(v, c.t->kprefix, kp)) &&
            (pl == 0 || !memcmp((char *)v + kp, prefix, pl))) { /* a root has no prefix */
            memmove(v, (char *)v + kp, vl - kp + 1); /* names as the caller gave them */
            ks[m] = v;
            ls[m++] = vl - kp;
        } else {
            coh_free(v);
        }
    }
    if (st) {
        for (int i = 0; i < m; i++)
            coh_free(ks[i]);
        coh_free(ks);
        coh_free(ls);
        return call_end(&c, st);
    }
    *keys = ks;
    *klens = ls;
    *n = m;
    return call_end(&c, st);
}

static cohort_status t_num_keys(cohort_store *s, const void *prefix, size_t pl, int64_t *n)
{
    char **ks = NULL;
    size_t *ls = NULL;
    int m = 0;
    cohort_status st = t_list(s, prefix, pl, &ks, &ls, &m);
    if (st)
        return st;
    for (int i = 0; i < m; i++)
        coh_free(ks[i]);
    coh_free(ks);
    coh_free(ls);
    *n = m;
    return COHORT_OK;
}

static cohort_status t_multi_get(cohort_store *s, const void *const *k, const size_t *kl, int n,
                                 void **v, size_t *vl, int timeout_ms)
{
    call c;
    cohort_status st = call_begin(&c, s, timeout_ms == 0 ? coh_store_timeout(s) : timeout_ms,
                                  "multi_get");
    if (!st && timeout_ms == 0) {
        int all = 0;
        st = do_check(&c, k, kl, n, &all);
        if (!st && !all)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOT_FOUND,
                             "multi_get: not all of the %d keys exist", n);
    } else if (!st) {
        st = do_wait(&c, k, kl, n);
    }
    if (!st) {
        uint8_t op = TQ_MULTI_GET;
        coh_wr_raw(&c.w, &op, 1);
        w_u64(&c.w, (uint64_t)n);
        for (int i = 0; i < n; i++)
            w_key(&c.w, c.t, k[i], kl[i]);
        st = call_send(&c);
        int i = 0;
        for (; i < n && !st; i++)
            st = rd_bytes(&c, &v[i], &vl[i]);
        if (st)
            while (i-- > 0) {
                coh_free(v[i]);
                v[i] = NULL;
            }
    }
    return call_end(&c, st);
}

static cohort_status t_multi_set(cohort_store *s, const void *const *k, const size_t *kl,
                                 const void *const *v, const size_t *vl, int n)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "multi_set");
    if (!st) {
        uint8_t op = TQ_MULTI_SET;
        coh_wr_raw(&c.w, &op, 1);
        w_u64(&c.w, (uint64_t)n);
        for (int i = 0; i < n; i++) {
            w_key(&c.w, c.t, k[i], kl[i]);
            w_str(&c.w, v[i], vl[i]);
        }
        st = send_acked(&c);
    }
    return call_end(&c, st);
}

/* cohort's barrier from ADD + WAIT: the n-th arrival sets "<name>/done";
 * an arrival after that is an error, as on cohort's server. */
static cohort_status t_barrier(cohort_store *s, const void *name, size_t nl, int n,
                               int timeout_ms)
{
    char kb[COH_PROTO_MAX_JOB + 1100];
    if (nl > 1024)
        return coh_err_set(coh_store_err(s), COHORT_ERR_INVALID, "barrier name too long");
    memcpy(kb, name, nl);
    memcpy(kb + nl, "/arrived", 9);
    int64_t cnt = 0;
    cohort_status st = t_add(s, kb, nl + 8, 1, &cnt);
    if (st)
        return st;
    if (cnt > n)
        return coh_err_set(coh_store_err(s), COHORT_ERR_INVALID,
                           "barrier '%.*s' already completed (barrier names are single use)",
                           (int)COH_MIN(nl, 200), (const char *)name);
    memcpy(kb + nl, "/done", 6);
    if (cnt == n)
        return t_set(s, kb, nl + 5, "1", 1);
    const void *kp[1] = {kb};
    size_t kl = nl + 5;
    return t_wait(s, kp, &kl, 1, 0, timeout_ms, NULL);
}

static cohort_status t_flush(cohort_store *s)
{
    call c;
    cohort_status st = call_begin(&c, s, coh_store_timeout(s), "flush");
    if (!st)
        st = send_acked(&c);
    return call_end(&c, st);
}

const coh_store_backend coh_store_torch_backend = {
    .scheme = "torch",
    .connect = t_connect,
    .close = t_close,
    .set = t_set,
    .get = t_get,
    .add = t_add,
    .compare_set = t_cas,
    .check = t_check,
    .wait = t_wait,
    .del = t_del,
    .num_keys = t_num_keys,
    .list = t_list,
    .multi_get = t_multi_get,
    .multi_set = t_multi_set,
    .append = t_append,
    .barrier = t_barrier,
    .set_nowait = NULL,
    .flush = t_flush,
};
