/* sim.c - see sim.h. */
#include "sim.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/coll_int.h"
#include "support/group.h"
#include "contract/contract.h"

#define SIM_WAIT_S 10

typedef struct sim_msg {
    struct sim_msg *next;
    coh_hdr hdr;
    size_t len;
    unsigned char data[];
} sim_msg;

typedef struct sim_rank {
    sim_world *w;
    int rank;
    /* step numbers received in the current call, per source (distinctness) */
    uint64_t cur_seq;
    int cur_coll;
    uint32_t *steps[SIM_MAX];
    int nsteps[SIM_MAX], capsteps[SIM_MAX];
} sim_rank;

typedef struct sim_host {
    sim_world *w;
    int h, nlocal;
    int ranks[SIM_MAX];
    /* barrier */
    int arrived;
    unsigned long gen;
    /* posted by each local rank for the current collective */
    const void *sptr[SIM_MAX];
    void *rptr[SIM_MAX];
    coh_call call[SIM_MAX];
} sim_host;

struct sim_world {
    int n, n_hosts;
    int host_of[SIM_MAX];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sim_msg *head[SIM_MAX][SIM_MAX], *tail[SIM_MAX][SIM_MAX]; /* [src][dst] */
    cohort_group *g[SIM_MAX];
    sim_rank ranks[SIM_MAX];
    sim_host hosts[SIM_MAX];
    int failed;
    char msg[2048];
    long nmsgs;
};

static void deadline_in(struct timespec *ts, int s)
{
    clock_gettime(CLOCK_REALTIME, ts);
    ts->tv_sec += s;
}

void sim_fail(sim_world *w, const char *fmt, ...)
{
    pthread_mutex_lock(&w->mu);
    if (!w->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->msg, sizeof w->msg, fmt, ap);
        va_end(ap);
        w->failed = 1;
    }
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

const char *sim_error(sim_world *w) { return w->msg; }
cohort_group *sim_group(sim_world *w, int rank) { return w->g[rank]; }
long sim_messages(sim_world *w) { return w->nmsgs; }

sim_world *sim_of(cohort_group *g) { return ((sim_rank *)(void *)g->net)->w; }

/* ---- message transport ---- */

static void note_step(sim_rank *me, int src, const coh_hdr *h)
{
    sim_world *w = me->w;
    if (h->magic != COH_HDR_MAGIC) /* headers not built (transport stub) */
        return;
    if (h->seq != me->cur_seq || h->coll != me->cur_coll) {
        for (int i = 0; i < SIM_MAX; i++)
            me->nsteps[i] = 0;
        me->cur_seq = h->seq;
        me->cur_coll = h->coll;
    }
    for (int i = 0; i < me->nsteps[src]; i++)
        if (me->steps[src][i] == h->step) {
            snprintf(w->msg, sizeof w->msg,
                     "rank %d: two messages from rank %d with step %u in %s #%llu", me->rank, src,
                     h->step, coh_coll_label(h->coll), (unsigned long long)h->seq);
            w->failed = 1;
            return;
        }
    if (me->nsteps[src] == me->capsteps[src]) {
        int cap = me->capsteps[src] ? 2 * me->capsteps[src] : 64;
        uint32_t *p = realloc(me->steps[src], sizeof(uint32_t) * (size_t)cap);
        if (!p)
            return;
        me->steps[src] = p;
        me->capsteps[src] = cap;
    }
    me->steps[src][me->nsteps[src]++] = h->step;
}

