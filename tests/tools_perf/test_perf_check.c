/*
 * test_perf_check.c - unit tests of cohort-perf's result checker
 * (tools/cohort-perf/perf_check.c, compiled in): a correct output of every
 * op passes; one wrong element anywhere (first, middle of a later block,
 * last) fails and is named; -0 where +0 is expected passes; inputs that
 * changed fail. Outputs are built here independently, by simulating each
 * collective on float64 copies of every rank's input.
 */
#include <math.h>
#include <string.h>

#include "perf.h"
#include "support/support.h"

#define N 3
#define C 5003 /* per-rank count: several 4 KiB blocks, not a multiple of any period */

static double in_of(cohort_op op, int r, size_t i)
{
    double v;
    perf_fill(&v, COHORT_FLOAT64, op, r, i, 1);
    return v;
}

static double fold_of(cohort_op op, size_t i)
{
    double acc = in_of(op, 0, i);
    for (int r = 1; r < N; r++) {
        double v = in_of(op, r, i);
        acc = op == COHORT_SUM    ? acc + v
              : op == COHORT_PROD ? acc * v
              : op == COHORT_MAX  ? fmax(acc, v)
                                  : fmin(acc, v);
    }
    return acc;
}

static void store(void *buf, cohort_dtype dt, size_t i, double v)
{
    if (dt == COHORT_FLOAT32)
        ((float *)buf)[i] = (float)v;
    else
        ((int32_t *)buf)[i] = (int32_t)v;
}

/* Builds rank `rank`'s correct send and recv for op (root 0). */
static void simulate(enum perf_op op, cohort_dtype dt, cohort_op redop, int rank, void *send,
                     void *recv)
{
    size_t total = (size_t)C * N;
    int root = 0;
    switch (op) {
    case OP_ALL_REDUCE:
    case OP_REDUCE:
        perf_fill(send, dt, redop, rank, 0, C);
        for (size_t i = 0; i < C; i++)
            store(recv, dt, i, (op == OP_ALL_REDUCE || rank == root) ? fold_of(redop, i) : 0);
        break;
    case OP_BROADCAST:
        perf_fill(recv, dt, redop, root, 0, C);
        break;
    case OP_ALL_GATHER:
    case OP_GATHER:
        perf_fill(send, dt, redop, rank, 0, C);
        for (size_t k = 0; k < total; k++)
            store(recv, dt, k, in_of(redop, (int)(k / C), k % C));
        break;
    case OP_SCATTER:
        perf_fill(send, dt, redop, rank, 0, total);
        for (size_t j = 0; j < C; j++)
            store(recv, dt, j, in_of(redop, root, (size_t)rank * C + j));
        break;
    case OP_REDUCE_SCATTER:
        perf_fill(send, dt, redop, rank, 0, total);
        for (size_t j = 0; j < C; j++)
            store(recv, dt, j, fold_of(redop, (size_t)rank * C + j));
        break;
    case OP_ALL_TO_ALL:
        perf_fill(send, dt, redop, rank, 0, total);
        for (size_t k = 0; k < total; k++)
            store(recv, dt, k, in_of(redop, (int)(k / C), (size_t)rank * C + k % C));
        break;
    case OP_SENDRECV:
        perf_fill(send, dt, redop, rank, 0, C);
        perf_fill(recv, dt, redop, rank ^ 1, 0, C);
        break;
    default:
        break;
    }
}

static size_t out_elems(enum perf_op op)
{
    return (op == OP_ALL_GATHER || op == OP_GATHER || op == OP_ALL_TO_ALL) ? (size_t)C * N : C;
}

static const enum perf_op ops[] = {OP_ALL_REDUCE,     OP_REDUCE,     OP_BROADCAST,
                                   OP_ALL_GATHER,     OP_GATHER,     OP_SCATTER,
                                   OP_REDUCE_SCATTER, OP_ALL_TO_ALL, OP_SENDRECV};
static const struct {
    cohort_dtype dt;
    cohort_op op;
} kinds[] = {
    {COHORT_FLOAT32, COHORT_SUM}, {COHORT_INT32, COHORT_PROD}, {COHORT_FLOAT32, COHORT_MAX}};

