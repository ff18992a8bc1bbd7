/*
 * shm_p2p.c - send/recv between ranks of one host through the pair's
 * channel in the segment (layout and protocol: transport/shm/shm_seg.h,
 * "Channels"; design and measurements: docs/shm.md "Send and receive").
 *
 * A message is one or more chunks. Every chunk carries the sender's header
 * (the same normalised coh_hdr tcp puts on the wire; step = chunk index,
 * len = the message's bytes), and the receiver compares it with its own
 * before copying the chunk out: a count, dtype, tag or sequence mismatch
 * fails the group with COHORT_ERR_CONTRACT and leaves the receive buffer
 * untouched; the sender learns it through the abort word at its next wait
 * or call. Messages of one ordered pair are matched in order (per-pair
 * seq), which a single-producer single-consumer channel gives for free.
 *
 * Copies: up to COHORT_SHM_P2P_BYTES a message is one chunk (one copy in,
 * one out, and the sender does not wait for the receiver while a slot is
 * free: eager); larger ones are pipelined through the channel's slots;
 * from COHORT_SHM_SINGLE_COPY_BYTES, where the segment agreed on single
 * copy (the same decision as for the collectives), the sender publishes
 * only its buffer's address; the receiver answers with where the
 * message's tail goes in its own buffer and reads the rest with
 * process_vm_readv while the sender writes the tail with
 * process_vm_writev (the split, p2p_tail) - the sender returns once the
 * receiver has read its part.
 *
 * Progress: a rank waiting in send or recv keeps taking every other peer's
 * chunks into a private stash (like tcp's stash of early messages), so two
 * ranks that send to each other before receiving, or a ring of them,
 * never wait for each other: a send completes once its chunks are in the
 * channel (or in the receiver's stash), whatever its size, as long as the
 * receiver is inside some send or recv; the header of a stashed message is
 * compared when a recv takes it, before a byte lands in its buffer.
 *
 * The stash is capped (COHORT_SHM_P2P_STASH_BYTES, messages plus their
 * heads): a message that would take it over the cap is left in its
 * channel, and its sender blocks on the full channel until a recv takes
 * the stashed ones (backpressure, as MPI's rendezvous sends) - a peer
 * sending what is not asked for cannot grow a rank's memory without limit.
 * One exception keeps the common pattern deadlock-free: a rank waiting in
 * a send to q takes q's chunks whatever the cap, since q may itself be in
 * a send to this rank waiting for the same (two ranks that send to each
 * other first). Beyond that, a program that needs more than the cap
 * buffered at a third rank to make progress (a ring of sends larger than
 * the cap, MPI's "unsafe" programs) waits until COHORT_TIMEOUT (a warning
 * in the log, once, names the cap); raise it for such programs.
 */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "coll/fail/fail.h"
#include "coll/shm/shm_coll.h"
#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_seg.h"

static inline cohort_status up(cohort_group *g, cohort_status st)
{
    return st == COHORT_OK ? st : coh_coll_transport_failed(g, st);
}

/* Only what the channels' waits read (shm_wait.c, shm_cma.c): shm_op is
 * ~1.4 KB, mostly the wait's report buffer, set up by the wait itself
 * (w_init) only when a call has to wait - zeroing it all cost every 8 B
 * send and recv tens of ns. */
static void op_init(shm_op *o, coh_shm *s, const coh_call *c, int q)
{
    o->w_init = 0;
    o->ring_wait = 0;
    o->nt = 0;
    o->s = s;
    o->g = s->g;
    o->c = c;
    o->waiting_for = s->g->local_ranks[q];
}

int coh_shm_p2p_peer(const coh_shm *s, int peer)
{
    const cohort_group *g = s ? s->g : NULL;
    if (!s || !s->p2p_bytes || !s->p2p_out || !g->peers || peer < 0 || peer >= g->size ||
        g->peers[peer].host != g->my_host)
        return -1;
    int q = g->peers[peer].local_index;
    return q >= 0 && q < s->n && q != s->me && g->local_ranks[q] == peer ? q : -1;
}

