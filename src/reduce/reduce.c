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
#if defined(__GNUC__) && !defined(__clang__) /* clang vectorises at -O2 already */
#pragma GCC optimize("tree-vectorize", "vect-cost-model=dynamic", "no-trapping-math")
#endif

#include "reduce/reduce.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reduce/half.h"
#include "util/bytes.h"
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

/* ---- kernel sets ---------------------------------------------------------
 * kernels.inc is compiled once per instruction-set variant: the baseline
 * (SSE2 on x86-64) and, on x86-64, AVX2 + F16C (float16 through the F16C
 * conversion instructions). The variant is picked once, at the
 * first lookup, from the CPU (no ifunc: safe under sanitizers and in static
 * binaries). Both give the same bits: the same C float32 operations (no FMA
 * contraction in ISO C mode), and F16C conversions that equal the portable
 * ones for every input (tests/reduce checks both sets). */

typedef struct kpair {
    coh_reduce_fn k2;
    coh_reduce3_fn k3;
} kpair;

typedef void (*half_acc_fn)(float *restrict, const uint16_t *restrict, size_t);

typedef struct kset_t {
    kpair k[COHORT_DTYPE_COUNT][COHORT_OP_COUNT];
    void (*load)(float *restrict, const uint16_t *restrict, size_t, int bf);
    void (*store)(uint16_t *restrict, const float *restrict, size_t, int bf);
    half_acc_fn acc[2][COHORT_OP_COUNT]; /* [bf][op] */
} kset_t;

#define KCAT2(a, b) a##b
#define KCAT(a, b) KCAT2(a, b)

#define KSFX
#define KATTR
#define KF16C 0
#include "reduce/kernels.inc"
#undef KSFX
#undef KATTR
#undef KF16C

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define COH_HAVE_AVX2_SET 1
#define KSFX _avx2
#define KATTR __attribute__((target("avx2,f16c")))
#define KF16C 1
#include "reduce/kernels.inc"
#undef KSFX
#undef KATTR
#undef KF16C
#else
#define COH_HAVE_AVX2_SET 0
#endif

static const kset_t *kernels(void)
{
    /* 0 unknown, 1 baseline, 2 avx2; a benign race: every thread computes
     * the same answer */
    static _Atomic int which;
    int w = atomic_load_explicit(&which, memory_order_relaxed);
    if (!w) {
        w = 1;
#if COH_HAVE_AVX2_SET
        __builtin_cpu_init();
        /* F16C through cpuid (leaf 1, ecx bit 29): clang 14 rejects "f16c"
         * as a __builtin_cpu_supports feature. */
        unsigned a = 0, b = 0, c = 0, d = 0;
        int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
        if (__builtin_cpu_supports("avx2") && f16c && !getenv("COHORT_REDUCE_BASELINE"))
            w = 2;
#endif
        atomic_store_explicit(&which, w, memory_order_relaxed);
    }
#if COH_HAVE_AVX2_SET
    if (w == 2)
        return &kernel_set_avx2;
#endif
    return &kernel_set;
}

int coh_op_valid(cohort_dtype dt, cohort_op op)
{
    if ((unsigned)dt >= COHORT_DTYPE_COUNT || (unsigned)op >= COHORT_OP_COUNT)
        return 0;
    return kernel_set.k[dt][op].k2 != NULL;
}

coh_reduce_fn coh_reduce_kernel(cohort_dtype dt, cohort_op op)
{
    return coh_op_valid(dt, op) ? kernels()->k[dt][op].k2 : NULL;
}

coh_reduce3_fn coh_reduce3_kernel(cohort_dtype dt, cohort_op op)
{
    return coh_op_valid(dt, op) ? kernels()->k[dt][op].k3 : NULL;
}

/* The mean of two in one pass: (a + b) rounded to the type, then * 0.5 -
 * exact, so the same bits as the sum divided by 2 afterwards. */
#define AVG2_FN(name, T)                                                                           \
    static void name(void *out, const void *a, const void *b, size_t n)                           \
    {                                                                                              \
        T *restrict o = out;                                                                       \
        const T *restrict x = a, *restrict y = b;                                                  \
        for (size_t i = 0; i < n; i++)                                                             \
            o[i] = (x[i] + y[i]) * (T)0.5;                                                         \
    }
AVG2_FN(avg2_f32, float)
AVG2_FN(avg2_f64, double)

coh_reduce3_fn coh_reduce3_div_kernel(cohort_dtype dt, cohort_op op, int div)
{
    if (op != COHORT_AVG || div == 0)
        return coh_reduce3_kernel(dt, op);
    if (div == 2 && dt == COHORT_FLOAT32)
        return avg2_f32;
    if (div == 2 && dt == COHORT_FLOAT64)
        return avg2_f64;
    return NULL;
}

/* ---- multi-source reduction ----------------------------------------------
 * Works block by block through a stack accumulator: the block is read from
 * every source before it is written, so out may alias any source. Half
 * types accumulate in float32 and round once per element. */

