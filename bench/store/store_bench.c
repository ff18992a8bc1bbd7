/*
 * store_bench.c - cohort store benchmark, the same method as
 * bench/store/bench_tcpstore.py so the two run side by side:
 *
 *   tp     throughput and latency: N client PROCESSES (forked), each with its
 *          own connection, loop one op for D seconds; latency is timed around
 *          each call on the client. Small values cycle over 32 keys per
 *          client, 1 MiB values over 2. add goes to one shared counter.
 *   rdzv   N client processes are forked and parked; on a broadcast "go"
 *          each connects, registers (add) and enters a server-side barrier of
 *          N. all-done = last client out - go. "pre": connected before go.
 *   stall  K clients loop set+get; halfway through, a raw socket sends half a
 *          frame and holds it; reports the others' latency before / during.
 *
 * The server is the real cohort-store binary in its own process. Output:
 * one JSON object per line on stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "cohort.h"
#include "store/backend.h"

#define JOB "bench"
#define TOKEN "bench-token-0123456789abcdef"
#define MAXLAT 20000

static const char *store_bin = NULL;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void die(const char *what, const char *detail)
{
    fprintf(stderr, "store_bench: %s: %s\n", what, detail);
    exit(1);
}

/* ---- server process ---- */

static pid_t server_pid;
static char server_addr[64];

static void server_start(void)
{
    char tok[] = "/tmp/store_bench_tokXXXXXX";
    int tfd = mkstemp(tok);
    if (tfd < 0)
        die("mkstemp", strerror(errno));
    dprintf(tfd, "%s %s\n", JOB, TOKEN);
    close(tfd);
    int p[2];
    if (pipe(p) < 0)
        die("pipe", strerror(errno));
    fflush(NULL);
    server_pid = fork();
    if (server_pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        execl(store_bin, store_bin, "--listen", "127.0.0.1:0", "--token-file", tok,
              "--max-memory", "4G", (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char line[128];
    size_t n = 0;
    while (n < sizeof line - 1 && read(p[0], line + n, 1) == 1 && line[n] != '\n')
        n++;
    line[n] = 0;
    close(p[0]);
    unlink(tok);
    char *c = strrchr(line, ':');
    if (strncmp(line, "listening on ", 13) || !c)
        die("cohort-store did not start", line);
    snprintf(server_addr, sizeof server_addr, "127.0.0.1:%s", c + 1);
}

static long server_rss_kb(void)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/status", (int)server_pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long rss = -1;
    while (fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "VmHWM:", 6))
            rss = strtol(buf + 6, NULL, 10);
    fclose(f);
    return rss;
}

/* CPU seconds (user + system) a process has used so far. */
static double proc_cpu_s(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[2048];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    /* fields after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt
     * cmajflt utime stime */
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double children_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void server_stop(void)
{
    kill(server_pid, SIGTERM);
    waitpid(server_pid, NULL, 0);
}

static cohort_store *client(void)
{
    cohort_store *s = NULL;
    if (coh_store_connect_gen(&s, server_addr, JOB, TOKEN, 1, 60000) != COHORT_OK)
        die("connect", coh_tls_err()->msg);
    cohort_store_set_timeout(s, 600000);
    return s;
}

/* ---- percentiles (the Python script's definition) ---- */

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *xs, size_t n, double p)
{
    if (!n)
        return NAN;
    long k = lround(p / 100.0 * (double)(n - 1));
    return xs[k < 0 ? 0 : (size_t)k >= n ? n - 1 : (size_t)k];
}

/* ---- throughput ---- */

typedef struct tp_res {
    long ops;
    double elapsed;
    int nlat;
} tp_res;

typedef struct tp_args {
    const char *op;
    size_t vsize;
    double duration;
} tp_args;

static void tp_child(int cid, const void *arg, int fd_ready, int fd_go, int fd_out)
{
    const char *op = ((const tp_args *)arg)->op;
    size_t vsize = ((const tp_args *)arg)->vsize;
    double duration = ((const tp_args *)arg)->duration;
    cohort_store *s = client();
    char *val = malloc(vsize ? vsize : 1);
    for (size_t i = 0; i < vsize; i++)
        val[i] = (char)(i * 31 + cid);
    int nk = vsize < 65536 ? 32 : 2;
    char keys[32][32];
    for (int i = 0; i < nk; i++)
        snprintf(keys[i], sizeof keys[i], "k%d_%d", cid, i);
    if (!strcmp(op, "get"))
        for (int i = 0; i < nk; i++)
            if (cohort_store_set(s, keys[i], strlen(keys[i]), val, vsize))
                die("preset", cohort_store_last_error(s));
    size_t cap = 1 << 16, n = 0;
    double *lat = malloc(cap * sizeof *lat);
    char b = 1;
    if (write(fd_ready, &b, 1) != 1 || read(fd_go, &b, 1) < 0)
        die("sync", strerror(errno));
    double t0 = now_s(), end = t0 + duration;
    int kind = !strcmp(op, "set") ? 0 : !strcmp(op, "get") ? 1 : !strcmp(op, "add") ? 2 : 3;
    for (;;) {
        double a = now_s();
        cohort_status st;
        const char *k = keys[n % (size_t)nk];
        if (kind == 0) {
            st = cohort_store_set(s, k, strlen(k), val, vsize);
        } else if (kind == 1) {
            void *v;
            size_t vl;
            st = cohort_store_get(s, k, strlen(k), &v, &vl, -1);
            free(v);
        } else if (kind == 2) {
            int64_t r;
            st = cohort_store_add(s, "ctr", 3, 1, &r);
        } else {
            st = cohort_store_set_nowait(s, k, strlen(k), val, vsize);
        }
        if (st != COHORT_OK)
            die(op, cohort_store_last_error(s));
        double bt = now_s();
        if (n == cap)
            lat = realloc(lat, (cap *= 2) * sizeof *lat);
        lat[n++] = bt - a;
        if (bt >= end)
            break;
    }
    /* set_nowait: count what the server applied (TCPStore's set is timed
     * the same way: its run ends with one round trip) */
    if (kind == 3 && cohort_store_flush(s) != COHORT_OK)
        die("flush", cohort_store_last_error(s));
    double el = now_s() - t0;
    /* subsample to bound what goes through the pipe, like the Python side */
    int m = n > MAXLAT ? MAXLAT : (int)n;
    double *sub = malloc((size_t)m * sizeof *sub);
    for (int i = 0; i < m; i++)
        sub[i] = lat[(size_t)((double)i * (double)n / m)];
    tp_res r = {.ops = (long)n, .elapsed = el, .nlat = m};
    if (write(fd_out, &r, sizeof r) != sizeof r ||
        write(fd_out, sub, (size_t)m * sizeof *sub) != (ssize_t)((size_t)m * sizeof *sub))
        die("result pipe", strerror(errno));
    cohort_store_close(s);
    _exit(0);
}

static int read_full(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(fd, c, n);
        if (r <= 0)
            return -1;
        c += r;
        n -= (size_t)r;
    }
    return 0;
}