static cohort_status sim_xfer(struct coh_net *net, const coh_call *call, coh_xfer *ops, int nops)
{
    sim_rank *me = (sim_rank *)(void *)net;
    sim_world *w = me->w;
    int r = me->rank;
    (void)call;
    pthread_mutex_lock(&w->mu);
    /* sends are buffered: they complete at once */
    for (int i = 0; i < nops; i++) {
        coh_xfer *x = &ops[i];
        x->state = 0;
        if (!x->is_send)
            continue;
        if (x->peer < 0 || x->peer >= w->n || x->peer == r) {
            snprintf(w->msg, sizeof w->msg, "rank %d: send to invalid peer %d", r, x->peer);
            w->failed = 1;
            break;
        }
        sim_msg *m = malloc(sizeof *m + x->len);
        if (!m)
            abort();
        m->next = NULL;
        m->hdr = x->hdr;
        m->hdr.src = r;
        m->len = x->len;
        if (x->len)
            memcpy(m->data, x->buf, x->len);
        if (w->tail[r][x->peer])
            w->tail[r][x->peer]->next = m;
        else
            w->head[r][x->peer] = m;
        w->tail[r][x->peer] = m;
        w->nmsgs++;
        x->state = 1;
    }
    pthread_cond_broadcast(&w->cv);
    struct timespec dl;
    deadline_in(&dl, SIM_WAIT_S);
    for (;;) {
        if (w->failed)
            break;
        int pending = 0;
        for (int i = 0; i < nops; i++) {
            coh_xfer *x = &ops[i];
            if (x->is_send || x->state)
                continue;
            sim_msg *m = x->peer >= 0 && x->peer < w->n ? w->head[x->peer][r] : NULL;
            if (!m) {
                pending = 1;
                continue;
            }
            w->head[x->peer][r] = m->next;
            if (!m->next)
                w->tail[x->peer][r] = NULL;
            int f = coh_hdr_match(&x->hdr, &m->hdr);
            if (f != COH_FIELD_NONE || m->len != x->len) {
                snprintf(w->msg, sizeof w->msg,
                         "rank %d: message from rank %d does not match: field %d, step %u vs "
                         "expected %u, len %zu vs expected %zu",
                         r, x->peer, f, m->hdr.step, x->hdr.step, m->len, x->len);
                w->failed = 1;
                free(m);
                break;
            }
            note_step(me, x->peer, &m->hdr);
            if (m->len)
                memcpy(x->buf, m->data, m->len);
            free(m);
            x->state = 1;
        }
        if (w->failed || !pending)
            break;
        if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT) {
            snprintf(w->msg, sizeof w->msg, "rank %d: no message for %d s in %s #%llu", r,
                     SIM_WAIT_S, coh_coll_label(call->coll), (unsigned long long)call->seq);
            w->failed = 1;
            break;
        }
    }
    int failed = w->failed;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    return failed ? COHORT_ERR_ABORTED : COHORT_OK;
}

/* ---- shared-memory stand-in ---- */

static sim_host *host_of(coh_shm *s) { return (sim_host *)(void *)s; }

/* Host-wide barrier that gives up when the world failed. */
static int hbar(sim_host *h)
{
    sim_world *w = h->w;
    pthread_mutex_lock(&w->mu);
    unsigned long gen = h->gen;
    if (++h->arrived == h->nlocal) {
        h->arrived = 0;
        h->gen++;
        pthread_cond_broadcast(&w->cv);
    } else {
        struct timespec dl;
        deadline_in(&dl, SIM_WAIT_S);
        while (h->gen == gen && !w->failed)
            if (pthread_cond_timedwait(&w->cv, &w->mu, &dl) == ETIMEDOUT) {
                snprintf(w->msg, sizeof w->msg, "host %d: shm barrier timed out", h->h);
                w->failed = 1;
                pthread_cond_broadcast(&w->cv);
            }
    }
    int ok = !w->failed;
    pthread_mutex_unlock(&w->mu);
    return ok;
}

static int local_index(sim_host *h, int rank)
{
    for (int i = 0; i < h->nlocal; i++)
        if (h->ranks[i] == rank)
            return i;
    return -1;
}

/* The stand-in needs to know which local rank calls: each rank is a thread
 * and records its rank here. */
static _Thread_local int tl_rank = -1;

/* Posts this rank's buffers and contract, meets the other local ranks and
 * compares contracts. Returns the local index, or -1 on failure. */
static int post_as(coh_shm *s, const coh_call *c, const void *send, void *recv)
{
    sim_host *h = host_of(s);
    int li = local_index(h, tl_rank);
    if (li < 0) {
        sim_fail(h->w, "rank %d used host %d's segment", tl_rank, h->h);
        return -1;
    }
    h->sptr[li] = send;
    h->rptr[li] = recv;
    h->call[li] = *c;
    if (!hbar(h))
        return -1;
    const coh_call *a = &h->call[0], *b = &h->call[li];
    if (a->seq != b->seq || a->coll != b->coll || a->count != b->count || a->dtype != b->dtype ||
        a->redop != b->redop || a->root != b->root) {
        sim_fail(h->w, "host %d: local ranks disagree on the shm call (rank %d: %s #%llu)", h->h,
                 tl_rank, coh_coll_label(b->coll), (unsigned long long)b->seq);
        return -1;
    }
    return li;
}

static cohort_status done(sim_host *h) { return hbar(h) ? COHORT_OK : COHORT_ERR_ABORTED; }

static size_t esz(const coh_call *c) { return cohort_dtype_size((cohort_dtype)c->dtype); }

/* As the real segment (shm_coll.c avg_div): an AVG over the whole world
 * is divided inside the fold (coh_avg_folds). */
