/* test_shm_p2p_adv.c - the send/recv channels against a misbehaving peer,
 * in real processes (cohort_init groups):
 *   - a corrupted or hostile peer writes garbage into its channel slot (the
 *     chunk's length, header fields, mode; a replayed stale slot): the
 *     receiver fails with a specific error naming what is wrong, its
 *     buffer untouched, whether its recv reads that channel itself or takes
 *     the chunk into its stash while waiting for another peer; the other
 *     ranks' next call fails too, nobody hangs;
 *   - a peer that sends what is not asked for cannot grow the receiver's
 *     stash past COHORT_SHM_P2P_STASH_BYTES: its sends block (backpressure)
 *     while the receiver waits for someone else, and all arrive intact;
 *   - with the cap at 0, two ranks that send to each other first (eager,
 *     pipelined, single copy) still never deadlock;
 *   - a malformed COHORT_SHM_P2P_STASH_BYTES fails cohort_init naming it;
 *   - a receiver that forges where a split single copy's tail goes (its
 *     size, its address): the sender refuses or fails the write, named.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#include "support/support.h"
#include "transport/shm/shm_seg.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* ---- garbage in a channel slot ---- */

enum {
    G_BYTES_HUGE,   /* the head's chunk length: 2^40 */
    G_BYTES_OVER,   /* one line more than the slot holds */
    G_BYTES_SHORT,  /* fewer bytes than the message has */
    G_LEN,          /* a count whose length (count x dtype size) overflows */
    G_LEN_COUNT,    /* a huge count, the chunk's length unchanged */
    G_MAGIC,
    G_KIND,
    G_SRC,
    G_ROOT,
    G_STEP,
    G_DTYPE,
    G_MODE,
    G_CMA,          /* a single copy on a segment that uses none */
    G_REPLAY,       /* a stale slot's stamp moved on: it holds an old message */
    G_COUNT_INLINE, /* a count that makes the message inline: garbage data, a mismatch */
    G_NCASES
};

typedef struct garbage_case {
    cohort_status want;
    const char *words;
} garbage_case;

static const garbage_case garbage[G_NCASES] = {
    [G_BYTES_HUGE] = {COHORT_ERR_PROTOCOL, "has an unexpected length"},
    [G_BYTES_OVER] = {COHORT_ERR_PROTOCOL, "has an unexpected length"},
    [G_BYTES_SHORT] = {COHORT_ERR_PROTOCOL, "has an unexpected length"},
    [G_LEN] = {COHORT_ERR_PROTOCOL, "a length its count and dtype do not give"},
    [G_LEN_COUNT] = {COHORT_ERR_PROTOCOL, "has an unexpected length"},
    [G_MAGIC] = {COHORT_ERR_PROTOCOL, "has no message header"},
    [G_KIND] = {COHORT_ERR_PROTOCOL, "is not a send/recv message"},
    [G_SRC] = {COHORT_ERR_PROTOCOL, "names another sender or receiver"},
    [G_ROOT] = {COHORT_ERR_PROTOCOL, "names another sender or receiver"},
    [G_STEP] = {COHORT_ERR_PROTOCOL, "is out of sequence"},
    [G_DTYPE] = {COHORT_ERR_PROTOCOL, "names no dtype"},
    [G_MODE] = {COHORT_ERR_PROTOCOL, "has an unknown mode"},
    [G_CMA] = {COHORT_ERR_PROTOCOL, "a single copy where none is due"},
    [G_REPLAY] = {COHORT_ERR_CONTRACT, "seq"},
    [G_COUNT_INLINE] = {COHORT_ERR_CONTRACT, "count"},
};

#define NGOOD ((int)SHM_P2P_HEADS) /* good messages first: every head holds a consumed chunk */
#define NV 8 /* int32 values in the corrupted message: 32 B, past SHM_CHAN_INLINE, so
              * its head holds a chunk length to corrupt */

typedef struct garbage_arg {
    int kind;  /* G_* */
    int stash; /* 1: the receiver waits for rank 2 while the chunk comes */
} garbage_arg;

/* Rank 0 sends a good eager message, then rewrites its published slot (the
 * receiver is held off by flag 0 meanwhile); rank 1 receives it directly
 * or while waiting for rank 2; rank 2 sends late (stash) or just waits. */
