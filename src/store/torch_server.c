/*
 * torch_server.c - the store server's PyTorch TCPStore listener.
 *
 * A torch connection is an ordinary server connection (same event loop,
 * same limits, same keyspace code) with two adapters:
 *
 * - input: coh_torch_feed parses TCPStore requests (torch_proto.c) and turns
 *   each into the cohort request that means the same (coh_kv_handle), so
 *   keys, values, waiters and their memory are those of the job the
 *   listener serves. A request still arriving is buffered, charged to the
 *   server's memory, and bounded by the frame limit; it blocks nobody.
 * - output: every reply the keyspace code queues for a torch connection
 *   comes through coh_torch_out as a cohort reply frame and is rewritten in
 *   TCPStore's form. The request id of each cohort request we issue carries
 *   in its low byte what the reply is to become (a TCPStore request has no
 *   id; replies go out in the order they are produced, as in torch).
 *
 * TCPStore has no way to report an error to its client. Where cohort would
 * answer with an error (memory limit, a value over the limit, ADD on a value
 * that is not a number, an unknown op) the server logs one line naming the
 * client and the cause, and closes the connection: the client's call fails
 * at once instead of receiving a wrong answer.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "store/server_int.h"
#include "store/torch.h"
#include "store/torch_proto.h"
#include "util/addr.h"

/* What a cohort reply becomes (low byte of the request id). */
enum {
    K_ACK = 1,   /* nothing (SET, APPEND, MULTI_SET, QUEUE_PUSH); an error closes */
    K_VALUE,     /* GET: u64 length + value; absent: empty */
    K_CAS,       /* u64 length + value after the call (torch: expected when absent) */
    K_ADD,       /* i64 */
    K_CHECK,     /* u8 READY 0 / NOT_READY 1 */
    K_WAIT,      /* u8 STOP_WAITING 0 */
    K_NUMKEYS,   /* i64 */
    K_DELETE,    /* i64 deleted */
    K_LIST,      /* i64 n, n * (u64 length + key) */
    K_INTERNAL,  /* kept for the handler that issued it (icap) */
};

#define TORCH_MAX_ITEMS (128u * 1024) /* keys per request: torch's own bound */
#define KEEP_BUF 4096                 /* buffers kept between requests */

struct coh_torch_srv {
    job *job;
    dl bwait; /* barrier arrivals still waiting, all connections */
};

typedef struct coh_torch_conn {
    int version;
    uint8_t *buf; /* the unparsed tail: at most one request still arriving */
    size_t len, cap, need;
    coh_wr tx;    /* cohort reply bytes being assembled */
    coh_wr items; /* re-encoded keys of a multi-key request */
    coh_wr icap;  /* reply to an internal request */
    coh_wr out;   /* TCPStore reply being built */
    const coh_slice *cas_exp;
    uint32_t seq;
} coh_torch_conn;

/* A BARRIER arrival waiting for the rest (torch 2.x). */
typedef struct bwaiter {
    dl node;
    conn *c;
    job *j;
    size_t cost;
    uint32_t klen;
    uint8_t key[];
} bwaiter;

static void trim(coh_wr *w)
{
    w->len = 0;
    w->oom = 0;
    if (w->cap > 64 * 1024)
        coh_wr_free(w);
}

