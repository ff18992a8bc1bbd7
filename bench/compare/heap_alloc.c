/*
 * heap_alloc.c - what libcohort-heap.so costs the program's own allocations:
 * malloc + free of SIZE bytes, untouched and with every page written once (the
 * first-touch faults: shared memfd pages against glibc's, whose freed 1 MiB block
 * is reused after the first free, its pages already there). Run it plain and with
 * LD_PRELOAD=libcohort-heap.so.
 *
 *   heap_alloc [SIZE [CALLS]]      default 1 MiB, 2000 calls after 50 warm-up
 *
 * Prints "alloc SIZE untouched|touched p50_us p99_us" per variant.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

int main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
    int calls = argc > 2 ? atoi(argv[2]) : 2000;
    double *t = malloc((size_t)calls * sizeof *t);
    for (int touch = 0; touch < 2; touch++) {
        for (int i = -50; i < calls; i++) {
            double t0 = now_us();
            volatile unsigned char *p = malloc(size);
            if (touch)
                for (size_t o = 0; o < size; o += 4096)
                    p[o] = (unsigned char)o;
            else
                p[0] = 1;
            free((void *)p);
            if (i >= 0)
                t[i] = now_us() - t0;
        }
        qsort(t, (size_t)calls, sizeof *t, cmp_double);
        printf("alloc %zu %s %.2f %.2f\n", size, touch ? "touched" : "untouched", t[calls / 2],
               t[(size_t)calls * 99 / 100]);
    }
    free(t);
    return 0;
}
