/*
 * fake_store.c - TEST ONLY. A store client over a shared anonymous mapping
 * created by the test process before it forks the ranks, standing in for
 * the real client until src/store lands. It defines every symbol of
 * src/store/stub_store.c so that object is not linked. Keys and values are
 * small; get() blocks on a process-shared condition variable with a
 * deadline. Only set/get/gets/sets/delete/check/prefixed/close do anything.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "cohort_store.h"
#include "harness.h"

#define KV_N 256
#define KV_KEY 160
#define KV_VAL 2048

struct kv_entry {
    int used;
    size_t klen, vlen;
    char key[KV_KEY];
    char val[KV_VAL];
};

struct kv {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct kv_entry e[KV_N];
};

struct cohort_store {
    char prefix[64];
};

static struct kv *kv;

int th_store_init(void)
{
    if (kv) {
        munmap(kv, sizeof *kv);
        kv = NULL;
    }
    void *p = mmap(NULL, sizeof(struct kv), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED)
        return -1;
    kv = p;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&kv->mu, &ma);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&kv->cv, &ca);
    return 0;
}

cohort_store *th_store_handle(const char *prefix)
{
    cohort_store *s = calloc(1, sizeof *s);
    if (s)
        snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    return s;
}

static int full_key(const cohort_store *s, const void *k, size_t kl, char *out, size_t *ol)
{
    size_t pl = strlen(s->prefix);
    if (pl + kl > KV_KEY)
        return -1;
    memcpy(out, s->prefix, pl);
    memcpy(out + pl, k, kl);
    *ol = pl + kl;
    return 0;
}

static struct kv_entry *find(const char *k, size_t kl)
{
    for (int i = 0; i < KV_N; i++)
        if (kv->e[i].used && kv->e[i].klen == kl && !memcmp(kv->e[i].key, k, kl))
            return &kv->e[i];
    return NULL;
}

cohort_status cohort_store_set(cohort_store *s, const void *key, size_t klen, const void *val,
                               size_t vlen)
{
    char k[KV_KEY];
    size_t kl;
    if (!s || !kv || full_key(s, key, klen, k, &kl) || vlen > KV_VAL)
        return COHORT_ERR_INVALID;
    pthread_mutex_lock(&kv->mu);
    struct kv_entry *e = find(k, kl);
    for (int i = 0; !e && i < KV_N; i++)
        if (!kv->e[i].used)
            e = &kv->e[i];
    if (!e) {
        pthread_mutex_unlock(&kv->mu);
        return COHORT_ERR_TOO_LARGE;
    }
    e->used = 1;
    e->klen = kl;
    memcpy(e->key, k, kl);
    e->vlen = vlen;
    memcpy(e->val, val, vlen);
    pthread_cond_broadcast(&kv->cv);
    pthread_mutex_unlock(&kv->mu);
    return COHORT_OK;
}

cohort_status cohort_store_get(cohort_store *s, const void *key, size_t klen, void **val,
                               size_t *vlen, int timeout_ms)
{
    char k[KV_KEY];
    size_t kl;
    if (!s || !kv || full_key(s, key, klen, k, &kl))
        return COHORT_ERR_INVALID;
    if (timeout_ms < 0)
        timeout_ms = 60000;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&kv->mu);
    struct kv_entry *e;
    while (!(e = find(k, kl))) {
        if (pthread_cond_timedwait(&kv->cv, &kv->mu, &dl) == ETIMEDOUT && !find(k, kl)) {
            pthread_mutex_unlock(&kv->mu);
            return COHORT_ERR_TIMEOUT;
        }
    }
    *val = malloc(e->vlen ? e->vlen : 1);
    if (!*val) {
        pthread_mutex_unlock(&kv->mu);
        return COHORT_ERR_NOMEM;
    }
    memcpy(*val, e->val, e->vlen);
    *vlen = e->vlen;
    pthread_mutex_unlock(&kv->mu);
    return COHORT_OK;
}

cohort_status cohort_store_delete(cohort_store *s, const void *key, size_t klen, int *deleted)
{
    char k[KV_KEY];
    size_t kl;
    if (!s || !kv || full_key(s, key, klen, k, &kl))
        return COHORT_ERR_INVALID;
    pthread_mutex_lock(&kv->mu);
    struct kv_entry *e = find(k, kl);
    if (e)
        e->used = 0;
    pthread_mutex_unlock(&kv->mu);
    if (deleted)
        *deleted = e != NULL;
    return COHORT_OK;
}

cohort_status cohort_store_check(cohort_store *s, const void *const *keys, const size_t *klens,
                                 int n, int *all_exist)
{
    *all_exist = 1;
    for (int i = 0; i < n; i++) {
        char k[KV_KEY];
        size_t kl;
        if (!s || !kv || full_key(s, keys[i], klens[i], k, &kl))
            return COHORT_ERR_INVALID;
        pthread_mutex_lock(&kv->mu);
        if (!find(k, kl))
            *all_exist = 0;
        pthread_mutex_unlock(&kv->mu);
    }
    return COHORT_OK;
}

cohort_status cohort_store_sets(cohort_store *s, const char *key, const char *val)
{
    return cohort_store_set(s, key, strlen(key), val, strlen(val));
}

cohort_status cohort_store_gets(cohort_store *s, const char *key, char **val, int timeout_ms)
{
    void *v;
    size_t vl;
    cohort_status st = cohort_store_get(s, key, strlen(key), &v, &vl, timeout_ms);
    if (st != COHORT_OK)
        return st;
    char *r = realloc(v, vl + 1);
    if (!r) {
        free(v);
        return COHORT_ERR_NOMEM;
    }
    r[vl] = 0;
    *val = r;
    return COHORT_OK;
}

cohort_status cohort_store_prefixed(cohort_store *s, const char *prefix, cohort_store **out)
{
    char p[64];
    snprintf(p, sizeof p, "%s%s", s ? s->prefix : "", prefix);
    *out = th_store_handle(p);
    return *out ? COHORT_OK : COHORT_ERR_NOMEM;
}

void cohort_store_close(cohort_store *s) { free(s); }
void cohort_store_set_timeout(cohort_store *s, int timeout_ms) { (void)s, (void)timeout_ms; }
const char *cohort_store_last_error(const cohort_store *s)
{
    (void)s;
    return "test store";
}

/* ---- not provided by the test store ---- */

