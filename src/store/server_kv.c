/*
 * server_kv.c - the store server's keyspace: one hash table of keys and one
 * of barriers per job, waiter lists per key, and the request handlers.
 * Runs on the server thread only.
 *
 * Waiting: a GET / WAIT / MULTI_GET / BARRIER that cannot be answered at once
 * becomes a waiter with one link per key. Links of missing keys sit in that
 * key's waiter list; setting the key detaches them and counts the waiter
 * down. A waiter whose count reaches zero re-checks every key (one may have
 * been deleted meanwhile) before it replies. Nothing ever polls.
 *
 * Memory: keys, values, waiters and barrier records are charged to their
 * job and to the server (acct.h) and refused (COHORT_ERR_TOO_LARGE) beyond
 * either limit, so one job cannot fill the memory of another.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "store/server_int.h"

#define BIG_VALUE 4096 /* values from this size are queued by reference */

/* ---- memory accounting ---- */

/* Charges n bytes of job j's stored data to j and the server; on refusal
 * remembers which limit it hit (for the reply) and returns -1. */
static int mem_charge(struct cohort_store_server *s, job *j, size_t n)
{
    coh_acct a = coh_srv_acct_job(s, j);
    const coh_budget *b = coh_acct_charge(&a, n);
    if (b) {
        s->refused = b;
        s->refused_want = n;
        return -1;
    }
    return 0;
}

static void mem_uncharge(struct cohort_store_server *s, job *j, size_t n)
{
    coh_acct a = coh_srv_acct_job(s, j);
    coh_acct_release(&a, n);
}

/* ---- blobs ---- */

blob *coh_blob_alloc(size_t n)
{
    blob *b = coh_malloc(sizeof *b + n);
    if (!b)
        return NULL;
    b->refs = 1;
    b->orphan[0] = b->orphan[1] = NULL;
    b->len = n;
    b->room = n;
    b->cost = sizeof *b + n;
    b->data = b->storage;
    return b;
}

static blob *blob_new(const void *p1, size_t n1, const void *p2, size_t n2)
{
    blob *b = coh_blob_alloc(n1 + n2);
    if (!b)
        return NULL;
    if (n1)
        memcpy(b->data, p1, n1);
    if (n2)
        memcpy(b->data + n1, p2, n2);
    return b;
}

void coh_blob_unref(blob *b)
{
    if (b && --b->refs == 0) {
        for (int i = 0; i < 2; i++)
            if (b->orphan[i])
                b->orphan[i]->used -= b->cost;
        coh_free(b);
    }
}

static size_t blob_cost(size_t len) { return sizeof(blob) + len; }

/* Memory a stored value is charged: what its blob says (an adopted frame
 * also carries the key and the header bytes). */
static size_t val_cost(const blob *b) { return b->cost; }

/* Drops the keyspace's reference to a stored value of job j: its charge
 * goes now, or with the last queued reply that still references it. */
static void value_release(struct cohort_store_server *s, job *j, blob *b)
{
    if (b->refs > 1) {
        b->orphan[0] = &j->mem;
        b->orphan[1] = &s->mem;
    } else {
        mem_uncharge(s, j, val_cost(b));
    }
    coh_blob_unref(b);
}

/* ---- hash table ---- */

/* SipHash-2-4 keyed with per-server random bytes: keys come from clients,
 * and an unkeyed hash would let one client build colliding keys that turn
 * every lookup of every job into a list walk. */
static uint64_t hkey(struct cohort_store_server *s, const void *k, size_t n)
{
    uint64_t h;
    crypto_shorthash((unsigned char *)&h, k, n, s->hkey);
    return h;
}

static hnode *ht_find(htab *t, const void *k, uint32_t n, uint64_t h)
{
    if (!t->nb)
        return NULL;
    for (hnode *e = t->b[h & (t->nb - 1)]; e; e = e->next)
        if (e->h == h && e->klen == n && (n == 0 || !memcmp(e->key, k, n)))
            return e;
    return NULL;
}

/* Doubles the bucket array when the load reaches 1. Bucket memory is
 * charged like keys; if it cannot be had, chains get longer instead. */
static void ht_grow(struct cohort_store_server *s, job *j, htab *t)
{
    size_t nb = t->nb ? t->nb * 2 : 64;
    if (mem_charge(s, j, nb * sizeof(hnode *)) < 0)
        return; /* longer chains instead of a refused request */
    hnode **b = coh_calloc(nb, sizeof *b);
    if (!b) {
        mem_uncharge(s, j, nb * sizeof(hnode *));
        return;
    }
    for (size_t i = 0; i < t->nb; i++)
        for (hnode *e = t->b[i], *nx; e; e = nx) {
            nx = e->next;
            e->next = b[e->h & (nb - 1)];
            b[e->h & (nb - 1)] = e;
        }
    mem_uncharge(s, j, t->nb * sizeof(hnode *));
    coh_free(t->b);
    t->b = b;
    t->nb = nb;
}

