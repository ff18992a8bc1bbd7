/*
 * test_coll_barlead.c - the TCP barrier that directly follows a broadcast,
 * led by that broadcast's root when the ranks outnumber the cpus
 * (coll/algos.c coh_bar_leader, coll/rd.c coh_lead_barrier;
 * docs/performance.md "TCP 4 ranks OSU style: small broadcasts (session 11)"):
 *   - the rules (coh_bar_lead_pref, coh_bc_after_barrier_flat_pref) and the
 *     choices on a real group: a barrier right after a broadcast led by its
 *     root, the dissemination barrier otherwise; a broadcast of <= 16 KiB
 *     right after a barrier flat, the tree otherwise;
 *   - OSU loops (a broadcast, a barrier) at 3, 4 and 8 ranks over tcp with
 *     the rule's own choice when ranks > cpus (forced with
 *     COHORT_TCP_OVERSUB=on on a machine with more cpus): the data is right
 *     and the choices are made on every rank alike (a rank that differed
 *     would fail the contract: the step numbers differ);
 *   - mismatches under the led barrier: a rank in a broadcast or an
 *     all_reduce where the others are in the barrier (the leader or not),
 *     broadcasts with different roots before it: COHORT_ERR_CONTRACT (or
 *     ABORTED carrying it) on every rank, quickly, never a hang;
 *   - 2 ranks on one machine (coh_bar_ack_from): in the barrier right
 *     after a broadcast the broadcast's receiver flushes the ACK it owes
 *     the root (one ack_now per such barrier, counted by the transport),
 *     the root never, no rank in any other barrier; a mismatch there is
 *     still a contract error on both ranks;
 *   - across machines (coh_machines_oversub): 4 ranks made to look like 2
 *     machines (each rank in its own UTS and mount namespace, with the
 *     machine's hostname and a bind-mounted /sys/devices/system/cpu/online
 *     giving the machine's cpu count; root only, skipped otherwise): the
 *     rule's auto choice is on every rank when any machine has more ranks
 *     than cpus, off when none has, and the data and the mismatches as above.
 * Real processes over tcp (COHORT_TRANSPORT=tcp).
 */
#include <check.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "core/group.h"
#include "group/group_internal.h"
#include "support/support.h"

/* ---- the rule ---- */

START_TEST(test_rule)
{
    /* auto: some machine's ranks outnumber its cpus (g->oversub), 3 ranks or more */
    ck_assert(coh_bar_lead_pref(-1, 4, 1));
    ck_assert(coh_bar_lead_pref(-1, 3, 1));
    ck_assert(coh_bar_lead_pref(-1, 8, 1));
    ck_assert(!coh_bar_lead_pref(-1, 4, 0)); /* a cpu per rank on every machine */
    ck_assert(!coh_bar_lead_pref(-1, 2, 1)); /* 2 ranks: one round is better */
    /* forced */
    ck_assert(coh_bar_lead_pref(1, 4, 0));
    ck_assert(!coh_bar_lead_pref(1, 2, 1));
    ck_assert(!coh_bar_lead_pref(0, 4, 1));
    /* the broadcast after a barrier: flat up to 16 KiB under the same rule */
    ck_assert(coh_bc_after_barrier_flat_pref(-1, 4, 1, 8));
    ck_assert(coh_bc_after_barrier_flat_pref(-1, 4, 1, 16384));
    ck_assert(!coh_bc_after_barrier_flat_pref(-1, 4, 1, 16385));
    ck_assert(!coh_bc_after_barrier_flat_pref(-1, 4, 0, 8));
    ck_assert(!coh_bc_after_barrier_flat_pref(-1, 2, 1, 8));
    ck_assert(!coh_bc_after_barrier_flat_pref(0, 4, 1, 8));
    ck_assert(coh_bc_after_barrier_flat_pref(1, 4, 0, 8));
    /* the scatter after a barrier: linear up to 16 KiB a block (the tree's range), same rule */
    ck_assert(coh_sc_after_barrier_linear_pref(-1, 4, 1, 4));
    ck_assert(coh_sc_after_barrier_linear_pref(-1, 3, 1, 4096));
    ck_assert(coh_sc_after_barrier_linear_pref(-1, 4, 1, 16384));
    ck_assert(!coh_sc_after_barrier_linear_pref(-1, 4, 1, 16385));
    ck_assert(!coh_sc_after_barrier_linear_pref(-1, 4, 0, 4));
    ck_assert(!coh_sc_after_barrier_linear_pref(-1, 2, 1, 4));
    ck_assert(!coh_sc_after_barrier_linear_pref(0, 4, 1, 4));
    ck_assert(coh_sc_after_barrier_linear_pref(1, 4, 0, 4));
    /* the ACK flushed after the barrier: 2 ranks on one machine only */
    ck_assert(coh_bar_ack_pref(2, 2));
    ck_assert(!coh_bar_ack_pref(2, 1)); /* two machines */
    ck_assert(!coh_bar_ack_pref(3, 3));
    ck_assert(!coh_bar_ack_pref(4, 4));
    ck_assert(!coh_bar_ack_pref(1, 1));
}
END_TEST

