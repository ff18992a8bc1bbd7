/*
 * shm_seg.h - the segment layout, the handle, and the phase protocol every
 * shm collective is built from: the transport's side of the seam between
 * src/transport/shm (segment, waits, aborts) and the algorithms that run on
 * the segment (src/coll/shm). Nothing else includes it.
 *
 * Segment (one memfd per group and host, mapped by every local rank):
 *
 *   [seg header, 4 KiB]  magic, version, ids, geometry, abort word + reason
 *   [ctl, 256 B x n]     per local rank: line 0 = arrive (futex word) and
 *                        waiters; line 1 = identity (pid); line 2 = the
 *                        cohort_mem_alloc broadcast's phase, publish mode
 *   [slots, page-aligned stride x n]
 *                        per local rank two buffers, each a coh_hdr (the
 *                        sender's fingerprint) followed by S data bytes
 *   [aux, COH_SHM_AUX_BYTES x n]
 *                        per local rank, for src/check (coh_shm_aux); pages
 *                        untouched by groups that do not use it stay unbacked
 *   [ring, page-aligned stride x n]
 *                        per local rank the small-op ring: 4K records
 *                        (a fingerprint tagged with its phase) and K slots of
 *                        ring_bytes each (see "The ring" below); unbacked
 *                        until used
 *   [p2p, page-aligned stride x n x n]
 *                        per ordered pair (from, to) of local ranks the
 *                        send/recv channel (shm_chan, "Channels" below);
 *                        unbacked until the pair exchanges a message
 *
 * Phase protocol. Every local rank keeps a phase counter `arrive` (u32,
 * compared modulo 2^32). A collective is a fixed sequence of phases that
 * every rank runs in the same order (the contract check on the first phase
 * guarantees that the ranks agree on the call, hence on the phases). At
 * phase p a rank may write its buffer p%2, then publishes arrive = p.
 *
 *   Rule W (writers): before writing buffer p%2 a rank waits until every
 *     local rank has arrive >= p-1 ("claim").
 *   Rule R (readers): data a peer published at phase q is read only after
 *     seeing the peer's arrive >= q, and only until the reader's own
 *     arrive = q+1 (a rank finishes all reads of phase q before it
 *     publishes q+1).
 *
 * Safety: buffer p%2 was last written at phase <= p-2; by Rule R every
 * reader of that content finished before publishing p-1, and Rule W waits
 * for exactly that. Writers never touch a buffer while it is being read,
 * and the next call can start (writing the other buffer) while slow readers
 * still read the previous phase. Most phases end with a wait for all ranks
 * anyway, so the claim usually costs nothing (min_seen caches it).
 *
 * The ring (small broadcasts, bytes <= ring_bytes; src/coll/shm). A ring
 * call is one phase p on every rank, but the root does not wait for the
 * readers: it writes its record p % 4K and slot p % K, publishes p and
 * returns. A reader writes its own record p % 4K, waits for the root's
 * arrive >= p, compares the root's record with its own call, copies the
 * slot out and only then publishes p (so arrive >= p means "done reading
 * phase p"). The root may write slot p % K once every rank has arrive >=
 * p - K, and it compares the readers' records of a phase p it rooted at
 * the latest when it starts phase p + K (or any non-ring call, or the
 * closing check): records live 4K phases, so they are still there (a rank
 * reaches phase p + 4K only after the root published p + 3K - 1). Rule W
 * and Rule R hold for the two buffers unchanged: ring phases do not touch
 * them, and a non-ring call's claim waits for arrive >= its phase - 1,
 * i.e. for every outstanding ring call (the drain).
 *
 * A small scatter (n x bytes per rank <= ring_bytes) is the same phase: the
 * root publishes its whole send buffer as a broadcast root does, and a
 * reader checks the record against its own scatter call and copies only
 * its block. With 2 ranks the root publishes only the reader's block, at
 * offset 0 (inline up to SHM_RING_INLINE bytes, compact up to
 * SHM_RING_CINL): a scatter of 64 B moves one line, not a slot's.
 *
 * Rooted in (small gather and reduce, bytes per rank <= ring_bytes): one
 * ring phase p the other way round. Every leaf is a writer: it waits, as a
 * broadcast root does, until every rank has arrive >= p - K, writes its
 * slot p % K and record p % 4K (tag last), publishes p and returns, with
 * a lazy check of p pending (in ring_pend, with the root's index in
 * ring_lead). The root writes its record (header only), waits for each
 * leaf's record of p (or its arrive >= p: a leaf in a non-ring call has
 * a header in its buffer instead, ring_vs_call), compares fingerprints,
 * reads the slots, stores SHM_RING_DONE_IN(p) in its done word and only
 * then publishes p (arrive >= p: done reading phase p). A leaf's lazy
 * check waits for every rank's arrive >= p and passes on the root's done
 * word; else the root's record decides (a root that found a mismatch
 * publishes p before it fails, so nobody waits on it). The slot rule
 * holds per writer: leaf q's slot p % K was last written at p - K and
 * read only by that phase's root, before it published p - K. The
 * records' lifetime holds as before: every rank that writes a record
 * without waiting (a broadcast reader) finished its previous phase, whose
 * end needed a writer's wait for p - K or the root's for every leaf.
 * Done words stay unambiguous: a broadcast reader stores p (it checked
 * its root), a gather/reduce root p with the top bit flipped (it checked
 * every leaf); a broadcast root's lazy check accepts only p, a leaf's
 * only the flipped value, so a done word never vouches for another kind
 * of call. Two ranks that each believe they are root wait for each other:
 * the wait compares the records (shm_op ring_wait) and both report.
 *
 * The tiny ring (bytes <= tiny_bytes) is the same protocol with its own
 * tiny_k slots (K above is tiny_k for its calls); the records are shared,
 * 4 x max(K, tiny_k) of them, so "4K" above reads 4 x the deepest ring.
 * Its slots and the ring's are disjoint, and each array's reuse rule covers
 * the calls that used it.
 *
 * The ring's footprint (ring_big_k): when K slots of ring_bytes exceed
 * SHM_RING_LEAD_BYTES (ranks outnumbering cpus: 256 x 16 KiB = 4 MiB), a
 * writer cycling through all of them writes and its readers read slots
 * long evicted from cache. Then the slots split in two halves: calls of
 * at most ring_big_from bytes cycle through the upper K/2 (slot K/2 + p %
 * K/2, waiting for p - K/2), larger ones through the first ring_big_k <=
 * K/2 (slot p % ring_big_k, waiting for p - ring_big_k), so that either
 * class touches at most SHM_RING_LEAD_BYTES of slots. The halves are
 * disjoint and each one's reuse rule covers the calls that used it, as
 * the tiny ring's. Every rank takes the class from the call's bytes and
 * the agreed geometry, so a reader finds its root's slot; one whose bytes
 * differ fails the fingerprint before it reads a slot.
 *
 * A small all_reduce (<= SHM_RING_INLINE bytes, src/coll/shm ar_small)
 * writes a record of its phase too - its fingerprint and input - and its
 * peers read that line instead of its arrive and buffer; it is a non-ring
 * call (it settles its ring checks first and claims as usual), so the
 * records' lifetime argument above holds unchanged.
 */
#ifndef COH_SHM_INT_H
#define COH_SHM_INT_H

/* shared-heap regions a rank remembers per role (coh_mem_recent): below
 * the readers' SHM_MEM_CACHE (128) mappings per root, which also hold the
 * root's own write mappings of readers' regions */
#define SHM_MEM_RECENT 96

#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "contract/contract.h"
#include "transport/shm/shm.h"
#include "transport/transport.h"