/* Returns -1 if the table has no buckets and none could be allocated. */
static int ht_insert(struct cohort_store_server *s, job *j, htab *t, hnode *e)
{
    if (t->n >= t->nb)
        ht_grow(s, j, t);
    if (!t->nb)
        return -1;
    size_t i = e->h & (t->nb - 1);
    e->next = t->b[i];
    t->b[i] = e;
    t->n++;
    return 0;
}

static void ht_remove(htab *t, hnode *e)
{
    hnode **pp = &t->b[e->h & (t->nb - 1)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    t->n--;
}

/* ---- keys ---- */

static size_t kent_cost(uint32_t klen) { return sizeof(kent) + klen; }

static kent *kent_find(struct cohort_store_server *s, job *j, const coh_slice *k)
{
    return (kent *)ht_find(&j->keys, k->p, k->n, hkey(s, k->p, k->n));
}

/* Finds or creates the entry of k; NULL with *st set on a limit / OOM. */
static kent *kent_get(struct cohort_store_server *s, job *j, const coh_slice *k,
                      cohort_status *st)
{
    uint64_t h = hkey(s, k->p, k->n);
    kent *e = (kent *)ht_find(&j->keys, k->p, k->n, h);
    if (e)
        return e;
    if (mem_charge(s, j, kent_cost(k->n)) < 0) {
        *st = COHORT_ERR_TOO_LARGE;
        return NULL;
    }
    e = coh_calloc(1, sizeof *e + k->n);
    if (!e) {
        mem_uncharge(s, j, kent_cost(k->n));
        *st = COHORT_ERR_NOMEM;
        return NULL;
    }
    e->hn.h = h;
    e->hn.klen = k->n;
    e->hn.key = (uint8_t *)(e + 1);
    if (k->n)
        memcpy(e->hn.key, k->p, k->n);
    dl_init(&e->waiters);
    if (ht_insert(s, j, &j->keys, &e->hn) < 0) {
        coh_free(e);
        mem_uncharge(s, j, kent_cost(k->n));
        *st = COHORT_ERR_NOMEM;
        return NULL;
    }
    return e;
}

/* Frees e once nothing needs it: no value and no waiter refers to it. */
static void kent_maybe_free(struct cohort_store_server *s, job *j, kent *e)
{
    if (e->val || e->pins)
        return;
    ht_remove(&j->keys, &e->hn);
    mem_uncharge(s, j, kent_cost(e->hn.klen));
    coh_free(e);
}

/* ---- waiters ---- */

/* Releases a waiter whether it completed, was cancelled, or its client
 * went away: unlinks every link still in a key's (or barrier's) list and
 * drops its pins, freeing key entries that existed only for it. A barrier
 * participant that leaves before the barrier completes is no longer
 * counted, so the barrier still needs n live participants. */
static void waiter_free(struct cohort_store_server *s, waiter *w)
{
    job *j = w->c->job;
    for (uint32_t i = 0; i < w->n; i++) {
        wlink *l = &w->links[i];
        if (l->linked)
            dl_del(&l->node);
        if (w->op == COH_OP_BARRIER) {
            bar *b = l->owner;
            if (l->linked && !b->done)
                b->arrived--; /* a participant that gave up no longer counts */
        } else if (l->owner) {
            kent *e = l->owner;
            e->pins--;
            kent_maybe_free(s, j, e);
        }
        l->linked = 0;
    }
    dl_del(&w->cnode);
    j->nwaiters--;
    mem_uncharge(s, j, w->mem);
    coh_free(w);
}

/* A waiter and its links are one allocation, charged to the job: a client
 * cannot park unbounded waiters any more than unbounded values. */
static waiter *waiter_new(conn *c, const coh_req *q, uint32_t n, cohort_status *st)
{
    struct cohort_store_server *s = c->srv;
    size_t mem = sizeof(waiter) + (size_t)n * sizeof(wlink);
    if (mem_charge(s, c->job, mem) < 0) {
        *st = COHORT_ERR_TOO_LARGE;
        return NULL;
    }
    waiter *w = coh_calloc(1, mem);
    if (!w) {
        mem_uncharge(s, c->job, mem);
        *st = COHORT_ERR_NOMEM;
        return NULL;
    }
    w->c = c;
    w->id = q->id;
    w->op = q->op;
    w->flags = q->flags;
    w->n = n;
    w->mem = mem;
    for (uint32_t i = 0; i < n; i++) {
        dl_init(&w->links[i].node);
        w->links[i].w = w;
        w->links[i].idx = i;
    }
    dl_push(&c->waiters, &w->cnode);
    c->job->nwaiters++;
    return w;
}

static void link_to(wlink *l, dl *list)
{
    dl_push(list, &l->node);
    l->linked = 1;
}

/* Sends (op, id) the values of keys, in order; every key must be present. */
/* The frame is built in the server's scratch writer; values of BIG_VALUE
 * bytes or more are queued by reference between the pieces instead of being
 * copied into it. */
static void reply_values(conn *c, uint8_t op, uint32_t id, kent *const *es, uint32_t n)
{
    uint64_t total = 1, copied = COH_PROTO_HDR + 1;
    for (uint32_t i = 0; i < n; i++) {
        total += 4 + es[i]->val->len;
        copied += 4 + (es[i]->val->len < BIG_VALUE ? es[i]->val->len : 0);
    }
    if (total > UINT32_MAX) {
        coh_srv_reply_err(c, op, id, COHORT_ERR_TOO_LARGE,
                          "reply of %" PRIu64 " bytes does not fit in one frame (4 GiB)", total);
        return;
    }
    /* Copied bytes are charged while queued (values from BIG_VALUE up are
     * queued by reference and cost no copy): a MULTI_GET of one small key
     * 60000 times must not build a 240 MB reply. */
    if (!coh_srv_reply_room(c, op, id, (size_t)copied))
        return;
    coh_wr *w = &c->srv->w;
    w->len = 0;
    w->oom = 0;
    uint8_t h[COH_PROTO_HDR + 1];
    coh_proto_put_hdr(h, op | COH_PROTO_REPLY, id, (uint32_t)total);
    h[COH_PROTO_HDR] = COHORT_OK;
    coh_wr_raw(w, h, sizeof h);
    for (uint32_t i = 0; i < n; i++) {
        blob *b = es[i]->val;
        coh_wr_u32(w, (uint32_t)b->len);
        if (b->len < BIG_VALUE) {
            coh_wr_raw(w, b->data, b->len);
        } else {
            /* Queue what is built so far, then the value by reference. */
            if (w->oom || coh_srv_send(c, w->p, w->len) < 0 || coh_srv_send_blob(c, b) < 0)
                return; /* the connection was failed for lack of memory */
            w->len = 0;
        }
    }
    if (w->oom) {
        /* Part of the frame may already be queued: the stream is lost. */
        coh_srv_send(c, NULL, 0);
        return;
    }
    if (w->len)
        coh_srv_send(c, w->p, w->len);
    if (w->cap > (4u << 20))
        coh_wr_free(w); /* do not keep a multi_get's buffer forever */
}

/* Replies to a waiter whose keys are all present (re-linking any that were
 * deleted since they were counted); returns 1 if it replied and freed w. */
static int waiter_try_complete(waiter *w)
{
    for (uint32_t i = 0; i < w->n; i++) {
        wlink *l = &w->links[i];
        kent *e = l->owner;
        if (!e->val && !l->linked) {
            link_to(l, &e->waiters);
            w->remaining++;
        }
    }
    if (w->remaining)
        return 0;
    conn *c = w->c;
    if (w->op == COH_OP_WAIT) {
        coh_wr *wr = coh_srv_reply_begin(c, w->op, w->id);
        coh_wr_u32(wr, 0);
        coh_srv_reply_end(c, w->op, w->id);
    } else {
        kent *stack[16] = {0};
        int heap = w->n > 16;
        kent **es = heap ? coh_malloc(w->n * sizeof *es) : stack;
        if (!es) {
            coh_srv_reply_err(c, w->op, w->id, COHORT_ERR_NOMEM, "out of memory in the server");
        } else {
            for (uint32_t i = 0; i < w->n; i++)
                es[i] = w->links[i].owner;
            reply_values(c, w->op, w->id, es, w->n);
            if (heap)
                coh_free(es);
        }
    }
    waiter_free(c->srv, w);
    return 1;
}

static void waiter_complete_any(waiter *w, uint32_t idx)
{
    coh_wr *wr = coh_srv_reply_begin(w->c, w->op, w->id);
    coh_wr_u32(wr, idx);
    coh_srv_reply_end(w->c, w->op, w->id);
    waiter_free(w->c->srv, w);
}

/* The key of e was just given a value: wake its waiters. */
static void kent_notify(kent *e)
{
    if (dl_empty(&e->waiters))
        return;
    /* Detach the whole list first: completing one waiter may unlink links of
     * another waiter from this list (duplicate keys in one request). */
    dl local;
    dl_init(&local);
    local.next = e->waiters.next;
    local.prev = e->waiters.prev;
    local.next->prev = &local;
    local.prev->next = &local;
    dl_init(&e->waiters);
    while (!dl_empty(&local)) {
        wlink *l = dl_entry(local.next, wlink, node);
        dl_del(&l->node);
        l->linked = 0;
        waiter *w = l->w;
        if (w->flags & COH_WAITF_ANY) {
            waiter_complete_any(w, l->idx);
        } else {
            w->remaining--;
            if (w->remaining == 0)
                waiter_try_complete(w);
        }
    }
}

void coh_kv_drop_waiters(conn *c)
{
    while (!dl_empty(&c->waiters))
        waiter_free(c->srv, dl_entry(c->waiters.next, waiter, cnode));
}

/* ---- jobs ---- */

/* Jobs live until the server stops: their keyspaces outlive connections,
 * which is what lets ranks reconnect and find the rendezvous data. */
void coh_kv_job_init(job *j)
{
    memset(&j->keys, 0, sizeof j->keys);
    memset(&j->bars, 0, sizeof j->bars);
    j->npresent = 0;
    dl_init(&j->conns);
}

void coh_kv_job_free(struct cohort_store_server *s, job *j)
{
    htab *tabs[2] = {&j->keys, &j->bars};
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; i < tabs[t]->nb; i++)
            for (hnode *e = tabs[t]->b[i], *nx; e; e = nx) {
                nx = e->next;
                if (t == 0)
                    coh_blob_unref(((kent *)e)->val);
                coh_free(e);
            }
        coh_free(tabs[t]->b);
    }
    (void)s;
}

