/*
 * test_shm_ring.c - the small-broadcast ring (shm_seg.h "The ring"): the
 * root returns once its slot is written, readers check the root's record,
 * the root checks the readers lazily (slot reuse, the next non-ring call,
 * the closing check). Back-to-back calls stay correct across many wraps
 * of the ring at 2, 4 and 8 ranks; every mismatch ends in a specific
 * error on every rank - at the call on readers, at most at the next call
 * (or the closing check) on a root that ran ahead; dead roots and readers
 * end in COHORT_ERR_PEER_LOST. Every mismatch and kill case runs on both
 * rings: the tiny ring (<= 256 B, KT slots) and the ring (<= 16 KiB, K).
 * The rooted ops on the ring (session 11): a small scatter is a broadcast
 * of the root's send buffer (a reader copies its block); a small gather
 * or reduce runs the other way (the leaves publish and return, the root
 * checks and reads every leaf's record) - the same checks, the same cases.
 * Broadcasts in ring pieces (ranks outnumbering cpus, 16 KiB < bytes <=
 * 128 KiB; session 20): every rank pinned to one cpu, the
 * data at every piece boundary, a root that runs two calls ahead and no
 * more, the broadcast mismatch cases and dead ranks. The ring's footprint
 * split (session 24; COHORT_SHM_RING_SPLIT=on, or 8 ranks a cpu): with
 * 256 slots of 16 KiB, calls above 8 KiB cycle through 64 slots and the
 * others through 128 of their own, each running ahead by its own slots and
 * no more, neither reusing the other's; fewer ranks a cpu: no split.
 * Compact records (session 26): a 2-rank reader of <= 16 B reads the root's
 * 32-byte record - data, the path taken, and every mismatch with either
 * side on it or off it.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "support/support.h"
#include "coll/shm/bcast_pieces.h"
#include "transport/shm/shm_cma.h"
#include "transport/shm/shm_seg.h"

/* The ring depths the lead chooses (checked below): 8 and 128 (the tiny
 * ring, broadcasts <= 256 B), K = 64 where a core's L2 holds twice its
 * slots (64 x 16 KiB), 256 and 1024 when the ranks outnumber the cpus
 * this process may use (docs/shm.md). Set per rank by depths(n). */
static int K = 8, KT = 128;
static size_t RB = 16384; /* the ring's bytes: COHORT_SHM_RING_BYTES or 16 KiB */

/* Every rank of the run on one cpu: ranks outnumber cpus whatever the
 * machine (broadcasts in ring pieces). Before th_group, which reads the
 * cpu set as the rendezvous would. */
static void pin_one_cpu(void) { RANK_CHECK(cht_pin_one_cpu() == 0, "sched_setaffinity"); }

static void depths(int n)
{
    cpu_set_t s;
    int over = sched_getaffinity(0, sizeof s, &s) == 0 && n > CPU_COUNT(&s);
    const char *b = getenv("COHORT_SHM_RING_BYTES");
    RB = b ? (size_t)atol(b) : 16384;
    K = over ? 256 : (int)th_ring_default_k(n, RB);
    const char *e = getenv("COHORT_SHM_RING_SLOTS"); /* back_to_back's shallow case */
    if (e && !over)
        K = atoi(e);
    KT = over ? 1024 : 128;
}

/* Which done words a ring call of `bytes` uses (shm_ring_done): the spread
 * ones for the shallow ring, as the library decides. */
static int tspread(const coh_shm *s, size_t bytes)
{
    return shm_ring_spread(s->tiny_k && bytes <= s->tiny_bytes ? s->tiny_k : s->ring_k);
}

static void ms_sleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs fn in n rank processes (rank 0 hosts the store: no thread before
 * the fork, what TSan needs) and expects every rank to pass. */
static void run_all_ok(int n, int deadline_ms, const char *env, int (*fn)(int, void *), void *arg)
{
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = n, .deadline_ms = deadline_ms,
                  .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, fn, arg, &r);
    cht_assert_all_ok(&r);
}

/* How long held-off readers wait for the root before giving up: far
 * beyond K or KT small calls on any machine (scaled for the sanitizer
 * builds), so giving up means the root waited for them. */
static int hold_ms(void) { return (int)(10000 * cht_time_scale()); }

/* Waits until flag[i] >= want; 0 if ms passed first. */
static int flag_within(int i, int want, int ms)
{
    uint64_t end = coh_now_ns() + (uint64_t)ms * 1000000ull;
    while (atomic_load(&th_sh()->flag[i]) < want) {
        if (coh_now_ns() > end)
            return 0;
        ms_sleep(1);
    }
    return 1;
}

/* The group's first error; the monitor thread may write it (under err_mu). */
static void errmsg(cohort_group *g, char *out)
{
    pthread_mutex_lock(&g->err_mu);
    memcpy(out, g->err.msg, COH_ERRLEN);
    pthread_mutex_unlock(&g->err_mu);
}

static unsigned char pat(int i, int root, size_t j) { return (unsigned char)(i * 31 + root * 7 + j); }

/* ---- back-to-back correctness ---- */

static const size_t sizes[] = {0, 1, 8, 100, 4096, 16384};

static int correct_rank(int rank, void *arg)
{
    int n = *(int *)arg;
    depths(n);
    cohort_status st;
    cohort_group *g = th_group(rank, n, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->ring_k == (size_t)K && g->shm->ring_bytes == RB, "ring %zu x %zu",
               g->shm->ring_k, g->shm->ring_bytes);
    RANK_CHECK(g->shm->tiny_k == (size_t)KT && g->shm->tiny_bytes == 256, "tiny ring %zu x %zu",
               g->shm->tiny_k, g->shm->tiny_bytes);
    const char *drain = getenv("COHORT_SHM_RING_DRAIN");
    RANK_CHECK(g->shm->ring_drain == (drain && !strcmp(drain, "1")), "ring_drain %d",
               g->shm->ring_drain);
    unsigned char buf[16384];
    int rounds = (K > 8 ? 6 : 40) * K; /* the ring wraps 6-40 times per root */
    for (int i = 0; i < rounds; i++) {
        /* long streaks of one root (it runs ahead), then rotation */
        int root = (i / (3 * K)) % 2 ? i % n : (i / (3 * K)) % n;
        size_t bytes = sizes[i % (sizeof sizes / sizeof sizes[0])];
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == root ? pat(i, root, j) : 0xEE;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, root, bytes);
        RANK_PASS(coh_shm_broadcast(g->shm, &c, buf, bytes, root), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, root, j), "call %d root %d: byte %zu is %u, want %u", i,
                       root, j, buf[j], pat(i, root, j));
        if (i % 37 == 36) { /* a non-ring call drains and checks */
            float a = 1, b = 0;
            c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
            RANK_PASS(coh_shm_all_reduce(g->shm, &c, &a, &b, 1), g);
            RANK_CHECK(b == n, "all_reduce gave %f", b);
        }
    }
    /* the root runs K calls ahead without waiting for readers: the
     * readers hold off until the root has returned from all K (flag 0), or
     * until HOLD_MS pass (then they set flag 1 and go on) - a root that
     * waited for them could only have finished after that. Progress, not
     * a clock: a root descheduled for a while still passes, and a root
     * that waits fails on any machine. */
    float a = 1, b = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    RANK_PASS(coh_shm_all_reduce(g->shm, &c, &a, &b, 1), g);
    if (rank != 0 && !flag_within(0, 1, hold_ms()))
        atomic_store(&th_sh()->flag[1], 1);
    for (int i = 0; i < K; i++) {
        for (int j = 0; j < 64; j++)
            buf[j] = rank == 0 ? pat(i, 9, (size_t)j) : 0;
        c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 64);
        RANK_PASS(coh_shm_broadcast(g->shm, &c, buf, 64, 0), g);
        for (int j = 0; j < 64; j++)
            RANK_CHECK(buf[j] == pat(i, 9, (size_t)j), "burst call %d byte %d", i, j);
    }
    if (rank == 0) {
        RANK_CHECK(!atomic_load(&th_sh()->flag[1]),
                   "the root waited for held-off readers: %d calls returned only after they "
                   "gave up holding off (%d ms)", K, hold_ms());
        atomic_store(&th_sh()->flag[0], 1);
    }
    /* the tiny ring: the root runs KT calls ahead (flag 2 releases the
     * readers, flag 3 says one gave up holding off), then wraps around it:
     * call KT reuses slot 0, so it must wait for every reader to be done
     * with call 0. The readers count themselves in flag 4 before their
     * first call (after a further 200 ms, so a root that does not wait
     * returns from call KT before it), so a root that waited sees all
     * n - 1 when call KT returns - whatever the machine's speed. The
     * readers check every call's bytes: a slot overwritten too early also
     * shows as wrong data. */
    c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    RANK_PASS(coh_shm_all_reduce(g->shm, &c, &a, &b, 1), g);
    if (rank != 0) {
        if (!flag_within(2, 1, hold_ms()))
            atomic_store(&th_sh()->flag[3], 1);
        ms_sleep(200);
        atomic_fetch_add(&th_sh()->flag[4], 1);
    }
    int calls = 2 * KT + 5;
    for (int i = 0; i < calls; i++) {
        size_t bytes = 1 + (size_t)(i * 37) % 256;
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == 0 ? pat(i, 5, j) : 0;
        c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, bytes);
        RANK_PASS(coh_shm_broadcast(g->shm, &c, buf, bytes, 0), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, 5, j), "tiny call %d (%zu B): byte %zu is %u, want %u", i,
                       bytes, j, buf[j], pat(i, 5, j));
        if (rank == 0 && i == KT - 1) {
            RANK_CHECK(!atomic_load(&th_sh()->flag[3]),
                       "the root waited for held-off readers: %d tiny calls returned only after "
                       "they gave up holding off (%d ms)", KT, hold_ms());
            atomic_store(&th_sh()->flag[2], 1);
        }
        if (rank == 0 && i == KT) {
            int in = atomic_load(&th_sh()->flag[4]);
            RANK_CHECK(in == n - 1, "the root wrapped the tiny ring without waiting for the "
                                    "readers (call %d returned with %d of %d readers started)",
                       KT, in, n - 1);
        }
    }
    RANK_PASS(coh_shm_transport.close_check(g->shm, 5000), g);
    th_group_free(g);
    th_done(n);
    return 0;
}

START_TEST(back_to_back)
{
    /* 3: 4 ranks whose roots drain the ring when they must wait
     * (COHORT_SHM_RING_DRAIN, docs/shm.md): long streaks of one root wrap
     * it, the bytes are checked; 4: 2 ranks at K = 8, the depth hosts
     * with a small L2 get (2 ranks alone take 64 where the L2 holds it);
     * 5: 2 ranks with 32 KiB slots, which the deep ring's budget keeps
     * at 8 (th_ring_default_k) */
    static int ns[] = {2, 4, 8, 4, 2, 2};
    static const char *env[] = {NULL, NULL, NULL, "COHORT_SHM_RING_DRAIN=1",
                                "COHORT_SHM_RING_SLOTS=8", "COHORT_SHM_RING_BYTES=32768"};
    int n = ns[_i];
    run_all_ok(n, 120000, env[_i], correct_rank, &n);
}
END_TEST

static cohort_status ar(cohort_group *g);
static cohort_status ga(cohort_group *g, const unsigned char *send, int root, size_t count);

/* A root that sends a forged announcement (a broken or hostile peer: the
 * readers read it from its memory): garbage, another size, an unknown
 * mode, a region that does not hold the message. Every reader fails with
 * COHORT_ERR_PROTOCOL naming what it got, its buffer untouched, in
 * bounded time; the root's next call learns it. */
