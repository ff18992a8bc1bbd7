/*
 * test_cpuset.c - a machine's cpus are the union of its ranks' cpu sets
 * (group/init.c coh_machine_cpus; the rendezvous record's seventh field,
 * group/record.h), not its online cpus: the launch habits that bind ranks
 * (srun with a cgroup cpuset, mpirun --bind-to core, taskset, numactl).
 * Real processes; each rank sets its affinity before cohort_init, as the
 * launcher would have. The test first keeps to two cpus c0, c1 of those it
 * may use (skipped with fewer), so the counts are exact on any machine:
 *   - 2 ranks both on c0 (taskset -c c0): 1 cpu, oversubscribed (g->oversub,
 *     the shm waits' and rings' rule, the tcp spin default 20 us), and
 *     cohort_describe says "ranks outnumber cpus";
 *   - 2 ranks on {c0, c1} (unbound): 2 cpus, not oversubscribed;
 *   - rank 0 on c0, rank 1 on c1 (--bind-to core): 2 cpus, not (the rule
 *     before counted one rank's own mask: 2 ranks on 1 cpu);
 *   - 3 ranks, two on c0 and one on c1: 2 cpus, oversubscribed;
 * over shm and over tcp, and a sub-group of all ranks and one of a single
 * rank count their own members' sets; collectives run right in each.
 */
#include <check.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "core/group.h"
#include "support/support.h"
#include "transport/shm/shm_seg.h"
#include "transport/tcp/tcp.h"

static int c0 = -1, c1 = -1;

typedef struct ccase {
    const char *name;
    int n;
    int bind[3]; /* per rank: 0 on c0, 1 on c1, 2 on both */
    long cpus;   /* the machine's cpus every rank must find */
    int oversub;
} ccase;

static const ccase cases[] = {
    {"2 ranks on c0 (taskset -c c0)", 2, {0, 0}, 1, 1},
    {"2 ranks on c0,c1 (unbound)", 2, {2, 2}, 2, 0},
    {"rank 0 on c0, rank 1 on c1 (bound apart)", 2, {0, 1}, 2, 0},
    {"3 ranks: two on c0, one on c1", 3, {0, 1, 0}, 2, 1},
};

typedef struct {
    const ccase *c;
    int tcp;
} carg;

