/* test_multinode.c - cohortrun with several node agents: two launcher
 * processes on loopback (and in two network namespaces joined by veth pairs
 * and a bridge), coordinating generations, failures and completion through
 * the store node 0 hosts. Also: the store the launcher hosts outlives worker
 * restarts and refuses a client of an older generation. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "support/support.h"

#define DEADLINE 30000
#define TOKEN "multinode-test-token-0123456789"

static const char *const node_env[] = {"COHORT_TOKEN=" TOKEN, NULL};

/* The test's own store server for job (--store: no node hosts one), bound
 * on port 0 so nothing is chosen ahead; its host:port in addr, its URL in url. */
static cohort_store_server *ext_store(const char *job, char *addr, size_t alen, char *url,
                                      size_t ulen)
{
    cohort_store_server *srv = cht_store_start(job, TOKEN, addr, alen);
    ck_assert_ptr_nonnull(srv);
    snprintf(url, ulen, "tcp://%s", addr);
    return srv;
}

/* A fresh job id per launch (the agents must share it). */
static const char *new_job(void)
{
    static char j[64];
    static int n;
    snprintf(j, sizeof j, "mn-%d-%d", (int)getpid(), ++n);
    return j;
}

/* Starts node `node` of a 2-node job: extra args, then the program args. */
static void start_node(crun_proc *p, int node, const char *master, const char *job,
                       char *const *extra, char *const *prog)
{
    char *argv[40];
    int k = 0;
    static char nodes[2][8];
    snprintf(nodes[node], sizeof nodes[node], "%d", node);
    argv[k++] = crun_launcher_path();
    argv[k++] = "--nnodes";
    argv[k++] = "2";
    argv[k++] = "--node-rank";
    argv[k++] = nodes[node];
    argv[k++] = "-n";
    argv[k++] = "2";
    argv[k++] = "--job-id";
    argv[k++] = (char *)job;
    argv[k++] = "--join-timeout-ms";
    argv[k++] = "20000";
    if (master) {
        argv[k++] = "--master";
        argv[k++] = (char *)master;
    }
    for (int i = 0; extra && extra[i]; i++)
        argv[k++] = extra[i];
    argv[k++] = crun_probe_path();
    for (int i = 0; prog[i]; i++)
        argv[k++] = prog[i];
    argv[k] = NULL;
    crun_start(p, argv, node_env);
}

static void dump2(crun_proc *p)
{
    for (int i = 0; i < 2; i++)
        fprintf(stderr, "---- node %d stdout ----\n%s---- node %d stderr ----\n%s", i, p[i].obuf, i,
                p[i].ebuf);
}

static void finish2(crun_proc *p, int want0, int want1)
{
    int a = crun_finish(&p[0], DEADLINE), b = crun_finish(&p[1], DEADLINE);
    if (a != want0 || b != want1)
        dump2(p);
    ck_assert_int_eq(a, want0);
    ck_assert_int_eq(b, want1);
}

static void master_loopback(char *buf, size_t len)
{
    /* The agents must know node 0's port before it starts: the one place a
     * free port is chosen ahead (the test bed's helper). */
    snprintf(buf, len, "127.0.0.1:%d", cht_free_port());
}

static void check_global_ranks(crun_proc *p, const char *master_addr)
{
    for (int r = 0; r < 4; r++) {
        char want[128];
        snprintf(want, sizeof want, "[%d] RANK=%d WORLD_SIZE=4 LOCAL_RANK=%d LOCAL_WORLD_SIZE=2 "
                                    "GROUP_RANK=%d MASTER_ADDR=%s ",
                 r, r, r % 2, r / 2, master_addr);
        ck_assert_msg(strstr(p[r / 2].obuf, want) != NULL, "node %d lacks '%s'", r / 2, want);
    }
    /* One job, one store. */
    ck_assert_int_eq(crun_count(p[0].obuf, "COHORT_GENERATION=1 "), 2);
    ck_assert_int_eq(crun_count(p[1].obuf, "COHORT_GENERATION=1 "), 2);
    const char *s0 = strstr(p[0].obuf, "COHORT_STORE="), *s1 = strstr(p[1].obuf, "COHORT_STORE=");
    ck_assert(s0 && s1);
    ck_assert_int_eq(strncmp(s0, s1, strcspn(s0, " ")), 0);
}

START_TEST(two_nodes_loopback_global_ranks)
{
    char master[64];
    master_loopback(master, sizeof master);
    const char *job = new_job();
    char *prog[] = {"env", NULL};
    crun_proc p[2];
    start_node(&p[0], 0, master, job, NULL, prog);
    start_node(&p[1], 1, master, job, NULL, prog);
    finish2(p, 0, 0);
    check_global_ranks(p, "127.0.0.1");
    char want[96];
    snprintf(want, sizeof want, "COHORT_STORE=tcp://%s ", master);
    ck_assert_int_eq(crun_count(p[1].obuf, want), 2);
    crun_free(&p[0]);
    crun_free(&p[1]);
}
END_TEST