/* Logs why and closes c once what is queued before is written. */
static void tfail(conn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tfail(conn *c, const char *fmt, ...)
{
    if (c->closed || c->closing)
        return;
    char msg[300];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    coh_warn("store: torch client %s: %s: closing the connection", c->peer, msg);
    coh_srv_close_later(c);
}

static void put_u64(coh_wr *w, uint64_t v)
{
    uint8_t b[8];
    coh_put_u64(b, v);
    coh_wr_raw(w, b, 8);
}

static void emit(conn *c, coh_wr *w)
{
    if (w->oom) {
        tfail(c, "out of memory building a reply");
        return;
    }
    coh_srv_send_raw(c, w->p, w->len);
}

static void emit_u8(conn *c, uint8_t v) { coh_srv_send_raw(c, &v, 1); }

static void emit_i64(conn *c, int64_t v)
{
    uint8_t b[8];
    coh_put_u64(b, (uint64_t)v);
    coh_srv_send_raw(c, b, 8);
}

static void emit_bytes(conn *c, const void *p, size_t n)
{
    coh_wr *w = &c->torch->out;
    w->len = 0;
    put_u64(w, n);
    coh_wr_raw(w, p, n);
    emit(c, w);
    trim(w);
}

/* ---- output: cohort reply frame -> TCPStore reply ---- */

static void translate(conn *c, const uint8_t *f, size_t flen)
{
    coh_torch_conn *t = c->torch;
    uint8_t op = f[3];
    uint32_t id = coh_get_u32(f + 4);
    if (op == COH_OP_ERROR)
        return; /* the server is failing c; it closes after this */
    uint8_t kind = (uint8_t)id;
    if (kind == K_INTERNAL) {
        t->icap.len = 0;
        t->icap.oom = 0;
        coh_wr_raw(&t->icap, f, flen);
        return;
    }
    coh_rd r;
    coh_rd_init(&r, f + COH_PROTO_HDR, flen - COH_PROTO_HDR);
    uint8_t st = coh_rd_u8(&r);
    if (st == COHORT_ERR_NOT_FOUND && kind == K_VALUE) {
        emit_i64(c, 0); /* torch 2.x answers an absent key with an empty value */
        return;
    }
    if (st != COHORT_OK || r.err) {
        uint32_t ml = 0;
        const uint8_t *m = coh_rd_bytes(&r, &ml);
        tfail(c, "%.*s", m ? (int)COH_MIN(ml, 200u) : 0, m ? (const char *)m : "");
        return;
    }
    uint32_t n = 0;
    const uint8_t *v;
    switch (kind) {
    case K_ACK:
        return;
    case K_VALUE:
        v = coh_rd_bytes(&r, &n);
        if (r.err)
            break;
        emit_bytes(c, v, n);
        return;
    case K_CAS: {
        uint8_t exists = coh_rd_u8(&r);
        v = coh_rd_bytes(&r, &n);
        if (r.err)
            break;
        if (exists)
            emit_bytes(c, v, n);
        else if (t->cas_exp)
            emit_bytes(c, t->cas_exp->p, t->cas_exp->n);
        else
            emit_bytes(c, NULL, 0);
        return;
    }
    case K_ADD:
    case K_NUMKEYS: {
        int64_t x = coh_rd_i64(&r);
        if (!r.err)
            emit_i64(c, x);
        return;
    }
    case K_CHECK: {
        uint8_t all = coh_rd_u8(&r);
        if (!r.err)
            emit_u8(c, all ? 0 : 1);
        return;
    }
    case K_WAIT:
        emit_u8(c, 0);
        return;
    case K_DELETE: {
        uint8_t d = coh_rd_u8(&r);
        if (!r.err)
            emit_i64(c, d);
        return;
    }
    case K_LIST: {
        uint32_t cnt = coh_rd_u32(&r);
        coh_wr *w = &t->out;
        w->len = 0;
        put_u64(w, cnt);
        for (uint32_t i = 0; i < cnt && !r.err; i++) {
            v = coh_rd_bytes(&r, &n);
            if (r.err)
                break;
            put_u64(w, n);
            coh_wr_raw(w, v, n);
        }
        if (!r.err)
            emit(c, w);
        trim(w);
        if (!r.err)
            return;
        break;
    }
    default:
        break;
    }
    tfail(c, "internal error: unexpected reply (kind %u)", kind);
}

int coh_torch_out(conn *c, const void *p, size_t n)
{
    coh_torch_conn *t = c->torch;
    if (!p) {
        tfail(c, "out of memory while replying");
        return -1;
    }
    if (n > 64 * 1024) {
        /* The rewritten reply is queued as a copy charged to the
         * connection: refuse one its budgets cannot hold. */
        coh_acct a = coh_srv_acct_conn(c);
        if (coh_acct_room(&a) < n) {
            tfail(c, "a reply of %zu bytes does not fit the connection's memory budget (%zu "
                     "bytes left)",
                  n, coh_acct_room(&a));
            return -1;
        }
    }
    coh_wr *x = &t->tx;
    coh_wr_raw(x, p, n);
    if (x->oom) {
        tfail(c, "out of memory while replying");
        x->len = 0;
        x->oom = 0;
        return -1;
    }
    size_t off = 0;
    while (x->len - off >= COH_PROTO_HDR) {
        size_t fl = COH_PROTO_HDR + (size_t)coh_get_u32(x->p + off + 8);
        if (x->len - off < fl)
            break;
        translate(c, x->p + off, fl);
        off += fl;
    }
    if (off) {
        memmove(x->p, x->p + off, x->len - off);
        x->len -= off;
    }
    if (!x->len)
        trim(x);
    return c->closed ? -1 : 0;
}

/* ---- requests ---- */

static void kv(conn *c, coh_req *q, uint8_t kind)
{
    coh_torch_conn *t = c->torch;
    q->id = (++t->seq << 8) | kind;
    coh_kv_handle(c, q);
}

/* An internal request (answered at once): its status, its body in *body. */
static int internal(conn *c, coh_req *q, coh_rd *body)
{
    coh_torch_conn *t = c->torch;
    t->icap.len = 0;
    kv(c, q, K_INTERNAL);
    if (c->closed || t->icap.len < COH_PROTO_HDR + 1)
        return -1;
    coh_rd_init(body, t->icap.p + COH_PROTO_HDR + 1, t->icap.len - COH_PROTO_HDR - 1);
    return t->icap.p[COH_PROTO_HDR];
}

/* TCPStore items (u64 lengths) -> cohort items (u32 lengths). */
static int reencode(conn *c, const coh_torch_req *rq, coh_req *q)
{
    coh_wr *w = &c->torch->items;
    w->len = 0;
    size_t off = 0;
    for (uint64_t i = 0; i < rq->n; i++) {
        coh_slice k, v;
        coh_torch_next(rq, &off, &k, &v);
        coh_wr_bytes(w, k.p, k.n);
        if (rq->op == TQ_MULTI_SET)
            coh_wr_bytes(w, v.p, v.n);
    }
    if (w->oom) {
        tfail(c, "out of memory decoding a %s of %" PRIu64 " keys", coh_torch_op_name(rq->op),
              rq->n);
        return -1;
    }
    q->n = (uint32_t)rq->n;
    coh_rd_init(&q->items, w->p, w->len);
    return 0;
}

/* Queue values: a sequence of (u64 length + element), kept under the key. */
static int64_t queue_count(const uint8_t *p, size_t n)
{
    int64_t cnt = 0;
    while (n) {
        if (n < 8)
            return -1;
        uint64_t l = coh_get_u64(p);
        if (l > n - 8)
            return -1;
        p += 8 + l;
        n -= 8 + (size_t)l;
        cnt++;
    }
    return cnt;
}

static void bwaiter_free(struct cohort_store_server *s, bwaiter *b)
{
    dl_del(&b->node);
    coh_acct a = coh_srv_acct_conn(b->c);
    coh_acct_release(&a, b->cost);
    coh_free(b);
    (void)s;
}

static void h_barrier(conn *c, const coh_torch_req *rq)
{
    struct cohort_store_server *s = c->srv;
    coh_req q = {.op = COH_OP_ADD, .key = rq->key, .delta = 1};
    coh_rd r;
    int st = internal(c, &q, &r);
    if (st < 0)
        return;
    if (st != COHORT_OK) {
        tfail(c, "BARRIER: the barrier key does not hold a count");
        return;
    }
    int64_t count = coh_rd_i64(&r);
    if (count >= rq->num) {
        dl *h = &s->torch->bwait;
        for (dl *p = h->next, *nx; p != h; p = nx) {
            nx = p->next;
            bwaiter *b = dl_entry(p, bwaiter, node);
            if (b->j == c->job && b->klen == rq->key.n && !memcmp(b->key, rq->key.p, b->klen)) {
                emit_u8(b->c, 0);
                bwaiter_free(s, b);
            }
        }
        emit_u8(c, 0);
        return;
    }
    size_t cost = sizeof(bwaiter) + rq->key.n;
    coh_acct a = coh_srv_acct_conn(c);
    coh_budget *lim = coh_acct_charge(&a, cost);
    if (lim) {
        char msg[256];
        coh_srv_limit_hit(c, lim, cost, "waiting in a BARRIER", msg, sizeof msg);
        tfail(c, "BARRIER: %s", msg);
        return;
    }
    bwaiter *b = coh_malloc(cost);
    if (!b) {
        coh_acct_release(&a, cost);
        tfail(c, "BARRIER: out of memory");
        return;
    }
    b->c = c;
    b->j = c->job;
    b->cost = cost;
    b->klen = rq->key.n;
    memcpy(b->key, rq->key.p, rq->key.n);
    dl_push(&s->torch->bwait, &b->node);
}

static void drop_barriers(conn *c)
{
    struct cohort_store_server *s = c->srv;
    if (!s->torch)
        return;
    dl *h = &s->torch->bwait;
    for (dl *p = h->next, *nx; p != h; p = nx) {
        nx = p->next;
        bwaiter *b = dl_entry(p, bwaiter, node);
        if (b->c == c)
            bwaiter_free(s, b);
    }
}

static void h_queue_pop(conn *c, const coh_torch_req *rq, int pop)
{
    coh_torch_conn *t = c->torch;
    coh_req q = {.op = COH_OP_GET, .flags = COH_WAITF_NOWAIT, .key = rq->key};
    coh_rd r;
    int st = internal(c, &q, &r);
    if (st < 0)
        return;
    if (st == COHORT_ERR_NOT_FOUND) {
        emit_i64(c, 0);
        return;
    }
    uint32_t n = 0;
    const uint8_t *v = coh_rd_bytes(&r, &n);
    int64_t cnt = st == COHORT_OK && !r.err ? queue_count(v, n) : -1;
    if (cnt < 0) {
        tfail(c, "%s: key is not a queue", coh_torch_op_name(rq->op));
        return;
    }
    emit_i64(c, cnt);
    if (!pop || cnt == 0)
        return;
    uint64_t l = coh_get_u64(v);
    emit_bytes(c, v + 8, (size_t)l);
    /* The rest stays queued (copied out of icap, which the SET reuses). */
    coh_req u = {.key = rq->key};
    if (cnt == 1) {
        u.op = COH_OP_DELETE;
    } else {
        coh_wr *w = &t->items;
        w->len = 0;
        coh_wr_raw(w, v + 8 + l, n - 8 - (size_t)l);
        if (w->oom) {
            tfail(c, "QUEUE_POP: out of memory");
            return;
        }
        u.op = COH_OP_SET;
        u.val.p = w->p;
        u.val.n = (uint32_t)w->len;
    }
    st = internal(c, &u, &r);
    trim(&t->items);
    if (st > 0)
        tfail(c, "QUEUE_POP: could not store the rest of the queue");
}

static void handle(conn *c, const coh_torch_req *rq)
{
    coh_torch_conn *t = c->torch;
    coh_req q;
    memset(&q, 0, sizeof q);
    q.key = rq->key;
    switch (rq->op) {
    case TQ_VALIDATE:
        if (rq->u32 != COH_TORCH_MAGIC)
            tfail(c, "VALIDATE with a wrong magic 0x%08x", rq->u32);
        return;
    case TQ_PING: {
        uint8_t b[4];
        coh_put_u32(b, rq->u32);
        coh_srv_send_raw(c, b, 4);
        return;
    }
    case TQ_SET:
    case TQ_APPEND:
        q.op = rq->op == TQ_SET ? COH_OP_SET : COH_OP_APPEND;
        q.val = rq->val;
        kv(c, &q, K_ACK);
        return;
    case TQ_CAS:
        q.op = COH_OP_CAS;
        q.exp = rq->exp;
        q.val = rq->val;
        t->cas_exp = &rq->exp;
        kv(c, &q, K_CAS);
        t->cas_exp = NULL;
        return;
    case TQ_GET:
        q.op = COH_OP_GET;
        q.flags = COH_WAITF_NOWAIT;
        kv(c, &q, K_VALUE);
        return;
    case TQ_ADD:
        q.op = COH_OP_ADD;
        q.delta = rq->num;
        kv(c, &q, K_ADD);
        return;
    case TQ_CHECK:
    case TQ_WAIT:
    case TQ_MULTI_SET:
        if (reencode(c, rq, &q) < 0)
            return;
        q.op = rq->op == TQ_CHECK ? COH_OP_CHECK
               : rq->op == TQ_WAIT ? COH_OP_WAIT
                                   : COH_OP_MULTI_SET;
        kv(c, &q, rq->op == TQ_CHECK ? K_CHECK : rq->op == TQ_WAIT ? K_WAIT : K_ACK);
        trim(&t->items);
        return;
    case TQ_MULTI_GET: {
        /* One GET per key: an absent key reads as empty, like torch 2.x. */
        size_t off = 0;
        for (uint64_t i = 0; i < rq->n && !c->closed && !c->closing; i++) {
            coh_slice k, v;
            coh_torch_next(rq, &off, &k, &v);
            coh_req g = {.op = COH_OP_GET, .flags = COH_WAITF_NOWAIT, .key = k};
            kv(c, &g, K_VALUE);
        }
        return;
    }
    case TQ_NUM_KEYS:
        q.op = COH_OP_NUM_KEYS;
        q.key.n = 0;
        kv(c, &q, K_NUMKEYS);
        return;
    case TQ_LIST_KEYS:
        q.op = COH_OP_LIST;
        q.key.n = 0;
        kv(c, &q, K_LIST);
        return;
    case TQ_DELETE:
        q.op = COH_OP_DELETE;
        kv(c, &q, K_DELETE);
        return;
    case TQ_CANCEL_WAIT:
        /* Every wait of the connection (torch has at most one). A wait
         * answered before this arrived was answered before this reply. */
        while (!dl_empty(&c->waiters) && !c->closed) {
            waiter *w = dl_entry(c->waiters.next, waiter, cnode);
            coh_req x = {.op = COH_OP_CANCEL, .target = w->id};
            coh_kv_handle(c, &x);
        }
        drop_barriers(c);
        emit_u8(c, 1);
        return;
    case TQ_QUEUE_PUSH: {
        coh_wr *w = &t->items;
        w->len = 0;
        put_u64(w, rq->val.n);
        coh_wr_raw(w, rq->val.p, rq->val.n);
        if (w->oom) {
            tfail(c, "QUEUE_PUSH: out of memory");
            return;
        }
        q.op = COH_OP_APPEND;
        q.val.p = w->p;
        q.val.n = (uint32_t)w->len;
        kv(c, &q, K_ACK);
        trim(w);
        return;
    }
    case TQ_QUEUE_POP:
    case TQ_QUEUE_LEN:
        h_queue_pop(c, rq, rq->op == TQ_QUEUE_POP);
        return;
    case TQ_BARRIER:
        h_barrier(c, rq);
        return;
    case TQ_WATCH_KEY:
        tfail(c, "WATCH_KEY (torch 1.x watchKey) is not supported by cohort-store");
        return;
    default:
        tfail(c, "unsupported op %u", rq->op);
        return;
    }
}

/* ---- input ---- */

static void limits(conn *c, coh_torch_limits *l)
{
    struct cohort_store_server *s = c->srv;
    l->max_key = s->max_key;
    l->max_value = s->max_value;
    l->max_items = TORCH_MAX_ITEMS;
    l->max_request = s->max_frame;
}

/* Grows the unfinished-request buffer to hold want bytes, charged to the
 * connection, its job and the server (refused past any of their limits). */
static int reserve(conn *c, size_t want)
{
    coh_torch_conn *t = c->torch;
    if (want <= t->cap)
        return 0;
    size_t ncap = t->cap ? t->cap : 256;
    while (ncap < want)
        ncap *= 2;
    size_t more = ncap - t->cap;
    coh_acct a = coh_srv_acct_conn(c);
    coh_budget *b = coh_acct_charge(&a, more);
    if (b) {
        char msg[256];
        coh_srv_limit_hit(c, b, more, "buffering a TCPStore request", msg, sizeof msg);
        tfail(c, "%s (a %zu-byte request is arriving)", msg, want);
        return -1;
    }
    uint8_t *nb = coh_realloc(t->buf, ncap);
    if (!nb) {
        coh_acct_release(&a, more);
        tfail(c, "out of memory for a %zu-byte request", want);
        return -1;
    }
    t->buf = nb;
    t->cap = ncap;
    return 0;
}

static void release_buf(conn *c)
{
    coh_torch_conn *t = c->torch;
    coh_acct a = coh_srv_acct_conn(c);
    coh_acct_release(&a, t->cap);
    coh_free(t->buf);
    t->buf = NULL;
    t->cap = t->len = t->need = 0;
}

/* Parses one request at p. > 0: handled, bytes used; 0: incomplete (need
 * set); -1: c is failing. */
static long one(conn *c, const uint8_t *p, size_t n)
{
    coh_torch_conn *t = c->torch;
    coh_torch_limits lim;
    limits(c, &lim);
    coh_torch_req rq;
    size_t need = 0;
    char err[200];
    long r = coh_torch_parse(p, n, &t->version, &lim, &rq, &need, err, sizeof err);
    if (r == COH_TORCH_BAD) {
        tfail(c, "%s", err);
        return -1;
    }
    if (r == COH_TORCH_NEED) {
        t->need = need;
        return 0;
    }
    t->need = 0;
    handle(c, &rq);
    return c->closed || c->closing ? -1 : r;
}

/* The buffer only ever holds the one request that is still arriving: bytes
 * are added up to what it needs, so complete requests behind it are parsed
 * in place by the caller's loop (and stay subject to its turn bound). */
size_t coh_torch_feed(conn *c, const uint8_t *p, size_t n, unsigned max_reqs, size_t max_bytes)
{
    coh_torch_conn *t = c->torch;
    size_t used = 0, work = 0;
    unsigned reqs = 0;
    while (t->len && used < n) {
        size_t take = COH_MIN(n - used, t->need - t->len);
        if (reserve(c, t->len + take) < 0)
            return n;
        memcpy(t->buf + t->len, p + used, take);
        t->len += take;
        used += take;
        if (t->len < t->need)
            return used; /* still arriving */
        long r = one(c, t->buf, t->len);
        if (r < 0)
            return n;
        if (r > 0) {
            work += (size_t)r;
            reqs++;
            t->len = 0;
            if (t->cap > KEEP_BUF)
                release_buf(c);
        }
    }
    while (used < n && !c->closed && !c->closing) {
        if (reqs >= max_reqs || work >= max_bytes || coh_srv_backlogged(c))
            return used; /* the rest waits: the caller keeps it */
        long r = one(c, p + used, n - used);
        if (r < 0)
            return n;
        if (r == 0) {
            /* The tail is the start of one request: keep it. */
            if (reserve(c, COH_MAX(t->need, n - used)) < 0)
                return n;
            memcpy(t->buf, p + used, n - used);
            t->len = n - used;
            return n;
        }
        used += (size_t)r;
        work += (size_t)r;
        reqs++;
    }
    return used;
}

int coh_torch_partial(const conn *c) { return c->torch && c->torch->len > 0; }

/* ---- connections and the listener ---- */

int coh_torch_conn_init(conn *c)
{
    struct cohort_store_server *s = c->srv;
    coh_torch_conn *t = coh_calloc(1, sizeof *t);
    if (!t)
        return -1;
    coh_wr_init(&t->tx);
    coh_wr_init(&t->items);
    coh_wr_init(&t->icap);
    coh_wr_init(&t->out);
    c->torch = t;
    /* TCPStore clients do not authenticate: the listener's job is theirs. */
    c->authed = 1;
    c->job = s->torch->job;
    c->gen = 0;
    dl_push(&c->job->conns, &c->jnode);
    c->job->nconns++;
    return 0;
}

void coh_torch_conn_close(conn *c)
{
    coh_torch_conn *t = c->torch;
    if (!t)
        return;
    drop_barriers(c);
    if (t->buf)
        release_buf(c);
    coh_wr_free(&t->tx);
    coh_wr_free(&t->items);
    coh_wr_free(&t->icap);
    coh_wr_free(&t->out);
    coh_free(t);
    c->torch = NULL;
}

cohort_status cohort_store_server_torch_listen(cohort_store_server *s, const char *host, int port,
                                               const char *job_id)
{
    if (!s || s->thr_started || s->torch)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "torch listener: add it once, before the server runs");
    if (port < 0 || port > 65535)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "torch listener: port %d out of range", port);
    job *j = NULL;
    int njobs = 0;
    pthread_mutex_lock(&s->jobs_mu);
    for (job *x = s->jobs; x; x = x->next) {
        njobs++;
        if (job_id && !strcmp(x->id, job_id))
            j = x;
    }
    if (!job_id && njobs == 1)
        j = s->jobs;
    pthread_mutex_unlock(&s->jobs_mu);
    if (!j && job_id)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "torch listener: no job '%s' on this server",
                           job_id);
    if (!j)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "torch listener: name the job it serves (the server has %d)", njobs);
    struct coh_torch_srv *ts = coh_calloc(1, sizeof *ts);
    if (!ts)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "torch listener");
    ts->job = j;
    dl_init(&ts->bwait);
    struct addrinfo *res = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gr = coh_addr_resolve(host, ps, COH_RESOLVE_PASSIVE, &res);
    if (gr != 0) {
        coh_free(ts);
        return coh_err_set(NULL, COHORT_ERR_INVALID, "torch listener: cannot resolve '%s': %s",
                           host ? host : "*", coh_addr_strerror(gr));
    }
    int err = 0, fd = -1;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) < 0 || listen(fd, SOMAXCONN) < 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    coh_addr_freeinfo(res);
    if (fd < 0) {
        coh_free(ts);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "bind", err,
                           "torch listener: cannot listen on %s:%d", host ? host : "*", port);
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    s->tport = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                              : ((struct sockaddr_in *)&ss)->sin_port);
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = &s->tlfd};
    if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
        int e2 = errno;
        close(fd);
        coh_free(ts);
        return coh_err_sys(NULL, COHORT_ERR_SYSTEM, "epoll_ctl", e2, "torch listener");
    }
    s->tlfd = fd;
    s->torch = ts;
    return COHORT_OK;
}

int cohort_store_server_torch_port(const cohort_store_server *s) { return s ? s->tport : 0; }

void coh_torch_srv_free(cohort_store_server *s)
{
    if (!s->torch)
        return;
    /* Waiters leave with their connections (loop_shutdown closed them). */
    while (!dl_empty(&s->torch->bwait)) {
        bwaiter *b = dl_entry(s->torch->bwait.next, bwaiter, node);
        dl_del(&b->node);
        coh_free(b);
    }
    coh_free(s->torch);
    s->torch = NULL;
}
