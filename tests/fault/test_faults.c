/* test_faults.c - faults around a running job: the standalone store killed
 * mid-job, strays with wrong tokens or garbage on the store and data ports,
 * file-descriptor exhaustion, allocation failures. Every case states its
 * bound; every case checks that nothing crashed, hung, or computed wrong. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/support.h"
#include "util/util.h"

/* Starts `cohort-store --listen 127.0.0.1:0 --token-file F`; returns its pid
 * and writes the address (read from its "listening on" line, no sleeps). */
static pid_t start_store(const char *job, const char *token, char *addr, size_t len)
{
    char tf[] = "/tmp/cohort-fault-tokXXXXXX";
    int fd = mkstemp(tf);
    ck_assert_int_ge(fd, 0);
    dprintf(fd, "%s %s\n", job, token);
    close(fd);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execl(cht_tool("cohort-store"), "cohort-store", "--listen", "127.0.0.1:0", "--token-file",
              tf, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    char line[256] = "";
    ck_assert_msg(fgets(line, sizeof line, f) != NULL, "cohort-store printed nothing");
    fclose(f);
    unlink(tf);
    char *at = strstr(line, "listening on ");
    ck_assert_msg(at != NULL, "unexpected first line: %s", line);
    snprintf(addr, len, "%s", at + strlen("listening on "));
    addr[strcspn(addr, "\n")] = 0;
    return pid;
}

/* ---- the standalone store dies mid-job ---- */

static int rank_store_dies(int rank, void *arg)
{
    pid_t store = *(pid_t *)arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    int32_t x = rank + 1, y = 0;
    RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM), g);
    if (rank == 0)
        kill(store, SIGKILL);
    RANK_PASS(cohort_barrier(g), g);
    /* The data path does not depend on the store: collectives go on and
     * stay correct. */
    for (int i = 0; i < 200; i++) {
        RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM), g);
        RANK_CHECK(y == n * (n + 1) / 2, "wrong sum %d", y);
    }
    /* What needs the store fails clearly, within its timeout. */
    cohort_group *sub = NULL;
    double t0 = cht_now_ms();
    cohort_status st = cohort_split(g, 0, rank, &sub);
    double dt = cht_now_ms() - t0;
    RANK_CHECK(st == COHORT_ERR_STORE || st == COHORT_ERR_ABORTED, "split after store death: %s: %s",
               cohort_status_name(st), cohort_last_error(g));
    RANK_CHECK(strstr(cohort_last_error(g), "store") != NULL, "%s", cohort_last_error(g));
    RANK_CHECK(dt < 5000, "split took %.0f ms without a store (bound 5 s)", dt);
    cohort_finalize(g);
    return 0;
}

START_TEST(standalone_store_killed_mid_job)
{
    char addr[128], url[160];
    const char *job = "faultjob", *token = "f00dfeed";
    pid_t store = start_store(job, token, addr, sizeof addr);
    snprintf(url, sizeof url, "COHORT_STORE=tcp://%s;COHORT_JOB_ID=%s;COHORT_TOKEN=%s;COHORT_TIMEOUT=3",
             addr, job, token);
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = url};
    cht_result r;
    cht_run_ranks(&o, rank_store_dies, &store, &r);
    kill(store, SIGKILL);
    waitpid(store, NULL, 0);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- strays: wrong token on the store and garbage on every data port ---- */

