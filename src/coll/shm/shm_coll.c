/*
 * shm_coll.c - the collectives on the host segment, built from the phase
 * protocol of shm_seg.h (claim, write, publish, wait, check, read).
 *
 * Contract check: on the first phase of every call every local rank writes
 * its fingerprint - 24 exact bytes into its control line (shm_fp, next to
 * the arrive word peers read anyway), the full coh_hdr into its buffer for
 * reports - and waits for and compares every peer's before reading any
 * payload. So every
 * rank fails a mismatched call (count, dtype, op, reduce op, root...) with
 * COHORT_ERR_CONTRACT and leaves its receive buffer untouched, and a wrong
 * root cannot make ranks wait for data nobody sends. Later phases carry a
 * header per buffer too (step = phase index in the call, len = payload
 * bytes), checked by whoever reads that buffer.
 *
 * Data movement (n local ranks, S bytes per buffer):
 *   all_reduce small (<= small_bytes): one phase - everyone copies its
 *     input in, everyone reduces all n inputs (same order on every rank, so
 *     the results are bitwise identical).
 *   all_reduce large: per piece two phases - A: copy in the slices other
 *     ranks reduce; each rank reduces its own 1/n slice reading its private
 *     input plus the peers' copies, into its other buffer; B: it publishes
 *     that slice, everyone copies all slices out.
 *   broadcast/scatter: the root publishes pieces, readers copy out; the
 *     root runs at most one piece ahead (double buffering).
 *   gather: ranks publish pieces, the root copies out.
 *   reduce: like all_reduce large (work split over all ranks), but only
 *     the root copies results out. all_gather, reduce_scatter, all_to_all:
 *     one phase per piece, everybody publishes and reads.
 *
 * AVG is reduced as SUM here (except over the whole group, where the fold
 * divides: avg_div) and divided ONCE by the caller (coh_coll_run,
 * src/coll/select.c), which knows the whole group's size: hierarchical
 * algorithms reduce through this segment first and across hosts after, so
 * dividing by the local size here would be wrong.
 */
#include <stdio.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "util/bytes.h"
#include "util/futex.h"
#include "coll/fail/fail.h"
#include "coll/shm/ring_copy.h"
#include "coll/shm/shm_coll.h"
#include "reduce/reduce.h"
#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_mem.h"
#include "transport/shm/shm_seg.h"

static const uint8_t dt_size[COHORT_DTYPE_COUNT] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};

/* Per-call steps of the small calls are COH_INLINE (util.h): a call's
 * frame and saved registers were ~20 instructions of each (callgrind). */

/* An AVG on a segment that holds the whole group is divided inside the
 * fold (coh_avg_folds: float16/bfloat16 in float32 before their one
 * rounding, float32/float64 each piece as it is reduced) and coh_coll_run
 * does not divide again: the "shm" algorithm is marked avg_in_fold.
 * Otherwise AVG is reduced as SUM (see above). */
static int avg_div(const coh_shm *s, const coh_call *c)
{
    return coh_avg_folds(c->dtype, c->redop) && s->n == s->g->size ? s->n : 0;
}
#define DATA(b) ((b) + SHM_LINE)
/* memcpy that evaluates its pointers only for a non-empty copy (NULL
 * buffers are legal with count 0). */
#define CPY(d, s, n)                                                                               \
    do {                                                                                           \
        size_t n_ = (n);                                                                           \
        if (n_)                                                                                    \
            copy_fast((d), (s), n_);                                                               \
    } while (0)

/* ---- copies between user buffers and the segment ----
 *
 * Not memcpy for large copies: glibc 2.36 copies them with `rep movsb`,
 * which on this AMD machine drops from ~40 GB/s to ~2.3 GB/s when the
 * destination lies 1-31 bytes after the source modulo 4 KiB - i.e. for
 * some alignments of the user's buffer against the 64-byte aligned slots
 * (a tensor view a few elements in). Plain vector loops run at full speed
 * for every alignment. Small copies keep memcpy (no rep movsb there). */

#define COPY_VEC_MIN 2048

#if defined(__x86_64__)
__attribute__((target("avx2"))) static void copy_avx2(unsigned char *d, const unsigned char *s,
                                                      size_t n, int nt)
{
    if (nt) { /* streaming stores need an aligned destination */
        size_t head = COH_MIN((size_t)(-(uintptr_t)d & 31u), n);
        memcpy(d, s, head);
        d += head, s += head, n -= head;
    }
    for (; n >= 128; n -= 128, d += 128, s += 128) {
        __m256i a = _mm256_loadu_si256((const __m256i *)s);
        __m256i b = _mm256_loadu_si256((const __m256i *)(s + 32));
        __m256i c = _mm256_loadu_si256((const __m256i *)(s + 64));
        __m256i e = _mm256_loadu_si256((const __m256i *)(s + 96));
        if (nt) {
            _mm256_stream_si256((__m256i *)d, a);
            _mm256_stream_si256((__m256i *)(d + 32), b);
            _mm256_stream_si256((__m256i *)(d + 64), c);
            _mm256_stream_si256((__m256i *)(d + 96), e);
        } else {
            _mm256_storeu_si256((__m256i *)d, a);
            _mm256_storeu_si256((__m256i *)(d + 32), b);
            _mm256_storeu_si256((__m256i *)(d + 64), c);
            _mm256_storeu_si256((__m256i *)(d + 96), e);
        }
    }
    memcpy(d, s, n);
}
#endif

static void copy_sse2(unsigned char *d, const unsigned char *s, size_t n, int nt)
{
#if defined(__x86_64__)
    if (nt) {
        size_t head = COH_MIN((size_t)(-(uintptr_t)d & 15u), n);
        memcpy(d, s, head);
        d += head, s += head, n -= head;
    }
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
        if (nt) {
            _mm_stream_si128((__m128i *)d, a);
            _mm_stream_si128((__m128i *)(d + 16), b);
            _mm_stream_si128((__m128i *)(d + 32), c);
            _mm_stream_si128((__m128i *)(d + 48), e);
        } else {
            _mm_storeu_si128((__m128i *)d, a);
            _mm_storeu_si128((__m128i *)(d + 16), b);
            _mm_storeu_si128((__m128i *)(d + 32), c);
            _mm_storeu_si128((__m128i *)(d + 48), e);
        }
    }
#else
    (void)nt;
#endif
    memcpy(d, s, n);
}

/* nt: non-temporal stores - the destination is not read first (no
 * read-for-ownership) and does not evict the segment from the cache; for
 * receive buffers too large to stay cached anyway. */
/* 4-8 KiB on Intel: glibc's memcpy (`rep movsb` there) moves lines the
 * other core just wrote faster than the vector loops - 2 ranks apart,
 * session 17, p50: gather and scatter of 8 KiB a rank 1.33-1.40 -> 0.88-0.93
 * us, broadcast 8 KiB 1.24 -> 0.90, all_gather 4 KiB a rank 1.75 -> 1.24;
 * 2 KiB and 16 KiB copies were even or slower with it. Not on AMD: the
 * `rep movsb` cliff above (this Intel host copies 150-240 GB/s cached at
 * every offset, bench: results/2026-12-04-s17-memcpy). */
#define COPY_REP_MIN 4096
#define COPY_REP_MAX 8192
static int rep_ok(void)
{
#if defined(__x86_64__)
    static int intel = -1; /* benign race: every thread computes the same */
    if (intel < 0)
        intel = __builtin_cpu_is("intel") ? 1 : 0;
    return intel;
#else
    return 0;
#endif
}

static void copy_big(void *dst, const void *src, size_t n, int nt)
{
    /* here, not in the inline copy_fast: a branch more there slowed the
     * ring's 2 KiB gather 0.37 -> 0.66 us (code layout) */
    if (!nt && n >= COPY_REP_MIN && n <= COPY_REP_MAX && rep_ok()) {
        memcpy(dst, src, n);
        return;
    }
#if defined(__x86_64__)
    static int avx2 = -1; /* benign race: every thread computes the same */
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (avx2) {
        copy_avx2(dst, src, n, nt);
        return;
    }
#endif
    copy_sse2(dst, src, n, nt);
}


static inline void copy_fast(void *dst, const void *src, size_t n)
{
    if (n <= SHM_RING_INLINE) /* an 8 B all_reduce's input: no libc call */
        coh_small_copy(dst, src, n);
    else if (n < COPY_VEC_MIN)
        memcpy(dst, src, n);
    else
        copy_big(dst, src, n, 0);
}

/* A gather or reduce leaf's payload into its ring slot and the root's copy
 * out of it: 33-64 bytes by 16-byte moves (coh_copy_narrow, out of line),
 * the rest as CPY (docs/shm.md "Ring copies of 33-64 B"). Not in
 * copy_fast nor the broadcast's ring_one: measured, the same branch inline
 * there moved 512 B-2 KiB broadcasts x1.3-1.8 by how the file compiled. */
static COH_INLINE void ring_copy(void *dst, const void *src, size_t n)
{
    if (n > 32 && n <= 64)
        coh_copy_narrow(dst, src, n);
    else
        CPY(dst, src, n);
}

/* Copy into recv: streaming when the call is large (o->nt). */
#define OUT(o, d, s, n)                                                                            \
    do {                                                                                           \
        size_t m_ = (n);                                                                           \
        if (m_) {                                                                                  \
            if ((o)->nt && m_ >= COPY_VEC_MIN)                                                     \
                copy_big((d), (s), m_, 1);                                                         \
            else                                                                                   \
                copy_fast((d), (s), m_);                                                           \
        }                                                                                          \
    } while (0)

/* The segment's calls return a failure the transport recorded, and the
 * group learns it here, before anything else waits on it (transport.h:
 * a transport never changes group state). Free on the fast path: the
 * status is compared anyway. */
static inline cohort_status cs_up(cohort_group *g, cohort_status st)
{
    return st == COHORT_OK ? st : coh_coll_transport_failed(g, st);
}
static inline cohort_status cs_claim(shm_op *o) { return cs_up(o->g, shm_claim(o)); }
static inline cohort_status cs_wait_all(shm_op *o, uint32_t target)
{
    return cs_up(o->g, shm_wait_all(o, target));
}
static inline cohort_status cs_wait_rank(shm_op *o, int q, uint32_t target)
{
    return cs_up(o->g, shm_wait_rank(o, q, target));
}
static inline cohort_status cs_check_abort(coh_shm *s) { return cs_up(s->g, shm_check_abort(s)); }
static cohort_status cs_cma_read(shm_op *o, int q, void *dst, uint64_t addr, size_t len)
{
    return cs_up(o->g, shm_cma_read(o, q, dst, addr, len));
}
static cohort_status cs_cma_write(shm_op *o, int q, uint64_t addr, const void *src, size_t len)
{
    return cs_up(o->g, shm_cma_write(o, q, addr, src, len));
}

/* Streaming stores are weakly ordered: fence them before the call returns
 * so the caller's other threads see the data. */
static cohort_status op_end(shm_op *o, cohort_status st)
{
#if defined(__x86_64__)
    if (o->nt)
        _mm_sfence();
#endif
    return st;
}

/* ---- fingerprints ---- */

/* shm_fp.key: the call's small fields packed without loss (collectives
 * carry tag 0; a tag >= 255 saturates and the full header decides). */
#define FP_TAG_SAT 255u
static uint64_t fp_key(const coh_call *c)
{
    uint32_t tag = c->tag < 0 || c->tag >= (int32_t)FP_TAG_SAT ? FP_TAG_SAT : (uint32_t)c->tag;
    return (uint64_t)c->coll | (uint64_t)c->dtype << 8 | (uint64_t)(uint8_t)c->redop << 16 |
           (uint64_t)tag << 24 | (uint64_t)(uint32_t)c->root << 32;
}

/* Writes my header for the phase being prepared (s->phase + 1) into buf;
 * on a call's first phase also my fingerprint into my control line. */
static void put_hdr(shm_op *o, unsigned char *buf, uint32_t step, uint64_t len)
{
    if (!o->s->check)
        return;
    o->mine.step = step;
    o->mine.len = len;
    memcpy(buf, &o->mine, sizeof o->mine);
    if (step == 0) {
        shm_fp *f = &shm_ctl_of(o->s, o->s->me)->fp[(o->s->phase + 1) & 1];
        atomic_store_explicit(&f->seq, o->c->seq, memory_order_relaxed);
        atomic_store_explicit(&f->count, o->c->count, memory_order_relaxed);
        atomic_store_explicit(&f->key, o->fp_key, memory_order_relaxed);
    }
}

/* Slow path of check_hdr: report and fail the group. */
static cohort_status hdr_mismatch(shm_op *o, int q, const coh_hdr *gotp)
{
    cohort_group *g = o->g;
    coh_hdr got;
    memcpy(&got, gotp, sizeof got);
    int peer = g->local_ranks[q];
    if (got.magic != COH_HDR_MAGIC)
        return coh_group_fail(g, COHORT_ERR_PROTOCOL,
                              "shm: rank %d's buffer header is not a fingerprint (magic %#x) in "
                              "%s #%llu",
                              peer, got.magic, coh_coll_name(o->c->coll),
                              (unsigned long long)o->c->seq);
    /* The contract module words the report and fails the group. */
    cohort_status st = coh_contract_mismatch(g, o->c, peer, &o->exp, &got);
    if (st != COHORT_ERR_CONTRACT)
        coh_group_fail(g, COHORT_ERR_CONTRACT, "%s #%llu: %s differs from rank %d's",
                       coh_coll_name(o->c->coll), (unsigned long long)o->c->seq,
                       coh_field_name(coh_hdr_match(&o->exp, &got)), peer);
    int p = coh_group_poisoned(g);
    return p ? (cohort_status)p : COHORT_ERR_CONTRACT;
}

/* A ring call's mismatch with local rank q (exp: this rank's fingerprint
 * for call c, got: q's): the contract module words the report. */
static cohort_status ring_mismatch(shm_op *o, const coh_call *c, int q, const coh_hdr *exp,
                                   const coh_hdr *got)
{
    cohort_group *g = o->g;
    int peer = g->local_ranks[q];
    int f = coh_hdr_match(exp, got);
    if (f == COH_FIELD_NONE)
        return coh_group_fail(g, COHORT_ERR_PROTOCOL,
                              "shm: rank %d took the other broadcast path (ring or not) for %s "
                              "#%llu",
                              peer, coh_coll_name(c->coll), (unsigned long long)c->seq);
    cohort_status st = coh_contract_mismatch(g, c, peer, exp, got);
    if (st != COHORT_ERR_CONTRACT)
        coh_group_fail(g, COHORT_ERR_CONTRACT, "%s #%llu: %s differs from rank %d's",
                       coh_coll_name(c->coll), (unsigned long long)c->seq, coh_field_name(f),
                       peer);
    int p = coh_group_poisoned(g);
    return p ? (cohort_status)p : COHORT_ERR_CONTRACT;
}

/* Compares local rank q's header for phase p with mine before its payload
 * is read. */
static inline cohort_status check_hdr(shm_op *o, int q, uint32_t p, uint32_t step, uint64_t len)
{
    if (!o->s->check)
        return COHORT_OK;
    const coh_hdr *got = (const coh_hdr *)shm_buf(o->s, q, p);
    o->exp.step = step;
    o->exp.len = len;
    if (__builtin_expect(got->magic == COH_HDR_MAGIC &&
                             coh_hdr_match(&o->exp, got) == COH_FIELD_NONE,
                         1))
        return COHORT_OK;
    return hdr_mismatch(o, q, got);
}

/* Checks every peer's header of phase p: payload length `len`, except
 * local rank odd_rank (a root, or -1) which carries odd_len. */
