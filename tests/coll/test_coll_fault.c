/*
 * test_coll_fault.c - failures inside the algorithms end in a precise error
 * on every rank, never a hang or wrong data:
 *   - one rank's count differs, under every message algorithm forced in turn
 *     (the first message that reaches a rank with the other count fails the
 *     group with COHORT_ERR_CONTRACT);
 *   - ranks forced to different algorithms (the step numbers disagree);
 *   - a scratch allocation fails on one rank mid-call (COHORT_ERR_NOMEM there,
 *     an error everywhere);
 *   - a rank exits before a ring all_reduce (COHORT_ERR_PEER_LOST);
 *   - a rank is SIGKILLed while a flat (or host_flat) broadcast is filling its buffer
 *     (COHORT_ERR_PEER_LOST naming it on every other rank);
 *   - the root of a 2-rank broadcast sent in one piece is SIGKILLed with the
 *     message half sent (COHORT_ERR_PEER_LOST at the leaf, naming it);
 *   - the root of a 4-rank tree broadcast sends a relay the header of its
 *     next call's first piece and withholds the body, never closing: the
 *     relay parks the header (park_ahead), then times out in that call
 *     naming the root and the message; every other rank fails with it.
 * Real processes over tcp; every wait bounded (COHORT_TIMEOUT=20, checked
 * to end well before).
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "coll/coll_int.h"
#include "support/support.h"
#include "transport/tcp/net.h"
#include "util/util.h"

enum { N = 4, COUNT = 300 };

typedef struct fcase {
    const char *coll; /* public name */
    const char *env;  /* COHORT_ALGO_... variable */
    const char *algo;
} fcase;

static const fcase algos[] = {
    {"all_reduce", "COHORT_ALGO_ALL_REDUCE", "ring"},
    {"all_reduce", "COHORT_ALGO_ALL_REDUCE", "rd"},
    {"all_reduce", "COHORT_ALGO_ALL_REDUCE", "rabenseifner"},
    {"broadcast", "COHORT_ALGO_BROADCAST", "tree"},
    {"broadcast", "COHORT_ALGO_BROADCAST", "scatter_allgather"},
    {"broadcast", "COHORT_ALGO_BROADCAST", "flat"},
    {"broadcast", "COHORT_ALGO_BROADCAST", "host_flat"},
    {"reduce", "COHORT_ALGO_REDUCE", "tree"},
    {"all_gather", "COHORT_ALGO_ALL_GATHER", "ring"},
    {"all_gather", "COHORT_ALGO_ALL_GATHER", "bruck"},
    {"gather", "COHORT_ALGO_GATHER", "linear"},
    {"gather", "COHORT_ALGO_GATHER", "tree"},
    {"scatter", "COHORT_ALGO_SCATTER", "linear"},
    {"scatter", "COHORT_ALGO_SCATTER", "tree"},
    {"reduce_scatter", "COHORT_ALGO_REDUCE_SCATTER", "ring"},
    {"reduce_scatter", "COHORT_ALGO_REDUCE_SCATTER", "direct"},
    {"all_to_all", "COHORT_ALGO_ALL_TO_ALL", "pairwise"},
};

static cohort_status issue(cohort_group *g, const char *coll, size_t count, float *a, float *b)
{
    if (!strcmp(coll, "all_reduce"))
        return cohort_all_reduce(g, a, b, count, COHORT_FLOAT32, COHORT_SUM);
    if (!strcmp(coll, "broadcast"))
        return cohort_broadcast(g, a, count, COHORT_FLOAT32, 1);
    if (!strcmp(coll, "reduce"))
        return cohort_reduce(g, a, b, count, COHORT_FLOAT32, COHORT_SUM, 1);
    if (!strcmp(coll, "all_gather"))
        return cohort_all_gather(g, a, b, count, COHORT_FLOAT32);
    if (!strcmp(coll, "gather"))
        return cohort_gather(g, a, b, count, COHORT_FLOAT32, 1);
    if (!strcmp(coll, "scatter"))
        return cohort_scatter(g, a, b, count, COHORT_FLOAT32, 1);
    if (!strcmp(coll, "reduce_scatter"))
        return cohort_reduce_scatter(g, a, b, count, COHORT_FLOAT32, COHORT_SUM);
    if (!strcmp(coll, "all_to_all"))
        return cohort_all_to_all(g, a, b, count, COHORT_FLOAT32);
    return COHORT_ERR_INVALID;
}

