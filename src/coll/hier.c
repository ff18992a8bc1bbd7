/*
 * hier.c - hierarchical collectives for groups spanning hosts: shared
 * memory inside each host, messages between one representative per host.
 *
 * The representative of a host is its leader (g->leaders[h], the lowest
 * group rank there, local index 0), except that rooted operations use the
 * root itself on the root's host, which saves a hop. The inter-host phase
 * runs the ordinary message algorithms over the view of representatives,
 * chosen with the same crossovers as for a flat group of n_hosts ranks.
 *
 * A host with a single rank has no segment (g->shm == NULL) and skips the
 * shm phases; a host with several must have one. The check is a rank-local
 * one: it fails the group, so the other ranks are told instead of waiting.
 */
#include <string.h>

#include "coll/coll_int.h"

static size_t es_of(const coh_call *c) { return cohort_dtype_size((cohort_dtype)c->dtype); }

/* Local phases need the segment whenever this host holds several ranks. */
static cohort_status need_shm(cohort_group *g, const coh_call *c)
{
    if (g->local_size > 1 && !g->shm)
        return coh_group_fail(g, COHORT_ERR_INVALID,
                              "%s #%llu: hierarchical algorithm on host %s (%d ranks) without a "
                              "shared-memory segment",
                              coh_coll_label(c->coll), (unsigned long long)c->seq,
                              g->hosts ? g->hosts[g->my_host] : "?", g->local_size);
    return COHORT_OK;
}

/* The view of one rank per host; reps[h] = leader of h, or `root` on the
 * root's host (root < 0: leaders only). */
static int *make_reps(cohort_group *g, const coh_call *c, int root, coh_view *v)
{
    int *reps = coh_coll_alloc(g, c, sizeof(int) * (size_t)g->n_hosts, "host representatives");
    if (!reps)
        return NULL;
    memcpy(reps, g->leaders, sizeof(int) * (size_t)g->n_hosts);
    if (root >= 0)
        reps[g->peers[root].host] = root;
    v->n = g->n_hosts;
    v->me = g->my_host;
    v->ranks = reps;
    return reps;
}

/* Ranks per host and the offset of each host's block in host-major order,
 * in units of `unit` (bytes or elements per rank). */
static size_t *host_blocks(cohort_group *g, const coh_call *c, size_t unit, size_t **len_out)
{
    size_t *off = coh_coll_alloc(g, c, sizeof(size_t) * 2 * (size_t)g->n_hosts, "host blocks");
    if (!off)
        return NULL;
    size_t *len = off + g->n_hosts;
    memset(len, 0, sizeof(size_t) * (size_t)g->n_hosts);
    for (int r = 0; r < g->size; r++)
        len[g->peers[r].host] += unit;
    size_t o = 0;
    for (int h = 0; h < g->n_hosts; h++) {
        off[h] = o;
        o += len[h];
    }
    *len_out = len;
    return off;
}

/* Position of rank r's block in host-major order, in per-rank units. */
static size_t host_major_index(const cohort_group *g, const size_t *off, size_t unit, int r)
{
    return off[g->peers[r].host] / unit + (size_t)g->peers[r].local_index;
}

/* all_reduce among representatives, algorithm chosen like a flat group's.
 * avg_div > 1: each representative holds its host's sum, so the leaders'
 * sum is the group's, divided where it becomes whole (rd.c, ring.c) before
 * the hosts' broadcasts - no rank divides the whole vector after. */
static cohort_status leaders_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                        void *buf, size_t count, int avg_div)
{
    size_t bytes = count * es_of(c);
    if (bytes <= (64u << 10) || count < (size_t)v->n)
        return coh_rd_all_reduce(g, c, v, buf, count, 0, avg_div);
    if (v->n >= 4 && bytes <= (512u << 10))
        return coh_rab_all_reduce(g, c, v, buf, count, 0, avg_div);
    return coh_ring_all_reduce(g, c, v, buf, buf, count, 0, avg_div);
}

