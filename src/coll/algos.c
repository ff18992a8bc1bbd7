/*
 * algos.c - the algorithm table: message algorithms over all ranks, shm
 * algorithms for single-host groups, hierarchical ones (hier.c) for groups
 * spanning hosts; each with the predicates the selection walks.
 *
 * Table order is preference order: per collective, shm (one host) and hier
 * (several hosts with shared memory inside them) come first, then message
 * algorithms whose preferred() encodes the size crossovers below. The
 * thresholds were measured over loopback TCP on the 2-core reference
 * machine (docs/algorithms.md has the numbers and the alpha-beta model).
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "coll/lane.h"

/* ---- crossovers (bytes) ---- */
#define AR_RD_MAX (64u << 10)   /* all_reduce: recursive doubling up to here */
#define AR_RAB_MAX (512u << 10) /* ... Rabenseifner up to here (n >= 4), ring above */
#define AG_BRUCK_MAX (64u << 10) /* all_gather: Bruck while the total is small */
#define GS_TREE_MAX (16u << 10)  /* gather/scatter: binomial tree per-rank blocks */
#define BC_TREE_MAX (512u << 10) /* broadcast: binomial tree up to here */
#define BC_FLAT_MIN (512u << 10) /* ... flat above when ranks > cores (one host) */
#define SC_OSU_LINEAR_MAX GS_TREE_MAX /* scatter right after a barrier, oversubscribed: linear */
#define BC_COARSE_MIN (16u << 20) /* ... tree_coarse from here (one host, ranks > cores, n >= 4) */
#define BC_COARSE_PIECES 4
#define BC_OSU_FLAT_MAX (16u << 10) /* ... flat right after a barrier (oversubscribed) */
#define BC_HOSTFLAT_MIN (4u << 20) /* ... host_flat from here across 2-4 hosts */
#define BC_HOSTFLAT_MAX_HOSTS 4
#define RS_DIRECT_MAX (64u << 10) /* reduce_scatter: direct up to this input per rank */

static size_t es_of(const coh_call *c) { return coh_dtype_size(c->dtype); }
static size_t bytes_of(const coh_call *c) { return (size_t)c->count * es_of(c); }
static coh_view whole(const cohort_group *g) { return (coh_view){g->size, g->rank, NULL}; }
static void *bcast_buf(const coh_call *c) { return c->recv ? c->recv : (void *)c->send; }

/* ---- predicates ----
 * They read of the call only its coll, count, dtype and reduce op, and of
 * the group only what group creation fixed and its transports (shm, net):
 * coh_coll_select_memo (select.c) keys its memo on exactly these, so a
 * predicate reading more (the root, the buffers) must extend that key. */

int coh_topo_single_host_shm(const cohort_group *g)
{
    return g->n_hosts == 1 && g->shm != NULL && g->local_size == g->size;
}

int coh_topo_hier(const cohort_group *g)
{
    /* some host holds two ranks or more, and shared memory is allowed */
    return g->n_hosts > 1 && g->n_hosts < g->size && g->force_transport != 2;
}

/* Message algorithms need the tcp mesh (every group larger than one has
 * it); a group of one never gets this far but may be asked (tests). */
static int msg_ok(const cohort_group *g, const coh_call *c)
{
    (void)c;
    return g->size == 1 || g->net != NULL;
}
static int shm_ok(const cohort_group *g, const coh_call *c)
{
    (void)c;
    return coh_topo_single_host_shm(g);
}
static int hier_ok(const cohort_group *g, const coh_call *c)
{
    (void)c;
    return coh_topo_hier(g) && g->net != NULL;
}
static int always(const cohort_group *g, const coh_call *c)
{
    (void)g;
    (void)c;
    return 1;
}

/* float16/bfloat16 SUM/AVG/PROD round to 16 bits at every pairwise
 * combine: the direct algorithms fold each element once, in float32, in
 * the shm transport's order, so tcp gives the bits shm gives. MIN/MAX are
 * exact in any order. */
static int wide_fold(const coh_call *c)
{
    return (c->dtype == COHORT_FLOAT16 || c->dtype == COHORT_BFLOAT16) &&
           (c->redop == COHORT_SUM || c->redop == COHORT_AVG || c->redop == COHORT_PROD);
}
static int direct_pref(const cohort_group *g, const coh_call *c)
{
    (void)g;
    return wide_fold(c);
}

