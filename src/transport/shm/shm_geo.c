/*
 * shm_geo.c - the segment's layout and the member's check of the lead's
 * header (shm_geo.h says why the check bounds every number first).
 */
#include "transport/shm/shm_geo.h"

#include "transport/shm/shm.h"

#include "util/util.h"

size_t shm_ring_slot_stride(size_t ring_bytes) { return shm_round_up(ring_bytes, SHM_LINE); }

size_t shm_p2p_slot_stride(size_t p2p_bytes) { return shm_round_up(p2p_bytes, SHM_LINE); }

size_t shm_ring_nrec(const shm_ringcfg *r) { return 4 * COH_MAX(r->k, r->tiny_k); }

size_t shm_ring_tiny_off(const shm_ringcfg *r)
{
    return shm_ring_nrec(r) * sizeof(shm_ring_rec) + r->k * shm_ring_slot_stride(r->bytes);
}

/* Then (since layout version 10) nrec done words: a reader stores phase x
 * into word x % nrec once its check of phase x passed; and (since 17) as
 * many spread one to a cache line, for the shallow ring (shm_ring_done). */
size_t shm_ring_done_off(const shm_ringcfg *r)
{
    return shm_round_up(shm_ring_tiny_off(r) + r->tiny_k * shm_ring_slot_stride(r->tiny_bytes),
                        SHM_LINE);
}

/* Then (since 21) nrec compact records, two to a line or (since 26) one
 * (shm_ring_crec; crec bytes apart). */
size_t shm_ring_crec_off(const shm_ringcfg *r)
{
    return shm_round_up(shm_ring_done_off(r) + shm_ring_nrec(r) * (sizeof(uint32_t) + SHM_LINE),
                        SHM_LINE);
}

void shm_geometry(int n, size_t S, const shm_ringcfg *r, size_t p2p_bytes, shm_geo *o)
{
    o->buf_stride = shm_round_up(SHM_LINE + S, SHM_LINE);
    o->rank_stride = shm_round_up(2 * o->buf_stride, 4096);
    o->ctl_off = SHM_SEG_HDR_BYTES;
    o->slot_off = shm_round_up(o->ctl_off + (size_t)n * SHM_CTL_BYTES, 4096);
    /* then [aux, COH_SHM_AUX_BYTES x n]: see coh_shm_aux; then the ring */
    o->ring_off = o->slot_off + (size_t)n * (o->rank_stride + COH_SHM_AUX_BYTES);
    o->ring_stride = r->k ? shm_round_up(shm_ring_crec_off(r) + shm_ring_nrec(r) * r->crec, 4096)
                          : 0;
    /* then the send/recv channels, n x n (the diagonal carries no messages:
     * its head is the rank's bell, shm_bell_ring) */
    o->p2p_off = o->ring_off + (size_t)n * o->ring_stride;
    o->p2p_stride = p2p_bytes && n > 1
                        ? shm_round_up(sizeof(shm_chan) + SHM_P2P_HEADS * 2 * SHM_LINE +
                                           SHM_P2P_SLOTS * shm_p2p_slot_stride(p2p_bytes),
                                       4096)
                        : 0;
    o->total = o->p2p_off + (size_t)n * (size_t)n * o->p2p_stride;
}

void shm_hdr_fill(shm_seg_hdr *h, const shm_hdr_want *w, size_t S, size_t small,
                  const shm_ringcfg *rc, size_t p2p_bytes, shm_geo *geo)
{
    shm_geometry(w->n, S, rc, p2p_bytes, geo);
    h->version = SHM_VERSION;
    h->group = w->group;
    h->gen = w->gen;
    h->job_hash = w->job_hash;
    h->local_size = (uint32_t)w->n;
    h->check_contract = w->check;
    h->slot_bytes = S;
    h->small_bytes = small;
    h->total_bytes = geo->total;
    h->ctl_off = geo->ctl_off;
    h->slot_off = geo->slot_off;
    h->rank_stride = geo->rank_stride;
    h->buf_stride = geo->buf_stride;
    h->ring_k = rc->k;
    h->ring_bytes = rc->bytes;
    h->tiny_k = rc->tiny_k;
    h->tiny_bytes = rc->tiny_bytes;
    h->ring_split = (uint64_t)rc->split;
    h->crec_stride = rc->crec;
    h->ring_off = geo->ring_off;
    h->ring_stride = geo->ring_stride;
    h->p2p_bytes = geo->p2p_stride ? p2p_bytes : 0;
    h->p2p_off = geo->p2p_off;
    h->p2p_stride = geo->p2p_stride;
    h->magic = SHM_MAGIC;
}