/* The machine rule the rendezvous applies to every rank's record. */
#define ID(h, ns) h "/boot-1/netns:" #ns
START_TEST(test_machines)
{
    /* one machine, 4 ranks: 2 cpus yes, 4 no, unknown no */
    const char one[4][256] = {ID("a", 1), ID("a", 1), ID("a", 1), ID("a", 1)};
    ck_assert(coh_machines_oversub(4, one, (const long[]){2, 2, 2, 2}, NULL));
    ck_assert(!coh_machines_oversub(4, one, (const long[]){4, 4, 4, 4}, NULL));
    ck_assert(!coh_machines_oversub(4, one, (const long[]){0, 0, 0, 0}, NULL));
    /* a record without the count (an older library) makes its machine unknown */
    ck_assert(!coh_machines_oversub(4, one, (const long[]){2, 0, 2, 2}, NULL));
    /* ranks disagreeing on a machine's count: the least counts */
    ck_assert(coh_machines_oversub(4, one, (const long[]){8, 3, 8, 8}, NULL));
    /* namespace "hosts" of one machine share its cpus (netns4osu: 2 + 2 on 2) */
    const char ns[4][256] = {ID("a", 1), ID("a", 1), ID("a", 2), ID("a", 2)};
    ck_assert(coh_machines_oversub(4, ns, (const long[]){2, 2, 2, 2}, NULL));
    ck_assert(!coh_machines_oversub(4, ns, (const long[]){4, 4, 4, 4}, NULL));
    /* two machines: any one oversubscribed is enough, wherever its ranks are */
    const char two[4][256] = {ID("a", 1), ID("b", 1), ID("a", 1), ID("b", 1)};
    ck_assert(coh_machines_oversub(4, two, (const long[]){1, 64, 1, 64}, NULL));
    ck_assert(coh_machines_oversub(4, two, (const long[]){64, 1, 64, 1}, NULL));
    ck_assert(!coh_machines_oversub(4, two, (const long[]){2, 2, 2, 2}, NULL));
    ck_assert(!coh_machines_oversub(4, two, (const long[]){2, 0, 2, 1}, NULL)); /* b unknown */
    /* "a" is not the machine "ab" */
    const char pre[3][256] = {ID("a", 1), ID("ab", 1), ID("ab", 1)};
    ck_assert(!coh_machines_oversub(3, pre, (const long[]){1, 2, 2}, NULL));
    ck_assert(coh_machines_oversub(3, pre, (const long[]){1, 1, 1}, NULL));
    ck_assert(!coh_machines_oversub(1, one, (const long[]){1}, NULL));
    /* with every rank's cpu set: the union of a machine's sets counts,
     * at most its online cpus */
    const long on64[4] = {64, 64, 64, 64};
    const char *const bound0[4] = {"0", "0", "0", "0"};     /* taskset -c 0 */
    const char *const apart[4] = {"0", "1", "2", "3"};      /* --bind-to core */
    const char *const cg2[4] = {"4-5", "4-5", "4-5", "4-5"}; /* a 2-cpu cgroup */
    const char *const pairs[4] = {"0,32", "1,33", "0,32", "1,33"};
    ck_assert(coh_machines_oversub(4, one, on64, bound0));
    ck_assert(!coh_machines_oversub(4, one, on64, apart));
    ck_assert(coh_machines_oversub(4, one, on64, cg2));
    ck_assert(!coh_machines_oversub(4, one, on64, pairs));
    ck_assert_int_eq(coh_machine_cpus(4, one, on64, pairs, 2, NULL), 4);
    int k = 0;
    ck_assert_int_eq(coh_machine_cpus(4, one, on64, cg2, 0, &k), 2);
    ck_assert_int_eq(k, 4);
    /* the least online count caps the union (a faked or shrunk machine) */
    ck_assert_int_eq(coh_machine_cpus(4, one, (const long[]){64, 3, 64, 64}, apart, 0, NULL), 3);
    ck_assert(coh_machines_oversub(4, one, (const long[]){64, 3, 64, 64}, apart));
    /* sets without counts: the union alone */
    ck_assert_int_eq(coh_machine_cpus(4, one, (const long[]){0, 0, 0, 0}, apart, 0, NULL), 4);
    /* per machine: a's ranks share cpu 0, b's have 0-63 */
    const char *const mixed[4] = {"0", "0-63", "0", "0-63"};
    ck_assert(coh_machines_oversub(4, two, on64, mixed));
    ck_assert_int_eq(coh_machine_cpus(4, two, on64, mixed, 0, NULL), 1);
    ck_assert_int_eq(coh_machine_cpus(4, two, on64, mixed, 1, NULL), 64);
    const char *const mixed_ok[4] = {"0", "0-63", "1", "0-63"};
    ck_assert(!coh_machines_oversub(4, two, on64, mixed_ok));
    /* namespace hosts of one machine: one union (2 + 2 ranks on cpus 0-1) */
    const char *const nsb[4] = {"0", "1", "0", "1"};
    ck_assert(coh_machines_oversub(4, ns, on64, nsb));
    ck_assert_int_eq(coh_machine_cpus(4, ns, on64, nsb, 3, NULL), 2);
    /* no sets (some record has none): the online counts, as before */
    ck_assert_int_eq(coh_machine_cpus(4, one, (const long[]){8, 3, 8, 8}, NULL, 0, NULL), 3);
    ck_assert_int_eq(coh_machine_cpus(4, one, (const long[]){2, 0, 2, 2}, NULL, 0, NULL), 0);
}
END_TEST

