/*
 * reduce.c - the dtype x op reduction kernels.
 *
 * Every kernel is a plain counted loop over restrict pointers with a
 * branch-free body, so gcc vectorises it (checked with -fopt-info-vec; the
 * pragma below turns on the full vectoriser for this file only, since -O2's
 * "very cheap" cost model refuses loops with a runtime trip count).
 * no-trapping-math lets gcc if-convert the selects in the float16 and
 * MIN/MAX bodies: it changes no result (FP exceptions are masked and no
 * code here reads the flags), it only stops gcc from assuming that an FP op
 * in a select arm could trap.
 *
 * Semantics, chosen so that every rank computes bitwise-identical results
 * whatever order an algorithm combines its operands in:
 *  - every op is commutative bit for bit (NaN payloads aside): integer
 *    SUM/PROD wrap (done in the unsigned type: no signed-overflow UB);
 *    float MIN/MAX propagate NaN and order -0 below +0, so min(+0,-0) is -0
 *    in either order (a plain a<b?a:b would return whichever came first);
 *  - float16/bfloat16 convert to float32, combine, and round back to nearest
 *    even once per pairwise combine; coh_reduce_multi rounds once overall;
 *  - AVG reduces as SUM; coh_reduce_finish divides by the rank count.
 */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")

#include "reduce/reduce.h"

#include <stdint.h>
#include <string.h>

#include "reduce/half.h"
#include "util/util.h"

/* ---- element ops --------------------------------------------------------
 * OP_<name>(T, U, a, b): T the storage type, U its unsigned twin. */
#define OP_SUM_I(T, U, a, b) ((T)((U)(a) + (U)(b)))
#define OP_PROD_I(T, U, a, b) ((T)((U)(a) * (U)(b)))
#define OP_MIN_I(T, U, a, b) ((a) < (b) ? (a) : (b))
#define OP_MAX_I(T, U, a, b) ((a) > (b) ? (a) : (b))
#define OP_BAND_I(T, U, a, b) ((T)((U)(a) & (U)(b)))
#define OP_BOR_I(T, U, a, b) ((T)((U)(a) | (U)(b)))
#define OP_BXOR_I(T, U, a, b) ((T)((U)(a) ^ (U)(b)))

#define OP_SUM_F(T, U, a, b) ((a) + (b))
#define OP_PROD_F(T, U, a, b) ((a) * (b))

/* Float MIN/MAX: NaN if either is NaN (a + b is then NaN); equal operands
 * (including +0 vs -0) combine their bit patterns so that the result does
 * not depend on operand order: OR of the signs for min, AND for max. */
static inline float fmin_f32(float a, float b)
{
    float r = a < b ? a : b;
    uint32_t z = coh__f32_bits(a) | coh__f32_bits(b);
    r = a == b ? coh__f32_from_bits(z) : r;
    return (a != a || b != b) ? a + b : r;
}
static inline float fmax_f32(float a, float b)
{
    float r = a > b ? a : b;
    uint32_t z = coh__f32_bits(a) & coh__f32_bits(b);
    r = a == b ? coh__f32_from_bits(z) : r;
    return (a != a || b != b) ? a + b : r;
}
static inline double fmin_f64(double a, double b)
{
    uint64_t ua, ub, uz;
    memcpy(&ua, &a, 8);
    memcpy(&ub, &b, 8);
    uz = ua | ub;
    double z;
    memcpy(&z, &uz, 8);
    double r = a < b ? a : b;
    r = a == b ? z : r;
    return (a != a || b != b) ? a + b : r;
}
static inline double fmax_f64(double a, double b)
{
    uint64_t ua, ub, uz;
    memcpy(&ua, &a, 8);
    memcpy(&ub, &b, 8);
    uz = ua & ub;
    double z;
    memcpy(&z, &uz, 8);
    double r = a > b ? a : b;
    r = a == b ? z : r;
    return (a != a || b != b) ? a + b : r;
}
#define OP_MIN_F32(T, U, a, b) fmin_f32((a), (b))
#define OP_MAX_F32(T, U, a, b) fmax_f32((a), (b))
#define OP_MIN_F64(T, U, a, b) fmin_f64((a), (b))
#define OP_MAX_F64(T, U, a, b) fmax_f64((a), (b))

/* x86-64: an AVX2 clone of every kernel next to the baseline SSE2 one,
 * picked once at load time (ifunc). Both are the same C, so both give the
 * same bits: no FMA contraction (ISO C mode), same IEEE operations. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define COH_KERNEL __attribute__((target_clones("avx2", "default")))
#else
#define COH_KERNEL
#endif

/* ---- kernel generators --------------------------------------------------
 * K2: io[i] = io[i] op in[i]. K3r: out = a op b, no aliasing. K3: the
 * exported 3-operand form; aliasing out with a or b reduces to K2, which is
 * correct because every op is commutative. */
