/* test_contract_e2e.c - the contract end to end, on real processes over shm
 * and tcp: every field of the fingerprint, extra and skipped calls, root
 * disagreements where no message flows, stall reports, p2p deadlock cycles,
 * frozen peers, and the two debug modes. Each rank checks its own error and
 * message; the test process checks every rank finished in time. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cohort_store.h"
#include "coll/coll.h"
#include "contract/contract.h"
#include "core/group.h"
#include "support/group.h"
#include "support/support.h"

/* The debug=buffers test commits the very data race it detects (a buffer
 * written while its async call reads it): under TSan that is reported as
 * what it is, so the case runs in the plain and ASan builds only. */
#if defined(__SANITIZE_THREAD__)
#define UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif
#ifndef UNDER_TSAN
#define UNDER_TSAN 0
#endif

enum field { F_COUNT, F_DTYPE_SAMEBYTES, F_REDOP, F_OP, F_ROOT, F_EXTRA, F_SKIP, F_NFIELDS };

typedef struct {
    enum field f;
    const char *want[3]; /* substrings every rank's message must contain */
} mcase;

static const mcase cases[F_NFIELDS] = {
    [F_COUNT] = {F_COUNT, {"count differs", "ranks 0-2 have 1024", "rank 3 has 512"}},
    [F_DTYPE_SAMEBYTES] = {F_DTYPE_SAMEBYTES, {"differs", "float16", "float32"}},
    [F_REDOP] = {F_REDOP, {"differs", "sum", "max"}},
    [F_OP] = {F_OP, {"all_reduce", "all_gather", "rank 3"}},
    [F_ROOT] = {F_ROOT, {"root differs", "ranks 0-2 have 3", "rank 3 has 0"}},
    [F_EXTRA] = {F_EXTRA, {"rank 3", "extra", "#4"}},
    [F_SKIP] = {F_SKIP, {"rank 3", "skipped", "#4"}},
};

static int rank_mismatch(int rank, void *arg)
{
    const mcase *mc = arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static uint16_t h[2048];
    static float f[1024], out[2048 * 2];
    int odd = rank == 3;
    /* A few good calls first so the seq is not 1. A rank still finishing
     * the last of them when the others detect the mismatch at #4 gets the
     * abort inside it: that call then fails with the same #4 report. */
    double t0 = cht_now_ms();
    cohort_status st = COHORT_OK;
    for (int i = 0; i < 3 && st == COHORT_OK; i++)
        st = cohort_all_reduce(g, f, out, 16, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st == COHORT_OK || st == COHORT_ERR_CONTRACT, "warm-up: %s: %s",
               cohort_status_name(st), cohort_last_error(g));
    switch (st == COHORT_OK ? mc->f : F_NFIELDS) {
    case F_COUNT:
        st = cohort_all_reduce(g, f, out, odd ? 512 : 1024, COHORT_FLOAT32, COHORT_SUM);
        break;
    case F_DTYPE_SAMEBYTES: /* 2048 float16 against 1024 float32: same bytes */
        st = odd ? cohort_all_reduce(g, h, out, 2048, COHORT_FLOAT16, COHORT_SUM)
                 : cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, COHORT_SUM);
        break;
    case F_REDOP:
        st = cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, odd ? COHORT_MAX : COHORT_SUM);
        break;
    case F_OP: /* all_gather of 256 floats = 1024 floats of output */
        st = odd ? cohort_all_gather(g, f, out, 256, COHORT_FLOAT32)
                 : cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, COHORT_SUM);
        break;
    case F_ROOT:
        /* ranks 0-2 take rank 3 for the root, rank 3 takes rank 0: the true
         * root sends nothing, everyone waits to receive - no message ever
         * carries a header, so the out-of-band probe must catch it */
        st = cohort_broadcast(g, f, 1024, COHORT_FLOAT32, odd ? 0 : 3);
        break;
    case F_EXTRA:
        /* rank 3 makes an extra all_reduce with the same contract as the
         * next one (so it silently pairs with the others' next call: the
         * lesson's false attribution); the error surfaces one call later
         * and must still name #4 and rank 3's extra call. */
        if (odd)
            st = cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, COHORT_SUM); /* extra */
        if (st == COHORT_OK)
            st = cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, COHORT_SUM);
        if (st == COHORT_OK)
            st = cohort_barrier(g);
        break;
    case F_SKIP:
        /* rank 3 skips the first of two same-shaped all_reduces */
        if (!odd)
            st = cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, COHORT_SUM); /* skipped */
        if (st == COHORT_OK)
            st = cohort_all_reduce(g, f, out, 1024, COHORT_FLOAT32, COHORT_SUM);
        if (st == COHORT_OK)
            st = cohort_barrier(g);
        break;
    default:
        break;
    }
    double dt = cht_now_ms() - t0;
    const char *m = cohort_last_error(g);
    fprintf(stderr, "rank %d: %s: %s\n", rank, cohort_status_name(st), m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st), m);
    /* A rank the abort caught inside call #3 never reached #4: the report
     * says so and counts the majority without it ("ranks 1-2 have ...") -
     * accurate, so accept that form of the majority clause. */
    int behind = strstr(m, "did not reach #4") != NULL;
    for (int i = 0; i < 3; i++) {
        const char *w = mc->want[i];
        if (behind && w && !strncmp(w, "ranks 0-2", 9))
            continue;
        RANK_CHECK(!w || strstr(m, w), "missing '%s' in: %s", w, m);
    }
    RANK_CHECK(strstr(m, "test_contract_e2e.c:"), "no call site in: %s", m);
    RANK_CHECK(dt < 3000, "took %.0f ms", dt);
    /* poisoned afterwards */
    st = cohort_barrier(g);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "after mismatch: %s", cohort_status_name(st));
    cohort_finalize(g);
    return 0;
}