#define SHM_MAGIC 0x4d485343u /* "CSHM" */
#define SHM_VERSION 28u /* 5: the single-copy speed probe; 6: the small-broadcast ring;
                        * 7: the tiny ring; 8: the send/recv channels; 9: their
                        * chunks of <= 32 bytes inline; 10: the ring's done
                        * words; 11: a ring of chunk heads (stamp, short
                        * header, inline data) replaces pub, the data slots
                        * follow it; 12: the checker's aux ring of one-line
                        * records with their done and args words apart;
                        * 13: the abort word's failed call (abort_seq);
                        * 14: mem_p, one-copy broadcasts from cohort_mem_alloc;
                        * 15: small scatter, gather and reduce on the ring (a
                        * gather/reduce root's done word, SHM_RING_DONE_IN);
                        * 16: the publish mode (shm_ctl publish_cap);
                        * 17: the spread done words (shm_ring_done);
                        * 18: send/recv's split single copy (shm_chan req,
                        * tail_*); 19: the running flag (shm_ctl running)
                        * and send/recv's cpu hint; 20: the ring's footprint
                        * split (shm_ring_class); 21: compact records;
                        * 22: their count word holds the root, and
                        * scatter, gather and reduce write them too;
                        * 23: the cross-core probe's lines (xc_ping,
                        * xc_pong); 24: the control block's published call
                        * state removed (nothing read it); 25: a 2-rank
                        * ring scatter publishes the reader's block only;
                        * 26: compact records one a line (crec_stride);
                        * 27: the ring verdict's decision word (xw_word);
                        * 28: the timed verdict's decision word (ov_word) */
#define SHM_SEG_HDR_BYTES 4096u
#define SHM_CTL_BYTES 256u
#define SHM_LINE 64u
/* The timed verdict's classes: broadcast, reduce, all_reduce, all_to_all
 * (in that order; all_reduce's unused while it has no window), each in
 * SHM_OV_SIZES powers of two from 64 KiB (from 16 KiB a pair for
 * all_to_all; the last one open-ended); the samples the lead keeps per
 * class and path. */
#define SHM_OV_SIZES 11
#define SHM_OV_CLASSES (4 * SHM_OV_SIZES)
#define SHM_OV_KEEP 5

/* Defaults; see docs/shm.md for how they were chosen. */
#define SHM_DEFAULT_SLOT_BYTES (512u * 1024u)
#define SHM_DEFAULT_SMALL_BYTES (16u * 1024u)
#define SHM_MIN_SLOT_BYTES 64u
#define SHM_MAX_SLOT_BYTES (256u * 1024u * 1024u)
#define SHM_DEFAULT_RING_SLOTS 8u
/* K for 2 local ranks where a core's L2 holds twice the deep ring's slots
 * (64 x 16 KiB): back to back on the Intel host (2 MiB L2), 512 B-16 KiB
 * broadcast, scatter, gather, reduce x0.5-0.85 against K = 8 - the root
 * runs further ahead, so the two cores wait on each other less often
 * (docs/shm.md "The ring's depth"); the AMD host (512 KiB) keeps 8 */
#define SHM_DEEP_RING_SLOTS 64u
/* 256: the deepest ring, taken when ranks outnumber cpus - fewer than 1 %
 * of a reader's calls may end its turn waiting (docs/shm.md) */
#define SHM_MAX_RING_SLOTS 256u
#define SHM_DEFAULT_RING_BYTES (16u * 1024u)
#define SHM_MAX_RING_BYTES (1024u * 1024u)
/* At most this many bytes of ring slots per class of call (the footprint
 * above): half the Intel host's 2 MiB L2 (AMD's: 512 KiB). 16 ranks on 2 cpus, broadcast
 * 16 KiB: 76-280 us a call in some launches over all 256 slots (4 MiB),
 * 3.8-5.6 us in every launch over 32 (docs/shm.md "The ring's footprint") */
#ifndef SHM_RING_LEAD_BYTES /* (a build option only for A/B runs) */
#define SHM_RING_LEAD_BYTES (1024u * 1024u)
#endif
/* The tiny ring: broadcasts <= 256 B get 128 slots of their own, so that
 * fewer than 1 % of back-to-back calls wait for a slot (docs/shm.md). */
#define SHM_DEFAULT_TINY_SLOTS 128u
#define SHM_MAX_TINY_SLOTS 1024u
#define SHM_DEFAULT_TINY_BYTES 256u
#define SHM_MAX_TINY_BYTES 4096u
#define SHM_DEFAULT_P2P_BYTES (64u * 1024u)
#define SHM_MAX_P2P_BYTES (1024u * 1024u)
#define SHM_P2P_SLOTS 4u  /* data slots per channel */
#define SHM_P2P_HEADS 16u /* chunk heads per channel (a power of two, >= SLOTS) */
/* Ranks outnumbering cpus: a recv of at most this many bytes spins up to
 * SHM_P2P_SPIN_NS while its sender runs on another cpu (shm_wait.c) */
#define SHM_P2P_SPIN_BYTES 256u
#define SHM_P2P_SPIN_NS 2000u
#define SHM_DEFAULT_P2P_STASH_BYTES (1l << 30)
#define SHM_MAX_P2P_STASH_BYTES (1l << 40)

enum { SHM_F_NO_PIDFD = 1u }; /* pids are not comparable across local ranks */

/* A rank's publish capability (shm_ctl publish_cap): FENCE and NOMEMBAR
 * it will not or cannot take the light publish (COHORT_SHM_PUBLISH=fence;
 * membarrier unavailable: an old kernel, a seccomp filter); AUTO it
 * registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED and leaves the choice to
 * the rule; FORCE registered and COHORT_SHM_PUBLISH=membarrier. 0: not
 * written (a rank that failed before it). */
enum {
    SHM_PUB_CAP_FENCE = 1u,   /* COHORT_SHM_PUBLISH=fence */
    SHM_PUB_CAP_NOMEMBAR = 2u, /* membarrier unavailable */
    SHM_PUB_CAP_AUTO = 3u,
    SHM_PUB_CAP_FORCE = 4u
};

typedef struct shm_seg_hdr {
    uint32_t magic, version;
    uint32_t group, gen;
    uint64_t job_hash;
    uint32_t local_size;
    uint32_t check_contract;
    uint64_t slot_bytes;   /* S: data bytes per buffer */
    uint64_t small_bytes;  /* all_reduce single-phase threshold */
    uint64_t total_bytes;
    uint64_t ctl_off, slot_off, rank_stride, buf_stride;
    uint64_t ring_k, ring_bytes, ring_off, ring_stride; /* ring_k 0: no ring */
    uint64_t tiny_k, tiny_bytes; /* the tiny ring; tiny_k 0: none */
    uint64_t ring_split;         /* 1: the footprint split when K slots exceed it */
    uint64_t crec_stride;        /* compact records: 32 (two a line) or 64 bytes apart */
    uint64_t p2p_bytes, p2p_off, p2p_stride; /* p2p_bytes 0: send/recv over tcp */
    _Atomic uint32_t flags;
    /* abort: claim (CAS 0 -> 1) elects the one writer of reason/status;
     * status is stored last (release), so a nonzero status means the
     * reason is complete. */
    _Alignas(64) _Atomic uint32_t abort_claim;
    _Atomic uint32_t abort_status;
    int32_t abort_rank;
    /* the collective call that failed (coh_group's err_seq), 0 unknown:
     * a local rank that makes that call late gets its cause, not ABORTED */
    uint64_t abort_seq;
    char abort_reason[COH_ERRLEN];
    /* the cross-core probe of 2 ranks apart (shm_cma.c shm_xc_probe): the
     * lead (local rank 0) writes a token to xc_ping, the other rank echoes
     * it to xc_pong; a line each, so a round trip is two line transfers */
    _Alignas(64) _Atomic uint64_t xc_ping;
    _Alignas(64) _Atomic uint64_t xc_pong;
    /* the ring verdict's decision after a probe (shm_cma.c shm_xw_probe):
     * the first of the two ranks to write it for the probe's epoch decides
     * (compare-and-swap), so both take the same verdict even when one of
     * them gave up waiting */
    _Alignas(64) _Atomic uint64_t xw_word;
    /* the timed verdict's decision (shm_cma.c shm_ov_enter): the lead's
     * outcome, or "gave up" from a rank that stopped waiting for it; the
     * first writer of the decision's epoch wins (compare-and-swap) */
    _Alignas(64) _Atomic uint64_t ov_word;
} shm_seg_hdr;
_Static_assert(sizeof(shm_seg_hdr) <= SHM_SEG_HDR_BYTES, "segment header fits its page");

