/*
 * test_tcp_data.c - tcp transport data path: sizes, concurrency (no
 * deadlock on full socket buffers), unexpected messages, p2p tag matching,
 * unexpected-message budget, clean close, the congestion control each
 * connection gets (COHORT_TCP_CONGESTION).
 */
#include <arpa/inet.h>
#include <check.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixture.h"
#include "transport/tcp/net.h" /* TCP_DUPLEX_SLICE_DEFAULT */
#include "support/support.h"

#define COLL COH_MSG_COLL
#define P2P COH_MSG_P2P

/* ---- ping-pong over many sizes, including 0 and more than the socket buffers ---- */

static const size_t pp_sizes[] = {0,    1,     7,         64,         1000,       4096,
                                  65536, 65537, 1u << 20, 3u << 20, 64u << 20};

static int pingpong_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    int peer = 1 - r->rank;
    uint64_t seq = 0;
    for (size_t k = 0; k < COH_ARRAY_LEN(pp_sizes); k++) {
        size_t len = pp_sizes[k];
        unsigned char *buf = malloc(len ? len : 1);
        TF_CHECK(r, buf, "malloc");
        for (int rep = 0; rep < 3; rep++) {
            coh_call c = tf_call(++seq, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, len);
            if (r->rank == 0) {
                tf_fill(buf, len, seq);
                TF_OK(r, tf_send(r, &c, COLL, peer, buf, len, 0));
                memset(buf, 0, len);
                TF_OK(r, tf_recv(r, &c, COLL, peer, buf, len, 1));
                long bad = tf_check(buf, len, seq * 7);
                TF_CHECK(r, bad < 0, "size %zu: echo differs at %ld", len, bad);
            } else {
                memset(buf, 0xee, len);
                TF_OK(r, tf_recv(r, &c, COLL, peer, buf, len, 0));
                long bad = tf_check(buf, len, seq);
                TF_CHECK(r, bad < 0, "size %zu: data differs at %ld", len, bad);
                tf_fill(buf, len, seq * 7);
                TF_OK(r, tf_send(r, &c, COLL, peer, buf, len, 1));
            }
        }
        free(buf);
    }
    return 0;
}

START_TEST(pingpong_sizes)
{
    tf_opts o = {.nranks = 2};
    tf_result res;
    tf_shared *sh = tf_run(&o, pingpong_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- ring step and pairwise exchange, both directions at once, large ---- */

static int ring_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    int n = r->size, right = (r->rank + 1) % n, left = (r->rank + n - 1) % n;
    const size_t sizes[] = {1, 4096, 1u << 20, 24u << 20};
    uint64_t seq = 0;
    for (size_t k = 0; k < COH_ARRAY_LEN(sizes); k++) {
        size_t len = sizes[k];
        unsigned char *sb = malloc(len), *rb = malloc(len);
        TF_CHECK(r, sb && rb, "malloc");
        for (int step = 0; step < n - 1; step++) {
            coh_call c = tf_call(++seq, COH_COLL_ALL_GATHER, COHORT_UINT8, -1, -1, 0, len);
            tf_fill(sb, len, seq * 100 + (uint64_t)r->rank);
            memset(rb, 0, len);
            /* Receive listed first on purpose: order in the batch is free. */
            coh_xfer ops[2];
            tf_op(&ops[0], r, &c, COLL, left, 0, rb, len, (uint32_t)step);
            tf_op(&ops[1], r, &c, COLL, right, 1, sb, len, (uint32_t)step);
            TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, 2)));
            long bad = tf_check(rb, len, seq * 100 + (uint64_t)left);
            TF_CHECK(r, bad < 0, "ring size %zu step %d: differs at %ld", len, step, bad);
        }
        /* Pairwise with partner rank^1: both send and receive in one batch. */
        int partner = r->rank ^ 1;
        if (partner < n) {
            coh_call c = tf_call(++seq, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, len);
            tf_fill(sb, len, seq * 100 + (uint64_t)r->rank);
            coh_xfer ops[2];
            tf_op(&ops[0], r, &c, COLL, partner, 1, sb, len, 0);
            tf_op(&ops[1], r, &c, COLL, partner, 0, rb, len, 0);
            TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, 2)));
            long bad = tf_check(rb, len, seq * 100 + (uint64_t)partner);
            TF_CHECK(r, bad < 0, "pairwise size %zu: differs at %ld", len, bad);
        } else {
            ++seq;
        }
        free(sb);
        free(rb);
    }
    /* Send-only batches in both directions before either receives: works
     * because each side stashes the other's message while blocked. */
    if ((r->rank ^ 1) < n) {
        int partner = r->rank ^ 1;
        size_t len = 16u << 20;
        unsigned char *sb = malloc(len), *rb = malloc(len);
        TF_CHECK(r, sb && rb, "malloc");
        coh_call c = tf_call(++seq, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, len);
        tf_fill(sb, len, 4242 + (uint64_t)r->rank);
        TF_OK(r, tf_send(r, &c, COLL, partner, sb, len, 0));
        TF_OK(r, tf_recv(r, &c, COLL, partner, rb, len, 0));
        long bad = tf_check(rb, len, 4242 + (uint64_t)partner);
        TF_CHECK(r, bad < 0, "send-first exchange differs at %ld", bad);
        free(sb);
        free(rb);
    }
    return 0;
}

START_TEST(ring_bidirectional_large)
{
    tf_opts o = {.nranks = 4};
    tf_result res;
    tf_shared *sh = tf_run(&o, ring_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- sends cut into slices (COHORT_TCP_SEND_SLICE): one stream per peer ---- */

/* Several sends to the same peer in one batch, both directions at once,
 * with slices smaller than the header (7), odd (1000) and the size that
 * large messages are cut at: the pass that writes a slice of one message
 * must not start the next message to that peer before the first is done. */
static const size_t slice_lens[] = {0, 5, 70000, 1u << 20, 13, 3u << 20};

static int slice_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    int peer = 1 - r->rank;
    enum { K = COH_ARRAY_LEN(slice_lens) };
    unsigned char *sb[K], *rb[K];
    coh_xfer ops[2 * K];
    for (int rep = 0; rep < 3; rep++) {
        uint64_t seq = (uint64_t)rep + 1;
        coh_call c = tf_call(seq, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, 1);
        int nops = 0;
        for (int k = 0; k < K; k++) {
            sb[k] = malloc(slice_lens[k] + 1);
            rb[k] = malloc(slice_lens[k] + 1);
            TF_CHECK(r, sb[k] && rb[k], "malloc");
            tf_fill(sb[k], slice_lens[k], seq * 1000 + (uint64_t)(k * 2 + r->rank));
            memset(rb[k], 0, slice_lens[k] + 1);
            /* the receives first on one rank, the sends first on the other */
            int s_first = r->rank == 0;
            tf_op(&ops[nops++], r, &c, COLL, peer, s_first, s_first ? sb[k] : rb[k],
                  slice_lens[k], (uint32_t)k);
            tf_op(&ops[nops++], r, &c, COLL, peer, !s_first, s_first ? rb[k] : sb[k],
                  slice_lens[k], (uint32_t)k);
        }
        TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, nops)));
        for (int k = 0; k < K; k++) {
            long bad = tf_check(rb[k], slice_lens[k], seq * 1000 + (uint64_t)(k * 2 + peer));
            TF_CHECK(r, bad < 0, "rep %d message %d (%zu B): differs at %ld", rep, k,
                     slice_lens[k], bad);
            free(sb[k]);
            free(rb[k]);
        }
    }
    return 0;
}

