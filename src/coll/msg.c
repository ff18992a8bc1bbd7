/* msg.c - batch helpers over the message transport, scratch allocation,
 * and the transport seam (coll_int.h). */
#include <pthread.h>
#include <string.h>

#include "coll/coll_int.h"
#include "coll/fail/fail.h"

static const coh_coll_transport real_tp = {
    .xfer = coh_net_xfer,
    .shm_all_reduce = coh_shm_all_reduce,
    .shm_reduce = coh_shm_reduce,
    .shm_broadcast = coh_shm_broadcast,
    .shm_all_gather = coh_shm_all_gather,
    .shm_gather = coh_shm_gather,
    .shm_scatter = coh_shm_scatter,
    .shm_reduce_scatter = coh_shm_reduce_scatter,
    .shm_all_to_all = coh_shm_all_to_all,
    .shm_barrier = coh_shm_barrier,
};

const coh_coll_transport *coh_coll_tp = &real_tp;

void coh_coll_set_transport(const coh_coll_transport *t) { coh_coll_tp = t ? t : &real_tp; }

void coh_xf_send(coh_xfer *x, const cohort_group *g, const coh_call *c, int peer, uint32_t step,
                 const void *buf, size_t len)
{
    memset(x, 0, sizeof *x);
    x->peer = peer;
    x->is_send = 1;
    coh_hdr_from_call(&x->hdr, g, c, COH_MSG_COLL, step, len);
    x->buf = (void *)buf; /* the transport only reads a send buffer */
    x->len = len;
}

void coh_xf_recv(coh_xfer *x, const cohort_group *g, const coh_call *c, int peer, uint32_t step,
                 void *buf, size_t len)
{
    memset(x, 0, sizeof *x);
    x->peer = peer;
    x->is_send = 0;
    /* The expected header is built from this rank's own call: the transport
     * compares it field by field with the one that arrives. */
    coh_hdr_from_call(&x->hdr, g, c, COH_MSG_COLL, step, len);
    x->buf = buf;
    x->len = len;
}

cohort_status coh_xf_run(cohort_group *g, const coh_call *c, coh_xfer *ops, int nops)
{
    if (nops == 0)
        return COHORT_OK;
    if (!g->net) /* only a group of one has no connections */
        return coh_group_fail(g, COHORT_ERR_UNSUPPORTED, "%s #%llu: no message transport",
                              coh_coll_label(c->coll), (unsigned long long)c->seq);
    cohort_status st = coh_coll_tp->xfer(g->net, c, ops, nops);
    if (st == COHORT_OK)
        return st;
    st = coh_coll_transport_failed(g, st);
    /* Several failures can race (a local abort, the peer's EOF that
     * follows it): report the group's first one, as every later call will. */
    int p = coh_group_poisoned(g);
    return p ? (cohort_status)p : st;
}

/* ---- scratch ----
 * Large scratch buffers are kept per thread between calls: a fresh 16 MiB
 * buffer costs 4096 page faults (and the kernel's zeroing) on every call,
 * which profiles showed as a fifth of a large all_reduce. Two slots, each
 * kept only between CACHE_MIN and CACHE_MAX bytes, freed at thread exit. */
#define CACHE_SLOTS 2
#define CACHE_MIN ((size_t)64 << 10)
#define CACHE_MAX ((size_t)64 << 20)

typedef struct scache {
    void *p[CACHE_SLOTS];
    size_t cap[CACHE_SLOTS];
    int used[CACHE_SLOTS];
} scache;

static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static int cache_ok;

static void cache_destroy(void *v)
{
    scache *s = v;
    for (int i = 0; i < CACHE_SLOTS; i++)
        coh_free(s->p[i]);
    coh_free(s);
}

static void cache_init(void) { cache_ok = pthread_key_create(&cache_key, cache_destroy) == 0; }

static scache *cache_get(int create)
{
    pthread_once(&cache_once, cache_init);
    if (!cache_ok)
        return NULL;
    scache *s = pthread_getspecific(cache_key);
    if (!s && create) {
        s = coh_calloc(1, sizeof *s); /* no cache if this fails: plain allocations */
        if (s && pthread_setspecific(cache_key, s) != 0) {
            coh_free(s);
            s = NULL;
        }
    }
    return s;
}

void *coh_coll_alloc(cohort_group *g, const coh_call *c, size_t bytes, const char *what)
{
    if (bytes >= CACHE_MIN && bytes <= CACHE_MAX) {
        scache *s = cache_get(1);
        for (int i = 0; s && i < CACHE_SLOTS; i++)
            if (!s->used[i] && s->p[i] && s->cap[i] >= bytes) {
                s->used[i] = 1;
                return s->p[i];
            }
    }
    void *p = coh_malloc(bytes ? bytes : 1);
    if (!p)
        coh_group_fail(g, COHORT_ERR_NOMEM, "%s #%llu: cannot allocate %zu bytes for %s",
                       coh_coll_label(c->coll), (unsigned long long)c->seq, bytes, what);
    return p;
}

void coh_coll_free(void *p, size_t bytes)
{
    if (!p)
        return;
    scache *s = bytes >= CACHE_MIN && bytes <= CACHE_MAX ? cache_get(0) : NULL;
    if (s) {
        for (int i = 0; i < CACHE_SLOTS; i++)
            if (s->p[i] == p) { /* a cached buffer going back */
                s->used[i] = 0;
                return;
            }
        /* keep it in an empty slot, or instead of a smaller idle one */
        int best = -1;
        for (int i = 0; i < CACHE_SLOTS; i++)
            if (!s->used[i] && (!s->p[i] || s->cap[i] < bytes) &&
                (best < 0 || !s->p[i] || (s->p[best] && s->cap[i] < s->cap[best])))
                best = i;
        if (best >= 0) {
            coh_free(s->p[best]);
            s->p[best] = p;
            s->cap[best] = bytes;
            return;
        }
    }
    coh_free(p);
}
