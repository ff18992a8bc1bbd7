/*
 * test_report.c - coh_contract_report with a real store: real forked rank
 * processes, each with a hand-built group (no transports) holding a real
 * store connection and a flight recorder with its call history. After the
 * group is poisoned with COHORT_ERR_CONTRACT each rank runs the report and
 * checks that it got the same, global message as every other rank; missing
 * ranks are named within the bounded wait; a dead store keeps the local
 * message and says why.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "group_util.h"
#include "support/support.h"

#define TRAIN "/home/user/src/train.c"

enum scenario { S_COUNT, S_MISSING, S_P2P, S_EXTRA, S_LARGE };

typedef struct rcase {
    enum scenario s;
    int nranks;
    const char *want;       /* every reporting rank's final message */
    double min_ms, max_ms;  /* bounds on the report's duration */
} rcase;

/* Rank 0 hosts the store in its own process (as the library's embedded
 * server does), on MASTER_PORT; no thread runs in the test process while it
 * forks the ranks (a forked child can inherit a locked allocator). */
static cohort_group *rank_group(int rank, int n)
{
    cohort_group *g = tg_make(rank, n);
    const char *job = getenv("COHORT_JOB_ID"), *token = getenv("COHORT_TOKEN");
    int port = atoi(getenv("MASTER_PORT"));
    if (rank == 0) {
        cohort_store_server_opts so;
        memset(&so, 0, sizeof so);
        so.bind_addr = "127.0.0.1";
        so.port = port;
        so.job_ids = &job;
        so.tokens = &token;
        so.n_jobs = 1;
        cohort_status st = cohort_store_server_start(&g->server, &so);
        RANK_CHECK(st == COHORT_OK, "store server: %s", cohort_status_name(st));
    }
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    cohort_store *root = NULL;
    cohort_status st = cohort_store_connect(&root, addr, job, token, 10000);
    RANK_CHECK(st == COHORT_OK, "connect: %s", cohort_status_name(st));
    st = cohort_store_prefixed(root, "gen1/g0/", &g->store);
    RANK_CHECK(st == COHORT_OK, "prefix: %s", cohort_status_name(st));
    g->store_root = root;
    RANK_CHECK(coh_trace_create(&g->trace, 64) == COHORT_OK, "trace");
    return g;
}

static void record(cohort_group *g, coh_call c, cohort_status st)
{
    uint64_t i = coh_trace_issue(g->trace, &c);
    coh_trace_start(g->trace, i);
    if (st != (cohort_status)-1)
        coh_trace_end(g->trace, i, st);
}

static coh_call loop_call(uint64_t s)
{
    return cht_call(s, COH_COLL_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, -1, 0,
                   s % 2 ? 1024 : 2048, TRAIN, s % 2 ? 88 : 91);
}

/* cohort_error_info_get: the report's story as data, the same on every rank. */
static void check_info(cohort_group *g, const rcase *rc, int rank)
{
    int n = rc->nranks;
    cohort_error_info *info = cohort_error_info_get(g);
    if (rc->s == S_COUNT || rc->s == S_LARGE) {
        RANK_CHECK(info && info->status == COHORT_ERR_CONTRACT, "no info");
        RANK_CHECK(!strcmp(info->kind, "mismatch") && !strcmp(info->call, "all_reduce") &&
                       info->seq == 7 && !strcmp(info->field, "count"),
                   "info: %s %s #%llu %s", info->kind, info->call,
                   (unsigned long long)info->seq, info->field);
        RANK_CHECK(info->nranks == n && info->nculprits == 1 && info->culprits[0] == n - 1,
                   "culprits: %d", info->nculprits);
        for (int r = 0; r < n; r++) {
            RANK_CHECK(info->values[r] && !strcmp(info->values[r], r == n - 1 ? "512" : "1024"),
                       "value of rank %d: %s", r, info->values[r] ? info->values[r] : "NULL");
            RANK_CHECK(info->files[r] && strstr(info->files[r], "train.c") && info->lines[r] == 88,
                       "site of rank %d", r);
        }
    } else if (rc->s == S_EXTRA) {
        RANK_CHECK(info && !strcmp(info->kind, "extra") && info->seq == 7, "info: %s",
                   info ? info->kind : "NULL");
        RANK_CHECK(info->nculprits == 1 && info->culprits[0] == n - 1, "culprits");
        RANK_CHECK(info->values[n - 1] && !strcmp(info->values[n - 1], "barrier") &&
                       info->values[0] && !strcmp(info->values[0], "all_reduce"),
                   "values");
    } else if (rc->s == S_P2P && rank == 1) {
        /* collectives agree: the detecting rank keeps its own view */
        RANK_CHECK(info && !strcmp(info->kind, "local") && !strcmp(info->call, "recv") &&
                       !strcmp(info->field, "tag") && info->seq == 2,
                   "p2p info: %s %s %s", info ? info->kind : "NULL", info ? info->call : "",
                   info ? info->field : "");
        RANK_CHECK(info->values[1] && !strcmp(info->values[1], "5") && info->values[0] &&
                       !strcmp(info->values[0], "6") && info->nculprits == 0,
                   "p2p values");
    }
    cohort_error_info_free(info);
}

