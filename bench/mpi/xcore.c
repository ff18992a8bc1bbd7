/* xcore.c - the machine's core-to-core latency right now: two threads
 * pinned to two CPUs (default: the first two this process may run on; or
 * argv[1], argv[2]) pass a cache line back and forth; prints the round trip
 * in ns (the first quartile of 2000 batches of 100 round trips: a batch a
 * preempted thread stretched lands in the upper half).
 *
 * Why (docs/mpi.md, "Cost"): on the shared KVM machine this project is
 * measured on, the round trip between the two vCPUs is ~50, ~135 or
 * ~550 ns depending on where the host has placed them at the moment, and
 * changes within seconds; every shared-memory MPI call, of any size,
 * follows it (2026-12-02: 8 B all-reduce 0.23 vs 0.5 us, 1 MiB 130 vs
 * 205 us, bare). bench/mpi/run.sh runs this before and after each launch so
 * that a pair whose two launches saw different host states can be told
 * from a cost of the layer. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define BATCHES 2000
#define PER 100

static _Alignas(64) _Atomic long ping;
static _Alignas(64) _Atomic long pong;

static int pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *echo(void *arg)
{
    (void)arg;
    for (long i = 1; i <= (long)BATCHES * PER; i++) {
        while (atomic_load_explicit(&ping, memory_order_acquire) != i)
            ;
        atomic_store_explicit(&pong, i, memory_order_release);
    }
    return NULL;
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int cpu[2] = {-1, -1};
    if (argc > 2) {
        cpu[0] = atoi(argv[1]);
        cpu[1] = atoi(argv[2]);
    } else {
        cpu_set_t s;
        sched_getaffinity(0, sizeof s, &s);
        for (int c = 0, k = 0; c < CPU_SETSIZE && k < 2; c++)
            if (CPU_ISSET(c, &s))
                cpu[k++] = c;
    }
    if (cpu[1] < 0) {
        fprintf(stderr, "xcore: needs two CPUs\n");
        return 2;
    }
    if (pin(cpu[0]) != 0) {
        fprintf(stderr, "xcore: cannot run on CPU %d\n", cpu[0]);
        return 2;
    }
    /* The echo thread starts on its CPU (or not at all: never unpinned). */
    pthread_attr_t a;
    cpu_set_t s1;
    CPU_ZERO(&s1);
    CPU_SET(cpu[1], &s1);
    pthread_t t;
    if (pthread_attr_init(&a) != 0 || pthread_attr_setaffinity_np(&a, sizeof s1, &s1) != 0 ||
        pthread_create(&t, &a, echo, NULL) != 0) {
        fprintf(stderr, "xcore: cannot run a thread on CPU %d\n", cpu[1]);
        return 2;
    }
    static long r[BATCHES];
    long t0 = now_ns();
    for (long i = 1; i <= (long)BATCHES * PER; i++) {
        atomic_store_explicit(&ping, i, memory_order_release);
        while (atomic_load_explicit(&pong, memory_order_acquire) != i)
            ;
        if (i % PER == 0) {
            long t1 = now_ns();
            r[i / PER - 1] = t1 - t0;
            t0 = t1;
        }
    }
    pthread_join(t, NULL);
    qsort(r, BATCHES, sizeof *r, cmp);
    printf("%.0f\n", (double)r[BATCHES / 4] / PER);
    return 0;
}