static int forged_rank(int rank, void *arg)
{
    int k = *(int *)arg;
    RANK_CHECK(cht_pin_one_cpu() == 0, "sched_setaffinity");
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_PASS(ar(g), g);
    static unsigned char buf[65536];
    /* The forger skips the path choice; the readers make it, and only the
     * pieces path reads an announcement. With the single copy allowed,
     * attach's probe chose it for 64 KiB in some launches (1 in 8 under
     * ASan): the readers then sent a 24-byte descriptor, and the contract
     * told the two algorithms apart - right, but not this test's case. */
    RANK_CHECK(shm_ring_pieces(g->shm, sizeof buf) > 1, "64 KiB is not in ring pieces here: %s",
               g->shm->copy_info);
    memset(buf, 0xEE, sizeof buf);
    coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, sizeof buf);
    uint64_t t0 = coh_now_ns();
    if (rank == 0) {
        pieces_ann a;
        memset(&a, 0, sizeof a);
        a.magic = k == 0 ? 0xdeadbeefu : PIECES_MAGIC;
        a.mode = k == 2 ? 7 : k == 3 ? PIECES_MEM : PIECES_DATA;
        a.bytes = k == 1 ? sizeof buf - 1 : sizeof buf;
        a.d.bytes = 1; /* k 3: a region that does not hold the message */
        RANK_PASS(coh_shm_broadcast_plain(g->shm, &c, &a, sizeof a, 0), g);
        st = ar(g);
        RANK_CHECK(st == COHORT_ERR_ABORTED || st == COHORT_ERR_PROTOCOL,
                   "the forging root's next call: %s", cohort_status_name(st));
    } else {
        st = coh_shm_broadcast(g->shm, &c, buf, sizeof buf, 0);
        static const char *want[] = {"announced garbage", "announced another call",
                                     "announced another call", "announced 1 bytes"};
        RANK_CHECK(st == COHORT_ERR_PROTOCOL || st == COHORT_ERR_ABORTED, "case %d: got %s (%s)", k,
                   cohort_status_name(st), th_errmsg(g));
        RANK_CHECK(strstr(th_errmsg(g), want[k]), "case %d: %s", k, th_errmsg(g));
        for (size_t j = 0; j < sizeof buf; j++)
            RANK_CHECK(buf[j] == 0xEE, "case %d: byte %zu written", k, j);
    }
    double ms = (coh_now_ns() - t0) / 1e6;
    RANK_CHECK(ms < 3000 * cht_time_scale(), "case %d: took %.0f ms", k, ms);
    RANK_CHECK(coh_group_poisoned(g) == COHORT_ERR_PROTOCOL, "group failed with %d",
               coh_group_poisoned(g));
    th_group_free(g);
    th_done(3);
    return 0;
}

START_TEST(pieces_forged)
{
    int k = _i;
    run_all_ok(3, 30000, "COHORT_SHM_SINGLE_COPY=off", forged_rank, &k);
}
END_TEST

/* ---- the rooted ops back to back ---- */

/* rank r's element j of call i (small: sums of 8 fit every type) */
static int rv(int r, int i, size_t j) { return (int)((r * 7 + i * 3 + (int)j) % 5); }

static const size_t rsizes[] = {0, 1, 8, 16, 17, 24, 33, 48, 64, 100, 1000, 2000, 5000};

static int rooted_rank(int rank, void *arg)
{
    int n = *(int *)arg;
    depths(n);
    cohort_status st;
    cohort_group *g = th_group(rank, n, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    coh_shm *s = g->shm;
    RANK_CHECK(s->ring_k == (size_t)K && s->tiny_k == (size_t)KT, "ring %zu/%zu", s->ring_k,
               s->tiny_k);
    static unsigned char sb[8 * 5000 + 64], rb[8 * 5000 + 64], bb[256];
    /* more phases than the records hold (4 x the deepest ring), so every
     * record and slot index is reused */
    int rounds = (int)s->ring_nrec + 600;
    for (int i = 0; i < rounds; i++) {
        int op = i % 3;
        int root = (i / (3 * K)) % 2 ? i % n : (i / (3 * K)) % n;
        size_t bpr = rsizes[(i / 3) % (sizeof rsizes / sizeof rsizes[0])];
        int inplace = rank == root && (i / 7) % 2;
        coh_call c;
        if (op == 0) { /* gather */
            unsigned char *send = inplace ? rb + (size_t)rank * bpr : sb;
            memset(rb, 0xEE, (size_t)n * bpr);
            for (size_t j = 0; j < bpr; j++)
                send[j] = (unsigned char)(pat(i, rank, j));
            c = th_call(g, COH_COLL_GATHER, COHORT_UINT8, -1, root, bpr);
            RANK_PASS(coh_shm_gather(s, &c, send, rb, bpr, root), g);
            if (rank == root)
                for (int q = 0; q < n; q++)
                    for (size_t j = 0; j < bpr; j++)
                        RANK_CHECK(rb[(size_t)q * bpr + j] == pat(i, q, j),
                                   "gather call %d root %d (%zu B): rank %d's byte %zu is %u", i,
                                   root, bpr, q, j, rb[(size_t)q * bpr + j]);
        } else if (op == 1) { /* scatter */
            if (rank == root)
                for (int q = 0; q < n; q++)
                    for (size_t j = 0; j < bpr; j++)
                        sb[(size_t)q * bpr + j] = pat(i, q, j);
            unsigned char *recv = inplace ? sb + (size_t)rank * bpr : rb;
            if (!inplace)
                memset(rb, 0xEE, bpr);
            c = th_call(g, COH_COLL_SCATTER, COHORT_UINT8, -1, root, bpr);
            RANK_PASS(coh_shm_scatter(s, &c, sb, recv, bpr, root), g);
            for (size_t j = 0; j < bpr; j++)
                RANK_CHECK(recv[j] == pat(i, rank, j),
                           "scatter call %d root %d (%zu B): byte %zu is %u, want %u", i, root,
                           bpr, j, recv[j], pat(i, rank, j));
        } else { /* reduce: int32 sum, int32 max, float32 sum, float64 min, uint8 sum */
            static const int dts[] = {COHORT_INT32, COHORT_INT32, COHORT_FLOAT32, COHORT_FLOAT64,
                                      COHORT_UINT8};
            static const int ops[] = {COHORT_SUM, COHORT_MAX, COHORT_SUM, COHORT_MIN, COHORT_SUM};
            int v = (i / 3) % 5, dt = dts[v], rop = ops[v];
            size_t es = th_dtype_size(dt), count = bpr / es;
            unsigned char *send = inplace ? rb : sb;
            for (size_t j = 0; j < count; j++) {
                int x = rv(rank, i, j);
                if (dt == COHORT_INT32)
                    ((int32_t *)send)[j] = x;
                else if (dt == COHORT_FLOAT32)
                    ((float *)send)[j] = (float)x;
                else if (dt == COHORT_FLOAT64)
                    ((double *)send)[j] = x;
                else
                    send[j] = (unsigned char)x;
            }
            c = th_call(g, COH_COLL_REDUCE, dt, rop, root, count);
            RANK_PASS(coh_shm_reduce(s, &c, send, rb, count, root), g);
            if (rank == root)
                for (size_t j = 0; j < count; j++) {
                    int want = rop == COHORT_MAX ? 0 : rop == COHORT_MIN ? 99 : 0;
                    for (int q = 0; q < n; q++) {
                        int x = rv(q, i, j);
                        want = rop == COHORT_SUM   ? want + x
                               : rop == COHORT_MAX ? (x > want ? x : want)
                                                   : (x < want ? x : want);
                    }
                    double got = dt == COHORT_INT32     ? ((int32_t *)rb)[j]
                                 : dt == COHORT_FLOAT32 ? ((float *)rb)[j]
                                 : dt == COHORT_FLOAT64 ? ((double *)rb)[j]
                                                        : rb[j];
                    RANK_CHECK(got == want, "reduce call %d root %d dtype %d op %d count %zu: "
                                            "element %zu is %g, want %d",
                               i, root, dt, rop, count, j, got, want);
                }
        }
        if (i % 11 == 10) { /* a ring broadcast between them */
            for (int j = 0; j < 40; j++)
                bb[j] = rank == root ? pat(i, 3, (size_t)j) : 0;
            c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, root, 40);
            RANK_PASS(coh_shm_broadcast(s, &c, bb, 40, root), g);
            for (int j = 0; j < 40; j++)
                RANK_CHECK(bb[j] == pat(i, 3, (size_t)j), "broadcast after call %d", i);
        }
        if (i % 37 == 36) { /* a non-ring call drains and checks */
            float a = 1, b = 0;
            c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
            RANK_PASS(coh_shm_all_reduce(s, &c, &a, &b, 1), g);
            RANK_CHECK(b == n, "all_reduce gave %f", b);
        }
    }
    /* the leaves of a gather and a reduce return without the root: they
     * make K calls each (the tiny ring's depth KT covers them) while root
     * 0 holds off until all have returned (flag 5 counts them) or
     * hold_ms() passed (flag 6) - a leaf that waited for the root could
     * only have returned after that */
    float a = 1, b = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    RANK_PASS(coh_shm_all_reduce(s, &c, &a, &b, 1), g);
    if (rank == 0) {
        uint64_t end = coh_now_ns() + (uint64_t)hold_ms() * 1000000ull;
        while (atomic_load(&th_sh()->flag[5]) < n - 1 && coh_now_ns() < end)
            ms_sleep(1);
        if (atomic_load(&th_sh()->flag[5]) < n - 1)
            atomic_store(&th_sh()->flag[6], 1);
    }
    for (int i = 0; i < K; i++) {
        for (int j = 0; j < 64; j++)
            sb[j] = pat(i, rank, (size_t)j);
        c = th_call(g, i % 2 ? COH_COLL_GATHER : COH_COLL_REDUCE, COHORT_UINT8,
                    i % 2 ? -1 : COHORT_SUM, 0, 64);
        if (i % 2)
            RANK_PASS(coh_shm_gather(s, &c, sb, rb, 64, 0), g);
        else
            RANK_PASS(coh_shm_reduce(s, &c, sb, rb, 64, 0), g);
        if (rank == 0 && i % 2)
            for (int q = 0; q < n; q++)
                for (int j = 0; j < 64; j++)
                    RANK_CHECK(rb[q * 64 + j] == pat(i, q, (size_t)j), "held gather %d", i);
    }
    if (rank != 0)
        atomic_fetch_add(&th_sh()->flag[5], 1);
    else
        RANK_CHECK(!atomic_load(&th_sh()->flag[6]),
                   "the leaves waited for the root: %d of %d returned from %d calls within %d ms",
                   atomic_load(&th_sh()->flag[5]), n - 1, K, hold_ms());
    RANK_PASS(coh_shm_transport.close_check(s, 5000), g);
    th_group_free(g);
    th_done(n);
    return 0;
}

START_TEST(rooted_back_to_back)
{
    static int ns[] = {2, 3, 4, 8};
    int n = ns[_i];
    run_all_ok(n, 120000, NULL, rooted_rank, &n);
}
END_TEST

/* A leaf of a gather, or its root, is killed after its call returned; the
 * others go on calling gathers: they end in a lost peer, not a hang. */

/* A survivor of a killed peer: a lost-peer status naming it, within 5 s. */
static int expect_lost(cohort_group *g, int rank, cohort_status st, uint64_t t0)
{
    double ms = (coh_now_ns() - t0) / 1e6;
    char msg[COH_ERRLEN];
    errmsg(g, msg);
    fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cohort_status_name(st), ms, msg);
    RANK_CHECK(st == COHORT_ERR_PEER_LOST || st == COHORT_ERR_ABORTED, "got %s: %s",
               cohort_status_name(st), msg);
    RANK_CHECK(strstr(msg, "exited") || strstr(msg, "lost"), "not a lost peer: %s", msg);
    RANK_CHECK(ms < 5000, "took %.0f ms", ms);
    th_group_free(g);
    th_done(2);
    return 0;
}

static int kill_rooted_rank(int rank, void *arg)
{
    int victim = *(int *)arg ? 0 : 1; /* 0: the root, 1: a leaf */
    depths(3);
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_PASS(ar(g), g);
    unsigned char send[64] = {1};
    RANK_PASS(ga(g, send, 0, 64), g);
    if (rank == victim) {
        ms_sleep(100);
        raise(SIGKILL);
    }
    uint64_t t0 = coh_now_ns();
    st = COHORT_OK;
    for (int i = 0; i < 4 * KT && st == COHORT_OK; i++)
        st = ga(g, send, 0, 64);
    if (st == COHORT_OK)
        st = ar(g);
    return expect_lost(g, rank, st, t0);
}

