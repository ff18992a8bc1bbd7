/*
 * coll_int.h - private to src/coll: the partition arithmetic every
 * algorithm shares (pure functions, unit-tested in tests/coll), the views
 * algorithms run over, the transport seam, and the algorithm entry points.
 *
 * Step numbers: every message of one call carries a step number that the
 * sender and the receiver compute independently from the contract (count,
 * dtype, size, root) and the topology, so the transport's exact header
 * comparison also checks that both sides are at the same point of the same
 * algorithm. Within one call, the messages one rank receives all have
 * distinct step numbers, and so do the messages it sends to any one peer.
 */
#ifndef COH_COLL_INT_H
#define COH_COLL_INT_H

#include <stddef.h>
#include <stdint.h>

#include "coll/coll.h"
#include "coll/shm/shm_coll.h"
#include "core/group.h"
#include "reduce/reduce.h"
#include "transport/shm/shm.h"
#include "transport/tcp/tcp.h"

/* ---- transport seam ------------------------------------------------------
 * Every algorithm reaches the transports through this table. The default
 * points at the real coh_net_xfer / coh_shm_*; tests/coll's in-process
 * harness swaps in a fake so that algorithms, including hierarchical ones
 * over several simulated hosts, run as threads. Not for production use. */
typedef struct coh_coll_transport {
    cohort_status (*xfer)(struct coh_net *n, const coh_call *c, coh_xfer *ops, int nops);
    cohort_status (*shm_all_reduce)(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                    size_t count);
    cohort_status (*shm_reduce)(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                size_t count, int root);
    cohort_status (*shm_broadcast)(coh_shm *s, const coh_call *c, void *buf, size_t bytes,
                                   int root);
    cohort_status (*shm_all_gather)(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                    size_t bytes_per_rank);
    cohort_status (*shm_gather)(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                size_t bytes_per_rank, int root);
    cohort_status (*shm_scatter)(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t bytes_per_rank, int root);
    cohort_status (*shm_reduce_scatter)(coh_shm *s, const coh_call *c, const void *send,
                                        void *recv, size_t count_per_rank);
    cohort_status (*shm_all_to_all)(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                    size_t bytes_per_peer);
    cohort_status (*shm_barrier)(coh_shm *s, const coh_call *c);
} coh_coll_transport;

/* NULL restores the real transports. Call only while no collective runs. */
void coh_coll_set_transport(const coh_coll_transport *t);
extern const coh_coll_transport *coh_coll_tp;

/* ---- views -----------------------------------------------------------------
 * Message algorithms run over a view: n members, this rank's index me, and
 * the group rank of each member (ranks == NULL: member i is group rank i).
 * Hierarchical algorithms run the same code over one rank per host. */
typedef struct coh_view {
    int n, me;
    const int *ranks;
} coh_view;

static inline int coh_view_rank(const coh_view *v, int i) { return v->ranks ? v->ranks[i] : i; }
static inline int coh_mod(int a, int n) { return ((a % n) + n) % n; }

/* ---- partition arithmetic (plan.c; pure) ---------------------------------- */

/* count elements split into n blocks, the first count % n one longer. */
size_t coh_blk_off(size_t count, int n, int b);
size_t coh_blk_len(size_t count, int n, int b);

/* Pieces of a len-element message cut at chunk elements (0 for len 0). */
static inline size_t coh_npieces(size_t len, size_t chunk)
{
    return len ? (len + chunk - 1) / chunk : 0;
}

/* Elements per pipeline piece for a call: COHORT_CHUNK_BYTES / es, at least
 * 1, and large enough that `rounds` rounds of at most max_len-element
 * messages keep every step number below 2^32 (rounds * pieces). */
size_t coh_chunk_elems(size_t chunk_bytes, size_t es, size_t max_len, int rounds);

