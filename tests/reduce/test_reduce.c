/*
 * test_reduce.c - the reduction kernels and float16/bfloat16 conversions,
 * checked against references written independently here (double arithmetic
 * with ldexp/rint, not the bit tricks of src/reduce/half.h) and, where the
 * CPU has F16C, against the hardware conversions.
 *
 * COHORT_FULL_MATRIX=1 widens the float32 -> half sweeps to all 2^32 inputs.
 */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "reduce/reduce.h"
#include "support/support.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_X86 1
#else
#define HAVE_X86 0
#endif

/* Check records every passing ck_assert (a write to its log file): loops over
 * millions of inputs assert through this instead. */
#define REQUIRE(cond, ...)                                                                         \
    do {                                                                                           \
        if (!(cond))                                                                               \
            ck_abort_msg(__VA_ARGS__);                                                             \
    } while (0)

static int full_matrix(void)
{
    const char *e = getenv("COHORT_FULL_MATRIX");
    return e && *e && strcmp(e, "0") != 0;
}

static uint32_t fbits(float f)
{
    uint32_t w;
    memcpy(&w, &f, 4);
    return w;
}
static float ffrom(uint32_t w)
{
    float f;
    memcpy(&f, &w, 4);
    return f;
}

/* ---- references --------------------------------------------------------- */

/* float16 -> float32 by the definition of the format. NaN: quiet, payload
 * shifted into the top of the float32 mantissa (what F16C does). */
static float ref_f16_to_f32(uint16_t h)
{
    uint32_t s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    if (e == 31) {
        if (m == 0)
            return s ? -INFINITY : INFINITY;
        return ffrom((s << 31) | 0x7FC00000u | (m << 13));
    }
    double v = e == 0 ? ldexp((double)m, -24) : ldexp((double)(m + 1024), (int)e - 25);
    return (float)(s ? -v : v);
}

/* float32 -> float16, round to nearest even, by scaling to the target
 * quantum and rint() (the FPU's default mode is nearest-even). */
static uint16_t ref_f32_to_f16(float f)
{
    uint32_t w = fbits(f);
    uint16_t sign = (uint16_t)((w >> 16) & 0x8000);
    if (isnan(f))
        return (uint16_t)(sign | 0x7E00 | ((w >> 13) & 0x3FF));
    double v = fabs((double)f);
    if (v >= 65520.0) /* halfway between 65504 and 2^16: ties to even = inf */
        return (uint16_t)(sign | 0x7C00);
    if (v == 0)
        return sign;
    int e = ilogb(v);
    if (e < -14)
        e = -14;
    double q = ldexp(1.0, e - 10);
    double r = rint(v / q) * q;
    if (r == 0)
        return sign;
    int e2 = ilogb(r);
    if (e2 < -14) /* subnormal: r is a multiple of 2^-24 */
        return (uint16_t)(sign | (uint16_t)ldexp(r, 24));
    uint16_t mant = (uint16_t)(ldexp(r, 10 - e2) - 1024.0);
    return (uint16_t)(sign | ((e2 + 15) << 10) | mant);
}

static uint16_t ref_f32_to_bf16(float f)
{
    uint32_t w = fbits(f);
    if (isnan(f))
        return (uint16_t)((w >> 16) | 0x40);
    double v = fabs((double)f);
    uint16_t sign = (uint16_t)((w >> 16) & 0x8000);
    if (v == 0 || isinf(f))
        return (uint16_t)(w >> 16);
    int e = ilogb(v);
    if (e < -126)
        e = -126;
    double q = ldexp(1.0, e - 7);
    double r = rint(v / q) * q;
    if (r >= ldexp(1.0, 128))
        return (uint16_t)(sign | 0x7F80);
    return (uint16_t)(sign | (fbits((float)r) >> 16));
}

#if HAVE_X86
__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float hw_f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
static int have_f16c(void)
{
    /* cpuid leaf 1, ecx bit 29 (clang 14 rejects "f16c" in __builtin_cpu_supports) */
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
#else
static int have_f16c(void) { return 0; }
static uint16_t hw_f32_to_f16(float f) { return ref_f32_to_f16(f); }
static float hw_f16_to_f32(uint16_t h) { return ref_f16_to_f32(h); }
#endif

/* Bitwise equality of two floats (NaNs included). */
static int same_bits(float a, float b) { return fbits(a) == fbits(b); }

/* ---- names and validity ------------------------------------------------- */

START_TEST(test_names)
{
    static const size_t sizes[] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
    static const char *names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                                  "uint64",  "float16",  "bfloat16", "float32", "float64"};
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++) {
        ck_assert_uint_eq(cohort_dtype_size((cohort_dtype)d), sizes[d]);
        ck_assert_str_eq(cohort_dtype_name((cohort_dtype)d), names[d]);
    }
    ck_assert_uint_eq(cohort_dtype_size(COHORT_DTYPE_COUNT), 0);
    ck_assert_uint_eq(cohort_dtype_size((cohort_dtype)-1), 0);
    ck_assert_ptr_nonnull(cohort_dtype_name((cohort_dtype)99));
    ck_assert_str_eq(cohort_op_name(COHORT_SUM), "sum");
    ck_assert_str_eq(cohort_op_name(COHORT_AVG), "avg");
    ck_assert_str_eq(cohort_op_name(COHORT_BXOR), "bxor");
    ck_assert_ptr_nonnull(cohort_op_name((cohort_op)-3));
}
END_TEST

