/* test_waits.c - what a user sees while cohort waits (issues 13, 16):
 * ranks disagreeing on WORLD_SIZE fail fast, naming ranks and values;
 * init reports which ranks it is still waiting for; a stalled call repeats
 * its stall report with fresh numbers and the timeout carries the time
 * actually waited; default-level log lines carry no source locations, and
 * COHORT_LOG=off silences them. Each rank captures its own stderr. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"

static char tmpdir[256];

/* Sends this rank's stderr to <tmpdir>/rank<r>.err. */
static void capture_stderr(int rank)
{
    char p[512];
    snprintf(p, sizeof p, "%s/rank%d.err", tmpdir, rank);
    int fd = open(p, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
}

static void read_stderr(int rank, char *out, size_t len)
{
    char p[512];
    snprintf(p, sizeof p, "%s/rank%d.err", tmpdir, rank);
    out[0] = 0;
    FILE *f = fopen(p, "r");
    if (!f)
        return;
    size_t n = fread(out, 1, len - 1, f);
    out[n] = 0;
    fclose(f);
}

/* A rank that failed wrote why into its capture: put it where ctest's log
 * keeps it before the captures are removed (a failure once left only "rank
 * 0: exit 1"). */
static void show_failed(const cht_result *r)
{
    for (int k = 0; k < r->n && k < 8; k++) {
        if (!r->status[k] && !r->hung[k])
            continue;
        char out[8192];
        read_stderr(k, out, sizeof out);
        fprintf(stderr, "--- rank %d's stderr (exit %d%s):\n%s\n", k, r->status[k],
                r->hung[k] ? ", hung" : "", out);
    }
}

static void remove_tmpdir(void)
{
    for (int r = 0; r < 8; r++) {
        char p[512];
        snprintf(p, sizeof p, "%s/rank%d.err", tmpdir, r);
        unlink(p);
    }
    rmdir(tmpdir);
}

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/cohort-waits-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

/* ---- WORLD_SIZE disagreement ---- */

static int rank_world_size(int rank, void *arg)
{
    int odd = *(int *)arg;
    capture_stderr(rank);
    if (rank == odd)
        setenv("WORLD_SIZE", "4", 1);
    cohort_group *g = (cohort_group *)&g;
    double t0 = cht_now_ms();
    cohort_status st = cohort_init(&g);
    double dt = cht_now_ms() - t0;
    const char *m = cohort_last_error(NULL);
    fprintf(stderr, "rank %d: %s\n", rank, m); /* kept in the capture for a human */
    RANK_CHECK(st == COHORT_ERR_INVALID, "rank %d: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "disagree on the world size"), "rank %d: %s", rank, m);
    if (rank == odd)
        RANK_CHECK(strstr(m, "this rank (2) has 4; ranks 0-1 have 3"),
                   "%s", m);
    else
        RANK_CHECK(strstr(m, "has 3") && strstr(m, "rank 2 has 4"), "rank %d: %s", rank, m);
    RANK_CHECK(dt < 5000, "rank %d took %.0f ms (COHORT_TIMEOUT is 60 s)", rank, dt);
    return 0;
}

START_TEST(world_size_disagreement_fails_fast)
{
    make_tmpdir();
    int odd = 2;
    cht_opts o = {.nranks = 3, .deadline_ms = 40000, .store_mode = CHT_STORE_PARENT,
                  .extra_env = "COHORT_TIMEOUT=60"};
    cht_result r;
    cht_run_ranks(&o, rank_world_size, &odd, &r);
    char out[4096];
    read_stderr(2, out, sizeof out);
    fprintf(stderr, "%s", out);
    show_failed(&r);
    remove_tmpdir();
    cht_assert_all_ok(&r);
    ck_assert_msg(r.elapsed_ms < 8000, "took %.0f ms", r.elapsed_ms);
}
END_TEST

/* ---- init progress ---- */

static int rank_late_join(int rank, void *arg)
{
    (void)arg;
    capture_stderr(rank);
    if (rank == 2)
        usleep(6500 * 1000);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    RANK_PASS(cohort_finalize(g), NULL);
    if (rank == 0) {
        char out[16384];
        read_stderr(0, out, sizeof out);
        RANK_CHECK(strstr(out, "waiting for rank 2 to join (2 of 3 joined)"), "stderr: %s", out);
        RANK_CHECK(!strstr(out, ".c:"), "source location at default level: %s", out);
    }
    if (rank == 1) {
        char out[16384];
        read_stderr(1, out, sizeof out);
        RANK_CHECK(!strstr(out, "waiting for"), "only the lowest rank present reports: %s", out);
    }
    return 0;
}

/* Rank 0 hosts the store and starts late: the others say what they wait
 * for instead of waiting silently. */
static int rank_late_store(int rank, void *arg)
{
    (void)arg;
    capture_stderr(rank);
    if (rank == 0)
        usleep(6500 * 1000);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    RANK_PASS(cohort_finalize(g), NULL);
    if (rank == 1) {
        char out[16384];
        read_stderr(1, out, sizeof out);
        RANK_CHECK(strstr(out, "waiting for the store at 127.0.0.1:") &&
                       strstr(out, "rank 0 hosts it at MASTER_ADDR:MASTER_PORT"),
                   "stderr: %s", out);
    }
    return 0;
}

START_TEST(init_reports_missing_store)
{
    make_tmpdir();
    cht_opts o = {.nranks = 2, .deadline_ms = 40000, .extra_env = "COHORT_TIMEOUT=60"};
    cht_result r;
    cht_run_ranks(&o, rank_late_store, NULL, &r);
    show_failed(&r);
    remove_tmpdir();
    cht_assert_all_ok(&r);
}
END_TEST

START_TEST(init_reports_missing_ranks)
{
    make_tmpdir();
    cht_opts o = {.nranks = 3, .deadline_ms = 40000, .store_mode = CHT_STORE_PARENT,
                  .extra_env = "COHORT_TIMEOUT=60"};
    cht_result r;
    cht_run_ranks(&o, rank_late_join, NULL, &r);
    show_failed(&r);
    remove_tmpdir();
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- stall reports stay current ---- */

static int count(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static int rank_stall(int rank, void *arg)
{
    int quiet = *(int *)arg;
    capture_stderr(rank);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    float x[16] = {0};
    if (rank == 1) {
        usleep(4500 * 1000); /* not in any call while rank 0 waits */
        cohort_status st = cohort_all_reduce(g, x, x, 16, COHORT_FLOAT32, COHORT_SUM);
        RANK_CHECK(st != COHORT_OK, "rank 1: late call returned OK");
        cohort_finalize(g);
        return 0;
    }
    cohort_status st = cohort_all_reduce(g, x, x, 16, COHORT_FLOAT32, COHORT_SUM);
    char m[4096];
    snprintf(m, sizeof m, "%s", cohort_last_error(g));
    cohort_finalize(g);
    RANK_CHECK(st == COHORT_ERR_TIMEOUT, "rank 0: %s: %s", cohort_status_name(st), m);
    /* The timeout carries the time waited now, not the first report's. */
    RANK_CHECK(strstr(m, "has waited 3."), "timeout message: %s", m);
    RANK_CHECK(!strstr(m, "has waited 1."), "stale number in the timeout message: %s", m);
    RANK_CHECK(strstr(m, "rank 1: not in any call"), "timeout message: %s", m);
    char out[32768];
    read_stderr(0, out, sizeof out);
    if (quiet) {
        RANK_CHECK(out[0] == 0, "COHORT_LOG=off, yet stderr has: %s", out);
        return 0;
    }
    RANK_CHECK(count(out, "stall: all_reduce #1") >= 2, "stall report not repeated: %s", out);
    RANK_CHECK(strstr(out, "has waited 1.") && strstr(out, "has waited 2."), "stderr: %s", out);
    RANK_CHECK(!strstr(out, "fail.c:") && !strstr(out, "report.c:") && !strstr(out, "monitor.c:"),
               "source location at default level: %s", out);
    return 0;
}

START_TEST(stall_reports_repeat_fresh)
{
    make_tmpdir();
    int quiet = _i;
    cht_opts o = {.nranks = 2, .deadline_ms = 40000, .transport = "tcp",
                  .extra_env = quiet ? "COHORT_TIMEOUT=3.5;COHORT_STALL_WARN=1;COHORT_LOG=off"
                                     : "COHORT_TIMEOUT=3.5;COHORT_STALL_WARN=1"};
    cht_result r;
    cht_run_ranks(&o, rank_stall, &quiet, &r);
    show_failed(&r);
    remove_tmpdir();
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- a rank finalizes while the others enter a collective ---- */

static int rank_early_finalize(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_PASS(cohort_barrier(g), g);
    float x[64] = {0};
    double t0 = cht_now_ms();
    char m[4096];
    cohort_status st;
    if (rank == 1) {
        usleep(200 * 1000); /* the others are inside all_reduce #2 */
        st = cohort_finalize(g);
        snprintf(m, sizeof m, "%s", cohort_last_error(NULL));
    } else {
        st = cohort_all_reduce_at("train.c", 88, g, x, x, 64, COHORT_FLOAT32, COHORT_SUM);
        snprintf(m, sizeof m, "%s", cohort_last_error(g));
        cohort_finalize(g);
    }
    double dt = cht_now_ms() - t0;
    fprintf(stderr, "rank %d (%.0f ms): %s: %s\n", rank, dt, cohort_status_name(st), m);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank %d: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "all_reduce #2") && strstr(m, "train.c:88") && strstr(m, "finalize") &&
                   strstr(m, "rank 1"),
               "rank %d: %s", rank, m);
    /* within a second of the others' probe (plus the report), not COHORT_TIMEOUT */
    RANK_CHECK(dt < 3000, "rank %d took %.0f ms", rank, dt);
    return 0;
}

/* The same for point-to-point: a recv from a rank that finalized. */
static int rank_finalize_p2p(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    float x[16] = {0};
    double t0 = cht_now_ms();
    char m[4096];
    cohort_status st;
    if (rank == 1) {
        /* One message sent before leaving: it must still be received. */
        RANK_PASS(cohort_send(g, x, 16, COHORT_FLOAT32, 0, 7), g);
        usleep(200 * 1000);
        st = cohort_finalize(g);
        snprintf(m, sizeof m, "%s", cohort_last_error(NULL));
    } else {
        usleep(400 * 1000); /* rank 1 has finalized: its message is here */
        t0 = cht_now_ms();
        RANK_PASS(cohort_recv(g, x, 16, COHORT_FLOAT32, 1, 7), g);
        st = cohort_recv_at("pipe.c", 40, g, x, 16, COHORT_FLOAT32, 1, 7);
        snprintf(m, sizeof m, "%s", cohort_last_error(g));
        cohort_finalize(g);
    }
    double dt = cht_now_ms() - t0;
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank %d: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "recv #2 (pipe.c:40) from rank 1 (tag 7): rank 1 left the group "
                         "(called cohort_finalize"),
               "rank %d: %s", rank, m);
    RANK_CHECK(dt < 3000, "rank %d took %.0f ms", rank, dt);
    return 0;
}

START_TEST(finalize_while_peer_in_recv)
{
    cht_opts o = {.nranks = 2, .deadline_ms = 60000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=30"};
    cht_result r;
    cht_run_ranks(&o, rank_finalize_p2p, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

START_TEST(finalize_while_others_in_a_call)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .transport = cht_transports[_i],
                  .extra_env = "COHORT_TIMEOUT=30"};
    cht_result r;
    cht_run_ranks(&o, rank_early_finalize, NULL, &r);
    cht_assert_all_ok(&r);
    ck_assert_msg(r.elapsed_ms < 10000, "took %.0f ms", r.elapsed_ms);
}
END_TEST

/* ---- one mismatch: one log line per rank, dumps that say failed ---- */

static int rank_mismatch_logs(int rank, void *arg)
{
    (void)arg;
    capture_stderr(rank);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    float x[1024] = {0};
    RANK_PASS(cohort_all_reduce(g, x, x, 1024, COHORT_FLOAT32, COHORT_SUM), g);
    size_t n = rank == 2 ? 512 : 1024;
    cohort_status st = cohort_all_reduce_at("train.c", 88, g, x, x, n, COHORT_FLOAT32, COHORT_SUM);
    RANK_CHECK(st == COHORT_ERR_CONTRACT, "rank %d: %s", rank, cohort_status_name(st));
    cohort_finalize(g);
    char out[16384];
    read_stderr(rank, out, sizeof out);
    RANK_CHECK(count(out, "cohort ") == 1 && strstr(out, "ERROR: group 0: COHORT_ERR_CONTRACT: "
                                                        "all_reduce #2 (train.c:88): count differs"),
               "rank %d: want one report line, got: %s", rank, out);
    /* The flight recorder: the failed call is failed, with this rank's own
     * values, and nobody else's "this rank". */
    char path[1024], dump[16384];
    snprintf(path, sizeof path, "%s/%s-rank%d.jsonl", tmpdir, getenv("COHORT_JOB_ID"), rank);
    FILE *f = fopen(path, "r");
    RANK_CHECK(f, "no dump at %s", path);
    size_t l = fread(dump, 1, sizeof dump - 1, f);
    dump[l] = 0;
    fclose(f);
    char want[256];
    snprintf(want, sizeof want,
             "{\"seq\":2,\"op\":\"all_reduce\",\"dtype\":\"float32\",\"count\":%zu,", n);
    char *e = strstr(dump, want);
    RANK_CHECK(e, "rank %d: no entry for #2 with its own count %zu: %s", rank, n, dump);
    RANK_CHECK(strstr(e, "\"state\":\"failed\",\"status\":\"COHORT_ERR_CONTRACT\""),
               "rank %d: #2 not recorded as failed: %s", rank, dump);
    for (int r = 0; r < 3; r++) {
        char other[32];
        snprintf(other, sizeof other, "this rank (%d)", r);
        RANK_CHECK(r == rank || !strstr(dump, other), "rank %d's dump speaks for rank %d: %s", rank,
                   r, dump);
    }
    RANK_CHECK(strstr(dump, "ranks 0-1 have 1024, rank 2 has 512"), "rank %d: reason: %s", rank,
               dump);
    unlink(path);
    return 0;
}

START_TEST(mismatch_logs_once_and_dumps_failed)
{
    make_tmpdir();
    char env[512];
    snprintf(env, sizeof env, "COHORT_TIMEOUT=30;COHORT_TRACE_DIR=%s", tmpdir);
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .transport = cht_transports[_i],
                  .extra_env = env};
    cht_result r;
    cht_run_ranks(&o, rank_mismatch_logs, NULL, &r);
    show_failed(&r);
    remove_tmpdir();
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("waits");
    TCase *tc = tcase_create("waits");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, world_size_disagreement_fails_fast);
    tcase_add_test(tc, init_reports_missing_ranks);
    tcase_add_test(tc, init_reports_missing_store);
    tcase_add_loop_test(tc, stall_reports_repeat_fresh, 0, 2);
    cht_add_per_transport(tc, finalize_while_others_in_a_call);
    cht_add_per_transport(tc, finalize_while_peer_in_recv);
    cht_add_per_transport(tc, mismatch_logs_once_and_dumps_failed);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
