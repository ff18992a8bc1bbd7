/*
 * test_bind.c - the launchers' binding decision (tools/common/bind.c) as a
 * unit: which cpu each local rank gets for a given affinity and topology,
 * and that ranks outnumbering the cores are left unbound by default. The
 * end-to-end side (real launches, each rank's own affinity) is in
 * test_tools_perf.c (test_binding).
 */
#include <sched.h>
#include <stdlib.h>

#include "bind.h"
#include "support/support.h"

/* 8 cpus, 4 cores with 2 threads each, Linux's usual numbering: cpu c and
 * c + 4 are siblings. */
static int smt_first(int cpu)
{
    return cpu % 4;
}

static cpu_set_t cpus(int lo, int hi)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c = lo; c <= hi; c++)
        CPU_SET(c, &s);
    return s;
}

START_TEST(test_parse)
{
    ck_assert_int_eq(cli_bind_parse("auto"), CLI_BIND_AUTO);
    ck_assert_int_eq(cli_bind_parse("core"), CLI_BIND_CORE);
    ck_assert_int_eq(cli_bind_parse("none"), CLI_BIND_NONE);
    ck_assert_int_eq(cli_bind_parse("Core"), -1);
    ck_assert_int_eq(cli_bind_parse(""), -1);
    ck_assert_int_eq(cli_bind_parse(NULL), -1);
    ck_assert_str_eq(cli_bind_name(CLI_BIND_NONE), "none");
    ck_assert_str_eq(cli_bind_name(CLI_BIND_AUTO), "auto");
    unsetenv("COHORT_BIND");
    ck_assert_int_eq(cli_bind_from_env("t"), CLI_BIND_NONE); /* the default */
    setenv("COHORT_BIND", "", 1);
    ck_assert_int_eq(cli_bind_from_env("t"), CLI_BIND_NONE);
    setenv("COHORT_BIND", "auto", 1);
    ck_assert_int_eq(cli_bind_from_env("t"), CLI_BIND_AUTO);
    setenv("COHORT_BIND", "socket", 1);
    ck_assert_int_eq(cli_bind_from_env("t"), -1);
    unsetenv("COHORT_BIND");
}
END_TEST

/* 2 cpus, no SMT (this project's machine): 2 ranks get one each. */
START_TEST(test_two_ranks_two_cores)
{
    cpu_set_t a = cpus(0, 1);
    int order[CPU_SETSIZE], ncores;
    int n = cli_bind_order(&a, NULL, order, &ncores);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(ncores, 2);
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, 0, 2, order, n, ncores), 0);
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, 1, 2, order, n, ncores), 1);
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_NONE, 1, 2, order, n, ncores), -1);
    /* one rank fits too */
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, 0, 1, order, n, ncores), 0);
}
END_TEST

/* Ranks outnumbering the cores: auto leaves every rank unbound (so that
 * the scheduler can move a rank to whichever core frees up); core binds
 * round-robin because it was asked for. */
START_TEST(test_oversubscribed_not_bound)
{
    cpu_set_t a = cpus(0, 1);
    int order[CPU_SETSIZE], ncores;
    int n = cli_bind_order(&a, NULL, order, &ncores);
    for (int size = 3; size <= 16; size++)
        for (int r = 0; r < size; r++) {
            ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, r, size, order, n, ncores), -1);
            ck_assert_int_eq(cli_bind_cpu(CLI_BIND_CORE, r, size, order, n, ncores), r % 2);
        }
}
END_TEST

/* SMT: distinct cores first; the ranks "fit" only up to the core count. */
START_TEST(test_smt_cores_first)
{
    cpu_set_t a = cpus(0, 7);
    int order[CPU_SETSIZE], ncores;
    int n = cli_bind_order(&a, smt_first, order, &ncores);
    ck_assert_int_eq(n, 8);
    ck_assert_int_eq(ncores, 4);
    static const int want[] = {0, 1, 2, 3, 4, 5, 6, 7};
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(order[i], want[i]);
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, r, 4, order, n, ncores), r);
    /* 5 ranks on 4 cores (8 threads): oversubscribed cores, not bound */
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, 0, 5, order, n, ncores), -1);
}
END_TEST

/* A launcher restricted to some cpus (taskset, a cgroup, a batch system)
 * hands out only those, and counts only their cores. */
START_TEST(test_restricted_affinity)
{
    cpu_set_t a;
    CPU_ZERO(&a);
    CPU_SET(2, &a);
    CPU_SET(6, &a); /* siblings: one core */
    CPU_SET(3, &a);
    int order[CPU_SETSIZE], ncores;
    int n = cli_bind_order(&a, smt_first, order, &ncores);
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(ncores, 2);
    ck_assert_int_eq(order[0], 2);
    ck_assert_int_eq(order[1], 3);
    ck_assert_int_eq(order[2], 6);
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, 1, 2, order, n, ncores), 3);
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_AUTO, 0, 3, order, n, ncores), -1);
    ck_assert_int_eq(cli_bind_cpu(CLI_BIND_CORE, 2, 3, order, n, ncores), 6);
}
END_TEST

/* This machine's own answer agrees with its affinity: bound ranks get
 * distinct allowed cpus, an oversubscribed job none. */
START_TEST(test_choose_here)
{
    cpu_set_t a;
    ck_assert_int_eq(sched_getaffinity(0, sizeof a, &a), 0);
    int ncpu = CPU_COUNT(&a);
    ck_assert_int_eq(cli_bind_choose(CLI_BIND_AUTO, 0, CPU_SETSIZE + 1), -1);
    ck_assert_int_eq(cli_bind_choose(CLI_BIND_AUTO, 0, ncpu + 1), -1);
    ck_assert_int_eq(cli_bind_choose(CLI_BIND_NONE, 0, 1), -1);
    int c0 = cli_bind_choose(CLI_BIND_AUTO, 0, 1);
    ck_assert(c0 >= 0 && CPU_ISSET(c0, &a));
    if (ncpu >= 2) {
        int c1 = cli_bind_choose(CLI_BIND_CORE, 1, 2);
        ck_assert(c1 >= 0 && c1 != c0 && CPU_ISSET(c1, &a));
    }
    char d[64];
    cli_bind_describe(d, sizeof d);
    ck_assert(d[0] >= '0' && d[0] <= '9');
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bind");
    TCase *tc = tcase_create("decision");
    tcase_add_test(tc, test_parse);
    tcase_add_test(tc, test_two_ranks_two_cores);
    tcase_add_test(tc, test_oversubscribed_not_bound);
    tcase_add_test(tc, test_smt_cores_first);
    tcase_add_test(tc, test_restricted_affinity);
    tcase_add_test(tc, test_choose_here);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
