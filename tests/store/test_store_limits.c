/*
 * test_store_limits.c - the store server under attack (issue 13): the
 * descriptor limit, slow-loris before authentication, the cap on
 * unauthenticated connections, rate-limited logging. Real servers (the
 * standalone cohort-store and the embedded one in a forked process), real
 * loopback sockets; every attack is bounded in time and traffic.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store_util.h"
#include "util/ratelimit.h"

/* CPU ticks (user + system) a process has used. */
static long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    long ut = 0, st = 0;
    /* after ')': state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2)
        return -1;
    return ut + st;
}

/* Share of one CPU the process used over ms. */
static double cpu_share(pid_t pid, int ms)
{
    long t0 = cpu_ticks(pid);
    usleep((useconds_t)ms * 1000);
    long t1 = cpu_ticks(pid);
    return (double)(t1 - t0) / (double)sysconf(_SC_CLK_TCK) / (ms / 1000.0);
}

static int count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

static off_t file_size(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    off_t n = ftell(f);
    fclose(f);
    return n;
}

/* Opens n idle connections to port (they never send a byte). */
static int open_idle(int port, int *fds, int n)
{
    int k = 0;
    for (; k < n; k++) {
        fds[k] = su_raw_connect(port);
        if (fds[k] < 0)
            break;
    }
    return k;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* The descriptor-limit attack against the server in process pid: 70 idle
 * connections against a 64-descriptor limit. The server must return to
 * epoll (no spinning), let a client with the right token in while the
 * attack lasts, keep an already authenticated client working, log a
 * bounded number of lines, and stop on SIGTERM. */
static void fd_limit_attack(pid_t pid, const char *addr, const char *errpath, cohort_store *old)
{
    int port = su_port_of(addr);
    enum { NATT = 70 };
    int fds[NATT];
    int n = open_idle(port, fds, NATT);
    ck_assert_int_eq(n, NATT); /* the kernel's backlog takes what the server does not */
    usleep(200 * 1000);
    double cpu = cpu_share(pid, 1000);
    ck_assert_msg(cpu < 0.3, "server used %.0f %% of a CPU at the descriptor limit", cpu * 100);
    /* The authenticated client is still served. */
    char *v = NULL;
    ST_OK(cohort_store_gets(old, "before", &v, 3000), old);
    ck_assert_str_eq(v, "attack");
    free(v);
    /* A client with the right token gets in while the attack lasts: the
     * server closes the oldest unauthenticated connections to make room
     * (the auth timeout here is 60 s, so this is not the timeout). */
    double t0 = su_now_ms();
    cohort_store *s = NULL;
    ST_OK(cohort_store_connect(&s, addr, JOB_A, TOK_A, 15000), NULL);
    double el = su_now_ms() - t0;
    ck_assert_msg(el < 10000, "the right token got in after %.0f ms", el);
    ST_OK(cohort_store_sets(s, "during", "ok"), s);
    ST_OK(cohort_store_gets(s, "before", &v, 3000), s);
    ck_assert_str_eq(v, "attack");
    free(v);
    cpu = cpu_share(pid, 500);
    ck_assert_msg(cpu < 0.3, "server used %.0f %% of a CPU after admitting", cpu * 100);
    /* The log: rate-limited, not megabytes. */
    if (errpath) {
        off_t sz = file_size(errpath);
        ck_assert_msg(sz >= 0 && sz < 64 * 1024, "server log is %ld bytes", (long)sz);
        int fdl = count_lines(errpath, "out of file descriptors");
        ck_assert_msg(fdl >= 1 && fdl <= 10, "%d 'out of file descriptors' lines", fdl);
    }
    cohort_store_close(s);
    /* SIGTERM is obeyed with the attackers still connected. */
    kill(pid, SIGTERM);
    int status = 0;
    double t1 = su_now_ms();
    pid_t w;
    while ((w = waitpid(pid, &status, WNOHANG)) == 0 && su_now_ms() - t1 < 5000)
        usleep(10 * 1000);
    if (w == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ck_abort_msg("server ignored SIGTERM at the descriptor limit");
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "server status 0x%x", status);
    close_all(fds, n);
}

static void set_nofile(rlim_t soft, struct rlimit *old)
{
    struct rlimit r;
    getrlimit(RLIMIT_NOFILE, &r);
    if (old)
        *old = r;
    r.rlim_cur = soft;
    ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &r), 0);
}

