/* test_etcd_group.c - a group rendezvousing through a real etcd, and the
 * second liveness signal: a rank frozen with SIGSTOP keeps its sockets and
 * its process alive, so only its expired etcd lease tells the others. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_etcd/etcd_harness.h"
#include "support/support.h"

static int rank_frozen(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int32_t x = 1, y = 0;
    RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM), g);
    RANK_CHECK(y == cohort_size(g), "sum %d", y);
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 2) {
        raise(SIGSTOP); /* resumed by the test once the others are done */
        cohort_finalize(g);
        return 0;
    }
    double t0 = cht_now_ms();
    cohort_status st = cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM);
    double dt = cht_now_ms() - t0;
    fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cohort_status_name(st), dt,
            cohort_last_error(g));
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "got %s: %s", cohort_status_name(st),
               cohort_last_error(g));
    RANK_CHECK(strstr(cohort_last_error(g), "rank 2") && strstr(cohort_last_error(g), "lease"),
               "%s", cohort_last_error(g));
    /* TTL 1 s + keep-alive slack + one probe interval; far below the 20 s timeout */
    RANK_CHECK(dt < 6000, "lease expiry noticed after %.0f ms (bound 6 s)", dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(frozen_rank_seen_through_lease)
{
    eh_cluster c;
    ck_assert_int_eq(eh_start(&c, 1, 30000), 0);
    char env[1024];
    snprintf(env, sizeof env,
             "COHORT_STORE=etcd://%s/cohort-test;COHORT_ETCD_LEASE_TTL=1;COHORT_TIMEOUT=20;"
             "COHORT_STALL_WARN=15;COHORT_TRANSPORT=%s",
             c.hosts, _i ? "tcp" : "auto");
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = env, .resume_stopped = 1};
    cht_result r;
    cht_run_ranks(&o, rank_frozen, NULL, &r);
    eh_stop(&c);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("etcd_group");
    TCase *tc = tcase_create("lease");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, frozen_rank_seen_through_lease, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