/* nc client processes, each with its own result pipe (outs[i]) and all
 * with one ready and one go pipe: client i runs child(i, arg, fd_ready,
 * fd_go, fd_out), which writes a byte to fd_ready, waits for fd_go to close,
 * writes its results and _exits. clients_start returns once every client is
 * ready; clients_go starts them all at once; clients_end reaps and frees. */
typedef struct clients {
    int n, rp[2], gp[2], *outs;
    pid_t *kids;
} clients;

static void clients_start(clients *c, int nc, void (*child)(int, const void *, int, int, int),
                          const void *arg)
{
    c->n = nc;
    if (pipe(c->rp) || pipe(c->gp))
        die("pipe", strerror(errno));
    c->outs = calloc((size_t)nc, sizeof *c->outs);
    c->kids = calloc((size_t)nc, sizeof *c->kids);
    fflush(NULL);
    for (int i = 0; i < nc; i++) {
        int op_[2];
        if (pipe(op_))
            die("pipe", strerror(errno));
        c->kids[i] = fork();
        if (c->kids[i] < 0)
            die("fork", strerror(errno));
        if (c->kids[i] == 0) {
            close(op_[0]);
            close(c->gp[1]);
            child(i, arg, c->rp[1], c->gp[0], op_[1]);
        }
        close(op_[1]);
        c->outs[i] = op_[0];
    }
    for (int i = 0; i < nc; i++) {
        char b;
        if (read(c->rp[0], &b, 1) != 1)
            die("ready", "a client failed to start");
    }
}

static void clients_go(clients *c)
{
    close(c->gp[1]); /* every child's read() returns */
}

