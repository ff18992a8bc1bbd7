/*
 * bench_coll.c - per-algorithm timing of one collective, for tuning the
 * selection crossovers (not a test; cohort-perf is the user-facing tool).
 *
 *   bench_coll <coll> <nranks> <transport|auto> <algo|auto> <bytes>...
 *   e.g. bench_coll all_reduce 4 tcp ring 1024 1048576
 *
 * Each rank runs float32 SUM (or the data movement of the collective) in a
 * loop: warm-up, then batches until ~0.3 s per size; rank 0 prints p50,
 * p99 and max of the per-call time (max over ranks of each call is not
 * gathered: each batch ends with a barrier, so rank 0's times include the
 * slowest rank's), and algbw/busbw in nccl-tests conventions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/support.h"

static const char *coll;
static size_t sizes[32];
static int nsizes;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static cohort_status once(cohort_group *g, float *a, float *b, size_t count)
{
    if (!strcmp(coll, "all_reduce"))
        return cohort_all_reduce(g, a, b, count, COHORT_FLOAT32, COHORT_SUM);
    if (!strcmp(coll, "broadcast"))
        return cohort_broadcast(g, a, count, COHORT_FLOAT32, 0);
    if (!strcmp(coll, "reduce"))
        return cohort_reduce(g, a, b, count, COHORT_FLOAT32, COHORT_SUM, 0);
    int n = cohort_size(g);
    if (!strcmp(coll, "all_gather"))
        return cohort_all_gather(g, a, b, count / (size_t)n, COHORT_FLOAT32);
    if (!strcmp(coll, "reduce_scatter"))
        return cohort_reduce_scatter(g, a, b, count / (size_t)n, COHORT_FLOAT32, COHORT_SUM);
    if (!strcmp(coll, "all_to_all"))
        return cohort_all_to_all(g, a, b, count / (size_t)n, COHORT_FLOAT32);
    if (!strcmp(coll, "barrier"))
        return cohort_barrier(g);
    return COHORT_ERR_INVALID;
}

static double busbw_factor(int n)
{
    if (!strcmp(coll, "all_reduce"))
        return 2.0 * (n - 1) / n;
    if (!strcmp(coll, "all_gather") || !strcmp(coll, "reduce_scatter") ||
        !strcmp(coll, "all_to_all"))
        return (double)(n - 1) / n;
    return 1.0;
}

static int rank_bench(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    for (int si = 0; si < nsizes; si++) {
        size_t count = sizes[si] / 4;
        if (count < (size_t)n)
            count = (size_t)n;
        float *a = calloc(count + 1, 4), *b = calloc(count + 1, 4);
        RANK_CHECK(a && b, "oom");
        for (int w = 0; w < 5; w++)
            RANK_PASS(once(g, a, b, count), g);
        static double t[200000];
        int it = 0;
        double t_end = now_us() + 300e3;
        int go = 1;
        while (go && it < 200000) {
            double t0 = now_us();
            RANK_PASS(once(g, a, b, count), g);
            t[it++] = now_us() - t0;
            /* rank 0 decides when to stop; everyone follows (broadcast) */
            int32_t flag = now_us() < t_end;
            if (it % 16 == 0) {
                RANK_PASS(cohort_broadcast(g, &flag, 1, COHORT_INT32, 0), g);
                go = flag;
            }
        }
        qsort(t, (size_t)it, sizeof t[0], cht_cmp_double);
        if (rank == 0) {
            double p50 = t[it / 2], bytes = (double)count * 4;
            printf("%-14s n=%d %10zu B  iters %6d  p50 %9.1f us  p99 %9.1f us  max %9.1f us  "
                   "algbw %6.2f GB/s  busbw %6.2f GB/s\n",
                   coll, n, (size_t)bytes, it, p50, t[(size_t)(it * 0.99)], t[it - 1],
                   bytes / p50 / 1e3, bytes / p50 / 1e3 * busbw_factor(n));
            fflush(stdout);
        }
        free(a);
        free(b);
    }
    cohort_finalize(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: %s coll nranks transport algo bytes...\n", argv[0]);
        return 2;
    }
    coll = argv[1];
    int n = atoi(argv[2]);
    const char *transport = strcmp(argv[3], "auto") ? argv[3] : NULL;
    static char env[256];
    char up[64];
    snprintf(up, sizeof up, "%s", coll);
    for (char *p = up; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 32);
    snprintf(env, sizeof env, "COHORT_ALGO_%s=%s", up, argv[4]);
    for (int i = 5; i < argc && nsizes < 32; i++)
        sizes[nsizes++] = (size_t)strtoull(argv[i], NULL, 0);
    cht_opts o = {.nranks = n, .deadline_ms = 600000, .transport = transport, .extra_env = env};
    cht_result r;
    int rc = cht_run_ranks(&o, rank_bench, NULL, &r);
    return rc ? 1 : 0;
}
