/*
 * bench_reduce.c - throughput of the reduction kernels.
 *
 * Usage: bench_reduce [dtype op ...]   (default: float32 sum, bfloat16 sum,
 * float16 sum, float32 max, int32 sum)
 * For each buffer size, times the in-place kernel io = io op in over several
 * batches and prints the median and best rate in GB/s of reduced data (bytes
 * of one operand per second; the memory traffic is three times that: two
 * reads and a write). Also times memcpy of the same size for scale.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cohort.h"
#include "reduce/reduce.h"
#include "support/support.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Rate (GB/s) of fn over bytes: batches of reps calls, 9 batches. */
static void measure(const char *label, size_t bytes, cohort_dtype dt, cohort_op op)
{
    size_t es = cohort_dtype_size(dt), n = bytes / es;
    unsigned char *io = malloc(bytes), *in = malloc(bytes);
    if (!io || !in) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* Small values so that sums stay finite whatever the dtype. */
    for (size_t i = 0; i < bytes; i++) {
        io[i] = (unsigned char)(i * 7);
        in[i] = (unsigned char)(i * 13);
    }
    if (dt == COHORT_BFLOAT16 || dt == COHORT_FLOAT16) {
        uint16_t *a = (uint16_t *)io, *b = (uint16_t *)in;
        for (size_t i = 0; i < n; i++) {
            a[i] = dt == COHORT_FLOAT16 ? coh_f32_to_f16((float)(i % 100) * 0.01f)
                                        : coh_f32_to_bf16((float)(i % 100) * 0.01f);
            b[i] = a[i];
        }
    } else if (dt == COHORT_FLOAT32) {
        float *a = (float *)io, *b = (float *)in;
        for (size_t i = 0; i < n; i++)
            a[i] = b[i] = (float)(i % 100) * 0.01f;
    }
    coh_reduce_fn k = coh_reduce_kernel(dt, op);
    /* calibrate: one batch takes >= 20 ms */
    int reps = 1;
    for (;;) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            k ? k(io, in, n) : (void)memcpy(io, in, bytes);
        if (now_s() - t0 > 0.02)
            break;
        reps *= 2;
    }
    double rates[9];
    for (int b = 0; b < 9; b++) {
        double t0 = now_s();
        for (int r = 0; r < reps; r++)
            k ? k(io, in, n) : (void)memcpy(io, in, bytes);
        double t = now_s() - t0;
        rates[b] = (double)bytes * reps / t / 1e9;
    }
    qsort(rates, 9, sizeof rates[0], cht_cmp_double);
    printf("%-18s %8zu KiB  median %6.2f GB/s  best %6.2f GB/s\n", label, bytes >> 10, rates[4],
           rates[8]);
    free(io);
    free(in);
}

static int parse(const char *dn, const char *on, cohort_dtype *dt, cohort_op *op)
{
    *dt = COHORT_DTYPE_COUNT;
    *op = COHORT_OP_COUNT;
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        if (!strcmp(dn, cohort_dtype_name((cohort_dtype)d)))
            *dt = (cohort_dtype)d;
    for (int o = 0; o < COHORT_OP_COUNT; o++)
        if (!strcmp(on, cohort_op_name((cohort_op)o)))
            *op = (cohort_op)o;
    return coh_op_valid(*dt, *op);
}

int main(int argc, char **argv)
{
    const char *def[] = {"float32", "sum", "bfloat16", "sum", "float16", "sum",
                         "float32", "max", "int32",    "sum"};
    const char **pairs = argc > 1 ? (const char **)argv + 1 : def;
    int np = argc > 1 ? (argc - 1) / 2 : 5;
    static const size_t sizes[] = {1u << 20, 64u << 20};
    for (size_t s = 0; s < 2; s++)
        measure("memcpy", sizes[s], COHORT_UINT8, COHORT_OP_COUNT);
    for (int p = 0; p < np; p++) {
        cohort_dtype dt;
        cohort_op op;
        if (!parse(pairs[2 * p], pairs[2 * p + 1], &dt, &op)) {
            fprintf(stderr, "invalid pair: %s %s\n", pairs[2 * p], pairs[2 * p + 1]);
            return 2;
        }
        char label[64];
        snprintf(label, sizeof label, "%s %s", pairs[2 * p], pairs[2 * p + 1]);
        for (size_t s = 0; s < 2; s++)
            measure(label, sizes[s], dt, op);
    }
    return 0;
}