/* ---- OSU loops: data, choice, who leaves first ---- */

#define ITERS 384
#define SLOTS 32
typedef struct shared {
    _Atomic int tk[SLOTS];
    _Atomic int firsts, strays;
} shared;
static shared *sh;

static void setup_shared(void)
{
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof *sh);
}

static unsigned char pat(int i, int root, size_t j) { return (unsigned char)(i * 13 + root * 5 + j); }

/* The leader the next barrier would have (the next call's seq). */
static int next_leader(cohort_group *g)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = COH_COLL_BARRIER;
    c.seq = g->seq + 1;
    return coh_bar_leader(g, &c);
}

/* The next call (the next seq) as coll of bytes (a scatter: a block). */
static coh_call next_call(const cohort_group *g, int coll, size_t bytes)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = (uint8_t)coll;
    c.seq = g->seq + 1;
    c.dtype = COHORT_UINT8;
    c.count = bytes;
    return c;
}
/* Whether a broadcast of bytes as the next call would go flat. */
static int next_flat(cohort_group *g, size_t bytes)
{
    coh_call c = next_call(g, COH_COLL_BROADCAST, bytes);
    return coh_bc_after_barrier_flat(g, &c);
}
/* Whether a scatter of block bytes a rank as the next call would go linear. */
static int next_sc_linear(cohort_group *g, size_t block)
{
    coh_call c = next_call(g, COH_COLL_SCATTER, block);
    return coh_sc_after_barrier_linear(g, &c);
}

typedef struct loop_arg {
    int n;
    size_t bytes;
    int tree; /* COHORT_ALGO_BROADCAST=tree: never flat */
} loop_arg;

