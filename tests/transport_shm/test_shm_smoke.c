#include "harness.h"
#include "support/support.h"
#include <string.h>
#include <stdio.h>

static int rank_fn(int rank, void *arg)
{
    int n = *(int *)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, n, 10000, &st);
    RANK_CHECK(g, "create %s", cohort_status_name(st));
    float in[4] = {rank, rank + 1, rank + 2, rank + 3}, out[4];
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 4);
    st = coh_shm_all_reduce(g->shm, &c, in, out, 4);
    RANK_CHECK(st == COHORT_OK, "%s %s", cohort_status_name(st), g->err.msg);
    float want = n * (n - 1) / 2.0f;
    RANK_CHECK(out[0] == want, "got %f want %f", out[0], want);
    th_group_free(g);
    return 0;
}

START_TEST(smoke)
{
    int n = 3;
    th_store_init();
    th_shared_init();
    cht_opts o = {.nranks = n, .deadline_ms = 20000};
    cht_result r;
    cht_run_ranks(&o, rank_fn, &n, &r);
    cht_assert_all_ok(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("shm_smoke");
    TCase *tc = tcase_create("smoke");
    tcase_add_test(tc, smoke);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int f = srunner_ntests_failed(sr);
    srunner_free(sr);
    return f ? 1 : 0;
}