START_TEST(fd_limit_standalone)
{
    char errpath[64];
    snprintf(errpath, sizeof errpath, "/tmp/cohort-test-limits-fd-%d.err", (int)getpid());
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(),
                          "--auth-timeout", "60000", NULL};
    char addr[64];
    struct rlimit old;
    set_nofile(64, &old); /* the child inherits it at fork */
    pid_t pid = su_spawn_store(args, addr, sizeof addr, errpath);
    setrlimit(RLIMIT_NOFILE, &old);
    ck_assert_int_gt(pid, 0);
    cohort_store *c = su_connect(addr, JOB_A, TOK_A);
    ST_OK(cohort_store_sets(c, "before", "attack"), c);
    fd_limit_attack(pid, addr, errpath, c);
    cohort_store_close(c);
    unlink(errpath);
}
END_TEST

static volatile sig_atomic_t child_stop;
static void on_term(int sig)
{
    (void)sig;
    child_stop = 1;
}

/* The launcher's embedded server (cohort_store_server_start: its own
 * thread) in a child process with a 64-descriptor limit. */
START_TEST(fd_limit_embedded)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(pfd[0]);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_term;
        sigaction(SIGTERM, &sa, NULL);
        struct rlimit r;
        getrlimit(RLIMIT_NOFILE, &r);
        r.rlim_cur = 64;
        setrlimit(RLIMIT_NOFILE, &r);
        static const char *jobs[] = {JOB_A};
        static const char *toks[] = {TOK_A};
        cohort_store_server_opts o;
        memset(&o, 0, sizeof o);
        o.bind_addr = "127.0.0.1";
        o.job_ids = jobs;
        o.tokens = toks;
        o.n_jobs = 1;
        o.auth_timeout_ms = 60000;
        cohort_store_server *s = NULL;
        if (cohort_store_server_start(&s, &o) != COHORT_OK)
            _exit(3);
        int port = cohort_store_server_port(s);
        if (write(pfd[1], &port, sizeof port) != sizeof port)
            _exit(4);
        while (!child_stop)
            pause();
        cohort_store_server_stop(s);
        _exit(0);
    }
    close(pfd[1]);
    int port = 0;
    struct pollfd pf = {.fd = pfd[0], .events = POLLIN};
    ck_assert_int_eq(poll(&pf, 1, 10000), 1);
    ck_assert_int_eq(read(pfd[0], &port, sizeof port), (ssize_t)sizeof port);
    close(pfd[0]);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    cohort_store *c = su_connect(addr, JOB_A, TOK_A);
    ST_OK(cohort_store_sets(c, "before", "attack"), c);
    fd_limit_attack(pid, addr, NULL, c);
    cohort_store_close(c);
}
END_TEST

/* Slow-loris before authentication: one byte every 150 ms must not keep a
 * connection past the auth timeout (bytes reset only the frame timer). */
START_TEST(auth_deadline_not_extended_by_bytes)
{
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.auth_timeout_ms = 700;
    o.frame_timeout_ms = 30000;
    char addr[64];
    cohort_store_server *s = su_server(&o, addr, sizeof addr);
    int fd = su_raw_connect(su_port_of(addr));
    ck_assert_int_ge(fd, 0);
    coh_frame_hdr h;
    uint8_t buf[256];
    ck_assert_int_eq(su_raw_read(fd, &h, buf, sizeof buf, 3000), COH_PROTO_NONCE);
    /* A plausible AUTH header, then its body one byte at a time. */
    uint8_t hb[COH_PROTO_HDR];
    coh_proto_put_hdr(hb, COH_OP_AUTH, 0, 100);
    ck_assert_int_eq(su_raw_write(fd, hb, sizeof hb), 0);
    double t0 = su_now_ms();
    int closed = 0;
    for (int i = 0; i < 40 && !closed; i++) {
        if (su_raw_write(fd, "\0", 1) < 0)
            break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, 150) == 1)
            closed = 1;
    }
    double el = su_now_ms() - t0;
    ck_assert_msg(closed, "a byte every 150 ms kept an unauthenticated connection %.0f ms", el);
    char msg[512] = "";
    int n = su_raw_read(fd, &h, buf, sizeof buf - 1, 2000);
    ck_assert_int_gt(n, 5);
    ck_assert_int_eq(h.op, COH_OP_ERROR);
    ck_assert_int_eq(buf[0], COHORT_ERR_TIMEOUT);
    memcpy(msg, buf + 5, (size_t)n - 5);
    ck_assert_msg(strstr(msg, "authenticate"), "%s", msg);
    ck_assert_msg(el < 4500, "closed after %.0f ms (auth timeout 700 ms)", el);
    close(fd);
    cohort_store_server_stop(s);
}
END_TEST

/* Unauthenticated connections fill max_clients and max_unauth: a client
 * with the right token still gets in at once, and an authenticated one is
 * never closed to make room. */
