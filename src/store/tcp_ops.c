/*
 * tcp_ops.c - the tcp store backend's operations: each builds its request,
 * sends it over the handle's connection (tcp_conn.h) and decodes the reply.
 * The backend table and the extras of tcp.h.
 */
#include <stdio.h>
#include <string.h>

#include "store/backend.h"
#include "store/proto.h"
#include "store/tcp.h"
#include "store/tcp_conn.h"

/* ---- ops ---- */

/* Non-waiting ops finish within the handle's default timeout. */
static uint64_t op_deadline(cohort_store *s)
{
    return coh_deadline_ns(coh_store_timeout(s));
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

#define check_key coh_tconn_check_key
#define check_val coh_tconn_check_val

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

/* Checks key and value against the server's limits and builds a key +
 * value request (SET, SET_NOREPLY, APPEND) in w; w is to be freed either way. */
static cohort_status kv_frame(cohort_store *s, coh_wr *w, uint8_t op, const char *what,
                              const void *k, size_t kl, const void *v, size_t vl)
{
    coh_wr_init(w);
    cohort_status st;
    if ((st = check_key(s, what, kl)) || (st = check_val(s, what, vl)))
        return st;
    coh_wr_reserve(w, COH_PROTO_HDR + 8 + kl + vl); /* one allocation, no regrowth */
    size_t at = coh_wr_begin_frame(w);
    coh_wr_bytes(w, k, kl);
    coh_wr_bytes(w, v, vl);
    coh_wr_end_frame(w, at, op, 0);
    return COHORT_OK;
}

/* SET and APPEND: key + value, empty reply. */
static cohort_status simple_kv(cohort_store *s, uint8_t op, const char *opname, const void *k,
                               size_t kl, const void *v, size_t vl)
{
    char what[160];
    kdesc(what, sizeof what, opname, k, kl);
    coh_wr w;
    cohort_status st = kv_frame(s, &w, op, what, k, kl, v, vl);
    if (st != COHORT_OK) {
        coh_wr_free(&w);
        return st;
    }
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, op_deadline(s), what, &r, &pl);
    coh_wr_free(&w);
    coh_free(pl);
    return st;
}

static cohort_status tcp_set(cohort_store *s, const void *k, size_t kl, const void *v, size_t vl)
{
    return simple_kv(s, COH_OP_SET, "set", k, kl, v, vl);
}

static cohort_status tcp_append(cohort_store *s, const void *k, size_t kl, const void *v,
                                size_t vl)
{
    return simple_kv(s, COH_OP_APPEND, "append", k, kl, v, vl);
}

/* A request with an empty payload (PING, STATS). */
static cohort_status extra_call(cohort_store *s, uint8_t op, const char *what, coh_reply *r,
                                uint8_t **pl)
{
    if (!s || coh_store_priv(s) == NULL)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "%s: NULL or closed handle", what);
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_end_frame(&w, at, op, 0);
    cohort_status st = coh_tconn_call(s, &w, op_deadline(s), what, r, pl);
    coh_wr_free(&w);
    return st;
}

/* SET_NOREPLY: returns once the frame is in the socket. The server applies
 * it in order with this connection's other requests and answers only if it
 * fails; that answer is kept for the next call or cohort_store_flush. */
static cohort_status tcp_set_nowait(cohort_store *s, const void *k, size_t kl, const void *v,
                                    size_t vl)
{
    char what[160];
    kdesc(what, sizeof what, "set_nowait", k, kl);
    coh_wr w;
    cohort_status st = kv_frame(s, &w, COH_OP_SET_NOREPLY, what, k, kl, v, vl);
    if (st == COHORT_OK)
        st = coh_tconn_send(s, &w, op_deadline(s), what);
    coh_wr_free(&w);
    return st;
}

/* A round trip (PING) behind every earlier set_nowait: the connection is
 * FIFO, so once it is answered each of them was applied or its failure is
 * in hand. */
