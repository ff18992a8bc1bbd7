/*
 * test_mismatch.c - coh_contract_mismatch's local messages (exact formats,
 * one per field), the group state it leaves (poisoned, first failure,
 * "detected" bit), and coh_contract_report's paths that need no store:
 * no-op unless poisoned with CONTRACT, idempotent, concurrent callers,
 * the missing-store fallback.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "group_util.h"
#include "support/support.h"

#define TRAIN "/home/user/src/train.c"

/* Rank 3 is in all_reduce #7 at train.c:88 (512 floats, sum) and receives
 * rank 0's header, built from rank 0's call `theirs`. */
static cohort_status mismatch_vs(cohort_group *g, const coh_call *mine, const coh_call *theirs)
{
    coh_hdr exp = tg_hdr(g, g->rank, mine);
    coh_hdr got = tg_hdr(g, 0, theirs);
    return coh_contract_mismatch(g, mine, 0, &exp, &got);
}

static const char *err_msg(cohort_group *g) { return g->err.msg; }

START_TEST(count_message)
{
    cohort_group *g = tg_make(3, 4);
    coh_call mine = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 512, TRAIN, 88);
    coh_call theirs = mine;
    theirs.count = 1024;
    ck_assert_int_eq(mismatch_vs(g, &mine, &theirs), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(err_msg(g), "all_reduce #7 (train.c:88): count differs: this rank (3) has "
                                 "512, rank 0 sent 1024 (train.c:88)");
    ck_assert_int_eq(coh_group_poisoned(g), COHORT_ERR_CONTRACT);
    ck_assert_int_eq(g->err.status, COHORT_ERR_CONTRACT);
    ck_assert_str_eq(g->last.msg, g->err.msg);
    ck_assert(atomic_load(&g->contract_state) & COH_CSTATE_DETECTED);
    cht_group_free(g);
}
END_TEST

START_TEST(seq_message)
{
    /* Rank 0 is already in #8 (train.c:91): the lesson's Q1 situation. */
    cohort_group *g = tg_make(3, 4);
    coh_call mine = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 1024, TRAIN, 88);
    coh_call theirs = cht_call(8, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 2048, TRAIN, 91);
    ck_assert_int_eq(mismatch_vs(g, &mine, &theirs), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(err_msg(g), "all_reduce #7 (train.c:88): sequence number differs: rank 0 is "
                                 "at #8 (all_reduce, train.c:91) while this rank (3) waits in #7; "
                                 "one of them skipped or added a call before this one");
    /* the lower number is the failed call (a rank reaching #7 late is a
     * party to it), whichever side detects it */
    ck_assert_uint_eq(coh_group_failed_seq(g), 7);
    cht_group_free(g);
    g = tg_make(3, 4);
    ck_assert_int_eq(mismatch_vs(g, &theirs, &mine), COHORT_ERR_CONTRACT);
    ck_assert_uint_eq(coh_group_failed_seq(g), 7);
    cht_group_free(g);
}
END_TEST

typedef struct mcase {
    const char *name;
    coh_call mine, theirs;
    const char *want;
} mcase;

static mcase mcases[16];
static int n_mcases;

