/*
 * ring_stride.c - what a small message costs between two cores when the
 * sender runs ahead, by how densely the messages lie in memory: a
 * single-producer single-consumer ring of records STRIDE bytes apart (a
 * 4-byte phase tag stored last with release, the payload and fingerprint
 * words before it), the producer at most WINDOW records ahead of the
 * consumer (it reads the consumer's count only when its last reading
 * leaves no room, as cohort's root reads done words lazily and Open MPI's
 * fastbox sender reads the receiver's end). Two threads pinned to two cpus.
 *
 *   ring_stride [CPU_A CPU_B [MSGS [WORK]]]
 *
 * For each stride (16, 32, 64, 128 B: Open MPI's fastbox packs a header and
 * 8 B of data in 16 B; cohort's ring record is 128 B, its line 0 read) it
 * prints the median ns per message over 7 runs of MSGS messages, and the
 * core-to-core round trip measured the same way as c2c.c, between runs. A
 * consumer behind the producer pulls 64/STRIDE records per line transfer;
 * at 64 B and over, one transfer per message is the floor
 * (docs/performance.md, "2-rank calls of <= 64 B").
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

#define RING_BYTES 8192u /* like a fastbox: 8 KiB of records */
#define WINDOW 64u       /* records the producer may run ahead */
#define RUNS 7

static _Alignas(64) unsigned char ring[RING_BYTES];
static _Alignas(64) _Atomic uint32_t consumed;
static _Alignas(64) _Atomic int go;
static unsigned stride;
static int locked; /* 1: a locked instruction per message on the producer, 2: on both sides */
static unsigned work; /* steps of a dependent chain each side runs per message (a call's own code) */

/* A call's own work: `work` steps of a dependent multiply-add chain (about
 * 4 cycles a step), which keeps the next message's load out of the
 * out-of-order window as a library call's ~700 instructions do. */
static inline uint64_t busy(uint64_t x)
{
    for (unsigned k = 0; k < work; k++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}
static _Alignas(64) _Atomic uint64_t own_a;
static _Alignas(64) _Atomic uint64_t own_b;
static uint32_t msgs;
static int cpu_a, cpu_b;



static inline _Atomic uint32_t *tag_of(uint32_t i)
{
    return (_Atomic uint32_t *)(ring + (size_t)(i % (RING_BYTES / stride)) * stride);
}

static void *consumer(void *arg)
{
    (void)arg;
    pin_thread(cpu_b);
    while (!atomic_load(&go))
        ;
    uint64_t sum = 0;
    for (uint32_t i = 0; i < msgs; i++) {
        if (locked == 2)
            atomic_fetch_add_explicit(&own_b, 1, memory_order_seq_cst);
        _Atomic uint32_t *t = tag_of(i);
        while (atomic_load_explicit(t, memory_order_acquire) != i + 1)
            __builtin_ia32_pause();
        uint64_t v;
        memcpy(&v, (unsigned char *)t + 8, sizeof v);
        sum += busy(v);
        /* its count in its own line, every message (the producer reads it
         * rarely) */
        atomic_store_explicit(&consumed, i + 1, memory_order_release);
    }
    return (void *)(uintptr_t)(sum & 1);
}

static double one_run(void)
{
    memset(ring, 0, sizeof ring);
    atomic_store(&consumed, 0);
    atomic_store(&go, 0);
    pthread_t th;
    pthread_create(&th, NULL, consumer, NULL);
    pin_thread(cpu_a);
    uint32_t room = WINDOW;
    double t0 = (now_us() * 1000);
    atomic_store(&go, 1);
    for (uint32_t i = 0; i < msgs; i++) {
        while (i >= room) {
            room = atomic_load_explicit(&consumed, memory_order_acquire) + WINDOW;
            if (i >= room)
                __builtin_ia32_pause();
        }
        if (locked)
            atomic_fetch_add_explicit(&own_a, 1, memory_order_seq_cst);
        _Atomic uint32_t *t = tag_of(i);
        unsigned char *r = (unsigned char *)t;
        uint64_t v = busy(i), fp = 0x5eedULL ^ i;
        memcpy(r + 8, &v, sizeof v);
        if (stride >= 32) /* a fingerprint beside the payload, as cohort's */
            memcpy(r + 16, &fp, sizeof fp);
        atomic_store_explicit(t, i + 1, memory_order_release);
    }
    pthread_join(th, NULL);
    return ((now_us() * 1000) - t0) / msgs;
}

/* one cache line's round trip between the two cpus (as c2c.c) */
static _Alignas(64) _Atomic long ping, pong;
static void *ponger(void *arg)
{
    long n = (long)(intptr_t)arg;
    pin_thread(cpu_b);
    for (long i = 1; i <= n; i++) {
        while (atomic_load_explicit(&ping, memory_order_acquire) != i)
            ;
        atomic_store_explicit(&pong, i, memory_order_release);
    }
    return NULL;
}

static double c2c(void)
{
    long n = 20000;
    atomic_store(&ping, 0);
    atomic_store(&pong, 0);
    pthread_t th;
    pthread_create(&th, NULL, ponger, (void *)(intptr_t)n);
    pin_thread(cpu_a);
    double t0 = (now_us() * 1000);
    for (long i = 1; i <= n; i++) {
        atomic_store_explicit(&ping, i, memory_order_release);
        while (atomic_load_explicit(&pong, memory_order_acquire) != i)
            ;
    }
    double t = ((now_us() * 1000) - t0) / (double)n;
    pthread_join(th, NULL);
    return t;
}


int main(int argc, char **argv)
{
    cpu_a = argc > 2 ? atoi(argv[1]) : 0;
    cpu_b = argc > 2 ? atoi(argv[2]) : 1;
    msgs = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 2000000u;
    work = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 0;
    printf("work per message and side: %u steps\n", work);
    static const unsigned strides[] = {16, 32, 64, 128};
    double rt[RUNS];
    for (int r = 0; r < RUNS; r++)
        rt[r] = c2c();
    qsort(rt, RUNS, sizeof rt[0], cmp_double);
    printf("c2c round trip p50 %.0f ns (one transfer ~%.0f ns)\n", rt[RUNS / 2], rt[RUNS / 2] / 2);
    for (size_t k = 0; k < 3 * sizeof strides / sizeof strides[0]; k++) {
        stride = strides[k % 4];
        locked = (int)(k / 4);
        double t[RUNS];
        for (int r = 0; r < RUNS; r++)
            t[r] = one_run();
        qsort(t, RUNS, sizeof t[0], cmp_double);
        printf("stride %3u B (%u a line), locked op %-13s: p50 %.1f ns/msg  min %.1f  max %.1f\n",
               stride, 64u / stride ? 64u / stride : 1u,
               locked == 0 ? "none" : locked == 1 ? "producer" : "both sides", t[RUNS / 2], t[0],
               t[RUNS - 1]);
    }
    for (int r = 0; r < RUNS; r++)
        rt[r] = c2c();
    qsort(rt, RUNS, sizeof rt[0], cmp_double);
    printf("c2c round trip p50 %.0f ns after\n", rt[RUNS / 2]);
    return 0;
}