START_TEST(mismatch_every_field)
{
    for (int f = 0; f < F_NFIELDS; f++) {
        cht_opts o = {.nranks = 4, .deadline_ms = 30000, .transport = cht_transports[_i],
                      .extra_env = "COHORT_TIMEOUT=20"};
        cht_result r;
        cht_run_ranks(&o, rank_mismatch, (void *)&cases[f], &r);
        char msg[64];
        snprintf(msg, sizeof msg, "field case %d", f);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s (%s): rank %d status %d hung %d",
                          msg, cht_transports[_i], i, r.status[i], r.hung[i]);
    }
}
END_TEST

/* ---- a rank whose part is send-only: two roots ----
 *
 * Ranks 0-2 broadcast from rank 0, rank 3 believes it is the root. Rank 3
 * only writes, and the true root's data never reaches it: in other libraries
 * rank 3 finishes with its own, wrong, buffer and nobody notices. Every
 * rank must fail the broadcast, or (a rank that could only send) the next
 * call or cohort_finalize, with the report of broadcast #4. */

static int rank_two_roots(int rank, void *arg)
{
    int then = *(const int *)arg; /* 0: a next call, 1: straight to finalize */
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[1024];
    for (int i = 0; i < 1024; i++)
        f[i] = (float)rank;
    /* As in rank_mismatch: a slow rank still in the last warm-up call when
     * the others detect the mismatch at #4 gets the abort inside it, and
     * that call fails with the same report of broadcast #4. */
    double t0 = cht_now_ms();
    cohort_status st = COHORT_OK;
    for (int i = 0; i < 3 && st == COHORT_OK; i++)
        st = cohort_all_reduce(g, f, f + 512, 16, COHORT_FLOAT32, COHORT_MAX);
    RANK_CHECK(st == COHORT_OK || st == COHORT_ERR_CONTRACT, "warm-up: %s: %s",
               cohort_status_name(st), cohort_last_error(g));
    char where[32] = "a warm-up all_reduce";
    if (st == COHORT_OK) {
        t0 = cht_now_ms();
        snprintf(where, sizeof where, "broadcast");
        st = cohort_broadcast(g, f, 1024, COHORT_FLOAT32, rank == 3 ? 3 : 0);
    }
    if (st == COHORT_OK && then == 0) {
        snprintf(where, sizeof where, "the next all_reduce");
        st = cohort_all_reduce(g, f, f + 512, 16, COHORT_FLOAT32, COHORT_SUM);
    }
    if (st == COHORT_OK) {
        snprintf(where, sizeof where, "cohort_finalize");
        st = cohort_finalize(g);
        g = NULL;
    }
    double dt = cht_now_ms() - t0;
    const char *m = g ? cohort_last_error(g) : cohort_last_error(NULL);
    fprintf(stderr, "rank %d: %s in %s after %.0f ms: %s\n", rank, cohort_status_name(st), where,
            dt, m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "got %s in %s: %s", cohort_status_name(st), where, m);
    RANK_CHECK(strstr(m, "broadcast #4") && strstr(m, "root differs"), "report: %s", m);
    RANK_CHECK(dt < 3000, "took %.0f ms", dt);
    if (g)
        cohort_finalize(g);
    return 0;
}

