/* group_util.h - a hand-built group (no rendezvous, no transports) for
 * testing the contract and trace modules on their own, and the header a
 * rank would send. */
#ifndef COHORT_TEST_GROUP_UTIL_H
#define COHORT_TEST_GROUP_UTIL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/group.h"
#include "support/group.h"
#include "trace/trace.h"

/* The "unit" variant of the one group factory (tests/support/group.h). */
static inline cohort_group *tg_make(int rank, int size)
{
    cht_group_opts o = {.job = "unit", .timeout_ms = 1000, .stall_warn_ms = -1, .check_contract = 1};
    return cht_group_new(rank, size, &o);
}

/* The header a rank sends for call c (what coh_hdr_from_call will do). */
static inline coh_hdr tg_hdr(const cohort_group *g, int src, const coh_call *c)
{
    coh_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = COH_HDR_MAGIC;
    h.kind = (c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV) ? COH_MSG_P2P : COH_MSG_COLL;
    h.coll = c->coll;
    h.dtype = c->dtype;
    h.redop = c->redop;
    h.group = g->id;
    h.gen = g->generation;
    h.seq = c->seq;
    h.count = c->count;
    h.root = c->root;
    h.tag = c->tag;
    h.site = c->site;
    h.src = src;
    h.line = (uint32_t)c->line;
    return h;
}

#endif