START_TEST(unauth_cannot_lock_out)
{
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.max_clients = 40;
    o.max_unauth = 30;
    o.auth_timeout_ms = 60000;
    char addr[64];
    cohort_store_server *s = su_server(&o, addr, sizeof addr);
    cohort_store *old = su_connect(addr, JOB_B, TOK_B);
    ST_OK(cohort_store_sets(old, "k", "v"), old);
    enum { NATT = 60 };
    int fds[NATT];
    ck_assert_int_eq(open_idle(su_port_of(addr), fds, NATT), NATT);
    usleep(400 * 1000); /* past the 250 ms grace */
    for (int round = 0; round < 3; round++) {
        double t0 = su_now_ms();
        cohort_store *c = NULL;
        ST_OK(cohort_store_connect(&c, addr, JOB_A, TOK_A, 10000), NULL);
        double el = su_now_ms() - t0;
        ck_assert_msg(el < 8000, "round %d: the right token got in after %.0f ms", round, el);
        ST_OK(cohort_store_sets(c, "k", "a"), c);
        cohort_store_close(c);
        /* more attackers replace the ones closed */
        int more[10];
        int m = open_idle(su_port_of(addr), more, 10);
        usleep(300 * 1000);
        close_all(more, m);
    }
    char *v = NULL;
    ST_OK(cohort_store_gets(old, "k", &v, 2000), old);
    ck_assert_str_eq(v, "v");
    free(v);
    cohort_store_stats st;
    ST_OK(cohort_store_get_stats(old, &st), old);
    ck_assert_msg(st.conns <= 40, "%lld connections over max_clients 40", (long long)st.conns);
    close_all(fds, NATT);
    cohort_store_close(old);
    cohort_store_server_stop(s);
}
END_TEST

/* A token holder with generation 0xFFFFFFFF cannot make every later
 * restart stale: generations advance at most 64 at a time; an operator
 * (generation 0) can set any, and a job so reset starts over. */
START_TEST(generation_advances_one_step)
{
    char addr[64];
    cohort_store_server *s = su_server(NULL, addr, sizeof addr);
    cohort_store *g1 = su_connect_gen(addr, JOB_A, TOK_A, 1);
    ST_OK(cohort_store_sets(g1, "k", "1"), g1);
    cohort_store *x = NULL;
    ST_EXPECT(coh_store_connect_gen(&x, addr, JOB_A, TOK_A, 0xFFFFFFFFu, 3000), COHORT_ERR_AUTH,
              NULL);
    ck_assert_msg(strstr(coh_tls_err()->msg, "skips ahead"), "%s", coh_tls_err()->msg);
    ST_EXPECT(coh_store_connect_gen(&x, addr, JOB_A, TOK_A, 1 + 65, 3000), COHORT_ERR_AUTH, NULL);
    /* generation 1 is untouched by the refusals */
    ST_OK(cohort_store_sets(g1, "k", "1b"), g1);
    /* the next restart: generation 2, and 1's connection is closed */
    cohort_store *g2 = su_connect_gen(addr, JOB_A, TOK_A, 2);
    ST_OK(cohort_store_sets(g2, "k", "2"), g2);
    ST_EXPECT(cohort_store_sets(g1, "k", "late"), COHORT_ERR_AUTH, g1);
    /* job B is not affected by job A's generations */
    cohort_store *b1 = su_connect_gen(addr, JOB_B, TOK_B, 1);
    ST_OK(cohort_store_sets(b1, "k", "b"), b1);
    /* only a generation-0 connection may set the generation */
    uint32_t prev = 99;
    ST_EXPECT(cohort_store_set_generation(g2, 0, &prev), COHORT_ERR_AUTH, g2);
    cohort_store *op = su_connect_gen(addr, JOB_A, TOK_A, 0);
    ST_OK(cohort_store_set_generation(op, 0, &prev), op);
    ck_assert_uint_eq(prev, 2);
    ST_EXPECT(cohort_store_sets(g2, "k", "x"), COHORT_ERR_AUTH, g2);
    /* a reset job takes the next run's first generation */
    cohort_store *n1 = su_connect_gen(addr, JOB_A, TOK_A, 1);
    ST_OK(cohort_store_sets(n1, "k", "new"), n1);
    cohort_store_stats st;
    ST_OK(cohort_store_get_stats(op, &st), op);
    ck_assert_uint_eq(st.generation, 1);
    ST_OK(cohort_store_sets(b1, "k2", "b"), b1);
    cohort_store_close(n1);
    cohort_store_close(op);
    cohort_store_close(b1);
    cohort_store_close(g2);
    cohort_store_close(g1);
    cohort_store_server_stop(s);
}
END_TEST

/* A connect storm larger than max_unauth (48 clients at once, cap 16) is
 * admitted, not refused: the clients beyond the cap wait in the listen
 * backlog until the first ones authenticate. */
static int storm_port;
static atomic_int storm_ok;

