/*
 * trace.c - the flight recorder ring and the SIGUSR1 flag.
 *
 * Concurrency model. Every field of a slot is an atomic accessed with
 * relaxed loads/stores, so concurrent writers and readers are data-race free
 * (TSan-clean) without locks. Each field has one writer at a time: the
 * issuing thread writes the fingerprint, t_issue and the first state; the
 * thread that runs the call (inline: the same thread, async: the worker)
 * writes t_start, t_end, status and the later states. The two are ordered
 * by the engine (a call is started only after it was issued).
 *
 * A slot's `idx` says which ring index it holds (index + 1; 0 while being
 * rewritten). coh_trace_issue clears it, writes the fields and publishes it
 * with a release store; readers load it (acquire) before and after copying
 * the fields and drop the copy if it changed, so a reader never mixes two
 * different calls' fingerprints. It may still see an entry between its
 * start and end stores (state STARTED with t_start set, say): "torn at
 * worst" means that, never garbage.
 *
 * start/end for an index whose slot was already reused (more than
 * `capacity` calls outstanding) are dropped; a reuse racing with such a
 * late update can leave the new entry with the old call's timestamps. Only
 * possible with more than `capacity` async calls in flight.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/reduce.h"
#include "trace/trace.h"
#include "util/tclock.h"

#define TRACE_DEFAULT_SIZE 2048
#define TRACE_MAX_SIZE (1 << 20)
/* blocking calls of at most this many bytes take their issue time lazily */
#define TRACE_LAZY_BYTES 256

typedef struct trace_slot {
    _Atomic uint64_t idx; /* ring index + 1, 0 while being (re)written */
    _Atomic uint64_t seq, count;
    _Atomic uint32_t kind; /* coll | dtype << 8 | (uint8)redop << 16 */
    _Atomic int32_t root, tag, line;
    _Atomic(const char *) file;
    _Atomic uint64_t t_issue, t_start, t_end;
    _Atomic int state, status;
} trace_slot;

struct coh_trace {
    int cap;
    uint64_t mask;              /* cap - 1 when cap is a power of two, else 0 */
    _Atomic uint64_t next;      /* next ring index to hand out */
    /* ring index + 1 of the blocking call whose issue time is pending
     * (coh_trace_issue_started), 0 none; the issuing thread's only */
    _Atomic uint64_t pend;
    _Atomic unsigned sig_seen;  /* last SIGUSR1 count acted on (coh_trace_signal_take) */
    trace_slot *slots;
};

#define RLX memory_order_relaxed

/* The slot of ring index i. The default capacity (2048) is a power of two:
 * a mask, not a 64-bit division (two per call, on the store addresses of
 * every small call; docs/performance.md "the entry path, session 12").
 * cap 1 has mask 0 and takes the division, which gives slot 0 as well. */
static inline trace_slot *slot_of(const coh_trace *t, uint64_t i)
{
    return &t->slots[t->mask ? i & t->mask : i % (uint64_t)t->cap];
}

int coh_trace_default_capacity(int *out)
{
    long v = TRACE_DEFAULT_SIZE;
    int r = coh_env_int("COHORT_TRACE_SIZE", &v);
    if (r < 0 || (r > 0 && (v < 1 || v > TRACE_MAX_SIZE)))
        return -1;
    *out = (int)v;
    return 0;
}

cohort_status coh_trace_create(coh_trace **out, int capacity)
{
    if (!out)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "coh_trace_create: out is NULL");
    *out = NULL;
    if (capacity <= 0 && coh_trace_default_capacity(&capacity) < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "COHORT_TRACE_SIZE=%s: want an entry count between 1 and %d",
                           coh_env_str("COHORT_TRACE_SIZE"), TRACE_MAX_SIZE);
    if (capacity > TRACE_MAX_SIZE)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "flight recorder capacity %d is over the limit of %d entries",
                           capacity, TRACE_MAX_SIZE);
    coh_trace *t = coh_calloc(1, sizeof *t);
    if (!t)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "flight recorder: out of memory");
    t->slots = coh_calloc((size_t)capacity, sizeof *t->slots);
    if (!t->slots) {
        coh_free(t);
        return coh_err_set(NULL, COHORT_ERR_NOMEM,
                           "flight recorder: out of memory for %d entries", capacity);
    }
    t->cap = capacity;
    t->mask = (capacity & (capacity - 1)) == 0 ? (uint64_t)capacity - 1 : 0;
    /* Calls issued before the signal handler was installed do not count. */
    atomic_store(&t->sig_seen, coh_trace_signal_count());
    *out = t;
    return COHORT_OK;
}

