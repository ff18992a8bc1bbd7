/*
 * tcp_ops.c - the tcp store backend's operations over the handle's
 * connection (tcp_conn.h), the backend table and the extras of tcp.h.
 *
 * Every operation is one request and one reply, through one path (req):
 * describe it for messages and check its keys and values against the
 * server's limits before anything is built (req_key, req_keys), build the
 * frame (req_begin + fields), send it and wait (req_call), decode the
 * reply's body and refuse one that is short or has bytes left over
 * (req_body_ok), free it (req_done). The wrappers below only add their
 * fields and read their results.
 */
#include <stdio.h>
#include <string.h>

#include "store/backend.h"
#include "store/proto.h"
#include "cohort_store.h"
#include "store/tcp_conn.h"

/* One operation in flight. */
typedef struct req {
    cohort_store *s;
    char what[200]; /* "get 'key'": prefixes every error of the call */
    coh_wr w;       /* the request frame */
    size_t at;
    uint8_t op;
    coh_reply r;    /* after req_call: the reply, pointing into pl */
    uint8_t *pl;
} req;

/* Non-waiting ops finish within the handle's default timeout. */
static uint64_t op_deadline(cohort_store *s)
{
    return coh_deadline_ns(coh_store_timeout(s));
}

/* Deadline of a waiting op: timeout 0 asks the server not to wait (the
 * reply itself then gets the handle's default time). */
static uint64_t wait_deadline(cohort_store *s, int timeout_ms, uint8_t *flags)
{
    if (timeout_ms == 0) {
        *flags |= COH_WAITF_NOWAIT;
        return op_deadline(s);
    }
    return coh_deadline_ns(timeout_ms);
}

/* Key description for messages: printable prefix of the key. */
static const char *kdesc(char *out, size_t n, const char *op, const void *k, size_t kl)
{
    const uint8_t *p = k;
    size_t o = (size_t)snprintf(out, n, "%s '", op);
    for (size_t i = 0; i < kl && o + 6 < n; i++) {
        if (i == 64) {
            o += (size_t)snprintf(out + o, n - o, "...");
            break;
        }
        if (p[i] >= 0x20 && p[i] < 0x7f)
            out[o++] = (char)p[i];
        else
            o += (size_t)snprintf(out + o, n - o, "\\x%02x", p[i]);
    }
    if (o + 2 < n) {
        out[o++] = '\'';
        out[o] = 0;
    }
    return out;
}

/* Copies a reply value into a fresh NUL-terminated malloc'd buffer. */
static void *dup_value(const uint8_t *p, size_t n)
{
    uint8_t *d = coh_malloc(n + 1);
    if (!d)
        return NULL;
    if (n)
        memcpy(d, p, n);
    d[n] = 0;
    return d;
}

/* ---- the one request path ---- */

/* A single-key op ("get 'k'"; a prefix or barrier name counts as the key):
 * describes it and checks the key's length. */
static cohort_status req_key(req *q, cohort_store *s, const char *verb, const void *k, size_t kl)
{
    q->s = s;
    q->pl = NULL;
    kdesc(q->what, 160, verb, k, kl);
    return coh_tconn_check_key(s, q->what, kl);
}

/* A multi-key op: described by its first key ("wait 'a'", with more:
 * " (+2 more keys)"); every key, and every value when vl is given, checked
 * in order. */
static cohort_status req_keys(req *q, cohort_store *s, const char *verb, int more,
                              const void *const *k, const size_t *kl, const size_t *vl, int n)
{
    q->s = s;
    q->pl = NULL;
    kdesc(q->what, more ? sizeof q->what : 160, verb, n ? k[0] : "", n ? kl[0] : 0);
    if (more && n > 1) {
        size_t o = strlen(q->what);
        snprintf(q->what + o, sizeof q->what - o, " (+%d more keys)", n - 1);
    }
    cohort_status st;
    for (int i = 0; i < n; i++)
        if ((st = coh_tconn_check_key(s, q->what, kl[i])) ||
            (vl && (st = coh_tconn_check_val(s, q->what, vl[i]))))
            return st;
    return COHORT_OK;
}

/* Starts the frame; reserve (bytes, 0: grow as needed) makes a large
 * request one allocation. */