static int ar_rd_pref(const cohort_group *g, const coh_call *c)
{
    /* fewer elements than ranks: the halving algorithms would send empty
     * blocks; two ranks: one exchange of the whole vector is optimal too */
    return bytes_of(c) <= AR_RD_MAX || c->count < (uint64_t)g->size;
}
/* Medium sizes: halving keeps the log-round latency of recursive doubling
 * but moves ring-like volume; above AR_RAB_MAX the ring's pipelined,
 * neighbour-only traffic wins. */
static int ar_rab_pref(const cohort_group *g, const coh_call *c)
{
    /* with 2 or 3 ranks the halving has one round: it is the ring without
     * the pipelining */
    return g->size >= 4 && bytes_of(c) <= AR_RAB_MAX;
}
int coh_bc_tree_pref(int n, size_t bytes)
{
    /* the tree's root sends log2(n) copies; scatter+all-gather about two
     * and needs n-1 more latencies: worth it for large messages only */
    return n < 4 || bytes <= BC_TREE_MAX;
}
static int bc_tree_pref(const cohort_group *g, const coh_call *c)
{
    return coh_bc_tree_pref(g->size, bytes_of(c));
}
/* The tree with a rendezvous (tree.c): TBD by measurement. */
static int bc_tree_rdv_pref(const cohort_group *g, const coh_call *c)
{
    (void)g;
    (void)c;
    return 0;
}
/* Flat (root sends to each member directly) for large messages when the
 * ranks of a one-host group outnumber its cores: a relay of the tree or of
 * scatter+all-gather waits to be scheduled before it forwards (4 ranks on
 * 2 cores, paired launches: flat/tree 0.28-0.51 and flat/scatter_allgather
 * 0.50-0.51 at 1-4 MiB; docs/algorithms.md). At 2 ranks it measured no
 * better than the pipelined tree. Every rank of a one-host group reads the
 * same cpu count (the union of the ranks' cpu sets, group/init.c), so
 * every rank picks the same. */
int coh_bc_flat_pref(int n, int n_hosts, long cpus, size_t bytes)
{
    return bytes > BC_FLAT_MIN && n_hosts == 1 && cpus > 0 && n > cpus;
}
static long online_cpus;
static pthread_once_t cpus_once = PTHREAD_ONCE_INIT;
static void read_cpus(void) { online_cpus = sysconf(_SC_NPROCESSORS_ONLN); }
/* The one host's cpus: the union of its ranks' cpu sets as the rendezvous
 * found it (g->machine_cpus, the same on every rank of the host), or the
 * online cpus when that is unknown (coh_group_cpus, read once here). */
static long host_cpus(const cohort_group *g)
{
    if (g->machine_cpus > 0)
        return g->machine_cpus;
    pthread_once(&cpus_once, read_cpus);
    return online_cpus;
}
static int bc_flat_pref(const cohort_group *g, const coh_call *c)
{
    return coh_bc_flat_pref(g->size, g->n_hosts, host_cpus(g), bytes_of(c));
}
/* Large broadcasts on one host whose ranks outnumber its cores, n >= 4:
 * tree_coarse, the binomial tree in BC_COARSE_PIECES pieces. Flat's root
 * writes n-1 copies on one core, as much CPU as all the receivers' reads
 * together (perf, 4 ranks on 2 cores, 64 MiB: root 23 % of the samples,
 * each receiver 8 %), so the broadcast lasts as long as the root's core
 * time; the tree's root writes log2(n) copies and a relay the rest. Few
 * pieces: the relay forwards a piece while it receives the next, but each
 * piece is a hand-off to a rank that may wait to be scheduled (the tree
 * in 256 KiB pieces lost to flat). 3 ranks: the tree's root sends two
 * copies, as flat's does. Gloo's broadcast is this tree in one piece
 * (docs/performance.md, "Broadcast >= 16 MiB, 4 ranks on 2 cores"). */
