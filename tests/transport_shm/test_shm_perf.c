/*
 * test_shm_perf.c - no collapse when ranks outnumber cores: 4 and 8 ranks
 * (on a 2-core machine) run a few thousand back-to-back 8-byte
 * all_reduces. A busy-polling implementation needs a scheduler time slice
 * (milliseconds) per call here; the spin-then-yield wait needs tens of
 * microseconds. The bounds are generous (the machine is shared) but an
 * order of magnitude below a collapse: mean < 1 ms per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "support/support.h"

#define ITERS 3000

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int rank_main(int rank, void *arg)
{
    int n = *(int *)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, n, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    uint64_t *lat = malloc(ITERS * sizeof *lat);
    RANK_CHECK(lat, "malloc");
    float a[2] = {1, 2}, b[2];
    uint64_t t0 = coh_now_ns(), prev = t0;
    for (int i = 0; i < ITERS; i++) {
        coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 2);
        RANK_PASS(coh_shm_all_reduce(g->shm, &c, a, b, 2), NULL);
        RANK_CHECK(b[0] == n && b[1] == 2 * n, "wrong sum %f", b[0]);
        uint64_t t = coh_now_ns();
        lat[i] = t - prev;
        prev = t;
    }
    double total_ms = (prev - t0) / 1e6;
    qsort(lat, ITERS, sizeof *lat, cmp_u64);
    double p50 = lat[ITERS / 2] / 1e3, p99 = lat[ITERS * 99 / 100] / 1e3;
    if (rank == 0)
        fprintf(stderr, "%d ranks: %d all_reduce(8 B) in %.1f ms: mean %.1f us, p50 %.1f us, "
                        "p99 %.1f us, max %.1f us\n",
                n, ITERS, total_ms, total_ms * 1e3 / ITERS, p50, p99, lat[ITERS - 1] / 1e3);
    RANK_CHECK(total_ms < ITERS * 1.0, "collapse: %.1f ms for %d calls", total_ms, ITERS);
    free(lat);
    th_group_free(g);
    th_done(n);
    return 0;
}

START_TEST(oversubscribed)
{
    static int sizes[] = {4, 8};
    int n = sizes[_i];
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = n, .deadline_ms = 60000};
    cht_result r;
    cht_run_ranks(&o, rank_main, &n, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("shm_perf");
    TCase *tc = tcase_create("oversubscribed");
    tcase_add_loop_test(tc, oversubscribed, 0, 2);
    tcase_set_timeout(tc, 90);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