/* A call's contract in 24 bytes, exact: what every rank compares with
 * every peer's on the first phase of a call. Group and generation need no
 * field: the segment belongs to one of each (checked at attach). */
typedef struct shm_fp {
    _Atomic uint64_t seq;
    _Atomic uint64_t count;
    /* coll | dtype << 8 | (uint8)redop << 16 | min(tag, 255) << 24 |
     * (uint32)root << 32; a tag >= 255 also compares the full header */
    _Atomic uint64_t key;
} shm_fp;

typedef struct shm_ctl {
    /* line 0: the phase counter (futex word) and the count of ranks asleep
     * on it, together so the writer's waiters check hits its own line; and
     * the first-phase fingerprints, in the line every peer reads anyway
     * when it waits for our phase, so the contract check of a small call
     * moves no extra cache line. fp[p & 1] is written at phase p (always
     * after a claim, so its previous readers are done: Rule W). */
    _Alignas(64) _Atomic uint32_t arrive;
    _Atomic uint32_t waiters;
    _Atomic int32_t cpu; /* CPU the owner last published from (a hint) */
    /* 0 while the owner yields or sleeps in a wait, when ranks outnumber
     * cpus (else not kept): a small recv spins only for a sender that runs
     * (shm_wait.c); the hole before fp, so line 0 is unchanged */
    _Atomic int32_t running;
    shm_fp fp[2];
    /* line 1: identity, written once at attach; the single-copy probe
     * (shm_cma.c): the address and value of a word in the owner's private
     * memory that peers read with process_vm_readv, and the owner's verdict
     * (0 not yet, 1 cannot read every peer, 2 can) */
    _Alignas(64) _Atomic int32_t pid;
    _Atomic int32_t group_rank;
    _Atomic uint32_t attached;
    _Atomic uint32_t cma_ok;
    _Atomic uint64_t probe_addr;
    _Atomic uint64_t probe_val;
    _Atomic uint64_t cma_min; /* the owner's COHORT_SHM_SINGLE_COPY_BYTES; the lead's rules */
    /* the speed probe: a private buffer of SHM_CMA_PROBE_BYTES the
     * previous rank reads, timed, and the owner's best times of its own
     * such read and of a memcpy of the same size (ns; 0 = not measured),
     * at SHM_CMA_PROBE_BYTES (cma_ns, cpy_ns) and SHM_CMA_PROBE_SMALL
     * (cma_ns_s, cpy_ns_s): two sizes, for the per-call size rule */
    _Atomic uint64_t probe_buf;
    _Atomic uint32_t cma_ns, cpy_ns;
    _Atomic uint32_t cma_ns_s, cpy_ns_s;
    /* line 2: the phase of the owner's last broadcast rooted in a cohort_mem_alloc
     * buffer (shm_mem.h): readers that see their call's first phase here
     * copy from the owner's region instead of the path they prepared */
    _Alignas(64) _Atomic uint32_t mem_p;
    /* written once before the attach barrier: how this rank may publish
     * (SHM_PUB_CAP_*); the group's publish mode is decided from every
     * rank's after the barrier (shm.c publish_decide) */
    _Atomic uint32_t publish_cap;
} shm_ctl;
_Static_assert(sizeof(shm_ctl) <= SHM_CTL_BYTES, "control block fits");
_Static_assert(offsetof(shm_ctl, mem_p) == 2 * SHM_LINE, "identity and probe fit line 1");
_Static_assert(offsetof(shm_ctl, fp) == 16, "running fills the hole before fp");
_Static_assert(offsetof(shm_ctl, fp) + sizeof(shm_fp[2]) <= SHM_LINE,
               "the fingerprints share the arrive word's cache line");

/* A ring record: a rank's fingerprint for ring phase `phase`, stored as
 * words so a reader racing the owner's next write sees a torn copy only
 * together with a changed tag (seqlock: the tag is cleared before and set
 * after the words). Line 0 is what peers read on the fast path: the tag,
 * the call's 24-byte fingerprint (shm_fp's fields) and, for a payload of
 * at most SHM_RING_INLINE bytes, the payload itself - so a reader of a
 * tiny broadcast pulls the root's control line and this one line. Line 1,
 * the full header (len = payload bytes), is read only when the
 * fingerprints differ (to word the report) or the tag saturates. */
#define SHM_RING_INLINE 32u
typedef struct shm_ring_rec {
    _Alignas(64) _Atomic uint32_t phase;
    uint32_t pad_;
    _Atomic uint64_t seq, count, key;
    unsigned char inl[SHM_RING_INLINE];
    _Alignas(64) _Atomic uint64_t w[sizeof(coh_hdr) / 8];
} shm_ring_rec;
_Static_assert(sizeof(shm_ring_rec) == 128, "two lines per record");
_Static_assert(offsetof(shm_ring_rec, inl) + SHM_RING_INLINE == SHM_LINE, "line 0 is full");

/* A compact record (layout 21; 22: the root in the count word): a 2-rank
 * ring call publishing at most SHM_RING_CINL bytes - a broadcast or a
 * scatter's reader block from its root, a gather or reduce from the leaf -
 * is also announced in 32 bytes, two to a line (crec_stride 32) or, since
 * layout 26, one (64: COHORT_SHM_COMPACT_PACK), after its full record
 * (shm_ring_crec_of). The
 * reader checks and copies from it, so a writer running ahead moves one
 * line per two such calls instead of one per call, and the lines it
 * reuses need half the ownership requests (on the AMD host these stalled
 * the root's store queue: its per-call time sat on the first store after
 * them). The fingerprint is line 0's, exact for every mismatch a program
 * can make: the count (< 2^8 at these sizes) and the root + 1 (< 2^24,
 * else no compact record) share the count word; seq is kept mod 2^32 (two
 * ranks a multiple of 2^32 collectives apart cannot meet in one phase:
 * each call needs both); the key's low half (op, dtype, reduce op, tag).
 * The root must be in it although a 2-rank group has one reader: in a
 * hierarchical call the host without the root runs its local phase from
 * its leader, whatever root each rank names (layout 21 left it out, and
 * a rank there naming another root took the data without a word). Tag as
 * in shm_ring_rec (cleared before, set after the words, release). */
#define SHM_RING_CINL 16u
typedef struct shm_ring_crec {
    _Atomic uint32_t phase;
    _Atomic uint32_t count, seq, key;
    unsigned char inl[SHM_RING_CINL];
} shm_ring_crec;
_Static_assert(sizeof(shm_ring_crec) * 2 == SHM_LINE, "two compact records fit a line");

/* Channels (send/recv between local ranks; src/coll/shm/shm_p2p.c). One
 * single-producer single-consumer channel per ordered pair (from, to):
 * SHM_P2P_HEADS chunk heads and SHM_P2P_SLOTS data slots of p2p_bytes,
 * both used round robin. Chunk t (counted over the channel's life) has its
 * head in head t % HEADS and, unless it is inline (a copy of a message of
 * <= SHM_CHAN_INLINE bytes) or a single copy, its data in slot t % SLOTS.
 * The sender writes chunk t once the receiver has ack >= t + 1 - HEADS
 * (head only) or >= t + 1 - SLOTS (with data): what the head and the slot
 * held before was consumed. It publishes the chunk by storing stamp = t +
 * 1 in the head, last; the receiver waits for that stamp (the head's
 * previous chunk left t + 1 - HEADS there), compares the head's short
 * header with its own call (the contract check, before a byte lands in its
 * buffer), copies out and publishes ack = t + 1. ack is a futex word (a
 * sleeper counts itself in the waiters word next to it, like arrive); a
 * waiting rank sleeps on its bell (the diagonal channel's pub,
 * shm_bell_ring). The sender reads ack only when its last reading leaves
 * no free head (slot), so small messages pay for the credit - a transfer
 * of the ack line - once per HEADS messages at most. A single-copy message
 * is one chunk whose head holds the sender's buffer address instead of
 * data. The receiver stores where the message's tail goes in its buffer
 * (tail_addr, tail_bytes: shm_p2p.c's p2p_tail, or 0 to read it whole, as a rank
 * stashing it does) and publishes req = t + 1; it reads the head part with
 * process_vm_readv while the sender, which waits for req, writes the tail
 * with process_vm_writev and publishes tail_done = t + 1 (two cores copy
 * at once, as the single-copy broadcast splits its copy). The receiver
 * acks once it read its part and saw tail_done; the sender returns only
 * after that ack.
 *
 * What a small message moves between the two cores (docs/performance.md,
 * "send/recv at 8 B"): its head line, written by the sender and read by the
 * receiver, and at most 1/HEADS of the ack line; the full header in the
 * head's second line stays in the sender's cache unless a report needs
 * it. */
