/* fail.c - sticky errors, poisoning, the failure path's hooks, and the
 * wait bookkeeping every transport's wait loop shares (abort, deadline,
 * stall report). It reaches the transports, the engine, the control plane
 * and the flight recorder only through the hooks they registered. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/group.h"

/* ---- hooks ---- */

void coh_group_add_hook(cohort_group *g, const coh_hook_ops *ops, void *self)
{
    pthread_mutex_lock(&g->err_mu);
    /* A fixed table: the modules that register are known (COH_HOOK_*). */
    if (g->n_hooks >= COH_MAX_HOOKS)
        abort();
    int i = g->n_hooks++;
    while (i > 0 && g->hooks[i - 1].ops->order > ops->order) {
        g->hooks[i] = g->hooks[i - 1];
        i--;
    }
    g->hooks[i] = (coh_hook){ops, self};
    pthread_mutex_unlock(&g->err_mu);
}

void coh_group_remove_hook(cohort_group *g, const void *self)
{
    pthread_mutex_lock(&g->err_mu);
    int j = 0;
    for (int i = 0; i < g->n_hooks; i++)
        if (g->hooks[i].self != self)
            g->hooks[j++] = g->hooks[i];
    g->n_hooks = j;
    pthread_mutex_unlock(&g->err_mu);
}

/* The hooks as of now: called outside err_mu (a transport's abort takes its
 * own locks; err_mu is a leaf). */
static int hooks_of(cohort_group *g, coh_hook *out)
{
    pthread_mutex_lock(&g->err_mu);
    int n = g->n_hooks;
    memcpy(out, g->hooks, sizeof(coh_hook) * (size_t)n);
    pthread_mutex_unlock(&g->err_mu);
    return n;
}

/* Every hook's abort, then every wake, then every after. */
static void run_hooks(cohort_group *g, cohort_status st, const char *msg, int from_peer)
{
    coh_hook h[COH_MAX_HOOKS];
    int n = hooks_of(g, h);
    for (int i = 0; i < n; i++)
        if (h[i].ops->abort)
            h[i].ops->abort(h[i].self, st, msg, from_peer);
    for (int i = 0; i < n; i++)
        if (h[i].ops->wake)
            h[i].ops->wake(h[i].self);
    for (int i = 0; i < n; i++)
        if (h[i].ops->after)
            h[i].ops->after(h[i].self, msg);
}

/* The control plane's hook (the first with probe / stall_report), if any. */
static int control_hook(cohort_group *g, coh_hook *out)
{
    coh_hook h[COH_MAX_HOOKS];
    int n = hooks_of(g, h);
    for (int i = 0; i < n; i++)
        if (h[i].ops->probe || h[i].ops->stall_report) {
            *out = h[i];
            return 1;
        }
    return 0;
}

static void stall_report(cohort_group *g, coh_wait *w)
{
    coh_hook h;
    if (control_hook(g, &h) && h.ops->stall_report) {
        h.ops->stall_report(h.self, w, w->report, sizeof w->report);
        return;
    }
    /* No control plane: what this rank knows alone. */
    const coh_call *c = w->call;
    double waited = (double)(coh_now_ns() - w->start_ns) / 1e9;
    if (c)
        snprintf(w->report, sizeof w->report,
                 "stall: %s #%llu (%s:%d) on rank %d has waited %.1f s; peers' state unavailable "
                 "(store unreachable)",
                 coh_coll_name(c->coll), (unsigned long long)c->seq, c->file, c->line, g->rank,
                 waited);
    else
        snprintf(w->report, sizeof w->report,
                 "stall on rank %d after %.1f s; peers' state unavailable (store unreachable)",
                 g->rank, waited);
}

_Thread_local int coh_group_background_thread;

_Atomic unsigned coh_fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { atomic_fetch_add(&coh_fork_gen, 1); }
static void install_fork_hook(void) { pthread_atfork(NULL, NULL, on_fork_child); }

unsigned coh_fork_generation(void)
{
    pthread_once(&fork_once, install_fork_hook);
    return atomic_load(&coh_fork_gen);
}

/* Poisons g with (st, msg) if it is not yet poisoned. Returns 1 if this call
 * did the poisoning. g->last belongs to the thread that makes calls on g, so
 * the monitor thread (set_last 0) leaves it alone: the caller's failing call
 * copies the cause into it (api.c, engine.c). */
static int poison(cohort_group *g, cohort_status st, const char *msg, int set_last,
                  uint64_t seq)
{
    int expect = 0;
    pthread_mutex_lock(&g->err_mu);
    int first = atomic_compare_exchange_strong(&g->poisoned, &expect, (int)st);
    if (first) {
        g->err.status = st;
        snprintf(g->err.msg, sizeof g->err.msg, "%s", msg);
    }
    /* The same failure often arrives twice (the store's record, which may
     * not name the call, and the segment's abort word or a peer's frame,
     * which do): the first that names it fills it in. */
    if (seq && !g->err_seq && g->err.status == st)
        g->err_seq = seq;
    if (set_last) {
        g->last.status = st;
        snprintf(g->last.msg, sizeof g->last.msg, "%s", first ? msg : g->err.msg);
    }
    pthread_mutex_unlock(&g->err_mu);
    return first;
}