static cohort_status tcp_flush(cohort_store *s)
{
    coh_reply r;
    uint8_t *pl = NULL;
    cohort_status st = extra_call(s, COH_OP_PING, "flush", &r, &pl);
    coh_free(pl);
    if (st != COHORT_OK)
        return st;
    return coh_tconn_take_failure(s, "flush");
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

static cohort_status tcp_get(cohort_store *s, const void *k, size_t kl, void **v, size_t *vl,
                             int timeout_ms)
{
    char what[160];
    kdesc(what, sizeof what, "get", k, kl);
    cohort_status st = check_key(s, what, kl);
    if (st)
        return st;
    uint8_t flags = 0;
    uint64_t dl = wait_deadline(s, timeout_ms, &flags);
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_u8(&w, flags);
    coh_wr_bytes(&w, k, kl);
    coh_wr_end_frame(&w, at, COH_OP_GET, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, dl, what, &r, &pl);
    coh_wr_free(&w);
    if (st)
        return st;
    uint32_t n;
    const uint8_t *p = coh_rd_bytes(&r.body, &n);
    if (r.body.err || r.body.n) {
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
        coh_free(pl);
        return st;
    }
    /* The reply buffer becomes the value: [status][u32 len][value] is at
     * least 5 bytes longer than the value, so it also holds the NUL. */
    memmove(pl, p, n);
    pl[n] = 0;
    *v = pl;
    *vl = n;
    return COHORT_OK;
}

static cohort_status tcp_add(cohort_store *s, const void *k, size_t kl, int64_t d, int64_t *res)
{
    char what[160];
    kdesc(what, sizeof what, "add", k, kl);
    cohort_status st = check_key(s, what, kl);
    if (st)
        return st;
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_bytes(&w, k, kl);
    coh_wr_i64(&w, d);
    coh_wr_end_frame(&w, at, COH_OP_ADD, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, op_deadline(s), what, &r, &pl);
    coh_wr_free(&w);
    if (st)
        return st;
    *res = coh_rd_i64(&r.body);
    if (r.body.err || r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    coh_free(pl);
    return st;
}

static cohort_status tcp_cas(cohort_store *s, const void *k, size_t kl, const void *e, size_t el,
                             const void *d, size_t dl, void **cur, size_t *curl)
{
    char what[160];
    kdesc(what, sizeof what, "compare_set", k, kl);
    cohort_status st;
    if ((st = check_key(s, what, kl)) || (st = check_val(s, what, dl)))
        return st;
    coh_wr w;
    coh_wr_init(&w);
    coh_wr_reserve(&w, COH_PROTO_HDR + 12 + kl + el + dl);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_bytes(&w, k, kl);
    coh_wr_bytes(&w, e, el);
    coh_wr_bytes(&w, d, dl);
    coh_wr_end_frame(&w, at, COH_OP_CAS, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, op_deadline(s), what, &r, &pl);
    coh_wr_free(&w);
    if (st)
        return st;
    uint8_t exists = coh_rd_u8(&r.body);
    uint32_t n;
    const uint8_t *p = coh_rd_bytes(&r.body, &n);
    if (r.body.err || r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    else if (exists && !(*cur = dup_value(p, n)))
        st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s", what);
    else
        *curl = exists ? n : 0;
    coh_free(pl);
    return st;
}

/* Encodes [u8 flags] u32 n + keys. */
static void put_keys(coh_wr *w, const void *const *k, const size_t *kl, int n)
{
    coh_wr_u32(w, (uint32_t)n);
    for (int i = 0; i < n; i++)
        coh_wr_bytes(w, k[i], kl[i]);
}

static cohort_status check_keys(cohort_store *s, const char *what, const size_t *kl, int n)
{
    for (int i = 0; i < n; i++) {
        cohort_status st = check_key(s, what, kl[i]);
        if (st)
            return st;
    }
    return COHORT_OK;
}

static cohort_status tcp_check(cohort_store *s, const void *const *k, const size_t *kl, int n,
                               int *all)
{
    char what[160];
    kdesc(what, sizeof what, "check", n ? k[0] : "", n ? kl[0] : 0);
    cohort_status st = check_keys(s, what, kl, n);
    if (st)
        return st;
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    put_keys(&w, k, kl, n);
    coh_wr_end_frame(&w, at, COH_OP_CHECK, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, op_deadline(s), what, &r, &pl);
    coh_wr_free(&w);
    if (st)
        return st;
    *all = coh_rd_u8(&r.body);
    if (r.body.err || r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    coh_free(pl);
    return st;
}

static cohort_status tcp_wait(cohort_store *s, const void *const *k, const size_t *kl, int n,
                              int any, int timeout_ms, int *which)
{
    char what[200];
    kdesc(what, sizeof what, any ? "wait_any" : "wait", n ? k[0] : "", n ? kl[0] : 0);
    if (n > 1) {
        size_t o = strlen(what);
        snprintf(what + o, sizeof what - o, " (+%d more keys)", n - 1);
    }
    cohort_status st = check_keys(s, what, kl, n);
    if (st)
        return st;
    uint8_t flags = any ? COH_WAITF_ANY : 0;
    uint64_t dl = wait_deadline(s, timeout_ms, &flags);
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_u8(&w, flags);
    put_keys(&w, k, kl, n);
    coh_wr_end_frame(&w, at, COH_OP_WAIT, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, dl, what, &r, &pl);
    coh_wr_free(&w);
    if (st)
        return st;
    uint32_t idx = coh_rd_u32(&r.body);
    if (r.body.err || r.body.n || (n && idx >= (uint32_t)n))
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    else if (which)
        *which = (int)idx;
    coh_free(pl);
    return st;
}

/* One RPC whose request is a single key (or prefix) field, under the
 * handle's default deadline: describe it, check its length, send, and hand
 * back the reply (the caller decodes it and frees *pl). */
static cohort_status key_rpc(cohort_store *s, const char *verb, const void *k, size_t kl, uint8_t op,
                             char *what, size_t wlen, coh_reply *r, uint8_t **pl)
{
    kdesc(what, wlen, verb, k, kl);
    cohort_status st = check_key(s, what, kl);
    if (st)
        return st;
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_bytes(&w, k, kl);
    coh_wr_end_frame(&w, at, op, 0);
    st = coh_tconn_call(s, &w, op_deadline(s), what, r, pl);
    coh_wr_free(&w);
    return st;
}

static cohort_status tcp_del(cohort_store *s, const void *k, size_t kl, int *deleted)
{
    char what[160];
    coh_reply r;
    uint8_t *pl;
    cohort_status st = key_rpc(s, "delete", k, kl, COH_OP_DELETE, what, sizeof what, &r, &pl);
    if (st)
        return st;
    *deleted = coh_rd_u8(&r.body);
    if (r.body.err || r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    coh_free(pl);
    return st;
}

static cohort_status tcp_num_keys(cohort_store *s, const void *prefix, size_t pl_, int64_t *n)
{
    char what[160];
    coh_reply r;
    uint8_t *pl;
    cohort_status st = key_rpc(s, "num_keys under", prefix, pl_, COH_OP_NUM_KEYS, what, sizeof what, &r, &pl);
    if (st)
        return st;
    *n = coh_rd_i64(&r.body);
    if (r.body.err || r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    coh_free(pl);
    return st;
}

/* Keys come back whole and NUL-terminated (the front end strips a view's
 * prefix in place). A count larger than the reply could hold is a protocol
 * error, checked before the arrays are sized by it. */
static cohort_status tcp_list(cohort_store *s, const void *prefix, size_t pl_, char ***keys,
                              size_t **klens, int *n)
{
    char what[160];
    coh_reply r;
    uint8_t *pl;
    cohort_status st = key_rpc(s, "list", prefix, pl_, COH_OP_LIST, what, sizeof what, &r, &pl);
    if (st)
        return st;
    uint32_t cnt = coh_rd_u32(&r.body);
    if (r.body.err || cnt > r.body.n / 4 || cnt > INT32_MAX) {
        coh_free(pl);
        return coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    }
    char **ks = coh_calloc(cnt ? cnt : 1, sizeof *ks);
    size_t *ls = coh_calloc(cnt ? cnt : 1, sizeof *ls);
    if (!ks || !ls)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s: %u keys", what, cnt);
    for (uint32_t i = 0; i < cnt && !st; i++) {
        uint32_t kn;
        const uint8_t *kp = coh_rd_bytes(&r.body, &kn);
        if (r.body.err)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
        else if (kn < pl_)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL,
                             "%s: server returned a key outside the prefix", what);
        else if (!(ks[i] = dup_value(kp, kn)))
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s", what);
        else
            ls[i] = kn;
    }
    coh_free(pl);
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
    char what[200];
    kdesc(what, sizeof what, "multi_get", n ? k[0] : "", n ? kl[0] : 0);
    if (n > 1) {
        size_t o = strlen(what);
        snprintf(what + o, sizeof what - o, " (+%d more keys)", n - 1);
    }
    cohort_status st = check_keys(s, what, kl, n);
    if (st)
        return st;
    uint8_t flags = 0;
    uint64_t dl = wait_deadline(s, timeout_ms, &flags);
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_u8(&w, flags);
    put_keys(&w, k, kl, n);
    coh_wr_end_frame(&w, at, COH_OP_MULTI_GET, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, dl, what, &r, &pl);
    coh_wr_free(&w);
    if (st)
        return st;
    for (int i = 0; i < n && !st; i++) {
        uint32_t len;
        const uint8_t *p = coh_rd_bytes(&r.body, &len);
        if (r.body.err)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
        else if (!(v[i] = dup_value(p, len)))
            st = coh_err_set(coh_store_err(s), COHORT_ERR_NOMEM, "%s", what);
        else
            vl[i] = len;
    }
    if (!st && r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "%s: malformed reply", what);
    if (st)
        for (int i = 0; i < n; i++) {
            coh_free(v[i]);
            v[i] = NULL;
            vl[i] = 0;
        }
    coh_free(pl);
    return st;
}

static cohort_status tcp_multi_set(cohort_store *s, const void *const *k, const size_t *kl,
                                   const void *const *v, const size_t *vl, int n)
{
    char what[200];
    kdesc(what, sizeof what, "multi_set", n ? k[0] : "", n ? kl[0] : 0);
    if (n > 1) {
        size_t o = strlen(what);
        snprintf(what + o, sizeof what - o, " (+%d more keys)", n - 1);
    }
    cohort_status st;
    for (int i = 0; i < n; i++)
        if ((st = check_key(s, what, kl[i])) || (st = check_val(s, what, vl[i])))
            return st;
    size_t total = COH_PROTO_HDR + 4;
    for (int i = 0; i < n; i++)
        total += 8 + kl[i] + vl[i];
    coh_wr w;
    coh_wr_init(&w);
    coh_wr_reserve(&w, total);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_u32(&w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        coh_wr_bytes(&w, k[i], kl[i]);
        coh_wr_bytes(&w, v[i], vl[i]);
    }
    coh_wr_end_frame(&w, at, COH_OP_MULTI_SET, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, op_deadline(s), what, &r, &pl);
    coh_wr_free(&w);
    coh_free(pl);
    return st;
}

/* The barrier waits on the server; a timeout cancels this participant
 * there, so the barrier does not count a client that already gave up. */
static cohort_status tcp_barrier(cohort_store *s, const void *name, size_t nl, int n,
                                 int timeout_ms)
{
    char what[200];
    kdesc(what, sizeof what, "barrier", name, nl);
    size_t o = strlen(what);
    snprintf(what + o, sizeof what - o, " of %d", n);
    cohort_status st = check_key(s, what, nl);
    if (st)
        return st;
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_bytes(&w, name, nl);
    coh_wr_u32(&w, (uint32_t)n);
    coh_wr_end_frame(&w, at, COH_OP_BARRIER, 0);
    coh_reply r;
    uint8_t *pl;
    st = coh_tconn_call(s, &w, coh_deadline_ns(timeout_ms), what, &r, &pl);
    coh_wr_free(&w);
    coh_free(pl);
    return st;
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

/* ---- extras (tcp.h) ---- */

cohort_status coh_store_tcp_stats(cohort_store *s, coh_store_stats *out)
{
    if (s && coh_store_backend_of(s) != &coh_store_tcp_backend)
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED, "stats: not a tcp store handle");
    coh_reply r;
    uint8_t *pl = NULL;
    cohort_status st = extra_call(s, COH_OP_STATS, "stats", &r, &pl);
    if (st)
        return st;
    out->conns = coh_rd_i64(&r.body);
    out->job_conns = coh_rd_i64(&r.body);
    out->waiters = coh_rd_i64(&r.body);
    out->keys = coh_rd_i64(&r.body);
    out->mem_used = coh_rd_i64(&r.body);
    out->max_memory = coh_rd_i64(&r.body);
    out->generation = coh_rd_u32(&r.body);
    if (r.body.err || r.body.n)
        st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL, "stats: malformed reply");
    coh_free(pl);
    return st;
}

cohort_status coh_store_tcp_ping(cohort_store *s)
{
    if (s && coh_store_backend_of(s) != &coh_store_tcp_backend)
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED, "ping: not a tcp store handle");
    coh_reply r;
    uint8_t *pl = NULL;
    cohort_status st = extra_call(s, COH_OP_PING, "ping", &r, &pl);
    coh_free(pl);
    return st;
}

cohort_status coh_store_tcp_set_generation(cohort_store *s, uint32_t gen, uint32_t *prev)
{
    if (s && coh_store_backend_of(s) != &coh_store_tcp_backend)
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED, "set_generation: not a tcp store handle");
    if (!s || coh_store_priv(s) == NULL)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "set_generation: NULL or closed handle");
    coh_wr w;
    coh_wr_init(&w);
    size_t at = coh_wr_begin_frame(&w);
    coh_wr_u32(&w, gen);
    coh_wr_end_frame(&w, at, COH_OP_SET_GEN, 0);
    coh_reply r;
    uint8_t *pl = NULL;
    cohort_status st = coh_tconn_call(s, &w, op_deadline(s), "set_generation", &r, &pl);
    coh_wr_free(&w);
    if (st == COHORT_OK) {
        uint32_t p = coh_rd_u32(&r.body);
        if (r.body.err || r.body.n)
            st = coh_err_set(coh_store_err(s), COHORT_ERR_PROTOCOL,
                             "set_generation: malformed reply");
        else if (prev)
            *prev = p;
    }
    coh_free(pl);
    return st;
}