static const char *const slice_env[] = {"COHORT_TCP_SEND_SLICE=7", "COHORT_TCP_SEND_SLICE=1000",
                                        "COHORT_TCP_SEND_SLICE=131072",
                                        "COHORT_TCP_SEND_SLICE=0"};

START_TEST(sliced_sends_keep_stream_order)
{
    tf_opts o = {.nranks = 2, .env = slice_env[_i]};
    tf_result res;
    tf_shared *sh = tf_run(&o, slice_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- a long transfer that always progresses is not a stall ---- */

/* 4 MiB each way in 7-byte slices: hundreds of thousands of passes, every
 * one of which moves data, so the batch outlasts the 1.5 s group timeout
 * without ever waiting until one side's last receive. The stall clock must
 * restart with that progress: before 2026-12-02 it restarted only after a
 * wait, and this batch's first wait was judged from the batch's start
 * (COHORT_ERR_TIMEOUT "has waited 44.4 s" under load). */
#define LONG_LEN (4u << 20)

static int long_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    int peer = 1 - r->rank;
    unsigned char *sb = malloc(LONG_LEN), *rb = malloc(LONG_LEN);
    TF_CHECK(r, sb && rb, "malloc");
    tf_fill(sb, LONG_LEN, 77 + (uint64_t)r->rank);
    coh_call c = tf_call(1, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, 1);
    coh_xfer ops[2];
    tf_op(&ops[0], r, &c, COLL, peer, 1, sb, LONG_LEN, 0);
    tf_op(&ops[1], r, &c, COLL, peer, 0, rb, LONG_LEN, 0);
    uint64_t t0 = tf_now_ns();
    TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, 2)));
    double s = (double)(tf_now_ns() - t0) / 1e9;
    long bad = tf_check(rb, LONG_LEN, 77 + (uint64_t)peer);
    TF_CHECK(r, bad < 0, "differs at %ld", bad);
    fprintf(stderr, "long_transfer: rank %d: %.2f s (group timeout 1.5 s)\n", r->rank, s);
    free(sb);
    free(rb);
    return 0;
}

