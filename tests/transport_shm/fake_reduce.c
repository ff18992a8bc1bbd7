/*
 * fake_reduce.c - TEST ONLY. Reduction kernels standing in for src/reduce
 * until that module lands (defines every symbol of reduce.h so the
 * placeholder object is not linked). Multi-source reductions work on
 * chunks through a local accumulator, so `out` may alias any source, and
 * float16/bfloat16 accumulate in float32 and round once (as reduce.h
 * specifies). Signed integer arithmetic wraps (done in unsigned).
 */
#include <stdint.h>
#include <string.h>

#include "reduce/reduce.h"

float coh_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400u)) {
                man <<= 1;
                exp--;
            }
            man &= 0x3ffu;
            bits = sign | exp << 23 | man << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t coh_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf / nan */
        return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return (uint16_t)(sign | 0x7c00u);
    if (ax < 0x38800000u) { /* subnormal half (or zero) */
        if (ax < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
        /* value = m * 2^(e-150); the half subnormal unit is 2^-24 */
        uint32_t sh = 150 - 24 - e; /* bits to drop */
        uint32_t q = m >> sh, rem = m & ((1u << sh) - 1), mid = 1u << (sh - 1);
        if (rem > mid || (rem == mid && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t e = (ax >> 23) - 127 + 15, m = ax & 0x7fffffu;
    uint32_t q = e << 10 | m >> 13, rem = m & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1)))
        q++;
    return (uint16_t)(sign | q);
}

float coh_bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t coh_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

int coh_op_valid(cohort_dtype dt, cohort_op op)
{
    int isf = dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16 || dt == COHORT_FLOAT32 ||
              dt == COHORT_FLOAT64;
    if ((unsigned)dt >= COHORT_DTYPE_COUNT || (unsigned)op >= COHORT_OP_COUNT)
        return 0;
    if (op == COHORT_AVG)
        return isf;
    if (op == COHORT_BAND || op == COHORT_BOR || op == COHORT_BXOR)
        return !isf;
    return 1;
}

coh_reduce_fn coh_reduce_kernel(cohort_dtype dt, cohort_op op)
{
    (void)dt, (void)op;
    return NULL; /* not needed by the shm tests */
}

coh_reduce3_fn coh_reduce3_kernel(cohort_dtype dt, cohort_op op)
{
    (void)dt, (void)op;
    return NULL;
}

#define CHUNK 1024

/* Integer kernels on the unsigned type U (wrapping), stored as T. */
#define INT_MULTI(NAME, T, U)                                                                      \
    static void NAME(void *out, const void *const *srcs, int nsrc, size_t n, int op)               \
    {                                                                                              \
        U acc[CHUNK];                                                                              \
        for (size_t b = 0; b < n; b += CHUNK) {                                                    \
            size_t m = n - b < CHUNK ? n - b : CHUNK;                                              \
            const T *s0 = (const T *)srcs[0] + b;                                                  \
            for (size_t i = 0; i < m; i++)                                                         \
                acc[i] = (U)s0[i];                                                                 \
            for (int k = 1; k < nsrc; k++) {                                                       \
                const T *sk = (const T *)srcs[k] + b;                                              \
                switch (op) {                                                                      \
                case COHORT_SUM:                                                                   \
                case COHORT_AVG:                                                                   \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] = (U)(acc[i] + (U)sk[i]);                                           \
                    break;                                                                         \
                case COHORT_PROD:                                                                  \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] = (U)(acc[i] * (U)sk[i]);                                           \
                    break;                                                                         \
                case COHORT_MIN:                                                                   \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] = (T)acc[i] < sk[i] ? acc[i] : (U)sk[i];                            \
                    break;                                                                         \
                case COHORT_MAX:                                                                   \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] = (T)acc[i] > sk[i] ? acc[i] : (U)sk[i];                            \
                    break;                                                                         \
                case COHORT_BAND:                                                                  \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] &= (U)sk[i];                                                        \
                    break;                                                                         \
                case COHORT_BOR:                                                                   \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] |= (U)sk[i];                                                        \
                    break;                                                                         \
                default:                                                                           \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] ^= (U)sk[i];                                                        \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            T *o = (T *)out + b;                                                                   \
            for (size_t i = 0; i < m; i++)                                                         \
                o[i] = (T)acc[i];                                                                  \
        }                                                                                          \
    }