/* The split single copy: the bytes at the end of a bytes-long message the
 * sender writes into the receiver's buffer while the receiver reads the
 * rest - half, in whole pages. Not when the ranks outnumber the cpus (one
 * cpu would run both halves, plus the hand-off). Both sides compute it
 * (oversub is agreed), so the sender checks what the receiver asked. */
static size_t p2p_tail(const coh_shm *s, size_t bytes)
{
    return s->oversub ? 0 : bytes / 2 & ~(size_t)4095;
}

/* Tells the sender of the single copy t on ch where its tail goes (tail
 * bytes at addr; 0: the receiver reads it whole). */
static void p2p_req(coh_shm *s, shm_chan *ch, int q, uint32_t t, uint64_t addr, size_t tail)
{
    atomic_store_explicit(&ch->tail_addr, addr, memory_order_relaxed);
    atomic_store_explicit(&ch->tail_bytes, (uint64_t)tail, memory_order_relaxed);
    shm_word_publish(s, &ch->req, &ch->ack_waiters, t + 1);
    shm_bell_ring(s, q);
}

/* ---- the stash: chunks taken from the other channels while waiting ---- */

static cohort_status bad_chunk(coh_shm *s, const coh_call *c, int q, uint32_t k, const char *what)
{
    return coh_group_fail(s->g, COHORT_ERR_PROTOCOL,
                          "shm %s #%llu: rank %d's channel: chunk %u %s (a corrupted segment?)",
                          coh_coll_name(c->coll), (unsigned long long)c->seq,
                          s->g->local_ranks[q], k, what);
}

const char *shm_chunk_parse(const unsigned char *slot, const shm_chunk_ctx *x, coh_hdr *h,
                            shm_chan_desc *d, shm_chan_head *hd)
{
    /* the head after its stamp (the publication word, read by the wait) */
    atomic_init(&hd->stamp, 0u);
    memcpy((unsigned char *)hd + sizeof hd->stamp, slot + sizeof hd->stamp,
           sizeof *hd - sizeof hd->stamp);
    memset(h, 0, sizeof *h);
    h->magic = COH_HDR_MAGIC;
    h->kind = hd->kind;
    h->coll = COH_COLL_SEND;
    h->dtype = hd->dtype;
    h->redop = -1; /* send and recv take no op (the API refuses one) */
    h->group = x->group;
    h->gen = x->gen;
    h->seq = hd->seq;
    h->count = hd->count;
    h->root = hd->dst;
    h->tag = hd->tag;
    h->step = hd->step;
    h->src = hd->src;
    memset(d, 0, sizeof *d);
    d->mode = hd->mode;
    if (hd->magic != SHM_CHAN_MAGIC)
        return "has no message header";
    if (hd->kind != COH_MSG_P2P)
        return "is not a send/recv message";
    if (hd->src != x->src || hd->dst != x->dst)
        return "names another sender or receiver";
    if (hd->step != x->step)
        return "is out of sequence";
    size_t es = cohort_dtype_size((cohort_dtype)hd->dtype);
    if (!es)
        return "names no dtype";
    if (__builtin_mul_overflow(hd->count, (uint64_t)es, &h->len))
        return "announces a length its count and dtype do not give";
    if (x->len != UINT64_MAX && h->len != x->len)
        return "announces another length than its message's first chunk";
    if (d->mode == SHM_CHAN_CMA) {
        d->bytes = hd->u.d.bytes;
        d->addr = hd->u.d.addr;
        if (x->len != UINT64_MAX || h->len < x->cma_min || h->len >= x->cma_end ||
            d->bytes != h->len)
            return "announces a single copy where none is due";
        return NULL;
    }
    if (d->mode != SHM_CHAN_COPY)
        return "has an unknown mode";
    /* a message of <= SHM_CHAN_INLINE bytes is inline, whole; the slot
     * holds at least 64 data bytes, so it is always a single chunk */
    d->bytes = h->len <= SHM_CHAN_INLINE ? h->len : hd->u.d.bytes;
    uint64_t have = x->len == UINT64_MAX ? 0 : x->have;
    if (have > h->len || d->bytes != COH_MIN(x->slot_bytes, h->len - have))
        return "has an unexpected length";
    return NULL;
}