#define K2(name, T, U, OP)                                                                         \
    COH_KERNEL static void name##_2(void *restrict io_, const void *restrict in_, size_t n)        \
    {                                                                                              \
        T *restrict io = io_;                                                                      \
        const T *restrict in = in_;                                                                \
        for (size_t i = 0; i < n; i++)                                                             \
            io[i] = OP(T, U, io[i], in[i]);                                                        \
    }                                                                                              \
    COH_KERNEL static void name##_3r(void *restrict o_, const void *restrict a_,                   \
                                     const void *restrict b_, size_t n)                            \
    {                                                                                              \
        T *restrict o = o_;                                                                        \
        const T *restrict a = a_;                                                                  \
        const T *restrict b = b_;                                                                  \
        for (size_t i = 0; i < n; i++)                                                             \
            o[i] = OP(T, U, a[i], b[i]);                                                           \
    }                                                                                              \
    static void name##_3(void *o, const void *a, const void *b, size_t n)                          \
    {                                                                                              \
        if (o == a)                                                                                \
            name##_2(o, b, n);                                                                     \
        else if (o == b)                                                                           \
            name##_2(o, a, n);                                                                     \
        else                                                                                       \
            name##_3r(o, a, b, n);                                                                 \
    }

/* Half types: widen both operands, combine in float32, round once. */
#define KH(name, CVT_IN, CVT_OUT, OP)                                                              \
    COH_KERNEL static void name##_2(void *restrict io_, const void *restrict in_, size_t n)        \
    {                                                                                              \
        uint16_t *restrict io = io_;                                                               \
        const uint16_t *restrict in = in_;                                                         \
        for (size_t i = 0; i < n; i++)                                                             \
            io[i] = CVT_OUT(OP(float, uint32_t, CVT_IN(io[i]), CVT_IN(in[i])));                    \
    }                                                                                              \
    COH_KERNEL static void name##_3r(void *restrict o_, const void *restrict a_,                   \
                                     const void *restrict b_, size_t n)                            \
    {                                                                                              \
        uint16_t *restrict o = o_;                                                                 \
        const uint16_t *restrict a = a_;                                                           \
        const uint16_t *restrict b = b_;                                                           \
        for (size_t i = 0; i < n; i++)                                                             \
            o[i] = CVT_OUT(OP(float, uint32_t, CVT_IN(a[i]), CVT_IN(b[i])));                       \
    }                                                                                              \
    static void name##_3(void *o, const void *a, const void *b, size_t n)                          \
    {                                                                                              \
        if (o == a)                                                                                \
            name##_2(o, b, n);                                                                     \
        else if (o == b)                                                                           \
            name##_2(o, a, n);                                                                     \
        else                                                                                       \
            name##_3r(o, a, b, n);                                                                 \
    }