INT_MULTI(multi_i8, int8_t, uint8_t)
INT_MULTI(multi_u8, uint8_t, uint8_t)
INT_MULTI(multi_i32, int32_t, uint32_t)
INT_MULTI(multi_u32, uint32_t, uint32_t)
INT_MULTI(multi_i64, int64_t, uint64_t)
INT_MULTI(multi_u64, uint64_t, uint64_t)

/* Float kernels: load converts T -> A, store converts back. */
#define FLT_MULTI(NAME, T, A, LOAD, STORE)                                                         \
    static void NAME(void *out, const void *const *srcs, int nsrc, size_t n, int op)               \
    {                                                                                              \
        A acc[CHUNK];                                                                              \
        for (size_t b = 0; b < n; b += CHUNK) {                                                    \
            size_t m = n - b < CHUNK ? n - b : CHUNK;                                              \
            const T *s0 = (const T *)srcs[0] + b;                                                  \
            for (size_t i = 0; i < m; i++)                                                         \
                acc[i] = LOAD(s0[i]);                                                              \
            for (int k = 1; k < nsrc; k++) {                                                       \
                const T *sk = (const T *)srcs[k] + b;                                              \
                switch (op) {                                                                      \
                case COHORT_SUM:                                                                   \
                case COHORT_AVG:                                                                   \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] += LOAD(sk[i]);                                                     \
                    break;                                                                         \
                case COHORT_PROD:                                                                  \
                    for (size_t i = 0; i < m; i++)                                                 \
                        acc[i] *= LOAD(sk[i]);                                                     \
                    break;                                                                         \
                case COHORT_MIN:                                                                   \
                    for (size_t i = 0; i < m; i++) {                                               \
                        A v = LOAD(sk[i]);                                                         \
                        acc[i] = v < acc[i] ? v : acc[i];                                          \
                    }                                                                              \
                    break;                                                                         \
                default:                                                                           \
                    for (size_t i = 0; i < m; i++) {                                               \
                        A v = LOAD(sk[i]);                                                         \
                        acc[i] = v > acc[i] ? v : acc[i];                                          \
                    }                                                                              \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            T *o = (T *)out + b;                                                                   \
            for (size_t i = 0; i < m; i++)                                                         \
                o[i] = STORE(acc[i]);                                                              \
        }                                                                                          \
    }

#define ID(x) (x)
FLT_MULTI(multi_f32, float, float, ID, ID)
FLT_MULTI(multi_f64, double, double, ID, ID)
FLT_MULTI(multi_f16, uint16_t, float, coh_f16_to_f32, coh_f32_to_f16)
FLT_MULTI(multi_bf16, uint16_t, float, coh_bf16_to_f32, coh_f32_to_bf16)

void coh_reduce_multi(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt,
                      cohort_op op)
{
    switch (dt) {
    case COHORT_INT8: multi_i8(out, srcs, nsrc, n, op); break;
    case COHORT_UINT8: multi_u8(out, srcs, nsrc, n, op); break;
    case COHORT_INT32: multi_i32(out, srcs, nsrc, n, op); break;
    case COHORT_UINT32: multi_u32(out, srcs, nsrc, n, op); break;
    case COHORT_INT64: multi_i64(out, srcs, nsrc, n, op); break;
    case COHORT_UINT64: multi_u64(out, srcs, nsrc, n, op); break;
    case COHORT_FLOAT16: multi_f16(out, srcs, nsrc, n, op); break;
    case COHORT_BFLOAT16: multi_bf16(out, srcs, nsrc, n, op); break;
    case COHORT_FLOAT32: multi_f32(out, srcs, nsrc, n, op); break;
    case COHORT_FLOAT64: multi_f64(out, srcs, nsrc, n, op); break;
    default: break;
    }
}

void coh_reduce_finish(void *buf, size_t n, cohort_dtype dt, cohort_op op, int nranks)
{
    if (op != COHORT_AVG || nranks <= 1)
        return;
    switch (dt) {
    case COHORT_FLOAT32:
        for (size_t i = 0; i < n; i++)
            ((float *)buf)[i] /= (float)nranks;
        break;
    case COHORT_FLOAT64:
        for (size_t i = 0; i < n; i++)
            ((double *)buf)[i] /= (double)nranks;
        break;
    case COHORT_FLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] =
                coh_f32_to_f16(coh_f16_to_f32(((uint16_t *)buf)[i]) / (float)nranks);
        break;
    case COHORT_BFLOAT16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)buf)[i] =
                coh_f32_to_bf16(coh_bf16_to_f32(((uint16_t *)buf)[i]) / (float)nranks);
        break;
    default: break;
    }
}
