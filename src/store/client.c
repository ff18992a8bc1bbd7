/*
 * client.c - the public store client API: argument checks, backend choice by
 * address scheme, prefixed views, per-handle error detail.
 *
 * A handle is a root (owns the backend connection) or a view made by
 * cohort_store_prefixed (shares its root's connection; every key it passes
 * down is prefix || key). The root is freed when it and all its views are
 * closed, so closing in the wrong order is safe.
 *
 * Errors: a backend op records its detail in a thread-local scratch
 * (coh_store_err); when the op fails the front end copies it into the
 * handle under err_mu, so threads failing at once on one handle do not race.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "store/backend.h"

struct cohort_store {
    const coh_store_backend *be;
    struct cohort_store *root; /* self for a root */
    atomic_int refs;           /* root only: itself (until closed) + its views */
    void *priv;                /* root only: backend state */
    uint8_t *prefix;           /* views: the full prefix (parent's + own) */
    size_t plen;
    atomic_int timeout_ms;
    pthread_mutex_t err_mu;
    coh_err err;
    char addr[256];
};

#define DEFAULT_TIMEOUT_MS 300000

/* The detail of the op in progress on this thread. Backends write here
 * without locking; op_end copies it to the handle only if the op failed. */
static _Thread_local coh_err op_err;

coh_err *coh_store_err(cohort_store *s)
{
    (void)s;
    return &op_err;
}

void *coh_store_priv(cohort_store *s) { return s ? s->root->priv : NULL; }
void coh_store_set_priv(cohort_store *s, void *priv) { s->root->priv = priv; }
int coh_store_timeout(cohort_store *s) { return atomic_load(&s->timeout_ms); }
const char *coh_store_addr(cohort_store *s) { return s->root->addr; }
const coh_store_backend *coh_store_backend_of(cohort_store *s) { return s ? s->be : NULL; }
const void *coh_store_prefix(cohort_store *s, size_t *len)
{
    *len = s->plen;
    return s->prefix;
}

static void op_begin(void)
{
    op_err.status = COHORT_OK;
    op_err.msg[0] = 0;
}

/* Records a failed op's detail on the handle. */
static cohort_status op_end(cohort_store *s, cohort_status st)
{
    if (st == COHORT_OK)
        return st;
    pthread_mutex_lock(&s->err_mu);
    s->err.status = st;
    if (op_err.msg[0])
        memcpy(s->err.msg, op_err.msg, sizeof s->err.msg);
    else
        snprintf(s->err.msg, sizeof s->err.msg, "store %s: %s", s->root->addr,
                 cohort_strerror(st));
    pthread_mutex_unlock(&s->err_mu);
    return st;
}