/* ---- count mismatch under each algorithm ---- */

/* A rank whose part of the call completes before anyone compares its
 * contract with the odd rank's (the broadcast root, gather's senders) may
 * return OK: the group is poisoned by then, so its next call fails with the
 * cause. Likewise a fast rank's mismatch may abort a slower rank's previous
 * call (the abort overtakes the last message of that call). So: the first
 * non-OK status, within the calls below, must be CONTRACT (or ABORTED
 * carrying it), name the count, and come quickly. */
static int rank_count(int rank, void *arg)
{
    const fcase *f = arg;
    setenv(f->env, f->algo, 1);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float a[(COUNT + 1) * N], b[(COUNT + 1) * N];
    double t0 = cht_now_ms();
    /* a good call first: the mismatch is not the first message ever */
    cohort_status st = issue(g, f->coll, COUNT, a, b);
    if (st == COHORT_OK)
        st = issue(g, f->coll, rank == N - 1 ? COUNT + 1 : COUNT, a, b);
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    double dt = cht_now_ms() - t0;
    const char *m = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_CONTRACT || st == COHORT_ERR_ABORTED, "%s/%s rank %d: %s: %s",
               f->coll, f->algo, rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "count"), "%s/%s rank %d: message does not name the count: %s", f->coll,
               f->algo, rank, m);
    RANK_CHECK(dt < 10000, "%s/%s: took %.0f ms", f->coll, f->algo, dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_count_mismatch)
{
    const fcase *f = &algos[_i];
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_CHUNK_BYTES=256"};
    cht_result r;
    cht_run_ranks(&o, rank_count, (void *)f, &r);
    for (int i = 0; i < N; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s/%s: rank %d: %s %d", f->coll, f->algo, i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* ---- ranks forced to different algorithms ---- */

static int rank_algo_mismatch(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    /* The rendezvous refuses ranks whose COHORT_ALGO_* differ
     * (tests/group/test_agree.c); the step numbers every message carries
     * are the defense for a choice that differs anyway (a bug, a setting
     * the rendezvous does not compare): forced here once the group is
     * made, before its first call fills the selection memo. */
    coh_free(g->algo_env[COH_COLL_ALL_REDUCE]);
    g->algo_env[COH_COLL_ALL_REDUCE] = coh_strdup(rank == 0 ? "ring" : "rabenseifner");
    RANK_CHECK(g->algo_env[COH_COLL_ALL_REDUCE], "oom");
    static float a[4096], b[4096];
    double t0 = cht_now_ms();
    cohort_status st = cohort_all_reduce(g, a, b, 4096, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank %d: %s: %s", rank, cohort_status_name(st),
               cohort_last_error(g));
    /* same call, different algorithm: the step numbers tell them apart */
    RANK_CHECK(strstr(cohort_last_error(g), "step"), "rank %d: %s", rank, cohort_last_error(g));
    RANK_CHECK(cht_now_ms() - t0 < 10000, "took %.0f ms", cht_now_ms() - t0);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_algo_mismatch)
{
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_algo_mismatch, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- allocation failure inside an algorithm ---- */

static int rank_oom(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float a[1000], b[1000];
    double t0 = cht_now_ms();
    /* (rank 1's failure in #2 may abort a slower rank's #1: see rank_count) */
    cohort_status st = cohort_all_reduce(g, a, b, 1000, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st == COHORT_OK || rank != 1, "rank 1: %s", cohort_last_error(g));
    if (st == COHORT_OK) {
        /* rank 1: this thread's next allocation (the recursive doubling
         * buffer) fails - this thread's, not the process's: once another
         * thread of the process allocated first, took the failure, and the
         * call succeeded (ASan CI, 2026-12-05) */
        if (rank == 1)
            coh_alloc_fail_after_here(0);
        st = cohort_all_reduce(g, a, b, 1000, COHORT_FLOAT32, COHORT_SUM);
        coh_alloc_fail_after_here(-1);
    }
    const char *m = cohort_last_error(g);
    RANK_CHECK(st != COHORT_OK, "rank %d: the call succeeded", rank);
    RANK_CHECK(strstr(m, "cannot allocate"), "rank %d: %s", rank, m);
    if (rank == 1)
        RANK_CHECK(st == COHORT_ERR_NOMEM && strstr(m, "cannot allocate"), "rank 1: %s: %s",
                   cohort_status_name(st), m);
    RANK_CHECK(cht_now_ms() - t0 < 10000, "rank %d: took %.0f ms", rank, cht_now_ms() - t0);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_oom)
{
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_ALGO_ALL_REDUCE=rd"};
    cht_result r;
    cht_run_ranks(&o, rank_oom, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a rank gone before a ring all_reduce ---- */

static int rank_exit(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float a[100000], b[100000];
    double t0 = cht_now_ms();
    /* The transport watches every connection, so a rank still finishing #1
     * may already see rank 2 gone: #1 or #2 fails, naming rank 2. */
    cohort_status st = cohort_all_reduce(g, a, b, 100000, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st == COHORT_OK || rank != 2, "rank 2: %s", cohort_last_error(g));
    if (rank == 2)
        _exit(0); /* no finalize: the peers see the connections close */
    if (st == COHORT_OK)
        st = cohort_all_reduce(g, a, b, 100000, COHORT_FLOAT32, COHORT_SUM);
    const char *m = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "rank %d: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "rank 2"), "rank %d: the dead rank is not named: %s", rank, m);
    RANK_CHECK(cht_now_ms() - t0 < 10000, "rank %d: took %.0f ms", rank, cht_now_ms() - t0);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_peer_exit)
{
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_ALGO_ALL_REDUCE=ring;"
                               "COHORT_CHUNK_BYTES=4096"};
    cht_result r;
    cht_run_ranks(&o, rank_exit, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a rank SIGKILLed in the middle of a flat broadcast ---- */

enum { KILL_BYTES = 32 << 20 };

/* Rank 2's watcher: as soon as the root's data starts landing in the
 * receive buffer (the root fills it with 0x5a, rank 2 starts at 0), the
 * broadcast is under way and far from done: kill the process. */
static void *kill_when_data(void *arg)
{
    volatile unsigned char *b = arg;
    while (b[0] == 0)
        usleep(100);
    kill(getpid(), SIGKILL);
    return NULL;
}

static int rank_bcast_kill(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    unsigned char *buf = calloc(KILL_BYTES, 1);
    RANK_CHECK(buf, "out of memory");
    if (rank == 0)
        memset(buf, 0x5a, KILL_BYTES);
    if (rank == 2) {
        pthread_t t;
        RANK_CHECK(pthread_create(&t, NULL, kill_when_data, buf) == 0, "pthread_create");
    }
    double t0 = cht_now_ms();
    cohort_status st = cohort_broadcast(g, buf, KILL_BYTES, COHORT_UINT8, 0);
    RANK_CHECK(rank != 2, "rank 2 finished the broadcast (%s) before it was killed",
               cohort_status_name(st));
    /* A receiver may have all its bytes before the root notices: then the
     * next call is the one that fails. The root cannot finish. */
    RANK_CHECK(st == COHORT_ERR_PEER_LOST || (st == COHORT_OK && rank != 0), "rank %d: %s: %s",
               rank, cohort_status_name(st), cohort_last_error(g));
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    const char *m = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "rank %d: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "rank 2"), "rank %d: the killed rank is not named: %s", rank, m);
    RANK_CHECK(cht_now_ms() - t0 < 10000, "rank %d: took %.0f ms", rank, cht_now_ms() - t0);
    free(buf);
    cohort_finalize(g);
    return 0;
}

/* flat, and host_flat (on one host: the root feeds every rank, in pieces) */
static const char *const kill_env[] = {"COHORT_TIMEOUT=20;COHORT_ALGO_BROADCAST=flat",
                                       "COHORT_TIMEOUT=20;COHORT_ALGO_BROADCAST=host_flat"};
START_TEST(test_bcast_kill)
{
    cht_opts o = {.nranks = N, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = kill_env[_i]};
    cht_result r;
    cht_run_ranks(&o, rank_bcast_kill, NULL, &r);
    for (int i = 0; i < N; i++)
        ck_assert_msg(i == 2 ? r.status[i] == 128 + SIGKILL : r.status[i] == 0 && !r.hung[i],
                      "rank %d: %s %d", i, r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

/* ---- the root of a one-piece 2-rank broadcast SIGKILLed mid-message ----
 *
 * COH_BC_ONE_PIECE_MAX bytes go as one message (coh_tree_bcast_plan).
 * Socket buffers of 64 KiB (COHORT_TCP_BUFSIZE; the kernel doubles them)
 * hold far less, and the leaf enters the call 1 s late, so the root is
 * still writing its one message when its watcher kills it after 300 ms.
 * The leaf then reads the header and part of the payload and must fail with
 * PEER_LOST naming rank 0 - not hang, not report success. */
static void *kill_after_300ms(void *arg)
{
    (void)arg;
    nanosleep(&(struct timespec){0, 300 * 1000000L}, NULL);
    kill(getpid(), SIGKILL);
    return NULL;
}

static int rank_one_piece_root_kill(int rank, void *arg)
{
    (void)arg;
    unsetenv("COHORT_CHUNK_BYTES"); /* the piece rule, not the knob */
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t len = COH_BC_ONE_PIECE_MAX;
    unsigned char *buf = calloc(len, 1);
    RANK_CHECK(buf, "out of memory");
    if (rank == 0)
        memset(buf, 0x5a, len);
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 0) {
        pthread_t t;
        RANK_CHECK(pthread_create(&t, NULL, kill_after_300ms, NULL) == 0, "pthread_create");
    } else {
        nanosleep(&(struct timespec){1, 0}, NULL);
    }
    double t0 = cht_now_ms();
    cohort_status st = cohort_broadcast(g, buf, len, COHORT_UINT8, 0);
    RANK_CHECK(rank != 0, "the root finished a %zu-byte broadcast (%s) its leaf had not entered",
               len, cohort_status_name(st));
    const char *m = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "leaf: %s: %s", cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "rank 0"), "leaf: the killed root is not named: %s", m);
    RANK_CHECK(strstr(m, "middle of a message") || strstr(m, "reset"),
               "leaf: the error does not say the message was cut: %s", m);
    RANK_CHECK(buf[0] == 0x5a, "leaf: no byte of the message arrived before the kill (%s)", m);
    RANK_CHECK(cht_now_ms() - t0 < 10000, "leaf: took %.0f ms", cht_now_ms() - t0);
    free(buf);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_one_piece_root_kill)
{
    cht_opts o = {.nranks = 2,
                  .deadline_ms = 40000,
                  .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_ALGO_BROADCAST=tree;"
                               "COHORT_TCP_BUFSIZE=65536"};
    cht_result r;
    cht_run_ranks(&o, rank_one_piece_root_kill, NULL, &r);
    ck_assert_msg(r.status[0] == 128 + SIGKILL, "root: %s %d", r.hung[0] ? "hung" : "exit",
                  r.status[0]);
    ck_assert_msg(r.status[1] == 0 && !r.hung[1], "leaf: %s %d", r.hung[1] ? "hung" : "exit",
                  r.status[1]);
}
END_TEST

/* ---- a tree broadcast's relay: the root announces a piece and withholds it ----
 *
 * Root 1; the tree is 1 -> {2, 3}, 3 -> 0, so rank 3 is the relay and rank 0
 * its child. Two 2 MiB broadcasts in 1 MiB pieces, socket buffers of
 * 64 KiB. Rank 0 enters the first call 1 s late: the relay's last batch of
 * that call (sending its child piece 1) waits on it, while the root
 * finishes and starts the second call, whose header (piece 0, 1 MiB)
 * reaches the relay then: parked (park_ahead), body left in the kernel.
 * The root's stream to the relay runs through a tap in the root (a
 * socketpair dup2'ed over its socket): the tap forwards the header the
 * root's own code wrote and swallows everything after, so the header is
 * exactly right and the body never comes; the connection stays open. The
 * relay (COHORT_TIMEOUT 2 s, the others 20 s) must fail the second call
 * with TIMEOUT naming rank 1 and the announced message; rank 0 (waiting on
 * the relay) and rank 2 (whose part of the call completes: its next call)
 * must fail with the relay's TIMEOUT. Nobody hangs. */
enum { WH_ROOT = 1, WH_RELAY = 3, WH_CHILD = 0, WH_LEAF = 2 };
#define WH_BYTES (2u << 20)

typedef struct wh_tap {
    int in;   /* our end of the socketpair the root writes into */
    int real; /* the root's real connection to the relay */
} wh_tap;

static void *wh_tap_main(void *p)
{
    wh_tap *t = p;
    unsigned char b[1 << 16];
    size_t got = 0;
    while (got < sizeof(coh_hdr)) {
        ssize_t r = read(t->in, b + got, sizeof(coh_hdr) - got);
        if (r <= 0)
            return NULL;
        got += (size_t)r;
    }
    ssize_t w = write(t->real, b, sizeof(coh_hdr));
    (void)w;
    while (read(t->in, b, sizeof b) > 0) {
    } /* the body goes nowhere */
    return NULL;
}

static int rank_withheld(int rank, void *arg)
{
    (void)arg;
    if (rank == WH_RELAY)
        setenv("COHORT_TIMEOUT", "2", 1);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    unsigned char *buf = calloc(WH_BYTES, 1);
    RANK_CHECK(buf, "out of memory");
    RANK_PASS(cohort_barrier(g), g);
    if (rank == WH_CHILD)
        nanosleep(&(struct timespec){1, 0}, NULL);
    RANK_PASS(cohort_broadcast(g, buf, WH_BYTES, COHORT_UINT8, WH_ROOT), g);
    if (rank == WH_ROOT) {
        /* the tap, then the second call as usual: its sends to the relay
         * end in the tap, those to rank 2 go out */
        struct coh_net *net = g->net;
        int fd = net->c[WH_RELAY].fd, sp[2];
        static wh_tap tap;
        RANK_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, "socketpair");
        tap.real = dup(fd);
        tap.in = sp[1];
        RANK_CHECK(tap.real >= 0 && dup2(sp[0], fd) == fd, "dup2");
        close(sp[0]);
        pthread_t th;
        RANK_CHECK(pthread_create(&th, NULL, wh_tap_main, &tap) == 0, "pthread_create");
        cohort_status st = cohort_broadcast(g, buf, WH_BYTES, COHORT_UINT8, WH_ROOT);
        fprintf(stderr, "withheld: root's second call: %s\n", cohort_status_name(st));
        /* never sends the body, never closes, until the others are done */
        nanosleep(&(struct timespec){8, 0}, NULL);
        _exit(0);
    }
    double t0 = cht_now_ms();
    cohort_status st = cohort_broadcast(g, buf, WH_BYTES, COHORT_UINT8, WH_ROOT);
    int completed = st == COHORT_OK;
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    double dt = cht_now_ms() - t0;
    const char *m = cohort_last_error(g);
    fprintf(stderr, "withheld: rank %d: %s after %.0f ms: %s\n", rank, cohort_status_name(st), dt,
            m);
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "rank %d: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "waiting for rank 1: it announced broadcast #") &&
                   strstr(m, "0 of 1048576 bytes arrived"),
               "rank %d: the error does not name rank 1 and its message: %s", rank, m);
    RANK_CHECK(rank == WH_LEAF || !completed, "rank %d: the second call succeeded", rank);
    if (rank == WH_RELAY) {
        coh_net_tx_stats ts;
        coh_net_get_tx_stats(g->net, &ts);
        RANK_CHECK(ts.parks >= 1, "the relay parked nothing (%ld)", ts.parks);
        RANK_CHECK(dt >= 2000 && dt < 4000 * cht_time_scale(), "relay: %.0f ms", dt);
    } else {
        /* the relay's own failure (by its abort frame, or the store's
         * record, whichever comes first), not one of this rank's own */
        RANK_CHECK(strstr(m, "on rank 3 has waited"), "rank %d: %s", rank, m);
        RANK_CHECK(dt < 5000 * cht_time_scale(), "rank %d: %.0f ms", rank, dt);
    }
    free(buf);
    cohort_finalize(g);
    return 0;
}

START_TEST(test_bcast_relay_withheld_body)
{
    cht_opts o = {.nranks = N,
                  .deadline_ms = 40000,
                  .transport = "tcp",
                  .extra_env = "COHORT_TIMEOUT=20;COHORT_ALGO_BROADCAST=tree;"
                               "COHORT_CHUNK_BYTES=1048576;COHORT_TCP_BUFSIZE=65536"};
    cht_result r;
    cht_run_ranks(&o, rank_withheld, NULL, &r);
    for (int i = 0; i < N; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "rank %d: %s %d", i,
                      r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coll_fault");
    TCase *t = tcase_create("fault");
    tcase_set_timeout(t, 60);
    tcase_add_loop_test(t, test_count_mismatch, 0, sizeof algos / sizeof algos[0]);
    tcase_add_test(t, test_algo_mismatch);
    tcase_add_test(t, test_oom);
    tcase_add_test(t, test_peer_exit);
    tcase_add_loop_test(t, test_bcast_kill, 0, 2);
    tcase_add_test(t, test_one_piece_root_kill);
    tcase_add_test(t, test_bcast_relay_withheld_body);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
