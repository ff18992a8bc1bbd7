/*
 * tree.c - binomial-tree broadcast and reduce over a view, pipelined in
 * pieces of coh_coll_chunk(g).
 *
 * Ranks are taken relative to the root (vr = me - root mod n). The tree is
 * the usual binomial one: vr's parent is vr minus its lowest set bit, its
 * children vr + 2^k below that bit (coh_tree_*). The link to child vr + 2^k
 * is level k and its messages carry step base + k*P + piece, P being the
 * number of pieces.
 *
 * Pipelining: an inner member forwards piece j-1 to its children in the
 * same batch in which it receives piece j, so a large message flows down
 * (or up) the tree in depth + P batches instead of depth * P.
 */
#include <string.h>

#include "coll/coll_int.h"

static uint32_t lvl_step(uint32_t base, int lvl, size_t P, size_t j)
{
    return base + (uint32_t)((size_t)lvl * P + j);
}

/* Piece j of a message cut as a first piece of f0 bytes and then pieces of
 * cb (f0 == cb: the usual even cut; coh_tree_bcast_plan). */
static size_t pc_off(size_t f0, size_t cb, size_t j) { return j ? f0 + (j - 1) * cb : 0; }
static size_t pc_len(size_t bytes, size_t f0, size_t cb, size_t j)
{
    size_t o = pc_off(f0, cb, j);
    return COH_MIN(j ? cb : f0, bytes - o);
}