static int is_float(int d) { return d >= COHORT_FLOAT16; }

START_TEST(test_op_valid)
{
    for (int d = 0; d < COHORT_DTYPE_COUNT; d++)
        for (int o = 0; o < COHORT_OP_COUNT; o++) {
            int want = 1;
            if (o == COHORT_AVG && !is_float(d))
                want = 0;
            if ((o == COHORT_BAND || o == COHORT_BOR || o == COHORT_BXOR) && is_float(d))
                want = 0;
            REQUIRE(coh_op_valid((cohort_dtype)d, (cohort_op)o) == want, "%s %s",
                          cohort_dtype_name((cohort_dtype)d), cohort_op_name((cohort_op)o));
            ck_assert_int_eq(coh_reduce_kernel((cohort_dtype)d, (cohort_op)o) != NULL, want);
            ck_assert_int_eq(coh_reduce3_kernel((cohort_dtype)d, (cohort_op)o) != NULL, want);
        }
    ck_assert_int_eq(coh_op_valid(COHORT_DTYPE_COUNT, COHORT_SUM), 0);
    ck_assert_int_eq(coh_op_valid(COHORT_FLOAT32, COHORT_OP_COUNT), 0);
    ck_assert_int_eq(coh_op_valid((cohort_dtype)-1, COHORT_SUM), 0);
    ck_assert_int_eq(coh_op_valid(COHORT_FLOAT32, (cohort_op)-1), 0);
    ck_assert_ptr_null(coh_reduce_kernel(COHORT_INT32, COHORT_AVG));
}
END_TEST

/* ---- conversions --------------------------------------------------------- */

START_TEST(test_f16_to_f32_exhaustive)
{
    int hw = have_f16c();
    for (uint32_t h = 0; h < 65536; h++) {
        float got = coh_f16_to_f32((uint16_t)h), want = ref_f16_to_f32((uint16_t)h);
        REQUIRE(same_bits(got, want), "f16 0x%04x: got 0x%08x want 0x%08x", h, fbits(got),
                      fbits(want));
        if (hw)
            REQUIRE(same_bits(got, hw_f16_to_f32((uint16_t)h)),
                          "f16 0x%04x: got 0x%08x, F16C 0x%08x", h, fbits(got),
                          fbits(hw_f16_to_f32((uint16_t)h)));
        /* Every finite half survives the round trip unchanged. */
        if (((h >> 10) & 31) != 31)
            REQUIRE(coh_f32_to_f16(got) == h, "round trip 0x%04x", h);
    }
}
END_TEST

static void check_f32_to_f16(uint32_t w, int hw)
{
    float f = ffrom(w);
    uint16_t got = coh_f32_to_f16(f), want = ref_f32_to_f16(f);
    REQUIRE(got == want, "f32 0x%08x (%a): got 0x%04x want 0x%04x", w, (double)f, got, want);
    if (hw)
        REQUIRE(got == hw_f32_to_f16(f), "f32 0x%08x: got 0x%04x, F16C 0x%04x", w, got,
                      hw_f32_to_f16(f));
}

/* The inputs where rounding can go wrong: every half value, the exact
 * midpoints between neighbours (ties to even), and one float32 ulp on either
 * side of each; plus a strided sweep over all float32 bit patterns. */
START_TEST(test_f32_to_f16)
{
    int hw = have_f16c();
    for (uint32_t h = 0; h < 0x7C00; h++) {
        float a = coh_f16_to_f32((uint16_t)h), b = coh_f16_to_f32((uint16_t)(h + 1));
        /* h + 1 == 0x7C00 is inf: the midpoint is then 65520 */
        float mid = h + 1 == 0x7C00 ? 65520.0f : (float)(((double)a + (double)b) / 2);
        uint32_t ws[] = {fbits(a), fbits(mid), fbits(mid) - 1, fbits(mid) + 1,
                         fbits(a) + 1, fbits(a) - (h ? 1 : 0)};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
            check_f32_to_f16(ws[i], hw);
            check_f32_to_f16(ws[i] | 0x80000000u, hw);
        }
    }
    /* Specials: infinities, quiet and signalling NaNs with payloads. */
    uint32_t sp[] = {0x7F800000u, 0xFF800000u, 0x7FC00000u, 0x7F800001u, 0x7FBFFFFFu,
                     0xFFC01234u, 0x7FFFFFFFu, 0x00000001u, 0x80000001u, 0x7F7FFFFFu};
    for (size_t i = 0; i < sizeof sp / sizeof sp[0]; i++)
        check_f32_to_f16(sp[i], hw);
    uint64_t stride = full_matrix() ? 1 : 4099; /* 4099 is prime: all low bits vary */
    for (uint64_t w = 0; w <= 0xFFFFFFFFu; w += stride) {
        if (stride == 1 && hw) { /* the full sweep compares with hardware only (fast) */
            float f = ffrom((uint32_t)w);
            uint16_t got = coh_f32_to_f16(f);
            if (got != hw_f32_to_f16(f))
                check_f32_to_f16((uint32_t)w, 1);
        } else {
            check_f32_to_f16((uint32_t)w, hw);
        }
    }
}
END_TEST

