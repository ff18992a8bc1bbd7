/*
 * reduce.h - dtype x op reduction kernels.
 *
 * Kernels are plain loops the compiler vectorises (-O2 -ftree-vectorize on
 * this file). float16/bfloat16 convert to float32, reduce, and round back to
 * nearest even; the multi-source form accumulates every source in float32
 * and rounds once.
 */
#ifndef COH_REDUCE_H
#define COH_REDUCE_H

#include <stddef.h>

#include "cohort.h"

/* cohort_dtype_size without the call through the exported symbol (the
 * per-call path asks it three times; 0 for a value outside the enum). */
extern const unsigned char coh_dtype_sizes[COHORT_DTYPE_COUNT];
static inline size_t coh_dtype_size(int dt)
{
    return (unsigned)dt < COHORT_DTYPE_COUNT ? coh_dtype_sizes[dt] : 0;
}

/* 1 if (dt, op) is a valid pair: AVG only for float types, BAND/BOR/BXOR only
 * for integer types, everything else for all. */
int coh_op_valid(cohort_dtype dt, cohort_op op);

/* inout[i] = inout[i] op in[i], n elements. AVG reduces as SUM (call
 * coh_reduce_finish afterwards). */
typedef void (*coh_reduce_fn)(void *inout, const void *in, size_t n);
coh_reduce_fn coh_reduce_kernel(cohort_dtype dt, cohort_op op);

/* out[i] = a[i] op b[i] (out may alias a or b). */
typedef void (*coh_reduce3_fn)(void *out, const void *a, const void *b, size_t n);
coh_reduce3_fn coh_reduce3_kernel(cohort_dtype dt, cohort_op op);
/* As coh_reduce3_kernel, for a fold that divides an AVG by div (0: none):
 * a float32/float64 AVG over 2 ranks sums and halves in one pass; NULL
 * where no two-source kernel divides (use coh_reduce_multi_div). */
coh_reduce3_fn coh_reduce3_div_kernel(cohort_dtype dt, cohort_op op, int div);

/* out[i] = srcs[0][i] op ... op srcs[nsrc-1][i]; out may alias a source.
 * fp16/bf16 accumulate in float32 and round once. */
void coh_reduce_multi(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt,
                      cohort_op op);

/* 1 for a float16/bfloat16 AVG: a fold that sees every rank's contribution
 * divides its float32 accumulator before the one rounding
 * (coh_reduce_multi_div), instead of rounding the sum and dividing that. */
static inline int coh_avg_wide(int dt, int op)
{
    return op == COHORT_AVG && (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16);
}

/* 1 for every AVG a fold that sees every rank's contribution divides
 * itself (AVG is defined for the float types only): float16/bfloat16 as
 * above, float32/float64 the folded sum piece by piece while it is in
 * cache - the same values as the sum divided afterwards, without a second
 * pass over the result (session 28: +2 ms on a 16 MiB all_reduce). */
static inline int coh_avg_folds(int dt, int op)
{
    return op == COHORT_AVG && (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16 ||
                                dt == COHORT_FLOAT32 || dt == COHORT_FLOAT64);
}

/* coh_reduce_multi, and for AVG with div > 0 the division by div as well:
 * float16/bfloat16 divide the float32 accumulator and round once (the
 * mean of the halves within half an ulp); other types divide the folded
 * result as coh_reduce_finish does, block by block while it is in cache.
 * div == 0: exactly coh_reduce_multi. */
void coh_reduce_multi_div(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt,
                          cohort_op op, int div);

/* After a SUM that implements AVG over nranks: divide in place. No-op for
 * other ops. */
void coh_reduce_finish(void *buf, size_t n, cohort_dtype dt, cohort_op op, int nranks);

/* Conversions (exposed for tests and the reference implementation). */
float coh_f16_to_f32(uint16_t h);
uint16_t coh_f32_to_f16(float f);
float coh_bf16_to_f32(uint16_t h);
uint16_t coh_f32_to_bf16(float f);

#endif
