/*
 * rd.c - logarithmic algorithms over a view: recursive doubling
 * all-reduce, recursive halving/doubling (Rabenseifner) all-reduce, Bruck
 * all-gather and the dissemination barrier.
 *
 * Non-powers of two (recursive doubling and halving): with p the largest
 * power of two <= n and extra = n - p, each even member below 2*extra first
 * hands its vector to the odd member above it (step base+0), the p
 * remaining members run the power-of-two algorithm under virtual ranks
 * (coh_fold_vrank), and the odd members hand the result back at the end.
 * Every combine is a commutative kernel, so the members of a pair compute
 * bitwise-identical results and every member ends with the same bits.
 * avg_div > 1 (an AVG over the whole group: its size) divides the sum where
 * it becomes whole - after the last doubling round, or each piece of a
 * member's block after the last halving round - with coh_reduce_finish, the
 * bits of the pass coh_coll_run would make after the call; 0: AVG summed.
 */
#include <string.h>

#include "coll/coll_int.h"

/* Pre-fold: even members below 2*extra send, odd ones receive and reduce. */
static cohort_status fold_in(cohort_group *g, const coh_call *c, const coh_view *v, char *buf,
                             char *tmp, size_t count, uint32_t step)
{
    int n = v->n, me = v->me, extra = n - coh_pof2(n);
    if (me >= 2 * extra)
        return COHORT_OK;
    size_t bytes = count * cohort_dtype_size((cohort_dtype)c->dtype);
    coh_xfer x;
    if (!(me & 1)) {
        coh_xf_send(&x, g, c, coh_view_rank(v, me + 1), step, buf, bytes);
        return coh_xf_run(g, c, &x, 1);
    }
    coh_xf_recv(&x, g, c, coh_view_rank(v, me - 1), step, tmp, bytes);
    cohort_status st = coh_xf_run(g, c, &x, 1);
    if (st == COHORT_OK)
        coh_reduce_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop)(buf, tmp, count);
    return st;
}

/* Post-fold: odd members below 2*extra return the result to the even one. */
static cohort_status fold_out(cohort_group *g, const coh_call *c, const coh_view *v, char *buf,
                              size_t count, uint32_t step)
{
    int n = v->n, me = v->me, extra = n - coh_pof2(n);
    if (me >= 2 * extra)
        return COHORT_OK;
    size_t bytes = count * cohort_dtype_size((cohort_dtype)c->dtype);
    coh_xfer x;
    if (me & 1)
        coh_xf_send(&x, g, c, coh_view_rank(v, me - 1), step, buf, bytes);
    else
        coh_xf_recv(&x, g, c, coh_view_rank(v, me + 1), step, buf, bytes);
    return coh_xf_run(g, c, &x, 1);
}

cohort_status coh_rd_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                size_t count, uint32_t step_base, int avg_div)
{
    int n = v->n;
    if (n == 1 || count == 0)
        return COHORT_OK;
    size_t es = cohort_dtype_size((cohort_dtype)c->dtype);
    char *tmp = coh_coll_alloc(g, c, count * es, "recursive doubling buffer");
    if (!tmp)
        return COHORT_ERR_NOMEM;
    int p = coh_pof2(n), L = coh_ilog2((unsigned)p), vr = coh_fold_vrank(v->me, n);
    coh_reduce_fn red = coh_reduce_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop);
    cohort_status st = fold_in(g, c, v, buf, tmp, count, step_base);
    for (int k = 0; k < L && st == COHORT_OK && vr >= 0; k++) {
        int peer = coh_view_rank(v, coh_fold_real(vr ^ (1 << k), n));
        coh_xfer ops[2];
        coh_xf_send(&ops[0], g, c, peer, step_base + 1 + (uint32_t)k, buf, count * es);
        coh_xf_recv(&ops[1], g, c, peer, step_base + 1 + (uint32_t)k, tmp, count * es);
        st = coh_xf_run(g, c, ops, 2);
        if (st == COHORT_OK)
            red(buf, tmp, count);
        if (st == COHORT_OK && avg_div > 1 && k == L - 1) /* the sum is whole, in cache */
            coh_reduce_finish(buf, count, (cohort_dtype)c->dtype, COHORT_AVG, avg_div);
    }
    if (st == COHORT_OK)
        st = fold_out(g, c, v, buf, count, step_base + 1 + (uint32_t)L);
    coh_coll_free(tmp, count * es);
    return st;
}