/* ---- setting values ---- */

/* Stores b (taking its reference) as the value of e; b is already charged. */
static void kent_store(job *j, kent *e, blob *b, struct cohort_store_server *s)
{
    if (e->val) {
        value_release(s, j, e->val);
    } else {
        j->npresent++;
    }
    e->val = b;
    kent_notify(e);
}

/* Whether job j has room for growth more bytes (job and server limits);
 * on refusal remembers the limit for the reply. */
static int room_for(struct cohort_store_server *s, job *j, size_t growth)
{
    coh_acct a = coh_srv_acct_job(s, j);
    for (int i = 0; i < COH_ACCT_LEVELS; i++) {
        coh_budget *b = a.b[i];
        if (b && (growth > b->limit || b->used > b->limit - growth)) {
            s->refused = b;
            s->refused_want = growth;
            return 0;
        }
    }
    return 1;
}

/* Sets key k to the n bytes at p. Sends no reply. */
static cohort_status set_value(conn *c, const coh_slice *k, const void *p, size_t n)
{
    struct cohort_store_server *s = c->srv;
    job *j = c->job;
    coh_acct ja = coh_srv_acct_job(s, j);
    cohort_status st = COHORT_OK;
    size_t cost = blob_cost(n);
    kent *e = kent_find(s, j, k);
    size_t freed = (e && e->val) ? val_cost(e->val) : 0;
    /* A large SET whose frame was buffered keeps that buffer as the value's
     * storage: no second copy of a 1 MiB value. The buffer was charged to
     * the connection while it arrived; it becomes the job's stored data. */
    blob *b = NULL;
    size_t moved = 0;
    if (c->body_blob && n >= BIG_VALUE && (const uint8_t *)p >= c->body_blob->storage &&
        (const uint8_t *)p + n <= c->body_blob->storage + c->body_blob->len) {
        b = c->body_blob;
        cost = b->cost;
        moved = c->body_cap;
        coh_acct ca = coh_srv_acct_conn(c);
        coh_acct_release(&ca, moved);
    }
    /* Replacing a value only costs the growth; the old value is released in
     * kent_store right after, so the count overshoots only transiently. */
    size_t growth = cost > freed ? cost - freed : 0;
    if (!room_for(s, j, growth)) {
        if (b) {
            coh_acct ca = coh_srv_acct_conn(c);
            coh_acct_force(&ca, moved); /* still the frame's; released with it */
        }
        return COHORT_ERR_TOO_LARGE;
    }
    if (b) {
        c->body_blob = NULL;
        c->body_cap = 0;
        b->data = (uint8_t *)p;
        b->len = n;
    } else {
        b = blob_new(p, n, NULL, 0);
    }
    coh_acct_force(&ja, cost);
    if (!e && b)
        e = kent_get(s, j, k, &st);
    if (!b || !e) {
        coh_acct_release(&ja, cost);
        coh_blob_unref(b);
        return st == COHORT_OK ? COHORT_ERR_NOMEM : st;
    }
    kent_store(j, e, b, s);
    return COHORT_OK;
}

