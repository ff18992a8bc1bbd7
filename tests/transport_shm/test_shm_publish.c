/*
 * test_shm_publish.c - the publish's two modes (docs/shm.md "Publishing"):
 * fence (a seq_cst store and load at every publish) and membarrier (a plain
 * store and load; the sleeper runs membarrier(GLOBAL_EXPEDITED) before its
 * re-check). Real processes, cohort_init groups:
 *   - wake stress: 2 ranks, and 4 ranks pinned to 2 cpus, ping-pong tens of
 *     thousands of small calls (all_reduce, a broadcast from a rotating
 *     root, a send/recv exchange between pairs: the arrive words, the ring
 *     records and the channels' bells) with COHORT_SHM_SPIN_US=0 and
 *     COHORT_SHM_YIELD_US=0, so that a wait not over at once sleeps on the
 *     futex; under each mode. A lost wake-up is not a hang (a sleep lasts
 *     one 50 ms slice at most) but shows as a sleep that lasted its whole
 *     slice although what it waited for had come (coh_shm late_wakes): the
 *     test wants none, and the calls within a generous time bound;
 *   - mixed capability: one rank with COHORT_SHM_PUBLISH=fence, the others
 *     forcing membarrier: every rank falls back to the fence, and
 *     cohort_describe says so and why;
 *   - the knob: an unknown value fails cohort_init naming it, and the
 *     transport's own parse (a group built without cohort_init) as well.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support/support.h"
#include "transport/shm/shm_seg.h"

#define SLEEP_ENV "COHORT_SHM_SPIN_US=0;COHORT_SHM_YIELD_US=0;COHORT_TIMEOUT=60"

/* Pins this rank to one of the first two cpus it may use (rank % 2): 4
 * ranks then share 2 cpus whatever the machine. */
static void pin_two_cpus(int rank)
{
    cpu_set_t s;
    RANK_CHECK(sched_getaffinity(0, sizeof s, &s) == 0, "sched_getaffinity");
    int c[2] = {-1, -1}, k = 0;
    for (int i = 0; i < CPU_SETSIZE && k < 2; i++)
        if (CPU_ISSET(i, &s))
            c[k++] = i;
    if (k < 2)
        c[1] = c[0];
    CPU_ZERO(&s);
    CPU_SET(c[rank % 2], &s);
    RANK_CHECK(sched_setaffinity(0, sizeof s, &s) == 0, "sched_setaffinity");
}

/* A rank late by 0-24 us at random, one call in two: its peers' waits are
 * then not over at once and sleep, whatever the machine's speed (under
 * ASan, or with membarrier's own cost, ranks otherwise meet so closely that
 * few waits sleep), and the publish lands at every distance from the
 * sleeper's count-and-recheck, the window a lost wake-up needs. */
static void jitter(uint64_t *rng)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    if (*rng & 1)
        return;
    uint64_t until = coh_now_ns() + (*rng >> 8) % 24000;
    while (coh_now_ns() < until)
        ;
}

typedef struct {
    int n;        /* ranks */
    int pin;      /* pinned to 2 cpus */
    int light;    /* COHORT_SHM_PUBLISH=membarrier (1) or fence (0) */
    int iters;
    int pp;       /* send/recv exchanges an iteration */
} stress_cfg;

static const stress_cfg cfgs[] = {
    {2, 0, 0, 40000, 1},
    {2, 0, 1, 40000, 1},
    {4, 1, 0, 10000, 4},
    {4, 1, 1, 10000, 4},
};