START_TEST(rooted_sigkill)
{
    int arg = _i, victim = _i ? 0 : 1;
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = victim ? CHT_STORE_RANK0 : CHT_STORE_PARENT, .nranks = 3,
                  .deadline_ms = 30000};
    cht_result r;
    cht_run_ranks(&o, kill_rooted_rank, &arg, &r);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(!r.hung[i], "rank %d hung", i);
        ck_assert_msg(r.status[i] == (i == victim ? 128 + SIGKILL : 0), "rank %d exited %d", i,
                      r.status[i]);
    }
}
END_TEST

/* A leaf stopped (SIGSTOP) after its gather returned: the root's next
 * gather times out with a stall report that names the call. */
static int stop_rooted_rank(int rank, void *arg)
{
    (void)arg;
    depths(3);
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 500, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    unsigned char send[64] = {1};
    RANK_PASS(ga(g, send, 0, 64), g);
    if (rank == 2)
        raise(SIGSTOP);
    uint64_t t0 = coh_now_ns();
    st = COHORT_OK;
    for (int i = 0; i < 4 * KT && st == COHORT_OK; i++)
        st = ga(g, send, 0, 64);
    double ms = (coh_now_ns() - t0) / 1e6;
    char msg[COH_ERRLEN];
    errmsg(g, msg);
    fprintf(stderr, "rank %d: %s after %.0f ms: %s\n", rank, cohort_status_name(st), ms, msg);
    RANK_CHECK(st == COHORT_ERR_TIMEOUT || st == COHORT_ERR_ABORTED, "got %s: %s",
               cohort_status_name(st), msg);
    RANK_CHECK(strstr(msg, "gather"), "the stall report does not name the call: %s", msg);
    RANK_CHECK(ms < 3000, "took %.0f ms (timeout 500)", ms);
    if (rank == 0)
        kill(g->peers[2].pid, SIGKILL);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(rooted_sigstop)
{
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = CHT_STORE_RANK0, .nranks = 3, .deadline_ms = 20000};
    cht_result r;
    cht_run_ranks(&o, stop_rooted_rank, NULL, &r);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(!r.hung[i], "rank %d hung", i);
        ck_assert_msg(r.status[i] == (i == 2 ? 128 + SIGKILL : 0), "rank %d exited %d", i,
                      r.status[i]);
    }
}
END_TEST

/* ---- mismatches with the ring active (rank 1 is the odd one, 3 ranks) ---- */

enum {
    R_COUNT, R_DTYPE, R_ROOT, R_NOBODY_ROOT, R_READER_AR, R_ROOT_AR, R_EXTRA, R_SKIPPED,
    R_COUNT_AHEAD, R_ROOT_CLOSE, R_OTHERS_AR,
    /* the rooted ops */
    R_G_COUNT, R_G_ROOT, R_G_NOBODY_ROOT, R_G_ROOT_AR, R_G_LEAF_AR, R_G_VS_SCATTER,
    R_G_VS_BCAST, R_G_NONRING, R_G_AHEAD, R_S_COUNT, R_S_ROOT, R_S_VS_BCAST, R_R_REDOP,
    R_R_DTYPE, R_R_ROOT, R_R_VS_AR, R_R_VS_GATHER, R_N
};

typedef struct rcase {
    const char *name;
    const char *field; /* substring the error must contain */
} rcase;

static const rcase rcases[R_N] = {
    [R_COUNT] = {"count 10 vs 11", "count differs"},
    [R_DTYPE] = {"uint8 vs int8", "dtype differs"},
    [R_ROOT] = {"two roots (0 and 1)", "root differs"},
    [R_NOBODY_ROOT] = {"nobody is root (0->1->2->0)", "root differs"},
    [R_READER_AR] = {"a reader calls all_reduce", "op differs"},
    [R_ROOT_AR] = {"the root calls all_reduce", "op differs"},
    [R_EXTRA] = {"rank 1 makes an extra call", "differs"},
    [R_SKIPPED] = {"rank 1 skips a call", "differs"},
    [R_COUNT_AHEAD] = {"count, root K-1 calls ahead", "count differs"},
    [R_ROOT_CLOSE] = {"two roots in the last call (closing check)", "root differs"},
    [R_OTHERS_AR] = {"root and a third rank call all_reduce", "op differs"},
    [R_G_COUNT] = {"gather count 10 vs 11", "count differs"},
    [R_G_ROOT] = {"gather, two roots (0 and 1)", "root differs"},
    [R_G_NOBODY_ROOT] = {"gather, nobody is root (0->1->2->0)", "root differs"},
    [R_G_ROOT_AR] = {"gather, the root calls all_reduce", "op differs"},
    [R_G_LEAF_AR] = {"gather, a leaf calls all_reduce", "op differs"},
    [R_G_VS_SCATTER] = {"gather vs scatter (rank 1)", "op differs"},
    [R_G_VS_BCAST] = {"gather vs broadcast (rank 1)", "op differs"},
    [R_G_NONRING] = {"gather on the ring vs 20000 B per rank (not)", "count differs"},
    [R_G_AHEAD] = {"gather count, leaves K-1 calls ahead", "count differs"},
    [R_S_COUNT] = {"scatter count 10 vs 11", "count differs"},
    [R_S_ROOT] = {"scatter, two roots (0 and 1)", "root differs"},
    [R_S_VS_BCAST] = {"scatter vs broadcast (rank 1)", "op differs"},
    [R_R_REDOP] = {"reduce sum vs max", "reduce op differs"},
    [R_R_DTYPE] = {"reduce int32 vs float32", "dtype differs"},
    [R_R_ROOT] = {"reduce, roots 2 and 1", "root differs"},
    [R_R_VS_AR] = {"reduce vs all_reduce (rank 1)", "op differs"},
    [R_R_VS_GATHER] = {"reduce vs gather (rank 2, the root)", "op differs"},
};

static int odd;
/* the case runs on the ring (1: 1000 B), not the tiny ring (0: 10 B), or
 * (2: 40000 B, ranks pinned to one cpu) in ring pieces */
static int big;

/* The case's byte count: 10 (tiny ring), 1000 (ring) or 40000 (3 ring
 * pieces) plus d; fcnt: floats of the same path. */
static size_t cnt(size_t d) { return (big == 2 ? 40000 : big ? 1000 : 10) + d; }
static size_t fcnt(void) { return big == 2 ? 10000 : big ? 250 : 1; }

static cohort_status bc(cohort_group *g, unsigned char *buf, int dt, int root, size_t count)
{
    coh_call c = th_call(g, COH_COLL_BROADCAST, dt, -1, root, count);
    return coh_shm_broadcast(g->shm, &c, buf, count, root);
}

static cohort_status ar(cohort_group *g)
{
    float a = 1, b = 0;
    coh_call c = th_call(g, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 1);
    return coh_shm_all_reduce(g->shm, &c, &a, &b, 1);
}

/* the rooted ops, uint8 (count = bytes per rank) or as given */
static unsigned char rbuf[8 * 16384 + 64]; /* 3 x 20000 B, or 8 ranks x 16 KiB (footprint) */
static cohort_status ga(cohort_group *g, const unsigned char *send, int root, size_t count)
{
    coh_call c = th_call(g, COH_COLL_GATHER, COHORT_UINT8, -1, root, count);
    return coh_shm_gather(g->shm, &c, send, rbuf, count, root);
}
static cohort_status sc(cohort_group *g, const unsigned char *send, int root, size_t count)
{
    coh_call c = th_call(g, COH_COLL_SCATTER, COHORT_UINT8, -1, root, count);
    return coh_shm_scatter(g->shm, &c, send, rbuf, count, root);
}
static cohort_status rd(cohort_group *g, const unsigned char *send, int dt, int op, int root,
                        size_t count)
{
    coh_call c = th_call(g, COH_COLL_REDUCE, dt, op, root, count);
    return coh_shm_reduce(g->shm, &c, send, rbuf, count, root);
}

/* Runs the case; returns the first failing status (or OK) of this rank's
 * calls, ending with the closing check. */
static cohort_status run_case(cohort_group *g, int k, unsigned char *buf)
{
    int r = g->rank;
    cohort_status st = COHORT_OK;
#define STEP(x)                                                                                    \
    do {                                                                                           \
        if (st == COHORT_OK)                                                                       \
            st = (x);                                                                              \
    } while (0)
    switch (k) {
    case R_COUNT:
        STEP(bc(g, buf, COHORT_UINT8, 0, cnt(odd)));
        break;
    case R_DTYPE:
        STEP(bc(g, buf, odd ? COHORT_INT8 : COHORT_UINT8, 0, cnt(0)));
        break;
    case R_ROOT:
        STEP(bc(g, buf, COHORT_UINT8, odd ? 1 : 0, cnt(0)));
        break;
    case R_NOBODY_ROOT:
        STEP(bc(g, buf, COHORT_UINT8, (r + 1) % 3, cnt(0)));
        break;
    case R_READER_AR:
        STEP(odd ? ar(g) : bc(g, buf, COHORT_FLOAT32, 0, fcnt()));
        break;
    case R_ROOT_AR:
        STEP(r == 0 ? ar(g) : bc(g, buf, COHORT_FLOAT32, 0, fcnt()));
        break;
    case R_OTHERS_AR:
        STEP(odd ? bc(g, buf, COHORT_FLOAT32, 0, fcnt()) : ar(g));
        break;
    case R_EXTRA:
        if (odd)
            STEP(bc(g, buf, COHORT_UINT8, 0, cnt(0) / 2));
        STEP(bc(g, buf, COHORT_UINT8, 0, cnt(0)));
        break;
    case R_SKIPPED:
        if (!odd)
            STEP(bc(g, buf, COHORT_UINT8, 0, cnt(0) / 2));
        STEP(bc(g, buf, COHORT_UINT8, 0, cnt(0)));
        break;
    case R_COUNT_AHEAD:
        if (r != 0)
            ms_sleep(300); /* the root runs ahead: all but one slot in use */
        /* in pieces the root runs two calls ahead at most: it waits, the
         * readers come, the last call mismatches as before */
        for (int i = 0; i < (big == 2 ? K / 4 : big ? K : KT) - 1; i++)
            STEP(bc(g, buf, COHORT_UINT8, 0, cnt(0)));
        STEP(bc(g, buf, COHORT_UINT8, 0, cnt(odd)));
        break;
    case R_G_COUNT:
        STEP(ga(g, buf, 0, cnt(odd)));
        break;
    case R_G_ROOT:
        STEP(ga(g, buf, odd ? 1 : 0, cnt(0)));
        break;
    case R_G_NOBODY_ROOT:
        STEP(ga(g, buf, (r + 1) % 3, cnt(0)));
        break;
    case R_G_ROOT_AR:
        STEP(r == 0 ? ar(g) : ga(g, buf, 0, cnt(0)));
        break;
    case R_G_LEAF_AR:
        STEP(odd ? ar(g) : ga(g, buf, 0, cnt(0)));
        break;
    case R_G_VS_SCATTER:
        STEP(odd ? sc(g, buf, 0, cnt(0)) : ga(g, buf, 0, cnt(0)));
        break;
    case R_G_VS_BCAST:
        STEP(odd ? bc(g, buf, COHORT_UINT8, 0, cnt(0)) : ga(g, buf, 0, cnt(0)));
        break;
    case R_G_NONRING:
        STEP(ga(g, buf, 0, odd ? 20000 : cnt(0)));
        break;
    case R_G_AHEAD:
        if (r == 0)
            ms_sleep(300); /* the leaves run ahead: all but one slot in use */
        for (int i = 0; i < (big ? K : KT) - 1; i++)
            STEP(ga(g, buf, 0, cnt(0)));
        STEP(ga(g, buf, 0, cnt(odd)));
        break;
    case R_S_COUNT:
        STEP(sc(g, buf, 0, cnt(odd)));
        break;
    case R_S_ROOT:
        STEP(sc(g, buf, odd ? 1 : 0, cnt(0)));
        break;
    case R_S_VS_BCAST:
        STEP(odd ? bc(g, buf, COHORT_UINT8, 0, cnt(0)) : sc(g, buf, 0, cnt(0)));
        break;
    case R_R_REDOP:
        STEP(rd(g, buf, COHORT_FLOAT32, odd ? COHORT_MAX : COHORT_SUM, 0, big ? 250 : 2));
        break;
    case R_R_DTYPE:
        STEP(rd(g, buf, odd ? COHORT_FLOAT32 : COHORT_INT32, COHORT_SUM, 0, big ? 250 : 2));
        break;
    case R_R_ROOT:
        STEP(rd(g, buf, COHORT_INT32, COHORT_SUM, odd ? 1 : 2, big ? 250 : 2));
        break;
    case R_R_VS_AR:
        STEP(odd ? ar(g) : rd(g, buf, COHORT_FLOAT32, COHORT_SUM, 0, 1));
        break;
    case R_R_VS_GATHER:
        STEP(r == 2 ? ga(g, buf, 2, cnt(0)) : rd(g, buf, COHORT_UINT8, COHORT_SUM, 2, cnt(0)));
        break;
    case R_ROOT_CLOSE:
        for (int i = 0; i < 3; i++)
            STEP(bc(g, buf, COHORT_UINT8, 0, cnt(0)));
        STEP(bc(g, buf, COHORT_UINT8, odd ? 1 : 0, cnt(0)));
        /* no further call: only the closing check can find it */
        STEP(coh_shm_transport.close_check(g->shm, 5000));
        return st;
    }
    /* a root that ran ahead learns it here at the latest */
    STEP(ar(g));
    STEP(coh_shm_transport.close_check(g->shm, 5000));
    return st;
#undef STEP
}