/* APPEND to a present value: amortised O(appended bytes). A value grown
 * by APPEND gets room to spare (double, up to max_value), and later
 * appends fill it in place while no queued reply references the value
 * (refs == 1); only then is a copy made. 40 appends of one byte to a
 * 48 MiB value copy it once, not 40 times. */
static cohort_status append_value(conn *c, kent *e, const void *p, size_t n)
{
    struct cohort_store_server *s = c->srv;
    job *j = c->job;
    blob *o = e->val;
    size_t end = (size_t)(o->data - o->storage) + o->len;
    if (o->refs == 1 && o->room - end >= n) {
        memcpy(o->data + o->len, p, n);
        o->len += n;
        return COHORT_OK;
    }
    size_t need = o->len + n;
    size_t freed = val_cost(o);
    /* Spare room: double, else a quarter more, else 64 KiB more (a job near
     * its limit), else exactly what is needed; never past max_value. */
    size_t tries[4] = {need * 2, need + need / 4, need + (64u << 10), need};
    size_t room = 0;
    for (int i = 0; i < 4 && !room; i++) {
        size_t r = COH_MAX(need, COH_MIN(tries[i], (size_t)s->max_value));
        if (room_for(s, j, blob_cost(r) > freed ? blob_cost(r) - freed : 0))
            room = r;
    }
    if (!room)
        return COHORT_ERR_TOO_LARGE;
    blob *b = coh_blob_alloc(room);
    if (!b)
        return COHORT_ERR_NOMEM;
    memcpy(b->data, o->data, o->len);
    memcpy(b->data + o->len, p, n);
    b->len = need;
    coh_acct ja = coh_srv_acct_job(s, j);
    coh_acct_force(&ja, b->cost);
    kent_store(j, e, b, s);
    return COHORT_OK;
}

