/*
 * fuzz_shm_hdr.c - libFuzzer target for a member's check of its lead's
 * segment header (shm_hdr_check, src/transport/shm/shm_geo.c): the header
 * is memory another process wrote, and a member derives every region of
 * the segment from the numbers in it.
 *
 * Input: a mode byte, then
 *  - mode even (structured): n, the record spacing and the slot size, a
 *    header built the lead's way (shm_hdr_fill) for them, then any number
 *    of 9-byte edits (field index, 8-byte value) - a lead's forgery, or a
 *    third process's write;
 *  - mode odd (raw): n, then the header's plain fields byte for byte.
 * The mapping's size is the header's total (a hostile lead sizes its memfd
 * as it likes). Properties beyond "no crash" (ASan, UBSan): a header that
 * passes describes, without any sum or product wrapping,
 *  - slots that hold their buffers (S + one line each, two a rank) and
 *    whole lines of n-1 blocks of 8 bytes, a small threshold within S;
 *  - control blocks, slots with the checker's area, rings and channels
 *    one after another, every rank's inside the mapping;
 *  - a ring whose records, slots, tiny slots, done words and compact
 *    records end within its stride, records 32 or 64 bytes apart;
 *  - channels whose heads and slots end within their stride;
 * and a refusal is a field's name.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/shm/shm.h"
#include "transport/shm/shm_geo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond)
{
    if (!cond)
        abort();
}

static uint64_t take(const uint8_t **p, size_t *n, size_t k)
{
    uint64_t v = 0;
    for (size_t i = 0; i < k && *n; i++, (*p)++, (*n)--)
        v |= (uint64_t)**p << (8 * i);
    return v;
}

/* a + b and a * b, any wrap fails the property */
static uint64_t add(uint64_t a, uint64_t b)
{
    uint64_t r;
    must(!__builtin_add_overflow(a, b, &r));
    return r;
}

static uint64_t mul(uint64_t a, uint64_t b)
{
    uint64_t r;
    must(!__builtin_mul_overflow(a, b, &r));
    return r;
}

/* the header's uint64 fields an edit may hit, by index (the uint32 ones
 * are edited through the raw mode) */
static uint64_t *field(shm_seg_hdr *h, unsigned i)
{
    uint64_t *f[] = {&h->job_hash,    &h->slot_bytes, &h->small_bytes, &h->total_bytes,
                     &h->ctl_off,     &h->slot_off,   &h->rank_stride, &h->buf_stride,
                     &h->ring_k,      &h->ring_bytes, &h->ring_off,    &h->ring_stride,
                     &h->tiny_k,      &h->tiny_bytes, &h->ring_split,  &h->crec_stride,
                     &h->p2p_bytes,   &h->p2p_off,    &h->p2p_stride};
    return f[i % (sizeof f / sizeof f[0])];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t left = size;
    unsigned mode = (unsigned)take(&p, &left, 1);
    int n = 1 + (int)(take(&p, &left, 1) % 64);
    shm_hdr_want w = {n, 0x31524843u, 7, 0x1234567890abcdefull, 1, 0};
    shm_seg_hdr h;
    memset(&h, 0, sizeof h);
    if (mode & 1) {
        size_t k = left < SHM_HDR_PLAIN_BYTES ? left : SHM_HDR_PLAIN_BYTES;
        memcpy(&h, p, k);
    } else {
        unsigned cfg = (unsigned)take(&p, &left, 1);
        shm_ringcfg rc = {(size_t)1 << (cfg % 9), 16384, cfg & 16 ? 128 : 0, cfg & 16 ? 256 : 0,
                          (cfg >> 5) & 1, cfg & 64 ? 64 : 32};
        if (rc.k == 1)
            rc.k = rc.tiny_k = rc.bytes = rc.tiny_bytes = 0;
        size_t S = 64 * (1 + (size_t)take(&p, &left, 2));
        shm_geo geo;
        shm_hdr_fill(&h, &w, S, S / 2, &rc, cfg & 128 ? 65536 : 0, &geo);
        while (left >= 9) {
            unsigned i = (unsigned)take(&p, &left, 1);
            *field(&h, i) = take(&p, &left, 8);
        }
    }
    w.size = h.total_bytes;
    const char *bad = shm_hdr_check(&h, &w);
    if (bad) {
        must(bad[0] != 0);
        return 0;
    }
    uint64_t S = h.slot_bytes, N = (uint64_t)n;
    /* the slots */
    must(S >= mul(N > 1 ? N - 1 : 1, 8) && S % SHM_LINE == 0 && h.small_bytes <= S);
    must(add(S, SHM_LINE) <= h.buf_stride && mul(2, h.buf_stride) <= h.rank_stride);
    /* the regions in order, inside the mapping */
    must(h.ctl_off >= sizeof(shm_seg_hdr) && add(h.ctl_off, mul(N, SHM_CTL_BYTES)) <= h.slot_off);
    must(add(h.slot_off, mul(N, add(h.rank_stride, COH_SHM_AUX_BYTES))) <= h.ring_off);
    must(add(h.ring_off, mul(N, h.ring_stride)) <= h.p2p_off);
    must(add(h.p2p_off, mul(mul(N, N), h.p2p_stride)) <= w.size);
    /* a rank's ring */
    shm_ringcfg rc = shm_hdr_ringcfg(&h);
    if (rc.k) {
        must(rc.crec == 32 || rc.crec == 64);
        uint64_t nrec = shm_ring_nrec(&rc);
        must(nrec >= 4 * rc.k && nrec >= 4 * rc.tiny_k && rc.tiny_bytes <= rc.bytes);
        uint64_t rec_end = mul(nrec, sizeof(shm_ring_rec));
        must(shm_ring_slot_stride(rc.bytes) >= rc.bytes);
        must(add(rec_end, mul(rc.k, shm_ring_slot_stride(rc.bytes))) <= shm_ring_tiny_off(&rc));
        must(add(shm_ring_tiny_off(&rc), mul(rc.tiny_k, shm_ring_slot_stride(rc.tiny_bytes))) <=
             shm_ring_done_off(&rc));
        must(add(shm_ring_done_off(&rc), mul(nrec, sizeof(uint32_t) + SHM_LINE)) <=
             shm_ring_crec_off(&rc));
        must(add(shm_ring_crec_off(&rc), mul(nrec, rc.crec)) <= h.ring_stride);
    } else {
        must(h.ring_stride == 0 && !rc.tiny_k);
    }
    /* a channel */
    if (h.p2p_stride) {
        must(h.p2p_bytes && n > 1);
        must(add(sizeof(shm_chan) + SHM_P2P_HEADS * 2 * SHM_LINE,
                 mul(SHM_P2P_SLOTS, shm_p2p_slot_stride(h.p2p_bytes))) <= h.p2p_stride);
        must(shm_p2p_slot_stride(h.p2p_bytes) >= h.p2p_bytes);
    }
    return 0;
}