static int mismatch_rank(int rank, void *arg)
{
    int k = *(int *)arg % R_N;
    big = *(int *)arg / R_N;
    odd = rank == 1;
    if (big == 2)
        pin_one_cpu();
    depths(3);
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(g->shm->ring_k == (size_t)K && g->shm->tiny_k == (size_t)KT, "ring %zu/%zu",
               g->shm->ring_k, g->shm->tiny_k);
    RANK_CHECK(big != 2 || shm_ring_pieces(g->shm, cnt(0)) == 3, "%zu B not in 3 ring pieces",
               cnt(0));
    RANK_PASS(ar(g), g); /* warm up */
    static unsigned char buf[40064];
    memset(buf, 0x5A, sizeof buf);
    uint64_t t0 = coh_now_ns();
    st = run_case(g, k, buf);
    /* Rank 2 agrees with root 0 throughout: in the closing-check case only
     * the two roots see the mismatch (cohort_finalize then reports it on
     * every rank through the store); here its next call learns it. */
    if (st == COHORT_OK && k == R_ROOT_CLOSE && rank == 2)
        st = ar(g);
    double ms = (coh_now_ns() - t0) / 1e6;
    /* A rank that detected the mismatch returns COHORT_ERR_CONTRACT; one
     * that learnt it from another rank's abort (a reader in agreement with
     * the root, or one whose wait the abort ended first) may return
     * COHORT_ERR_ABORTED - with the same report, and the group failed with
     * COHORT_ERR_CONTRACT either way. */
    char msg[COH_ERRLEN];
    errmsg(g, msg);
    RANK_CHECK(st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED,
               "%s: got %s (%s)", rcases[k].name, cohort_status_name(st), msg);
    RANK_CHECK(coh_group_poisoned(g) == COHORT_ERR_CONTRACT, "group failed with %d",
               coh_group_poisoned(g));
    RANK_CHECK(ms < 3000, "%s: took %.0f ms to fail", rcases[k].name, ms);
    RANK_CHECK(strstr(msg, rcases[k].field), "%s: message does not name the %s: %s",
               rcases[k].name, rcases[k].field, msg);
    /* The next call is aborted - unless this rank was behind and the next
     * call is the mismatched one itself (a reader in agreement with a root
     * that ran ahead: rank 1's report poisoned the group before it got
     * there): then it is a party to it and gets the report's status
     * (coh_group_entry). */
    uint64_t next = g->seq + 1;
    cohort_status after = ar(g);
    RANK_CHECK(after == COHORT_ERR_ABORTED ||
                   (after == COHORT_ERR_CONTRACT && next == coh_group_failed_seq(g)),
               "%s: the call after the mismatch (#%llu; the failed call #%llu) returned %s (%s)",
               rcases[k].name, (unsigned long long)next,
               (unsigned long long)coh_group_failed_seq(g), cohort_status_name(after),
               th_errmsg(g));
    if (rank == 0)
        fprintf(stderr, "[%s %s] %s\n", big == 2 ? "ring pieces" : big ? "ring" : "tiny ring",
                rcases[k].name, msg);
    th_group_free(g);
    th_done(3);
    return 0;
}

START_TEST(mismatch)
{
    int k = _i;
    run_all_ok(3, 30000, NULL, mismatch_rank, &k);
}
END_TEST

/* ---- the ring's footprint split (shm_seg.h; ranks outnumbering cpus) ---- */

/* The root runs `ahead` broadcasts of `bytes` while the readers hold off
 * (flags fb and fb + 1, as the tiny-ring wrap above), and call `ahead`
 * waits until every reader started (they count themselves in fb + 2 after
 * a further 200 ms, so a root that does not wait returns before). */
static int runahead(cohort_group *g, int rank, int n, size_t bytes, int ahead, int fb)
{
    static unsigned char buf[16384];
    _Atomic int *f = th_sh()->flag;
    RANK_PASS(ar(g), g);
    if (rank != 0) {
        if (!flag_within(fb, 1, hold_ms()))
            atomic_store(&f[fb + 1], 1);
        ms_sleep(200);
        atomic_fetch_add(&f[fb + 2], 1);
    }
    for (int i = 0; i <= ahead; i++) {
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == 0 ? pat(i, 13, j) : 0;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, bytes);
        RANK_PASS(coh_shm_broadcast(g->shm, &c, buf, bytes, 0), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, 13, j), "%zu B call %d: byte %zu is %u, want %u", bytes,
                       i, j, buf[j], pat(i, 13, j));
        if (rank == 0 && i == ahead - 1) {
            RANK_CHECK(!atomic_load(&f[fb + 1]),
                       "the root waited for held-off readers: %d calls of %zu B returned only "
                       "after they gave up holding off (%d ms)", ahead, bytes, hold_ms());
            atomic_store(&f[fb], 1);
        }
        if (rank == 0 && i == ahead)
            RANK_CHECK(atomic_load(&f[fb + 2]) == n - 1,
                       "call %d of %zu B returned with %d of %d readers started: the root ran "
                       "more than %d slots ahead", ahead, bytes, atomic_load(&f[fb + 2]), n - 1,
                       ahead);
    }
    return 0;
}

/* 0: 3 ranks on one cpu with COHORT_SHM_RING_SPLIT=on; 1: 8 ranks on one
 * cpu (auto splits from 8 ranks a cpu); 2: 3 ranks, auto (no split) */
static int fp_mode;

static int footprint_rank(int rank, void *arg)
{
    int n = *(int *)arg;
    pin_one_cpu();
    cohort_status st;
    cohort_group *g = th_group(rank, n, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    coh_shm *s = g->shm;
    char d[2048];
    if (fp_mode == 2) { /* no split: every call cycles through all 256 */
        RANK_CHECK(s->oversub && s->ring_k == 256 && s->ring_big_k == 0,
                   "oversub %d, ring %zu, big %zu", s->oversub, s->ring_k, s->ring_big_k);
        shm_ring_cls c = shm_ring_class(s, 16384);
        RANK_CHECK(c.cyc == 256 && c.base == 0, "16 KiB: cyc %u base %u", c.cyc, c.base);
        RANK_PASS(cohort_describe(g, "broadcast", 16384, COHORT_UINT8, d, sizeof d), g);
        RANK_CHECK(strstr(d, "slot ring (256 slots of 16384 B per root"), "describe: %s", d);
        if (runahead(g, rank, n, 16384, 256, 0))
            return 1;
        RANK_PASS(coh_shm_transport.close_check(s, 5000), g);
        th_group_free(g);
        th_done(n);
        return 0;
    }
    /* 256 slots of 16 KiB = 4 MiB: the small calls (<= 1 MiB / 128 = 8
     * KiB) cycle through the upper 128, the larger through the first 64 */
    RANK_CHECK(s->oversub && s->ring_k == 256 && s->ring_bytes == 16384 && s->ring_big_k == 64 &&
                   s->ring_big_from == 8192,
               "oversub %d, ring %zu x %zu, big %zu from %zu B", s->oversub, s->ring_k,
               s->ring_bytes, s->ring_big_k, s->ring_big_from);
    static const struct {
        size_t bytes;
        uint32_t cyc, base;
        int tiny;
    } cls[] = {{256, 1024, 0, 1}, {257, 128, 128, 0}, {8192, 128, 128, 0}, {8193, 64, 0, 0},
               {16384, 64, 0, 0}};
    for (size_t i = 0; i < COH_ARRAY_LEN(cls); i++) {
        shm_ring_cls c = shm_ring_class(s, cls[i].bytes);
        RANK_CHECK(c.cyc == cls[i].cyc && c.base == cls[i].base && c.tiny == cls[i].tiny &&
                       c.k == (cls[i].tiny ? 1024u : 256u),
                   "%zu B: class k %u cyc %u base %u tiny %d", cls[i].bytes, c.k, c.cyc, c.base,
                   c.tiny);
    }
    /* the two halves are disjoint and inside the ring's slots */
    shm_ring_cls sm = shm_ring_class(s, 4096), bg = shm_ring_class(s, 16384);
    unsigned char *lo = shm_ring_slot(s, 0, 0, &bg), *hi = shm_ring_slot(s, 0, 63, &bg);
    for (uint32_t p = 0; p < 256; p++) {
        unsigned char *a = shm_ring_slot(s, 0, p, &sm);
        RANK_CHECK(a > hi && a + s->ring_bytes <= s->ring + s->ring_stride &&
                       shm_ring_slot(s, 0, p, &bg) >= lo && shm_ring_slot(s, 0, p, &bg) <= hi,
                   "phase %u: a small call's slot inside the big calls' slots", p);
    }
    RANK_PASS(cohort_describe(g, "broadcast", 16384, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, "slot ring (64 slots of 16384 B per root"), "describe: %s", d);
    RANK_PASS(cohort_describe(g, "broadcast", 4096, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, "slot ring (128 slots of 16384 B per root"), "describe: %s", d);
    /* each class runs ahead by its own slots and no more */
    if (runahead(g, rank, n, 16384, 64, 0) || runahead(g, rank, n, 4096, 128, 3))
        return 1;
    /* A big call, then small ones while the readers hold off: the small
     * calls never reuse the big call's slot (a single cycle of K for the
     * small calls with the big ones' in its first quarter would, at the
     * 193rd), so the readers, who start late, still read every call's
     * bytes. The root may wait on the way (its small half is 128 deep).
     * The big call's phase is 192-255 mod 256: such a single cycle would
     * reuse its slot 64 phases later. */
    static unsigned char buf[16384];
    RANK_PASS(ar(g), g);
    while (((s->phase + 1) & 255) < 192)
        RANK_PASS(ar(g), g);
    if (rank != 0)
        ms_sleep(300);
    for (int i = 0; i < 260; i++) {
        size_t bytes = i == 0 ? 16384 : i % 7 == 3 ? 100 : 1024 + (size_t)i * 24;
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == 0 ? pat(i, 17, j) : 0xEE;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, bytes);
        RANK_PASS(coh_shm_broadcast(s, &c, buf, bytes, 0), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, 17, j), "mixed call %d (%zu B): byte %zu is %u, want %u",
                       i, bytes, j, buf[j], pat(i, 17, j));
    }
    /* the rooted ops: every rank writes (a gather's leaves), both classes
     * interleaved, roots in turn */
    static unsigned char send[16384];
    for (int i = 0; i < 300; i++) {
        int root = (i / 50) % n;
        size_t bytes = i % 3 == 0 ? 12000 : i % 3 == 1 ? 3000 : 16384 / 2;
        for (size_t j = 0; j < bytes; j++)
            send[j] = pat(i, rank, j);
        RANK_PASS(ga(g, send, root, bytes), g);
        if (rank == root)
            for (int q = 0; q < n; q++)
                for (size_t j = 0; j < bytes; j++)
                    RANK_CHECK(rbuf[(size_t)q * bytes + j] == pat(i, q, j),
                               "gather %d (%zu B): rank %d's byte %zu is %u, want %u", i, bytes,
                               q, j, rbuf[(size_t)q * bytes + j], pat(i, q, j));
    }
    RANK_PASS(coh_shm_transport.close_check(s, 5000), g);
    th_group_free(g);
    th_done(n);
    return 0;
}

