/* support.c - rank spawner and helpers for multi-process tests. */
#include "support.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

double cht_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int cht_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

const char *const cht_transports[CHT_N_TRANSPORTS] = {"auto", "tcp"};

int cht_run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    /* Each test in its own process even under CK_FORK=no: tcase timeouts
     * and a crash charged to the right test depend on it. */
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

int cht_pin_one_cpu(void)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return -1;
    int c = 0;
    while (c < CPU_SETSIZE && !CPU_ISSET(c, &s))
        c++;
    CPU_ZERO(&s);
    CPU_SET(c, &s);
    return sched_setaffinity(0, sizeof s, &s);
}

double cht_time_scale(void)
{
    const char *e = getenv("CK_TIMEOUT_MULTIPLIER");
    double m = e ? strtod(e, NULL) : 1.0;
    return m > 1.0 ? m : 1.0;
}

/* Whether 127.0.0.1:port can be bound now (0: the kernel's pick), and which. */
static int bind_probe(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &l) < 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* A port a listener binds later (MASTER_PORT; a rank that hosts the store
 * after a delay). Picked below the kernel's ephemeral range, so that no
 * connect() of this or a concurrent test takes it as its local port in the
 * meantime: a port from bind(0) lies in that range, and test_waits'
 * init_reports_missing_store, whose rank 0 binds the store 6.5 s after the
 * pick, failed once under TSan with rank 0 exiting and rank 1 left waiting
 * for a store that never came. Random in [low / 2, low), bindable at the
 * pick; the kernel's pick if none is. */
int cht_free_port(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    if (lo >= 2048) {
        unsigned seed = (unsigned)getpid() ^ (unsigned)time(NULL) ^ (unsigned)(uintptr_t)&lo;
        for (int i = 0; i < 64; i++) {
            int port = lo / 2 + (int)(rand_r(&seed) % (unsigned)(lo - lo / 2));
            if (bind_probe(port) == port)
                return port;
        }
    }
    return bind_probe(0);
}

cohort_store_server *cht_store_start(const char *job, const char *token, char *addr,
                                     size_t addrlen)
{
    cohort_store_server_opts o;
    memset(&o, 0, sizeof o);
    o.bind_addr = "127.0.0.1";
    o.job_ids = &job;
    o.tokens = &token;
    o.n_jobs = 1;
    cohort_store_server *s = NULL;
    if (cohort_store_server_start(&s, &o) != COHORT_OK)
        return NULL;
    snprintf(addr, addrlen, "127.0.0.1:%d", cohort_store_server_port(s));
    return s;
}

/* Forks a process hosting a store server for one job; returns its pid and
 * writes the address. The server lives until *stop_fd is closed. */
static pid_t store_process(const char *job, const char *token, char *addr, size_t addrlen,
                           int *stop_fd)
{
    int ready[2], stop[2];
    if (pipe(ready) < 0)
        return -1;
    if (pipe(stop) < 0) {
        close(ready[0]), close(ready[1]);
        return -1;
    }
    fflush(NULL);
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(ready[0]);
        close(stop[1]);
        char a[128] = "";
        cohort_store_server *sv = cht_store_start(job, token, a, sizeof a);
        ssize_t w = write(ready[1], a, strlen(a) + 1);
        (void)w;
        close(ready[1]);
        char c;
        while (read(stop[0], &c, 1) > 0)
            ;
        if (sv)
            cohort_store_server_stop(sv);
        _exit(0);
    }
    close(ready[1]);
    close(stop[0]);
    char a[128] = "";
    ssize_t n = read(ready[0], a, sizeof a - 1);
    close(ready[0]);
    if (n <= 1) {
        close(stop[1]);
        waitpid(p, NULL, 0);
        return -1;
    }
    a[n] = 0;
    snprintf(addr, addrlen, "%s", a);
    *stop_fd = stop[1];
    return p;
}