static cohort_status check_all(shm_op *o, uint32_t p, uint32_t step, uint64_t len, int odd_rank,
                               uint64_t odd_len)
{
    coh_shm *s = o->s;
    if (!s->check)
        return COHORT_OK;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me)
            continue;
        uint64_t ql = q == odd_rank ? odd_len : len;
        if (step == 0) {
            /* First phase: the fingerprint in q's control line, which the
             * wait just read. Anything unexpected takes the full header's
             * path, which words the report. */
            const shm_fp *f = &shm_ctl_of(s, q)->fp[p & 1];
            if (__builtin_expect(
                    atomic_load_explicit(&f->seq, memory_order_relaxed) == o->c->seq &&
                        atomic_load_explicit(&f->count, memory_order_relaxed) == o->c->count &&
                        atomic_load_explicit(&f->key, memory_order_relaxed) == o->fp_key &&
                        !o->fp_full,
                    1))
                continue;
            coh_hdr rg;
            if (s->ring_k && shm_ring_get(s, q, p, &rg)) {
                /* q is in a ring broadcast at this phase (its control-line
                 * fingerprint is an older call's): its record decides */
                o->exp.step = 0;
                o->exp.len = ql;
                return ring_mismatch(o, o->c, q, &o->exp, &rg);
            }
            cohort_status st = check_hdr(o, q, p, step, ql);
            if (st != COHORT_OK)
                return st;
            if (!o->fp_full)
                return coh_group_fail(o->g, COHORT_ERR_PROTOCOL,
                                      "shm: rank %d's fingerprint and header disagree in %s #%llu",
                                      o->g->local_ranks[q], coh_coll_name(o->c->coll),
                                      (unsigned long long)o->c->seq);
            continue;
        }
        cohort_status st = check_hdr(o, q, p, step, ql);
        if (st != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

/* ---- per-call setup ---- */

static cohort_status bad_arg(shm_op *o, const char *what)
{
    return coh_group_fail(o->g, COHORT_ERR_INVALID, "shm %s #%llu (%s:%d): %s",
                          coh_coll_name(o->c->coll),
                          (unsigned long long)o->c->seq, o->c->file ? o->c->file : "?",
                          o->c->line, what);
}

static cohort_status ring_settle(shm_op *o, uint32_t limit);
static cohort_status ring_vs_call(shm_op *o, const coh_call *c, int q, uint32_t p,
                                  const coh_hdr *exp);

cohort_status coh_shm_entry_failed(coh_shm *s, cohort_group *g, const coh_call *c)
{
    if (s && s->hdr) {
        shm_seg_hdr *h = s->hdr;
        uint32_t a = atomic_load_explicit(&h->abort_status, memory_order_acquire);
        if (a)
            coh_group_note_failed_seq(g, (cohort_status)a, h->abort_seq);
    }
    return coh_group_entry(g, c);
}

static COH_INLINE cohort_status op_begin_x(shm_op *o, coh_shm *s, const coh_call *c,
                                          int need_redop, int ring)
{
    if (!s || !c)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "shm: no segment or no call");
    o->s = s;
    o->g = s->g;
    o->c = c;
    o->w_init = 0;
    o->nt = 0;
    o->ring_wait = 0;
    o->ring_bad = 0;
    if (coh_group_poisoned(s->g))
        return coh_shm_entry_failed(s, s->g, c);
    /* shm_check_abort tests the group (just done) and the segment's abort
     * word: only a set word needs the call */
    if (atomic_load_explicit(&s->hdr->abort_status, memory_order_acquire)) {
        cohort_status st = cs_check_abort(s);
        if (st != COHORT_OK)
            return st;
    }
    if (c->dtype >= COHORT_DTYPE_COUNT)
        return bad_arg(o, "invalid dtype");
    if (need_redop && (c->redop < 0 || c->redop >= COHORT_OP_COUNT))
        return bad_arg(o, "invalid reduce op");
    if (s->check) {
        /* A ring call builds `mine` itself, where it is read: the root's
         * record, a reader's own record before it waits or reports
         * (bcast_ring); a reader that finds the root's record with its
         * fingerprint needs none. */
        if (!ring) {
            coh_hdr_from_call(&o->mine, s->g, c, COH_MSG_COLL, 0, 0);
            o->exp = o->mine;
        }
        o->fp_key = fp_key(c);
        o->fp_full = (o->fp_key >> 24 & 0xff) == FP_TAG_SAT;
    }
    /* A non-ring call first drains the ring calls this rank rooted: its
     * claim would wait for them anyway, and their readers are checked
     * before anything else happens (the lazy root-side check). */
    if (!ring && s->ring_npend)
        return ring_settle(o, s->phase);
    return COHORT_OK;
}

static cohort_status op_begin(shm_op *o, coh_shm *s, const coh_call *c, int need_redop)
{
    return op_begin_x(o, s, c, need_redop, 0);
}

static int overlap(const void *a, size_t la, const void *b, size_t lb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return la && lb && x < y + lb && y < x + la;
}

static int mul_ok(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* shm_cma_use for call c of all_reduce or all_to_all: the timed verdict
 * where it rules (shm_cma.h shm_ov_path), else the rule agreed at attach */
static inline int cma_at(coh_shm *s, const coh_call *c, int coll, size_t bytes)
{
    int ov = shm_ov_path(s, c, coll, bytes);
    return ov >= 0 ? ov : shm_cma_use(s, coll, bytes);
}

/* Slice j of a piece of len elements over n ranks, boundaries aligned to
 * `al` elements so each rank's slice starts on a cache line. */
static inline size_t slice_lo(size_t len, int n, int j, size_t al)
{
    if (j >= n)
        return len;
    return len * (size_t)j / (size_t)n / al * al;
}

/* Index of peer j's block in local rank `owner`'s buffer (owner's own block
 * is not stored). */
static inline size_t bidx(int owner, int j) { return (size_t)(j < owner ? j : j - 1); }

/* Block piece for blocked ops: S/(n-1) bytes, whole cache lines when it
 * can, whole elements always. */
static size_t block_piece(const coh_shm *s, size_t es)
{
    size_t b = s->S / (size_t)(s->n - 1);
    if (b >= SHM_LINE)
        b = b / SHM_LINE * SHM_LINE;
    return b / es * es;
}

/* Piece size for the one-writer ops (broadcast, gather, scatter): about a
 * quarter of the message, so that with two buffers the writer fills piece
 * k+1 while the readers drain piece k; never below PIPE_MIN (a phase costs
 * a few cache-line hand-offs) nor above the buffer. */
#define PIPE_MIN (16u * 1024u)
static size_t piece_of(size_t cap, size_t bytes, size_t parts)
{
    size_t p = bytes / parts;
    if (p < PIPE_MIN)
        p = PIPE_MIN;
    p = (p + SHM_LINE - 1) / SHM_LINE * SHM_LINE;
    return p < cap ? p : cap;
}
static size_t pipe_piece(size_t cap, size_t bytes) { return piece_of(cap, bytes, 4); }

/* Piece size for the two-copy broadcast: half the message (two pieces,
 * the reader's copy of the first overlapping the root's copy of the
 * second), never below PIPE_MIN nor above the buffer. Fewer, larger
 * pieces than pipe_piece because every step is a hand-off each way
 * between the root and its readers (cache-line round trips of 0.05-0.55
 * us on the 2-vCPU VM, and a wait when a rank is descheduled), while the
 * root's copy into its own slot is short next to the readers' copy across
 * cores: docs/shm.md "Broadcast piece size" has the A/B (2 ranks, 64 KiB
 * x0.68, 1 MiB x0.87 of the time with quarters). */
static size_t bcast_piece(size_t cap, size_t bytes) { return piece_of(cap, bytes, 2); }
/* one copy from a cohort_mem_alloc buffer (below bcast_single) */
static int mem_marked(const coh_shm *s, int root, uint32_t p);
static cohort_status bcast_mem_read(shm_op *o, void *buf, size_t bytes, int root, uint32_t p,
                                    int offered);
static int mem_offer(shm_op *o, void *buf, size_t bytes, unsigned char *mb, uint32_t p);
static void mem_mark(coh_shm *s, uint32_t p);

/* ---- single copy for all_gather, gather, scatter, all_to_all ----
 *
 * When shm_cma_use says so (agreed at attach, the same on every rank once
 * the contract check passed), a call moves each byte once, straight
 * between the ranks' own buffers (process_vm_readv/writev, shm_cma.h):
 *   open:  every rank publishes its fingerprint and an sc_desc (its
 *          buffers' addresses) in one phase; after the contract check -
 *          before any byte moves - the descriptors are compared;
 *   [ready: a phase only where a rank must first move its own part inside
 *          a buffer a peer will read or write (overlapping in-place forms)]
 *   copy:  the kernel copies; work is split so every rank copies;
 *   close: every rank publishes "done" and waits for all, so no rank
 *          returns while a peer still reads or writes its buffers.
 * A rank that fails (a peer died: PEER_LOST; a bad address: INVALID; the
 * shm_cma.c messages) fails the group instead of publishing, which ends
 * every other rank's wait with that error. */
typedef struct sc_desc {
    uint64_t src, dst; /* addresses in the owner's memory (0: none) */
    uint64_t bytes;    /* per rank block: every rank must say the same */
    uint64_t flags;    /* SC_* */
} sc_desc;
enum {
    SC_STAGED = 1, /* the owner needs the ready phase */
    SC_INPLACE = 2 /* the owner's send is its recv (all_reduce) */
    /* 4, 8, 16: the lead's SHM_XC_FAR, SHM_XC_PROBE, SHM_XC_NEAR (shm_cma.h) */
};
_Static_assert(!((SC_STAGED | SC_INPLACE) & (SHM_XC_FAR | SHM_XC_PROBE | SHM_XC_NEAR)),
               "flags apart");

static cohort_status sc_open(shm_op *o, const sc_desc *d, uint32_t *pp, int *flags)
{
    coh_shm *s = o->s;
    cohort_status st = cs_claim(o);
    if (st != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;
    unsigned char *mb = shm_buf(s, s->me, p);
    put_hdr(o, mb, 0, sizeof *d);
    memcpy(DATA(mb), d, sizeof *d);
    shm_publish(s);
    if ((st = cs_wait_all(o, p)) != COHORT_OK ||
        (st = check_all(o, p, 0, sizeof *d, -1, 0)) != COHORT_OK)
        return st;
    *flags = (int)d->flags;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me)
            continue;
        sc_desc pd;
        memcpy(&pd, DATA(shm_buf(s, q, p)), sizeof pd);
        if (pd.bytes != d->bytes)
            return coh_group_fail(o->g, COHORT_ERR_PROTOCOL,
                                  "shm %s #%llu: rank %d announced %llu bytes per rank, this "
                                  "rank %llu (single copy)",
                                  coh_coll_name(o->c->coll), (unsigned long long)o->c->seq,
                                  o->g->local_ranks[q], (unsigned long long)pd.bytes,
                                  (unsigned long long)d->bytes);
        *flags |= (int)pd.flags;
    }
    if (*flags & SHM_XC_PROBE)
        shm_xc_probe(s);
    *pp = p;
    return COHORT_OK;
}

static sc_desc sc_peer(const shm_op *o, int q, uint32_t p)
{
    sc_desc d;
    memcpy(&d, DATA(shm_buf(o->s, q, p)), sizeof d);
    return d;
}

/* 2 ranks apart (xc_adapt): the lead's flags on a descriptor, and whether
 * the OR'd flags send this call of coll back to two copies because the
 * cpus measured near (shm_cma.c shm_xc_two_copies) - every rank returns
 * after the open phase and continues on the two-copy path. */
static uint64_t sc_xc(coh_shm *s) { return s->xc_adapt ? shm_xc_flags(s) : 0; }
static int sc_near(const shm_op *o, int flags, size_t bytes)
{
    if (!(flags & SHM_XC_NEAR) || !shm_xc_two_copies(o->s, o->c->coll, bytes))
        return 0;
    o->s->xc_twos++;
    return 1;
}

/* The ready and close phases: publish, wait for every rank. */
static cohort_status sc_sync(shm_op *o)
{
    shm_publish(o->s);
    return cs_wait_all(o, o->s->phase);
}

/* Split of one block between the two ranks that copy it: `share` bytes,
 * 1/n of the block rounded down to whole pages, go to the rank that
 * serves n-1 peers (a root), the rest to the peer. With 3 or more ranks a
 * share under 8 KiB stays with the peer: the root's system call per peer
 * costs more than one page it would move. Session 35, 3-4 rounds, p50
 * against the 4 KiB share (results/2026-12-06-s35-gs-share): 8 ranks on 2
 * cpus, 32 KiB a block, gather and scatter x0.85-0.89 both modes; 4 ranks,
 * 20-24 KiB a block, gather x0.69-0.91, scatter x0.91 OSU style and
 * x1.02-1.06 back to back. 2 ranks keep the page: both copy at once. */
#define SC_SHARE_MIN ((size_t)8 << 10)
static size_t sc_share(size_t bytes, int n)
{
    size_t share = bytes / (size_t)n & ~(size_t)4095;
    return n > 2 && share < SC_SHARE_MIN ? 0 : share;
}

/* all_gather: every rank reads every peer's part from the peer's memory.
 * Where send overlaps recv (in place), a rank first moves its part to its
 * block of recv (the ready phase) and peers read it from there - unless
 * the cpus measure near and the call is in place or its blocks small
 * where the kernel's copy is dear (s->xc_ag_to): then every rank returns with *fallback set
 * after the open phase and the call takes two copies. */
static cohort_status ag_single(shm_op *o, const unsigned char *src, unsigned char *rb, size_t bpr,
                               int ovl, int *fallback)
{
    coh_shm *s = o->s;
    int n = s->n, me = s->me;
    unsigned char *own = rb + (size_t)me * bpr;
    sc_desc d = {.src = (uint64_t)(uintptr_t)(ovl ? own : src), .bytes = bpr,
                 .flags = (ovl ? SC_STAGED : 0) | sc_xc(s)};
    uint32_t p;
    int fl;
    cohort_status st = sc_open(o, &d, &p, &fl);
    if (st != COHORT_OK)
        return st;
    /* near: two copies in place (512 KiB-2 MiB), or for a small block
     * (xc_ag_to) or a large one (SHM_XC_AG_BIG) either way where the
     * kernel's copy is dear */
    if ((bpr <= s->xc_ag_to || ((fl & SC_STAGED) && bpr > SHM_XC_AG_OOP_TO) ||
         bpr >= SHM_XC_AG_BIG) &&
        sc_near(o, fl, bpr)) {
        *fallback = 1;
        return COHORT_OK;
    }
    if (src != own)
        memmove(own, src, bpr);
    if ((fl & SC_STAGED) && (st = sc_sync(o)) != COHORT_OK)
        return st;
    for (int k = 1; k < n; k++) {
        int q = (me + k) % n; /* not every rank on the same peer first */
        sc_desc pd = sc_peer(o, q, p);
        if ((st = cs_cma_read(o, q, rb + (size_t)q * bpr, pd.src, bpr)) != COHORT_OK)
            return st;
    }
    return sc_sync(o);
}

/* gather: the root reads the first share of every block from its owner's
 * send buffer while each owner writes the rest into the root's recv. */
static cohort_status ga_single(shm_op *o, const unsigned char *send, unsigned char *rb, size_t bpr,
                               int root, int ovl)
{
    coh_shm *s = o->s;
    int n = s->n, me = s->me, am_root = me == root;
    sc_desc d = {.src = (uint64_t)(uintptr_t)send, .dst = (uint64_t)(uintptr_t)rb, .bytes = bpr,
                 .flags = ovl ? SC_STAGED : 0};
    uint32_t p;
    int fl;
    cohort_status st = sc_open(o, &d, &p, &fl);
    if (st != COHORT_OK)
        return st;
    size_t share = sc_share(bpr, n);
    if (am_root && send != rb + (size_t)me * bpr)
        memmove(rb + (size_t)me * bpr, send, bpr);
    if ((fl & SC_STAGED) && (st = sc_sync(o)) != COHORT_OK)
        return st;
    if (am_root) {
        for (int k = 1; k < n && share; k++) {
            int q = (me + k) % n;
            sc_desc pd = sc_peer(o, q, p);
            if ((st = cs_cma_read(o, q, rb + (size_t)q * bpr, pd.src, share)) != COHORT_OK)
                return st;
        }
    } else {
        sc_desc rd = sc_peer(o, root, p);
        if ((st = cs_cma_write(o, root, rd.dst + (uint64_t)me * bpr + share, send + share,
                               bpr - share)) != COHORT_OK)
            return st;
    }
    return sc_sync(o);
}