START_TEST(footprint)
{
    fp_mode = _i;
    int n = _i == 1 ? 8 : 3;
    run_all_ok(n, 120000, _i == 0 ? "COHORT_SHM_RING_SPLIT=on" : NULL, footprint_rank, &n);
}
END_TEST

/* ---- broadcasts in ring pieces (ranks outnumbering cpus) ---- */

#define PIECES_TOP ((size_t)8 * 16384) /* 8 slots of 16 KiB: the largest */
static const size_t psizes[] = {16385, 3 * 16384 + 100, 65536, 100000, PIECES_TOP,
                                PIECES_TOP + 1, 100, 16384};

/* 1: the case with COHORT_SHM_SINGLE_COPY=on (set before the ranks fork) */
static int pieces_cma;

static int pieces_rank(int rank, void *arg)
{
    int n = *(int *)arg;
    pin_one_cpu();
    depths(n);
    cohort_status st;
    cohort_group *g = th_group(rank, n, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    coh_shm *s = g->shm;
    RANK_CHECK(s->oversub && s->ring_k == 256 && s->ring_bytes == 16384, "oversub %d, ring %zu x %zu",
               s->oversub, s->ring_k, s->ring_bytes);
    /* the rule: above the slot, up to 8 pieces; not at or below the slot
     * (the ring, one phase), not above (two copies) */
    static const size_t want[] = {2, 4, 4, 7, 8, 0, 0, 0};
    /* Whether the single copy takes a size is the probe's verdict (its
     * speed under ASan made it take 128 KiB in a CI run): the rule's edges
     * run with it off; with it on, a size it takes is never in pieces. */
    RANK_CHECK(s->cma == pieces_cma, "single copy %s, want %s", s->cma ? "on" : "off",
               pieces_cma ? "on" : "off");
    for (size_t i = 0; i < COH_ARRAY_LEN(psizes); i++) {
        size_t w = shm_cma_use(s, COH_COLL_BROADCAST, psizes[i]) ? 0 : want[i];
        RANK_CHECK(shm_ring_pieces(s, psizes[i]) == w, "%zu B: %zu pieces, want %zu",
                   psizes[i], shm_ring_pieces(s, psizes[i]), w);
    }
    if (pieces_cma)
        RANK_CHECK(shm_cma_use(s, COH_COLL_BROADCAST, 65536) &&
                       !shm_ring_pieces(s, 65536) && shm_ring_pieces(s, 16385) == 2,
                   "single copy on: 64 KiB %s in %zu pieces",
                   shm_cma_use(s, COH_COLL_BROADCAST, 65536) ? "single copy" : "two copies",
                   shm_ring_pieces(s, 65536));
    char d[2048];
    RANK_PASS(cohort_describe(g, "broadcast", 65536, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(pieces_cma || strstr(d, "slot ring in 4 pieces"), "describe: %s", d);
    static unsigned char buf[PIECES_TOP + 1];
    for (int i = 0; i < 6 * n; i++) {
        /* streaks of one root (it runs ahead), every size, then rotation */
        int root = (i / 3) % n;
        size_t bytes = psizes[i % COH_ARRAY_LEN(psizes)];
        for (size_t j = 0; j < bytes; j++)
            buf[j] = rank == root ? pat(i, root, j) : 0xEE;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, root, bytes);
        RANK_PASS(coh_shm_broadcast(s, &c, buf, bytes, root), g);
        for (size_t j = 0; j < bytes; j++)
            RANK_CHECK(buf[j] == pat(i, root, j), "call %d root %d (%zu B): byte %zu is %u, want %u",
                       i, root, bytes, j, buf[j], pat(i, root, j));
        if (i % 5 == 4)
            RANK_PASS(ar(g), g); /* a non-ring call drains and checks */
    }
    /* The root runs two calls ahead, not more: calls 0 and 1 (64 KiB, 4
     * pieces each) return while the readers hold off (flag 5 releases
     * them, flag 6 says one gave up holding off); call 2 waits until every
     * reader is done with call 0. The readers count themselves in flag 7
     * before their first call (after a further 200 ms, so a root that does
     * not wait returns from call 2 before it), so a root that waited sees
     * all n - 1 when call 2 returns - whatever the machine's speed. */
    RANK_PASS(ar(g), g);
    if (pieces_cma) { /* 64 KiB is a single copy: no run-ahead to see */
        RANK_PASS(coh_shm_transport.close_check(s, 5000), g);
        th_group_free(g);
        th_done(n);
        return 0;
    }
    if (rank != 0) {
        if (!flag_within(5, 1, hold_ms()))
            atomic_store(&th_sh()->flag[6], 1);
        ms_sleep(200);
        atomic_fetch_add(&th_sh()->flag[7], 1);
    }
    for (int i = 0; i < 3; i++) {
        for (size_t j = 0; j < 65536; j++)
            buf[j] = rank == 0 ? pat(i, 11, j) : 0;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 65536);
        RANK_PASS(coh_shm_broadcast(s, &c, buf, 65536, 0), g);
        for (size_t j = 0; j < 65536; j++)
            RANK_CHECK(buf[j] == pat(i, 11, j), "burst call %d byte %zu", i, j);
        if (rank == 0 && i == 1) {
            RANK_CHECK(!atomic_load(&th_sh()->flag[6]),
                       "the root waited for held-off readers: 2 calls in pieces returned only "
                       "after they gave up holding off (%d ms)", hold_ms());
            atomic_store(&th_sh()->flag[5], 1);
        }
        if (rank == 0 && i == 2) {
            int in = atomic_load(&th_sh()->flag[7]);
            RANK_CHECK(in == n - 1, "the root ran a third call in pieces ahead (call 2 returned "
                                    "with %d of %d readers started)", in, n - 1);
        }
    }
    RANK_PASS(coh_shm_transport.close_check(s, 5000), g);
    th_group_free(g);
    th_done(n);
    return 0;
}

START_TEST(pieces)
{
    static int ns[] = {2, 3, 4, 3};
    int n = ns[_i];
    pieces_cma = _i == 3;
    run_all_ok(n, 120000,
               pieces_cma ? "COHORT_SHM_SINGLE_COPY=on" : "COHORT_SHM_SINGLE_COPY=off",
               pieces_rank, &n);
}
END_TEST

START_TEST(pieces_mismatch)
{
    /* the broadcast cases (those before R_OTHERS_AR and it) in ring pieces */
    static const int ks[] = {R_COUNT, R_DTYPE, R_ROOT, R_NOBODY_ROOT, R_READER_AR, R_ROOT_AR,
                             R_EXTRA, R_SKIPPED, R_COUNT_AHEAD, R_ROOT_CLOSE, R_OTHERS_AR};
    int k = 2 * R_N + ks[_i];
    run_all_ok(3, 30000, NULL, mismatch_rank, &k);
}
END_TEST

/* ---- which cache lines a ring call pulls (docs/shm.md, "Cache lines per call") ---- */

/* Waits up to ms for flag j of the run; 1 if it came. */
static int flag_wait(int j, int ms)
{
    for (int t = 0; t < ms; t++) {
        if (atomic_load(&th_sh()->flag[j]))
            return 1;
        ms_sleep(1);
    }
    return atomic_load(&th_sh()->flag[j]) != 0;
}

static int lines_rank(int rank, void *arg)
{
    (void)arg;
    depths(2);
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    coh_shm *s = g->shm;
    /* done words start where no phase of their index is (a zeroed word 0
     * would pass the root's check of phase 0 after the counter wraps) */
    for (uint32_t i = 0; i < (uint32_t)s->ring_nrec; i++)
        for (int spread = 0; spread < 2; spread++)
            RANK_CHECK(atomic_load(shm_ring_done(s, s->me, i, spread)) != i,
                       "done word %u (spread %d) holds %u", i, spread, i);
    /* The slot ring's done words (K < 32) lie one to a cache line, so that
     * the root's check of p - K never reads the line its readers are
     * writing; the tiny ring's (KT >= 32) 16 to a line (docs/shm.md, "Done
     * words"; a layout regression costs a 4 KiB broadcast x1.5) */
    RANK_CHECK(shm_ring_spread((size_t)K) == (K < 32) && shm_ring_spread((size_t)KT) == (KT < 32),
               "spread decided wrongly for K %d / KT %d", K, KT);
    for (uint32_t i = 1; i < 32; i++) {
        uintptr_t a = (uintptr_t)shm_ring_done(s, s->me, i - 1, 1) / 64,
                  b = (uintptr_t)shm_ring_done(s, s->me, i, 1) / 64;
        RANK_CHECK(a != b, "spread done words %u and %u share a line", i - 1, i);
        a = (uintptr_t)shm_ring_done(s, s->me, i - 1, 0) / 64;
        b = (uintptr_t)shm_ring_done(s, s->me, i, 0) / 64;
        RANK_CHECK((a == b) == (i % 16 != 0), "packed done words %u and %u: lines %s", i - 1, i,
                   a == b ? "shared" : "apart");
    }
    RANK_PASS(ar(g), g);

    /* wait_all caches the least phase it saw, not its target: a root that
     * runs ahead then re-reads its readers' arrive lines once per about K
     * calls instead of every call */
    if (rank == 0) {
        uint32_t P = s->phase;
        coh_call c; /* no call: th_call would advance this rank's seq */
        memset(&c, 0, sizeof c);
        shm_op o;
        memset(&o, 0, sizeof o);
        o.s = s;
        o.g = g;
        o.c = &c;
        s->min_seen = P - 10; /* a lower bound is always true */
        RANK_PASS(shm_wait_all(&o, P - 5), g);
        RANK_CHECK((int32_t)(s->min_seen - (P - 5)) >= 4,
                   "wait_all cached phase P%+d, not the phase it saw (>= P-1)",
                   (int)(int32_t)(s->min_seen - P));
    }

    /* a reader takes the root's record when it is there, without the
     * root's arrive word: the root's arrive is set back (as if the root
     * were descheduled between its record and its publish) while the
     * reader calls */
    static const size_t bytes[] = {8, 1000};
    unsigned char buf[1000];
    for (int t = 0; t < 2; t++) {
        RANK_PASS(ar(g), g);
        for (size_t j = 0; j < bytes[t]; j++)
            buf[j] = rank == 0 ? pat(t, 3, j) : 0;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, bytes[t]);
        if (rank == 0) {
            RANK_PASS(coh_shm_broadcast(s, &c, buf, bytes[t], 0), g);
            shm_ctl *me = shm_ctl_of(s, 0);
            atomic_store(&me->arrive, s->phase - 1);
            atomic_store(&th_sh()->flag[2 * t], 1);
            int came = flag_wait(2 * t + 1, 2000);
            atomic_store(&me->arrive, s->phase);
            shm_futex_wake(&me->arrive);
            RANK_CHECK(came, "%zu B: the reader waited for the root's arrive word", bytes[t]);
        } else {
            th_wait_flag(2 * t, 5000);
            uint64_t t0 = coh_now_ns();
            RANK_PASS(coh_shm_broadcast(s, &c, buf, bytes[t], 0), g);
            double ms = (coh_now_ns() - t0) / 1e6;
            atomic_store(&th_sh()->flag[2 * t + 1], 1);
            RANK_CHECK(ms < 1000, "%zu B: the reader took %.0f ms", bytes[t], ms);
            for (size_t j = 0; j < bytes[t]; j++)
                RANK_CHECK(buf[j] == pat(t, 3, j), "%zu B: byte %zu is %u, want %u", bytes[t], j,
                           buf[j], pat(t, 3, j));
        }
    }

    /* the root's lazy check takes a reader's done word and leaves its record
     * alone: the reader's record is scribbled after its check passed and
     * the root's drain (the all_reduce) still passes; then a stale done word
     * with a sound record passes on the record; a stale done word with a
     * scribbled record is found (a corrupted segment). Cases 1 and 2 need
     * the reader's record: the reader calls first (it writes its record,
     * then waits for the root's), the root once that record is there. Case
     * 3 (run second): a reader of 2 ranks that finds the root's record
     * with its own fingerprint writes no record (nobody else would read
     * it): it calls once the root's call returned, and the root's drain
     * passes on its done word. */
    static const int order[] = {0, 3, 1, 2}; /* 2 fails the group: last */
    for (int i = 0; i < 4; i++) {
        int t = order[i];
        RANK_PASS(ar(g), g);
        buf[0] = rank == 0 ? 42 : 0;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 1);
        uint32_t x = s->phase + 1;
        if (rank == 0 && (t == 1 || t == 2)) {
            uint64_t end = coh_now_ns() + 5000000000ull;
            while (atomic_load(&shm_ring_rec_of(s, 1, x)->phase) != x && coh_now_ns() < end)
                ms_sleep(1);
            RANK_CHECK(atomic_load(&shm_ring_rec_of(s, 1, x)->phase) == x,
                       "case %d: the waiting reader wrote no record of phase %u", t, x);
        }
        if (rank == 1 && t == 3)
            th_wait_flag(8, 5000);
        RANK_PASS(coh_shm_broadcast(s, &c, buf, 1, 0), g);
        if (rank == 0 && t == 3)
            atomic_store(&th_sh()->flag[8], 1);
        RANK_CHECK(buf[0] == 42, "byte %u", buf[0]);
        RANK_CHECK(s->phase == x, "case %d: phase %u after the call, want %u", t, s->phase, x);
        if (rank == 1) {
            RANK_CHECK(atomic_load(shm_ring_done(s, 1, x, tspread(s, 1))) == x,
                       "no done word for phase %u", x);
            int rec = atomic_load(&shm_ring_rec_of(s, 1, x)->phase) == x;
            RANK_CHECK(t == 0 || rec == (t != 3), "case %d: the reader's record of phase %u %s", t,
                       x, rec ? "written" : "missing");
            if (t == 0 || t == 2)
                atomic_fetch_xor(&shm_ring_rec_of(s, 1, x)->seq, 1);
            if (t == 1 || t == 2)
                atomic_store(shm_ring_done(s, 1, x, tspread(s, 1)), x + 1);
            atomic_store(&th_sh()->flag[4 + t], 1);
        } else {
            th_wait_flag(4 + t, 5000);
        }
        st = ar(g);
        if (t != 2) {
            char msg[COH_ERRLEN];
            errmsg(g, msg);
            RANK_CHECK(st == COHORT_OK, "case %d: %s (%s)", t, cohort_status_name(st), msg);
        } else if (rank == 0) {
            char msg[COH_ERRLEN];
            errmsg(g, msg);
            RANK_CHECK(st == COHORT_ERR_PROTOCOL && strstr(msg, "fingerprint and header disagree"),
                       "a scribbled record behind a stale done word: %s (%s)",
                       cohort_status_name(st), msg);
        }
    }
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(lines)
{
    int n = 2;
    run_all_ok(2, 30000, NULL, lines_rank, &n);
}
END_TEST

