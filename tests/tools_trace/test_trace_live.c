/*
 * test_trace_live.c - the flight recorder and cohort-trace on real groups:
 * forked ranks run collectives, a count mismatch makes every rank dump
 * (from coh_group_fail, then on request), SIGUSR1 makes a healthy group
 * dump through its monitor thread, and cohort-trace reads the real dumps.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"

static char dir[64];

static void rm_dir(const char *d)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf %s", d);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", d);
}

/* Runs cohort-trace on dir; returns its exit code, stdout into out. */
static int run_tool(const char *d, char *out, size_t len)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", cht_tool("cohort-trace"), d);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int rank_mismatch(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[1024], out[1024];
    for (int i = 0; i < 3; i++)
        RANK_PASS(cohort_all_reduce(g, f, out, 64, COHORT_FLOAT32, COHORT_SUM), g);
    RANK_PASS(cohort_barrier(g), g);
    cohort_status st = cohort_all_reduce(g, f, out, rank == 3 ? 512 : 1024, COHORT_FLOAT32,
                                         COHORT_SUM);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "%s: %s", cohort_status_name(st), cohort_last_error(g));
    /* After the report: the dump holds the failed call and the global
     * message as its reason. */
    RANK_PASS(cohort_trace_dump(g, NULL), g);
    cohort_finalize(g);
    return 0;
}

START_TEST(dumps_from_a_mismatch)
{
    snprintf(dir, sizeof dir, "/tmp/ct-liveXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char env[160];
    snprintf(env, sizeof env, "COHORT_TRACE_DIR=%s;COHORT_TIMEOUT=20", dir);
    cht_opts o = {.nranks = 4, .deadline_ms = 60000, .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, rank_mismatch, NULL, &r);
    cht_assert_all_ok(&r);
    static char out[1 << 16];
    int rc = run_tool(dir, out, sizeof out);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "4 ranks, 4 dumps"), "%s", out);
    ck_assert_msg(strstr(out, "first divergence: all_reduce #5 (test_trace_live.c:"), "%s", out);
    ck_assert_msg(strstr(out, "count differs: ranks 0-2 have 1024, rank 3 has 512 - look at rank "
                              "3's call at test_trace_live.c:"),
                  "%s", out);
    ck_assert_msg(strstr(out, "dump reason: cohort_trace_dump"), "%s", out);
    ck_assert_msg(strstr(out, "last completed barrier #4 (test_trace_live.c:"), "%s", out);
    ck_assert_msg(strstr(out, "with COHORT_ERR_CONTRACT"), "%s", out);
    fputs(out, stdout); /* for the record (ctest -V) */
    rm_dir(dir);
}
END_TEST

/* Waits (bounded) until path exists; returns 1 if it does. */
static int wait_file(const char *path, double ms)
{
    double t0 = cht_now_ms();
    struct stat sb;
    while (stat(path, &sb) != 0) {
        if (cht_now_ms() - t0 > ms)
            return 0;
        struct timespec ts = {0, 20 * 1000 * 1000}; /* polling a file, not synchronising */
        nanosleep(&ts, NULL);
    }
    return 1;
}

static int rank_sigusr1(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[64], out[64];
    for (int i = 0; i < 5; i++)
        RANK_PASS(cohort_all_reduce(g, f, out, 64, COHORT_FLOAT32, COHORT_SUM), g);
    RANK_PASS(cohort_barrier(g), g);
    char path[256];
    snprintf(path, sizeof path, "%s/%s-rank%d.jsonl", getenv("COHORT_TRACE_DIR"),
             getenv("COHORT_JOB_ID"), rank);
    RANK_CHECK(access(path, F_OK) != 0, "dumped before the signal");
    raise(SIGUSR1); /* the monitor thread dumps, the call path is untouched */
    RANK_CHECK(wait_file(path, 10000), "no dump at %s 10 s after SIGUSR1", path);
    RANK_PASS(cohort_barrier(g), g);
    cohort_finalize(g);
    return 0;
}

START_TEST(dump_on_sigusr1)
{
    snprintf(dir, sizeof dir, "/tmp/ct-sigXXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char env[160];
    snprintf(env, sizeof env, "COHORT_TRACE_DIR=%s;COHORT_TIMEOUT=20", dir);
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, rank_sigusr1, NULL, &r);
    cht_assert_all_ok(&r);
    static char out[1 << 16];
    int rc = run_tool(dir, out, sizeof out);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "dump reason: SIGUSR1"), "%s", out);
    ck_assert_msg(strstr(out, "contracts: no divergence in calls #1-#6"), "%s", out);
    ck_assert_msg(strstr(out, "result: consistent"), "%s", out);
    rm_dir(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("trace_live");
    TCase *t = tcase_create("live");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, dumps_from_a_mismatch);
    tcase_add_test(t, dump_on_sigusr1);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