void cht_set_env(const char *extra)
{
    if (!extra)
        return;
    char *dup = strdup(extra), *save = NULL;
    for (char *kv = strtok_r(dup, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            continue;
        *eq = 0;
        setenv(kv, eq + 1, 1);
    }
    free(dup);
}

int cht_spawn(int n, int deadline_ms, int resume_stopped, int (*child)(int, void *),
              int (*parent)(void *), void *arg, cht_result *res)
{
    res->n = n;
    memset(res->status, 0, sizeof res->status);
    memset(res->hung, 0, sizeof res->hung);
    res->parent = 0;
    res->elapsed_ms = 0;
    if (n < 1 || n > 64)
        return -1;
    fflush(NULL);
    pid_t pids[64];
    double t0 = cht_now_ms();
    for (int r = 0; r < n; r++) {
        pid_t p = fork();
        if (p < 0) {
            fprintf(stderr, "cht_spawn: fork rank %d: %s\n", r, strerror(errno));
            for (int k = 0; k < r; k++) {
                kill(pids[k], SIGKILL);
                waitpid(pids[k], NULL, 0);
            }
            return -1;
        }
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            int rc = child(r, arg);
            fflush(NULL);
            _exit(rc);
        }
        pids[r] = p;
    }
    if (parent)
        res->parent = parent(arg);
    double t_wait = cht_now_ms(); /* the deadline counts from here */
    double deadline = deadline_ms > 0 ? deadline_ms : 60000;
    int left = n;
    int done[64] = {0}, stopped[64] = {0}, resumed = 0;
    while (left > 0) {
        int st;
        pid_t p = waitpid(-1, &st, WNOHANG | (resume_stopped ? WUNTRACED : 0));
        if (p > 0 && WIFSTOPPED(st)) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p)
                    stopped[r] = 1;
            continue;
        }
        if (resume_stopped && !resumed) {
            int nstopped = 0;
            for (int r = 0; r < n; r++)
                nstopped += stopped[r] && !done[r];
            if (nstopped && nstopped == left) {
                for (int r = 0; r < n; r++)
                    if (stopped[r] && !done[r])
                        kill(pids[r], SIGCONT);
                resumed = 1;
            }
        }
        if (p > 0) {
            for (int r = 0; r < n; r++)
                if (pids[r] == p && !done[r]) {
                    done[r] = 1;
                    left--;
                    res->status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                }
            continue;
        }
        if (cht_now_ms() - t_wait > deadline) {
            for (int r = 0; r < n; r++)
                if (!done[r]) {
                    res->hung[r] = 1;
                    kill(pids[r], SIGKILL);
                }
            deadline = 1e12; /* killed: reap them */
            continue;
        }
        /* Reaping cadence only; not synchronisation between ranks. */
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    res->elapsed_ms = cht_now_ms() - t0;
    for (int r = 0; r < n; r++)
        if (res->status[r] || res->hung[r])
            return 1;
    return 0;
}

/* What cht_run_ranks's children need to set up before fn. */
typedef struct run_ctx {
    const cht_opts *o;
    int (*fn)(int, void *);
    void *arg;
    const char *job, *token, *store_addr;
    int port;
} run_ctx;

static int run_child(int r, void *p)
{
    const run_ctx *c = p;
    const cht_opts *o = c->o;
    if (o->netns && o->netns[r]) {
        char path[256];
        snprintf(path, sizeof path, "/var/run/netns/%s", o->netns[r]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
            fprintf(stderr, "rank %d: cannot enter netns %s\n", r, o->netns[r]);
            return 97;
        }
        close(fd);
    }
    char b[32];
    snprintf(b, sizeof b, "%d", r);
    setenv("RANK", b, 1);
    setenv("LOCAL_RANK", b, 1);
    snprintf(b, sizeof b, "%d", o->nranks);
    setenv("WORLD_SIZE", b, 1);
    setenv("LOCAL_WORLD_SIZE", b, 1);
    setenv("COHORT_JOB_ID", c->job, 1);
    setenv("COHORT_TOKEN", c->token, 1);
    if (c->store_addr) {
        char url[160];
        snprintf(url, sizeof url, "tcp://%s", c->store_addr);
        setenv("COHORT_STORE", url, 1);
    } else {
        setenv("MASTER_ADDR", o->master_addr ? o->master_addr : "127.0.0.1", 1);
        snprintf(b, sizeof b, "%d", c->port);
        setenv("MASTER_PORT", b, 1);
    }
    if (o->transport)
        setenv("COHORT_TRANSPORT", o->transport, 1);
    if (o->generation) {
        snprintf(b, sizeof b, "%d", o->generation);
        setenv("COHORT_GENERATION", b, 1);
    }
    cht_set_env(o->extra_env);
    return c->fn(r, c->arg);
}

