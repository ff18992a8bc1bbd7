/* test_shm_p2p.c - send/recv between ranks of one host through the pair's
 * channel in the segment (src/coll/shm/shm_p2p.c): real groups
 * (cohort_init) in real processes. Sizes around the inline (32 B), eager
 * and chunk bounds, dtypes, both copy modes (two copies forced, single copy
 * forced); the path
 * really taken (cohort_describe); ordering with many outstanding async
 * sends; contract mismatches (count, dtype, tag) reported on both ranks with
 * the receive buffer untouched; a peer SIGKILLed mid-transfer (as sender and
 * as receiver); a SIGSTOPped peer (timeout with a stall report); an abort
 * from another thread while a recv waits; the channel's counters (slot
 * stamps, ack, the sender's cached credit) across 2^32 with many small
 * messages outstanding and a receiver slower than its sender; ranks
 * outnumbering cpus: a small recv's spin for a sender running on another
 * cpu (the hints it reads, the running flag of a rank that waits, a
 * stopped "running" sender: still a timeout, the cpu mostly left). */
#define _GNU_SOURCE 1
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"
#include "coll/shm/shm_coll.h"
#include "transport/shm/shm_seg.h"

#define CHUNK 4096 /* COHORT_SHM_P2P_BYTES in these tests: small, so bounds are cheap */
#define SLOTS 4

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static unsigned char pat(size_t i, int from, int k) { return (unsigned char)(i * 131u + (unsigned)from * 7u + (unsigned)k * 17u + 1u); }

/* ---- correctness matrix ---- */

/* 24/25: the largest message carried inline in its chunk's head line (layout
 * v11), and one more; 32/33: v9's bound */
static const size_t sizes[] = {0,         1,         24,        25,  32,        33,  CHUNK - 1, CHUNK,          CHUNK + 1,
                               SLOTS * CHUNK - 1, SLOTS * CHUNK, SLOTS * CHUNK + 1, 65535,
                               65536,     65537,     (size_t)16 << 20};
static const cohort_dtype dts[] = {COHORT_UINT8, COHORT_INT32, COHORT_FLOAT64, COHORT_BFLOAT16};
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define NDTS (sizeof dts / sizeof dts[0])

typedef struct mode_arg {
    int single; /* expected: 1 single copy at >= 64 KiB, 0 never */
} mode_arg;

static int rank_matrix(int rank, void *arg)
{
    const mode_arg *m = arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g), me = cohort_rank(g);
    int to = (me + 1) % n, from = (me + n - 1) % n;
    char d[1024];
    RANK_PASS(cohort_describe(g, "send", 65536, COHORT_UINT8, d, sizeof d), g);
    /* split between the pair unless the ranks outnumber the cpus */
    RANK_CHECK(strstr(d, !m->single         ? "two copies (send/recv channel"
                         : g->shm->oversub ? "single copy (cma; send/recv channel: the receiver"
                                           : "single copy (cma; send/recv channel, split"),
               "rank %d: path %s", me, d);
    RANK_PASS(cohort_describe(g, "send", 16, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, "two copies (send/recv channel, eager)"), "rank %d: path %s", me, d);
    size_t maxb = sizes[NSIZES - 1];
    unsigned char *sb = malloc(maxb + 64), *rb = malloc(maxb + 64);
    RANK_CHECK(sb && rb, "malloc");
    int k = 0;
    for (size_t di = 0; di < NDTS; di++) {
        size_t es = cohort_dtype_size(dts[di]);
        for (size_t si = 0; si < NSIZES; si++, k++) {
            size_t count = sizes[si] / es, bytes = count * es;
            /* odd alignments of both buffers against the 64-byte slots */
            unsigned char *s = sb + (k % 7), *r = rb + (k % 5);
            for (size_t i = 0; i < bytes; i++)
                s[i] = pat(i, me, k);
            memset(r, 0xEE, bytes + 8);
            cohort_work *w;
            /* ring exchange: async send first so no pair waits on itself */
            RANK_PASS(cohort_send_async(g, s, count, dts[di], to, k, &w), g);
            RANK_PASS(cohort_recv(g, r, count, dts[di], from, k), g);
            RANK_PASS(cohort_work_wait(w, -1), g);
            cohort_work_free(w);
            for (size_t i = 0; i < bytes; i++)
                RANK_CHECK(r[i] == pat(i, from, k), "rank %d: %s x %zu: byte %zu is %u, want %u",
                           me, cohort_dtype_name(dts[di]), count, i, r[i], pat(i, from, k));
            for (size_t i = bytes; i < bytes + 8; i++)
                RANK_CHECK(r[i] == 0xEE, "rank %d: byte %zu after the message was written", me, i);
        }
    }
    free(sb);
    free(rb);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