int coh_bc_coarse_pref(int n, int n_hosts, long cpus, size_t bytes)
{
    return bytes >= BC_COARSE_MIN && n >= 4 && coh_bc_flat_pref(n, n_hosts, cpus, bytes);
}
static int bc_coarse_pref(const cohort_group *g, const coh_call *c)
{
    return coh_bc_coarse_pref(g->size, g->n_hosts, host_cpus(g), bytes_of(c));
}
/* Broadcast across a few hosts, large messages: host_flat sends each byte
 * into every other host once (the tree and scatter+all-gather cross host
 * boundaries at several of their steps: with 2 hosts of 2 ranks,
 * scatter+all-gather carries 1.25 m over the link one way, host_flat m)
 * and no rank is more than one relay from the root. The root's link
 * carries (hosts - 1) copies: a few hosts only. Depends on the host table,
 * which every rank shares. From 4 MiB: two namespace hosts of 2 ranks on
 * 2 cores, paired, loaded: host_flat/scatter_allgather 0.82 at 16 MiB,
 * 0.97 at 64 MiB, but 1.35 at 1 MiB (docs/performance.md). */
int coh_bc_hostflat_pref(int n, int n_hosts, size_t bytes)
{
    return bytes >= BC_HOSTFLAT_MIN && n_hosts >= 2 && n_hosts <= BC_HOSTFLAT_MAX_HOSTS &&
           n_hosts < n;
}
static int bc_hostflat_pref(const cohort_group *g, const coh_call *c)
{
    return coh_bc_hostflat_pref(g->size, g->n_hosts, bytes_of(c));
}
/* reduce_scatter: the ring's n-1 steps each wait for the left neighbour's
 * previous step, so when ranks outnumber cores every step costs a
 * descheduled rank's wake-up; direct is one round of n-1 concurrent
 * messages, so each rank waits for the others' sends only once. Small
 * inputs only (total per rank = count * n elements): above, the ring's
 * overlap of folding with receiving wins. Same one-host CPU rule as the
 * flat broadcast, so every rank picks the same. */
int coh_rs_direct_pref(int n, int n_hosts, long cpus, size_t input_bytes)
{
    return input_bytes <= RS_DIRECT_MAX && n > 2 && n_hosts == 1 && cpus > 0 && n > cpus;
}
static int rs_direct_pref(const cohort_group *g, const coh_call *c)
{
    if (wide_fold(c))
        return 1;
    return coh_rs_direct_pref(g->size, g->n_hosts, host_cpus(g), bytes_of(c) * (size_t)g->size);
}
/* The barrier that directly follows a message-algorithm broadcast is led
 * by that broadcast's root when the ranks of some machine of the group
 * outnumber its cpus (g->oversub; mode -1, auto), always (1) or
 * never (0): COHORT_TCP_OVERSUB. With
 * the dissemination barrier the root left first in 1 of 512 OSU iterations
 * (4 ranks on 2 cores, traced): a receiver left first, found nothing,
 * and the scheduler round in which the root left the barrier and sent was
 * timed inside the next broadcast (docs/performance.md, "TCP 4 ranks OSU
 * style: small broadcasts (session 11)"). Any machine, not all: a
 * broadcast ends when its last receiver has the data and a barrier when its
 * last rank arrives, so one oversubscribed machine's scheduler rounds land
 * in the timed broadcast for the whole group (netns4osu: 2 namespace hosts
 * on one 2-cpu machine). Every rank decides alike: each publishes its cpu
 * count and cpu set at the rendezvous, and a machine's cpus are the union
 * of its ranks' sets (group/init.c, coh_machines_oversub). 2 ranks
 * never (one round of the dissemination barrier against two here). */
