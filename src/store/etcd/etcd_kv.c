/*
 * etcd_kv.c - the store operations on etcd's key space.
 *
 *   set          put
 *   get/wait/    one txn of ranges (a consistent snapshot at revision R);
 *   wait_any/    if not satisfied, a watch from R+1 until it is: nothing is
 *   multi_get    missed between the read and the watch, and nothing polls
 *   add/append   read-modify-write txn guarded by mod_revision, retried on
 *                conflict; the success branch also writes this handle's op
 *                marker so that a txn re-sent after a lost reply is
 *                recognised as already applied (never added twice)
 *   compare_set  txn on VALUE (or VERSION == 0 to create)
 *   check        txn of count-only ranges
 *   delete       deleterange
 *   num_keys     count-only prefix range; list: keys-only prefix range, paged
 *   multi_set    txn of puts (batches of ETCD_TXN_MAX_OPS)
 *   barrier      add on m/barrier/<name>/count; the n-th arrival puts
 *                m/barrier/<name>/go, the others wait for it
 *
 * Counters are ASCII decimal, like the cohort store server's.
 */
#include "store/etcd/etcd_int.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- keys ---- */

/* A full etcd key (job root + user key, or a metadata key), owned. */
typedef struct ekey {
    unsigned char *p;
    size_t n;
} ekey;

static cohort_status ekey_make(ekey *k, const char *base, size_t bl, const void *t, size_t tl,
                               coh_err *err)
{
    k->p = coh_malloc(bl + tl + 1);
    if (!k->p)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    memcpy(k->p, base, bl);
    if (tl)
        memcpy(k->p + bl, t, tl);
    k->p[bl + tl] = 0;
    k->n = bl + tl;
    return COHORT_OK;
}

/* The etcd key of user key u: kroot || u, within the key size limit. */
static cohort_status ukey(coh_etcd *e, ekey *k, const void *u, size_t ul, coh_err *err)
{
    if (ul > ETCD_MAX_KEY)
        return coh_err_set(err, COHORT_ERR_TOO_LARGE, "etcd: key of %zu bytes (limit %d)", ul,
                           ETCD_MAX_KEY);
    if (!u && ul)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd: NULL key with length %zu", ul);
    return ekey_make(k, e->cfg.kroot, e->cfg.kroot_len, u, ul, err);
}

/* The op marker of this handle: m/op/<client id>. */
static cohort_status marker_key(coh_etcd *e, ekey *k, coh_err *err)
{
    char t[40];
    int n = snprintf(t, sizeof t, "op/%016llx", (unsigned long long)e->client_id);
    return ekey_make(k, e->cfg.mroot, e->cfg.mroot_len, t, (size_t)n, err);
}

static void ekeys_free(ekey *k, int n)
{
    if (!k)
        return;
    for (int i = 0; i < n; i++)
        coh_free(k[i].p);
    coh_free(k);
}

/* Printable rendering of a key for messages (binary bytes as \xNN). */
static const char *kfmt(char *out, size_t cap, const void *k, size_t kl)
{
    const unsigned char *p = k;
    size_t o = 0;
    for (size_t i = 0; i < kl && o + 8 < cap; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
            out[o++] = (char)p[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
    }
    if (o + 8 >= cap && kl)
        o += (size_t)snprintf(out + o, cap - o, "...");
    out[o < cap ? o : cap - 1] = 0;
    return out;
}

/* A full key as the caller knows it: user keys without the job root. */
static const char *ekfmt(coh_etcd *e, char *out, size_t cap, const ekey *k)
{
    size_t skip = k->n >= e->cfg.kroot_len && !memcmp(k->p, e->cfg.kroot, e->cfg.kroot_len)
                      ? e->cfg.kroot_len
                      : 0;
    return kfmt(out, cap, k->p + skip, k->n - skip);
}

/* Deadline of a call: its own timeout, or the handle default when < 0
 * (which may itself be "never"). */
static uint64_t op_deadline(coh_etcd *e, int timeout_ms)
{
    return coh_deadline_ns(timeout_ms < 0 ? e->timeout_ms : timeout_ms);
}

/* ---- request builders (each returns NULL on OOM; "o" steals) ---- */

static json_t *j_rev(int64_t r)
{
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)r);
    return json_string(b);
}

static json_t *j_put(const ekey *k, const void *v, size_t vl)
{
    return json_pack("{s:{s:o, s:o}}", "request_put", "key", etcd_b64(k->p, k->n), "value",
                     etcd_b64(v, vl));
}

static json_t *j_range_body(const ekey *k, int count_only, int64_t rev)
{
    json_t *r = json_pack("{s:o}", "key", etcd_b64(k->p, k->n));
    if (r && count_only && json_object_set_new(r, "count_only", json_true()))
        goto fail;
    if (r && rev > 0 && json_object_set_new(r, "revision", j_rev(rev)))
        goto fail;
    return r;
fail:
    json_decref(r);
    return NULL;
}

static json_t *j_range(const ekey *k, int count_only, int64_t rev)
{
    return json_pack("{s:o}", "request_range", j_range_body(k, count_only, rev));
}

static json_t *j_cmp_mod(const ekey *k, int64_t rev)
{
    return json_pack("{s:o, s:s, s:s, s:o}", "key", etcd_b64(k->p, k->n), "target", "MOD",
                     "result", "EQUAL", "mod_revision", j_rev(rev));
}

static json_t *j_cmp_value(const ekey *k, const void *v, size_t vl)
{
    return json_pack("{s:o, s:s, s:s, s:o}", "key", etcd_b64(k->p, k->n), "target", "VALUE",
                     "result", "EQUAL", "value", etcd_b64(v, vl));
}