static void reply_limit(conn *c, const coh_req *q, cohort_status st)
{
    struct cohort_store_server *s = c->srv;
    if (st == COHORT_ERR_TOO_LARGE && s->refused) {
        char m[320];
        coh_srv_limit_hit(c, s->refused, s->refused_want, coh_proto_op_name(q->op), m, sizeof m);
        coh_srv_reply_err(c, q->op, q->id, st, "%s", m);
    } else {
        coh_srv_reply_err(c, q->op, q->id, st, "out of memory in the store server");
    }
}

/* Printable form of a binary key for messages: escapes, truncated. */
static const char *keystr(char *out, size_t outlen, const uint8_t *k, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 8 < outlen; i++) {
        if (i == 48) {
            o += (size_t)snprintf(out + o, outlen - o, "...");
            break;
        }
        if (k[i] >= 0x20 && k[i] < 0x7f && k[i] != '\\')
            out[o++] = (char)k[i];
        else
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", k[i]);
    }
    out[o] = 0;
    return out;
}
#define KEYSTR(sl) keystr(kb, sizeof kb, (sl).p, (sl).n)

/* ---- handlers ---- */

static void h_set(conn *c, const coh_req *q)
{
    cohort_status st = set_value(c, &q->key, q->val.p, q->val.n);
    if (st && q->op == COH_OP_SET_NOREPLY) {
        /* Its only reply: the client no longer knows the key, so name it. */
        char kb[256], m[320] = "out of memory in the store server";
        if (st == COHORT_ERR_TOO_LARGE && c->srv->refused)
            coh_srv_limit_hit(c, c->srv->refused, c->srv->refused_want, "set_nowait", m,
                              sizeof m);
        coh_srv_reply_err(c, q->op, q->id, st, "set_nowait of key '%s' was not applied: %s",
                          KEYSTR(q->key), m);
    } else if (st) {
        reply_limit(c, q, st);
    } else if (q->op == COH_OP_SET)
        coh_srv_reply_ok(c, q->op, q->id);
}

static void h_append(conn *c, const coh_req *q)
{
    struct cohort_store_server *s = c->srv;
    kent *e = kent_find(s, c->job, &q->key);
    cohort_status st;
    if (e && e->val) {
        char kb[256];
        if (e->val->len + q->val.n > s->max_value) {
            coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_TOO_LARGE,
                              "append to key '%s' would make its value %zu bytes, over the "
                              "server's max_value (%u bytes)",
                              KEYSTR(q->key), e->val->len + q->val.n, s->max_value);
            return;
        }
        st = append_value(c, e, q->val.p, q->val.n);
    } else {
        st = set_value(c, &q->key, q->val.p, q->val.n);
    }
    if (st)
        reply_limit(c, q, st);
    else
        coh_srv_reply_ok(c, q->op, q->id);
}

/* Counters are decimal text so GET and cohort-kv show them as numbers;
 * a value that is not one is an error for this request only (the torch
 * store drops the connection here). Overflow is refused, not wrapped. */
static void h_add(conn *c, const coh_req *q)
{
    kent *e = kent_find(c->srv, c->job, &q->key);
    int64_t cur = 0, nv;
    char kb[256];
    if (e && e->val && coh_proto_parse_i64(e->val->data, e->val->len, &cur) < 0) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_INVALID,
                          "add: key '%s' holds a %zu-byte value that is not a decimal int64",
                          KEYSTR(q->key), e->val->len);
        return;
    }
    if (__builtin_add_overflow(cur, q->delta, &nv)) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_INVALID,
                          "add: %" PRId64 " + %" PRId64 " overflows int64 (key '%s')", cur,
                          q->delta, KEYSTR(q->key));
        return;
    }
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%" PRId64, nv);
    cohort_status st = set_value(c, &q->key, buf, (size_t)n);
    if (st) {
        reply_limit(c, q, st);
        return;
    }
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_i64(w, nv);
    coh_srv_reply_end(c, q->op, q->id);
}

/* compare_set: a missing key matches an empty expected value (create);
 * the reply always carries the value after the call, so the caller knows
 * whether it won without a second round trip. */
