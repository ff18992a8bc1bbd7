/*
 * check.c - the external-collective checker: groups, the per-call fast path
 * (publish to the successor, compare with the predecessor), the ring, and
 * the hand-off of a failure to the monitor thread (check_mon.c).
 *
 * Fast path of one call on one host: begin = hash the names (pointer-keyed
 * for op/redop), write one 128-byte record into this rank's ring, update the
 * private and shared position; end = read the predecessor's ring from the
 * cursor (normally the record is there: the backend synchronised) and
 * compare 7 words. No system call, no store round trip.
 */
#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check/check_int.h"
#include "contract/contract.h"
#include "store/backend.h"
#include "transport/shm/shm.h"
#include "util/futex.h"

_Static_assert(CHK_AUX_BYTES <= COH_SHM_AUX_BYTES, "the checker's ring fits the aux region");

#define FAIL_SEEN_MS 5000 /* a posted failure reaches this rank's monitor */

/* ---- interned strings: (kind, hash) -> owned copy ---- */

const char *coh_chk_intern(cohort_check *c, int kind, uint64_t h, const char *s)
{
    if (!s)
        return NULL;
    uint64_t key = (h ^ ((uint64_t)kind * 0x9e3779b97f4a7c15ull)) | 1;
    chk_intern *t = &c->names;
    if ((t->n + 1) * 2 > t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 256;
        uint64_t *nk = coh_calloc(nc, sizeof *nk);
        char **nv = coh_calloc(nc, sizeof *nv);
        if (!nk || !nv) {
            coh_free(nk), coh_free(nv);
            return NULL;
        }
        for (size_t i = 0; i < t->cap; i++)
            if (t->key[i]) {
                size_t j = t->key[i] & (nc - 1);
                while (nk[j])
                    j = (j + 1) & (nc - 1);
                nk[j] = t->key[i];
                nv[j] = t->val[i];
            }
        coh_free(t->key), coh_free(t->val);
        t->key = nk, t->val = nv, t->cap = nc;
    }
    size_t j = key & (t->cap - 1);
    while (t->key[j]) {
        if (t->key[j] == key)
            return t->val[j];
        j = (j + 1) & (t->cap - 1);
    }
    char *copy = coh_malloc(strnlen(s, CHK_TEXT_MAX - 1) + 1);
    if (!copy)
        return NULL;
    size_t l = strnlen(s, CHK_TEXT_MAX - 1);
    memcpy(copy, s, l);
    copy[l] = 0;
    t->key[j] = key;
    t->val[j] = copy;
    t->n++;
    return copy;
}

static uint64_t str_hash(const char *s)
{
    return s ? coh_hash64(s, strlen(s), 0x636b) | 1 : 0;
}

/* Pointer-keyed cache of str_hash for op and redop names (string literals
 * per the header's ownership rule): a call hashes nothing on the fast path.
 * In the checker, under its lock (it was thread-local until 2026-12-02: a
 * __tls_get_addr call per lookup in position-independent code). */
static uint64_t lit_hash(cohort_check *c, const char *s)
{
    if (!s)
        return 0;
    size_t i = ((uintptr_t)s >> 3) & (CHK_PCACHE - 1);
    if (c->pcache[i].p != s) {
        c->pcache[i].p = s;
        c->pcache[i].h = str_hash(s);
    }
    return c->pcache[i].h;
}

/* ---- queues ---- */

static int q_push(chk_q *q, const chk_cfp *f)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 16;
        chk_cfp *nv = coh_malloc(nc * sizeof *nv);
        if (!nv)
            return -1;
        for (size_t i = 0; i < q->n; i++)
            nv[i] = q->v[(q->head + i) % q->cap];
        coh_free(q->v);
        q->v = nv, q->cap = nc, q->head = 0;
    }
    q->v[(q->head + q->n) % q->cap] = *f;
    q->n++;
    return 0;
}

static chk_cfp *q_front(chk_q *q) { return q->n ? &q->v[q->head] : NULL; }

static void q_pop(chk_q *q)
{
    q->head = (q->head + 1) % q->cap;
    q->n--;
}

/* ---- the biased lock (check_int.h; docs/check.md, "Locking") ---- */

/* A thread's token: its thread pointer (the TCB's address, one register
 * read) where the compiler exposes it, else the address of a thread-local
 * byte. Unique among live threads; a new thread may reuse a dead one's,
 * and then inherits its bias, which is harmless: one live thread holds it.
 * Not a thread-local variable where avoidable: libcohort is built as
 * position-independent code, where each such access is a __tls_get_addr
 * call (callgrind, 2026-12-02: four per MPI call through libcohort-mpi). */
#if defined(__has_builtin) && (defined(__x86_64__) || defined(__aarch64__))
#if __has_builtin(__builtin_thread_pointer)
#define CHK_TP_TOKEN 1
#endif
#endif
#ifdef CHK_TP_TOKEN
#define ME ((uintptr_t)__builtin_thread_pointer())
#else
static _Thread_local char tl_me;
#define ME ((uintptr_t)&tl_me)
#endif

/* Whether this thread holds c without the mutex (begin/end's fast path):
 * it is the bias thread and has c marked busy. The bias thread's mark is
 * 1 only while it holds the lock fast (call_lock clears it before taking
 * the mutex instead), and no other thread passes the first test. Reads
 * of the thread's own stores, or of a bias another thread set (relaxed:
 * only equality with this thread's token matters). (Until 2026-12-02 a
 * thread-local pointer said it.) */
static inline int held_fast(const cohort_check *c)
{
    return atomic_load_explicit(&c->bias, memory_order_relaxed) == ME &&
           atomic_load_explicit(&c->fast_busy, memory_order_relaxed);
}

static void membar(void)
{
    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
}

static void wait_fast_idle(cohort_check *c)
{
    for (unsigned i = 0; atomic_load_explicit(&c->fast_busy, memory_order_acquire); i++) {
        if (i < 100)
            coh_cpu_relax();
        else
            sched_yield(); /* the bias thread was preempted inside a call */
    }
}

void coh_chk_revoke(cohort_check *c)
{
    atomic_fetch_add_explicit(&c->slow_req, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&c->bias, memory_order_acquire) == CHK_BIAS_OFF)
        return; /* off for good, and its revoke completed before */
    /* Every thread of the process passes a full barrier: the bias thread
     * either sees slow_req > 0 at its next check, or marked fast_busy
     * before, and then we see the mark. */
    membar();
    wait_fast_idle(c);
}

void coh_chk_unrevoke(cohort_check *c)
{
    atomic_fetch_sub_explicit(&c->slow_req, 1, memory_order_release);
}

int coh_chk_lock(cohort_check *c)
{
    /* The bias thread never competes with itself: the mutex suffices. */
    int revoke = atomic_load_explicit(&c->bias, memory_order_relaxed) != ME;
    if (revoke)
        coh_chk_revoke(c);
    pthread_mutex_lock(&c->mu);
    return revoke;
}

void coh_chk_unlock(cohort_check *c, int revoked)
{
    pthread_mutex_unlock(&c->mu);
    if (revoked)
        coh_chk_unrevoke(c);
}

/* begin/end's lock. The bias thread: mark, then check for revokers - no
 * read-modify-write, no fence; the revoker's membarrier orders the two. */