static void setup_cases(void)
{
    if (n_mcases)
        return;
    coh_call ar = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 1024, TRAIN, 88);
    coh_call bc = cht_call(7, COH_COLL_BROADCAST, COHORT_FLOAT32, -1, 0, 0, 1024, TRAIN, 88);
    coh_call rv = cht_call(2, COH_COLL_RECV, COHORT_INT32, -1, 0, 5, 16, TRAIN, 40);
    mcase *m = mcases;

    *m = (mcase){"dtype", ar, ar, NULL};
    m->theirs.dtype = COHORT_FLOAT64;
    m->want = "all_reduce #7 (train.c:88): dtype differs: this rank (3) has float32, rank 0 sent "
              "float64 (train.c:88)";
    m++;
    *m = (mcase){"op", ar, cht_call(7, COH_COLL_BARRIER, 0, -1, -1, 0, 0, TRAIN, 95), NULL};
    m->want = "all_reduce #7 (train.c:88): op differs: this rank (3) has all_reduce, rank 0 sent "
              "barrier (train.c:95)";
    m++;
    *m = (mcase){"redop", ar, ar, NULL};
    m->theirs.redop = COHORT_MAX;
    m->want = "all_reduce #7 (train.c:88): reduce op differs: this rank (3) has sum, rank 0 sent "
              "max (train.c:88)";
    m++;
    *m = (mcase){"root", bc, bc, NULL};
    m->theirs.root = 2;
    m->want = "broadcast #7 (train.c:88): root differs: this rank (3) has 0, rank 0 sent 2 "
              "(train.c:88)";
    m++;
    *m = (mcase){"peer", rv, rv, NULL};
    m->theirs.root = 1;
    m->want = "recv #2 (train.c:40): peer differs: this rank (3) has 0, rank 0 sent 1 (train.c:40)";
    m++;
    *m = (mcase){"tag", rv, rv, NULL};
    m->theirs.tag = 6;
    m->theirs.line = 41;
    m->theirs.site = coh_site_hash(TRAIN, 41);
    m->want = "recv #2 (train.c:40): tag differs: this rank (3) has 5, rank 0 sent 6 (train.c:41)";
    m++;
    *m = (mcase){"count_other_file", ar, ar, NULL};
    m->theirs.count = 8;
    m->theirs.line = 12;
    m->theirs.site = coh_site_hash("eval.c", 12);
    m->want = "all_reduce #7 (train.c:88): count differs: this rank (3) has 1024, rank 0 sent 8 "
              "(line 12 of a file this rank has not called from)";
    m++;
    *m = (mcase){"count_no_site", ar, ar, NULL};
    m->theirs.count = 8;
    m->theirs.line = 0;
    m->theirs.site = 0;
    m->want = "all_reduce #7 (train.c:88): count differs: this rank (3) has 1024, rank 0 sent 8 "
              "(unknown call site)";
    m++;
    *m = (mcase){"dtype_invalid", ar, ar, NULL};
    m->theirs.dtype = 200;
    m->want = "all_reduce #7 (train.c:88): dtype differs: this rank (3) has float32, rank 0 sent "
              "invalid dtype 200 (train.c:88)";
    m++;
    n_mcases = (int)(m - mcases);
}

START_TEST(field_messages)
{
    setup_cases();
    ck_assert_int_lt(_i, n_mcases);
    const mcase *mc = &mcases[_i];
    cohort_group *g = tg_make(3, 4);
    ck_assert_int_eq(mismatch_vs(g, &mc->mine, &mc->theirs), COHORT_ERR_CONTRACT);
    ck_assert_msg(!strcmp(err_msg(g), mc->want), "%s:\n got: %s\nwant: %s", mc->name, err_msg(g),
                  mc->want);
    cht_group_free(g);
}
END_TEST

START_TEST(group_and_generation)
{
    cohort_group *g = tg_make(3, 4);
    coh_call c = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 1024, TRAIN, 88);
    coh_hdr exp = tg_hdr(g, 3, &c), got = tg_hdr(g, 0, &c);
    got.gen = 2;
    coh_contract_mismatch(g, &c, 0, &exp, &got);
    ck_assert_str_eq(err_msg(g), "all_reduce #7 (train.c:88): generation differs: this rank (3) "
                                 "has 1, rank 0 sent 2 (train.c:88) - a process from another "
                                 "generation of the job (a restarted rank talking to a stale one?)");
    cht_group_free(g);

    g = tg_make(3, 4);
    got = tg_hdr(g, 0, &c);
    got.group = 9;
    coh_contract_mismatch(g, &c, 0, &exp, &got);
    ck_assert_str_eq(err_msg(g), "all_reduce #7 (train.c:88): group id differs: this rank (3) has "
                                 "0, rank 0 sent 9 (train.c:88) - the message belongs to another "
                                 "group");
    cht_group_free(g);
}
END_TEST