static void *storm_client(void *arg)
{
    (void)arg;
    int fd = su_raw_connect(storm_port);
    if (fd >= 0 && su_raw_auth(fd, JOB_A, TOK_A, 0) == COHORT_OK)
        atomic_fetch_add(&storm_ok, 1);
    if (fd >= 0)
        close(fd);
    return NULL;
}

START_TEST(connect_storm_over_unauth_cap_admitted)
{
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.max_unauth = 16;
    char addr[64];
    cohort_store_server *s = su_server(&o, addr, sizeof addr);
    storm_port = su_port_of(addr);
    atomic_store(&storm_ok, 0);
    enum { N = 48 };
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, storm_client, NULL), 0);
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(atomic_load(&storm_ok) == N, "%d of %d clients authenticated",
                  atomic_load(&storm_ok), N);
    cohort_store_server_stop(s);
}
END_TEST

START_TEST(ratelimit_counts)
{
    coh_ratelimit rl;
    memset(&rl, 0, sizeof rl);
    uint64_t more;
    unsigned secs;
    uint64_t t = 1000000000ull;
    for (int i = 0; i < COH_RL_BURST; i++) {
        ck_assert_int_eq(coh_ratelimit_take(&rl, t, &more, &secs), 1);
        ck_assert_uint_eq(more, 0);
    }
    for (int i = 0; i < 1234; i++)
        ck_assert_int_eq(coh_ratelimit_take(&rl, t + (uint64_t)i * 1000000ull, &more, &secs), 0);
    t += (uint64_t)COH_RL_WINDOW_S * 1000000000ull;
    ck_assert_int_eq(coh_ratelimit_take(&rl, t, &more, &secs), 1);
    ck_assert_uint_eq(more, 1234);
    ck_assert_uint_eq(secs, COH_RL_WINDOW_S);
    ck_assert_int_eq(coh_ratelimit_take(&rl, t + 1, &more, &secs), 1);
    ck_assert_uint_eq(more, 0);
}
END_TEST

/* A flood of bad connections writes a few lines and a count, not a line
 * per connection. */
START_TEST(bad_connection_flood_log_bounded)
{
    char errpath[64];
    snprintf(errpath, sizeof errpath, "/tmp/cohort-test-limits-flood-%d.err", (int)getpid());
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(), NULL};
    char addr[64];
    pid_t pid = su_spawn_store(args, addr, sizeof addr, errpath);
    ck_assert_int_gt(pid, 0);
    int port = su_port_of(addr);
    enum { NBAD = 400 };
    for (int i = 0; i < NBAD; i++) {
        int fd = su_raw_connect(port);
        ck_assert_int_ge(fd, 0);
        su_raw_write(fd, "GET / HTTP/1.1\r\n\r\n", 18);
        su_raw_eof(fd, 3000);
        close(fd);
    }
    /* The server still serves, and says how many it did not log. */
    cohort_store *c = su_connect(addr, JOB_A, TOK_A);
    ST_OK(cohort_store_sets(c, "k", "v"), c);
    cohort_store_close(c);
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    int n = count_lines(errpath, "not a store frame");
    ck_assert_msg(n >= 1 && n <= COH_RL_BURST + 1, "%d lines for %d bad connections", n, NBAD);
    unlink(errpath);
}
END_TEST

/* ---- memory: per job, per connection, replies ---- */

static long rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

