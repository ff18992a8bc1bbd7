#include <stdio.h>
#include <stdint.h>
#include <time.h>
#include "cohort.h"
void coh_reduce_multi_div(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt, cohort_op op, int div);
static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
int main(void)
{
    static float a[64], b[64], o[64];
    const void *s[2] = {a, b};
    for (size_t n = 12; n <= 20; n++) {
        uint64_t t0 = now();
        for (int i = 0; i < 1000000; i++) {
            coh_reduce_multi_div(o, s, 2, n, COHORT_FLOAT32, COHORT_SUM, 0);
            __asm__ volatile("" ::: "memory");
        }
        printf("n %zu: %.1f ns\n", n, (now() - t0) / 1e6);
    }
    return 0;
}
