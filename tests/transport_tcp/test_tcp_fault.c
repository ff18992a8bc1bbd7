/*
 * test_tcp_fault.c - tcp transport failures: contract mismatches caught on
 * the header before the payload lands, stale messages, peers killed
 * (idle / mid-transfer / while stashed) and stopped, aborts from another
 * thread, a peer that announces a large message and never sends (all of)
 * its body.
 */
#include <check.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "contract/contract.h"
#include "fixture.h"
#include "support/support.h"
#include "transport/tcp/net.h"

#define COLL COH_MSG_COLL
#define P2P COH_MSG_P2P

/* ---- contract mismatch for every header field, before the payload ---- */

typedef struct mm_case {
    const char *name;
    int field;        /* coh_field */
    const char *word; /* must appear in the error message */
    size_t len;
} mm_case;

static const mm_case mm_cases[] = {
    {"count", COH_FIELD_COUNT, "count", 4096},
    {"dtype", COH_FIELD_DTYPE, "dtype", 4096},
    {"op", COH_FIELD_OP, "op", 4096},
    {"redop", COH_FIELD_REDOP, "reduce op", 4096},
    {"root", COH_FIELD_ROOT, "root", 4096},
    {"tag", COH_FIELD_TAG, "tag", 4096},
    {"seq", COH_FIELD_SEQ, "sequence number", 4096},
    {"group", COH_FIELD_GROUP, "group id", 4096},
    {"generation", COH_FIELD_GENERATION, "generation", 4096},
    {"step", COH_FIELD_STEP, "algorithm step", 4096},
    {"count-large", COH_FIELD_COUNT, "count", 8u << 20},
};