static void call_lock(cohort_check *c)
{
    uintptr_t b = atomic_load_explicit(&c->bias, memory_order_acquire);
    if (b == ME) {
        atomic_store_explicit(&c->fast_busy, 1, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
        if (!atomic_load_explicit(&c->slow_req, memory_order_acquire)) {
            c->stats.unlocked++;
            return;
        }
        atomic_store_explicit(&c->fast_busy, 0, memory_order_release);
    } else if (b == 0 &&
               atomic_compare_exchange_strong_explicit(&c->bias, &b, ME, memory_order_acq_rel,
                                                       memory_order_acquire)) {
        /* Claimed: the fast path from the next call (this one races with
         * the monitor's revokes of an unclaimed lock, so takes the mutex). */
    } else if (b != CHK_BIAS_OFF) {
        /* Another thread makes calls too: off for good (slow_req never
         * returns to 0), after the bias thread has left its call. */
        atomic_fetch_add_explicit(&c->slow_req, 1, memory_order_seq_cst);
        membar();
        wait_fast_idle(c);
        atomic_store_explicit(&c->bias, CHK_BIAS_OFF, memory_order_release);
    }
    pthread_mutex_lock(&c->mu);
}

static void call_unlock(cohort_check *c)
{
    if (held_fast(c)) {
        atomic_store_explicit(&c->fast_busy, 0, memory_order_release);
    } else {
        pthread_mutex_unlock(&c->mu);
    }
}

/* Released around a wait inside a call (ring full, a neighbour's record):
 * returns how it was held, for lock_reacquire. */
static int lock_release(cohort_check *c)
{
    if (held_fast(c)) {
        call_unlock(c);
        return 1;
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static void lock_reacquire(cohort_check *c, int fast)
{
    if (fast)
        call_lock(c);
    else
        pthread_mutex_lock(&c->mu);
}

/* A condition wait needs the mutex: the bias thread leaves the fast path
 * (the state is consistent here, as at any unlock). */
static void lock_to_mutex(cohort_check *c)
{
    if (held_fast(c)) {
        call_unlock(c);
        pthread_mutex_lock(&c->mu);
    }
}

/* ---- groups ---- */

uint64_t cohort_check_group_id(uint64_t parent_id, uint64_t creation_seq, const int *world_ranks,
                               int n)
{
    uint64_t h = coh_hash64(&parent_id, sizeof parent_id, 0x67726f7570ull);
    h = coh_hash64(&creation_seq, sizeof creation_seq, h);
    for (int i = 0; i < n && world_ranks; i++) {
        int32_t r = world_ranks[i];
        h = coh_hash64(&r, sizeof r, h);
    }
    return h ? h : 1;
}

cohort_check_group *coh_chk_find(cohort_check *c, uint64_t gid)
{
    for (cohort_check_group *g = c->groups; g; g = g->next)
        if (g->id == gid)
            return g;
    return NULL;
}

static int via_ring(const cohort_check *c, int w)
{
    const cohort_group *g = c->world;
    return c->shm && g->peers[w].host == g->my_host;
}

static void group_free(cohort_check_group *g)
{
    coh_free(g->world);
    coh_free(g->mine.v);
    coh_free(g->theirs.v);
    coh_free(g);
}

static void unlink_group(cohort_check *c, cohort_check_group *grp)
{
    for (cohort_check_group **pp = &c->groups; *pp; pp = &(*pp)->next)
        if (*pp == grp) {
            *pp = grp->next;
            group_free(grp);
            return;
        }
}

static void cmp_fields(const chk_cfp *a, const chk_cfp *b, const char **field)
{
    *field = NULL;
    if (a->op_hash != b->op_hash)
        *field = "operation";
    else if (a->sig_hash != b->sig_hash)
        *field = "type signature";
    else if (a->count != b->count)
        *field = "count";
    else if (a->redop_hash != b->redop_hash)
        *field = "reduce op";
    else if (a->root != b->root)
        *field = "root";
    else if (a->args_hash != b->args_hash)
        *field = "arguments";
}

/* mine vs the predecessor's record for the same seq. c->mu held. */
static void compare(cohort_check *c, cohort_check_group *g, const chk_cfp *mine,
                    const chk_cfp *theirs, int lazy)
{
    c->stats.compared++;
    if (lazy)
        c->stats.lazy++;
    const char *field;
    cmp_fields(mine, theirs, &field);
    if (!field)
        return;
    char val[96], text[600];
    const chk_hent *e = &g->hist[mine->seq % CHK_HIST];
    snprintf(text, sizeof text,
             "%s: %s #%" PRIu64 ": %s differs between member %d (this rank, world rank %d) and "
             "member %d (world rank %d)",
             g->name, e->f.seq == mine->seq && e->op ? e->op : "call", mine->seq, field, g->me,
             c->rank, (g->me + g->n - 1) % g->n, g->pred);
    snprintf(val, sizeof val, "M %016" PRIx64 " %" PRIu64 " %d ", g->id, mine->seq, g->me);
    char value[700];
    snprintf(value, sizeof value, "%s%s", val, text);
    coh_chk_fail(c, COHORT_CHECK_MISMATCH, COHORT_ERR_CONTRACT, value, text);
}

/* The predecessor's record for group gid arrived. c->mu held. */
static void on_theirs(cohort_check *c, uint64_t gid, const chk_cfp *f, int lazy)
{
    cohort_check_group *g = coh_chk_find(c, gid);
    if (!g) {
        chk_orphan *o = coh_calloc(1, sizeof *o);
        if (!o) {
            coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_NOMEM,
                         "R 5 checker: out of memory", "checker: out of memory");
            return;
        }
        o->gid = gid;
        o->f = *f;
        o->next = c->orphans;
        c->orphans = o;
        return;
    }
    chk_cfp *m = q_front(&g->mine);
    if (m) {
        if (m->seq != f->seq) {
            /* Both sides are sequential per group: a gap is a bug. */
            char text[300];
            snprintf(text, sizeof text,
                     "%s: checker records out of order (expected #%" PRIu64 ", got #%" PRIu64
                     ") - a cohort bug: please report it",
                     g->name, m->seq, f->seq);
            char value[400];
            snprintf(value, sizeof value, "R %d %s", COHORT_CHECK_ABORTED, text);
            coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_PROTOCOL, value, text);
            return;
        }
        compare(c, g, m, f, lazy);
        q_pop(&g->mine);
        if (c->waiters)
            pthread_cond_broadcast(&c->cv);
        if (g->removed && !g->mine.n)
            unlink_group(c, g);
        return;
    }
    if (q_push(&g->theirs, f) != 0)
        coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_NOMEM, "R 5 checker: out of memory",
                     "checker: out of memory");
}

/* Drains writer w's ring, its aux region ah, of the records addressed to
 * me. Returns the count. c->mu held. */
static int drain_aux(cohort_check *c, int w, chk_aux_hdr *ah, int lazy)
{
    if (!ah)
        return 0;
    chk_slot *ring = (chk_slot *)((unsigned char *)ah + CHK_RING_OFF);
    _Atomic uint64_t *done = (_Atomic uint64_t *)((unsigned char *)ah + CHK_DONE_OFF);
    const uint64_t *args = (const uint64_t *)((unsigned char *)ah + CHK_ARGS_OFF);
    int got = 0;
    unsigned skips = 0;
    for (;;) {
        uint64_t idx = c->cursor[w];
        chk_slot *r = &ring[idx % CHK_RING_N];
        uint64_t s1 = atomic_load_explicit(&r->stamp, memory_order_acquire);
        if (s1 < idx + 1)
            break; /* not written yet */
        if (s1 > idx + 1) {
            /* Only a skip can loop, so only a skip reads the writer's head
             * (a line it dirties with every record: not on the path that
             * consumes one). The writer stored its head for record s1 - 2
             * before the stamp of s1 - 1 (a release): an honest stamp is at
             * most head + 1, and never near 2^64. Anything else is shared
             * memory someone broke; followed, it would keep this loop, and
             * c->mu, for ever. */
            uint64_t head = atomic_load_explicit(&ah->head, memory_order_relaxed);
            if (s1 >> 63 || s1 > head + 1) {
                char text[300], value[400];
                snprintf(text, sizeof text,
                         "the record ring of rank %d is corrupt (slot %u stamped %" PRIu64
                         ", past its head %" PRIu64 "): a broken or hostile process wrote its "
                         "shared memory",
                         w, (unsigned)(idx % CHK_RING_N), s1, head);
                snprintf(value, sizeof value, "R %d %s", COHORT_CHECK_ABORTED, text);
                coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_PROTOCOL, value, text);
                break;
            }
            /* Overwritten: it was someone else's (a record of mine is not
             * overwritten before I consumed it: the done words), and so
             * was every record before s1 - CHK_RING_N, whose slots the
             * writer reused on its way to s1 - 1: jump there. The skips
             * are bounded per drain all the same (the caller drains
             * again). */
            uint64_t next = s1 > CHK_RING_N ? s1 - CHK_RING_N : 0;
            c->cursor[w] = next > idx + 1 ? next : idx + 1;
            if (++skips > 4 * CHK_RING_N)
                break;
            continue;
        }
        chk_rec copy;
        uint32_t rf = r->reader;
        copy.reader = (int32_t)(rf & ~CHK_SLOT_ARGS);
        copy.root = r->root;
        copy.gid = r->gid;
        copy.seq = r->seq;
        copy.op_hash = r->op_hash;
        copy.sig_hash = r->sig_hash;
        copy.count = r->count;
        copy.redop_hash = r->redop_hash;
        copy.args_hash = rf & CHK_SLOT_ARGS ? args[idx % CHK_RING_N] : 0;
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&r->stamp, memory_order_relaxed) != s1)
            continue; /* reused while read: someone else's; re-read the slot */
        c->cursor[w]++;
        if (copy.reader != c->rank)
            continue;
        chk_cfp f = {copy.seq,       copy.op_hash, copy.sig_hash, copy.count,
                     copy.redop_hash, copy.args_hash, copy.root};
        atomic_store_explicit(&done[idx % CHK_RING_N], s1, memory_order_release);
        on_theirs(c, copy.gid, &f, lazy);
        got++;
    }
    return got;
}

