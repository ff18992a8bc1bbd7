/*
 * etcd_backend.c - the store backend vtable for "etcd://" addresses: a thin
 * adapter from cohort_store handles to coh_etcd (etcd_int.h).
 *
 * A root handle owns one coh_etcd (coh_store_priv); prefixed views share it.
 * Handles are thread-safe by serialising every op on the coh_etcd's mutex,
 * like the tcp backend serialises on its connection; the lease keep-alive
 * thread runs beside it on its own connection.
 */
#include "store/backend.h"
#include "store/etcd/etcd.h"
#include "store/etcd/etcd_int.h"
#include "store/etcd/plugin.h"

#include "cohort_config.h"

#include <string.h>

/* The connection of s (views share their root's). */
static coh_etcd *H(cohort_store *s) { return coh_store_priv(s); }

/* Takes the handle's lock and its current default timeout (a view may have
 * its own). */
static coh_etcd *enter(cohort_store *s)
{
    coh_etcd *e = H(s);
    pthread_mutex_lock(&e->mu);
    e->timeout_ms = coh_store_timeout(s);
    return e;
}

static cohort_status leave(coh_etcd *e, cohort_status st)
{
    pthread_mutex_unlock(&e->mu);
    return st;
}

/* Failure detail goes to coh_store_err(s); the front end moves it to
 * cohort_last_error(NULL) since no handle is returned. */
static cohort_status be_connect(cohort_store *s, const char *addr, const char *job_id,
                                const char *token, uint32_t generation, int timeout_ms)
{
    coh_etcd *e = NULL;
    cohort_status st =
        coh_etcd_open(&e, addr, job_id, token, generation, timeout_ms, coh_store_err(s));
    if (st != COHORT_OK)
        return st;
    e->timeout_ms = coh_store_timeout(s);
    coh_store_set_priv(s, e);
    return COHORT_OK;
}

/* Called once, when the root and all its views are closed. */
static void be_close(cohort_store *s)
{
    coh_etcd_close(H(s));
    coh_store_set_priv(s, NULL);
}

static cohort_status be_set(cohort_store *s, const void *k, size_t kl, const void *v, size_t vl)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_set(e, coh_store_err(s), k, kl, v, vl));
}

static cohort_status be_get(cohort_store *s, const void *k, size_t kl, void **v, size_t *vl,
                            int timeout_ms)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_get(e, coh_store_err(s), k, kl, v, vl, timeout_ms));
}

static cohort_status be_add(cohort_store *s, const void *k, size_t kl, int64_t d, int64_t *res)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_add(e, coh_store_err(s), k, kl, d, res));
}

static cohort_status be_compare_set(cohort_store *s, const void *k, size_t kl, const void *ex,
                                    size_t el, const void *de, size_t dl, void **cur,
                                    size_t *curl)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_compare_set(e, coh_store_err(s), k, kl, ex, el, de, dl, cur, curl));
}

static cohort_status be_check(cohort_store *s, const void *const *k, const size_t *kl, int n,
                              int *all)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_check(e, coh_store_err(s), k, kl, n, all));
}

static cohort_status be_wait(cohort_store *s, const void *const *k, const size_t *kl, int n,
                             int any, int timeout_ms, int *which)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_wait(e, coh_store_err(s), k, kl, n, any, timeout_ms, which));
}

static cohort_status be_del(cohort_store *s, const void *k, size_t kl, int *deleted)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_del(e, coh_store_err(s), k, kl, deleted));
}

static cohort_status be_num_keys(cohort_store *s, const void *p, size_t pl, int64_t *n)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_num_keys(e, coh_store_err(s), p, pl, n));
}

static cohort_status be_list(cohort_store *s, const void *p, size_t pl, char ***keys,
                             size_t **klens, int *n)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_list(e, coh_store_err(s), p, pl, keys, klens, n));
}

static cohort_status be_multi_get(cohort_store *s, const void *const *k, const size_t *kl, int n,
                                  void **v, size_t *vl, int timeout_ms)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_multi_get(e, coh_store_err(s), k, kl, n, v, vl, timeout_ms));
}

static cohort_status be_multi_set(cohort_store *s, const void *const *k, const size_t *kl,
                                  const void *const *v, const size_t *vl, int n)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_multi_set(e, coh_store_err(s), k, kl, v, vl, n));
}

static cohort_status be_append(cohort_store *s, const void *k, size_t kl, const void *v,
                               size_t vl)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_append(e, coh_store_err(s), k, kl, v, vl));
}

static cohort_status be_barrier(cohort_store *s, const void *name, size_t nl, int n,
                                int timeout_ms)
{
    coh_etcd *e = enter(s);
    return leave(e, coh_etcd_barrier(e, coh_store_err(s), name, nl, n, timeout_ms));
}

/* Every op is the coh_etcd_* function of the same name under the handle's
 * lock (etcd_kv.c documents the mapping onto etcd requests). */
static const coh_store_backend etcd_backend = {
    .scheme = "etcd",
    .connect = be_connect,
    .close = be_close,
    .set = be_set,
    .get = be_get,
    .add = be_add,
    .compare_set = be_compare_set,
    .check = be_check,
    .wait = be_wait,
    .del = be_del,
    .num_keys = be_num_keys,
    .list = be_list,
    .multi_get = be_multi_get,
    .multi_set = be_multi_set,
    .append = be_append,
    .barrier = be_barrier,
};

/* ---- etcd.h (reached through the plugin table; etcd_load.c) ---- */

/* s is an etcd handle (root or view) with a live connection. */
static int is_etcd(cohort_store *s)
{
    return s && coh_store_backend_of(s) == &etcd_backend && coh_store_priv(s);
}

static cohort_status put_lease(cohort_store *s, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    if (!is_etcd(s))
        return coh_err_set(NULL, COHORT_ERR_UNSUPPORTED,
                           "coh_store_etcd_put_lease: not an etcd:// store handle");
    coh_err *err = coh_store_err(s);
    if ((!key && klen) || (!val && vlen))
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "coh_store_etcd_put_lease: NULL buffer with a length");
    /* The view's prefix applies, as for every other op. */
    size_t pl = 0;
    const void *p = coh_store_prefix(s, &pl);
    unsigned char *k = coh_malloc(pl + klen + 1);
    if (!k)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "coh_store_etcd_put_lease: out of memory");
    if (pl)
        memcpy(k, p, pl);
    if (klen)
        memcpy(k + pl, key, klen);
    coh_etcd *e = enter(s);
    cohort_status st = leave(e, coh_etcd_put_lease(e, err, k, pl + klen, val, vlen));
    coh_free(k);
    /* Outside the front end nothing copies the detail into the handle:
     * cohort_last_error(NULL) carries it. */
    if (st != COHORT_OK)
        coh_err_set(NULL, st, "%s", err->msg);
    return st;
}

static int lease_state(cohort_store *s)
{
    if (!is_etcd(s))
        return -1;
    return coh_etcd_lease_state(H(s), NULL);
}

static const coh_etcd_plugin plugin = {
    .abi = COH_ETCD_PLUGIN_ABI,
    .size = sizeof(coh_etcd_plugin),
    .version = COHORT_VERSION_STRING,
    .backend = &etcd_backend,
    .put_lease = put_lease,
    .lease_state = lease_state,
};

const coh_etcd_plugin *coh_etcd_plugin_table(void) { return &plugin; }