START_TEST(send_only_rank_learns_the_mismatch)
{
    for (int then = 0; then < 2; then++) {
        cht_opts o = {.nranks = 4, .deadline_ms = 30000, .transport = cht_transports[_i],
                      .extra_env = "COHORT_TIMEOUT=20"};
        cht_result r;
        cht_run_ranks(&o, rank_two_roots, &then, &r);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s, then %d: rank %d status %d hung %d",
                          cht_transports[_i], then, i, r.status[i], r.hung[i]);
    }
}
END_TEST

/* A send whose receive never comes: MPI keeps the message (or the sender
 * blocks) and the program ends as if nothing happened. cohort_finalize's
 * closing handshake finds it on the receiver, and both ranks fail. */
static int rank_unreceived_send(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int32_t v = 42;
    if (rank == 0)
        RANK_PASS(cohort_send(g, &v, 1, COHORT_INT32, 1, 5), g);
    cohort_status st = cohort_finalize(g);
    const char *m = cohort_last_error(NULL);
    fprintf(stderr, "rank %d: finalize: %s: %s\n", rank, cohort_status_name(st), m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "finalize returned %s: %s", cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "send #1 from rank 0 to rank 1") && strstr(m, "tag 5") &&
                   strstr(m, "never received"),
               "message: %s", m);
    return 0;
}

START_TEST(unreceived_send_fails_finalize)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 20000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=10"};
    cht_result r;
    cht_run_ranks(&o, rank_unreceived_send, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* A rank still busy after its last call (a checkpoint being written) makes
 * the others' closing check wait at most COHORT_TIMEOUT (capped at 30 s),
 * then they leave with OK and a warning: being slow to finalize is not an
 * error, and the busy rank's own finalize succeeds later. */
static int rank_late_finalize(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 0) { /* the store's host is the busy one: the others must not wait for it */
        struct timespec ts = {3, 0}; /* the lateness is what is tested */
        nanosleep(&ts, NULL);
    }
    double t0 = cht_now_ms();
    cohort_status st = cohort_finalize(g);
    double dt = cht_now_ms() - t0;
    fprintf(stderr, "rank %d: finalize %s after %.0f ms: %s\n", rank, cohort_status_name(st), dt,
            st ? cohort_last_error(NULL) : "");
    RANK_CHECK(st == COHORT_OK, "finalize: %s: %s", cohort_status_name(st),
               cohort_last_error(NULL));
    if (rank == 1)
        RANK_CHECK(dt < 2900, "rank 1 waited %.0f ms for a late rank (COHORT_TIMEOUT 1.5 s)", dt);
    return 0;
}

