/*
 * perrank.c - collectives that move distinct per-rank blocks without
 * reducing them: linear and binomial gather/scatter, pairwise all-to-all,
 * and point-to-point send/recv. All over a view; B is the bytes per rank.
 */
#include <string.h>

#include "coll/coll_int.h"
#include "coll/shm/shm_coll.h"

cohort_status coh_linear_gather(cohort_group *g, const coh_call *c, const coh_view *v,
                                const void *send, void *recv_, size_t B, int root,
                                uint32_t step_base)
{
    int n = v->n, me = v->me;
    char *recv = recv_;
    if (me != root) {
        coh_xfer x;
        coh_xf_send(&x, g, c, coh_view_rank(v, root), step_base, send, B);
        return coh_xf_run(g, c, &x, 1);
    }
    if (recv + (size_t)me * B != (const char *)send)
        memmove(recv + (size_t)me * B, send, B);
    coh_xfer *ops = coh_coll_alloc(g, c, sizeof(coh_xfer) * (size_t)n, "gather batch");
    if (!ops)
        return COHORT_ERR_NOMEM;
    int nops = 0;
    for (int i = 0; i < n; i++)
        if (i != me)
            coh_xf_recv(&ops[nops++], g, c, coh_view_rank(v, i), step_base,
                        recv + (size_t)i * B, B);
    cohort_status st = coh_xf_run(g, c, ops, nops);
    coh_coll_free(ops, sizeof(coh_xfer) * (size_t)n);
    return st;
}

cohort_status coh_linear_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                                 const void *send_, void *recv, size_t B, int root,
                                 uint32_t step_base)
{
    int n = v->n, me = v->me;
    const char *send = send_;
    if (me != root) {
        coh_xfer x;
        coh_xf_recv(&x, g, c, coh_view_rank(v, root), step_base, recv, B);
        return coh_xf_run(g, c, &x, 1);
    }
    coh_xfer *ops = coh_coll_alloc(g, c, sizeof(coh_xfer) * (size_t)n, "scatter batch");
    if (!ops)
        return COHORT_ERR_NOMEM;
    int nops = 0;
    for (int i = 0; i < n; i++)
        if (i != me)
            coh_xf_send(&ops[nops++], g, c, coh_view_rank(v, i), step_base,
                        send + (size_t)i * B, B);
    cohort_status st = coh_xf_run(g, c, ops, nops);
    coh_coll_free(ops, sizeof(coh_xfer) * (size_t)n);
    /* after the sends: in place, recv may overlap blocks being sent */
    /* after the sends: in place (recv == send) recv's first block is
     * overwritten by the root's own */
    if (st == COHORT_OK && (const char *)recv != send + (size_t)me * B)
        memmove(recv, send + (size_t)me * B, B);
    return st;
}

/* Binomial gather: each member collects its subtree's blocks (a contiguous
 * range of relative ranks) and sends them to its parent in one message. */
cohort_status coh_tree_gather(cohort_group *g, const coh_call *c, const coh_view *v,
                              const void *send, void *recv, size_t B, int root,
                              uint32_t step_base)
{
    int n = v->n;
    int vr = coh_mod(v->me - root, n), par = coh_tree_parent(vr, n);
    int ch[32], nch = coh_tree_children(vr, n, ch);
    int sub = coh_tree_subtree(vr, n);
    char *tmp = coh_coll_alloc(g, c, (size_t)sub * B, "tree gather buffer");
    if (!tmp)
        return COHORT_ERR_NOMEM;
    if (B)
        memcpy(tmp, send, B);
    coh_xfer ops[32];
    for (int i = 0; i < nch; i++)
        coh_xf_recv(&ops[i], g, c, coh_view_rank(v, coh_mod(ch[i] + root, n)),
                    step_base + (uint32_t)coh_ilog2((unsigned)(ch[i] - vr)),
                    tmp + (size_t)(ch[i] - vr) * B, (size_t)coh_tree_subtree(ch[i], n) * B);
    cohort_status st = coh_xf_run(g, c, ops, nch);
    if (st == COHORT_OK && par >= 0) {
        coh_xf_send(&ops[0], g, c, coh_view_rank(v, coh_mod(par + root, n)),
                    step_base + (uint32_t)coh_ilog2((unsigned)(vr - par)), tmp, (size_t)sub * B);
        st = coh_xf_run(g, c, ops, 1);
    }
    if (st == COHORT_OK && par < 0) /* root: relative order back to ranks */
        for (int i = 0; i < n; i++)
            memcpy((char *)recv + (size_t)coh_mod(i + root, n) * B, tmp + (size_t)i * B, B);
    coh_coll_free(tmp, (size_t)sub * B);
    return st;
}

