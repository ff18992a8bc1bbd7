/*
 * lane.h - the shm rows of the algorithm table for the direct lane's kinds
 * (broadcast, scatter, gather, reduce, all_reduce), inline: algos.c's table
 * points at them, and the engine's direct lane (engine.c, run_lane; group.h,
 * lane_mask) runs them through coh_coll_lane, so a lane call makes no call
 * between the engine and the transport. One definition for both.
 */
#ifndef COH_COLL_LANE_H
#define COH_COLL_LANE_H

#include "coll/coll_int.h"

static inline size_t coh_lane_bytes(const coh_call *c)
{
    return (size_t)c->count * coh_dtype_size(c->dtype);
}
/* shm collectives number ranks by their index on the host; with every rank
 * on one host that is the group rank, but the peer table says so. */
static inline int coh_lane_lroot(const cohort_group *g, int root)
{
    return g->peers[root].local_index;
}

static COH_INLINE cohort_status coh_lane_ar_shm(cohort_group *g, coh_call *c)
{
    coh_call tmp;
    cohort_status st;
    const coh_call *rc = coh_shm_sum_call(g, c, &tmp, &st);
    return st ? st : coh_coll_tp->shm_all_reduce(g->shm, rc, c->send, c->recv, c->count);
}
static COH_INLINE cohort_status coh_lane_bc_shm(cohort_group *g, coh_call *c)
{
    return coh_coll_tp->shm_broadcast(g->shm, c, c->recv ? c->recv : (void *)c->send,
                                      coh_lane_bytes(c), coh_lane_lroot(g, c->root));
}
static COH_INLINE cohort_status coh_lane_red_shm(cohort_group *g, coh_call *c)
{
    coh_call tmp;
    cohort_status st;
    const coh_call *rc = coh_shm_sum_call(g, c, &tmp, &st);
    return st ? st
              : coh_coll_tp->shm_reduce(g->shm, rc, c->send, c->recv, c->count,
                                        coh_lane_lroot(g, c->root));
}
/* In place (send == recv, as MPI_IN_PLACE), the rank's own block already
 * sits in its slot of recv; passing the slot itself (NCCL's way) works too. */
static COH_INLINE cohort_status coh_lane_ga_shm(cohort_group *g, coh_call *c)
{
    const void *own = c->send == c->recv
                          ? (const char *)c->recv + (size_t)g->rank * coh_lane_bytes(c)
                          : c->send;
    return coh_coll_tp->shm_gather(g->shm, c, own, c->recv, coh_lane_bytes(c),
                                   coh_lane_lroot(g, c->root));
}
static COH_INLINE cohort_status coh_lane_sc_shm(cohort_group *g, coh_call *c)
{
    return coh_coll_tp->shm_scatter(g->shm, c, c->send, c->recv, coh_lane_bytes(c),
                                    coh_lane_lroot(g, c->root));
}

/* A call in the direct lane: what run_selected (select.c) does for it
 * with the shm row selected - the row's run, and after a broadcast the
 * barrier's leader - without the selection memo's compare. The lane's
 * conditions (count > 0; an AVG is divided in the shm fold) leave nothing else of
 * run_selected to do. */
static COH_INLINE cohort_status coh_coll_lane(cohort_group *g, coh_call *c)
{
    switch (c->coll) {
    case COH_COLL_BROADCAST: {
        cohort_status st = coh_lane_bc_shm(g, c);
        if (st == COHORT_OK) {
            g->bar_seq = c->seq + 1; /* as run_selected */
            g->bar_root = c->root;
        }
        return st;
    }
    case COH_COLL_SCATTER:
        return coh_lane_sc_shm(g, c);
    case COH_COLL_GATHER:
        return coh_lane_ga_shm(g, c);
    case COH_COLL_REDUCE:
        return coh_lane_red_shm(g, c);
    case COH_COLL_ALL_REDUCE:
        return coh_lane_ar_shm(g, c);
    default:
        return coh_coll_run(g, c); /* not a lane kind: the full path */
    }
}

#endif
