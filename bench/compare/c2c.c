/*
 * c2c.c - how far apart two cpus are right now: the round trip of one cache
 * line between two threads pinned to them (a store seen by the other thread,
 * answered by a store of its own), median over batches of 256 round trips.
 *
 *   c2c [CPU_A CPU_B [BATCHES]]    default: the first two cpus this process
 *                                  may use, 100 batches (at most 0.3 s)
 *
 * Prints "c2c CPU_A CPU_B p50_ns p10_ns min_ns batches". On the 2-vCPU VM of
 * this project the answer moves between about 55, 140 and 550 ns from one
 * second to the next (the host places the two vCPUs on one core complex,
 * two, or further apart), and every hand-off between two ranks moves with
 * it: bench/compare/run.sh records it before and after each launch
 * (docs/performance.md, "Which mode a 2-rank launch is in").
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timing.h"

#define BATCH 256
#define MAX_S 0.3

static _Alignas(64) _Atomic long ping;
static _Alignas(64) _Atomic long pong;
static _Alignas(64) _Atomic int stop;

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *answer(void *arg)
{
    if (pin((int)(long)arg) != 0) {
        atomic_store(&stop, 2);
        return NULL;
    }
    long last = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        long v = atomic_load_explicit(&ping, memory_order_acquire);
        if (v != last) {
            atomic_store_explicit(&pong, v, memory_order_release);
            last = v;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int a = -1, b = -1;
    long nb = 100;
    if (argc >= 3) {
        a = atoi(argv[1]);
        b = atoi(argv[2]);
    } else {
        cpu_set_t s;
        if (sched_getaffinity(0, sizeof s, &s) == 0)
            for (int c = 0; c < CPU_SETSIZE && b < 0; c++)
                if (CPU_ISSET(c, &s)) {
                    if (a < 0)
                        a = c;
                    else
                        b = c;
                }
    }
    if (argc >= 4)
        nb = atol(argv[3]);
    if (a < 0 || b < 0 || a == b || nb < 1 || nb > 100000) {
        fprintf(stderr, "c2c: need two distinct cpus and 1..100000 batches\n");
        return 2;
    }
    if (pin(a) != 0) {
        fprintf(stderr, "c2c: cannot pin to cpu %d\n", a);
        return 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, answer, (void *)(long)b) != 0)
        return 1;
    double *bt = malloc((size_t)nb * sizeof *bt), t0 = now_s();
    if (!bt)
        return 1;
    long i = 0, done = 0;
    /* a batch whose answer never comes (the other thread could not pin, or
     * is preempted for good) ends at MAX_S */
    for (; done < nb && now_s() - t0 < MAX_S && atomic_load(&stop) != 2; done++) {
        double s = now_s();
        for (int j = 0; j < BATCH; j++) {
            atomic_store_explicit(&ping, ++i, memory_order_release);
            while (atomic_load_explicit(&pong, memory_order_acquire) != i)
                if (atomic_load_explicit(&stop, memory_order_relaxed) == 2 || now_s() - t0 > MAX_S)
                    goto out;
        }
        bt[done] = (now_s() - s) / BATCH;
    }
out:
    if (atomic_load(&stop) != 2)
        atomic_store(&stop, 1);
    pthread_join(t, NULL);
    if (!done) {
        printf("c2c %d %d - - - 0\n", a, b);
        free(bt);
        return 1;
    }
    qsort(bt, (size_t)done, sizeof *bt, cmp_double);
    printf("c2c %d %d %.0f %.0f %.0f %ld\n", a, b, bt[done / 2] * 1e9, bt[done / 10] * 1e9,
           bt[0] * 1e9, done);
    free(bt);
    return 0;
}
