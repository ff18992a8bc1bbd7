/*
 * timing.h - what the probes here (memcpy_floor.c, xcore_floor.c, c2c.c,
 * mpi_pingpong.c, ring_stride.c, slot_floor.c) share: a monotonic clock in
 * microseconds, the comparison for qsort of times, and pinning the calling
 * thread to one cpu (pin_thread; needs _GNU_SOURCE and -pthread).
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

#ifdef _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
/* Pins the calling thread to cpu, or exits: a probe between two cpus means
 * nothing unpinned. */
static inline void pin_thread(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    if (pthread_setaffinity_np(pthread_self(), sizeof s, &s) != 0) {
        perror("pthread_setaffinity_np");
        exit(1);
    }
}
#endif
#endif