cohort_status coh_hier_all_reduce(cohort_group *g, coh_call *c)
{
    cohort_status st = need_shm(g, c);
    if (st != COHORT_OK)
        return st;
    size_t bytes = (size_t)c->count * es_of(c);
    int leader = g->rank == g->leaders[g->my_host];
    coh_call tmp;
    if (g->local_size > 1) {
        const coh_call *rc = coh_shm_sum_call(g, c, &tmp, &st);
        if (st == COHORT_OK)
            st = coh_coll_tp->shm_reduce(g->shm, rc, c->send, c->recv, c->count, 0);
    }
    else if (c->send != c->recv)
        memmove(c->recv, c->send, bytes);
    if (st == COHORT_OK && leader) {
        coh_view v;
        int *reps = make_reps(g, c, -1, &v);
        if (!reps)
            return COHORT_ERR_NOMEM;
        st = leaders_all_reduce(g, c, &v, c->recv, c->count, coh_avg_div(g, c));
        coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
    }
    if (st == COHORT_OK && g->local_size > 1)
        st = coh_coll_tp->shm_broadcast(g->shm, c, c->recv, bytes, 0);
    return st;
}

cohort_status coh_hier_broadcast(cohort_group *g, coh_call *c)
{
    cohort_status st = need_shm(g, c);
    if (st != COHORT_OK)
        return st;
    void *buf = c->recv ? c->recv : (void *)c->send;
    size_t bytes = (size_t)c->count * es_of(c);
    int root_host = g->peers[c->root].host;
    coh_view v;
    int *reps = make_reps(g, c, c->root, &v);
    if (!reps)
        return COHORT_ERR_NOMEM;
    /* root's host first (the root is its representative), then the tree
     * between hosts, then the other hosts from their leaders */
    if (g->my_host == root_host && g->local_size > 1)
        st = coh_coll_tp->shm_broadcast(g->shm, c, buf, bytes, g->peers[c->root].local_index);
    if (st == COHORT_OK && g->rank == reps[g->my_host])
        st = coh_bc_tree_pref(v.n, bytes) ? coh_tree_broadcast(g, c, &v, buf, bytes, root_host, 0)
                                          : coh_sag_broadcast(g, c, &v, buf, bytes, root_host, 0);
    if (st == COHORT_OK && g->my_host != root_host && g->local_size > 1)
        st = coh_coll_tp->shm_broadcast(g->shm, c, buf, bytes, 0);
    coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
    return st;
}

cohort_status coh_hier_reduce(cohort_group *g, coh_call *c)
{
    cohort_status st = need_shm(g, c);
    if (st != COHORT_OK)
        return st;
    size_t bytes = (size_t)c->count * es_of(c);
    int root_host = g->peers[c->root].host;
    coh_view v;
    int *reps = make_reps(g, c, c->root, &v);
    if (!reps)
        return COHORT_ERR_NOMEM;
    int rep = reps[g->my_host];
    /* the representative accumulates: the root in recv, others in scratch
     * (the tree overwrites its accumulator with partial results) */
    char *acc = NULL, *scratch = NULL;
    if (g->rank == rep) {
        if (g->rank == c->root) {
            acc = c->recv;
        } else {
            acc = scratch = coh_coll_alloc(g, c, bytes, "hierarchical reduce accumulator");
            if (!acc) {
                coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
                return COHORT_ERR_NOMEM;
            }
        }
    }
    coh_call tmp;
    if (g->local_size > 1) {
        const coh_call *rc = coh_shm_sum_call(g, c, &tmp, &st);
        if (st == COHORT_OK)
            st = coh_coll_tp->shm_reduce(g->shm, rc, c->send, acc ? (void *)acc : c->recv,
                                         c->count, g->peers[rep].local_index);
    }
    else if ((const char *)c->send != acc)
        memmove(acc, c->send, bytes);
    if (st == COHORT_OK && g->rank == rep)
        st = coh_tree_reduce(g, c, &v, acc, c->count, root_host, 0, coh_avg_div(g, c));
    coh_coll_free(scratch, bytes);
    coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
    return st;
}