static int connect_to(const char *hostport)
{
    char host[64];
    int port = 0;
    if (sscanf(hostport, "%63[^:]:%d", host, &port) != 2)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int rank_strays(int rank, void *arg)
{
    const char *store_addr = arg;
    cohort_group *g;
    RANK_PASS(cohort_init(&g), NULL);
    int n = cohort_size(g);
    if (rank == 0) {
        /* A process of another job (wrong token) on the store. */
        cohort_store *bad = NULL;
        cohort_status st = cohort_store_connect(&bad, store_addr, "faultjob2", "wrong", 2000);
        RANK_CHECK(st == COHORT_ERR_AUTH, "wrong token: %s", cohort_status_name(st));
        /* Garbage, a truncated frame and a 4 GiB length prefix on every
         * peer's data port and on the store port while the job runs. */
        /* explicit lengths: the frames contain NUL bytes */
        static const struct {
            const char *b;
            size_t n;
        } garbage[] = {
            {"GET / HTTP/1.1\r\n\r\n", 18},
            {"\x31\x52\x48\x43\xff\xff\xff\xff", 8},                 /* data magic, junk */
            {"\x00\x00\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff", 12}, /* 4 GiB length */
        };
        cohort_store *s;
        RANK_PASS(cohort_store_connect(&s, store_addr, "faultjob", "f00dfeed", 2000), NULL);
        for (int r = 0; r < n; r++) {
            char key[64];
            snprintf(key, sizeof key, "gen1/g0/rank/%d", r);
            char *v = NULL;
            if (cohort_store_gets(s, key, &v, 2000) != COHORT_OK)
                continue;
            char a[128] = "";
            sscanf(v, "%*d %*d %127s", a);
            free(v);
            for (size_t k = 0; k < sizeof garbage / sizeof garbage[0]; k++) {
                int fd = connect_to(a);
                if (fd >= 0) {
                    ssize_t w = write(fd, garbage[k].b, garbage[k].n);
                    (void)w;
                    close(fd);
                }
            }
        }
        for (size_t k = 0; k < sizeof garbage / sizeof garbage[0]; k++) {
            int fd = connect_to(store_addr);
            if (fd >= 0) {
                ssize_t w = write(fd, garbage[k].b, garbage[k].n);
                (void)w;
                close(fd);
            }
        }
        cohort_store_close(s);
    }
    /* The job carries on, results exact. */
    for (int i = 0; i < 300; i++) {
        int64_t x = rank * 1000 + i, y = 0;
        RANK_PASS(cohort_all_reduce(g, &x, &y, 1, COHORT_INT64, COHORT_SUM), g);
        RANK_CHECK(y == 1000LL * n * (n - 1) / 2 + (int64_t)n * i, "wrong sum at %d", i);
    }
    RANK_PASS(cohort_finalize(g), NULL);
    return 0;
}

START_TEST(strays_and_garbage_while_running)
{
    char addr[128], env[256];
    const char *job = "faultjob", *token = "f00dfeed";
    pid_t store = start_store(job, token, addr, sizeof addr);
    snprintf(env, sizeof env, "COHORT_STORE=tcp://%s;COHORT_JOB_ID=%s;COHORT_TOKEN=%s;COHORT_TIMEOUT=20",
             addr, job, token);
    for (int t = 0; t < CHT_N_TRANSPORTS; t++) {
        cht_opts o = {.nranks = 3, .deadline_ms = 60000, .extra_env = env,
                      .transport = cht_transports[t], .generation = t + 1};
        cht_result r;
        cht_run_ranks(&o, rank_strays, addr, &r);
        cht_assert_all_ok(&r);
    }
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}
END_TEST

/* ---- file descriptors exhausted: an error naming the syscall, no crash ---- */

static int rank_nofile(int rank, void *arg)
{
    (void)arg;
    (void)rank;
    struct rlimit rl = {12, 12};
    setrlimit(RLIMIT_NOFILE, &rl);
    cohort_group *g = NULL;
    cohort_status st = cohort_init(&g);
    if (st == COHORT_OK) { /* possible with few fds; then collectives must still behave */
        cohort_finalize(g);
        return 0;
    }
    RANK_CHECK(st == COHORT_ERR_SYSTEM || st == COHORT_ERR_STORE || st == COHORT_ERR_TIMEOUT ||
                   st == COHORT_ERR_PEER_LOST,
               "init with 12 fds: %s: %s", cohort_status_name(st), cohort_last_error(NULL));
    RANK_CHECK(cohort_last_error(NULL)[0], "no message");
    return 0;
}

START_TEST(fd_exhaustion_is_an_error)
{
    cht_opts o = {.nranks = 3, .deadline_ms = 60000, .store_mode = CHT_STORE_PARENT,
                  .extra_env = "COHORT_TIMEOUT=3"};
    cht_result r;
    cht_run_ranks(&o, rank_nofile, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

/* ---- allocation failures: every n-th allocation of init fails in turn ---- */

static int rank_oom(int rank, void *arg)
{
    (void)arg;
    (void)rank;
    int ok = 0, failed = 0;
    for (long n = 0; n < 400; n += 3) {
        /* every attempt is a new incarnation: a rank joins a generation once */
        char gen[32];
        snprintf(gen, sizeof gen, "%ld", n + 1);
        setenv("COHORT_GENERATION", gen, 1);
        coh_alloc_fail_after(n);
        cohort_group *g = NULL;
        cohort_status st = cohort_init(&g);
        coh_alloc_fail_after(-1);
        if (st == COHORT_OK) {
            int32_t x = 1, y = 0;
            st = cohort_all_reduce(g, &x, &y, 1, COHORT_INT32, COHORT_SUM);
            RANK_CHECK(st == COHORT_OK && y == 1, "all_reduce after init with fault at %ld", n);
            cohort_finalize(g);
            ok++;
        } else {
            RANK_CHECK(g == NULL, "failed init left a group");
            RANK_CHECK(cohort_last_error(NULL)[0], "failed init without a message (fault %ld)", n);
            failed++;
        }
    }
    RANK_CHECK(failed > 0 && ok > 0, "fault injection ineffective: ok %d failed %d", ok, failed);
    return 0;
}

START_TEST(allocation_failures_never_abort)
{
    /* one rank, so each init is a complete rendezvous with no peer to wait for */
    cht_opts o = {.nranks = 1, .deadline_ms = 120000, .store_mode = CHT_STORE_PARENT,
                  .extra_env = "COHORT_TIMEOUT=2"};
    cht_result r;
    cht_run_ranks(&o, rank_oom, NULL, &r);
    cht_assert_all_ok(&r);
}
END_TEST

static Suite *make_suite(void)
{
    Suite *s = suite_create("faults");
    TCase *tc = tcase_create("faults");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, standalone_store_killed_mid_job);
    tcase_add_test(tc, strays_and_garbage_while_running);
    tcase_add_test(tc, fd_exhaustion_is_an_error);
    tcase_add_test(tc, allocation_failures_never_abort);
    suite_add_tcase(s, tc);
    return s;
}

COH_TEST_MAIN(make_suite)