int coh_bar_lead_pref(int mode, int n, int oversub)
{
    if (n < 3 || mode == 0)
        return 0;
    return mode > 0 || oversub;
}
int coh_bar_lead_env(void)
{
    const char *v = coh_env_str("COHORT_TCP_OVERSUB");
    if (!v || !strcmp(v, "auto"))
        return -1;
    return !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : -1; /* checked at init (envtab.c) */
}
static int oversub_mode(const cohort_group *g)
{
    return g->algo_env_read ? g->bar_lead_mode : coh_bar_lead_env();
}
int coh_bar_leader(const cohort_group *g, const coh_call *c)
{
    if (c->coll != COH_COLL_BARRIER || c->seq != g->bar_seq || g->bar_seq == 0)
        return -1;
    return coh_bar_lead_pref(oversub_mode(g), g->size, g->oversub) ? g->bar_root : -1;
}
/* 2 ranks, one machine (loopback, or network namespaces joined by veth):
 * the barrier that directly follows a broadcast. In an OSU loop the
 * receiver takes two small segments from the root (its barrier message and
 * the next broadcast) with nothing sent back in between whenever the root's
 * barrier message arrives after the receiver's own went out; Linux then
 * sends the delayed ACK from inside the receive that takes the broadcast,
 * and on one machine that ACK's delivery runs in that recv (~1 us, traced:
 * docs/performance.md, "TCP 2-rank OSU broadcast: the ACK owed after the
 * barrier (session 12)"). The receiver flushes it as it leaves the
 * barrier instead, while the root sends. Across machines the ACK costs the
 * sender's NIC path, not the receive: not measured there, so not applied.
 * 3 ranks or more: not measured either (the oversubscribed rules above). */
int coh_bar_ack_pref(int n, int machine_size)
{
    return n == 2 && machine_size == 2;
}
int coh_bar_ack_from(const cohort_group *g, const coh_call *c)
{
    if (c->coll != COH_COLL_BARRIER || c->seq != g->bar_seq || g->bar_seq == 0)
        return -1;
    if (!coh_bar_ack_pref(g->size, g->machine_size) || g->rank == g->bar_root)
        return -1;
    return g->bar_root;
}
/* The other half of the OSU loop: a small broadcast that directly follows
 * a barrier goes flat (the root sends to every rank) under the same rule,
 * unless COHORT_ALGO_BROADCAST forces an algorithm. The tree's relay is a
 * rank that has just left the barrier and must be scheduled again to
 * forward; flat has no relay. Paired, LOADED, 4 ranks on 2 cores with the
 * led barrier (docs/performance.md, "TCP 4 ranks OSU style: small
 * broadcasts (session 11)"): flat/tree x0.57-0.70 at 8 B-16 KiB, x1.27 at
 * 64 KiB; back to back (no barrier between) flat was x1.56-1.66 at 8 B-4 KiB,
 * so a broadcast that follows anything else keeps the tree. */
int coh_bc_after_barrier_flat_pref(int mode, int n, int oversub, size_t bytes)
{
    return bytes <= BC_OSU_FLAT_MAX && coh_bar_lead_pref(mode, n, oversub);
}
/* c is a call of coll that directly follows a barrier, and no
 * COHORT_ALGO_* forces coll's algorithm (the OSU loop's rules below). */
static int follows_barrier(const cohort_group *g, const coh_call *c, int coll)
{
    return c->coll == coll && g->bcf_seq != 0 && c->seq == g->bcf_seq &&
           !coh_coll_forced(g, coll);
}
int coh_bc_after_barrier_flat(const cohort_group *g, const coh_call *c)
{
    return follows_barrier(g, c, COH_COLL_BROADCAST) &&
           coh_bc_after_barrier_flat_pref(oversub_mode(g), g->size, g->oversub, bytes_of(c));
}
/* The same for a small scatter: right after a barrier, under the same
 * rule, linear (the root sends every block itself) instead of the tree,
 * whose relays have just left the barrier. 4 ranks on 2 cores over TCP,
 * OSU style, 4 alternating rounds (session 33, `COHORT_ALGO_SCATTER`,
 * results/2026-12-06-s33-intel-targets/ab/scosu): linear/tree x0.51-0.53 at
 * 4-64 B a block, x0.74-0.79 at 1-4 KiB; back to back linear lost
 * (x1.26-1.48, ab/scb2b), so a scatter that follows anything else keeps the
 * tree. Up to the tree's whole range (GS_TREE_MAX) since session 34: OSU
 * style, 4 rounds, linear/tree x0.85 at 4 KiB a block, x0.59-0.60 at 8-16
 * KiB (bench/compare/results/2026-12-06-s34-scosu16k); above it linear is
 * the default anyway. */
