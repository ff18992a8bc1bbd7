/*
 * shm_wait.c - waiting for a local peer's phase: spin, then yield, then
 * sleep on the peer's arrive word (shared futex), checking abort, deadline,
 * stall and the peer's liveness at least every COH_WAIT_SLICE_MS.
 *
 * Why three stages: on this class of machine a futex wake-up costs 20-40 us
 * while a cache-line hand-off costs ~0.1 us, so a short spin catches the
 * common case of ranks arriving close together. Yielding keeps latency low
 * whenever the rank we wait for may need our CPU: when ranks outnumber
 * cores, but also when other processes load the machine and the scheduler
 * puts two of our (unbound) ranks on one CPU - measured: a 500 us spin
 * without yielding turned a loaded machine's 8-byte all_reduce from ~10 us
 * into ~550 us, and the old fixed 50 us spin cost ~115 us per call (one
 * spin per hand-off); hence the adaptive budget below. A pure spinner
 * holds the CPU for a whole time slice, which is how busy-polling MPI
 * implementations collapse to milliseconds. Sleeping bounds the CPU burnt
 * by a long wait; it only starts after the wait has already lasted well
 * over the cost of a wake-up, so it adds a few percent at most.
 */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "trace/trace.h"
#include "transport/shm/shm_seg.h"

#define SLICE_NS ((uint64_t)COH_WAIT_SLICE_MS * 1000000ull)

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

void shm_futex_wake(_Atomic uint32_t *word)
{
    /* Shared (not PRIVATE) futex: the sleepers live in other processes. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Returns 1 if the sleep lasted its whole timeout. */
static int futex_wait(_Atomic uint32_t *word, uint32_t val, int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    return syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0) < 0 &&
           errno == ETIMEDOUT;
}

int shm_oversubscribed(const cohort_group *g, int n)
{
    long cpus = coh_group_cpus(g);
    return cpus > 0 && n > cpus;
}

int coh_shm_bar_scatter_setting(void)
{
    long v;
    return coh_env_int("COHORT_SHM_BAR_SCATTER", &v) == 1 && v == 0 ? 0 : 1;
}

void shm_wait_defaults(coh_shm *s)
{
    s->oversub = shm_oversubscribed(s->g, s->n);
    /* Oversubscribed: barely spin (a peer that needs our CPU cannot run
     * while we spin), then yield so it can. Otherwise spin for about the
     * time two or three wake-ups would cost before yielding. */
    s->spin_ns = s->oversub ? 0 : 50000;
    s->yield_ns = s->oversub ? 2000000 : 1000000;
    long v;
    if (coh_env_int("COHORT_SHM_SPIN_US", &v) == 1 && v >= 0 && v <= 10000000)
        s->spin_ns = (uint64_t)v * 1000;
    if (coh_env_int("COHORT_SHM_YIELD_US", &v) == 1 && v >= 0 && v <= 10000000)
        s->yield_ns = (uint64_t)v * 1000;
    if (s->yield_ns < s->spin_ns)
        s->yield_ns = s->spin_ns;
    /* Off by default: the loaded A/B could not tell it from the default
     * (docs/performance.md); COHORT_SHM_RING_DRAIN=1 for the quiet one. */
    s->ring_drain = 0;
    if (coh_env_int("COHORT_SHM_RING_DRAIN", &v) == 1 && (v == 0 || v == 1))
        s->ring_drain = (int)v;
    s->bar_scatter = coh_shm_bar_scatter_setting();
    s->spin_cur = s->spin_ns;
    /* A small recv's spin for a sender running on another cpu (wait_loop),
     * with at most two ranks to a cpu: with more, the ranks left waiting
     * behind a spinning pair made the tail (8 ranks on 2 cpus, 8 B: p50
     * 3.6 -> 1.5 us, p99 8.5 -> 28; docs/shm.md "Waiting"). A
     * COHORT_SHM_SPIN_US of the user's governs every wait instead. */
    long cpus = coh_group_cpus(s->g);
    s->p2p_spin_ns = s->oversub && s->n <= 2 * cpus && coh_env_int("COHORT_SHM_SPIN_US", &v) != 1
                         ? SHM_P2P_SPIN_NS
                         : 0;
    /* the small all_reduce's one-line exchange (shm_coll.c ar_small);
     * per rank: a rank without it still interoperates (it writes its
     * buffer and control-line fingerprint as before) */
    s->ar_inl = 1;
    if (coh_env_int("COHORT_SHM_AR_INLINE", &v) == 1 && (v == 0 || v == 1))
        s->ar_inl = (int)v;
}