static cohort_status bad(cohort_store *s, cohort_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static cohort_status bad(cohort_store *s, cohort_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    op_err.status = st;
    vsnprintf(op_err.msg, sizeof op_err.msg, fmt, ap);
    va_end(ap);
    return s ? op_end(s, st) : st;
}

const char *cohort_store_last_error(const cohort_store *cs)
{
    /* A copy per thread, taken under the lock: another thread may be
     * recording a newer failure on the same handle meanwhile. */
    static _Thread_local char buf[COH_ERRLEN];
    if (!cs)
        return "";
    cohort_store *s = (cohort_store *)cs;
    pthread_mutex_lock(&s->err_mu);
    memcpy(buf, s->err.msg, sizeof buf);
    pthread_mutex_unlock(&s->err_mu);
    return buf;
}

void cohort_store_set_timeout(cohort_store *s, int timeout_ms)
{
    if (s)
        atomic_store(&s->timeout_ms, timeout_ms);
}

/* ---- handles ---- */

static cohort_store *handle_new(void)
{
    cohort_store *s = coh_calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_mutex_init(&s->err_mu, NULL);
    atomic_init(&s->timeout_ms, DEFAULT_TIMEOUT_MS);
    atomic_init(&s->refs, 1);
    s->root = s;
    return s;
}

static void handle_free(cohort_store *s)
{
    pthread_mutex_destroy(&s->err_mu);
    coh_free(s->prefix);
    coh_free(s);
}

/* The connection closes when its last handle (root or view) is closed. */
static void root_release(cohort_store *r)
{
    if (atomic_fetch_sub(&r->refs, 1) == 1) {
        if (r->be && r->priv)
            r->be->close(r);
        handle_free(r);
    }
}

/* The scheme picks the backend: none or tcp:// -> tcp, etcd:// -> etcd
 * (the plugin, loaded now; COHORT_ERR_UNSUPPORTED when not built or not found), anything else is refused
 * rather than guessed at. */
cohort_status coh_store_connect_gen(cohort_store **out, const char *addr, const char *job_id,
                                    const char *token, uint32_t generation, int timeout_ms)
{
    op_begin();
    if (!out)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store connect: NULL out");
    *out = NULL;
    if (!addr || !*addr)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "store connect: empty address");
    if (!job_id || !*job_id || strlen(job_id) > 255)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store connect to %s: job id must be 1..255 bytes", addr);
    if (!token || !*token)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "store connect to %s: empty token for job '%s' (set COHORT_TOKEN)",
                           addr, job_id);
    const coh_store_backend *be = &coh_store_tcp_backend;
    const char *sep = strstr(addr, "://");
    if (sep) {
        size_t sl = (size_t)(sep - addr);
        if ((sl == 4 && !strncmp(addr, "etcd", 4)) || (sl == 5 && !strncmp(addr, "etcds", 5))) {
            be = coh_store_etcd_backend();
            if (!be)
                return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED, "store address %s: %s", addr,
                                   coh_store_etcd_unavailable());
        } else if (sl == 5 && !strncmp(addr, "torch", 5)) {
            be = &coh_store_torch_backend; /* a PyTorch TCPStore (torch_client.c) */
        } else if (!(sl == 3 && !strncmp(addr, "tcp", 3))) {
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "store address %s: unknown scheme '%.*s' (tcp://, torch://, etcd:// "
                               "or etcds://)",
                               addr, (int)sl, addr);
        }
    }
    cohort_store *s = handle_new();
    if (!s)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "store connect to %s", addr);
    s->be = be;
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    cohort_status st = be->connect(s, addr, job_id, token, generation, timeout_ms);
    if (st != COHORT_OK) {
        /* No handle to carry the detail: it goes to cohort_last_error(NULL). */
        if (op_err.msg[0])
            coh_err_set(NULL, st, "%s", op_err.msg);
        else
            coh_err_set(NULL, st, "store connect to %s: %s", addr, cohort_strerror(st));
        if (s->priv)
            be->close(s);
        handle_free(s);
        return st;
    }
    *out = s;
    return COHORT_OK;
}

cohort_status cohort_store_connect(cohort_store **out, const char *addr, const char *job_id,
                                   const char *token, int timeout_ms)
{
    return coh_store_connect_gen(out, addr, job_id, token, 0, timeout_ms);
}

/* A view copies its parent's prefix and appends its own, so nesting costs
 * nothing per call; it holds a reference on the root, not on the parent. */
cohort_status cohort_store_prefixed(cohort_store *s, const char *prefix, cohort_store **out)
{
    op_begin();
    if (!out)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_prefixed: NULL out");
    *out = NULL;
    if (!s || !prefix)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_prefixed: NULL handle or prefix");
    size_t pl = strlen(prefix);
    cohort_store *v = handle_new();
    uint8_t *p = coh_malloc(s->plen + pl + 1);
    if (!v || !p) {
        if (v)
            handle_free(v);
        coh_free(p);
        return bad(s, COHORT_ERR_NOMEM, "cohort_store_prefixed");
    }
    if (s->plen)
        memcpy(p, s->prefix, s->plen);
    memcpy(p + s->plen, prefix, pl);
    v->prefix = p;
    v->plen = s->plen + pl;
    v->be = s->be;
    v->root = s->root;
    atomic_store(&v->timeout_ms, atomic_load(&s->timeout_ms));
    atomic_fetch_add(&s->root->refs, 1);
    *out = v;
    return COHORT_OK;
}

void cohort_store_close(cohort_store *s)
{
    if (!s)
        return;
    if (s->root != s) {
        cohort_store *r = s->root;
        handle_free(s);
        root_release(r);
    } else {
        root_release(s);
    }
}

/* ---- prefixing ---- */

/* One prefixed key: the caller's bytes when the handle has no prefix (no
 * copy on the root handle), else prefix||key on the stack when it fits. */
typedef struct pkey {
    const void *p;
    size_t n;
    uint8_t *heap;
    uint8_t stack[256];
} pkey;

static int pk_make(cohort_store *s, pkey *k, const void *key, size_t klen)
{
    k->heap = NULL;
    if (!s->plen) {
        k->p = key;
        k->n = klen;
        return 0;
    }
    size_t n = s->plen + klen;
    uint8_t *d = n <= sizeof k->stack ? k->stack : (k->heap = coh_malloc(n));
    if (!d)
        return -1;
    memcpy(d, s->prefix, s->plen);
    if (klen)
        memcpy(d + s->plen, key, klen);
    k->p = d;
    k->n = n;
    return 0;
}

