/* fixed-count cohort_broadcast loop (8 B etc.), the counterpart of bcast_n.c: cbcast_n SIZE N */
#define _POSIX_C_SOURCE 200809L
#include <cohort.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv)
{
    cohort_group *g;
    if (cohort_init(&g) != COHORT_OK) return 1;
    size_t sz = strtoull(argv[1], 0, 0);
    int n = atoi(argv[2]), r = cohort_rank(g);
    char *b = calloc(1, sz ? sz : 1);
    cohort_barrier(g);
    double t0 = now();
    for (int i = 0; i < n; i++)
        if (cohort_broadcast(g, b, sz, COHORT_UINT8, 0) != COHORT_OK) return 2;
    double t1 = now();
    cohort_barrier(g);
    printf("rank %d: %.2f us/call\n", r, (t1 - t0) * 1e6 / n);
    cohort_finalize(g);
    return 0;
}