static int avg_div(const sim_host *h, const coh_call *c)
{
    return coh_avg_folds(c->dtype, c->redop) && h->nlocal == h->w->n ? h->nlocal : 0;
}

static cohort_status f_all_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                  size_t count)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    void *tmp = malloc(count * esz(c) + 1);
    coh_reduce_multi_div(tmp, h->sptr, h->nlocal, count, (cohort_dtype)c->dtype,
                         (cohort_op)c->redop, avg_div(h, c));
    cohort_status st = done(h); /* everyone has read every send */
    if (st == COHORT_OK)
        memcpy(recv, tmp, count * esz(c));
    free(tmp);
    return st == COHORT_OK ? done(h) : st;
}

static cohort_status f_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                              size_t count, int root)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    void *tmp = NULL;
    if (li == root) {
        tmp = malloc(count * esz(c) + 1);
        coh_reduce_multi_div(tmp, h->sptr, h->nlocal, count, (cohort_dtype)c->dtype,
                             (cohort_op)c->redop, avg_div(h, c));
    }
    cohort_status st = done(h);
    if (st == COHORT_OK && li == root)
        memcpy(recv, tmp, count * esz(c));
    free(tmp);
    return st == COHORT_OK ? done(h) : st;
}

static cohort_status f_broadcast(coh_shm *s, const coh_call *c, void *buf, size_t bytes, int root)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, buf, buf);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    if (li != root)
        memcpy(buf, h->sptr[root], bytes);
    return done(h);
}

static cohort_status f_all_gather(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                  size_t B)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    for (int i = 0; i < h->nlocal; i++)
        if ((char *)recv + (size_t)i * B != h->sptr[i])
            memcpy((char *)recv + (size_t)i * B, h->sptr[i], B);
    return done(h);
}

static cohort_status f_gather(coh_shm *s, const coh_call *c, const void *send, void *recv, size_t B,
                              int root)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    if (li == root)
        for (int i = 0; i < h->nlocal; i++)
            if ((char *)recv + (size_t)i * B != h->sptr[i])
                memcpy((char *)recv + (size_t)i * B, h->sptr[i], B);
    return done(h);
}

static cohort_status f_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv,
                               size_t B, int root)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    /* read before anyone writes: the root's recv may be its send */
    char *tmp = malloc(B + 1);
    memcpy(tmp, (const char *)h->sptr[root] + (size_t)li * B, B);
    cohort_status st = done(h);
    if (st == COHORT_OK)
        memcpy(recv, tmp, B);
    free(tmp);
    return st == COHORT_OK ? done(h) : st;
}

static cohort_status f_reduce_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                      size_t count)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    size_t es = esz(c);
    const void *src[SIM_MAX];
    for (int i = 0; i < h->nlocal; i++)
        src[i] = (const char *)h->sptr[i] + (size_t)li * count * es;
    void *tmp = malloc(count * es + 1);
    coh_reduce_multi_div(tmp, src, h->nlocal, count, (cohort_dtype)c->dtype, (cohort_op)c->redop,
                         avg_div(h, c));
    cohort_status st = done(h);
    if (st == COHORT_OK)
        memcpy(recv, tmp, count * es);
    free(tmp);
    return st == COHORT_OK ? done(h) : st;
}

static cohort_status f_all_to_all(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                  size_t B)
{
    sim_host *h = host_of(s);
    int li = post_as(s, c, send, recv);
    if (li < 0)
        return COHORT_ERR_ABORTED;
    char *tmp = malloc((size_t)h->nlocal * B + 1);
    for (int i = 0; i < h->nlocal; i++)
        memcpy(tmp + (size_t)i * B, (const char *)h->sptr[i] + (size_t)li * B, B);
    cohort_status st = done(h);
    if (st == COHORT_OK)
        memcpy(recv, tmp, (size_t)h->nlocal * B);
    free(tmp);
    return st == COHORT_OK ? done(h) : st;
}

static cohort_status f_barrier(coh_shm *s, const coh_call *c)
{
    sim_host *h = host_of(s);
    if (post_as(s, c, NULL, NULL) < 0)
        return COHORT_ERR_ABORTED;
    return done(h);
}

static const coh_coll_transport sim_tp = {
    .xfer = sim_xfer,
    .shm_all_reduce = f_all_reduce,
    .shm_reduce = f_reduce,
    .shm_broadcast = f_broadcast,
    .shm_all_gather = f_all_gather,
    .shm_gather = f_gather,
    .shm_scatter = f_scatter,
    .shm_reduce_scatter = f_reduce_scatter,
    .shm_all_to_all = f_all_to_all,
    .shm_barrier = f_barrier,
};

