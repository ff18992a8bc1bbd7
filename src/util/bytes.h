/*
 * bytes.h - the one set of little-endian byte helpers for everything cohort
 * puts on a wire or in a file (store protocol, tcp handshake frames):
 * explicit byte order, so a peer of the other byte order is told so instead
 * of misparsed, and no alignment needed.
 */
#ifndef COH_UTIL_BYTES_H
#define COH_UTIL_BYTES_H

#include <stdint.h>

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

#endif
