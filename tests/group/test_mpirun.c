/* test_mpirun.c - cohort programs started unchanged by Open MPI's mpirun:
 * cohort_init takes the rank and size from OMPI_COMM_WORLD_* when cohort's
 * own variables are absent (Slurm's names are covered in test_env.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int main(void)
{
    Suite *s = suite_create("mpirun");
    TCase *tc = tcase_create("mpirun");
    tcase_set_timeout(tc, 150);
    tcase_add_test(tc, hello_under_mpirun);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