static cohort_status tree_bcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf_,
                                size_t bytes, int root, uint32_t step_base, int rdv, size_t pieces)
{
    int n = v->n;
    if (n == 1 || bytes == 0)
        return COHORT_OK;
    char *buf = buf_;
    int vr = coh_mod(v->me - root, n), par = coh_tree_parent(vr, n);
    int ch[32], nch = coh_tree_children(vr, n, ch);
    /* 2 members: one piece, or an eager piece and the rest gated
     * (coh_tree_bcast_plan); otherwise even pieces */
    coh_bc_plan pl = coh_tree_bcast_plan(coh_coll_chunk(g), coh_coll_chunk_set(g), n, rdv, bytes);
    size_t f0 = pl.first, cb = pl.piece, P = coh_bc_plan_pieces(&pl, bytes);
    rdv = pl.rdv;
    if (pieces) { /* tree_coarse: `pieces` even pieces, whatever COHORT_CHUNK_BYTES */
        f0 = cb = (bytes + pieces - 1) / pieces;
        P = coh_npieces(bytes, cb);
        rdv = 0;
    }
    int mylvl = par >= 0 ? coh_ilog2((unsigned)(vr - par)) : 0;
    int parent = par >= 0 ? coh_view_rank(v, coh_mod(par + root, n)) : -1;
    /* the root sends piece j in batch j; others receive piece j in batch j
     * and forward piece j-1 */
    size_t batches = par >= 0 ? P + (nch ? 1 : 0) : P;
    coh_xfer ops[65];
    for (size_t j = 0; j < batches; j++) {
        int nops = 0;
        if (par >= 0 && j < P) {
            coh_xf_recv(&ops[nops++], g, c, parent, lvl_step(step_base, mylvl, P, j),
                        buf + pc_off(f0, cb, j), pc_len(bytes, f0, cb, j));
            /* rdv: "this call is posted", back up the link piece 0 uses
             * (other direction of the stream, same step) */
            if (rdv && j == 0 && P > 1)
                coh_xf_send(&ops[nops++], g, c, parent, lvl_step(step_base, mylvl, P, 0), NULL, 0);
        }
        size_t fj = par >= 0 ? j - 1 : j; /* piece to forward */
        if ((par < 0 || j >= 1) && fj < P)
            for (int i = 0; i < nch; i++) {
                int lvl = coh_ilog2((unsigned)(ch[i] - vr));
                int to = coh_view_rank(v, coh_mod(ch[i] + root, n));
                coh_xf_send(&ops[nops++], g, c, to, lvl_step(step_base, lvl, P, fj),
                            buf + pc_off(f0, cb, fj), pc_len(bytes, f0, cb, fj));
                /* rdv: piece 0 goes out eagerly; piece 1 waits until the
                 * child has entered this call */
                if (rdv && fj == 0 && P > 1)
                    coh_xf_recv(&ops[nops++], g, c, to, lvl_step(step_base, lvl, P, 0), NULL, 0);
            }
        cohort_status st = coh_xf_run(g, c, ops, nops);
        if (st != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

cohort_status coh_tree_broadcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                 size_t bytes, int root, uint32_t step_base)
{
    return tree_bcast(g, c, v, buf, bytes, root, step_base, 0, 0);
}

/* The same tree in `pieces` pieces of ceil(bytes / pieces), whatever
 * COHORT_CHUNK_BYTES says (1 piece: Gloo's broadcast, a binomial tree of
 * whole messages). */
cohort_status coh_tree_broadcast_pieces(cohort_group *g, const coh_call *c, const coh_view *v,
                                        void *buf, size_t bytes, int root, uint32_t step_base,
                                        size_t pieces)
{
    if (pieces < 1)
        pieces = 1;
    return tree_bcast(g, c, v, buf, bytes, root, step_base, 0, pieces);
}

/* Rendezvous: each child tells its parent, with an empty message, that it
 * has entered the call; the parent sends piece 0 at once but piece 1 only
 * after that. Without it a root of back-to-back broadcasts runs as far
 * ahead as the socket buffers allow (4 MiB of Send-Q and Recv-Q seen on
 * loopback at 1 MiB), and the child reads every byte cold; with it a
 * sender is at most one piece into a call its child has not entered, as
 * Open MPI's ob1 (64 KiB eager, the rest after the receiver's ACK). */
cohort_status coh_tree_broadcast_rdv(cohort_group *g, const coh_call *c, const coh_view *v,
                                     void *buf, size_t bytes, int root, uint32_t step_base)
{
    return tree_bcast(g, c, v, buf, bytes, root, step_base, 1, 0);
}

cohort_status coh_tree_reduce(cohort_group *g, const coh_call *c, const coh_view *v, void *acc_,
                              size_t count, int root, uint32_t step_base, int avg_div)
{
    int n = v->n;
    if (n == 1 || count == 0) /* one member: no AVG to divide (coh_avg_div) */
        return COHORT_OK;
    char *acc = acc_;
    size_t es = cohort_dtype_size((cohort_dtype)c->dtype);
    int vr = coh_mod(v->me - root, n), par = coh_tree_parent(vr, n);
    int ch[32], nch = coh_tree_children(vr, n, ch);
    size_t ce = coh_chunk_elems(coh_coll_chunk(g), es, count, 32);
    size_t P = coh_npieces(count, ce), pe = COH_MIN(ce, count);
    int mylvl = par >= 0 ? coh_ilog2((unsigned)(vr - par)) : 0;
    int parent = par >= 0 ? coh_view_rank(v, coh_mod(par + root, n)) : -1;
    char *tmp = NULL;
    size_t tmp_bytes = (size_t)nch * pe * es;
    if (nch) {
        tmp = coh_coll_alloc(g, c, tmp_bytes, "tree reduce pieces");
        if (!tmp)
            return COHORT_ERR_NOMEM;
    }
    coh_reduce_fn red = coh_reduce_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop);
    /* batch j: receive piece j from every child, send piece j-1 (reduced in
     * the previous iteration) to the parent */
    size_t batches = par >= 0 ? P + 1 : P;
    coh_xfer ops[33];
    cohort_status st = COHORT_OK;
    for (size_t j = 0; j < batches && st == COHORT_OK; j++) {
        int nops = 0;
        size_t m = j < P ? COH_MIN(ce, count - j * ce) : 0;
        if (j < P)
            for (int i = 0; i < nch; i++) {
                int lvl = coh_ilog2((unsigned)(ch[i] - vr));
                coh_xf_recv(&ops[nops++], g, c, coh_view_rank(v, coh_mod(ch[i] + root, n)),
                            lvl_step(step_base, lvl, P, j), tmp + (size_t)i * pe * es, m * es);
            }
        if (par >= 0 && j >= 1) {
            size_t o = (j - 1) * ce;
            coh_xf_send(&ops[nops++], g, c, parent, lvl_step(step_base, mylvl, P, j - 1),
                        acc + o * es, COH_MIN(ce, count - o) * es);
        }
        st = coh_xf_run(g, c, ops, nops);
        /* children in a fixed order: the result does not depend on timing */
        if (st == COHORT_OK && m) {
            for (int i = 0; i < nch; i++)
                red(acc + j * ce * es, tmp + (size_t)i * pe * es, m);
            /* the root's piece j is the group's sum now, and in cache */
            if (par < 0)
                coh_reduce_finish(acc + j * ce * es, m, (cohort_dtype)c->dtype,
                                  (cohort_op)c->redop, avg_div);
        }
    }
    coh_coll_free(tmp, tmp_bytes);
    return st;
}

/* Flat broadcast: the root sends the whole message to every other member
 * in one batch, and the transport's poll loop feeds all n-1 sockets at
 * once; a member only receives. No member relays, so when ranks outnumber
 * cores no piece waits for a relay to be scheduled (the tree's cost there).
 * The root writes n-1 copies: worth it only while its link is not the
 * limit (one host: coh_bc_flat_pref). */
cohort_status coh_flat_broadcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                 size_t bytes, int root, uint32_t step_base)
{
    int n = v->n;
    if (n == 1 || bytes == 0)
        return COHORT_OK;
    if (v->me != root) {
        coh_xfer op;
        coh_xf_recv(&op, g, c, coh_view_rank(v, root), step_base, buf, bytes);
        return coh_xf_run(g, c, &op, 1);
    }
    coh_xfer one, *ops = &one;
    size_t ops_bytes = sizeof(coh_xfer) * (size_t)(n - 1);
    if (n > 2) {
        ops = coh_coll_alloc(g, c, ops_bytes, "flat broadcast batch");
        if (!ops)
            return COHORT_ERR_NOMEM;
    }
    int nops = 0;
    /* from root + 1 round: the members in order, as the tree's first sends */
    for (int k = 1; k < n; k++)
        coh_xf_send(&ops[nops++], g, c, coh_view_rank(v, coh_mod(root + k, n)), step_base, buf,
                    bytes);
    cohort_status st = coh_xf_run(g, c, ops, nops);
    if (ops != &one)
        coh_coll_free(ops, ops_bytes);
    return st;
}