static int rank_loop(int rank, void *arg)
{
    const loop_arg *a = arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static unsigned char buf[65536];
    float x = 1, y = 0;
    for (int i = 0; i < ITERS; i++) {
        int root = (i / 32) % a->n;
        for (size_t j = 0; j < a->bytes; j++)
            buf[j] = rank == root ? pat(i, root, j) : 0;
        RANK_PASS(cohort_broadcast(g, buf, a->bytes, COHORT_UINT8, root), g);
        for (size_t j = 0; j < a->bytes; j++)
            RANK_CHECK(buf[j] == pat(i, root, j), "n=%d call %d root %d byte %zu: %#x", a->n, i,
                       root, j, buf[j]);
        RANK_CHECK(next_leader(g) == root, "n=%d call %d: the barrier after a broadcast from %d "
                   "is led by %d", a->n, i, root, next_leader(g));
        RANK_CHECK(!next_flat(g, a->bytes), "n=%d call %d: a broadcast after a broadcast goes flat",
                   a->n, i);
        RANK_PASS(cohort_barrier(g), g);
        RANK_CHECK(next_leader(g) == -1, "a barrier after a barrier is led by %d", next_leader(g));
        RANK_CHECK(next_flat(g, a->bytes) == (!a->tree && a->bytes <= 16384),
                   "n=%d call %d: a %zu B broadcast after a barrier: flat %d", a->n, i, a->bytes,
                   next_flat(g, a->bytes));
        /* iteration i's n tickets are all taken before i + SLOTS starts */
        if (atomic_fetch_add(&sh->tk[i % SLOTS], 1) % a->n == 0) {
            atomic_fetch_add(&sh->firsts, 1);
            if (rank != root)
                atomic_fetch_add(&sh->strays, 1);
        }
        if (i % 64 == 63) {
            /* other calls between: a barrier that does not follow a
             * broadcast is the dissemination barrier */
            RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_FLOAT32, COHORT_SUM), g);
            RANK_CHECK(y == (float)a->n, "all_reduce: %g", (double)y);
            RANK_CHECK(next_leader(g) == -1, "a barrier after an all_reduce is led by %d",
                       next_leader(g));
            RANK_PASS(cohort_barrier(g), g);
            /* a small scatter right after a barrier goes linear (every
             * loop case oversubscribes); after anything else, the tree */
            RANK_CHECK(next_sc_linear(g, 16) && next_sc_linear(g, 16384) &&
                           !next_sc_linear(g, 16385),
                       "n=%d call %d: a scatter after a barrier: linear %d/%d/%d", a->n, i,
                       next_sc_linear(g, 16), next_sc_linear(g, 16384), next_sc_linear(g, 16385));
            static unsigned char sb[16 * 8], rb[16];
            for (int q = 0; q < a->n; q++)
                for (size_t j = 0; j < 16; j++)
                    sb[(size_t)q * 16 + j] = pat(i, q, j);
            memset(rb, 0, sizeof rb);
            RANK_PASS(cohort_scatter(g, sb, rb, 16, COHORT_UINT8, 1), g);
            for (size_t j = 0; j < 16; j++)
                RANK_CHECK(rb[j] == pat(i, rank, j), "n=%d call %d: scattered byte %zu: %#x",
                           a->n, i, j, rb[j]);
            RANK_CHECK(!next_sc_linear(g, 16), "a scatter after a scatter goes linear");
            RANK_PASS(cohort_barrier(g), g);
            /* a zero-count broadcast moves nothing (a sync): no leader */
            RANK_PASS(cohort_broadcast(g, buf, 0, COHORT_UINT8, 1), g);
            RANK_CHECK(next_leader(g) == -1, "after a zero-count broadcast: led by %d",
                       next_leader(g));
            RANK_PASS(cohort_barrier(g), g);
        }
    }
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 0) {
        int f = atomic_load(&sh->firsts), s = atomic_load(&sh->strays);
        fprintf(stderr, "n=%d %zu B: a non-root left the barrier first in %d of %d iterations\n",
                a->n, a->bytes, s, f);
        RANK_CHECK(f == ITERS, "%d first tickets for %d iterations", f, ITERS);
        /* Not asserted: on tcp the leader returns once its n - 1
         * releases are written, and a released rank woken on the leader's
         * cpu preempts it, so who takes the first ticket depends on the
         * load (measured, 2 cpus, led: 0-5 of 384 at 4 ranks idle, 118-300
         * while benchmarks ran; the dissemination barrier 278-384). What
         * the led barrier guarantees is that the root has nothing left to
         * wait for when any rank leaves: the choice is asserted above. */
    }
    cohort_finalize(g);
    return 0;
}

static const loop_arg loops[] = {{3, 8, 0},     {4, 8, 0}, {4, 16384, 0},
                                 {8, 8, 0},     {4, 65536, 0},
                                 {4, 8, 1} /* a forced algorithm stays */};

