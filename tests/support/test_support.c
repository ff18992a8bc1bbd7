/* test_support.c - the harness itself can fail: cht_spawn reports a
 * child's exit code, a crash as 128+signal, and a hang as a kill at the
 * deadline (within bounded time); cht_run_ranks gives each rank its
 * launch environment. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/support.h"

static int exit_rank(int rank, void *arg) { return rank == 1 ? 7 : 0; }

static int crash_rank(int rank, void *arg)
{
    if (rank == 2)
        raise(SIGABRT); /* not SEGV: the sanitizers catch that one */
    return 0;
}

static int hang_rank(int rank, void *arg)
{
    if (rank == 0)
        for (;;)
            pause();
    return 0;
}

static int stop_rank(int rank, void *arg)
{
    if (rank == 1)
        raise(SIGSTOP); /* resumed once the others are gone */
    return 0;
}

static int parent_says(void *arg) { return *(int *)arg; }
static int ok_rank(int rank, void *arg) { return 0; }

START_TEST(exit_code_is_reported)
{
    cht_result r;
    ck_assert_int_eq(cht_spawn(3, 10000, 0, exit_rank, NULL, NULL, &r), 1);
    ck_assert_int_eq(r.n, 3);
    ck_assert_int_eq(r.status[0], 0);
    ck_assert_int_eq(r.status[1], 7);
    ck_assert_int_eq(r.status[2], 0);
    ck_assert(!r.hung[0] && !r.hung[1] && !r.hung[2]);
}
END_TEST

START_TEST(crash_is_a_signal_status)
{
    cht_result r;
    ck_assert_int_eq(cht_spawn(3, 10000, 0, crash_rank, NULL, NULL, &r), 1);
    ck_assert_int_eq(r.status[2], 128 + SIGABRT);
    ck_assert_int_eq(r.status[0], 0);
}
END_TEST

START_TEST(hang_is_killed_at_the_deadline)
{
    cht_result r;
    ck_assert_int_eq(cht_spawn(2, 300, 0, hang_rank, NULL, NULL, &r), 1);
    ck_assert_int_eq(r.hung[0], 1);
    ck_assert_int_eq(r.status[0], 128 + SIGKILL);
    ck_assert_int_eq(r.hung[1], 0);
    ck_assert_int_eq(r.status[1], 0);
    ck_assert_msg(r.elapsed_ms >= 300 && r.elapsed_ms < 10000, "elapsed %.0f ms", r.elapsed_ms);
}
END_TEST

START_TEST(stopped_rank_is_resumed)
{
    cht_result r;
    ck_assert_int_eq(cht_spawn(3, 10000, 1, stop_rank, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status[1], 0);
}
END_TEST

START_TEST(parent_callback_and_all_ok)
{
    int v = 42;
    cht_result r;
    ck_assert_int_eq(cht_spawn(4, 10000, 0, ok_rank, parent_says, &v, &r), 0);
    ck_assert_int_eq(r.parent, 42);
    cht_assert_all_ok(&r);
}
END_TEST

static int env_rank(int rank, void *arg)
{
    const char *r = getenv("RANK"), *n = getenv("WORLD_SIZE"), *t = getenv("COHORT_TOKEN");
    if (!r || atoi(r) != rank || !n || atoi(n) != 3 || !t || strlen(t) != 32 ||
        !getenv("MASTER_PORT") || !getenv("COHORT_JOB_ID"))
        return 1;
    return 0;
}

START_TEST(run_ranks_sets_the_launch_environment)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 10000};
    cht_result r;
    ck_assert_int_eq(cht_run_ranks(&o, env_rank, NULL, &r), 0);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("support");
    TCase *tc = tcase_create("spawn");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, exit_code_is_reported);
    tcase_add_test(tc, crash_is_a_signal_status);
    tcase_add_test(tc, hang_is_killed_at_the_deadline);
    tcase_add_test(tc, stopped_rank_is_resumed);
    tcase_add_test(tc, parent_callback_and_all_ok);
    tcase_add_test(tc, run_ranks_sets_the_launch_environment);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