static void clients_end(clients *c)
{
    for (int i = 0; i < c->n; i++) {
        waitpid(c->kids[i], NULL, 0);
        close(c->outs[i]);
    }
    free(c->outs);
    free(c->kids);
    close(c->rp[0]);
    close(c->rp[1]);
    close(c->gp[0]);
}

static void run_tp(int nc, const char *op, size_t vsize, double duration)
{
    server_start();
    clients c;
    clients_start(&c, nc, tp_child, &(tp_args){op, vsize, duration});
    int *outs = c.outs;
    double srv_cpu0 = proc_cpu_s(server_pid);
    double kid_cpu0 = children_cpu_s();
    clients_go(&c);
    long total = 0;
    double wall = 0;
    double *lats = malloc((size_t)nc * MAXLAT * sizeof *lats);
    size_t nl = 0;
    for (int i = 0; i < nc; i++) {
        tp_res r;
        if (read_full(outs[i], &r, sizeof r) || read_full(outs[i], lats + nl, (size_t)r.nlat * 8))
            die("result", "client died");
        nl += (size_t)r.nlat;
        total += r.ops;
        if (r.elapsed > wall)
            wall = r.elapsed;
    }
    double srv_cpu = proc_cpu_s(server_pid) - srv_cpu0;
    clients_end(&c);
    /* children's CPU includes their connect and preset before "go" (small) */
    double kid_cpu = children_cpu_s() - kid_cpu0;
    long rss = server_rss_kb();
    server_stop();
    qsort(lats, nl, sizeof *lats, cmpd);
    printf("{\"impl\": \"cohort\", \"kind\": \"tp\", \"clients\": %d, \"op\": \"%s\", "
           "\"value_bytes\": %zu, \"duration_s\": %.3f, \"ops\": %ld, \"ops_per_s\": %.1f, "
           "\"MB_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f, "
           "\"server_hwm_kb\": %ld, \"server_cpu_us_per_op\": %.2f, \"client_cpu_us_per_op\": %.2f}\n",
           nc, op, vsize, wall, total, (double)total / wall, (double)total * (double)vsize / wall / 1e6,
           pct(lats, nl, 50) * 1e6, pct(lats, nl, 99) * 1e6, lats[nl - 1] * 1e6, rss,
           srv_cpu * 1e6 / (double)total, kid_cpu * 1e6 / (double)total);
    fflush(stdout);
    free(lats);
}

static void usage(void);

/* ---- rendezvous ---- */

typedef struct rd_res {
    double t_start, t_conn, t_end;
    double cpu_s; /* this client's CPU from "go" to through the barrier */
} rd_res;

static double self_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void rd_child(int n, int round, int pre, int fd_ready, int fd_go, int fd_out, int fd_hold)
{
    cohort_store *s = pre ? client() : NULL;
    char b = 1;
    if (write(fd_ready, &b, 1) != 1 || read(fd_go, &b, 1) < 0)
        _exit(2);
    rd_res r;
    r.t_start = now_s();
    double cpu0 = self_cpu_s();
    if (!s)
        s = client();
    r.t_conn = now_s();
    char name[32];
    int64_t cnt;
    snprintf(name, sizeof name, "init/%d", round);
    if (cohort_store_add(s, name, strlen(name), 1, &cnt) != COHORT_OK)
        die("register", cohort_store_last_error(s));
    snprintf(name, sizeof name, "barrier/%d", round);
    if (cohort_store_barrier(s, name, n, 600000) != COHORT_OK)
        die("barrier", cohort_store_last_error(s));
    r.t_end = now_s();
    r.cpu_s = self_cpu_s() - cpu0;
    if (write(fd_out, &r, sizeof r) != sizeof r)
        _exit(3);
    cohort_store_close(s);
    /* Exit only once every client has reported: a process exit (address
     * space teardown, ~0.5 ms of CPU here) must not compete with the
     * clients still being woken by the barrier. The Python clients do the
     * same (they park for the next round). */
    if (read(fd_hold, &b, 1) < 0)
        _exit(4);
    _exit(0);
}

