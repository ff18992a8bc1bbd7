/* test_concurrent.c - two threads issuing calls on one group at once
 * (forbidden by cohort.h) are caught: the second caller gets
 * COHORT_ERR_INVALID naming both call sites, the call in flight and every
 * peer fail promptly with the same cause, instead of wrong data or a
 * contract error blaming an innocent call (issue 13). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"

typedef struct {
    cohort_group *g;
    cohort_status st;
    char msg[1024];
    float buf[256];
} thread_a;

/* Thread A: an all_reduce that waits for rank 1 (which comes late). */
static void *run_a(void *arg)
{
    thread_a *a = arg;
    a->st = cohort_all_reduce_at("train_a.c", 111, a->g, a->buf, a->buf, 256, COHORT_FLOAT32,
                                 COHORT_SUM);
    snprintf(a->msg, sizeof a->msg, "%s", cohort_last_error(a->g));
    return NULL;
}

static int rank_two_threads(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    float x[256];
    for (int i = 0; i < 256; i++)
        x[i] = 1;
    RANK_PASS(cohort_all_reduce(g, x, x, 256, COHORT_FLOAT32, COHORT_SUM), g);
    if (rank == 0) {
        thread_a a = {.g = g};
        pthread_t t;
        RANK_CHECK(pthread_create(&t, NULL, run_a, &a) == 0, "pthread_create");
        usleep(300 * 1000); /* A is inside its call: rank 1 has not joined */
        double t0 = cht_now_ms();
        cohort_status st = cohort_barrier_at("train_b.c", 222, g);
        char bmsg[1024];
        snprintf(bmsg, sizeof bmsg, "%s", cohort_last_error(NULL));
        pthread_join(t, NULL);
        double dt = cht_now_ms() - t0;
        RANK_CHECK(st == COHORT_ERR_INVALID, "second thread got %s: %s", cohort_status_name(st),
                   bmsg);
        RANK_CHECK(strstr(bmsg, "train_b.c:222") && strstr(bmsg, "train_a.c:111") &&
                       strstr(bmsg, "another thread") && strstr(bmsg, "all_reduce") &&
                       strstr(bmsg, "barrier"),
                   "message: %s", bmsg);
        RANK_CHECK(a.st != COHORT_OK, "the call in flight returned OK");
        RANK_CHECK(strstr(a.msg, "train_b.c:222"), "in-flight call's message: %s", a.msg);
        RANK_CHECK(dt < 3000, "took %.0f ms", dt);
    } else {
        usleep(1000 * 1000);
        double t0 = cht_now_ms();
        cohort_status st = cohort_all_reduce_at("train_a.c", 111, g, x, x, 256, COHORT_FLOAT32,
                                                COHORT_SUM);
        double dt = cht_now_ms() - t0;
        RANK_CHECK(st != COHORT_OK, "peer's call returned OK");
        RANK_CHECK(strstr(cohort_last_error(g), "another thread"), "peer's message: %s",
                   cohort_last_error(g));
        RANK_CHECK(dt < 3000, "peer took %.0f ms", dt);
    }
    cohort_finalize(g);
    return 0;
}

START_TEST(two_threads_on_one_group)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=30"};
    cht_result r;
    cht_run_ranks(&o, rank_two_threads, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* The supported pattern is not refused: one thread issuing async calls
 * while another waits on their handles (cohort_work_wait is any-thread). */
typedef struct {
    cohort_work *w[8];
    cohort_status st[8];
} waiter;

static void *run_waiter(void *arg)
{
    waiter *w = arg;
    for (int i = 0; i < 8; i++)
        w->st[i] = cohort_work_wait(w->w[i], -1);
    return NULL;
}

static int rank_async_waiter(int rank, void *arg)
{
    (void)arg;
    (void)rank;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    float x[8][64];
    waiter w;
    for (int i = 0; i < 8; i++) {
        for (int j = 0; j < 64; j++)
            x[i][j] = (float)i;
        RANK_PASS(cohort_all_reduce_async(g, x[i], x[i], 64, COHORT_FLOAT32, COHORT_SUM, &w.w[i]),
                  g);
    }
    pthread_t t;
    RANK_CHECK(pthread_create(&t, NULL, run_waiter, &w) == 0, "pthread_create");
    RANK_PASS(cohort_barrier(g), g); /* issuing thread keeps issuing */
    pthread_join(t, NULL);
    int n = cohort_size(g);
    for (int i = 0; i < 8; i++) {
        RANK_CHECK(w.st[i] == COHORT_OK, "work %d: %s", i, cohort_status_name(w.st[i]));
        RANK_CHECK(x[i][5] == (float)(i * n), "work %d: %f", i, (double)x[i][5]);
        cohort_work_free(w.w[i]);
    }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(async_wait_from_other_thread_is_fine)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=30"};
    cht_result r;
    cht_run_ranks(&o, rank_async_waiter, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("concurrent");
    TCase *tc = tcase_create("concurrent");
    tcase_set_timeout(tc, 90);
    cht_add_per_transport(tc, two_threads_on_one_group);
    cht_add_per_transport(tc, async_wait_from_other_thread_is_fine);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