/* Where a parsed copy chunk's data is: inline in the (copied) head, or in
 * its data slot. */
static inline const unsigned char *chunk_data(const unsigned char *dslot, const coh_hdr *h,
                                              const shm_chan_head *hd)
{
    return h->len <= SHM_CHAN_INLINE ? hd->u.inl : dslot;
}

/* The sender's call site, for a report about the chunk in slot: line 1
 * (its full header), which a small message's receiver otherwise never
 * reads. Only what the head does not carry is taken from it. */
static void chunk_site(const unsigned char *slot, coh_hdr *h)
{
    coh_hdr full;
    memcpy(&full, slot + SHM_LINE, sizeof full);
    h->site = full.site;
    h->line = full.line;
}

/* The context of chunk `step` from local rank q, continuing a message of
 * len bytes of which `have` were taken (len UINT64_MAX: a first chunk). */
static shm_chunk_ctx chunk_ctx(const coh_shm *s, int q, uint32_t step, uint64_t len, size_t have)
{
    const cohort_group *g = s->g;
    shm_chunk_ctx x = {.src = g->local_ranks[q],
                       .dst = g->rank,
                       .group = g->id,
                       .gen = g->generation,
                       .step = step,
                       .len = len,
                       .have = have,
                       .slot_bytes = s->p2p_bytes,
                       .cma_min = s->cma && (s->cma_ops >> COH_COLL_SEND & 1u)
                                      ? s->cma_from[COH_COLL_SEND]
                                      : UINT64_MAX,
                       .cma_end = s->cma_to[COH_COLL_SEND] == SIZE_MAX
                                      ? UINT64_MAX
                                      : s->cma_to[COH_COLL_SEND]};
    return x;
}

/* ---- the stash: chunks taken from the other channels while waiting ---- */

typedef struct drain_arg {
    shm_op *o;
    int skip;  /* the channel the waiting recv reads itself, or -1 */
    int owner; /* the peer a waiting send waits for: taken past the cap, or -1 */
} drain_arg;

static size_t stash_cost(uint64_t len) { return sizeof(shm_p2p_msg) + (size_t)len; }

/* Takes every chunk published to this rank (except on `skip`'s channel)
 * into the stash, a new message only while the stash stays within its
 * cap (or from `owner`): see the file's comment. A single-copy message is
 * read whole (its sender waits for our ack anyway). Headers are compared
 * with the call when a recv takes the message; here what the channel
 * protocol itself guarantees (shm_chunk_parse). */
