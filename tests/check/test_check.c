/* test_check.c - the external-collective checker (include/cohort_check.h)
 * on real processes: a correct program with several groups is never
 * flagged and every call is compared; each field's mismatch, a skipped and
 * an extra call, a mismatch inside a sub-group, a stall warning, a timeout
 * and a wait-for cycle each end with the same report on every rank, through
 * the handler, while the ranks are blocked inside a "backend".
 *
 * The backend stands for MPI or gloo: a barrier through the store (add +
 * wait), matched by arrival order only, so a skipped call silently pairs
 * with the next one as it would in MPI. The handler plays MPI_Abort: it
 * writes the report to <dir>/r<rank>, the event kind to <dir>/r<rank>.kind,
 * and kills its process.
 * Both transports are covered: the shared segment and the store. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check/check_int.h"
#include "cohort_check.h"
#include "core/group.h"
#include "support/support.h"

enum scen {
    S_CLEAN,
    S_COUNT,
    S_SIG,
    S_REDOP,
    S_ROOT,
    S_OP,
    S_ARGS,
    S_SKIP,
    S_EXTRA,
    S_SPLIT,
    S_STALL,
    S_TIMEOUT,
    S_DEADLOCK,
    S_LATE_LAZY,
    S_BURST,
    S_SENDRECV,
    S_SLOWPEER,
    S_COUNT_NRW, /* S_COUNT with o.no_report_wait: failing calls return at once */
    S_REDOP_LATE, /* S_REDOP while rank 1 reaches the call after the others found it */
    S_DEADLOCK_LATE, /* a cycle after many quick (never published) p2p waits */
    S_P2P_RETRACT,   /* waits published (they lasted) and ended: no stale position */
    S_THREADS,       /* the biased lock: one calling thread, then two at once */
    S_LATE_GROUP,    /* rank 1 registers the group after the others found its first call bad */
    S_TICKS,         /* the monitor's tick: 50 ms while calls are quick, 10 ms once one lasts */
    S_STORE_STALE,   /* a wait published to the store, then compute: the store says idle */
    S_STAMPS,        /* rank 1 stamps every slot of its record ring past its head */
};

typedef struct scase {
    enum scen s;
    int nranks;
    int transport;
    int want_exit;       /* 40 + kind, or 0 */
    const char *want[4]; /* substrings of every rank's report */
} scase;

typedef struct targ {
    const scase *sc;
    int wrap;            /* first lap every rank's ring twice (chk_slot; check_int.h) */
    char dir[128];
    _Atomic int *flag;   /* a page shared by the ranks (MAP_SHARED, before the fork) */
} targ;

static targ g_arg;
static int g_rank;

static void write_file(const char *suffix, const char *text, const char *mode)
{
    char path[256];
    snprintf(path, sizeof path, "%s/r%d%s", g_arg.dir, g_rank, suffix);
    FILE *f = fopen(path, mode);
    if (f) {
        fprintf(f, "%s\n", text);
        fclose(f);
    }
}

static void handler(void *arg, const cohort_check_event *ev)
{
    (void)arg;
    if (ev->kind == COHORT_CHECK_STALL) {
        write_file(".stall", ev->text, "a");
        return;
    }
    char line[16];
    snprintf(line, sizeof line, "%d", ev->kind);
    write_file(".kind", line, "w");
    write_file("", ev->text, "w");
    fprintf(stderr, "rank %d: checker event %d: %s\n", g_rank, ev->kind, ev->text);
}

/* As MPI_Abort ends a rank: killed, no exit handlers (and no sanitizer
 * exit-time reports about the threads it could not join). */
static void end_job(void *arg, const cohort_check_event *ev)
{
    (void)arg, (void)ev;
    raise(SIGKILL);
}

/* The fake backend: a barrier through the store, matched by arrival
 * order. Blocks (bounded by 60 s) like a real one. */
static void backend(cohort_group *w, int n)
{
    static int k;
    char key[32], go[40];
    snprintf(key, sizeof key, "be/%d", ++k);
    snprintf(go, sizeof go, "be/%d/go", k);
    int64_t v = 0;
    cohort_store_add(w->store, key, strlen(key), 1, &v);
    if (v == n)
        cohort_store_sets(w->store, go, "1");
    char *val = NULL;
    cohort_store_gets(w->store, go, &val, 60000);
    free(val);
}

static int call(cohort_check *c, cohort_check_group *grp, cohort_group *w, int bn,
                const cohort_check_fp *fp, int synced)
{
    uint64_t seq;
    cohort_status st = cohort_check_begin(c, grp, fp, &seq);
    if (st != COHORT_OK && g_arg.sc->s == S_COUNT_NRW) {
        /* returned at once: wait for the report here (the handler ends
         * the process once every rank has it) */
        RANK_CHECK(cohort_check_report_wait(c, 20000) == COHORT_ERR_CONTRACT,
                   "report_wait after a failing begin: %s", cohort_check_last_error(c));
    }
    if (st != COHORT_OK) {
        /* A mismatch already known (the predecessor was ahead): the
         * handler ends the process (bounded). */
        sleep(20);
        RANK_CHECK(0, "begin failed but the handler did not end the process: %s",
                   cohort_check_last_error(c));
    }
    backend(w, bn);
    st = cohort_check_end(c, grp, seq, synced ? COHORT_CHECK_SYNCED : 0);
    if (st != COHORT_OK && g_arg.sc->s == S_COUNT_NRW)
        RANK_CHECK(cohort_check_report_wait(c, 20000) == COHORT_ERR_CONTRACT,
                   "report_wait after a failing end: %s", cohort_check_last_error(c));
    if (st != COHORT_OK) {
        /* The detecting rank: the handler ends the process (bounded). */
        sleep(20);
        RANK_CHECK(0, "end failed but the handler did not end the process: %s",
                   cohort_check_last_error(c));
    }
    return 0;
}