static int rank_garbage(int rank, void *arg)
{
    const garbage_arg *a = arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int32_t v[NV + 8];
    for (int i = 0; i < NGOOD; i++) {
        if (rank == 0) {
            for (int j = 0; j < NV; j++)
                v[j] = i * 100 + j;
            RANK_PASS(cohort_send(g, v, NV, COHORT_INT32, 1, 1), g);
        } else if (rank == 1) {
            RANK_PASS(cohort_recv(g, v, NV, COHORT_INT32, 0, 1), g);
            RANK_CHECK(v[NV - 1] == i * 100 + NV - 1, "good message %d: %d", i, v[NV - 1]);
        }
    }
    RANK_PASS(cohort_barrier(g), g);
    cohort_status st;
    if (rank == 0) {
        coh_shm *s = g->shm;
        int q = coh_shm_p2p_peer(s, 1);
        RANK_CHECK(q >= 0, "rank 1 is not on a channel");
        shm_chan *ch = shm_chan_of(s, s->me, q);
        uint32_t t = s->p2p_out[q];
        if (a->kind == G_REPLAY) {
            /* a peer whose counter jumps: the receiver finds the slot's
             * old (consumed) chunk */
            atomic_store(shm_chan_stamp(shm_chan_slot(s, ch, t)), t + 1);
            shm_bell_ring(s, q);
        } else {
            for (int j = 0; j < NV; j++)
                v[j] = 7000 + j;
            RANK_PASS(cohort_send(g, v, NV, COHORT_INT32, 1, 2), g); /* eager: in the slot */
            shm_chan_head *h = (shm_chan_head *)shm_chan_slot(s, ch, t);
            switch (a->kind) {
            case G_BYTES_HUGE: h->u.d.bytes = (uint64_t)1 << 40; break;
            case G_BYTES_OVER: h->u.d.bytes = s->p2p_bytes + SHM_LINE; break;
            case G_BYTES_SHORT: h->u.d.bytes = 8; break;
            case G_LEN: h->count = (uint64_t)1 << 62; break;
            case G_LEN_COUNT: h->count = (uint64_t)1 << 38; break;
            case G_MAGIC: h->magic ^= 0x01u; break;
            case G_KIND: h->kind = COH_MSG_COLL; break;
            case G_SRC: h->src = 2; break;
            case G_ROOT: h->dst = 0; break;
            case G_STEP: h->step = 3; break;
            case G_DTYPE: h->dtype = 250; break;
            case G_MODE: h->mode = 7; break;
            case G_CMA:
                h->mode = SHM_CHAN_CMA;
                h->u.d.bytes = NV * sizeof v[0];
                h->u.d.addr = (uint64_t)(uintptr_t)v;
                break;
            case G_COUNT_INLINE: h->count = 2; break;
            }
        }
        atomic_store(&th_sh()->flag[0], 1);
        st = cohort_barrier(g); /* the receiver's failure reaches here */
        RANK_CHECK(st != COHORT_OK, "rank 0: the barrier after the garbage passed");
    } else if (rank == 1) {
        th_wait_flag(0, 20000);
        for (int j = 0; j < NV + 8; j++)
            v[j] = -7;
        if (a->stash) {
            int32_t x = 0;
            st = cohort_recv(g, &x, 1, COHORT_INT32, 2, 3);
            if (st == COHORT_OK) /* the garbage was taken without complaint: read it */
                st = cohort_recv(g, v, NV, COHORT_INT32, 0, 2);
        } else {
            st = cohort_recv(g, v, NV, COHORT_INT32, 0, 2);
        }
        const char *e = cohort_last_error(g);
        RANK_CHECK(st == garbage[a->kind].want, "case %d%s: %s: %s", a->kind,
                   a->stash ? " (stash)" : "", cohort_status_name(st), e);
        RANK_CHECK(strstr(e, garbage[a->kind].words), "case %d: the error does not say \"%s\": %s",
                   a->kind, garbage[a->kind].words, e);
        for (int j = 0; j < NV + 8; j++)
            RANK_CHECK(v[j] == -7, "case %d: receive buffer written at %d (%d)", a->kind, j, v[j]);
    } else {
        th_wait_flag(0, 20000);
        if (a->stash) {
            usleep(200 * 1000); /* rank 1 waits for this while rank 0's chunk is there */
            int32_t x = 5;
            cohort_send(g, &x, 1, COHORT_INT32, 1, 3); /* eager: may pass or fail */
        }
        st = cohort_barrier(g);
        RANK_CHECK(st != COHORT_OK, "rank 2: the barrier after the garbage passed");
    }
    cohort_finalize(g);
    return 0;
}

