/*
 * test_coll_mixed.c - ranks that pass their buffers differently in one
 * call: some in place (send == recv, or the own block inside recv), the
 * others not; some broadcasting from or into cohort_mem_alloc memory, the
 * others from malloc. Every form is legal per rank (docs/concepts.md), and
 * the paths that look at the buffers (the shm single copy, its
 * descriptors, the one-copy broadcast, the in-place copies aside) decide
 * per call from what every rank publishes, not from this rank's own form.
 * Every op, 8 B to 1 MiB a block, 3 and 4 ranks, shm (the single copy on,
 * and off) and tcp; the data is checked on every rank. Session 38 ran this
 * against the build as it was (no wrong byte) and keeps it so that a path
 * that trusts its own rank's form cannot come in unseen.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cohort.h"
#include "support/support.h"

static int32_t val(int r, size_t i) { return (int32_t)((r + 1) * 1000 + (int)(i % 97)); }

/* The sum over n ranks of element i. */
static int32_t sum(int n, size_t i)
{
    int64_t w = 0;
    for (int r = 0; r < n; r++)
        w += val(r, i);
    return (int32_t)w;
}

static long check_ops(cohort_group *g, int rank, int n, size_t c)
{
    long bad = 0;
    int inplace = rank & 1, root = 1 % n;
    int32_t *in = malloc(c * (size_t)n * 4), *out = malloc(c * (size_t)n * 4);
    RANK_CHECK(in && out, "oom");
    /* all_reduce */
    for (size_t i = 0; i < c; i++)
        in[i] = val(rank, i);
    int32_t *dst = inplace ? in : out;
    RANK_PASS(cohort_all_reduce(g, in, dst, c, COHORT_INT32, COHORT_SUM), g);
    for (size_t i = 0; i < c; i++)
        bad += dst[i] != sum(n, i);
    /* reduce to rank 1 */
    for (size_t i = 0; i < c; i++)
        in[i] = val(rank, i);
    RANK_PASS(cohort_reduce(g, in, dst, c, COHORT_INT32, COHORT_SUM, root), g);
    if (rank == root)
        for (size_t i = 0; i < c; i++)
            bad += dst[i] != sum(n, i);
    /* all_gather: in place, the own block sits in recv */
    for (size_t i = 0; i < c; i++)
        in[i] = out[(size_t)rank * c + i] = val(rank, i);
    RANK_PASS(cohort_all_gather(g, inplace ? out + (size_t)rank * c : in, out, c, COHORT_INT32), g);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < c; i++)
            bad += out[(size_t)r * c + i] != val(r, i);
    /* reduce_scatter: in place, recv is the own block of send */
    for (size_t i = 0; i < c * (size_t)n; i++)
        in[i] = val(rank, i);
    int32_t *rs = inplace ? in + (size_t)rank * c : out;
    RANK_PASS(cohort_reduce_scatter(g, in, rs, c, COHORT_INT32, COHORT_SUM), g);
    for (size_t i = 0; i < c; i++)
        bad += rs[i] != sum(n, (size_t)rank * c + i);
    /* gather to rank 1 (in place where it is odd: the root's block in recv) */
    for (size_t i = 0; i < c; i++)
        in[i] = out[(size_t)rank * c + i] = val(rank, i);
    int ipr = inplace && rank == root;
    RANK_PASS(cohort_gather(g, ipr ? out + (size_t)rank * c : in, out, c, COHORT_INT32, root), g);
    if (rank == root)
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < c; i++)
                bad += out[(size_t)r * c + i] != val(r, i);
    /* scatter from rank 1 */
    for (size_t i = 0; i < c * (size_t)n; i++)
        in[i] = val(rank, i);
    int32_t *sc = ipr ? in + (size_t)rank * c : out;
    RANK_PASS(cohort_scatter(g, in, sc, c, COHORT_INT32, root), g);
    for (size_t i = 0; i < c; i++)
        bad += sc[i] != val(root, (size_t)rank * c + i);
    /* all_to_all */
    for (size_t i = 0; i < c * (size_t)n; i++)
        in[i] = val(rank, i);
    RANK_PASS(cohort_all_to_all(g, in, out, c, COHORT_INT32), g);
    for (int r = 0; r < n; r++)
        for (size_t i = 0; i < c; i++)
            bad += out[(size_t)r * c + i] != val(r, (size_t)rank * c + i);
    free(in);
    free(out);
    return bad;
}

/* Broadcast from each root, the root's buffer and the readers' from
 * cohort_mem_alloc on even ranks, malloc on odd ones. */
static long check_bcast(cohort_group *g, int rank, int n, size_t c)
{
    long bad = 0;
    int32_t *b = NULL;
    int shared = !(rank & 1);
    if (shared)
        RANK_PASS(cohort_mem_alloc(g, c * 4, (void **)&b), g);
    else
        b = malloc(c * 4);
    RANK_CHECK(b, "oom");
    for (int root = 0; root < n; root++) {
        for (size_t i = 0; i < c; i++)
            b[i] = rank == root ? val(root, i) : -1;
        RANK_PASS(cohort_broadcast(g, b, c, COHORT_INT32, root), g);
        for (size_t i = 0; i < c; i++)
            bad += b[i] != val(root, i);
    }
    if (shared)
        RANK_PASS(cohort_mem_free(g, b), g);
    else
        free(b);
    return bad;
}

static int rank_mixed(int rank, void *arg)
{
    (void)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    static const size_t counts[] = {2, 64, 1024, 4096, 16384, 65536, 262144};
    long bad = 0;
    for (int rep = 0; rep < 2; rep++)
        for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
            bad += check_ops(g, rank, n, counts[k]);
            bad += check_bcast(g, rank, n, counts[k]);
            RANK_CHECK(!bad, "rank %d (in place %d): %ld wrong values at %zu elements", rank,
                       rank & 1, bad, counts[k]);
        }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

static const struct {
    int n;
    const char *transport, *env;
} runs[] = {
    {3, "shm", "COHORT_TIMEOUT=20"},
    {4, "shm", "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=on"},
    {4, "shm", "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=off"},
    {2, "shm", "COHORT_TIMEOUT=20;COHORT_SHM_SINGLE_COPY=on"},
    {3, "tcp", "COHORT_TIMEOUT=20"},
};

START_TEST(mixed_buffer_forms)
{
    cht_opts o = {.nranks = runs[_i].n, .deadline_ms = 120000, .transport = runs[_i].transport,
                  .extra_env = runs[_i].env};
    cht_result r;
    cht_run_ranks(&o, rank_mixed, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("coll_mixed");
    TCase *t = tcase_create("mixed");
    tcase_set_timeout(t, 300);
    tcase_add_loop_test(t, mixed_buffer_forms, 0, (int)(sizeof runs / sizeof runs[0]));
    suite_add_tcase(s, t);
    return cht_run_suite(s);
}
