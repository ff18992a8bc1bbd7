/* engine.c - runs calls inline (blocking) or on a per-group worker thread
 * (async), in issue order.
 *
 * Fast path: a blocking call with no async work pending runs on the caller's
 * thread with no lock and no hand-off (a thread wake-up costs 20-40 us on
 * this class of machine, 100x a small shm all_reduce). `pending` counts
 * queued + running async calls; only the issuing thread increments it, so a
 * zero seen there cannot become non-zero concurrently.
 *
 * Lock order: e->mu, then whatever the transports take.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll/coll.h"
#include "coll/lane.h"
#include "contract/contract.h"
#include "engine/engine.h"
#include "reduce/reduce.h"
#include "trace/trace.h"

struct cohort_work {
    coh_call call;
    cohort_group *g;
    uint64_t tidx;
    cohort_status st;
    int done;             /* under e->mu */
    int user_freed;       /* freed by the user before completion: engine frees */
    int on_stack;         /* a blocking call queued behind async work */
    cohort_work *next;
};

struct coh_engine {
    cohort_group *g;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    cohort_work *head, *tail;
    atomic_int pending;
    pthread_t thread;
    int started, stop;
};

static void hook_wake(void *e) { coh_engine_wake(e); }
static const coh_hook_ops engine_hook = {.name = "engine", .order = COH_HOOK_ENGINE,
                                         .wake = hook_wake};

cohort_status coh_engine_create(cohort_group *g, coh_engine **out)
{
    coh_engine *e = coh_calloc(1, sizeof *e);
    if (!e)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "engine: out of memory");
    e->g = g;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv_work, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&e->cv_done, &ca);
    pthread_condattr_destroy(&ca);
    *out = e;
    coh_group_add_hook(g, &engine_hook, e);
    return COHORT_OK;
}

/* debug=buffers: the input must not change while the call is in flight. */
static cohort_status check_buffers(cohort_group *g, coh_call *c, const char *when)
{
    if (!g->debug_buffers || !c->send || !c->count)
        return COHORT_OK;
    size_t esz = cohort_dtype_size((cohort_dtype)c->dtype);
    size_t n = c->count * esz;
    if (c->coll == COH_COLL_SCATTER)
        n = g->rank == c->root ? n * (size_t)g->size : 0;
    else if (c->coll == COH_COLL_REDUCE_SCATTER || c->coll == COH_COLL_ALL_TO_ALL)
        n *= (size_t)g->size;
    else if (c->coll == COH_COLL_BROADCAST && g->rank != c->root)
        return COHORT_OK;
    /* In place, the output legitimately changes the buffer once the call
     * runs: only the issue->start window can be checked (an all_gather's
     * and a gather's own block stays, but the forms are treated alike). */
    if (c->send == c->recv && strcmp(when, "start"))
        return COHORT_OK;
    if (coh_hash64(coh_call_input(g, c, esz), n, 0) == c->in_sum)
        return COHORT_OK;
    /* A group failure, not a local one: the peers of a call that will not
     * run (or ran on torn data) must not wait for it. */
    return coh_group_fail(g, COHORT_ERR_INVALID,
                       "%s #%llu (%s:%d): COHORT_DEBUG=buffers: the input buffer was modified "
                       "while the call was in flight (detected at %s); an async call's buffers "
                       "belong to cohort until cohort_work_wait/test reports completion",
                       coh_coll_name(c->coll), (unsigned long long)c->seq, c->file, c->line, when);
}

/* The tail of a call that failed (out of line: the common call returns
 * OK): the contract report, the recorder's end, the group's last error -
 * in run_call's order. */
static COH_COLD cohort_status call_failed(cohort_group *g, coh_call *c,
                                                                  uint64_t tidx, cohort_status st)
{
    if (st == COHORT_ERR_CONTRACT)
        coh_contract_report(g); /* every rank builds the same majority report */
    coh_trace_end(g->trace, tidx, st);
    int p = coh_group_poisoned(g);
    pthread_mutex_lock(&g->err_mu);
    if (p)
        st = (cohort_status)p; /* report the cause, not a side effect */
    if (st == COHORT_ERR_CONTRACT || !p)
        snprintf(g->last.msg, sizeof g->last.msg, "%s", g->err.msg[0] ? g->err.msg : "?");
    else
        snprintf(g->last.msg, sizeof g->last.msg, "%s #%llu (%s:%d) failed: %s",
                 coh_coll_name(c->coll), (unsigned long long)c->seq, c->file, c->line,
                 g->err.msg);
    g->last.status = st;
    pthread_mutex_unlock(&g->err_mu);
    atomic_store(&g->err_reported, 1);
    return st;
}