START_TEST(garbage_in_slot)
{
    garbage_arg a = {_i / 2, _i % 2};
    th_shared_init();
    cht_opts o = {.nranks = 3, .deadline_ms = 30000,
                  .extra_env = "COHORT_SHM_P2P_BYTES=4096;COHORT_TIMEOUT=10;"
                               "COHORT_SHM_SINGLE_COPY=off"};
    cht_result r;
    cht_run_ranks(&o, rank_garbage, &a, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- the stash's cap: backpressure on a peer nobody receives from ---- */

#define NFLOOD 40
#define FLOOD_BYTES 4096
#define STASH_CAP 20000 /* 4 messages of 4096 B with their heads */
#define LATE_MS 1000    /* rank 2 joins rank 1's call this late */

static unsigned char fpat(size_t i, int k) { return (unsigned char)(i * 29u + (unsigned)k * 13u + 3u); }

/* arg: 0 rank 1 waits in a recv from rank 2, 1 in a (pipelined) send to it */
static int rank_flood(int rank, void *arg)
{
    int in_send = *(const int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    size_t big = (size_t)64 * FLOOD_BYTES; /* well past the channel's 4 slots */
    unsigned char *buf = calloc(1, big);
    RANK_CHECK(buf, "calloc");
    RANK_PASS(cohort_barrier(g), g);
    double t0 = now_ms();
    if (rank == 0) {
        int early = 0;
        for (int k = 0; k < NFLOOD; k++) {
            for (size_t i = 0; i < FLOOD_BYTES; i++)
                buf[i] = fpat(i, k);
            RANK_PASS(cohort_send(g, buf, FLOOD_BYTES, COHORT_UINT8, 1, k), g);
            if (now_ms() - t0 < LATE_MS * 0.8)
                early++;
        }
        /* the stash (4) + the channel's slots (4) + one in flight */
        RANK_CHECK(early <= 4 + (int)SHM_P2P_SLOTS + 1,
                   "%d sends went through while rank 1 waited for rank 2: its stash is not capped",
                   early);
    } else if (rank == 1) {
        RANK_PASS(in_send ? cohort_send(g, buf, big, COHORT_UINT8, 2, 0)
                          : cohort_recv(g, buf, big, COHORT_UINT8, 2, 0),
                  g);
        RANK_CHECK(now_ms() - t0 > LATE_MS * 0.8, "rank 1's call did not wait for rank 2");
        for (int k = 0; k < NFLOOD; k++) {
            memset(buf, 0, FLOOD_BYTES);
            RANK_PASS(cohort_recv(g, buf, FLOOD_BYTES, COHORT_UINT8, 0, k), g);
            for (size_t i = 0; i < FLOOD_BYTES; i++)
                RANK_CHECK(buf[i] == fpat(i, k), "message %d byte %zu", k, i);
        }
    } else {
        usleep(LATE_MS * 1000);
        RANK_PASS(in_send ? cohort_recv(g, buf, big, COHORT_UINT8, 1, 0)
                          : cohort_send(g, buf, big, COHORT_UINT8, 1, 0),
                  g);
    }
    free(buf);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(stash_cap_backpressure)
{
    int in_send = _i;
    char env[256];
    snprintf(env, sizeof env,
             "COHORT_SHM_P2P_BYTES=%d;COHORT_SHM_P2P_STASH_BYTES=%d;COHORT_TIMEOUT=20;"
             "COHORT_SHM_SINGLE_COPY=off",
             FLOOD_BYTES, STASH_CAP);
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, rank_flood, &in_send, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- many messages stashed: kept in order ---- */

/* Rank 0 sends NMANY small messages and then one of several chunks while
 * rank 1 waits in a recv from rank 2 (late): rank 1 takes them all into its
 * stash - the large one chunk by chunk onto the last message - and then
 * receives them in order. The stash appends at its last message (no walk
 * per chunk: with 20,000 messages a walk each took 2e8 steps). */
#define NMANY 20000
#define MANY_BIG (5 * 4096 + 123)
static int rank_many(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    unsigned char *buf = calloc(1, MANY_BIG);
    RANK_CHECK(buf, "calloc");
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 0) {
        for (uint32_t k = 0; k < NMANY; k++)
            RANK_PASS(cohort_send(g, &k, 1, COHORT_UINT32, 1, 7), g);
        for (size_t i = 0; i < MANY_BIG; i++)
            buf[i] = fpat(i, 5);
        RANK_PASS(cohort_send(g, buf, MANY_BIG, COHORT_UINT8, 1, 7), g);
        RANK_PASS(cohort_send(g, buf, 0, COHORT_UINT8, 2, 1), g); /* rank 2 may go */
    } else if (rank == 1) {
        RANK_PASS(cohort_recv(g, buf, 1, COHORT_UINT8, 2, 0), g);
        for (uint32_t k = 0; k < NMANY; k++) {
            uint32_t v = UINT32_MAX;
            RANK_PASS(cohort_recv(g, &v, 1, COHORT_UINT32, 0, 7), g);
            RANK_CHECK(v == k, "message %u came as %u", k, v);
        }
        memset(buf, 0, MANY_BIG);
        RANK_PASS(cohort_recv(g, buf, MANY_BIG, COHORT_UINT8, 0, 7), g);
        for (size_t i = 0; i < MANY_BIG; i++)
            RANK_CHECK(buf[i] == fpat(i, 5), "the large message, byte %zu", i);
        /* and the stash works on after it emptied */
        RANK_PASS(cohort_recv(g, buf, 1, COHORT_UINT8, 0, 8), g);
        RANK_CHECK(buf[0] == 42, "the message after: %u", buf[0]);
    } else {
        RANK_PASS(cohort_recv(g, buf, 0, COHORT_UINT8, 0, 1), g);
        usleep(200 * 1000);
        buf[0] = 9;
        RANK_PASS(cohort_send(g, buf, 1, COHORT_UINT8, 1, 0), g);
    }
    if (rank == 0) {
        buf[0] = 42;
        RANK_PASS(cohort_send(g, buf, 1, COHORT_UINT8, 1, 8), g);
    }
    free(buf);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(stash_many_in_order)
{
    cht_opts o = {.nranks = 3,
                  .deadline_ms = 120000,
                  .extra_env = "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_SINGLE_COPY=off"};
    cht_result r;
    cht_run_ranks(&o, rank_many, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- the cap makes a call time out: the error says so ---- */

/* Rank 1 waits in a recv from rank 2, which never sends; rank 0 floods
 * rank 1 past the cap. Rank 1's timeout (shorter than the others', so its
 * error is the group's) must name the cap and its values: before, only a
 * log line did. */
static int rank_cap_timeout(int rank, void *arg)
{
    (void)arg;
    if (rank == 1)
        setenv("COHORT_TIMEOUT", "2", 1);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    unsigned char *buf = calloc(1, FLOOD_BYTES);
    RANK_CHECK(buf, "calloc");
    RANK_PASS(cohort_barrier(g), g);
    cohort_status st = COHORT_OK;
    if (rank == 0) {
        for (int k = 0; k < NFLOOD && st == COHORT_OK; k++)
            st = cohort_send(g, buf, FLOOD_BYTES, COHORT_UINT8, 1, k);
    } else if (rank == 1) {
        st = cohort_recv(g, buf, FLOOD_BYTES, COHORT_UINT8, 2, 0);
        const char *e = cohort_last_error(g);
        RANK_CHECK(st == COHORT_ERR_TIMEOUT, "got %s: %s", cohort_status_name(st), e);
        char want[96];
        snprintf(want, sizeof want, "COHORT_SHM_P2P_STASH_BYTES=%d;", STASH_CAP);
        RANK_CHECK(strstr(e, "stash of this rank (1) reached its cap") && strstr(e, want) &&
                       strstr(e, "bytes held for recvs not yet made") &&
                       strstr(e, "rank 0's 4096-byte message"),
                   "the error does not say the cap was reached: %s", e);
    } else {
        st = cohort_recv(g, buf, FLOOD_BYTES, COHORT_UINT8, 1, 0);
    }
    RANK_CHECK(st != COHORT_OK, "rank %d's call succeeded", rank);
    if (rank != 1) {
        /* the aborted peers learn the cause too, as rank 1's, not their own */
        const char *e = cohort_last_error(g);
        RANK_CHECK(strstr(e, "stash of rank 1 reached its cap") && !strstr(e, "this rank") &&
                       strstr(e, "COHORT_SHM_P2P_STASH_BYTES="),
                   "rank %d's error does not name rank 1's stash cap: %s", rank, e);
    }
    free(buf);
    cohort_finalize(g);
    return 0;
}

START_TEST(stash_cap_timeout_names_cap)
{
    char env[256];
    snprintf(env, sizeof env,
             "COHORT_SHM_P2P_BYTES=%d;COHORT_SHM_P2P_STASH_BYTES=%d;COHORT_TIMEOUT=20;"
             "COHORT_SHM_SINGLE_COPY=off",
             FLOOD_BYTES, STASH_CAP);
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, rank_cap_timeout, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- no stash at all: two ranks sending to each other first ---- */

static const size_t xsizes[] = {16, 4096, (size_t)64 << 10, (size_t)1 << 20};

static int rank_cross(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int peer = 1 - rank;
    size_t maxb = xsizes[sizeof xsizes / sizeof xsizes[0] - 1];
    unsigned char *sb = malloc(maxb), *rb = malloc(maxb);
    RANK_CHECK(sb && rb, "malloc");
    for (size_t k = 0; k < sizeof xsizes / sizeof xsizes[0]; k++) {
        size_t n = xsizes[k];
        for (size_t i = 0; i < n; i++)
            sb[i] = fpat(i, rank * 10 + (int)k);
        memset(rb, 0, n);
        double t0 = now_ms();
        RANK_PASS(cohort_send(g, sb, n, COHORT_UINT8, peer, (int)k), g);
        RANK_PASS(cohort_recv(g, rb, n, COHORT_UINT8, peer, (int)k), g);
        RANK_CHECK(now_ms() - t0 < 5000, "%zu bytes took %.0f ms", n, now_ms() - t0);
        for (size_t i = 0; i < n; i++)
            RANK_CHECK(rb[i] == fpat(i, peer * 10 + (int)k), "%zu bytes: byte %zu", n, i);
    }
    free(sb);
    free(rb);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(cap_zero_no_deadlock)
{
    /* _i: 0 two copies, 1 single copy from 64 KiB */
    cht_opts o = {.nranks = 2, .deadline_ms = 60000,
                  .extra_env = _i ? "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_P2P_STASH_BYTES=0;"
                                    "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=on"
                                  : "COHORT_SHM_P2P_BYTES=4096;COHORT_SHM_P2P_STASH_BYTES=0;"
                                    "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=off"};
    cht_result r;
    cht_run_ranks(&o, rank_cross, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static int rank_bad_env(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    cohort_group *g = NULL;
    cohort_status st = cohort_init(&g);
    RANK_CHECK(st == COHORT_ERR_INVALID, "cohort_init: %s", cohort_status_name(st));
    const char *e = cohort_last_error(NULL);
    RANK_CHECK(strstr(e, "COHORT_SHM_P2P_STASH_BYTES") && strstr(e, "12x"), "the error does not name it: %s", e);
    return 0;
}

/* ---- the split single copy: the receiver says where the tail goes ----
 *
 * The sender of a single-copy message writes its tail where the receiver's
 * req says (shm_seg.h, "Channels"); a hostile or corrupted receiver could
 * name any size or address. The sender writes only the tail both sides
 * compute, and only into the receiver's own memory (process_vm_writev into
 * its pid): a wrong size is a protocol error, an unmapped address a failed
 * write - each named, on every rank, nothing written. The honest case
 * checks the split is really taken (the channel's words afterwards). */
#define SPLIT_BYTES ((size_t)256 << 10)
enum { T_HONEST, T_SIZE, T_ADDR, T_NCASES };

static int rank_split(int rank, void *arg)
{
    int kind = *(const int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    unsigned char *buf = malloc(SPLIT_BYTES);
    RANK_CHECK(buf, "malloc");
    for (size_t i = 0; i < SPLIT_BYTES; i++)
        buf[i] = rank == 0 ? (unsigned char)(i * 7u + 1u) : 0xEE;
    RANK_PASS(cohort_barrier(g), g);
    coh_shm *s = g->shm;
    int q = coh_shm_p2p_peer(s, 1 - rank);
    RANK_CHECK(q >= 0, "rank %d: the peer is not on a channel", rank);
    cohort_status st;
    if (rank == 0) {
        st = cohort_send(g, buf, SPLIT_BYTES, COHORT_UINT8, 1, 0);
        const char *e = cohort_last_error(g);
        if (kind == T_HONEST) {
            RANK_CHECK(st == COHORT_OK, "honest: %s: %s", cohort_status_name(st), e);
        } else {
            /* ranks outnumbering the cpus read whole: any tail is refused */
            int split = !s->oversub;
            cohort_status want =
                kind == T_SIZE || !split ? COHORT_ERR_PROTOCOL : COHORT_ERR_INVALID;
            const char *words = kind == T_SIZE ? "asked for a 262144-byte tail of a 262144-byte"
                                : !split       ? "asked for a 131072-byte tail"
                                               : "single-copy write of 131072 bytes at 0x1000";
            RANK_CHECK(st == want, "case %d: %s: %s", kind, cohort_status_name(st), e);
            RANK_CHECK(strstr(e, words), "case %d: the error does not say \"%s\": %s", kind,
                       words, e);
        }
    } else {
        shm_chan *ch = shm_chan_of(s, q, s->me);
        uint32_t t = s->p2p_in[q];
        if (kind == T_HONEST) {
            RANK_PASS(cohort_recv(g, buf, SPLIT_BYTES, COHORT_UINT8, 0, 0), g);
            for (size_t i = 0; i < SPLIT_BYTES; i++)
                RANK_CHECK(buf[i] == (unsigned char)(i * 7u + 1u), "byte %zu is %u", i, buf[i]);
            /* (one cpu for both ranks: read whole, no tail) */
            RANK_CHECK(atomic_load(&ch->req) == t + 1 &&
                           atomic_load(&ch->tail_done) == (s->oversub ? 0u : t + 1) &&
                           atomic_load(&ch->tail_bytes) == (s->oversub ? 0u : SPLIT_BYTES / 2),
                       "no split: req %u tail_done %u tail %llu (chunk %u)", atomic_load(&ch->req),
                       atomic_load(&ch->tail_done),
                       (unsigned long long)atomic_load(&ch->tail_bytes), t);
        } else {
            /* the single copy's head, then a forged answer */
            double t0 = now_ms();
            while (atomic_load(shm_chan_stamp(shm_chan_slot(s, ch, t))) != t + 1)
                RANK_CHECK(now_ms() - t0 < 20000, "rank 0's message never came");
            atomic_store(&ch->tail_bytes, kind == T_SIZE ? SPLIT_BYTES : SPLIT_BYTES / 2);
            atomic_store(&ch->tail_addr, kind == T_SIZE ? (uint64_t)(uintptr_t)buf : 0x1000u);
            atomic_store(&ch->req, t + 1);
            shm_bell_ring(s, q);
            st = cohort_barrier(g); /* the sender's failure reaches here */
            RANK_CHECK(st != COHORT_OK, "rank 1: the barrier after the forged answer passed");
            for (size_t i = 0; i < SPLIT_BYTES; i++)
                RANK_CHECK(buf[i] == 0xEE, "case %d: byte %zu written (%u)", kind, i, buf[i]);
        }
    }
    free(buf);
    cohort_finalize(g);
    return 0;
}

START_TEST(split_tail_forged)
{
    int kind = _i;
    cht_opts o = {.nranks = 2, .deadline_ms = 30000,
                  .extra_env = "COHORT_TIMEOUT=10;COHORT_SHM_SINGLE_COPY=on"};
    cht_result r;
    cht_run_ranks(&o, rank_split, &kind, &r);
    cht_assert_all_ok(&r);
}
END_TEST

START_TEST(stash_env_invalid)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 30000,
                  .extra_env = "COHORT_SHM_P2P_STASH_BYTES=12x;COHORT_TIMEOUT=5"};
    cht_result r;
    cht_run_ranks(&o, rank_bad_env, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("shm_p2p_adv");
    TCase *tc = tcase_create("p2p_adv");
    tcase_set_timeout(tc, 240);
    tcase_add_loop_test(tc, garbage_in_slot, 0, 2 * G_NCASES);
    tcase_add_loop_test(tc, stash_cap_backpressure, 0, 2);
    tcase_add_test(tc, stash_cap_timeout_names_cap);
    tcase_add_test(tc, stash_many_in_order);
    tcase_add_loop_test(tc, cap_zero_no_deadlock, 0, 2);
    tcase_add_test(tc, stash_env_invalid);
    tcase_add_loop_test(tc, split_tail_forged, 0, T_NCASES);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