typedef struct shm_chan {
    _Alignas(64) _Atomic uint32_t pub; /* the diagonal channel (q, q): q's bell */
    _Atomic uint32_t pub_waiters;
    _Atomic int32_t pub_cpu;         /* unused since v11 (kept: the layout of the bell) */
    _Atomic uint32_t closed;         /* the sender is in cohort_finalize */
    _Atomic uint32_t tail_done;      /* sender: t + 1 of the split single copy whose tail
                                      * it wrote into the receiver's buffer */
    _Alignas(64) _Atomic uint32_t ack; /* receiver: chunks consumed */
    _Atomic uint32_t ack_waiters;
    _Atomic int32_t ack_cpu;         /* unused: the ack's waiter sleeps on its bell and
                                      * takes no CPU hint (kept: the layout) */
    _Atomic uint32_t req;            /* receiver: t + 1 of the single copy it started
                                      * reading, tail_* stored before it */
    _Atomic uint64_t tail_addr;      /* where the sender writes the tail (receiver's memory) */
    _Atomic uint64_t tail_bytes;     /* the tail's bytes: 0 (read whole) or p2p_tail() */
} shm_chan;
_Static_assert(sizeof(shm_chan) == 128, "two lines per channel head");

/* A chunk's head entry, two lines: line 0 the head (below: all the receiver
 * reads of a small message), line 1 the sender's full header (coh_hdr of
 * its call, step = chunk index, len = the message's bytes; read only to
 * word a report - its call site - and at cohort_finalize). A copy chunk of
 * a message of at most SHM_CHAN_INLINE bytes has its data in the head
 * itself (one line moves, not three); others in their data slot. The head
 * carries every field the receiver compares (coh_hdr_match) or checks
 * (shm_chunk_parse); group and generation are the segment's, redop is
 * none, len = count x the dtype's size. */
#define SHM_CHAN_MAGIC 0xc5u
#define SHM_CHAN_INLINE 24u
typedef struct shm_chan_head {
    _Atomic uint32_t stamp; /* t + 1 of the chunk held: stored last (shm_pub_stamp) */
    uint8_t magic;          /* SHM_CHAN_MAGIC */
    uint8_t kind;           /* COH_MSG_P2P */
    uint8_t mode;           /* SHM_CHAN_COPY, SHM_CHAN_CMA */
    uint8_t dtype;
    int32_t src, dst;       /* group ranks: the sender, the receiver (coh_hdr's root) */
    int32_t tag;
    uint32_t step;          /* chunk index within the message */
    uint64_t seq, count;
    union {
        unsigned char inl[SHM_CHAN_INLINE]; /* a whole message of <= 24 bytes */
        struct {
            uint64_t bytes; /* data bytes in this slot (COPY), the message (CMA) */
            uint64_t addr;  /* CMA: the sender's buffer */
        } d;
    } u;
} shm_chan_head;
_Static_assert(sizeof(shm_chan_head) == SHM_LINE, "a chunk's head is one line");
_Static_assert(offsetof(shm_chan_head, u) + SHM_CHAN_INLINE == SHM_LINE, "inline data ends it");

/* What shm_chunk_parse hands back of a head besides the header. */
typedef struct shm_chan_desc {
    uint64_t mode;  /* SHM_CHAN_COPY: data in the slot; SHM_CHAN_CMA: read addr */
    uint64_t bytes; /* data bytes in this slot (COPY), the message (CMA) */
    uint64_t addr;  /* CMA: the sender's buffer */
} shm_chan_desc;
enum { SHM_CHAN_COPY = 1, SHM_CHAN_CMA = 2 };

/* What a receiver may assume of the chunk in a channel slot before it
 * trusts any of it (the slot is memory its peer writes: a corrupted or
 * hostile peer can put anything there). */
typedef struct shm_chunk_ctx {
    int32_t src, dst;    /* the sender's and the receiver's group ranks */
    uint32_t group, gen; /* the segment's group (implied by the channel) */
    uint32_t step;       /* the chunk index due next */
    uint64_t len;        /* continuing a message: its length; UINT64_MAX: a first chunk */
    uint64_t have;       /* continuing: bytes of it taken so far (< len) */
    uint64_t slot_bytes; /* the segment's p2p_bytes */
    uint64_t cma_min;    /* single copy from this many bytes; UINT64_MAX: never */
    uint64_t cma_end;    /* ... and below this many (UINT64_MAX: no upper bound) */
} shm_chunk_ctx;
/* Copies the slot's head out (slot: its head line, SHM_LINE bytes, read
 * once, so a peer rewriting it meanwhile cannot make the copy disagree with
 * what was checked; the stamp is not read), rebuilds the sender's header
 * from it (site and line 0: they live in line 1, shm_chan_site) and checks
 * what the channel protocol guarantees whatever the calls: magic, kind,
 * sender, receiver, the chunk index, len = count x the dtype's size, the
 * same len in every chunk, a copy chunk's length min(slot_bytes, len -
 * have), inline exactly when len <= SHM_CHAN_INLINE, a single copy only as
 * a whole first chunk of cma_min <= len < cma_end bytes. NULL when it holds (the
 * contract comparison with the receiver's own call comes after), else what
 * is wrong, for a COHORT_ERR_PROTOCOL report. *copy receives the head: an
 * inline chunk's data (d->bytes) is taken from copy->u.inl, the checked
 * copy. src/coll/shm/shm_p2p.c; fuzzed by tests/fuzz/fuzz_shm_chunk.c. */
const char *shm_chunk_parse(const unsigned char *slot, const shm_chunk_ctx *x, coh_hdr *h,
                            shm_chan_desc *d, shm_chan_head *copy);

/* A message taken from a channel before a recv asked for it (the stash of
 * src/coll/shm/shm_p2p.c), FIFO per peer. */
typedef struct shm_p2p_msg {
    struct shm_p2p_msg *next;
    coh_hdr h;            /* its first chunk's header: compared at the recv */
    size_t have;          /* bytes taken so far (h.len once complete) */
    uint32_t chunks;      /* chunks taken so far */
    unsigned char data[]; /* h.len bytes */
} shm_p2p_msg;

