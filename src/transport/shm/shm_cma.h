/*
 * shm_cma.h - single copy between the local ranks of a segment: a rank reads
 * a peer's buffer straight from the peer's memory (process_vm_readv, "cross
 * memory attach"), one copy instead of two through the segment.
 *
 * Whether it works is probed at attach, by really reading a word of every
 * peer's private memory (ptrace access rules: Yama's ptrace_scope, uids,
 * dumpability, seccomp, pid namespaces all decide), and the local ranks
 * agree: single copy is used only if every rank could read every other and
 * every rank asked for it (COHORT_SHM_SINGLE_COPY=on) or, in =auto (the
 * default), the kernel's copy measured at attach (at 64 KiB and 256 KiB)
 * is fast enough to win at the call's size (on the development VM it is
 * ~3.5-5x slower than memcpy at both, so auto keeps two copies there;
 * docs/shm.md), or the 2 local ranks run apart: each bound to a cpu of its
 * own, or both unbound on a machine whose ranks have a cpu each (then the
 * kernel's copy, split over both cores or done by each rank at once, beats
 * two copies that move every line between the cores: broadcast, all_gather,
 * gather, scatter and all_to_all, each from its own size). =off skips the
 * probe; =probe-fail
 * makes the probe read an unmapped address (tests of the fallback);
 * COHORT_SHM_SINGLE_COPY_BYTES
 * (default 65536, the lead's value rules; the apart rule's own sizes when
 * unset) is the smallest call that uses it.
 * The copy path chosen, and why, is in s->copy_info.
 */
#ifndef COH_SHM_CMA_H
#define COH_SHM_CMA_H

#include "transport/shm/shm_seg.h"

/* Bytes of the speed probe's copies (process_vm_readv vs memcpy), at two
 * sizes: auto's rule is per call size, the crossover found between them. */
#define SHM_CMA_PROBE_BYTES ((size_t)256 << 10)
#define SHM_CMA_PROBE_SMALL ((size_t)64 << 10)

/* Before the attach barrier: publish my probe word and speed-probe buffer. */
void shm_cma_publish(coh_shm *s);
/* Frees the speed-probe buffer (after the agreement; cleanup). */
void shm_cma_release(coh_shm *s);
/* After the attach barrier and the pidfds: probe every peer, publish my
 * verdict, meet the others (one more barrier phase), set s->cma. */
cohort_status shm_cma_agree(shm_op *o);
/* auto's per-size rule from the probe's times summed over the local ranks
 * (ns) at len_s and len bytes: single copy for calls of lo <= bytes < hi
 * (lo = SIZE_MAX, hi = 0: none), where 2 x the kernel's copy time <= 3 x
 * memcpy's, the crossing between the two sizes interpolated (rounded up
 * to a page). Integer arithmetic: the same on every rank. */
void shm_cma_size_rule(uint64_t sum_cma_s, uint64_t sum_cpy_s, uint64_t sum_cma,
                       uint64_t sum_cpy, uint64_t len_s, uint64_t len, size_t *lo, size_t *hi);

/* The probe's readings at attach, each rank's own: at each size the
 * median of this many, by the kernel's copy over memcpy's. */
#define SHM_CMA_PROBE_ROUNDS 3
/* Which of SHM_CMA_PROBE_ROUNDS readings (a[r] ns of the kernel's copy,
 * b[r] of memcpy's, each < 2^32) has the median ratio a / b; equal ratios
 * are ordered by reading. */
int shm_cma_median_round(const uint64_t *a, const uint64_t *b);

/* Copies len bytes at addr in local rank q's memory into dst. Any failure
 * (the peer exited: ESRCH or its pidfd readable afterwards; a bad address:
 * EFAULT) fails the group with a specific message - never partial data
 * reported as success. */
cohort_status shm_cma_read(shm_op *o, int q, void *dst, uint64_t addr, size_t len);

/* Copies len bytes from src into local rank q's memory at addr. Checks
 * first that q is alive (its pidfd), so a recycled pid is not written to. */
cohort_status shm_cma_write(shm_op *o, int q, uint64_t addr, const void *src, size_t len);