START_TEST(test_osu_loop)
{
    const loop_arg *a = &loops[_i];
    setup_shared();
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char env[128];
    /* the rule's own choice where it applies; forced on a larger machine */
    snprintf(env, sizeof env, "COHORT_TIMEOUT=60;COHORT_CHUNK_BYTES=16384%s%s",
             a->n > cpus ? "" : ";COHORT_TCP_OVERSUB=on",
             a->tree ? ";COHORT_ALGO_BROADCAST=tree" : "");
    cht_opts o = {.nranks = a->n, .deadline_ms = 120000, .transport = "tcp", .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, rank_loop, (void *)a, &r);
    munmap(sh, sizeof *sh);
    for (int i = 0; i < r.n; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "n=%d: rank %d: %s %d", a->n, i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* ---- 2 ranks: the ACK owed after the barrier ---- */

/* The rank whose ACK the next call, a barrier, would flush. */
static int next_ack_from(cohort_group *g)
{
    coh_call c;
    memset(&c, 0, sizeof c);
    c.coll = COH_COLL_BARRIER;
    c.seq = g->seq + 1;
    return coh_bar_ack_from(g, &c);
}

static long acks_now(cohort_group *g)
{
    coh_net_tx_stats st;
    coh_net_get_tx_stats(g->net, &st);
    return st.acks_now;
}

/* A barrier, checking how many ACKs this rank flushed in it. */
static int barrier_acks(cohort_group *g, int rank, int i, long want)
{
    long a0 = acks_now(g);
    RANK_PASS(cohort_barrier(g), g);
    long d = acks_now(g) - a0;
    RANK_CHECK(d == want, "rank %d call %d: %ld ACKs flushed in the barrier, want %ld", rank, i, d,
               want);
    return 0;
}

static int rank_ack(int rank, void *arg)
{
    size_t bytes = *(const size_t *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static unsigned char buf[4096];
    float x = 1, y = 0;
    long flushed = 0;
    for (int i = 0; i < 96; i++) {
        int root = (i / 16) % 2;
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == root ? pat(i, root, j) : 0;
        RANK_PASS(cohort_broadcast(g, buf, bytes, COHORT_UINT8, root), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, root, j), "call %d root %d byte %zu: %#x", i, root, j,
                       buf[j]);
        int want = rank == root ? -1 : root;
        RANK_CHECK(next_ack_from(g) == want, "rank %d call %d: the barrier after a broadcast "
                   "from %d flushes the ACK of %d", rank, i, root, next_ack_from(g));
        if (barrier_acks(g, rank, i, rank != root))
            return 1;
        flushed += rank != root;
        /* a barrier after a barrier, after an all_reduce, after a
         * zero-count broadcast (a sync, nothing moved): none */
        RANK_CHECK(next_ack_from(g) == -1, "after a barrier: %d", next_ack_from(g));
        if (i % 8 == 7) {
            if (barrier_acks(g, rank, i, 0))
                return 1;
            RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_FLOAT32, COHORT_SUM), g);
            RANK_CHECK(y == 2.0f, "all_reduce: %g", (double)y);
            RANK_CHECK(next_ack_from(g) == -1, "after an all_reduce: %d", next_ack_from(g));
            if (barrier_acks(g, rank, i, 0))
                return 1;
            RANK_PASS(cohort_broadcast(g, buf, 0, COHORT_UINT8, 1 - root), g);
            RANK_CHECK(next_ack_from(g) == -1, "after a zero-count broadcast: %d",
                       next_ack_from(g));
            if (barrier_acks(g, rank, i, 0))
                return 1;
        }
    }
    RANK_CHECK(acks_now(g) == flushed, "rank %d: %ld ACKs flushed, want %ld", rank, acks_now(g),
               flushed);
    cohort_finalize(g);
    return 0;
}

static const size_t ack_sizes[] = {8, 4096};

START_TEST(test_ack_loop)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=30"};
    cht_result r;
    cht_run_ranks(&o, rank_ack, (void *)&ack_sizes[_i], &r);
    for (int i = 0; i < r.n; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%zu B: rank %d: %s %d", ack_sizes[_i], i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* The barrier that flushes the ACK against another call at its seq: the
 * broadcast's receiver in the barrier, the root in a broadcast (0), or the
 * root in the barrier, the receiver in a broadcast (1) or an all_reduce (2). */
static int rank_ack_mismatch(int rank, void *arg)
{
    int what = *(const int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float a[4], b[4];
    double t0 = cht_now_ms();
    for (int i = 0; i < 4; i++) {
        RANK_PASS(cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0), g);
        RANK_PASS(cohort_barrier(g), g);
    }
    RANK_PASS(cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0), g);
    RANK_CHECK(next_ack_from(g) == (rank == 1 ? 0 : -1), "rank %d: ack from %d", rank,
               next_ack_from(g));
    int odd = what == 0 ? 0 : 1; /* the rank not in the barrier */
    cohort_status st;
    if (rank != odd)
        st = cohort_barrier(g);
    else if (what == 2)
        st = cohort_all_reduce(g, a, b, 2, COHORT_FLOAT32, COHORT_SUM);
    else
        st = cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0);
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    double dt = cht_now_ms() - t0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cohort_last_error(g));
    RANK_CHECK(st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED, "case %d: rank %d: %s: %s",
               what, rank, cohort_status_name(st), msg);
    RANK_CHECK(strstr(msg, "op"), "case %d: rank %d: the message does not name the op: %s", what,
               rank, msg);
    RANK_CHECK(dt < 10000, "case %d: rank %d took %.0f ms", what, rank, dt);
    cohort_finalize(g);
    return 0;
}

