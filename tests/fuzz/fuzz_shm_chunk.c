/*
 * fuzz_shm_chunk.c - libFuzzer target for the send/recv channels' chunk
 * check (shm_chunk_parse, src/coll/shm/shm_p2p.c): a channel slot is memory
 * a peer writes, and the receiver reads its head line from it (segment
 * layout v11: stamp, short header, inline data or descriptor).
 *
 * Input: a context byte string (which chunk is due, of which message, on
 * what segment), then the slot's head line (zero-padded when short).
 * Properties beyond "no crash / out-of-bounds access" (ASan, UBSan): a
 * chunk that passes
 *  - is a send/recv message from the expected sender to the expected
 *    receiver, the chunk index due, len = count x its dtype's size;
 *  - continuing a message, has that message's len;
 *  - copies at most slot_bytes, never past the message's end (have +
 *    bytes <= len), and exactly what is left of it or a full slot;
 *  - as a single copy, is a whole first chunk of cma_min <= len < cma_end bytes;
 *  - has its data inline exactly when it is a copy of <= SHM_CHAN_INLINE
 *    bytes (then the whole message), and the rebuilt header carries the
 *    segment's group and generation and no op;
 * and a refusal is a non-empty text. The same function replays the
 * checked-in corpus in a normal ctest run.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/shm/shm_seg.h"

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    size_t n = size;
    unsigned flags = (unsigned)take(&p, &n, 1);
    shm_chunk_ctx x;
    x.src = (int32_t)take(&p, &n, 1);
    x.dst = (int32_t)take(&p, &n, 1);
    x.step = (uint32_t)take(&p, &n, 2);
    x.slot_bytes = 64 * (1 + take(&p, &n, 2) % 16384); /* COHORT_SHM_P2P_BYTES: 64 B .. 1 MiB */
    x.cma_min = flags & 1 ? UINT64_MAX : take(&p, &n, 4);
    x.cma_end = flags & 5 ? UINT64_MAX : x.cma_min + take(&p, &n, 4);
    if (flags & 2) { /* continuing a message */
        x.len = take(&p, &n, 8);
        x.have = x.len ? take(&p, &n, 8) % x.len : 0;
    } else {
        x.len = UINT64_MAX;
        x.have = 0;
    }
    x.group = 0x31524843u;
    x.gen = 7;
    unsigned char slot[SHM_LINE];
    memset(slot, 0, sizeof slot);
    memcpy(slot, p, n < sizeof slot ? n : sizeof slot);
    coh_hdr h;
    shm_chan_desc d;
    shm_chan_head hd;
    const char *bad = shm_chunk_parse(slot, &x, &h, &d, &hd);
    if (bad) {
        must(bad[0] != 0);
        return 0;
    }
    must(h.magic == COH_HDR_MAGIC && h.kind == COH_MSG_P2P && h.coll == COH_COLL_SEND);
    must(h.src == x.src && h.root == x.dst && h.step == x.step);
    must(h.group == x.group && h.gen == x.gen && h.redop == -1);
    size_t es = cohort_dtype_size((cohort_dtype)h.dtype);
    must(es && h.count <= UINT64_MAX / es && h.len == h.count * es);
    if (x.len != UINT64_MAX)
        must(h.len == x.len);
    if (d.mode == SHM_CHAN_CMA) {
        must(x.len == UINT64_MAX && d.bytes == h.len && h.len >= x.cma_min &&
             h.len < x.cma_end);
    } else {
        uint64_t have = x.len == UINT64_MAX ? 0 : x.have;
        must(d.mode == SHM_CHAN_COPY && d.bytes <= x.slot_bytes && have + d.bytes <= h.len);
        must(d.bytes == x.slot_bytes || have + d.bytes == h.len);
        if (h.len <= SHM_CHAN_INLINE) /* inline: the whole message, from the copy */
            must(have == 0 && d.bytes == h.len && d.bytes <= sizeof hd.u.inl);
    }
    return 0;
}
