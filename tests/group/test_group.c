/* test_group.c - group lifecycle on real processes: init/finalize, split and
 * new_group with interleaved collectives, async ordering, abort from another
 * thread, poisoning, peer loss, recovery under a new generation. Each case
 * runs on shm (auto) and on tcp (forced). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"

/* ---- init, collectives, finalize ---- */

static int rank_basic(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    RANK_CHECK(cohort_rank(g) == rank, "rank %d", cohort_rank(g));
    int64_t v[3] = {rank, 1, -rank}, out[3];
    RANK_PASS(cohort_all_reduce(g, v, out, 3, COHORT_INT64, COHORT_SUM), g);
    RANK_CHECK(out[0] == (int64_t)n * (n - 1) / 2 && out[1] == n, "sum %lld", (long long)out[0]);
    RANK_PASS(cohort_barrier(g), g);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(init_allreduce_finalize)
{
    int sizes[] = {1, 2, 3, 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cht_opts o = {.nranks = sizes[i], .deadline_ms = 30000,
                      .transport = cht_transports[_i], .store_mode = CHT_STORE_RANK0};
        cht_result r;
        cht_run_ranks(&o, rank_basic, NULL, &r);
        cht_assert_all_ok(&r);
    }
}
END_TEST

/* ---- split / new_group interleaved with world collectives ---- */

static int rank_split(int rank, void *arg)
{
    (void)arg;
    cohort_group *g, *sub = NULL, *odd = NULL;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    RANK_PASS(cohort_split(g, rank % 2, -rank, &sub), g); /* key reverses the order */
    RANK_CHECK(sub != NULL, "no sub-group");
    int members = (n + 1 - rank % 2) / 2;
    RANK_CHECK(cohort_size(sub) == members, "sub size %d want %d", cohort_size(sub), members);
    /* reversed order: the highest world rank of a color is sub-rank 0 */
    int32_t x = rank, y = 0, w = 0;
    for (int it = 0; it < 5; it++) {
        RANK_PASS(cohort_all_reduce(sub, &x, &y, 1, COHORT_INT32, COHORT_MAX), sub);
        int maxc = (n - 1) % 2 == rank % 2 ? n - 1 : n - 2;
        RANK_CHECK(y == maxc, "sub max %d want %d", y, maxc);
        RANK_PASS(cohort_all_reduce(g, &x, &w, 1, COHORT_INT32, COHORT_SUM), g);
        RANK_CHECK(w == n * (n - 1) / 2, "world sum %d", w);
    }
    int odds[8], k = 0;
    for (int r = 1; r < n; r += 2)
        odds[k++] = r;
    RANK_PASS(cohort_new_group(g, odds, k, &odd), g);
    RANK_CHECK((odd != NULL) == (rank % 2 == 1), "new_group membership");
    if (odd) {
        int32_t one = 1, cnt = 0;
        RANK_PASS(cohort_all_reduce(odd, &one, &cnt, 1, COHORT_INT32, COHORT_SUM), odd);
        RANK_CHECK(cnt == k, "odd count %d", cnt);
        RANK_CHECK(cohort_rank(odd) == rank / 2, "odd rank %d", cohort_rank(odd));
    }
    RANK_PASS(cohort_barrier(g), g);
    cohort_finalize(odd);
    cohort_finalize(sub);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(split_and_new_group)
{
    cht_opts o = {.nranks = 4, .deadline_ms = 60000, .transport = cht_transports[_i]};
    cht_result r;
    cht_run_ranks(&o, rank_split, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- async: issue order, buffers, test/wait ---- */

static int rank_async(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    enum { K = 6, N = 4096 };
    static float bufs[K][N];
    cohort_work *w[K];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++)
            bufs[k][i] = (float)(rank + k);
        RANK_PASS(cohort_all_reduce_async(g, bufs[k], bufs[k], N, COHORT_FLOAT32, COHORT_SUM,
                                          &w[k]),
                  g);
    }
    /* a blocking call issued behind async work runs after it */
    int32_t one = 1, cnt = 0;
    RANK_PASS(cohort_all_reduce(g, &one, &cnt, 1, COHORT_INT32, COHORT_SUM), g);
    RANK_CHECK(cnt == n, "blocking behind async: %d", cnt);
    for (int k = K - 1; k >= 0; k--) {
        int done = 0;
        RANK_PASS(cohort_work_test(w[k], &done), g);
        RANK_PASS(cohort_work_wait(w[k], -1), g);
        float want = (float)(n * (n - 1) / 2 + n * k);
        RANK_CHECK(bufs[k][0] == want && bufs[k][N - 1] == want, "async %d: %f want %f", k,
                   bufs[k][0], want);
        cohort_work_free(w[k]);
    }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(async_in_order)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .transport = cht_transports[_i]};
    cht_result r;
    cht_run_ranks(&o, rank_async, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- abort from another thread wakes a blocked call; group stays poisoned ---- */

static void *aborter(void *arg)
{
    cohort_group *g = arg;
    /* Timing only makes the abort likely to land while recv blocks; the
     * assertions hold either way (an abort before recv makes it fail at once). */
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cohort_abort(g, "test abort");
    return NULL;
}

static int rank_abort(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    if (rank == 0) {
        pthread_t th;
        pthread_create(&th, NULL, aborter, g);
        double t0 = cht_now_ms();
        int32_t x;
        cohort_status st = cohort_recv(g, &x, 1, COHORT_INT32, 1, 99); /* never sent */
        double dt = cht_now_ms() - t0;
        pthread_join(th, NULL);
        RANK_CHECK(st == COHORT_ERR_ABORTED, "recv returned %s: %s", cohort_status_name(st),
                   cohort_last_error(g));
        RANK_CHECK(dt < 2000, "abort took %.0f ms to wake recv", dt);
        RANK_CHECK(strstr(cohort_last_error(g), "test abort"), "%s", cohort_last_error(g));
    }
    /* Every rank: the abort reaches it through the store; later calls fail at once. */
    int32_t y = 0;
    cohort_status st;
    double t0 = cht_now_ms();
    do {
        st = cohort_all_reduce(g, &y, &y, 1, COHORT_INT32, COHORT_SUM);
    } while (st == COHORT_OK && cht_now_ms() - t0 < 5000);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "after abort: %s", cohort_status_name(st));
    st = cohort_barrier(g);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "poisoned: %s", cohort_status_name(st));
    RANK_CHECK(strstr(cohort_last_error(g), "test abort"), "cause lost: %s", cohort_last_error(g));
    cohort_finalize(g);
    return 0;
}

START_TEST(abort_from_thread_poisons)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 30000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_abort, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a rank that exits: survivors get PEER_LOST naming it within 2 s ---- */

static int rank_exit(int rank, void *arg)
{
    int how = *(int *)arg; /* 0: exit, 1: SIGKILL */
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float big[1 << 20];
    /* The victim dies right after this call: survivors may still be inside
     * it (a dying socket can drop data in flight), so PEER_LOST is a valid
     * outcome of this first call too. */
    cohort_status st0 = cohort_all_reduce(g, big, big, 1 << 20, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st0 == COHORT_OK || (rank != 2 && st0 == COHORT_ERR_PEER_LOST), "%s: %s",
               cohort_status_name(st0), cohort_last_error(g));
    if (rank == 2) {
        if (how)
            raise(SIGKILL);
        _exit(0);
    }
    double t0 = cht_now_ms();
    cohort_status st = st0;
    for (int i = 0; i < 1000 && st == COHORT_OK; i++)
        st = cohort_all_reduce(g, big, big, 1 << 20, COHORT_FLOAT32, COHORT_SUM);
    double dt = cht_now_ms() - t0;
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "got %s: %s", cohort_status_name(st),
               cohort_last_error(g));
    RANK_CHECK(strstr(cohort_last_error(g), "rank 2"), "does not name rank 2: %s",
               cohort_last_error(g));
    RANK_CHECK(dt < 2500, "took %.0f ms", dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(peer_exit_is_peer_lost)
{
    for (int how = 0; how < 2; how++) {
        cht_opts o = {.nranks = 4, .deadline_ms = 30000, .transport = cht_transports[_i],
                      .store_mode = CHT_STORE_PARENT};
        cht_result r;
        cht_run_ranks(&o, rank_exit, &how, &r);
        for (int i = 0; i < 4; i++)
            if (i != 2)
                ck_assert_msg(r.status[i] == 0 && !r.hung[i], "how=%d rank %d: status %d hung %d",
                              how, i, r.status[i], r.hung[i]);
    }
}
END_TEST

/* ---- recovery: survivors rebuild under a new generation; stale ones are refused ---- */

static int rank_recover(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    /* Every rank must have joined generation 1 before any rank moves on:
     * once generation 2 connects, the store refuses generation 1 - a slow
     * rank still joining it would (rightly) be refused as stale. A rank
     * that leaves the barrier early may abort before a slower one has
     * finished its side of it, so ABORTED is fine here. */
    cohort_status st1 = cohort_barrier(g);
    RANK_CHECK(st1 == COHORT_OK || st1 == COHORT_ERR_ABORTED || st1 == COHORT_ERR_PEER_LOST, "%s",
               cohort_status_name(st1));
    cohort_abort(g, "simulated failure");
    cohort_finalize(g);
    /* rebuild: generation 2 */
    setenv("COHORT_GENERATION", "2", 1);
    RANK_PASS(cohort_init(&g), NULL);
    RANK_CHECK(cohort_generation(g) == 2, "generation %u", cohort_generation(g));
    int32_t one = 1, n = 0;
    RANK_PASS(cohort_all_reduce(g, &one, &n, 1, COHORT_INT32, COHORT_SUM), g);
    RANK_CHECK(n == cohort_size(g), "sum %d", n);
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 0) {
        /* generation 1's keys are dropped from the job's keyspace (by rank
         * 0's monitor thread, in the background: bounded wait) */
        const char *addr = getenv("COHORT_STORE"); /* the parent-hosted store */
        RANK_CHECK(addr != NULL, "COHORT_STORE is not set");
        cohort_store *st0 = NULL;
        RANK_CHECK(cohort_store_connect(&st0, addr, getenv("COHORT_JOB_ID"),
                                        getenv("COHORT_TOKEN"), 5000) == COHORT_OK,
                   "store connect: %s", cohort_last_error(NULL));
        int left = -1, gen2 = 0;
        for (int tries = 0; tries < 500 && left != 0; tries++) {
            char **keys = NULL;
            size_t *kl = NULL;
            int n = 0;
            RANK_CHECK(cohort_store_list(st0, "gen", &keys, &kl, &n) == COHORT_OK, "list: %s",
                       cohort_store_last_error(st0));
            left = gen2 = 0;
            for (int i = 0; i < n; i++) {
                left += !strncmp(keys[i], "gen1/", 5);
                gen2 += !strncmp(keys[i], "gen2/", 5);
                free(keys[i]);
            }
            free(keys);
            free(kl);
            if (left) {
                struct timespec ts = {0, 10000000}; /* polling the background cleanup */
                nanosleep(&ts, NULL);
            }
        }
        RANK_CHECK(left == 0, "%d keys of generation 1 are still in the store", left);
        RANK_CHECK(gen2 > 0, "generation 2's own keys are gone too");
        cohort_store_close(st0);
        /* a stale process of generation 1 is refused by the store */
        setenv("COHORT_GENERATION", "1", 1);
        setenv("RANK", "1", 1);
        setenv("COHORT_TIMEOUT", "2", 1);
        cohort_group *stale = NULL;
        cohort_status st = cohort_init(&stale);
        RANK_CHECK(st == COHORT_ERR_AUTH, "stale generation got %s: %s", cohort_status_name(st),
                   cohort_last_error(NULL));
        RANK_CHECK(strstr(cohort_last_error(NULL), "generation"), "%s", cohort_last_error(NULL));
    }
    RANK_PASS(cohort_barrier(g), g);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(recover_new_generation)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .transport = cht_transports[_i],
                  .store_mode = CHT_STORE_PARENT};
    cht_result r;
    cht_run_ranks(&o, rank_recover, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("group");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 120);
    cht_add_per_transport(tc, init_allreduce_finalize);
    cht_add_per_transport(tc, split_and_new_group);
    cht_add_per_transport(tc, async_in_order);
    cht_add_per_transport(tc, abort_from_thread_poisons);
    cht_add_per_transport(tc, peer_exit_is_peer_lost);
    cht_add_per_transport(tc, recover_new_generation);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