int coh_sc_after_barrier_linear_pref(int mode, int n, int oversub, size_t block)
{
    return block <= SC_OSU_LINEAR_MAX && coh_bar_lead_pref(mode, n, oversub);
}
int coh_sc_after_barrier_linear(const cohort_group *g, const coh_call *c)
{
    return follows_barrier(g, c, COH_COLL_SCATTER) &&
           coh_sc_after_barrier_linear_pref(oversub_mode(g), g->size, g->oversub, bytes_of(c));
}
static int ag_bruck_pref(const cohort_group *g, const coh_call *c)
{
    return bytes_of(c) * (size_t)g->size <= AG_BRUCK_MAX;
}
/* Small blocks: the tree's log(n) messages at the root beat n-1; large
 * ones: the linear form avoids the tree's intermediate copies. */
static int gs_tree_pref(const cohort_group *g, const coh_call *c)
{
    (void)g;
    return bytes_of(c) <= GS_TREE_MAX;
}

/* ---- message algorithms over all ranks ---- */

/* all_reduce variants start from recv holding this rank's input */
static void ar_prepare(coh_call *c)
{
    if (c->send != c->recv)
        memmove(c->recv, c->send, bytes_of(c));
}

static cohort_status run_ar_ring(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    /* no prepare copy: the ring reads the input from send */
    return coh_ring_all_reduce(g, c, &v, c->send, c->recv, c->count, 0, coh_avg_div(g, c));
}
static cohort_status run_ar_direct(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    /* no prepare copy: the reduce-scatter reads the input from send */
    return coh_direct_all_reduce(g, c, &v, c->send, c->recv, c->count, 0);
}
static cohort_status run_ar_rd(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    ar_prepare(c);
    return coh_rd_all_reduce(g, c, &v, c->recv, c->count, 0, coh_avg_div(g, c));
}
static cohort_status run_ar_rab(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    ar_prepare(c);
    return coh_rab_all_reduce(g, c, &v, c->recv, c->count, 0, coh_avg_div(g, c));
}

static cohort_status run_bc_tree(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    if (coh_bc_after_barrier_flat(g, c))
        return coh_flat_broadcast(g, c, &v, bcast_buf(c), bytes_of(c), c->root, 0);
    /* A relay (n >= 4) whose batch still sends to its children reads its
     * parent's next piece, or next call, early: parked in the kernel, not
     * stashed (a fresh allocation and a second copy). 4 ranks on 2 cores,
     * paired, LOADED: x0.84-0.92 at 64-512 KiB (docs/performance.md, "TCP 4
     * ranks on 2 cores: broadcast >= 16 MiB against Gloo"). The tree is
     * acyclic, so no rank's send waits on a parked message of its own. */
    g->park_ahead = g->size >= 4;
    cohort_status st = coh_tree_broadcast(g, c, &v, bcast_buf(c), bytes_of(c), c->root, 0);
    g->park_ahead = 0;
    return st;
}

static cohort_status run_bc_tree_rdv(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    return coh_tree_broadcast_rdv(g, c, &v, bcast_buf(c), bytes_of(c), c->root, 0);
}

static cohort_status run_bc_flat(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    return coh_flat_broadcast(g, c, &v, bcast_buf(c), bytes_of(c), c->root, 0);
}

static cohort_status run_bc_coarse(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    /* A relay's batch that only sends still sees its parent's next piece
     * (or next call) arrive: park it rather than stash it. */
    g->park_ahead = 1;
    cohort_status st = coh_tree_broadcast_pieces(g, c, &v, bcast_buf(c), bytes_of(c), c->root, 0,
                                                 BC_COARSE_PIECES);
    g->park_ahead = 0;
    return st;
}

static cohort_status run_bc_hostflat(cohort_group *g, coh_call *c)
{
    return coh_hostflat_broadcast(g, c, bcast_buf(c), bytes_of(c), c->root, 0);
}

static cohort_status run_bc_sag(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    return coh_sag_broadcast(g, c, &v, bcast_buf(c), bytes_of(c), c->root, 0);
}

