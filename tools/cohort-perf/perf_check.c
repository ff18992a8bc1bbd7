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
#include <stdlib.h>
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
    case COHORT_BXOR: {
        unsigned u = (unsigned)r * 37u + (unsigned)(i % 1024) * 11u + 5u;
        return (double)((u ^ ((unsigned)r << 3)) & 0x7fu);
    }
    default: {
        double v = (double)(((size_t)r * 7 + i % 13) % 11);
        return is_unsigned(dt) ? v : v - 3;
    }
    }
}

/* Every pattern is periodic in the element index (13 for the arithmetic
 * ops, lcm(4, 5) for prod, 1024 for the bitwise ones), and so is every
 * fold over ranks: filling and checking work one period at a time and
 * replicate or memcmp the rest, which keeps --check cheap at 64 MiB. */
static size_t period(cohort_op op)
{
    switch (op) {
    case COHORT_PROD:
        return 20;
    case COHORT_BAND:
    case COHORT_BOR:
    case COHORT_BXOR:
        return 1024;
    default:
        return 13;
    }
}

/* Elements per replicated block: a multiple of the period near 4 KiB. */
static size_t block_elems(cohort_dtype dt, cohort_op op)
{
    size_t p = period(op), es = cohort_dtype_size(dt);
    size_t k = (4096 / es + p - 1) / p;
    return (k ? k : 1) * p;
}

void perf_fill(void *buf, cohort_dtype dt, cohort_op op, int r, size_t first, size_t n)
{
    size_t b = block_elems(dt, op), es = cohort_dtype_size(dt);
    size_t head = n < b ? n : b;
    for (size_t k = 0; k < head; k++)
        put(buf, dt, k, value(dt, op, r, first + k));
    /* Doubling copies: [0, done) is filled and repeats with period b. */
    for (size_t done = head; done < n;) {
        size_t m = done < n - done ? done : n - done;
        memcpy((char *)buf + done * es, buf, m * es);
        done += m;
    }
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

/* Expected values of a run of elements: value(q, base + j) or the fold over
 * ranks of base + j, for j in [0, len). */
typedef struct want_fn {
    int fold;      /* 1: fold over n ranks; 0: value of rank q */
    int q, n;
    size_t base;
} want_fn;

static double want_at(const want_fn *w, cohort_dtype dt, cohort_op op, size_t j)
{
    return w->fold ? fold(dt, op, w->n, w->base + j) : value(dt, op, w->q, w->base + j);
}

/* Checks got[0, len) against w. Fast path: one block of expected values in
 * the dtype, memcmp per block; a block that differs (or avg on floats,
 * which is compared within ulps) is checked element by element, which is
 * the authority (it also accepts -0 == +0). Adds the wrong elements to
 * *bad and describes the first in msg. */
static void check_run(const void *got, size_t len, cohort_dtype dt, cohort_op op,
                      const want_fn *w, size_t index0, const char *what, size_t *bad, char *msg,
                      size_t msglen)
{
    if (!got)
        return; /* in place: no separate input to check */
    size_t es = cohort_dtype_size(dt), b = block_elems(dt, op);
    int exact = !(op == COHORT_AVG && is_float(dt));
    unsigned char *exp = NULL;
    if (exact && len > 0) {
        size_t m = len < b ? len : b;
        exp = malloc(m * es);
        if (exp)
            for (size_t j = 0; j < m; j++)
                put(exp, dt, j, want_at(w, dt, op, j));
    }
    for (size_t at = 0; at < len; at += b) {
        size_t m = len - at < b ? len - at : b;
        const unsigned char *g = (const unsigned char *)got + at * es;
        if (exp && memcmp(g, exp, m * es) == 0)
            continue;
        for (size_t j = 0; j < m; j++) {
            char d[160];
            if (!same(g, j, dt, op, want_at(w, dt, op, at + j), d, sizeof d)) {
                if (!*bad)
                    snprintf(msg, msglen, "%s element %zu: %s", what, index0 + at + j, d);
                (*bad)++;
            }
        }
    }
    free(exp);
}

size_t perf_verify(enum perf_op op, const void *send, const void *recv, size_t count,
                   cohort_dtype dt, cohort_op redop, int root, int rank, int n, char *msg,
                   size_t msglen)
{
    size_t bad = 0, c = count, total = c * (size_t)n, es = cohort_dtype_size(dt);
    const unsigned char *rb = recv;
    want_fn all = {1, 0, n, 0};         /* the fold of every rank's element k */
    want_fn mine = {0, rank, n, 0};     /* this rank's own input */
    const char *in = "send (must be unchanged)";
    msg[0] = 0;
    switch (op) {
    case OP_ALL_REDUCE:
    case OP_REDUCE:
        if (op == OP_ALL_REDUCE || rank == root)
            check_run(recv, c, dt, redop, &all, 0, "recv", &bad, msg, msglen);
        check_run(send, c, dt, redop, &mine, 0, in, &bad, msg, msglen);
        break;
    case OP_BROADCAST: {
        want_fn w = {0, root, n, 0};
        check_run(recv, c, dt, redop, &w, 0, "buffer", &bad, msg, msglen);
        break;
    }
    case OP_ALL_GATHER:
    case OP_GATHER:
        /* block q holds rank q's input */
        if (op == OP_ALL_GATHER || rank == root)
            for (int q = 0; q < n; q++) {
                want_fn w = {0, q, n, 0};
                check_run(rb + (size_t)q * c * es, c, dt, redop, &w, (size_t)q * c, "recv", &bad,
                          msg, msglen);
            }
        check_run(send, c, dt, redop, &mine, 0, in, &bad, msg, msglen);
        break;
    case OP_SCATTER: {
        want_fn w = {0, root, n, (size_t)rank * c};
        check_run(recv, c, dt, redop, &w, 0, "recv", &bad, msg, msglen);
        if (rank == root)
            check_run(send, total, dt, redop, &mine, 0, in, &bad, msg, msglen);
        break;
    }
    case OP_REDUCE_SCATTER: {
        want_fn w = {1, 0, n, (size_t)rank * c};
        check_run(recv, c, dt, redop, &w, 0, "recv", &bad, msg, msglen);
        check_run(send, total, dt, redop, &mine, 0, in, &bad, msg, msglen);
        break;
    }
    case OP_ALL_TO_ALL:
        /* block q holds what rank q sent to this rank: its block `rank` */
        for (int q = 0; q < n; q++) {
            want_fn w = {0, q, n, (size_t)rank * c};
            check_run(rb + (size_t)q * c * es, c, dt, redop, &w, (size_t)q * c, "recv", &bad, msg,
                      msglen);
        }
        check_run(send, total, dt, redop, &mine, 0, in, &bad, msg, msglen);
        break;
    case OP_SENDRECV: {
        int partner = (rank % 2 == 0) ? rank + 1 : rank - 1;
        if (partner < n) {
            want_fn w = {0, partner, n, 0};
            check_run(recv, c, dt, redop, &w, 0, "recv", &bad, msg, msglen);
        }
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
