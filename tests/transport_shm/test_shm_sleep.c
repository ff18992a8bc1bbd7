/*
 * test_shm_sleep.c - ranks that outnumber the cores and sleep on the futex
 * (docs/shm.md, "Waiting"). Every rank is pinned to one cpu, so 8 ranks
 * share it (oversubscribed: the deep rings, no spin), and
 * COHORT_SHM_YIELD_US=0 makes every wait that is not over at once sleep on
 * the awaited rank's arrive word. Then:
 *   - wake: many calls (all_reduce, ring broadcasts from a rotating root,
 *     bytes checked) finish within a deadline: a publish must wake the
 *     sleepers (without the wake each sleep lasts its whole 50 ms slice and
 *     the loop misses the deadline by far);
 *   - abort, death, timeout while asleep: with every reader counted as a
 *     sleeper on the root's word, the root fails the group, SIGKILLs itself
 *     or never comes; the sleepers end with the abort's reason, a lost peer
 *     or COHORT_ERR_TIMEOUT, in bounded time;
 *   - drain: COHORT_SHM_RING_DRAIN=1, a ring root that finds its slot taken
 *     waits until the reader is done with every call it published.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support/support.h"
#include "transport/shm/shm_seg.h"

#define N 8
#define SLEEP_ENV "COHORT_SHM_SPIN_US=0;COHORT_SHM_YIELD_US=0"

/* Pins this rank to the first cpu it may use: all ranks share one. */
static void pin_one_cpu(void)
{
    cpu_set_t s;
    RANK_CHECK(sched_getaffinity(0, sizeof s, &s) == 0, "sched_getaffinity");
    int c = 0;
    while (c < CPU_SETSIZE && !CPU_ISSET(c, &s))
        c++;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    RANK_CHECK(sched_setaffinity(0, sizeof s, &s) == 0, "sched_setaffinity(cpu %d)", c);
}

static unsigned char pat(int i, int root, size_t j) { return (unsigned char)(i * 13 + root * 5 + j); }

static cohort_status bc(cohort_group *g, unsigned char *buf, int root, size_t bytes)
{
    coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, root, bytes);
    return coh_shm_broadcast(g->shm, &c, buf, bytes, root);
}

static cohort_status ar(cohort_group *g, float *sum)
{
    float a = (float)(g->rank + 1), b = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    cohort_status st = coh_shm_all_reduce(g->shm, &c, &a, &b, 1);
    if (sum)
        *sum = b;
    return st;
}

static cohort_group *sleepy_group(int rank, int timeout_ms)
{
    pin_one_cpu();
    cohort_status st;
    cohort_group *g = th_group(rank, N, timeout_ms, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->oversub && g->shm->spin_ns == 0 && g->shm->yield_ns == 0,
               "not sleeping at once: oversub %d spin %llu yield %llu", g->shm->oversub,
               (unsigned long long)g->shm->spin_ns, (unsigned long long)g->shm->yield_ns);
    return g;
}

/* ---- the wake reaches every sleeper ---- */

#define WAKE_ITERS 400

static int wake_rank(int rank, void *arg)
{
    (void)arg;
    cohort_group *g = sleepy_group(rank, 30000);
    static unsigned char buf[4096];
    /* 3 hand-offs an iteration, each a sleep of some rank: without the
     * wake at least 3 x 50 ms an iteration, 60 s in all; with it, well
     * under a second on a quiet machine, seconds on a loaded one. */
    double limit_ms = 20000 * cht_time_scale();
    uint64_t t0 = coh_now_ns();
    for (int i = 0; i < WAKE_ITERS; i++) {
        float sum = 0;
        RANK_PASS(ar(g, &sum), g);
        RANK_CHECK(sum == N * (N + 1) / 2, "all_reduce %d gave %f", i, sum);
        int root = i % N;
        size_t sizes[2] = {8, 4096};
        for (int k = 0; k < 2; k++) {
            size_t bytes = sizes[k];
            for (size_t j = 0; j < bytes; j++)
                buf[j] = rank == root ? pat(i + k, root, j) : 0;
            RANK_PASS(bc(g, buf, root, bytes), g);
            for (size_t j = 0; j < bytes; j++)
                RANK_CHECK(buf[j] == pat(i + k, root, j), "call %d/%d root %d byte %zu", i, k,
                           root, j);
        }
        double ms = (coh_now_ns() - t0) / 1e6;
        RANK_CHECK(ms < limit_ms, "%d of %d iterations took %.0f ms: a sleeper was not woken", i,
                   WAKE_ITERS, ms);
    }
    fprintf(stderr, "rank %d: %d iterations in %.0f ms\n", rank, WAKE_ITERS,
            (coh_now_ns() - t0) / 1e6);
    RANK_PASS(coh_shm_transport.close_check(g->shm, 5000), g);
    th_group_free(g);
    th_done(N);
    return 0;
}