static cohort_check_fp fpx(const char *op, uint64_t count, const char *redop, int root, int line)
{
    cohort_check_fp f;
    memset(&f, 0, sizeof f);
    f.op = op;
    f.sig_hash = 0x1111;
    f.sig = "int32";
    f.count = count;
    f.redop = redop;
    f.root = root;
    f.file = "app.c";
    f.line = line;
    return f;
}

/* S_THREADS: a second calling thread. Each makes `n` calls on its own
 * group and, interleaved, on a group both threads use at once (MPI forbids
 * that, but the checker must stay consistent: identical calls pair in
 * arrival order, so nothing differs). No backend: the ring fills and
 * drains (ring_reserve with two threads). */
typedef struct thr_arg {
    cohort_check *c;
    cohort_check_group *own, *shared;
    int n, bad;
    uint64_t last_own;
} thr_arg;

static void *thr_calls(void *p)
{
    thr_arg *a = p;
    for (int i = 0; i < a->n && !a->bad; i++) {
        cohort_check_fp f;
        memset(&f, 0, sizeof f);
        f.op = i % 2 ? "Ibcast" : "Iallreduce";
        f.count = (uint64_t)i;
        f.file = "thr.c";
        f.line = 1;
        uint64_t s;
        if (cohort_check_begin(a->c, a->own, &f, &s) != COHORT_OK ||
            cohort_check_end(a->c, a->own, s, 0) != COHORT_OK)
            a->bad = 1;
        a->last_own = s;
        if (i % 4 == 0) {
            f.op = "Ibarrier";
            f.count = 0;
            if (cohort_check_begin(a->c, a->shared, &f, &s) != COHORT_OK ||
                cohort_check_end(a->c, a->shared, s, 0) != COHORT_OK)
                a->bad = 1;
        }
    }
    return NULL;
}