void coh_trace_destroy(coh_trace *t)
{
    if (!t)
        return;
    coh_free(t->slots);
    coh_free(t);
}

int coh_trace_capacity(const coh_trace *t) { return t ? t->cap : 0; }

uint64_t coh_trace_recorded(const coh_trace *t)
{
    return t ? atomic_load_explicit(&((coh_trace *)t)->next, RLX) : 0;
}

/* Inline in both entry points (gcc split it into a call of its own, ~10
 * instructions of frame per call). */

static COH_INLINE uint64_t issue_as(coh_trace *t, const coh_call *c, int started)
{
    if (!t || !c)
        return 0;
    /* One issuing thread at a time (api.c's busy_file; finalize after the
     * last call), so a load and a store, not a locked read-modify-write
     * (~20 cycles of an 8 B call); readers only load next. */
    uint64_t i = atomic_load_explicit(&t->next, RLX);
    atomic_store_explicit(&t->next, i + 1, RLX);
    trace_slot *s = slot_of(t, i);
    /* Invalidate first so readers drop a half-rewritten slot; the release
     * fence orders the invalidation before the field stores below. */
    atomic_store_explicit(&s->idx, 0, RLX);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&s->seq, c->seq, RLX);
    atomic_store_explicit(&s->count, c->count, RLX);
    atomic_store_explicit(&s->kind,
                          (uint32_t)c->coll | (uint32_t)c->dtype << 8 |
                              (uint32_t)(uint8_t)c->redop << 16,
                          RLX);
    atomic_store_explicit(&s->root, c->root, RLX);
    atomic_store_explicit(&s->tag, c->tag, RLX);
    atomic_store_explicit(&s->line, c->line, RLX);
    atomic_store_explicit(&s->file, c->file, RLX);
    /* A small blocking call's issue time is taken at its first wait or its
     * end (coh_trace_arrive, coh_trace_end), not here: a clock read before
     * the root of a small call publishes sat on its reader's critical path
     * (2 ranks, 8 B: x0.76 without it). Larger calls keep the read: without
     * it a 4 KiB gather ran x1.5 slower, its leaf running ahead of the root
     * (cause not found; docs/performance.md, "Issue #14: session 15"). 0 =
     * pending. */
    int pending = started && (size_t)c->count * coh_dtype_size(c->dtype) <= TRACE_LAZY_BYTES;
    uint64_t now = pending ? 0 : coh_trace_us_inline();
    atomic_store_explicit(&s->t_issue, now, RLX);
    atomic_store_explicit(&s->t_start, started ? now : 0, RLX);
    atomic_store_explicit(&s->t_end, 0, RLX);
    atomic_store_explicit(&s->status, COHORT_OK, RLX);
    atomic_store_explicit(&s->state, started ? COH_ST_STARTED : COH_ST_ISSUED, RLX);
    atomic_store_explicit(&s->idx, i + 1, memory_order_release);
    atomic_store_explicit(&t->pend, pending ? i + 1 : 0, RLX);
    return i;
}

void coh_trace_arrive(coh_trace *t)
{
    uint64_t p = t ? atomic_load_explicit(&t->pend, RLX) : 0;
    if (!p)
        return;
    atomic_store_explicit(&t->pend, 0, RLX);
    trace_slot *s = slot_of(t, p - 1);
    if (atomic_load_explicit(&s->idx, memory_order_acquire) != p ||
        atomic_load_explicit(&s->t_start, RLX))
        return;
    uint64_t now = coh_trace_us();
    atomic_store_explicit(&s->t_issue, now, RLX);
    atomic_store_explicit(&s->t_start, now, RLX);
}

uint64_t coh_trace_issue(coh_trace *t, const coh_call *c) { return issue_as(t, c, 0); }

uint64_t coh_trace_issue_started(coh_trace *t, const coh_call *c) { return issue_as(t, c, 1); }