START_TEST(long_transfer_not_a_stall)
{
    tf_opts o = {.nranks = 2, .timeout_ms = 1500, .env = "COHORT_TCP_SEND_SLICE=7"};
    tf_result res;
    tf_shared *sh = tf_run(&o, long_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- the busy-poll before a sleep: 200 us with a CPU per rank ---- */

/* The rule alone: a CPU for each of this machine's ranks -> 200 us, more
 * ranks than CPUs or an unknown count -> 20 us. */
START_TEST(spin_default_rule)
{
    ck_assert_uint_eq(coh_tcp_spin_default_us(1, 1), 200);
    ck_assert_uint_eq(coh_tcp_spin_default_us(2, 2), 200);
    ck_assert_uint_eq(coh_tcp_spin_default_us(2, 16), 200);
    ck_assert_uint_eq(coh_tcp_spin_default_us(3, 2), 20);
    ck_assert_uint_eq(coh_tcp_spin_default_us(16, 2), 20);
    ck_assert_uint_eq(coh_tcp_spin_default_us(2, 0), 20);
    ck_assert_uint_eq(coh_tcp_spin_default_us(2, -1), 20);
}
END_TEST

/* ...and coh_net_connect applying it to the machine's rank count the
 * rendezvous found (set here, so the case does not depend on this
 * machine's CPUs), unless COHORT_TCP_SPIN_US says otherwise. */
typedef struct spin_case {
    int oversub;      /* machine_size: 1, or one more than the online CPUs */
    uint64_t want_us; /* 0: the rule's */
    const char *env;
} spin_case;

static const spin_case spin_cases[] = {
    {0, 200, NULL},
    {1, 20, NULL},
    {0, 57, "COHORT_TCP_SPIN_US=57"},
    {1, 57, "COHORT_TCP_SPIN_US=57"},
    {0, 0, "COHORT_TCP_SPIN_US=0"},
};

static int spin_body(tf_rank *r)
{
    const spin_case *sc = r->arg;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    r->g.machine_size = sc->oversub ? (int)cpus + 1 : 1;
    if (tf_connect(r))
        return 1;
    uint64_t got = coh_net_spin_ns(r->net);
    TF_CHECK(r, got == sc->want_us * 1000,
             "spin %llu ns with %d ranks on %ld CPUs (%s), expected %llu", (unsigned long long)got, r->g.machine_size, cpus, sc->env ? sc->env : "no env",
             (unsigned long long)sc->want_us * 1000);
    /* and the data path still works with it */
    int peer = 1 - r->rank;
    unsigned char b[64];
    coh_call c = tf_call(1, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, 1);
    if (r->rank == 0) {
        tf_fill(b, sizeof b, 5);
        TF_OK(r, tf_send(r, &c, COLL, peer, b, sizeof b, 0));
    } else {
        TF_OK(r, tf_recv(r, &c, COLL, peer, b, sizeof b, 0));
        TF_CHECK(r, tf_check(b, sizeof b, 5) < 0, "message differs");
    }
    return 0;
}

START_TEST(spin_default_applied)
{
    tf_opts o = {.nranks = 2, .env = spin_cases[_i].env};
    tf_result res;
    tf_shared *sh = tf_run(&o, spin_body, (void *)&spin_cases[_i], &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- the duplex rule (COHORT_TCP_DUPLEX_SLICE): which sends are cut ---- */

/* Odd sizes around a slice's end (the slice counts header + payload), one
 * below, at and past it, and a large one that spans many slices. */
static const size_t dx_lens[] = {1, 999, 70001, (1u << 19) + 13};

typedef struct dx_case {
    long duplex;      /* COHORT_TCP_DUPLEX_SLICE the ranks run with */
    long every;       /* COHORT_TCP_SEND_SLICE (0: unset) */
    const char *env;
} dx_case;

static const dx_case dx_cases[] = {
    {1000, 0, "COHORT_TCP_DUPLEX_SLICE=1000"},
    {7, 0, "COHORT_TCP_DUPLEX_SLICE=7"},
    {128 * 1024, 0, "COHORT_TCP_DUPLEX_SLICE=131072"},
    {TCP_DUPLEX_SLICE_DEFAULT, 0, NULL},
    {0, 0, "COHORT_TCP_DUPLEX_SLICE=0"},
    {1000, 4096, "COHORT_TCP_DUPLEX_SLICE=1000;COHORT_TCP_SEND_SLICE=4096"},
};

/* Sends of `lens` whose header + payload exceed `slice` (the ones cut). */
static long dx_over(size_t slice)
{
    long k = 0;
    for (size_t i = 0; i < COH_ARRAY_LEN(dx_lens); i++)
        k += slice && sizeof(coh_hdr) + dx_lens[i] > slice;
    return k;
}

static int dx_body(tf_rank *r)
{
    const dx_case *dc = r->arg;
    if (tf_connect(r))
        return 1;
    int peer = 1 - r->rank;
    enum { K = COH_ARRAY_LEN(dx_lens) };
    coh_net_tx_stats a, b;
    uint64_t seq = 0;
    /* 1. An exchange: every message both ways in one batch (all_reduce's step). */
    unsigned char *sb[K], *rb[K];
    coh_xfer ops[2 * K];
    coh_call c = tf_call(++seq, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, 1);
    int nops = 0;
    for (int k = 0; k < K; k++) {
        sb[k] = malloc(dx_lens[k]);
        rb[k] = malloc(dx_lens[k] + 1);
        TF_CHECK(r, sb[k] && rb[k], "malloc");
        tf_fill(sb[k], dx_lens[k], seq * 100 + (uint64_t)(k * 2 + r->rank));
        memset(rb[k], 0, dx_lens[k] + 1);
        tf_op(&ops[nops++], r, &c, COLL, peer, 1, sb[k], dx_lens[k], (uint32_t)k);
        tf_op(&ops[nops++], r, &c, COLL, peer, 0, rb[k], dx_lens[k], (uint32_t)k);
    }
    coh_net_get_tx_stats(r->net, &a);
    TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, nops)));
    coh_net_get_tx_stats(r->net, &b);
    for (int k = 0; k < K; k++) {
        long bad = tf_check(rb[k], dx_lens[k], seq * 100 + (uint64_t)(k * 2 + peer));
        TF_CHECK(r, bad < 0, "exchange message %d (%zu B): differs at %ld", k, dx_lens[k], bad);
        TF_CHECK(r, rb[k][dx_lens[k]] == 0, "exchange message %d: written past its end", k);
    }
    size_t want = dc->every ? (size_t)dc->every : (size_t)dc->duplex;
    long cut = dx_over(want);
    TF_CHECK(r, b.sliced - a.sliced == cut && b.whole - a.whole == K - cut,
             "exchange, slice %zu: %ld sliced %ld whole, expected %ld and %ld", want,
             b.sliced - a.sliced, b.whole - a.whole, cut, K - cut);
    TF_CHECK(r, b.duplex - a.duplex == (dc->every ? 0 : cut), "exchange: %ld by the duplex rule",
             b.duplex - a.duplex);
    TF_CHECK(r, b.last_slice == want, "exchange: last slice %zu, expected %zu", b.last_slice,
             want);
    /* the 512 KiB message alone needs many passes once cut */
    TF_CHECK(r, !want || b.slice_writes - a.slice_writes >= (long)(dx_lens[K - 1] / want) - 1,
             "exchange: %ld writes stopped at a slice's end for slice %zu",
             b.slice_writes - a.slice_writes, want);
    TF_CHECK(r, want || b.slice_writes == a.slice_writes, "exchange: sliced with no slice");

    /* 2. One way only (a broadcast's step): rank 0 sends, rank 1 receives. The
     * duplex rule leaves the sends whole; COHORT_TCP_SEND_SLICE still cuts. */
    c = tf_call(++seq, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 1);
    nops = 0;
    for (int k = 0; k < K; k++) {
        if (r->rank == 0)
            tf_fill(sb[k], dx_lens[k], seq * 100 + (uint64_t)k);
        memset(rb[k], 0, dx_lens[k] + 1);
        tf_op(&ops[nops++], r, &c, COLL, peer, r->rank == 0, r->rank == 0 ? sb[k] : rb[k],
              dx_lens[k], (uint32_t)k);
    }
    coh_net_get_tx_stats(r->net, &a);
    TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, nops)));
    coh_net_get_tx_stats(r->net, &b);
    if (r->rank == 0) {
        cut = dx_over((size_t)dc->every);
        TF_CHECK(r, b.sliced - a.sliced == cut && b.whole - a.whole == K - cut,
                 "one way: %ld sliced %ld whole, expected %ld and %ld", b.sliced - a.sliced,
                 b.whole - a.whole, cut, K - cut);
        TF_CHECK(r, b.duplex == a.duplex && b.last_slice == (size_t)dc->every,
                 "one way: %ld by the duplex rule, last slice %zu", b.duplex - a.duplex,
                 b.last_slice);
    } else {
        TF_CHECK(r, b.sliced == a.sliced && b.whole == a.whole, "receiver counted sends");
        for (int k = 0; k < K; k++) {
            long bad = tf_check(rb[k], dx_lens[k], seq * 100 + (uint64_t)k);
            TF_CHECK(r, bad < 0, "one way message %d (%zu B): differs at %ld", k, dx_lens[k],
                     bad);
        }
    }
    for (int k = 0; k < K; k++) {
        free(sb[k]);
        free(rb[k]);
    }
    return 0;
}