START_TEST(wake)
{
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = N, .deadline_ms = 240000,
                  .extra_env = SLEEP_ENV};
    cht_result r;
    cht_run_ranks(&o, wake_rank, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- abort, death, timeout while the readers sleep ---- */

enum { F_ABORT, F_KILL, F_TIMEOUT, F_N };

/* Root 0: until every reader counts itself a sleeper on its arrive word. */
static void await_sleepers(cohort_group *g)
{
    _Atomic uint32_t *w = &shm_ctl_of(g->shm, 0)->waiters;
    uint64_t end = coh_now_ns() + 20000000000ull;
    while (atomic_load(w) < N - 1) {
        RANK_CHECK(coh_now_ns() < end, "only %u of %d readers asleep", atomic_load(w), N - 1);
        th_sleep_ms(1);
    }
    th_sleep_ms(20); /* let the last one enter FUTEX_WAIT */
}

static int fault_rank(int rank, void *arg)
{
    int f = *(int *)arg;
    cohort_group *g = sleepy_group(rank, f == F_TIMEOUT ? 1000 : 30000);
    RANK_PASS(ar(g, NULL), g);
    static unsigned char buf[4096];
    double scale = cht_time_scale();
    if (rank == 0) {
        await_sleepers(g);
        atomic_store(&th_sh()->t_event_ns, coh_now_ns());
        if (f == F_ABORT)
            coh_group_fail(g, COHORT_ERR_ABORTED, "aborted while the readers sleep");
        else if (f == F_KILL)
            raise(SIGKILL);
        else /* never calls: stays alive until a reader timed out */
            th_wait_flag(0, 30000);
        th_group_free(g);
        th_done(N);
        return 0;
    }
    uint64_t t0 = coh_now_ns();
    cohort_status st = bc(g, buf, 0, 4096);
    uint64_t t1 = coh_now_ns();
    double since_event = (t1 - atomic_load(&th_sh()->t_event_ns)) / 1e6,
           waited = (t1 - t0) / 1e6;
    const char *msg = th_errmsg(g);
    fprintf(stderr, "rank %d: %s after %.0f ms (%.0f ms after the event): %s\n", rank,
            cohort_status_name(st), waited, since_event, msg);
    if (f == F_ABORT) {
        RANK_CHECK(st == COHORT_ERR_ABORTED && strstr(msg, "aborted while the readers sleep"),
                   "got %s: %s", cohort_status_name(st), msg);
        RANK_CHECK(since_event < 1000 * scale, "woke %.0f ms after the abort", since_event);
    } else if (f == F_KILL) {
        RANK_CHECK(st == COHORT_ERR_PEER_LOST || st == COHORT_ERR_ABORTED, "got %s: %s",
                   cohort_status_name(st), msg);
        RANK_CHECK(strstr(msg, "exited") || strstr(msg, "lost"), "not a lost peer: %s", msg);
        RANK_CHECK(since_event < 2000 * scale, "saw the death %.0f ms after it", since_event);
    } else {
        RANK_CHECK(st == COHORT_ERR_TIMEOUT || st == COHORT_ERR_ABORTED, "got %s: %s",
                   cohort_status_name(st), msg);
        RANK_CHECK(strstr(msg, "timed out") || strstr(msg, "TIMEOUT") || strstr(msg, "timeout"),
                   "not a timeout: %s", msg);
        RANK_CHECK(waited > 800 && waited < 1000 + 4000 * scale, "timed out after %.0f ms",
                   waited);
        atomic_store(&th_sh()->flag[0], 1);
    }
    th_group_free(g);
    th_done(f == F_KILL ? N - 1 : N);
    return 0;
}

START_TEST(fault_while_asleep)
{
    int f = _i;
    ck_assert_ptr_nonnull(th_shared_init());
    /* rank 0 dies in F_KILL: the store must not live in it */
    cht_opts o = {.store_mode = f == F_KILL ? CHT_STORE_PARENT : CHT_STORE_RANK0, .nranks = N,
                  .deadline_ms = 60000, .extra_env = SLEEP_ENV};
    cht_result r;
    cht_run_ranks(&o, fault_rank, &f, &r);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(!r.hung[i], "rank %d hung", i);
        ck_assert_msg(r.status[i] == (f == F_KILL && i == 0 ? 128 + SIGKILL : 0),
                      "rank %d exited %d", i, r.status[i]);
    }
}
END_TEST

