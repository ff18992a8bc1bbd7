/* msg.c - batch helpers over the message transport, scratch allocation,
 * and the transport seam (coll_int.h). */
#include <string.h>

#include "coll/coll_int.h"

static const coh_coll_transport real_tp = {
    .xfer = coh_net_xfer,
    .shm_all_reduce = coh_shm_all_reduce,
    .shm_reduce = coh_shm_reduce,
    .shm_broadcast = coh_shm_broadcast,
    .shm_all_gather = coh_shm_all_gather,
    .shm_gather = coh_shm_gather,
    .shm_scatter = coh_shm_scatter,
    .shm_reduce_scatter = coh_shm_reduce_scatter,
    .shm_all_to_all = coh_shm_all_to_all,
    .shm_barrier = coh_shm_barrier,
};

const coh_coll_transport *coh_coll_tp = &real_tp;

void coh_coll_set_transport(const coh_coll_transport *t) { coh_coll_tp = t ? t : &real_tp; }

void coh_xf_send(coh_xfer *x, const cohort_group *g, const coh_call *c, int peer, uint32_t step,
                 const void *buf, size_t len)
{
    memset(x, 0, sizeof *x);
    x->peer = peer;
    x->is_send = 1;
    coh_hdr_from_call(&x->hdr, g, c, COH_MSG_COLL, step, len);
    x->buf = (void *)buf; /* the transport only reads a send buffer */
    x->len = len;
}

void coh_xf_recv(coh_xfer *x, const cohort_group *g, const coh_call *c, int peer, uint32_t step,
                 void *buf, size_t len)
{
    memset(x, 0, sizeof *x);
    x->peer = peer;
    x->is_send = 0;
    /* The expected header is built from this rank's own call: the transport
     * compares it field by field with the one that arrives. */
    coh_hdr_from_call(&x->hdr, g, c, COH_MSG_COLL, step, len);
    x->buf = buf;
    x->len = len;
}

cohort_status coh_xf_run(cohort_group *g, const coh_call *c, coh_xfer *ops, int nops)
{
    if (nops == 0)
        return COHORT_OK;
    if (!g->net) /* only a group of one has no connections */
        return coh_group_fail(g, COHORT_ERR_UNSUPPORTED, "%s #%llu: no message transport",
                              coh_coll_label(c->coll), (unsigned long long)c->seq);
    return coh_coll_tp->xfer(g->net, c, ops, nops);
}

const coh_call *coh_shm_sum_call(cohort_group *g, const coh_call *c, coh_call *tmp,
                                 cohort_status *st)
{
    *st = COHORT_OK;
    if (c->redop != COHORT_AVG)
        return c;
    /* The barrier compares the real contract (AVG included) between the
     * local ranks; the reduction itself then runs as SUM, so however the
     * segment treats AVG, coh_coll_run divides exactly once, by the group
     * size. */
    *st = coh_coll_tp->shm_barrier(g->shm, c);
    *tmp = *c;
    tmp->redop = COHORT_SUM;
    return tmp;
}

void *coh_coll_alloc(cohort_group *g, const coh_call *c, size_t bytes, const char *what)
{
    void *p = coh_malloc(bytes ? bytes : 1);
    if (!p)
        coh_group_fail(g, COHORT_ERR_NOMEM, "%s #%llu: cannot allocate %zu bytes for %s",
                       coh_coll_label(c->coll), (unsigned long long)c->seq, bytes, what);
    return p;
}
