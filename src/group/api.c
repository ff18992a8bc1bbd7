/* api.c - the public collective entry points: validate the arguments, build
 * the call's contract (coh_call), assign its sequence number, hand it to the
 * engine. Kept thin: this is the per-call fast path. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "contract/contract.h"
#include "engine/engine.h"
#include "group/group_internal.h"
#include "reduce/reduce.h"
#include "trace/trace.h"

/* The contract report is built by the first caller to hand over the
 * failure (a call here, or cohort_finalize). */
int coh_group_claim_report(cohort_group *g)
{
    if (atomic_exchange(&g->err_reported, 1))
        return 0;
    if (coh_group_poisoned(g) == COHORT_ERR_CONTRACT)
        coh_contract_report(g); /* the same majority report as the ranks that saw it */
    return 1;
}

static cohort_status invalid(cohort_group *g, const coh_call *c, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static cohort_status invalid(cohort_group *g, const coh_call *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Argument errors are local: they do not poison the group (nothing was
     * sent), but they are recorded where the user looks. */
    return coh_err_set(g ? &g->last : NULL, COHORT_ERR_INVALID, "%s (%s:%d): %s",
                       coh_coll_name(c->coll), c->file ? c->file : "?", c->line, msg);
}

/* Bytes of the input buffer the call reads (debug=buffers' checksum). */
static size_t input_bytes(const cohort_group *g, const coh_call *c, size_t esz)
{
    switch (c->coll) {
    case COH_COLL_ALL_REDUCE:
    case COH_COLL_REDUCE:
    case COH_COLL_ALL_GATHER:
    case COH_COLL_GATHER:
    case COH_COLL_BROADCAST:
    case COH_COLL_SEND:
        return c->count * esz;
    case COH_COLL_SCATTER:
        return g->rank == c->root ? c->count * esz * (size_t)g->size : 0;
    case COH_COLL_REDUCE_SCATTER:
    case COH_COLL_ALL_TO_ALL:
        return c->count * esz * (size_t)g->size;
    default:
        return 0;
    }
}

static cohort_status issue_owned(cohort_group *g, coh_call *c, cohort_work **work);

/* A second thread calling while another is inside a call on g (forbidden by
 * cohort.h): the sequence numbers and the transports' per-peer state would
 * interleave into wrong data or a contract error blaming an innocent call.
 * Both calls fail - the group is failed so that no peer waits for calls
 * that cannot be matched - and the message names both call sites. */
static cohort_status concurrent(cohort_group *g, const coh_call *c, const char *other_file)
{
    int site = atomic_load_explicit(&g->busy_site, memory_order_relaxed);
    char msg[COH_ERRLEN];
    snprintf(msg, sizeof msg,
             "%s (%s:%d) was called while another thread was inside %s (%s:%d) on the same group "
             "(rank %d, group %u): a group takes calls from one thread at a time; give each thread "
             "its own group (cohort_split / cohort_new_group)",
             coh_coll_name(c->coll), c->file, c->line, coh_coll_name(site & 0xff),
             other_file ? other_file : "?", (int)((unsigned)site >> 8), g->rank, g->id);
    coh_group_fail(g, COHORT_ERR_INVALID, "%s", msg);
    return coh_err_set(NULL, COHORT_ERR_INVALID, "%s", msg); /* this thread's copy */
}

/* The entry path's rare outcomes are COH_COLD: the common call (a
 * remembered site, a live group, not in place) then runs in a smaller
 * frame (docs/performance.md, "the entry path, session 12"). */

static COH_COLD cohort_status no_group(const coh_call *c)
{
    return coh_err_set(NULL, COHORT_ERR_INVALID, "%s (%s:%d): group is NULL",
                       coh_coll_name(c->coll), c->file, c->line);
}

static cohort_status issue(cohort_group *g, coh_call *c, cohort_work **work)
{
    if (work)
        *work = NULL;
    if (!g)
        return no_group(c);
    if (coh_group_forked(g))
        return invalid(g, c, "group used in a forked child (fork before cohort_init)");
    const char *other = NULL;
    if (!atomic_compare_exchange_strong_explicit(&g->busy_file, &other, c->file,
                                                 memory_order_acquire, memory_order_relaxed)) {
        return concurrent(g, c, other);
    }
    atomic_store_explicit(&g->busy_site, (int)((unsigned)c->line << 8 | c->coll),
                          memory_order_relaxed);
    cohort_status st = issue_owned(g, c, work);
    atomic_store_explicit(&g->busy_file, NULL, memory_order_release);
    return st;
}

/* issue's argument checks: everything that depends only on the call's
 * coll, count, dtype, redop, root, tag and which buffers are NULL (and on
 * the group's fixed size and rank) - the site memo's key in issue_owned. */
static cohort_status check_args(cohort_group *g, const coh_call *c)
{
    size_t esz = 1;
    if (c->coll != COH_COLL_BARRIER) {
        esz = coh_dtype_size(c->dtype);
        if (!esz)
            return invalid(g, c, "invalid dtype %d", c->dtype);
        /* count * esz * size <= SIZE_MAX / 2, the same bound as
         * (SIZE_MAX / 2) / esz / size without two 64-bit divisions per call */
        size_t total;
        if (__builtin_mul_overflow((size_t)c->count, esz, &total) ||
            __builtin_mul_overflow(total, (size_t)g->size, &total) || total > SIZE_MAX / 2)
            return invalid(g, c, "count %llu is too large", (unsigned long long)c->count);
    }
    if (c->redop >= 0 && !coh_op_valid((cohort_dtype)c->dtype, (cohort_op)c->redop))
        return invalid(g, c, "reduce op %s is not defined for %s",
                       cohort_op_name((cohort_op)c->redop) ? cohort_op_name((cohort_op)c->redop)
                                                           : "?",
                       cohort_dtype_name((cohort_dtype)c->dtype)
                           ? cohort_dtype_name((cohort_dtype)c->dtype)
                           : "?");
    int rooted = c->coll == COH_COLL_BROADCAST || c->coll == COH_COLL_REDUCE ||
                 c->coll == COH_COLL_GATHER || c->coll == COH_COLL_SCATTER;
    int p2p = c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV;
    if (rooted && (c->root < 0 || c->root >= g->size))
        return invalid(g, c, "root %d is out of range for group size %d", c->root, g->size);
    if (p2p) {
        if (c->root < 0 || c->root >= g->size)
            return invalid(g, c, "peer %d is out of range for group size %d", c->root, g->size);
        if (c->root == g->rank)
            return invalid(g, c, "peer %d is this rank", c->root);
        if (c->tag < 0)
            return invalid(g, c, "tag %d is negative", c->tag);
    }
    /* Buffers: only the ones this rank uses must be non-NULL. */
    if (c->count && c->coll != COH_COLL_INTERNAL) {
        int needs_send = 1, needs_recv = 1;
        switch (c->coll) {
        case COH_COLL_BROADCAST:
            needs_send = 0;
            break;
        case COH_COLL_REDUCE:
        case COH_COLL_GATHER:
            needs_recv = g->rank == c->root;
            break;
        case COH_COLL_SCATTER:
            needs_send = g->rank == c->root;
            break;
        case COH_COLL_SEND:
            needs_recv = 0;
            break;
        case COH_COLL_RECV:
            needs_send = 0;
            break;
        default:
            break;
        }
        if (needs_send && !c->send)
            return invalid(g, c, "send buffer is NULL with count %llu", (unsigned long long)c->count);
        if (needs_recv && !c->recv)
            return invalid(g, c, "recv buffer is NULL with count %llu", (unsigned long long)c->count);
    }
    return COHORT_OK;
}

/* In-place forms (send == recv) reach the algorithms as they are: every
 * scatter, reduce_scatter and all_to_all path orders its writes behind
 * the reads they overwrite (a root's own scatter block last, a
 * reduce_scatter result behind the piece it consumed, an all_to_all piece
 * published before it is overwritten, the pairwise exchange from a copy
 * of its own). A private copy per call here cost a malloc, a full copy of
 * the input and the direct lane: 1 MiB in-place scatter 50 -> 175 us. */

typedef __typeof__(((cohort_group *)0)->site_memo[0]) site_memo_t;

/* A site's first call, or one whose arguments differ from the site's last
 * checked call: check_args, then remember them. */
static COH_COLD cohort_status memo_miss(cohort_group *g, const coh_call *c, site_memo_t *m,
                                    uint8_t bufs)
{
    cohort_status st = check_args(g, c);
    if (st != COHORT_OK)
        return st;
    if (m->file != c->file || m->line != c->line || !c->file) {
        m->file = c->file;
        m->line = c->line;
        m->site = coh_site_hash(c->file, c->line);
    }
    m->count = c->count;
    m->coll = c->coll;
    m->dtype = c->dtype;
    m->redop = c->redop;
    m->root = c->root;
    m->tag = c->tag;
    m->bufs = bufs;
    m->ok = c->file != NULL;
    return COHORT_OK;
}

/* A call on a failed group: recorded so the history the contract report
 * reads shows where this rank was. The first call to see the failure
 * reports the cause itself (a peer loss that arrived between two calls is
 * still PEER_LOST); every later one gets ABORTED carrying the cause. */
static COH_COLD cohort_status issue_poisoned(cohort_group *g, coh_call *c, int p)
{
    uint64_t t = coh_trace_issue(g->trace, c);
    int first = coh_group_claim_report(g);
    cohort_status ret = first && p != COHORT_ERR_ABORTED ? (cohort_status)p : COHORT_ERR_ABORTED;
    pthread_mutex_lock(&g->err_mu);
    if (ret != COHORT_ERR_ABORTED)
        coh_err_set(&g->last, ret, "%s", g->err.msg);
    else
        coh_err_set(&g->last, COHORT_ERR_ABORTED,
                    "%s #%llu (%s:%d) refused: group %u is aborted by an earlier error (%s): %s",
                    coh_coll_name(c->coll), (unsigned long long)c->seq, c->file, c->line, g->id,
                    cohort_status_name(g->err.status), g->err.msg);
    pthread_mutex_unlock(&g->err_mu);
    coh_trace_end(g->trace, t, ret);
    return ret;
}

static cohort_status issue_owned(cohort_group *g, coh_call *c, cohort_work **work)
{
    /* Call sites repeat: the group's memo (group.h: site_memo), keyed by the
     * __FILE__ pointer and line, saves hashing the name on every call, and
     * check_args when the site's last checked call had the same arguments
     * (a persistent call, as MPI_Bcast_init: the training loop's case).
     * Only the local checks are skipped: the contract below is built from
     * this call's own fields and checked across ranks as on every call.
     * This thread holds busy_file (issue), so it is the memo's only user. */
    __typeof__(g->site_memo[0]) *m =
        &g->site_memo[((unsigned)((uintptr_t)c->file >> 4) ^ (unsigned)c->line * 2654435761u) &
                      15u];
    uint8_t bufs = (uint8_t)((c->send != NULL) | (c->recv != NULL) << 1);
    if (!(m->ok && m->file == c->file && m->line == c->line && m->count == c->count &&
          m->coll == c->coll && m->dtype == c->dtype && m->redop == c->redop &&
          m->root == c->root && m->tag == c->tag && m->bufs == bufs)) {
        cohort_status st = memo_miss(g, c, m, bufs);
        if (st != COHORT_OK)
            return st;
    }
    c->site = m->site;
    c->argok = 1; /* coh_coll_run does not repeat check_args' checks */
    int p2p = c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV;
    if (p2p) {
        uint64_t *s = c->coll == COH_COLL_SEND ? g->p2p_send_seq : g->p2p_recv_seq;
        c->seq = ++s[c->root];
    } else {
        c->seq = ++g->seq;
    }
    int p = coh_group_poisoned(g);
    if (p)
        return issue_poisoned(g, c, p);
    if (g->debug_buffers && c->send)
        c->in_sum = coh_hash64(coh_call_input(g, c, coh_dtype_size(c->dtype)),
                               input_bytes(g, c, coh_dtype_size(c->dtype)), 0);
    return coh_engine_submit(g, c, work);
}

#define NO_OP (-1)

/* Collectives that take a reduce op from the user. */
static inline int coll_has_op(int coll)
{
    return coll == COH_COLL_ALL_REDUCE || coll == COH_COLL_REDUCE || coll == COH_COLL_REDUCE_SCATTER;
}

#define CALL_INIT(coll_, send_, recv_, count_, dt_, op_, root_, tag_)                              \
    coh_call c;                                                                                    \
    memset(&c, 0, sizeof c);                                                                       \
    c.coll = (coll_);                                                                              \
    c.send = (send_);                                                                              \
    c.recv = (recv_);                                                                              \
    c.count = (count_);                                                                            \
    c.dtype = (uint8_t)(dt_);                                                                      \
    c.redop = (int8_t)(op_);                                                                       \
    c.root = (root_);                                                                              \
    c.tag = (tag_);                                                                                \
    c.file = file ? file : "?";                                                                    \
    c.line = line;                                                                                 \
    /* Enums are checked before anything else: an out-of-range value (e.g.                        \
     * (cohort_op)-1, cohort's internal "no op") must not reach the group. */                      \
    if ((unsigned)(dt_) >= COHORT_DTYPE_COUNT) {                                                   \
        c.dtype = 0xff;                                                                            \
        return invalid(g, &c, "invalid dtype %d (valid: 0..%d)", (int)(dt_),                       \
                       COHORT_DTYPE_COUNT - 1);                                                    \
    }                                                                                              \
    if (coll_has_op(coll_) ? (unsigned)(op_) >= COHORT_OP_COUNT : (int)(op_) != NO_OP) {           \
        c.redop = -1;                                                                              \
        return invalid(g, &c, "invalid reduce op %d (valid: 0..%d)", (int)(op_),                   \
                       COHORT_OP_COUNT - 1);                                                       \
    }


cohort_status cohort_all_reduce_async_at(const char *file, int line, cohort_group *g,
                                         const void *send, void *recv, size_t count,
                                         cohort_dtype dt, cohort_op op, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_ALL_REDUCE, send, recv, count, dt, op, -1, 0);
    return issue(g, &c, work);
}