#define INT_KERNELS(tn, T, U)                                                                      \
    K2(tn##_sum, T, U, OP_SUM_I)                                                                   \
    K2(tn##_prod, T, U, OP_PROD_I)                                                                 \
    K2(tn##_min, T, U, OP_MIN_I)                                                                   \
    K2(tn##_max, T, U, OP_MAX_I)                                                                   \
    K2(tn##_band, T, U, OP_BAND_I)                                                                 \
    K2(tn##_bor, T, U, OP_BOR_I)                                                                   \
    K2(tn##_bxor, T, U, OP_BXOR_I)

INT_KERNELS(i8, int8_t, uint8_t)
INT_KERNELS(u8, uint8_t, uint8_t)
INT_KERNELS(i32, int32_t, uint32_t)
INT_KERNELS(u32, uint32_t, uint32_t)
INT_KERNELS(i64, int64_t, uint64_t)
INT_KERNELS(u64, uint64_t, uint64_t)

K2(f32_sum, float, uint32_t, OP_SUM_F)
K2(f32_prod, float, uint32_t, OP_PROD_F)
K2(f32_min, float, uint32_t, OP_MIN_F32)
K2(f32_max, float, uint32_t, OP_MAX_F32)
K2(f64_sum, double, uint64_t, OP_SUM_F)
K2(f64_prod, double, uint64_t, OP_PROD_F)
K2(f64_min, double, uint64_t, OP_MIN_F64)
K2(f64_max, double, uint64_t, OP_MAX_F64)

KH(f16_sum, coh__f16_to_f32, coh__f32_to_f16, OP_SUM_F)
KH(f16_prod, coh__f16_to_f32, coh__f32_to_f16, OP_PROD_F)
KH(f16_min, coh__f16_to_f32, coh__f32_to_f16, OP_MIN_F32)
KH(f16_max, coh__f16_to_f32, coh__f32_to_f16, OP_MAX_F32)
KH(bf16_sum, coh__bf16_to_f32, coh__f32_to_bf16, OP_SUM_F)
KH(bf16_prod, coh__bf16_to_f32, coh__f32_to_bf16, OP_PROD_F)
KH(bf16_min, coh__bf16_to_f32, coh__f32_to_bf16, OP_MIN_F32)
KH(bf16_max, coh__bf16_to_f32, coh__f32_to_bf16, OP_MAX_F32)

/* ---- tables ------------------------------------------------------------- */

typedef struct kpair {
    coh_reduce_fn k2;
    coh_reduce3_fn k3;
} kpair;

#define KP(name) {name##_2, name##_3}
#define INT_ROW(tn)                                                                                \
    {                                                                                              \
        [COHORT_SUM] = KP(tn##_sum), [COHORT_PROD] = KP(tn##_prod), [COHORT_MIN] = KP(tn##_min),   \
        [COHORT_MAX] = KP(tn##_max), [COHORT_BAND] = KP(tn##_band), [COHORT_BOR] = KP(tn##_bor),   \
        [COHORT_BXOR] = KP(tn##_bxor),                                                             \
    }
/* AVG is SUM until coh_reduce_finish. */
#define FLT_ROW(tn)                                                                                \
    {                                                                                              \
        [COHORT_SUM] = KP(tn##_sum), [COHORT_PROD] = KP(tn##_prod), [COHORT_MIN] = KP(tn##_min),   \
        [COHORT_MAX] = KP(tn##_max), [COHORT_AVG] = KP(tn##_sum),                                  \
    }

static const kpair kernels[COHORT_DTYPE_COUNT][COHORT_OP_COUNT] = {
    [COHORT_INT8] = INT_ROW(i8),       [COHORT_UINT8] = INT_ROW(u8),
    [COHORT_INT32] = INT_ROW(i32),     [COHORT_UINT32] = INT_ROW(u32),
    [COHORT_INT64] = INT_ROW(i64),     [COHORT_UINT64] = INT_ROW(u64),
    [COHORT_FLOAT16] = FLT_ROW(f16),   [COHORT_BFLOAT16] = FLT_ROW(bf16),
    [COHORT_FLOAT32] = FLT_ROW(f32),   [COHORT_FLOAT64] = FLT_ROW(f64),
};

int coh_op_valid(cohort_dtype dt, cohort_op op)
{
    if ((unsigned)dt >= COHORT_DTYPE_COUNT || (unsigned)op >= COHORT_OP_COUNT)
        return 0;
    return kernels[dt][op].k2 != NULL;
}

coh_reduce_fn coh_reduce_kernel(cohort_dtype dt, cohort_op op)
{
    return coh_op_valid(dt, op) ? kernels[dt][op].k2 : NULL;
}

coh_reduce3_fn coh_reduce3_kernel(cohort_dtype dt, cohort_op op)
{
    return coh_op_valid(dt, op) ? kernels[dt][op].k3 : NULL;
}

/* ---- multi-source reduction ----------------------------------------------
 * Works block by block through a stack accumulator: the block is read from
 * every source before it is written, so out may alias any source. Half
 * types accumulate in float32 and round once per element. */

#define MULTI_BLOCK 1024 /* elements; the float32 accumulator is 4 KiB */

COH_KERNEL static void half_load(float *restrict acc, const uint16_t *restrict s, size_t n, int bf)
{
    if (bf)
        for (size_t i = 0; i < n; i++)
            acc[i] = coh__bf16_to_f32(s[i]);
    else
        for (size_t i = 0; i < n; i++)
            acc[i] = coh__f16_to_f32(s[i]);
}

COH_KERNEL static void half_store(uint16_t *restrict d, const float *restrict acc, size_t n, int bf)
{
    if (bf)
        for (size_t i = 0; i < n; i++)
            d[i] = coh__f32_to_bf16(acc[i]);
    else
        for (size_t i = 0; i < n; i++)
            d[i] = coh__f32_to_f16(acc[i]);
}

#define HALF_ACC(name, CVT, OP)                                                                    \
    COH_KERNEL static void name(float *restrict acc, const uint16_t *restrict s, size_t n)         \
    {                                                                                              \
        for (size_t i = 0; i < n; i++)                                                             \
            acc[i] = OP(float, uint32_t, acc[i], CVT(s[i]));                                       \
    }
HALF_ACC(f16_acc_sum, coh__f16_to_f32, OP_SUM_F)
HALF_ACC(f16_acc_prod, coh__f16_to_f32, OP_PROD_F)
HALF_ACC(f16_acc_min, coh__f16_to_f32, OP_MIN_F32)
HALF_ACC(f16_acc_max, coh__f16_to_f32, OP_MAX_F32)
HALF_ACC(bf16_acc_sum, coh__bf16_to_f32, OP_SUM_F)
HALF_ACC(bf16_acc_prod, coh__bf16_to_f32, OP_PROD_F)
HALF_ACC(bf16_acc_min, coh__bf16_to_f32, OP_MIN_F32)
HALF_ACC(bf16_acc_max, coh__bf16_to_f32, OP_MAX_F32)

typedef void (*half_acc_fn)(float *restrict, const uint16_t *restrict, size_t);

static half_acc_fn half_acc(int bf, cohort_op op)
{
    switch (op) {
    case COHORT_SUM:
    case COHORT_AVG:
        return bf ? bf16_acc_sum : f16_acc_sum;
    case COHORT_PROD:
        return bf ? bf16_acc_prod : f16_acc_prod;
    case COHORT_MIN:
        return bf ? bf16_acc_min : f16_acc_min;
    case COHORT_MAX:
        return bf ? bf16_acc_max : f16_acc_max;
    default:
        return NULL;
    }
}

void coh_reduce_multi(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt,
                      cohort_op op)
{
    if (nsrc <= 0 || n == 0 || !coh_op_valid(dt, op))
        return;
    size_t es = cohort_dtype_size(dt);
    if (nsrc == 1) {
        if (out != srcs[0])
            memmove(out, srcs[0], n * es);
        return;
    }
    if (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16) {
        int bf = dt == COHORT_BFLOAT16;
        half_acc_fn acc_fn = half_acc(bf, op);
        float acc[MULTI_BLOCK];
        for (size_t off = 0; off < n; off += MULTI_BLOCK) {
            size_t m = COH_MIN(n - off, MULTI_BLOCK);
            half_load(acc, (const uint16_t *)srcs[0] + off, m, bf);
            for (int s = 1; s < nsrc; s++)
                acc_fn(acc, (const uint16_t *)srcs[s] + off, m);
            half_store((uint16_t *)out + off, acc, m, bf);
        }
        return;
    }
    /* Other types: the accumulator is a block of the type itself (the
     * pairwise kernel is already exact in the type's own arithmetic). */
    coh_reduce_fn k2 = kernels[dt][op].k2;
    _Alignas(64) unsigned char acc[MULTI_BLOCK * 8];
    size_t blk = sizeof acc / es;
    for (size_t off = 0; off < n; off += blk) {
        size_t m = COH_MIN(n - off, blk);
        memcpy(acc, (const char *)srcs[0] + off * es, m * es);
        for (int s = 1; s < nsrc; s++)
            k2(acc, (const char *)srcs[s] + off * es, m);
        memcpy((char *)out + off * es, acc, m * es);
    }
}

/* ---- AVG finishing ------------------------------------------------------- */

void coh_reduce_finish(void *buf, size_t n, cohort_dtype dt, cohort_op op, int nranks)
{
    if (op != COHORT_AVG || nranks <= 1 || n == 0)
        return;
    switch (dt) {
    case COHORT_FLOAT32: {
        float *restrict p = buf, d = (float)nranks;
        for (size_t i = 0; i < n; i++)
            p[i] = p[i] / d;
        break;
    }
    case COHORT_FLOAT64: {
        double *restrict p = buf, d = (double)nranks;
        for (size_t i = 0; i < n; i++)
            p[i] = p[i] / d;
        break;
    }
    case COHORT_FLOAT16: {
        uint16_t *restrict p = buf;
        float d = (float)nranks;
        for (size_t i = 0; i < n; i++)
            p[i] = coh__f32_to_f16(coh__f16_to_f32(p[i]) / d);
        break;
    }
    case COHORT_BFLOAT16: {
        uint16_t *restrict p = buf;
        float d = (float)nranks;
        for (size_t i = 0; i < n; i++)
            p[i] = coh__f32_to_bf16(coh__bf16_to_f32(p[i]) / d);
        break;
    }
    default:
        break; /* integer AVG is rejected by coh_op_valid before any call */
    }
}

/* ---- exported conversions ----------------------------------------------- */

float coh_f16_to_f32(uint16_t h) { return coh__f16_to_f32(h); }
uint16_t coh_f32_to_f16(float f) { return coh__f32_to_f16(f); }
float coh_bf16_to_f32(uint16_t h) { return coh__bf16_to_f32(h); }
uint16_t coh_f32_to_bf16(float f) { return coh__f32_to_bf16(f); }
