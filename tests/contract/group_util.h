/* group_util.h - a hand-built group (no rendezvous, no transports) for
 * testing the contract and trace modules on their own. */
#ifndef COHORT_TEST_GROUP_UTIL_H
#define COHORT_TEST_GROUP_UTIL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract/contract.h"
#include "core/group.h"
#include "trace/trace.h"

static inline cohort_group *tg_make(int rank, int size)
{
    cohort_group *g = calloc(1, sizeof *g);
    g->rank = rank;
    g->size = size;
    g->generation = 1;
    g->id = 0;
    snprintf(g->job_id, sizeof g->job_id, "unit");
    g->timeout_ms = 1000;
    g->stall_warn_ms = -1;
    g->check_contract = 1;
    pthread_mutex_init(&g->err_mu, NULL);
    return g;
}

static inline void tg_free(cohort_group *g)
{
    coh_trace_destroy(g->trace);
    coh_err_detail_free(g->detail);
    pthread_mutex_destroy(&g->err_mu);
    free(g);
}

static inline coh_call tg_call(uint64_t seq, int coll, int dtype, int redop, int root, int tag,
                               uint64_t count, const char *file, int line)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.seq = seq;
    c.coll = (uint8_t)coll;
    c.dtype = (uint8_t)dtype;
    c.redop = (int8_t)redop;
    c.root = root;
    c.tag = tag;
    c.count = count;
    c.file = file;
    c.line = line;
    c.site = coh_site_hash(file, line);
    return c;
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
