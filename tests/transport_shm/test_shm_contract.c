/*
 * test_shm_contract.c - mismatched calls across local ranks: every rank
 * must fail the call with COHORT_ERR_CONTRACT naming the differing field,
 * quickly (no hang), with its receive buffer untouched, and every later
 * call must fail with COHORT_ERR_ABORTED. Rank 1 of 3 is the odd one out.
 * Includes same-byte-size mismatches (2048 float16 vs 1024 float32; SUM vs
 * MAX) that a byte-counting transport could not see, and multi-piece calls.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "support/support.h"
#include "group/monitor.h"
#include "transport/shm/shm_seg.h"

#define N 3
#define SENT 0x5A

typedef struct mcase {
    const char *name;
    const char *field; /* substring the error must contain */
    const char *env;
} mcase;

enum {
    M_COUNT, M_DTYPE_SAME_BYTES, M_REDOP, M_OP, M_BCAST_ROOT, M_COUNT_LARGE, M_REDOP_LARGE,
    M_REDUCE_ROOT, M_GATHER_ROOT, M_SCATTER_ROOT, M_AG_COUNT, M_RS_COUNT, M_A2A_COUNT,
    M_BARRIER_VS_AR, M_SEQ, M_TAG, M_TAG_BIG, M_AR8_COUNT, M_AR8_REDOP, M_AR8_VS_AR64,
    M_AR8_VS_BCAST, M_N
};

static const mcase cases[M_N] = {
    [M_COUNT] = {"all_reduce count 1024 vs 512", "count differs", NULL},
    [M_DTYPE_SAME_BYTES] = {"all_reduce 2048 float16 vs 1024 float32", "dtype differs", NULL},
    [M_REDOP] = {"all_reduce sum vs max", "reduce op differs", NULL},
    /* synchronising: with the ring, rank 1 (a reader) may fail before rank 2
     * enters its call (test_shm_ring.c's "root and a third rank call
     * all_reduce"; a call begun after the failure: the "late" cases below) */
    [M_OP] = {"all_reduce vs broadcast", "op differs", "COHORT_SHM_RING_SLOTS=0"},
    /* the synchronising path (with the ring the believed roots return at
     * once and learn it at their next call: test_shm_ring.c) */
    [M_BCAST_ROOT] = {"broadcast root 0 vs 1", "root differs", "COHORT_SHM_RING_SLOTS=0"},
    [M_COUNT_LARGE] = {"multi-piece all_reduce count", "count differs", "COHORT_SHM_SLOT_BYTES=4096"},
    [M_REDOP_LARGE] = {"multi-piece all_reduce sum vs max", "reduce op differs",
                       "COHORT_SHM_SLOT_BYTES=4096"},
    /* the synchronising paths of the rooted ops (with the ring, small
     * ones let leaves and roots return early and learn it at their next
     * call: test_shm_ring.c's rooted cases) */
    [M_REDUCE_ROOT] = {"reduce root 0 vs 1", "root differs", "COHORT_SHM_RING_SLOTS=0"},
    [M_GATHER_ROOT] = {"gather root 2 vs 1", "root differs",
                       "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_RING_SLOTS=0"},
    [M_SCATTER_ROOT] = {"scatter root 0 vs 1", "root differs",
                        "COHORT_SHM_SLOT_BYTES=256;COHORT_SHM_RING_SLOTS=0"},
    [M_AG_COUNT] = {"all_gather count", "count differs", "COHORT_SHM_SLOT_BYTES=256"},
    [M_RS_COUNT] = {"reduce_scatter count", "count differs", "COHORT_SHM_SLOT_BYTES=256"},
    [M_A2A_COUNT] = {"all_to_all count", "count differs", "COHORT_SHM_SLOT_BYTES=256"},
    [M_BARRIER_VS_AR] = {"barrier vs all_reduce of 0", "op differs", NULL},
    /* the first-phase fingerprint packs seq, count, op, dtype, reduce op,
     * root and tags below 255 exactly; larger tags are decided by the full
     * header */
    [M_SEQ] = {"all_reduce with a skipped call", "sequence number differs", NULL},
    [M_TAG] = {"barrier tag 7 vs 8", "tag differs", NULL},
    [M_TAG_BIG] = {"barrier tag 300 vs 301", "tag differs", NULL},
    /* the small all_reduce's record exchange (<= 32 B: fingerprint and data
     * in one ring record line), pinned on; against itself, against the
     * buffer path (64 B) and against a ring broadcast at the same phase */
    [M_AR8_COUNT] = {"all_reduce 8 B vs 16 B (records)", "count differs", "COHORT_SHM_AR_INLINE=1"},
    [M_AR8_REDOP] = {"all_reduce 8 B sum vs max (records)", "reduce op differs",
                     "COHORT_SHM_AR_INLINE=1"},
    [M_AR8_VS_AR64] = {"all_reduce 8 B (record) vs 64 B (buffer)", "count differs",
                       "COHORT_SHM_AR_INLINE=1"},
    [M_AR8_VS_BCAST] = {"all_reduce 8 B (record) vs ring broadcast 8 B", "op differs",
                        "COHORT_SHM_AR_INLINE=1"},
};