static int bind_to(int which)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    if (which != 1)
        CPU_SET(c0, &s);
    if (which != 0)
        CPU_SET(c1, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

static int rank_fn(int rank, void *arg)
{
    const carg *a = arg;
    const ccase *c = a->c;
    RANK_CHECK(bind_to(c->bind[rank]) == 0, "rank %d: sched_setaffinity", rank);
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    RANK_CHECK(g->machine_cpus == c->cpus && g->machine_cpus_sets == 1,
               "%s: rank %d: machine cpus %ld (from sets %d), expected %ld", c->name, rank,
               g->machine_cpus, g->machine_cpus_sets, c->cpus);
    RANK_CHECK(g->oversub == c->oversub, "%s: rank %d: oversub %d", c->name, rank, g->oversub);
    RANK_CHECK(g->machine_size == c->n, "%s: machine size %d", c->name, g->machine_size);
    if (a->tcp) {
        RANK_CHECK(!g->shm && g->net, "%s: not over tcp", c->name);
        uint64_t want = (c->oversub ? 20 : 200) * 1000ull;
        RANK_CHECK(coh_net_spin_ns(g->net) == want, "%s: rank %d: tcp spin %llu ns, expected %llu",
                   c->name, rank, (unsigned long long)coh_net_spin_ns(g->net),
                   (unsigned long long)want);
    } else {
        RANK_CHECK(g->shm, "%s: no shm", c->name);
        RANK_CHECK(g->shm->oversub == c->oversub, "%s: rank %d: shm oversub %d", c->name, rank,
                   g->shm->oversub);
    }
    char d[1024], want[128];
    RANK_PASS(cohort_describe(g, "broadcast", 8, COHORT_UINT8, d, sizeof d), g);
    snprintf(want, sizeof want, "this machine: %d ranks on %ld cpus (their cpu sets)%s", c->n,
             c->cpus, c->oversub ? ": ranks outnumber cpus" : ")");
    RANK_CHECK(strstr(d, want), "%s: rank %d: describe says\n%s\nnot '%s'", c->name, rank, d, want);
    /* the data moves right, whatever the counts chose */
    for (int i = 0; i < 20; i++) {
        int v[64];
        for (int j = 0; j < 64; j++)
            v[j] = rank == i % c->n ? i * 1000 + j : -1;
        RANK_PASS(cohort_broadcast(g, v, 64, COHORT_INT32, i % c->n), g);
        for (int j = 0; j < 64; j++)
            RANK_CHECK(v[j] == i * 1000 + j, "%s: broadcast %d [%d] = %d", c->name, i, j, v[j]);
        int s = rank + i;
        RANK_PASS(cohort_all_reduce(g, &s, &s, 1, COHORT_INT32, COHORT_SUM), g);
        RANK_CHECK(s == c->n * (c->n - 1) / 2 + c->n * i, "%s: all_reduce %d = %d", c->name, i, s);
        RANK_PASS(cohort_barrier(g), g);
    }
    /* sub-groups count their members' sets: all ranks (the same), and
     * each rank alone (its own set; one rank never oversubscribes) */
    cohort_group *all = NULL, *alone = NULL;
    RANK_PASS(cohort_split(g, 0, rank, &all), g);
    RANK_CHECK(all->machine_cpus == c->cpus && all->oversub == c->oversub,
               "%s: rank %d: sub-group of all: cpus %ld oversub %d", c->name, rank,
               all->machine_cpus, all->oversub);
    RANK_PASS(cohort_split(g, rank, 0, &alone), g);
    long mine = c->bind[rank] == 2 ? 2 : 1;
    RANK_CHECK(alone->machine_cpus == mine && !alone->oversub,
               "%s: rank %d: sub-group of one: cpus %ld oversub %d", c->name, rank,
               alone->machine_cpus, alone->oversub);
    int s = 1;
    RANK_PASS(cohort_all_reduce(all, &s, &s, 1, COHORT_INT32, COHORT_SUM), all);
    RANK_CHECK(s == c->n, "%s: sub-group all_reduce %d", c->name, s);
    cohort_finalize(alone);
    cohort_finalize(all);
    cohort_finalize(g);
    return 0;
}

static int two_cpus(void)
{
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0)
        return 0;
    c0 = c1 = -1;
    for (int c = 0; c < CPU_SETSIZE && c1 < 0; c++)
        if (CPU_ISSET(c, &all)) {
            if (c0 < 0)
                c0 = c;
            else
                c1 = c;
        }
    return c1 >= 0;
}

START_TEST(test_sets)
{
    if (!two_cpus()) {
        fprintf(stderr, "test_sets: fewer than 2 cpus; SKIPPED\n");
        return;
    }
    carg a = {&cases[_i / 2], _i % 2};
    cht_opts o = {.nranks = a.c->n, .deadline_ms = 90000, .transport = a.tcp ? "tcp" : NULL,
                  .extra_env = "COHORT_TIMEOUT=60"};
    cht_result r;
    cht_run_ranks(&o, rank_fn, &a, &r);
    for (int i = 0; i < r.n; i++)
        ck_assert_msg(r.status[i] == 0 && !r.hung[i], "%s (%s): rank %d: %s %d", a.c->name,
                      a.tcp ? "tcp" : "shm", i, r.hung[i] ? "hung" : "exit", r.status[i]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("cpuset");
    TCase *t = tcase_create("cpuset");
    tcase_set_timeout(t, 120);
    tcase_add_loop_test(t, test_sets, 0, 2 * (int)(sizeof cases / sizeof cases[0]));
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