static void req_begin(req *q, uint8_t op, size_t reserve)
{
    q->op = op;
    coh_wr_init(&q->w);
    if (reserve)
        coh_wr_reserve(&q->w, reserve);
    q->at = coh_wr_begin_frame(&q->w);
}

/* Sends the request and waits for its reply until deadline. */
static cohort_status req_call(req *q, uint64_t deadline)
{
    coh_wr_end_frame(&q->w, q->at, q->op, 0);
    cohort_status st = coh_tconn_call(q->s, &q->w, deadline, q->what, &q->r, &q->pl);
    coh_wr_free(&q->w);
    return st;
}

static cohort_status req_malformed(req *q)
{
    return coh_err_set(coh_store_err(q->s), COHORT_ERR_PROTOCOL, "%s: malformed reply", q->what);
}

/* After the results were read: the body held exactly them. */
static cohort_status req_body_ok(req *q)
{
    return q->r.body.err || q->r.body.n ? req_malformed(q) : COHORT_OK;
}

static cohort_status req_done(req *q, cohort_status st)
{
    coh_free(q->pl);
    q->pl = NULL;
    return st;
}

/* A request with no fields (PING, STATS) on a handle that may be NULL or
 * closed (the extras are called with any handle). */
static cohort_status req_bare(req *q, cohort_store *s, uint8_t op, const char *what)
{
    q->s = s;
    q->pl = NULL; /* req_done follows a refusal too */
    if (!s || coh_store_priv(s) == NULL)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "%s: NULL or closed handle", what);
    snprintf(q->what, sizeof q->what, "%s", what);
    req_begin(q, op, 0);
    return req_call(q, op_deadline(s));
}

/* ---- the operations ---- */

/* SET, SET_NOREPLY, APPEND: key + value. */
static cohort_status req_kv(req *q, cohort_store *s, uint8_t op, const char *verb, const void *k,
                            size_t kl, const void *v, size_t vl)
{
    cohort_status st = req_key(q, s, verb, k, kl);
    if (st || (st = coh_tconn_check_val(s, q->what, vl)))
        return st;
    req_begin(q, op, COH_PROTO_HDR + 8 + kl + vl);
    coh_wr_bytes(&q->w, k, kl);
    coh_wr_bytes(&q->w, v, vl);
    return COHORT_OK;
}

static cohort_status tcp_set(cohort_store *s, const void *k, size_t kl, const void *v, size_t vl)
{
    req q;
    cohort_status st = req_kv(&q, s, COH_OP_SET, "set", k, kl, v, vl);
    return st ? st : req_done(&q, req_call(&q, op_deadline(s)));
}

static cohort_status tcp_append(cohort_store *s, const void *k, size_t kl, const void *v,
                                size_t vl)
{
    req q;
    cohort_status st = req_kv(&q, s, COH_OP_APPEND, "append", k, kl, v, vl);
    return st ? st : req_done(&q, req_call(&q, op_deadline(s)));
}

/* SET_NOREPLY: returns once the frame is in the socket. The server applies
 * it in order with this connection's other requests and answers only if it
 * fails; that answer is kept for the next call or cohort_store_flush. */
static cohort_status tcp_set_nowait(cohort_store *s, const void *k, size_t kl, const void *v,
                                    size_t vl)
{
    req q;
    cohort_status st = req_kv(&q, s, COH_OP_SET_NOREPLY, "set_nowait", k, kl, v, vl);
    if (st)
        return st;
    coh_wr_end_frame(&q.w, q.at, q.op, 0);
    st = coh_tconn_send(s, &q.w, op_deadline(s), q.what);
    coh_wr_free(&q.w);
    return st;
}

/* A round trip (PING) behind every earlier set_nowait: the connection is
 * FIFO, so once it is answered each of them was applied or its failure is
 * in hand. */
static cohort_status tcp_flush(cohort_store *s)
{
    req q;
    cohort_status st = req_done(&q, req_bare(&q, s, COH_OP_PING, "flush"));
    return st ? st : coh_tconn_take_failure(s, "flush");
}