static void h_cas(conn *c, const coh_req *q)
{
    kent *e = kent_find(c->srv, c->job, &q->key);
    int present = e && e->val;
    int match = present ? (e->val->len == q->exp.n &&
                           (q->exp.n == 0 || !memcmp(e->val->data, q->exp.p, q->exp.n)))
                        : q->exp.n == 0;
    if (match) {
        cohort_status st = set_value(c, &q->key, q->val.p, q->val.n);
        if (st) {
            reply_limit(c, q, st);
            return;
        }
        e = kent_find(c->srv, c->job, &q->key);
        present = 1;
    }
    if (present && e->val->len >= BIG_VALUE) {
        /* u8 exists + bytes value: same layout as a one-value reply after
         * the flag, so build it by hand to queue the value by reference. */
        coh_wr *w = &c->srv->w;
        w->len = 0;
        w->oom = 0;
        uint8_t h[COH_PROTO_HDR + 2];
        coh_proto_put_hdr(h, q->op | COH_PROTO_REPLY, q->id, (uint32_t)(2 + 4 + e->val->len));
        h[COH_PROTO_HDR] = COHORT_OK;
        h[COH_PROTO_HDR + 1] = 1;
        coh_wr_raw(w, h, sizeof h);
        coh_wr_u32(w, (uint32_t)e->val->len);
        if (!w->oom && coh_srv_send(c, w->p, w->len) == 0)
            coh_srv_send_blob(c, e->val);
        return;
    }
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_u8(w, (uint8_t)present);
    if (present)
        coh_wr_bytes(w, e->val->data, e->val->len);
    else
        coh_wr_bytes(w, NULL, 0);
    coh_srv_reply_end(c, q->op, q->id);
}

static void h_delete(conn *c, const coh_req *q)
{
    struct cohort_store_server *s = c->srv;
    kent *e = kent_find(s, c->job, &q->key);
    int deleted = 0;
    if (e && e->val) {
        value_release(s, c->job, e->val);
        e->val = NULL;
        c->job->npresent--;
        kent_maybe_free(s, c->job, e);
        deleted = 1;
    }
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_u8(w, (uint8_t)deleted);
    coh_srv_reply_end(c, q->op, q->id);
}

static int has_prefix(const hnode *e, const coh_slice *p)
{
    return e->klen >= p->n && (p->n == 0 || !memcmp(e->key, p->p, p->n));
}

/* The whole job's count is kept; a prefix count scans the job's keys
 * (rare: tools and num_keys on prefixed views). */
static void h_num_keys(conn *c, const coh_req *q)
{
    job *j = c->job;
    int64_t n = 0;
    if (q->key.n == 0) {
        n = (int64_t)j->npresent;
    } else {
        for (size_t i = 0; i < j->keys.nb; i++)
            for (hnode *e = j->keys.b[i]; e; e = e->next)
                if (((kent *)e)->val && has_prefix(e, &q->key))
                    n++;
    }
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_i64(w, n);
    coh_srv_reply_end(c, q->op, q->id);
}

static void h_list(conn *c, const coh_req *q)
{
    job *j = c->job;
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    size_t at = w->len;
    coh_wr_u32(w, 0);
    uint32_t n = 0;
    for (size_t i = 0; i < j->keys.nb; i++)
        for (hnode *e = j->keys.b[i]; e; e = e->next)
            if (((kent *)e)->val && has_prefix(e, &q->key)) {
                coh_wr_bytes(w, e->key, e->klen);
                n++;
            }
    if (!w->oom)
        coh_put_u32(w->p + at, n);
    coh_srv_reply_end(c, q->op, q->id);
}

static void h_check(conn *c, const coh_req *q)
{
    coh_req it = *q;
    int all = 1;
    for (uint32_t i = 0; i < q->n; i++) {
        coh_slice k, v;
        coh_req_next(&it, &k, &v);
        kent *e = kent_find(c->srv, c->job, &k);
        if (!e || !e->val) {
            all = 0;
            break;
        }
    }
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_u8(w, (uint8_t)all);
    coh_srv_reply_end(c, q->op, q->id);
}

/* GET / WAIT / MULTI_GET that must wait: one link per key. */
static void wait_register(conn *c, const coh_req *q, uint32_t n)
{
    cohort_status st = COHORT_OK;
    waiter *w = waiter_new(c, q, n, &st);
    if (!w) {
        reply_limit(c, q, st);
        return;
    }
    coh_req it = *q;
    int any = q->op == COH_OP_WAIT && (q->flags & COH_WAITF_ANY);
    if (any)
        w->flags |= COH_WAITF_ANY;
    else
        w->flags &= (uint8_t)~COH_WAITF_ANY;
    for (uint32_t i = 0; i < n; i++) {
        coh_slice k = q->key, v;
        if (q->op != COH_OP_GET)
            coh_req_next(&it, &k, &v);
        kent *e = kent_get(c->srv, c->job, &k, &st);
        if (!e) {
            waiter_free(c->srv, w);
            reply_limit(c, q, st);
            return;
        }
        w->links[i].owner = e;
        e->pins++;
        if (any || !e->val) {
            link_to(&w->links[i], &e->waiters);
            if (!any)
                w->remaining++;
        }
    }
    if (!any && w->remaining == 0)
        waiter_try_complete(w);
}

