#ifndef COHORT_SHM_GEO_H
#define COHORT_SHM_GEO_H
/*
 * shm_geo.h - the segment's layout and the member's check of the lead's
 * header. Every rank computes the layout from a few numbers (local ranks,
 * slot bytes, the ring's configuration, the channels' slot bytes); a
 * member takes those numbers from the header the lead wrote, which is
 * memory another process can still write: it checks a private copy, each
 * number against the range a lead could have chosen before any arithmetic
 * (a slot size near 2^64 would wrap the strides and pass a bare equality
 * check), then every offset against its own computation, and builds its
 * view of the segment from that copy only.
 */
#include <stddef.h>
#include <stdint.h>

#include "transport/shm/shm_seg.h"

static inline size_t shm_round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* The ring's configuration, agreed through the header (the lead's wins). */
typedef struct shm_ringcfg {
    size_t k, bytes, tiny_k, tiny_bytes; /* k 0: no ring; tiny_k 0: no tiny ring */
    int split;   /* the footprint split (shm_seg.h), when K slots exceed it */
    size_t crec; /* bytes per compact record: 32 (two a line) or 64 (one) */
} shm_ringcfg;

/* Offsets and strides from (n, S, ring, channel bytes). */
typedef struct shm_geo {
    size_t buf_stride, rank_stride, ctl_off, slot_off, ring_off, ring_stride, p2p_off, p2p_stride,
        total;
} shm_geo;

size_t shm_ring_slot_stride(size_t ring_bytes);
size_t shm_p2p_slot_stride(size_t p2p_bytes);
/* Records per rank: 4 x the deepest ring (shm_seg.h, "The ring"). */
size_t shm_ring_nrec(const shm_ringcfg *r);
/* Within a rank's ring: [records][k slots][tiny_k slots][done words]
 * [compact records]; the offsets of the last three. */
size_t shm_ring_tiny_off(const shm_ringcfg *r);
size_t shm_ring_done_off(const shm_ringcfg *r);
size_t shm_ring_crec_off(const shm_ringcfg *r);
void shm_geometry(int n, size_t S, const shm_ringcfg *r, size_t p2p_bytes, shm_geo *o);

/* Who the segment must belong to: the member's own view of its group. */
typedef struct shm_hdr_want {
    int n;            /* local ranks */
    uint32_t group, gen;
    uint64_t job_hash;
    uint32_t check;   /* this rank's contract check (0 or 1) */
    uint64_t size;    /* bytes of the mapping (the sealed memfd's size) */
} shm_hdr_want;

/* The header's plain fields, magic to p2p_stride: written by the lead
 * before any member maps the segment, never after. */
#define SHM_HDR_PLAIN_BYTES offsetof(shm_seg_hdr, flags)

/* The lead's header for (w, S, small, ring, channel bytes); *geo gets the
 * layout. Writes the plain fields only, magic last. */
void shm_hdr_fill(shm_seg_hdr *h, const shm_hdr_want *w, size_t S, size_t small,
                  const shm_ringcfg *rc, size_t p2p_bytes, shm_geo *geo);
/* NULL when h (a private copy of the plain fields) describes a segment of
 * w->size bytes for w's group that this build can use; else the name of
 * the first field that does not (for the error message). */
const char *shm_hdr_check(const shm_seg_hdr *h, const shm_hdr_want *w);
/* The ring's configuration of a checked header. */
shm_ringcfg shm_hdr_ringcfg(const shm_seg_hdr *h);

#endif