/* The cross-core probe of 2 ranks apart (shm_cma.c). shm_xc_flags: the
 * flags the lead adds to a single-copy descriptor of a call whose path
 * depends on how far apart the cpus are (SHM_XC_FAR or SHM_XC_NEAR: the
 * verdict of its last probe that measured, neither before the first;
 * SHM_XC_PROBE: a probe is due); 0 on the other rank and without
 * xc_adapt. shm_xc_probe: both ranks call it in the call whose OR'd
 * descriptor flags hold SHM_XC_PROBE; bounded (XC_LIMIT_NS), never fails
 * the call: the lead's xc_ns is the new round trip, unchanged when the
 * probe failed. Returns 1 measured (lead) or echoed; 0 the peer gave up first;
 * -1 the peer did not come in time (this rank gave up: the peer, if it
 * comes, returns 0 at once). */
enum { SHM_XC_FAR = 4u, SHM_XC_PROBE = 8u, SHM_XC_NEAR = 16u };
unsigned shm_xc_flags(coh_shm *s);
int shm_xc_probe(coh_shm *s);
/* Whether a call of coll moving bytes (as shm_cma_use counts them) takes
 * two copies when the cpus measured near (all_gather: in place only,
 * shm_coll.c ag_single, but for the blocks SHM_XC_AG_OOP_TO and
 * SHM_XC_AG_BIG name). */
int shm_xc_two_copies(const coh_shm *s, int coll, size_t bytes);
/* all_gather's blocks up to this size take two copies when near out of
 * place too; larger ones in place only (512 KiB-2 MiB). 2 ranks apart, the
 * AMD host, 4 rounds, p50 two copies / single copy out of place (session
 * 40, results/2026-12-07-s40-ag-near): near 8 KiB a block x0.46 both
 * modes, 16 KiB x0.91 back to back and x0.66 OSU style, 32 KiB x0.93-1.06;
 * far 8-32 KiB x0.87-2.90 (the single copy stays). Only where the
 * kernel's copy is dear (coh_shm.xc_ag_to, shm_cma_agree). */
#define SHM_XC_AG_OOP_TO ((size_t)16 << 10)
/* ... and from this size a block, in place or not, where the copy is dear
 * (shm_cma.c xc_two_big) */
#define SHM_XC_AG_BIG ((size_t)8 << 20)

/* Whether a call of `coll` moving `bytes` per rank block takes the single
 * copy: the same answer on every local rank once the contract check passed
 * (cma, cma_ops, cma_from and cma_to are agreed at attach). */
static inline int shm_cma_use(const coh_shm *s, int coll, size_t bytes)
{
    return s->cma && (s->cma_ops >> coll & 1u) && bytes >= s->cma_from[coll] &&
           bytes < s->cma_to[coll];
}

/* The ring's verdict (shm_cma.c "the ring's verdict"): 2 ranks apart
 * where the kernel's copy is dear, a broadcast, reduce or gather of at
 * least this many bytes (a block for gather and scatter) below its single
 * copy's own size takes the single copy back to back while the cpus
 * measure far (the ring near). */
#define SHM_XW_FROM ((size_t)8 << 10)
/* The verdict for call seq, both ranks the same: the first call in the
 * window at or after xw_at runs a probe with the peer first (out of line). */
int shm_xw_far(coh_shm *s, uint64_t seq);
/* The probe and its agreed outcome (tests call it directly). */
void shm_xw_probe(coh_shm *s, uint64_t seq);

/* The lead's timed verdict (shm_cma.c "the lead's timed verdict"): 3-4
 * ranks on 2 cpus, a broadcast, reduce or
 * all_to_all of at least ov_from[coll] bytes (all_to_all: a pair; all_reduce
 * has classes and a path through it, but no window: shm_cma_agree) takes the single copy or two copies as the lead's own calls of its
 * op and size time faster. shm_ov_enter: every local rank calls it once
 * per call of those ops, before the path forks (the public entry points:
 * every rank counts the same calls, whichever path it then takes); the
 * call that the agreed schedule names takes the next decision in it.
 * shm_ov_done: after the call, the lead keeps its time. */
void shm_ov_enter(coh_shm *s, const coh_call *c, int coll, size_t bytes);
void shm_ov_done(coh_shm *s, cohort_status st);
/* The decision itself (tests call it directly) */
void shm_ov_decide(coh_shm *s);
/* The class of a call in the window (0 .. SHM_OV_CLASSES - 1); a class's
 * op and its smallest size (the probe's rules at that size seed it) */