shm_ringcfg shm_hdr_ringcfg(const shm_seg_hdr *h)
{
    return (shm_ringcfg){(size_t)h->ring_k, (size_t)h->ring_bytes, (size_t)h->tiny_k,
                         (size_t)h->tiny_bytes, (int)h->ring_split, (size_t)h->crec_stride};
}

/* 0 or a power of two >= 2, at most max */
static int pow2_or_0(uint64_t v, uint64_t max) { return v <= max && v != 1 && !(v & (v - 1)); }

const char *shm_hdr_check(const shm_seg_hdr *h, const shm_hdr_want *w)
{
    if (w->size < SHM_SEG_HDR_BYTES)
        return "size";
    if (h->magic != SHM_MAGIC)
        return "magic";
    if (h->version != SHM_VERSION)
        return "version";
    if (h->group != w->group)
        return "group";
    if (h->gen != w->gen)
        return "gen";
    if (h->job_hash != w->job_hash)
        return "job_hash";
    if (w->n < 1 || h->local_size != (uint32_t)w->n)
        return "local_size";
    /* the lead refuses a member whose check differs; a header that turned
     * it off would silently drop this rank's contract check */
    if (h->check_contract != w->check)
        return "check_contract";
    /* the ranges read_env allows: whole lines, room for n-1 blocks of 8 B */
    uint64_t min_s = (uint64_t)(w->n > 1 ? w->n - 1 : 1) * 8;
    if (h->slot_bytes < SHM_MIN_SLOT_BYTES || h->slot_bytes > SHM_MAX_SLOT_BYTES ||
        h->slot_bytes % SHM_LINE || h->slot_bytes < min_s)
        return "slot_bytes";
    if (h->small_bytes > h->slot_bytes)
        return "small_bytes";
    if (!pow2_or_0(h->ring_k, SHM_MAX_RING_SLOTS))
        return "ring_k";
    if (h->ring_bytes > SHM_MAX_RING_BYTES || (h->ring_k == 0) != (h->ring_bytes == 0))
        return "ring_bytes";
    if (!pow2_or_0(h->tiny_k, SHM_MAX_TINY_SLOTS) || (h->tiny_k && !h->ring_k))
        return "tiny_k";
    if (h->tiny_bytes > SHM_MAX_TINY_BYTES || h->tiny_bytes > h->ring_bytes ||
        (h->tiny_k == 0) != (h->tiny_bytes == 0))
        return "tiny_bytes";
    if (h->ring_split > 1)
        return "ring_split";
    if (h->crec_stride != sizeof(shm_ring_crec) && h->crec_stride != SHM_LINE)
        return "crec_stride";
    /* 0: send/recv over tcp (and always with one local rank) */
    if (h->p2p_bytes > SHM_MAX_P2P_BYTES || h->p2p_bytes % SHM_LINE || (w->n == 1 && h->p2p_bytes))
        return "p2p_bytes";
    /* every number bounded: the layout cannot wrap (256 MiB slots, 1 MiB
     * ring slots, and n is this process's own) */
    shm_ringcfg rc = shm_hdr_ringcfg(h);
    shm_geo g;
    shm_geometry(w->n, (size_t)h->slot_bytes, &rc, (size_t)h->p2p_bytes, &g);
    if (h->buf_stride != g.buf_stride)
        return "buf_stride";
    if (h->rank_stride != g.rank_stride)
        return "rank_stride";
    if (h->ctl_off != g.ctl_off)
        return "ctl_off";
    if (h->slot_off != g.slot_off)
        return "slot_off";
    if (h->ring_off != g.ring_off)
        return "ring_off";
    if (h->ring_stride != g.ring_stride)
        return "ring_stride";
    if (h->p2p_off != g.p2p_off)
        return "p2p_off";
    if (h->p2p_stride != g.p2p_stride)
        return "p2p_stride";
    if (h->total_bytes != g.total || h->total_bytes != w->size)
        return "total_bytes";
    return NULL;
}
