/* A cohort program as torchrun starts it (tests/store_torch/torchrun_cohort.sh):
 * init from torchrun's environment, an all_reduce, a barrier; prints one
 * line per rank with the sum and the store it used. */
#include <stdio.h>
#include <stdlib.h>

#include <cohort.h>

int main(void)
{
    cohort_group *g;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "init: %s\n", cohort_last_error(NULL));
        return 1;
    }
    int r = cohort_rank(g), n = cohort_size(g);
    double v[4] = {r + 1, r + 1, r + 1, r + 1};
    cohort_status st = cohort_all_reduce(g, v, v, 4, COHORT_FLOAT64, COHORT_SUM);
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    if (st != COHORT_OK) {
        fprintf(stderr, "rank %d: %s: %s\n", r, cohort_status_name(st), cohort_last_error(g));
        cohort_finalize(g);
        return 1;
    }
    printf("cohort rank %d/%d sum=%g\n", r, n, v[0]);
    fflush(stdout);
    return cohort_finalize(g) != COHORT_OK;
}