static cohort_status drain(void *arg_)
{
    drain_arg *a = arg_;
    shm_op *o = a->o;
    coh_shm *s = o->s;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me || q == a->skip)
            continue;
        shm_chan *ch = shm_chan_of(s, q, s->me);
        uint32_t t = s->p2p_in[q];
        unsigned char *slot;
        while (shm_chan_ready(slot = shm_chan_slot(s, ch, t), t)) {
            /* the last message, kept apart: appending walks no list (a
             * peer that sends ahead fills the stash with up to its cap of
             * messages, a walk each would be quadratic in them) */
            shm_p2p_msg *last = s->p2p_last[q], *m = NULL;
            if (last && last->have < last->h.len)
                m = last; /* the last message is still incomplete */
            coh_hdr h;
            shm_chan_desc d;
            shm_chan_head hd;
            shm_chunk_ctx x = chunk_ctx(s, q, m ? m->chunks : 0u, m ? m->h.len : UINT64_MAX,
                                        m ? m->have : 0);
            const char *bad = shm_chunk_parse(slot, &x, &h, &d, &hd);
            if (bad)
                return bad_chunk(s, o->c, q, h.step, bad);
            if (!m) {
                /* a new message: within the cap, or leave it in the channel
                 * (its sender blocks once the channel is full) */
                if (q != a->owner && (h.len > s->p2p_stash_cap ||
                                      stash_cost(h.len) > s->p2p_stash_cap - s->p2p_stash_used)) {
                    if (s->p2p_held < 0) /* once per segment: why a send may wait */
                        coh_warn("shm send/recv: holding back rank %d's messages (and its "
                                 "sends) until a recv takes some of the %zu bytes this rank "
                                 "holds for recvs not yet made (COHORT_SHM_P2P_STASH_BYTES=%zu)",
                                 s->g->local_ranks[q], s->p2p_stash_used, s->p2p_stash_cap);
                    s->p2p_held = q;
                    /* the wait's timeout error says why (the log line
                     * above comes once per segment); "this rank (N)" reads
                     * "rank N" in the peers' copy of the error (peer_view) */
                    if (!o->w.note[0])
                        snprintf(o->w.note, sizeof o->w.note,
                                 "the shm send/recv stash of this rank (%d) reached its cap "
                                 "(COHORT_SHM_P2P_STASH_BYTES=%zu; %zu bytes held for recvs not "
                                 "yet made): rank %d's %llu-byte message and its later sends "
                                 "wait for a recv of those; raise the cap for this program",
                                 s->g->rank, s->p2p_stash_cap, s->p2p_stash_used,
                                 s->g->local_ranks[q], (unsigned long long)h.len);
                    break;
                }
                if (h.len > SIZE_MAX - sizeof *m ||
                    !(m = coh_malloc(stash_cost(h.len))))
                    return coh_group_fail(s->g, COHORT_ERR_NOMEM,
                                          "shm: no memory to hold a %llu-byte message from rank "
                                          "%d that no recv has asked for yet",
                                          (unsigned long long)h.len, s->g->local_ranks[q]);
                m->next = NULL;
                chunk_site(slot, &h); /* the slot is reused once acked: keep it now */
                m->h = h;
                m->have = 0;
                m->chunks = 0;
                if (last)
                    last->next = m;
                else
                    s->p2p_stash[q] = m;
                s->p2p_last[q] = m;
                s->p2p_stash_used += stash_cost(h.len);
            }
            if (d.mode == SHM_CHAN_CMA) {
                shm_op r = *o;
                r.w_init = 0;
                p2p_req(s, ch, q, t, 0, 0); /* read whole: its sender waits */
                cohort_status st = up(s->g, shm_cma_read(&r, q, m->data, d.addr, (size_t)d.bytes));
                if (st != COHORT_OK)
                    return st;
            } else {
                coh_shm_copy(m->data + m->have, chunk_data(shm_chan_dslot(s, ch, t), &h, &hd),
                             (size_t)d.bytes, 0);
            }
            m->have += (size_t)d.bytes;
            m->chunks++;
            shm_word_publish(s, &ch->ack, &ch->ack_waiters, ++t);
            shm_bell_ring(s, q);
            s->p2p_in[q] = t;
        }
    }
    return COHORT_OK;
}

static inline cohort_status wait_word(shm_op *o, int q, _Atomic uint32_t *word, uint32_t target,
                                      int skip, int owner, int spin)
{
    if (shm_reached(atomic_load_explicit(word, memory_order_acquire), target))
        return COHORT_OK;
    drain_arg a = {o, skip, owner};
    return up(o->g, shm_wait_multi(o, q, word, target, drain, &a, spin));
}

