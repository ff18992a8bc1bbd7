/* test_api_args.c - every public entry point refuses out-of-range enums and
 * arguments with COHORT_ERR_INVALID without touching the group: no sequence
 * number consumed, no poisoning, so the next correct call succeeds on every
 * rank (issue 13: `op = (cohort_op)-1` used to poison the group). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/support.h"

static const char *transports[] = {"auto", "tcp"};

/* Values no cohort_op / cohort_dtype may take; -1 is the internal "none". */
static const int bad_ops[] = {-1, -2, COHORT_OP_COUNT, 127, 128, 1000, -129};
static const int bad_dtypes[] = {-1, COHORT_DTYPE_COUNT, 255, 256, 100000};
#define NB(a) (int)(sizeof(a) / sizeof((a)[0]))

#define EXPECT_INVALID(expr, g, what)                                                              \
    do {                                                                                           \
        cohort_status st_ = (expr);                                                                \
        RANK_CHECK(st_ == COHORT_ERR_INVALID, "%s (%s): got %s: %s", #expr, what,                 \
                   cohort_status_name(st_), cohort_last_error(g));                                \
        RANK_CHECK((strncmp(what, "op", 2) && strncmp(what, "dtype", 5)) ||                       \
                       strstr(cohort_last_error(g), "invalid"),                                    \
                   "%s: message '%s'", #expr, cohort_last_error(g));                              \
        RANK_CHECK(!strstr(cohort_last_error(g), "?"), "%s: message '%s' has '?'", #expr,          \
                   cohort_last_error(g));                                                          \
    } while (0)

static int rank_bad_enums(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    float x[64], y[64 * 8];
    for (int i = 0; i < 64; i++)
        x[i] = (float)rank;
    char what[64];
    for (int i = 0; i < NB(bad_ops); i++) {
        cohort_op op = (cohort_op)bad_ops[i];
        cohort_work *w = (cohort_work *)&w;
        snprintf(what, sizeof what, "op %d", bad_ops[i]);
        EXPECT_INVALID(cohort_all_reduce(g, x, y, 4, COHORT_FLOAT32, op), g, what);
        EXPECT_INVALID(cohort_reduce(g, x, y, 4, COHORT_FLOAT32, op, 0), g, what);
        EXPECT_INVALID(cohort_reduce_scatter(g, y, x, 4, COHORT_FLOAT32, op), g, what);
        EXPECT_INVALID(cohort_all_reduce_async(g, x, y, 4, COHORT_FLOAT32, op, &w), g, what);
        RANK_CHECK(w == NULL, "work handle set on an invalid call");
        EXPECT_INVALID(cohort_reduce_async(g, x, y, 4, COHORT_FLOAT32, op, 0, &w), g, what);
        EXPECT_INVALID(cohort_reduce_scatter_async(g, y, x, 4, COHORT_FLOAT32, op, &w), g, what);
    }
    for (int i = 0; i < NB(bad_dtypes); i++) {
        cohort_dtype dt = (cohort_dtype)bad_dtypes[i];
        cohort_work *w = NULL;
        snprintf(what, sizeof what, "dtype %d", bad_dtypes[i]);
        EXPECT_INVALID(cohort_all_reduce(g, x, y, 4, dt, COHORT_SUM), g, what);
        EXPECT_INVALID(cohort_broadcast(g, x, 4, dt, 0), g, what);
        EXPECT_INVALID(cohort_reduce(g, x, y, 4, dt, COHORT_SUM, 0), g, what);
        EXPECT_INVALID(cohort_all_gather(g, x, y, 4, dt), g, what);
        EXPECT_INVALID(cohort_gather(g, x, y, 4, dt, 0), g, what);
        EXPECT_INVALID(cohort_scatter(g, y, x, 4, dt, 0), g, what);
        EXPECT_INVALID(cohort_reduce_scatter(g, y, x, 4, dt, COHORT_SUM), g, what);
        EXPECT_INVALID(cohort_all_to_all(g, y, y + 64, 4, dt), g, what);
        EXPECT_INVALID(cohort_send(g, x, 4, dt, (rank + 1) % n, 0), g, what);
        EXPECT_INVALID(cohort_recv(g, x, 4, dt, (rank + 1) % n, 0), g, what);
        EXPECT_INVALID(cohort_all_reduce_async(g, x, y, 4, dt, COHORT_SUM, &w), g, what);
        EXPECT_INVALID(cohort_broadcast_async(g, x, 4, dt, 0, &w), g, what);
        EXPECT_INVALID(cohort_reduce_async(g, x, y, 4, dt, COHORT_SUM, 0, &w), g, what);
        EXPECT_INVALID(cohort_all_gather_async(g, x, y, 4, dt, &w), g, what);
        EXPECT_INVALID(cohort_gather_async(g, x, y, 4, dt, 0, &w), g, what);
        EXPECT_INVALID(cohort_scatter_async(g, y, x, 4, dt, 0, &w), g, what);
        EXPECT_INVALID(cohort_reduce_scatter_async(g, y, x, 4, dt, COHORT_SUM, &w), g, what);
        EXPECT_INVALID(cohort_all_to_all_async(g, y, y + 64, 4, dt, &w), g, what);
        EXPECT_INVALID(cohort_send_async(g, x, 4, dt, (rank + 1) % n, 0, &w), g, what);
        EXPECT_INVALID(cohort_recv_async(g, x, 4, dt, (rank + 1) % n, 0, &w), g, what);
        RANK_CHECK(w == NULL, "work handle set on an invalid call");
        /* Names and sizes of invalid values: defined answers, no crash. */
        RANK_CHECK(cohort_dtype_size(dt) == 0, "dtype_size(%d)", bad_dtypes[i]);
        RANK_CHECK(!strcmp(cohort_dtype_name(dt), "invalid-dtype"), "dtype_name(%d)",
                   bad_dtypes[i]);
    }
    /* Other out-of-range arguments of every kind. */
    EXPECT_INVALID(cohort_broadcast(g, x, 4, COHORT_FLOAT32, -1), g, "root -1");
    EXPECT_INVALID(cohort_broadcast(g, x, 4, COHORT_FLOAT32, n), g, "root n");
    EXPECT_INVALID(cohort_reduce(g, x, y, 4, COHORT_FLOAT32, COHORT_SUM, 1 << 30), g, "root");
    EXPECT_INVALID(cohort_gather(g, x, y, 4, COHORT_FLOAT32, -7), g, "root");
    EXPECT_INVALID(cohort_scatter(g, y, x, 4, COHORT_FLOAT32, n), g, "root");
    EXPECT_INVALID(cohort_send(g, x, 4, COHORT_FLOAT32, -1, 0), g, "peer -1");
    EXPECT_INVALID(cohort_recv(g, x, 4, COHORT_FLOAT32, n, 0), g, "peer n");
    EXPECT_INVALID(cohort_send(g, x, 4, COHORT_FLOAT32, (rank + 1) % n, -1), g, "tag -1");
    EXPECT_INVALID(cohort_all_reduce(g, x, y, (size_t)-1, COHORT_FLOAT32, COHORT_SUM), g,
                   "count");
    /* The count bound, count * size(dtype) * ranks <= SIZE_MAX / 2 (api.c):
     * one past it, and counts whose byte size overflows size_t. */
    size_t past = (SIZE_MAX / 2) / 4 / (size_t)n + 1;
    EXPECT_INVALID(cohort_all_reduce(g, x, y, past, COHORT_FLOAT32, COHORT_SUM), g, "count");
    EXPECT_INVALID(cohort_broadcast(g, x, past, COHORT_FLOAT32, 0), g, "count");
    EXPECT_INVALID(cohort_broadcast(g, x, SIZE_MAX / 4 + 1, COHORT_FLOAT32, 0), g, "count");
    EXPECT_INVALID(cohort_broadcast(g, x, (SIZE_MAX / 2) / (size_t)n + 1, COHORT_UINT8, 0), g,
                   "count");
    EXPECT_INVALID(cohort_broadcast(g, x, SIZE_MAX / 8 + 1, COHORT_FLOAT64, 0), g, "count");
    RANK_CHECK(strstr(cohort_last_error(g), "is too large"), "message '%s'", cohort_last_error(g));
    EXPECT_INVALID(cohort_all_reduce(g, x, y, 4, COHORT_INT32, COHORT_AVG), g, "avg of int");
    EXPECT_INVALID(cohort_all_reduce(g, x, y, 4, COHORT_FLOAT32, COHORT_BXOR), g, "bxor of float");
    int bad_list[] = {0, 0};
    cohort_group *sub = (cohort_group *)&sub;
    EXPECT_INVALID(cohort_new_group(g, bad_list, 2, &sub), g, "duplicate rank");
    RANK_CHECK(sub == NULL, "sub set");
    int oor[] = {n};
    EXPECT_INVALID(cohort_new_group(g, oor, 1, &sub), g, "rank out of range");
    EXPECT_INVALID(cohort_new_group(g, oor, -1, &sub), g, "n -1");
    EXPECT_INVALID(cohort_work_wait(NULL, -1), NULL, "work NULL");

    /* The group is untouched: correct calls succeed with correct data. */
    RANK_PASS(cohort_all_reduce(g, x, y, 64, COHORT_FLOAT32, COHORT_SUM), g);
    RANK_CHECK(y[0] == (float)(n * (n - 1) / 2), "sum %f", (double)y[0]);
    cohort_work *w;
    RANK_PASS(cohort_reduce_scatter_async(g, y, x, 4, COHORT_FLOAT32, COHORT_MAX, &w), g);
    RANK_PASS(cohort_work_wait(w, -1), g);
    cohort_work_free(w);
    RANK_PASS(cohort_barrier(g), g);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(bad_enums_leave_group_usable)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .transport = transports[_i],
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_bad_enums, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* Group-less checks in the test process: names and validation of garbage
 * values answer without crashing. */
START_TEST(bad_values_without_group)
{
    ck_assert_ptr_nonnull(cohort_status_name((cohort_status)-1));
    ck_assert_ptr_nonnull(cohort_status_name((cohort_status)1000));
    ck_assert_ptr_nonnull(cohort_strerror((cohort_status)-5));
    ck_assert_str_eq(cohort_op_name((cohort_op)-1), "invalid-op");
    ck_assert_str_eq(cohort_op_name(COHORT_OP_COUNT), "invalid-op");
    ck_assert_str_eq(cohort_dtype_name((cohort_dtype)-1), "invalid-dtype");
    ck_assert_uint_eq(cohort_dtype_size((cohort_dtype)-1), 0);
    /* The contract validator is public: garbage values produce a report. */
    cohort_fingerprint fp[2];
    memset(fp, 0, sizeof fp);
    fp[0].coll = -5, fp[0].dtype = 999, fp[0].redop = -77;
    fp[1].coll = 1000, fp[1].dtype = -3, fp[1].redop = 1 << 20;
    char msg[512];
    ck_assert_int_eq(cohort_validate_fingerprints(fp, 2, msg, sizeof msg), COHORT_ERR_CONTRACT);
    ck_assert_msg(!strstr(msg, "(null)"), "%s", msg);
    ck_assert_int_eq(cohort_validate_fingerprints(fp, -1, msg, sizeof msg), COHORT_ERR_INVALID);
    /* Group-less collective calls. */
    float x = 0;
    ck_assert_int_eq(cohort_all_reduce(NULL, &x, &x, 1, COHORT_FLOAT32, (cohort_op)-1),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_all_reduce(NULL, &x, &x, 1, COHORT_FLOAT32, COHORT_SUM),
                     COHORT_ERR_INVALID);
}
END_TEST

/* The store API: out-of-range counts and ports are refused, and the handle
 * and server stay usable. */
START_TEST(store_bad_values)
{
    char addr[128];
    cohort_store_server *srv = cht_store_start("j", "t", addr, sizeof addr);
    ck_assert_ptr_nonnull(srv);
    cohort_store *s;
    CHT_PASS(cohort_store_connect(&s, addr, "j", "t", 5000));
    const void *k[1] = {"a"};
    size_t kl[1] = {1};
    void *v[1];
    size_t vl[1];
    int all = 0, which = 0;
    int64_t cnt = 0;
    ck_assert_int_eq(cohort_store_multi_get(s, k, kl, -1, v, vl, 10), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_multi_set(s, k, kl, (const void *const *)k, kl, -3),
                     COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_check(s, k, kl, -1, &all), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_wait(s, k, kl, -1, 10), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_wait_any(s, k, kl, -1, 10, &which), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_barrier(s, "b", 0, 10), COHORT_ERR_INVALID);
    ck_assert_int_eq(cohort_store_barrier(s, "b", -1, 10), COHORT_ERR_INVALID);
    cohort_store_server_opts so = {.port = 70000};
    cohort_store_server *bad = NULL;
    const char *jid = "x", *tok = "y";
    so.job_ids = &jid, so.tokens = &tok, so.n_jobs = 1;
    ck_assert_int_eq(cohort_store_server_start(&bad, &so), COHORT_ERR_INVALID);
    so.port = -1;
    ck_assert_int_eq(cohort_store_server_start(&bad, &so), COHORT_ERR_INVALID);
    so.port = 0, so.n_jobs = -1;
    ck_assert_int_eq(cohort_store_server_start(&bad, &so), COHORT_ERR_INVALID);
    /* Still usable. */
    CHT_PASS(cohort_store_add(s, "c", 1, 2, &cnt));
    ck_assert_int_eq(cnt, 2);
    CHT_PASS(cohort_store_barrier(s, "b", 1, 1000));
    cohort_store_close(s);
    cohort_store_server_stop(srv);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("api_args");
    TCase *tc = tcase_create("api_args");
    tcase_set_timeout(tc, 90);
    tcase_add_loop_test(tc, bad_enums_leave_group_usable, 0, 2);
    tcase_add_test(tc, bad_values_without_group);
    tcase_add_test(tc, store_bad_values);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