static int mm_body(tf_rank *r)
{
    const mm_case *mc = r->arg;
    if (tf_connect(r))
        return 1;
    size_t len = mc->len;
    coh_call c = tf_call(3, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, len / 4);
    unsigned char *buf = malloc(len);
    TF_CHECK(r, buf, "malloc");
    if (r->rank == 0) {
        coh_call bad = c;
        coh_xfer op;
        switch (mc->field) {
        case COH_FIELD_COUNT:
            bad.count = c.count + 1;
            break;
        case COH_FIELD_DTYPE:
            bad.dtype = COHORT_INT32;
            break;
        case COH_FIELD_OP:
            bad.coll = COH_COLL_REDUCE_SCATTER;
            break;
        case COH_FIELD_REDOP:
            bad.redop = COHORT_MAX;
            break;
        case COH_FIELD_ROOT:
            bad.root = 1;
            break;
        case COH_FIELD_TAG:
            bad.tag = 42;
            break;
        case COH_FIELD_SEQ:
            bad.seq = 4;
            break;
        }
        tf_fill(buf, len, 5);
        tf_op(&op, r, &bad, COLL, 1, 1, buf, len, mc->field == COH_FIELD_STEP ? 1 : 0);
        if (mc->field == COH_FIELD_GROUP)
            op.hdr.group ^= 0x55;
        if (mc->field == COH_FIELD_GENERATION)
            op.hdr.gen += 1;
        /* The receiver refuses the payload: a large send may not complete. */
        cohort_status st = cht_tp_up(&r->g, coh_net_xfer(r->net, &c, &op, 1));
        if (st == COHORT_OK) {
            /* Wait for the receiver's abort frame. */
            st = tf_recv(r, &c, COLL, 1, buf, len, 9);
        }
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "sender got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
    } else {
        memset(buf, 0xab, len);
        cohort_status st = tf_recv(r, &c, COLL, 0, buf, len, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "receiver got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
        TF_CHECK(r, strstr(r->g.err.msg, mc->word), "message lacks \"%s\": %s", mc->word,
                 r->g.err.msg);
        for (size_t i = 0; i < len; i++)
            TF_CHECK(r, buf[i] == 0xab, "receive buffer written at %zu before the check", i);
    }
    free(buf);
    return 0;
}

START_TEST(contract_mismatch_fields)
{
    const mm_case *mc = &mm_cases[_i];
    tf_opts o = {.nranks = 2, .timeout_ms = 10000};
    tf_result res;
    tf_shared *sh = tf_run(&o, mm_body, (void *)mc, &res);
    if (res.exit[0] || res.exit[1])
        fprintf(stderr, "case %s\n", mc->name);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* A message for a call this rank already finished (lower seq) arriving
 * while it waits on another peer: contract error, not a silent stash. */
static int stale_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    unsigned char buf[64];
    coh_call c5 = tf_call(5, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 64);
    coh_call c6 = tf_call(6, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 64);
    if (r->rank == 0) {
        memset(buf, 1, sizeof buf);
        TF_OK(r, tf_send(r, &c5, COLL, 1, buf, 64, 0));
        /* A second message for call #5: rank 1 expects nothing more. */
        TF_OK(r, tf_send(r, &c5, COLL, 1, buf, 64, 1));
        cohort_status st = tf_recv(r, &c6, COLL, 1, buf, 64, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s", cohort_status_name(st));
    } else if (r->rank == 1) {
        TF_OK(r, tf_recv(r, &c5, COLL, 0, buf, 64, 0));
        cohort_status st = tf_recv(r, &c6, COLL, 2, buf, 64, 0); /* rank 2 never sends */
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
        TF_CHECK(r, strstr(r->g.err.msg, "#5"), "message: %s", r->g.err.msg);
    } else {
        cohort_status st = tf_recv(r, &c6, COLL, 1, buf, 64, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s", cohort_status_name(st));
    }
    return 0;
}

START_TEST(contract_stale_seq)
{
    tf_opts o = {.nranks = 3, .timeout_ms = 10000};
    tf_result res;
    tf_shared *sh = tf_run(&o, stale_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* A stray message for a finished call stashed *behind* a newer one from
 * the same peer (its stream out of call order: a broken or hostile peer).
 * The stale walk at a call's start stops at a peer's first message of the
 * current call or later (linear, see xfer.c), so it passes the old message
 * over while the newer one waits in front of it; once the newer one is
 * taken the old one is first, and the next call's start must refuse it: a
 * contract error naming its call on every rank, not a stash that grows. */
static int behind_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    unsigned char buf[64];
    coh_call go = tf_call(1, COH_COLL_SEND, COHORT_UINT8, -1, -1, 3, 0);
    coh_call c5 = tf_call(5, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 64);
    coh_call c6 = tf_call(6, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 64);
    coh_call c7 = tf_call(7, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, 64);
    if (r->rank == 0) {
        tf_fill(buf, sizeof buf, 6);
        TF_OK(r, tf_send(r, &c6, COLL, 1, buf, 64, 0));
        tf_fill(buf, sizeof buf, 5);
        TF_OK(r, tf_send(r, &c5, COLL, 1, buf, 64, 0)); /* after #6: out of order */
        TF_OK(r, tf_send(r, &go, P2P, 2, NULL, 0, 0));
        cohort_status st = tf_recv(r, &c7, COLL, 1, buf, 64, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
    } else if (r->rank == 2) {
        TF_OK(r, tf_recv(r, &go, P2P, 0, NULL, 0, 0));
        usleep(300 * 1000); /* rank 1 sleeps in poll() with rank 0's data there */
        TF_OK(r, tf_send(r, &go, P2P, 1, NULL, 0, 0));
        tf_fill(buf, sizeof buf, 55);
        TF_OK(r, tf_send(r, &c5, COLL, 1, buf, 64, 0));
        cohort_status st = tf_recv(r, &c7, COLL, 1, buf, 64, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
    } else {
        /* rank 0's two messages arrive while this rank waits on rank 2's
         * word: both stashed, #6 in front of #5 */
        TF_OK(r, tf_recv(r, &go, P2P, 2, NULL, 0, 0));
        coh_net_tx_stats ts;
        coh_net_get_tx_stats(r->net, &ts);
        TF_CHECK(r, ts.stash_peak >= 2, "rank 0's messages were not stashed (%ld at most)",
                 ts.stash_peak);
        TF_OK(r, tf_recv(r, &c5, COLL, 2, buf, 64, 0)); /* #5 from rank 2 */
        TF_CHECK(r, tf_check(buf, 64, 55) < 0, "call #5's payload is rank 2's");
        TF_OK(r, tf_recv(r, &c6, COLL, 0, buf, 64, 0)); /* #6 from the stash's front */
        TF_CHECK(r, tf_check(buf, 64, 6) < 0, "call #6's payload is rank 0's #6");
        cohort_status st = tf_recv(r, &c7, COLL, 2, buf, 64, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st),
                 r->g.err.msg);
        TF_CHECK(r, strstr(r->g.err.msg, "#5") && strstr(r->g.err.msg, "rank 0"),
                 "message names rank 0's call #5: %s", r->g.err.msg);
    }
    return 0;
}

START_TEST(contract_stale_behind_newer)
{
    tf_opts o = {.nranks = 3, .timeout_ms = 10000};
    tf_result res;
    tf_shared *sh = tf_run(&o, behind_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* p2p: matched by tag, then count/dtype compared. */
static int p2p_mm_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    unsigned char buf[256];
    if (r->rank == 0) {
        coh_call s = tf_call(1, COH_COLL_SEND, COHORT_INT32, -1, 1, 3, 64);
        memset(buf, 1, sizeof buf);
        TF_OK(r, tf_send(r, &s, P2P, 1, buf, 256, 0));
        coh_call w = tf_call(1, COH_COLL_RECV, COHORT_INT32, -1, 1, 4, 0);
        cohort_status st = tf_recv(r, &w, P2P, 1, NULL, 0, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s", cohort_status_name(st));
    } else {
        coh_call rc = tf_call(1, COH_COLL_RECV, COHORT_INT32, -1, 0, 3, 32);
        memset(buf, 0xab, sizeof buf);
        cohort_status st = tf_recv(r, &rc, P2P, 0, buf, 128, 0);
        tf_record(r, st);
        TF_CHECK(r, st == COHORT_ERR_CONTRACT, "got %s", cohort_status_name(st));
        TF_CHECK(r, strstr(r->g.err.msg, "count"), "message: %s", r->g.err.msg);
        for (size_t i = 0; i < sizeof buf; i++)
            TF_CHECK(r, buf[i] == 0xab, "buffer written at %zu", i);
    }
    return 0;
}

START_TEST(contract_p2p_count)
{
    tf_opts o = {.nranks = 2, .timeout_ms = 10000};
    tf_result res;
    tf_shared *sh = tf_run(&o, p2p_mm_body, NULL, &res);
    tf_assert_ok(sh, &res);
    tf_done(sh);
}
END_TEST

/* ---- peer killed: idle, mid-transfer (direct), mid-transfer (stashed) ---- */

enum { KILL_IDLE = 0, KILL_DIRECT = 1, KILL_STASHED = 2, KILL_SMALL_SEND = 3 };
#define VICTIM 2
#define KILL_BIG (256u << 20)

static int kill_body(tf_rank *r)
{
    int mode = (int)(long)r->arg;
    if (tf_connect(r))
        return 1;
    size_t big = KILL_BIG;
    coh_call c = tf_call(1, COH_COLL_BROADCAST, COHORT_UINT8, -1, VICTIM, 0, big);
    if (r->rank == VICTIM) {
        unsigned char *buf = malloc(big);
        TF_CHECK(r, buf, "malloc");
        memset(buf, 3, big);
        if (mode == KILL_IDLE) {
            tf_flag_set(r->sh, 0, 1);
            pause();
        }
        if (mode == KILL_SMALL_SEND) {
            /* Many small messages; the test process kills us in the middle. */
            tf_flag_set(r->sh, 0, 1);
            for (uint64_t i = 0;; i++)
                tf_send(r, &c, COLL, 0, buf, 100, (uint32_t)i);
        }
        tf_flag_set(r->sh, 0, 1);
        tf_send(r, &c, COLL, 0, buf, big, 0);
        pause();
        return 1;
    }
    cohort_status st;
    if (r->rank == 0 && (mode == KILL_DIRECT || mode == KILL_SMALL_SEND)) {
        unsigned char *buf = malloc(big);
        TF_CHECK(r, buf, "malloc");
        if (mode == KILL_DIRECT) {
            st = tf_recv(r, &c, COLL, VICTIM, buf, big, 0);
        } else {
            for (uint64_t i = 0;; i++)
                if ((st = tf_recv(r, &c, COLL, VICTIM, buf, 100, (uint32_t)i)) != COHORT_OK)
                    break;
        }
        free(buf);
    } else {
        /* Blocked on another peer: the victim's connection is idle or
         * carries an unexpected message. Rank 0 waits for rank 1, rank 1
         * for rank 0; neither sends. */
        unsigned char b[8];
        st = tf_recv(r, &c, COLL, 1 - r->rank, b, 8, 0);
    }
    tf_record(r, st);
    TF_CHECK(r, st == COHORT_ERR_PEER_LOST, "got %s: %s", cohort_status_name(st), r->g.err.msg);
    TF_CHECK(r, strstr(r->g.err.msg, "rank 2"), "message does not name rank 2: %s", r->g.err.msg);
    return 0;
}

static int kill_parent(tf_shared *sh, void *arg)
{
    (void)arg;
    if (tf_flag_wait(sh, 0, 1, 30000) != 0)
        return -1;
    pid_t victim;
    pthread_mutex_lock(&sh->mu);
    victim = sh->pid[VICTIM];
    pthread_mutex_unlock(&sh->mu);
    /* For the small-message mode let some messages flow first; for the
     * others this lands while the transfer is running or idle. */
    if ((int)(long)arg == KILL_SMALL_SEND) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sh->t_event_ns = tf_now_ns();
    kill(victim, SIGKILL);
    return 0;
}

START_TEST(peer_killed)
{
    static const char *names[] = {"idle", "mid-transfer direct", "mid-transfer stashed",
                                  "small messages"};
    tf_opts o = {.nranks = 3, .timeout_ms = 30000, .parent = kill_parent};
    tf_result res;
    tf_shared *sh = tf_run(&o, kill_body, (void *)(long)_i, &res);
    ck_assert_int_eq(res.parent, 0);
    ck_assert_msg(res.exit[VICTIM] == 128 + SIGKILL, "victim exit %d", res.exit[VICTIM]);
    res.exit[VICTIM] = 0;
    tf_assert_ok(sh, &res);
    /* docs/reliability.md: survivors see PEER_LOST within 2 s. Measured
     * from kill(): that includes the kernel's teardown of the victim (its
     * sockets close only then) and, in the sanitizer builds, slower ranks
     * on both sides. 2026-12-02, 2-core VM with the other core busy
     * (`yes`), 20 runs x 8 samples: TSan p50 638 ms, 14 of 160 over 2 s,
     * max 3776 ms; RelWithDebInfo (5 runs) max 408 ms - so the bound
     * scales with the slow builds' CK_TIMEOUT_MULTIPLIER, as Check's own
     * timeouts do. */
    double bound = 2000 * cht_time_scale();
    for (int r = 0; r < 2; r++) {
        double ms = (double)(sh->t_ns[r] - sh->t_event_ns) / 1e6;
        fprintf(stderr, "peer_killed %s: rank %d saw PEER_LOST %.1f ms after the kill: %s\n",
                names[_i], r, ms, sh->msg[r]);
        ck_assert_msg(ms < bound, "rank %d took %.1f ms (bound %.0f ms)", r, ms, bound);
    }
    tf_done(sh);
}
END_TEST

/* ---- peer stopped: TIMEOUT after the group timeout, not a hang ---- */

static int stop_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    unsigned char b[8];
    coh_call c = tf_call(1, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0, 0);
    if (r->rank == 1) {
        tf_flag_set(r->sh, 0, 1);
        raise(SIGSTOP);
        return 0;
    }
    TF_CHECK(r, tf_flag_wait(r->sh, 0, 1, 20000) == 0, "flag");
    uint64_t t0 = tf_now_ns();
    cohort_status st = tf_recv(r, &c, COLL, 1, b, 8, 0);
    tf_record(r, st);
    r->sh->val[0] = (long)((tf_now_ns() - t0) / 1000000);
    tf_flag_set(r->sh, 1, 1);
    TF_CHECK(r, st == COHORT_ERR_TIMEOUT, "got %s: %s", cohort_status_name(st), r->g.err.msg);
    TF_CHECK(r, strstr(r->g.err.msg, "timed out after 1000 ms"), "message: %s", r->g.err.msg);
    return 0;
}

static int stop_parent(tf_shared *sh, void *arg)
{
    (void)arg;
    int rc = tf_flag_wait(sh, 1, 1, 30000);
    pid_t p = sh->pid[1];
    kill(p, SIGKILL); /* the stopped rank never finishes by itself */
    return rc;
}

START_TEST(peer_stopped_times_out)
{
    tf_opts o = {.nranks = 2, .timeout_ms = 1000, .parent = stop_parent};
    tf_result res;
    tf_shared *sh = tf_run(&o, stop_body, NULL, &res);
    ck_assert_int_eq(res.parent, 0);
    res.exit[1] = 0;
    tf_assert_ok(sh, &res);
    fprintf(stderr, "peer_stopped: TIMEOUT after %ld ms (timeout 1000): %s\n", sh->val[0],
            sh->msg[0]);
    /* never before the timeout; the upper bound scales in the sanitizer
     * builds (CK_TIMEOUT_MULTIPLIER), as peer_killed's */
    ck_assert_msg(sh->val[0] >= 1000 && sh->val[0] < 2000 * cht_time_scale(), "took %ld ms",
                  sh->val[0]);
    tf_done(sh);
}
END_TEST

/* ---- a peer announces a large message and withholds its body ---- */

/* Rank 0 is the attacker: after a valid handshake it writes, on its own
 * connection to rank 1, the header of broadcast #2 (1 MiB, step 0, every
 * contract field right) and then either nothing more, holding the
 * connection open (stall), or 1000 bytes of body and a FIN (short). Rank 1
 * first waits for 16 bytes from rank 2, which come after rank 0's header:
 * with park_ahead (a broadcast tree's relay) the header is parked and the
 * body left in the kernel; without it the message is stashed and its body
 * awaited. Then rank 1 posts the receive. It must end with TIMEOUT after
 * its timeout (stall) or PEER_LOST at once (short), naming rank 0 and the
 * call; rank 2, waiting on rank 1, gets rank 1's failure by its abort
 * frame (the group is failed as for any data-path failure). */
enum { WB_STALL_PARKED, WB_SHORT_PARKED, WB_STALL_STASHED, WB_SHORT_STASHED, WB_NMODES };
#define WB_LEN (1u << 20)
#define WB_TIMEOUT 1000

static int wb_short(int mode) { return mode == WB_SHORT_PARKED || mode == WB_SHORT_STASHED; }
static int wb_parked(int mode) { return mode == WB_STALL_PARKED || mode == WB_SHORT_PARKED; }

static void wb_tweak(int rank, cohort_group *g, void *arg)
{
    (void)arg;
    if (rank == 2)
        g->timeout_ms = 20000; /* waits on rank 1's verdict, not its own clock */
}

/* Ranks 1 and 2 count themselves done in flag 1 (rank 0 waits for 2). */
static void wb_finished(tf_shared *sh)
{
    pthread_mutex_lock(&sh->mu);
    int v = ++sh->val[TF_MAX - 1];
    pthread_mutex_unlock(&sh->mu);
    tf_flag_set(sh, 1, v);
}

static int wb_body(tf_rank *r)
{
    int mode = (int)(long)r->arg;
    if (tf_connect(r))
        return 1;
    cohort_status want = wb_short(mode) ? COHORT_ERR_PEER_LOST : COHORT_ERR_TIMEOUT;
    coh_call c1 = tf_call(1, COH_COLL_BROADCAST, COHORT_UINT8, -1, 2, 0, 16);
    coh_call c2 = tf_call(2, COH_COLL_BROADCAST, COHORT_UINT8, -1, 0, 0, WB_LEN);
    unsigned char *buf = calloc(1, WB_LEN);
    TF_CHECK(r, buf, "malloc");
    if (r->rank == 0) {
        coh_xfer op;
        tf_op(&op, r, &c2, COLL, 1, 1, buf, WB_LEN, 0);
        op.hdr.magic = COH_HDR_MAGIC;
        op.hdr.src = 0;
        op.hdr.len = WB_LEN;
        int fd = r->net->c[1].fd;
        TF_CHECK(r, write(fd, &op.hdr, sizeof op.hdr) == (ssize_t)sizeof op.hdr, "write");
        if (wb_short(mode)) {
            TF_CHECK(r, write(fd, buf, 1000) == 1000, "write");
            shutdown(fd, SHUT_WR);
        }
        tf_flag_set(r->sh, 0, 1);
        /* Never sends the rest; stays until the others are done. */
        TF_CHECK(r, tf_flag_wait(r->sh, 1, 2, 30000) == 0, "flag");
        free(buf);
        return 0;
    }
    if (r->rank == 2) {
        TF_CHECK(r, tf_flag_wait(r->sh, 0, 1, 20000) == 0, "flag");
        usleep(200 * 1000); /* rank 1 reads rank 0's header first */
        /* (rank 1 may have failed already: then the send reads its abort
         * frame, or succeeds and the receive does) */
        cohort_status st = tf_send(r, &c1, COLL, 1, buf, 16, 0);
        coh_call c3 = tf_call(3, COH_COLL_BROADCAST, COHORT_UINT8, -1, 1, 0, 8);
        if (st == COHORT_OK)
            st = tf_recv(r, &c3, COLL, 1, buf, 8, 0);
        tf_record(r, st);
        wb_finished(r->sh);
        TF_CHECK(r, st == want, "got %s: %s", cohort_status_name(st), r->g.err.msg);
        TF_CHECK(r, strstr(r->g.err.msg, "rank 1 aborted the group") &&
                        strstr(r->g.err.msg, "rank 0"),
                 "message: %s", r->g.err.msg);
        free(buf);
        return 0;
    }
    r->g.park_ahead = wb_parked(mode);
    cohort_status st = tf_recv(r, &c1, COLL, 2, buf, 16, 0);
    r->g.park_ahead = 0;
    const tcp_conn *c = &r->net->c[0];
    int state = c->rx_state, nstash = r->net->nstash;
    uint64_t t0 = tf_now_ns();
    /* Stashed, the message is read as it comes, and so is the close: a
     * peer that closes in the middle of a message is lost at once, in
     * whatever call this rank is (rank 0 closed before rank 2 sent).
     * Parked, nothing is read past the header until a receive needs it. */
    int early = st != COHORT_OK;
    if (!early)
        st = tf_recv(r, &c2, COLL, 0, buf, WB_LEN, 0);
    r->sh->val[1] = (long)((tf_now_ns() - t0) / 1000000);
    tf_record(r, st);
    wb_finished(r->sh);
    TF_CHECK(r, !early || mode == WB_SHORT_STASHED, "first receive: %s: %s",
             cohort_status_name(st), r->g.err.msg);
    coh_net_tx_stats ts;
    coh_net_get_tx_stats(r->net, &ts);
    TF_CHECK(r, ts.parks == wb_parked(mode), "%ld parks", ts.parks);
    if (wb_parked(mode))
        TF_CHECK(r, state == RX_PARKED && nstash == 0,
                 "rank 0's header not parked (state %d, %d stashed)", state, nstash);
    else if (!early)
        TF_CHECK(r, state == RX_BODY && nstash == 1,
                 "rank 0's message not being stashed (state %d, %d stashed)", state, nstash);
    TF_CHECK(r, st == want, "got %s: %s", cohort_status_name(st), r->g.err.msg);
    const char *m = r->g.err.msg;
    TF_CHECK(r, strstr(m, "rank 0") && strstr(m, "broadcast #2"),
             "message does not name rank 0 and broadcast #2: %s", m);
    if (wb_short(mode))
        TF_CHECK(r, strstr(m, "1000 of 1048576 bytes arrived"), "message: %s", m);
    else
        TF_CHECK(r, strstr(m, "timed out after 1000 ms") &&
                        strstr(m, "waiting for rank 0: it announced broadcast #2 step 0, 0 of "
                                  "1048576 bytes arrived"),
                 "message: %s", m);
    free(buf);
    return 0;
}

START_TEST(withheld_body)
{
    static const char *names[] = {"parked, no body", "parked, short body and close",
                                  "stashed, no body", "stashed, short body and close"};
    tf_opts o = {.nranks = 3, .timeout_ms = WB_TIMEOUT, .tweak = wb_tweak};
    tf_result res;
    tf_shared *sh = tf_run(&o, wb_body, (void *)(long)_i, &res);
    tf_assert_ok(sh, &res);
    long ms = sh->val[1];
    fprintf(stderr, "withheld_body %s: rank 1 %s after %ld ms: %s\n  rank 2: %s\n", names[_i],
            cohort_status_name(sh->status[1]), ms, sh->msg[1], sh->msg[2]);
    /* stall: never before the timeout, and not much after (as
     * peer_stopped_times_out); short: the close was already seen */
    if (wb_short(_i))
        ck_assert_msg(ms < 1000 * cht_time_scale(), "took %ld ms", ms);
    else
        ck_assert_msg(ms >= WB_TIMEOUT && ms < 2 * WB_TIMEOUT * cht_time_scale(), "took %ld ms",
                      ms);
    tf_done(sh);
}
END_TEST

/* ---- abort from another thread wakes a blocked transfer (and the peer) ---- */

static void *aborter(void *p)
{
    tf_rank *r = p;
    if (tf_flag_wait(r->sh, 0, 1, 20000) == 0) {
        /* The main thread is (about to be) blocked in its receive; either
         * way it must return promptly once the group is failed. */
        struct timespec ts = {0, 150 * 1000 * 1000};
        nanosleep(&ts, NULL);
        r->sh->t_event_ns = tf_now_ns();
        coh_group_fail(&r->g, COHORT_ERR_ABORTED, "test abort from a helper thread");
    }
    return NULL;
}

static int abort_body(tf_rank *r)
{
    if (tf_connect(r))
        return 1;
    unsigned char b[1024];
    coh_call c = tf_call(1, COH_COLL_ALL_REDUCE, COHORT_UINT8, COHORT_SUM, -1, 0, 1024);
    pthread_t th;
    if (r->rank == 0)
        pthread_create(&th, NULL, aborter, r);
    tf_flag_set(r->sh, 0, 1);
    /* Nobody sends: both block until the abort. */
    cohort_status st = tf_recv(r, &c, COLL, 1 - r->rank, b, sizeof b, 0);
    tf_record(r, st);
    if (r->rank == 0)
        pthread_join(th, NULL);
    TF_CHECK(r, st == COHORT_ERR_ABORTED, "got %s: %s", cohort_status_name(st), r->g.err.msg);
    TF_CHECK(r, strstr(r->g.err.msg, "test abort"), "message: %s", r->g.err.msg);
    return 0;
}

START_TEST(abort_from_thread)
{
    tf_opts o = {.nranks = 2, .timeout_ms = 30000};
    tf_result res;
    tf_shared *sh = tf_run(&o, abort_body, NULL, &res);
    tf_assert_ok(sh, &res);
    for (int r = 0; r < 2; r++) {
        double ms = (double)(sh->t_ns[r] - sh->t_event_ns) / 1e6;
        fprintf(stderr, "abort_from_thread: rank %d returned %.1f ms after the abort\n", r, ms);
        ck_assert_msg(ms < 1000 * cht_time_scale(), "rank %d took %.1f ms", r, ms);
    }
    tf_done(sh);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("transport_tcp_fault");
    TCase *t = tcase_create("contract");
    tcase_set_timeout(t, 60);
    tcase_add_loop_test(t, contract_mismatch_fields, 0, (int)COH_ARRAY_LEN(mm_cases));
    tcase_add_test(t, contract_stale_seq);
    tcase_add_test(t, contract_stale_behind_newer);
    tcase_add_test(t, contract_p2p_count);
    suite_add_tcase(s, t);
    t = tcase_create("peers");
    tcase_set_timeout(t, 90);
    tcase_add_loop_test(t, peer_killed, 0, 4);
    tcase_add_test(t, peer_stopped_times_out);
    tcase_add_test(t, abort_from_thread);
    tcase_add_loop_test(t, withheld_body, 0, WB_NMODES);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