static int rank_main(int rank, void *arg)
{
    const rcase *rc = arg;
    int n = rc->nranks;
    cohort_group *g = rank_group(rank, n);
    for (uint64_t s = 1; s <= 6; s++)
        record(g, loop_call(s), COHORT_OK);
    coh_call mine = loop_call(7), theirs = loop_call(7);
    int odd = rank == n - 1;
    switch (rc->s) {
    case S_COUNT:
    case S_MISSING:
    case S_LARGE:
        if (odd)
            mine.count = 512;
        else
            theirs.count = 512;
        break;
    case S_EXTRA: /* the last rank made an extra barrier at #7 (async: #8, #9 queued) */
        if (odd) {
            mine = cht_call(7, COH_COLL_BARRIER, 0, -1, -1, 0, 0, TRAIN, 95);
        } else {
            theirs = cht_call(7, COH_COLL_BARRIER, 0, -1, -1, 0, 0, TRAIN, 95);
        }
        break;
    case S_P2P:
        break;
    }
    if (rc->s == S_P2P) {
        /* Collectives agree; rank 1's recv #2 from rank 0 sees tag 6, not 5. */
        record(g, mine, COHORT_OK);
        if (rank == 1) {
            coh_call r = cht_call(2, COH_COLL_RECV, COHORT_INT32, -1, 0, 5, 16, "p2p.c", 40);
            coh_call s = cht_call(2, COH_COLL_SEND, COHORT_INT32, -1, 0, 6, 16, "p2p.c", 30);
            record(g, r, COHORT_ERR_CONTRACT);
            coh_hdr exp = tg_hdr(g, 1, &r), got = tg_hdr(g, 0, &s);
            got.coll = COH_COLL_RECV; /* the transport compares the matching kinds */
            coh_contract_mismatch(g, &r, 0, &exp, &got);
        } else {
            coh_group_remote_abort(g, COHORT_ERR_CONTRACT, "rank 1 aborted the group");
        }
    } else {
        record(g, mine, COHORT_ERR_CONTRACT);
        if (rc->s == S_EXTRA) {
            /* queued async calls, failed by the abort */
            if (odd) {
                /* the extra call shifted its queued calls by one seq */
                coh_call c8 = loop_call(7), c9 = loop_call(8);
                c8.seq = 8;
                c9.seq = 9;
                record(g, c8, COHORT_ERR_ABORTED);
                record(g, c9, COHORT_ERR_ABORTED);
            } else {
                record(g, loop_call(8), COHORT_ERR_ABORTED);
            }
        }
        if (rank == 0 || odd) {
            /* Rank 0 and the odd rank exchange messages: both detect it. */
            coh_hdr exp = tg_hdr(g, rank, &mine), got = tg_hdr(g, odd ? 0 : n - 1, &theirs);
            coh_contract_mismatch(g, &mine, odd ? 0 : n - 1, &exp, &got);
        } else {
            coh_group_remote_abort(g, COHORT_ERR_CONTRACT, "rank 0 aborted the group");
        }
    }
    if (rc->s == S_MISSING && rank == 2) {
        /* A rank that never reports (stuck elsewhere, or dead). */
        return 0;
    }
    double t0 = cht_now_ms();
    coh_contract_report(g);
    double dt = cht_now_ms() - t0;
    coh_contract_report(g); /* idempotent */
    fprintf(stderr, "rank %d (%.0f ms): %s\n", rank, dt, g->err.msg);
    RANK_CHECK(!strcmp(g->err.msg, rc->want), "\n got: %s\nwant: %s", g->err.msg, rc->want);
    RANK_CHECK(!strcmp(g->last.msg, rc->want), "last: %s", g->last.msg);
    RANK_CHECK(dt >= rc->min_ms && dt <= rc->max_ms, "report took %.0f ms, want %.0f-%.0f", dt,
               rc->min_ms, rc->max_ms);
    check_info(g, rc, rank);
    cohort_store_close(g->store);
    cohort_store_close(g->store_root);
    /* The host returned from its report only after every reporting rank
     * had read (readers_done): stopping the store now strands nobody. */
    if (g->server)
        cohort_store_server_stop(g->server);
    cht_group_free(g);
    return 0;
}