cohort_status coh_tree_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                               const void *send, void *recv, size_t B, int root,
                               uint32_t step_base)
{
    int n = v->n;
    int vr = coh_mod(v->me - root, n), par = coh_tree_parent(vr, n);
    int ch[32], nch = coh_tree_children(vr, n, ch);
    int sub = coh_tree_subtree(vr, n);
    char *tmp = coh_coll_alloc(g, c, (size_t)sub * B, "tree scatter buffer");
    if (!tmp)
        return COHORT_ERR_NOMEM;
    coh_xfer ops[32];
    cohort_status st = COHORT_OK;
    if (par < 0) {
        for (int i = 0; i < n; i++)
            memcpy(tmp + (size_t)i * B, (const char *)send + (size_t)coh_mod(i + root, n) * B, B);
    } else {
        coh_xf_recv(&ops[0], g, c, coh_view_rank(v, coh_mod(par + root, n)),
                    step_base + (uint32_t)coh_ilog2((unsigned)(vr - par)), tmp, (size_t)sub * B);
        st = coh_xf_run(g, c, ops, 1);
    }
    if (st == COHORT_OK) {
        for (int i = 0; i < nch; i++)
            coh_xf_send(&ops[i], g, c, coh_view_rank(v, coh_mod(ch[i] + root, n)),
                        step_base + (uint32_t)coh_ilog2((unsigned)(ch[i] - vr)),
                        tmp + (size_t)(ch[i] - vr) * B, (size_t)coh_tree_subtree(ch[i], n) * B);
        st = coh_xf_run(g, c, ops, nch);
    }
    if (st == COHORT_OK)
        memcpy(recv, tmp, B);
    coh_coll_free(tmp, (size_t)sub * B);
    return st;
}

/* Pairwise exchange: in step s member me sends its block for me+s and
 * receives the block from me-s, so every pair meets exactly once and no
 * member receives from two peers at a time. */
cohort_status coh_pairwise_all_to_all(cohort_group *g, const coh_call *c, const coh_view *v,
                                      const void *send_, void *recv_, size_t B,
                                      uint32_t step_base)
{
    int n = v->n, me = v->me;
    const char *send = send_;
    char *recv = recv_, *copy = NULL;
    /* In place the incoming block for me-s would overwrite the outgoing one
     * for that peer before step n-s sends it: work from a copy. */
    if (send < recv + (size_t)n * B && recv < send + (size_t)n * B) {
        copy = coh_coll_alloc(g, c, (size_t)n * B, "in-place all-to-all copy");
        if (!copy)
            return COHORT_ERR_NOMEM;
        memcpy(copy, send, (size_t)n * B);
        send = copy;
    }
    memcpy(recv + (size_t)me * B, send + (size_t)me * B, B);
    cohort_status st = COHORT_OK;
    for (int s = 1; s < n && st == COHORT_OK; s++) {
        int to = coh_mod(me + s, n), from = coh_mod(me - s, n);
        coh_xfer ops[2];
        coh_xf_send(&ops[0], g, c, coh_view_rank(v, to), step_base + (uint32_t)s,
                    send + (size_t)to * B, B);
        coh_xf_recv(&ops[1], g, c, coh_view_rank(v, from), step_base + (uint32_t)s,
                    recv + (size_t)from * B, B);
        st = coh_xf_run(g, c, ops, 2);
    }
    coh_coll_free(copy, (size_t)n * B);
    return st;
}

/* Point-to-point. Both sides must build identical headers although the
 * sender's call says SEND to its peer and the receiver's RECV from its
 * peer: the header is normalised to coll = SEND, root = the receiving rank
 * (tag = user tag, seq = the pair's seq, as built from the call). */
cohort_status coh_p2p(cohort_group *g, coh_call *c)
{
    size_t bytes = (size_t)c->count * cohort_dtype_size((cohort_dtype)c->dtype);
    int is_send = c->coll == COH_COLL_SEND;
    coh_xfer x;
    memset(&x, 0, sizeof x);
    x.peer = c->root;
    x.is_send = is_send;
    coh_hdr_from_call(&x.hdr, g, c, COH_MSG_P2P, 0, bytes);
    x.hdr.coll = COH_COLL_SEND;
    x.hdr.root = is_send ? c->root : g->rank;
    static char none;
    x.buf = bytes ? (is_send ? (void *)c->send : c->recv) : &none;
    x.len = bytes;
    /* A peer on this host: the pair's channel in the segment (one copy in,
     * one out, or a single copy), the same header compared the same way. */
    int q = g->shm ? coh_shm_p2p_peer(g->shm, c->root) : -1;
    if (q >= 0)
        return is_send ? coh_shm_send(g->shm, c, q, &x.hdr, x.buf, bytes)
                       : coh_shm_recv(g->shm, c, q, &x.hdr, x.buf, bytes);
    return coh_xf_run(g, c, &x, 1);
}