static int rank_main(int rank, void *arg)
{
    const scase *sc = ((targ *)arg)->sc;
    g_arg = *(targ *)arg;
    g_rank = rank;
    cohort_group *w;
    RANK_PASS(cohort_init(&w), NULL);
    cohort_check_options o;
    cohort_check_options_init(&o);
    o.handler = handler;
    o.abort = end_job;
    o.transport = sc->transport;
    o.stall_warn_ms = sc->s == S_STALL ? 700 : -1;
    o.timeout_ms = sc->s == S_TIMEOUT || sc->s == S_STAMPS ? 1500 : -1;
    o.deadlock_ms = 600;
    o.no_report_wait = sc->s == S_COUNT_NRW;
    cohort_check *c;
    RANK_PASS(cohort_check_create(w, &o, &c), NULL);
    int n = sc->nranks;
    int world[8], sub[8], ns = 0;
    for (int i = 0; i < n; i++) {
        world[i] = i;
        if (i % 2 == 1)
            sub[ns++] = i;
    }
    cohort_check_group *gw, *gs = NULL;
    RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 0, world, n), world, n, &gw),
              NULL);
    cohort_check_group_name(c, gw, "WORLD");
    if (rank % 2 == 1) {
        RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 1, sub, ns), sub, ns, &gs),
                  NULL);
        cohort_check_group_name(c, gs, "ODD");
    }
    /* Two members on this host compare each other (the torch wrapper then
     * checks after the backend instead of before it); anything else not. */
    RANK_CHECK(cohort_check_group_mutual(gw) == (n == 2 && sc->transport == 0),
               "WORLD of %d (transport %d): mutual %d", n, sc->transport,
               cohort_check_group_mutual(gw));
    if (gs)
        RANK_CHECK(cohort_check_group_mutual(gs) == (ns == 2 && sc->transport == 0),
                   "ODD of %d: mutual %d", ns, cohort_check_group_mutual(gs));
    int odd = rank == n - 1;
    cohort_check_fp f;
    /* warm-up: a few good calls, mixed, some synced */
    for (int i = 0; i < 5; i++) {
        f = fpx(i % 2 ? "Bcast" : "Allreduce", 1024, i % 2 ? NULL : "SUM", i % 2 ? 0 : -1, 10 + i);
        call(c, gw, w, n, &f, i % 2 == 0);
    }
    if (g_arg.wrap) {
        /* Twice round the ring (2048 records) and then some, unsynced (the
         * ring fills and drains), every other call with per-member
         * arguments that change from call to call: a record's args word
         * read from the wrong slot or lap would differ, and each field's
         * mismatch below is then found in a reused slot. */
        uint64_t ws = 0;
        for (int i = 0; i < 2 * 2048 + 100; i++) {
            f = fpx(i % 2 ? "Allgatherv" : "Allreduce", (uint64_t)i, i % 2 ? NULL : "SUM", -1, 30);
            if (i % 2) {
                f.args_hash = 0x600d0000u + (uint64_t)i;
                f.args = "recvcounts 1,1,1,1";
            }
            RANK_PASS(cohort_check_begin(c, gw, &f, &ws), NULL);
            RANK_PASS(cohort_check_end(c, gw, ws, 0), NULL);
        }
        /* Every rank compared its calls and left the laps, as after the
         * warm-up's last (synced) call: the report then finds every rank
         * at the call below. */
        RANK_PASS(cohort_check_wait(c, gw, ws, 20000), NULL);
        backend(w, n);
    }
    switch (sc->s) {
    case S_CLEAN:
    case S_LATE_LAZY: {
        uint64_t last_sub = 0;
        for (int i = 0; i < 200; i++) {
            f = fpx(i % 3 ? "Allreduce" : "Barrier", (uint64_t)i, i % 3 ? "SUM" : NULL, -1, 100);
            if (sc->s == S_LATE_LAZY && rank == 0 && i % 50 == 0)
                usleep(30000); /* a slow rank: neighbours compare lazily */
            call(c, gw, w, n, &f, i % 2);
            if (gs && i % 10 == 0) {
                f = fpx("Gather", 8, NULL, 1, 101);
                uint64_t s;
                RANK_PASS(cohort_check_begin(c, gs, &f, &s), NULL);
                RANK_PASS(cohort_check_end(c, gs, s, 0), NULL);
                last_sub = s;
            }
        }
        if (gs)
            RANK_PASS(cohort_check_wait(c, gs, last_sub, 20000), NULL);
        break;
    }
    case S_BURST: {
        /* No backend at all: writers outrun readers, fill the ring (2048
         * records) and wait for it to drain; a group registered late on
         * some ranks receives records before it exists (orphans). */
        if (rank == 1)
            usleep(100 * 1000);
        int all[8];
        for (int i = 0; i < n; i++)
            all[i] = n - 1 - i; /* another order: other neighbours */
        cohort_check_group *gr;
        RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 7, all, n), all, n, &gr),
                  NULL);
        uint64_t s = 0;
        for (int i = 0; i < 6000; i++) {
            f = fpx(i % 2 ? "Ibcast" : "Iallreduce", (uint64_t)i, NULL, -1, 60);
            RANK_PASS(cohort_check_begin(c, i % 3 ? gw : gr, &f, &s), NULL);
            RANK_PASS(cohort_check_end(c, i % 3 ? gw : gr, s, 0), NULL);
        }
        RANK_PASS(cohort_check_wait(c, gr, s, 20000), NULL);
        cohort_check_group_remove(c, gr);
        break;
    }
    case S_COUNT:
    case S_COUNT_NRW:
        f = fpx("Allreduce", odd ? 512 : 1024, "SUM", -1, 40);
        call(c, gw, w, n, &f, 1);
        break;
    case S_SIG:
        f = fpx("Allreduce", 1024, "SUM", -1, 41);
        if (odd) {
            f.sig_hash = 0x2222;
            f.sig = "float32";
        }
        call(c, gw, w, n, &f, 1);
        break;
    case S_REDOP:
    case S_REDOP_LATE:
        if (sc->s == S_REDOP_LATE && rank == 1)
            usleep(600 * 1000); /* the others compare and fail without it */
        f = fpx("Allreduce", 1024, odd ? "MAX" : "SUM", -1, 42);
        call(c, gw, w, n, &f, 1);
        break;
    case S_ROOT:
        f = fpx("Bcast", 1024, NULL, odd ? 0 : 3, 43);
        call(c, gw, w, n, &f, 0);
        f = fpx("Barrier", 0, NULL, -1, 44);
        call(c, gw, w, n, &f, 1);
        break;
    case S_LATE_GROUP: {
        /* torch registers its default group when init_process_group returns:
         * the others may fail its first call before a slow rank has it. */
        if (rank == 1)
            usleep(600 * 1000);
        cohort_check_group *gl;
        RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 9, world, n), world, n, &gl),
                  NULL);
        cohort_check_group_name(c, gl, "LATE");
        f = fpx("Allreduce", 1024, odd ? "MAX" : "SUM", -1, 48);
        call(c, gl, w, n, &f, 1);
        break;
    }
    case S_OP:
        f = fpx(odd ? "Allgather" : "Allreduce", 1024, odd ? NULL : "SUM", -1, 45);
        call(c, gw, w, n, &f, 1);
        break;
    case S_ARGS:
        f = fpx("Allgatherv", 1024, NULL, -1, 46);
        f.args_hash = odd ? 0xbad : 0x600d;
        f.args = odd ? "recvcounts 1,1,2,0" : "recvcounts 1,1,1,1";
        call(c, gw, w, n, &f, 1);
        break;
    case S_SKIP:
        /* the last rank skips the first of two different calls */
        if (!odd) {
            f = fpx("Bcast", 1024, NULL, 0, 47);
            call(c, gw, w, n, &f, 0);
        }
        f = fpx("Allreduce", 1024, "SUM", -1, 48);
        call(c, gw, w, n, &f, 1);
        f = fpx("Barrier", 0, NULL, -1, 49);
        call(c, gw, w, n, &f, 1);
        break;
    case S_EXTRA:
        if (odd) {
            f = fpx("Bcast", 1024, NULL, 0, 50);
            call(c, gw, w, n, &f, 0);
        }
        f = fpx("Allreduce", 1024, "SUM", -1, 51);
        call(c, gw, w, n, &f, 1);
        f = fpx("Barrier", 0, NULL, -1, 52);
        call(c, gw, w, n, &f, 1);
        break;
    case S_SPLIT:
        if (gs) {
            f = fpx("Reduce", rank == 3 ? 7 : 8, "SUM", 0, 53);
            call(c, gs, w, ns, &f, 0);
            f = fpx("Barrier", 0, NULL, -1, 54);
            call(c, gs, w, ns, &f, 1);
        }
        f = fpx("Barrier", 0, NULL, -1, 55);
        call(c, gw, w, n, &f, 1);
        break;
    case S_STALL:
        if (rank == 1)
            usleep(2000 * 1000);
        f = fpx("Allreduce", 1024, "SUM", -1, 56);
        call(c, gw, w, n, &f, 1);
        break;
    case S_STAMPS:
        /* A broken or hostile writer (its aux region is shared memory):
         * its successor must not loop on the stamps with the checker's
         * lock held - it reports the ring corrupt, on every rank. */
        if (rank == 1) {
            chk_slot *ring = (chk_slot *)((unsigned char *)c->my_aux + CHK_RING_OFF);
            for (unsigned i = 0; i < CHK_RING_N; i++)
                atomic_store(&ring[i].stamp, i % 2 ? UINT64_MAX : (uint64_t)1 << 40);
        }
        f = fpx("Allreduce", 1024, "SUM", -1, 58);
        call(c, gw, w, n, &f, 1); /* the handler ends the process */
        break;
    case S_TIMEOUT:
        if (rank == 1)
            sleep(30); /* never arrives in time */
        f = fpx("Allreduce", 1024, "SUM", -1, 57);
        call(c, gw, w, n, &f, 1);
        break;
    case S_DEADLOCK:
        /* both ranks "block in MPI_Recv" from each other */
        cohort_check_wait_begin(c, gw, 1 - rank, 5, 0, "MPI_Recv", "a.c", rank ? 52 : 40, NULL);
        sleep(30);
        cohort_check_wait_end(c);
        break;
    case S_DEADLOCK_LATE:
        /* 200000 quick waits (the lazy path: none lasts a monitor tick, so
         * none is published), a few that last 30 ms (published, then
         * retracted), then the cycle: still reported, with its sites.
         * The 30 ms waits are a probe and the send it waits for (a pair
         * that progresses, never a cycle): two probes waiting for each
         * other are a deadlock as soon as they last deadlock_ms, which a
         * 30 ms sleep did once under load (the report named them). */
        for (int i = 0; i < 200000; i++) {
            cohort_check_wait_begin(c, gw, 1 - rank, 5, i & 1, i & 1 ? "MPI_Send" : "MPI_Recv",
                                    NULL, 0, NULL);
            cohort_check_wait_end(c);
        }
        for (int i = 0; i < 5; i++) {
            cohort_check_wait_begin(c, gw, 1 - rank, 5, rank, rank ? "MPI_Send" : "MPI_Probe",
                                    "b.c", rank ? 8 : 7, NULL);
            usleep(30 * 1000);
            cohort_check_wait_end(c);
        }
        f = fpx("Barrier", 0, NULL, -1, 61);
        call(c, gw, w, n, &f, 1);
        cohort_check_wait_begin(c, gw, 1 - rank, 5, 0, "MPI_Recv", "a.c", rank ? 52 : 40, NULL);
        sleep(30);
        cohort_check_wait_end(c);
        break;
    case S_STORE_STALE:
        /* Rank 1 waits on rank 0 for 500 ms (long enough to reach the
         * store: 200 ms), then computes for 2.5 s, in no wait; rank 0, from
         * 700 ms on, waits on rank 1 for 2 s. Before 2026-12-02 the store
         * kept rank 1's ended wait (an idle position was never written)
         * and rank 0 reported the cycle 0 -> 1 -> 0 at rank 1's old site:
         * under load the same stale wait named S_DEADLOCK_LATE's 30 ms
         * MPI_Probe instead of its real cycle. */
        if (rank == 1) {
            cohort_check_wait_begin(c, gw, 0, 5, 0, "MPI_Probe", "b.c", 9, NULL);
            usleep(500 * 1000);
            cohort_check_wait_end(c);
            usleep(2500 * 1000);
        } else {
            usleep(700 * 1000);
            cohort_check_wait_begin(c, gw, 1, 5, 0, "MPI_Recv", "a.c", 72, NULL);
            usleep(2000 * 1000);
            cohort_check_wait_end(c);
        }
        break;
    case S_P2P_RETRACT:
        /* Rank 0 waits on rank 1 long enough to be published (200 ms), then
         * computes for 2.5 s, in no wait; meanwhile rank 1 waits on rank 0
         * for 2 s (twice deadlock_ms). A position of rank 0's not retracted
         * would close a cycle 1 -> 0 -> 1 and be reported as a deadlock. */
        if (rank == 0) {
            cohort_check_wait_begin(c, gw, 1, 5, 0, "MPI_Recv", "a.c", 70, NULL);
            usleep(200 * 1000);
            cohort_check_wait_end(c);
            usleep(2500 * 1000);
        } else {
            usleep(300 * 1000);
            cohort_check_wait_begin(c, gw, 0, 5, 0, "MPI_Recv", "a.c", 71, NULL);
            usleep(2000 * 1000);
            cohort_check_wait_end(c);
        }
        break;
    case S_SLOWPEER: {
        /* A wait for a neighbour that comes 400 ms late: spins and yields
         * briefly, then sleeps on its futex word - the waiting rank must
         * not burn a CPU the neighbour may need - and is woken by the
         * record, not by a timeout. Late by construction: rank 1 starts
         * its 400 ms only once rank 0 has taken t0 (a shared flag), so
         * rank 0 waits >= 400 ms however the two are scheduled (a fixed
         * sleep alone let a descheduled rank 0 arrive after rank 1). */
        f = fpx("Allreduce", 1024, "SUM", -1, 58);
        uint64_t s;
        if (rank == 1) {
            uint64_t end = coh_now_ns() + 20000000000ull;
            while (!atomic_load(&g_arg.flag[0]) && coh_now_ns() < end)
                usleep(1000);
            RANK_CHECK(atomic_load(&g_arg.flag[0]), "rank 0 never reached its wait");
            usleep(400 * 1000);
        }
        RANK_PASS(cohort_check_begin(c, gw, &f, &s), NULL);
        struct timespec c0, c1;
        uint64_t t0 = coh_now_ns();
        if (rank == 0)
            atomic_store(&g_arg.flag[0], 1);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
        RANK_PASS(cohort_check_wait(c, gw, s, 20000), NULL);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
        double cpu_ms = (double)(c1.tv_sec - c0.tv_sec) * 1e3 + (c1.tv_nsec - c0.tv_nsec) / 1e6;
        double wall_ms = (double)(coh_now_ns() - t0) / 1e6;
        if (rank == 0) {
            RANK_CHECK(wall_ms > 200, "rank 0 did not wait for the late neighbour (%.1f ms)",
                       wall_ms);
            RANK_CHECK(cpu_ms < 50, "rank 0 burnt %.1f ms of CPU in a %.1f ms wait", cpu_ms,
                       wall_ms);
        }
        backend(w, n);
        RANK_PASS(cohort_check_end(c, gw, s, COHORT_CHECK_SYNCED), NULL);
        break;
    }
    case S_THREADS: {
        /* The warm-up's calls came from this thread alone: all but the
         * first of them (which claims the bias) take no mutex, bar the
         * monitor's revokes (one per 10 ms tick, microseconds on one host;
         * through the store, each tick's round trips: not asserted). */
        cohort_check_stats s0, s1, s2;
        cohort_check_get_stats(c, &s0);
        const char *fl = getenv("COHORT_CHECK_FASTLOCK");
        RANK_CHECK(s0.unlocked > 0 || sc->transport || (fl && !strcmp(fl, "0")),
                   "one calling thread, %" PRIu64 " calls: none took the fast path", s0.calls);
        int all[8];
        for (int i = 0; i < n; i++)
            all[i] = i;
        cohort_check_group *ga, *gb, *gsh;
        RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 21, all, n), all, n, &ga),
                  NULL);
        RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 22, all, n), all, n, &gb),
                  NULL);
        RANK_PASS(cohort_check_group_add(c, cohort_check_group_id(0, 23, all, n), all, n, &gsh),
                  NULL);
        thr_arg ta = {c, ga, gsh, 3000, 0, 0}, tb = {c, gb, gsh, 3000, 0, 0};
        pthread_t t1, t2;
        RANK_CHECK(pthread_create(&t1, NULL, thr_calls, &ta) == 0, "pthread_create");
        RANK_CHECK(pthread_create(&t2, NULL, thr_calls, &tb) == 0, "pthread_create");
        pthread_join(t1, NULL);
        pthread_join(t2, NULL);
        RANK_CHECK(!ta.bad && !tb.bad, "a threaded call failed: %s", cohort_check_last_error(c));
        RANK_PASS(cohort_check_wait(c, ga, ta.last_own, 20000), NULL);
        RANK_PASS(cohort_check_wait(c, gb, tb.last_own, 20000), NULL);
        /* Calls from a second thread switched the fast path off for good. */
        cohort_check_get_stats(c, &s1);
        for (int i = 0; i < 20; i++) {
            f = fpx("Allreduce", 8, "SUM", -1, 70);
            call(c, gw, w, n, &f, i % 2);
        }
        cohort_check_get_stats(c, &s2);
        RANK_CHECK(s2.unlocked == s1.unlocked,
                   "after a second calling thread, %" PRIu64 " calls took the fast path",
                   s2.unlocked - s1.unlocked);
        uint64_t ls = 1500; /* both threads' calls on the shared group: 2 x 750 */
        RANK_PASS(cohort_check_wait(c, gsh, ls, 20000), NULL);
        cohort_check_group_remove(c, ga);
        cohort_check_group_remove(c, gb);
        cohort_check_group_remove(c, gsh);
        break;
    }
    case S_TICKS: {
        /* Quick calls (each within microseconds, 2 ms apart): the monitor
         * ticks every 50 ms, not 10 (a wake-up costs the calling threads'
         * cores; check_mon.c). At most wall/25 ticks: a tick can only come
         * late under load, never early. */
        cohort_check_stats s0, s1, s2;
        cohort_check_get_stats(c, &s0);
        uint64_t t0 = coh_now_ns();
        for (int i = 0; i < 300; i++) {
            f = fpx("Allreduce", 8, "SUM", -1, 80);
            uint64_t s;
            RANK_PASS(cohort_check_begin(c, gw, &f, &s), NULL);
            RANK_PASS(cohort_check_end(c, gw, s, 0), NULL);
            usleep(2000);
        }
        uint64_t t1 = coh_now_ns();
        cohort_check_get_stats(c, &s1);
        uint64_t ms = (t1 - t0) / 1000000ull, ticks = s1.ticks - s0.ticks;
        RANK_CHECK(ticks <= ms / 25 + 2, "%" PRIu64 " monitor ticks in %" PRIu64
                   " ms of quick calls (the 50 ms tick gives about %" PRIu64 ")",
                   ticks, ms, ms / 50);
        /* A call that lasts (blocked in the backend, where only the monitor
         * finds a mismatch or a stall): back to 10 ms from the next tick.
         * More than 50 ms ticks can give (wall/50 + 1: a timed sleep never
         * ends early); not wall/10, since under a sanitizer and load each
         * tick comes late (37 in 1033 ms seen). */
        f = fpx("Allreduce", 8, "SUM", -1, 81);
        uint64_t s;
        RANK_PASS(cohort_check_begin(c, gw, &f, &s), NULL);
        usleep(800 * 1000);
        cohort_check_get_stats(c, &s2);
        uint64_t t2 = coh_now_ns();
        backend(w, n);
        RANK_PASS(cohort_check_end(c, gw, s, COHORT_CHECK_SYNCED), NULL);
        ms = (t2 - t1) / 1000000ull, ticks = s2.ticks - s1.ticks;
        RANK_CHECK(ticks >= ms / 50 + 5, "%" PRIu64 " monitor ticks in %" PRIu64
                   " ms of one lasting call (the 10 ms tick gives about %" PRIu64 ")",
                   ticks, ms, ms / 10);
        fprintf(stderr, "rank %d: ticks: quick calls %" PRIu64 " in %" PRIu64
                " ms, a lasting call %" PRIu64 " in %" PRIu64 " ms\n", rank,
                s1.ticks - s0.ticks, (uint64_t)((t1 - t0) / 1000000u), ticks, ms);
        break;
    }
    case S_SENDRECV:
        /* a send and the receive it waits for match: a slow transfer, not a
         * deadlock (both "blocked" for 2 s, twice deadlock_ms) */
        cohort_check_wait_begin(c, gw, 1 - rank, 5, rank == 0, rank ? "MPI_Recv" : "MPI_Send",
                                "a.c", 60, NULL);
        usleep(2000 * 1000);
        cohort_check_wait_end(c);
        break;
    }
    /* A correct end: the closing check, then every counter checked. */
    f = fpx("Finalize", 0, NULL, -1, 99);
    uint64_t s;
    cohort_status st = cohort_check_begin(c, gw, &f, &s);
    if (st == COHORT_OK)
        st = cohort_check_close(c, 20000);
    /* a failure found elsewhere (a mismatch, a timeout, a ring some
     * process broke - S_STAMPS): the handler ends this rank with its code,
     * and close may return the same failure first */
    if (st == COHORT_ERR_CONTRACT || st == COHORT_ERR_TIMEOUT || st == COHORT_ERR_PROTOCOL)
        sleep(20);
    RANK_CHECK(st == COHORT_OK, "close: %s: %s", cohort_status_name(st),
               cohort_check_last_error(c));
    cohort_check_stats stats;
    cohort_check_get_stats(c, &stats);
    fprintf(stderr,
            "rank %d: calls %" PRIu64 " compared %" PRIu64 " lazy %" PRIu64 " ring waits %" PRIu64
            "\n",
            rank, stats.calls, stats.compared, stats.lazy, stats.ring_waits);
    RANK_CHECK(stats.compared == stats.calls, "compared %" PRIu64 " of %" PRIu64, stats.compared,
               stats.calls);
    if (sc->s == S_STALL && rank != 1) {
        char path[256];
        snprintf(path, sizeof path, "%s/r%d.stall", g_arg.dir, rank);
        RANK_CHECK(access(path, F_OK) == 0, "no stall warning on rank %d", rank);
    }
    cohort_check_group_remove(c, gs);
    cohort_check_group_remove(c, gw);
    cohort_check_destroy(c);
    cohort_finalize(w);
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strdup(buf);
}