struct coh_shm {
    cohort_group *g;
    int n, me;                  /* local size, my local index */
    unsigned char *base;
    size_t size;
    shm_seg_hdr *hdr;
    unsigned char *ctl_base;
    unsigned char *slots;
    unsigned char *aux;         /* coh_shm_aux regions, after the slots */
    size_t rank_stride, buf_stride;
    size_t S;                   /* data bytes per buffer */
    size_t small_bytes;
    int check;                  /* contract check on (same on every local rank) */
    size_t nt_bytes;            /* calls writing more than this stream to recv */
    uint32_t phase;             /* my published phase */
    uint32_t min_seen;          /* every rank is known to have arrive >= this */
    int *pidfd;                 /* [n]; -1 for me / unavailable */
    int oversub;                /* ranks outnumber usable CPUs */
    uint64_t spin_ns, yield_ns; /* waiting strategy: max spin, spin + yield */
    uint64_t spin_cur;          /* adaptive spin budget, <= spin_ns */
    uint64_t p2p_spin_ns;       /* a small recv's spin for a running sender (0: none) */
    int ring_drain;             /* a ring root that must wait waits for p - 1 */
    int bar_lead;               /* the last broadcast's (or ring scatter's) root and phase + 1 (0: none): an */
    uint32_t bar_ph;            /* oversubscribed barrier right after it has that leader
                                 * (the same on every local rank; src/coll/shm) */
    int bar_scatter;            /* a ring scatter's root leads it too (COHORT_SHM_BAR_SCATTER) */
    int ar_inl;                 /* all_reduce <= SHM_RING_INLINE bytes exchanges ring
                                 * records (COHORT_SHM_AR_INLINE, default 1; src/coll/shm) */
    int light;                  /* the light publish: a plain store and load, the sleeper
                                 * pays with a membarrier (the same on every local rank,
                                 * decided after the attach barrier; "Publishing") */
    char publish_info[200];     /* the publish mode and why (cohort_describe) */
    unsigned membar_failed;     /* sleeper membarriers that failed (warned once) */
    uint64_t hs_linger_ns;      /* the lead: time spent after the last member was served
                                 * waiting for the handshakes' closes (tests) */
    int hs_lingered;            /* the lead: members that kept it open past HS_AUTH_MS */
    uint64_t hs_m3_ns;          /* a member: when it read M3 (CLOCK_MONOTONIC; tests) */
    uint64_t sleeps;            /* futex sleeps begun (tests) */
    uint64_t late_wakes;        /* sleeps that lasted their whole slice although what they
                                 * waited for had come: a lost wake-up, or one that raced
                                 * the slice's end (tests: test_shm_publish) */
    const void **srcs;          /* [n]: reduction sources scratch */
    unsigned char *red_scratch; /* reduce's single copy: a piece per leaf (shm_coll.c) */
    int cma;                    /* single copy: every local rank can read every other's
                                 * memory (process_vm_readv, probed at attach) and
                                 * cma_ops is not empty */
    unsigned cma_ops;           /* 1u << COH_COLL_*: the ops that use it (agreed) */
    void *probe_buf;            /* my speed-probe buffer, freed after the agreement */
    uint64_t probe_ns;          /* what the speed probe cost this rank (reported) */
    size_t cma_min;             /* calls moving at least this many bytes use it */
    /* per op, the sizes [from, to) that take it: cma_min and cma_end, or the
     * 2-rank "apart" sizes (shm_cma.c; agreed at attach) */
    size_t cma_from[COH_COLL_KIND_COUNT];
    size_t cma_to[COH_COLL_KIND_COUNT];
    size_t ar_oop_to; /* all_reduce with no rank in place: two copies from here */
    /* 2 ranks apart under auto (xc_adapt): out-of-place all_reduce calls
     * below ar_far_to take single copy only while the lead's last
     * cross-core probe found the cpus far apart (shm_cma.c shm_xc_flags) */
    size_t ar_far_to;
    int xc_adapt;     /* probe during calls (1), verdict fixed: near (2), far (3); 0 off */
    int xc_dear;      /* xc_adapt where the kernel's copy is dear: the near rules measured
                       * only there (all_gather's small blocks, the ring after a barrier) */
    size_t xc_ag_to;  /* near, all_gather blocks up to this take two copies either way
                       * (0: none; shm_cma.h SHM_XC_AG_OOP_TO where the copy is dear) */
    uint32_t xc_ns;   /* lead: the last probe's round trip (ns; 0 none or failed) */
    uint64_t xc_next; /* lead: when the next probe is due (CLOCK_MONOTONIC ns) */
    uint32_t xc_fails; /* lead: probes failed in a row (each doubles the interval) */
    uint64_t xc_epoch;  /* probes begun, the same count on both ranks: token base */
    uint64_t xc_probes; /* probes this rank finished (tests) */
    uint64_t ar_singles; /* all_reduce calls that took the single copy (tests) */
    uint64_t bc_singles;  /* broadcasts that took the single copy (tests) */
    uint64_t a2a_singles; /* all_to_all calls that took the single copy (tests) */
    uint64_t xc_twos;    /* calls a near verdict sent to two copies (tests) */
    size_t cma_end;             /* ... and fewer than this many (SIZE_MAX: no bound);
                                 * auto's per-size rule, agreed at attach */
    uint64_t probe_word;        /* read by peers' probes (its address is published) */
    char copy_info[1536];       /* the copy path and why, for cohort-perf and logs */
    /* one-copy broadcasts from cohort_mem_alloc buffers (shm_mem.h):
     * mem_ok: every local rank may take another's descriptors (the attach
     * probe's ptrace verdict) and COHORT_SHM_MEM is not off here; mem_mode:
     * COHORT_SHM_MEM (0 off, 1 on, 2 map-fail, 3 nosplit); mem: the mappings of peers'
     * regions (shm_mem.c) */
    int mem_ok, mem_mode;
    void *mem;
    /* shared-heap regions this rank used lately, as root [1] and offering
     * as a reader [0] (coh_mem_recent), oldest overwritten first */
    uint64_t mem_recent[2][SHM_MEM_RECENT];
    unsigned mem_recent_next[2];
    /* the small-broadcast ring (src/coll/shm), geometry from the segment
     * header; ring_k == 0: off */
    unsigned char *ring;
    size_t ring_k, ring_nrec, ring_bytes, ring_slot_stride, ring_stride;
    /* the footprint split (0: none): calls above ring_big_from bytes take
     * slots [0, ring_big_k), the others [K/2, K) */
    size_t ring_big_k, ring_big_from;
    /* the tiny ring: tiny_k slots of tiny_bytes (< ring_bytes) after the
     * ring's slots, for the smallest broadcasts; shares the records */
    size_t tiny_k, tiny_bytes, tiny_slot_stride, tiny_off;
    /* the done words after the tiny slots: ring_nrec u32 packed, then
     * ring_nrec spread one to a cache line (shm_ring_done) */
    size_t ring_done_off;
    /* then ring_nrec compact records (shm_ring_crec), layout 21 */
    size_t ring_crec_off;
    /* phases this rank rooted whose readers are not checked yet (FIFO,
     * capacity ring_nrec) and the calls they belonged to (by phase % nrec) */
    uint32_t *ring_pend;
    uint32_t ring_pend_head, ring_npend;
    coh_call *ring_calls;
    /* by phase % nrec: -1 for a phase this rank rooted (a broadcast or a
     * scatter: every reader's done word or record is checked), else the
     * root's local index for a phase where this rank was a leaf of a
     * gather or reduce (the root's done word or record is checked) */
    int *ring_lead;
    /* by phase % nrec: the phase's done words are the spread ones */
    unsigned char *ring_spread;
    /* closing check (set by src/coll/shm once a ring call was rooted) */
    cohort_status (*ring_close)(coh_shm *s, int wait_ms);
    /* send/recv channels (geometry from the header; p2p_bytes 0: off) */
    unsigned char *p2p;
    size_t p2p_bytes, p2p_slot_stride, p2p_stride;
    uint32_t *p2p_out, *p2p_in; /* [n]: chunks I sent to / consumed from q */
    uint32_t *p2p_acked;        /* [n]: q's ack as last read (a send reads the
                                 * line q writes only when a slot seems taken) */
    shm_p2p_msg **p2p_stash;    /* [n]: messages from q taken before their recv */
    shm_p2p_msg **p2p_last;     /* [n]: the last of them (appended to: no walk) */
    size_t p2p_stash_cap;       /* COHORT_SHM_P2P_STASH_BYTES (shm_p2p.c "the stash") */
    size_t p2p_stash_used;      /* bytes the stash holds now (messages + their heads) */
    int p2p_held;               /* local rank last held back at the cap, or -1 */
    /* a 2-rank ring reduce's peer input of 33-64 B, copied out of its slot
     * narrow (coh_copy_narrow); aligned for every dtype (16: what calloc of
     * this struct guarantees - UBSan caught it at 4 for int64/double) */
    _Alignas(16) unsigned char near64[64];
    /* the phases the last two broadcasts in ring pieces ended at, the
     * older at [pieces_n & 1] (bcast_pieces.c: a root waits for it). Last:
     * shm_coll.c's offsets stay. */
    uint32_t pieces_end[2];
    unsigned pieces_n;
    /* Ring first (session 35), at the end for the same reason: the seq
     * after the last barrier's (the call that has it follows that barrier
     * directly), and per op where such a call starts the single copy
     * (<= cma_from; agreed at attach; shm_cma.h shm_cma_call) */
    uint64_t bar_seq;
    int bar_near;       /* the lead's cross-core verdict in the last verdict barrier: near */
    uint64_t bar_count; /* barriers begun (every 16th carries the verdict; shm_coll.c) */
    size_t bar_from[COH_COLL_KIND_COUNT];
    uint64_t red_singles; /* reduce calls that took the single copy (tests) */
    /* a ring writer takes its next call's lines early (shm_prefetch_w:
     * the cpu has PREFETCHW; "Taking the next lines early" below) */
    int ring_pf;
    size_t crec_stride; /* compact records' spacing (the header's crec_stride) */
    /* [n]: each peer's pid, read once from its control block after the
     * attach barrier - the pid its pidfd was opened for. The single copy's
     * syscalls use this copy only: the control block stays writable by
     * every local process, and a pid word rewritten later must not send
     * this rank's reads and writes to another process (docs/shm.md) */
    pid_t *peer_pid;
    /* The ring verdict (shm_cma.c "the ring's verdict"): 2 ranks apart
     * where the kernel's copy is dear, probing (xc_adapt 1). Agreed, the
     * same on both ranks: xw_far, the verdict of the last probe both
     * took; xw_at, the first rooted call in the window from this seq runs
     * the next probe; xw_n, the calls from one probe to the next. This
     * rank's: xw_seen, the last call that asked. The lead's: xw_t and
     * xw_p, the time and seq of the last probe (its call rate sets xw_n). */
    int xw;
    int xw_far;
    uint64_t xw_at, xw_n, xw_seen, xw_t, xw_p;
    uint64_t xw_n_min; /* agreed: the fewest calls between probes (shm_cma_agree) */
    uint64_t xw_probes;  /* ring verdict probes taken (tests) */
    uint64_t xw_singles; /* calls a far ring verdict sent to the single copy (tests) */
    /* The timed verdict (shm_cma.c "the lead's timed verdict"): 3-4 ranks
     * on 2 cpus where the kernel's copy is dear, broadcast, reduce and
     * all_to_all from ov_from (SIZE_MAX: not that op). ov:
     * 0 off, 1 timed, 2 two copies fixed, 3 single copy fixed
     * (COHORT_SHM_BUSY, the lead's). Agreed, the same on every local rank:
     * ov_bits, class k's path (1 single copy); ov_w, window calls begun;
     * ov_at, the window call that takes the next decision; ov_n, the calls
     * between decisions; ov_ep, decisions taken; ov_cnt, ov_last and
     * ov_run, each class's calls, its last call's path + 1 and that call's
     * place in its path's run (from 1). This rank's: ov_seen and
     * ov_seen_coll, the last call that asked, ov_ans its path. The lead's:
     * the call in flight (ov_pend: class * 2 + path + 1, 0 none; ov_t0),
     * the last decision's time and window call (ov_dt, ov_dw) and its own
     * calls' times, the last SHM_OV_KEEP of each class and path. */
    int ov;
    int ov_ans;
    uint64_t ov_bits, ov_w, ov_at, ov_n;
    uint32_t ov_ep;
    size_t ov_from[COH_COLL_KIND_COUNT];
    uint64_t ov_seen;
    int ov_seen_coll;
    uint32_t ov_cnt[SHM_OV_CLASSES];
    uint8_t ov_last[SHM_OV_CLASSES], ov_run[SHM_OV_CLASSES];
    int ov_pend;
    uint64_t ov_t0, ov_dt, ov_dw;
    uint32_t ov_smp[SHM_OV_CLASSES][2][SHM_OV_KEEP];
    uint8_t ov_nsmp[SHM_OV_CLASSES][2], ov_pos[SHM_OV_CLASSES][2];
    uint64_t ov_decisions, ov_gaveup, ov_singles; /* tests */
};

