/*
 * test_coll_lane.c - the direct lane (group.h, lane_mask; engine.c,
 * run_lane) gives every outcome the full path gives. Two forked ranks on
 * one host's shared memory run one script of calls three times: with the
 * lane (the default), with it closed on both ranks, and closed on rank 1
 * only (one rank in the lane, its peer on the full path). Each rank writes
 * what every call returned - the status, the message of cohort_last_error
 * and a sum of the output - and the three runs must agree line by line:
 *   - good calls of every lane kind (broadcast, scatter, gather, reduce,
 *     all_reduce) at 2 and 16 floats, each root, and the kinds and cases
 *     the lane leaves to the full path (count 0) or left to it before
 *     session 28 (AVG, now divided in the shm fold; in place);
 *   - bad arguments (a root out of range, a NULL buffer): a local
 *     INVALID, the group still usable;
 *   - an async all_reduce in flight, then blocking calls (they queue
 *     behind it: the lane must not overtake it), then the wait;
 *   - a count mismatch in a broadcast, a scatter against a broadcast, and
 *     the calls after them on the poisoned group (CONTRACT, then ABORTED).
 * The lane's run also checks that the lane was open for the five kinds
 * (and closed in the others), so that a lane never taken cannot pass.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/group.h"
#include "support/support.h"

enum { N = 2, MAXC = 64 };

typedef struct lane_run {
    const char *mode; /* "lane", "off", "mixed" */
    int scenario;     /* 0: good calls, bad arguments, async; 1, 2: mismatches */
    char dir[256];
} lane_run;

static FILE *out;

static double sum_of(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i] * (double)(i + 1);
    return s;
}

/* one line per call: what the caller of the API can see */
static void note(cohort_group *g, const char *what, cohort_status st, const float *x, size_t n)
{
    fprintf(out, "%s: %s", what, cohort_status_name(st));
    if (st != COHORT_OK)
        fprintf(out, " [%s]", cohort_last_error(g));
    if (x)
        fprintf(out, " sum=%.1f", sum_of(x, n));
    fputc('\n', out);
}

static void fill(float *x, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)(rank * 100 + salt * 7 + (int)i);
}

static void good_calls(cohort_group *g, int rank)
{
    static float a[MAXC * N], b[MAXC * N];
    char what[96];
    const size_t counts[] = {2, 16};
    for (int ci = 0; ci < 2; ci++) {
        size_t c = counts[ci];
        for (int root = 0; root < N; root++) {
            fill(a, c, rank, 1);
            snprintf(what, sizeof what, "broadcast %zu root %d", c, root);
            note(g, what, cohort_broadcast(g, a, c, COHORT_FLOAT32, root), a, c);
            fill(a, c * N, rank, 2);
            memset(b, 0, sizeof b);
            snprintf(what, sizeof what, "scatter %zu root %d", c, root);
            note(g, what, cohort_scatter(g, a, b, c, COHORT_FLOAT32, root), b, c);
            fill(a, c, rank, 3);
            memset(b, 0, sizeof b);
            snprintf(what, sizeof what, "gather %zu root %d", c, root);
            note(g, what, cohort_gather(g, a, b, c, COHORT_FLOAT32, root), b, c * N);
            fill(a, c, rank, 4);
            memset(b, 0, sizeof b);
            snprintf(what, sizeof what, "reduce %zu root %d", c, root);
            note(g, what, cohort_reduce(g, a, b, c, COHORT_FLOAT32, COHORT_MAX, root), b, c);
        }
        fill(a, c, rank, 5);
        memset(b, 0, sizeof b);
        snprintf(what, sizeof what, "all_reduce %zu", c);
        note(g, what, cohort_all_reduce(g, a, b, c, COHORT_FLOAT32, COHORT_SUM), b, c);
        /* what the lane leaves to the full path */
        fill(a, c, rank, 6);
        memset(b, 0, sizeof b);
        snprintf(what, sizeof what, "reduce avg %zu", c);
        note(g, what, cohort_reduce(g, a, b, c, COHORT_FLOAT32, COHORT_AVG, 0), b, c);
        snprintf(what, sizeof what, "all_reduce avg %zu", c);
        note(g, what, cohort_all_reduce(g, a, b, c, COHORT_FLOAT32, COHORT_AVG), b, c);
        fill(b, c * N, rank, 7);
        snprintf(what, sizeof what, "gather in place %zu", c);
        note(g, what, cohort_gather(g, b, b, c, COHORT_FLOAT32, 1), b, c * N);
        fill(b, c * N, rank, 8);
        snprintf(what, sizeof what, "scatter in place %zu", c);
        note(g, what, cohort_scatter(g, b, b, c, COHORT_FLOAT32, 0), b, c);
    }
    note(g, "broadcast 0", cohort_broadcast(g, a, 0, COHORT_FLOAT32, 1), NULL, 0);
    note(g, "gather 0", cohort_gather(g, a, b, 0, COHORT_FLOAT32, 0), NULL, 0);
}