static int authed_fd(int port, const char *job, const char *tok)
{
    int fd = su_raw_connect(port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(su_raw_auth(fd, job, tok, 0), COHORT_OK);
    return fd;
}

static void stop_store(pid_t pid)
{
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
}

/* Issue 13 #2: job B's connections declare big SETs and trickle their
 * bodies; then B fills its own memory. Job A keeps working throughout:
 * bodies are charged as they arrive, and each job has its own limit. */
START_TEST(job_cannot_starve_another_job)
{
    char errpath[64];
    snprintf(errpath, sizeof errpath, "/tmp/cohort-test-limits-jobmem-%d.err", (int)getpid());
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(),
                          "--max-memory", "16M", "--max-value", "6M", NULL};
    char addr[64];
    pid_t pid = su_spawn_store(args, addr, sizeof addr, errpath);
    ck_assert_int_gt(pid, 0);
    int port = su_port_of(addr);
    enum { NB = 16 };
    int fds[NB];
    for (int i = 0; i < NB; i++) {
        fds[i] = authed_fd(port, JOB_B, TOK_B);
        /* SET declaring 6 MiB + key; one byte of body so far */
        uint8_t f[COH_PROTO_HDR + 1];
        coh_proto_put_hdr(f, COH_OP_SET, 1, 6u << 20);
        f[COH_PROTO_HDR] = 0;
        ck_assert_int_eq(su_raw_write(fds[i], f, sizeof f), 0);
    }
    usleep(100 * 1000);
    /* then 100 KiB more each (read straight into the body buffer, which
     * grows by doubling: 128 KiB each is charged, not 6 MiB) */
    static char chunk[100 * 1024];
    for (int i = 0; i < NB; i++)
        ck_assert_int_eq(su_raw_write(fds[i], chunk, sizeof chunk), 0);
    usleep(200 * 1000);
    cohort_store *a = su_connect(addr, JOB_A, TOK_A);
    static char val[1 << 20];
    memset(val, 'a', sizeof val);
    for (int i = 0; i < 4; i++) {
        char k[16];
        snprintf(k, sizeof k, "a%d", i);
        ST_OK(cohort_store_set(a, k, strlen(k), val, sizeof val), a);
    }
    int64_t r;
    ST_OK(cohort_store_add(a, "ctr", 3, 1, &r), a);
    /* B fills its own share (8 MiB of 16) and is refused there */
    cohort_store *b = su_connect(addr, JOB_B, TOK_B);
    cohort_status st = COHORT_OK;
    int nb = 0;
    for (int i = 0; i < 40 && st == COHORT_OK; i++) {
        char k[16];
        snprintf(k, sizeof k, "b%d", i);
        st = cohort_store_set(b, k, strlen(k), val, sizeof val);
        nb += st == COHORT_OK;
    }
    ck_assert_int_eq(st, COHORT_ERR_TOO_LARGE);
    ck_assert_msg(strstr(cohort_store_last_error(b), "job 'jobB'") &&
                      strstr(cohort_store_last_error(b), "max_job_memory"),
                  "%s", cohort_store_last_error(b));
    ck_assert_msg(nb >= 2 && nb < 8, "job B stored %d MiB", nb);
    /* A still has its own share: 3 more MiB fit */
    for (int i = 4; i < 7; i++) {
        char k[16];
        snprintf(k, sizeof k, "a%d", i);
        ST_OK(cohort_store_set(a, k, strlen(k), val, sizeof val), a);
    }
    void *v = NULL;
    size_t vl = 0;
    ST_OK(cohort_store_get(a, "a6", 2, &v, &vl, 1000), a);
    ck_assert_uint_eq(vl, sizeof val);
    free(v);
    cohort_store_close(b);
    cohort_store_close(a);
    close_all(fds, NB);
    stop_store(pid);
    int n = count_lines(errpath, "max_job_memory");
    ck_assert_msg(n >= 1 && n <= COH_RL_BURST + 1, "%d log lines of the job limit", n);
    unlink(errpath);
}
END_TEST

/* A MULTI_GET frame of key k repeated n times (NOWAIT). */
static uint8_t *multi_get_frame(const char *k, uint32_t n, uint32_t id, size_t *len)
{
    size_t kl = strlen(k);
    size_t pl = 1 + 4 + (size_t)n * (4 + kl);
    uint8_t *f = malloc(COH_PROTO_HDR + pl);
    ck_assert_ptr_nonnull(f);
    coh_proto_put_hdr(f, COH_OP_MULTI_GET, id, (uint32_t)pl);
    uint8_t *p = f + COH_PROTO_HDR;
    *p++ = COH_WAITF_NOWAIT;
    coh_put_u32(p, n);
    p += 4;
    for (uint32_t i = 0; i < n; i++) {
        coh_put_u32(p, (uint32_t)kl);
        memcpy(p + 4, k, kl);
        p += 4 + kl;
    }
    *len = COH_PROTO_HDR + pl;
    return f;
}

/* Issue 13 #3: replies are accounted. Connections that ask for 240 MB of
 * reply (one MULTI_GET of a 4000-byte value 60000 times) and never read,
 * and one that pipelines 60000 GETs of it and never reads, do not grow the
 * server: the big reply is refused naming the limit, and the pipeline is
 * not read further while its replies are not read (backpressure). */