/* Segment bytes for a local size and slot size (docs, tests). */
size_t coh_shm_segment_bytes(int local_size, size_t slot_bytes);

static inline shm_ctl *shm_ctl_of(const coh_shm *s, int q)
{
    return (shm_ctl *)(s->ctl_base + (size_t)q * SHM_CTL_BYTES);
}

/* Buffer of local rank q used at phase p: header at +0, data at +64. */
static inline unsigned char *shm_buf(const coh_shm *s, int q, uint32_t p)
{
    return s->slots + (size_t)q * s->rank_stride + (size_t)(p & 1u) * s->buf_stride;
}

static inline int shm_reached(uint32_t v, uint32_t target) { return (int32_t)(v - target) >= 0; }

/* One collective's state while it runs. */
typedef struct shm_op {
    coh_shm *s;
    cohort_group *g;
    const coh_call *c;
    coh_hdr mine; /* my fingerprint; step/len set per phase */
    uint64_t fp_key; /* shm_fp.key of this call */
    int fp_full;     /* its tag saturated the key: the full headers decide */
    coh_hdr exp;  /* scratch: what a peer's header must say */
    coh_wait w;
    int w_init;
    int waiting_for; /* group rank named in stall reports */
    int nt;          /* this call writes recv with streaming stores */
    /* a ring reader's wait: while waiting for ring_q's phase ring_p, compare
     * its record with `mine` (two readers waiting for each other: nobody is
     * root); a mismatch ends the wait with COHORT_ERR_CONTRACT, ring_bad set
     * and the peer's header in ring_got, for the caller to report */
    int ring_wait, ring_q, ring_bad;
    uint32_t ring_p;
    coh_hdr ring_got;
} shm_op;

/* An op for a wait outside a call's own path (the ring's lazy check, the
 * closing check, a broadcast in pieces): what stall reports read, nothing
 * of the contract. */
static inline void shm_op_bare(shm_op *o, coh_shm *s, const coh_call *c)
{
    o->s = s;
    o->g = s->g;
    o->c = c;
    o->w_init = 0;
    o->nt = 0;
    o->ring_wait = 0;
    o->ring_bad = 0;
    o->waiting_for = -1;
}

static inline shm_chan *shm_chan_of(const coh_shm *s, int from, int to)
{
    return (shm_chan *)(s->p2p + ((size_t)from * (size_t)s->n + (size_t)to) * s->p2p_stride);
}

/* Head entry of chunk t: head at +0, full header at +64. */
static inline unsigned char *shm_chan_slot(const coh_shm *s, shm_chan *ch, uint32_t t)
{
    (void)s;
    return (unsigned char *)ch + sizeof(shm_chan) + (size_t)(t % SHM_P2P_HEADS) * 2 * SHM_LINE;
}

/* Data slot of chunk t (after the heads). */
static inline unsigned char *shm_chan_dslot(const coh_shm *s, shm_chan *ch, uint32_t t)
{
    return (unsigned char *)ch + sizeof(shm_chan) + SHM_P2P_HEADS * 2 * SHM_LINE +
           (size_t)(t % SHM_P2P_SLOTS) * s->p2p_slot_stride;
}

static inline _Atomic uint32_t *shm_chan_stamp(unsigned char *slot)
{
    return &((shm_chan_head *)slot)->stamp;
}

/* A chunk in the slot is published: its stamp reached t + 1. */
static inline int shm_chan_ready(unsigned char *slot, uint32_t t)
{
    return shm_reached(atomic_load_explicit(shm_chan_stamp(slot), memory_order_acquire), t + 1);
}

static inline shm_ring_rec *shm_ring_rec_of(const coh_shm *s, int q, uint32_t p)
{
    return (shm_ring_rec *)(s->ring + (size_t)q * s->ring_stride +
                            (size_t)(p & (uint32_t)(s->ring_nrec - 1)) * sizeof(shm_ring_rec));
}

/* Which slots a ring call of `bytes` takes (the header comment: the tiny
 * ring, and the footprint split): k is its ring's depth (where its done
 * words are, shm_ring_spread), cyc the slots it cycles through from base
 * (a writer waits for every rank's arrive >= p - cyc). */
typedef struct shm_ring_cls {
    uint32_t k, cyc, base;
    int tiny;
} shm_ring_cls;

