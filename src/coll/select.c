/*
 * select.c - choosing an algorithm (table walk, COHORT_ALGO_<OP> override)
 * and running a call: the size-1 and zero-count shortcuts, send/recv, and
 * the AVG division after the reduction for an algorithm that does not
 * divide itself (avg_in_fold).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coll/coll_int.h"

#define DEFAULT_CHUNK_BYTES ((size_t)256 << 10)

/* One name table for the whole library: src/contract/names.c. */
const char *coh_coll_label(int coll) { return coh_coll_name(coll); }

/* "COHORT_ALGO_ALL_REDUCE" for COH_COLL_ALL_REDUCE, built once: selection
 * runs on every call. A group made by cohort_init reads the variables once
 * (coh_coll_read_env); harness groups read them per call, so the simulation
 * tests can change them between calls. */
#define N_COLL_NAMES 32
_Static_assert(N_COLL_NAMES == sizeof(((cohort_group *)0)->algo_env) / sizeof(char *),
               "one COHORT_ALGO_* slot per collective kind");
static char env_names[N_COLL_NAMES][48];
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static void build_env_names(void)
{
    for (int coll = 0; coll < N_COLL_NAMES; coll++) {
        char *out = env_names[coll];
        int n = snprintf(out, sizeof env_names[coll], "COHORT_ALGO_%s", coh_coll_label(coll));
        for (int i = 12; i < n && (size_t)i < sizeof env_names[coll]; i++)
            if (out[i] >= 'a' && out[i] <= 'z')
                out[i] = (char)(out[i] - 'a' + 'A');
    }
}

static const char *env_name(int coll)
{
    pthread_once(&env_once, build_env_names);
    return coll >= 0 && coll < N_COLL_NAMES ? env_names[coll] : "COHORT_ALGO_?";
}

const char *coh_coll_env_name(int coll) { return env_name(coll); }

/* Pointers to the table rows, built once (the table is constant). */
static const coh_algo *algo_ptrs[64];
static pthread_once_t algo_once = PTHREAD_ONCE_INIT;

static void build_algo_ptrs(void)
{
    size_t i = 0;
    for (; coh_algo_table[i].name && i + 1 < COH_ARRAY_LEN(algo_ptrs); i++)
        algo_ptrs[i] = &coh_algo_table[i];
    algo_ptrs[i] = NULL;
}

const coh_algo *const *coh_coll_algos(void)
{
    pthread_once(&algo_once, build_algo_ptrs);
    return algo_ptrs;
}

