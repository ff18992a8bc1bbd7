/* perf_check.c - deterministic inputs and exact result checks.
 *
 * Every input element is a function of (rank, global index, reduce op), so
 * each rank can compute what any peer sent and what the result must be
 * without extra communication. Values are small integers: sums, products
 * (+-1 and 2 only), min/max and bitwise folds are exact in every dtype
 * (bfloat16 holds integers exactly up to 256: 32 ranks x 7), so the check
 * compares exactly; only avg on floats is compared within a few ulps, since
 * the division may round either way. Integer overflow (int8 sums at many
 * ranks) wraps, and the expected value wraps the same way. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "perf.h"

/* ---- half-precision conversions (round to nearest even) ---- */

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) /* inf or nan */
        return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
    if (absx >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return sign | 0x7c00;
    if (absx < 0x38800000u) { /* below the smallest normal: subnormal or zero */
        float a;
        memcpy(&a, &absx, sizeof a);
        /* a * 2^24 rounded to nearest even is the subnormal mantissa. */
        return sign | (uint16_t)nearbyintf(a * 16777216.0f);
    }
    uint32_t mant = absx + 0xc8000fffu + ((absx >> 13) & 1); /* rebias exponent, round */
    return sign | (uint16_t)(mant >> 13);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* ---- element access ---- */

static int is_float(cohort_dtype dt)
{
    return dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16 || dt == COHORT_FLOAT32 ||
           dt == COHORT_FLOAT64;
}

static int is_unsigned(cohort_dtype dt)
{
    return dt == COHORT_UINT8 || dt == COHORT_UINT32 || dt == COHORT_UINT64;
}

/* Stores an integer-valued v; integers wrap to the dtype's width. */
static void put(void *buf, cohort_dtype dt, size_t i, double v)
{
    switch (dt) {
    case COHORT_INT8:
    case COHORT_UINT8:
        ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)(int64_t)v;
        break;
    case COHORT_INT32:
    case COHORT_UINT32:
        ((uint32_t *)buf)[i] = (uint32_t)(uint64_t)(int64_t)v;
        break;
    case COHORT_INT64:
    case COHORT_UINT64:
        ((uint64_t *)buf)[i] = (uint64_t)(int64_t)v;
        break;
    case COHORT_FLOAT16:
        ((uint16_t *)buf)[i] = f32_to_f16((float)v);
        break;
    case COHORT_BFLOAT16:
        ((uint16_t *)buf)[i] = f32_to_bf16((float)v);
        break;
    case COHORT_FLOAT32:
        ((float *)buf)[i] = (float)v;
        break;
    case COHORT_FLOAT64:
        ((double *)buf)[i] = v;
        break;
    default:
        break;
    }
}

/* Integers as their raw bits (compared exactly); floats as doubles. */
static uint64_t get_bits(const void *buf, cohort_dtype dt, size_t i)
{
    switch (dt) {
    case COHORT_INT8:
    case COHORT_UINT8:
        return ((const uint8_t *)buf)[i];
    case COHORT_INT32:
    case COHORT_UINT32:
        return ((const uint32_t *)buf)[i];
    case COHORT_INT64:
    case COHORT_UINT64:
        return ((const uint64_t *)buf)[i];
    case COHORT_FLOAT16:
    case COHORT_BFLOAT16:
        return ((const uint16_t *)buf)[i];
    default:
        return 0;
    }
}

static double get_float(const void *buf, cohort_dtype dt, size_t i)
{
    switch (dt) {
    case COHORT_FLOAT16:
        return f16_to_f32(((const uint16_t *)buf)[i]);
    case COHORT_BFLOAT16:
        return bf16_to_f32(((const uint16_t *)buf)[i]);
    case COHORT_FLOAT32:
        return ((const float *)buf)[i];
    case COHORT_FLOAT64:
        return ((const double *)buf)[i];
    default:
        return 0;
    }
}

/* ---- the pattern ---- */

static double value(cohort_dtype dt, cohort_op op, int r, size_t i)
{
    switch (op) {
    case COHORT_PROD: {
        /* +-1 and 2 only: products stay exact powers of two. */
        double v = ((i + (size_t)r) % 4 == 0) ? 2 : 1;
        if (!is_unsigned(dt) && ((size_t)r + 3 * i) % 5 == 0)
            v = -v;
        return v;
    }
    case COHORT_BAND:
    case COHORT_BOR:
    case COHORT_BXOR:
        return (double)((((unsigned)r * 37u + (unsigned)(i % 1024) * 11u + 5u) ^ ((unsigned)r << 3)) &
                        0x7fu);
    default: {
        double v = (double)(((size_t)r * 7 + i % 13) % 11);
        return is_unsigned(dt) ? v : v - 3;
    }
    }
}

void perf_fill(void *buf, cohort_dtype dt, cohort_op op, int r, size_t first, size_t n)
{
    for (size_t k = 0; k < n; k++)
        put(buf, dt, k, value(dt, op, r, first + k));
}

/* The exact reduction of element i over ranks 0..n-1, in the integer or
 * double domain (the caller wraps/rounds it through put()). */