START_TEST(test_bf16)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = coh_bf16_to_f32((uint16_t)h);
        REQUIRE(fbits(f) == h << 16, "bf16 0x%04x", h);
        if (!isnan(f))
            REQUIRE(coh_f32_to_bf16(f) == h, "bf16 round trip 0x%04x", h);
        else /* NaN stays NaN, keeps its sign, becomes quiet */
            REQUIRE(coh_f32_to_bf16(f) == (h | 0x40), "bf16 NaN 0x%04x", h);
        /* Midpoint to the next value and one ulp either side. */
        uint32_t mid = (h << 16) | 0x8000u;
        uint32_t ws[] = {mid, mid - 1, mid + 1, (h << 16) | 0xFFFFu};
        for (size_t i = 0; i < 4; i++) {
            float x = ffrom(ws[i]);
            REQUIRE(coh_f32_to_bf16(x) == ref_f32_to_bf16(x), "f32 0x%08x: 0x%04x vs 0x%04x",
                          ws[i], coh_f32_to_bf16(x), ref_f32_to_bf16(x));
        }
    }
    uint64_t stride = full_matrix() ? 1 : 4099;
    for (uint64_t w = 0; w <= 0xFFFFFFFFu; w += stride) {
        float x = ffrom((uint32_t)w);
        uint16_t got = coh_f32_to_bf16(x);
        REQUIRE(got == ref_f32_to_bf16(x), "f32 0x%08x: got 0x%04x want 0x%04x",
                      (uint32_t)w, got, ref_f32_to_bf16(x));
    }
}
END_TEST

/* ---- kernels -------------------------------------------------------------- */

/* Random bit patterns per dtype, with a few special values mixed in so that
 * wrap-around, NaN, inf and signed zeros go through every kernel. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void fill(void *buf, size_t n, int dt)
{
    size_t es = cohort_dtype_size((cohort_dtype)dt);
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rnd();
        unsigned char *p = (unsigned char *)buf + i * es;
        switch (dt) {
        case COHORT_FLOAT32: {
            float f = (float)((int64_t)(r % 2001) - 1000) / 8.0f;
            if (r % 97 == 0)
                f = (r & 1) ? -0.0f : 0.0f;
            if (r % 211 == 0)
                f = NAN;
            if (r % 223 == 0)
                f = -INFINITY;
            memcpy(p, &f, 4);
            break;
        }
        case COHORT_FLOAT64: {
            double d = (double)((int64_t)(r % 200001) - 100000) / 64.0;
            if (r % 97 == 0)
                d = (r & 1) ? -0.0 : 0.0;
            if (r % 211 == 0)
                d = NAN;
            memcpy(p, &d, 8);
            break;
        }
        case COHORT_FLOAT16: {
            uint16_t h = (uint16_t)(r >> 20);
            memcpy(p, &h, 2); /* any pattern: subnormals, inf, NaN included */
            break;
        }
        case COHORT_BFLOAT16: {
            uint16_t h = (uint16_t)(r >> 20);
            memcpy(p, &h, 2);
            break;
        }
        default:
            memcpy(p, &r, es);
        }
    }
}