/* With --store, no node hosts: the test's own server does (bound on port 0,
 * so nothing is chosen ahead). */
START_TEST(two_nodes_external_store)
{
    char addr[64], url[96];
    const char *job = new_job();
    cohort_store_server *srv = ext_store(job, addr, sizeof addr, url, sizeof url);
    char *extra[] = {"--store", url, NULL};
    char *prog[] = {"env", NULL};
    crun_proc p[2];
    start_node(&p[0], 0, NULL, job, extra, prog);
    start_node(&p[1], 1, NULL, job, extra, prog);
    finish2(p, 0, 0);
    check_global_ranks(p, "127.0.0.1");
    crun_free(&p[0]);
    crun_free(&p[1]);
    cohort_store_server_stop(srv);
}
END_TEST

START_TEST(failure_on_one_node_restarts_every_node)
{
    char master[64];
    master_loopback(master, sizeof master);
    const char *job = new_job();
    char *extra[] = {"--max-restarts", "2", NULL};
    char *prog[] = {"flaky", "3", "2", NULL}; /* rank 3 (node 1) fails twice */
    crun_proc p[2];
    start_node(&p[0], 0, master, job, extra, prog);
    start_node(&p[1], 1, master, job, extra, prog);
    finish2(p, 0, 0);
    /* Node 0 restarted too, each time under the next generation. */
    ck_assert_int_eq(crun_count(p[0].obuf, "generation 3 restart 2\n"), 2);
    ck_assert_int_eq(crun_count(p[1].obuf, "generation 3 restart 2\n"), 2);
    ck_assert_int_eq(crun_count(p[0].obuf, "generation 4"), 0);
    ck_assert_ptr_nonnull(strstr(p[0].ebuf, "rank 3 on node 1 failed first: exited with code 9 "
                                            "(generation 1)"));
    ck_assert_ptr_nonnull(strstr(p[0].ebuf, "restart 2 of 2, generation 3"));
    ck_assert_ptr_nonnull(strstr(p[1].ebuf, "cohortrun: | flaky failure in generation 2"));
    crun_free(&p[0]);
    crun_free(&p[1]);
}
END_TEST

START_TEST(failure_without_restart_stops_every_node)
{
    char master[64];
    master_loopback(master, sizeof master);
    const char *job = new_job();
    char *prog[] = {"exit", "4", "2", "3", NULL}; /* rank 2 (node 1) exits 4 */
    crun_proc p[2];
    start_node(&p[0], 0, master, job, NULL, prog);
    start_node(&p[1], 1, master, job, NULL, prog);
    finish2(p, 4, 4);
    ck_assert_ptr_nonnull(strstr(p[0].ebuf, "rank 2 on node 1 failed first: exited with code 4"));
    ck_assert_ptr_nonnull(strstr(p[0].ebuf, "stopped 2 other worker(s) on this node"));
    ck_assert_ptr_nonnull(strstr(p[1].ebuf, "rank 2 failed first: exited with code 4"));
    ck_assert_ptr_nonnull(strstr(p[1].ebuf, "cohortrun: | rank 2 err line 3"));
    crun_free(&p[0]);
    crun_free(&p[1]);
}
END_TEST

START_TEST(interrupt_on_one_node_stops_every_node)
{
    char master[64];
    master_loopback(master, sizeof master);
    const char *job = new_job();
    char *extra[] = {"--max-restarts", "3", NULL};
    char *prog[] = {"trap", NULL};
    crun_proc p[2];
    start_node(&p[0], 0, master, job, extra, prog);
    start_node(&p[1], 1, master, job, extra, prog);
    ck_assert(crun_wait_text(&p[0], "ready", 2, 0, DEADLINE));
    ck_assert(crun_wait_text(&p[1], "ready", 2, 0, DEADLINE));
    kill(p[1].pid, SIGINT);
    /* No restart after an interrupt, on either node. */
    finish2(p, 130, 130);
    ck_assert_int_eq(crun_count(p[1].obuf, "got signal 2\n"), 2);
    ck_assert_int_eq(crun_count(p[0].obuf, "got signal 15\n"), 2);
    ck_assert_ptr_nonnull(strstr(p[0].ebuf, "cohortrun on node 1 got SIGINT"));
    crun_free(&p[0]);
    crun_free(&p[1]);
}
END_TEST

