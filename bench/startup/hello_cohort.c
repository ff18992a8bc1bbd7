/* hello_cohort.c - the cohort side of the start-up benchmark: join the group
 * cohortrun describes, one barrier, leave. */
#include <stdio.h>

#include "cohort.h"

int main(void)
{
    cohort_group *g = NULL;
    if (cohort_init(&g) != COHORT_OK) {
        fprintf(stderr, "hello_cohort: init: %s\n", cohort_last_error(NULL));
        return 1;
    }
    cohort_status st = cohort_barrier(g);
    if (st != COHORT_OK) {
        fprintf(stderr, "hello_cohort: barrier: %s: %s\n", cohort_status_name(st),
                cohort_last_error(g));
        cohort_finalize(g);
        return 1;
    }
    return cohort_finalize(g) == COHORT_OK ? 0 : 1;
}