#define MULTI_BLOCK 1024 /* elements; the float32 accumulator is 4 KiB */

#define SMALL_BYTES 32 /* coh_small_copy (util/bytes.h) takes up to 32 */

/* AVG's division: x / 2^k and x * 2^-k are the same correctly rounded
 * value (2^-k is exact), so a power-of-two rank count multiplies - a
 * vector division costs several times the pass itself (session 28: 4.3
 * us per 64 KiB of float32, docs/performance.md). Other counts divide:
 * x * (1/n) may differ from x / n in the last bit. */
static inline int pow2(int n) { return n > 0 && (n & (n - 1)) == 0; }

/* p[i] /= d for i < n (d > 1), as a multiplication where that is exact */
#define DIV_FN(name, T)                                                                            \
    static void name(T *restrict p, size_t n, int d)                                               \
    {                                                                                              \
        if (pow2(d)) {                                                                             \
            T r = (T)1 / (T)d;                                                                     \
            for (size_t i = 0; i < n; i++)                                                         \
                p[i] = p[i] * r;                                                                   \
        } else {                                                                                   \
            for (size_t i = 0; i < n; i++)                                                         \
                p[i] = p[i] / (T)d;                                                                \
        }                                                                                          \
    }
DIV_FN(div_f32, float)
DIV_FN(div_f64, double)

void coh_reduce_multi(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt,
                      cohort_op op)
{
    coh_reduce_multi_div(out, srcs, nsrc, n, dt, op, 0);
}

void coh_reduce_multi_div(void *out, const void *const *srcs, int nsrc, size_t n, cohort_dtype dt,
                          cohort_op op, int div)
{
    if (nsrc <= 0 || n == 0 || !coh_op_valid(dt, op))
        return;
    if (op != COHORT_AVG)
        div = 0;
    size_t es = coh_dtype_size(dt);
    if (nsrc == 1) {
        if (out != srcs[0])
            memmove(out, srcs[0], n * es);
        coh_reduce_finish(out, n, dt, op, div); /* one rounding: the input is exact */
        return;
    }
    const kset_t *ks = kernels();
    if (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16) {
        int bf = dt == COHORT_BFLOAT16;
        half_acc_fn acc_fn = ks->acc[bf][op];
        float acc[MULTI_BLOCK];
        for (size_t off = 0; off < n; off += MULTI_BLOCK) {
            size_t m = COH_MIN(n - off, MULTI_BLOCK);
            ks->load(acc, (const uint16_t *)srcs[0] + off, m, bf);
            for (int s = 1; s < nsrc; s++)
                acc_fn(acc, (const uint16_t *)srcs[s] + off, m);
            if (div > 1) /* the mean in float32, then the one rounding */
                div_f32(acc, m, div);
            ks->store((uint16_t *)out + off, acc, m, bf);
        }
        return;
    }
    /* Other types: the accumulator is a block of the type itself (the
     * pairwise kernel is already exact in the type's own arithmetic). */
    coh_reduce_fn k2 = ks->k[dt][op].k2;
    _Alignas(64) unsigned char acc[MULTI_BLOCK * 8];
    if (n * es <= SMALL_BYTES) { /* an 8 B all_reduce: no libc memcpy calls */
        coh_small_copy(acc, srcs[0], n * es);
        for (int s = 1; s < nsrc; s++)
            k2(acc, srcs[s], n);
        coh_small_copy(out, acc, n * es);
        if (op == COHORT_AVG)
            coh_reduce_finish(out, n, dt, op, div);
        return;
    }
    if (n * es <= sizeof acc) { /* one block (every small call): no division for blk */
        memcpy(acc, srcs[0], n * es);
        for (int s = 1; s < nsrc; s++)
            k2(acc, srcs[s], n);
        memcpy(out, acc, n * es);
        coh_reduce_finish(out, n, dt, op, div);
        return;
    }
    size_t blk = sizeof acc / es;
    for (size_t off = 0; off < n; off += blk) {
        size_t m = COH_MIN(n - off, blk);
        memcpy(acc, (const char *)srcs[0] + off * es, m * es);
        for (int s = 1; s < nsrc; s++)
            k2(acc, (const char *)srcs[s] + off * es, m);
        coh_reduce_finish(acc, m, dt, op, div); /* in cache: no second pass over out */
        memcpy((char *)out + off * es, acc, m * es);
    }
}

/* ---- AVG finishing ------------------------------------------------------- */

void coh_reduce_finish(void *buf, size_t n, cohort_dtype dt, cohort_op op, int nranks)
{
    if (op != COHORT_AVG || nranks <= 1 || n == 0)
        return;
    switch (dt) {
    case COHORT_FLOAT32:
        div_f32(buf, n, nranks);
        break;
    case COHORT_FLOAT64:
        div_f64(buf, n, nranks);
        break;
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