static void h_get(conn *c, const coh_req *q)
{
    char kb[256];
    kent *e = kent_find(c->srv, c->job, &q->key);
    if (e && e->val) {
        reply_values(c, q->op, q->id, &e, 1);
        return;
    }
    if (q->flags & COH_WAITF_NOWAIT) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_NOT_FOUND, "key '%s' not found",
                          KEYSTR(q->key));
        return;
    }
    wait_register(c, q, 1);
}

/* WAIT answers at once when it can (any: first present key; all: every
 * key present); NOWAIT turns "not yet" into COHORT_ERR_TIMEOUT instead of
 * a waiter. */
static void h_wait(conn *c, const coh_req *q)
{
    int any = (q->flags & COH_WAITF_ANY) != 0;
    coh_req it = *q;
    uint32_t missing = 0;
    for (uint32_t i = 0; i < q->n; i++) {
        coh_slice k, v;
        coh_req_next(&it, &k, &v);
        kent *e = kent_find(c->srv, c->job, &k);
        int present = e && e->val;
        if (any && present) {
            coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
            coh_wr_u32(w, i);
            coh_srv_reply_end(c, q->op, q->id);
            return;
        }
        missing += !present;
    }
    if (any && q->n == 0) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_INVALID, "wait_any on 0 keys");
        return;
    }
    if (!any && missing == 0) {
        coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
        coh_wr_u32(w, 0);
        coh_srv_reply_end(c, q->op, q->id);
        return;
    }
    if (q->flags & COH_WAITF_NOWAIT) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_TIMEOUT,
                          any ? "none of the %u keys exists" : "%u of the %u keys do not exist",
                          any ? q->n : missing, q->n);
        return;
    }
    wait_register(c, q, q->n);
}

static void h_multi_get(conn *c, const coh_req *q)
{
    coh_req it = *q;
    kent *stack[16] = {0};
    int heap = q->n > 16;
    kent **es = heap ? coh_malloc(q->n * sizeof *es) : stack;
    if (!es) {
        reply_limit(c, q, COHORT_ERR_NOMEM);
        return;
    }
    uint32_t missing = 0;
    char kb[256] = "";
    for (uint32_t i = 0; i < q->n; i++) {
        coh_slice k, v;
        coh_req_next(&it, &k, &v);
        es[i] = kent_find(c->srv, c->job, &k);
        if (!es[i] || !es[i]->val) {
            if (!missing)
                KEYSTR(k);
            missing++;
        }
    }
    if (!missing)
        reply_values(c, q->op, q->id, es, q->n);
    else if (q->flags & COH_WAITF_NOWAIT)
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_NOT_FOUND,
                          "%u of %u keys not found (first: '%s')", missing, q->n, kb);
    else
        wait_register(c, q, q->n);
    if (heap)
        coh_free(es);
}

static void h_multi_set(conn *c, const coh_req *q)
{
    struct cohort_store_server *s = c->srv;
    coh_req it = *q;
    /* Check the whole request against the memory limit first, so a refused
     * MULTI_SET applies nothing. */
    uint64_t growth = 0;
    for (uint32_t i = 0; i < q->n; i++) {
        coh_slice k, v;
        coh_req_next(&it, &k, &v);
        kent *e = kent_find(s, c->job, &k);
        size_t freed = (e && e->val) ? val_cost(e->val) : 0;
        size_t cost = blob_cost(v.n) + (e ? 0 : kent_cost(k.n));
        growth += cost > freed ? cost - freed : 0;
    }
    if (growth > SIZE_MAX / 2 || !room_for(s, c->job, (size_t)growth)) {
        if (growth > SIZE_MAX / 2) {
            s->refused = &s->mem;
            s->refused_want = SIZE_MAX / 2;
        }
        reply_limit(c, q, COHORT_ERR_TOO_LARGE);
        return;
    }
    it = *q;
    for (uint32_t i = 0; i < q->n; i++) {
        coh_slice k, v;
        coh_req_next(&it, &k, &v);
        cohort_status st = set_value(c, &k, v.p, v.n);
        if (st) {
            reply_limit(c, q, st);
            return;
        }
    }
    coh_srv_reply_ok(c, q->op, q->id);
}

/* Server-side barrier: the n-th arrival answers everyone in one pass. The
 * record stays after completion (names are single use: a late or repeated
 * entry gets an error instead of waiting forever for a barrier that is
 * gone); participants disagreeing on n are refused. */
