/*
 * timing.h - what the probes here (memcpy_floor.c, xcore_floor.c, c2c.c,
 * mpi_pingpong.c) share: a monotonic clock in microseconds and the
 * comparison for qsort of times.
 * Header-only, so that each still builds alone: cc -O2 -o x bench/compare/x.c
 */
#ifndef BENCH_COMPARE_TIMING_H
#define BENCH_COMPARE_TIMING_H
#include <time.h>

static inline double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
#endif