cohort_status coh_rab_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v, void *buf_,
                                 size_t count, uint32_t step_base, int avg_div)
{
    int n = v->n;
    if (n == 1 || count == 0)
        return COHORT_OK;
    char *buf = buf_;
    size_t es = cohort_dtype_size((cohort_dtype)c->dtype);
    int p = coh_pof2(n), L = coh_ilog2((unsigned)p), vr = coh_fold_vrank(v->me, n);
    int extra = n - p;
    /* The pre-fold needs a whole vector of scratch; the halving rounds at
     * most half of one in pieces. */
    size_t ce = coh_chunk_elems(coh_coll_chunk(g), es, count, L + 1);
    size_t P = coh_npieces(count, ce);
    size_t tmp_elems = v->me < 2 * extra ? count : COH_MIN(ce, count);
    char *tmp = coh_coll_alloc(g, c, tmp_elems * es, "recursive halving buffer");
    if (!tmp)
        return COHORT_ERR_NOMEM;
    coh_reduce_fn red = coh_reduce_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop);
    const uint32_t s_rs = step_base + 1, s_ag = s_rs + (uint32_t)((size_t)L * P);
    const uint32_t s_post = s_ag + (uint32_t)L;
    cohort_status st = fold_in(g, c, v, buf, tmp, count, step_base);
    if (vr >= 0) {
        /* Reduce-scatter by recursive halving over p blocks: each round
         * halves the window of blocks this member is responsible for,
         * sending the other half to the partner that keeps it. */
        for (int k = 0; k < L && st == COHORT_OK; k++) {
            int lo, hi;
            coh_rh_window(vr, p, k, &lo, &hi);
            int mid = lo + (hi - lo) / 2, pv = vr ^ (p >> (k + 1));
            int peer = coh_view_rank(v, coh_fold_real(pv, n));
            int klo = vr < mid ? lo : mid, khi = vr < mid ? mid : hi;
            int slo = vr < mid ? mid : lo, shi = vr < mid ? hi : mid;
            size_t so = coh_blk_off(count, p, slo), sl = coh_blk_off(count, p, shi) - so;
            size_t ro = coh_blk_off(count, p, klo), rl = coh_blk_off(count, p, khi) - ro;
            size_t ps = coh_npieces(sl, ce), pr = coh_npieces(rl, ce), pm = ps > pr ? ps : pr;
            for (size_t t = 0; t < pm && st == COHORT_OK; t++) {
                coh_xfer ops[2];
                int nops = 0;
                uint32_t step = s_rs + (uint32_t)((size_t)k * P + t);
                size_t rn = 0;
                if (t < ps)
                    coh_xf_send(&ops[nops++], g, c, peer, step, buf + (so + t * ce) * es,
                                COH_MIN(ce, sl - t * ce) * es);
                if (t < pr) {
                    rn = COH_MIN(ce, rl - t * ce);
                    coh_xf_recv(&ops[nops++], g, c, peer, step, tmp, rn * es);
                }
                st = coh_xf_run(g, c, ops, nops);
                if (st == COHORT_OK && rn)
                    red(buf + (ro + t * ce) * es, tmp, rn);
                if (st == COHORT_OK && rn && avg_div > 1 && k == L - 1)
                    /* this member's block: its sum is whole, the piece in cache */
                    coh_reduce_finish(buf + (ro + t * ce) * es, rn, (cohort_dtype)c->dtype,
                                      COHORT_AVG, avg_div);
            }
        }
        /* All-gather by recursive doubling: the windows grow back. */
        for (int k = L - 1; k >= 0 && st == COHORT_OK; k--) {
            int lo, hi, plo, phi;
            int pv = vr ^ (p >> (k + 1));
            coh_rh_window(vr, p, k + 1, &lo, &hi);
            coh_rh_window(pv, p, k + 1, &plo, &phi);
            int peer = coh_view_rank(v, coh_fold_real(pv, n));
            size_t so = coh_blk_off(count, p, lo), sl = coh_blk_off(count, p, hi) - so;
            size_t ro = coh_blk_off(count, p, plo), rl = coh_blk_off(count, p, phi) - ro;
            coh_xfer ops[2];
            int nops = 0;
            uint32_t step = s_ag + (uint32_t)(L - 1 - k);
            if (sl)
                coh_xf_send(&ops[nops++], g, c, peer, step, buf + so * es, sl * es);
            if (rl)
                coh_xf_recv(&ops[nops++], g, c, peer, step, buf + ro * es, rl * es);
            st = coh_xf_run(g, c, ops, nops);
        }
    }
    if (st == COHORT_OK)
        st = fold_out(g, c, v, buf, count, s_post);
    coh_coll_free(tmp, tmp_elems * es);
    return st;
}