static void run_case(const scase *sc, int wrap)
{
    targ a;
    memset(&a, 0, sizeof a);
    a.sc = sc;
    a.wrap = wrap;
    snprintf(a.dir, sizeof a.dir, "/tmp/cohort-check-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(a.dir));
    a.flag = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(a.flag, MAP_FAILED);
    cht_opts o = {.nranks = sc->nranks, .deadline_ms = 45000, .extra_env = "COHORT_TIMEOUT=60"};
    cht_result r;
    cht_run_ranks(&o, rank_main, &a, &r);
    char *first = NULL;
    for (int i = 0; i < sc->nranks; i++)
        if (r.status[i] != (sc->want_exit ? 128 + SIGKILL : 0) || r.hung[i])
            fprintf(stderr, "scenario %d transport %d: rank %d exited %d%s\n", sc->s,
                    sc->transport, i, r.status[i], r.hung[i] ? " (hung)" : "");
    for (int i = 0; i < sc->nranks; i++) {
        ck_assert_msg(!r.hung[i], "scenario %d transport %d: rank %d hung", sc->s, sc->transport,
                      i);
        int want = sc->want_exit ? 128 + SIGKILL : 0;
        ck_assert_msg(r.status[i] == want,
                      "scenario %d transport %d: rank %d exited %d, wanted %d", sc->s,
                      sc->transport, i, r.status[i], want);
        if (!sc->want_exit)
            continue;
        char path[256];
        snprintf(path, sizeof path, "%s/r%d.kind", a.dir, i);
        char *k = slurp(path);
        ck_assert_msg(k && atoi(k) + 40 == sc->want_exit, "scenario %d: rank %d: event kind %s",
                      sc->s, i, k ? k : "(none)");
        free(k);
        snprintf(path, sizeof path, "%s/r%d", a.dir, i);
        char *t = slurp(path);
        ck_assert_msg(t != NULL, "scenario %d: rank %d wrote no report", sc->s, i);
        for (int k2 = 0; k2 < 4 && sc->want[k2]; k2++)
            ck_assert_msg(strstr(t, sc->want[k2]), "scenario %d: rank %d: missing '%s' in: %s",
                          sc->s, i, sc->want[k2], t);
        if (!first)
            first = t;
        else {
            ck_assert_msg(!strcmp(first, t), "scenario %d: rank %d's report differs:\n%s\nvs\n%s",
                          sc->s, i, t, first);
            free(t);
        }
        unlink(path);
    }
    free(first);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", a.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", a.dir);
    munmap((void *)a.flag, 4096);
}