static void run_rdzv(int n, int rounds, int pre)
{
    if (rounds < 1 || rounds > 64)
        usage();
    server_start();
    double *done = calloc((size_t)rounds, sizeof *done);
    double fork_ms = 0, wake_ms = 0, conn_ms = 0, kid_cpu = 0, win_cpu = 0;
    double srv_cpu0 = proc_cpu_s(server_pid);
    for (int rd = 0; rd < rounds; rd++) {
        int rp[2], gp[2], op_[2], hp[2];
        if (pipe(rp) || pipe(gp) || pipe(op_) || pipe(hp))
            die("pipe", strerror(errno));
        pid_t *kids = calloc((size_t)n, sizeof *kids);
        fflush(NULL);
        double tf = now_s();
        for (int i = 0; i < n; i++) {
            kids[i] = fork();
            if (kids[i] < 0)
                die("fork", strerror(errno));
            if (kids[i] == 0) {
                close(gp[1]);
                close(op_[0]);
                close(hp[1]);
                rd_child(n, rd, pre, rp[1], gp[0], op_[1], hp[0]);
            }
        }
        close(op_[1]);
        for (int i = 0; i < n; i++) {
            char b;
            if (read(rp[0], &b, 1) != 1)
                die("ready", "client failed");
        }
        fork_ms += (now_s() - tf) * 1e3;
        double kid0 = children_cpu_s();
        /* let every child block in read(go) before the clock starts */
        struct timespec ts = {0, 200 * 1000000};
        nanosleep(&ts, NULL);
        double t_go = now_s();
        close(gp[1]);
        double last = 0, wake = 0, conn = 0, cpu = 0;
        for (int i = 0; i < n; i++) {
            rd_res r;
            if (read_full(op_[0], &r, sizeof r))
                die("result", "client died");
            if (r.t_end > last)
                last = r.t_end;
            cpu += r.cpu_s;
            if (r.t_start - t_go > wake)
                wake = r.t_start - t_go;
            if (r.t_conn - t_go > conn)
                conn = r.t_conn - t_go;
        }
        close(hp[1]); /* every client reported: let them exit */
        close(hp[0]);
        wake_ms += wake * 1e3 / rounds;
        win_cpu += cpu / n / rounds;
        conn_ms += conn * 1e3 / rounds;
        for (int i = 0; i < n; i++)
            waitpid(kids[i], NULL, 0);
        kid_cpu += children_cpu_s() - kid0;
        done[rd] = (last - t_go) * 1e3;
        close(rp[0]);
        close(rp[1]);
        close(gp[0]);
        close(op_[0]);
        free(kids);
    }
    double srv_cpu = proc_cpu_s(server_pid) - srv_cpu0;
    server_stop();
    double sorted[64];
    memcpy(sorted, done, (size_t)rounds * sizeof *done);
    qsort(sorted, (size_t)rounds, sizeof *sorted, cmpd);
    double med = rounds % 2 ? sorted[rounds / 2]
                            : (sorted[rounds / 2 - 1] + sorted[rounds / 2]) / 2;
    printf("{\"impl\": \"cohort\", \"kind\": \"rdzv\", \"clients\": %d, \"mode\": \"%s\", "
           "\"rounds\": %d, \"median_all_done_ms\": %.2f, \"max_all_done_ms\": %.2f, "
           "\"fork_ms\": %.1f, \"last_woken_ms\": %.2f, \"last_connected_ms\": %.2f, "
           "\"client_cpu_us_each\": %.1f, \"client_cpu_us_go_to_through\": %.1f, "
           "\"server_cpu_us_per_client\": %.1f}\n",
           n, pre ? "preconnected barrier" : "connect+register+barrier", rounds, med,
           sorted[rounds - 1], fork_ms / rounds, wake_ms, conn_ms, kid_cpu * 1e6 / rounds / n, win_cpu * 1e6,
           srv_cpu * 1e6 / rounds / n);
    fflush(stdout);
    free(done);
}

/* ---- partial frame held by one connection ---- */