/* A tree broadcast over 2 members has no relay, so its pieces pipeline
 * nothing. Up to COH_BC_ONE_PIECE_MAX bytes it goes as one piece. Above
 * COH_BC_GATE_MIN, as Open MPI's ob1 over its tcp BTL (one writev of the
 * whole rest after the receiver's ACK): a first piece of COH_BC_EAGER_BYTES,
 * then the rest as one piece once the leaf has said it entered the call
 * (the tree_rdv gate), so the root never runs a whole large message ahead
 * of its leaf. Between the two the even pieces stay: one piece of 2 MiB
 * had a p99 ~2x its p50 quietly, the gate cost 2 MiB's p50 x1.1-1.24
 * (docs/performance.md, "TCP 2-rank broadcast 1-16 MiB"). Above
 * COH_BC_GATE_MAX the even pieces come back: quietly the gated single piece
 * lost at 16 MiB (x1.04 back to back, x1.15 OSU, 0 of 6 rounds) while it
 * won up to 8 MiB (x0.86-0.95, 5-6 of 6) and split at 12 MiB. */
#define COH_BC_ONE_PIECE_MAX ((size_t)1 << 20)
#define COH_BC_GATE_MIN ((size_t)2 << 20)
#define COH_BC_GATE_MAX ((size_t)8 << 20)
#define COH_BC_EAGER_BYTES ((size_t)64 << 10)

/* How a tree broadcast cuts its message: piece 0 is `first` bytes, the
 * others `piece` bytes (the last one shorter); rdv: piece 1 waits for the
 * child's "entered" message. */
typedef struct coh_bc_plan {
    size_t first, piece;
    int rdv;
} coh_bc_plan;

/* The plan of a tree broadcast of `bytes` over n members with pipeline
 * piece chunk_bytes; rdv_forced: tree_rdv. With 2 members, no tree_rdv and
 * COHORT_CHUNK_BYTES not set (chunk_set == 0; a set value always wins, with
 * even pieces and no gate): one piece up to COH_BC_ONE_PIECE_MAX, above
 * COH_BC_GATE_MIN COH_BC_EAGER_BYTES then the rest, gated. Otherwise even
 * pieces of coh_chunk_elems(chunk_bytes, 1, bytes, 32), gated for tree_rdv. */
coh_bc_plan coh_tree_bcast_plan(size_t chunk_bytes, int chunk_set, int n, int rdv_forced,
                                size_t bytes);
/* Pieces of that plan (0 for 0 bytes). */
size_t coh_bc_plan_pieces(const coh_bc_plan *p, size_t bytes);

/* Largest power of two <= n (n >= 1). */
int coh_pof2(int n);
/* Non-power-of-two fold used by recursive doubling and halving: with
 * p = coh_pof2(n) and extra = n - p, each even rank below 2*extra hands its
 * data to the odd rank above it and sits the core rounds out. Returns the
 * virtual rank (0..p-1) of r, or -1 if r sits out. */
int coh_fold_vrank(int r, int n);
/* The real rank of virtual rank v. */
int coh_fold_real(int v, int n);

/* Recursive halving over p (a power of two) blocks: the window
 * [*lo, *hi) of blocks that virtual rank v still owns after `round` rounds
 * (round 0: all p blocks; round log2(p): block v alone). In round k the
 * partner is v ^ (p >> (k + 1)). */
void coh_rh_window(int v, int p, int round, int *lo, int *hi);

/* Binomial tree over n relative ranks rooted at 0: parent of vr (-1 for
 * the root), the children in increasing distance order (returns how many;
 * out needs room for 32), and the size of vr's subtree, which is the
 * contiguous range [vr, vr + size). The link from vr to child vr + 2^k is
 * level k. */
int coh_tree_parent(int vr, int n);
int coh_tree_children(int vr, int n, int *out);
int coh_tree_subtree(int vr, int n);
int coh_ilog2(unsigned v); /* floor(log2(v)), v >= 1 */

/* Bruck all_gather round k (distance 2^k): how many blocks are exchanged. */
static inline int coh_bruck_blocks(int n, int k)
{
    int d = 1 << k;
    return d < n - d ? d : n - d;
}
/* ceil(log2(n)) for n >= 1. */
int coh_clog2(int n);