static int stress_rank(int rank, void *arg)
{
    const stress_cfg *c = arg;
    if (c->pin)
        pin_two_cpus(rank);
    setenv("COHORT_SHM_PUBLISH", c->light ? "membarrier" : "fence", 1);
    cohort_group *g = NULL;
    RANK_PASS(cohort_init(&g), NULL);
    coh_shm *s = g->shm;
    RANK_CHECK(s && s->n == c->n, "no segment of %d ranks", c->n);
    RANK_CHECK(s->light == c->light, "publish mode %d, want %d: %s", s->light, c->light,
               s->publish_info);
    RANK_CHECK(s->spin_ns == 0 && s->yield_ns == 0, "not sleeping at once");
    RANK_CHECK(!c->pin || s->oversub, "4 ranks on 2 cpus not oversubscribed");
    int peer = rank ^ 1;
    double limit_ms = (c->n == 2 ? 60000 : 120000) * cht_time_scale();
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    uint64_t t0 = coh_now_ns();
    for (int i = 0; i < c->iters; i++) {
        int32_t one = rank + 1, sum = 0;
        jitter(&rng);
        RANK_PASS(cohort_all_reduce(g, &one, &sum, 1, COHORT_INT32, COHORT_SUM), g);
        RANK_CHECK(sum == c->n * (c->n + 1) / 2, "all_reduce %d gave %d", i, sum);
        jitter(&rng);
        int root = i % c->n;
        uint64_t b = rank == root ? (uint64_t)i * 31 + (uint64_t)root : 0;
        RANK_PASS(cohort_broadcast(g, &b, 1, COHORT_UINT64, root), g);
        RANK_CHECK(b == (uint64_t)i * 31 + (uint64_t)root, "broadcast %d from %d", i, root);
        for (int k = 0; k < c->pp; k++) {
            uint64_t m = (uint64_t)i << 16 | (uint64_t)k << 8 | (uint64_t)rank, got = 0;
            jitter(&rng);
            if (rank % 2 == 0) {
                RANK_PASS(cohort_send(g, &m, 1, COHORT_UINT64, peer, k), g);
                RANK_PASS(cohort_recv(g, &got, 1, COHORT_UINT64, peer, k), g);
            } else {
                RANK_PASS(cohort_recv(g, &got, 1, COHORT_UINT64, peer, k), g);
                RANK_PASS(cohort_send(g, &m, 1, COHORT_UINT64, peer, k), g);
            }
            RANK_CHECK(got == ((uint64_t)i << 16 | (uint64_t)k << 8 | (uint64_t)peer),
                       "message %d/%d from %d", i, k, peer);
        }
        if ((i & 255) == 0) {
            double ms = (coh_now_ns() - t0) / 1e6;
            RANK_CHECK(ms < limit_ms, "%d of %d iterations took %.0f ms", i, c->iters, ms);
        }
    }
    double ms = (coh_now_ns() - t0) / 1e6;
    fprintf(stderr,
            "rank %d (%d ranks, %s): %d iterations in %.0f ms, %llu sleeps, %llu late wakes\n",
            rank, c->n, c->light ? "membarrier" : "fence", c->iters, ms,
            (unsigned long long)s->sleeps, (unsigned long long)s->late_wakes);
    /* with the jitter, about one sleep an iteration and rank (without it,
     * 0.35-0.9 quiet, and 0.02 under ASan in CI in membarrier mode) */
    RANK_CHECK(s->sleeps >= (uint64_t)c->iters / 4,
               "only %llu sleeps in %d iterations: not a stress",
               (unsigned long long)s->sleeps, c->iters);
    RANK_CHECK(s->late_wakes == 0,
               "%llu sleeps lasted their whole slice although what they waited for had come: "
               "lost wake-ups",
               (unsigned long long)s->late_wakes);
    RANK_CHECK(ms < limit_ms, "%d iterations took %.0f ms", c->iters, ms);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(wake_stress)
{
    const stress_cfg *c = &cfgs[_i];
    cht_opts o = {.nranks = c->n, .deadline_ms = 240000, .extra_env = SLEEP_ENV};
    cht_result r;
    cht_run_ranks(&o, stress_rank, (void *)c, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- one rank forced to the fence: every rank falls back ---- */

static int mixed_rank(int rank, void *arg)
{
    int fence_rank = *(const int *)arg;
    setenv("COHORT_SHM_PUBLISH", rank == fence_rank ? "fence" : "membarrier", 1);
    cohort_group *g = NULL;
    RANK_PASS(cohort_init(&g), NULL);
    coh_shm *s = g->shm;
    RANK_CHECK(s && s->light == 0, "rank %d publishes light although rank %d has the fence: %s",
               rank, fence_rank, s ? s->publish_info : "no segment");
    char d[2048];
    RANK_PASS(cohort_describe(g, "broadcast", 1, COHORT_UINT64, d, sizeof d), g);
    char want[96];
    snprintf(want, sizeof want, "publish: fence (seq_cst store and load at every publish: local "
             "rank %d (rank %d) has COHORT_SHM_PUBLISH=fence)", fence_rank, fence_rank);
    RANK_CHECK(strstr(d, want), "describe does not say why: %s", d);
    for (int i = 0; i < 200; i++) {
        uint64_t b = rank == i % 3 ? (uint64_t)i : 0;
        RANK_PASS(cohort_broadcast(g, &b, 1, COHORT_UINT64, i % 3), g);
        RANK_CHECK(b == (uint64_t)i, "broadcast %d", i);
    }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(mixed_falls_back)
{
    int fence_rank = _i; /* the lead, or a member */
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = SLEEP_ENV};
    cht_result r;
    cht_run_ranks(&o, mixed_rank, &fence_rank, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* Every rank registered (auto, not oversubscribed: 2 ranks on 2 cpus or
 * more): light, and describe says so. Where membarrier is unavailable
 * (seccomp, an old kernel) the fallback is the right answer: checked
 * against the kernel's own answer. */
static int auto_rank(int rank, void *arg)
{
    (void)arg;
    cohort_group *g = NULL;
    RANK_PASS(cohort_init(&g), NULL);
    coh_shm *s = g->shm;
    char why[128];
    int can = shm_membar_register(why, sizeof why);
    char d[2048];
    RANK_PASS(cohort_describe(g, "all_reduce", 1, COHORT_UINT64, d, sizeof d), g);
    if (can && !s->oversub) {
        RANK_CHECK(s->light == 1, "auto did not take membarrier: %s", s->publish_info);
        RANK_CHECK(strstr(d, "publish: membarrier ("), "describe: %s", d);
    } else {
        RANK_CHECK(s->light == 0, "light without membarrier (%s) or oversubscribed: %s", why,
                   s->publish_info);
        RANK_CHECK(strstr(d, "publish: fence ("), "describe: %s", d);
    }
    (void)rank;
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(auto_mode)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000};
    cht_result r;
    cht_run_ranks(&o, auto_rank, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- the knob's values ---- */

static int bad_env_rank(int rank, void *arg)
{
    int direct = *(const int *)arg;
    cohort_status st;
    const char *e;
    if (direct) {
        /* the transport's own parse: a group built without cohort_init */
        cohort_group *g = th_group(rank, 2, 5000, &st);
        RANK_CHECK(!g && st == COHORT_ERR_INVALID, "coh_shm_create: %s",
                   cohort_status_name(st));
        return 0; /* th_group printed the reason; the cohort_init case checks it */
    }
    cohort_group *g = NULL;
    st = cohort_init(&g);
    RANK_CHECK(st == COHORT_ERR_INVALID, "cohort_init: %s", cohort_status_name(st));
    e = cohort_last_error(NULL);
    RANK_CHECK(strstr(e, "COHORT_SHM_PUBLISH='fast': expected auto, fence or membarrier"),
               "the error does not name it: %s", e);
    return 0;
}

START_TEST(knob_invalid)
{
    int direct = _i;
    if (direct)
        ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.nranks = 2, .deadline_ms = 30000,
                  .store_mode = direct ? CHT_STORE_RANK0 : 0,
                  .extra_env = "COHORT_SHM_PUBLISH=fast;COHORT_TIMEOUT=5"};
    cht_result r;
    cht_run_ranks(&o, bad_env_rank, &direct, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_publish");
    TCase *tc = tcase_create("publish");
    tcase_set_timeout(tc, 280);
    tcase_add_loop_test(tc, wake_stress, 0, (int)(sizeof cfgs / sizeof cfgs[0]));
    tcase_add_loop_test(tc, mixed_falls_back, 0, 2);
    tcase_add_test(tc, auto_mode);
    tcase_add_loop_test(tc, knob_invalid, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