START_TEST(reply_memory_bounded)
{
    char errpath[64];
    snprintf(errpath, sizeof errpath, "/tmp/cohort-test-limits-reply-%d.err", (int)getpid());
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(),
                          "--max-memory", "64M", NULL};
    char addr[64];
    pid_t pid = su_spawn_store(args, addr, sizeof addr, errpath);
    ck_assert_int_gt(pid, 0);
    int port = su_port_of(addr);
    cohort_store *a = su_connect(addr, JOB_A, TOK_A);
    static char val[4000];
    memset(val, 'v', sizeof val);
    ST_OK(cohort_store_set(a, "k", 1, val, sizeof val), a);
    long rss0 = rss_kb(pid);
    enum { NC = 5 };
    int fds[NC + 1];
    size_t fl;
    uint8_t *f = multi_get_frame("k", 60000, 7, &fl);
    for (int i = 0; i < NC; i++) {
        fds[i] = authed_fd(port, JOB_A, TOK_A);
        ck_assert_int_eq(su_raw_write(fds[i], f, fl), 0);
    }
    free(f);
    /* 60000 pipelined GETs (20 bytes each), never read */
    fds[NC] = authed_fd(port, JOB_A, TOK_A);
    {
        enum { NG = 60000 };
        size_t one = COH_PROTO_HDR + 1 + 4 + 1;
        uint8_t *g = malloc(one * NG);
        ck_assert_ptr_nonnull(g);
        for (int i = 0; i < NG; i++) {
            uint8_t *p = g + one * (size_t)i;
            coh_proto_put_hdr(p, COH_OP_GET, (uint32_t)i + 1, 6);
            p[COH_PROTO_HDR] = COH_WAITF_NOWAIT;
            coh_put_u32(p + COH_PROTO_HDR + 1, 1);
            p[COH_PROTO_HDR + 5] = 'k';
        }
        /* the server stops reading: write what the socket takes in 3 s */
        int fl0 = fcntl(fds[NC], F_GETFL);
        fcntl(fds[NC], F_SETFL, fl0 | O_NONBLOCK);
        size_t off = 0, tot = one * NG;
        double t0 = su_now_ms();
        while (off < tot && su_now_ms() - t0 < 3000) {
            ssize_t w = send(fds[NC], g + off, tot - off, MSG_NOSIGNAL);
            if (w > 0)
                off += (size_t)w;
            else
                usleep(10 * 1000);
        }
        free(g);
    }
    usleep(500 * 1000);
    long rss1 = rss_kb(pid);
    ck_assert_msg(rss1 - rss0 < 128 * 1024, "server RSS grew %ld kB (from %ld kB)", rss1 - rss0,
                  rss0);
    /* Everyone else is still served. */
    char *s = NULL;
    ST_OK(cohort_store_sets(a, "other", "x"), a);
    ST_OK(cohort_store_gets(a, "other", &s, 1000), a);
    free(s);
    /* The big MULTI_GET was answered with the limit */
    coh_frame_hdr h;
    static uint8_t buf[1024];
    int n = su_raw_read(fds[0], &h, buf, sizeof buf - 1, 3000);
    ck_assert_int_gt(n, 5);
    ck_assert_int_eq(buf[0], COHORT_ERR_TOO_LARGE);
    buf[n] = 0;
    ck_assert_msg(strstr((char *)buf + 5, "reply of") && strstr((char *)buf + 5, "limit"), "%s",
                  (char *)buf + 5);
    close_all(fds, NC + 1);
    cohort_store_close(a);
    stop_store(pid);
    unlink(errpath);
}
END_TEST

/* Issue 13 (head-of-line): 100 one-byte APPENDs to a 48 MiB value, sent in
 * one write, must not stop the server for anyone: APPEND is amortised
 * O(appended bytes) and one connection's requests run a bounded amount
 * per loop turn. The job's limit (56 MiB) leaves no room to double the
 * value: the spare room must then be smaller, not zero (test_store_stress
 * found exact-size copies per APPEND there). */
START_TEST(append_is_amortised)
{
    char addr[64];
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.max_memory = 112u << 20;
    cohort_store_server *srv = su_server(&o, addr, sizeof addr);
    cohort_store *a = su_connect(addr, JOB_A, TOK_A);
    size_t big = 48u << 20;
    char *val = malloc(big);
    ck_assert_ptr_nonnull(val);
    memset(val, 'x', big);
    ST_OK(cohort_store_set(a, "big", 3, val, big), a);
    free(val);
    cohort_store *other = su_connect(addr, JOB_B, TOK_B);
    ST_OK(cohort_store_sets(other, "k", "v"), other);
    int fd = authed_fd(su_port_of(addr), JOB_A, TOK_A);
    enum { NA = 100 };
    size_t one = COH_PROTO_HDR + 4 + 3 + 4 + 1;
    uint8_t *f = malloc(one * NA);
    for (int i = 0; i < NA; i++) {
        uint8_t *p = f + one * (size_t)i;
        coh_proto_put_hdr(p, COH_OP_APPEND, (uint32_t)i + 1, 12);
        coh_put_u32(p + COH_PROTO_HDR, 3);
        memcpy(p + COH_PROTO_HDR + 4, "big", 3);
        coh_put_u32(p + COH_PROTO_HDR + 7, 1);
        p[COH_PROTO_HDR + 11] = (uint8_t)('0' + i % 10);
    }
    double t0 = su_now_ms();
    ck_assert_int_eq(su_raw_write(fd, f, one * NA), 0);
    free(f);
    /* another job's client meanwhile */
    double worst = 0;
    for (int i = 0; i < 20; i++) {
        double t1 = su_now_ms();
        char *v = NULL;
        ST_OK(cohort_store_gets(other, "k", &v, 5000), other);
        free(v);
        double el = su_now_ms() - t1;
        worst = el > worst ? el : worst;
    }
    for (int i = 0; i < NA; i++) {
        coh_frame_hdr h;
        uint8_t b[256];
        int n = su_raw_read(fd, &h, b, sizeof b, 30000);
        ck_assert_int_eq(n, 1);
        ck_assert_int_eq(b[0], COHORT_OK);
    }
    double el = su_now_ms() - t0;
    /* before: 9.5 s for the appends, and the get timed out after 5 s */
    ck_assert_msg(el < 5000, "100 one-byte appends to 48 MiB took %.0f ms", el);
    ck_assert_msg(worst < 2000, "another job's get took %.0f ms during the appends", worst);
    void *v = NULL;
    size_t vl = 0;
    ST_OK(cohort_store_get(a, "big", 3, &v, &vl, 1000), a);
    ck_assert_uint_eq(vl, big + NA);
    for (int i = 0; i < NA; i++)
        ck_assert_int_eq(((char *)v)[big + (size_t)i], '0' + i % 10);
    ck_assert_int_eq(((char *)v)[big - 1], 'x');
    free(v);
    close(fd);
    cohort_store_close(other);
    cohort_store_close(a);
    cohort_store_server_stop(srv);
}
END_TEST

