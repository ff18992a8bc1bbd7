/*
 * test_store_scale.c - thousands of concurrent connections on one server
 * thread: 3 client processes hold 1000 cohort_store handles each while the
 * test process holds 1000 raw connections that each have a GET waiting on
 * the server; one SET wakes all 1000, and every client's data is intact.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_util.h"

enum { NPROC = 3, PER_PROC = 1000, NRAW = 1000 };

static void raise_nofile(rlim_t want)
{
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur >= want)
        return;
    rl.rlim_cur = want;
    if (rl.rlim_max < want)
        rl.rlim_max = want; /* root may raise the hard limit */
    ck_assert_msg(setrlimit(RLIMIT_NOFILE, &rl) == 0, "setrlimit(NOFILE, %lu): %s",
                  (unsigned long)want, strerror(errno));
}

static int client_proc(const char *a, int id, int fd_ready, int fd_go)
{
    static cohort_store *h[PER_PROC];
    for (int i = 0; i < PER_PROC; i++) {
        CHILD_OK(cohort_store_connect(&h[i], a, JOB_A, TOK_A, 60000), NULL);
        cohort_store_set_timeout(h[i], 60000);
    }
    for (int i = 0; i < PER_PROC; i++) {
        char k[32], v[32];
        snprintf(k, sizeof k, "c/%d/%d", id, i);
        snprintf(v, sizeof v, "%d-%d", id, i * 3);
        CHILD_OK(cohort_store_sets(h[i], k, v), h[i]);
    }
    char b = 1;
    RANK_CHECK(write(fd_ready, &b, 1) == 1, "ready");
    RANK_CHECK(read(fd_go, &b, 1) == 1, "go");
    /* every handle still works and reads another process's data */
    for (int i = 0; i < PER_PROC; i++) {
        char k[32], v[32], *got = NULL;
        int other = (id + 1) % NPROC;
        snprintf(k, sizeof k, "c/%d/%d", other, i);
        snprintf(v, sizeof v, "%d-%d", other, i * 3);
        CHILD_OK(cohort_store_gets(h[i], k, &got, 30000), h[i]);
        RANK_CHECK(!strcmp(got, v), "%s = %s, want %s", k, got, v);
        free(got);
        cohort_store_close(h[i]);
    }
    return 0;
}

START_TEST(thousands_of_connections)
{
    raise_nofile(16384);
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    char a[64];
    pid_t sp = su_spawn_store(args, a, sizeof a, "/dev/null");
    ck_assert(sp > 0);
    int rp[2], gp[2];
    ck_assert(pipe(rp) == 0 && pipe(gp) == 0);
    fflush(NULL);
    pid_t kids[NPROC];
    double t0 = su_now_ms();
    for (int i = 0; i < NPROC; i++) {
        kids[i] = fork();
        if (kids[i] == 0)
            _exit(client_proc(a, i, rp[1], gp[0]));
    }
    /* 1000 raw connections, each with a GET waiting for "go" */
    static int fds[NRAW];
    int port = su_port_of(a);
    for (int i = 0; i < NRAW; i++) {
        fds[i] = su_raw_connect(port);
        ck_assert_msg(fds[i] >= 0, "raw connect %d: %s", i, strerror(errno));
        ck_assert_int_eq(su_raw_auth(fds[i], JOB_A, TOK_A, 0), COHORT_OK);
        uint8_t f[COH_PROTO_HDR + 7];
        coh_proto_put_hdr(f, COH_OP_GET, (uint32_t)i + 1, 7);
        f[COH_PROTO_HDR] = 0;
        coh_put_u32(f + COH_PROTO_HDR + 1, 2);
        memcpy(f + COH_PROTO_HDR + 5, "go", 2);
        ck_assert_int_eq(su_raw_write(fds[i], f, sizeof f), 0);
    }
    for (int i = 0; i < NPROC; i++) {
        char b;
        ck_assert(read(rp[0], &b, 1) == 1);
    }
    double t_conn = su_now_ms() - t0;
    cohort_store *obs = su_connect(a, JOB_A, TOK_A);
    ck_assert(su_until(obs, su_waiters_eq, (void *)NRAW, 30000));
    cohort_store_stats x;
    ST_OK(cohort_store_get_stats(obs, &x), obs);
    ck_assert_int_eq(x.conns, NPROC * PER_PROC + NRAW + 1);
    ck_assert_int_eq(x.keys, NPROC * PER_PROC);
    /* one SET wakes every waiter */
    double t1 = su_now_ms();
    ST_OK(cohort_store_sets(obs, "go", "now"), obs);
    for (int i = 0; i < NRAW; i++) {
        coh_frame_hdr h;
        uint8_t buf[64];
        int n = su_raw_read(fds[i], &h, buf, sizeof buf, 30000);
        ck_assert_msg(n == 1 + 4 + 3, "raw %d: reply of %d bytes", i, n);
        ck_assert_uint_eq(h.id, (uint32_t)i + 1);
        ck_assert_uint_eq(buf[0], COHORT_OK);
        ck_assert(!memcmp(buf + 5, "now", 3));
    }
    double t_wake = su_now_ms() - t1;
    char b = 1;
    for (int i = 0; i < NPROC; i++)
        ck_assert(write(gp[1], &b, 1) == 1);
    for (int i = 0; i < NPROC; i++) {
        int st;
        ck_assert(waitpid(kids[i], &st, 0) == kids[i]);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client process %d: %d", i, st);
    }
    for (int i = 0; i < NRAW; i++)
        close(fds[i]);
    ck_assert(su_until(obs, su_conns_eq, (void *)1, 30000));
    fprintf(stderr, "scale: %d connections up in %.0f ms; %d waiters woken in %.1f ms\n",
            NPROC * PER_PROC + NRAW, t_conn, NRAW, t_wake);
    cohort_store_close(obs);
    kill(sp, SIGTERM);
    int st;
    waitpid(sp, &st, 0);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_scale");
    TCase *t = tcase_create("scale");
    tcase_set_timeout(t, 240);
    tcase_add_test(t, thousands_of_connections);
    suite_add_tcase(s, t);
    return s;
}

COH_TEST_MAIN(suite)