size_t coh_coll_chunk_bytes(void)
{
    long v = 0;
    int r = coh_env_int("COHORT_CHUNK_BYTES", &v);
    if (r == 0)
        return DEFAULT_CHUNK_BYTES;
    if (r < 0 || v < 1) {
        static int warned;
        if (!__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
            coh_warn("COHORT_CHUNK_BYTES=%s is not a positive integer; using %zu",
                     coh_env_str("COHORT_CHUNK_BYTES") ? coh_env_str("COHORT_CHUNK_BYTES") : "",
                     DEFAULT_CHUNK_BYTES);
        return DEFAULT_CHUNK_BYTES;
    }
    return (size_t)v;
}

size_t coh_coll_chunk(const cohort_group *g)
{
    return g && g->algo_env_read && g->chunk_bytes ? g->chunk_bytes : coh_coll_chunk_bytes();
}

static int chunk_env_set(void)
{
    long v = 0;
    return coh_env_int("COHORT_CHUNK_BYTES", &v) > 0 && v >= 1;
}

int coh_coll_chunk_set(const cohort_group *g)
{
    return g && g->algo_env_read && g->chunk_bytes ? g->chunk_set : chunk_env_set();
}

/* Appends the names of the algorithms for coll (only those usable here if
 * g is given) to out as "a, b, c". */
static void list_names(const cohort_group *g, const coh_call *c, char *out, size_t len)
{
    size_t pos = 0;
    out[0] = 0;
    for (const coh_algo *a = coh_algo_table; a->name; a++) {
        if (a->coll != c->coll || (g && !a->supports(g, c)))
            continue;
        int w = snprintf(out + pos, len - pos, "%s%s", pos ? ", " : "", a->name);
        if (w < 0 || (size_t)w >= len - pos)
            break;
        pos += (size_t)w;
    }
    if (!out[0])
        snprintf(out, len, "none");
}

void coh_coll_read_env(cohort_group *g)
{
    for (int coll = 0; coll < N_COLL_NAMES; coll++) {
        const char *v = coh_env_str(env_name(coll));
        if (v) {
            size_t n = strlen(v);
            g->algo_env[coll] = coh_malloc(n + 1);
            if (g->algo_env[coll])
                memcpy(g->algo_env[coll], v, n + 1);
        }
    }
    g->chunk_bytes = coh_coll_chunk_bytes();
    g->chunk_set = chunk_env_set();
    g->bar_lead_mode = coh_bar_lead_env();
    g->algo_env_read = 1;
}

int coh_coll_check_algo_env(const char *var, const char *value, char *msg, size_t len)
{
    pthread_once(&env_once, build_env_names);
    for (int coll = 0; coll < N_COLL_NAMES; coll++) {
        if (strcmp(env_names[coll], var))
            continue;
        coh_call c;
        memset(&c, 0, sizeof c);
        c.coll = (uint8_t)coll;
        char names[256];
        list_names(NULL, &c, names, sizeof names);
        if (!strcmp(names, "none"))
            break; /* not a collective with algorithms (COHORT_ALGO_NONE) */
        if (!strcmp(value, "auto"))
            return 0;
        for (const coh_algo *a = coh_algo_table; a->name; a++)
            if (a->coll == coll && !strcmp(a->name, value))
                return 0;
        snprintf(msg, len, "%s=%s is not an algorithm for %s; choices: %s, auto", var, value,
                 coh_coll_label(coll), names);
        return -1;
    }
    /* Not one of the collectives: list the variables that exist. */
    size_t pos = (size_t)snprintf(msg, len, "%s is not a cohort variable; the algorithm "
                                            "variables are",
                                  var);
    for (int coll = 0; coll < N_COLL_NAMES && pos < len; coll++) {
        int has = 0;
        for (const coh_algo *a = coh_algo_table; a->name && !has; a++)
            has = a->coll == coll;
        if (has) {
            int w = snprintf(msg + pos, len - pos, " %s", env_names[coll]);
            if (w < 0)
                break;
            pos += (size_t)w;
        }
    }
    return -1;
}

void coh_coll_free_env(cohort_group *g)
{
    for (int coll = 0; coll < N_COLL_NAMES; coll++) {
        coh_free(g->algo_env[coll]);
        g->algo_env[coll] = NULL;
    }
    g->algo_env_read = 0;
    g->chunk_bytes = 0;
    g->chunk_set = 0;
}

const char *coh_coll_forced(const cohort_group *g, int coll)
{
    const char *v = g && g->algo_env_read ? (coll < N_COLL_NAMES ? g->algo_env[coll] : NULL)
                                          : coh_env_str(env_name(coll));
    return v && strcmp(v, "auto") != 0 ? v : NULL;
}

const coh_algo *coh_coll_select(const cohort_group *g, const coh_call *c, cohort_status *err)
{
    char names[256];
    const char *var = env_name(c->coll);
    const char *forced = g && g->algo_env_read
                             ? (c->coll < N_COLL_NAMES ? g->algo_env[c->coll] : NULL)
                             : coh_env_str(var);
    if (err)
        *err = COHORT_OK;
    if (forced && strcmp(forced, "auto") != 0) {
        for (const coh_algo *a = coh_algo_table; a->name; a++) {
            if (a->coll != c->coll || strcmp(a->name, forced) != 0)
                continue;
            if (a->supports(g, c))
                return a;
            list_names(g, c, names, sizeof names);
            coh_err_set(NULL, COHORT_ERR_INVALID,
                        "%s=%s cannot run on this group (%d ranks on %d hosts%s); usable here: "
                        "%s, auto",
                        var, forced, g->size, g->n_hosts,
                        g->force_transport == 2 ? ", COHORT_TRANSPORT=tcp"
                        : g->shm                ? ", shared memory"
                                                : "",
                        names);
            if (err)
                *err = COHORT_ERR_INVALID;
            return NULL;
        }
        list_names(NULL, c, names, sizeof names);
        coh_err_set(NULL, COHORT_ERR_INVALID, "%s=%s is not an algorithm for %s; choices: %s, auto",
                    var, forced, coh_coll_label(c->coll), names);
        if (err)
            *err = COHORT_ERR_INVALID;
        return NULL;
    }
    /* First preferred, else first usable: both depend only on the contract
     * and the topology, so every rank of the group picks the same. */
    for (const coh_algo *a = coh_algo_table; a->name; a++)
        if (a->coll == c->coll && a->supports(g, c) && a->preferred(g, c))
            return a;
    for (const coh_algo *a = coh_algo_table; a->name; a++)
        if (a->coll == c->coll && a->supports(g, c))
            return a;
    coh_err_set(NULL, COHORT_ERR_UNSUPPORTED, "no algorithm can run %s on this group",
                coh_coll_label(c->coll));
    if (err)
        *err = COHORT_ERR_UNSUPPORTED;
    return NULL;
}

/* coh_coll_select through the group's memo (group.h: sel_memo). Exact,
 * not a heuristic: with the COHORT_ALGO_* values fixed at group creation
 * (algo_env_read) the table walk reads nothing of the call but its coll,
 * count, dtype and reduce op (algos.c: the predicates), and of the group
 * only what creation fixed plus the transports, all of which are the key.
 * Harness groups (variables read per call) always walk the table. A
 * failed selection is not remembered: it is reported the same way again.
 * Runs on the thread that runs the group's calls, one call at a time
 * (engine.c), so the memo needs no lock. */
static inline uint32_t memo_key(const coh_call *c)
{
    return (uint32_t)c->dtype | (uint32_t)(uint8_t)c->redop << 8;
}

/* The memo's choice for c, or NULL: inlined into coh_coll_run, whose hit
 * path then makes no call (the miss below is out of line). */
static inline const coh_algo *memo_hit(const cohort_group *g, const coh_call *c)
{
    if (!g->algo_env_read || c->coll >= N_COLL_NAMES)
        return NULL;
    const struct coh_sel_memo *m = &g->sel_memo[c->coll];
    if (m->algo && m->key == memo_key(c) && m->count == c->count &&
        m->shm == (const void *)g->shm && m->net == (const void *)g->net)
        return m->algo;
    return NULL;
}

static const coh_algo *memo_miss(cohort_group *g, const coh_call *c, cohort_status *err)
{
    const coh_algo *a = coh_coll_select(g, c, err);
    if (a && g->algo_env_read && c->coll < N_COLL_NAMES) {
        struct coh_sel_memo *m = &g->sel_memo[c->coll];
        m->algo = a;
        m->key = memo_key(c);
        m->count = c->count;
        m->shm = g->shm;
        m->net = g->net;
    }
    return a;
}

const coh_algo *coh_coll_select_memo(cohort_group *g, const coh_call *c, cohort_status *err)
{
    const coh_algo *a = memo_hit(g, c);
    if (a) {
        if (err)
            *err = COHORT_OK;
        return a;
    }
    return memo_miss(g, c, err);
}

/* A call this rank rejects before any communication: recorded as the
 * group's last error without poisoning it (the API layer validates first;
 * this is the backstop for internal callers). */
static cohort_status bad_call(cohort_group *g, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static cohort_status bad_call(cohort_group *g, const char *fmt, ...)
{
    char msg[COH_ERRLEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&g->err_mu);
    coh_err_set(&g->last, COHORT_ERR_INVALID, "%s", msg);
    pthread_mutex_unlock(&g->err_mu);
    return COHORT_ERR_INVALID;
}

static int is_reducing(int coll)
{
    return coll == COH_COLL_ALL_REDUCE || coll == COH_COLL_REDUCE ||
           coll == COH_COLL_REDUCE_SCATTER;
}

/* One rank: every collective is a local copy (or nothing). */
static void run_alone(const coh_call *c, size_t bytes)
{
    switch (c->coll) {
    case COH_COLL_ALL_REDUCE:
    case COH_COLL_REDUCE:
    case COH_COLL_ALL_GATHER:
    case COH_COLL_GATHER:
    case COH_COLL_SCATTER:
    case COH_COLL_REDUCE_SCATTER:
    case COH_COLL_ALL_TO_ALL:
        if (bytes && c->send != c->recv && c->recv)
            memmove(c->recv, c->send, bytes);
        break;
    default:
        break; /* broadcast, barrier: nothing to move */
    }
}

/* The direct lane for c's kind (group.h, lane_mask), decided once per
 * kind by its first call to get an algorithm: open where that is the shm
 * row of a lane kind (algos.c, coh_algo_lane), which for these kinds
 * depends only on what creation fixed (the topology, COHORT_ALGO_*), and
 * nothing the lane skips can apply to the group (COHORT_DEBUG=sync or
 * buffers; harness groups, which read COHORT_ALGO_* per call). */
static COH_COLD void lane_decide(cohort_group *g, const coh_call *c, const coh_algo *a)
{
    if (c->coll >= 32)
        return;
    g->lane_seen |= 1u << c->coll;
    if (g->algo_env_read && !g->debug_sync && !g->debug_buffers && g->shm &&
        coh_topo_single_host_shm(g) && coh_algo_lane(a)) {
        g->lane_mask |= 1u << c->coll;
        g->lane_shm = g->shm;
    }
}

/* The selected algorithm for a collective the checks let through. */
static inline cohort_status run_selected(cohort_group *g, coh_call *c)
{
    /* Select even for count 0, so that a bad COHORT_ALGO_* is reported the
     * same way whatever the count. */
    cohort_status st;
    const coh_algo *a = memo_hit(g, c);
    if (!a && !(a = memo_miss(g, c, &st)))
        return coh_group_fail(g, st, "%s", coh_tls_err()->msg);
    if (__builtin_expect(!(g->lane_seen >> (c->coll & 31) & 1), 0))
        lane_decide(g, c, a);
    if (c->count == 0 && c->coll != COH_COLL_BARRIER)
        /* Nothing to move, but the contract must still meet every rank's:
         * a barrier-shaped exchange carrying this call's header. */
        return coh_coll_sync(g, c);
    st = a->run(g, c);
    if (st != COHORT_OK)
        return st;
    if (c->coll == COH_COLL_BROADCAST) {
        /* a barrier with the next seq directly follows it (algos.c,
         * coh_bar_leader); every rank records the same seq and root */
        g->bar_seq = c->seq + 1;
        g->bar_root = c->root;
    } else if (c->coll == COH_COLL_BARRIER) {
        g->bcf_seq = c->seq + 1; /* algos.c, coh_bc_after_barrier_flat */
    }
    /* every reducing row divides an AVG itself since session 31; a row
     * added without avg_in_fold still gets the one division here */
    if (c->redop == COHORT_AVG && !(a->avg_in_fold && coh_avg_folds(c->dtype, c->redop))) {
        if (c->coll == COH_COLL_ALL_REDUCE || (c->coll == COH_COLL_REDUCE && g->rank == c->root))
            coh_reduce_finish(c->recv, c->count, (cohort_dtype)c->dtype, COHORT_AVG, g->size);
        else if (c->coll == COH_COLL_REDUCE_SCATTER)
            coh_reduce_finish(c->recv, c->count, (cohort_dtype)c->dtype, COHORT_AVG, g->size);
    }
    return COHORT_OK;
}

/* Every case coh_coll_run's common test leaves out: a failed group, a
 * call built inside cohort (no argok), one rank, the group-internal calls;
 * the whole sequence of checks, then the selected algorithm as below. */
static __attribute__((noinline)) cohort_status run_other(cohort_group *g, coh_call *c)
{
    /* The call that failed (a rank that reaches a mismatched call after
     * the others detected it) returns the cause; later calls ABORTED. */
    if (coh_group_poisoned(g))
        return coh_shm_entry_failed(g->shm, g, c);
    /* The dtype, the reduce op and the peer, checked by the API for this
     * call already (c->argok: check_args, or its site memo for the same
     * arguments): here the backstop for calls built inside cohort. */
    if (!c->argok) {
        if (c->coll != COH_COLL_BARRIER && coh_dtype_size(c->dtype) == 0)
            return bad_call(g, "%s #%llu: invalid dtype %d", coh_coll_label(c->coll),
                            (unsigned long long)c->seq, c->dtype);
        if (is_reducing(c->coll) && !coh_op_valid((cohort_dtype)c->dtype, (cohort_op)c->redop))
            return bad_call(g, "%s #%llu: reduction %s on %s", coh_coll_label(c->coll),
                            (unsigned long long)c->seq, cohort_op_name((cohort_op)c->redop),
                            cohort_dtype_name((cohort_dtype)c->dtype));
    }

    if (c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV) {
        if (!c->argok && (c->root < 0 || c->root >= g->size || c->root == g->rank))
            return bad_call(g, "%s: peer %d is not another rank of this group of %d",
                            coh_coll_label(c->coll), c->root, g->size);
        return coh_p2p(g, c);
    }
    if (g->size == 1) {
        run_alone(c, (size_t)c->count * coh_dtype_size(c->dtype));
        return COHORT_OK;
    }
    /* Group-internal calls (split, new_group) carry no payload: they only
     * keep every rank's seq and contract in step. */
    if (c->coll == COH_COLL_INTERNAL)
        return coh_coll_sync(g, c);
    return run_selected(g, c);
}

cohort_status coh_coll_run(cohort_group *g, coh_call *c)
{
    /* The common call (a live group of several ranks, arguments checked by
     * the API) goes straight to p2p or the selected algorithm; anything
     * else takes run_other's full sequence, which ends the same way. */
    if (!coh_group_poisoned(g) && c->argok && g->size > 1) {
        if (c->coll == COH_COLL_SEND || c->coll == COH_COLL_RECV)
            return coh_p2p(g, c);
        if (c->coll != COH_COLL_INTERNAL)
            return run_selected(g, c);
    }
    return run_other(g, c);
}