/* Fairness: a pipeline of expensive requests (a prefix count scans every
 * key of the job) runs a bounded time per loop turn, so another job's
 * requests are served between them. */
START_TEST(pipeline_bounded_per_turn)
{
    char addr[64];
    cohort_store_server *srv = su_server(NULL, addr, sizeof addr);
    cohort_store *a = su_connect(addr, JOB_A, TOK_A);
    enum { NK = 200000, BATCH = 1000 };
    const void *ks[BATCH], *vs[BATCH];
    size_t kls[BATCH], vls[BATCH];
    static char kb[BATCH][16];
    for (int i = 0; i < NK; i += BATCH) {
        for (int j = 0; j < BATCH; j++) {
            kls[j] = (size_t)snprintf(kb[j], sizeof kb[j], "k%d", i + j);
            ks[j] = kb[j];
            vs[j] = "v";
            vls[j] = 1;
        }
        ST_OK(cohort_store_multi_set(a, ks, kls, vs, vls, BATCH), a);
    }
    cohort_store *other = su_connect(addr, JOB_B, TOK_B);
    ST_OK(cohort_store_sets(other, "k", "v"), other);
    int fd = authed_fd(su_port_of(addr), JOB_A, TOK_A);
    /* What one scan costs on this build and machine (sanitizers: 5-10x). */
    double one_scan = 1e9;
    for (int i = 0; i < 3; i++) {
        uint8_t q[COH_PROTO_HDR + 5];
        coh_proto_put_hdr(q, COH_OP_NUM_KEYS, 1000 + (uint32_t)i, 5);
        coh_put_u32(q + COH_PROTO_HDR, 1);
        q[COH_PROTO_HDR + 4] = 'k';
        double t = su_now_ms();
        coh_frame_hdr h;
        uint8_t b[64];
        ck_assert_int_eq(su_raw_write(fd, q, sizeof q), 0);
        ck_assert_int_eq(su_raw_read(fd, &h, b, sizeof b, 30000), 9);
        t = su_now_ms() - t;
        one_scan = t < one_scan ? t : one_scan;
    }
    enum { NR = 50 };
    size_t one = COH_PROTO_HDR + 4 + 1;
    uint8_t *f = malloc(one * NR);
    for (int i = 0; i < NR; i++) {
        uint8_t *p = f + one * (size_t)i;
        coh_proto_put_hdr(p, COH_OP_NUM_KEYS, (uint32_t)i + 1, 5);
        coh_put_u32(p + COH_PROTO_HDR, 1);
        p[COH_PROTO_HDR + 4] = 'k';
    }
    double t1 = su_now_ms();
    ck_assert_int_eq(su_raw_write(fd, f, one * NR), 0);
    free(f);
    double worst = 0;
    int n = 0;
    while (su_now_ms() - t1 < COH_MAX(1500, 30 * one_scan)) {
        double t2 = su_now_ms();
        char *v = NULL;
        ST_OK(cohort_store_gets(other, "k", &v, 5000), other);
        free(v);
        double el = su_now_ms() - t2;
        worst = el > worst ? el : worst;
        n++;
        usleep(2000);
    }
    for (int i = 0; i < NR; i++) {
        coh_frame_hdr h;
        uint8_t b[64];
        ck_assert_int_eq(su_raw_read(fd, &h, b, sizeof b, 60000), 9);
        ck_assert_int_eq(b[0], COHORT_OK);
        ck_assert_int_eq((int64_t)coh_get_u64(b + 1), NK);
    }
    /* A scan's cost while the pipeline ran (the machine's load then, not
     * at calibration: a loaded machine made them 20x slower once). */
    double total = su_now_ms() - t1, avg = total / NR;
    fprintf(stderr, "pipeline_bounded_per_turn: %d gets of another job, worst %.1f ms (one scan "
            "%.1f ms alone, %.1f ms on average in the pipeline), %d scans in %.0f ms\n", n,
            worst, one_scan, avg, (int)NR, total);
    /* bounded: about one scan per turn; without the bound 64 per turn */
    ck_assert_msg(worst < 16 * avg + 300,
                  "another job's get took %.1f ms beside a pipeline of scans (%.1f ms each)",
                  worst, avg);
    close(fd);
    cohort_store_close(other);
    cohort_store_close(a);
    cohort_store_server_stop(srv);
}
END_TEST