START_TEST(duplex_slice_rule)
{
    tf_opts o = {.nranks = 2, .env = dx_cases[_i].env};
    tf_result res;
    tf_shared *sh = tf_run(&o, dx_body, (void *)&dx_cases[_i], &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- many messages arrive before their receives are posted ---- */

#define STASH_K 200
static size_t stash_len(int i) { return (size_t)((i * 7919) % 70000); }

static int stash_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    /* All messages belong to call #1; steps number them. Rank 1 first waits
     * for rank 2, which only sends once rank 0 has sent all STASH_K. */
    coh_call c = tf_call(1, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, 12345);
    unsigned char *buf = malloc(70000);
    TF_CHECK(r, buf, "malloc");
    if (r->rank == 0) {
        for (int i = 0; i < STASH_K; i++) {
            tf_fill(buf, stash_len(i), (uint64_t)i);
            TF_OK(r, tf_send(r, &c, COLL, 1, buf, stash_len(i), (uint32_t)i + 1));
        }
        TF_OK(r, tf_send(r, &c, COLL, 2, NULL, 0, 0));
    } else if (r->rank == 2) {
        TF_OK(r, tf_recv(r, &c, COLL, 0, NULL, 0, 0));
        tf_fill(buf, 100, 999);
        TF_OK(r, tf_send(r, &c, COLL, 1, buf, 100, 0));
    } else {
        TF_OK(r, tf_recv(r, &c, COLL, 2, buf, 100, 0));
        TF_CHECK(r, tf_check(buf, 100, 999) < 0, "message from rank 2 corrupted");
        /* Everything from rank 0 is stashed by now (it was sent before rank 2
         * was released). Drain it in batches of varying shapes. */
        int i = 0;
        unsigned char *bufs[STASH_K];
        coh_xfer ops[STASH_K];
        const int shapes[] = {1, 2, 50, 7, 140};
        for (size_t s = 0; s < COH_ARRAY_LEN(shapes) && i < STASH_K; s++) {
            int k = shapes[s];
            if (i + k > STASH_K)
                k = STASH_K - i;
            for (int j = 0; j < k; j++) {
                bufs[j] = malloc(stash_len(i + j) + 1);
                TF_CHECK(r, bufs[j], "malloc");
                tf_op(&ops[j], r, &c, COLL, 0, 0, bufs[j], stash_len(i + j),
                      (uint32_t)(i + j) + 1);
            }
            TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, k)));
            for (int j = 0; j < k; j++) {
                long bad = tf_check(bufs[j], stash_len(i + j), (uint64_t)(i + j));
                TF_CHECK(r, bad < 0, "stashed message %d differs at %ld", i + j, bad);
                free(bufs[j]);
            }
            i += k;
        }
        TF_CHECK(r, i == STASH_K, "drained %d", i);
    }
    free(buf);
    return 0;
}

START_TEST(stash_out_of_order)
{
    tf_opts o = {.nranks = 3};
    tf_result res;
    tf_shared *sh = tf_run(&o, stash_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* A receiver that its sender runs far ahead of: rank 0 sends one message
 * for each of RUN_K calls before rank 1 takes the first (all of them
 * stashed at rank 1), then rank 1 runs the calls one by one. The check at
 * each call's start for messages a finished call left behind looks at the
 * stash's first entries only (a peer's calls arrive in order), not the
 * whole stash each call: RUN_K calls, not RUN_K^2 / 2 looks. */
#define RUN_K 2000
static int runahead_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    unsigned char buf[64];
    coh_call go = tf_call(1, COH_COLL_SEND, COHORT_UINT8, -1, -1, 3, 0);
    if (r->rank == 0) {
        for (int i = 1; i <= RUN_K; i++) {
            coh_call c = tf_call((uint64_t)i, COH_COLL_REDUCE, COHORT_UINT8, COHORT_SUM, 1, 0,
                                 sizeof buf);
            tf_fill(buf, sizeof buf, (uint64_t)i);
            TF_OK(r, tf_send(r, &c, COLL, 1, buf, sizeof buf, 0));
        }
        TF_OK(r, tf_send(r, &go, P2P, 2, NULL, 0, 0));
    } else if (r->rank == 2) {
        TF_OK(r, tf_recv(r, &go, P2P, 0, NULL, 0, 0));
        usleep(300 * 1000); /* rank 1 sleeps in poll() with rank 0's data there */
        TF_OK(r, tf_send(r, &go, P2P, 1, NULL, 0, 0));
    } else {
        /* rank 2's word comes after rank 0 sent everything (a p2p receive:
         * it sets no call floor); waiting for it, rank 1 reads rank 0's
         * messages, from a peer this batch expects nothing from, into its
         * stash */
        TF_OK(r, tf_recv(r, &go, P2P, 2, NULL, 0, 0));
        coh_net_tx_stats a, b;
        coh_net_get_tx_stats(r->net, &a);
        for (int i = 1; i <= RUN_K; i++) {
            coh_call c = tf_call((uint64_t)i, COH_COLL_REDUCE, COHORT_UINT8, COHORT_SUM, 1, 0,
                                 sizeof buf);
            memset(buf, 0, sizeof buf);
            TF_OK(r, tf_recv(r, &c, COLL, 0, buf, sizeof buf, 0));
            TF_CHECK(r, tf_check(buf, sizeof buf, (uint64_t)i) < 0, "call %d's message", i);
        }
        coh_net_get_tx_stats(r->net, &b);
        TF_CHECK(r, b.stash_peak >= RUN_K / 2, "the sender ran ahead: %ld stashed at most",
                 b.stash_peak);
        TF_CHECK(r, b.stash_scans - a.stash_scans <= 2L * RUN_K,
                 "%ld stashed messages looked at over %d calls", b.stash_scans - a.stash_scans,
                 RUN_K);
    }
    return 0;
}