void sim_install(void) { coh_coll_set_transport(&sim_tp); }
void sim_uninstall(void) { coh_coll_set_transport(NULL); }

/* ---- worlds ---- */

sim_world *sim_create(int n, const int *host_of_rank, int shm, int force_tcp)
{
    if (n < 1 || n > SIM_MAX)
        return NULL;
    sim_world *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->n = n;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    for (int r = 0; r < n; r++) {
        w->host_of[r] = host_of_rank ? host_of_rank[r] : 0;
        if (w->host_of[r] + 1 > w->n_hosts)
            w->n_hosts = w->host_of[r] + 1;
    }
    for (int h = 0; h < w->n_hosts; h++) {
        w->hosts[h].w = w;
        w->hosts[h].h = h;
    }
    for (int r = 0; r < n; r++) {
        sim_host *h = &w->hosts[w->host_of[r]];
        h->ranks[h->nlocal++] = r;
    }
    for (int r = 0; r < n; r++) {
        /* stall_warn_ms 0, job "": as this world always had them */
        cht_group_opts o = {.job = "",
                            .timeout_ms = SIM_WAIT_S * 1000,
                            .check_contract = 1,
                            .parts = CHT_G_PEERS | CHT_G_P2P};
        cohort_group *g = cht_group_new(r, n, &o);
        w->g[r] = g;
        w->ranks[r].w = w;
        w->ranks[r].rank = r;
        g->force_transport = force_tcp ? 2 : 0;
        for (int q = 0; q < n; q++) {
            sim_host *hq = &w->hosts[w->host_of[q]];
            g->peers[q].host = w->host_of[q];
            g->peers[q].local_index = local_index(hq, q);
        }
        g->n_hosts = w->n_hosts;
        g->hosts = calloc((size_t)w->n_hosts, sizeof *g->hosts);
        g->leaders = calloc((size_t)w->n_hosts, sizeof(int));
        for (int h = 0; h < w->n_hosts; h++) {
            snprintf(g->hosts[h], sizeof g->hosts[h], "simhost%d", h);
            g->leaders[h] = w->hosts[h].ranks[0];
        }
        sim_host *mh = &w->hosts[w->host_of[r]];
        g->my_host = mh->h;
        g->local_size = mh->nlocal;
        g->local_ranks = calloc((size_t)mh->nlocal, sizeof(int));
        memcpy(g->local_ranks, mh->ranks, sizeof(int) * (size_t)mh->nlocal);
        g->local_rank = local_index(mh, r);
        g->net = n > 1 ? (struct coh_net *)(void *)&w->ranks[r] : NULL;
        g->shm = shm && !force_tcp && mh->nlocal > 1 ? (coh_shm *)(void *)mh : NULL;
    }
    return w;
}

void sim_destroy(sim_world *w)
{
    if (!w)
        return;
    for (int s = 0; s < w->n; s++)
        for (int d = 0; d < w->n; d++)
            for (sim_msg *m = w->head[s][d], *nx; m; m = nx) {
                nx = m->next;
                free(m);
            }
    for (int r = 0; r < w->n; r++) {
        cht_group_free(w->g[r]);
        for (int i = 0; i < SIM_MAX; i++)
            free(w->ranks[r].steps[i]);
    }
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
}

typedef struct thr_arg {
    sim_world *w;
    int rank;
    int (*fn)(int, cohort_group *, void *);
    void *arg;
    int rc;
} thr_arg;

static void *thr_main(void *p)
{
    thr_arg *a = p;
    tl_rank = a->rank;
    a->rc = a->fn(a->rank, a->w->g[a->rank], a->arg);
    if (a->rc)
        sim_fail(a->w, "rank %d failed", a->rank); /* keeps an earlier message */
    return NULL;
}

int sim_run(sim_world *w, int (*fn)(int, cohort_group *, void *), void *arg)
{
    pthread_t th[SIM_MAX];
    thr_arg args[SIM_MAX];
    for (int r = 0; r < w->n; r++) {
        args[r] = (thr_arg){w, r, fn, arg, 0};
        if (pthread_create(&th[r], NULL, thr_main, &args[r]) != 0) {
            sim_fail(w, "pthread_create failed");
            for (int q = 0; q < r; q++)
                pthread_join(th[q], NULL);
            return 1;
        }
    }
    int bad = 0;
    for (int r = 0; r < w->n; r++) {
        pthread_join(th[r], NULL);
        bad |= args[r].rc;
    }
    return bad || w->failed;
}