static double fold(cohort_dtype dt, cohort_op op, int n, size_t i)
{
    double acc = value(dt, op, 0, i);
    uint64_t bits = (uint64_t)acc;
    for (int r = 1; r < n; r++) {
        double v = value(dt, op, r, i);
        switch (op) {
        case COHORT_SUM:
        case COHORT_AVG:
            acc += v;
            break;
        case COHORT_PROD:
            acc *= v;
            break;
        case COHORT_MIN:
            acc = v < acc ? v : acc;
            break;
        case COHORT_MAX:
            acc = v > acc ? v : acc;
            break;
        case COHORT_BAND:
            bits &= (uint64_t)v;
            break;
        case COHORT_BOR:
            bits |= (uint64_t)v;
            break;
        case COHORT_BXOR:
            bits ^= (uint64_t)v;
            break;
        default:
            break;
        }
    }
    if (op == COHORT_BAND || op == COHORT_BOR || op == COHORT_BXOR)
        return (double)bits;
    if (op == COHORT_AVG)
        acc /= n;
    return acc;
}

/* Compares got[gi] with the expected value want (in the value domain);
 * returns 1 if equal. avg on floats allows 4 ulps of the dtype. */
static int same(const void *got, size_t gi, cohort_dtype dt, cohort_op op, double want, char *desc,
                size_t desclen)
{
    if (is_float(dt)) {
        double g = get_float(got, dt, gi);
        double w;
        /* Round the expectation to the dtype first (exact for integers). */
        union {
            double d;
            float f;
            uint16_t h;
        } tmp;
        put(&tmp, dt, 0, want);
        w = get_float(&tmp, dt, 0);
        int ok;
        if (op == COHORT_AVG) {
            double ulp = dt == COHORT_FLOAT64   ? 0x1p-52
                         : dt == COHORT_FLOAT32 ? 0x1p-23
                         : dt == COHORT_FLOAT16 ? 0x1p-10
                                                : 0x1p-7;
            double scale = fabs(want) > 1 ? fabs(want) : 1;
            ok = fabs(g - want) <= 4 * ulp * scale;
        } else {
            ok = g == w;
        }
        if (!ok)
            snprintf(desc, desclen, "got %.17g, want %.17g", g, w);
        return ok;
    }
    uint64_t g = get_bits(got, dt, gi);
    uint64_t wb;
    union {
        uint64_t u;
        uint8_t b[8];
    } tmp = {0};
    put(&tmp, dt, 0, want);
    wb = get_bits(&tmp, dt, 0);
    if (g != wb) {
        snprintf(desc, desclen, "got 0x%llx, want 0x%llx (%.0f)", (unsigned long long)g,
                 (unsigned long long)wb, want);
        return 0;
    }
    return 1;
}

/* Counts mismatches of buf[k] (k < n) against want(k); describes the first. */
#define CHECK_RANGE(bufp, n, wantexpr, what)                                                       \
    do {                                                                                           \
        for (size_t k = 0; k < (n); k++) {                                                         \
            char d_[160];                                                                          \
            if (!same((bufp), k, dt, redop, (wantexpr), d_, sizeof d_)) {                          \
                if (!bad)                                                                          \
                    snprintf(msg, msglen, "%s element %zu: %s", (what), k, d_);                    \
                bad++;                                                                             \
            }                                                                                      \
        }                                                                                          \
    } while (0)

size_t perf_verify(enum perf_op op, const void *send, const void *recv, size_t count,
                   cohort_dtype dt, cohort_op redop, int root, int rank, int n, char *msg,
                   size_t msglen)
{
    size_t bad = 0;
    size_t c = count;
    size_t total = c * (size_t)n;
    msg[0] = 0;
    switch (op) {
    case OP_ALL_REDUCE:
        CHECK_RANGE(recv, c, fold(dt, redop, n, k), "recv");
        CHECK_RANGE(send, c, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_REDUCE:
        if (rank == root)
            CHECK_RANGE(recv, c, fold(dt, redop, n, k), "recv");
        CHECK_RANGE(send, c, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_BROADCAST:
        CHECK_RANGE(recv, c, value(dt, redop, root, k), "buffer");
        break;
    case OP_ALL_GATHER:
        CHECK_RANGE(recv, total, value(dt, redop, (int)(k / c), k % c), "recv");
        CHECK_RANGE(send, c, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_GATHER:
        if (rank == root)
            CHECK_RANGE(recv, total, value(dt, redop, (int)(k / c), k % c), "recv");
        CHECK_RANGE(send, c, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_SCATTER:
        CHECK_RANGE(recv, c, value(dt, redop, root, (size_t)rank * c + k), "recv");
        if (rank == root)
            CHECK_RANGE(send, total, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_REDUCE_SCATTER:
        CHECK_RANGE(recv, c, fold(dt, redop, n, (size_t)rank * c + k), "recv");
        CHECK_RANGE(send, total, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_ALL_TO_ALL:
        CHECK_RANGE(recv, total, value(dt, redop, (int)(k / c), (size_t)rank * c + k % c), "recv");
        CHECK_RANGE(send, total, value(dt, redop, rank, k), "send (must be unchanged)");
        break;
    case OP_SENDRECV: {
        int partner = (rank % 2 == 0) ? rank + 1 : rank - 1;
        if (partner < n)
            CHECK_RANGE(recv, c, value(dt, redop, partner, k), "recv");
        break;
    }
    default:
        break;
    }
    return bad;
}

void perf_poison(void *buf, size_t bytes)
{
    /* 0xff bytes: NaN in every float type, -1 / all-ones in the integer
     * ones; -1 is a pattern value at some elements, but stale output then
     * still mismatches at most of the others. */
    memset(buf, 0xff, bytes);
}