static void bad_args(cohort_group *g, int rank)
{
    static float a[MAXC], b[MAXC * N];
    note(g, "broadcast root 5", cohort_broadcast(g, a, 2, COHORT_FLOAT32, 5), NULL, 0);
    note(g, "scatter NULL recv", cohort_scatter(g, a, NULL, 2, COHORT_FLOAT32, 0), NULL, 0);
    note(g, "reduce NULL send", cohort_reduce(g, NULL, b, 2, COHORT_FLOAT32, COHORT_SUM, 0),
         NULL, 0);
    note(g, "gather bad dtype", cohort_gather(g, a, b, 2, (cohort_dtype)99, 0), NULL, 0);
    fill(a, 2, rank, 9);
    note(g, "broadcast after", cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0), a, 2);
}

/* Blocking calls issued while an async all_reduce is in flight run after
 * it (issue order): rank 1 holds its part back, so on rank 0 the
 * all_reduce is still pending when the blocking calls are issued. */
static void async_then_blocking(cohort_group *g, int rank)
{
    static float x[MAXC], y[MAXC], a[MAXC], b[MAXC * N];
    fill(x, 16, rank, 10);
    memset(y, 0, sizeof y);
    cohort_work *w = NULL;
    note(g, "all_reduce async", cohort_all_reduce_async(g, x, y, 16, COHORT_FLOAT32, COHORT_SUM, &w),
         NULL, 0);
    if (rank == 1)
        usleep(100 * 1000);
    fill(a, 2, rank, 11);
    note(g, "broadcast behind async", cohort_broadcast(g, a, 2, COHORT_FLOAT32, 1), a, 2);
    fill(a, 2, rank, 12);
    memset(b, 0, sizeof b);
    note(g, "gather behind async", cohort_gather(g, a, b, 2, COHORT_FLOAT32, 0), b, 2 * N);
    note(g, "wait", cohort_work_wait(w, -1), y, 16);
    cohort_work_free(w);
    fill(a, 2, rank, 13);
    note(g, "broadcast after wait", cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0), a, 2);
}

/* A count mismatch in a broadcast (scenario 1) or a scatter against a
 * broadcast (2), then two more calls on the poisoned group. The reader
 * (rank 1) calls once the root has published, so that each rank's
 * outcome does not depend on which of them arrives first. */
static void mismatch(cohort_group *g, int rank, int scenario)
{
    static float a[MAXC], b[MAXC * N];
    fill(a, 4, rank, 14);
    note(g, "broadcast before", cohort_broadcast(g, a, 4, COHORT_FLOAT32, 0), a, 4);
    note(g, "barrier", cohort_barrier(g), NULL, 0);
    if (rank == 1)
        usleep(100 * 1000);
    cohort_status st;
    if (scenario == 1)
        st = cohort_broadcast(g, a, rank ? 3 : 2, COHORT_FLOAT32, 0);
    else
        st = rank ? cohort_scatter(g, a, b, 1, COHORT_FLOAT32, 0)
                  : cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0);
    note(g, "mismatched", st, NULL, 0);
    if (rank == 0)
        usleep(100 * 1000);
    note(g, "gather after", cohort_gather(g, a, b, 2, COHORT_FLOAT32, 0), NULL, 0);
    note(g, "broadcast after", cohort_broadcast(g, a, 2, COHORT_FLOAT32, 0), NULL, 0);
}