cohort_status coh_shm_send(coh_shm *s, const coh_call *c, int q, const coh_hdr *h,
                           const void *buf_, size_t bytes)
{
    const unsigned char *buf = buf_;
    shm_op o;
    op_init(&o, s, c, q);
    shm_chan *ch = shm_chan_of(s, s->me, q);
    size_t chunk = s->p2p_bytes;
    int cma = shm_cma_use(s, COH_COLL_SEND, bytes);
    uint32_t t = s->p2p_out[q];
    uint32_t nchunks = cma || bytes == 0 ? 1u : (uint32_t)((bytes + chunk - 1) / chunk);
    size_t off = 0;
    cohort_status st;
    /* the receiver's hint (shm_wait.c): where I run, once a message */
    if (s->p2p_spin_ns)
        atomic_store_explicit(&shm_ctl_of(s, s->me)->cpu, sched_getcpu(), memory_order_relaxed);
    for (uint32_t k = 0; k < nchunks; k++, t++) {
        /* head t % HEADS (and data slot t % SLOTS, if the chunk has data
         * there) is free once its previous chunk was consumed; the ack line
         * (the receiver writes it per chunk) is read only when the last
         * value read says it may be taken: once per HEADS small messages */
        uint32_t need = t + 1 - (cma || bytes <= SHM_CHAN_INLINE ? SHM_P2P_HEADS : SHM_P2P_SLOTS);
        if (!shm_reached(s->p2p_acked[q], need)) {
            st = wait_word(&o, q, &ch->ack, need, -1, q, 0);
            if (st != COHORT_OK)
                return st;
            s->p2p_acked[q] = atomic_load_explicit(&ch->ack, memory_order_acquire);
        }
        unsigned char *slot = shm_chan_slot(s, ch, t);
        size_t len = cma ? bytes : COH_MIN(chunk, bytes - off);
        /* line 1: the full header, for reports only (it stays in this
         * core's cache: the receiver of a well-formed message never reads
         * it) */
        coh_hdr hh = *h;
        hh.step = k;
        memcpy(slot + SHM_LINE, &hh, sizeof hh);
        /* line 0: the head, built here and written at once, its stamp last */
        shm_chan_head hd;
        memset(&hd, 0, sizeof hd);
        hd.magic = SHM_CHAN_MAGIC;
        hd.kind = h->kind;
        hd.mode = cma ? SHM_CHAN_CMA : SHM_CHAN_COPY;
        hd.dtype = h->dtype;
        hd.src = h->src;
        hd.dst = h->root;
        hd.tag = h->tag;
        hd.step = k;
        hd.seq = h->seq;
        hd.count = h->count;
        if (!cma && bytes <= SHM_CHAN_INLINE) {
            memcpy(hd.u.inl, buf, bytes);
        } else {
            hd.u.d.bytes = len;
            hd.u.d.addr = cma ? (uint64_t)(uintptr_t)buf : 0;
            if (!cma)
                coh_shm_copy(shm_chan_dslot(s, ch, t), buf + off, len, 0);
        }
        off += cma ? 0 : len;
        memcpy(slot + sizeof hd.stamp, (unsigned char *)&hd + sizeof hd.stamp,
               sizeof hd - sizeof hd.stamp);
        /* pairs with a sleeping receiver's count-then-recheck on its bell
         * (shm_bell_ring reads the count): seq_cst, or release in the
         * light mode (shm_pub_store) */
        shm_pub_stamp(s, shm_chan_stamp(slot), t + 1);
        shm_bell_ring(s, q);
    }
    s->p2p_out[q] = t;
    if (!cma)
        return COHORT_OK;
    /* The receiver's answer: where the tail goes, or nothing (it reads the
     * whole message). It may ask only for the split both sides compute. */
    st = wait_word(&o, q, &ch->req, t, -1, q, 0);
    if (st != COHORT_OK)
        return st;
    uint64_t tail = atomic_load_explicit(&ch->tail_bytes, memory_order_relaxed);
    if (tail) {
        if (tail != p2p_tail(s, bytes))
            return coh_group_fail(s->g, COHORT_ERR_PROTOCOL,
                                  "shm send #%llu: rank %d asked for a %llu-byte tail of a "
                                  "%zu-byte single copy, not %zu (a corrupted segment?)",
                                  (unsigned long long)c->seq, s->g->local_ranks[q],
                                  (unsigned long long)tail, bytes, p2p_tail(s, bytes));
        st = up(s->g, shm_cma_write(&o, q, atomic_load_explicit(&ch->tail_addr,
                                                                 memory_order_relaxed),
                                    buf + bytes - (size_t)tail, (size_t)tail));
        if (st != COHORT_OK)
            return st;
        shm_word_publish(s, &ch->tail_done, &ch->pub_waiters, t);
        shm_bell_ring(s, q);
    }
    /* The receiver reads my buffer: it is the caller's again only after
     * the receiver's ack. */
    st = wait_word(&o, q, &ch->ack, t, -1, q, 0);
    if (st == COHORT_OK)
        s->p2p_acked[q] = t;
    return st;
}