/* The slot still holding ring index i, or NULL if it was reused. */
static trace_slot *live_slot(coh_trace *t, uint64_t i)
{
    if (!t)
        return NULL;
    trace_slot *s = slot_of(t, i);
    return atomic_load_explicit(&s->idx, memory_order_acquire) == i + 1 ? s : NULL;
}

void coh_trace_start(coh_trace *t, uint64_t idx)
{
    trace_slot *s = live_slot(t, idx);
    if (!s)
        return;
    atomic_store_explicit(&s->t_start, coh_trace_us(), RLX);
    /* Release: a reader that sees STARTED sees t_start. */
    atomic_store_explicit(&s->state, COH_ST_STARTED, memory_order_release);
}

void coh_trace_start_now_issued(coh_trace *t, uint64_t idx)
{
    trace_slot *s = live_slot(t, idx);
    if (!s)
        return;
    atomic_store_explicit(&s->t_start, atomic_load_explicit(&s->t_issue, RLX), RLX);
    atomic_store_explicit(&s->state, COH_ST_STARTED, memory_order_release);
}

void coh_trace_end(coh_trace *t, uint64_t idx, cohort_status st)
{
    trace_slot *s = live_slot(t, idx);
    if (!s)
        return;
    uint64_t now = coh_trace_us_inline();
    /* A call that failed before it started (aborted in the queue) gets
     * t_start = t_end so durations stay well defined; so does an end that
     * reads earlier than the start (a clock step, or coh_trace_us renewing
     * its anchor in between, a fraction of a microsecond). */
    uint64_t start = atomic_load_explicit(&s->t_start, RLX);
    if (!start) { /* never waited (or failed in the queue): issued, started and ended now */
        if (!atomic_load_explicit(&s->t_issue, RLX))
            atomic_store_explicit(&s->t_issue, now, RLX);
        atomic_store_explicit(&s->t_start, now, RLX);
    } else if (now < start) {
        now = start;
    }
    if (atomic_load_explicit(&t->pend, RLX) == idx + 1)
        atomic_store_explicit(&t->pend, 0, RLX);
    atomic_store_explicit(&s->t_end, now, RLX);
    atomic_store_explicit(&s->status, (int)st, RLX);
    atomic_store_explicit(&s->state, st == COHORT_OK ? COH_ST_COMPLETED : COH_ST_FAILED,
                          memory_order_release);
}

/* Copies ring index i into e; 0 if it is not (or no longer) there. */
static int read_slot(const coh_trace *t, uint64_t i, coh_trace_entry *e)
{
    trace_slot *s = slot_of(t, i);
    if (atomic_load_explicit(&s->idx, memory_order_acquire) != i + 1)
        return 0;
    memset(e, 0, sizeof *e);
    e->state = atomic_load_explicit(&s->state, memory_order_acquire);
    e->call.seq = atomic_load_explicit(&s->seq, RLX);
    e->call.count = atomic_load_explicit(&s->count, RLX);
    uint32_t k = atomic_load_explicit(&s->kind, RLX);
    e->call.coll = (uint8_t)(k & 0xff);
    e->call.dtype = (uint8_t)(k >> 8 & 0xff);
    e->call.redop = (int8_t)(uint8_t)(k >> 16 & 0xff);
    e->call.root = atomic_load_explicit(&s->root, RLX);
    e->call.tag = atomic_load_explicit(&s->tag, RLX);
    e->call.line = atomic_load_explicit(&s->line, RLX);
    e->call.file = atomic_load_explicit(&s->file, RLX);
    e->t_issue_us = atomic_load_explicit(&s->t_issue, RLX);
    e->t_start_us = atomic_load_explicit(&s->t_start, RLX);
    e->t_end_us = atomic_load_explicit(&s->t_end, RLX);
    e->status = atomic_load_explicit(&s->status, RLX);
    if (!e->t_issue_us && e->state == COH_ST_STARTED) {
        /* a blocking call that has not waited yet: in flight, issued at
         * most now (its issue time is pending, coh_trace_arrive) */
        e->t_issue_us = coh_trace_us();
        e->t_start_us = e->t_issue_us;
    }
    /* Seqlock-style validation: the slot was not rewritten while we copied. */
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&s->idx, RLX) == i + 1;
}

