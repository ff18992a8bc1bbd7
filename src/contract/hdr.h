/*
 * hdr.h - the call's fingerprint as it travels: the 64-byte header every
 * data-plane message carries (tcp frames, and the shared segment's slots),
 * built from a call here and compared by coh_hdr_match (contract.h).
 */
#ifndef COH_CONTRACT_HDR_H
#define COH_CONTRACT_HDR_H

#include <stdint.h>

#include "core/group.h"

#define COH_HDR_MAGIC 0x31524843u /* "CHR1" little-endian */

enum coh_msg_kind {
    COH_MSG_COLL = 1,  /* a collective's message: seq = group seq, step = algorithm step */
    COH_MSG_P2P = 2,   /* send/recv: seq = per-pair seq, tag = user tag */
    COH_MSG_ABORT = 3, /* payload: UTF-8 reason; status in tag */
    COH_MSG_BYE = 4,   /* no payload: the sender closes cleanly (coh_net_destroy); an EOF
                          after it is not a peer death */
};

/* Wire header, 64 bytes, little-endian host order (all hosts of a job are
 * assumed the same endianness; the handshake checks it). */
typedef struct coh_hdr {
    uint32_t magic;
    uint8_t kind;   /* coh_msg_kind */
    uint8_t coll;   /* coh_coll */
    uint8_t dtype;  /* cohort_dtype */
    int8_t redop;   /* cohort_op or -1 */
    uint32_t group; /* group id */
    uint32_t gen;   /* generation */
    uint64_t seq;
    uint64_t count; /* the call's count (not this message's) */
    int32_t root;   /* root / peer, -1 */
    int32_t tag;
    uint32_t step;  /* algorithm step or chunk index within the call */
    uint32_t site;  /* sender's call-site hash (reported, never compared) */
    uint64_t len;   /* payload bytes following this header */
    int32_t src;    /* sender's group rank */
    uint32_t line;  /* sender's call-site line (for reports) */
} coh_hdr;
_Static_assert(sizeof(coh_hdr) == 64, "coh_hdr is 64 bytes on the wire");
#define COH_HDR_FSZ(f) sizeof(((coh_hdr *)0)->f)
_Static_assert(COH_HDR_FSZ(magic) + COH_HDR_FSZ(kind) + COH_HDR_FSZ(coll) + COH_HDR_FSZ(dtype) +
                       COH_HDR_FSZ(redop) + COH_HDR_FSZ(group) + COH_HDR_FSZ(gen) +
                       COH_HDR_FSZ(seq) + COH_HDR_FSZ(count) + COH_HDR_FSZ(root) +
                       COH_HDR_FSZ(tag) + COH_HDR_FSZ(step) + COH_HDR_FSZ(site) +
                       COH_HDR_FSZ(len) + COH_HDR_FSZ(src) + COH_HDR_FSZ(line) ==
                   sizeof(coh_hdr),
               "coh_hdr has no padding and no field coh_hdr_from_call leaves out");
#undef COH_HDR_FSZ

/* Fills h from the call's contract. Inline: the shm layer builds one per
 * small call (a call of ~37 instructions out of line, callgrind). Every
 * field is stored and the struct has no padding (64 bytes of fields), so
 * the header goes on the wire whole without a memset first. */
static inline void coh_hdr_from_call(coh_hdr *h, const cohort_group *g, const coh_call *c,
                                     int kind, uint32_t step, uint64_t len)
{
    h->magic = COH_HDR_MAGIC;
    h->kind = (uint8_t)kind;
    h->coll = c->coll;
    h->dtype = c->dtype;
    h->redop = c->redop;
    h->group = g->id;
    h->gen = g->generation;
    h->seq = c->seq;
    h->count = c->count;
    h->root = c->root;
    h->tag = c->tag;
    h->step = step;
    h->site = c->site;
    h->len = len;
    h->src = g->rank;
    h->line = c->line < 0 ? 0 : (uint32_t)c->line;
}

#endif