static json_t *j_cmp_absent(const ekey *k)
{
    return json_pack("{s:o, s:s, s:s, s:s}", "key", etcd_b64(k->p, k->n), "target", "VERSION",
                     "result", "EQUAL", "version", "0");
}

/* ---- response helpers ---- */

/* responses[i].<kind> of a txn reply (NULL if absent). */
static json_t *txn_resp(json_t *r, size_t i, const char *kind)
{
    return json_object_get(json_array_get(json_object_get(r, "responses"), i), kind);
}

static json_t *first_kv(json_t *range)
{
    return json_array_get(json_object_get(range, "kvs"), 0);
}

static cohort_status kv_value(coh_err *err, json_t *kv, unsigned char **v, size_t *vl)
{
    int r = etcd_unb64(kv, "value", v, vl);
    if (r == -2)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    if (r)
        return coh_err_set(err, COHORT_ERR_PROTOCOL, "etcd: bad base64 value in a reply");
    return COHORT_OK;
}

/* Strict ASCII decimal int64 (what add stores). */
static int parse_i64(const unsigned char *p, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (n > 0 && (p[0] == '-' || p[0] == '+'))
        neg = p[i++] == '-';
    if (i == n || n - i > 19)
        return -1;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (uint64_t)(p[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
        return -1;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* coh_etcd_call on the handle's connection; consumes body, and a NULL
 * body (a builder ran out of memory) is NOMEM. */
static cohort_status call(coh_etcd *e, coh_err *err, const char *path, json_t *body,
                          uint64_t deadline, json_t **out)
{
    if (!body)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd %s: out of memory building the request",
                           path);
    cohort_status st = coh_etcd_call(&e->conn, err, path, body, deadline, out);
    json_decref(body);
    return st;
}

static json_t *j_txn(json_t *cmp, json_t *succ, json_t *fail)
{
    return json_pack("{s:o, s:o, s:o}", "compare", cmp, "success", succ, "failure", fail);
}

/* ---- set / delete / multi_set ---- */

cohort_status coh_etcd_set(coh_etcd *e, coh_err *err, const void *k, size_t kl, const void *v,
                           size_t vl)
{
    ekey key = {0};
    cohort_status st = ukey(e, &key, k, kl, err);
    if (st != COHORT_OK)
        return st;
    json_t *r = NULL;
    st = call(e, err, "/v3/kv/put",
              json_pack("{s:o, s:o}", "key", etcd_b64(key.p, key.n), "value", etcd_b64(v, vl)),
              op_deadline(e, -1), &r);
    json_decref(r);
    coh_free(key.p);
    return st;
}

cohort_status coh_etcd_del(coh_etcd *e, coh_err *err, const void *k, size_t kl, int *deleted)
{
    ekey key = {0};
    cohort_status st = ukey(e, &key, k, kl, err);
    if (st != COHORT_OK)
        return st;
    json_t *r = NULL;
    st = call(e, err, "/v3/kv/deleterange", json_pack("{s:o}", "key", etcd_b64(key.p, key.n)),
              op_deadline(e, -1), &r);
    if (st == COHORT_OK && deleted)
        *deleted = etcd_int(r, "deleted") > 0;
    json_decref(r);
    coh_free(key.p);
    return st;
}

cohort_status coh_etcd_multi_set(coh_etcd *e, coh_err *err, const void *const *k,
                                 const size_t *kl, const void *const *v, const size_t *vl, int n)
{
    if (n < 0 || (n > 0 && (!k || !kl || !v || !vl)))
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd multi_set: bad arguments (n=%d)", n);
    uint64_t dl = op_deadline(e, -1);
    /* Each batch is one atomic txn; batches follow one another. */
    for (int b = 0; b < n; b += ETCD_TXN_MAX_OPS) {
        int m = COH_MIN(n - b, ETCD_TXN_MAX_OPS);
        json_t *ops = json_array();
        cohort_status st = ops ? COHORT_OK : COHORT_ERR_NOMEM;
        for (int i = 0; i < m && st == COHORT_OK; i++) {
            ekey key;
            if ((st = ukey(e, &key, k[b + i], kl[b + i], err)) != COHORT_OK)
                break;
            if (json_array_append_new(ops, j_put(&key, v[b + i], vl[b + i])))
                st = COHORT_ERR_NOMEM;
            coh_free(key.p);
        }
        if (st != COHORT_OK) {
            json_decref(ops);
            return st == COHORT_ERR_NOMEM ? coh_err_set(err, st, "etcd: out of memory") : st;
        }
        json_t *r = NULL;
        st = call(e, err, "/v3/kv/txn", json_pack("{s:o}", "success", ops), dl, &r);
        json_decref(r);
        if (st != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

/* ---- snapshot reads and watches: the waiting core ---- */

/* A waiting call's view of its keys: which exist (and their values when
 * captured), updated by the snapshot read and then by watch events. */
typedef struct wstate {
    coh_etcd *e;
    coh_err *err;
    const ekey *keys;
    int n;
    int any;              /* done when any key exists (else all) */
    int capture;          /* keep values */
    unsigned char *present;
    unsigned char **vals; /* captured values (capture only) */
    size_t *vlens;
} wstate;

static int ws_done(const wstate *w)
{
    for (int i = 0; i < w->n; i++) {
        if (w->any && w->present[i])
            return 1;
        if (!w->any && !w->present[i])
            return 0;
    }
    return !w->any;
}

/* Records key i as present (with a copy of its value) or absent. */
static int ws_set(wstate *w, int i, int present, const unsigned char *v, size_t vl)
{
    w->present[i] = (unsigned char)present;
    if (!w->capture)
        return 0;
    coh_free(w->vals[i]);
    w->vals[i] = NULL;
    w->vlens[i] = 0;
    if (!present)
        return 0;
    w->vals[i] = coh_malloc(vl + 1);
    if (!w->vals[i]) {
        coh_err_set(w->err, COHORT_ERR_NOMEM, "etcd: out of memory");
        return -1;
    }
    if (vl)
        memcpy(w->vals[i], v, vl);
    w->vals[i][vl] = 0;
    w->vlens[i] = vl;
    return 0;
}

/* Watch events apply in revision order; a key listed twice gets both. */
static int ws_event(void *arg, const etcd_event *ev)
{
    wstate *w = arg;
    for (int i = 0; i < w->n; i++)
        if (w->keys[i].n == ev->klen && !memcmp(w->keys[i].p, ev->key, ev->klen))
            if (ws_set(w, i, !ev->is_delete, ev->val, ev->vlen) < 0)
                return -1;
    return 0;
}

static int ws_batch(void *arg) { return ws_done(arg); }

/* Reads every key at one revision (txns of ETCD_TXN_MAX_OPS ranges, all
 * pinned to the first one's revision); *rev receives it. */
static cohort_status ws_read(wstate *w, uint64_t deadline, int64_t *rev)
{
    int64_t at = 0;
    for (int b = 0; b < w->n; b += ETCD_TXN_MAX_OPS) {
        int m = COH_MIN(w->n - b, ETCD_TXN_MAX_OPS);
        json_t *ops = json_array();
        int bad = !ops;
        for (int i = 0; i < m && !bad; i++)
            bad = json_array_append_new(ops, j_range(&w->keys[b + i], !w->capture, at)) != 0;
        if (bad) {
            json_decref(ops);
            return coh_err_set(w->err, COHORT_ERR_NOMEM, "etcd: out of memory");
        }
        json_t *r = NULL;
        cohort_status st = call(w->e, w->err, "/v3/kv/txn", json_pack("{s:o}", "success", ops),
                                deadline, &r);
        if (st != COHORT_OK)
            return st;
        if (at == 0)
            at = etcd_int(json_object_get(r, "header"), "revision");
        for (int i = 0; i < m; i++) {
            json_t *rr = txn_resp(r, (size_t)i, "response_range");
            int present = etcd_int(rr, "count") > 0;
            unsigned char *v = NULL;
            size_t vl = 0;
            if (present && w->capture &&
                (st = kv_value(w->err, first_kv(rr), &v, &vl)) != COHORT_OK) {
                json_decref(r);
                return st;
            }
            int rc = ws_set(w, b + i, present, v, vl);
            coh_free(v);
            if (rc < 0) {
                json_decref(r);
                return COHORT_ERR_NOMEM;
            }
        }
        json_decref(r);
    }
    *rev = at;
    return COHORT_OK;
}

/* Above this many keys one range watch [min, max] replaces per-key watches. */
#define WATCH_PER_KEY_MAX 32

static cohort_status ws_watch_once(wstate *w, int64_t from, uint64_t deadline, int *res)
{
    const void **ks = coh_calloc((size_t)w->n, sizeof *ks);
    size_t *ls = coh_calloc((size_t)w->n, sizeof *ls);
    cohort_status st = COHORT_OK;
    unsigned char *end = NULL;
    if (!ks || !ls) {
        st = coh_err_set(w->err, COHORT_ERR_NOMEM, "etcd: out of memory");
        goto out;
    }
    if (w->n <= WATCH_PER_KEY_MAX) {
        for (int i = 0; i < w->n; i++) {
            ks[i] = w->keys[i].p;
            ls[i] = w->keys[i].n;
        }
        *res = coh_etcd_watch(&w->e->conn, w->err, ks, ls, NULL, NULL, w->n, from, deadline,
                              ws_event, ws_batch, w, &st);
    } else {
        /* Byte-wise min and max key; the range end is max + "\0". Events of
         * other keys in between are ignored by ws_event. */
        const ekey *lo = &w->keys[0], *hi = &w->keys[0];
        for (int i = 1; i < w->n; i++) {
            const ekey *k = &w->keys[i];
            int c = memcmp(k->p, lo->p, COH_MIN(k->n, lo->n));
            if (c < 0 || (c == 0 && k->n < lo->n))
                lo = k;
            c = memcmp(k->p, hi->p, COH_MIN(k->n, hi->n));
            if (c > 0 || (c == 0 && k->n > hi->n))
                hi = k;
        }
        end = coh_malloc(hi->n + 1);
        if (!end) {
            st = coh_err_set(w->err, COHORT_ERR_NOMEM, "etcd: out of memory");
            goto out;
        }
        memcpy(end, hi->p, hi->n);
        end[hi->n] = 0;
        const void *k0 = lo->p, *e0 = end;
        size_t kl0 = lo->n, el0 = hi->n + 1;
        *res = coh_etcd_watch(&w->e->conn, w->err, &k0, &kl0, &e0, &el0, 1, from, deadline,
                              ws_event, ws_batch, w, &st);
    }
out:
    coh_free(ks);
    coh_free(ls);
    coh_free(end);
    return st;
}

/* "'key' and N more": the first missing key for a timeout message. */
static void ws_missing(const wstate *w, char *out, size_t cap)
{
    int miss = 0, first = -1;
    for (int i = 0; i < w->n; i++)
        if (!w->present[i]) {
            if (first < 0)
                first = i;
            miss++;
        }
    if (first < 0) {
        snprintf(out, cap, "(none)");
        return;
    }
    char kb[200];
    const ekey *k = &w->keys[first];
    snprintf(out, cap, "'%s'", ekfmt(w->e, kb, sizeof kb, k));
    if (miss > 1) {
        size_t o = strlen(out);
        snprintf(out + o, cap - o, " and %d more", miss - 1);
    }
}

/* Waits until w is satisfied: read, then watch from the read's revision +
 * 1; a broken stream (dead member, lost leader, compaction) re-reads. */
static cohort_status ws_run(wstate *w, int timeout_ms, const char *what)
{
    uint64_t t0 = coh_now_ns();
    uint64_t deadline = op_deadline(w->e, timeout_ms);
    int restarts = 0;
    for (int round = 0;; round++) {
        /* Out of time after a broken stream: that is the wait's timeout. */
        if (round > 0 && coh_ms_left(deadline) == 0)
            break;
        int64_t rev = 0;
        int left = coh_ms_left(deadline);
        /* The first read gets the handle's default timeout (that of a set)
         * even when the wait's is shorter: timeout 0 means "do not wait for
         * the key", not "do not ask" (as with the tcp store). */
        uint64_t rd = deadline;
        if (round == 0) {
            uint64_t floor = op_deadline(w->e, -1);
            rd = floor > deadline ? floor : deadline;
        }
        cohort_status st = ws_read(w, rd, &rev);
        /* A re-read squeezed into the last moments of the wait failed for
         * lack of time, not for lack of a cluster: the wait timed out. */
        if (st == COHORT_ERR_STORE && round > 0 && left < 100)
            break;
        if (st != COHORT_OK)
            return st;
        if (ws_done(w))
            return COHORT_OK;
        if (coh_ms_left(deadline) == 0)
            break;
        /* A stream lives at most two request timeouts: a frozen member
         * (SIGSTOP, a hung host) sends nothing and breaks nothing, so the
         * re-read that follows is what notices it and fails over. */
        int res = ETCD_WATCH_ERROR;
        uint64_t ws = coh_now_ns();
        uint64_t renew = coh_deadline_ns(2 * w->e->cfg.req_timeout_ms);
        st = ws_watch_once(w, rev + 1, renew < deadline ? renew : deadline, &res);
        if (res == ETCD_WATCH_DONE)
            return COHORT_OK;
        if (res == ETCD_WATCH_ERROR)
            return st;
        if (res == ETCD_WATCH_TIMEOUT) {
            if (coh_ms_left(deadline) == 0)
                break;
            restarts = 0;
            continue;
        }
        /* RESTART: pause if streams keep failing fast, then re-read. */
        if (coh_now_ns() - ws < 1000000000ull)
            coh_etcd_pause(coh_etcd_backoff_ms(restarts++), deadline);
        else
            restarts = 0;
    }
    char miss[320];
    ws_missing(w, miss, sizeof miss);
    return coh_err_set(w->err, COHORT_ERR_TIMEOUT, "etcd %s: timed out after %llu ms waiting for key %s",
                       what, (unsigned long long)((coh_now_ns() - t0) / 1000000ull), miss);
}

static cohort_status ws_init(wstate *w, coh_etcd *e, coh_err *err, const ekey *keys, int n,
                             int any, int capture)
{
    memset(w, 0, sizeof *w);
    w->e = e;
    w->err = err;
    w->keys = keys;
    w->n = n;
    w->any = any;
    w->capture = capture;
    w->present = coh_calloc((size_t)n, 1);
    if (capture) {
        w->vals = coh_calloc((size_t)n, sizeof *w->vals);
        w->vlens = coh_calloc((size_t)n, sizeof *w->vlens);
    }
    if (!w->present || (capture && (!w->vals || !w->vlens)))
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    return COHORT_OK;
}

static void ws_fini(wstate *w)
{
    if (w->vals)
        for (int i = 0; i < w->n; i++)
            coh_free(w->vals[i]);
    coh_free(w->vals);
    coh_free(w->vlens);
    coh_free(w->present);
}

/* Builds full keys for user keys k[0..n). */
static cohort_status ukeys(coh_etcd *e, coh_err *err, const void *const *k, const size_t *kl,
                           int n, ekey **out)
{
    if (n < 0 || (n > 0 && (!k || !kl)))
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd: bad key list (n=%d)", n);
    ekey *ks = coh_calloc((size_t)(n ? n : 1), sizeof *ks);
    if (!ks)
        return coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    for (int i = 0; i < n; i++) {
        cohort_status st = ukey(e, &ks[i], k[i], kl[i], err);
        if (st != COHORT_OK) {
            ekeys_free(ks, i);
            return st;
        }
    }
    *out = ks;
    return COHORT_OK;
}

cohort_status coh_etcd_get(coh_etcd *e, coh_err *err, const void *k, size_t kl, void **v,
                           size_t *vl, int timeout_ms)
{
    ekey key = {0};
    wstate w;
    cohort_status st = ukey(e, &key, k, kl, err);
    if (st != COHORT_OK)
        return st;
    if ((st = ws_init(&w, e, err, &key, 1, 0, 1)) == COHORT_OK &&
        (st = ws_run(&w, timeout_ms, "get")) == COHORT_OK) {
        *v = w.vals[0];
        *vl = w.vlens[0];
        w.vals[0] = NULL;
    }
    ws_fini(&w);
    coh_free(key.p);
    return st;
}

cohort_status coh_etcd_wait(coh_etcd *e, coh_err *err, const void *const *k, const size_t *kl,
                            int n, int any, int timeout_ms, int *which)
{
    ekey *ks = NULL;
    wstate w;
    cohort_status st = ukeys(e, err, k, kl, n, &ks);
    if (st != COHORT_OK)
        return st;
    if (n == 0) {
        ekeys_free(ks, 0);
        if (any)
            return coh_err_set(err, COHORT_ERR_INVALID, "etcd wait_any: no keys");
        return COHORT_OK;
    }
    if ((st = ws_init(&w, e, err, ks, n, any, 0)) == COHORT_OK &&
        (st = ws_run(&w, timeout_ms, any ? "wait_any" : "wait")) == COHORT_OK && which) {
        *which = -1;
        for (int i = 0; i < n && *which < 0; i++)
            if (w.present[i])
                *which = i;
    }
    ws_fini(&w);
    ekeys_free(ks, n);
    return st;
}

cohort_status coh_etcd_multi_get(coh_etcd *e, coh_err *err, const void *const *k,
                                 const size_t *kl, int n, void **v, size_t *vl, int timeout_ms)
{
    ekey *ks = NULL;
    wstate w;
    if (n > 0 && (!v || !vl))
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd multi_get: NULL output arrays");
    cohort_status st = ukeys(e, err, k, kl, n, &ks);
    if (st != COHORT_OK)
        return st;
    if (n == 0) {
        ekeys_free(ks, 0);
        return COHORT_OK;
    }
    if ((st = ws_init(&w, e, err, ks, n, 0, 1)) == COHORT_OK &&
        (st = ws_run(&w, timeout_ms, "multi_get")) == COHORT_OK) {
        for (int i = 0; i < n; i++) {
            v[i] = w.vals[i];
            vl[i] = w.vlens[i];
            w.vals[i] = NULL;
        }
    }
    ws_fini(&w);
    ekeys_free(ks, n);
    return st;
}

cohort_status coh_etcd_check(coh_etcd *e, coh_err *err, const void *const *k, const size_t *kl,
                             int n, int *all)
{
    ekey *ks = NULL;
    wstate w;
    cohort_status st = ukeys(e, err, k, kl, n, &ks);
    if (st != COHORT_OK)
        return st;
    if ((st = ws_init(&w, e, err, ks, n, 0, 0)) == COHORT_OK) {
        int64_t rev;
        if (n == 0 || (st = ws_read(&w, op_deadline(e, -1), &rev)) == COHORT_OK)
            *all = ws_done(&w);
    }
    ws_fini(&w);
    ekeys_free(ks, n);
    return st;
}

/* ---- read-modify-write ---- */

/* Runs the guarded txn: compare MOD(key) == rev; success puts key = val and
 * the marker = mval; failure reads key and marker. On failure *kv is the
 * key's current kv (borrowed from *reply, NULL if absent) and *mine says
 * whether the marker shows this very op already applied (a re-sent txn). */
static cohort_status rmw_txn(coh_etcd *e, coh_err *err, const ekey *key, const ekey *mk,
                             int64_t rev, const void *val, size_t vl, const char *mval,
                             uint64_t deadline, int *ok, json_t **reply, json_t **kv,
                             unsigned char **mark, size_t *markl)
{
    /* json_pack releases the stolen ("o") values when any of them is NULL. */
    json_t *r = NULL;
    cohort_status st = call(
        e, err, "/v3/kv/txn",
        j_txn(json_pack("[o]", j_cmp_mod(key, rev)),
              json_pack("[o, o]", j_put(key, val, vl), j_put(mk, mval, strlen(mval))),
              json_pack("[o, o]", j_range(key, 0, 0), j_range(mk, 0, 0))),
        deadline, &r);
    if (st != COHORT_OK)
        return st;
    *reply = r;
    *ok = json_is_true(json_object_get(r, "succeeded"));
    *kv = NULL;
    *mark = NULL;
    *markl = 0;
    if (*ok)
        return COHORT_OK;
    *kv = first_kv(txn_resp(r, 0, "response_range"));
    json_t *mkv = first_kv(txn_resp(r, 1, "response_range"));
    if (mkv)
        return kv_value(err, mkv, mark, markl);
    return COHORT_OK;
}

static cohort_status add_full(coh_etcd *e, coh_err *err, const ekey *key, int64_t d,
                              int64_t *res, uint64_t deadline)
{
    ekey mk;
    cohort_status st = marker_key(e, &mk, err);
    if (st != COHORT_OK)
        return st;
    uint64_t seq = ++e->op_seq;
    /* First guess: what this handle saw last, else "absent"; a wrong guess
     * costs one failed txn that returns the truth. */
    int64_t rev = 0, cur = 0;
    int known = 0;
    if (e->ac_key && e->ac_kl == key->n && !memcmp(e->ac_key, key->p, key->n)) {
        rev = e->ac_rev;
        cur = e->ac_val;
    }
    int conflicts = 0;
    char kb[200];
    for (;;) {
        int64_t nv = 0;
        if (__builtin_add_overflow(cur, d, &nv)) {
            if (known) {
                st = coh_err_set(err, COHORT_ERR_INVALID, "etcd add on '%s': %lld + %lld overflows",
                                 ekfmt(e, kb, sizeof kb, key), (long long)cur, (long long)d);
                break;
            }
            rev = -1; /* a guess that overflows: just read (MOD == -1 fails) */
        }
        char val[32], mval[64];
        snprintf(val, sizeof val, "%lld", (long long)nv);
        snprintf(mval, sizeof mval, "%llu %lld", (unsigned long long)seq, (long long)nv);
        int ok;
        json_t *r = NULL, *kv;
        unsigned char *mark;
        size_t markl;
        st = rmw_txn(e, err, key, &mk, rev, val, strlen(val), mval, deadline, &ok, &r, &kv, &mark,
                     &markl);
        if (st != COHORT_OK) {
            json_decref(r);
            break;
        }
        if (ok) {
            *res = nv;
            /* Our put is the txn's revision: remember it for the next add. */
            unsigned char *ck = e->ac_kl == key->n ? e->ac_key : coh_realloc(e->ac_key, key->n);
            if (ck) {
                memcpy(ck, key->p, key->n);
                e->ac_key = ck;
                e->ac_kl = key->n;
                e->ac_rev = etcd_int(json_object_get(r, "header"), "revision");
                e->ac_val = nv;
            }
            json_decref(r);
            break;
        }
        /* Already applied by a re-sent attempt: report what it wrote. */
        char want[32];
        int wl = snprintf(want, sizeof want, "%llu ", (unsigned long long)seq);
        if (mark && markl > (size_t)wl && !memcmp(mark, want, (size_t)wl) &&
            parse_i64(mark + wl, markl - (size_t)wl, res) == 0) {
            coh_free(mark);
            json_decref(r);
            break;
        }
        coh_free(mark);
        cur = 0;
        rev = 0;
        known = 1;
        if (kv) {
            unsigned char *v;
            size_t vl;
            if ((st = kv_value(err, kv, &v, &vl)) != COHORT_OK) {
                json_decref(r);
                break;
            }
            int bad = parse_i64(v, vl, &cur);
            coh_free(v);
            if (bad) {
                json_decref(r);
                st = coh_err_set(err, COHORT_ERR_INVALID,
                                 "etcd add on '%s': the key holds a value that is not a decimal integer",
                                 ekfmt(e, kb, sizeof kb, key));
                break;
            }
            rev = etcd_int(kv, "mod_revision");
        }
        json_decref(r);
        if (++conflicts > 1 && coh_ms_left(deadline) == 0) {
            st = coh_err_set(err, COHORT_ERR_TIMEOUT, "etcd add on '%s': %d conflicting updates, out of time",
                             ekfmt(e, kb, sizeof kb, key), conflicts);
            break;
        }
    }
    coh_free(mk.p);
    return st;
}

cohort_status coh_etcd_add(coh_etcd *e, coh_err *err, const void *k, size_t kl, int64_t d,
                           int64_t *res)
{
    ekey key = {0};
    cohort_status st = ukey(e, &key, k, kl, err);
    if (st != COHORT_OK)
        return st;
    int64_t r = 0;
    st = add_full(e, err, &key, d, &r, op_deadline(e, -1));
    if (st == COHORT_OK && res)
        *res = r;
    coh_free(key.p);
    return st;
}

cohort_status coh_etcd_append(coh_etcd *e, coh_err *err, const void *k, size_t kl, const void *v,
                              size_t vl)
{
    ekey key, mk;
    if (!v && vl)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd append: NULL value with length %zu", vl);
    cohort_status st = ukey(e, &key, k, kl, err);
    if (st != COHORT_OK)
        return st;
    if ((st = marker_key(e, &mk, err)) != COHORT_OK) {
        coh_free(key.p);
        return st;
    }
    uint64_t deadline = op_deadline(e, -1);
    uint64_t seq = ++e->op_seq;
    char mval[32];
    snprintf(mval, sizeof mval, "%llu", (unsigned long long)seq);
    int64_t rev = 0;
    unsigned char *old = NULL;
    size_t ol = 0;
    for (;;) {
        unsigned char *nv = coh_malloc(ol + vl + 1);
        if (!nv) {
            st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
            break;
        }
        if (ol)
            memcpy(nv, old, ol);
        if (vl)
            memcpy(nv + ol, v, vl);
        int ok;
        json_t *r = NULL, *kv;
        unsigned char *mark;
        size_t markl;
        st = rmw_txn(e, err, &key, &mk, rev, nv, ol + vl, mval, deadline, &ok, &r, &kv, &mark,
                     &markl);
        coh_free(nv);
        if (st != COHORT_OK || ok) {
            json_decref(r);
            break;
        }
        int mine = mark && markl == strlen(mval) && !memcmp(mark, mval, markl);
        coh_free(mark);
        if (mine) {
            json_decref(r);
            break;
        }
        coh_free(old);
        old = NULL;
        ol = 0;
        rev = 0;
        if (kv) {
            if ((st = kv_value(err, kv, &old, &ol)) != COHORT_OK) {
                json_decref(r);
                break;
            }
            rev = etcd_int(kv, "mod_revision");
        }
        json_decref(r);
        if (coh_ms_left(deadline) == 0) {
            st = coh_err_set(err, COHORT_ERR_TIMEOUT, "etcd append: conflicting updates, out of time");
            break;
        }
    }
    coh_free(old);
    coh_free(mk.p);
    coh_free(key.p);
    return st;
}

cohort_status coh_etcd_compare_set(coh_etcd *e, coh_err *err, const void *k, size_t kl,
                                   const void *ex, size_t el, const void *de, size_t dl,
                                   void **cur, size_t *curl)
{
    ekey key = {0};
    if ((!ex && el) || (!de && dl))
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd compare_set: NULL buffer with a length");
    cohort_status st = ukey(e, &key, k, kl, err);
    if (st != COHORT_OK)
        return st;
    uint64_t deadline = op_deadline(e, -1);
    /* Empty expected matches a missing key or an empty value: try "absent"
     * first, then, if the key holds "", a txn pinned to its revision. */
    int64_t pin = 0;
    int stage = el == 0 ? 0 : 2; /* 0: absent, 1: empty at pin, 2: value equal */
    unsigned char *got = NULL;
    size_t gl = 0;
    int present = 0;
    for (;;) {
        json_t *c = stage == 0 ? j_cmp_absent(&key) : stage == 1 ? j_cmp_mod(&key, pin)
                                                             : j_cmp_value(&key, ex, el);
        json_t *r = NULL;
        st = call(e, err, "/v3/kv/txn",
                  j_txn(json_pack("[o]", c), json_pack("[o]", j_put(&key, de, dl)),
                        json_pack("[o]", j_range(&key, 0, 0))),
                  deadline, &r);
        if (st != COHORT_OK)
            break;
        if (json_is_true(json_object_get(r, "succeeded"))) {
            json_decref(r);
            present = 1;
            got = coh_malloc(dl + 1);
            if (!got) {
                st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
                break;
            }
            if (dl)
                memcpy(got, de, dl);
            got[dl] = 0;
            gl = dl;
            break;
        }
        json_t *kv = first_kv(txn_resp(r, 0, "response_range"));
        coh_free(got);
        got = NULL;
        gl = 0;
        present = kv != NULL;
        if (kv && (st = kv_value(err, kv, &got, &gl)) != COHORT_OK) {
            json_decref(r);
            break;
        }
        int64_t mrev = etcd_int(kv, "mod_revision");
        json_decref(r);
        /* Retry only when expected is empty and the key holds "" (stage 0
         * failed because it exists, or stage 1 lost a race to a writer). */
        if (el == 0 && present && gl == 0) {
            stage = 1;
            pin = mrev;
            coh_free(got);
            got = NULL;
        } else if (el == 0 && !present && stage == 1) {
            stage = 0; /* deleted meanwhile: try creating again */
        } else {
            break; /* lost: report the current value */
        }
        if (coh_ms_left(deadline) == 0) {
            st = coh_err_set(err, COHORT_ERR_TIMEOUT, "etcd compare_set: conflicting updates, out of time");
            break;
        }
    }
    if (st == COHORT_OK) {
        if (cur) {
            *cur = present ? got : NULL;
            if (curl)
                *curl = present ? gl : 0;
            got = NULL;
        }
    }
    coh_free(got);
    coh_free(key.p);
    return st;
}

/* ---- prefix ranges ---- */

cohort_status coh_etcd_num_keys(coh_etcd *e, coh_err *err, const void *p, size_t pl, int64_t *n)
{
    ekey key = {0};
    cohort_status st = ukey(e, &key, p, pl, err);
    if (st != COHORT_OK)
        return st;
    json_t *r = NULL;
    st = call(e, err, "/v3/kv/range",
              json_pack("{s:o, s:o, s:b}", "key", etcd_b64(key.p, key.n), "range_end",
                        etcd_prefix_end(key.p, key.n), "count_only", 1),
              op_deadline(e, -1), &r);
    if (st == COHORT_OK)
        *n = etcd_int(r, "count");
    json_decref(r);
    coh_free(key.p);
    return st;
}

#define LIST_PAGE 10000

/* Keys come back relative to the job (a view's prefix included): the
 * store front end strips the view's part. */
cohort_status coh_etcd_list(coh_etcd *e, coh_err *err, const void *p, size_t pl, char ***keys,
                            size_t **klens, int *n)
{
    ekey key = {0};
    cohort_status st = ukey(e, &key, p, pl, err);
    if (st != COHORT_OK)
        return st;
    json_t *end = etcd_prefix_end(key.p, key.n);
    uint64_t deadline = op_deadline(e, -1);
    char **ks = NULL;
    size_t *ls = NULL;
    int cnt = 0, cap = 0;
    int64_t at = 0;
    /* Pages of LIST_PAGE keys, all read at the first page's revision. */
    unsigned char *from = coh_malloc(key.n + 1);
    size_t fl = key.n;
    if (!end || !from) {
        st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
        goto out;
    }
    memcpy(from, key.p, key.n);
    for (;;) {
        json_t *b = json_pack("{s:o, s:O, s:b, s:i}", "key", etcd_b64(from, fl), "range_end", end,
                              "keys_only", 1, "limit", LIST_PAGE);
        if (b && at && json_object_set_new(b, "revision", j_rev(at))) {
            json_decref(b);
            b = NULL;
        }
        json_t *r = NULL;
        if ((st = call(e, err, "/v3/kv/range", b, deadline, &r)) != COHORT_OK)
            goto out;
        if (!at)
            at = etcd_int(json_object_get(r, "header"), "revision");
        json_t *kvs = json_object_get(r, "kvs");
        size_t i;
        json_t *kv;
        json_array_foreach(kvs, i, kv) {
            unsigned char *k;
            size_t kl;
            int rc = etcd_unb64(kv, "key", &k, &kl);
            if (rc || kl < e->cfg.kroot_len) {
                coh_free(rc ? NULL : k);
                json_decref(r);
                st = coh_err_set(err, rc == -2 ? COHORT_ERR_NOMEM : COHORT_ERR_PROTOCOL,
                                 "etcd list: bad key in the reply");
                goto out;
            }
            if (cnt == cap) {
                if (cap > INT_MAX / 2) {
                    coh_free(k);
                    json_decref(r);
                    st = coh_err_set(err, COHORT_ERR_TOO_LARGE, "etcd list: too many keys");
                    goto out;
                }
                cap = cap ? cap * 2 : 64;
                char **nk = coh_realloc(ks, (size_t)cap * sizeof *ks);
                if (nk)
                    ks = nk;
                size_t *nl = nk ? coh_realloc(ls, (size_t)cap * sizeof *ls) : NULL;
                if (nl)
                    ls = nl;
                if (!nk || !nl) {
                    coh_free(k);
                    json_decref(r);
                    st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
                    goto out;
                }
            }
            /* Strip the job root: callers see their own key names. */
            size_t ul = kl - e->cfg.kroot_len;
            memmove(k, k + e->cfg.kroot_len, ul);
            k[ul] = 0;
            ks[cnt] = (char *)k;
            ls[cnt] = ul;
            cnt++;
            if (i + 1 == json_array_size(kvs)) {
                /* The next page starts just after the last key. */
                unsigned char *nf = coh_realloc(from, e->cfg.kroot_len + ul + 1);
                if (!nf) {
                    json_decref(r);
                    st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
                    goto out;
                }
                from = nf;
                memcpy(from, e->cfg.kroot, e->cfg.kroot_len);
                memcpy(from + e->cfg.kroot_len, k, ul);
                from[e->cfg.kroot_len + ul] = 0;
                fl = e->cfg.kroot_len + ul + 1;
            }
        }
        int more = json_is_true(json_object_get(r, "more"));
        json_decref(r);
        if (!more)
            break;
    }
    *keys = ks;
    *klens = ls;
    *n = cnt;
    ks = NULL;
    ls = NULL;
    cnt = 0;
out:
    for (int i = 0; i < cnt; i++)
        coh_free(ks[i]);
    coh_free(ks);
    coh_free(ls);
    coh_free(from);
    json_decref(end);
    coh_free(key.p);
    return st;
}

/* ---- barrier and generation ---- */

cohort_status coh_etcd_barrier(coh_etcd *e, coh_err *err, const void *name, size_t nl, int n,
                               int timeout_ms)
{
    char nb[200];
    if (n < 1)
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd barrier: n=%d, expected >= 1", n);
    if (nl > ETCD_MAX_KEY || (!name && nl))
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd barrier: bad name");
    uint64_t deadline = op_deadline(e, timeout_ms);
    ekey cnt = {0}, go = {0};
    cohort_status st;
    if ((st = ekey_make(&cnt, e->cfg.mroot, e->cfg.mroot_len, "barrier/", 8, err)) ||
        (st = ekey_make(&go, e->cfg.mroot, e->cfg.mroot_len, "barrier/", 8, err)))
        goto out;
    /* m/barrier/<name>/count and m/barrier/<name>/go */
    unsigned char *c2 = coh_realloc(cnt.p, cnt.n + nl + 7);
    if (c2)
        cnt.p = c2;
    unsigned char *g2 = c2 ? coh_realloc(go.p, go.n + nl + 4) : NULL;
    if (g2)
        go.p = g2;
    if (!c2 || !g2) {
        st = coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
        goto out;
    }
    memcpy(cnt.p + cnt.n, name, nl);
    memcpy(cnt.p + cnt.n + nl, "/count", 6);
    cnt.n += nl + 6;
    memcpy(go.p + go.n, name, nl);
    memcpy(go.p + go.n + nl, "/go", 3);
    go.n += nl + 3;

    int64_t arrived = 0;
    if ((st = add_full(e, err, &cnt, 1, &arrived, deadline)) != COHORT_OK)
        goto out;
    if (arrived > n) {
        st = coh_err_set(err, COHORT_ERR_INVALID,
                         "etcd barrier '%s': arrival %lld of n=%d (the name was used before, or callers disagree on n)",
                         kfmt(nb, sizeof nb, name, nl), (long long)arrived, n);
        goto out;
    }
    if (arrived == n) {
        json_t *r = NULL;
        st = call(e, err, "/v3/kv/put",
                  json_pack("{s:o, s:o}", "key", etcd_b64(go.p, go.n), "value", etcd_b64("1", 1)),
                  deadline, &r);
        json_decref(r);
        goto out;
    }
    wstate w;
    if ((st = ws_init(&w, e, err, &go, 1, 0, 0)) == COHORT_OK) {
        int left = coh_ms_left(deadline);
        st = ws_run(&w, left == INT_MAX ? -1 : left, "barrier");
        if (st == COHORT_ERR_TIMEOUT)
            coh_err_set(err, COHORT_ERR_TIMEOUT,
                        "etcd barrier '%s': timed out with %lld of %d arrived when this caller came",
                        kfmt(nb, sizeof nb, name, nl), (long long)arrived, n);
    }
    ws_fini(&w);
out:
    coh_free(cnt.p);
    coh_free(go.p);
    return st;
}

cohort_status coh_etcd_check_generation(coh_etcd *e, coh_err *err, uint32_t gen,
                                        uint64_t deadline)
{
    ekey key = {0};
    cohort_status st = ekey_make(&key, e->cfg.mroot, e->cfg.mroot_len, "generation", 10, err);
    if (st != COHORT_OK)
        return st;
    if (gen == 0) {
        /* Tools: only prove the cluster answers and lets us read. */
        json_t *r = NULL;
        st = call(e, err, "/v3/kv/range", j_range_body(&key, 1, 0), deadline, &r);
        json_decref(r);
        coh_free(key.p);
        return st;
    }
    char gv[16];
    snprintf(gv, sizeof gv, "%u", gen);
    int64_t rev = 0;
    for (;;) {
        json_t *r = NULL;
        st = call(e, err, "/v3/kv/txn",
                  j_txn(json_pack("[o]", j_cmp_mod(&key, rev)),
                        json_pack("[o]", j_put(&key, gv, strlen(gv))),
                        json_pack("[o]", j_range(&key, 0, 0))),
                  deadline, &r);
        if (st != COHORT_OK)
            break;
        if (json_is_true(json_object_get(r, "succeeded"))) {
            json_decref(r);
            break;
        }
        json_t *kv = first_kv(txn_resp(r, 0, "response_range"));
        unsigned char *v = NULL;
        size_t vl = 0;
        int64_t cur = 0;
        if (kv && (st = kv_value(err, kv, &v, &vl)) != COHORT_OK) {
            json_decref(r);
            break;
        }
        int bad = kv && parse_i64(v, vl, &cur);
        coh_free(v);
        rev = etcd_int(kv, "mod_revision");
        json_decref(r);
        if (bad) {
            st = coh_err_set(err, COHORT_ERR_STORE, "etcd: job '%s' generation key holds garbage",
                             e->cfg.job);
            break;
        }
        if (cur > (int64_t)gen) {
            st = coh_err_set(err, COHORT_ERR_AUTH,
                             "etcd: stale generation: job '%s' is at generation %lld, this client has %u",
                             e->cfg.job, (long long)cur, gen);
            break;
        }
        if (cur == (int64_t)gen)
            break;
        if (coh_ms_left(deadline) == 0) {
            st = coh_err_set(err, COHORT_ERR_TIMEOUT, "etcd: generation update kept conflicting");
            break;
        }
    }
    coh_free(key.p);
    return st;
}
