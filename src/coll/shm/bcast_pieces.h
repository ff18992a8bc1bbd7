/*
 * bcast_pieces.h - the announcement that opens a broadcast in ring pieces
 * (bcast_pieces.c; docs/shm.md "Broadcast in ring pieces"). Here so the
 * tests can forge one: a reader reads it from a peer's memory.
 */
#ifndef COHORT_COLL_SHM_BCAST_PIECES_H
#define COHORT_COLL_SHM_BCAST_PIECES_H

#include <stdint.h>

#include "transport/shm/shm_mem.h"
#include "transport/shm/shm_seg.h"

/* The first ring call of every broadcast in pieces: what follows. Read by
 * the readers into their own copy (never into the user's buffer). */
#define PIECES_MAGIC 0x50434543u /* "CECP" */
enum { PIECES_DATA = 0, PIECES_MEM = 1 };
typedef struct pieces_ann {
    uint32_t magic, mode; /* PIECES_DATA: the pieces follow; PIECES_MEM: read d */
    uint64_t bytes;       /* the message's (the contract agreed on count and dtype) */
    shm_mem_desc d;       /* the root's region (cohort_mem_alloc, the shared heap) */
} pieces_ann;
_Static_assert(sizeof(pieces_ann) <= SHM_DEFAULT_TINY_BYTES, "the announcement is a tiny call");

#endif