static cohort_status tcp_get(cohort_store *s, const void *k, size_t kl, void **v, size_t *vl,
                             int timeout_ms)
{
    req q;
    cohort_status st = req_key(&q, s, "get", k, kl);
    if (st)
        return st;
    uint8_t flags = 0;
    uint64_t dl = wait_deadline(s, timeout_ms, &flags);
    req_begin(&q, COH_OP_GET, 0);
    coh_wr_u8(&q.w, flags);
    coh_wr_bytes(&q.w, k, kl);
    if ((st = req_call(&q, dl)))
        return st;
    uint32_t n;
    const uint8_t *p = coh_rd_bytes(&q.r.body, &n);
    if ((st = req_body_ok(&q)))
        return req_done(&q, st);
    /* The reply buffer becomes the value: [status][u32 len][value] is at
     * least 5 bytes longer than the value, so it also holds the NUL. */
    memmove(q.pl, p, n);
    q.pl[n] = 0;
    *v = q.pl;
    *vl = n;
    return COHORT_OK;
}

static cohort_status tcp_add(cohort_store *s, const void *k, size_t kl, int64_t d, int64_t *res)
{
    req q;
    cohort_status st = req_key(&q, s, "add", k, kl);
    if (st)
        return st;
    req_begin(&q, COH_OP_ADD, 0);
    coh_wr_bytes(&q.w, k, kl);
    coh_wr_i64(&q.w, d);
    if ((st = req_call(&q, op_deadline(s))))
        return st;
    *res = coh_rd_i64(&q.r.body);
    return req_done(&q, req_body_ok(&q));
}

static cohort_status tcp_cas(cohort_store *s, const void *k, size_t kl, const void *e, size_t el,
                             const void *d, size_t dl, void **cur, size_t *curl)
{
    req q;
    cohort_status st = req_key(&q, s, "compare_set", k, kl);
    if (st || (st = coh_tconn_check_val(s, q.what, dl)))
        return st;
    req_begin(&q, COH_OP_CAS, COH_PROTO_HDR + 12 + kl + el + dl);
    coh_wr_bytes(&q.w, k, kl);
    coh_wr_bytes(&q.w, e, el);
    coh_wr_bytes(&q.w, d, dl);
    if ((st = req_call(&q, op_deadline(s))))
        return st;
    uint8_t exists = coh_rd_u8(&q.r.body);
    uint32_t n;
    const uint8_t *p = coh_rd_bytes(&q.r.body, &n);
    if ((st = req_body_ok(&q)))
        ;
    else if (exists && !(*cur = dup_value(p, n)))
        st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s", q.what);
    else
        *curl = exists ? n : 0;
    return req_done(&q, st);
}

/* Encodes u32 n + keys. */
static void put_keys(coh_wr *w, const void *const *k, const size_t *kl, int n)
{
    coh_wr_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++)
        coh_wr_bytes(w, k[i], kl[i]);
}

static cohort_status tcp_check(cohort_store *s, const void *const *k, const size_t *kl, int n,
                               int *all)
{
    req q;
    cohort_status st = req_keys(&q, s, "check", 0, k, kl, NULL, n);
    if (st)
        return st;
    req_begin(&q, COH_OP_CHECK, 0);
    put_keys(&q.w, k, kl, n);
    if ((st = req_call(&q, op_deadline(s))))
        return st;
    *all = coh_rd_u8(&q.r.body);
    return req_done(&q, req_body_ok(&q));
}

static cohort_status tcp_wait(cohort_store *s, const void *const *k, const size_t *kl, int n,
                              int any, int timeout_ms, int *which)
{
    req q;
    cohort_status st = req_keys(&q, s, any ? "wait_any" : "wait", 1, k, kl, NULL, n);
    if (st)
        return st;
    uint8_t flags = any ? COH_WAITF_ANY : 0;
    uint64_t dl = wait_deadline(s, timeout_ms, &flags);
    req_begin(&q, COH_OP_WAIT, 0);
    coh_wr_u8(&q.w, flags);
    put_keys(&q.w, k, kl, n);
    if ((st = req_call(&q, dl)))
        return st;
    uint32_t idx = coh_rd_u32(&q.r.body);
    if (!(st = req_body_ok(&q)) && n && idx >= (uint32_t)n)
        st = req_malformed(&q);
    else if (!st && which)
        *which = (int)idx;
    return req_done(&q, st);
}

