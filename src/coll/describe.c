/*
 * describe.c - cohort_describe: which algorithm, transport and copy path a
 * collective takes on a group (cohort-perf prints it beside its results, so
 * a comparison records what decided cohort's speed).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll.h"
#include "transport/shm/shm.h"
#include "transport/shm/shm_mem.h"
#include "transport/tcp/tcp.h"

/* "tcp sockets (congestion control reno on 1 (...))": what decides a tcp
 * transfer's pacing, from the sockets themselves. */
static const char *tcp_text(const cohort_group *g, char *out, size_t len)
{
    if (g->size < 2)
        return "-";
    char cc[200] = "";
    if (g->net)
        coh_net_cc_info(g->net, cc, sizeof cc);
    snprintf(out, len, "tcp sockets%s%s%s", cc[0] ? " (" : "", cc, cc[0] ? ")" : "");
    return out;
}

/* "; this machine: 4 ranks on 2 cpus (their cpu sets): ranks outnumber
 * cpus": what the rules that compare ranks with cpus read (g->oversub,
 * g->machine_cpus; group/init.c). */
static void machine_text(const cohort_group *g, char *out, size_t len)
{
    const char *over = "";
    if (g->oversub)
        over = g->machine_cpus > 0 && g->machine_size > g->machine_cpus
                   ? ": ranks outnumber cpus"
                   : "; another machine's ranks outnumber its cpus";
    if (g->machine_cpus > 0)
        snprintf(out, len, "; this machine: %d ranks on %ld cpus (%s)%s", g->machine_size,
                 g->machine_cpus, g->machine_cpus_sets ? "their cpu sets" : "online", over);
    else
        snprintf(out, len, "; this machine: %d ranks, cpus unknown%s", g->machine_size, over);
}

cohort_status cohort_describe(cohort_group *g, const char *op, size_t count, cohort_dtype dt,
                              char *buf, size_t len)
{
    if (!buf || len < 2)
        return COHORT_ERR_INVALID;
    buf[0] = 0;
    if (!g || !op)
        return COHORT_ERR_INVALID;
    int coll = COH_COLL_NONE;
    for (int k = COH_COLL_ALL_REDUCE; k <= COH_COLL_RECV; k++)
        if (!strcmp(coh_coll_name(k), op))
            coll = k;
    if (coll == COH_COLL_NONE || (unsigned)dt >= COHORT_DTYPE_COUNT)
        return COHORT_ERR_INVALID;
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = (uint8_t)coll;
    c.dtype = (uint8_t)dt;
    c.count = count;
    c.redop = coll == COH_COLL_ALL_REDUCE || coll == COH_COLL_REDUCE ||
                      coll == COH_COLL_REDUCE_SCATTER
                  ? COHORT_SUM
                  : -1;
    c.root = coll == COH_COLL_BROADCAST || coll == COH_COLL_REDUCE ||
                     coll == COH_COLL_GATHER || coll == COH_COLL_SCATTER
                 ? 0
                 : -1;
    if (coll == COH_COLL_SEND || coll == COH_COLL_RECV) {
        /* send/recv: no algorithm; the path to a peer on this host (the
         * pair's channel in the segment, or tcp) and to other hosts (tcp) */
        size_t es = cohort_dtype_size(dt);
        size_t bytes = count > SIZE_MAX / (es ? es : 1) ? SIZE_MAX : count * es;
        char mach[160], tcp[256];
        machine_text(g, mach, sizeof mach);
        snprintf(buf, len,
                 "algorithm p2p; transport %s (%d ranks, %d on this host, %d hosts%s); copy: %s%s%s",
                 g->shm ? (g->local_size == g->size ? "shm" : "shm + tcp")
                        : g->size > 1 ? "tcp" : "-",
                 g->size, g->local_size, g->n_hosts, mach,
                 g->shm ? coh_shm_copy_path(g->shm, coll, bytes) : tcp_text(g, tcp, sizeof tcp),
                 g->shm ? "; " : "", g->shm ? coh_shm_copy_info(g->shm) : "");
        if (g->shm) {
            size_t n = strlen(buf);
            if (n < len)
                snprintf(buf + n, len - n, "; publish: %s", coh_shm_publish_info(g->shm));
        }
        return COHORT_OK;
    }
    cohort_status st = COHORT_OK;
    const coh_algo *a = g->size > 1 ? coh_coll_select(g, &c, &st) : NULL;
    /* The copy path of this op and size on the segment, then the segment's
     * whole story (what was probed and measured at attach, and why). */
    size_t es = cohort_dtype_size(dt);
    size_t bytes = count > SIZE_MAX / (es ? es : 1) ? SIZE_MAX : count * es;
    char copy[3072]; /* the path, then copy_info whole (1536) */
    size_t slots = 0, max = 0, pieces = 0;
    if (g->shm && coll == COH_COLL_BROADCAST &&
        coh_shm_ring_takes(g->shm, bytes, &slots, &max, &pieces) && pieces > 1)
        snprintf(copy, sizeof copy,
                 "slot ring in %zu pieces (%zu slots of %zu B per root; ranks outnumber cpus: "
                 "no rank waits for all at the start, the root returns once its last piece is "
                 "written, at most two calls ahead; from a cohort_mem_alloc root buffer the "
                 "readers copy it in place and the call ends in a barrier); %s",
                 pieces, slots, max, coh_shm_copy_info(g->shm));
    else if (pieces == 1) {
        int pf = coh_shm_ring_prefetch(g->shm, bytes);
        snprintf(copy, sizeof copy,
                 "slot ring (%zu slots of %zu B per root; the root returns once its slot is "
                 "written%s); %s",
                 slots, max,
                 pf == 2   ? ", then takes the record and slot lines of its call 8 on for "
                             "writing (PREFETCHW)"
                 : pf == 1 ? ", then takes the record lines of its call 8 on for writing "
                             "(PREFETCHW)"
                           : "",
                 coh_shm_copy_info(g->shm));
    }
    else if (g->shm) {
        /* a broadcast root's buffer in the preloaded shared heap */
        char heap[256] = "";
        if (coll == COH_COLL_BROADCAST)
            coh_mem_heap_describe(g->shm, bytes, heap, sizeof heap);
        const char *xc = coh_shm_xc_verdict(g->shm);
        snprintf(copy, sizeof copy, "%s%s%s%s; %s", heap, coh_shm_copy_path(g->shm, coll, bytes),
                 xc ? "; the cpus now: " : "", xc ? xc : "", coh_shm_copy_info(g->shm));
        if (g->net && g->n_hosts > 1) { /* the hosts' legs */
            char tcp[256];
            size_t o = strlen(copy);
            snprintf(copy + o, sizeof copy - o, "; between hosts: %s", tcp_text(g, tcp, sizeof tcp));
        }
    }
    else {
        char tcp[256];
        snprintf(copy, sizeof copy, "%s", tcp_text(g, tcp, sizeof tcp));
    }
    char mach[160];
    machine_text(g, mach, sizeof mach);
    snprintf(buf, len,
             "algorithm %s; transport %s (%d ranks, %d on this host, %d hosts%s); copy: %s%s%s",
             g->size == 1 ? "none (one rank)" : a ? a->name : "none (selection failed)",
             g->shm ? (g->local_size == g->size ? "shm" : "shm + tcp") : g->size > 1 ? "tcp" : "-",
             g->size, g->local_size, g->n_hosts, mach, copy, g->shm ? "; publish: " : "",
             g->shm ? coh_shm_publish_info(g->shm) : "");
    return a || g->size == 1 ? COHORT_OK : st;
}