/* The same, ah looked up (a group keeps its predecessor's: pred_aux). */
int coh_chk_drain_locked(cohort_check *c, int w, int lazy)
{
    return drain_aux(c, w, coh_shm_aux(c->shm, c->world->peers[w].local_index), lazy);
}

void coh_chk_handle_store_rec(cohort_check *c, int writer, const chk_rec *r)
{
    (void)writer;
    chk_cfp f = {r->seq, r->op_hash, r->sig_hash, r->count, r->redop_hash, r->args_hash, r->root};
    on_theirs(c, r->gid, &f, 1);
}

/* ---- options, create, destroy ---- */

void cohort_check_options_init(cohort_check_options *o)
{
    memset(o, 0, sizeof *o);
}

static int env_ms(const char *name, int dflt)
{
    const char *t = coh_env_str(name);
    if (!t)
        return dflt;
    char *end;
    double d = strtod(t, &end);
    if (end == t || *end || d <= 0 || d > 1e6)
        return dflt;
    return (int)(d * 1000);
}

cohort_status cohort_check_create(cohort_group *world, const cohort_check_options *o,
                                  cohort_check **out)
{
    if (!out)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_create: out is NULL");
    *out = NULL;
    if (!world)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_create: world is NULL");
    if (world->parent)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "cohort_check_create: the group must be a world group (from cohort_init)");
    /* Its own alignment (64: the packed lines of check_int.h, the lock's
     * line); calloc promises 16, which would split each "line" in two. */
    cohort_check *c = coh_calloc_aligned(_Alignof(cohort_check), sizeof *c);
    if (!c)
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "cohort_check_create: out of memory");
    if (o)
        c->o = *o;
    if (!c->o.stall_warn_ms)
        c->o.stall_warn_ms = env_ms("COHORT_STALL_WARN", 30000);
    if (!c->o.timeout_ms)
        c->o.timeout_ms = env_ms("COHORT_TIMEOUT", -1);
    if (!c->o.deadlock_ms)
        c->o.deadlock_ms = 1000;
    c->world = world;
    c->rank = world->rank;
    c->size = world->size;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    /* The biased lock needs membarrier(2) (Linux 4.14); without it, or with
     * COHORT_CHECK_FASTLOCK=0, every call takes the mutex. */
    {
        const char *t = coh_env_str("COHORT_CHECK_FASTLOCK");
        int off = t && !strcmp(t, "0");
        if (off || syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0)
            atomic_store(&c->bias, CHK_BIAS_OFF);
    }
    pthread_cond_init(&c->mon_cv, NULL);
    c->cursor = coh_calloc((size_t)c->size, sizeof *c->cursor);
    c->sent = coh_calloc((size_t)c->size, sizeof *c->sent);
    c->recvd = coh_calloc((size_t)c->size, sizeof *c->recvd);
    c->remote_pred = coh_calloc((size_t)c->size, 1);
    c->pos.peer = -1;
    if (!c->cursor || !c->sent || !c->recvd || !c->remote_pred) {
        cohort_check_destroy(c);
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "cohort_check_create: out of memory");
    }
    {
        /* the cpus this machine offers the group's ranks on it (the union
         * of their cpu sets at the rendezvous), as the shm waits count */
        long cpus = coh_group_cpus(world);
        int spin_us = world->local_size > cpus ? 0 : 20;
        const char *t = coh_env_str("COHORT_CHECK_SPIN_US");
        if (t) {
            char *end;
            long v = strtol(t, &end, 10);
            if (end != t && !*end && v >= 0 && v <= 1000000)
                spin_us = (int)v;
        }
        c->spin_ns = (uint64_t)spin_us * 1000ull;
        c->yield_ns = world->local_size > cpus ? 2000000ull : 1000000ull;
        if (c->yield_ns < c->spin_ns)
            c->yield_ns = c->spin_ns;
    }
    if (world->shm && c->o.transport != 1) {
        c->shm = world->shm;
        c->my_aux = coh_shm_aux(world->shm, world->local_rank);
        c->my_ring = (chk_slot *)((unsigned char *)c->my_aux + CHK_RING_OFF);
        c->my_args = (uint64_t *)((unsigned char *)c->my_aux + CHK_ARGS_OFF);
        c->my_done = (_Atomic uint64_t *)((unsigned char *)c->my_aux + CHK_DONE_OFF);
    }
    /* Two store connections: one for calling threads (under c->mu), one
     * for the monitor thread, which blocks in the store without the lock. */
    cohort_status st = COHORT_OK;
    char prefix[48];
    snprintf(prefix, sizeof prefix, "gen%u/chk/", world->generation);
    cohort_store **roots[2] = {&c->st_user_root, &c->st_mon_root};
    cohort_store **views[2] = {&c->st_user, &c->st_mon};
    for (int i = 0; i < 2 && st == COHORT_OK && world->size > 1; i++) {
        st = coh_store_connect_gen(roots[i], world->store_addr, world->job_id, world->token,
                                   world->generation, world->timeout_ms > 0 ? world->timeout_ms
                                                                            : 30000);
        if (st == COHORT_OK)
            st = cohort_store_prefixed(*roots[i], prefix, views[i]);
        if (st == COHORT_OK)
            cohort_store_set_timeout(*views[i], 5000);
    }
    if (st != COHORT_OK) {
        char why[COH_ERRLEN];
        snprintf(why, sizeof why, "%s", cohort_last_error(NULL));
        cohort_check_destroy(c);
        return coh_err_set(NULL, st, "cohort_check_create: store connection: %s", why);
    }
    if (pthread_create(&c->thr, NULL, coh_chk_monitor, c) != 0) {
        cohort_check_destroy(c);
        return coh_err_set(NULL, COHORT_ERR_SYSTEM, "cohort_check_create: pthread_create failed");
    }
    c->thr_started = 1;
    *out = c;
    return COHORT_OK;
}

void cohort_check_destroy(cohort_check *c)
{
    if (!c)
        return;
    if (c->thr_started) {
        int rv = coh_chk_lock(c);
        c->stop = 1;
        pthread_cond_broadcast(&c->cv);
        pthread_cond_signal(&c->mon_cv);
        coh_chk_unlock(c, rv);
        pthread_join(c->thr, NULL);
    }
    for (cohort_check_group *g = c->groups, *n; g; g = n) {
        n = g->next;
        group_free(g);
    }
    for (chk_orphan *o = c->orphans, *n; o; o = n) {
        n = o->next;
        coh_free(o);
    }
    for (size_t i = 0; i < c->names.cap; i++)
        coh_free(c->names.val[i]);
    coh_free(c->names.key), coh_free(c->names.val);
    if (c->st_user)
        cohort_store_flush(c->st_user);
    cohort_store_close(c->st_user);
    cohort_store_close(c->st_user_root);
    cohort_store_close(c->st_mon);
    cohort_store_close(c->st_mon_root);
    coh_free(c->cursor), coh_free(c->sent), coh_free(c->recvd), coh_free(c->remote_pred);
    coh_free(c->fail_value);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    pthread_cond_destroy(&c->mon_cv);
    coh_free(c);
}