static int odd;

static cohort_status run(cohort_group *g, int k, unsigned char *send, unsigned char *recv,
                         size_t *recv_len)
{
    coh_shm *s = g->shm;
    int r = g->rank;
    coh_call c;
    switch (k) {
    case M_COUNT: {
        size_t n = odd ? 512 : 1024;
        *recv_len = n * 4;
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, n);
        return coh_shm_all_reduce(s, &c, send, recv, n);
    }
    case M_DTYPE_SAME_BYTES: {
        int dt = odd ? COHORT_FLOAT32 : COHORT_FLOAT16;
        size_t n = odd ? 1024 : 2048;
        *recv_len = 4096;
        c = th_call(g, COH_COLL_ALL_REDUCE, dt, COHORT_SUM, -1, n);
        return coh_shm_all_reduce(s, &c, send, recv, n);
    }
    case M_REDOP:
    case M_REDOP_LARGE: {
        size_t n = k == M_REDOP ? 256 : 20000;
        *recv_len = n * 4;
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, odd ? COHORT_MAX : COHORT_SUM, -1, n);
        return coh_shm_all_reduce(s, &c, send, recv, n);
    }
    case M_OP:
        *recv_len = 1024;
        if (odd) {
            memset(recv, SENT, 1024);
            c = th_call(g, COH_COLL_BROADCAST, COHORT_FLOAT32, -1, 0, 256);
            return coh_shm_broadcast(s, &c, recv, 1024, 0);
        }
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 256);
        return coh_shm_all_reduce(s, &c, send, recv, 256);
    case M_BCAST_ROOT: {
        int root = odd ? 1 : 0;
        /* the (believed) roots hold data; real receivers must stay untouched */
        *recv_len = r == root ? 0 : 4096;
        unsigned char *b = r == root ? send : recv;
        c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, root, 4096);
        return coh_shm_broadcast(s, &c, b, 4096, root);
    }
    case M_COUNT_LARGE: {
        size_t n = odd ? 30000 : 40000;
        *recv_len = n * 4;
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, n);
        return coh_shm_all_reduce(s, &c, send, recv, n);
    }
    case M_REDUCE_ROOT: {
        int root = odd ? 1 : 0;
        *recv_len = 4096;
        c = th_call(g, COH_COLL_REDUCE, COHORT_INT32, COHORT_SUM, root, 1024);
        return coh_shm_reduce(s, &c, send, recv, 1024, root);
    }
    case M_GATHER_ROOT: {
        int root = odd ? 1 : 2;
        *recv_len = 3 * 1000;
        c = th_call(g, COH_COLL_GATHER, COHORT_UINT8, -1, root, 1000);
        return coh_shm_gather(s, &c, send, recv, 1000, root);
    }
    case M_SCATTER_ROOT: {
        int root = odd ? 1 : 0;
        *recv_len = r == root ? 0 : 1000;
        c = th_call(g, COH_COLL_SCATTER, COHORT_UINT8, -1, root, 1000);
        return coh_shm_scatter(s, &c, send, r == root ? send + 3000 : recv, 1000, root);
    }
    case M_AG_COUNT: {
        size_t n = odd ? 100 : 120;
        *recv_len = 3 * n * 4;
        c = th_call(g, COH_COLL_ALL_GATHER, COHORT_INT32, -1, -1, n);
        return coh_shm_all_gather(s, &c, send, recv, n * 4);
    }
    case M_RS_COUNT: {
        size_t n = odd ? 100 : 120;
        *recv_len = n * 4;
        c = th_call(g, COH_COLL_REDUCE_SCATTER, COHORT_INT32, COHORT_SUM, -1, n);
        return coh_shm_reduce_scatter(s, &c, send, recv, n);
    }
    case M_A2A_COUNT: {
        size_t n = odd ? 100 : 120;
        *recv_len = 3 * n * 4;
        c = th_call(g, COH_COLL_ALL_TO_ALL, COHORT_INT32, -1, -1, n);
        return coh_shm_all_to_all(s, &c, send, recv, n * 4);
    }
    case M_SEQ:
        *recv_len = 64;
        if (odd)
            g->seq++; /* as if it had made one call more */
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 16);
        return coh_shm_all_reduce(s, &c, send, recv, 16);
    case M_AR8_COUNT:
    case M_AR8_REDOP:
    case M_AR8_VS_AR64: {
        size_t n = !odd ? 2 : k == M_AR8_COUNT ? 4 : k == M_AR8_VS_AR64 ? 16 : 2;
        *recv_len = n * 4;
        int op = odd && k == M_AR8_REDOP ? COHORT_MAX : COHORT_SUM;
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, op, -1, n);
        return coh_shm_all_reduce(s, &c, send, recv, n);
    }
    case M_AR8_VS_BCAST:
        *recv_len = 8;
        if (odd) {
            c = th_call(g, COH_COLL_BROADCAST, COHORT_FLOAT32, -1, 0, 2);
            return coh_shm_broadcast(s, &c, recv, 8, 0);
        }
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 2);
        return coh_shm_all_reduce(s, &c, send, recv, 2);
    case M_TAG:
    case M_TAG_BIG:
        *recv_len = 0;
        c = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
        c.tag = (k == M_TAG ? 7 : 300) + odd;
        return coh_shm_barrier(s, &c);
    default:
        *recv_len = 0;
        if (odd) {
            c = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
            return coh_shm_barrier(s, &c);
        }
        c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0);
        return coh_shm_all_reduce(s, &c, send, recv, 0);
    }
}