/* Reference: one element, straight from the definition. */
static void ref_elem(void *out, const void *a, const void *b, int dt, int op)
{
    if (dt <= COHORT_UINT64) {
        size_t es = cohort_dtype_size((cohort_dtype)dt);
        int sgn = dt == COHORT_INT8 || dt == COHORT_INT32 || dt == COHORT_INT64;
        uint64_t x = 0, y = 0;
        memcpy(&x, a, es);
        memcpy(&y, b, es);
        int64_t sx, sy; /* sign-extended views for MIN/MAX */
        int shift = 64 - 8 * (int)es;
        sx = (int64_t)(x << shift) >> shift;
        sy = (int64_t)(y << shift) >> shift;
        uint64_t r = 0;
        switch (op) {
        case COHORT_SUM: r = x + y; break;
        case COHORT_PROD: r = x * y; break;
        case COHORT_MIN: r = sgn ? (sx < sy ? x : y) : (x < y ? x : y); break;
        case COHORT_MAX: r = sgn ? (sx > sy ? x : y) : (x > y ? x : y); break;
        case COHORT_BAND: r = x & y; break;
        case COHORT_BOR: r = x | y; break;
        case COHORT_BXOR: r = x ^ y; break;
        }
        memcpy(out, &r, es); /* little-endian: the low bytes are the wrapped value */
        return;
    }
    double x, y;
    if (dt == COHORT_FLOAT64) {
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
    } else if (dt == COHORT_FLOAT32) {
        float fx, fy;
        memcpy(&fx, a, 4);
        memcpy(&fy, b, 4);
        x = fx;
        y = fy;
    } else {
        uint16_t hx, hy;
        memcpy(&hx, a, 2);
        memcpy(&hy, b, 2);
        x = dt == COHORT_FLOAT16 ? ref_f16_to_f32(hx) : ffrom((uint32_t)hx << 16);
        y = dt == COHORT_FLOAT16 ? ref_f16_to_f32(hy) : ffrom((uint32_t)hy << 16);
    }
    double r;
    switch (op) {
    case COHORT_PROD: r = x * y; break;
    case COHORT_MIN:
        r = isnan(x) || isnan(y) ? NAN : x < y ? x : y;
        if (x == 0 && y == 0)
            r = (signbit(x) || signbit(y)) ? -0.0 : 0.0;
        break;
    case COHORT_MAX:
        r = isnan(x) || isnan(y) ? NAN : x > y ? x : y;
        if (x == 0 && y == 0)
            r = (signbit(x) && signbit(y)) ? -0.0 : 0.0;
        break;
    default: r = x + y; break; /* SUM, AVG */
    }
    /* float32 ops of float32 inputs: the double result rounded once to
     * float32 is the correctly rounded float32 result (double has more than
     * 2*24+2 bits), so this matches IEEE float32 arithmetic exactly. */
    switch (dt) {
    case COHORT_FLOAT64: memcpy(out, &r, 8); break;
    case COHORT_FLOAT32: {
        float f = (float)r;
        memcpy(out, &f, 4);
        break;
    }
    case COHORT_FLOAT16: {
        uint16_t h = ref_f32_to_f16((float)r);
        memcpy(out, &h, 2);
        break;
    }
    default: {
        uint16_t h = ref_f32_to_bf16((float)r);
        memcpy(out, &h, 2);
    }
    }
}

/* Equal bit patterns, or both NaN (payloads are not specified). */
static int elem_eq(const void *x, const void *y, int dt)
{
    size_t es = cohort_dtype_size((cohort_dtype)dt);
    if (!memcmp(x, y, es))
        return 1;
    if (dt == COHORT_FLOAT32) {
        float a, b;
        memcpy(&a, x, 4);
        memcpy(&b, y, 4);
        return isnan(a) && isnan(b);
    }
    if (dt == COHORT_FLOAT64) {
        double a, b;
        memcpy(&a, x, 8);
        memcpy(&b, y, 8);
        return isnan(a) && isnan(b);
    }
    if (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16) {
        uint16_t a, b;
        memcpy(&a, x, 2);
        memcpy(&b, y, 2);
        uint16_t em = dt == COHORT_FLOAT16 ? 0x7C00 : 0x7F80;
        return (a & em) == em && (a & ~em & 0x7FFF) && (b & em) == em && (b & ~em & 0x7FFF);
    }
    return 0;
}

/* Every valid (dtype, op): the 2-operand kernel and the 3-operand kernel in
 * its three aliasing forms, on odd lengths and misaligned buffers. */
START_TEST(test_kernels_vs_reference)
{
    static const size_t lens[] = {0, 1, 3, 7, 16, 33, 1000, 4099};
    for (int dt = 0; dt < COHORT_DTYPE_COUNT; dt++)
        for (int op = 0; op < COHORT_OP_COUNT; op++) {
            if (!coh_op_valid((cohort_dtype)dt, (cohort_op)op))
                continue;
            size_t es = cohort_dtype_size((cohort_dtype)dt);
            coh_reduce_fn k2 = coh_reduce_kernel((cohort_dtype)dt, (cohort_op)op);
            coh_reduce3_fn k3 = coh_reduce3_kernel((cohort_dtype)dt, (cohort_op)op);
            for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                size_t n = lens[li], bytes = n * es;
                /* +es: offset by one element so vector loops meet unaligned data */
                unsigned char *a = malloc(bytes + es + 1), *b = malloc(bytes + es + 1),
                              *o = malloc(bytes + es + 1), *want = malloc(bytes + 1),
                              *t = malloc(bytes + es + 1);
                unsigned char *ua = a + es, *ub = b + es, *uo = o + es;
                fill(ua, n, dt);
                fill(ub, n, dt);
                for (size_t i = 0; i < n; i++)
                    ref_elem(want + i * es, ua + i * es, ub + i * es, dt, op);
                const char *what[] = {"k2", "k3", "k3 out=a", "k3 out=b"};
                for (int form = 0; form < 4; form++) {
                    unsigned char *res = uo;
                    switch (form) {
                    case 0:
                        memcpy(uo, ua, bytes);
                        k2(uo, ub, n);
                        break;
                    case 1:
                        k3(uo, ua, ub, n);
                        break;
                    case 2:
                        memcpy(t, ua, bytes);
                        k3(t, t, ub, n);
                        res = t;
                        break;
                    case 3:
                        memcpy(t, ub, bytes);
                        k3(t, ua, t, n);
                        res = t;
                        break;
                    }
                    for (size_t i = 0; i < n; i++)
                        REQUIRE(elem_eq(res + i * es, want + i * es, dt),
                                      "%s %s %s n=%zu i=%zu", cohort_dtype_name((cohort_dtype)dt),
                                      cohort_op_name((cohort_op)op), what[form], n, i);
                }
                free(a);
                free(b);
                free(o);
                free(want);
                free(t);
            }
        }
}
END_TEST