cohort_status coh_shm_recv(coh_shm *s, const coh_call *c, int q, const coh_hdr *h, void *buf_,
                           size_t bytes)
{
    unsigned char *buf = buf_;
    shm_op o;
    op_init(&o, s, c, q);
    shm_chan *ch = shm_chan_of(s, q, s->me);
    int nt = bytes >= s->nt_bytes;
    size_t off = 0;
    uint32_t k = 0;
    cohort_status st;
    coh_hdr exp = *h;
    /* a message taken earlier: compare, copy what came, go on from there */
    shm_p2p_msg *m = s->p2p_stash[q];
    if (m) {
        exp.step = 0;
        if (coh_hdr_match(&exp, &m->h) != COH_FIELD_NONE)
            return up(s->g, coh_tp_mismatch(s->g, c, s->g->local_ranks[q], &exp, &m->h));
        coh_shm_copy(buf, m->data, m->have, nt);
        off = m->have;
        k = m->chunks;
        s->p2p_stash[q] = m->next;
        if (!m->next)
            s->p2p_last[q] = NULL;
        s->p2p_stash_used -= stash_cost(m->h.len);
        coh_free(m);
        if (off >= bytes)
            goto done;
    }
    for (;; k++) {
        uint32_t t = s->p2p_in[q];
        unsigned char *slot = shm_chan_slot(s, ch, t);
        st = wait_word(&o, q, shm_chan_stamp(slot), t + 1, q, -1, bytes <= SHM_P2P_SPIN_BYTES);
        if (st != COHORT_OK)
            return st;
        coh_hdr got;
        shm_chan_desc d;
        shm_chan_head hd;
        /* what the protocol guarantees (a corrupted slot is a protocol
         * error, not a mismatch), then the contract check: before a byte of
         * this message lands in buf (every chunk's header is compared; the
         * first decides). Together they bound d.bytes by the slot and by
         * what is left of buf. */
        shm_chunk_ctx x = chunk_ctx(s, q, k, k ? (uint64_t)bytes : UINT64_MAX, off);
        const char *bad = shm_chunk_parse(slot, &x, &got, &d, &hd);
        if (bad)
            return bad_chunk(s, c, q, k, bad);
        exp.step = k;
        if (coh_hdr_match(&exp, &got) != COH_FIELD_NONE) {
            chunk_site(slot, &got);
            return up(s->g, coh_tp_mismatch(s->g, c, s->g->local_ranks[q], &exp, &got));
        }
        if (d.mode == SHM_CHAN_CMA) {
            /* the split: the sender writes the tail while I read the rest */
            size_t tail = p2p_tail(s, bytes);
            p2p_req(s, ch, q, t, tail ? (uint64_t)(uintptr_t)(buf + bytes - tail) : 0, tail);
            st = up(s->g, shm_cma_read(&o, q, buf, d.addr, bytes - tail));
            if (st == COHORT_OK && tail)
                st = wait_word(&o, q, &ch->tail_done, t + 1, q, -1, 0);
            /* An abort while reading: the sender may have returned and
             * reused its buffer; what was read is not reported as data. */
            if (st == COHORT_OK)
                st = up(s->g, shm_check_abort(s));
            if (st != COHORT_OK)
                return st;
            off = bytes;
        } else {
            coh_shm_copy(buf + off, chunk_data(shm_chan_dslot(s, ch, t), &got, &hd),
                         (size_t)d.bytes, nt);
            off += (size_t)d.bytes;
        }
        s->p2p_in[q] = t + 1;
        shm_word_publish(s, &ch->ack, &ch->ack_waiters, t + 1);
        shm_bell_ring(s, q);
        if (off >= bytes)
            break;
    }
done:
#if defined(__x86_64__)
    if (nt)
        _mm_sfence();
#endif
    return COHORT_OK;
}