/* ---- message helpers (msg.c) -------------------------------------------------- */

/* Fills one send / receive of a batch with the call's contract. */
void coh_xf_send(coh_xfer *x, const cohort_group *g, const coh_call *c, int peer, uint32_t step,
                 const void *buf, size_t len);
void coh_xf_recv(coh_xfer *x, const cohort_group *g, const coh_call *c, int peer, uint32_t step,
                 void *buf, size_t len);
/* Runs a batch (nops may be 0: no-op). */
cohort_status coh_xf_run(cohort_group *g, const coh_call *c, coh_xfer *ops, int nops);
/* The contract to hand a shm reduction: c itself, or for AVG a copy with
 * SUM (after a shm barrier that checks c itself), so that the division is
 * done once, by coh_coll_run, over the whole group. */
static inline const coh_call *coh_shm_sum_call(cohort_group *g, const coh_call *c, coh_call *tmp,
                                               cohort_status *st)
{
    /* The segment divides an AVG itself only when it holds the whole
     * group, else reduces it as SUM and leaves the division to
     * coh_coll_run (once, by the group size: coll/shm/shm_coll.h), so the
     * call goes through unchanged - its contract, AVG included, is what
     * the local ranks compare. Inline: a call per small all_reduce. */
    (void)g, (void)tmp;
    *st = COHORT_OK;
    return c;
}
/* Scratch allocation that fails the group (NOMEM, naming the call) on
 * failure, so that peers waiting for this rank are told at once. Large
 * buffers are reused from a per-thread cache; give them back with
 * coh_coll_free and the size they were asked with. */
void *coh_coll_alloc(cohort_group *g, const coh_call *c, size_t bytes, const char *what);
void coh_coll_free(void *p, size_t bytes);

/* ---- message algorithms over a view (ring.c, rd.c, tree.c) --------------------
 * Buffers are element arrays of the call's dtype unless named in bytes.
 * step_base offsets every step number so that one call can run several
 * phases over the same connections. Each returns after the last message. */

/* All-reduce in place on buf (count elements). The ring reads this rank's
 * input from src (which may be buf) and writes every element of buf, so an
 * out-of-place call needs no copy first. avg_div > 1 (an AVG over the
 * whole group: the group size) divides each block at its last fold;
 * 0 leaves AVG summed. */
cohort_status coh_ring_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                  const void *src, void *buf, size_t count, uint32_t step_base,
                                  int avg_div);
cohort_status coh_rd_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                size_t count, uint32_t step_base, int avg_div);
cohort_status coh_rab_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                 size_t count, uint32_t step_base, int avg_div);

/* Reduce-scatter of src into buf, split in v->n blocks (boff/blen
 * elements, or NULL: coh_blk_* of count): member i ends with block i
 * reduced in buf. src may be buf; otherwise buf is scratch the ring fills
 * (only the blocks it reduces are written). */
cohort_status coh_ring_reduce_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                                      const void *src, void *buf, size_t count,
                                      const size_t *boff, const size_t *blen, uint32_t step_base,
                                      int avg_div);
/* The same two with a direct reduce-scatter (ring.c): every member folds
 * the n contributions to its block once, in member order, with
 * coh_reduce_multi (float16/bfloat16: float32 accumulation, one rounding;
 * the shm transport's fold). Same volume as the ring; n-1 concurrent
 * messages per piece. */
cohort_status coh_direct_all_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                    const void *src, void *buf, size_t count, uint32_t step_base);
/* Reduce to member root: the direct reduce-scatter, then the blocks go to
 * root. buf (count elements) holds the result on root, is scratch elsewhere. */
cohort_status coh_direct_reduce(cohort_group *g, const coh_call *c, const coh_view *v,
                                const void *src, void *buf, size_t count, int root,
                                uint32_t step_base);
cohort_status coh_direct_reduce_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                                        const void *src, void *buf, size_t count,
                                        const size_t *boff, const size_t *blen,
                                        uint32_t step_base);