/* Runs one call on the current thread and records it; just_issued: the
 * recorder has it STARTED already (coh_trace_issue_started). Inline in
 * both callers (the blocking call's fast path in coh_engine_submit, and
 * the worker): a frame less per small call. */
static COH_INLINE cohort_status run_call(cohort_group *g, coh_call *c, uint64_t tidx,
                                          int just_issued)
{
    if (!just_issued)
        coh_trace_start(g->trace, tidx);
    /* check_buffers does nothing without debug=buffers: not called then */
    cohort_status st = g->debug_buffers ? check_buffers(g, c, "start") : COHORT_OK;
    if (st == COHORT_OK && g->debug_sync)
        st = coh_contract_debug_sync(g, c);
    if (st == COHORT_OK)
        st = coh_coll_run(g, c);
    if (st == COHORT_OK && g->debug_buffers)
        st = check_buffers(g, c, "completion");
    if (__builtin_expect(st != COHORT_OK, 0))
        return call_failed(g, c, tidx, st);
    coh_trace_end(g->trace, tidx, st);
    return st;
}

static void *worker_main(void *arg)
{
    coh_engine *e = arg;
    pthread_mutex_lock(&e->mu);
    for (;;) {
        while (!e->head && !e->stop)
            pthread_cond_wait(&e->cv_work, &e->mu);
        if (!e->head && e->stop)
            break;
        cohort_work *w = e->head;
        pthread_mutex_unlock(&e->mu);
        cohort_status st = run_call(e->g, &w->call, w->tidx, 0);
        pthread_mutex_lock(&e->mu);
        e->head = w->next;
        if (!e->head)
            e->tail = NULL;
        w->st = st;
        w->done = 1;
        atomic_fetch_sub(&e->pending, 1);
        if (w->user_freed)
            coh_free(w);
        pthread_cond_broadcast(&e->cv_done);
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

void coh_engine_destroy(coh_engine *e)
{
    if (!e)
        return;
    coh_group_remove_hook(e->g, e);
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_broadcast(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
    if (e->started)
        pthread_join(e->thread, NULL);
    pthread_cond_destroy(&e->cv_work);
    pthread_cond_destroy(&e->cv_done);
    pthread_mutex_destroy(&e->mu);
    coh_free(e);
}

void coh_engine_wake(coh_engine *e)
{
    pthread_mutex_lock(&e->mu);
    pthread_cond_broadcast(&e->cv_done);
    pthread_mutex_unlock(&e->mu);
}

static cohort_status enqueue(coh_engine *e, cohort_work *w)
{
    pthread_mutex_lock(&e->mu);
    if (!e->started) {
        int rc = pthread_create(&e->thread, NULL, worker_main, e);
        if (rc) {
            pthread_mutex_unlock(&e->mu);
            return coh_err_sys(&e->g->last, COHORT_ERR_SYSTEM, "pthread_create", rc,
                               "starting the async worker");
        }
        e->started = 1;
    }
    atomic_fetch_add(&e->pending, 1);
    if (e->tail)
        e->tail->next = w;
    else
        e->head = w;
    e->tail = w;
    pthread_cond_signal(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
    return COHORT_OK;
}

/* Waits for w under e->mu until done or deadline; returns 1 if done. */
static int wait_done(coh_engine *e, cohort_work *w, uint64_t deadline_ns)
{
    while (!w->done) {
        if (deadline_ns == UINT64_MAX) {
            pthread_cond_wait(&e->cv_done, &e->mu);
            continue;
        }
        struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000ull),
                              .tv_nsec = (long)(deadline_ns % 1000000000ull)};
        if (pthread_cond_timedwait(&e->cv_done, &e->mu, &ts) == ETIMEDOUT && !w->done)
            return 0;
    }
    return 1;
}

/* An async call, or a blocking one behind async work: queued for the
 * worker (out of line, so the inline path below keeps a small frame). */
static __attribute__((noinline)) cohort_status submit_queued(cohort_group *g, coh_call *c,
                                                             cohort_work **work)
{
    coh_engine *e = g->engine;
    uint64_t tidx = coh_trace_issue(g->trace, c);
    if (!work) {
        /* Blocking call behind async work: keep issue order. */
        cohort_work w;
        memset(&w, 0, sizeof w);
        w.call = *c;
        w.g = g;
        w.tidx = tidx;
        w.on_stack = 1;
        cohort_status st = enqueue(e, &w);
        if (st != COHORT_OK)
            return st;
        pthread_mutex_lock(&e->mu);
        wait_done(e, &w, UINT64_MAX); /* the call's own timeout bounds it */
        pthread_mutex_unlock(&e->mu);
        return w.st;
    }
    cohort_work *w = coh_calloc(1, sizeof *w);
    if (!w) {
        return coh_err_set(&g->last, COHORT_ERR_NOMEM, "%s: out of memory for the work handle",
                           coh_coll_name(c->coll));
    }
    w->call = *c;
    w->g = g;
    w->tidx = tidx;
    cohort_status st = enqueue(e, w);
    if (st != COHORT_OK) {
        coh_free(w);
        return st;
    }
    *work = w;
    return COHORT_OK;
}

/* The direct lane (group.h, lane_mask): a blocking call with no async
 * work pending, on a group whose lane is open for its kind (read after
 * `pending` is seen 0: the worker, which may have decided it, is then
 * idle), with count > 0.
 * It runs as run_call would run it - recorded STARTED at issue, the same
 * failure tail, the recorder's end - with coh_coll_lane in place of
 * coh_coll_run: the lane's conditions leave out everything else run_call
 * and coh_coll_run do (debug=sync|buffers, the zero-count sync); an AVG
 * needs no division after it, as the lane's rows are shm over the whole
 * group, whose fold divides (coh_avg_folds, avg_in_fold); a failed group
 * is refused by issue just before, and again by the transport's entry
 * check. */
static COH_INLINE int lane_open(const cohort_group *g, const coh_call *c)
{
    return (g->lane_mask >> c->coll & 1) && c->count &&
           (c->redop != COHORT_AVG || coh_avg_folds(c->dtype, c->redop)) &&
           g->lane_shm == (const void *)g->shm;
}

static COH_INLINE cohort_status run_lane(cohort_group *g, coh_call *c)
{
    uint64_t tidx = coh_trace_issue_started(g->trace, c);
    cohort_status st = coh_coll_lane(g, c);
    if (__builtin_expect(st != COHORT_OK, 0))
        return call_failed(g, c, tidx, st);
    coh_trace_end(g->trace, tidx, st);
    return st;
}

cohort_status coh_engine_submit(cohort_group *g, coh_call *c, cohort_work **work)
{
    if (!work && atomic_load_explicit(&g->engine->pending, memory_order_acquire) == 0) {
        if (lane_open(g, c))
            return run_lane(g, c);
        return run_call(g, c, coh_trace_issue_started(g->trace, c), 1);
    }
    return submit_queued(g, c, work);
}

cohort_status cohort_work_wait(cohort_work *w, int timeout_ms)
{
    if (!w)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_work_wait: work is NULL");
    cohort_group *g = w->g;
    coh_engine *e = g->engine;
    int t = timeout_ms < 0 ? g->timeout_ms : timeout_ms;
    pthread_mutex_lock(&e->mu);
    if (!wait_done(e, w, coh_deadline_ns(t))) {
        pthread_mutex_unlock(&e->mu);
        /* A call that outlives its wait is stuck: the group cannot be
         * trusted any more, so poison it (never retry on it). */
        coh_group_fail(g, COHORT_ERR_TIMEOUT,
                       "cohort_work_wait: %s #%llu (%s:%d) not finished after %d ms",
                       coh_coll_name(w->call.coll), (unsigned long long)w->call.seq,
                       w->call.file, w->call.line, t);
        pthread_mutex_lock(&e->mu);
        wait_done(e, w, coh_deadline_ns(COH_MAX(g->timeout_ms, 1000)));
        pthread_mutex_unlock(&e->mu);
        return COHORT_ERR_TIMEOUT;
    }
    cohort_status st = w->st;
    pthread_mutex_unlock(&e->mu);
    return st;
}

cohort_status cohort_work_test(cohort_work *w, int *done)
{
    if (!w || !done)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_work_test: NULL argument");
    coh_engine *e = w->g->engine;
    pthread_mutex_lock(&e->mu);
    *done = w->done;
    cohort_status st = w->done ? w->st : COHORT_OK;
    pthread_mutex_unlock(&e->mu);
    return st;
}

void cohort_work_free(cohort_work *w)
{
    if (!w)
        return;
    coh_engine *e = w->g->engine;
    pthread_mutex_lock(&e->mu);
    if (!w->done) {
        /* Ownership passes to the worker, which frees it when it finishes. */
        w->user_freed = 1;
        pthread_mutex_unlock(&e->mu);
        return;
    }
    pthread_mutex_unlock(&e->mu);
    coh_free(w);
}