/* The single-copy reductions' piece: a system call per piece and peer, and
 * the pieces stay in the cache (session 17, 2 ranks: 32 KiB ran all_reduce
 * x1.05-1.10 and reduce x1.1-1.3 slower than 128 KiB from 256 KiB up). */
#define SC_PIECE ((size_t)128 << 10)

/* The single-copy reductions' scratch: a piece per peer and one for a
 * result, allocated on first use and kept for the group's life (freed in
 * the segment's cleanup). */
static cohort_status sc_scratch(shm_op *o)
{
    coh_shm *s = o->s;
    if (s->red_scratch)
        return COHORT_OK;
    size_t len = SC_PIECE * (size_t)s->n;
    s->red_scratch = coh_malloc(len);
    if (!s->red_scratch)
        return coh_group_fail(o->g, COHORT_ERR_NOMEM,
                              "shm %s #%llu: out of memory for the single copy's scratch (%zu "
                              "bytes)",
                              coh_coll_name(o->c->coll), (unsigned long long)o->c->seq, len);
    return COHORT_OK;
}

/* Reduces elements [lo, hi) of every rank's send (descriptors of phase p)
 * a piece of pe elements at a time: each peer's part is read by the kernel
 * into the scratch, so the reduction reads it from cache; the operands go
 * to the kernel in rank order, so the result does not depend on which rank
 * computes it. The result goes to out + (lo - out_lo) (my recv), or with
 * to >= 0 into local rank to's recv (its descriptor's dst) by the kernel. */
static cohort_status sc_fold(shm_op *o, uint32_t p, const unsigned char *send, size_t lo,
                             size_t hi, size_t pe, unsigned char *out, size_t out_lo, int to)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    size_t es = dt_size[c->dtype];
    int n = s->n, me = s->me;
    cohort_status st;
    coh_reduce3_fn k3 =
        n == 2 && !coh_avg_wide(c->dtype, c->redop)
            ? coh_reduce3_div_kernel((cohort_dtype)c->dtype, (cohort_op)c->redop, avg_div(s, c))
            : NULL;
    unsigned char *tmp = s->red_scratch + (size_t)(n - 1) * SC_PIECE;
    for (size_t off = lo; off < hi; off += pe) {
        size_t len = COH_MIN(pe, hi - off);
        int k = 0;
        for (int q = 0; q < n; q++) {
            if (q == me) {
                s->srcs[q] = send + off * es;
                continue;
            }
            unsigned char *buf = s->red_scratch + (size_t)k++ * SC_PIECE;
            sc_desc pd = sc_peer(o, q, p);
            if ((st = cs_cma_read(o, q, buf, pd.src + off * es, len * es)) != COHORT_OK)
                return st;
            s->srcs[q] = buf;
        }
        unsigned char *dst = to >= 0 ? tmp : out + (off - out_lo) * es;
        if (k3) /* not a wide AVG: a float32/float64 AVG sums and halves in one pass */
            k3(dst, s->srcs[0], s->srcs[1], len);
        else
            coh_reduce_multi_div(dst, s->srcs, n, len, (cohort_dtype)c->dtype,
                                 (cohort_op)c->redop, avg_div(s, c));
        if (to >= 0) {
            sc_desc td = sc_peer(o, to, p);
            if ((st = cs_cma_write(o, to, td.dst + off * es, tmp, len * es)) != COHORT_OK)
                return st;
        }
    }
    return COHORT_OK;
}

/* reduce: the vector is split on 4 KiB boundaries; the root reduces the
 * first part (red_share sixteenths) into its recv, and each leaf reduces
 * an even share of the rest and writes it into the root's recv by the
 * kernel (sc_fold: every rank reads the others' inputs of its part
 * straight from their send buffers). The close phase keeps every buffer in
 * place until no rank reads or writes it. Per byte one kernel copy per
 * peer and one reduction (plus a kernel write for the leaves' parts),
 * against three copies through the segment; the root's part is larger as
 * it does not write (docs/shm.md "Reduce by single copy"). In place (the
 * root's send is its recv) is safe: each part of the root's buffer is
 * read and written by one rank only. */
static unsigned red_share(size_t bytes)
{
    /* Session 17, 2 ranks apart, p50 against the root alone: below 64 KiB
     * the leaf's part costs more than it saves (16 KiB 1.9 -> 2.6 us at
     * 10/16); 10/16 won at 64-256 KiB (256 KiB 21.6 -> 12.2 us), 9/16
     * from 1 MiB (1 MiB 57 -> 53 us, 4 MiB 350 -> 314 against 10/16). */
    return bytes < ((size_t)64 << 10) ? 16 : bytes < ((size_t)1 << 20) ? 10 : 9;
}

static size_t red_cut(size_t count, int n, int j, size_t al, unsigned root_share)
{
    if (j == 0)
        return 0;
    if (j >= n)
        return count;
    size_t r = count / 16 * root_share + count % 16 * root_share / 16;
    if (root_share < 16) /* the root alone: no leaf writes a tail (6 KiB 1.90 -> 1.27 us) */
        r = r / al * al;
    return r + slice_lo(count - r, n - 1, j - 1, al);
}

static cohort_status red_single(shm_op *o, const unsigned char *send, unsigned char *recv,
                                size_t count, int root, int *fallback)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    size_t es = dt_size[c->dtype], bytes = count * es;
    int n = s->n, me = s->me;
    sc_desc d = {.src = (uint64_t)(uintptr_t)send,
                 .dst = (uint64_t)(uintptr_t)(me == root ? recv : NULL), .bytes = bytes,
                 .flags = sc_xc(s)};
    uint32_t p;
    int fl;
    cohort_status st = sc_open(o, &d, &p, &fl);
    if (st != COHORT_OK)
        return st;
    if (sc_near(o, fl, bytes)) {
        *fallback = 1;
        return COHORT_OK;
    }
    s->red_singles++;
    if ((st = sc_scratch(o)) != COHORT_OK)
        return st;
    /* my part: the root's is part 0, the leaves' follow in rank order */
    int j = me == root ? 0 : 1 + (me < root ? me : me - 1);
    size_t al = 4096 / es;
    unsigned share = red_share(bytes);
    size_t lo = red_cut(count, n, j, al, share), hi = red_cut(count, n, j + 1, al, share);
    if ((st = sc_fold(o, p, send, lo, hi, SC_PIECE / es, recv, 0, me == root ? -1 : root)) !=
        COHORT_OK)
        return st;
    return sc_sync(o);
}

/* all_reduce: each rank reduces its slice of the vector (1/n, split on
 * 4 KiB boundaries) into its own recv, reading the peers' parts of the
 * slice straight from their send buffers a piece at a time (SC_PIECE,
 * into the scratch, so the reduction reads them from cache); after the
 * middle phase every rank reads every peer's reduced slice straight from
 * the peer's recv. Per byte: two kernel copies and one reduction, against
 * copy in, reduction, copy out of every slice through the segment
 * (ar_large). In place is safe: before the middle phase a rank writes only
 * its own slice of recv, which no peer reads until then; after it, it
 * overwrites the other slices, which no peer reads any more. The operands
 * go to the kernel in rank order, so a slice's result does not depend on
 * which rank computes it. *fallback: every rank returns 1, having
 * published the open phase only, where the descriptors say the two-copy
 * path wins (sc_near: measured near; ar_single_wins otherwise). */
static int ar_single_wins(const coh_shm *s, size_t bytes, int flags)
{
    if (bytes < s->ar_far_to) /* 2 ranks apart: out of place while measured far */
        return !(flags & SC_INPLACE) && (flags & SHM_XC_FAR);
    return (flags & SC_INPLACE) || bytes < s->ar_oop_to;
}

static cohort_status ar_single(shm_op *o, const unsigned char *send, unsigned char *recv,
                               size_t count, int *fallback)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    size_t es = dt_size[c->dtype], bytes = count * es;
    int n = s->n, me = s->me;
    sc_desc d = {.src = (uint64_t)(uintptr_t)send, .dst = (uint64_t)(uintptr_t)recv,
                 .bytes = bytes,
                 .flags = (send == recv ? SC_INPLACE : 0) | sc_xc(s)};
    uint32_t p;
    int flags;
    cohort_status st = sc_open(o, &d, &p, &flags);
    if (st != COHORT_OK)
        return st;
    if (sc_near(o, flags, bytes) || !ar_single_wins(s, bytes, flags)) {
        *fallback = 1;
        return COHORT_OK;
    }
    s->ar_singles++;
    if ((st = sc_scratch(o)) != COHORT_OK)
        return st;
    size_t al = 4096 / es;
    size_t lo = slice_lo(count, n, me, al), hi = slice_lo(count, n, me + 1, al);
    if ((st = sc_fold(o, p, send, lo, hi, SC_PIECE / es, recv, 0, -1)) != COHORT_OK)
        return st;
    if ((st = sc_sync(o)) != COHORT_OK)
        return st;
    for (int k = 1; k < n; k++) {
        int q = (me + k) % n;
        size_t qlo = slice_lo(count, n, q, al), qhi = slice_lo(count, n, q + 1, al);
        sc_desc pd = sc_peer(o, q, p);
        if (qhi > qlo && (st = cs_cma_read(o, q, recv + qlo * es, pd.dst + qlo * es,
                                           (qhi - qlo) * es)) != COHORT_OK)
            return st;
    }
    return sc_sync(o);
}

/* reduce_scatter (*fallback as ar_single's: the verdict or a rank in
 * place sends the call to two copies after the open phase): each rank
 * reduces its own block into its recv, reading
 * the peers' parts of that block straight from their send buffers
 * (sc_fold) - all_reduce's first half (ar_single). Per byte one kernel
 * copy per peer and one reduction, against a copy into the segment and
 * the reduction's reads across the cores. In place (recv == send, the
 * result at its start) a rank other than 0 would write over block 0 while
 * rank 0 reads it: it reduces into its own block instead (read by nobody
 * else; the kernels allow out to alias a source) and moves the result to
 * the start after the close phase, when no peer reads its buffer. */
static cohort_status rs_single(shm_op *o, const unsigned char *sb, unsigned char *rb, size_t cpr,
                               int *fallback)
{
    coh_shm *s = o->s;
    size_t es = dt_size[o->c->dtype], blk = cpr * es, lo = (size_t)s->me * cpr;
    unsigned char *out = rb == sb && lo ? rb + lo * es : rb; /* rb == sb: the caller's recv */
    sc_desc d = {.src = (uint64_t)(uintptr_t)sb, .dst = (uint64_t)(uintptr_t)rb, .bytes = blk,
                 .flags = (rb == sb || rb == sb + lo * es ? SC_INPLACE : 0) | sc_xc(s)};
    uint32_t p;
    int flags;
    cohort_status st = sc_open(o, &d, &p, &flags);
    if (st != COHORT_OK)
        return st;
    /* 2 ranks apart, any rank in place: two copies, in either state (the
     * peer's block was just rewritten, its lines modified in the other
     * core: x0.78-0.79 far, x0.38-0.53 near, shm_cma.c RS_FROM) */
    if (sc_near(o, flags, blk * (size_t)s->n) || (s->xc_adapt && (flags & SC_INPLACE))) {
        *fallback = 1;
        return COHORT_OK;
    }
    if ((st = sc_scratch(o)) != COHORT_OK ||
        (st = sc_fold(o, p, sb, lo, lo + cpr, SC_PIECE / es, out, lo, -1)) != COHORT_OK ||
        (st = sc_sync(o)) != COHORT_OK)
        return st;
    if (out != rb)
        memmove(rb, out, blk);
    return COHORT_OK;
}

/* scatter: the root writes the first share of every block into its
 * reader's recv while each reader reads the rest from the root's send.
 * The root's own block moves last, once nobody reads send any more (recv
 * may overlap it). */
static cohort_status sc_single(shm_op *o, const unsigned char *sb, unsigned char *rb, size_t bpr,
                               int root)
{
    coh_shm *s = o->s;
    int n = s->n, me = s->me, am_root = me == root;
    sc_desc d = {.src = (uint64_t)(uintptr_t)sb, .dst = (uint64_t)(uintptr_t)rb, .bytes = bpr};
    uint32_t p;
    int fl;
    cohort_status st = sc_open(o, &d, &p, &fl);
    if (st != COHORT_OK)
        return st;
    size_t share = sc_share(bpr, n);
    if (am_root) {
        for (int k = 1; k < n && share; k++) {
            int q = (me + k) % n;
            sc_desc pd = sc_peer(o, q, p);
            if ((st = cs_cma_write(o, q, pd.dst, sb + (size_t)q * bpr, share)) != COHORT_OK)
                return st;
        }
    } else {
        sc_desc rd = sc_peer(o, root, p);
        if ((st = cs_cma_read(o, root, rb + share, rd.src + (uint64_t)me * bpr + share,
                              bpr - share)) != COHORT_OK)
            return st;
    }
    if ((st = sc_sync(o)) != COHORT_OK)
        return st;
    if (am_root && rb != sb + (size_t)me * bpr)
        memmove(rb, sb + (size_t)me * bpr, bpr);
    return COHORT_OK;
}

/* all_to_all: every rank reads its block from every peer's send. In place
 * (send == recv on any rank) a rank would overwrite blocks its peers still
 * read, so then every rank returns 1 and the call continues on the
 * two-copy path (same on every rank: the descriptors say it). */
static cohort_status a2a_single(shm_op *o, const unsigned char *sb, unsigned char *rb, size_t bpp,
                                int *fallback)
{
    coh_shm *s = o->s;
    int n = s->n, me = s->me;
    sc_desc d = {.src = (uint64_t)(uintptr_t)sb, .bytes = bpp,
                 .flags = (sb == rb ? SC_STAGED : 0) | sc_xc(s)};
    uint32_t p;
    int fl;
    cohort_status st = sc_open(o, &d, &p, &fl);
    if (st != COHORT_OK)
        return st;
    if ((fl & SC_STAGED) || sc_near(o, fl, bpp)) {
        *fallback = 1;
        return COHORT_OK;
    }
    s->a2a_singles++;
    copy_fast(rb + (size_t)me * bpp, sb + (size_t)me * bpp, bpp);
    for (int k = 1; k < n; k++) {
        int q = (me + k) % n;
        sc_desc pd = sc_peer(o, q, p);
        if ((st = cs_cma_read(o, q, rb + (size_t)q * bpp, pd.src + (uint64_t)me * bpp, bpp)) !=
            COHORT_OK)
            return st;
    }
    return sc_sync(o);
}

/* ---- all_reduce ---- */

static COH_INLINE void ring_put(coh_shm *s, uint32_t p, const coh_hdr *h, const coh_call *c,
                               uint64_t key, const void *data, size_t bytes);
static int ring_in(shm_op *o, const void *send, size_t bytes, int root, cohort_status *st);
static inline void ring_in_end(coh_shm *s, size_t bytes);
static int reduce_ring(coh_shm *s, const coh_call *c, size_t count);
static int ring_full_bad(const coh_shm *s, const coh_call *c, int q, uint32_t p,
                         const coh_hdr *mine);
