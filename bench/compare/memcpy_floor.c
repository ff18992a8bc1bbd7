/*
 * memcpy_floor.c - the physical floor of a single copy on this machine, in
 * the same run as the collectives: the time of one memcpy of SIZE bytes
 * between two page-aligned buffers that stay in the cache (as a broadcast's
 * source and destination do when it runs back to back), per call.
 *
 *   memcpy_floor [SIZE [CALLS]]      default 1 MiB, 2000 calls after 50 warm-up
 *
 * Prints one line per size: "memcpy SIZE p50_us p99_us min_us mean_us GB/s(p50)"
 * (bench/compare/summarize.py and check read it).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : (1u << 20);
    int calls = argc > 2 ? atoi(argv[2]) : 2000;
    if (n == 0 || calls < 1) {
        fprintf(stderr, "usage: memcpy_floor [SIZE>0 [CALLS>0]]\n");
        return 2;
    }
    unsigned char *a = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    unsigned char *b = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    double *t = malloc(sizeof(double) * (size_t)calls);
    if (!a || !b || !t) {
        perror("memcpy_floor");
        return 1;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    for (int i = 0; i < 50; i++)
        memcpy(b, a, n);
    double sum = 0;
    for (int i = 0; i < calls; i++) {
        a[(size_t)i % n] = (unsigned char)i; /* the copy cannot be hoisted */
        double t0 = now_us();
        memcpy(b, a, n);
        __asm__ volatile("" ::"r"(b) : "memory");
        t[i] = now_us() - t0;
        sum += t[i];
    }
    qsort(t, (size_t)calls, sizeof *t, cmp_double);
    double p50 = t[calls / 2], p99 = t[(size_t)((calls - 1) * 0.99)];
    printf("# memcpy_floor: one memcpy of SIZE bytes, cache-hot buffers, %d calls\n", calls);
    printf("# op size p50_us p99_us min_us mean_us GBs_p50\n");
    printf("memcpy %zu %.3f %.3f %.3f %.3f %.2f\n", n, p50, p99, t[0], sum / calls,
           p50 > 0 ? n / p50 / 1e3 : 0.0);
    return b[n - 1] == 0xff && b[0] == 0xff; /* keep b alive */
}