START_TEST(agents_must_agree_on_the_job_shape)
{
    /* An external store lets the test see node 0's claim before node 1
     * starts, so which agent is refused is deterministic. */
    char addr[64], url[96];
    const char *job = new_job();
    cohort_store_server *srv = ext_store(job, addr, sizeof addr, url, sizeof url);
    char *prog[] = {"env", NULL};
    char *extra0[] = {"--store", url, NULL};
    char *extra1[] = {"--store", url, "--max-restarts", "1", NULL};
    crun_proc p[2];
    start_node(&p[0], 0, NULL, job, extra0, prog);
    cohort_store *st = NULL;
    CHT_PASS(cohort_store_connect(&st, addr, job, TOKEN, 10000));
    char *v = NULL;
    CHT_PASS(cohort_store_gets(st, "cohortrun/node0", &v, 10000));
    free(v);
    start_node(&p[1], 1, NULL, job, extra1, prog);
    ck_assert_int_eq(crun_finish(&p[1], DEADLINE), 125);
    ck_assert_ptr_nonnull(strstr(p[1].ebuf, "every node needs the same"));
    ck_assert_ptr_nonnull(strstr(p[1].ebuf, "max_restarts=1"));
    /* Node 0, waiting in the first join, learns of the refusal and ends
     * (before session 38 it waited out its 20 s join timeout). */
    double t0 = cht_now_ms();
    int rc0 = crun_finish(&p[0], DEADLINE);
    double dt = cht_now_ms() - t0;
    if (rc0 != 125)
        dump2(p);
    ck_assert_int_eq(rc0, 125);
    ck_assert_msg(dt < 5000 * cht_time_scale(), "node 0 ended %.0f ms after the refusal", dt);
    ck_assert_msg(strstr(p[0].ebuf, "node 0: generation 1: another agent of this job was refused, "
                                    "so not every node can join: node 1 was started with "
                                    "'nnodes=2 nproc=2 max_restarts=1'"),
                  "%s", p[0].ebuf);
    /* A second agent claiming node 0 is refused too. */
    crun_proc dup;
    start_node(&dup, 0, NULL, job, extra0, prog);
    ck_assert_int_eq(crun_finish(&dup, DEADLINE), 125);
    ck_assert_ptr_nonnull(strstr(dup.ebuf, "--node-rank 0 is already taken"));
    crun_free(&dup);
    crun_free(&p[0]);
    crun_free(&p[1]);
    cohort_store_close(st);
    cohort_store_server_stop(srv);
}
END_TEST

/* Two agents claim node 0 while node 0 waits in the first join: the
 * second is refused, and node 0 ends at once naming both (the job cannot
 * start: some node lacks its --node-rank). */
START_TEST(a_refused_duplicate_ends_the_first_join)
{
    char addr[64], url[96];
    const char *job = new_job();
    cohort_store_server *srv = ext_store(job, addr, sizeof addr, url, sizeof url);
    char *prog[] = {"env", NULL};
    char *extra[] = {"--store", url, NULL};
    crun_proc p, dup;
    start_node(&p, 0, NULL, job, extra, prog);
    cohort_store *st = NULL;
    CHT_PASS(cohort_store_connect(&st, addr, job, TOKEN, 10000));
    char *v = NULL;
    CHT_PASS(cohort_store_gets(st, "cohortrun/node0", &v, 10000));
    free(v);
    start_node(&dup, 0, NULL, job, extra, prog);
    ck_assert_int_eq(crun_finish(&dup, DEADLINE), 125);
    double t0 = cht_now_ms();
    int rc = crun_finish(&p, DEADLINE);
    double dt = cht_now_ms() - t0;
    ck_assert_msg(rc == 125, "rc %d: %s", rc, p.ebuf);
    ck_assert_msg(dt < 5000 * cht_time_scale(), "node 0 ended %.0f ms after the refusal", dt);
    ck_assert_msg(strstr(p.ebuf, "another agent of this job was refused, so not every node can "
                                 "join: --node-rank 0 is already taken") &&
                      strstr(p.ebuf, "was refused)"),
                  "%s", p.ebuf);
    crun_free(&p);
    crun_free(&dup);
    cohort_store_close(st);
    cohort_store_server_stop(srv);
}
END_TEST

/* A node waiting for its partners says so while it waits (issue 16), then
 * names the missing node at the join timeout. */
START_TEST(join_reports_progress)
{
    char addr[64], url[96];
    const char *job = new_job();
    cohort_store_server *srv = ext_store(job, addr, sizeof addr, url, sizeof url);
    char *prog[] = {"env", NULL};
    char *extra[] = {"--store", url, "--join-timeout-ms", "3500", NULL};
    crun_proc p;
    start_node(&p, 0, NULL, job, extra, prog);
    int rc = crun_finish(&p, DEADLINE);
    ck_assert_msg(rc != 0, "node 0 alone succeeded");
    ck_assert_msg(strstr(p.ebuf, "waiting for node 1 to join (1 of 2 joined), 1 s of 3 s"),
                  "%s", p.ebuf);
    ck_assert_msg(crun_count(p.ebuf, "waiting for node 1 to join (1 of 2 joined)") >= 2, "%s",
                  p.ebuf);
    ck_assert_msg(strstr(p.ebuf, "missing node(s): 1"), "%s", p.ebuf);
    crun_free(&p);
    cohort_store_server_stop(srv);
}
END_TEST