static cohort_status fail_v(cohort_group *g, cohort_status st, uint64_t seq,
                            const char *fmt, va_list ap) __attribute__((format(printf, 4, 0)));

cohort_status coh_group_fail(cohort_group *g, cohort_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(g, st, 0, fmt, ap);
    va_end(ap);
    return st;
}

cohort_status coh_group_fail_at(cohort_group *g, cohort_status st, uint64_t seq,
                                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_v(g, st, seq, fmt, ap);
    va_end(ap);
    return st;
}

uint64_t coh_group_failed_seq(cohort_group *g)
{
    pthread_mutex_lock(&g->err_mu);
    uint64_t s = g->err_seq;
    pthread_mutex_unlock(&g->err_mu);
    return s;
}

void coh_group_note_failed_seq(cohort_group *g, cohort_status st, uint64_t seq)
{
    pthread_mutex_lock(&g->err_mu);
    if (seq && !g->err_seq && coh_group_poisoned(g) && g->err.status == st)
        g->err_seq = seq;
    pthread_mutex_unlock(&g->err_mu);
}

cohort_status coh_group_entry(cohort_group *g, const coh_call *c)
{
    int p = coh_group_poisoned(g);
    if (!p)
        return COHORT_OK;
    /* p2p seqs count per pair: never the collective seq of err_seq */
    if (!c || c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV || !c->seq)
        return COHORT_ERR_ABORTED;
    return c->seq == coh_group_failed_seq(g) ? (cohort_status)p : COHORT_ERR_ABORTED;
}

static cohort_status fail_v(cohort_group *g, cohort_status st, uint64_t seq,
                            const char *fmt, va_list ap)
{
    char msg[COH_ERRLEN];
    vsnprintf(msg, sizeof msg, fmt, ap);
    if (!poison(g, st, msg, !coh_group_background_thread, seq))
        return st;
    if (st == COHORT_ERR_CONTRACT)
        coh_debug("group %u: %s: %s", g->id, cohort_status_name(st), msg); /* the report logs */
    else
        coh_error("group %u: %s: %s", g->id, cohort_status_name(st), msg);
    /* Tell the peers through channels that do not depend on the failed data
     * path: the shared segment's abort word, abort frames, and the store;
     * wake every waiter; dump the flight recorder (the hooks, in order). */
    run_hooks(g, st, msg, 0);
    return st;
}

/* A peer's message seen from here: its "this rank (2)" is "rank 2" on
 * every other rank (a dump or error saying "this rank (2)" on rank 1
 * would put rank 2's values in rank 1's mouth). */
static void peer_view(const char *in, char *out, size_t len)
{
    size_t o = 0;
    while (*in && o + 1 < len) {
        int r;
        char close;
        if (!strncmp(in, "this rank (", 11) && sscanf(in + 11, "%d%c", &r, &close) == 2 &&
            close == ')') {
            int w = snprintf(out + o, len - o, "rank %d", r);
            if (w < 0 || (size_t)w >= len - o)
                break;
            o += (size_t)w;
            in = strchr(in + 11, ')') + 1;
            continue;
        }
        out[o++] = *in++;
    }
    out[o] = 0;
}

void coh_group_remote_abort(cohort_group *g, cohort_status st, const char *reason)
{
    coh_group_remote_abort_at(g, st, reason, 0);
}

void coh_group_remote_abort_at(cohort_group *g, cohort_status st, const char *reason,
                               uint64_t seq)
{
    char msg[COH_ERRLEN];
    peer_view(reason, msg, sizeof msg);
    if (!poison(g, st, msg, !coh_group_background_thread, seq))
        return;
    /* A contract failure is logged once per rank, by its report
     * (contract/report.c); the first-hand line is for debugging. */
    if (st == COHORT_ERR_CONTRACT)
        coh_debug("group %u aborted by a peer: %s: %s", g->id, cohort_status_name(st), msg);
    else
        coh_warn("group %u aborted by a peer: %s: %s", g->id, cohort_status_name(st), msg);
    /* Local waiters only (the segment's abort word is local to the host):
     * the hooks send nothing back to the peers. */
    run_hooks(g, st, msg, 1);
}