/* The data-moving cases again with single copy for every size: the
 * fingerprints are compared in the phase that exchanges the buffers'
 * addresses, so a mismatch still moves no byte (into any rank's buffer:
 * every rank's receive buffer is checked untouched). */
static const int sc_cases[] = {M_BCAST_ROOT, M_GATHER_ROOT, M_SCATTER_ROOT, M_AG_COUNT,
                               M_A2A_COUNT};
#define SC_ENV "COHORT_SHM_SINGLE_COPY=on;COHORT_SHM_SINGLE_COPY_BYTES=1"

/* A group of N ranks past one good call, so that the mismatch is not the
 * first; and the mismatched call's buffers, recv filled with SENT so that a
 * byte written into it shows. */
static cohort_group *warm_group(int rank, unsigned char **send, unsigned char **recv)
{
    cohort_status st;
    cohort_group *g = th_group(rank, N, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    float x = 1, y = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    RANK_PASS(coh_shm_all_reduce(g->shm, &c, &x, &y, 1), NULL);
    RANK_CHECK(y == N, "warm-up all_reduce gave %f", y);
    size_t cap = 1 << 20;
    *send = malloc(cap);
    *recv = malloc(cap);
    RANK_CHECK(*send && *recv, "malloc");
    memset(*recv, SENT, cap);
    return g;
}

/* What every party to mismatched call k must see, however it reached the
 * call: st is COHORT_ERR_CONTRACT with a message naming the field, the first
 * rl bytes of recv are untouched, and the next call fails with
 * COHORT_ERR_ABORTED. Rank report_rank prints the report; then all is freed. */
static int expect_failed(cohort_group *g, int k, cohort_status st, const char *label,
                         unsigned char *send, unsigned char *recv, size_t rl, int report_rank)
{
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "%s: got %s (%s)", label, cohort_status_name(st),
               th_errmsg(g));
    RANK_CHECK(strstr(th_errmsg(g), cases[k].field), "%s: message does not name the %s: %s",
               label, cases[k].field, th_errmsg(g));
    for (size_t i = 0; i < rl; i++)
        RANK_CHECK(recv[i] == SENT, "%s: receive buffer byte %zu written", label, i);
    float x = 1, y = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    st = coh_shm_all_reduce(g->shm, &c, &x, &y, 1);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "%s: call after the mismatch: %s", label,
               cohort_status_name(st));
    if (g->rank == report_rank)
        fprintf(stderr, "[%s] %s\n", label, th_errmsg(g));
    free(send);
    free(recv);
    th_group_free(g);
    th_done(N);
    return 0;
}

