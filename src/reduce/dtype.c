/* dtype.c - names and sizes of the public dtype and reduce-op enums. */
#include "cohort.h"

#include "reduce/reduce.h"

/* Sizes: read by coh_dtype_size (reduce.h), inlined on the per-call path. */
const unsigned char coh_dtype_sizes[COHORT_DTYPE_COUNT] = {
    [COHORT_INT8] = 1,    [COHORT_UINT8] = 1,    [COHORT_INT32] = 4,   [COHORT_UINT32] = 4,
    [COHORT_INT64] = 8,   [COHORT_UINT64] = 8,   [COHORT_FLOAT16] = 2, [COHORT_BFLOAT16] = 2,
    [COHORT_FLOAT32] = 4, [COHORT_FLOAT64] = 8,
};

static const char *const dtype_names[COHORT_DTYPE_COUNT] = {
    [COHORT_INT8] = "int8",       [COHORT_UINT8] = "uint8",       [COHORT_INT32] = "int32",
    [COHORT_UINT32] = "uint32",   [COHORT_INT64] = "int64",       [COHORT_UINT64] = "uint64",
    [COHORT_FLOAT16] = "float16", [COHORT_BFLOAT16] = "bfloat16", [COHORT_FLOAT32] = "float32",
    [COHORT_FLOAT64] = "float64",
};

static const char *const op_names[COHORT_OP_COUNT] = {
    [COHORT_SUM] = "sum", [COHORT_PROD] = "prod", [COHORT_MIN] = "min", [COHORT_MAX] = "max",
    [COHORT_AVG] = "avg", [COHORT_BAND] = "band", [COHORT_BOR] = "bor", [COHORT_BXOR] = "bxor",
};

/* The enums are signed in C; casting to unsigned rejects negative values and
 * values past the end with one comparison. */
size_t cohort_dtype_size(cohort_dtype dt)
{
    return coh_dtype_size(dt);
}

const char *cohort_dtype_name(cohort_dtype dt)
{
    return (unsigned)dt < COHORT_DTYPE_COUNT ? dtype_names[dt] : "invalid-dtype";
}

const char *cohort_op_name(cohort_op op)
{
    return (unsigned)op < COHORT_OP_COUNT ? op_names[op] : "invalid-op";
}