START_TEST(stash_runahead_linear)
{
    tf_opts o = {.nranks = 3};
    tf_result res;
    tf_shared *sh = tf_run(&o, runahead_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- p2p: same tag FIFO, different tags overtake ---- */

static int p2p_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    enum { NA = 1000, NB = 300, NC = 4u << 20 };
    unsigned char *a1 = malloc(NA), *a2 = malloc(NA), *b = malloc(NB), *cbuf = malloc(NC);
    TF_CHECK(r, a1 && a2 && b && cbuf, "malloc");
    if (r->rank == 0) {
        coh_call s1 = tf_call(1, COH_COLL_SEND, COHORT_UINT8, -1, 1, 5, NA);
        coh_call s2 = tf_call(2, COH_COLL_SEND, COHORT_UINT8, -1, 1, 7, NB);
        coh_call s3 = tf_call(3, COH_COLL_SEND, COHORT_UINT8, -1, 1, 5, NA);
        coh_call s4 = tf_call(4, COH_COLL_SEND, COHORT_UINT8, -1, 1, 9, NC);
        tf_fill(a1, NA, 51);
        tf_fill(b, NB, 71);
        tf_fill(a2, NA, 52);
        tf_fill(cbuf, NC, 91);
        TF_OK(r, tf_send(r, &s1, P2P, 1, a1, NA, 0));
        TF_OK(r, tf_send(r, &s2, P2P, 1, b, NB, 0));
        TF_OK(r, tf_send(r, &s3, P2P, 1, a2, NA, 0));
        TF_OK(r, tf_send(r, &s4, P2P, 1, cbuf, NC, 0));
        /* A final ack keeps rank 0 alive until rank 1 has everything. */
        coh_call ack = tf_call(1, COH_COLL_RECV, COHORT_UINT8, -1, 1, 1, 0);
        TF_OK(r, tf_recv(r, &ack, P2P, 1, NULL, 0, 0));
    } else {
        /* Tag 7 first: overtakes the tag-5 message sent before it. */
        coh_call r1 = tf_call(1, COH_COLL_RECV, COHORT_UINT8, -1, 0, 7, NB);
        TF_OK(r, tf_recv(r, &r1, P2P, 0, b, NB, 0));
        TF_CHECK(r, tf_check(b, NB, 71) < 0, "tag 7 payload");
        /* One batch: tag 9 listed first, then the two tag-5 ones (FIFO). */
        coh_call r9 = tf_call(2, COH_COLL_RECV, COHORT_UINT8, -1, 0, 9, NC);
        coh_call r5 = tf_call(3, COH_COLL_RECV, COHORT_UINT8, -1, 0, 5, NA);
        coh_xfer ops[3];
        tf_op(&ops[0], r, &r9, P2P, 0, 0, cbuf, NC, 0);
        tf_op(&ops[1], r, &r5, P2P, 0, 0, a1, NA, 0);
        tf_op(&ops[2], r, &r5, P2P, 0, 0, a2, NA, 0);
        TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &r9, ops, 3)));
        TF_CHECK(r, tf_check(a1, NA, 51) < 0, "first tag-5 message out of order");
        TF_CHECK(r, tf_check(a2, NA, 52) < 0, "second tag-5 message out of order");
        TF_CHECK(r, tf_check(cbuf, NC, 91) < 0, "tag 9 payload");
        coh_call ack = tf_call(1, COH_COLL_SEND, COHORT_UINT8, -1, 0, 1, 0);
        TF_OK(r, tf_send(r, &ack, P2P, 0, NULL, 0, 0));
    }
    free(a1);
    free(a2);
    free(b);
    free(cbuf);
    return 0;
}

