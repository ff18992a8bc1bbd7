/*
 * etcd_lease.c - one lease per client handle, kept alive by a thread.
 *
 * The lease is granted on the first leased put (most handles never need
 * one). Keys put with it vanish when the process dies: the keep-alive
 * thread stops, and etcd expires the lease after its TTL. A clean close
 * revokes it, so the keys vanish at once.
 *
 * A lease that expired is never silently replaced: peers may already have
 * acted on the vanished keys (declared this rank dead), so later leased
 * puts fail with COHORT_ERR_STORE naming the cause.
 *
 * Lock order: e->mu (the caller's op lock) before lease.mu. The keep-alive
 * thread takes only lease.mu and uses only its own connection.
 */
#include "store/etcd/etcd_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Absolute CLOCK_MONOTONIC time ms from now, for pthread_cond_timedwait. */
static struct timespec abs_in_ms(int ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* Marks the lease lost: "lease <id> <what>[: <detail>]" (lease.mu held). */
static void lease_lost(coh_etcd_lease *l, const char *what, const char *detail)
{
    l->lost = 1;
    snprintf(l->why, sizeof l->why, "lease %lld %s%s%.300s", (long long)l->id, what,
             *detail ? ": " : "", detail);
    coh_warn("etcd: %s", l->why);
}

static void *keepalive_main(void *arg)
{
    coh_etcd *e = arg;
    coh_etcd_lease *l = &e->lease;
    pthread_mutex_lock(&l->mu);
    uint64_t ttl_ns = (uint64_t)l->ttl_s * 1000000000ull;
    uint64_t last_ok = coh_now_ns();
    int period = l->ttl_s * 1000 / 3; /* etcd clients renew at TTL/3 */
    if (period < 200)
        period = 200;
    int wait_ms = period;
    while (!l->stop && !l->lost) {
        struct timespec ts = abs_in_ms(wait_ms);
        int rc = 0;
        while (!l->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&l->cv, &l->mu, &ts);
        if (l->stop)
            break;
        char id[32];
        snprintf(id, sizeof id, "%lld", (long long)l->id);
        pthread_mutex_unlock(&l->mu);

        /* Each try is bounded so that close never waits long for us. */
        json_t *body = json_pack("{s:s}", "ID", id);
        json_t *r = NULL;
        coh_err err = {0};
        cohort_status st = body ? coh_etcd_call(&l->conn, &err, "/v3/lease/keepalive", body,
                                                coh_deadline_ns(COH_MAX(period, 500)), &r)
                                : coh_err_set(&err, COHORT_ERR_NOMEM, "out of memory");
        json_decref(body);
        int64_t ttl = st == COHORT_OK ? etcd_int(json_object_get(r, "result"), "TTL") : 0;
        json_decref(r);

        pthread_mutex_lock(&l->mu);
        if (l->stop)
            break;
        uint64_t now = coh_now_ns();
        if (st == COHORT_OK && ttl > 0) {
            last_ok = now;
            wait_ms = period;
        } else if (st == COHORT_OK) {
            lease_lost(l, "expired (keep-alive answered TTL 0)", "");
        } else if (now - last_ok >= ttl_ns) {
            lease_lost(l, "lost: no keep-alive got through within its TTL", err.msg);
        } else {
            wait_ms = 250; /* transient: retry soon, while the TTL lasts */
            coh_debug("etcd: lease keep-alive failed, retrying: %s", err.msg);
        }
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Grants the lease and starts the keep-alive thread (lease.mu held). */
static cohort_status lease_grant(coh_etcd *e, coh_err *err)
{
    coh_etcd_lease *l = &e->lease;
    json_t *r = NULL;
    json_t *b = json_pack("{s:i}", "TTL", e->cfg.lease_ttl_s);
    cohort_status st = b ? coh_etcd_call(&e->conn, err, "/v3/lease/grant", b,
                                         coh_deadline_ns(e->timeout_ms), &r)
                         : coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    json_decref(b);
    if (st != COHORT_OK)
        return st;
    int64_t id = etcd_int(r, "ID");
    int64_t ttl = etcd_int(r, "TTL");
    json_decref(r);
    if (id == 0 || ttl <= 0)
        return coh_err_set(err, COHORT_ERR_PROTOCOL, "etcd lease grant: no ID/TTL in the reply");
    if ((st = coh_etcd_conn_init(&l->conn, &e->cfg, err)) != COHORT_OK)
        goto revoke;
    /* Start at the member the op connection uses, with its auth token
     * (valid there): no second bcrypt round on the server. */
    l->conn.ep = e->conn.ep;
    if (e->conn.auth_on > 0 && e->conn.auth && e->conn.auth_ep == e->conn.ep) {
        l->conn.auth = coh_strdup(e->conn.auth);
        if (l->conn.auth) {
            l->conn.auth_on = 1;
            l->conn.auth_ep = e->conn.ep;
        }
    }
    l->id = id;
    l->ttl_s = (int)ttl; /* the server may raise a short TTL to its minimum */
    l->stop = 0;
    int rc = pthread_create(&l->thr, NULL, keepalive_main, e);
    if (rc != 0) {
        coh_etcd_conn_fini(&l->conn);
        st = coh_err_sys(err, COHORT_ERR_SYSTEM, "pthread_create", rc,
                         "etcd: cannot start the lease keep-alive thread");
        goto revoke;
    }
    l->granted = 1;
    coh_debug("etcd: lease %lld granted, TTL %lld s", (long long)id, (long long)ttl);
    return COHORT_OK;
revoke:;
    /* (a declaration right after a label is not C11) */
    char ids[32];
    snprintf(ids, sizeof ids, "%lld", (long long)id);
    b = json_pack("{s:s}", "ID", ids);
    if (b) {
        coh_err tmp;
        if (coh_etcd_call(&e->conn, &tmp, "/v3/lease/revoke", b, coh_deadline_ns(1000), &r) ==
            COHORT_OK)
            json_decref(r);
        json_decref(b);
    }
    return st;
}

cohort_status coh_etcd_put_lease(coh_etcd *e, coh_err *err, const void *k, size_t kl,
                                 const void *v, size_t vl)
{
    coh_etcd_lease *l = &e->lease;
    if (kl > ETCD_MAX_KEY)
        return coh_err_set(err, COHORT_ERR_TOO_LARGE, "etcd: key of %zu bytes (limit %d)", kl,
                           ETCD_MAX_KEY);
    if ((!k && kl) || (!v && vl))
        return coh_err_set(err, COHORT_ERR_INVALID, "etcd put_lease: NULL buffer with a length");
    pthread_mutex_lock(&l->mu);
    cohort_status st = COHORT_OK;
    if (l->lost)
        st = coh_err_set(err, COHORT_ERR_STORE, "etcd: %s", l->why);
    else if (!l->granted)
        st = lease_grant(e, err);
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)l->id);
    pthread_mutex_unlock(&l->mu);
    if (st != COHORT_OK)
        return st;

    json_t *r = NULL;
    json_t *b = json_pack("{s:o, s:o, s:s}", "key", etcd_b64_2(e->cfg.kroot, e->cfg.kroot_len, k, kl),
                          "value", etcd_b64(v, vl), "lease", id);
    st = b ? coh_etcd_call(&e->conn, err, "/v3/kv/put", b, coh_deadline_ns(e->timeout_ms), &r)
           : coh_err_set(err, COHORT_ERR_NOMEM, "etcd: out of memory");
    json_decref(b);
    json_decref(r);
    if (st == COHORT_ERR_NOT_FOUND) {
        /* etcd no longer knows the lease: it expired under us. */
        pthread_mutex_lock(&l->mu);
        if (!l->lost)
            lease_lost(l, "expired before the put", "etcd: requested lease not found");
        st = coh_err_set(err, COHORT_ERR_STORE, "etcd: %s", l->why);
        pthread_mutex_unlock(&l->mu);
    }
    return st;
}

int coh_etcd_lease_state(coh_etcd *e, int64_t *id)
{
    coh_etcd_lease *l = &e->lease;
    pthread_mutex_lock(&l->mu);
    int s = l->lost ? -1 : l->granted ? 1 : 0;
    if (id)
        *id = l->id;
    pthread_mutex_unlock(&l->mu);
    return s;
}

void coh_etcd_lease_stop(coh_etcd *e)
{
    coh_etcd_lease *l = &e->lease;
    pthread_mutex_lock(&l->mu);
    int granted = l->granted;
    int lost = l->lost;
    l->stop = 1;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (!granted)
        return;
    pthread_join(l->thr, NULL);
    coh_etcd_conn_fini(&l->conn);
    l->granted = 0;
    if (lost)
        return;
    /* Revoke: the leased keys vanish now rather than after the TTL. */
    char id[32];
    snprintf(id, sizeof id, "%lld", (long long)l->id);
    json_t *b = json_pack("{s:s}", "ID", id);
    json_t *r = NULL;
    coh_err tmp;
    if (b && coh_etcd_call(&e->conn, &tmp, "/v3/lease/revoke", b, coh_deadline_ns(500), &r) ==
                 COHORT_OK)
        json_decref(r);
    json_decref(b);
}