static const rcase rcases[] = {
    {S_COUNT, 4,
     "all_reduce #7 (train.c:88): count differs: ranks 0-2 have 1024, rank 3 has 512 - look at "
     "rank 3's call at train.c:88",
     0, 500},
    {S_MISSING, 4,
     "all_reduce #7 (train.c:88): count differs: ranks 0-1 have 1024, rank 3 has 512 - look at "
     "rank 3's call at train.c:88; no history from rank 2",
     450, 1600},
    {S_P2P, 3,
     "rank 1 reported: recv #2 (p2p.c:40): tag differs: this rank (1) has 5, rank 0 sent 6 "
     "(p2p.c:30) (no divergence in calls #1-#7)",
     0, 500},
    {S_EXTRA, 4,
     "rank 3 made an extra call: barrier #7 (train.c:95) where ranks 0-2 called all_reduce #7 "
     "(train.c:88); the calls after it are misaligned",
     0, 500},
    {S_LARGE, 24,
     "all_reduce #7 (train.c:88): count differs: ranks 0-22 have 1024, rank 23 has 512 - look at "
     "rank 23's call at train.c:88",
     0, 1500},
};

START_TEST(global_report)
{
    const rcase *rc = &rcases[_i];
    cht_opts o = {.nranks = rc->nranks, .deadline_ms = 30000, .store_mode = CHT_STORE_RANK0};
    cht_result r;
    cht_run_ranks(&o, rank_main, (void *)rc, &r);
    for (int i = 0; i < rc->nranks; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "case %d: rank %d status %d hung %d", _i, i,
                      r.status[i], r.hung[i]);
}
END_TEST

START_TEST(store_dead)
{
    /* The store died before the report: the local message stays and says
     * why the global one is missing; the report returns promptly. */
    char addr[64];
    cohort_store_server *srv = cht_store_start("j", "t", addr, sizeof addr);
    ck_assert_ptr_nonnull(srv);
    cohort_store *root = NULL;
    ck_assert_int_eq(cohort_store_connect(&root, addr, "j", "t", 5000), COHORT_OK);
    cohort_group *g = tg_make(0, 2);
    ck_assert_int_eq(cohort_store_prefixed(root, "gen1/g0/", &g->store), COHORT_OK);
    cohort_store_set_timeout(g->store, 2000);
    cohort_store_server_stop(srv);
    coh_group_fail(g, COHORT_ERR_CONTRACT, "local message");
    double t0 = cht_now_ms();
    coh_contract_report(g);
    double dt = cht_now_ms() - t0;
    const char *want = "local message (no global report: publishing this rank's history "
                       "failed: COHORT_ERR_STORE: ";
    ck_assert_msg(!strncmp(g->err.msg, want, strlen(want)), "%s", g->err.msg);
    ck_assert_msg(dt < 2500, "took %.0f ms", dt);
    cohort_store_close(g->store);
    cohort_store_close(root);
    cht_group_free(g);
}
END_TEST

START_TEST(unreadable_peer_entry)
{
    /* A peer's value is garbage (another version, corruption): it counts as
     * missing, and the report still completes. */
    char addr[64];
    cohort_store_server *srv = cht_store_start("j", "t", addr, sizeof addr);
    ck_assert_ptr_nonnull(srv);
    cohort_store *root = NULL;
    ck_assert_int_eq(cohort_store_connect(&root, addr, "j", "t", 5000), COHORT_OK);
    cohort_group *g = tg_make(0, 3);
    ck_assert_int_eq(cohort_store_prefixed(root, "gen1/g0/", &g->store), COHORT_OK);
    ck_assert_int_eq(coh_trace_create(&g->trace, 16), COHORT_OK);
    for (uint64_t s = 1; s <= 3; s++)
        record(g, loop_call(s), COHORT_OK);
    ck_assert_int_eq(cohort_store_sets(g->store, "contract/1", "\x01garbage{"), COHORT_OK);
    ck_assert_int_eq(cohort_store_sets(g->store, "contract/2",
                                       "{\"cohort_contract\":1,\"rank\":2,\"generation\":1,"
                                       "\"group\":0}\n"
                                       "{\"seq\":3,\"op\":\"all_reduce\",\"dtype\":\"float32\","
                                       "\"count\":1,\"redop\":\"sum\",\"root\":-1,\"tag\":0,"
                                       "\"file\":\"x/train.c\",\"line\":88}\n"
                                       "garbage line\n"),
                     COHORT_OK);
    coh_group_fail(g, COHORT_ERR_CONTRACT, "local");
    coh_contract_report(g);
    ck_assert_str_eq(g->err.msg, "all_reduce #3: count differs: rank 0 has 1024 (train.c:88), "
                                 "rank 2 has 1 (train.c:88) - no majority, so no rank is blamed: "
                                 "compare the call sites; no history from rank 1");
    cohort_store_close(g->store);
    cohort_store_close(root);
    cohort_store_server_stop(srv);
    cht_group_free(g);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("contract_report");
    TCase *t = tcase_create("store");
    tcase_set_timeout(t, 60);
    tcase_add_loop_test(t, global_report, 0, (int)(sizeof rcases / sizeof rcases[0]));
    tcase_add_test(t, store_dead);
    tcase_add_test(t, unreadable_peer_entry);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
