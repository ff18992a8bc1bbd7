/* test_env.c - init settings from the environment: every missing or bad
 * variable is named in the error. */
#include <stdlib.h>
#include <string.h>

#include "group/group_internal.h"
#include "support/support.h"

static void clear_env(void)
{
    const char *vars[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                          "COHORT_STORE", "COHORT_TOKEN", "COHORT_JOB_ID", "COHORT_TIMEOUT",
                          "COHORT_TRANSPORT", "COHORT_GENERATION", "SLURM_PROCID",
                          "SLURM_NTASKS", "SLURM_JOB_ID", "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK",
                          "OMPI_COMM_WORLD_SIZE", "COHORT_DEBUG", "COHORT_STALL_WARN", "SLURM_STEP_ID", NULL};
    for (int i = 0; vars[i]; i++)
        unsetenv(vars[i]);
}

static cohort_status init_err(char *msg, size_t len)
{
    cohort_group *g = (cohort_group *)1;
    cohort_status st = cohort_init(&g);
    ck_assert_ptr_null(g);
    snprintf(msg, len, "%s", cohort_last_error(NULL));
    return st;
}

START_TEST(missing_rank_named)
{
    clear_env();
    /* (no variable at all is a lone start: a world of one, test_launch_env) */
    setenv("WORLD_SIZE", "2", 1);
    char m[1024];
    ck_assert_int_eq(init_err(m, sizeof m), COHORT_ERR_INVALID);
    ck_assert_msg(strstr(m, "RANK is not set"), "%s", m);
}
END_TEST

START_TEST(bad_values_named)
{
    struct {
        const char *k, *v, *want;
    } cases[] = {
        {"WORLD_SIZE", "four", "WORLD_SIZE='four' is not an integer"},
        {"RANK", "7", "out of range"},
        {"COHORT_TIMEOUT", "-3", "COHORT_TIMEOUT='-3'"},
        {"COHORT_TRANSPORT", "rdma", "COHORT_TRANSPORT='rdma'"},
        {"COHORT_GENERATION", "0", "COHORT_GENERATION='0'"},
        {"MASTER_PORT", "99999", "MASTER_PORT is out of range"},
        {"COHORT_TOKEN", "", "COHORT_TOKEN is not set"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clear_env();
        setenv("RANK", "1", 1);
        setenv("WORLD_SIZE", "4", 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", "29500", 1);
        setenv("COHORT_TOKEN", "secret", 1);
        setenv(cases[i].k, cases[i].v, 1);
        char m[1024];
        ck_assert_int_eq(init_err(m, sizeof m), COHORT_ERR_INVALID);
        ck_assert_msg(strstr(m, cases[i].want), "case %s=%s: got '%s'", cases[i].k, cases[i].v, m);
    }
}
END_TEST

START_TEST(slurm_and_ompi_names)
{
    coh_settings s;
    clear_env();
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "8", 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    setenv("SLURM_STEP_ID", "0", 1); /* inside an srun step */
    setenv("MASTER_ADDR", "node1", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 3);
    ck_assert_int_eq(s.size, 8);
    ck_assert_str_eq(s.job_id, "4242");
    ck_assert_int_eq(s.store_port, 20000 + 4242);
    clear_env();
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("COHORT_STORE", "tcp://10.0.0.1:4000", 1);
    setenv("COHORT_TOKEN", "t", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 1);
    ck_assert_int_eq(s.size, 2);
    ck_assert_int_eq(s.host_store, 0);
    ck_assert_str_eq(s.store_addr, "tcp://10.0.0.1:4000");
    /* torchrun names win over launcher names */
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "2", 1);
    ck_assert_int_eq(coh_settings_resolve(NULL, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 0);
}
END_TEST

START_TEST(options_override_env)
{
    clear_env();
    cohort_options o;
    cohort_options_init(&o);
    o.rank = 2;
    o.world_size = 3;
    o.store_url = "127.0.0.1:1";
    o.token = "tok";
    o.timeout_ms = 1500;
    o.transport = "tcp";
    coh_settings s;
    ck_assert_int_eq(coh_settings_resolve(&o, &s), COHORT_OK);
    ck_assert_int_eq(s.rank, 2);
    ck_assert_int_eq(s.timeout_ms, 1500);
    ck_assert_int_eq(s.force_transport, 2);
}
END_TEST

START_TEST(store_unreachable_times_out_with_address)
{
    clear_env();
    setenv("RANK", "1", 1);
    setenv("WORLD_SIZE", "2", 1);
    setenv("COHORT_TOKEN", "t", 1);
    setenv("COHORT_TIMEOUT", "0.5", 1);
    char url[64];
    snprintf(url, sizeof url, "127.0.0.1:%d", cht_free_port());
    setenv("COHORT_STORE", url, 1);
    char m[1024];
    cohort_status st = init_err(m, sizeof m);
    ck_assert_msg(st == COHORT_ERR_STORE || st == COHORT_ERR_TIMEOUT, "%s: %s",
                  cohort_status_name(st), m);
    ck_assert_msg(strstr(m, url), "message does not name the store address: %s", m);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("group_env");
    TCase *tc = tcase_create("env");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, missing_rank_named);
    tcase_add_test(tc, bad_values_named);
    tcase_add_test(tc, slurm_and_ompi_names);
    tcase_add_test(tc, options_override_env);
    tcase_add_test(tc, store_unreachable_times_out_with_address);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int nf = srunner_ntests_failed(sr);
    srunner_free(sr);
    return nf ? 1 : 0;
}