START_TEST(step_and_none)
{
    cohort_group *g = tg_make(1, 2);
    coh_call c = cht_call(3, COH_COLL_ALL_GATHER, COHORT_UINT8, -1, -1, 0, 100, TRAIN, 20);
    coh_hdr exp = tg_hdr(g, 1, &c), got = tg_hdr(g, 0, &c);
    exp.step = 1, exp.len = 100;
    got.step = 2, got.len = 50;
    coh_contract_mismatch(g, &c, 0, &exp, &got);
    ck_assert_str_eq(err_msg(g), "all_gather #3 (train.c:20): algorithm step differs: this rank "
                                 "(1) expected step 1 with 100 bytes, rank 0 sent step 2 with 50 "
                                 "bytes - the ranks chose different algorithms for the same call, "
                                 "though the rendezvous found the settings that choose them equal: "
                                 "a cohort bug, please report it");
    cht_group_free(g);

    g = tg_make(1, 2);
    got = exp;
    coh_contract_mismatch(g, &c, 0, &exp, &got);
    ck_assert_str_eq(err_msg(g), "all_gather #3 (train.c:20): contract mismatch reported for rank "
                                 "0 although the headers agree - a cohort bug: please report it");
    cht_group_free(g);
}
END_TEST

START_TEST(peer_file_from_recorder)
{
    /* The sender's call site is in a file this rank called from before
     * (model.c): the flight recorder names it. */
    cohort_group *g = tg_make(3, 4);
    ck_assert_int_eq(coh_trace_create(&g->trace, 16), COHORT_OK);
    coh_call old = cht_call(1, COH_COLL_BARRIER, 0, -1, -1, 0, 0, "src/model.c", 5);
    coh_trace_end(g->trace, coh_trace_issue(g->trace, &old), COHORT_OK);
    coh_call mine = cht_call(2, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 4, TRAIN, 88);
    coh_call theirs = cht_call(2, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 8,
                              "other/model.c", 77);
    mismatch_vs(g, &mine, &theirs);
    ck_assert_str_eq(err_msg(g), "all_reduce #2 (train.c:88): count differs: this rank (3) has 4, "
                                 "rank 0 sent 8 (model.c:77)");
    cht_group_free(g);
}
END_TEST