int cht_run_ranks(const cht_opts *o, int (*fn)(int, void *), void *arg, cht_result *res)
{
    memset(res, 0, sizeof *res);
    int n = o->nranks;
    if (n < 1 || n > 64)
        return -1;
    res->n = n;
    char job[64], token[65];
    snprintf(job, sizeof job, "test-%d-%ld", (int)getpid(),
             (long)(cht_now_ms() * 1000) % 1000000000);
    unsigned char rnd[16];
    FILE *ur = fopen("/dev/urandom", "rb");
    if (!ur || fread(rnd, 1, sizeof rnd, ur) != sizeof rnd) {
        if (ur)
            fclose(ur);
        return -1;
    }
    fclose(ur);
    for (int i = 0; i < 16; i++)
        snprintf(token + 2 * i, 3, "%02x", rnd[i]);
    run_ctx c = {.o = o, .fn = fn, .arg = arg, .job = job, .token = token};
    pid_t srv_pid = -1;
    int srv_stop = -1;
    if (o->store_mode == CHT_STORE_PARENT) {
        /* The store runs in its own process, forked before any thread:
         * forking ranks from a process that runs a server thread can
         * deadlock a child in the allocator (seen under ASan). */
        srv_pid = store_process(job, token, res->store_addr, sizeof res->store_addr, &srv_stop);
        if (srv_pid < 0)
            return -1;
        c.store_addr = res->store_addr;
    } else {
        c.port = cht_free_port();
    }
    int rc = cht_spawn(n, o->deadline_ms, o->resume_stopped, run_child, NULL, &c, res);
    if (srv_pid > 0) {
        close(srv_stop); /* EOF: the store process stops its server and exits */
        waitpid(srv_pid, NULL, 0);
    }
    return rc;
}

void cht_assert_all_ok(const cht_result *r)
{
    char msg[1024] = "";
    size_t pos = 0;
    int bad = 0;
    for (int i = 0; i < r->n; i++)
        if (r->status[i] || r->hung[i]) {
            bad = 1;
            pos += (size_t)snprintf(msg + pos, sizeof msg - pos, " rank %d: %s %d;", i,
                                    r->hung[i] ? "hung, killed" : "exit", r->status[i]);
            if (pos >= sizeof msg)
                break;
        }
    ck_assert_msg(!bad, "ranks failed:%s", msg);
}

void cht_clear_launch_env(void)
{
    static const char *const pfx[] = {"RANK=", "WORLD_SIZE=", "LOCAL_", "MASTER_", "COHORT_",
                                      "SLURM_", "OMPI_", "PMI_", "PMIX_", "MPI_LOCAL", NULL};
    extern char **environ;
    for (;;) {
        int again = 0;
        for (char **e = environ; *e && !again; e++) {
            if (!strncmp(*e, "COHORT_BUILD_DIR=", 17) || !strncmp(*e, "COHORT_SOURCE_DIR=", 18))
                continue;
            for (int i = 0; pfx[i]; i++)
                if (!strncmp(*e, pfx[i], strlen(pfx[i]))) {
                    char name[256];
                    snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                    unsetenv(name); /* environ changed: scan again */
                    again = 1;
                    break;
                }
        }
        if (!again)
            break;
    }
}

cohort_group *cht_launched_init(void)
{
    cohort_group *g = NULL;
    cohort_status st = cohort_init(&g);
    if (st != COHORT_OK) {
        fprintf(stderr, "init: %s: %s\n", cohort_status_name(st), cohort_last_error(NULL));
        return NULL;
    }
    return g;
}

int cht_launched_sum_run(cohort_group *g)
{
    int r = cohort_rank(g), n = cohort_size(g);
    long v[256], sum[256];
    for (int i = 0; i < 256; i++)
        v[i] = r + i;
    cohort_status st = cohort_all_reduce(g, v, sum, 256, COHORT_INT64, COHORT_SUM);
    int good = st == COHORT_OK;
    for (int i = 0; good && i < 256; i++)
        good = sum[i] == (long)n * (n - 1) / 2 + (long)n * i;
    /* the barrier: every rank did what it did before this call while all of
     * them (and the launcher) were alive */
    if (st == COHORT_OK)
        st = cohort_barrier(g);
    if (st == COHORT_OK)
        st = cohort_finalize(g);
    return good && st == COHORT_OK;
}

uint64_t cht_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

double cht_value(int rank, size_t i) { return (double)((rank * 7 + (int)(i % 13)) % 11) - 3.0; }

const char *cht_tool(const char *name)
{
    static _Thread_local char path[1024];
    const char *b = getenv("COHORT_BUILD_DIR");
    snprintf(path, sizeof path, "%s/tools/%s/%s", b ? b : ".", name, name);
    return path;
}

int cht_count_dev_shm(void)
{
    DIR *d = opendir("/dev/shm");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* ---- network-namespace clusters ---- */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0 && !strstr(cmd, "2>/dev/null"))
        fprintf(stderr, "test support: '%s' failed (status %d)\n", cmd, rc);
    return rc == 0 ? 0 : -1;
}

/* The cluster this process built (one at a time): its base ("cohcl"),
 * its real name prefix ("cohcl<pid>") and the process that owns it. */
static char netns_base[32];
static char netns_prefix[64];
static int netns_hosts;

