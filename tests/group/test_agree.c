/*
 * test_agree.c - the settings every rank of a group must share
 * (src/group/agree.c), with real ranks (forked processes, real store,
 * real shm and tcp):
 *   - one variable set differently on some ranks: every rank's cohort_init
 *     fails with COHORT_ERR_INVALID within 5 s (scaled), all with the same
 *     message naming the variable, both values and both ranks. Before
 *     session 38 these cases timed out in the tcp connect (COHORT_TRANSPORT),
 *     stalled the first call (COHORT_ALGO_*, COHORT_DEBUG=sync), or failed a
 *     later call as a skipped call or "different algorithms";
 *   - settings that differ only in spelling (auto against unset, the
 *     default written out, COHORT_TCP_OVERSUB on/off with 2 ranks where it
 *     has no effect, auto against on where the machine is oversubscribed),
 *     a host setting that differs between hosts, and the variables each
 *     rank may set alone (single copy, cross-core, spin, buffers,
 *     COHORT_DEBUG=buffers): no error, and the collectives' data is right
 *     (a check that refuses a correct job gets switched off);
 *   - a sub-group made after one rank changed COHORT_ALGO_BROADCAST: the
 *     split fails on every member the same way.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cohort.h"
#include "support/support.h"

#define MSG 1024
static char (*msgs)[MSG]; /* one per rank, shared with the test process */

typedef struct acase {
    const char *var;
    const char *val;    /* on the ranks in mask */
    unsigned mask;
    const char *others; /* on the other ranks; NULL: unset */
    int n;
    const char *transport;
    int pin;            /* every rank on one cpu: the machine oversubscribed */
    const char *want;   /* mismatch: the message holds this; NULL: no error */
} acase;

static const acase mismatch[] = {
    {"COHORT_TRANSPORT", "tcp", 1u << 1, NULL, 2, NULL, 0,
     "rank 0 has COHORT_TRANSPORT=auto, rank 1 COHORT_TRANSPORT=tcp; every rank of a group"},
    {"COHORT_TRANSPORT", "shm", 1u << 0, "tcp", 3, NULL, 0,
     "rank 0 has COHORT_TRANSPORT=shm, rank 1 COHORT_TRANSPORT=tcp"},
    {"COHORT_ALGO_ALL_REDUCE", "ring", 1u << 2, NULL, 3, "tcp", 0,
     "rank 0 has COHORT_ALGO_ALL_REDUCE=auto, rank 2 COHORT_ALGO_ALL_REDUCE=ring"},
    {"COHORT_ALGO_BROADCAST", "tree", 1u << 0, "flat", 3, "tcp", 0,
     "rank 0 has COHORT_ALGO_BROADCAST=tree, rank 1 COHORT_ALGO_BROADCAST=flat"},
    {"COHORT_ALGO_ALL_REDUCE", "shm", 1u << 0, "ring", 2, NULL, 0,
     "rank 0 has COHORT_ALGO_ALL_REDUCE=shm, rank 1 COHORT_ALGO_ALL_REDUCE=ring"},
    {"COHORT_DEBUG", "sync", 1u << 0, NULL, 2, NULL, 0,
     "rank 0 has COHORT_DEBUG=sync, rank 1 COHORT_DEBUG without sync"},
    {"COHORT_DEBUG", "sync,buffers", 1u << 1, "buffers", 2, "tcp", 0,
     "rank 0 has COHORT_DEBUG without sync, rank 1 COHORT_DEBUG=sync"},
    {"COHORT_CHUNK_BYTES", "4096", 1u << 1, NULL, 2, "tcp", 0,
     "rank 0 has COHORT_CHUNK_BYTES unset, rank 1 COHORT_CHUNK_BYTES=4096"},
    {"COHORT_CHUNK_BYTES", "4096", 1u << 1, "8192", 2, "tcp", 0,
     "rank 0 has COHORT_CHUNK_BYTES=8192, rank 1 COHORT_CHUNK_BYTES=4096"},
    {"COHORT_CONTRACT", "off", 1u << 1, NULL, 2, NULL, 0,
     "rank 0 has COHORT_CONTRACT=on, rank 1 COHORT_CONTRACT=off"},
    {"COHORT_CONTRACT", "off", 1u << 1, NULL, 2, "tcp", 0,
     "rank 0 has COHORT_CONTRACT=on, rank 1 COHORT_CONTRACT=off"},
    {"COHORT_TCP_OVERSUB", "on", 1u << 0, "off", 3, "tcp", 0,
     "rank 0 has COHORT_TCP_OVERSUB=on, rank 1 COHORT_TCP_OVERSUB=off"},
    {"COHORT_TCP_OVERSUB", "off", 1u << 2, NULL, 3, "tcp", 1,
     "rank 0 has COHORT_TCP_OVERSUB=auto (on for this group), rank 2 COHORT_TCP_OVERSUB=off"},
    {"COHORT_SHM_BAR_SCATTER", "0", 1u << 3, NULL, 4, NULL, 0,
     "rank 0 has COHORT_SHM_BAR_SCATTER=1, rank 3 COHORT_SHM_BAR_SCATTER=0; every rank of a host"},
};

