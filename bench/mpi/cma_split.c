/* cma_split.c - an LD_PRELOAD shim that splits a large Open MPI broadcast
 * into the receiver's single-copy read and everything else (docs/mpi.md,
 * "Cost table", 2026-12-02 17:30). Open MPI's vader BTL moves a 1 MiB
 * message with one process_vm_readv(2) by the receiver (one per call,
 * strace -f -c), and the root's call lasts until that read is done; the
 * root's per-call time is then the copy plus the receiver's time between
 * two copies (its MPI and layer work per call). The shim times each
 * 1 MiB process_vm_readv (CLOCK_MONOTONIC) and the gap since the previous
 * one, and prints min/p10/p50/p90 of both at exit, on the receiver.
 *
 * Build: gcc -O2 -shared -fPIC -o cma_split.so bench/mpi/cma_split.c -ldl
 * Use:   mpirun -x LD_PRELOAD=[<layer>.so:]cma_split.so bench_mpi 1
 * (after the layer in LD_PRELOAD, so both A and B carry it). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>

#define N 200000
static uint64_t dur[N], gap[N], last_end;
static int n;

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

ssize_t process_vm_readv(pid_t pid, const struct iovec *l, unsigned long ln,
                         const struct iovec *r, unsigned long rn, unsigned long f)
{
    static ssize_t (*real)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                           unsigned long, unsigned long);
    if (!real)
        real = (ssize_t(*)(pid_t, const struct iovec *, unsigned long, const struct iovec *,
                           unsigned long, unsigned long))dlsym(RTLD_NEXT, "process_vm_readv");
    uint64_t t0 = now_ns();
    ssize_t rc = real(pid, l, ln, r, rn, f);
    uint64_t t1 = now_ns();
    if (n < N && ln == 1 && l[0].iov_len == (1u << 20)) {
        dur[n] = t1 - t0;
        gap[n] = last_end ? t0 - last_end : 0; /* from the previous 1 MiB copy's end */
        n++;
        last_end = t1;
    }
    return rc;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

__attribute__((destructor)) static void report(void)
{
    if (n < 100)
        return;
    qsort(dur, (size_t)n, sizeof *dur, cmp);
    qsort(gap + 1, (size_t)n - 1, sizeof *gap, cmp);
    int g = n - 1;
    fprintf(stderr,
            "cma_split: %d readv of 1 MiB: copy ns min %lu p10 %lu p50 %lu p90 %lu | between "
            "copies ns min %lu p10 %lu p50 %lu\n",
            n, (unsigned long)dur[0], (unsigned long)dur[n / 10], (unsigned long)dur[n / 2],
            (unsigned long)dur[n * 9 / 10], (unsigned long)gap[1], (unsigned long)gap[1 + g / 10],
            (unsigned long)gap[1 + g / 2]);
}