static const int ack_mcases[] = {0, 1, 2};

START_TEST(test_ack_mismatch)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_ack_mismatch, (void *)&ack_mcases[_i], &r);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "case %d: rank %d: %s %d", _i, i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* Two ranks that each take themselves for the broadcast's root: each
 * sends and is done, and meets the other's message in its next call (the
 * barrier; case 1: an all_reduce). The report names the root at the
 * broadcast, on both ranks - not "sequence number differs" at the call
 * after it, which session 39's proof saw once under ASan in mcases' last
 * case: a rank that adopted a peer's local report before the global one
 * (built from every rank's history) replaced it. Here the global report
 * arrives on both ranks, so this checks the end result; the local report
 * of such a message (tcp/xfer.c past_mismatch) names the root since
 * session 39 too, which the race above needs and no test reaches. */
static int rank_self_root(int rank, void *arg)
{
    int what = *(const int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float a[4], b[4];
    RANK_PASS(cohort_barrier(g), g);
    cohort_status st = cohort_broadcast(g, a, 2, COHORT_FLOAT32, rank);
    if (st == COHORT_OK)
        st = what ? cohort_all_reduce(g, a, b, 2, COHORT_FLOAT32, COHORT_SUM) : cohort_barrier(g);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cohort_last_error(g));
    RANK_CHECK(st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED, "case %d: rank %d: %s: %s",
               what, rank, cohort_status_name(st), msg);
    RANK_CHECK(strstr(msg, "broadcast #2") && strstr(msg, "root differs") &&
                   !strstr(msg, "sequence number"),
               "case %d: rank %d: the message does not name the root at broadcast #2: %s", what,
               rank, msg);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_self_root)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_self_root, (void *)&ack_mcases[_i], &r);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "case %d: rank %d: %s %d", _i, i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* ---- mismatches under the led barrier ---- */

enum { N = 4, LEAD = 1 };
typedef struct mcase {
    const char *name;
    int odd;          /* the rank whose call differs */
    int what;         /* in the barrier: 0 broadcast (root LEAD), 1 all_reduce, 2 broadcast
                       * root 3; 3: a barrier in the broadcast before it */
    int bad_root;     /* the broadcast before the barrier: odd rank names root 2 */
    const char *field; /* the message names it */
} mcase;

static const mcase mcases[] = {
    {"broadcast vs barrier, a non-leader", 3, 0, 0, "op"},
    {"broadcast vs barrier, the leader", LEAD, 0, 0, "op"},
    {"all_reduce vs barrier, a non-leader", 2, 1, 0, "op"},
    {"broadcast from another root vs barrier", 0, 2, 0, "op"},
    {"barrier vs the broadcast after a barrier", 3, 3, 0, "op"},
    {"barrier vs the broadcast after a barrier, its root", LEAD, 3, 0, "op"},
    {"different roots, then the barrier", 3, -1, 1, "root"},
    {"different roots (a rank that names itself), then the barrier", 2, -1, 1, "root"},
};

static int fake_rank(int rank);