START_TEST(test_correct_passes_wrong_fails)
{
    enum perf_op op = ops[_i];
    static float sendf[C * N], recvf[C * N];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        cohort_dtype dt = kinds[k].dt;
        cohort_op redop = kinds[k].op;
        for (int rank = 0; rank < N; rank++) {
            if (op == OP_SENDRECV && rank == 2)
                continue; /* the odd rank out has no partner */
            char msg[256];
            simulate(op, dt, redop, rank, sendf, recvf);
            size_t bad = perf_verify(op, sendf, recvf, C, dt, redop, 0, rank, N, msg, sizeof msg);
            ck_assert_msg(bad == 0, "op %d kind %zu rank %d: %zu wrong on a correct output: %s",
                          (int)op, k, rank, bad, msg);
            if ((op == OP_REDUCE || op == OP_GATHER) && rank != 0)
                continue; /* non-roots have no output to check */
            size_t n_out = out_elems(op);
            size_t where[] = {0, n_out / 2 + 7, n_out - 1};
            for (size_t w = 0; w < 3; w++) {
                simulate(op, dt, redop, rank, sendf, recvf);
                ((uint32_t *)recvf)[where[w]] ^= 0x00400000u; /* a wrong value, not NaN */
                bad = perf_verify(op, sendf, recvf, C, dt, redop, 0, rank, N, msg, sizeof msg);
                ck_assert_msg(bad == 1, "op %d kind %zu rank %d: element %zu wrong, %zu reported",
                              (int)op, k, rank, where[w], bad);
                char idx[32];
                snprintf(idx, sizeof idx, "element %zu:", where[w]);
                ck_assert_msg(strstr(msg, idx), "op %d: message does not name %s: %s", (int)op, idx,
                              msg);
            }
        }
    }
}
END_TEST

/* An input the library wrote to (out of place) is a failure too. */
START_TEST(test_changed_input_fails)
{
    static float sendf[C * N], recvf[C * N];
    char msg[256];
    simulate(OP_ALL_REDUCE, COHORT_FLOAT32, COHORT_SUM, 1, sendf, recvf);
    sendf[C - 1] += 1;
    size_t bad = perf_verify(OP_ALL_REDUCE, sendf, recvf, C, COHORT_FLOAT32, COHORT_SUM, 0, 1, N,
                             msg, sizeof msg);
    ck_assert_uint_eq(bad, 1);
    ck_assert_msg(strstr(msg, "send (must be unchanged)"), "%s", msg);
}
END_TEST

/* -0 where the exact result is +0 is the same number: accepted. */
START_TEST(test_negative_zero_accepted)
{
    static float sendf[C * N], recvf[C * N];
    char msg[256];
    simulate(OP_BROADCAST, COHORT_FLOAT32, COHORT_SUM, 1, sendf, recvf);
    size_t zeros = 0;
    for (size_t i = 0; i < C; i++)
        if (recvf[i] == 0) {
            recvf[i] = -0.0f;
            zeros++;
        }
    ck_assert_msg(zeros > 0, "the pattern has no zeros; pick another case");
    size_t bad = perf_verify(OP_BROADCAST, sendf, recvf, C, COHORT_FLOAT32, COHORT_SUM, 0, 1, N,
                             msg, sizeof msg);
    ck_assert_msg(bad == 0, "%zu wrong: %s", bad, msg);
}
END_TEST

/* The fill is the pattern element by element, also from an offset. */
START_TEST(test_fill_matches_elementwise)
{
    static int32_t a[20000];
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        perf_fill(a, COHORT_INT32, kinds[k].op, 2, 777, 20000);
        for (size_t i = 0; i < 20000; i += 1)
            ck_assert_int_eq(a[i], (int32_t)in_of(kinds[k].op, 2, 777 + i));
    }
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("perf_check");
    TCase *tc = tcase_create("checker");
    tcase_set_timeout(tc, 30);
    tcase_add_loop_test(tc, test_correct_passes_wrong_fails, 0, (int)(sizeof ops / sizeof ops[0]));
    tcase_add_test(tc, test_changed_input_fails);
    tcase_add_test(tc, test_negative_zero_accepted);
    tcase_add_test(tc, test_fill_matches_elementwise);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(suite)