/* Spot checks that state the semantics in plain numbers. */
START_TEST(test_semantics)
{
    int8_t a8[] = {127, -128, 100}, b8[] = {1, -1, 100};
    coh_reduce_kernel(COHORT_INT8, COHORT_SUM)(a8, b8, 3);
    ck_assert_int_eq(a8[0], -128); /* wraps, no UB (UBSan build checks) */
    ck_assert_int_eq(a8[1], 127);
    ck_assert_int_eq(a8[2], -56);
    int32_t p[] = {INT32_MAX, INT32_MIN}, q[] = {2, -1};
    coh_reduce_kernel(COHORT_INT32, COHORT_PROD)(p, q, 2);
    ck_assert_int_eq(p[0], -2);
    ck_assert_int_eq(p[1], INT32_MIN);
    int64_t m[] = {-5, INT64_MIN}, n[] = {3, INT64_MAX};
    coh_reduce_kernel(COHORT_INT64, COHORT_MIN)(m, n, 2);
    ck_assert(m[0] == -5 && m[1] == INT64_MIN);
    uint64_t u[] = {UINT64_MAX}, v[] = {2};
    coh_reduce_kernel(COHORT_UINT64, COHORT_SUM)(u, v, 1);
    ck_assert(u[0] == 1);
    /* float MIN/MAX: NaN propagates; signed zeros independent of order */
    float x[] = {NAN, 1.0f, 0.0f, -0.0f, 0.0f, -0.0f}, y[] = {1.0f, NAN, -0.0f, 0.0f, -0.0f, 0.0f};
    float x2[6];
    memcpy(x2, x, sizeof x);
    coh_reduce_kernel(COHORT_FLOAT32, COHORT_MIN)(x, y, 6);
    ck_assert(isnan(x[0]) && isnan(x[1]));
    ck_assert(x[2] == 0 && signbit(x[2]) && signbit(x[3]));
    coh_reduce_kernel(COHORT_FLOAT32, COHORT_MAX)(x2, y, 6);
    ck_assert(isnan(x2[0]) && isnan(x2[1]));
    ck_assert(!signbit(x2[2]) && !signbit(x2[3]));
}
END_TEST

/* coh_reduce_multi: every dtype/op, 1..9 sources, out aliasing each source
 * in turn; integers/float32/float64 must equal a left fold of the pairwise
 * kernel; halves must equal a float32 fold rounded once. */