static const acase agree[] = {
    {"COHORT_TRANSPORT", "auto", 1u << 0, NULL, 2, NULL, 0, NULL},
    {"COHORT_ALGO_ALL_REDUCE", "auto", 1u << 1, NULL, 3, NULL, 0, NULL},
    {"COHORT_ALGO_BROADCAST", "tree", 7u, NULL, 3, "tcp", 0, NULL},
    {"COHORT_CONTRACT", "on", 1u << 0, NULL, 2, NULL, 0, NULL},
    {"COHORT_CHUNK_BYTES", "4096", 3u, NULL, 2, "tcp", 0, NULL},
    {"COHORT_SHM_BAR_SCATTER", "1", 1u << 1, NULL, 4, NULL, 0, NULL},
    {"COHORT_TCP_OVERSUB", "on", 1u << 0, "off", 2, "tcp", 0, NULL},
    {"COHORT_TCP_OVERSUB", "on", 1u << 1, NULL, 3, "tcp", 1, NULL},
    {"COHORT_DEBUG", "buffers", 1u << 0, NULL, 2, NULL, 0, NULL},
    {"COHORT_SHM_SINGLE_COPY", "off", 1u << 0, "on", 2, NULL, 0, NULL},
    {"COHORT_SHM_SINGLE_COPY", "on", 1u << 1, NULL, 4, NULL, 0, NULL},
    {"COHORT_SHM_XCORE", "near", 1u << 0, "far", 2, NULL, 0, NULL},
    /* the lead's far on both: the ring's verdict sends run_checked's 16 KiB
     * broadcast to the single copy on both ranks where the copy is dear */
    {"COHORT_SHM_XCORE", "far", 1u << 0, "near", 2, NULL, 0, NULL},
    {"COHORT_SHM_MEM", "off", 1u << 1, NULL, 2, NULL, 0, NULL},
    {"COHORT_SHM_SPIN_US", "0", 1u << 0, "200", 4, NULL, 0, NULL},
    {"COHORT_SHM_AR_INLINE", "0", 1u << 2, NULL, 4, NULL, 0, NULL},
    {"COHORT_SHM_RING_DRAIN", "1", 1u << 1, NULL, 4, NULL, 0, NULL},
    {"COHORT_TCP_BUFSIZE", "65536", 1u << 0, NULL, 2, "tcp", 0, NULL},
};

static void set_for(const acase *c, int rank)
{
    const char *v = c->mask >> rank & 1u ? c->val : c->others;
    if (v)
        setenv(c->var, v, 1);
    else
        unsetenv(c->var);
}

static int rank_mismatch(int rank, void *arg)
{
    const acase *c = arg;
    if (c->pin)
        RANK_CHECK(cht_pin_one_cpu() == 0, "pin");
    set_for(c, rank);
    cohort_group *g = NULL;
    double t0 = cht_now_ms();
    cohort_status st = cohort_init(&g);
    double dt = cht_now_ms() - t0;
    const char *m = cohort_last_error(NULL);
    snprintf(msgs[rank], MSG, "%s", m);
    RANK_CHECK(st == COHORT_ERR_INVALID, "%s=%s: rank %d: %s: %s", c->var, c->val, rank,
               cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "rendezvous of group 0 (generation 1): the ranks run with different "
                         "settings: ") && strstr(m, c->want),
               "rank %d: %s", rank, m);
    RANK_CHECK(dt < 5000 * cht_time_scale(), "rank %d: init took %.0f ms", rank, dt);
    return 0;
}

