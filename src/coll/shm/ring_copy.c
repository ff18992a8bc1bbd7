/*
 * ring_copy.c - coh_copy_narrow (ring_copy.h). Its own translation unit on
 * purpose: see the header.
 */
#include "coll/shm/ring_copy.h"

#include <string.h>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

void coh_copy_narrow(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
#if defined(__x86_64__)
    if (n >= 32 && n <= 64) { /* every load before any store: overlap is safe too */
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + n - 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + n - 16));
        _mm_storeu_si128((__m128i *)d, a);
        _mm_storeu_si128((__m128i *)(d + 16), b);
        _mm_storeu_si128((__m128i *)(d + n - 32), c);
        _mm_storeu_si128((__m128i *)(d + n - 16), e);
        return;
    }
#endif
    memmove(d, s, n);
}