START_TEST(test_multi)
{
    enum { N = 2500, MAXS = 9 };
    for (int dt = 0; dt < COHORT_DTYPE_COUNT; dt++)
        for (int op = 0; op < COHORT_OP_COUNT; op++) {
            if (!coh_op_valid((cohort_dtype)dt, (cohort_op)op))
                continue;
            size_t es = cohort_dtype_size((cohort_dtype)dt);
            unsigned char *src[MAXS], *want = malloc(N * es), *out = malloc(N * es);
            for (int s = 0; s < MAXS; s++) {
                src[s] = malloc(N * es);
                fill(src[s], N, dt);
            }
            for (int ns = 1; ns <= MAXS; ns++) {
                for (size_t i = 0; i < N; i++) {
                    if (dt == COHORT_FLOAT16 || dt == COHORT_BFLOAT16) {
                        float acc = 0;
                        for (int s = 0; s < ns; s++) {
                            uint16_t h;
                            memcpy(&h, src[s] + i * 2, 2);
                            float v = dt == COHORT_FLOAT16 ? ref_f16_to_f32(h)
                                                           : ffrom((uint32_t)h << 16);
                            if (s == 0) {
                                acc = v;
                                continue;
                            }
                            float tmp;
                            unsigned char ab[4], bb[4];
                            memcpy(ab, &acc, 4);
                            memcpy(bb, &v, 4);
                            ref_elem(&tmp, ab, bb, COHORT_FLOAT32, op);
                            acc = tmp;
                        }
                        uint16_t h = dt == COHORT_FLOAT16 ? ref_f32_to_f16(acc)
                                                          : ref_f32_to_bf16(acc);
                        memcpy(want + i * 2, &h, 2);
                    } else {
                        memcpy(want + i * es, src[0] + i * es, es);
                        for (int s = 1; s < ns; s++)
                            ref_elem(want + i * es, want + i * es, src[s] + i * es, dt, op);
                    }
                }
                const void *srcs[MAXS];
                for (int s = 0; s < ns; s++)
                    srcs[s] = src[s];
                coh_reduce_multi(out, srcs, ns, N, (cohort_dtype)dt, (cohort_op)op);
                for (size_t i = 0; i < N; i++)
                    REQUIRE(elem_eq(out + i * es, want + i * es, dt), "%s %s ns=%d i=%zu",
                                  cohort_dtype_name((cohort_dtype)dt),
                                  cohort_op_name((cohort_op)op), ns, i);
                /* out aliasing source k (in place for that rank's buffer) */
                for (int k = 0; k < ns; k++) {
                    unsigned char *keep = malloc(N * es);
                    memcpy(keep, src[k], N * es);
                    coh_reduce_multi(src[k], srcs, ns, N, (cohort_dtype)dt, (cohort_op)op);
                    for (size_t i = 0; i < N; i++)
                        REQUIRE(elem_eq(src[k] + i * es, want + i * es, dt),
                                      "alias %d: %s %s ns=%d i=%zu", k,
                                      cohort_dtype_name((cohort_dtype)dt),
                                      cohort_op_name((cohort_op)op), ns, i);
                    memcpy(src[k], keep, N * es);
                    free(keep);
                }
            }
            for (int s = 0; s < MAXS; s++)
                free(src[s]);
            free(want);
            free(out);
        }
}
END_TEST

/* The point of accumulating halves in float32: 2048 + 1 + 1 is 2050 with
 * one rounding but 2048 with a rounding after each add (ties to even). */
START_TEST(test_multi_rounds_once)
{
    uint16_t a = coh_f32_to_f16(2048.0f), one = coh_f32_to_f16(1.0f), out;
    const void *srcs[] = {&a, &one, &one};
    coh_reduce_multi(&out, srcs, 3, 1, COHORT_FLOAT16, COHORT_SUM);
    ck_assert_float_eq(coh_f16_to_f32(out), 2050.0f);
    uint16_t pw = a;
    coh_reduce_kernel(COHORT_FLOAT16, COHORT_SUM)(&pw, &one, 1);
    coh_reduce_kernel(COHORT_FLOAT16, COHORT_SUM)(&pw, &one, 1);
    ck_assert_float_eq(coh_f16_to_f32(pw), 2048.0f);
    /* bfloat16: 256 + 1 + 1 (8 significant bits) */
    uint16_t b = coh_f32_to_bf16(256.0f), bone = coh_f32_to_bf16(1.0f), bout;
    const void *bs[] = {&b, &bone, &bone};
    coh_reduce_multi(&bout, bs, 3, 1, COHORT_BFLOAT16, COHORT_SUM);
    ck_assert_float_eq(coh_bf16_to_f32(bout), 258.0f);
    /* invalid pairs and empty input do nothing and do not crash */
    int32_t z = 5, zz = 7;
    const void *zs[] = {&z, &zz};
    coh_reduce_multi(&z, zs, 2, 1, COHORT_INT32, COHORT_AVG);
    ck_assert_int_eq(z, 5);
    coh_reduce_multi(&z, zs, 0, 1, COHORT_INT32, COHORT_SUM);
    ck_assert_int_eq(z, 5);
}
END_TEST

START_TEST(test_finish)
{
    float f[] = {3.0f, -9.0f, 1.0f};
    coh_reduce_finish(f, 3, COHORT_FLOAT32, COHORT_AVG, 3);
    ck_assert(f[0] == 1.0f && f[1] == -3.0f && f[2] == 1.0f / 3.0f);
    double d[] = {10.0};
    coh_reduce_finish(d, 1, COHORT_FLOAT64, COHORT_AVG, 4);
    ck_assert(d[0] == 2.5);
    uint16_t h = coh_f32_to_f16(7.0f), bh = coh_f32_to_bf16(7.0f);
    coh_reduce_finish(&h, 1, COHORT_FLOAT16, COHORT_AVG, 2);
    coh_reduce_finish(&bh, 1, COHORT_BFLOAT16, COHORT_AVG, 2);
    ck_assert_float_eq(coh_f16_to_f32(h), 3.5f);
    ck_assert_float_eq(coh_bf16_to_f32(bh), 3.5f);
    /* not AVG, or one rank: untouched */
    float g[] = {3.0f};
    coh_reduce_finish(g, 1, COHORT_FLOAT32, COHORT_SUM, 3);
    coh_reduce_finish(g, 1, COHORT_FLOAT32, COHORT_AVG, 1);
    ck_assert(g[0] == 3.0f);
}
END_TEST