cohort_status cohort_all_reduce_at(const char *file, int line, cohort_group *g, const void *send,
                                   void *recv, size_t count, cohort_dtype dt, cohort_op op)
{
    CALL_INIT(COH_COLL_ALL_REDUCE, send, recv, count, dt, op, -1, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_broadcast_async_at(const char *file, int line, cohort_group *g, void *buf,
                                        size_t count, cohort_dtype dt, int root,
                                        cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_BROADCAST, buf, buf, count, dt, NO_OP, root, 0);
    return issue(g, &c, work);
}

cohort_status cohort_broadcast_at(const char *file, int line, cohort_group *g, void *buf,
                                  size_t count, cohort_dtype dt, int root)
{
    CALL_INIT(COH_COLL_BROADCAST, buf, buf, count, dt, NO_OP, root, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_reduce_async_at(const char *file, int line, cohort_group *g,
                                     const void *send, void *recv, size_t count, cohort_dtype dt,
                                     cohort_op op, int root, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_REDUCE, send, recv, count, dt, op, root, 0);
    return issue(g, &c, work);
}

cohort_status cohort_reduce_at(const char *file, int line, cohort_group *g, const void *send,
                               void *recv, size_t count, cohort_dtype dt, cohort_op op, int root)
{
    CALL_INIT(COH_COLL_REDUCE, send, recv, count, dt, op, root, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_all_gather_async_at(const char *file, int line, cohort_group *g,
                                         const void *send, void *recv, size_t count,
                                         cohort_dtype dt, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_ALL_GATHER, send, recv, count, dt, NO_OP, -1, 0);
    return issue(g, &c, work);
}

cohort_status cohort_all_gather_at(const char *file, int line, cohort_group *g, const void *send,
                                   void *recv, size_t count, cohort_dtype dt)
{
    CALL_INIT(COH_COLL_ALL_GATHER, send, recv, count, dt, NO_OP, -1, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_gather_async_at(const char *file, int line, cohort_group *g,
                                     const void *send, void *recv, size_t count, cohort_dtype dt,
                                     int root, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_GATHER, send, recv, count, dt, NO_OP, root, 0);
    return issue(g, &c, work);
}

cohort_status cohort_gather_at(const char *file, int line, cohort_group *g, const void *send,
                               void *recv, size_t count, cohort_dtype dt, int root)
{
    CALL_INIT(COH_COLL_GATHER, send, recv, count, dt, NO_OP, root, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_scatter_async_at(const char *file, int line, cohort_group *g,
                                      const void *send, void *recv, size_t count, cohort_dtype dt,
                                      int root, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_SCATTER, send, recv, count, dt, NO_OP, root, 0);
    return issue(g, &c, work);
}

cohort_status cohort_scatter_at(const char *file, int line, cohort_group *g, const void *send,
                                void *recv, size_t count, cohort_dtype dt, int root)
{
    CALL_INIT(COH_COLL_SCATTER, send, recv, count, dt, NO_OP, root, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_reduce_scatter_async_at(const char *file, int line, cohort_group *g,
                                             const void *send, void *recv, size_t count,
                                             cohort_dtype dt, cohort_op op, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_REDUCE_SCATTER, send, recv, count, dt, op, -1, 0);
    return issue(g, &c, work);
}

cohort_status cohort_reduce_scatter_at(const char *file, int line, cohort_group *g,
                                       const void *send, void *recv, size_t count,
                                       cohort_dtype dt, cohort_op op)
{
    CALL_INIT(COH_COLL_REDUCE_SCATTER, send, recv, count, dt, op, -1, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_all_to_all_async_at(const char *file, int line, cohort_group *g,
                                         const void *send, void *recv, size_t count,
                                         cohort_dtype dt, cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_ALL_TO_ALL, send, recv, count, dt, NO_OP, -1, 0);
    return issue(g, &c, work);
}

cohort_status cohort_all_to_all_at(const char *file, int line, cohort_group *g, const void *send,
                                   void *recv, size_t count, cohort_dtype dt)
{
    CALL_INIT(COH_COLL_ALL_TO_ALL, send, recv, count, dt, NO_OP, -1, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_barrier_async_at(const char *file, int line, cohort_group *g,
                                      cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_BARRIER, NULL, NULL, 0, COHORT_UINT8, NO_OP, -1, 0);
    return issue(g, &c, work);
}

cohort_status cohort_barrier_at(const char *file, int line, cohort_group *g)
{
    CALL_INIT(COH_COLL_BARRIER, NULL, NULL, 0, COHORT_UINT8, NO_OP, -1, 0);
    return issue(g, &c, NULL);
}

cohort_status cohort_send_async_at(const char *file, int line, cohort_group *g, const void *buf,
                                   size_t count, cohort_dtype dt, int peer, int tag,
                                   cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_SEND, buf, NULL, count, dt, NO_OP, peer, tag);
    return issue(g, &c, work);
}

cohort_status cohort_send_at(const char *file, int line, cohort_group *g, const void *buf,
                             size_t count, cohort_dtype dt, int peer, int tag)
{
    CALL_INIT(COH_COLL_SEND, buf, NULL, count, dt, NO_OP, peer, tag);
    return issue(g, &c, NULL);
}

cohort_status cohort_recv_async_at(const char *file, int line, cohort_group *g, void *buf,
                                   size_t count, cohort_dtype dt, int peer, int tag,
                                   cohort_work **work)
{
    if (work)
        *work = NULL; /* also on invalid arguments */
    CALL_INIT(COH_COLL_RECV, NULL, buf, count, dt, NO_OP, peer, tag);
    return issue(g, &c, work);
}

cohort_status cohort_recv_at(const char *file, int line, cohort_group *g, void *buf, size_t count,
                             cohort_dtype dt, int peer, int tag)
{
    CALL_INIT(COH_COLL_RECV, NULL, buf, count, dt, NO_OP, peer, tag);
    return issue(g, &c, NULL);
}

/* ---- sub-groups: collective over g, recorded as internal calls so that a
 * rank that skips a split is caught by the contract like any other call. */

cohort_status coh_group_split_members(cohort_group *g, int color, int key, uint64_t seq,
                                      cohort_group **out);

cohort_status cohort_split(cohort_group *g, int color, int key, cohort_group **out)
{
    if (!out)
        return coh_err_set(g ? &g->last : NULL, COHORT_ERR_INVALID, "cohort_split: out is NULL");
    *out = NULL;
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_split: group is NULL");
    /* A barrier-shaped internal call keeps the seq and contract in step on
     * every rank before the store exchange. */
    const char *file = "cohort_split";
    int line = 0;
    CALL_INIT(COH_COLL_INTERNAL, NULL, NULL, 0, COHORT_UINT8, NO_OP, -1, 1);
    cohort_status st = issue(g, &c, NULL);
    if (st != COHORT_OK)
        return st;
    return coh_group_split_members(g, color < 0 ? -1 : color, key, c.seq, out);
}

cohort_status cohort_new_group(cohort_group *g, const int *ranks, int n, cohort_group **out)
{
    if (!out)
        return coh_err_set(g ? &g->last : NULL, COHORT_ERR_INVALID, "cohort_new_group: out is NULL");
    *out = NULL;
    if (!g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_new_group: group is NULL");
    if (!ranks || n < 1 || n > g->size)
        return coh_err_set(&g->last, COHORT_ERR_INVALID,
                           "cohort_new_group: need 1..%d ranks, got %d", g->size, n);
    int pos = -1;
    for (int i = 0; i < n; i++) {
        if (ranks[i] < 0 || ranks[i] >= g->size)
            return coh_err_set(&g->last, COHORT_ERR_INVALID,
                               "cohort_new_group: rank %d out of range", ranks[i]);
        for (int j = 0; j < i; j++)
            if (ranks[j] == ranks[i])
                return coh_err_set(&g->last, COHORT_ERR_INVALID,
                                   "cohort_new_group: rank %d listed twice", ranks[i]);
        if (ranks[i] == g->rank)
            pos = i;
    }
    /* The member list is part of the contract: its hash rides in `root`, so
     * ranks passing different lists get a contract error, not two groups. */
    const char *file = "cohort_new_group";
    int line = 0;
    CALL_INIT(COH_COLL_INTERNAL, NULL, NULL, (size_t)n, COHORT_UINT8, NO_OP,
              (int32_t)(coh_hash64(ranks, sizeof(int) * (size_t)n, 7) & 0x7fffffff), 2);
    cohort_status st = issue(g, &c, NULL);
    if (st != COHORT_OK)
        return st;
    /* color 0 for members, ordered by their position in the list. */
    return coh_group_split_members(g, pos >= 0 ? 0 : -1, pos, c.seq, out);
}