static void pk_free(pkey *k) { coh_free(k->heap); }

/* Prefixed copies of n keys (arrays freed by pks_free). */
typedef struct pkeys {
    const void **k;
    size_t *l;
    uint8_t *buf;
} pkeys;

/* One buffer for all n prefixed keys (a 1024-key wait costs three
 * allocations, not 1024). */
static int pks_make(cohort_store *s, pkeys *o, const void *const *keys, const size_t *klens,
                    int n)
{
    memset(o, 0, sizeof *o);
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += s->plen + klens[i];
    o->k = coh_malloc((size_t)(n ? n : 1) * sizeof *o->k);
    o->l = coh_malloc((size_t)(n ? n : 1) * sizeof *o->l);
    o->buf = coh_malloc(total ? total : 1);
    if (!o->k || !o->l || !o->buf)
        return -1;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        o->k[i] = o->buf + at;
        if (s->plen)
            memcpy(o->buf + at, s->prefix, s->plen);
        if (klens[i])
            memcpy(o->buf + at + s->plen, keys[i], klens[i]);
        o->l[i] = s->plen + klens[i];
        at += o->l[i];
    }
    return 0;
}

static void pks_free(pkeys *o)
{
    coh_free(o->k);
    coh_free(o->l);
    coh_free(o->buf);
}

/* Waiting ops: a negative timeout means the handle's default. */
static int wait_ms(cohort_store *s, int timeout_ms)
{
    return timeout_ms < 0 ? atomic_load(&s->timeout_ms) : timeout_ms;
}

#define CHECK_HANDLE(s)                                                                            \
    do {                                                                                           \
        op_begin();                                                                                \
        if (!(s))                                                                                  \
            return coh_err_set(NULL, COHORT_ERR_INVALID, "%s: NULL store handle", __func__);      \
    } while (0)

#define CHECK_BUF(s, p, n, what)                                                                   \
    do {                                                                                           \
        if (!(p) && (n))                                                                           \
            return bad(s, COHORT_ERR_INVALID, "%s: NULL %s with length %zu", __func__, what,       \
                       (size_t)(n));                                                               \
    } while (0)

static cohort_status check_keys(cohort_store *s, const char *fn, const void *const *keys,
                                const size_t *klens, int n)
{
    if (n < 0 || (n > 0 && (!keys || !klens)))
        return bad(s, COHORT_ERR_INVALID, "%s: bad key list (n = %d)", fn, n);
    for (int i = 0; i < n; i++)
        if (!keys[i] && klens[i])
            return bad(s, COHORT_ERR_INVALID, "%s: key %d is NULL", fn, i);
    return COHORT_OK;
}

/* ---- ops ---- */

/* set and set_nowait; a backend without pipelining does a set. */
static cohort_status do_set(cohort_store *s, const void *key, size_t klen, const void *val,
                            size_t vlen, int nowait)
{
    CHECK_HANDLE(s);
    CHECK_BUF(s, key, klen, "key");
    CHECK_BUF(s, val, vlen, "value");
    pkey k;
    if (pk_make(s, &k, key, klen) < 0)
        return bad(s, COHORT_ERR_NOMEM, nowait ? "store set_nowait" : "store set");
    cohort_status st = nowait && s->be->set_nowait ? s->be->set_nowait(s, k.p, k.n, val, vlen)
                                                   : s->be->set(s, k.p, k.n, val, vlen);
    pk_free(&k);
    return op_end(s, st);
}

cohort_status cohort_store_set(cohort_store *s, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    return do_set(s, key, klen, val, vlen, 0);
}

cohort_status cohort_store_set_nowait(cohort_store *s, const void *key, size_t klen,
                                      const void *val, size_t vlen)
{
    return do_set(s, key, klen, val, vlen, 1);
}

cohort_status cohort_store_flush(cohort_store *s)
{
    CHECK_HANDLE(s);
    return op_end(s, s->be->flush ? s->be->flush(s) : COHORT_OK);
}