#define MIS (40 + COHORT_CHECK_MISMATCH)
static const scase cases[] = {
    {S_CLEAN, 4, 0, 0, {NULL}},
    {S_LATE_LAZY, 4, 0, 0, {NULL}},
    {S_BURST, 4, 0, 0, {NULL}},
    {S_BURST, 3, 1, 0, {NULL}},
    {S_COUNT, 4, 0, MIS, {"WORLD: Allreduce #6 (app.c:40): count differs", "ranks 0-2 have 1024",
                          "rank 3 has 512"}},
    {S_SIG, 4, 0, MIS, {"type signature differs", "ranks 0-2 have int32", "rank 3 has float32"}},
    {S_REDOP, 4, 0, MIS, {"reduce op differs", "ranks 0-2 have SUM", "rank 3 has MAX"}},
    {S_ROOT, 4, 0, MIS, {"Bcast #6", "root differs", "ranks 0-2 have 3", "rank 3 has 0"}},
    {S_OP, 4, 0, MIS, {"operation differs", "ranks 0-2 have Allreduce", "rank 3 has Allgather"}},
    {S_ARGS, 4, 0, MIS, {"arguments differ", "recvcounts 1,1,1,1", "rank 3 has recvcounts 1,1,2,0"}},
    {S_SKIP, 4, 0, MIS, {"rank 3", "skipped", "Bcast #6", "app.c:47"}},
    {S_EXTRA, 4, 0, MIS, {"operation differs: ranks 0-2 have Allreduce, rank 3 has Bcast",
                          "rank 3's call at app.c:50", "an extra or a skipped call"}},
    {S_SPLIT, 4, 0, MIS, {"ODD: Reduce #1: count differs", "rank 0 has 8 (app.c:53)",
                          "rank 1 has 7 (app.c:53)", "world ranks: 1,3"}},
    {S_STALL, 4, 0, 0, {NULL}},
    {S_TIMEOUT, 3, 0, 40 + COHORT_CHECK_TIMEOUT,
     {"timed out", "Allreduce #6 of WORLD (app.c:57)", "member 1 (rank 1) in no checked call",
      "last finished Allreduce #5"}},
    {S_DEADLOCK, 2, 0, 40 + COHORT_CHECK_DEADLOCK,
     {"deadlock: rank 0 waits for rank 1 in MPI_Recv at a.c:40",
      "rank 1 waits for rank 0 in MPI_Recv at a.c:52"}},
    {S_SENDRECV, 2, 0, 0, {NULL}},
    {S_SLOWPEER, 2, 0, 0, {NULL}},
    {S_COUNT_NRW, 4, 0, MIS, {"count differs", "ranks 0-2 have 1024", "rank 3 has 512"}},
    /* rank 1's late call is in its history, so it counts with the majority */
    {S_REDOP_LATE, 4, 0, MIS, {"Allreduce #6 (app.c:42): reduce op differs", "ranks 0-2 have SUM",
                               "rank 3 has MAX"}},
    {S_DEADLOCK_LATE, 2, 0, 40 + COHORT_CHECK_DEADLOCK,
     {"deadlock: rank 0 waits for rank 1 in MPI_Recv at a.c:40",
      "rank 1 waits for rank 0 in MPI_Recv at a.c:52"}},
    /* and so is a call in a group rank 1 registered after the failure */
    {S_LATE_GROUP, 4, 0, MIS, {"LATE: Allreduce #1 (app.c:48): reduce op differs",
                               "ranks 0-2 have SUM", "rank 3 has MAX"}},
    {S_P2P_RETRACT, 2, 0, 0, {NULL}},
    {S_THREADS, 2, 0, 0, {NULL}},
    {S_THREADS, 4, 0, 0, {NULL}},
    {S_TICKS, 2, 0, 0, {NULL}},
    /* the store path */
    {S_CLEAN, 4, 1, 0, {NULL}},
    {S_COUNT, 4, 1, MIS, {"count differs", "ranks 0-2 have 1024", "rank 3 has 512"}},
    {S_SKIP, 4, 1, MIS, {"rank 3", "skipped", "Bcast #6"}},
    {S_DEADLOCK, 2, 1, 40 + COHORT_CHECK_DEADLOCK,
     {"deadlock: rank 0 waits for rank 1 in MPI_Recv at a.c:40"}},
    {S_SENDRECV, 2, 1, 0, {NULL}},
    {S_DEADLOCK_LATE, 2, 1, 40 + COHORT_CHECK_DEADLOCK,
     {"deadlock: rank 0 waits for rank 1 in MPI_Recv at a.c:40"}},
    {S_P2P_RETRACT, 2, 1, 0, {NULL}},
    {S_THREADS, 3, 1, 0, {NULL}},
    {S_STORE_STALE, 2, 1, 0, {NULL}},
    {S_STAMPS, 3, 0, 40 + COHORT_CHECK_ABORTED,
     {"the record ring of rank 1 is corrupt", "a broken or hostile process"}},
};