static int rank_mismatch(int rank, void *arg)
{
    const mcase *m = arg;
    cohort_group *g;
    RANK_CHECK(fake_rank(rank) == 0, "rank %d: cannot fake its machine", rank);
    RANK_PASS(cohort_init(&g), NULL);
    static float a[64], b[64];
    double t0 = cht_now_ms();
    /* a good loop first: the mismatch is not the first message ever */
    for (int i = 0; i < 4; i++) {
        RANK_PASS(cohort_broadcast(g, a, 2, COHORT_FLOAT32, LEAD), g);
        RANK_PASS(cohort_barrier(g), g);
    }
    int root = m->bad_root && rank == m->odd ? 2 : LEAD;
    /* right after a barrier: the flat broadcast where the rule applies */
    cohort_status st = m->what == 3 && rank == m->odd ? cohort_barrier(g)
                                                      : cohort_broadcast(g, a, 2, COHORT_FLOAT32, root);
    if (st == COHORT_OK && !m->bad_root)
        RANK_CHECK(next_leader(g) == LEAD, "rank %d: the barrier is not led by %d", rank, LEAD);
    if (st == COHORT_OK) {
        if (rank != m->odd || m->what < 0 || m->what == 3)
            st = cohort_barrier(g);
        else if (m->what == 0)
            st = cohort_broadcast(g, a, 2, COHORT_FLOAT32, LEAD);
        else if (m->what == 1)
            st = cohort_all_reduce(g, a, b, 2, COHORT_FLOAT32, COHORT_SUM);
        else
            st = cohort_broadcast(g, a, 2, COHORT_FLOAT32, 3);
    }
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    double dt = cht_now_ms() - t0;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", cohort_last_error(g));
    RANK_CHECK(st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED, "%s: rank %d: %s: %s",
               m->name, rank, cohort_status_name(st), msg);
    RANK_CHECK(strstr(msg, m->field), "%s: rank %d: the message does not name the %s: %s",
               m->name, rank, m->field, msg);
    RANK_CHECK(dt < 10000, "%s: rank %d took %.0f ms", m->name, rank, dt);
    /* the group stays failed */
    st = cohort_barrier(g);
    RANK_CHECK(st == COHORT_ERR_ABORTED || st == COHORT_ERR_CONTRACT, "%s: rank %d: next call %s",
               m->name, rank, cohort_status_name(st));
    cohort_finalize(g);
    return 0;
}