/* ---- COHORT_SHM_RING_DRAIN: the root waits for the ring to drain ---- */

#define DK 8 /* COHORT_SHM_RING_SLOTS below */

static int drain_rank(int rank, void *arg)
{
    (void)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->ring_k == DK && g->shm->tiny_k == 0 && g->shm->ring_drain == 1,
               "ring %zu tiny %zu drain %d", g->shm->ring_k, g->shm->tiny_k, g->shm->ring_drain);
    RANK_PASS(ar(g, NULL), g);
    static unsigned char buf[1000];
    for (int i = 0; i <= DK; i++) {
        for (size_t j = 0; j < sizeof buf; j++)
            buf[j] = rank == 0 ? pat(i, 0, j) : 0;
        RANK_PASS(bc(g, buf, 0, sizeof buf), g);
        for (size_t j = 0; j < sizeof buf; j++)
            RANK_CHECK(buf[j] == pat(i, 0, j), "call %d byte %zu", i, j);
        if (rank == 1 && i == 0) {
            /* done with call 0 only: the root's call DK may reuse slot 0
             * now, but with the drain it waits for calls 1 .. DK-1 too */
            th_sleep_ms(300);
            atomic_store(&th_sh()->val[1], (int64_t)coh_now_ns());
        }
        if (rank == 0 && i == DK)
            atomic_store(&th_sh()->val[0], (int64_t)coh_now_ns());
    }
    RANK_PASS(ar(g, NULL), g);
    if (rank == 0) {
        int64_t root_back = atomic_load(&th_sh()->val[0]), reader_on = atomic_load(&th_sh()->val[1]);
        RANK_CHECK(root_back > reader_on,
                   "the root's call %d returned %.0f ms before the reader went on past call 0: "
                   "it did not wait for the ring to drain", DK, (reader_on - root_back) / 1e6);
    }
    RANK_PASS(coh_shm_transport.close_check(g->shm, 5000), g);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(drain)
{
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 2, .deadline_ms = 30000,
                  .extra_env = "COHORT_SHM_RING_DRAIN=1;COHORT_SHM_RING_SLOTS=8;"
                               "COHORT_SHM_TINY_SLOTS=0"};
    cht_result r;
    cht_run_ranks(&o, drain_rank, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- the oversubscribed barrier: the leader leaves first ----
 *
 * OSU-style loops (a broadcast, then a barrier) with 4 ranks on one cpu and
 * the default waits. A barrier right after a broadcast has a leader, that
 * broadcast's root: it
 * publishes once every other rank arrived and the others wait for it, so
 * it leaves the barrier first and its next broadcast is written before its
 * readers look for it (docs/performance.md, "Ranks outnumbering cores:
 * small broadcasts OSU style"). With the flat barrier the last rank to
 * arrive leaves first, nearly always a reader. Each rank takes a ticket
 * right after the barrier; the root must hold the first in nearly every
 * iteration (a rank preempted between the leader's publish and its ticket
 * can lose it, hence the margin). The root rotates every 64 iterations.
 * The same with a ring scatter (8 B a rank) for the broadcast: its root
 * publishes and returns as a broadcast's does, and leads the barrier too
 * (COHORT_SHM_BAR_SCATTER, default 1; docs/performance.md "Issue #14: the
 * targets not met": the OSU scatter's two launch modes). */
#define LN 4
#define LEAD_ITERS 512

static int lead_rank(int rank, void *arg)
{
    int scatter = *(int *)arg;
    pin_one_cpu();
    cohort_status st;
    cohort_group *g = th_group(rank, LN, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->oversub, "%d ranks on one cpu but not oversubscribed", LN);
    _Atomic int64_t *tk = th_sh()->val, *firsts = &th_sh()->val[40],
                    *strays = &th_sh()->val[41];
    unsigned char buf[8], sb[8 * LN];
    for (int i = 0; i < LEAD_ITERS; i++) {
        int root = (i / 64) % LN;
        if (scatter) { /* rank q's block: pat(i, q, .) */
            for (int q = 0; q < LN; q++)
                for (size_t j = 0; j < sizeof buf; j++)
                    sb[(size_t)q * sizeof buf + j] = rank == root ? pat(i, q, j) : 0;
            memset(buf, 0, sizeof buf);
            coh_call c = th_call(g, COH_COLL_SCATTER, COHORT_UINT8, -1, root, sizeof buf);
            RANK_PASS(coh_shm_scatter(g->shm, &c, sb, buf, sizeof buf, root), g);
        } else {
            for (size_t j = 0; j < sizeof buf; j++)
                buf[j] = rank == root ? pat(i, root, j) : 0;
            RANK_PASS(bc(g, buf, root, sizeof buf), g);
        }
        for (size_t j = 0; j < sizeof buf; j++)
            RANK_CHECK(buf[j] == pat(i, scatter ? rank : root, j), "call %d root %d byte %zu",
                       i, root, j);
        coh_call c = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
        RANK_PASS(coh_shm_barrier(g->shm, &c), g);
        /* iteration i's 4 tickets are all taken before i + 32 starts */
        if (atomic_fetch_add(&tk[i % 32], 1) % LN == 0) {
            atomic_fetch_add(firsts, 1);
            if (rank != root)
                atomic_fetch_add(strays, 1);
        }
    }
    coh_call c = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
    RANK_PASS(coh_shm_barrier(g->shm, &c), g);
    if (rank == 0) {
        int64_t f = atomic_load(firsts), x = atomic_load(strays);
        fprintf(stderr, "%s: barrier left first by a reader in %lld of %lld iterations\n",
                scatter ? "scatter" : "broadcast", (long long)x, (long long)f);
        RANK_CHECK(f == LEAD_ITERS, "%lld first tickets for %d iterations", (long long)f,
                   LEAD_ITERS);
        RANK_CHECK(x * 10 < f, "a reader left the barrier before the root in %lld of %lld "
                   "iterations", (long long)x, (long long)f);
    }
    RANK_PASS(coh_shm_transport.close_check(g->shm, 5000), g);
    th_group_free(g);
    th_done(LN);
    return 0;
}

START_TEST(barrier_lead)
{
    int scatter = _i;
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = LN, .deadline_ms = 120000};
    cht_result r;
    cht_run_ranks(&o, lead_rank, &scatter, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("shm_sleep");
    TCase *tc = tcase_create("sleep");
    tcase_add_test(tc, wake);
    tcase_add_loop_test(tc, fault_while_asleep, 0, F_N);
    tcase_add_test(tc, drain);
    tcase_add_loop_test(tc, barrier_lead, 0, 2);
    tcase_set_timeout(tc, 300);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