cohort_status coh_bruck_all_gather(cohort_group *g, const coh_call *c, const coh_view *v,
                                   void *buf_, size_t bytes, uint32_t step_base)
{
    int n = v->n, me = v->me;
    if (n == 1 || bytes == 0)
        return COHORT_OK;
    char *buf = buf_;
    /* tmp holds blocks me, me+1, ... in that order: each round appends the
     * blocks the member at distance d has gathered so far. */
    char *tmp = coh_coll_alloc(g, c, (size_t)n * bytes, "bruck all-gather buffer");
    if (!tmp)
        return COHORT_ERR_NOMEM;
    memcpy(tmp, buf + (size_t)me * bytes, bytes);
    cohort_status st = COHORT_OK;
    int rounds = coh_clog2(n);
    for (int k = 0; k < rounds && st == COHORT_OK; k++) {
        int d = 1 << k, cnt = coh_bruck_blocks(n, k);
        coh_xfer ops[2];
        coh_xf_send(&ops[0], g, c, coh_view_rank(v, coh_mod(me - d, n)), step_base + (uint32_t)k,
                    tmp, (size_t)cnt * bytes);
        coh_xf_recv(&ops[1], g, c, coh_view_rank(v, coh_mod(me + d, n)), step_base + (uint32_t)k,
                    tmp + (size_t)d * bytes, (size_t)cnt * bytes);
        st = coh_xf_run(g, c, ops, 2);
    }
    if (st == COHORT_OK)
        for (int i = 0; i < n; i++)
            memcpy(buf + (size_t)coh_mod(me + i, n) * bytes, tmp + (size_t)i * bytes, bytes);
    coh_coll_free(tmp, (size_t)n * bytes);
    return st;
}

cohort_status coh_dissemination(cohort_group *g, const coh_call *c, const coh_view *v,
                                uint32_t step_base)
{
    return coh_dissemination_ack(g, c, v, step_base, -1);
}

cohort_status coh_dissemination_ack(cohort_group *g, const coh_call *c, const coh_view *v,
                                    uint32_t step_base, int ack_from)
{
    int n = v->n, me = v->me;
    static char none; /* zero-byte messages still need a valid pointer */
    for (int k = 0; (1 << k) < n; k++) {
        int d = 1 << k;
        coh_xfer ops[2];
        coh_xf_send(&ops[0], g, c, coh_view_rank(v, coh_mod(me + d, n)), step_base + (uint32_t)k,
                    &none, 0);
        coh_xf_recv(&ops[1], g, c, coh_view_rank(v, coh_mod(me - d, n)), step_base + (uint32_t)k,
                    &none, 0);
        ops[1].ack_now = ops[1].peer == ack_from;
        cohort_status st = coh_xf_run(g, c, ops, 2);
        if (st != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

/* The barrier after a broadcast, led by that broadcast's root (lead): the
 * others send their arrival to it and wait for its release, so it leaves
 * first and its next broadcast is on the wire before its receivers look
 * for it (docs/performance.md, "TCP 4 ranks OSU style: small broadcasts
 * (session 11)"). The leader also sends one message to every rank as it
 * enters: then every rank sends at entry and every rank receives from the
 * leader, so a rank in any other call at this seq gets a barrier header
 * (or sends one to a barrier rank) and the mismatch is found on the spot,
 * as in the dissemination barrier - without it a rank waiting in a
 * receive-only call (a broadcast's leaf) would wait on ranks that only
 * talk to the leader. Steps: base + 0 arrival and entry, base + 1 release. */
#define LEAD_MAX 32
cohort_status coh_lead_barrier(cohort_group *g, const coh_call *c, const coh_view *v, int lead,
                               uint32_t step_base)
{
    int n = v->n, me = v->me;
    static char none;
    coh_xfer ops[2 * LEAD_MAX];
    if (n > LEAD_MAX)
        return coh_dissemination(g, c, v, step_base);
    if (me != lead) {
        int L = coh_view_rank(v, lead);
        coh_xf_send(&ops[0], g, c, L, step_base, &none, 0);
        coh_xf_recv(&ops[1], g, c, L, step_base, &none, 0);
        coh_xf_recv(&ops[2], g, c, L, step_base + 1, &none, 0);
        return coh_xf_run(g, c, ops, 3);
    }
    int k = 0;
    for (int q = 0; q < n; q++)
        if (q != me)
            coh_xf_send(&ops[k++], g, c, coh_view_rank(v, q), step_base, &none, 0);
    for (int q = 0; q < n; q++)
        if (q != me)
            coh_xf_recv(&ops[k++], g, c, coh_view_rank(v, q), step_base, &none, 0);
    cohort_status st = coh_xf_run(g, c, ops, k);
    if (st != COHORT_OK)
        return st;
    k = 0;
    for (int q = 0; q < n; q++)
        if (q != me)
            coh_xf_send(&ops[k++], g, c, coh_view_rank(v, q), step_base + 1, &none, 0);
    return coh_xf_run(g, c, ops, k);
}