int coh_trace_read(const coh_trace *t, uint64_t idx, coh_trace_entry *e)
{
    return t && e ? read_slot(t, idx, e) : 0;
}

int coh_trace_last(const coh_trace *t, coh_trace_entry *out, int n)
{
    if (!t || !out || n <= 0)
        return 0;
    uint64_t end = atomic_load_explicit(&((coh_trace *)t)->next, memory_order_acquire);
    uint64_t want = COH_MIN((uint64_t)n, (uint64_t)t->cap);
    uint64_t begin = end > want ? end - want : 0;
    int k = 0;
    for (uint64_t i = begin; i < end; i++)
        if (read_slot(t, i, &out[k]))
            k++;
    return k;
}

static int is_p2p(int coll) { return coll == COH_COLL_SEND || coll == COH_COLL_RECV; }

void coh_trace_progress(const coh_trace *t, uint64_t *last_done, coh_trace_entry *cur,
                        int *has_cur)
{
    if (last_done)
        *last_done = 0;
    if (has_cur)
        *has_cur = 0;
    if (!t)
        return;
    uint64_t end = atomic_load_explicit(&((coh_trace *)t)->next, memory_order_acquire);
    uint64_t begin = end > (uint64_t)t->cap ? end - (uint64_t)t->cap : 0;
    int found_cur = 0;
    uint64_t done = 0;
    coh_trace_entry e;
    /* Newest to oldest: the oldest unfinished entry wins, so keep
     * overwriting `cur` while walking back. */
    for (uint64_t i = end; i-- > begin;) {
        if (!read_slot(t, i, &e))
            continue;
        if (e.state == COH_ST_COMPLETED && !is_p2p(e.call.coll) && e.call.seq > done)
            done = e.call.seq;
        if (e.state == COH_ST_ISSUED || e.state == COH_ST_STARTED) {
            found_cur = 1;
            if (cur)
                *cur = e;
        }
    }
    if (last_done)
        *last_done = done;
    if (has_cur)
        *has_cur = found_cur;
}

/* ---- SIGUSR1 ----
 * The handler only bumps a counter (lock-free atomics are async-signal-safe)
 * and chains to a handler installed before ours. */

static atomic_uint sig_count;
static struct sigaction sig_prev;
static pthread_once_t sig_once = PTHREAD_ONCE_INIT;

static void on_sigusr1(int sig, siginfo_t *info, void *uctx)
{
    atomic_fetch_add_explicit(&sig_count, 1, RLX);
    if (sig_prev.sa_flags & SA_SIGINFO) {
        if (sig_prev.sa_sigaction)
            sig_prev.sa_sigaction(sig, info, uctx);
    } else if (sig_prev.sa_handler != SIG_DFL && sig_prev.sa_handler != SIG_IGN &&
               sig_prev.sa_handler) {
        sig_prev.sa_handler(sig);
    }
}

static void install_once(void)
{
    /* COHORT_TRACE_SIGNAL=0 leaves SIGUSR1 to the application. */
    long on = 1;
    if (coh_env_int("COHORT_TRACE_SIGNAL", &on) > 0 && on == 0)
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigusr1;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, &sig_prev) != 0)
        coh_warn("flight recorder: cannot install the SIGUSR1 handler; dumps on signal are off");
}

void coh_trace_install_signal(void) { pthread_once(&sig_once, install_once); }

unsigned coh_trace_signal_count(void) { return atomic_load_explicit(&sig_count, RLX); }

/* Per thread: every group's monitor is its own thread, so each group acts
 * once on each signal without any per-group state here. */
static _Thread_local unsigned sig_seen_thread;

int coh_trace_signal_pending(void)
{
    unsigned now = coh_trace_signal_count();
    if (now == sig_seen_thread)
        return 0;
    sig_seen_thread = now;
    return 1;
}

int coh_trace_signal_take(coh_trace *t)
{
    if (!t)
        return 0;
    unsigned now = coh_trace_signal_count();
    unsigned seen = atomic_load_explicit(&t->sig_seen, RLX);
    return seen != now && atomic_compare_exchange_strong(&t->sig_seen, &seen, now);
}