static cohort_status ring_full_check(shm_op *o, const coh_call *c, int q, uint32_t p,
                                     const coh_hdr *mine);

/* ar_rec_take's wait: q published phase p without a record of it (q runs
 * another path: COHORT_SHM_AR_INLINE=0 there, or another call) */
typedef struct ar_poll {
    coh_shm *s;
    int q, other;
    uint32_t p;
} ar_poll;
static cohort_status ar_poll_fn(void *arg)
{
    ar_poll *a = arg;
    if (!shm_reached(atomic_load_explicit(&shm_ctl_of(a->s, a->q)->arrive, memory_order_acquire),
                     a->p) ||
        atomic_load_explicit(&shm_ring_rec_of(a->s, a->q, a->p)->phase, memory_order_acquire) ==
            a->p)
        return COHORT_OK;
    a->other = 1;
    return COHORT_ERR_CONTRACT; /* ends the wait; the caller reads `other` */
}

/* The small all_reduce's record exchange. Besides its buffer and control-
 * line fingerprint (the path every rank understands), each rank writes its
 * ring record of phase p - the fingerprint and <= SHM_RING_INLINE bytes of
 * input in one line, tag last - before it publishes p, and reads each
 * peer's record instead of its arrive and buffer: one line each way per
 * call, not two (docs/performance.md "Small all_reduce: one line each
 * way"). A peer that published p without a record takes the old path's
 * wait and check (and its buffer: it wrote one). Returns 1 when every
 * peer's record was read and checked (srcs set), 0 for the old path, or
 * sets *st on a failure. */
static int ar_rec_take(shm_op *o, const void *send, uint32_t p, cohort_status *st)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    for (int q = 0; q < s->n; q++) {
        if (q == s->me) {
            s->srcs[q] = send;
            continue;
        }
        shm_ring_rec *r = shm_ring_rec_of(s, q, p);
        if (atomic_load_explicit(&r->phase, memory_order_acquire) != p) {
            ar_poll a = {s, q, 0, p};
            *st = shm_wait_rec(o, q, &r->phase, p, ar_poll_fn, &a);
            if (a.other)
                return 0;
            if ((*st = cs_up(o->g, *st)) != COHORT_OK)
                return -1;
        }
        /* the record holds p until q passes p + ring_nrec - 1, which it
         * cannot before this rank publishes p + 1 */
        uint64_t f[3]; /* ring_fp_ok with the key op_begin built */
        if (s->check &&
            !(shm_ring_fp(s, q, p, f) && f[0] == c->seq && f[1] == c->count &&
              f[2] == o->fp_key && !o->fp_full) &&
            ring_full_bad(s, c, q, p, &o->mine)) {
            *st = ring_full_check(o, c, q, p, &o->mine);
            return -1;
        }
        s->srcs[q] = r->inl;
    }
    /* A record of p is the last thing a rank stores before it publishes p
     * (and it finished reading phase p - 1 before its call began), so for
     * Rule W it stands for arrive >= p: the next claim pulls no peer's
     * control line. */
    s->min_seen = p;
    return 1;
}

/* One phase: copy in, wait for everyone, check every fingerprint, reduce
 * all n inputs. srcs[me] is the private input (same bits as my copy). The
 * buffer is reused two phases later, after everyone passed this phase's
 * wait, so no release step is needed. */
static cohort_status ar_small(shm_op *o, const void *send, void *recv, size_t count)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    size_t bytes = count * dt_size[c->dtype];
    cohort_status st = cs_claim(o);
    if (st != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;
    unsigned char *mb = shm_buf(s, s->me, p);
    put_hdr(o, mb, 0, bytes);
    CPY(DATA(mb), send, bytes);
    /* the record path needs the ring's records (ring_k) and no pending
     * ring check of mine (op_begin settled them) */
    int rec = s->ar_inl && s->ring_k && bytes <= SHM_RING_INLINE;
    if (rec) {
        if (!s->check)
            coh_hdr_from_call(&o->mine, s->g, c, COH_MSG_COLL, 0, bytes);
        ring_put(s, p, &o->mine, c, s->check ? o->fp_key : fp_key(c), send, bytes);
    }
    shm_publish(s);
    int took = 0;
    if (rec && (took = ar_rec_take(o, send, p, &st)) < 0)
        return st;
    if (!took) {
        if ((st = cs_wait_all(o, p)) != COHORT_OK || (st = check_all(o, p, 0, bytes, -1, 0)))
            return st;
        for (int q = 0; q < s->n; q++)
            s->srcs[q] = q == s->me ? send : DATA(shm_buf(s, q, p));
    }
    if (count) {
        coh_reduce_multi_div(recv, s->srcs, s->n, count, (cohort_dtype)c->dtype, (cohort_op)c->redop,
                             avg_div(s, c));
    }
    return COHORT_OK;
}

/* Phase A of a large reduction piece: copy every slice but mine of
 * send[off, off+len) into my buffer, packed (my slice's gap closed). */
static cohort_status red_phase_a(shm_op *o, const unsigned char *send, size_t off, size_t len,
                                 size_t al, uint32_t step)
{
    coh_shm *s = o->s;
    size_t es = dt_size[o->c->dtype];
    size_t lo = slice_lo(len, s->n, s->me, al), hi = slice_lo(len, s->n, s->me + 1, al);
    cohort_status st = cs_claim(o);
    if (st != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;
    unsigned char *mb = shm_buf(s, s->me, p);
    put_hdr(o, mb, step, len * es);
    CPY(DATA(mb), send + off * es, lo * es);
    CPY(DATA(mb) + lo * es, send + (off + hi) * es, (len - hi) * es);
    shm_publish(s);
    if ((st = cs_wait_all(o, p)) != COHORT_OK)
        return st;
    return check_all(o, p, step, len * es, -1, 0);
}

/* Reduces my slice of the piece published at phase p into out. */
static void red_slice(shm_op *o, const unsigned char *send, size_t off, size_t len, size_t al,
                      uint32_t p, void *out)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    size_t es = dt_size[c->dtype];
    int n = s->n, me = s->me;
    size_t lo = slice_lo(len, n, me, al), hi = slice_lo(len, n, me + 1, al);
    if (hi == lo)
        return;
    for (int q = 0; q < n; q++) {
        if (q == me) {
            s->srcs[q] = send + (off + lo) * es;
        } else {
            /* q's buffer lacks q's own slice: mine sits at lo, shifted down
             * by q's slice length if it comes after q's. */
            size_t qlen = slice_lo(len, n, q + 1, al) - slice_lo(len, n, q, al);
            s->srcs[q] = DATA(shm_buf(s, q, p)) + (me < q ? lo : lo - qlen) * es;
        }
    }
    coh_reduce_multi_div(out, s->srcs, n, hi - lo, (cohort_dtype)c->dtype, (cohort_op)c->redop,
                         avg_div(s, c));
}

static size_t red_align(const coh_shm *s, size_t es, size_t piece)
{
    size_t al = SHM_LINE / es;
    return piece >= al * (size_t)s->n ? al : 1;
}

/* Reduce-scatter + all-gather through the segment, one piece of S bytes at
 * a time: per byte one copy in, one reduction, one copy out. The slices
 * are split on cache-line boundaries so ranks never write the same line. */
static cohort_status ar_large(shm_op *o, const unsigned char *send, unsigned char *recv,
                              size_t count)
{
    coh_shm *s = o->s;
    size_t es = dt_size[o->c->dtype];
    int n = s->n, me = s->me;
    size_t P = s->S / es;
    uint32_t step = 0;
    cohort_status st;
    for (size_t off = 0; off < count; off += P, step += 2) {
        size_t len = COH_MIN(P, count - off);
        size_t al = red_align(s, es, len);
        if ((st = red_phase_a(o, send, off, len, al, step)) != COHORT_OK)
            return st;
        uint32_t pa = s->phase;
        size_t lo = slice_lo(len, n, me, al), hi = slice_lo(len, n, me + 1, al);
        /* Phase B: reduce my slice straight into my buffer, publish it,
         * then copy it and everyone else's slices out. */
        if ((st = cs_claim(o)) != COHORT_OK)
            return st;
        uint32_t pb = s->phase + 1;
        unsigned char *mb = shm_buf(s, me, pb);
        put_hdr(o, mb, step + 1, (hi - lo) * es);
        red_slice(o, send, off, len, al, pa, DATA(mb));
        shm_publish(s);
        OUT(o, recv + (off + lo) * es, DATA(mb), (hi - lo) * es);
        if ((st = cs_wait_all(o, pb)) != COHORT_OK)
            return st;
        for (int q = 0; q < n; q++) {
            if (q == me)
                continue;
            size_t qlo = slice_lo(len, n, q, al), qhi = slice_lo(len, n, q + 1, al);
            if ((st = check_hdr(o, q, pb, step + 1, (qhi - qlo) * es)) != COHORT_OK)
                return st;
            OUT(o, recv + (off + qlo) * es, DATA(shm_buf(s, q, pb)), (qhi - qlo) * es);
        }
    }
    return COHORT_OK;
}

static cohort_status ar_call(coh_shm *s, const coh_call *c, const void *send, void *recv,
                             size_t count)
{
    shm_op o;
    cohort_status st = op_begin(&o, s, c, 1);
    if (st != COHORT_OK)
        return st;
    size_t bytes;
    if (!mul_ok(count, dt_size[c->dtype], &bytes))
        return bad_arg(&o, "count * dtype size overflows");
    if (bytes && (!send || !recv))
        return bad_arg(&o, "NULL buffer");
    if (send != recv && overlap(send, bytes, recv, bytes))
        return bad_arg(&o, "send and recv overlap without being the same buffer");
    if (s->n == 1) {
        if (send != recv && bytes)
            copy_fast(recv, send, bytes);
        return COHORT_OK;
    }
    if (bytes <= s->small_bytes)
        return ar_small(&o, send, recv, count);
    if (cma_at(s, c, COH_COLL_ALL_REDUCE, bytes)) {
        int fallback = 0;
        st = ar_single(&o, send, recv, count, &fallback);
        if (st != COHORT_OK || !fallback)
            return st;
    }
    o.nt = bytes >= s->nt_bytes;
    return op_end(&o, ar_large(&o, send, recv, count));
}

/* The timed verdict (shm_cma.h shm_ov_enter) around one call of an op it
 * covers: every local rank counts the call before its path forks, and the
 * lead times it. Bytes as the op's path rule counts them. */
static inline int ov_in(coh_shm *s, const coh_call *c, int coll, size_t count, size_t unit)
{
    size_t bytes;
    if (!s || !s->ov || !c || !mul_ok(count, unit, &bytes) || bytes < s->ov_from[coll])
        return 0;
    shm_ov_enter(s, c, coll, bytes);
    return 1;
}
static inline size_t dt_unit(const coh_call *c)
{
    return c && c->dtype < COHORT_DTYPE_COUNT ? dt_size[c->dtype] : 0;
}

cohort_status coh_shm_all_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t count)
{
    if (!ov_in(s, c, COH_COLL_ALL_REDUCE, count, dt_unit(c)))
        return ar_call(s, c, send, recv, count); /* a tail call: ov_in's first test is !s->ov */
    cohort_status st = ar_call(s, c, send, recv, count);
    shm_ov_done(s, st);
    return st;
}

/* ---- reduce ---- */

static cohort_status red_call(coh_shm *s, const coh_call *c, const void *send, void *recv,
                              size_t count, int root)
{
    shm_op o;
    int ring = reduce_ring(s, c, count);
    cohort_status st = op_begin_x(&o, s, c, 1, ring);
    if (st != COHORT_OK)
        return st;
    if (root < 0 || root >= s->n)
        return bad_arg(&o, "root is not a local rank index");
    int n = s->n, me = s->me, am_root = me == root;
    size_t es = dt_size[c->dtype], bytes;
    if (!mul_ok(count, es, &bytes))
        return bad_arg(&o, "count * dtype size overflows");
    if (bytes && (!send || (am_root && !recv)))
        return bad_arg(&o, "NULL buffer");
    if (am_root && send != recv && overlap(send, bytes, recv, bytes))
        return bad_arg(&o, "send and recv overlap without being the same buffer");
    if (n == 1) {
        if (send != recv && bytes)
            copy_fast(recv, send, bytes);
        return COHORT_OK;
    }
    if (!ring && shm_cma_call(s, c, COH_COLL_REDUCE, bytes)) {
        int fallback = 0;
        st = red_single(&o, send, recv, count, root, &fallback);
        if (st != COHORT_OK || !fallback)
            return st;
    }
    if (ring) { /* the leaves return once their input is published (ring_in) */
        int r = ring_in(&o, send, bytes, root, &st);
        if (r <= 0)
            return st;
        if (n == 2 && bytes > 32 && bytes <= 64) { /* the kernel's 32-byte loads of it: slow */
            coh_copy_narrow(s->near64, s->srcs[1 - me], bytes);
            s->srcs[1 - me] = s->near64;
        }
        if (count)
            coh_reduce_multi_div(recv, s->srcs, n, count, (cohort_dtype)c->dtype,
                                 (cohort_op)c->redop, avg_div(s, c));
        ring_in_end(s, bytes);
        return COHORT_OK;
    }
    if (bytes <= s->small_bytes) {
        if ((st = cs_claim(&o)) != COHORT_OK)
            return st;
        uint32_t p = s->phase + 1;
        unsigned char *mb = shm_buf(s, me, p);
        put_hdr(&o, mb, 0, bytes);
        CPY(DATA(mb), send, bytes);
        shm_publish(s);
        if ((st = cs_wait_all(&o, p)) != COHORT_OK || (st = check_all(&o, p, 0, bytes, -1, 0)))
            return st;
        if (am_root && count) {
            for (int q = 0; q < n; q++)
                s->srcs[q] = q == me ? send : DATA(shm_buf(s, q, p));
            coh_reduce_multi_div(recv, s->srcs, n, count, (cohort_dtype)c->dtype,
                                 (cohort_op)c->redop, avg_div(s, c));
        }
        return COHORT_OK;
    }
    /* Large: every rank reduces its slice (the work is spread over the
     * cores) into its buffer, then the root copies every slice out. */
    o.nt = am_root && bytes >= s->nt_bytes;
    size_t P = s->S / es;
    uint32_t step = 0;
    for (size_t off = 0; off < count; off += P, step += 2) {
        size_t len = COH_MIN(P, count - off);
        size_t al = red_align(s, es, len);
        if ((st = red_phase_a(&o, send, off, len, al, step)) != COHORT_OK)
            return op_end(&o, st);
        uint32_t pa = s->phase;
        size_t lo = slice_lo(len, n, me, al), hi = slice_lo(len, n, me + 1, al);
        if ((st = cs_claim(&o)) != COHORT_OK)
            return op_end(&o, st);
        uint32_t pb = pa + 1;
        unsigned char *mb = shm_buf(s, me, pb);
        put_hdr(&o, mb, step + 1, (hi - lo) * es);
        red_slice(&o, send, off, len, al, pa, DATA(mb));
        shm_publish(s);
        if (!am_root)
            continue;
        OUT(&o, (unsigned char *)recv + (off + lo) * es, DATA(mb), (hi - lo) * es);
        if ((st = cs_wait_all(&o, pb)) != COHORT_OK)
            return op_end(&o, st);
        for (int q = 0; q < n; q++) {
            if (q == me)
                continue;
            size_t qlo = slice_lo(len, n, q, al), qhi = slice_lo(len, n, q + 1, al);
            if ((st = check_hdr(&o, q, pb, step + 1, (qhi - qlo) * es)) != COHORT_OK)
                return op_end(&o, st);
            OUT(&o, (unsigned char *)recv + (off + qlo) * es, DATA(shm_buf(s, q, pb)),
                (qhi - qlo) * es);
        }
    }
    return op_end(&o, COHORT_OK);
}

