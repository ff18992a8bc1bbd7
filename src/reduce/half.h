/*
 * half.h - portable, branch-free float16/bfloat16 <-> float32 conversions
 * (private to src/reduce; the exported forms are in reduce.h).
 *
 * Branch-free so that the reduction loops that call them vectorise; no F16C
 * or AVX512-BF16 instructions are assumed. They are bit-exact with IEEE 754
 * round-to-nearest-even (the default rounding mode; cohort never changes it)
 * and independent of FTZ/DAZ: every intermediate float they form is normal.
 *
 * NaN policy (the same as x86 F16C, which the tests compare against where
 * the CPU has it): a NaN keeps its sign and the top bits of its payload and
 * becomes quiet. Infinities and signed zeros are preserved; float32 values
 * beyond the float16 range round to infinity exactly as IEEE says.
 *
 * f16 <-> f32 follow the construction of Maratyszcza's FP16 library
 * (MIT): the exponent rebias and the subnormal cases are done with float
 * multiplications/additions whose rounding is exactly the rounding wanted.
 */
#ifndef COH_REDUCE_HALF_H
#define COH_REDUCE_HALF_H

#include <stdint.h>
#include <string.h>

static inline float coh__f32_from_bits(uint32_t w)
{
    float f;
    memcpy(&f, &w, sizeof f);
    return f;
}

static inline uint32_t coh__f32_bits(float f)
{
    uint32_t w;
    memcpy(&w, &f, sizeof w);
    return w;
}

static inline float coh__f16_to_f32(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & UINT32_C(0x80000000);
    const uint32_t two_w = w + w; /* exponent+mantissa, sign shifted out */
    /* Normal/inf/nan: move exponent+mantissa into float32 position with the
     * exponent rebiased by +224 (0xE0), then scale by 2^-112: the net rebias
     * is +112 = 127-15; for exponent 31 the result keeps exponent 255 (the
     * product of inf/nan by a power of two stays inf/nan). */
    const float normalized = coh__f32_from_bits((two_w >> 4) + (UINT32_C(0xE0) << 23)) * 0x1.0p-112f;
    /* Subnormal/zero: place the mantissa under the exponent of 0.5 and
     * subtract 0.5, which is exact and leaves mantissa * 2^-24. */
    const float denormalized = coh__f32_from_bits((two_w >> 17) | (UINT32_C(126) << 23)) - 0.5f;
    const uint32_t cutoff = UINT32_C(1) << 27; /* two_w below this: exponent field 0 */
    const uint32_t r =
        sign | (two_w < cutoff ? coh__f32_bits(denormalized) : coh__f32_bits(normalized));
    return coh__f32_from_bits(r);
}

static inline uint16_t coh__f32_to_f16(float f)
{
    const uint32_t w = coh__f32_bits(f);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & UINT32_C(0x80000000);
    /* Scaling by 2^112 then 2^-110 overflows to inf exactly for values that
     * round to inf in float16 and otherwise leaves |f| * 4 (exact). */
    float base = (coh__f32_from_bits(w & UINT32_C(0x7FFFFFFF)) * 0x1.0p+112f) * 0x1.0p-110f;
    /* Adding a power of two 2^(e+13-10) (e: f's exponent, at least the
     * float16 subnormal threshold) makes the float32 adder round away all
     * mantissa bits float16 cannot hold, with round-to-nearest-even. */
    uint32_t bias = shl1_w & UINT32_C(0xFF000000);
    bias = bias < UINT32_C(0x71000000) ? UINT32_C(0x71000000) : bias;
    base = coh__f32_from_bits((bias >> 1) + UINT32_C(0x07800000)) + base;
    const uint32_t bits = coh__f32_bits(base);
    const uint32_t exp_bits = (bits >> 13) & UINT32_C(0x00007C00);
    const uint32_t mantissa_bits = bits & UINT32_C(0x00000FFF);
    const uint32_t nonsign = exp_bits + mantissa_bits;
    /* NaN: quiet, keep the top 9 payload bits (F16C behaviour). */
    const uint32_t nan = UINT32_C(0x7E00) | ((w >> 13) & UINT32_C(0x03FF));
    return (uint16_t)((sign >> 16) | (shl1_w > UINT32_C(0xFF000000) ? nan : nonsign));
}

static inline float coh__bf16_to_f32(uint16_t h) { return coh__f32_from_bits((uint32_t)h << 16); }

static inline uint16_t coh__f32_to_bf16(float f)
{
    const uint32_t w = coh__f32_bits(f);
    /* Round to nearest even on the 16 dropped bits; a carry into the
     * exponent is the correct rounding (up to inf for the largest values). */
    const uint32_t rounded = (w + UINT32_C(0x7FFF) + ((w >> 16) & 1u)) >> 16;
    const uint32_t nan = (w >> 16) | UINT32_C(0x0040);
    return (uint16_t)((w & UINT32_C(0x7FFFFFFF)) > UINT32_C(0x7F800000) ? nan : rounded);
}

#endif