static void stall_child(int cid, const void *arg, int fd_ready, int fd_go, int fd_out)
{
    double phase = *(const double *)arg;
    cohort_store *s = client();
    char k[32];
    snprintf(k, sizeof k, "s%d", cid);
    size_t cap = 1 << 18, n[2] = {0, 0};
    double *lat[2] = {malloc(cap * 8), malloc(cap * 8)};
    char b = 1;
    if (write(fd_ready, &b, 1) != 1 || read(fd_go, &b, 1) < 0)
        _exit(2);
    double t0 = now_s();
    for (;;) {
        double a = now_s();
        int ph = a - t0 < phase ? 0 : 1;
        if (a - t0 >= 2 * phase)
            break;
        void *v = NULL;
        size_t vl;
        if (cohort_store_set(s, k, strlen(k), "0123456789abcdef", 16) ||
            cohort_store_get(s, k, strlen(k), &v, &vl, -1))
            die("stall op", cohort_store_last_error(s));
        free(v);
        if (n[ph] < cap)
            lat[ph][n[ph]++] = now_s() - a;
    }
    for (int ph = 0; ph < 2; ph++) {
        int m = n[ph] > MAXLAT ? MAXLAT : (int)n[ph];
        tp_res r = {.ops = (long)n[ph], .elapsed = phase, .nlat = m};
        if (write(fd_out, &r, sizeof r) != sizeof r)
            _exit(3);
        for (int i = 0; i < m; i++) {
            double x = lat[ph][(size_t)((double)i * (double)n[ph] / m)];
            if (write(fd_out, &x, 8) != 8)
                _exit(3);
        }
    }
    cohort_store_close(s);
    _exit(0);
}

static void run_stall(int nc, double phase)
{
    server_start();
    clients c;
    clients_start(&c, nc, stall_child, &phase);
    int *outs = c.outs;
    /* The staller sends 10 bytes of a 12-byte header and holds them: the
     * server cannot even tell who it is yet. */
    int port = atoi(strrchr(server_addr, ':') + 1);
    int sfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    double t_go = now_s();
    clients_go(&c);
    struct timespec ts = {(time_t)phase, (long)((phase - (double)(time_t)phase) * 1e9)};
    nanosleep(&ts, NULL);
    if (connect(sfd, (struct sockaddr *)&a, sizeof a) < 0)
        die("staller connect", strerror(errno));
    uint8_t half[12] = {'C', 'S', 1, 0x02, 0, 0, 0, 0, 100, 0, 0, 0};
    if (write(sfd, half, 10) != 10)
        die("staller write", strerror(errno));
    double *lats[2];
    size_t nl[2] = {0, 0};
    long ops[2] = {0, 0};
    for (int ph = 0; ph < 2; ph++)
        lats[ph] = malloc((size_t)nc * MAXLAT * 8);
    for (int i = 0; i < nc; i++)
        for (int ph = 0; ph < 2; ph++) {
            tp_res r;
            if (read_full(outs[i], &r, sizeof r) ||
                read_full(outs[i], lats[ph] + nl[ph], (size_t)r.nlat * 8))
                die("result", "client died");
            nl[ph] += (size_t)r.nlat;
            ops[ph] += r.ops;
        }
    (void)t_go;
    clients_end(&c);
    close(sfd);
    server_stop();
    for (int ph = 0; ph < 2; ph++) {
        qsort(lats[ph], nl[ph], 8, cmpd);
        printf("{\"impl\": \"cohort\", \"kind\": \"stall\", \"clients\": %d, \"phase\": \"%s\", "
               "\"ops_per_s\": %.1f, \"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
               nc, ph ? "partial frame held" : "normal", (double)ops[ph] / phase,
               pct(lats[ph], nl[ph], 50) * 1e6, pct(lats[ph], nl[ph], 99) * 1e6,
               lats[ph][nl[ph] - 1] * 1e6);
    }
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: store_bench --store-bin PATH tp CLIENTS set|set_nowait|get|add VALUE_BYTES SECONDS\n"
            "       store_bench --store-bin PATH rdzv CLIENTS ROUNDS [pre]\n"
            "       store_bench --store-bin PATH stall CLIENTS SECONDS_PER_PHASE\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc < 4 || strcmp(argv[1], "--store-bin"))
        usage();
    store_bin = argv[2];
    argv += 2;
    argc -= 2;
    signal(SIGPIPE, SIG_IGN);
    /* 1024 clients: the server and this process need the descriptors */
    struct rlimit rl = {65536, 65536};
    setrlimit(RLIMIT_NOFILE, &rl);
    if (!strcmp(argv[1], "tp") && argc == 6)
        run_tp(atoi(argv[2]), argv[3], (size_t)atol(argv[4]), atof(argv[5]));
    else if (!strcmp(argv[1], "rdzv") && (argc == 4 || argc == 5))
        run_rdzv(atoi(argv[2]), atoi(argv[3]), argc == 5 && !strcmp(argv[4], "pre"));
    else if (!strcmp(argv[1], "stall") && argc == 4)
        run_stall(atoi(argv[2]), atof(argv[3]));
    else
        usage();
    return 0;
}