/* One test: N ranks of fn(arg), extra_env env. */
static void run_ranks(int (*fn)(int, void *), void *arg, const char *env)
{
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = N, .deadline_ms = 30000, .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, fn, arg, &r);
    cht_assert_all_ok(&r);
}

static int rank_main(int rank, void *arg)
{
    int k = *(int *)arg & 0xff, sc = *(int *)arg >> 8;
    odd = rank == 1;
    unsigned char *send, *recv;
    cohort_group *g = warm_group(rank, &send, &recv);
    RANK_CHECK(!sc || g->shm->cma, "single copy not in use: %s", g->shm->copy_info);
    /* equal tags past the packed range pass (the full header decides) */
    coh_call c = th_call(g, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0);
    c.tag = 1000;
    RANK_PASS(coh_shm_barrier(g->shm, &c), NULL);

    for (size_t i = 0; i < 1 << 20; i++)
        send[i] = (unsigned char)(i * 7 + rank);
    size_t rl = 0;
    uint64_t t0 = coh_now_ns();
    cohort_status st = run(g, k, send, recv, &rl);
    double ms = (coh_now_ns() - t0) / 1e6;
    /* the product's promise (2 s) x CK_TIMEOUT_MULTIPLIER in slow builds */
    RANK_CHECK(ms < 2000 * cht_time_scale(), "%s: took %.0f ms to fail (%s)", cases[k].name, ms,
               cohort_status_name(st));
    return expect_failed(g, k, st, cases[k].name, send, recv, rl, 0);
}

START_TEST(mismatch)
{
    int k = _i;
    run_ranks(rank_main, &k, cases[k].env);
}
END_TEST

START_TEST(mismatch_single_copy)
{
    int k = sc_cases[_i], arg = k | 1 << 8;
    char env[256];
    snprintf(env, sizeof env, "%s%s%s", SC_ENV, cases[k].env ? ";" : "",
             cases[k].env ? cases[k].env : "");
    run_ranks(rank_main, &arg, env);
}
END_TEST

/* ---- the oversubscribed barrier (one leader) ----
 *
 * When ranks outnumber the cpus the barrier has a leader, the last
 * broadcast's root: it publishes once every other rank arrived, the others
 * wait for it alone (shm_coll.c coh_shm_barrier). A barrier mismatched with
 * another call must still fail on every rank: all N ranks pinned to one
 * cpu, a broadcast from rank `lead` just before the mismatched call (a
 * barrier right after a broadcast has the leader; variant 0: the odd rank 1
 * leads, 1: rank 0 leads, the odd one does not). */
static const int over_cases[] = {M_BARRIER_VS_AR, M_TAG, M_TAG_BIG};