START_TEST(p2p_tag_matching)
{
    tf_opts o = {.nranks = 2};
    tf_result res;
    tf_shared *sh = tf_run(&o, p2p_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- unexpected-message budget ---- */

/* Over budget with nobody waiting on the sender: the message is left in the
 * kernel (the sender is flow-controlled) and delivered once posted. */
static int park_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    size_t big = 8u << 20;
    unsigned char *buf = malloc(big);
    TF_CHECK(r, buf, "malloc");
    coh_call c = tf_call(1, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, 1);
    if (r->rank == 0) {
        tf_fill(buf, big, 8);
        tf_flag_set(r->sh, 0, 1); /* releases rank 2 */
        TF_OK(r, tf_send(r, &c, COLL, 1, buf, big, 1));
    } else if (r->rank == 2) {
        TF_CHECK(r, tf_flag_wait(r->sh, 0, 1, 20000) == 0, "flag");
        TF_OK(r, tf_send(r, &c, COLL, 1, buf, 16, 0));
    } else {
        TF_OK(r, tf_recv(r, &c, COLL, 2, buf, 16, 0));
        memset(buf, 0, big);
        TF_OK(r, tf_recv(r, &c, COLL, 0, buf, big, 1));
        long bad = tf_check(buf, big, 8);
        TF_CHECK(r, bad < 0, "parked message differs at %ld", bad);
    }
    free(buf);
    return 0;
}

START_TEST(unexpected_budget_parks)
{
    tf_opts o = {.nranks = 3, .env = "COHORT_MAX_UNEXPECTED=1048576"};
    tf_result res;
    tf_shared *sh = tf_run(&o, park_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* g->park_ahead (the broadcast tree's relays): a large message from a peer the
 * batch expects nothing from is parked, within budget, not stashed; a small
 * one is stashed as before. Rank 1 waits for 16 B from rank 2 while rank
 * 0's 1 MiB message arrives: with park_ahead nothing is
 * stashed, without it the message is. */
static int park_ahead_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    int on = *(const int *)r->arg;
    size_t big = 1u << 20;
    unsigned char *buf = malloc(big);
    TF_CHECK(r, buf, "malloc");
    coh_call c = tf_call(1, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 1);
    if (r->rank == 0) {
        tf_fill(buf, big, 9);
        tf_flag_set(r->sh, 0, 1); /* releases rank 2 */
        TF_OK(r, tf_send(r, &c, COLL, 1, buf, big, 1));
    } else if (r->rank == 2) {
        TF_CHECK(r, tf_flag_wait(r->sh, 0, 1, 20000) == 0, "flag");
        usleep(200 * 1000); /* rank 1 sees rank 0's header first */
        TF_OK(r, tf_send(r, &c, COLL, 1, buf, 16, 0));
    } else {
        r->g.park_ahead = on;
        TF_OK(r, tf_recv(r, &c, COLL, 2, buf, 16, 0));
        r->g.park_ahead = 0;
        TF_CHECK(r, r->net->nstash == (on ? 0 : 1), "park_ahead %d: %d stashed messages", on,
                 r->net->nstash);
        memset(buf, 0, big);
        TF_OK(r, tf_recv(r, &c, COLL, 0, buf, big, 1));
        long bad = tf_check(buf, big, 9);
        TF_CHECK(r, bad < 0, "parked message differs at %ld", bad);
        TF_CHECK(r, r->net->nstash == 0, "%d stashed messages left", r->net->nstash);
    }
    free(buf);
    return 0;
}

START_TEST(park_ahead_parks)
{
    static const int modes[2] = {1, 0};
    tf_opts o = {.nranks = 3};
    tf_result res;
    tf_shared *sh = tf_run(&o, park_ahead_body, (void *)&modes[_i], &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* A peer with the token floods empty messages for a later call (a barrier's
 * are empty too): each is stashed, and before they were charged nothing
 * against COHORT_MAX_UNEXPECTED - the stash grew with whatever the peer
 * wrote (a 64-byte header became an ~90-byte allocation). Now each is
 * charged its bookkeeping as well: at the budget the connection is parked
 * and the flooder is flow-controlled by TCP. Rank 0 writes headers for 1.5 s
 * while rank 1 waits for rank 2, which sends once the flood is over. */
#define ZF_BUDGET (256u * 1024)
static int zero_flood_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    coh_call c1 = tf_call(1, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0, 0);
    unsigned char b[16];
    if (r->rank == 0) {
        static coh_hdr h[1024];
        coh_call later = tf_call(1000, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0, 0);
        for (int i = 0; i < 1024; i++) {
            coh_hdr_from_call(&h[i], &r->g, &later, COLL, (uint32_t)i, 0);
            h[i].src = 0;
        }
        int fd = r->net->c[1].fd;
        long sent = 0;
        size_t off = 0; /* within h: the stream stays whole headers */
        uint64_t end = tf_now_ns() + 1500000000ull;
        while (tf_now_ns() < end || off) {
            ssize_t w = send(fd, (unsigned char *)h + off, sizeof h - off,
                             MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) {
                sent += w;
                off = (off + (size_t)w) % sizeof h;
            } else if (tf_now_ns() < end) {
                usleep(1000);
            } else {
                break; /* flow-controlled mid-batch: rank 1 parked us */
            }
        }
        r->sh->val[0] = sent / (long)sizeof(coh_hdr);
        tf_flag_set(r->sh, 0, 1);
        TF_CHECK(r, tf_flag_wait(r->sh, 1, 1, 30000) == 0, "flag");
        return 0;
    }
    if (r->rank == 2) {
        TF_CHECK(r, tf_flag_wait(r->sh, 0, 1, 20000) == 0, "flag");
        TF_OK(r, tf_send(r, &c1, COLL, 1, b, 0, 0));
        return 0;
    }
    cohort_status st = tf_recv(r, &c1, COLL, 2, b, 0, 0);
    r->sh->val[1] = r->net->nstash;
    r->sh->val[2] = (long)r->net->stash_bytes;
    tf_flag_set(r->sh, 1, 1);
    TF_OK(r, st);
    TF_CHECK(r, (size_t)r->net->nstash * sizeof(coh_hdr) <= ZF_BUDGET,
             "%d empty messages stashed (budget %u bytes)", r->net->nstash, ZF_BUDGET);
    TF_CHECK(r, r->net->stash_bytes <= ZF_BUDGET, "%zu bytes charged", r->net->stash_bytes);
    TF_CHECK(r, r->net->c[0].rx_state == RX_PARKED, "the flooder's connection is not parked");
    return 0;
}

START_TEST(empty_message_flood_bounded)
{
    tf_opts o = {.nranks = 3, .env = "COHORT_MAX_UNEXPECTED=262144"};
    tf_result res;
    tf_shared *sh = tf_run(&o, zero_flood_body, NULL, &res);
    fprintf(stderr,
            "empty_message_flood: rank 0 wrote %ld headers; rank 1 stashed %ld (%ld bytes "
            "charged)\n",
            sh->val[0], sh->val[1], sh->val[2]);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* Over budget with a receive waiting behind it (a p2p tag that overtakes a
 * big message): error TOO_LARGE, never unbounded memory. */
static int toolarge_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    size_t big = 4u << 20;
    unsigned char *buf = malloc(big);
    TF_CHECK(r, buf, "malloc");
    if (r->rank == 0) {
        coh_call s1 = tf_call(1, COH_COLL_SEND, COHORT_UINT8, -1, 1, 1, big);
        coh_call s2 = tf_call(2, COH_COLL_SEND, COHORT_UINT8, -1, 1, 2, 8);
        tf_fill(buf, big, 1);
        coh_xfer ops[2];
        tf_op(&ops[0], r, &s1, P2P, 1, 1, buf, big, 0);
        tf_op(&ops[1], r, &s2, P2P, 1, 1, buf, 8, 0);
        cohort_status st = cht_tp_up(&r->g, coh_net_xfer(r->net, &s1, ops, 2));
        /* Rank 1 aborts; the send may or may not have completed first. */
        if (st == COHORT_OK) {
            coh_call w = tf_call(3, COH_COLL_RECV, COHORT_UINT8, -1, 1, 3, 0);
            st = tf_recv(r, &w, P2P, 1, NULL, 0, 0);
        }
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_TOO_LARGE, "got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
    } else {
        coh_call c = tf_call(1, COH_COLL_RECV, COHORT_UINT8, -1, 0, 2, 8);
        cohort_status st = tf_recv(r, &c, P2P, 0, buf, 8, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_TOO_LARGE, "got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
        TF_CHECK(r, strstr(r->g.err.msg, "COHORT_MAX_UNEXPECTED"), "message: %s", r->g.err.msg);
    }
    free(buf);
    return 0;
}

START_TEST(unexpected_budget_exceeded)
{
    tf_opts o = {.nranks = 2, .env = "COHORT_MAX_UNEXPECTED=1048576"};
    tf_result res;
    tf_shared *sh = tf_run(&o, toolarge_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- clean close: a peer's last message stays readable after it left;
 * waiting for more from it afterwards is PEER_LOST "left the group" ---- */

static int bye_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    size_t len = 1u << 20;
    unsigned char *buf = malloc(len);
    TF_CHECK(r, buf, "malloc");
    coh_call c = tf_call(1, COH_COLL_BROADCAST, COHORT_UINT8, -1, 1, 0, len);
    if (r->rank == 1) {
        tf_fill(buf, len, 77);
        TF_OK(r, tf_send(r, &c, COLL, 0, buf, len, 0));
        coh_net_destroy(r->net);
        r->net = NULL;
        r->g.net = NULL;
        tf_flag_set(r->sh, 0, 1);
        free(buf);
        /* The fixture destroys r->net again: NULL is accepted. */
        return 0;
    }
    TF_CHECK(r, tf_flag_wait(r->sh, 0, 1, 20000) == 0, "flag");
    TF_OK(r, tf_recv(r, &c, COLL, 1, buf, len, 0));
    TF_CHECK(r, tf_check(buf, len, 77) < 0, "last message corrupted");
    coh_call c2 = tf_call(2, COH_COLL_BROADCAST, COHORT_UINT8, -1, 1, 0, 8);
    cohort_status st = tf_recv(r, &c2, COLL, 1, buf, 8, 0);
    tf_record(r, st);
    TF_CHECK(r, st == COHORT_ERR_PEER_LOST, "got %s", cohort_status_name(st));
    TF_CHECK(r, strstr(r->g.err.msg, "rank 1") && strstr(r->g.err.msg, "left the group"),
             "message: %s", r->g.err.msg);
    free(buf);
    return 0;
}

START_TEST(clean_close_then_lost)
{
    tf_opts o = {.nranks = 2};
    tf_result res;
    tf_shared *sh = tf_run(&o, bye_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- single rank: listen/connect/destroy are trivial ---- */

static int single_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    coh_call c = tf_call(1, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0, 0);
    TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, NULL, 0)));
    return 0;
}

START_TEST(single_rank)
{
    tf_opts o = {.nranks = 1};
    tf_result res;
    tf_shared *sh = tf_run(&o, single_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- published address: IPv6 bind address, interface routing to MASTER_ADDR ---- */

static int addr_body(tf_rank *r)
{
    const char *want = r->arg;
    TF_CHECK(r, !strncmp(r->g.peers[r->rank].addr, want, strlen(want)), "published %s, want %s...",
             r->g.peers[r->rank].addr, want);
    if (tf_connect(r))
        return 1;
    unsigned char buf[4096];
    coh_call c = tf_call(1, COH_COLL_ALL_TO_ALL, COHORT_UINT8, -1, -1, 0, sizeof buf);
    tf_fill(buf, sizeof buf, (uint64_t)r->rank);
    coh_xfer ops[2];
    unsigned char in[4096];
    tf_op(&ops[0], r, &c, COLL, 1 - r->rank, 1, buf, sizeof buf, 0);
    tf_op(&ops[1], r, &c, COLL, 1 - r->rank, 0, in, sizeof in, 0);
    TF_OK(r, cht_tp_up(&r->g, coh_net_xfer(r->net, &c, ops, 2)));
    TF_CHECK(r, tf_check(in, sizeof in, (uint64_t)(1 - r->rank)) < 0, "data");
    return 0;
}

/* A rank-0 group built by hand for a listen in this process (no fork). */
static cohort_group *bare_group(const char *job, int size)
{
    static cohort_group g;
    memset(&g, 0, sizeof g);
    g.rank = 0;
    g.size = size;
    g.generation = 1;
    g.timeout_ms = 1000;
    snprintf(g.job_id, sizeof g.job_id, "%s", job);
    g.token = "t";
    pthread_mutex_init(&g.err_mu, NULL);
    return &g;
}

/* The first non-loopback IPv4 address of this host into out ("" if none). */
static void own_ipv4(char *out, size_t len)
{
    struct ifaddrs *ifs, *i;
    out[0] = 0;
    ck_assert(getifaddrs(&ifs) == 0);
    for (i = ifs; i && !out[0]; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
            struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if ((ntohl(a.s_addr) >> 24) != 127)
                inet_ntop(AF_INET, &a, out, (socklen_t)len);
        }
    freeifaddrs(ifs);
}

START_TEST(published_address)
{
    char env[128], want[64] = "";
    if (_i == 0) {
        /* IPv6 loopback, if this host has it. */
        FILE *f = fopen("/proc/net/if_inet6", "r");
        char line[256];
        int have = 0;
        while (f && fgets(line, sizeof line, f))
            have |= !strncmp(line, "00000000000000000000000000000001", 32);
        if (f)
            fclose(f);
        if (!have) {
            fprintf(stderr, "published_address: no ::1 here, IPv6 case skipped\n");
            return;
        }
        snprintf(env, sizeof env, "COHORT_BIND_ADDR=::1");
        snprintf(want, sizeof want, "[::1]:");
    } else {
        /* MASTER_ADDR is a non-loopback address of this host: the published
         * address is the interface that routes to it, not 127.0.0.1. */
        own_ipv4(want, sizeof want);
        if (!want[0]) {
            fprintf(stderr, "published_address: no non-loopback IPv4 address, case skipped\n");
            return;
        }
        snprintf(env, sizeof env, "MASTER_ADDR=%s", want);
        strcat(want, ":");
    }
    tf_opts o = {.nranks = 2, .env = env};
    tf_result res;
    tf_shared *sh = tf_run(&o, addr_body, want, &res);
    fprintf(stderr, "published_address (%s): %s, %s\n", env, sh->addr[0], sh->addr[1]);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- allocation failures in listen: NOMEM, nothing leaked or crashed ---- */

START_TEST(listen_out_of_memory)
{
    cohort_group *g = bare_group("oom", 3);
    int ok = 0, nomem = 0;
    for (long k = 0; k < 40; k++) {
        coh_net *n = NULL;
        char addr[80];
        coh_alloc_fail_after(k);
        cohort_status st = coh_net_listen(g, &n, addr, sizeof addr);
        coh_alloc_fail_after(-1);
        ck_assert_msg(st == COHORT_OK || st == COHORT_ERR_NOMEM, "k=%ld: %s", k,
                      cohort_status_name(st));
        ck_assert(st == COHORT_OK ? n != NULL : n == NULL);
        ok += st == COHORT_OK;
        nomem += st == COHORT_ERR_NOMEM;
        coh_net_destroy(n);
    }
    ck_assert_msg(nomem > 0 && ok > 0, "nomem %d ok %d", nomem, ok);
}
END_TEST

/* ---- congestion control (COHORT_TCP_CONGESTION): what each socket runs ---- */

/* The first word of a /proc/sys/net/ipv4 file ("" when unreadable). */
static void sys_cc(const char *file, char *out, size_t len)
{
    char path[128];
    snprintf(path, sizeof path, "/proc/sys/net/ipv4/%s", file);
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (f && fgets(out, (int)len, f))
        out[strcspn(out, "\n")] = 0;
    if (f)
        fclose(f);
}

typedef struct cc_case {
    const char *env;  /* the ranks' environment */
    const char *want; /* the algorithm every connection runs; NULL: the system's */
    int own_ip;       /* publish a non-loopback address of this host (MASTER_ADDR) */
} cc_case;

static const cc_case cc_cases[] = {
    {NULL, "reno", 0},                           /* auto, loopback */
    {"COHORT_TCP_CONGESTION=auto", "reno", 1},   /* auto, this host's own address */
    {"COHORT_TCP_CONGESTION=system", NULL, 0},   /* never set */
    {"COHORT_TCP_CONGESTION=reno", "reno", 1},   /* named */
};

static int cc_body(tf_rank *r)
{
    const char *want = r->arg;
    if (tf_connect(r))
        return 1;
    int peer = 1 - r->rank;
    char got[32] = "";
    socklen_t l = sizeof got - 1;
    TF_CHECK(r, getsockopt(r->net->c[peer].fd, IPPROTO_TCP, TCP_CONGESTION, got, &l) == 0,
             "getsockopt TCP_CONGESTION");
    got[l < sizeof got ? l : sizeof got - 1] = 0;
    TF_CHECK(r, !strcmp(got, want), "connection runs %s, expected %s", got, want);
    char info[256];
    coh_net_cc_info(r->net, info, sizeof info);
    char expect[64];
    snprintf(expect, sizeof expect, "congestion control %s on 1 ", want);
    TF_CHECK(r, !strncmp(info, expect, strlen(expect)), "cc info: %s", info);
    /* data still flows both ways, past the socket buffers */
    size_t len = 3u << 20;
    unsigned char *b = malloc(len);
    TF_CHECK(r, b, "malloc");
    for (int k = 0; k < 2; k++) {
        coh_call c = tf_call((uint64_t)k + 1, COH_COLL_BROADCAST, COHORT_UINT8, -1, k, 0, len);
        if (r->rank == k) {
            tf_fill(b, len, (uint64_t)k + 40);
            TF_OK(r, tf_send(r, &c, COLL, peer, b, len, 0));
        } else {
            TF_OK(r, tf_recv(r, &c, COLL, peer, b, len, 0));
            TF_CHECK(r, tf_check(b, len, (uint64_t)k + 40) < 0, "data differs");
        }
    }
    free(b);
    return 0;
}

START_TEST(congestion_control)
{
    const cc_case *cc = &cc_cases[_i];
    char sys[64], env[256] = "", ip[64] = "";
    sys_cc("tcp_congestion_control", sys, sizeof sys);
    ck_assert_msg(sys[0], "no /proc/sys/net/ipv4/tcp_congestion_control");
    if (cc->own_ip) {
        own_ipv4(ip, sizeof ip);
        if (!ip[0]) {
            fprintf(stderr, "congestion_control: no non-loopback IPv4 address, case %d skipped\n",
                    _i);
            return;
        }
    }
    snprintf(env, sizeof env, "%s%s%s%s", cc->env ? cc->env : "", cc->env && ip[0] ? ";" : "",
             ip[0] ? "MASTER_ADDR=" : "", ip);
    tf_opts o = {.nranks = 2, .env = env[0] ? env : NULL};
    tf_result res;
    tf_shared *sh = tf_run(&o, cc_body, (void *)(cc->want ? cc->want : sys), &res);
    fprintf(stderr, "congestion_control (%s): %s <-> %s, system's %s\n", env, sh->addr[0],
            sh->addr[1], sys);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* listen in this process with COHORT_TCP_CONGESTION=value: the status, the
 * message in msg */
static cohort_status cc_listen(const char *value, char *msg, size_t len)
{
    cohort_group *g = bare_group("cc", 2);
    setenv("COHORT_TCP_CONGESTION", value, 1);
    coh_net *n = NULL;
    char addr[80];
    cohort_status st = coh_net_listen(g, &n, addr, sizeof addr);
    unsetenv("COHORT_TCP_CONGESTION");
    snprintf(msg, len, "%s", st == COHORT_OK ? "" : coh_tls_err()->msg);
    coh_net_destroy(n);
    return st;
}

/* A name the kernel lacks, a malformed one, one too long: INVALID at start,
 * naming the variable; never a silent fallback to the system's. */
START_TEST(congestion_control_invalid)
{
    static const char *bad[] = {"nosuchcc", "Reno", "reno;bbr", "", "0123456789abcdefg"};
    for (size_t k = 0; k < COH_ARRAY_LEN(bad); k++) {
        char msg[512];
        cohort_status st = cc_listen(bad[k], msg, sizeof msg);
        if (!bad[k][0]) { /* empty: auto, as unset */
            ck_assert_msg(st == COHORT_OK, "empty: %s", msg);
            continue;
        }
        ck_assert_msg(st == COHORT_ERR_INVALID, "%s: %s", bad[k], cohort_status_name(st));
        ck_assert_msg(strstr(msg, "COHORT_TCP_CONGESTION=") && strstr(msg, bad[k]), "%s: %s",
                      bad[k], msg);
    }
    char msg[512];
    ck_assert(cc_listen("nosuchcc", msg, sizeof msg) == COHORT_ERR_INVALID);
    ck_assert_msg(strstr(msg, "available:"), "%s", msg);
}
END_TEST

/* An algorithm the kernel has but does not allow an unprivileged process
 * (the allowed list is the system's default plus reno unless root widened
 * it): INVALID naming the variable, in a child that gave up root. */
START_TEST(congestion_control_not_allowed)
{
    char avail[256], allowed[256], pick[32] = "";
    sys_cc("tcp_available_congestion_control", avail, sizeof avail);
    sys_cc("tcp_allowed_congestion_control", allowed, sizeof allowed);
    for (char *save = NULL, *w = strtok_r(avail, " ", &save); w && !pick[0];
         w = strtok_r(NULL, " ", &save)) {
        char pad[300];
        snprintf(pad, sizeof pad, " %s ", allowed);
        char needle[40];
        snprintf(needle, sizeof needle, " %s ", w);
        if (!strstr(pad, needle))
            snprintf(pick, sizeof pick, "%s", w);
    }
    if (!pick[0] || geteuid() != 0) {
        fprintf(stderr, "congestion_control_not_allowed: %s, skipped\n",
                geteuid() ? "not root (cannot drop to an unprivileged uid)"
                          : "every available algorithm is allowed here");
        return;
    }
    pid_t p = fork();
    ck_assert(p >= 0);
    if (p == 0) {
        if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534))
            _exit(10);
        char msg[512];
        cohort_status st = cc_listen(pick, msg, sizeof msg);
        if (st != COHORT_ERR_INVALID || !strstr(msg, "not allowed")) {
            fprintf(stderr, "%s as nobody: %s: %s\n", pick, cohort_status_name(st), msg);
            _exit(11);
        }
        _exit(0);
    }
    int ws = 0;
    ck_assert(waitpid(p, &ws, 0) == p);
    ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child: %d", ws);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("transport_tcp_data");
    TCase *t = tcase_create("data");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, single_rank);
    tcase_add_test(t, listen_out_of_memory);
    tcase_add_test(t, pingpong_sizes);
    tcase_add_test(t, ring_bidirectional_large);
    tcase_add_loop_test(t, sliced_sends_keep_stream_order, 0, 4);
    tcase_add_loop_test(t, duplex_slice_rule, 0, (int)COH_ARRAY_LEN(dx_cases));
    tcase_add_test(t, long_transfer_not_a_stall);
    tcase_add_test(t, spin_default_rule);
    tcase_add_loop_test(t, spin_default_applied, 0, (int)COH_ARRAY_LEN(spin_cases));
    tcase_add_test(t, stash_out_of_order);
    tcase_add_test(t, stash_runahead_linear);
    tcase_add_test(t, p2p_tag_matching);
    tcase_add_test(t, unexpected_budget_parks);
    tcase_add_loop_test(t, park_ahead_parks, 0, 2);
    tcase_add_test(t, unexpected_budget_exceeded);
    tcase_add_test(t, empty_message_flood_bounded);
    tcase_add_test(t, clean_close_then_lost);
    tcase_add_loop_test(t, published_address, 0, 2);
    tcase_add_loop_test(t, congestion_control, 0, (int)COH_ARRAY_LEN(cc_cases));
    tcase_add_test(t, congestion_control_invalid);
    tcase_add_test(t, congestion_control_not_allowed);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