static pid_t netns_owner;

/* "<base><pid>": the owner's pid when base is the cluster built here (a
 * forked rank or test child names its parent's namespaces), else ours. */
static const char *real_prefix(const char *base)
{
    static _Thread_local char p[64];
    pid_t pid = netns_owner && !strcmp(base, netns_base) ? netns_owner : getpid();
    snprintf(p, sizeof p, "%s%ld", base, (long)pid);
    return p;
}

const char *cht_netns_name(const char *base, int host)
{
    static _Thread_local char name[4][64];
    static _Thread_local int k;
    char *out = name[k++ % 4];
    if (host < 0)
        snprintf(out, sizeof name[0], "%sh", real_prefix(base));
    else
        snprintf(out, sizeof name[0], "%sn%d", real_prefix(base), host);
    return out;
}

static void netns_destroy_prefix(const char *prefix, int hosts)
{
    for (int i = 0; i < hosts; i++)
        sh("ip netns del %sn%d 2>/dev/null", prefix, i);
    sh("ip netns del %sh 2>/dev/null", prefix);
}

static void netns_atexit(void)
{
    /* Only the process that built the cluster tears it down: rank
     * processes forked from it inherit this handler and must not. */
    if (netns_hosts && getpid() == netns_owner)
        netns_destroy_prefix(netns_prefix, netns_hosts);
}

const char *cht_netns_ip(int net, int host)
{
    static _Thread_local char ip[32];
    snprintf(ip, sizeof ip, "10.%d.0.%d", net, host + 1);
    return ip;
}

void cht_netns_destroy(const char *base, int hosts)
{
    netns_destroy_prefix(real_prefix(base), hosts);
    if (!strcmp(base, netns_base) && getpid() == netns_owner)
        netns_hosts = 0;
}

int cht_netns_stale(const char *base, int remove)
{
    DIR *d = opendir("/run/netns");
    if (!d)
        return 0;
    size_t bl = strlen(base);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (strncmp(nm, base, bl) != 0)
            continue;
        char *end;
        errno = 0;
        long pid = strtol(nm + bl, &end, 10);
        /* "<base><pid>h" or "<base><pid>n<i>"; anything else is not ours */
        if (end == nm + bl || errno || pid <= 0 || (*end != 'h' && *end != 'n'))
            continue;
        if (*end == 'h' ? end[1] != 0 : (end[1] < '0' || end[1] > '9'))
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* its run is alive (or not ours to judge) */
        n++;
        if (remove)
            sh("ip netns del %s 2>/dev/null", nm);
    }
    closedir(d);
    return n;
}

int cht_netns_create(const char *base, int hosts, int net)
{
    /* An interrupted run (SIGKILL, a timeout) left its cluster: its pid
     * is gone, so it is removed; a live run's is never touched. */
    cht_netns_stale(base, 1);
    snprintf(netns_base, sizeof netns_base, "%s", base);
    netns_owner = getpid();
    const char *prefix = real_prefix(base);
    netns_destroy_prefix(prefix, hosts); /* this pid's own leftovers (a reused pid) */
    if (sh("ip netns add %sh", prefix) ||
        sh("ip -n %sh link add br0 type bridge && ip -n %sh link set br0 up", prefix, prefix)) {
        netns_destroy_prefix(prefix, hosts);
        return -1;
    }
    snprintf(netns_prefix, sizeof netns_prefix, "%s", prefix);
    netns_hosts = hosts;
    static int registered;
    if (!registered) {
        atexit(netns_atexit);
        registered = 1;
    }
    for (int i = 0; i < hosts; i++) {
        /* veth names must be short (IFNAMSIZ): eth0 in host i, v<i> in the
         * hub; both live inside this run's namespaces, never in the root
         * one, so runs at once cannot collide on them */
        if (sh("ip netns add %sn%d", prefix, i) ||
            sh("ip -n %sn%d link set lo up", prefix, i) ||
            sh("ip -n %sn%d link add eth0 type veth peer name v%d netns %sh", prefix, i, i,
               prefix) ||
            sh("ip -n %sn%d addr add %s/24 dev eth0", prefix, i, cht_netns_ip(net, i)) ||
            sh("ip -n %sn%d link set eth0 up", prefix, i) ||
            sh("ip -n %sh link set v%d master br0 && ip -n %sh link set v%d up", prefix, i,
               prefix, i)) {
            cht_netns_destroy(base, hosts);
            return -1;
        }
    }
    return 0;
}

int cht_netns_link(const char *base, int host, int down)
{
    const char *prefix = real_prefix(base);
    return sh("ip -n %sh link set v%d %s", prefix, host, down ? "down" : "up");
}