cohort_status coh_shm_reduce(coh_shm *s, const coh_call *c, const void *send, void *recv,
                             size_t count, int root)
{
    if (!ov_in(s, c, COH_COLL_REDUCE, count, dt_unit(c)))
        return red_call(s, c, send, recv, count, root); /* a tail call: ov_in's first test is !s->ov */
    cohort_status st = red_call(s, c, send, recv, count, root);
    shm_ov_done(s, st);
    return st;
}

/* ---- broadcast ---- */

/* Single copy (s->cma, agreed at attach; bytes >= the lead's cma_min, the
 * same on every rank once the contract check passed). Phase 1: every rank
 * publishes its fingerprint and the address of its buffer. After the
 * check each reader copies the head of the message straight from the
 * root's memory into its buffer (process_vm_readv) while the root writes
 * the tail, the last 1/n, into every reader's buffer (process_vm_writev):
 * with 2 ranks both cores copy half (the kernel's copy runs at ~15 GB/s
 * on the development VM, a quarter of a cached memcpy, so one core alone
 * loses to the two-copy pipeline). Phase 2: every rank publishes "done"
 * and waits for the others, so no rank returns while its buffer is still
 * read or written by a peer (for an async call: not before the caller's
 * wait). A rank that fails (a peer died, a bad address) fails the group
 * instead of publishing, which ends the others' waits with that error. */
