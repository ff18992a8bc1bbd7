/*
 * ring.c - ring reduce-scatter, all-gather and all-reduce over a view, and
 * the direct reduce-scatter (+ ring all-gather) that folds float16/bfloat16
 * once in float32, in the shared-memory transport's order.
 *
 * Ring all-reduce is the bandwidth-optimal composition of the two: each
 * member sends and receives 2(n-1)/n of the vector. Reduce-scatter steps are
 * cut into pieces of coh_coll_chunk(g) and pipelined (ring_rs).
 *
 * Blocks are either the even split of `count` (coh_blk_*) or explicit
 * offset/length arrays (the hierarchical algorithms' per-host blocks).
 */
#include <string.h>

#include "coll/coll_int.h"

typedef struct blocks {
    const size_t *off, *len; /* NULL: even split of count over n */
    size_t count;
    int n;
} blocks;

static size_t b_off(const blocks *b, int i)
{
    return b->off ? b->off[i] : coh_blk_off(b->count, b->n, i);
}
static size_t b_len(const blocks *b, int i)
{
    return b->len ? b->len[i] : coh_blk_len(b->count, b->n, i);
}
static size_t b_max(const blocks *b)
{
    if (!b->len)
        return coh_blk_len(b->count, b->n, 0);
    size_t m = 0;
    for (int i = 0; i < b->n; i++)
        m = b->len[i] > m ? b->len[i] : m;
    return m;
}

/* Position in the reduce-scatter stream: step s, piece t. */
typedef struct rs_cur {
    int s;
    size_t t;
} rs_cur;

/* Pieces a send may run ahead of the receives. One ahead lets the reduction
 * of piece j overlap the sending of piece j+1, but the piece then usually
 * arrives before its receive is posted and takes an extra copy through the
 * transport's unexpected-message stash: on the 2-core reference VM that
 * cost more than the overlap gained (64 MiB, 2 ranks: 280 ms at 0 vs
 * 310-380 ms at 1), so pieces go in lockstep. */
#define RS_AHEAD 0

/* Pieces of the block sent (dir 0) or received (dir 1) in step s. */
static size_t rs_pieces(const blocks *bl, int n, int me, int k, int s, int dir, size_t ce)
{
    return coh_npieces(b_len(bl, coh_mod(me + k - s - dir, n)), ce);
}

/* Moves c past empty steps / finished steps; c->s == n-1 at the end. */
static void rs_norm(rs_cur *c, const blocks *bl, int n, int me, int k, int dir, size_t ce)
{
    while (c->s < n - 1 && c->t >= rs_pieces(bl, n, me, k, c->s, dir, ce)) {
        c->s++;
        c->t = 0;
    }
}

/* Reduce-scatter in place. Member me starts by sending block me+k; after
 * n-1 steps it holds block me+k+1 fully reduced. Returns the number of step
 * numbers used in *used.
 *
 * The pieces form one stream per direction: piece t of step s goes right
 * as soon as piece t of step s-1 has come in from the left and been
 * reduced, without waiting for the rest of its block, so the steps overlap
 * and a neighbour's next piece streams into the socket buffer while this
 * rank reduces. Sends may run RS_AHEAD pieces ahead of the receives (one
 * stream per peer keeps them in order; an early piece waits in the
 * transport). */
/* avg_div > 1: an AVG over the whole group; each block's last fold (its
 * sum whole) divides its piece while it is in cache - coh_reduce_finish on
 * the same values, so the bits the pass after the call would give. */
