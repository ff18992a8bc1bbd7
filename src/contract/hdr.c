/* hdr.c - a call's contract as the header its messages carry. */
#include <string.h>

#include "contract/hdr.h"

void coh_hdr_from_call(coh_hdr *h, const cohort_group *g, const coh_call *c, int kind,
                       uint32_t step, uint64_t len)
{
    /* Zeroed first: the header goes on the wire whole, padding included. */
    memset(h, 0, sizeof *h);
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
