/* recover.c - recovering from a failed collective: never retry on the
 * failed group; finalize it and rendezvous again under a new generation.
 *
 *   cohortrun -n 4 ./recover
 *
 * Generation 1 fails on purpose (rank 1 aborts the group at step 3, as a
 * stand-in for a peer loss or a timeout). Every rank sees the error, leaves,
 * and joins generation 2 through the same store (cohortrun hosts it, so it
 * outlives the failed group); the store refuses anyone still presenting
 * generation 1. Training state comes from the last good step. */
#include <stdio.h>
#include <stdlib.h>

#include "cohort.h"

static cohort_status train(cohort_group *g, int *step, double *w, int fail_at)
{
    for (; *step < 6; (*step)++) {
        double grad = 0.1 * (cohort_rank(g) + 1), sum = 0;
        if (*step == fail_at && cohort_rank(g) == 1)
            cohort_abort(g, "simulated failure on rank 1");
        cohort_status st = cohort_all_reduce(g, &grad, &sum, 1, COHORT_FLOAT64, COHORT_AVG);
        if (st != COHORT_OK)
            return st; /* the group is poisoned now: every later call would fail */
        *w -= sum;
    }
    return COHORT_OK;
}

int main(void)
{
    unsigned gen = 1;
    int step = 0;
    double w = 1.0;
    for (;;) {
        char buf[16];
        snprintf(buf, sizeof buf, "%u", gen);
        setenv("COHORT_GENERATION", buf, 1);
        cohort_group *g;
        if (cohort_init(&g) != COHORT_OK) {
            fprintf(stderr, "init (generation %u): %s\n", gen, cohort_last_error(NULL));
            return 1;
        }
        cohort_status st = train(g, &step, &w, gen == 1 ? 3 : -1);
        if (st == COHORT_OK) {
            if (cohort_rank(g) == 0)
                printf("generation %u finished: w = %.3f after %d steps\n", gen, w, step);
            cohort_finalize(g);
            return 0;
        }
        fprintf(stderr, "rank %d, generation %u: %s: %s -> rebuilding\n", cohort_rank(g), gen,
                cohort_status_name(st), cohort_last_error(g));
        cohort_finalize(g); /* abort + leave: never retry on a failed group */
        /* `step` and `w` only advance after a successful all_reduce, and no
         * rank can complete the call the failing rank never joined, so every
         * rank resumes from the same step. A real program reloads its last
         * checkpoint here. */
        gen++;
        if (gen > 3)
            return 1;
    }
}