/* Adaptive spin: a wait that ends while spinning lets the budget grow back
 * towards spin_ns; one that outlasts the spin halves it (down to SPIN_MIN),
 * so a rank whose peers are descheduled (loaded machine) or slow stops
 * burning a CPU they may need, while tight back-to-back calls keep
 * spinning. */
#define SPIN_MIN_NS 2000u
static inline void spin_won(coh_shm *s)
{
    uint64_t c = s->spin_cur + s->spin_cur / 4 + 500;
    s->spin_cur = c < s->spin_ns ? c : s->spin_ns;
}

static inline void spin_lost(coh_shm *s)
{
    uint64_t c = s->spin_cur / 2;
    s->spin_cur = c > SPIN_MIN_NS ? c : (s->spin_ns < SPIN_MIN_NS ? s->spin_ns : SPIN_MIN_NS);
}

cohort_status shm_check_abort(coh_shm *s)
{
    uint32_t st = atomic_load_explicit(&s->hdr->abort_status, memory_order_acquire);
    int p = coh_group_poisoned(s->g);
    if (p)
        return (cohort_status)p;
    if (!st)
        return COHORT_OK;
    /* Another local rank failed the group: adopt its cause. Copy the reason
     * out of the segment first; its writer finished before storing st. */
    char reason[COH_ERRLEN];
    memcpy(reason, s->hdr->abort_reason, sizeof reason);
    reason[sizeof reason - 1] = 0;
    return coh_tp_remote_abort_at(s->g, (cohort_status)st, reason, s->hdr->abort_seq);
}

static int peer_exited(coh_shm *s, int q)
{
    if (!s->pidfd || s->pidfd[q] < 0)
        return 0;
    struct pollfd pf = {.fd = s->pidfd[q], .events = POLLIN};
    return poll(&pf, 1, 0) > 0 && (pf.revents & (POLLIN | POLLHUP | POLLERR));
}

/* Everything that is too expensive for every spin iteration: the abort
 * word, the peer's pidfd, and the group's wait bookkeeping (deadline,
 * stall report, out-of-band probe). */
static cohort_status slow_check(shm_op *o, int q, _Atomic uint32_t *word, uint32_t target)
{
    coh_shm *s = o->s;
    /* The peer may have published what we wait for just before an abort
     * that we see first (a ring reader publishes its phase, then fails):
     * the wait is over, and its caller then checks the peer's fingerprint
     * itself - the abort ends the next wait. */
    if (shm_reached(atomic_load_explicit(word, memory_order_acquire), target))
        return COHORT_OK;
    cohort_status st = shm_check_abort(s);
    if (st != COHORT_OK)
        return st;
    if (peer_exited(s, q)) {
        /* It may have published what we need just before exiting. */
        uint32_t v = atomic_load_explicit(word, memory_order_acquire);
        if (shm_reached(v, target))
            return COHORT_OK;
        /* A peer that failed the group wrote the abort word before it
         * exited: its cause, not its exit, is what went wrong. */
        if ((st = shm_check_abort(s)) != COHORT_OK)
            return st;
        return coh_tp_peer_lost(o->g, o->waiting_for,
                                "process exited (shared-memory peer, seen through its pidfd)");
    }
    if (o->ring_wait && q == o->ring_q && s->check) {
        /* A ring reader waits for the root without publishing; if the rank
         * it waits for is itself a ring reader of this phase with another
         * fingerprint (it believes another rank is root), neither would
         * ever publish: compare the records now. */
        coh_hdr got;
        if (shm_ring_get(s, q, o->ring_p, &got) && coh_hdr_match(&o->mine, &got) != COH_FIELD_NONE) {
            o->ring_got = got;
            o->ring_bad = 1;
            return COHORT_ERR_CONTRACT;
        }
    }
    o->w.waiting_for = &o->waiting_for;
    o->w.n_waiting_for = 1;
    return coh_wait_check(&o->w);
}