/* All-gather in place on buf: member i's block is already in place on
 * member i. Blocks: byte offsets/lengths, or NULL: the even split of total
 * bytes over n (coh_blk_*). */
cohort_status coh_ring_all_gather(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                  size_t total, const size_t *boff, const size_t *blen,
                                  uint32_t step_base);
/* Bruck all-gather: equal blocks of `bytes`; buf holds n blocks, member i's
 * own block already at i. */
cohort_status coh_bruck_all_gather(cohort_group *g, const coh_call *c, const coh_view *v,
                                   void *buf, size_t bytes, uint32_t step_base);

/* Binomial broadcast of bytes from member root. */
cohort_status coh_tree_broadcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                 size_t bytes, int root, uint32_t step_base);
/* The same with a rendezvous: a parent sends piece 1 on only once the child
 * has said (an empty message) that it entered the call. */
cohort_status coh_tree_broadcast_rdv(cohort_group *g, const coh_call *c, const coh_view *v,
                                     void *buf, size_t bytes, int root, uint32_t step_base);
/* The binomial tree in `pieces` pieces of ceil(bytes / pieces) (not
 * COHORT_CHUNK_BYTES). */
cohort_status coh_tree_broadcast_pieces(cohort_group *g, const coh_call *c, const coh_view *v,
                                        void *buf, size_t bytes, int root, uint32_t step_base,
                                        size_t pieces);
/* Flat broadcast: the root sends all of buf to every member in one batch. */
cohort_status coh_flat_broadcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                 size_t bytes, int root, uint32_t step_base);
cohort_status coh_hostflat_broadcast(cohort_group *g, const coh_call *c, void *buf, size_t bytes,
                                     int root, uint32_t step_base);
/* Scatter + ring all-gather broadcast (large messages, n >= 4). */
cohort_status coh_sag_broadcast(cohort_group *g, const coh_call *c, const coh_view *v, void *buf,
                                size_t bytes, int root, uint32_t step_base);
/* The divisor an algorithm reducing over the whole group (or over host
 * representatives holding their hosts' sums) applies to an AVG where its sum
 * becomes whole: the group size for a float AVG (coh_avg_folds), else 0 -
 * nothing to divide. The views it is given have two members or more (a
 * one-rank group never reaches an algorithm, a hier view has a member per
 * host and hier runs on several hosts only). */
static inline int coh_avg_div(const cohort_group *g, const coh_call *c)
{
    return coh_avg_folds(c->dtype, c->redop) ? g->size : 0;
}

/* Binomial reduce of count elements to member root: acc is the input on
 * every member (it is overwritten: it holds partial results), and the
 * result on root. avg_div > 1: an AVG whose sum over v is the group's; the
 * root divides each piece by it once the piece's last child is folded in
 * (coh_reduce_finish, the bits of the pass after the call); 0: summed. */
cohort_status coh_tree_reduce(cohort_group *g, const coh_call *c, const coh_view *v, void *acc,
                              size_t count, int root, uint32_t step_base, int avg_div);
/* Dissemination barrier (zero-byte messages carrying the contract). */
cohort_status coh_dissemination(cohort_group *g, const coh_call *c, const coh_view *v,
                                uint32_t step_base);
/* The same; ack_from >= 0 (a group rank): the receive from it sets ack_now
 * (transport.h), -1 none. */
cohort_status coh_dissemination_ack(cohort_group *g, const coh_call *c, const coh_view *v,
                                    uint32_t step_base, int ack_from);
/* The barrier that directly follows a broadcast when the ranks outnumber
 * the cpus (OSU loops): led by that broadcast's root, which leaves first.
 * coh_bar_leader: the leader for barrier c, or -1 (the dissemination
 * barrier); coh_bar_lead_pref: the rule behind it (mode: COHORT_TCP_OVERSUB,
 * -1 auto; oversub: g->oversub, some machine's ranks outnumber its cpus;
 * coll.h, since the rendezvous compares it between ranks).
 * coh_lead_barrier: every member sends at entry (the contract
 * meets every rank's call), the leader releases the others once all
 * arrived. */