static cohort_status ring_rs(cohort_group *g, const coh_call *c, const coh_view *v, char *buf,
                             const char *src, const blocks *bl, int k, uint32_t base,
                             int avg_div, uint32_t *used)
{
    int n = v->n, me = v->me;
    *used = 0;
    if (n == 1)
        return COHORT_OK;
    size_t es = cohort_dtype_size((cohort_dtype)c->dtype);
    size_t maxlen = b_max(bl);
    size_t ce = coh_chunk_elems(coh_coll_chunk(g), es, maxlen, 2 * n);
    size_t P = coh_npieces(maxlen, ce);
    coh_reduce_fn red = coh_reduce_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop);
    coh_reduce3_fn red3 = coh_reduce3_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop);
    int right = coh_view_rank(v, coh_mod(me + 1, n)), left = coh_view_rank(v, coh_mod(me - 1, n));
    size_t tmp_bytes = COH_MIN(ce, maxlen) * es;
    char *tmp = P ? coh_coll_alloc(g, c, tmp_bytes, "ring reduce-scatter piece") : NULL;
    if (P && !tmp)
        return COHORT_ERR_NOMEM;
    rs_cur sc = {0, 0}, rc = {0, 0}; /* next piece to send / to receive */
    rs_norm(&sc, bl, n, me, k, 0, ce);
    rs_norm(&rc, bl, n, me, k, 1, ce);
    size_t sent = 0, received = 0;
    cohort_status st = COHORT_OK;
    while (st == COHORT_OK && (sc.s < n - 1 || rc.s < n - 1)) {
        coh_xfer ops[RS_AHEAD + 3];
        int nops = 0;
        size_t rn = 0;
        if (rc.s < n - 1) {
            size_t len = b_len(bl, coh_mod(me + k - rc.s - 1, n));
            rn = COH_MIN(ce, len - rc.t * ce);
            coh_xf_recv(&ops[nops++], g, c, left, base + (uint32_t)((size_t)rc.s * P + rc.t), tmp,
                        rn * es);
        }
        /* sends whose data is final: step 0 is this rank's own input; step
         * s > 0 needs piece t of step s-1 received and reduced, i.e. strictly
         * before the receive cursor */
        while (sc.s < n - 1 && (rc.s == n - 1 || sent <= received + RS_AHEAD) &&
               (sc.s == 0 || rc.s > sc.s - 1 || (rc.s == sc.s - 1 && rc.t > sc.t))) {
            int sb = coh_mod(me + k - sc.s, n);
            size_t o = sc.t * ce, m = COH_MIN(ce, b_len(bl, sb) - o);
            /* step 0 sends this rank's own input, later steps partial sums */
            const char *from = sc.s == 0 ? src : buf;
            coh_xf_send(&ops[nops++], g, c, right, base + (uint32_t)((size_t)sc.s * P + sc.t),
                        from + (b_off(bl, sb) + o) * es, m * es);
            sent++;
            sc.t++;
            rs_norm(&sc, bl, n, me, k, 0, ce);
            if (nops == (int)COH_ARRAY_LEN(ops))
                break;
        }
        st = coh_xf_run(g, c, ops, nops);
        if (st != COHORT_OK || !rn)
            continue;
        /* each block arrives once: combine it with this rank's input */
        size_t at = (b_off(bl, coh_mod(me + k - rc.s - 1, n)) + rc.t * ce) * es;
        if (src == buf)
            red(buf + at, tmp, rn);
        else
            red3(buf + at, src + at, tmp, rn);
        if (avg_div > 1 && rc.s == n - 2)
            coh_reduce_finish(buf + at, rn, (cohort_dtype)c->dtype, COHORT_AVG, avg_div);
        received++;
        rc.t++;
        rs_norm(&rc, bl, n, me, k, 1, ce);
    }
    coh_coll_free(tmp, tmp_bytes);
    *used = (uint32_t)((size_t)(n - 1) * P);
    return st;
}

/* All-gather in place, whole blocks per step (no reduction to overlap).
 * Member me starts owning block me+k. Offsets/lengths in bytes (scale es). */