START_TEST(late_rank_does_not_fail_finalize)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 20000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=1.5"};
    cht_result r;
    cht_run_ranks(&o, rank_late_finalize, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a rank that reaches the mismatched call after the others failed it ----
 *
 * Rank 1's count differs; ranks 0-2 detect it without rank 3, which agrees
 * with rank 0 and makes the call only once its group is poisoned (it waits
 * for that, not for a fixed time, so the late path is taken on any
 * machine). Rank 3 is a party to the mismatched call: COHORT_ERR_CONTRACT
 * with the report, like the others; its next call COHORT_ERR_ABORTED. */
static int rank_late_mismatch(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[1024], out[1024];
    RANK_PASS(cohort_all_reduce(g, f, out, 16, COHORT_FLOAT32, COHORT_SUM), g);
    if (rank == 3) {
        double t0 = cht_now_ms(), bound = 10000 * cht_time_scale();
        while (!coh_group_poisoned(g)) {
            RANK_CHECK(cht_now_ms() - t0 < bound, "ranks 0-2 did not fail the call in %.0f ms",
                       bound);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    cohort_status st = cohort_all_reduce(g, f, out, rank == 1 ? 512 : 1024, COHORT_FLOAT32,
                                         COHORT_SUM);
    const char *m = cohort_last_error(g);
    fprintf(stderr, "rank %d: %s: %s\n", rank, cohort_status_name(st), m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "all_reduce #2") && strstr(m, "count differs"), "report: %s", m);
    st = cohort_barrier(g);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "after mismatch: %s", cohort_status_name(st));
    cohort_finalize(g);
    return 0;
}

START_TEST(late_rank_gets_contract)
{
    cht_opts o = {.nranks = 4, .deadline_ms = 30000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_late_mismatch, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- the same at the transports' own entry (coh_coll_run), where the
 * public API's "first call after a failure reports the cause" does not
 * apply, for a sequence-number mismatch: rank 1 is one call ahead (#3
 * against #2), ranks 0 and 2 detect it without rank 3, which makes its #2
 * only once its group is poisoned (waiting for that, not for a time).
 * The lower number is the failed call on every rank (contract/mismatch.c):
 * rank 3's #2 is a party to it, COHORT_ERR_CONTRACT; its #3, a call after
 * the failure, COHORT_ERR_ABORTED. Over tcp only (make_suite says why). ---- */
static int rank_late_seq(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[1024], out[1024];
    RANK_PASS(cohort_all_reduce(g, f, out, 16, COHORT_FLOAT32, COHORT_SUM), g);
    if (rank == 3) {
        double t0 = cht_now_ms(), bound = 10000 * cht_time_scale();
        while (!coh_group_poisoned(g)) {
            RANK_CHECK(cht_now_ms() - t0 < bound, "ranks 0-2 did not fail the call in %.0f ms",
                       bound);
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    if (rank == 1)
        g->seq++; /* as if it had made one call more */
    coh_call c = cht_call(++g->seq, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 16,
                          __FILE__, __LINE__);
    c.send = f;
    c.recv = out;
    cohort_status st = coh_coll_run(g, &c);
    if (st == COHORT_ERR_CONTRACT)
        coh_contract_report(g);
    const char *m = g->err.msg;
    fprintf(stderr, "rank %d: %s: %s\n", rank, cohort_status_name(st), m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "#2"), "report: %s", m);
    c = cht_call(++g->seq, COH_COLL_BARRIER, COHORT_UINT8, -1, -1, 0, 0, __FILE__, __LINE__);
    st = coh_coll_run(g, &c);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "after mismatch: %s", cohort_status_name(st));
    cohort_finalize(g);
    return 0;
}

START_TEST(late_rank_gets_contract_seq)
{
    cht_opts o = {.nranks = 4, .deadline_ms = 30000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_late_seq, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- async calls queued before a failure and run after it ----
 *
 * Rank 0 issues two async all_reduces (A, B) and only then lets rank 1 in
 * (a store key: the order is forced, not timed). B is queued behind A on
 * rank 0's worker, so it starts only after A failed. Variant 0: rank 1's A
 * has another count (COHORT_ERR_CONTRACT); variant 1: rank 1 exits instead
 * (COHORT_ERR_PEER_LOST). B was in flight when the group failed: it returns
 * the cause, like A, with the cause's message; rank 0's next call, issued
 * after the failure, COHORT_ERR_ABORTED. */
static cohort_store *side_store(void)
{
    cohort_store *s = NULL;
    const char *addr = getenv("COHORT_STORE");
    if (addr && cohort_store_connect(&s, addr, getenv("COHORT_JOB_ID"), getenv("COHORT_TOKEN"),
                                     5000) != COHORT_OK)
        s = NULL;
    return s;
}

static int rank_async_queued(int rank, void *arg)
{
    int variant = *(int *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float f[1024], out_a[1024], out_b[1024];
    RANK_PASS(cohort_all_reduce(g, f, out_a, 16, COHORT_FLOAT32, COHORT_SUM), g);
    cohort_store *s = side_store();
    RANK_CHECK(s, "side store: %s", cohort_last_error(NULL));
    const char *key = variant ? "test/queued1" : "test/queued0";
    const void *kp = key;
    size_t kl = strlen(key);
    if (rank == 1) {
        RANK_CHECK(cohort_store_wait(s, &kp, &kl, 1, 20000) == COHORT_OK, "wait: %s",
                   cohort_store_last_error(s));
        cohort_store_close(s);
        if (variant == 1)
            _exit(0); /* a lost peer */
        cohort_status st = cohort_all_reduce(g, f, out_a, 8, COHORT_FLOAT32, COHORT_SUM);
        RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank 1: %s", cohort_status_name(st));
        cohort_finalize(g);
        return 0;
    }
    cohort_work *wa = NULL, *wb = NULL;
    RANK_PASS(cohort_all_reduce_async(g, f, out_a, 16, COHORT_FLOAT32, COHORT_SUM, &wa), g);
    RANK_PASS(cohort_all_reduce_async(g, f, out_b, 16, COHORT_FLOAT32, COHORT_SUM, &wb), g);
    RANK_CHECK(cohort_store_set(s, key, kl, "1", 1) == COHORT_OK, "set: %s",
               cohort_store_last_error(s));
    cohort_store_close(s);
    cohort_status want = variant ? COHORT_ERR_PEER_LOST : COHORT_ERR_CONTRACT;
    const char *word = variant ? "lost" : "count differs";
    cohort_status sa = cohort_work_wait(wa, -1);
    RANK_CHECK(sa == want, "A: %s: %s", cohort_status_name(sa), cohort_last_error(g));
    cohort_status sb = cohort_work_wait(wb, -1);
    const char *m = cohort_last_error(g);
    fprintf(stderr, "variant %d: A %s, B %s: %s\n", variant, cohort_status_name(sa),
            cohort_status_name(sb), m);
    RANK_CHECK(sb == want, "B, queued before the failure: %s: %s", cohort_status_name(sb), m);
    RANK_CHECK(strstr(m, word), "B's message: %s", m);
    cohort_work_free(wa);
    cohort_work_free(wb);
    cohort_status st = cohort_barrier(g);
    RANK_CHECK(st == COHORT_ERR_ABORTED, "a call after the failure: %s", cohort_status_name(st));
    cohort_finalize(g);
    return 0;
}

START_TEST(async_queued_gets_cause)
{
    for (int variant = 0; variant < 2; variant++) {
        cht_opts o = {.nranks = 2, .deadline_ms = 30000, .transport = cht_transports[_i],
                      .store_mode = CHT_STORE_PARENT, .extra_env = "COHORT_TIMEOUT=10"};
        cht_result r;
        cht_run_ranks(&o, rank_async_queued, &variant, &r);
        cht_assert_all_ok(&r);
    }
}
END_TEST

/* ---- COHORT_DEBUG=sync: the checked barrier catches the same cases ---- */

START_TEST(debug_sync_catches_mismatch)
{
    int fields[] = {F_COUNT, F_SKIP, F_ROOT};
    for (size_t k = 0; k < sizeof fields / sizeof fields[0]; k++) {
        cht_opts o = {.nranks = 4, .deadline_ms = 30000, .transport = cht_transports[_i],
                      .extra_env = "COHORT_TIMEOUT=20;COHORT_DEBUG=sync"};
        cht_result r;
        cht_run_ranks(&o, rank_mismatch, (void *)&cases[fields[k]], &r);
        for (int i = 0; i < 4; i++)
            ck_assert_msg(r.status[i] == 0 && !r.hung[i], "sync, field %d: rank %d status %d",
                          fields[k], i, r.status[i]);
    }
}
END_TEST

/* ---- straggler: stall report, then success ---- */

static int rank_straggler(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    if (rank == 1) {
        struct timespec ts = {1, 0}; /* the straggling itself is the test */
        nanosleep(&ts, NULL);
    }
    float x = 1, y;
    RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_FLOAT32, COHORT_SUM), g);
    RANK_CHECK(y == cohort_size(g), "sum %f", y);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(straggler_is_not_an_error)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 30000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_STALL_WARN=0.3"};
    cht_result r;
    cht_run_ranks(&o, rank_straggler, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- frozen peer: TIMEOUT with a report naming it unresponsive ---- */

static int rank_frozen(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    if (rank == 2) {
        raise(SIGSTOP); /* resumed by the test process once the others are done */
        /* Back after the others timed out: the group is poisoned, and the
         * next call says so at once instead of waiting for ranks that left. */
        double t1 = cht_now_ms();
        float x = 1, y;
        /* Its pending call may still complete if every message it needs was
         * sent before the others gave up (the data is then right); the
         * call after it must fail with the cause. */
        cohort_status st = cohort_all_reduce(g, &x, &y, 1, COHORT_FLOAT32, COHORT_SUM);
        if (st == COHORT_OK) {
            RANK_CHECK(y == 3, "completed with wrong data %f", y);
            st = cohort_all_reduce(g, &x, &y, 1, COHORT_FLOAT32, COHORT_SUM);
        }
        RANK_CHECK(st != COHORT_OK, "a resumed rank completed a collective with departed peers");
        RANK_CHECK(cht_now_ms() - t1 < 5000, "resumed rank took %.0f ms to fail",
                   cht_now_ms() - t1);
        fprintf(stderr, "resumed rank 2: %s: %s\n", cohort_status_name(st), cohort_last_error(g));
        cohort_finalize(g);
        return 0;
    }
    float x = 1, y;
    double t0 = cht_now_ms();
    cohort_status st = cohort_all_reduce(g, &x, &y, 1, COHORT_FLOAT32, COHORT_SUM);
    double dt = cht_now_ms() - t0;
    RANK_CHECK(st == COHORT_ERR_TIMEOUT || st == COHORT_ERR_ABORTED, "got %s: %s",
               cohort_status_name(st), cohort_last_error(g));
    RANK_CHECK(strstr(cohort_last_error(g), "rank 2"), "%s", cohort_last_error(g));
    RANK_CHECK(dt < 6000, "took %.0f ms", dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(frozen_peer_times_out)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 20000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=2;COHORT_STALL_WARN=0.5",
                  .store_mode = CHT_STORE_PARENT, .resume_stopped = 1};
    cht_result r;
    cht_run_ranks(&o, rank_frozen, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- p2p deadlock cycle named in the timeout report ---- */

static int rank_cycle(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int32_t x;
    cohort_status st = cohort_recv(g, &x, 1, COHORT_INT32, 1 - rank, 0);
    RANK_CHECK(st == COHORT_ERR_TIMEOUT || st == COHORT_ERR_ABORTED, "got %s",
               cohort_status_name(st));
    if (st == COHORT_ERR_TIMEOUT)
        RANK_CHECK(strstr(cohort_last_error(g), "deadlock cycle"), "%s", cohort_last_error(g));
    cohort_finalize(g);
    return 0;
}

START_TEST(p2p_cycle_reported)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 20000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=1.5;COHORT_STALL_WARN=0.3"};
    cht_result r;
    cht_run_ranks(&o, rank_cycle, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- COHORT_DEBUG=buffers: a buffer touched while in flight is reported ---- */

static int rank_buffers(int rank, void *arg)
{
    (void)arg;
    cohort_group *g, *ctl;
    RANK_PASS(cohort_init(&g), NULL);
    /* A second group carries the "go" signal: calls of one group complete
     * in issue order, so it cannot share g with the async call. */
    RANK_PASS(cohort_split(g, 0, rank, &ctl), g);
    static float in[1 << 16], out[1 << 16];
    int32_t go = 1;
    if (rank == 0) {
        cohort_work *w;
        RANK_PASS(cohort_all_reduce_async(g, in, out, 1 << 16, COHORT_FLOAT32, COHORT_SUM, &w),
                  g);
        in[7] = 42.0f; /* the bug under test: touching an in-flight buffer */
        RANK_PASS(cohort_send(ctl, &go, 1, COHORT_INT32, 1, 5), ctl);
        cohort_status st = cohort_work_wait(w, -1);
        cohort_work_free(w);
        RANK_CHECK(st == COHORT_ERR_INVALID, "modified buffer not detected: %s",
                   cohort_status_name(st));
        RANK_CHECK(strstr(cohort_last_error(g), "modified while the call was in flight"), "%s",
                   cohort_last_error(g));
    } else {
        /* rank 1 joins only after rank 0 has modified its input; it must
         * get the error too instead of waiting for a call that never runs */
        RANK_PASS(cohort_recv(ctl, &go, 1, COHORT_INT32, 0, 5), ctl);
        /* Detected at rank 0's start or completion: the peer either gets the
         * error, or (completion) has already finished; either way no hang,
         * and its next call on g reports the cause. */
        cohort_status st = cohort_all_reduce(g, in, out, 1 << 16, COHORT_FLOAT32, COHORT_SUM);
        if (st == COHORT_OK)
            st = cohort_barrier(g);
        RANK_CHECK(st == COHORT_ERR_INVALID, "peer got %s: %s", cohort_status_name(st),
                   cohort_last_error(g));
        RANK_CHECK(strstr(cohort_last_error(g), "in flight"), "%s", cohort_last_error(g));
    }
    /* An untouched buffer passes the same check (on the healthy group). */
    cohort_work *w2;
    RANK_PASS(cohort_all_reduce_async(ctl, in, out, 1 << 16, COHORT_FLOAT32, COHORT_SUM, &w2), ctl);
    RANK_PASS(cohort_work_wait(w2, -1), ctl);
    cohort_work_free(w2);
    /* ... and an in-place all_gather, whose input is its own block of recv
     * (hashed there, not at recv's start, which the call overwrites) */
    static float ag[2 * 1024];
    for (int i = 0; i < 1024; i++)
        ag[rank * 1024 + i] = (float)(rank * 1000 + i);
    RANK_PASS(cohort_all_gather_async(ctl, ag, ag, 1024, COHORT_FLOAT32, &w2), ctl);
    RANK_PASS(cohort_work_wait(w2, -1), ctl);
    cohort_work_free(w2);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 1024; i++)
            RANK_CHECK(ag[k * 1024 + i] == (float)(k * 1000 + i), "block %d [%d] = %g", k, i,
                       (double)ag[k * 1024 + i]);
    cohort_finalize(ctl);
    cohort_finalize(g);
    return 0;
}

START_TEST(debug_buffers_detects_race)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 20000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_DEBUG=buffers;COHORT_TIMEOUT=5"};
    cht_result r;
    cht_run_ranks(&o, rank_buffers, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a repeated call site: the site memo (api.c) ----
 *
 * issue skips its argument checks for a call whose site's last checked
 * call had the same arguments. Every call here comes from one of two
 * lines (site_ar, site_bc), called 200 times with the same arguments so
 * the memo holds them; then one rank changes one field at the same site.
 * The contract must still be built from that call, not from the memo:
 * every rank reports that field, the call number and the site. And a bad
 * argument at a remembered site must still be refused locally. */

enum { WARM = 200 };
static int ar_line, bc_line;

static cohort_status site_ar(cohort_group *g, const void *in, void *out, size_t count,
                             cohort_dtype dt, cohort_op op)
{
    ar_line = __LINE__ + 1;
    return cohort_all_reduce(g, in, out, count, dt, op);
}

static cohort_status site_bc(cohort_group *g, void *buf, size_t count, cohort_dtype dt, int root)
{
    bc_line = __LINE__ + 1;
    return cohort_broadcast(g, buf, count, dt, root);
}

enum site_field { S_COUNT, S_DTYPE, S_REDOP, S_ROOT, S_NFIELDS };

static const char *const site_want[S_NFIELDS][2] = {
    [S_COUNT] = {"count differs", "rank 1 has 4"},
    [S_DTYPE] = {"int32", "float32"},
    [S_REDOP] = {"sum", "max"},
    [S_ROOT] = {"root differs", "rank 1 has 1"},
};

static int rank_site_mismatch(int rank, void *arg)
{
    enum site_field f = *(const enum site_field *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float in[8], out[8];
    int odd = rank == 1;
    cohort_status st = COHORT_OK;
    for (int i = 0; i < WARM && st == COHORT_OK; i++)
        st = f == S_ROOT ? site_bc(g, in, 2, COHORT_FLOAT32, 0)
                         : site_ar(g, in, out, 2, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st == COHORT_OK, "warm-up: %s: %s", cohort_status_name(st), cohort_last_error(g));
    switch (f) {
    case S_COUNT:
        st = site_ar(g, in, out, odd ? 4 : 2, COHORT_FLOAT32, COHORT_SUM);
        break;
    case S_DTYPE: /* same bytes */
        st = site_ar(g, in, out, 2, odd ? COHORT_INT32 : COHORT_FLOAT32, COHORT_SUM);
        break;
    case S_REDOP:
        st = site_ar(g, in, out, 2, COHORT_FLOAT32, odd ? COHORT_MAX : COHORT_SUM);
        break;
    case S_ROOT: /* two roots: neither reads, so the probe or the next call finds it */
        st = site_bc(g, in, 2, COHORT_FLOAT32, odd ? 1 : 0);
        if (st == COHORT_OK)
            st = cohort_barrier(g);
        if (st == COHORT_OK) {
            st = cohort_finalize(g);
            g = NULL;
        }
        break;
    default:
        break;
    }
    const char *m = g ? cohort_last_error(g) : cohort_last_error(NULL);
    fprintf(stderr, "rank %d: %s: %s\n", rank, cohort_status_name(st), m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "got %s: %s", cohort_status_name(st), m);
    char site[64], call[32];
    snprintf(site, sizeof site, "test_contract_e2e.c:%d", f == S_ROOT ? bc_line : ar_line);
    snprintf(call, sizeof call, "%s #%d", f == S_ROOT ? "broadcast" : "all_reduce", WARM + 1);
    RANK_CHECK(strstr(m, call), "missing '%s' in: %s", call, m);
    RANK_CHECK(strstr(m, site), "missing '%s' in: %s", site, m);
    for (int i = 0; i < 2; i++)
        RANK_CHECK(strstr(m, site_want[f][i]), "missing '%s' in: %s", site_want[f][i], m);
    if (g)
        cohort_finalize(g);
    return 0;
}

START_TEST(cached_site_mismatch_reported)
{
    for (int f = 0; f < S_NFIELDS; f++) {
        cht_opts o = {.nranks = 2, .deadline_ms = 30000, .transport = cht_transports[_i],
                      .extra_env = "COHORT_TIMEOUT=20"};
        cht_result r;
        cht_run_ranks(&o, rank_site_mismatch, &f, &r);
        for (int i = 0; i < 2; i++)
            ck_assert_msg(r.status[i] == 0 && !r.hung[i], "field %d (%s): rank %d status %d hung %d",
                          f, cht_transports[_i], i, r.status[i], r.hung[i]);
    }
}
END_TEST

/* Bad arguments at a remembered site, on every rank alike (so no peer
 * waits): each is refused locally, and the next good call still works. */
static int rank_site_args(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    static float in[8], out[8], buf[8];
    for (int i = 0; i < 8; i++)
        in[i] = (float)(rank + 1);
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < WARM; i++) {
            RANK_PASS(site_ar(g, in, out, 2, COHORT_FLOAT32, COHORT_SUM), g);
            RANK_PASS(site_bc(g, buf, 2, COHORT_FLOAT32, 0), g);
        }
        RANK_CHECK(out[0] == 3.0f && out[1] == 3.0f, "sum %g %g", out[0], out[1]);
        cohort_status st = COHORT_OK;
        const char *want = "";
        switch (round) {
        case 0:
            st = site_ar(g, in, NULL, 2, COHORT_FLOAT32, COHORT_SUM);
            want = "recv buffer is NULL";
            break;
        case 1:
            st = site_ar(g, in, out, SIZE_MAX / 4, COHORT_FLOAT32, COHORT_SUM);
            want = "too large";
            break;
        case 2:
            st = site_ar(g, in, out, 2, COHORT_FLOAT32, COHORT_BAND);
            want = "not defined";
            break;
        case 3:
            st = site_bc(g, buf, 2, COHORT_FLOAT32, 2);
            want = "out of range";
            break;
        case 4:
            st = site_bc(g, buf, 2, COHORT_FLOAT32, -1);
            want = "out of range";
            break;
        case 5:
            st = site_bc(g, NULL, 2, COHORT_FLOAT32, 0);
            want = "recv buffer is NULL";
            break;
        }
        const char *m = cohort_last_error(g);
        RANK_CHECK(st == COHORT_ERR_INVALID, "round %d: got %s: %s", round, cohort_status_name(st),
                   m);
        RANK_CHECK(strstr(m, want), "round %d: missing '%s' in: %s", round, want, m);
    }
    RANK_PASS(site_ar(g, in, out, 2, COHORT_FLOAT32, COHORT_SUM), g);
    RANK_CHECK(out[0] == 3.0f, "sum %g", out[0]);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(cached_site_still_checks_arguments)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 30000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_site_args, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("contract_e2e");
    TCase *tc = tcase_create("e2e");
    tcase_set_timeout(tc, 200);
    cht_add_per_transport(tc, mismatch_every_field);
    cht_add_per_transport(tc, send_only_rank_learns_the_mismatch);
    cht_add_per_transport(tc, unreceived_send_fails_finalize);
    cht_add_per_transport(tc, late_rank_does_not_fail_finalize);
    cht_add_per_transport(tc, late_rank_gets_contract);
    /* tcp only: shm's phases wait for every local rank before comparing
     * and its probe compares one call number, so a sequence mismatch is
     * found there only with every rank inside the call (none is late) */
    tcase_add_loop_test(tc, late_rank_gets_contract_seq, 1, 2);
    cht_add_per_transport(tc, async_queued_gets_cause);
    cht_add_per_transport(tc, debug_sync_catches_mismatch);
    cht_add_per_transport(tc, straggler_is_not_an_error);
    cht_add_per_transport(tc, frozen_peer_times_out);
    cht_add_per_transport(tc, p2p_cycle_reported);
    if (!UNDER_TSAN)
        cht_add_per_transport(tc, debug_buffers_detects_race);
    else
        fprintf(stderr, "debug_buffers_detects_race: not run under TSan (it commits the race "
                        "it detects); the plain and ASan builds run it\n");
    suite_add_tcase(s, tc);
    /* its own case: CK_RUN_CASE=site runs it alone */
    TCase *site = tcase_create("site");
    tcase_set_timeout(site, 200);
    cht_add_per_transport(site, cached_site_mismatch_reported);
    cht_add_per_transport(site, cached_site_still_checks_arguments);
    suite_add_tcase(s, site);
    return s;
}

COH_TEST_MAIN(make_suite)