static cohort_status bcast_single(shm_op *o, void *buf, size_t bytes, int root, int *fallback)
{
    coh_shm *s = o->s;
    cohort_status st;
    int me = s->me, am_root = me == root;
    if ((st = cs_claim(o)) != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;
    unsigned char *mb = shm_buf(s, me, p);
    put_hdr(o, mb, 0, sizeof(shm_cma_desc));
    shm_cma_desc d = {.addr = (uint64_t)(uintptr_t)buf, .bytes = bytes, .flags = sc_xc(s)};
    memcpy(DATA(mb), &d, sizeof d);
    int offered = !am_root && mem_offer(o, buf, bytes, mb, p);
    shm_publish(s);
    if ((st = cs_wait_all(o, p)) != COHORT_OK)
        return st;
    if (!am_root && mem_marked(s, root, p))
        return bcast_mem_read(o, buf, bytes, root, p, offered);
    if ((st = check_all(o, p, 0, sizeof(shm_cma_desc), -1, 0)) != COHORT_OK)
        return st;
    int fl = 0; /* the lead's verdict and probe, as sc_open's */
    for (int q = 0; q < s->n; q++) {
        memcpy(&d, DATA(shm_buf(s, q, p)), sizeof d);
        fl |= (int)d.flags;
    }
    if (fl & SHM_XC_PROBE)
        shm_xc_probe(s);
    if (sc_near(o, fl, bytes)) { /* two copies after this phase, as sc_open's callers */
        if (offered)
            mem_mark(s, 0); /* the root did not take it */
        *fallback = 1;
        return COHORT_OK;
    }
    s->bc_singles++;
    /* The root's share: the last bytes / n, page-aligned in the message. */
    size_t tail = bytes / (size_t)s->n & ~(size_t)4095;
    size_t head = bytes - tail;
    for (int q = 0; q < s->n; q++) {
        if (q == me || (!am_root && q != root))
            continue;
        memcpy(&d, DATA(shm_buf(s, q, p)), sizeof d);
        if (d.bytes != bytes)
            return coh_group_fail(o->g, COHORT_ERR_PROTOCOL,
                                  "shm broadcast #%llu: rank %d announced %llu bytes, this rank "
                                  "%zu",
                                  (unsigned long long)o->c->seq, o->g->local_ranks[q],
                                  (unsigned long long)d.bytes, bytes);
        if (am_root)
            st = tail ? cs_cma_write(o, q, d.addr + head, (unsigned char *)buf + head, tail)
                      : COHORT_OK;
        else
            st = cs_cma_read(o, root, buf, d.addr, head);
        if (st != COHORT_OK)
            return st;
    }
    shm_publish(s); /* done with the peers' buffers and slots */
    if (offered)
        mem_mark(s, 0); /* the root did not take it: nobody reads it after p */
    return cs_wait_all(o, p + 1);
}

/* ---- one copy from a cohort_mem_alloc buffer (shm_mem.h) ----
 *
 * The root's buffer lies in a region it allocated with cohort_mem_alloc.
 * Only the root knows, so the readers prepare the path they would take
 * anyway (single copy or two copies: the same on all of them) and learn
 * otherwise in the call's first phase: the root publishes its region's
 * descriptor instead of data and marks that phase in its control line
 * (mem_p, stored before the publish, cleared after the call). A reader
 * that finds the mark checks the contract (the root's header carries the
 * descriptor's length), maps the region (once, cached) and copies the
 * message with one memcpy. Then, as bcast_single: every rank publishes
 * "done" and waits for all, so the root returns only after every reader
 * has read its buffer. A reader that cannot map the region fails the
 * group with why, which ends every rank's wait with that error.
 *
 * The split: a reader whose own buffer is a region too offers it in the
 * same first phase (its descriptor one line after its payload, its own
 * mark; its header unchanged, so a root on another path never notices).
 * A root on this path then writes the last bytes / n of the message
 * (whole pages) into each such reader's buffer through its own mapping of
 * the reader's region, while the reader copies the rest: two cores copy
 * at once, as bcast_single splits the kernel's copy. */

/* What readers publish in the first phase of the path they prepared. */
static uint64_t bcast_first_len(coh_shm *s, const coh_call *c, size_t bytes)
{
    return shm_cma_call(s, c, COH_COLL_BROADCAST, bytes) ? sizeof(shm_cma_desc) : 0;
}

static int mem_marked(const coh_shm *s, int q, uint32_t p)
{
    return p && atomic_load_explicit(&shm_ctl_of(s, q)->mem_p, memory_order_relaxed) == p;
}

static void mem_mark(coh_shm *s, uint32_t p)
{
    atomic_store_explicit(&shm_ctl_of(s, s->me)->mem_p, p, memory_order_relaxed);
}

/* A reader offers its own buffer for the split (before its first-phase
 * publish into mb, its buffer of phase p); 1 if it did. */
static int mem_offer(shm_op *o, void *buf, size_t bytes, unsigned char *mb, uint32_t p)
{
    coh_shm *s = o->s;
    shm_mem_desc d;
    if (!s->mem_ok || s->mem_mode == 3 || !p || !bytes || s->S < SHM_LINE + sizeof d ||
        !coh_mem_find(s->g, buf, bytes, &d) || !coh_mem_recent(s, &d, 0))
        return 0;
    memcpy(DATA(mb) + SHM_LINE, &d, sizeof d);
    mem_mark(s, p);
    return 1;
}

/* The split: the root's share of the message, at its end. */
static size_t mem_tail(const coh_shm *s, size_t bytes) { return bytes / (size_t)s->n & ~(size_t)4095; }

/* A region descriptor local rank q published for this call. */
static cohort_status mem_desc_get(shm_op *o, int q, const unsigned char *at, size_t bytes,
                                  shm_mem_desc *d)
{
    memcpy(d, at, sizeof *d);
    if (d->bytes == bytes && d->off <= d->size && d->bytes <= d->size - d->off)
        return COHORT_OK;
    return coh_group_fail(o->g, COHORT_ERR_PROTOCOL,
                          "shm broadcast #%llu: rank %d announced %llu bytes at %llu in a "
                          "%llu-byte region, this rank %zu bytes",
                          (unsigned long long)o->c->seq, o->g->local_ranks[q],
                          (unsigned long long)d->bytes, (unsigned long long)d->off,
                          (unsigned long long)d->size, bytes);
}

static cohort_status bcast_mem_root(shm_op *o, const void *buf, const shm_mem_desc *d,
                                    size_t bytes)
{
    coh_shm *s = o->s;
    cohort_status st;
    if ((st = cs_claim(o)) != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;
    unsigned char *mb = shm_buf(s, s->me, p);
    put_hdr(o, mb, 0, sizeof *d);
    memcpy(DATA(mb), d, sizeof *d);
    mem_mark(s, p);
    shm_publish(s);
    if ((st = cs_wait_all(o, p)) != COHORT_OK ||
        (st = check_all(o, p, 0, bcast_first_len(s, o->c, bytes), -1, 0)) != COHORT_OK)
        return st;
    size_t tail = mem_tail(s, bytes), head = bytes - tail;
    for (int q = 0; q < s->n && tail; q++) {
        if (q == s->me || !mem_marked(s, q, p))
            continue;
        shm_mem_desc rd;
        unsigned char *base;
        if ((st = mem_desc_get(o, q, DATA(shm_buf(s, q, p)) + SHM_LINE, bytes, &rd)) !=
                COHORT_OK ||
            (st = cs_up(o->g, coh_mem_map(s, q, &rd, o->c, 1, &base))) != COHORT_OK)
            return st;
        CPY(base + rd.off + head, (const unsigned char *)buf + head, tail);
    }
    shm_publish(s); /* done: the readers' shares written */
    st = cs_wait_all(o, p + 1);
    if (st != COHORT_OK)
        return st; /* the mark stays: a reader that has not looked at it yet
                    * must still take this path and meet the failure there,
                    * not read the region's descriptor as a CMA one (a
                    * PROTOCOL error hiding the cause); phases only grow, so
                    * no later call matches it */
    /* every reader is past phase p: none looks at the mark any more */
    mem_mark(s, 0);
    coh_mem_count(COH_MEM_ROOTED);
    return st;
}

/* A reader whose first phase p carries the root's mark; offered: it
 * offered its own buffer (mem_offer), so the root writes the tail. */
static cohort_status bcast_mem_read(shm_op *o, void *buf, size_t bytes, int root, uint32_t p,
                                    int offered)
{
    coh_shm *s = o->s;
    cohort_status st =
        check_all(o, p, 0, bcast_first_len(s, o->c, bytes), root, sizeof(shm_mem_desc));
    if (st != COHORT_OK)
        return st;
    shm_mem_desc d;
    unsigned char *base;
    if ((st = mem_desc_get(o, root, DATA(shm_buf(s, root, p)), bytes, &d)) != COHORT_OK ||
        (st = cs_up(o->g, coh_mem_map(s, root, &d, o->c, 0, &base))) != COHORT_OK)
        return st;
    size_t len = offered ? bytes - mem_tail(s, bytes) : bytes;
    CPY(buf, base + d.off, len);
    shm_publish(s); /* done with the root's buffer */
    st = cs_wait_all(o, p + 1); /* and the root with mine */
    if (offered)
        mem_mark(s, 0);
    if (st == COHORT_OK)
        coh_mem_count(offered ? COH_MEM_SPLIT : COH_MEM_READ);
    return st;
}

/* ---- the small-broadcast ring (shm_seg.h, "The ring") ---- */

/* My record of ring phase p: the full header, the short fingerprint of
 * call c and, at most SHM_RING_INLINE bytes, the payload (root only). */
static COH_INLINE void ring_put(coh_shm *s, uint32_t p, const coh_hdr *h, const coh_call *c,
                               uint64_t key, const void *data, size_t bytes)
{
    shm_ring_rec *r = shm_ring_rec_of(s, s->me, p);
    const unsigned char *hb = (const unsigned char *)h;
    atomic_store_explicit(&r->phase, p - 1, memory_order_relaxed); /* never this index */
    atomic_thread_fence(memory_order_release);
    /* word by word from the header, unrolled: the loop with a stack copy
     * was ~60 instructions of an 8 B broadcast's ~230 (callgrind) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 8
#endif
    for (size_t i = 0; i < sizeof(coh_hdr) / 8; i++) {
        uint64_t v;
        memcpy(&v, hb + 8 * i, 8);
        atomic_store_explicit(&r->w[i], v, memory_order_relaxed);
    }
    atomic_store_explicit(&r->seq, c->seq, memory_order_relaxed);
    atomic_store_explicit(&r->count, c->count, memory_order_relaxed);
    atomic_store_explicit(&r->key, key, memory_order_relaxed);
    if (data && bytes && bytes <= SHM_RING_INLINE)
        coh_small_copy(r->inl, data, bytes);
    atomic_store_explicit(&r->phase, p, memory_order_release);
}

/* A reader that comes before the root's compact record polls it this many
 * times (a few us) before the usual wait takes over: in lockstep (a
 * barrier between calls) the root's record follows within ~1 us. */
#define CREC_SPINS 256

/* The compact record's count word (shm_ring_crec): the count and the
 * root (+ 1: none is 0) side by side, exact while the count is below 2^8
 * (at most 16 elements here) and the root below 2^24 - a call outside
 * takes the full record (0). The root is the call's group rank, not the
 * record's owner: in a hierarchical call a host without the root runs
 * its local phase from its leader whatever root each rank names. */
static COH_INLINE int crec_word(const coh_call *c, uint32_t *w)
{
    uint32_t r = (uint32_t)c->root + 1u;
    if (c->count >= 256 || r >= 1u << 24)
        return 0;
    *w = (uint32_t)c->count | r << 8;
    return 1;
}

/* My compact record of phase p (a 2-rank ring call of <= SHM_RING_CINL
 * bytes, shm_ring_crec; w from crec_word): after the full record, so a
 * reader that finds it finds that too. */
static COH_INLINE void crec_put(coh_shm *s, uint32_t p, const coh_call *c, uint64_t key,
                               uint32_t w, const void *data, size_t bytes)
{
    shm_ring_crec *r = shm_ring_crec_of(s, s->me, p);
    atomic_store_explicit(&r->phase, p - 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    atomic_store_explicit(&r->count, w, memory_order_relaxed);
    atomic_store_explicit(&r->seq, (uint32_t)c->seq, memory_order_relaxed);
    atomic_store_explicit(&r->key, (uint32_t)key, memory_order_relaxed);
    coh_small_copy(r->inl, data, bytes);
    atomic_store_explicit(&r->phase, p, memory_order_release);
}

/* The reader's side: 1 when the writer q's compact record of p is here
 * (after a short spin: a reader that came first) with call c's
 * fingerprint (w: c's crec_word), or with any when the check is off.
 * Anything else - the writer late, in another call, or a different
 * fingerprint - takes the usual path, which waits, compares the full
 * records and reports. */
static COH_INLINE int crec_take(const coh_shm *s, int q, uint32_t p, const coh_call *c,
                               uint64_t key, uint32_t w)
{
    shm_ring_crec *r = shm_ring_crec_of(s, q, p);
    for (int i = 0; atomic_load_explicit(&r->phase, memory_order_acquire) != p; i++) {
        if (i == CREC_SPINS || s->oversub)
            return 0;
        coh_cpu_relax();
    }
    return !s->check ||
           (atomic_load_explicit(&r->seq, memory_order_relaxed) == (uint32_t)c->seq &&
            atomic_load_explicit(&r->count, memory_order_relaxed) == w &&
            atomic_load_explicit(&r->key, memory_order_relaxed) == (uint32_t)key &&
            (key >> 24 & 0xff) != FP_TAG_SAT);
}

/* Does local rank q's record of phase p carry call c's fingerprint? (the
 * fast path: line 0 only; a saturated tag always takes the full header) */
static inline int ring_fp_eq(const uint64_t f[3], const coh_call *c, uint64_t key)
{
    return f[0] == c->seq && f[1] == c->count && f[2] == key && (key >> 24 & 0xff) != FP_TAG_SAT;
}
static int ring_fp_ok(const coh_shm *s, int q, uint32_t p, const coh_call *c)
{
    uint64_t f[3];
    return shm_ring_fp(s, q, p, f) && ring_fp_eq(f, c, fp_key(c));
}

/* Would ring_full_check fail? (so a reader can publish before it fails) */
static int ring_full_bad(const coh_shm *s, const coh_call *c, int q, uint32_t p,
                         const coh_hdr *mine)
{
    coh_hdr got;
    return !shm_ring_get(s, q, p, &got) || coh_hdr_match(mine, &got) != COH_FIELD_NONE ||
           (fp_key(c) >> 24 & 0xff) != FP_TAG_SAT;
}

/* The short fingerprints differ (or the tag saturated): the full headers
 * decide and word the report; equal headers with different fingerprints
 * are a corrupted segment. */
static cohort_status ring_full_check(shm_op *o, const coh_call *c, int q, uint32_t p,
                                     const coh_hdr *mine)
{
    coh_hdr got;
    if (!shm_ring_get(o->s, q, p, &got))
        return ring_vs_call(o, c, q, p, mine);
    if (coh_hdr_match(mine, &got) != COH_FIELD_NONE)
        return ring_mismatch(o, c, q, mine, &got);
    if ((fp_key(c) >> 24 & 0xff) == FP_TAG_SAT)
        return COHORT_OK;
    return coh_group_fail(o->g, COHORT_ERR_PROTOCOL,
                          "shm: rank %d's ring fingerprint and header disagree in %s #%llu",
                          o->g->local_ranks[q], coh_coll_name(c->coll),
                          (unsigned long long)c->seq);
}

/* Local rank q has no ring record for phase p: it is in a non-ring call
 * there, whose header (buffer p % 2) stays put until it passes phase p + 1,
 * which its own check of this rank's stale control-line fingerprint
 * forbids. */
static cohort_status ring_vs_call(shm_op *o, const coh_call *c, int q, uint32_t p,
                                  const coh_hdr *exp)
{
    coh_hdr got;
    memcpy(&got, shm_buf(o->s, q, p), sizeof got);
    if (o->s->check && got.magic == COH_HDR_MAGIC)
        return ring_mismatch(o, c, q, exp, &got);
    return coh_group_fail(o->g, COHORT_ERR_PROTOCOL,
                          "shm: rank %d is not in a small broadcast where this rank's %s #%llu "
                          "is",
                          o->g->local_ranks[q], coh_coll_name(c->coll),
                          (unsigned long long)c->seq);
}

/* An op for waits outside a call of its own (the root's lazy check when
 * a reader is behind - the common case when ranks outnumber cpus - and
 * finalize's): only what the waits (shm_wait.c) and the ring reports
 * read. Not memset: shm_op is ~1.4 KB, mostly the wait's report buffer
 * that the wait itself sets up (w_init); zeroing it cost ~170
 * instructions (callgrind) each time. */

/* The lazy check's rare parts, out of line so that the common one (the
 * phase long done, every done word set) inlines into ring_settle: ~45
 * instructions of call and frame per 8 B broadcast (callgrind). */

/* A wait gets an op of its own, naming call c in stall reports. */
static COH_COLD cohort_status ring_check_wait(coh_shm *s, const coh_call *c, uint32_t x)
{
    shm_op w;
    shm_op_bare(&w, s, c);
    return cs_wait_all(&w, x);
}

/* q's done word does not say x: the records decide. */
static COH_COLD cohort_status ring_check_rec(shm_op *o, const coh_call *c, int q, uint32_t x)
{
    coh_shm *s = o->s;
    if (ring_fp_ok(s, q, x, c))
        return COHORT_OK;
    coh_hdr mine;
    if (!shm_ring_get(s, s->me, x, &mine))
        return coh_group_fail(s->g, COHORT_ERR_PROTOCOL, "shm: lost the ring record of %s #%llu",
                              coh_coll_name(c->coll), (unsigned long long)c->seq);
    return ring_full_check(o, c, q, x, &mine);
}

/* The root's lazy check of a phase x it rooted: waits until every reader
 * is done with x (stall reports and the out-of-band probe name that call),
 * then compares their records with the root's. */
static inline cohort_status ring_check(shm_op *o, uint32_t x)
{
    coh_shm *s = o->s;
    const coh_call *c = &s->ring_calls[x & (uint32_t)(s->ring_nrec - 1)];
    cohort_status st;
    if (!shm_reached(s->min_seen, x) && (st = ring_check_wait(s, c, x)) != COHORT_OK)
        return st;
    if (!s->check)
        return COHORT_OK;
    int lead = s->ring_lead[x & (uint32_t)(s->ring_nrec - 1)];
    int spread = s->ring_spread[x & (uint32_t)(s->ring_nrec - 1)];
    if (lead >= 0) {
        /* a leaf of a gather or reduce: its root's done word says that
         * the root compared every leaf's record with its own call (this
         * one's included); else the root's record decides */
        if (atomic_load_explicit(shm_ring_done(s, lead, x, spread), memory_order_relaxed) ==
            SHM_RING_DONE_IN(x))
            return COHORT_OK;
        return ring_check_rec(o, c, lead, x);
    }
    for (int q = 0; q < s->n; q++) {
        /* q's done word: it read x from this rank's record and its check
         * passed. Every rank that stored it compared an exact fingerprint
         * naming one root (the rank whose record it read), and that root
         * stores no done word; so if every other rank stored it, they all
         * read this root's record and agree with it. Else the records
         * decide, as before the done words. */
        if (q == s->me ||
            atomic_load_explicit(shm_ring_done(s, q, x, spread), memory_order_relaxed) == x)
            continue;
        if ((st = ring_check_rec(o, c, q, x)) != COHORT_OK)
            return st;
    }
    return COHORT_OK;
}

/* Checks every phase this rank rooted up to `limit`, oldest first. */
static cohort_status ring_settle(shm_op *o, uint32_t limit)
{
    coh_shm *s = o->s;
    uint32_t mask = (uint32_t)(s->ring_nrec - 1);
    while (s->ring_npend) {
        uint32_t x = s->ring_pend[s->ring_pend_head];
        if (!shm_reached(limit, x))
            break;
        cohort_status st = ring_check(o, x);
        if (st != COHORT_OK)
            return st;
        s->ring_pend_head = (s->ring_pend_head + 1) & mask;
        s->ring_npend--;
    }
    return COHORT_OK;
}

/* bcast_ring's lazy check. A root running ahead has one phase due per
 * call (p - K), whose readers are past it (min_seen) with their done words
 * set: that case inline, as ring_check decides it; any other (a wait, a
 * record to compare, two phases due) through ring_settle, which checks
 * the same phase again from the start. */
static inline cohort_status ring_settle_call(shm_op *o, uint32_t limit)
{
    coh_shm *s = o->s;
    uint32_t mask = (uint32_t)(s->ring_nrec - 1), head = s->ring_pend_head;
    uint32_t x = s->ring_pend[head];
    if (!shm_reached(limit, x))
        return COHORT_OK;
    if (!shm_reached(s->min_seen, x) ||
        (s->ring_npend > 1 && shm_reached(limit, s->ring_pend[(head + 1) & mask])))
        return ring_settle(o, limit);
    if (s->check) {
        int lead = s->ring_lead[x & mask], spread = s->ring_spread[x & mask];
        if (lead >= 0) { /* a leaf: the root's word (ring_check) */
            if (atomic_load_explicit(shm_ring_done(s, lead, x, spread), memory_order_relaxed) !=
                SHM_RING_DONE_IN(x))
                return ring_settle(o, limit);
        } else if (s->n == 2) { /* the one reader, without the loop */
            if (atomic_load_explicit(shm_ring_done(s, 1 - s->me, x, spread),
                                     memory_order_relaxed) != x)
                return ring_settle(o, limit);
        } else {
            for (int q = 0; q < s->n; q++)
                if (q != s->me &&
                    atomic_load_explicit(shm_ring_done(s, q, x, spread), memory_order_relaxed) !=
                        x)
                    return ring_settle(o, limit);
        }
    }
    s->ring_pend_head = (head + 1) & mask;
    s->ring_npend--;
    return COHORT_OK;
}

/* cohort_finalize's closing check: the ring calls still unchecked. Waits
 * are bounded by the group's timeout and the out-of-band probe. */
static cohort_status ring_close(coh_shm *s, int wait_ms)
{
    (void)wait_ms;
    int p = coh_group_poisoned(s->g);
    if (p)
        return (cohort_status)p;
    if (!s->ring_npend)
        return COHORT_OK;
    shm_op o;
    shm_op_bare(&o, s, NULL);
    return ring_settle(&o, s->phase);
}

/* The lines of the ring call RING_PF_AHEAD phases on, taken for writing
 * by a writer that just published (shm_seg.h "Taking the next lines
 * early"): its record and compact record and, with_slot, the slot's lines
 * when shm_ring_pf_slot allows. Out of line: the writer's path stays as
 * it compiled (shm_coll.c's broadcast moves with any change here). */
static __attribute__((noinline)) void ring_prefetch(const coh_shm *s, uint32_t p,
                                                    const shm_ring_cls *rc, size_t bytes,
                                                    int with_slot)
{
    uint32_t q = p + SHM_RING_PF_AHEAD;
    const unsigned char *r = (const unsigned char *)shm_ring_rec_of(s, s->me, q);
    shm_prefetch_w(r);
    shm_prefetch_w(r + SHM_LINE);
    if (s->n == 2 && bytes <= SHM_RING_CINL) /* a line apart from p's, either layout */
        shm_prefetch_w(shm_ring_crec_of(s, s->me, q));
    if (with_slot && shm_ring_pf_slot(rc, bytes)) {
        const unsigned char *sl = shm_ring_slot(s, s->me, q, rc);
        for (size_t i = 0; i < bytes; i += SHM_LINE)
            shm_prefetch_w(sl + i);
    }
}

/* One phase, see shm_seg.h. The root publishes `bytes` from src and
 * returns once its slot is written; a reader returns once it checked the
 * root's record and copied bytes [off, off + len) of it to dst (a
 * broadcast: all of them; a scatter: its block). */
static COH_INLINE cohort_status ring_one(shm_op *o, const void *src, void *dst, size_t bytes,
                                        size_t off, size_t len, int root)
{
    coh_shm *s = o->s;
    cohort_status st;
    int me = s->me;
    /* the tiny ring for the smallest messages (same records, deeper), the
     * halves of a large ring by size (shm_seg.h, shm_ring_class) */
    shm_ring_cls rc = shm_ring_class(s, bytes);
    uint32_t p = s->phase + 1, k = rc.k, mask = (uint32_t)(s->ring_nrec - 1);
    /* the root's slot p % K: free once every rank is done with p - K
     * (K: the slots its class cycles through, rc.cyc).
     * With ring_drain, a root that must wait at all waits until every
     * reader is done with everything it published (p - 1): then its next
     * K calls do not wait, and the readers that catch up with it wait at
     * one phase instead of each at its own (docs/shm.md, "Draining the
     * ring"). Never a later phase than a synchronising broadcast waits
     * for (p), so it cannot wait for what the program does not do. */
    if (me == root) {
        uint32_t need = p - rc.cyc;
        if (s->ring_drain && !shm_reached(s->min_seen, need))
            need = p - 1;
        if ((st = cs_wait_all(o, need)) != COHORT_OK)
            return st;
    }
    /* phases I rooted up to p - K are checked before any record of them
     * can be overwritten (and before my slot is) */
    if (s->ring_npend && (st = ring_settle_call(o, p - rc.cyc)) != COHORT_OK) /* a reader has none */
        return st;
    /* A 2-rank broadcast or scatter of <= 16 B: the reader takes the
     * root's compact record (shm_ring_crec) as the path below takes its
     * full one. */
    uint32_t cw = 0;
    int compact = s->n == 2 && bytes <= SHM_RING_CINL && crec_word(o->c, &cw);
    if (me != root && compact && crec_take(s, root, p, o->c, o->fp_key, cw)) {
        coh_small_copy(dst, shm_ring_crec_of(s, root, p)->inl + off, len);
        if (s->check)
            atomic_store_explicit(shm_ring_done(s, me, p, shm_ring_spread(k)), p,
                                  memory_order_relaxed);
        shm_publish_ring(s); /* done reading phase p */
        return COHORT_OK;
    }
    /* The reader of a 2-rank group whose root's record of p is here with
     * this call's fingerprint: it copies out, stores its done word and
     * publishes, and writes no record of its own. Only the root reads a
     * record of p besides its owner (nobody else is in the group), and
     * the root's lazy check reads the done word, which says the same
     * (ring_check); on any other outcome the path below writes the record
     * first and decides as before. */
    if (me != root && s->n == 2) {
        uint64_t f[3];
        if (shm_ring_fp(s, root, p, f) && (!s->check || ring_fp_eq(f, o->c, o->fp_key))) {
            if (bytes > SHM_RING_INLINE)
                CPY(dst, shm_ring_slot(s, root, p, &rc) + off, len);
            else
                coh_small_copy(dst, shm_ring_rec_of(s, root, p)->inl + off, len);
            if (s->check)
                atomic_store_explicit(shm_ring_done(s, me, p, shm_ring_spread(k)), p,
                                      memory_order_relaxed);
            shm_publish_ring(s); /* done reading slot p % K */
            return COHORT_OK;
        }
    }
    uint64_t key = s->check ? o->fp_key : fp_key(o->c);
    if (me == root) {
        /* the root's slot before its record: a reader that finds the
         * record of phase p (release) finds the payload too, without the
         * root's arrive. A scatter's root (len < bytes) leaves its own
         * block out: no reader copies it (2 ranks: half the root's copy). */
        if (bytes > SHM_RING_INLINE) {
            unsigned char *slot = shm_ring_slot(s, me, p, &rc);
            if (len < bytes) {
                CPY(slot, src, off);
                CPY(slot + off + len, (const unsigned char *)src + off + len, bytes - off - len);
            } else {
                CPY(slot, src, bytes);
            }
        }
        /* its header straight into the record (read by nothing else here:
         * the root's checks compare records) */
        coh_hdr h;
        coh_hdr_from_call(&h, s->g, o->c, COH_MSG_COLL, 0, bytes);
        ring_put(s, p, &h, o->c, key, src, bytes);
        if (compact)
            crec_put(s, p, o->c, key, cw, src, bytes);
        s->ring_calls[p & mask] = *o->c;
        s->ring_lead[p & mask] = -1;
        s->ring_spread[p & mask] = (unsigned char)shm_ring_spread(k);
        s->ring_pend[(s->ring_pend_head + s->ring_npend) & mask] = p;
        s->ring_npend++;
        s->ring_close = ring_close;
        shm_publish_ring(s);
        if (s->ring_pf)
            ring_prefetch(s, p, &rc, bytes, 1);
        return COHORT_OK;
    }
    coh_hdr_from_call(&o->mine, s->g, o->c, COH_MSG_COLL, 0, bytes);
    ring_put(s, p, &o->mine, o->c, key, NULL, bytes);
    o->ring_wait = 1;
    o->ring_q = root;
    o->ring_p = p;
    /* A root running ahead has written its record of p already (phase
     * tag last, release): then the root's control line is not pulled at
     * all - the record's line is the one line that moves (its fingerprint
     * and, <= 32 B, the payload). Else wait for its arrive as always. */
    st = atomic_load_explicit(&shm_ring_rec_of(s, root, p)->phase, memory_order_acquire) == p
             ? COHORT_OK
             : shm_wait_rank(o, root, p);
    o->ring_wait = 0;
    /* On a mismatch this rank publishes phase p before failing (it read
     * nothing): ranks waiting for it - a synchronising call, or a reader
     * that believes this rank is root - then compare its record themselves
     * and fail with the report too, instead of learning it from the abort. */
    if (st != COHORT_OK) {
        if (!o->ring_bad)
            return cs_up(o->g, st);
        shm_publish(s);
        return ring_mismatch(o, o->c, root, &o->mine, &o->ring_got);
    }
    uint64_t f[3];
    if (!shm_ring_fp(s, root, p, f)) {
        shm_publish(s);
        return ring_vs_call(o, o->c, root, p, &o->mine);
    }
    /* f is the root's record of p (read above; it stays until I publish p) */
    if (s->check && !ring_fp_eq(f, o->c, o->fp_key) && ring_full_bad(s, o->c, root, p, &o->mine)) {
        shm_publish(s); /* read nothing; the record stays until I pass p + 3K */
        return ring_full_check(o, o->c, root, p, &o->mine);
    }
    if (bytes > SHM_RING_INLINE)
        CPY(dst, shm_ring_slot(s, root, p, &rc) + off, len);
    else
        coh_small_copy(dst, shm_ring_rec_of(s, root, p)->inl + off, len);
    if (s->check) /* my check of the root's record passed (ring_check) */
        atomic_store_explicit(shm_ring_done(s, me, p, shm_ring_spread(k)), p,
                              memory_order_relaxed);
    shm_publish_ring(s); /* done reading slot p % K */
    return COHORT_OK;
}

static cohort_status bcast_ring(shm_op *o, void *buf, size_t bytes, int root)
{
    return ring_one(o, buf, buf, bytes, 0, bytes, root);
}

/* A small gather or reduce (per-rank bytes <= ring_bytes): one ring phase
 * p the other way round (shm_seg.h "Rooted in"). A leaf writes its slot p
 * % K (once every rank is done with p - K) and its record of p (with the
 * data inline up to SHM_RING_INLINE bytes), publishes p and returns, its
 * check of p pending (ring_check: the root's done word or record). The
 * root writes its record, waits for each leaf's record of p, compares it
 * with its own call and sets srcs[q] to the leaf's data; the caller then
 * copies out or reduces and calls ring_in_end, which stores the root's
 * done word and publishes p (done reading). Returns 1 at the root with
 * srcs set, 0 at a leaf (done), -1 with *st set on a failure. */
static int ring_in(shm_op *o, const void *send, size_t bytes, int root, cohort_status *st)
{
    coh_shm *s = o->s;
    const coh_call *c = o->c;
    int me = s->me;
    shm_ring_cls rc = shm_ring_class(s, bytes);
    uint32_t p = s->phase + 1, k = rc.k, mask = (uint32_t)(s->ring_nrec - 1);
    if (me != root) {
        /* my slot p % K, as a broadcast root's (ring_drain alike) */
        uint32_t need = p - rc.cyc;
        if (s->ring_drain && !shm_reached(s->min_seen, need))
            need = p - 1;
        if ((*st = cs_wait_all(o, need)) != COHORT_OK)
            return -1;
    }
    if (s->ring_npend && (*st = ring_settle_call(o, p - rc.cyc)) != COHORT_OK)
        return -1;
    uint64_t key = s->check ? o->fp_key : fp_key(c);
    /* 2 ranks, <= 16 B: the leaf also writes a compact record, and the
     * root that finds it with its own call's fingerprint takes the data
     * from it and writes no record of its own - as a broadcast's reader
     * (ring_one): the leaf's lazy check reads the root's done word, and
     * nobody waits for the root's record when the two calls agree. */
    uint32_t cw = 0;
    int compact = s->n == 2 && bytes <= SHM_RING_CINL && crec_word(c, &cw);
    if (me == root && compact && crec_take(s, 1 - me, p, c, o->fp_key, cw)) {
        s->srcs[me] = send;
        s->srcs[1 - me] = shm_ring_crec_of(s, 1 - me, p)->inl;
        return 1;
    }
    coh_hdr_from_call(&o->mine, s->g, c, COH_MSG_COLL, 0, bytes);
    if (me != root) {
        if (bytes > SHM_RING_INLINE)
            ring_copy(shm_ring_slot(s, me, p, &rc), send, bytes);
        ring_put(s, p, &o->mine, c, key, send, bytes);
        if (compact)
            crec_put(s, p, c, key, cw, send, bytes);
        s->ring_calls[p & mask] = *c;
        s->ring_lead[p & mask] = root;
        s->ring_spread[p & mask] = (unsigned char)shm_ring_spread(k);
        s->ring_pend[(s->ring_pend_head + s->ring_npend) & mask] = p;
        s->ring_npend++;
        s->ring_close = ring_close;
        shm_publish_ring(s);
        /* A leaf takes its record's lines early only with 2 ranks and a
         * payload inline in it (paired, 5 rounds: gather 32 B a rank
         * x0.58, reduce 16 B x0.71); its slot's lines too, or more ranks,
         * cost as much (2 ranks reduce 64 B x1.11; 4 ranks on 2 cpus
         * gather 16-128 B x1.2-1.5, slot lines: gather 1 KiB x1.81) */
        if (s->ring_pf && s->n == 2 && bytes <= SHM_RING_INLINE)
            ring_prefetch(s, p, &rc, bytes, 0);
        return 0;
    }
    /* the root's record first: a rank waiting for this one (it believes
     * this rank is a leaf, or its root) compares it while it waits */
    ring_put(s, p, &o->mine, c, key, NULL, bytes);
    for (int q = 0; q < s->n; q++) {
        if (q == me) {
            s->srcs[q] = send;
            continue;
        }
        shm_ring_rec *r = shm_ring_rec_of(s, q, p);
        if (atomic_load_explicit(&r->phase, memory_order_acquire) != p) {
            o->ring_wait = 1;
            o->ring_q = q;
            o->ring_p = p;
            *st = shm_wait_rank(o, q, p);
            o->ring_wait = 0;
            if (*st != COHORT_OK) {
                if (!o->ring_bad) {
                    *st = cs_up(o->g, *st);
                    return -1;
                }
                /* publishing p (read nothing more) lets a rank waiting
                 * for this one compare its record and report too */
                shm_publish(s);
                *st = ring_mismatch(o, c, q, &o->mine, &o->ring_got);
                return -1;
            }
        }
        uint64_t f[3];
        if (!shm_ring_fp(s, q, p, f)) { /* q published p in a non-ring call */
            shm_publish(s);
            *st = ring_vs_call(o, c, q, p, &o->mine);
            return -1;
        }
        /* q's record and slot of p stay until I publish p */
        if (s->check && !ring_fp_eq(f, c, o->fp_key) && ring_full_bad(s, c, q, p, &o->mine)) {
            shm_publish(s);
            *st = ring_full_check(o, c, q, p, &o->mine);
            return -1;
        }
        s->srcs[q] = bytes > SHM_RING_INLINE ? (const void *)shm_ring_slot(s, q, p, &rc)
                                             : (const void *)r->inl;
    }
    return 1;
}

/* The depth of the ring a call of `bytes` a rank takes decides where its
 * done words are (shm_ring_done). */
static inline int ring_spread_of(const coh_shm *s, size_t bytes)
{
    return shm_ring_spread(s->tiny_k && bytes <= s->tiny_bytes ? s->tiny_k : s->ring_k);
}

/* The root of ring_in is done reading phase p's records and slots. */
static inline void ring_in_end(coh_shm *s, size_t bytes)
{
    uint32_t p = s->phase + 1;
    if (s->check)
        atomic_store_explicit(shm_ring_done(s, s->me, p, ring_spread_of(s, bytes)),
                              SHM_RING_DONE_IN(p), memory_order_relaxed);
    shm_publish_ring(s);
}

/* Every rank decides from the call's own fields and the agreed geometry,
 * so ranks that agree on the call agree on the path. */
static int gather_ring(coh_shm *s, const coh_call *c, size_t bpr)
{
    return s && c && s->ring_k && s->n > 1 && bpr <= s->ring_bytes &&
           !shm_cma_call(s, c, COH_COLL_GATHER, bpr);
}
static int reduce_ring(coh_shm *s, const coh_call *c, size_t count)
{
    size_t bytes;
    return s && c && s->ring_k && s->n > 1 && c->dtype < COHORT_DTYPE_COUNT &&
           mul_ok(count, dt_size[c->dtype], &bytes) && bytes <= s->ring_bytes &&
           !shm_cma_call(s, c, COH_COLL_REDUCE, bytes);
}

/* inline into its one caller, coh_shm_broadcast: a frame less per small broadcast */
static COH_INLINE cohort_status bcast_any(coh_shm *s, const coh_call *c, void *buf, size_t bytes,
                                         int root)
{
    shm_op o;
    /* the ring for small messages, unless single copy was asked for them */
    int ring = s && c && s->ring_k && bytes <= s->ring_bytes && s->n > 1 &&
               !shm_cma_call(s, c, COH_COLL_BROADCAST, bytes);
    cohort_status st = op_begin_x(&o, s, c, 0, ring);
    if (st != COHORT_OK)
        return st;
    if (root < 0 || root >= s->n)
        return bad_arg(&o, "root is not a local rank index");
    if (bytes && !buf)
        return bad_arg(&o, "NULL buffer");
    if (s->n == 1)
        return COHORT_OK;
    if (ring)
        return bcast_ring(&o, buf, bytes, root);
    int me = s->me, am_root = me == root;
    /* a root buffer from cohort_mem_alloc: one memcpy per reader (bcast_mem_root) */
    shm_mem_desc md;
    if (am_root && s->mem_ok && bytes && s->phase + 1 != 0 && coh_mem_find(s->g, buf, bytes, &md) &&
        coh_mem_recent(s, &md, 1))
        return bcast_mem_root(&o, buf, &md, bytes);
    if (shm_cma_call(s, c, COH_COLL_BROADCAST, bytes)) {
        int fallback = 0;
        st = bcast_single(&o, buf, bytes, root, &fallback);
        if (st != COHORT_OK || !fallback)
            return st;
    }
    size_t S = bcast_piece(s->S, bytes);
    unsigned char *b = buf;
    o.nt = !am_root && bytes >= s->nt_bytes;
    uint32_t step = 0;
    size_t off = 0;
    int offered = 0;
    do {
        size_t len = COH_MIN(S, bytes - off);
        uint32_t p = s->phase + 1;
        if (step == 0 || am_root) {
            if ((st = cs_claim(&o)) != COHORT_OK)
                return st;
            unsigned char *mb = shm_buf(s, me, p);
            put_hdr(&o, mb, step, am_root ? len : 0);
            if (am_root)
                CPY(DATA(mb), b + off, len);
            else
                offered = mem_offer(&o, buf, bytes, mb, p);
        }
        shm_publish(s); /* readers after step 0: "done reading step-1" */
        if (step == 0) {
            if ((st = cs_wait_all(&o, p)) != COHORT_OK)
                return st;
            if (!am_root && mem_marked(s, root, p))
                return bcast_mem_read(&o, buf, bytes, root, p, offered);
            if (offered)
                mem_mark(s, 0); /* the root did not take it (it is past p) */
            if ((st = check_all(&o, p, 0, 0, root, len)) != COHORT_OK)
                return st;
        } else if (!am_root) {
            if ((st = cs_wait_rank(&o, root, p)) != COHORT_OK ||
                (st = check_hdr(&o, root, p, step, len)) != COHORT_OK)
                return st;
        }
        if (!am_root)
            OUT(&o, b + off, DATA(shm_buf(s, root, p)), len);
        off += len;
        step++;
    } while (off < bytes);
    return op_end(&o, COHORT_OK);
}

/* ---- all_gather / gather ---- */

cohort_status coh_shm_all_gather(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t bpr)
{
    shm_op o;
    cohort_status st = op_begin(&o, s, c, 0);
    if (st != COHORT_OK)
        return st;
    size_t total;
    if (!mul_ok(bpr, (size_t)s->n, &total))
        return bad_arg(&o, "bytes per rank * ranks overflows");
    if (bpr && (!send || !recv))
        return bad_arg(&o, "NULL buffer");
    int n = s->n, me = s->me;
    unsigned char *rb = recv;
    unsigned char *own = rb + (size_t)me * bpr;
    const unsigned char *src = send;
    /* send may overlap recv anywhere (in place is send == own or send ==
     * recv). Piece 0 is published from send untouched; once the contract
     * check passed, my part moves to its final place before any peer data
     * lands, and later pieces are published from there. */
    int ovl = overlap(send, bpr, recv, total);
    o.nt = total >= s->nt_bytes;
    if (n == 1) {
        if (src != own && bpr)
            memmove(own, src, bpr);
        return COHORT_OK;
    }
    if (shm_cma_use(s, COH_COLL_ALL_GATHER, bpr)) {
        int fallback = 0;
        st = ag_single(&o, src, rb, bpr, ovl, &fallback);
        if (st != COHORT_OK || !fallback)
            return st;
    }
    size_t S = s->S, off = 0;
    uint32_t step = 0;
    do {
        size_t len = COH_MIN(S, bpr - off);
        if ((st = cs_claim(&o)) != COHORT_OK)
            return st;
        uint32_t p = s->phase + 1;
        unsigned char *mb = shm_buf(s, me, p);
        put_hdr(&o, mb, step, len);
        CPY(DATA(mb), src + off, len);
        shm_publish(s);
        if ((st = cs_wait_all(&o, p)) != COHORT_OK ||
            (st = check_all(&o, p, step, len, -1, 0)) != COHORT_OK)
            return st;
        if (step == 0 && ovl) {
            if (src != own)
                memmove(own, src, bpr);
            src = own;
        } else if (src != own) {
            /* from the piece just published (cache-hot), not from send
             * again (maybe memory) */
            OUT(&o, own + off, DATA(mb), len);
        }
        for (int q = 0; q < n; q++)
            if (q != me)
                OUT(&o, rb + (size_t)q * bpr + off, DATA(shm_buf(s, q, p)), len);
        off += len;
        step++;
    } while (off < bpr);
    return op_end(&o, COHORT_OK);
}

cohort_status coh_shm_gather(coh_shm *s, const coh_call *c, const void *send, void *recv,
                             size_t bpr, int root)
{
    shm_op o;
    int ring = gather_ring(s, c, bpr);
    cohort_status st = op_begin_x(&o, s, c, 0, ring);
    if (st != COHORT_OK)
        return st;
    if (root < 0 || root >= s->n)
        return bad_arg(&o, "root is not a local rank index");
    int n = s->n, me = s->me, am_root = me == root;
    size_t total;
    if (!mul_ok(bpr, (size_t)n, &total))
        return bad_arg(&o, "bytes per rank * ranks overflows");
    if (bpr && (!send || (am_root && !recv)))
        return bad_arg(&o, "NULL buffer");
    unsigned char *rb = recv;
    /* The root's own part moves after the first contract check and before
     * any peer data lands (its send may overlap recv). */
    int own_move = am_root && bpr && send != rb + (size_t)me * bpr;
    o.nt = am_root && total >= s->nt_bytes;
    if (n == 1) {
        if (own_move)
            memmove(rb, send, bpr);
        return COHORT_OK;
    }
    if (ring) { /* the leaves return once their block is published (ring_in) */
        int r = ring_in(&o, send, bpr, root, &st);
        if (r <= 0)
            return st;
        if (own_move)
            memmove(rb + (size_t)me * bpr, send, bpr);
        for (int q = 0; q < n; q++)
            if (q != me)
                ring_copy(rb + (size_t)q * bpr, s->srcs[q], bpr);
        ring_in_end(s, bpr);
        return COHORT_OK;
    }
    if (shm_cma_call(s, c, COH_COLL_GATHER, bpr))
        return ga_single(&o, send, rb, bpr, root,
                         own_move && overlap(send, bpr, rb, total));
    size_t S = pipe_piece(s->S, bpr), off = 0;
    uint32_t step = 0;
    do {
        size_t len = COH_MIN(S, bpr - off);
        uint32_t p = s->phase + 1;
        if (step == 0 || !am_root) {
            if ((st = cs_claim(&o)) != COHORT_OK)
                return st;
            unsigned char *mb = shm_buf(s, me, p);
            put_hdr(&o, mb, step, am_root ? 0 : len);
            if (!am_root)
                CPY(DATA(mb), (const unsigned char *)send + off, len);
        }
        shm_publish(s);
        if (step == 0 || am_root) {
            if ((st = cs_wait_all(&o, p)) != COHORT_OK)
                return st;
            if (step == 0)
                st = check_all(&o, p, 0, len, root, 0);
            else
                st = check_all(&o, p, step, len, -1, 0);
            if (st != COHORT_OK)
                return st;
        }
        if (step == 0 && own_move)
            memmove(rb + (size_t)me * bpr, send, bpr);
        if (am_root)
            for (int q = 0; q < n; q++)
                if (q != me)
                    OUT(&o, rb + (size_t)q * bpr + off, DATA(shm_buf(s, q, p)), len);
        off += len;
        step++;
    } while (off < bpr);
    return op_end(&o, COHORT_OK);
}

/* ---- scatter ---- */

/* A small scatter (n * bpr <= ring_bytes) is one ring phase, as a
 * broadcast of the root's whole send buffer: the root publishes it and
 * returns; a reader checks the root's record against its own scatter call
 * and copies its block out (shm_seg.h "The ring"). Every rank decides
 * from the call's own fields (bpr, the agreed geometry), so ranks that
 * agree on the call agree on the path; ranks that do not are told apart
 * by the records (ring_mismatch, ring_vs_call). */
static int scatter_ring(coh_shm *s, const coh_call *c, size_t bpr)
{
    size_t total;
    return s && c && s->ring_k && s->n > 1 && mul_ok(bpr, (size_t)s->n, &total) &&
           total <= s->ring_bytes && !shm_cma_call(s, c, COH_COLL_SCATTER, bpr);
}

cohort_status coh_shm_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv,
                              size_t bpr, int root)
{
    shm_op o;
    int ring = scatter_ring(s, c, bpr);
    cohort_status st = op_begin_x(&o, s, c, 0, ring);
    if (st != COHORT_OK)
        return st;
    if (root < 0 || root >= s->n)
        return bad_arg(&o, "root is not a local rank index");
    int n = s->n, me = s->me, am_root = me == root;
    size_t total;
    if (!mul_ok(bpr, (size_t)n, &total))
        return bad_arg(&o, "bytes per rank * ranks overflows");
    if (bpr && (!recv || (am_root && !send)))
        return bad_arg(&o, "NULL buffer");
    const unsigned char *sb = send;
    unsigned char *rb = recv;
    if (ring) {
        /* the root publishes before its own block moves (recv may lie in
         * send: in place). With 2 ranks and blocks of <= 32 B it publishes
         * only the reader's block, as a broadcast of it: in the record's
         * polled line (<= 16 B: the compact record) instead of a slot -
         * one line moves (64 B: x0.46-0.53 back to back, x0.82-0.86 OSU
         * style). Both ranks decide from bpr, so calls that agree meet
         * in the same form. A call of its own, not a branch in ring_one:
         * that changed how the broadcast compiled (1-2 KiB x1.07-1.08). */
        if (n == 2 && bpr <= SHM_RING_INLINE)
            st = ring_one(&o, am_root ? sb + (size_t)(1 - root) * bpr : NULL, rb, bpr, 0, bpr,
                          root);
        else
            st = ring_one(&o, sb, rb, total, (size_t)me * bpr, bpr, root);
        if (st == COHORT_OK && am_root && bpr && rb != sb + (size_t)me * bpr)
            memmove(rb, sb + (size_t)me * bpr, bpr);
        if (st == COHORT_OK && s->bar_scatter) {
            /* the root publishes and returns as a broadcast's does: it
             * leads an oversubscribed barrier right after (below) */
            s->bar_lead = root;
            s->bar_ph = s->phase + 1;
        }
        return st;
    }
    o.nt = !am_root && bpr >= s->nt_bytes;
    if (n > 1 && shm_cma_call(s, c, COH_COLL_SCATTER, bpr))
        return sc_single(&o, sb, rb, bpr, root);
    if (n > 1) {
        size_t Pb = block_piece(s, 1), off = 0;
        Pb = COH_MIN(Pb, pipe_piece(Pb, bpr));
        uint32_t step = 0;
        do {
            size_t len = COH_MIN(Pb, bpr - off);
            uint32_t p = s->phase + 1;
            if (step == 0 || am_root) {
                if ((st = cs_claim(&o)) != COHORT_OK)
                    return st;
                unsigned char *mb = shm_buf(s, me, p);
                put_hdr(&o, mb, step, am_root ? len : 0);
                if (am_root)
                    for (int q = 0; q < n; q++)
                        if (q != me)
                            CPY(DATA(mb) + bidx(me, q) * Pb, sb + (size_t)q * bpr + off, len);
            }
            shm_publish(s);
            if (step == 0) {
                if ((st = cs_wait_all(&o, p)) != COHORT_OK ||
                    (st = check_all(&o, p, 0, 0, root, len)) != COHORT_OK)
                    return st;
            } else if (!am_root) {
                if ((st = cs_wait_rank(&o, root, p)) != COHORT_OK ||
                    (st = check_hdr(&o, root, p, step, len)) != COHORT_OK)
                    return st;
            }
            if (!am_root)
                OUT(&o, rb + off, DATA(shm_buf(s, root, p)) + bidx(root, me) * Pb, len);
            off += len;
            step++;
        } while (off < bpr);
    }
    /* The root's own block last: recv may overlap send (in place). */
    if (am_root && bpr && rb != sb + (size_t)me * bpr)
        memmove(rb, sb + (size_t)me * bpr, bpr);
    return op_end(&o, COHORT_OK);
}

/* ---- reduce_scatter ---- */

/* Each rank publishes the n-1 blocks the others reduce (a piece of each)
 * and reduces its own block from its private input plus the peers'
 * copies, straight into recv: one copy in, one reduction. */
cohort_status coh_shm_reduce_scatter(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                     size_t cpr)
{
    shm_op o;
    cohort_status st = op_begin(&o, s, c, 1);
    if (st != COHORT_OK)
        return st;
    int n = s->n, me = s->me;
    size_t es = dt_size[c->dtype], blk, total;
    if (!mul_ok(cpr, es, &blk) || !mul_ok(blk, (size_t)n, &total))
        return bad_arg(&o, "count * dtype size * ranks overflows");
    if (blk && (!send || !recv))
        return bad_arg(&o, "NULL buffer");
    const unsigned char *sb = send;
    unsigned char *rb = recv;
    /* In place is recv == send or recv == my block of send; both only
     * overwrite input the current piece has already consumed. */
    if (rb != sb && rb != sb + (size_t)me * blk && overlap(send, total, recv, blk))
        return bad_arg(&o, "send and recv overlap without being in place");
    if (n == 1) {
        if (rb != sb && blk)
            memmove(rb, sb, blk);
        return COHORT_OK;
    }
    if (shm_cma_use(s, COH_COLL_REDUCE_SCATTER, total)) {
        int fallback = 0;
        st = rs_single(&o, sb, rb, cpr, &fallback);
        if (st != COHORT_OK || !fallback)
            return st;
    }
    size_t Pe = block_piece(s, es) / es, off = 0;
    uint32_t step = 0;
    do {
        size_t len = COH_MIN(Pe, cpr - off);
        if ((st = cs_claim(&o)) != COHORT_OK)
            return st;
        uint32_t p = s->phase + 1;
        unsigned char *mb = shm_buf(s, me, p);
        put_hdr(&o, mb, step, len * es);
        for (int j = 0; j < n; j++)
            if (j != me)
                CPY(DATA(mb) + bidx(me, j) * Pe * es, sb + ((size_t)j * cpr + off) * es,
                       len * es);
        shm_publish(s);
        if ((st = cs_wait_all(&o, p)) != COHORT_OK ||
            (st = check_all(&o, p, step, len * es, -1, 0)) != COHORT_OK)
            return st;
        if (len) {
            for (int q = 0; q < n; q++)
                s->srcs[q] = q == me ? sb + ((size_t)me * cpr + off) * es
                                     : DATA(shm_buf(s, q, p)) + bidx(q, me) * Pe * es;
            coh_reduce_multi_div(rb + off * es, s->srcs, n, len, (cohort_dtype)c->dtype,
                                 (cohort_op)c->redop, avg_div(s, c));
        }
        off += len;
        step++;
    } while (off < cpr);
    return COHORT_OK;
}

/* ---- all_to_all ---- */

/* Each rank publishes its n-1 outgoing blocks (a piece of each) and copies
 * its incoming ones; in place works because piece k of every block is
 * published before piece k of any block is overwritten. */
static cohort_status a2a_call(coh_shm *s, const coh_call *c, const void *send, void *recv,
                              size_t bpp)
{
    shm_op o;
    cohort_status st = op_begin(&o, s, c, 0);
    if (st != COHORT_OK)
        return st;
    int n = s->n, me = s->me;
    size_t total;
    if (!mul_ok(bpp, (size_t)n, &total))
        return bad_arg(&o, "bytes per peer * ranks overflows");
    if (bpp && (!send || !recv))
        return bad_arg(&o, "NULL buffer");
    if (send != recv && overlap(send, total, recv, total))
        return bad_arg(&o, "send and recv overlap without being the same buffer");
    const unsigned char *sb = send;
    unsigned char *rb = recv;
    if (n == 1) {
        if (rb != sb && bpp)
            copy_fast(rb, sb, bpp);
        return COHORT_OK;
    }
    o.nt = total >= s->nt_bytes;
    if (cma_at(s, c, COH_COLL_ALL_TO_ALL, bpp)) {
        int fallback = 0;
        st = a2a_single(&o, sb, rb, bpp, &fallback);
        if (st != COHORT_OK || !fallback)
            return st;
    }
    size_t Pb = block_piece(s, 1), off = 0;
    uint32_t step = 0;
    do {
        size_t len = COH_MIN(Pb, bpp - off);
        if ((st = cs_claim(&o)) != COHORT_OK)
            return st;
        uint32_t p = s->phase + 1;
        unsigned char *mb = shm_buf(s, me, p);
        put_hdr(&o, mb, step, len);
        for (int j = 0; j < n; j++)
            if (j != me)
                CPY(DATA(mb) + bidx(me, j) * Pb, sb + (size_t)j * bpp + off, len);
        shm_publish(s);
        if ((st = cs_wait_all(&o, p)) != COHORT_OK ||
            (st = check_all(&o, p, step, len, -1, 0)) != COHORT_OK)
            return st;
        if (rb != sb)
            CPY(rb + (size_t)me * bpp + off, sb + (size_t)me * bpp + off, len);
        for (int q = 0; q < n; q++)
            if (q != me)
                OUT(&o, rb + (size_t)q * bpp + off, DATA(shm_buf(s, q, p)) + bidx(q, me) * Pb,
                    len);
        off += len;
        step++;
    } while (off < bpp);
    return op_end(&o, COHORT_OK);
}

cohort_status coh_shm_all_to_all(coh_shm *s, const coh_call *c, const void *send, void *recv,
                                 size_t bpp)
{
    if (!ov_in(s, c, COH_COLL_ALL_TO_ALL, bpp, 1))
        return a2a_call(s, c, send, recv, bpp); /* a tail call: ov_in's first test is !s->ov */
    cohort_status st = a2a_call(s, c, send, recv, bpp);
    shm_ov_done(s, st);
    return st;
}

cohort_status coh_shm_broadcast_plain(coh_shm *s, const coh_call *c, void *buf, size_t bytes,
                                      int root)
{
    cohort_status st = bcast_any(s, c, buf, bytes, root);
    if (st == COHORT_OK && s) {
        /* every local rank: the contract agreed on root, and the phases
         * advance alike (the barrier's leader, below) */
        s->bar_lead = root;
        s->bar_ph = s->phase + 1;
    }
    return st;
}

/* ---- barrier ---- */

/* 2 ranks apart under auto (xc_adapt): every BAR_VERDICT_EVERY-th barrier
 * (by the barriers' count, the same on both ranks) the lead's message
 * carries its cross-core verdict flags (shm_xc_flags): both ranks keep it
 * as bar_near, which decides the path of each call right after a barrier
 * until the next such barrier (shm_cma_call), and run the probe it asks
 * for - both are awake there, and a program of small calls between
 * barriers (the ring, near) opens no single copy that would probe. Not
 * every barrier: the word is a line the other rank reads only for it, a
 * crossing (~0.25-0.5 us far) that delays its next call; 1 in 16 of it. */
#define BAR_VERDICT_EVERY 16u
static int bar_verdict_due(coh_shm *s)
{
    return s->xc_adapt && s->bar_count++ % BAR_VERDICT_EVERY == 0;
}

/* After barrier phase p: every rank's header checked (the lead's message
 * is its verdict flags, 8 bytes, in a verdict barrier), then that verdict
 * for the calls after barriers and its probe (coh_shm_barrier). */
static cohort_status bar_verdict(shm_op *o, uint32_t p, int vb)
{
    coh_shm *s = o->s;
    uint64_t f = 0;
    if (vb)
        memcpy(&f, DATA(shm_buf(s, 0, p)), sizeof f);
    cohort_status st = check_all(o, p, 0, 0, vb ? 0 : -1, sizeof f);
    if (st != COHORT_OK || !vb)
        return st;
    s->bar_near = s->xc_dear && (f & SHM_XC_NEAR); /* measured where the copy is dear */
    if (f & SHM_XC_PROBE)
        shm_xc_probe(s);
    return COHORT_OK;
}

cohort_status coh_shm_barrier(coh_shm *s, const coh_call *c)
{
    shm_op o;
    cohort_status st = op_begin(&o, s, c, 0);
    if (st != COHORT_OK || s->n == 1)
        return st;
    if ((st = cs_claim(&o)) != COHORT_OK)
        return st;
    uint32_t p = s->phase + 1;
    int vb = bar_verdict_due(s), lead_word = vb && s->me == 0;
    uint64_t xcf = lead_word ? shm_xc_flags(s) : 0;
    unsigned char *mb = shm_buf(s, s->me, p);
    put_hdr(&o, mb, 0, lead_word ? sizeof xcf : 0);
    if (lead_word)
        memcpy(DATA(mb), &xcf, sizeof xcf);
    s->bar_seq = c->seq + 1; /* the next call follows a barrier (shm_cma_call) */
    if (s->oversub && s->bar_ph == p) {
        /* Ranks outnumber the cpus and the barrier follows a broadcast
         * or a ring scatter (the OSU loop: broadcast, barrier, broadcast
         * ...): the leader, that call's root, publishes only once every other rank
         * arrived, and the others wait for the leader alone, so the leader
         * leaves first and its next broadcast is written before its
         * readers look for it. With the flat barrier below the last rank
         * to arrive leaves first; when that is a reader on the root's cpu,
         * its next broadcast waits a scheduler round for the root to leave
         * the barrier and publish (docs/performance.md, "Ranks
         * outnumbering cores: small broadcasts OSU style (session 10)").
         * Any other barrier stays flat: on its own the leader's costs one
         * more hand-off. One phase as before: the leader's publish implies
         * every arrival, and every rank checks every fingerprint of p
         * (none is rewritten before p + 2). */
        int lead = s->bar_lead;
        if (s->me == lead) {
            if ((st = cs_wait_all(&o, p)) != COHORT_OK)
                return st;
            shm_publish(s);
        } else {
            shm_publish(s);
            if ((st = cs_wait_rank(&o, lead, p)) != COHORT_OK)
                return st;
        }
        return bar_verdict(&o, p, vb);
    }
    shm_publish(s);
    if ((st = cs_wait_all(&o, p)) != COHORT_OK)
        return st;
    return bar_verdict(&o, p, vb);
}

/* For the send/recv channels (shm_p2p.c): the same copies as above. */
void coh_shm_copy(void *dst, const void *src, size_t n, int nt)
{
    if (!n)
        return;
    if (nt && n >= COPY_VEC_MIN)
        copy_big(dst, src, n, 1);
    else
        copy_fast(dst, src, n);
}