static cohort_status run_red_tree(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    size_t bytes = bytes_of(c);
    if (g->rank == c->root) {
        if (c->send != c->recv)
            memmove(c->recv, c->send, bytes);
        return coh_tree_reduce(g, c, &v, c->recv, c->count, c->root, 0, coh_avg_div(g, c));
    }
    /* the tree keeps partial sums in its accumulator: never in send */
    void *acc = coh_coll_alloc(g, c, bytes, "reduce accumulator");
    if (!acc)
        return COHORT_ERR_NOMEM;
    memcpy(acc, c->send, bytes);
    cohort_status st = coh_tree_reduce(g, c, &v, acc, c->count, c->root, 0, coh_avg_div(g, c));
    coh_coll_free(acc, bytes);
    return st;
}

/* reduce: the direct reduce-scatter and a gather of the blocks to the
 * root; non-roots fold their block into scratch (never into send) */
static cohort_status run_red_direct(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    if (g->rank == c->root)
        return coh_direct_reduce(g, c, &v, c->send, c->recv, c->count, c->root, 0);
    size_t bytes = bytes_of(c);
    void *acc = coh_coll_alloc(g, c, bytes, "reduce blocks");
    if (!acc)
        return COHORT_ERR_NOMEM;
    cohort_status st = coh_direct_reduce(g, c, &v, c->send, acc, c->count, c->root, 0);
    coh_coll_free(acc, bytes);
    return st;
}

/* The rank's own block of an all_gather/gather: in place (send == recv, as
 * MPI_IN_PLACE) it is already in its slot of recv. Passing the slot itself
 * as send (NCCL's convention) works too. */
static const void *own_block(const cohort_group *g, const coh_call *c)
{
    return c->send == c->recv ? (const char *)c->recv + (size_t)g->rank * bytes_of(c) : c->send;
}

/* all_gather: put this rank's block in place first */
static void ag_prepare(cohort_group *g, coh_call *c)
{
    size_t B = bytes_of(c);
    char *mine = (char *)c->recv + (size_t)g->rank * B;
    if (own_block(g, c) != mine)
        memmove(mine, c->send, B);
}
static cohort_status run_ag_ring(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    ag_prepare(g, c);
    return coh_ring_all_gather(g, c, &v, c->recv, bytes_of(c) * (size_t)g->size, NULL, NULL, 0);
}
static cohort_status run_ag_bruck(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    ag_prepare(g, c);
    return coh_bruck_all_gather(g, c, &v, c->recv, bytes_of(c), 0);
}

/* The root waits on every leaf at once; a leaf whose block is in already
 * sends its next call's, which would be stashed (a fresh allocation and a
 * second copy of every byte): parked in the kernel instead, then read
 * straight into the next call's buffer. 4 ranks on 2 cpus over TCP, back
 * to back, 3 rounds: 256 KiB-16 MiB x0.52-0.54 of the mean, p99 1 MiB
 * 5.8 -> 1.6 ms; OSU style (no run-ahead) x0.95-1.10
 * (bench/compare/results/2026-12-06-s34-park-gather). The tree reduce's
 * relays lost with it (64 KiB-4 MiB x1.15-1.52): not there. Acyclic: no
 * leaf's send waits on a message parked at a rank it waits for. */
static cohort_status run_ga_linear(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    g->park_ahead = 1;
    cohort_status st =
        coh_linear_gather(g, c, &v, own_block(g, c), c->recv, bytes_of(c), c->root, 0);
    g->park_ahead = 0;
    return st;
}
static cohort_status run_ga_tree(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    return coh_tree_gather(g, c, &v, own_block(g, c), c->recv, bytes_of(c), c->root, 0);
}
static cohort_status run_sc_linear(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    return coh_linear_scatter(g, c, &v, c->send, c->recv, bytes_of(c), c->root, 0);
}
static cohort_status run_sc_tree(cohort_group *g, coh_call *c)
{
    if (coh_sc_after_barrier_linear(g, c))
        return run_sc_linear(g, c);
    coh_view v = whole(g);
    return coh_tree_scatter(g, c, &v, c->send, c->recv, bytes_of(c), c->root, 0);
}

/* reduce_scatter: the input is size*count; the ring's partial sums go to
 * recv itself when the call is in place (send == recv), else to scratch;
 * the result goes to recv[0, count). */
