/*
 * slot_floor.c - the floor of a two-copy message between two cores: a
 * producer copies SIZE bytes into slot i % SLOTS of a shared ring and
 * stores the slot's tag (release); a consumer waits for the tag, copies the
 * slot out and stores its count (release), which the producer reads only
 * when its last reading leaves no free slot. Two threads pinned to two
 * cpus, nothing else: what cohort's slot ring (a broadcast of 1-16 KiB, 2
 * ranks) and MPICH's or Open MPI's eager path do at the least.
 *
 *   slot_floor [SIZE [SLOTS [CPU_A CPU_B]]]    default 4096 8 0 1
 *
 * Prints the median and range over 5 runs of 200,000 messages, us per
 * message (docs/performance.md, "Issue #14: session 15").
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "timing.h"

#define MSGS 200000u
#define RUNS 5
#define STRIDE_MAX (1u << 20)

static size_t size = 4096, nslots = 8, stride;
static int cpu_a, cpu_b;
static unsigned char *slots, *src, *dst;
static _Alignas(64) _Atomic uint32_t tags[256 * 16]; /* one line a slot */
static _Alignas(64) _Atomic uint32_t consumed;



static void *consumer(void *arg)
{
    (void)arg;
    pin_thread(cpu_b);
    for (uint32_t i = 0; i < MSGS; i++) {
        _Atomic uint32_t *t = &tags[(i % nslots) * 16];
        while (atomic_load_explicit(t, memory_order_acquire) != i + 1)
            __builtin_ia32_pause();
        memcpy(dst, slots + (i % nslots) * stride, size);
        atomic_store_explicit(&consumed, i + 1, memory_order_release);
    }
    return NULL;
}

static double one_run(void)
{
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
        atomic_store(&tags[i], 0);
    atomic_store(&consumed, 0);
    pthread_t th;
    pthread_create(&th, NULL, consumer, NULL);
    pin_thread(cpu_a);
    uint32_t room = (uint32_t)nslots;
    double t0 = (now_us() * 1000);
    for (uint32_t i = 0; i < MSGS; i++) {
        while (i >= room) {
            room = atomic_load_explicit(&consumed, memory_order_acquire) + (uint32_t)nslots;
            if (i >= room)
                __builtin_ia32_pause();
        }
        memcpy(slots + (i % nslots) * stride, src, size);
        atomic_store_explicit(&tags[(i % nslots) * 16], i + 1, memory_order_release);
    }
    pthread_join(th, NULL);
    return ((now_us() * 1000) - t0) / MSGS / 1000;
}


int main(int argc, char **argv)
{
    if (argc > 1)
        size = strtoul(argv[1], NULL, 0);
    if (argc > 2)
        nslots = strtoul(argv[2], NULL, 0);
    cpu_a = argc > 4 ? atoi(argv[3]) : 0;
    cpu_b = argc > 4 ? atoi(argv[4]) : 1;
    if (!size || size > STRIDE_MAX || !nslots || nslots > 256) {
        fprintf(stderr, "slot_floor: SIZE 1..%u, SLOTS 1..256\n", STRIDE_MAX);
        return 2;
    }
    stride = (size + 63) & ~(size_t)63;
    slots = aligned_alloc(4096, (nslots * stride + 4095) & ~(size_t)4095);
    src = aligned_alloc(64, stride);
    dst = aligned_alloc(64, stride);
    if (!slots || !src || !dst)
        return 1;
    memset(slots, 0, nslots * stride);
    memset(src, 1, size);
    double t[RUNS];
    for (int r = 0; r < RUNS; r++)
        t[r] = one_run();
    qsort(t, RUNS, sizeof t[0], cmp_double);
    printf("slot_floor %zu B, %zu slots, cpus %d %d: p50 %.3f us/msg (min %.3f, max %.3f)\n", size,
           nslots, cpu_a, cpu_b, t[RUNS / 2], t[0], t[RUNS - 1]);
    return 0;
}