/* The store lives in the launcher: a key written in generation 1 is there
 * in generation 2, and a generation-1 client is refused once generation 2
 * has connected. */
START_TEST(store_outlives_restarts_and_refuses_stale_generation)
{
    char *argv[] = {crun_launcher_path(), "-n", "2", "--max-restarts", "1", crun_probe_path(),
                    "store", NULL};
    crun_proc p;
    crun_start(&p, argv, NULL);
    int st = crun_finish(&p, DEADLINE);
    if (st != 0)
        fprintf(stderr, "%s\n%s\n", p.obuf, p.ebuf);
    ck_assert_int_eq(st, 0);
    ck_assert_ptr_nonnull(strstr(p.obuf, "[0] generation 2 read: written in generation 1\n"));
    ck_assert_ptr_nonnull(strstr(p.obuf, "[0] generation 1 client refused: COHORT_ERR_AUTH"));
    ck_assert_ptr_nonnull(strstr(p.obuf, "stale generation 1"));
    crun_free(&p);
}
END_TEST

/* Two "hosts": network namespaces with their own addresses. Node 0 hosts
 * the store on its namespace's address; node 1 reaches it over the veth
 * link. A fixed port is safe here: the namespace is private to the test. */
#define NS_PREFIX "cohlr"
#define NS_NET 78
START_TEST(two_nodes_in_network_namespaces)
{
    ck_assert_msg(cht_netns_create(NS_PREFIX, 2, NS_NET) == 0,
                  "could not build the namespaces (needs root + iproute2)");
    char master[64];
    snprintf(master, sizeof master, "%s:29400", cht_netns_ip(NS_NET, 0));
    const char *job = new_job();
    crun_proc p[2];
    for (int node = 0; node < 2; node++) {
        char ns[32], nr[8];
        snprintf(ns, sizeof ns, "%s", cht_netns_name(NS_PREFIX, node));
        snprintf(nr, sizeof nr, "%d", node);
        char *argv[] = {"/usr/bin/env", "ip", "netns", "exec", ns, crun_launcher_path(),
                        "--nnodes", "2", "--node-rank", nr, "-n", "2", "--job-id", (char *)job,
                        "--master", master, "--join-timeout-ms", "20000", crun_probe_path(), "env",
                        NULL};
        crun_start(&p[node], argv, node_env);
    }
    int a = crun_finish(&p[0], DEADLINE), b = crun_finish(&p[1], DEADLINE);
    cht_netns_destroy(NS_PREFIX, 2);
    if (a || b)
        dump2(p);
    ck_assert_int_eq(a, 0);
    ck_assert_int_eq(b, 0);
    check_global_ranks(p, cht_netns_ip(NS_NET, 0));
    crun_free(&p[0]);
    crun_free(&p[1]);
}
END_TEST

static int store_available(void)
{
    char addr[64];
    cohort_store_server *s = cht_store_start("probe", "probe-token", addr, sizeof addr);
    if (!s)
        return 0;
    cohort_store_server_stop(s);
    return 1;
}

static Suite *make_suite(void)
{
    if (!store_available()) {
        /* The store module has not landed in this tree: nothing to run. */
        printf("test_multinode: store server not built; skipping\n");
        exit(0);
    }
    Suite *s = suite_create("launcher_multinode");
    TCase *t = tcase_create("loopback");
    tcase_set_timeout(t, 90);
    tcase_add_test(t, two_nodes_loopback_global_ranks);
    tcase_add_test(t, two_nodes_external_store);
    tcase_add_test(t, failure_on_one_node_restarts_every_node);
    tcase_add_test(t, failure_without_restart_stops_every_node);
    tcase_add_test(t, interrupt_on_one_node_stops_every_node);
    tcase_add_test(t, agents_must_agree_on_the_job_shape);
    tcase_add_test(t, a_refused_duplicate_ends_the_first_join);
    tcase_add_test(t, join_reports_progress);
    tcase_add_test(t, store_outlives_restarts_and_refuses_stale_generation);
    suite_add_tcase(s, t);
    TCase *n = tcase_create("netns");
    tcase_set_timeout(n, 120);
    tcase_add_test(n, two_nodes_in_network_namespaces);
    suite_add_tcase(s, n);
    return s;
}

COH_TEST_MAIN(make_suite)
