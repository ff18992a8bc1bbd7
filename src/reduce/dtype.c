/* dtype.c - names and sizes of the public dtype and reduce-op enums. */
#include "cohort.h"

static const struct {
    size_t size;
    const char *name;
} dtypes[COHORT_DTYPE_COUNT] = {
    [COHORT_INT8] = {1, "int8"},         [COHORT_UINT8] = {1, "uint8"},
    [COHORT_INT32] = {4, "int32"},       [COHORT_UINT32] = {4, "uint32"},
    [COHORT_INT64] = {8, "int64"},       [COHORT_UINT64] = {8, "uint64"},
    [COHORT_FLOAT16] = {2, "float16"},   [COHORT_BFLOAT16] = {2, "bfloat16"},
    [COHORT_FLOAT32] = {4, "float32"},   [COHORT_FLOAT64] = {8, "float64"},
};

static const char *const op_names[COHORT_OP_COUNT] = {
    [COHORT_SUM] = "sum", [COHORT_PROD] = "prod", [COHORT_MIN] = "min", [COHORT_MAX] = "max",
    [COHORT_AVG] = "avg", [COHORT_BAND] = "band", [COHORT_BOR] = "bor", [COHORT_BXOR] = "bxor",
};

/* The enums are signed in C; casting to unsigned rejects negative values and
 * values past the end with one comparison. */
size_t cohort_dtype_size(cohort_dtype dt)
{
    return (unsigned)dt < COHORT_DTYPE_COUNT ? dtypes[dt].size : 0;
}

const char *cohort_dtype_name(cohort_dtype dt)
{
    return (unsigned)dt < COHORT_DTYPE_COUNT ? dtypes[dt].name : "invalid-dtype";
}

const char *cohort_op_name(cohort_op op)
{
    return (unsigned)op < COHORT_OP_COUNT ? op_names[op] : "invalid-op";
}