/* DELETE, NUM_KEYS, LIST: one key (or prefix) field, the default deadline. */
static cohort_status key_call(req *q, cohort_store *s, const char *verb, uint8_t op,
                              const void *k, size_t kl)
{
    cohort_status st = req_key(q, s, verb, k, kl);
    if (st)
        return st;
    req_begin(q, op, 0);
    coh_wr_bytes(&q->w, k, kl);
    return req_call(q, op_deadline(s));
}

static cohort_status tcp_del(cohort_store *s, const void *k, size_t kl, int *deleted)
{
    req q;
    cohort_status st = key_call(&q, s, "delete", COH_OP_DELETE, k, kl);
    if (st)
        return st;
    *deleted = coh_rd_u8(&q.r.body);
    return req_done(&q, req_body_ok(&q));
}

static cohort_status tcp_num_keys(cohort_store *s, const void *prefix, size_t pl, int64_t *n)
{
    req q;
    cohort_status st = key_call(&q, s, "num_keys under", COH_OP_NUM_KEYS, prefix, pl);
    if (st)
        return st;
    *n = coh_rd_i64(&q.r.body);
    return req_done(&q, req_body_ok(&q));
}

/* Keys come back whole and NUL-terminated (the front end strips a view's
 * prefix in place). A count larger than the reply could hold is a protocol
 * error, checked before the arrays are sized by it. */
static cohort_status tcp_list(cohort_store *s, const void *prefix, size_t pl, char ***keys,
                              size_t **klens, int *n)
{
    req q;
    cohort_status st = key_call(&q, s, "list", COH_OP_LIST, prefix, pl);
    if (st)
        return st;
    coh_rd *b = &q.r.body;
    uint32_t cnt = coh_rd_u32(b);
    if (b->err || cnt > b->n / 4 || cnt > INT32_MAX)
        return req_done(&q, req_malformed(&q));
    char **ks = coh_calloc(cnt ? cnt : 1, sizeof *ks);
    size_t *ls = coh_calloc(cnt ? cnt : 1, sizeof *ls);
    if (!ks || !ls)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s: %u keys", q.what, cnt);
    for (uint32_t i = 0; i < cnt && !st; i++) {
        uint32_t kn;
        const uint8_t *kp = coh_rd_bytes(b, &kn);
        if (b->err)
            st = req_malformed(&q);
        else if (kn < pl)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL,
                             "%s: server returned a key outside the prefix", q.what);
        else if (!(ks[i] = dup_value(kp, kn)))
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s", q.what);
        else
            ls[i] = kn;
    }
    req_done(&q, st);
    if (st) {
        for (uint32_t i = 0; ks && i < cnt; i++)
            coh_free(ks[i]);
        coh_free(ks);
        coh_free(ls);
        return st;
    }
    *keys = ks;
    *klens = ls;
    *n = (int)cnt;
    return COHORT_OK;
}

/* All values or none: on any failure every output is freed and NULL. */
static cohort_status tcp_multi_get(cohort_store *s, const void *const *k, const size_t *kl,
                                   int n, void **v, size_t *vl, int timeout_ms)
{
    req q;
    cohort_status st = req_keys(&q, s, "multi_get", 1, k, kl, NULL, n);
    if (st)
        return st;
    uint8_t flags = 0;
    uint64_t dl = wait_deadline(s, timeout_ms, &flags);
    req_begin(&q, COH_OP_MULTI_GET, 0);
    coh_wr_u8(&q.w, flags);
    put_keys(&q.w, k, kl, n);
    if ((st = req_call(&q, dl)))
        return st;
    for (int i = 0; i < n && !st; i++) {
        uint32_t len;
        const uint8_t *p = coh_rd_bytes(&q.r.body, &len);
        if (q.r.body.err)
            st = req_malformed(&q);
        else if (!(v[i] = dup_value(p, len)))
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s", q.what);
        else
            vl[i] = len;
    }
    if (!st)
        st = req_body_ok(&q);
    if (st)
        for (int i = 0; i < n; i++) {
            coh_free(v[i]);
            v[i] = NULL;
            vl[i] = 0;
        }
    return req_done(&q, st);
}