static void h_barrier(conn *c, const coh_req *q)
{
    struct cohort_store_server *s = c->srv;
    job *j = c->job;
    char kb[256];
    uint64_t h = hkey(s, q->key.p, q->key.n);
    bar *b = (bar *)ht_find(&j->bars, q->key.p, q->key.n, h);
    if (!b) {
        size_t cost = sizeof(bar) + q->key.n;
        if (mem_charge(s, j, cost) < 0) {
            reply_limit(c, q, COHORT_ERR_TOO_LARGE);
            return;
        }
        b = coh_calloc(1, sizeof *b + q->key.n);
        if (b) {
            b->hn.key = (uint8_t *)(b + 1);
            b->hn.h = h;
            b->hn.klen = q->key.n;
            if (q->key.n)
                memcpy(b->hn.key, q->key.p, q->key.n);
            b->n = q->n;
            dl_init(&b->waiters);
        }
        if (!b || ht_insert(s, j, &j->bars, &b->hn) < 0) {
            coh_free(b);
            mem_uncharge(s, j, cost);
            reply_limit(c, q, COHORT_ERR_NOMEM);
            return;
        }
    }
    if (b->done) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_INVALID,
                          "barrier '%s' already completed (barrier names are single use)",
                          KEYSTR(q->key));
        return;
    }
    if (b->n != q->n) {
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_INVALID,
                          "barrier '%s': this client expects %u participants, earlier ones %u",
                          KEYSTR(q->key), q->n, b->n);
        return;
    }
    cohort_status st = COHORT_OK;
    waiter *w = waiter_new(c, q, 1, &st);
    if (!w) {
        reply_limit(c, q, st);
        return;
    }
    w->links[0].owner = b;
    link_to(&w->links[0], &b->waiters);
    if (++b->arrived < b->n)
        return;
    b->done = 1;
    while (!dl_empty(&b->waiters)) {
        wlink *l = dl_entry(b->waiters.next, wlink, node);
        waiter *x = l->w;
        coh_srv_reply_ok(x->c, x->op, x->id);
        waiter_free(s, x);
    }
}

/* CANCEL is never answered: the client has already forgotten the id. */
static void h_cancel(conn *c, const coh_req *q)
{
    for (dl *p = c->waiters.next; p != &c->waiters; p = p->next) {
        waiter *w = dl_entry(p, waiter, cnode);
        if (w->id == q->target) {
            waiter_free(c->srv, w);
            return;
        }
    }
    /* Already answered: the client discards that reply by its id. */
}

static void coh_kv_dispatch(conn *c, const coh_req *q);

static void h_stats(conn *c, const coh_req *q)
{
    struct cohort_store_server *s = c->srv;
    coh_wr *w = coh_srv_reply_begin(c, q->op, q->id);
    coh_wr_i64(w, s->nconns);
    coh_wr_i64(w, (int64_t)c->job->nconns);
    coh_wr_i64(w, (int64_t)c->job->nwaiters);
    coh_wr_i64(w, (int64_t)c->job->npresent);
    coh_wr_i64(w, (int64_t)s->mem.used);
    coh_wr_i64(w, (int64_t)s->mem.limit);
    coh_wr_u32(w, c->job->gen);
    coh_srv_reply_end(c, q->op, q->id);
}

void coh_kv_handle(conn *c, const coh_req *q)
{
    /* Only a plain SET may adopt the frame buffer: other ops keep reading
     * the payload after storing (MULTI_SET) or store a mix (APPEND). */
    blob *frame = c->body_blob;
    int plain_set = q->op == COH_OP_SET || q->op == COH_OP_SET_NOREPLY;
    if (!plain_set)
        c->body_blob = NULL;
    coh_kv_dispatch(c, q);
    if (!plain_set)
        c->body_blob = frame;
}

static void coh_kv_dispatch(conn *c, const coh_req *q)
{
    switch (q->op) {
    case COH_OP_SET:
    case COH_OP_SET_NOREPLY:
        h_set(c, q);
        break;
    case COH_OP_GET:
        h_get(c, q);
        break;
    case COH_OP_ADD:
        h_add(c, q);
        break;
    case COH_OP_CAS:
        h_cas(c, q);
        break;
    case COH_OP_CHECK:
        h_check(c, q);
        break;
    case COH_OP_WAIT:
        h_wait(c, q);
        break;
    case COH_OP_DELETE:
        h_delete(c, q);
        break;
    case COH_OP_NUM_KEYS:
        h_num_keys(c, q);
        break;
    case COH_OP_LIST:
        h_list(c, q);
        break;
    case COH_OP_MULTI_GET:
        h_multi_get(c, q);
        break;
    case COH_OP_MULTI_SET:
        h_multi_set(c, q);
        break;
    case COH_OP_APPEND:
        h_append(c, q);
        break;
    case COH_OP_BARRIER:
        h_barrier(c, q);
        break;
    case COH_OP_CANCEL:
        h_cancel(c, q);
        break;
    case COH_OP_PING:
        coh_srv_reply_ok(c, q->op, q->id);
        break;
    case COH_OP_STATS:
        h_stats(c, q);
        break;
    default:
        coh_srv_reply_err(c, q->op, q->id, COHORT_ERR_PROTOCOL, "op 0x%02x not allowed here",
                          q->op);
        break;
    }
}
