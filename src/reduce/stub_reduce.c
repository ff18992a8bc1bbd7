/* stub_reduce.c - generated placeholder: every function fails with COHORT_ERR_UNSUPPORTED
 * until the module lands. Delete this file when implementing the module. */
#include "reduce/reduce.h"
#include <stddef.h>

int coh_op_valid(cohort_dtype dt, cohort_op op)
{
    (void)dt;
    (void)op;
    return 0;
}

coh_reduce_fn coh_reduce_kernel(cohort_dtype dt, cohort_op op)
{
    (void)dt;
    (void)op;
    return 0;
}

coh_reduce3_fn coh_reduce3_kernel(cohort_dtype dt, cohort_op op)
{
    (void)dt;
    (void)op;
    return 0;
}

void coh_reduce_multi(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt, cohort_op op)
{
    (void)out;
    (void)srcs;
    (void)nsrc;
    (void)n;
    (void)dt;
    (void)op;
}

void coh_reduce_finish(void *buf, size_t n, cohort_dtype dt, cohort_op op, int nranks)
{
    (void)buf;
    (void)n;
    (void)dt;
    (void)op;
    (void)nranks;
}

float coh_f16_to_f32(uint16_t h)
{
    (void)h;
    return 0;
}

uint16_t coh_f32_to_f16(float f)
{
    (void)f;
    return 0;
}

float coh_bf16_to_f32(uint16_t h)
{
    (void)h;
    return 0;
}

uint16_t coh_f32_to_bf16(float f)
{
    (void)f;
    return 0;
}