static cohort_status rs_run(cohort_group *g, coh_call *c, int direct)
{
    coh_view v = whole(g);
    size_t B = bytes_of(c), total = B * (size_t)g->size;
    char *work = c->recv;
    if (c->send != c->recv) {
        work = coh_coll_alloc(g, c, total, "reduce_scatter partial sums");
        if (!work)
            return COHORT_ERR_NOMEM;
    }
    size_t count = c->count * (size_t)g->size;
    cohort_status st =
        direct ? coh_direct_reduce_scatter(g, c, &v, c->send, work, count, NULL, NULL, 0)
               : coh_ring_reduce_scatter(g, c, &v, c->send, work, count, NULL, NULL, 0,
                                         coh_avg_div(g, c));
    if (st == COHORT_OK)
        memmove(c->recv, work + (size_t)g->rank * B, B);
    if (work != c->recv)
        coh_coll_free(work, total);
    return st;
}

static cohort_status run_rs_ring(cohort_group *g, coh_call *c) { return rs_run(g, c, 0); }
static cohort_status run_rs_direct(cohort_group *g, coh_call *c) { return rs_run(g, c, 1); }

static cohort_status run_a2a_pairwise(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    return coh_pairwise_all_to_all(g, c, &v, c->send, c->recv, bytes_of(c), 0);
}

static cohort_status run_bar_dissem(cohort_group *g, coh_call *c)
{
    coh_view v = whole(g);
    int lead = coh_bar_leader(g, c);
    if (lead >= 0)
        return coh_lead_barrier(g, c, &v, lead, 0);
    return coh_dissemination_ack(g, c, &v, 0, coh_bar_ack_from(g, c));
}

/* ---- shm: every rank on this host's segment ---- */

/* The shm rows of the lane kinds (broadcast, scatter, gather, reduce,
 * all_reduce): coll/lane.h, shared with the engine's direct lane. */
/* In place, the shm all_gather/gather get the rank's own slot as send. */
static cohort_status run_ag_shm(cohort_group *g, coh_call *c)
{
    return coh_coll_tp->shm_all_gather(g->shm, c, own_block(g, c), c->recv, bytes_of(c));
}
static cohort_status run_rs_shm(cohort_group *g, coh_call *c)
{
    coh_call tmp;
    cohort_status st;
    const coh_call *rc = coh_shm_sum_call(g, c, &tmp, &st);
    return st ? st : coh_coll_tp->shm_reduce_scatter(g->shm, rc, c->send, c->recv, c->count);
}
static cohort_status run_a2a_shm(cohort_group *g, coh_call *c)
{
    return coh_coll_tp->shm_all_to_all(g->shm, c, c->send, c->recv, bytes_of(c));
}
static cohort_status run_bar_shm(cohort_group *g, coh_call *c)
{
    return coh_coll_tp->shm_barrier(g->shm, c);
}

/* The direct lane's kinds: their shm rows, whose run reads of the group
 * only g->shm and the root's local index (select.c, lane_decide). */
int coh_algo_lane(const coh_algo *a)
{
    return a->run == coh_lane_bc_shm || a->run == coh_lane_sc_shm || a->run == coh_lane_ga_shm ||
           a->run == coh_lane_red_shm || a->run == coh_lane_ar_shm;
}

/* hier.c */
cohort_status coh_hier_all_reduce(cohort_group *g, coh_call *c);
cohort_status coh_hier_broadcast(cohort_group *g, coh_call *c);
cohort_status coh_hier_reduce(cohort_group *g, coh_call *c);
cohort_status coh_hier_all_gather(cohort_group *g, coh_call *c);
cohort_status coh_hier_reduce_scatter(cohort_group *g, coh_call *c);
cohort_status coh_hier_barrier(cohort_group *g, coh_call *c);

#define A(nm, coll, sup, pref, fn) {nm, coll, sup, pref, fn, 0}
/* divides an AVG itself (coh_avg_folds): folds every rank's contribution
 * at once (a half type in float32), or divides each block's whole sum */