cohort_status cohort_check_group_add(cohort_check *c, uint64_t id, const int *world_ranks, int n,
                                     cohort_check_group **out)
{
    if (!out)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_group_add: out is NULL");
    *out = NULL;
    if (!c || !world_ranks || n <= 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "cohort_check_group_add: checker, ranks or size missing");
    int me = -1;
    for (int i = 0; i < n; i++) {
        if (world_ranks[i] < 0 || world_ranks[i] >= c->size)
            return coh_err_set(NULL, COHORT_ERR_INVALID,
                               "cohort_check_group_add: member %d has world rank %d, outside "
                               "0..%d",
                               i, world_ranks[i], c->size - 1);
        if (world_ranks[i] == c->rank) {
            if (me >= 0)
                return coh_err_set(NULL, COHORT_ERR_INVALID,
                                   "cohort_check_group_add: world rank %d listed twice", c->rank);
            me = i;
        }
    }
    if (me < 0)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "cohort_check_group_add: this rank (%d) is not a member", c->rank);
    cohort_check_group *g = coh_calloc(1, sizeof *g);
    int *w = coh_malloc(sizeof(int) * (size_t)n);
    if (!g || !w) {
        coh_free(g), coh_free(w);
        return coh_err_set(NULL, COHORT_ERR_NOMEM, "cohort_check_group_add: out of memory");
    }
    memcpy(w, world_ranks, sizeof(int) * (size_t)n);
    g->id = id;
    g->n = n;
    g->me = me;
    g->world = w;
    g->pred = w[(me + n - 1) % n];
    g->succ = w[(me + 1) % n];
    g->pred_ring = via_ring(c, g->pred);
    g->pred_aux =
        g->pred_ring ? coh_shm_aux(c->shm, c->world->peers[g->pred].local_index) : NULL;
    g->succ_ring = via_ring(c, g->succ);
    snprintf(g->name, sizeof g->name, "group %016" PRIx64, id);
    int rv = coh_chk_lock(c);
    if (coh_chk_find(c, id)) {
        coh_chk_unlock(c, rv);
        group_free(g);
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "cohort_check_group_add: group %016" PRIx64 " is registered already",
                           id);
    }
    g->next = c->groups;
    c->groups = g;
    if (!g->pred_ring && g->pred != c->rank)
        c->remote_pred[g->pred] = 1;
    /* Records that came before the group (oldest last in the list). */
    chk_orphan **pp = &c->orphans, *mine = NULL;
    while (*pp) {
        chk_orphan *o = *pp;
        if (o->gid == id) {
            *pp = o->next;
            o->next = mine;
            mine = o;
        } else {
            pp = &o->next;
        }
    }
    for (chk_orphan *o = mine, *nx; o; o = nx) {
        nx = o->next;
        if (q_push(&g->theirs, &o->f) != 0)
            coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_NOMEM, "R 5 checker: out of memory",
                         "checker: out of memory");
        coh_free(o);
    }
    if (c->waiters) /* a monitor waiting for it to publish a report (my_history) */
        pthread_cond_broadcast(&c->cv);
    coh_chk_unlock(c, rv);
    *out = g;
    return COHORT_OK;
}

void cohort_check_group_name(cohort_check *c, cohort_check_group *grp, const char *name)
{
    if (!c || !grp || !name)
        return;
    int rv = coh_chk_lock(c);
    snprintf(grp->name, sizeof grp->name, "%s", name);
    coh_chk_unlock(c, rv);
}

int cohort_check_group_mutual(const cohort_check_group *grp)
{
    return grp && grp->n == 2 && grp->me >= 0 && grp->pred == grp->succ && grp->pred_ring;
}

void cohort_check_group_remove(cohort_check *c, cohort_check_group *grp)
{
    if (!c || !grp)
        return;
    int rv = coh_chk_lock(c);
    if (grp->pred_ring && grp->mine.n)
        coh_chk_drain_locked(c, grp->pred, 0);
    /* With calls still uncompared it stays (removed) until the
     * predecessor's records come; on_theirs frees it then. */
    grp->removed = 1;
    if (!grp->mine.n)
        unlink_group(c, grp);
    coh_chk_unlock(c, rv);
}

/* ---- failure ---- */

void coh_chk_fail(cohort_check *c, int kind, cohort_status st, const char *value,
                  const char *local_text)
{
    int zero = 0;
    if (!atomic_compare_exchange_strong(&c->failed, &zero, kind))
        return;
    c->status = st;
    snprintf(c->err, sizeof c->err, "%s", local_text);
    c->fail_value = value ? coh_strdup(value) : NULL;
    coh_warn("checker: %s", local_text);
    pthread_cond_broadcast(&c->cv);
    pthread_cond_signal(&c->mon_cv);
}

/* Waits (bounded) for the monitor's report, then returns the status.
 * c->mu held. */
static cohort_status report_wait_locked(cohort_check *c, int timeout_ms)
{
    struct timespec ts;
    coh_abstime_ms(&ts, timeout_ms < 0 ? 15000u : (unsigned)timeout_ms);
    while (!c->report_ready && !c->stop) {
        c->waiters++;
        int r = pthread_cond_timedwait(&c->cv, &c->mu, &ts);
        c->waiters--;
        if (r == ETIMEDOUT)
            break;
    }
    return c->status ? c->status : COHORT_ERR_ABORTED;
}

/* One sleep on c->cv of at most 2 ms (c->mu held): a comparison, a failure
 * or close broadcasts it; the bound covers what nobody signals. */
static void cv_wait_2ms(cohort_check *c)
{
    struct timespec ts;
    coh_abstime_ms(&ts, 2);
    c->waiters++;
    pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    c->waiters--;
}

static cohort_status failed_status(cohort_check *c)
{
    if (c->o.no_report_wait)
        return c->status ? c->status : COHORT_ERR_ABORTED;
    lock_to_mutex(c);
    return report_wait_locked(c, 15000);
}

cohort_status cohort_check_report_wait(cohort_check *c, int timeout_ms)
{
    if (!c)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_report_wait: checker missing");
    int rv = coh_chk_lock(c);
    cohort_status st = COHORT_OK;
    if (atomic_load_explicit(&c->failed, memory_order_relaxed))
        st = report_wait_locked(c, timeout_ms);
    coh_chk_unlock(c, rv);
    return st;
}

/* ---- the position (private copy + shared seqlock copy) ---- */

/* Positions need stall-report precision (ms), not ns: the coarse clock
 * costs a few ns instead of a vDSO clock read per call. Same clock
 * (CLOCK_MONOTONIC base) as coh_now_ns, ~4 ms resolution. */
static uint64_t pos_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Copies what changed into the shared position, under its seqlock: the
 * fixed fields always (one cache line), strings only when named - a call
 * writes its op name, its end the last op, and call sites are rare (set by
 * the monitor for long calls). */
static void put_str(char *dst, const char *src, size_t cap)
{
    size_t l = strnlen(src, cap - 1);
    memcpy(dst, src, l);
    dst[l] = 0;
}