static cohort_status ring_ag(cohort_group *g, const coh_call *c, const coh_view *v, char *buf,
                             const blocks *bl, size_t scale, int k, uint32_t base)
{
    int n = v->n, me = v->me;
    int right = coh_view_rank(v, coh_mod(me + 1, n)), left = coh_view_rank(v, coh_mod(me - 1, n));
    for (int s = 0; s < n - 1; s++) {
        int sb = coh_mod(me + k - s, n), rb = coh_mod(me + k - s - 1, n);
        size_t slen = b_len(bl, sb) * scale, rlen = b_len(bl, rb) * scale;
        coh_xfer ops[2];
        int nops = 0;
        if (slen)
            coh_xf_send(&ops[nops++], g, c, right, base + (uint32_t)s,
                        buf + b_off(bl, sb) * scale, slen);
        if (rlen)
            coh_xf_recv(&ops[nops++], g, c, left, base + (uint32_t)s, buf + b_off(bl, rb) * scale,
                        rlen);
        cohort_status st = coh_xf_run(g, c, ops, nops);
        if (st != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

/* Direct reduce-scatter: member me receives piece t of block me straight
 * from every other member and folds the n contributions once, with
 * coh_reduce_multi in member order - the shared-memory fold's order (local
 * index = group rank on one host), so for float16/bfloat16 both transports
 * give the same bits, each element accumulated in float32 and rounded once.
 * The ring instead rounds to 16 bits at each of its n-1 hops. Same volume
 * as the ring's reduce-scatter: (n-1)/n of the vector out and in per
 * member, as n-1 concurrent messages per piece instead of a pipeline.
 * Step of the piece t that member j sends: base + t*n + j, so every
 * message a member receives has its own step. Member me ends with block me
 * in buf; src may be buf (only block me is written, and a member sends
 * only the other members' blocks, never its own). */
static cohort_status direct_rs(cohort_group *g, const coh_call *c, const coh_view *v, char *buf,
                               const char *src, const blocks *bl, uint32_t base, uint32_t *used)
{
    int n = v->n, me = v->me;
    *used = 0;
    if (n == 1)
        return COHORT_OK;
    size_t es = cohort_dtype_size((cohort_dtype)c->dtype);
    size_t maxlen = b_max(bl);
    size_t ce = coh_chunk_elems(coh_coll_chunk(g), es, maxlen, 2 * n);
    size_t P = coh_npieces(maxlen, ce);
    size_t mylen = b_len(bl, me), myoff = b_off(bl, me);
    /* over the whole group an AVG is divided in the fold, as the shm
     * transport does (the algorithm is marked avg_in_fold) */
    int avg_div = coh_avg_folds(c->dtype, c->redop) && n == g->size ? n : 0;
    size_t slot = COH_MIN(ce, maxlen) * es;
    size_t tmp_bytes = (size_t)(n - 1) * slot;
    char *tmp = NULL;
    coh_xfer *ops = NULL;
    const void **srcs = NULL;
    cohort_status st = COHORT_OK;
    if (P) {
        tmp = mylen ? coh_coll_alloc(g, c, tmp_bytes, "direct reduce-scatter pieces") : NULL;
        ops = coh_coll_alloc(g, c, 2 * (size_t)n * sizeof *ops, "direct reduce-scatter ops");
        srcs = coh_coll_alloc(g, c, (size_t)n * sizeof *srcs, "direct reduce-scatter sources");
        if ((mylen && !tmp) || !ops || !srcs) {
            st = COHORT_ERR_NOMEM;
            goto out;
        }
    }
    for (size_t t = 0; t < P && st == COHORT_OK; t++) {
        int nops = 0;
        size_t rn = mylen > t * ce ? COH_MIN(ce, mylen - t * ce) : 0;
        for (int j = 0; j < n; j++) {
            if (j == me)
                continue;
            int peer = coh_view_rank(v, j);
            int k = j < me ? j : j - 1; /* tmp slot of member j */
            if (rn)
                coh_xf_recv(&ops[nops++], g, c, peer, base + (uint32_t)(t * (size_t)n + (size_t)j),
                            tmp + (size_t)k * slot, rn * es);
            size_t jl = b_len(bl, j);
            if (jl > t * ce)
                coh_xf_send(&ops[nops++], g, c, peer,
                            base + (uint32_t)(t * (size_t)n + (size_t)me),
                            src + (b_off(bl, j) + t * ce) * es, COH_MIN(ce, jl - t * ce) * es);
        }
        st = coh_xf_run(g, c, ops, nops);
        if (st != COHORT_OK || !rn)
            continue;
        size_t at = (myoff + t * ce) * es;
        for (int j = 0; j < n; j++)
            srcs[j] = j == me ? (const void *)(src + at)
                              : (const void *)(tmp + (size_t)(j < me ? j : j - 1) * slot);
        coh_reduce_multi_div(buf + at, srcs, n, rn, (cohort_dtype)c->dtype, (cohort_op)c->redop,
                             avg_div);
    }
out:
    if (tmp)
        coh_coll_free(tmp, tmp_bytes);
    if (ops)
        coh_coll_free(ops, 2 * (size_t)n * sizeof *ops);
    if (srcs)
        coh_coll_free(srcs, (size_t)n * sizeof *srcs);
    *used = (uint32_t)(P * (size_t)n);
    return st;
}

cohort_status coh_direct_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                    const void *src, void *buf, size_t count, uint32_t step_base)
{
    blocks bl = {NULL, NULL, count, v->n};
    uint32_t used;
    cohort_status st = direct_rs(g, c, v, buf, src, &bl, step_base, &used);
    if (st != COHORT_OK)
        return st;
    /* member me owns block me */
    return ring_ag(g, c, v, buf, &bl, cohort_dtype_size((cohort_dtype)c->dtype), 0,
                   step_base + used);
}

/* Reduce to member root: the direct reduce-scatter, then every member sends
 * its folded block to root (step base + used + sender). buf: count
 * elements; the result on root, scratch elsewhere. */
cohort_status coh_direct_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                const void *src, void *buf, size_t count, int root,
                                uint32_t step_base)
{
    blocks bl = {NULL, NULL, count, v->n};
    uint32_t used;
    cohort_status st = direct_rs(g, c, v, buf, src, &bl, step_base, &used);
    if (st != COHORT_OK)
        return st;
    size_t es = cohort_dtype_size((cohort_dtype)c->dtype);
    int n = v->n, me = v->me;
    char *b = buf;
    if (me != root) {
        if (!b_len(&bl, me))
            return COHORT_OK;
        coh_xfer op;
        coh_xf_send(&op, g, c, coh_view_rank(v, root), step_base + used + (uint32_t)me,
                    b + b_off(&bl, me) * es, b_len(&bl, me) * es);
        return coh_xf_run(g, c, &op, 1);
    }
    coh_xfer *ops = coh_coll_alloc(g, c, (size_t)n * sizeof *ops, "direct reduce ops");
    if (!ops)
        return COHORT_ERR_NOMEM;
    int nops = 0;
    for (int j = 0; j < n; j++)
        if (j != me && b_len(&bl, j))
            coh_xf_recv(&ops[nops++], g, c, coh_view_rank(v, j), step_base + used + (uint32_t)j,
                        b + b_off(&bl, j) * es, b_len(&bl, j) * es);
    st = coh_xf_run(g, c, ops, nops);
    coh_coll_free(ops, (size_t)n * sizeof *ops);
    return st;
}

cohort_status coh_direct_reduce_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                                        const void *src, void *buf, size_t count,
                                        const size_t *boff, const size_t *blen,
                                        uint32_t step_base)
{
    blocks bl = {boff, blen, count, v->n};
    uint32_t used;
    return direct_rs(g, c, v, buf, src, &bl, step_base, &used);
}