/* ---- 2 ranks: the reader that finds the root's record first ----
 *
 * A reader of 2 ranks that finds the root's record of its phase with its
 * own fingerprint copies out and writes no record of its own (bcast_ring).
 * Here it calls once the root's call returned, so it finds the record:
 * with the same call it takes the bytes (8 B inline, 1000 B from the
 * slot) and the root's drain passes; with another count it must still
 * fail with the contract error naming the count (its read of the root's
 * fingerprint is the check), and so must the root at its next call. */
static int fast_rank(int rank, void *arg)
{
    size_t bytes = *(int *)arg & 1 ? 1000 : 8;
    /* variant 2, 3: the reader's done word is scribbled after its call (a
     * corrupted segment): with no record behind it, the root's drain must
     * not pass */
    int lost = *(int *)arg & 2;
    depths(2);
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    coh_shm *s = g->shm;
    unsigned char buf[1001];
    for (int t = 0; t < 2; t++) {
        RANK_PASS(ar(g), g);
        size_t n = t == 1 && rank == 1 ? bytes + 1 : bytes;
        for (size_t j = 0; j < n; j++)
            buf[j] = rank == 0 ? pat(t, 5, j) : 0;
        coh_call c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, n);
        uint32_t x = s->phase + 1;
        if (rank == 1)
            th_wait_flag(10 + t, 5000);
        st = coh_shm_broadcast(s, &c, buf, n, 0);
        if (rank == 0) {
            RANK_PASS(st, g);
            atomic_store(&th_sh()->flag[10 + t], 1);
            if (lost)
                th_wait_flag(12, 5000);
            st = ar(g); /* drains the ring call's check */
        } else if (t == 0 && !lost) {
            RANK_PASS(st, g);
            st = ar(g); /* the root's drain */
        }
        char msg[COH_ERRLEN];
        errmsg(g, msg);
        if (lost) {
            if (rank == 1) {
                RANK_PASS(st, g);
                RANK_CHECK(atomic_load(shm_ring_done(s, 1, x, tspread(s, bytes))) == x,
                           "%zu B: no done word", bytes);
                atomic_store(shm_ring_done(s, 1, x, tspread(s, bytes)), x + 1);
                atomic_store(&th_sh()->flag[12], 1);
                st = ar(g);
                errmsg(g, msg);
            }
            RANK_CHECK(st != COHORT_OK && coh_group_poisoned(g),
                       "%zu B: a lost done word with no record passed (%s)", bytes, msg);
            fprintf(stderr, "[%zu B, lost done word] rank %d: %s: %s\n", bytes, rank,
                    cohort_status_name(st), msg);
            break;
        }
        if (t == 0) {
            RANK_CHECK(st == COHORT_OK, "%zu B: %s (%s)", bytes, cohort_status_name(st), msg);
            if (rank == 1) {
                for (size_t j = 0; j < n; j++)
                    RANK_CHECK(buf[j] == pat(t, 5, j), "%zu B: byte %zu is %u, want %u", bytes, j,
                               buf[j], pat(t, 5, j));
                RANK_CHECK(atomic_load(&shm_ring_rec_of(s, 1, x)->phase) != x,
                           "%zu B: the reader wrote a record of phase %u", bytes, x);
                RANK_CHECK(atomic_load(shm_ring_done(s, 1, x, tspread(s, bytes))) == x,
                           "%zu B: no done word", bytes);
            }
            continue;
        }
        RANK_CHECK(rank == 0 ? st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED
                             : st == COHORT_ERR_CONTRACT,
                   "%zu B, count mismatch: got %s (%s)", bytes, cohort_status_name(st), msg);
        RANK_CHECK(coh_group_poisoned(g) == COHORT_ERR_CONTRACT, "group failed with %d",
                   coh_group_poisoned(g));
        RANK_CHECK(strstr(msg, "count differs"), "%zu B: message does not name the count: %s",
                   bytes, msg);
        if (rank == 1)
            for (size_t j = 0; j < n; j++)
                RANK_CHECK(buf[j] == 0, "%zu B: byte %zu written on a mismatch", bytes, j);
    }
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(fast_reader)
{
    int big_ = _i;
    run_all_ok(2, 30000, NULL, fast_rank, &big_);
}
END_TEST

/* ---- compact records: 2 ranks, broadcasts of <= 16 B (shm_ring_crec) ---- */

enum { C_DATA, C_COUNT, C_READER_BIG, C_ROOT_BIG, C_DTYPE, C_EXTRA, C_AHEAD, C_TAG, C_NOCHECK,
       C_TWO_ROOTS, C_NOBODY_ROOT, C_N };
static const char *const cnames[] = {"data",       "count 16 vs 8",     "count 16 vs 20 (reader)",
                                     "count 20 (root) vs 16", "uint8 vs int8", "extra call",
                                     "count, root ahead",     "tag",           "check off",
                                     "two roots",             "nobody is root"};
static const char *const cfields[] = {NULL,            "count differs", "count differs",
                                      "count differs", "dtype differs", "op differs",
                                      "count differs", "tag differs",   NULL,
                                      "root differs",  "root differs"};

/* A 2-rank group for the compact-record cases, the check off when asked
 * (as a group created with it off), after one all_reduce. */
static cohort_group *compact_group(int rank, int nocheck)
{
    depths(2);
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    const char *pk = getenv("COHORT_SHM_COMPACT_PACK");
    if (pk) /* the layout asked for (compact and compact_ops run both) */
        RANK_CHECK(g->shm->crec_stride == (strcmp(pk, "on") ? SHM_LINE : sizeof(shm_ring_crec)),
                   "COHORT_SHM_COMPACT_PACK=%s: records %zu B apart", pk, g->shm->crec_stride);
    if (nocheck)
        g->shm->check = 0;
    RANK_PASS(ar(g), g);
    return g;
}

/* The end of a compact-record mismatch case: the call (or the all_reduce
 * and close check after it) ends in COHORT_ERR_CONTRACT, or ABORTED when
 * the peer told this rank first, within limit_ms of t0, the group poisoned
 * with CONTRACT and the report naming the field; then the group is freed. */
static int compact_verdict(int rank, cohort_group *g, cohort_status st, uint64_t t0,
                           double limit_ms, const char *tag, const char *name, const char *field)
{
    if (st == COHORT_OK)
        st = ar(g);
    if (st == COHORT_OK)
        st = coh_shm_transport.close_check(g->shm, 5000);
    double ms = (coh_now_ns() - t0) / 1e6;
    char msg[COH_ERRLEN];
    errmsg(g, msg);
    RANK_CHECK(st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED, "%s: got %s (%s)", name,
               cohort_status_name(st), msg);
    RANK_CHECK(coh_group_poisoned(g) == COHORT_ERR_CONTRACT, "%s: group failed with %d", name,
               coh_group_poisoned(g));
    RANK_CHECK(ms < limit_ms, "%s: took %.0f ms to fail", name, ms);
    RANK_CHECK(strstr(msg, field), "%s: message does not name the %s: %s", name, field, msg);
    if (rank == 0)
        fprintf(stderr, "[%s %s] %s\n", tag, name, msg);
    th_group_free(g);
    th_done(2);
    return 0;
}

/* The reader's side of a 2-rank broadcast of <= 16 B reads the root's
 * compact record: data across wraps of the record array with both roots,
 * readers early and late; a payload changed in the root's compact records
 * shows in what the reader gets (the path is taken, not only written);
 * every mismatch where both sides are <= 8 B ends in the report on both
 * ranks. */