START_TEST(unconsumed_verdicts)
{
    /* Messages no call of rank 1 took by cohort_finalize (tcp's
     * close_check asks the contract for the verdict): judged against rank
     * 1's own call of that seq in the recorder; the group is left alone. */
    cohort_group *g = tg_make(1, 2);
    ck_assert_int_eq(coh_trace_create(&g->trace, 16), COHORT_OK);
    coh_call c1 = cht_call(1, COH_COLL_BARRIER, 0, -1, -1, 0, 0, TRAIN, 10);
    coh_call c2 = cht_call(2, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 4, TRAIN, 20);
    coh_call c4 = cht_call(4, COH_COLL_BARRIER, 0, -1, -1, 0, 0, TRAIN, 40);
    coh_trace_end(g->trace, coh_trace_issue(g->trace, &c1), COHORT_OK);
    coh_trace_end(g->trace, coh_trace_issue(g->trace, &c2), COHORT_OK);
    coh_trace_end(g->trace, coh_trace_issue(g->trace, &c4), COHORT_OK);
    coh_call call;
    coh_hdr exp;
    char msg[COH_ERRLEN];

    /* Rank 0's all_reduce #2 with another count: a mismatch with rank 1's call. */
    coh_call t2 = cht_call(2, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 8, TRAIN, 21);
    coh_hdr h = tg_hdr(g, 0, &t2);
    h.len = 32;
    ck_assert_int_eq(coh_contract_unconsumed(g, &h, &call, &exp, msg, sizeof msg), 1);
    ck_assert(call.seq == 2 && call.count == 4 && call.line == 20);
    ck_assert(exp.count == 4 && exp.len == 32 && coh_hdr_match(&exp, &h) == COH_FIELD_COUNT);

    /* The same call: a message for it that the call never received. */
    h = tg_hdr(g, 0, &c2);
    h.step = 3;
    h.len = 16;
    ck_assert_int_eq(coh_contract_unconsumed(g, &h, &call, &exp, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "all_reduce #2 (" TRAIN ":20): rank 0 sent this rank a message for it "
                          "(step 3, 16 bytes) that the call never received");

    /* Past rank 1's last call: rank 0 made more calls. */
    coh_call t5 = cht_call(5, COH_COLL_BROADCAST, COHORT_INT32, -1, 0, 0, 1, TRAIN, 50);
    h = tg_hdr(g, 0, &t5);
    ck_assert_int_eq(coh_contract_unconsumed(g, &h, &call, &exp, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "rank 0 sent broadcast #5 (its line 50), but this rank's last call was "
                          "#4: rank 0 made more calls than this rank (an extra call on its side, "
                          "or a skipped one here)");

    /* A seq rank 1 has no call for (#3 between #2 and #4). */
    coh_call t3 = cht_call(3, COH_COLL_BARRIER, 0, -1, -1, 0, 0, TRAIN, 30);
    h = tg_hdr(g, 0, &t3);
    ck_assert_int_eq(coh_contract_unconsumed(g, &h, &call, &exp, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "rank 0 sent barrier #3 (its line 30) that no call of this rank received");

    /* A send never received. */
    coh_call s = cht_call(1, COH_COLL_SEND, COHORT_INT32, -1, 1, 5, 1, TRAIN, 60);
    h = tg_hdr(g, 0, &s);
    h.len = 4;
    ck_assert_int_eq(coh_contract_unconsumed(g, &h, &call, &exp, msg, sizeof msg), 0);
    ck_assert_str_eq(msg, "send #1 from rank 0 to rank 1 (tag 5, 4 bytes, rank 0's line 60) was "
                          "never received: rank 1 finalized without the matching cohort_recv");
    ck_assert_int_eq(coh_group_poisoned(g), 0);
    cht_group_free(g);
}
END_TEST

START_TEST(no_call_site_here)
{
    cohort_group *g = tg_make(3, 4);
    coh_call c = cht_call(2, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 4, TRAIN, 88);
    coh_hdr exp = tg_hdr(g, 3, &c), got = tg_hdr(g, 0, &c);
    got.count = 5;
    coh_contract_mismatch(g, NULL, 0, &exp, &got);
    ck_assert_str_eq(err_msg(g), "all_reduce #2 (unknown call site): count differs: this rank (3) "
                                 "has 4, rank 0 sent 5 (line 88 of a file this rank has not "
                                 "called from)");
    cht_group_free(g);
    /* Missing arguments: an error, not a crash. */
    ck_assert_int_eq(coh_contract_mismatch(NULL, NULL, 0, NULL, NULL), COHORT_ERR_CONTRACT);
}
END_TEST

START_TEST(first_failure_wins)
{
    cohort_group *g = tg_make(3, 4);
    coh_call mine = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 512, TRAIN, 88);
    coh_call theirs = mine;
    theirs.count = 1024;
    mismatch_vs(g, &mine, &theirs);
    char first[COH_ERRLEN];
    snprintf(first, sizeof first, "%s", g->err.msg);
    theirs.count = 2048;
    ck_assert_int_eq(mismatch_vs(g, &mine, &theirs), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(g->err.msg, first);
    ck_assert_str_eq(g->last.msg, first);
    cht_group_free(g);
}
END_TEST

START_TEST(remote_abort_first_is_not_detection)
{
    /* The peer's abort arrived first: this rank's own later detection is
     * not first-hand evidence for the global report. */
    cohort_group *g = tg_make(3, 4);
    coh_group_remote_abort(g, COHORT_ERR_CONTRACT, "rank 0's message");
    coh_call mine = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 512, TRAIN, 88);
    coh_call theirs = mine;
    theirs.count = 1024;
    ck_assert_int_eq(mismatch_vs(g, &mine, &theirs), COHORT_ERR_CONTRACT);
    ck_assert_str_eq(g->err.msg, "rank 0's message");
    ck_assert(!(atomic_load(&g->contract_state) & COH_CSTATE_DETECTED));
    cht_group_free(g);
}
END_TEST

/* ---- coh_contract_report without a store ---- */

START_TEST(report_noop_unless_contract)
{
    cohort_group *g = tg_make(0, 2);
    coh_contract_report(g); /* not poisoned */
    ck_assert_int_eq(atomic_load(&g->contract_state), 0);
    coh_group_fail(g, COHORT_ERR_TIMEOUT, "timed out");
    coh_contract_report(g);
    ck_assert_str_eq(g->err.msg, "timed out");
    ck_assert_int_eq(atomic_load(&g->contract_state), 0);
    coh_contract_report(NULL);
    cht_group_free(g);
}
END_TEST

START_TEST(report_without_store)
{
    cohort_group *g = tg_make(3, 4);
    coh_call mine = cht_call(7, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0, 512, TRAIN, 88);
    coh_call theirs = mine;
    theirs.count = 1024;
    mismatch_vs(g, &mine, &theirs);
    coh_contract_report(g);
    const char *want = "all_reduce #7 (train.c:88): count differs: this rank (3) has 512, rank 0 "
                       "sent 1024 (train.c:88) (no global report: the group has no store)";
    ck_assert_str_eq(g->err.msg, want);
    ck_assert_str_eq(g->last.msg, want);
    /* Idempotent. */
    coh_contract_report(g);
    ck_assert_str_eq(g->err.msg, want);
    ck_assert(atomic_load(&g->contract_state) & COH_CSTATE_DONE);
    ck_assert(!(atomic_load(&g->contract_state) & COH_CSTATE_BUSY));
    cht_group_free(g);
}
END_TEST

START_TEST(report_keeps_tail_of_long_message)
{
    cohort_group *g = tg_make(0, 2);
    char big[COH_ERRLEN];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    coh_group_fail(g, COHORT_ERR_CONTRACT, "%s", big);
    coh_contract_report(g);
    size_t l = strlen(g->err.msg);
    ck_assert_uint_eq(l, COH_ERRLEN - 1);
    const char *tail = "... (no global report: the group has no store)";
    ck_assert_str_eq(g->err.msg + l - strlen(tail), tail);
    cht_group_free(g);
}
END_TEST

static void *report_thread(void *arg)
{
    coh_contract_report(arg);
    return NULL;
}

START_TEST(report_concurrent_callers)
{
    /* The engine's worker and the user's thread may both return the error:
     * the report is built once and both see it. */
    for (int round = 0; round < 50; round++) {
        cohort_group *g = tg_make(1, 2);
        coh_group_fail(g, COHORT_ERR_CONTRACT, "local");
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, report_thread, g);
        for (int i = 0; i < 4; i++)
            pthread_join(t[i], NULL);
        ck_assert_str_eq(g->err.msg, "local (no global report: the group has no store)");
        cht_group_free(g);
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("contract_mismatch");
    TCase *t = tcase_create("messages");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, count_message);
    tcase_add_test(t, seq_message);
    setup_cases();
    tcase_add_loop_test(t, field_messages, 0, n_mcases);
    tcase_add_test(t, group_and_generation);
    tcase_add_test(t, step_and_none);
    tcase_add_test(t, peer_file_from_recorder);
    tcase_add_test(t, no_call_site_here);
    tcase_add_test(t, first_failure_wins);
    tcase_add_test(t, remote_abort_first_is_not_detection);
    suite_add_tcase(s, t);

    t = tcase_create("report");
    tcase_set_timeout(t, 30);
    tcase_add_test(t, report_noop_unless_contract);
    tcase_add_test(t, unconsumed_verdicts);
    tcase_add_test(t, report_without_store);
    tcase_add_test(t, report_keeps_tail_of_long_message);
    tcase_add_test(t, report_concurrent_callers);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