void coh_chk_pos_write(cohort_check *c, unsigned what)
{
    what |= c->pos_dirty;
    c->pos_dirty = 0;
    if (!c->my_aux)
        return;
    chk_aux_hdr *h = c->my_aux;
    uint32_t v = atomic_load_explicit(&h->pos_ver, memory_order_relaxed);
    atomic_store_explicit(&h->pos_ver, v + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    memcpy(&h->pos, &c->pos, offsetof(chk_pos, op));
    if (what & CHK_PW_OP)
        put_str(h->pos.op, c->pos.op, sizeof h->pos.op);
    if (what & CHK_PW_SITE)
        put_str(h->pos.site, c->pos.site, sizeof h->pos.site);
    if (what & CHK_PW_LAST) {
        put_str(h->pos.last_op, c->pos.last_op, sizeof h->pos.last_op);
        put_str(h->pos.last_site, c->pos.last_site, sizeof h->pos.last_site);
    }
    atomic_store_explicit(&h->pos_ver, v + 2, memory_order_release);
}

static void copy_op(char *dst, const char *op)
{
    size_t l = op ? strnlen(op, CHK_OP_MAX - 1) : 0;
    memcpy(dst, op ? op : "", l);
    dst[l] = 0;
}

/* ---- the calls ---- */

/* Waits until this rank's ring has a free slot for g's next record, the
 * lock released while waiting. Before the call takes its seq: a second
 * thread's call that comes in meanwhile takes the next seq and slot only
 * after this one's (the ring holds each group's records in seq order, and
 * no two calls write one slot). On a failure (c->failed) it returns at
 * once. c->mu held. */
static void ring_reserve(cohort_check *c, cohort_check_group *g)
{
    if (g->succ == c->rank || !g->succ_ring || c->head < CHK_RING_N || c->head < c->ring_free)
        return;
    uint64_t t0 = 0;
    for (;;) {
        uint64_t idx = c->head; /* again after each wait: others may have written */
        /* The slot's previous record must have been consumed. One read of
         * its done line tells it for the rest of the line's slots too: the
         * next calls read none (the reader is writing the line before this
         * one meanwhile, so it and the writer do not pass a line to and
         * fro per record). A slot once consumed stays free until this
         * writer writes it. */
        uint64_t end = (idx / CHK_DONE_PER_LINE + 1) * CHK_DONE_PER_LINE, n = idx;
        while (n < end && atomic_load_explicit(&c->my_done[n % CHK_RING_N],
                                               memory_order_acquire) == n + 1 - CHK_RING_N)
            n++;
        if (n > idx) {
            c->ring_free = n;
            return;
        }
        if (!t0) {
            c->stats.ring_waits++;
            t0 = coh_now_ns();
        }
        if (atomic_load(&c->failed))
            return; /* the caller reports it */
        int fast = lock_release(c);
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
        lock_reacquire(c, fast);
        if (c->o.timeout_ms > 0 && coh_now_ns() - t0 > (uint64_t)c->o.timeout_ms * 1000000ull) {
            coh_chk_fail(c, COHORT_CHECK_TIMEOUT, COHORT_ERR_TIMEOUT,
                         "R 3 checker: a neighbour stopped reading this rank's "
                         "fingerprints (ring full)",
                         "checker: a neighbour stopped reading this rank's "
                         "fingerprints (ring full)");
            return;
        }
    }
}

/* Writes f to g's successor. Through the ring: into the slot ring_reserve
 * found free in the same hold of the lock. c->mu held. */
static cohort_status publish(cohort_check *c, cohort_check_group *g, const chk_cfp *f)
{
    if (g->succ == c->rank)
        return COHORT_OK;
    if (g->succ_ring) {
        uint64_t idx = c->head;
        chk_slot *r = &c->my_ring[idx % CHK_RING_N];
        atomic_store_explicit(&r->stamp, 0, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        r->reader = (uint32_t)g->succ | (f->args_hash ? CHK_SLOT_ARGS : 0u);
        r->root = f->root;
        r->gid = g->id;
        r->seq = f->seq;
        r->op_hash = f->op_hash;
        r->sig_hash = f->sig_hash;
        r->count = f->count;
        r->redop_hash = f->redop_hash;
        if (f->args_hash)
            c->my_args[idx % CHK_RING_N] = f->args_hash;
        atomic_store_explicit(&r->stamp, idx + 1, memory_order_release);
        c->head = idx + 1;
        atomic_store_explicit(&c->my_aux->head, idx + 1, memory_order_relaxed);
        /* The wake-up word, then whether a reader sleeps on it: a release
         * store and a plain load. A seq_cst pair here (an xchg) waited for
         * the record's cache lines to arrive from the reader's core - 70 %
         * of cohort_check_begin's samples in a profile. What the weaker
         * pair allows, the load passing the store, lasts until the store
         * buffer drains the store (on its own, or at the next locked
         * instruction - the fast path has none): a reader that went to
         * sleep on the old word in that window finds the new one when its
         * futex call compares it, and at worst sleeps out its 1 ms bound
         * (wait_pred_locked), only after spinning and yielding first.
         * Never a lost record: only a late wake-up. */
        atomic_store_explicit(&c->my_aux->wake, (uint32_t)(idx + 1), memory_order_release);
        if (atomic_load_explicit(&c->my_aux->sleepers, memory_order_relaxed))
            coh_futex_wake_all(&c->my_aux->wake);
        /* No prefetch of the next record's line for writing: the reader
         * probes that slot at the end of each drain, and finds it in its
         * own cache (the copy it read a lap ago) unless the writer took it
         * early; taken early, each record would cost the line twice. The
         * next done line, which ring_reserve reads at the next call, can
         * travel while the program and MPI work: the reader finished
         * writing it a lap ago. */
        if (idx + 1 >= CHK_RING_N && (idx + 1) % CHK_DONE_PER_LINE == 0 &&
            idx + 1 >= c->ring_free)
            __builtin_prefetch((const void *)&c->my_done[(idx + 1) % CHK_RING_N], 0);
        return COHORT_OK;
    }
    /* Through the store: pipelined, no round trip. */
    chk_rec r = {.reader = g->succ, .root = f->root, .gid = g->id, .seq = f->seq,
                 .op_hash = f->op_hash, .sig_hash = f->sig_hash, .count = f->count,
                 .redop_hash = f->redop_hash, .args_hash = f->args_hash};
    unsigned char buf[80];
    coh_chk_rec_encode(&r, buf);
    char key[64];
    int kl = snprintf(key, sizeof key, "q/%d/%d/%" PRIu64, g->succ, c->rank, ++c->sent[g->succ]);
    cohort_status st = cohort_store_set_nowait(c->st_user, key, (size_t)kl, buf, sizeof buf);
    if (st != COHORT_OK) {
        char text[400];
        snprintf(text, sizeof text, "checker: publishing a fingerprint through the store: %s: %s",
                 cohort_status_name(st), cohort_store_last_error(c->st_user));
        char value[500];
        snprintf(value, sizeof value, "R 5 %s", text);
        coh_chk_fail(c, COHORT_CHECK_ABORTED, st, value, text);
        return failed_status(c);
    }
    return COHORT_OK;
}

/* Announces the next call of g in its history: names interned once, then
 * pointer copies. c->mu held. */
static void hist_put(cohort_check *c, cohort_check_group *g, const cohort_check_fp *fp,
                     chk_cfp *out)
{
    chk_cfp f;
    f.seq = ++g->seq;
    f.op_hash = lit_hash(c, fp->op);
    f.sig_hash = fp->sig_hash;
    f.count = fp->count;
    f.redop_hash = lit_hash(c, fp->redop);
    f.root = fp->root;
    f.args_hash = fp->args_hash;
    chk_hent *e = &g->hist[f.seq % CHK_HIST];
    e->f = f;
    e->op = fp->op;
    e->redop = fp->redop;
    if (f.sig_hash && fp->sig && f.sig_hash == c->last_sig_hash) {
        e->sig = c->last_sig;
    } else {
        e->sig = f.sig_hash && fp->sig ? coh_chk_intern(c, 1, f.sig_hash, fp->sig) : NULL;
        if (e->sig)
            c->last_sig_hash = f.sig_hash, c->last_sig = e->sig;
    }
    e->args = f.args_hash && fp->args ? coh_chk_intern(c, 2, f.args_hash, fp->args) : NULL;
    e->file = fp->file ? coh_chk_intern(c, 3, str_hash(fp->file), fp->file) : NULL;
    e->line = fp->line;
    e->pc = fp->pc;
    *out = f;
}

/* The lines a call's begin or end reaches, asked for all at once at its
 * start. Between two calls the program and the other library run, and a
 * working set beyond L1 - an MPI all-reduce of 4 KiB already - evicts the
 * checker's state (~20 lines per call); the code then reaches the lines one
 * after another, each an L2 or cross-core miss. Measured through
 * libcohort-mpi (2026-12-02): the same instruction count per call at 8 B
 * and 4 KiB (callgrind), 3 L1 misses per begin at 8 B and 13.6 at 4 KiB
 * (its cache model), and 110-130 ns more of the layer's own time per
 * all-reduce at 4 KiB (selftime). Hints only: nothing here is read for its
 * value but the addresses, read under the call's lock (the monitor drains
 * and pops under it too); a stale address costs one useless prefetch. */
_Static_assert(offsetof(struct cohort_check, my_done) - offsetof(struct cohort_check, bias) == 64 &&
                   offsetof(struct cohort_check, stats) - offsetof(struct cohort_check, bias) == 128 &&
                   offsetof(struct cohort_check, pos) - offsetof(struct cohort_check, bias) == 192,
               "begin/end's fields: two lines, then the stats' line, then the position");
static inline void call_prefetch(const cohort_check *c, const cohort_check_group *g, int at_begin)
{
    /* the packed lines (check_int.h): the lock's line is already here */
    __builtin_prefetch(&c->my_done, 1);
    __builtin_prefetch(&c->pos, 1);
    __builtin_prefetch((const char *)&c->pos + 64, 1);
    __builtin_prefetch(g, 1);
    __builtin_prefetch((const char *)g + 64, 1);
    if (g->pred_ring && c->cursor) {
        /* The predecessor's next record: usually the one cross-core line of
         * the call; requested first so it overlaps the rest. */
        const chk_aux_hdr *ph = g->pred_aux;
        if (ph) {
            const chk_slot *ring = (const chk_slot *)((const unsigned char *)ph + CHK_RING_OFF);
            __builtin_prefetch(&ring[c->cursor[g->pred] % CHK_RING_N], 0);
        }
    }
    if (g->mine.cap)
        __builtin_prefetch(&g->mine.v[g->mine.head], 1);
    if (!at_begin)
        return;
    __builtin_prefetch(&c->stats, 1);
    __builtin_prefetch(&g->hist[(g->seq + 1) % CHK_HIST], 1);
    __builtin_prefetch((const char *)&g->hist[(g->seq + 1) % CHK_HIST] + 63, 1);
    if (g->mine.cap)
        __builtin_prefetch(&g->mine.v[(g->mine.head + g->mine.n) % g->mine.cap], 1);
    if (c->my_ring && g->succ_ring) {
        __builtin_prefetch(&c->my_ring[c->head % CHK_RING_N], 1);
        __builtin_prefetch(c->my_aux, 1);
    }
}

cohort_status cohort_check_begin(cohort_check *c, cohort_check_group *g, const cohort_check_fp *fp,
                                 uint64_t *seq)
{
    if (!c || !g || !fp || !fp->op)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "cohort_check_begin: checker, group, fingerprint or op missing");
    call_lock(c);
    call_prefetch(c, g, 1);
    if (!atomic_load_explicit(&c->failed, memory_order_relaxed) && !g->removed)
        ring_reserve(c, g);
    if (atomic_load_explicit(&c->failed, memory_order_relaxed)) {
        /* A call made after another rank found a mismatch still goes into
         * the history until the report is out: a rank that reached the
         * failing call late must not read as having made no calls. Bounded
         * so a program that retries in a loop cannot wrap the history. */
        if (!c->report_ready && !g->removed && g->late < CHK_HIST / 2) {
            chk_cfp f;
            g->late++;
            hist_put(c, g, fp, &f);
            pthread_cond_broadcast(&c->cv);
        }
        cohort_status st = failed_status(c);
        call_unlock(c);
        return st;
    }
    if (g->removed) {
        call_unlock(c);
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_begin: %s was removed",
                           g->name);
    }
    chk_cfp f;
    hist_put(c, g, fp, &f);
    if (seq)
        *seq = f.seq;
    if (g->pred != c->rank)
        c->stats.calls++; /* a group of one has nothing to compare */

    c->pos.state = CHK_POS_CALL;
    c->pos.peer = -1;
    c->pos.gid = g->id;
    c->pos.seq = f.seq;
    c->pos.start_ns = pos_now();
    /* op names are string literals (cohort_check.h): the same pointer is
     * the same text, already in both copies of the position. */
    unsigned what = 0;
    if (fp->op != c->pos_op_lit) {
        copy_op(c->pos.op, fp->op);
        c->pos_op_lit = fp->op;
        what |= CHK_PW_OP;
    }
    if (fp->file) {
        /* A loop calls from one site: format it only when it changes
         * (snprintf was as costly as the rest of begin). */
        const char *base = coh_site_base(fp->file);
        size_t bl = strlen(base);
        if (fp->line != c->pos_site_line || bl + 1 >= sizeof c->pos.site ||
            c->pos.site[bl] != ':' || memcmp(c->pos.site, base, bl) != 0) {
            snprintf(c->pos.site, sizeof c->pos.site, "%s:%d", base, fp->line);
            c->pos_site_line = fp->line;
            what |= CHK_PW_SITE;
        }
    } else if (c->pos.site[0]) {
        c->pos.site[0] = 0;
        c->pos_site_line = -1;
        what |= CHK_PW_SITE;
    }
    if (what)
        c->pos_last_dirty = 1;
    c->pos_pc = fp->pc;
    c->pos_site_done = fp->file != NULL;
    c->stall_warned = 0;
    c->pos.episode++;
    c->pos_dirty |= what | CHK_PW_FIXED; /* the monitor writes it (lazy) */

    cohort_status st = publish(c, g, &f);
    if (st == COHORT_OK && g->pred != c->rank) {
        if (g->pred_ring)
            drain_aux(c, g->pred, g->pred_aux, 0);
        chk_cfp *t = q_front(&g->theirs);
        if (t) {
            /* The predecessor is ahead: compare before the backend. */
            chk_cfp tf = *t;
            q_pop(&g->theirs);
            if (tf.seq != f.seq) {
                char text[300], value[400];
                snprintf(text, sizeof text,
                         "%s: checker records out of order (expected #%" PRIu64
                         ", got #%" PRIu64 ") - a cohort bug: please report it",
                         g->name, f.seq, tf.seq);
                snprintf(value, sizeof value, "R 5 %s", text);
                coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_PROTOCOL, value, text);
            } else {
                compare(c, g, &f, &tf, 0);
            }
        } else if (q_push(&g->mine, &f) != 0) {
            coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_NOMEM, "R 5 checker: out of memory",
                         "checker: out of memory");
        }
    }
    if (atomic_load_explicit(&c->failed, memory_order_relaxed))
        st = failed_status(c);
    call_unlock(c);
    return st;
}

