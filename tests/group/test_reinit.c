/*
 * test_reinit.c - a process that makes the job's world more than once
 * (cohort_init, cohort_finalize, cohort_init again: two `with cohort.init()`
 * blocks in one script), with real ranks:
 *   - on a store that outlives the worlds (the test's, as cohortrun's or
 *     torchrun's): before session 38 the second cohort_init found its own
 *     old join/<r> and failed "joined group 0 twice (two processes with the
 *     same RANK?)"; now the n-th world of the job is group 2n;
 *   - on the store rank 0 hosts (MASTER_ADDR:MASTER_PORT), which stops with
 *     each world: the others wait for rank 0's new store instead of losing
 *     the old one mid-rendezvous;
 *   - two worlds alive at once, and a sub-group of a re-made world (odd
 *     ids, never a world's).
 * Each world runs checked collectives; every rank must pass.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cohort.h"
#include "support/support.h"

static void use(cohort_group *g, int rank, int round)
{
    int n = cohort_size(g);
    int32_t x = rank + round, y = -1;
    RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM), g);
    RANK_CHECK(y == n * (n - 1) / 2 + n * round, "world %d: sum %d", round, y);
    cohort_group *sub = NULL;
    RANK_PASS(cohort_split(g, rank % 2, rank, &sub), g);
    int32_t z = 1, w = 0;
    RANK_PASS(cohort_all_reduce(sub, &z, &w, 1, COHORT_INT32, COHORT_SUM), sub);
    RANK_CHECK(w == cohort_size(sub), "world %d: sub-group sum %d", round, w);
    RANK_PASS(cohort_finalize(sub), NULL);
}

static int rank_again(int rank, void *arg)
{
    (void)arg;
    for (int round = 0; round < 3; round++) {
        cohort_group *g = NULL;
        cohort_status st = cohort_init(&g);
        RANK_CHECK(st == COHORT_OK, "rank %d: world %d: %s: %s", rank, round,
                   cohort_status_name(st), cohort_last_error(NULL));
        use(g, rank, round);
        RANK_PASS(cohort_finalize(g), NULL);
    }
    return 0;
}

static int rank_two_alive(int rank, void *arg)
{
    (void)arg;
    cohort_group *a = NULL, *b = NULL;
    RANK_PASS(cohort_init(&a), NULL);
    RANK_PASS(cohort_init(&b), NULL);
    use(b, rank, 1);
    use(a, rank, 0);
    RANK_PASS(cohort_finalize(a), NULL);
    use(b, rank, 2);
    RANK_PASS(cohort_finalize(b), NULL);
    return 0;
}

static const struct {
    int store_mode;
    const char *transport;
    int (*fn)(int, void *);
} cases[] = {
    {CHT_STORE_PARENT, NULL, rank_again},  {CHT_STORE_PARENT, "tcp", rank_again},
    {CHT_STORE_RANK0, NULL, rank_again},   {CHT_STORE_RANK0, "tcp", rank_again},
    {CHT_STORE_PARENT, NULL, rank_two_alive},
};

START_TEST(world_made_again)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 90000, .store_mode = cases[_i].store_mode,
                  .transport = cases[_i].transport, .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, cases[_i].fn, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("reinit");
    TCase *t = tcase_create("reinit");
    tcase_set_timeout(t, 200);
    tcase_add_loop_test(t, world_made_again, 0, (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, t);
    return cht_run_suite(s);
}