cohort_status coh_hier_all_gather(cohort_group *g, coh_call *c)
{
    cohort_status st = need_shm(g, c);
    if (st != COHORT_OK)
        return st;
    size_t B = (size_t)c->count * es_of(c), total = B * (size_t)g->size;
    int leader = g->rank == g->leaders[g->my_host];
    char *tmp = NULL;
    size_t *hoff = NULL, *hlen = NULL;
    if (leader) {
        tmp = coh_coll_alloc(g, c, total, "hierarchical all_gather buffer");
        hoff = tmp ? host_blocks(g, c, B, &hlen) : NULL;
        if (!hoff) {
            coh_coll_free(tmp, total);
            return COHORT_ERR_NOMEM;
        }
    }
    /* 1: each host's blocks, in local order, at the host's place in tmp;
     * in place (send == recv) the own block is in its slot of recv */
    char *mine = leader ? tmp + hoff[g->my_host] : NULL;
    const char *own = c->send == c->recv ? (const char *)c->recv + (size_t)g->rank * B
                                         : (const char *)c->send;
    if (g->local_size > 1)
        st = coh_coll_tp->shm_gather(g->shm, c, own, mine, B, 0);
    else
        memcpy(mine, own, B);
    /* 2: hosts' blocks between leaders (sizes differ per host) */
    if (st == COHORT_OK && leader) {
        coh_view v;
        int *reps = make_reps(g, c, -1, &v);
        st = reps ? coh_ring_all_gather(g, c, &v, tmp, 0, hoff, hlen, 0) : COHORT_ERR_NOMEM;
        coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
        /* 3: host-major to rank order */
        if (st == COHORT_OK)
            for (int r = 0; r < g->size; r++)
                memcpy((char *)c->recv + (size_t)r * B, tmp + host_major_index(g, hoff, B, r) * B,
                       B);
    }
    coh_coll_free(tmp, total);
    coh_coll_free(hoff, sizeof(size_t) * 2 * (size_t)g->n_hosts);
    /* 4: everything to the host */
    if (st == COHORT_OK && g->local_size > 1)
        st = coh_coll_tp->shm_broadcast(g->shm, c, c->recv, total, 0);
    return st;
}

cohort_status coh_hier_reduce_scatter(cohort_group *g, coh_call *c)
{
    cohort_status st = need_shm(g, c);
    if (st != COHORT_OK)
        return st;
    size_t es = es_of(c), B = (size_t)c->count * es, total = B * (size_t)g->size;
    size_t n_all = (size_t)c->count * (size_t)g->size;
    int leader = g->rank == g->leaders[g->my_host];
    char *sum = NULL, *hm = NULL;
    size_t *hoff = NULL, *hlen = NULL;
    if (leader) {
        sum = coh_coll_alloc(g, c, 2 * total, "hierarchical reduce_scatter buffers");
        hoff = sum ? host_blocks(g, c, c->count, &hlen) : NULL;
        if (!hoff) {
            coh_coll_free(sum, 2 * total);
            return COHORT_ERR_NOMEM;
        }
        hm = sum + total;
    }
    /* 1: the host's sum of the whole input on the leader */
    coh_call tmp;
    if (g->local_size > 1) {
        const coh_call *rc = coh_shm_sum_call(g, c, &tmp, &st);
        if (st == COHORT_OK)
            st = coh_coll_tp->shm_reduce(g->shm, rc, c->send, sum, n_all, 0);
    }
    else
        memcpy(sum, c->send, total);
    if (st == COHORT_OK && leader) {
        /* 2: host-major order, so that each host's ranks' blocks are one
         * contiguous block of the leaders' reduce-scatter */
        for (int r = 0; r < g->size; r++)
            memcpy(hm + host_major_index(g, hoff, c->count, r) * B, sum + (size_t)r * B, B);
        coh_view v;
        int *reps = make_reps(g, c, -1, &v);
        /* an AVG: the leaders' sum is the group's, divided at each
         * block's last fold (ring.c) before the hosts' scatters */
        st = reps ? coh_ring_reduce_scatter(g, c, &v, hm, hm, n_all, hoff, hlen, 0,
                                            coh_avg_div(g, c))
                  : COHORT_ERR_NOMEM;
        coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
    }
    /* 3: the host's block, one count to each local rank */
    char *hb = leader ? hm + hoff[g->my_host] * es : NULL;
    if (st == COHORT_OK) {
        if (g->local_size > 1)
            st = coh_coll_tp->shm_scatter(g->shm, c, hb, c->recv, B, 0);
        else
            memmove(c->recv, hb, B);
    }
    coh_coll_free(sum, 2 * total);
    coh_coll_free(hoff, sizeof(size_t) * 2 * (size_t)g->n_hosts);
    return st;
}

cohort_status coh_hier_barrier(cohort_group *g, coh_call *c)
{
    cohort_status st = need_shm(g, c);
    if (st == COHORT_OK && g->local_size > 1)
        st = coh_coll_tp->shm_barrier(g->shm, c);
    if (st == COHORT_OK && g->rank == g->leaders[g->my_host]) {
        coh_view v;
        int *reps = make_reps(g, c, -1, &v);
        if (!reps)
            return COHORT_ERR_NOMEM;
        st = coh_dissemination(g, c, &v, 0);
        coh_coll_free(reps, sizeof(int) * (size_t)g->n_hosts);
    }
    if (st == COHORT_OK && g->local_size > 1)
        st = coh_coll_tp->shm_barrier(g->shm, c);
    return st;
}