/* Flat across hosts: the root sends to every other rank of its host and
 * to one relay per other host (its lowest rank), which passes the message
 * on to the other ranks of its host. Every byte crosses into each other
 * host once, the least any broadcast can do, and no rank is more than one
 * relay from the root: a relay that waits to be scheduled delays only its
 * own host. The root's link carries (hosts - 1) copies, so it is meant for
 * a few hosts. Pieces of COHORT_CHUNK_BYTES: the root posts every piece to
 * every target in one batch and the ranks that only receive post all their
 * receives at once (the sockets pipeline them); a relay receives piece j
 * while it forwards piece j-1. Each rank receives from one source only, so
 * piece j carries step base + j. Whole group: ranks are group ranks. */
cohort_status coh_hostflat_broadcast(cohort_group *g, const coh_call *c, void *buf_, size_t bytes,
                                     int root, uint32_t step_base)
{
    int n = g->size, me = g->rank;
    if (n == 1 || bytes == 0)
        return COHORT_OK;
    char *buf = buf_;
    int rhost = g->peers[root].host, myhost = g->peers[me].host;
    int relay = myhost != rhost && g->leaders[myhost] == me;
    size_t cb = coh_chunk_elems(coh_coll_chunk(g), 1, bytes, 1);
    /* the root's batch holds every piece: at most 4096 of them */
    if (coh_npieces(bytes, cb) > 4096)
        cb = (bytes + 4095) / 4096;
    size_t P = coh_npieces(bytes, cb);
    /* targets: the root's are its host's other ranks and the other hosts'
     * relays; a relay's are its host's other ranks; the rest have none */
    int nt = 0;
    for (int r = 0; r < n; r++) {
        int h = g->peers[r].host;
        if (me == root ? r != root && (h == rhost || g->leaders[h] == r)
                       : relay && r != me && h == myhost)
            nt++;
    }
    int src = me == root ? -1 : myhost == rhost || relay ? root : g->leaders[myhost];
    /* ops: the root's or a receiver's whole batch; a relay's one piece */
    size_t nops_max = me == root ? (size_t)nt * P : relay ? (size_t)nt + 1 : P;
    size_t ops_bytes = nops_max * sizeof(coh_xfer);
    coh_xfer *ops = coh_coll_alloc(g, c, ops_bytes, "host-flat broadcast batch");
    if (!ops)
        return COHORT_ERR_NOMEM;
    cohort_status st = COHORT_OK;
    if (!relay) {
        int k = 0;
        if (me == root) {
            for (size_t j = 0; j < P; j++)
                for (int r = 0; r < n; r++) {
                    int h = g->peers[r].host;
                    if (r != root && (h == rhost || g->leaders[h] == r))
                        coh_xf_send(&ops[k++], g, c, r, step_base + (uint32_t)j, buf + j * cb,
                                    COH_MIN(cb, bytes - j * cb));
                }
        } else {
            for (size_t j = 0; j < P; j++)
                coh_xf_recv(&ops[k++], g, c, src, step_base + (uint32_t)j, buf + j * cb,
                            COH_MIN(cb, bytes - j * cb));
        }
        st = coh_xf_run(g, c, ops, k);
    } else {
        for (size_t j = 0; j <= P && st == COHORT_OK; j++) {
            int k = 0;
            if (j < P)
                coh_xf_recv(&ops[k++], g, c, src, step_base + (uint32_t)j, buf + j * cb,
                            COH_MIN(cb, bytes - j * cb));
            if (j >= 1)
                for (int r = 0; r < n; r++)
                    if (r != me && g->peers[r].host == myhost)
                        coh_xf_send(&ops[k++], g, c, r, step_base + (uint32_t)(j - 1),
                                    buf + (j - 1) * cb, COH_MIN(cb, bytes - (j - 1) * cb));
            st = coh_xf_run(g, c, ops, k);
        }
    }
    coh_coll_free(ops, ops_bytes);
    return st;
}

