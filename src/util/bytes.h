/*
 * bytes.h - the one set of little-endian byte helpers for everything cohort
 * puts on a wire or in a file (store protocol, tcp handshake frames):
 * explicit byte order, so a peer of the other byte order is told so instead
 * of misparsed, and no alignment needed.
 */
#ifndef COH_UTIL_BYTES_H
#define COH_UTIL_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void coh_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline uint16_t coh_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline void coh_put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t coh_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void coh_put_u64(uint8_t *p, uint64_t v)
{
    coh_put_u32(p, (uint32_t)v);
    coh_put_u32(p + 4, (uint32_t)(v >> 32));
}
static inline uint64_t coh_get_u64(const uint8_t *p)
{
    return (uint64_t)coh_get_u32(p) | (uint64_t)coh_get_u32(p + 4) << 32;
}

/* 1..32 bytes by fixed-size copies that overlap (inlined): a libc memcpy
 * call for 8 B was ~20 instructions of an 8 B broadcast or all_reduce
 * (callgrind). Callers keep n <= 32. */
static inline void coh_small_copy(void *dst, const void *src, size_t n)
{
    unsigned char *d = dst;
    const unsigned char *s = src;
    if (n >= 16) {
        memcpy(d, s, 16);
        memcpy(d + n - 16, s + n - 16, 16);
    } else if (n >= 8) {
        memcpy(d, s, 8);
        memcpy(d + n - 8, s + n - 8, 8);
    } else if (n >= 4) {
        memcpy(d, s, 4);
        memcpy(d + n - 4, s + n - 4, 4);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i];
    }
}

#endif