cohort_status coh_ring_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                  const void *src, void *buf, size_t count, uint32_t step_base,
                                  int avg_div)
{
    blocks bl = {NULL, NULL, count, v->n};
    uint32_t used;
    cohort_status st = ring_rs(g, c, v, buf, src, &bl, 0, step_base, avg_div, &used);
    if (st != COHORT_OK)
        return st;
    /* after the reduce-scatter member me owns block me+1 */
    return ring_ag(g, c, v, buf, &bl, cohort_dtype_size((cohort_dtype)c->dtype), 1,
                   step_base + used);
}

cohort_status coh_ring_reduce_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                                      const void *src, void *buf, size_t count,
                                      const size_t *boff, const size_t *blen, uint32_t step_base,
                                      int avg_div)
{
    blocks bl = {boff, blen, count, v->n};
    uint32_t used;
    /* start one block early so that member me ends with block me */
    return ring_rs(g, c, v, buf, src, &bl, -1, step_base, avg_div, &used);
}

cohort_status coh_ring_all_gather(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                  size_t total, const size_t *boff, const size_t *blen,
                                  uint32_t step_base)
{
    /* without arrays: the even split of total bytes over n */
    blocks bl = {boff, blen, total, v->n};
    return ring_ag(g, c, v, buf, &bl, 1, 0, step_base);
}