cohort_status cohort_store_server_start(cohort_store_server **out,
                                        const cohort_store_server_opts *opts)
{
    (void)out, (void)opts;
    return COHORT_ERR_UNSUPPORTED;
}
int cohort_store_server_port(const cohort_store_server *s)
{
    (void)s;
    return -1;
}
cohort_status cohort_store_server_add_job(cohort_store_server *s, const char *j, const char *t)
{
    (void)s, (void)j, (void)t;
    return COHORT_ERR_UNSUPPORTED;
}
void cohort_store_server_stop(cohort_store_server *s) { (void)s; }
cohort_status cohort_store_server_run(cohort_store_server *s, volatile int *stop)
{
    (void)s, (void)stop;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_server_create(cohort_store_server **out,
                                         const cohort_store_server_opts *opts)
{
    (void)out, (void)opts;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_connect(cohort_store **out, const char *addr, const char *job_id,
                                   const char *token, int timeout_ms)
{
    (void)addr, (void)job_id, (void)token, (void)timeout_ms;
    *out = th_store_handle("");
    return *out ? COHORT_OK : COHORT_ERR_NOMEM;
}
cohort_status cohort_store_add(cohort_store *s, const void *k, size_t kl, int64_t d, int64_t *r)
{
    (void)s, (void)k, (void)kl, (void)d, (void)r;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_compare_set(cohort_store *s, const void *k, size_t kl, const void *e,
                                       size_t el, const void *d, size_t dl, void **cur,
                                       size_t *curlen)
{
    (void)s, (void)k, (void)kl, (void)e, (void)el, (void)d, (void)dl, (void)cur, (void)curlen;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_wait(cohort_store *s, const void *const *k, const size_t *kl, int n,
                                int t)
{
    (void)s, (void)k, (void)kl, (void)n, (void)t;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_wait_any(cohort_store *s, const void *const *k, const size_t *kl,
                                    int n, int t, int *which)
{
    (void)s, (void)k, (void)kl, (void)n, (void)t, (void)which;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_num_keys(cohort_store *s, int64_t *n)
{
    (void)s, (void)n;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_list(cohort_store *s, const char *sub, char ***keys, size_t **klens,
                                int *n)
{
    (void)s, (void)sub, (void)keys, (void)klens, (void)n;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_multi_get(cohort_store *s, const void *const *k, const size_t *kl,
                                     int n, void **v, size_t *vl, int t)
{
    (void)s, (void)k, (void)kl, (void)n, (void)v, (void)vl, (void)t;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_multi_set(cohort_store *s, const void *const *k, const size_t *kl,
                                     const void *const *v, const size_t *vl, int n)
{
    (void)s, (void)k, (void)kl, (void)v, (void)vl, (void)n;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_append(cohort_store *s, const void *k, size_t kl, const void *v,
                                  size_t vl)
{
    (void)s, (void)k, (void)kl, (void)v, (void)vl;
    return COHORT_ERR_UNSUPPORTED;
}
cohort_status cohort_store_barrier(cohort_store *s, const char *name, int n, int t)
{
    (void)s, (void)name, (void)n, (void)t;
    return COHORT_ERR_UNSUPPORTED;
}