static int compact_rank(int rank, void *arg)
{
    int v = *(int *)arg;
    cohort_group *g = compact_group(rank, v == C_NOCHECK);
    coh_shm *s = g->shm;
    cohort_status st = COHORT_OK;
    enum { CB = SHM_RING_CINL };
    unsigned char buf[CB + 8];
    if (v == C_DATA || v == C_NOCHECK) {
        int calls = 3 * (int)s->ring_nrec + 7;
        for (int i = 0; i < calls; i++) {
            int root = (i / 100) % 2;
            size_t bytes = (size_t)(i % (CB + 2)); /* CB + 1: the full record, 0: none */
            for (size_t j = 0; j < bytes; j++)
                buf[j] = rank == root ? pat(i, root, j) : 0xEE;
            if (rank != root && i % 100 == 50)
                ms_sleep(2); /* the root runs ahead */
            RANK_PASS(bc(g, buf, COHORT_UINT8, root, bytes), g);
            for (size_t j = 0; j < bytes; j++)
                RANK_CHECK(buf[j] == pat(i, root, j), "call %d root %d (%zu B): byte %zu is %u",
                           i, root, bytes, j, buf[j]);
            if (rank == root && bytes && bytes <= SHM_RING_CINL) {
                shm_ring_crec *r = shm_ring_crec_of(s, root, s->phase);
                RANK_CHECK(atomic_load(&r->phase) == s->phase && !memcmp(r->inl, buf, bytes),
                           "call %d: no compact record of phase %u", i, s->phase);
            }
        }
        /* the root runs 8 calls ahead, then the reader changes the payload
         * in the root's compact records of those phases before it reads */
        RANK_PASS(ar(g), g);
        uint32_t p0 = s->phase;
        for (int i = 0; i < 8; i++) {
            if (rank == 1 && i == 0) {
                th_wait_flag(0, hold_ms());
                for (uint32_t p = p0 + 1; p <= p0 + 8; p++) {
                    shm_ring_crec *r = shm_ring_crec_of(s, 0, p);
                    RANK_CHECK(atomic_load(&r->phase) == p, "root's compact record %u missing", p);
                    memset(r->inl, 0xC5, SHM_RING_CINL);
                }
            }
            memset(buf, rank == 0 ? 0x11 : 0, CB);
            RANK_PASS(bc(g, buf, COHORT_UINT8, 0, CB), g);
            for (int j = 0; j < CB; j++)
                RANK_CHECK(buf[j] == (rank == 0 ? 0x11 : 0xC5),
                           "call %d byte %d is %#x: the reader did not read the compact record",
                           i, j, buf[j]);
        }
        if (rank == 0)
            atomic_store(&th_sh()->flag[0], 1);
        RANK_PASS(ar(g), g);
        RANK_PASS(coh_shm_transport.close_check(g->shm, 5000), g);
        th_group_free(g);
        th_done(2);
        return 0;
    }
    int odd = rank == 1;
    uint64_t t0 = coh_now_ns();
    st = COHORT_OK;
    memset(buf, 0x5A, sizeof buf);
    coh_call c;
    switch (v) {
    case C_COUNT: /* both compact */
        st = bc(g, buf, COHORT_UINT8, 0, odd ? CB / 2 : CB);
        break;
    case C_READER_BIG: /* the reader takes the full record */
        st = bc(g, buf, COHORT_UINT8, 0, odd ? CB + 4 : CB);
        break;
    case C_ROOT_BIG: /* the reader polls a compact record that never comes */
        st = bc(g, buf, COHORT_UINT8, 0, odd ? CB : CB + 4);
        break;
    case C_DTYPE:
        st = bc(g, buf, odd ? COHORT_INT8 : COHORT_UINT8, 0, CB);
        break;
    case C_EXTRA: /* its first call matches the root's, its second meets all_reduce */
        if (odd)
            st = bc(g, buf, COHORT_UINT8, 0, CB);
        if (st == COHORT_OK)
            st = bc(g, buf, COHORT_UINT8, 0, CB);
        break;
    case C_AHEAD:
        if (odd)
            ms_sleep(300);
        for (int i = 0; i < 2 * KT - 1 && st == COHORT_OK; i++)
            st = bc(g, buf, COHORT_UINT8, 0, CB);
        if (st == COHORT_OK)
            st = bc(g, buf, COHORT_UINT8, 0, odd ? CB - 2 : CB);
        break;
    case C_TWO_ROOTS:
        st = bc(g, buf, COHORT_UINT8, rank, CB);
        break;
    case C_NOBODY_ROOT: /* each reads the other's compact record: neither writes one */
        st = bc(g, buf, COHORT_UINT8, 1 - rank, CB);
        break;
    case C_TAG: /* a tag that fits the key on one side, saturates on the other */
        c = th_call(g, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, CB);
        c.tag = odd ? 1000 : 3;
        st = coh_shm_broadcast(g->shm, &c, buf, CB, 0);
        break;
    }
    return compact_verdict(rank, g, st, t0, 3000 + (v == C_AHEAD ? 300 : 0), "compact", cnames[v],
                           cfields[v]);
}

/* each case in both layouts: two compact records a line and one */
static const char *pack_env(int i, int n)
{
    return i < n ? "COHORT_SHM_COMPACT_PACK=on" : "COHORT_SHM_COMPACT_PACK=off";
}

START_TEST(compact)
{
    int v = _i % C_N;
    run_all_ok(2, 30000, pack_env(_i, C_N), compact_rank, &v);
}
END_TEST

/* ---- compact records of scatter, gather and reduce; the root in them ----
 *
 * A 2-rank scatter (from its root), gather or reduce (from the leaf) of
 * <= 16 B also writes the compact record, and its root is in the count
 * word: a hierarchical call's local phase runs from the host's leader
 * whatever root each rank names, so a test names another root in the
 * call (croot) than the one the local phase runs from (lr), as
 * coll/hier.c does on a host without the root. */

enum { CO_DATA, CO_NOCHECK, CO_ROOT_BIG, CO_G_COUNT, CO_R_COUNT_BIG, CO_R_REDOP, CO_S_DTYPE,
       CO_B_ROOT, CO_S_ROOT, CO_G_ROOT, CO_R_ROOT, CO_ROOT_BIG_ONE, CO_N };
static const char *const conames[] = {
    "data",          "check off",          "root >= 2^24: full records", "gather count 8 vs 4",
    "reduce count 4 (root) vs 20", "reduce sum vs max", "scatter uint8 vs int8",
    "broadcast root 4 vs 5", "scatter root 4 vs 5", "gather root 4 vs 5", "reduce root 4 vs 5",
    "root 4 vs 2^24"};
static const char *const cofields[] = {NULL,            NULL,            NULL,
                                       "count differs", "count differs", "reduce op differs",
                                       "type differs",  "root differs",  "root differs",
                                       "root differs",  "root differs",  "root differs"};

/* One call of op (0 broadcast, 1 scatter, 2 gather, 3 reduce MAX unless
 * redop says otherwise) on 2 ranks: count elements of dt (a rank's block;
 * a broadcast's whole), the local phase from local rank lr, the call
 * naming group rank croot. */
static cohort_status co_call(cohort_group *g, int op, int dt, int redop, unsigned char *sb,
                             unsigned char *rb, size_t count, int lr, int croot)
{
    static const int colls[] = {COH_COLL_BROADCAST, COH_COLL_SCATTER, COH_COLL_GATHER,
                                COH_COLL_REDUCE};
    coh_call c = th_call(g, colls[op], dt, op == 3 ? redop : -1, croot, count);
    size_t b = count * th_dtype_size(dt);
    switch (op) {
    case 0: return coh_shm_broadcast(g->shm, &c, sb, b, lr);
    case 1: return coh_shm_scatter(g->shm, &c, sb, rb, b, lr);
    case 2: return coh_shm_gather(g->shm, &c, sb, rb, b, lr);
    default: return coh_shm_reduce(g->shm, &c, sb, rb, count, lr);
    }
}

/* Did the rank that writes op's compact record (a scatter's root, a
 * gather's or reduce's leaf) write one for the phase just done? */
static int co_wrote(const coh_shm *s, int op, int lr)
{
    int w = op == 1 ? lr : 1 - lr;
    const shm_ring_crec *r = shm_ring_crec_of(s, w, s->phase);
    return atomic_load(&r->phase) == s->phase;
}

static int compact_ops_rank(int rank, void *arg)
{
    int v = *(int *)arg;
    cohort_group *g = compact_group(rank, v == CO_NOCHECK);
    coh_shm *s = g->shm;
    cohort_status st = COHORT_OK;
    unsigned char sb[128], rb[128];
    if (v == CO_DATA || v == CO_NOCHECK || v == CO_ROOT_BIG) {
        int calls = 3 * (int)s->ring_nrec + 7;
        for (int i = 0; i < calls; i++) {
            int op = 1 + i % 3, lr = (i / 100) % 2, me_root = rank == lr;
            /* 0-33 B a rank: compact to 16 B, a scatter's reader block
             * inline in the full record to 32 B */
            size_t bpr = (size_t)(i / 3 % 34);
            int croot = v == CO_ROOT_BIG ? 1 << 24 : lr;
            memset(rb, 0xEE, sizeof rb);
            memset(sb, 0xEE, sizeof sb);
            for (size_t j = 0; j < (op == 1 ? 2 * bpr : bpr); j++)
                sb[j] = op == 1 ? pat(i, (int)(j / (bpr ? bpr : 1)), j % (bpr ? bpr : 1))
                                : pat(i, rank, j);
            int writer = op == 1 ? me_root : !me_root;
            if (!writer && i % 100 == 50)
                ms_sleep(2); /* the writer runs ahead */
            RANK_PASS(co_call(g, op, COHORT_UINT8, COHORT_MAX, sb, rb, bpr, lr, croot), g);
            if (op == 1) {
                for (size_t j = 0; j < bpr; j++)
                    RANK_CHECK(rb[j] == pat(i, rank, j), "scatter %d root %d (%zu B): byte %zu is %u",
                               i, lr, bpr, j, rb[j]);
            } else if (me_root) {
                for (size_t j = 0; j < bpr; j++) {
                    unsigned char a = pat(i, 0, j), b = pat(i, 1, j);
                    if (op == 2)
                        RANK_CHECK(rb[j] == a && rb[bpr + j] == b,
                                   "gather %d root %d (%zu B): byte %zu is %u/%u", i, lr, bpr, j,
                                   rb[j], rb[bpr + j]);
                    else
                        RANK_CHECK(rb[j] == (a > b ? a : b),
                                   "reduce %d root %d (%zu B): byte %zu is %u", i, lr, bpr, j,
                                   rb[j]);
                }
            }
            /* the writer publishes bpr bytes: a leaf its input, a
             * 2-rank scatter's root only the reader's block */
            if (writer && bpr)
                RANK_CHECK(co_wrote(s, op, lr) == (v != CO_ROOT_BIG && bpr <= SHM_RING_CINL),
                           "call %d (op %d, %zu B a rank): compact record %s", i, op, bpr,
                           bpr > SHM_RING_CINL  ? "written above its bound"
                           : v == CO_ROOT_BIG ? "written with a root >= 2^24"
                                              : "missing");
            if (op == 1 && me_root && bpr && bpr <= SHM_RING_INLINE) {
                /* the reader's block, at offset 0 of the root's record */
                const unsigned char *in = shm_ring_rec_of(s, lr, s->phase)->inl;
                for (size_t j = 0; j < bpr; j++)
                    RANK_CHECK(in[j] == pat(i, 1 - lr, j),
                               "scatter %d root %d (%zu B): inline byte %zu is %u, not the "
                               "reader's",
                               i, lr, bpr, j, in[j]);
            }
        }
        /* the writer (rank 0) runs 8 calls ahead; the reader changes the
         * payloads in its compact records before it reads: what it gets
         * shows the path taken */
        for (int op = 1; op <= 3 && v != CO_ROOT_BIG; op++) {
            RANK_PASS(ar(g), g);
            uint32_t p0 = s->phase;
            int lr = op == 1 ? 0 : 1; /* the writer is rank 0 */
            for (int i = 0; i < 8; i++) {
                if (rank == 1 && i == 0) {
                    th_wait_flag(op, hold_ms());
                    for (uint32_t p = p0 + 1; p <= p0 + 8; p++) {
                        shm_ring_crec *r = shm_ring_crec_of(s, 0, p);
                        RANK_CHECK(atomic_load(&r->phase) == p, "op %d: compact record %u missing",
                                   op, p);
                        memset(r->inl, 0xC5, 4); /* a scatter's: the reader's block */
                    }
                }
                memset(sb, 0x11, sizeof sb);
                memset(rb, 0, sizeof rb);
                RANK_PASS(co_call(g, op, COHORT_UINT8, COHORT_MAX, sb, rb, 4, lr, lr), g);
                unsigned char want = op == 1 ? (rank == 1 ? 0xC5 : 0x11) : 0xC5;
                unsigned char *got = op == 2 ? rb : rb; /* gather: rank 0's block first */
                if (rank == 1 || op == 1)
                    for (int j = 0; j < 4; j++)
                        RANK_CHECK(got[j] == want,
                                   "op %d call %d byte %d is %#x: the compact record was not read",
                                   op, i, j, got[j]);
            }
            if (rank == 0)
                atomic_store(&th_sh()->flag[op], 1);
        }
        RANK_PASS(ar(g), g);
        RANK_PASS(coh_shm_transport.close_check(g->shm, 5000), g);
        th_group_free(g);
        th_done(2);
        return 0;
    }
    int odd = rank == 1;
    uint64_t t0 = coh_now_ns();
    memset(sb, 0x5A, sizeof sb);
    switch (v) {
    case CO_G_COUNT: /* both compact */
        st = co_call(g, 2, COHORT_UINT8, -1, sb, rb, odd ? 4 : 8, 0, 0);
        break;
    case CO_R_COUNT_BIG: /* the root polls a compact record that never comes */
        st = co_call(g, 3, COHORT_UINT8, COHORT_SUM, sb, rb, odd ? 20 : 4, 0, 0);
        break;
    case CO_R_REDOP:
        st = co_call(g, 3, COHORT_UINT8, odd ? COHORT_MAX : COHORT_SUM, sb, rb, 4, 0, 0);
        break;
    case CO_S_DTYPE:
        st = co_call(g, 1, odd ? COHORT_INT8 : COHORT_UINT8, -1, sb, rb, 4, 0, 0);
        break;
    case CO_B_ROOT: case CO_S_ROOT: case CO_G_ROOT: case CO_R_ROOT:
        st = co_call(g, v - CO_B_ROOT, COHORT_UINT8, COHORT_SUM, sb, rb, 4, 0, odd ? 5 : 4);
        break;
    case CO_ROOT_BIG_ONE:
        st = co_call(g, 2, COHORT_UINT8, -1, sb, rb, 4, 0, odd ? 1 << 24 : 4);
        break;
    }
    return compact_verdict(rank, g, st, t0, 3000, "compact_ops", conames[v], cofields[v]);
}