static inline int urgent(coh_shm *s)
{
    return atomic_load_explicit(&s->hdr->abort_status, memory_order_relaxed) ||
           coh_group_poisoned(s->g);
}

cohort_status shm_wait_slow(shm_op *o, int q, uint32_t target)
{
    shm_ctl *pc = shm_ctl_of(o->s, q);
    return shm_wait_word(o, q, &pc->arrive, &pc->waiters, &pc->cpu, target);
}

void shm_word_publish(coh_shm *s, _Atomic uint32_t *word, _Atomic uint32_t *waiters,
                      uint32_t value)
{
    if (shm_pub_store(s, word, waiters, value))
        shm_futex_wake(word);
}

/* ---- the asymmetric barrier (shm_pub_store's light mode) ----
 *
 * MEMBARRIER_CMD_GLOBAL_EXPEDITED: an IPI to every cpu that runs a thread
 * of a process registered for it, which executes a full barrier there (a
 * process that is not running gets one at its next context switch); the
 * call returns after all of them. The publishers are the group's ranks,
 * each registered at attach; the sleeper calls it once per sleep. */
static long membarrier_call(int cmd) { return syscall(SYS_membarrier, cmd, 0u, 0); }

int shm_membar_register(char *why, size_t len)
{
    long q = membarrier_call(MEMBARRIER_CMD_QUERY);
    if (q < 0) {
        snprintf(why, len, "membarrier unavailable (%s)", strerror(errno));
        return 0;
    }
    long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
    if ((q & need) != need) {
        snprintf(why, len, "the kernel lacks MEMBARRIER_CMD_GLOBAL_EXPEDITED");
        return 0;
    }
    if (membarrier_call(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0) {
        snprintf(why, len, "membarrier registration failed (%s)", strerror(errno));
        return 0;
    }
    return 1;
}

int shm_membar_sleeper(void)
{
    return membarrier_call(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 ? 0 : -1;
}

cohort_status shm_wait_flag(coh_shm *s, int q, _Atomic uint32_t *flag, _Atomic uint32_t *word,
                            uint32_t target, uint64_t deadline_ns)
{
    for (;;) {
        if (atomic_load_explicit(flag, memory_order_acquire) ||
            shm_reached(atomic_load_explicit(word, memory_order_acquire), target))
            return COHORT_OK;
        cohort_status st = shm_check_abort(s);
        if (st != COHORT_OK)
            return st;
        if (peer_exited(s, q))
            return atomic_load_explicit(flag, memory_order_acquire) ||
                           shm_reached(atomic_load_explicit(word, memory_order_acquire), target)
                       ? COHORT_OK
                       : COHORT_ERR_PEER_LOST;
        uint64_t now = coh_now_ns();
        if (now >= deadline_ns)
            return COHORT_ERR_TIMEOUT;
        /* Rare (once per peer at finalize): sleep in short slices; the
         * setter does not wake, the slice bounds the delay. */
        struct timespec ts = {0, 2000000L};
        nanosleep(&ts, NULL);
    }
}

/* The one wait loop. Without poll_fn it sleeps on word itself (waiters
 * counts the sleepers, cpu is the owner's hint); with poll_fn, the
 * channels' wait, it calls poll_fn(arg) while waiting and sleeps on this
 * rank's bell (bell, bell_waiters; no cpu hint). */
static cohort_status wait_loop(shm_op *o, int q, _Atomic uint32_t *word, _Atomic uint32_t *bell,
                               _Atomic uint32_t *bell_waiters, _Atomic int32_t *cpu,
                               uint32_t target, cohort_status (*poll_fn)(void *arg), void *arg,
                               int spin_for_q)
{
    coh_shm *s = o->s;
    cohort_status st;
    uint64_t t0 = coh_now_ns(), now = t0, next_check = t0 + SLICE_NS;
    coh_trace_arrive(o->g->trace); /* the call's issue time, if pending */
    if (!o->w_init) {
        coh_wait_init_at(&o->w, o->g, o->c, t0); /* one clock read, not two */
        o->w_init = 1;
    } else {
        /* The call's previous wait ended with what it waited for: progress.
         * The stall clock restarts here, as in the tcp transport: the
         * timeout bounds a wait without progress, not a long call (a
         * pipelined broadcast or a chunked send to a slow but moving peer
         * was judged from its first wait and failed with
         * COHORT_ERR_TIMEOUT while data still flowed). */
        coh_wait_restart(&o->w, t0);
    }
    o->waiting_for = o->g->local_ranks ? o->g->local_ranks[q] : q;

    /* Stage 1: spin. The clock is read every 64 iterations only; when
     * oversubscribed a few iterations only (the peer may need this CPU),
     * and not at all when the peer last ran on this very CPU: it cannot
     * publish before we let it run. */
    unsigned mask = s->oversub ? 7u : 63u;
    uint64_t budget = s->spin_cur;
    _Atomic int32_t *q_runs = NULL;
    /* Ranks outnumbering cpus, the rest of the time in this stage with
     * every wait yielding at once: a small recv (spin_for_q) spins for a
     * sender that runs on another cpu - it is about to publish, and then
     * the pair exchanges without a context switch while it lasts; a
     * sender that yields or sleeps, or shares our cpu, gets the cpu
     * instead. Measured (docs/shm.md "Waiting"): 4 ranks on 2 cpus, 8 B
     * 1.06 -> 0.63 us with each pair split over the cpus, unchanged with
     * each pair on one; the spin loses from 1 KiB (1.39 -> 1.62 us).
     * Another channel wait (no cpu hint: what it waits for may come from
     * any peer) with a zero budget, the oversubscribed default, does not
     * spin at all: its 8 iterations before the first yield cost 0.1 us a
     * message at 8 B-16 KiB in every placement. The collectives keep them
     * (cpu hint). */
    if (!cpu && spin_for_q) {
        shm_ctl *pc = shm_ctl_of(s, q);
        if (!atomic_load_explicit(&pc->running, memory_order_relaxed))
            goto yield;
        cpu = &pc->cpu;
        q_runs = &pc->running;
        budget = s->p2p_spin_ns;
    } else if (!cpu && s->spin_ns == 0) {
        goto yield;
    }
    if (cpu) {
        int here = sched_getcpu();
        if (here >= 0 && here == atomic_load_explicit(cpu, memory_order_relaxed))
            goto yield;
    }
    for (unsigned i = 1;; i++) {
        if (shm_reached(atomic_load_explicit(word, memory_order_acquire), target)) {
            if (!q_runs)
                spin_won(s);
            return COHORT_OK;
        }
        if ((i & mask) == 0) {
            if (poll_fn && (st = poll_fn(arg)) != COHORT_OK)
                return st;
            if (urgent(s) && (st = slow_check(o, q, word, target)) != COHORT_OK)
                return st;
            now = coh_now_ns();
            if (q_runs) {
                if (now - t0 >= budget || !atomic_load_explicit(q_runs, memory_order_relaxed))
                    break;
            } else if (now - t0 >= budget) {
                spin_lost(s);
                break;
            }
            if (now >= next_check) {
                if ((st = slow_check(o, q, word, target)) != COHORT_OK)
                    return st;
                next_check = now + SLICE_NS;
            }
        }
        cpu_relax();
    }

    /* Stage 2: yield the CPU to whoever is runnable (maybe the peer). */
yield:;
    /* my running flag, for the peers' small recvs (kept only then) */
    _Atomic int32_t *runs = s->p2p_spin_ns ? &shm_ctl_of(s, s->me)->running : NULL;
    while (now - t0 < s->yield_ns) {
        if (runs)
            atomic_store_explicit(runs, 0, memory_order_relaxed);
        sched_yield();
        if (runs)
            atomic_store_explicit(runs, 1, memory_order_relaxed);
        if (shm_reached(atomic_load_explicit(word, memory_order_acquire), target))
            return COHORT_OK;
        if (poll_fn && (st = poll_fn(arg)) != COHORT_OK)
            return st;
        now = coh_now_ns();
        if (urgent(s) || now >= next_check) {
            if ((st = slow_check(o, q, word, target)) != COHORT_OK)
                return st;
            next_check = now + SLICE_NS;
        }
    }

    /* Stage 3: sleep on the bell word, one slice at a time. The seq_cst
     * increment before the re-check pairs with the publisher's store and
     * load (shm_pub_store, shm_bell_ring); in light mode the membarrier
     * between them is the publisher's fence, run here on its behalf. With
     * poll_fn: after counting ourselves, take what came, then sleep only
     * if nothing we wait for is there (a later publish rings the bell). */
    for (;;) {
        atomic_fetch_add_explicit(bell_waiters, 1, memory_order_seq_cst);
        int ms = COH_WAIT_SLICE_MS;
        if (s->light && shm_membar_sleeper() != 0) {
            /* Registered at attach, so not expected; without the barrier a
             * publish may not see us: sleep briefly, never a whole slice. */
            if (!s->membar_failed++)
                coh_warn("shm: membarrier failed while waiting (%s); sleeping 1 ms at a time",
                         strerror(errno));
            ms = 1;
        }
        uint32_t v = atomic_load_explicit(bell, memory_order_seq_cst);
        st = poll_fn ? poll_fn(arg) : COHORT_OK;
        if (st == COHORT_OK &&
            !shm_reached(bell == word ? v : atomic_load_explicit(word, memory_order_seq_cst),
                         target) &&
            !urgent(s)) {
            s->sleeps++;
            if (runs)
                atomic_store_explicit(runs, 0, memory_order_relaxed);
            int full = futex_wait(bell, v, ms);
            if (runs)
                atomic_store_explicit(runs, 1, memory_order_relaxed);
            if (full && ms == COH_WAIT_SLICE_MS &&
                shm_reached(atomic_load_explicit(word, memory_order_acquire), target))
                s->late_wakes++; /* what we waited for came, its wake did not */
        }
        atomic_fetch_sub_explicit(bell_waiters, 1, memory_order_seq_cst);
        if (st != COHORT_OK)
            return st;
        if (shm_reached(atomic_load_explicit(word, memory_order_acquire), target))
            return COHORT_OK;
        if (poll_fn && (st = poll_fn(arg)) != COHORT_OK)
            return st;
        if ((st = slow_check(o, q, word, target)) != COHORT_OK)
            return st;
    }
}

cohort_status shm_wait_word(shm_op *o, int q, _Atomic uint32_t *word, _Atomic uint32_t *waiters,
                            _Atomic int32_t *cpu, uint32_t target)
{
    return wait_loop(o, q, word, word, waiters, cpu, target, NULL, NULL, 0);
}

cohort_status shm_wait_rec(shm_op *o, int q, _Atomic uint32_t *word, uint32_t target,
                           cohort_status (*poll_fn)(void *arg), void *arg)
{
    shm_ctl *pc = shm_ctl_of(o->s, q);
    return wait_loop(o, q, word, &pc->arrive, &pc->waiters, &pc->cpu, target, poll_fn, arg, 0);
}

/* ---- the send/recv channels' wait: one bell per rank ----
 *
 * A rank blocked in send or recv must keep taking the messages its other
 * peers send it (or two ranks sending to each other at once would each
 * wait for the other to drain its channel): it waits for one word AND for
 * any incoming chunk. It sleeps on its own bell (the pub word of its
 * diagonal channel, which carries no messages), and whoever publishes a
 * chunk or an ack for it rings the bell when it sleeps (shm_bell_ring). */
void shm_bell_ring(coh_shm *s, int q)
{
    shm_chan *b = shm_chan_of(s, q, q);
    /* after the publish (shm_pub_stamp or shm_word_publish): either the
     * sleeper's re-check sees what was published, or we see it counted
     * itself (shm_pub_store's pairing) */
    if (shm_pub_sleepers(s, &b->pub_waiters)) {
        atomic_fetch_add_explicit(&b->pub, 1u, memory_order_seq_cst);
        shm_futex_wake(&b->pub);
    }
}

cohort_status shm_wait_multi(shm_op *o, int q, _Atomic uint32_t *word, uint32_t target,
                             cohort_status (*poll_fn)(void *arg), void *arg, int spin_for_q)
{
    shm_chan *b = shm_chan_of(o->s, o->s->me, o->s->me);
    return wait_loop(o, q, word, &b->pub, &b->pub_waiters, NULL, target, poll_fn, arg,
                     spin_for_q && o->s->p2p_spin_ns);
}