static cohort_status tcp_multi_set(cohort_store *s, const void *const *k, const size_t *kl,
                                   const void *const *v, const size_t *vl, int n)
{
    req q;
    cohort_status st = req_keys(&q, s, "multi_set", 1, k, kl, vl, n);
    if (st)
        return st;
    size_t total = COH_PROTO_HDR + 4;
    for (int i = 0; i < n; i++)
        total += 8 + kl[i] + vl[i];
    req_begin(&q, COH_OP_MULTI_SET, total);
    coh_wr_u32(&q.w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        coh_wr_bytes(&q.w, k[i], kl[i]);
        coh_wr_bytes(&q.w, v[i], vl[i]);
    }
    return req_done(&q, req_call(&q, op_deadline(s)));
}

/* The barrier waits on the server; a timeout cancels this participant
 * there, so the barrier does not count a client that already gave up. */
static cohort_status tcp_barrier(cohort_store *s, const void *name, size_t nl, int n,
                                 int timeout_ms)
{
    req q;
    q.s = s;
    q.pl = NULL;
    kdesc(q.what, sizeof q.what, "barrier", name, nl);
    size_t o = strlen(q.what);
    snprintf(q.what + o, sizeof q.what - o, " of %d", n);
    cohort_status st = coh_tconn_check_key(s, q.what, nl);
    if (st)
        return st;
    req_begin(&q, COH_OP_BARRIER, 0);
    coh_wr_bytes(&q.w, name, nl);
    coh_wr_u32(&q.w, (uint32_t)n);
    return req_done(&q, req_call(&q, coh_deadline_ns(timeout_ms)));
}

const coh_store_backend coh_store_tcp_backend = {
    .scheme = "tcp",
    .connect = coh_tconn_connect,
    .close = coh_tconn_close,
    .set = tcp_set,
    .get = tcp_get,
    .add = tcp_add,
    .compare_set = tcp_cas,
    .check = tcp_check,
    .wait = tcp_wait,
    .del = tcp_del,
    .num_keys = tcp_num_keys,
    .list = tcp_list,
    .multi_get = tcp_multi_get,
    .multi_set = tcp_multi_set,
    .append = tcp_append,
    .barrier = tcp_barrier,
    .set_nowait = tcp_set_nowait,
    .flush = tcp_flush,
};

/* ---- administration (cohort_store.h; tcp backend only) ---- */

static cohort_status not_tcp(cohort_store *s, const char *what)
{
    if (s && coh_store_backend_of(s) != &coh_store_tcp_backend)
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED, "%s: not a tcp store handle", what);
    return COHORT_OK;
}

cohort_status cohort_store_get_stats(cohort_store *s, cohort_store_stats *out)
{
    req q;
    cohort_status st = not_tcp(s, "stats");
    if (!st && !out)
        st = coh_err_set(NULL, COHORT_ERR_INVALID, "stats: NULL output");
    if (st || (st = req_bare(&q, s, COH_OP_STATS, "stats")))
        return st;
    coh_rd *b = &q.r.body;
    out->conns = coh_rd_i64(b);
    out->job_conns = coh_rd_i64(b);
    out->waiters = coh_rd_i64(b);
    out->keys = coh_rd_i64(b);
    out->mem_used = coh_rd_i64(b);
    out->max_memory = coh_rd_i64(b);
    out->generation = coh_rd_u32(b);
    return req_done(&q, req_body_ok(&q));
}

cohort_status cohort_store_ping(cohort_store *s)
{
    req q;
    cohort_status st = not_tcp(s, "ping");
    return st ? st : req_done(&q, req_bare(&q, s, COH_OP_PING, "ping"));
}

cohort_status cohort_store_set_generation(cohort_store *s, uint32_t gen, uint32_t *prev)
{
    cohort_status st = not_tcp(s, "set_generation");
    if (st)
        return st;
    if (!s || coh_store_priv(s) == NULL)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "set_generation: NULL or closed handle");
    req q = {.s = s};
    snprintf(q.what, sizeof q.what, "set_generation");
    req_begin(&q, COH_OP_SET_GEN, 0);
    coh_wr_u32(&q.w, gen);
    if ((st = req_call(&q, op_deadline(s))))
        return st;
    uint32_t p = coh_rd_u32(&q.r.body);
    if (!(st = req_body_ok(&q)) && prev)
        *prev = p;
    return req_done(&q, st);
}