/* The matrix's runs: the same body (rank_matrix) in each. */
static const struct matrix_case {
    int nranks;
    mode_arg mode;
    const char *env;
} matrix_cases[] = {
    /* two copies forced */
    {2, {0}, "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_SINGLE_COPY=off"},
    /* single copy forced (from 64 KiB) */
    {2, {1}, "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_SINGLE_COPY=on"},
    /* three ranks: three channels per rank in use at once */
    {3, {0}, "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_SINGLE_COPY=off"},
};
#define NMATRIX (int)(sizeof matrix_cases / sizeof matrix_cases[0])

START_TEST(matrix)
{
    const struct matrix_case *m = &matrix_cases[_i];
    cht_opts o = {.nranks = m->nranks, .deadline_ms = 120000, .extra_env = m->env};
    cht_result r;
    cht_run_ranks(&o, rank_matrix, (void *)&m->mode, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* COHORT_SHM_P2P_BYTES=0: send/recv stay on tcp (the old path), and say so */
static int rank_off(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    char d[1024];
    RANK_PASS(cohort_describe(g, "send", 65536, COHORT_UINT8, d, sizeof d), g);
    RANK_CHECK(strstr(d, "tcp socket (COHORT_SHM_P2P_BYTES=0"), "path %s", d);
    int32_t v = rank + 40;
    if (rank == 0)
        RANK_PASS(cohort_send(g, &v, 1, COHORT_INT32, 1, 3), g);
    else {
        RANK_PASS(cohort_recv(g, &v, 1, COHORT_INT32, 0, 3), g);
        RANK_CHECK(v == 40, "got %d", v);
    }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(channels_off_uses_tcp)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 30000, .extra_env = "COHORT_SHM_P2P_BYTES=0"};
    cht_result r;
    cht_run_ranks(&o, rank_off, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- ordering: many outstanding async sends, mixed sizes ---- */

#define NMSG 300
static size_t msg_bytes(int i) { return (size_t)((i * 2654435761u) % (3 * CHUNK * SLOTS)); }

static int rank_order(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t tot = 0;
    for (int i = 0; i < NMSG; i++)
        tot += msg_bytes(i);
    unsigned char *buf = malloc(tot + 1);
    RANK_CHECK(buf, "malloc");
    if (rank == 0) {
        cohort_work *w[NMSG];
        size_t off = 0;
        for (int i = 0; i < NMSG; i++) {
            for (size_t b = 0; b < msg_bytes(i); b++)
                buf[off + b] = pat(b, 0, i);
            RANK_PASS(cohort_send_async(g, buf + off, msg_bytes(i), COHORT_UINT8, 1, i % 7, &w[i]),
                      g);
            off += msg_bytes(i);
        }
        for (int i = 0; i < NMSG; i++) {
            RANK_PASS(cohort_work_wait(w[i], -1), g);
            cohort_work_free(w[i]);
        }
    } else {
        usleep(100 * 1000); /* let the sender run ahead and fill the channel */
        for (int i = 0; i < NMSG; i++) {
            size_t b = msg_bytes(i);
            memset(buf, 0, b + 1);
            RANK_PASS(cohort_recv(g, buf, b, COHORT_UINT8, 0, i % 7), g);
            for (size_t j = 0; j < b; j++)
                RANK_CHECK(buf[j] == pat(j, 0, i), "message %d byte %zu", i, j);
        }
    }
    free(buf);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(ordering_async)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .extra_env = "COHORT_SHM_P2P_BYTES=4096"};
    cht_result r;
    cht_run_ranks(&o, rank_order, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- contract mismatches: both ranks fail, nothing delivered ---- */

enum { MM_COUNT, MM_DTYPE, MM_TAG, MM_COUNT_BIG };
static const char *const mm_words[] = {"count", "dtype", "tag", "count"};

static int rank_mismatch(int rank, void *arg)
{
    int f = *(const int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t n = f == MM_COUNT_BIG ? 65536 : 64;
    int32_t *buf = malloc((n + 8) * sizeof *buf);
    RANK_CHECK(buf, "malloc");
    for (size_t i = 0; i < n + 8; i++)
        buf[i] = rank == 0 ? (int32_t)i : -7;
    /* one good message first, so the bad one is not the channel's first */
    RANK_PASS(rank == 0 ? cohort_send(g, buf, 4, COHORT_INT32, 1, 1)
                        : cohort_recv(g, buf + n, 4, COHORT_INT32, 0, 1),
              g);
    if (rank == 1)
        for (size_t i = n; i < n + 8; i++)
            buf[i] = -7;
    cohort_status st;
    if (rank == 0) {
        st = cohort_send(g, buf, n, COHORT_INT32, 1, 2);
        /* an eager send returns before the receiver looked: the report
         * reaches this rank at its next call */
        if (st == COHORT_OK)
            st = cohort_barrier(g);
    } else {
        switch (f) {
        case MM_COUNT:
        case MM_COUNT_BIG:
            st = cohort_recv(g, buf, n + 1, COHORT_INT32, 0, 2);
            break;
        case MM_DTYPE:
            st = cohort_recv(g, buf, n, COHORT_FLOAT32, 0, 2);
            break;
        default:
            st = cohort_recv(g, buf, n, COHORT_INT32, 0, 3);
            break;
        }
        for (size_t i = 0; i < n + 8; i++)
            RANK_CHECK(buf[i] == -7, "receive buffer written at %zu after a mismatch", i);
    }
    const char *e = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank %d: %s: %s", rank, cohort_status_name(st), e);
    RANK_CHECK(strstr(e, mm_words[f]), "rank %d: the report does not name the %s: %s", rank,
               mm_words[f], e);
    free(buf);
    cohort_finalize(g);
    return 0;
}

START_TEST(mismatch_both_ranks)
{
    int f = _i;
    cht_opts o = {.nranks = 2, .deadline_ms = 30000,
                  .extra_env = "COHORT_SHM_P2P_BYTES=4096;COHORT_TIMEOUT=10;COHORT_SHM_SINGLE_COPY=on"};
    cht_result r;
    cht_run_ranks(&o, rank_mismatch, &f, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a peer SIGKILLed mid-transfer ---- */

#define BIG ((size_t)32 << 20)

static void *killer(void *arg)
{
    (void)arg;
    usleep(60 * 1000);
    raise(SIGKILL);
    return NULL;
}

/* arg: 0 the sender dies, 1 the receiver dies; the victim streams large
 * messages until it dies, the survivor takes them until its call fails */
static int rank_kill(int rank, void *arg)
{
    int victim = *(const int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    unsigned char *buf = calloc(1, BIG);
    RANK_CHECK(buf, "calloc");
    RANK_PASS(cohort_barrier(g), g);
    if (rank == victim) {
        pthread_t t;
        pthread_create(&t, NULL, killer, NULL);
        for (;;)
            if (rank == 0)
                cohort_send(g, buf, BIG, COHORT_UINT8, 1, 0);
            else
                cohort_recv(g, buf, BIG, COHORT_UINT8, 0, 0);
    }
    cohort_status st = COHORT_OK;
    double last = now_ms();
    int k = 0;
    while (st == COHORT_OK && now_ms() - last < 10000) {
        st = rank == 0 ? cohort_send(g, buf, BIG, COHORT_UINT8, 1, 0)
                       : cohort_recv(g, buf, BIG, COHORT_UINT8, 0, 0);
        if (st == COHORT_OK) {
            last = now_ms();
            k++;
        }
    }
    double dt = now_ms() - last;
    RANK_CHECK(st == COHORT_ERR_PEER_LOST, "after %d messages: %s: %s", k, cohort_status_name(st),
               cohort_last_error(g));
    RANK_CHECK(dt < 3000, "the loss took %.0f ms to show", dt);
    free(buf);
    cohort_finalize(g);
    return 0;
}

/* The kill runs: the same body (rank_kill), both victims each. */
static const char *const kill_envs[] = {
    "COHORT_SHM_P2P_BYTES=16384;COHORT_TIMEOUT=20",
    /* single copy: the receiver reads the sender's memory */
    "COHORT_SHM_SINGLE_COPY=on;COHORT_TIMEOUT=20",
};

START_TEST(sigkill_mid_transfer)
{
    int victim = _i % 2; /* 0: the sender dies; 1: the receiver dies */
    cht_opts o = {.nranks = 2, .deadline_ms = 30000, .extra_env = kill_envs[_i / 2]};
    cht_result r;
    cht_run_ranks(&o, rank_kill, &victim, &r);
    ck_assert_msg(r.status[victim] == 128 + SIGKILL, "victim exited %d", r.status[victim]);
    ck_assert_msg(r.status[1 - victim] == 0 && !r.hung[1 - victim], "survivor exited %d%s",
                  r.status[1 - victim], r.hung[1 - victim] ? " (hung)" : "");
}
END_TEST

/* ---- a stopped peer: the waiting side times out with a stall report ---- */

static int rank_stopped(int rank, void *arg)
{
    int big = *(const int *)arg; /* 1: the waiter is a sender beyond the eager bound */
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 1) {
        raise(SIGSTOP); /* resumed once rank 0 exited */
        return 0;
    }
    size_t n = big ? (size_t)1 << 20 : 16;
    unsigned char *buf = calloc(1, n);
    RANK_CHECK(buf, "calloc");
    double t0 = now_ms();
    cohort_status st = big ? cohort_send(g, buf, n, COHORT_UINT8, 1, 0)
                           : cohort_recv(g, buf, n, COHORT_UINT8, 1, 0);
    double dt = now_ms() - t0;
    const char *e = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "%s: %s", cohort_status_name(st), e);
    RANK_CHECK(strstr(e, big ? "send #1" : "recv #1"), "the report does not name the call: %s", e);
    RANK_CHECK(dt > 1400 && dt < 6000, "timed out after %.0f ms (COHORT_TIMEOUT=1.5)", dt);
    free(buf);
    return 0;
}

START_TEST(sigstop_times_out)
{
    int big = _i;
    cht_opts o = {.nranks = 2, .deadline_ms = 30000, .resume_stopped = 1,
                  .extra_env = "COHORT_TIMEOUT=1.5;COHORT_SHM_P2P_BYTES=16384"};
    cht_result r;
    cht_run_ranks(&o, rank_stopped, &big, &r);
    ck_assert_msg(r.status[0] == 0 && !r.hung[0], "rank 0 exited %d", r.status[0]);
}
END_TEST

/* ---- an abort from another thread ends a waiting recv ---- */

static void *aborter(void *arg)
{
    usleep(200 * 1000);
    cohort_abort(arg, "stop from another thread");
    return NULL;
}

static int rank_abort_thread(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    int32_t v = 0;
    double t0 = now_ms();
    cohort_status st;
    if (rank == 0) {
        pthread_t t;
        pthread_create(&t, NULL, aborter, g);
        st = cohort_recv(g, &v, 1, COHORT_INT32, 1, 0); /* never sent */
        pthread_join(t, NULL);
    } else {
        st = cohort_recv(g, &v, 1, COHORT_INT32, 0, 0); /* never sent either */
    }
    double dt = now_ms() - t0;
    RANK_CHECK(st != COHORT_OK && st != COHORT_ERR_TIMEOUT, "rank %d: %s: %s", rank,
               cohort_status_name(st), cohort_last_error(g));
    RANK_CHECK(strstr(cohort_last_error(g), "stop from another thread"), "rank %d: %s", rank,
               cohort_last_error(g));
    RANK_CHECK(dt < 3000, "rank %d: the abort took %.0f ms", rank, dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(abort_from_thread)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 30000, .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_abort_thread, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- the counters across 2^32 ----
 *
 * A chunk is published by its head's stamp (t + 1) and the head's previous
 * chunk left t + 1 - HEADS there; the receiver tells them apart by a
 * wrapping comparison, the sender its credit (ack) likewise. Both ranks
 * move the pair's channel to WRAP_T0 chunks before its first message (as
 * if that many had gone through it: stamps, ack, the sender's counters),
 * then stream WRAP_N messages across 2^32 - small ones (inline, one past
 * it) mostly, and multi-chunk ones - while the receiver stops now and then
 * so that the sender finds every slot taken and waits for credit, and the
 * sender, around the wrap, so that the receiver waits on stale slots. An
 * unsigned comparison anywhere (stamp or ack) takes a stale slot for a new
 * chunk (a wrong message or a protocol error) or hangs the sender. The
 * second run has the multi-chunk messages go by the split single copy
 * (COHORT_SHM_SINGLE_COPY_BYTES=8192): its req and tail_done words wrap
 * with the chunk counter. */
#define WRAP_T0 (UINT32_MAX - 40u)
#define WRAP_N 400

static size_t wrap_bytes(int i)
{
    static const size_t b[] = {8, 8, 24, 25, 1, 0, 8, 64, 2 * CHUNK + 5};
    return b[i % (int)(sizeof b / sizeof b[0])];
}

static int rank_wrap(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    coh_shm *s = g->shm;
    int q = s ? coh_shm_p2p_peer(s, 1 - rank) : -1;
    RANK_CHECK(q >= 0, "rank %d: the peer is not on a channel", rank);
    if (rank == 0) {
        s->p2p_out[q] = WRAP_T0;
        s->p2p_acked[q] = WRAP_T0;
        atomic_store(&shm_chan_of(s, s->me, q)->tail_done, WRAP_T0);
    } else {
        /* the receiver owns ack; it also sets the stamps a history of
         * WRAP_T0 chunks would have left, before the sender writes any */
        shm_chan *ch = shm_chan_of(s, q, s->me);
        s->p2p_in[q] = WRAP_T0;
        atomic_store(&ch->ack, WRAP_T0);
        atomic_store(&ch->req, WRAP_T0);
        for (uint32_t j = 1; j <= SHM_P2P_HEADS; j++) {
            uint32_t t = WRAP_T0 - j; /* the last chunk of head t % HEADS */
            atomic_store(shm_chan_stamp(shm_chan_slot(s, ch, t)), t + 1);
        }
    }
    RANK_PASS(cohort_barrier(g), g);
    unsigned char buf[2 * CHUNK + 16];
    for (int i = 0; i < WRAP_N; i++) {
        size_t b = wrap_bytes(i);
        if (rank == 0) {
            /* and, around the wrap, slower than the receiver: it waits on
             * slots that still hold the previous lap's chunk */
            if (i > 20 && i < 100 && i % 3 == 0)
                usleep(2000);
            for (size_t j = 0; j < b; j++)
                buf[j] = pat(j, 0, i);
            RANK_PASS(cohort_send(g, buf, b, COHORT_UINT8, 1, i % 5), g);
        } else {
            if (i % 37 == 0)
                usleep(20 * 1000); /* slower than the sender: it fills every slot */
            memset(buf, 0xEE, b + 8);
            RANK_PASS(cohort_recv(g, buf, b, COHORT_UINT8, 0, i % 5), g);
            for (size_t j = 0; j < b; j++)
                RANK_CHECK(buf[j] == pat(j, 0, i), "message %d (%zu B) byte %zu", i, b, j);
            RANK_CHECK(buf[b] == 0xEE, "message %d: a byte past its end was written", i);
        }
    }
    /* really across the wrap, and every chunk consumed */
    if (rank == 0)
        RANK_CHECK(s->p2p_out[q] < WRAP_T0 && s->p2p_out[q] > 100,
                   "the sender's counter is %u", s->p2p_out[q]);
    else
        RANK_CHECK(s->p2p_in[q] < WRAP_T0 && s->p2p_in[q] > 100,
                   "the receiver's counter is %u", s->p2p_in[q]);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(counters_wrap)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000,
                  .extra_env = _i ? "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_SINGLE_COPY=on;"
                                    "COHORT_SHM_SINGLE_COPY_BYTES=8192"
                                  : "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_SINGLE_COPY=off"};
    cht_result r;
    cht_run_ranks(&o, rank_wrap, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- ranks outnumbering cpus: a small recv's spin for a running sender ----
 *
 * 3 ranks on 2 cpus (rank r pinned to the (r % 2)-th cpu it may use; on a
 * machine with one, all share it): ranks 0 and 1 are a pair split over the
 * cpus, so rank 0's recv of <= SHM_P2P_SPIN_BYTES spins while rank 1 runs
 * (shm_wait.c). First the exchange itself, checked byte for byte, and the
 * hints it keeps: rank 1's cpu (from its sends) and running flag (1 outside
 * a wait). Then rank 1 stops itself from user code - its flag still says it
 * runs, its cpu is another - and rank 0's recv from it must still time out
 * at COHORT_TIMEOUT, having used the cpu for a small part of that wait:
 * the spin is bounded (2 us a wait), then it yields and sleeps. Before
 * that, rank 1 waits in a recv and rank 0 reads its flag: 0 (it yields,
 * then sleeps - or every small recv would spin for a rank that waits). With
 * COHORT_SHM_SPIN_US set (the second run) the user's budget governs and
 * there is no such spin (p2p_spin_ns 0). */
#define SPIN_MSGS 2000

static int pin_nth_cpu(int nth, int *cpu_out)
{
    cpu_set_t cs;
    if (sched_getaffinity(0, sizeof cs, &cs) != 0)
        return -1;
    int have = CPU_COUNT(&cs), want = nth % (have < 2 ? 1 : 2), k = 0;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &cs) || k++ != want)
            continue;
        CPU_ZERO(&cs);
        CPU_SET(c, &cs);
        *cpu_out = c;
        return sched_setaffinity(0, sizeof cs, &cs);
    }
    return -1;
}

static int rank_spin(int rank, void *arg)
{
    int user_spin = *(const int *)arg;
    int cpu = -1;
    RANK_CHECK(pin_nth_cpu(rank, &cpu) == 0, "rank %d: pinning failed", rank);
    if (rank == 2)
        setenv("COHORT_TIMEOUT", "20", 1); /* its wait ends with rank 0's failure */
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    coh_shm *s = g->shm;
    RANK_CHECK(s && s->oversub, "rank %d: 3 ranks on <= 2 cpus are not oversubscribed", rank);
    /* at most two ranks to a cpu: on a machine with one, no spin */
    int spins = !user_spin && s->n <= 2 * coh_group_cpus(g);
    RANK_CHECK(s->p2p_spin_ns == (spins ? SHM_P2P_SPIN_NS : 0u), "rank %d: p2p_spin_ns %llu",
               rank, (unsigned long long)s->p2p_spin_ns);
    if (rank == 2) {
        /* out of the pair's way: in the barrier after the exchange, then in
         * one that rank 0's timeout ends */
        RANK_PASS(cohort_barrier(g), g);
        cohort_status st = cohort_barrier(g);
        RANK_CHECK(st != COHORT_OK, "rank 2's barrier succeeded without ranks 0 and 1");
        return 0;
    }
    int q = coh_shm_p2p_peer(s, 1 - rank);
    RANK_CHECK(q >= 0, "rank %d: the peer is not on a channel", rank);
    uint32_t buf[SHM_P2P_SPIN_BYTES / 4 + 1];
    for (int i = 0; i < SPIN_MSGS; i++) {
        size_t n = (size_t)(i % 3 == 2 ? SHM_P2P_SPIN_BYTES / 4 + 1 : i % 3 ? 2 : SHM_P2P_SPIN_BYTES / 4);
        if (rank == 1) {
            memset(buf, 0xEE, sizeof buf);
            RANK_PASS(cohort_recv(g, buf, n, COHORT_UINT32, 0, i), g);
            for (size_t j = 0; j < n; j++)
                RANK_CHECK(buf[j] == (uint32_t)(i * 977 + (int)j), "message %d word %zu", i, j);
            for (size_t j = 0; j < n; j++)
                buf[j] = ~buf[j];
            RANK_PASS(cohort_send(g, buf, n, COHORT_UINT32, 0, i), g);
        } else {
            for (size_t j = 0; j < n; j++)
                buf[j] = (uint32_t)(i * 977 + (int)j);
            RANK_PASS(cohort_send(g, buf, n, COHORT_UINT32, 1, i), g);
            memset(buf, 0xEE, sizeof buf);
            RANK_PASS(cohort_recv(g, buf, n, COHORT_UINT32, 1, i), g);
            for (size_t j = 0; j < n; j++)
                RANK_CHECK(buf[j] == ~(uint32_t)(i * 977 + (int)j), "reply %d word %zu", i, j);
        }
    }
    /* a rank waiting in a recv says it does not run (it yields, then
     * sleeps): rank 0 reads rank 1's flag while rank 1 waits for it */
    if (spins && rank == 1) {
        RANK_PASS(cohort_recv(g, buf, 2, COHORT_UINT32, 0, SPIN_MSGS + 1), g);
    } else if (spins) {
        usleep(20 * 1000);
        _Atomic int32_t *r1 = &shm_ctl_of(s, q)->running;
        int zeros = 0;
        for (int k = 0; k < 1000; k++) {
            zeros += atomic_load(r1) == 0;
            usleep(10);
        }
        RANK_CHECK(zeros >= 900, "rank 1 waiting in a recv read as running %d times in 1000",
                   1000 - zeros);
        RANK_PASS(cohort_send(g, buf, 2, COHORT_UINT32, 1, SPIN_MSGS + 1), g);
    }
    if (rank == 1) {
        /* the hints rank 0 reads: where I sent from; running, out of a wait */
        shm_ctl *me = shm_ctl_of(s, s->me);
        RANK_CHECK(!spins || atomic_load(&me->cpu) == cpu, "rank 1's cpu hint %d, on cpu %d",
                   (int)atomic_load(&me->cpu), cpu);
        RANK_CHECK(!spins || atomic_load(&me->running) == 1,
                   "rank 1's running flag is %d outside a wait", (int)atomic_load(&me->running));
        RANK_PASS(cohort_barrier(g), g);
        raise(SIGSTOP); /* "running", from user code; resumed once rank 0 exited */
        return 0;
    }
    RANK_PASS(cohort_barrier(g), g);
    usleep(100 * 1000); /* rank 1 has stopped */
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    double t0 = now_ms();
    cohort_status st = cohort_recv(g, buf, 2, COHORT_UINT32, 1, SPIN_MSGS);
    double dt = now_ms() - t0;
    getrusage(RUSAGE_SELF, &ru1);
    double cpu_ms = (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e3 +
                    (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e3 +
                    (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e3 +
                    (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e3;
    const char *e = cohort_last_error(g);
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "%s: %s", cohort_status_name(st), e);
    RANK_CHECK(dt > 1400 && dt < 6000 * cht_time_scale(), "timed out after %.0f ms", dt);
    /* the yield stage (2 ms) and the sleeps' checks; a spin for the whole
     * wait would use all of it */
    RANK_CHECK(cpu_ms < 0.25 * dt, "the wait used %.0f ms of cpu in %.0f ms", cpu_ms, dt);
    return 0;
}

START_TEST(oversub_small_recv_spin)
{
    int user_spin = _i;
    cht_opts o = {.nranks = 3, .deadline_ms = 30000, .resume_stopped = 1,
                  .extra_env = user_spin ? "COHORT_TIMEOUT=1.5;COHORT_SHM_SPIN_US=0"
                                         : "COHORT_TIMEOUT=1.5"};
    cht_result r;
    cht_run_ranks(&o, rank_spin, &user_spin, &r);
    ck_assert_msg(r.status[0] == 0 && !r.hung[0], "rank 0 exited %d", r.status[0]);
    ck_assert_msg(r.status[2] == 0 && !r.hung[2], "rank 2 exited %d", r.status[2]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_p2p");
    TCase *tc = tcase_create("p2p");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, matrix, 0, NMATRIX);
    tcase_add_test(tc, channels_off_uses_tcp);
    tcase_add_test(tc, ordering_async);
    tcase_add_loop_test(tc, mismatch_both_ranks, MM_COUNT, MM_COUNT_BIG + 1);
    tcase_add_loop_test(tc, sigkill_mid_transfer, 0, 4);
    tcase_add_loop_test(tc, sigstop_times_out, 0, 2);
    tcase_add_test(tc, abort_from_thread);
    tcase_add_loop_test(tc, counters_wrap, 0, 2);
    tcase_add_loop_test(tc, oversub_small_recv_spin, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