static inline shm_ring_cls shm_ring_class(const coh_shm *s, size_t bytes)
{
    shm_ring_cls c;
    c.tiny = s->tiny_k && bytes <= s->tiny_bytes;
    c.k = c.cyc = (uint32_t)(c.tiny ? s->tiny_k : s->ring_k);
    c.base = 0;
    if (!c.tiny && s->ring_big_k) {
        if (bytes > s->ring_big_from)
            c.cyc = (uint32_t)s->ring_big_k;
        else
            c.cyc = c.base = c.k / 2;
    }
    return c;
}

static inline unsigned char *shm_ring_slot(const coh_shm *s, int q, uint32_t p,
                                           const shm_ring_cls *c)
{
    unsigned char *r = s->ring + (size_t)q * s->ring_stride;
    size_t i = c->base + (size_t)(p & (c->cyc - 1));
    if (c->tiny)
        return r + s->tiny_off + i * s->tiny_slot_stride;
    return r + s->ring_nrec * sizeof(shm_ring_rec) + i * s->ring_slot_stride;
}

/* Taking the next lines early. A ring writer's stores go to lines its
 * readers read a lap ago, still shared in their caches: each store waits
 * in the store buffer until the readers' copies are invalidated, and the
 * next locked instruction - the busy check that starts the next call
 * (src/group/api.c issue) - waits for all of them. On the Intel host that
 * was most of a 2-rank broadcast of 64 B (0.21 us; perf: 93 % of issue's
 * samples on its compare-and-swap) and of a scatter's root. So a writer
 * that just published phase p asks for the lines of phase p +
 * SHM_RING_PF_AHEAD for writing (PREFETCHW: ownership only, no fault, no
 * effect on any value): the invalidations overlap the program instead of
 * stalling the next call. Paired, 3 rounds: broadcast 64-256 B x0.36-0.41,
 * 4 KiB x0.77, scatter 256 B x0.31 (docs/shm.md). Eight on: the slot of
 * p + 8 last held phase p + 8 - cyc, which a reader still reads only when
 * it trails the writer by more than cyc - 8 (a nearly full ring: then the
 * early request costs the reader a transfer, never a value), and near
 * enough that the lines are still the writer's when it writes them. */
#define SHM_RING_PF_AHEAD 8u
/* Slot lines only up to this payload (a 16 KiB slot's 256 lines: scatter
 * 16 KiB x1.04-1.13 at 2-8 ranks) and with at least this many slots in
 * the class's cycle (8 slots: p + 8 is the slot just written) */
#define SHM_RING_PF_SLOT_MAX 4096u
#define SHM_RING_PF_CYC_MIN 32u

static inline int shm_ring_pf_slot(const shm_ring_cls *rc, size_t bytes)
{
    return bytes > SHM_RING_INLINE && bytes <= SHM_RING_PF_SLOT_MAX &&
           rc->cyc >= SHM_RING_PF_CYC_MIN;
}

/* A hint to take line a for writing; callers check s->ring_pf. */
static inline void shm_prefetch_w(const void *a)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ volatile("prefetchw %0" ::"m"(*(const char *)a));
#elif defined(__aarch64__)
    __asm__ volatile("prfm pstl1keep, %0" ::"Q"(*(const char *)a));
#else
    __builtin_prefetch(a, 1, 3);
#endif
}

/* What the root of a gather or reduce on the ring stores in its done word
 * of phase p once every leaf's record of p matched its call (the top bit
 * flipped: never what a broadcast reader stores, p, nor an initial value,
 * whose index differs). */
#define SHM_RING_DONE_IN(p) ((uint32_t)(p) ^ 0x80000000u)

/* Local rank q's done word of ring phase p: q stores p there (relaxed,
 * before publishing p) once it read phase p as a reader and its check of
 * the root's record passed - so the root's lazy check reads one word per
 * reader and phase instead of each reader's record line (the records stay
 * the fallback when the word holds another phase).
 *
 * Two arrays, by the depth of the ring the phase used (shm_ring_spread):
 * packed, 16 phases to a cache line, for a deep ring (the tiny one, K =
 * 128): the root checks phase p - K, a line the readers left K phases ago,
 * one line transfer per 16 calls. Spread, one phase to a line, for a
 * shallow one (the slot ring, K = 8): packed, p - K would share the line
 * the readers are writing now, and the line would cross between the cores
 * twice a call (session 15: broadcast 4 KiB 1.01 -> 0.68 us spread, 2
 * ranks, contract on; docs/performance.md). */
#define SHM_DONE_PER_LINE (SHM_LINE / sizeof(uint32_t))
static inline int shm_ring_spread(size_t k) { return k < 2 * SHM_DONE_PER_LINE; }
static inline _Atomic uint32_t *shm_ring_done(const coh_shm *s, int q, uint32_t p, int spread)
{
    _Atomic uint32_t *w =
        (_Atomic uint32_t *)(s->ring + (size_t)q * s->ring_stride + s->ring_done_off);
    size_t i = p & (uint32_t)(s->ring_nrec - 1);
    return spread ? w + s->ring_nrec + i * SHM_DONE_PER_LINE : w + i;
}

/* Local rank q's compact record of phase p (shm_ring_crec). */
static inline shm_ring_crec *shm_ring_crec_of(const coh_shm *s, int q, uint32_t p)
{
    return (shm_ring_crec *)(s->ring + (size_t)q * s->ring_stride + s->ring_crec_off +
                             (size_t)(p & (uint32_t)(s->ring_nrec - 1)) * s->crec_stride);
}

/* Reads local rank q's record of phase p; 0 when it holds another phase
 * (q was not in a ring call at p, or has not written it yet). */
static inline int shm_ring_get(const coh_shm *s, int q, uint32_t p, coh_hdr *out)
{
    shm_ring_rec *r = shm_ring_rec_of(s, q, p);
    if (atomic_load_explicit(&r->phase, memory_order_acquire) != p)
        return 0;
    uint64_t w[sizeof(coh_hdr) / 8];
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        w[i] = atomic_load_explicit(&r->w[i], memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&r->phase, memory_order_relaxed) != p)
        return 0;
    memcpy(out, w, sizeof w);
    return 1;
}

/* Reads local rank q's short fingerprint of phase p (line 0 of the record:
 * seq, count, key); 0 when it holds another phase. */
static inline int shm_ring_fp(const coh_shm *s, int q, uint32_t p, uint64_t f[3])
{
    shm_ring_rec *r = shm_ring_rec_of(s, q, p);
    if (atomic_load_explicit(&r->phase, memory_order_acquire) != p)
        return 0;
    f[0] = atomic_load_explicit(&r->seq, memory_order_relaxed);
    f[1] = atomic_load_explicit(&r->count, memory_order_relaxed);
    f[2] = atomic_load_explicit(&r->key, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&r->phase, memory_order_relaxed) == p;
}

/* shm_wait.c */
cohort_status shm_wait_slow(shm_op *o, int q, uint32_t target);
/* The same wait on another futex word owned by local rank q (a channel's
 * pub or ack): word reaches target; waiters counts sleepers; cpu is the
 * owner's hint. */
cohort_status shm_wait_word(shm_op *o, int q, _Atomic uint32_t *word, _Atomic uint32_t *waiters,
                            _Atomic int32_t *cpu, uint32_t target);
/* The channels' wait (send/recv): until *word (owned by local rank q)
 * reaches target, calling poll_fn(arg) while waiting (it takes incoming
 * chunks; a non-OK status ends the wait); sleeps on this rank's bell.
 * spin_for_q (only with p2p_spin_ns): spin up to p2p_spin_ns while q runs
 * on another cpu (its running flag and cpu hint), else yield at once.
 * shm_bell_ring(s, q) after publishing anything local rank q may wait for. */
cohort_status shm_wait_multi(shm_op *o, int q, _Atomic uint32_t *word, uint32_t target,
                             cohort_status (*poll_fn)(void *arg), void *arg, int spin_for_q);
