/* test_mpirun.c - cohort programs started unchanged by Open MPI's mpirun:
 * cohort_init takes the rank and size from OMPI_COMM_WORLD_* when cohort's
 * own variables are absent (Slurm's names are covered in test_env.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/support.h"

START_TEST(hello_under_mpirun)
{
    const char *b = getenv("COHORT_BUILD_DIR");
    ck_assert_ptr_nonnull(b);
    char cmd[2048];
    int port = cht_free_port();
    /* Only the store location and the secret come from outside, as a user
     * would export them; RANK/WORLD_SIZE are deliberately absent. */
    snprintf(cmd, sizeof cmd,
             "env -u RANK -u WORLD_SIZE -u COHORT_STORE MASTER_ADDR=127.0.0.1 MASTER_PORT=%d "
             "COHORT_TOKEN=mpirun-test-secret COHORT_TIMEOUT=30 "
             "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 3 "
             "-x MASTER_ADDR -x MASTER_PORT -x COHORT_TOKEN -x COHORT_TIMEOUT "
             "%s/bench/startup/hello_cohort 2>&1",
             port, b);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    char out[8192] = "";
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int rc = pclose(p);
    ck_assert_msg(rc == 0, "mpirun exited %d; output:\n%s", rc, out);
}
END_TEST

/* Runs cmd through sh, returns its exit status with the output in out. */
static int run_cmd(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = 0;
    return pclose(p);
}

#define CLEAN_ENV                                                                                  \
    "env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u LOCAL_WORLD_SIZE -u COHORT_STORE "               \
    "-u MASTER_ADDR -u MASTER_PORT -u COHORT_TOKEN -u COHORT_JOB_ID "

/* Nothing exported by hand: mpirun on one node gives loopback, a port from
 * its job id, and (COHORT_PMI=off: the launcher's PMI not used, as in an MPI
 * program) the token travels through a private 0600 file. */
START_TEST(mpirun_with_nothing_exported)
{
    const char *b = getenv("COHORT_BUILD_DIR");
    ck_assert_ptr_nonnull(b);
    char dir[128], cmd[2048], out[8192];
    snprintf(dir, sizeof dir, "/tmp/cohort-mpirun-tok-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "COHORT_PMI=off COHORT_TOKEN_DIR=%s COHORT_TIMEOUT=30 timeout 120 mpirun "
                       "--allow-run-as-root --oversubscribe -np 3 -x COHORT_PMI -x COHORT_TOKEN_DIR "
                       "-x COHORT_TIMEOUT %s/bench/startup/hello_cohort 2>&1",
             dir, b);
    int rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "mpirun exited %d; output:\n%s", rc, out);
    /* the secret is gone from the filesystem after init */
    snprintf(cmd, sizeof cmd, "rmdir %s", dir);
    ck_assert_msg(system(cmd) == 0, "token file left in %s", dir);
}
END_TEST

/* The token through the launcher's PMI (src/group/pmi.c): no file, so an
 * unusable COHORT_TOKEN_DIR does not matter; with COHORT_PMI=off the file
 * path is taken again and fails on it, naming the directory. */
START_TEST(token_through_launcher_pmi)
{
    const char *b = getenv("COHORT_BUILD_DIR");
    ck_assert_ptr_nonnull(b);
    char cmd[2048], out[8192];
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "COHORT_TOKEN_DIR=/proc/no-such-dir COHORT_TIMEOUT=30 timeout 120 mpirun "
                       "--allow-run-as-root --oversubscribe -np 3 -x COHORT_TOKEN_DIR "
                       "-x COHORT_TIMEOUT %s/bench/startup/hello_cohort 2>&1",
             b);
    int rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "mpirun (token through PMIx) exited %d; output:\n%s", rc, out);
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "COHORT_PMI=off COHORT_TOKEN_DIR=/proc/no-such-dir COHORT_TIMEOUT=30 "
                       "timeout 120 mpirun --allow-run-as-root --oversubscribe -np 2 -x COHORT_PMI "
                       "-x COHORT_TOKEN_DIR -x COHORT_TIMEOUT %s/bench/startup/hello_cohort 2>&1",
             b);
    rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc != 0 && strstr(out, "token directory /proc/no-such-dir"),
                  "mpirun with COHORT_PMI=off exited %d; output:\n%s", rc, out);
    if (system("command -v mpiexec.mpich >/dev/null") != 0)
        return;
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "COHORT_TOKEN_DIR=/proc/no-such-dir COHORT_TIMEOUT=30 timeout 120 "
                       "mpiexec.mpich -np 3 %s/bench/startup/hello_cohort 2>&1",
             b);
    rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "mpiexec.mpich (token through PMI-1) exited %d; output:\n%s", rc, out);
}
END_TEST

/* MPICH's mpiexec on one node: loopback and a port from the local proxy;
 * the token either exported or shared through the private token file keyed
 * by the local Hydra proxy (no job id from Hydra). */
START_TEST(mpich_without_master)
{
    const char *b = getenv("COHORT_BUILD_DIR");
    ck_assert_ptr_nonnull(b);
    if (system("command -v mpiexec.mpich >/dev/null") != 0) {
        fprintf(stderr, "mpiexec.mpich not installed: skipped\n");
        return;
    }
    char cmd[2048], out[8192], dir[128];
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "COHORT_TOKEN=mpich-secret COHORT_TIMEOUT=30 timeout 120 mpiexec.mpich "
                       "-np 3 %s/bench/startup/hello_cohort 2>&1",
             b);
    int rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "mpiexec.mpich exited %d; output:\n%s", rc, out);
    /* nothing exported: the secret travels through a 0600 file, removed
     * after init */
    snprintf(dir, sizeof dir, "/tmp/cohort-mpich-tok-%d", (int)getpid());
    mkdir(dir, 0700);
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "COHORT_PMI=off COHORT_TOKEN_DIR=%s COHORT_TIMEOUT=30 timeout 120 "
                       "mpiexec.mpich -np 2 %s/bench/startup/hello_cohort 2>&1",
             dir, b);
    rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "mpiexec.mpich without COHORT_TOKEN exited %d:\n%s", rc, out);
    snprintf(cmd, sizeof cmd, "rmdir %s", dir);
    ck_assert_msg(system(cmd) == 0, "token file left in %s", dir);
}
END_TEST

/* A program started alone runs as a world of one (MPI's singleton init). */
START_TEST(lone_start)
{
    const char *b = getenv("COHORT_BUILD_DIR");
    ck_assert_ptr_nonnull(b);
    char cmd[2048], out[4096];
    snprintf(cmd, sizeof cmd,
             CLEAN_ENV "-u OMPI_COMM_WORLD_RANK -u PMI_RANK -u SLURM_STEP_ID timeout 60 "
                       "%s/bench/startup/hello_cohort 2>&1",
             b);
    int rc = run_cmd(cmd, out, sizeof out);
    ck_assert_msg(rc == 0, "a lone hello_cohort exited %d:\n%s", rc, out);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("mpirun");
    TCase *tc = tcase_create("mpirun");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, hello_under_mpirun);
    tcase_add_test(tc, mpirun_with_nothing_exported);
    tcase_add_test(tc, mpich_without_master);
    tcase_add_test(tc, token_through_launcher_pmi);
    tcase_add_test(tc, lone_start);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