int shm_ov_class(int coll, size_t bytes);
int shm_ov_class_coll(int k);
size_t shm_ov_class_lo(int k);
/* Whether call i of a class (from 0, agreed) takes the other path */
int shm_ov_explore(uint32_t i);

/* The path of call c where the timed verdict rules: 1 single copy, 0 two
 * copies, -1 not in its window (the other rules decide). The same answer
 * on every local rank once shm_ov_enter ran for c. */
static inline int shm_ov_path(const coh_shm *s, const coh_call *c, int coll, size_t bytes)
{
    if (!s->ov || bytes < s->ov_from[coll])
        return -1;
    return c->seq == s->ov_seen && coll == s->ov_seen_coll ? s->ov_ans : -1;
}

/* shm_cma_use for call c of a rooted op the ring carries (broadcast,
 * reduce, gather, scatter): the sizes start at bar_from instead when c
 * directly follows a barrier. 2 ranks apart, those calls take the ring back
 * to back up to its slot and the single copy from 4 KiB (a block) right
 * after a barrier (shm_cma.c "ring first") - unless the lead's verdict in
 * that barrier said near (bar_near: the ring then too). c->seq is the same
 * on every rank whose calls agree, and bar_near is the lead's word every
 * rank read in the barrier, so they agree on the path; ranks whose calls
 * do not are told apart at the call that differs. Back to back, where the
 * kernel's copy is dear and the cpus are probed, the ring's verdict moves
 * calls from SHM_XW_FROM to the single copy while far: agreed by the
 * probe both ranks take in the same call (shm_xw_far). */
static inline int shm_cma_call(coh_shm *s, const coh_call *c, int coll, size_t bytes)
{
    if (bytes < s->bar_from[coll]) /* bar_from <= cma_from: a small call's one compare */
        return 0;
    int ov = shm_ov_path(s, c, coll, bytes);
    if (ov >= 0)
        return ov;
    size_t from = s->cma_from[coll];
    if (c->seq == s->bar_seq) {
        if (!s->bar_near)
            from = s->bar_from[coll];
    } else if (s->xw && bytes >= SHM_XW_FROM && bytes < from && s->cma &&
               (s->cma_ops >> coll & 1u) && shm_xw_far(s, c->seq)) {
        from = SHM_XW_FROM;
    }
    return s->cma && (s->cma_ops >> coll & 1u) && bytes >= from && bytes < s->cma_to[coll];
}

/* A broadcast above the ring's slot with ranks outnumbering cpus goes
 * through the ring in slot-sized pieces, one ring phase each, up to
 * SHM_PIECES_MAX pieces (128 KiB at the default slot) and a quarter of the
 * ring - two calls in flight and the one being written then fit in it
 * (docs/shm.md "Broadcast in ring pieces"): no rank waits for all the
 * others at the start, so a call does not need every rank on a cpu at
 * once. Above 8 pieces two copies win back to back (4 and 8 ranks on 2
 * cpus, 256 KiB-1 MiB: x1.25-1.6 in pieces). Returns the number of pieces,
 * 0 when the call goes another way. The same answer on every local rank:
 * oversub, ring_k, ring_bytes and the single-copy rule are agreed. Here
 * beside shm_cma_use, which it asks. */
#define SHM_PIECES_MAX 8u
static inline size_t shm_ring_pieces(const coh_shm *s, size_t bytes)
{
    /* the size first: one compare on a small broadcast's path */
    if (!s || bytes <= s->ring_bytes || !s->oversub || !s->ring_k || s->n < 2 ||
        bytes > COH_MIN(s->ring_k / 4, SHM_PIECES_MAX) * s->ring_bytes ||
        shm_cma_use(s, COH_COLL_BROADCAST, bytes))
        return 0;
    return (bytes + s->ring_bytes - 1) / s->ring_bytes;
}

/* A peer's buffer as published in its slot for a single-copy call. */
typedef struct shm_cma_desc {
    uint64_t addr;
    uint64_t bytes;
    uint64_t flags; /* the lead's SHM_XC_* */
} shm_cma_desc;

#endif
