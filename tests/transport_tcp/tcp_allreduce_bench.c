/*
 * tcp_allreduce_bench.c - all_reduce (float32 sum) through the public API
 * with COHORT_TRANSPORT=tcp: the path the targets are stated for
 * (small all_reduce latency, busbw at 1 MiB). Ranks are forked with
 * cht_run_ranks (rank 0 hosts the store).
 *
 *   tcp_allreduce_bench [--quick] [--ranks N]
 *
 * busbw = algbw * 2(n-1)/n, as nccl-tests define it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "support/support.h"

static int quick;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int rank_main(int rank, void *arg)
{
    int n = *(int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    const size_t counts[] = {1, 2, 16, 256, 4096, 65536, 262144, 1u << 20, 4u << 20};
    float *in = malloc((4u << 20) * sizeof(float)), *out = malloc((4u << 20) * sizeof(float));
    double *lat = malloc(sizeof(double) * 10000);
    RANK_CHECK(in && out && lat, "malloc");
    for (size_t i = 0; i < (4u << 20); i++)
        in[i] = (float)(i % 7);
    if (rank == 0)
        printf("%12s %8s %10s %10s %10s %10s\n", "bytes", "iters", "p50_us", "avg_us",
               "algbw_GBs", "busbw_GBs");
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        size_t c = counts[k], bytes = c * sizeof(float);
        int it = bytes <= 16384 ? 5000 : bytes <= (1u << 20) ? 300 : 30;
        if (quick)
            it = it / 50 > 3 ? it / 50 : 3;
        int warm = it / 10 + 2;
        for (int i = 0; i < warm; i++)
            RANK_PASS(cohort_all_reduce(g, in, out, c, COHORT_FLOAT32, COHORT_SUM), g);
        RANK_PASS(cohort_barrier(g), g);
        double t0 = now_us();
        for (int i = 0; i < it; i++) {
            double s = now_us();
            RANK_PASS(cohort_all_reduce(g, in, out, c, COHORT_FLOAT32, COHORT_SUM), g);
            lat[i] = now_us() - s;
        }
        double total = now_us() - t0;
        RANK_CHECK(out[c - 1] == (float)(((c - 1) % 7) * n), "wrong sum %f", out[c - 1]);
        if (rank == 0) {
            qsort(lat, (size_t)it, sizeof *lat, cmp_d);
            double avg = total / it, algbw = bytes / (avg * 1e3);
            printf("%12zu %8d %10.2f %10.2f %10.3f %10.3f\n", bytes, it, lat[it / 2], avg, algbw,
                   algbw * 2.0 * (n - 1) / n);
            fflush(stdout);
        }
    }
    free(in);
    free(out);
    free(lat);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--ranks") && i + 1 < argc)
            n = atoi(argv[++i]);
    }
    cht_opts o = {.nranks = n, .deadline_ms = 600000, .transport = "tcp"};
    cht_result r;
    int rc = cht_run_ranks(&o, rank_main, &n, &r);
    if (rc)
        fprintf(stderr, "tcp_allreduce_bench: a rank failed\n");
    return rc ? 1 : 0;
}