cohort_status coh_group_peer_lost(cohort_group *g, int peer, const char *how)
{
    const char *host = (g->peers && g->hosts && peer >= 0 && peer < g->size)
                           ? g->hosts[g->peers[peer].host]
                           : "?";
    int pid = (g->peers && peer >= 0 && peer < g->size) ? g->peers[peer].pid : 0;
    cohort_status st = coh_group_fail(g, COHORT_ERR_PEER_LOST,
                                      "rank %d (host %s, pid %d) lost: %s", peer, host, pid, how);
    coh_err_detail *d = peer >= 0 && peer < g->size ? coh_err_detail_new(g->size) : NULL;
    if (d) {
        d->status = COHORT_ERR_PEER_LOST;
        snprintf(d->kind, sizeof d->kind, "peer_lost");
        d->culprit[peer] = 1;
        coh_err_detail_attach(g, d, 0);
    }
    return st;
}

/* ---- waits ---- */

void coh_wait_init(coh_wait *w, cohort_group *g, const coh_call *call)
{
    coh_wait_init_at(w, g, call, coh_now_ns());
}

void coh_wait_init_at(coh_wait *w, cohort_group *g, const coh_call *call, uint64_t now)
{
    /* note and report are strings: their first byte is enough (they are
     * 1.3 KiB, and a small call's wait starts here on every call) */
    memset(w, 0, offsetof(coh_wait, note));
    w->note[0] = 0;
    w->report[0] = 0;
    w->g = g;
    w->call = call;
    w->start_ns = now;
    w->deadline_ns = g->timeout_ms < 0 ? UINT64_MAX
                                       : w->start_ns + (uint64_t)g->timeout_ms * 1000000ull;
    w->stall_ns = g->stall_warn_ms < 0 ? UINT64_MAX
                                       : w->start_ns + (uint64_t)g->stall_warn_ms * 1000000ull;
    w->probe_ns = w->start_ns + 100000000ull; /* 100 ms: out-of-band contract probe */
}

void coh_wait_restart(coh_wait *w, uint64_t now)
{
    cohort_group *g = w->g;
    w->start_ns = now;
    w->deadline_ns = g->timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)g->timeout_ms * 1000000ull;
    w->stall_ns = g->stall_warn_ms < 0 ? UINT64_MAX : now + (uint64_t)g->stall_warn_ms * 1000000ull;
    w->probe_ns = now + 100000000ull;
    w->stalled = 0;
    w->probed = 0;
    w->note[0] = 0; /* said why an earlier wait could not progress; it did */
}

int coh_wait_slow(const coh_wait *w) { return coh_now_ns() >= w->probe_ns; }

cohort_status coh_wait_check(coh_wait *w)
{
    cohort_group *g = w->g;
    int p = coh_group_poisoned(g);
    if (p)
        return (cohort_status)p;
    uint64_t now = coh_now_ns();
    if (now >= w->probe_ns) {
        w->probed++;
        w->probe_ns = now + 500000000ull; /* then every 500 ms: cheap, and a
                                            * peer that probes later sees us */
        /* The call has not progressed for 100 ms: some mismatches send no
         * message at all (two ranks both think they receive), so compare
         * fingerprints out of band. */
        coh_hook h;
        if (control_hook(g, &h) && h.ops->probe) {
            cohort_status st = h.ops->probe(h.self, w->call);
            if (st != COHORT_OK)
                return st;
        }
    }
    if (now >= w->stall_ns && now < w->deadline_ns) {
        /* Repeated every stall_warn_ms while the call waits, each with fresh
         * numbers, so the log says how long it has been stuck now. */
        w->stalled++;
        stall_report(g, w);
        w->report_ns = coh_now_ns();
        w->stall_ns = w->report_ns + (uint64_t)COH_MAX(g->stall_warn_ms, 1) * 1000000ull;
        coh_warn("%s", w->report);
    }
    if (now >= w->deadline_ns) {
        if (!w->stalled) {
            stall_report(g, w);
            w->report_ns = coh_now_ns();
        }
        /* The peers' state comes from the last report, taken while every
         * rank was still stuck (by the deadline peers may have timed out
         * and left): the header is rewritten with the time waited now, and
         * the peers' part says when it was seen. */
        char head[256];
        const coh_call *c = w->call;
        double waited = (double)(coh_now_ns() - w->start_ns) / 1e9;
        double seen = (double)(w->report_ns - w->start_ns) / 1e9;
        if (c)
            snprintf(head, sizeof head, "stall: %s #%llu (%s:%d) on rank %d has waited %.1f s",
                     coh_coll_name(c->coll), (unsigned long long)c->seq, c->file, c->line, g->rank,
                     waited);
        else
            snprintf(head, sizeof head, "stall on rank %d after %.1f s", g->rank, waited);
        const char *peers = strstr(w->report, "; ");
        char when[64] = "";
        if (peers && waited - seen >= 0.5)
            snprintf(when, sizeof when, "; as of %.1f s", seen);
        return coh_group_fail(g, COHORT_ERR_TIMEOUT, "timed out after %d ms: %s%s%s%s%s",
                              g->timeout_ms, head, when, w->note[0] ? "; " : "", w->note,
                              peers ? peers : "");
    }
    return COHORT_OK;
}