/* Each field's mismatch (and a skipped call's site) after every rank's
 * ring wrapped twice: the checks above, later calls, reused slots. */
static const scase wrap_cases[] = {
    {S_COUNT, 4, 0, MIS, {"WORLD: Allreduce #4202 (app.c:40): count differs", "ranks 0-2 have 1024",
                          "rank 3 has 512"}},
    {S_SIG, 4, 0, MIS, {"type signature differs", "ranks 0-2 have int32", "rank 3 has float32"}},
    {S_REDOP, 4, 0, MIS, {"reduce op differs", "ranks 0-2 have SUM", "rank 3 has MAX"}},
    {S_ROOT, 4, 0, MIS, {"Bcast #4202", "root differs", "ranks 0-2 have 3", "rank 3 has 0"}},
    {S_OP, 4, 0, MIS, {"operation differs", "ranks 0-2 have Allreduce", "rank 3 has Allgather"}},
    {S_ARGS, 4, 0, MIS, {"arguments differ", "recvcounts 1,1,1,1", "rank 3 has recvcounts 1,1,2,0"}},
    {S_SKIP, 4, 0, MIS, {"rank 3", "skipped", "Bcast #4202", "app.c:47"}},
    {S_CLEAN, 2, 0, 0, {NULL}},
};

START_TEST(check_scenario)
{
    const char *only = getenv("CHECK_ONLY"); /* one scenario index, for debugging */
    if (!only || atoi(only) == _i)
        run_case(&cases[_i], 0);
}
END_TEST