int coh_bar_leader(const cohort_group *g, const coh_call *c);
cohort_status coh_lead_barrier(cohort_group *g, const coh_call *c, const coh_view *v, int lead,
                               uint32_t step_base);
int coh_bar_lead_env(void);
/* 2 ranks on one machine over tcp, the barrier that directly follows a
 * broadcast: the broadcast's receiver flushes the acknowledgment it owes
 * the root when the barrier completes (ack_now), so the next broadcast's
 * receive does not send it. coh_bar_ack_pref: the rule (n ranks,
 * machine_size: ranks on this rank's machine); coh_bar_ack_from: the rank
 * whose ACK this rank flushes in barrier c, or -1. */
int coh_bar_ack_pref(int n, int machine_size);
int coh_bar_ack_from(const cohort_group *g, const coh_call *c);
/* A broadcast of <= 16 KiB that directly follows a barrier, same rule:
 * flat instead of the tree, unless COHORT_ALGO_BROADCAST forces one. */
int coh_bc_after_barrier_flat_pref(int mode, int n, int oversub, size_t bytes);
int coh_bc_after_barrier_flat(const cohort_group *g, const coh_call *c);
int coh_sc_after_barrier_linear_pref(int mode, int n, int oversub, size_t block);
int coh_sc_after_barrier_linear(const cohort_group *g, const coh_call *c);

/* Per-rank blocks of B bytes (perrank.c). Gather: send is the rank's own
 * block (callers resolve in place to its slot of recv), recv (n*B) on root
 * only. Scatter: send (n*B) on root only; the root's own block goes to
 * recv (which may be send itself or the block's own slot). */
cohort_status coh_linear_gather(cohort_group *g, const coh_call *c, const coh_view *v,
                                const void *send, void *recv, size_t B, int root,
                                uint32_t step_base);
cohort_status coh_linear_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                                 const void *send, void *recv, size_t B, int root,
                                 uint32_t step_base);
cohort_status coh_tree_gather(cohort_group *g, const coh_call *c, const coh_view *v,
                              const void *send, void *recv, size_t B, int root,
                              uint32_t step_base);
cohort_status coh_tree_scatter(cohort_group *g, const coh_call *c, const coh_view *v,
                               const void *send, void *recv, size_t B, int root,
                               uint32_t step_base);
cohort_status coh_pairwise_all_to_all(cohort_group *g, const coh_call *c, const coh_view *v,
                                      const void *send, void *recv, size_t B,
                                      uint32_t step_base);
/* send/recv: one message with a COH_MSG_P2P header. */
cohort_status coh_p2p(cohort_group *g, coh_call *c);

/* "all_reduce" etc. for messages (coh_coll_name lives in src/group). */
const char *coh_coll_label(int coll);

/* ---- the algorithm table (algos.c, shm_algo.c, hier.c) ------------------------ */
extern const coh_algo coh_algo_table[];

/* Topology predicates the table uses; deterministic across ranks. */
int coh_topo_single_host_shm(const cohort_group *g); /* every rank on one host, shm */
int coh_algo_lane(const coh_algo *a); /* a shm row the direct lane may run (algos.c) */
int coh_topo_hier(const cohort_group *g);            /* several hosts, some with >1 rank */

/* Broadcast crossover shared with the hierarchical algorithms: 1 if the
 * binomial tree should carry bytes over n members. */
int coh_bc_tree_pref(int n, size_t bytes);
int coh_bc_flat_pref(int n, int n_hosts, long cpus, size_t bytes);
int coh_bc_hostflat_pref(int n, int n_hosts, size_t bytes);
int coh_bc_coarse_pref(int n, int n_hosts, long cpus, size_t bytes);
int coh_rs_direct_pref(int n, int n_hosts, long cpus, size_t input_bytes);

/* Zero-count calls and barrier-like syncs: the cheapest pattern for the
 * topology that still carries c's contract between all ranks. */
cohort_status coh_coll_sync(cohort_group *g, coh_call *c);

#endif