START_TEST(compact_ops)
{
    int v = _i % CO_N;
    run_all_ok(2, 30000, pack_env(_i, CO_N), compact_ops_rank, &v);
}
END_TEST

/* ---- taking the next lines early (shm_seg.h): the ring writers' PREFETCHW ---- */

/* Does this cpu have PREFETCHW (what shm.c decides ring_pf from)? */
static int cpu_has_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8));
#else
    return 1;
#endif
}

/* 2 ranks (arg 0: the host's default depth; 1: COHORT_SHM_RING_SLOTS=8, a
 * ring too shallow for the slot lines): which calls take which lines
 * early, what cohort_describe says, and the data of calls whose writer ran
 * a lap of its class ahead of a reader that slept - the lines the writer
 * took early are then lines the reader has still to read, and the hint
 * must leave every value as it was. */
static int prefetch_rank(int rank, void *arg)
{
    int shallow = *(int *)arg;
    cohort_status st;
    cohort_group *g = th_group(rank, 2, 30000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    coh_shm *s = g->shm;
    RANK_CHECK(s->ring_pf == cpu_has_prefetchw(), "ring_pf %d, the cpu says %d", s->ring_pf,
               cpu_has_prefetchw());
#if defined(__x86_64__) || defined(__i386__)
    /* auto: compact records one a line on Intel with the hint, else two */
    size_t crec = cpu_has_prefetchw() && __builtin_cpu_is("intel") ? SHM_LINE : 32;
    RANK_CHECK(s->crec_stride == crec, "compact records %zu B apart, want %zu", s->crec_stride,
               crec);
#endif
    /* The default depth, 2 ranks a cpu each: the deep ring only where its
     * slots take at most half this core's L2 (shm.c read_ring_env) - not
     * on the AMD host (1 MiB L2 a core), where the default is 8 as with
     * COHORT_SHM_RING_SLOTS=8; ranks outnumbering cpus: the deepest. */
    long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    size_t deep_bytes = (size_t)SHM_DEEP_RING_SLOTS * SHM_DEFAULT_RING_BYTES;
    int deep = !shallow && (s->oversub || (l2 > 0 && 2 * deep_bytes <= (size_t)l2));
    RANK_CHECK(deep ? s->ring_k >= SHM_RING_PF_CYC_MIN : s->ring_k == 8,
               "ring %zu slots (want %s; L2 %ld B)", s->ring_k, deep ? ">= 32" : "8", l2);
    static const size_t bounds[] = {1, 16, 32, 33, 64, 256, 257, 1000, 4096, 4097, 16384};
    for (size_t i = 0; i < COH_ARRAY_LEN(bounds); i++) {
        size_t b = bounds[i];
        shm_ring_cls c = shm_ring_class(s, b);
        int want = b > SHM_RING_INLINE && b <= 4096 && c.cyc >= 32;
        RANK_CHECK(shm_ring_pf_slot(&c, b) == want, "%zu B (cyc %u): slot lines %d, want %d", b,
                   c.cyc, shm_ring_pf_slot(&c, b), want);
        RANK_CHECK(coh_shm_ring_prefetch(s, b) == (s->ring_pf ? 1 + want : 0),
                   "%zu B: coh_shm_ring_prefetch %d", b, coh_shm_ring_prefetch(s, b));
    }
    char d[2048];
    const char *both = "takes the record and slot lines of its call 8 on for writing (PREFETCHW)";
    const char *recs = "takes the record lines of its call 8 on for writing (PREFETCHW)";
    /* 64 B: the tiny ring's 128 slots either way; 1 KiB: 8 slots when not deep */
    RANK_PASS(cohort_describe(g, "broadcast", 64, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, both) || !s->ring_pf, "describe 64 B: %s", d);
    RANK_PASS(cohort_describe(g, "broadcast", 1024, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, deep ? both : recs) || !s->ring_pf, "describe 1 KiB: %s", d);
    RANK_PASS(cohort_describe(g, "broadcast", 8192, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, recs) || !s->ring_pf, "describe 8 KiB: %s", d);
    int pf = s->ring_pf;
    s->ring_pf = 0;
    RANK_PASS(cohort_describe(g, "broadcast", 64, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(!strstr(d, "PREFETCHW"), "describe without the hint: %s", d);
    s->ring_pf = pf;
    /* the writer a lap ahead: op 0 broadcast, 1 scatter (root 0 writes),
     * 2 gather (leaf 1 writes); per rank bytes */
    static const size_t per[] = {16, 32, 40, 200, 1000, 4096};
    unsigned char *sb = malloc(2 * 4096), *rb = malloc(2 * 4096);
    RANK_CHECK(sb && rb, "malloc");
    int lap = 0;
    for (int op = 0; op < 3; op++)
        for (size_t i = 0; i < COH_ARRAY_LEN(per); i++) {
            size_t bpr = per[i];
            if (op == 1 && 2 * bpr > s->ring_bytes / 2)
                continue; /* scatter: the ring's, not the single copy's */
            size_t bytes = op == 0 ? bpr : op == 1 ? (bpr <= SHM_RING_INLINE ? bpr : 2 * bpr) : bpr;
            int calls = (int)COH_MIN(shm_ring_class(s, bytes).cyc - 1, 100u);
            int writer = op == 2 ? 1 : 0;
            RANK_PASS(ar(g), g);
            uint32_t p0 = s->phase;
            lap++;
            /* the reader starts once the writer's lap is done */
            if (rank != writer)
                RANK_CHECK(flag_within(0, lap, hold_ms()), "op %d %zu B: the writer's lap",
                           op, bpr);
            for (int k = 0; k < calls; k++) {
                size_t sz = op == 1 ? 2 * bpr : bpr;
                for (size_t j = 0; j < sz; j++) /* a broadcast's reader: its buffer garbage */
                    sb[j] = op == 0 && rank != 0 ? 0xEE
                                                 : (unsigned char)(op == 2 ? pat(k, rank, j)
                                                                           : pat(k, 0, j));
                memset(rb, 0xEE, 2 * bpr);
                RANK_PASS(co_call(g, op, COHORT_UINT8, -1, sb, rb, bpr, 0, 0), g);
                if (rank == writer && k == calls - 1) {
                    RANK_CHECK(atomic_load(&shm_ctl_of(s, 1 - writer)->arrive) == p0,
                               "op %d %zu B: the reader at %u, the writer at %u", op, bpr,
                               atomic_load(&shm_ctl_of(s, 1 - writer)->arrive), s->phase);
                    atomic_store(&th_sh()->flag[0], lap);
                }
                for (size_t j = 0; j < bpr; j++) {
                    unsigned char want = op == 0   ? pat(k, 0, j)
                                         : op == 1 ? pat(k, 0, rank * bpr + j)
                                                   : pat(k, 1, j);
                    unsigned char got = op == 0 ? sb[j] : op == 2 ? rb[bpr + j] : rb[j];
                    if (op == 2 && rank != 0)
                        break;
                    RANK_CHECK(got == want, "op %d %zu B call %d byte %zu: %u, want %u", op, bpr,
                               k, j, got, want);
                }
            }
        }
    free(sb);
    free(rb);
    RANK_PASS(ar(g), g);
    RANK_PASS(coh_shm_transport.close_check(s, 5000), g);
    th_group_free(g);
    th_done(2);
    return 0;
}

START_TEST(prefetch)
{
    int shallow = _i;
    run_all_ok(2, 60000, shallow ? "COHORT_SHM_RING_SLOTS=8" : NULL, prefetch_rank, &shallow);
}
END_TEST

/* ---- dead root, dead reader ---- */

static int kill_rank(int rank, void *arg)
{
    int victim = *(int *)arg % 2;  /* 0: the root, 1: a reader */
    int path = *(int *)arg / 2;    /* 0: the tiny ring, 1: the ring, 2: ring pieces */
    size_t bytes = path == 2 ? 40000 : path ? 1000 : 64;
    if (path == 2)
        pin_one_cpu();
    depths(3);
    int kk = path ? K : KT;
    cohort_status st;
    cohort_group *g = th_group(rank, 3, 20000, &st);
    RANK_CHECK(g, "create: %s", cohort_status_name(st));
    RANK_CHECK(path != 2 || shm_ring_pieces(g->shm, bytes) == 3, "not in ring pieces");
    RANK_PASS(ar(g), g);
    static unsigned char buf[40000];
    if (rank == victim) {
        /* the others are waiting (readers) or running ahead (the root,
         * with all its slots outstanding once it waits for this reader) */
        ms_sleep(100);
        raise(SIGKILL);
    }
    uint64_t t0 = coh_now_ns();
    st = COHORT_OK;
    for (int i = 0; i < 4 * kk && st == COHORT_OK; i++)
        st = bc(g, buf, COHORT_UINT8, 0, bytes);
    if (st == COHORT_OK)
        st = ar(g);
    return expect_lost(g, rank, st, t0);
}

START_TEST(sigkill)
{
    int arg = _i, victim = _i % 2;
    ck_assert_ptr_nonnull(th_shared_init());
    cht_opts o = {.store_mode = victim ? CHT_STORE_RANK0 : CHT_STORE_PARENT, .nranks = 3,
                  .deadline_ms = 30000};
    cht_result r;
    cht_run_ranks(&o, kill_rank, &arg, &r);
    for (int i = 0; i < 3; i++) {
        ck_assert_msg(!r.hung[i], "rank %d hung", i);
        ck_assert_msg(r.status[i] == (i == victim ? 128 + SIGKILL : 0), "rank %d exited %d", i,
                      r.status[i]);
    }
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("shm_ring");
    TCase *tc = tcase_create("ring");
    tcase_add_loop_test(tc, back_to_back, 0, 6);
    tcase_add_loop_test(tc, mismatch, 0, 2 * R_N);
    tcase_add_loop_test(tc, sigkill, 0, 6);
    tcase_add_loop_test(tc, pieces, 0, 4);
    tcase_add_loop_test(tc, footprint, 0, 3);
    tcase_add_loop_test(tc, pieces_mismatch, 0, 11);
    tcase_add_loop_test(tc, pieces_forged, 0, 4);
    tcase_add_test(tc, lines);
    tcase_add_loop_test(tc, fast_reader, 0, 4);
    tcase_add_loop_test(tc, compact, 0, 2 * C_N);
    tcase_add_loop_test(tc, compact_ops, 0, 2 * CO_N);
    tcase_add_loop_test(tc, prefetch, 0, 2);
    tcase_add_loop_test(tc, rooted_back_to_back, 0, 4);
    tcase_add_loop_test(tc, rooted_sigkill, 0, 2);
    tcase_add_test(tc, rooted_sigstop);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