START_TEST(check_wrapped)
{
    const char *only = getenv("CHECK_WRAP_ONLY");
    if (!only || atoi(only) == _i)
        run_case(&wrap_cases[_i], 1);
}
END_TEST

/* Local validation: no communication needed to refuse bad arguments. */
START_TEST(check_args)
{
    cohort_check_group *g = (void *)1;
    CHT_EXPECT(cohort_check_group_add(NULL, 1, (int[]){0}, 1, &g), COHORT_ERR_INVALID, NULL);
    ck_assert_ptr_null(g);
    CHT_EXPECT(cohort_check_create(NULL, NULL, &(cohort_check *){NULL}), COHORT_ERR_INVALID, NULL);
    int a[3] = {0, 1, 2}, b[3] = {0, 1, 2}, d[3] = {0, 2, 1};
    ck_assert(cohort_check_group_id(0, 1, a, 3) == cohort_check_group_id(0, 1, b, 3));
    ck_assert(cohort_check_group_id(0, 1, a, 3) != cohort_check_group_id(0, 2, a, 3));
    ck_assert(cohort_check_group_id(0, 1, a, 3) != cohort_check_group_id(0, 1, d, 3));
    ck_assert(cohort_check_group_id(5, 1, a, 3) != cohort_check_group_id(0, 1, a, 3));
    ck_assert_int_eq(cohort_check_group_mutual(NULL), 0);
    CHT_EXPECT(cohort_check_report_wait(NULL, 0), COHORT_ERR_INVALID, NULL);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("check");
    TCase *tc = tcase_create("check");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, check_args);
    tcase_add_loop_test(tc, check_scenario, 0, (int)(sizeof cases / sizeof cases[0]));
    tcase_add_loop_test(tc, check_wrapped, 0, (int)(sizeof wrap_cases / sizeof wrap_cases[0]));
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
