/*
 * bcast_pieces.c - coh_shm_broadcast: a broadcast in ring pieces
 * (shm_ring_pieces; docs/shm.md "Broadcast in ring pieces") when the ranks
 * outnumber the cpus and the message is above the ring's slot and at most
 * 8 pieces, else shm_coll.c's coh_shm_broadcast_plain. The pieces are
 * whole ring calls of shm_coll.c - an announcement, then one ring
 * broadcast per piece - and live in a translation unit of their own, the
 * choice too: shm_coll.c compiles byte for byte as before. Any code added
 * there changes how GCC inlines the whole file; built inside it this path
 * moved 2-rank calls of 1-4 KiB it does not take by x1.1-2.1, and a test
 * at the top of its broadcast reallocated that function's registers
 * throughout (docs/performance.md).
 */
#include <string.h>

#include "coll/fail/fail.h"
#include "coll/shm/bcast_pieces.h"
#include "coll/shm/shm_coll.h"
#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_mem.h"
#include "transport/shm/shm_seg.h"
#include "util/util.h"


/* From the root's region d (announced): every reader copies the message
 * from it in place, then a ring gather of nothing to the root, whose
 * leaves publish once they are done and return at once: the root must not
 * return while a reader still reads its buffer. No split (readers offering
 * their own regions for the root to write a share): at <= 8 pieces it did
 * not pay (docs/shm.md). */
static cohort_status pieces_mem(coh_shm *s, const coh_call *c, void *buf, size_t bytes, int root,
                                const shm_mem_desc *d)
{
    cohort_status st;
    if (s->me != root) {
        unsigned char *base;
        if (d->bytes != bytes || d->off > d->size || d->bytes > d->size - d->off)
            return coh_group_fail(s->g, COHORT_ERR_PROTOCOL,
                                  "shm broadcast #%llu: rank %d announced %llu bytes at %llu in "
                                  "a %llu-byte region, this rank %zu bytes",
                                  (unsigned long long)c->seq, s->g->local_ranks[root],
                                  (unsigned long long)d->bytes, (unsigned long long)d->off,
                                  (unsigned long long)d->size, bytes);
        if ((st = coh_mem_map(s, root, d, c, 0, &base)) != COHORT_OK)
            return coh_coll_transport_failed(s->g, st); /* with what the map recorded */
        coh_shm_copy(buf, base + d->off, bytes, 0);
    }
    st = coh_shm_gather(s, c, NULL, NULL, 0, root);
    if (st == COHORT_OK)
        coh_mem_count(s->me == root ? COH_MEM_ROOTED : COH_MEM_READ);
    return st;
}

static COH_NOINLINE cohort_status bcast_pieces(coh_shm *s, const coh_call *c, void *buf,
                                               size_t bytes, int root)
{
    pieces_ann a;
    memset(&a, 0, sizeof a);
    cohort_status st;
    /* A root runs at most two calls in pieces ahead: it starts call N once
     * every rank is done with call N - 2. Ahead by the whole ring (the
     * small ring's rule) it ran until the ring was full, then waited while
     * its readers, descheduled all along, drained it (4 ranks on 2 cpus, 64
     * KiB back to back: p50 5.4 us, p99 308); one call ahead, every call
     * waited (p50 15.8, p99 38); two: mean 14.8, p99 34 (docs/shm.md).
     * Farther back than K phases the phase is reached (ring calls bound a
     * reader's lag to K), and the test stays right across a wrap. */
    uint32_t *end = &s->pieces_end[s->pieces_n & 1];
    if (s->me == root && (uint32_t)(s->phase - *end) < s->ring_k) {
        shm_op o;
        shm_op_bare(&o, s, c);
        if ((st = shm_wait_all(&o, *end)) != COHORT_OK)
            return coh_coll_transport_failed(s->g, st);
    }
    if (s->me == root) {
        a.magic = PIECES_MAGIC;
        a.bytes = bytes;
        /* a root buffer the one-copy path would take: read in place */
        if (s->mem_ok && coh_mem_find(s->g, buf, bytes, &a.d) && coh_mem_recent(s, &a.d, 1))
            a.mode = PIECES_MEM;
    }
    st = coh_shm_broadcast_plain(s, c, &a, sizeof a, root);
    if (st != COHORT_OK)
        return st;
    if (a.magic != PIECES_MAGIC || a.mode > PIECES_MEM || a.bytes != bytes)
        return coh_group_fail(s->g, COHORT_ERR_PROTOCOL,
                              "shm broadcast #%llu in ring pieces: rank %d announced %s "
                              "(mode %u, %llu bytes), this rank %zu bytes",
                              (unsigned long long)c->seq, s->g->local_ranks[root],
                              a.magic == PIECES_MAGIC ? "another call" : "garbage", a.mode,
                              (unsigned long long)a.bytes, bytes);
    if (a.mode == PIECES_DATA) {
        /* piece j: one ring broadcast of ring_bytes with the call's
         * fingerprint (the last may fall to the tiny ring) */
        unsigned char *b = buf;
        for (size_t off = 0; off < bytes && st == COHORT_OK; off += s->ring_bytes)
            st = coh_shm_broadcast_plain(s, c, b + off, COH_MIN(s->ring_bytes, bytes - off),
                                         root);
    } else {
        st = pieces_mem(s, c, buf, bytes, root, &a.d);
    }
    *end = s->phase;
    s->pieces_n++;
    return st;
}

cohort_status coh_shm_broadcast(coh_shm *s, const coh_call *c, void *buf, size_t bytes, int root)
{
    if (shm_ring_pieces(s, bytes))
        return bcast_pieces(s, c, buf, bytes, root);
    /* the timed verdict's window starts above the pieces (shm_cma_agree) */
    if (!s || !s->ov || !c || bytes < s->ov_from[COH_COLL_BROADCAST])
        return coh_shm_broadcast_plain(s, c, buf, bytes, root); /* a tail call */
    shm_ov_enter(s, c, COH_COLL_BROADCAST, bytes);
    cohort_status st = coh_shm_broadcast_plain(s, c, buf, bytes, root);
    shm_ov_done(s, st);
    return st;
}