START_TEST(test_mismatch)
{
    const mcase *m = &mcases[_i];
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_TCP_OVERSUB=on"};
    cht_result r;
    cht_run_ranks(&o, rank_mismatch, (void *)m, &r);
    for (int i = 0; i < N; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s: rank %d: %s %d", m->name, i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* ---- across machines ---- */

/* The machine each rank is made to look like it runs on (hostname, online
 * cpus), set by the parent before the ranks fork; NULL: the real one. */
typedef struct hcase {
    const char *name;
    int host_of[N];
    int cpus[2];
    int expect; /* the auto rule: some machine has more ranks than cpus */
} hcase;
static const hcase *fake;

/* In the rank's process, before cohort_init: its own UTS and mount
 * namespaces, the machine's hostname (another host id, so another host and
 * another machine to the rendezvous) and an online-cpu list giving the
 * machine's count, which sysconf(_SC_NPROCESSORS_ONLN) reads. */
static int fake_machine(const char *host, int cpus)
{
    char path[64], list[32];
    if (unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
        sethostname(host, strlen(host)) != 0)
        return -1;
    snprintf(path, sizeof path, "/tmp/cohort-barlead-cpus.%d", (int)getpid());
    snprintf(list, sizeof list, cpus > 1 ? "0-%d\n" : "0\n", cpus - 1);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(list, f);
    fclose(f);
    int rc = mount(path, "/sys/devices/system/cpu/online", NULL, MS_BIND, NULL);
    unlink(path);
    return rc == 0 && sysconf(_SC_NPROCESSORS_ONLN) == cpus ? 0 : -1;
}

static int fake_rank(int rank)
{
    if (!fake)
        return 0;
    int h = fake->host_of[rank];
    return fake_machine(h ? "cohort-barlead-b" : "cohort-barlead-a", fake->cpus[h]);
}

/* Whether this machine lets a process fake one (root, namespaces). */
static int can_fake(void)
{
    if (geteuid() != 0)
        return 0;
    pid_t p = fork();
    if (p == 0)
        _exit(fake_machine("cohort-barlead-probe", 1) == 0 ? 0 : 1);
    int ws = 0;
    return p > 0 && waitpid(p, &ws, 0) == p && WIFEXITED(ws) && WEXITSTATUS(ws) == 0;
}

static const hcase hcases[] = {
    {"machine a (ranks 0, 1) has 1 cpu, b 64", {0, 0, 1, 1}, {1, 64}, 1},
    {"interleaved, machine b (ranks 1, 3) has 1 cpu", {0, 1, 0, 1}, {64, 1}, 1},
    {"3 ranks on a 2-cpu machine, 1 on a 64-cpu one", {0, 0, 0, 1}, {2, 64}, 1},
    {"2 + 2 ranks on 2 + 2 cpus: none", {0, 0, 1, 1}, {2, 2}, 0},
    {"2 + 2 ranks on 64 + 2 cpus: none", {0, 1, 1, 0}, {64, 2}, 0},
};

static int rank_hosts(int rank, void *arg)
{
    const hcase *h = arg;
    cohort_group *g;
    RANK_CHECK(fake_rank(rank) == 0, "rank %d: cannot fake its machine", rank);
    RANK_PASS(cohort_init(&g), NULL);
    RANK_CHECK(g->n_hosts == 2, "%s: rank %d sees %d hosts", h->name, rank, g->n_hosts);
    RANK_CHECK(g->oversub == h->expect, "%s: rank %d: oversubscribed %d", h->name, rank,
               g->oversub);
    static unsigned char buf[16384];
    for (int i = 0; i < 96; i++) {
        int root = (i / 8) % N;
        size_t bytes = i % 2 ? 16384 : 8;
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == root ? pat(i, root, j) : 0;
        RANK_PASS(cohort_broadcast(g, buf, bytes, COHORT_UINT8, root), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, root, j), "%s: call %d root %d byte %zu: %#x", h->name,
                       i, root, j, buf[j]);
        RANK_CHECK(next_leader(g) == (h->expect ? root : -1),
                   "%s: rank %d call %d: the barrier after a broadcast from %d is led by %d",
                   h->name, rank, i, root, next_leader(g));
        RANK_PASS(cohort_barrier(g), g);
        RANK_CHECK(next_leader(g) == -1, "a barrier after a barrier is led by %d",
                   next_leader(g));
        RANK_CHECK(next_flat(g, 8) == h->expect && next_flat(g, 16384) == h->expect &&
                       !next_flat(g, 16385),
                   "%s: rank %d call %d: after a barrier flat at 8 B %d, 16 KiB %d, 16 KiB + 1 %d",
                   h->name, rank, i, next_flat(g, 8), next_flat(g, 16384), next_flat(g, 16385));
    }
    RANK_PASS(cohort_barrier(g), g);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_hosts)
{
    const hcase *h = &hcases[_i];
    if (!can_fake()) {
        fprintf(stderr, "test_hosts: SKIPPED (faking machines needs root and namespaces)\n");
        return;
    }
    fake = h;
    cht_opts o = {.nranks = N, .deadline_ms = 120000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=60"};
    cht_result r;
    cht_run_ranks(&o, rank_hosts, (void *)h, &r);
    fake = NULL;
    for (int i = 0; i < N; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s: rank %d: %s %d", h->name, i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* Mismatches with the auto rule across machines (hcases[0]: machine a, 1
 * cpu, holds the leader LEAD; the odd rank on either machine). */
static const int hmcases[] = {0, 2, 3, 4, 6};
START_TEST(test_hosts_mismatch)
{
    const mcase *m = &mcases[hmcases[_i]];
    if (!can_fake()) {
        fprintf(stderr, "test_hosts_mismatch: SKIPPED (faking machines needs root and "
                        "namespaces)\n");
        return;
    }
    fake = &hcases[0];
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_mismatch, (void *)m, &r);
    fake = NULL;
    for (int i = 0; i < N; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s (2 machines): rank %d: %s %d", m->name,
                      i, r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coll_barlead");
    TCase *t = tcase_create("barlead");
    tcase_set_timeout(t, 300);
    tcase_add_test(t, test_rule);
    tcase_add_test(t, test_machines);
    tcase_add_loop_test(t, test_osu_loop, 0, sizeof loops / sizeof loops[0]);
    tcase_add_loop_test(t, test_mismatch, 0, sizeof mcases / sizeof mcases[0]);
    tcase_add_loop_test(t, test_ack_loop, 0, sizeof ack_sizes / sizeof ack_sizes[0]);
    tcase_add_loop_test(t, test_ack_mismatch, 0, sizeof ack_mcases / sizeof ack_mcases[0]);
    tcase_add_loop_test(t, test_self_root, 0, 2);
    suite_add_tcase(s, t);
    TCase *h = tcase_create("hosts");
    tcase_set_timeout(h, 300);
    tcase_add_loop_test(h, test_hosts, 0, sizeof hcases / sizeof hcases[0]);
    tcase_add_loop_test(h, test_hosts_mismatch, 0, sizeof hmcases / sizeof hmcases[0]);
    suite_add_tcase(s, h);
    return s;
}

COH_TEST_MAIN(suite)