/* Scatter + all-gather broadcast (van de Geijn): the message is cut into n
 * blocks in relative-rank order, so block i sits at the same offset on
 * every member; a binomial scatter hands each subtree its contiguous range
 * straight into place, then a ring all-gather over the view rotated to the
 * root completes every member's copy. The root sends ~m bytes instead of
 * the tree's log2(n) * m. */
cohort_status coh_sag_broadcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf_,
                                size_t bytes, int root, uint32_t step_base)
{
    int n = v->n;
    if (n == 1 || bytes == 0)
        return COHORT_OK;
    char *buf = buf_;
    int vr = coh_mod(v->me - root, n), par = coh_tree_parent(vr, n);
    int ch[32], nch = coh_tree_children(vr, n, ch);
    int sub = coh_tree_subtree(vr, n);
    coh_xfer ops[32];
    cohort_status st = COHORT_OK;
    if (par >= 0) {
        size_t lo = coh_blk_off(bytes, n, vr), hi = coh_blk_off(bytes, n, vr + sub);
        int nops = 0;
        if (hi > lo)
            coh_xf_recv(&ops[nops++], g, c, coh_view_rank(v, coh_mod(par + root, n)),
                        step_base + (uint32_t)coh_ilog2((unsigned)(vr - par)), buf + lo, hi - lo);
        st = coh_xf_run(g, c, ops, nops);
    }
    if (st == COHORT_OK) {
        int nops = 0;
        for (int i = 0; i < nch; i++) {
            size_t lo = coh_blk_off(bytes, n, ch[i]);
            size_t hi = coh_blk_off(bytes, n, ch[i] + coh_tree_subtree(ch[i], n));
            if (hi > lo)
                coh_xf_send(&ops[nops++], g, c, coh_view_rank(v, coh_mod(ch[i] + root, n)),
                            step_base + (uint32_t)coh_ilog2((unsigned)(ch[i] - vr)), buf + lo,
                            hi - lo);
        }
        st = coh_xf_run(g, c, ops, nops);
    }
    if (st != COHORT_OK)
        return st;
    /* member i of the rotated view is relative rank i and owns block i */
    int *rot = coh_coll_alloc(g, c, sizeof(int) * (size_t)n, "broadcast ring view");
    if (!rot)
        return COHORT_ERR_NOMEM;
    for (int i = 0; i < n; i++)
        rot[i] = coh_view_rank(v, coh_mod(i + root, n));
    coh_view rv = {n, vr, rot};
    st = coh_ring_all_gather(g, c, &rv, buf, bytes, NULL, NULL, step_base + 32);
    coh_coll_free(rot, sizeof(int) * (size_t)n);
    return st;
}