#define AF(nm, coll, sup, pref, fn) {nm, coll, sup, pref, fn, 1}
const coh_algo coh_algo_table[] = {
    AF("shm", COH_COLL_ALL_REDUCE, shm_ok, always, coh_lane_ar_shm),
    AF("hier", COH_COLL_ALL_REDUCE, hier_ok, always, coh_hier_all_reduce),
    AF("direct", COH_COLL_ALL_REDUCE, msg_ok, direct_pref, run_ar_direct),
    AF("rd", COH_COLL_ALL_REDUCE, msg_ok, ar_rd_pref, run_ar_rd),
    AF("rabenseifner", COH_COLL_ALL_REDUCE, msg_ok, ar_rab_pref, run_ar_rab),
    AF("ring", COH_COLL_ALL_REDUCE, msg_ok, always, run_ar_ring),

    A("shm", COH_COLL_BROADCAST, shm_ok, always, coh_lane_bc_shm),
    A("hier", COH_COLL_BROADCAST, hier_ok, always, coh_hier_broadcast),
    A("tree_coarse", COH_COLL_BROADCAST, msg_ok, bc_coarse_pref, run_bc_coarse),
    A("flat", COH_COLL_BROADCAST, msg_ok, bc_flat_pref, run_bc_flat),
    A("host_flat", COH_COLL_BROADCAST, msg_ok, bc_hostflat_pref, run_bc_hostflat),
    A("tree_rdv", COH_COLL_BROADCAST, msg_ok, bc_tree_rdv_pref, run_bc_tree_rdv),
    A("tree", COH_COLL_BROADCAST, msg_ok, bc_tree_pref, run_bc_tree),
    A("scatter_allgather", COH_COLL_BROADCAST, msg_ok, always, run_bc_sag),

    AF("shm", COH_COLL_REDUCE, shm_ok, always, coh_lane_red_shm),
    AF("hier", COH_COLL_REDUCE, hier_ok, always, coh_hier_reduce),
    AF("direct", COH_COLL_REDUCE, msg_ok, direct_pref, run_red_direct),
    AF("tree", COH_COLL_REDUCE, msg_ok, always, run_red_tree),

    A("shm", COH_COLL_ALL_GATHER, shm_ok, always, run_ag_shm),
    A("hier", COH_COLL_ALL_GATHER, hier_ok, always, coh_hier_all_gather),
    A("bruck", COH_COLL_ALL_GATHER, msg_ok, ag_bruck_pref, run_ag_bruck),
    A("ring", COH_COLL_ALL_GATHER, msg_ok, always, run_ag_ring),

    A("shm", COH_COLL_GATHER, shm_ok, always, coh_lane_ga_shm),
    A("tree", COH_COLL_GATHER, msg_ok, gs_tree_pref, run_ga_tree),
    A("linear", COH_COLL_GATHER, msg_ok, always, run_ga_linear),

    A("shm", COH_COLL_SCATTER, shm_ok, always, coh_lane_sc_shm),
    A("tree", COH_COLL_SCATTER, msg_ok, gs_tree_pref, run_sc_tree),
    A("linear", COH_COLL_SCATTER, msg_ok, always, run_sc_linear),

    AF("shm", COH_COLL_REDUCE_SCATTER, shm_ok, always, run_rs_shm),
    AF("hier", COH_COLL_REDUCE_SCATTER, hier_ok, always, coh_hier_reduce_scatter),
    AF("direct", COH_COLL_REDUCE_SCATTER, msg_ok, rs_direct_pref, run_rs_direct),
    AF("ring", COH_COLL_REDUCE_SCATTER, msg_ok, always, run_rs_ring),

    A("shm", COH_COLL_ALL_TO_ALL, shm_ok, always, run_a2a_shm),
    A("pairwise", COH_COLL_ALL_TO_ALL, msg_ok, always, run_a2a_pairwise),

    A("shm", COH_COLL_BARRIER, shm_ok, always, run_bar_shm),
    A("hier", COH_COLL_BARRIER, hier_ok, always, coh_hier_barrier),
    A("dissemination", COH_COLL_BARRIER, msg_ok, always, run_bar_dissem),

    {NULL, 0, NULL, NULL, NULL, 0},
};

cohort_status coh_coll_sync(cohort_group *g, coh_call *c)
{
    if (coh_topo_single_host_shm(g))
        return run_bar_shm(g, c);
    if (hier_ok(g, c))
        return coh_hier_barrier(g, c);
    return run_bar_dissem(g, c);
}