/* AVG's division multiplies by 2^-k for a power-of-two rank count (a
 * vector division is several times slower): the result must be the
 * division's, bit for bit - normals, subnormals, results that underflow,
 * zeros, infinities, NaN - at every length (the vector loop and its
 * tail), and other counts still divide. float16/bfloat16 through the fold
 * (coh_reduce_multi_div) likewise. */
static uint64_t dbits(double x)
{
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}
START_TEST(test_finish_matches_division)
{
    enum { N = 67 };
    static const int ranks[] = {2, 3, 4, 6, 8, 16, 64, 1024, 4096, 65536};
    uint32_t seed = 12345;
    for (size_t r = 0; r < sizeof ranks / sizeof ranks[0]; r++) {
        int nr = ranks[r];
        for (int round = 0; round < 200; round++) {
            float f[N], fw[N];
            double d[N], dw[N];
            for (int i = 0; i < N; i++) {
                seed = seed * 1664525u + 1013904223u;
                uint32_t u = seed;
                if (i % 11 == 0)
                    u &= 0x807fffffu; /* subnormal or zero */
                else if (i % 13 == 0)
                    u = (u & 0x80000000u) | 0x00800000u | (u & 0x3fffu); /* smallest normals */
                memcpy(&f[i], &u, 4);
                uint64_t v = (uint64_t)seed << 32 | (seed * 2654435761u);
                if (i % 11 == 0)
                    v &= 0x800fffffffffffffull;
                memcpy(&d[i], &v, 8);
            }
            f[1] = INFINITY, f[2] = -0.0f, f[3] = NAN, f[4] = FLT_MAX;
            d[1] = -INFINITY, d[2] = 0.0, d[4] = DBL_MIN;
            for (int i = 0; i < N; i++)
                fw[i] = f[i] / (float)nr, dw[i] = d[i] / (double)nr;
            int len = 1 + round % N;
            coh_reduce_finish(f, (size_t)len, COHORT_FLOAT32, COHORT_AVG, nr);
            coh_reduce_finish(d, (size_t)len, COHORT_FLOAT64, COHORT_AVG, nr);
            for (int i = 0; i < len; i++) {
                ck_assert_msg(fbits(f[i]) == fbits(fw[i]) || (isnan(f[i]) && isnan(fw[i])),
                              "float32 / %d at %d: %a against %a", nr, i, f[i], fw[i]);
                ck_assert_msg(dbits(d[i]) == dbits(dw[i]) || (isnan(d[i]) && isnan(dw[i])),
                              "float64 / %d at %d: %a against %a", nr, i, d[i], dw[i]);
            }
        }
        /* the 2-rank fold's one-pass mean (coh_reduce3_div_kernel) */
        if (nr == 2) {
            float fa[N], fb[N], fo[N];
            double da[N], db[N], dout[N];
            for (int i = 0; i < N; i++) {
                seed = seed * 1664525u + 1013904223u;
                uint32_t u = seed & (i % 7 ? 0xffffffffu : 0x807fffffu);
                memcpy(&fa[i], &u, 4);
                fb[i] = i % 5 ? -fa[i] * 0.75f : FLT_MAX;
                uint64_t v = (uint64_t)seed << 29 ^ seed;
                memcpy(&da[i], &v, 8);
                db[i] = i % 5 ? da[i] * 3.0 : -DBL_MAX;
            }
            fa[0] = NAN, fb[1] = INFINITY, da[2] = -INFINITY;
            coh_reduce3_fn k3f = coh_reduce3_div_kernel(COHORT_FLOAT32, COHORT_AVG, 2);
            coh_reduce3_fn k3d = coh_reduce3_div_kernel(COHORT_FLOAT64, COHORT_AVG, 2);
            ck_assert(k3f && k3d && !coh_reduce3_div_kernel(COHORT_FLOAT32, COHORT_AVG, 3));
            ck_assert(coh_reduce3_div_kernel(COHORT_FLOAT32, COHORT_SUM, 2) ==
                      coh_reduce3_kernel(COHORT_FLOAT32, COHORT_SUM));
            k3f(fo, fa, fb, N);
            k3d(dout, da, db, N);
            for (int i = 0; i < N; i++) {
                float fw = (fa[i] + fb[i]) / 2.0f;
                double dw = (da[i] + db[i]) / 2.0;
                ck_assert_msg(fbits(fo[i]) == fbits(fw) || (isnan(fo[i]) && isnan(fw)),
                              "float32 mean at %d: %a against %a", i, fo[i], fw);
                ck_assert_msg(dbits(dout[i]) == dbits(dw) || (isnan(dout[i]) && isnan(dw)),
                              "float64 mean at %d: %a against %a", i, dout[i], dw);
            }
        }
        /* the half types' fold: every float16 and bfloat16 x with -0 */
        for (uint32_t x = 0; x < 0x10000; x++) {
            uint16_t a = (uint16_t)x, z = 0x8000, out; /* -0: x + -0 is x, signs too */
            const void *xs[] = {&a, &z};
            coh_reduce_multi_div(&out, xs, 2, 1, COHORT_FLOAT16, COHORT_AVG, nr);
            uint16_t want = coh_f32_to_f16(coh_f16_to_f32(a) / (float)nr);
            ck_assert_msg(out == want || (isnan(coh_f16_to_f32(out)) && isnan(coh_f16_to_f32(want))),
                          "float16 %#x / %d: %#x against %#x", x, nr, out, want);
            coh_reduce_multi_div(&out, xs, 2, 1, COHORT_BFLOAT16, COHORT_AVG, nr);
            want = coh_f32_to_bf16(coh_bf16_to_f32(a) / (float)nr);
            ck_assert_msg(out == want ||
                              (isnan(coh_bf16_to_f32(out)) && isnan(coh_bf16_to_f32(want))),
                          "bfloat16 %#x / %d: %#x against %#x", x, nr, out, want);
        }
    }
}
END_TEST