static int pending(const cohort_check_group *g, uint64_t seq)
{
    const chk_cfp *m = g->mine.n ? &g->mine.v[g->mine.head] : NULL;
    return m && m->seq <= seq;
}

/* Waits until the same-host predecessor's record for seq is compared, a
 * failure, stop, or until_ns (monotonic). c->mu held; released while
 * waiting. The three stages of shm_wait.c, on the predecessor's futex
 * word: spin up to c->spin_ns (a record is usually microseconds away when
 * both ranks run), yield up to c->yield_ns (the neighbour may need this
 * CPU; a futex wake-up costs 20-40 us here, measured 47 us against 6-14 us
 * per call in step with a bare sleep), then sleep on the word, so a wait
 * for a neighbour that does not come burns at most c->yield_ns of CPU
 * (before: a 5 ms sched_yield loop per wait). Sleeps are at most 1 ms so
 * a failure found by the monitor thread is seen promptly. */
static void wait_pred_locked(cohort_check *c, cohort_check_group *g, uint64_t seq,
                             uint64_t until_ns)
{
    chk_aux_hdr *ph = g->pred_aux;
    if (!ph)
        return;
    uint64_t t0 = coh_now_ns();
    uint64_t spin_end = t0 + c->spin_ns, yield_end = t0 + c->yield_ns;
    for (;;) {
        drain_aux(c, g->pred, g->pred_aux, 0);
        if (!pending(g, seq) || atomic_load_explicit(&c->failed, memory_order_relaxed) ||
            c->stop)
            return;
        /* Records written before the word was read are visible to the
         * drain below; a later one changes the word. */
        uint32_t v = atomic_load_explicit(&ph->wake, memory_order_acquire);
        drain_aux(c, g->pred, g->pred_aux, 0);
        if (!pending(g, seq))
            return;
        uint64_t now = coh_now_ns();
        if (now >= until_ns)
            return;
        int fast = lock_release(c);
        while (now < spin_end && atomic_load_explicit(&ph->wake, memory_order_acquire) == v) {
            for (int i = 0; i < 64 && atomic_load_explicit(&ph->wake, memory_order_relaxed) == v;
                 i++)
                coh_cpu_relax();
            now = coh_now_ns();
        }
        while (now < yield_end && now < until_ns &&
               atomic_load_explicit(&ph->wake, memory_order_acquire) == v) {
            sched_yield();
            now = coh_now_ns();
        }
        if (now < until_ns && atomic_load_explicit(&ph->wake, memory_order_acquire) == v) {
            atomic_fetch_add_explicit(&ph->sleepers, 1, memory_order_seq_cst);
            if (atomic_load_explicit(&ph->wake, memory_order_seq_cst) == v) {
                uint64_t left = until_ns > now ? until_ns - now : 0;
                /* at most 1 ms: also the bound on a late wake-up (publish) */
                coh_futex_wait_ns(&ph->wake, v, left < 1000000ull ? left : 1000000ull);
            }
            atomic_fetch_sub_explicit(&ph->sleepers, 1, memory_order_seq_cst);
        }
        lock_reacquire(c, fast);
    }
}