static int over_main(int rank, void *arg)
{
    int k = *(int *)arg & 0xff, lead = *(int *)arg >> 8 ? 0 : 1;
    odd = rank == 1;
    cpu_set_t cs;
    RANK_CHECK(sched_getaffinity(0, sizeof cs, &cs) == 0, "sched_getaffinity");
    int cpu = 0;
    while (cpu < CPU_SETSIZE && !CPU_ISSET(cpu, &cs))
        cpu++;
    CPU_ZERO(&cs);
    CPU_SET(cpu, &cs);
    RANK_CHECK(sched_setaffinity(0, sizeof cs, &cs) == 0, "sched_setaffinity(cpu %d)", cpu);
    unsigned char *send, *recv;
    cohort_group *g = warm_group(rank, &send, &recv);
    RANK_CHECK(g->shm->oversub, "%d ranks on one cpu but not oversubscribed", N);
    unsigned char b[8] = {0};
    if (rank == lead)
        memset(b, 0x5a, sizeof b);
    coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, lead, sizeof b);
    RANK_PASS(coh_shm_broadcast(g->shm, &c, b, sizeof b, lead), NULL);
    /* the mismatched call right after the broadcast: a barrier there has
     * the leader */
    RANK_CHECK(b[7] == 0x5a && g->shm->bar_lead == lead && g->shm->bar_ph == g->shm->phase + 1,
               "broadcast: byte %#x, leader %d", b[7], g->shm->bar_lead);
    size_t rl = 0;
    uint64_t t0 = coh_now_ns();
    cohort_status st = run(g, k, send, recv, &rl);
    double ms = (coh_now_ns() - t0) / 1e6;
    RANK_CHECK(ms < 2000 * cht_time_scale(), "%s: took %.0f ms to fail (%s)", cases[k].name, ms,
               cohort_status_name(st));
    char label[128];
    snprintf(label, sizeof label, "oversubscribed %s, leader %d", cases[k].name, lead);
    return expect_failed(g, k, st, label, send, recv, rl, 0);
}

START_TEST(mismatch_oversub)
{
    int n = (int)(sizeof over_cases / sizeof *over_cases);
    int k = over_cases[_i % n], arg = k | (_i / n) << 8;
    run_ranks(over_main, &arg, cases[k].env);
}
END_TEST

/* ---- a rank that reaches the mismatched call after the others failed it ----
 *
 * Ranks 0 and 1 disagree (rank 1 is the odd one) and detect it between
 * themselves; rank 2, which agrees with rank 0, makes the call only once
 * the failure is known on its host. It is a party to the mismatched call:
 * it must get COHORT_ERR_CONTRACT with the report, like the ranks that
 * detected it, and its next call COHORT_ERR_ABORTED. Rank 2 waits for the
 * failure itself, not for a fixed time, so the test takes the late path on
 * any machine: variant 0 until its store monitor has poisoned its group
 * (the call begins on a poisoned group), variant 1 with its monitor
 * stopped, until the segment's abort word is set (the call adopts it). */
static const int late_cases[] = {M_COUNT, M_REDOP, M_OP, M_TAG_BIG};