cohort_status cohort_store_get(cohort_store *s, const void *key, size_t klen, void **val,
                               size_t *vlen, int timeout_ms)
{
    CHECK_HANDLE(s);
    CHECK_BUF(s, key, klen, "key");
    if (!val || !vlen)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_get: NULL val or vlen");
    *val = NULL;
    *vlen = 0;
    pkey k;
    if (pk_make(s, &k, key, klen) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store get");
    cohort_status st = s->be->get(s, k.p, k.n, val, vlen, wait_ms(s, timeout_ms));
    pk_free(&k);
    return op_end(s, st);
}

cohort_status cohort_store_add(cohort_store *s, const void *key, size_t klen, int64_t delta,
                               int64_t *result)
{
    CHECK_HANDLE(s);
    CHECK_BUF(s, key, klen, "key");
    pkey k;
    if (pk_make(s, &k, key, klen) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store add");
    int64_t r = 0;
    cohort_status st = s->be->add(s, k.p, k.n, delta, &r);
    pk_free(&k);
    if (st == COHORT_OK && result)
        *result = r;
    return op_end(s, st);
}

cohort_status cohort_store_compare_set(cohort_store *s, const void *key, size_t klen,
                                       const void *expected, size_t elen, const void *desired,
                                       size_t dlen, void **cur, size_t *curlen)
{
    CHECK_HANDLE(s);
    CHECK_BUF(s, key, klen, "key");
    CHECK_BUF(s, expected, elen, "expected");
    CHECK_BUF(s, desired, dlen, "desired");
    pkey k;
    if (pk_make(s, &k, key, klen) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store compare_set");
    void *c = NULL;
    size_t cl = 0;
    cohort_status st = s->be->compare_set(s, k.p, k.n, expected, elen, desired, dlen, &c, &cl);
    pk_free(&k);
    if (cur) {
        *cur = c;
        if (curlen)
            *curlen = cl;
    } else {
        coh_free(c);
    }
    return op_end(s, st);
}

cohort_status cohort_store_check(cohort_store *s, const void *const *keys, const size_t *klens,
                                 int n, int *all_exist)
{
    CHECK_HANDLE(s);
    cohort_status st = check_keys(s, __func__, keys, klens, n);
    if (st)
        return st;
    if (!all_exist)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_check: NULL all_exist");
    pkeys pk;
    if (pks_make(s, &pk, keys, klens, n) < 0) {
        pks_free(&pk);
        return bad(s, COHORT_ERR_NOMEM, "store check");
    }
    st = s->be->check(s, pk.k, pk.l, n, all_exist);
    pks_free(&pk);
    return op_end(s, st);
}

static cohort_status do_wait(cohort_store *s, const char *fn, const void *const *keys,
                             const size_t *klens, int n, int any, int timeout_ms, int *which)
{
    cohort_status st = check_keys(s, fn, keys, klens, n);
    if (st)
        return st;
    if (any && n == 0)
        return bad(s, COHORT_ERR_INVALID, "%s: no keys to wait for", fn);
    pkeys pk;
    if (pks_make(s, &pk, keys, klens, n) < 0) {
        pks_free(&pk);
        return bad(s, COHORT_ERR_NOMEM, "store wait");
    }
    int w = -1;
    st = s->be->wait(s, pk.k, pk.l, n, any, wait_ms(s, timeout_ms), &w);
    pks_free(&pk);
    if (which)
        *which = st == COHORT_OK ? w : -1;
    return op_end(s, st);
}

cohort_status cohort_store_wait(cohort_store *s, const void *const *keys, const size_t *klens,
                                int n, int timeout_ms)
{
    CHECK_HANDLE(s);
    return do_wait(s, __func__, keys, klens, n, 0, timeout_ms, NULL);
}

cohort_status cohort_store_wait_any(cohort_store *s, const void *const *keys,
                                    const size_t *klens, int n, int timeout_ms, int *which)
{
    CHECK_HANDLE(s);
    return do_wait(s, __func__, keys, klens, n, 1, timeout_ms, which);
}

cohort_status cohort_store_delete(cohort_store *s, const void *key, size_t klen, int *deleted)
{
    CHECK_HANDLE(s);
    CHECK_BUF(s, key, klen, "key");
    pkey k;
    if (pk_make(s, &k, key, klen) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store delete");
    int d = 0;
    cohort_status st = s->be->del(s, k.p, k.n, &d);
    pk_free(&k);
    if (deleted)
        *deleted = d;
    return op_end(s, st);
}

/* On a view: the keys under its prefix only. */
cohort_status cohort_store_num_keys(cohort_store *s, int64_t *n)
{
    CHECK_HANDLE(s);
    if (!n)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_num_keys: NULL n");
    return op_end(s, s->be->num_keys(s, s->prefix, s->plen, n));
}

/* Lists the keys under view-prefix||sub and returns them relative to the
 * view, so code using a view never sees the namespace it lives in. */
cohort_status cohort_store_list(cohort_store *s, const char *sub, char ***keys, size_t **klens,
                                int *n)
{
    CHECK_HANDLE(s);
    if (!keys || !n)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_list: NULL keys or n");
    *keys = NULL;
    *n = 0;
    if (klens)
        *klens = NULL;
    pkey k;
    if (pk_make(s, &k, sub ? sub : "", sub ? strlen(sub) : 0) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store list");
    char **ks = NULL;
    size_t *ls = NULL;
    int cnt = 0;
    cohort_status st = s->be->list(s, k.p, k.n, &ks, &ls, &cnt);
    pk_free(&k);
    if (st)
        return op_end(s, st);
    /* Names come back whole; a view shows them relative to its prefix. */
    for (int i = 0; i < cnt && s->plen; i++) {
        memmove(ks[i], ks[i] + s->plen, ls[i] - s->plen + 1);
        ls[i] -= s->plen;
    }
    *keys = ks;
    *n = cnt;
    if (klens)
        *klens = ls;
    else
        coh_free(ls);
    return COHORT_OK;
}

cohort_status cohort_store_multi_get(cohort_store *s, const void *const *keys,
                                     const size_t *klens, int n, void **vals, size_t *vlens,
                                     int timeout_ms)
{
    CHECK_HANDLE(s);
    cohort_status st = check_keys(s, __func__, keys, klens, n);
    if (st)
        return st;
    if (n > 0 && (!vals || !vlens))
        return bad(s, COHORT_ERR_INVALID, "cohort_store_multi_get: NULL vals or vlens");
    for (int i = 0; i < n; i++) {
        vals[i] = NULL;
        vlens[i] = 0;
    }
    pkeys pk;
    if (pks_make(s, &pk, keys, klens, n) < 0) {
        pks_free(&pk);
        return bad(s, COHORT_ERR_NOMEM, "store multi_get");
    }
    st = s->be->multi_get(s, pk.k, pk.l, n, vals, vlens, wait_ms(s, timeout_ms));
    pks_free(&pk);
    return op_end(s, st);
}

cohort_status cohort_store_multi_set(cohort_store *s, const void *const *keys,
                                     const size_t *klens, const void *const *vals,
                                     const size_t *vlens, int n)
{
    CHECK_HANDLE(s);
    cohort_status st = check_keys(s, __func__, keys, klens, n);
    if (st)
        return st;
    if (n > 0 && (!vals || !vlens))
        return bad(s, COHORT_ERR_INVALID, "cohort_store_multi_set: NULL vals or vlens");
    for (int i = 0; i < n; i++)
        CHECK_BUF(s, vals[i], vlens[i], "value");
    pkeys pk;
    if (pks_make(s, &pk, keys, klens, n) < 0) {
        pks_free(&pk);
        return bad(s, COHORT_ERR_NOMEM, "store multi_set");
    }
    st = s->be->multi_set(s, pk.k, pk.l, vals, vlens, n);
    pks_free(&pk);
    return op_end(s, st);
}

cohort_status cohort_store_append(cohort_store *s, const void *key, size_t klen, const void *val,
                                  size_t vlen)
{
    CHECK_HANDLE(s);
    CHECK_BUF(s, key, klen, "key");
    CHECK_BUF(s, val, vlen, "value");
    pkey k;
    if (pk_make(s, &k, key, klen) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store append");
    cohort_status st = s->be->append(s, k.p, k.n, val, vlen);
    pk_free(&k);
    return op_end(s, st);
}

cohort_status cohort_store_barrier(cohort_store *s, const char *name, int n, int timeout_ms)
{
    CHECK_HANDLE(s);
    if (!name || n < 1)
        return bad(s, COHORT_ERR_INVALID, "cohort_store_barrier: NULL name or n = %d < 1", n);
    pkey k;
    if (pk_make(s, &k, name, strlen(name)) < 0)
        return bad(s, COHORT_ERR_NOMEM, "store barrier");
    cohort_status st = s->be->barrier(s, k.p, k.n, n, wait_ms(s, timeout_ms));
    pk_free(&k);
    return op_end(s, st);
}

cohort_status cohort_store_sets(cohort_store *s, const char *key, const char *val)
{
    if (!key || !val) {
        op_begin();
        return bad(s, COHORT_ERR_INVALID, "cohort_store_sets: NULL key or value");
    }
    return cohort_store_set(s, key, strlen(key), val, strlen(val));
}

cohort_status cohort_store_gets(cohort_store *s, const char *key, char **val, int timeout_ms)
{
    if (!key || !val) {
        op_begin();
        return bad(s, COHORT_ERR_INVALID, "cohort_store_gets: NULL key or value");
    }
    void *v = NULL;
    size_t vl = 0;
    /* Backends NUL-terminate values, so the buffer is already a string. */
    cohort_status st = cohort_store_get(s, key, strlen(key), &v, &vl, timeout_ms);
    *val = v;
    return st;
}