cohort_status cohort_check_end(cohort_check *c, cohort_check_group *g, uint64_t seq,
                               unsigned flags)
{
    if (!c || !g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_end: checker or group missing");
    call_lock(c);
    call_prefetch(c, g, 0);
    if (c->pos.state == CHK_POS_CALL && c->pos.gid == g->id && c->pos.seq == seq) {
        c->pos.state = CHK_POS_IDLE;
        c->pos.last_gid = g->id;
        c->pos.last_seq = seq;
        c->pos.last_end_ns = pos_now();
        unsigned what = 0;
        if (c->pos_last_dirty) {
            put_str(c->pos.last_op, c->pos.op, sizeof c->pos.last_op);
            put_str(c->pos.last_site, c->pos.site, sizeof c->pos.last_site);
            c->pos_last_dirty = 0;
            what = CHK_PW_LAST;
        }
        c->pos.episode++;
        c->pos_dirty |= what | CHK_PW_FIXED; /* the monitor writes it (lazy) */
    }
    /* One probe of the predecessor's ring (a cache-line read; a miss only
     * when its record is there to compare); only SYNCED waits for it. */
    if (pending(g, seq) && g->pred_ring) {
        drain_aux(c, g->pred, g->pred_aux, 0);
        if (pending(g, seq) && (flags & COHORT_CHECK_SYNCED)) {
            /* The predecessor entered the call, so its record is written
             * (before it entered): wait briefly for it to be visible; past
             * 5 ms the monitor compares it later. */
            c->stats.sync_waits++;
            wait_pred_locked(c, g, seq, coh_now_ns() + 5 * 1000 * 1000ull);
        }
    }
    cohort_status st = COHORT_OK;
    if (atomic_load_explicit(&c->failed, memory_order_relaxed))
        st = failed_status(c);
    call_unlock(c);
    return st;
}

cohort_status cohort_check_wait(cohort_check *c, cohort_check_group *g, uint64_t seq,
                                int timeout_ms)
{
    if (!c || !g)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_wait: checker or group missing");
    int rv = coh_chk_lock(c);
    uint64_t dl = coh_deadline_ns(timeout_ms);
    if (g->pred_ring && pending(g, seq))
        drain_aux(c, g->pred, g->pred_aux, 0); /* timeout 0: compare what is there */
    while (pending(g, seq) && !atomic_load_explicit(&c->failed, memory_order_relaxed) &&
           coh_ms_left(dl) > 0 && !c->stop) {
        if (g->pred_ring) {
            /* A same-host predecessor about to enter the same call (the
             * torch wrapper waits here before a synchronising backend
             * call): woken by its record, not by the monitor's tick. */
            uint64_t until = coh_now_ns() + 1000ull * 1000000ull;
            wait_pred_locked(c, g, seq, until < dl ? until : dl);
            continue;
        }
        cv_wait_2ms(c);
    }
    cohort_status st = COHORT_OK;
    if (atomic_load_explicit(&c->failed, memory_order_relaxed))
        st = failed_status(c);
    else if (pending(g, seq))
        st = COHORT_ERR_TIMEOUT;
    coh_chk_unlock(c, rv);
    return st;
}

/* A blocking point-to-point wait: recorded in the private wait slot only;
 * the monitor publishes it once it lasts (coh_chk_wait_publish). The fast
 * path - a send or receive that completes within a monitor tick - takes no
 * lock, reads no clock and writes nothing another process reads. */
static _Thread_local struct {
    cohort_check *c;
    uint64_t v; /* the slot's ver this thread holds */
} tl_wait;

#define RLX memory_order_relaxed

void cohort_check_wait_begin(cohort_check *c, cohort_check_group *grp, int peer, int tag,
                             int is_send, const char *op, const char *file, int line,
                             const void *pc)
{
    if (!c)
        return;
    if (tl_wait.c == c)
        cohort_check_wait_end(c); /* a second begin replaces the first */
    chk_wslot *s = &c->wslot;
    uint64_t v = atomic_load_explicit(&s->ver, RLX);
    if ((v & 3) != CHK_WS_IDLE ||
        !atomic_compare_exchange_strong_explicit(&s->ver, &v, v + CHK_WS_FILLING,
                                                 memory_order_acquire, RLX))
        return; /* another thread's wait holds the slot: this one is not tracked */
    atomic_thread_fence(memory_order_release); /* ver odd before the fields change */
    atomic_store_explicit(&s->peer, peer, RLX);
    atomic_store_explicit(&s->tag, tag, RLX);
    atomic_store_explicit(&s->is_send, is_send != 0, RLX);
    atomic_store_explicit(&s->gid, grp ? grp->id : 0, RLX);
    atomic_store_explicit(&s->pc, (uintptr_t)pc, RLX);
    atomic_store_explicit(&s->op, (uintptr_t)op, RLX);
    if (file) {
        char buf[CHK_SITE_MAX] = {0};
        put_str(buf, coh_site_base(file), sizeof buf);
        for (size_t i = 0; i < CHK_SITE_MAX / 8; i++) {
            uint64_t w;
            memcpy(&w, buf + 8 * i, 8);
            atomic_store_explicit(&s->file[i], w, RLX);
            if (memchr(buf + 8 * i, 0, 8))
                break;
        }
        atomic_store_explicit(&s->line, line, RLX);
    } else {
        atomic_store_explicit(&s->file[0], 0, RLX);
    }
    tl_wait.c = c;
    tl_wait.v = v + CHK_WS_WAITING;
    atomic_store_explicit(&s->ver, v + CHK_WS_WAITING, memory_order_release);
}

void cohort_check_wait_end(cohort_check *c)
{
    if (!c || tl_wait.c != c)
        return;
    uint64_t v = tl_wait.v;
    tl_wait.c = NULL;
    chk_wslot *s = &c->wslot;
    if (atomic_load_explicit(&s->ver, RLX) != v)
        return; /* not this checker's wait (only the holder moves ver on) */
    /* seq_cst store, then seq_cst load of pub, against the monitor's store
     * of pub, then load of ver: one of the two sees the other. */
    atomic_store_explicit(&s->ver, v - CHK_WS_WAITING + 4, memory_order_seq_cst);
    if (atomic_load_explicit(&s->pub, memory_order_seq_cst) != v)
        return; /* never published: nothing to retract */
    int rv = coh_chk_lock(c);
    if (atomic_load_explicit(&s->pub, RLX) == v) {
        atomic_store_explicit(&s->pub, 0, RLX);
        if (c->pos.state == CHK_POS_WAIT && c->pos.episode == c->wpub_episode) {
            c->pos.state = CHK_POS_IDLE;
            c->pos.episode++;
            coh_chk_pos_write(c, 0);
        }
    }
    coh_chk_unlock(c, rv);
}

/* The monitor, each tick: publishes a wait it saw at the previous tick
 * too (it has lasted at least a tick; its start is when first seen).
 * Inside the tick's revoke: c->mu directly. */
void coh_chk_wait_publish(cohort_check *c)
{
    chk_wslot *s = &c->wslot;
    uint64_t v = atomic_load_explicit(&s->ver, memory_order_acquire);
    if ((v & 3) != CHK_WS_WAITING) {
        c->wseen_ver = 0;
        return;
    }
    if (c->wseen_ver != v) {
        c->wseen_ver = v;
        c->wseen_ns = coh_now_ns();
        return;
    }
    if (atomic_load_explicit(&s->pub, RLX) == v)
        return; /* already published */
    /* Read the fields; they belong to wait v if ver is still v below. */
    int32_t peer = atomic_load_explicit(&s->peer, RLX), tag = atomic_load_explicit(&s->tag, RLX);
    int32_t is_send = atomic_load_explicit(&s->is_send, RLX);
    int32_t line = atomic_load_explicit(&s->line, RLX);
    uint64_t gid = atomic_load_explicit(&s->gid, RLX);
    const void *pc = (const void *)atomic_load_explicit(&s->pc, RLX);
    const char *op = (const char *)atomic_load_explicit(&s->op, RLX);
    char file[CHK_SITE_MAX];
    for (size_t i = 0; i < CHK_SITE_MAX / 8; i++) {
        uint64_t w = atomic_load_explicit(&s->file[i], RLX);
        memcpy(file + 8 * i, &w, 8);
        if (memchr(file + 8 * i, 0, 8))
            break;
    }
    file[CHK_SITE_MAX - 1] = 0;
    atomic_thread_fence(memory_order_acquire); /* the reads above before ver's re-read */
    pthread_mutex_lock(&c->mu);
    atomic_store_explicit(&s->pub, v, memory_order_seq_cst);
    if (atomic_load_explicit(&s->ver, memory_order_seq_cst) != v) {
        atomic_store_explicit(&s->pub, 0, RLX); /* ended meanwhile */
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->pos.state = CHK_POS_WAIT;
    c->pos.peer = peer;
    c->pos.tag = tag;
    c->pos.is_send = is_send;
    c->pos.gid = gid;
    c->pos.seq = 0;
    c->pos.start_ns = c->wseen_ns;
    copy_op(c->pos.op, op);
    c->pos_op_lit = NULL; /* not known to be a literal: copied again next time */
    c->pos_last_dirty = 1;
    if (file[0])
        snprintf(c->pos.site, sizeof c->pos.site, "%s:%d", file, line);
    else
        c->pos.site[0] = 0;
    c->pos_site_line = -1;
    c->pos_pc = pc;
    c->pos_site_done = file[0] != 0;
    c->stall_warned = 0;
    c->pos.episode++;
    c->wpub_episode = c->pos.episode;
    coh_chk_pos_write(c, CHK_PW_OP | CHK_PW_SITE);
    pthread_mutex_unlock(&c->mu);
}

#undef RLX

const char *cohort_check_last_error(const cohort_check *c)
{
    static _Thread_local char copy[COH_ERRLEN];
    copy[0] = 0;
    if (!c || !atomic_load(&((cohort_check *)c)->failed))
        return copy;
    /* The monitor rewrites err with the global report: hand out a copy. */
    int rv = coh_chk_lock((cohort_check *)c);
    memcpy(copy, c->err, sizeof copy);
    coh_chk_unlock((cohort_check *)c, rv);
    return copy;
}

cohort_status cohort_check_status(const cohort_check *c)
{
    if (!c || !atomic_load(&((cohort_check *)c)->failed))
        return COHORT_OK;
    return c->status;
}

void cohort_check_get_stats(const cohort_check *c, cohort_check_stats *out)
{
    if (!c || !out)
        return;
    int rv = coh_chk_lock((cohort_check *)c);
    *out = c->stats;
    coh_chk_unlock((cohort_check *)c, rv);
}

static int any_pending(const cohort_check *c)
{
    for (const cohort_check_group *g = c->groups; g; g = g->next)
        if (g->mine.n)
            return 1;
    return 0;
}

cohort_status cohort_check_close(cohort_check *c, int timeout_ms)
{
    if (!c)
        return coh_err_set(NULL, COHORT_ERR_INVALID, "cohort_check_close: checker is NULL");
    if (timeout_ms < 0)
        timeout_ms = c->o.timeout_ms;
    uint64_t dl = coh_deadline_ns(timeout_ms);
    int rv;
    /* 1. This rank's comparisons (the monitor fetches store records). */
    rv = coh_chk_lock(c);
    while (any_pending(c) && !atomic_load(&c->failed) && coh_ms_left(dl) > 0) {
        if (c->shm)
            for (int i = 0; i < c->world->local_size; i++)
                if (c->world->local_ranks[i] != c->rank)
                    coh_chk_drain_locked(c, c->world->local_ranks[i], 0);
        if (!any_pending(c))
            break;
        cv_wait_2ms(c);
    }
    if (atomic_load(&c->failed)) {
        cohort_status st = failed_status(c);
        coh_chk_unlock(c, rv);
        return st;
    }
    int pend = any_pending(c);
    coh_chk_unlock(c, rv);
    if (pend)
        return coh_err_set(NULL, COHORT_ERR_TIMEOUT,
                           "cohort_check_close: this rank's last calls were not compared within "
                           "%d ms (a neighbour did not make them)",
                           timeout_ms);
    if (!c->st_user || c->size == 1) {
        atomic_store(&c->closed, 1);
        return COHORT_OK;
    }
    /* 2. Meet the others, or learn of a failure. The calling threads are
     * done, so the user-side connection is free. */
    int64_t v = 0;
    cohort_status st = cohort_store_add(c->st_user, "closed", 6, 1, &v);
    if (st == COHORT_OK && v == c->size)
        st = cohort_store_set(c->st_user, "closed/all", 10, "1", 1);
    const void *keys[2] = {"closed/all", "fail"};
    size_t kl[2] = {10, 4};
    while (st == COHORT_OK) {
        if (atomic_load(&c->failed))
            break;
        int which = -1;
        int slice = COH_MIN(100, coh_ms_left(dl));
        cohort_status ws = cohort_store_wait_any(c->st_user, keys, kl, 2, slice, &which);
        if (ws == COHORT_OK && which == 0) {
            atomic_store(&c->closed, 1);
            return COHORT_OK;
        }
        if (ws == COHORT_OK && which == 1) {
            /* A failure posted: the monitor turns it into the report. */
            uint64_t d2 = coh_deadline_ns(FAIL_SEEN_MS);
            while (!atomic_load(&c->failed) && coh_ms_left(d2) > 0) {
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
            break;
        }
        if (ws != COHORT_OK && ws != COHORT_ERR_TIMEOUT)
            st = ws;
        else if (coh_ms_left(dl) <= 0)
            st = COHORT_ERR_TIMEOUT;
    }
    rv = coh_chk_lock(c);
    if (atomic_load(&c->failed)) {
        st = failed_status(c);
        coh_chk_unlock(c, rv);
        return st;
    }
    coh_chk_unlock(c, rv);
    if (st == COHORT_ERR_TIMEOUT)
        return coh_err_set(NULL, st,
                           "cohort_check_close: %lld of %d ranks arrived within %d ms",
                           (long long)v, c->size, timeout_ms);
    return coh_err_set(NULL, st, "cohort_check_close: store: %s",
                       cohort_store_last_error(c->st_user));
}

cohort_status cohort_check_fail_local(cohort_check *c, cohort_check_group *grp, const char *text)
{
    if (!c || !grp || !text)
        return coh_err_set(NULL, COHORT_ERR_INVALID,
                           "cohort_check_fail_local: checker, group or text missing");
    int rv = coh_chk_lock(c);
    char *value = coh_malloc(COH_ERRLEN + 80);
    char *msg = coh_malloc(COH_ERRLEN);
    if (value && msg) {
        snprintf(msg, COH_ERRLEN, "%s: %s", grp->name, text);
        snprintf(value, COH_ERRLEN + 80, "R %d %s", COHORT_CHECK_MISMATCH, msg);
        coh_chk_fail(c, COHORT_CHECK_MISMATCH, COHORT_ERR_CONTRACT, value, msg);
    } else {
        coh_chk_fail(c, COHORT_CHECK_ABORTED, COHORT_ERR_NOMEM, "R 5 checker: out of memory",
                     "checker: out of memory");
    }
    coh_free(value), coh_free(msg);
    cohort_status st = failed_status(c);
    coh_chk_unlock(c, rv);
    return st;
}