/* A value deleted or replaced while unread replies still reference it
 * stays charged to its job until they are gone: clients that do not read
 * (tiny receive buffers) cannot pin memory nobody is charged for. */
START_TEST(unread_reference_stays_charged)
{
    const char *args[] = {"--listen", "127.0.0.1:0", "--token-file", su_token_file(),
                          "--max-memory", "64M", NULL};
    char addr[64];
    pid_t pid = su_spawn_store(args, addr, sizeof addr, "/dev/null");
    ck_assert_int_gt(pid, 0);
    int port = su_port_of(addr);
    cohort_store *b = su_connect(addr, JOB_B, TOK_B);
    size_t vl = 8u << 20;
    char *val = malloc(vl);
    memset(val, 'b', vl);
    long rss0 = rss_kb(pid);
    enum { NC = 10 };
    int fds[NC];
    int sets = 0;
    for (int i = 0; i < NC; i++) {
        fds[i] = -1;
        if (cohort_store_set(b, "v", 1, val, vl) != COHORT_OK)
            break;
        sets++;
        /* a reader that never reads: the 8 MiB reply stays queued */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
        ck_assert_int_eq(su_raw_auth(fd, JOB_B, TOK_B, 0), COHORT_OK);
        uint8_t g[COH_PROTO_HDR + 6];
        coh_proto_put_hdr(g, COH_OP_GET, 1, 6);
        g[COH_PROTO_HDR] = COH_WAITF_NOWAIT;
        coh_put_u32(g + COH_PROTO_HDR + 1, 1);
        g[COH_PROTO_HDR + 5] = 'v';
        ck_assert_int_eq(su_raw_write(fd, g, sizeof g), 0);
        fds[i] = fd;
        usleep(50 * 1000);
        int d;
        ck_assert_int_eq(cohort_store_delete(b, "v", 1, &d), COHORT_OK);
    }
    long rss1 = rss_kb(pid);
    /* job B's share is 32 MiB: at most 4 such values, pinned or stored */
    ck_assert_msg(sets <= 4, "job B stored %d x 8 MiB values, the pinned ones uncharged", sets);
    /* (RSS is not asserted: under ASan freed memory sits in quarantine) */
    fprintf(stderr, "unread_reference_stays_charged: %d sets, server RSS +%ld kB\n", sets,
            rss1 - rss0);
    ck_assert_msg(strstr(cohort_store_last_error(b), "max_job_memory"), "%s",
                  cohort_store_last_error(b));
    /* the readers leave: the memory is B's again */
    for (int i = 0; i < NC; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    double t0 = su_now_ms();
    cohort_status st;
    while ((st = cohort_store_set(b, "v", 1, val, vl)) != COHORT_OK && su_now_ms() - t0 < 5000)
        usleep(20 * 1000);
    ck_assert_int_eq(st, COHORT_OK);
    free(val);
    cohort_store_close(b);
    stop_store(pid);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("store_limits");
    TCase *t = tcase_create("limits");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, ratelimit_counts);
    tcase_add_test(t, generation_advances_one_step);
    tcase_add_test(t, fd_limit_standalone);
    tcase_add_test(t, fd_limit_embedded);
    tcase_add_test(t, auth_deadline_not_extended_by_bytes);
    tcase_add_test(t, unauth_cannot_lock_out);
    tcase_add_test(t, connect_storm_over_unauth_cap_admitted);
    tcase_add_test(t, bad_connection_flood_log_bounded);
    suite_add_tcase(s, t);
    TCase *m = tcase_create("memory");
    tcase_set_timeout(m, 120);
    tcase_add_test(m, job_cannot_starve_another_job);
    tcase_add_test(m, reply_memory_bounded);
    tcase_add_test(m, append_is_amortised);
    tcase_add_test(m, pipeline_bounded_per_turn);
    tcase_add_test(m, unread_reference_stays_charged);
    suite_add_tcase(s, m);
    return s;
}

COH_TEST_MAIN(suite)