static int late_main(int rank, void *arg)
{
    int k = *(int *)arg & 0xff, variant = *(int *)arg >> 8;
    odd = rank == 1;
    unsigned char *send, *recv;
    cohort_group *g = warm_group(rank, &send, &recv);
    memset(send, rank, 1 << 20);
    if (rank == 2) {
        if (variant == 1)
            coh_monitor_stop(g);
        double bound = 10000 * cht_time_scale();
        uint64_t t0 = coh_now_ns();
        for (;;) {
            int seen = variant == 0 ? coh_group_poisoned(g) != 0
                                    : atomic_load(&g->shm->hdr->abort_status) != 0;
            if (seen)
                break;
            RANK_CHECK((coh_now_ns() - t0) / 1e6 < bound,
                       "%s: ranks 0 and 1 did not fail the call without rank 2 in %.0f ms",
                       cases[k].name, bound);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
        RANK_CHECK(variant == 1 || atomic_load(&g->shm->hdr->abort_status) != 0,
                   "poisoned but the segment's abort word is not set");
    }
    size_t rl = 0;
    cohort_status st = run(g, k, send, recv, &rl);
    char label[128];
    snprintf(label, sizeof label, "late %s, variant %d", cases[k].name, variant);
    return expect_failed(g, k, st, label, send, recv, rl, 2);
}

START_TEST(late_rank)
{
    int n = (int)(sizeof late_cases / sizeof *late_cases);
    int k = late_cases[_i % n], arg = k | (_i / n) << 8;
    run_ranks(late_main, &arg, cases[k].env);
}
END_TEST

/* ---- the small all_reduce's record exchange (shm_coll.c ar_small) ----
 *
 * COHORT_SHM_AR_INLINE per rank: variant 0 every rank on, 1 rank 1 off (it
 * runs the buffer path while its peers read records: they must still agree
 * and reduce right), 2 every rank off. Calls of 0-32 B take the records
 * where on (the rank's record of the call's phase carries its fingerprint;
 * never where off), 36 and 64 B never; every result is checked. Then one
 * mismatched call (2 vs 4 floats), reported by every rank. */
static int ar_rec_main(int rank, void *arg)
{
    int variant = *(int *)arg;
    int on = variant == 0 || (variant == 1 && rank != 1);
    setenv("COHORT_SHM_AR_INLINE", on ? "1" : "0", 1);
    odd = rank == 1;
    unsigned char *send, *recv;
    cohort_group *g = warm_group(rank, &send, &recv);
    coh_shm *s = g->shm;
    RANK_CHECK(s->ar_inl == on && s->ring_k, "ar_inl %d (want %d), ring_k %zu", s->ar_inl, on,
               s->ring_k);
    static const size_t counts[] = {0, 1, 2, 3, 4, 8, 9, 16};
    for (int it = 0; it < 600; it++) {
        size_t n = counts[it % 8];
        int32_t in[16], out[16];
        for (size_t i = 0; i < 16; i++)
            in[i] = (int32_t)(it * 31 + rank * 7 + (int)i), out[i] = -1;
        coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_INT32, COHORT_SUM, -1, n);
        RANK_PASS(coh_shm_all_reduce(s, &c, in, out, n), NULL);
        for (size_t i = 0; i < n; i++)
            RANK_CHECK(out[i] == 3 * (it * 31 + (int)i) + 21, "call %d, count %zu: out[%zu] = %d",
                       it, n, i, out[i]);
        uint64_t f[3];
        int has = shm_ring_fp(s, s->me, s->phase, f) && f[0] == c.seq && f[1] == n;
        RANK_CHECK(has == (on && n * 4 <= SHM_RING_INLINE),
                   "call %d, %zu B: record of phase %u %s", it, n * 4, s->phase,
                   has ? "written" : "missing");
    }
    size_t n = odd ? 4 : 2;
    for (size_t i = 0; i < n * 4; i++)
        send[i] = (unsigned char)(i + 1);
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, n);
    cohort_status st = coh_shm_all_reduce(s, &c, send, recv, n);
    char label[64];
    snprintf(label, sizeof label, "records, variant %d", variant);
    return expect_failed(g, M_AR8_COUNT, st, label, send, recv, n * 4, 0);
}

START_TEST(ar_records)
{
    int v = _i;
    run_ranks(ar_rec_main, &v, NULL);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("shm_contract");
    TCase *tc = tcase_create("mismatch");
    tcase_add_loop_test(tc, mismatch, 0, M_N);
    tcase_add_loop_test(tc, mismatch_single_copy, 0, (int)(sizeof sc_cases / sizeof *sc_cases));
    tcase_add_loop_test(tc, mismatch_oversub, 0, 2 * (int)(sizeof over_cases / sizeof *over_cases));
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    TCase *late = tcase_create("late");
    tcase_add_loop_test(late, late_rank, 0, 2 * (int)(sizeof late_cases / sizeof *late_cases));
    tcase_set_timeout(late, 60);
    suite_add_tcase(s, late);
    TCase *rec = tcase_create("ar_records");
    tcase_add_loop_test(rec, ar_records, 0, 3);
    tcase_set_timeout(rec, 60);
    suite_add_tcase(s, rec);
    return s;
}

COH_TEST_MAIN(make_suite)