START_TEST(mismatch_fails_init_on_every_rank)
{
    const acase *c = &mismatch[_i];
    cht_opts o = {.nranks = c->n, .deadline_ms = 60000, .transport = c->transport,
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    memset(msgs, 0, 64 * MSG);
    cht_run_ranks(&o, rank_mismatch, (void *)c, &r);
    cht_assert_all_ok(&r);
    for (int k = 1; k < c->n; k++)
        ck_assert_msg(!strcmp(msgs[0], msgs[k]), "rank 0: %s\nrank %d: %s", msgs[0], k, msgs[k]);
}
END_TEST

static int32_t val(int rank, size_t i) { return (int32_t)((rank + 1) * 1000 + (int)(i % 89)); }

/* Calls whose paths the per-rank variables steer (single copy from 64 KiB,
 * the ring, the led barrier), each checked. */
static void run_checked(cohort_group *g, int rank)
{
    int n = cohort_size(g);
    size_t counts[] = {1, 4096, 300000};
    for (size_t ci = 0; ci < 3; ci++) {
        size_t c = counts[ci];
        int32_t *in = malloc(c * (size_t)n * sizeof *in), *out = malloc(c * (size_t)n * sizeof *out);
        RANK_CHECK(in && out, "oom");
        for (size_t i = 0; i < c * (size_t)n; i++)
            in[i] = val(rank, i);
        RANK_PASS(cohort_all_reduce(g, in, out, c, COHORT_INT32, COHORT_SUM), g);
        for (size_t i = 0; i < c; i++) {
            int64_t want = 0;
            for (int r = 0; r < n; r++)
                want += val(r, i);
            RANK_CHECK(out[i] == (int32_t)want, "all_reduce c=%zu i=%zu", c, i);
        }
        memcpy(out, in, c * sizeof *in);
        RANK_PASS(cohort_broadcast(g, out, c, COHORT_INT32, n - 1), g);
        for (size_t i = 0; i < c; i++)
            RANK_CHECK(out[i] == val(n - 1, i), "broadcast c=%zu i=%zu", c, i);
        RANK_PASS(cohort_barrier(g), g);
        RANK_PASS(cohort_scatter(g, in, out, c, COHORT_INT32, 0), g);
        for (size_t i = 0; i < c; i++)
            RANK_CHECK(out[i] == val(0, (size_t)rank * c + i), "scatter c=%zu i=%zu", c, i);
        RANK_PASS(cohort_all_gather(g, in, out, c, COHORT_INT32), g);
        for (int r = 0; r < n; r++)
            for (size_t i = 0; i < c; i++)
                RANK_CHECK(out[(size_t)r * c + i] == val(r, i), "all_gather c=%zu", c);
        free(in);
        free(out);
    }
}

static int rank_agree(int rank, void *arg)
{
    const acase *c = arg;
    if (c->pin)
        RANK_CHECK(cht_pin_one_cpu() == 0, "pin");
    set_for(c, rank);
    cohort_group *g = NULL;
    cohort_status st = cohort_init(&g);
    RANK_CHECK(st == COHORT_OK, "%s: rank %d: %s: %s", c->var, rank, cohort_status_name(st),
               cohort_last_error(NULL));
    run_checked(g, rank);
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(same_in_effect_runs)
{
    const acase *c = &agree[_i];
    cht_opts o = {.nranks = c->n, .deadline_ms = 60000, .transport = c->transport,
                  .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    cht_run_ranks(&o, rank_agree, (void *)c, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* A sub-group is a rendezvous too: its settings are what the process's
 * environment holds when it is made. */
static int rank_split(int rank, void *arg)
{
    (void)arg;
    cohort_group *g = NULL, *sub = NULL;
    RANK_PASS(cohort_init(&g), NULL);
    if (rank == 1)
        setenv("COHORT_ALGO_BROADCAST", "flat", 1);
    double t0 = cht_now_ms();
    cohort_status st = cohort_split(g, 0, rank, &sub);
    double dt = cht_now_ms() - t0;
    const char *m = cohort_last_error(g);
    snprintf(msgs[rank], MSG, "%s", m);
    RANK_CHECK(st == COHORT_ERR_INVALID, "rank %d: split: %s: %s", rank, cohort_status_name(st), m);
    RANK_CHECK(strstr(m, "rank 0 has COHORT_ALGO_BROADCAST=auto, rank 1 COHORT_ALGO_BROADCAST=flat"),
               "rank %d: %s", rank, m);
    RANK_CHECK(dt < 5000 * cht_time_scale(), "rank %d: split took %.0f ms", rank, dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(split_compares_too)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = "COHORT_TIMEOUT=20"};
    cht_result r;
    memset(msgs, 0, 64 * MSG);
    cht_run_ranks(&o, rank_split, NULL, &r);
    cht_assert_all_ok(&r);
    for (int k = 1; k < 3; k++) {
        /* the same difference on every member (the prefix names the sub-group) */
        const char *a = strstr(msgs[0], "the ranks run"), *b = strstr(msgs[k], "the ranks run");
        ck_assert_msg(a && b && !strcmp(a, b), "rank 0: %s\nrank %d: %s", msgs[0], k, msgs[k]);
    }
}
END_TEST

int main(void)
{
    msgs = mmap(NULL, 64 * MSG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (msgs == MAP_FAILED)
        return 1;
    Suite *s = suite_create("agree");
    TCase *t = tcase_create("agree");
    tcase_set_timeout(t, 300);
    tcase_add_loop_test(t, mismatch_fails_init_on_every_rank, 0,
                        (int)(sizeof mismatch / sizeof mismatch[0]));
    tcase_add_loop_test(t, same_in_effect_runs, 0, (int)(sizeof agree / sizeof agree[0]));
    tcase_add_test(t, split_compares_too);
    suite_add_tcase(s, t);
    return cht_run_suite(s);
}