/* The mean of halves in one rounding (issue 13): 60000 + 60000 + 60000 in
 * float16 overflows as a rounded sum (inf / 3 = inf) but not in float32;
 * and a mean whose rounded sum would round a second time stays within half
 * an ulp. Other types: the fold, then coh_reduce_finish's division. */
START_TEST(test_multi_div)
{
    uint16_t big = coh_f32_to_f16(60000.0f), out;
    const void *bigs[] = {&big, &big, &big};
    coh_reduce_multi(&out, bigs, 3, 1, COHORT_FLOAT16, COHORT_AVG);
    ck_assert(isinf(coh_f16_to_f32(out))); /* the sum, as AVG-as-SUM folds give it */
    coh_reduce_multi_div(&out, bigs, 3, 1, COHORT_FLOAT16, COHORT_AVG, 3);
    ck_assert_float_eq(coh_f16_to_f32(out), 60000.0f);
    /* every pair of float16 values x, y in [1, 2) with a third z = 1: the
     * result is the float16 nearest to (x+y+z)/3 computed in double */
    for (uint16_t x = 0x3c00; x < 0x4000; x += 7)
        for (uint16_t y = 0x3c00; y < 0x4000; y += 13) {
            uint16_t z = 0x3c00;
            const void *xs[] = {&x, &y, &z};
            coh_reduce_multi_div(&out, xs, 3, 1, COHORT_FLOAT16, COHORT_AVG, 3);
            double m = ((double)coh_f16_to_f32(x) + coh_f16_to_f32(y) + 1.0) / 3.0;
            ck_assert_msg(coh_f16_to_f32(out) == coh_f16_to_f32(coh_f32_to_f16((float)m)),
                          "%#x %#x", x, y);
        }
    uint16_t b3[] = {coh_f32_to_bf16(3.0f), coh_f32_to_bf16(4.0f), coh_f32_to_bf16(5.0f)};
    const void *bs[] = {&b3[0], &b3[1], &b3[2]};
    coh_reduce_multi_div(&out, bs, 3, 1, COHORT_BFLOAT16, COHORT_AVG, 3);
    ck_assert_float_eq(coh_bf16_to_f32(out), 4.0f);
    float f[] = {1.0f, 2.0f, 6.0f}, fo;
    const void *fs[] = {&f[0], &f[1], &f[2]};
    coh_reduce_multi_div(&fo, fs, 3, 1, COHORT_FLOAT32, COHORT_AVG, 3);
    ck_assert(fo == 3.0f);
    /* div is ignored for other ops, and 0 means no division */
    coh_reduce_multi_div(&fo, fs, 3, 1, COHORT_FLOAT32, COHORT_SUM, 3);
    ck_assert(fo == 9.0f);
    coh_reduce_multi_div(&fo, fs, 3, 1, COHORT_FLOAT32, COHORT_AVG, 0);
    ck_assert(fo == 9.0f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reduce");
    TCase *tc = tcase_create("reduce");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_names);
    tcase_add_test(tc, test_multi_div);
    tcase_add_test(tc, test_op_valid);
    tcase_add_test(tc, test_f16_to_f32_exhaustive);
    tcase_add_test(tc, test_f32_to_f16);
    tcase_add_test(tc, test_bf16);
    tcase_add_test(tc, test_kernels_vs_reference);
    tcase_add_test(tc, test_semantics);
    tcase_add_test(tc, test_multi);
    tcase_add_test(tc, test_multi_rounds_once);
    tcase_add_test(tc, test_finish);
    tcase_add_test(tc, test_finish_matches_division);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