#define LANE_KINDS                                                                                 \
    (1u << COH_COLL_BROADCAST | 1u << COH_COLL_SCATTER | 1u << COH_COLL_GATHER |                   \
     1u << COH_COLL_REDUCE | 1u << COH_COLL_ALL_REDUCE)

static int rank_main(int rank, void *arg)
{
    const lane_run *r = arg;
    char path[320];
    snprintf(path, sizeof path, "%s/%s.%d.%d", r->dir, r->mode, r->scenario, rank);
    out = fopen(path, "w");
    RANK_CHECK(out != NULL, "%s", path);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int closed = !strcmp(r->mode, "off") || (!strcmp(r->mode, "mixed") && rank == 1);
    if (closed)
        g->lane_seen = ~0u; /* decided: closed for every kind */
    if (r->scenario == 0) {
        good_calls(g, rank);
        RANK_CHECK(closed ? g->lane_mask == 0 : (g->lane_mask & LANE_KINDS) == LANE_KINDS,
                   "%s rank %d: lane_mask %#x", r->mode, rank, g->lane_mask);
        bad_args(g, rank);
        async_then_blocking(g, rank);
    } else {
        mismatch(g, rank, r->scenario);
    }
    fclose(out);
    cohort_finalize(g);
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char buf[3][1 << 16];
    static int k;
    char *b = buf[k++ % 3];
    size_t n = fread(b, 1, sizeof buf[0] - 1, f);
    b[n] = 0;
    fclose(f);
    return b;
}

START_TEST(test_lane_agrees)
{
    const char *modes[] = {"off", "lane", "mixed"};
    char dir[] = "/tmp/cohlaneXXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    lane_run runs[3];
    for (int m = 0; m < 3; m++) {
        runs[m].mode = modes[m];
        runs[m].scenario = _i;
        snprintf(runs[m].dir, sizeof runs[m].dir, "%s", dir);
        cht_opts o = {.nranks = N, .deadline_ms = 60000, .extra_env = "COHORT_TIMEOUT=20"};
        cht_result res;
        cht_run_ranks(&o, rank_main, &runs[m], &res);
        for (int i = 0; i < N; i++)
            ck_assert_msg(res.status[i] == 0 && !res.hung[i], "%s scenario %d: rank %d: %s %d",
                          modes[m], _i, i, res.hung[i] ? "hung" : "exit", res.status[i]);
    }
    for (int rank = 0; rank < N; rank++) {
        char p[320];
        snprintf(p, sizeof p, "%s/off.%d.%d", dir, _i, rank);
        char *base = slurp(p);
        ck_assert_ptr_nonnull(base);
        ck_assert_msg(strlen(base) > 0, "rank %d wrote nothing", rank);
        for (int m = 1; m < 3; m++) {
            snprintf(p, sizeof p, "%s/%s.%d.%d", dir, modes[m], _i, rank);
            char *other = slurp(p);
            ck_assert_ptr_nonnull(other);
            if (strcmp(base, other))
                fprintf(stderr, "scenario %d rank %d:\n--- off\n%s--- %s\n%s", _i, rank, base,
                        modes[m], other);
            ck_assert_msg(!strcmp(base, other),
                          "scenario %d rank %d: %s differs from the full path (both on stderr)",
                          _i, rank, modes[m]);
        }
        for (int m = 0; m < 3; m++) {
            snprintf(p, sizeof p, "%s/%s.%d.%d", dir, modes[m], _i, rank);
            unlink(p);
        }
    }
    rmdir(dir);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("coll_lane");
    TCase *t = tcase_create("lane");
    tcase_set_timeout(t, 240);
    tcase_add_loop_test(t, test_lane_agrees, 0, 3);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