void shm_bell_ring(coh_shm *s, int q);
/* Waits until *word (a line owned by local rank q that q stores before it
 * publishes its phase) reaches target, sleeping on q's arrive (q's publish
 * wakes it) and calling poll_fn(arg) while waiting (a non-OK status ends
 * the wait). With q's cpu hint: a wait that reads q's control line while
 * q writes its record costs q that line's transfer, not this rank (the
 * record is stored first); without it, a loaded machine's hand-offs
 * doubled (2 ranks on one cpu spin before they yield: LOADED A/B, 8 B
 * all_reduce p50 x2.1). */
cohort_status shm_wait_rec(shm_op *o, int q, _Atomic uint32_t *word, uint32_t target,
                           cohort_status (*poll_fn)(void *arg), void *arg);
/* Publishes value into a futex word owned by this rank, then a wake only
 * if someone sleeps: the same pairing as shm_publish (shm_pub_store). */
void shm_word_publish(coh_shm *s, _Atomic uint32_t *word, _Atomic uint32_t *waiters,
                      uint32_t value);
/* The asymmetric barrier's two halves (shm_wait.c): registration at attach
 * (1 registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0 not: *why says
 * so), and the sleeper's barrier (0 done, -1 failed: errno). */
int shm_membar_register(char *why, size_t len);
int shm_membar_sleeper(void);
/* cohort_finalize: waits until *flag is non-zero or *word reached target
 * (both owned by local rank q), q exited or the deadline passed; the abort
 * word ends it (its status). Returns COHORT_OK (either condition),
 * COHORT_ERR_PEER_LOST (q exited; nothing recorded) or COHORT_ERR_TIMEOUT
 * (nothing recorded, nothing failed). */
cohort_status shm_wait_flag(coh_shm *s, int q, _Atomic uint32_t *flag, _Atomic uint32_t *word,
                            uint32_t target, uint64_t deadline_ns);
cohort_status shm_check_abort(coh_shm *s);
void shm_futex_wake(_Atomic uint32_t *word);
void shm_wait_defaults(coh_shm *s);
/* n local ranks of g outnumber the cpus their machine offers them: the
 * union of its ranks' cpu sets from the rendezvous (coh_group_cpus), the
 * same on every local rank. */
int shm_oversubscribed(const cohort_group *g, int n);

/* Waits until local rank q published phase `target`. */
static inline cohort_status shm_wait_rank(shm_op *o, int q, uint32_t target)
{
    if (shm_reached(atomic_load_explicit(&shm_ctl_of(o->s, q)->arrive, memory_order_acquire),
                    target))
        return COHORT_OK;
    return shm_wait_slow(o, q, target);
}

/* Waits until every local rank published phase `target`. */
static inline cohort_status shm_wait_all(shm_op *o, uint32_t target)
{
    coh_shm *s = o->s;
    if (shm_reached(s->min_seen, target))
        return COHORT_OK;
    /* Caches the least phase actually seen, not target: a ring root that
     * runs ahead waits for p - K at every call, and with target cached it
     * would pull every reader's arrive line at every call (one cache-line
     * transfer per reader and call); with the phases seen, once per
     * about K calls. */
    int32_t least = INT32_MAX;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me)
            continue;
        _Atomic uint32_t *a = &shm_ctl_of(s, q)->arrive;
        uint32_t v = atomic_load_explicit(a, memory_order_acquire);
        if (!shm_reached(v, target)) {
            cohort_status st = shm_wait_slow(o, q, target);
            if (st != COHORT_OK)
                return st;
            v = atomic_load_explicit(a, memory_order_acquire);
        }
        int32_t d = (int32_t)(v - target);
        if (d < least)
            least = d;
    }
    s->min_seen = least == INT32_MAX ? target : target + (uint32_t)least;
    return COHORT_OK;
}

/* Rule W: before writing my buffer for the next phase. */
static inline cohort_status shm_claim(shm_op *o) { return shm_wait_all(o, o->s->phase); }

/* The publisher's half of the futex pairing: value into word (a futex word
 * owned by this rank), then whether anyone counted itself asleep on it.
 * Either the sleeper's re-check sees the value or the publisher sees the
 * sleeper - no lost wake-up:
 *  - fence (s->light 0): a seq_cst store and load against the sleeper's
 *    seq_cst count-then-recheck (Dekker). On x86 the store is an xchg that
 *    drains the store buffer at every publish, on every rank;
 *  - light (1): a release store, a compiler barrier and a relaxed load;
 *    the rare sleeper, after counting itself, runs
 *    membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) (shm_membar_sleeper) before
 *    its re-check: that puts a full barrier in every registered rank that
 *    is running, so the publisher's store and load are ordered as if it had
 *    fenced between them (the compiler barrier keeps them in program
 *    order) - an asymmetric barrier, as liburcu's and folly's. Safe only
 *    if every rank that may sleep on the word does it: the mode is the
 *    group's, decided once at attach (docs/shm.md "Publishing").
 * Returns whether a sleeper was seen (the caller wakes it). */
static inline int shm_pub_store_as(int light, _Atomic uint32_t *word, _Atomic uint32_t *waiters,
                                   uint32_t value)
{
    if (light) {
        atomic_store_explicit(word, value, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
        return atomic_load_explicit(waiters, memory_order_relaxed) != 0;
    }
    atomic_store_explicit(word, value, memory_order_seq_cst);
    return atomic_load_explicit(waiters, memory_order_seq_cst) != 0;
}

static inline int shm_pub_store(const coh_shm *s, _Atomic uint32_t *word,
                                _Atomic uint32_t *waiters, uint32_t value)
{
    return shm_pub_store_as(s->light, word, waiters, value);
}

/* The same pairing for a publish that already stored its word (a chunk's
 * stamp; shm_bell_ring): the store is release in light mode, seq_cst in
 * fence mode (shm_pub_stamp), and this reads the sleepers' count. */
static inline void shm_pub_stamp(const coh_shm *s, _Atomic uint32_t *word, uint32_t value)
{
    if (s->light)
        atomic_store_explicit(word, value, memory_order_release);
    else
        atomic_store_explicit(word, value, memory_order_seq_cst);
}

static inline int shm_pub_sleepers(const coh_shm *s, _Atomic uint32_t *waiters)
{
    if (s->light) {
        atomic_signal_fence(memory_order_seq_cst);
        return atomic_load_explicit(waiters, memory_order_relaxed) != 0;
    }
    return atomic_load_explicit(waiters, memory_order_seq_cst) != 0;
}

/* Publishes the next phase (shm_pub_store's pairing with the sleepers of
 * my arrive word). light: the light publish, only if the group took it. */
static inline void shm_publish_as(coh_shm *s, int light)
{
    shm_ctl *me = shm_ctl_of(s, s->me);
    uint32_t p = ++s->phase;
    /* Same cache line as arrive, so free: lets a waiter that shares our
     * CPU yield at once instead of spinning (sched_getcpu reads rseq). */
    atomic_store_explicit(&me->cpu, sched_getcpu(), memory_order_relaxed);
    if (shm_pub_store_as(light, &me->arrive, &me->waiters, p))
        shm_futex_wake(&me->arrive);
}

/* The fenced publish, in either mode (a seq_cst store and load pair with
 * any sleeper, membarrier or not). Every phase but a ring call's: in the
 * exchanges where each rank publishes and then waits for the others
 * (barrier, all_to_all, all_gather, all_reduce), the fence makes the
 * publish visible at once, where a plain store waits in the store buffer
 * while the rank spins on its peer's line - measured, quiet, one binary,
 * fence vs light, 8 pairs: barrier x1.16 (every pair slower), all_to_all
 * 8 B x1.27, all_gather 8 B x1.19, all_reduce 8 B x1.05 slower light
 * (docs/performance.md, "The light publish"). */
static inline void shm_publish(coh_shm *s) { shm_publish_as(s, 0); }

/* A ring call's publish (a broadcast or scatter root's record, a reader's
 * done reading, a gather or reduce leaf's record and its root's end): the
 * light one when the group took it. The root returns to the program after
 * it and its readers are not spinning on its line yet (a root runs ahead),
 * so the store may drain late; there it saves the fence: scatter 8 B
 * x0.84, reduce 8 B x0.90 (same A/B). */
static inline void shm_publish_ring(coh_shm *s) { shm_publish_as(s, s->light); }

#endif
